"""Shared fixtures: small simulated trial sets (fast, fixed seeds)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from saturation import schema as S
from saturation.limits import single_thread_blas
from saturation.models.transfer import TransferConfig, TransferFit
from saturation.simulate import ArmSpec, LevelSpec, PlateauSpec, TransferSpec, simulate_plateau

# as the command line runs: BLAS on one thread. The variables reach the pytest-xdist workers,
# started after this file is read, before their NumPy is imported, where the suite runs with
# ``-n auto``; in this process NumPy is already loaded (zarr's pytest plugin imports it), so
# here they change nothing
single_thread_blas()


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


def _made_up_transfer_fit(reference, arm, p_start, p_end, cross_mean, p_no_crossover, last_step=36):
    """A TransferFit around made-up estimands (no sampling): the decision rule under test."""
    e = {"mean": -0.05, "sd": 0.01, "hdi": [-0.07, -0.03]}
    estimands = {
        "initial": {
            arm: {f"delta_{q}": e for q in (S.ALL_ROLLOUT, S.GRADED_ONLY, S.UNGRADED_RATE)} | {"p_positive": p_start}
        },
        "crossover_step": {arm: {"mean": cross_mean, "sd": 1.0, "hdi": [2.0, 6.0], "p_no_crossover": p_no_crossover}},
        "last_step": {arm: {"step": last_step, f"delta_{S.ALL_ROLLOUT}": e, "p_positive": p_end}},
    }
    return TransferFit(
        idata=None,  # type: ignore[arg-type]
        config=TransferConfig(reference=reference),
        data=SimpleNamespace(arms=[reference, arm]),  # type: ignore[arg-type]
        estimands=estimands,
        diagnostics={"converged": True},
        timings={},
    )


@pytest.fixture(scope="session")
def made_up_transfer_fit():
    """``factory(reference, arm, p_start, p_end, cross_mean, p_no_crossover)``: a TransferFit
    around made-up estimands, for tests of the decision rule and of what reads it."""
    return _made_up_transfer_fit
