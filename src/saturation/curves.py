"""Curve math as plain functions, shared by the simulators and the model likelihoods.

The functions written with plain arithmetic (``hinge``, ``exp_saturation``) accept
NumPy arrays and PyTensor tensors alike, so the simulator and the PyMC models evaluate
exactly the same curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# number of Gauss-Hermite nodes for logit-normal expectations: absolute error below 1e-13 for
# sd <= 1.5, 1e-10 at sd 2, 2e-7 at sd 3, 7e-6 at sd 4 (expit's poles at +-i pi limit the
# convergence; measured against adaptive quadrature, tests/test_curves.py)
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(60)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()


def relu(x: Any) -> Any:
    """max(x, 0) with plain arithmetic (works on tensors)."""
    return (x + abs(x)) / 2


def hinge(
    t: Any,
    *,
    start: Any,
    early_slope: Any,
    late_slope: Any,
    changepoint: Any,
    t0: Any = 0.0,
    jump: Any = 0.0,
) -> Any:
    """Piecewise-linear curve with one break.

    Notes
    -----
    .. math::

        f(t) = a + \\beta_1 (\\min(t, c) - t_0) + \\beta_2 \\max(t - c, 0)
               + \\delta\\,[t \\ge c]

    with ``start`` :math:`a = f(t_0)`, early slope :math:`\\beta_1`, late slope
    :math:`\\beta_2`, change point :math:`c` and jump :math:`\\delta` (0: continuous
    hinge; non-zero: the study's split model with separate intercepts).
    """
    after = relu(t - changepoint)
    before = t - after  # == min(t, c)
    out = start + early_slope * (before - t0) + late_slope * after
    if not (isinstance(jump, int | float) and jump == 0):
        out = out + jump * (t >= changepoint)
    return out


def hinge_through(t: Any, c: Any, a: Any, h: Any, b2: Any, d: Any, t0: float) -> Any:
    """:func:`hinge` through start ``a`` (at ``t0``) and value ``h`` at the change point ``c``
    (before any jump ``d``): the early slope is :math:`(h - a)/(c - t_0)`, ``b2`` the late
    slope. The plateau model's parameterisation (its likelihood and calibrate's simulator)."""
    return hinge(t, start=a, early_slope=(h - a) / (c - t0), late_slope=b2, changepoint=c, t0=t0, jump=d)


#: squared floor of the pooled model's change-point spread, in steps^2 (half a grid step)
SPREAD_FLOOR_SQ = 0.25


def effective_spread(xp: Any, spread: Any) -> Any:
    r"""The pooled change points' spread in steps, floored smoothly at half a grid step:
    :math:`\sqrt{s^2 + 0.25}`. Below that every level sits on the common change point, and
    the floor keeps the weights :math:`\exp(-(c_l - c_0)^2 / 2 s_{eff}^2)` finite for tiny
    :math:`s`. ``xp``: numpy or pytensor.tensor."""
    return xp.sqrt(spread**2 + SPREAD_FLOOR_SQ)


def exp_saturation(t: Any, *, asymptote: Any, start: Any, scale: Any, t0: Any = 0.0) -> Any:
    """Exponential approach to an asymptote.

    Notes
    -----
    :math:`f(t) = a - (a - b)\\exp(-(t - t_0)/k)` with asymptote :math:`a`, start
    :math:`b = f(t_0)` and time scale :math:`k > 0`.
    """
    return asymptote - (asymptote - start) * _exp(-(t - t0) / scale)


def logistic_rise(t: Any, *, start: Any, level: Any, midpoint: Any, width: Any) -> Any:
    r"""An S-shaped rise on the step axis (NumPy).

    Notes
    -----
    :math:`f(t) = s + (L - s)\,\sigma((t - m)/w)` with :math:`\sigma` the logistic
    function: ``start`` :math:`s` the level long before the midpoint :math:`m`, ``level``
    :math:`L` the level it saturates at, ``width`` :math:`w > 0` the time scale (12 % to
    88 % of the rise within :math:`m \pm 2w`). Translation-invariant on the step axis,
    unlike :func:`sigmoid_saturation` (logistic in log compute from step 1): the plateau
    fit's S-shaped candidate for a window that may start anywhere.
    """
    return start + (level - start) * expit((np.asarray(t, dtype=float) - midpoint) / width)


def _exp(x: Any) -> Any:
    """exp for NumPy values and PyTensor tensors alike."""
    if isinstance(x, np.ndarray | float | int | np.floating):
        return np.exp(x)
    import pytensor.tensor as pt  # deferred: curves stays numpy-only for the simulators and the CLI

    return pt.exp(x)


def piecewise_linear(t: np.ndarray, knots: dict[float, float] | Sequence[tuple[float, float]]) -> np.ndarray:
    """Linear interpolation through ``(step, value)`` knots, constant beyond the ends."""
    pairs = sorted(knots.items() if isinstance(knots, dict) else knots)
    xs = np.array([p[0] for p in pairs], dtype=float)
    ys = np.array([p[1] for p in pairs], dtype=float)
    return np.interp(np.asarray(t, dtype=float), xs, ys)


def sigmoid_saturation(x: Any, *, r0: Any, asymptote: Any, efficiency: Any, midpoint: Any) -> Any:
    r"""The sigmoidal compute-performance curve of Khatri et al. (2025, "The Art of Scaling
    Reinforcement Learning Compute for LLMs", arXiv 2510.13786, eq. 1), plain arithmetic.

    Notes
    -----
    .. math::

        R(x) = R_0 + \frac{A - R_0}{1 + (C_{mid} / x)^B}, \qquad x > 0

    ``r0`` :math:`R_0` is the value as :math:`x \to 0`, ``asymptote`` :math:`A` where the
    run saturates (:math:`x \to \infty`), ``midpoint`` :math:`C_{mid}` the ``x`` at which
    half of the gain :math:`A - R_0` is reached and ``efficiency`` :math:`B > 0` how
    steeply it gets there. ``x`` is the training step counted from 1 (or compute).
    """
    return r0 + (asymptote - r0) / (1 + (midpoint / x) ** efficiency)


def logit(p: Any) -> Any:
    p = np.asarray(p, dtype=float)
    return np.log(p) - np.log1p(-p)


def expit(x: Any) -> Any:
    """The logistic function :math:`1 / (1 + e^{-x})`, elementwise, without importing SciPy
    (0.1-0.2 s at start-up): ``scipy.special.expit``'s formula, equal to it within 4e-16
    (below x = -709, where :math:`e^{-x}` overflows, 0 instead of a subnormal number);
    ``tests/test_mathfn.py`` checks it."""
    x = x if hasattr(x, "__array_ufunc__") else np.asarray(x, dtype=float)  # a DataArray stays one
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def logitnormal_mean(loc: Any, sd: Any) -> np.ndarray:
    """E[expit(loc + sd * Z)], Z ~ N(0, 1), by Gauss-Hermite quadrature (``sd`` a scalar
    or an array broadcasting against ``loc``)."""
    loc = np.asarray(loc, dtype=float)
    sd = np.asarray(sd, dtype=float)
    # expit(loc + sd z) = 1 / (1 + exp(-loc) exp(-sd z)): one exp of the (large) loc array
    # instead of one per node, and the nodes summed one at a time (no (..., nodes) array;
    # 5x faster on a transfer fit's population curves); exponents clipped at 700, where
    # expit is 0 or 1 to double precision, so nothing overflows to inf * 0
    out = np.zeros(np.broadcast_shapes(loc.shape, sd.shape))
    a = np.exp(-np.clip(loc, -700.0, 700.0))
    term = np.empty_like(out)
    with np.errstate(over="ignore"):  # a * b may overflow to inf: the term is then 0
        for z, w in zip(_GH_NODES, _GH_WEIGHTS, strict=True):
            np.multiply(a, np.exp(-np.clip(sd * z, -700.0, 700.0)), out=term)
            term += 1.0
            np.divide(w, term, out=term)
            out += term
    return out


def crossover_steps(gap: Any, steps: Any) -> np.ndarray:
    """First step after which ``gap`` (..., T) stays negative; NaN where the last gap is
    not negative (no crossover). Vectorised over leading dims."""
    gap = np.asarray(gap, dtype=float)
    steps = np.asarray(steps, dtype=float)
    neg = gap < 0
    # index of the last non-negative gap (-1 if none), the crossover is the step after it
    last_nonneg = np.where((~neg).any(axis=-1), gap.shape[-1] - 1 - np.argmax((~neg)[..., ::-1], axis=-1), -1)
    out = steps[np.minimum(last_nonneg + 1, gap.shape[-1] - 1)]
    return np.where(neg[..., -1], out, np.nan)


def logitnormal_location(mean: Any, sd: float, *, tol: float = 1e-12) -> np.ndarray:
    """Inverse of :func:`logitnormal_mean` in ``loc``: the conditional logit location whose
    population (marginal) mean over N(0, sd) task effects equals ``mean``."""
    mean = np.asarray(mean, dtype=float)
    if np.any((mean <= 0) | (mean >= 1)):
        raise ValueError("logitnormal_location: means must lie strictly inside (0, 1)")
    lo = np.full(mean.shape, -40.0)
    hi = np.full(mean.shape, 40.0)
    for _ in range(200):
        mid = (lo + hi) / 2
        above = logitnormal_mean(mid, sd) > mean
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
        if np.all(hi - lo < tol):
            break
    return (lo + hi) / 2


#: Gauss-Hermite nodes of the location's Newton step (a smooth integrand: 20 nodes are exact
#: to about 1e-10 for sd <= 3)
_NEWTON_NODES, _NEWTON_WEIGHTS = np.polynomial.hermite_e.hermegauss(20)
_NEWTON_WEIGHTS = _NEWTON_WEIGHTS / _NEWTON_WEIGHTS.sum()
#: Newton steps of :func:`logitnormal_location_newton`: with 3 the mean is off by at most 1e-7
#: at sd 1 and 4e-4 at sd 2 (means 0.005-0.995; tests/test_curves.py)
NEWTON_STEPS = 3


def logitnormal_location_newton(xp: Any, mean: Any, sd: Any, *, steps: int = NEWTON_STEPS) -> Any:
    r"""The conditional logit location whose mean over N(0, ``sd``) effects is ``mean``
    (``sd`` a scalar, or an array of ``mean``'s shape), in closed form (``xp``: numpy or
    pytensor.tensor, so that a likelihood can differentiate it).

    Notes
    -----
    Start from the probit approximation :math:`L_0 = \mathrm{logit}(m)\sqrt{1 + \pi s^2/8}`
    (error up to 0.01 in the mean for :math:`s \le 2`) and take ``steps`` Newton steps on
    :math:`g(L) = E[\mathrm{expit}(L + sZ)] - m` with 20-node Gauss-Hermite quadrature,
    :math:`L_{j+1} = L_j - g(L_j)/g'(L_j)`. :func:`logitnormal_location` (bisection) is the
    reference it is tested against.
    """
    loc = (xp.log(mean) - xp.log1p(-mean)) * xp.sqrt(1 + np.pi * sd**2 / 8)
    spread = (sd[..., None] if getattr(sd, "ndim", 0) else sd) * _NEWTON_NODES
    for _ in range(steps):
        p = 1 / (1 + xp.exp(-(loc[..., None] + spread)))
        g = (p * _NEWTON_WEIGHTS).sum(axis=-1) - mean
        dg = (p * (1 - p) * _NEWTON_WEIGHTS).sum(axis=-1)
        loc = loc - g / dg
    return loc


def pass_at_k_beta(mean: Any, concentration: Any, k: int) -> np.ndarray:
    """pass@k = E[1 - (1 - p)^k] for per-prompt success p ~ Beta(mean*kappa, (1-mean)*kappa).

    Notes
    -----
    :math:`E[(1-p)^k] = B(a, b + k) / B(a, b)` with :math:`a = m\\kappa`,
    :math:`b = (1-m)\\kappa`.
    """
    from scipy import special  # here: the light commands never need it

    a = np.asarray(mean, dtype=float) * np.asarray(concentration, dtype=float)
    b = (1 - np.asarray(mean, dtype=float)) * np.asarray(concentration, dtype=float)
    return 1 - np.exp(special.betaln(a, b + k) - special.betaln(a, b))


def beta_concentration_for_pass_at_k(mean: Any, pass_at_k: Any, k: int) -> np.ndarray:
    """Concentration kappa such that :func:`pass_at_k_beta` (mean, kappa, k) == pass_at_k.

    pass@k increases with kappa from ``mean`` (kappa -> 0) to ``1 - (1 - mean)^k``
    (kappa -> inf); targets outside that range raise ValueError.
    """
    mean = np.asarray(mean, dtype=float)
    target = np.asarray(pass_at_k, dtype=float)
    upper = 1 - (1 - mean) ** k
    if np.any((target <= mean) | (target >= upper)):
        raise ValueError(f"pass@{k} must lie strictly between the mean success rate and 1-(1-mean)^{k}")
    lo = np.full(np.broadcast(mean, target).shape, np.log(1e-4))
    hi = np.full_like(lo, np.log(1e6))
    for _ in range(200):
        mid = (lo + hi) / 2
        above = pass_at_k_beta(mean, np.exp(mid), k) > target
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    return np.exp((lo + hi) / 2)


def normal_pdf(x: Any, loc: Any, scale: Any) -> Any:
    """Normal density at ``x`` (numpy): ``scipy.stats.norm.pdf(x, loc, scale)`` computed the
    same way (standardise, ``exp(-z**2 / 2) / sqrt(2 pi)``, divide by the scale; NaN where
    the scale is not positive), without importing scipy.stats; tested equal to it."""
    x, loc, scale = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (x, loc, scale)))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (x - loc) / scale
        out = np.exp(-(z**2) / 2.0) / np.sqrt(2 * np.pi) / scale
    out = np.where(scale > 0, out, np.nan)
    return out[()] if out.ndim == 0 else out


def normal_logpdf(xp: Any, y: Any, mu: Any, var: Any) -> Any:
    r"""Pointwise :math:`\log N(y; \mu, \sigma^2)` with variance ``var`` (``xp``: numpy or
    pytensor.tensor): the Gaussian log-likelihood of the plateau model and its alternatives."""
    return -0.5 * (xp.log(2 * np.pi * var) + (y - mu) ** 2 / var)
