"""Shared fixtures: small simulated trial sets (fast, fixed seeds)."""

from __future__ import annotations

import pytest

from saturation.simulate import ArmSpec, LevelSpec, PlateauSpec, TransferSpec, simulate_plateau


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


@pytest.fixture(scope="session")
def crossing_spec() -> TransferSpec:
    """The transfer recovery scenario: two arms whose all-rollout rewards cross (24 steps x 48
    prompts x 4 samples per arm). The transfer tests and the report test both simulate it, so
    one session fits one model shape and reuses its compiled model."""
    per_arm = 24 * 48 * 4
    return TransferSpec(
        arms=(
            ArmSpec("base", per_arm, ((1, 0.40), (24, 0.25)), ((1, 0.40), (24, 0.60))),
            ArmSpec("s85", per_arm, ((1, 0.40), (24, 0.40)), ((1, 0.55), (24, 0.45))),
        ),
        prompts_per_step=48,
        samples_per_prompt=4,
        pool_size=600,
        task_sd=0.5,
        ungraded_task_sd=0.5,
        step_sd=0.03,
    )
