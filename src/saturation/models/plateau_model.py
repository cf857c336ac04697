"""The plateau model itself: its priors scaled to the data (:func:`resolve_priors`), the
candidate change points, the likelihoods (Gaussian, binomial, ZOIB) marginalised over the
candidates, the PyMC graph (:func:`build_plateau_model`), the data caveats, the prior
predictive, and the alternatives the hinge is compared with (a line, an exponential
approach: :func:`fit_alternative`, exact leave-one-out :func:`exact_loo`)."""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import curves
from saturation import schema as S
from saturation._lazy import lazy
from saturation.configs import PlateauConfig, PlateauPriors, SamplerConfig
from saturation.limits import (
    OptionError,
)
from saturation.models._exact import (
    AR1_PRIOR,
    AUTO_NOISE_PRIOR,
    LOO_TAU_STRIDE,
    RhoPrior,
    alternative_level,
    exact_levels,
    sample_alternative_exact,
)
from saturation.models.plateau_data import BOUNDED_STATS, StepData, step_data
from saturation.models.sampling import (
    diagnostics,
    sample_model,
    stamp_attrs,
    warn_if_not_converged,
)

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
    from scipy import special, stats
else:  # imported on first use: the exact Gaussian path needs none of them (ARCHITECTURE.md)
    az, pm, pytensor, pt, special, stats = map(
        lazy, ("arviz", "pymc", "pytensor", "pytensor.tensor", "scipy.special", "scipy.stats")
    )


NP_OPS = SimpleNamespace(log=np.log, gammaln=lambda x: special.gammaln(x), cumsum=np.cumsum, exp=np.exp)


PT_OPS: Any = pt  # PyTensor's log, gammaln, cumsum and exp: the names NP_OPS gives (pt is looked up on first use)


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


#: on the step axis: at least this many logged points on each side of a candidate
MIN_SEGMENT_POINTS = 2


#: at most this many candidates on the step axis: memory and time grow with candidates x
#: steps (the AR(1) noise model rotates every candidate's design). A longer grid keeps the
#: logged steps and the midpoints between them, thinned evenly to this many.
MAX_CANDIDATES = 600


def candidate_grid(steps: np.ndarray, min_segment: int, *, on_step_axis: bool = False) -> np.ndarray:
    """Change-point candidates.

    Observed-step grid (the default): logged steps with at least ``min_segment`` logged
    steps before (t < c) and at least ``min_segment`` at or after (t >= c).

    ``on_step_axis``: every whole step c whose segments each span at least ``min_segment``
    steps of the run (c - t_first >= min_segment, t_last + 1 - c >= min_segment) and hold at
    least :data:`MIN_SEGMENT_POINTS` logged points, so that a knee between two sparse logged
    points (a validation metric every 10 steps) is representable. On a series logged at
    every step both grids are the same. When there are more than :data:`MAX_CANDIDATES`
    whole steps, the candidates are the logged steps (their whole part: a bin mean's step
    may be fractional) and the whole steps midway between two logged steps, thinned evenly
    to :data:`MAX_CANDIDATES` when they are more, filled up to it with an even lattice of
    whole steps when they are fewer (sparse logging).
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
        mids = np.floor((steps[:-1] + steps[1:]) / 2.0)
        pool = np.unique(np.concatenate([np.floor(steps), mids]))
        pool = pool[(pool >= grid[0]) & (pool <= grid[-1])]
        if len(pool) > MAX_CANDIDATES:
            pool = pool[np.unique(np.round(np.linspace(0, len(pool) - 1, MAX_CANDIDATES)).astype(int))]
        else:  # sparse logging: an even lattice of whole steps fills the rest
            lattice = np.round(np.linspace(grid[0], grid[-1], MAX_CANDIDATES - len(pool)))
            pool = np.unique(np.concatenate([pool, lattice]))
        grid = pool
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
    gives (C, T). Works with NumPy (``xp=NP_OPS``) and PyTensor (``xp=PT_OPS``) so the model
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
    grid = change_grid(data, config)
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
    pooled = is_pooled(config, n_levels)
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
                PT_OPS,
                d["y"],
                d["var_mean"] + params["tau"][:, 0] ** 2,
                d["t"],
                grid_positions(data.steps, grid),
                {k_: v[:, 0] for k_, v in params.items() if k_ not in ("var_mean", "tau")},
                d["t0"],
            )
        else:
            obs = {name: d[name][:, None, :] for name in ("y", "n", "k", *BOUNDED_STATS) if name in d}
            ll = step_loglik(
                PT_OPS, obs, d["t"][None, None, :], d["grid"][None, :, None], params, d["t0"], config.likelihood
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


def change_grid(data: StepData, config: PlateauConfig) -> np.ndarray:
    """The known break as a one-point grid, or every candidate step."""
    if config.breakpoint is None:
        return candidate_grid(data.steps, config.priors.min_segment, on_step_axis=config.exact)
    if not (data.steps[0] < config.breakpoint <= data.steps[-1]):
        raise OptionError(
            f"breakpoint {config.breakpoint:g} outside the observed steps: it must lie after the first step "
            f"{data.steps[0]:g} and at or before the last {data.steps[-1]:g}"
        )
    return np.array([float(config.breakpoint)])


def evidence_weight(data: StepData, config: PlateauConfig) -> float:
    """The pooled model's evidence weight (:func:`level_dependence`; 1 unless pooled)."""
    if not is_pooled(config, len(data.levels)):
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
        if is_pooled(config, len(data.levels)):
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


def is_pooled(config: PlateauConfig, n_levels: int) -> bool:
    """Several levels with an unknown, shared (pooled) change point."""
    return config.breakpoint is None and config.shared and n_levels > 1


def grid_positions(steps: np.ndarray, grid: np.ndarray) -> np.ndarray:
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


ALTERNATIVES = ("linear", "exponential")


#: prior sd of the exponential alternative's log time scale (centre: log of a quarter of the span)
ALTERNATIVE_LOG_SCALE_SD = 1.0
#: the S-shaped candidate's prior on its log width: centred on log(span / this) ...
SIGMOID_WIDTH_FRACTION = 10.0
#: ... with this sd, truncated to [this many median spacings of the logged steps (steeper is
#: a jump, the break's) ...
SIGMOID_LOG_WIDTH_SD = 1.0
SIGMOID_MIN_WIDTH_SPACINGS = 3.0
#: ... , the span / this (12 % to 88 % of the rise within the run: slower is the line's)]
SIGMOID_MAX_WIDTH_FRACTION = 4.0


def sigmoid_log_width_bounds(steps: np.ndarray) -> tuple[float, float]:
    """The S-shaped candidate's bounds on its log width for a run logged at ``steps``
    (:data:`SIGMOID_MIN_WIDTH_SPACINGS`, :data:`SIGMOID_MAX_WIDTH_FRACTION`; at least a
    factor 2 apart on short or sparse runs)."""
    spacing = float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0
    span = max(float(steps[-1] - steps[0]), 1.0)
    lo = float(np.log(SIGMOID_MIN_WIDTH_SPACINGS * max(spacing, 1e-9)))
    return lo, max(float(np.log(span / SIGMOID_MAX_WIDTH_FRACTION)), lo + float(np.log(2.0)))


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
            draws=sampler.draws_for(exact=True),
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


def noise_prior(config: PlateauConfig, data: StepData | None = None) -> RhoPrior | None:
    """The prior of the AR(1) coefficient the exact sampler sums over (uniform for "ar1",
    half its mass on independent noise for "auto"), or None for independent noise.

    The coefficient is per step of the step axis (two points ``d`` steps apart correlate by
    :math:`\\rho^d`). A series fitted on bin means (``data.summary["binned"]``, bins of
    ``w`` points on average, :func:`~saturation.models.plateau_data.bin_series`) gets the
    grid :math:`\\rho^{1/w}`, so that consecutive bins correlate by the same values as
    consecutive points of an unbinned series (with the per-step grid, bins of 40 points
    could correlate by at most :math:`0.96^{40} = 0.2`: persistent noise would be read as
    independent)."""
    base = {"ar1": AR1_PRIOR, "auto": AUTO_NOISE_PRIOR}.get(config.noise or "independent")
    if base is None or data is None or not data.summary.get("binned") or len(data.steps) < 2:
        return base
    width = float(data.steps[-1] - data.steps[0]) / (len(data.steps) - 1)  # steps between bin centres
    return RhoPrior(rho=tuple(float(r) ** (1.0 / width) for r in base.rho), p_independent=base.p_independent)


def exact_loo(data: StepData, kind: str, config: PlateauConfig | None = None) -> np.ndarray:
    """The pointwise exact leave-one-out log predictive densities: the first of
    :func:`exact_loo_lppd`'s results.

    Parameters
    ----------
    data, kind, config
        As :func:`exact_loo_lppd`.

    Returns
    -------
    numpy.ndarray
        (levels, steps) :math:`\\log p(y_i \\mid y_{-i})`.
    """
    return exact_loo_lppd(data, kind, config)[0]


def exact_loo_lppd(data: StepData, kind: str, config: PlateauConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact leave-one-out predictive densities and the lppd of the same conditional
    densities, (levels, steps) each, of the Gaussian curves whose parameters are integrated
    analytically (:meth:`~saturation.models._exact.Level.loo`,
    :meth:`~saturation.models._exact.DependentLevel.loo_lppd`).

    ``kind``: "hinge" (the change-point model with separate change points, or a known
    break), "linear" or "exponential" (:func:`fit_alternative`'s curves). Each deletion is
    closed-form given the change point (or time scale), tau and rho; these are summed over
    the full data's grids, whose priors stay those resolved on all the data. The step noise
    is ``config.noise``'s for every kind: independent, or AR(1) ("ar1", "auto"), where a
    left-out step is predicted from the others' joint Gaussian (its neighbours included), so
    that curves compared by LOO are compared under one noise model.

    Parameters
    ----------
    data : StepData
        Per-step inputs.
    kind : {"hinge", "linear", "exponential"}
        The model.
    config : PlateauConfig, optional
        Settings of the hinge (known break, continuity, priors, noise) and the priors and
        noise of the alternatives; default :class:`PlateauConfig`.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        (levels, steps) pointwise :math:`\\log p(y_i \\mid y_{-i})` and :math:`\\log
        E_{\\theta \\mid y}\\, p(y_i \\mid y_{-i}, \\theta)` (the lppd behind ``p_loo``).
    """

    config = config or PlateauConfig()
    if config.likelihood != "gaussian":
        raise ValueError("exact LOO needs the Gaussian likelihood")
    t = data.steps
    noise = noise_prior(config, data)
    loo, lppd = np.empty(data.y.shape), np.empty(data.y.shape)
    if kind == "hinge":
        if is_pooled(config, len(data.levels)):
            raise ValueError("exact LOO is implemented for separate change points or a known break, not pooled ones")
        grid = change_grid(data, config)
        pri = resolve_priors(config.priors, data, grid=grid)
        # "auto", the mixture of the two shapes (1/2 each): with E_s = log Z_s(y) and
        # l_s = log p(y_i | y_-i, s) = E_s - log Z_s(y_-i),
        # log p(y_i | y_-i) = logaddexp(E_h, E_j) - logaddexp(E_h - l_h, E_j - l_j);
        # the lppd: each shape's by its posterior weight
        shapes = (False, True) if config.continuity == "auto" else (config.continuity == "jump",)
        by_shape = [exact_levels(data.y, data.var_mean, t, grid, pri, jump, noise) for jump in shapes]
        for j in range(len(data.levels)):
            parts = [(lv[j].log_evidence, *lv[j].loo_lppd()) for lv in by_shape]
            (e_h, l_h, m_h), (e_j, l_j, m_j) = parts[0], parts[-1]
            gated = config.jump_gate is not None and e_j - e_h < np.log(config.jump_gate)
            if len(parts) == 1 or gated:  # one shape, or the hinge alone below the gate
                loo[j], lppd[j] = l_h, m_h
            else:
                loo[j] = np.logaddexp(e_h, e_j) - np.logaddexp(e_h - l_h, e_j - l_j)
                lppd[j] = np.logaddexp(e_h + m_h, e_j + m_j) - np.logaddexp(e_h, e_j)
        return loo, lppd
    if kind not in ALTERNATIVES:
        raise ValueError(f"kind must be 'hinge', 'linear' or 'exponential', got {kind!r}")
    pri, m0, sd0, log_scale_mu = _alternative_priors(data, kind, config.priors)
    for j in range(len(data.levels)):
        alt, _, log_prior = alternative_level(
            kind,
            data.y[j],
            data.var_mean[j],
            t,
            m0[j],
            sd0[j],
            float(pri["tau_sd"][j]),
            float(log_scale_mu[j]),
            ALTERNATIVE_LOG_SCALE_SD,
            noise_prior=noise,
        )
        loo[j], lppd[j] = alt.loo_lppd() if log_prior is None else alt.loo_lppd(log_prior, LOO_TAU_STRIDE)
    return loo, lppd


def elpd_exact(idata: az.InferenceData, loo_i: np.ndarray, lppd_i: np.ndarray | None = None) -> Any:
    """ArviZ's ELPD result (an ``ELPDData``, as ``az.loo(idata, pointwise=True)`` returns it)
    of the exact pointwise LOO values ``loo_i`` (levels, steps), for ``az.compare``: no PSIS is
    run, so there are no Pareto k (they would describe an estimate that is not used) and no
    warning. ``p_loo`` is the lppd minus the ELPD, the lppd from ``lppd_i`` (the exact
    conditional densities' posterior means, :func:`exact_loo_lppd`) or, without it, from the
    draws' pointwise log likelihood (independent step noise: under AR(1) noise the draws'
    pointwise likelihood is not the density LOO leaves a step out of)."""
    ll = idata.log_likelihood["y"]
    n_samples = int(ll.sizes["chain"] * ll.sizes["draw"])
    flat = np.asarray(loo_i, dtype=float).reshape(-1)
    if lppd_i is None:
        draws = ll.stack(__sample__=("chain", "draw")).transpose("__sample__", ...).to_numpy()
        lppd = special.logsumexp(draws.reshape(n_samples, -1), axis=0) - np.log(n_samples)
    else:
        lppd = np.asarray(lppd_i, dtype=float).reshape(-1)
    pointwise = ll.isel(chain=0, draw=0, drop=True)
    return az.ELPDData(
        data=[
            float(flat.sum()),
            float(np.sqrt(flat.size * np.var(flat))),
            float(lppd.sum() - flat.sum()),
            n_samples,
            flat.size,
            False,
            pointwise.copy(data=flat.reshape(pointwise.shape)).rename("loo_i"),
            "log",
        ],
        index=["elpd_loo", "se", "p_loo", "n_samples", "n_data_points", "warning", "loo_i", "scale"],
    )


def asymptote_bounds(
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

    Draws the change point uniformly from its candidate grid (or the known break; the
    pooled model: a common change point uniform on the grid, a spread from its HalfNormal
    prior and each level's change point around it, as the model weighs them), the curve
    parameters from :class:`PlateauPriors` (as resolved for ``data``), and per-step means
    from the Gaussian likelihood with the data's own within-step variances. Calibration
    draws its simulations from here: the model's priors as the fit resolves them.


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
        ``observed``; per draw and level the parameters ``changepoint``, ``start``,
        ``value_at_changepoint``, ``late_slope``, ``jump`` and ``tau``; pooled, per draw the
        ``changepoint_spread``.
    """
    config = config or PlateauConfig()
    sd = data if isinstance(data, StepData) else step_data(data, response=response, levels=levels)
    rng = np.random.default_rng([seed, 11])
    n_levels = len(sd.levels)
    t = sd.steps
    t0 = float(t[0])
    grid = change_grid(sd, config)
    pri = resolve_priors(config.priors, sd, grid=grid)

    def normal(mu: np.ndarray, sd_: np.ndarray) -> np.ndarray:
        return rng.normal(mu, sd_, size=(draws, n_levels))[..., None]

    pooled = is_pooled(config, n_levels)
    if pooled:  # a common change point, a spread, each level's change point weighed around it
        c0 = grid[rng.integers(0, len(grid), size=draws)]
        spread = np.abs(rng.normal(0.0, config.priors.spread_sd, size=draws))
        logw = -0.5 * ((grid[None, :] - c0[:, None]) / curves.effective_spread(np, spread)[:, None]) ** 2
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        cdf = np.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)
        c_idx = np.minimum((rng.random((draws, n_levels))[:, :, None] > cdf[:, None, :]).sum(axis=2), len(grid) - 1)
    else:
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
    per_level = ("draw", S.LEVEL)
    out = xr.Dataset(
        {
            "mu": (("draw", S.LEVEL, S.STEP), mu),
            "y": (("draw", S.LEVEL, S.STEP), y),
            "changepoint": (per_level, c[..., 0]),
            "start": (per_level, start[..., 0]),
            S.VALUE_AT_CHANGEPOINT: (per_level, level[..., 0]),
            "late_slope": (per_level, late[..., 0]),
            "jump": (per_level, np.broadcast_to(jump, (draws, n_levels, 1))[..., 0]),
            "tau": (per_level, tau[..., 0]),
            "observed": ((S.LEVEL, S.STEP), sd.y),
        },
        coords=coords,
    )
    if pooled:
        out[S.CHANGEPOINT_SPREAD] = ("draw", spread)
    return out
