"""Task effects integrated out of the transfer model's likelihood.

The transfer model gives every task :math:`i` one effect per part, shared by all the (arm,
step) groups :math:`g` of rollouts of that task (paired design). Sampling thousands of
effects made NUTS slow and, when a task sd is near zero, put it in a funnel. Here each
task's effect is integrated out, so the sampler sees only the curves and the sds.

**Graded reward** (Gaussian, task effect on the reward scale): exact. With group means
:math:`\\mu_g`, per-trial precision :math:`\\lambda_g`, graded count :math:`n_g`, sum
:math:`S_g` and sum of squares :math:`Q_g`,

.. math::

    \\log \\int \\prod_{g \\in i} \\prod_{j} N(y_{gj}; \\mu_g + \\theta, \\lambda_g^{-1})
        N(\\theta; 0, \\tau^2) d\\theta = \\sum_{g \\in i} \\big[\\tfrac{n_g}{2}
        \\log\\tfrac{\\lambda_g}{2\\pi} - \\tfrac{\\lambda_g}{2} (Q_g - 2\\mu_g S_g + n_g\\mu_g^2)\\big]
        - \\tfrac12 \\log(1 + A_i\\tau^2) + \\frac{\\tau^2 B_i^2}{2 (1 + A_i \\tau^2)}

with :math:`A_i = \\sum_g \\lambda_g n_g` and :math:`B_i = \\sum_g \\lambda_g (S_g - n_g
\\mu_g)` (compound symmetry; O(groups)).

**Ungraded indicator** (binomial, task effect on the logit scale): adaptive Gauss-Hermite
quadrature per task: Halley's method (Newton's with the third derivative) from 0 to the mode
:math:`\\hat\\theta_i` of :math:`h_i(\\theta) = \\sum_g [k_g (c_g + \\theta) - n_g
\\log(1 + e^{c_g + \\theta})] - \\theta^2 / 2\\tau^2` (to a step below ``NEWTON_TOL``), nodes
:math:`\\hat\\theta_i + s_i z_q` with :math:`s_i = (2 / H_i)^{1/2}`, :math:`H_i =
-h_i''(\\hat\\theta_i)`:

.. math::

    \\log \\int e^{h_i(\\theta)} \\frac{d\\theta}{\\sqrt{2\\pi}\\tau} \\approx \\log s_i
        + \\operatorname{logsumexp}_q \\big(\\log w_q + z_q^2 + h_i(\\hat\\theta_i + s_i z_q)\\big)
        - \\log \\tau - \\tfrac12 \\log 2\\pi .

Its gradient is the exact gradient of this value: the partial derivatives at fixed centre
and scale plus their dependence on the inputs through the mode and the curvature
(implicit differentiation of :math:`h_i'(\\hat\\theta_i) = 0`:
:math:`\\partial\\hat\\theta_i/\\partial c_g = -v_g / H_i` with :math:`v_g = n_g r_g (1 -
r_g)`, :math:`\\partial\\hat\\theta_i/\\partial\\tau = 2\\hat\\theta_i / (\\tau^3 H_i)`), so NUTS
integrates the Hamiltonian of the value it evaluates. Tasks whose groups agree in (cell,
ungraded count, rollouts) have the same integral: it is computed once per distinct pattern
and weighted (:func:`binomial_patterns`). The binomial coefficient :math:`\\binom{n}{k}`
is a constant and left out.

Both parts, their values and exact gradients, come from one numba kernel
(:func:`transfer_marginal_kernel`) wrapped as one PyTensor Op whose inputs are the per-cell
curves, the two task sds and the per-arm reward precisions, so the sampler's graph stays
small (knots -> curves -> this Op).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

#: quadrature nodes per task. Summed error against a 6,001-point grid on the embedded SWE-Gym
#: replica (2,058 tasks, the curves at a typical posterior value): at task sd 0.5 - 1 node
#: (Laplace) -6.6, 3 nodes -0.44, 5 nodes -0.008, 7 nodes 1e-4; at task sd 1.5 - 5 nodes
#: -0.47, 7 nodes -0.036 (docs/transfer.md). What matters for the posterior is how the error
#: changes with the parameters; 5 nodes keep that far below the posterior sd.
NODES = 5
#: the mode search stops when its step is below this (the error left is about its cube)
NEWTON_TOL = 1e-7
NEWTON_MAX_ITER = 60
#: each step of the mode search is clipped to this many logits (robust far from the mode)
MAX_STEP = 2.0
#: the kernel's data inputs in order (binomial part by distinct task pattern, reward part by task)
MARGINAL_DATA = (
    "u_cell",
    "u_k",
    "u_n",
    "u_start",
    "u_end",
    "u_weight",
    "cell",
    "g_arm",
    "g_n",
    "g_sum",
    "g_sumsq",
    "task_start",
    "task_end",
)
INT_DATA = (0, 3, 4, 6, 7, 11, 12)
#: numba fast-math flags without "nnan"/"ninf" (the kernel relies on IEEE inf: 1 / inf = 0) and
#: without "reassoc"/"contract": with those, LLVM may reorder or fuse the kernel's sums once it is
#: inlined into the caller nutpie compiles, which it does only when the kernel was compiled in the
#: same process (a cold numba cache), not when it is loaded from the cache. The same seed then gave
#: different draws in a process with a cold cache than in every later one; without them, the
#: same draws (tests/models/test_transfer.py::test_same_draws_with_a_cold_or_a_warm_compile_cache)
FASTMATH = {"nsz", "arcp", "afn"}


def task_segments(task_idx: np.ndarray, n_tasks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order of the groups by task and each task's [start, end) in that order."""
    task_idx = np.asarray(task_idx)
    order = np.argsort(task_idx, kind="stable")
    counts = np.bincount(task_idx, minlength=n_tasks)
    end = np.cumsum(counts)
    return order, (end - counts).astype(np.int64), end.astype(np.int64)


@numba.njit(cache=True, fastmath=FASTMATH, inline="always")
def _gaussian_task(
    first: int,
    last: int,
    mu: np.ndarray,
    cell: np.ndarray,
    lam: np.ndarray,
    gn: np.ndarray,
    gs: np.ndarray,
    gq: np.ndarray,
    tau: float,
    d_mu: np.ndarray,
    d_lam: np.ndarray,
) -> tuple[float, float]:
    """One task's exact Gaussian marginal (module docstring): its value and d/dtau; adds
    d/dmu (per cell) and d/dlambda (per group) into ``d_mu`` and ``d_lam``."""
    t2 = tau * tau
    a_i, b_i, value = 0.0, 0.0, 0.0
    for j in range(first, last):
        m = mu[cell[j]]
        a_i += lam[j] * gn[j]
        b_i += lam[j] * (gs[j] - gn[j] * m)
        value -= 0.5 * lam[j] * (gq[j] - 2.0 * m * gs[j] + gn[j] * m * m)
    den = 1.0 + a_i * t2
    value += -0.5 * math.log(den) + 0.5 * t2 * b_i * b_i / den
    d_b = t2 * b_i / den
    d_a = -0.5 * t2 / den - 0.5 * t2 * t2 * b_i * b_i / (den * den)
    for j in range(first, last):
        m = mu[cell[j]]
        resid = gs[j] - gn[j] * m
        d_mu[cell[j]] += lam[j] * resid - lam[j] * gn[j] * d_b
        ssr = gq[j] - 2.0 * m * gs[j] + gn[j] * m * m
        d_lam[j] += -0.5 * ssr + d_a * gn[j] + d_b * resid
    d_tau = -a_i * tau / den + tau * b_i * b_i / den - a_i * tau * t2 * b_i * b_i / (den * den)
    return value, d_tau


@numba.njit(cache=True, fastmath=FASTMATH, inline="always")
def _newton_mode(
    first: int, last: int, ec: np.ndarray, cell: np.ndarray, k: np.ndarray, n: np.ndarray, p0: float
) -> tuple[float, float]:
    """The mode of h_i (module docstring) and exp of it, by Halley's method from 0 (Newton's
    step corrected by h_i''': cubic convergence, about one iteration fewer than Newton's),
    to a step below ``NEWTON_TOL`` (h_i is strictly concave: the prior term)."""
    # et tracks exp(theta), updated by exp(step) (a Taylor polynomial for small steps: they are most)
    th, et = 0.0, 1.0
    for _ in range(NEWTON_MAX_ITER):
        g, h, m3 = -p0 * th, p0, 0.0
        for j in range(first, last):
            e = min(ec[cell[j]] * et, 1e300)
            r = e / (1.0 + e)
            v = n[j] * r * (1.0 - r)
            g += k[j] - n[j] * r
            h += v
            m3 += v * (1.0 - 2.0 * r)
        # Halley: 2 g H / (2 H^2 + g m3); Newton's g / H where the correction is not small
        den = 2.0 * h * h + g * m3
        step = 2.0 * g * h / den if den > h * h else g / h
        step = min(max(step, -MAX_STEP), MAX_STEP)
        th += step
        if abs(step) < 0.03:  # error below step**6 / 720 < 1e-12 (relative)
            et *= 1.0 + step * (1.0 + step / 2.0 * (1.0 + step / 3.0 * (1.0 + step / 4.0 * (1.0 + step / 5.0))))
        else:
            et = math.exp(min(max(th, -700.0), 700.0))
        if abs(step) < NEWTON_TOL:
            break
    return th, et


@numba.njit(cache=True, fastmath=FASTMATH, inline="always")
def _int_power(x: float, m: int) -> float:
    """x ** m for an integer m >= 0 by repeated squaring (exact to rounding, no log or exp)."""
    out = 1.0
    while m > 0:
        if m & 1:
            out *= x
        x *= x
        m >>= 1
    return out


@numba.njit(cache=True, fastmath=FASTMATH, inline="always")
def _at_mode(
    first: int,
    last: int,
    c: np.ndarray,
    ec: np.ndarray,
    cell: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    th: float,
    et: float,
    p0: float,
    e_mode: np.ndarray,
    inv_mode: np.ndarray,
    r_mode: np.ndarray,
) -> tuple[float, float, float, float, bool]:
    """A task's integrand at its mode ``th`` (``et`` = exp(th)): the curvature H, its derivative
    along theta (m3 = sum of v (1 - 2 r)), the log integrand l_mode = sum_g [k_g (c_g + th) - n_g
    log(1 + e_g)] - p0 th^2 / 2, the ungraded count and whether every group has the same
    rollouts; fills e_g, 1 / (1 + e_g) and r_g per group."""
    n0 = n[first]
    same_n, k_all, kc = True, 0.0, 0.0
    for j in range(first, last):
        same_n = same_n and n[j] == n0
        k_all += k[j]
        kc += k[j] * c[cell[j]]
    h, m3 = p0, 0.0
    l_mode, prod = kc + k_all * th - 0.5 * p0 * th * th, 1.0
    for jj in range(last - first):
        j = first + jj
        e = min(ec[cell[j]] * et, 1e300)
        e_mode[jj] = e
        inv_mode[jj] = 1.0 / (1.0 + e)
        r = e * inv_mode[jj]
        r_mode[jj] = r
        v = n[j] * r * (1.0 - r)
        h += v
        m3 += v * (1.0 - 2.0 * r)
        if e >= 1e30:  # log1p(e) = c + th to double precision
            l_mode -= n[j] * (c[cell[j]] + th)
        elif same_n:  # n log prod (1 + e): one log per task instead of one per group
            prod *= 1.0 + e
            if prod > 1e200:
                l_mode -= n0 * math.log(prod)
                prod = 1.0
        else:
            l_mode -= n[j] * math.log1p(e)
    if prod != 1.0:
        l_mode -= n0 * math.log(prod)
    return h, m3, l_mode, k_all, same_n


@numba.njit(cache=True, fastmath=FASTMATH, inline="always")
def _off_centre_node(
    first: int,
    last: int,
    n: np.ndarray,
    q: int,
    sg: float,
    x: float,
    slope: float,
    int_n: bool,
    e_mode: np.ndarray,
    inv_mode: np.ndarray,
    r_node: np.ndarray,
) -> tuple[float, float]:
    """Node ``q``'s integrand relative to the mode's, exp(x) prod_g R_gq^(-n_g) with sigma_q =
    ``sg`` (:func:`_binomial_task`), and the log integrand's slope there (``slope`` less the
    groups' sum of n r); fills r_node[:, q]. The product is one integer power when ``int_n``
    (all groups the same integer rollouts), in logarithms where it could leave a double's range."""
    n0 = n[first]
    # ratio = prod_g R_gq, flushed into log_ratio before it could overflow
    ratio, log_ratio, flushed = 1.0, 0.0, False
    for jj in range(last - first):
        j = first + jj
        e = min(e_mode[jj] * sg, 1e300)
        inv = 1.0 / (1.0 + e)
        r_node[jj, q] = e * inv
        slope -= n[j] * e * inv
        # (1 + e sigma) / (1 + e) = sigma to double precision when e is huge
        f = sg if e_mode[jj] >= 1e30 else (1.0 + e) * inv_mode[jj]
        if int_n:
            ratio *= f
            if ratio > 1e100 or ratio < 1e-100:
                log_ratio += math.log(ratio)
                ratio, flushed = 1.0, True
        else:
            log_ratio += n[j] * math.log(f)
    if not int_n:
        return math.exp(x - log_ratio), slope
    if not flushed and abs(x) < 600.0:
        rn = _int_power(ratio, int(n0))
        if 1e-250 < rn < 1e250:
            return math.exp(x) / rn, slope
    return math.exp(x - n0 * (log_ratio + math.log(ratio))), slope


@numba.njit(cache=True, fastmath=FASTMATH, inline="always")
def _binomial_task(
    first: int,
    last: int,
    c: np.ndarray,
    ec: np.ndarray,
    cell: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    tau: float,
    weight: float,
    z: np.ndarray,
    w: np.ndarray,
    logw: np.ndarray,
    work: np.ndarray,
    r_node: np.ndarray,
    d_c: np.ndarray,
) -> tuple[float, float]:
    """One task's adaptive Gauss-Hermite binomial marginal (module docstring): its value and
    exact d/dtau; adds ``weight`` times the exact d/dc (per cell) into ``d_c``. ``ec`` = exp(c)
    per cell; ``w``, ``logw``: the Gauss-Hermite weights and their logs; ``work`` (6,
    max(nodes, groups)) and ``r_node`` (groups of the widest task, nodes) are scratch.

    Each node's integrand is taken relative to the integrand at the mode (its largest value:
    h_i is concave). With :math:`e_g = e^{c_g + \\hat\\theta}`, :math:`\\sigma_q = e^{s z_q}`,
    :math:`A = \\sum_g k_g - \\hat\\theta / \\tau^2` and :math:`R_{gq} = (1 + e_g \\sigma_q) /
    (1 + e_g)`,

    .. math::

        w_q e^{z_q^2} e^{h_i(\\hat\\theta + s z_q) - h_i(\\hat\\theta)} = w_q \\exp\\big(z_q^2
            (1 - \\tau^{-2} / H_i) + s z_q A\\big) \\prod_g R_{gq}^{-n_g}.

    Mirror nodes (:math:`z_{Q-1-q} = -z_q`) share :math:`\\sigma_q` as its reciprocal, the
    middle node of an odd rule is the mode itself, and equal integer rollouts make the product
    one integer power (by squaring): five nodes take six exponentials and two logarithms
    instead of fifteen transcendental calls. A node whose factors could leave the range of a
    double is done in logarithms."""
    nodes = z.shape[0]
    p0 = 1.0 / (tau * tau)
    post, slope, sig, inv_mode, e_mode, r_mode = work[0], work[1], work[2], work[3], work[4], work[5]
    th, et = _newton_mode(first, last, ec, cell, k, n, p0)
    h, m3, l_mode, k_all, same_n = _at_mode(first, last, c, ec, cell, k, n, th, et, p0, e_mode, inv_mode, r_mode)
    s = math.sqrt(2.0 / h)
    a_mode = k_all - p0 * th
    shrink = 1.0 - p0 / h
    # equal integer rollouts: prod_g R_gq^n as one integer power
    n0 = n[first]
    int_n = same_n and n0 == math.floor(n0) and 0.0 <= n0 < 1e9
    half = nodes // 2
    ssum = 0.0
    for q in range(nodes):
        if q < half:  # the lower half's sigma; the upper half's is its reciprocal
            sig[q] = math.exp(s * z[q])
            sig[nodes - 1 - q] = 1.0 / sig[q]
        if 2 * q + 1 == nodes:  # the middle node of an odd rule: z = 0, t = th
            hp = a_mode
            for jj in range(last - first):
                r_node[jj, q] = r_mode[jj]
                hp -= n[first + jj] * r_mode[jj]
            post[q], slope[q] = w[q], hp
        else:
            x = logw[q] + z[q] * z[q] * shrink + s * z[q] * a_mode
            post[q], slope[q] = _off_centre_node(
                first, last, n, q, sig[q], x, a_mode - p0 * s * z[q], int_n, e_mode, inv_mode, r_node
            )
        ssum += post[q]
    value = l_mode + math.log(ssum * s)
    # partial derivatives at fixed centre and scale ...
    d_th, d_s, d_tau = 0.0, 1.0 / s, 0.0
    for q in range(nodes):
        post[q] /= ssum
        t = th + s * z[q]
        d_th += post[q] * slope[q]
        d_s += post[q] * slope[q] * z[q]
        d_tau += post[q] * t * t * p0 / tau
    # ... plus the centre's and the scale's dependence on the inputs (implicit function)
    ds_dh = -s / (2.0 * h)
    dth_dtau = 2.0 * th * p0 / (tau * h)
    d_tau += d_th * dth_dtau + d_s * ds_dh * (m3 * dth_dtau - 2.0 * p0 / tau)
    for jj in range(last - first):
        j = first + jj
        r0 = r_mode[jj]
        v = n[j] * r0 * (1.0 - r0)
        dth = -v / h
        fixed = 0.0
        for q in range(nodes):
            fixed += post[q] * (k[j] - n[j] * r_node[jj, q])
        d_c[cell[j]] += weight * (fixed + d_th * dth + d_s * ds_dh * (v * (1.0 - 2.0 * r0) + m3 * dth))
    return value, d_tau


@numba.njit(cache=True, fastmath=FASTMATH)
def transfer_marginal_kernel(
    cu: np.ndarray,
    cr: np.ndarray,
    tau_u: float,
    tau_r: float,
    prec: np.ndarray,
    u_cell: np.ndarray,
    u_k: np.ndarray,
    u_n: np.ndarray,
    u_start: np.ndarray,
    u_end: np.ndarray,
    u_weight: np.ndarray,
    cell: np.ndarray,
    arm: np.ndarray,
    gn: np.ndarray,
    gs: np.ndarray,
    gq: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    z: np.ndarray,
    w: np.ndarray,
) -> tuple[float, np.ndarray, np.ndarray, float, float, np.ndarray]:
    """Both parts' log marginal likelihood, task effects integrated out, and its exact gradient.

    Parameters
    ----------
    cu, cr : ndarray
        Per (arm, step) cell: the ungraded and the reward curve (logit scale).
    tau_u, tau_r : float
        Task-effect sds (ungraded: logit scale; reward: reward scale).
    prec : ndarray
        Per arm: the per-trial reward precision.
    u_cell, u_k, u_n, u_start, u_end, u_weight : ndarray
        Binomial part, by distinct task pattern (:func:`binomial_patterns`): per group its
        cell, ungraded count and rollouts; pattern ``p`` owns groups ``[u_start[p],
        u_end[p])`` and stands for ``u_weight[p]`` tasks.
    cell, arm, gn, gs, gq : ndarray
        Reward part, per group (ordered by task): its cell and arm, graded count, sum and sum
        of squares of the graded rewards.
    start, end : ndarray of int
        Task ``i`` owns reward groups ``[start[i], end[i])``.
    z, w : ndarray
        Gauss-Hermite nodes and weights of the binomial part.

    Returns
    -------
    tuple
        value, d/dcu, d/dcr, d/dtau_u, d/dtau_r, d/dprec.
    """
    n_cells, nodes = cu.shape[0], z.shape[0]
    widest = 1
    for p in range(u_start.shape[0]):
        widest = max(widest, u_end[p] - u_start[p])
    work = np.empty((6, max(nodes, widest)))
    r_node = np.empty((widest, nodes))
    logw = np.log(w)
    ec = np.exp(np.minimum(np.maximum(cu, -700.0), 700.0))
    mu = 1.0 / (1.0 + np.exp(-cr))
    lam = prec[arm]
    d_cu, d_mu, d_lam = np.zeros(n_cells), np.zeros(n_cells), np.zeros(cell.shape[0])
    total, d_tau_u, d_tau_r = 0.0, 0.0, 0.0
    for p in range(u_start.shape[0]):
        value, dt = _binomial_task(
            u_start[p], u_end[p], cu, ec, u_cell, u_k, u_n, tau_u, u_weight[p], z, w, logw, work, r_node, d_cu
        )
        total += u_weight[p] * value
        d_tau_u += u_weight[p] * dt
    for i in range(start.shape[0]):
        value, dt = _gaussian_task(start[i], end[i], mu, cell, lam, gn, gs, gq, tau_r, d_mu, d_lam)
        total += value
        d_tau_r += dt
    # the binomial normalising constant per pattern and the reward's sum_g n_g/2 log(lam_g / 2 pi)
    total += (-math.log(tau_u) - 0.5 * math.log(2.0 * math.pi)) * u_weight.sum()
    d_tau_u -= u_weight.sum() / tau_u
    d_prec = np.zeros(prec.shape[0])
    graded = np.zeros(prec.shape[0])
    for j in range(cell.shape[0]):
        d_prec[arm[j]] += d_lam[j]
        graded[arm[j]] += gn[j]
    for a in range(prec.shape[0]):
        total += 0.5 * graded[a] * math.log(prec[a] / (2.0 * math.pi))
        d_prec[a] += 0.5 * graded[a] / prec[a]
    return total, d_cu, d_mu * mu * (1.0 - mu), d_tau_u, d_tau_r, d_prec


def binomial_patterns(
    cell: np.ndarray, k: np.ndarray, n: np.ndarray, start: np.ndarray, end: np.ndarray
) -> dict[str, np.ndarray]:
    """The binomial part's tasks reduced to their distinct (cell, ungraded, rollouts) patterns:
    tasks whose groups agree in all three have the same integral, computed once and weighted
    by their number (exact; on the embedded SWE-Gym replica 2,058 tasks give 1,334 patterns).

    Parameters
    ----------
    cell, k, n : ndarray
        Per group, ordered by task (:func:`task_segments`): its cell, ungraded count and rollouts.
    start, end : ndarray of int
        Task ``i`` owns groups ``[start[i], end[i])``.

    Returns
    -------
    dict
        ``u_cell``, ``u_k``, ``u_n`` per group of a pattern, ``u_start``, ``u_end`` and
        ``u_weight`` per pattern (:func:`transfer_marginal_kernel`'s inputs).
    """
    cell, k, n = np.asarray(cell), np.asarray(k, float), np.asarray(n, float)
    seen: dict[tuple[Any, ...], int] = {}
    groups: list[list[tuple[int, float, float]]] = []
    weight: list[float] = []
    for i in range(len(start)):
        rows = sorted(
            zip(
                cell[start[i] : end[i]].tolist(),
                k[start[i] : end[i]].tolist(),
                n[start[i] : end[i]].tolist(),
                strict=True,
            )
        )
        key = tuple(rows)
        if key in seen:
            weight[seen[key]] += 1.0
        else:
            seen[key] = len(groups)
            groups.append(rows)
            weight.append(1.0)
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    flat = np.array([row for g in groups for row in g], dtype=float).reshape(-1, 3)
    u_end = np.cumsum(sizes)
    return {
        "u_cell": flat[:, 0].astype(np.int64),
        "u_k": flat[:, 1],
        "u_n": flat[:, 2],
        "u_start": u_end - sizes,
        "u_end": u_end,
        "u_weight": np.array(weight),
    }


def pack_marginal_data(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The kernel's 13 data arrays (:data:`MARGINAL_DATA`) packed into one float and one int
    array plus each array's [start, end) in its buffer (``m_layout``, 13 x 2): nutpie hands
    every shared array to the compiled model on each evaluation, and 13 of them cost more
    than the kernel's own arithmetic."""
    buffers: dict[bool, list[np.ndarray]] = {True: [], False: []}
    layout = np.empty((len(MARGINAL_DATA), 2), dtype=np.int64)
    filled = {True: 0, False: 0}
    for i, name in enumerate(MARGINAL_DATA):
        is_int = i in INT_DATA
        values = np.asarray(arrays[name], dtype=np.int64 if is_int else np.float64)
        buffers[is_int].append(values)
        layout[i] = filled[is_int], filled[is_int] + len(values)
        filled[is_int] += len(values)
    return {"m_float": np.concatenate(buffers[False]), "m_int": np.concatenate(buffers[True]), "m_layout": layout}


@numba.njit(cache=True)
def unpack_arrays(floats: np.ndarray, ints: np.ndarray, at: np.ndarray) -> tuple[Any, ...]:
    """Views of the 13 arrays :func:`pack_marginal_data` packed, in MARGINAL_DATA order (which
    buffer each comes from is INT_DATA's; numba needs the heterogeneous tuple spelled out)."""
    return (
        ints[at[0, 0] : at[0, 1]],
        floats[at[1, 0] : at[1, 1]],
        floats[at[2, 0] : at[2, 1]],
        ints[at[3, 0] : at[3, 1]],
        ints[at[4, 0] : at[4, 1]],
        floats[at[5, 0] : at[5, 1]],
        ints[at[6, 0] : at[6, 1]],
        ints[at[7, 0] : at[7, 1]],
        floats[at[8, 0] : at[8, 1]],
        floats[at[9, 0] : at[9, 1]],
        floats[at[10, 0] : at[10, 1]],
        ints[at[11, 0] : at[11, 1]],
        ints[at[12, 0] : at[12, 1]],
    )


def unpack_marginal_data(packed: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """The 13 arrays of :func:`pack_marginal_data`'s output, in :data:`MARGINAL_DATA` order
    (the kernel's data arguments; for benchmarks and checks that call the kernel directly)."""
    return tuple(unpack_arrays(packed["m_float"], packed["m_int"], packed["m_layout"]))
