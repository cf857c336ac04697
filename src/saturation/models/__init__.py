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

__all__ = ["ConvergenceWarning", "PlateauFit", "PlateauPriors", "SamplerConfig", "StepData", "compare_plateau_models", "fit_alternative", "fit_plateau", "plateau_prior_predictive", "step_data"]
