"""The pass@k group model's log density and gradient as cached numba code.

:func:`saturation.models.learning.build_pass_at_k_model` states the model as a PyMC graph,
which nutpie compiled in every process (about 10 s, against a second of sampling). Here it
is written out with its exact gradient as module-level numba functions with ``cache=True``
(:mod:`saturation.models.kernel_abi`); ``tests/models/test_pass_at_k_kernel.py`` checks the
value (up to a constant) and the gradient against the graph's ``compile_logp`` /
``compile_dlogp`` and the posterior against the graph's.

Notes
-----
Parameters in the graph's order: :math:`a_0, a_1, a_2, g_0, g_1, g_2` (Normal priors),
:math:`\\log\\sigma` (HalfNormal on :math:`\\sigma`, with the Jacobian) and one step effect
:math:`\\epsilon_t \\sim N(0, 1)` per step. With :math:`b = x(x - 1)`,
:math:`\\operatorname{logit}\\mu_t = a_0 + a_1 x_t + a_2 b_t + \\sigma\\epsilon_t`,
:math:`\\log\\kappa_t = g_0 + g_1 x_t + g_2 b_t`, :math:`\\alpha = \\mu\\kappa`, :math:`\\beta =
(1 - \\mu)\\kappa`, each distinct prompt group (step :math:`t`, rollouts :math:`n`, successes
:math:`s`, seen :math:`w` times) adds :math:`w [\\log B(s + \\alpha, n - s + \\beta) - \\log
B(\\alpha, \\beta)]`. Its derivatives: :math:`\\partial_\\alpha = \\psi(s + \\alpha) - \\psi(\\alpha)
+ \\psi(\\kappa) - \\psi(n + \\kappa)`, likewise :math:`\\partial_\\beta`; then
:math:`\\partial_{\\operatorname{logit}\\mu} = \\kappa\\mu(1-\\mu)(\\partial_\\alpha -
\\partial_\\beta)` and :math:`\\partial_{\\log\\kappa} = \\alpha\\partial_\\alpha +
\\beta\\partial_\\beta`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from saturation.models.kernel_abi import C_EXPAND, C_LOGP, block_at, lgamma_digamma, nutpie_model

#: the scalar parameters, in the graph's order (sigma on its log scale)
PARAMS = ("a0", "a1", "a2", "g0", "g1", "g2", "sigma")
#: header: length, steps, groups; then the six Normal priors (mean, sd) and sigma's scale
_HEAD = 3
_PRIORS = 13
_LOG_2PI = math.log(2.0 * math.pi)
_LOG_HALFNORMAL = 0.5 * math.log(2.0 / math.pi)


@numba.njit(cache=True, error_model="numpy")
def logp_grad(theta: np.ndarray, block: np.ndarray, grad: np.ndarray) -> float:
    """The log density at ``theta`` (the six coefficients, log sigma, the step effects) and
    its gradient written into ``grad``; ``block`` is :func:`pack`'s data block."""
    n_steps, n_groups = int(block[1]), int(block[2])
    pri = block[_HEAD : _HEAD + _PRIORS]
    at = _HEAD + _PRIORS
    x = block[at : at + n_steps]
    t_of = block[at + n_steps : at + n_steps + n_groups]
    n = block[at + n_steps + n_groups : at + n_steps + 2 * n_groups]
    s = block[at + n_steps + 2 * n_groups : at + n_steps + 3 * n_groups]
    w = block[at + n_steps + 3 * n_groups : at + n_steps + 4 * n_groups]
    total = 0.0
    for i in range(grad.shape[0]):
        grad[i] = 0.0
    for j in range(6):
        mu, sd = pri[2 * j], pri[2 * j + 1]
        d = (theta[j] - mu) / sd
        total += -0.5 * _LOG_2PI - math.log(sd) - 0.5 * d * d
        grad[j] = -d / sd
    sigma = math.exp(theta[6])
    q = sigma / pri[12]
    total += _LOG_HALFNORMAL - math.log(pri[12]) - 0.5 * q * q + theta[6]
    grad[6] = 1.0 - q * q
    eps = theta[7 : 7 + n_steps]
    mean = np.empty(n_steps)
    kappa = np.empty(n_steps)
    for t in range(n_steps):
        total += -0.5 * _LOG_2PI - 0.5 * eps[t] * eps[t]
        grad[7 + t] = -eps[t]
        b = x[t] * (x[t] - 1.0)
        mean[t] = 1.0 / (1.0 + math.exp(-(theta[0] + theta[1] * x[t] + theta[2] * b + sigma * eps[t])))
        kappa[t] = math.exp(theta[3] + theta[4] * x[t] + theta[5] * b)
    d_logit = np.zeros(n_steps)
    d_logk = np.zeros(n_steps)
    for g in range(n_groups):
        t = int(t_of[g])
        k, m = kappa[t], mean[t]
        al, be = m * k, (1.0 - m) * k
        lg_sa, dg_sa = lgamma_digamma(s[g] + al)
        lg_fb, dg_fb = lgamma_digamma(n[g] - s[g] + be)
        lg_nk, dg_nk = lgamma_digamma(n[g] + k)
        lg_a, dg_a = lgamma_digamma(al)
        lg_b, dg_b = lgamma_digamma(be)
        lg_k, dg_k = lgamma_digamma(k)
        total += w[g] * (lg_sa + lg_fb - lg_nk - lg_a - lg_b + lg_k)
        common = dg_k - dg_nk
        d_al = dg_sa - dg_a + common
        d_be = dg_fb - dg_b + common
        d_logit[t] += w[g] * k * m * (1.0 - m) * (d_al - d_be)
        d_logk[t] += w[g] * (al * d_al + be * d_be)
    for t in range(n_steps):
        b = x[t] * (x[t] - 1.0)
        grad[0] += d_logit[t]
        grad[1] += d_logit[t] * x[t]
        grad[2] += d_logit[t] * b
        grad[3] += d_logk[t]
        grad[4] += d_logk[t] * x[t]
        grad[5] += d_logk[t] * b
        grad[6] += d_logit[t] * sigma * eps[t]
        grad[7 + t] += d_logit[t] * sigma
    return total


@numba.cfunc(C_LOGP, cache=True)
def _c_logp(dim: int, x_: Any, out_: Any, logp_: Any, data_: Any) -> int:  # pragma: no cover - numba
    """nutpie's log-density callback (:data:`~saturation.models.kernel_abi.C_LOGP`)."""
    block = block_at(data_)
    x = numba.carray(x_, (dim,))
    out = numba.carray(out_, (dim,))
    logp = numba.carray(logp_, (1,))
    try:  # as nutpie's own callback: an error far out in the tails is an invalid point
        value = logp_grad(x, block, out)
    except Exception:
        return 1
    logp[0] = value
    for i in range(dim):
        if not math.isfinite(out[i]):
            return 3
    if not math.isfinite(value):
        return 4
    return 0


@numba.cfunc(C_EXPAND, cache=True)
def _c_expand(dim: int, expanded: int, x_: Any, out_: Any, data_: Any) -> int:  # pragma: no cover - numba
    """nutpie's draw-expansion callback: the parameters, sigma on its own scale."""
    x = numba.carray(x_, (dim,))
    out = numba.carray(out_, (expanded,))
    for i in range(dim):
        out[i] = x[i]
    out[6] = math.exp(x[6])
    return 0


def pack(values: dict[str, np.ndarray], priors: Any) -> np.ndarray:
    """The kernel's data block from the graph's data values (``t``, ``n``, ``s``, ``w``,
    ``x``: :func:`~saturation.models.learning.build_pass_at_k_model`) and its
    :class:`~saturation.configs.PassAtKPriors`."""
    normals = [v for mu_sd in priors.normals().values() for v in mu_sd]
    head = [0.0, float(len(values["x"])), float(len(values["t"]))]
    parts = [np.asarray(head + normals + [float(priors.sigma_sd)])]
    parts += [np.asarray(values[name], dtype=np.float64) for name in ("x", "t", "n", "s", "w")]
    block = np.concatenate(parts)
    block[0] = float(block.size)
    return block


def initial_point(block: np.ndarray, seed: Any) -> np.ndarray:
    """A chain's start, as PyMC's initial point for nutpie: the prior means (sigma: its
    scale; the step effects: 0) plus Uniform(-1, 1) jitter."""
    pri = block[_HEAD : _HEAD + _PRIORS]
    start = np.concatenate([pri[0:12:2], [math.log(pri[12])], np.zeros(int(block[1]))])
    return start + np.random.default_rng(seed).uniform(-1.0, 1.0, size=start.size)


def compiled_model(values: dict[str, np.ndarray], priors: Any, steps: Sequence[Any], step_dim: str) -> Any:
    """A nutpie model of the pass@k group model on the cached callbacks. ``None`` when the
    installed nutpie lacks the interface (:func:`~saturation.models.kernel_abi.nutpie_model`)."""
    block = pack(values, priors)
    n_steps = len(steps)
    variables: list[tuple[str, tuple[int, ...], tuple[str, ...]]] = [(p, (), ()) for p in PARAMS]
    variables.append(("eps", (n_steps,), (step_dim,)))
    return nutpie_model(
        logp=_c_logp,
        expand=_c_expand,
        block=block,
        n_dim=len(PARAMS) + n_steps,
        variables=variables,
        coords={step_dim: steps},
        initial_point=lambda seed: initial_point(block, seed),
    )
