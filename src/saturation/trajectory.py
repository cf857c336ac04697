"""One codescout trajectory file -> one trial row, graded as the upstream reward grades.

codescout writes ``{traj_dir}/step_{global_step}/{train|eval}/{instance_id}_{rep}.json``
with ``json.dump(result_dict, f, indent=2)`` (``src/generator/code_search_generator.py``,
docs/skyrl.md): eight top-level keys, of which ``messages`` (OpenHands event dumps with the
token ids of every turn, one integer per line) is 99 % of the 0.3-1.4 MB. The reader
decodes only the small top-level values it needs: with ``indent=2`` a top-level key is the
only place a line starts with exactly two spaces and a quote (a JSON string cannot hold a
raw newline), so each is found with :meth:`str.find` and decoded on its own with
:meth:`json.JSONDecoder.raw_decode`. ``messages`` is decoded only to tell a rejected
finish call from several (the file holds a ``localization_finish`` action but no
structured answer). Any other layout falls back to a full :func:`json.loads`; a file that
does not end with the closing brace is reported as truncated.

:func:`read_trajectories` maps :func:`trajectory_row` over many files, in a process pool or
on any executor with ``map`` (e.g. ``distributed.Client.get_executor()``); memory stays
bounded by one file per worker.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saturation import localization as L
from saturation import schema as S
from saturation import streams
from saturation.streams import TooLargeError, TruncatedStreamError, open_text, read_all

#: a trajectory that decompresses to more characters than this is not loaded (memory
#: bound; ``SATURATION_MAX_TRAJECTORY_BYTES``); reported as a problem
MAX_TRAJECTORY_BYTES = streams.env_int("SATURATION_MAX_TRAJECTORY_BYTES", 1 << 30)
#: top-level fields read from a trajectory (``messages`` only on demand)
FIELDS = (
    "instance_id",
    "target",
    "total_reward",
    "reward_dict",
    "parsed_final_message",
    "raw_final_message",
    "metrics_dict",
    "trajectory_format",
    "reward",
)
#: where SkyRL's mini-swe-agent example saves trajectories at codescout's paths
#: (``step_{k}/{train|eval}/{instance_id}_{rep}.json``; SkyRL a9564572
#: ``examples/train/mini_swe_agent/mini_swe_generator.py:103-125``, mini-swe-agent's
#: ``save_traj`` writing ``"trajectory_format": "mini-swe-agent-1"`` and a binary ``reward``)
OTHER_FORMATS = {"mini-swe-agent-1": "a mini-swe-agent trajectory (SkyRL's examples/train/mini_swe_agent)"}
#: steps and repetition numbers at or above this cannot be stored exactly (float64 / int64)
MAX_STEP = 2**53
#: how far the recomputed per-level F1 may differ from the logged one (rounding only)
F1_TOLERANCE = 1e-6
#: the level-field columns of a trial row (``file_f1`` ... ``entity_n_tp``)
LEVEL_COLUMNS = tuple(f"{level}_{fld}" for level in S.CANONICAL_LEVELS for fld in S.LEVEL_FIELDS)
#: names a ``reward_dict`` / ``metrics_dict`` entry may not take (they get an ``x_`` prefix)
RESERVED = frozenset(
    {
        *S.RESERVED_NAMES,
        *LEVEL_COLUMNS,
        "ungraded_reason",
        "answer_status",
        "n_locations",
        "stop_reason",
        "error_message",
        "source",
        "rescored",
        "reward_dict_mismatch",
        "mismatched_levels",
        "score_last",
        "score_mismatch",
    }
)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class TrajectoryTask:
    """What :func:`trajectory_row` needs for one file (picklable)."""

    path: str
    step: int
    phase: str
    name: str
    ext: str
    run: str
    include_added: bool


class TrajectoryFormatError(ValueError):
    """A trajectory file could not be read; the message names the file (and line)."""


def safe_name(key: str) -> str:
    """A netCDF-safe variable name for a logged key that cannot shadow a trial field."""
    name = "".join(ch if ch.isalnum() else "_" for ch in key).strip("_") or "value"
    return f"x_{name}" if name in RESERVED or name[0].isdigit() else name


def numbers(d: Any, taken: Iterable[str] = (), prefix: str = "") -> dict[str, float]:
    """Numeric (and boolean) top-level values of a mapping under :func:`safe_name` names;
    a name already in ``taken`` gets ``prefix``."""
    if not isinstance(d, Mapping):
        return {}
    taken = set(taken)
    out: dict[str, float] = {}
    for key, value in d.items():
        if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
            name = safe_name(str(key))
            if name in taken or name in out:
                name = safe_name(prefix + str(key))
            out[name] = float(value)
    return out


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def read_fields(text: str, path: str, *, with_messages: bool = False) -> dict[str, Any]:
    """The top-level values :data:`FIELDS` (and ``messages`` if asked) of a trajectory's
    text (module docstring). Raises :class:`TrajectoryFormatError` naming file and line."""
    if not text.startswith('{\n  "'):
        return _full(text, path)
    body = text.rstrip()
    if not body.endswith("\n}"):  # the top-level closing brace is the only "}" in column 0
        raise TrajectoryFormatError(f"{path}:{_line_of(text, len(body))}: truncated JSON (no closing brace)")
    wanted = set(FIELDS) | ({"messages"} if with_messages else set())
    out: dict[str, Any] = {}
    pos = text.find('\n  "')
    while pos >= 0:
        key_at = pos + 3
        try:
            key, after = _DECODER.raw_decode(text, key_at)
        except json.JSONDecodeError as exc:
            raise TrajectoryFormatError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg})") from exc
        if not text.startswith(": ", after):
            return _full(text, path)  # not json.dump(indent=2) output: decode it all
        if key in wanted:
            try:
                out[key], end = _DECODER.raw_decode(text, after + 2)
            except (json.JSONDecodeError, RecursionError):
                return _full(text, path)
            if not (text.startswith(',\n  "', end) or text.startswith("\n}", end)):
                return _full(text, path)  # something other than the next key or the end follows
        pos = text.find('\n  "', after)
    return out


def _full(text: str, path: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TrajectoryFormatError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg})") from exc
    except (ValueError, RecursionError) as exc:  # a 5,000-digit integer, nesting too deep
        raise TrajectoryFormatError(f"{path}: unreadable JSON ({str(exc)[:100]})") from exc
    if not isinstance(record, dict):
        raise TrajectoryFormatError(f"{path}: expected a JSON object, found {type(record).__name__}")
    return record


def ungraded_row(row: dict[str, Any], exc: L.UngradedAnswer, **fields: float) -> dict[str, Any]:
    """The trial row of an ungraded answer (reward 0, the reason and a short message, no
    level values): the one shape trajectories and eval dumps share; ``fields`` (the
    reader's own columns, e.g. ``reward_dict_mismatch``) go before the level values."""
    return {
        **row,
        S.GRADED: False,
        S.REWARD: 0.0,
        "ungraded_reason": exc.reason,
        "answer_status": "",
        "error_message": str(exc)[:200],
        "n_locations": math.nan,
        **fields,
        **level_values(None),
    }


def level_values(scores: Mapping[str, Mapping[str, float]] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for level in S.CANONICAL_LEVELS:
        for fld in S.LEVEL_FIELDS:
            out[f"{level}_{fld}"] = scores[level][fld] if scores is not None else math.nan
    return out


def split_name(name: str) -> tuple[str, int] | None:
    """``(instance_id, rep)`` of a file name ``{instance_id}_{rep}`` (split at the last ``_``)."""
    if "_" not in name:
        return None
    inst, rep = name.rsplit("_", 1)
    return (inst, int(rep)) if rep.isdigit() and inst else None


def gold_of(target: Any, include_added: bool) -> dict[str, set[str] | None] | None:
    """Gold keys per level from a trajectory's ``target``: codescout's list of file changes
    (or ``{"file_changes": [...]}``), agentic-code-search-oss's string (file level only);
    None when there is no target."""
    if target is None:
        return None
    if isinstance(target, str):
        return {L.FILE: L.gold_files_from_target_string(target), L.MODULE: None, L.ENTITY: None}
    changes = target.get("file_changes") if isinstance(target, Mapping) else target
    if changes is None:
        return None
    gold = L.gold_keys(changes, include_added=include_added)
    return {level: gold[level] for level in S.CANONICAL_LEVELS}


def compare_logged(scores: Mapping[str, Mapping[str, float]] | None, reward_dict: Any) -> tuple[int, list[str]]:
    """``(levels compared, levels whose recomputed F1 differs from the logged one)``: a level
    is compared when ``reward_dict`` logs its F1 (:data:`~saturation.localization.LOGGED_F1_KEYS`,
    or agentic-code-search-oss's ``file_level_score``) and it was recomputed."""
    if scores is None or not isinstance(reward_dict, Mapping):
        return 0, []
    compared, out = 0, []
    keys = {**L.LOGGED_F1_KEYS}
    if keys[L.FILE] not in reward_dict and "file_level_score" in reward_dict:
        keys[L.FILE] = "file_level_score"
    for level, key in keys.items():
        logged, mine = reward_dict.get(key), scores[level][S.F1]
        if (
            isinstance(logged, int | float)
            and not isinstance(logged, bool)
            and math.isfinite(logged)
            and math.isfinite(mine)
        ):
            compared += 1
            if abs(logged - mine) > F1_TOLERANCE:
                out.append(level)
    return compared, out


def _structured(raw: Any, parsed: Any) -> bool:
    """Whether ``raw_final_message`` is codescout's ``json.dumps(structured_locations)``
    rather than the model's own text: for a text answer codescout sets
    ``parsed_final_message`` from the same text (equal to it, or its last fenced block)."""
    if not isinstance(raw, str) or not raw.lstrip().startswith("["):
        return False
    return not (isinstance(parsed, str) and parsed and (raw == parsed or f"```{parsed}```" in raw))


def _answer(record: Mapping[str, Any], text: str, path: str) -> tuple[str, list[L.Location] | None]:
    """``(answer_status, locations)`` of a codescout trajectory, decided as the upstream
    reward decides it (module docstring of :mod:`saturation.localization`): the finish call
    counts only when the file holds a ``localization_finish`` action *and* codescout stored
    the structured locations in ``raw_final_message``; reads ``messages`` only to tell a
    rejected call from several calls."""
    if '"tool_name": "localization_finish"' not in text and '"tool_name":"localization_finish"' not in text:
        return L.NO_FINISH_CALL, None  # a JSON-looking text answer is still a text answer
    raw, parsed = record.get("raw_final_message"), record.get("parsed_final_message")
    if _structured(raw, parsed):
        locations = L.finish_call_locations(raw)
        if locations is not None:
            return L.FINISH_CALL, locations
    events = (
        read_fields(text, path, with_messages=True).get("messages") if "messages" not in record else record["messages"]
    )
    calls = L.finish_calls_in_events(events)
    if len(calls) > 1:
        return L.SEVERAL_FINISH_CALLS, None
    # exactly one call that codescout did not store: its last-turn sanity check rejected it
    return (L.FINISH_CALL_REJECTED if calls else L.NO_FINISH_CALL), None


def trajectory_row(task: TrajectoryTask) -> tuple[dict[str, Any] | None, list[str], int]:
    """One trajectory (or ``.error``) file as a trial row: ``(row or None, problems,
    bytes read)``. A rejected file has row None and its reasons in ``problems``."""
    path = Path(task.path)
    split = split_name(task.name)
    if split is None:
        return None, [f"{path}: file name is not <instance_id>_<rep>.{task.ext}"], 0
    inst, rep = split
    for what, value in (("repetition number", rep), ("step", task.step)):
        if value >= MAX_STEP:
            return None, [f"{path}: {what} {value} is too large (at most 2^53 - 1)"], 0
    base = {
        S.RUN: task.run,
        S.STEP: task.step,
        S.INSTANCE_ID: inst,
        S.SAMPLE: rep,
        S.PHASE: task.phase,
        S.DATASET: "",
        "source": str(path),
    }
    try:
        size = path.stat().st_size
        if task.ext == "error":
            with open_text(path) as stream:
                message = stream.read(4000).strip().splitlines()
            return (
                {
                    **base,
                    S.GRADED: False,
                    S.REWARD: 0.0,
                    "ungraded_reason": L.ERROR_FILE,
                    "answer_status": "",
                    "error_message": (message[0] if message else "")[:200],
                    "n_locations": math.nan,
                    "reward_dict_mismatch": math.nan,
                    **level_values(None),
                },
                [],
                size,
            )
        if size > MAX_TRAJECTORY_BYTES:
            return (
                None,
                [
                    f"{path}: trajectory file larger than {MAX_TRAJECTORY_BYTES:,} bytes, not read "
                    "(SATURATION_MAX_TRAJECTORY_BYTES)"
                ],
                0,
            )
        text = read_all(path, limit=MAX_TRAJECTORY_BYTES)
    except (TruncatedStreamError, TooLargeError) as exc:
        return None, [str(exc)], 0
    except OSError as exc:
        return None, [f"{path}: unreadable ({exc})"], 0
    try:
        return _graded_row(text, str(path), inst, base, task.include_added), [], size
    except TrajectoryFormatError as exc:
        return None, [str(exc)], size
    except ValueError as exc:  # a field of the wrong shape; the message names it
        return None, [f"{path}: {exc}"], size


def _graded_row(text: str, path: str, inst: str, base: dict[str, Any], include_added: bool) -> dict[str, Any]:
    record = read_fields(text, path)
    if record.get("instance_id") not in (None, inst):
        raise ValueError(f"field 'instance_id' is {record['instance_id']!r} but the file name says {inst!r}")
    reward = record.get("total_reward")
    fmt = record.get("trajectory_format")
    if reward is None and fmt is not None:  # another agent's trajectory, not codescout's
        what = OTHER_FORMATS.get(str(fmt), f"a {str(fmt)[:40]!r} trajectory")
        raise ValueError(
            f"another format: {what}, trajectory_format {str(fmt)[:40]!r}, reward {record.get('reward')!r}; "
            "not a codescout trajectory (no 'total_reward', no localisation answer): not read"
        )
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
        raise ValueError(f"field 'total_reward': {reward!r} is not a finite number")
    reward_dict = record.get("reward_dict")
    extra = numbers(reward_dict)
    extra.update(numbers(record.get("metrics_dict"), taken=extra, prefix="metrics_dict_"))
    try:
        gold = gold_of(record.get("target"), include_added)
    except ValueError as exc:
        raise ValueError(f"field 'target': {exc}") from exc
    row = {**base, S.GRADED: True, S.REWARD: float(reward), "ungraded_reason": "", "error_message": ""}
    try:
        if isinstance(record.get("target"), str):  # agentic-code-search-oss: the text answer
            status, pred = L.TEXT_ANSWER, L.text_answer_keys(record.get("raw_final_message"))
            n_locations = float(len(pred[L.ENTITY]))
        else:
            status, locations = _answer(record, text, path)
            if locations is not None and any(not loc.file.strip() for loc in locations):
                status = L.EMPTY_FILE_NAME
            pred = L.predicted_keys(locations or [])
            n_locations = float(len(locations or []))  # 0: nothing was scored
    except L.UngradedAnswer as exc:
        return {**ungraded_row(row, exc, reward_dict_mismatch=math.nan), **extra}
    scores = L.score_keys(pred, gold) if gold is not None else None
    compared, mismatch = compare_logged(scores, reward_dict)
    return {
        **row,
        "answer_status": status,
        "n_locations": n_locations,
        "reward_dict_mismatch": float(bool(mismatch)) if compared else math.nan,
        "mismatched_levels": ",".join(mismatch),
        **level_values(scores),
        **extra,
    }


def read_trajectories(
    tasks: Sequence[TrajectoryTask],
    *,
    workers: int | None = None,
    executor: Executor | None = None,
    chunk: int = 32,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[dict[str, Any] | None, list[str], int]]:
    """:func:`trajectory_row` of every task, in task order.

    ``executor``: any object with a ``concurrent.futures``-style ``map`` (a
    ``ProcessPoolExecutor``, ``distributed.Client.get_executor()``); otherwise, with more
    than one worker (default: the CPUs this process may use) and more than ``4 * chunk``
    tasks, a process pool of ``workers`` processes, else this process. ``progress`` is
    called with (files done, bytes read) as results arrive.
    """
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    results: list[tuple[dict[str, Any] | None, list[str], int]] = []

    def collect(it: Iterable[tuple[dict[str, Any] | None, list[str], int]]) -> None:
        for res in it:
            results.append(res)
            if progress is not None:
                progress(1, res[2])

    if executor is not None:
        collect(executor.map(trajectory_row, tasks))
    elif workers > 1 and len(tasks) > 4 * chunk:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # fork: the workers inherit the imported package (no re-import); POSIX only
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
            collect(pool.map(trajectory_row, tasks, chunksize=chunk))
    else:
        collect(map(trajectory_row, tasks))
    return results
