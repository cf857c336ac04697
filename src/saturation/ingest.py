"""Ingest SkyRL run directories: trajectories, eval dumps, console logs, eval-log index.

:func:`ingest_runs` walks each run directory, recognises what it holds (docs/skyrl.md),
reads ``.zst`` files transparently and returns the trial Dataset (one trial per rollout,
per-level scores recomputed from answer and gold) plus the per-step metrics Dataset, with
every file, line and row accounted for:

* ``step_{k}/{train|eval}/{instance_id}_{rep}.json`` - one graded or ungraded trial;
  ``{instance_id}_{rep}.error`` - a crashed rollout, an ungraded trial (reason ``error_file``);
* ``dumped_evals/global_step_{k}_evals/{data_source}.jsonl`` - one eval trial per line;
* console logs (``*.log``, ``*.out``, optionally ``.zst``) - per-step metrics and
  configuration (:mod:`saturation.skyrl`); eval-only logs (a ``Metrics from eval only
  run`` line and no steps) are placed at (run label, checkpoint step) using
  ``eval_log_index.txt`` and the step in the file name;
* per-step metrics CSVs (``*.csv``) - merged into the metrics Dataset;
* anything else is listed as ignored.

Nothing is evaluated or unpickled: JSON and Python literals only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import xarray as xr

from saturation import localization as L
from saturation import schema as S
from saturation.progress import Progress
from saturation.skyrl import (
    ConsoleLog,
    TruncatedStreamError,
    metrics_dataset,
    open_text,
    read_all,
    read_console_log,
)

TRAJ_RE = re.compile(r"(?:^|/)step_(?P<step>\d+)/(?P<phase>train|eval)/(?P<name>[^/]+)\.(?P<ext>json|error)(?:\.zst)?$")
EVAL_DUMP_RE = re.compile(r"(?:^|/)global_step_(?P<step>\d+)_evals/(?P<source>[^/]+)\.jsonl(?:\.zst)?$")
LOG_SUFFIXES = (".log", ".log.zst", ".out", ".out.zst")
METRICS_SUFFIXES = (".csv", ".csv.zst")
INDEX_NAME = "eval_log_index.txt"
#: checkpoint step in an eval-log file name (the last match counts)
CKPT_STEP_RE = re.compile(r"(?:global_step|step|ckpt)[_-]?(?P<step>\d+)", re.I)
INDEX_LINE_RE = re.compile(r"^(?P<name>\S+?)\s*(?:[,:=\t]|->|\s)\s*(?P<label>\S.*?)\s*$")
#: a trajectory file larger than this is not loaded (memory bound); reported as a problem
MAX_TRAJECTORY_BYTES = 256 << 20
RESERVED = {*S.TRIAL_COORDS, S.GRADED, S.REWARD, *S.LEVEL_FIELDS, "ungraded_reason", "n_locations",
            "stop_reason", "error_message", "source"}


class IngestError(ValueError):
    """Strict-mode ingest failure; the message lists every problem with file[:line]."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = "\n".join(f"  - {p}" for p in self.problems[:50])
        more = f"\n  ... and {len(self.problems) - 50} more" if len(self.problems) > 50 else ""
        super().__init__(f"{len(self.problems)} problem(s) while ingesting (use lenient mode to ingest "
                         f"the rest):\n{shown}{more}")


@dataclass
class RunContents:
    """What one run directory holds (paths sorted)."""

    root: Path
    trajectories: list[tuple[Path, int, str, str, str]] = field(default_factory=list)  # path, step, phase, name, ext
    eval_dumps: list[tuple[Path, int, str]] = field(default_factory=list)  # path, step, data source
    logs: list[Path] = field(default_factory=list)
    metrics_csvs: list[Path] = field(default_factory=list)
    index: list[Path] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        return {"trajectory_files": len(self.trajectories), "eval_dump_files": len(self.eval_dumps),
                "console_logs": len(self.logs), "metrics_csvs": len(self.metrics_csvs),
                "index_files": len(self.index), "ignored_files": len(self.ignored)}


def scan_run_dir(root: str | Path) -> RunContents:
    """Classify every file under ``root`` (module docstring); nothing is read yet."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a directory")
    out = RunContents(root)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        name = path.name.lower()
        if m := TRAJ_RE.search(rel):
            out.trajectories.append((path, int(m["step"]), m["phase"], m["name"], m["ext"]))
        elif m := EVAL_DUMP_RE.search(rel):
            out.eval_dumps.append((path, int(m["step"]), m["source"]))
        elif name == INDEX_NAME:
            out.index.append(path)
        elif name.endswith(LOG_SUFFIXES):
            out.logs.append(path)
        elif name.endswith(METRICS_SUFFIXES):
            out.metrics_csvs.append(path)
        else:
            out.ignored.append(path)
    return out


def looks_like_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory holding SkyRL output (trajectories, eval dumps,
    console logs or an eval-log index) rather than graded-trial tables."""
    path = Path(path)
    if not path.is_dir():
        return False
    c = scan_run_dir(path)
    return bool(c.trajectories or c.eval_dumps or c.logs or c.index)


def read_index(path: str | Path, problems: list[str]) -> dict[str, str]:
    """``eval_log_index.txt``: one ``<eval-log file name> <run label>`` per line (separated by
    whitespace, tab, ``,``, ``:``, ``=`` or ``->``); blank lines and ``#`` comments ignored;
    a malformed line is reported as ``file:line``."""
    out: dict[str, str] = {}
    with open_text(path) as stream:
        for number, raw in enumerate(stream, start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            m = INDEX_LINE_RE.match(line)
            if not m:
                problems.append(f"{path}:{number}: index line is not '<file> <label>': {line[:80]!r}")
                continue
            name = Path(m["name"]).name
            if name in out and out[name] != m["label"]:
                problems.append(f"{path}:{number}: {name} already mapped to {out[name]!r}")
                continue
            out[name] = m["label"]
    return out


# ------------------------------------------------------------------ trials
class _Rows:
    """Column-wise trial rows plus the accounting."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {}
        self.n = 0
        self.read = self.rejected = self.superseded = 0
        self.reasons: dict[str, int] = {}
        self.no_gold = 0

    def add(self, row: Mapping[str, Any]) -> None:
        for key, value in row.items():
            col = self.cols.get(key)
            if col is None:
                col = self.cols[key] = [None] * self.n
            col.append(value)
        self.n += 1
        for col in self.cols.values():
            if len(col) < self.n:
                col.append(None)
        if not row[S.GRADED]:
            self.reasons[row["ungraded_reason"]] = self.reasons.get(row["ungraded_reason"], 0) + 1


@functools.lru_cache(maxsize=4096)
def _safe(key: str) -> str:
    name = "".join(ch if ch.isalnum() else "_" for ch in key).strip("_") or "value"
    return f"x_{name}" if name in RESERVED or name[0].isdigit() else name


def _numbers(d: Any, prefix: str = "") -> dict[str, float]:
    """Numeric (and boolean) top-level values of a mapping, under netCDF-safe names."""
    if not isinstance(d, Mapping):
        return {}
    out: dict[str, float] = {}
    for key, value in d.items():
        if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
            out[_safe(prefix + str(key))] = float(value)
    return out


def _gold(target: Any, include_added: bool) -> dict[str, set[str]] | None:
    if target is None:
        return None
    changes = target.get("file_changes") if isinstance(target, Mapping) else target
    if changes is None:
        return None
    return L.gold_keys(changes, include_added=include_added)


def _level_values(scores: Mapping[str, Mapping[str, float]] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for level in S.CANONICAL_LEVELS:
        for fld in S.LEVEL_FIELDS:
            out[f"{level}_{fld}"] = scores[level][fld] if scores is not None else math.nan
    return out


def _split_name(name: str) -> tuple[str, int] | None:
    if "_" not in name:
        return None
    inst, rep = name.rsplit("_", 1)
    return (inst, int(rep)) if rep.isdigit() and inst else None


def _trajectory_row(path: Path, step: int, phase: str, name: str, ext: str, run: str,
                    include_added: bool, rows: _Rows, problems: list[str]) -> dict[str, Any] | None:
    split = _split_name(name)
    if split is None:
        problems.append(f"{path}: file name is not <instance_id>_<rep>.{ext}")
        return None
    inst, rep = split
    base = {S.RUN: run, S.STEP: step, S.INSTANCE_ID: inst, S.SAMPLE: rep, S.PHASE: phase, S.DATASET: "",
            "source": str(path)}
    if ext == "error":
        with open_text(path) as stream:
            message = stream.read(2000).strip().splitlines()
        return {**base, S.GRADED: False, S.REWARD: 0.0, "ungraded_reason": L.ERROR_FILE,
                "error_message": (message[-1] if message else "")[:200], "n_locations": math.nan,
                **_level_values(None)}
    if path.stat().st_size > MAX_TRAJECTORY_BYTES:
        problems.append(f"{path}: trajectory file larger than {MAX_TRAJECTORY_BYTES >> 20} MB, not read")
        return None
    try:
        record = json.loads(read_all(path))
    except json.JSONDecodeError as exc:
        problems.append(f"{path}:{exc.lineno}: malformed JSON ({exc.msg})")
        return None
    except TruncatedStreamError as exc:
        problems.append(str(exc))
        return None
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: unreadable ({exc})")
        return None
    if not isinstance(record, dict):
        problems.append(f"{path}: expected a JSON object, found {type(record).__name__}")
        return None
    if record.get("instance_id") not in (None, inst):
        problems.append(f"{path}: field 'instance_id' is {record['instance_id']!r} but the file name says {inst!r}")
        return None
    extra = {**_numbers(record.get("reward_dict")), **_numbers(record.get("metrics_dict"))}
    try:
        gold = _gold(record.get("target"), include_added)
    except ValueError as exc:
        problems.append(f"{path}: field 'target': {exc}")
        return None
    try:
        locations = L.answer_locations(record.get("parsed_final_message"), record.get("raw_final_message"))
    except L.UngradedAnswer as exc:
        return {**base, S.GRADED: False, S.REWARD: 0.0, "ungraded_reason": exc.reason, "error_message": str(exc)[:200],
                "n_locations": math.nan, **_level_values(None), **extra}
    reward = record.get("total_reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
        problems.append(f"{path}: field 'total_reward': {reward!r} is not a finite number")
        return None
    if gold is None:
        rows.no_gold += 1
    scores = L.score_answer(locations, gold) if gold is not None else None
    return {**base, S.GRADED: True, S.REWARD: float(reward), "ungraded_reason": "", "error_message": "",
            "n_locations": float(len(locations)), **_level_values(scores), **extra}


def _prompt_id(record: Mapping[str, Any]) -> str:
    extras = record.get("env_extras")
    for source in (extras if isinstance(extras, Mapping) else {}, record):
        for key in ("instance_id", "task_id", "uid"):
            if isinstance(source.get(key), str | int) and str(source[key]):
                return str(source[key])
    prompt = json.dumps(record.get("input_prompt"), sort_keys=True, default=str)
    return "prompt-" + hashlib.sha1(prompt.encode()).hexdigest()[:12]


def _eval_dump_rows(path: Path, step: int, source: str, run: str, include_added: bool, rows: _Rows,
                    problems: list[str], counts: dict[tuple[int, str], int]) -> None:
    try:
        with open_text(path) as stream:
            for number, raw in enumerate(stream, start=1):
                if not raw.strip():
                    continue
                rows.read += 1
                where = f"{path}:{number}"
                try:
                    record = json.loads(raw)
                except json.JSONDecodeError as exc:
                    problems.append(f"{where}: malformed JSON ({exc.msg})")
                    rows.rejected += 1
                    continue
                if not isinstance(record, dict):
                    problems.append(f"{where}: expected a JSON object, found {type(record).__name__}")
                    rows.rejected += 1
                    continue
                row = _eval_record(record, where, step, source, run, include_added, counts, rows, problems)
                if row is None:
                    rows.rejected += 1
                else:
                    rows.add(row)
    except TruncatedStreamError as exc:
        problems.append(f"{exc}; the lines before it were ingested")
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: unreadable ({exc}); the lines before it were ingested")


def _eval_record(record: dict[str, Any], where: str, step: int, source: str, run: str, include_added: bool,
                 counts: dict[tuple[int, str], int], rows: _Rows, problems: list[str]) -> dict[str, Any] | None:
    """One eval-dump line as a trial (``sample`` numbers the prompt's rollouts within the
    step, across the step's data-source files)."""
    inst = _prompt_id(record)
    sample = counts.get((step, inst), 0)
    counts[(step, inst)] = sample + 1
    base = {S.RUN: run, S.STEP: step, S.INSTANCE_ID: inst, S.SAMPLE: sample, S.PHASE: "eval",
            S.DATASET: str(record.get("data_source") or source), "source": where,
            "stop_reason": str(record.get("stop_reason") or "")}
    score = record.get("score")
    raw_extras = record.get("env_extras")
    extras: Mapping[str, Any] = raw_extras if isinstance(raw_extras, Mapping) else {}
    try:
        gold = _gold(extras.get("target", extras.get("file_changes")), include_added)
    except ValueError as exc:
        problems.append(f"{where}: field 'env_extras.target': {exc}")
        return None
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)
                              or not math.isfinite(score)):
        problems.append(f"{where}: field 'score': {score!r} is not a finite number")
        return None
    if score is None:
        return {**base, S.GRADED: False, S.REWARD: 0.0, "ungraded_reason": L.NO_SCORE, "error_message": "",
                "n_locations": math.nan, **_level_values(None)}
    if gold is None:
        return {**base, S.GRADED: True, S.REWARD: float(score), "ungraded_reason": "", "error_message": "",
                "n_locations": math.nan, **_level_values(None)}
    try:
        locations = L.answer_locations(None, record.get("output_response"))
    except L.UngradedAnswer as exc:
        return {**base, S.GRADED: False, S.REWARD: 0.0, "ungraded_reason": exc.reason, "error_message": str(exc)[:200],
                "n_locations": math.nan, **_level_values(None)}
    return {**base, S.GRADED: True, S.REWARD: float(score), "ungraded_reason": "", "error_message": "",
            "n_locations": float(len(locations)), **_level_values(L.score_answer(locations, gold))}


# ------------------------------------------------------------------ result
@dataclass
class IngestResult:
    """Trials and metrics of the ingested run directories, with the accounting."""

    trials: xr.Dataset | None
    metrics: xr.Dataset | None
    problems: list[str]
    accounting: dict[str, Any]


def _dir_identity(root: Path, logs: Sequence[ConsoleLog], labels: Mapping[str, str]) -> str:
    for key in (str(root), root.name, str(root.resolve())):
        if key in labels:
            return labels[key]
    runs = {log.run for log in logs if log.steps and "trainer.policy.model.path" in log.config}
    return runs.pop() if len(runs) == 1 else root.name


def _merge_logs(logs: Sequence[ConsoleLog], run: str) -> ConsoleLog:
    """Several training logs of one run (restarts) as one; the first value of a key wins."""
    out = ConsoleLog(", ".join(log.path for log in logs))
    for log in logs:
        out.config.update({k: v for k, v in log.config.items() if k not in out.config})
        for step, values in log.steps.items():
            out.merge_step(step, values)
        for name in ("lines", "block_lines", "blocks", "conflicts", "bytes_read"):
            setattr(out, name, getattr(out, name) + getattr(log, name))
        out.problems.extend(log.problems)
    out.config["trainer.policy.model.path"] = run  # the run identity used everywhere
    return out


def ingest_runs(
    run_dirs: Iterable[str | Path],
    *,
    strict: bool = True,
    labels: Mapping[str, str] | None = None,
    arms: Mapping[str, str] | None = None,
    index: Iterable[str | Path] = (),
    include_added: bool = True,
    progress: bool | None = None,
) -> IngestResult:
    """Ingest SkyRL run directories into a trial Dataset and a per-step metrics Dataset.

    Parameters
    ----------
    run_dirs : paths
        One directory per run (module docstring for what is recognised).
    strict : bool, default True
        Raise :class:`IngestError` listing every problem (file[:line] and reason) after
        reading everything. ``False``: ingest the rest, report the problems in the result.
    labels : mapping, optional
        Run label per directory (path or name). Default: the training log's
        ``trainer.policy.model.path``, else the directory name.
    arms : mapping, optional
        ``arm`` coordinate per directory (path or name), e.g. ``{"run_s85": "s85"}``.
    index : paths, optional
        Extra ``eval_log_index.txt`` files (those inside the run directories are used too).
    include_added : bool, default True
        Count ``added_modules``/``added_entities`` as gold locations.
    progress : bool, optional
        Progress bar on stderr (default: when stderr is a terminal).

    Returns
    -------
    IngestResult
        ``trials``: dims trial, level (file, module, entity); coords run, step,
        instance_id, sample, phase, dataset (and arm); graded, reward, per-level scores,
        ``ungraded_reason``, ``n_locations``, ``source`` (file[:line]) and every numeric
        ``reward_dict``/``metrics_dict`` entry. ``attrs``: rows_read == rows_kept +
        rows_rejected + rows_superseded. ``metrics``: (run, step) Dataset of the console
        logs and metrics CSVs. ``accounting``: per directory and file kind.
    """
    labels, arms = dict(labels or {}), dict(arms or {})
    dirs = [Path(d) for d in run_dirs]
    contents = [scan_run_dir(d) for d in dirs]
    problems: list[str] = []
    index_map: dict[str, str] = {}
    for path in [*map(Path, index), *(p for c in contents for p in c.index)]:
        index_map.update(read_index(path, problems))
    n_files = sum(sum(c.summary().values()) - len(c.ignored) for c in contents)
    bar = Progress(n_files, "ingest", enabled=progress)
    rows = _Rows()
    train_logs: dict[str, ConsoleLog] = {}
    eval_logs: list[tuple[ConsoleLog, str]] = []
    csvs: list[xr.Dataset] = []
    per_dir: list[dict[str, Any]] = []
    seen_runs: dict[str, Path] = {}
    for root, c in zip(dirs, contents, strict=True):
        logs = []
        for path in c.logs:
            bar.set_label(f"ingest {path.name}")
            logs.append(read_console_log(
                path, strict=False, progress=lambda n, p=path: bar.set_label(f"ingest {p.name} {n / 1e6:.0f} MB")))
            problems.extend(logs[-1].problems)
            bar.update()
        run = _dir_identity(root, logs, labels)
        if run in seen_runs:
            raise ValueError(f"run directories {seen_runs[run]} and {root} have the same run identity {run!r}; "
                             "give each a label (labels= / --label DIR=NAME)")
        seen_runs[run] = root
        training = [log for log in logs if log.steps]
        if training:
            train_logs[run] = _merge_logs(training, run)
        for log in logs:
            if not log.steps and log.eval_only:
                eval_logs.append((log, index_map.get(Path(log.path).name, run)))
        start = rows.n
        rejected_before = rows.rejected
        eval_traj_steps = {step for _, step, phase, _, _ in c.trajectories if phase == "eval"}
        seen_keys: dict[tuple[str, int, str, int], str] = {}
        for path, step, phase, name, ext in c.trajectories:
            bar.set_label(f"ingest {root.name}/step_{step}")
            rows.read += 1
            row = _trajectory_row(path, step, phase, name, ext, run, include_added, rows, problems)
            if row is not None:
                key = (phase, step, row[S.INSTANCE_ID], row[S.SAMPLE])
                if key in seen_keys:
                    problems.append(f"{path}: duplicate rollout (same instance and rep as {seen_keys[key]})")
                    row = None
                else:
                    seen_keys[key] = str(path)
            if row is None:
                rows.rejected += 1
            else:
                rows.add(row)
            bar.update()
        superseded = 0
        dump_counts: dict[tuple[int, str], int] = {}
        for path, step, source in c.eval_dumps:
            if step in eval_traj_steps:
                # the eval trajectories of this step carry the same rollouts with gold and answers
                with open_text(path) as stream:
                    n = sum(1 for line in stream if line.strip())
                rows.read += n
                rows.superseded += n
                superseded += n
            else:
                _eval_dump_rows(path, step, source, run, include_added, rows, problems, dump_counts)
            bar.update()
        for path in c.metrics_csvs:
            from saturation.replica import read_metrics_csv

            try:
                csvs.append(read_metrics_csv(path))
            except ValueError as exc:
                problems.append(str(exc))
            bar.update()
        bar.update(len(c.index))
        arm = next((arms[k] for k in (str(root), root.name) if k in arms), None)
        if arm is not None:
            rows.cols.setdefault(S.ARM, [None] * rows.n)
            for i in range(start, rows.n):
                rows.cols[S.ARM][i] = arm
        per_dir.append({"dir": str(root), "run": run, **c.summary(), "ignored": [str(p) for p in c.ignored],
                        "trials": rows.n - start, "rejected": rows.rejected - rejected_before,
                        "eval_dump_rows_superseded": superseded,
                        "console_logs": [log.accounting() for log in logs]})
    elapsed = bar.close()
    metrics = _metrics(train_logs, eval_logs, csvs, problems)
    if strict and problems:
        raise IngestError(problems)
    trials = _trials_dataset(rows, [str(d) for d in dirs]) if rows.n else None
    accounting = {"rows_read": rows.read, "rows_kept": rows.n, "rows_rejected": rows.rejected,
                  "rows_superseded": rows.superseded,
                  "rows_ungraded": sum(rows.reasons.values()), "ungraded_reasons": dict(sorted(rows.reasons.items())),
                  "graded_without_gold": rows.no_gold, "problems": len(problems), "seconds": round(elapsed, 2),
                  "dirs": per_dir}
    if trials is not None:
        trials.attrs["ingest_accounting"] = json.dumps(accounting, default=str)
        trials.attrs["ingest_problems"] = json.dumps(problems)
    return IngestResult(trials, metrics, problems, accounting)


def _trials_dataset(rows: _Rows, sources: Sequence[str]) -> xr.Dataset:
    from saturation.io import dataset_from_frame

    frame = pd.DataFrame(rows.cols)
    if S.ARM in frame and frame[S.ARM].isna().any():
        frame[S.ARM] = frame[S.ARM].fillna("")
    strings = {"ungraded_reason", "error_message", "stop_reason", "source"}
    for col in strings & set(frame.columns):
        frame[col] = frame[col].fillna("").astype(str)
    level_cols = {f"{lvl}_{fld}" for lvl in S.CANONICAL_LEVELS for fld in S.LEVEL_FIELDS}
    extra = [c for c in frame.columns if c not in {*S.TRIAL_COORDS, S.GRADED, S.REWARD, *level_cols}]
    for col in extra:
        if col not in strings:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    ungraded = int((~frame[S.GRADED].astype(bool)).sum())
    accounting = {"read": rows.read, "kept": rows.n, "ungraded": ungraded, "rejected": rows.rejected}
    ds = dataset_from_frame(frame, levels=list(S.CANONICAL_LEVELS), extra=extra, accounting=accounting,
                            sources=sources)
    ds.attrs["rows_superseded"] = rows.superseded
    ds["ungraded_reason"].attrs["description"] = "why a rollout is ungraded: " + ", ".join(L.UNGRADED_REASONS)
    ds["source"].attrs["description"] = "file (and line, for eval dumps) the trial was read from"
    return ds


def _metrics(train_logs: Mapping[str, ConsoleLog], eval_logs: Sequence[tuple[ConsoleLog, str]],
             csvs: Sequence[xr.Dataset], problems: list[str]) -> xr.Dataset | None:
    parts: list[xr.Dataset] = []
    if train_logs:
        parts.append(metrics_dataset(list(train_logs.values())))
    placed: dict[tuple[str, int], dict[str, float]] = {}
    unplaced = []
    for log, label in eval_logs:
        steps = CKPT_STEP_RE.findall(Path(log.path).name)
        merged: dict[str, float] = {}
        for block in log.eval_only:
            merged.update(block)
        if not steps:
            unplaced.append({"file": log.path, "label": label, "metrics": merged})
            problems.append(f"{log.path}: no checkpoint step in the file name; eval metrics kept in "
                            "attrs['eval_only_unplaced']")
            continue
        placed.setdefault((label, int(steps[-1])), {}).update(merged)
    if placed:
        rows = [{S.RUN: run, S.STEP: step, **values} for (run, step), values in placed.items()]
        frame = pd.DataFrame(rows)
        from saturation.replica import label_metrics, metric_variable_names

        names = metric_variable_names([c for c in frame.columns if c not in (S.RUN, S.STEP)])
        parts.append(label_metrics(frame.rename(columns=names).set_index([S.RUN, S.STEP]).to_xarray(), names))
    parts.extend(csvs)
    if not parts:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = out.combine_first(part)  # earlier sources win where both hold a value
    for part in parts:
        for var_name, var in part.data_vars.items():
            out[var_name].attrs.update(var.attrs)
        out.attrs.update(part.attrs)
    if unplaced:
        out.attrs["eval_only_unplaced"] = json.dumps(unplaced)
    out.attrs[S.ATTR_SOURCES] = json.dumps(sorted({s for p in parts for s in json.loads(p.attrs.get(S.ATTR_SOURCES, "[]"))}
                                                  | {log.path for log, _ in eval_logs}))
    return out


__all__ = ["IngestError", "IngestResult", "RunContents", "ingest_runs", "looks_like_run_dir", "read_index",
           "scan_run_dir"]
