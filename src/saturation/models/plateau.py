"""Bayesian segmented regression of a per-step metric: did it plateau, when, how flat?

Model (per level :math:`l`, per step :math:`t` with :math:`n_t` graded trials):

.. math::

    \\bar y_{lt} \\sim \\mathcal N\\big(\\mu_l(t; c_l),\\; \\sigma_{w,l}^2 / n_{lt} + \\tau_l^2\\big),
    \\qquad
    \\mu_l(t; c) = a_l + \\beta_{1l}(\\min(t, c) - t_0) + \\beta_{2l}\\max(t - c, 0)
                   + \\delta_l [t \\ge c]

with the within-step variance :math:`\\sigma_{w,l}^2` informed exactly by the within-step
sums of squares (sufficient statistics), step overdispersion :math:`\\tau_l`, jump
:math:`\\delta_l = 0` for the continuous hinge. An unknown change point is discrete on
the grid of observed steps leaving at least ``min_segment`` steps on each side, and is
marginalised exactly: :math:`p(y_l\\mid\\theta) = \\sum_c w_c\\, p(y_l \\mid c, \\theta)`.
Separate change points use uniform :math:`w_c`; the shared (pooled) model puts
:math:`w_{c} \\propto \\exp(-(c - c_0)^2 / 2 s^2)` around a common :math:`c_0` with spread
:math:`s`. The posterior over the change point is recovered per draw from the
conditional :math:`p(c\\mid\\theta, y)` and averaged (Rao-Blackwellised).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import curves, progress
from saturation import schema as S
from saturation._lazy import DeferredInferenceData, InferenceDataField, held_idata, lazy
from saturation.configs import PlateauConfig, PlateauPriors, SamplerConfig, VerdictRule
from saturation.frequentist import davies_test
from saturation.limits import (
    config_or_keywords,
    fit_memory_problem,
    fit_time_problem,
)
from saturation.models._exact import (
    exponential_approach,
    hinge_line_log_bf,
    line_change_draws,
    logistic_approach,
    sample_either_shape,
    sample_gaussian_exact,
    sample_rows,
)
from saturation.models.persist import FigureView, FitObject, TableView
from saturation.models.plateau_data import StepData, step_data
from saturation.models.plateau_model import (
    ALTERNATIVE_LOG_SCALE_SD,
    NP_OPS,
    SIGMOID_LOG_WIDTH_SD,
    SIGMOID_WIDTH_FRACTION,
    asymptote_bounds,
    autocorrelation_caveats,
    build_plateau_model,
    change_grid,
    data_caveats,
    elpd_exact,
    evidence_weight,
    exact_loo_lppd,
    fit_alternative,
    gaussian_loglik_by_changepoint,
    grid_positions,
    headroom_defined,
    is_pooled,
    level_dependence,
    loo_table,
    noise_prior,
    resolve_priors,
    sigmoid_log_width_bounds,
    step_loglik,
    zoib_mean,
)
from saturation.models.sampling import (
    diagnostics,
    interval,
    kde_at,
    sample_model,
    stamp_attrs,
    warn_if_not_converged,
)
from saturation.models.verdicts import (
    FLAT_DEFINITION,
    LABELS,
    STOPPED_VERDICTS,
    curve_shape,
    plateau_verdict,
    verdict_summary,
)
from saturation.summary import (
    Interval,
    convergence_words,
    data_text,
    format_interval,
    interval_cell,
    json_safe,
    short_repr,
)

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
    from scipy import stats
else:  # imported on first use: the exact Gaussian path needs none of them (ARCHITECTURE.md)
    az, pm, pytensor, pt, stats = map(lazy, ("arviz", "pymc", "pytensor", "pytensor.tensor", "scipy.stats"))

CONTINUITIES = S.CONTINUITIES
LIKELIHOODS = S.LIKELIHOODS
#: default region of practical equivalence: the late segment gains less than this (metric
#: units) over the whole late window
DEFAULT_ROPE = S.DEFAULT_ROPE
#: default relative ROPE: the late gain is also "flat" when it is within this share of the
#: early gain (docs/calibration.md "Verdicts" for how it was chosen)
DEFAULT_ROPE_RELATIVE = S.DEFAULT_ROPE_RELATIVE

#: trials' default shape gate: the jump is weighed in where BF(jump : hinge) >= this
#: ("strong" evidence; :attr:`PlateauConfig.jump_gate`)
JUMP_GATE = 10.0
#: the end window: the last third of the run on the step axis (at least END_MIN_POINTS
#: logged steps), where a straight line answers "still moving at the end?" whatever the
#: curve's shape before it (:func:`end_window`)
END_FRACTION = 1.0 / 3.0
END_MIN_POINTS = 5
#: draws of the smooth approach's curve for its end-window estimands (:func:`_smooth_estimands`)
SMOOTH_DRAWS = 4000
#: what "flat" means, printed once beside the P(flat) column
#: the curves :meth:`PlateauFit.compare_models` compares by default
COMPARED_MODELS = ("hinge", "linear", "exponential")


# ====================================================================== data


# ====================================================================== priors
# ====================================================================== priors scaled to the data


# ====================================================================== likelihood


# ====================================================================== model


# ====================================================================== fit
#: the interval estimates of a level (``{"mean", "median", "sd", "hdi"}`` each)
LEVEL_INTERVALS = (
    "changepoint",
    "start",
    "value_at_changepoint",
    "end",
    "early_slope",
    "late_slope",
    "early_gain",
    "late_gain",
    "end_gain",
    "smooth_end_gain",
    "slowdown_ratio",
    "headroom_to_max",
)
#: the probabilities and Bayes factors of a level
LEVEL_NUMBERS = (
    "late_gain_upper",
    "p_flat",
    "p_late_in_rope",
    "p_late_in_rope_relative",
    "p_early_positive",
    "p_rise_positive",
    "p_slowed",
    "p_late_positive",
    "p_late_gain_beyond_rope",
    "p_late_loss_beyond_rope",
    "p_end_gain_beyond_rope",
    "p_end_loss_beyond_rope",
    "p_no_change",
    "edge_mass",
    "bf_changepoint_vs_line",
    "bf_smooth_vs_break",
    "bf_smooth_vs_line",
    "p_smooth_end_in_rope",
    "p_smooth_end_positive",
    "p_smooth_slowed",
    "bf01_late_zero",
)


@dataclass(frozen=True)
class LevelEstimates:
    """One level's plateau estimates as a typed record (:meth:`PlateauFit.levels`): what the
    front ends, the study check and calibrate read, by attribute. The JSON is the fit's
    ``to_dict()``; this is a view of the same numbers.

    Parameters
    ----------
    level : str
        The level (or the metric).
    verdict : str
        The verdict (``models.verdicts.VERDICTS``).
    reason : str
        The numbers and the limit that decided it.
    intervals : dict of str to Interval
        The interval estimates present (:data:`LEVEL_INTERVALS`), each ``mean [low, high]``.
    numbers : dict of str to float
        The probabilities and Bayes factors present (:data:`LEVEL_NUMBERS`).
    changepoint_mass : dict
        P(change point = step) per candidate step.
    extra : dict
        Everything else the level holds (the shape weights, the Davies test, the end window).
    """

    level: str
    verdict: str
    reason: str
    intervals: dict[str, Interval]
    numbers: dict[str, float | None]
    changepoint_mass: dict[Any, float]
    extra: dict[str, Any]

    @classmethod
    def from_estimands(cls, level: str, e: dict[str, Any]) -> LevelEstimates:
        """The record of one level's estimands dict.

        Parameters
        ----------
        level : str
            The level.
        e : dict
            ``estimands["levels"][level]``.

        Returns
        -------
        LevelEstimates
            The same numbers, typed.
        """
        intervals = {k: cell for k in LEVEL_INTERVALS if (cell := interval_cell(e.get(k))) is not None}
        numbers = {k: (None if e[k] is None else float(e[k])) for k in LEVEL_NUMBERS if k in e}
        known = {*LEVEL_INTERVALS, *LEVEL_NUMBERS, "verdict", "reason", "changepoint_mass"}
        return cls(
            level,
            str(e["verdict"]),
            str(e.get("reason", "")),
            intervals,
            numbers,
            dict(e.get("changepoint_mass") or {}),
            {k: v for k, v in e.items() if k not in known},
        )

    def __getattr__(self, name: str) -> Any:
        """An interval or a number by its name (``rec.late_gain``, ``rec.p_flat``); None when
        this fit did not estimate it."""
        if name in LEVEL_INTERVALS:
            return self.intervals.get(name)
        if name in LEVEL_NUMBERS:
            return self.numbers.get(name)
        raise AttributeError(name)

    @property
    def stopped(self) -> bool:
        """The verdict says the metric stopped rising ("plateaued" or "slowed")."""
        return self.verdict in STOPPED_VERDICTS


@dataclass
class PlateauFit(FitObject):
    """Result of :func:`fit_plateau`: InferenceData plus tidy estimands and diagnostics.

    Parameters
    ----------
    idata : arviz.InferenceData
        Posterior draws (change points, curve parameters, derived estimands) with the
        config, data summary and diagnostics in its attrs. The exact sampler's draws are
        made an InferenceData (and ArviZ imported) when this is first read.
    config : PlateauConfig
        The analysis settings the fit ran with.
    data : StepData
        The per-step inputs.
    estimands : dict
        Per level: interval dicts (``mean``, ``sd``, ``hdi``) of the change point, slopes,
        gains, headroom; the verdict and its numbers; pooled: the spread and co-stopping.
    diagnostics : dict
        R-hat, ESS, divergences, ``converged`` (:func:`models.sampling.diagnostics`).
    timings : dict
        Seconds spent compiling and sampling, and the sampler used.
    seed : int
        The seed the fit drew with (its figures' and checks' random draws use it too).
    """

    idata: az.InferenceData
    config: PlateauConfig
    data: StepData
    estimands: dict[str, Any]
    diagnostics: dict[str, Any]
    timings: dict[str, Any]
    #: the seed the fit drew with (its figures' and checks' random draws use it too)
    seed: int = 0

    def summary(self) -> pd.DataFrame:
        """Tidy table: one row per (level, estimand) with mean, sd and 94 % HDI, plus the
        probabilities and Bayes factor (in ``mean``). ``attrs['converged']`` is set."""
        rows = []
        for level, est in self.estimands["levels"].items():
            for name in (
                "changepoint",
                "early_slope",
                "late_slope",
                "start",
                S.VALUE_AT_CHANGEPOINT,
                "end",
                "headroom_to_max",
                "early_gain",
                "late_gain",
                "slowdown_ratio",
            ):
                if name in est and est[name] is not None:
                    e = est[name]
                    rows.append(
                        {
                            "level": level,
                            "estimand": name,
                            "mean": e["mean"],
                            "sd": e["sd"],
                            "hdi_low": e["hdi"][0],
                            "hdi_high": e["hdi"][1],
                        }
                    )
            for name in (
                "p_early_positive",
                "p_late_in_rope",
                "p_late_in_rope_relative",
                "p_flat",
                "p_slowed",
                "bf01_late_zero",
                "bf_changepoint_vs_line",
            ):
                if est.get(name) is None:
                    continue
                rows.append(
                    {
                        "level": level,
                        "estimand": name,
                        "mean": est[name],
                        "sd": np.nan,
                        "hdi_low": np.nan,
                        "hdi_high": np.nan,
                    }
                )
        table = pd.DataFrame(rows)
        table.attrs["converged"] = self.diagnostics["converged"]
        table.attrs["hdi_prob"] = S.HDI_PROB
        return table

    def __repr__(self) -> str:
        sd, cfg = self.data, self.config
        head = (
            f"PlateauFit(response {sd.response}, {len(sd.levels)} level(s) x {len(sd.steps)} steps, "
            f"{cfg.likelihood}, {self.timings.get('sampler', '?')}; {convergence_words(self.diagnostics)})"
        )
        lines = [
            f"{lv}: {e['verdict']}; change point {format_interval(e.get('changepoint'), 1)}; "
            f"late slope {format_interval(e.get('late_slope'), 5)}"
            for lv, e in self.estimands["levels"].items()
        ]
        return short_repr(head, lines)

    def curve_draws(self, steps: Any = None) -> np.ndarray:
        """Posterior draws of the fitted metric mean at ``steps`` (default: the observed
        steps): array (samples, levels, steps) (:func:`curve_draws`)."""
        return curve_draws(self, steps)

    def frame(self) -> pd.DataFrame:
        """Per (level, step): the observed mean, the posterior mean curve, its 94 % band and
        P(change point at the step) (:func:`plateau_frame`: the data behind the curves figure)."""
        return plateau_frame(self)

    def verdicts(self) -> dict[str, dict[str, str]]:
        """Per level: ``{"verdict", "reason"}`` (:func:`plateau_verdict`)."""
        return {lv: {"verdict": e["verdict"], "reason": e["reason"]} for lv, e in self.estimands["levels"].items()}

    def _noise_words(self) -> str:
        """The step-noise model for :meth:`describe_model` ("" for independent noise)."""
        if self.config.noise == "ar1":
            return ", AR(1) step noise"
        if self.config.noise == "auto":
            p = ", ".join(
                f"{lv} {e['p_independent_noise']:.2f}"
                for lv, e in self.estimands["levels"].items()
                if "p_independent_noise" in e
            )
            return f", step noise independent or AR(1) averaged by their evidence (P(independent): {p})"
        return ""

    def describe_model(self) -> str:
        """One line naming the model that was fitted (the CLI and the report print it)."""
        cfg = self.config
        if cfg.breakpoint is not None:
            shape = (
                "split model: separate early and late lines with a jump at the break, as the study's split OLS"
                if cfg.continuity == "jump"
                else "continuous hinge at the break"
            )
            noise = self._noise_words()
            return f"known break at step {cfg.breakpoint:g} ({shape}), {cfg.likelihood} likelihood{noise}"
        pooling = (
            f"change points pooled around a common one (evidence weight "
            f"{self.estimands['together']['evidence_weight']:.2f} for correlated levels)"
            if is_pooled(cfg, len(self.data.levels))
            else "separate change points"
            if len(self.data.levels) > 1
            else "one change point"
        )
        noise = self._noise_words()
        shape = str(cfg.continuity)
        if cfg.continuity == "auto":
            p_jump = ", ".join(f"{lv} {e['p_jump']:.2f}" for lv, e in self.estimands["levels"].items())
            shape = f"hinge and jump averaged by their evidence (P(jump): {p_jump})"
            if cfg.jump_gate is not None:
                weighed = [lv for lv, e in self.estimands["levels"].items() if e["jump_weight"] > 0]
                shape = (
                    f"the hinge, a jump weighed in where BF(jump : hinge) >= {cfg.jump_gate:g} "
                    f"({', '.join(weighed) if weighed else 'no level'}; P(jump): {p_jump})"
                )
        return f"unknown break, {pooling}, {shape}, {cfg.likelihood} likelihood{noise}"

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (docs/plateau.md)."""
        cfg = self.config
        return {
            "data": {
                "path": self.data.summary.get("sources"),
                "n_trials": self.data.summary.get("n_trials"),
                "n_graded": self.data.summary.get("n_graded"),
                "steps": self.data.summary["steps"],
                "response": self.data.response,
                "synthetic": self.data.summary.get("synthetic", ""),
                **{k: self.data.summary[k] for k in ("phase", "phases_left_out", "binned") if k in self.data.summary},
            },
            "model": {
                "description": self.describe_model(),
                "breakpoint": "unknown" if cfg.breakpoint is None else cfg.breakpoint,
                "shared": cfg.shared,
                "continuity": cfg.continuity,
                "likelihood": cfg.likelihood,
                "rope": cfg.rope,
                "rope_relative": cfg.rope_relative,
                "metric_max": cfg.metric_max,
                "noise": cfg.noise,
                "min_segment": cfg.priors.min_segment,
                "hdi_prob": S.HDI_PROB,
                "rule": asdict(cfg.rule),
            },
            "levels": self.estimands["levels"],
            "summary": verdict_summary(self.estimands["levels"]),
            "caveats": self.estimands.get("caveats", []),
            "together": self.estimands.get("together"),
            "shape": self.estimands.get("shape"),
            "diagnostics": dict(self.diagnostics),
        }

    # ------------------------------------------------------------------ views
    def ylabel(self) -> str:
        """The metric's axis label: the graded-only mean F1, or the response as logged."""
        if self.config.response == S.F1:
            return "graded-only mean F1"
        return str(self.data.summary.get("metric_name") or self.config.response)

    def levels(self) -> dict[str, LevelEstimates]:
        """Each level's estimates as a typed record (the numbers of ``estimands["levels"]``).

        Returns
        -------
        dict of str to LevelEstimates
            By level, in the fit's order.
        """
        return {lv: LevelEstimates.from_estimands(lv, e) for lv, e in self.estimands["levels"].items()}

    def table(self) -> pd.DataFrame:
        """One row per level: the verdict, the change point, the slopes and gains, the
        evidence for a break, the curve's shape (a break or a smooth approach, with the
        unknown break of the exact Gaussian fit) and the headroom (interval cells ``{"mean", "hdi"}``)."""
        rows = []
        for level, e in self.estimands["levels"].items():
            rows.append(
                {
                    "level": level,
                    "verdict": e["verdict"],
                    "change point": self._where(e, short=True),
                    "early slope": interval_cell(e["early_slope"]),
                    "late slope": interval_cell(e["late_slope"]),
                    "late gain": interval_cell(e["late_gain"]),
                    "late gain 94 % upper": e["late_gain_upper"],
                    "late / early slope": interval_cell(e.get("slowdown_ratio")),
                    LABELS["p_flat"]: e["p_flat"],
                    "BF change point : line": e["bf_changepoint_vs_line"],
                    "shape": e.get("curve_shape"),
                    "BF smooth : break": e.get("bf_smooth_vs_break"),
                    "Davies p": e["davies"]["p_value"] if e.get("davies") else None,
                    "BF01 (late = 0)": e["bf01_late_zero"],
                    "start": interval_cell(e["start"]),
                    "end": interval_cell(e["end"]),
                    LABELS["headroom_to_max"]: interval_cell(e["headroom_to_max"]),
                }
            )
        return pd.DataFrame(rows)

    def _where(self, e: dict[str, Any], *, short: bool) -> Any:
        """The change point of one level as a table cell (``short``) or in words."""
        if not e["changepoint"]:
            return f"known ({self.config.breakpoint:g})" if short else f"known break {self.config.breakpoint:g}"
        if e["verdict"] == "no change point":
            return "none inside the run" if short else "no change point inside the run"
        if short:
            return interval_cell(e["changepoint"])
        cp = e["changepoint"]
        return f"change point {cp['mean']:.0f} [{cp['hdi'][0]:.0f}, {cp['hdi'][1]:.0f}]"

    def tables(self) -> dict[str, TableView]:
        """``estimates``: :meth:`table`."""
        return {"estimates": TableView(self.table(), f"Plateau per level ({S.HDI_LABEL})")}

    def heading(self) -> list[str]:
        """A note when the data are synthetic, then the model and its ROPE in a line."""
        cfg, synthetic = self.config, self.data.summary.get("synthetic", "")
        rel = f" or +-{cfg.rope_relative:g} x the early gain" if cfg.rope_relative is not None else ""
        return [
            *([f"NOTE: {synthetic}"] if synthetic else []),
            f"plateau model: response {self.data.response}; {self.describe_model()}; ROPE: late gain within "
            f"+-{cfg.rope:g}{rel} ({FLAT_DEFINITION}); {int(S.HDI_PROB * 100)}% HDI",
        ]

    def answer(self) -> str:
        """The verdicts in one sentence, and whether the levels stopped together."""
        text = verdict_summary(self.estimands["levels"]) + "."
        together = self.estimands.get("together")
        return text + (" " + together_sentence(together) if together else "")

    def details(self) -> list[str]:
        """The model, one sentence per level (verdict, reason, change point, late gain, the
        evidence for a break, headroom) and the caveats."""
        out = [f"Model: {self.describe_model()}."]
        for level, e in self.estimands["levels"].items():
            exists = (
                f"; a break at all: BF(change point : line) = {e['bf_changepoint_vs_line']:.3g}, Davies' test "
                f"p = {e['davies']['p_value']:.2g}"
                if e.get("bf_changepoint_vs_line") is not None and e.get("davies")
                else ""
            )
            out.append(
                f"{level}: {e['verdict']} ({e['reason']}); {self._where(e, short=False)}; late gain "
                f"{format_interval(e['late_gain'])} (94 % upper bound {e['late_gain_upper']:.3f}); late/early "
                f"slope {format_interval(e.get('slowdown_ratio'), 2)}{exists}; {LABELS['headroom_to_max']} "
                f"{format_interval(e['headroom_to_max'])}."
            )
        return out + [f"Caveat: {c}." for c in self.estimands["caveats"]]

    def figures(self) -> dict[str, FigureView]:
        """``curves``, ``slopes``, ``plateaued_by`` and (Gaussian likelihood) ``ppc``."""
        from saturation import plots

        cfg, band, ylabel = self.config, S.HDI_LABEL, self.ylabel()
        data = data_text(self.data.summary, len(self.data.steps))
        marks = (
            f"The dashed line is the known break at step {cfg.breakpoint:g}."
            if cfg.breakpoint is not None
            else "The dotted line is the posterior mean change point; the lower panels give the change point's "
            "posterior probability by step."
        )
        rope = f"+-{cfg.rope:g}" + (f" or within +-{cfg.rope_relative:g} x the early gain" if cfg.rope_relative else "")
        figs = {
            "curves": FigureView(
                lambda: plots.plot_plateau(self, ylabel=ylabel),
                f"{ylabel} by step, one panel per level: observed per-step means (points), the posterior mean curve "
                f"of the {self.describe_model()} and its {band} band. {marks} {data}",
            ),
            "slopes": FigureView(
                lambda: plots.plot_slopes(self),
                f"Early and late slope per level ({cfg.response} per step; posterior mean and {band}); the two "
                f"segments are drawn on their own scales, the power of ten is in the axis label. {data}",
            ),
            "plateaued_by": FigureView(
                lambda: plots.plot_plateaued_by(self),
                f"Posterior probability that each level has plateaued by step t: change point at or before t and "
                f"the flat ({FLAT_DEFINITION}; {rope}). {data}",
            ),
        }
        if cfg.likelihood == "gaussian":
            figs["ppc"] = FigureView(
                lambda: plots.plot_ppc(self, seed=self.seed),
                f"Posterior predictive check: observed per-step means (points) against the "
                f"{band.replace('HDI', '')}predictive interval (band: the mean curve plus the per-step noise); the "
                f"legend gives the share inside, about 94 % for a calibrated model. {data}",
            )
        return figs

    def ppc_coverage(self) -> dict[str, float]:
        """Per level: the share of observed per-step means inside the 94 % posterior
        predictive interval (Gaussian likelihood; about 0.94 for a calibrated model)."""
        from saturation import plots

        ppc = plots.ppc_data(self, seed=self.seed)
        return {str(k): float(v) for k, v in ppc.groupby("level")["covered"].mean().items()}

    def results(self) -> dict[str, Any]:
        """``{"plateau": to_dict(), "ppc_coverage": ...}`` (the second for the Gaussian likelihood)."""
        out: dict[str, Any] = {"plateau": self.to_dict()}
        if self.config.likelihood == "gaussian":
            out["ppc_coverage"] = self.ppc_coverage()
        return out

    def inference_data(self) -> dict[str, Any]:
        """``plateau_fit``: this fit's InferenceData."""
        return {"plateau_fit": self.idata}

    def compare_models(self, models: tuple[str, ...] = COMPARED_MODELS) -> ModelComparison:
        """Leave-one-step-out comparison of this fit's hinge with other curves on the same data
        (:func:`loo_entries`; the hinge is this fit, not refitted).

        Parameters
        ----------
        models : tuple of str
            "hinge" (this fit), "hinge-separate" / "hinge-shared", "linear", "exponential".

        Returns
        -------
        ModelComparison
            The ELPD table, its figure and sentence, and each alternative's InferenceData.
        """
        progress.stage("LOO comparison")
        elpd, method, fits = loo_entries(self.data, models, seed=self.seed, config=self.config, hinge=self)
        noise = {"ar1": "AR(1)", "auto": "AR(1) averaged with independent"}.get(self.config.noise or "", "independent")
        return ModelComparison(
            loo_table(elpd, method), fits, data_text(self.data.summary, len(self.data.steps)), f"{noise} step noise"
        )


@dataclass
class ModelComparison(FitObject):
    """A leave-one-step-out comparison of curve models on the same per-step data
    (:meth:`PlateauFit.compare_models`).

    Parameters
    ----------
    compare : pandas.DataFrame
        ``az.compare``'s table with ``loo_method`` and ``caveat`` (:func:`loo_table`).
    fits : dict
        Each model's InferenceData by name.
    data_words : str
        The data in words (for the figure's caption).
    noise_words : str
        The step-noise model every curve's LOO was taken under, in words (the caption).
    """

    #: ``az.compare``'s table with ``loo_method`` and ``caveat`` (:func:`loo_table`)
    compare: pd.DataFrame
    #: each model's InferenceData by name
    fits: dict[str, Any]
    #: the data in words (for the caption)
    data_words: str = ""
    #: the step-noise model every curve's LOO was taken under, in words
    noise_words: str = ""

    def summary(self) -> pd.DataFrame:
        """The ELPD table, one row per model (``model`` a column; :func:`saturation.plots.loo_data`)."""
        from saturation import plots

        return plots.loo_data(self.compare)

    def tables(self) -> dict[str, TableView]:
        """``loo``: :meth:`summary`."""
        return {"loo": TableView(self.summary(), "LOO comparison (ArviZ)")}

    def figures(self) -> dict[str, FigureView]:
        """``loo``: ELPD per model and the differences to the best."""
        from saturation import plots

        names = ", ".join(map(str, self.compare.index))
        return {
            "loo": FigureView(
                lambda: plots.plot_loo(self.compare),
                f"Leave-one-step-out comparison of {names}: ELPD per model +- its standard error (circles) and the "
                "best model's ELPD minus each model's difference +- the difference's standard error (triangles); "
                "exact LOO where the model allows it, else PSIS (crosses: Pareto k > 0.7, unreliable)"
                + (
                    f"; every curve under {self.noise_words} (a left-out step predicted from the others, its "
                    "neighbours included, where the noise is autocorrelated). "
                    if self.noise_words
                    else ". "
                )
                + self.data_words,
            )
        }

    def answer(self) -> str:
        """Which model LOO prefers, by how much, and the caveat of unreliable PSIS rows."""
        loo = self.summary()
        methods = ", ".join(f"{r.model} {r.loo_method}" for r in loo.itertuples())
        caveat = self.compare.attrs.get("caveat")
        return (
            f"LOO prefers {loo['model'].iloc[0]} (ELPD difference to the next {loo['elpd_diff'].iloc[1]:.1f} "
            f"+- {loo['dse'].iloc[1]:.1f}; {methods})." + (f" Caveat: {caveat}." if caveat else "")
        )

    def results(self) -> dict[str, Any]:
        """``{"loo": the table's rows}``."""
        return {"loo": json_safe(self.summary().to_dict(orient="records"))}

    def inference_data(self) -> dict[str, Any]:
        """``alternative_<model>`` for every model but this fit's hinge."""
        return {f"alternative_{name}": idata for name, idata in self.fits.items() if name != "hinge"}


PlateauFit.idata = InferenceDataField()  # type: ignore[assignment]


def _default_noise(config: PlateauConfig, series: bool) -> str:
    """The step-noise model of a fit that names none: AR(1) for a logged series (a running
    mean or a smoothed log is autocorrelated by construction), "auto" for trials, both on
    the exact sampler; independent on NUTS."""
    return ("ar1" if series else "auto") if config.exact else "independent"


def _sample_exact(
    sd: StepData, config: PlateauConfig, grid: np.ndarray, pri: dict[str, np.ndarray], seed: int
) -> tuple[Any, dict[str, Any], np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    """The exact Gaussian sampler for ``config``'s shape: the hinge, the jump, or "auto"
    (both averaged by their evidence, :func:`~saturation.models._exact.sample_either_shape`,
    whose P(jump) per level is the last item; None otherwise)."""
    exact_args: dict[str, Any] = {
        "y": sd.y,
        "var_mean": sd.var_mean,
        "steps": sd.steps,
        "grid": grid,
        "priors": pri,
        "pooled": is_pooled(config, len(sd.levels)),
        "spread_sd": config.priors.spread_sd,
        "levels": sd.levels,
        "chains": config.sampler.chains,
        "draws": config.sampler.draws_for(exact=True),
        "seed": seed,
        "evidence_weight": evidence_weight(sd, config),
        "noise_prior": noise_prior(config, sd),
    }
    if config.continuity == "auto":
        return sample_either_shape(gate=config.jump_gate, **exact_args)
    return (*sample_gaussian_exact(jump=config.continuity == "jump", **exact_args), None)


def fit_plateau(
    data: xr.Dataset | StepData,
    config: PlateauConfig | None = None,
    *,
    levels: list[str] | None = None,
    response: str = S.F1,
    run: str | None = None,
    breakpoint: float | None = None,
    shared: bool = False,
    continuity: str | None = None,
    likelihood: str = "gaussian",
    rope: float = DEFAULT_ROPE,
    rope_relative: float | None = DEFAULT_ROPE_RELATIVE,
    rule: VerdictRule | None = None,
    priors: PlateauPriors | None = None,
    sampler: SamplerConfig | None = None,
    seed: int = 0,
    metric_max: float | None = 1.0,
    noise: str | None = None,
) -> PlateauFit:
    """Fit the plateau model and compute its estimands.

    Parameters
    ----------
    data : xarray.Dataset or StepData
        Trials, aggregates or a per-step series (see :func:`step_data`).
    config : PlateauConfig, optional
        The whole structure at once (e.g. built from a spec by
        :func:`saturation.spec.analysis_config`); when given, the keyword arguments from
        ``levels`` to ``noise`` are not used.
    levels : list of str, optional
        Levels to fit (default: every level of the data).
    response : str
        The variable to model: a per-level field (default F1) or a trial / series variable.
    run : str, optional
        The run to fit when the data hold several.
    breakpoint : number, optional
        Known break (e.g. 46); ``None`` marginalises over every candidate step.
    shared : bool
        Several levels: pool their change points around a common one (True) or give each
        level its own (False, the default). The levels are graded on the same rollouts and
        share whatever the hinge misses about the curve's shape, so pooling multiplies
        that shared misfit; on per-trial data that is not the model the pooled intervals
        covered a late change point in 0.858 of small-design level fits against 0.938 for
        separate ones (docs/calibration.md). Pool to ask "did the levels stop together?"
        under the assumption that their change points are close.
    continuity : {"hinge", "jump", "auto"}, optional
        Continuous hinge, a jump at the break (the study's split OLS), or "auto": both
        fitted and averaged by their exact marginal likelihoods (the mixture of the two
        shapes, 1/2 each a priori: an abrupt jump is then located and called; each level's
        ``p_jump`` is its posterior probability). Default: the split
        model ("jump") for a known ``breakpoint``; for an unknown one "auto" on a logged
        series and the hinge on trials; the
        CLI and the report use the same default, so a known break runs the same model in
        both.
    likelihood : {"gaussian", "binomial", "zoib"}
        Gaussian on per-step means (sufficient statistics, step overdispersion; default),
        beta-binomial on success counts for binary responses, or a zero-one-inflated Beta
        on per-trial values in [0, 1] (exact from sufficient statistics; the hinge on the
        logit scale of the ones share, partial credit with a mean of its own, logit-scale
        step offsets; estimands on the metric mean). See docs/plateau.md for when each is
        right.
    sampler : SamplerConfig, optional
        ``sampler="auto"`` draws the Gaussian model exactly (independent draws, no MCMC;
        see ``models._exact``) and samples the others with nutpie.
    rope : float
        Region of practical equivalence for the late segment, in metric units: the late
        segment is "flat" when its total gain over the late window is within +-rope.
    rope_relative : float or None
        Also flat when the late gain is within +-rope_relative x the early gain (the gain
        from the start to the change point); None: the absolute ROPE alone.
    rule : VerdictRule, optional
        Thresholds of the per-level verdict (:func:`plateau_verdict`).
    priors : PlateauPriors, optional
        Prior settings (default: scaled to the data, see :class:`PlateauPriors`).
    seed : int
        Seeds the sampler and the post-processing; same seed and data give the same numbers.
    noise : {"independent", "ar1", "auto"}, optional
        The step noise: independent across steps; AR(1) on the step axis with its
        coefficient summed exactly (uniform on ``RHO_GRID``); or "auto", the two averaged by
        their evidence (half the prior mass on :math:`\rho = 0`, the rest on the AR(1)
        grid). "ar1" and "auto" need the Gaussian likelihood and the exact sampler. Default:
        "ar1" for a logged per-step series, "auto" for trials, "independent" for the
        sampled likelihoods (whose fit warns when its residuals are autocorrelated).
    metric_max : float or None
        The metric's maximum, to which ``headroom_to_max`` is measured (1.0 for rates; None,
        or data outside [0, metric_max]: no headroom to the maximum, with a caveat).

    Returns
    -------
    PlateauFit
        InferenceData, estimands per level (change point, slopes, late gain, verdict, ...),
        diagnostics and timings; ``config`` is stamped into the InferenceData attrs.
    """
    names = "levels response breakpoint shared continuity likelihood rope rope_relative rule priors sampler metric_max"
    config_or_keywords(fit_plateau, config, {k: v for k, v in locals().items() if k in [*names.split(), "noise"]})
    if config is None:  # the keyword arguments, once into the config
        config = PlateauConfig(
            response=response,
            levels=tuple(levels) if levels else None,
            breakpoint=breakpoint,
            shared=shared,
            continuity=continuity,
            likelihood=likelihood,
            rope=rope,
            rope_relative=rope_relative,
            rule=rule or VerdictRule(),
            priors=priors or PlateauPriors(),
            sampler=sampler or SamplerConfig(),
            metric_max=metric_max,
            noise=noise,
        )
    config.validate()
    levels = list(config.levels) if config.levels else None
    response = config.response
    sd = data if isinstance(data, StepData) else step_data(data, response=response, levels=levels, run=run)
    series = bool(sd.summary.get("series"))
    exact = config.exact
    config = replace(config, sampler=config.sampler.resolved(exact))  # the draws it takes, recorded
    if config.noise is None:
        config = replace(config, noise=_default_noise(config, series))
    if config.continuity is None:
        config = replace(config, continuity="auto", jump_gate=None if series else JUMP_GATE)
    if config.continuity == "auto" and not exact:  # only the exact sampler has the evidences
        config = replace(config, continuity="hinge", jump_gate=None)
    grid = change_grid(sd, config)
    too_big = fit_memory_problem(
        len(sd.steps), len(grid), len(sd.levels), pooled_graph=not exact and is_pooled(config, len(sd.levels))
    )
    if too_big:  # refused before any array is allocated
        raise ValueError(too_big)
    if not exact and len(grid) > 1 and config.likelihood != "gaussian":
        too_slow = fit_time_problem(
            len(sd.steps),
            len(grid),
            len(sd.levels),
            chains=config.sampler.chains,
            draws=config.sampler.draws_for(exact=False),
            tune=config.sampler.tune,
            likelihood=config.likelihood,
        )
        if too_slow:  # refused before compiling
            raise ValueError(too_slow)
    pri = resolve_priors(config.priors, sd, config.likelihood, grid=grid)
    hinge_evidence = exact_cps = shape = None
    idata: Any  # an InferenceData, or the exact sampler's groups until one is asked for
    if exact:
        progress.stage("sample (exact)")
        idata, timings, hinge_evidence, exact_cps, shape = _sample_exact(sd, config, grid, pri, seed)
    else:
        model, values = build_plateau_model(sd, config)
        key = (
            "plateau",
            sd.y.shape,
            len(grid),
            config.breakpoint is None,
            config.shared,
            config.continuity,
            config.likelihood,
            bool(np.isfinite(sd.n).all()),
        )
        idata, timings = sample_model(model, cache_key=key, data=values, seed=seed, config=config.sampler)
    sampled = [
        v
        for v in (
            "start",
            S.VALUE_AT_CHANGEPOINT,
            "late_slope",
            "jump",
            "tau",
            "log_kappa",
            "boundary",
            "log_phi",
            "tau_logit",
            "interior_shift",
            "interior_weight",
            S.CHANGEPOINT_SPREAD,
        )
        if v in idata.posterior
    ]
    diag = diagnostics(idata, sampled)
    log_bf = (
        hinge_line_log_bf(
            sd.y,
            sd.var_mean,
            sd.steps,
            grid,
            pri,
            config.continuity == "jump",
            hinge_evidence,
            noise_prior=noise_prior(config, sd),
        )
        if config.likelihood == "gaussian"
        else None
    )
    estimands = _estimands(idata, sd, config, grid, pri, seed, log_bf, exact_cps)
    if hinge_evidence is not None:
        estimands["log_evidence"] = [float(v) for v in hinge_evidence]
    _shape_estimands(estimands, shape, pooled=is_pooled(config, len(sd.levels)), gate=config.jump_gate)
    if log_bf is not None and config.breakpoint is None:
        _no_change_from_the_line(estimands, sd, config, pri, log_bf, seed)
        if hinge_evidence is not None:
            _smooth_estimands(estimands, sd, config, pri, hinge_evidence, log_bf, seed)
    _end_window_estimands(estimands, sd, config, pri, seed)
    _take_verdicts(estimands, config, grid)
    if S.NOISE_RHO in idata.posterior:
        rho = idata.posterior[S.NOISE_RHO].stack(sample=("chain", "draw")).transpose("sample", ...).to_numpy()
        for j, level in enumerate(sd.levels):
            estimands["levels"][level][S.NOISE_RHO] = interval(rho[:, j])
            if config.noise == "auto":  # the posterior probability of independent step noise
                estimands["levels"][level]["p_independent_noise"] = float(np.mean(rho[:, j] == 0.0))
    estimands["caveats"] = data_caveats(sd, config) + autocorrelation_caveats(sd, config, estimands["levels"])
    _attach(idata, sd, config, diag, grid)
    fit = PlateauFit(idata, config, sd, estimands, diag, timings, seed)
    warn_if_not_converged(diag, f"plateau fit ({sd.response}, levels {sd.levels})")
    return fit


def _take_verdicts(estimands: dict[str, Any], config: PlateauConfig, grid: np.ndarray) -> None:
    """Each level's verdict (:func:`plateau_verdict`), taken once every estimand it reads is
    in (the line's "no change", the end window), and then whether "did the levels stop
    together?" can be asked of them."""
    for est in estimands["levels"].values():
        est.update(plateau_verdict(est, config.rule, known_break=config.breakpoint is not None))
    if "together" in estimands:
        estimands["together"]["not_asked"] = together_not_asked(estimands["levels"], grid)


def bayes_factor(log_bf: float) -> float:
    """A Bayes factor from its log, kept inside a double's range (the estimands' BFs)."""
    return float(np.exp(np.clip(log_bf, -700, 700)))


def _shape_estimands(
    estimands: dict[str, Any], shape: dict[str, np.ndarray] | None, *, pooled: bool, gate: float | None
) -> None:
    """With the shapes averaged (``shape`` from :func:`_sample_exact`): ``estimands["shape"]``
    and each level's ``p_jump`` (the posterior probability of the jump), ``jump_weight``
    (the share of its draws from the jump: ``p_jump``, or 0 below the gate) and
    ``bf_jump_vs_hinge``."""
    if shape is None:
        return
    estimands["shape"] = {
        "averaged": ["hinge", "jump"],
        "weights": "joint over the levels" if pooled else "per level",
        "jump_gate": gate,
    }
    for j, est in enumerate(estimands["levels"].values()):
        est["p_jump"] = float(shape["p_jump"][j])
        est["jump_weight"] = float(shape["weight"][j])
        est["bf_jump_vs_hinge"] = bayes_factor(shape["log_bf_jump_vs_hinge"][j])


def _smooth_estimands(
    estimands: dict[str, Any],
    sd: StepData,
    config: PlateauConfig,
    pri: dict[str, np.ndarray],
    break_evidence: np.ndarray,
    log_bf_line: np.ndarray,
    seed: int,
) -> None:
    r"""Each level's smooth approach with no break, weighed against the fit's change-point
    curve (``bf_smooth_vs_break``) and the straight line (``bf_smooth_vs_line``) under the
    same step-noise model, then the curve's shape (:func:`curve_shape`), and the smooth
    curve's own reading of the run's end.

    The smooth approach is the even mixture of two curves, each with the change-point
    curve's priors on the start and on the level it reaches (its value at the change
    point): the exponential approach (:func:`~saturation.models._exact.exponential_approach`;
    :math:`\log k \sim N(\log(\text{span}/4), 1)`, as the exponential alternative of
    :func:`fit_alternative`) and the S-shaped logistic rise
    (:func:`~saturation.models._exact.logistic_approach`; midpoint uniform over the logged
    steps, :math:`\log w \sim N(\log(\text{span}/10), 1)` truncated to three logged steps ..
    span / 4, :func:`sigmoid_log_width_bounds`). ``smooth_form`` names the one with the
    larger evidence. When the shape is "smooth", from :data:`SMOOTH_DRAWS` draws of the
    mixture's curve (each form in proportion to its evidence), over the end window
    (:func:`end_window`): ``smooth_end_gain``,
    ``p_smooth_end_in_rope`` (its absolute value inside the absolute ROPE),
    ``p_smooth_end_positive`` and ``p_smooth_slowed`` (the end window's average slope below
    ``rule.slow_ratio`` x the average slope from the first logged step to the window's
    start), which :func:`plateau_verdict` reads for a curve of the shape "smooth"."""
    span = max(float(sd.steps[-1] - sd.steps[0]), 1.0)
    noise = noise_prior(config, sd)
    mask = end_window(sd.steps)
    rng = np.random.default_rng([seed, 47])
    for j, est in enumerate(estimands["levels"].values()):
        args = (
            sd.y[j],
            sd.var_mean[j],
            sd.steps,
            np.array([pri["start_mu"][j], pri["level_mu"][j]]),
            np.array([pri["start_sd"][j], pri["level_sd"][j]]),
            float(pri["tau_sd"][j]),
        )
        exp_ = exponential_approach(*args, float(np.log(span / 4.0)), ALTERNATIVE_LOG_SCALE_SD, noise_prior=noise)
        sig = logistic_approach(
            *args,
            float(np.log(span / SIGMOID_WIDTH_FRACTION)),
            SIGMOID_LOG_WIDTH_SD,
            sigmoid_log_width_bounds(sd.steps),
            noise_prior=noise,
        )
        log_z = float(np.logaddexp(exp_.log_evidence, sig.log_evidence) - np.log(2.0))
        vs_break = log_z - float(break_evidence[j])
        vs_line = vs_break + float(log_bf_line[j])  # log Z_line = log Z_break - log BF(break : line)
        est["bf_smooth_vs_break"] = bayes_factor(vs_break)
        est["bf_smooth_vs_line"] = bayes_factor(vs_line)
        est["smooth_form"] = "S-shaped" if sig.log_evidence > exp_.log_evidence else "exponential"
        est["curve_shape"] = curve_shape(est, config.rule)
        if mask is None or est["curve_shape"] != "smooth":  # read only for the shape "smooth"
            continue
        n_sig = int(rng.binomial(SMOOTH_DRAWS, float(np.exp(sig.log_evidence - log_z - np.log(2.0)))))
        f = np.concatenate([exp_.draw_curves(rng, SMOOTH_DRAWS - n_sig), sig.draw_curves(rng, n_sig)])
        first, last = np.flatnonzero(mask)[[0, -1]]
        gain = f[:, last] - f[:, first]
        before = (f[:, first] - f[:, 0]) / max(float(sd.steps[first] - sd.steps[0]), 1e-12)
        end_slope = gain / max(float(sd.steps[last] - sd.steps[first]), 1e-12)
        est["smooth_end_gain"] = interval(gain)
        est["p_smooth_end_in_rope"] = float(np.mean(np.abs(gain) < config.rope))
        est["p_smooth_end_positive"] = float(np.mean(gain > 0))
        est["p_smooth_slowed"] = float(np.mean(end_slope < config.rule.slow_ratio * before))


def end_window(steps: np.ndarray) -> np.ndarray | None:
    """The end window's mask over ``steps``: the steps in the last :data:`END_FRACTION` of
    the run's step range, or the last :data:`END_MIN_POINTS` logged steps when fewer fall
    there; None for a run of fewer than ``2 * END_MIN_POINTS`` steps (no window apart from
    the whole run)."""
    if len(steps) < 2 * END_MIN_POINTS:
        return None
    mask = steps >= steps[-1] - (steps[-1] - steps[0]) * END_FRACTION
    if mask.sum() < END_MIN_POINTS:
        mask = np.zeros(len(steps), dtype=bool)
        mask[-END_MIN_POINTS:] = True
    return mask


def _end_window_estimands(
    estimands: dict[str, Any], sd: StepData, config: PlateauConfig, pri: dict[str, np.ndarray], seed: int
) -> None:
    r"""Per level, the gain over the end window (:func:`end_window`) from a straight line
    fitted to the window alone, exactly, with the fit's noise model (independent or AR(1)):
    ``end_gain`` and ``p_end_gain_beyond_rope`` / ``p_end_loss_beyond_rope`` (the absolute
    ROPE). The line does not assume the curve's shape before the window, so a creep after an
    S-shaped rise or a collapse after a plateau shows here when the one-break hinge smooths
    it over; :func:`plateau_verdict` reads it. Both ends of the window get the prior of the
    value at the change point."""
    mask = end_window(sd.steps)
    if mask is None:
        return
    rng = np.random.default_rng([seed, 45])
    pri_end = {**pri, "start_mu": pri["level_mu"], "start_sd": pri["level_sd"]}
    for j, est in enumerate(estimands["levels"].values()):
        ok = mask & np.isfinite(sd.y[j])
        if ok.sum() < END_MIN_POINTS:
            continue
        gain = line_change_draws(
            sd.y[j][ok],
            sd.var_mean[j][ok],
            sd.steps[ok],
            pri_end,
            j,
            rng,
            4000,
            noise_prior=noise_prior(config, sd),
        )
        est["end_window"] = [float(sd.steps[ok][0]), float(sd.steps[ok][-1])]
        est["end_gain"] = interval(gain)
        est["p_end_gain_beyond_rope"] = float(np.mean(gain > config.rope))
        est["p_end_loss_beyond_rope"] = float(np.mean(gain < -config.rope))


def _no_change_from_the_line(
    estimands: dict[str, Any],
    sd: StepData,
    config: PlateauConfig,
    pri: dict[str, np.ndarray],
    log_bf: np.ndarray,
    seed: int,
) -> None:
    """Where the straight line is the better model (BF change point : line < 1), "no change
    over the window" is read from the line's change first -> last step (the hinge's start and
    end are poorly pinned on a flat series), and the verdict is taken again."""
    rng = np.random.default_rng([seed, 44])
    for j, est in enumerate(estimands["levels"].values()):
        if log_bf[j] >= 0:
            continue
        change = line_change_draws(
            sd.y[j],
            sd.var_mean[j],
            sd.steps,
            pri,
            j,
            rng,
            4000,
            noise_prior=noise_prior(config, sd),
        )
        est["p_no_change"] = float(np.mean(np.abs(change) < config.rope))


def _param_draws(idata: az.InferenceData, likelihood: str) -> dict[str, Any]:
    """Posterior draws as arrays (samples, levels)."""
    post = idata.posterior.stack(sample=("chain", "draw")).transpose("sample", ...)

    def g(name: str) -> np.ndarray:
        return post[name].transpose("sample", S.LEVEL).to_numpy()

    out: dict[str, Any] = {
        "start": g("start"),
        S.VALUE_AT_CHANGEPOINT: g(S.VALUE_AT_CHANGEPOINT),
        "late_slope": g("late_slope"),
        "jump": g("jump") if "jump" in post else 0.0,
    }
    if likelihood == "gaussian":
        out["tau"] = g("tau")
    elif likelihood == "binomial":
        out["kappa"] = np.exp(g("log_kappa"))
    else:
        out["boundary"], out["phi"] = g("boundary"), np.exp(g("log_phi"))
        out["interior_shift"], out["interior_weight"] = g("interior_shift"), g("interior_weight")
        offsets = post["step_offset_z"].transpose("sample", S.LEVEL, S.STEP).to_numpy()
        out["step_offset"] = g("tau_logit")[:, :, None] * offsets  # (samples, levels, steps)
    return out


def _estimands(
    idata: az.InferenceData,
    data: StepData,
    config: PlateauConfig,
    grid: np.ndarray,
    pri: dict[str, np.ndarray],
    seed: int,
    log_bf: np.ndarray | None = None,
    exact_cps: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Change-point posterior (exact conditional per draw), derived draws and estimands;
    ``pri`` is ``resolve_priors(config.priors, data, config.likelihood, grid=grid)``. The change
    points, the early slopes, the pointwise log-likelihood and the change-point mass are
    added to ``idata`` (:func:`_add_derived`). ``exact_cps``: the exact sampler's change
    points and mass (:func:`~saturation.models._exact.sample_gaussian_exact`), used as they
    are; otherwise each draw's change point comes from p(c | theta, y)."""
    rng = np.random.default_rng([seed, 7])
    n_levels = len(data.levels)
    p = _param_draws(idata, config.likelihood)
    pooled = is_pooled(config, n_levels)
    spread_draws = (
        idata.posterior[S.CHANGEPOINT_SPREAD].stack(sample=("chain", "draw")).to_numpy() if pooled else np.zeros(0)
    )
    corr, w_ev = level_dependence(data.y)[0], evidence_weight(data, config)
    obs = {
        "y": data.y,
        "n": np.where(np.isfinite(data.n), data.n, 1e12),
        "k": data.k if data.k is not None else np.zeros_like(data.y),
        **(data.bounded or {}),
    }
    if exact_cps is None:
        cps, mass, pointwise = _changepoint_draws(p, obs, data, config, grid, pri, rng, spread_draws, w_ev)
    else:
        cps, mass = grid[exact_cps["index"]], exact_cps["mass"]

        def exact_pointwise(cps: np.ndarray = cps) -> np.ndarray:
            return np.concatenate(  # in slices of draws: the intermediates stay small
                [
                    _pointwise(p, obs, data, config, cps[lo : lo + 500], slice(lo, lo + 500))
                    for lo in range(0, len(cps), 500)
                ]
            )

        # no draw is taken here: made when the log_likelihood group is first read (LOO, a
        # saved InferenceData), if it is held deferred
        pointwise = exact_pointwise if isinstance(idata, DeferredInferenceData) else exact_pointwise()
    jump = p["jump"] if isinstance(p["jump"], np.ndarray) else np.zeros_like(p["start"])
    out: dict[str, Any] = {"levels": {}}
    early_draws = np.empty_like(cps)
    for j, level in enumerate(data.levels):
        est, early_draws[:, j] = _level_estimands(j, cps[:, j], mass[j], p, jump[:, j], data, config, grid, pri, log_bf)
        out["levels"][level] = est
    if n_levels > 1 and config.breakpoint is None:
        spread = cps.max(axis=1) - cps.min(axis=1)
        out["together"] = {
            "changepoint_range": interval(spread),
            "p_range_le_2_steps": float(np.mean(spread <= 2)),
            "changepoint_spread_parameter": interval(spread_draws) if pooled else None,
            "evidence_weight": w_ev if pooled else None,
            "level_correlation": corr.round(4).tolist() if pooled else None,
            # separate fits: the range of independently drawn change points (docs/plateau.md)
            "caveat": None
            if pooled
            else "separate fits, so a rough reading: it ignores that the levels' errors are correlated",
            "not_asked": None,  # read from the verdicts (_take_verdicts)
        }
    _add_derived(idata, data, grid, cps, early_draws, pointwise, mass)
    return out


def together_not_asked(levels: dict[str, dict[str, Any]], grid: np.ndarray) -> str | None:
    """Why "did the levels stop together?" has no answer here (None: it has one).

    It needs at least two levels that stopped rising, and candidate change points spread
    over more than 4 steps (on a shorter grid any two change points lie within 2 steps and
    P(range <= 2) would be 1 whatever the data).
    """
    stopped = [lv for lv, e in levels.items() if e["verdict"] in STOPPED_VERDICTS]
    span = float(grid.max() - grid.min()) if grid.size else 0.0
    if span <= 4:
        return f"the candidate change points span only {span:g} steps: too short a run to tell"
    if len(stopped) < 2:
        return f"{len(stopped)} of {len(levels)} levels stopped rising: there is nothing to have stopped together"
    return None


def together_sentence(together: dict[str, Any]) -> str:
    """The answer to "did the levels stop together?" in one sentence (the report's)."""
    if together.get("not_asked"):
        return f"Stopped together? Not asked: {together['not_asked']}."
    rough = f"; {together['caveat']}" if together["caveat"] else ""
    return (
        f"The change points lie within 2 steps of each other with P = {together['p_range_le_2_steps']:.2f}"
        f" (range {format_interval(together['changepoint_range'], 1)} steps{rough})."
    )


def _changepoint_draws(
    p: dict[str, Any],
    obs: dict[str, np.ndarray],
    data: StepData,
    config: PlateauConfig,
    grid: np.ndarray,
    pri: dict[str, np.ndarray],
    rng: np.random.Generator,
    spread_draws: np.ndarray,
    w_ev: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per posterior draw of the curve parameters, a change point per level from its exact
    conditional p(c | theta, y) (pooled: through the common change point); returns the
    draws (samples, levels), the averaged conditional mass (levels, candidates) and the
    pointwise log-likelihood at the drawn change points (samples, levels, steps)."""
    t = data.steps
    t0 = float(t[0])
    n_levels, n_grid = len(data.levels), len(grid)
    n_samples = p["start"].shape[0]
    pooled = is_pooled(config, n_levels)
    cps = np.empty((n_samples, n_levels))
    mass = np.zeros((n_levels, n_grid))
    pointwise = np.empty((n_samples, n_levels, len(t)))
    fast = config.likelihood == "gaussian" and config.breakpoint is None
    positions = grid_positions(t, grid) if fast else np.zeros(0, dtype=int)
    chunk = 250
    for lo in range(0, n_samples, chunk):
        sl = slice(lo, min(lo + chunk, n_samples))
        # per-draw parameters as (draws, levels, candidates, steps); step offsets vary by step
        pb = {
            key: (v[sl][:, :, None, None] if v.ndim == 2 else v[sl][:, :, None, :]) if isinstance(v, np.ndarray) else v
            for key, v in p.items()
        }
        pb["var_mean"] = data.var_mean[None, :, None, :]
        if fast:
            ll_c = gaussian_loglik_by_changepoint(
                NP_OPS,
                data.y[None],
                data.var_mean[None] + pb["tau"][..., 0] ** 2,
                t,
                positions,
                {
                    k_: v[..., 0] if isinstance(v, np.ndarray) else v
                    for k_, v in pb.items()
                    if k_ not in ("var_mean", "tau")
                },
                t0,
            )
        else:
            ll_c = step_loglik(
                NP_OPS,
                {k_: v[None, :, None, :] for k_, v in obs.items()},
                t[None, None, None, :],
                grid[None, None, :, None],
                pb,
                t0,
                config.likelihood,
            ).sum(axis=3)  # (D, L, C)
        # the late slope's prior depends on the change point: p(c | theta, y) includes it
        ll_c = ll_c + stats.norm.logpdf(p["late_slope"][sl][:, :, None], 0.0, pri["late_slope_sd"][None])
        m = ll_c.shape[0]
        # conditional of each level's change point given the parameters: e * w / norm
        e = np.exp(ll_c - ll_c.max(axis=2, keepdims=True))  # (D, L, C), max 1 per row
        if pooled:
            s_ = curves.effective_spread(np, spread_draws[sl])[:, None, None]
            w = np.exp(-0.5 * ((grid[None, None, :] - grid[None, :, None]) / s_) ** 2)
            w /= w.sum(axis=2, keepdims=True)  # p(c_l | c0, s): (D, C0, C)
            per_level = np.einsum("dzc,dlc->dlz", w, e)  # sum_c p(c | c0) p(y_l | c) / max: (D, L, C0)
            with np.errstate(divide="ignore"):
                log_c0 = w_ev * np.log(per_level).sum(axis=1)  # (D, C0), up to a per-draw constant
            p_c0 = np.exp(log_c0 - log_c0.max(axis=1, keepdims=True))
            p_c0 /= p_c0.sum(axis=1, keepdims=True)
            # mass: sum_z p(c0 = z) p(c_l = c | z) = e * sum_z p(z) w[z, c] / per_level[z]
            ratio = np.divide(p_c0[:, None, :], per_level, out=np.zeros_like(per_level), where=per_level > 0)
            mass += (e * np.einsum("dlz,dzc->dlc", ratio, w)).sum(axis=0)
            i0 = sample_rows(rng, p_c0)
            cond_sel = e * w[np.arange(m), i0, :][:, None, :]  # (D, L, C), unnormalised
            cond_sel /= cond_sel.sum(axis=2, keepdims=True)
        else:
            cond_sel = e / e.sum(axis=2, keepdims=True)
            mass += cond_sel.sum(axis=0)
        for j in range(n_levels):
            idx = sample_rows(rng, cond_sel[:, j, :])
            cps[sl, j] = grid[idx]
        pointwise[sl] = _pointwise(p, obs, data, config, cps[sl], sl)
    mass /= n_samples
    return cps, mass, pointwise


def _pointwise(
    p: dict[str, Any],
    obs: dict[str, np.ndarray],
    data: StepData,
    config: PlateauConfig,
    cps: np.ndarray,
    sl: slice = slice(None),
) -> np.ndarray:
    """Pointwise log-likelihood (draws, levels, steps) of draws ``sl`` at their change
    points ``cps`` (draws, levels)."""
    pj = {
        key: (v[sl][:, :, None] if v.ndim == 2 else v[sl]) if isinstance(v, np.ndarray) else v for key, v in p.items()
    }
    pj["var_mean"] = data.var_mean[None]
    t = data.steps
    return np.asarray(
        step_loglik(
            NP_OPS,
            {k_: v[None] for k_, v in obs.items()},
            t[None, None, :],
            cps[:, :, None],
            pj,
            float(t[0]),
            config.likelihood,
        )
    )


def _level_estimands(
    j: int,
    c: np.ndarray,
    mass_j: np.ndarray,
    p: dict[str, Any],
    dj: np.ndarray,
    data: StepData,
    config: PlateauConfig,
    grid: np.ndarray,
    pri: dict[str, np.ndarray],
    log_bf: np.ndarray | None,
) -> tuple[dict[str, Any], np.ndarray]:
    """One level's estimands from its change-point and parameter draws (its verdict is
    taken once all estimands are in, :func:`_take_verdicts`); also returns its early-slope
    draws."""
    t = data.steps
    t0, t_last = float(t[0]), float(t[-1])
    n_grid = len(grid)
    a, h, b2 = p["start"][:, j], p[S.VALUE_AT_CHANGEPOINT][:, j], p["late_slope"][:, j]
    end = curves.hinge_through(t_last, c, a, h, b2, dj, t0)
    if config.likelihood == "zoib":  # the hinge is on the share of ones: report the metric mean

        def metric(x: np.ndarray, j_: int = j) -> np.ndarray:
            return np.asarray(
                zoib_mean(x, p["boundary"][:, j_], p["interior_shift"][:, j_], p["interior_weight"][:, j_])
            )

        late_gain = metric(end) - metric(h + dj)
        a, h, end = metric(a), metric(h), metric(end)
        b2 = late_gain / np.maximum(t_last - c, 1.0)
    else:
        late_gain = b2 * (t_last - c)
    b1 = (h - a) / (c - t0)
    in_rope = np.abs(late_gain) < config.rope
    early_gain = h - a
    rise = early_gain + dj  # the change up to just after the break (a jump is part of the rise)
    in_rope_rel = (
        np.abs(late_gain) < config.rope_relative * np.abs(rise)
        if config.rope_relative is not None
        else np.zeros_like(in_rope)
    )
    flat = in_rope | in_rope_rel
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = b2 / b1
    ratio = ratio[np.isfinite(ratio)]
    late_gain_iv = interval(late_gain)
    # Savage-Dickey: posterior density of the late slope at 0 over its prior density at 0
    # (of the hinge's own late slope, whose prior is known; zero there is zero late gain)
    b2_hinge = p["late_slope"][:, j]
    # (kde_at: scipy.stats.gaussian_kde's number, curves.normal_pdf: scipy.stats.norm.pdf's,
    # both without importing scipy.stats)
    post_density = kde_at(b2_hinge, 0.0) if np.std(b2_hinge) > 0 else np.inf
    bf01 = post_density / float(np.mean(curves.normal_pdf(0.0, 0.0, pri["late_slope_sd"][j])))
    est: dict[str, Any] = {
        "changepoint": interval(c) if config.breakpoint is None else None,
        "changepoint_mass": {str(int(g_)): float(m_) for g_, m_ in zip(grid, mass_j, strict=True)},
        "early_slope": interval(b1),
        "late_slope": interval(b2),
        "start": interval(a),
        S.VALUE_AT_CHANGEPOINT: interval(h),
        "end": interval(end),
        "headroom_to_max": (
            interval(config.metric_max - end)
            if config.metric_max is not None and headroom_defined(data, config)
            else None
        ),
        "late_gain": late_gain_iv,
        "p_early_positive": float(np.mean(b1 > 0)),
        "p_rise_positive": float(np.mean(rise > 0)),
        "p_late_in_rope": float(np.mean(in_rope)),
        "p_late_in_rope_relative": float(np.mean(in_rope_rel)) if config.rope_relative is not None else None,
        "p_flat": float(np.mean(flat)),
        "early_gain": interval(early_gain),
        "late_gain_upper": float(late_gain_iv["hdi"][1]),
        "slowdown_ratio": interval(ratio, center="median") if ratio.size > 1 else None,
        # slower than the rise's average rate up to just after the break (a jump included)
        "p_slowed": float(np.mean(b2 < config.rule.slow_ratio * rise / (c - t0))),
        "p_late_positive": float(np.mean(b2 > 0)),
        "p_late_gain_beyond_rope": float(np.mean(late_gain > config.rope)),
        "p_late_loss_beyond_rope": float(np.mean(late_gain < -config.rope)),
        "p_no_change": float(np.mean(np.abs(end - a) < config.rope)),
        "edge_mass": float(mass_j[: config.rule.edge_candidates].sum() + mass_j[-config.rule.edge_candidates :].sum())
        if config.breakpoint is None and n_grid > 2 * config.rule.edge_candidates
        else 0.0,
        "bf_changepoint_vs_line": bayes_factor(log_bf[j]) if log_bf is not None else None,
        "bf01_late_zero": float(bf01),
        # the frequentist existence test R users know (segmented::davies.test on lm(y ~ step))
        "davies": davies_test(t, data.y[j]) if np.isfinite(data.y[j]).sum() >= 5 else None,
        "p_plateaued_by_step": {str(int(s_)): float(np.mean((c <= s_) & flat)) for s_ in t},
    }
    if config.continuity in ("jump", "auto"):  # auto: the mixture's jump, 0 in the hinge's draws
        est["jump"] = interval(np.asarray(dj))
    return est, b1


def _add_derived(
    idata: az.InferenceData,
    data: StepData,
    grid: np.ndarray,
    cps: np.ndarray,
    early_draws: np.ndarray,
    pointwise: np.ndarray | Callable[[], np.ndarray],
    mass: np.ndarray,
) -> None:
    """Add the drawn change points and early slopes to the posterior, the pointwise
    log-likelihood and the change-point mass as groups of ``idata``; ``pointwise`` given as
    the function that computes it is added as a deferred group (``idata`` then a
    :class:`~saturation._lazy.DeferredInferenceData`)."""
    t = data.steps
    n_levels = len(data.levels)
    shape = (idata.posterior.sizes["chain"], idata.posterior.sizes["draw"])
    derived = {
        "changepoint": cps,
        "early_slope": early_draws,
    }
    for name, arr in derived.items():
        idata.posterior[name] = (("chain", "draw", S.LEVEL), arr.reshape(*shape, n_levels))

    def log_likelihood() -> xr.Dataset:
        values = pointwise() if callable(pointwise) else pointwise
        ll_da = xr.DataArray(
            values.reshape(*shape, n_levels, len(t)),
            dims=("chain", "draw", S.LEVEL, S.STEP),
            coords={S.LEVEL: data.levels, S.STEP: t},
        )
        return xr.Dataset({"y": ll_da})

    if callable(pointwise):
        idata.add_deferred_group("log_likelihood", log_likelihood)
    else:
        idata.add_groups(log_likelihood=log_likelihood())
    idata.add_groups(
        changepoint_mass=xr.Dataset(
            {"probability": ((S.LEVEL, "candidate"), mass)}, coords={S.LEVEL: data.levels, "candidate": grid}
        )
    )


def _attach(
    idata: az.InferenceData, data: StepData, config: PlateauConfig, diag: dict[str, Any], grid: np.ndarray
) -> None:
    obs = xr.Dataset(
        {"y": ((S.LEVEL, S.STEP), data.y), "n": ((S.LEVEL, S.STEP), np.where(np.isfinite(data.n), data.n, -1))},
        coords={S.LEVEL: data.levels, S.STEP: data.steps},
    )
    idata.add_groups(observed_data=obs)
    stamp_attrs(idata, "plateau", config, data.summary, diag)


def curve_draws(fit: PlateauFit, steps: Any = None) -> np.ndarray:
    """Posterior draws of the fitted metric mean at ``steps`` (default: the observed
    steps), each draw with its own change point: array (samples, levels, steps)."""
    t = np.atleast_1d(np.asarray(fit.data.steps if steps is None else steps, dtype=float))
    held = held_idata(fit)
    p = _param_draws(held, fit.config.likelihood)
    cps = held.posterior["changepoint"].stack(sample=("chain", "draw")).transpose("sample", ...).to_numpy()
    out = np.empty((cps.shape[0], cps.shape[1], len(t)))
    for j in range(cps.shape[1]):
        dj = p["jump"][:, j, None] if isinstance(p["jump"], np.ndarray) else 0.0
        mu = curves.hinge_through(
            t[None, :],
            cps[:, j, None],
            p["start"][:, j, None],
            p[S.VALUE_AT_CHANGEPOINT][:, j, None],
            p["late_slope"][:, j, None],
            dj,
            float(fit.data.steps[0]),
        )
        if fit.config.likelihood == "zoib":
            mu = zoib_mean(
                mu, p["boundary"][:, j, None], p["interior_shift"][:, j, None], p["interior_weight"][:, j, None]
            )
        out[:, j, :] = mu
    return out


def plateau_frame(fit: PlateauFit) -> pd.DataFrame:
    """Per-step observed means with the posterior mean curve, its 94 % band and the
    posterior probability of the change point at that step (the data behind the plot): the
    mass of the candidates nearest that logged step (candidates on the step axis between
    logged steps, or a series fitted on bin means, go to the nearer one; the column sums to
    the mass)."""
    rows = []
    t = fit.data.steps
    draws = curve_draws(fit)
    for j, level in enumerate(fit.data.levels):
        mu = draws[:, j, :]
        hdi = az.hdi(mu[None], hdi_prob=S.HDI_PROB)
        at_step = np.zeros(len(t))
        mass = fit.estimands["levels"][level]["changepoint_mass"]
        if mass and len(t):  # each candidate to its nearest logged step (the lower one on a tie)
            cands = np.array([float(c) for c in mass])
            nearest = np.abs(cands[:, None] - t[None, :]).argmin(axis=1)
            np.add.at(at_step, nearest, np.array(list(mass.values()), dtype=float))
        for i, step in enumerate(t):
            rows.append(
                {
                    "level": level,
                    "step": step,
                    "observed": fit.data.y[j, i],
                    "mean": mu[:, i].mean(),
                    "hdi_low": hdi[i, 0],
                    "hdi_high": hdi[i, 1],
                    "p_changepoint": float(at_step[i]),
                }
            )
    return pd.DataFrame(rows)


# ====================================================================== alternatives + LOO


def compare_plateau_models(
    data: xr.Dataset | StepData,
    *,
    models: tuple[str, ...] = ("hinge", "linear", "exponential"),
    seed: int = 0,
    sampler: SamplerConfig | None = None,
    **plateau_kwargs: Any,
) -> tuple[pd.DataFrame, dict[str, az.InferenceData]]:
    """ArviZ LOO comparison of plateau models on the same per-step data.

    ``models`` may contain "hinge" (:func:`fit_plateau` with ``plateau_kwargs``; add
    "hinge-separate"/"hinge-shared" to compare pooling), "linear" and "exponential".

    Notes
    -----
    Gaussian models whose curve parameters integrate analytically get **exact** leave-one-out
    values (:func:`exact_loo_lppd`): the hinge with separate change points (or a known break),
    the line and the exponential curve. PSIS-LOO is unreliable here: the change-point
    models' pointwise log-likelihood is conditional on the change point drawn in each draw
    (Pareto k > 0.7 at most steps on the replica), and even the exponential curve had
    Pareto k up to 0.78-0.96 on the replica. The pooled hinge keeps PSIS; the table's
    ``loo_method`` column says which, and ``caveat`` names the PSIS models with Pareto
    k > 0.7 (their ELPD is not to be trusted). Every curve's exact LOO is taken under the
    hinge fit's step-noise model (``loo_noise="independent"``, ``"ar1"`` or ``"auto"`` to
    choose): under AR(1) noise a left-out step is predicted from the other steps' joint
    Gaussian, its neighbours included, so curves differ less than under independent noise
    (a persistent misfit is partly noise there).

    Parameters
    ----------
    data : xarray.Dataset or StepData
        Trials, aggregates or a series (:func:`step_data`).
    models : tuple of str
        The models to compare.
    seed : int
        Seeds every fit.
    sampler : SamplerConfig, optional
        Sampler settings of the NUTS fits.
    **plateau_kwargs
        Passed to :func:`fit_plateau` (levels, response, breakpoint, ...).

    Returns
    -------
    (pandas.DataFrame, dict)
        ``az.compare``'s table (one row per model, ELPD, SE, weights, ``loo_method``,
        ``caveat``) and each model's InferenceData by name.
    """
    sd = (
        data
        if isinstance(data, StepData)
        else step_data(
            data,
            response=plateau_kwargs.pop("response", S.F1),
            levels=plateau_kwargs.pop("levels", None),
            run=plateau_kwargs.pop("run", None),
        )
    )
    elpd, method, fits = loo_entries(sd, models, seed=seed, sampler=sampler, **plateau_kwargs)
    return loo_table(elpd, method), fits


def loo_entries(
    sd: StepData,
    models: tuple[str, ...],
    *,
    seed: int = 0,
    sampler: SamplerConfig | None = None,
    config: PlateauConfig | None = None,
    hinge: PlateauFit | None = None,
    loo_noise: str | None = None,
    **plateau_kwargs: Any,
) -> tuple[dict[str, Any], dict[str, str], dict[str, az.InferenceData]]:
    """Fit ``models`` (as :func:`compare_plateau_models`) on ``sd`` and return each one's ArviZ
    ELPD result (exact LOO where the model allows it, else PSIS), its method ("exact" or
    "PSIS") and its InferenceData, by name. With ``config`` the hinge fits take it (and its
    sampler and priors) instead of ``plateau_kwargs``; ``hinge``, a fit of ``config`` on
    ``sd`` with ``seed``, is used as the "hinge" model instead of fitting it again.
    ``loo_noise``: the step-noise model of every curve's exact LOO ("independent", "ar1",
    "auto"; default the hinge fit's): one model for all, so that the curves are compared
    under the same noise (a comparison with a curve that has only independent noise, as the
    saturation families', asks for "independent")."""
    if config is not None:
        sampler = config.sampler
        plateau_kwargs = {"priors": config.priors, "metric_max": config.metric_max}
    fits: dict[str, az.InferenceData] = {}
    elpd: dict[str, Any] = {}
    method: dict[str, str] = {}
    # one step-noise model for every curve's LOO: the hinge fit's (the alternatives' draws
    # are of independent noise; their exact LOO takes this model)
    base = config or PlateauConfig(sampler=sampler or SamplerConfig(), noise=plateau_kwargs.get("noise"))
    noise = loo_noise or base.noise or _default_noise(base, bool(sd.summary.get("series")))
    for name in models:
        if name.startswith("hinge"):
            kw = dict(plateau_kwargs)
            if name == "hinge-separate":
                kw["shared"] = False
            elif name == "hinge-shared":
                kw["shared"] = True
            if name == "hinge" and hinge is not None:
                fit = hinge
            elif config is not None:
                fit = fit_plateau(sd, replace(config, **{k: v for k, v in kw.items() if k == "shared"}), seed=seed)
            else:
                fit = fit_plateau(sd, seed=seed, sampler=sampler, **kw)
            fits[name] = fit.idata
            exact = fit.config.likelihood == "gaussian" and not is_pooled(fit.config, len(sd.levels))
            if exact:
                on = replace(fit.config, noise=noise)
                loo_i, lppd_i = exact_loo_lppd(sd, "hinge", on)
                # p_loo from the draws' pointwise likelihood where that is LOO's density
                elpd[name] = elpd_exact(fit.idata, loo_i, lppd_i if noise_prior(on) else None)
        else:
            metric_max = plateau_kwargs.get("metric_max", 1.0)
            bounds = asymptote_bounds(sd, metric_max, sampler) if name == "exponential" else None
            fits[name] = fit_alternative(
                sd, name, seed=seed, sampler=sampler, priors=plateau_kwargs.get("priors"), asymptote_bounds=bounds
            )
            # the closed-form LOO is the untruncated curve's: exact while no draw fell outside
            # the bounds, else PSIS over the bounded model's own draws
            exact = max(fits[name].posterior.attrs.get("asymptote_outside_fraction", [0.0])) == 0.0
            if exact:
                alt = PlateauConfig(priors=plateau_kwargs.get("priors") or PlateauPriors(), noise=noise)
                loo_i, lppd_i = exact_loo_lppd(sd, name, alt)
                elpd[name] = elpd_exact(fits[name], loo_i, lppd_i if noise_prior(alt) else None)
        if not exact:
            with warnings.catch_warnings():  # high Pareto k is this table's own caveat (below)
                warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto", category=UserWarning)
                elpd[name] = az.loo(fits[name], pointwise=True)
        method[name] = "exact" if exact else "PSIS"
    return elpd, method, fits
