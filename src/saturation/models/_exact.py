r"""Independent posterior draws of the Gaussian plateau model, without MCMC.

The Gaussian plateau model is linear in its curve parameters once the change point
:math:`c` and the overdispersion :math:`\tau` are fixed: with
:math:`\beta = (a, h, \beta_2[, \delta])` (start, value at the change point, late slope,
jump) the per-step means are :math:`\bar y = X_c \beta + \varepsilon`,
:math:`\varepsilon \sim N(0, V_\tau)`, :math:`V_\tau = \mathrm{diag}(s_t^2/n_t + \tau^2)`,
and the priors on :math:`\beta` are independent normals :math:`N(m_0, S_0)`. Hence

* :math:`\beta \mid c, \tau, y \sim N(m_0 + A^{-1} b,\; A^{-1})` with
  :math:`A = S_0^{-1} + X_c^\top V_\tau^{-1} X_c`,
  :math:`b = X_c^\top V_\tau^{-1}(y - X_c m_0)`;
* :math:`\log p(y \mid c, \tau) = -\tfrac12\big[\log|2\pi V_\tau| + \log|S_0| + \log|A|
  + r^\top V_\tau^{-1} r - b^\top A^{-1} b\big]`, :math:`r = y - X_c m_0`.

The change point is discrete (a sum over the candidate grid) and :math:`\tau` (and, for the
pooled model, the spread :math:`s` of the level change points) are one-dimensional: their
posterior is evaluated on a grid in :math:`\log\tau` that is refined to where the mass
is (two passes, 400 points over the posterior's support), and a draw picks a grid cell
and a uniform position inside it. Every draw is independent, so there is no warm-up, no
compilation and no autocorrelation; the only approximation is the quadrature of the
one-dimensional scale parameters, which tests/models/test_plateau.py checks against NUTS
on the same model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from saturation import curves
from saturation import schema as S
from saturation._lazy import DeferredInferenceData, lazy, posterior_dataset
from saturation.mathfn import ndtr

if TYPE_CHECKING:
    import arviz as az
else:
    az = lazy("arviz")  # imported on first use (ARCHITECTURE.md)

#: points of the first (coarse) and second (refined) pass of each scale grid
COARSE_POINTS = 160
FINE_POINTS = 400
#: the same for each rho > 0 of the AR(1) noise model (:class:`DependentLevel`), whose rotated
#: designs have no segment-sum shortcut: its log evidence and change-point mass within 1e-5 of
#: the full grids' (tests/models/test_plateau.py)
DEPENDENT_POINTS = (48, 120)
#: the refined grid covers the cells within this many log units of the coarse maximum
SUPPORT_LOG = 30.0


def design(t: np.ndarray, grid: np.ndarray, t0: float, jump: bool) -> np.ndarray:
    """Design matrices (C, T, p) of the curve for every candidate change point.

    Columns: start :math:`a` (weight 1 - s/s_c before the break), value at the change point
    :math:`h` (s/s_c before, 1 after), late slope (t - c after) and, with ``jump``, the jump
    (1 after); s = t - t0. ``X @ beta`` equals ``plateau.step_loglik``'s mean curve.
    """
    s = (t - t0)[None, :]
    sc = (grid - t0)[:, None]
    early = t[None, :] < grid[:, None]
    cols = [
        np.where(early, 1 - s / sc, 0.0),
        np.where(early, s / sc, 1.0),
        np.where(early, 0.0, t[None, :] - grid[:, None]),
    ]
    if jump:
        cols.append(np.where(early, 0.0, 1.0))
    return np.stack(cols, axis=-1)


def design_line(t: np.ndarray) -> np.ndarray:
    """Design (1, T, 2) of a straight line through its values at the first and last step."""
    s = (t - t[0]) / max(float(t[-1] - t[0]), 1e-12)
    return np.stack([1 - s, s], axis=-1)[None]


def step_products(y: np.ndarray, x: np.ndarray, m0: np.ndarray) -> np.ndarray:
    """Per step, the distinct entries of :math:`x x^\top` (p <= q), of :math:`x r` and
    :math:`r^2` with :math:`r = y - x m_0`, for every design of ``x`` (C, T, p): (T, K x C),
    K = p(p+1)/2 + p + 1, what :func:`_normal_stats` weights by each tau (it does not
    depend on tau)."""
    n_t, p = x.shape[1:]
    xt = x.transpose(1, 0, 2)  # (T, C, p)
    r = y[:, None] - xt @ m0  # (T, C)
    cols = [xt[:, :, p_] * xt[:, :, q_] for p_ in range(p) for q_ in range(p_, p)]
    cols += [xt[:, :, p_] * r for p_ in range(p)] + [r * r]
    return np.stack(cols, axis=1).reshape(n_t, -1)


def _normal_stats(
    y: np.ndarray,
    var_mean: np.ndarray,
    x: np.ndarray,
    m0: np.ndarray,
    p0: np.ndarray,
    tau: np.ndarray,
    products: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log p(y | c, tau) marginal over beta, and A, b of the conditional; for every tau
    (G,) and candidate (C): shapes (G, C), (G, C, p, p), (G, C, p). ``products``:
    :func:`step_products` of the same ``y``, ``x``, ``m0``, if already computed."""
    n_c, _, p = x.shape
    p0 = np.broadcast_to(p0, (n_c, p))
    v = var_mean[None, :] + tau[:, None] ** 2  # (G, T)
    w = 1.0 / v
    pairs = [(p_, q_) for p_ in range(p) for q_ in range(p_, p)]
    if products is None:
        products = step_products(y, x, m0)
    # every weighted sum over the steps in one product
    sums = (w @ products).reshape(len(tau), -1, n_c)
    a = np.empty((len(tau), n_c, p, p))
    for k, (p_, q_) in enumerate(pairs):
        a[:, :, p_, q_] = sums[:, k]
        if p_ != q_:
            a[:, :, q_, p_] = sums[:, k]
        else:
            a[:, :, p_, p_] += p0[None, :, p_]
    b = sums[:, len(pairs) : len(pairs) + p].transpose(0, 2, 1)  # (G, C, p)
    rwr = sums[:, -1]  # (G, C)
    logdet, quad = small_cholesky_terms(a, b)
    logml = -0.5 * (np.log(2 * np.pi * v).sum(-1)[:, None] - np.log(p0).sum(-1) + logdet + rwr - quad)
    return logml, a, b


#: relative rounding error of the segment-sum marginal likelihood, per unit of sum(w y^2)
#: (measured against the design-matrix algebra with weights up to 1e12: 2e-13 to 7e-13)
SEGMENT_SUM_ERROR = 1e-11


def segment_sums(w: np.ndarray, y: np.ndarray, s: np.ndarray, idx: np.ndarray) -> tuple[list[Any], list[Any]]:
    r"""Sums of :math:`w, wy, wy^2, ws, wsy, ws^2` over the steps before each candidate
    (``t[:idx]``) and from it on (``t[idx:]``), read off cumulative sums: O(T + C) for all
    candidates at once instead of O(T C).

    ``w`` and ``y`` are (..., T), ``s`` (T,) (``t - t0``), ``idx`` the candidates'
    positions in ``t`` (C,). Returns (early, late), each six arrays (..., C) in that order.
    """
    moments = [w, w * y, w * y * y, w * s, w * s * y, w * s * s]
    cum = [np.cumsum(m_, axis=-1) for m_ in moments]
    early = [np.where(idx > 0, c_[..., np.maximum(idx - 1, 0)], 0.0) for c_ in cum]
    late = [c_[..., -1:] - e_ for c_, e_ in zip(cum, early, strict=True)]
    return early, late


def hinge_normal_stats(
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    grid: np.ndarray,
    jump: bool,
    m0: np.ndarray,
    p0: np.ndarray,
    tau: np.ndarray,
    t0: float | None = None,
) -> np.ndarray:
    r""":func:`_normal_stats`'s ``log p(y | c, tau)`` for :func:`design`'s hinge curves,
    from segment sums (:func:`segment_sums`): O(G (T + C)) instead of O(G T C).

    With :math:`u = s/s_c` before the break and :math:`v = s - s_c` from it on, every entry
    of :math:`X_c^\top W X_c` and :math:`X_c^\top W y` is a combination of the six sums of
    each segment; :math:`b = X^\top W y - X^\top W X m_0` and
    :math:`r^\top W r = y^\top W y - 2 m_0^\top X^\top W y + m_0^\top X^\top W X m_0`.
    ``t0`` is the curve's first step (default ``steps[0]``; leave-one-out passes the full
    data's). Returns (G, C); equal to :func:`_normal_stats` to rounding (tested).
    """
    t0 = float(steps[0]) if t0 is None else t0
    s = steps - t0
    sc = grid - t0  # (C,)
    idx = np.searchsorted(steps, grid)  # first step >= c: the late segment starts there
    v = var_mean[None, :] + tau[:, None] ** 2  # (G, T)
    w = 1.0 / v
    (e0, ey, eyy, e1, e1y, e2), (l0, ly, lyy, l1, l1y, l2) = segment_sums(w, y[None, :], s, idx)
    lv, lvv, lvy = l1 - sc * l0, l2 - 2 * sc * l1 + sc * sc * l0, l1y - sc * ly
    g_aa = e0 - 2 * e1 / sc + e2 / sc**2
    g_ah = e1 / sc - e2 / sc**2
    g_hh = e2 / sc**2 + l0
    p = 4 if jump else 3
    xtx = np.zeros((*e0.shape, p, p))
    xtx[..., 0, 0], xtx[..., 0, 1], xtx[..., 1, 0] = g_aa, g_ah, g_ah
    xtx[..., 1, 1], xtx[..., 1, 2], xtx[..., 2, 1], xtx[..., 2, 2] = g_hh, lv, lv, lvv
    xty = np.stack([ey - e1y / sc, e1y / sc + ly, lvy] + ([ly] if jump else []), axis=-1)
    if jump:
        xtx[..., 1, 3] = xtx[..., 3, 1] = xtx[..., 3, 3] = l0
        xtx[..., 2, 3] = xtx[..., 3, 2] = lv
    p0 = np.broadcast_to(p0, (len(grid), p))
    a = xtx + p0[None, :, :, None] * np.eye(p)
    xtx_m0 = xtx @ m0
    b = xty - xtx_m0
    rwr = (eyy + lyy) - 2 * xty @ m0 + xtx_m0 @ m0
    logdet, quad = small_cholesky_terms(a, b)
    return -0.5 * (np.log(2 * np.pi * v).sum(-1)[:, None] - np.log(p0).sum(-1) + logdet + rwr - quad)


def small_cholesky(a: np.ndarray) -> list[list[np.ndarray]]:
    """The lower Cholesky factors of many small positive-definite matrices ``a`` (..., p, p),
    written out entry by entry (``chol[i][j]``, j <= i, each (...)): each step one vectorised
    operation over all the matrices (p <= 4 here: a LAPACK call per matrix costs 50x more
    for tens of thousands of 3 x 3 matrices). Equal to ``numpy.linalg.cholesky`` to rounding."""
    p = a.shape[-1]
    chol: list[list[np.ndarray]] = [[] for _ in range(p)]
    for i in range(p):
        for j in range(i + 1):
            rest = a[..., i, j] - sum((chol[i][k] * chol[j][k] for k in range(j)), start=np.zeros(a.shape[:-2]))
            chol[i].append(np.sqrt(rest) if i == j else rest / chol[j][j])
    return chol


def forward_solve(chol: list[list[np.ndarray]], b: np.ndarray) -> list[np.ndarray]:
    """:math:`z = L^{-1} b` for :func:`small_cholesky` factors and vectors ``b`` (..., p)."""
    z: list[np.ndarray] = []
    for i in range(len(chol)):
        rest = b[..., i] - sum((chol[i][k] * z[k] for k in range(i)), start=np.zeros(b.shape[:-1]))
        z.append(rest / chol[i][i])
    return z


def back_solve(chol: list[list[np.ndarray]], z: list[np.ndarray]) -> np.ndarray:
    r""":math:`x = L^{-\top} z` (..., p) for :func:`small_cholesky` factors and ``z`` as
    :func:`forward_solve` returns it."""
    p = len(chol)
    x: list[np.ndarray] = [np.empty(0)] * p
    for i in reversed(range(p)):
        rest = z[i] - sum((chol[k][i] * x[k] for k in range(i + 1, p)), start=np.zeros(z[i].shape))
        x[i] = rest / chol[i][i]
    return np.stack(x, axis=-1)


def small_cholesky_terms(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\log|A|` and :math:`b^\top A^{-1} b` for many small positive-definite
    matrices ``a`` (..., p, p) and vectors ``b`` (..., p), from :func:`small_cholesky` and
    :func:`forward_solve` (about 30 array operations instead of a LAPACK call per matrix).
    Equal to ``numpy.linalg`` to rounding."""
    chol = small_cholesky(a)
    z = forward_solve(chol, b)
    logdet = 2 * sum((np.log(chol[i][i]) for i in range(len(chol))), start=np.zeros(a.shape[:-2]))
    return logdet, sum((z_i * z_i for z_i in z), start=np.zeros(b.shape[:-1]))


#: candidates on integer steps spanning at most this many lattice points per candidate are
#: summed over the lattice (:func:`pooled_evidence`)
LATTICE_PER_CANDIDATE = 16


#: beyond this many spreads the kernel exp(-d^2 / 2 s^2) underflows to exactly 0 in float64
KERNEL_REACH = float(np.sqrt(-2.0 * np.log(np.finfo(float).smallest_subnormal)))


def pooled_evidence(grid: np.ndarray, m: np.ndarray, spread: np.ndarray) -> np.ndarray:
    r"""For each spread :math:`s_g` (G,) and common change point :math:`c_0` on ``grid``
    (C,), :math:`\sum_c p(c \mid c_0, s_g)\, m_l(c)` with the discretised normal
    :math:`p(c \mid c_0, s) \propto \exp(-(c - c_0)^2 / 2 s^2)` over the grid: (G, L, C0).

    ``m`` (L, C) holds each level's likelihood of the candidates. Summed directly, one
    spread at a time; no term that float64 can hold is dropped, however far the levels are
    apart. On integer steps (:data:`LATTICE_PER_CANDIDATE`) both sums (the kernel's
    normalisation and the weighted likelihood) are discrete convolutions over the lattice
    with the kernel cut where it underflows to zero (:data:`KERNEL_REACH` spreads):
    O(C x reach) per spread, linear in the candidates for a given spread, and no C x C
    array. When the reach covers a quarter of the lattice or more, the kernel is read from
    a table of its values at each lattice distance into a C x C matrix instead (one matrix
    product, faster there). Other grids: an exp per pair.
    """
    n_levels, n_c = m.shape
    offsets = grid - grid[0]
    span = round(float(offsets[-1])) + 1 if n_c else 0
    lattice = bool(n_c) and np.allclose(offsets, np.round(offsets)) and span <= LATTICE_PER_CANDIDATE * n_c
    out = np.empty((len(spread), n_levels, n_c))
    if not lattice:
        diff2 = (grid[None, :] - grid[:, None]) ** 2  # (C0, C)
        for i, s_i in enumerate(spread):
            w = np.exp(-0.5 * diff2 / s_i**2)
            out[i] = (w @ m.T).T / w.sum(axis=1)
        return out
    pos = np.round(offsets).astype(np.int64)
    rows = np.zeros((n_levels + 1, span))
    rows[:n_levels, pos], rows[n_levels, pos] = m, 1.0  # the last row: the grid's indicator
    dist: np.ndarray | None = None
    for i, s_i in enumerate(spread):
        reach = min(span - 1, int(np.ceil(KERNEL_REACH * s_i)))
        if 4 * reach >= span:  # wide kernel: one matrix product
            if dist is None:
                dist = np.abs(pos[None, :] - pos[:, None])  # (C0, C) lattice distances
            w = np.take(np.exp(-0.5 * (np.arange(span) / s_i) ** 2), dist)
            out[i] = (w @ m.T).T / w.sum(axis=1)
            continue
        kernel = np.exp(-0.5 * (np.arange(-reach, reach + 1) / s_i) ** 2)
        sums = np.stack([np.convolve(r, kernel)[pos + reach] for r in rows])  # (L + 1, C0)
        out[i] = sums[:n_levels] / sums[n_levels]
    return out


def logsumexp(a: np.ndarray, axis: int | None = None, keepdims: bool = False) -> Any:
    """log(sum(exp(a))) over ``axis`` (all entries when None), stable for large entries and
    -inf where every entry is -inf; scipy.special.logsumexp's result for real input, without
    its per-call overhead (the exact sampler calls it hundreds of times a fit)."""
    a = np.asarray(a, dtype=float)
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    if keepdims:
        return out
    return out.reshape(())[()] if axis is None else np.squeeze(out, axis=axis)


def _log_halfnormal(x: np.ndarray, sd: float) -> np.ndarray:
    return np.log(np.sqrt(2 / np.pi) / sd) - 0.5 * (x / sd) ** 2


def _scale_grid(
    logpost: Any, lo: float, hi: float, coarse: int = COARSE_POINTS, fine: int = FINE_POINTS
) -> tuple[np.ndarray, float, np.ndarray]:
    """Two-pass grid in u = log(scale): ``logpost(u)`` returns (G, ...) log densities in u
    (prior x Jacobian x likelihood); returns the refined u points, their spacing and
    ``logpost`` on them (``coarse`` and ``fine`` points in the two passes)."""
    u = np.linspace(lo, hi, coarse)
    u = refined_grid(u, logpost(u), SUPPORT_LOG, fine)
    return u, float(u[1] - u[0]), logpost(u)


def refined_grid(u: np.ndarray, lp: np.ndarray, support: float, points: int) -> np.ndarray:
    """``points`` evenly spaced over the support of ``lp`` (G, ...) on the even grid ``u``:
    from one spacing before the first to one after the last point whose log density (summed
    over the other axes) lies within ``support`` of the largest, inside ``u``'s range."""
    marg = logsumexp(lp.reshape(len(u), -1), axis=1)
    inside = np.flatnonzero(marg > marg.max() - support)
    step = u[1] - u[0]
    return np.linspace(max(u[inside[0]] - step, u[0]), min(u[inside[-1]] + step, u[-1]), points)


def _pick_one(rng: np.random.Generator, logw: np.ndarray, size: int) -> np.ndarray:
    """``size`` categorical draws from one set of unnormalised log weights (flattened)."""
    cum = np.exp(logw.reshape(-1) - logw.max()).cumsum()
    return np.minimum(np.searchsorted(cum, rng.random(size) * cum[-1], side="right"), cum.size - 1)


def sample_rows(rng: np.random.Generator, weights: np.ndarray) -> np.ndarray:
    """Categorical draws, one per row of ``weights`` (non-negative, unnormalised)."""
    cum = weights.cumsum(axis=-1)
    u = rng.random((*weights.shape[:-1], 1)) * cum[..., -1:]
    return np.minimum((cum < u).sum(axis=-1), weights.shape[-1] - 1)


def pick_in_columns(rng: np.random.Generator, logw: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Categorical draws of a row of ``logw`` (G, C: unnormalised log weights, one
    distribution per column), one for each entry of ``cols`` from that column's distribution.

    Each column's normalised cumulative weights, shifted by its index, form one increasing
    array (column c's in (c, c + 1]); draw d is the position of ``cols[d] + u_d`` in it. The
    cost is one pass over the (G, C) weights and a binary search per draw, where weighting
    every draw's column anew costs G exponentials per draw."""
    n_rows = logw.shape[0]
    w = np.exp(logw - logw.max(axis=0, keepdims=True))
    cdf = np.cumsum(w, axis=0)
    keys = (cdf / cdf[-1:] + np.arange(logw.shape[1])[None, :]).T.ravel()  # column by column
    at = np.searchsorted(keys, cols + rng.random(len(cols)), side="right")
    return np.clip(at - cols * n_rows, 0, n_rows - 1)


#: exact LOO sums the (tau, design) cells whose full-data posterior mass exceeds exp(-this)
LOO_MASS_CUT = 60.0
#: exact LOO uses every this-many points of the fine tau grid (and designs on a fine grid of a
#: continuous parameter): the fine grids resolve the posterior sd by about 25 points
LOO_TAU_STRIDE = 4


class Level:
    """One level (or series) of a model linear in its curve parameters given tau: the tau
    grid over every design in ``x`` (C, T, p) and the conditional draws. ``hinge``
    ``(steps, grid, jump, t0)`` says that ``x`` is :func:`design`'s: its marginal likelihood then
    comes from segment sums (:func:`hinge_normal_stats`, linear in the candidates)."""

    def __init__(
        self,
        y: np.ndarray,
        var_mean: np.ndarray,
        x: np.ndarray,
        m0: np.ndarray,
        sd0: np.ndarray,
        tau_sd: float,
        hinge: tuple[np.ndarray, np.ndarray, bool, float] | None = None,
        points: tuple[int, int] = (COARSE_POINTS, FINE_POINTS),
    ) -> None:
        self.y, self.var_mean, self.x, self.m0, self.p0 = y, var_mean, x, m0, 1.0 / sd0**2
        positive = var_mean[var_mean > 0]
        floor = min(float(np.sqrt(positive.min())) if positive.size else tau_sd, tau_sd)
        lo, hi = np.log(1e-4 * floor), np.log(8.0 * tau_sd)

        products = step_products(y, x, m0) if hinge is None else None  # shared by the two passes

        def logpost(u: np.ndarray) -> np.ndarray:
            tau = np.exp(u)
            if hinge is None:
                logml = _normal_stats(y, var_mean, x, m0, self.p0, tau, products)[0]
            else:
                slices = [tau[i : i + 64] for i in range(0, len(tau), 64)]  # (G, C, p, p) stays small
                h_steps, h_grid, h_jump, h_t0 = hinge
                with np.errstate(invalid="ignore"):  # a factor that lost its definiteness: redone below
                    logml = np.concatenate(
                        [
                            hinge_normal_stats(y, var_mean, h_steps, h_grid, h_jump, m0, self.p0, t_, h_t0)
                            for t_ in slices
                        ]
                    )
                # segment sums cancel when steps carry enormous weights (zero within-step
                # variance and a tiny tau): their error is about 1e-12 x sum(w y^2) (measured);
                # where that could reach 1e-3 log units, or a factor lost its definiteness, the
                # tau value is done from the design matrices
                risk = SEGMENT_SUM_ERROR * ((y * y)[None, :] / (var_mean[None, :] + tau[:, None] ** 2)).sum(axis=1)
                redo = ~np.isfinite(logml).all(axis=1) | (risk > 1e-3)
                if redo.any():
                    logml[redo] = _normal_stats(y, var_mean, x, m0, self.p0, tau[redo])[0]
            return logml + (_log_halfnormal(tau, tau_sd) + u)[:, None]

        self.u, self.du, self.logjoint = _scale_grid(logpost, lo, hi, *points)  # logjoint: (G, C)
        # log p(y | c) up to a constant shared by all candidates
        self.log_m = logsumexp(self.logjoint, axis=0)

    @property
    def design_log_m(self) -> np.ndarray:
        """log p(y | design) of each design, tau integrated (the constant of ``log_m``
        included), (C,)."""
        return self.log_m + np.log(self.du)

    @property
    def log_evidence(self) -> float:
        """log p(y) with a uniform prior over the designs (the constant of ``log_m`` included)."""
        return float(logsumexp(self.log_m) + np.log(self.du) - np.log(self.x.shape[0]))

    def loo(self, log_prior: np.ndarray | None = None, design_stride: int = 1) -> np.ndarray:
        r"""Exact leave-one-out log predictive densities :math:`\log p(y_i \mid y_{-i})`, (T,).

        Given a design :math:`c` and :math:`\tau` the model is Gaussian-linear, so
        :math:`p(y_i \mid y_{-i}, c, \tau) = N(e_i/(1 - h_i);\, 0,\, v_i/(1 - h_i))` with the
        full-data residual :math:`e_i = y_i - x_i^\top m`, the leverage :math:`h_i = x_i^\top
        A^{-1} x_i / v_i` (prior included) and :math:`v_i = s_i^2/n_i + \tau^2`
        (Sherman-Morrison). The (c, tau) grid is then summed exactly:
        :math:`p(y_i \mid y_{-i}) = 1 / \sum_{c,\tau} p(c, \tau \mid y) / p(y_i \mid y_{-i}, c,
        \tau)`. The priors and the tau grid stay the full data's; cells with a posterior mass
        below :math:`e^{-}` :data:`LOO_MASS_CUT` are left out (one step would have to carry
        that many log units of evidence to make them matter). ``log_prior`` (C,): log prior
        mass of each design (default uniform); ``design_stride``: use every so many designs
        (for designs that discretise a continuous parameter; 1 for change points)."""
        return self.loo_lppd(log_prior, design_stride)[0]

    def loo_lppd(self, log_prior: np.ndarray | None = None, design_stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Exact LOO and lppd (:func:`loo_from_cells`), (T,) each, over this level's cells;
        ``log_prior`` and ``design_stride`` as in :meth:`loo` (the interface of
        :meth:`DependentLevel.loo_lppd`)."""
        return loo_from_cells([(self, self.loo_mass(log_prior, design_stride), None)], design_stride)

    def loo_mass(self, log_prior: np.ndarray | None = None, design_stride: int = 1) -> np.ndarray:
        """Log posterior mass (up to a constant shared by the cells) of the (tau, design)
        cells exact LOO sums over: every :data:`LOO_TAU_STRIDE`-th tau point and
        ``design_stride``-th design of the grids, ``log_prior`` (C,) added; (G', C')."""
        logw = self.logjoint + (0.0 if log_prior is None else log_prior[None, :])
        # every LOO_TAU_STRIDE-th tau point (and design_stride-th design) of the fine grids:
        # they resolve a posterior sd by tens of points, a few suffice for a smooth integrand
        return logw[::LOO_TAU_STRIDE, ::design_stride] + np.log(self.du)

    def loo_density(self, g_idx: np.ndarray, c_idx: np.ndarray, out_map: np.ndarray | None = None) -> np.ndarray:
        r""":math:`\log p(y_i \mid y_{-i}, c, \tau)` for the cells (tau index ``g_idx``,
        design index ``c_idx``, (K,)), (K, T).

        ``out_map`` None: this level's own observations are the data (the closed form of
        :meth:`loo`). Else the data are :math:`y = M \tilde y` with :math:`\tilde y` this
        level's observations and ``out_map`` :math:`M` (T, T), as the rotated and scaled
        observations of :class:`DependentLevel`, whose noise is independent only after
        the rotation. With :math:`V = \mathrm{diag}(v)`, the marginal precision of
        :math:`\tilde y` (curve parameters integrated) is :math:`\tilde P = V^{-1} - V^{-1}
        X A^{-1} X^\top V^{-1}`, so that of :math:`y` is :math:`P = M^{-\top} \tilde P
        M^{-1}`, and for a Gaussian :math:`y_i \mid y_{-i} \sim N(y_i - g_i / P_{ii},\,
        1 / P_{ii})` with :math:`g = P (y - X m_0)` (Burkner, Gabry and Vehtari 2021,
        leave-one-out for non-factorised normal models). For an orthogonal :math:`Q` and
        :math:`M = Q \Lambda^{1/2}`, :math:`M^{-\top} = Q \Lambda^{-1/2}` is passed as
        ``out_map`` here: :math:`P_{ii} = \sum_k (M^{-\top})_{ik}^2 / v_k - b_i^\top A^{-1}
        b_i`, :math:`b = M^{-\top} V^{-1} X`, and :math:`g = M^{-\top} V^{-1} \tilde e` with
        :math:`\tilde e = \tilde y - X m` the residual at the conditional posterior mean."""
        tau = np.exp(self.u[g_idx])
        x = self.x[c_idx]  # (K, T, p)
        n_p = x.shape[2]
        v = self.var_mean[None, :] + tau[:, None] ** 2  # (K, T)
        w = 1.0 / v
        # A, b and the quadratic forms written out over the few (p, q) pairs: einsum is 10x slower
        cols = [x[:, :, p_] for p_ in range(n_p)]
        p0 = np.broadcast_to(self.p0, (self.x.shape[0], n_p))[c_idx]
        a = np.empty((len(c_idx), n_p, n_p))
        for p_ in range(n_p):
            for q_ in range(p_, n_p):
                a[:, p_, q_] = a[:, q_, p_] = (w * cols[p_] * cols[q_]).sum(axis=1) + (p0[:, p_] if p_ == q_ else 0.0)
        a_inv = np.linalg.inv(a)  # (K, p, p)
        wr = w * (self.y[None, :] - x @ self.m0)
        b = np.stack([(wr * c_).sum(axis=1) for c_ in cols], axis=1)
        m = self.m0 + (a_inv @ b[:, :, None])[:, :, 0]
        e = self.y[None, :] - sum(m[:, p_, None] * cols[p_] for p_ in range(n_p))
        if out_map is None:
            q = sum(
                (1.0 if p_ == q_ else 2.0) * a_inv[:, p_, q_, None] * cols[p_] * cols[q_]
                for p_ in range(n_p)
                for q_ in range(p_, n_p)
            )  # x_i' A^-1 x_i, every cell and step
            one_h = 1.0 - q * w
            return -0.5 * (np.log(2 * np.pi * v) - np.log(one_h) + e * e * w / one_h)  # (K, T)
        g = (e * w) @ out_map.T  # (K, T)
        bs = [(c_ * w) @ out_map.T for c_ in cols]
        prec = w @ (out_map * out_map).T - sum(
            (1.0 if p_ == q_ else 2.0) * a_inv[:, p_, q_, None] * bs[p_] * bs[q_]
            for p_ in range(n_p)
            for q_ in range(p_, n_p)
        )
        return 0.5 * (np.log(prec / (2 * np.pi)) - g * g / prec)

    def draw(
        self, rng: np.random.Generator, c_idx: np.ndarray, x: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """tau | c and beta | c, tau for each draw's candidate index; (D,), (D, p). ``x`` (D, T,
        p): each draw's own design (a continuous parameter drawn inside the cell of its
        candidate), default the candidate's."""
        g = pick_in_columns(rng, self.logjoint, c_idx)
        tau = np.exp(self.u[g] + self.du * (rng.random(len(g)) - 0.5))
        w = 1.0 / (self.var_mean[None, :] + tau[:, None] ** 2)  # (D, T)
        p0 = np.broadcast_to(self.p0, (self.x.shape[0], self.x.shape[2]))[c_idx]  # (D, p)
        if x is None:  # draws that share a design: A and b from one product per design
            a, b = _conditional_sums(self.y, w, self.x, self.m0, c_idx)
        else:
            r = self.y[None, :] - x @ self.m0
            xw = (x * w[:, :, None]).transpose(0, 2, 1)  # (D, p, T): batched products, 5x einsum's speed
            a = xw @ x
            b = (xw @ r[:, :, None])[:, :, 0]
        a += p0[:, :, None] * np.eye(p0.shape[1])
        # beta = m0 + A^-1 b + L^-T z = m0 + L^-T (L^-1 b + z), A = L L'
        chol = small_cholesky(a)
        w = forward_solve(chol, b)
        z = rng.standard_normal(b.shape)
        beta = self.m0 + back_solve(chol, [w_i + z[:, i] for i, w_i in enumerate(w)])
        return tau, beta


def _conditional_sums(
    y: np.ndarray, w: np.ndarray, x: np.ndarray, m0: np.ndarray, c_idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:math:`X_c^\top W X_c` (D, p, p) and :math:`X_c^\top W (y - X_c m_0)` (D, p) for each
    draw's design ``x[c_idx]`` and step weights ``w`` (D, T): the draws of one design are
    weighted in one matrix product of their weights with the design's :func:`step_products`
    (a gathered (D, T, p) design per draw cost most of the draws' time)."""
    n_p = x.shape[2]
    if not len(c_idx):  # a part of the model no draw was taken from
        return np.empty((0, n_p, n_p)), np.empty((0, n_p))
    pairs = [(p_, q_) for p_ in range(n_p) for q_ in range(p_, n_p)]
    # the draws grouped by design (a stable sort: each group's draws in their order)
    order = np.argsort(c_idx, kind="stable")
    by_design = c_idx[order]
    starts = np.flatnonzero(np.r_[True, by_design[1:] != by_design[:-1]])
    sums = np.empty((len(c_idx), len(pairs) + n_p + 1))
    for lo, hi in zip(starts, np.r_[starts[1:], len(c_idx)], strict=True):
        c = by_design[lo]
        sums[order[lo:hi]] = w[order[lo:hi]] @ step_products(y, x[c : c + 1], m0)  # (Dc, K): pairs, x r, r r
    a = np.empty((len(c_idx), n_p, n_p))
    for k, (p_, q_) in enumerate(pairs):
        a[:, p_, q_] = a[:, q_, p_] = sums[:, k]
    return a, sums[:, len(pairs) : len(pairs) + n_p]


def loo_from_cells(
    parts: list[tuple[Level, np.ndarray, np.ndarray | None]], design_stride: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact LOO over the cells of one or more :class:`Level` s whose cells are the
    posterior's support together: ``parts`` (level, log mass of its cells from
    :meth:`Level.loo_mass` (the same constant in every part), ``out_map`` of
    :meth:`Level.loo_density`). Returns, (T,) each, :math:`\log p(y_i \mid y_{-i}) = -\log
    \sum_{\text{cells}} p(\text{cell} \mid y) / p(y_i \mid y_{-i}, \text{cell})` and the
    posterior mean of the same conditional densities, :math:`\log \sum p(\text{cell} \mid y)\,
    p(y_i \mid y_{-i}, \text{cell})` (the lppd of the effective number of parameters).
    Cells below :math:`e^{-}` :data:`LOO_MASS_CUT` of the whole mass are left out."""
    total = logsumexp(np.array([logsumexp(logw) for _, logw, _ in parts]))
    inv, mean = [], []
    for level, logw, out_map in parts:
        logw = logw - total
        g_idx, c_idx = np.nonzero(logw > -LOO_MASS_CUT)  # the (tau, design) cells that carry mass
        if not len(g_idx):
            continue
        lw = logw[g_idx, c_idx][:, None]
        lp = level.loo_density(g_idx * LOO_TAU_STRIDE, c_idx * design_stride, out_map)
        inv.append(lw - lp)
        mean.append(lw + lp)
    return -logsumexp(np.concatenate(inv), axis=0), logsumexp(np.concatenate(mean), axis=0)


#: per-step AR(1) coefficients of the step noise the dependent model sums over
RHO_GRID = (0.0, 0.2, 0.4, 0.55, 0.7, 0.8, 0.87, 0.92, 0.96)


@dataclass(frozen=True)
class RhoPrior:
    """The prior of the step noise's AR(1) coefficient: a grid of values, summed exactly.

    ``p_independent`` None: uniform over ``rho`` (the plateau model's ``noise = "ar1"``).
    A number: that much prior mass on :math:`\rho = 0` (independent step noise) and the
    rest spread evenly over the other values (``noise = "auto"``, a spike and slab: data
    with independent step noise keep most of the independent model's power, autocorrelated
    data move the mass to :math:`\rho > 0`; docs/calibration.md).
    """

    rho: tuple[float, ...] = RHO_GRID
    p_independent: float | None = None

    def log_weights(self) -> np.ndarray:
        """log prior mass of each value of ``rho`` (K,)."""
        rho = np.asarray(self.rho, dtype=float)
        if self.p_independent is None or not np.any(rho == 0.0) or len(rho) == 1:
            return np.full(len(rho), -np.log(len(rho)))
        zero = rho == 0.0
        w = np.where(zero, self.p_independent / zero.sum(), (1.0 - self.p_independent) / (~zero).sum())
        return np.log(w)


#: uniform over :data:`RHO_GRID` (``noise = "ar1"``)
AR1_PRIOR = RhoPrior()
#: half the mass on independent noise (``noise = "auto"``)
AUTO_NOISE_PRIOR = RhoPrior(p_independent=0.5)


def ar1_rotation(steps: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
    r"""Eigenvectors Q (T, T) and eigenvalues (T,) of the AR(1) correlation on the step axis,
    :math:`R_{ij} = \rho^{|t_i - t_j|}` (an Ornstein-Uhlenbeck process observed at the
    logged steps: a gap of 10 steps between two logged points correlates them by
    :math:`\rho^{10}`)."""
    key = (np.ascontiguousarray(steps, dtype=float).tobytes(), float(rho))
    if key not in _ROTATIONS:  # the hinge, the jump and the line of one fit share them
        r = rho ** np.abs(steps[:, None] - steps[None, :])
        lam, q = np.linalg.eigh(r)
        for arr in (q, lam):
            arr.flags.writeable = False
        _ROTATIONS[key] = (q, np.maximum(lam, 1e-12))
        while len(_ROTATIONS) > 2 * len(RHO_GRID):
            del _ROTATIONS[next(iter(_ROTATIONS))]
    return _ROTATIONS[key]


#: the last fits' AR(1) rotations, keyed on (steps, rho): :func:`ar1_rotation`
_ROTATIONS: dict[tuple[bytes, float], tuple[np.ndarray, np.ndarray]] = {}


class DependentLevel:
    r"""A :class:`Level` whose step noise is autocorrelated: per-step means
    :math:`\bar y = X_c\beta + \eta + \varepsilon`, :math:`\eta` an AR(1) (OU) process on
    the step axis with marginal sd :math:`\tau` and per-step coefficient :math:`\rho`,
    :math:`\varepsilon` the within-step sampling noise. :math:`\rho` has the prior
    ``noise_prior`` (:class:`RhoPrior`: uniform on :data:`RHO_GRID` by default) and is
    summed exactly.

    Given :math:`\rho`, :math:`\mathrm{Cov} = \bar v I + \tau^2 R_\rho = Q(\bar v +
    \tau^2\Lambda)Q^\top`: rotating by :math:`Q^\top` and scaling row t by
    :math:`\lambda_t^{-1/2}` turns the model into :class:`Level`'s (independent noise of
    variance :math:`\bar v/\lambda_t + \tau^2`), with the Jacobian
    :math:`-\tfrac12\sum_t\log\lambda_t` added to the log evidence. :math:`\bar v` is the
    mean within-step variance: exact for a logged series (no within-step variance) and for
    equal within-step variances; an approximation when they differ across steps. At
    :math:`\rho = 0` the level is :class:`Level` itself (per-step variances kept).
    ``points``: the tau grid's two passes for every rho (default: :data:`COARSE_POINTS`,
    :data:`FINE_POINTS` at rho = 0 and :data:`DEPENDENT_POINTS` above).
    """

    def __init__(
        self,
        y: np.ndarray,
        var_mean: np.ndarray,
        x: np.ndarray,
        m0: np.ndarray,
        sd0: np.ndarray,
        tau_sd: float,
        steps: np.ndarray,
        hinge: tuple[np.ndarray, np.ndarray, bool, float] | None = None,
        noise_prior: RhoPrior = AR1_PRIOR,
        points: tuple[int, int] | None = None,
    ) -> None:
        self.x, self.rho = x, np.asarray(noise_prior.rho, dtype=float)
        vbar = float(np.mean(var_mean))
        self.steps, self.noise_prior = steps, noise_prior
        self.parts: list[Level] = []
        self._jac: list[float] = []  # log |det| of each rho's rotation and scaling
        log_ev = []  # (K, C): log p(y | c, rho) with tau integrated
        for rho in self.rho:
            if rho == 0.0:
                full = points or (COARSE_POINTS, FINE_POINTS)
                level, jac = Level(y, var_mean, x, m0, sd0, tau_sd, hinge=hinge, points=full), 0.0
            else:
                q, lam = ar1_rotation(steps, float(rho))
                scale = 1.0 / np.sqrt(lam)
                yr = (q.T @ y) * scale
                n_c, n_t, n_p = x.shape  # Q^T X_c for every candidate as one matrix product (BLAS)
                xr = (q.T @ x.transpose(1, 0, 2).reshape(n_t, -1)).reshape(n_t, n_c, n_p).transpose(1, 0, 2)
                xr = xr * scale[None, :, None]
                level = Level(yr, vbar * scale**2, xr, m0, sd0, tau_sd, points=points or DEPENDENT_POINTS)
                jac = -0.5 * float(np.log(lam).sum())
            self.parts.append(level)
            self._jac.append(jac)
            log_ev.append(level.design_log_m + jac)
        self.log_ev = np.stack(log_ev) + noise_prior.log_weights()[:, None]  # the prior on rho
        #: log p(y | c) up to a constant shared by the candidates (rho and tau summed)
        self.log_m = logsumexp(self.log_ev, axis=0)

    @property
    def design_log_m(self) -> np.ndarray:
        """log p(y | design) of each design, rho and tau integrated, (C,)."""
        return self.log_m

    @property
    def log_evidence(self) -> float:
        """log p(y) with a uniform prior over the designs and ``noise_prior`` over rho."""
        return float(logsumexp(self.log_ev) - np.log(self.x.shape[0]))

    def loo(self, log_prior: np.ndarray | None = None, design_stride: int = 1) -> np.ndarray:
        """Exact leave-one-out log predictive densities :math:`\\log p(y_i \\mid y_{-i})` under
        the autocorrelated noise, (T,): :meth:`loo_lppd`'s first item."""
        return self.loo_lppd(log_prior, design_stride)[0]

    def loo_lppd(self, log_prior: np.ndarray | None = None, design_stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
        r"""Exact LOO and lppd (:func:`loo_from_cells`), (T,) each, summed over the (rho, tau,
        design) cells: given a cell the per-step means are jointly Gaussian but not
        independent, so :math:`p(y_i \mid y_{-i}, \text{cell})` is the conditional of the
        non-factorised normal (:meth:`Level.loo_density` with the rotation's map; at rho = 0
        :class:`Level`'s closed form), and a left-out step is predicted from its neighbours
        too. ``log_prior`` and ``design_stride`` as in :meth:`Level.loo`."""
        weights = self.noise_prior.log_weights()
        parts = []
        for k, (level, rho) in enumerate(zip(self.parts, self.rho, strict=True)):
            out_map = None
            if rho != 0.0:
                q, lam = ar1_rotation(self.steps, float(rho))
                out_map = q / np.sqrt(lam)[None, :]  # Q Lambda^(-1/2): y = Q Lambda^(1/2) y_rotated
            parts.append((level, level.loo_mass(log_prior, design_stride) + self._jac[k] + weights[k], out_map))
        return loo_from_cells(parts, design_stride)

    def rho_mass(self) -> np.ndarray:
        """Posterior mass of each rho of the grid (K,)."""
        lp = logsumexp(self.log_ev, axis=1)
        return np.exp(lp - logsumexp(lp))

    def draw(self, rng: np.random.Generator, c_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """rho | c, then tau and beta | c, rho; (D,), (D, p), (D,)."""
        k = pick_in_columns(rng, self.log_ev, c_idx)
        tau = np.empty(len(c_idx))
        beta = np.empty((len(c_idx), self.x.shape[2]))
        for k_ in np.unique(k):
            sel = k == k_
            tau[sel], beta[sel] = self.parts[k_].draw(rng, c_idx[sel])
        return tau, beta, self.rho[k]


def curve_prior(priors: dict[str, np.ndarray], j: int, jump: bool) -> tuple[np.ndarray, np.ndarray]:
    """Prior means (p,) and sds (C, p) of level ``j``'s curve parameters in :func:`design`'s
    column order; the late slope's sd is per candidate (``PlateauPriors.resolve``)."""
    m0 = np.array([priors["start_mu"][j], priors["level_mu"][j], 0.0] + ([0.0] if jump else []))
    late = np.asarray(priors["late_slope_sd"][j], dtype=float).reshape(-1)
    cols = [np.full(late.shape, priors["start_sd"][j]), np.full(late.shape, priors["level_sd"][j]), late]
    if jump:
        cols.append(np.full(late.shape, priors["jump_sd"][j]))
    return m0, np.stack(cols, axis=-1)


def hinge_line_log_bf(
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    grid: np.ndarray,
    priors: dict[str, np.ndarray],
    jump: bool,
    hinge_log_evidence: np.ndarray | None = None,
    noise_prior: RhoPrior | None = None,
) -> np.ndarray:
    r"""log Bayes factor of the change-point curve against a straight line, per level.

    Both are Gaussian on the same per-step means with the same variance model
    (:math:`s_t^2/n_t + \tau^2`, :math:`\tau \sim HalfNormal`). The line is parameterised
    by its values at the first and the last step with the change-point model's priors
    on the start and on the value at the change point; the change-point model averages
    over ``grid`` with a uniform prior. Exact up to the tau quadrature.
    ``hinge_log_evidence`` (levels,): the change-point model's log evidence when already
    computed (:func:`sample_gaussian_exact` returns it), so only the line's is computed.
    ``noise_prior``: both under AR(1) step noise (:class:`DependentLevel`).
    """
    dependent = (steps, noise_prior) if noise_prior is not None else None
    x = design(steps, grid, float(steps[0]), jump)
    out = np.empty(y.shape[0])
    for j in range(y.shape[0]):
        m0, sd0 = curve_prior(priors, j, jump)
        tau_sd = float(priors["tau_sd"][j])
        hinge = (
            log_evidence(
                y[j], var_mean[j], x, m0, sd0, tau_sd, hinge=(steps, grid, jump, float(steps[0])), dependent=dependent
            )
            if hinge_log_evidence is None
            else float(hinge_log_evidence[j])
        )
        line = log_evidence(y[j], var_mean[j], design_line(steps), m0[:2], sd0[:1, :2], tau_sd, dependent=dependent)
        out[j] = hinge - line
    return out


def line_change_draws(
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    priors: dict[str, np.ndarray],
    j: int,
    rng: np.random.Generator,
    n: int,
    noise_prior: RhoPrior | None = None,
) -> np.ndarray:
    """Posterior draws (n,) of the change from the first to the last step under the straight
    line of :func:`hinge_line_log_bf` (same priors and noise model): what "no change over
    the window" is read from when the line is the better model."""
    m0, sd0 = curve_prior(priors, j, False)
    x = design_line(steps)
    tau_sd = float(priors["tau_sd"][j])
    level: Level | DependentLevel = (
        Level(y, var_mean, x, m0[:2], sd0[:1, :2], tau_sd)
        if noise_prior is None
        else DependentLevel(y, var_mean, x, m0[:2], sd0[:1, :2], tau_sd, steps, noise_prior=noise_prior)
    )
    beta = level.draw(rng, np.zeros(n, dtype=int))[1]
    return beta[:, 1] - beta[:, 0]


def log_evidence(
    y: np.ndarray,
    var_mean: np.ndarray,
    x: np.ndarray,
    m0: np.ndarray,
    sd0: np.ndarray,
    tau_sd: float,
    hinge: tuple[np.ndarray, np.ndarray, bool, float] | None = None,
    dependent: tuple[np.ndarray, RhoPrior] | None = None,
) -> float:
    """log p(y) of one level under designs ``x`` (C, T, p) with a uniform prior over the C
    designs: the curve parameters integrated analytically and tau by quadrature (the
    exact marginal likelihood used for Bayes factors between curve shapes); ``hinge`` as
    for :class:`Level`; ``dependent`` ``(steps, noise_prior)``: AR(1) step noise
    (:class:`DependentLevel`)."""
    if dependent is not None:
        return DependentLevel(
            y, var_mean, x, m0, sd0, tau_sd, dependent[0], hinge=hinge, noise_prior=dependent[1]
        ).log_evidence
    return Level(y, var_mean, x, m0, sd0, tau_sd, hinge=hinge).log_evidence


def sample_gaussian_exact(
    *,
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    grid: np.ndarray,
    priors: dict[str, np.ndarray],
    jump: bool,
    pooled: bool,
    spread_sd: float,
    levels: list[str],
    chains: int,
    draws: int,
    seed: int,
    evidence_weight: float = 1.0,
    noise_prior: RhoPrior | None = None,
) -> tuple[DeferredInferenceData, dict[str, Any], np.ndarray, dict[str, np.ndarray]]:
    """Independent posterior draws of the Gaussian plateau model.

    Same model and variable names as ``plateau.build_plateau_model`` with
    ``likelihood="gaussian"``: ``start``, ``value_at_changepoint``, ``late_slope``,
    ``jump`` (with ``jump``), ``tau`` (dims level) and ``changepoint_spread`` (pooled).
    ``priors`` is ``PlateauPriors.resolve``'s output. Pooled: the common change point
    and the spread see the levels' evidence raised to ``evidence_weight``
    (``plateau.level_dependence``); each level's change point given them, and its curve
    given its change point, see that level's data at full weight. Returns
    (the InferenceData's groups, held without importing ArviZ: a ``DeferredInferenceData``;
    timings; each level's log evidence under separate change points,
    :attr:`Level.log_evidence`; the change points): ``index`` (draws, levels) are the
    drawn change points' positions in ``grid`` (each curve draw was drawn given its
    change point), ``mass`` (levels, C) the posterior mass of each candidate, averaged over
    the draws of its exact conditional (given c0 and s when pooled; exact when separate).
    Every step is linear in the number of candidates but the pooled model's sum over
    (c0, c), done one spread value at a time (memory C x C).
    """
    t_start = time.perf_counter()
    lv = exact_levels(y, var_mean, steps, grid, priors, jump, noise_prior)
    return draw_exact(
        lv,
        grid=grid,
        jump=jump,
        pooled=pooled,
        spread_sd=spread_sd,
        levels=levels,
        chains=chains,
        draws=draws,
        seed=seed,
        evidence_weight=evidence_weight,
        noise_prior=noise_prior,
        t_start=t_start,
    )


def exact_levels(
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    grid: np.ndarray,
    priors: dict[str, np.ndarray],
    jump: bool,
    noise_prior: RhoPrior | None,
) -> list[Level | DependentLevel]:
    """Each level's exact posterior over (change point, tau[, rho]) cells with its evidence
    (:class:`Level`, or :class:`DependentLevel` under AR(1) noise): what
    :func:`sample_gaussian_exact` computes before it draws."""
    t0 = float(steps[0])
    x = design(steps, grid, t0, jump)
    lv: list[Level | DependentLevel] = []
    for j in range(len(y)):
        prior = curve_prior(priors, j, jump)
        hinge = (steps, grid, jump, t0)
        tau_sd = float(priors["tau_sd"][j])
        lv.append(
            Level(y[j], var_mean[j], x, *prior, tau_sd, hinge=hinge)
            if noise_prior is None
            else DependentLevel(y[j], var_mean[j], x, *prior, tau_sd, steps, hinge=hinge, noise_prior=noise_prior)
        )
    return lv


def draw_exact(
    lv: list[Level | DependentLevel],
    *,
    grid: np.ndarray,
    jump: bool,
    pooled: bool,
    spread_sd: float,
    levels: list[str],
    chains: int,
    draws: int,
    seed: int,
    evidence_weight: float,
    noise_prior: RhoPrior | None,
    t_start: float,
) -> tuple[DeferredInferenceData, dict[str, Any], np.ndarray, dict[str, np.ndarray]]:
    """The draws of :func:`sample_gaussian_exact` from its levels (:func:`exact_levels`);
    returns what it returns (the timings from ``t_start``)."""
    rng = np.random.default_rng([seed, 20261130])
    n_draws = chains * draws
    post: dict[str, np.ndarray] = {}
    log_m = np.stack([level.log_m for level in lv])  # (L, C)
    if pooled:
        m_scaled = np.exp(log_m - log_m.max(axis=1, keepdims=True))  # (L, C), max 1 per level

        def logpost(u: np.ndarray) -> np.ndarray:  # (G, C0)
            per_level = pooled_evidence(grid, m_scaled, curves.effective_spread(np, np.exp(u)))
            with np.errstate(divide="ignore"):
                out = evidence_weight * np.log(per_level).sum(axis=1)  # the levels' evidence
            return out + (_log_halfnormal(np.exp(u), spread_sd) + u)[:, None]

        u, du, lp = _scale_grid(logpost, np.log(1e-3), np.log(8.0 * spread_sd))
        g, c0 = np.divmod(_pick_one(rng, lp, n_draws), len(grid))
        spread = np.exp(u[g] + du * (rng.random(n_draws) - 0.5))
        lw_draw = -0.5 * (grid[None, :] - grid[c0][:, None]) ** 2 / (spread[:, None] ** 2 + curves.SPREAD_FLOOR_SQ)
        # each level's change point given c0 and s: its draws, and the average of these
        # conditionals (the Rao-Blackwellised posterior mass of the change point)
        log_cond = [lw_draw + lm[None, :] for lm in log_m]  # (D, C) per level, unnormalised
        cond = [np.exp(lc - lc.max(axis=1, keepdims=True)) for lc in log_cond]
        c_idx = np.stack([sample_rows(rng, c_) for c_ in cond])  # (L, D)
        mass = np.stack([(c_ / c_.sum(axis=1, keepdims=True)).mean(axis=0) for c_ in cond])
        post[S.CHANGEPOINT_SPREAD] = spread
    else:
        c_idx = np.stack([_pick_one(rng, level.log_m, n_draws) for level in lv])
        mass = np.exp(log_m - logsumexp(log_m, axis=1, keepdims=True))
    drawn: list[tuple[np.ndarray, ...]] = [level.draw(rng, c_idx[j]) for j, level in enumerate(lv)]
    beta = np.stack([d[1] for d in drawn], axis=1)  # (D, L, p)
    post.update(
        start=beta[..., 0],
        value_at_changepoint=beta[..., 1],
        late_slope=beta[..., 2],
        tau=np.stack([d[0] for d in drawn], axis=1),
    )
    if noise_prior is not None:  # DependentLevel.draw: (tau, beta, rho)
        post[S.NOISE_RHO] = np.stack([d[-1] for d in drawn], axis=1)
    if jump:
        post["jump"] = beta[..., 3]
    shaped = {k: v.reshape(chains, draws, *v.shape[1:]) for k, v in post.items()}
    dims = {k: [S.LEVEL] for k in shaped if k != S.CHANGEPOINT_SPREAD}
    # the groups az.from_dict would make, held without importing ArviZ until an
    # InferenceData is asked for (PlateauFit.idata)
    idata = DeferredInferenceData(posterior_dataset(shaped, coords={S.LEVEL: levels}, dims=dims))
    idata.posterior.attrs["sampler"] = "exact"
    elapsed = time.perf_counter() - t_start
    return (
        idata,
        {"compile": 0.0, "sample": elapsed, "sampler": "exact"},
        np.array([level.log_evidence for level in lv]),
        {"index": c_idx.T, "mass": mass},
    )


def sample_either_shape(
    *,
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    grid: np.ndarray,
    priors: dict[str, np.ndarray],
    levels: list[str],
    chains: int,
    draws: int,
    seed: int,
    pooled: bool,
    spread_sd: float,
    gate: float | None = None,
    evidence_weight: float = 1.0,
    noise_prior: RhoPrior | None = None,
) -> tuple[DeferredInferenceData, dict[str, Any], np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    r"""Independent draws of the hinge and the jump averaged by their exact evidence.

    The model is the mixture of the two shapes with prior probability 1/2 each: the
    continuous hinge, and the hinge with a jump at the break (the jump model's extra
    parameter is paid for through its prior). :func:`sample_gaussian_exact` draws each
    shape; each draw of the mixture comes from the jump model with probability
    :math:`P(\text{jump} \mid y) = \operatorname{expit}(\log Z_{jump} - \log Z_{hinge})`,
    per level with separate change points (the levels are separate models), jointly over
    the levels when they are pooled (the levels' evidences summed). The hinge's draws carry
    ``jump = 0``. The change point's posterior mass is the same mixture of the two masses,
    and each level's log evidence :math:`\log(Z_{hinge}/2 + Z_{jump}/2)`.

    ``gate``: a level's draws come from the jump model only where its Bayes factor
    (jump : hinge; the levels' product when pooled) is at least ``gate``; elsewhere the
    level is the hinge alone (a selection rule that keeps the hinge unless the data
    decisively favour the jump). None: always averaged.

    Returns what :func:`sample_gaussian_exact` returns, and ``shape``: ``p_jump``,
    ``weight`` (the probability each draw is taken from the jump: ``p_jump``, or 0 below the
    gate) and ``log_bf_jump_vs_hinge`` per level.
    """
    t_start = time.perf_counter()
    lv_hinge = exact_levels(y, var_mean, steps, grid, priors, False, noise_prior)
    lv_jump = exact_levels(y, var_mean, steps, grid, priors, True, noise_prior)
    common: dict[str, Any] = {
        "grid": grid,
        "pooled": pooled,
        "spread_sd": spread_sd,
        "levels": levels,
        "chains": chains,
        "draws": draws,
        "seed": seed,
        "evidence_weight": evidence_weight,
        "noise_prior": noise_prior,
    }
    log_bf = np.array([b.log_evidence for b in lv_jump]) - np.array([a.log_evidence for a in lv_hinge])
    weight_bf = np.full(len(levels), log_bf.sum()) if pooled else log_bf
    p_jump = curves.expit(weight_bf)
    weight = p_jump if gate is None else np.where(weight_bf >= np.log(gate), p_jump, 0.0)
    shape = {"p_jump": p_jump, "weight": weight, "log_bf_jump_vs_hinge": log_bf}
    hinge = draw_exact(lv_hinge, jump=False, t_start=t_start, **common)
    if not weight.any():  # no draw is taken from the jump: the hinge's draws (jump 0) are the mixture's
        post = hinge[0].posterior
        post["jump"] = (post["late_slope"].dims, np.zeros(post["late_slope"].shape))
        return (*hinge, shape)
    jump = draw_exact(lv_jump, jump=True, t_start=time.perf_counter(), **common)
    rng = np.random.default_rng([seed, 20261205])
    n_draws = chains * draws
    u = rng.random((n_draws, 1)) if pooled else rng.random((n_draws, len(levels)))
    pick = np.broadcast_to(u < weight[None, :], (n_draws, len(levels)))  # (D, L): this draw from the jump
    post_h, post_j = hinge[0].posterior, jump[0].posterior
    shaped: dict[str, np.ndarray] = {}
    for name in post_j.data_vars:
        v_j = post_j[name].to_numpy()
        v_h = post_h[name].to_numpy() if name in post_h else np.zeros_like(v_j)
        take = pick.reshape(chains, draws, len(levels))
        if v_j.ndim == 2:  # no level dimension (the pooled spread): the levels share the pick
            take = take[..., 0]
        shaped[str(name)] = np.where(take, v_j, v_h)
    dims = {k: [S.LEVEL] for k in shaped if k != S.CHANGEPOINT_SPREAD}
    idata = DeferredInferenceData(posterior_dataset(shaped, coords={S.LEVEL: levels}, dims=dims))
    idata.posterior.attrs["sampler"] = "exact"
    cps = {
        "index": np.where(pick, jump[3]["index"], hinge[3]["index"]),
        "mass": weight[:, None] * jump[3]["mass"] + (1.0 - weight[:, None]) * hinge[3]["mass"],
    }
    # the evidence of what was drawn: the mixture where it was averaged, else the hinge's
    evidence = np.where(weight > 0, np.logaddexp(hinge[2], jump[2]) - np.log(2.0), hinge[2])
    timings = {"compile": 0.0, "sample": time.perf_counter() - t_start, "sampler": "exact"}
    return idata, timings, evidence, cps, shape


# ====================================================================== no-change-point curves
#: columns of the alternatives' designs, in order (the NUTS model's variable names)
ALTERNATIVE_COLUMNS = {"linear": ("start", "slope"), "exponential": ("start", "asymptote")}
#: the exponential's time-scale grid covers its prior's centre +- this many prior sds
SCALE_PRIOR_REACH = 6.0
#: a bounded asymptote is drawn by rejection for at most this many rounds of draws
MAX_REJECTION_ROUNDS = 1000


def design_exponential(t: np.ndarray, t0: float, log_scale: np.ndarray) -> np.ndarray:
    """Designs (K, T, 2) of :func:`curves.exp_saturation` for each log time scale: columns
    start :math:`e^{-(t - t_0)/k}` and asymptote :math:`1 - e^{-(t - t_0)/k}`."""
    e = np.exp(-(t[None, :] - t0) / np.exp(log_scale)[:, None])
    return np.stack([e, 1.0 - e], axis=-1)


def alternative_level(
    kind: str,
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    m0: np.ndarray,
    sd0: np.ndarray,
    tau_sd: float,
    log_scale_mu: float,
    log_scale_sd: float,
    noise_prior: RhoPrior | None = None,
) -> tuple[Level | DependentLevel, np.ndarray | None, np.ndarray | None]:
    """One level of a no-change-point curve (:func:`sample_alternative_exact`): its
    :class:`Level` (or, with ``noise_prior``, :class:`DependentLevel`: AR(1) step noise) and,
    for the exponential, the grid of its log time scale and the log prior density on it (up
    to a constant; the line: None, None). ``m0``, ``sd0`` (2,): the two linear parameters'
    prior means and sds."""
    t0 = float(steps[0])
    sd0 = np.asarray(sd0, dtype=float)[None, :]

    def level_of(x: np.ndarray) -> Level | DependentLevel:
        if noise_prior is None:
            return Level(y, var_mean, x, m0, sd0, tau_sd)
        return DependentLevel(y, var_mean, x, m0, sd0, tau_sd, steps, noise_prior=noise_prior)

    if kind == "linear":
        return level_of(np.stack([np.ones_like(steps), steps - t0], axis=-1)[None]), None, None

    def log_prior(u: np.ndarray) -> np.ndarray:
        return -0.5 * ((u - log_scale_mu) / log_scale_sd) ** 2

    built: list[Level | DependentLevel] = []  # the level of each pass: the last is the refined grid's

    def logpost(u: np.ndarray) -> np.ndarray:
        built.append(level_of(design_exponential(steps, t0, u)))
        return built[-1].log_m + log_prior(u)

    # the same two-pass grid as tau's (coarse over the prior's reach, refined to the support)
    reach = SCALE_PRIOR_REACH * log_scale_sd
    u, _, _ = _scale_grid(logpost, log_scale_mu - reach, log_scale_mu + reach)
    return built[-1], u, log_prior(u)


#: the grid of the exponential's log time scale in :func:`exponential_approach`: the coarse
#: pass's points and those of each of its two refinements
SMOOTH_POINTS = (24, 40)
#: ... the third pass covers the second's points within this many log units of its largest
SMOOTH_SUPPORT_LOG = 12.0


def exponential_approach(
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    m0: np.ndarray,
    sd0: np.ndarray,
    tau_sd: float,
    log_scale_mu: float,
    log_scale_sd: float,
    noise_prior: RhoPrior | None = None,
) -> SmoothCurve:
    r"""log p(y) of one level under the exponential approach :math:`A - (A - a)
    e^{-(t - t_0)/k}` (a curve that bends smoothly, with no break), the evidence the
    plateau fit weighs against its change point.

    Given :math:`k` the curve is linear in the start :math:`a` and the asymptote :math:`A`
    (prior means ``m0``, sds ``sd0``, (2,)), integrated analytically as in :class:`Level`;
    :math:`\tau` by its quadrature; the step noise independent or AR(1) with
    ``noise_prior`` (:class:`DependentLevel`); :math:`\log k \sim N(\mu_k, \sigma_k)` by a
    three-pass grid (:data:`SMOOTH_POINTS`: a coarse pass, then twice refined to the
    support) over :math:`\mu_k \pm` :data:`SCALE_PRIOR_REACH` :math:`\sigma_k`. Comparable
    with :attr:`Level.log_evidence` and :attr:`DependentLevel.log_evidence` of the
    change-point curve on the same data (the same constants are kept). Returns the
    :class:`SmoothCurve` of the last pass (its evidence and draws)."""
    t0 = float(steps[0])
    log_norm = -0.5 * np.log(2.0 * np.pi) - np.log(log_scale_sd)
    built: list[tuple[np.ndarray, Level | DependentLevel]] = []

    def logpost(u: np.ndarray, locate: bool = True) -> np.ndarray:  # log p(y | k) + log p(log k), (G,)
        x = design_exponential(steps, t0, u)
        points, prior = (LOCATE_TAU_POINTS, locating_prior(noise_prior)) if locate else (SHAPE_TAU_POINTS, noise_prior)
        level = design_level(y, var_mean, steps, x, m0, sd0, tau_sd, prior, points)
        built.append((x, level))
        return level.design_log_m + log_norm - 0.5 * ((u - log_scale_mu) / log_scale_sd) ** 2

    reach = SCALE_PRIOR_REACH * log_scale_sd
    u, _, lp = _scale_grid(logpost, log_scale_mu - reach, log_scale_mu + reach, *SMOOTH_POINTS)
    # a third pass where the second put all but e^-12 of the mass: the posterior of log k can
    # be 30 times narrower than its prior while AR(1) noise gives it tails that keep the
    # second pass wide (its points then several posterior sds apart); the first two only
    # locate the mass (coarse tau grids, every other AR(1) coefficient)
    u = refined_grid(u, lp, SMOOTH_SUPPORT_LOG, SMOOTH_POINTS[1])
    lp = logpost(u, locate=False) + np.log(u[1] - u[0])
    return SmoothCurve(float(logsumexp(lp)), built[-1][0], lp - logsumexp(lp), built[-1][1])


def design_level(
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    x: np.ndarray,
    m0: np.ndarray,
    sd0: np.ndarray,
    tau_sd: float,
    noise_prior: RhoPrior | None,
    points: tuple[int, int] | None = None,
) -> Level | DependentLevel:
    """The designs ``x`` (K, T, 2) of a two-parameter curve linear in its parameters (prior
    means ``m0``, sds ``sd0``, (2,)) as one :class:`Level` (``noise_prior`` None: independent
    step noise) or :class:`DependentLevel` (AR(1)); ``points``: the tau grid's two passes
    (default :class:`Level`'s). ``design_log_m`` is each design's evidence."""
    sd0 = np.asarray(sd0, dtype=float).reshape(1, 2)
    if noise_prior is None:
        return Level(y, var_mean, x, m0, sd0, tau_sd, points=points or (COARSE_POINTS, FINE_POINTS))
    return DependentLevel(y, var_mean, x, m0, sd0, tau_sd, steps, noise_prior=noise_prior, points=points)


@dataclass(frozen=True)
class SmoothCurve:
    """A smooth curve with no break (:func:`exponential_approach`,
    :func:`logistic_approach`): its log evidence, the designs ``x`` (K, T, 2) of its
    final grid, their normalised log posterior mass ``log_mass`` (K,; prior, likelihood and
    quadrature weights) and the :class:`Level` / :class:`DependentLevel` over them."""

    log_evidence: float
    x: np.ndarray
    log_mass: np.ndarray
    level: Level | DependentLevel

    def draw_curves(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` posterior draws of the curve's mean at the logged steps, (size, T): a
        grid point by its mass, then tau (and rho) and the two linear parameters given it."""
        k = _pick_one(rng, self.log_mass, size)
        beta = self.level.draw(rng, k)[1]
        return (self.x[k] * beta[:, None, :]).sum(axis=-1)


def design_logistic(t: np.ndarray, midpoint: np.ndarray, log_width: np.ndarray) -> np.ndarray:
    r"""Designs (K, T, 2) of :func:`curves.logistic_rise` for each (midpoint, log width) pair
    (K,): columns start :math:`1 - \sigma((t - m)/w)` and level :math:`\sigma((t - m)/w)`."""
    width = np.exp(log_width)[:, None]
    s = curves.logistic_rise(t[None, :], start=0.0, level=1.0, midpoint=midpoint[:, None], width=width)
    return np.stack([1.0 - s, s], axis=-1)


#: the S-shaped candidate's grid over (midpoint, log width) in :func:`logistic_approach`:
#: the coarse pass and each of its two refinements to the support (20 x 20 was 0.06 log
#: units off a dense quadrature under AR(1) noise whose midpoint posterior spans half the
#: run; 24 x 24 0.003: tests/models/test_plateau.py)
SIGMOID_POINTS = ((16, 8), (24, 24))
#: ... the tau grid's two passes while the support is located (with every other AR(1)
#: coefficient, :func:`locating_prior`) ...
LOCATE_TAU_POINTS = (12, 24)
#: ... and in the last pass (within 1e-7 log units of the full tau grids; 12 + 24 points: 5e-3)
SHAPE_TAU_POINTS = (16, 32)


def logistic_approach(
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    m0: np.ndarray,
    sd0: np.ndarray,
    tau_sd: float,
    log_width_mu: float,
    log_width_sd: float,
    log_width_bounds: tuple[float, float],
    noise_prior: RhoPrior | None = None,
) -> SmoothCurve:
    r"""log p(y) of one level under the S-shaped rise :math:`s + (L - s)\,\sigma((t -
    m)/w)` (:func:`curves.logistic_rise`: slow, fast, slow, with no break), the second
    smooth shape the plateau fit weighs against its change point.

    Given :math:`(m, w)` the curve is linear in the start :math:`s` and the level :math:`L`
    (prior means ``m0``, sds ``sd0``, (2,)), integrated as in :class:`Level`, with the step
    noise independent or AR(1) (``noise_prior``, :class:`DependentLevel`). Priors: the
    midpoint uniform over the logged steps (the bend is seen), :math:`\log w \sim
    N(\mu_w, \sigma_w)` truncated to ``log_width_bounds`` (the plateau fit's: no steeper
    than a few logged steps, a jump being the break's; no slower than an S inside the
    run, a line being the line's). The (m, log w) plane is summed on a grid (:data:`SIGMOID_POINTS`: a coarse pass,
    then twice refined to the box holding all but :math:`e^{-12}` of the mass, the last by
    the trapezoid rule). Comparable with :func:`exponential_approach` and the change-point
    curve's evidence on the same data. Returns the :class:`SmoothCurve` of the last pass."""
    t0, t1 = float(steps[0]), float(steps[-1])
    span = max(t1 - t0, 1.0)
    u_lo, u_hi = log_width_bounds
    a, b = (u_lo - log_width_mu) / log_width_sd, (u_hi - log_width_mu) / log_width_sd
    log_norm = -0.5 * np.log(2.0 * np.pi) - np.log(log_width_sd) - np.log(ndtr(b) - ndtr(a))
    log_norm -= np.log(span) if t1 > t0 else 0.0  # the midpoint's uniform density

    built: list[tuple[np.ndarray, Level | DependentLevel]] = []

    def logpost(mid: np.ndarray, u: np.ndarray, points: tuple[int, int], prior: RhoPrior | None) -> np.ndarray:
        mm, uu = np.meshgrid(mid, u, indexing="ij")  # (M, U)
        x = design_logistic(steps, mm.ravel(), uu.ravel())
        level = design_level(y, var_mean, steps, x, m0, sd0, tau_sd, prior, points)
        built.append((x, level))
        return level.design_log_m.reshape(mm.shape) + log_norm - 0.5 * ((uu - log_width_mu) / log_width_sd) ** 2

    (n_mid, n_u), (r_mid, r_u) = SIGMOID_POINTS
    mid, u = np.linspace(t0, t1, n_mid), np.linspace(u_lo, u_hi, n_u)
    for _ in range(2):
        lp = logpost(mid, u, LOCATE_TAU_POINTS, locating_prior(noise_prior))
        mid = refined_grid(mid, lp, SMOOTH_SUPPORT_LOG, r_mid) if t1 > t0 else mid
        u = refined_grid(u, lp.T, SMOOTH_SUPPORT_LOG, r_u)
    lp = logpost(mid, u, SHAPE_TAU_POINTS, noise_prior)
    # trapezoid weights on both axes (the box may end at the prior's edge)
    lp = (lp + log_trapezoid(mid)[:, None] + log_trapezoid(u)[None, :]).ravel()
    log_z = logsumexp(lp)
    return SmoothCurve(float(log_z), built[-1][0], lp - log_z, built[-1][1])


def locating_prior(noise_prior: RhoPrior | None) -> RhoPrior | None:
    """The AR(1) prior the smooth curves' support-locating passes use: every other
    coefficient of ``noise_prior`` (the first and the last kept), the same mass on rho = 0;
    None for independent noise. Only where the mass lies is read from those passes."""
    if noise_prior is None or len(noise_prior.rho) < 4:
        return noise_prior
    rho = noise_prior.rho[::2] if len(noise_prior.rho) % 2 else (*noise_prior.rho[:-1:2], noise_prior.rho[-1])
    return RhoPrior(rho=tuple(rho), p_independent=noise_prior.p_independent)


def log_trapezoid(pts: np.ndarray) -> np.ndarray:
    """log trapezoid weights of evenly spaced points (0 for a single point)."""
    if len(pts) < 2:
        return np.zeros(len(pts))
    w = np.full(len(pts), np.log(pts[1] - pts[0]))
    w[[0, -1]] += np.log(0.5)
    return w


def sample_alternative_exact(
    *,
    kind: str,
    y: np.ndarray,
    var_mean: np.ndarray,
    steps: np.ndarray,
    m0: np.ndarray,
    sd0: np.ndarray,
    tau_sd: np.ndarray,
    log_scale_mu: np.ndarray,
    log_scale_sd: float,
    levels: list[str],
    chains: int,
    draws: int,
    seed: int,
    asymptote_bounds: tuple[float, float] | None = None,
) -> tuple[az.InferenceData, dict[str, Any]]:
    r"""Independent posterior draws of a no-change-point curve (``plateau.fit_alternative``).

    Both curves are linear in two parameters given the rest: the line
    :math:`a + \beta (t - t_0)` outright, the exponential approach
    :math:`A - (A - a) e^{-(t - t_0)/k}` given its time scale :math:`k`. So, per level, the two
    are integrated analytically as in :class:`Level` and :math:`\tau` by quadrature; the
    exponential's :math:`\log k \sim N(\mu_k, \sigma_k)` by a two-pass grid like
    :math:`\tau`'s (:data:`COARSE_POINTS` over the prior's centre +- :data:`SCALE_PRIOR_REACH`
    sds, then :data:`FINE_POINTS` over the posterior's support), a draw taking a uniform
    position inside its cell and its curve parameters given that exact :math:`k`.

    Parameters
    ----------
    kind : {"linear", "exponential"}
        The curve.
    y, var_mean : numpy.ndarray
        (levels, steps) per-step means and their sampling variances.
    steps : numpy.ndarray
        The steps.
    m0, sd0 : numpy.ndarray
        (levels, 2) prior means and sds of the two linear parameters
        (:data:`ALTERNATIVE_COLUMNS` order).
    tau_sd : numpy.ndarray
        (levels,) HalfNormal scales of the step overdispersion.
    log_scale_mu : numpy.ndarray
        (levels,) prior centres of the exponential's log time scale.
    log_scale_sd : float
        Its prior sd.
    levels : list of str
        Level names.
    chains, draws : int
        Independent streams and draws per stream.
    seed : int
        Seeds the draws.
    asymptote_bounds : (float, float), optional
        The exponential's asymptote's prior truncated to this range (a rate's [0, 1]): its
        posterior is the untruncated one conditioned on the range, drawn exactly by
        rejection; the share rejected per level is in the posterior's attrs
        (``asymptote_outside_fraction``), and fewer than one draw in
        :data:`MAX_REJECTION_ROUNDS` inside is a ValueError (the curve does not saturate
        inside the range).

    Returns
    -------
    (arviz.InferenceData, dict)
        The posterior (the two parameters, ``log_scale`` for the exponential, ``tau``; dims
        level) and timings.
    """
    t_start = time.perf_counter()
    if kind not in ALTERNATIVE_COLUMNS:
        raise ValueError(f"kind must be one of {list(ALTERNATIVE_COLUMNS)}, got {kind!r}")
    rng = np.random.default_rng([seed, 20261202])
    t0 = float(steps[0])
    n_draws = chains * draws
    post: dict[str, list[np.ndarray]] = {name: [] for name in (*ALTERNATIVE_COLUMNS[kind], "tau")}
    if kind == "exponential":
        post["log_scale"] = []
    outside = np.zeros(len(levels))  # per level: the share of draws outside the bounds
    for j in range(len(levels)):
        lv, u, log_prior = alternative_level(
            kind, y[j], var_mean[j], steps, m0[j], sd0[j], float(tau_sd[j]), float(log_scale_mu[j]), log_scale_sd
        )
        assert isinstance(lv, Level)  # independent step noise (no noise_prior)
        if u is None or log_prior is None:  # the line
            tau, beta = lv.draw(rng, np.zeros(n_draws, dtype=int))
        else:
            kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            need, drawn, outside[j] = n_draws, 0, 0
            while need > 0:  # the asymptote's prior truncated to the bounds: draws outside rejected
                idx = _pick_one(rng, lv.log_m + log_prior, n_draws)
                log_scale = u[idx] + (u[1] - u[0]) * (rng.random(n_draws) - 0.5)
                tau, beta = lv.draw(rng, idx, x=design_exponential(steps, t0, log_scale))
                ok = np.ones(n_draws, dtype=bool)
                if asymptote_bounds is not None:
                    ok = (beta[:, 1] >= asymptote_bounds[0]) & (beta[:, 1] <= asymptote_bounds[1])
                take = np.flatnonzero(ok)[:need]
                kept.append((tau[take], beta[take], log_scale[take]))
                drawn, outside[j], need = drawn + n_draws, outside[j] + int((~ok).sum()), need - len(take)
                if need > 0 and drawn >= MAX_REJECTION_ROUNDS * n_draws:
                    lo, hi = asymptote_bounds or (-np.inf, np.inf)
                    raise ValueError(
                        f"{levels[j]}: the exponential approach's asymptote lies outside the metric's range "
                        f"[{lo:g}, {hi:g}] in {outside[j] / drawn:.1%} of its posterior: this curve does not saturate "
                        "inside the range"
                    )
            outside[j] /= drawn
            tau, beta, log_scale = (np.concatenate([k[i] for k in kept]) for i in range(3))
            post["log_scale"].append(log_scale)
        for c, name in enumerate(ALTERNATIVE_COLUMNS[kind]):
            post[name].append(beta[:, c])
        post["tau"].append(tau)
    shaped = {k: np.stack(v, axis=1).reshape(chains, draws, len(levels)) for k, v in post.items()}
    idata = az.from_dict(posterior=shaped, coords={S.LEVEL: levels}, dims={k: [S.LEVEL] for k in shaped})
    idata.posterior.attrs["sampler"] = "exact"
    if asymptote_bounds is not None:
        idata.posterior.attrs["asymptote_bounds"] = [float(b) for b in asymptote_bounds]
        idata.posterior.attrs["asymptote_outside_fraction"] = [float(v) for v in outside]
    return idata, {"compile": 0.0, "sample": time.perf_counter() - t_start, "sampler": "exact"}
