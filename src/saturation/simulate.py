"""Simulators with known truth: ``simulate_*(spec, seed) -> (data, truth)``.

Used by the embedded synthetic replica (``data/``), the named scenarios of
``saturation simulate`` (:mod:`saturation.scenarios`), the tests (parameter recovery,
null scenarios) and calibration. The expected curves come from
:mod:`saturation.curves`, the same functions the models use. Same spec and seed give
identical output.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import curves
from saturation import schema as S
from saturation.io import dataset_from_frame
from saturation.series import SERIES_METRICS, metric_variable_names

Knots = tuple[tuple[float, float], ...]


def _poisson_pmf(k: np.ndarray, mu: float) -> np.ndarray:
    """Poisson pmf, scipy.stats.poisson's own formula (exp(xlogy(k, mu) - gammaln(k + 1) -
    mu)) without importing scipy.stats (0.5 s at start-up)."""
    from scipy import special  # on use: importing this module stays light

    return np.exp(special.xlogy(k, mu) - special.gammaln(k + 1) - mu)


# =========================================================== (a) plateau study
@dataclass(frozen=True)
class LevelSpec:
    """One localisation level; its expected per-trial F1 follows :func:`curves.hinge`.

    Answer model per graded trial: the task has ``n_gold`` = 1 + Poisson(n_gold_mean - 1)
    gold locations (fixed per task); each is found with hit rate r (task, step and level
    dependent, logit-normal); with probability ``fp_prob`` the answer adds
    1 + Poisson(``fp_extra``) spurious locations; an answer names at least one location.
    ``fp_prob`` moves linearly from ``fp_prob_start`` to ``fp_prob_end`` until the change
    point. The hit-rate location is solved per step so that E[F1] equals the hinge
    exactly; precision, recall and counts follow (their expectations are in the truth).

    Parameters
    ----------
    name : str
        Level name: the ``level`` coordinate and the ``<name>_<field>`` column prefix.
    start : float
        Expected F1 at the study's first step (the hinge's ``start``, at ``t0 = first_step``).
    early_slope : float
        Change of expected F1 per step before the change point.
    late_slope : float
        Change of expected F1 per step after the change point (0: a flat plateau).
    changepoint : float
        Step at which the slope changes (same units as the step coordinate).
    jump : float, default 0.0
        Step change of expected F1 at the change point (0: continuous hinge).
    n_gold_mean : float, default 1.1
        Mean number of gold locations per task (1 + Poisson(``n_gold_mean`` - 1)).
    fp_prob_start : float, default 0.2
        Probability that an answer adds spurious locations, at the first step.
    fp_prob_end : float, default 0.05
        The same probability at the change point and after it.
    fp_extra : float, default 0.5
        Poisson mean of the spurious locations beyond the first (an answer with spurious
        locations has 1 + Poisson(``fp_extra``) of them).

    Notes
    -----
    The expected F1 must stay strictly inside (0, the largest F1 reachable with these
    spurious-location settings) at every step, else the simulators raise ``ValueError``.
    """

    name: str
    start: float
    early_slope: float
    late_slope: float
    changepoint: float
    jump: float = 0.0
    n_gold_mean: float = 1.1
    fp_prob_start: float = 0.2
    fp_prob_end: float = 0.05
    fp_extra: float = 0.5


@dataclass(frozen=True)
class PlateauSpec:
    """A plateau study: one run, prompt groups of ``samples_per_prompt`` rollouts.

    Task difficulty (``task_sd``) and per-step overdispersion (``step_sd`` shared by the
    levels, ``level_step_sd`` per level) act on the logit of each trial's hit rate; the
    hit-rate location is solved so that the population mean F1 follows the hinge exactly.
    ``n_graded`` (optional) fixes the number of graded trials exactly; otherwise each
    rollout is ungraded with probability ``ungraded_rate``.

    Parameters
    ----------
    levels : tuple of LevelSpec, default one level ``file``
        The localisation levels, in the order of the ``level`` dimension (coarse to fine;
        the last one is the finest, used by ``answer_locations``). The default is
        ``LevelSpec("file", 0.80, 0.004, 0.0, 40.0)``: F1 0.80 rising 0.004 per step to a
        flat plateau from step 40.
    run : str, default "sim-plateau"
        Value of the ``run`` coordinate of every trial.
    dataset : str, default "simulated"
        Value of the ``dataset`` coordinate of every trial.
    n_steps : int, default 91
        Number of consecutive training steps simulated.
    first_step : int, default 0
        Number of the first step; the steps are ``first_step .. first_step + n_steps - 1``
        and the hinges start (``t0``) there.
    prompts_per_step : int, default 64
        Distinct tasks (prompt groups) per step, drawn without repeats within a step in
        epochs over the shuffled pool; must not exceed ``pool_size``.
    samples_per_prompt : int, default 8
        Rollouts per prompt (the ``sample`` coordinate, ``0 .. samples_per_prompt - 1``).
    pool_size : int, default 9263
        Number of distinct tasks (instance ids ``task-00000``, ...), each with its own
        difficulty and gold-location counts.
    ungraded_rate : float, default 0.08
        Probability that a rollout is ungraded (``graded`` false, reward 0, level metrics
        NaN); ignored when ``n_graded`` is given.
    n_graded : int or None, default None
        If given, exactly this many trials are graded (the ungraded ones drawn at random);
        must lie in ``[0, n_steps * prompts_per_step * samples_per_prompt]``.
    task_sd : float, default 1.0
        Standard deviation of the per-task effect on the hit-rate logit (shared by steps
        and levels).
    step_sd : float, default 0.1
        Standard deviation of the per-step effect on the hit-rate logit, shared by the levels.
    level_step_sd : float, default 0.05
        Standard deviation of the per-(level, step) effect on the hit-rate logit.
    answer_locations : tuple of (float, float) or None, default None
        If given, ``(extra_start, extra_end)``: add a trial variable ``n_locations``
        (location entries in the answer) = the last level's ``n_pred`` + Poisson(extra),
        with extra moving linearly from ``extra_start`` at the first step to
        ``extra_end`` at that level's change point (constant after it). NaN on ungraded
        trials.
    """

    levels: tuple[LevelSpec, ...] = (LevelSpec("file", 0.80, 0.004, 0.0, 40.0),)
    run: str = "sim-plateau"
    dataset: str = "simulated"
    n_steps: int = 91
    first_step: int = 0
    prompts_per_step: int = 64
    samples_per_prompt: int = 8
    pool_size: int = 9263
    ungraded_rate: float = 0.08
    n_graded: int | None = None
    task_sd: float = 1.0
    step_sd: float = 0.1
    level_step_sd: float = 0.05
    #: if set, ``(extra_start, extra_end)``: emit a trial variable ``n_locations`` (location
    #: entries in the answer) = last level's n_pred + Poisson(extra), extra moving
    #: linearly from start to end until that level's change point
    answer_locations: tuple[float, float] | None = None


_GH_Z, _GH_W = np.polynomial.hermite_e.hermegauss(12)
_GH_W = _GH_W / _GH_W.sum()
_NMAX = 9  # counts are enumerated up to this value (tail mass < 1e-6 for the means used)


def _answer_tables(n_gold_mean: float, fp_prob: np.ndarray, fp_extra: float) -> dict[str, np.ndarray]:
    """For each step: E over spurious locations of f1/precision/recall/n_pred given (G, tp).

    Returns arrays of shape (steps, G, tp) and the gold pmf over G.
    """
    g = np.arange(_NMAX + 1)
    gold_pmf = np.where(g >= 1, _poisson_pmf(np.maximum(g - 1, 0), max(n_gold_mean - 1, 0)), 0.0)
    gold_pmf /= gold_pmf.sum()
    f = np.arange(_NMAX + 1)
    extra = np.where(f >= 1, _poisson_pmf(np.maximum(f - 1, 0), fp_extra), 0.0)
    fp_pmf = fp_prob[:, None] * extra[None, :] / extra.sum()
    fp_pmf[:, 0] = 1 - fp_prob
    G = g[:, None, None].astype(float)
    T = g[None, :, None].astype(float)
    F = f[None, None, :].astype(float)
    F = np.where((T + F) == 0, 1.0, F)  # an answer names at least one location
    pred = T + F
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = {
            S.F1: 2 * T / (pred + G),
            S.PRECISION: T / pred,
            S.RECALL: np.where(G > 0, T / np.maximum(G, 1), 0.0),
            S.N_PRED: pred,
        }
    return {k: np.einsum("sf,gtf->sgt", fp_pmf, np.nan_to_num(v)) for k, v in vals.items()} | {"gold_pmf": gold_pmf}


_G = np.arange(_NMAX + 1)


@functools.cache
def _log_choose() -> np.ndarray:
    """log C(G, tp) for G, tp in 0.._NMAX (-inf where tp > G): (G, tp), made on first use
    (scipy.special is imported here, not by every command that imports this module)."""
    from scipy import special

    return np.where(
        _G[None, :] <= _G[:, None],
        special.gammaln(_G[:, None] + 1)
        - special.gammaln(_G[None, :] + 1)
        - special.gammaln(np.maximum(_G[:, None] - _G[None, :], 0) + 1),
        -np.inf,
    )


def _expected(loc: np.ndarray, sd: float, tables: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Expected per-trial values per step for hit-rate logit location ``loc`` (steps,)."""
    eta = loc[:, None] + sd * _GH_Z[None, :]  # (s, j)
    log_r = -np.logaddexp(0.0, -eta)[:, :, None, None]
    log_1mr = -np.logaddexp(0.0, eta)[:, :, None, None]
    g = _G[None, None, :, None].astype(float)
    t = _G[None, None, None, :].astype(float)
    # binomial pmf of tp given G and r: (s, j, G, tp)
    pmf = np.exp(_log_choose()[None, None] + t * log_r + np.maximum(g - t, 0) * log_1mr)
    w = np.einsum("sjgt,g,j->sgt", pmf, tables["gold_pmf"], _GH_W)
    out = {k: np.einsum("sgt,sgt->s", w, tables[k]) for k in (S.F1, S.PRECISION, S.RECALL, S.N_PRED)}
    out[S.N_TP] = np.einsum("sgt,t->s", w, _G.astype(float))
    return out


def level_curves(level: LevelSpec, steps: np.ndarray, first_step: int, sd: float) -> dict[str, np.ndarray]:
    """Expected per-step f1 (the hinge), precision, recall, n_pred, n_gold and the
    hit-rate logit location that produces them under logit-normal sd ``sd``."""
    f1 = curves.hinge(
        steps.astype(float),
        start=level.start,
        early_slope=level.early_slope,
        late_slope=level.late_slope,
        changepoint=level.changepoint,
        t0=first_step,
        jump=level.jump,
    )
    span = max(level.changepoint - first_step, 1e-9)
    frac = np.clip((steps - first_step) / span, 0, 1)
    fp_prob = level.fp_prob_start + (level.fp_prob_end - level.fp_prob_start) * frac
    # the curves only depend on (f1, fp_prob): solve once per distinct pair
    pairs, inverse = np.unique(np.stack([f1, fp_prob], axis=1), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    target = pairs[:, 0]
    tables = _answer_tables(level.n_gold_mean, pairs[:, 1], level.fp_extra)
    lo = np.full(len(pairs), -15.0)
    hi = np.full(len(pairs), 15.0)
    f1_max = _expected(hi, sd, tables)[S.F1]
    if np.any(target >= f1_max) or np.any(target <= 0):
        raise ValueError(
            f"level {level.name!r}: expected F1 in {target.min():.3f}..{target.max():.3f} is not "
            f"reachable (max reachable {f1_max.min():.3f} with these spurious-location settings)"
        )
    for _ in range(36):
        mid = (lo + hi) / 2
        above = _expected(mid, sd, tables)[S.F1] > target
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    loc = (lo + hi) / 2
    exp = {k: v[inverse] for k, v in _expected(loc, sd, tables).items()}
    loc = loc[inverse]
    return {
        **exp,
        S.F1: f1,
        S.N_GOLD: np.full(len(steps), float(np.arange(_NMAX + 1) @ tables["gold_pmf"])),
        "fp_prob": fp_prob,
        "loc": loc,
    }


def _draw_instances(rng: np.random.Generator, n_steps: int, per_step: int, pool: int) -> np.ndarray:
    """Task indices per (step, prompt): epochs over a shuffled pool, like a data loader with
    ``drop_last=True`` (no task repeats within a step; the epoch's remainder is skipped)."""
    if per_step > pool:
        raise ValueError(f"prompts_per_step={per_step} exceeds the task pool ({pool})")
    per_epoch = pool // per_step
    batches: list[np.ndarray] = []
    while len(batches) < n_steps:
        perm = rng.permutation(pool)
        batches.extend(perm[: per_epoch * per_step].reshape(per_epoch, per_step))
    return np.stack(batches[:n_steps])


def _ungraded_mask(rng: np.random.Generator, n: int, rate: Any, n_graded: int | None) -> np.ndarray:
    if n_graded is not None:
        if not 0 <= n_graded <= n:
            raise ValueError(f"n_graded={n_graded} must lie in [0, {n}]")
        mask = np.zeros(n, dtype=bool)
        mask[rng.choice(n, size=n - n_graded, replace=False)] = True
        return mask
    return rng.random(n) < rate


def simulate_plateau(spec: PlateauSpec | None = None, seed: int = 0) -> tuple[xr.Dataset, dict[str, Any]]:
    """Simulate a plateau study (graded trials with per-level localisation metrics).

    Parameters
    ----------
    spec : PlateauSpec, optional
        The study to simulate; ``None`` (the default) means ``PlateauSpec()``.
    seed : int, default 0
        Seed of the random generator; the same spec and seed give identical output.

    Returns
    -------
    (xarray.Dataset, dict)
        The trial Dataset (same schema as :func:`~saturation.io.read_trials`) and the
        truth: per-level hinge parameters, value at start / change point / end,
        headroom, and ``curves`` (an xarray Dataset of expected per-step f1, precision,
        recall, n_pred, n_gold over dims step, level).

        The Dataset has dims ``trial`` (``n_steps * prompts_per_step *
        samples_per_prompt``) and ``level`` (``spec.levels`` in order); trial coords
        run, step, instance_id, sample, phase (``"train"``) and dataset; variables
        ``graded``, ``reward`` (mean F1 over the levels on graded trials, 0 on ungraded
        ones), per level ``f1``, ``precision``, ``recall``, ``n_pred``, ``n_gold``,
        ``n_tp`` (dims trial, level; NaN on ungraded trials) and, with
        ``answer_locations``, ``n_locations`` (dim trial). ``attrs`` hold the row
        accounting and ``simulator``, ``seed``, ``spec`` (its repr).

        The truth dict has keys ``spec`` (the spec as a dict), ``levels`` (per level
        name: the :class:`LevelSpec` fields but ``name``, ``value_at_changepoint`` (the
        hinge at the change point, before any jump), ``end`` (expected F1 at the last
        step), ``headroom`` (1 - end) and ``late_gain`` (late slope x steps after the
        change point)), ``curves`` (also ``n_locations`` over step with
        ``answer_locations``) and ``seed``.

    Raises
    ------
    ValueError
        If a level's expected F1 is unreachable, ``prompts_per_step`` exceeds
        ``pool_size`` or ``n_graded`` is out of range.
    """
    spec = spec or PlateauSpec()
    rng = np.random.default_rng(seed)
    steps = np.arange(spec.first_step, spec.first_step + spec.n_steps)
    inst = _draw_instances(rng, spec.n_steps, spec.prompts_per_step, spec.pool_size)
    k = spec.samples_per_prompt
    n = spec.n_steps * spec.prompts_per_step * k
    step_idx = np.repeat(np.arange(spec.n_steps), spec.prompts_per_step * k)
    inst_idx = np.repeat(inst.ravel(), k)
    sample = np.tile(np.arange(k), spec.n_steps * spec.prompts_per_step)
    ungraded = _ungraded_mask(rng, n, spec.ungraded_rate, spec.n_graded)
    graded = ~ungraded

    task_z = rng.standard_normal(spec.pool_size)
    step_z = rng.standard_normal(spec.n_steps)
    total_sd = float(np.sqrt(spec.task_sd**2 + spec.step_sd**2 + spec.level_step_sd**2))
    frame = pd.DataFrame(
        {
            S.RUN: spec.run,
            S.STEP: steps[step_idx],
            S.INSTANCE_ID: np.char.add("task-", np.char.zfill(inst_idx.astype(str), 5)).astype(object),
            S.SAMPLE: sample,
            S.PHASE: "train",
            S.DATASET: spec.dataset,
            S.GRADED: graded,
        }
    )
    truth_levels: dict[str, dict[str, float]] = {}
    curve_vars: dict[str, list[np.ndarray]] = {}
    f1_cols = []
    for level in spec.levels:
        cur = level_curves(level, steps, spec.first_step, total_sd)
        eta = (
            cur["loc"][step_idx]
            + spec.task_sd * task_z[inst_idx]
            + spec.step_sd * step_z[step_idx]
            + spec.level_step_sd * rng.standard_normal(spec.n_steps)[step_idx]
        )
        hit = curves.expit(eta)
        gold_by_task = 1 + rng.poisson(max(level.n_gold_mean - 1, 0), size=spec.pool_size)
        gold = gold_by_task[inst_idx]
        tp = rng.binomial(gold, hit)
        spurious = rng.random(n) < cur["fp_prob"][step_idx]
        fp = np.where(spurious, 1 + rng.poisson(level.fp_extra, size=n), 0)
        fp = np.where(tp + fp == 0, 1, fp)
        pred = (tp + fp).astype(float)
        gold_f, tp_f = gold.astype(float), tp.astype(float)
        values = {
            S.F1: 2 * tp_f / (pred + gold_f),
            S.PRECISION: tp_f / pred,
            S.RECALL: tp_f / gold_f,
            S.N_PRED: pred,
            S.N_GOLD: gold_f,
            S.N_TP: tp_f,
        }
        for fld, v in values.items():
            frame[f"{level.name}_{fld}"] = np.where(graded, v, np.nan)
        f1_cols.append(f"{level.name}_{S.F1}")
        for fld in (S.F1, S.PRECISION, S.RECALL, S.N_PRED, S.N_GOLD):
            curve_vars.setdefault(fld, []).append(cur[fld])
        cp_value = float(
            curves.hinge(
                np.array(level.changepoint),
                start=level.start,
                early_slope=level.early_slope,
                late_slope=0.0,
                changepoint=level.changepoint,
                t0=spec.first_step,
            )
        )
        end = float(cur[S.F1][-1])
        truth_levels[level.name] = {
            **{k_: float(v_) for k_, v_ in asdict(level).items() if k_ != "name"},
            S.VALUE_AT_CHANGEPOINT: cp_value,
            "end": end,
            "headroom": 1.0 - end,
            "late_gain": float(level.late_slope * max(steps[-1] - level.changepoint, 0)),
        }
    frame[S.REWARD] = np.where(graded, frame[f1_cols].mean(axis=1), 0.0)
    if spec.answer_locations is not None:
        finest = spec.levels[-1]
        x0, x1 = spec.answer_locations
        frac = np.clip((steps - spec.first_step) / max(finest.changepoint - spec.first_step, 1e-9), 0, 1)
        extra = x0 + (x1 - x0) * frac
        n_loc = frame[f"{finest.name}_{S.N_PRED}"].to_numpy() + rng.poisson(extra[step_idx])
        frame["n_locations"] = np.where(graded, n_loc, np.nan)
        curve_extra = curve_vars[S.N_PRED][-1] + extra
        truth_levels_extra = {"n_locations": (S.STEP, curve_extra)}
    else:
        truth_levels_extra = {}
    extra_cols = ["n_locations"] if spec.answer_locations is not None else []
    ds = dataset_from_frame(
        frame, levels=[lv.name for lv in spec.levels], extra=extra_cols, sources=["simulate_plateau"]
    )
    ds.attrs.update({"simulator": "simulate_plateau", "seed": seed, "spec": repr(spec)})
    level_names = [lv.name for lv in spec.levels]
    truth_curves = xr.Dataset(
        {fld: ((S.STEP, S.LEVEL), np.stack(v, axis=1)) for fld, v in curve_vars.items()} | truth_levels_extra,
        coords={S.STEP: steps, S.LEVEL: level_names},
    )
    truth = {"spec": asdict(spec), "levels": truth_levels, "curves": truth_curves, "seed": seed}
    return ds, truth


# =========================================================== (b) transfer study
@dataclass(frozen=True)
class ArmSpec:
    """One arm of a transfer study.

    ``ungraded`` and ``graded_reward`` are ``(step, value)`` knots of the population
    (marginal) ungraded rate and graded-only mean reward, linearly interpolated.
    ``n_trials`` rollouts are laid out in full steps of prompts x samples, the last
    step partial if needed.

    Parameters
    ----------
    name : str
        Arm name: the ``arm`` coordinate; the run is ``<run_prefix>-<name>``.
    n_trials : int
        Number of rollouts of the arm (they fill ``ceil(n_trials / (prompts_per_step x
        samples_per_prompt))`` steps).
    ungraded : tuple of (step, value) pairs
        Knots of the population ungraded rate, each value strictly inside (0, 1);
        linear between knots, constant beyond the ends.
    graded_reward : tuple of (step, value) pairs
        Knots of the population mean reward of graded rollouts, each value strictly
        inside (0, 1); linear between knots, constant beyond the ends.
    """

    name: str
    n_trials: int
    ungraded: Knots
    graded_reward: Knots


@dataclass(frozen=True)
class TransferSpec:
    """Several arms on one shared task pool (paired: the same task sequence per arm).

    Task effects are shared across arms: ``task_sd`` on the logit of the graded-only
    reward, ``ungraded_task_sd`` on the logit of the ungraded probability (independent of
    each other, so all-rollout reward = (1 - ungraded) x graded-only holds in
    expectation). Graded rewards are Beta with mean from the curve and precision
    ``reward_concentration``; ``step_sd`` adds per-(arm, step) logit noise.

    Parameters
    ----------
    arms : tuple of ArmSpec, default arms ``base`` and ``s85``
        The arms; the first one is the reference the crossover steps are measured
        against. The default: two arms of 10240 rollouts, ``base`` (ungraded rate 0.40
        to 0.30, graded-only reward 0.40 to 0.55 over steps 1-20) and ``s85`` (ungraded
        rate 0.40, graded-only reward 0.50 to 0.45).
    run_prefix : str, default "sim-transfer"
        Prefix of the run names: arm ``a`` is run ``<run_prefix>-a``.
    dataset : str, default "simulated"
        Value of the ``dataset`` coordinate of every trial.
    first_step : int, default 1
        Number of every arm's first step.
    prompts_per_step : int, default 64
        Distinct tasks per step (no repeats within a step); must not exceed ``pool_size``.
    samples_per_prompt : int, default 8
        Rollouts per prompt (the ``sample`` coordinate).
    pool_size : int, default 2088
        Number of distinct tasks (instance ids ``task-00000``, ...); every arm sees the
        same task sequence.
    task_sd : float, default 0.8
        Standard deviation of the per-task effect on the logit of the graded-only reward.
    ungraded_task_sd : float, default 0.8
        Standard deviation of the per-task effect on the logit of the ungraded probability.
    reward_concentration : float, default 4.0
        Precision phi of the Beta graded reward: Beta(mu phi, (1 - mu) phi).
    step_sd : float, default 0.05
        Standard deviation of the per-(arm, step) logit noise, drawn separately for the
        reward and the ungraded probability.
    """

    arms: tuple[ArmSpec, ...] = (
        ArmSpec("base", 10240, ((1, 0.40), (20, 0.30)), ((1, 0.40), (20, 0.55))),
        ArmSpec("s85", 10240, ((1, 0.40), (20, 0.40)), ((1, 0.50), (20, 0.45))),
    )
    run_prefix: str = "sim-transfer"
    dataset: str = "simulated"
    first_step: int = 1
    prompts_per_step: int = 64
    samples_per_prompt: int = 8
    pool_size: int = 2088
    task_sd: float = 0.8
    ungraded_task_sd: float = 0.8
    reward_concentration: float = 4.0
    step_sd: float = 0.05


def transfer_truth_curves(spec: TransferSpec) -> xr.Dataset:
    """Expected per-arm, per-step ungraded rate, graded-only and all-rollout reward."""
    per_step = spec.prompts_per_step * spec.samples_per_prompt
    last = max(-(-a.n_trials // per_step) for a in spec.arms)
    steps = np.arange(spec.first_step, spec.first_step + last)
    u = np.stack([curves.piecewise_linear(steps, a.ungraded) for a in spec.arms])
    g = np.stack([curves.piecewise_linear(steps, a.graded_reward) for a in spec.arms])
    n_steps = np.array([-(-a.n_trials // per_step) for a in spec.arms])
    observed = steps[None, :] < spec.first_step + n_steps[:, None]
    ds = xr.Dataset(
        {
            S.UNGRADED_RATE: ((S.ARM, S.STEP), u),
            S.GRADED_ONLY: ((S.ARM, S.STEP), g),
            S.ALL_ROLLOUT: ((S.ARM, S.STEP), (1 - u) * g),
            "observed": ((S.ARM, S.STEP), observed),
        },
        coords={S.ARM: [a.name for a in spec.arms], S.STEP: steps},
    )
    return ds


def crossover_step(gap: np.ndarray, steps: np.ndarray) -> float:
    """First step after which ``gap`` stays negative (NaN if it never does)."""
    return float(curves.crossover_steps(gap, steps))


def _arm_trials(
    spec: Any,
    arm: str,
    step_i: np.ndarray,
    inst_idx: np.ndarray,
    sample: np.ndarray,
    graded: np.ndarray,
    reward: np.ndarray,
) -> pd.DataFrame:
    """One arm's trial rows (run ``<run_prefix>-<arm>``, train phase, instances ``task-NNNNN``)
    of a multi-arm simulator whose spec has ``run_prefix``, ``first_step`` and ``dataset``."""
    return pd.DataFrame(
        {
            S.RUN: f"{spec.run_prefix}-{arm}",
            S.ARM: arm,
            S.STEP: spec.first_step + step_i,
            S.INSTANCE_ID: np.char.add("task-", np.char.zfill(inst_idx.astype(str), 5)).astype(object),
            S.SAMPLE: sample,
            S.PHASE: "train",
            S.DATASET: spec.dataset,
            S.GRADED: graded,
            S.REWARD: reward,
        }
    )


def simulate_transfer(spec: TransferSpec | None = None, seed: int = 0) -> tuple[xr.Dataset, dict[str, Any]]:
    """Simulate a multi-arm transfer study on a shared task pool.

    Parameters
    ----------
    spec : TransferSpec, optional
        The study to simulate; ``None`` (the default) means ``TransferSpec()``.
    seed : int, default 0
        Seed of the random generator; the same spec and seed give identical output.

    Returns
    -------
    (xarray.Dataset, dict)
        Trials with coords run, arm, step, instance_id, sample (no levels) and the truth:
        ``curves`` (see :func:`transfer_truth_curves`), the first-4-step means per arm
        and the true all-rollout crossover step of every arm against the first arm.

        The Dataset has dims ``trial`` (the arms' ``n_trials`` summed, arm after arm)
        and ``level`` (empty); trial coords run, arm, step, instance_id, sample, phase
        (``"train"``) and dataset; variables ``graded`` and ``reward`` (in [0, 1], 0 on
        ungraded trials). ``attrs`` hold the row accounting and ``simulator``, ``seed``,
        ``spec``.

        The truth dict has keys ``spec`` (the spec as a dict), ``reference`` (the first
        arm's name), ``curves`` (dims arm, step: ``ungraded_rate``, ``graded_only``,
        ``all_rollout`` and ``observed``, whether the arm has trials at that step),
        ``first_4_steps`` (``{variable: {arm: mean over the first 4 steps}}``),
        ``crossover_step`` (``{arm: step}`` for every arm but the reference, over the
        steps both arms observe; NaN if the gap never stays negative) and ``seed``.

    Raises
    ------
    ValueError
        If a knot value is not strictly inside (0, 1) or ``prompts_per_step`` exceeds
        ``pool_size``.
    """
    spec = spec or TransferSpec()
    rng = np.random.default_rng(seed)
    from scipy import special  # on use: importing this module stays light

    per_step = spec.prompts_per_step * spec.samples_per_prompt
    truth_curves = transfer_truth_curves(spec)
    n_steps_max = truth_curves.sizes[S.STEP]
    inst = _draw_instances(rng, n_steps_max, spec.prompts_per_step, spec.pool_size)
    task_reward = rng.standard_normal(spec.pool_size)
    task_ungraded = rng.standard_normal(spec.pool_size)
    k = spec.samples_per_prompt
    parts = []
    for a_idx, arm in enumerate(spec.arms):
        n = arm.n_trials
        pos = np.arange(n)
        step_i = pos // per_step
        inst_idx = inst.ravel()[pos // k]
        sample = pos % k
        u_curve = truth_curves[S.UNGRADED_RATE].to_numpy()[a_idx]
        g_curve = truth_curves[S.GRADED_ONLY].to_numpy()[a_idx]
        sd_u = float(np.hypot(spec.ungraded_task_sd, spec.step_sd))
        sd_g = float(np.hypot(spec.task_sd, spec.step_sd))
        loc_u = curves.logitnormal_location(u_curve, sd_u)
        loc_g = curves.logitnormal_location(g_curve, sd_g)
        step_noise_u = spec.step_sd * rng.standard_normal(n_steps_max)
        step_noise_g = spec.step_sd * rng.standard_normal(n_steps_max)
        # SciPy's expit, bit for bit: the rewards are Beta draws of mu, whose last bits reach the
        # embedded SWE-Gym replica (curves.expit's NumPy exp differs from libm's in the last bit;
        # tests/test_replica.py regenerates the committed files)
        p_u = special.expit(loc_u[step_i] + spec.ungraded_task_sd * task_ungraded[inst_idx] + step_noise_u[step_i])
        mu = special.expit(loc_g[step_i] + spec.task_sd * task_reward[inst_idx] + step_noise_g[step_i])
        ungraded = rng.random(n) < p_u
        phi = spec.reward_concentration
        reward = np.clip(rng.beta(mu * phi, (1 - mu) * phi), 0.0, 1.0)
        parts.append(_arm_trials(spec, arm.name, step_i, inst_idx, sample, ~ungraded, np.where(ungraded, 0.0, reward)))
    frame = pd.concat(parts, ignore_index=True)
    ds = dataset_from_frame(frame, levels=[], sources=["simulate_transfer"])
    ds.attrs.update({"simulator": "simulate_transfer", "seed": seed, "spec": repr(spec)})
    ref = spec.arms[0].name
    steps = truth_curves[S.STEP].to_numpy()
    first4 = truth_curves.isel({S.STEP: slice(0, 4)}).mean(S.STEP)
    crossover = {}
    for arm in spec.arms[1:]:
        both = truth_curves["observed"].sel({S.ARM: [ref, arm.name]}).all(S.ARM).to_numpy()
        gap = (
            truth_curves[S.ALL_ROLLOUT].sel({S.ARM: arm.name}) - truth_curves[S.ALL_ROLLOUT].sel({S.ARM: ref})
        ).to_numpy()
        crossover[arm.name] = crossover_step(gap[both], steps[both])
    truth = {
        "spec": asdict(spec),
        "reference": ref,
        "curves": truth_curves,
        "first_4_steps": {
            var: {str(a): float(first4[var].sel({S.ARM: a})) for a in first4[S.ARM].to_numpy()}
            for var in (S.UNGRADED_RATE, S.GRADED_ONLY, S.ALL_ROLLOUT)
        },
        "crossover_step": crossover,
        "seed": seed,
    }
    return ds, truth


# =========================================================== (b2) recipe arms with sigmoid curves
@dataclass(frozen=True)
class SigmoidArm:
    """One recipe arm whose population success rate follows
    :func:`saturation.curves.sigmoid_saturation` in ``x = step - first_step + 1``."""

    name: str
    r0: float = 0.1
    asymptote: float = 0.5
    efficiency: float = 1.5
    midpoint: float = 10.0
    #: steps this arm ran (default the spec's ``n_steps``): runs of one study need not share a budget
    n_steps: int | None = None
    #: the run's mean wall-clock seconds per training step (``timing/step``) and mean response
    #: tokens per rollout (``generate/avg_num_tokens``), for :func:`simulate_arm_step_metrics`
    seconds_per_step: float = 600.0
    tokens_per_rollout: float = 8000.0


@dataclass(frozen=True)
class SigmoidArmsSpec:
    """Binary-reward training runs of several recipe arms (e.g. r2egym tool arms): per step
    ``prompts_per_step`` prompts from a shared pool, ``samples_per_prompt`` rollouts each;
    a prompt's difficulty (logit scale, sd ``task_sd``) is shared by its rollouts and by
    the arms (the clustering the model does not know), a per-step logit jitter
    ``step_sd``; the population mean over prompts is the arm's curve."""

    arms: tuple[SigmoidArm, ...] = (
        SigmoidArm("t2", asymptote=0.45, efficiency=1.5, midpoint=10.0),
        SigmoidArm("t2yarn", asymptote=0.6, efficiency=1.5, midpoint=14.0),
    )
    n_steps: int = 40
    first_step: int = 1
    prompts_per_step: int = 16
    samples_per_prompt: int = 8
    pool_size: int = 400
    task_sd: float = 1.0
    step_sd: float = 0.05
    run_prefix: str = "sim-arms"
    dataset: str = "sim-arms"


def sigmoid_arm_curves(spec: SigmoidArmsSpec) -> xr.Dataset:
    """The true population success rate per (arm, step): dims arm, step."""
    steps = spec.first_step + np.arange(spec.n_steps)
    x = steps - spec.first_step + 1.0
    rates = np.stack(
        [
            curves.sigmoid_saturation(x, r0=a.r0, asymptote=a.asymptote, efficiency=a.efficiency, midpoint=a.midpoint)
            for a in spec.arms
        ]
    )
    return xr.Dataset(
        {"success_rate": ((S.ARM, S.STEP), rates)}, coords={S.ARM: [a.name for a in spec.arms], S.STEP: steps}
    )


def simulate_sigmoid_arms(spec: SigmoidArmsSpec | None = None, seed: int = 0) -> tuple[xr.Dataset, dict[str, Any]]:
    """Simulate binary-reward runs of recipe arms with known sigmoid curves, per trial.

    Parameters
    ----------
    spec : SigmoidArmsSpec, optional
        The arms and the design; ``None`` means ``SigmoidArmsSpec()``.
    seed : int, default 0
        Seed of the random generator; the same spec and seed give identical output.

    Returns
    -------
    (xarray.Dataset, dict)
        Trials (coords run, arm, step, instance_id, sample; every trial graded; ``reward``
        0 or 1) and the truth: ``spec``, ``curves`` (:func:`sigmoid_arm_curves`) and
        ``arms`` ``{name: {"r0", "asymptote", "efficiency", "midpoint"}}`` (the midpoint in
        ``x`` units, steps counted from 1), ``seed``.

    Notes
    -----
    Not the fitted model: success is Bernoulli per rollout with a logit-normal prompt
    difficulty shared within a prompt group (and across arms) and a per-step jitter; the
    conditional logit location is solved so that the mean over prompts equals the curve.
    """
    spec = spec or SigmoidArmsSpec()
    rng = np.random.default_rng(seed)
    truth_curves = sigmoid_arm_curves(spec)
    k, per_step = spec.samples_per_prompt, spec.prompts_per_step * spec.samples_per_prompt
    inst = _draw_instances(rng, spec.n_steps, spec.prompts_per_step, spec.pool_size)
    difficulty = rng.standard_normal(spec.pool_size)
    parts = []
    for a_idx, arm in enumerate(spec.arms):
        n = min(arm.n_steps or spec.n_steps, spec.n_steps) * per_step
        pos = np.arange(n)
        step_i, inst_idx, sample = pos // per_step, inst.ravel()[pos // k], pos % k
        sd = float(np.hypot(spec.task_sd, spec.step_sd))
        loc = curves.logitnormal_location(truth_curves["success_rate"].to_numpy()[a_idx], sd)
        jitter = spec.step_sd * rng.standard_normal(spec.n_steps)
        p = curves.expit(loc[step_i] + spec.task_sd * difficulty[inst_idx] + jitter[step_i])
        parts.append(
            _arm_trials(spec, arm.name, step_i, inst_idx, sample, np.ones(n, dtype=bool), (rng.random(n) < p) * 1.0)
        )
    ds = dataset_from_frame(pd.concat(parts, ignore_index=True), levels=[], sources=["simulate_sigmoid_arms"])
    ds.attrs.update({"simulator": "simulate_sigmoid_arms", "seed": seed, "spec": repr(spec)})
    truth = {
        "spec": asdict(spec),
        "curves": truth_curves,
        "arms": {
            a.name: {"r0": a.r0, "asymptote": a.asymptote, "efficiency": a.efficiency, "midpoint": a.midpoint}
            for a in spec.arms
        },
        "seed": seed,
    }
    return ds, truth


def simulate_sigmoid_series(spec: SigmoidArmsSpec | None = None, seed: int = 0) -> tuple[xr.Dataset, dict[str, Any]]:
    """The logged per-step mean reward of :func:`simulate_sigmoid_arms`'s runs, one run per
    arm named after it: what a metrics CSV of recipe arms holds (``reward/avg_raw_reward``,
    the batch mean SkyRL logs), without the trials.

    Parameters
    ----------
    spec : SigmoidArmsSpec, optional
        The arms and the design.
    seed : int, default 0
        Seed of :func:`simulate_sigmoid_arms`.

    Returns
    -------
    (xarray.Dataset, dict)
        Series (dims run, step; variable ``reward_mean`` with ``metric_name``
        ``reward/avg_raw_reward``) and :func:`simulate_sigmoid_arms`'s truth.
    """
    trials, truth = simulate_sigmoid_arms(spec, seed)
    frame = pd.DataFrame(
        {
            S.RUN: trials[S.ARM].to_numpy().astype(str),
            S.STEP: trials[S.STEP].to_numpy().astype(int),
            "y": trials[S.REWARD].to_numpy(),
        }
    )
    ds = frame.groupby([S.RUN, S.STEP])["y"].mean().rename(S.REWARD_MEAN).to_xarray().to_dataset()
    ds = ds.reindex({S.RUN: [a.name for a in (spec or SigmoidArmsSpec()).arms]})
    ds[S.REWARD_MEAN].attrs["metric_name"] = SERIES_METRICS[S.REWARD_MEAN]
    ds.attrs.update({"simulator": "simulate_sigmoid_series", "seed": seed})
    return ds, truth


def simulate_arm_step_metrics(
    spec: SigmoidArmsSpec | None = None, seed: int = 0, *, cv: float = 0.1
) -> tuple[xr.Dataset, dict[str, Any]]:
    """The per-step compute metrics of :func:`simulate_sigmoid_arms`'s runs, as SkyRL logs them.

    Per run (``{run_prefix}-{arm}``) and step: ``timing/step`` (seconds; SkyRL's ``Timer``,
    skyrl/train/trainer.py:342,527), ``generate/avg_num_tokens`` (mean response tokens per
    rollout, generators/utils.py:456-459) and ``generate/batch_num_seq`` (rollouts in the
    step, trainer.py:962-967), each mean times a log-normal factor with coefficient of
    variation ``cv`` (``cv = 0``: constant).

    Parameters
    ----------
    spec : SigmoidArmsSpec, optional
        The arms (their ``seconds_per_step`` and ``tokens_per_rollout``) and the design.
    seed : int, default 0
        Seed of the random generator.
    cv : float, default 0.1
        Step-to-step variation of the seconds and the tokens.

    Returns
    -------
    (xarray.Dataset, dict)
        Series (dims run, step; the logged key in ``attrs['metric_name']``) and the truth:
        per arm its run, ``seconds_per_step`` and ``tokens_per_rollout``.
    """
    spec = spec or SigmoidArmsSpec()
    rng = np.random.default_rng([seed, 20261202])
    sigma = float(np.sqrt(np.log1p(cv**2)))
    steps = spec.first_step + np.arange(spec.n_steps)
    runs = [f"{spec.run_prefix}-{a.name}" for a in spec.arms]
    shape = (len(spec.arms), spec.n_steps)

    def noisy(mean: np.ndarray) -> np.ndarray:
        return mean[:, None] * np.exp(sigma * rng.standard_normal(shape) - sigma**2 / 2)

    seconds = noisy(np.array([a.seconds_per_step for a in spec.arms]))
    tokens = noisy(np.array([a.tokens_per_rollout for a in spec.arms]))
    lengths = np.array([[min(a.n_steps or spec.n_steps, spec.n_steps)] for a in spec.arms])
    ran = np.arange(spec.n_steps)[None, :] < lengths
    keys = {"timing/step": seconds, "generate/avg_num_tokens": tokens}
    keys["generate/batch_num_seq"] = np.full(shape, float(spec.prompts_per_step * spec.samples_per_prompt))
    names = metric_variable_names(list(keys))
    ds = xr.Dataset(
        {names[k]: ((S.RUN, S.STEP), np.where(ran, v, np.nan)) for k, v in keys.items()},
        coords={S.RUN: runs, S.STEP: steps},
    )
    for key, var in names.items():
        ds[var].attrs["metric_name"] = key
    ds.attrs.update({"simulator": "simulate_arm_step_metrics", "seed": seed, "cv": cv})
    truth = {
        a.name: {"run": run, "seconds_per_step": a.seconds_per_step, "tokens_per_rollout": a.tokens_per_rollout}
        for a, run in zip(spec.arms, runs, strict=True)
    }
    return ds, truth


# =========================================================== (c) per-step series
@dataclass(frozen=True)
class SeriesSpec:
    """Per-step training metrics of one run.

    Per step, ``prompts_per_step`` prompts get success probabilities
    p ~ Beta(m kappa, (1 - m) kappa) where m follows ``reward`` knots and kappa is
    solved so that E[1 - (1 - p)^k] follows ``pass_at_k`` knots; each prompt draws
    ``k`` binary rollouts. Logged mean reward and pass@k are the batch estimates.
    Entropy follows ``entropy`` knots plus Gaussian noise ``entropy_sd``.

    Parameters
    ----------
    run : str, default "sim-series"
        Name of the run (the ``run`` coordinate).
    n_steps : int, default 35
        Number of consecutive steps.
    first_step : int, default 1
        Number of the first step; the steps are ``first_step .. first_step + n_steps - 1``.
    k : int, default 8
        Rollouts per prompt, and the k of pass@k.
    prompts_per_step : int, default 64
        Prompts per step (the batch behind each logged value).
    reward : tuple of (step, value) pairs, default ``((1, 0.30), (15, 0.50), (35, 0.50))``
        Knots of the expected mean reward (per-rollout success rate) m, inside (0, 1);
        linear between knots, constant beyond the ends.
    pass_at_k : tuple of (step, value) pairs, default ``((1, 0.62), (35, 0.64))``
        Knots of the expected pass@k; at every step it must lie strictly between m and
        1 - (1 - m)^k, else ``ValueError``.
    entropy : tuple of (step, value) pairs, default ``((1, 0.08), (35, 0.08))``
        Knots of the expected policy entropy.
    entropy_sd : float, default 0.002
        Standard deviation of the Gaussian noise added to the entropy at each step.
    metadata : dict of str to str, default empty
        Extra attributes copied into the simulated Dataset's ``attrs``.
    components : tuple of (metric key, weight, knots, units), default empty
        A composite reward (e.g. code contests' ``0.7 * pass_ratio + 0.3 * tag_f1``):
        per component its logged key, its weight in the reward, the knots of its expected
        per-rollout mean and its number of units (test cases, tags). Per step and prompt
        q ~ Beta(m ``component_concentration``, (1 - m) ``component_concentration``) and each
        of the ``k`` rollouts scores Binomial(units, q) / units; the logged component is
        the batch mean and the logged reward the weighted sum of the batch means (so
        ``reward`` is unused). Such a run has no binary success: ``pass_at_k`` is missing.
    component_concentration : float, default 8.0
        Beta concentration of the per-prompt component means (the prompt clustering).
    """

    run: str = "sim-series"
    n_steps: int = 35
    first_step: int = 1
    k: int = 8
    prompts_per_step: int = 64
    reward: Knots = ((1, 0.30), (15, 0.50), (35, 0.50))
    pass_at_k: Knots = ((1, 0.62), (35, 0.64))
    entropy: Knots = ((1, 0.08), (35, 0.08))
    entropy_sd: float = 0.002
    metadata: dict[str, str] = field(default_factory=dict)
    components: tuple[tuple[str, float, Knots, int], ...] = ()
    component_concentration: float = 8.0


def _component_series(
    spec: SeriesSpec, steps: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The logged reward and per-component batch means (and the expected curves) of a
    composite-reward run (:class:`SeriesSpec` ``components``)."""
    kappa = spec.component_concentration
    reward = np.zeros(len(steps))
    observed, expected = {}, {}
    for key, weight, knots, units in spec.components:
        m = curves.piecewise_linear(steps, knots)
        q = rng.beta(m[:, None] * kappa, (1 - m[:, None]) * kappa, size=(len(steps), spec.prompts_per_step))
        score = rng.binomial(units, q[..., None], size=(*q.shape, spec.k)) / units
        observed[key] = score.mean(axis=(1, 2))
        expected[key] = m
        reward += weight * observed[key]
    return reward, observed, expected


def simulate_series(spec: SeriesSpec | None = None, seed: int = 0) -> tuple[xr.Dataset, dict[str, Any]]:
    """Simulate per-step training-metric series (mean reward, pass@k, policy entropy).

    Parameters
    ----------
    spec : SeriesSpec, optional
        The run to simulate; ``None`` (the default) means ``SeriesSpec()``.
    seed : int, default 0
        Seed of the random generator; the same spec and seed give identical output.

    Returns
    -------
    (xarray.Dataset, dict)
        Dims (run, step); variables ``reward_mean``, ``pass_at_k`` (attr ``k``),
        ``policy_entropy`` with the SkyRL metric names in ``attrs['metric_name']`` of
        each variable. Truth: the expected curves.

        The ``run`` dim has the one run ``spec.run``; Dataset ``attrs`` hold
        ``simulator``, ``seed``, ``spec`` and ``spec.metadata``. The truth dict has keys
        ``spec`` (the spec as a dict), ``curves`` (dim step: ``reward_mean``,
        ``pass_at_k``, ``policy_entropy`` and the Beta ``concentration`` kappa) and
        ``seed``. A composite-reward run (``spec.components``) adds one variable per
        component (its logged key in ``attrs['metric_name']``, the name as
        :func:`saturation.series.metric_variable_names` gives it) to both, and its
        ``pass_at_k`` and ``concentration`` are NaN.
    """
    spec = spec or SeriesSpec()
    rng = np.random.default_rng(seed)
    steps = np.arange(spec.first_step, spec.first_step + spec.n_steps)
    ent = curves.piecewise_linear(steps, spec.entropy)
    parts: dict[str, np.ndarray] = {}
    if spec.components:
        reward_obs, parts, expected = _component_series(spec, steps, rng)
        m = sum(w * expected[key] for key, w, _, _ in spec.components)
        pk = kappa = pass_obs = np.full(len(steps), np.nan)
    else:
        m = curves.piecewise_linear(steps, spec.reward)
        pk = curves.piecewise_linear(steps, spec.pass_at_k)
        kappa = curves.beta_concentration_for_pass_at_k(m, pk, spec.k)
        p = rng.beta(
            m[:, None] * kappa[:, None], (1 - m[:, None]) * kappa[:, None], size=(spec.n_steps, spec.prompts_per_step)
        )
        succ = rng.binomial(spec.k, p)
        reward_obs = succ.mean(axis=1) / spec.k
        pass_obs = (succ > 0).mean(axis=1)
    ent_obs = ent + spec.entropy_sd * rng.standard_normal(spec.n_steps)
    coords = {S.RUN: [spec.run], S.STEP: steps}
    ds = xr.Dataset(
        {
            "reward_mean": ((S.RUN, S.STEP), reward_obs[None]),
            "pass_at_k": ((S.RUN, S.STEP), pass_obs[None]),
            "policy_entropy": ((S.RUN, S.STEP), ent_obs[None]),
        },
        coords=coords,
    )
    for var, metric in SERIES_METRICS.items():
        ds[var].attrs["metric_name"] = metric.format(k=spec.k)
    ds["pass_at_k"].attrs["k"] = spec.k
    names = metric_variable_names(list(parts))
    for key, values in parts.items():
        ds[names[key]] = ((S.RUN, S.STEP), values[None])
        ds[names[key]].attrs["metric_name"] = key
    ds.attrs.update({"simulator": "simulate_series", "seed": seed, "spec": repr(spec), **spec.metadata})
    truth = {
        "spec": asdict(spec),
        "curves": xr.Dataset(
            {
                "reward_mean": (S.STEP, m),
                "pass_at_k": (S.STEP, pk),
                "policy_entropy": (S.STEP, ent),
                "concentration": (S.STEP, kappa),
                **{names[key]: (S.STEP, expected[key]) for key in parts},
            },
            coords={S.STEP: steps},
        ),
        "seed": seed,
    }
    return ds, truth


def simulate_series_runs(specs: Sequence[SeriesSpec], seed: int = 0) -> tuple[xr.Dataset, dict[str, Any]]:
    """Several runs of :func:`simulate_series` as one Dataset (dims run, step).

    Run ``i`` of ``specs`` is simulated with seed ``seed + i``; the runs are joined on
    their steps (outer join: a run's missing steps are NaN) and each variable keeps the
    first run's attributes. Truth: each run's truth under its ``spec.run``.

    Parameters
    ----------
    specs : sequence of SeriesSpec
        One spec per run, with distinct ``run`` names.
    seed : int, default 0
        Seed of the first run; run ``i`` uses ``seed + i``.

    Returns
    -------
    (xarray.Dataset, dict)
        Dims (run, step), the runs in the order of ``specs`` and the union of their
        steps; variables ``reward_mean``, ``pass_at_k``, ``policy_entropy`` as in
        :func:`simulate_series`. The truth dict maps each ``spec.run`` to that run's
        :func:`simulate_series` truth.
    """
    parts, truths = [], {}
    for i, spec in enumerate(specs):
        ds, truth = simulate_series(spec, seed=seed + i)
        parts.append(ds)
        truths[spec.run] = truth
    ds = xr.concat(parts, dim=S.RUN, join="outer", combine_attrs="drop_conflicts")
    for var in parts[0].data_vars:
        ds[var].attrs = parts[0][var].attrs
    return ds, truths


def simulate_prompt_groups(spec: SeriesSpec | None = None, seed: int = 0) -> tuple[xr.Dataset, dict[str, Any]]:
    """Simulate the trials behind :func:`simulate_series`: per step ``prompts_per_step``
    prompts (new instance ids each step) with p ~ Beta(m kappa, (1 - m) kappa) and ``k``
    binary rollouts each (reward 0/1, all graded).

    Parameters
    ----------
    spec : SeriesSpec, optional
        The run to simulate (its entropy fields are unused); ``None`` (the default)
        means ``SeriesSpec()``.
    seed : int, default 0
        Seed of the random generator; the same spec and seed give identical output.

    Returns
    -------
    (xarray.Dataset, dict)
        Trial Dataset (coords run, step, instance_id, sample) and the truth: curves of
        pass@1 (``reward_mean``) and ``pass_at_k`` per step, the concentration, ``k``.

        The Dataset has dims ``trial`` (``n_steps * prompts_per_step * k``) and ``level``
        (empty), instance ids ``prompt-<step index>-<prompt>``, variables ``graded``
        (all true) and ``reward`` (0 or 1). The truth dict has keys ``k``, ``seed`` and
        ``curves`` (dim step: ``reward_mean``, ``pass_at_k``, ``concentration``).
    """
    spec = spec or SeriesSpec()
    rng = np.random.default_rng(seed)
    steps = np.arange(spec.first_step, spec.first_step + spec.n_steps)
    m = curves.piecewise_linear(steps, spec.reward)
    pk = curves.piecewise_linear(steps, spec.pass_at_k)
    kappa = curves.beta_concentration_for_pass_at_k(m, pk, spec.k)
    p = rng.beta(
        m[:, None] * kappa[:, None], (1 - m[:, None]) * kappa[:, None], size=(spec.n_steps, spec.prompts_per_step)
    )
    outcome = rng.random((spec.n_steps, spec.prompts_per_step, spec.k)) < p[:, :, None]
    t, i, s = np.meshgrid(np.arange(spec.n_steps), np.arange(spec.prompts_per_step), np.arange(spec.k), indexing="ij")
    frame = pd.DataFrame(
        {
            S.RUN: spec.run,
            S.STEP: steps[t.ravel()],
            S.INSTANCE_ID: [f"prompt-{a}-{b}" for a, b in zip(t.ravel(), i.ravel(), strict=True)],
            S.SAMPLE: s.ravel(),
            S.GRADED: True,
            S.REWARD: outcome.ravel().astype(float),
        }
    )
    ds = dataset_from_frame(frame, levels=[], sources=["simulate_prompt_groups"])
    ds.attrs.update({"simulator": "simulate_prompt_groups", "seed": seed, "spec": repr(spec)})
    truth = {
        "k": spec.k,
        "seed": seed,
        "curves": xr.Dataset(
            {"reward_mean": (S.STEP, m), "pass_at_k": (S.STEP, pk), "concentration": (S.STEP, kappa)},
            coords={S.STEP: steps},
        ),
    }
    return ds, truth
