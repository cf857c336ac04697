"""Many runs at once: one plateau fit per run, fanned out over a Dask cluster.

A sweep (20 seeds or learning rates of one recipe) is a set of independent fits. The step
data of each run are built here, once, in the calling process (small: steps x levels); each
run is fitted in a worker (:func:`saturation.cluster.map_tasks`: a LocalCluster by default,
an existing cluster by address, or this process with ``"sync"``). Every run ends in exactly
one place: its fit, or a failure naming the run and the error (data that cannot be fitted,
a worker that died twice). The verdicts across runs come from each fit's own rule
(:meth:`PlateauFit.verdicts <saturation.models.plateau.PlateauFit.verdicts>`).
"""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import schema as S
from saturation.aggregate import aggregate, select_phase
from saturation.cluster import map_tasks
from saturation.limits import OptionError
from saturation.models.persist import FigureView, FitObject, TableView
from saturation.models.plateau import LABELS, PlateauConfig, PlateauFit, StepData, fit_plateau, step_data
from saturation.models.sampling import merge_diagnostics
from saturation.summary import data_text, interval_cell, json_safe, short_repr

#: the curves of at most this many runs are drawn (every run is in the table)
MAX_RUN_FIGURES = 6


def run_names(data: xr.Dataset) -> list[str]:
    """The runs of trials (``run`` coordinate) or aggregates / series (``run`` dimension), sorted.

    Parameters
    ----------
    data : xarray.Dataset
        Trials, aggregates or a per-step series.

    Returns
    -------
    list of str
        The distinct run names.
    """
    if S.RUN in data.dims or S.RUN in data.coords:
        return sorted(map(str, np.unique(data[S.RUN].to_numpy())))
    return []


def run_seed(seed: int, run: str) -> int:
    """The seed of one run's fit: from ``seed`` and the run's name, so a run gives the same
    numbers whichever other runs are fitted with it.

    Parameters
    ----------
    seed : int
        The call's seed.
    run : str
        The run's name.

    Returns
    -------
    int
        ``seed * 2**32 + crc32(run)``.
    """
    return seed * 2**32 + zlib.crc32(run.encode())


@dataclass
class PlateauRuns(FitObject):
    """Result of :func:`fit_plateau_runs`.

    Parameters
    ----------
    fits : dict of str to PlateauFit
        One fit per run that could be fitted, in run order.
    failures : list of dict
        ``{"run", "error"}`` per run that could not be fitted (bad data, or a task that
        failed after the cluster's retries).
    """

    fits: dict[str, PlateauFit]
    failures: list[dict[str, str]] = field(default_factory=list)

    def __repr__(self) -> str:
        head = f"PlateauRuns({len(self.fits)} run(s) fitted, {len(self.failures)} failed)"
        lines = [
            f"{run}: " + ", ".join(f"{lv} {e.verdict}" for lv, e in fit.levels().items())
            for run, fit in self.fits.items()
        ] + [f"{f['run']}: FAILED {f['error']}" for f in self.failures]
        return short_repr(head, lines)

    def summary(self) -> pd.DataFrame:
        """One row per run and level: the verdict and the numbers behind it.

        Returns
        -------
        pandas.DataFrame
            Columns run, level, verdict, changepoint (mean) with its 94 % HDI, late slope,
            late gain with its 94 % upper bound, P(flat), converged, R-hat max.
        """
        rows = []
        for run, fit in self.fits.items():
            diag = fit.diagnostics
            for level, e in fit.levels().items():
                cp = e.changepoint
                rows.append(
                    {
                        "run": run,
                        "level": level,
                        "verdict": e.verdict,
                        "changepoint": cp.mean if cp else np.nan,
                        "changepoint_hdi_low": cp.hdi[0] if cp else np.nan,
                        "changepoint_hdi_high": cp.hdi[1] if cp else np.nan,
                        "late_slope": e.late_slope.mean,
                        "late_gain": e.late_gain.mean,
                        "late_gain_upper": e.late_gain_upper,
                        "p_flat": e.p_flat,
                        "converged": bool(diag["converged"]),
                        "rhat_max": diag["rhat_max"],
                    }
                )
        return pd.DataFrame(rows)

    def table(self) -> pd.DataFrame:
        """The display table: one row per run and level with the verdict, the change point
        (its 94 % HDI; "none inside the run" when the fit found none), the late gain with its
        94 % upper bound, P(flat) and whether the fit converged."""
        rows = []
        for row in self.summary().itertuples(index=False):
            none = row.verdict == "no change point" or row.changepoint != row.changepoint
            cp = {"mean": row.changepoint, "hdi": [row.changepoint_hdi_low, row.changepoint_hdi_high]}
            rows.append(
                {
                    "run": row.run,
                    "level": row.level,
                    "verdict": row.verdict,
                    "change point": "none inside the run" if none else interval_cell(cp),
                    "late gain": row.late_gain,
                    "late gain 94 % upper": row.late_gain_upper,
                    LABELS["p_flat"]: row.p_flat,
                    "converged": row.converged,
                }
            )
        return pd.DataFrame(rows)

    def tables(self) -> dict[str, TableView]:
        """``runs``: :meth:`table`."""
        return {"runs": TableView(self.table(), f"One plateau fit per run ({S.HDI_LABEL} of the change point)")}

    def figures(self) -> dict[str, FigureView]:
        """``curves_1`` ... : the curves of the first :data:`MAX_RUN_FIGURES` runs."""
        from saturation import plots

        out = {}
        for i, (run, fit) in enumerate(list(self.fits.items())[:MAX_RUN_FIGURES]):
            ylabel = fit.ylabel()
            out[f"curves_{i + 1}"] = FigureView(
                functools.partial(plots.plot_plateau, fit, ylabel=ylabel),
                f"Run {run}: {ylabel} by step, the logged values (points), the posterior mean curve of the "
                f"{fit.describe_model()} and its {S.HDI_LABEL} band; the lower panel gives the change point's "
                f"posterior probability by step. {data_text(fit.data.summary, len(fit.data.steps))}",
            )
        return out

    def answer(self) -> str:
        """:meth:`counts_text` as a sentence."""
        return self.counts_text() + "."

    def details(self) -> list[str]:
        """The model, each run's verdicts and each failure."""
        if not self.fits:
            return [f"{f['run']}: could not be fitted ({f['error']})." for f in self.failures]
        first = next(iter(self.fits.values()))
        out = [f"Model (every run): {first.describe_model()}."]
        out += [f"{run}: {fit.to_dict()['summary']}." for run, fit in self.fits.items()]
        return out + [f"{f['run']}: could not be fitted ({f['error']})." for f in self.failures]

    def results(self) -> dict[str, Any]:
        """``{"runs": to_dict()}``, JSON-ready."""
        return {"runs": json_safe(self.to_dict())}

    def inference_data(self) -> dict[str, Any]:
        """``plateau_fit_<run>`` per fitted run."""
        return {f"plateau_fit_{run}": fit.idata for run, fit in self.fits.items()}

    @property
    def converged(self) -> bool:
        """Every fitted run converged."""
        return all(fit.diagnostics["converged"] for fit in self.fits.values())

    def status_lines(self) -> list[str]:
        """A line per failed run ("FAILED run: error"), then how many runs were fitted and
        whether every fit converged.

        Returns
        -------
        list of str
            What a front end prints after the table.
        """
        total = len(self.fits) + len(self.failures)
        converged = "all converged" if self.converged else "NOT ALL CONVERGED: do not use the rows marked NO"
        return [f"FAILED {f['run']}: {f['error']}" for f in self.failures] + [
            f"{len(self.fits)} of {total} runs fitted; {len(self.failures)} failed; {converged}"
        ]

    def write_inference_data(self, directory: str | Path) -> list[Path]:
        """Write each fitted run's InferenceData to ``directory/<run>.nc`` (the directory is
        made; a run's name becomes one file-name component, :func:`saturation.io.safe_name`;
        two runs that would share a file are refused before anything is written).

        Parameters
        ----------
        directory : str or pathlib.Path
            Where (its parent must exist).

        Returns
        -------
        list of pathlib.Path
            The files written.
        """
        from saturation.io import safe_name, write_netcdf

        names = {run: f"{safe_name(run)}.nc" for run in self.fits}
        clash = sorted({n for n in names.values() if list(names.values()).count(n) > 1})
        if clash:
            runs = [run for run, n in names.items() if n in clash]
            raise ValueError(f"runs {', '.join(runs)} would share the file name {clash[0]}: rename a run")
        out = Path(directory)
        out.mkdir(exist_ok=True)
        return [write_netcdf(fit.idata, out / names[run]) for run, fit in self.fits.items()]

    @property
    def diagnostics(self) -> dict[str, Any]:
        """One diagnostics record for all fits (worst R-hat and ESS, summed divergences)."""
        return merge_diagnostics([fit.diagnostics for fit in self.fits.values()]) if self.fits else {}

    def verdict_counts(self) -> dict[str, dict[str, int]]:
        """Per level, how many runs got each verdict (from each fit's own rule).

        Returns
        -------
        dict of str to dict of str to int
            ``{level: {verdict: number of runs}}``, verdicts in the order first seen.
        """
        counts: dict[str, dict[str, int]] = {}
        for fit in self.fits.values():
            for level, v in fit.verdicts().items():
                by_verdict = counts.setdefault(level, {})
                by_verdict[v["verdict"]] = by_verdict.get(v["verdict"], 0) + 1
        return counts

    def counts_text(self) -> str:
        """Per level, the verdicts across the runs, and the runs that failed (the JSON's
        ``summary``; :meth:`answer` is this sentence).

        Returns
        -------
        str
            E.g. "20 runs: file plateaued in 12, slowed in 5, still rising in 3; ...".
        """
        parts = [
            f"{level} " + ", ".join(f"{verdict} in {n}" for verdict, n in by.items())
            for level, by in self.verdict_counts().items()
        ]
        failed = f"; {len(self.failures)} could not be fitted" if self.failures else ""
        n = len(self.fits)
        return f"{n} run{'' if n == 1 else 's'}: " + "; ".join(parts) + failed

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape: ``{"runs": {RUN: PlateauFit.to_dict()}, "table": [...],
        "summary": str, "verdict_counts": {LEVEL: {VERDICT: n}}, "failures": [...],
        "converged": bool}``.

        Returns
        -------
        dict
            JSON-ready (through :func:`saturation.summary.json_safe`).
        """
        return {
            "runs": {run: fit.to_dict() for run, fit in self.fits.items()},
            "table": self.summary().to_dict(orient="records"),
            "summary": self.counts_text(),
            "verdict_counts": self.verdict_counts(),
            "failures": list(self.failures),
            "converged": self.converged,
        }


def _fit_one(task: tuple[str, StepData, PlateauConfig, int]) -> PlateauFit:
    _, data, config, seed = task
    return fit_plateau(data, config, seed=seed)


def metric_runs(series: xr.Dataset, metric: str, run: str | None = None, *, where: str = "") -> tuple[str, list[str]]:
    """The variable of a logged metric in a per-step series and the runs that logged it.

    Parameters
    ----------
    series : xarray.Dataset
        Per-step metrics (dims run, step; :func:`saturation.runlogs.read_metrics`).
    metric : str
        The key as logged (``critic/score/mean``) or its variable name.
    run : str, optional
        Only this run (it must have logged the key).
    where : str
        The file the series came from, for the error messages.

    Returns
    -------
    tuple of (str, list of str)
        The variable and the runs, in the series' order.

    Raises
    ------
    saturation.limits.OptionError
        An unknown metric, or a ``run`` that did not log it.
    """
    prefix = f"{where}: " if where else ""
    try:
        var = S.metric_variable(series, metric)
    except KeyError as err:
        raise OptionError(f"{prefix}{err.args[0]}") from None
    logged = series[var].notnull().any(S.STEP).to_numpy()
    runs = [str(r) for r in series[S.RUN].to_numpy()[logged]]
    if run is not None:
        if run not in runs:
            raise OptionError(f"run {run}: {where or 'the series'} has no {metric!r} for it; runs {', '.join(runs)}")
        runs = [run]
    return var, runs


def fit_plateau_runs(
    data: xr.Dataset,
    config: PlateauConfig | None = None,
    *,
    runs: list[str] | None = None,
    seed: int = 0,
    scheduler: str | None = None,
    workers: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> PlateauRuns:
    """Fit the plateau model to every run of ``data``, in parallel.

    Parameters
    ----------
    data : xarray.Dataset
        Trials with a ``run`` coordinate (aggregated here once, by run and step), or
        aggregates / a series with a ``run`` dimension.
    config : PlateauConfig, optional
        The analysis, the same for every run (default ``PlateauConfig()``).
    runs : list of str, optional
        The runs to fit (default: every run of the data).
    seed : int
        Seeds every fit through :func:`run_seed`: same seed, same numbers per run.
    scheduler : str, optional
        None (default): a LocalCluster of ``workers`` processes; ``"tcp://host:port"``: an
        existing Dask cluster; ``"sync"``: one after the other in this process.
    workers : int
        LocalCluster worker processes (default 2).
    progress : callable, optional
        Called as ``progress(done, total)`` after each run.

    Returns
    -------
    PlateauRuns
        The fits, the runs that failed, and the table of verdicts across runs.

    Raises
    ------
    ValueError
        If a run asked for is not in the data, or the data hold no run.
    """
    config = config or PlateauConfig()
    config.validate()
    have = run_names(data)
    if not have:
        raise ValueError("the data hold no run coordinate: fit_plateau_runs needs several runs")
    runs = list(runs) if runs is not None else have
    missing = [r for r in runs if r not in have]
    if missing:
        raise ValueError(f"run(s) {missing} not in the data (runs: {have})")
    attrs = dict(data.attrs)  # the sources and the synthetic label, for every run's summary
    if S.TRIAL in data.dims:  # one pass over the trials: per (run, step) statistics
        data = aggregate(select_phase(data), by=(S.RUN, S.STEP))
    tasks, failures = [], []
    levels = list(config.levels) if config.levels else None
    for run in runs:
        try:
            sd = step_data(data, response=config.response, levels=levels, run=run)
        except ValueError as exc:  # this run's data cannot be fitted: it is one failure
            failures.append({"run": run, "error": repr(exc)})
            continue
        sd.summary.setdefault("sources", json.loads(attrs.get(S.ATTR_SOURCES, "[]")))
        sd.summary.setdefault("synthetic", attrs.get(S.ATTR_SYNTHETIC, ""))
        tasks.append((run, sd, config, run_seed(seed, run)))
    labels = [t[0] for t in tasks]
    results, failed = map_tasks(_fit_one, tasks, labels, scheduler=scheduler, workers=workers, progress=progress)
    failures += [{"run": f["task"], "error": f["error"]} for f in failed]
    failed_runs = {f["task"] for f in failed}
    done = [label for label in labels if label not in failed_runs]
    return PlateauRuns(dict(zip(done, results, strict=True)), failures)
