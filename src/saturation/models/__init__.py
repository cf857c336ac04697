"""PyMC model code: build -> fit -> InferenceData."""

from saturation.models.plateau import (
    PlateauFit,
    PlateauPriors,
    StepData,
    VerdictRule,
    compare_plateau_models,
    exact_loo,
    fit_alternative,
    fit_plateau,
    plateau_verdict,
    step_data,
)
from saturation.models.plateau_model import plateau_prior_predictive
from saturation.models.sampling import ConvergenceWarning, SamplerConfig
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
