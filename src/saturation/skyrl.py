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
  ``trainer.policy.model.path``.

Parsing is literal only (:func:`ast.literal_eval`, never ``eval``); the file is read as a
stream, so memory stays bounded by the largest block, not the log size. Every line is
accounted for; a malformed or truncated block is reported with ``file:line`` and skipped
(lenient) or raises (strict).
"""

from __future__ import annotations

import ast
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import xarray as xr

from saturation import schema as S

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
RAY_PREFIX_RE = re.compile(r"^\((?P<actor>[^()\s]+) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]+))?\)\s?")
REPEATED_RE = re.compile(r"\s*\[repeated (?P<n>\d+)x across cluster\]\s*$")
STEP_RE = re.compile(r"Step (?P<step>\d+):\s*$")
EVAL_ONLY = "Metrics from eval only run:"
OVERRIDE_PREFIXES = ("trainer.", "generator.", "environment.", "data.")
OVERRIDE_RE = re.compile(
    r"(?<![\w.+-])(?P<key>(?:trainer|generator|environment|data)(?:\.[A-Za-z_]\w*)+)="
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s]+)"
)
RUN_KEY = "trainer.policy.model.path"
#: a block longer than this many lines is treated as malformed (bounds memory)
MAX_BLOCK_LINES = 5000


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

    def merge_step(self, step: int, values: dict[str, float]) -> None:
        """Merge ``values`` into the step's metrics: a key already holding another value
        keeps the first and counts a conflict."""
        merged = self.steps.setdefault(step, {})
        for key, value in values.items():
            if key in merged and merged[key] != value:
                self.conflicts += 1
            else:
                merged[key] = value

    @property
    def run(self) -> str:
        return self.config.get(RUN_KEY, Path(self.path).name.split(".")[0])

    def accounting(self) -> dict[str, Any]:
        return {"file": self.path, "lines": self.lines, "block_lines": self.block_lines,
                "other_lines": self.lines - self.block_lines, "blocks": self.blocks, "steps": len(self.steps),
                "eval_only_blocks": len(self.eval_only), "malformed": len(self.problems),
                "conflicting_values": self.conflicts, "bytes": self.bytes_read}


class TruncatedStreamError(ValueError):
    """A zstandard stream ends inside a frame (or is corrupt)."""


class _ZstdRaw(io.RawIOBase):
    """Streaming zstandard decompression (any number of frames) that raises
    :class:`TruncatedStreamError` when the input ends inside a frame, instead of
    returning the partial data as if the file were complete."""

    def __init__(self, fileobj: IO[bytes], name: str) -> None:
        import zstandard

        self._zstd = zstandard
        self._f, self._name = fileobj, name
        self._d = zstandard.ZstdDecompressor().decompressobj()
        self._buf = b""
        self._pos = 0
        self._in_frame = False
        self._truncated = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while self._pos >= len(self._buf):
            data = self._f.read(1 << 20)
            if not data:
                if self._in_frame:
                    if self._truncated:
                        raise TruncatedStreamError(
                            f"{self._name}: truncated zstd stream (the last frame has no end)")
                    # first report end-of-data, so the reader gets everything decompressed so
                    # far (TextIOWrapper drops a partial read when an error is raised); the
                    # next read raises
                    self._truncated = True
                return 0
            out = []
            while data:
                try:
                    out.append(self._d.decompress(data))
                except self._zstd.ZstdError as exc:
                    raise TruncatedStreamError(f"{self._name}: corrupt zstd stream ({exc})") from exc
                self._in_frame = not self._d.eof
                data = self._d.unused_data if self._d.eof else b""
                if self._d.eof:
                    self._d = self._zstd.ZstdDecompressor().decompressobj()
            self._buf, self._pos = b"".join(out), 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos:self._pos + n]
        self._pos += n
        return n

    def close(self) -> None:
        self._f.close()
        super().close()


def open_text(path: str | Path) -> IO[str]:
    """A text stream over a plain or zstandard-compressed file (decoded as UTF-8, invalid
    bytes replaced), read incrementally. A truncated ``.zst`` first ends like a complete
    file, then raises :class:`TruncatedStreamError` on the next read (so read once more
    after end-of-file, as :func:`read_all` does); a corrupt one raises where it is damaged."""
    path = Path(path)
    raw: Any = open(path, "rb")  # noqa: SIM115 - closed by the TextIOWrapper
    if path.suffix == ".zst":
        # unbuffered on purpose: a BufferedReader would discard the data read before the
        # truncation error
        raw = _ZstdRaw(raw, str(path))
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)


def read_all(path: str | Path) -> str:
    """The whole text of a plain or ``.zst`` file; raises :class:`TruncatedStreamError`
    for a truncated stream."""
    with open_text(path) as stream:
        text = stream.read()
        stream.read()  # a truncated stream raises here
    return text


def clean_line(line: str) -> str:
    """Strip ANSI codes, the Ray actor prefix and the ``[repeated Nx across cluster]`` suffix."""
    line = line.rstrip("\r\n")
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    if line.startswith("("):
        line = RAY_PREFIX_RE.sub("", line, count=1)
    if "[repeated" in line:
        line = REPEATED_RE.sub("", line)
    return line


#: a quoted string (either quote, backslash escapes) - braces inside do not count
QUOTED_RE = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
#: one ``'key': value`` item of a flat metrics dict (string, number, bool or None value)
ITEM_RE = re.compile(
    r"\s*(?P<q>['\"])(?P<key>[^'\"\\]*)(?P=q)\s*:\s*"
    r"(?:(?P<vq>['\"])(?P<str>[^'\"\\]*)(?P=vq)|(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|(?P<const>True|False|None))\s*(?:,|$)"
)


def _brace_delta(text: str) -> int:
    """Net change of brace depth over ``text``, ignoring braces inside quoted strings
    (a metrics block's strings do not span lines)."""
    if "'" in text or '"' in text:
        text = QUOTED_RE.sub("", text)
    return text.count("{") - text.count("}")


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
        value = ast.literal_eval(text.strip())
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


#: the end of a ``Step N:`` marker line (after colour codes / repeat suffixes)
_TAIL = r"[ \t]*(?:\x1b\[[0-9;?]*[ -/]*[@-~])*[ \t]*(?:\[repeated \d+x across cluster\])?[ \t]*$"
STEP_MARK_RE = re.compile(r"Step (?P<step>\d+):" + _TAIL, re.M)
#: a line that may close a block: it ends in "}"
BLOCK_END_RE = re.compile(r"\}" + _TAIL, re.M)
#: the Ray prefix at the start of every line of a text (multi-line clean-up)
RAY_PREFIX_M_RE = re.compile(r"^\([^()\s]+ pid=\d+(?:, ip=[^)\s]+)?\)\s?", re.M)
REPEATED_M_RE = re.compile(r"[ \t]*\[repeated \d+x across cluster\][ \t]*$", re.M)
CHUNK_CHARS = 1 << 22
#: a block longer than this many characters is treated as malformed (bounds memory)
MAX_BLOCK_CHARS = 1 << 24


def _clean_text(text: str) -> str:
    """:func:`clean_line` for every line of ``text`` at once."""
    if "\x1b" in text:
        text = ANSI_RE.sub("", text)
    if "pid=" in text:
        text = RAY_PREFIX_M_RE.sub("", text)
    if "[repeated" in text:
        text = REPEATED_M_RE.sub("", text)
    return text


class _Scanner:
    """Chunked scanner: regexes find the ``Step N:`` markers, eval-only lines and block ends
    at C speed; Python touches only the metrics blocks, never the other lines."""

    def __init__(self, out: ConsoleLog, strict: bool) -> None:
        self.out, self.strict = out, strict
        self.line_base = 0  # lines before the current text
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
        marks = list(STEP_MARK_RE.finditer(text))
        for i, m in enumerate(marks):
            step = int(m.group("step"))
            nxt = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            last = nxt == len(text)
            # the block opens on the first later line whose cleaned text starts with "{"
            open_at = self._find_open(text, m.end(), nxt)
            if open_at is None:
                if last and not final:
                    keep = self._line_start(text, m.start())  # the block may open in the next chunk
                    break
                out.block_lines += 1
                continue
            end = self._find_end(text, open_at, nxt)
            if end is None and last and not final and len(text) - m.start() < MAX_BLOCK_CHARS:
                keep = self._line_start(text, m.start())  # carry the unfinished block over
                break
            out.block_lines += 1
            if end is None:
                where = f"{out.path}:{self.line_of(text, open_at)}"
                tail = "at end of file" if last and final else "(braces never balanced)"
                _problem(out, f"{where}: truncated metrics block {tail}", self.strict)
                out.block_lines += text.count("\n", open_at, nxt)
                continue
            block = _clean_text(text[open_at:end])
            out.block_lines += block.count("\n") + 1
            _finish(out, block, "step", step, f"{out.path}:{self.line_of(text, open_at)}", self.strict)
        head = text[:keep]
        for prefix in OVERRIDE_PREFIXES:  # str.find is far faster than a regex alternation
            pos = head.find(prefix)
            while pos >= 0:
                hit = OVERRIDE_RE.match(head, pos)
                if hit and (pos == 0 or not (head[pos - 1].isalnum() or head[pos - 1] in "_.+-")):
                    out.config.setdefault(hit.group("key"), hit.group("value").strip("'\""))
                pos = head.find(prefix, pos + 1)
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

    @staticmethod
    def _line_start(text: str, pos: int) -> int:
        return text.rfind("\n", 0, pos) + 1

    @staticmethod
    def _find_open(text: str, pos: int, stop: int) -> int | None:
        while pos < stop:
            nl = text.find("\n", pos, stop)
            start = nl + 1 if nl >= 0 else stop
            if start >= stop:
                return None
            eol = text.find("\n", start, stop)
            line = clean_line(text[start: eol if eol >= 0 else stop])
            if line.lstrip().startswith("{"):
                return start
            pos = start
        return None

    @staticmethod
    def _find_end(text: str, start: int, stop: int) -> int | None:
        depth_text_start = start
        for m in BLOCK_END_RE.finditer(text, start, stop):
            candidate = _clean_text(text[depth_text_start:m.end()])
            if _brace_delta(candidate) <= 0:
                return m.end()
        return None


def read_console_log(path: str | Path, *, strict: bool = False, progress: Any = None) -> ConsoleLog:
    """Parse one SkyRL console log (module docstring) in one streaming pass.

    The log is read in chunks of about 4 M characters; regexes locate the metrics blocks and
    only those are handled in Python. ``progress``, if given, is called with the number of
    characters consumed so far after every chunk. Returns the per-step metrics (blocks of
    the same step merged; a key seen twice in one step with different values keeps the
    first and is counted as a conflict), the eval-only blocks, the configuration overrides
    and the line accounting.
    """
    out = ConsoleLog(str(path))
    scanner = _Scanner(out, strict)
    carry = ""
    consumed = 0
    with open_text(path) as stream:
        while True:
            try:
                chunk = stream.read(CHUNK_CHARS)
            except TruncatedStreamError as exc:
                _problem(out, f"{exc} after line {scanner.line_base + carry.count(chr(10))}; "
                              "the blocks before it were read", strict)
                chunk = ""
            final = not chunk
            consumed += len(chunk)
            text = carry + chunk
            if final:
                if text and not text.endswith("\n"):
                    text += "\n"
                cut = len(text)
            else:
                cut = text.rfind("\n") + 1
            whole, carry = (text, "") if cut == len(text) else (text[:cut], text[cut:])
            keep = scanner.scan(whole, final)
            n_lines = whole.count("\n", 0, keep)
            out.lines += n_lines
            scanner.line_base += n_lines
            if keep < len(whole):
                carry = whole[keep:] + carry
            if progress is not None:
                progress(consumed)
            if final:
                break
    out.bytes_read = consumed
    return out


def _finish(out: ConsoleLog, text: str, kind: str, step: int | None, where: str, strict: bool) -> None:
    parsed = _parse_block(text, where, out, strict)
    if parsed is None:
        return
    out.blocks += 1
    values = _numeric(parsed, out)
    if kind == "eval":
        out.eval_only.append(values)
        return
    if step is None:  # pragma: no cover - a step block always has its step
        return
    out.merge_step(step, values)


def metrics_dataset(logs: list[ConsoleLog]) -> xr.Dataset:
    """Per-step metrics of several logs as one Dataset (dims run, step): one variable per
    logged key under a netCDF-safe name (known SkyRL metrics get the package's names, e.g.
    ``reward_mean``, ``pass_at_k``, ``policy_entropy``), the original key in
    ``attrs['metric_name']``; the run's configuration overrides in the Dataset attrs
    (``config/<run>``) and the line accounting in ``attrs['accounting']``."""
    import json

    from saturation.replica import label_metrics, metric_variable_names

    runs = [log.run for log in logs]
    if len(set(runs)) != len(runs):
        raise ValueError(f"several logs share a run identity ({RUN_KEY}): {runs}")
    keys = sorted({k for log in logs for values in log.steps.values() for k in values})
    names = metric_variable_names(keys)
    steps = sorted({s for log in logs for s in log.steps})
    arr = np.full((len(keys), len(logs), len(steps)), np.nan)
    kpos = {k: i for i, k in enumerate(keys)}
    spos = {s: i for i, s in enumerate(steps)}
    for r, log in enumerate(logs):
        for step, values in log.steps.items():
            for key, value in values.items():
                arr[kpos[key], r, spos[step]] = value
    ds = xr.Dataset({names[k]: ((S.RUN, S.STEP), arr[i]) for k, i in kpos.items()},
                    coords={S.RUN: np.asarray(runs, dtype=object), S.STEP: np.asarray(steps, dtype=np.int64)})
    label_metrics(ds, names)
    ds.attrs[S.ATTR_SOURCES] = json.dumps([log.path for log in logs])
    ds.attrs["accounting"] = json.dumps([log.accounting() for log in logs])
    for log in logs:
        ds.attrs[f"config/{log.run}"] = json.dumps(log.config, sort_keys=True)
    return ds
