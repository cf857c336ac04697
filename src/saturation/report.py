"""``saturation report``: run every analysis spec, write REPORT.md, tables, figures, fits.

Output directory layout (default ``report/``)::

    REPORT.md            one section per analysis: question, verdict, diagnostics,
                         tables, figures, published figures next to the estimates
    results.json         every estimand of every analysis, diagnostics, file list
    <analysis>/          tables (.csv, .md, .tex), figures (.pdf, .png),
                         InferenceData (.nc), section.json (the cache record)

A re-run reuses an analysis whose cache key (spec content + data hash + reference hash +
package version) is unchanged, unless ``force=True``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import __version__, plots, replica
from saturation import progress as progress_
from saturation import schema as S
from saturation.aggregate import phase_note
from saturation.cluster import map_tasks
from saturation.files import inside
from saturation.io import OutputError, safe_name, write_atomic, write_netcdf
from saturation.models import (
    compare_plateau_models,
    fit_plateau,
    fit_transfer,
    step_data,
)
from saturation.models.families import compare_curve_families
from saturation.models.learning import (
    CardinalityConfig,
    ComponentsConfig,
    diagnose_cardinality,
    diagnose_components,
    diagnose_entropy,
    diagnose_reliability,
)
from saturation.models.plateau import FLAT_DEFINITION, FLAT_LATE_VERDICTS, LABELS, PlateauConfig, together_sentence
from saturation.models.runs import fit_plateau_runs
from saturation.models.sampling import merge_diagnostics, nuisance_text
from saturation.models.sigmoid import (
    SigmoidConfig,
    arm_steps,
    axis_words,
    backtest_sigmoid,
    fit_sigmoid,
    series_arm_steps,
)
from saturation.models.transfer import TransferConfig, TransferFit
from saturation.plan import GENERIC, is_data, plan_report
from saturation.plots import save_figure
from saturation.progress import Progress
from saturation.replica import LR_ARM, load_reference
from saturation.report_html import (
    anchor,
    figure_caption,
    first_sentence,
    fit_time_text,
    run_time_text,
    write_report_html,
)
from saturation.series import dynamic_sampling_notes
from saturation.spec import (
    EMBEDDED,
    SeriesConfig,
    Spec,
    analysis_config,
    data_hash,
    data_path,
    default_spec_dir,
    load_data,
    load_metrics,
    load_spec,
    load_specs,
)
from saturation.summary import format_interval, json_safe
from saturation.tables import interval_cell, markdown_text, write_tables

#: warnings that say nothing about a fit (pip-installed PyTensor has no BLAS; models run on numba)
HARMLESS_WARNINGS = ("PyTensor could not link to a BLAS installation",)


@dataclass
class Section:
    """One analysis' outputs (everything but the DataFrames is JSON; the tables are files)."""

    name: str
    kind: str
    title: str
    question: str
    verdict: str
    details: list[str]
    diagnostics: dict[str, Any]
    converged: bool
    tables: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    fits: list[str] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    key: str = ""
    cached: bool = False
    synthetic: str = ""
    #: when the fit ran (ISO date and time, UTC); a cached section keeps its original one
    fitted_on: str = ""
    #: figure path (as in ``figures``) -> caption: what is drawn, the band level, the data
    captions: dict[str, str] = field(default_factory=dict)
    #: the manifest: every file this analysis wrote (path relative to the report directory)
    #: -> its sha256 at write; the only files a re-run deletes, and checked before a reuse
    written: dict[str, str] = field(default_factory=dict)
    #: one-line notes of this run (a cache record not trusted and refitted); not kept on reuse
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ helpers
def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Out:
    """Collects one analysis' files under its directory ``root/safe_name(name)``.

    File names made from data (a run or an arm name) are sanitised (:func:`saturation.io.
    safe_name`) and numbered when two would coincide; no file is written over one of the
    analysis' inputs; every file written is recorded with its hash (the manifest).
    """

    def __init__(self, root: Path, name: str, inputs: frozenset[Path] = frozenset()) -> None:
        self.dir = root / safe_name(name)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.inputs = inputs
        self.tables: list[str] = []
        self.figures: list[str] = []
        self.fits: list[str] = []
        self.captions: dict[str, str] = {}
        self.written: dict[str, str] = {}
        self._names: set[str] = set()

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def stem(self, name: str, *suffixes: str) -> Path:
        """``dir/<name>`` with ``name`` sanitised, numbered (``-2``, ...) if one of its files
        (``name + suffix``) is already written by this analysis (two runs ``a/b`` and ``a_b``)."""
        base = safe_name(name)
        stem, i = base, 1
        while any(f"{stem}{ext}".casefold() in self._names for ext in suffixes):
            i += 1
            stem = f"{base}-{i}"
        self._names.update(f"{stem}{ext}".casefold() for ext in suffixes)
        return self.dir / stem

    def guard(self, *paths: Path) -> None:
        """Refuse (OutputError) to write over an input of the analysis."""
        for path in paths:
            if path.resolve() in self.inputs:
                raise OutputError(
                    f"{path}: the report would overwrite this input of the analysis; choose another --out"
                )

    def record(self, *paths: Path) -> None:
        for path in paths:
            self.written[self.rel(path)] = _sha256(path)

    def table(self, frame: pd.DataFrame, name: str, caption: str) -> None:
        stem = self.stem(name, ".csv", ".md", ".tex")
        paths = [stem.with_name(f"{stem.name}{ext}") for ext in (".csv", ".md", ".tex")]
        self.guard(*paths)
        write_tables(frame, stem, caption)
        self.record(*paths)
        self.tables.append(self.rel(paths[1]))

    def figure(self, make: Callable[[], Any], name: str, caption: str) -> None:
        """Draw (``make()``), save as PDF and PNG, and record the figure with its caption."""
        import matplotlib.pyplot as plt

        progress_.stage(f"figure {name}")
        stem = self.stem(name, ".pdf", ".png")
        pdf, png = stem.with_name(f"{stem.name}.pdf"), stem.with_name(f"{stem.name}.png")
        self.guard(pdf, png)
        fig = make()
        save_figure(fig, stem)
        plt.close(fig)
        self.record(pdf, png)
        path = self.rel(png)
        self.figures.append(path)
        self.captions[path] = caption

    def idata(self, idata: Any, name: str) -> None:
        stem = self.stem(name, ".nc")
        path = stem.with_name(f"{stem.name}.nc")
        self.guard(path)
        write_netcdf(idata, path)  # atomic: an interrupted report leaves the previous fit or none
        self.record(path)
        self.fits.append(self.rel(path))

    def file(self, name: str, data: str | bytes) -> None:
        """Any other file of the analysis (``name`` with its suffix, not from data)."""
        path = self.dir / safe_name(name)
        self.guard(path)
        write_atomic(path, data)
        self.record(path)


# ------------------------------------------------------------------ analyses
#: where a ``by = "run"`` section fits its runs when the report runs in this process: None, a
#: LocalCluster of two workers; "sync", one after the other here (a section that is itself a
#: task on the report's cluster always fits its runs in its worker)
RUNS_SCHEDULER: str | None = None


def _plateau_section(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:
    """A plateau spec: one fit (:func:`_plateau`), or one per run with ``by = "run"``. On a
    logged series (``[data] series``) ``response`` may be the key as logged."""
    if "series" in spec.data and "response" in spec.model:
        spec = replace(spec, model={**spec.model, "response": S.metric_variable(ds, spec.model["response"])})
    if spec.model.get("by") == "run":
        return _plateau_runs(spec, ds, out)
    return _plateau(spec, ds, reference, out)


#: a by-run plateau section draws the curves of at most this many runs (every run is in its table)
MAX_RUN_FIGURES = 6


def _plateau_runs(spec: Spec, ds: xr.Dataset, out: _Out) -> dict[str, Any]:
    """A plateau spec with ``by = "run"``: one fit per run (``runs`` or every run), on a Dask
    LocalCluster, or in this process when the report itself runs on a cluster (the section
    is then a task in a worker); one table of verdicts across runs, one InferenceData per run."""
    config = analysis_config(spec)
    assert isinstance(config, PlateauConfig)
    scheduler = RUNS_SCHEDULER
    try:  # inside a dask worker (report --scheduler): the runs are fitted here, not on a new cluster
        from distributed import get_worker

        get_worker()
        scheduler = "sync"
    except (ImportError, ValueError):
        pass
    if len(spec.model.get("runs") or np.unique(ds[S.RUN].to_numpy())) < 2:
        scheduler = "sync"  # one run: a cluster would cost more than the fit
    progress_.stage("fit the runs")
    res = fit_plateau_runs(ds, config, runs=spec.model.get("runs"), seed=spec.seed, scheduler=scheduler)
    if not res.fits:
        raise ValueError(f"no run could be fitted: {res.failures}")
    rows = []
    for row in res.table().itertuples(index=False):
        rows.append(
            {
                "run": row.run,
                "level": row.level,
                "verdict": row.verdict,
                "change point": (
                    "none inside the run"
                    if row.verdict == "no change point" or row.changepoint != row.changepoint
                    else interval_cell(
                        {"mean": row.changepoint, "hdi": [row.changepoint_hdi_low, row.changepoint_hdi_high]}
                    )
                ),
                "late gain": row.late_gain,
                "late gain 94 % upper": row.late_gain_upper,
                LABELS["p_flat"]: row.p_flat,
                "converged": row.converged,
            }
        )
    out.table(pd.DataFrame(rows), "runs", f"{spec.title}: one fit per run ({S.HDI_LABEL} of the change point)")
    for run, fit in res.fits.items():
        out.idata(fit.idata, f"plateau_fit_{run}")
    if "curves" in spec.figures:
        for i, (run, fit) in enumerate(list(res.fits.items())[:MAX_RUN_FIGURES]):
            ylabel = str(ds[fit.config.response].attrs.get("metric_name", fit.config.response))
            out.figure(
                functools.partial(plots.plot_plateau, fit, ylabel=ylabel),
                f"curves_{i + 1}",
                f"Run {run}: {ylabel} by step, the logged values (points), the posterior mean curve of the "
                f"{fit.describe_model()} and its {S.HDI_LABEL} band; the lower panel gives the change point's "
                f"posterior probability by step. {_data_text(fit.data.summary, len(fit.data.steps))}",
            )
    first = next(iter(res.fits.values()))
    details = [f"Model (every run): {first.describe_model()}."]
    details += [f"{run}: {fit.to_dict()['summary']}." for run, fit in res.fits.items()]
    details += [f"{f['run']}: could not be fitted ({f['error']})." for f in res.failures]
    return {
        "verdict": res.summary() + ".",
        "details": details,
        "diagnostics": res.diagnostics,
        "results": {"runs": json_safe(res.to_dict())},
    }


def _plateau(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:

    m = spec.model
    config = analysis_config(spec)
    assert isinstance(config, PlateauConfig)
    sampler = config.sampler
    fit = fit_plateau(ds, config, run=m.get("run"), seed=spec.seed)
    # the LOO comparison takes fit_plateau's keyword arguments: only what the spec sets
    keys = ("levels", "response", "run", "breakpoint", "shared", "continuity", "likelihood", "rope", "rope_relative")
    kw = {k: m[k] for k in keys if k in m}
    kw["priors"] = config.priors
    est = fit.to_dict()
    out.idata(fit.idata, "plateau_fit")
    rows = []
    verdicts = [f"Model: {fit.describe_model()}."]
    for level, e in est["levels"].items():
        ratio = e.get("slowdown_ratio")
        rows.append(
            {
                "level": level,
                "verdict": e["verdict"],
                "change point": (
                    f"known ({fit.config.breakpoint:g})"
                    if not e["changepoint"]
                    else "none inside the run"
                    if e["verdict"] == "no change point"
                    else interval_cell(e["changepoint"])
                ),
                "early slope": interval_cell(e["early_slope"]),
                "late slope": interval_cell(e["late_slope"]),
                "late gain": interval_cell(e["late_gain"]),
                "late gain 94 % upper": e["late_gain_upper"],
                "late / early slope": interval_cell(ratio),
                LABELS["p_flat"]: e["p_flat"],
                "BF change point : line": e["bf_changepoint_vs_line"],
                "Davies p": e["davies"]["p_value"] if e.get("davies") else None,
                "BF01 (late = 0)": e["bf01_late_zero"],
                "start": interval_cell(e["start"]),
                "end": interval_cell(e["end"]),
                LABELS["headroom_to_max"]: interval_cell(e["headroom_to_max"]),
            }
        )
        where = (
            f"known break {fit.config.breakpoint:g}"
            if not e["changepoint"]
            else "no change point inside the run"
            if e["verdict"] == "no change point"
            else f"change point {e['changepoint']['mean']:.0f} [{e['changepoint']['hdi'][0]:.0f}, "
            f"{e['changepoint']['hdi'][1]:.0f}]"
        )
        exists = (
            f"; a break at all: BF(change point : line) = {e['bf_changepoint_vs_line']:.3g}, Davies' test "
            f"p = {e['davies']['p_value']:.2g}"
            if e.get("bf_changepoint_vs_line") is not None and e.get("davies")
            else ""
        )
        verdicts.append(
            f"{level}: {e['verdict']} ({e['reason']}); {where}; late gain {format_interval(e['late_gain'])} "
            f"(94 % upper bound {e['late_gain_upper']:.3f}); late/early slope {format_interval(ratio, 2)}{exists}; "
            f"{LABELS['headroom_to_max']} {format_interval(e['headroom_to_max'])}."
        )
    verdicts += [f"Caveat: {c}." for c in est["caveats"]]
    out.table(pd.DataFrame(rows), "estimates", f"{spec.title} ({S.HDI_LABEL})")
    tidy = fit.summary()
    out.file("estimates_tidy.csv", tidy.to_csv(index=False, lineterminator="\n"))
    together = est.get("together")
    verdict = est["summary"] + "."
    if reference and "saturation" in reference and fit.config.response == S.F1:
        verdict = _study_sentence(reference["saturation"], est, fit.config.breakpoint) + " " + verdict
    if together:
        verdict += " " + together_sentence(together)
    if reference and "saturation" in reference and fit.config.response == S.F1:
        sat = reference["saturation"]
        split = float(sat["split_step"])
        sd = step_data(ds, response=S.F1, levels=list(est["levels"]), run=kw.get("run"))
        out.table(
            replica.study_check_split(fit, sd, reference, seed=spec.seed, sampler=sampler),
            "published_vs_bayes",
            f"Published split-OLS slopes (split at step {split:g}) next to split OLS on these data and the "
            f"Bayesian split model at step {split:g}",
        )
        if fit.config.breakpoint is None and est["levels"] and all(e["changepoint"] for e in est["levels"].values()):
            cps = ", ".join(f"{lv} {e['changepoint']['mean']:.0f}" for lv, e in est["levels"].items())
            verdicts.append(
                f"Why the change points ({cps}) are not {split:g}: the study split its regression at step {split:g} "
                f"as a test point and did not estimate where the curve bends. A curve that rises over the first "
                f"~10 steps and is flat afterwards gives exactly the published pattern (a shallow early OLS slope "
                f"with a large t over steps 0-{split - 1:g}, a late slope near zero)"
                + (
                    "; on the embedded replica the true bends are at steps 8-10 by construction (docs/data.md), and "
                    "the model finds them there."
                    if fit.data.summary.get("synthetic")
                    else "."
                )
            )
    ylabel = "graded-only mean F1" if fit.config.response == S.F1 else fit.config.response
    band = S.HDI_LABEL
    data = _data_text(fit.data.summary, len(fit.data.steps))
    marks = (
        f"The dashed line is the known break at step {fit.config.breakpoint:g}."
        if fit.config.breakpoint is not None
        else "The dotted line is the posterior mean change point; the lower panels give the change point's "
        "posterior probability by step."
    )
    rope = f"+-{fit.config.rope:g}" + (
        f" or within +-{fit.config.rope_relative:g} x the early gain" if fit.config.rope_relative else ""
    )
    figs = {
        "curves": (
            lambda: plots.plot_plateau(fit, ylabel=ylabel),
            f"{ylabel} by step, one panel per level: observed per-step means (points), the posterior mean curve "
            f"of the {fit.describe_model()} and its {band} band. {marks} {data}",
        ),
        "slopes": (
            lambda: plots.plot_slopes(fit),
            f"Early and late slope per level ({fit.config.response} per step; posterior mean and {band}); the two "
            f"segments are drawn on their own scales, the power of ten is in the axis label. {data}",
        ),
        "plateaued_by": (
            lambda: plots.plot_plateaued_by(fit),
            f"Posterior probability that each level has plateaued by step t: change point at or before t and the "
            f"flat ({FLAT_DEFINITION}; {rope}). {data}",
        ),
        "ppc": (
            lambda: plots.plot_ppc(fit, seed=spec.seed),
            f"Posterior predictive check: observed per-step means (points) against the {band.replace('HDI', '')}"
            f"predictive interval (band: the mean curve plus the per-step noise); the legend gives the share "
            f"inside, about 94 % for a calibrated model. {data}",
        ),
    }
    for name in spec.figures:
        if name in figs:
            make, caption = figs[name]
            out.figure(make, name, caption)
    results: dict[str, Any] = {"plateau": est}
    if "ppc" in spec.figures:
        ppc = plots.ppc_data(fit, seed=spec.seed)
        results["ppc_coverage"] = ppc.groupby("level")["covered"].mean().to_dict()
    if "loo" in spec.figures:
        models = tuple(m.get("compare", ["hinge", "linear", "exponential"]))
        progress_.stage("LOO comparison")
        table, fits = compare_plateau_models(ds, models=models, seed=spec.seed, sampler=sampler, **kw)
        loo = plots.loo_data(table)
        out.table(loo, "loo", "LOO comparison (ArviZ)")
        out.figure(
            lambda: plots.plot_loo(table),
            "loo",
            f"Leave-one-step-out comparison of {', '.join(loo['model'])}: ELPD per model +- its standard error "
            "(circles) and the best model's ELPD minus each model's difference +- the difference's standard error "
            "(triangles); exact LOO where the model allows it, else PSIS (crosses: Pareto k > 0.7, unreliable). "
            f"{data}",
        )
        for name, idata in fits.items():
            if name != "hinge":
                out.idata(idata, f"alternative_{name}")
        results["loo"] = json_safe(loo.to_dict(orient="records"))
        methods = ", ".join(f"{r.model} {r.loo_method}" for r in loo.itertuples())
        verdict += (
            f" LOO prefers {loo['model'].iloc[0]} (ELPD difference to the next {loo['elpd_diff'].iloc[1]:.1f} "
            f"+- {loo['dse'].iloc[1]:.1f}; {methods})."
            + (f" Caveat: {table.attrs['caveat']}." if table.attrs.get("caveat") else "")
        )
    return {"verdict": verdict, "details": verdicts, "diagnostics": fit.diagnostics, "results": results}


def _data_text(summary: dict[str, Any], n_steps: int | None) -> str:
    """ "Data: 42,511 graded trials over 91 steps." from a data summary (what is known)."""
    n, graded = summary.get("n_trials"), summary.get("n_graded")
    trials = f"{int(n):,} trials" + (f" ({int(graded):,} graded)" if graded is not None else "") if n else ""
    parts = [trials, f"{n_steps} steps" if n_steps else ""]
    text = " over ".join(p for p in parts if p)
    return f"Data: {text}." if text else ""


def _study_sentence(sat: dict[str, Any], est: dict[str, Any], breakpoint: float | None) -> str:
    """One sentence: what the study said about the plateau and whether these verdicts agree."""

    levels = [lv for lv in est["levels"] if lv in sat["levels"]]
    # the study said "flat": only a flat late segment agrees ("slowed" is not shown flat)
    flat = [lv for lv in levels if est["levels"][lv]["verdict"] in FLAT_LATE_VERDICTS]
    said = (
        f"The study found every level statistically flat after step {sat['split_step']} (split OLS, late "
        f"slopes consistent with zero)"
    )
    how = "with the study's break" if breakpoint is not None else "with the break estimated"
    if levels and len(flat) == len(levels):
        return f"{said}; the Bayesian analysis {how} agrees: all {len(levels)} levels are flat late."
    others = ", ".join(f"{lv} {est['levels'][lv]['verdict']}" for lv in levels if lv not in flat)
    return (
        f"{said}; the Bayesian analysis {how} does not confirm it for every level: {len(flat)} of {len(levels)} "
        f"flat late ({', '.join(flat) or 'none'}; {others})."
    )


def _diagnose(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:

    config = analysis_config(spec)
    assert isinstance(config, CardinalityConfig)
    diag = diagnose_cardinality(ds, config, seed=spec.seed)
    out.idata(diag.idata, "cardinality_trends")
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
    out.table(pd.DataFrame(rows), "cardinality", "Precision, recall and cardinality per level")
    if reference and "precision_recall" in reference:
        table = replica.study_check_cardinality(diag, reference)
        out.table(table, "published_vs_bayes", "Published precision/recall next to the estimates")
    if "cardinality" in spec.figures:
        out.figure(
            lambda: plots.plot_cardinality(diag),
            "cardinality",
            f"Left: precision and recall per level at the first step (open) and the last step (filled), posterior "
            f"mean and {S.HDI_LABEL} of one-series change-point trends. Right: predicted over gold "
            f"locations per answer (1: as many predicted as gold). {_data_text(dict(ds.attrs), ds.sizes.get(S.STEP))}",
        )
    kinds = [f"{lvl}: {num['verdict']}" for lvl, num in diag.numbers["levels"].items()]
    verdict = "; ".join(kinds) + "."
    return {
        "verdict": verdict,
        "details": list(diag.verdicts().values()),
        "diagnostics": diag.diagnostics,
        "results": json_safe(diag.to_dict()),
    }


def _series(spec: Spec, series: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:

    config = analysis_config(spec)
    assert isinstance(config, SeriesConfig)
    runs = list(config.reliability.runs) if config.reliability.runs else None
    pass1, passk, entropy = config.reliability.pass1, config.reliability.passk, config.entropy.entropy
    rel = diagnose_reliability(series, config.reliability, seed=spec.seed)
    out.idata(rel.idata, "reliability_trends")
    parts = [rel]
    ent = None
    if entropy in series:
        ent = diagnose_entropy(series, config.entropy, seed=spec.seed)
        out.idata(ent.idata, "entropy_trends")
        parts.append(ent)
    k = rel.numbers.get("k") or "k"
    rows = []
    for run, num in rel.numbers["runs"].items():
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
            e = ent.numbers["runs"][run]
            row.update(
                {
                    "entropy start": interval_cell(e[entropy]["start"]),
                    "entropy end": interval_cell(e[entropy]["end"]),
                    "entropy verdict": e["verdict"],
                }
            )
        rows.append(row)
    out.table(pd.DataFrame(rows), "reliability_entropy", "Reliability (pass@1), capability (pass@k), entropy")
    ref_runs = config.reference_runs
    if reference and ref_runs and runs:
        trends = [("reward", pass1, rel), ("pass_at_8", passk, rel), ("entropy", entropy, ent)]
        table = replica.study_check_series(reference, runs, list(ref_runs), trends)
        if len(table):
            out.table(
                table,
                "published_vs_bayes",
                "Published figures (read from the study's plots, +-0.01) next to the estimates",
            )
    trend = f"the fitted trend (posterior mean and {S.HDI_LABEL} band of a one-series change-point fit)"
    runs_text = ", ".join(str(r) for r in (runs or series[S.RUN].values))
    if "pass_at_k" in spec.figures:
        out.figure(
            lambda: plots.plot_pass_at_k(series, rel, pass1=pass1, passk=passk),
            "pass_at_k",
            f"pass@1 (mean reward, reliability) and pass@{k} (capability) by step, one panel per run ({runs_text}): "
            f"logged per-step values (thin lines) and {trend}.",
        )
    if "entropy" in spec.figures and ent is not None:
        out.figure(
            lambda: plots.plot_entropy(series, ent, entropy=entropy),
            "entropy",
            f"Policy entropy by step, one panel per run ({runs_text}): logged per-step values (thin lines) and "
            f"{trend}.",
        )
    verdict = (
        "; ".join(
            f"{run}: {num['verdict']}" + (f", {ent.numbers['runs'][run]['verdict']}" if ent else "")
            for run, num in rel.numbers["runs"].items()
        )
        + "."
    )

    diags = [p.diagnostics for p in parts]
    details = [v for p in parts for v in p.verdicts().values()]
    results = {p.name: p.to_dict() for p in parts}
    if config.plateau is not None:
        after = float(config.plateau.breakpoint or 0)
        fit = fit_plateau(series, config.plateau, run=config.plateau_run, seed=spec.seed)
        out.idata(fit.idata, "plateau_after_fit")
        e = next(iter(fit.estimands["levels"].values()))
        read_flat = any(r.get("reward_plateau_after_step") == after for r in (reference or {}).get("runs", []))
        said = f" The study read it as flat after step {after:g} (from its plot, +-0.01)." if read_flat else ""
        sentence = (
            f"Did {config.plateau_run}'s {pass1} plateau after step {after:g}? {e['verdict']} ({e['reason']}); "
            f"late gain {format_interval(e['late_gain'])}, 94 % upper bound {e['late_gain_upper']:.3f}; model: "
            f"{fit.describe_model()}.{said}"
        )
        verdict = sentence + " " + verdict
        details.insert(0, sentence)
        diags.append(fit.diagnostics)
        results["plateau_after"] = fit.to_dict()
    if config.components is not None:
        comp, sentence = _components_section(spec, series, config.components, reference, trend, out)
        verdict = f"{verdict} {sentence}"
        details.extend(comp.verdicts().values())
        diags.append(comp.diagnostics)
        results["components"] = comp.to_dict()
    diagnostics = merge_diagnostics(diags)
    return {"verdict": verdict, "details": details, "diagnostics": diagnostics, "results": json_safe(results)}


def _components_section(
    spec: Spec, series: xr.Dataset, config: ComponentsConfig, reference: dict[str, Any] | None, trend: str, out: _Out
) -> tuple[Any, str]:
    """The reward components' part of a series section: the diagnosis, its table and
    figure, and the sentence for the section's verdict (with what the study said)."""
    comp = diagnose_components(series, config, seed=spec.seed)
    out.idata(comp.idata, "component_trends")
    rope = f"P(|change| < {comp.numbers['rope']:g})"
    rows = [
        {
            "run": run,
            "component": e["component"],
            "start": interval_cell(e["start"]),
            "end": interval_cell(e["end"]),
            "change": interval_cell(e["change"]),
            rope: e["p_in_rope"],
            **({"share of reward change": interval_cell(e["share_of_reward_change"])} if config.weights else {}),
            "verdict": e["verdict"],
        }
        for run, num in comp.numbers["runs"].items()
        for e in num.values()
        if isinstance(e, dict) and "component" in e
    ]
    out.table(pd.DataFrame(rows), "reward_components", "Reward components: start, end and change of each")
    if "components" in spec.figures:
        out.figure(
            lambda: plots.plot_components(series, comp),
            "components",
            f"Reward components and the reward by step, one panel per run ({', '.join(comp.numbers['runs'])}): "
            f"logged per-step values (thin lines) and {trend}.",
        )
    said = next((f" The study: {r['note']}." for r in (reference or {}).get("runs", []) if r.get("reward_formula")), "")
    return comp, "Reward components: " + " ".join(comp.verdicts().values()) + said


def _transfer(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:

    config = analysis_config(spec)
    assert isinstance(config, TransferConfig)
    fit = fit_transfer(ds, config, seed=spec.seed)
    est = fit.to_dict()
    out.idata(fit.idata, "transfer_fit")
    ref = est["reference"]
    rows = []
    for arm in est["arms"]:
        ini, cross, last = est["initial"][arm], est["crossover_step"][arm], est["last_step"][arm]
        rows.append(
            {
                "arm": arm,
                f"initial gap (first {est['first_steps']} steps), all-rollout": interval_cell(ini["delta_all_rollout"]),
                "P(initial gap > 0)": ini["p_positive"],
                "initial gap, graded-only": interval_cell(ini["delta_graded_only"]),
                "initial gap, ungraded rate": interval_cell(ini["delta_ungraded_rate"]),
                "crossover step": interval_cell(cross),
                "P(no crossover)": cross["p_no_crossover"],
                f"gap at step {last['step']}, all-rollout": interval_cell(last["delta_all_rollout"]),
            }
        )
    details = list(fit.verdicts().values())
    out.table(pd.DataFrame(rows), "transfer", f"Gaps to the reference arm {ref}")
    if reference and "transfer" in reference:
        table = replica.study_check_transfer(fit, reference)
        out.table(table, "published_vs_bayes", "Published transfer table next to the estimates")
    if "transfer" in spec.figures:
        summ = fit.data.summary
        out.figure(
            lambda: plots.plot_transfer(fit),
            "transfer",
            f"Top: per-arm population curves ({', '.join(map(str, fit.data.arms))}) of the all-rollout reward, the "
            f"graded-only reward and the ungraded rate: posterior mean, {S.HDI_LABEL} band, and "
            f"the empirical per-step values (points). Bottom: each arm's gap to the reference arm {ref} with its "
            f"{S.HDI_LABEL}; the shaded span on the all-rollout gap is the crossover step's "
            f"{S.HDI_LABEL}. Data: {summ.get('n_trials', '?')} trials ({summ.get('n_graded', '?')} "
            f"graded) on {summ.get('n_tasks', '?')} tasks, steps {summ['steps'][0]}-{summ['steps'][1]}.",
        )
    verdict = " ".join(details + (_lr_arm_reading(fit) if reference else []))
    return {"verdict": verdict, "details": details, "diagnostics": fit.diagnostics, "results": json_safe(est)}


def _lr_arm_reading(fit: TransferFit) -> list[str]:
    """What the study said of the SWE-Gym LR arm and whether the fit's decision agrees: the
    study names the arm (s85 at LR 1.2e-5) and gives no figure for it; from the s85 arm it
    concludes that an already-RL-trained start loses more than it gains on a new pool, an
    argument for a lower LR. Empty when the fit has no LR arm against s85."""
    arm = LR_ARM
    if arm not in fit.data.arms or fit.config.reference != "s85":
        return []
    d = fit.decisions()[arm]
    agrees = d["end"] == "behind"
    return [
        "The study publishes no figure for this arm (its values here are assumed, docs/data.md); from the s85 "
        "arm it concludes that an already-RL-trained start loses more than it gains on a new pool, an argument "
        "for a lower LR on such a start. "
        + (
            "The fit agrees in direction: at LR 1.2e-5 the s85 start ends behind the 8e-6 arm"
            + ("" if d["crossover"] is None else f", s85 leading from step {d['crossover']:.0f} on")
            + "."
            if agrees
            else f"The fit does not show the higher LR losing more: at the last step the arm is {d['end']} with s85."
        )
    ]


def _compare(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:
    """Recipe arms by their saturation curves: the per-arm ceilings, the contrasts with the
    reference (flagged when a declared confounder is not matched), "will more steps pay?",
    and with the spec's ``backtest`` / ``families`` the checked forecast and the curve-family
    comparison."""
    config = analysis_config(spec)
    assert isinstance(config, SigmoidConfig)
    metrics = load_metrics(spec) if config.x == "compute" and config.metric is None else None
    arms = list(config.arms) if config.arms else None
    if config.metric is not None:  # a logged per-step metric: each run an arm
        compute = config.compute if config.x == "compute" else None
        data = series_arm_steps(ds, config.metric, arms, compute=compute)
    else:
        data = arm_steps(ds, arms, metrics=metrics, compute=config.compute, paired=config.paired)
    fit = fit_sigmoid(data, config, seed=spec.seed)
    est = fit.to_dict()
    axis, unit = axis_words(data)
    summ = est["data"]
    data_words = f"{summ['series']} as logged per step" if summ.get("series") else f"{summ['n_trials']} trials"
    out.idata(fit.idata, "sigmoid_fit")
    ref = est["reference"]
    rows = []
    for arm, e in est["arms"].items():
        f = est["forecast"][arm]
        rows.append(
            {
                "arm": arm,
                "asymptote": interval_cell(e["asymptote"]),
                "efficiency": interval_cell(e["efficiency"]),
                f"midpoint ({unit})": interval_cell(e["midpoint"]),
                "at its last step": interval_cell(e["last"]),
                "last step": e["last"]["step"],
                "headroom to ceiling": interval_cell(e["headroom_to_ceiling"]),
                f"gain over the next {f['horizon']} steps": interval_cell(f["gain"]),
                f"P(gain > {f['delta']:g})": f["p_gain"],
                **{k: v for k, v in config.arm_attrs.get(arm, {}).items()},
            }
        )
    out.table(pd.DataFrame(rows), "arms", "Saturation curve per arm (Khatri et al. 2025 sigmoid)")
    crows = []
    for arm, c in est["contrasts"].items():
        crows.append(
            {
                "arm": arm,
                "asymptote difference": interval_cell(c["asymptote_diff"]),
                "P(asymptote higher)": c["p_asymptote_higher"],
                "efficiency difference": interval_cell(c["efficiency_diff"]),
                "midpoint ratio": interval_cell(c["midpoint_ratio"]),
                "P(halfway sooner)": c["p_midpoint_lower"],
                f"gap at step {c['last_diff']['step']}": interval_cell(c["last_diff"]),
                "confounded": "not checked" if c["confounded"] is None else ("yes" if c["confounded"] else "no"),
            }
        )
    out.table(pd.DataFrame(crows), "contrasts", f"Contrasts with the reference arm {ref}")
    details = list(fit.verdicts().values())
    results: dict[str, Any] = {"compare": json_safe(est)}
    diags = [fit.diagnostics]
    if spec.model.get("backtest"):
        bt = backtest_sigmoid(data, int(spec.model["backtest"]), config, seed=spec.seed)
        caption = f"Back-test: fitted on each arm's first {bt.fit_steps} steps, its later steps predicted"
        out.table(bt.frame, "backtest", caption)
        details += [f"Back-test: {line}." for line in bt.sentences()]
        results["backtest"] = json_safe(bt.to_dict())
        diags.append(bt.fit.diagnostics)
    if spec.model.get("families"):
        fam = compare_curve_families(data, fit, config=config, seed=spec.seed)
        for arm, table in fam.tables.items():
            out.table(table.reset_index(names="family"), f"families_{arm}", f"Curve families for {arm} (LOO)")
        details += [f"{line}." for line in fam.sentences()]
        results["families"] = json_safe(fam.to_dict())
    if "saturation" in spec.figures:
        out.figure(
            lambda: plots.plot_saturation_curves(fit),
            "saturation",
            f"Saturation curve per arm (x = {axis}): per-step {config.metric or 'all-rollout reward'} (points), "
            f"the fitted sigmoid's "
            f"posterior mean "
            f"and {S.HDI_LABEL} band over the data (solid) and over the next {config.horizon} steps (dashed: an "
            f"extrapolation), each arm's posterior mean ceiling (dotted); right panel: each ceiling (the "
            f"asymptote) with its {S.HDI_LABEL}. Data: {data_words}, "
            f"{est['likelihood']} likelihood.",
        )
    verdict = " ".join(details)
    return {"verdict": verdict, "details": details, "diagnostics": merge_diagnostics(diags), "results": results}


RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {
    "plateau": _plateau_section,
    "diagnose": _diagnose,
    "series": _series,
    "transfer": _transfer,
    "compare": _compare,
}


# ------------------------------------------------------------------ running
def _reference(spec: Spec) -> tuple[dict[str, Any] | None, str]:

    ref = spec.data.get("reference")
    if not ref:
        return None, ""
    if ref == "embedded":
        data = load_reference()
    else:
        path = data_path(ref, spec.path)
        assert path is not None
        data = json.loads(path.read_text())
    return data, hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


#: the largest cache record (section.json) read; a real one is a few KB
MAX_RECORD_BYTES = 16 << 20
#: the report's own files in the output root (no analysis directory may take these names)
TOP_LEVEL = ("REPORT.md", "REPORT.html", "results.json", "run.json", "specs")


def _data_paths(spec: Spec, key_name: str, data: str | Path | None) -> list[Path]:
    """The spec file and the files or directories its ``[data]`` names (``data`` replacing
    the ``key_name`` entry), embedded data left out."""
    paths = [spec.path]
    for key, value in spec.data.items():
        if key == "phase":
            continue
        if key == key_name and data is not None:
            value = str(data)
            if not value.startswith("embedded:"):
                paths.append(Path(value))
            continue
        if key == "reference" and value == "embedded":
            continue
        path = data_path(str(value), spec.path)
        if path is not None:
            paths.append(path)
    return paths


def _input_files(paths: Sequence[Path]) -> frozenset[Path]:
    """Every file (symlinks resolved) among or under ``paths``: what no output may replace."""
    files: set[Path] = set()
    for path in paths:
        if path.is_dir():
            files.update(f.resolve() for f in path.rglob("*") if not f.is_dir())
        else:
            files.add(path.resolve())
    return frozenset(files)


def _confined(rel: Any, out_dir: Path, section_dir: Path) -> bool:
    """Whether a path from a cache record is a relative path inside the section's directory."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel:
        return False
    parts = Path(rel).parts
    if Path(rel).is_absolute() or ".." in parts:
        return False
    return inside(out_dir / rel, section_dir)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_record(old: Section, out_dir: Path, section_dir: Path) -> None:
    """Raise ValueError unless a parsed cache record has the schema's types and every path
    it names is a file of its own section recorded with a hash."""
    texts = ("name", "kind", "title", "question", "verdict", "key", "synthetic", "fitted_on")
    bad = [k for k in texts if not isinstance(getattr(old, k), str)]
    lists = ("details", "tables", "figures", "fits", "warnings", "notes")
    bad += [k for k in lists if not _strings(getattr(old, k))]
    bad += [k for k in ("diagnostics", "results", "captions", "written") if not isinstance(getattr(old, k), dict)]
    bad += [k for k in ("converged", "cached") if not isinstance(getattr(old, k), bool)]
    if not isinstance(old.seconds, int | float) or isinstance(old.seconds, bool):
        bad.append("seconds")
    if bad:
        raise ValueError(f"field(s) of the wrong type: {', '.join(bad)}")
    if not all(isinstance(v, str) and len(v) == 64 for v in old.written.values()):
        raise ValueError("a file hash is not a sha256")
    for rel in old.written:
        if not _confined(rel, out_dir, section_dir):
            raise ValueError(f"file {rel!r} is not inside {section_dir}")
    needed = [*old.tables, *old.figures, *old.fits]
    needed += [str(Path(t).with_suffix(ext).as_posix()) for t in old.tables for ext in (".csv", ".tex")]
    needed += [str(Path(f).with_suffix(".pdf").as_posix()) for f in old.figures]
    missing = [rel for rel in needed if rel not in old.written]
    if missing:
        raise ValueError(f"file {missing[0]!r} has no recorded hash")


def _load_record(record: Path, out_dir: Path) -> tuple[Section | None, str]:
    """The cache record of an analysis if it exists and passes :func:`_check_record`; else
    None and a one-line note (empty when there is no record at all)."""
    if not record.exists() and not record.is_symlink():
        return None, ""
    try:
        if record.is_symlink() or not record.is_file():
            raise ValueError("not a regular file")
        if record.stat().st_size > MAX_RECORD_BYTES:
            raise ValueError(f"larger than {MAX_RECORD_BYTES >> 20} MB")
        obj = json.loads(record.read_bytes().decode())
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        old = Section(**obj)
        _check_record(old, out_dir, record.parent)
    except (OSError, TypeError, ValueError) as err:
        reason = " ".join(str(err).split())[:200]
        return None, f"the cache record {record} was not trusted ({reason}); the analysis was refitted"
    return old, ""


def _changed_file(old: Section, out_dir: Path) -> str:
    """The first file of a cache record that is missing, not a regular file or not the bytes
    written (its sha256 differs); empty when all are intact."""
    for rel, digest in old.written.items():
        path = out_dir / rel
        try:
            if path.is_symlink() or not path.is_file():
                return f"{rel} is missing or not a regular file"
            if _sha256(path) != digest:
                return f"{rel} is not the file written (sha256 differs)"
        except OSError as err:
            return f"{rel}: {err.strerror or err}"
    return ""


def _sweep(old: Section, out_dir: Path, section_dir: Path, inputs: frozenset[Path]) -> None:
    """Delete the files a previous run of the analysis wrote (its manifest, ``old.written``):
    only regular files inside the section's directory, never an input, and only when they
    still hold the bytes written (a file changed since is no longer the report's)."""
    for rel, digest in old.written.items():
        path = out_dir / rel
        try:
            if path.is_symlink() or not path.is_file() or not _confined(rel, out_dir, section_dir):
                continue
            if path.resolve() in inputs or _sha256(path) != digest:
                continue
            path.unlink()
        except OSError:
            continue


def user_data(data: str | Path | None) -> bool:
    """Whether ``data`` (a report's ``--data``) is the user's own, not an embedded data set."""
    return data is not None and not str(data).startswith(EMBEDDED)


def run_analysis(spec: Spec, out_dir: Path, *, data: str | Path | None = None, force: bool = False) -> Section:
    """Run one analysis (or reuse its cached outputs) and write its files under
    ``out_dir/<safe name>`` (:func:`saturation.io.safe_name`).

    The cache record (``section.json``) is reused only when it passes its schema, every file
    it names lies inside the analysis' directory, each file still has the sha256 recorded
    at write, and the cache key is unchanged; otherwise the analysis is refitted (with a
    one-line note when a record was there but not trusted). Before a refit, the files the
    previous run recorded (its manifest) are deleted, and only those.
    """
    key_name = "series" if spec.kind == "series" or "series" in spec.data else "trials"
    if user_data(data):
        # the user's data in a shipped spec: the study's published figures, its prose and its
        # title are the study's, never said of someone else's run
        title, question = GENERIC[spec.kind]
        own = {k: v for k, v in spec.data.items() if k != "reference"}
        spec = replace(spec, title=f"{title} ({spec.name} on {Path(str(data)).name})", question=question, data=own)
    reference, ref_hash = _reference(spec)
    metrics_hash = data_hash(spec, "metrics") if "metrics" in spec.data else ""
    parts = [spec.canonical(), data_hash(spec, key_name, data), ref_hash, metrics_hash, __version__]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    section_dir = out_dir / safe_name(spec.name)
    record = section_dir / "section.json"
    old, note = _load_record(record, out_dir)
    if old is not None and old.key == key and not force:
        changed = _changed_file(old, out_dir)
        if not changed:
            old.cached = True
            old.notes = []
            return old
        note = f"the cached files of {spec.name!r} changed ({changed}); the analysis was refitted"
    inputs = _input_files(_data_paths(spec, key_name, data))
    progress_.stage("load data")
    ds = load_data(spec, key_name, data)
    out = _Out(out_dir, spec.name, inputs)
    if old is not None:
        _sweep(old, out_dir, out.dir, inputs)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        progress_.stage("fit")
        res = RUNNERS[spec.kind](spec, ds, reference, out)
    caught_msgs = list(
        dict.fromkeys(
            str(w.message).strip()
            for w in caught
            if issubclass(w.category, UserWarning) and not str(w.message).startswith(HARMLESS_WARNINGS)
        )
    )
    section = Section(
        name=spec.name,
        kind=spec.kind,
        title=spec.title,
        question=spec.question,
        verdict=res["verdict"],
        # trials of other phases left out (aggregate.select_phase) and a logged series of a run with
        # dynamic sampling (its reward metrics are of the kept groups) are said first, never silently
        details=[f"{note[0].upper()}{note[1:]}." for note in [phase_note(ds)] if note]
        + [f"WARNING: {note}." for note in (_sampling_notes(spec, ds) if S.TRIAL not in ds.dims else [])]
        + list(res["details"]),
        diagnostics=json_safe(res["diagnostics"]),
        converged=bool(res["diagnostics"]["converged"]),
        tables=out.tables,
        figures=out.figures,
        fits=out.fits,
        results=json_safe(res["results"]),
        warnings=caught_msgs,
        seconds=round(time.perf_counter() - start, 2),
        key=key,
        synthetic=str(ds.attrs.get(S.ATTR_SYNTHETIC, "")),
        fitted_on=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        captions=out.captions,
        written=out.written,
        notes=[note] if note else [],
    )
    out.guard(record)
    write_atomic(record, json.dumps(asdict(section), indent=1) + "\n")
    return section


def _sampling_notes(spec: Spec, series: xr.Dataset) -> list[str]:
    """Dynamic-sampling warnings for the runs the spec analyses: its ``arms`` or ``runs``
    with its ``components_runs`` and ``plateau_run``; every run of the series when it names
    neither ``arms`` nor ``runs`` (then it analyses them all)."""
    primary = spec.model.get("arms") or spec.model.get("runs")
    if not primary:
        return dynamic_sampling_notes(series)
    extra = [
        *(spec.model.get("components_runs") or []),
        *([spec.model["plateau_run"]] if "plateau_run" in spec.model else []),
    ]
    return dynamic_sampling_notes(series, sorted({str(r) for r in [*primary, *extra]}))


def _analysis_task(task: dict[str, Any]) -> Section:
    """One analysis as a self-contained task (for :func:`saturation.cluster.map_tasks`)."""

    return run_analysis(load_spec(task["spec"]), Path(task["out"]), data=task["data"], force=task["force"])


@dataclass
class Report:
    """What :func:`run_report` wrote."""

    out: Path
    sections: list[Section]
    seconds: float
    #: analyses that failed on the cluster after retries: {"task": name, "error": ...}
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def converged(self) -> bool:
        return all(s.converged for s in self.sections)


def run_report(
    specs: Sequence[str | Path] | None = None,
    *,
    data: str | Path | None = None,
    out: str | Path = "report",
    force: bool = False,
    progress: bool | None = None,
    log: Callable[[str], None] | None = None,
    scheduler: str | None = None,
    workers: int = 2,
) -> Report:
    """Run analysis specs (default: every spec in ``models/``) and write the report.

    ``data`` replaces every spec's data source (trials, or series for series specs).
    ``scheduler``: None runs the analyses one after the other in this process; ``"local"``
    runs them as tasks on a dask LocalCluster with ``workers`` processes; an address
    (``tcp://host:port``) sends them to an existing cluster (its workers must see ``out``).
    An analysis that fails on the cluster is retried, then listed in ``Report.failures``
    and in REPORT.md. Returns the :class:`Report`; REPORT.md and results.json are in ``out``.
    """
    paths: list[str | Path] = list(specs) if specs else [default_spec_dir()]
    inputs = [p for p in paths if is_data(p)]
    if inputs and data is not None:
        raise ValueError("--data replaces the data of specs: give specs with it, or data paths without it")
    paths = [p for p in paths if not is_data(p)]
    out = Path(out)
    loaded = load_specs(paths) if paths else []
    check_outputs(loaded, out, data)
    skipped: list[dict[str, str]] = []
    if inputs:
        # the user's own runs: the analyses their data support, as specs under out/specs
        plan = plan_report(inputs, out)
        planned = load_specs(list(plan.specs)) if plan.specs else []
        check_outputs([*loaded, *planned], out, None)
        loaded, skipped = [*loaded, *planned], plan.skipped
    out.mkdir(parents=True, exist_ok=True)
    with _lock(out):
        return _run_report(
            loaded,
            out,
            data=data,
            force=force,
            progress=progress,
            log=log,
            scheduler=scheduler,
            workers=workers,
            skipped=skipped,
            skippable=frozenset(s.name for s in loaded if s.path.resolve().parent == (out / "specs").resolve()),
        )


LOCK_NAME = ".saturation-report.lock"


def _failure(task: str, err: BaseException, *, skipped: bool) -> dict[str, str]:
    """One line for an analysis that did not run: its name, ``status`` ("skipped": it does
    not fit the user's data; "failed": the data its spec names did not fit it) and the reason."""
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    line = " ".join(text.split())
    return {"task": task, "status": "skipped" if skipped else "failed", "error": line[:400]}


def check_outputs(specs: Sequence[Spec], out: Path, data: str | Path | None = None) -> None:
    """Before anything is read or written, refuse (:class:`~saturation.io.OutputError`) a
    report whose outputs would collide: two analyses whose names give one directory
    (``a/b`` and ``a_b``; compared case-folded), an analysis directory named like one of the
    report's own files, an input that is one of the report's top-level files, or ``out``
    inside a data directory (the next run would read the report's files as data)."""
    dirs: dict[str, str] = {name.casefold(): "(the report's own file)" for name in (*TOP_LEVEL, LOCK_NAME)}
    for spec in specs:
        folded = safe_name(spec.name).casefold()
        if folded in dirs:
            raise OutputError(
                f"{spec.path}: analysis {spec.name!r} would write the directory {out / safe_name(spec.name)}, "
                f"taken by {dirs[folded]}; give it another [analysis] name"
            )
        dirs[folded] = f"analysis {spec.name!r} ({spec.path})"
    top = {(out / name).resolve() for name in TOP_LEVEL}
    for spec in specs:
        key_name = "series" if spec.kind == "series" or "series" in spec.data else "trials"
        for path in _data_paths(spec, key_name, data):
            if path.resolve() in top:
                raise OutputError(f"{path}: an input of {spec.path} is an output of the report; choose another --out")
            if path.is_dir() and inside(out, path):
                raise OutputError(
                    f"--out {out} is inside the data directory {path} of {spec.path}: the next run would read "
                    "the report's own files as data; choose another --out"
                )


@contextlib.contextmanager
def _lock(out: Path) -> Iterator[None]:
    """Hold ``out/.saturation-report.lock`` (created exclusively, holding our pid) while the
    report is written: a second report into the same directory fails with a message instead
    of corrupting the first one's files. A lock left by a process that no longer runs is
    taken over."""
    path = out / LOCK_NAME
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                pid = int(path.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and _alive(pid):
                raise ValueError(
                    f"{out}: another saturation report (pid {pid}) is writing this directory; wait for "
                    f"it or choose another --out"
                ) from None
            path.unlink(missing_ok=True)  # stale
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        break
    else:  # pragma: no cover - lost a race twice
        raise ValueError(f"{out}: could not lock the directory")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's live process
        return True
    return True


def _run_report(
    loaded: Sequence[Any],
    out: Path,
    *,
    data: str | Path | None,
    force: bool,
    progress: bool | None,
    log: Callable[[str], None] | None,
    scheduler: str | None,
    workers: int,
    skipped: Sequence[dict[str, str]] = (),
    skippable: frozenset[str] = frozenset(),
) -> Report:
    start = time.perf_counter()
    sections: list[Section] = []
    failures: list[dict[str, str]] = list(skipped)
    with Progress(len(loaded), "report", enabled=progress) as bar:

        def logged(section: Section) -> None:
            if not log:
                return
            state = f"cached (fitted in {section.seconds:.1f} s)" if section.cached else f"{section.seconds:.1f} s"
            flag = "" if section.converged else "  ** NOT CONVERGED **"
            text = f"  {section.name} ({section.kind}): {state}{flag}"
            text += "".join(f"\n    note: {n}" for n in section.notes)
            # on a terminal, above the live display (never on the bar's line)
            if bar.live:
                bar.log(text)
            else:
                log(text)

        if scheduler is None:
            for spec in loaded:
                bar.set_item(spec.name)
                try:
                    sections.append(run_analysis(spec, out, data=data, force=force))
                except OutputError:
                    raise  # an output that would replace an input: nothing of the report may be written
                except (ValueError, KeyError, TypeError, OSError, IndexError) as err:
                    # one analysis that cannot run on these data does not take the others down:
                    # it is listed with its reason (skipped on the user's data, failed on the
                    # data its spec names)
                    failures.append(_failure(spec.name, err, skipped=user_data(data) or spec.name in skippable))
                    if log:
                        log(f"  {spec.name}: {failures[-1]['status'].upper()} ({failures[-1]['error']})")
                else:
                    logged(sections[-1])
                bar.update()
        else:
            bar.set_item(f"{len(loaded)} analyses on the cluster")
            tasks = [
                {
                    "spec": str(spec.path.resolve()),
                    "out": str(out.resolve()),
                    "data": None if data is None else str(Path(data).resolve()),
                    "force": force,
                }
                for spec in loaded
            ]
            sections, failed = map_tasks(
                _analysis_task,
                tasks,
                [spec.name for spec in loaded],
                scheduler=None if scheduler == "local" else scheduler,
                workers=workers,
                progress=lambda done, total: bar.update(done - bar.done),
            )
            failures += [
                {**f, "status": "skipped" if user_data(data) or f["task"] in skippable else "failed"} for f in failed
            ]
            for section in sections:
                logged(section)
            for failure in failures:
                if log:
                    log(f"  {failure['task']}: FAILED ({failure['error']})")
    seconds = time.perf_counter() - start
    report = Report(out, sections, seconds, failures)
    write_report_md(report)
    write_report_html(report)

    # results.json: what the analyses found, byte-identical for the same specs, data, seeds and
    # version (cold or warm compile cache, cached or forced); run.json: what this run did
    write_atomic(
        out / "results.json",
        (
            json.dumps(
                json_safe(
                    {
                        "saturation_version": __version__,
                        "hdi_prob": S.HDI_PROB,
                        "failed": report.failures,
                        "analyses": {
                            s.name: {
                                "kind": s.kind,
                                "title": s.title,
                                "verdict": s.verdict,
                                "converged": s.converged,
                                "diagnostics": s.diagnostics,
                                "results": s.results,
                                "tables": s.tables,
                                "figures": s.figures,
                                "fits": s.fits,
                                "warnings": s.warnings,
                            }
                            for s in sections
                        },
                    }
                ),
                indent=1,
            )
            + "\n"
        ).encode(),
    )
    run = {
        "seconds": round(seconds, 2),
        "analyses": {s.name: {"cached": s.cached, "seconds": s.seconds, "fitted_on": s.fitted_on} for s in sections},
    }
    write_atomic(out / "run.json", (json.dumps(run, indent=1) + "\n").encode())
    return report


def write_report_md(report: Report) -> Path:
    """REPORT.md: contents, then one section per analysis."""

    lines = [
        "# saturation report",
        "",
        f"Generated by saturation {__version__} on {_dt.date.today().isoformat()} "
        f"({run_time_text(report)}; intervals are {int(S.HDI_PROB * 100)} % highest-density intervals).",
        "",
    ]
    synthetic = sorted({s.synthetic for s in report.sections if s.synthetic})
    for note in synthetic:
        lines += [
            f"> **Data note.** {note}. Published figures are shown next to the estimates for comparison; "
            "they are never used as results.",
            "",
        ]
    failed = [f for f in report.failures if f.get("status", "failed") == "failed"]
    skipped = [f for f in report.failures if f.get("status") == "skipped"]
    if failed:
        lines += [
            f"> **ERROR: {len(failed)} analysis(es) failed and are missing from this report:** "
            + "; ".join(markdown_text(f"{f['task']}: {f['error']}") for f in failed),
            "",
        ]
    if skipped:
        lines += [
            f"> **Not in this report ({len(skipped)}): what the data do not support.** "
            + "; ".join(markdown_text(f"{f['task']}: {f['error']}") for f in skipped),
            "",
        ]
    bad = [s.name for s in report.sections if not s.converged]
    if bad:
        lines += [
            f"> **WARNING: {len(bad)} fit(s) did not converge ({markdown_text(', '.join(bad))}). Their numbers are not "
            "trustworthy; see their diagnostics.**",
            "",
        ]
    lines += ["## Contents", ""]
    for i, s in enumerate(report.sections, 1):
        title = markdown_text(s.title).replace("]", "\\]")
        lines.append(f"{i}. [{title}](#{anchor(f'{i} {s.title}')}) - {markdown_text(first_sentence(s.verdict))}")
    lines.append("")
    for i, s in enumerate(report.sections, 1):
        lines += [f"## {i} {markdown_text(s.title)}", ""]
        if s.question:
            lines += [f"**Question.** {markdown_text(s.question)}", ""]
        lines += [f"**Verdict.** {markdown_text(s.verdict)}", ""]
        if s.details:
            lines += [f"- {markdown_text(d)}" for d in s.details] + [""]
        d = s.diagnostics
        state = "converged" if s.converged else "**NOT CONVERGED - do not read these numbers**"
        lines += [
            f"**Diagnostics.** R-hat max {d.get('rhat_max', float('nan')):.3f}, min bulk ESS "
            f"{d.get('ess_bulk_min', float('nan')):.0f}, min tail ESS {d.get('ess_tail_min', float('nan')):.0f}, "
            f"divergences {d.get('divergences', 0)}{nuisance_text(d)}: {state}. "
            f"{fit_time_text(s)}",
            "",
        ]
        if not s.converged:
            th = d.get("thresholds") or {"rhat_max": 1.01, "ess_bulk_min": 400, "divergences": 0}
            lines += [
                "> **WARNING: this fit did not meet the convergence thresholds (R-hat <= "
                f"{th['rhat_max']:g}, bulk ESS >= {th['ess_bulk_min']:g}, no divergences).**",
                "",
            ]
        for w in s.warnings:
            lines += [f"> warning: {markdown_text(w)}", ""]
        for n in s.notes:
            lines += [f"> note: {markdown_text(n)}", ""]
        for k, table in enumerate(s.tables, 1):
            path = report.out / table
            name = Path(table).stem.replace("_", " ")
            lines += [
                f"**Table {i}.{k}: {name}** ([CSV]({Path(table).with_suffix('.csv').as_posix()}), "
                f"[LaTeX]({Path(table).with_suffix('.tex').as_posix()}))",
                "",
                path.read_text(),
                "",
            ]
        for j, fig in enumerate(s.figures, 1):
            caption = markdown_text(figure_caption(s, fig))
            lines += [
                f"![{markdown_text(s.title).replace(']', chr(92) + ']')}: {Path(fig).stem.replace('_', ' ')}]({fig})",
                "",
                f"*Figure {i}.{j}. {caption}* ([PDF]({Path(fig).with_suffix('.pdf').as_posix()}))",
                "",
            ]
        if s.fits:
            lines += ["Fits (ArviZ InferenceData, netCDF): " + ", ".join(f"[{Path(f).name}]({f})" for f in s.fits), ""]
    path = report.out / "REPORT.md"
    write_atomic(path, "\n".join(lines))
    return path
