"""Frequentist cross-checks: the reference study's split OLS and Davies' test for a change in slope."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

# the t and normal tails without SciPy (scipy.stats costs 0.7 s at start-up, scipy.special
# 0.1-0.2 s, which every command that reads data paid)
from saturation.mathfn import ndtr, t_cdf


def ols_slope(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Ordinary least squares of y on x with intercept: slope, SE, t, p, intercept, n."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = len(x)
    if n < 3:
        raise ValueError(f"ols_slope needs at least 3 points, got {n}")
    xc = x - x.mean()
    sxx = float(xc @ xc)
    slope = float(xc @ (y - y.mean())) / sxx
    intercept = float(y.mean() - slope * x.mean())
    resid = y - intercept - slope * x
    s2 = float(resid @ resid) / (n - 2)
    se = float(np.sqrt(s2 / sxx))
    t = slope / se if se > 0 else np.inf * np.sign(slope)
    p = 2 * t_cdf(-abs(t), n - 2)

    def se_fit(x0: float) -> float:
        return float(np.sqrt(s2 * (1 / n + (x0 - x.mean()) ** 2 / sxx)))

    return {
        "slope": slope,
        "se": se,
        "t": float(t),
        "p": p,
        "intercept": intercept,
        "n": n,
        "x_first": float(x.min()),
        "x_last": float(x.max()),
        "se_fit_first": se_fit(float(x.min())),
        "se_fit_last": se_fit(float(x.max())),
    }


def split_ols(steps: np.ndarray, values: np.ndarray, split: float) -> pd.DataFrame:
    """The study's method: separate OLS on per-step means either side of a split.

    Parameters
    ----------
    steps, values : array
        Per-step x and y (e.g. the graded-only mean F1 of one level per step).
    split : number
        Early segment: ``step < split``; late segment: ``step >= split``.

    Returns
    -------
    pandas.DataFrame
        Rows ``early`` and ``late`` with slope, se, t, p, intercept, n and the fitted
        value at the segment's first and last step (``fit_first``, ``fit_last``) with
        their standard errors (``se_fit_first``, ``se_fit_last``).
    """
    steps = np.asarray(steps, dtype=float)
    values = np.asarray(values, dtype=float)
    rows = {}
    for name, mask in (("early", steps < split), ("late", steps >= split)):
        r = ols_slope(steps[mask], values[mask])
        r["fit_first"] = r["intercept"] + r["slope"] * r["x_first"]
        r["fit_last"] = r["intercept"] + r["slope"] * r["x_last"]
        rows[name] = r
    return pd.DataFrame.from_dict(rows, orient="index")


#: Davies' test: the R package segmented's default number of evaluation points
DAVIES_POINTS = 10


def davies_test(
    x: np.ndarray,
    y: np.ndarray,
    *,
    k: int = DAVIES_POINTS,
    alternative: str = "two.sided",
    weights: np.ndarray | None = None,
    values: np.ndarray | None = None,
) -> dict[str, float]:
    r"""Davies' test for a change in the slope (R ``segmented::davies.test`` on ``lm(y ~ x)``).

    For each of ``k`` candidate breaks :math:`\psi` evenly spaced from the second smallest
    to the second largest ``x``, the linear model is refitted with the extra term
    :math:`(x - \psi)_+` and its t statistic :math:`t(\psi)` recorded. With
    :math:`M = \max_\psi |t(\psi)|` (two-sided) the p-value is Davies' (1987) upper bound
    :math:`2\,[P(T_\nu > M) + V \frac{(1-u)^{(\nu-1)/2}\,\Gamma(\nu/2 + 1/2)}{2\Gamma(\nu/2)\sqrt\pi}]`
    with :math:`u = M^2/(n - 3 + M^2)`, :math:`\nu = n - 3` and :math:`V` the total variation of
    :math:`\arcsin\sqrt{Z^2/(Z^2 + \mathrm{RSS})}` over the grid: the formulas of
    segmented 1.6's ``daviesLM`` (used for n <= 300), reproduced so that the numbers
    agree with R's (``tests/test_frequentist.py`` checks them against recorded R output).
    For n > 300 segmented switches to a Wald statistic with normal tails; so does this
    function.

    Returns ``{"p_value", "best", "statistic", "n_points"}``: ``best`` is the candidate
    with the largest statistic, ``statistic`` that statistic (M, signed for one-sided
    alternatives).
    """
    if alternative not in ("two.sided", "less", "greater"):
        raise ValueError(f"alternative must be 'two.sided', 'less' or 'greater', got {alternative!r}")
    if k < 2:
        raise ValueError("Davies' test needs k >= 2 evaluation points")
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(w)
    x, y, w = x[keep], y[keep], w[keep]
    n = len(x)
    if n < 5:
        raise ValueError(f"Davies' test needs at least 5 points, got {n}")
    xs = np.sort(x)
    psi = np.linspace(xs[1], xs[-2], k) if values is None else np.asarray(values, dtype=float)
    df_res = n - 3
    t_stat = np.full(len(psi), np.nan)
    ratio = np.full(len(psi), np.nan)
    for i, p in enumerate(psi):
        design = np.column_stack([np.maximum(x - p, 0.0), np.ones(n), x])
        xtx = (design * w[:, None]).T @ design
        try:
            inv = np.linalg.inv(xtx)
        except np.linalg.LinAlgError:
            continue
        beta = inv @ (design * w[:, None]).T @ y
        dev = float(np.sum(w * (y - design @ beta) ** 2))
        if n > 300:  # segmented's daviesGLM with a gaussian family, Wald statistic
            t_stat[i] = beta[0] / np.sqrt(dev / df_res * inv[0, 0])
            continue
        sigma = np.sqrt(dev / df_res)
        t_stat[i] = beta[0] / (sigma * np.sqrt(inv[0, 0]))
        z = beta[0] / np.sqrt(inv[0, 0])
        ratio[i] = z**2 / (z**2 + dev)
    ok = np.isfinite(t_stat)
    psi, t_stat, ratio = psi[ok], t_stat[ok], ratio[ok]
    if alternative == "less":
        i = int(np.argmin(t_stat))
        m = float(t_stat[i])
    elif alternative == "greater":
        i = int(np.argmax(t_stat))
        m = float(t_stat[i])
    else:
        i = int(np.argmax(np.abs(t_stat)))
        m = float(abs(t_stat[i]))
    if n > 300:
        v = float(np.sum(np.abs(np.diff(t_stat))))
        p_naive = ndtr(m) if alternative == "less" else ndtr(-m)
        approx = v * np.exp(-(m**2) / 2) / np.sqrt(8 * np.pi)
    else:
        v = float(np.sum(np.abs(np.diff(np.arcsin(np.sqrt(ratio))))))
        p_naive = t_cdf(m, df_res) if alternative == "less" else t_cdf(-m, df_res)
        u = m**2 / ((n - 3) + m**2)
        approx = (
            v
            * ((1 - u) ** ((df_res - 1) / 2))
            * math.exp(math.lgamma(df_res / 2 + 0.5) - math.lgamma(df_res / 2))
            / (2 * np.sqrt(np.pi))
        )
    p_adj = (p_naive + approx) * (1 if alternative != "two.sided" else 2)
    return {"p_value": float(min(p_adj, 1.0)), "best": float(psi[i]), "statistic": m, "n_points": len(psi)}
