"""Shared fixtures: small simulated trial sets (fast, fixed seeds)."""

from __future__ import annotations

import pytest

from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau


@pytest.fixture(scope="session")
def small_plateau():
    """A small two-level plateau study: 12 steps x 8 prompts x 4 samples."""
    spec = PlateauSpec(
        levels=(
            LevelSpec("file", 0.7, 0.02, 0.0, 6.0),
            LevelSpec("entity", 0.5, 0.03, 0.001, 6.0, n_gold_mean=1.5),
        ),
        n_steps=12,
        prompts_per_step=8,
        samples_per_prompt=4,
        pool_size=200,
        ungraded_rate=0.1,
    )
    return simulate_plateau(spec, seed=3)
