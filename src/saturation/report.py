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

from saturation import __version__, replica
from saturation import progress as progress_
from saturation import schema as S
from saturation.aggregate import phase_note
from saturation.cluster import map_tasks
from saturation.files import inside
from saturation.io import OutputError, safe_name, write_atomic, write_netcdf
from saturation.models import fit_plateau, fit_transfer
from saturation.models.ahead import CompileAhead
from saturation.models.learning import CardinalityConfig, SeriesConfig, diagnose_cardinality, diagnose_series
from saturation.models.plateau import COMPARED_MODELS, PlateauConfig
from saturation.models.runs import fit_plateau_runs
from saturation.models.sampling import merge_diagnostics, nuisance_text
from saturation.models.sigmoid import SigmoidConfig, fit_sigmoid
from saturation.models.sigmoid import cached_kernel as sigmoid_kernel_of
from saturation.models.transfer import TransferConfig
from saturation.models.transfer import cached_kernel as transfer_kernel_of
from saturation.plan import GENERIC, is_data, plan_report
from saturation.plots import save_figure
from saturation.progress import Progress
from saturation.replica import StudyCheck, load_reference
from saturation.report_html import (
    anchor,
    contents_entry,
    figure_caption,
    fit_time_text,
    run_time_text,
    write_report_html,
)
from saturation.series import dynamic_sampling_notes
from saturation.spec import (
    EMBEDDED,
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
from saturation.summary import first_sentence, json_safe
from saturation.tables import markdown_text, write_tables

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
    #: the answer in one short sentence (the contents' line; the analysis' ``headline()``)
    headline: str = ""


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


def _render(out: _Out, spec: Spec, main: Any, *extras: Any, check: StudyCheck | None = None) -> dict[str, Any]:
    """Write an analysis' InferenceData, tables and the figures the spec asks for, and return
    its answer, details, diagnostics and results: everything is the analysis objects' own
    (``main`` and its sub-analyses ``extras``; the study's check on a replica spec)."""
    parts = [main, *extras]
    for part in parts:
        for name, idata in part.inference_data().items():
            out.idata(idata, name)
    tables = list(main.tables().items())
    tables[1:1] = list(check.tables.items()) if check else []
    tables += [t for part in extras for t in part.tables().items()]
    for name, view in tables:
        out.table(view.frame, name, view.caption)
    out.file("estimates_tidy.csv", main.summary().to_csv(index=False, lineterminator="\n"))
    for part in parts:
        figures = part.figures()
        for name, view in figures.items():  # "curves" asks for every run's curves_<k> too
            if name in spec.figures or name.rsplit("_", 1)[0] in spec.figures:
                out.figure(view.draw, name, view.caption)
    # each answer said once: an analysis whose answer is only its detail sentences (the
    # bullets) gives its headline here, a sub-analysis nothing more
    said = []
    for part in parts:
        answer = part.answer()
        if answer == " ".join(part.details()):  # only the bullets: the headline (a sub-analysis: nothing)
            answer = part.headline() if part is main else ""
        said.append(answer)
    answers = [check.before if check else "", *said, check.after if check else ""]
    results: dict[str, Any] = {}
    for part in parts:
        results.update(part.results())
    diagnostics = [p.diagnostics for p in parts if getattr(p, "diagnostics", None)]
    return {
        "verdict": " ".join(a for a in answers if a),
        "headline": main.headline(),
        "details": [d for p in parts for d in p.details()] + list(check.notes if check else ()),
        "diagnostics": diagnostics[0] if len(diagnostics) == 1 else merge_diagnostics(diagnostics),
        "results": results,
    }


def _plateau_section(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:
    """A plateau spec: one fit, or one per run with ``by = "run"`` (on a Dask LocalCluster,
    or in this process when the report itself runs on a cluster); with the ``loo`` figure
    the comparison with other curves. On a logged series ``response`` may be the key as logged."""
    if "series" in spec.data and "response" in spec.model:
        spec = replace(spec, model={**spec.model, "response": S.metric_variable(ds, spec.model["response"])})
    config = analysis_config(spec)
    assert isinstance(config, PlateauConfig)
    if spec.model.get("by") == "run":
        runs = spec.model.get("runs")
        progress_.stage("fit the runs")
        res = fit_plateau_runs(ds, config, runs=runs, seed=spec.seed, scheduler=_runs_scheduler(ds, runs))
        if not res.fits:
            raise ValueError(f"no run could be fitted: {res.failures}")
        return _render(out, spec, res)
    fit = fit_plateau(ds, config, run=spec.model.get("run"), seed=spec.seed)
    extras = [fit.compare_models(tuple(spec.model.get("compare", COMPARED_MODELS)))] if "loo" in spec.figures else []
    return _render(out, spec, fit, *extras, check=replica.study_check(fit, reference))


def _runs_scheduler(ds: xr.Dataset, runs: list[str] | None) -> str | None:
    """Where a by-run section fits its runs: :data:`RUNS_SCHEDULER`, or this process inside
    a dask worker (the report on a cluster) and for a single run."""
    try:
        from distributed import get_worker

        get_worker()
        return "sync"
    except (ImportError, ValueError):
        pass
    return "sync" if len(runs or np.unique(ds[S.RUN].to_numpy())) < 2 else RUNS_SCHEDULER


def _diagnose(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:
    """A cardinality spec: precision, recall and predicted over gold per level."""
    config = analysis_config(spec)
    assert isinstance(config, CardinalityConfig)
    diag = diagnose_cardinality(ds, config, seed=spec.seed)
    return _render(out, spec, diag, check=replica.study_check(diag, reference))


def _series(spec: Spec, series: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:
    """A series spec: reliability, capability, entropy, the plateau after a known step and
    the reward components of logged per-step series."""
    config = analysis_config(spec)
    assert isinstance(config, SeriesConfig)
    res = diagnose_series(series, config, seed=spec.seed)
    return _render(out, spec, res, check=replica.study_check(res, reference))


def _transfer(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:
    """A transfer spec: every arm's gaps to the reference arm."""
    config = analysis_config(spec)
    assert isinstance(config, TransferConfig)
    fit = fit_transfer(ds, config, seed=spec.seed)
    return _render(out, spec, fit, check=replica.study_check(fit, reference))


def _compare(spec: Spec, ds: xr.Dataset, reference: dict[str, Any] | None, out: _Out) -> dict[str, Any]:
    """Recipe arms by their saturation curves: the per-arm ceilings, the contrasts with the
    reference, "will more steps pay?", and with the spec's ``backtest`` / ``families`` the
    checked forecast and the curve-family comparison (the fit's :meth:`parts`)."""
    config = analysis_config(spec)
    assert isinstance(config, SigmoidConfig)
    metrics = load_metrics(spec) if config.x == "compute" and config.metric is None else None
    fit = fit_sigmoid(ds, config, seed=spec.seed, metrics=metrics)
    return _render(out, spec, fit, *fit.parts())


RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {
    "plateau": _plateau_section,
    "diagnose": _diagnose,
    "series": _series,
    "transfer": _transfer,
    "compare": _compare,
}


# ------------------------------------------------------------------ running
def kernels_of(spec: Spec) -> tuple[str, ...]:
    """The cached numba kernel modules the analysis imports when it fits (models.ahead): the
    transfer's and the saturation curve's, as their fits decide (``cached_kernel`` of
    :mod:`saturation.models.transfer` and :mod:`saturation.models.sigmoid`). No report
    analysis fits pass@k (``saturation diagnose --groups`` does)."""
    if spec.kind not in ("transfer", "compare"):
        return ()
    config = analysis_config(spec)
    assert isinstance(config, TransferConfig | SigmoidConfig)
    module = transfer_kernel_of(config) if isinstance(config, TransferConfig) else sigmoid_kernel_of(config)
    return () if module is None else (module,)


def kernels_ahead(specs: Sequence[Spec]) -> list[str]:
    """The kernel modules the analyses after the first one will import (:func:`kernels_of`),
    in the order they will need them: compiled in a second process while the first analysis
    runs on one core (:class:`~saturation.models.ahead.CompileAhead`). Empty when the first
    analysis needs a kernel itself (its sampler then uses every core: nothing to overlap)."""
    if not specs or kernels_of(specs[0]):
        return []
    return list(dict.fromkeys(m for spec in specs[1:] for m in kernels_of(spec)))


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
    texts = ("name", "kind", "title", "question", "verdict", "headline", "key", "synthetic", "fitted_on")
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


def run_analysis(
    spec: Spec,
    out_dir: Path,
    *,
    data: str | Path | None = None,
    force: bool = False,
    before_fit: Callable[[Spec], None] | None = None,
) -> Section:
    """Run one analysis (or reuse its cached outputs) and write its files under
    ``out_dir/<safe name>`` (:func:`saturation.io.safe_name`). ``before_fit`` is called
    with the spec when the analysis is about to be fitted (not when its cache is reused).

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
        if before_fit is not None:
            before_fit(spec)
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
        headline=res.get("headline") or first_sentence(res["verdict"]),
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

    Parameters
    ----------
    specs : sequence of path, optional
        Spec files (``.toml``) or directories of them, and/or data paths (anything else):
        for data, the analyses it supports are planned and their specs written to
        ``out/specs`` (default: every spec in ``models/``).
    data : path, optional
        Replaces every spec's data source; only with spec paths.
    out : path
        The report directory (default ``report``), created if needed and locked while
        written.
    force : bool
        Refit every analysis instead of reusing its cached outputs.
    progress : bool, optional
        False: no progress display; None or True: a live display on a terminal, plain
        lines otherwise.
    log : callable, optional
        Called with one line of text per analysis (its time, notes, failure).
    scheduler : str, optional
        None (default): in this process; ``"local"``: a dask LocalCluster; an address: an
        existing cluster.
    workers : int
        LocalCluster worker processes (default 2).

    Returns
    -------
    Report
        The sections written, the analyses that failed or were skipped, and the run time.

    Raises
    ------
    ValueError
        If ``data`` is given with data paths, a data path cannot be read, or another
        report is writing ``out``.
    OutputError
        If the report's outputs would collide with each other or with its inputs.
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
            # the kernels of later analyses compile in a second process while the first runs
            with CompileAhead(kernels_ahead(loaded)) as ahead:
                for spec in loaded:
                    bar.set_item(spec.name)
                    try:
                        sections.append(
                            run_analysis(
                                spec,
                                out,
                                data=data,
                                force=force,
                                before_fit=lambda s: ahead.wait_for(kernels_of(s)),
                            )
                        )
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
        question, answer = contents_entry(s)
        label = markdown_text(question).replace("]", "\\]")
        lines.append(f"{i}. [{label}](#{anchor(f'{i} {s.title}')}) - {markdown_text(answer)}")
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
