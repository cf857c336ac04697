"""saturation: Bayesian analysis of reinforcement-learning training dynamics.

Graded trials (one row per rollout) live in :class:`xarray.Dataset` objects with
dims ``trial`` and ``level``; per-step sufficient statistics feed the PyMC models.
"""

__version__ = "0.1.0"

import sys as _sys
import types as _types
import warnings as _warnings
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from saturation.schema import HDI_PROB

# A pip-installed PyTensor warns, the first time it rewrites a graph (not on import: when
# ``pytensor.config.blas__ldflags`` is first read, e.g. as nutpie compiles a model), that it
# found no BLAS to link its C code against. The default samplers do not run that C code (the
# exact draws are numpy, nutpie compiles to numba); ``--sampler pymc`` does, where a missing
# BLAS costs speed, not accuracy. Silenced for exactly that message from exactly that module;
# the flag itself is left alone, so a BLAS that PyTensor does find is still used.
_warnings.filterwarnings(
    "ignore",
    message="PyTensor could not link to a BLAS installation",
    category=UserWarning,
    module=r"pytensor\.link\.c\.cmodule",
)

# ArviZ prints, once a day per machine, a FutureWarning on import about its own coming
# refactor: nothing a user of this package can act on, and it lands on the CLI's stderr.
# Silenced for exactly that message from ArviZ; its other warnings are left alone.
_warnings.filterwarnings(
    "ignore",
    message=r"\s*ArviZ is undergoing a major refactor",
    category=FutureWarning,
    module=r"arviz",
)

#: the public API: module -> the names it owns, imported on first use (PEP 562) so that
#: ``import saturation`` (and so ``saturation --help``) loads no pandas, xarray, SciPy, PyMC
#: or ArviZ; ``saturation.fit_plateau`` imports the plateau model when first looked up
_PUBLIC: dict[str, tuple[str, ...]] = {
    # trials and metrics: read, write, check, summarise
    "saturation.io": ("read_trials", "open_trials", "write_trials", "write_table"),
    "saturation.validate": ("validate_trials", "TrialValidationError"),
    "saturation.aggregate": ("aggregate", "select_phase"),
    "saturation.series": ("read_metrics", "read_metrics_csv", "write_metrics_csv"),
    "saturation.ingest": ("ingest_runs", "scan_run_dir"),
    "saturation.skyrl": ("read_console_log", "metrics_dataset"),
    "saturation.wandb_history": ("read_wandb_run",),
    # simulators
    "saturation.simulate": (
        "PlateauSpec",
        "SeriesSpec",
        "TransferSpec",
        "simulate_plateau",
        "simulate_series",
        "simulate_series_runs",
        "simulate_transfer",
    ),
    "saturation.scenarios": ("scenario",),
    # analyses: one fit function and one result object each
    "saturation.models.plateau": (
        "fit_plateau",
        "PlateauFit",
        "LevelEstimates",
        "compare_plateau_models",
        "ModelComparison",
    ),
    "saturation.models.plateau_model": ("fit_alternative", "exact_loo", "plateau_prior_predictive"),
    "saturation.models.verdicts": ("plateau_verdict",),
    "saturation.models.runs": ("fit_plateau_runs", "PlateauRuns"),
    "saturation.models.transfer": ("fit_transfer", "TransferFit"),
    "saturation.models.sigmoid": ("fit_sigmoid", "SigmoidFit"),
    # every analysis' config and priors: one module, each field declared once
    "saturation.configs": (
        "DiagnoseConfig",
        "SeriesConfig",
        "CardinalityConfig",
        "ReliabilityConfig",
        "EntropyConfig",
        "ComponentsConfig",
        "PassAtKPriors",
        "PlateauConfig",
        "PlateauPriors",
        "VerdictRule",
        "TransferConfig",
        "TransferPriors",
        "SigmoidConfig",
        "SigmoidPriors",
        "SamplerConfig",
    ),
    "saturation.models.families": ("compare_curve_families", "FamilyComparison"),
    "saturation.models.learning": (
        "diagnose_cardinality",
        "diagnose_reliability",
        "diagnose_entropy",
        "diagnose_components",
        "diagnose_series",
        "diagnose",
        "fit_pass_at_k",
        "Diagnosis",
        "SeriesDiagnosis",
        "Diagnoses",
    ),
    "saturation.models.sampling": ("ConvergenceWarning",),
    # specs, the report, calibration, figures
    "saturation.spec": ("load_spec",),
    "saturation.report": ("run_report",),
    "saturation.calibrate": ("calibrate",),
    "saturation.plots": (
        "plot_plateau",
        "plot_slopes",
        "plot_plateaued_by",
        "plot_ppc",
        "plot_loo",
        "plot_cardinality",
        "plot_pass_at_k",
        "plot_entropy",
        "plot_components",
        "plot_transfer",
        "plot_saturation_curves",
    ),
}
_LAZY = {name: module for module, names in _PUBLIC.items() for name in names}

# for type checkers; report, calibrate, spec and scenarios are left out (importing them here
# closes an import cycle mypy cannot type through), so their names type as Any
if _TYPE_CHECKING:
    from saturation.aggregate import aggregate, select_phase
    from saturation.configs import (
        CardinalityConfig,
        ComponentsConfig,
        DiagnoseConfig,
        EntropyConfig,
        PassAtKPriors,
        PlateauConfig,
        PlateauPriors,
        ReliabilityConfig,
        SamplerConfig,
        SeriesConfig,
        SigmoidConfig,
        SigmoidPriors,
        TransferConfig,
        TransferPriors,
        VerdictRule,
    )
    from saturation.ingest import ingest_runs, scan_run_dir
    from saturation.io import open_trials, read_trials, write_table, write_trials
    from saturation.models.families import FamilyComparison, compare_curve_families
    from saturation.models.learning import (
        Diagnoses,
        Diagnosis,
        SeriesDiagnosis,
        diagnose,
        diagnose_cardinality,
        diagnose_components,
        diagnose_entropy,
        diagnose_reliability,
        diagnose_series,
        fit_pass_at_k,
    )
    from saturation.models.plateau import (
        LevelEstimates,
        ModelComparison,
        PlateauFit,
        compare_plateau_models,
        fit_plateau,
    )
    from saturation.models.plateau_model import exact_loo, fit_alternative, plateau_prior_predictive
    from saturation.models.runs import PlateauRuns, fit_plateau_runs
    from saturation.models.sampling import ConvergenceWarning
    from saturation.models.sigmoid import SigmoidFit, fit_sigmoid
    from saturation.models.transfer import TransferFit, fit_transfer
    from saturation.models.verdicts import plateau_verdict
    from saturation.plots import (
        plot_cardinality,
        plot_components,
        plot_entropy,
        plot_loo,
        plot_pass_at_k,
        plot_plateau,
        plot_plateaued_by,
        plot_ppc,
        plot_saturation_curves,
        plot_slopes,
        plot_transfer,
    )
    from saturation.series import read_metrics, read_metrics_csv, write_metrics_csv
    from saturation.simulate import (
        PlateauSpec,
        SeriesSpec,
        TransferSpec,
        simulate_plateau,
        simulate_series,
        simulate_series_runs,
        simulate_transfer,
    )
    from saturation.skyrl import metrics_dataset, read_console_log
    from saturation.validate import TrialValidationError, validate_trials
    from saturation.wandb_history import read_wandb_run


class _Package(_types.ModuleType):
    """The package module: a submodule import must not replace the public function of the same
    name (``saturation.aggregate`` and ``saturation.calibrate`` are the functions, whichever
    of their modules was imported; ``from saturation.aggregate import ...`` reads
    ``sys.modules`` and is unaffected)."""

    def __setattr__(self, name: str, value: _Any) -> None:
        if name in _LAZY and isinstance(value, _types.ModuleType) and value.__name__ == f"saturation.{name}":
            globals().pop(name, None)  # resolved again through __getattr__, as the function
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'saturation' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "HDI_PROB",
    "CardinalityConfig",
    "ComponentsConfig",
    "ConvergenceWarning",
    "DiagnoseConfig",
    "Diagnoses",
    "Diagnosis",
    "EntropyConfig",
    "FamilyComparison",
    "LevelEstimates",
    "ModelComparison",
    "PassAtKPriors",
    "PlateauConfig",
    "PlateauFit",
    "PlateauPriors",
    "PlateauRuns",
    "PlateauSpec",
    "ReliabilityConfig",
    "SamplerConfig",
    "SeriesConfig",
    "SeriesDiagnosis",
    "SeriesSpec",
    "SigmoidConfig",
    "SigmoidFit",
    "SigmoidPriors",
    "TransferConfig",
    "TransferFit",
    "TransferPriors",
    "TransferSpec",
    "TrialValidationError",
    "VerdictRule",
    "__version__",
    "aggregate",
    "calibrate",
    "compare_curve_families",
    "compare_plateau_models",
    "diagnose",
    "diagnose_cardinality",
    "diagnose_components",
    "diagnose_entropy",
    "diagnose_reliability",
    "diagnose_series",
    "exact_loo",
    "fit_alternative",
    "fit_pass_at_k",
    "fit_plateau",
    "fit_plateau_runs",
    "fit_sigmoid",
    "fit_transfer",
    "ingest_runs",
    "load_spec",
    "metrics_dataset",
    "open_trials",
    "plateau_prior_predictive",
    "plateau_verdict",
    "plot_cardinality",
    "plot_components",
    "plot_entropy",
    "plot_loo",
    "plot_pass_at_k",
    "plot_plateau",
    "plot_plateaued_by",
    "plot_ppc",
    "plot_saturation_curves",
    "plot_slopes",
    "plot_transfer",
    "read_console_log",
    "read_metrics",
    "read_metrics_csv",
    "read_trials",
    "read_wandb_run",
    "run_report",
    "scan_run_dir",
    "scenario",
    "select_phase",
    "simulate_plateau",
    "simulate_series",
    "simulate_series_runs",
    "simulate_transfer",
    "validate_trials",
    "write_metrics_csv",
    "write_table",
    "write_trials",
]
