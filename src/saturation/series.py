"""Per-step metrics series: naming, and the metrics CSV reader and writer.

A metrics series is an :class:`xarray.Dataset` with dims ``(run, step)`` (``step`` an
integer training step) and one variable per logged metric. Variables carry netCDF-safe
names - the package's names for the known SkyRL metrics (``reward_mean``, ``pass_at_k``,
``policy_entropy``; :data:`SERIES_METRICS`), otherwise the logged key with every
non-alphanumeric character as ``_`` - and keep the logged key in
``attrs['metric_name']`` (plus ``k`` for ``pass_at_<k>`` keys); missing values are NaN.

The metrics CSV is the series on disk: one row per (run, step), a ``step`` column, an
optional ``run`` column and one column per metric under its logged name (e.g.
``reward/avg_raw_reward``); empty cells are missing values (:func:`read_metrics_csv`,
:func:`write_metrics_csv`).

Every reader of per-step metrics produces this shape with the naming here: SkyRL console
logs and wandb run histories (:func:`saturation.skyrl.metrics_dataset`), eval aggregates
(``aggregated_results.jsonl``, in :func:`saturation.ingest.ingest_runs`) and metrics CSVs;
the simulators (:func:`saturation.simulate.simulate_series`) write it too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from saturation import schema as S
from saturation.io import write_atomic

#: netCDF-safe variable name -> metric name as SkyRL logs it
SERIES_METRICS = {
    S.REWARD_MEAN: "reward/avg_raw_reward",
    S.PASS_AT_K: "reward/avg_pass_at_{k}",
    S.POLICY_ENTROPY: "policy/policy_entropy",
}


def series_to_frame(ds: xr.Dataset) -> pd.DataFrame:
    """Per-step series Dataset -> long CSV frame (run, step, metric columns by logged name)."""
    frame = ds.to_dataframe().reset_index()
    frame = frame.dropna(subset=[v for v in ds.data_vars], how="all")
    names = {v: ds[v].attrs.get("metric_name", v) for v in ds.data_vars}
    return frame.rename(columns=names)[[S.RUN, S.STEP, *names.values()]]


def write_metrics_csv(ds: xr.Dataset, path: str | Path) -> Path:
    """Write a per-step series as a metrics CSV (columns by logged name, ``%.6g``); returns ``path``."""
    path = Path(path)
    write_atomic(path, series_to_frame(ds).to_csv(index=False, lineterminator="\n", float_format="%.6g"))
    return path


def read_metrics_csv(path: str | Path) -> xr.Dataset:
    """Read a per-step metrics CSV into a (run, step) Dataset.

    Accepted shape: one row per (run, step); a ``step`` column (integer), an optional
    ``run`` column (default: the file's stem) and one column per logged metric under its
    original name (e.g. ``reward/avg_raw_reward``, ``reward/avg_pass_at_8``,
    ``policy/policy_entropy``); empty cells are missing values. Variables get netCDF-safe
    names (``reward_mean``, ``pass_at_k``, ``policy_entropy`` for the known metrics) with
    the original in ``attrs['metric_name']`` (and ``k`` for pass@k). Every problem (missing
    step column, non-integer step, non-numeric value, duplicate (run, step)) is reported
    with its line number in one ValueError.
    """
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    if S.STEP not in frame.columns:
        raise ValueError(f"{path}: metrics CSV needs a 'step' column (have {list(frame.columns)})")
    if S.RUN not in frame.columns:
        frame[S.RUN] = Path(path).stem
    metrics = [c for c in frame.columns if c not in (S.RUN, S.STEP)]
    problems: list[str] = []
    step = pd.to_numeric(frame[S.STEP], errors="coerce")
    for i in np.flatnonzero(step.isna() | (step != step.round())):
        problems.append(f"line {i + 2}, field 'step': {frame[S.STEP].iloc[i]!r} is not an integer step")
    for m in metrics:
        raw = frame[m].str.strip()
        num = pd.to_numeric(raw.where(raw != "", None), errors="coerce")
        for i in np.flatnonzero(num.isna() & (raw != "")):
            problems.append(f"line {i + 2}, field {m!r}: {frame[m].iloc[i]!r} is not a number")
        frame[m] = num
    dup = frame.assign(step_=step).duplicated([S.RUN, "step_"], keep="first")
    for i in np.flatnonzero(dup):
        problems.append(f"line {i + 2}: duplicate (run, step) = ({frame[S.RUN].iloc[i]}, {frame[S.STEP].iloc[i]})")
    if problems:
        raise ValueError(f"{path}: {len(problems)} problem(s) in the metrics CSV:\n  " + "\n  ".join(problems[:50]))
    frame[S.STEP] = step.astype(int)
    safe = metric_variable_names(metrics)
    ds = label_metrics(frame.rename(columns=safe).set_index([S.RUN, S.STEP]).to_xarray(), safe)
    ds.attrs[S.ATTR_SOURCES] = json.dumps([str(path)])
    return ds


def label_metrics(ds: xr.Dataset, names: dict[str, str]) -> xr.Dataset:
    """Record each variable's logged key (``names``: key -> variable) in
    ``attrs['metric_name']``, and ``k`` for ``pass_at_<k>`` keys; returns ``ds``."""
    for key, var in names.items():
        ds[var].attrs["metric_name"] = key
        k = re.search(r"pass_at_(\d+)", key)
        if k:
            ds[var].attrs["k"] = int(k.group(1))
    return ds


def metric_variable_names(metrics: list[str]) -> dict[str, str]:
    """netCDF-safe, unique variable names for logged metric keys: the package's names for
    known SkyRL metrics (``reward_mean``, ``pass_at_k``, ``policy_entropy``) when exactly
    one key maps to them, otherwise the key with every non-alphanumeric character as ``_``;
    a remaining clash gets a numeric suffix."""
    known = {m: _safe_name(m) for m in metrics}
    generic = {m: "".join(ch if ch.isalnum() else "_" for ch in m).strip("_") or "metric" for m in metrics}
    counts: dict[str, int] = {}
    for v in known.values():
        counts[v] = counts.get(v, 0) + 1
    names: dict[str, str] = {}
    used: set[str] = set()
    for m in metrics:
        name = known[m] if counts[known[m]] == 1 else generic[m]
        base, i = name, 1
        while name in used:
            i += 1
            name = f"{base}_{i}"
        used.add(name)
        names[m] = name
    return names


def _safe_name(metric: str) -> str:
    inverse = {v.split("{")[0]: k for k, v in SERIES_METRICS.items()}
    for prefix, var in inverse.items():
        if metric.startswith(prefix):
            return var
    return "".join(ch if ch.isalnum() else "_" for ch in metric).strip("_")


def read_metrics(path: str | Path) -> xr.Dataset:
    """A per-step metrics file: the netCDF ``saturation ingest --metrics-out`` writes
    (``.nc``), else a metrics CSV (:func:`read_metrics_csv`). ValueError when a netCDF file
    is not a (run, step) series."""
    path = Path(path)
    if path.suffix != ".nc":
        return read_metrics_csv(path)
    ds = xr.load_dataset(path)
    if not {S.RUN, S.STEP} <= set(ds.dims):
        raise ValueError(f"{path}: not a per-step metrics file (dims {sorted(map(str, ds.dims))}, need run and step)")
    ds.attrs.setdefault(S.ATTR_SOURCES, json.dumps([str(path)]))
    return ds
