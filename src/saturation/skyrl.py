"""Read SkyRL console logs (plain or ``.zst``) into a per-step metrics Dataset, streaming.

What a SkyRL console log holds (skyrl-train and recipes built on it; docs/skyrl.md):

* lines may carry ANSI colour codes, a Ray prefix such as ``(skyrl_entrypoint pid=2143) ``
  or ``(name pid=N, ip=ADDR) `` and a ``[repeated Nx across cluster]`` suffix;
* per training step a Python-literal dict is printed after a line ending in ``Step N:``,
  possibly over several lines until its braces balance; decimals arrive as strings rounded
  to 4 places (``'0.4123'``); async trainers print two blocks per step (metrics and
  ``timing/*``), merged by step;
* an eval-only run logs one ``Metrics from eval only run: {...}`` line;
* the configuration arrives as command-line overrides (``trainer.policy.model.path=...``)
  and/or a YAML dump; overrides are recorded as run attributes and the run identity is
  ``trainer.policy.model.path``;
* with dynamic sampling (``trainer.algorithm.dynamic_sampling.type`` filter or replace) the
  trainer logs, before each step's block, one line per generation round (``Dynamic
  sampling: 41 < 64 prompts``, ``Replace sampling: 50 good UIDs out of 64 total prompts``):
  they are read into per-step counts (:data:`saturation.series.DYNAMIC_SAMPLING_KEYS`),
  because SkyRL computes that step's ``reward/*`` metrics on the kept groups only.

Parsing is literal only (:func:`ast.literal_eval`, never ``eval``); the file is read as a
stream, so memory stays bounded by the largest block, not the log size. Every line is
accounted for; a malformed or truncated block is reported with ``file:line`` and skipped
(lenient) or raises (strict).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from saturation import schema as S
from saturation.series import DYNAMIC_SAMPLING_KEYS, DYNAMIC_SAMPLING_TYPE_KEY, label_metrics, metric_variable_names
from saturation.streams import MAX_COLUMNS, TruncatedStreamError, open_text

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: Ray's per-line prefix ``(actor_name pid=N)`` / ``(actor_name pid=N, ip=A.B.C.D)``; the actor
#: name may hold spaces and parentheses (``print_worker_logs``), so it is matched lazily up to
#: the last `` pid=N`` that closes the prefix
RAY_PREFIX_RE = re.compile(r"^\((?P<actor>.*?) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]+))?\)(?: |$)")
REPEATED_RE = re.compile(r"\s*\[repeated (?P<n>\d+)x across cluster\]\s*$")
STEP_RE = re.compile(r"Step (?P<step>\d+):\s*$")
EVAL_ONLY = "Metrics from eval only run:"
OVERRIDE_PREFIXES = ("trainer.", "generator.", "environment.", "data.")
OVERRIDE_RE = re.compile(
    r"(?<![\w.+-])(?P<key>(?:trainer|generator|environment|data)(?:\.[A-Za-z_]\w*)+)="
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s]+)"
)
RUN_KEY = "trainer.policy.model.path"
#: dynamic sampling's per-round log lines (skyrl_train/utils/trainer_utils.py at the fork's
#: 81e5a97c: L502 and L509 for filter, L380 and L419 for replace; SkyRL a9564572:
#: skyrl/train/utils/trainer_utils.py L587, L594, L474, L504)
DS_FILTER_RE = re.compile(r"Dynamic sampling: (?:(?P<short>\d+) < |collected (?P<done>\d+) >= )(?P<target>\d+) prompts")
DS_REPLACE_RE = re.compile(r"Replace sampling: (?P<good>\d+) good UIDs out of (?P<total>\d+) total prompts")
DS_REPLACED_RE = re.compile(r"After replacement - Replaced (?P<bad>\d+) bad prompts")
DS_MARKERS = ("Dynamic sampling: ", "Replace sampling: ", "After replacement - ")
#: the YAML dump's ``dynamic_sampling:`` mapping and its ``type:`` line (``OmegaConf.to_yaml``)
DS_YAML_RE = re.compile(
    r"^(?P<indent> *)dynamic_sampling:[ \t]*\n(?:(?P=indent) +\w+:.*\n)*?(?P=indent) +type: *(?P<type>\w+)", re.M
)
#: a block longer than this many lines is treated as malformed (bounds memory)
MAX_BLOCK_LINES = 5000
#: a line longer than this many characters is skipped and reported (bounds memory)
MAX_LINE_CHARS = 1 << 22
#: prefixes that cluster launchers put on every line, tried in order on the first lines of a
#: log; the first that most lines carry is stripped from every line (docs/skyrl.md)
LINE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("srun --label", r"\d+: "),
    (
        "RFC 3339 timestamp (kubectl logs --timestamps)",
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d) ",
    ),
)
#: lines looked at to learn a line prefix, and the share of them that must carry it
PREFIX_SAMPLE_LINES = 400
PREFIX_MIN_SHARE = 0.8


class LogFormatError(ValueError):
    """A console log could not be parsed (strict mode); the message names file:line."""


@dataclass
class ConsoleLog:
    """What one console log held, and the accounting of its lines."""

    path: str
    steps: dict[int, dict[str, float]] = field(default_factory=dict)
    eval_only: list[dict[str, float]] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)
    lines: int = 0
    block_lines: int = 0
    blocks: int = 0
    problems: list[str] = field(default_factory=list)
    non_numeric: dict[str, str] = field(default_factory=dict)
    conflicts: int = 0
    bytes_read: int = 0
    #: foreign lines (other actors, warnings, progress bars) met inside metrics blocks
    interleaved: int = 0
    #: ``Step N:`` lines not followed by a metrics dict from the same source (e.g. model text)
    markers_without_block: int = 0
    #: history records holding no metric (only logged tables or text, e.g. wandb's
    #: ``error/tracebacks``): no step is made of them
    records_without_metrics: int = 0
    #: in a loguru log, ``Step N:`` lines without the tracker's loguru header (text printed by
    #: ``pretty_print_example`` and the like): never read as metrics
    untracked_markers: int = 0
    #: the launcher's per-line prefix stripped from every line ("" when none was found)
    line_prefix: str = ""
    #: lines longer than MAX_LINE_CHARS (skipped, each reported)
    overlong_lines: int = 0
    #: dynamic sampling's round lines as read: (line, kind, numbers), kind "filter" (kept so
    #: far, target, done 0/1), "replace" (good, total) or "replaced" (bad)
    sampling_events: list[tuple[int, str, tuple[int, ...]]] = field(default_factory=list)
    #: every tracker ``Step N:`` marker in the file: (line, step, its block parsed)
    step_marks: list[tuple[int, int, bool]] = field(default_factory=list)
    #: round lines not placed: after the last step's block (a step whose training never
    #: logged) or before a block that could not be read
    sampling_unplaced: int = 0
    #: round lines of a step that a resumed attempt generated again (its later lines win)
    sampling_superseded: int = 0
    #: ``type`` of the YAML dump's ``dynamic_sampling`` mapping ("null" when off)
    yaml_dynamic_sampling: str | None = None
    #: a wandb history's step axis: ``_step``, or the metric the run declared as its x-axis
    #: (``train/global_step`` for the Hugging Face Trainer; :mod:`saturation.wandb_history`)
    step_axis: str | None = None
    #: wandb history rows holding values logged before the first value of the run's declared
    #: step axis (placed at no step, as wandb's own charts place them)
    rows_before_step_axis: int = 0
    #: wandb history rows without a (finite) step: each also a problem
    rows_without_step: int = 0

    #: a run resumed from a checkpoint in the same log (SkyRL re-runs the steps after it):
    #: attempts seen after the first, steps the later attempt logged again, values replaced
    restarts: int = 0
    resumed_steps: int = 0
    values_superseded: int = 0
    _last_step: int = -1
    _step_attempt: dict[int, int] = field(default_factory=dict)

    def merge_step(
        self, step: int, values: dict[str, float], *, block: bool = True, repeats_restart: bool = True
    ) -> None:
        """Merge a block's ``values`` into the step's metrics.

        A block of a step already logged that goes back (a step before the last one logged,
        or the last one again with a key it already holds) starts a new attempt: the run was
        resumed from a checkpoint and re-runs the steps after it. A later attempt's block
        replaces what earlier attempts logged for that step (counted in ``resumed_steps``,
        ``values_superseded``). Within one attempt, blocks of a step merge (async trainers log
        metrics and timings apart); a key already holding another value keeps the first and
        counts a conflict. ``block=False``: counts derived after the scan, merged only.
        ``repeats_restart=False``: only a step before the last one starts a new attempt (a
        tracker that logs a key several times a step, e.g. against wandb's ``train/global_step``)."""
        old = self.steps.get(step)
        if block and old is not None:
            repeat = repeats_restart and step == self._last_step and not old.keys().isdisjoint(values)
            if step < self._last_step or repeat:
                self.restarts += 1
            if self._step_attempt.get(step, 0) < self.restarts:
                self.resumed_steps += 1
                self.values_superseded += len(old)
                del self.steps[step]
        if block:
            self._last_step = step
            self._step_attempt[step] = self.restarts
        merged = self.steps.setdefault(step, {})
        for key, value in values.items():
            if key in merged and merged[key] != value:
                self.conflicts += 1
            else:
                merged[key] = value

    @property
    def run(self) -> str:
        return self.config.get(RUN_KEY, Path(self.path).name.split(".")[0])

    @property
    def dynamic_sampling(self) -> str | None:
        """The run's dynamic-sampling strategy: the override or the YAML dump
        (``trainer.algorithm.dynamic_sampling.type``), else what its round lines show; None
        when off."""
        configured = self.config.get(DYNAMIC_SAMPLING_TYPE_KEY, self.yaml_dynamic_sampling)
        if configured is not None and configured.lower() not in ("null", "none", "~", ""):
            return configured
        kinds = {kind for _, kind, _ in self.sampling_events}
        if kinds:
            return "filter" if "filter" in kinds else "replace"
        return None

    def place_sampling_events(self) -> None:
        """Turn the round lines into per-step counts merged into :attr:`steps`: each line
        belongs to the first step whose ``Step N:`` marker follows it (the trainer generates,
        filters, trains, then logs). Per step: the rounds, the prompts generated and those
        with mixed rewards (kept by filter, good for replace) over the rounds; a filter round
        draws one dataloader batch of ``target`` prompts, and trains on the first ``target``
        kept; replace trains on its last round's prompts, the good groups and their copies
        over the others."""
        if not self.sampling_events:
            return
        marks = sorted(self.step_marks)
        lines = [line for line, _, _ in marks]
        per_mark: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
        for line, kind, numbers in sorted(self.sampling_events):
            i = int(np.searchsorted(lines, line))
            if i == len(marks) or not marks[i][2]:  # no block follows, or it could not be read
                self.sampling_unplaced += 1
                continue
            per_mark.setdefault(i, []).append((kind, numbers))
        # a step logged again by a resumed attempt: its later round lines win, as its later
        # block did (merge_step); an attempt's own later blocks of a step (metrics and timings
        # apart) carry no round lines, so the last mark with lines is the latest attempt
        latest = {marks[i][1]: i for i in sorted(per_mark)}
        for i, events in sorted(per_mark.items()):
            step = marks[i][1]
            if latest[step] != i:
                self.sampling_superseded += len(events)
                continue
            filters = [n for kind, n in events if kind == "filter"]
            replaces = [n for kind, n in events if kind == "replace"]
            if filters:
                rounds, target = len(filters), filters[-1][1]
                generated, mixed, trained, trained_mixed = rounds * target, filters[-1][0], target, target
            elif replaces:
                rounds = len(replaces)
                generated, mixed = sum(n[1] for n in replaces), sum(n[0] for n in replaces)
                trained_mixed, trained = replaces[-1]
            else:
                continue
            counts = {
                "rounds": rounds,
                "prompts_generated": generated,
                "prompts_mixed": mixed,
                "prompts_trained": trained,
                "prompts_trained_mixed": trained_mixed,
            }
            self.merge_step(step, {DYNAMIC_SAMPLING_KEYS[k]: float(v) for k, v in counts.items()}, block=False)

    def accounting(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "lines": self.lines,
            "block_lines": self.block_lines,
            "other_lines": self.lines - self.block_lines,
            "blocks": self.blocks,
            "steps": len(self.steps),
            "eval_only_blocks": len(self.eval_only),
            "malformed": len(self.problems),
            "interleaved_lines": self.interleaved,
            "step_markers_without_block": self.markers_without_block,
            "step_markers_not_the_trackers": self.untracked_markers,
            "records_without_metrics": self.records_without_metrics,
            "line_prefix": self.line_prefix,
            "overlong_lines": self.overlong_lines,
            "dynamic_sampling_lines": len(self.sampling_events),
            "dynamic_sampling_lines_unplaced": self.sampling_unplaced,
            "dynamic_sampling_lines_superseded": self.sampling_superseded,
            "conflicting_values": self.conflicts,
            "restarts": self.restarts,
            "resumed_steps": self.resumed_steps,
            "values_superseded": self.values_superseded,
            "bytes": self.bytes_read,
            "step_axis": self.step_axis,
            "rows_before_step_axis": self.rows_before_step_axis,
            "keys_not_read": dict(self.non_numeric),
        }


def split_source(line: str) -> tuple[str, str]:
    """``(source, content)`` of one log line: ANSI codes and the ``[repeated Nx across
    cluster]`` suffix removed, the Ray prefix split off as the source (``""`` for a line
    without one) and, for a line holding progress-bar redraws (``\\r``), the text after the
    last one."""
    line = line.rstrip("\r\n")
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    source = ""
    if line.startswith("(") and (m := RAY_PREFIX_RE.match(line)):
        source, line = m.group(0).rstrip(), line[m.end() :]
    if "\r" in line:
        line = line.rsplit("\r", 1)[1]
    if "[repeated" in line:
        line = REPEATED_RE.sub("", line)
    return source, line


def clean_line(line: str) -> str:
    """Strip ANSI codes, the Ray actor prefix and the ``[repeated Nx across cluster]`` suffix."""
    return split_source(line)[1]


def learn_line_prefix(lines: list[str]) -> tuple[str, re.Pattern[str]] | None:
    """The launcher prefix (:data:`LINE_PREFIXES`) that at least :data:`PREFIX_MIN_SHARE` of
    the non-empty ``lines`` start with, as ``(description, multi-line pattern)``; None when
    there is none. Prefixes can stack (``srun --label`` around a timestamp): the pattern
    strips them in the order learned."""
    learned: list[tuple[str, str]] = []
    sample = [ln for ln in lines[:PREFIX_SAMPLE_LINES] if ln.strip()]
    while sample:
        for name, pattern in LINE_PREFIXES:
            if any(name == n for n, _ in learned):
                continue
            rx = re.compile(pattern)
            hits = [rx.match(ln) for ln in sample]
            if sum(h is not None for h in hits) >= PREFIX_MIN_SHARE * len(sample):
                learned.append((name, pattern))
                sample = [ln[h.end() :] if h else ln for ln, h in zip(sample, hits, strict=True)]
                break
        else:
            break
    if not learned:
        return None
    combined = "".join(f"(?:{p})?" for _, p in learned)
    return " + ".join(n for n, _ in learned), re.compile(f"^{combined}", re.M)


#: a quoted string (either quote, backslash escapes) - braces inside do not count
QUOTED_RE = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
#: one ``'key': value`` item of a flat metrics dict (string, number, bool or None value)
ITEM_RE = re.compile(
    r"\s*(?P<q>['\"])(?P<key>[^'\"\\]*)(?P=q)\s*:\s*"
    r"(?:(?P<vq>['\"])(?P<str>[^'\"\\]*)(?P=vq)|(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|(?P<const>True|False|None))\s*(?:,|$)"
)


def _bracket_delta(text: str) -> int:
    """Net change of bracket depth (``{[(`` against ``}])``) over ``text``, ignoring
    brackets inside quoted strings (a metrics block's strings do not span lines)."""
    if "'" in text or '"' in text:
        text = QUOTED_RE.sub("", text)
    return text.count("{") + text.count("[") + text.count("(") - text.count("}") - text.count("]") - text.count(")")


def _fast_dict(text: str) -> dict[str, Any] | None:
    """Parse a flat ``{'key': value, ...}`` dict of strings/numbers without ``ast``; None
    when the text is anything else (then :func:`ast.literal_eval` decides)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    body = body[1:-1].strip()
    out: dict[str, Any] = {}
    pos = 0
    for m in ITEM_RE.finditer(body):
        if m.start() != pos:
            return None
        pos = m.end()
        if m.group("str") is not None:
            out[m.group("key")] = m.group("str")
        elif m.group("num") is not None:
            num = m.group("num")
            out[m.group("key")] = int(num) if num.lstrip("+-").isdigit() else float(num)
        else:
            out[m.group("key")] = {"True": True, "False": False, "None": None}[m.group("const")]
    return out if pos == len(body) else None


#: numpy-2 scalar reprs (``np.float32(0.5)``, ``np.int64(3)``, ``np.True_``) in a pprint dict
NP_SCALAR_RE = re.compile(r"\bnp\.(?:float|int|uint|bool|complex)\w*\(\s*([^()]*?)\s*\)|\bnp\.(True|False)_")
#: a bare non-finite float (``nan``, ``inf``, ``-inf``) as pprint writes it
NONFINITE_RE = re.compile(r"(?<![\w.'\"])(-?)(nan|inf)(?![\w'\"])")


def _literal_text(text: str) -> str:
    """``text`` with numpy scalar reprs replaced by their value and bare ``nan``/``inf``
    quoted, outside quoted strings only, so that :func:`ast.literal_eval` reads it."""
    pieces, pos = [], 0
    for m in QUOTED_RE.finditer(text):
        pieces.append(_fix_code(text[pos : m.start()]))
        pieces.append(m.group(0))
        pos = m.end()
    pieces.append(_fix_code(text[pos:]))
    return "".join(pieces)


def _fix_code(code: str) -> str:
    if "np." in code:
        code = NP_SCALAR_RE.sub(lambda m: m.group(1) if m.group(2) is None else m.group(2), code)
    if "nan" in code or "inf" in code:
        code = NONFINITE_RE.sub(lambda m: f"'{m.group(1)}{m.group(2)}'", code)
    return code


def _numeric(block: dict[str, Any], out: ConsoleLog) -> dict[str, float]:
    values: dict[str, float] = {}
    for key, value in block.items():
        key = str(key)
        if isinstance(value, int | float):  # bool is an int
            values[key] = float(value)
        elif isinstance(value, str):
            try:
                values[key] = float(value)
            except ValueError:
                out.non_numeric.setdefault(key, value[:80])
        else:
            out.non_numeric.setdefault(key, repr(value)[:80])
    return values


def _parse_block(text: str, where: str, out: ConsoleLog, strict: bool) -> dict[str, Any] | None:
    fast = _fast_dict(text.replace("\n", " "))
    if fast is not None:
        return fast
    try:
        value = ast.literal_eval(_literal_text(text.strip()))
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        _problem(out, f"{where}: malformed metrics block ({type(exc).__name__}: {str(exc)[:80]})", strict)
        return None
    if not isinstance(value, dict):
        _problem(out, f"{where}: metrics block is a {type(value).__name__}, not a dict", strict)
        return None
    return value


def _problem(out: ConsoleLog, message: str, strict: bool) -> None:
    if strict:
        raise LogFormatError(message)
    out.problems.append(message)


#: the end of a ``Step N:`` marker line (after colour codes / repeat suffixes); possessive
#: quantifiers, so a long run of spaces cannot make the match backtrack (linear time)
_TAIL = r"[ \t]*+(?:\x1b\[[0-9;?]*+[ -/]*+[@-~][ \t]*+)*+(?:\[repeated \d++x across cluster\][ \t]*+)?$"
STEP_MARK_RE = re.compile(r"Step (?P<step>\d+):" + _TAIL, re.M)
#: a pprint dict's first line: ``{`` then a key quoted the way ``repr`` quotes it (single
#: quotes, double only around a key holding a single quote), or an empty dict; a JSON line
#: (``{"key": ...``) is not one
PPRINT_OPEN_RE = re.compile(r"\{(?:'|\"[^\"\n]*'|\}|-?\d)")
#: a pprint item line at the dict's top level: one space, a quoted key, ``: ``
PPRINT_KEY_RE = re.compile(r" (?:'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|-?\d+): ")
#: the console tracker's header line as loguru writes it (``... | INFO     | module:function:line - Step N:``)
TRACKER_HEADER_RE = re.compile(r"\| [A-Z]+ *\| \S+:\S+:\d+ - Step \d+:")
#: the same with the trailing space of ``logger.info(f"Step {step}: \n{...}")`` (SkyRL
#: a9564572 ``skyrl/train/utils/tracking.py:189``): in a log of loguru lines only such a
#: header opens a metrics block
TRACKER_BLOCK_HEADER_RE = re.compile(r"\| [A-Z]+ *\| \S+:\S+:\d+ - Step \d+: $")
#: any loguru line (``time | LEVEL | module:function:line - message``, SkyRL's format)
LOGURU_LINE_RE = re.compile(r"^(?:\([^\n]*? pid=\d+[^)\n]*\) )?[^|\n]*\| [A-Z]+ *\| \S+:\S+:\d+ - ", re.M)
CHUNK_CHARS = 1 << 22
#: steps are integers below 2^53 (stored as int64, compared as float64), as in the tables
MAX_STEP = 2**53
#: a block longer than this many characters is treated as malformed (bounds memory)
MAX_BLOCK_CHARS = 1 << 24


class _Scanner:
    """Chunked scanner: regexes find the ``Step N:`` markers and eval-only lines at C speed;
    Python walks only the lines after a marker.

    A metrics block is the tracker's own structure: a line ending in ``Step N:`` and then,
    from the same source (Ray prefix), a pprint dict literal, its continuation lines
    indented, until its braces balance. Lines from other sources, and same-source lines that
    are not pprint lines (warnings, progress bars), are skipped and counted as interleaved;
    a marker whose source prints no dict is counted (``step_markers_without_block``), a dict
    cut short by the next marker or the end of the log is reported with ``file:line``.
    """

    def __init__(self, out: ConsoleLog, strict: bool) -> None:
        self.out, self.strict = out, strict
        self.line_base = 0  # lines before the current text
        #: the log is written by loguru (learned from the first chunk): then only the tracker's
        #: own header opens a block, never a bare ``Step N:`` line in printed text
        self.loguru = False
        self._yaml_pending = ""  # the start of a YAML mapping cut by a chunk's end
        self._cache: tuple[str | None, int, int] = (None, 0, 0)

    def line_of(self, text: str, pos: int) -> int:
        """1-based line number of ``pos``; incremental for increasing positions."""
        last_text, last_pos, last_count = self._cache
        if last_text is not text or pos < last_pos:
            last_pos, last_count = 0, 0
        count = last_count + text.count("\n", last_pos, pos)
        self._cache = (text, pos, count)
        return self.line_base + count + 1

    def scan(self, text: str, final: bool) -> int:
        """Process ``text`` (whole lines); return the offset from which the caller must
        carry text into the next call (an unfinished block), or len(text)."""
        out = self.out
        keep = len(text)
        for m in STEP_MARK_RE.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            if len(digits := m.group("step")) > 15 or int(digits) >= MAX_STEP:  # never stored exactly
                out.markers_without_block += 1
                _problem(
                    out,
                    f"{out.path}:{self.line_of(text, start)}: 'Step {digits[:30]}{'...' if len(digits) > 30 else ''}:'"
                    " is not a step below 2^53; its block is not read",
                    self.strict,
                )
                continue
            if self.loguru and not TRACKER_BLOCK_HEADER_RE.search(split_source(text[start : m.end()])[1]):
                out.untracked_markers += 1  # a printed example's text (pretty_print_example), not the tracker
                continue
            status = self._block(text, start, m.end(), int(digits), final)
            if status == "carry":
                keep = start
                break
        head = text[:keep]
        for prefix in OVERRIDE_PREFIXES:  # str.find is far faster than a regex alternation
            pos = head.find(prefix)
            while pos >= 0:
                hit = OVERRIDE_RE.match(head, pos)
                if hit and (pos == 0 or not (head[pos - 1].isalnum() or head[pos - 1] in "_.+-")):
                    out.config.setdefault(hit.group("key"), hit.group("value").strip("'\""))
                pos = head.find(prefix, pos + 1)
        for marker in DS_MARKERS:
            pos = head.find(marker)
            while pos >= 0:
                self._sampling_line(head, pos)
                pos = head.find(marker, pos + 1)
        self._yaml_type(head, final)
        pos = head.find(EVAL_ONLY)
        while pos >= 0:
            start = head.rfind("\n", 0, pos) + 1
            stop = head.find("\n", pos)
            stop = len(head) if stop < 0 else stop
            body = clean_line(head[start:stop]).split(EVAL_ONLY, 1)[1]
            out.block_lines += 1
            _finish(out, body, "eval", None, f"{out.path}:{self.line_of(text, start)}", self.strict)
            pos = head.find(EVAL_ONLY, stop)
        return keep

    def _yaml_type(self, head: str, final: bool) -> None:
        """The YAML dump's ``dynamic_sampling: type:`` (the mapping's lines, the Ray prefix and
        colours removed); a mapping cut by the chunk's end is completed from the next chunk."""
        out = self.out
        if out.yaml_dynamic_sampling is not None:
            return
        text, self._yaml_pending = self._yaml_pending + head, ""
        pos = text.find("dynamic_sampling:")
        while pos >= 0:
            start = text.rfind("\n", 0, pos) + 1
            window = text[start : pos + 4000].split("\n")[:8]
            hit = DS_YAML_RE.search("\n".join(split_source(line)[1] for line in window) + "\n")
            if hit:
                out.yaml_dynamic_sampling = hit.group("type")
                return
            if not final and text.count("\n", start) < 8:  # the mapping may go on in the next chunk
                self._yaml_pending = text[start:][-4000:]
                return
            pos = text.find("dynamic_sampling:", pos + 1)

    def _sampling_line(self, text: str, pos: int) -> None:
        """Record one dynamic-sampling round line found at ``pos``."""
        stop = text.find("\n", pos)
        line = text[pos : len(text) if stop < 0 else stop]
        start = text.rfind("\n", 0, pos) + 1
        event: tuple[str, tuple[int, ...]]
        if (m := DS_FILTER_RE.match(line)) is not None:
            kept = m.group("short") or m.group("done")
            event = ("filter", (int(kept), int(m.group("target")), int(m.group("done") is not None)))
        elif (m := DS_REPLACE_RE.match(line)) is not None:
            event = ("replace", (int(m.group("good")), int(m.group("total"))))
        elif (m := DS_REPLACED_RE.match(line)) is not None:
            event = ("replaced", (int(m.group("bad")),))
        else:
            return
        self.out.sampling_events.append((self.line_of(text, start), *event))

    def _block(self, text: str, start: int, header_end: int, step: int, final: bool) -> str:
        """Find and parse the block of the marker whose line starts at ``start``; return
        ``"carry"`` when it may continue in the next chunk, else ``"done"``.

        The tracker logs ``Step N: \\n{pformat}`` as one message, so the dict is the next
        line from the marker's source: ``{`` in column 0 and a quoted key; inside the dict's
        top level only pprint item lines (one space, a quoted key, ``: ``) belong to it,
        deeper-nested lines are indented further. Other lines are interleaved output.
        """
        out = self.out
        header_source, header = split_source(text[start:header_end])
        pos = header_end + 1
        parts: list[str] = []
        open_at = -1
        depth = 0
        interleaved = 0
        key_lines = 0
        while True:
            if pos >= len(text):
                if not final and len(text) - start < MAX_BLOCK_CHARS:
                    return "carry"
                problem = "at end of file" if final else f"(longer than {MAX_BLOCK_CHARS} characters)"
                break
            eol = text.find("\n", pos)
            eol = len(text) if eol < 0 else eol
            line_at, line = pos, text[pos:eol]
            pos = eol + 1
            src, content = split_source(line)
            if src != header_source:
                interleaved += 1
                continue
            if STEP_RE.search(content):
                problem = "(the next Step marker came first)"
                break
            if open_at < 0:
                if not PPRINT_OPEN_RE.match(content):
                    break  # no dict follows: this marker has no block
                open_at = line_at
                key_lines = 1 if content.startswith(("{'", '{"')) else 0
            elif depth == 1 and PPRINT_KEY_RE.match(content):
                key_lines += 1
            elif not (depth > 1 and content.startswith("  ")):
                interleaved += 1
                continue
            parts.append(content)
            depth += _bracket_delta(content)
            if depth <= 0:
                block = "\n".join(parts)
                out.block_lines += 1 + len(parts)
                out.interleaved += interleaved
                at = self.line_of(text, open_at)
                where = f"{out.path}:{at}"
                parsed = _finish(out, block, "step", step, where, self.strict, at)
                if parsed is not None and len(parts) > 1 and len(parsed) != key_lines:
                    _problem(
                        out,
                        f"{where}: metrics block of step {step} has {len(parsed)} keys on {key_lines} "
                        "item lines (a line was lost or joined)",
                        self.strict,
                    )
                self._check_after(text, pos, header_source, step, where)
                return "done"
            if len(parts) >= MAX_BLOCK_LINES:
                problem = f"(longer than {MAX_BLOCK_LINES} lines)"
                break
        if open_at < 0:
            out.markers_without_block += 1
            if TRACKER_HEADER_RE.search(header):  # the tracker's own header, not model text
                at = self.line_of(text, start)
                out.step_marks.append((at, step, False))
                _problem(
                    out,
                    f"{out.path}:{at}: the console tracker's 'Step {step}:' is not followed by its metrics dict",
                    self.strict,
                )
            return "done"
        out.block_lines += 1 + len(parts)
        out.interleaved += interleaved
        at = self.line_of(text, open_at)
        out.step_marks.append((at, step, False))
        _problem(out, f"{out.path}:{at}: truncated metrics block of step {step} {problem}", self.strict)
        return "done"

    def _check_after(self, text: str, pos: int, source: str, step: int, where: str) -> None:
        """Report dict lines from the block's source right after the block: the block
        parsed was then not the whole story (output interleaved within one source)."""
        for _ in range(50):
            if pos >= len(text):
                return
            eol = text.find("\n", pos)
            eol = len(text) if eol < 0 else eol
            src, content = split_source(text[pos:eol])
            pos = eol + 1
            if src != source:
                continue
            if PPRINT_KEY_RE.match(content) or content.startswith("{'"):
                _problem(
                    self.out,
                    f"{where}: more dict lines from the same source follow the metrics block of "
                    f"step {step} (output interleaved within one actor?)",
                    self.strict,
                )
            return


def read_console_log(path: str | Path, *, strict: bool = False, progress: Any = None) -> ConsoleLog:
    """Parse one SkyRL console log (module docstring) in one streaming pass.

    The log is read in chunks of about 4 M characters; regexes locate the metrics blocks and
    only those are handled in Python. A launcher prefix that most of the first lines carry
    (:data:`LINE_PREFIXES`) is learned and stripped from every line. ``progress``, if given,
    is called with the number of characters consumed so far after every chunk. Returns the
    per-step metrics (blocks of the same step merged; a resumed run's later attempt
    replacing the earlier one's steps, :meth:`ConsoleLog.merge_step`), the eval-only blocks,
    the configuration overrides and the line accounting.

    Parameters
    ----------
    path : path
        The console log, plain or ``.zst``.
    strict : bool, default False
        Raise :class:`LogFormatError` at the first malformed or truncated block. ``False``:
        skip it and report it (``file:line``) in ``ConsoleLog.problems``.
    progress : callable, optional
        Called as ``progress(characters)`` after every chunk.

    Returns
    -------
    ConsoleLog
        The per-step metrics, eval-only blocks, configuration, dynamic-sampling counts,
        problems and line accounting of the log.

    Raises
    ------
    LogFormatError
        With ``strict``, at the first problem (naming ``file:line``).
    """
    out = ConsoleLog(str(path))
    scanner = _Scanner(out, strict)
    carry = ""  # whole lines, prefix stripped, of an unfinished block
    pending = ""  # a partial last line, as read
    prefix: re.Pattern[str] | None = None
    learned = False
    skipping = False
    consumed = 0
    with open_text(path, newline="") as stream:
        while True:
            try:
                chunk = stream.read(CHUNK_CHARS)
                if not chunk:
                    stream.read()  # a truncated stream raises after its end-of-data
            except TruncatedStreamError as exc:
                _problem(
                    out,
                    f"{exc} after line {scanner.line_base + carry.count(chr(10))}; the blocks before it were read",
                    strict,
                )
                chunk = ""
            final = not chunk
            consumed += len(chunk)
            raw = pending + chunk
            if final:
                if raw and not raw.endswith("\n"):
                    raw += "\n"
                cut = len(raw)
            else:
                cut = raw.rfind("\n") + 1
            if skipping:  # the rest of an overlong line
                nl = raw.find("\n")
                raw = "" if nl < 0 else raw[nl + 1 :]
                skipping = nl < 0 and not final
                cut = raw.rfind("\n") + 1 if not final else len(raw)
            lines, pending = raw[:cut], raw[cut:]
            if len(pending) > MAX_LINE_CHARS:
                line_no = scanner.line_base + carry.count("\n") + lines.count("\n") + 1
                _problem(out, f"{out.path}:{line_no}: line longer than {MAX_LINE_CHARS:,} characters, skipped", strict)
                out.overlong_lines += 1
                pending, skipping = "", True
                lines += "\n"  # the overlong line counts as one (empty) line
            if "\r" in lines:  # CRLF endings; a lone CR (a progress-bar redraw) stays in its line
                lines = lines.replace("\r\n", "\n")
            if not learned and (lines or final):
                learned = True
                found = learn_line_prefix(lines[: 1 << 16].split("\n"))
                if found is not None:
                    out.line_prefix, prefix = found
            if prefix is not None:
                lines = prefix.sub("", lines)
            if not scanner.loguru and consumed <= CHUNK_CHARS:
                scanner.loguru = LOGURU_LINE_RE.search(ANSI_RE.sub("", lines[: 1 << 20])) is not None
            whole = carry + lines
            keep = scanner.scan(whole, final)
            n_lines = whole.count("\n", 0, keep)
            out.lines += n_lines
            scanner.line_base += n_lines
            carry = whole[keep:]
            if progress is not None:
                progress(consumed)
            if final:
                break
    out.bytes_read = consumed
    out.place_sampling_events()
    return out


def _finish(
    out: ConsoleLog, text: str, kind: str, step: int | None, where: str, strict: bool, line: int = 0
) -> dict[str, Any] | None:
    """Parse one block and file its values (a step block's marker in ``step_marks``)."""
    parsed = _parse_block(text, where, out, strict)
    if parsed is not None and len(parsed) > MAX_COLUMNS:  # each key is a metric variable, bounded like columns
        _problem(
            out,
            f"{where}: metrics block has {len(parsed):,} keys, more than the limit of {MAX_COLUMNS:,} "
            "(raise it with SATURATION_MAX_COLUMNS); not read",
            strict,
        )
        parsed = None
    if kind == "step" and step is not None:
        out.step_marks.append((line, step, parsed is not None))
    if parsed is None:
        return None
    out.blocks += 1
    values = _numeric(parsed, out)
    if kind == "eval":
        out.eval_only.append(values)
    elif step is not None:
        out.merge_step(step, values)
    return parsed


def metrics_dataset(logs: list[ConsoleLog]) -> xr.Dataset:
    """Per-step metrics of several logs as one Dataset (dims run, step): one variable per
    logged key under a netCDF-safe name (known SkyRL metrics get the package's names, e.g.
    ``reward_mean``, ``pass_at_k``, ``policy_entropy``), the original key in
    ``attrs['metric_name']``; the run's configuration overrides in the Dataset attrs
    (``config/<run>``) and the line accounting in ``attrs['accounting']``.

    Parameters
    ----------
    logs : list of ConsoleLog
        Parsed logs (:func:`read_console_log`, :func:`saturation.wandb_history.read_wandb_run`),
        one per run: the run identity is ``trainer.policy.model.path``, else the file name
        up to its first dot.

    Returns
    -------
    xarray.Dataset
        The per-step metrics series (dims run, step; steps the union over the logs, missing
        values NaN); ``attrs`` also hold the sources and each dynamic-sampling run's strategy.

    Raises
    ------
    ValueError
        If two logs share a run identity, or the logs hold more distinct metric keys than
        the limit (``SATURATION_MAX_COLUMNS``).
    """

    runs = [log.run for log in logs]
    if len(set(runs)) != len(runs):
        raise ValueError(f"several logs share a run identity ({RUN_KEY}): {runs}")
    keys = sorted({k for log in logs for values in log.steps.values() for k in values})
    if len(keys) > MAX_COLUMNS:
        raise ValueError(
            f"{', '.join(log.path for log in logs)}: {len(keys):,} distinct metric keys, more than the limit of "
            f"{MAX_COLUMNS:,} (raise it with SATURATION_MAX_COLUMNS)"
        )
    names = metric_variable_names(keys)
    steps = sorted({s for log in logs for s in log.steps})
    arr = np.full((len(keys), len(logs), len(steps)), np.nan)
    kpos = {k: i for i, k in enumerate(keys)}
    spos = {s: i for i, s in enumerate(steps)}
    for r, log in enumerate(logs):
        for step, values in log.steps.items():
            for key, value in values.items():
                arr[kpos[key], r, spos[step]] = value
    ds = xr.Dataset(
        {names[k]: ((S.RUN, S.STEP), arr[i]) for k, i in kpos.items()},
        coords={S.RUN: np.asarray(runs, dtype=object), S.STEP: np.asarray(steps, dtype=np.int64)},
    )
    label_metrics(ds, names)
    ds.attrs[S.ATTR_SOURCES] = json.dumps([log.path for log in logs])
    ds.attrs["accounting"] = json.dumps([log.accounting() for log in logs])
    for log in logs:
        ds.attrs[f"config/{log.run}"] = json.dumps(log.config, sort_keys=True)
        if log.dynamic_sampling is not None:
            ds.attrs[f"{DYNAMIC_SAMPLING_TYPE_KEY}/{log.run}"] = log.dynamic_sampling
    for key in DYNAMIC_SAMPLING_KEYS.values():
        if key in names:
            ds[names[key]].attrs["description"] = "read from dynamic sampling's per-round log lines"
    return ds
