"""Vectorised convergence diagnostics agree with ArviZ's scalar-by-scalar ones."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest

from saturation.models.sampling import diagnostics, rhat_ess


def _ar(rng, chains, draws, k, phi):
    x = np.zeros((chains, draws, k))
    e = rng.normal(size=(chains, draws, k))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x


def _cases():
    rng = np.random.default_rng(0)
    return {
        "iid": rng.normal(size=(4, 200, 5)),
        "autocorrelated, odd draws": _ar(rng, 4, 301, 5, 0.9),
        "nearly stuck (sequence reaches the last lag)": _ar(rng, 4, 20, 3, 0.999),
        "two chains": _ar(rng, 2, 100, 3, 0.99),
        "antithetic": _ar(rng, 4, 200, 3, -0.7),
        "ties (discrete values)": rng.integers(0, 4, size=(4, 100, 4)).astype(float),
        "one chain shifted": rng.normal(size=(4, 150, 3)) + np.array([0, 0, 0, 1.0])[:, None, None],
        "short": rng.normal(size=(3, 7, 2)),
        "one chain": rng.normal(size=(1, 100, 2)),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_rhat_ess_match_arviz(name):
    x = _cases()[name]
    got = rhat_ess(x)
    ds = az.convert_to_dataset({"v": x})
    want = {"ess_bulk": az.ess(ds, method="bulk")["v"].values, "ess_tail": az.ess(ds, method="tail")["v"].values}
    if x.shape[0] >= 2:
        want["rhat"] = az.rhat(ds)["v"].values
    else:
        assert np.isnan(got["rhat"]).all()
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-9, err_msg=f"{name}: {key}")


def test_shifted_chain_is_flagged_and_nan_propagates():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 200, 2))
    x[0, :, 0] += 2.0
    x[1, 5, 1] = np.nan
    got = rhat_ess(x)
    assert got["rhat"][0] > 1.1
    assert np.isnan(got["rhat"][1]) and np.isnan(got["ess_bulk"][1])


def test_diagnostics_reports_the_worst_variable():
    rng = np.random.default_rng(2)
    idata = az.from_dict(
        posterior={"a": rng.normal(size=(4, 300)), "b": rng.normal(size=(4, 300, 3))},
        sample_stats={"diverging": np.zeros((4, 300), bool)},
    )
    idata.posterior["b"][0, :, 2] += 1.5
    d = diagnostics(idata, ["a", "b"])
    assert d["rhat_max"] == pytest.approx(float(az.rhat(idata)["b"].values.max()), rel=1e-9)
    assert not d["converged"] and d["divergences"] == 0


@pytest.mark.slow  # two nutpie compiles (about 13 s)
def test_a_reused_compiled_model_starts_from_this_fits_initial_point():
    """Same seed and data, same draws, whatever was compiled first in the process: a cached
    compiled model gets the initial points of the data it is given (the initial point here
    depends on the data: the prior mean is data, its support point the start)."""
    import pymc as pm

    from saturation.models.sampling import SamplerConfig, clear_compiled_cache, sample_model

    def model(centre: float) -> pm.Model:
        with pm.Model() as m:
            c = pm.Data("centre", np.array(centre))
            s = pm.HalfNormal("s", 1.0)  # a transformed variable: the value variable is s_log__
            pm.Normal("x", mu=c, sigma=s + 0.5, shape=3)
        return m

    config = SamplerConfig(draws=60, tune=40, chains=2, sampler="nutpie")

    def draws(centre: float) -> np.ndarray:
        idata, _ = sample_model(
            model(centre), cache_key=("test-initial-point",), data={"centre": np.array(centre)}, seed=7, config=config
        )
        return idata.posterior["x"].to_numpy()

    clear_compiled_cache()
    fresh = draws(50.0)  # compiled for this data
    clear_compiled_cache()
    draws(0.0)  # compiled for other data first ...
    reused = draws(50.0)  # ... then reused for this data
    clear_compiled_cache()
    np.testing.assert_array_equal(reused, fresh)
    assert abs(fresh.mean() - 50.0) < 1.0


def test_a_reused_compiled_model_labels_the_draws_with_this_fits_coordinates():
    """A cached compiled model keeps the coordinates it was compiled with: a fit of arms c, d
    after one of arms a, b must still be labelled c, d (the draws are this fit's)."""
    import pymc as pm

    from saturation.models.sampling import SamplerConfig, clear_compiled_cache, sample_model

    def model(arms: list[str], centre: list[float]) -> pm.Model:
        with pm.Model(coords={"arm": arms}) as m:
            c = pm.Data("centre", np.array(centre))
            pm.Normal("x", mu=c, sigma=1.0, dims="arm")
        return m

    config = SamplerConfig(draws=50, tune=30, chains=1, sampler="nutpie")
    clear_compiled_cache()
    for arms, centre in ((["a", "b"], [0.0, 0.0]), (["c", "d"], [40.0, -40.0])):
        idata, _ = sample_model(
            model(arms, centre), cache_key=("test-coords",), data={"centre": np.array(centre)}, seed=1, config=config
        )
        assert list(idata.posterior["arm"].values) == arms
    assert float(idata.posterior["x"].sel(arm="c").mean()) > 30  # the labels go with the right draws
    clear_compiled_cache()


# ---------------------------------------------------------------- scipy/ArviZ-free twins
# The exact plateau path computes these without importing scipy.stats or ArviZ (seconds of
# imports); each must give the very number the library call gives (same seed, same output).


def _samples():
    rng = np.random.default_rng(7)
    shapes = ((2, 1.0, 0.0), (3, 1e-4, 2.0), (400, 3.0, -1.0), (4000, 0.01, 0.0))
    out = [rng.normal(size=n) * s + m for n, s, m in shapes]
    out.append(np.round(rng.normal(size=1000), 1))  # ties
    out.append(rng.standard_t(2, size=4001))  # heavy tails, odd count
    return out


def test_average_ranks_are_rankdatas():
    from scipy import stats

    from saturation.models.sampling import average_ranks

    rng = np.random.default_rng(1)
    for x in (
        rng.normal(size=(4000, 5)),
        rng.integers(0, 4, size=(400, 3)).astype(float),
        np.r_[rng.normal(size=9), np.nan][:, None],
    ):
        got, want = average_ranks(x), stats.rankdata(x, method="average", axis=0)
        assert np.array_equal(got, want, equal_nan=True)
        assert got.strides == want.strides  # same layout: the FFTs downstream add in the same order


def test_hdi_1d_is_arvizs():
    from saturation.models.sampling import hdi_1d

    for x in _samples():
        assert np.array_equal(hdi_1d(x), az.hdi(x, hdi_prob=0.94))
    with pytest.raises(ValueError, match="Too few"):
        hdi_1d(np.array([]))


def test_hdi_columns_is_arvizs_per_column():
    from saturation.models.sampling import hdi_columns

    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(size=800), np.round(rng.normal(size=800), 1), rng.standard_t(2, size=800)])
    assert np.array_equal(hdi_columns(x), np.asarray(az.hdi(x[None], hdi_prob=0.94)))
    for s in _samples():  # one column: hdi_1d's interval
        assert np.array_equal(hdi_columns(s[:, None])[0], az.hdi(s, hdi_prob=0.94))


def test_kde_at_is_gaussian_kdes():
    from scipy import stats

    from saturation.models.sampling import kde_at

    for x in _samples():
        for point in (0.0, float(np.median(x)), float(x.max()) + 1.0):
            assert kde_at(x, point) == stats.gaussian_kde(x)(point)[0]


def test_deferred_inference_data_is_from_dicts():
    """The exact sampler's groups become the InferenceData az.from_dict and add_groups make."""
    import xarray as xr

    from saturation._lazy import DeferredInferenceData, posterior_dataset

    rng = np.random.default_rng(3)
    draws = {"a": rng.normal(size=(4, 50, 3)), "s": rng.normal(size=(4, 50))}
    coords, dims = {"level": ["file", "module", "entity"]}, {"a": ["level"]}
    want = az.from_dict(posterior=draws, coords=coords, dims=dims)
    deferred = DeferredInferenceData(posterior_dataset(draws, coords=coords, dims=dims))
    extra = xr.Dataset({"y": (("level", "step"), rng.normal(size=(3, 5)))}, coords={"level": coords["level"]})
    for idata in (want, deferred):
        idata.add_groups(observed_data=extra, empty=xr.Dataset())  # empty: skipped by both
        idata.attrs["chosen"] = "auto"  # the InferenceData's own attributes
    got = deferred.to_inference_data()
    assert dict(got.attrs) == dict(want.attrs) == {"chosen": "auto"}
    assert isinstance(got, az.InferenceData)
    assert got.groups() == want.groups() == ["posterior", "observed_data"]
    for group in want.groups():
        a, b = getattr(got, group).copy(), getattr(want, group).copy()
        for ds in (a, b):
            ds.attrs.pop("created_at", None)
        assert a.identical(b), group
    with pytest.raises(ValueError, match="already exists"):
        deferred.add_groups(observed_data=extra)


# --- the compiled-model cache keys on the whole graph (issue 40) ---------------------------


def _toy(prior_sd, y):
    import pymc as pm

    with pm.Model() as model:
        d = pm.Data("y", y)
        a = pm.Normal("a", 0.0, prior_sd)
        pm.Normal("obs", a, 1.0, observed=d)
    return model


def test_fingerprint_changes_with_a_prior_not_with_data_values_or_lengths():
    from saturation.models.sampling import graph_fingerprint

    base = graph_fingerprint(_toy(1.0, np.zeros(3)))
    assert graph_fingerprint(_toy(1.0, np.ones(3))) == base  # new data: the compiled model is reused
    assert graph_fingerprint(_toy(0.01, np.zeros(3))) != base  # a prior baked into the graph
    assert graph_fingerprint(_toy(1.0, np.zeros(4))) == base  # data of another length: swapped too


def _fingerprints(build, *variants):
    from saturation.models.sampling import graph_fingerprint

    return [graph_fingerprint(build(v)) for v in variants]


def test_plateau_binomial_prior_changes_the_cache_key():
    """The reported defect: a second binomial fit with log_kappa ~ N(0, 0.01) reused the first
    fit's compiled model (posterior mean 7.01, the first prior's)."""
    from saturation.models.plateau import PlateauConfig, PlateauPriors, build_plateau_model, step_data
    from saturation.simulate import simulate_plateau

    ds, _ = simulate_plateau(seed=1)
    ds = ds.sel(trial=ds.step < 12)
    ds["reward"] = (ds["reward"] > 0.5).astype(float)
    sd = step_data(ds, response="reward")

    def build(priors):
        return build_plateau_model(sd, PlateauConfig(likelihood="binomial", response="reward", priors=priors))[0]

    a, b, c = _fingerprints(build, PlateauPriors(), PlateauPriors(), PlateauPriors(log_kappa_mu=0.0, log_kappa_sd=0.01))
    assert a == b and a != c


def test_sigmoid_and_transfer_priors_change_the_cache_key():
    from saturation.models.sigmoid import SigmoidConfig, SigmoidPriors, arm_steps, build_sigmoid_model
    from saturation.models.transfer import TransferConfig, TransferPriors, build_transfer_model, transfer_data
    from saturation.simulate import simulate_sigmoid_arms, simulate_transfer

    trials, _ = simulate_sigmoid_arms(seed=0)
    data = arm_steps(trials)

    def sigmoid(priors):
        return build_sigmoid_model(data, SigmoidConfig(priors=priors))[0]

    a, b, c = _fingerprints(sigmoid, SigmoidPriors(), SigmoidPriors(), SigmoidPriors(asymptote_sd=0.1))
    assert a == b and a != c

    tds, _ = simulate_transfer(seed=0)
    tdata = transfer_data(tds)

    def transfer(priors):
        return build_transfer_model(tdata, TransferConfig(priors=priors))[0]

    a, b, c = _fingerprints(transfer, TransferPriors(), TransferPriors(), TransferPriors(rw_sd=0.05))
    assert a == b and a != c


@pytest.mark.slow
def test_two_fits_with_two_priors_give_two_posteriors():
    from saturation.models.plateau import PlateauPriors, fit_plateau
    from saturation.models.sampling import ConvergenceWarning, SamplerConfig
    from saturation.simulate import simulate_plateau

    ds, _ = simulate_plateau(seed=1)
    ds = ds.sel(trial=ds.step < 40)
    ds["reward"] = (ds["reward"] > 0.5).astype(float)
    sampler = SamplerConfig(draws=200, tune=200, chains=2)
    means = []
    for priors in (PlateauPriors(), PlateauPriors(log_kappa_mu=0.0, log_kappa_sd=0.01)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit = fit_plateau(
                ds, likelihood="binomial", response="reward", breakpoint=20, priors=priors, sampler=sampler, seed=1
            )
        means.append(float(fit.idata.posterior["log_kappa"].mean()))
    assert means[0] > 3.0  # the data's concentration
    assert abs(means[1]) < 0.05  # the second prior's, not the first fit's


def test_trace_groups_are_nutpies_own_conversion():
    """nutpie's raw draws read by ``trace_groups`` equal what ``nutpie.sample`` returns
    through ArviZ for the same seed: every posterior and sample-statistic array, its
    dimensions, coordinates and attributes (the creation time aside)."""
    from dataclasses import replace

    import xarray as xr

    from saturation._lazy import import_nutpie
    from saturation.configs import SigmoidConfig
    from saturation.models import sigmoid_kernel
    from saturation.models.sampling import trace_groups
    from saturation.models.sigmoid import arm_steps, sigmoid_values
    from saturation.simulate import SigmoidArmsSpec, simulate_sigmoid_arms

    ds, _ = simulate_sigmoid_arms(SigmoidArmsSpec(n_steps=12, prompts_per_step=4, samples_per_prompt=4), seed=1)
    config = SigmoidConfig(likelihood="gaussian")
    used, values = sigmoid_values(replace(arm_steps(ds), binary=False), config)
    compiled = sigmoid_kernel.compiled_model(values, used, config.priors, ["a", "b"], "arm")
    nutpie = import_nutpie()
    settings = {"draws": 30, "tune": 20, "chains": 3, "seed": 5, "progress_bar": False, "save_warmup": False}
    raw = nutpie.sample(compiled, return_raw_trace=True, **settings)
    ours = trace_groups(*raw.get_arrow_trace(), coords=compiled.coords)
    theirs = nutpie.sample(compiled, **settings)
    assert ours.groups() == theirs.groups() == ["posterior", "sample_stats"]
    for group in ours.groups():
        a, b = ours[group].copy(), theirs[group].copy()
        a.attrs.pop("created_at"), b.attrs.pop("created_at")
        xr.testing.assert_identical(a, b)
    assert list(ours.posterior["asymptote_logit"].coords["arm"].values) == ["a", "b"]
    assert int(ours.sample_stats["diverging"].sum()) == int(theirs.sample_stats["diverging"].sum())
