"""The plateau model's data adapters: trials, aggregates or a logged per-step series as
per-step statistics (:class:`StepData`, :func:`step_data`), checked for what a fit needs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from saturation import schema as S
from saturation._lazy import lazy
from saturation.aggregate import aggregate, phase_summary, select_phase

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
    from scipy import stats
else:  # imported on first use: the exact Gaussian path needs none of them (ARCHITECTURE.md)
    az, pm, pytensor, pt, stats = map(lazy, ("arviz", "pymc", "pytensor", "pytensor.tensor", "scipy.stats"))


#: names of the zero-one-inflated Beta sufficient statistics (see aggregate.BOUNDED_SUFFIXES)
BOUNDED_STATS = ("n0", "n1", "slogy", "slog1my")


@dataclass
class StepData:
    """Per-step inputs of the plateau model (one row per level).

    Parameters
    ----------
    steps : numpy.ndarray
        (T,) the steps with data.
    levels : list of str
        The L levels (rows).
    y : numpy.ndarray
        (L, T) per-step means.
    n : numpy.ndarray
        (L, T) trials behind each mean (``inf`` when only a logged series is available).
    var_mean : numpy.ndarray
        (L, T) squared standard error of each mean from its within-step variance,
        :math:`s_t^2 / n_t` (0 for a logged series: the variance is then the overdispersion alone).
    response : str
        The modelled variable.
    k : numpy.ndarray, optional
        (L, T) successes (binary responses only).
    summary : dict
        What the data were (trials, graded, sources, steps) for the fit's attrs.
    bounded : dict, optional
        Zero-one-inflated Beta statistics (counts of 0 and 1, sums of log y and
        log(1 - y) inside (0, 1)) when every value lies in [0, 1].
    """

    steps: np.ndarray
    levels: list[str]
    y: np.ndarray
    n: np.ndarray
    var_mean: np.ndarray
    response: str
    k: np.ndarray | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    bounded: dict[str, np.ndarray] | None = None

    @property
    def binary(self) -> bool:
        return self.k is not None


#: fewest steps with data that a plateau fit accepts
MIN_STEPS = 4


#: largest per-step mean a plateau fit accepts: the likelihood squares differences of means
#: and sums them over steps and candidates; beyond this, rescale the metric
MAX_ABS_MEAN = 1e12


def _one_run_of_trials(data: xr.Dataset, run: str | None, summary: dict[str, Any]) -> xr.Dataset:
    """The trials of one run (``run`` or the only one) and one phase (:func:`~saturation.aggregate.select_phase`),
    their counts and the phases left out recorded in ``summary``."""
    data = select_phase(data)
    runs = sorted(map(str, np.unique(data[S.RUN].values))) if S.RUN in data.coords else []
    if run is not None and run not in runs:
        raise ValueError(f"run {run!r} is not in the data (runs: {runs})")
    if len(runs) > 1:
        if run is None:
            raise ValueError(f"several runs {runs}: pass run=")
        data = data.isel({S.TRIAL: data[S.RUN].values == run})
    summary.update(
        n_trials=int(data.sizes[S.TRIAL]),
        n_graded=int(data[S.GRADED].sum()),
        sources=json.loads(data.attrs.get(S.ATTR_SOURCES, "[]")),
        synthetic=data.attrs.get(S.ATTR_SYNTHETIC, ""),
        **phase_summary(data),
    )
    return data


def _from_aggregate(
    stats_: xr.Dataset, response: str, levels: list[str] | None, run: str | None, summary: dict[str, Any]
) -> tuple[Any, ...]:
    """(steps, levels, y, n, var_mean, k, bounded) from per-step sufficient statistics."""
    for dim in [d for d in stats_[f"{response}_n"].dims if d not in (S.STEP, S.LEVEL)]:
        if stats_.sizes[dim] != 1:
            if run is None or dim != S.RUN:
                raise ValueError(f"aggregate has several {dim} values; select one first")
            stats_ = stats_.sel({dim: run})
        else:
            stats_ = stats_.isel({dim: 0})
    has_level = S.LEVEL in stats_[f"{response}_n"].dims
    all_levels = [str(v) for v in stats_[S.LEVEL].values] if has_level else [response]
    levels = levels or all_levels
    unknown = sorted(set(levels) - set(all_levels))
    if unknown:
        raise KeyError(f"unknown level(s) {unknown}; have {all_levels}")

    def get(suffix: str) -> np.ndarray:
        v = stats_[f"{response}_{suffix}"]
        if has_level:
            v = v.sel({S.LEVEL: levels}).transpose(S.LEVEL, S.STEP)
        return np.atleast_2d(v.to_numpy().astype(float))

    n, s, ss = get("n"), get("sum"), get("sumsq")
    steps = stats_[S.STEP].to_numpy()
    _check_levels_share_steps(n, steps, levels, response)
    keep = (n > 0).all(axis=0)
    n, s, ss, steps = n[:, keep], s[:, keep], ss[:, keep], steps[keep]
    bounded: dict[str, np.ndarray] | None = None
    if all(f"{response}_{b}" in stats_ for b in BOUNDED_STATS):
        bounded = {b: get(b)[:, keep] for b in BOUNDED_STATS}
        if not all(np.isfinite(v).all() for v in bounded.values()):
            bounded = None
    y = s / n
    ss_dev = (ss - s * s / n).clip(min=0)
    pooled = ss_dev.sum(axis=1, keepdims=True) / np.maximum((n - 1).sum(axis=1, keepdims=True), 1)
    var_within = np.where(n >= 2, ss_dev / np.maximum(n - 1, 1), pooled)
    binary = bool(np.allclose(ss, s)) and bool(np.allclose(s, np.round(s)))
    summary.setdefault("n_graded", int(n[0].sum()))
    if "n_trials" in stats_:
        summary.setdefault("n_trials", int(stats_["n_trials"].sum()))
    return steps, levels, y, n, var_within / n, (np.round(s) if binary else None), bounded


def _check_levels_share_steps(n: np.ndarray, steps: np.ndarray, levels: list[str], response: str) -> None:
    """Levels fitted together share their steps: a level without data at a step where another
    has some is an error naming the level and the steps (dropping those steps for every level
    would change every level's curve without a word)."""
    some, every = (n > 0).any(axis=0), (n > 0).all(axis=0)
    if (some == every).all():
        return
    parts = []
    for j, level in enumerate(levels):
        lost = [int(v) for v in steps[some & (n[j] == 0)]]
        if lost:
            shown = ", ".join(map(str, lost[:8])) + (f", ... ({len(lost)} steps)" if len(lost) > 8 else "")
            parts.append(f"level {level!r} at step(s) {shown}")
    raise ValueError(
        f"no graded {response!r} value for {'; '.join(parts)}, where other levels have data: levels fitted together "
        "share their steps; fit such a level on its own (--levels / levels=) or the others without it"
    )


#: a logged series longer than this is fitted on the means of at most this many runs of
#: consecutive points (:func:`bin_series`): the exact sampler's AR(1) noise model costs the cube of the
#: points (3,907 points: more than 5 minutes and 10 GB; 500: seconds)
MAX_SERIES_POINTS = 500


def bin_series(steps: np.ndarray, values: np.ndarray, max_points: int = MAX_SERIES_POINTS) -> tuple[Any, ...]:
    """A long series as the means of at most ``max_points`` runs of consecutive points.

    Each run holds at least ``w = ceil(n / max_points)`` points: the ``n`` points are split
    into ``n // w`` runs of as equal a count as possible (sizes differ by at most one, in
    order, so the bin means' noise variances differ by at most a factor (w + 1) / w <= 1.5);
    each run becomes one point at the mean of its steps with the mean of its values. A
    series of ``max_points`` points or fewer is returned as it is.

    Returns
    -------
    tuple
        ``(steps, values, sizes)``: the binned steps and values and each bin's count of points.
    """
    steps, values = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if len(steps) <= max_points:
        return steps, values, np.ones(len(steps), dtype=np.int64)
    n_bins = len(steps) // -(-len(steps) // max_points)
    edges = np.round(np.linspace(0, len(steps), n_bins + 1)).astype(np.int64)
    sizes = np.diff(edges)
    return np.add.reduceat(steps, edges[:-1]) / sizes, np.add.reduceat(values, edges[:-1]) / sizes, sizes


def _from_series(data: xr.Dataset, response: str, run: str | None, summary: dict[str, Any]) -> tuple[Any, ...]:
    """(steps, levels, y, n, var_mean, k, bounded) from a logged per-step series (no
    within-step variance: n is infinite, the variance is the overdispersion alone). A series
    of more than :data:`MAX_SERIES_POINTS` points is fitted on its bin means
    (:func:`bin_series`; ``summary["binned"]`` says how)."""
    if response not in data:
        raise KeyError(f"no variable {response!r} (have {sorted(map(str, data.data_vars))})")
    series = data[response]
    if S.RUN in series.dims:
        series = series.sel({S.RUN: run}) if run is not None else series.squeeze(S.RUN, drop=True)
    series = series.dropna(S.STEP)
    series = series.isel({S.STEP: np.isfinite(series[S.STEP].to_numpy().astype(float))}).sortby(S.STEP)
    steps, values, sizes = bin_series(series[S.STEP].to_numpy(), series.to_numpy())
    y = values[None, :]
    summary.update(series=True, metric_name=series.attrs.get("metric_name", response))
    if len(sizes) < series.sizes[S.STEP]:
        summary["binned"] = {
            "points": int(series.sizes[S.STEP]),
            "bins": len(sizes),
            "points_per_bin": [int(sizes.min()), int(sizes.max())],
        }
    return steps, [response], y, np.full_like(y, np.inf), np.zeros_like(y), None, None


def _check_fittable(
    steps: np.ndarray, y: np.ndarray, n: np.ndarray, var_mean: np.ndarray, response: str, n_trials: int
) -> None:
    if len(steps) == 0:
        raise ValueError(
            f"no graded trials with a {response!r} value: nothing to fit ({n_trials} trials, all ungraded or empty)"
        )
    if len(steps) < MIN_STEPS:
        raise ValueError(
            f"only {'one step' if len(steps) == 1 else f'{len(steps)} steps'} with a {response!r} value "
            f"({[int(v) for v in steps]}); a change point needs at least {MIN_STEPS}"
        )
    seen = np.isfinite(y)
    overflowed = bool(np.any(~seen & (n > 0))) or not np.all(np.isfinite(var_mean[seen]))
    if overflowed or (seen.any() and np.max(np.abs(y[seen])) > MAX_ABS_MEAN):
        big = float(np.max(np.abs(y[seen]))) if seen.any() else float("nan")
        what = "per-step sums overflow" if overflowed else f"per-step means reach {big:.3g},"
        raise ValueError(
            f"{response!r}: {what} beyond what a fit can use in double precision (values beyond about 1e154 "
            f"in one trial, or means beyond {MAX_ABS_MEAN:g}); rescale the metric"
        )
    if np.ptp(y) == 0 and not np.any(var_mean > 0):
        raise ValueError(
            f"{response!r} is constant ({float(y.flat[0]):g}) at every step and in every trial: "
            "there is no curve to fit"
        )


def step_data(
    data: xr.Dataset,
    *,
    response: str = S.F1,
    levels: list[str] | None = None,
    run: str | None = None,
) -> StepData:
    """Per-step means and sufficient statistics from trials, aggregates or a series.

    Parameters
    ----------
    data : xarray.Dataset
        A trial Dataset (dim ``trial``), the output of :func:`~saturation.aggregate.aggregate`
        (``<response>_n``, ``_sum``, ``_sumsq``), or a per-step series Dataset (dims run/step,
        one variable per metric). Only graded trials enter.
    response : str
        The per-trial or per-level variable to fit.
    levels : list of str, optional
        Levels to keep (default: all).
    run : str, optional
        The run to fit when the data hold several.

    Returns
    -------
    StepData
        One row per level, one column per step with data.
    """

    summary: dict[str, Any] = {"response": response}
    # values near the double limit overflow the sums of squares; _check_fittable names them
    with np.errstate(over="ignore", invalid="ignore"):
        if S.TRIAL in data.dims:
            data = aggregate(_one_run_of_trials(data, run, summary), by=(S.STEP,))
        if f"{response}_n" in data:
            steps, levels, y, n, var_mean, k, bounded = _from_aggregate(data, response, levels, run, summary)
        else:
            steps, levels, y, n, var_mean, k, bounded = _from_series(data, response, run, summary)
    _check_fittable(steps, y, n, var_mean, response, summary.get("n_trials", 0))
    if response in data.variables and "metric_name" in data[response].attrs:  # a series: the key as logged
        summary["metric_name"] = str(data[response].attrs["metric_name"])
    summary.update(steps=[int(steps[0]), int(steps[-1])], n_steps=len(steps), levels=levels)
    return StepData(np.asarray(steps, dtype=float), list(levels), y, n, var_mean, response, k, summary, bounded)
