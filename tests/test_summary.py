"""The shared display rules of intervals (saturation.summary)."""

from __future__ import annotations

import numpy as np

from saturation.models.sampling import interval
from saturation.summary import cell_text, format_interval, interval_cell, shows_median


def test_an_interval_is_shown_by_its_mean_unless_a_ratio_or_outside_its_hdi():
    """A real helper-found case: a late / early slope ratio printed "-0.26 [-0.03, 0.03]"
    (a denominator near zero: the ratio's mean need not exist). Ratios ask for the median;
    any interval whose mean falls outside its own HDI is shown by its median too."""
    rng = np.random.default_rng(0)
    normal = interval(rng.normal(1.0, 0.1, 4000))
    assert set(normal) == {"mean", "median", "sd", "hdi"} and not shows_median(normal)
    assert format_interval(normal, 2) == f"{normal['mean']:.2f} [{normal['hdi'][0]:.2f}, {normal['hdi'][1]:.2f}]"
    ratio_draws = rng.normal(0.0, 0.01, 4000) / rng.normal(0.0, 1.0, 4000)
    ratio = interval(ratio_draws, center="median")
    assert ratio["center"] == "median" and shows_median(ratio)
    assert format_interval(ratio, 3).startswith(f"median {np.median(ratio_draws):.3f} [")
    skewed = {"mean": 0.005, "median": -0.001, "sd": 0.02, "hdi": [-0.008, 0.002]}  # compare's headroom
    assert shows_median(skewed) and format_interval(skewed, 3) == "median -0.001 [-0.008, 0.002]"
    cell = interval_cell(skewed)
    assert cell is not None and cell.mean == 0.005 and str(cell) == cell_text(skewed) == "median -0.001 [-0.008, 0.002]"
    assert format_interval({"mean": 1.0, "hdi": [0.0, 2.0]}) == "1.000 [0.000, 2.000]"  # no median: the mean
    assert format_interval(None) == "-"


def test_a_rounded_zero_has_no_sign():
    assert format_interval({"mean": -0.0004, "hdi": [-31.2, 21.4]}, 0) == "0 [-31, 21]"
    assert format_interval({"mean": 0.5, "hdi": [-0.001, 1.0]}, 2) == "0.50 [0.00, 1.00]"
