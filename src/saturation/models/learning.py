r"""Learning diagnostics: what did RL actually teach?

Three questions, each answered with posteriors and a verdict sentence:

1. :func:`diagnose_cardinality` - real localisation skill or a cardinality prior? Per level,
   trends (one-level change-point fits, start -> end) of precision, recall, predicted and
   gold counts (and predicted locations
   per answer); real skill needs precision to rise while recall does not fall; a model
   that only learned to name fewer locations trades recall for precision.
2. :func:`diagnose_reliability` (logged series) and :func:`fit_pass_at_k` (trials with
   prompt groups) - did capability (pass@k) move, or only reliability (pass@1, the mean
   reward)?
3. :func:`diagnose_entropy` - did policy entropy collapse, and did it turn together with
   the reward?
4. :func:`diagnose_components` - a composite reward (code contests' ``0.7 * pass_ratio +
   0.3 * tag_f1``): did each component move, how much of the reward's change is each
   component's, and do the logged components add up to the logged reward?

A trend is the plateau model itself (``fit_plateau``: Gaussian on per-step means, hinge
with an unknown change point, drawn exactly without MCMC) fitted to one series: "start"
and "end" are the fitted metric at the first and last step, "change" their difference,
with the early and late slopes and the change point alongside. RL curves rise and then
flatten, so a straight line would misstate both ends. Decisions use ``P_DECIDE`` (0.95)
posterior probability and documented ROPEs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import curves
from saturation import schema as S
from saturation._lazy import DeferredInferenceData, InferenceDataField, held_idata, lazy, posterior_dataset
from saturation.aggregate import select_phase
from saturation.configs import (
    CardinalityConfig,
    ComponentsConfig,
    DiagnoseConfig,
    EntropyConfig,
    PassAtKPriors,
    ReliabilityConfig,
    SeriesConfig,
)
from saturation.limits import OptionError, config_or_keywords
from saturation.models.persist import FigureView, FitObject, TableView
from saturation.models.plateau import PlateauFit, StepData, curve_draws, fit_plateau, step_data
from saturation.models.sampling import (
    SamplerConfig,
    available_samplers,
    diagnostics,
    hdi_columns,
    interval,
    merge_diagnostics,
    sample_compiled,
    sample_model,
    stamp_attrs,
    warn_if_not_converged,
)
from saturation.summary import (
    Interval,
    convergence_words,
    data_text,
    format_interval,
    interval_cell,
    interval_rows,
    json_safe,
    short_repr,
)

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm
    import pytensor.tensor as pt
else:  # imported on first use (ARCHITECTURE.md): the spec and the CLI read this module's configs
    az, pm, pt = map(lazy, ("arviz", "pymc", "pytensor.tensor"))

#: posterior probability needed for a verdict
P_DECIDE = 0.95
#: pass@k counts as unchanged when |end - start| < this (absolute, pass@k units)
PASS_AT_K_ROPE = S.PASS_AT_K_ROPE
#: entropy counts as stable when |end - start| / start < this
ENTROPY_ROPE_RELATIVE = S.ENTROPY_ROPE_RELATIVE
#: a reward component counts as flat when |end - start| < this (absolute, component units)
COMPONENT_ROPE = S.COMPONENT_ROPE
#: logged components reproduce the logged reward when the weighted sum is within this at
#: every step (SkyRL's console tracker rounds to 4 decimals: ``utils/tracking.py``)
COMPOSITION_TOLERANCE = 1e-3
#: two change points "coincide" when they are at most this many steps apart
TOGETHER_STEPS = 3
#: variables of the cardinality diagnostic (per level) and the per-answer count
CARDINALITY_VARS = (S.PRECISION, S.RECALL, S.N_PRED, S.N_GOLD)
N_LOCATIONS = "n_locations"


# ====================================================================== trend
def trend_draws(
    sd: StepData, *, seed: int, draws: int = 1000, chains: int = 4
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Posterior draws (samples,) of one series' fitted start, end, change point and
    slopes (a one-level plateau fit; needs at least 10 steps), and the fit's diagnostics.

    ``"curve"`` holds the fitted mean at every observed step, (samples, steps), and
    ``"steps"`` those steps: the trend band of the figures."""
    if len(sd.levels) != 1:
        raise ValueError(f"a trend is one series; got levels {sd.levels}")
    # the diagnostics' calibrated trend: the hinge with independent step noise (the plateau
    # command's defaults for a logged series, the shape choice and AR(1) noise, are not
    # calibrated for these rules yet)
    fit = fit_plateau(
        sd, seed=seed, sampler=SamplerConfig(draws=draws, chains=chains), continuity="hinge", noise="independent"
    )
    curve = curve_draws(fit)[:, 0, :]
    post = held_idata(fit).posterior.stack(sample=("chain", "draw")).transpose("sample", ...)
    out = {"start": curve[:, 0], "end": curve[:, -1], "curve": curve, "steps": np.asarray(sd.steps, dtype=float)}
    out.update({v: post[v].to_numpy()[:, 0] for v in ("changepoint", "early_slope", "late_slope")})
    return out, fit.diagnostics


def _trend_summary(d: dict[str, np.ndarray]) -> dict[str, Any]:
    change = np.ravel(d["end"] - d["start"])
    out: dict[str, Any] = {
        v: interval(np.ravel(d[v])) for v in ("start", "end", "changepoint", "early_slope", "late_slope") if v in d
    }
    return {
        **out,
        "change": interval(change),
        "p_increase": float(np.mean(change > 0)),
        "p_decrease": float(np.mean(change < 0)),
    }


def _diagnosis(
    name: str,
    verdicts: dict[str, str],
    numbers: dict[str, Any],
    trends: dict[str, dict[str, np.ndarray]],
    diags: list[dict[str, Any]],
    chains: int,
    config: dict[str, Any],
) -> Diagnosis:
    """The Diagnosis of a trend-based diagnostic: the trend fits' diagnostics merged (and a
    warning when one did not converge), the trend draws as one InferenceData (dim
    ``series``, attrs by ``sampling.stamp_attrs``)."""
    diag = merge_diagnostics(diags)
    names = list(trends)
    post = {
        v: np.stack([trends[n][v] for n in names], axis=-1).reshape(chains, -1, len(names))
        for v in ("start", "end", "changepoint", "early_slope", "late_slope")
    }
    idata: Any = DeferredInferenceData(
        posterior_dataset(post, coords={"series": names}, dims={v: ["series"] for v in post})
    )
    stamp_attrs(idata, name, {**config, "sampler": "exact"}, {"series": names}, diag)
    warn_if_not_converged(diag, f"{name} diagnosis")
    bands = {n: _band(trends[n]) for n in names if "curve" in trends[n]}
    return Diagnosis(name, verdicts, numbers, diag, idata, bands)


def _band(trend: dict[str, np.ndarray]) -> pd.DataFrame:
    """The fitted trend per step: mean and 94 % HDI (``schema.HDI_PROB``)."""
    hdi = hdi_columns(trend["curve"])  # (draws, steps) -> (steps, 2)
    return pd.DataFrame(
        {"step": trend["steps"], "mean": trend["curve"].mean(axis=0), "hdi_low": hdi[:, 0], "hdi_high": hdi[:, 1]}
    )


def _step_stats(data: xr.Dataset, var: str, level: str | None, run: str | None = None) -> StepData:
    return step_data(data, response=var, levels=[level] if level else None, run=run)


# ====================================================================== 1. cardinality
@dataclass(frozen=True)
class Trend:
    """One series' fitted trend in a diagnosis (:meth:`Diagnosis.trend`), by attribute.

    Parameters
    ----------
    unit : str
        The level or run.
    variable : str
        The series (precision, a logged key's variable, ...).
    start, end : Interval or None
        The trend at the first and the last step (posterior mean and 94 % HDI).
    component : bool
        A reward component (the components diagnosis), not the reward itself.
    values : dict
        Everything else the diagnosis holds for it (changes, probabilities).
    """

    unit: str
    variable: str
    start: Interval | None
    end: Interval | None
    component: bool
    values: dict[str, Any]


@dataclass
class Diagnosis(FitObject):
    """A verdict per unit (level or run), the numbers behind it and the draws.

    Parameters
    ----------
    name : str
        Which diagnosis: "cardinality", "reliability", "entropy", "components" or "pass_at_k".
    sentences : dict of str to str
        One sentence per unit, read through :meth:`verdicts`.
    numbers : dict
        The estimands per unit (``levels`` or ``runs``) and the settings they were taken with.
    diagnostics : dict
        The fits' convergence diagnostics.
    idata : arviz.InferenceData
        The trend fits' draws.
    bands : dict of str to pandas.DataFrame
        Per series ("<variable>/<run>" or "<variable>/<level>"): the fitted trend by step.
    data_summary : dict
        What the data were (for captions).
    """

    name: str
    #: one sentence per unit (level or run), read through :meth:`verdicts`
    sentences: dict[str, str]
    numbers: dict[str, Any]
    diagnostics: dict[str, Any]
    idata: az.InferenceData
    #: per series ("<variable>/<run>" or "<variable>/<level>"): the fitted trend by step
    #: (columns step, mean, hdi_low, hdi_high; 94 % HDI)
    bands: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: what the data were (``n_trials``, ``n_graded``, ``n_steps``; for captions)
    data_summary: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"verdicts": self.verdicts(), "numbers": self.numbers, "diagnostics": self.diagnostics}

    def _per_unit(self) -> dict[str, Any]:
        found: dict[str, Any] = next(
            (self.numbers[k] for k in ("levels", "runs") if isinstance(self.numbers.get(k), dict)), {}
        )
        return found

    def units(self) -> list[str]:
        """The levels or runs diagnosed, in order."""
        return list(self._per_unit())

    def trend_variables(self, unit: str) -> list[str]:
        """The series with a fitted trend for ``unit``.

        Parameters
        ----------
        unit : str
            A level or run (:meth:`units`).

        Returns
        -------
        list of str
            Their variables, in order.
        """
        return [v for v, num in self._per_unit().get(unit, {}).items() if isinstance(num, dict) and "start" in num]

    def trend(self, unit: str, variable: str) -> Trend | None:
        """A series' fitted trend for one level or run (``unit="all"``: a trend of every
        unit together, such as the locations per answer), None when not fitted.

        Parameters
        ----------
        unit : str
            A level or run (:meth:`units`), or "all".
        variable : str
            The series.

        Returns
        -------
        Trend or None
            Its start and end by attribute.
        """
        num = self.numbers.get(variable) if unit == "all" else self._per_unit().get(unit, {}).get(variable)
        if not isinstance(num, dict) or "start" not in num:
            return None
        rest = {k: v for k, v in num.items() if k not in ("start", "end")}
        return Trend(
            unit, variable, interval_cell(num["start"]), interval_cell(num.get("end")), "component" in num, rest
        )

    def verdicts(self) -> dict[str, str]:
        """One sentence per unit (level or run): its verdict and the numbers that decided it
        (a method, as on every fit object)."""
        return dict(self.sentences)

    def summary(self) -> pd.DataFrame:
        """Tidy table: one row per (unit, estimand) of :attr:`numbers` (``runs`` or ``levels``
        hold the units): every interval with mean, sd and 94 % HDI, every probability in
        ``mean``. ``attrs['converged']`` is set."""
        units = next((self.numbers[k] for k in ("runs", "levels") if isinstance(self.numbers.get(k), dict)), None)
        frame = pd.DataFrame(interval_rows(units if units is not None else {"all": self.numbers}, ("unit",)))
        frame.attrs["converged"] = bool(self.diagnostics.get("converged", False))
        return frame

    def tables(self) -> dict[str, TableView]:
        """The diagnosis' display table: ``cardinality`` (:func:`cardinality_table`),
        ``reward_components`` (:func:`components_table`), else its tidy :meth:`summary`."""
        if self.name == "cardinality":
            return {"cardinality": TableView(cardinality_table(self), "Precision, recall and cardinality per level")}
        if self.name == "components":
            frame = components_table(self)
            return {"reward_components": TableView(frame, "Reward components: start, end and change of each")}
        return {self.name: TableView(self.summary(), f"The {self.name} diagnosis ({S.HDI_LABEL})")}

    def figures(self) -> dict[str, FigureView]:
        """``cardinality`` (the cardinality diagnosis; the per-run diagnoses are drawn with
        their logged series by :class:`SeriesDiagnosis`)."""
        from saturation import plots

        if self.name != "cardinality":
            return {}
        summ = self.data_summary
        return {
            "cardinality": FigureView(
                lambda: plots.plot_cardinality(self),
                f"Left: precision and recall per level at the first step (open) and the last step (filled), "
                f"posterior mean and {S.HDI_LABEL} of one-series change-point trends. Right: predicted over gold "
                f"locations per answer (1: as many predicted as gold). {data_text(summ, summ.get('n_steps'))}",
            )
        }

    def answer(self) -> str:
        """Each unit's verdict in one line (the components: their sentences)."""
        if self.name == "components":
            return "Reward components: " + " ".join(self.verdicts().values())
        units: dict[str, Any] = next(
            (self.numbers[k] for k in ("levels", "runs") if isinstance(self.numbers.get(k), dict)), {}
        )
        return (
            "; ".join(f"{u}: {n['verdict']}" for u, n in units.items() if isinstance(n, dict) and "verdict" in n) + "."
        )

    def details(self) -> list[str]:
        """:meth:`verdicts`' sentences."""
        return list(self.verdicts().values())

    def inference_data(self) -> dict[str, Any]:
        """``<name>_trends`` (``component_trends`` for the components)."""
        return {f"{'component' if self.name == 'components' else self.name}_trends": self.idata}

    def results(self) -> dict[str, Any]:
        """:meth:`to_dict`, JSON-ready."""
        return json_safe(self.to_dict())

    def __repr__(self) -> str:
        head = f"Diagnosis({self.name}, {len(self.sentences)} unit(s); {convergence_words(self.diagnostics)})"
        return short_repr(head, [f"{unit}: {v}" for unit, v in self.sentences.items()])


Diagnosis.idata = InferenceDataField()  # type: ignore[assignment]


def diagnose_cardinality(
    ds: xr.Dataset,
    config: CardinalityConfig | None = None,
    *,
    levels: list[str] | None = None,
    run: str | None = None,
    seed: int = 0,
    draws: int = 1000,
    chains: int = 4,
) -> Diagnosis:
    """Real localisation skill or a cardinality prior?

    Per level, trends (a one-level change-point fit: start -> end, slopes, 94 % HDIs) of precision, recall,
    predicted count and gold count from the graded trials, the predicted/gold ratio at
    the start and end, and, when the trials carry ``n_locations``, the predicted
    locations per answer.

    Verdict per level (posterior probabilities of the start -> end change):

    * "cardinality prior" - recall falls (P(change < 0) >= 0.95): the model names fewer
      locations and trades recall for precision;
    * "real skill" - otherwise, precision or recall rises (P(change > 0) >= 0.95);
    * "no learning detected" - neither rises nor falls decisively.

    Parameters
    ----------
    ds : xarray.Dataset
        Graded trials with per-level precision, recall and predicted and gold counts.
    config : CardinalityConfig, optional
        The settings at once (or the keywords below, not both).
    levels : list of str, optional
        The levels (default: every level of the data).
    run : str, optional
        The run, when the trials hold several.
    seed : int
        Seeds the trend fits.
    draws, chains : int
        Draws per chain and chains of each trend fit's exact sampler.

    Returns
    -------
    Diagnosis
        ``cardinality``: per level the trends, the ratio, the verdict and its sentence.
    """
    config_or_keywords(diagnose_cardinality, config, {"levels": levels, "run": run, "draws": draws, "chains": chains})
    config = config or CardinalityConfig(
        levels=tuple(levels) if levels else None, run=run, draws=draws, chains=chains
    )  # the keyword arguments, once into the config
    config.validate()
    levels = list(config.levels) if config.levels else [str(v) for v in ds[S.LEVEL].values]
    run, draws, chains = config.run, config.draws, config.chains
    trends: dict[str, dict[str, np.ndarray]] = {}
    diags = []
    series: list[tuple[str, str, str | None]] = [
        (f"{var}/{level}", var, level) for level in levels for var in CARDINALITY_VARS
    ]
    if N_LOCATIONS in ds:
        series.append((N_LOCATIONS, N_LOCATIONS, None))
    for i, (name, var, level) in enumerate(series):
        trends[name], diag_ = trend_draws(_step_stats(ds, var, level, run), seed=seed + i, draws=draws, chains=chains)
        diags.append(diag_)
    numbers: dict[str, Any] = {"levels": {}}
    verdicts: dict[str, str] = {}
    for level in levels:
        tr = {var: _trend_summary(trends[f"{var}/{level}"]) for var in CARDINALITY_VARS}
        pred, gold = trends[f"{S.N_PRED}/{level}"], trends[f"{S.N_GOLD}/{level}"]
        ratio = {
            "start": interval((pred["start"] / gold["start"]).ravel()),
            "end": interval((pred["end"] / gold["end"]).ravel()),
        }
        prec, rec = tr[S.PRECISION], tr[S.RECALL]
        if rec["p_decrease"] >= P_DECIDE:
            kind = "cardinality prior"
            why = "recall fell while the model named fewer locations: precision was bought with recall"
        elif prec["p_increase"] >= P_DECIDE or rec["p_increase"] >= P_DECIDE:
            kind = "real skill"
            why = (
                "precision rose without recall falling" if rec["p_increase"] < P_DECIDE else "precision and recall rose"
            )
        else:
            kind = "no learning detected"
            why = "neither precision nor recall moved decisively"
        numbers["levels"][level] = {**tr, "pred_over_gold": ratio, "verdict": kind}
        verdicts[level] = (
            f"{level}: {kind} - {why}. Precision {_arrow(prec)}, recall {_arrow(rec)} "
            f"(P(recall rises) = {rec['p_increase']:.2f}), predicted/gold {ratio['start']['mean']:.2f} -> "
            f"{ratio['end']['mean']:.2f}."
        )
    if N_LOCATIONS in trends:
        numbers[N_LOCATIONS] = _trend_summary(trends[N_LOCATIONS])
        verdicts[N_LOCATIONS] = f"predicted locations per answer: {_arrow(numbers[N_LOCATIONS])}."
    stamped = {**asdict(config), "levels": levels, "seed": seed}
    out = _diagnosis("cardinality", verdicts, numbers, trends, diags, chains, stamped)
    out.data_summary = {k: ds.attrs[k] for k in ("n_trials", "n_graded") if k in ds.attrs}
    out.data_summary["n_steps"] = ds.sizes.get(S.STEP)
    return out


def _arrow(tr: dict[str, Any]) -> str:
    s, e = tr["start"], tr["end"]
    return (
        f"{s['mean']:.3f} [{s['hdi'][0]:.3f}, {s['hdi'][1]:.3f}] -> "
        f"{e['mean']:.3f} [{e['hdi'][0]:.3f}, {e['hdi'][1]:.3f}]"
    )


# ====================================================================== 2. reliability vs capability
def _capability_verdict(
    pass1: dict[str, np.ndarray], passk: dict[str, np.ndarray], rope: float
) -> tuple[str, dict[str, float]]:
    d1 = (pass1["end"] - pass1["start"]).ravel()
    dk = (passk["end"] - passk["start"]).ravel()
    probs = {
        "p_pass1_up": float(np.mean(d1 > 0)),
        "p_pass1_down": float(np.mean(d1 < 0)),
        "p_passk_in_rope": float(np.mean(np.abs(dk) < rope)),
        "p_passk_up_beyond_rope": float(np.mean(dk > rope)),
        "p_passk_down_beyond_rope": float(np.mean(dk < -rope)),
    }
    if probs["p_passk_up_beyond_rope"] >= P_DECIDE:
        kind = "capability gain"
    elif probs["p_passk_down_beyond_rope"] >= P_DECIDE:
        kind = "capability loss"
    elif probs["p_pass1_up"] >= P_DECIDE and probs["p_passk_in_rope"] >= 0.5:
        kind = "reliability gain, capability flat"
    elif probs["p_pass1_up"] >= P_DECIDE:
        kind = "reliability gain, capability undetermined"
    elif probs["p_pass1_down"] >= P_DECIDE:
        kind = "reliability loss"
    else:
        kind = "no decisive change"
    return kind, probs


def diagnose_reliability(
    series: xr.Dataset,
    config: ReliabilityConfig | None = None,
    *,
    runs: list[str] | None = None,
    pass1: str = S.REWARD_MEAN,
    passk: str = S.PASS_AT_K,
    rope: float = PASS_AT_K_ROPE,
    seed: int = 0,
    draws: int = 1000,
    chains: int = 4,
) -> Diagnosis:
    """Reliability (pass@1 = mean reward) vs capability (pass@k) from logged series.

    Per run: trends (one-level change-point fits) of both series, and a plateau fit of pass@1 (unknown change
    point, exact Gaussian sampler). Verdict (P = posterior probability of the start -> end
    change, ROPE ``rope`` on pass@k):

    * "capability gain" / "capability loss": pass@k moved beyond the ROPE (P > 0.95);
    * "reliability gain, capability flat": pass@1 rose (P > 0.95) and pass@k's change is
      more likely inside the ROPE than not (P(in ROPE) >= 0.5; the probability is reported);
    * "reliability gain, capability undetermined", "reliability loss", "no decisive change".

    Parameters
    ----------
    series : xarray.Dataset
        Logged per-step metrics (dims run, step) with the pass@1 and pass@k keys.
    config : ReliabilityConfig, optional
        The settings at once (or the keywords below, not both).
    runs : list of str, optional
        The runs (default: every run that logged both).
    pass1, passk : str
        The mean-reward and pass@k keys.
    rope : float
        The ROPE on pass@k's change.
    seed : int
        Seeds the fits.
    draws, chains : int
        Draws per chain and chains of each trend fit's exact sampler.

    Returns
    -------
    Diagnosis
        ``reliability``: per run the trends, the plateau of pass@1, the verdict and its sentence.
    """
    given = {"runs": runs, "pass1": pass1, "passk": passk, "rope": rope, "draws": draws, "chains": chains}
    config_or_keywords(diagnose_reliability, config, given)
    config = config or ReliabilityConfig(
        runs=tuple(runs) if runs else None, pass1=pass1, passk=passk, rope=rope, draws=draws, chains=chains
    )  # the keyword arguments, once into the config
    config.validate()
    runs = runs_with(series, (config.pass1, config.passk), config.runs)
    pass1, passk, rope, draws, chains = config.pass1, config.passk, config.rope, config.draws, config.chains
    k = int(series[passk].attrs.get("k", 0)) or None
    trends: dict[str, dict[str, np.ndarray]] = {}
    numbers: dict[str, Any] = {"rope": rope, "k": k, "runs": {}}
    verdicts: dict[str, str] = {}
    diags: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        out = _run_trends(
            series, run, (pass1, passk), seed=seed + 10 * i, draws=draws, chains=chains, trends=trends, diags=diags
        )
        kind, probs = _capability_verdict(trends[f"{pass1}/{run}"], trends[f"{passk}/{run}"], rope)
        out.update(probs, verdict=kind)
        numbers["runs"][run] = out
        cp = out[pass1]["changepoint"]
        verdicts[run] = (
            f"{run}: {kind}. pass@1 {_arrow(out[pass1])} (P(up) = {probs['p_pass1_up']:.2f}); "
            f"pass@{k or 'k'} {_arrow(out[passk])} (P(|change| < {rope}) = {probs['p_passk_in_rope']:.2f}); "
            f"pass@1 change point {cp['mean']:.1f} [{cp['hdi'][0]:.0f}, {cp['hdi'][1]:.0f}]."
        )
    stamped = {**asdict(config), "runs": runs, "seed": seed}
    return _diagnosis("reliability", verdicts, numbers, trends, diags, chains, stamped)


def rope_decision(change: np.ndarray, rope: float, words: tuple[str, str, str, str]) -> tuple[str, float, float, float]:
    """The ROPE rule of a change's draws: ``words`` = (inside, up, down, undetermined); the
    first three when P(|change| < rope), P(change > rope) or P(change < -rope) reaches
    ``P_DECIDE`` (the events are disjoint, so at most one can), else the fourth. Returns the
    word and the three probabilities (inside, up, down)."""
    change = np.ravel(change)
    p_in = float(np.mean(np.abs(change) < rope))
    p_up, p_down = float(np.mean(change > rope)), float(np.mean(change < -rope))
    decided = [word for word, prob in zip(words, (p_in, p_up, p_down), strict=False) if prob >= P_DECIDE]
    return (decided[0] if decided else words[3]), p_in, p_up, p_down


def runs_with(series: xr.Dataset, variables: tuple[str, ...], chosen: Sequence[str] | None = None) -> list[str]:
    """The runs of a series with a value of every one of ``variables`` at some step (a
    composite-reward run has no pass@k; a run that logged no entropy has none), in order;
    ``chosen``: those runs, each checked to be in the series (a KeyError naming the runs
    there otherwise)."""
    if chosen:
        have_runs = [str(r) for r in series[S.RUN].values]
        unknown = [r for r in chosen if r not in have_runs]
        if unknown:
            raise KeyError(f"unknown run(s) {unknown}; the series has {have_runs}")
        return list(chosen)
    have = np.ones(series.sizes[S.RUN], dtype=bool)
    for var in variables:
        if var not in series:
            raise ValueError(f"the series has no variable {var!r} (have {sorted(map(str, series.data_vars))})")
        have &= series[var].notnull().any(S.STEP).to_numpy()
    return [str(r) for r, ok in zip(series[S.RUN].values, have, strict=True) if ok]


def _run_trends(
    series: xr.Dataset,
    run: str,
    variables: tuple[str, ...],
    *,
    seed: int,
    draws: int,
    chains: int,
    trends: dict[str, dict[str, np.ndarray]],
    diags: list[dict[str, Any]],
) -> dict[str, Any]:
    """Trends of several series of one run (seeds ``seed + j``): draws go into ``trends``
    under ``"<var>/<run>"``, diagnostics into ``diags``; returns the summaries by variable."""
    out: dict[str, Any] = {}
    for j, var in enumerate(variables):
        trends[f"{var}/{run}"], diag_ = trend_draws(
            step_data(series, response=var, run=run), seed=seed + j, draws=draws, chains=chains
        )
        diags.append(diag_)
        out[var] = _trend_summary(trends[f"{var}/{run}"])
    return out


# ---------------------------------------------------------------------- pass@k from prompt groups
def group_counts(ds: xr.Dataset, *, success_threshold: float = 1.0, run: str | None = None) -> xr.Dataset:
    """Successes per prompt group: one row per (step, instance_id) with ``n`` samples and
    ``s`` successes (graded and reward >= ``success_threshold``; an ungraded rollout is a
    failure). Every trial of the phase analysed (:func:`~saturation.aggregate.select_phase`) is counted once."""
    ds = select_phase(ds)
    frame = ds[[S.GRADED, S.REWARD]].to_dataframe().reset_index(drop=True)
    for c in (S.RUN, S.STEP, S.INSTANCE_ID):
        frame[c] = ds[c].values
    runs = sorted(map(str, frame[S.RUN].unique()))
    if run is not None:
        if run not in runs:
            raise ValueError(f"run {run!r} is not in the data (runs: {runs})")
        frame = frame[frame[S.RUN] == run]
    elif len(runs) > 1:
        raise ValueError(f"several runs {runs}: pass run=")
    if frame[S.STEP].nunique() < 3:
        raise ValueError(f"pass@k needs prompt groups at 3 or more steps; the data has {frame[S.STEP].nunique()}")
    frame["s"] = (frame[S.GRADED].astype(bool) & (frame[S.REWARD].fillna(-np.inf) >= success_threshold)).astype(int)
    g = frame.groupby([S.STEP, S.INSTANCE_ID], sort=True)["s"].agg(["size", "sum"]).reset_index()
    if int(g["size"].sum()) != len(frame):  # pragma: no cover - groupby keeps every row
        raise AssertionError("group counts lost trials")
    return xr.Dataset(
        {
            "n": ("group", g["size"].to_numpy()),
            "s": ("group", g["sum"].to_numpy()),
            S.STEP: ("group", g[S.STEP].to_numpy()),
        }
    )


def _log_beta(a: Any, b: Any) -> Any:
    return pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(a + b)


#: the pass@k model's scalar parameters (priors: :class:`saturation.configs.PassAtKPriors`), and
#: its reported curve ends (derived per draw)
PASS_AT_K_PARAMS = ("a0", "a1", "a2", "g0", "g1", "g2", "sigma")
PASS_AT_K_ENDS = ("pass1_start", "pass1_end", "passk_start", "passk_end")


def pass_at_k_predictors(theta: Any, x: Any, eps: Any) -> tuple[Any, Any]:
    """Linear predictors of the pass@k model at scaled steps ``x`` (in [0, 1]):
    ``(logit mu, log kappa)``. Plain arithmetic, so the same function serves the PyMC
    model (tensors), the fit's curve ends and the calibration simulator (arrays)."""
    bend = x * (x - 1)  # quadratic term, zero at both ends
    logit_mu = theta["a0"] + theta["a1"] * x + theta["a2"] * bend + theta["sigma"] * eps
    log_kappa = theta["g0"] + theta["g1"] * x + theta["g2"] * bend
    return logit_mu, log_kappa


def build_pass_at_k_model(values: dict[str, np.ndarray], steps: np.ndarray, priors: PassAtKPriors) -> pm.Model:
    """The pass@k group model's PyMC graph (:func:`fit_pass_at_k`'s Notes).

    Parameters
    ----------
    values : dict
        The ``pm.Data``: ``t`` (step index), ``n``, ``s`` and ``w`` (rollouts, successes and
        count of each distinct (step, n, s) prompt group) and ``x`` (the scaled steps).
    steps : numpy.ndarray
        The steps (the ``step`` coordinate).
    priors : PassAtKPriors
        The priors.

    Returns
    -------
    pymc.Model
        The model: ``a0`` ... ``g2``, ``sigma``, ``eps`` and the beta-binomial likelihood.
    """
    with pm.Model(coords={S.STEP: steps}) as model:
        d = {name: pm.Data(name, v) for name, v in values.items()}
        theta: dict[str, Any] = {name: pm.Normal(name, mu, sd) for name, (mu, sd) in priors.normals().items()}
        theta["sigma"] = pm.HalfNormal("sigma", priors.sigma_sd)
        eps = pm.Normal("eps", 0.0, 1.0, dims=S.STEP)
        logit_mu, log_kappa = pass_at_k_predictors(theta, d["x"], eps)
        mu, kappa = pm.math.invlogit(logit_mu), pt.exp(log_kappa)
        al, be = (mu * kappa)[d["t"]], ((1 - mu) * kappa)[d["t"]]
        ll = _log_beta(d["s"] + al, d["n"] - d["s"] + be) - _log_beta(al, be)  # + binomial coefficient (constant)
        pm.Potential("likelihood", (d["w"] * ll).sum())
    return model


def pass_at_k_prior_draw(n_steps: int, priors: PassAtKPriors, seed: int) -> dict[str, Any]:
    """One draw of the pass@k model's parameters and step effects from its own graph
    (:func:`build_pass_at_k_model` on ``n_steps`` equally spaced steps): what its
    calibration draws from, so a prior changed in the model is changed there too.

    Parameters
    ----------
    n_steps : int
        The design's steps.
    priors : PassAtKPriors
        The priors.
    seed : int
        Seeds the draw.

    Returns
    -------
    dict
        ``a0`` ... ``g2`` and ``sigma`` (floats) and ``eps`` (one per step).
    """
    steps = np.arange(1, n_steps + 1)
    one = np.zeros(1)
    values = {"t": one.astype(np.int64), "n": one + 1, "s": one, "w": one + 1, "x": np.linspace(0.0, 1.0, n_steps)}
    model = build_pass_at_k_model(values, steps, priors)
    names = [*PASS_AT_K_PARAMS, "eps"]
    draw = pm.draw([model[n] for n in names], random_seed=np.random.default_rng(seed))
    out: dict[str, Any] = {n: float(v) for n, v in zip(PASS_AT_K_PARAMS, draw, strict=False)}
    out["eps"] = np.asarray(draw[-1], dtype=float)
    return out


def _sample_pass_at_k(
    values: dict[str, np.ndarray], steps: np.ndarray, priors: PassAtKPriors, seed: int, cfg: SamplerConfig
) -> tuple[Any, dict[str, Any]]:
    """The pass@k model's draws: with nutpie on the cached numba kernel
    (:mod:`saturation.models.pass_at_k_kernel`: no compile), else on the PyMC graph."""
    if cfg.sampler in ("auto", "nutpie") and "nutpie" in available_samplers():
        from saturation.models import pass_at_k_kernel  # numba

        direct = pass_at_k_kernel.compiled_model(values, priors, list(steps), S.STEP)
        if direct is not None:
            return sample_compiled(direct, seed=seed, config=cfg, coords={S.STEP: list(steps)})
    model = build_pass_at_k_model(values, steps, priors)
    return sample_model(model, cache_key=("pass_at_k", len(steps)), data=values, seed=seed, config=cfg)


def fit_pass_at_k(
    ds: xr.Dataset,
    *,
    k: int | None = None,
    success_threshold: float = 1.0,
    run: str | None = None,
    rope: float = PASS_AT_K_ROPE,
    seed: int = 0,
    sampler: SamplerConfig | None = None,
    priors: PassAtKPriors | None = None,
) -> Diagnosis:
    r"""pass@1 and pass@k per step from prompt groups, with a hierarchical model over prompts.

    Parameters
    ----------
    ds : xarray.Dataset
        Graded trials with several rollouts per prompt and step (``instance_id``, ``sample``).
    k : int, optional
        The k of pass@k (default: the most common number of rollouts per prompt).
    success_threshold : float
        A rollout succeeds when graded and its reward is at least this.
    run : str, optional
        The run to diagnose when the trials hold several.
    rope : float
        ROPE on the change of pass@k from the first to the last step.
    seed : int
        Seeds the sampler.
    sampler : SamplerConfig, optional
        NUTS settings (default :class:`~saturation.configs.SamplerConfig`).
    priors : PassAtKPriors, optional
        The model's priors (default :class:`~saturation.configs.PassAtKPriors`, the values
        below); calibration draws from the same fields.

    Returns
    -------
    Diagnosis
        ``pass_at_k``: pass@1 and pass@k at the first and last step, their changes, the
        verdict and the fit's diagnostics.

    Notes
    -----
    Prompt :math:`i` at step :math:`t` has success probability
    :math:`p_{ti} \sim Beta(\mu_t\kappa_t, (1-\mu_t)\kappa_t)` and :math:`s_{ti}` successes of
    :math:`n_{ti}` samples (beta-binomial; counts of identical (t, n, s) rows are the
    sufficient statistics).
    :math:`\mathrm{logit}\,\mu_t = \alpha_0 + \alpha_1 x_t + \alpha_2 x_t(x_t - 1) + \sigma\epsilon_t`,
    :math:`\log\kappa_t = \gamma_0 + \gamma_1 x_t + \gamma_2 x_t(x_t - 1)`, :math:`x_t \in [0, 1]` the
    scaled step (the quadratic terms bend the trends without moving their ends),
    :math:`\epsilon_t \sim N(0, 1)` step overdispersion. Then pass@1 = :math:`\mu_t` and
    pass@k = :math:`E[1 - (1 - p)^k] = 1 - B(\alpha, \beta + k)/B(\alpha, \beta)`
    (``curves.pass_at_k_beta``); the trend compares the curves at the first and last step
    (at :math:`\epsilon = 0`). Priors: :math:`\alpha_0 \sim N(0, 2)`, :math:`\alpha_1 \sim N(0, 2)`,
    :math:`\gamma_0 \sim N(\log 2, 1.5)`, :math:`\gamma_1 \sim N(0, 1)`, :math:`\alpha_2, \gamma_2 \sim N(0, 1)`,
    :math:`\sigma \sim HalfNormal(0.5)`.
    """
    priors = priors or PassAtKPriors()
    counts = group_counts(ds, success_threshold=success_threshold, run=run)
    n_success, n_total = int(counts["s"].sum()), int(counts["n"].sum())
    if n_success in (0, n_total):
        what = "failed" if n_success == 0 else "succeeded"
        raise ValueError(
            f"every one of the {n_total} rollouts {what} (success: graded and reward >= "
            f"{success_threshold:g}): pass@1 and pass@k are {0 if n_success == 0 else 1} at every "
            "step, so there is no trend to fit; check --success-threshold"
        )
    k = k or int(np.bincount(counts["n"].values).argmax())
    steps = np.unique(counts[S.STEP].values)
    t_idx = np.searchsorted(steps, counts[S.STEP].values)
    key = np.stack([t_idx, counts["n"].values, counts["s"].values], axis=1)
    uniq, weight = np.unique(key, axis=0, return_counts=True)
    span = max(float(steps[-1] - steps[0]), 1.0)
    x = (steps - steps[0]) / span
    values = {
        "t": uniq[:, 0],
        "n": uniq[:, 1].astype(float),
        "s": uniq[:, 2].astype(float),
        "w": weight.astype(float),
        "x": x,
    }
    cfg = sampler or SamplerConfig()
    t0 = time.perf_counter()
    idata, timings = _sample_pass_at_k(values, steps, priors, seed, cfg)
    post = idata.posterior
    ends = {}
    for name, xv in (("start", 0.0), ("end", 1.0)):
        logit_mu, log_kappa = pass_at_k_predictors({v: post[v] for v in PASS_AT_K_PARAMS}, xv, 0.0)
        m = curves.expit(logit_mu)
        ends[f"pass1_{name}"] = m
        ends[f"passk_{name}"] = m.copy(data=np.asarray(curves.pass_at_k_beta(m.values, np.exp(log_kappa.values), k)))
    for name, value in ends.items():  # the reported curve ends, per draw, with the posterior
        post[name] = value
        post[name].attrs["description"] = (
            f"pass@{1 if name.startswith('pass1') else k} at the {name.split('_')[1]} step (eps = 0)"
        )
    pass1 = {"start": ends["pass1_start"].values, "end": ends["pass1_end"].values}
    passk = {"start": ends["passk_start"].values, "end": ends["passk_end"].values}
    kind, probs = _capability_verdict(pass1, passk, rope)
    diag = diagnostics(idata, list(PASS_AT_K_PARAMS))
    numbers: dict[str, Any] = {
        "k": k,
        "rope": rope,
        "n_groups": int(counts.sizes["group"]),
        "n_trials": int(counts["n"].sum()),
        "pass1": _trend_summary(pass1),
        "passk": _trend_summary(passk),
        **probs,
        "verdict": kind,
        "timings": {**timings, "total": time.perf_counter() - t0},
    }
    verdict = (
        f"{kind}. pass@1 {_arrow(numbers['pass1'])} (P(up) = {probs['p_pass1_up']:.2f}); pass@{k} "
        f"{_arrow(numbers['passk'])} (P(|change| < {rope}) = {probs['p_passk_in_rope']:.2f})."
    )
    config = {
        "k": k,
        "success_threshold": success_threshold,
        "run": run,
        "rope": rope,
        "seed": seed,
        "sampler": asdict(cfg),
        "priors": asdict(priors),
    }
    data_summary = {"n_groups": numbers["n_groups"], "n_trials": numbers["n_trials"], "steps": steps.tolist()}
    stamp_attrs(idata, "pass_at_k", config, data_summary, diag, numbers["timings"])
    warn_if_not_converged(diag, "pass@k fit")
    return Diagnosis("pass_at_k", {"groups": verdict}, numbers, diag, idata)


# ====================================================================== 3. entropy
def diagnose_entropy(
    series: xr.Dataset,
    config: EntropyConfig | None = None,
    *,
    runs: list[str] | None = None,
    entropy: str = S.POLICY_ENTROPY,
    reward: str = S.REWARD_MEAN,
    rope_relative: float = ENTROPY_ROPE_RELATIVE,
    seed: int = 0,
    draws: int = 1000,
    chains: int = 4,
) -> Diagnosis:
    """Did policy entropy collapse, and did it turn together with the reward?

    Per run: the trend (a one-level change-point fit) of entropy (P(decline), decline and relative decline with
    HDIs), trend of the reward, and plateau fits (unknown change point, exact sampler) of
    both; P(the two change points are at most ``TOGETHER_STEPS`` apart).

    Verdict: "entropy collapse" when the relative decline exceeds ``rope_relative`` with
    P > 0.95; "entropy rising" symmetrically; "entropy stable" when
    P(|relative change| < rope_relative) >= 0.95; else "entropy change undetermined".

    Parameters
    ----------
    series : xarray.Dataset
        Logged per-step metrics (dims run, step) with the entropy and reward keys.
    config : EntropyConfig, optional
        The settings at once (or the keywords below, not both).
    runs : list of str, optional
        The runs (default: every run that logged both).
    entropy, reward : str
        The policy-entropy and reward keys.
    rope_relative : float
        The ROPE on the entropy's relative change.
    seed : int
        Seeds the fits.
    draws, chains : int
        Draws per chain and chains of each trend fit's exact sampler.

    Returns
    -------
    Diagnosis
        ``entropy``: per run the trends, both change points, the verdict and its sentence.
    """
    given = {"runs": runs, "entropy": entropy, "reward": reward, "rope_relative": rope_relative}
    config_or_keywords(diagnose_entropy, config, {**given, "draws": draws, "chains": chains})
    config = config or EntropyConfig(
        runs=tuple(runs) if runs else None,
        entropy=entropy,
        reward=reward,
        rope_relative=rope_relative,
        draws=draws,
        chains=chains,
    )  # the keyword arguments, once into the config
    config.validate()
    runs = runs_with(series, (config.entropy, config.reward), config.runs)
    entropy, reward, rope_relative = config.entropy, config.reward, config.rope_relative
    draws, chains = config.draws, config.chains
    trends: dict[str, dict[str, np.ndarray]] = {}
    numbers: dict[str, Any] = {"rope_relative": rope_relative, "runs": {}}
    verdicts: dict[str, str] = {}
    diags: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        out = _run_trends(
            series, run, (entropy, reward), seed=seed + 10 * i, draws=draws, chains=chains, trends=trends, diags=diags
        )
        gap = trends[f"{entropy}/{run}"]["changepoint"] - trends[f"{reward}/{run}"]["changepoint"]
        e = trends[f"{entropy}/{run}"]
        rel = ((e["end"] - e["start"]) / e["start"]).ravel()
        out["relative_change"] = interval(rel)
        kind, p_stable, p_up, p_down = rope_decision(
            rel, rope_relative, ("entropy stable", "entropy rising", "entropy collapse", "entropy change undetermined")
        )
        p_together = float(np.mean(np.abs(gap) <= TOGETHER_STEPS))
        out.update(
            p_decline_beyond_rope=p_down,
            p_rise_beyond_rope=p_up,
            p_stable=p_stable,
            p_turns_with_reward=p_together,
            verdict=kind,
        )
        numbers["runs"][run] = out
        r = out[reward]
        verdicts[run] = (
            f"{run}: {kind}. Entropy {_arrow(out[entropy])} (relative change {rel.mean():+.1%}, "
            f"P(decline > {rope_relative:.0%}) = {p_down:.2f}); reward {_arrow(r)}; entropy and reward "
            f"change points within {TOGETHER_STEPS} steps with P = {p_together:.2f}."
        )
    stamped = {**asdict(config), "runs": runs, "seed": seed}
    return _diagnosis("entropy", verdicts, numbers, trends, diags, chains, stamped)


# ====================================================================== 4. reward components
def _component_verdict(change: np.ndarray, rope: float) -> tuple[str, dict[str, float]]:
    kind, p_in, p_up, p_down = rope_decision(change, rope, ("flat", "rose", "fell", "undetermined"))
    return kind, {"p_in_rope": p_in, "p_up_beyond_rope": p_up, "p_down_beyond_rope": p_down}


def composition_error(
    series: xr.Dataset, run: str, reward: str, variables: list[str], weights: tuple[float, ...]
) -> float:
    """max over the run's steps of |reward - sum_c w_c component_c| (steps where all are logged; NaN if none)."""
    one = series.sel({S.RUN: run})
    total = sum(w * one[v] for w, v in zip(weights, variables, strict=True))
    err = np.abs(one[reward] - total).to_numpy()
    err = err[np.isfinite(err)]
    return float(err.max()) if err.size else float("nan")


def diagnose_components(series: xr.Dataset, config: ComponentsConfig, *, seed: int = 0) -> Diagnosis:
    """Did each component of a composite reward move?

    Per run: the trend (one-level change-point fit, the plateau model drawn exactly) of
    every component and of the reward; each component's change (end - start) with its
    HDI and verdict; with ``weights``, each component's share ``w_c * change_c`` of the
    reward's change and the composition check (the logged components' weighted sum
    against the logged reward, at every step).

    Verdict per component (P = posterior probability of the change, ROPE ``rope``):
    "flat" when P(|change| < rope) >= 0.95; "rose" / "fell" when the change exceeds the
    ROPE with P >= 0.95; else "undetermined". A run is "all components flat" when every
    component is.

    Parameters
    ----------
    series : xarray.Dataset
        Per-step series (dims run, step) holding the reward and the components.
    config : ComponentsConfig
        The components, weights, runs and ROPE.
    seed : int, default 0
        Seed of run ``i``'s first trend fit is ``seed + 10 i``.

    Returns
    -------
    Diagnosis
        Named ``"components"``; ``numbers["runs"][run]`` holds per component its trend
        summary, probabilities, verdict and share, and ``composition_max_abs_error`` and
        ``composition_ok`` (None when no step logged the reward and every component).

    Notes
    -----
    With reward :math:`r_t = \\sum_c w_c y_{c,t}`, the change of the reward's expected
    value is :math:`\\sum_c w_c \\Delta_c`; the shares are computed from each component's
    own trend (independent fits), so they add up to the reward's change only up to the
    trends' differences in shape.
    """
    variables = [S.metric_variable(series, c, "component") for c in config.components]
    runs = runs_with(series, (*variables, config.reward), config.runs)
    if not runs:
        raise ValueError(f"no run logged all of the components {list(config.components)}")
    trends: dict[str, dict[str, np.ndarray]] = {}
    numbers: dict[str, Any] = {"rope": config.rope, "components": list(config.components), "runs": {}}
    verdicts: dict[str, str] = {}
    diags: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        out = _run_trends(
            series,
            run,
            (*variables, config.reward),
            seed=seed + 10 * i,
            draws=config.draws,
            chains=config.chains,
            trends=trends,
            diags=diags,
        )
        kinds, parts = [], []
        for j, (name, var) in enumerate(zip(config.components, variables, strict=True)):
            t = trends[f"{var}/{run}"]
            change = np.ravel(t["end"] - t["start"])
            kind, probs = _component_verdict(change, config.rope)
            out[var].update(probs, verdict=kind, component=name)
            if config.weights is not None:
                out[var]["share_of_reward_change"] = interval(config.weights[j] * change)
            kinds.append(kind)
            parts.append(
                f"{name} {kind} ({_arrow(out[var])}, P(|change| < {config.rope:g}) = {probs['p_in_rope']:.2f})"
            )
        verdict = (
            "all components flat"
            if all(k == "flat" for k in kinds)
            else "; ".join(f"{n} {k}" for n, k in zip(config.components, kinds, strict=True))
        )
        out["verdict"] = verdict
        sentence = f"{run}: {verdict}. " + "; ".join(parts) + "."
        if config.weights is not None:
            err = composition_error(series, run, config.reward, variables, config.weights)
            out["composition_max_abs_error"] = err
            formula = " + ".join(f"{w:g} x {n}" for w, n in zip(config.weights, config.components, strict=True))
            ok = None if np.isnan(err) else bool(err <= COMPOSITION_TOLERANCE)
            out["composition_ok"] = ok
            if ok is None:
                sentence += f" Whether the logged reward is {formula} cannot be checked: no step logged all of them."
            else:
                sentence += (
                    f" The logged reward {'is' if ok else 'is NOT'} {formula} (largest difference {err:.2g} over "
                    f"the logged steps{'' if ok else f'; more than {COMPOSITION_TOLERANCE:g}: check the weights'})."
                )
        numbers["runs"][run] = out
        verdicts[run] = sentence
    stamped = {**asdict(config), "runs": runs, "seed": seed}
    return _diagnosis("components", verdicts, numbers, trends, diags, config.chains, stamped)


# ====================================================================== views
def cardinality_table(diag: Diagnosis) -> pd.DataFrame:
    """One row per level: the verdict, precision, recall and predicted over gold at the first
    and the last step, and P(recall rises)."""
    rows = []
    for level, num in diag.numbers["levels"].items():
        rows.append(
            {
                "level": level,
                "verdict": num["verdict"],
                "precision start": interval_cell(num[S.PRECISION]["start"]),
                "precision end": interval_cell(num[S.PRECISION]["end"]),
                "recall start": interval_cell(num[S.RECALL]["start"]),
                "recall end": interval_cell(num[S.RECALL]["end"]),
                "P(recall rises)": num[S.RECALL]["p_increase"],
                "pred/gold start": interval_cell(num["pred_over_gold"]["start"]),
                "pred/gold end": interval_cell(num["pred_over_gold"]["end"]),
            }
        )
    return pd.DataFrame(rows)


def components_table(diag: Diagnosis) -> pd.DataFrame:
    """One row per (run, component): start, end, change, P(change in the ROPE), the share of
    the reward's change (when the weights were given) and the verdict."""
    rope = f"P(|change| < {diag.numbers['rope']:g})"
    return pd.DataFrame(
        [
            {
                "run": run,
                "component": e["component"],
                "start": interval_cell(e["start"]),
                "end": interval_cell(e["end"]),
                "change": interval_cell(e["change"]),
                rope: e["p_in_rope"],
                **(
                    {"share of reward change": interval_cell(e["share_of_reward_change"])}
                    if "share_of_reward_change" in e
                    else {}
                ),
                "verdict": e["verdict"],
            }
            for run, num in diag.numbers["runs"].items()
            for e in num.values()
            if isinstance(e, dict) and "component" in e
        ]
    )


# ====================================================================== the series analysis
@dataclass
class SeriesDiagnosis(FitObject):
    """What a run's logged per-step series says: reliability (pass@1) against capability
    (pass@k), entropy where logged, the plateau after a known step and the reward components
    (:func:`diagnose_series`). Each part is a fit object of its own.

    Parameters
    ----------
    series : xarray.Dataset
        The logged per-step series (dims run, step).
    config : SeriesConfig
        The parts' settings.
    reliability : Diagnosis
        pass@1 against pass@k per run.
    entropy : Diagnosis, optional
        The entropy per run (where logged).
    plateau : PlateauFit, optional
        The plateau after the known step.
    components : Diagnosis, optional
        The reward components.
    """

    series: xr.Dataset
    config: SeriesConfig
    reliability: Diagnosis
    entropy: Diagnosis | None = None
    plateau: PlateauFit | None = None
    components: Diagnosis | None = None

    def fitted_parts(self) -> list[Any]:
        """The fitted parts, in the order they are reported."""
        return [p for p in (self.reliability, self.entropy, self.plateau, self.components) if p is not None]

    @property
    def diagnostics(self) -> dict[str, Any]:
        """Every part's diagnostics merged (:func:`~saturation.models.sampling.merge_diagnostics`)."""
        return merge_diagnostics([p.diagnostics for p in self.fitted_parts()])

    def table(self) -> pd.DataFrame:
        """One row per run: pass@1 and pass@k at the first and last step, P(pass@k change in
        the ROPE), the capability verdict and, where logged, the entropy's."""
        rel, ent = self.reliability.numbers, self.entropy.numbers if self.entropy is not None else None
        pass1, passk, k = self.config.reliability.pass1, self.config.reliability.passk, rel.get("k") or "k"
        rows = []
        for run, num in rel["runs"].items():
            row = {
                "run": run,
                "pass@1 start": interval_cell(num[pass1]["start"]),
                "pass@1 end": interval_cell(num[pass1]["end"]),
                f"pass@{k} start": interval_cell(num[passk]["start"]),
                f"pass@{k} end": interval_cell(num[passk]["end"]),
                f"P(pass@{k} change in ROPE)": num["p_passk_in_rope"],
                "capability verdict": num["verdict"],
            }
            if ent is not None:
                e, name = ent["runs"][run], self.config.entropy.entropy
                row.update(
                    {
                        "entropy start": interval_cell(e[name]["start"]),
                        "entropy end": interval_cell(e[name]["end"]),
                        "entropy verdict": e["verdict"],
                    }
                )
            rows.append(row)
        return pd.DataFrame(rows)

    def tables(self) -> dict[str, TableView]:
        """``reliability_entropy`` (:meth:`table`) and ``reward_components``."""
        out = {"reliability_entropy": TableView(self.table(), "Reliability (pass@1), capability (pass@k), entropy")}
        if self.components is not None:
            out.update(self.components.tables())
        return out

    def summary(self) -> pd.DataFrame:
        """Every part's tidy summary, one block per part (``part`` a column)."""
        frames = [p.summary().assign(part=getattr(p, "name", "plateau_after")) for p in self.fitted_parts()]
        return pd.concat(frames, ignore_index=True)

    def figures(self) -> dict[str, FigureView]:
        """``pass_at_k``, ``entropy`` (where logged) and ``components``."""
        from saturation import plots

        trend = f"the fitted trend (posterior mean and {S.HDI_LABEL} band of a one-series change-point fit)"
        rel, cfg = self.reliability, self.config
        runs = ", ".join(map(str, rel.numbers["runs"]))
        k = rel.numbers.get("k") or "k"
        out = {
            "pass_at_k": FigureView(
                lambda: plots.plot_pass_at_k(
                    self.series, rel, pass1=cfg.reliability.pass1, passk=cfg.reliability.passk
                ),
                f"pass@1 (mean reward, reliability) and pass@{k} (capability) by step, one panel per run ({runs}): "
                f"logged per-step values (thin lines) and {trend}.",
            )
        }
        if self.entropy is not None:
            ent = self.entropy
            out["entropy"] = FigureView(
                lambda: plots.plot_entropy(self.series, ent, entropy=cfg.entropy.entropy),
                f"Policy entropy by step, one panel per run ({runs}): logged per-step values (thin lines) and {trend}.",
            )
        if self.components is not None:
            comp = self.components
            out["components"] = FigureView(
                lambda: plots.plot_components(self.series, comp),
                f"Reward components and the reward by step, one panel per run ({', '.join(comp.numbers['runs'])}): "
                f"logged per-step values (thin lines) and {trend}.",
            )
        return out

    def plateau_sentence(self) -> str:
        """Did the plateau run's pass@1 plateau after the known step? (empty without it)"""
        if self.plateau is None:
            return ""
        e = next(iter(self.plateau.levels().values()))
        after = float(self.plateau.config.breakpoint or 0)
        return (
            f"Did {self.config.plateau_run}'s {self.config.reliability.pass1} plateau after step {after:g}? "
            f"{e.verdict} ({e.reason}); late gain {format_interval(e.late_gain)}, 94 % upper bound "
            f"{e.late_gain_upper:.3f}; model: {self.plateau.describe_model()}."
        )

    def headline(self) -> str:
        """Each run's capability (and entropy) verdict."""
        ent = self.entropy
        runs = "; ".join(
            f"{run}: {num['verdict']}" + (f", {ent.numbers['runs'][run]['verdict']}" if ent is not None else "")
            for run, num in self.reliability.numbers["runs"].items()
        )
        return runs + "."

    def answer(self) -> str:
        """The plateau after the known step, each run's capability (and entropy) verdict, the
        reward components."""
        parts = [self.plateau_sentence(), self.headline(), self.components.answer() if self.components else ""]
        return " ".join(p for p in parts if p)

    def details(self) -> list[str]:
        """The plateau sentence, then every part's per-run sentences."""
        diagnoses = [p for p in (self.reliability, self.entropy, self.components) if p is not None]
        head = [self.plateau_sentence()] if self.plateau is not None else []
        return head + [v for p in diagnoses for v in p.verdicts().values()]

    def results(self) -> dict[str, Any]:
        """``{"reliability", "entropy", "plateau_after", "components"}``: each part's ``to_dict()``."""
        out: dict[str, Any] = {p.name: p.to_dict() for p in (self.reliability, self.entropy) if p is not None}
        if self.plateau is not None:
            out["plateau_after"] = self.plateau.to_dict()
        if self.components is not None:
            out["components"] = self.components.to_dict()
        return json_safe(out)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`results`."""
        return self.results()

    def inference_data(self) -> dict[str, Any]:
        """Every part's InferenceData (``plateau_after_fit`` for the plateau)."""
        out = {**self.reliability.inference_data()}
        if self.entropy is not None:
            out.update(self.entropy.inference_data())
        if self.plateau is not None:
            out["plateau_after_fit"] = self.plateau.idata
        if self.components is not None:
            out.update(self.components.inference_data())
        return out

    def __repr__(self) -> str:
        head = f"SeriesDiagnosis({len(self.reliability.numbers['runs'])} run(s); {convergence_words(self.diagnostics)})"
        return short_repr(head, [self.answer()])


def diagnose_series(series: xr.Dataset, config: SeriesConfig | None = None, *, seed: int = 0) -> SeriesDiagnosis:
    """Reliability against capability, entropy, the plateau after a known step and the
    reward components of logged per-step series, each part where the config asks for it
    and the series logs it.

    Parameters
    ----------
    series : xarray.Dataset
        Per-step metrics (dims run, step).
    config : SeriesConfig, optional
        The parts' settings (default: reliability and entropy with their defaults).
    seed : int
        Seeds every part.

    Returns
    -------
    SeriesDiagnosis
        The parts, their tables, figures and sentences.
    """
    config = config or SeriesConfig()
    rel = diagnose_reliability(series, config.reliability, seed=seed)
    ent = diagnose_entropy(series, config.entropy, seed=seed) if config.entropy.entropy in series else None
    plateau = (
        fit_plateau(series, config.plateau, run=config.plateau_run, seed=seed) if config.plateau is not None else None
    )
    comp = diagnose_components(series, config.components, seed=seed) if config.components is not None else None
    return SeriesDiagnosis(series, config, rel, ent, plateau, comp)


#: the question each diagnosis answers, by :attr:`Diagnosis.name` (the CLI's headings)
DIAGNOSIS_TITLES = {
    "cardinality": "1. Real skill or a cardinality prior? (trials)",
    "reliability": "2. Reliability (pass@1) or capability (pass@k)? (logged series)",
    "pass_at_k": "2b. pass@1 and pass@k from prompt groups (trials)",
    "entropy": "3. Did policy entropy collapse? (logged series)",
    "components": "4. Did the reward's components move? (logged series)",
}


@dataclass
class Diagnoses(FitObject):
    """The diagnoses that fit the data given (:func:`diagnose`), and why the others did not run.

    Parameters
    ----------
    parts_fitted : list of Diagnosis
        In the order of :data:`DIAGNOSIS_TITLES`.
    skipped : list of str
        One line per diagnosis the data cannot serve, naming what is missing.
    data : dict
        The inputs: ``trials`` and ``metrics`` sources and the ``synthetic`` labels.
    """

    parts_fitted: list[Diagnosis]
    skipped: list[str]
    data: dict[str, Any]

    @property
    def diagnostics(self) -> dict[str, Any]:
        """Every diagnosis' diagnostics merged."""
        return merge_diagnostics([p.diagnostics for p in self.parts_fitted])

    def sections(self) -> list[tuple[str, Diagnosis]]:
        """(the question, its diagnosis), in order."""
        return [(DIAGNOSIS_TITLES[p.name], p) for p in self.parts_fitted]

    def heading(self) -> list[str]:
        """The diagnoses skipped and why, then a note per synthetic input."""
        return [*self.skipped, *(f"NOTE: {note}" for note in self.data["synthetic"])]

    def tables(self) -> dict[str, TableView]:
        """Every diagnosis' tables."""
        return {name: view for p in self.parts_fitted for name, view in p.tables().items()}

    def summary(self) -> pd.DataFrame:
        """Every diagnosis' tidy summary (``part`` a column)."""
        return pd.concat([p.summary().assign(part=p.name) for p in self.parts_fitted], ignore_index=True)

    def details(self) -> list[str]:
        """Every diagnosis' sentences."""
        return [v for p in self.parts_fitted for v in p.details()]

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``saturation diagnose``: ``{"data", <name>: the diagnosis' to_dict()}``."""
        return {"data": {**self.data, "skipped": self.skipped}, **{p.name: p.to_dict() for p in self.parts_fitted}}

    def inference_data(self) -> dict[str, Any]:
        """Every diagnosis' InferenceData."""
        return {k: v for p in self.parts_fitted for k, v in p.inference_data().items()}

    def __repr__(self) -> str:
        head = f"Diagnoses({', '.join(p.name for p in self.parts_fitted)}; {convergence_words(self.diagnostics)})"
        return short_repr(head, [self.answer()])


def _logged(series: xr.Dataset) -> set[str]:
    return set(map(str, series.data_vars)) | {str(series[v].attrs.get("metric_name", v)) for v in series.data_vars}


def diagnose(
    trials: xr.Dataset | None,
    series: xr.Dataset | None,
    config: DiagnoseConfig | None = None,
    *,
    run: str | None = None,
    seed: int = 0,
    where: str = "",
) -> Diagnoses:
    """Every diagnosis the inputs support (``saturation diagnose``).

    Parameters
    ----------
    trials : xarray.Dataset, optional
        Graded trials: the cardinality diagnosis and, with ``config.groups``, pass@k from
        prompt groups.
    series : xarray.Dataset, optional
        Logged per-step metrics: reliability and entropy where the keys are logged, the
        reward components when ``config.components`` names them.
    config : DiagnoseConfig, optional
        The diagnoses' settings.
    run : str, optional
        The run of the trials to diagnose.
    seed : int
        Seeds every diagnosis.
    where : str
        The metrics file's name, for the skipped lines.

    Returns
    -------
    Diagnoses
        The diagnoses that ran and a line for each that could not.

    Raises
    ------
    saturation.limits.OptionError
        When no diagnosis fits the inputs, or prompt groups are asked of a series only.
    """
    cfg = config or DiagnoseConfig()
    rel, ent = cfg.reliability, cfg.entropy
    skipped: list[str] = []
    if series is None:
        skipped.append("2-4. series diagnoses: skipped (need per-step metrics: give --metrics PATH)")
    plan = []
    for name, title, wanted, flags in (
        ("reliability", "2. reliability", [rel.pass1, rel.passk], "--pass1/--passk"),
        ("entropy", "3. entropy", [rel.pass1, ent.entropy], "--pass1/--entropy"),
    ):
        missing = [k for k in wanted if series is not None and k not in _logged(series)]
        if series is not None and missing:
            skipped.append(
                f"{title}: skipped ({where or 'the metrics'} has no {', '.join(missing)}; name its keys with {flags})"
            )
        elif series is not None:
            plan.append(name)
    if trials is None:
        skipped.append("1. cardinality: skipped (needs graded trials with precision, recall and counts: give TRIALS)")
        if cfg.groups:
            raise OptionError("--groups fits the trials' prompt groups: give TRIALS")
        if not plan:
            raise OptionError(f"{where}: none of the diagnoses fit this file ({'; '.join(skipped)})")
    parts = [diagnose_cardinality(trials, replace(cfg.cardinality, run=run), seed=seed)] if trials is not None else []
    if series is not None and "reliability" in plan:
        parts.append(diagnose_reliability(series, rel, seed=seed))
    if series is not None and "entropy" in plan:
        parts.append(diagnose_entropy(series, replace(ent, reward=rel.pass1), seed=seed))
    if series is not None and cfg.components is not None:
        parts.append(diagnose_components(series, cfg.components, seed=seed))
    if trials is not None and cfg.groups:
        parts.append(fit_pass_at_k(trials, run=run, rope=rel.rope, seed=seed, success_threshold=cfg.success_threshold))
    inputs = [x for x in (trials, series) if x is not None]
    data = {
        "trials": trials.attrs.get(S.ATTR_SOURCES, "") if trials is not None else None,
        "metrics": series.attrs.get(S.ATTR_SOURCES, "") if series is not None else None,
        "synthetic": sorted({str(x.attrs.get(S.ATTR_SYNTHETIC, "")) for x in inputs} - {""}),
    }
    return Diagnoses(parts, skipped, data)
