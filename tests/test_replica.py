"""The embedded synthetic replica: in sync with its generator, and calibrated.

The calibration check is the issue's: the study's own method (split OLS at step 46 on
per-step means) reproduces the published figures within the stated tolerances.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from saturation import schema as S
from saturation.replica import (
    EMBEDDED_SERIES,
    EMBEDDED_TRIALS,
    KNOWN_MISSES,
    build_embedded,
    code_contests_checks,
    content_hash,
    data_dir,
    load_embedded,
    reproduction_table,
    truth_table,
)

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "data" / "reference.json"


@pytest.fixture(scope="module")
def reference():
    return json.loads(REFERENCE.read_text())


@pytest.fixture(scope="module")
def table(reference):
    return reproduction_table(reference)


def test_regenerating_reproduces_the_committed_files(tmp_path):
    manifest = build_embedded(tmp_path)
    committed = json.loads((data_dir() / "MANIFEST.json").read_text())
    assert manifest == committed
    for name in [*EMBEDDED_TRIALS.values(), *EMBEDDED_SERIES.values()]:
        assert content_hash(tmp_path / name) == content_hash(data_dir() / name), name


def test_embedded_data_is_labelled_synthetic():
    for name in [*EMBEDDED_TRIALS, *EMBEDDED_SERIES]:
        ds = load_embedded(name)
        assert "SYNTHETIC" in ds.attrs[S.ATTR_SYNTHETIC]


def test_embedded_sizes_match_the_study():
    sm = load_embedded("swesmith")
    assert int(sm[S.GRADED].sum()) == 42511
    assert np.unique(sm[S.STEP]).size == 91
    assert list(sm[S.LEVEL].values) == ["file", "module", "entity"]
    gym = load_embedded("swegym")
    counts = {a: int((gym[S.ARM] == a).sum()) for a in ("base", "s85")}
    assert counts == {"base": 20156, "s85": 19034}


def test_lr_arm_starts_where_s85_starts_and_loses_more():
    """The assumed LR arm (docs/data.md): the same first-step truth as s85 (one checkpoint),
    its all-rollout reward below s85's from step 8 to its last step; appended without changing
    the base and s85 trials (their steps and counts as published)."""
    from saturation.replica import LR_ARM, SWEGYM_SPEC
    from saturation.simulate import transfer_truth_curves

    truth = transfer_truth_curves(SWEGYM_SPEC)
    s85, lr = (truth.sel({S.ARM: a}) for a in ("s85", LR_ARM))
    for q in (S.UNGRADED_RATE, S.GRADED_ONLY):
        assert float(lr[q].sel({S.STEP: 1})) == pytest.approx(float(s85[q].sel({S.STEP: 1})))
    steps = truth[S.STEP].to_numpy()
    later = (steps >= 8) & truth["observed"].sel({S.ARM: LR_ARM}).to_numpy()
    assert later.sum() >= 25
    assert (lr[S.ALL_ROLLOUT].to_numpy()[later] < s85[S.ALL_ROLLOUT].to_numpy()[later]).all()
    gym = load_embedded("swegym")
    assert int((gym[S.ARM] == LR_ARM).sum()) == 18048
    assert np.unique(gym[S.STEP].to_numpy()[gym[S.ARM].to_numpy() == LR_ARM]).tolist() == list(range(1, 37))


@pytest.mark.parametrize("section", ["saturation", "precision_recall", "transfer"])
def test_study_method_reproduces_published_figures(table, section):
    rows = table[(table.section == section) & (table.note == "")]
    assert len(rows) > 0
    failing = rows[~rows.ok]
    assert failing.empty, failing[["item", "published", "replica", "tolerance"]].to_string()


def test_split_ols_slopes_and_t(table, reference):
    """Spelled out for the saturation table: early slopes within 25 %, t within 1.5."""
    for level, pub in reference["saturation"]["levels"].items():
        early = table.set_index("item").loc[f"{level} early slope"]
        assert abs(early.replica - pub["early_slope"]) <= 0.25 * pub["early_slope"]
        for which in ("early", "late"):
            t = table.set_index("item").loc[f"{level} {which} t"]
            assert abs(t.replica - pub[f"{which}_t"]) <= 1.5


def test_generator_is_calibrated(reference):
    t = truth_table(reference)
    ok = t[t.note == ""]
    assert ok.ok.all(), ok[~ok.ok].to_string()
    # the documented miss really is a miss, and only by the amount stated
    missed = t[t.note != ""]
    assert len(missed) == len(KNOWN_MISSES)
    assert (missed.error.abs() < 0.03).all()


def test_code_contests_series_endpoints(reference):
    ds = load_embedded("code-contests")
    runs = {r["model"]: r for r in reference["runs"] if r["run"] == "code-contests"}
    base = ds.sel({S.RUN: "code-contests-base"}).dropna(S.STEP, subset=["reward_mean"])
    g1 = ds.sel({S.RUN: "code-contests-g1"}).dropna(S.STEP, subset=["reward_mean"])
    assert base.sizes[S.STEP] == runs["Qwen3-8B base"]["steps"]
    assert g1.sizes[S.STEP] == runs["g1"]["steps"]
    # base reward flat after step 15 within the published +-0.01, the other published ends
    assert code_contests_checks(ds) == []
    algo = ds.sel({S.RUN: "code-contests-algo"}).dropna(S.STEP, subset=["reward_mean"])
    total = 0.7 * algo["environment_pass_ratio"] + 0.3 * algo["environment_tag_f1"]
    np.testing.assert_allclose(algo["reward_mean"], total, atol=2e-6)  # the CSV's %.6g
    assert bool(algo["pass_at_k"].isnull().all()) and algo.sizes[S.STEP] == 30
    assert ds["pass_at_k"].attrs["metric_name"] == "reward/avg_pass_at_8"


def test_study_checks_put_the_published_figures_next_to_the_estimates(monkeypatch):
    """The series study check (the replica layer's, shown only for the replica's specs):
    one row per run, quantity and start/end, the published value beside the estimate's
    mean and HDI and whether the HDI holds it; runs without a published model are left out."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "models"))
    from test_learning import _made_up_series, _made_up_trend

    from saturation.models.learning import diagnose_reliability
    from saturation.replica import study_check_series

    monkeypatch.setattr("saturation.models.learning.trend_draws", _made_up_trend)
    rel = diagnose_reliability(_made_up_series(12, reward_mean=(0.3, 0.5), pass_at_k=(0.55, 0.8)), seed=1)
    reference = {"runs": [{"run": "code-contests", "model": "M", "reward": [0.30, 0.90], "pass_at_8": [0.55, 0.8]}]}
    trends = [("reward", "reward_mean", rel), ("pass_at_8", "pass_at_k", rel), ("entropy", "policy_entropy", None)]
    table = study_check_series(reference, ["r"], ["M"], trends)
    columns = ["run", "quantity", "published", "mean", "hdi_low", "hdi_high", "published inside HDI"]
    assert list(table.columns) == columns
    assert table["quantity"].tolist() == ["reward start", "reward end", "pass_at_8 start", "pass_at_8 end"]
    assert table["published inside HDI"].tolist() == [True, False, True, True]  # 0.90 is not the end's 0.5
    assert study_check_series(reference, ["r"], ["other model"], trends).empty
