"""Is the uncertainty honest? Simulation-based calibration and null checks, on Dask.

For the plateau model (Gaussian likelihood on per-step means, unknown change point):

* **SBC** (Talts et al. 2018): draw the parameters from the prior, simulate per-step
  means from the model's own likelihood, fit, and record the rank of the true value among
  the posterior draws for every scalar parameter (change point, start, value at the change
  point, late slope, overdispersion tau). A calibrated model gives uniform ranks; the
  test is a chi-square on binned ranks. The priors are fixed (``start_mu``/``level_mu``
  given), so they do not depend on the simulated data.
* **Coverage** of the 94 % HDI of every parameter on the same simulations.
* **False-plateau rate**: steadily rising metrics (no change point) fitted with an unknown
  change point; "plateau" is the model's verdict "plateaued" or "slowed"
  (:func:`saturation.models.plateau.plateau_verdict`, the rule the CLI and the report use).
* **Power**: true plateaus (break in the middle, flat after) at several effect sizes.

For the plateau model on per-trial data that is NOT drawn from the model
(``model="plateau-trials"``, :class:`TrialsSetting`): rollouts simulated one by one by
:func:`saturation.simulate.simulate_plateau` (prompt groups sharing a task difficulty, a
falling spurious-location rate, step noise shared by the levels), fitted with the
defaults; coverage of the change point and slopes for early, middle and late change
points under the study's, a noisy and a small design; verdicts on rising lines and on
study-shaped data. SBC alone cannot find what this finds: it draws the data from the
model's own prior.

For the transfer model (``model="transfer"``): SBC and coverage of nine quantities (first
and last knots, random-walk, task-effect and reward sds, the initial all-rollout gap) on
data drawn from its prior with its own likelihood on a fixed paired design
(:class:`TransferSetting`, :func:`simulate_transfer_prior`).

For the pass@k group model (``model="pass-at-k"``): SBC and coverage of its seven
parameters and four reported curve ends on prompt groups drawn from its prior with its
own likelihood (:class:`PassAtKSetting`, :func:`simulate_pass_at_k_prior`). The learning
diagnostics' trend fits are the plateau model on one series (calibrated above).

For the saturation-curve model of ``saturation compare`` (``model="sigmoid"``): SBC and
coverage of the reference arm's curve parameters, its concentration, its curve at the last
step and the asymptote contrast, on two arms drawn from the prior with the beta-binomial
likelihood (:class:`SigmoidSetting`, :func:`simulate_sigmoid_prior`).

An SBC row's verdict uses Holm-adjusted p-values over all SBC tests of the calibration
(:func:`verdict_table`): a dozen quantities tested at a fixed level each would flag some
by chance.

Every simulation is one self-contained, seeded task (:func:`run_task`); tasks run on a
dask.distributed cluster (a LocalCluster by default, or an existing scheduler), are
retried on failure, and a task that still fails is reported, never dropped silently.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from saturation import __version__, curves
from saturation import schema as S
from saturation._lazy import held_idata
from saturation.cluster import map_tasks
from saturation.configs import PassAtKPriors, PlateauConfig, TransferConfig
from saturation.curves import hinge_through
from saturation.io import dataset_from_frame, write_atomic, write_netcdf
from saturation.models import (
    ConvergenceWarning,
    PlateauPriors,
    SamplerConfig,
    StepData,
    fit_plateau,
    fit_transfer,
    learning,
    sigmoid,
)
from saturation.models.plateau import STOPPED_VERDICTS as STOPPED
from saturation.models.plateau_model import plateau_prior_predictive
from saturation.models.sampling import interval
from saturation.models.transfer import TransferPriors, knot_basis, population, transfer_data
from saturation.models.transfer import prior_draw as transfer_prior_draw
from saturation.models.verdicts import CURVE_SHAPES, VERDICTS
from saturation.plots import BAND_ALPHA, PAGE, colour, save_figure, style
from saturation.replica import SWESMITH_SPEC, load_reference
from saturation.simulate import PlateauSpec, simulate_plateau
from saturation.tables import write_tables

SBC_PARAMS = ("changepoint", "start", S.VALUE_AT_CHANGEPOINT, "late_slope", "tau")
MODELS = S.CALIBRATION_MODELS
#: a fit's convergence numbers kept per SBC simulation beside its flag (calibration.nc:
#: which fits failed, and why)
SIM_DIAGNOSTICS = ("rhat_max", "ess_bulk_min", "divergences")
#: family-wise error rate of the SBC verdicts (Holm over every SBC test of one calibration)
FAMILY_ALPHA = 0.05


@dataclass(frozen=True)
class PlateauSetting:
    """One calibration setting of the plateau model: a single metric, or ``n_levels``
    metrics whose change points are pooled around a common one (the "did the levels stop
    together?" model, ``fit_plateau(shared=True)``)."""

    n_steps: int = 40
    n_levels: int = 1
    #: prior sd (steps) of the spread of the level change points (several levels)
    spread_sd: float = 5.0
    #: standard error of each per-step mean (within-step noise; tau adds overdispersion);
    #: 0.005 is a well-measured metric (e.g. F1 with sd 0.25 over 2,500 rollouts per step)
    se: float = 0.005
    min_segment: int = 5
    start_mu: float = 0.5
    start_sd: float = 0.1
    level_mu: float = 0.8
    level_sd: float = 0.1
    late_slope_sd: float = 0.002
    tau_sd: float = 0.01
    #: if set, the fit uses this late-slope prior sd instead (a deliberate mis-specification)
    fit_late_slope_sd: float | None = None
    rope: float = 0.01
    #: posterior draws per fit = chains x draws (independent draws of the exact sampler;
    #: ranks 0..chains x draws); several chains so that R-hat is defined
    chains: int = 3
    draws: int = 333

    @property
    def rank_draws(self) -> int:
        return self.chains * self.draws

    @property
    def levels(self) -> list[str]:
        return ["metric"] if self.n_levels == 1 else [f"level{j}" for j in range(self.n_levels)]

    @property
    def checked(self) -> tuple[str, ...]:
        """The SBC quantities: per level (``name[level]`` with several levels) and the
        change-point spread of the pooled model."""
        if self.n_levels == 1:
            return SBC_PARAMS
        return (*(f"{p}[{lv}]" for lv in self.levels for p in SBC_PARAMS), S.CHANGEPOINT_SPREAD)

    def priors(self, *, for_fit: bool) -> Any:

        late = self.fit_late_slope_sd if (for_fit and self.fit_late_slope_sd is not None) else self.late_slope_sd
        return PlateauPriors(
            min_segment=self.min_segment,
            start_mu=self.start_mu,
            start_sd=self.start_sd,
            level_mu=self.level_mu,
            level_sd=self.level_sd,
            late_slope_sd=late,
            tau_sd=self.tau_sd,
            spread_sd=self.spread_sd,
        )


def _step_data(y: np.ndarray, setting: PlateauSetting) -> Any:

    steps = np.arange(setting.n_steps, dtype=float)
    y = np.atleast_2d(y)
    return StepData(
        steps=steps,
        levels=setting.levels,
        y=y,
        n=np.full(y.shape, np.inf),
        var_mean=np.full(y.shape, setting.se**2),
        response="metric",
        summary={"steps": [0, int(steps[-1])], "n_trials": None, "simulated": True},
    )


def _fit(y: np.ndarray, setting: PlateauSetting, seed: int, sbc: bool = False) -> Any:
    """Fit with the exact sampler; its convergence flag is recorded per task (with a few
    hundred independent draws R-hat fluctuates around 1.01 by chance), not warned about.
    ``sbc``: the hinge with independent step noise, the model whose prior the data were
    drawn from (the defaults average the hinge and the jump, and independent and AR(1) step
    noise: a different prior); else the defaults, as a user's fit."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit_plateau(
            _step_data(y, setting),
            shared=setting.n_levels > 1,  # several levels: the pooled model is the one checked
            priors=setting.priors(for_fit=True),
            rope=setting.rope,
            sampler=SamplerConfig(draws=setting.draws, chains=setting.chains, sampler="exact"),
            continuity="hinge" if sbc else None,
            noise="independent" if sbc else None,
            seed=seed,
        )


def _prior_draw(setting: PlateauSetting, rng: np.random.Generator) -> tuple[dict[str, float], np.ndarray]:
    """One SBC simulation from the plateau model's own prior predictive
    (:func:`saturation.models.plateau_model.plateau_prior_predictive`: the priors of the
    setting as the fit resolves them, the hinge, the pooled change points with several
    levels): the truth (``name`` for one level, ``name[level]`` and the spread for several)
    and the per-step means (levels x steps)."""
    y0 = np.zeros((setting.n_levels, setting.n_steps))
    config = PlateauConfig(
        priors=setting.priors(for_fit=False), continuity="hinge", shared=setting.n_levels > 1
    )  # the model the SBC fits (_fit), with the data-generating priors
    draw = plateau_prior_predictive(_step_data(y0, setting), draws=1, seed=int(rng.integers(2**31)), config=config)
    draw = draw.isel(draw=0)
    theta: dict[str, float] = {}
    for j, lv in enumerate(setting.levels):
        for p in SBC_PARAMS:
            value = float(draw[p].isel({S.LEVEL: j}))
            theta[p if setting.n_levels == 1 else f"{p}[{lv}]"] = value
    if setting.n_levels > 1:
        theta[S.CHANGEPOINT_SPREAD] = float(draw[S.CHANGEPOINT_SPREAD])
    return theta, draw["y"].to_numpy()


def simulate_means(theta: dict[str, float], setting: PlateauSetting, rng: np.random.Generator) -> np.ndarray:
    """Per-step means from the model's likelihood: hinge curve (the same function the
    model uses) plus N(0, se^2 + tau^2) noise."""

    t = np.arange(setting.n_steps, dtype=float)
    mu = hinge_through(
        t, theta["changepoint"], theta["start"], theta[S.VALUE_AT_CHANGEPOINT], theta["late_slope"], 0.0, 0.0
    )
    return np.asarray(mu + rng.standard_normal(len(t)) * np.sqrt(setting.se**2 + theta["tau"] ** 2))


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """One simulation (plain dict in, plain dict out; deterministic given its seed).

    ``task``: ``{"kind": "sbc" | "null" | "power", "sim": i, "seed": s, "effect": x,
    "setting": asdict(PlateauSetting)}``.
    """
    if task.get("model") == "transfer":
        return run_transfer_task(task)
    if task.get("model") == "pass-at-k":
        return run_pass_at_k_task(task)
    if task.get("model") == "sigmoid":
        return run_sigmoid_task(task)
    if task.get("model") == "plateau-trials":
        return run_trials_task(task)
    setting = PlateauSetting(**task["setting"])
    rng = np.random.default_rng([task["seed"], task["sim"], {"sbc": 0, "null": 1, "power": 2}[task["kind"]]])
    t = np.arange(setting.n_steps, dtype=float)
    if setting.n_levels > 1:
        return _run_levels_task(task, setting, rng)
    if task["kind"] == "sbc":
        theta, drawn = _prior_draw(setting, rng)
    elif task["kind"] == "null":  # steadily rising by `effect` over the run, no break
        slope = task["effect"] / t[-1]
        theta = {
            "changepoint": float(t[-1]),
            "start": setting.start_mu,
            S.VALUE_AT_CHANGEPOINT: setting.start_mu + slope * t[-1],
            "late_slope": slope,
            "tau": 0.0,
        }
    else:  # a true plateau: rises by `effect` until the middle, flat after
        c = float(t[len(t) // 2])
        theta = {
            "changepoint": c,
            "start": setting.start_mu,
            S.VALUE_AT_CHANGEPOINT: setting.start_mu + task["effect"],
            "late_slope": 0.0,
            "tau": 0.0,
        }
    y = drawn[0] if task["kind"] == "sbc" else simulate_means(theta, setting, rng)
    start = time.perf_counter()
    fit = _fit(y, setting, seed=int(task["seed"]) * 100_003 + int(task["sim"]), sbc=task["kind"] == "sbc")
    est = fit.levels()["metric"]
    out: dict[str, Any] = {
        "kind": task["kind"],
        "sim": task["sim"],
        "effect": task.get("effect", np.nan),
        "plateaued": est.stopped,
        "p_late_in_rope": est.p_late_in_rope,
        "seconds": time.perf_counter() - start,
        **_convergence(fit.diagnostics),
    }
    if task["kind"] == "sbc":
        post = held_idata(fit).posterior
        ranks, inside = {}, {}
        for p in SBC_PARAMS:
            ranks[p], inside[p] = _rank_and_cover(
                post[p].to_numpy().ravel(), theta[p], est.changepoint.hdi if p == "changepoint" else None, rng
            )
        out.update(rank=ranks, inside=inside, truth=theta)
    return out


def _rank_and_cover(draws: np.ndarray, truth: float, hdi: Any, rng: np.random.Generator) -> tuple[int, bool]:
    """Rank of the truth among the draws (ties, e.g. of a discrete change point, broken at
    random) and whether it lies inside ``hdi`` (default: the draws' 94 % HDI)."""

    less, ties = int(np.sum(draws < truth)), int(np.sum(draws == truth))
    lo, hi = hdi if hdi is not None else interval(draws)["hdi"]
    return less + int(rng.integers(0, ties + 1)), bool(lo <= truth <= hi)


def _convergence(diagnostics: dict[str, Any]) -> dict[str, Any]:
    """A fit's convergence flag and the numbers behind it (``SIM_DIAGNOSTICS``), as kept in
    every simulation's result."""
    return {"converged": bool(diagnostics["converged"]), **{k: float(diagnostics[k]) for k in SIM_DIAGNOSTICS}}


def _sbc_result(
    task: dict[str, Any],
    ranks: dict[str, int],
    inside: dict[str, bool],
    truth: dict[str, float],
    seconds: float,
    diagnostics: dict[str, Any],
) -> dict[str, Any]:
    """The result dict of an SBC-only simulation (no plateau verdict); ``diagnostics``: the
    fit's (its convergence flag and the numbers behind it are kept per simulation)."""
    return {
        "kind": "sbc",
        "sim": task["sim"],
        "effect": np.nan,
        "plateaued": False,
        "p_late_in_rope": np.nan,
        "seconds": seconds,
        **_convergence(diagnostics),
        "rank": ranks,
        "inside": inside,
        "truth": {k: float(v) for k, v in truth.items()},
    }


def _run_levels_task(task: dict[str, Any], setting: PlateauSetting, rng: np.random.Generator) -> dict[str, Any]:
    """SBC of the pooled several-level plateau model (SBC only)."""
    if task["kind"] != "sbc":
        raise ValueError("the null and power checks are single-metric checks (n_levels = 1)")
    theta, y = _prior_draw(setting, rng)
    start = time.perf_counter()
    fit = _fit(y, setting, seed=int(task["seed"]) * 100_003 + int(task["sim"]), sbc=True)
    post = held_idata(fit).posterior
    records = fit.levels()
    ranks, inside = {}, {}
    for lv in setting.levels:
        for p in SBC_PARAMS:
            name = f"{p}[{lv}]"
            hdi = records[lv].changepoint.hdi if p == "changepoint" else None
            ranks[name], inside[name] = _rank_and_cover(
                post[p].sel({S.LEVEL: lv}).to_numpy().ravel(), theta[name], hdi, rng
            )
    name = S.CHANGEPOINT_SPREAD
    ranks[name], inside[name] = _rank_and_cover(post[name].to_numpy().ravel(), theta[name], None, rng)
    return _sbc_result(task, ranks, inside, theta, time.perf_counter() - start, fit.diagnostics)


# ------------------------------------------------------------------ transfer model
#: scalar quantities whose SBC ranks are checked for the transfer model
TRANSFER_PARAMS = (
    "ungraded_knot_first",
    "reward_knot_first",
    "reward_knot_last",
    "ungraded_rw_sd",
    "reward_rw_sd",
    "ungraded_task_sd",
    "reward_task_sd",
    "reward_sd",
    "initial_gap_all_rollout",
)


@dataclass(frozen=True)
class NUTSDraws:
    """Sampler settings of an SBC setting fitted by NUTS: ranks among every ``thin``-th
    draw (SBC needs roughly independent draws), ``rank_draws`` of them per fit."""

    chains: int = 4
    tune: int = 1000
    draws: int = 1000
    thin: int = 20
    target_accept: float = 0.95

    @property
    def rank_draws(self) -> int:
        return self.chains * len(range(0, self.draws, self.thin))

    def sampler(self) -> Any:

        return SamplerConfig(draws=self.draws, tune=self.tune, chains=self.chains, target_accept=self.target_accept)


@dataclass(frozen=True)
class TransferSetting(NUTSDraws):
    """One calibration setting of the transfer model: two arms on a fixed, paired task
    schedule (the design; the same in every simulation, so one compiled model serves all),
    fixed priors (the fit's data-centred start means replaced by ``start_mu``)."""

    n_steps: int = 12
    prompts_per_step: int = 16
    samples_per_prompt: int = 4
    pool_size: int = 64
    knot_every: float = 4.0
    start_mu: tuple[float, float] = (-1.0, 0.0)
    #: prior widths: the model's own defaults (``TransferPriors``), read by the simulator
    #: through :meth:`priors`
    intercept_sd: float = TransferPriors.intercept_sd
    rw_sd: float = TransferPriors.rw_sd
    task_sd: float = TransferPriors.task_sd
    reward_task_sd: float = TransferPriors.reward_task_sd
    reward_sd: float = TransferPriors.reward_sd
    first_steps: int = 4
    #: 4 x 2000 draws: with 1000 the task-effect sds' bulk ESS fell below 400 in about a
    #: third of the fits (R-hat <= 1.01, no divergences); target_accept 0.95 (the default of
    #: ``NUTSDraws``): with 0.9, 23 of 100 fits had 1-2 divergences in 8,000 draws
    draws: int = 2000
    thin: int = 40

    @property
    def checked(self) -> tuple[str, ...]:
        return TRANSFER_PARAMS

    def priors(self) -> TransferPriors:
        return TransferPriors(
            intercept_sd=self.intercept_sd,
            rw_sd=self.rw_sd,
            task_sd=self.task_sd,
            reward_task_sd=self.reward_task_sd,
            reward_sd=self.reward_sd,
            start_mu=(float(self.start_mu[0]), float(self.start_mu[1])),
        )


def _transfer_schedule(setting: TransferSetting) -> np.ndarray:
    """(step, prompt) task indices: distinct tasks within a step, the same for both arms."""
    rng = np.random.default_rng(20261130)
    return np.stack(
        [rng.choice(setting.pool_size, setting.prompts_per_step, replace=False) for _ in range(setting.n_steps)]
    )


def _transfer_trials(
    setting: TransferSetting,
    arms: tuple[str, ...],
    outcome: Callable[[int, int, np.ndarray], tuple[np.ndarray, np.ndarray]],
) -> xr.Dataset:
    """The calibration design's trials: per arm and step the scheduled tasks'
    ``samples_per_prompt`` rollouts, each one's (ungraded, reward) from ``outcome(arm, step
    index, tasks)``."""
    schedule = _transfer_schedule(setting)
    rows = []
    for a, arm in enumerate(arms):
        for j in range(setting.n_steps):
            task = np.repeat(schedule[j], setting.samples_per_prompt)
            ungraded, reward = outcome(a, j, task)
            rows.append(
                pd.DataFrame(
                    {
                        S.RUN: f"sbc-{arm}",
                        S.ARM: arm,
                        S.STEP: j + 1,
                        S.INSTANCE_ID: [f"task-{t:04d}" for t in task],
                        S.SAMPLE: np.tile(np.arange(setting.samples_per_prompt), len(schedule[j])),
                        S.PHASE: "train",
                        S.DATASET: "sbc",
                        S.GRADED: ~ungraded,
                        S.REWARD: np.where(ungraded, 0.0, reward),
                    }
                )
            )
    return dataset_from_frame(pd.concat(rows, ignore_index=True), levels=[], sources=["simulate_transfer_prior"])


def simulate_transfer_prior(setting: TransferSetting, rng: np.random.Generator) -> tuple[xr.Dataset, dict[str, float]]:
    """Draw the transfer model's parameters from its own graph and trials from its likelihood.

    The knot values of both parts (a random walk per arm: first knot ~ N(start_mu,
    intercept_sd), increments ~ N(0, rw_sd_a), rw_sd_a ~ Gamma), the task-effect sds and the
    per-arm reward sds are one draw of the fit's model (``transfer.prior_draw``: the priors
    of ``setting.priors()`` as the fit reads them); the likelihood's task effects are a
    zero-sum normal over the scheduled tasks times their sd; ungraded ~ Bernoulli(expit(. +
    ungraded task effect)), graded reward ~ Normal(expit(.) + reward task effect, reward_sd_a).
    Curves between knots by the model's own interpolation (``transfer.knot_basis``);
    population curves by the fit's ``transfer.population``.
    """

    arms = ("base", "s85")
    steps = np.arange(1, setting.n_steps + 1, dtype=float)
    _, basis = knot_basis(steps, setting.knot_every)
    used = np.unique(_transfer_schedule(setting))

    def placeholder(a: int, j: int, task: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # the design's values (the SBC's priors are not centred on the data): varied, so
        # that the design is one transfer_data accepts
        return np.arange(len(task)) % 5 == 0, np.linspace(0.2, 0.8, len(task))

    design = transfer_data(_transfer_trials(setting, arms, placeholder))
    config = TransferConfig(
        reference="base", first_steps=setting.first_steps, knot_every=setting.knot_every, priors=setting.priors()
    )
    draw = transfer_prior_draw(design, config, int(rng.integers(2**31)))
    order = [[str(x) for x in design.arms].index(arm) for arm in arms]
    truth: dict[str, float] = {}
    curve, task_sd, task_effect = {}, {}, {}
    for part in ("ungraded", "reward"):
        kv, rw_sd = draw[f"{part}_knot"][order], draw[f"{part}_rw_sd"][order]
        curve[part] = kv @ basis.T  # (arm, step)
        task_sd[part] = float(draw[f"{part}_task_sd"])
        z = rng.standard_normal(len(used))
        task_effect[part] = np.zeros(setting.pool_size)
        task_effect[part][used] = task_sd[part] * (z - z.mean())
        truth.update(
            {
                f"{part}_knot_first": float(kv[0, 0]),
                f"{part}_rw_sd": float(rw_sd[0]),
                f"{part}_task_sd": task_sd[part],
            }
        )
        if part == "reward":
            truth["reward_knot_last"] = float(kv[0, -1])
    reward_sd = draw["reward_sd"][order]
    truth["reward_sd"] = float(reward_sd[0])
    all_rollout = population(curve["ungraded"], task_sd["ungraded"], curve["reward"])[S.ALL_ROLLOUT]
    k = setting.first_steps
    truth["initial_gap_all_rollout"] = float((all_rollout[1, :k] - all_rollout[0, :k]).mean())

    def outcome(a: int, j: int, task: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p_u = curves.expit(curve["ungraded"][a, j] + task_effect["ungraded"][task])
        mu = curves.expit(curve["reward"][a, j]) + task_effect["reward"][task]  # reward-scale effects
        return rng.random(len(task)) < p_u, rng.normal(mu, reward_sd[a])

    return _transfer_trials(setting, arms, outcome), truth


def _transfer_draws(post: xr.Dataset, setting: TransferSetting) -> dict[str, np.ndarray]:
    """The checked quantities' posterior draws (the reference arm's for per-arm parameters)."""
    ref = {S.ARM: 0}
    gap = post["population_all_rollout"].isel({S.ARM: 1}) - post["population_all_rollout"].isel(ref)
    draws = {
        "ungraded_knot_first": post["ungraded_knot"].isel({**ref, "knot": 0}),
        "reward_knot_first": post["reward_knot"].isel({**ref, "knot": 0}),
        "reward_knot_last": post["reward_knot"].isel({**ref, "knot": -1}),
        "ungraded_rw_sd": post["ungraded_rw_sd"].isel(ref),
        "reward_rw_sd": post["reward_rw_sd"].isel(ref),
        "ungraded_task_sd": post["ungraded_task_sd"],
        "reward_task_sd": post["reward_task_sd"],
        "reward_sd": post["reward_sd"].isel(ref),
        "initial_gap_all_rollout": gap.isel({S.STEP: slice(0, setting.first_steps)}).mean(S.STEP),
    }
    return {k: v.to_numpy().ravel() for k, v in draws.items()}


def run_transfer_task(task: dict[str, Any]) -> dict[str, Any]:
    """One transfer-model SBC simulation (plain dict in and out, deterministic given its seed)."""

    setting = replace(TransferSetting(**task["setting"]), start_mu=tuple(task["setting"]["start_mu"]))
    rng = np.random.default_rng([task["seed"], task["sim"], 3])
    ds, theta = simulate_transfer_prior(setting, rng)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = fit_transfer(
            ds,
            reference="base",
            first_steps=setting.first_steps,
            knot_every=setting.knot_every,
            priors=setting.priors(),
            seed=int(task["seed"]) * 100_003 + int(task["sim"]),
            sampler=setting.sampler(),
        )
    posterior = held_idata(fit)["posterior"]
    full = _transfer_draws(posterior, setting)
    thinned = _transfer_draws(posterior.isel(draw=slice(0, None, setting.thin)), setting)
    ranks, inside = {}, {}
    for name in TRANSFER_PARAMS:  # ranks among the thinned draws, the HDI from all of them
        ranks[name], inside[name] = _rank_and_cover(thinned[name], theta[name], interval(full[name])["hdi"], rng)
    return _sbc_result(
        task,
        ranks,
        inside,
        {k: theta[k] for k in TRANSFER_PARAMS},
        time.perf_counter() - start,
        fit.diagnostics,
    )


# ------------------------------------------------------------------ pass@k group model
#: scalar quantities whose SBC ranks are checked for the pass@k model: its seven
#: parameters and the four reported curve ends
PASS_AT_K_CHECKED = (*learning.PASS_AT_K_PARAMS, *learning.PASS_AT_K_ENDS)


@dataclass(frozen=True)
class PassAtKSetting(NUTSDraws):
    """One calibration setting of the pass@k group model (``fit_pass_at_k``): ``n_steps``
    steps with ``prompts_per_step`` new prompts of ``samples_per_prompt`` binary rollouts
    each; the model's own (fixed) priors."""

    n_steps: int = 10
    prompts_per_step: int = 32
    samples_per_prompt: int = 8

    @property
    def checked(self) -> tuple[str, ...]:
        return PASS_AT_K_CHECKED


def simulate_pass_at_k_prior(setting: PassAtKSetting, rng: np.random.Generator) -> tuple[xr.Dataset, dict[str, float]]:
    """Draw the pass@k model's parameters and step effects from its own graph
    (``learning.pass_at_k_prior_draw``: the priors of :class:`saturation.configs.PassAtKPriors`
    as the model reads them) and prompt groups from its likelihood: per step mean ``mu_t`` and concentration
    ``kappa_t`` (the model's own ``learning.pass_at_k_predictors``), per prompt p ~ Beta(mu kappa, (1 - mu)
    kappa), rollouts ~ Bernoulli(p) (reward 1/0, all graded). The truth holds the
    parameters and the curve ends the fit reports (at eps = 0, k = samples_per_prompt)."""

    n, k, m = setting.n_steps, setting.samples_per_prompt, setting.prompts_per_step
    theta = learning.pass_at_k_prior_draw(n, PassAtKPriors(), int(rng.integers(2**31)))  # from the model's graph
    eps = theta.pop("eps")
    x = np.arange(n) / max(n - 1, 1)
    logit_mu, log_kappa = learning.pass_at_k_predictors(theta, x, eps)
    mu, kappa = curves.expit(logit_mu), np.exp(log_kappa)
    # Beta draws with tiny shape parameters underflow to exactly 0 or 1: fine for Bernoulli
    p = rng.beta(np.repeat((mu * kappa)[:, None], m, 1), np.repeat(((1 - mu) * kappa)[:, None], m, 1))
    outcome = rng.random((n, m, k)) < p[:, :, None]
    t, i, s = np.meshgrid(np.arange(n), np.arange(m), np.arange(k), indexing="ij")
    frame = pd.DataFrame(
        {
            S.RUN: "sbc",
            S.STEP: t.ravel() + 1,
            S.INSTANCE_ID: [f"prompt-{a}-{b}" for a, b in zip(t.ravel(), i.ravel(), strict=True)],
            S.SAMPLE: s.ravel(),
            S.GRADED: True,
            S.REWARD: outcome.ravel().astype(float),
        }
    )
    ds = dataset_from_frame(frame, levels=[], sources=["simulate_pass_at_k_prior"])
    logit_mu0, log_kappa0 = learning.pass_at_k_predictors(theta, np.array([0.0, 1.0]), 0.0)
    mu0 = curves.expit(logit_mu0)
    passk = curves.pass_at_k_beta(mu0, np.exp(log_kappa0), k)
    theta.update(
        pass1_start=float(mu0[0]), pass1_end=float(mu0[1]), passk_start=float(passk[0]), passk_end=float(passk[1])
    )
    return ds, theta


def run_pass_at_k_task(task: dict[str, Any]) -> dict[str, Any]:
    """One pass@k-model SBC simulation (plain dict in and out, deterministic given its seed)."""

    setting = PassAtKSetting(**task["setting"])
    rng = np.random.default_rng([task["seed"], task["sim"], 4])
    ds, theta = simulate_pass_at_k_prior(setting, rng)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        d = learning.fit_pass_at_k(
            ds,
            k=setting.samples_per_prompt,
            seed=int(task["seed"]) * 100_003 + int(task["sim"]),
            sampler=setting.sampler(),
        )
    post = d.idata["posterior"]
    ranks, inside = {}, {}
    for name in PASS_AT_K_CHECKED:  # ranks among the thinned draws, the HDI from all of them
        full = post[name].to_numpy()
        ranks[name], inside[name] = _rank_and_cover(
            full[:, :: setting.thin].ravel(), theta[name], interval(full.ravel())["hdi"], rng
        )
    return _sbc_result(
        task,
        ranks,
        inside,
        {k: theta[k] for k in PASS_AT_K_CHECKED},
        time.perf_counter() - start,
        d.diagnostics,
    )


# ------------------------------------------------------------------ saturation curves (compare)
#: quantities whose SBC ranks are checked for the saturation-curve model: the reference
#: arm's four curve parameters and concentration, its curve at the last step, and the
#: contrast the comparison reports (the second arm's asymptote minus the first's)
SIGMOID_CHECKED = ("r0", "asymptote", "efficiency", "midpoint", "log_kappa", "last", "asymptote_diff")


@dataclass(frozen=True)
class SigmoidSetting(NUTSDraws):
    """One calibration setting of the saturation-curve model (``fit_sigmoid``, binomial
    likelihood): two arms of ``n_steps`` steps with ``rollouts`` binary rollouts each, the
    model's own priors with fixed centres (``r0_mu``, ``midpoint_mu``: data-free, as SBC
    needs); the design is the same in every simulation, so one compiled model serves all."""

    n_steps: int = 30
    rollouts: int = 128
    r0_mu: float = -1.0
    midpoint_mu: float = float(np.log(10.0))
    tune: int = 1000
    draws: int = 1000
    thin: int = 10

    @property
    def checked(self) -> tuple[str, ...]:
        return SIGMOID_CHECKED

    def priors(self) -> sigmoid.SigmoidPriors:
        return sigmoid.SigmoidPriors(r0_mu=self.r0_mu, midpoint_mu=self.midpoint_mu)

    def sampler(self) -> Any:
        """The SBC draws with the model's own mass-matrix adaptation (``DEFAULT_SAMPLER.low_rank``)."""
        return replace(super().sampler(), low_rank=sigmoid.DEFAULT_SAMPLER.low_rank)


def simulate_sigmoid_prior(setting: SigmoidSetting, rng: np.random.Generator) -> tuple[Any, dict[str, float]]:
    """Draw both arms' curve parameters and each step's successes from the fit's own graph
    (:func:`saturation.models.sigmoid.prior_draw`: the priors of :class:`SigmoidSetting`'s
    ``SigmoidPriors`` as the model reads them, and its beta-binomial likelihood); returns the
    per-step data (``sigmoid.ArmSteps``) and the truth of :data:`SIGMOID_CHECKED`."""
    arms = ["a", "b"]
    steps = np.arange(1.0, setting.n_steps + 1)
    n = np.full((len(arms), len(steps)), float(setting.rollouts))
    half = np.round(n / 2)  # the design's placeholder values: the SBC priors are not centred on the data
    design = sigmoid.ArmSteps(arms, steps, n, half, half / n, np.zeros_like(n), True, {"simulator": "sbc"})
    config = sigmoid.SigmoidConfig(reference="a", likelihood="binomial", priors=setting.priors())
    theta, k = sigmoid.prior_draw(design, config, int(rng.integers(2**31)))
    mean = k / n
    data = sigmoid.ArmSteps(
        arms, steps, n, k, mean, mean * (1 - mean) / n, True, {"n_trials": int(n.sum()), "simulator": "sbc"}
    )
    mu = curves.sigmoid_saturation(
        steps[-1],
        r0=theta["r0"][0],
        asymptote=theta["asymptote"][0],
        efficiency=theta["efficiency"][0],
        midpoint=theta["midpoint"][0],
    )
    truth = {name: float(v[0]) for name, v in theta.items()}
    truth["last"] = float(mu)
    truth["asymptote_diff"] = float(theta["asymptote"][1] - theta["asymptote"][0])
    return data, truth


def _sigmoid_draws(post: xr.Dataset, setting: SigmoidSetting) -> dict[str, np.ndarray]:
    """The checked quantities' posterior draws, (chain, draw) each."""
    ref = {S.ARM: 0}
    x_last = float(setting.n_steps)
    last = curves.sigmoid_saturation(
        x_last,
        r0=post["r0"].isel(ref),
        asymptote=post["asymptote"].isel(ref),
        efficiency=post["efficiency"].isel(ref),
        midpoint=post["midpoint"].isel(ref),
    )
    draws = {name: post[name].isel(ref) for name in ("r0", "asymptote", "efficiency", "midpoint", "log_kappa")}
    draws["last"] = last
    draws["asymptote_diff"] = post["asymptote"].isel({S.ARM: 1}) - post["asymptote"].isel(ref)
    return {k: np.asarray(v) for k, v in draws.items()}


def run_sigmoid_task(task: dict[str, Any]) -> dict[str, Any]:
    """One saturation-curve SBC simulation (plain dict in and out, deterministic given its seed)."""
    setting = SigmoidSetting(**task["setting"])
    rng = np.random.default_rng([task["seed"], task["sim"], 5])
    data, theta = simulate_sigmoid_prior(setting, rng)
    start = time.perf_counter()
    config = sigmoid.SigmoidConfig(
        reference="a", likelihood="binomial", priors=setting.priors(), sampler=setting.sampler()
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = sigmoid.fit_sigmoid(data, config, seed=int(task["seed"]) * 100_003 + int(task["sim"]))
    full = _sigmoid_draws(held_idata(fit)["posterior"], setting)
    ranks, inside = {}, {}
    for name in SIGMOID_CHECKED:  # ranks among the thinned draws, the HDI from all of them
        ranks[name], inside[name] = _rank_and_cover(
            full[name][:, :: setting.thin].ravel(), theta[name], interval(full[name].ravel())["hdi"], rng
        )
    return _sbc_result(task, ranks, inside, theta, time.perf_counter() - start, fit.diagnostics)


# ------------------------------------------------------------------ plateau on per-trial data that is not the model
#: quantities whose 94 % HDI coverage is checked on the per-trial simulations
TRIALS_PARAMS = ("changepoint", "early_slope", "late_slope")
#: noise profiles of the per-trial simulations (keyword arguments of ``PlateauSpec``):
#: "study" has the replica's task and step noise and the study's 42,511 graded trials;
#: "noisy" triples the step noise and doubles the task spread; "small" has 12 prompts per
#: step (about 8,000 graded trials)
PROFILES: dict[str, dict[str, Any]] = {
    "study": {"prompts_per_step": 64, "n_graded": 42511, "task_sd": 0.5, "step_sd": 0.05, "level_step_sd": 0.03},
    "noisy": {"prompts_per_step": 64, "n_graded": 42511, "task_sd": 1.0, "step_sd": 0.15, "level_step_sd": 0.08},
    "small": {"prompts_per_step": 12, "n_graded": None, "task_sd": 0.5, "step_sd": 0.05, "level_step_sd": 0.03},
    # 4 prompt groups a step (32 rollouts): the smallest designs users run
    "tiny": {"prompts_per_step": 4, "n_graded": None, "task_sd": 0.5, "step_sd": 0.05, "level_step_sd": 0.03},
}
#: the reference study's split and its published per-level early and late slopes and starts
STUDY_SPLIT = 46.0


@dataclass(frozen=True)
class TrialsSetting:
    """The plateau model on per-trial data that is NOT drawn from the model.

    :func:`saturation.simulate.simulate_plateau` draws every rollout: prompt groups of 8
    sharing a task difficulty, a spurious-location rate that falls until the change
    point (answer sizes change), step-level noise shared by the levels and per level, the
    levels graded on the same trials. The expected F1 per step follows a hinge with the
    study's starts and early gains (reached at ``changepoint``) and its published late
    slopes; the fit is ``fit_plateau`` with its defaults (``shared`` as set).

    Checks: coverage of the 94 % HDIs of the change point and the early and late slopes
    per (profile, change point) ("sims" per cell); verdicts on steadily rising metrics
    (rising at each level's early rate for the whole run; "null sims") and on data shaped
    like the study (break 46, published slopes, 42,511 trials; "power sims"), with the
    unknown break (default) and the known break 46.
    """

    changepoints: tuple[float, ...] = (20.0, 46.0, 70.0)
    profiles: tuple[str, ...] = ("study", "noisy", "small")
    #: the designs of the verdict checks (rising lines, study-shaped data)
    verdict_profiles: tuple[str, ...] = ("study",)
    shared: bool = False
    #: the fit's shape for the unknown break (None: ``fit_plateau``'s default)
    continuity: str | None = None
    #: per verdict design, study-shaped runs whose whole early gain is an abrupt jump at 46
    jump_sims: int = 0
    #: the fit's step-noise model (None: ``fit_plateau``'s default)
    noise: str | None = None
    chains: int = 4
    draws: int = 500


def study_levels(changepoint: float = STUDY_SPLIT, *, rising: bool = False, jump: bool = False) -> tuple[Any, ...]:
    """Level specs shaped like the study: its published starts, its early gains (the
    published early slope x 46) reached at ``changepoint``, its late slopes, the replica's
    answer-size settings; ``rising``: the early slope for the whole run (no change point),
    started lower so that the line ends where the study's early segment ends; ``jump``: flat
    at the start, the whole early gain as a jump at ``changepoint``, then the late slope."""

    ref = load_reference()["saturation"]["levels"]
    out = []
    for spec in SWESMITH_SPEC.levels:
        r = ref[spec.name]
        early = r["early_slope"] * STUDY_SPLIT / changepoint
        if rising:
            top = r["start"] + r["early_slope"] * STUDY_SPLIT
            out.append(
                replace(
                    spec,
                    start=top - r["early_slope"] * (SWESMITH_SPEC.n_steps - 1),
                    early_slope=r["early_slope"],
                    late_slope=r["early_slope"],
                    changepoint=1e9,
                )
            )
        elif jump:
            gain = r["early_slope"] * STUDY_SPLIT
            out.append(
                replace(
                    spec,
                    start=r["start"],
                    early_slope=0.0,
                    jump=gain,
                    changepoint=changepoint,
                    late_slope=r["late_slope"],
                )
            )
        else:
            out.append(
                replace(spec, start=r["start"], early_slope=early, changepoint=changepoint, late_slope=r["late_slope"])
            )
    return tuple(out)


def run_trials_task(task: dict[str, Any]) -> dict[str, Any]:
    """One per-trial simulation and its default fit(s): per-level coverage and verdicts."""

    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in task["setting"].items()}
    setting = TrialsSetting(**fields)
    kind, profile = task["kind"], task["profile"]
    cp = float(task["effect"]) if kind == "coverage" else STUDY_SPLIT
    levels = study_levels(cp, rising=kind == "rising", jump=kind == "jump")
    spec = PlateauSpec(levels=levels, run=f"trials-{kind}", **PROFILES[profile])
    seed = (
        int(task["seed"]) * 100_003 + int(task["sim"]) * 7 + {"coverage": 0, "rising": 1, "study": 2, "jump": 3}[kind]
    )
    start = time.perf_counter()
    ds, _ = simulate_plateau(spec, seed=seed)
    sampler = SamplerConfig(chains=setting.chains, draws=setting.draws, sampler="exact")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = fit_plateau(
            ds, shared=setting.shared, continuity=setting.continuity, noise=setting.noise, sampler=sampler, seed=seed
        )
        known = fit_plateau(ds, breakpoint=STUDY_SPLIT, sampler=sampler, seed=seed) if kind == "study" else None
    records, estimates = [], fit.levels()
    known_verdicts = {name: e.verdict for name, e in known.levels().items()} if known else {}
    for lv in levels:
        est = estimates[lv.name]
        inside = {}
        for p in TRIALS_PARAMS:
            true = {"changepoint": lv.changepoint, "early_slope": lv.early_slope, "late_slope": lv.late_slope}[p]
            lo, hi = getattr(est, p).hdi
            inside[p] = bool(lo <= true <= hi) if kind in ("coverage", "jump") else False
        records.append(
            {
                "level": lv.name,
                "inside": inside,
                "verdict": est.verdict,
                # what plateau_verdict read: a rule's thresholds can be re-calibrated offline
                "verdict_inputs": json.dumps({k: getattr(est, k) for k in VERDICT_INPUTS}),
                "verdict_known": known_verdicts[lv.name] if known else "",
                "curve_shape": str(est.extra.get("curve_shape", "")),
                "changepoint_mean": est.changepoint.mean,
            }
        )
    return {
        "kind": kind,
        "profile": profile,
        "effect": cp,
        "sim": task["sim"],
        "records": records,
        "seconds": time.perf_counter() - start,
        "converged": bool(fit.diagnostics["converged"] and (known is None or known.diagnostics["converged"])),
    }


def make_trials_tasks(
    *, sims: int, null_sims: int, power_sims: int, seed: int, setting: TrialsSetting
) -> list[dict[str, Any]]:
    base = {"seed": seed, "setting": asdict(setting), "model": "plateau-trials"}
    tasks = [
        {**base, "kind": "coverage", "profile": pr, "effect": float(c), "sim": i}
        for pr in setting.profiles
        for c in setting.changepoints
        for i in range(sims)
    ]
    for pr in setting.verdict_profiles:
        tasks += [{**base, "kind": "rising", "profile": pr, "effect": STUDY_SPLIT, "sim": i} for i in range(null_sims)]
        tasks += [{**base, "kind": "study", "profile": pr, "effect": STUDY_SPLIT, "sim": i} for i in range(power_sims)]
        tasks += [
            {**base, "kind": "jump", "profile": pr, "effect": STUDY_SPLIT, "sim": i} for i in range(setting.jump_sims)
        ]
    return tasks


def trials_dataset(
    results: list[dict[str, Any]], failures: list[dict[str, Any]], setting: TrialsSetting, seconds: float
) -> xr.Dataset:
    """One row per (simulation, level): kind, profile, true change point, HDI coverage and verdicts."""
    rows = [
        (r, rec)
        for r in sorted(results, key=lambda r: (r["kind"], r["profile"], r["effect"], r["sim"]))
        for rec in r["records"]
    ]
    params = list(TRIALS_PARAMS)
    ds = xr.Dataset(
        {
            "kind": (("fit",), np.array([r["kind"] for r, _ in rows], dtype=object)),
            "profile": (("fit",), np.array([r["profile"] for r, _ in rows], dtype=object)),
            "true_changepoint": (("fit",), np.array([r["effect"] for r, _ in rows], dtype=float)),
            "sim_index": (("fit",), np.array([r["sim"] for r, _ in rows], dtype=np.int64)),
            "level": (("fit",), np.array([rec["level"] for _, rec in rows], dtype=object)),
            "inside_hdi": (
                ("fit", "param"),
                np.array([[rec["inside"][p] for p in params] for _, rec in rows], dtype=bool).reshape(-1, len(params)),
            ),
            "verdict": (("fit",), np.array([rec["verdict"] for _, rec in rows], dtype=object)),
            "verdict_inputs": (("fit",), np.array([rec["verdict_inputs"] for _, rec in rows], dtype=object)),
            "verdict_known_break": (("fit",), np.array([rec["verdict_known"] for _, rec in rows], dtype=object)),
            "curve_shape": (("fit",), np.array([rec.get("curve_shape", "") for _, rec in rows], dtype=object)),
            "changepoint_mean": (("fit",), np.array([rec["changepoint_mean"] for _, rec in rows], dtype=float)),
            "converged": (("fit",), np.array([r["converged"] for r, _ in rows], dtype=bool)),
        },
        coords={"fit": np.arange(len(rows)), "param": params},
    )
    ds.attrs.update(
        {
            "model": "plateau-trials",
            "setting": json.dumps(asdict(setting)),
            "failures": json.dumps(failures),
            "n_failed": len(failures),
            "seconds": round(seconds, 1),
            "hdi_prob": S.HDI_PROB,
            S.ATTR_VERSION: __version__,
            "not_converged": int(sum(not r["converged"] for r in results)),
        }
    )
    return ds


#: the estimands :func:`~saturation.models.plateau.plateau_verdict` and
#: :func:`~saturation.models.verdicts.curve_shape` read, kept per fit
VERDICT_INPUTS = (
    "p_no_change",
    "bf_changepoint_vs_line",
    "edge_mass",
    "p_rise_positive",
    "p_late_loss_beyond_rope",
    "p_end_loss_beyond_rope",
    "p_late_gain_beyond_rope",
    "p_end_gain_beyond_rope",
    "p_flat",
    "p_late_in_rope",
    "p_slowed",
    "p_late_positive",
    "bf_smooth_vs_break",
    "bf_smooth_vs_line",
    "p_smooth_end_in_rope",
    "p_smooth_end_positive",
    "p_smooth_slowed",
)
#: the verdict calibration targets (issue 19): rising lines at most 5 % stopped, study-shaped
#: data at least 80 %
MAX_FALSE_STOP, MIN_STUDY_STOP = 0.05, 0.80
#: the coverage target of the 94 % HDIs on data that is not the model
MIN_COVERAGE = 0.90


def _share_row(check: str, k: int, m: int, passes: bool, meaning: str) -> dict[str, Any]:
    """One row of :func:`trials_table`: k of m, with its 94 % Beta interval."""
    lo, hi = _beta_interval(k, m)
    return {
        "check": check,
        "n": m,
        "value": k / m,
        "interval_low": lo,
        "interval_high": hi,
        "p_value": np.nan,
        "coverage_p": np.nan,
        "p_adjusted": np.nan,
        "passes": passes,
        "meaning": meaning,
    }


def trials_table(ds: xr.Dataset) -> pd.DataFrame:
    """Coverage per (profile, change point, parameter); per verdict design, the stopped rate
    on rising lines and on study-shaped data (unknown and known break), and how often abrupt
    jumps are located and called stopped; the verdict counts."""
    rows = []
    kind, profile = ds["kind"].to_numpy(), ds["profile"].to_numpy()
    cps = ds["true_changepoint"].to_numpy()

    def inside(p: str, sel: np.ndarray) -> tuple[int, int]:
        return int(ds["inside_hdi"].sel(param=p).to_numpy()[sel].sum()), int(sel.sum())

    for pr in dict.fromkeys(profile[kind == "coverage"]):
        for c in sorted(set(cps[(kind == "coverage") & (profile == pr)])):
            sel = (kind == "coverage") & (profile == pr) & (cps == c)
            for p in ds["param"].values:
                k, m = inside(p, sel)
                meaning = f"share of 94 % HDIs holding the truth (want >= {MIN_COVERAGE})"
                rows.append(_share_row(f"coverage {p}, {pr}, change point {c:g}", k, m, k / m >= MIN_COVERAGE, meaning))
    checks, jump_checks, shape_checks = [], [], []
    for pr in dict.fromkeys(profile[kind != "coverage"]):
        at = "" if pr == "study" else f", {pr} design"  # the study design keeps its old check names
        rising, study, jump = ((kind == k_) & (profile == pr) for k_ in ("rising", "study", "jump"))
        shape_checks += [
            (f"{what} named a smooth approach{at}", sel)
            for what, sel in (("rising lines", rising), ("study-shaped data", study), ("abrupt jumps", jump))
        ]
        checks += [
            (f"rising lines called plateaued or slowed{at}", rising, "verdict", True),
            (f"study-shaped data called plateaued or slowed (unknown break){at}", study, "verdict", False),
            (f"study-shaped data called plateaued or slowed (known break 46){at}", study, "verdict_known_break", False),
        ]
        if jump.any():
            k, m = inside("changepoint", jump)
            check = f"abrupt jumps located (change point HDI holds the jump){at}"
            rows.append(_share_row(check, k, m, k / m >= MIN_COVERAGE, f"want >= {MIN_COVERAGE}"))
            jump_checks.append((f"abrupt jumps called plateaued or slowed{at}", jump, "verdict", False))
    for name, sel, var, want_max in checks + jump_checks:
        if not sel.any():
            continue
        v = ds[var].to_numpy()[sel]
        k, m = int(np.isin(v, STOPPED).sum()), int(sel.sum())
        counts = ", ".join(f"{verdict}: {int((v == verdict).sum())}" for verdict in VERDICTS if (v == verdict).any())
        target = f"want <= {MAX_FALSE_STOP}" if want_max else f"want >= {MIN_STUDY_STOP}"
        passes = k / m <= MAX_FALSE_STOP if want_max else k / m >= MIN_STUDY_STOP
        rows.append(_share_row(name, k, m, bool(passes), f"{target}; verdicts {counts}"))
    if "curve_shape" in ds:  # none of these curves bends smoothly: "smooth" is a false shape
        shape = ds["curve_shape"].to_numpy()
        for name, sel in shape_checks:
            if not sel.any():
                continue
            v = shape[sel]
            k, m = int((v == "smooth").sum()), int(sel.sum())
            counts = ", ".join(f"{c}: {int((v == c).sum())}" for c in CURVE_SHAPES if (v == c).any())
            rows.append(_share_row(name, k, m, k / m <= MAX_FALSE_STOP, f"want <= {MAX_FALSE_STOP}; shapes {counts}"))
    return pd.DataFrame(rows)


#: the settings checked by SBC (each has ``checked`` and ``rank_draws``)
SbcSetting = PlateauSetting | TransferSetting | PassAtKSetting | SigmoidSetting
Setting = SbcSetting | TrialsSetting
#: each model's default setting (its ``checked`` property names the SBC quantities)
SETTINGS: dict[str, type[Setting]] = {
    "plateau": PlateauSetting,
    "transfer": TransferSetting,
    "pass-at-k": PassAtKSetting,
    "sigmoid": SigmoidSetting,
    "plateau-trials": TrialsSetting,
}


def make_tasks(
    model: str,
    *,
    sims: int,
    null_sims: int,
    power_sims: int,
    seed: int,
    setting: Setting,
    null_effects: Sequence[float] = (0.05, 0.2),
    power_effects: Sequence[float] = (0.05, 0.1, 0.2),
) -> list[dict[str, Any]]:
    """The task list of one calibration run."""
    if model not in MODELS:
        raise ValueError(f"calibration is implemented for {list(MODELS)}; {model!r} is not (yet)")
    if isinstance(setting, TrialsSetting):
        return make_trials_tasks(sims=sims, null_sims=null_sims, power_sims=power_sims, seed=seed, setting=setting)
    base = {"seed": seed, "setting": asdict(setting), "model": model}
    tasks = [{**base, "kind": "sbc", "sim": i} for i in range(sims)]
    if model != "plateau" or getattr(setting, "n_levels", 1) > 1:  # SBC and coverage only: the null and
        return tasks  # power checks are the single-metric plateau test's
    tasks += [{**base, "kind": "null", "sim": i, "effect": float(e)} for e in null_effects for i in range(null_sims)]
    tasks += [{**base, "kind": "power", "sim": i, "effect": float(e)} for e in power_effects for i in range(power_sims)]
    return tasks


# ------------------------------------------------------------------ execution
def execute(
    tasks: list[dict[str, Any]],
    *,
    scheduler: str | None = None,
    workers: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the simulation tasks with :func:`saturation.cluster.map_tasks` (LocalCluster by
    default, ``"tcp://host:port"`` for an existing cluster, ``"sync"`` in this process);
    returns ``(results, failures)`` with every task in exactly one of them."""

    labels = [f"{_label(t)}-{t['seed']}" for t in tasks]
    return map_tasks(run_task, tasks, labels, scheduler=scheduler, workers=workers, progress=progress)


def _label(task: dict[str, Any]) -> str:
    effect = f"-{task['effect']:g}" if "effect" in task else ""
    profile = f"-{task['profile']}" if "profile" in task else ""
    return f"{task['kind']}{profile}{effect}-{task['sim']}"


# ------------------------------------------------------------------ results
def to_dataset(
    results: list[dict[str, Any]], failures: list[dict[str, Any]], setting: SbcSetting, seconds: float
) -> xr.Dataset:
    """SBC ranks/coverage (dims sim, param) and the null/power checks (dim check) as one Dataset."""
    sbc = sorted((r for r in results if r["kind"] == "sbc"), key=lambda r: r["sim"])
    checks = sorted((r for r in results if r["kind"] != "sbc"), key=lambda r: (r["kind"], r["effect"], r["sim"]))
    model = next(name for name, cls in SETTINGS.items() if isinstance(setting, cls))
    params = list(setting.checked)
    ds = xr.Dataset(
        {
            "rank": (
                ("sim", "param"),
                np.array([[r["rank"][p] for p in params] for r in sbc], dtype=np.int64).reshape(-1, len(params)),
            ),
            "inside_hdi": (
                ("sim", "param"),
                np.array([[r["inside"][p] for p in params] for r in sbc], dtype=bool).reshape(-1, len(params)),
            ),
            "truth": (
                ("sim", "param"),
                np.array([[r["truth"][p] for p in params] for r in sbc], dtype=float).reshape(-1, len(params)),
            ),
            "converged": (("sim",), np.array([r["converged"] for r in sbc], dtype=bool)),
            **{name: (("sim",), np.array([r.get(name, np.nan) for r in sbc], dtype=float)) for name in SIM_DIAGNOSTICS},
            "check_converged": (("check",), np.array([r["converged"] for r in checks], dtype=bool)),
            "check_kind": (("check",), np.array([r["kind"] for r in checks], dtype=object)),
            "check_effect": (("check",), np.array([r["effect"] for r in checks], dtype=float)),
            "check_plateaued": (("check",), np.array([r["plateaued"] for r in checks], dtype=bool)),
            "check_p_late_in_rope": (("check",), np.array([r["p_late_in_rope"] for r in checks], dtype=float)),
        },
        coords={"sim": [r["sim"] for r in sbc], "param": params, "check": np.arange(len(checks))},
    )
    ds.attrs.update(
        {
            "model": model,
            "setting": json.dumps(asdict(setting)),
            "rank_draws": setting.rank_draws,
            "failures": json.dumps(failures),
            "n_failed": len(failures),
            "seconds": round(seconds, 1),
            "hdi_prob": S.HDI_PROB,
            S.ATTR_VERSION: __version__,
            "not_converged": int(sum(not r["converged"] for r in results)),
        }
    )
    return ds


def _beta_interval(k: int, n: int) -> tuple[float, float]:
    """Equal-tailed 94 % interval of Beta(1 + k, 1 + n - k) (a rate with a flat prior)."""
    a = (1 - S.HDI_PROB) / 2
    return float(stats.beta.ppf(a, 1 + k, 1 + n - k)), float(stats.beta.ppf(1 - a, 1 + k, 1 + n - k))


def _rank_bins(ds: xr.Dataset) -> tuple[int, int, int]:
    """(simulations, number of possible ranks, histogram bins) of an SBC Dataset."""
    n = ds.sizes["sim"]
    return n, int(ds.attrs["rank_draws"]) + 1, max(2, min(10, n // 5))


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (controls the family-wise error
    rate; NaN entries are left out of the family and stay NaN)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out[order] = adjusted
    return out


def verdict_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per check: SBC uniformity p-value and HDI coverage per parameter; the
    false-plateau rate and the power per effect size, each with its 94 % interval.

    An SBC row tests two hypotheses: uniform ranks (chi-square on binned ranks) and nominal
    coverage of the 94 % HDI (exact binomial test, two-sided; one-sided "at least 0.94" for
    the discrete change point, whose HDI may hold more). Checking a dozen quantities at
    once, some raw p-values fall below any fixed level by chance, so the row's verdict uses
    Holm-adjusted p-values over all SBC tests of the table (``p_adjusted``, the smaller of
    the row's two): a row fails when it is below ``FAMILY_ALPHA``.
    """
    rows = []
    n, n_ranks, bins = _rank_bins(ds)
    for p in ds["param"].values:
        ranks = ds["rank"].sel(param=p).to_numpy()
        counts = np.histogram(ranks, bins=bins, range=(0, n_ranks))[0]
        # the expected count per bin is proportional to the number of rank values it holds
        width = np.histogram(np.arange(n_ranks), bins=bins, range=(0, n_ranks))[0]
        p_value = float(stats.chisquare(counts, n * width / width.sum()).pvalue) if n else np.nan
        k = int(ds["inside_hdi"].sel(param=p).sum())
        cover = k / n if n else np.nan
        mc = float(np.sqrt(S.HDI_PROB * (1 - S.HDI_PROB) / n)) if n else np.nan
        # a discrete posterior's HDI holds at least 94 %: the change point may over-cover
        discrete = p.startswith("changepoint") and p != S.CHANGEPOINT_SPREAD
        cover_p = (
            float(stats.binomtest(k, n, S.HDI_PROB, alternative="less" if discrete else "two-sided").pvalue)
            if n
            else np.nan
        )
        expected = "at least 0.94" if discrete else "0.94"
        rows.append(
            {
                "check": f"SBC {p}",
                "n": n,
                "value": cover,
                "interval_low": cover - 2 * mc,
                "interval_high": cover + 2 * mc,
                "p_value": p_value,
                "coverage_p": cover_p,
                "meaning": f"coverage of the 94 % HDI (expected {expected}, 2 MC SE {2 * mc:.3f}); "
                "p: rank uniformity; coverage p: exact binomial test",
            }
        )
    if rows:
        raw = np.array([[r["p_value"], r["coverage_p"]] for r in rows])
        adjusted = holm(raw.ravel()).reshape(raw.shape)
        for r, adj in zip(rows, adjusted, strict=True):
            p_adj = float(np.nanmin(adj)) if not np.isnan(adj).all() else np.nan
            r.update(p_adjusted=p_adj, passes=bool(p_adj >= FAMILY_ALPHA))
    kinds = ds["check_kind"].to_numpy()
    for kind in ("null", "power"):
        for effect in sorted(set(ds["check_effect"].to_numpy()[kinds == kind])):
            sel = (kinds == kind) & (ds["check_effect"].to_numpy() == effect)
            k, m = int(ds["check_plateaued"].to_numpy()[sel].sum()), int(sel.sum())
            lo, hi = _beta_interval(k, m)
            if kind == "null":
                rows.append(
                    {
                        "check": f"false-plateau rate, steady rise of {effect:g}",
                        "n": m,
                        "value": k / m,
                        "interval_low": lo,
                        "interval_high": hi,
                        "p_value": np.nan,
                        "coverage_p": np.nan,
                        "p_adjusted": np.nan,
                        "passes": bool(hi <= 0.10),
                        "meaning": "share of steadily rising metrics called plateaued (want <= 0.10)",
                    }
                )
            else:
                rows.append(
                    {
                        "check": f"power, plateau after a rise of {effect:g}",
                        "n": m,
                        "value": k / m,
                        "interval_low": lo,
                        "interval_high": hi,
                        "p_value": np.nan,
                        "coverage_p": np.nan,
                        "p_adjusted": np.nan,
                        "passes": None,
                        "meaning": "share of true plateaus called plateaued (reported)",
                    }
                )
    return pd.DataFrame(rows)


def plot_ranks(ds: xr.Dataset) -> Any:
    """SBC rank histograms per parameter with the 94 % band of a uniform histogram."""
    import matplotlib.pyplot as plt

    params = list(ds["param"].values)
    n, n_ranks, bins = _rank_bins(ds)
    with style():
        ncols = min(len(params), 5)
        nrows = -(-len(params) // ncols)
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(PAGE, 1.6 * nrows), sharey=True, layout="constrained", squeeze=False
        )
        for ax in axes.ravel()[len(params) :]:
            ax.set_visible(False)
        lo, hi = stats.binom.ppf([0.03, 0.97], n, 1 / bins)
        for i, (ax, p) in enumerate(zip(axes.ravel(), params, strict=False)):
            ax.axhspan(lo, hi, color="0.5", alpha=BAND_ALPHA, lw=0)
            ax.hist(
                ds["rank"].sel(param=p).to_numpy(), bins=bins, range=(0, n_ranks), color=colour(i), edgecolor="white"
            )
            title = p.replace("_", " ")
            ax.set_title(title, fontsize="small" if len(title) > 18 else None)
            ax.set_xlabel("rank")
        for row in axes:
            row[0].set_ylabel(f"simulations (of {n})")
    return fig


@dataclass
class Calibration:
    """Result of :func:`calibrate`."""

    dataset: xr.Dataset
    table: pd.DataFrame
    failures: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def calibrate(
    model: str = "plateau",
    *,
    sims: int = 200,
    null_sims: int = 100,
    power_sims: int = 50,
    seed: int = 0,
    scheduler: str | None = None,
    workers: int = 2,
    setting: Setting | None = None,
    progress: Callable[[int, int], None] | None = None,
    **setting_overrides: Any,
) -> Calibration:
    """Run SBC, coverage, false-plateau and power checks of ``model`` (module docstring).

    Parameters
    ----------
    model : str, default "plateau"
        The model to calibrate (``schema.CALIBRATION_MODELS``).
    sims : int, default 200
        Simulation-based-calibration simulations (prior draws, fitted).
    null_sims : int, default 100
        Simulations without the effect (false-alarm rate).
    power_sims : int, default 50
        Simulations with the effect (power).
    seed : int, default 0
        Seeds every simulation: same seed, same tasks.
    scheduler : str, optional
        Dask scheduler address, ``"sync"`` to run in process; default a LocalCluster.
    workers : int, default 2
        LocalCluster worker processes.
    setting : Setting, optional
        The simulation design (default: the model's own).
    progress : callable, optional
        Called with (done, total) as tasks finish.
    **setting_overrides
        Fields of ``setting`` to replace.

    Returns
    -------
    Calibration
        The per-simulation dataset, the verdict table, the failed tasks and the seconds taken.
    """
    if model not in MODELS:
        raise ValueError(f"calibration is implemented for {list(MODELS)}; {model!r} is not (yet)")
    setting = setting or SETTINGS[model]()
    setting = replace(setting, **setting_overrides)
    tasks = make_tasks(model, sims=sims, null_sims=null_sims, power_sims=power_sims, seed=seed, setting=setting)
    start = time.perf_counter()
    results, failures = execute(tasks, scheduler=scheduler, workers=workers, progress=progress)
    seconds = time.perf_counter() - start
    if isinstance(setting, TrialsSetting):
        ds = trials_dataset(results, failures, setting, seconds)
        return Calibration(ds, trials_table(ds), failures, seconds)
    ds = to_dataset(results, failures, setting, seconds)
    return Calibration(ds, verdict_table(ds), failures, seconds)


def write_outputs(cal: Calibration, out: str | Any) -> list[Any]:
    """Write ``calibration.nc``, ``verdict.{csv,md,tex}``, ``ranks.{pdf,png}`` and
    ``calibration.json`` into ``out``; return the paths."""

    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "calibration.nc"]
    write_netcdf(cal.dataset, paths[0])
    paths += write_tables(cal.table, out / "verdict", f"Calibration of the {cal.dataset.attrs['model']} model")
    if cal.dataset.sizes.get("sim", 0):
        fig = plot_ranks(cal.dataset)
        paths += save_figure(fig, out / "ranks")
        plt.close(fig)
    summary = {
        "model": cal.dataset.attrs["model"],
        "sims": int(cal.dataset.sizes.get("sim", 0)),
        "checks": int(cal.dataset.sizes.get("check", cal.dataset.sizes.get("fit", 0))),
        "failed_tasks": cal.failures,
        "seconds": round(cal.seconds, 1),
        "setting": json.loads(cal.dataset.attrs["setting"]),
        "verdict": json.loads(cal.table.to_json(orient="records")),
    }
    write_atomic(out / "calibration.json", json.dumps(summary, indent=1) + "\n")
    paths.append(out / "calibration.json")
    return paths
