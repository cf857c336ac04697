"""Ingest SkyRL run directories: trajectories, eval dumps, console logs, wandb, eval-log index.

:func:`ingest_runs` walks each run directory, recognises what it holds (docs/skyrl.md),
reads ``.zst`` files transparently and returns the trial Dataset (one trial per rollout,
per-level scores recomputed as the upstream reward computes them) plus the per-step metrics
Dataset, with every file, line and row accounted for:

* ``step_{k}/{train|eval}/{instance_id}_{rep}.json`` - one trial (:mod:`saturation.trajectory`);
  ``{instance_id}_{rep}.error`` - a crashed rollout, an ungraded trial (reason ``error_file``);
  ``step_None/eval/`` - an eval-only run's trials (phase ``eval_only``);
* ``dumped_evals/global_step_{k}_evals/{data_source}.jsonl`` - one eval trial per line;
  ``aggregated_results.jsonl`` beside it - that step's eval metrics (into the metrics);
  ``dumped_evals/eval_only/`` - an eval-only run's (phase ``eval_only``);
* console logs (``*.log``, ``*.out``, optionally ``.zst``) - per-step metrics and
  configuration (:mod:`saturation.skyrl`); eval-only logs (a ``Metrics from eval only
  run`` line) are placed at (run label, checkpoint step) using ``eval_log_index.txt`` and
  the step in the file or directory name;
* wandb run directories (``wandb/run-*/``, ``wandb/offline-run-*/``) - per-step metrics from
  the ``run-*.wandb`` history (optional extra ``saturation[wandb]``; :mod:`saturation.wandb_history`);
* per-step metrics CSVs (``*.csv``) - merged into the metrics Dataset;
* R2E-Gym trajectory files (``{exp_name}.jsonl``, one ``Trajectory.model_dump_json()`` per
  line, recognised by its first bytes ``{"trajectory_steps":``) - one eval trial per line
  with the binary resolve ``reward``; the checkpoint step from the file name
  (``CKPT_STEP_RE``), the run label and arm from ``eval_log_index.txt``;
* anything else is listed as ignored.

Nothing is evaluated or unpickled: JSON and Python literals only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import xarray as xr

from saturation import localization as L
from saturation import schema as S
from saturation import streams
from saturation import trajectory as T
from saturation.io import dataset_from_frame
from saturation.progress import Progress
from saturation.series import label_metrics, metric_variable_names, read_metrics_csv
from saturation.skyrl import (
    RUN_KEY,
    ConsoleLog,
    metrics_dataset,
    read_console_log,
)
from saturation.streams import TruncatedStreamError
from saturation.wandb_history import read_wandb_run, require_wandb

TRAJ_RE = re.compile(
    r"(?:^|/)step_(?P<step>\d+|None)/(?P<phase>train|eval)/(?P<name>[^/]+)\.(?P<ext>json|error)"
    r"(?:\.zst)?$"
)
EVAL_DUMP_RE = re.compile(
    r"(?:^|/)(?:global_step_(?P<step>\d+)_evals|(?P<eval_only>eval_only))/(?P<source>[^/]+)"
    r"\.jsonl(?:\.zst)?$"
)
#: the eval metrics SkyRL writes beside a step's per-data-source dumps (one JSON line)
AGGREGATED_NAME = "aggregated_results"
#: a wandb run directory inside the run directory (``wandb/run-20261201_120000-abc123/...``)
WANDB_RE = re.compile(r"(?:^|/)(?P<dir>wandb/(?:offline-)?run-[^/]+)/")
#: any other file under a ``wandb/`` directory (``debug.log``, ``debug-internal.log``)
WANDB_INTERNAL_RE = re.compile(r"(?:^|/)wandb/")
LOG_SUFFIXES = (".log", ".log.zst", ".out", ".out.zst")
METRICS_SUFFIXES = (".csv", ".csv.zst")
INDEX_NAME = "eval_log_index.txt"
#: checkpoint step in an eval-log file name (the last match counts)
CKPT_STEP_RE = re.compile(r"(?:global_step|step|ckpt)[_-]?(?P<step>\d+)", re.I)
#: an index line longer than this is malformed (and the line regex stays cheap)
MAX_INDEX_LINE = 4096
INDEX_LINE_RE = re.compile(r"^(?P<name>\S+?)\s*(?:[,:=\t]|->|\s)\s*(?P<label>\S.*?)\s*$")
#: the first bytes of an R2E-Gym trajectory file: ``Trajectory.model_dump_json()`` (pydantic's
#: compact JSON, fields in declaration order; R2E-Gym@69bc953
#: ``src/r2egym/agenthub/trajectory/trajectory.py:49-57``) written one per line by
#: ``runagent_multiple`` (``src/r2egym/agenthub/run/edit.py:218,290``)
R2E_SIGNATURE = '{"trajectory_steps":'
JSONL_SUFFIXES = (".jsonl", ".jsonl.zst")
#: the dataset coordinate of R2E-Gym trials whose ``ds`` names no data source
R2E_DATASET = "r2egym"
#: the step given to eval-only results whose checkpoint step is in no file or directory name
EVAL_ONLY_STEP = 0


class IngestError(ValueError):
    """Strict-mode ingest failure; the message lists every problem with file[:line]."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = "\n".join(f"  - {p}" for p in self.problems[:50])
        more = f"\n  ... and {len(self.problems) - 50} more" if len(self.problems) > 50 else ""
        super().__init__(
            f"{len(self.problems)} problem(s) while ingesting (use lenient mode to ingest the rest):\n{shown}{more}"
        )


@dataclass
class RunContents:
    """What one run directory holds (paths sorted)."""

    root: Path
    trajectories: list[tuple[Path, int, str, str, str]] = field(default_factory=list)  # path, step, phase, name, ext
    eval_dumps: list[tuple[Path, int, str, str]] = field(default_factory=list)  # path, step, phase, data source
    eval_aggregates: list[tuple[Path, int, str]] = field(default_factory=list)  # path, step, phase
    logs: list[Path] = field(default_factory=list)
    wandb_runs: list[Path] = field(default_factory=list)  # the wandb run directories
    wandb_files: list[Path] = field(default_factory=list)  # every file inside them
    metrics_csvs: list[Path] = field(default_factory=list)
    r2e_trajectories: list[Path] = field(default_factory=list)  # R2E-Gym {exp_name}.jsonl files
    index: list[Path] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        return {
            "trajectory_files": len(self.trajectories),
            "eval_dump_files": len(self.eval_dumps),
            "eval_aggregate_files": len(self.eval_aggregates),
            "console_logs": len(self.logs),
            "wandb_runs": len(self.wandb_runs),
            "metrics_csvs": len(self.metrics_csvs),
            "r2e_trajectory_files": len(self.r2e_trajectories),
            "index_files": len(self.index),
            "ignored_files": len(self.ignored),
        }


def _files(root: Path) -> list[Path]:
    """Every regular file under ``root``, sorted; symbolic links to directories (wandb's
    ``latest-run``) are not followed, so nothing is read twice."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        out.extend(Path(dirpath) / f for f in filenames if os.path.isfile(os.path.join(dirpath, f)))
    return sorted(out)


def scan_run_dir(root: str | Path) -> RunContents:
    """Classify every file under ``root`` (module docstring); nothing is read yet.

    Parameters
    ----------
    root : path
        The run directory; symbolic links to directories under it are not followed.

    Returns
    -------
    RunContents
        Every regular file under ``root``, sorted, by kind: trajectories, eval dumps and
        aggregates (with step and phase), console logs, wandb run directories and their
        files, metrics CSVs, R2E-Gym trajectory files (recognised by their first bytes),
        eval-log index files, and the rest as ignored.

    Raises
    ------
    FileNotFoundError
        If ``root`` is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a directory")
    out = RunContents(root)
    only = EVAL_ONLY_STEP  # placeholder: ingest_runs places eval-only results (_eval_only_step)
    wandb_dirs: set[Path] = set()
    for path in _files(root):
        rel = path.relative_to(root).as_posix()
        name = path.name.lower()
        if m := WANDB_RE.search(rel):
            wandb_dirs.add(root / rel[: m.end("dir")])
            out.wandb_files.append(path)
        elif WANDB_INTERNAL_RE.search(rel):  # wandb's own debug logs beside its run directories
            out.ignored.append(path)
        elif m := TRAJ_RE.search(rel):
            step, phase = (only, "eval_only") if m["step"] == "None" else (int(m["step"]), m["phase"])
            out.trajectories.append((path, step, phase, m["name"], m["ext"]))
        elif m := EVAL_DUMP_RE.search(rel):
            step, phase = (only, "eval_only") if m["eval_only"] else (int(m["step"]), "eval")
            if m["source"] == AGGREGATED_NAME:
                out.eval_aggregates.append((path, step, phase))
            else:
                out.eval_dumps.append((path, step, phase, m["source"]))
        elif name == INDEX_NAME:
            out.index.append(path)
        elif name.endswith(LOG_SUFFIXES):
            out.logs.append(path)
        elif name.endswith(METRICS_SUFFIXES):
            out.metrics_csvs.append(path)
        elif name.endswith(JSONL_SUFFIXES) and is_r2e_trajectory_file(path):
            out.r2e_trajectories.append(path)
        else:
            out.ignored.append(path)
    out.wandb_runs = sorted(wandb_dirs)
    return out


def looks_like_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory holding SkyRL output (trajectories, eval dumps,
    console logs or an eval-log index) rather than graded-trial tables."""
    path = Path(path)
    if not path.is_dir():
        return False
    c = scan_run_dir(path)
    return bool(
        c.trajectories or c.eval_dumps or c.eval_aggregates or c.logs or c.wandb_runs or c.index or c.r2e_trajectories
    )


def is_r2e_trajectory_file(path: str | Path) -> bool:
    """True when the file's first non-blank characters are an R2E-Gym trajectory's
    (``R2E_SIGNATURE``); an unreadable file is not one (it is listed as ignored)."""
    try:
        with streams.open_text(path) as f:
            head = f.read(4096).lstrip()
    except (OSError, TruncatedStreamError, ValueError):
        return False
    return head.startswith(R2E_SIGNATURE)


def read_index(path: str | Path, problems: list[str]) -> dict[str, str]:
    """``eval_log_index.txt``: one ``<eval-log file name> <run label>`` per line (separated by
    whitespace, tab, ``,``, ``:``, ``=`` or ``->``); blank lines and ``#`` comments ignored;
    a malformed line is reported as ``file:line``."""
    out: dict[str, str] = {}
    try:
        lines = list(streams.iter_lines(path, max_line=MAX_INDEX_LINE))
    except (TruncatedStreamError, OSError) as exc:
        problems.append(f"{path}: unreadable ({exc})")
        return out
    for number, raw in lines:
        line = raw.strip()
        if raw is streams.OVERLONG:
            problems.append(f"{path}:{number}: index line longer than {MAX_INDEX_LINE} characters")
            continue
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
        self.statuses: dict[str, int] = {}
        self.mismatches: dict[str, int] = {}
        self.no_gold = 0
        self.bytes = 0
        self.score_mismatches = 0

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
        status = row.get("answer_status")
        if status:
            self.statuses[status] = self.statuses.get(status, 0) + 1
        for level in filter(None, str(row.get("mismatched_levels") or "").split(",")):
            self.mismatches[level] = self.mismatches.get(level, 0) + 1
        if row.get("score_mismatch") == 1.0:
            self.score_mismatches += 1
        if row[S.GRADED] and all(math.isnan(row.get(f"{lvl}_{S.N_GOLD}", math.nan)) for lvl in S.CANONICAL_LEVELS):
            self.no_gold += 1


def _prompt_id(record: Mapping[str, Any]) -> str:
    extras = record.get("env_extras")
    for source in (extras if isinstance(extras, Mapping) else {}, record):
        for key in ("instance_id", "task_id", "uid"):
            if isinstance(source.get(key), str | int) and str(source[key]):
                return str(source[key])
    prompt = json.dumps(record.get("input_prompt"), sort_keys=True, default=str)
    return "prompt-" + hashlib.sha1(prompt.encode()).hexdigest()[:12]


def _eval_dump_rows(
    path: Path,
    step: int,
    phase: str,
    source: str,
    run: str,
    include_added: bool,
    rows: _Rows,
    problems: list[str],
    counts: dict[tuple[int, str], int],
) -> None:
    for where, record in _jsonl_records(path, rows, problems):
        row = _eval_record(record, where, step, phase, source, run, include_added, counts, problems)
        if row is None:
            rows.rejected += 1
        else:
            rows.add(row)


def _jsonl_records(path: Path, rows: _Rows, problems: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``file:line``, object) for every JSON-object line of a JSONL file; each non-blank
    line is counted read, and an overlong, malformed or non-object line is rejected with a
    problem (so is the damage of a truncated or unreadable file: the lines before it count)."""
    try:
        for number, raw in streams.iter_lines(path):
            if not raw.strip():
                continue
            rows.read += 1
            rows.bytes += len(raw)
            where = f"{path}:{number}"
            if raw is streams.OVERLONG:
                problems.append(f"{where}: line longer than {streams.MAX_LINE_CHARS:,} characters")
                rows.rejected += 1
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError) as exc:  # malformed, a 5,000-digit integer, deep nesting
                problems.append(f"{where}: malformed JSON ({str(exc)[:100]})")
                rows.rejected += 1
                continue
            if not isinstance(record, dict):
                problems.append(f"{where}: expected a JSON object, found {type(record).__name__}")
                rows.rejected += 1
                continue
            yield where, record
    except TruncatedStreamError as exc:
        problems.append(f"{exc}; the lines before it were ingested")
    except OSError as exc:
        problems.append(f"{path}: unreadable ({exc}); the lines before it were ingested")


def _dump_score(score: Any) -> tuple[float, float] | None:
    """``(reward, last)`` of an eval-dump ``score``: a number, or SkyRL's per-token list
    reduced as ``get_metrics_from_generator_output`` reduces it (the reward is the sum, as
    in ``avg_score``; pass@n looks at the last token's value). None when not numeric."""

    def number(x: Any) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)

    if number(score):
        return float(score), float(score)
    if isinstance(score, list) and score and all(number(x) for x in score):
        try:
            total = math.fsum(score)
        except OverflowError:
            return None
        return (total, float(score[-1])) if math.isfinite(total) else None
    return None


def _eval_record(
    record: dict[str, Any],
    where: str,
    step: int,
    phase: str,
    source: str,
    run: str,
    include_added: bool,
    counts: dict[tuple[int, str], int],
    problems: list[str],
) -> dict[str, Any] | None:
    """One eval-dump line as a trial (``sample`` numbers the prompt's rollouts within the
    step, across the step's data-source files). Level scores only when the transcript holds
    exactly one ``localization_finish`` call; otherwise the logged score is kept and the
    trial is marked ``not_rescored``."""
    inst = _prompt_id(record)
    sample = counts.get((step, inst), 0)
    counts[(step, inst)] = sample + 1
    base = {
        S.RUN: run,
        S.STEP: step,
        S.INSTANCE_ID: inst,
        S.SAMPLE: sample,
        S.PHASE: phase,
        S.DATASET: str(record.get("data_source") or source),
        "source": where,
        "stop_reason": str(record.get("stop_reason") or ""),
        "error_message": "",
    }
    raw_extras = record.get("env_extras")
    extras: Mapping[str, Any] = raw_extras if isinstance(raw_extras, Mapping) else {}
    target = extras.get("file_changes") if extras.get("file_changes") is not None else extras.get("target")
    try:
        gold = T.gold_of(target, include_added)
    except ValueError as exc:
        problems.append(
            f"{where}: field 'env_extras.{'file_changes' if 'file_changes' in extras else 'target'}': {exc}"
        )
        return None
    score = record.get("score")
    if score is None:
        return {
            **base,
            S.GRADED: False,
            S.REWARD: 0.0,
            "ungraded_reason": L.NO_SCORE,
            "answer_status": "",
            "n_locations": math.nan,
            "score_last": math.nan,
            "rescored": 0.0,
            **T.level_values(None),
        }
    reduced = _dump_score(score)
    if reduced is None:
        problems.append(f"{where}: field 'score': {str(score)[:60]} is not a finite number or a list of them")
        return None
    reward, last = reduced
    row = {**base, S.GRADED: True, S.REWARD: reward, "ungraded_reason": "", "score_last": last}
    transcript = record.get("output_response")
    try:
        calls = L.finish_calls_in_transcript(transcript)
    except L.UngradedAnswer as exc:
        return T.ungraded_row(row, exc, rescored=0.0, score_mismatch=math.nan)
    if len(calls) != 1 or gold is None:
        status = L.SEVERAL_FINISH_CALLS if len(calls) > 1 else L.NOT_RESCORED
        return {
            **row,
            "answer_status": status,
            "n_locations": math.nan,
            "rescored": 0.0,
            "score_mismatch": math.nan,
            **T.level_values(None),
        }
    if not L.transcript_passes_last_turn_check(transcript):
        status, locations = L.FINISH_CALL_REJECTED, []  # upstream scores a rejected call 0
    else:
        status = L.EMPTY_FILE_NAME if any(not loc.file.strip() for loc in calls[0]) else L.FINISH_CALL
        locations = calls[0]
    scores = L.score_answer(locations, gold)
    total = sum(scores[level][S.F1] for level in S.CANONICAL_LEVELS)
    return {
        **row,
        "answer_status": status,
        "n_locations": float(len(locations)),
        "rescored": 1.0,
        # codescout's default reward is the sum of the three F1 (other reward terms differ)
        "score_mismatch": float(math.isfinite(total) and abs(total - reward) > T.F1_TOLERANCE),
        **T.level_values(scores),
    }


# ------------------------------------------------------------------ result
@dataclass
class IngestResult:
    """Trials and metrics of the ingested run directories, with the accounting."""

    trials: xr.Dataset | None
    metrics: xr.Dataset | None
    problems: list[str]
    accounting: dict[str, Any]


def _is_training(log: ConsoleLog) -> bool:
    """A log holding training steps. A log with an eval-only line is an eval-only run's log
    unless it also holds steps other than 0 (step 0 is both the eval-only run's tracker
    block and a training run's pre-training eval)."""
    return bool(log.steps) and (not log.eval_only or bool(set(log.steps) - {0}))


def _dir_identity(
    root: Path, logs: Sequence[ConsoleLog], labels: Mapping[str, str], index_map: Mapping[str, str]
) -> str:
    """The run label of a directory: ``labels``, else its training logs' model path, else
    (an eval-only run) the index label or model path of its eval-only log, else its name."""
    for key in (str(root), root.name, str(root.resolve())):
        if key in labels:
            return labels[key]
    training = [log for log in logs if _is_training(log)]
    runs = {log.run for log in training if RUN_KEY in log.config}
    if len(runs) == 1:
        return runs.pop()
    if not training:
        evals = [log for log in logs if log.eval_only]
        names = {index_map[Path(log.path).name] for log in evals if Path(log.path).name in index_map}
        names = names or {log.config[RUN_KEY] for log in evals if RUN_KEY in log.config}
        if len(names) == 1:
            return names.pop()
    return root.name


def _merge_logs(logs: Sequence[ConsoleLog], run: str) -> ConsoleLog:
    """Several training logs of one run (restarts) as one; the first value of a key wins."""
    out = ConsoleLog(", ".join(log.path for log in logs))
    for log in logs:
        out.config.update({k: v for k, v in log.config.items() if k not in out.config})
        for step, values in log.steps.items():
            out.merge_step(step, values)
        for name in (
            "lines",
            "block_lines",
            "blocks",
            "conflicts",
            "bytes_read",
            "interleaved",
            "markers_without_block",
            "sampling_unplaced",
        ):
            setattr(out, name, getattr(out, name) + getattr(log, name))
        out.problems.extend(log.problems)
        # dynamic sampling: the per-step counts came with the steps; the strategy and the lines
        out.sampling_events.extend(log.sampling_events)
        out.yaml_dynamic_sampling = out.yaml_dynamic_sampling or log.yaml_dynamic_sampling
    out.config[RUN_KEY] = run  # the run identity used everywhere
    return out


def _eval_only_step(root: Path, eval_logs: Sequence[ConsoleLog]) -> int | None:
    """The checkpoint step of a directory's eval-only results (one rule for its trials,
    dumps and log): the last step number in the name of its one eval-only log, else in the
    directory name, else in the model path the log was launched with
    (``trainer.policy.model.path=.../global_step_85``) when its eval-only logs agree on one,
    else None (a probe directory with one log per checkpoint names several: each log is
    placed by its own name, the directory's eval-only trials cannot be)."""
    names = [Path(eval_logs[0].path).name] if len(eval_logs) == 1 else []
    for name in (*names, root.name):
        steps = CKPT_STEP_RE.findall(name)
        if steps:
            return int(steps[-1])
    launched = _launched_steps(eval_logs)
    return launched[0] if len(launched) == 1 else None


def _launched_steps(eval_logs: Sequence[ConsoleLog]) -> list[int]:
    """The checkpoint steps in the model paths the eval-only logs were launched with, sorted."""
    return sorted({int(s[-1]) for log in eval_logs if (s := CKPT_STEP_RE.findall(log.config.get(RUN_KEY, "")))})


def _has_train_trials(c: RunContents) -> bool:
    """Whether a directory holds training trials or per-step evals of a training run."""
    return any(phase != "eval_only" for _, _, phase, _, _ in c.trajectories) or any(
        phase != "eval_only" for _, _, phase, _ in c.eval_dumps
    )


def _check_eval_only_placed(
    root: Path, c: RunContents, eval_logs: Sequence[ConsoleLog], only_step: int | None, problems: list[str]
) -> None:
    """A problem when a directory's eval-only trials cannot be placed because its eval-only
    logs name different checkpoints (they are kept at ``EVAL_ONLY_STEP``, phase eval_only)."""
    n = sum(phase == "eval_only" for _, _, phase, _, _ in c.trajectories)
    n += sum(phase == "eval_only" for _, _, phase, _ in c.eval_dumps)
    launched = _launched_steps(eval_logs)
    if only_step is None and n and len(launched) > 1:
        problems.append(
            f"{root}: {n} eval-only trial file(s), but its eval-only logs name checkpoints "
            f"{', '.join(map(str, launched))}: kept at step {EVAL_ONLY_STEP} (phase eval_only); give each "
            "checkpoint's eval its own directory"
        )


def _count_lines(path: Path, problems: list[str]) -> int:
    """Non-blank lines of a text file (up to the damage of a damaged one, reported)."""
    n = 0
    try:
        for _, line in streams.iter_lines(path):
            n += bool(line.strip())
    except (TruncatedStreamError, OSError) as exc:
        problems.append(f"{exc}; its {n} complete lines are counted as superseded")
    return n


def _read_aggregate(path: Path, problems: list[str]) -> dict[str, float] | None:
    """The eval metrics of an ``aggregated_results.jsonl`` (one JSON object)."""
    values: dict[str, float] = {}
    try:
        for number, raw in streams.iter_lines(path):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                problems.append(f"{path}:{number}: malformed JSON ({str(exc)[:100]})")
                return None
            if not isinstance(record, dict):
                problems.append(f"{path}:{number}: expected a JSON object of eval metrics")
                return None
            for key, value in record.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    values[str(key)] = float(value)
    except (TruncatedStreamError, OSError) as exc:
        problems.append(f"{path}: unreadable ({exc})")
        return None
    return values


def _read_logs(
    c: RunContents, bar: Progress, problems: list[str], notes: list[str]
) -> tuple[list[ConsoleLog], list[ConsoleLog]]:
    """The console logs and wandb histories of one run directory. A wandb run directory with
    no ``run-*.wandb`` history (a run never synced, or cleaned) is a problem unless the
    directory's console logs hold its training steps: then a note, and the logs are read."""
    logs = []
    for path in c.logs:
        bar.set_item(f"ingest {path.name}")
        logs.append(
            read_console_log(
                path, strict=False, progress=lambda n, p=path: bar.set_item(f"ingest {p.name} {n / 1e6:.0f} MB")
            )
        )
        problems.extend(logs[-1].problems)
        bar.update(nbytes=logs[-1].bytes_read)
    wandb_logs = []
    for wdir in c.wandb_runs:
        bar.set_item(f"ingest {wdir.name}")
        log = read_wandb_run(wdir)
        bar.update()
        if not log.bytes_read and any(_is_training(console) for console in logs):
            notes.append(
                f"{wdir}: a wandb run directory without a run-*.wandb history file; "
                "its run's metrics are read from the console log"
            )
            continue
        wandb_logs.append(log)
        problems.extend(log.problems)
    return logs, wandb_logs


def _add_trajectory_rows(
    tasks: Sequence[T.TrajectoryTask], results: Sequence[Any], rows: _Rows, problems: list[str]
) -> None:
    """Count every trajectory file as one row read: kept, or rejected (unreadable, or a
    duplicate of a rollout already read)."""
    seen_keys: dict[tuple[str, int, str, int], str] = {}
    for task, (row, file_problems, nbytes) in zip(tasks, results, strict=True):
        rows.read += 1
        rows.bytes += nbytes
        problems.extend(file_problems)
        if row is not None:
            key = (row[S.PHASE], row[S.STEP], row[S.INSTANCE_ID], row[S.SAMPLE])
            if key in seen_keys:
                problems.append(f"{task.path}: duplicate rollout (same instance and rep as {seen_keys[key]})")
                row = None
            else:
                seen_keys[key] = task.path
        if row is None:
            rows.rejected += 1
        else:
            rows.add(row)


def _add_eval_dump_rows(
    c: RunContents,
    only: int,
    run: str,
    include_added: bool,
    eval_traj_keys: set[tuple[str, int]],
    rows: _Rows,
    problems: list[str],
    bar: Progress,
) -> int:
    """The rows of one directory's eval dumps; returns how many were superseded by eval
    trajectories of the same step (counted read and superseded, not kept)."""
    superseded = 0
    dump_counts: dict[tuple[int, str], int] = {}
    for path, step, phase, source in c.eval_dumps:
        step = only if phase == "eval_only" else step
        if step >= T.MAX_STEP:
            n = _count_lines(path, problems)
            problems.append(
                f"{path}: step {step} in the directory name is too large (at most 2^53 - 1); its {n} lines rejected"
            )
            rows.read += n
            rows.rejected += n
        elif (phase, step) in eval_traj_keys:
            # the eval trajectories of this step carry the same rollouts with gold and answers
            n = _count_lines(path, problems)
            rows.read += n
            rows.superseded += n
            superseded += n
        else:
            _eval_dump_rows(path, step, phase, source, run, include_added, rows, problems, dump_counts)
        bar.update()
    return superseded


def _r2e_reward(value: Any) -> float | None:
    """An R2E-Gym ``reward``: 0/1 (a float, or a bool from the SWE-bench path); None if unset."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    raise ValueError(f"{str(value)[:40]!r} is not a finite number")


def _r2e_record(record: dict[str, Any], where: str, base: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    """One R2E-Gym trajectory line as a trial (``sample`` numbers an instance's attempts in the file)."""
    raw_ds = record.get("ds")
    ds: Mapping[str, Any] = raw_ds if isinstance(raw_ds, Mapping) else {}
    inst = next(
        (str(src[k]) for src in (ds, record) for k in ("instance_id", "docker_image") if src.get(k)),
        None,
    )
    if inst is None:
        raise ValueError("field 'ds.docker_image': missing (no instance id)")
    try:
        reward = _r2e_reward(record.get("reward"))
    except ValueError as exc:
        raise ValueError(f"field 'reward': {exc}") from None
    steps = record.get("trajectory_steps")
    steps = steps if isinstance(steps, list) else []
    tokens = [s.get("token_usage_total") for s in steps if isinstance(s, Mapping)]
    sample = counts.get(inst, 0)
    counts[inst] = sample + 1
    return {
        **base,
        S.INSTANCE_ID: inst,
        S.SAMPLE: sample,
        S.DATASET: str(ds.get("data_source") or R2E_DATASET),
        "source": where,
        "stop_reason": str(record.get("exit_reason") or ""),
        "error_message": "",
        S.GRADED: reward is not None,
        S.REWARD: 0.0 if reward is None else reward,
        "ungraded_reason": L.NO_SCORE if reward is None else "",
        "answer_status": "",
        "agent_steps": float(len(steps)),
        "tokens_total": float(sum(t for t in tokens if isinstance(t, int | float))) if tokens else math.nan,
        **T.level_values(None),
    }


def _r2e_rows(path: Path, step: int, phase: str, run: str, arm: str | None, rows: _Rows, problems: list[str]) -> None:
    """The trials of one R2E-Gym trajectory file; every non-blank line is read, kept or rejected."""
    counts: dict[str, int] = {}
    base = {S.RUN: run, S.STEP: step, S.PHASE: phase, **({S.ARM: arm} if arm is not None else {})}
    for where, record in _jsonl_records(path, rows, problems):
        try:
            rows.add(_r2e_record(record, where, base, counts))
        except ValueError as exc:
            problems.append(f"{where}: {str(exc)[:160]}")
            rows.rejected += 1


def _add_r2e_rows(
    c: RunContents,
    only_step: int | None,
    run: str,
    arm: str | None,
    index_map: Mapping[str, str],
    rows: _Rows,
    problems: list[str],
    bar: Progress,
) -> None:
    """The rows of a directory's R2E-Gym trajectory files: a file's run label (and arm) is its
    ``eval_log_index.txt`` label, else the directory's; its checkpoint step the last step
    number in its name, else the directory's eval-only step (phase ``eval``); with neither,
    phase ``eval_only`` at ``EVAL_ONLY_STEP``."""
    for path in c.r2e_trajectories:
        name = path.name[: -len(".zst")] if path.name.endswith(".zst") else path.name
        label = index_map.get(path.name) or index_map.get(name) or index_map.get(Path(name).stem)
        steps = CKPT_STEP_RE.findall(Path(name).stem)
        step = int(steps[-1]) if steps else only_step
        phase = "eval" if step is not None else "eval_only"
        bar.set_item(f"ingest {path.name}")
        _r2e_rows(path, EVAL_ONLY_STEP if step is None else step, phase, label or run, label or arm, rows, problems)
        bar.update()


def _eval_aggregate_points(
    c: RunContents, only: int, run: str, dir_name: str, index_map: Mapping[str, str], problems: list[str], bar: Progress
) -> list[tuple[str, int, dict[str, float], str]]:
    """(run label, step, metrics, file) of one directory's eval aggregates."""
    points = []
    for path, step, phase in c.eval_aggregates:
        step = only if phase == "eval_only" else step
        if step >= T.MAX_STEP:
            problems.append(f"{path}: step {step} in the directory name is too large (at most 2^53 - 1)")
            continue
        values = _read_aggregate(path, problems)
        if values is not None:
            label = run
            if phase == "eval_only":
                label = next((index_map[k] for k in (dir_name, path.name) if k in index_map), run)
            points.append((label, step, values, str(path)))
        bar.update()
    return points


def _read_metrics_csvs(c: RunContents, problems: list[str], bar: Progress) -> list[xr.Dataset]:
    out = []
    for path in c.metrics_csvs:
        try:
            out.append(read_metrics_csv(path))
        except ValueError as exc:
            problems.append(str(exc))
        bar.update()
    return out


def ingest_runs(
    run_dirs: Iterable[str | Path],
    *,
    strict: bool = True,
    labels: Mapping[str, str] | None = None,
    arms: Mapping[str, str] | None = None,
    index: Iterable[str | Path] = (),
    include_added: bool = False,
    progress: bool | None = None,
    workers: int | None = None,
    executor: Executor | None = None,
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
    include_added : bool, default False
        Count ``added_modules``/``added_entities`` as gold locations (the upstream reward
        does not, so the recomputed F1 then differs from the logged one).
    progress : bool, optional
        Progress bar on stderr with files and MB/s (default: when stderr is a terminal).
    workers : int, optional
        Processes that parse trajectory files (default: the CPUs available).
    executor : concurrent.futures.Executor, optional
        Parse trajectories on this executor instead (e.g. ``Client.get_executor()`` of a
        dask.distributed cluster whose workers see the files).

    Returns
    -------
    IngestResult
        ``trials``: dims trial, level (file, module, entity); coords run, step,
        instance_id, sample, phase, dataset (and arm); graded, reward, per-level scores,
        ``ungraded_reason``, ``answer_status``, ``n_locations``, ``reward_dict_mismatch``,
        ``source`` (file[:line]) and every numeric ``reward_dict``/``metrics_dict`` entry.
        ``attrs``: rows_read == rows_kept + rows_rejected + rows_superseded. ``metrics``:
        (run, step) Dataset of the console logs, wandb histories, eval aggregates and
        metrics CSVs. ``accounting``: per directory and file kind.
    """
    labels, arms = dict(labels or {}), dict(arms or {})
    dirs = [Path(d) for d in run_dirs]
    contents = [scan_run_dir(d) for d in dirs]
    problems: list[str] = []
    index_map: dict[str, str] = {}
    for path in [*map(Path, index), *(p for c in contents for p in c.index)]:
        index_map.update(read_index(path, problems))
    histories = [str(r) for c in contents for r in c.wandb_runs if any(r.glob("run-*.wandb"))]
    if histories:
        require_wandb(histories)
    n_files = sum(
        len(c.trajectories)
        + len(c.eval_dumps)
        + len(c.eval_aggregates)
        + len(c.logs)
        + len(c.wandb_runs)
        + len(c.metrics_csvs)
        + len(c.r2e_trajectories)
        + len(c.index)
        for c in contents
    )
    bar = Progress(n_files, "ingest", enabled=progress)
    rows = _Rows()
    train_logs: dict[str, ConsoleLog] = {}
    eval_logs: list[tuple[ConsoleLog, str, int | None]] = []
    eval_points: list[tuple[str, int, dict[str, float], str]] = []  # run, step, metrics, file
    csvs: list[xr.Dataset] = []
    per_dir: list[dict[str, Any]] = []
    notes: list[str] = []  # what was left unread on purpose, and why (not problems)
    seen_runs: dict[str, tuple[Path, set[int] | None]] = {}  # run -> (first directory, eval-only checkpoints)
    try:  # the display is closed (its status lines stop) even when a directory fails
        for root, c in zip(dirs, contents, strict=True):
            logs, wandb_logs = _read_logs(c, bar, problems, notes)
            run = _dir_identity(root, [*logs, *wandb_logs], labels, index_map)
            # wandb first: its values are unrounded, the console's are rounded to 4 places
            training = [log for log in [*wandb_logs, *logs] if _is_training(log)]
            only_step = _eval_only_step(root, [log for log in logs if log.eval_only])
            # one run's checkpoint evals, a directory per checkpoint (a probe set at steps 5/10/15),
            # share the run's label: their trials differ in step, so they may; nothing else may
            checkpoint = None if training or c.wandb_runs or _has_train_trials(c) else only_step
            if run in seen_runs:
                first, checkpoints = seen_runs[run]
                if checkpoint is None or checkpoints is None or checkpoint in checkpoints:
                    raise ValueError(
                        f"run directories {first} and {root} have the same run identity {run!r}; "
                        "give each a label (labels= / --label DIR=NAME)"
                    )
                checkpoints.add(checkpoint)
            else:
                seen_runs[run] = (root, None if checkpoint is None else {checkpoint})
            if training:
                train_logs[run] = _merge_logs(training, run)
            for log in logs:
                if log.eval_only:
                    name_steps = CKPT_STEP_RE.findall(Path(log.path).name)
                    step = int(name_steps[-1]) if name_steps else only_step
                    eval_logs.append((log, index_map.get(Path(log.path).name, run), step))
            only = EVAL_ONLY_STEP if only_step is None else only_step
            _check_eval_only_placed(root, c, [log for log in logs if log.eval_only], only_step, problems)
            start = rows.n
            rejected_before = rows.rejected
            tasks = [
                T.TrajectoryTask(
                    str(path), only if phase == "eval_only" else step, phase, name, ext, run, include_added
                )
                for path, step, phase, name, ext in c.trajectories
            ]
            bar.set_item(f"ingest {root.name} trajectories")
            results = T.read_trajectories(
                tasks, workers=workers, executor=executor, progress=lambda n, b: bar.update(n, nbytes=b)
            )
            _add_trajectory_rows(tasks, results, rows, problems)
            eval_traj_keys = {(t.phase, t.step) for t in tasks if t.phase != "train"}
            superseded = _add_eval_dump_rows(c, only, run, include_added, eval_traj_keys, rows, problems, bar)
            eval_points += _eval_aggregate_points(c, only, run, root.name, index_map, problems, bar)
            csvs += _read_metrics_csvs(c, problems, bar)
            arm = next((arms[k] for k in (str(root), root.name) if k in arms), None)
            _add_r2e_rows(c, only_step, run, arm, index_map, rows, problems, bar)
            bar.update(len(c.index))
            if arm is not None:
                rows.cols.setdefault(S.ARM, [None] * rows.n)
                for i in range(start, rows.n):  # the directory's arm, where a row has none of its own
                    if rows.cols[S.ARM][i] is None:
                        rows.cols[S.ARM][i] = arm
            per_dir.append(
                {
                    "dir": str(root),
                    "run": run,
                    **c.summary(),
                    "ignored": [str(p) for p in c.ignored],
                    "trials": rows.n - start,
                    "rejected": rows.rejected - rejected_before,
                    "eval_dump_rows_superseded": superseded,
                    "eval_only_step": only_step,
                    "console_logs": [log.accounting() for log in logs],
                    "wandb_runs_read": [log.accounting() for log in wandb_logs],
                }
            )
    finally:
        elapsed = bar.close()
    metrics = _metrics(train_logs, eval_logs, eval_points, csvs, problems)
    if strict and problems:
        raise IngestError(problems)
    trials = _trials_dataset(rows, [str(d) for d in dirs]) if rows.n else None
    accounting = {
        "rows_read": rows.read,
        "rows_kept": rows.n,
        "rows_rejected": rows.rejected,
        "rows_superseded": rows.superseded,
        "rows_ungraded": sum(rows.reasons.values()),
        "ungraded_reasons": dict(sorted(rows.reasons.items())),
        "answer_statuses": dict(sorted(rows.statuses.items())),
        "reward_dict_mismatches": dict(sorted(rows.mismatches.items())),
        "eval_score_mismatches": rows.score_mismatches,
        "graded_without_gold": rows.no_gold,
        "problems": len(problems),
        "notes": notes,
        "seconds": round(elapsed, 2),
        "megabytes": round(rows.bytes / 1e6, 1),
        "dirs": per_dir,
    }
    if trials is not None:
        trials.attrs["ingest_accounting"] = json.dumps(accounting, default=str)
        trials.attrs["ingest_problems"] = json.dumps(problems)
    return IngestResult(trials, metrics, problems, accounting)


def _trials_dataset(rows: _Rows, sources: Sequence[str]) -> xr.Dataset:

    frame = pd.DataFrame(rows.cols)
    if S.ARM in frame and frame[S.ARM].isna().any():
        frame[S.ARM] = frame[S.ARM].fillna("")
    strings = {"ungraded_reason", "answer_status", "mismatched_levels", "error_message", "stop_reason", "source"}
    for col in strings & set(frame.columns):
        frame[col] = frame[col].fillna("").astype(str)
    level_cols = {f"{lvl}_{fld}" for lvl in S.CANONICAL_LEVELS for fld in S.LEVEL_FIELDS}
    extra = [c for c in frame.columns if c not in {*S.TRIAL_COORDS, S.GRADED, S.REWARD, *level_cols}]
    for col in extra:
        if col not in strings:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    ungraded = int((~frame[S.GRADED].astype(bool)).sum())
    accounting = {"read": rows.read, "kept": rows.n, "ungraded": ungraded, "rejected": rows.rejected}
    ds = dataset_from_frame(frame, levels=list(S.CANONICAL_LEVELS), extra=extra, accounting=accounting, sources=sources)
    ds.attrs["rows_superseded"] = rows.superseded
    ds["ungraded_reason"].attrs["description"] = "why a rollout is ungraded: " + ", ".join(L.UNGRADED_REASONS)
    if "answer_status" in ds:
        ds["answer_status"].attrs["description"] = "where the graded answer came from: " + ", ".join(L.ANSWER_STATUSES)
    ds["source"].attrs["description"] = "file (and line, for eval dumps) the trial was read from"
    return ds


def _metrics(
    train_logs: Mapping[str, ConsoleLog],
    eval_logs: Sequence[tuple[ConsoleLog, str, int | None]],
    eval_points: Sequence[tuple[str, int, dict[str, float], str]],
    csvs: Sequence[xr.Dataset],
    problems: list[str],
) -> xr.Dataset | None:
    parts: list[xr.Dataset] = []
    if train_logs:
        parts.append(metrics_dataset(list(train_logs.values())))
    placed: dict[tuple[str, int], dict[str, float]] = {}
    unplaced = []
    for log, label, step in eval_logs:
        merged: dict[str, float] = {}
        for block in log.eval_only:
            merged.update(block)
        if step is None:
            unplaced.append({"file": log.path, "label": label, "metrics": merged})
            problems.append(
                f"{log.path}: no checkpoint step in the file or directory name; eval metrics kept in "
                "attrs['eval_only_unplaced']"
            )
            continue
        placed.setdefault((label, step), {}).update(merged)
    for label, step, values, _ in eval_points:
        point = placed.setdefault((label, step), {})
        point.update({k: v for k, v in values.items() if k not in point})  # a logged value wins
    if placed:
        rows = [{S.RUN: run, S.STEP: step, **values} for (run, step), values in placed.items()]
        frame = pd.DataFrame(rows)
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
    out.attrs[S.ATTR_SOURCES] = json.dumps(
        sorted(
            {s for p in parts for s in json.loads(p.attrs.get(S.ATTR_SOURCES, "[]"))}
            | {log.path for log, _, _ in eval_logs}
            | {f for _, _, _, f in eval_points}
        )
    )
    return out


__all__ = [
    "IngestError",
    "IngestResult",
    "RunContents",
    "ingest_runs",
    "looks_like_run_dir",
    "read_index",
    "scan_run_dir",
]
