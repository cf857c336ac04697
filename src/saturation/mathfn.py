"""The normal and Student-t functions the light commands need, without importing SciPy.

``scipy.special`` costs 0.1-0.2 s at start-up (its array-API layer), a tenth of what
``saturation plateau`` or ``saturation describe`` take from the prompt to the answer, for
the normal and Student-t tails of the frequentist cross-checks and the normal quantiles of
rank normalisation (the logistic function is ``curves.expit``). Each function here is
tested against SciPy's (``tests/test_mathfn.py``); the modelling code that needs more of
SciPy imports it where it is used.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

_STANDARD_NORMAL = statistics.NormalDist()


def ndtr(x: float) -> float:
    r"""The standard normal distribution function :math:`\Phi(x) = \tfrac12
    \operatorname{erfc}(-x/\sqrt2)` of a scalar (relative error against SciPy's 2e-14 above
    x = -8, at most 5e-13 in the far lower tail).

    Parameters
    ----------
    x : float
        The point.

    Returns
    -------
    float
        :math:`P(Z \le x)`.
    """
    return 0.5 * math.erfc(-float(x) / math.sqrt(2.0))


def ndtri(p: Any) -> np.ndarray:
    r"""The standard normal quantile :math:`\Phi^{-1}(p)`, elementwise: the standard
    library's (Wichura's AS 241, relative error about 1e-16) at each distinct value of
    ``p`` (rank-normalised draws hold at most twice as many distinct values as draws),
    :math:`\mp\infty` at 0 and 1, NaN outside [0, 1] or at NaN.

    Parameters
    ----------
    p : array_like
        Probabilities.

    Returns
    -------
    numpy.ndarray
        The quantiles, shaped as ``p``.
    """
    p = np.asarray(p, dtype=float)
    values, where = np.unique(p, return_inverse=True)
    out = np.full(len(values), np.nan)
    inside = (values > 0.0) & (values < 1.0)
    out[inside] = [_STANDARD_NORMAL.inv_cdf(v) for v in values[inside].tolist()]
    out[values == 0.0], out[values == 1.0] = -np.inf, np.inf
    return out[where.reshape(p.shape)]


def t_cdf(t: float, df: float) -> float:
    r"""Student's t distribution function :math:`P(T_\nu \le t)` of a scalar
    (``scipy.special.stdtr(df, t)``), from the regularised incomplete beta function:
    :math:`P(T_\nu > |t|) = \tfrac12 I_{\nu/(\nu + t^2)}(\nu/2, 1/2)`. Relative error of
    the smaller tail against SciPy's: 1e-13 up to 30 degrees of freedom, 1e-12 up to 1,000,
    2e-10 at 1e5 (the cancellation of three log-gamma values); near :math:`t = 0` it is the
    more accurate of the two (at 1 degree of freedom, the Cauchy distribution, exact to
    1e-14 where SciPy's is 3e-9 off).

    Parameters
    ----------
    t : float
        The point.
    df : float
        Degrees of freedom (> 0).

    Returns
    -------
    float
        The probability.
    """
    t, df = float(t), float(df)
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    t2 = t * t
    # x = df / (df + t^2) and 1 - x, each computed directly (1 - x rounds to 0 for small t)
    tail = 0.5 * _beta_reg(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))
    return tail if t < 0 else 1.0 - tail


def _beta_reg(a: float, b: float, x: float, y: float) -> float:
    r"""The regularised incomplete beta function :math:`I_x(a, b)`, ``y`` being :math:`1 - x`
    computed without cancellation: its continued fraction (DLMF 8.17.22) evaluated by the
    modified Lentz method, on the side of the mean where it converges fast
    (:math:`I_x(a, b) = 1 - I_{1-x}(b, a)`)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, y) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of :func:`_beta_reg` (its terms d_1, d_2, ... of DLMF 8.17.22)."""
    tiny, eps = 1e-300, 1e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")
