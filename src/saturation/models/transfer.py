"""Hierarchical multi-arm transfer model: does an arm that started elsewhere beat the reference?

Model (arm :math:`a`, step :math:`t`, task :math:`i`; groups of rollouts of one task in
one step of one arm):

.. math::

    k^{ungraded}_{ati} &\\sim \\mathrm{Binomial}(n_{ati}, u_{ati}), \\quad
        \\operatorname{logit} u_{ati} = \\alpha^u_a + f^u_a(t) + \\theta^u_i \\\\
    y_{atij} \\mid \\text{graded} &\\sim \\mathcal N\\big(r_{ati},\\; \\sigma_a^2\\big),
        \\quad r_{ati} = \\operatorname{expit}(\\alpha^r_a + f^r_a(t)) + \\theta^r_i

with :math:`f_a` piecewise linear between knots (every ``knot_every`` steps) whose values
follow a Gaussian random walk (:math:`f_a(\\text{first knot}) = 0`, increments
:math:`N(0, \\sigma^f_a)`; sampled as the knot values :math:`\\alpha_a + f_a(\\text{knot})`
themselves) and task effects :math:`\\theta^u_i \\sim N(0, \\tau_u^2)` (logit scale),
:math:`\\theta^r_i \\sim N(0, \\tau_r^2)` (reward scale), shared by every arm (paired design).
The graded-reward likelihood is per trial, Gaussian (a quasi-likelihood for the mean of
rewards in [0, 1]; a Beta-type variance r(1 - r)/(1 + phi) was tried and made the posterior
stiff near 0 and 1), evaluated exactly from each group's (count, sum, sum of squares). Its
task effects sit on the reward scale so that the reward part is conditionally Gaussian and
they are integrated out exactly (:mod:`saturation.models.marginal`); the ungraded part's are
integrated by adaptive quadrature. ``task_effects="sampled"`` samples every effect instead
(the same model; the slow cross-check).

Which tasks a step drew is the main source of step-to-step variation in RL batches; the
task effects absorb it, so no separate per-step noise term is fitted (one was tried: it
competed with the random walk and tripled the sampling cost).

Population curves average over tasks: :math:`\\bar u_{at} =
E[\\operatorname{expit}(\\alpha^u_a + f^u_a(t) + \\tau_u Z)]` (Gauss-Hermite),
:math:`\\bar r_{at} = \\operatorname{expit}(\\alpha^r_a + f^r_a(t))` (the reward-scale effects
average to zero), and the all-rollout reward :math:`(1 - \\bar u_{at})\\,\\bar r_{at}` (the two
task effects are independent).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import curves
from saturation import schema as S
from saturation._lazy import InferenceDataField, held_idata, lazy
from saturation.aggregate import phase_summary, select_phase
from saturation.configs import SamplerConfig, TransferConfig, TransferPriors, transfer_sampler
from saturation.limits import config_or_keywords
from saturation.models.persist import FigureView, FitObject, TableView
from saturation.models.sampling import (
    available_samplers,
    diagnostics,
    hdi_1d,
    interval,
    sample_compiled_parts,
    sample_model,
    stamp_attrs,
    warn_if_not_converged,
)
from saturation.summary import Interval, convergence_words, format_interval, interval_cell, json_safe, short_repr

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm
    import pytensor.tensor as pt
else:  # imported on first use (ARCHITECTURE.md): the spec and the CLI read this module's configs
    az, pm, pt = map(lazy, ("arviz", "pymc", "pytensor.tensor"))

#: posterior probability of a positive initial gap for "starts ahead" (1 - it: "behind")
LEAD_PROB = 0.95
#: the three per-step quantities compared between arms
QUANTITIES = (S.ALL_ROLLOUT, S.GRADED_ONLY, S.UNGRADED_RATE)
PARTS = ("ungraded", "reward")
#: sampler for ``task_effects="sampled"`` (``schema.TRANSFER_SAMPLER``): with the curves
#: parametrised by their knot values (nearly independent a posteriori) a diagonal mass matrix
#: suffices; measured on the embedded replica (4 chains x 1000 + 1000): min bulk ESS 1308, 0
#: divergences, 70 s of sampling, against 795 and 215 s for the earlier intercept + increments
#: form with nutpie's low-rank adaptation
SAMPLED_SAMPLER = transfer_sampler("sampled")
#: sampler for ``task_effects="integrated"`` (the default): about 50 parameters. On data
#: without task effects (the flat arm's random walk near its funnel) 1 of 12 fits had a
#: divergence at target_accept 0.9, 2 of 12 at 0.85, at the same cost (docs/transfer.md);
#: 4 x (500 + 800) keeps R-hat clear of 1.01 (with 600 draws it reached 1.0098 on one scenario)
INTEGRATED_SAMPLER = transfer_sampler("integrated")


def default_sampler(task_effects: str) -> SamplerConfig:
    """The sampler settings a fit with these ``task_effects`` uses unless told otherwise
    (shared by :func:`fit_transfer`, the CLI and the report)."""
    return INTEGRATED_SAMPLER if task_effects == "integrated" else SAMPLED_SAMPLER


#: R-hat bound for the thousands of per-task nuisance effects (reported separately). With
#: 4,116 effects the largest of their R-hats sat at 1.008-1.013 (bulk ESS >= 5,000 each)
#: while every structural parameter and reported curve was <= 1.005 (embedded replica); the
#: structural parameters and the reported curves keep the 1.01 bound.
TASK_EFFECT_RHAT_MAX = 1.02
#: shape of the Gamma prior of the random-walk sds (mean ``TransferPriors.rw_sd``): 8 keeps
#: them away from 0 (P(sd < rw_sd / 2.5) ~ 1 %), where a flat arm's centred knot values would
#: otherwise form a funnel: with integrated task effects shape 4 left 2-10 divergences per fit
#: on the crossing scenario (all at the flat arm's smallest sds, also at target_accept 0.95),
#: shape 8 none (docs/transfer.md)
RW_SD_SHAPE = 8.0
#: walk="auto" samples the knots centred when every arm has this many trials per knot
CENTRED_TRIALS_PER_KNOT = 400


# ====================================================================== data
@dataclass
class TransferData:
    """(arm, step, task) groups of a multi-arm trial Dataset plus empirical per-step values."""

    arms: list[str]
    steps: np.ndarray
    tasks: np.ndarray
    arm_idx: np.ndarray
    step_idx: np.ndarray
    task_idx: np.ndarray
    n: np.ndarray
    n_ungraded: np.ndarray
    n_graded: np.ndarray
    r_sum: np.ndarray
    r_sumsq: np.ndarray
    observed: np.ndarray  # (arm, step): the arm has trials at that step
    empirical: xr.Dataset  # per (arm, step): ungraded_rate, graded_only, all_rollout, n_trials
    summary: dict[str, Any] = field(default_factory=dict)


#: fewest steps per arm that a transfer fit accepts
MIN_STEPS = 3


def _check_degenerate(frame: pd.DataFrame, arms: list[str]) -> None:
    """A clear message instead of a fit of nothing: fewer than two arms, an arm without
    graded trials or with fewer than :data:`MIN_STEPS` steps, a constant reward."""
    if len(arms) < 2:
        raise ValueError(f"a transfer analysis compares arms; the data has {len(arms)} ({arms})")
    graded = frame[frame["graded"]]
    for arm in arms:
        rows = graded[graded["arm"] == arm]
        if rows.empty:
            raise ValueError(f"arm {arm!r} has no graded trials: nothing to compare")
        n_steps = rows["step"].nunique()
        if n_steps < MIN_STEPS:
            raise ValueError(
                f"arm {arm!r} has graded trials at only {n_steps} step(s); a learning curve needs at least {MIN_STEPS}"
            )
    if graded["reward"].nunique() == 1 and not frame["graded"].eq(False).any():
        raise ValueError(
            f"the reward is {graded['reward'].iat[0]:g} in every trial of every arm: there is no gap to estimate"
        )


def transfer_data(ds: xr.Dataset, *, arms: list[str] | None = None) -> TransferData:
    """Group a trial Dataset with an ``arm`` coordinate by (arm, step, instance_id).

    Parameters
    ----------
    ds : xarray.Dataset
        Graded trials with an ``arm`` coordinate (every trial is counted in one group).
    arms : list of str, optional
        The arms to compare (default: every arm present).

    Returns
    -------
    TransferData
        Per group its arm, step and task index, rollout and ungraded counts and the graded
        rewards' count, sum and sum of squares; the empirical per-(arm, step) curves; a
        data summary. Degenerate designs (one arm, too few steps, constant rewards) raise
        ``ValueError``.
    """
    ds = select_phase(ds)
    if S.ARM not in ds.coords:
        raise KeyError("transfer analysis needs an 'arm' coordinate on the trials")
    arm_all = ds[S.ARM].to_numpy().astype(str)
    present = sorted(map(str, set(arm_all)))  # plain str, not np.str_ (printed in messages and the CLI)
    arms = list(arms) if arms else present
    unknown = sorted(set(arms) - set(present))
    if unknown:
        raise KeyError(f"unknown arm(s) {unknown}; the data has {present}")
    keep = np.isin(arm_all, arms)
    frame = pd.DataFrame(
        {
            "arm": arm_all[keep],
            "step": ds[S.STEP].to_numpy()[keep],
            "task": ds[S.INSTANCE_ID].to_numpy()[keep],
            "graded": ds[S.GRADED].to_numpy()[keep].astype(bool),
            "reward": ds[S.REWARD].to_numpy()[keep].astype(float),
        }
    )
    if frame.loc[frame["graded"], "reward"].isna().any():
        raise ValueError("graded trials with a missing reward; validate the trials first")
    _check_degenerate(frame, arms)
    frame["r"] = np.where(frame["graded"], frame["reward"], 0.0)
    frame["r2"] = frame["r"] ** 2
    frame["ungraded"] = ~frame["graded"]
    g = (
        frame.groupby(["arm", "step", "task"], sort=True)
        .agg(
            n=("graded", "size"),
            n_graded=("graded", "sum"),
            n_ungraded=("ungraded", "sum"),
            r_sum=("r", "sum"),
            r_sumsq=("r2", "sum"),
        )
        .reset_index()
    )
    steps = np.sort(frame["step"].unique())
    tasks = np.sort(frame["task"].unique())
    arm_pos = {a: i for i, a in enumerate(arms)}
    # per (arm, step) empirical values: all-rollout mean counts ungraded trials as logged (0)
    frame["logged"] = frame["reward"].fillna(0.0)  # graded rewards are never missing (checked above)
    per = frame.groupby(["arm", "step"]).agg(
        n_trials=("graded", "size"), n_graded=("graded", "sum"), all_rollout=("logged", "mean")
    )
    graded_mean = frame[frame["graded"]].groupby(["arm", "step"])["reward"].mean()
    emp = {name: np.full((len(arms), len(steps)), np.nan) for name in ("n_trials", *QUANTITIES)}
    step_pos = {s: j for j, s in enumerate(steps)}
    for (a, s), row in per.iterrows():
        i, j = arm_pos[a], step_pos[s]
        emp["n_trials"][i, j] = row["n_trials"]
        emp[S.UNGRADED_RATE][i, j] = 1 - row["n_graded"] / row["n_trials"]
        emp[S.ALL_ROLLOUT][i, j] = row[S.ALL_ROLLOUT]
    for (a, s), v in graded_mean.items():
        emp[S.GRADED_ONLY][arm_pos[a], step_pos[s]] = v
    empirical = xr.Dataset({k: ((S.ARM, S.STEP), v) for k, v in emp.items()}, coords={S.ARM: arms, S.STEP: steps})
    summary = {
        "n_trials": len(frame),
        "n_graded": int(frame["graded"].sum()),
        "n_groups": len(g),
        "n_tasks": len(tasks),
        "steps": [int(steps[0]), int(steps[-1])],
        "arms": arms,
        "trials_per_arm": {a: int((frame["arm"] == a).sum()) for a in arms},
        "sources": json.loads(ds.attrs.get(S.ATTR_SOURCES, "[]")),
        "synthetic": ds.attrs.get(S.ATTR_SYNTHETIC, ""),
        **phase_summary(ds),
    }
    return TransferData(
        arms=arms,
        steps=steps.astype(float),
        tasks=tasks,
        arm_idx=g["arm"].map(arm_pos).to_numpy(),
        step_idx=np.searchsorted(steps, g["step"].to_numpy()),
        task_idx=np.searchsorted(tasks, g["task"].to_numpy()),
        n=g["n"].to_numpy(float),
        n_ungraded=g["n_ungraded"].to_numpy(float),
        n_graded=g["n_graded"].to_numpy(float),
        r_sum=g["r_sum"].to_numpy(float),
        r_sumsq=g["r_sumsq"].to_numpy(float),
        observed=np.isfinite(emp["n_trials"]),
        empirical=empirical,
        summary=summary,
    )


def knot_basis(steps: np.ndarray, knot_every: float) -> tuple[np.ndarray, np.ndarray]:
    """Knots every ``knot_every`` steps from the first step (the last knot at or after the
    last step) and the (steps x knots) matrix of linear-interpolation weights."""
    first, last = float(steps[0]), float(steps[-1])
    n_knots = max(int(np.ceil((last - first) / knot_every)), 1) + 1
    knots = first + knot_every * np.arange(n_knots)
    basis = np.stack(
        [curves.piecewise_linear(steps, tuple(zip(knots, np.eye(n_knots)[k], strict=True))) for k in range(n_knots)],
        axis=1,
    )
    return knots, basis


# ====================================================================== config + model
def _start_logit(values: np.ndarray) -> float:
    v = values[np.isfinite(values)]
    return float(curves.logit(np.clip(v[0] if len(v) else 0.5, 0.02, 0.98)))


def resolve_walk(data: TransferData, config: TransferConfig) -> str:
    """The random-walk parametrisation ``config.walk`` names; "auto": centred when every arm
    has at least ``CENTRED_TRIALS_PER_KNOT`` trials per knot, else non-centred.

    Centred knots suit data that pin each knot down (the posterior is then close to
    independent across knots); with little data per knot the posterior of the knots follows
    their prior, whose scale is the random-walk sd, and the centred form has a funnel
    (divergences at small sds) that the non-centred form does not. Measured here: 192
    trials per knot (the calibration design) - centred 5-26 divergences in 6 of 6 fits,
    non-centred none; 660 (the recovery tests) and 1,800 (the embedded replica) - centred
    converges without divergences, non-centred reached R-hat 1.016 and bulk ESS 212 on the
    replica.
    """
    if config.walk != "auto":
        return config.walk
    n_knots = len(knot_basis(data.steps, config.knot_every)[0])
    per_knot = np.bincount(data.arm_idx, weights=data.n, minlength=len(data.arms)) / n_knots
    return "centred" if per_knot.min() >= CENTRED_TRIALS_PER_KNOT else "non-centred"


def prior_draw(data: TransferData, config: TransferConfig, seed: int) -> dict[str, np.ndarray]:
    """One draw of the transfer model's parameters from its own graph
    (:func:`build_transfer_model` for ``data``'s design: the priors of ``config.priors`` as
    the fit reads them, the random-walk form the fit would use): what its calibration draws
    from, so a prior changed in the model is changed there too.

    Parameters
    ----------
    data : TransferData
        The design (arms, steps, tasks; the values are not read unless a prior is centred on
        the data).
    config : TransferConfig
        The fit's settings.
    seed : int
        Seeds the draw.

    Returns
    -------
    dict
        Per part (``ungraded``, ``reward``): ``<part>_knot`` (arms x knots, logit scale),
        ``<part>_rw_sd`` (per arm) and ``<part>_task_sd``; ``reward_sd`` (per arm). Arms in
        ``data.arms`` order.
    """
    model, _ = build_transfer_model(data, config)
    names = [f"{part}_{v}" for part in PARTS for v in ("knot", "rw_sd", "task_sd")] + ["reward_sd"]
    draws = pm.draw([model[n] for n in names], random_seed=np.random.default_rng(seed))
    return {n: np.asarray(v, dtype=float) for n, v in zip(names, draws, strict=True)}


def transfer_values(data: TransferData, config: TransferConfig) -> dict[str, np.ndarray]:
    """The values of the model's data (the ``pm.Data`` of :func:`build_transfer_model`; with
    integrated task effects also the data block of :mod:`saturation.models.transfer_kernel`)."""
    # deferred: numba, imported only to fit
    from saturation.models.marginal import binomial_patterns, pack_marginal_data, task_segments

    config.validate(data)
    _, basis = knot_basis(data.steps, config.knot_every)
    ref = data.arms.index(config.reference)
    emp = data.empirical
    integrated = config.task_effects == "integrated"
    # integrated task effects need the groups ordered by task (each task one contiguous segment)
    if integrated:
        order, task_start, task_end = task_segments(data.task_idx, len(data.tasks))
    else:
        order = np.arange(len(data.n))
    cell = data.arm_idx * len(data.steps) + data.step_idx
    values = {
        "basis": basis,
        "cell": cell[order],
        "task_idx": data.task_idx[order],
        "n": data.n[order],
        "n_ungraded": data.n_ungraded[order],
        # groups without a graded trial contribute 0 to the reward term (g_n = 0): every fit of
        # the same (arms, steps, tasks, groups) shape reuses one compiled model
        "g_arm": data.arm_idx[order],
        "g_n": data.n_graded[order],
        "g_sum": data.r_sum[order],
        "g_sumsq": data.r_sumsq[order],
        "arm_graded": np.bincount(data.arm_idx, weights=data.n_graded, minlength=len(data.arms)),
        "prior_mu": (
            np.array(config.priors.start_mu, dtype=float)
            if config.priors.start_mu is not None
            else np.array(
                [_start_logit(emp[S.UNGRADED_RATE].to_numpy()[ref]), _start_logit(emp[S.GRADED_ONLY].to_numpy()[ref])]
            )
        ),
    }
    if integrated:
        # the kernel's arrays packed into three (pack_marginal_data): nutpie passes every shared
        # array on every evaluation, and 13 of them cost ~0.5 ms per evaluation
        kernel = {**values, "task_start": task_start, "task_end": task_end}
        kernel.update(binomial_patterns(values["cell"], values["n_ungraded"], values["n"], task_start, task_end))
        values = {"basis": basis, "prior_mu": values["prior_mu"], **pack_marginal_data(kernel)}
    return values


def build_transfer_model(data: TransferData, config: TransferConfig) -> tuple[pm.Model, dict[str, np.ndarray]]:
    """Build the PyMC model; returns (model, pm.Data values)."""
    # deferred: the marginal's PyTensor Op is imported only to build the model
    from saturation.models.marginal_op import log_transfer_marginal

    values = transfer_values(data, config)
    knots, _ = knot_basis(data.steps, config.knot_every)
    walk = resolve_walk(data, config)
    integrated = config.task_effects == "integrated"
    pri = config.priors
    coords = {
        S.ARM: data.arms,
        S.STEP: data.steps,
        "task": np.arange(len(data.tasks)),
        "knot": knots,
        "increment": knots[1:],
        "part": list(PARTS),
    }
    with pm.Model(coords=coords) as model:
        d = {name: pm.Data(name, v) for name, v in values.items()}
        curves_: dict[str, Any] = {}
        task_sds: dict[str, Any] = {}
        for p_i, part in enumerate(PARTS):
            rw_sd = pm.Gamma(f"{part}_rw_sd", alpha=RW_SD_SHAPE, beta=RW_SD_SHAPE / pri.rw_sd, dims=S.ARM)
            # centred (data-rich): sampled on the knot values themselves; hundreds of trials
            # per knot interval identify each knot value, so the posterior is close to
            # independent across knots and a diagonal mass matrix suffices (an intercept +
            # cumulated increments correlated every knot with the intercept: about 3x
            # slower, low-rank adaptation needed). Non-centred (little data per knot, see
            # resolve_walk): standardised first knot and increments.
            if walk == "centred":
                knot_vals = pm.GaussianRandomWalk(
                    f"{part}_knot",
                    mu=0.0,
                    sigma=rw_sd,
                    init_dist=pm.Normal.dist(d["prior_mu"][p_i], pri.intercept_sd, shape=len(data.arms)),
                    dims=(S.ARM, "knot"),
                )
            else:
                z = pm.Normal(f"{part}_knot_z", 0.0, 1.0, dims=(S.ARM, "knot"))
                first = (d["prior_mu"][p_i] + pri.intercept_sd * z[:, 0])[:, None]
                knot_vals = pm.Deterministic(
                    f"{part}_knot",
                    pt.concatenate([first, first + pt.cumsum(rw_sd[:, None] * z[:, 1:], axis=1)], axis=1),
                    dims=(S.ARM, "knot"),
                )
            # intercept, increments and curve are recorded after sampling (derived_draws): as
            # Deterministics each one was numba code nutpie compiled for every new model
            curve = pt.dot(knot_vals, d["basis"].T)
            task_sds[part] = pm.HalfNormal(f"{part}_task_sd", pri.task_sd if part == "ungraded" else pri.reward_task_sd)
            curves_[part] = curve.flatten()  # one (arm, step) cell index: 1-D gathers are fast
        reward_sd = pm.HalfNormal("reward_sd", pri.reward_sd, dims=S.ARM)
        if integrated:
            pm.Potential(
                "likelihood",
                log_transfer_marginal(
                    curves_["ungraded"],
                    curves_["reward"],
                    task_sds["ungraded"],
                    task_sds["reward"],
                    reward_sd**-2,
                    d["m_float"],
                    d["m_int"],
                    d["m_layout"],
                ),
            )
            return model, values
        prec = (reward_sd**-2)[d["g_arm"]]
        mu = pm.math.sigmoid(curves_["reward"][d["cell"]])  # per group, without its task's effect
        # sampled: zero-sum effects (the mean task effect would otherwise trade off against the
        # intercepts), non-centred
        effect = {
            part: task_sds[part] * pm.ZeroSumNormal(f"{part}_task_z", sigma=1.0, dims="task")[d["task_idx"]]
            for part in PARTS
        }
        # binomial log-likelihood without its constant coefficient C(n, k): three lgamma per
        # group per gradient were half of the cost of every evaluation
        x = curves_["ungraded"][d["cell"]] + effect["ungraded"]
        k = d["n_ungraded"]
        # k log sigmoid(x) + (n - k) log sigmoid(-x) = k x - n softplus(x): one softplus per group
        pm.Potential("ungraded", (k * x - d["n"] * pt.softplus(x)).sum())
        r = mu + effect["reward"]
        sq = d["g_sumsq"] - 2 * r * d["g_sum"] + d["g_n"] * r * r
        # sum_groups g_n log(2 pi sd^2) = sum_arms (graded trials of the arm) log(2 pi sd_arm^2)
        pm.Potential(
            "graded_reward", -0.5 * (d["arm_graded"] * pt.log(2 * np.pi * reward_sd**2)).sum() - 0.5 * (sq * prec).sum()
        )
    return model, values


# ====================================================================== fit
@dataclass
class TransferFit(FitObject):
    """Result of :func:`fit_transfer`: InferenceData plus tidy estimands and diagnostics.

    Parameters
    ----------
    idata : arviz.InferenceData
        Posterior draws (knot values, sds, population curves per arm and step) with the
        config, data summary and diagnostics in its attrs.
    config : TransferConfig
        The analysis settings the fit ran with.
    data : TransferData
        The grouped inputs.
    estimands : dict
        Per arm against the reference: initial gaps, crossover step, last-step gaps,
        by-step curves; the task-effect sds.
    diagnostics : dict
        R-hat, ESS, divergences, ``converged``.
    timings : dict
        Seconds spent compiling and sampling, and the sampler used.
    """

    idata: az.InferenceData
    config: TransferConfig
    data: TransferData
    estimands: dict[str, Any]
    diagnostics: dict[str, Any]
    timings: dict[str, Any]

    def summary(self) -> pd.DataFrame:
        """One row per (arm, estimand, quantity) against the reference, 94 % HDI."""
        rows = []
        for arm, est in self.estimands["initial"].items():
            for q in QUANTITIES:
                e = est[f"delta_{q}"]
                rows.append(
                    {
                        "arm": arm,
                        "estimand": f"initial_delta_{q}",
                        "mean": e["mean"],
                        "sd": e["sd"],
                        "hdi_low": e["hdi"][0],
                        "hdi_high": e["hdi"][1],
                    }
                )
            rows.append(
                {
                    "arm": arm,
                    "estimand": "p_initial_all_rollout_positive",
                    "mean": est["p_positive"],
                    "sd": np.nan,
                    "hdi_low": np.nan,
                    "hdi_high": np.nan,
                }
            )
            c = self.estimands["crossover_step"][arm]
            rows.append(
                {
                    "arm": arm,
                    "estimand": "crossover_step",
                    "mean": c["mean"],
                    "sd": c["sd"],
                    "hdi_low": c["hdi"][0],
                    "hdi_high": c["hdi"][1],
                }
            )
            rows.append(
                {
                    "arm": arm,
                    "estimand": "p_no_crossover",
                    "mean": c["p_no_crossover"],
                    "sd": np.nan,
                    "hdi_low": np.nan,
                    "hdi_high": np.nan,
                }
            )
            for q in QUANTITIES:
                e = self.estimands["last_step"][arm][f"delta_{q}"]
                rows.append(
                    {
                        "arm": arm,
                        "estimand": f"last_step_delta_{q}",
                        "mean": e["mean"],
                        "sd": e["sd"],
                        "hdi_low": e["hdi"][0],
                        "hdi_high": e["hdi"][1],
                    }
                )
        table = pd.DataFrame(rows)
        table.attrs["converged"] = self.diagnostics["converged"]
        table.attrs["hdi_prob"] = S.HDI_PROB
        table.attrs["reference"] = self.config.reference
        return table

    def crossover(self, arm: str) -> Interval | None:
        """The step from which the reference stays ahead of ``arm`` (posterior mean and 94 %
        HDI), None when no draw crossed.

        Parameters
        ----------
        arm : str
            An arm other than the reference.

        Returns
        -------
        Interval or None
            The crossover step.
        """
        cross = self.estimands["crossover_step"][arm]
        return interval_cell(cross) if cross.get("hdi") else None

    def decisions(self) -> dict[str, dict[str, Any]]:
        """The decision rule of the report and the CLI, per arm against the reference.

        Returns
        -------
        dict
            ``{arm: {"start", "end", "crossover"}}``: ``start`` is "ahead" when P(all-rollout
            gap over the first steps > 0) >= :data:`LEAD_PROB`, "behind" when <= 1 - LEAD_PROB,
            else "level"; ``end`` the same rule on the gap at the last common step;
            ``crossover`` the posterior mean step from which the reference stays ahead, named
            only when P(no crossover) < 0.5 (else None).
        """

        def side(p: float) -> str:
            return "ahead" if p >= LEAD_PROB else ("behind" if p <= 1 - LEAD_PROB else "level")

        out = {}
        for arm in [a for a in self.data.arms if a != self.config.reference]:
            cross = self.estimands["crossover_step"][arm]
            crossed = cross["mean"] is not None and cross["p_no_crossover"] < 0.5
            out[arm] = {
                "start": side(self.estimands["initial"][arm]["p_positive"]),
                "end": side(self.estimands["last_step"][arm]["p_positive"]),
                "crossover": float(cross["mean"]) if crossed else None,
            }
        return out

    def __repr__(self) -> str:
        d = self.data
        head = (
            f"TransferFit({len(d.arms)} arms x {len(getattr(d, 'steps', ()))} steps, "
            f"{len(getattr(d, 'tasks', ()))} tasks, reference "
            f"{self.config.reference}; {convergence_words(self.diagnostics)})"
        )
        lines = [
            f"{arm}: starts {v['start']}, ends {v['end']}"
            + (f", crossover at step {v['crossover']:.0f}" if v["crossover"] is not None else "")
            for arm, v in self.decisions().items()
        ]
        return short_repr(head, lines)

    def frame(self) -> pd.DataFrame:
        """Per (arm, step, quantity): the empirical value, the posterior mean and 94 % band and
        the gap to the reference (:func:`transfer_frame`: the data behind the figure)."""
        return transfer_frame(self)

    def verdicts(self) -> dict[str, str]:
        """One sentence per arm against the reference, built from :meth:`decisions`."""

        ref, k = self.config.reference, self.config.first_steps
        start = {"ahead": "starts ahead of", "behind": "starts behind", "level": "starts level with"}
        out = {}
        for arm, d in self.decisions().items():
            ini, cross = self.estimands["initial"][arm], self.estimands["crossover_step"][arm]
            last = self.estimands["last_step"][arm]
            if d["crossover"] is None:  # the crossover's interval may not exist (no draw crossed)
                when = f"no crossover (P = {cross['p_no_crossover']:.2f})"
            else:
                at = f"step {cross['mean']:.0f} [{cross['hdi'][0]:.0f}, {cross['hdi'][1]:.0f}]"
                when = f"{ref} overtakes it at {at}" if d["start"] == "ahead" else f"{ref} leads from {at} on"
            out[arm] = (
                f"{arm} {start[d['start']]} {ref}: all-rollout gap over the first {k} steps "
                f"{format_interval(ini[f'delta_{S.ALL_ROLLOUT}'])} (P > 0 = {ini['p_positive']:.2f}); {when}; "
                f"{d['end']} at step {last['step']}: gap {format_interval(last[f'delta_{S.ALL_ROLLOUT}'])} "
                f"(P > 0 = {last['p_positive']:.2f})."
            )
        return out

    def table(self) -> pd.DataFrame:
        """One row per arm against the reference: the initial gaps (all-rollout, graded-only,
        ungraded rate), P(initial gap > 0), the crossover step and P(no crossover), the gap at
        the last step."""
        est, rows = self.estimands, []
        for arm in est["initial"]:
            ini, cross, last = est["initial"][arm], est["crossover_step"][arm], est["last_step"][arm]
            rows.append(
                {
                    "arm": arm,
                    f"initial gap (first {self.config.first_steps} steps), all-rollout": interval_cell(
                        ini["delta_all_rollout"]
                    ),
                    "P(initial gap > 0)": ini["p_positive"],
                    "initial gap, graded-only": interval_cell(ini["delta_graded_only"]),
                    "initial gap, ungraded rate": interval_cell(ini["delta_ungraded_rate"]),
                    "crossover step": interval_cell(cross),
                    "P(no crossover)": cross["p_no_crossover"],
                    f"gap at step {last['step']}, all-rollout": interval_cell(last["delta_all_rollout"]),
                }
            )
        return pd.DataFrame(rows)

    def tables(self) -> dict[str, TableView]:
        """``transfer``: :meth:`table`."""
        return {"transfer": TableView(self.table(), f"Gaps to the reference arm {self.config.reference}")}

    def figures(self) -> dict[str, FigureView]:
        """``transfer``: the arms' curves and their gaps to the reference."""
        from saturation import plots

        summ, ref = self.data.summary, self.config.reference
        return {
            "transfer": FigureView(
                lambda: plots.plot_transfer(self),
                f"Top: per-arm population curves ({', '.join(map(str, self.data.arms))}) of the all-rollout reward, "
                f"the graded-only reward and the ungraded rate: posterior mean, {S.HDI_LABEL} band, and the empirical "
                f"per-step values (points). Bottom: each arm's gap to the reference arm {ref} with its "
                f"{S.HDI_LABEL}; the shaded span on the all-rollout gap is the crossover step's {S.HDI_LABEL}. "
                f"Data: {summ.get('n_trials', '?')} trials ({summ.get('n_graded', '?')} graded) on "
                f"{summ.get('n_tasks', '?')} tasks, steps {summ['steps'][0]}-{summ['steps'][1]}.",
            )
        }

    def details(self) -> list[str]:
        """:meth:`verdicts`' sentences, one per arm."""
        return list(self.verdicts().values())

    def headline(self) -> str:
        """Each arm against the reference in a clause: where it starts, the crossover, where
        it ends (the numbers are in :meth:`details` and the table)."""
        ref = self.config.reference
        start = {"ahead": "starts ahead of", "behind": "starts behind", "level": "starts level with"}
        clauses = []
        for arm, d in self.decisions().items():
            last = self.estimands["last_step"][arm]["step"]
            cross = (
                ""
                if d["crossover"] is None
                else f", {ref} {'overtakes it' if d['start'] == 'ahead' else 'leads'} from step {d['crossover']:.0f}"
            )
            clauses.append(f"{arm} {start[d['start']]} {ref}{cross}, {d['end']} at step {last}")
        return "; ".join(clauses) + "."

    def heading(self) -> list[str]:
        """A note when the data are synthetic, then the arms, the reference and the data in a line."""
        summ, synthetic = self.data.summary, self.data.summary.get("synthetic", "")
        return [
            *([f"NOTE: {synthetic}"] if synthetic else []),
            f"transfer model: arms {', '.join(map(str, self.data.arms))}, reference {self.config.reference}, "
            f"{summ['n_trials']} trials ({summ['n_groups']} arm x step x task groups), {int(S.HDI_PROB * 100)}% HDI; "
            "gaps are arm - reference",
        ]

    def results(self) -> dict[str, Any]:
        """:meth:`to_dict`, JSON-ready."""
        return json_safe(self.to_dict())

    def inference_data(self) -> dict[str, Any]:
        """``transfer_fit``: this fit's InferenceData."""
        return {"transfer_fit": self.idata}

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (docs/transfer.md)."""
        return {
            "verdicts": self.verdicts(),
            "decisions": self.decisions(),
            "data": self.data.summary,
            "reference": self.config.reference,
            "arms": [a for a in self.data.arms if a != self.config.reference],
            "first_steps": self.config.first_steps,
            "hdi_prob": S.HDI_PROB,
            "initial": self.estimands["initial"],
            "crossover_step": self.estimands["crossover_step"],
            "last_step": self.estimands["last_step"],
            "task_effect_sd": self.estimands["task_effect_sd"],
            "by_step": self.estimands["by_step"],
            "diagnostics": dict(self.diagnostics),
        }


TransferFit.idata = InferenceDataField()  # type: ignore[assignment]


def fit_transfer(
    ds: xr.Dataset | TransferData,
    config: TransferConfig | None = None,
    *,
    reference: str = "base",
    arms: list[str] | None = None,
    first_steps: int = 4,
    knot_every: float = 4.0,
    walk: str = "auto",
    task_effects: str = "integrated",
    priors: TransferPriors | None = None,
    sampler: SamplerConfig | None = None,
    seed: int = 0,
) -> TransferFit:
    """Fit the transfer model and compute every arm's gaps against ``reference``.

    Parameters
    ----------
    ds : xarray.Dataset or TransferData
        Trials with an ``arm`` coordinate (see :func:`transfer_data`).
    config : TransferConfig, optional
        The whole structure at once (e.g. built from a spec by
        :func:`saturation.spec.analysis_config`); when given, the keyword arguments from
        ``reference`` to ``sampler`` are not used.
    reference : str
        Reference arm (e.g. the untrained ``base``).
    arms : list of str, optional
        Arms to include (default: all).
    first_steps : int
        Width of the initial window for the initial advantage (default 4).
    knot_every : float
        Knot spacing of the per-arm random-walk curve, in steps (default 4).
    walk : {"auto", "centred", "non-centred"}
        Parametrisation of the knot random walks (same model, different geometry for the
        sampler); "auto" picks by trials per knot (:func:`resolve_walk`). The stored config
        names the one used.
    task_effects : {"integrated", "sampled"}
        Integrate the task effects out per task (default; :mod:`saturation.models.marginal`:
        exact for the reward part, adaptive Gauss-Hermite quadrature with an exact gradient for
        the ungraded part; about 50 parameters and no funnel when a task sd is near zero) or
        sample every one of them (the same model with thousands of parameters: the slow
        cross-check; then ``sampler`` defaults to ``SAMPLED_SAMPLER``).
    priors : TransferPriors, optional
        Prior settings (default :class:`TransferPriors`).
    sampler : SamplerConfig, optional
        Sampler settings (default: ``default_sampler(task_effects)``).
    seed : int
        Seeds the sampler; same seed and data give the same numbers.

    Returns
    -------
    TransferFit
        InferenceData, the gaps to the reference per arm, diagnostics and timings.

    Notes
    -----
    Why a knot random walk: the curves must bend both ways (the reference study's s85
    rises, then falls below base), a random walk on knot values shrinks towards a straight
    line between knots without imposing monotonicity, it costs a few parameters per arm,
    and its smoothness (the knot spacing) is explicit. An HSGP would also work; it needs
    a length-scale prior and boundary settings that a knot spacing avoids.
    """
    names = ("reference", "arms", "first_steps", "knot_every", "walk", "task_effects", "priors", "sampler")
    config_or_keywords(fit_transfer, config, {k: v for k, v in locals().items() if k in names})
    if config is None:  # the keyword arguments, once into the config
        config = TransferConfig(
            reference=reference,
            arms=tuple(arms) if arms else None,
            first_steps=first_steps,
            knot_every=knot_every,
            walk=walk,
            task_effects=task_effects,
            priors=priors or TransferPriors(),
            sampler=sampler or default_sampler(task_effects),
        )
    config.validate()
    data = ds if isinstance(ds, TransferData) else transfer_data(ds, arms=list(config.arms) if config.arms else None)
    config = replace(config, walk=resolve_walk(data, config))  # the stored config names the one used
    idata, timings, basis = _sample(data, config, seed)
    derived_draws(idata, basis, data.steps)
    estimands = _estimands(idata, data, config)
    structural = [f"{part}_{v}" for part in PARTS for v in ("knot", "rw_sd", "task_sd")]
    diag = diagnostics(idata, [*structural, "reward_sd", *(f"population_{q}" for q in QUANTITIES)])
    if config.task_effects == "sampled":
        nuisance = diagnostics(idata, [f"{part}_task_z" for part in PARTS])
        diag["task_effects"] = {
            "rhat_max": nuisance["rhat_max"],
            "ess_bulk_min": nuisance["ess_bulk_min"],
            "ess_tail_min": nuisance["ess_tail_min"],
            "rhat_threshold": TASK_EFFECT_RHAT_MAX,
        }
        diag["converged"] = bool(
            diag["converged"]
            and nuisance["rhat_max"] <= TASK_EFFECT_RHAT_MAX
            and nuisance["ess_bulk_min"] >= diag["thresholds"]["ess_bulk_min"]
        )
    _attach(idata, data, config, diag)
    fit = TransferFit(idata, config, data, estimands, diag, timings)
    warn_if_not_converged(diag, f"transfer fit (arms {data.arms}, reference {config.reference})")
    return fit


#: the smallest target acceptance the reward part is sampled at (:func:`_sample`)
REWARD_TARGET_ACCEPT = 0.95


def cached_kernel(config: TransferConfig) -> str | None:
    """The cached numba kernel module a fit with ``config`` samples on: integrated task
    effects with nutpie (``sampler`` "auto" or "nutpie", nutpie installed); None: the PyMC
    graph (sampled task effects, other samplers). The report compiles it ahead
    (``report.kernels_of``)."""
    if (
        config.task_effects != "integrated"
        or config.sampler.sampler not in ("auto", "nutpie")
        or "nutpie" not in available_samplers()
    ):
        return None
    return "saturation.models.transfer_kernel"


def _sample(data: TransferData, config: TransferConfig, seed: int) -> tuple[Any, dict[str, Any], np.ndarray]:
    """The fit's draws, timings and interpolation basis. With nutpie, integrated task effects
    are sampled on the cached numba kernel (:mod:`saturation.models.transfer_kernel`: no
    compile); sampled task effects, and other samplers, on the PyMC graph."""
    if cached_kernel(config) is not None:
        from saturation.models import transfer_kernel  # numba

        values = transfer_values(data, config)
        knots, basis = knot_basis(data.steps, config.knot_every)
        coords: dict[str, Sequence[Any]] = {S.ARM: data.arms, "knot": list(knots)}
        # the two parts share no parameter: each is sampled alone (its own step size and mass
        # matrix; on the embedded SWE-Gym arms 10.6 and 13.4 leapfrog steps a draw against 15.1
        # jointly, and the cheap reward part no longer pays for the binomial part's quadrature).
        # The reward part, a tenth of the cost a step, at REWARD_TARGET_ACCEPT or more: at 0.9
        # its own, larger step diverged once where the reward task sd is zero (a funnel)
        reward = replace(config.sampler, target_accept=max(config.sampler.target_accept, REWARD_TARGET_ACCEPT))
        direct = [
            (
                part,
                transfer_kernel.compiled_model(values, config.walk, config.priors, RW_SD_SHAPE, coords, S.ARM, part),
                reward if part == "reward" else config.sampler,
            )
            for part in PARTS
        ]
        if all(model is not None for _, model, _ in direct):
            held, timings = sample_compiled_parts(direct, seed=seed, coords=coords)
            return held, timings, basis
    model, values = build_transfer_model(data, config)
    key = (
        "transfer",
        len(data.arms),
        len(data.steps),
        len(data.tasks),
        len(data.n),
        values["basis"].shape,
        config.walk,
        config.task_effects,
    )
    idata, timings = sample_model(model, cache_key=key, data=values, seed=seed, config=config.sampler)
    return idata, timings, values["basis"]


def derived_draws(idata: az.InferenceData, basis: np.ndarray, steps: np.ndarray) -> None:
    """Add each part's intercept (first knot), random-walk increments and per-step curve
    (the knot values interpolated, ``basis``: steps x knots) to the posterior, computed from
    the knot draws; done after sampling because as Deterministics they were numba code that
    nutpie compiled for every new model (4 of 29 s on the embedded replica)."""
    post = idata.posterior
    for part in PARTS:
        knots = post[f"{part}_knot"].transpose("chain", "draw", S.ARM, "knot")
        values = knots.to_numpy()
        base = {c: knots[c] for c in ("chain", "draw", S.ARM)}
        post[f"{part}_intercept"] = knots.isel(knot=0, drop=True)
        post[f"{part}_rw_increment"] = xr.DataArray(
            values[..., 1:] - values[..., :-1], coords={**base, "increment": knots["knot"].to_numpy()[1:]}
        )
        post[f"{part}_curve"] = xr.DataArray(values @ basis.T, coords={**base, S.STEP: steps})


def population(ungraded_curve: Any, ungraded_task_sd: Any, reward_curve: Any) -> dict[str, np.ndarray]:
    """Population ungraded rate, graded-only and all-rollout reward from the logit curves
    (broadcast together): the ungraded rate is the logit-normal mean over the ungraded task
    effects, the graded-only reward the expit of its curve (its task effects are on the reward
    scale and average to zero), the all-rollout reward (1 - ungraded) x graded-only (the two
    task effects are independent). Shared by the fit and the calibration simulator."""
    u = curves.logitnormal_mean(ungraded_curve, ungraded_task_sd)
    r = curves.expit(reward_curve)
    return {S.UNGRADED_RATE: u, S.GRADED_ONLY: r, S.ALL_ROLLOUT: (1 - u) * r}


def population_curves(idata: az.InferenceData) -> dict[str, np.ndarray]:
    """Per-draw population curves (samples, arm, step): ungraded rate, graded-only and
    all-rollout reward, averaged over the task effects (the model has no step-noise term).
    A fit's posterior stores them (``population_<quantity>``): read from there when present."""
    post = idata.posterior.stack(sample=("chain", "draw"))
    if all(f"population_{q}" in post for q in QUANTITIES):
        return {q: post[f"population_{q}"].transpose("sample", S.ARM, S.STEP).to_numpy() for q in QUANTITIES}
    curve = {part: post[f"{part}_curve"].transpose("sample", S.ARM, S.STEP).to_numpy() for part in PARTS}
    return population(curve["ungraded"], post["ungraded_task_sd"].to_numpy()[:, None, None], curve["reward"])


def _estimands(idata: az.InferenceData, data: TransferData, config: TransferConfig) -> dict[str, Any]:
    pop = population_curves(idata)
    ref = data.arms.index(config.reference)
    steps = data.steps
    out: dict[str, Any] = {"initial": {}, "crossover_step": {}, "last_step": {}, "by_step": []}
    post = idata.posterior.stack(sample=("chain", "draw"))
    out["task_effect_sd"] = {part: interval(post[f"{part}_task_sd"].to_numpy()) for part in PARTS}
    gaps: dict[str, dict[str, np.ndarray]] = {}
    for a_i, arm in enumerate(data.arms):
        if a_i == ref:
            continue
        both = data.observed[ref] & data.observed[a_i]
        common = steps[both]
        gap = {q: pop[q][:, a_i, both] - pop[q][:, ref, both] for q in QUANTITIES}
        gaps[arm] = gap
        first = slice(0, min(config.first_steps, len(common)))
        initial: dict[str, Any] = {f"delta_{q}": interval(gap[q][:, first].mean(axis=1)) for q in QUANTITIES}
        initial["p_positive"] = float(np.mean(gap[S.ALL_ROLLOUT][:, first].mean(axis=1) > 0))
        initial["steps"] = [int(s) for s in common[first]]
        out["initial"][arm] = initial
        cross = curves.crossover_steps(gap[S.ALL_ROLLOUT], common)
        found = np.isfinite(cross)
        c_int = (
            interval(cross[found])
            if found.sum() >= 2
            else {"mean": None, "median": None, "sd": None, "hdi": [None, None]}
        )
        out["crossover_step"][arm] = {
            **c_int,
            "p_no_crossover": float(np.mean(~found)),
            "mass": {str(int(s)): float(np.mean(cross == s)) for s in common},
        }
        out["last_step"][arm] = {
            "step": int(common[-1]),
            **{f"delta_{q}": interval(gap[q][:, -1]) for q in QUANTITIES},
            "p_positive": float(np.mean(gap[S.ALL_ROLLOUT][:, -1] > 0)),
        }
    for j, step in enumerate(steps):
        row: dict[str, Any] = {"step": int(step)}
        for a_i, arm in enumerate(data.arms):
            if not data.observed[a_i, j]:
                continue
            row[arm] = {
                q: {
                    "mean": float(pop[q][:, a_i, j].mean()),
                    "hdi": [float(v) for v in hdi_1d(pop[q][:, a_i, j])],
                }
                for q in QUANTITIES
            }
            row[arm]["empirical"] = {q: float(data.empirical[q].to_numpy()[a_i, j]) for q in QUANTITIES}
        out["by_step"].append(row)
    shape = (idata.posterior.sizes["chain"], idata.posterior.sizes["draw"])
    for q in QUANTITIES:
        idata.posterior[f"population_{q}"] = (
            ("chain", "draw", S.ARM, S.STEP),
            pop[q].reshape(*shape, len(data.arms), len(steps)),
        )
    return out


def _attach(idata: az.InferenceData, data: TransferData, config: TransferConfig, diag: dict[str, Any]) -> None:
    idata.add_groups(observed_data=data.empirical)
    stamp_attrs(idata, "transfer", config, data.summary, diag)


def transfer_frame(fit: TransferFit) -> pd.DataFrame:
    """Per (arm, step): empirical values and the posterior mean with its 94 % HDI of the
    three quantities, plus each arm's gap to the reference (the data behind the plot).

    Parameters
    ----------
    fit : TransferFit
        A fitted transfer model.

    Returns
    -------
    pandas.DataFrame
        Columns ``arm``, ``step``, ``quantity`` (all_rollout, graded_only, ungraded_rate),
        ``empirical``, ``mean``, ``hdi_low``, ``hdi_high``, ``gap_mean``, ``gap_hdi_low``,
        ``gap_hdi_high`` (NaN for the reference arm).
    """
    pop = population_curves(held_idata(fit))
    ref = fit.data.arms.index(fit.config.reference)
    rows = []
    for a_i, arm in enumerate(fit.data.arms):
        for j, step in enumerate(fit.data.steps):
            if not fit.data.observed[a_i, j]:
                continue
            for q in QUANTITIES:
                draws = pop[q][:, a_i, j]
                hdi = hdi_1d(draws)
                row = {
                    "arm": arm,
                    "step": step,
                    "quantity": q,
                    "empirical": float(fit.data.empirical[q].to_numpy()[a_i, j]),
                    "mean": float(draws.mean()),
                    "hdi_low": float(hdi[0]),
                    "hdi_high": float(hdi[1]),
                    "gap_mean": np.nan,
                    "gap_hdi_low": np.nan,
                    "gap_hdi_high": np.nan,
                }
                if a_i != ref and fit.data.observed[ref, j]:
                    gap = draws - pop[q][:, ref, j]
                    ghdi = hdi_1d(gap)
                    row.update(gap_mean=float(gap.mean()), gap_hdi_low=float(ghdi[0]), gap_hdi_high=float(ghdi[1]))
                rows.append(row)
    return pd.DataFrame(rows)
