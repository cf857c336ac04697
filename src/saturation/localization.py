"""Per-level localisation scores (file / module / entity) from an answer and the gold edits.

SkyRL's code-search recipes log one reward per level but not the precision, recall and
counts behind it; these functions recompute them from the structured answer and the gold
``file_changes`` of a trajectory (docs/skyrl.md).

Location keys per level:

* file: ``path``;
* module: ``path:Class`` when a class is named, else ``path:function`` for a top-level
  function (a file-only location has no module);
* entity: ``path:Class.method`` when both are named, ``path:function`` for a top-level
  function (file-only and class-only locations have no entity).

Gold keys come from ``file_changes``: every ``file``, ``edited_modules`` (+ ``added_modules``)
and ``edited_entities`` (+ ``added_entities``); an entry without a ``path:`` prefix is taken
relative to its file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from saturation import schema as S

FILE, MODULE, ENTITY = S.CANONICAL_LEVELS

# ---------------------------------------------------------------- ungraded reasons
NO_ANSWER: Final = "no_answer"
SEVERAL_ANSWERS: Final = "several_answers"
FORMAT_FAILURE: Final = "format_failure"
EMPTY_FILE_NAME: Final = "empty_file_name"
ERROR_FILE: Final = "error_file"
NO_SCORE: Final = "no_score"
UNGRADED_REASONS: Final = (NO_ANSWER, SEVERAL_ANSWERS, FORMAT_FAILURE, EMPTY_FILE_NAME, ERROR_FILE, NO_SCORE)


class UngradedAnswer(ValueError):
    """The answer cannot be graded; ``reason`` is one of :data:`UNGRADED_REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"{reason}{': ' + detail if detail else ''}")


@dataclass(frozen=True)
class Location:
    """One predicted location: a file, optionally a class and/or a function."""

    file: str
    class_name: str | None = None
    function_name: str | None = None

    def keys(self) -> dict[str, str | None]:
        """This location's key at each level (None where the level is not named)."""
        cls, fn = self.class_name or None, self.function_name or None
        if fn and "." in fn and not cls:  # "Class.method" given as the function name
            cls, fn = fn.split(".", 1)
        module = f"{self.file}:{cls}" if cls else (f"{self.file}:{fn}" if fn else None)
        entity = f"{self.file}:{cls}.{fn}" if cls and fn else (f"{self.file}:{fn}" if fn else None)
        return {FILE: self.file, MODULE: module, ENTITY: entity}


_FENCE_RE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_PATH_RE = re.compile(r"^[^\s:]*(?:/[^\s:]*|\.[A-Za-z0-9]+)$")


def _norm_path(path: str) -> str:
    path = path.strip().strip("`'\"")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def parse_answer_text(text: str) -> list[Location]:
    """Locations from the finish tool's text format (the last fenced block, or the whole
    text when it has none)::

        path/to/file.py
        class: ClassName
        function: method_name

        path/to/other.py
        function: standalone

    A path-like line (no spaces; a ``/`` or a file extension) starts a new location. Inside
    a fenced block any other line that is not ``class:``/``function:``/``method:`` is a
    format failure; in unfenced text such lines are prose and skipped. Raises
    :class:`UngradedAnswer` when a class or function line comes before any file.
    """
    blocks = _FENCE_RE.findall(text)
    fenced = bool(blocks)
    body = blocks[-1] if blocks else text
    out: list[Location] = []
    current: dict[str, str | None] | None = None

    def flush() -> None:
        if current is not None:
            out.append(Location(str(current["file"]), current["class"], current["function"]))

    for raw in body.splitlines():
        line = raw.strip()
        if not line:
            flush()
            current = None
            continue
        low = line.lower()
        for tag in ("class:", "function:", "method:"):
            if low.startswith(tag):
                value = line[len(tag):].strip().split()[0].strip("()") if line[len(tag):].strip() else ""
                if current is None:
                    raise UngradedAnswer(FORMAT_FAILURE, f"{tag} line before any file: {line[:60]!r}")
                current["class" if tag == "class:" else "function"] = value or None
                break
        else:
            if not _PATH_RE.match(line):
                if fenced:
                    raise UngradedAnswer(FORMAT_FAILURE, f"not a file path: {line[:60]!r}")
                continue
            flush()
            current = {"file": _norm_path(line), "class": None, "function": None}
    flush()
    return out


def _location_from_mapping(item: Mapping[str, Any]) -> Location:
    file = item.get("file", item.get("file_path", item.get("path")))
    if file is None or not isinstance(file, str):
        raise UngradedAnswer(FORMAT_FAILURE, f"location without a file: {dict(item)!r:.80}")
    cls = item.get("class_name", item.get("class"))
    fn = item.get("function_name", item.get("function", item.get("method")))
    return Location(_norm_path(file), str(cls) if cls else None, str(fn) if fn else None)


def answer_locations(parsed: Any, raw: Any = None) -> list[Location]:
    """The answer's locations from ``parsed_final_message`` (preferred) or the raw text.

    ``parsed`` may be a list of ``{file, class_name?, function_name?}`` mappings, a mapping
    with a ``locations`` list, or text in the finish tool's format. Raises
    :class:`UngradedAnswer` with the reason when there is no gradeable answer: nothing
    given (``no_answer``), several answers (``several_answers``: a list of answers or
    several fenced blocks in the raw text), a wrong structure (``format_failure``) or a
    location with an empty file name (``empty_file_name``).
    """
    if parsed is None or (isinstance(parsed, str | list | dict) and not parsed):
        if isinstance(raw, str) and raw.strip():
            if len(_FENCE_RE.findall(raw)) > 1:
                raise UngradedAnswer(SEVERAL_ANSWERS, "several fenced answer blocks")
            locations = parse_answer_text(raw)
        else:
            raise UngradedAnswer(NO_ANSWER)
    elif isinstance(parsed, str):
        locations = parse_answer_text(parsed)
    elif isinstance(parsed, Mapping):
        if "locations" not in parsed:
            raise UngradedAnswer(FORMAT_FAILURE, f"answer mapping without 'locations': keys {sorted(parsed)[:8]}")
        return answer_locations(parsed["locations"] or None, None)
    elif isinstance(parsed, list):
        if parsed and all(isinstance(x, list | tuple) for x in parsed):
            raise UngradedAnswer(SEVERAL_ANSWERS, f"{len(parsed)} answers")
        if not all(isinstance(x, Mapping) for x in parsed):
            raise UngradedAnswer(FORMAT_FAILURE, "locations are not all mappings")
        locations = [_location_from_mapping(x) for x in parsed]
    else:
        raise UngradedAnswer(FORMAT_FAILURE, f"answer is a {type(parsed).__name__}")
    if not locations:
        raise UngradedAnswer(NO_ANSWER, "no location in the answer")
    if any(not loc.file for loc in locations):
        raise UngradedAnswer(EMPTY_FILE_NAME)
    return locations


def _qualify(file: str, entry: Any) -> str:
    entry = str(entry).strip()
    if ":" in entry:
        path, name = entry.split(":", 1)
        return f"{_norm_path(path)}:{name.strip()}"
    return f"{file}:{entry}"


def gold_keys(file_changes: Iterable[Mapping[str, Any]], *, include_added: bool = True) -> dict[str, set[str]]:
    """Gold location keys per level from ``file_changes`` (module docstring).

    Raises ValueError when the structure is not a list of ``{file, changes}`` mappings.
    """
    gold: dict[str, set[str]] = {FILE: set(), MODULE: set(), ENTITY: set()}
    kinds = {MODULE: ["edited_modules"], ENTITY: ["edited_entities"]}
    if include_added:
        kinds[MODULE].append("added_modules")
        kinds[ENTITY].append("added_entities")
    if isinstance(file_changes, Mapping | str) or file_changes is None:
        raise ValueError("file_changes must be a list of {file, changes} objects")
    for change in file_changes:
        if not isinstance(change, Mapping) or not isinstance(change.get("file"), str):
            raise ValueError(f"file_changes entry without a file: {change!r:.80}")
        file = _norm_path(change["file"])
        gold[FILE].add(file)
        changes = change.get("changes") or {}
        if not isinstance(changes, Mapping):
            raise ValueError(f"'changes' of {file} is not a mapping")
        for level, names in kinds.items():
            for name in names:
                gold[level].update(_qualify(file, e) for e in changes.get(name) or [])
    return gold


def predicted_keys(locations: Iterable[Location]) -> dict[str, set[str]]:
    """Predicted location keys per level (deduplicated)."""
    pred: dict[str, set[str]] = {FILE: set(), MODULE: set(), ENTITY: set()}
    for loc in locations:
        for level, key in loc.keys().items():
            if key:
                pred[level].add(key)
    return pred


def score_level(pred: set[str], gold: set[str]) -> dict[str, float]:
    """precision, recall, F1 and counts of one level.

    Nothing predicted (gold exists): precision = recall = F1 = 0. No gold at this level:
    recall and F1 are NaN (undefined); precision is 0 when something was predicted, else NaN.
    """
    n_pred, n_gold, n_tp = len(pred), len(gold), len(pred & gold)
    if not n_gold:
        precision, recall, f1 = (0.0 if n_pred else math.nan), math.nan, math.nan
    elif not n_pred:
        precision = recall = f1 = 0.0
    else:
        precision, recall = n_tp / n_pred, n_tp / n_gold
        f1 = 2 * precision * recall / (precision + recall) if n_tp else 0.0
    return {S.F1: f1, S.PRECISION: precision, S.RECALL: recall,
            S.N_PRED: float(n_pred), S.N_GOLD: float(n_gold), S.N_TP: float(n_tp)}


def score_answer(locations: Iterable[Location], gold: Mapping[str, set[str]]) -> dict[str, dict[str, float]]:
    """Scores of every level: ``{level: {f1, precision, recall, n_pred, n_gold, n_tp}}``."""
    pred = predicted_keys(locations)
    return {level: score_level(pred[level], set(gold.get(level, set()))) for level in (FILE, MODULE, ENTITY)}
