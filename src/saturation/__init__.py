"""saturation: Bayesian analysis of reinforcement-learning training dynamics.

Graded trials (one row per rollout) live in :class:`xarray.Dataset` objects with
dims ``trial`` and ``level``; per-step sufficient statistics feed the PyMC models.
"""

__version__ = "0.1.0"

from saturation.aggregate import aggregate
from saturation.io import open_trials, read_trials, write_table, write_trials
from saturation.schema import HDI_PROB
from saturation.simulate import (
    PlateauSpec,
    SeriesSpec,
    TransferSpec,
    simulate_plateau,
    simulate_series,
    simulate_transfer,
)
from saturation.validate import TrialValidationError, validate_trials

__all__ = [
    "HDI_PROB",
    "PlateauSpec",
    "SeriesSpec",
    "TransferSpec",
    "TrialValidationError",
    "__version__",
    "aggregate",
    "open_trials",
    "read_trials",
    "simulate_plateau",
    "simulate_series",
    "simulate_transfer",
    "validate_trials",
    "write_table",
    "write_trials",
]
