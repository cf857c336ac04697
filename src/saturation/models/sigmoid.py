"""Saturation curves per recipe arm: where does each arm saturate, and which is higher?

The sigmoidal compute-performance curve of Khatri et al. (2025, arXiv 2510.13786),
:func:`saturation.curves.sigmoid_saturation`, fitted per arm with a bounded likelihood, so
that the asymptote (the ceiling), the efficiency and the midpoint have posteriors, and
arms are compared by ``P(A_arm > A_reference)`` instead of least-squares point estimates.

Data: per (arm, step) the all-rollout reward (ungraded rollouts count as logged, 0) from
the trials; ``x = step - first step + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import curves
from saturation import schema as S
from saturation._lazy import InferenceDataField, held_idata, lazy
from saturation.aggregate import phase_summary, select_phase
from saturation.configs import (
    DEFAULT_COMPUTE,
    FORECAST_DELTA,
    FORECAST_HORIZON,
    MIN_FIT_STEPS,
    PAIRED_SAMPLER,
    SigmoidConfig,
    SigmoidPriors,
)
from saturation.configs import SIGMOID_SAMPLER as DEFAULT_SAMPLER
from saturation.limits import OptionError, config_or_keywords
from saturation.models.families import FamilyComparison, compare_curve_families
from saturation.models.persist import FigureView, FitObject, TableView
from saturation.models.sampling import (
    SamplerConfig,
    available_samplers,
    diagnostics,
    hdi_1d,
    hdi_columns,
    interval,
    sample_compiled,
    sample_model,
    stamp_attrs,
    warn_if_not_converged,
)
from saturation.summary import convergence_words, format_interval, interval_cell, interval_rows, json_safe, short_repr

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm
    import pytensor.tensor as pt

    from saturation.models import sigmoid_kernel
else:  # imported on first use (ARCHITECTURE.md): the spec and the CLI read this module's configs
    az, pm, pt = map(lazy, ("arviz", "pymc", "pytensor.tensor"))
    sigmoid_kernel = lazy("saturation.models.sigmoid_kernel")  # numba

#: the curve parameters, in the order of :func:`curves.sigmoid_saturation`
PARAMS = ("r0", "asymptote", "efficiency", "midpoint")
#: the decision threshold of the ceiling comparison (P(A higher) >= it, or <= 1 - it)
P_DECIDE = 0.95
#: extrapolating compute past an arm's last logged step uses the mean of its last this many steps
COMPUTE_RATE_STEPS = 5


def half_rise_log_x(x: np.ndarray, mean: np.ndarray) -> float:
    """The log of the ``x`` at which an arm's observed curve, smoothed over 5 steps, first
    gets half-way from its start (the first 3 steps) to its level over the last third: the
    default centre of the midpoint's prior. The middle of the run when the curve does not
    rise (or has fewer than 6 steps).

    The middle of the run (the centre before) sat far after an early knee (25 for a true
    midpoint of 8 in benchmarks/sigmoid_recovery.py's design): the prior pulled the
    midpoint late, the efficiency low and the asymptote high (docs/compare.md)."""
    x, mean = np.asarray(x, dtype=float), np.asarray(mean, dtype=float)
    middle = float(np.log(np.median(x)))
    if len(x) < 6:
        return middle
    start, late = float(mean[:3].mean()), float(mean[-max(len(mean) // 3, 1) :].mean())
    if not late > start:
        return middle
    smooth = pd.Series(mean).rolling(5, center=True, min_periods=1).mean().to_numpy()
    reached = np.flatnonzero(smooth >= start + 0.5 * (late - start))
    return float(np.log(x[reached[0]])) if reached.size else middle


@dataclass
class InstanceCells:
    """Rollouts ``n`` and successes ``k`` per observed (arm, step, instance): index arrays
    into ``ArmSteps.arms``, ``ArmSteps.steps`` and ``instances``."""

    arm_idx: np.ndarray
    step_idx: np.ndarray
    inst_idx: np.ndarray
    n: np.ndarray
    k: np.ndarray
    instances: list[str]

    def keep(self, mask: np.ndarray) -> InstanceCells:
        """The cells whose (arm, step) is True in ``mask`` (arms, steps)."""
        sel = mask[self.arm_idx, self.step_idx]
        return replace(
            self,
            arm_idx=self.arm_idx[sel],
            step_idx=self.step_idx[sel],
            inst_idx=self.inst_idx[sel],
            n=self.n[sel],
            k=self.k[sel],
        )


@dataclass
class ArmSteps:
    """Per (arm, step) statistics of the all-rollout reward: ``n``, ``successes`` (sum),
    ``mean`` and ``var_mean`` (the mean's sampling variance), arrays (arm, step) with
    NaN / 0 where an arm has no trials at a step."""

    arms: list[str]
    steps: np.ndarray
    n: np.ndarray
    successes: np.ndarray
    mean: np.ndarray
    var_mean: np.ndarray
    binary: bool
    summary: dict[str, Any]
    #: per arm (integer steps, cumulative compute through each, per-step rate for
    #: extrapolation) when the x axis is compute (:func:`with_compute`); None: steps
    compute: tuple[tuple[np.ndarray, np.ndarray, float], ...] | None = None
    #: the per-step compute metric of ``compute``
    compute_key: str | None = None
    #: per (arm, step, instance) rollouts and successes (:func:`instance_cells`), for paired arms
    cells: InstanceCells | None = None

    @property
    def x(self) -> np.ndarray:
        """The step axis, shared by the arms: ``step - first step + 1`` (ValueError on a
        compute axis, where x differs per arm: :attr:`x_cells`, :meth:`x_of`)."""
        if self.compute is not None:
            raise ValueError("on a compute axis x differs per arm: use x_cells or x_of(arm, steps)")
        return self.steps - self.steps[0] + 1.0

    @property
    def axis(self) -> str:
        return "step" if self.compute is None else "compute"

    def x_of(self, a: int, steps: Any) -> np.ndarray:
        """Arm ``a``'s x at ``steps``: ``step - first step + 1``, or the compute spent through
        each step (linear past the arm's last logged step, at its last steps' mean rate)."""
        steps = np.asarray(steps, dtype=float)
        if self.compute is None:
            return steps - self.steps[0] + 1.0
        grid, cum, rate = self.compute[a]
        inside = np.interp(steps, grid, cum)
        return np.where(steps > grid[-1], cum[-1] + (steps - grid[-1]) * rate, inside)

    @property
    def x_cells(self) -> np.ndarray:
        """x of every (arm, step), (arms, steps)."""
        return np.stack([self.x_of(a, self.steps) for a in range(len(self.arms))])


def arm_steps(
    ds: xr.Dataset,
    arms: list[str] | None = None,
    *,
    metrics: xr.Dataset | None = None,
    compute: str = DEFAULT_COMPUTE,
    paired: bool = False,
) -> ArmSteps:
    """The per (arm, step) statistics of a trial Dataset with an ``arm`` coordinate; with
    ``metrics`` (per-step series of the arms' runs) on a compute axis (:func:`with_compute`);
    with ``paired``, also the per (arm, step, instance) cells (:func:`instance_cells`).
    One phase only (:func:`~saturation.aggregate.select_phase`)."""
    ds = select_phase(ds)
    data = _arm_steps(ds, arms)
    if paired:
        data = replace(data, cells=instance_cells(ds, data))
    if metrics is None:
        return data
    return with_compute(data, step_compute(metrics, ds, compute, data.arms), compute)


def series_arm_steps(
    series: xr.Dataset,
    metric: str,
    arms: list[str] | None = None,
    *,
    compute: str | None = None,
) -> ArmSteps:
    """The per (arm, step) data of a logged per-step metric: each run of the series is an
    arm, each logged value one observation (no rollout counts: ``n`` is 1, the sampling
    variance 0, so the Gaussian likelihood's step noise tau carries all of it). With
    ``compute``, on the compute axis of the same series' runs (:func:`with_compute`).

    Raises
    ------
    KeyError
        An unknown metric or arm.
    ValueError
        Logged values outside [0, 1] (the curve is a rate) or an arm with fewer than
        :data:`MIN_FIT_STEPS` values.
    """
    var = S.metric_variable(series, metric)
    present = [str(r) for r in series[S.RUN].values]
    arms = list(arms) if arms else present
    unknown = [a for a in arms if a not in present]
    if unknown:
        raise KeyError(f"unknown arm(s) {', '.join(unknown)}; the series has runs {', '.join(present)}")
    values = series[var].sel({S.RUN: arms}).to_numpy().astype(float)
    steps = series[S.STEP].to_numpy().astype(float)
    seen = np.isfinite(values)
    keep = seen.any(axis=0)
    values, steps, seen = values[:, keep], steps[keep], seen[:, keep]
    bad = seen & ((values < 0) | (values > 1))
    if bad.any():
        a, j = (int(i[0]) for i in np.nonzero(bad))
        raise ValueError(
            f"{metric}: the saturation curve is a rate in [0, 1]; arm {arms[a]} has {values[a, j]:g} "
            f"at step {int(steps[j])}: compare a metric in [0, 1] (a success rate, one reward function's "
            "mean), or fit this one with `saturation plateau FILE --metric KEY` (any scale)"
        )
    short = [a for a, row in zip(arms, seen, strict=True) if row.sum() < MIN_FIT_STEPS]
    if short:
        raise ValueError(f"{metric}: fewer than {MIN_FIT_STEPS} logged steps for arm(s) {', '.join(short)}")
    for arm, row, v in zip(arms, seen, values, strict=True):
        if np.ptp(v[row]) == 0:
            raise ValueError(
                f"{metric}: arm {arm!r} logged {v[row][0]:g} at every one of its {int(row.sum())} steps: its ceiling "
                "would be the prior's; leave it out (--arms)"
            )
    n = seen.astype(float)
    mean = np.where(seen, values, np.nan)
    summary = {
        "n_trials": None,
        "series": metric,
        "arms": arms,
        "steps": [int(steps[0]), int(steps[-1])],
        "steps_per_arm": {a: int(row.sum()) for a, row in zip(arms, seen, strict=True)},
    }
    data = ArmSteps(arms, steps, n, np.where(seen, values, 0.0), mean, np.zeros_like(n), False, summary)
    if compute is None:
        return data
    return with_compute(data, step_compute(series, None, compute, arms), compute)


def instance_cells(ds: xr.Dataset, data: ArmSteps) -> InstanceCells:
    """Rollouts and successes per (arm, step, instance) of ``data``'s arms (ungraded
    rollouts count as failures, as in :func:`arm_steps`); ValueError unless every reward
    is 0 or 1."""
    if not data.binary:
        raise ValueError("paired arms need rewards that are 0 or 1 (resolve rates)")
    frame = pd.DataFrame(
        {
            S.ARM: ds[S.ARM].to_numpy().astype(str),
            S.STEP: ds[S.STEP].to_numpy().astype(float),
            S.INSTANCE_ID: ds[S.INSTANCE_ID].to_numpy().astype(str),
            "y": np.where(np.isfinite(ds[S.REWARD].to_numpy()), ds[S.REWARD].to_numpy(), 0.0),
        }
    )
    frame = frame[frame[S.ARM].isin(data.arms)]
    g = frame.groupby([S.ARM, S.STEP, S.INSTANCE_ID], sort=True)["y"].agg(["size", "sum"]).reset_index()
    instances = sorted(set(g[S.INSTANCE_ID]))
    pos = {v: i for i, v in enumerate(instances)}
    step_pos = {v: i for i, v in enumerate(data.steps)}
    return InstanceCells(
        arm_idx=g[S.ARM].map({a: i for i, a in enumerate(data.arms)}).to_numpy(dtype=np.int64),
        step_idx=g[S.STEP].map(step_pos).to_numpy(dtype=np.int64),
        inst_idx=g[S.INSTANCE_ID].map(pos).to_numpy(dtype=np.int64),
        n=g["size"].to_numpy(dtype=np.int64),
        k=np.round(g["sum"].to_numpy()).astype(np.int64),
        instances=instances,
    )


def _arm_steps(ds: xr.Dataset, arms: list[str] | None) -> ArmSteps:
    if S.ARM not in ds.coords:
        raise ValueError("the trials have no arm coordinate: a comparison needs arms (ingest --arm DIR=NAME)")
    frame = pd.DataFrame(
        {
            S.ARM: ds[S.ARM].to_numpy().astype(str),
            S.STEP: ds[S.STEP].to_numpy(),
            "y": np.where(np.isfinite(ds[S.REWARD].to_numpy()), ds[S.REWARD].to_numpy(), 0.0),
        }
    )
    present = sorted(set(frame[S.ARM]))
    arms = list(arms) if arms else present
    unknown = [a for a in arms if a not in present]
    if unknown:
        raise KeyError(f"unknown arm(s) {', '.join(unknown)}; have {', '.join(present)}")
    if len(arms) < 1:
        raise ValueError("no arms to fit")
    frame["graded"] = ds[S.GRADED].to_numpy().astype(bool)
    frame = frame[frame[S.ARM].isin(arms)]
    _check_arms_informative(frame, arms)
    steps = np.sort(frame[S.STEP].unique()).astype(float)
    g = frame.groupby([S.ARM, S.STEP])["y"].agg(["size", "sum", "var"])
    n = np.zeros((len(arms), len(steps)))
    s = np.zeros_like(n)
    var = np.full_like(n, np.nan)
    pos = {v: i for i, v in enumerate(steps)}
    for (arm, step), row in g.iterrows():
        i, j = arms.index(arm), pos[float(step)]
        n[i, j], s[i, j], var[i, j] = row["size"], row["sum"], row["var"]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        # floor: a step whose rollouts all agree still has a binomial-sized uncertainty
        floor = np.clip(mean, 0.05, 0.95) * (1 - np.clip(mean, 0.05, 0.95))
        var_mean = np.where(n > 1, np.maximum(np.nan_to_num(var), floor / 4) / np.maximum(n, 1), np.nan)
    binary = bool(np.isin(frame["y"].to_numpy(), (0.0, 1.0)).all())
    summary = {
        "n_trials": len(frame),
        "arms": arms,
        "steps": [int(steps[0]), int(steps[-1])],
        "trials_per_arm": {a: int(n[i].sum()) for i, a in enumerate(arms)},
        **phase_summary(ds),
    }
    return ArmSteps(arms, steps, n, s, mean, var_mean, binary, summary)


def _check_arms_informative(frame: pd.DataFrame, arms: list[str]) -> None:
    """An arm whose rollouts all crashed (none graded) or all scored the same reward has no
    curve: a fit would return the prior's ceiling and call it converged. ValueError naming
    the arm, before anything is fitted."""
    for arm in arms:
        rows = frame[frame[S.ARM] == arm]
        if not rows["graded"].any():
            raise ValueError(
                f"arm {arm!r}: none of its {len(rows):,} rollouts is graded (all crashed or unparsable): there is "
                "no curve to fit; leave it out (--arms) or fix its grading"
            )
        y = rows["y"].to_numpy()
        if np.ptp(y) == 0:
            raise ValueError(
                f"arm {arm!r}: every one of its {len(rows):,} rollouts has reward {y[0]:g} (no variation at any "
                "step): its ceiling would be the prior's; leave it out (--arms)"
            )


def step_compute(metrics: xr.Dataset, trials: xr.Dataset | None, key: str, arms: list[str]) -> dict[str, pd.Series]:
    """Per arm, its run's per-step compute (``key``: a logged metric or a product ``a*b`` of
    them) indexed by step; the run of an arm is the one run its trials belong to (no
    ``trials``: the arm is a run of ``metrics``).

    Raises
    ------
    KeyError
        A metric the series does not hold, or an arm whose run has no metrics.
    ValueError
        An arm whose trials come from several runs, or a compute value that is not a
        positive finite number.
    """
    runs: dict[str, set[str]] = {arm: {arm} for arm in arms} if trials is None else {}
    if trials is not None:
        pairs = zip(trials[S.RUN].to_numpy().astype(str), trials[S.ARM].to_numpy().astype(str), strict=True)
        for run, arm in set(pairs):
            runs.setdefault(str(arm), set()).add(str(run))
    variables = [S.metric_variable(metrics, part.strip(), "compute metric") for part in key.split("*")]
    have = set(map(str, metrics[S.RUN].values)) if S.RUN in metrics.dims else set()
    out = {}
    for arm in arms:
        (run, *more) = sorted(runs[arm])
        if more:
            several = ", ".join(sorted(runs[arm]))
            raise ValueError(f"arm {arm}: trials of several runs ({several}); its compute is ambiguous")
        if run not in have:
            raise KeyError(
                f"arm {arm}: its run {run} has no per-step metrics (runs with metrics: {', '.join(sorted(have))})"
            )
        one = metrics.sel({S.RUN: run})
        values = np.prod([one[v].to_numpy().astype(float) for v in variables], axis=0)
        series = pd.Series(values, index=one[S.STEP].to_numpy().astype(int)).dropna().sort_index()
        bad = series[~(np.isfinite(series) & (series > 0))]
        if len(bad):
            raise ValueError(
                f"arm {arm} (run {run}): compute {key} must be a positive number at every step; step "
                f"{int(bad.index[0])} has {float(bad.iloc[0])!r}"
            )
        out[arm] = series
    return out


def with_compute(data: ArmSteps, per_step: dict[str, pd.Series], key: str) -> ArmSteps:
    """``data`` on a compute axis: x of (arm, step t) is the compute the arm's run spent
    through step t, the sum of its per-step compute from its first logged step to t.

    A step missing inside the logged range gets its neighbours' linear interpolation
    (counted in ``summary["compute"]["interpolated_steps"]``); an observed step before an
    arm's first logged step or after its last is an error (the compute spent is unknown).
    """
    entries, problems, info = [], [], {}
    for a, arm in enumerate(data.arms):
        series = per_step[arm]
        if series.empty:
            problems.append(f"arm {arm}: no per-step compute logged")
            entries.append((np.array([0.0]), np.array([0.0]), 0.0))
            continue
        grid = np.arange(int(series.index[0]), int(series.index[-1]) + 1)
        per = np.interp(grid, series.index.to_numpy(), series.to_numpy())
        observed = data.steps[data.n[a] > 0]
        outside = observed[(observed < grid[0]) | (observed > grid[-1])]
        if len(outside):
            problems.append(
                f"arm {arm}: trials at step {int(outside[0])} outside the logged compute (steps {grid[0]}-{grid[-1]})"
            )
        rate = float(per[-COMPUTE_RATE_STEPS:].mean())
        entries.append((grid.astype(float), np.cumsum(per), rate))
        info[arm] = {
            "logged_steps": [int(grid[0]), int(grid[-1])],
            "interpolated_steps": int(len(grid) - len(series)),
            "total": float(np.sum(per)),
            "rate_last_steps": rate,
        }
    if problems:
        raise ValueError(f"compute axis ({key}): " + "; ".join(problems))
    summary = {**data.summary, "x": "compute", "compute": {"key": key, "arms": info}}
    return replace(data, compute=tuple(entries), compute_key=key, summary=summary)


def sigmoid_values(data: ArmSteps, config: SigmoidConfig) -> tuple[str, dict[str, np.ndarray]]:
    """The likelihood a fit of ``data`` uses and the values of the model's data (the
    ``pm.Data`` of :func:`build_sigmoid_model`, the data block of
    :mod:`saturation.models.sigmoid_kernel`)."""
    p = config.priors
    likelihood = config.likelihood
    if likelihood == "auto":
        likelihood = "binomial" if data.binary else "gaussian"
    if likelihood == "binomial" and not data.binary:
        raise ValueError("likelihood 'binomial' needs rewards that are 0 or 1")
    if config.paired:
        if data.cells is None:
            raise ValueError("paired arms need the per-instance cells (arm_steps(..., paired=True))")
        likelihood = "binomial-paired"
    obs = data.n > 0
    ai, ti = np.nonzero(obs)
    first = np.array([data.mean[a][obs[a]][0] for a in range(len(data.arms))])
    values = {
        "arm_idx": ai,
        "x": data.x_cells[ai, ti],
        "n": data.n[obs].astype(np.int64),
        "successes": np.round(data.successes[obs]).astype(np.int64) if data.binary else data.successes[obs],
        "mean": data.mean[obs],
        "var_mean": data.var_mean[obs],
        "r0_mu": np.full(len(data.arms), p.r0_mu) if p.r0_mu is not None else curves.logit(np.clip(first, 0.02, 0.98)),
        "midpoint_mu": (
            np.full(len(data.arms), p.midpoint_mu)
            if p.midpoint_mu is not None
            else np.array([half_rise_log_x(data.x_cells[a][o], data.mean[a][o]) for a, o in enumerate(obs)])
        ),
    }
    if data.cells is not None and config.paired:
        cell_of = np.full(obs.shape, -1, dtype=np.int64)
        cell_of[ai, ti] = np.arange(len(ai))
        c = data.cells
        values.update(
            cell_as=cell_of[c.arm_idx, c.step_idx],
            cell_inst=c.inst_idx,
            cell_n=c.n,
            cell_k=c.k,
        )
    return likelihood, values


def build_sigmoid_model(data: ArmSteps, config: SigmoidConfig) -> tuple[pm.Model, str, dict[str, np.ndarray]]:
    """The PyMC model (one curve per arm); returns the model, the likelihood used and the
    values of its ``pm.Data`` (a compiled model is reused for data of the same shape).

    Notes
    -----
    Per arm :math:`a` and step :math:`t` with :math:`x_t = t - t_0 + 1` (or, on a compute
    axis, :math:`x_{at}` the compute arm :math:`a`'s run spent through step :math:`t`):
    :math:`\\mu_{at} = R_{0a} + (A_a - R_{0a}) / (1 + (C_a / x_t)^{B_a})`. Binomial:
    successes :math:`k_{at} \\sim \\mathrm{BetaBinomial}(n_{at}, \\mu\\kappa_a,
    (1-\\mu)\\kappa_a)`; Gaussian: :math:`\\bar y_{at} \\sim N(\\mu_{at},
    \\sqrt{v_{at} + \\tau_a^2})` with :math:`v` the mean's sampling variance.
    """
    p = config.priors
    likelihood, values = sigmoid_values(data, config)
    obs = data.n > 0
    ai, _ = np.nonzero(obs)
    with pm.Model(coords={S.ARM: data.arms}) as model:
        d = {name: pm.Data(name, v) for name, v in values.items()}
        r0_logit = pm.Normal("r0_logit", d["r0_mu"], p.r0_sd, dims=S.ARM)
        a_logit = pm.Normal("asymptote_logit", 0.0, p.asymptote_sd, dims=S.ARM)
        log_b = pm.Normal("log_efficiency", 0.0, p.efficiency_sd, dims=S.ARM)
        log_m = pm.Normal("log_midpoint", d["midpoint_mu"], p.midpoint_sd, dims=S.ARM)
        # the natural-scale parameters are recorded after sampling (_natural_draws): as
        # Deterministics they were numba code compiled for every model
        i = d["arm_idx"]
        mu = curves.sigmoid_saturation(
            d["x"],
            r0=pm.math.invlogit(r0_logit)[i],
            asymptote=pm.math.invlogit(a_logit)[i],
            efficiency=pt.exp(log_b)[i],
            midpoint=pt.exp(log_m)[i],
        )
        mu = pt.clip(mu, 1e-6, 1 - 1e-6)
        if likelihood == "binomial-paired":
            assert data.cells is not None
            # instance effects shared by the arms and the steps, an (arm, step) jitter, both
            # non-centred; the curve stays the population mean over both
            sigma = pm.HalfNormal("instance_sd", p.instance_sd)
            tau = pm.HalfNormal("step_logit_sd", p.step_logit_sd)
            z = pm.Normal("instance_z", 0.0, 1.0, shape=len(data.cells.instances))
            e = pm.Normal("step_z", 0.0, 1.0, shape=len(ai))
            loc = curves.logitnormal_location_newton(pt, mu, pt.sqrt(sigma**2 + tau**2))
            eta = (loc + tau * e)[d["cell_as"]] + sigma * z[d["cell_inst"]]
            # the binomial log-likelihood without its constant log C(n, k): k eta - n log(1 + e^eta)
            pm.Potential("likelihood", (d["cell_k"] * eta - d["cell_n"] * pt.softplus(eta)).sum())
        elif likelihood == "binomial":
            kappa = pt.exp(pm.Normal("log_kappa", p.log_kappa_mu, p.log_kappa_sd, dims=S.ARM))[i]
            dist = pm.BetaBinomial.dist(n=d["n"], alpha=mu * kappa, beta=(1 - mu) * kappa)
            pm.Potential("likelihood", pm.logp(dist, d["successes"]).sum())
        else:
            tau = pm.HalfNormal("tau", p.step_sd, dims=S.ARM)
            dist = pm.Normal.dist(mu, pt.sqrt(d["var_mean"] + tau[i] ** 2))
            pm.Potential("likelihood", pm.logp(dist, d["mean"]).sum())
    return model, likelihood, values


def prior_draw(data: ArmSteps, config: SigmoidConfig, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One draw of every arm's curve and of the data from the fit's own PyMC graph: the
    priors as :func:`build_sigmoid_model` reads them from ``config.priors`` and the likelihood
    it evaluates (what simulation-based calibration draws from: a prior changed in the model
    is changed in its calibration).

    Parameters
    ----------
    data : ArmSteps
        The design: the arms, their steps and each step's rollouts ``n`` (the values are not
        read unless a prior is centred on the data).
    config : SigmoidConfig
        The fit's settings (the unpaired binomial or the Gaussian likelihood).
    seed : int
        Seeds the draw.

    Returns
    -------
    tuple of (dict, numpy.ndarray)
        Per curve parameter (natural scale) and the likelihood's nuisance (``log_kappa`` or
        ``tau``) an array over the arms; and the simulated successes (binomial) or per-step
        means (Gaussian), arms x steps.
    """
    model, used, _ = build_sigmoid_model(data, config)
    if used not in ("binomial", "gaussian"):
        raise ValueError(f"a prior draw of the {used} likelihood is not built")
    nuisance = "log_kappa" if used == "binomial" else "tau"
    names = ["r0_logit", "asymptote_logit", "log_efficiency", "log_midpoint", nuisance]
    rng = np.random.default_rng(seed)
    raw = dict(zip(names, pm.draw([model[n] for n in names], random_seed=rng), strict=True))
    theta = {
        "r0": curves.expit(np.asarray(raw["r0_logit"])),
        "asymptote": curves.expit(np.asarray(raw["asymptote_logit"])),
        "efficiency": np.exp(np.asarray(raw["log_efficiency"])),
        "midpoint": np.exp(np.asarray(raw["log_midpoint"])),
        nuisance: np.asarray(raw[nuisance]),
    }
    x = np.asarray(data.x_cells, dtype=float)
    mu = curves.sigmoid_saturation(
        x,
        r0=theta["r0"][:, None],
        asymptote=theta["asymptote"][:, None],
        efficiency=theta["efficiency"][:, None],
        midpoint=theta["midpoint"][:, None],
    )
    if used == "binomial":  # the likelihood's own distribution, as the model evaluates it
        mu = np.clip(mu, 1e-6, 1 - 1e-6)
        kappa = np.exp(theta["log_kappa"])[:, None]
        dist = pm.BetaBinomial.dist(n=data.n.astype(np.int64), alpha=mu * kappa, beta=(1 - mu) * kappa)
    else:
        dist = pm.Normal.dist(mu, np.sqrt(data.var_mean + theta["tau"][:, None] ** 2))
    return theta, np.asarray(pm.draw(dist, random_seed=rng), dtype=float)


def _natural_draws(idata: az.InferenceData) -> None:
    """Add the curve parameters on their natural scale (:data:`PARAMS`) to the posterior."""
    post = idata.posterior
    post["r0"] = 1 / (1 + np.exp(-post["r0_logit"]))
    post["asymptote"] = 1 / (1 + np.exp(-post["asymptote_logit"]))
    post["efficiency"] = np.exp(post["log_efficiency"])
    post["midpoint"] = np.exp(post["log_midpoint"])


@dataclass
class SigmoidFit(FitObject):
    """A saturation-curve fit (:func:`fit_sigmoid`): each arm's curve, its ceiling, the
    contrasts with the reference arm and the forecasts.

    Parameters
    ----------
    idata : arviz.InferenceData
        The draws (the curve parameters on their natural scale included).
    config : SigmoidConfig
        The analysis' settings.
    data : ArmSteps
        The arms' per-step data the curves were fitted to.
    estimands : dict
        ``arms``, ``contrasts``, ``forecast``, ``reference`` and ``likelihood``.
    diagnostics : dict
        Convergence diagnostics.
    timings : dict
        Compile and sampling seconds.
    seed : int
        The seed the fit drew with (:meth:`backtest` and :meth:`families` draw with it too).
    """

    idata: az.InferenceData
    config: SigmoidConfig
    data: ArmSteps
    estimands: dict[str, Any]
    diagnostics: dict[str, Any]
    timings: dict[str, Any]
    #: the seed the fit drew with (:meth:`backtest` draws with it too)
    seed: int = 0

    def __repr__(self) -> str:
        est, d = self.estimands, self.data
        head = (
            f"SigmoidFit({len(d.arms)} arm(s) x {len(d.steps)} steps, reference {est.get('reference')}; "
            f"{convergence_words(self.diagnostics)})"
        )
        lines = [
            f"{arm}: asymptote {format_interval(a.get('asymptote'))}"
            + (
                f"; P(higher than {est['reference']}) = {est['contrasts'][arm]['p_asymptote_higher']:.2f}"
                if arm in est.get("contrasts", {})
                else ""
            )
            for arm, a in est.get("arms", {}).items()
        ]
        return short_repr(head, lines)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of ``saturation compare``: ``{"arms", "contrasts",
        "diagnostics", "reference", "likelihood", "data"}``."""
        return {**self.estimands, "diagnostics": self.diagnostics, "data": self.data.summary}

    def summary(self) -> pd.DataFrame:
        """Tidy table: one row per (part, arm, estimand): the arms' curve parameters,
        ceilings and headroom, their contrasts with the reference and the forecasts, each
        with mean, sd and 94 % HDI, probabilities in ``mean``. ``attrs['converged']`` is set."""
        parts: dict[str, Any] = {k: self.estimands[k] for k in ("arms", "contrasts", "forecast") if k in self.estimands}
        frame = pd.DataFrame(interval_rows(parts, ("part", "arm")))
        frame.attrs["converged"] = bool(self.diagnostics.get("converged", False))
        return frame

    def frame(self, horizon: int | None = None) -> pd.DataFrame:
        """Per (arm, step): the observed mean, the fitted curve's posterior mean and 94 % band
        to ``horizon`` steps past the data, the forecast flag and the ceiling
        (:func:`saturation_frame`: the data behind the figure)."""
        return saturation_frame(self, horizon=horizon)

    def table(self) -> pd.DataFrame:
        """One row per arm: the curve's asymptote, efficiency and midpoint, its value at the
        last step, the headroom to the ceiling, the forecast gain and P(gain > delta), and the
        arm's declared properties."""
        est, unit = self.estimands, axis_words(self.data)[1]
        rows = []
        for arm, e in est["arms"].items():
            f = est["forecast"][arm]
            rows.append(
                {
                    "arm": arm,
                    "asymptote": interval_cell(e["asymptote"]),
                    "efficiency": interval_cell(e["efficiency"]),
                    f"midpoint ({unit})": interval_cell(e["midpoint"]),
                    "at its last step": interval_cell(e["last"]),
                    "last step": e["last"]["step"],
                    "headroom to ceiling": interval_cell(e["headroom_to_ceiling"]),
                    f"gain over the next {f['horizon']} steps": interval_cell(f["gain"]),
                    f"P(gain > {f['delta']:g})": f["p_gain"],
                    **dict(self.config.arm_attrs.get(arm, {})),
                }
            )
        return pd.DataFrame(rows)

    def contrasts_table(self) -> pd.DataFrame:
        """One row per arm against the reference: the asymptote and efficiency differences,
        P(higher ceiling), the midpoint ratio, P(halfway sooner), the last common step's gap
        and whether a declared confounder differs."""
        rows = []
        for arm, c in self.estimands["contrasts"].items():
            rows.append(
                {
                    "arm": arm,
                    "asymptote difference": interval_cell(c["asymptote_diff"]),
                    "P(asymptote higher)": c["p_asymptote_higher"],
                    "efficiency difference": interval_cell(c["efficiency_diff"]),
                    "midpoint ratio": interval_cell(c["midpoint_ratio"]),
                    "P(halfway sooner)": c["p_midpoint_lower"],
                    f"gap at step {c['last_diff']['step']}": interval_cell(c["last_diff"]),
                    "confounded": "not checked" if c["confounded"] is None else ("yes" if c["confounded"] else "no"),
                }
            )
        return pd.DataFrame(rows)

    def tables(self) -> dict[str, TableView]:
        """``arms`` (:meth:`table`) and ``contrasts`` (:meth:`contrasts_table`)."""
        ref = self.estimands["reference"]
        return {
            "arms": TableView(self.table(), "Saturation curve per arm (Khatri et al. 2025 sigmoid)"),
            "contrasts": TableView(self.contrasts_table(), f"Contrasts with the reference arm {ref}"),
        }

    def figures(self) -> dict[str, FigureView]:
        """``saturation``: the curves, their forecasts and ceilings."""
        from saturation import plots

        summ, axis = self.data.summary, axis_words(self.data)[0]
        data = f"{summ['series']} as logged per step" if summ.get("series") else f"{summ['n_trials']} trials"
        metric = self.config.metric or "all-rollout reward"
        return {
            "saturation": FigureView(
                lambda: plots.plot_saturation_curves(self),
                f"Saturation curve per arm (x = {axis}): per-step {metric} (points), the fitted sigmoid's posterior "
                f"mean and {S.HDI_LABEL} band over the data (solid) and over the next {self.config.horizon} steps "
                f"(dashed: an extrapolation), each arm's posterior mean ceiling (dotted); right panel: each ceiling "
                f"(the asymptote) with its {S.HDI_LABEL}. Data: {data}, {self.estimands['likelihood']} likelihood.",
            )
        }

    def details(self) -> list[str]:
        """:meth:`verdicts`' sentences (each arm against the reference, then the forecasts)
        and whether the contrasts were checked for declared confounders."""
        match = self.config.match
        if not match:
            checked = "No confounder declared: the contrasts are not checked for context length or other differences."
        else:
            flagged = [arm for arm, c in self.estimands["contrasts"].items() if c["confounded"]]
            declared = ", ".join(k if v is None else f"{k}={v}" for k, v in match.items())
            checked = f"Confounders declared: {declared}; " + (
                f"CONFOUNDED contrasts: {', '.join(flagged)}." if flagged else "every contrast is matched."
            )
        return [*self.verdicts().values(), checked]

    def headline(self) -> str:
        """Each arm's ceiling against the reference's in a clause (its P(higher), a declared
        confounder not matched), e.g. "t2ns has no decisively different ceiling from t2 (P(higher)
        = 0.32)"."""
        est, ref = self.estimands, self.estimands["reference"]
        clauses = []
        for arm, c in est["contrasts"].items():
            p = c["p_asymptote_higher"]
            if p >= P_DECIDE or p <= 1 - P_DECIDE:
                word = f"{'a higher' if p >= P_DECIDE else 'a lower'} ceiling than"
            else:
                word = "no decisively different ceiling from"
            flag = ", CONFOUNDED" if c["confounded"] else ""
            clauses.append(f"{arm} has {word} {ref} (P(higher) = {p:.2f}{flag})")
        return "; ".join(clauses) + "."

    def heading(self) -> list[str]:
        """The curve, the x axis, the arms, the data and the likelihood in a line."""
        summ = self.data.summary
        if summ.get("series"):
            data = f"{summ['series']} logged at {sum(summ['steps_per_arm'].values())} (arm, step) points"
        else:
            data = f"{summ['n_trials']} trials"
        return [
            f"saturation curves (Khatri et al. 2025 sigmoid, x = {axis_words(self.data)[0]}): arms "
            f"{', '.join(self.data.arms)}, reference {self.estimands['reference']}, {data}, "
            f"{self.estimands['likelihood']} likelihood, {int(S.HDI_PROB * 100)}% HDI",
        ]

    def parts(self) -> list[FitObject]:
        """The back-test (``config.backtest``) and the curve-family comparison
        (``config.families``), fitted on the first call."""
        if "_parts" not in self.__dict__:
            parts: list[FitObject] = [self.backtest(self.config.backtest)] if self.config.backtest else []
            if self.config.families:
                parts.append(self.families())
            self.__dict__["_parts"] = parts
        return list(self.__dict__["_parts"])

    def gaussian(self) -> SigmoidFit:
        """This fit when its likelihood is Gaussian, else the same analysis refitted with the
        Gaussian likelihood on the per-step means (unpaired; the curve families' common
        likelihood)."""
        if self.estimands["likelihood"] == "gaussian":
            return self
        config = replace(self.config, likelihood="gaussian", paired=False, backtest=None, families=False)
        return fit_sigmoid(self.data, config, seed=self.seed)

    def families(self, sampler: SamplerConfig | None = None) -> FamilyComparison:
        """Does a ceiling hang on the sigmoid? The sigmoid against the hinge and the
        exponential approach per arm by LOO, on the Gaussian likelihood
        (:func:`saturation.models.families.compare_curve_families` of :meth:`gaussian`).

        Parameters
        ----------
        sampler : SamplerConfig, optional
            Sampler of the hinge and the exponential (default: their exact draws).

        Returns
        -------
        FamilyComparison
            Per arm the LOO table with stacking weights and both asymptotes.
        """
        return compare_curve_families(self.gaussian(), seed=self.seed, sampler=sampler)

    def pointwise(self, a: int) -> az.InferenceData:
        """Arm ``a``'s posterior of this Gaussian fit with its pointwise log likelihood
        (chain, draw, level, step) on the arm's observed per-step means (for LOO).

        Parameters
        ----------
        a : int
            The arm's index in ``data.arms``.

        Returns
        -------
        arviz.InferenceData
            The arm's posterior and ``log_likelihood["y"]``.
        """
        if self.estimands["likelihood"] != "gaussian":
            raise ValueError("the pointwise log likelihood is that of the Gaussian sigmoid fit")
        data = self.data
        obs = data.n[a] > 0
        post = held_idata(self).posterior
        chains, draws = post.sizes["chain"], post.sizes["draw"]
        mu = curve_draws(held_idata(self), data.x_of(a, data.steps[obs]))[:, a, :]  # (samples, steps): chains first
        tau = post["tau"].isel({S.ARM: a}).to_numpy().reshape(-1, 1)
        ll = curves.normal_logpdf(np, data.mean[a, obs][None], mu, data.var_mean[a, obs][None] + tau**2)
        log_lik = xr.Dataset(
            {"y": (("chain", "draw", S.LEVEL, S.STEP), ll.reshape(chains, draws, 1, -1))},
            coords={S.LEVEL: [data.arms[a]], S.STEP: data.steps[obs]},
        )
        return az.InferenceData(posterior=post.isel({S.ARM: a}), log_likelihood=log_lik)

    def results(self) -> dict[str, Any]:
        """``{"compare": to_dict()}``."""
        return {"compare": json_safe(self.to_dict())}

    def inference_data(self) -> dict[str, Any]:
        """``sigmoid_fit``: this fit's InferenceData."""
        return {"sigmoid_fit": self.idata}

    def backtest(self, fit_steps: int) -> Backtest:
        """The checked forecast: this analysis refitted on each arm's first ``fit_steps``
        steps, its later steps predicted (:func:`backtest_sigmoid`)."""
        return backtest_sigmoid(self.data, fit_steps, self.config, seed=self.seed)

    def verdicts(self) -> dict[str, str]:
        """One sentence per arm against the reference (the rule: P(A higher) >= 0.95 or <= 0.05)
        and one per arm on whether more steps would pay (``forecast:ARM``; the rule:
        P(gain > delta) >= 0.95 "will", <= 0.05 "will not", else "may")."""
        est, ref = self.estimands, self.estimands["reference"]
        out = {}
        for arm, c in est["contrasts"].items():
            p = c["p_asymptote_higher"]
            word = (
                "a higher ceiling than"
                if p >= P_DECIDE
                else "a lower ceiling than"
                if p <= 1 - P_DECIDE
                else "no decisively different ceiling from"
            )
            a, r = est["arms"][arm]["asymptote"], est["arms"][ref]["asymptote"]
            note = confounding_note(c["confounders"], arm, ref)
            out[arm] = (
                f"{arm} has {word} {ref}: asymptote {_fmt(a)} vs {_fmt(r)}, difference {_fmt(c['asymptote_diff'])} "
                f"(P(higher) = {p:.2f}); efficiency difference {_fmt(c['efficiency_diff'])}; midpoint ratio "
                f"{_fmt(c['midpoint_ratio'])} (P(halfway sooner) = {c['p_midpoint_lower']:.2f}); gap at the last "
                f"common step {_fmt(c['last_diff'])}." + (f" {note}." if note else "")
            )
        out.update({f"forecast:{arm}": forecast_sentence(arm, f) for arm, f in est["forecast"].items()})
        return out


SigmoidFit.idata = InferenceDataField()  # type: ignore[assignment]


def _fmt(e: dict[str, Any]) -> str:
    return format_interval(e, 3)


def forecast_sentence(arm: str, f: dict[str, Any]) -> str:
    """The "will more steps pay?" sentence of one arm's :func:`forecast` entry."""
    p = f["p_gain"]
    word = "will" if p >= P_DECIDE else "will not" if p <= 1 - P_DECIDE else "may or may not"
    return (
        f"{arm}: {f['horizon']} more steps (to step {f['to_step']}) {word} gain more than {f['delta']:g}: "
        f"expected gain {_fmt(f['gain'])}, P(gain > {f['delta']:g}) = {p:.2f}."
    )


def default_sampler(paired: bool = False) -> SamplerConfig:
    """The sampler settings a fit uses unless told otherwise (shared by the CLI and the
    report): :data:`PAIRED_SAMPLER` for paired arms, else :data:`DEFAULT_SAMPLER`."""
    return PAIRED_SAMPLER if paired else DEFAULT_SAMPLER


def fit_sigmoid(
    ds: xr.Dataset | ArmSteps,
    config: SigmoidConfig | None = None,
    *,
    arms: list[str] | None = None,
    reference: str | None = None,
    likelihood: str = "auto",
    priors: SigmoidPriors | None = None,
    sampler: SamplerConfig | None = None,
    seed: int = 0,
    metrics: xr.Dataset | None = None,
    instance_effects: bool = False,
) -> SigmoidFit:
    """Fit one saturation curve per arm and compare every arm's ceiling with the reference.

    Parameters
    ----------
    ds : xarray.Dataset or ArmSteps
        Trials with an ``arm`` coordinate (or their per-step statistics, :func:`arm_steps`).
    config : SigmoidConfig, optional
        The settings at once; when given, ``arms`` to ``sampler`` are not used.
    arms : list of str, optional
        Arms to fit (default: all).
    reference : str, optional
        The arm the others are compared with (default: the first arm).
    likelihood : {"auto", "binomial", "gaussian"}
        See :class:`SigmoidConfig`.
    priors : SigmoidPriors, optional
        Curve priors.
    sampler : SamplerConfig, optional
        NUTS settings (default :data:`DEFAULT_SAMPLER`: nutpie, 4 x 2000 draws after 500
        tuning, target_accept 0.95).
    seed : int
        Same seed and data, same numbers.
    metrics : xarray.Dataset, optional
        Per-step metrics of the arms' runs (dims run, step): the x axis of
        ``config.x == "compute"`` (:func:`step_compute`, ``config.compute``).
    instance_effects : bool
        Paired arms: keep the instance effects' draws ``instance_z`` (samples x instances) in
        the posterior, which the back-test's predictive needs (default: dropped as nuisance).

    Returns
    -------
    SigmoidFit
        ``estimands["arms"][arm]``: ``asymptote``, ``efficiency``, ``midpoint`` (in steps
        counted from 1, or in compute units), ``r0``, ``last`` (the curve at the arm's last step),
        ``headroom_to_ceiling`` (asymptote minus last) and ``ceiling_gap`` (1 - asymptote);
        ``estimands["contrasts"][arm]`` against the reference: ``asymptote_diff``,
        ``efficiency_diff``, ``midpoint_ratio`` (the arm's C_mid over the reference's: below 1, it gets
        halfway sooner in steps or compute) with ``p_midpoint_lower``, ``last_diff`` (at the last step
        both arms observed),
        ``p_asymptote_higher``, ``confounded`` (None: no confounder declared; True: a
        declared confounder is not matched, :func:`confounding`) and ``confounders`` (per
        declared confounder both arms' values); ``estimands["forecast"][arm]`` (:func:`forecast`). Each estimand
        ``{"mean", "median", "sd", "hdi"}`` (94 % HDI).

    Notes
    -----
    The curve and likelihood are in :func:`build_sigmoid_model`. A run that has not bent
    yet leaves the asymptote and the midpoint weakly identified (they trade off); their
    posteriors are then wide, which is the honest answer to "where would it saturate?".
    """
    given = {"arms": arms, "reference": reference, "likelihood": likelihood, "priors": priors, "sampler": sampler}
    config_or_keywords(fit_sigmoid, config, given)
    if config is None:
        config = SigmoidConfig(
            arms=tuple(arms) if arms else None,
            reference=reference,
            likelihood=likelihood,
            priors=priors or SigmoidPriors(),
            sampler=sampler or DEFAULT_SAMPLER,
        )
    config.validate()
    data = compare_data(ds, config, metrics)
    ref = config.reference or data.arms[0]
    if ref not in data.arms:
        raise KeyError(f"reference arm {ref} not among the arms {', '.join(data.arms)}")
    idata, timings, used = _sample(data, config, seed)
    _natural_draws(idata)
    names = ["r0_logit", "asymptote_logit", "log_efficiency", "log_midpoint"]
    if used == "binomial-paired":
        # the instance and step effects are nuisance: their draws are (draws x instances)
        idata.posterior = idata.posterior.drop_vars(["step_z"] if instance_effects else ["instance_z", "step_z"])
        names += ["instance_sd", "step_logit_sd"]
    else:
        names += ["log_kappa"] if used == "binomial" else ["tau"]
    diag = diagnostics(idata, names)
    estimands = _estimands(idata, data, ref, used, config)
    estimands["forecast"] = forecast(idata, data, horizon=config.horizon, delta=config.delta)
    stamp_attrs(idata, "sigmoid", config, data.summary, diag, timings)
    warn_if_not_converged(diag, f"saturation-curve fit (arms {', '.join(data.arms)})")
    return SigmoidFit(idata, config, data, estimands, diag, timings, seed)


def cached_kernel(config: SigmoidConfig) -> str | None:
    """The cached numba kernel module a fit with ``config`` samples on: unpaired arms with
    nutpie (``sampler`` "auto" or "nutpie", nutpie installed); None: the PyMC graph (paired
    arms, other samplers). The report compiles it ahead (``report.kernels_of``)."""
    if config.paired or config.sampler.sampler not in ("auto", "nutpie") or "nutpie" not in available_samplers():
        return None
    return "saturation.models.sigmoid_kernel"


def _sample(data: ArmSteps, config: SigmoidConfig, seed: int) -> tuple[Any, dict[str, Any], str]:
    """The fit's draws, timings and likelihood. With nutpie, the unpaired likelihoods are
    sampled on the cached numba kernel (:mod:`saturation.models.sigmoid_kernel`: no compile);
    the paired one, and other samplers, on the PyMC graph."""
    used, values = sigmoid_values(data, config)
    if cached_kernel(config) is not None:  # unpaired: not "binomial-paired"
        direct = sigmoid_kernel.compiled_model(values, used, config.priors, data.arms, S.ARM)
        if direct is not None:
            held, timings = sample_compiled(direct, seed=seed, config=config.sampler, coords={S.ARM: data.arms})
            return held, timings, used
    model, used, values = build_sigmoid_model(data, config)
    # the data are pm.Data: fits of the same shape (arms, observed cells) reuse one compiled model
    key: tuple[Any, ...] = ("sigmoid", used, len(data.arms), len(values["x"]))
    if used == "binomial-paired":
        assert data.cells is not None
        key += (len(values["cell_n"]), len(data.cells.instances))
    idata, timings = sample_model(model, cache_key=key, data=values, seed=seed, config=config.sampler)
    return idata, timings, used


def axis_words(data: ArmSteps) -> tuple[str, str]:
    """The x axis in words and the midpoint's unit: ("step from 1", "steps") or
    ("cumulative <key> (compute)", "<key>")."""
    if data.compute is None:
        return "step from 1", "steps"
    return f"cumulative {data.compute_key} (compute)", f"cumulative {data.compute_key}"


def compare_data(ds: xr.Dataset | ArmSteps, config: SigmoidConfig, metrics: xr.Dataset | None = None) -> ArmSteps:
    """The fit's per (arm, step) data on the configured axis, checked against the config
    before anything is sampled: trials (:func:`arm_steps`), a logged metric of a series
    (``config.metric``, :func:`series_arm_steps`) or data already selected.

    Raises
    ------
    KeyError
        An unknown arm.
    saturation.limits.OptionError
        A declared arm property of an arm the data lack, or a back-test the data cannot hold.
    ValueError
        Too few steps per arm, or an x axis the data do not have.
    """
    if isinstance(ds, ArmSteps):
        data = ds
    elif config.metric is not None:
        arms = list(config.arms) if config.arms else None
        data = series_arm_steps(ds, config.metric, arms, compute=config.compute if config.x == "compute" else None)
    else:
        arms = list(config.arms) if config.arms else None
        metrics = metrics if config.x == "compute" else None
        data = arm_steps(ds, arms, metrics=metrics, compute=config.compute, paired=config.paired)
    seen = (np.asarray(data.n) > 0).sum(axis=1)
    short = [f"{arm} ({int(k)})" for arm, k in zip(data.arms, seen, strict=True) if k < MIN_FIT_STEPS]
    if short:
        raise ValueError(
            f"a saturation curve (four parameters) needs at least {MIN_FIT_STEPS} steps with data per arm; "
            f"arm(s) {', '.join(short)} have fewer"
        )
    if config.x != data.axis:
        need = "per-step metrics of the arms' runs (--metrics)" if config.x == "compute" else "a step axis"
        raise ValueError(f"x = {config.x!r} needs {need}; the data are on a {data.axis} axis")
    unknown = sorted(set(config.arm_attrs) - set(data.arms))
    if unknown:
        raise OptionError(f"arm properties: unknown arm(s) {', '.join(unknown)}; the data has {', '.join(data.arms)}")
    if config.backtest is not None:
        try:
            check_backtest(data, config.backtest)
        except ValueError as err:
            raise OptionError(f"backtest {config.backtest}: {err}") from None
    return data


def curve_draws(idata: az.InferenceData, x: np.ndarray) -> np.ndarray:
    """The fitted curve at ``x`` for every draw: (samples, arm, points); ``x`` is shared by
    the arms (points,) or per arm (arms, points)."""
    post = idata.posterior.stack(sample=("chain", "draw")).transpose("sample", ...)
    p = {v: post[v].to_numpy()[:, :, None] for v in PARAMS}
    x = np.asarray(x, dtype=float)
    return curves.sigmoid_saturation(
        x[None, None, :] if x.ndim == 1 else x[None],
        r0=p["r0"],
        asymptote=p["asymptote"],
        efficiency=p["efficiency"],
        midpoint=p["midpoint"],
    )


def confounding(
    arm: str, reference: str, arm_attrs: dict[str, dict[str, str]], match: dict[str, str | None]
) -> tuple[bool | None, dict[str, Any]]:
    """Is the contrast ``arm`` - ``reference`` confounded by a declared property?

    Parameters
    ----------
    arm, reference : str
        The two arms.
    arm_attrs : dict
        Declared properties, {arm: {key: value}}.
    match : dict
        The confounders, {key: value or None} (:attr:`SigmoidConfig.match`).

    Returns
    -------
    (bool or None, dict)
        None when no confounder is declared; else True when any confounder is not matched
        (the arms differ, are not at the required value, or a value is not declared), and
        per confounder ``{"arm", "reference", "required", "matched"}``.
    """
    if not match:
        return None, {}
    details = {}
    for key, required in match.items():
        a, r = arm_attrs.get(arm, {}).get(key), arm_attrs.get(reference, {}).get(key)
        if a is None or r is None:
            matched = False
        elif required is None:
            matched = a == r
        else:
            matched = a == required and r == required
        details[key] = {"arm": a, "reference": r, "required": required, "matched": matched}
    return not all(d["matched"] for d in details.values()), details


def confounding_note(details: dict[str, Any], arm: str, reference: str) -> str:
    """The words for :func:`confounding`'s details: "" when every confounder is matched."""
    bad = [
        f"{key} {d['arm'] or 'not declared'} ({arm}) vs {d['reference'] or 'not declared'} ({reference})"
        + (f", required {d['required']}" if d["required"] is not None else "")
        for key, d in details.items()
        if not d["matched"]
    ]
    return f"CONFOUNDED by {'; '.join(bad)}: not a like-for-like comparison" if bad else ""


def _estimands(
    idata: az.InferenceData, data: ArmSteps, ref: str, likelihood: str, config: SigmoidConfig
) -> dict[str, Any]:
    post = idata.posterior.stack(sample=("chain", "draw")).transpose("sample", ...)
    draws = {v: post[v].to_numpy() for v in PARAMS}  # (samples, arm)
    curve = curve_draws(idata, data.x_cells)  # (samples, arm, step)
    last_idx = _last_index(data)
    arms: dict[str, Any] = {}
    for a, arm in enumerate(data.arms):
        last = curve[:, a, last_idx[a]]
        arms[arm] = {
            "asymptote": interval(draws["asymptote"][:, a]),
            "efficiency": interval(draws["efficiency"][:, a]),
            "midpoint": interval(draws["midpoint"][:, a]),
            "r0": interval(draws["r0"][:, a]),
            "last": {**interval(last), "step": int(data.steps[last_idx[a]])},
            "headroom_to_ceiling": interval(draws["asymptote"][:, a] - last),
            "ceiling_gap": interval(1 - draws["asymptote"][:, a]),
        }
    r = data.arms.index(ref)
    contrasts: dict[str, Any] = {}
    for a, arm in enumerate(data.arms):
        if a == r:
            continue
        common = np.nonzero((data.n[a] > 0) & (data.n[r] > 0))[0]
        j = int(common[-1]) if len(common) else min(last_idx[a], last_idx[r])
        diff = draws["asymptote"][:, a] - draws["asymptote"][:, r]
        contrasts[arm] = {
            "asymptote_diff": interval(diff),
            "efficiency_diff": interval(draws["efficiency"][:, a] - draws["efficiency"][:, r]),
            # "which only gets there faster?": the x (steps or compute) to half the rise, as a ratio
            "midpoint_ratio": interval(draws["midpoint"][:, a] / draws["midpoint"][:, r], center="median"),
            "p_midpoint_lower": float(np.mean(draws["midpoint"][:, a] < draws["midpoint"][:, r])),
            "last_diff": {**interval(curve[:, a, j] - curve[:, r, j]), "step": int(data.steps[j])},
            "p_asymptote_higher": float(np.mean(diff > 0)),
        }
        contrasts[arm]["confounded"], contrasts[arm]["confounders"] = confounding(
            arm, ref, config.arm_attrs, config.match
        )
    return {
        "reference": ref,
        "likelihood": likelihood,
        "hdi_prob": S.HDI_PROB,
        "x": {"axis": data.axis, "compute": data.compute_key},
        "arms": arms,
        "contrasts": contrasts,
    }


def _last_index(data: ArmSteps) -> list[int]:
    """Per arm, the index of its last observed step."""
    return [int(np.nonzero(data.n[a] > 0)[0][-1]) for a in range(len(data.arms))]


def forecast(
    idata: az.InferenceData, data: ArmSteps, *, horizon: int = FORECAST_HORIZON, delta: float = FORECAST_DELTA
) -> dict[str, dict[str, Any]]:
    """ "Will more steps pay?": per arm, the gain of the fitted curve from its last observed
    step to ``horizon`` steps later, and P(gain > ``delta``).

    Parameters
    ----------
    idata : arviz.InferenceData
        A :func:`fit_sigmoid` posterior.
    data : ArmSteps
        The data it was fitted to.
    horizon : int
        Steps past each arm's last step.
    delta : float
        The gain that would make the extra steps worth it.

    Returns
    -------
    dict
        Per arm: ``from_step``, ``to_step``, ``horizon``, ``delta``, ``gain`` (``{"mean",
        "sd", "hdi"}``) and ``p_gain``.

    Notes
    -----
    The gain is that of the expected reward :math:`R(x_{last} + N) - R(x_{last})` (the
    curve, not a noisy step), so it answers whether the *population* reward keeps rising,
    extrapolated by the fitted curve family: beyond the data that is an assumption,
    checked only by a back-test (:func:`backtest_sigmoid`).
    """
    out = {}
    for a, (arm, j) in enumerate(zip(data.arms, _last_index(data), strict=True)):
        x_now_later = data.x_of(a, [data.steps[j], data.steps[j] + horizon])
        now, later = curve_draws(idata, x_now_later)[:, a, :].T
        gain = later - now
        out[arm] = {
            "from_step": int(data.steps[j]),
            "to_step": int(data.steps[j] + horizon),
            "horizon": int(horizon),
            "delta": float(delta),
            "gain": interval(gain),
            "p_gain": float(np.mean(gain > delta)),
        }
    return out


@dataclass
class Backtest(FitObject):
    """A checked forecast (:func:`backtest_sigmoid`): the fit on each arm's first
    ``fit_steps`` steps, its predictions for the rest, and how they did.

    Parameters
    ----------
    fit_steps : int
        Steps per arm the curve was fitted to.
    fit : SigmoidFit
        That fit.
    frame : pandas.DataFrame
        One row per (arm, held-out step): ``observed``, predictive ``mean``, ``lower`` and
        ``upper`` (94 % HDI of the predicted step value, the step's own sampling noise
        included), ``inside``, ``persistence`` (the last fitted step's value carried forward).
    arms : dict
        Per arm: ``held_out``, ``coverage`` (share of held-out steps inside their interval),
        ``mae`` (mean absolute error of the predictive mean) and ``mae_persistence``.
    """

    fit_steps: int
    fit: SigmoidFit
    frame: pd.DataFrame
    arms: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """``{"fit_steps", "hdi_prob", "arms", "diagnostics"}`` (the ``backtest`` entry of
        ``saturation compare --json``)."""
        return {
            "fit_steps": self.fit_steps,
            "hdi_prob": S.HDI_PROB,
            "arms": self.arms,
            "diagnostics": self.fit.diagnostics,
        }

    @property
    def diagnostics(self) -> dict[str, Any]:
        """The back-test fit's diagnostics."""
        return self.fit.diagnostics

    def summary(self) -> pd.DataFrame:
        """One row per (arm, held-out step): :attr:`frame`."""
        return self.frame

    def tables(self) -> dict[str, TableView]:
        """``backtest``: :attr:`frame`."""
        caption = f"Back-test: fitted on each arm's first {self.fit_steps} steps, its later steps predicted"
        return {"backtest": TableView(self.frame, caption)}

    def details(self) -> list[str]:
        """:meth:`sentences`, each a sentence."""
        return [f"Back-test: {line}." for line in self.sentences()]

    def results(self) -> dict[str, Any]:
        """``{"backtest": to_dict()}``."""
        return {"backtest": json_safe(self.to_dict())}

    def sentences(self) -> list[str]:
        """One line per arm: coverage and error against carrying the last value forward."""
        return [
            f"{arm}: fitted on its first {self.fit_steps} steps, the {int(S.HDI_PROB * 100)} % predictive "
            f"intervals covered {round(a['coverage'] * a['held_out'])} of {a['held_out']} later steps "
            f"({a['coverage']:.2f}); mean absolute error {a['mae']:.3f} (carrying the last fitted step forward: "
            f"{a['mae_persistence']:.3f})"
            for arm, a in self.arms.items()
        ]


def check_backtest(data: ArmSteps, fit_steps: int) -> None:
    """Raise ValueError unless a back-test on ``fit_steps`` steps per arm is possible: at
    least :data:`MIN_FIT_STEPS`, and every arm has a later step to predict."""
    if fit_steps < MIN_FIT_STEPS:
        raise ValueError(f"a back-test fits at least {MIN_FIT_STEPS} steps per arm, got {fit_steps}")
    observed = (data.n > 0).sum(axis=1)
    short = [f"{arm} ({k})" for arm, k in zip(data.arms, observed, strict=True) if k <= fit_steps]
    if short:
        raise ValueError(
            f"a back-test on {fit_steps} steps needs a later step in every arm; arms with {fit_steps} or fewer "
            f"observed steps: {', '.join(short)}"
        )


def truncate(data: ArmSteps, fit_steps: int) -> ArmSteps:
    """``data`` with each arm's observed steps after its first ``fit_steps`` removed."""
    keep = np.zeros_like(data.n, dtype=bool)
    for a in range(len(data.arms)):
        keep[a, np.nonzero(data.n[a] > 0)[0][:fit_steps]] = True
    return replace(
        data,
        n=np.where(keep, data.n, 0.0),
        successes=np.where(keep, data.successes, 0.0),
        mean=np.where(keep, data.mean, np.nan),
        var_mean=np.where(keep, data.var_mean, 0.0),
        summary={**data.summary, "fit_steps": fit_steps},
        cells=data.cells.keep(keep) if data.cells is not None else None,
    )


def predict_steps(
    idata: az.InferenceData, data: ArmSteps, likelihood: str, seed: int, where: np.ndarray | None = None
) -> np.ndarray:
    """Posterior predictive draws of every (arm, step)'s observed value, (samples, arm, step):
    the curve plus the step's noise (Gaussian: the mean's sampling variance plus tau^2;
    binomial: beta-binomial successes out of the step's rollouts, as a rate; paired: the
    instances' binomial successes, :func:`_predict_paired`). ``where`` (arm, step), optional:
    only those cells are drawn, the others are NaN."""
    rng = np.random.default_rng([seed, 20261202])
    mu = np.clip(curve_draws(idata, data.x_cells), 1e-6, 1 - 1e-6)
    post = idata.posterior.stack(sample=("chain", "draw")).transpose("sample", ...)
    if likelihood == "binomial-paired":
        return _predict_paired(post, data, mu, rng, data.n > 0 if where is None else where)
    if likelihood == "binomial":
        kappa = np.exp(post["log_kappa"].to_numpy())[:, :, None]
        n = np.maximum(data.n, 1).astype(int)[None]
        return rng.binomial(n, rng.beta(mu * kappa, (1 - mu) * kappa)) / n
    tau = post["tau"].to_numpy()[:, :, None]
    return mu + rng.standard_normal(mu.shape) * np.sqrt(data.var_mean[None] + tau**2)


def _predict_paired(
    post: xr.Dataset, data: ArmSteps, mu: np.ndarray, rng: np.random.Generator, where: np.ndarray
) -> np.ndarray:
    """Paired arms' predictive rate of each (arm, step) in ``where``: per draw a new step
    effect :math:`e \\sim N(0, 1)`, the posterior instance effects :math:`z_i` of the
    instances evaluated there (an instance the fit never saw has its prior draws), binomial
    successes out of each instance's rollouts, summed over the instances."""
    if data.cells is None or "instance_z" not in post:
        raise ValueError("a paired predictive needs the per-instance cells and the instance effects' draws")
    sigma = post["instance_sd"].to_numpy()
    tau = post["step_logit_sd"].to_numpy()
    z = post["instance_z"].to_numpy()  # (samples, instances)
    c = data.cells
    out = np.full(mu.shape, np.nan)
    for a, t in zip(*np.nonzero(where & (data.n > 0)), strict=True):
        sel = (c.arm_idx == a) & (c.step_idx == t)
        loc = curves.logitnormal_location_newton(np, mu[:, a, t], np.hypot(sigma, tau))
        eta = (loc + tau * rng.standard_normal(len(tau)))[:, None] + sigma[:, None] * z[:, c.inst_idx[sel]]
        out[:, a, t] = rng.binomial(c.n[sel][None, :], curves.expit(eta)).sum(axis=1) / c.n[sel].sum()
    return out


def backtest_sigmoid(
    ds: xr.Dataset | ArmSteps,
    fit_steps: int,
    config: SigmoidConfig | None = None,
    *,
    seed: int = 0,
    metrics: xr.Dataset | None = None,
) -> Backtest:
    """Fit each arm's curve on its first ``fit_steps`` steps and check the forecast of the rest.

    Parameters
    ----------
    ds : xarray.Dataset or ArmSteps
        Trials with an ``arm`` coordinate (or :func:`arm_steps` of them).
    fit_steps : int
        Steps per arm to fit (at least :data:`MIN_FIT_STEPS`; every arm must have a later one).
    config : SigmoidConfig, optional
        The fit's settings (default :class:`SigmoidConfig`).
    seed : int
        Seeds the fit and the predictive draws.
    metrics : xarray.Dataset, optional
        Per-step metrics of the arms' runs, for ``config.x == "compute"`` (as in
        :func:`fit_sigmoid`; the held-out steps' compute is the logged one).

    Returns
    -------
    Backtest
        The truncated fit, one row per held-out (arm, step) and per-arm coverage and errors.

    Notes
    -----
    The predictive interval of a held-out step is the 94 % HDI of its posterior predictive
    draws (:func:`predict_steps`), which include that step's own noise, so a calibrated
    forecast covers about 94 % of the held-out steps. The persistence error (the last
    fitted step's observed value carried forward) is the baseline a curve must beat to be
    worth extrapolating. Paired arms (``config.paired``) predict a held-out checkpoint from
    its instances: a new step effect, the fitted instance effects (the same instances were
    seen at the fitted checkpoints), binomial successes per instance.
    """
    config = replace(config or SigmoidConfig(), backtest=None, families=False)
    data = compare_data(ds, config, metrics)
    check_backtest(data, fit_steps)
    part = truncate(data, fit_steps)
    fit = fit_sigmoid(part, config, seed=seed, instance_effects=config.paired)
    held_out = (data.n > 0) & (part.n == 0)
    reps = predict_steps(held_idata(fit), data, fit.estimands["likelihood"], seed, where=held_out)
    if config.paired:  # the instance effects' draws were kept for the predictive only
        held = held_idata(fit)
        held.posterior = held.posterior.drop_vars("instance_z")
    rows = []
    for a, arm in enumerate(data.arms):
        seen = np.nonzero(part.n[a] > 0)[0]
        for j in np.nonzero(held_out[a])[0]:
            lo, hi = (float(v) for v in hdi_1d(reps[:, a, j]))
            obs = float(data.mean[a, j])
            rows.append(
                {
                    S.ARM: arm,
                    S.STEP: int(data.steps[j]),
                    "observed": obs,
                    "mean": float(reps[:, a, j].mean()),
                    "lower": lo,
                    "upper": hi,
                    "inside": bool(lo <= obs <= hi),
                    "persistence": float(data.mean[a, seen[-1]]),
                }
            )
    frame = pd.DataFrame(rows)
    arms = {
        arm: {
            "held_out": len(g),
            "coverage": float(g["inside"].mean()),
            "mae": float((g["mean"] - g["observed"]).abs().mean()),
            "mae_persistence": float((g["persistence"] - g["observed"]).abs().mean()),
            "steps": [int(g[S.STEP].min()), int(g[S.STEP].max())],
        }
        for arm, g in frame.groupby(S.ARM, sort=False)
    }
    return Backtest(fit_steps, fit, frame, arms)


def saturation_frame(fit: SigmoidFit, *, horizon: int | None = None) -> pd.DataFrame:
    """Per (arm, step): the observed mean (NaN past the data), the fitted curve's posterior
    mean and 94 % HDI band, from the first step to ``horizon`` (default the fit's) steps past
    each arm's last, and whether the step is an extrapolation (``forecast``).

    Parameters
    ----------
    fit : SigmoidFit
        The fit.
    horizon : int, optional
        Steps past each arm's last step (default ``fit.config.horizon``).

    Returns
    -------
    pandas.DataFrame
        Columns ``arm``, ``step``, ``x`` (the curve's x at the step: the step counted from
        1, or the compute spent through it), ``observed``, ``mean``, ``hdi_low``, ``hdi_high``,
        ``forecast``, ``asymptote``, ``asymptote_low``, ``asymptote_high`` (the arm's
        ceiling: posterior mean and 94 % HDI).
    """
    data = fit.data
    horizon = fit.config.horizon if horizon is None else horizon
    rows = []
    for a, (arm, j) in enumerate(zip(data.arms, _last_index(data), strict=True)):
        steps = np.arange(data.steps[0], data.steps[j] + horizon + 1)
        x = data.x_of(a, steps)
        draws = curve_draws(held_idata(fit), x)[:, a, :]
        hdi = hdi_columns(draws)  # (draws, steps) -> (steps, 2)
        observed = dict(zip(data.steps[data.n[a] > 0], data.mean[a][data.n[a] > 0], strict=True))
        asym = fit.estimands["arms"][arm]["asymptote"]
        for i, t in enumerate(steps):
            rows.append(
                {
                    S.ARM: arm,
                    S.STEP: float(t),
                    "x": float(x[i]),
                    "observed": float(observed.get(float(t), np.nan)),
                    "mean": float(draws[:, i].mean()),
                    "hdi_low": float(hdi[i, 0]),
                    "hdi_high": float(hdi[i, 1]),
                    "forecast": bool(t > data.steps[j]),
                    "asymptote": asym["mean"],
                    "asymptote_low": asym["hdi"][0],
                    "asymptote_high": asym["hdi"][1],
                }
            )
    return pd.DataFrame(rows)
