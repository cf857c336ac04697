"""saturation: Bayesian analysis of reinforcement-learning training dynamics.

Graded trials (one row per rollout) live in :class:`xarray.Dataset` objects with
dims ``trial`` and ``level``; per-step sufficient statistics feed the PyMC models.
"""

__version__ = "0.1.0"

import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

from saturation.schema import HDI_PROB

# A pip-installed PyTensor warns, the first time it rewrites a graph (not on import: when
# ``pytensor.config.blas__ldflags`` is first read, e.g. as nutpie compiles a model), that it
# found no BLAS to link its C code against. The default samplers do not run that C code (the
# exact draws are numpy, nutpie compiles to numba); ``--sampler pymc`` does, where a missing
# BLAS costs speed, not accuracy. Silenced for exactly that message from exactly that module;
# the flag itself is left alone, so a BLAS that PyTensor does find is still used.
warnings.filterwarnings(
    "ignore",
    message="PyTensor could not link to a BLAS installation",
    category=UserWarning,
    module=r"pytensor\.link\.c\.cmodule",
)

# ArviZ prints, once a day per machine, a FutureWarning on import about its own coming
# refactor: nothing a user of this package can act on, and it lands on the CLI's stderr.
# Silenced for exactly that message from ArviZ; its other warnings are left alone.
warnings.filterwarnings(
    "ignore",
    message=r"\s*ArviZ is undergoing a major refactor",
    category=FutureWarning,
    module=r"arviz",
)

#: public names -> the module that owns them, imported on first use (PEP 562): importing
#: ``saturation`` (and so ``saturation --help``) does not pull in pandas, xarray and SciPy
_LAZY = {
    "aggregate": "saturation.aggregate",
    "open_trials": "saturation.io",
    "read_trials": "saturation.io",
    "write_table": "saturation.io",
    "write_trials": "saturation.io",
    "PlateauSpec": "saturation.simulate",
    "SeriesSpec": "saturation.simulate",
    "TransferSpec": "saturation.simulate",
    "simulate_plateau": "saturation.simulate",
    "simulate_series": "saturation.simulate",
    "simulate_transfer": "saturation.simulate",
    "TrialValidationError": "saturation.validate",
    "validate_trials": "saturation.validate",
}

if TYPE_CHECKING:
    from saturation.aggregate import aggregate
    from saturation.io import open_trials, read_trials, write_table, write_trials
    from saturation.simulate import (
        PlateauSpec,
        SeriesSpec,
        TransferSpec,
        simulate_plateau,
        simulate_series,
        simulate_transfer,
    )
    from saturation.validate import TrialValidationError, validate_trials


class _Package(types.ModuleType):
    """The package module: a submodule import must not replace the public function of the same
    name (``saturation.aggregate`` is the function, as it was when it was imported eagerly;
    ``from saturation.aggregate import ...`` reads ``sys.modules`` and is unaffected)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType) and value.__name__ == f"saturation.{name}":
            globals().pop(name, None)  # resolved again through __getattr__, as the function
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'saturation' has no attribute {name!r}")


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
