"""Frequentist cross-checks: the reference study's split OLS."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats


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
    p = float(2 * stats.t.sf(abs(t), n - 2))
    def se_fit(x0: float) -> float:
        return float(np.sqrt(s2 * (1 / n + (x0 - x.mean()) ** 2 / sxx)))

    return {"slope": slope, "se": se, "t": float(t), "p": p, "intercept": intercept, "n": n,
            "x_first": float(x.min()), "x_last": float(x.max()),
            "se_fit_first": se_fit(float(x.min())), "se_fit_last": se_fit(float(x.max()))}


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
