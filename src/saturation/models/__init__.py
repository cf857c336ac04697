"""PyMC model code: build -> fit -> InferenceData.

The names below are imported from their modules on first use (PEP 562): ``from
saturation.models.sigmoid import fit_sigmoid`` (``saturation compare``) then imports
neither the plateau nor the transfer model's module (issue 45: each costs tenths of a
second of a command that does not use it).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from saturation.models.plateau import (
        PlateauFit,
        PlateauPriors,
        StepData,
        VerdictRule,
        compare_plateau_models,
        fit_alternative,
        fit_plateau,
        plateau_verdict,
        step_data,
    )
    from saturation.models.plateau_model import exact_loo, plateau_prior_predictive
    from saturation.models.sampling import ConvergenceWarning, SamplerConfig
    from saturation.models.transfer import (
        TransferFit,
        TransferPriors,
        fit_transfer,
        transfer_data,
        transfer_frame,
    )

#: each public name and the module it lives in
_HOMES = {
    **dict.fromkeys(
        (
            "PlateauFit",
            "PlateauPriors",
            "StepData",
            "VerdictRule",
            "compare_plateau_models",
            "fit_alternative",
            "fit_plateau",
            "plateau_verdict",
            "step_data",
        ),
        "saturation.models.plateau",
    ),
    "exact_loo": "saturation.models.plateau_model",
    "plateau_prior_predictive": "saturation.models.plateau_model",
    "ConvergenceWarning": "saturation.models.sampling",
    "SamplerConfig": "saturation.models.sampling",
    **dict.fromkeys(
        ("TransferFit", "TransferPriors", "fit_transfer", "transfer_data", "transfer_frame"),
        "saturation.models.transfer",
    ),
}

__all__ = [
    "ConvergenceWarning",
    "PlateauFit",
    "PlateauPriors",
    "SamplerConfig",
    "StepData",
    "TransferFit",
    "TransferPriors",
    "VerdictRule",
    "compare_plateau_models",
    "exact_loo",
    "fit_alternative",
    "fit_plateau",
    "fit_transfer",
    "plateau_prior_predictive",
    "plateau_verdict",
    "step_data",
    "transfer_data",
    "transfer_frame",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:  # a submodule not imported yet (``saturation.models.plateau``)
        if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
