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
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from saturation import schema as S
from saturation.io import load_netcdf, write_atomic

#: the config key of SkyRL's dynamic sampling (None, "filter" or "replace";
#: skyrl_train/config/ppo_base_config.yaml L118-121 at the fork's 81e5a97c); a metrics
#: Dataset records a run's strategy in ``attrs[f"{DYNAMIC_SAMPLING_TYPE_KEY}/{run}"]``
DYNAMIC_SAMPLING_TYPE_KEY = "trainer.algorithm.dynamic_sampling.type"
#: per-step counts read from dynamic sampling's round lines (not logged metrics; by the
#: console reader, :meth:`saturation.skyrl.ConsoleLog.place_sampling_events`): the rounds
#: of generation, the prompts generated over them, those whose rollouts' rewards differ
#: (kept by filter, "good" for replace), the prompts of the trained batch and how many of
#: them are distinct mixed groups (replace fills the rest with copies)
DYNAMIC_SAMPLING_KEYS = {
    "rounds": "dynamic_sampling/rounds",
    "prompts_generated": "dynamic_sampling/prompts_generated",
    "prompts_mixed": "dynamic_sampling/prompts_mixed",
    "prompts_trained": "dynamic_sampling/prompts_trained",
    "prompts_trained_mixed": "dynamic_sampling/prompts_trained_mixed",
}

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
    """Write a per-step series as a metrics CSV (columns by logged name, ``%.6g``); returns ``path``.

    Parameters
    ----------
    ds : xarray.Dataset
        A per-step metrics series (dims run, step; module docstring).
    path : path
        The CSV file, written atomically (replaced if it exists).

    Returns
    -------
    pathlib.Path
        ``path``. Rows where every metric is missing are left out.
    """
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

    Parameters
    ----------
    path : path
        The metrics CSV.

    Returns
    -------
    xarray.Dataset
        The per-step series (dims run, step), missing values NaN; ``attrs['sources']``
        names the file.

    Raises
    ------
    ValueError
        If the file has no ``step`` column, or any cell is malformed (every problem listed,
        by line and field).
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
        attrs = ds.variables[var].attrs  # not ds[var]: a DataArray is built in time linear in the variables
        attrs["metric_name"] = key
        k = re.search(r"pass_at_(\d+)", key)
        if k:
            attrs["k"] = int(k.group(1))
    return ds


def metric_variable_names(metrics: list[str]) -> dict[str, str]:
    """netCDF-safe, unique variable names for logged metric keys: the package's names for
    known SkyRL metrics (``reward_mean``, ``pass_at_k``, ``policy_entropy``) when exactly
    one key maps to them, otherwise the key with every non-alphanumeric character as ``_``;
    a remaining clash, with another key or with a coordinate's name (``_step`` would be
    ``step``, the Dataset's step axis), gets a numeric suffix."""
    known = {m: _safe_name(m) for m in metrics}
    generic = {m: "".join(ch if ch.isalnum() else "_" for ch in m).strip("_") or "metric" for m in metrics}
    counts: dict[str, int] = {}
    for v in known.values():
        counts[v] = counts.get(v, 0) + 1
    names: dict[str, str] = {}
    used: set[str] = {S.RUN, S.STEP, S.PHASE, S.ARM, S.LEVEL}
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


#: half the last place of a console-logged value (``f"{x:.4f}"``)
ROUNDING = 0.5e-4


def _logged(series: xr.Dataset, key: str) -> str | None:
    try:
        return S.metric_variable(series, key)
    except KeyError:
        return None


def dynamic_sampling_runs(series: xr.Dataset) -> dict[str, str]:
    """The runs of a metrics series that trained with dynamic sampling, and the strategy.

    Parameters
    ----------
    series : xarray.Dataset
        A per-step metrics series (module docstring).

    Returns
    -------
    dict
        Run -> ``"filter"`` or ``"replace"`` (from the run's config, its YAML dump or its
        round lines; ``attrs[f"{DYNAMIC_SAMPLING_TYPE_KEY}/{run}"]``), or ``"unrecorded"``
        when only the per-step counts (:data:`DYNAMIC_SAMPLING_KEYS`) show it, as in a
        metrics CSV, which keeps no attributes.
    """
    rounds = _logged(series, DYNAMIC_SAMPLING_KEYS["rounds"])
    out: dict[str, str] = {}
    for run in map(str, series[S.RUN].values):
        kind = series.attrs.get(f"{DYNAMIC_SAMPLING_TYPE_KEY}/{run}")
        if kind:
            out[run] = str(kind)
        elif rounds is not None and bool(np.isfinite(series[rounds].sel({S.RUN: run})).any()):
            out[run] = "unrecorded"
    return out


def dynamic_sampling_bounds(series: xr.Dataset, run: str, metric: str = "reward/avg_raw_reward") -> pd.DataFrame:
    """What the logged reward of a dynamic-sampling run can say about the whole generated batch.

    Parameters
    ----------
    series : xarray.Dataset
        A per-step metrics series holding the run's dynamic-sampling counts
        (:data:`DYNAMIC_SAMPLING_KEYS`, read from its console log) and ``metric``.
    run : str
        The run.
    metric : str
        The logged mean reward (rewards in [0, 1]).

    Returns
    -------
    pandas.DataFrame
        One row per step with the counts (:data:`DYNAMIC_SAMPLING_KEYS`: ``rounds``,
        ``prompts_generated`` :math:`G`, ``prompts_mixed`` :math:`M`, ``prompts_trained``
        :math:`K`, ``prompts_trained_mixed`` :math:`K_m`), ``mixed_share`` :math:`M / G`;
        ``logged`` :math:`m`; ``lower`` and ``upper``, the bounds on the mean reward of
        every rollout generated at that step; and, when the series holds
        ``reward/avg_pass_at_k`` with k > 1, ``pass_logged``, ``pass_lower`` and
        ``pass_upper`` (the share of generated prompts with a success).

    Raises
    ------
    KeyError
        No dynamic-sampling counts for the run, or no ``metric``.
    ValueError
        A logged reward outside [0, 1] (the bounds need bounded rewards), naming the step.

    Notes
    -----
    SkyRL computes a step's ``reward/*`` metrics after dynamic sampling, on the trained
    batch of :math:`K` prompts: filter's first :math:`K` kept groups (all mixed,
    :math:`K_m = K`), or replace's last round, whose :math:`K_m` good groups are copied over
    the others. Its reward sum :math:`Km` is that of the :math:`K_m` distinct mixed groups
    plus that of :math:`K - K_m` copies, each group's mean in [0, 1], so the distinct
    groups' sum :math:`S` lies in :math:`[\\max(0, Km - (K - K_m)),\\ \\min(K_m, Km)]`
    (:math:`S = Km` for filter). Every other generated prompt (dropped, kept beyond
    :math:`K`, replace's bad groups and earlier rounds) has an unknown mean in [0, 1]. The
    mean of every generated rollout therefore lies in
    :math:`[S_{lo} / G,\\ (S_{hi} + G - K_m) / G]` for any rewards in [0, 1]; the log holds
    nothing that narrows it (but the console's rounding of :math:`m` to 4 places, which
    widens it by :math:`K \\cdot 5 \\cdot 10^{-5} / G`). A mixed group has a success, so
    the logged pass@k is 1 and the generated prompts' pass@k lies in :math:`[M / G, 1]`.
    """
    names = {k: _logged(series, key) for k, key in DYNAMIC_SAMPLING_KEYS.items()}
    if any(v is None for v in names.values()):
        raise KeyError(f"run {run}: the series holds no dynamic-sampling counts (read from its console log)")
    value = S.metric_variable(series, metric)
    one = series.sel({S.RUN: run})
    frame = pd.DataFrame({k: one[v].to_numpy() for k, v in names.items() if v is not None})
    frame.insert(0, S.STEP, one[S.STEP].to_numpy())
    frame["logged"] = one[value].to_numpy()
    # the training reward's pass@k (not an eval metric's); with one rollout a prompt nothing
    # is dropped (upstream keeps every group) and pass@1 is the mean reward: no pass bounds
    passes = [
        v
        for v in series.data_vars
        if str(series[v].attrs.get("metric_name", "")).startswith("reward/avg_pass_at_")
        and int(series[v].attrs.get("k", 1)) > 1
    ]
    if passes:
        frame["pass_logged"] = one[passes[0]].to_numpy()
    frame = frame.dropna(subset=["rounds", "logged"]).reset_index(drop=True)
    bad = frame[(frame["logged"] < 0) | (frame["logged"] > 1)]
    if len(bad):
        row = bad.iloc[0]
        raise ValueError(
            f"run {run}, step {int(row[S.STEP])}, field {metric}: {row['logged']:g} is outside [0, 1]; "
            "the bounds need rewards in [0, 1]"
        )
    g, k, km = frame["prompts_generated"], frame["prompts_trained"], frame["prompts_trained_mixed"]
    # the console tracker rounds to 4 places (ConsoleLogger.stringify_floats): m is known to +-5e-5
    lo_total, hi_total = k * (frame["logged"] - ROUNDING), k * (frame["logged"] + ROUNDING)
    frame["mixed_share"] = frame["prompts_mixed"] / g
    frame["lower"] = np.maximum(0.0, lo_total - (k - km)) / g
    frame["upper"] = np.minimum(1.0, (np.minimum(km, hi_total) + g - km) / g)
    if passes:
        frame["pass_lower"], frame["pass_upper"] = frame["mixed_share"], 1.0
    return frame


def _nothing_dropped(frame: pd.DataFrame) -> bool:
    """At every step one round, every prompt trained on and none copied."""
    return bool(
        (frame["prompts_trained"] == frame["prompts_generated"]).all()
        and (frame["prompts_trained_mixed"] == frame["prompts_trained"]).all()
    )


def dynamic_sampling_notes(series: xr.Dataset, runs: Sequence[str] | None = None) -> list[str]:
    """Warnings for the runs of a series that trained with dynamic sampling.

    Parameters
    ----------
    series : xarray.Dataset
        A per-step metrics series.
    runs : sequence of str, optional
        Only these runs (default: all).

    Returns
    -------
    list of str
        One sentence per such run: its logged ``reward/*`` metrics are of the kept groups
        only, with the median share of dropped prompts and the median width of
        :func:`dynamic_sampling_bounds`; none for a run whose counts show that every
        generated group was trained on (e.g. one rollout a prompt, which upstream never
        drops). The CLI and the report print them wherever such a series is read.
    """
    out = []
    for run, kind in dynamic_sampling_runs(series).items():
        if runs is not None and run not in runs:
            continue
        strategy = "" if kind == "unrecorded" else f" ({kind})"
        text = (
            f"run {run} trained with dynamic sampling{strategy}: SkyRL computes its reward/* metrics on the prompt "
            "groups whose rollouts' rewards differ, after the others are dropped, so its logged mean reward is "
            "that of the kept groups (too high while the dropped groups mostly fail, too low once they mostly "
            "succeed: a flatter curve) and its logged pass@k is 1 by construction"
        )
        try:
            frame = dynamic_sampling_bounds(series, run)
        except (KeyError, ValueError):
            frame = None
        if frame is not None and len(frame):
            if _nothing_dropped(frame):
                continue  # every generated group was trained on: the logged metrics are of all of them
            dropped = 1 - float(frame["mixed_share"].median())
            trained = float((frame["prompts_trained"] / frame["prompts_generated"]).median())
            width = float((frame["upper"] - frame["lower"]).median())
            text += (
                f"; a median {dropped:.0%} of a step's generated prompts had all-equal rewards and the trained "
                f"batch is a median {trained:.0%} of them, so the mean reward of all a step generated is bounded "
                f"only to an interval of median width {width:.2f} (series.dynamic_sampling_bounds)"
            )
        out.append(text + "; fit its trials instead (codescout's trajectory files keep every rollout generated)")
    return out


def read_metrics(path: str | Path) -> xr.Dataset:
    """A per-step metrics file: the netCDF ``saturation ingest --metrics-out`` writes
    (``.nc``), else a metrics CSV (:func:`read_metrics_csv`). ValueError when a netCDF file
    is not a (run, step) series, would read other files or inflates past the limit
    (:func:`saturation.io.check_netcdf`).

    Parameters
    ----------
    path : path
        A ``.nc`` file, or any other name for a metrics CSV.

    Returns
    -------
    xarray.Dataset
        The per-step series (dims run, step), loaded into memory; ``attrs['sources']``
        names the file unless the netCDF already records its sources.

    Raises
    ------
    ValueError
        If the file is not a per-step series, is refused or is unreadable (and, for a CSV,
        as :func:`read_metrics_csv`).
    """
    path = Path(path)
    if path.suffix != ".nc":
        return read_metrics_csv(path)
    ds = load_netcdf(path)  # refused if it would read other files or inflate past the limit
    if not {S.RUN, S.STEP} <= set(ds.dims):
        raise ValueError(f"{path}: not a per-step metrics file (dims {sorted(map(str, ds.dims))}, need run and step)")
    ds.attrs.setdefault(S.ATTR_SOURCES, json.dumps([str(path)]))
    return ds
