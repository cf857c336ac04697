"""Task effects integrated out: one fused kernel per likelihood, as a PyTensor Op.

The transfer model gives every task :math:`i` a Gaussian effect :math:`\\theta_i` on the
logit scale, shared by all the (arm, step) groups of rollouts of that task. Sampling the
thousands of effects made NUTS slow and, when a task sd is near zero, put it in a funnel.
Here each task's effect is integrated out numerically, so the sampler sees only the curves
and the sds:

.. math::

    \\log p(y \\mid c, \\sigma_\\theta) = \\sum_i \\log \\int \\prod_{g \\in i}
        p(y_g \\mid c_g + \\theta)\\, N(\\theta; 0, \\sigma_\\theta^2)\\, d\\theta

by adaptive Gauss-Hermite quadrature per task: centred at the mode of the integrand
(Newton steps from 0 for the binomial, Fisher scoring for the Gaussian-on-logit reward),
scaled by the curvature there, ``nodes`` nodes. The value and its gradient in every input
are computed in one pass (numba), so the Op costs a few transcendental functions per group
and node. The gradient holds the quadrature's centre and scale fixed: the integral does not
depend on them (only its quadrature error does), so it is the gradient of the integral to
quadrature accuracy; NUTS stays exact for the value it evaluates, because leapfrog steps
with any position-dependent force are reversible and volume-preserving.

Likelihoods (per group :math:`g`, predictor :math:`x = c_g + \\theta`):

- ``"binomial"``: :math:`k_g x - n_g \\log(1 + e^x)` (``a`` = k, ``b`` = n; the
  coefficient :math:`\\binom{n}{k}` is a constant and left out);
- ``"gaussian"``: graded rewards :math:`y \\sim N(\\operatorname{expit}(x), 1/\\lambda_g)`
  from each group's count, sum and sum of squares (``a`` = n, ``b`` = sum, ``d`` = sum of
  squares, ``prec`` = :math:`\\lambda_g`): :math:`-\\tfrac12 \\lambda_g (d - 2 r b + a r^2)`
  with :math:`r = \\operatorname{expit}(x)` (the :math:`\\log \\lambda` terms do not involve
  :math:`\\theta` and are added by the model).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

KINDS = ("binomial", "gaussian")
#: quadrature nodes per task and steps to the mode. Measured against a 2,001-point grid at
#: 20 posterior draws of the embedded SWE-Gym replica (2,058 tasks): with 5 nodes the summed
#: error is -0.007 (sd 0.001 across draws) for the ungraded part and -0.14 (sd 0.01) for the
#: reward part, 7 nodes -9e-5 / -0.01, 3 nodes -0.45 / -1.8; 3 and 5 steps agree to 1e-6.
#: What matters for the posterior is how much the error varies across draws. Far from the
#: posterior (small, skewed tasks at task sd 1.2, tests/models/test_marginal.py) 5 nodes err by
#: 2e-3 per task on the reward part (the expit saturates: a flat tail), 7 nodes by 6e-4. With 5
#: nodes one NUTS chain on the embedded replica got stuck in warm-up (the gradient holds the
#: quadrature's centre fixed, so a larger quadrature error is a less conservative force); 7 nodes
#: sampled normally.
NODES = 7
NEWTON_STEPS = 3
#: each Newton / scoring step is clipped to this many logits (robust far from the mode)
MAX_STEP = 2.0


def task_segments(task_idx: np.ndarray, n_tasks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order of the groups by task and each task's [start, end) in that order."""
    task_idx = np.asarray(task_idx)
    order = np.argsort(task_idx, kind="stable")
    counts = np.bincount(task_idx, minlength=n_tasks)
    end = np.cumsum(counts)
    return order, (end - counts).astype(np.int64), end.astype(np.int64)


# the one exception to the complexity limit (ARCHITECTURE.md): a fused numba loop, value and
# gradient of every task's integral in one pass; split, it would be several passes over the data
@numba.njit(cache=True, fastmath=True)
def marginal_kernel(  # noqa: C901
    gaussian: bool,
    c: np.ndarray,
    tau: float,
    a: np.ndarray,
    b: np.ndarray,
    d: np.ndarray,
    prec: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    z: np.ndarray,
    w: np.ndarray,
    newton_steps: int,
) -> tuple[float, np.ndarray, float, np.ndarray]:
    """Log marginal likelihood of all tasks and its gradient in ``c``, ``tau`` and ``prec``
    (``z``, ``w``: Gauss-Hermite nodes and weights).

    Cost per group: one ``exp`` per Newton step, then at the nodes ``exp(c + theta + s z_q) =
    exp(c + theta) exp(s z_q)`` by multiplication (one ``exp`` per task and node) and, for the
    binomial, one ``log1p`` per node; every loop runs over all groups (long, branch-light).
    """
    n_groups = c.shape[0]
    n_tasks = start.shape[0]
    nodes = z.shape[0]
    p0 = 1.0 / (tau * tau)
    task = np.empty(n_groups, dtype=np.int64)
    for i in range(n_tasks):
        for j in range(start[i], end[i]):
            task[j] = i
    theta = np.zeros(n_tasks)
    g = np.empty(n_tasks)
    h = np.empty(n_tasks)
    ex = np.empty(n_groups)  # exp(c + theta) of every group at the current theta
    for step in range(newton_steps + 1):
        for i in range(n_tasks):
            g[i] = -p0 * theta[i]
            h[i] = p0
        for j in range(n_groups):
            e = np.exp(c[j] + theta[task[j]])
            ex[j] = e
            e = min(e, 1e300)
            r = e / (1.0 + e)
            if gaussian:
                dr = r * (1.0 - r)
                g[task[j]] += prec[j] * (b[j] - a[j] * r) * dr
                h[task[j]] += prec[j] * a[j] * dr * dr
            else:
                g[task[j]] += a[j] - b[j] * r
                h[task[j]] += b[j] * r * (1.0 - r)
        if step < newton_steps:
            for i in range(n_tasks):
                theta[i] += min(max(g[i] / h[i], -MAX_STEP), MAX_STEP)
    # nodes theta_iq = theta_i + scale_i z_q; ex holds exp(c + theta) at the final theta
    scale = np.empty(n_tasks)
    shift = np.empty((n_tasks, nodes))  # exp(scale_i z_q)
    terms = np.empty((n_tasks, nodes))
    log_norm = -np.log(tau) - 0.5 * np.log(2.0 * np.pi)
    for i in range(n_tasks):
        scale[i] = np.sqrt(2.0 / h[i])
        for q in range(nodes):
            tq = theta[i] + scale[i] * z[q]
            shift[i, q] = np.exp(scale[i] * z[q])
            terms[i, q] = np.log(w[q]) + z[q] * z[q] - 0.5 * p0 * tq * tq + log_norm
    score = np.empty((n_groups, nodes))
    dlam = np.empty((n_groups, nodes)) if gaussian else np.empty((0, nodes))
    # branch-free inner loops over the nodes (e capped at 1e300: r = 1 instead of inf / inf)
    if gaussian:
        for j in range(n_groups):
            i = task[j]
            for q in range(nodes):
                e = min(ex[j] * shift[i, q], 1e300)
                r = e / (1.0 + e)
                sq = d[j] - 2.0 * r * b[j] + a[j] * r * r
                terms[i, q] += -0.5 * prec[j] * sq
                score[j, q] = prec[j] * (b[j] - a[j] * r) * r * (1.0 - r)
                dlam[j, q] = -0.5 * sq
    else:
        for j in range(n_groups):
            i = task[j]
            base = c[j] + theta[i]
            for q in range(nodes):
                e = min(ex[j] * shift[i, q], 1e300)
                terms[i, q] += a[j] * (base + scale[i] * z[q]) - b[j] * np.log1p(e)
                score[j, q] = a[j] - b[j] * (e / (1.0 + e))
    total = 0.0
    dtau = 0.0
    post = np.empty((n_tasks, nodes))  # posterior weight of every node
    for i in range(n_tasks):
        m = terms[i, 0]
        for q in range(1, nodes):
            m = max(m, terms[i, q])
        ssum = 0.0
        for q in range(nodes):
            post[i, q] = np.exp(terms[i, q] - m)
            ssum += post[i, q]
        total += m + np.log(ssum) + np.log(scale[i])
        for q in range(nodes):
            post[i, q] /= ssum
            tq = theta[i] + scale[i] * z[q]
            dtau += post[i, q] * (tq * tq * p0 / tau - 1.0 / tau)
    dc = np.zeros(n_groups)
    dprec = np.zeros(n_groups)
    for j in range(n_groups):
        i = task[j]
        for q in range(nodes):
            dc[j] += post[i, q] * score[j, q]
            if gaussian:
                dprec[j] += post[i, q] * dlam[j, q]
    return total, dc, dtau, dprec


class TaskMarginal(Op):
    """PyTensor Op: ``(c, tau, a, b, d, prec, start, end) -> (logp, dlogp/dc, dlogp/dtau,
    dlogp/dprec)``; see the module docstring. Only the first output is meant to be used; the
    others are its gradient (the Op's ``grad``)."""

    __props__ = ("kind", "nodes", "newton_steps")

    def __init__(self, kind: str, nodes: int = NODES, newton_steps: int = NEWTON_STEPS):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if not 1 <= nodes <= 20:
            raise ValueError(f"nodes must be in 1..20, got {nodes}")
        self.kind, self.nodes, self.newton_steps = kind, int(nodes), int(newton_steps)
        #: Gauss-Hermite nodes and weights (not a prop: derived from ``nodes``)
        self.rule = np.polynomial.hermite.hermgauss(self.nodes)

    def make_node(self, *inputs: Any) -> Apply:
        """Inputs: c, tau, a, b, d, prec, start, end."""
        if len(inputs) != 8:
            raise TypeError(f"TaskMarginal takes 8 inputs, got {len(inputs)}")
        floats = [pt.as_tensor_variable(v).astype("float64") for v in inputs[:6]]
        ints = [pt.as_tensor_variable(v).astype("int64") for v in inputs[6:]]
        c_, tau_ = floats[0], floats[1]
        if c_.ndim != 1 or tau_.ndim != 0:
            raise ValueError("TaskMarginal: c must be a vector and tau a scalar")
        outputs = [pt.dscalar(), pt.dvector(), pt.dscalar(), pt.dvector()]
        return Apply(self, [*floats, *ints], outputs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        c, tau, a, b, d, prec, start, end = inputs
        z, w = self.rule
        value, dc, dtau, dprec = marginal_kernel(
            self.kind == "gaussian", c, float(tau), a, b, d, prec, start, end, z, w, self.newton_steps
        )
        output_storage[0][0] = np.asarray(value)
        output_storage[1][0] = dc
        output_storage[2][0] = np.asarray(dtau)
        output_storage[3][0] = dprec

    def grad(self, inputs: Sequence[Any], output_grads: Sequence[Any]) -> list[Any]:
        # first-order only: the extra outputs are the gradient of the first
        _, dc, dtau, dprec = self.make_node(*inputs).outputs
        g = output_grads[0]
        data = [DisconnectedType()() for _ in range(5)]  # a, b, d, start, end are data
        return [g * dc, g * dtau, data[0], data[1], data[2], g * dprec, data[3], data[4]]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        # every output depends on c, tau and prec (the data inputs carry no gradient)
        return [[i in (0, 1, 5)] * 4 for i in range(8)]


@register_funcify_default_op_cache_key(TaskMarginal)
def _numba_task_marginal(op: TaskMarginal, node: Any = None, **kwargs: Any) -> Any:
    gaussian, steps = op.kind == "gaussian", op.newton_steps
    z, w = op.rule

    @numba.njit
    def task_marginal(c, tau, a, b, d, prec, start, end):
        value, dc, dtau, dprec = marginal_kernel(gaussian, c, tau.item(), a, b, d, prec, start, end, z, w, steps)
        return np.asarray(value), dc, np.asarray(dtau), dprec

    return task_marginal


def log_task_marginal(
    kind: str, c: Any, tau: Any, a: Any, b: Any, d: Any, prec: Any, start: Any, end: Any, *, nodes: int = NODES
) -> Any:
    """The summed log marginal likelihood (a PyTensor scalar) of groups ordered by task."""
    return TaskMarginal(kind, nodes).make_node(c, tau, a, b, d, prec, start, end).outputs[0]
