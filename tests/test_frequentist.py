"""Frequentist cross-checks: Davies' test against recorded R output, and its null rate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from saturation.frequentist import davies_test, split_ols

DATA = Path(__file__).parent / "data"


def _r_results() -> list[dict]:
    return json.loads((DATA / "davies_r.json").read_text())["results"]


@pytest.mark.parametrize("rec", _r_results(), ids=lambda r: f"{r['series']}-{r['alternative']}")
def test_davies_matches_r_segmented(rec: dict) -> None:
    """Same p-value and best break as segmented 1.6.2's davies.test(lm(y ~ x), k = 10)
    on the shared series (scripts/davies_r.R wrote the JSON)."""
    series = pd.read_csv(DATA / "davies_series.csv")
    sub = series[series["series"] == rec["series"]]
    ours = davies_test(sub["x"].to_numpy(), sub["y"].to_numpy(), alternative=rec["alternative"])
    assert ours["p_value"] == pytest.approx(rec["p_value"], rel=1e-8, abs=1e-300)
    assert ours["best"] == pytest.approx(rec["best"], rel=1e-12)
    assert ours["n_points"] == rec["n_points"]


def test_davies_null_rate_and_power() -> None:
    """On straight lines with iid noise the test rejects at most about 5 % at 0.05 (Davies'
    bound is conservative); on a hinge of the study's size it rejects almost always."""
    rng = np.random.default_rng(3)
    x = np.arange(91.0)
    null = [davies_test(x, 0.6 + 0.002 * x + rng.normal(0, 0.02, 91))["p_value"] for _ in range(300)]
    rate = float(np.mean(np.array(null) < 0.05))
    assert rate <= 0.07, rate
    hinge = [davies_test(x, 0.6 + 0.002 * np.minimum(x, 46) + rng.normal(0, 0.02, 91))["p_value"] for _ in range(50)]
    assert np.mean(np.array(hinge) < 0.05) >= 0.9


def test_davies_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="alternative"):
        davies_test(np.arange(10.0), np.arange(10.0), alternative="both")
    with pytest.raises(ValueError, match="at least 5"):
        davies_test(np.arange(4.0), np.arange(4.0))


def test_split_ols_recovers_known_slopes() -> None:
    x = np.arange(91.0)
    y = 0.5 + 0.003 * np.minimum(x, 46) + 0.0005 * np.maximum(x - 46, 0)
    table = split_ols(x, y, 46)
    assert table.loc["early", "slope"] == pytest.approx(0.003)
    assert table.loc["late", "slope"] == pytest.approx(0.0005)
