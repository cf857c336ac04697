"""Per-step series (saturation.series): what a dynamic-sampling run's logged reward can say
(fixtures: skyrl_fixtures.dynamic_sampling_log, upstream's filter and replace rules)."""

from __future__ import annotations

import numpy as np
import pytest

from saturation import series as SE
from saturation.skyrl import metrics_dataset, read_console_log
from skyrl_fixtures import console_log, dynamic_sampling_log, write


def _series(tmp_path, name: str, text: str):
    return metrics_dataset([read_console_log(write(tmp_path / f"{name}.log", text), strict=True)])


@pytest.mark.parametrize("kind", ["filter", "replace"])
def test_the_bounds_hold_the_mean_of_every_generated_rollout(tmp_path, kind):
    """20 runs of 10 steps: the generated batch's mean reward (which the log never shows) is
    inside the bounds at every step; the logged mean of the kept groups is not that mean."""
    inside, errors, widths = [], [], []
    for seed in range(20):
        text, truth = dynamic_sampling_log(10, kind=kind, seed=seed)
        ds = _series(tmp_path, f"{kind}{seed}", text)
        frame = SE.dynamic_sampling_bounds(ds, "Qwen/Qwen3-8B")
        assert list(frame["step"]) == sorted(truth)
        generated = np.array([truth[s]["generated_mean"] for s in frame["step"]])
        inside += list((frame["lower"] <= generated) & (generated <= frame["upper"]))
        errors += list(np.abs(frame["logged"] - generated))
        widths += list(frame["upper"] - frame["lower"])
        assert (frame["pass_logged"] == 1).all()  # every kept group has a success
        share = np.array([truth[s]["mixed"] / truth[s]["generated"] for s in frame["step"]])
        np.testing.assert_allclose(frame["pass_lower"], share)
    assert np.mean(inside) == 1.0
    assert np.mean(errors) > 0.03  # the logged mean is off the generated one by several points
    assert 0 < np.median(widths) < 1


def test_notes_name_the_runs_and_a_metrics_csv_keeps_the_counts(tmp_path):
    text, _ = dynamic_sampling_log(6, kind="filter", seed=2)
    ds = _series(tmp_path, "ds", text)
    assert SE.dynamic_sampling_runs(ds) == {"Qwen/Qwen3-8B": "filter"}
    (note,) = SE.dynamic_sampling_notes(ds)
    assert note.startswith("run Qwen/Qwen3-8B trained with dynamic sampling (filter): SkyRL computes its reward/*")
    assert "pass@k is 1 by construction" in note and "median width" in note
    assert SE.dynamic_sampling_notes(ds, runs=["other"]) == []
    # a metrics CSV keeps no attributes, but the per-step counts: the strategy is unrecorded
    back = SE.read_metrics(SE.write_metrics_csv(ds, tmp_path / "m.csv"))
    assert SE.dynamic_sampling_runs(back) == {"Qwen/Qwen3-8B": "unrecorded"}
    assert "trained with dynamic sampling:" in SE.dynamic_sampling_notes(back)[0]
    plain = _series(tmp_path, "plain", console_log(4))
    assert SE.dynamic_sampling_runs(plain) == {} and SE.dynamic_sampling_notes(plain) == []
    with pytest.raises(KeyError, match="no dynamic-sampling counts"):
        SE.dynamic_sampling_bounds(plain, "Qwen/Qwen3-8B")


def test_a_reward_outside_the_unit_interval_is_refused_with_its_step(tmp_path):
    text, _ = dynamic_sampling_log(4, kind="filter", seed=0)
    ds = _series(tmp_path, "ds", text)
    ds["reward_mean"].loc[{"run": "Qwen/Qwen3-8B", "step": 3}] = 2.5
    with pytest.raises(ValueError, match=r"run Qwen/Qwen3-8B, step 3, field reward/avg_raw_reward: 2.5 is outside"):
        SE.dynamic_sampling_bounds(ds, "Qwen/Qwen3-8B")


def test_the_pass_bounds_read_the_training_pass_at_k_not_an_eval_one(tmp_path):
    text, _ = dynamic_sampling_log(4, kind="filter", seed=0)
    ds = _series(tmp_path, "ds", text)
    ds["eval_pass_at_8"] = ds["reward_mean"] * 0 + 0.25  # sorts before reward/avg_pass_at_8
    ds["eval_pass_at_8"].attrs = {"metric_name": "eval/swe_gym/pass_at_8", "k": 8}
    frame = SE.dynamic_sampling_bounds(ds, "Qwen/Qwen3-8B")
    assert (frame["pass_logged"] == 1).all()


def test_one_rollout_a_prompt_drops_nothing_and_warns_of_nothing(tmp_path):
    """Upstream keeps every group when n_samples_per_prompt is 1: one round a step, every
    prompt trained on, the logged metrics are of all of them; no pass@1 bounds."""
    text, _ = dynamic_sampling_log(4, kind="filter", n=1, seed=0)
    ds = _series(tmp_path, "ds", text)
    frame = SE.dynamic_sampling_bounds(ds, "Qwen/Qwen3-8B")
    assert (frame["rounds"] == 1).all() and "pass_lower" not in frame
    np.testing.assert_allclose(frame["upper"] - frame["lower"], 2 * 0.5e-4, atol=1e-9)  # the rounding only
    assert SE.dynamic_sampling_runs(ds) == {"Qwen/Qwen3-8B": "filter"} and SE.dynamic_sampling_notes(ds) == []


def test_ingest_keeps_the_strategy_and_the_line_accounting(tmp_path):
    """Through ingest_runs (which merges a run's training logs) the strategy read from the
    YAML dump and the round lines' accounting survive."""
    from saturation.ingest import ingest_runs

    write(tmp_path / "run" / "train.log", dynamic_sampling_log(3, kind="replace", config="yaml", seed=1)[0])
    res = ingest_runs([tmp_path / "run"], progress=False)
    assert SE.dynamic_sampling_runs(res.metrics) == {"Qwen/Qwen3-8B": "replace"}
    (log,) = res.accounting["dirs"][0]["console_logs"]
    assert log["dynamic_sampling_lines"] > 0 and log["dynamic_sampling_lines_unplaced"] == 0
