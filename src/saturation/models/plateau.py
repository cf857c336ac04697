"""Bayesian segmented regression of a per-step metric: did it plateau, when, how flat?

Model (per level :math:`l`, per step :math:`t` with :math:`n_t` graded trials):

.. math::

    \\bar y_{lt} \\sim \\mathcal N\\big(\\mu_l(t; c_l),\\; \\sigma_{w,l}^2 / n_{lt} + \\tau_l^2\\big),
    \\qquad
    \\mu_l(t; c) = a_l + \\beta_{1l}(\\min(t, c) - t_0) + \\beta_{2l}\\max(t - c, 0)
                   + \\delta_l [t \\ge c]

with the within-step variance :math:`\\sigma_{w,l}^2` informed exactly by the within-step
sums of squares (sufficient statistics), step overdispersion :math:`\\tau_l`, jump
:math:`\\delta_l = 0` for the continuous hinge. An unknown change point is discrete on
the grid of observed steps leaving at least ``min_segment`` steps on each side, and is
marginalised exactly: :math:`p(y_l\\mid\\theta) = \\sum_c w_c\\, p(y_l \\mid c, \\theta)`.
Separate change points use uniform :math:`w_c`; the shared (pooled) model puts
:math:`w_{c} \\propto \\exp(-(c - c_0)^2 / 2 s^2)` around a common :math:`c_0` with spread
:math:`s`. The posterior over the change point is recovered per draw from the
conditional :math:`p(c\\mid\\theta, y)` and averaged (Rao-Blackwellised).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, field, replace
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import special

from saturation import curves, progress
from saturation import schema as S
from saturation._lazy import DeferredInferenceData, lazy
from saturation.aggregate import aggregate, phase_summary, select_phase
from saturation.configs import PlateauConfig, PlateauPriors, SamplerConfig, VerdictRule
from saturation.frequentist import davies_test
from saturation.limits import (
    OptionError,
    config_or_keywords,
    fit_memory_problem,
    fit_time_problem,
)
from saturation.models._exact import (
    LOO_TAU_STRIDE,
    RHO_GRID,
    Level,
    alternative_level,
    curve_prior,
    design,
    hinge_line_log_bf,
    line_change_draws,
    sample_alternative_exact,
    sample_either_shape,
    sample_gaussian_exact,
    sample_rows,
)
from saturation.models.persist import FigureView, FitObject, TableView
from saturation.models.sampling import (
    diagnostics,
    interval,
    kde_at,
    sample_model,
    stamp_attrs,
    warn_if_not_converged,
)
from saturation.summary import convergence_words, data_text, format_interval, interval_cell, json_safe, short_repr

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
    from scipy import stats
else:  # imported on first use: the exact Gaussian path needs none of them (ARCHITECTURE.md)
    az, pm, pytensor, pt, stats = map(lazy, ("arviz", "pymc", "pytensor", "pytensor.tensor", "scipy.stats"))

CONTINUITIES = S.CONTINUITIES
LIKELIHOODS = S.LIKELIHOODS
#: names of the zero-one-inflated Beta sufficient statistics (see aggregate.BOUNDED_SUFFIXES)
BOUNDED_STATS = ("n0", "n1", "slogy", "slog1my")
#: default region of practical equivalence: the late segment gains less than this (metric
#: units) over the whole late window
DEFAULT_ROPE = S.DEFAULT_ROPE
#: default relative ROPE: the late gain is also "flat" when it is within this share of the
#: early gain (docs/calibration.md "Verdicts" for how it was chosen)
DEFAULT_ROPE_RELATIVE = S.DEFAULT_ROPE_RELATIVE
#: the per-level plateau verdicts, in the order the rule tries them (:func:`plateau_verdict`)
VERDICTS = ("flat", "no change point", "undetermined", "declining", "plateaued", "slowed", "still rising")
#: the verdicts that say "it stopped rising" (headlines, the calibration's false-stop and power rates)
STOPPED_VERDICTS = ("plateaued", "slowed")
#: the verdicts whose late segment is flat ("slowed" is still gaining): what "flat after the
#: break" means when a published reading is compared with a fit
FLAT_LATE_VERDICTS = ("plateaued", "flat")

#: One printed name per reported quantity (the CLI, the report, the verdict reasons and the
#: docs use these; no two quantities share a label).
LABELS = {
    "p_flat": "P(flat)",
    "p_late_in_rope": "P(|late gain| < ROPE)",
    "p_late_in_rope_relative": "P(|late gain| < relative ROPE x early gain)",
    "headroom_to_max": "headroom to the metric's maximum",
    "p_no_change": "P(|end - start| < ROPE)",
    "p_rise_positive": "P(rise > 0)",
    "p_late_gain_beyond_rope": "P(late gain > ROPE)",
    "p_late_loss_beyond_rope": "P(late gain < -ROPE)",
    "end_gain": "gain over the end window",
    "p_end_gain_beyond_rope": "P(end-window gain > ROPE)",
    "p_end_loss_beyond_rope": "P(end-window gain < -ROPE)",
}
#: trials' default shape gate: the jump is weighed in where BF(jump : hinge) >= this
#: ("strong" evidence; :attr:`PlateauConfig.jump_gate`)
JUMP_GATE = 10.0
#: the end window: the last third of the run on the step axis (at least END_MIN_POINTS
#: logged steps), where a straight line answers "still moving at the end?" whatever the
#: curve's shape before it (:func:`end_window`)
END_FRACTION = 1.0 / 3.0
END_MIN_POINTS = 5
#: what "flat" means, printed once beside the P(flat) column
#: the curves :meth:`PlateauFit.compare_models` compares by default
COMPARED_MODELS = ("hinge", "linear", "exponential")
FLAT_DEFINITION = "flat: the late gain inside the absolute ROPE or inside the relative ROPE x the early gain"


#: what each verdict says in the summary sentence: (of one level, of several)
VERDICT_PHRASES = {
    "flat": ("stayed flat (no change over the window)",) * 2,
    "no change point": ("shows no change point", "show no change point"),
    "undetermined": ("is undetermined", "are undetermined"),
    "declining": ("is declining", "are declining"),
    "plateaued": ("plateaued (stopped rising)",) * 2,
    "slowed": ("slowed down, not shown to have stopped", "slowed down, not shown to have stopped"),
    "still rising": ("is still rising", "are still rising"),
}


def verdict_summary(levels: dict[str, dict[str, Any]]) -> str:
    """One sentence from the per-level verdicts, e.g. "file plateaued (stopped rising);
    module slowed down, not shown to have stopped; entity is still rising"; with one level, "The
    metric ..."; with every level alike, "All 3 levels ..."."""
    by_verdict: dict[str, list[str]] = {}
    for lv, e in levels.items():
        by_verdict.setdefault(e["verdict"], []).append(lv)
    if len(levels) == 1:
        return f"The metric {VERDICT_PHRASES[next(iter(by_verdict))][0]}"
    if len(by_verdict) == 1:
        return f"All {len(levels)} levels {VERDICT_PHRASES[next(iter(by_verdict))][1]}"
    return "; ".join(f"{', '.join(lvs)} {VERDICT_PHRASES[v][len(lvs) > 1]}" for v, lvs in by_verdict.items())


def plateau_verdict(
    est: dict[str, Any], rule: VerdictRule | None = None, *, known_break: bool = False
) -> dict[str, str]:
    """The verdict of one level from its estimands (the one rule the CLI, the report and
    calibrate use).

    In order: "flat" (the whole change from start to end inside the absolute ROPE: nothing
    was learnt in the window, e.g. a run resumed after it saturated); "declining" (the late
    gain after the break, or the gain over the end window, decisively below -ROPE: a loss in
    the metric's own units); "no change point" (unknown break only: the straight line has
    the larger marginal likelihood, or the change-point mass piles on the outermost
    candidates); "undetermined" when the rise up to just after the break is not decisively
    positive (nothing to plateau from); "plateaued" (late gain inside the ROPE, and neither
    the late gain nor the end window's gain decisively above the absolute ROPE: a gain that
    is small relative to the rise but certainly there in the metric's units is not a
    plateau); "slowed" (late slope decisively below ``slow_ratio`` x the rise's average
    rate up to just after the break, a jump included: slower, not shown to have stopped);
    "still rising" (late slope decisively positive, not slower); otherwise "undetermined".
    The end window (:func:`end_window`, a straight line over the last third of the run) is
    the shape-robust reading of "still moving at the end?".

    Parameters
    ----------
    est : dict
        One level's estimands (``PlateauFit.estimands["levels"][level]``).
    rule : VerdictRule, optional
        The thresholds (default :class:`VerdictRule`).
    known_break : bool
        The change point was given, not estimated (no "no change point" verdict).

    Returns
    -------
    dict
        ``{"verdict": one of VERDICTS, "reason": a sentence with the numbers behind it}``.
    """
    rule = rule or VerdictRule()
    bf = est.get("bf_changepoint_vs_line")
    if est["p_no_change"] >= rule.p_flat:
        return {
            "verdict": "flat",
            "reason": f"{LABELS['p_no_change']} = {est['p_no_change']:.2f}: no change over the window",
        }
    declining = _declining(est, rule)
    if declining is not None:
        return declining
    if not known_break:
        if bf is not None and bf < rule.bf_line:
            return {
                "verdict": "no change point",
                "reason": f"a straight line fits better (BF change point : line = {bf:.2g})",
            }
        if est.get("edge_mass", 0.0) > rule.edge_mass:
            return {
                "verdict": "no change point",
                "reason": f"{est['edge_mass']:.0%} of the change-point mass on the outermost "
                f"{rule.edge_candidates} candidate steps (no break inside the run)",
            }
    if est["p_rise_positive"] < rule.p_rise:
        return {
            "verdict": "undetermined",
            "reason": f"no decisive rise before the break ({LABELS['p_rise_positive']} = {est['p_rise_positive']:.2f})",
        }
    late_gaining = est["p_late_gain_beyond_rope"] >= rule.p_still
    end_gaining = est.get("p_end_gain_beyond_rope", 0.0) >= rule.p_still
    gaining = late_gaining or end_gaining
    if est["p_flat"] >= rule.p_flat and not gaining:
        end = (
            f", nor over the end window ({LABELS['p_end_gain_beyond_rope']} = {est['p_end_gain_beyond_rope']:.2f})"
            if "p_end_gain_beyond_rope" in est
            else ""
        )
        return {
            "verdict": "plateaued",
            "reason": f"{LABELS['p_flat']} = {est['p_flat']:.2f} and no decisive late gain beyond the absolute ROPE "
            f"({LABELS['p_late_gain_beyond_rope']} = {est['p_late_gain_beyond_rope']:.2f} < {rule.p_still:g}{end})",
        }
    if est["p_slowed"] >= rule.p_slow:
        still = (
            f"still gaining ({LABELS['p_late_gain_beyond_rope']} = {est['p_late_gain_beyond_rope']:.2f})"
            if late_gaining
            else f"still gaining at the end ({LABELS['p_end_gain_beyond_rope']} = {est['p_end_gain_beyond_rope']:.2f})"
            if end_gaining
            else f"flatness not confirmed ({LABELS['p_flat']} = {est['p_flat']:.2f})"
        )
        return {
            "verdict": "slowed",
            "reason": f"P(late slope < {rule.slow_ratio:g} x early slope) = {est['p_slowed']:.2f}; {still}",
        }
    if est["p_late_positive"] >= rule.p_still:
        return {"verdict": "still rising", "reason": f"P(late slope > 0) = {est['p_late_positive']:.2f}"}
    return {
        "verdict": "undetermined",
        "reason": f"neither flat ({LABELS['p_flat']} = {est['p_flat']:.2f}), clearly slower "
        f"(P = {est['p_slowed']:.2f}) nor clearly rising (P(late slope > 0) = {est['p_late_positive']:.2f})",
    }


def _declining(est: dict[str, Any], rule: VerdictRule) -> dict[str, str] | None:
    """ "declining": the late gain (after the break) or the end window's gain decisively below
    -ROPE, a loss in the metric's own units; None otherwise."""
    for key in ("p_late_loss_beyond_rope", "p_end_loss_beyond_rope"):
        if est.get(key, 0.0) >= rule.p_still:
            return {"verdict": "declining", "reason": f"{LABELS[key]} = {est[key]:.2f} >= {rule.p_still:g}"}
    return None


_NP = SimpleNamespace(log=np.log, gammaln=special.gammaln, cumsum=np.cumsum, exp=np.exp)
_PT: Any = pt  # PyTensor's log, gammaln, cumsum and exp: the names _NP gives (pt is looked up on first use)


# ====================================================================== data
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


def _from_series(data: xr.Dataset, response: str, run: str | None, summary: dict[str, Any]) -> tuple[Any, ...]:
    """(steps, levels, y, n, var_mean, k, bounded) from a logged per-step series (no
    within-step variance: n is infinite, the variance is the overdispersion alone)."""
    if response not in data:
        raise KeyError(f"no variable {response!r} (have {sorted(map(str, data.data_vars))})")
    series = data[response]
    if S.RUN in series.dims:
        series = series.sel({S.RUN: run}) if run is not None else series.squeeze(S.RUN, drop=True)
    series = series.dropna(S.STEP)
    y = series.to_numpy()[None, :].astype(float)
    summary.update(series=True, metric_name=series.attrs.get("metric_name", response))
    return series[S.STEP].to_numpy(), [response], y, np.full_like(y, np.inf), np.zeros_like(y), None, None


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


# ====================================================================== priors
# ====================================================================== priors scaled to the data
def resolve_priors(
    priors: PlateauPriors, data: StepData, likelihood: str = "gaussian", grid: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Numeric prior parameters per level; ``late_slope_sd`` is (levels, candidates)
    for the change-point candidates ``grid`` (default: the first step, i.e. the slope
    of a line over the whole run). For ``likelihood="zoib"`` the curve lives on the
    logit scale: centres are logits and widths are divided by m (1 - m) (the slope of
    the logistic at the level's mean m, clipped to [0.05, 0.95]).

    Parameters
    ----------
    priors : PlateauPriors
        The settings (None fields: scaled to the data as below).
    data : StepData
        The per-step data.
    likelihood : str
        The fit's likelihood.
    grid : numpy.ndarray, optional
        The candidate change points.

    Returns
    -------
    dict
        Per prior parameter, an array over the levels.

    Notes
    -----
    The curve is parameterised by its start :math:`a` (value at the first step), its value
    :math:`h` at the change point and its late slope :math:`\beta_2`; the early slope is
    :math:`(h - a)/(c - t_0)`. This keeps the parameters' meaning stable across candidate
    change points, so the marginalised posterior is close to unimodal. With :math:`r` the
    range of the per-step means of a level (at least 0.01), :math:`T` the step span:

    * start :math:`a \\sim N(\text{mean of the first 3 steps}, r)` (centre ``start_mu`` if given);
    * value at the change point :math:`h \\sim N(\text{mean of the last third}, r)` (centre
      ``level_mu`` if given);
    * late slope, given the change point :math:`c`: a unit-information prior
      :math:`\beta_2 \\mid c \\sim N\big(0,\\; \\hat\\sigma^2 N / \\sum_{t \\ge c}(t - c)^2\big)`
      (as informative as one of the N steps; :math:`\\hat\\sigma` the level's noise from
      the median absolute step-to-step change, :math:`1.4826\\,\\mathrm{med}|\\Delta\bar y|/\\sqrt2`).
      A fixed width (``late_slope_sd``, or the former default :math:`2r/T`) lets the
      Occam factor of the late slope grow towards the last steps, where the few late
      points cannot pin the slope and its posterior is its prior: on per-trial data that
      is not the model that put the change point late (18 of 19 misses later than the
      truth) and, pooled over levels, concentrated it there (docs/calibration.md). With
      the unit-information width the Occam factor is the same at every candidate. The
      Savage-Dickey Bayes factor for :math:`\beta_2 = 0` uses the prior density at 0
      averaged over the candidates;
    * jump :math:`\\delta \\sim N(0, r)`;
    * overdispersion :math:`\tau \\sim HalfNormal(r)`; the within-step variance of each
      per-step mean is plugged in from the sufficient statistics (:math:`s_t^2/n_t`;
      heteroscedastic: a metric near its ceiling varies less);
    * change point: uniform over steps leaving ``min_segment`` steps on each side; shared
      (pooled) model: common :math:`c_0` uniform on the same grid, level change points
      :math:`c_l \\mid c_0 \\propto \\exp(-(c_l - c_0)^2/2s^2)`, spread
      :math:`s \\sim HalfNormal(` ``spread_sd`` :math:`)` steps;
    * binomial: concentration :math:`\\log\\kappa \\sim N(\\log 200, 1.5)`.
    """
    out = _data_priors(priors, data)
    grid = np.asarray(data.steps[:1] if grid is None else grid, dtype=float)
    late = np.sum(np.maximum(data.steps[None, :] - grid[:, None], 0.0) ** 2, axis=1)  # (C,)
    unit = out["noise_sd"][:, None] * np.sqrt(len(data.steps) / np.maximum(late, 1e-12))[None, :]
    fixed = out["late_slope_sd"][:, None]
    out["late_slope_sd"] = np.where(np.isfinite(fixed), fixed, unit)
    if likelihood == "zoib":
        m = np.clip(np.nanmean(data.y, axis=1), 0.05, 0.95)
        scale = 1.0 / (m * (1 - m))
        out.update(
            start_mu=special.logit(np.clip(out["start_mu"], 0.01, 0.99)),
            level_mu=special.logit(np.clip(out["level_mu"], 0.01, 0.99)),
            start_sd=out["start_sd"] * scale,
            level_sd=out["level_sd"] * scale,
            late_slope_sd=out["late_slope_sd"] * scale[:, None],
            jump_sd=out["jump_sd"] * scale,
            noise_sd=out["noise_sd"] * scale,
        )
    return out


def _data_priors(priors: PlateauPriors, data: StepData) -> dict[str, np.ndarray]:
    rng = np.maximum(np.ptp(data.y, axis=1), 0.01)
    with np.errstate(invalid="ignore"):
        noise = 1.4826 * np.nanmedian(np.abs(np.diff(data.y, axis=1)), axis=1) / np.sqrt(2)
    noise = np.maximum(np.nan_to_num(noise, nan=0.0), 1e-3 * rng)

    def pick(value: float | None, default: np.ndarray) -> np.ndarray:
        return np.full(len(data.levels), float(value)) if value is not None else default

    return {
        "start_mu": pick(priors.start_mu, data.y[:, : min(3, data.y.shape[1])].mean(axis=1)),
        "start_sd": pick(priors.start_sd, rng),
        "level_mu": pick(priors.level_mu, data.y[:, -max(3, data.y.shape[1] // 3) :].mean(axis=1)),
        "level_sd": pick(priors.level_sd, rng),
        "late_slope_sd": pick(priors.late_slope_sd, np.full(len(data.levels), np.nan)),
        "noise_sd": noise,
        "jump_sd": pick(priors.jump_sd, rng),
        "tau_sd": pick(priors.tau_sd, rng),
    }


# ====================================================================== likelihood
#: on the step axis: at least this many logged points on each side of a candidate
MIN_SEGMENT_POINTS = 2
#: at most this many candidates (a longer run is searched on an even lattice of steps plus
#: its logged steps: memory and time grow with candidates x steps)
MAX_CANDIDATES = 2000


def candidate_grid(steps: np.ndarray, min_segment: int, *, on_step_axis: bool = False) -> np.ndarray:
    """Change-point candidates.

    Observed-step grid (the default): logged steps with at least ``min_segment`` logged
    steps before (t < c) and at least ``min_segment`` at or after (t >= c).

    ``on_step_axis``: every whole step c whose segments each span at least ``min_segment``
    steps of the run (c - t_first >= min_segment, t_last + 1 - c >= min_segment) and hold at
    least :data:`MIN_SEGMENT_POINTS` logged points, so that a knee between two sparse logged
    points (a validation metric every 10 steps) is representable. On a series logged at
    every step both grids are the same. More than :data:`MAX_CANDIDATES` candidates are
    thinned to an even lattice plus the logged steps.
    """
    steps = np.asarray(steps, dtype=float)
    if not on_step_axis:
        if len(steps) < 2 * min_segment:
            raise ValueError(f"{len(steps)} steps cannot hold two segments of min_segment={min_segment}")
        return np.asarray(steps[min_segment : len(steps) - min_segment + 1], dtype=float)
    k = MIN_SEGMENT_POINTS
    if len(steps) < 2 * k:
        raise ValueError(f"{len(steps)} logged steps cannot hold two segments of {k} points")
    lo = max(float(steps[k - 1]) + 1.0, float(steps[0]) + min_segment)
    hi = min(float(steps[-k]), float(steps[-1]) + 1.0 - min_segment)
    if hi < lo:
        raise ValueError(
            f"steps {steps[0]:g}..{steps[-1]:g} cannot hold two segments of {min_segment} steps with {k} logged "
            "points each"
        )
    grid = np.arange(np.ceil(lo), np.floor(hi) + 1.0)
    if len(grid) > MAX_CANDIDATES:
        lattice = np.round(np.linspace(grid[0], grid[-1], MAX_CANDIDATES))
        grid = np.unique(np.concatenate([lattice, steps[(steps >= grid[0]) & (steps <= grid[-1])]]))
    return grid


def step_loglik(
    xp: SimpleNamespace,
    obs: dict[str, Any],
    t: Any,
    c: Any,
    params: dict[str, Any],
    t0: Any,
    likelihood: str,
) -> Any:
    """Pointwise log-likelihood of per-step data under change point(s) ``c``.

    ``obs`` holds the per-step statistics (``y``, ``n``, ``k``, and for "zoib" ``n0``,
    ``n1``, ``slogy``, ``slog1my``). Shapes broadcast: e.g. ``t`` (1, T) with ``c`` (C, 1)
    gives (C, T). Works with NumPy (``xp=_NP``) and PyTensor (``xp=_PT``) so the model
    and the post-processing share it.
    """
    mu = curves.hinge_through(
        t, c, params["start"], params[S.VALUE_AT_CHANGEPOINT], params["late_slope"], params.get("jump", 0.0), t0
    )
    y, n, k = obs["y"], obs["n"], obs["k"]
    if likelihood == "gaussian":
        var = params["var_mean"] + params["tau"] ** 2
        return curves.normal_logpdf(xp, y, mu, var)
    g = xp.gammaln
    if likelihood == "zoib":  # the hinge is on the logit scale
        logit_m = mu + params["step_offset"]
        ones = _clip01(1.0 / (1.0 + xp.exp(-logit_m)))  # P(y = 1 | y in {0, 1})
        # E[y | 0 < y < 1] follows the curve with weight lambda (0: partial credit has its own
        # stable mean, as for F1 of a few gold locations; 1: moves with the ones share)
        inner = _clip01(1.0 / (1.0 + xp.exp(-(params["interior_shift"] + params["interior_weight"] * logit_m))))
        z, phi = params["boundary"], params["phi"]
        n0, n1 = obs["n0"], obs["n1"]
        nmid = n - n0 - n1
        return (
            n0 * xp.log(z * (1 - ones))
            + n1 * xp.log(z * ones)
            + nmid * xp.log(1 - z)
            + (inner * phi - 1) * obs["slogy"]
            + ((1 - inner) * phi - 1) * obs["slog1my"]
            - nmid * (g(inner * phi) + g((1 - inner) * phi) - g(phi))
        )
    # beta-binomial with mean mu (clipped into (0, 1)) and concentration kappa
    p = _clip01(mu)
    kappa = params["kappa"]
    alpha, beta = p * kappa, (1 - p) * kappa
    return (
        g(n + 1)
        - g(k + 1)
        - g(n - k + 1)
        + g(k + alpha)
        + g(n - k + beta)
        - g(n + kappa)
        + g(kappa)
        - g(alpha)
        - g(beta)
    )


def gaussian_loglik_by_changepoint(
    xp: SimpleNamespace,
    y: Any,
    var: Any,
    t: Any,
    idx: np.ndarray,
    params: dict[str, Any],
    t0: Any,
) -> Any:
    r"""Gaussian log-likelihood of all steps for every candidate change point at once.

    Equal to ``step_loglik(..., "gaussian").sum(-1)`` on the grid ``t[idx]`` but in
    O(T + C) instead of O(T C): with weights :math:`w_t = 1/v_t`, the residual sum of
    squares of each (linear) segment is a quadratic form in its intercept and slope whose
    coefficients are prefix (early) or suffix (late) sums of :math:`w, wy, wy^2, ws, wsy,
    ws^2` (:math:`s = t - t_0`), read off cumulative sums at each candidate.

    ``y`` and ``var`` are (..., T); parameters broadcast as (..., 1); ``idx`` holds the
    candidates' positions in ``t`` (each >= 1). Returns (..., C).
    """
    s = t - t0
    sc = s[idx]
    w = 1.0 / var
    moments = [w, w * y, w * y * y, w * s, w * s * y, w * s * s]
    cum = [xp.cumsum(m_, axis=-1) for m_ in moments]
    pre = [c_[..., idx - 1] for c_ in cum]
    suf = [c_[..., -1][..., None] - p_ for c_, p_ in zip(cum, pre, strict=True)]
    a, h, b2 = params["start"], params[S.VALUE_AT_CHANGEPOINT], params["late_slope"]
    e = h + params.get("jump", 0.0)
    b1 = (h - a) / sc
    w0, wy, wy2, ws, wsy, ws2 = pre
    q_early = wy2 - 2 * a * wy - 2 * b1 * wsy + a * a * w0 + 2 * a * b1 * ws + b1 * b1 * ws2
    w0, wy, wy2, ws, wsy, ws2 = suf
    wu, wu2, wuy = ws - sc * w0, ws2 - 2 * sc * ws + sc * sc * w0, wsy - sc * wy
    q_late = wy2 - 2 * e * wy - 2 * b2 * wuy + e * e * w0 + 2 * e * b2 * wu + b2 * b2 * wu2
    const = -0.5 * xp.log(2 * np.pi * var).sum(axis=-1)[..., None]
    return const - 0.5 * (q_early + q_late)


def zoib_mean(curve: Any, boundary: Any, interior_shift: Any, interior_weight: Any) -> Any:
    r"""Metric mean :math:`E[y] = z\,\mathrm{expit}(f) + (1 - z)\,\mathrm{expit}(\delta + \lambda f)`
    of the zero-one-inflated Beta at a typical step (offset 0): ``curve`` is the hinge
    :math:`f` on the logit scale (logit of the share of ones among exact 0/1 outcomes),
    ``boundary`` :math:`z`, ``interior_shift`` :math:`\delta`, ``interior_weight``
    :math:`\lambda` (NumPy)."""
    return boundary * special.expit(curve) + (1 - boundary) * special.expit(interior_shift + interior_weight * curve)


def _clip01(x: Any, eps: float = 1e-6) -> Any:
    lo, hi = eps, 1 - eps
    x = (x + lo + abs(x - lo)) / 2  # max(x, lo)
    return (x + hi - abs(x - hi)) / 2  # min(x, hi)


# ====================================================================== model
def build_plateau_model(data: StepData, config: PlateauConfig) -> tuple[pm.Model, dict[str, np.ndarray]]:
    """Build the PyMC model; returns (model, pm.Data values) - the values are what a
    cached compiled model needs swapped in."""
    config.validate()
    if config.likelihood == "binomial" and not data.binary:
        raise ValueError(f"likelihood='binomial' needs a binary response; {data.response!r} is not 0/1")
    if config.likelihood == "zoib" and data.bounded is None:
        raise ValueError(
            f"likelihood='zoib' needs per-trial values of {data.response!r} in [0, 1] "
            "(trials or aggregates with <var>_n0/_n1/_slogy/_slog1my); a logged series cannot use it"
        )
    grid = _grid(data, config)
    pri = resolve_priors(config.priors, data, config.likelihood, grid=grid)
    # the late slope's prior sd depends on the change point: a base prior at the median
    # width, corrected per candidate inside the mixture (exact: sum_c p(c) N(b | sd_c) L_c)
    pri["late_slope_ref"] = np.median(pri["late_slope_sd"], axis=1)
    n_levels = data.y.shape[0]
    t0 = float(data.steps[0])
    known = config.breakpoint is not None
    values = {
        "y": data.y,
        "n": np.where(np.isfinite(data.n), data.n, 1e12),
        "t": data.steps,
        "grid": grid,
        "var_mean": data.var_mean,
        "t0": np.asarray(t0),
        "k": data.k if data.k is not None else np.zeros_like(data.y),
        **(data.bounded if config.likelihood == "zoib" and data.bounded is not None else {}),
        **{f"prior_{k}": v for k, v in pri.items()},
        "evidence_weight": np.asarray(evidence_weight(data, config)),
    }
    coords = {S.LEVEL: data.levels, S.STEP: data.steps}
    pooled = _pooled(config, n_levels)
    with pm.Model(coords=coords) as model:
        d = {name: pm.Data(name, v) for name, v in values.items()}
        start = pm.Normal("start", d["prior_start_mu"], d["prior_start_sd"], dims=S.LEVEL)
        level_c = pm.Normal(S.VALUE_AT_CHANGEPOINT, d["prior_level_mu"], d["prior_level_sd"], dims=S.LEVEL)
        late = pm.Normal("late_slope", 0.0, d["prior_late_slope_ref"], dims=S.LEVEL)
        params: dict[str, Any] = {
            "start": start[:, None, None],
            S.VALUE_AT_CHANGEPOINT: level_c[:, None, None],
            "late_slope": late[:, None, None],
        }
        if config.continuity == "jump":
            params["jump"] = pm.Normal("jump", 0.0, d["prior_jump_sd"], dims=S.LEVEL)[:, None, None]
        if config.likelihood == "gaussian":
            params["tau"] = pm.HalfNormal("tau", d["prior_tau_sd"], dims=S.LEVEL)[:, None, None]
            params["var_mean"] = d["var_mean"][:, None, :]
        elif config.likelihood == "binomial":
            params["kappa"] = pt.exp(
                pm.Normal("log_kappa", config.priors.log_kappa_mu, config.priors.log_kappa_sd, dims=S.LEVEL)
            )[:, None, None]
        else:
            params["boundary"] = pm.Beta("boundary", 1.0, 1.0, dims=S.LEVEL)[:, None, None]
            params["phi"] = pt.exp(
                pm.Normal("log_phi", config.priors.log_phi_mu, config.priors.log_phi_sd, dims=S.LEVEL)
            )[:, None, None]
            tau_logit = pm.HalfNormal("tau_logit", config.priors.tau_logit_sd, dims=S.LEVEL)
            params["interior_shift"] = pm.Normal("interior_shift", 0.0, config.priors.interior_shift_sd, dims=S.LEVEL)[
                :, None, None
            ]
            params["interior_weight"] = pm.Normal(
                "interior_weight", config.priors.interior_weight_mu, config.priors.interior_weight_sd, dims=S.LEVEL
            )[:, None, None]
            offset_z = pm.Normal("step_offset_z", 0.0, 1.0, dims=(S.LEVEL, S.STEP))
            params["step_offset"] = (tau_logit[:, None] * offset_z)[:, None, :]
        if config.likelihood == "gaussian" and not known:
            # O(T + C) per level via cumulative sums (candidates are the steps themselves)
            ll_c = gaussian_loglik_by_changepoint(
                _PT,
                d["y"],
                d["var_mean"] + params["tau"][:, 0] ** 2,
                d["t"],
                _grid_positions(data.steps, grid),
                {k_: v[:, 0] for k_, v in params.items() if k_ not in ("var_mean", "tau")},
                d["t0"],
            )
        else:
            obs = {name: d[name][:, None, :] for name in ("y", "n", "k", *BOUNDED_STATS) if name in d}
            ll = step_loglik(
                _PT, obs, d["t"][None, None, :], d["grid"][None, :, None], params, d["t0"], config.likelihood
            )
            ll_c = ll.sum(axis=2)  # (L, C): log p(y_l | c, theta)
        ll_c = ll_c + late_prior_ratio(pt, late[:, None], d["prior_late_slope_sd"], d["prior_late_slope_ref"][:, None])
        if pooled:
            spread = pm.HalfNormal(S.CHANGEPOINT_SPREAD, config.priors.spread_sd)
            logw = _pooled_logw(pt, d["grid"], curves.effective_spread(pt, spread), _logsumexp)  # (C0, C)
            # sum over levels of log sum_c w(c | c0) p(y_l | c): 2-D per level (C0, C)
            joint = _logsumexp(logw[None, :, :] + ll_c[:, None, :], axis=2).sum(axis=0)  # (C0,)
            # correlated levels: the common change point sees their evidence with weight w
            # (level_dependence); the rest of each level's data keeps weight 1 through the
            # separate-change-point term, so every level's own parameters are not tempered
            separate = (_logsumexp(ll_c, axis=1) - pt.log(float(len(grid)))).sum()
            w_ev = d["evidence_weight"]
            total = w_ev * (_logsumexp(joint, axis=0) - pt.log(float(len(grid)))) + (1 - w_ev) * separate
        else:
            total = (_logsumexp(ll_c, axis=1) - pt.log(float(len(grid)))).sum()
        pm.Potential("likelihood", total)
    return model, values


def late_prior_ratio(xp: Any, b2: Any, sd: Any, ref: Any) -> Any:
    """log N(b2 | 0, sd) - log N(b2 | 0, ref): the per-candidate late-slope prior relative
    to the base prior of the PyMC model (broadcasting)."""
    return xp.log(ref / sd) - 0.5 * b2**2 * (1.0 / sd**2 - 1.0 / ref**2)


def _grid(data: StepData, config: PlateauConfig) -> np.ndarray:
    """The known break as a one-point grid, or every candidate step."""
    if config.breakpoint is None:
        exact = config.likelihood == "gaussian" and config.sampler.sampler in ("auto", "exact")
        return candidate_grid(data.steps, config.priors.min_segment, on_step_axis=exact)
    if not (data.steps[0] < config.breakpoint <= data.steps[-1]):
        raise OptionError(
            f"breakpoint {config.breakpoint:g} outside the observed steps: it must lie after the first step "
            f"{data.steps[0]:g} and at or before the last {data.steps[-1]:g}"
        )
    return np.array([float(config.breakpoint)])


def evidence_weight(data: StepData, config: PlateauConfig) -> float:
    """The pooled model's evidence weight (:func:`level_dependence`; 1 unless pooled)."""
    if not _pooled(config, len(data.levels)):
        return 1.0
    return config.evidence_weight if config.evidence_weight is not None else level_dependence(data.y)[1]


#: below this median number of graded trials per step a change point after a gentle rise is
#: weakly identified, and the pooled model's HDI under-covered on per-trial simulations
#: (docs/calibration.md)
SMALL_STEP_TRIALS = 200


def headroom_defined(data: StepData, config: PlateauConfig) -> bool:
    """Whether the headroom to the metric's maximum means anything: a maximum is set and every
    per-step value lies in [0, maximum] (a reward summed over functions, a length or a loss
    has no maximum of 1)."""
    if config.metric_max is None:
        return False
    y = data.y[np.isfinite(data.y)]
    return bool(y.size) and float(y.min()) >= 0.0 and float(y.max()) <= config.metric_max


def data_caveats(data: StepData, config: PlateauConfig) -> list[str]:
    """What the calibration says about fits on data like these, and what could not be
    computed on them (printed by the CLI and the report)."""
    out = []
    if config.metric_max is not None and not headroom_defined(data, config):
        y = data.y[np.isfinite(data.y)]
        span = f"[{y.min():.3g}, {y.max():.3g}]" if y.size else "empty"
        out.append(
            f"the per-step values span {span}, outside [0, {config.metric_max:g}]: no headroom to the metric's "
            "maximum is reported (set metric_max to the metric's real maximum)"
        )
    n = data.n[np.isfinite(data.n)]
    if config.breakpoint is None and n.size and float(np.median(n)) < SMALL_STEP_TRIALS:
        sims = f"median {np.median(n):.0f} graded trials per step: on per-trial simulations with about 90 per step"
        if _pooled(config, len(data.levels)):
            out.append(
                f"{sims} the pooled change points' 94 % HDI held the truth in only 0.86-0.93 of fits (target "
                "0.90; separate change points 0.92-0.95; docs/calibration.md); read the interval as optimistic"
            )
        else:
            out.append(
                f"{sims} a change point after a gentle rise is weakly identified: expect a wide interval (its "
                "94 % HDI held the truth in 0.92-0.95 of fits there; docs/calibration.md)"
            )
    return out


#: lag-1 autocorrelation of the residuals from which an independent-noise fit warns (and
#: it must also exceed twice its standard error under independence, 2 / sqrt(T))
RESIDUAL_AUTOCORRELATION = 0.3


def autocorrelation_caveats(data: StepData, config: PlateauConfig, levels: dict[str, dict[str, Any]]) -> list[str]:
    """A caveat per level whose residuals from the fitted curve (at the posterior means) are
    positively autocorrelated, when the fit assumed independent step noise: its intervals are
    then too narrow (scripts/ar_coverage.py), and ``noise = "ar1"`` models the dependence."""
    if config.noise != "independent" or config.likelihood != "gaussian":
        return []
    out = []
    t = data.steps
    for j, (level, e) in enumerate(levels.items()):
        c = e["changepoint"]["mean"] if e.get("changepoint") else config.breakpoint
        if c is None:
            continue
        mu = curves.hinge_through(
            t,
            float(c),
            e["start"]["mean"],
            e[S.VALUE_AT_CHANGEPOINT]["mean"],
            e["late_slope"]["mean"],
            e["jump"]["mean"] if e.get("jump") else 0.0,
            float(t[0]),
        )
        r = data.y[j] - mu
        ok = np.isfinite(r)
        r = r[ok] - r[ok].mean()
        if r.size < 8 or not np.any(r):
            continue
        r1 = float(np.sum(r[1:] * r[:-1]) / np.sum(r * r))
        if r1 > max(RESIDUAL_AUTOCORRELATION, 2 / np.sqrt(r.size)):
            out.append(
                f"{level}: the residuals from the fitted curve are autocorrelated (lag-1 r = {r1:.2f}): with "
                "independent step noise assumed, the intervals are too narrow; refit with --noise ar1 "
                '(noise = "ar1")'
            )
    return out


def _pooled(config: PlateauConfig, n_levels: int) -> bool:
    """Several levels with an unknown, shared (pooled) change point."""
    return config.breakpoint is None and config.shared and n_levels > 1


def _grid_positions(steps: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Positions of the candidate change points among the steps (each >= 1)."""
    idx = np.searchsorted(steps, grid)
    if not np.array_equal(steps[np.minimum(idx, len(steps) - 1)], grid) or idx.min() < 1:
        raise ValueError("change-point candidates must be observed steps after the first")
    return idx


def level_dependence(y: np.ndarray) -> tuple[np.ndarray, float]:
    r"""Correlation of the levels' noise and the weight of their pooled evidence.

    The levels of one run are graded on the same trials: a step whose prompts happened to
    be easy raises every level at once, so their per-step residuals are correlated (about
    0.55-0.7 in the per-trial simulator; more in real runs, where an entity hit implies a
    file hit). Treating L correlated levels as L independent pieces of evidence about a
    shared change point made the pooled posterior overconfident (94 % HDI coverage 0.79 on
    misspecified per-trial data, docs/calibration.md).

    Returns the correlation matrix :math:`R` of the step-to-step changes
    :math:`\Delta\bar y_{lt}` (differencing removes the slowly varying curve and keeps
    the noise's cross-correlation; negative entries are set to 0) and the weight
    :math:`w = L / \mathbf 1^\top R \mathbf 1 \in [1/L, 1]`: the effective number of
    independent levels is :math:`wL` (the design-effect formula; magnitude-adjusted
    composite likelihood, Ribatet, Cooley & Davison 2012).
    """
    y = np.asarray(y, dtype=float)
    n_levels = y.shape[0]
    if n_levels < 2 or y.shape[1] < 4:
        return np.eye(n_levels), 1.0
    d = np.diff(y, axis=1)
    d = d[:, np.isfinite(d).all(axis=0)]
    sd = d.std(axis=1)
    if d.shape[1] < 3 or np.any(sd == 0):
        return np.eye(n_levels), 1.0
    r = np.clip(np.corrcoef(d), 0.0, 1.0)
    np.fill_diagonal(r, 1.0)
    return r, float(n_levels / r.sum())


def _logsumexp(x: Any, axis: int, keepdims: bool = False) -> Any:
    """log-sum-exp whose gradient stays finite for large arguments.

    ``pm.math.logsumexp`` is stable alone, but inside the pooled model PyTensor's rewrites
    turned its gradient into exp(x) / sum(exp(x)), which overflows once the joint
    log-likelihood passes ~709 (three levels of the SWE-smith replica do): every NUTS
    trajectory then ended in a NaN gradient (a "divergence"). The shift is held constant
    for differentiation, so no rewrite can cancel it.
    """
    m = pytensor.gradient.disconnected_grad(pt.max(x, axis=axis, keepdims=True))
    out = m + pt.log(pt.exp(x - m).sum(axis=axis, keepdims=True))
    return out if keepdims else out.squeeze(axis)


def _pooled_logw(xp: Any, grid: Any, spread: Any, logsumexp: Any) -> Any:
    """log p(c_l = grid[j] | c0 = grid[i], s): discretised normal around the common c0."""
    logw = -0.5 * ((grid[None, :] - grid[:, None]) / spread) ** 2
    return logw - logsumexp(logw, axis=1, keepdims=True)


# ====================================================================== fit
class _InferenceDataField:
    """``PlateauFit.idata``: the exact sampler's groups (a ``DeferredInferenceData``, no
    ArviZ import) become an ``arviz.InferenceData`` the first time the field is read.
    Attached after the dataclass is made (so the field keeps no default)."""

    slot = "_idata"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.slot]
        if isinstance(value, DeferredInferenceData):
            value = obj.__dict__[self.slot] = value.to_inference_data()
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.slot] = value


@dataclass
class PlateauFit(FitObject):
    """Result of :func:`fit_plateau`: InferenceData plus tidy estimands and diagnostics.

    Parameters
    ----------
    idata : arviz.InferenceData
        Posterior draws (change points, curve parameters, derived estimands) with the
        config, data summary and diagnostics in its attrs. The exact sampler's draws are
        made an InferenceData (and ArviZ imported) when this is first read.
    config : PlateauConfig
        The analysis settings the fit ran with.
    data : StepData
        The per-step inputs.
    estimands : dict
        Per level: interval dicts (``mean``, ``sd``, ``hdi``) of the change point, slopes,
        gains, headroom; the verdict and its numbers; pooled: the spread and co-stopping.
    diagnostics : dict
        R-hat, ESS, divergences, ``converged`` (:func:`models.sampling.diagnostics`).
    timings : dict
        Seconds spent compiling and sampling, and the sampler used.
    seed : int
        The seed the fit drew with (its figures' and checks' random draws use it too).
    """

    idata: az.InferenceData
    config: PlateauConfig
    data: StepData
    estimands: dict[str, Any]
    diagnostics: dict[str, Any]
    timings: dict[str, Any]
    #: the seed the fit drew with (its figures' and checks' random draws use it too)
    seed: int = 0

    def summary(self) -> pd.DataFrame:
        """Tidy table: one row per (level, estimand) with mean, sd and 94 % HDI, plus the
        probabilities and Bayes factor (in ``mean``). ``attrs['converged']`` is set."""
        rows = []
        for level, est in self.estimands["levels"].items():
            for name in (
                "changepoint",
                "early_slope",
                "late_slope",
                "start",
                S.VALUE_AT_CHANGEPOINT,
                "end",
                "headroom_to_max",
                "early_gain",
                "late_gain",
                "slowdown_ratio",
            ):
                if name in est and est[name] is not None:
                    e = est[name]
                    rows.append(
                        {
                            "level": level,
                            "estimand": name,
                            "mean": e["mean"],
                            "sd": e["sd"],
                            "hdi_low": e["hdi"][0],
                            "hdi_high": e["hdi"][1],
                        }
                    )
            for name in (
                "p_early_positive",
                "p_late_in_rope",
                "p_late_in_rope_relative",
                "p_flat",
                "p_slowed",
                "bf01_late_zero",
                "bf_changepoint_vs_line",
            ):
                if est.get(name) is None:
                    continue
                rows.append(
                    {
                        "level": level,
                        "estimand": name,
                        "mean": est[name],
                        "sd": np.nan,
                        "hdi_low": np.nan,
                        "hdi_high": np.nan,
                    }
                )
        table = pd.DataFrame(rows)
        table.attrs["converged"] = self.diagnostics["converged"]
        table.attrs["hdi_prob"] = S.HDI_PROB
        return table

    def __repr__(self) -> str:
        sd, cfg = self.data, self.config
        head = (
            f"PlateauFit(response {sd.response}, {len(sd.levels)} level(s) x {len(sd.steps)} steps, "
            f"{cfg.likelihood}, {self.timings.get('sampler', '?')}; {convergence_words(self.diagnostics)})"
        )
        lines = [
            f"{lv}: {e['verdict']}; change point {format_interval(e.get('changepoint'), 1)}; "
            f"late slope {format_interval(e.get('late_slope'), 5)}"
            for lv, e in self.estimands["levels"].items()
        ]
        return short_repr(head, lines)

    def curve_draws(self, steps: Any = None) -> np.ndarray:
        """Posterior draws of the fitted metric mean at ``steps`` (default: the observed
        steps): array (samples, levels, steps) (:func:`curve_draws`)."""
        return curve_draws(self, steps)

    def frame(self) -> pd.DataFrame:
        """Per (level, step): the observed mean, the posterior mean curve, its 94 % band and
        P(change point at the step) (:func:`plateau_frame`: the data behind the curves figure)."""
        return plateau_frame(self)

    def verdicts(self) -> dict[str, dict[str, str]]:
        """Per level: ``{"verdict", "reason"}`` (:func:`plateau_verdict`)."""
        return {lv: {"verdict": e["verdict"], "reason": e["reason"]} for lv, e in self.estimands["levels"].items()}

    def describe_model(self) -> str:
        """One line naming the model that was fitted (the CLI and the report print it)."""
        cfg = self.config
        if cfg.breakpoint is not None:
            shape = (
                "split model: separate early and late lines with a jump at the break, as the study's split OLS"
                if cfg.continuity == "jump"
                else "continuous hinge at the break"
            )
            noise = ", AR(1) step noise" if cfg.noise == "ar1" else ""
            return f"known break at step {cfg.breakpoint:g} ({shape}), {cfg.likelihood} likelihood{noise}"
        pooling = (
            f"change points pooled around a common one (evidence weight "
            f"{self.estimands['together']['evidence_weight']:.2f} for correlated levels)"
            if _pooled(cfg, len(self.data.levels))
            else "separate change points"
            if len(self.data.levels) > 1
            else "one change point"
        )
        noise = ", AR(1) step noise" if cfg.noise == "ar1" else ""
        shape = str(cfg.continuity)
        if cfg.continuity == "auto":
            p_jump = ", ".join(f"{lv} {e['p_jump']:.2f}" for lv, e in self.estimands["levels"].items())
            shape = f"hinge and jump averaged by their evidence (P(jump): {p_jump})"
            if cfg.jump_gate is not None:
                weighed = [lv for lv, e in self.estimands["levels"].items() if e["jump_weight"] > 0]
                shape = (
                    f"the hinge, a jump weighed in where BF(jump : hinge) >= {cfg.jump_gate:g} "
                    f"({', '.join(weighed) if weighed else 'no level'}; P(jump): {p_jump})"
                )
        return f"unknown break, {pooling}, {shape}, {cfg.likelihood} likelihood{noise}"

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (docs/plateau.md)."""
        cfg = self.config
        return {
            "data": {
                "path": self.data.summary.get("sources"),
                "n_trials": self.data.summary.get("n_trials"),
                "n_graded": self.data.summary.get("n_graded"),
                "steps": self.data.summary["steps"],
                "response": self.data.response,
                "synthetic": self.data.summary.get("synthetic", ""),
                **{k: self.data.summary[k] for k in ("phase", "phases_left_out") if k in self.data.summary},
            },
            "model": {
                "description": self.describe_model(),
                "breakpoint": "unknown" if cfg.breakpoint is None else cfg.breakpoint,
                "shared": cfg.shared,
                "continuity": cfg.continuity,
                "likelihood": cfg.likelihood,
                "rope": cfg.rope,
                "rope_relative": cfg.rope_relative,
                "metric_max": cfg.metric_max,
                "noise": cfg.noise,
                "min_segment": cfg.priors.min_segment,
                "hdi_prob": S.HDI_PROB,
                "rule": asdict(cfg.rule),
            },
            "levels": self.estimands["levels"],
            "summary": verdict_summary(self.estimands["levels"]),
            "caveats": self.estimands.get("caveats", []),
            "together": self.estimands.get("together"),
            "shape": self.estimands.get("shape"),
            "diagnostics": dict(self.diagnostics),
        }

    # ------------------------------------------------------------------ views
    def ylabel(self) -> str:
        """The metric's axis label: the graded-only mean F1, or the response as logged."""
        if self.config.response == S.F1:
            return "graded-only mean F1"
        return str(self.data.summary.get("metric_name") or self.config.response)

    def table(self) -> pd.DataFrame:
        """One row per level: the verdict, the change point, the slopes and gains, the
        evidence for a break and the headroom (interval cells ``{"mean", "hdi"}``)."""
        rows = []
        for level, e in self.estimands["levels"].items():
            rows.append(
                {
                    "level": level,
                    "verdict": e["verdict"],
                    "change point": self._where(e, short=True),
                    "early slope": interval_cell(e["early_slope"]),
                    "late slope": interval_cell(e["late_slope"]),
                    "late gain": interval_cell(e["late_gain"]),
                    "late gain 94 % upper": e["late_gain_upper"],
                    "late / early slope": interval_cell(e.get("slowdown_ratio")),
                    LABELS["p_flat"]: e["p_flat"],
                    "BF change point : line": e["bf_changepoint_vs_line"],
                    "Davies p": e["davies"]["p_value"] if e.get("davies") else None,
                    "BF01 (late = 0)": e["bf01_late_zero"],
                    "start": interval_cell(e["start"]),
                    "end": interval_cell(e["end"]),
                    LABELS["headroom_to_max"]: interval_cell(e["headroom_to_max"]),
                }
            )
        return pd.DataFrame(rows)

    def _where(self, e: dict[str, Any], *, short: bool) -> Any:
        """The change point of one level as a table cell (``short``) or in words."""
        if not e["changepoint"]:
            return f"known ({self.config.breakpoint:g})" if short else f"known break {self.config.breakpoint:g}"
        if e["verdict"] == "no change point":
            return "none inside the run" if short else "no change point inside the run"
        if short:
            return interval_cell(e["changepoint"])
        cp = e["changepoint"]
        return f"change point {cp['mean']:.0f} [{cp['hdi'][0]:.0f}, {cp['hdi'][1]:.0f}]"

    def tables(self) -> dict[str, TableView]:
        """``estimates``: :meth:`table`."""
        return {"estimates": TableView(self.table(), f"Plateau per level ({S.HDI_LABEL})")}

    def heading(self) -> list[str]:
        """A note when the data are synthetic, then the model and its ROPE in a line."""
        cfg, synthetic = self.config, self.data.summary.get("synthetic", "")
        rel = f" or +-{cfg.rope_relative:g} x the early gain" if cfg.rope_relative is not None else ""
        return [
            *([f"NOTE: {synthetic}"] if synthetic else []),
            f"plateau model: response {self.data.response}; {self.describe_model()}; ROPE: late gain within "
            f"+-{cfg.rope:g}{rel} ({FLAT_DEFINITION}); {int(S.HDI_PROB * 100)}% HDI",
        ]

    def answer(self) -> str:
        """The verdicts in one sentence, and whether the levels stopped together."""
        text = verdict_summary(self.estimands["levels"]) + "."
        together = self.estimands.get("together")
        return text + (" " + together_sentence(together) if together else "")

    def details(self) -> list[str]:
        """The model, one sentence per level (verdict, reason, change point, late gain, the
        evidence for a break, headroom) and the caveats."""
        out = [f"Model: {self.describe_model()}."]
        for level, e in self.estimands["levels"].items():
            exists = (
                f"; a break at all: BF(change point : line) = {e['bf_changepoint_vs_line']:.3g}, Davies' test "
                f"p = {e['davies']['p_value']:.2g}"
                if e.get("bf_changepoint_vs_line") is not None and e.get("davies")
                else ""
            )
            out.append(
                f"{level}: {e['verdict']} ({e['reason']}); {self._where(e, short=False)}; late gain "
                f"{format_interval(e['late_gain'])} (94 % upper bound {e['late_gain_upper']:.3f}); late/early "
                f"slope {format_interval(e.get('slowdown_ratio'), 2)}{exists}; {LABELS['headroom_to_max']} "
                f"{format_interval(e['headroom_to_max'])}."
            )
        return out + [f"Caveat: {c}." for c in self.estimands["caveats"]]

    def figures(self) -> dict[str, FigureView]:
        """``curves``, ``slopes``, ``plateaued_by`` and (Gaussian likelihood) ``ppc``."""
        from saturation import plots

        cfg, band, ylabel = self.config, S.HDI_LABEL, self.ylabel()
        data = data_text(self.data.summary, len(self.data.steps))
        marks = (
            f"The dashed line is the known break at step {cfg.breakpoint:g}."
            if cfg.breakpoint is not None
            else "The dotted line is the posterior mean change point; the lower panels give the change point's "
            "posterior probability by step."
        )
        rope = f"+-{cfg.rope:g}" + (f" or within +-{cfg.rope_relative:g} x the early gain" if cfg.rope_relative else "")
        figs = {
            "curves": FigureView(
                lambda: plots.plot_plateau(self, ylabel=ylabel),
                f"{ylabel} by step, one panel per level: observed per-step means (points), the posterior mean curve "
                f"of the {self.describe_model()} and its {band} band. {marks} {data}",
            ),
            "slopes": FigureView(
                lambda: plots.plot_slopes(self),
                f"Early and late slope per level ({cfg.response} per step; posterior mean and {band}); the two "
                f"segments are drawn on their own scales, the power of ten is in the axis label. {data}",
            ),
            "plateaued_by": FigureView(
                lambda: plots.plot_plateaued_by(self),
                f"Posterior probability that each level has plateaued by step t: change point at or before t and "
                f"the flat ({FLAT_DEFINITION}; {rope}). {data}",
            ),
        }
        if cfg.likelihood == "gaussian":
            figs["ppc"] = FigureView(
                lambda: plots.plot_ppc(self, seed=self.seed),
                f"Posterior predictive check: observed per-step means (points) against the "
                f"{band.replace('HDI', '')}predictive interval (band: the mean curve plus the per-step noise); the "
                f"legend gives the share inside, about 94 % for a calibrated model. {data}",
            )
        return figs

    def ppc_coverage(self) -> dict[str, float]:
        """Per level: the share of observed per-step means inside the 94 % posterior
        predictive interval (Gaussian likelihood; about 0.94 for a calibrated model)."""
        from saturation import plots

        ppc = plots.ppc_data(self, seed=self.seed)
        return {str(k): float(v) for k, v in ppc.groupby("level")["covered"].mean().items()}

    def results(self) -> dict[str, Any]:
        """``{"plateau": to_dict(), "ppc_coverage": ...}`` (the second for the Gaussian likelihood)."""
        out: dict[str, Any] = {"plateau": self.to_dict()}
        if self.config.likelihood == "gaussian":
            out["ppc_coverage"] = self.ppc_coverage()
        return out

    def inference_data(self) -> dict[str, Any]:
        """``plateau_fit``: this fit's InferenceData."""
        return {"plateau_fit": self.idata}

    def compare_models(self, models: tuple[str, ...] = COMPARED_MODELS) -> ModelComparison:
        """Leave-one-step-out comparison of this fit's hinge with other curves on the same data
        (:func:`loo_entries`; the hinge is this fit, not refitted).

        Parameters
        ----------
        models : tuple of str
            "hinge" (this fit), "hinge-separate" / "hinge-shared", "linear", "exponential".

        Returns
        -------
        ModelComparison
            The ELPD table, its figure and sentence, and each alternative's InferenceData.
        """
        progress.stage("LOO comparison")
        elpd, method, fits = loo_entries(self.data, models, seed=self.seed, config=self.config, hinge=self)
        return ModelComparison(loo_table(elpd, method), fits, data_text(self.data.summary, len(self.data.steps)))


@dataclass
class ModelComparison(FitObject):
    """A leave-one-step-out comparison of curve models on the same per-step data
    (:meth:`PlateauFit.compare_models`).

    Parameters
    ----------
    compare : pandas.DataFrame
        ``az.compare``'s table with ``loo_method`` and ``caveat`` (:func:`loo_table`).
    fits : dict
        Each model's InferenceData by name.
    data_words : str
        The data in words (for the figure's caption).
    """

    #: ``az.compare``'s table with ``loo_method`` and ``caveat`` (:func:`loo_table`)
    compare: pd.DataFrame
    #: each model's InferenceData by name
    fits: dict[str, Any]
    #: the data in words (for the caption)
    data_words: str = ""

    def summary(self) -> pd.DataFrame:
        """The ELPD table, one row per model (``model`` a column; :func:`saturation.plots.loo_data`)."""
        from saturation import plots

        return plots.loo_data(self.compare)

    def tables(self) -> dict[str, TableView]:
        """``loo``: :meth:`summary`."""
        return {"loo": TableView(self.summary(), "LOO comparison (ArviZ)")}

    def figures(self) -> dict[str, FigureView]:
        """``loo``: ELPD per model and the differences to the best."""
        from saturation import plots

        names = ", ".join(map(str, self.compare.index))
        return {
            "loo": FigureView(
                lambda: plots.plot_loo(self.compare),
                f"Leave-one-step-out comparison of {names}: ELPD per model +- its standard error (circles) and the "
                "best model's ELPD minus each model's difference +- the difference's standard error (triangles); "
                "exact LOO where the model allows it, else PSIS (crosses: Pareto k > 0.7, unreliable). "
                f"{self.data_words}",
            )
        }

    def answer(self) -> str:
        """Which model LOO prefers, by how much, and the caveat of unreliable PSIS rows."""
        loo = self.summary()
        methods = ", ".join(f"{r.model} {r.loo_method}" for r in loo.itertuples())
        caveat = self.compare.attrs.get("caveat")
        return (
            f"LOO prefers {loo['model'].iloc[0]} (ELPD difference to the next {loo['elpd_diff'].iloc[1]:.1f} "
            f"+- {loo['dse'].iloc[1]:.1f}; {methods})." + (f" Caveat: {caveat}." if caveat else "")
        )

    def results(self) -> dict[str, Any]:
        """``{"loo": the table's rows}``."""
        return {"loo": json_safe(self.summary().to_dict(orient="records"))}

    def inference_data(self) -> dict[str, Any]:
        """``alternative_<model>`` for every model but this fit's hinge."""
        return {f"alternative_{name}": idata for name, idata in self.fits.items() if name != "hinge"}


PlateauFit.idata = _InferenceDataField()  # type: ignore[assignment]


def _held_idata(fit: PlateauFit) -> Any:
    """``fit``'s InferenceData as it is held: the exact sampler's groups stay unconverted
    (no ArviZ import); both kinds have ``attrs``, ``posterior`` and ``add_groups``."""
    return fit.__dict__[_InferenceDataField.slot]


def _rho_grid(config: PlateauConfig) -> tuple[float, ...] | None:
    """The AR(1) coefficients the exact sampler sums over, or None for independent noise."""
    return RHO_GRID if config.noise == "ar1" else None


def _sample_exact(
    sd: StepData, config: PlateauConfig, grid: np.ndarray, pri: dict[str, np.ndarray], seed: int
) -> tuple[Any, dict[str, Any], np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    """The exact Gaussian sampler for ``config``'s shape: the hinge, the jump, or "auto"
    (both averaged by their evidence, :func:`~saturation.models._exact.sample_either_shape`,
    whose P(jump) per level is the last item; None otherwise)."""
    exact_args: dict[str, Any] = {
        "y": sd.y,
        "var_mean": sd.var_mean,
        "steps": sd.steps,
        "grid": grid,
        "priors": pri,
        "pooled": _pooled(config, len(sd.levels)),
        "spread_sd": config.priors.spread_sd,
        "levels": sd.levels,
        "chains": config.sampler.chains,
        "draws": config.sampler.draws,
        "seed": seed,
        "evidence_weight": evidence_weight(sd, config),
        "rho_grid": _rho_grid(config),
    }
    if config.continuity == "auto":
        return sample_either_shape(gate=config.jump_gate, **exact_args)
    return (*sample_gaussian_exact(jump=config.continuity == "jump", **exact_args), None)


def fit_plateau(
    data: xr.Dataset | StepData,
    config: PlateauConfig | None = None,
    *,
    levels: list[str] | None = None,
    response: str = S.F1,
    run: str | None = None,
    breakpoint: float | None = None,
    shared: bool = False,
    continuity: str | None = None,
    likelihood: str = "gaussian",
    rope: float = DEFAULT_ROPE,
    rope_relative: float | None = DEFAULT_ROPE_RELATIVE,
    rule: VerdictRule | None = None,
    priors: PlateauPriors | None = None,
    sampler: SamplerConfig | None = None,
    seed: int = 0,
    metric_max: float | None = 1.0,
    noise: str | None = None,
) -> PlateauFit:
    """Fit the plateau model and compute its estimands.

    Parameters
    ----------
    data : xarray.Dataset or StepData
        Trials, aggregates or a per-step series (see :func:`step_data`).
    config : PlateauConfig, optional
        The whole structure at once (e.g. built from a spec by
        :func:`saturation.spec.analysis_config`); when given, the keyword arguments from
        ``levels`` to ``noise`` are not used.
    levels : list of str, optional
        Levels to fit (default: every level of the data).
    response : str
        The variable to model: a per-level field (default F1) or a trial / series variable.
    run : str, optional
        The run to fit when the data hold several.
    breakpoint : number, optional
        Known break (e.g. 46); ``None`` marginalises over every candidate step.
    shared : bool
        Several levels: pool their change points around a common one (True) or give each
        level its own (False, the default). The levels are graded on the same rollouts and
        share whatever the hinge misses about the curve's shape, so pooling multiplies
        that shared misfit; on per-trial data that is not the model the pooled intervals
        covered a late change point in 0.858 of small-design level fits against 0.938 for
        separate ones (docs/calibration.md). Pool to ask "did the levels stop together?"
        under the assumption that their change points are close.
    continuity : {"hinge", "jump", "auto"}, optional
        Continuous hinge, a jump at the break (the study's split OLS), or "auto": both
        fitted and averaged by their exact marginal likelihoods (the mixture of the two
        shapes, 1/2 each a priori: an abrupt jump is then located and called; each level's
        ``p_jump`` is its posterior probability). Default: the split
        model ("jump") for a known ``breakpoint``; for an unknown one "auto" on a logged
        series and the hinge on trials; the
        CLI and the report use the same default, so a known break runs the same model in
        both.
    likelihood : {"gaussian", "binomial", "zoib"}
        Gaussian on per-step means (sufficient statistics, step overdispersion; default),
        beta-binomial on success counts for binary responses, or a zero-one-inflated Beta
        on per-trial values in [0, 1] (exact from sufficient statistics; the hinge on the
        logit scale of the ones share, partial credit with a mean of its own, logit-scale
        step offsets; estimands on the metric mean). See docs/plateau.md for when each is
        right.
    sampler : SamplerConfig, optional
        ``sampler="auto"`` draws the Gaussian model exactly (independent draws, no MCMC;
        see ``models._exact``) and samples the others with nutpie.
    rope : float
        Region of practical equivalence for the late segment, in metric units: the late
        segment is "flat" when its total gain over the late window is within +-rope.
    rope_relative : float or None
        Also flat when the late gain is within +-rope_relative x the early gain (the gain
        from the start to the change point); None: the absolute ROPE alone.
    rule : VerdictRule, optional
        Thresholds of the per-level verdict (:func:`plateau_verdict`).
    priors : PlateauPriors, optional
        Prior settings (default: scaled to the data, see :class:`PlateauPriors`).
    seed : int
        Seeds the sampler and the post-processing; same seed and data give the same numbers.
    noise : {"independent", "ar1"}, optional
        The step noise: independent across steps, or AR(1) on the step axis with its
        coefficient summed exactly (Gaussian likelihood, exact sampler). Default: "ar1" for
        a logged per-step series, "independent" for trials (whose fit warns when its
        residuals are autocorrelated).
    metric_max : float or None
        The metric's maximum, to which ``headroom_to_max`` is measured (1.0 for rates; None,
        or data outside [0, metric_max]: no headroom to the maximum, with a caveat).

    Returns
    -------
    PlateauFit
        InferenceData, estimands per level (change point, slopes, late gain, verdict, ...),
        diagnostics and timings; ``config`` is stamped into the InferenceData attrs.
    """
    names = "levels response breakpoint shared continuity likelihood rope rope_relative rule priors sampler metric_max"
    config_or_keywords(fit_plateau, config, {k: v for k, v in locals().items() if k in [*names.split(), "noise"]})
    if config is None:  # the keyword arguments, once into the config
        config = PlateauConfig(
            response=response,
            levels=tuple(levels) if levels else None,
            breakpoint=breakpoint,
            shared=shared,
            continuity=continuity,
            likelihood=likelihood,
            rope=rope,
            rope_relative=rope_relative,
            rule=rule or VerdictRule(),
            priors=priors or PlateauPriors(),
            sampler=sampler or SamplerConfig(),
            metric_max=metric_max,
            noise=noise,
        )
    config.validate()
    levels = list(config.levels) if config.levels else None
    response = config.response
    sd = data if isinstance(data, StepData) else step_data(data, response=response, levels=levels, run=run)
    series = bool(sd.summary.get("series"))
    if config.noise is None:
        exact = config.likelihood == "gaussian" and config.sampler.sampler in ("auto", "exact")
        config = replace(config, noise="ar1" if series and exact else "independent")
    if config.continuity is None:
        config = replace(config, continuity="auto", jump_gate=None if series else JUMP_GATE)
    exact = config.sampler.sampler in ("auto", "exact") and config.likelihood == "gaussian"
    if config.continuity == "auto" and not exact:  # only the exact sampler has the evidences
        config = replace(config, continuity="hinge", jump_gate=None)
    grid = _grid(sd, config)
    too_big = fit_memory_problem(
        len(sd.steps), len(grid), len(sd.levels), pooled_graph=not exact and _pooled(config, len(sd.levels))
    )
    if too_big:  # refused before any array is allocated
        raise ValueError(too_big)
    if not exact and len(grid) > 1 and config.likelihood != "gaussian":
        too_slow = fit_time_problem(
            len(sd.steps),
            len(grid),
            len(sd.levels),
            chains=config.sampler.chains,
            draws=config.sampler.draws,
            tune=config.sampler.tune,
            likelihood=config.likelihood,
        )
        if too_slow:  # refused before compiling
            raise ValueError(too_slow)
    pri = resolve_priors(config.priors, sd, config.likelihood, grid=grid)
    hinge_evidence = exact_cps = shape = None
    idata: Any  # an InferenceData, or the exact sampler's groups until one is asked for
    if exact:
        progress.stage("sample (exact)")
        idata, timings, hinge_evidence, exact_cps, shape = _sample_exact(sd, config, grid, pri, seed)
    else:
        model, values = build_plateau_model(sd, config)
        key = (
            "plateau",
            sd.y.shape,
            len(grid),
            config.breakpoint is None,
            config.shared,
            config.continuity,
            config.likelihood,
            bool(np.isfinite(sd.n).all()),
        )
        idata, timings = sample_model(model, cache_key=key, data=values, seed=seed, config=config.sampler)
    sampled = [
        v
        for v in (
            "start",
            S.VALUE_AT_CHANGEPOINT,
            "late_slope",
            "jump",
            "tau",
            "log_kappa",
            "boundary",
            "log_phi",
            "tau_logit",
            "interior_shift",
            "interior_weight",
            S.CHANGEPOINT_SPREAD,
        )
        if v in idata.posterior
    ]
    diag = diagnostics(idata, sampled)
    log_bf = (
        hinge_line_log_bf(
            sd.y,
            sd.var_mean,
            sd.steps,
            grid,
            pri,
            config.continuity == "jump",
            hinge_evidence,
            rho_grid=_rho_grid(config),
        )
        if config.likelihood == "gaussian"
        else None
    )
    estimands = _estimands(idata, sd, config, grid, pri, seed, log_bf, exact_cps)
    if hinge_evidence is not None:
        estimands["log_evidence"] = [float(v) for v in hinge_evidence]
    _shape_estimands(estimands, shape, pooled=_pooled(config, len(sd.levels)), gate=config.jump_gate)
    if log_bf is not None and config.breakpoint is None:
        _no_change_from_the_line(estimands, sd, config, pri, log_bf, seed)
    _end_window_estimands(estimands, sd, config, pri, seed)
    _take_verdicts(estimands, config, grid)
    if S.NOISE_RHO in idata.posterior:
        rho = idata.posterior[S.NOISE_RHO].stack(sample=("chain", "draw")).transpose("sample", ...).to_numpy()
        for j, level in enumerate(sd.levels):
            estimands["levels"][level][S.NOISE_RHO] = interval(rho[:, j])
    estimands["caveats"] = data_caveats(sd, config) + autocorrelation_caveats(sd, config, estimands["levels"])
    _attach(idata, sd, config, diag, grid)
    fit = PlateauFit(idata, config, sd, estimands, diag, timings, seed)
    warn_if_not_converged(diag, f"plateau fit ({sd.response}, levels {sd.levels})")
    return fit


def _take_verdicts(estimands: dict[str, Any], config: PlateauConfig, grid: np.ndarray) -> None:
    """Each level's verdict (:func:`plateau_verdict`), taken once every estimand it reads is
    in (the line's "no change", the end window), and then whether "did the levels stop
    together?" can be asked of them."""
    for est in estimands["levels"].values():
        est.update(plateau_verdict(est, config.rule, known_break=config.breakpoint is not None))
    if "together" in estimands:
        estimands["together"]["not_asked"] = together_not_asked(estimands["levels"], grid)


def _shape_estimands(
    estimands: dict[str, Any], shape: dict[str, np.ndarray] | None, *, pooled: bool, gate: float | None
) -> None:
    """With the shapes averaged (``shape`` from :func:`_sample_exact`): ``estimands["shape"]``
    and each level's ``p_jump`` (the posterior probability of the jump), ``jump_weight``
    (the share of its draws from the jump: ``p_jump``, or 0 below the gate) and
    ``bf_jump_vs_hinge``."""
    if shape is None:
        return
    estimands["shape"] = {
        "averaged": ["hinge", "jump"],
        "weights": "joint over the levels" if pooled else "per level",
        "jump_gate": gate,
    }
    for j, est in enumerate(estimands["levels"].values()):
        est["p_jump"] = float(shape["p_jump"][j])
        est["jump_weight"] = float(shape["weight"][j])
        est["bf_jump_vs_hinge"] = float(np.exp(np.clip(shape["log_bf_jump_vs_hinge"][j], -700, 700)))


def end_window(steps: np.ndarray) -> np.ndarray | None:
    """The end window's mask over ``steps``: the steps in the last :data:`END_FRACTION` of
    the run's step range, or the last :data:`END_MIN_POINTS` logged steps when fewer fall
    there; None for a run of fewer than ``2 * END_MIN_POINTS`` steps (no window apart from
    the whole run)."""
    if len(steps) < 2 * END_MIN_POINTS:
        return None
    mask = steps >= steps[-1] - (steps[-1] - steps[0]) * END_FRACTION
    if mask.sum() < END_MIN_POINTS:
        mask = np.zeros(len(steps), dtype=bool)
        mask[-END_MIN_POINTS:] = True
    return mask


def _end_window_estimands(
    estimands: dict[str, Any], sd: StepData, config: PlateauConfig, pri: dict[str, np.ndarray], seed: int
) -> None:
    r"""Per level, the gain over the end window (:func:`end_window`) from a straight line
    fitted to the window alone, exactly, with the fit's noise model (independent or AR(1)):
    ``end_gain`` and ``p_end_gain_beyond_rope`` / ``p_end_loss_beyond_rope`` (the absolute
    ROPE). The line does not assume the curve's shape before the window, so a creep after an
    S-shaped rise or a collapse after a plateau shows here when the one-break hinge smooths
    it over; :func:`plateau_verdict` reads it. Both ends of the window get the prior of the
    value at the change point."""
    mask = end_window(sd.steps)
    if mask is None:
        return
    rng = np.random.default_rng([seed, 45])
    pri_end = {**pri, "start_mu": pri["level_mu"], "start_sd": pri["level_sd"]}
    for j, est in enumerate(estimands["levels"].values()):
        ok = mask & np.isfinite(sd.y[j])
        if ok.sum() < END_MIN_POINTS:
            continue
        gain = line_change_draws(
            sd.y[j][ok],
            sd.var_mean[j][ok],
            sd.steps[ok],
            pri_end,
            j,
            rng,
            4000,
            rho_grid=_rho_grid(config),
        )
        est["end_window"] = [float(sd.steps[ok][0]), float(sd.steps[ok][-1])]
        est["end_gain"] = interval(gain)
        est["p_end_gain_beyond_rope"] = float(np.mean(gain > config.rope))
        est["p_end_loss_beyond_rope"] = float(np.mean(gain < -config.rope))


def _no_change_from_the_line(
    estimands: dict[str, Any],
    sd: StepData,
    config: PlateauConfig,
    pri: dict[str, np.ndarray],
    log_bf: np.ndarray,
    seed: int,
) -> None:
    """Where the straight line is the better model (BF change point : line < 1), "no change
    over the window" is read from the line's change first -> last step (the hinge's start and
    end are poorly pinned on a flat series), and the verdict is taken again."""
    rng = np.random.default_rng([seed, 44])
    for j, est in enumerate(estimands["levels"].values()):
        if log_bf[j] >= 0:
            continue
        change = line_change_draws(
            sd.y[j],
            sd.var_mean[j],
            sd.steps,
            pri,
            j,
            rng,
            4000,
            rho_grid=_rho_grid(config),
        )
        est["p_no_change"] = float(np.mean(np.abs(change) < config.rope))


def _param_draws(idata: az.InferenceData, likelihood: str) -> dict[str, Any]:
    """Posterior draws as arrays (samples, levels)."""
    post = idata.posterior.stack(sample=("chain", "draw")).transpose("sample", ...)

    def g(name: str) -> np.ndarray:
        return post[name].transpose("sample", S.LEVEL).to_numpy()

    out: dict[str, Any] = {
        "start": g("start"),
        S.VALUE_AT_CHANGEPOINT: g(S.VALUE_AT_CHANGEPOINT),
        "late_slope": g("late_slope"),
        "jump": g("jump") if "jump" in post else 0.0,
    }
    if likelihood == "gaussian":
        out["tau"] = g("tau")
    elif likelihood == "binomial":
        out["kappa"] = np.exp(g("log_kappa"))
    else:
        out["boundary"], out["phi"] = g("boundary"), np.exp(g("log_phi"))
        out["interior_shift"], out["interior_weight"] = g("interior_shift"), g("interior_weight")
        offsets = post["step_offset_z"].transpose("sample", S.LEVEL, S.STEP).to_numpy()
        out["step_offset"] = g("tau_logit")[:, :, None] * offsets  # (samples, levels, steps)
    return out


def _estimands(
    idata: az.InferenceData,
    data: StepData,
    config: PlateauConfig,
    grid: np.ndarray,
    pri: dict[str, np.ndarray],
    seed: int,
    log_bf: np.ndarray | None = None,
    exact_cps: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Change-point posterior (exact conditional per draw), derived draws and estimands;
    ``pri`` is ``resolve_priors(config.priors, data, config.likelihood, grid=grid)``. The change
    points, the early slopes, the pointwise log-likelihood and the change-point mass are
    added to ``idata`` (:func:`_add_derived`). ``exact_cps``: the exact sampler's change
    points and mass (:func:`~saturation.models._exact.sample_gaussian_exact`), used as they
    are; otherwise each draw's change point comes from p(c | theta, y)."""
    rng = np.random.default_rng([seed, 7])
    n_levels = len(data.levels)
    p = _param_draws(idata, config.likelihood)
    pooled = _pooled(config, n_levels)
    spread_draws = (
        idata.posterior[S.CHANGEPOINT_SPREAD].stack(sample=("chain", "draw")).to_numpy() if pooled else np.zeros(0)
    )
    corr, w_ev = level_dependence(data.y)[0], evidence_weight(data, config)
    obs = {
        "y": data.y,
        "n": np.where(np.isfinite(data.n), data.n, 1e12),
        "k": data.k if data.k is not None else np.zeros_like(data.y),
        **(data.bounded or {}),
    }
    if exact_cps is None:
        cps, mass, pointwise = _changepoint_draws(p, obs, data, config, grid, pri, rng, spread_draws, w_ev)
    else:
        cps, mass = grid[exact_cps["index"]], exact_cps["mass"]
        pointwise = np.concatenate(  # in slices of draws: the intermediates stay small
            [
                _pointwise(p, obs, data, config, cps[lo : lo + 500], slice(lo, lo + 500))
                for lo in range(0, len(cps), 500)
            ]
        )
    jump = p["jump"] if isinstance(p["jump"], np.ndarray) else np.zeros_like(p["start"])
    out: dict[str, Any] = {"levels": {}}
    early_draws = np.empty_like(cps)
    for j, level in enumerate(data.levels):
        est, early_draws[:, j] = _level_estimands(j, cps[:, j], mass[j], p, jump[:, j], data, config, grid, pri, log_bf)
        out["levels"][level] = est
    if n_levels > 1 and config.breakpoint is None:
        spread = cps.max(axis=1) - cps.min(axis=1)
        out["together"] = {
            "changepoint_range": interval(spread),
            "p_range_le_2_steps": float(np.mean(spread <= 2)),
            "changepoint_spread_parameter": interval(spread_draws) if pooled else None,
            "evidence_weight": w_ev if pooled else None,
            "level_correlation": corr.round(4).tolist() if pooled else None,
            # separate fits: the range of independently drawn change points (docs/plateau.md)
            "caveat": None
            if pooled
            else "separate fits, so a rough reading: it ignores that the levels' errors are correlated",
            "not_asked": None,  # read from the verdicts (_take_verdicts)
        }
    _add_derived(idata, data, grid, cps, early_draws, pointwise, mass)
    return out


def together_not_asked(levels: dict[str, dict[str, Any]], grid: np.ndarray) -> str | None:
    """Why "did the levels stop together?" has no answer here (None: it has one).

    It needs at least two levels that stopped rising, and candidate change points spread
    over more than 4 steps (on a shorter grid any two change points lie within 2 steps and
    P(range <= 2) would be 1 whatever the data).
    """
    stopped = [lv for lv, e in levels.items() if e["verdict"] in STOPPED_VERDICTS]
    span = float(grid.max() - grid.min()) if grid.size else 0.0
    if span <= 4:
        return f"the candidate change points span only {span:g} steps: too short a run to tell"
    if len(stopped) < 2:
        return f"{len(stopped)} of {len(levels)} levels stopped rising: there is nothing to have stopped together"
    return None


def together_sentence(together: dict[str, Any]) -> str:
    """The answer to "did the levels stop together?" in one sentence (the report's)."""
    if together.get("not_asked"):
        return f"Stopped together? Not asked: {together['not_asked']}."
    rough = f"; {together['caveat']}" if together["caveat"] else ""
    return (
        f"The change points lie within 2 steps of each other with P = {together['p_range_le_2_steps']:.2f}"
        f" (range {format_interval(together['changepoint_range'], 1)} steps{rough})."
    )


def _changepoint_draws(
    p: dict[str, Any],
    obs: dict[str, np.ndarray],
    data: StepData,
    config: PlateauConfig,
    grid: np.ndarray,
    pri: dict[str, np.ndarray],
    rng: np.random.Generator,
    spread_draws: np.ndarray,
    w_ev: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per posterior draw of the curve parameters, a change point per level from its exact
    conditional p(c | theta, y) (pooled: through the common change point); returns the
    draws (samples, levels), the averaged conditional mass (levels, candidates) and the
    pointwise log-likelihood at the drawn change points (samples, levels, steps)."""
    t = data.steps
    t0 = float(t[0])
    n_levels, n_grid = len(data.levels), len(grid)
    n_samples = p["start"].shape[0]
    pooled = _pooled(config, n_levels)
    cps = np.empty((n_samples, n_levels))
    mass = np.zeros((n_levels, n_grid))
    pointwise = np.empty((n_samples, n_levels, len(t)))
    fast = config.likelihood == "gaussian" and config.breakpoint is None
    positions = _grid_positions(t, grid) if fast else np.zeros(0, dtype=int)
    chunk = 250
    for lo in range(0, n_samples, chunk):
        sl = slice(lo, min(lo + chunk, n_samples))
        # per-draw parameters as (draws, levels, candidates, steps); step offsets vary by step
        pb = {
            key: (v[sl][:, :, None, None] if v.ndim == 2 else v[sl][:, :, None, :]) if isinstance(v, np.ndarray) else v
            for key, v in p.items()
        }
        pb["var_mean"] = data.var_mean[None, :, None, :]
        if fast:
            ll_c = gaussian_loglik_by_changepoint(
                _NP,
                data.y[None],
                data.var_mean[None] + pb["tau"][..., 0] ** 2,
                t,
                positions,
                {
                    k_: v[..., 0] if isinstance(v, np.ndarray) else v
                    for k_, v in pb.items()
                    if k_ not in ("var_mean", "tau")
                },
                t0,
            )
        else:
            ll_c = step_loglik(
                _NP,
                {k_: v[None, :, None, :] for k_, v in obs.items()},
                t[None, None, None, :],
                grid[None, None, :, None],
                pb,
                t0,
                config.likelihood,
            ).sum(axis=3)  # (D, L, C)
        # the late slope's prior depends on the change point: p(c | theta, y) includes it
        ll_c = ll_c + stats.norm.logpdf(p["late_slope"][sl][:, :, None], 0.0, pri["late_slope_sd"][None])
        m = ll_c.shape[0]
        # conditional of each level's change point given the parameters: e * w / norm
        e = np.exp(ll_c - ll_c.max(axis=2, keepdims=True))  # (D, L, C), max 1 per row
        if pooled:
            s_ = curves.effective_spread(np, spread_draws[sl])[:, None, None]
            w = np.exp(-0.5 * ((grid[None, None, :] - grid[None, :, None]) / s_) ** 2)
            w /= w.sum(axis=2, keepdims=True)  # p(c_l | c0, s): (D, C0, C)
            per_level = np.einsum("dzc,dlc->dlz", w, e)  # sum_c p(c | c0) p(y_l | c) / max: (D, L, C0)
            with np.errstate(divide="ignore"):
                log_c0 = w_ev * np.log(per_level).sum(axis=1)  # (D, C0), up to a per-draw constant
            p_c0 = np.exp(log_c0 - log_c0.max(axis=1, keepdims=True))
            p_c0 /= p_c0.sum(axis=1, keepdims=True)
            # mass: sum_z p(c0 = z) p(c_l = c | z) = e * sum_z p(z) w[z, c] / per_level[z]
            ratio = np.divide(p_c0[:, None, :], per_level, out=np.zeros_like(per_level), where=per_level > 0)
            mass += (e * np.einsum("dlz,dzc->dlc", ratio, w)).sum(axis=0)
            i0 = sample_rows(rng, p_c0)
            cond_sel = e * w[np.arange(m), i0, :][:, None, :]  # (D, L, C), unnormalised
            cond_sel /= cond_sel.sum(axis=2, keepdims=True)
        else:
            cond_sel = e / e.sum(axis=2, keepdims=True)
            mass += cond_sel.sum(axis=0)
        for j in range(n_levels):
            idx = sample_rows(rng, cond_sel[:, j, :])
            cps[sl, j] = grid[idx]
        pointwise[sl] = _pointwise(p, obs, data, config, cps[sl], sl)
    mass /= n_samples
    return cps, mass, pointwise


def _pointwise(
    p: dict[str, Any],
    obs: dict[str, np.ndarray],
    data: StepData,
    config: PlateauConfig,
    cps: np.ndarray,
    sl: slice = slice(None),
) -> np.ndarray:
    """Pointwise log-likelihood (draws, levels, steps) of draws ``sl`` at their change
    points ``cps`` (draws, levels)."""
    pj = {
        key: (v[sl][:, :, None] if v.ndim == 2 else v[sl]) if isinstance(v, np.ndarray) else v for key, v in p.items()
    }
    pj["var_mean"] = data.var_mean[None]
    t = data.steps
    return np.asarray(
        step_loglik(
            _NP,
            {k_: v[None] for k_, v in obs.items()},
            t[None, None, :],
            cps[:, :, None],
            pj,
            float(t[0]),
            config.likelihood,
        )
    )


def _level_estimands(
    j: int,
    c: np.ndarray,
    mass_j: np.ndarray,
    p: dict[str, Any],
    dj: np.ndarray,
    data: StepData,
    config: PlateauConfig,
    grid: np.ndarray,
    pri: dict[str, np.ndarray],
    log_bf: np.ndarray | None,
) -> tuple[dict[str, Any], np.ndarray]:
    """One level's estimands from its change-point and parameter draws (its verdict is
    taken once all estimands are in, :func:`_take_verdicts`); also returns its early-slope
    draws."""
    t = data.steps
    t0, t_last = float(t[0]), float(t[-1])
    n_grid = len(grid)
    a, h, b2 = p["start"][:, j], p[S.VALUE_AT_CHANGEPOINT][:, j], p["late_slope"][:, j]
    end = curves.hinge_through(t_last, c, a, h, b2, dj, t0)
    if config.likelihood == "zoib":  # the hinge is on the share of ones: report the metric mean

        def metric(x: np.ndarray, j_: int = j) -> np.ndarray:
            return np.asarray(
                zoib_mean(x, p["boundary"][:, j_], p["interior_shift"][:, j_], p["interior_weight"][:, j_])
            )

        late_gain = metric(end) - metric(h + dj)
        a, h, end = metric(a), metric(h), metric(end)
        b2 = late_gain / np.maximum(t_last - c, 1.0)
    else:
        late_gain = b2 * (t_last - c)
    b1 = (h - a) / (c - t0)
    in_rope = np.abs(late_gain) < config.rope
    early_gain = h - a
    rise = early_gain + dj  # the change up to just after the break (a jump is part of the rise)
    in_rope_rel = (
        np.abs(late_gain) < config.rope_relative * np.abs(rise)
        if config.rope_relative is not None
        else np.zeros_like(in_rope)
    )
    flat = in_rope | in_rope_rel
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = b2 / b1
    ratio = ratio[np.isfinite(ratio)]
    late_gain_iv = interval(late_gain)
    # Savage-Dickey: posterior density of the late slope at 0 over its prior density at 0
    # (of the hinge's own late slope, whose prior is known; zero there is zero late gain)
    b2_hinge = p["late_slope"][:, j]
    # (kde_at: scipy.stats.gaussian_kde's number, curves.normal_pdf: scipy.stats.norm.pdf's,
    # both without importing scipy.stats)
    post_density = kde_at(b2_hinge, 0.0) if np.std(b2_hinge) > 0 else np.inf
    bf01 = post_density / float(np.mean(curves.normal_pdf(0.0, 0.0, pri["late_slope_sd"][j])))
    est: dict[str, Any] = {
        "changepoint": interval(c) if config.breakpoint is None else None,
        "changepoint_mass": {str(int(g_)): float(m_) for g_, m_ in zip(grid, mass_j, strict=True)},
        "early_slope": interval(b1),
        "late_slope": interval(b2),
        "start": interval(a),
        S.VALUE_AT_CHANGEPOINT: interval(h),
        "end": interval(end),
        "headroom_to_max": (
            interval(config.metric_max - end)
            if config.metric_max is not None and headroom_defined(data, config)
            else None
        ),
        "late_gain": late_gain_iv,
        "p_early_positive": float(np.mean(b1 > 0)),
        "p_rise_positive": float(np.mean(rise > 0)),
        "p_late_in_rope": float(np.mean(in_rope)),
        "p_late_in_rope_relative": float(np.mean(in_rope_rel)) if config.rope_relative is not None else None,
        "p_flat": float(np.mean(flat)),
        "early_gain": interval(early_gain),
        "late_gain_upper": float(late_gain_iv["hdi"][1]),
        "slowdown_ratio": interval(ratio) if ratio.size > 1 else None,
        # slower than the rise's average rate up to just after the break (a jump included)
        "p_slowed": float(np.mean(b2 < config.rule.slow_ratio * rise / (c - t0))),
        "p_late_positive": float(np.mean(b2 > 0)),
        "p_late_gain_beyond_rope": float(np.mean(late_gain > config.rope)),
        "p_late_loss_beyond_rope": float(np.mean(late_gain < -config.rope)),
        "p_no_change": float(np.mean(np.abs(end - a) < config.rope)),
        "edge_mass": float(mass_j[: config.rule.edge_candidates].sum() + mass_j[-config.rule.edge_candidates :].sum())
        if config.breakpoint is None and n_grid > 2 * config.rule.edge_candidates
        else 0.0,
        "bf_changepoint_vs_line": float(np.exp(np.clip(log_bf[j], -700, 700))) if log_bf is not None else None,
        "bf01_late_zero": float(bf01),
        # the frequentist existence test R users know (segmented::davies.test on lm(y ~ step))
        "davies": davies_test(t, data.y[j]) if np.isfinite(data.y[j]).sum() >= 5 else None,
        "p_plateaued_by_step": {str(int(s_)): float(np.mean((c <= s_) & flat)) for s_ in t},
    }
    if config.continuity in ("jump", "auto"):  # auto: the mixture's jump, 0 in the hinge's draws
        est["jump"] = interval(np.asarray(dj))
    return est, b1


def _add_derived(
    idata: az.InferenceData,
    data: StepData,
    grid: np.ndarray,
    cps: np.ndarray,
    early_draws: np.ndarray,
    pointwise: np.ndarray,
    mass: np.ndarray,
) -> None:
    """Add the drawn change points and early slopes to the posterior, the pointwise
    log-likelihood and the change-point mass as groups of ``idata``."""
    t = data.steps
    n_levels = len(data.levels)
    shape = (idata.posterior.sizes["chain"], idata.posterior.sizes["draw"])
    derived = {
        "changepoint": cps,
        "early_slope": early_draws,
    }
    for name, arr in derived.items():
        idata.posterior[name] = (("chain", "draw", S.LEVEL), arr.reshape(*shape, n_levels))
    ll_da = xr.DataArray(
        pointwise.reshape(*shape, n_levels, len(t)),
        dims=("chain", "draw", S.LEVEL, S.STEP),
        coords={S.LEVEL: data.levels, S.STEP: t},
    )
    idata.add_groups(log_likelihood=xr.Dataset({"y": ll_da}))
    idata.add_groups(
        changepoint_mass=xr.Dataset(
            {"probability": ((S.LEVEL, "candidate"), mass)}, coords={S.LEVEL: data.levels, "candidate": grid}
        )
    )


def _attach(
    idata: az.InferenceData, data: StepData, config: PlateauConfig, diag: dict[str, Any], grid: np.ndarray
) -> None:
    obs = xr.Dataset(
        {"y": ((S.LEVEL, S.STEP), data.y), "n": ((S.LEVEL, S.STEP), np.where(np.isfinite(data.n), data.n, -1))},
        coords={S.LEVEL: data.levels, S.STEP: data.steps},
    )
    idata.add_groups(observed_data=obs)
    stamp_attrs(idata, "plateau", config, data.summary, diag)


def curve_draws(fit: PlateauFit, steps: Any = None) -> np.ndarray:
    """Posterior draws of the fitted metric mean at ``steps`` (default: the observed
    steps), each draw with its own change point: array (samples, levels, steps)."""
    t = np.atleast_1d(np.asarray(fit.data.steps if steps is None else steps, dtype=float))
    p = _param_draws(fit.idata, fit.config.likelihood)
    cps = fit.idata.posterior["changepoint"].stack(sample=("chain", "draw")).transpose("sample", ...).to_numpy()
    out = np.empty((cps.shape[0], cps.shape[1], len(t)))
    for j in range(cps.shape[1]):
        dj = p["jump"][:, j, None] if isinstance(p["jump"], np.ndarray) else 0.0
        mu = curves.hinge_through(
            t[None, :],
            cps[:, j, None],
            p["start"][:, j, None],
            p[S.VALUE_AT_CHANGEPOINT][:, j, None],
            p["late_slope"][:, j, None],
            dj,
            float(fit.data.steps[0]),
        )
        if fit.config.likelihood == "zoib":
            mu = zoib_mean(
                mu, p["boundary"][:, j, None], p["interior_shift"][:, j, None], p["interior_weight"][:, j, None]
            )
        out[:, j, :] = mu
    return out


def plateau_frame(fit: PlateauFit) -> pd.DataFrame:
    """Per-step observed means with the posterior mean curve, its 94 % band and the
    posterior probability of the change point at that step (the data behind the plot)."""
    rows = []
    t = fit.data.steps
    draws = curve_draws(fit)
    for j, level in enumerate(fit.data.levels):
        mu = draws[:, j, :]
        hdi = az.hdi(mu[None], hdi_prob=S.HDI_PROB)
        mass = fit.estimands["levels"][level]["changepoint_mass"]
        for i, step in enumerate(t):
            rows.append(
                {
                    "level": level,
                    "step": step,
                    "observed": fit.data.y[j, i],
                    "mean": mu[:, i].mean(),
                    "hdi_low": hdi[i, 0],
                    "hdi_high": hdi[i, 1],
                    "p_changepoint": mass.get(str(int(step)), 0.0),
                }
            )
    return pd.DataFrame(rows)


# ====================================================================== alternatives + LOO
ALTERNATIVES = ("linear", "exponential")
#: prior sd of the exponential alternative's log time scale (centre: log of a quarter of the span)
ALTERNATIVE_LOG_SCALE_SD = 1.0


def _alt_mean(kind: str, t: Any, params: dict[str, Any], t0: float, exp: Any) -> Any:
    if kind == "linear":
        return params["start"] + params["slope"] * (t - t0)
    # exponential saturation: a - (a - b) exp(-(t - t0) / k), k = exp(log_scale)
    return curves.exp_saturation(
        t, asymptote=params["asymptote"], start=params["start"], scale=exp(params["log_scale"]), t0=t0
    )


def fit_alternative(
    data: StepData,
    kind: str,
    *,
    seed: int = 0,
    sampler: SamplerConfig | None = None,
    priors: PlateauPriors | None = None,
    asymptote_bounds: tuple[float, float] | None = None,
) -> az.InferenceData:
    """Fit a no-change-point alternative (Gaussian on per-step means, same variance model).

    ``kind="linear"``: :math:`\\mu(t) = a + \\beta (t - t_0)`, :math:`\\beta` with the
    unit-information prior of :class:`PlateauPriors` for a segment over the whole run.
    ``kind="exponential"``: :math:`\\mu(t) = A - (A - a) e^{-(t - t_0)/k}`, asymptote
    :math:`A \\sim N(\\text{last third}, r)`, :math:`\\log k \\sim N(\\log(T/4), 1)`.

    Parameters
    ----------
    data : StepData
        Per-step inputs (:func:`step_data`).
    kind : {"linear", "exponential"}
        The alternative curve.
    seed : int
        Seeds the sampler.
    sampler : SamplerConfig, optional
        Sampler settings (default :class:`SamplerConfig`): "auto"/"exact" draws both curves
        exactly (:func:`~saturation.models._exact.sample_alternative_exact`; no MCMC, no
        compilation), "nutpie"/"pymc"/"numpyro" sample the same model by NUTS (the
        cross-check).
    priors : PlateauPriors, optional
        Prior settings, resolved for ``data`` as in :func:`fit_plateau`.
    asymptote_bounds : (float, float), optional
        The exponential's asymptote kept inside this range (its prior truncated there; the
        exact sampler only): a ceiling of a rate is a rate.

    Returns
    -------
    arviz.InferenceData
        Posterior and a pointwise ``log_likelihood`` (level, step) for LOO; attrs by
        ``stamp_attrs``.
    """
    if kind not in ALTERNATIVES:
        raise ValueError(f"kind must be one of {ALTERNATIVES}")
    sampler = sampler or SamplerConfig()
    pri, m0, sd0, log_scale_mu = _alternative_priors(data, kind, priors)
    t0 = float(data.steps[0])
    if sampler.sampler in ("auto", "exact"):
        idata, timings = sample_alternative_exact(
            kind=kind,
            y=data.y,
            var_mean=data.var_mean,
            steps=data.steps,
            m0=m0,
            sd0=sd0,
            tau_sd=pri["tau_sd"],
            log_scale_mu=log_scale_mu,
            log_scale_sd=ALTERNATIVE_LOG_SCALE_SD,
            levels=data.levels,
            chains=sampler.chains,
            draws=sampler.draws,
            seed=seed,
            asymptote_bounds=asymptote_bounds if kind == "exponential" else None,
        )
    else:
        if asymptote_bounds is not None and kind == "exponential":
            raise OptionError("a bounded asymptote needs the exact sampler (sampler='auto' or 'exact')")
        idata, timings = _sample_alternative_nuts(data, kind, pri, log_scale_mu, seed, sampler)
    post = idata.posterior
    p = {name: post[name].to_numpy()[..., None] for name in post.data_vars}
    mu_np = _alt_mean(kind, data.steps, p, t0, np.exp)  # (chain, draw, level, step)
    var_np = data.var_mean + p["tau"] ** 2
    ll = curves.normal_logpdf(np, data.y, mu_np, var_np)
    idata.add_groups(
        log_likelihood=xr.Dataset(
            {"y": (("chain", "draw", S.LEVEL, S.STEP), ll)}, coords={S.LEVEL: data.levels, S.STEP: data.steps}
        )
    )
    diag = diagnostics(idata, list(post.data_vars))
    config = {"kind": kind, "priors": asdict(priors or PlateauPriors()), "sampler": asdict(sampler), "seed": seed}
    stamp_attrs(idata, kind, config, data.summary, diag, timings)
    warn_if_not_converged(diag, f"{kind} alternative ({data.response})")
    return idata


def _alternative_priors(
    data: StepData, kind: str, priors: PlateauPriors | None
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The alternatives' resolved priors, the (levels, 2) prior means and sds of their two
    linear parameters (start and slope: N(0, the unit-information width of a line over the
    whole run); start and asymptote: N(level_mu, level_sd)) and the exponential's log time
    scale centres (a quarter of the span)."""
    pri = resolve_priors(priors or PlateauPriors(), data)
    pri["late_slope_sd"] = pri["late_slope_sd"][:, 0]  # the slope of a line over the whole run
    line = kind == "linear"
    m0 = np.stack([pri["start_mu"], np.zeros_like(pri["start_mu"]) if line else pri["level_mu"]], axis=-1)
    sd0 = np.stack([pri["start_sd"], pri["late_slope_sd"] if line else pri["level_sd"]], axis=-1)
    span = max(float(data.steps[-1] - data.steps[0]), 1.0)
    return pri, m0, sd0, np.full(len(data.levels), np.log(span / 4))


def _sample_alternative_nuts(
    data: StepData,
    kind: str,
    pri: dict[str, np.ndarray],
    log_scale_mu: np.ndarray,
    seed: int,
    sampler: SamplerConfig,
) -> tuple[az.InferenceData, dict[str, Any]]:
    """:func:`fit_alternative`'s model sampled by NUTS (the cross-check of the exact draws)."""
    t0 = float(data.steps[0])
    values = {
        "y": data.y,
        "t": data.steps,
        "var_mean": data.var_mean,
        "t0": np.asarray(t0),
        "prior_log_scale_mu": log_scale_mu,
        **{f"prior_{k}": v for k, v in pri.items()},
    }
    with pm.Model(coords={S.LEVEL: data.levels}) as model:
        d = {name: pm.Data(name, v) for name, v in values.items()}
        params: dict[str, Any] = {
            "start": pm.Normal("start", d["prior_start_mu"], d["prior_start_sd"], dims=S.LEVEL)[:, None]
        }
        if kind == "linear":
            params["slope"] = pm.Normal("slope", 0.0, d["prior_late_slope_sd"], dims=S.LEVEL)[:, None]
        else:
            params["asymptote"] = pm.Normal("asymptote", d["prior_level_mu"], d["prior_level_sd"], dims=S.LEVEL)[
                :, None
            ]
            params["log_scale"] = pm.Normal(
                "log_scale", d["prior_log_scale_mu"], ALTERNATIVE_LOG_SCALE_SD, dims=S.LEVEL
            )[:, None]
        tau = pm.HalfNormal("tau", d["prior_tau_sd"], dims=S.LEVEL)
        mu = _alt_mean(kind, d["t"][None, :], params, d["t0"], pt.exp)
        var = d["var_mean"] + tau[:, None] ** 2
        pm.Potential("likelihood", curves.normal_logpdf(pt, d["y"], mu, var).sum())
    key = ("alternative", kind, data.y.shape, bool(np.isfinite(data.n).all()))
    return sample_model(model, cache_key=key, data=values, seed=seed, config=sampler)


def exact_loo(data: StepData, kind: str, config: PlateauConfig | None = None) -> np.ndarray:
    """Exact leave-one-out predictive densities, (levels, steps), of the Gaussian curves whose
    parameters are integrated analytically (:meth:`~saturation.models._exact.Level.loo`).

    ``kind``: "hinge" (the change-point model with separate change points, or a known
    break), "linear" or "exponential" (:func:`fit_alternative`'s curves). Each deletion is
    closed-form given the change point (or time scale) and tau; these are summed over the
    full data's grids, whose priors stay those resolved on all the data.

    Parameters
    ----------
    data : StepData
        Per-step inputs.
    kind : {"hinge", "linear", "exponential"}
        The model.
    config : PlateauConfig, optional
        Settings of the hinge (known break, continuity, priors) and the priors of the
        alternatives; default :class:`PlateauConfig`.

    Returns
    -------
    numpy.ndarray
        (levels, steps) pointwise log predictive densities :math:`\\log p(y_i \\mid y_{-i})`.
    """

    config = config or PlateauConfig()
    if config.likelihood != "gaussian":
        raise ValueError("exact LOO needs the Gaussian likelihood")
    t = data.steps
    t0 = float(t[0])
    out = np.empty(data.y.shape)
    if kind == "hinge":
        if _pooled(config, len(data.levels)):
            raise ValueError("exact LOO is implemented for separate change points or a known break, not pooled ones")
        grid = _grid(data, config)
        pri = resolve_priors(config.priors, data, grid=grid)
        # "auto", the mixture of the two shapes (1/2 each): with E_s = log Z_s(y) and
        # l_s = log p(y_i | y_-i, s) = E_s - log Z_s(y_-i),
        # log p(y_i | y_-i) = logaddexp(E_h, E_j) - logaddexp(E_h - l_h, E_j - l_j)
        shapes = (False, True) if config.continuity == "auto" else (config.continuity == "jump",)
        for j in range(len(data.levels)):
            parts = []
            for jump in shapes:
                m0_, sd0_ = curve_prior(pri, j, jump)
                level = Level(
                    data.y[j],
                    data.var_mean[j],
                    design(t, grid, t0, jump),
                    m0_,
                    sd0_,
                    float(pri["tau_sd"][j]),
                    hinge=(t, grid, jump, t0),
                )
                parts.append((level.log_evidence, level.loo()))
            (e_h, l_h), (e_j, l_j) = parts[0], parts[-1]
            gated = config.jump_gate is not None and e_j - e_h < np.log(config.jump_gate)
            if len(parts) == 1 or gated:  # one shape, or the hinge alone below the gate
                out[j] = l_h
            else:
                out[j] = np.logaddexp(e_h, e_j) - np.logaddexp(e_h - l_h, e_j - l_j)
        return out
    if kind not in ALTERNATIVES:
        raise ValueError(f"kind must be 'hinge', 'linear' or 'exponential', got {kind!r}")
    pri, m0, sd0, log_scale_mu = _alternative_priors(data, kind, config.priors)
    for j in range(len(data.levels)):
        level, _, log_prior = alternative_level(
            kind,
            data.y[j],
            data.var_mean[j],
            t,
            m0[j],
            sd0[j],
            float(pri["tau_sd"][j]),
            float(log_scale_mu[j]),
            ALTERNATIVE_LOG_SCALE_SD,
        )
        out[j] = level.loo() if log_prior is None else level.loo(log_prior, design_stride=LOO_TAU_STRIDE)
    return out


def _elpd_exact(idata: az.InferenceData, loo_i: np.ndarray) -> Any:
    """ArviZ's PSIS-LOO result with the pointwise values replaced by exact ones (the
    Pareto k of the PSIS estimate are kept for reference; the warning is cleared)."""
    with warnings.catch_warnings():  # the PSIS estimate is replaced: its Pareto-k warning does not apply
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto", category=UserWarning)
        res = az.loo(idata, pointwise=True)
    flat = loo_i.reshape(-1)
    ll = idata.log_likelihood["y"].stack(__sample__=("chain", "draw")).transpose("__sample__", ...).to_numpy()
    lppd = special.logsumexp(ll.reshape(ll.shape[0], -1), axis=0) - np.log(ll.shape[0])
    res["loo_i"] = res["loo_i"].copy(data=loo_i.reshape(res["loo_i"].shape))
    res["elpd_loo"] = float(flat.sum())
    res["se"] = float(np.sqrt(flat.size * np.var(flat)))
    res["p_loo"] = float(lppd.sum() - flat.sum())
    res["warning"] = False
    return res


def compare_plateau_models(
    data: xr.Dataset | StepData,
    *,
    models: tuple[str, ...] = ("hinge", "linear", "exponential"),
    seed: int = 0,
    sampler: SamplerConfig | None = None,
    **plateau_kwargs: Any,
) -> tuple[pd.DataFrame, dict[str, az.InferenceData]]:
    """ArviZ LOO comparison of plateau models on the same per-step data.

    ``models`` may contain "hinge" (:func:`fit_plateau` with ``plateau_kwargs``; add
    "hinge-separate"/"hinge-shared" to compare pooling), "linear" and "exponential".

    Notes
    -----
    Gaussian models whose curve parameters integrate analytically get **exact** leave-one-out
    values (:func:`exact_loo`): the hinge with separate change points (or a known break),
    the line and the exponential curve. PSIS-LOO is unreliable here: the change-point
    models' pointwise log-likelihood is conditional on the change point drawn in each draw
    (Pareto k > 0.7 at most steps on the replica), and even the exponential curve had
    Pareto k up to 0.78-0.96 on the replica. The pooled hinge keeps PSIS; the table's
    ``loo_method`` column says which, and ``caveat`` names the PSIS models with Pareto
    k > 0.7 (their ELPD is not to be trusted).

    Parameters
    ----------
    data : xarray.Dataset or StepData
        Trials, aggregates or a series (:func:`step_data`).
    models : tuple of str
        The models to compare.
    seed : int
        Seeds every fit.
    sampler : SamplerConfig, optional
        Sampler settings of the NUTS fits.
    **plateau_kwargs
        Passed to :func:`fit_plateau` (levels, response, breakpoint, ...).

    Returns
    -------
    (pandas.DataFrame, dict)
        ``az.compare``'s table (one row per model, ELPD, SE, weights, ``loo_method``,
        ``caveat``) and each model's InferenceData by name.
    """
    sd = (
        data
        if isinstance(data, StepData)
        else step_data(
            data,
            response=plateau_kwargs.pop("response", S.F1),
            levels=plateau_kwargs.pop("levels", None),
            run=plateau_kwargs.pop("run", None),
        )
    )
    elpd, method, fits = loo_entries(sd, models, seed=seed, sampler=sampler, **plateau_kwargs)
    return loo_table(elpd, method), fits


def loo_entries(
    sd: StepData,
    models: tuple[str, ...],
    *,
    seed: int = 0,
    sampler: SamplerConfig | None = None,
    config: PlateauConfig | None = None,
    hinge: PlateauFit | None = None,
    **plateau_kwargs: Any,
) -> tuple[dict[str, Any], dict[str, str], dict[str, az.InferenceData]]:
    """Fit ``models`` (as :func:`compare_plateau_models`) on ``sd`` and return each one's ArviZ
    ELPD result (exact LOO where the model allows it, else PSIS), its method ("exact" or
    "PSIS") and its InferenceData, by name. With ``config`` the hinge fits take it (and its
    sampler and priors) instead of ``plateau_kwargs``; ``hinge``, a fit of ``config`` on
    ``sd`` with ``seed``, is used as the "hinge" model instead of fitting it again."""
    if config is not None:
        sampler = config.sampler
        plateau_kwargs = {"priors": config.priors, "metric_max": config.metric_max}
    fits: dict[str, az.InferenceData] = {}
    elpd: dict[str, Any] = {}
    method: dict[str, str] = {}
    for name in models:
        if name.startswith("hinge"):
            kw = dict(plateau_kwargs)
            if name == "hinge-separate":
                kw["shared"] = False
            elif name == "hinge-shared":
                kw["shared"] = True
            if name == "hinge" and hinge is not None:
                fit = hinge
            elif config is not None:
                fit = fit_plateau(sd, replace(config, **{k: v for k, v in kw.items() if k == "shared"}), seed=seed)
            else:
                fit = fit_plateau(sd, seed=seed, sampler=sampler, **kw)
            fits[name] = fit.idata
            exact = fit.config.likelihood == "gaussian" and not _pooled(fit.config, len(sd.levels))
            if exact:
                elpd[name] = _elpd_exact(fit.idata, exact_loo(sd, "hinge", fit.config))
        else:
            metric_max = plateau_kwargs.get("metric_max", 1.0)
            bounds = _asymptote_bounds(sd, metric_max, sampler) if name == "exponential" else None
            fits[name] = fit_alternative(
                sd, name, seed=seed, sampler=sampler, priors=plateau_kwargs.get("priors"), asymptote_bounds=bounds
            )
            # the closed-form LOO is the untruncated curve's: exact while no draw fell outside
            # the bounds, else PSIS over the bounded model's own draws
            exact = max(fits[name].posterior.attrs.get("asymptote_outside_fraction", [0.0])) == 0.0
            if exact:
                elpd[name] = _elpd_exact(
                    fits[name],
                    exact_loo(sd, name, PlateauConfig(priors=plateau_kwargs.get("priors") or PlateauPriors())),
                )
        if not exact:
            with warnings.catch_warnings():  # high Pareto k is this table's own caveat (below)
                warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto", category=UserWarning)
                elpd[name] = az.loo(fits[name], pointwise=True)
        method[name] = "exact" if exact else "PSIS"
    return elpd, method, fits


def _asymptote_bounds(
    sd: StepData, metric_max: float | None, sampler: SamplerConfig | None
) -> tuple[float, float] | None:
    """[0, metric_max] for the exponential's ceiling when the per-step values lie in that
    range (a rate's ceiling is a rate) and the exact sampler draws it; else None."""
    exact = sampler is None or sampler.sampler in ("auto", "exact")
    if not exact or not headroom_defined(sd, PlateauConfig(metric_max=metric_max)) or metric_max is None:
        return None
    return (0.0, float(metric_max))


def loo_table(elpd: dict[str, Any], method: dict[str, str]) -> pd.DataFrame:
    """``az.compare``'s table of the ELPD results (stacking weights) with ``loo_method`` and
    ``caveat`` columns: PSIS rows with Pareto k > 0.7 are flagged, and ``table.attrs["caveat"]``
    names them."""
    table = az.compare(elpd, ic="loo")
    table["loo_method"] = [method[m] for m in table.index]
    bad = [m for m in table.index if method[m] == "PSIS" and bool(np.any(np.asarray(elpd[m]["pareto_k"]) > 0.7))]
    table["caveat"] = ["Pareto k > 0.7: PSIS estimate unreliable" if m in bad else "" for m in table.index]
    table.attrs["caveat"] = (
        f"PSIS-LOO unreliable (Pareto k > 0.7) for {', '.join(bad)}; exact LOO for "
        f"{', '.join(m for m in table.index if method[m] == 'exact') or 'none'}"
        if bad
        else ""
    )
    return table


def plateau_prior_predictive(
    data: xr.Dataset | StepData,
    *,
    draws: int = 500,
    seed: int = 0,
    config: PlateauConfig | None = None,
    response: str = S.F1,
    levels: list[str] | None = None,
) -> xr.Dataset:
    """Prior predictive check: per-step means simulated from the priors.

    Draws the change point uniformly from its candidate grid (or the known break), the
    curve parameters from :class:`PlateauPriors` (as resolved for ``data``), and per-step
    means from the Gaussian likelihood with the data's own within-step variances.


    Parameters
    ----------
    data : xarray.Dataset or StepData
        The data whose design (steps, within-step variances) and scale set the priors.
    draws : int
        Prior draws.
    seed : int
        Seeds the draws.
    config : PlateauConfig, optional
        Settings (known break, priors); default :class:`PlateauConfig`.
    response : str
        Modelled variable when ``data`` is a Dataset.
    levels : list of str, optional
        Levels when ``data`` is a Dataset.

    Returns
    -------
    xarray.Dataset
        Dims draw, level, step: ``mu`` (prior curves), ``y`` (prior predictive means),
        ``changepoint``, and ``observed``.
    """
    config = config or PlateauConfig()
    sd = data if isinstance(data, StepData) else step_data(data, response=response, levels=levels)
    rng = np.random.default_rng([seed, 11])
    n_levels = len(sd.levels)
    t = sd.steps
    t0 = float(t[0])
    grid = _grid(sd, config)
    pri = resolve_priors(config.priors, sd, grid=grid)

    def normal(mu: np.ndarray, sd_: np.ndarray) -> np.ndarray:
        return rng.normal(mu, sd_, size=(draws, n_levels))[..., None]

    c_idx = rng.integers(0, len(grid), size=(draws, n_levels))
    c = grid[c_idx][..., None]
    start = normal(pri["start_mu"], pri["start_sd"])
    level = normal(pri["level_mu"], pri["level_sd"])
    late = (rng.standard_normal((draws, n_levels)) * pri["late_slope_sd"][np.arange(n_levels), c_idx])[..., None]
    jump = normal(np.zeros(n_levels), pri["jump_sd"]) if config.continuity in ("jump", "auto") else 0.0
    if config.continuity == "auto":  # the mixture: each shape with prior probability 1/2
        jump = jump * (rng.random((draws, n_levels, 1)) < 0.5)
    tau = np.abs(normal(np.zeros(n_levels), pri["tau_sd"]))
    mu = curves.hinge_through(t[None, None, :], c, start, level, late, jump, t0)
    y = mu + rng.standard_normal(mu.shape) * np.sqrt(sd.var_mean[None] + tau**2)
    coords = {"draw": np.arange(draws), S.LEVEL: sd.levels, S.STEP: t}
    return xr.Dataset(
        {
            "mu": (("draw", S.LEVEL, S.STEP), mu),
            "y": (("draw", S.LEVEL, S.STEP), y),
            "changepoint": (("draw", S.LEVEL), c[..., 0]),
            "observed": ((S.LEVEL, S.STEP), sd.y),
        },
        coords=coords,
    )
