"""Named simulation scenarios (``saturation simulate``): ``scenario(name, seed) -> (data, truth)``.

Each scenario runs a simulator of :mod:`saturation.simulate` on a fixed spec: its default
specs (``plateau``, ``transfer``, ``series``, ``sigmoid-arms``: two recipe arms with
known sigmoid curves and different ceilings), the null scenarios (``null-rising``: a
steadily rising metric, no plateau; ``flat``: no learning) and the generators of the
embedded replica (``swesmith``, ``swegym``, ``code-contests``; specs in
:mod:`saturation.replica`). The names are ``schema.SCENARIO_NAMES`` (the CLI's help lists
them without importing this module; a test checks that the two agree).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import xarray as xr

from saturation.replica import CODE_CONTESTS_SPECS, SWEGYM_SPEC, SWESMITH_SPEC
from saturation.simulate import (
    LevelSpec,
    PlateauSpec,
    SeriesSpec,
    SigmoidArmsSpec,
    TransferSpec,
    simulate_plateau,
    simulate_series,
    simulate_series_runs,
    simulate_sigmoid_arms,
    simulate_transfer,
)


def _code_contests(seed: int) -> tuple[xr.Dataset, dict[str, Any]]:
    """The embedded code-contests runs (base and g1), run ``i`` with seed ``seed + i``."""
    return simulate_series_runs(CODE_CONTESTS_SPECS, seed)


def _null_rising(seed: int) -> tuple[xr.Dataset, dict[str, Any]]:
    """Steadily rising metric, no plateau (change point beyond the last step)."""
    spec = PlateauSpec(levels=(LevelSpec("file", 0.55, 0.004, 0.004, 1000.0),), run="null-rising", n_steps=91)
    return simulate_plateau(spec, seed)


def _flat(seed: int) -> tuple[xr.Dataset, dict[str, Any]]:
    """Flat metric from the start (no learning)."""
    spec = PlateauSpec(levels=(LevelSpec("file", 0.7, 0.0, 0.0, 45.0),), run="flat", n_steps=91)
    return simulate_plateau(spec, seed)


SCENARIOS: dict[str, Callable[[int], tuple[xr.Dataset, dict[str, Any]]]] = {
    "plateau": lambda seed: simulate_plateau(PlateauSpec(), seed),
    "transfer": lambda seed: simulate_transfer(TransferSpec(), seed),
    "series": lambda seed: simulate_series(SeriesSpec(), seed),
    "null-rising": _null_rising,
    "flat": _flat,
    "swesmith": lambda seed: simulate_plateau(SWESMITH_SPEC, seed),
    "swegym": lambda seed: simulate_transfer(SWEGYM_SPEC, seed),
    "code-contests": _code_contests,
    "sigmoid-arms": lambda seed: simulate_sigmoid_arms(SigmoidArmsSpec(), seed),
}


def scenario(name: str, seed: int = 0) -> tuple[xr.Dataset, dict[str, Any]]:
    """Run a named scenario: ``(data, truth)``.

    Parameters
    ----------
    name : str
        One of ``SCENARIOS`` (``saturation simulate --help`` lists them).
    seed : int, default 0
        Seeds the simulator: same seed, same data.

    Returns
    -------
    tuple of (xarray.Dataset, dict)
        The simulated data and the truth it was simulated from.
    """
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    return SCENARIOS[name](seed)
