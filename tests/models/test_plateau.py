"""Plateau model: recovery with known truth, null scenarios, frequentist cross-check."""

from __future__ import annotations

import warnings
from dataclasses import replace

import arviz as az
import numpy as np
import pytest
import xarray as xr
from scipy import special

from saturation import schema as S
from saturation.aggregate import aggregate
from saturation.frequentist import split_ols
from saturation.models import ConvergenceWarning, SamplerConfig, fit_plateau, plateau, plateau_model, verdicts
from saturation.models.plateau import StepData, plateau_frame, step_data
from saturation.models.plateau_model import candidate_grid, exact_loo
from saturation.models.sampling import diagnostics, warn_if_not_converged
from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau

#: the Gaussian model's default sampler is "exact" (independent draws); other likelihoods use nutpie
FAST = SamplerConfig(draws=1000, tune=1500, chains=4)
LONG = SamplerConfig(draws=2000, tune=2000, chains=4)
#: NUTS on the same model: the reference the exact sampler is checked against
NUTS = SamplerConfig(draws=2000, tune=1500, chains=4, sampler="nutpie")


def _sim(level: LevelSpec, seed: int, n_steps: int = 40, prompts_per_step: int = 16, samples_per_prompt: int = 4):
    spec = PlateauSpec(
        levels=(level,),
        n_steps=n_steps,
        prompts_per_step=prompts_per_step,
        samples_per_prompt=samples_per_prompt,
        pool_size=2000,
        task_sd=0.5,
        step_sd=0.05,
        level_step_sd=0.0,
    )
    return simulate_plateau(spec, seed)


def _inside(interval, value):
    return interval["hdi"][0] <= value <= interval["hdi"][1]


@pytest.mark.parametrize("changepoint", [10.0, 20.0, 30.0])
def test_recovers_changepoint_and_slopes(changepoint):
    level = LevelSpec("file", 0.55, 0.3 / changepoint, 0.0, changepoint)
    ds, _ = _sim(level, seed=int(changepoint))
    fit = fit_plateau(ds, seed=1, sampler=LONG)
    assert fit.diagnostics["converged"], fit.diagnostics
    est = fit.estimands["levels"]["file"]
    assert _inside(est["changepoint"], changepoint), est["changepoint"]
    assert _inside(est["early_slope"], level.early_slope), est["early_slope"]
    assert _inside(est["late_slope"], 0.0), est["late_slope"]
    assert est["p_early_positive"] > 0.95
    mass = np.array(list(est["changepoint_mass"].values()))
    assert mass.sum() == pytest.approx(1.0)
    steps = np.array([float(s) for s in est["changepoint_mass"]])
    if changepoint <= 20:
        # with enough flat steps after the break the posterior over steps is concentrated;
        # a break 10 steps before the end leaves the data unable to rule out later breaks
        assert mass[np.abs(steps - changepoint) <= 5].sum() > 0.75


def test_steadily_rising_metric_is_not_a_plateau():
    ds, _ = _sim(LevelSpec("file", 0.45, 0.008, 0.008, 1000.0), seed=5)
    fit = fit_plateau(ds, seed=1, sampler=LONG)
    est = fit.estimands["levels"]["file"]
    assert est["p_late_in_rope"] < 0.1
    # no plateau before the last steps
    assert est["p_plateaued_by_step"]["30"] < 0.1


def test_flat_metric_has_no_early_trend():
    ds, _ = _sim(LevelSpec("file", 0.7, 0.0, 0.0, 20.0), seed=6)
    fit = fit_plateau(ds, seed=1, sampler=LONG)  # no change point to find: slow mixing
    est = fit.estimands["levels"]["file"]
    assert 0.1 < est["p_early_positive"] < 0.9
    assert _inside(est["early_slope"], 0.0)


def test_jump_model_at_known_break_agrees_with_split_ols():
    """Frequentist cross-check on data whose segments are linear (true hinge at the split)."""
    ds, _ = _sim(LevelSpec("file", 0.55, 0.006, 0.001, 20.0), seed=7)
    fit = fit_plateau(ds, breakpoint=20, continuity="jump", seed=1, sampler=FAST)
    agg = aggregate(ds, by=(S.STEP,))
    ols = split_ols(agg[S.STEP].values, agg["f1_mean"].sel({S.LEVEL: "file"}).values, 20)
    est = fit.estimands["levels"]["file"]
    for seg in ("early", "late"):
        bayes = est[f"{seg}_slope"]
        assert abs(bayes["mean"] - ols.loc[seg, "slope"]) < 0.5 * ols.loc[seg, "se"] + 0.5 * bayes["sd"]
        assert bayes["sd"] == pytest.approx(ols.loc[seg, "se"], rel=0.6)
    assert est["changepoint"] is None


def test_same_seed_same_numbers():
    ds, _ = _sim(LevelSpec("file", 0.55, 0.02, 0.0, 15.0), seed=8)
    a = fit_plateau(ds, seed=3, sampler=FAST).to_dict()
    b = fit_plateau(ds, seed=3, sampler=FAST).to_dict()
    assert a["levels"] == b["levels"]


def test_outputs_and_attrs():
    ds, _ = _sim(LevelSpec("file", 0.55, 0.02, 0.0, 15.0), seed=9)
    fit = fit_plateau(ds, seed=1, sampler=FAST)
    out = fit.to_dict()
    assert out["model"]["breakpoint"] == "unknown"
    assert set(out["diagnostics"]) >= {"rhat_max", "ess_bulk_min", "divergences", "converged"}
    lvl = out["levels"]["file"]
    for key in ("changepoint", "early_slope", "late_slope", "start", "end", "headroom_to_max"):
        assert set(lvl[key]) == {"mean", "median", "sd", "hdi"}
    assert set(lvl["p_plateaued_by_step"]) == {str(s) for s in range(40)}
    table = fit.summary()
    assert table.attrs["converged"] == fit.diagnostics["converged"]
    assert "saturation_version" in fit.idata.posterior.attrs
    assert "config" in fit.idata.posterior.attrs
    frame = plateau_frame(fit)
    assert len(frame) == 40
    assert (frame.hdi_low <= frame["mean"]).all() and (frame["mean"] <= frame.hdi_high).all()
    assert "log_likelihood" in fit.idata.groups()


def test_non_converged_fit_warns_loudly(monkeypatch):
    """Plumbing with made-up diagnostics: stuck chains fail the check, the warning is loud, and
    a fit whose diagnostics fail says so in its table (no real non-converging NUTS run)."""
    rng = np.random.default_rng(0)
    stuck = rng.normal(size=(4, 100, 1)) + np.arange(4)[:, None, None]  # four chains, four places
    diag = diagnostics(az.from_dict(posterior={"x": stuck[..., 0]}), ["x"])
    assert not diag["converged"] and diag["rhat_max"] > 1.2
    with pytest.warns(ConvergenceWarning, match="DID NOT CONVERGE"):
        warn_if_not_converged(diag, "made-up fit")
    ds, _ = _sim(LevelSpec("file", 0.55, 0.02, 0.0, 15.0), seed=10)
    real = plateau.diagnostics
    monkeypatch.setattr(plateau, "diagnostics", lambda idata, names: {**real(idata, names), **diag})
    with pytest.warns(ConvergenceWarning, match="DID NOT CONVERGE"):
        fit = fit_plateau(ds, seed=1)
    assert not fit.diagnostics["converged"]
    assert fit.summary().attrs["converged"] is False


def test_series_input_and_validation():
    from saturation.simulate import SeriesSpec, simulate_series

    series, _ = simulate_series(SeriesSpec(), seed=0)
    sd = step_data(series, response="reward_mean")
    assert sd.levels == ["reward_mean"]
    assert np.isinf(sd.n).all()
    with pytest.raises(ValueError, match="cannot hold two segments"):
        candidate_grid(np.arange(6.0), 5)
    ds, _ = _sim(LevelSpec("file", 0.55, 0.02, 0.0, 15.0), seed=11)
    with pytest.raises(ValueError, match="invalid plateau configuration"):
        fit_plateau(ds, continuity="smooth")
    with pytest.raises(ValueError, match="binary response"):
        fit_plateau(ds, likelihood="binomial")


@pytest.mark.slow
def test_loo_prefers_a_change_point_over_a_line_on_plateau_data():
    from saturation.models import compare_plateau_models

    ds, _ = _sim(LevelSpec("file", 0.55, 0.03, 0.0, 10.0), seed=12)
    models = ("hinge", "linear", "exponential")
    table, fits = compare_plateau_models(ds, models=models, seed=1, sampler=FAST, loo_noise="independent")
    assert set(table.index) == {"hinge", "linear", "exponential"}
    assert table.index[-1] == "linear"  # the straight line is the worst description of a plateau
    assert table.loc["linear", "elpd_diff"] > 2 * table.loc["linear", "dse"]
    for idata in fits.values():
        assert "log_likelihood" in idata.groups()
    # under the fit's own noise model ("auto": AR(1) possible) the line is still the worst,
    # by less: a left-out step is also predicted from its neighbours
    table, _ = compare_plateau_models(ds, models=models, seed=1, sampler=FAST)
    assert table.index[-1] == "linear"
    assert table.loc["linear", "elpd_diff"] > table.loc["linear", "dse"]


def test_prior_predictive_covers_the_data_scale():
    from saturation.models.plateau_model import plateau_prior_predictive

    ds, _ = _sim(LevelSpec("file", 0.55, 0.03, 0.0, 10.0), seed=13)
    prior = plateau_prior_predictive(ds, draws=400, seed=1)
    assert prior["y"].dims == ("draw", S.LEVEL, S.STEP)
    obs = prior["observed"].values[0]
    lo, hi = np.quantile(prior["y"].values[:, 0, :], [0.03, 0.97], axis=0)
    # weakly informative: the observed per-step means sit inside the central 94 % prior band
    assert ((obs >= lo) & (obs <= hi)).mean() > 0.9
    # but the prior is not absurdly wide: the band is within a few data ranges
    assert (hi - lo).max() < 10 * np.ptp(obs)
    again = plateau_prior_predictive(ds, draws=400, seed=1)
    np.testing.assert_array_equal(prior["y"].values, again["y"].values)


@pytest.mark.slow
def test_cached_compiled_model_follows_shifted_steps():
    """The compiled model is reused for data of the same shape: the step origin and the
    candidate grid must travel as data, not as constants baked into the first compile."""
    level = LevelSpec("file", 0.5, 0.02, 0.0, 15.0)
    ds, _ = _sim(level, seed=5, n_steps=30)
    sd = step_data(ds)
    shifted = step_data(ds)
    shifted.steps = sd.steps + 100.0
    cfg = SamplerConfig(draws=1000, tune=1500, chains=4, sampler="nutpie")
    a = fit_plateau(sd, seed=2, sampler=cfg).estimands["levels"]["file"]
    b = fit_plateau(shifted, seed=2, sampler=cfg).estimands["levels"]["file"]
    assert b["changepoint"]["mean"] == pytest.approx(a["changepoint"]["mean"] + 100.0, abs=1e-6)
    assert b["early_slope"]["mean"] == pytest.approx(a["early_slope"]["mean"], rel=1e-6)
    assert b["start"]["mean"] == pytest.approx(a["start"]["mean"], rel=1e-6)


@pytest.mark.slow
def test_zoib_likelihood_recovers_changepoint_from_bounded_statistics():
    level = LevelSpec("file", 0.45, 0.015, 0.0, 20.0)
    ds, _ = _sim(level, seed=11)
    sd = step_data(ds)
    assert sd.bounded is not None and set(sd.bounded) == {"n0", "n1", "slogy", "slog1my"}
    fit = fit_plateau(sd, likelihood="zoib", seed=1, sampler=FAST)
    assert fit.diagnostics["converged"], fit.diagnostics
    est = fit.estimands["levels"]["file"]
    assert _inside(est["changepoint"], 20.0), est["changepoint"]
    assert _inside(est["early_slope"], level.early_slope), est["early_slope"]
    assert _inside(est["late_slope"], 0.0), est["late_slope"]
    assert est["p_early_positive"] > 0.95
    # the metric-scale curve follows the observed per-step means
    frame = plateau_frame(fit)
    assert np.corrcoef(frame["observed"], frame["mean"])[0, 1] > 0.8
    assert "step_offset_z" in fit.idata.posterior and "log_likelihood" in fit.idata.groups()


@pytest.mark.slow
def test_zoib_does_not_call_a_rising_metric_a_plateau():
    ds, _ = _sim(LevelSpec("file", 0.35, 0.01, 0.01, 1000.0), seed=12)
    fit = fit_plateau(step_data(ds), likelihood="zoib", seed=1, sampler=FAST)
    est = fit.estimands["levels"]["file"]
    assert fit.diagnostics["converged"], fit.diagnostics
    assert est["p_late_in_rope"] < 0.1
    assert est["p_plateaued_by_step"]["30"] < 0.1
    assert _inside(est["early_slope"], 0.01), est["early_slope"]


def test_zoib_needs_per_trial_bounded_values():
    ds, _ = simulate_plateau(PlateauSpec(levels=(LevelSpec("file", 0.5, 0.01, 0.0, 10.0),), n_steps=20), 1)
    series = step_data(ds)
    series.bounded = None
    with pytest.raises(ValueError, match="zoib"):
        fit_plateau(series, likelihood="zoib")


def test_exact_marginal_likelihood_matches_the_multivariate_normal():
    """log p(y | c, tau) with the curve parameters integrated out, against scipy."""
    from scipy import stats

    from saturation.models._exact import _normal_stats, design

    rng = np.random.default_rng(0)
    t = np.arange(30.0)
    y = 0.5 + 0.01 * np.minimum(t, 12) + rng.normal(0, 0.02, 30)
    var_mean = rng.uniform(1e-4, 4e-4, 30)
    m0, sd0 = np.array([0.5, 0.6, 0.0, 0.0]), np.array([0.2, 0.2, 0.01, 0.1])
    grid = np.array([8.0, 12.0, 20.0])
    x = design(t, grid, 0.0, jump=True)
    tau = np.array([0.005, 0.02])
    logml = _normal_stats(y, var_mean, x, m0, 1 / sd0**2, tau)[0]
    for g, tau_ in enumerate(tau):
        for c in range(len(grid)):
            cov = np.diag(var_mean + tau_**2) + x[c] @ np.diag(sd0**2) @ x[c].T
            ref = stats.multivariate_normal(x[c] @ m0, cov).logpdf(y)
            assert logml[g, c] == pytest.approx(ref, abs=1e-8)


@pytest.mark.parametrize("p", [1, 3, 4])
def test_small_cholesky_and_its_solves_are_numpys(p):
    """The entry-by-entry Cholesky factor and triangular solves the exact draws use, against
    numpy.linalg on many random positive-definite matrices."""
    from saturation.models._exact import back_solve, forward_solve, small_cholesky

    rng = np.random.default_rng(p)
    m = rng.normal(size=(500, p, p))
    a = m @ m.transpose(0, 2, 1) + 0.1 * np.eye(p)
    b = rng.normal(size=(500, p))
    chol = small_cholesky(a)
    full = np.zeros_like(a)
    for i in range(p):
        for j in range(i + 1):
            full[:, i, j] = chol[i][j]
    np.testing.assert_allclose(full, np.linalg.cholesky(a), rtol=1e-10, atol=1e-12)
    x = back_solve(chol, forward_solve(chol, b))  # A^-1 b = L^-T L^-1 b
    np.testing.assert_allclose(x, np.linalg.solve(a, b[..., None])[..., 0], rtol=1e-9, atol=1e-10)
    z = rng.normal(size=(500, p))
    lt_inv_z = back_solve(chol, list(z.T))  # L^-T z: covariance A^-1 when z is standard normal
    np.testing.assert_allclose(np.einsum("dji,dj->di", full, lt_inv_z), z, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("jump", [False, True])
def test_hinge_segment_sums_equal_the_design_matrix_algebra(jump):
    """The linear-in-candidates marginal likelihood (segment sums) equals the design-matrix
    one on irregular steps, with a per-candidate late-slope prior."""
    from saturation.models._exact import _normal_stats, design, hinge_normal_stats

    rng = np.random.default_rng(3)
    t = np.sort(rng.choice(np.arange(200.0), 45, replace=False))
    y = 0.5 + 0.004 * np.minimum(t - t[0], 60) + rng.normal(0, 0.02, len(t))
    var_mean = rng.uniform(1e-4, 4e-4, len(t))
    grid = t[5:-5]
    p = 4 if jump else 3
    m0 = np.array([0.5, 0.6, 0.0, 0.0][:p])
    sd0 = np.column_stack([np.full(len(grid), 0.2), np.full(len(grid), 0.2), rng.uniform(0.001, 0.01, len(grid))])
    if jump:
        sd0 = np.column_stack([sd0, np.full(len(grid), 0.1)])
    tau = np.array([1e-4, 0.005, 0.05])
    ref = _normal_stats(y, var_mean, design(t, grid, float(t[0]), jump), m0, 1 / sd0**2, tau)[0]
    got = hinge_normal_stats(y, var_mean, t, grid, jump, m0, 1 / sd0**2, tau)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-8)
    keep = np.arange(len(t)) != 0  # leave-one-out: the first step deleted, the curve's origin kept
    x = design(t, grid, float(t[0]), jump)[:, keep]
    ref = _normal_stats(y[keep], var_mean[keep], x, m0, 1 / sd0**2, tau)[0]
    got = hinge_normal_stats(y[keep], var_mean[keep], t[keep], grid, jump, m0, 1 / sd0**2, tau, t0=float(t[0]))
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-8)


def _noisy_three_levels():
    levels = (
        LevelSpec("file", 0.6, 0.006, 0.0, 20.0),
        LevelSpec("module", 0.4, 0.006, 0.001, 24.0),
        LevelSpec("entity", 0.3, 0.005, 0.0, 18.0),
    )
    spec = PlateauSpec(levels=levels, n_steps=40, prompts_per_step=4, samples_per_prompt=4, pool_size=400)
    return simulate_plateau(spec, seed=2)[0]


@pytest.mark.parametrize("data", ["embedded", "noisy"])
@pytest.mark.parametrize("shared", [True, False])
def test_exact_change_point_posterior_equals_the_per_draw_conditional(shared, data):
    """The exact sampler's change points (each drawn given c0 and s, their mass averaged
    over those conditionals) and the per-draw conditional p(c | theta, y) used before (and
    still by the NUTS samplers) estimate the same posterior, on the embedded SWE-smith
    replica (sharp: sd under a step) and on a small noisy simulation (sd about 9 steps):
    their change-point means agree within four Monte Carlo standard errors, their 94 %
    HDIs within one step, their masses within a total-variation distance of 0.05."""
    from saturation.models import plateau as P
    from saturation.replica import load_embedded

    ds = load_embedded("swesmith") if data == "embedded" else _noisy_three_levels()
    fit = fit_plateau(ds, shared=shared, seed=3, noise="independent")  # the conditional's noise model
    cfg, sd = fit.config, fit.data
    grid = plateau_model.change_grid(sd, cfg)
    pri = plateau_model.resolve_priors(cfg.priors, sd, cfg.likelihood, grid=grid)
    p = P._param_draws(fit.idata, cfg.likelihood)
    post = fit.idata.posterior
    spread = post[S.CHANGEPOINT_SPREAD].stack(sample=("chain", "draw")).to_numpy() if shared else np.zeros(0)
    obs = {"y": sd.y, "n": np.where(np.isfinite(sd.n), sd.n, 1e12), "k": np.zeros_like(sd.y)}
    w_ev = plateau_model.evidence_weight(sd, cfg)
    cps, mass, _ = P._changepoint_draws(p, obs, sd, cfg, grid, pri, np.random.default_rng(0), spread, w_ev)
    exact = post["changepoint"].stack(sample=("chain", "draw")).transpose("sample", S.LEVEL).to_numpy()
    for j in range(len(sd.levels)):
        mc_se = np.sqrt((exact[:, j].var() + cps[:, j].var()) / len(cps))
        assert abs(exact[:, j].mean() - cps[:, j].mean()) < max(4 * mc_se, 0.02)
        hdi_exact, hdi_cond = az.hdi(exact[:, j], hdi_prob=S.HDI_PROB), az.hdi(cps[:, j], hdi_prob=S.HDI_PROB)
        np.testing.assert_allclose(hdi_exact, hdi_cond, atol=1)
    exact_mass = fit.idata.changepoint_mass["probability"].to_numpy()
    assert 0.5 * np.abs(exact_mass - mass).sum(axis=1).max() < 0.05


@pytest.mark.parametrize(
    ("case", "kwargs"),
    [
        ("separate", {}),
        ("pooled", {"shared": True}),
        ("jump at a known break", {"breakpoint": 14, "continuity": "jump"}),
    ],
)
@pytest.mark.slow
def test_exact_sampler_agrees_with_nuts(case, kwargs):
    """The exact sampler and NUTS (nutpie) draw from the same posterior."""
    specs = [LevelSpec("file", 0.5, 0.02, 0.0, 14.0), LevelSpec("module", 0.3, 0.015, 0.001, 16.0)]
    spec = PlateauSpec(
        levels=tuple(specs if case == "pooled" else specs[:1]),
        n_steps=36,
        prompts_per_step=16,
        samples_per_prompt=4,
        pool_size=2000,
        task_sd=0.5,
        step_sd=0.05,
        level_step_sd=0.0,
    )
    ds, _ = simulate_plateau(spec, 21)
    # the NUTS graph has independent step noise only
    exact = fit_plateau(ds, seed=1, sampler=LONG, noise="independent", **kwargs)
    nuts = fit_plateau(ds, seed=1, sampler=NUTS, noise="independent", **kwargs)
    assert exact.timings["sampler"] == "exact" and nuts.timings["sampler"] == "nutpie"
    assert exact.diagnostics["converged"] and nuts.diagnostics["converged"], nuts.diagnostics
    pe_, pn_ = exact.idata.posterior, nuts.idata.posterior
    for level, e in exact.estimands["levels"].items():
        n = nuts.estimands["levels"][level]
        for key in ("start", "value_at_changepoint", "early_slope", "late_slope", "tau"):
            a = pe_[key].sel({S.LEVEL: level}).values.ravel()
            b = pn_[key].sel({S.LEVEL: level}).values.ravel()
            # the bulk agrees (10 %, 50 %, 90 % quantiles within 0.3 posterior sd: two NUTS runs
            # with other seeds differ by up to ~0.2 sd at 5 % on these heavy-tailed mixtures)
            qa, qb = np.quantile(a, [0.1, 0.5, 0.9]), np.quantile(b, [0.1, 0.5, 0.9])
            assert np.abs(qa - qb).max() < 0.3 * a.std(), (case, level, key, qa, qb)
        if e["changepoint"] is not None:
            pe = np.array(list(e["changepoint_mass"].values()))
            pn = np.array(list(n["changepoint_mass"].values()))
            assert 0.5 * np.abs(pe - pn).sum() < 0.08, (case, level)  # total variation distance


# ------------------------------------------------------------------ verdicts (issue 19)
def _est(**kw):
    base = {
        "bf_changepoint_vs_line": 50.0,
        "edge_mass": 0.0,
        "p_early_positive": 1.0,
        "p_rise_positive": 1.0,
        "p_flat": 0.2,
        "p_slowed": 0.2,
        "p_late_positive": 0.5,
        "p_late_gain_beyond_rope": 0.3,
        "p_late_loss_beyond_rope": 0.3,
        "p_no_change": 0.0,
    }
    return {**base, **kw}


@pytest.mark.parametrize(
    ("kw", "known", "verdict"),
    [
        ({"bf_changepoint_vs_line": 0.5}, False, "no change point"),
        ({"bf_changepoint_vs_line": 0.5, "p_flat": 0.99}, True, "plateaued"),  # a known break is not questioned
        ({"edge_mass": 0.7}, False, "no change point"),
        ({"p_rise_positive": 0.9, "p_flat": 0.99}, False, "undetermined"),
        ({"p_early_positive": 0.5, "p_flat": 0.99}, False, "plateaued"),  # a jump was the rise
        ({"p_flat": 0.9}, False, "plateaued"),
        ({"p_flat": 0.89, "p_slowed": 0.85}, False, "slowed"),
        ({"p_slowed": 0.84, "p_late_positive": 0.96}, False, "still rising"),
        ({"p_slowed": 0.5, "p_late_positive": 0.9}, False, "undetermined"),
        ({"bf_changepoint_vs_line": None}, False, "undetermined"),  # NUTS likelihoods: no exact BF
        # issue 44: what real runs do
        ({"p_no_change": 0.9, "bf_changepoint_vs_line": 0.5}, False, "flat"),  # already saturated
        ({"p_no_change": 0.89, "bf_changepoint_vs_line": 0.5}, False, "no change point"),
        ({"p_late_loss_beyond_rope": 0.95}, False, "declining"),
        ({"p_late_loss_beyond_rope": 0.94, "p_flat": 0.9}, False, "plateaued"),  # a decline inside the ROPE
        # flat relative to the rise but a certain late gain in the metric's units: not a plateau
        ({"p_flat": 0.99, "p_late_gain_beyond_rope": 0.95, "p_slowed": 0.99}, False, "slowed"),
        ({"p_flat": 0.99, "p_late_gain_beyond_rope": 0.95, "p_late_positive": 0.99}, False, "still rising"),
        ({"p_flat": 0.99, "p_late_gain_beyond_rope": 0.94, "p_late_positive": 0.99}, False, "plateaued"),
        # the end window: a loss over it is a decline, a gain over it is not a plateau
        ({"p_end_loss_beyond_rope": 0.95, "bf_changepoint_vs_line": 0.5}, False, "declining"),
        ({"p_end_loss_beyond_rope": 0.94, "p_flat": 0.99, "p_end_gain_beyond_rope": 0.0}, False, "plateaued"),
        ({"p_flat": 0.99, "p_end_gain_beyond_rope": 0.95, "p_slowed": 0.9}, False, "slowed"),
        ({"p_flat": 0.99, "p_end_gain_beyond_rope": 0.94, "p_slowed": 0.9}, False, "plateaued"),
    ],
)
def test_verdict_rule_branches(kw, known, verdict):
    """The one decision rule, on made-up numbers (every branch and its threshold)."""
    out = plateau.plateau_verdict(_est(**kw), known_break=known)
    assert out["verdict"] == verdict
    assert out["reason"]
    if kw.get("p_end_gain_beyond_rope") == 0.95:
        assert "still gaining at the end (P(end-window gain > ROPE) = 0.95)" in out["reason"]
    if kw.get("p_end_loss_beyond_rope") == 0.95:
        assert out["reason"] == "P(end-window gain < -ROPE) = 0.95 >= 0.95"


def test_verdict_summary_sentence():
    levels = {"file": {"verdict": "plateaued"}, "module": {"verdict": "slowed"}, "entity": {"verdict": "still rising"}}
    assert plateau.verdict_summary(levels) == (
        "file plateaued (stopped rising); module slowed down, not shown to have stopped; entity is still rising"
    )
    assert plateau.verdict_summary({"m": {"verdict": "slowed"}}) == "The metric slowed down, not shown to have stopped"
    both = {"a": {"verdict": "declining"}, "b": {"verdict": "declining"}}
    assert plateau.verdict_summary(both) == "All 2 levels are declining"
    assert set(verdicts.VERDICT_PHRASES) == set(verdicts.VERDICTS)


def test_fit_carries_verdicts_and_their_numbers():
    ds, _ = _sim(LevelSpec("file", 0.55, 0.015, 0.0, 20.0), seed=11)
    fit = fit_plateau(ds, seed=1)
    est = fit.estimands["levels"]["file"]
    assert est["verdict"] in verdicts.VERDICTS
    assert est["verdict"] in ("plateaued", "slowed")
    assert est["late_gain_upper"] == pytest.approx(est["late_gain"]["hdi"][1])
    assert est["slowdown_ratio"]["hdi"][1] < 0.5
    assert est["bf_changepoint_vs_line"] > 10
    assert est["davies"]["p_value"] < 0.01
    assert fit.to_dict()["levels"]["file"]["verdict"] == est["verdict"]
    assert fit.to_dict()["summary"].startswith("The metric plateaued") or "slowed" in fit.to_dict()["summary"]
    # 64 trials per step: the calibration's small-data caveat is attached
    assert fit.to_dict()["caveats"]
    assert "weakly identified" in fit.to_dict()["caveats"][0]
    assert fit_plateau(ds, breakpoint=20).estimands["caveats"] == []


def test_rising_line_is_no_change_point_by_exact_bayes_factor():
    ds, _ = _sim(LevelSpec("file", 0.45, 0.008, 0.008, 1000.0), seed=5)
    est = fit_plateau(ds, seed=1).estimands["levels"]["file"]
    assert est["bf_changepoint_vs_line"] < 1
    assert est["verdict"] == "no change point"


def test_hinge_line_bayes_factor_is_the_ratio_of_marginal_likelihoods():
    """The BF equals exp(log p(y | hinge) - log p(y | line)) computed from scipy's
    multivariate normal at a fixed tau (the quadrature is checked elsewhere): here with
    tau's prior concentrated so that the integral is one point."""
    from saturation.models import _exact

    rng = np.random.default_rng(4)
    t = np.arange(30.0)
    y = 0.5 + 0.01 * np.minimum(t, 12) + rng.normal(0, 0.01, 30)
    var = np.full(30, 1e-4)
    grid = candidate_grid(t, 5)
    pri = {
        "start_mu": np.array([0.5]),
        "start_sd": np.array([0.2]),
        "level_mu": np.array([0.6]),
        "level_sd": np.array([0.2]),
        "late_slope_sd": np.full((1, len(grid)), 0.01),
        "tau_sd": np.array([1e-6]),
        "jump_sd": np.array([0.1]),
    }
    log_bf = _exact.hinge_line_log_bf(y[None], var[None], t, grid, pri, False)[0]
    from scipy import special as sp
    from scipy import stats as st

    def lml(x, m0, sd0):
        cov = np.diag(var) + x @ np.diag(sd0**2) @ x.T
        return st.multivariate_normal(x @ m0, cov).logpdf(y)

    xh = _exact.design(t, grid, 0.0, False)
    m0 = np.array([0.5, 0.6, 0.0])
    hinge = sp.logsumexp([lml(xh[c], m0, np.array([0.2, 0.2, 0.01])) for c in range(len(grid))]) - np.log(len(grid))
    line = lml(_exact.design_line(t)[0], m0[:2], np.array([0.2, 0.2]))
    assert log_bf == pytest.approx(hinge - line, abs=0.05)


def test_level_dependence_weight():
    rng = np.random.default_rng(0)
    common = rng.normal(0, 1, 200)
    y = np.stack([common + 0.3 * rng.normal(0, 1, 200) for _ in range(3)])  # strongly correlated levels
    r, w = plateau.level_dependence(y)
    assert r.shape == (3, 3) and np.all(r[~np.eye(3, dtype=bool)] > 0.8)
    assert 1 / 3 <= w < 0.45
    _, w_ind = plateau.level_dependence(rng.normal(0, 1, (3, 200)))
    assert w_ind > 0.85
    assert plateau.level_dependence(rng.normal(0, 1, (1, 50)))[1] == 1.0


def test_unit_information_late_slope_prior():
    """Per candidate: sd = noise x sqrt(N / sum_{t >= c} (t - c)^2); a fixed value overrides."""
    ds, _ = _sim(LevelSpec("file", 0.55, 0.015, 0.0, 20.0), seed=11)
    sd = step_data(ds)
    grid = candidate_grid(sd.steps, 5)
    pri = plateau.resolve_priors(plateau.PlateauPriors(), sd, grid=grid)
    late = pri["late_slope_sd"][0]
    assert late.shape == grid.shape and np.all(np.diff(late) > 0)  # shorter late segments: wider
    expect = pri["noise_sd"][0] * np.sqrt(len(sd.steps) / ((sd.steps - grid[3]).clip(0) ** 2).sum())
    assert late[3] == pytest.approx(expect)
    fixed = plateau.resolve_priors(plateau.PlateauPriors(late_slope_sd=0.002), sd, grid=grid)["late_slope_sd"]
    assert np.all(fixed == 0.002)


def test_the_exact_elpd_result_is_what_psis_gives_with_the_exact_values_in():
    """elpd_exact builds ArviZ's ELPD result without PSIS: the same ELPD, se, p_loo, pointwise
    values and sizes as ArviZ's PSIS result with the exact pointwise values put in, no Pareto
    k, no warning; az.compare takes it beside a PSIS result."""
    from scipy import special

    ds, _ = _sim(LevelSpec("file", 0.55, 0.015, 0.0, 20.0), seed=11)
    sd = step_data(ds)
    fit = fit_plateau(sd, seed=1, sampler=SamplerConfig(draws=500), noise="independent")
    loo_i, lppd_i = plateau_model.exact_loo_lppd(sd, "hinge", fit.config)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto", category=UserWarning)
        psis = az.loo(fit.idata, pointwise=True)
    for lppd in (None, lppd_i):
        got = plateau_model.elpd_exact(fit.idata, loo_i, lppd)
        ll = fit.idata.log_likelihood["y"].to_numpy().reshape(2000, -1)
        want_lppd = special.logsumexp(ll, axis=0) - np.log(2000) if lppd is None else lppd.ravel()
        assert got["elpd_loo"] == pytest.approx(loo_i.sum(), rel=1e-12)
        assert got["se"] == pytest.approx(np.sqrt(loo_i.size * np.var(loo_i)), rel=1e-12)
        assert got["p_loo"] == pytest.approx(want_lppd.sum() - loo_i.sum(), rel=1e-10)
        assert got["n_samples"] == 2000 and got["n_data_points"] == loo_i.size and got["warning"] is False
        assert got["loo_i"].dims == psis["loo_i"].dims and np.array_equal(got["loo_i"].to_numpy(), loo_i.reshape(1, -1))
        assert "pareto_k" not in got and got["scale"] == psis["scale"]
    with warnings.catch_warnings():  # ArviZ's own pandas deprecation
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", message=".*inplace.*")
        table = az.compare({"exact": got, "psis": psis}, ic="loo")
    assert set(table.index) == {"exact", "psis"}


def test_exact_loo_matches_psis_where_pareto_k_is_small():
    ds, _ = _sim(LevelSpec("file", 0.55, 0.015, 0.0, 20.0), seed=11)
    sd = step_data(ds)
    fit = fit_plateau(sd, seed=1, sampler=SamplerConfig(draws=2000, chains=4), noise="independent")
    with pytest.warns(UserWarning, match="Pareto"):  # a few steps have k > 0.7: why exact LOO exists
        psis = az.loo(fit.idata, pointwise=True)
    exact = plateau_model.exact_loo(sd, "hinge", fit.config)
    k = psis.pareto_k.to_numpy().reshape(exact.shape)
    diff = np.abs(psis.loo_i.to_numpy().reshape(exact.shape) - exact)
    assert np.median(diff[k < 0.5]) < 0.01
    with pytest.raises(ValueError, match="kind"):
        plateau_model.exact_loo(sd, "quadratic")


def _clustered_exponential(seed: int, n_steps: int = 50, asymptote: float = 0.7, scale: float = 12.0):
    """Per-trial data that are not the model: per step 16 prompts x 4 rollouts, each prompt's
    success probability Beta with mean on an exponential approach (prompt clustering), plus a
    step-level shift; per-step means and their sampling variance from the trials. Returns
    (StepData, truth)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1.0, n_steps + 1)
    curve = asymptote - (asymptote - 0.3) * np.exp(-(steps - 1) / scale)
    y, var = np.empty(n_steps), np.empty(n_steps)
    for t, m in enumerate(np.clip(curve + rng.normal(0, 0.01, n_steps), 0.02, 0.98)):
        p = rng.beta(m * 8.0, (1 - m) * 8.0, 16)
        trials = (rng.random((16, 4)) < p[:, None]).astype(float).ravel()
        y[t], var[t] = trials.mean(), trials.var(ddof=1) / trials.size
    sd = plateau.StepData(steps, ["reward"], y[None], np.full((1, n_steps), 64.0), var[None], "reward")
    return sd, {"asymptote": asymptote, "log_scale": np.log(scale)}


def _deleted_evidence(level_of, n: int, full: float) -> np.ndarray:
    return np.array([full - level_of(np.arange(n) != i) for i in range(n)])


def test_exact_loo_equals_deleting_each_step_and_recomputing_the_evidence():
    """The closed-form LOO (Sherman-Morrison per grid cell, summed over the full data's grids)
    against log p(y) - log p(y_-i) with every evidence recomputed, for all three curves."""
    from scipy import special

    from saturation.models._exact import Level, alternative_level, curve_prior, design, design_exponential

    ds, _ = _sim(LevelSpec("file", 0.55, 0.02, 0.0, 18.0), seed=5, n_steps=30)
    sd = step_data(ds)
    t, y, v, n = sd.steps, sd.y[0], sd.var_mean[0], len(sd.steps)
    config = plateau.PlateauConfig()
    grid = candidate_grid(t, config.priors.min_segment)
    pri = plateau.resolve_priors(config.priors, sd, grid=grid)
    x = design(t, grid, t[0], False)
    prior = (*curve_prior(pri, 0, False), float(pri["tau_sd"][0]))

    def hinge(keep):
        return Level(y[keep], v[keep], x[:, keep], *prior, hinge=(t[keep], grid, False, t[0])).log_evidence

    everything = np.ones(n, dtype=bool)
    brute = _deleted_evidence(hinge, n, hinge(everything))
    np.testing.assert_allclose(plateau_model.exact_loo(sd, "hinge", config)[0], brute, atol=1e-4)

    apri, m0, sd0, mu = plateau_model._alternative_priors(sd, "linear", None)
    line = np.stack([np.ones_like(t), t - t[0]], axis=-1)[None]

    def linear(keep):
        return Level(y[keep], v[keep], line[:, keep], m0[0], sd0[0][None], float(apri["tau_sd"][0])).log_evidence

    brute = _deleted_evidence(linear, n, linear(everything))
    np.testing.assert_allclose(plateau_model.exact_loo(sd, "linear")[0], brute, atol=1e-4)

    apri, m0, sd0, mu = plateau_model._alternative_priors(sd, "exponential", None)
    args = (m0[0], sd0[0][None], float(apri["tau_sd"][0]))
    _, u, log_prior = alternative_level(
        "exponential", y, v, t, m0[0], sd0[0], args[2], float(mu[0]), plateau_model.ALTERNATIVE_LOG_SCALE_SD
    )
    xe = design_exponential(t, t[0], u)

    def exponential(keep):  # the evidence under the prior of log k on the same grid
        level = Level(y[keep], v[keep], xe[:, keep], *args)
        return special.logsumexp(level.log_m + log_prior) + np.log(level.du)

    brute = _deleted_evidence(exponential, n, exponential(everything))
    np.testing.assert_allclose(plateau_model.exact_loo(sd, "exponential")[0], brute, atol=1e-4)


def test_exact_loo_under_ar1_noise_equals_deleting_each_step_and_recomputing_the_evidence():
    """The non-factorised LOO (each cell's conditional of the joint Gaussian, summed over the
    (rho, tau, design) cells) against log p(y) - log p(y_-i), every evidence recomputed under
    the AR(1) model of the remaining steps (an OU process at their step positions), for the
    hinge, the line and the exponential; and with rho = 0 alone it is the independent LOO."""
    from saturation.models._exact import (
        AR1_PRIOR,
        DependentLevel,
        Level,
        RhoPrior,
        alternative_level,
        curve_prior,
        design,
        design_exponential,
    )

    ds, _ = _sim(LevelSpec("file", 0.55, 0.02, 0.0, 12.0), seed=7, n_steps=24)
    sd = step_data(ds)
    t, y, v, n = sd.steps, sd.y[0], sd.var_mean[0], len(sd.steps)
    y = y + 0.01 * np.sin(t / 3.0)  # a slow wiggle the AR(1) noise has to explain
    # equal within-step variances: the AR(1) model takes their mean, which deleting a step
    # would otherwise change (LOO keeps the full data's model)
    v = np.full(n, v.mean())
    sd = plateau.StepData(t, sd.levels, y[None], sd.n, v[None], sd.response)
    config = plateau.PlateauConfig(noise="ar1")
    grid = candidate_grid(t, config.priors.min_segment)
    pri = plateau.resolve_priors(config.priors, sd, grid=grid)
    x = design(t, grid, t[0], False)
    prior = (*curve_prior(pri, 0, False), float(pri["tau_sd"][0]))
    everything = np.ones(n, dtype=bool)

    def hinge(keep):
        return DependentLevel(
            y[keep], v[keep], x[:, keep], *prior, t[keep], hinge=(t[keep], grid, False, t[0]), noise_prior=AR1_PRIOR
        ).log_evidence

    brute = _deleted_evidence(hinge, n, hinge(everything))
    got = plateau_model.exact_loo(sd, "hinge", replace(config, continuity="hinge"))[0]
    np.testing.assert_allclose(got, brute, atol=1e-4)

    apri, m0, sd0, mu = plateau_model._alternative_priors(sd, "linear", None)
    line = np.stack([np.ones_like(t), t - t[0]], axis=-1)[None]

    def linear(keep):
        args = (m0[0], sd0[0][None], float(apri["tau_sd"][0]))
        return DependentLevel(y[keep], v[keep], line[:, keep], *args, t[keep], noise_prior=AR1_PRIOR).log_evidence

    brute = _deleted_evidence(linear, n, linear(everything))
    np.testing.assert_allclose(plateau_model.exact_loo(sd, "linear", config)[0], brute, atol=1e-4)

    apri, m0, sd0, mu = plateau_model._alternative_priors(sd, "exponential", None)
    args = (m0[0], sd0[0][None], float(apri["tau_sd"][0]))
    _, u, log_prior = alternative_level(
        "exponential",
        y,
        v,
        t,
        m0[0],
        sd0[0],
        args[2],
        float(mu[0]),
        plateau_model.ALTERNATIVE_LOG_SCALE_SD,
        noise_prior=AR1_PRIOR,
    )
    xe = design_exponential(t, t[0], u)

    def exponential(keep):  # the evidence under the prior of log k on the same grid
        level = DependentLevel(y[keep], v[keep], xe[:, keep], *args, t[keep], noise_prior=AR1_PRIOR)
        return special.logsumexp(level.log_m + log_prior)

    brute = _deleted_evidence(exponential, n, exponential(everything))
    np.testing.assert_allclose(plateau_model.exact_loo(sd, "exponential", config)[0], brute, atol=1e-4)

    # rho = 0 alone: the independent model's LOO, to rounding
    alone = DependentLevel(y, v, x, *prior, t, hinge=(t, grid, False, t[0]), noise_prior=RhoPrior(rho=(0.0,)))
    level = Level(y, v, x, *prior, hinge=(t, grid, False, t[0]))
    np.testing.assert_allclose(alone.loo(), level.loo(), rtol=0, atol=1e-10)


def test_exact_exponential_draws_cover_the_truth_on_clustered_trials():
    """Recovery on per-trial data the model did not generate (prompt clusters, step shifts):
    the 94 % HDI of the asymptote and of the log time scale cover the truth in most fits."""
    hits = {"asymptote": 0, "log_scale": 0}
    n_sims = 30
    for seed in range(n_sims):
        sd, truth = _clustered_exponential(seed)
        idata = plateau.fit_alternative(sd, "exponential", seed=seed, sampler=SamplerConfig(draws=500))
        assert idata.posterior.attrs["sampler"] == "exact"
        for name, value in truth.items():
            lo, hi = az.hdi(idata.posterior[name], hdi_prob=S.HDI_PROB)[name].to_numpy()[0]
            hits[name] += bool(lo <= value <= hi)
    # 94 % nominal; with 30 fits, 24 or fewer hits has probability < 0.02 at the nominal rate
    assert hits["asymptote"] >= 25, hits
    assert hits["log_scale"] >= 25, hits


def test_known_break_defaults_to_the_split_model():
    ds, _ = _sim(LevelSpec("file", 0.55, 0.015, 0.0, 20.0), seed=11)
    fit = fit_plateau(ds, breakpoint=20)
    assert fit.config.continuity == "jump"
    assert "split model" in fit.describe_model()
    # trials, unknown break: the hinge, a jump weighed in only where decisively better
    trials = fit_plateau(ds)
    assert (trials.config.continuity, trials.config.jump_gate) == ("auto", plateau.JUMP_GATE)
    e = trials.estimands["levels"]["file"]
    assert e["jump_weight"] == 0.0 and e["p_jump"] < 0.5 and e["jump"]["hdi"] == [0.0, 0.0]
    assert "the hinge, a jump weighed in where BF(jump : hinge) >= 10 (no level" in trials.describe_model()


@pytest.mark.parametrize("case", ["agreeing", "disagreeing", "sparse steps"])
def test_pooled_evidence_from_the_lattice_table_equals_the_direct_sums(case, monkeypatch):
    """The pooled model's sums over (c0, c) with the kernel read from a table over lattice
    distances equal the sums with an exp per pair (the posteriors of (s, c0) differ by
    less than 1e-12 in total variation), also when the levels' supports are far apart."""
    from saturation import curves
    from saturation.models import _exact

    rng = np.random.default_rng(5)
    grid = np.arange(10.0, 990.0) if case != "sparse steps" else np.sort(rng.choice(np.arange(0.0, 5000.0), 400, False))
    centres = {"agreeing": [300, 310, 296], "disagreeing": [120, 600, 900], "sparse steps": [1200, 1300, 1250]}[case]
    log_m = np.stack([-0.5 * ((grid - c) / w) ** 2 for c, w in zip(centres, [15.0, 40.0, 8.0], strict=True)])
    m = np.exp(log_m - log_m.max(axis=1, keepdims=True))
    spread = curves.effective_spread(np, np.exp(np.linspace(np.log(1e-3), np.log(40.0), 60)))

    def posterior(per_level):
        with np.errstate(divide="ignore"):
            lp = np.log(per_level).sum(axis=1)
        w = np.exp(lp - lp.max())
        return w / w.sum()

    fast = posterior(_exact.pooled_evidence(grid, m, spread))
    monkeypatch.setattr(_exact, "LATTICE_PER_CANDIDATE", 0)
    direct = posterior(_exact.pooled_evidence(grid, m, spread))
    assert 0.5 * np.abs(fast - direct).sum() < 1e-12


@pytest.mark.slow
def test_segment_sums_fall_back_where_enormous_weights_cancel():
    """2,000 steps of 16 rollouts: most steps have zero within-step variance, so at the
    smallest tau a few steps carry weights of 1e12 and the segment sums lose the factor's
    definiteness; those tau values are redone from the design matrices. The change-point
    likelihood then equals the design-matrix one wherever it is within 50 log units of
    its maximum (before the fallback this fit raised an IndexError)."""
    from dataclasses import replace

    from saturation.aggregate import aggregate
    from saturation.models import _exact
    from saturation.models.plateau import PlateauConfig
    from saturation.models.plateau_model import change_grid as _grid
    from saturation.replica import SWESMITH_SPEC

    scale = 2000 / SWESMITH_SPEC.n_steps
    levels = tuple(
        replace(
            lv, changepoint=lv.changepoint * scale, early_slope=lv.early_slope / scale, late_slope=lv.late_slope / scale
        )
        for lv in SWESMITH_SPEC.levels
    )
    spec = replace(SWESMITH_SPEC, levels=levels, n_steps=2000, prompts_per_step=2, n_graded=None)
    sd = step_data(aggregate(simulate_plateau(spec, seed=5)[0]))
    cfg = PlateauConfig()
    grid = _grid(sd, cfg)
    pri = plateau.resolve_priors(cfg.priors, sd, cfg.likelihood, grid=grid)
    x = _exact.design(sd.steps, grid, float(sd.steps[0]), False)
    m0, sd0 = _exact.curve_prior(pri, 1, False)
    tau_sd = float(pri["tau_sd"][1])
    fast = _exact.Level(sd.y[1], sd.var_mean[1], x, m0, sd0, tau_sd, hinge=(sd.steps, grid, False, float(sd.steps[0])))
    slow = _exact.Level(sd.y[1], sd.var_mean[1], x, m0, sd0, tau_sd)
    assert np.isfinite(fast.log_m).all()
    a, b = fast.log_m - fast.log_m.max(), slow.log_m - slow.log_m.max()
    near = b > -50
    np.testing.assert_allclose(a[near], b[near], atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["linear", "exponential"])
def test_exact_alternative_draws_match_nuts_on_the_same_model(kind):
    sd, _ = _clustered_exponential(3)
    exact = plateau.fit_alternative(sd, kind, seed=1, sampler=SamplerConfig(draws=2000))
    nuts = plateau.fit_alternative(sd, kind, seed=1, sampler=NUTS)
    assert nuts.posterior.attrs.get("sampler") != "exact"
    for name in exact.posterior.data_vars:
        a, b = exact.posterior[name].to_numpy().ravel(), nuts.posterior[name].to_numpy().ravel()
        # means within a few Monte-Carlo errors, sds within 10 %
        assert abs(a.mean() - b.mean()) < 4 * b.std() / np.sqrt(az.ess(nuts.posterior[name]).to_array().min()), name
        assert a.std() == pytest.approx(b.std(), rel=0.1), name


def test_repr_is_a_short_summary(small_plateau):
    """repr(fit) names the data, the sampler and convergence, and one line per level (the
    dataclass repr printed every array: 15-41k characters)."""
    ds, _ = small_plateau
    fit = fit_plateau(ds, seed=0)
    text = repr(fit)
    head, *levels = text.splitlines()
    assert head.startswith("PlateauFit(response f1, 2 level(s) x 12 steps, gaussian, exact; converged (R-hat max")
    assert [ln.split(":")[0].strip() for ln in levels] == ["file", "entity"]
    assert all("change point" in ln for ln in levels) and len(text) < 600


# --- issue 40: names, headroom, decided outcomes -------------------------------------------


def test_every_reported_quantity_has_its_own_label():
    from saturation.models.plateau import LABELS

    assert len(set(LABELS.values())) == len(LABELS)


def test_headroom_is_to_the_metrics_maximum_and_refused_off_its_range():
    """A reward in [0, 2] got a headroom of 1 - end (negative) silently; now no headroom, a
    caveat naming the range, and the headroom to a maximum the user gives."""
    ds, _ = _sim(LevelSpec("file", 0.5, 0.02, 0.0, 15.0), seed=5, n_steps=30)
    ds["reward"] = ds["reward"] * 2.0
    fit = fit_plateau(ds, response="reward", seed=1)
    (est,) = fit.estimands["levels"].values()
    assert est["headroom_to_max"] is None
    assert any("outside [0, 1]" in c and "metric_max" in c for c in fit.estimands["caveats"])
    fit2 = fit_plateau(ds, response="reward", metric_max=2.0, seed=1)
    (est2,) = fit2.estimands["levels"].values()
    assert est2["headroom_to_max"]["mean"] == pytest.approx(2.0 - est2["end"]["mean"], abs=1e-9)
    assert not fit2.estimands["caveats"] or not any("metric_max" in c for c in fit2.estimands["caveats"])


def test_a_ten_step_run_does_not_ask_whether_levels_stopped_together():
    """Was: "0 of 3 levels stopped rising" then "stopped together? P = 1.000"."""
    levels = tuple(LevelSpec(name, 0.3, 0.01, 0.0, 5.0) for name in ("file", "module", "entity"))
    spec = PlateauSpec(levels=levels, n_steps=10, prompts_per_step=16, samples_per_prompt=4, pool_size=500)
    ds, _ = simulate_plateau(spec, 1)
    together = fit_plateau(ds, seed=1).to_dict()["together"]
    assert together["not_asked"] and "too short" in together["not_asked"]


@pytest.mark.parametrize(
    ("verdicts", "grid", "asked"),
    [
        (["plateaued", "slowed", "plateaued"], np.arange(3.0, 40.0), True),
        (["plateaued", "still rising", "undetermined"], np.arange(3.0, 40.0), False),
        (["no change point", "no change point"], np.arange(3.0, 40.0), False),
        (["plateaued", "plateaued"], np.arange(3.0, 7.0), False),
    ],
)
def test_together_is_asked_only_of_levels_that_stopped(verdicts, grid, asked):
    from saturation.models.plateau import together_not_asked

    levels = {f"l{i}": {"verdict": v} for i, v in enumerate(verdicts)}
    assert (together_not_asked(levels, grid) is None) == asked


# --- issue 44: AR(1) step noise -------------------------------------------------------------


@pytest.mark.parametrize(("rho", "vbar"), [(0.0, 0.0004), (0.7, 0.0), (0.9, 0.0004)])
def test_rotated_ar1_evidence_equals_the_multivariate_normal(rho, vbar):
    """log p(y | c, tau, rho) through the rotation (DependentLevel's algebra) against the
    Gaussian density written out: y ~ N(X m0, vbar I + tau^2 R_rho + X S0 X')."""
    from scipy import stats as st

    from saturation.models._exact import _normal_stats, ar1_rotation, design

    rng = np.random.default_rng(1)
    steps = np.array([0.0, 1, 2, 4, 7, 10, 11, 15, 20, 30])  # uneven: the OU correlation rho^|dt|
    x = design(steps, np.array([7.0]), 0.0, False)  # (1, T, 3)
    m0, sd0 = np.array([0.3, 0.6, 0.0]), np.array([0.2, 0.2, 0.01])
    y = rng.normal(0.5, 0.05, len(steps))
    tau = np.array([0.03])
    q, lam = ar1_rotation(steps, rho)
    scale = 1 / np.sqrt(lam)
    xr = np.einsum("ts,ctp->csp", q, x) * scale[None, :, None]
    got = _normal_stats((q.T @ y) * scale, np.full(len(steps), vbar) * scale**2, xr, m0, 1 / sd0**2, tau)[0][0, 0]
    got -= 0.5 * np.log(lam).sum()
    r = rho ** np.abs(steps[:, None] - steps[None, :])
    cov = vbar * np.eye(len(steps)) + tau[0] ** 2 * r + x[0] @ np.diag(sd0**2) @ x[0].T
    want = st.multivariate_normal(x[0] @ m0, cov).logpdf(y)
    assert got == pytest.approx(want, abs=1e-8)


def test_ar1_with_only_rho_zero_is_the_independent_model():
    from saturation.models._exact import DependentLevel, Level, RhoPrior, design

    ds, _ = _sim(LevelSpec("file", 0.5, 0.01, 0.0, 20.0), seed=2)
    sd = plateau.step_data(ds)
    grid = plateau_model.candidate_grid(sd.steps, 5)
    x = design(sd.steps, grid, float(sd.steps[0]), False)
    m0, sd0 = np.array([0.5, 0.7, 0.0]), np.tile([0.3, 0.3, 0.01], (len(grid), 1))
    hinge = (sd.steps, grid, False, float(sd.steps[0]))
    a = Level(sd.y[0], sd.var_mean[0], x, m0, sd0, 0.1, hinge=hinge)
    b = DependentLevel(sd.y[0], sd.var_mean[0], x, m0, sd0, 0.1, sd.steps, hinge=hinge, noise_prior=RhoPrior((0.0,)))
    assert b.log_evidence == pytest.approx(a.log_evidence, abs=1e-10)
    np.testing.assert_allclose(b.log_m - b.log_m.max(), a.log_m - a.log_m.max(), atol=1e-10)


def test_ar1_fit_reports_rho_and_widens_intervals_on_autocorrelated_series():
    """A logged series with strongly autocorrelated noise: the AR(1) fit finds rho high and
    its change-point interval is wider than the independent fit's (which is overconfident)."""
    rng = np.random.default_rng(4)
    t = np.arange(91.0)
    eta = np.zeros(91)
    for i in range(1, 91):
        eta[i] = 0.85 * eta[i - 1] + rng.normal(0, 0.02 * np.sqrt(1 - 0.85**2))
    y = np.where(t < 40, 0.3 + 0.0075 * t, 0.6) + eta
    ds = xr.Dataset({"m": (("run", "step"), y[None])}, coords={"run": ["r"], "step": t})
    ind = fit_plateau(ds, response="m", noise="independent", seed=1).estimands["levels"]["m"]
    ar = fit_plateau(ds, response="m", noise="ar1", seed=1)
    e = ar.estimands["levels"]["m"]
    assert e["noise_rho"]["mean"] > 0.5
    assert ar.to_dict()["model"]["noise"] == "ar1" and "AR(1)" in ar.describe_model()
    width = lambda v: v["hdi"][1] - v["hdi"][0]  # noqa: E731
    assert width(e["late_slope"]) > 1.5 * width(ind["late_slope"])


def test_an_independent_fit_warns_when_its_residuals_are_autocorrelated():
    rng = np.random.default_rng(4)
    t = np.arange(91.0)
    eta = np.zeros(91)
    for i in range(1, 91):
        eta[i] = 0.85 * eta[i - 1] + rng.normal(0, 0.02 * np.sqrt(1 - 0.85**2))
    hinge = np.where(t < 40, 0.3 + 0.0075 * t, 0.6)
    for noise, warned in ((eta, True), (rng.normal(0, 0.02, 91), False)):
        ds = xr.Dataset({"m": (("run", "step"), (hinge + noise)[None])}, coords={"run": ["r"], "step": t})
        caveats = fit_plateau(ds, response="m", noise="independent", seed=1).estimands["caveats"]
        assert any("autocorrelated" in c and "--noise ar1" in c for c in caveats) == warned
    assert not any("autocorrelated" in c for c in fit_plateau(ds, response="m").estimands["caveats"])  # series: ar1


def test_an_abrupt_jump_is_located_and_called_by_default():
    """Issue 44: a jump then flat was located 10/24 and called plateaued/slowed 7/24 by the
    hinge; the default now weighs the hinge and the jump by their exact evidence."""
    t = np.arange(91.0)
    rng = np.random.default_rng(0)
    y = np.where(t < 45, 0.3, 0.5) + rng.normal(0, 0.02, 91)
    ds = xr.Dataset({"m": (("run", "step"), y[None])}, coords={"run": ["r"], "step": t})
    fit = fit_plateau(ds, response="m", seed=1)
    e = fit.estimands["levels"]["m"]
    assert fit.config.continuity == "auto" and e["p_jump"] > 0.99
    assert fit.to_dict()["shape"] == {"averaged": ["hinge", "jump"], "weights": "per level", "jump_gate": None}
    assert e["verdict"] == "plateaued" and e["changepoint"]["hdi"][0] <= 45 <= e["changepoint"]["hdi"][1]
    assert e["jump"]["mean"] == pytest.approx(0.2, abs=0.02)
    assert "hinge and jump averaged by their evidence (P(jump): m 1.00)" in fit.describe_model()
    # a hinge-shaped series keeps the hinge
    y2 = np.where(t < 45, 0.3 + 0.2 * t / 45, 0.5) + rng.normal(0, 0.02, 91)
    ds2 = xr.Dataset({"m": (("run", "step"), y2[None])}, coords={"run": ["r"], "step": t})
    fit2 = fit_plateau(ds2, response="m", seed=1)
    e2 = fit2.estimands["levels"]["m"]
    assert e2["p_jump"] < 0.5 and e2["changepoint"]["hdi"][0] <= 45 <= e2["changepoint"]["hdi"][1]


@pytest.mark.parametrize("n_steps", [1, 2, 3])
def test_a_run_of_one_two_or_three_steps_is_one_clear_error(n_steps):
    """Issue 40: one and two steps (and three) are refused before any fit, naming the steps
    and the minimum, never a crash or a verdict from the prior."""
    ds, _ = _sim(LevelSpec("file", 0.55, 0.015, 0.0, 1.0), seed=2, n_steps=n_steps)
    steps = "one step" if n_steps == 1 else f"{n_steps} steps"
    with pytest.raises(ValueError, match=rf"only {steps} with a 'f1' value"):
        fit_plateau(ds, seed=1)


@pytest.mark.parametrize("value", [1e300, 1e308])
def test_values_beyond_double_precision_are_one_clear_error(value):
    """A reward of 1e300 in one trial (or +-1e308 everywhere) overflows the per-step sums of
    squares: one message naming the variable, no numpy warnings, no IndexError from the sampler."""
    import warnings

    ds, _ = simulate_plateau(PlateauSpec(n_steps=12), seed=0)
    reward = ds["reward"].to_numpy().astype(float)
    reward[::2] = value
    reward[1::2] = -value if value == 1e308 else reward[1::2]
    ds["reward"] = ("trial", reward)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"'reward': per-step sums overflow.*rescale the metric"):
            step_data(ds, response="reward")


def _rate_series(scale: float, rise: float = 0.85, seed: int = 0) -> StepData:
    rng = np.random.default_rng(seed)
    t = np.arange(1, 41)
    y = np.clip(0.2 + rise * (1 - np.exp(-t / scale)) + rng.normal(0, 0.02, t.size), 0, 1)
    ds = xr.Dataset({"acc": (("run", "step"), y[None, :])}, coords={"run": ["r"], "step": t})
    return step_data(ds, response="acc")


def test_the_exponential_ceiling_of_a_rate_stays_inside_its_range():
    """A rate still far from saturating: the exponential approach extrapolates its ceiling to
    1.2 (P(> 1) = 0.99; the issue saw 1.077 on a rate). In the model comparison the ceiling's
    prior is truncated to [0, 1] (drawn exactly by rejection), the LOO of that bounded model
    is PSIS over its own draws; with no maximum (metric_max=None) the curve is unbounded."""
    from saturation.models.plateau import fit_alternative, loo_entries

    sd = _rate_series(40.0)
    free = fit_alternative(sd, "exponential", seed=1).posterior["asymptote"].to_numpy().ravel()
    assert free.mean() > 1.1 and (free > 1).mean() > 0.9
    _, method, fits = loo_entries(sd, ("hinge", "exponential"), seed=1)
    bounded = fits["exponential"].posterior
    a = bounded["asymptote"].to_numpy().ravel()
    assert a.max() <= 1.0 and a.min() >= 0.0 and a.size == free.size
    assert bounded.attrs["asymptote_outside_fraction"][0] > 0.9 and method["exponential"] == "PSIS"
    _, method, fits = loo_entries(sd, ("exponential",), seed=1, metric_max=None)
    assert fits["exponential"].posterior["asymptote"].to_numpy().mean() > 1.1 and method["exponential"] == "exact"


def test_a_ceiling_well_inside_the_range_draws_as_unbounded():
    """Nothing falls outside: the bounded draws are the unbounded ones (same seed, same
    numbers) and the LOO stays exact."""
    from saturation.models.plateau import fit_alternative, loo_entries

    sd = _rate_series(6.0, rise=0.6)  # saturates at 0.8
    free = fit_alternative(sd, "exponential", seed=2)
    _, method, fits = loo_entries(sd, ("exponential",), seed=2)
    assert fits["exponential"].posterior.attrs["asymptote_outside_fraction"] == [0.0]
    np.testing.assert_array_equal(
        free.posterior["asymptote"].to_numpy(), fits["exponential"].posterior["asymptote"].to_numpy()
    )
    assert method["exponential"] == "exact"


def _hinge_with_a_small_jump(seed: int = 1) -> xr.Dataset:
    """A series where neither shape is certain: P(jump) about 0.7 (seed 1)."""
    t = np.arange(60.0)
    y = np.where(t < 30, 0.3 + 0.004 * t, 0.45) + np.random.default_rng(seed).normal(0, 0.03, 60)
    return xr.Dataset({"m": (("run", "step"), y[None])}, coords={"run": ["r"], "step": t})


def _mass(fit) -> np.ndarray:
    return np.array(list(fit.estimands["levels"]["m"]["changepoint_mass"].values()))


def test_the_two_shapes_are_averaged_by_their_evidence():
    """Issue 44: "auto" is the mixture of the hinge and the jump (1/2 each a priori): the
    share of draws from the jump is P(jump), the change point's mass and the evidence are
    the mixtures of the two shapes' own, and the jump's interval includes the hinge's 0."""
    ds = _hinge_with_a_small_jump()
    kw = {"response": "m", "seed": 1, "noise": "independent"}
    fit = fit_plateau(ds, **kw)
    hinge, jump = (fit_plateau(ds, continuity=c, **kw) for c in ("hinge", "jump"))
    e = fit.estimands["levels"]["m"]
    p = e["p_jump"]
    log_bf = jump.estimands["log_evidence"][0] - hinge.estimands["log_evidence"][0]
    assert 0.3 < p < 0.9 and p == pytest.approx(float(special.expit(log_bf)), rel=1e-12) and e["jump_weight"] == p
    drawn = fit.idata.posterior["jump"].to_numpy().ravel()
    share = float(np.mean(drawn != 0.0))
    assert abs(share - p) < 4 * np.sqrt(p * (1 - p) / drawn.size)
    want = p * _mass(jump) + (1 - p) * _mass(hinge)
    assert np.allclose(_mass(fit), want, atol=1e-12)
    both = np.logaddexp(hinge.estimands["log_evidence"][0], jump.estimands["log_evidence"][0]) - np.log(2)
    assert fit.estimands["log_evidence"][0] == pytest.approx(both, rel=1e-12)
    assert e["jump"]["hdi"][0] <= 0.0 <= e["jump"]["hdi"][1] or e["jump"]["hdi"][0] == 0.0


def test_the_averaged_shapes_exact_loo_agrees_with_psis():
    """The exact LOO of the mixture (logaddexp of the shapes' evidences over those of the
    data without the step) against ArviZ's PSIS-LOO on the mixture's own draws."""
    sampler = SamplerConfig(draws=5000)  # PSIS's Monte Carlo error at 4 x 1000 draws is up to 0.06
    fit = fit_plateau(_hinge_with_a_small_jump(), response="m", seed=1, noise="independent", sampler=sampler)
    exact = exact_loo(fit.data, "hinge", fit.config)[0]
    with warnings.catch_warnings():  # a few steps near the break are influential (k > 0.7)
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto", category=UserWarning)
        psis = az.loo(fit.idata, pointwise=True)
    good = psis["pareto_k"].to_numpy().ravel() < 0.5  # where PSIS is reliable
    assert good.sum() >= 50
    assert np.abs(exact[good] - psis["loo_i"].to_numpy().ravel()[good]).max() < 0.02
    # the hinge's own LOO differs from the mixture's by more than that somewhere
    hinge_only = exact_loo(fit.data, "hinge", replace(fit.config, continuity="hinge"))[0]
    assert np.abs(hinge_only - exact).max() > 0.05


def _series(y: np.ndarray, steps: np.ndarray) -> xr.Dataset:
    return xr.Dataset({"m": (("run", "step"), y[None])}, coords={"run": ["r"], "step": steps})


def test_the_end_window_is_the_last_third_with_at_least_five_steps():
    assert plateau.end_window(np.arange(9.0)) is None
    assert np.flatnonzero(plateau.end_window(np.arange(91.0))).tolist() == list(range(60, 91))
    sparse = np.array([0.0, 10, 20, 30, 40, 50, 60, 70, 80, 200])  # one point in the last third
    assert np.flatnonzero(plateau.end_window(sparse)).tolist() == [5, 6, 7, 8, 9]


@pytest.mark.parametrize(
    ("name", "verdict"),
    [("collapse", "declining"), ("exponential", "slowed"), ("creep", "slowed"), ("saturated", "flat")],
)
def test_shapes_the_hinge_cannot_draw_get_their_honest_verdict(name, verdict):
    """Issue 44: a rise, a plateau and a collapse was "slowed"/"plateaued"; a smooth
    exponential approach and a creep after an S-shaped rise "plateaued"; a run already
    saturated "no change point". The end window (a line over the last third) reads them.
    AR(1) step noise of sd 0.01 (phi 0.5), as scripts/series_shapes.py."""
    t = np.arange(91.0)
    curves_ = {
        "collapse": np.where(t < 30, 0.2 + 0.4 * t / 30, np.where(t < 60, 0.6, 0.6 - 0.004 * (t - 60))),
        "exponential": 0.2 + 0.5 * (1 - np.exp(-t / 40)),
        "creep": np.where(t < 30, 0.1 + 0.5 * t / 30, 0.6 + 0.0015 * (t - 30)),
    }
    if name == "saturated":  # a run resumed at step 101 after it saturated, 200 steps logged
        t = np.arange(101.0, 301.0)
        curves_[name] = np.full(200, 0.945)
    rng = np.random.default_rng(2)  # "flat" in 5 of the 8 seeds 0-7 at this noise (docs/calibration.md)
    noise = np.empty(len(t))
    noise[0] = rng.normal(0, 0.01)
    for i in range(1, len(t)):
        noise[i] = 0.5 * noise[i - 1] + rng.normal(0, 0.01 * np.sqrt(1 - 0.25))
    e = fit_plateau(_series(curves_[name] + noise, t), response="m", seed=1).estimands["levels"]["m"]
    assert e["verdict"] == verdict, e["reason"]
    assert e["end_window"] == ([234.0, 300.0] if name == "saturated" else [60.0, 90.0])
    if verdict == "declining":
        assert "end-window" in e["reason"] and e["end_gain"]["hdi"][1] < -0.01
    if name == "creep":
        assert "still gaining" in e["reason"]


def test_a_plateau_keeps_its_verdict_with_the_end_window():
    """The hinge-shaped control stays "plateaued": its end window is flat."""
    t = np.arange(91.0)
    y = np.where(t < 40, 0.3 + 0.3 * t / 40, 0.6) + np.random.default_rng(5).normal(0, 0.01, 91)
    e = fit_plateau(_series(y, t), response="m", seed=1).estimands["levels"]["m"]
    assert e["verdict"] == "plateaued" and e["p_end_gain_beyond_rope"] < 0.95 and e["p_end_loss_beyond_rope"] < 0.95


def test_the_exact_fits_pointwise_log_likelihood_is_made_when_first_read(small_plateau):
    """The exact fit holds its pointwise log-likelihood as a deferred group (no command that
    never reads it pays for it); read, it is each draw's Gaussian log density at its drawn
    change point, as the draws' own curve and noise give it."""
    from saturation import curves
    from saturation._lazy import held_idata

    fit = fit_plateau(small_plateau[0], seed=0)
    held = held_idata(fit)
    assert callable(held._groups["log_likelihood"])  # not made yet
    ll = held.log_likelihood["y"]
    assert not callable(held._groups["log_likelihood"])
    post = held.posterior
    sd = fit.data
    j = 0
    mu = curves.hinge_through(
        sd.steps[None, :],
        post["changepoint"][..., j].to_numpy().reshape(-1, 1),
        post["start"][..., j].to_numpy().reshape(-1, 1),
        post["value_at_changepoint"][..., j].to_numpy().reshape(-1, 1),
        post["late_slope"][..., j].to_numpy().reshape(-1, 1),
        post["jump"][..., j].to_numpy().reshape(-1, 1) if "jump" in post else 0.0,
        float(sd.steps[0]),
    )
    var = sd.var_mean[j][None, :] + post["tau"][..., j].to_numpy().reshape(-1, 1) ** 2
    want = -0.5 * (np.log(2 * np.pi * var) + (sd.y[j][None, :] - mu) ** 2 / var)
    np.testing.assert_allclose(ll[..., j, :].to_numpy().reshape(want.shape), want, rtol=1e-10, atol=1e-12)
    assert held.log_likelihood.attrs["model"] == "plateau"  # stamped when made


def test_trials_weigh_in_a_jump_only_when_decisively_better():
    """Issue 44: on trials an abrupt jump then flat was located in 10/24 level fits and
    called plateaued/slowed 7/24 by the hinge alone. The default for trials weighs the
    jump in where BF(jump : hinge) >= 10, so the jump is located and called, and a
    hinge-shaped run keeps the hinge's fit draw for draw."""
    jumpy = LevelSpec("file", 0.3, 0.0, 0.0, 30.0, jump=0.15)
    ds, _ = _sim(jumpy, seed=4, n_steps=60, prompts_per_step=32, samples_per_prompt=8)
    fit = fit_plateau(ds, seed=1)
    e = fit.estimands["levels"]["file"]
    assert e["jump_weight"] == e["p_jump"] > 0.99
    assert e["changepoint"]["hdi"][0] <= 30 <= e["changepoint"]["hdi"][1]
    assert e["verdict"] in ("plateaued", "slowed"), e["reason"]
    hinge_alone = fit_plateau(ds, continuity="hinge", noise="independent", seed=1)
    assert hinge_alone.estimands["levels"]["file"]["changepoint"]["hdi"][0] > 30
    hinge_shaped, _ = _sim(LevelSpec("file", 0.3, 0.008, 0.0, 20.0), seed=4)
    gated, hinge = fit_plateau(hinge_shaped, seed=1), fit_plateau(hinge_shaped, continuity="hinge", seed=1)
    assert gated.estimands["levels"]["file"]["jump_weight"] == 0.0
    for name in ("start", "late_slope", "value_at_changepoint"):
        assert np.array_equal(gated.idata.posterior[name], hinge.idata.posterior[name])
    assert gated.estimands["levels"]["file"]["changepoint"] == hinge.estimands["levels"]["file"]["changepoint"]


def test_a_levels_estimates_are_a_typed_record_of_the_same_numbers():
    """PlateauFit.levels(): each level's numbers by attribute (intervals as Interval, the
    probabilities as floats, None where the fit did not estimate one), the rest in extra;
    the JSON (estimands) is untouched."""
    from saturation.models.plateau import LevelEstimates
    from saturation.summary import Interval

    e = {
        "changepoint": {"mean": 10.2, "sd": 0.5, "hdi": [9.0, 11.0]},
        "late_gain": {"mean": 0.004, "sd": 0.002, "hdi": [0.001, 0.007]},
        "p_flat": 0.97,
        "late_gain_upper": 0.007,
        "verdict": "plateaued",
        "reason": "P(flat) = 0.97 >= 0.90",
        "changepoint_mass": {9: 0.2, 10: 0.8},
        "davies": {"p_value": 1e-6},
    }
    rec = LevelEstimates.from_estimands("file", e)
    assert isinstance(rec.changepoint, Interval) and rec.changepoint.hdi == (9.0, 11.0)
    assert rec.late_gain.mean == 0.004 and rec.p_flat == 0.97 and rec.stopped
    assert rec.late_slope is None and rec.p_slowed is None  # not estimated by this (made-up) fit
    assert rec.extra == {"davies": {"p_value": 1e-6}} and rec.changepoint_mass == {9: 0.2, 10: 0.8}
    with pytest.raises(AttributeError):
        _ = rec.no_such_estimate
    assert str(rec.changepoint) == "10.2 [9.0, 11.0]"


def test_the_noise_prior_puts_its_stated_mass_on_independent_noise():
    from saturation.models._exact import AR1_PRIOR, AUTO_NOISE_PRIOR, RHO_GRID, RhoPrior

    w = np.exp(AUTO_NOISE_PRIOR.log_weights())
    assert w.sum() == pytest.approx(1.0) and w[0] == pytest.approx(0.5)
    np.testing.assert_allclose(w[1:], 0.5 / (len(RHO_GRID) - 1))
    np.testing.assert_allclose(np.exp(AR1_PRIOR.log_weights()), 1 / len(RHO_GRID))
    assert np.exp(RhoPrior((0.0,), p_independent=0.3).log_weights()) == pytest.approx([1.0])


def test_the_dependent_noise_model_on_coarser_scale_grids_keeps_its_evidence():
    """Each rho > 0 of the AR(1) noise model sums tau on DEPENDENT_POINTS (no segment-sum
    shortcut after the rotation): its log evidence and change-point mass equal the full
    grids' to 1e-5, and every (rho, candidate) cell within 20 log units of the best to 5e-3."""
    from saturation.models import _exact as X

    rng = np.random.default_rng(5)
    t = np.arange(91.0)
    eta = np.zeros(91)
    for i in range(1, 91):
        eta[i] = 0.7 * eta[i - 1] + rng.normal(0, 0.01)
    trials = plateau.step_data(_sim(LevelSpec("file", 0.5, 0.01, 0.0, 30.0), seed=2, n_steps=60)[0])
    series = (t, np.where(t < 40, 0.3 + 0.0075 * t, 0.6) + eta, np.zeros(91))
    for steps, y, var in [series, (trials.steps, trials.y[0], trials.var_mean[0])]:
        grid = steps[2:-2]
        x = X.design(steps, grid, float(steps[0]), False)
        m0, sd0 = np.array([y[0], y.mean(), 0.0]), np.tile([0.3, 0.3, 0.01], (len(grid), 1))
        hinge = (steps, grid, False, float(steps[0]))
        coarse = X.DependentLevel(y, var, x, m0, sd0, 0.05, steps, hinge=hinge)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(X, "DEPENDENT_POINTS", (X.COARSE_POINTS, X.FINE_POINTS))
            full = X.DependentLevel(y, var, x, m0, sd0, 0.05, steps, hinge=hinge)
        assert coarse.log_evidence == pytest.approx(full.log_evidence, abs=1e-5)
        np.testing.assert_allclose(coarse.log_m - coarse.log_m.max(), full.log_m - full.log_m.max(), atol=1e-5)
        near = (full.log_ev - full.log_ev.max(axis=0)) > -20
        assert np.abs(coarse.log_ev - full.log_ev)[near].max() < 5e-3


def test_auto_noise_keeps_independent_trials_independent_and_finds_autocorrelation():
    """noise="auto" (the default on trials): on per-trial data with independent step noise
    the posterior moves mass towards rho = 0 (from the prior 0.5) and the fit matches the independent
    fit; with AR(1) step effects (0.85) it moves to rho > 0 and widens the late slope."""
    ds, _ = _sim(LevelSpec("file", 0.5, 0.01, 0.0, 30.0), seed=2, n_steps=60)
    auto = fit_plateau(ds, seed=1)
    ind = fit_plateau(ds, noise="independent", seed=1)
    e, e0 = auto.estimands["levels"]["file"], ind.estimands["levels"]["file"]
    assert auto.config.noise == "auto" and e["p_independent_noise"] > 0.5  # the prior: 0.5
    assert "P(independent): file" in auto.describe_model()
    assert e["changepoint"]["mean"] == pytest.approx(e0["changepoint"]["mean"], abs=1.0)
    assert not any("autocorrelated" in c for c in auto.estimands["caveats"])
    rng = np.random.default_rng(4)
    t = np.arange(91.0)
    eta = np.zeros(91)
    for i in range(1, 91):
        eta[i] = 0.85 * eta[i - 1] + rng.normal(0, 0.02 * np.sqrt(1 - 0.85**2))
    y = np.where(t < 40, 0.3 + 0.0075 * t, 0.6) + eta + rng.normal(0, 0.012, 91)
    sd = plateau.StepData(t, ["m"], y[None], np.full((1, 91), 300.0), np.full((1, 91), 0.012**2), "m", None, {}, None)
    a = fit_plateau(sd, seed=1).estimands["levels"]["m"]
    i = fit_plateau(sd, noise="independent", seed=1).estimands["levels"]["m"]
    assert a["p_independent_noise"] < 0.1
    width = lambda v: v["hdi"][1] - v["hdi"][0]  # noqa: E731
    assert width(a["late_slope"]) > 1.5 * width(i["late_slope"])


def test_curve_shape_rule_reads_the_two_bayes_factors():
    rule = plateau.VerdictRule(bf_shape=30.0)
    base = {"bf_changepoint_vs_line": 100.0}
    assert verdicts.curve_shape({**base, "bf_smooth_vs_break": 50.0, "bf_smooth_vs_line": 40.0}, rule) == "smooth"
    # better than the break but not than the line: not a smooth bend
    assert verdicts.curve_shape({**base, "bf_smooth_vs_break": 50.0, "bf_smooth_vs_line": 5.0}, rule) == "unclear"
    assert verdicts.curve_shape({**base, "bf_smooth_vs_break": 0.01, "bf_smooth_vs_line": 1e4}, rule) == "break"
    line_wins = {"bf_changepoint_vs_line": 0.2, "bf_smooth_vs_break": 2.0, "bf_smooth_vs_line": 0.02}
    assert verdicts.curve_shape(line_wins, rule) == "straight"
    assert verdicts.curve_shape({**base, "bf_smooth_vs_break": 5.0, "bf_smooth_vs_line": 5.0}, rule) == "unclear"


@pytest.mark.parametrize("noise", ["independent", "ar1"])
def test_smooth_evidence_equals_a_dense_quadrature_over_the_time_scale(noise):
    """The exponential approach's evidence (two-pass grid over log k) equals the average of
    the single-design evidences over a dense grid of log k weighted by its prior."""
    from saturation.models import _exact

    rng = np.random.default_rng(3)
    steps = np.arange(60.0)
    y = 0.2 + 0.4 * (1 - np.exp(-steps / 12)) + rng.normal(0, 0.01, 60)
    var = np.full(60, 1e-5)
    m0, sd0, tau_sd, mu, sd = np.array([0.2, 0.6]), np.array([0.3, 0.3]), 0.05, np.log(59 / 4), 1.0
    prior = None if noise == "independent" else _exact.AR1_PRIOR
    got = _exact.exponential_approach(y, var, steps, m0, sd0, tau_sd, mu, sd, noise_prior=prior).log_evidence
    u = np.linspace(mu - 6, mu + 6, 401)  # 0.03 apart (posterior sd of log k 0.033): ample for a smooth peak
    dependent = None if prior is None else (steps, prior)
    designs = _exact.design_exponential(steps, 0.0, u)
    single = np.array(
        [_exact.log_evidence(y, var, x[None], m0, sd0[None], tau_sd, dependent=dependent) for x in designs]
    )
    log_prior = -0.5 * ((u - mu) / sd) ** 2 - 0.5 * np.log(2 * np.pi) - np.log(sd)
    want = special.logsumexp(single + log_prior) + np.log(u[1] - u[0])
    assert got == pytest.approx(want, abs=1e-3)


@pytest.mark.slow
def test_s_shaped_evidence_under_wide_ar1_tails_equals_a_dense_quadrature():
    """The hard case of the logistic rise's evidence: AR(1) noise (0.7) whose midpoint
    posterior spans most of the run and whose width reaches the prior's upper bound; a
    dense trapezoid over the whole prior box (237 x 121 points, full tau grids)."""
    from saturation import curves
    from saturation.models import _exact

    rng = np.random.default_rng(3)
    steps = np.arange(60.0)
    rng.normal(0, 0.01, 60)  # skipped, as in the run that measured this series's error (0.003)
    e = np.zeros(60)
    for i in range(1, 60):
        e[i] = 0.7 * e[i - 1] + rng.normal(0, 0.01)
    y = curves.logistic_rise(steps, start=0.2, level=0.6, midpoint=25, width=8) + e
    var = np.full(60, 1e-5)
    m0, sd0, tau_sd, mu, sd = np.array([0.2, 0.6]), np.array([0.3, 0.3]), 0.05, np.log(59 / 10), 1.0
    bounds = (np.log(3), np.log(59 / 4))
    got = _exact.logistic_approach(y, var, steps, m0, sd0, tau_sd, mu, sd, bounds, noise_prior=_exact.AR1_PRIOR)
    mids, us = np.linspace(0, 59, 237), np.linspace(*bounds, 121)
    mm, uu = np.meshgrid(mids, us, indexing="ij")
    x = _exact.design_logistic(steps, mm.ravel(), uu.ravel())
    lm = np.concatenate(
        [
            _exact.design_level(y, var, steps, x[i : i + 3000], m0, sd0, tau_sd, _exact.AR1_PRIOR).design_log_m
            for i in range(0, len(x), 3000)
        ]
    ).reshape(mm.shape)
    a, b = (bounds[0] - mu) / sd, (bounds[1] - mu) / sd
    log_prior = -np.log(59) - 0.5 * ((uu - mu) / sd) ** 2 - 0.5 * np.log(2 * np.pi * sd**2)
    log_prior -= np.log(special.ndtr(b) - special.ndtr(a))
    weights = _exact.log_trapezoid(mids)[:, None] + _exact.log_trapezoid(us)[None, :]
    want = special.logsumexp(lm + log_prior + weights)
    assert got.log_evidence == pytest.approx(want, abs=0.01)


@pytest.mark.parametrize("noise", ["independent", "ar1"])
def test_s_shaped_evidence_equals_a_dense_quadrature_over_midpoint_and_width(noise):
    """The logistic rise's evidence (three refined passes over (midpoint, log width), coarse
    tau grids while locating) equals a dense trapezoid over the plane, each point's evidence
    on the full tau grids, weighted by the truncated prior."""
    from saturation import curves
    from saturation.models import _exact

    rng = np.random.default_rng(3)
    steps = np.arange(60.0)
    y = curves.logistic_rise(steps, start=0.2, level=0.6, midpoint=25, width=5) + rng.normal(0, 0.01, 60)
    var = np.full(60, 1e-5)
    m0, sd0, tau_sd, mu, sd = np.array([0.2, 0.6]), np.array([0.3, 0.3]), 0.05, np.log(59 / 10), 1.0
    prior = None if noise == "independent" else _exact.AR1_PRIOR
    bounds = (0.0, np.log(59))
    got = _exact.logistic_approach(y, var, steps, m0, sd0, tau_sd, mu, sd, bounds, noise_prior=prior).log_evidence
    # the posterior sits near (25, log 5), sds about 0.2 steps and 0.04: this box holds all
    # but e^-17 of it, at 0.1 steps x 0.02 (the trapezoid converges fast on a smooth peak)
    mids, us = np.linspace(20, 30, 101), np.linspace(np.log(5) - 0.6, np.log(5) + 0.6, 61)
    mm, uu = np.meshgrid(mids, us, indexing="ij")
    x = _exact.design_logistic(steps, mm.ravel(), uu.ravel())
    lm = np.concatenate(
        [
            _exact.design_level(y, var, steps, x[i : i + 4000], m0, sd0, tau_sd, prior).design_log_m
            for i in range(0, len(x), 4000)
        ]
    ).reshape(mm.shape)
    a, b = -mu / sd, (np.log(59) - mu) / sd  # log w truncated to [log 1, log 59]
    log_prior = -np.log(59) - 0.5 * ((uu - mu) / sd) ** 2 - 0.5 * np.log(2 * np.pi * sd**2)
    log_prior -= np.log(special.ndtr(b) - special.ndtr(a))
    want = special.logsumexp(lm + log_prior) + np.log(mids[1] - mids[0]) + np.log(us[1] - us[0])
    assert got == pytest.approx(want, abs=1e-3)


def test_an_s_shaped_rise_is_a_smooth_approach_not_a_line():
    """Issue 44 item 3: an S-shaped rise with no break (logistic, AR(1) noise) was "no change
    point" (the hinge cannot draw its slow start and lost to the line, the AR(1) noise
    absorbing the rest): it is now named a smooth approach, S-shaped; saturated early, it
    "plateaued"; still bending at the end (its end-window slope half its slope before),
    "slowed" or "still rising", read from the smooth curve's own draws."""
    from saturation import curves

    t = np.arange(91.0)
    rng = np.random.default_rng(11)
    noise = np.zeros(91)
    for i in range(1, 91):
        noise[i] = 0.5 * noise[i - 1] + rng.normal(0, 0.01 * np.sqrt(0.75))
    early = curves.logistic_rise(t, start=0.2, level=0.7, midpoint=20, width=5)
    e = fit_plateau(_series(early + noise, t), response="m", seed=1).estimands["levels"]["m"]
    assert (e["curve_shape"], e["smooth_form"], e["verdict"]) == ("smooth", "S-shaped", "plateaued"), e["reason"]
    assert "S-shaped" in e["reason"] and "P(late or end-window gain > ROPE)" in e["reason"]
    late = curves.logistic_rise(t, start=0.2, level=0.7, midpoint=45, width=12)
    e = fit_plateau(_series(late + noise, t), response="m", seed=1).estimands["levels"]["m"]
    assert e["bf_smooth_vs_line"] > 30 and e["verdict"] in ("slowed", "still rising"), e["reason"]
    assert "smooth curve" in e["reason"] and e["smooth_end_gain"]["hdi"][0] > 0.01


def test_a_smooth_approach_and_a_break_are_named_apart():
    """Issue 44: a smooth saturation is recognised as such, a hinge as a break (logged
    series with AR(1) noise, the default noise model of a series)."""
    t = np.arange(91.0)
    rng = np.random.default_rng(11)
    noise = np.zeros(91)
    for i in range(1, 91):
        noise[i] = 0.5 * noise[i - 1] + rng.normal(0, 0.01 * np.sqrt(0.75))
    smooth = fit_plateau(_series(0.2 + 0.5 * (1 - np.exp(-t / 40)) + noise, t), response="m", seed=1)
    e = smooth.estimands["levels"]["m"]
    assert e["curve_shape"] == "smooth" and e["bf_smooth_vs_break"] > 1e3, e
    assert "smooth approach" in e["reason"]
    # no break to be small relative to: still gaining in the metric's units, so not "plateaued"
    assert e["verdict"] == "slowed", e["reason"]
    hinge = fit_plateau(_series(np.where(t < 40, 0.3 + 0.3 * t / 40, 0.6) + noise, t), response="m", seed=1)
    e = hinge.estimands["levels"]["m"]
    assert e["curve_shape"] == "break" and e["bf_smooth_vs_break"] < 1e-2, e
    assert hinge.table()["shape"].tolist() == ["break"]


def test_step_axis_candidates_are_capped_at_the_logged_steps_and_their_midpoints():
    """More whole steps than MAX_CANDIDATES (a metric logged every 128 steps): the candidates
    are the logged steps and the midpoints between them, thinned evenly; every candidate is a
    whole step inside the searchable range; a short grid is every whole step."""
    from saturation.models.plateau_model import MAX_CANDIDATES

    steps = 128.0 * np.arange(1, 501)  # 998 logged steps and midpoints: thinned to the cap
    grid = candidate_grid(steps, 5, on_step_axis=True)
    assert len(grid) == MAX_CANDIDATES and np.all(grid == np.floor(grid)) and np.all(np.diff(grid) > 0)
    mids = np.floor((steps[:-1] + steps[1:]) / 2)
    assert np.isin(grid, np.concatenate([steps, mids])).all()
    assert grid[0] >= steps[1] + 1 and grid[-1] <= steps[-2]
    sparse = 100.0 * np.arange(1, 51)  # 50 points every 100 steps: logged, midpoints and a lattice
    grid = candidate_grid(sparse, 5, on_step_axis=True)
    assert 0.95 * MAX_CANDIDATES <= len(grid) <= MAX_CANDIDATES and np.isin(sparse[2:-2], grid).all()
    assert np.diff(grid).max() <= 2 * (sparse[-2] - sparse[1]) / MAX_CANDIDATES + 1
    dense = candidate_grid(np.arange(1.0, 101.0), 5, on_step_axis=True)
    assert np.array_equal(dense, np.arange(6.0, 97.0))


def test_a_long_series_is_fitted_on_the_means_of_runs_of_consecutive_points():
    """bin_series: runs of at least ceil(n / max_points) points, of equal count (sizes differ
    by at most one), each at the mean of its steps and values; the series' step data says
    how it was binned."""
    import xarray as xr

    from saturation.models.plateau_data import MAX_SERIES_POINTS, bin_series

    steps, values = np.arange(1.0, 1004.0), np.linspace(0.0, 1.0, 1003)
    bs, bv, sizes = bin_series(steps, values, max_points=10)  # at least 101 points a bin: 9 bins
    assert sizes.sum() == 1003 and set(sizes) == {111, 112} and len(bs) == 9
    edges = np.concatenate([[0], np.cumsum(sizes)])
    for i in range(9):
        assert bs[i] == pytest.approx(steps[edges[i] : edges[i + 1]].mean())
        assert bv[i] == pytest.approx(values[edges[i] : edges[i + 1]].mean())
    same = bin_series(steps[:10], values[:10], max_points=10)
    assert np.array_equal(same[0], steps[:10]) and np.array_equal(same[2], np.ones(10))
    n = MAX_SERIES_POINTS * 3 + 7
    series = xr.Dataset({"reward": ("step", np.sin(np.arange(n) / 300.0))}, coords={"step": np.arange(1, n + 1)})
    sd = step_data(series, response="reward")
    width = -(-n // MAX_SERIES_POINTS)  # at least this many points a bin: 4
    assert len(sd.steps) == n // width <= MAX_SERIES_POINTS
    assert sd.summary["binned"] == {"points": n, "bins": n // width, "points_per_bin": [4, 5]}


def test_the_frame_gives_each_candidates_mass_to_the_nearest_logged_step():
    """A validation metric logged every 10 steps: candidates lie between the logged steps,
    and the frame's p_changepoint column still sums to the change point's mass."""
    import xarray as xr

    from saturation.models.plateau import plateau_frame

    rng = np.random.default_rng(0)
    t = np.arange(0.0, 201.0, 10.0)
    y = np.where(t < 55, 0.2 + 0.4 * t / 55, 0.6) + rng.normal(0, 0.01, t.size)
    ds = xr.Dataset({"m": (("run", "step"), y[None])}, coords={"run": ["r"], "step": t})
    frame = plateau_frame(fit_plateau(ds, response="m", seed=0))
    assert frame["p_changepoint"].sum() == pytest.approx(1.0)
    assert frame.loc[frame["p_changepoint"].idxmax(), "step"] in (50.0, 60.0)
