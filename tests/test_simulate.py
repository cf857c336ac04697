"""Simulators: determinism, internal consistency, and agreement with their truth."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from saturation import schema as S
from saturation.aggregate import aggregate
from saturation.simulate import (
    LevelSpec,
    PlateauSpec,
    SeriesSpec,
    TransferSpec,
    simulate_plateau,
    simulate_series,
    simulate_series_runs,
    simulate_transfer,
)


def test_same_seed_same_output(small_plateau):
    ds, _ = small_plateau
    spec_ds, _ = simulate_plateau(
        PlateauSpec(
            levels=(
                LevelSpec("file", 0.7, 0.02, 0.0, 6.0),
                LevelSpec("entity", 0.5, 0.03, 0.001, 6.0, n_gold_mean=1.5),
            ),
            n_steps=12,
            prompts_per_step=8,
            samples_per_prompt=4,
            pool_size=200,
            ungraded_rate=0.1,
        ),
        seed=3,
    )
    xr.testing.assert_identical(ds, spec_ds)
    other, _ = simulate_plateau(PlateauSpec(n_steps=12, prompts_per_step=8, samples_per_prompt=4), seed=4)
    assert not np.array_equal(other[S.F1].values[:50], ds[S.F1].values[:50])


def test_level_metrics_are_mutually_consistent(small_plateau):
    ds, _ = small_plateau
    g = ds[S.GRADED].values
    tp, pred, gold = (ds[v].values[g] for v in (S.N_TP, S.N_PRED, S.N_GOLD))
    assert (tp <= np.minimum(pred, gold)).all()
    assert (pred >= 1).all() and (gold >= 1).all()
    np.testing.assert_allclose(ds[S.F1].values[g], 2 * tp / (pred + gold))
    np.testing.assert_allclose(ds[S.PRECISION].values[g], tp / pred)
    np.testing.assert_allclose(ds[S.RECALL].values[g], tp / gold)
    # gold count is a property of the task: constant across its samples
    frame = ds[[S.N_GOLD]].sel({S.LEVEL: "file"}).to_dataframe()
    assert (frame.dropna().groupby(S.INSTANCE_ID)[S.N_GOLD].nunique() == 1).all()


def test_prompt_groups_share_an_instance(small_plateau):
    ds, _ = small_plateau
    frame = ds[[S.GRADED]].to_dataframe().reset_index()
    per = frame.groupby([S.STEP, S.INSTANCE_ID])[S.SAMPLE].nunique()
    assert (per == 4).all()


def test_plateau_simulation_follows_its_truth():
    """Per-step means averaged over segments match the expected curves (large sample)."""
    spec = PlateauSpec(levels=(LevelSpec("file", 0.6, 0.01, 0.0, 20.0),), n_steps=40, ungraded_rate=0.1)
    ds, truth = simulate_plateau(spec, seed=11)
    agg = aggregate(ds, by=(S.STEP,))
    curves = truth["curves"]
    for fld in (S.F1, S.PRECISION, S.RECALL, S.N_PRED, S.N_GOLD):
        emp = agg[f"{fld}_mean"].sel({S.LEVEL: "file"}).values
        exp = curves[fld].sel({S.LEVEL: "file"}).values
        for sl in (slice(0, 20), slice(20, 40)):
            assert emp[sl].mean() == pytest.approx(exp[sl].mean(), abs=0.02), fld
    assert float(agg[S.UNGRADED_RATE].mean()) == pytest.approx(0.1, abs=0.01)
    assert truth["levels"]["file"]["end"] == pytest.approx(0.8)
    assert truth["levels"]["file"]["headroom"] == pytest.approx(0.2)


def test_exact_graded_count():
    spec = PlateauSpec(n_steps=5, prompts_per_step=4, samples_per_prompt=8, n_graded=150)
    ds, _ = simulate_plateau(spec, seed=0)
    assert int(ds[S.GRADED].sum()) == 150
    assert ds.sizes[S.TRIAL] == 160


def test_unreachable_curve_is_an_error():
    spec = PlateauSpec(levels=(LevelSpec("file", 0.99, 0.01, 0.0, 10.0, fp_prob_start=0.9, fp_prob_end=0.9),))
    with pytest.raises(ValueError, match="not reachable"):
        simulate_plateau(spec, seed=0)


def test_transfer_simulation_follows_its_truth():
    ds, truth = simulate_transfer(TransferSpec(), seed=5)
    agg = aggregate(ds, by=(S.ARM, S.STEP))
    curves = truth["curves"]
    for arm in ("base", "s85"):
        emp_u = agg[S.UNGRADED_RATE].sel({S.ARM: arm}).values
        emp_g = agg["reward_mean"].sel({S.ARM: arm}).values
        assert emp_u.mean() == pytest.approx(curves[S.UNGRADED_RATE].sel({S.ARM: arm}).values.mean(), abs=0.02)
        assert emp_g.mean() == pytest.approx(curves["graded_only"].sel({S.ARM: arm}).values.mean(), abs=0.02)
    # paired design: both arms see the same task at the same step and prompt slot
    frame = ds[[S.GRADED]].to_dataframe().reset_index()
    a = frame[frame[S.ARM] == "base"].set_index([S.STEP, S.SAMPLE])[S.INSTANCE_ID]
    b = frame[frame[S.ARM] == "s85"].set_index([S.STEP, S.SAMPLE])[S.INSTANCE_ID]
    common = a.index.intersection(b.index)
    assert (a.loc[common].values == b.loc[common].values).all()
    # known crossover of the default spec: s85 - base all-rollout gap turns negative
    assert truth["crossover_step"]["s85"] == pytest.approx(8.0)


def test_transfer_trial_counts_are_exact():
    ds, _ = simulate_transfer(TransferSpec(), seed=0)
    assert int((ds[S.ARM] == "base").sum()) == 10240
    assert int((ds[S.ARM] == "s85").sum()) == 10240


def test_series_simulation():
    ds, truth = simulate_series(SeriesSpec(), seed=0)
    assert ds["pass_at_k"].attrs["metric_name"] == "reward/avg_pass_at_8"
    assert ds.sizes == {S.RUN: 1, S.STEP: 35}
    late = slice(20, 35)
    assert float(ds["reward_mean"].isel({S.STEP: late}).mean()) == pytest.approx(0.5, abs=0.03)
    assert float(ds["pass_at_k"].mean()) == pytest.approx(float(truth["curves"]["pass_at_k"].mean()), abs=0.03)
    again, _ = simulate_series(SeriesSpec(), seed=0)
    xr.testing.assert_identical(ds, again)


def test_series_runs_are_the_single_runs_with_consecutive_seeds():
    specs = (SeriesSpec(run="a", n_steps=6), SeriesSpec(run="b", n_steps=4, k=4))
    ds, truth = simulate_series_runs(specs, seed=3)
    assert list(ds[S.RUN].values) == ["a", "b"] and list(truth) == ["a", "b"]
    for i, spec in enumerate(specs):
        one, _ = simulate_series(spec, seed=3 + i)
        run = ds.sel({S.RUN: spec.run}).dropna(S.STEP)
        for var in one.data_vars:
            np.testing.assert_array_equal(run[var].to_numpy(), one[var].isel({S.RUN: 0}).to_numpy())
    assert ds["pass_at_k"].attrs == {"metric_name": "reward/avg_pass_at_8", "k": 8}  # the first run's


def test_composite_reward_series_is_the_weighted_sum_of_its_components():
    comps = (("environment/pass_ratio", 0.7, ((1, 0.4), (20, 0.6)), 10), ("environment/tag_f1", 0.3, ((1, 0.5),), 4))
    ds, truth = simulate_series(SeriesSpec(run="algo", n_steps=20, prompts_per_step=256, components=comps), seed=4)
    pr, tf = ds["environment_pass_ratio"], ds["environment_tag_f1"]
    assert pr.attrs["metric_name"] == "environment/pass_ratio" and tf.attrs["metric_name"] == "environment/tag_f1"
    np.testing.assert_allclose(ds["reward_mean"], 0.7 * pr + 0.3 * tf, atol=1e-12)
    assert bool(ds["pass_at_k"].isnull().all())  # no binary success in a composite reward
    # the batch means follow the expected curves (256 prompts x 8 rollouts: se about 0.01)
    np.testing.assert_allclose(pr.isel({S.RUN: 0}), truth["curves"]["environment_pass_ratio"], atol=0.05)
    assert float(np.abs(pr.isel({S.RUN: 0}) - truth["curves"]["environment_pass_ratio"]).mean()) < 0.02
    # tag F1 takes values on the 4-tag grid per rollout, so the batch mean is a multiple of 1/(4 x 8 x 256)
    units = tf.to_numpy() * 4 * 8 * 256
    np.testing.assert_allclose(units, np.round(units), atol=1e-6)
