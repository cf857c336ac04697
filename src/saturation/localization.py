"""Per-level localisation scores (file / module / entity), graded as the upstream reward grades.

SkyRL's code-search recipes log one F1 per level (``reward_dict``) but not the precision,
recall and counts behind it; these functions recompute all of them from the answer and the
gold edits, following the reward code itself (docs/skyrl.md cites the lines):

* **codescout** (``src/rewards/file_localization/file_localization.py`` and
  ``module_rewards.py``): the answer is the ``localization_finish`` tool call, called exactly
  once; a rollout without it scores 0 at every level. Gold: every ``file_changes[*].file``,
  ``edited_modules`` and ``edited_entities`` (``added_*`` ignored; ``null`` lists empty).
* **agentic-code-search-oss** (the same files there): the answer is the final message's text
  (``path.py`` / ``class:`` / ``function:`` lines); file-level gold from the string ``target``
  ``"[('path.py', [start, count]), ...]"``.

Location keys (codescout ``parse_structured_outputs``): file = ``file``; module =
``file:Class`` when a class is named, else ``file:function``; entity = ``file:Class.function``
when both are named, else ``file:function``. Strings are compared verbatim (no path
normalisation, as upstream); one location with a blank file empties the whole prediction.
Per level: precision = tp / n_pred (0 when nothing is predicted), recall = tp / n_gold,
F1 = 2PR / (P + R) (0 when P + R = 0), and an empty gold set scores 0 at that level
(upstream: "return 0 reward if ground truth is empty").
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from saturation import schema as S

FILE, MODULE, ENTITY = S.CANONICAL_LEVELS
FINISH_TOOL: Final = "localization_finish"

# ---------------------------------------------------------------- how an answer was found
#: the finish call, from ``raw_final_message`` (``json.dumps`` of the structured locations)
FINISH_CALL: Final = "finish_call"
#: one ``localization_finish`` action in ``messages`` but no structured answer in
#: ``raw_final_message``: upstream rejected the call (its last-turn sanity check), score 0
FINISH_CALL_REJECTED: Final = "finish_call_rejected"
#: no finish call, or not exactly one: upstream scores 0 at every level
NO_FINISH_CALL: Final = "no_finish_call"
SEVERAL_FINISH_CALLS: Final = "several_finish_calls"
#: a location with a blank file: upstream empties the prediction (0 at every level)
EMPTY_FILE_NAME: Final = "empty_file_name"
#: a text answer graded by agentic-code-search-oss's text parser
TEXT_ANSWER: Final = "text_answer"
#: an eval-dump transcript without a findable finish call: the logged score is kept,
#: the levels are not recomputed
NOT_RESCORED: Final = "not_rescored"
ANSWER_STATUSES: Final = (
    FINISH_CALL,
    FINISH_CALL_REJECTED,
    NO_FINISH_CALL,
    SEVERAL_FINISH_CALLS,
    EMPTY_FILE_NAME,
    TEXT_ANSWER,
    NOT_RESCORED,
)

# ---------------------------------------------------------------- ungraded reasons
#: the rollout crashed (``{instance_id}_{rep}.error``)
ERROR_FILE: Final = "error_file"
#: an eval-dump line without a score
NO_SCORE: Final = "no_score"
#: the finish call's locations are not ``{file, class_name, function_name}`` objects
FORMAT_FAILURE: Final = "format_failure"
UNGRADED_REASONS: Final = (ERROR_FILE, NO_SCORE, FORMAT_FAILURE)


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
        """This location's key at each level (None where the level is not named), as
        codescout's ``parse_structured_outputs`` forms them."""
        cls, fn = self.class_name or None, self.function_name or None
        module = f"{self.file}:{cls}" if cls else (f"{self.file}:{fn}" if fn else None)
        entity = f"{self.file}:{cls}.{fn}" if cls and fn else (f"{self.file}:{fn}" if fn else None)
        return {FILE: self.file, MODULE: module, ENTITY: entity}


def _location(item: Any) -> Location:
    if not isinstance(item, Mapping):
        raise UngradedAnswer(FORMAT_FAILURE, f"a location is a {type(item).__name__}, not an object")
    file, cls, fn = item.get("file"), item.get("class_name"), item.get("function_name")
    if not isinstance(file, str) or not all(v is None or isinstance(v, str) for v in (cls, fn)):
        raise UngradedAnswer(FORMAT_FAILURE, f"location fields are not strings: {dict(item)!r:.80}")
    return Location(file, cls, fn)


def _locations(args: Any) -> list[Location]:
    """The ``locations`` of a finish call's arguments (``[]`` when there is no list)."""
    locations = args.get("locations") if isinstance(args, Mapping) else None
    return [_location(x) for x in locations] if isinstance(locations, list) else []


def finish_call_locations(raw_final_message: Any) -> list[Location] | None:
    """The finish call's locations when ``raw_final_message`` is codescout's
    ``json.dumps(structured_locations)`` (a JSON list), else None (plain text or empty: no
    finish call). Raises :class:`UngradedAnswer` (``format_failure``) for a JSON list whose
    items are not location objects."""
    if isinstance(raw_final_message, list):
        items = raw_final_message
    elif isinstance(raw_final_message, str) and raw_final_message.lstrip().startswith("["):
        try:
            items = json.loads(raw_final_message)
        except json.JSONDecodeError:
            return None
        if not isinstance(items, list):
            return None
    else:
        return None
    return [_location(x) for x in items]


def finish_calls_in_events(events: Any) -> list[list[Location]]:
    """The locations of every agent ``localization_finish`` call in an OpenHands event list
    (``messages`` of a trajectory: ``ActionEvent`` with ``tool_name`` and ``action.locations``)."""
    calls: list[list[Location]] = []
    if not isinstance(events, list):
        return calls
    for event in events:
        if (
            isinstance(event, Mapping)
            and event.get("kind") == "ActionEvent"
            and event.get("source") == "agent"
            and event.get("tool_name") == FINISH_TOOL
            and isinstance(event.get("action"), Mapping)
        ):
            calls.append(_locations(event["action"]))
    return calls


def _strip_spans(text: str, start: str, end: str) -> str:
    """``text`` without the ``start ... end`` spans (str.find: linear time)."""
    out, pos = [], 0
    while True:
        a = text.find(start, pos)
        if a < 0:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos:a])
        b = text.find(end, a)
        if b < 0:
            return "".join(out)
        pos = b + len(end)


def _tool_calls(text: str) -> list[Any]:
    """The decoded JSON of every ``<tool_call>...</tool_call>`` block (None where not JSON)."""
    calls: list[Any] = []
    pos = text.find("<tool_call>")
    while pos >= 0:  # str.find, not a lazy regex: linear in the transcript's length
        end = text.find("</tool_call>", pos)
        if end < 0:
            break
        body = text[pos + len("<tool_call>") : end]
        pos = text.find("<tool_call>", end)
        try:
            calls.append(json.loads(body))
        except (ValueError, RecursionError):
            calls.append(None)
    return calls


def _finish_locations(call: Any) -> list[Location] | None:
    if not isinstance(call, Mapping) or call.get("name") != FINISH_TOOL:
        return None
    args = call.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            args = None
    return _locations(args)


def finish_calls_in_transcript(text: Any) -> list[list[Location]]:
    """The locations of every ``localization_finish`` call in a decoded transcript (an eval
    dump's ``output_response``): Hermes-style ``<tool_call>{"name": ..., "arguments":
    ...}</tool_call>`` blocks, the format the model emits (codescout's run scripts:
    ``tool_call_parser=hermes``). Text inside ``<tool_response>`` (tool output, e.g. a grep
    hit on a logged call) is never read."""
    if not isinstance(text, str) or "<tool_call>" not in text:
        return []
    calls = _tool_calls(_strip_spans(text, "<tool_response>", "</tool_response>"))
    return [locs for locs in map(_finish_locations, calls) if locs is not None]


def transcript_passes_last_turn_check(text: Any) -> bool:
    """codescout's sanity check of the last turn (``code_search_generator.py:263-282``): the
    last assistant turn holds exactly one ``<tool_call>`` (the finish call) and nothing but
    whitespace after its ``</tool_call>`` up to ``<|im_end|>``."""
    if not isinstance(text, str):
        return False
    body = _strip_spans(text, "<tool_response>", "</tool_response>")
    last = body[body.rfind("<|im_start|>assistant") :] if "<|im_start|>assistant" in body else body
    if last.count("<tool_call>") != 1 or last.count("</tool_call>") != 1:
        return False
    tail = last[last.find("</tool_call>") + len("</tool_call>") :]
    tail = tail.split("<|im_end|>", 1)[0] if "<|im_end|>" in tail else tail
    return not tail.strip() and _finish_locations(_tool_calls(last)[0]) is not None


def predicted_keys(locations: Iterable[Location]) -> dict[str, set[str]]:
    """Predicted location keys per level (deduplicated); a location with a blank file
    empties all three levels, as upstream's ``found_empty_filename``."""
    pred: dict[str, set[str]] = {FILE: set(), MODULE: set(), ENTITY: set()}
    for loc in locations:
        if not loc.file.strip():
            return {FILE: set(), MODULE: set(), ENTITY: set()}
        for level, key in loc.keys().items():
            if key:
                pred[level].add(key)
    return pred


def text_answer_keys(text: Any) -> dict[str, set[str]]:
    """Predicted keys of a text answer, parsed as agentic-code-search-oss's
    ``get_simple_results_from_raw_outputs`` parses it: backticks stripped; a line ending in
    ``.py`` sets the file; ``class: C`` sets the class until a blank line; each
    ``function:``/``method:`` line is one location (``C.m`` splits into class and method).
    Files count only through a function line; entity ``file:C.f`` or ``file:f`` (a trailing
    ``.__init__`` dropped); module = the entity without its method."""
    files: set[str] = set()
    entities: set[str] = set()
    if not isinstance(text, str):
        return {FILE: files, MODULE: set(), ENTITY: entities}
    current_file: str | None = None
    current_class: str | None = None
    for raw in text.strip("` \n").strip().split("\n"):
        line = raw.strip()
        if not line:
            current_class = None
            continue
        if line.endswith(".py"):
            current_file, current_class = line, None
            continue
        if line.startswith("class:"):
            current_class = line[len("class:") :].strip()
            continue
        if line.startswith(("function:", "method:")) and current_file:
            words = line.split(":", 1)[1].strip().split()
            if not words:
                continue
            func = words[0].strip("() ")
            cls: str | None = current_class
            if "." in func:
                cls, func = func.split(".", 1)
            entity = f"{current_file}:{cls}.{func}" if cls else f"{current_file}:{func}"
            entity = entity.removesuffix(".__init__")
            files.add(current_file)
            entities.add(entity)
    modules = {e.rsplit(".", 1)[0] if "." in e.split(":")[-1] else e for e in entities}
    return {FILE: files, MODULE: modules, ENTITY: entities}


def _names(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(f"{where} is a {type(value).__name__}, not a list")
    if not all(isinstance(x, str) for x in value):
        raise ValueError(f"{where} holds a value that is not a string")
    return list(value)


def gold_keys(file_changes: Any, *, include_added: bool = False) -> dict[str, set[str]]:
    """Gold location keys per level from ``file_changes`` (module docstring): every
    ``file``, ``edited_modules`` and ``edited_entities`` (plus ``added_modules`` /
    ``added_entities`` with ``include_added``), verbatim.

    Raises ValueError naming the field when the structure is not a list of ``{file,
    changes}`` objects whose name lists are lists of strings (a string given for a list
    would be counted per character).
    """
    gold: dict[str, set[str]] = {FILE: set(), MODULE: set(), ENTITY: set()}
    kinds = {MODULE: ["edited_modules"], ENTITY: ["edited_entities"]}
    if include_added:
        kinds[MODULE].append("added_modules")
        kinds[ENTITY].append("added_entities")
    if not isinstance(file_changes, list | tuple):
        raise ValueError(f"file_changes is a {type(file_changes).__name__}, not a list of {{file, changes}} objects")
    for i, change in enumerate(file_changes):
        if not isinstance(change, Mapping) or not isinstance(change.get("file"), str):
            raise ValueError(f"file_changes[{i}] has no 'file' string: {change!r:.80}")
        gold[FILE].add(change["file"])
        changes = change.get("changes")
        changes = {} if changes is None else changes
        if not isinstance(changes, Mapping):
            raise ValueError(f"file_changes[{i}].changes is a {type(changes).__name__}, not an object")
        for level, names in kinds.items():
            for name in names:
                gold[level].update(_names(changes.get(name), f"file_changes[{i}].changes.{name}"))
    return gold


def gold_files_from_target_string(target: str) -> set[str]:
    """File-level gold of agentic-code-search-oss's string ``target``
    (``"[('path.py', [start, count]), ...]"``, read with :func:`ast.literal_eval` as its
    ``file_localization_f1_reward`` does). Raises ValueError when it is not that shape."""
    try:
        value = ast.literal_eval(target)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"target string is not a Python literal ({type(exc).__name__})") from exc
    if not isinstance(value, list | tuple) or not all(
        isinstance(x, list | tuple) and x and isinstance(x[0], str) for x in value
    ):
        raise ValueError("target string is not a list of (file, [start, count]) tuples")
    return {x[0] for x in value}


def score_level(pred: set[str], gold: set[str] | None) -> dict[str, float]:
    """precision, recall, F1 and counts of one level, as the upstream reward computes F1.

    ``gold`` None (unknown at this level, e.g. a string target's module level): every score
    NaN. An empty gold set: F1 0 (upstream), precision and recall 0.
    """
    n_pred = len(pred)
    if gold is None:
        return {
            S.F1: math.nan,
            S.PRECISION: math.nan,
            S.RECALL: math.nan,
            S.N_PRED: float(n_pred),
            S.N_GOLD: math.nan,
            S.N_TP: math.nan,
        }
    n_gold, n_tp = len(gold), len(pred & gold)
    precision = n_tp / n_pred if n_pred else 0.0
    recall = n_tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if n_gold and precision + recall > 0 else 0.0
    return {
        S.F1: f1,
        S.PRECISION: precision,
        S.RECALL: recall,
        S.N_PRED: float(n_pred),
        S.N_GOLD: float(n_gold),
        S.N_TP: float(n_tp),
    }


def score_keys(pred: Mapping[str, set[str]], gold: Mapping[str, set[str] | None]) -> dict[str, dict[str, float]]:
    """Scores of every level: ``{level: {f1, precision, recall, n_pred, n_gold, n_tp}}``."""
    return {level: score_level(set(pred.get(level, set())), gold.get(level)) for level in (FILE, MODULE, ENTITY)}


def score_answer(locations: Sequence[Location], gold: Mapping[str, set[str] | None]) -> dict[str, dict[str, float]]:
    """:func:`score_keys` of a list of locations."""
    return score_keys(predicted_keys(locations), gold)


#: the logged per-level F1 in a codescout ``reward_dict``
LOGGED_F1_KEYS: Final = {FILE: "file_reward", MODULE: "module_reward", ENTITY: "entity_reward"}
