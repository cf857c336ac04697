"""PyMC model code: build -> fit -> InferenceData."""

from saturation.models._sampling import ConvergenceWarning, SamplerConfig
from saturation.models.plateau import (
    PlateauFit,
    PlateauPriors,
    StepData,
    compare_plateau_models,
    fit_alternative,
    fit_plateau,
    plateau_prior_predictive,
    step_data,
)
from saturation.models.transfer import (
    TransferFit,
    TransferPriors,
    fit_transfer,
    transfer_data,
    transfer_frame,
)

__all__ = [
    "ConvergenceWarning",
    "PlateauFit",
    "PlateauPriors",
    "SamplerConfig",
    "StepData",
    "TransferFit",
    "TransferPriors",
    "compare_plateau_models",
    "fit_alternative",
    "fit_plateau",
    "fit_transfer",
    "plateau_prior_predictive",
    "step_data",
    "transfer_data",
    "transfer_frame",
]
