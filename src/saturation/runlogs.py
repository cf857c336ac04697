"""Per-step metrics of any RL run: verl, TRL, TensorBoard, MLflow, wandb exports, tables.

Every reader here turns what a training framework wrote into the package's per-step metrics
Dataset (:mod:`saturation.series`: dims ``(run, step)``, one variable per logged key, the
key as logged in ``attrs['metric_name']``), with every line or record accounted for. The
formats (:data:`FORMATS`; docs/your-run.md cites the upstream code that writes each):

``verl-console``
    verl's console tracker: one line ``step:N - key:value - key:value ...`` per step
    (``concat_dict_to_str``, verl/utils/logger/aggregate_logger.py), optionally behind Ray's
    ``(main_task pid=...)`` / ``(TaskRunner pid=...)`` prefix and ANSI colour codes; values
    as ``pprint.pformat`` writes them (``0.5``, ``nan``, ``np.float64(0.5)``) or, before
    2025, ``f"{v:.3f}"``. Every other line is foreign; NUL bytes are dropped and counted.
``verl-jsonl``
    verl's file tracker: one ``{"step": N, "data": {key: value}}`` per line (orjson writes
    NaN and infinity as ``null``: a missing value, counted).
``trl``
    Hugging Face ``trainer_state.json`` (``log_history``: dicts with ``step`` and the logged
    keys; eval rows hold ``eval_*`` keys), or a training output directory, whose newest
    complete ``trainer_state.json`` (top level or ``checkpoint-N/``) is read (each holds the
    whole history so far: the older ones are counted as superseded).
``table``
    A CSV or JSONL with one row per step: a step column (``step``, ``Step``,
    ``global_step``, ``_step``, ``update``, ``train/global_step``, ``iteration``), an
    optional ``run`` column or the columns named by ``run_column`` (several runs in one
    file), one column per metric. The metrics CSV of :func:`saturation.series.write_metrics_csv`
    is one.
``wandb-csv``
    wandb's CSV export of a chart: ``Step`` and ``<run name> - <key>`` columns, one run per
    name; the ``__MIN`` / ``__MAX`` columns (the range of a downsampled bucket) are left
    out and counted.
``mlflow``
    MLflow's local file store: ``mlruns/<experiment>/<run>/metrics/<key>`` files of
    ``timestamp value step`` lines; the run named by ``tags/mlflow.runName`` (else
    ``run_name`` in ``meta.yaml``, else its id). Plain text: no ``mlflow`` needed.
``tensorboard``
    ``events.out.tfevents.*`` files (a file, or a directory: each directory holding event
    files is one run), read with the ``tensorboard`` package's event-file loader (optional
    extra ``saturation[tensorboard]``): ``simple_value`` scalars (torch's ``SummaryWriter``)
    and scalar tensors of the ``scalars`` plugin (``tensorboard.summary.Writer``, TF2).

Rules every reader follows:

* a value logged again at a step already logged in the same run (a run resumed from a
  checkpoint logs its steps again) - **the later value wins**, in file order (for several
  files of one run, in the order given; TensorBoard files in name order, i.e. time); the
  replaced values and the times the step went backwards (``restarts``) are counted;
* a value that is not a number is reported with file:line and field, never coerced
  (``nan`` is a number: a missing value);
* a variable is ``phase`` ``validation`` when its key is a validation key (``val-``,
  ``val/``, ``eval_``, ``eval/`` prefixes), else ``train``; steps at which only validation
  keys were logged (verl's validation before training, at step 0 or at the resumed step)
  are listed per run in ``attrs['validation_only_steps']``;
* the Dataset's ``attrs['accounting']`` holds one dict per file read, with
  ``records == kept + foreign + malformed`` (lines for text formats, rows, log-history
  entries or events otherwise), and ``attrs['sources']`` the files.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import os
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import schema as S
from saturation import streams
from saturation.series import label_metrics, metric_variable_names
from saturation.series import read_metrics as read_series_file
from saturation.skyrl import ANSI_RE

#: the formats :func:`read_runlogs` reads (``--format``)
FORMATS = S.RUNLOG_FORMATS
#: what to install for TensorBoard event files
TENSORBOARD_HINT = "pip install 'saturation[tensorboard]'"
#: key prefixes of validation metrics (verl ``val-core/``, ``val-aux/``, older ``val/``; TRL ``eval_``)
VALIDATION_PREFIXES = ("val-", "val/", "eval_", "eval/")
#: column names taken as the step of a per-step table, in order of preference (case-insensitive)
STEP_COLUMNS = ("step", "global_step", "_step", "train/global_step", "update", "iteration")
#: a verl console step line: ``step:N - `` not preceded by a key character (:data:`KEY_BYTES`,
#: as in ``training/global_step:5``; checked by hand: a look-behind would stop the regex engine's
#: fast search for the literal)
VERL_STEP_FAST_RE = re.compile(rb"step:\d+ - ")
KEY_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_/.-")
#: a verl file-tracker line starts like this (orjson's compact output)
VERL_JSONL_HEAD = re.compile(r'^\{"step":-?\d+,"data":\{')
#: a SkyRL tracker block's loguru header (``skyrl_train.utils.tracking:log:N - Step N:``)
SKYRL_TRACKER_RE = re.compile(r"\| [A-Z]+ *\| \S+:\S+:\d+ - Step \d+: *$", re.M)
#: an ANSI escape sequence, Ray's ``[repeated Nx across cluster]`` suffix
ANSI_BYTES_RE = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
REPEATED_BYTES_RE = re.compile(rb"\s*\[repeated \d+x across cluster\]\s*$")
#: ``np.float64(0.5)``: ``pprint.pformat`` of a numpy scalar under numpy >= 2 (unwrapped to ``0.5``)
NP_WRAPPERS = tuple(
    f":np.{kind}{bits}(".encode() for kind in ("float", "int", "uint") for bits in ("64", "32", "16", "8", "")
)
NP_SCALAR_BYTES_RE = re.compile(rb":np\.[a-z]+\d*\(([^()]*)\)?(?= - |$)")
#: the Ray actor prefix of a line, digits masked (for the accounting)
RAY_PREFIX_BYTES_RE = re.compile(rb"\((?P<actor>[^()]*?) pid=\d+(?:, ip=[^)\s]+)?\)")
#: a wandb chart export column: ``<run name> - <key>`` (optionally ``__MIN`` / ``__MAX``)
WANDB_COLUMN_RE = re.compile(r"^(?P<run>.+?) - (?P<key>.+?)(?P<bound>__MIN|__MAX)?$")
#: TRL's checkpoint folders (transformers trainer_utils.PREFIX_CHECKPOINT_DIR)
CHECKPOINT_RE = re.compile(r"^checkpoint-(?P<step>\d+)$")
TRL_STATE = "trainer_state.json"
#: a trainer_state.json larger than this (characters) is refused
TRL_STATE_LIMIT = 1 << 30
#: bytes read per block of a console log (memory is a few blocks)
BLOCK_BYTES = 1 << 23
#: a console log larger than this is read by two processes (each a half, split at a newline)
PARALLEL_BYTES = 256 << 20
#: problems kept per file (the rest are counted)
MAX_PROBLEMS = 200


class RunLogError(ValueError):
    """Problems reading per-step metrics; the message lists them with file[:line] and field."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = "\n".join(f"  - {p}" for p in self.problems[:20])
        more = f"\n  ... and {len(self.problems) - 20} more" if len(self.problems) > 20 else ""
        super().__init__(f"{len(self.problems)} problem(s) in the per-step metrics:\n{shown}{more}")


# ------------------------------------------------------------------ collection
def _latest(steps: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct steps of records ``rows``, ascending; for each, the index into ``rows``
    of its latest record: the later record wins at a repeated step)."""
    order = np.argsort(rows, kind="stable")[::-1]  # latest record first
    unique, first = np.unique(steps[rows[order]], return_index=True)  # first = the latest
    return unique, order[first]


class _Collector:
    """Records of one run in file order: a step, a tuple of keys and their values. Records
    with the same keys share one growing array (compact for a million steps)."""

    def __init__(self, per_key: bool = False) -> None:
        #: count restarts per key (MLflow, TensorBoard: one file or stream per key) instead of per record
        self.per_key = per_key
        self.last_by_sig: dict[int, int] = {}
        # keys are str, or bytes as a console log holds them (decoded once, in resolve)
        self.signatures: dict[tuple[Any, ...], int] = {}
        self.keys: list[tuple[Any, ...]] = []
        self.values: list[array[float]] = []
        self.rows: list[array[int]] = []  # per signature: the record numbers
        self.steps: array[int] = array("q")
        self.restarts = 0
        self.last_step: int | None = None
        self.validation_records = 0

    def add(self, step: int, keys: tuple[Any, ...], values: Sequence[float]) -> None:
        sig = self.signatures.get(keys)
        if sig is None:
            sig = self.signatures[keys] = len(self.keys)
            self.keys.append(keys)
            self.values.append(array("d"))
            self.rows.append(array("q"))
        self.values[sig].extend(values)
        self.rows[sig].append(len(self.steps))
        last = self.last_by_sig.get(sig) if self.per_key else self.last_step
        if last is not None and step < last:
            self.restarts += 1
        if self.per_key:
            self.last_by_sig[sig] = step
        self.last_step = step
        self.steps.append(step)

    def extend(self, other: _Collector) -> None:
        """Append another collector's records (the next part of the same file)."""
        offset = len(self.steps)
        for sig, keys in enumerate(other.keys):
            own = self.signatures.get(keys)
            if own is None:
                own = self.signatures[keys] = len(self.keys)
                self.keys.append(keys)
                self.values.append(array("d"))
                self.rows.append(array("q"))
            self.values[own].extend(other.values[sig])
            self.rows[own].frombytes((np.frombuffer(other.rows[sig], dtype=np.int64) + offset).tobytes())
        if other.steps and self.last_step is not None and other.steps[0] < self.last_step:
            self.restarts += 1
        self.restarts += other.restarts
        if other.steps:
            self.last_step = other.steps[-1]
        self.steps.extend(other.steps)

    def resolve(self) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], int]:
        """key -> (steps, values), the later record winning at a repeated step; and how many
        values were replaced so. The latest-per-step selection is computed once per
        signature (a log's records mostly share one set of keys) and shared by its keys'
        step arrays; a key logged under several signatures is merged on its own."""
        steps = np.frombuffer(self.steps, dtype=np.int64) if self.steps else np.zeros(0, np.int64)
        parts: dict[str, list[tuple[int, int]]] = {}  # key -> (signature, column)
        for sig, keys in enumerate(self.keys):
            for j, key in enumerate(keys):
                name = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
                parts.setdefault(name, []).append((sig, j))
        rows = [np.frombuffer(r, dtype=np.int64) for r in self.rows]
        matrices = [
            np.frombuffer(self.values[sig], dtype=np.float64).reshape(len(rows[sig]), len(keys))
            for sig, keys in enumerate(self.keys)
        ]
        latest: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # signature -> (steps, latest row)
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        superseded = 0
        for key, where in parts.items():
            if len(where) == 1:
                sig, j = where[0]
                if sig not in latest:
                    latest[sig] = _latest(steps, rows[sig])
                unique, pick = latest[sig]
                superseded += len(rows[sig]) - len(unique)
                out[key] = (unique, matrices[sig][pick, j])
                continue
            key_rows = np.concatenate([rows[sig] for sig, _ in where])
            vals = np.concatenate([matrices[sig][:, j] for sig, j in where])
            unique, pick = _latest(steps, key_rows)
            superseded += len(key_rows) - len(unique)
            out[key] = (unique, vals[pick])
        return out, superseded


@dataclass
class _FileRead:
    """What one input file (or directory) gave: runs -> collectors, accounting, problems."""

    path: str
    format: str
    runs: dict[str, _Collector] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    def run(self, name: str, per_key: bool = False) -> _Collector:
        if name not in self.runs:
            self.runs[name] = _Collector(per_key)
        return self.runs[name]

    def problem(self, message: str) -> None:
        self.counts["problems"] += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(message)
        elif len(self.problems) == MAX_PROBLEMS:
            self.problems.append(f"{self.path}: more problems not listed (counted in the accounting)")


def _number(value: Any) -> float | None:
    """A JSON / Python value as a float, or None when it is not a number (bools included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond the float range
        return None


def _add_mapping(read: _FileRead, run: str, step: int, record: Mapping[str, Any], where: str) -> None:
    """One record (key -> value) at ``step``: numbers kept, ``None`` a missing value (counted),
    anything else reported with ``where`` and the field."""
    keys: list[str] = []
    values: list[float] = []
    for key, value in record.items():
        number = _number(value)
        if number is not None:
            keys.append(str(key))
            values.append(number)
        elif value is None:
            read.counts["values_null"] += 1
        else:
            read.counts["values_not_numeric"] += 1
            read.problem(f"{where}, field {key!r}: {str(value)[:60]!r} is not a number (not kept)")
    read.counts["values"] += len(values)
    if keys:
        read.run(run).add(step, tuple(keys), values)


def _int_step(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


# ------------------------------------------------------------------ verl console
@dataclass
class _ConsolePart:
    """What one byte range of a console log gave (pickled back from a worker)."""

    collector: _Collector
    lines: int = 0
    kept: int = 0
    malformed: int = 0
    values: int = 0
    not_numeric: int = 0
    nul_bytes: int = 0
    prefixes: Counter[str] = field(default_factory=Counter)
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line within the part, message)


def _console_value(raw: bytes) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


def _console_slow(items: list[bytes], part: _ConsolePart, line: int) -> tuple[list[bytes], list[float]] | None:
    """Item by item (a malformed item or a value that is not a number): the keys and values
    kept, each problem recorded; None when an item is not ``key:value`` (the line is malformed)."""
    keys: list[bytes] = []
    values: list[float] = []
    for item in items:
        key, sep, raw = item.rpartition(b":")
        if not sep or not key:
            shown = item[:60].decode("utf-8", "replace")
            part.malformed += 1
            part.problems.append((line, f"item {shown!r} is not key:value (the line is not kept)"))
            return None
        value = _console_value(raw)
        if value is None:
            part.not_numeric += 1
            name, shown = key.decode("utf-8", "replace"), raw[:40].decode("utf-8", "replace")
            part.problems.append((line, f"field {name!r}: {shown!r} is not a number (not kept)"))
            continue
        keys.append(key)
        values.append(value)
    return keys, values


class _LineOf:
    """Line numbers of offsets into one block, counted only when a problem asks (offsets
    asked in increasing order, so the count goes on from the last one)."""

    def __init__(self, buf: bytes, first_line: int) -> None:
        self.buf, self.pos, self.line = buf, 0, first_line

    def __call__(self, offset: int) -> int:
        self.line += self.buf.count(b"\n", self.pos, offset)
        self.pos = offset
        return self.line


def _console_line(text: bytes, part: _ConsolePart, line: Callable[[], int]) -> None:
    """One ``step:N - key:value ...`` text (from ``step:`` to the end of the line). The fast
    path: numpy scalars unwrapped in one pass, the separators made one, the whole line split
    once, keys and values taken by slicing and every value parsed by one ``map(float)``; a
    key holding ``:`` goes through ``rpartition`` per item, anything unusual item by item."""
    if b":np." in text:
        text = _unwrap_numpy(text)
    flat = text.replace(b" - ", b":").split(b":")
    try:
        if len(flat) != 2 * (text.count(b" - ") + 1):  # a key or value holding ":"
            raise ValueError
        step = int(flat[1])
        keys = flat[2::2]
        if not all(keys):
            raise ValueError
        values = list(map(float, flat[3::2]))
    except ValueError:
        items = text.split(b" - ")
        step = int(items[0][5:])
        kv = [item.rpartition(b":") for item in items[1:]]
        try:
            if not all([p[0] and p[1] for p in kv]):
                raise ValueError from None
            values = list(map(float, [p[2] for p in kv]))
            keys = [p[0] for p in kv]
        except ValueError:
            got = _console_slow(items[1:], part, line())
            if got is None:
                return
            keys, values = got
    part.kept += 1
    part.values += len(values)
    if keys:
        part.collector.add(step, tuple(keys), values)


def _unwrap_numpy(text: bytes) -> bytes:
    """``key:np.float64(0.5)`` -> ``key:0.5`` for every value of a line (verl's
    ``pprint.pformat`` of numpy 2 scalars) by plain ``bytes.replace`` (a regex substitution
    with a group costs 20 times more; one pass over a line beats one over a joined block);
    a wrapper not in :data:`NP_WRAPPERS` goes through :data:`NP_SCALAR_BYTES_RE`."""
    for wrapper in NP_WRAPPERS:  # the common ones first; most lines hold one kind or two
        text = text.replace(wrapper, b":")
        if b":np." not in text:
            break
    text = text.replace(b") - ", b" - ")
    if text.endswith(b")"):
        text = text[:-1]
    if b":np." in text:
        text = NP_SCALAR_BYTES_RE.sub(rb":\1", text)
    return text


def _clean_console(text: bytes) -> bytes:
    text = text.rstrip(b"\r\n")
    if b"\x1b" in text:
        text = ANSI_BYTES_RE.sub(b"", text)
    if text.endswith(b"cluster]"):
        text = REPEATED_BYTES_RE.sub(b"", text)
    return text.rstrip()


def _scan_block(buf: bytes, first_line: int, part: _ConsolePart) -> None:
    """The complete lines of ``buf`` (numbered from ``first_line``): step lines parsed, the
    rest counted."""
    n_lines = buf.count(b"\n") + (0 if buf.endswith(b"\n") else 1)
    part.lines += n_lines
    if b"\x00" in buf:
        part.nul_bytes += buf.count(b"\x00")
        buf = buf.replace(b"\x00", b"")
    done = -1
    line_of = _LineOf(buf, first_line)
    labels: dict[bytes, str] = {}  # a line prefix -> its label in the accounting
    for m in VERL_STEP_FAST_RE.finditer(buf):
        if m.start() < done or (m.start() > 0 and buf[m.start() - 1] in KEY_BYTES):
            continue  # a second match on a line already read, or a key ending in "step"
        start = buf.rfind(b"\n", 0, m.start()) + 1
        end = buf.find(b"\n", m.end())
        end = len(buf) if end < 0 else end
        done = end
        prefix = buf[start : m.start()]
        label = labels.get(prefix)
        if label is None:
            label = labels[prefix] = _prefix_label(prefix)
        part.prefixes[label] += 1
        _console_line(_clean_console(buf[m.start() : end]), part, functools.partial(line_of, start))


def _prefix_label(prefix: bytes) -> str:
    """How a step line's prefix is counted: ``(Actor pid=...)`` for a Ray prefix, ``none``
    or ``other``."""
    if not prefix:
        return "none"
    ray = RAY_PREFIX_BYTES_RE.search(ANSI_BYTES_RE.sub(b"", prefix).strip())
    return f"({ray['actor'].decode('utf-8', 'replace')} pid=...)" if ray else "other"


def _scan_range(path: str, start: int, stop: int) -> _ConsolePart:
    """Read bytes [start, stop) of a console log (both at line starts) in blocks."""
    part = _ConsolePart(_Collector())
    line = 1
    with open(path, "rb") as f:
        f.seek(start)
        left = stop - start
        pending = b""
        while left > 0:
            chunk = f.read(min(BLOCK_BYTES, left))
            if not chunk:
                break
            left -= len(chunk)
            buf = pending + chunk
            cut = buf.rfind(b"\n") + 1
            if cut == 0 and left > 0:
                pending = buf
                continue
            block, pending = (buf, b"") if left <= 0 else (buf[:cut], buf[cut:])
            if block:
                _scan_block(block, line, part)
                line += block.count(b"\n")
        if pending:
            _scan_block(pending, line, part)
    return part


def _split_points(path: str, size: int, parts: int) -> list[int]:
    """Byte offsets that cut a file into ``parts`` ranges at line starts."""
    points = [0]
    with open(path, "rb") as f:
        for i in range(1, parts):
            f.seek(size * i // parts)
            f.readline()
            points.append(max(points[-1], f.tell()))
    points.append(size)
    return points


def _console_parts(path: str, workers: int | None) -> list[_ConsolePart]:
    size = os.path.getsize(path)
    n = workers if workers is not None else (min(2, os.cpu_count() or 1) if size > PARALLEL_BYTES else 1)
    if n <= 1 or size < BLOCK_BYTES:
        return [_scan_range(path, 0, size)]
    from concurrent.futures import ProcessPoolExecutor

    points = _split_points(path, size, n)
    with ProcessPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(_scan_range, path, a, b) for a, b in itertools.pairwise(points)]
        return [f.result() for f in futures]


def _read_verl_console(path: Path, run: str, workers: int | None = None) -> _FileRead:
    if path.suffix == ".zst":  # decompress to a temporary file: the reader works on bytes
        return _read_verl_console_zst(path, run)
    read = _FileRead(str(path), "verl-console")
    parts = _console_parts(str(path), workers)
    collector = _Collector()
    offset = 0
    for part in parts:
        collector.extend(part.collector)
        for line, message in part.problems:
            read.problem(f"{path}:{offset + line}: {message}")
        offset += part.lines
        for name in ("lines", "kept", "malformed", "values", "nul_bytes"):
            read.counts[name] += getattr(part, name)
        read.counts["values_not_numeric"] += part.not_numeric
        for k, v in part.prefixes.items():
            read.notes.setdefault("line_prefixes", Counter())[k] += v
    read.counts["records"] = read.counts.pop("lines")
    read.counts["foreign"] = read.counts["records"] - read.counts["kept"] - read.counts["malformed"]
    if collector.steps:
        read.runs[run] = collector
    if "line_prefixes" in read.notes:
        read.notes["line_prefixes"] = dict(read.notes["line_prefixes"])
    return read


def _read_verl_console_zst(path: Path, run: str) -> _FileRead:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".log") as tmp:
        with streams.open_text(path, newline="") as src:
            while chunk := src.read(BLOCK_BYTES):
                tmp.write(chunk.encode())
            src.read(1)
        tmp.flush()
        read = _read_verl_console(Path(tmp.name), run, workers=1)
    read.path = str(path)
    read.problems = [p.replace(tmp.name, str(path)) for p in read.problems]
    return read


# ------------------------------------------------------------------ JSON lines
def _json_lines(path: Path, read: _FileRead) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``file:line``, object) of every JSON-object line; blank lines foreign, the rest
    malformed with file:line."""
    try:
        for number, raw in streams.iter_lines(path):
            read.counts["records"] += 1
            where = f"{path}:{number}"
            if not raw.strip():
                read.counts["foreign"] += 1
                continue
            if raw is streams.OVERLONG:
                read.counts["malformed"] += 1
                read.problem(f"{where}: line longer than {streams.MAX_LINE_CHARS:,} characters")
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                read.counts["malformed"] += 1
                read.problem(f"{where}: malformed JSON ({str(exc)[:80]})")
                continue
            if not isinstance(record, dict):
                read.counts["malformed"] += 1
                read.problem(f"{where}: expected a JSON object, found {type(record).__name__}")
                continue
            yield where, record
    except (streams.TruncatedStreamError, OSError) as exc:
        read.problem(f"{path}: unreadable ({exc}); the lines before it were read")


def _read_verl_jsonl(path: Path, run: str) -> _FileRead:
    read = _FileRead(str(path), "verl-jsonl")
    for where, record in _json_lines(path, read):
        step, data = _int_step(record.get("step")), record.get("data")
        if step is None or not isinstance(data, dict) or set(record) != {"step", "data"}:
            read.counts["malformed"] += 1
            read.problem(f'{where}: not a verl file-tracker record {{"step": N, "data": {{...}}}}')
            continue
        read.counts["kept"] += 1
        _add_mapping(read, run, step, data, where)
    return read


# ------------------------------------------------------------------ SkyRL
def _read_skyrl_console(path: Path, run: str) -> _FileRead:
    """A SkyRL console log given as a file (:func:`saturation.skyrl.read_console_log`, as in
    a run directory): its tracker blocks, a resumed attempt's later blocks winning; the run
    is the policy model path of its launch overrides, else the file's label. Records are the
    log's lines: a block's lines kept, the rest foreign, each unreadable block a problem."""
    from saturation.skyrl import RUN_KEY, read_console_log

    log = read_console_log(path, strict=False)
    read = _FileRead(str(path), "skyrl-console")
    acc = log.accounting()
    read.counts["records"] += log.lines
    read.counts["kept"] += acc["block_lines"]
    read.counts["foreign"] += log.lines - acc["block_lines"]
    for problem in log.problems:
        read.problem(problem)
    name = log.config.get(RUN_KEY, run)
    for step in sorted(log.steps):
        _add_mapping(read, name, step, log.steps[step], f"{path}: the block of step {step}")
    # the log resolved its own resumes (a later attempt's blocks replace the earlier ones)
    read.notes.update(
        {
            k: acc[k]
            for k in ("blocks", "eval_only_blocks", "resumed_steps", "values_superseded", "conflicting_values")
            if acc[k]
        }
    )
    read.notes["log_restarts"] = acc["restarts"] or None
    return read


# ------------------------------------------------------------------ TRL
def _trl_candidates(root: Path) -> list[Path]:
    found = [root / TRL_STATE] if (root / TRL_STATE).is_file() else []
    for sub in root.iterdir():
        if sub.is_dir() and CHECKPOINT_RE.match(sub.name) and (sub / TRL_STATE).is_file():
            found.append(sub / TRL_STATE)
    return found


def _load_trl_state(path: Path) -> dict[str, Any] | str:
    """The parsed trainer state, or why it cannot be read."""
    try:
        state = json.loads(streams.read_all(path, limit=TRL_STATE_LIMIT))
    except (ValueError, OSError, RecursionError) as exc:
        return f"not a complete JSON file ({str(exc)[:80]})"
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        return "no 'log_history' list (not a trainer_state.json)"
    return state


def _trl_run_name(path: Path) -> str:
    parent = path.parent
    if CHECKPOINT_RE.match(parent.name):
        parent = parent.parent
    return parent.resolve().name or parent.name or path.stem


def _read_trl(path: Path, run: str | None) -> _FileRead:
    """A trainer_state.json, or a directory holding it and/or ``checkpoint-N/`` copies."""
    read = _FileRead(str(path), "trl")
    candidates = _trl_candidates(path) if path.is_dir() else [path]
    if not candidates:
        read.problem(f"{path}: no {TRL_STATE} at the top or in checkpoint-N/ folders")
        return read
    states: list[tuple[int, int, Path, dict[str, Any]]] = []
    for cand in candidates:
        state = _load_trl_state(cand)
        if isinstance(state, str):
            read.problem(f"{cand}: {state}")
            continue
        top = 1 if cand.parent == path else 0
        states.append((_int_step(state.get("global_step")) or 0, top, cand, state))
    if not states:
        return read
    states.sort(key=lambda s: (s[0], s[1]))
    _, _, chosen, state = states[-1]
    read.path = str(chosen)
    read.notes["superseded_files"] = [str(s[2]) for s in states[:-1]]
    name = run or _trl_run_name(chosen)
    for i, entry in enumerate(state["log_history"]):
        read.counts["records"] += 1
        where = f"{chosen}: log_history[{i}]"
        step = _int_step(entry.get("step")) if isinstance(entry, dict) else None
        if step is None or not isinstance(entry, dict):
            read.counts["malformed"] += 1
            read.problem(f"{where}: not a dict with an integer 'step'")
            continue
        read.counts["kept"] += 1
        _add_mapping(read, name, step, {k: v for k, v in entry.items() if k != "step"}, where)
    read.notes["logging_steps"] = state.get("logging_steps")
    return read


# ------------------------------------------------------------------ tables
def _table_frame(path: Path, read: _FileRead) -> tuple[pd.DataFrame, list[str]] | None:
    """The table as strings, and each row's ``file:line``."""
    name = path.name.lower().removesuffix(".zst")
    try:
        if name.endswith((".jsonl", ".ndjson")):
            rows, wheres = [], []
            columns: set[str] = set()
            for where, record in _json_lines(path, read):
                too_many = streams.admit_keys(columns, record)
                if too_many:
                    read.counts["malformed"] += 1
                    read.problem(f"{where}: {too_many}; not kept")
                    continue
                rows.append({k: _cell(v) for k, v in record.items()})
                wheres.append(where)
            frame = pd.DataFrame(rows)
        else:
            width = len(_csv_header(path))
            if streams.too_many_columns(width):  # refused before the rows are parsed
                with streams.open_text(path, newline="") as stream:
                    lines = sum(1 for line in stream if line.strip()) - 1
                _too_wide(path, read, width, lines)
                return None
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
            wheres = [f"{path}:{i + 2}" for i in range(len(frame))]
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        read.problem(f"{path}: unreadable table ({str(exc)[:100]})")
        return None
    if streams.too_many_columns(frame.shape[1]):
        _too_wide(path, read, frame.shape[1], len(frame))
        return None
    if not name.endswith((".jsonl", ".ndjson")):  # JSON lines were counted line by line as read
        read.counts["records"] += len(frame)
    return frame, wheres


def _csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's first non-blank line, read alone (a BOM dropped,
    surrounding spaces kept as pandas keeps them); a malformed header splits at commas."""
    with streams.open_text(path, newline="") as stream:
        line = ""
        while not line.strip():
            line = stream.readline(streams.MAX_LINE_CHARS)
            if not line:
                return []
    line = line.removeprefix("\ufeff").rstrip("\r\n")
    try:
        return next(csv.reader([line], strict=True))
    except (csv.Error, StopIteration):
        return line.split(",")


def _too_wide(path: Path, read: _FileRead, width: int, rows: int) -> None:
    """A table wider than :data:`streams.MAX_COLUMNS`: its rows counted, none read."""
    read.counts["records"] += rows
    read.counts["malformed"] += rows
    read.problem(f"{path}: {streams.too_many_columns(width)}; its {rows:,} rows not read")


def _cell(value: Any) -> str:
    """A JSONL value as the text a CSV cell would hold (numbers by repr, null empty)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return repr(value)
    return value if isinstance(value, str) else json.dumps(value)


def step_column(columns: Iterable[str]) -> str | None:
    """The column of a per-step table that holds the step (:data:`STEP_COLUMNS`), or None."""
    by_lower = {str(c).lower(): str(c) for c in columns}
    return next((by_lower[c] for c in STEP_COLUMNS if c in by_lower), None)


def _numeric_columns(frame: pd.DataFrame, metrics: list[str], wheres: list[str], read: _FileRead) -> pd.DataFrame:
    """Metric columns as numbers: empty cells missing; a non-numeric cell reported (per
    column: how many and the first, with file:line), never coerced."""
    out = {}
    for col in metrics:
        raw = frame[col].astype(str).str.strip()
        num = pd.to_numeric(raw.where(raw != "", None), errors="coerce")
        bad = np.flatnonzero(num.isna().to_numpy() & (raw != "").to_numpy() & ~raw.str.lower().isin(["nan"]).to_numpy())
        if len(bad):
            read.counts["values_not_numeric"] += len(bad)
            hint = " (a run label? name it with --run-column)" if len(bad) == len(raw) else ""
            read.problem(
                f"{wheres[bad[0]]}, field {col!r}: {raw.iloc[bad[0]][:40]!r} is not a number; "
                f"{len(bad)} such value(s) in the column (not kept){hint}"
            )
            num.iloc[bad] = np.nan
        out[col] = num.to_numpy(dtype=float)
    return pd.DataFrame(out, index=frame.index)


def _run_labels(frame: pd.DataFrame, run_column: Sequence[str] | None, default: str) -> pd.Series:
    cols = list(run_column) if run_column else ([S.RUN] if S.RUN in frame.columns else [])
    if not cols:
        return pd.Series(default, index=frame.index)
    if len(cols) == 1:
        return frame[cols[0]].astype(str)
    return frame[cols].astype(str).apply(lambda r: ",".join(f"{c}={v}" for c, v in r.items()), axis=1)


def _read_table(path: Path, run: str, run_column: Sequence[str] | None) -> _FileRead:
    read = _FileRead(str(path), "table")
    got = _table_frame(path, read)
    if got is None:
        return read
    frame, wheres = got
    missing = [c for c in run_column or () if c not in frame.columns]
    if missing:
        read.problem(f"{path}: --run-column {', '.join(missing)}: no such column (have {list(frame.columns)[:20]})")
        read.counts["malformed"] += len(frame)
        return read
    step_col = step_column(frame.columns)
    if step_col is None:
        read.problem(f"{path}: no step column (one of {', '.join(STEP_COLUMNS)}; have {list(frame.columns)[:20]})")
        read.counts["malformed"] += len(frame)
        return read
    runs = _run_labels(frame, run_column, run)
    label_cols = set(run_column or ()) | ({S.RUN} if not run_column and S.RUN in frame.columns else set())
    metrics = [c for c in frame.columns if c != step_col and c not in label_cols]
    steps = pd.to_numeric(frame[step_col].astype(str).str.strip(), errors="coerce")
    bad_step = (steps.isna() | (steps != steps.round())).to_numpy()
    values = _numeric_columns(frame, metrics, wheres, read)
    for i in np.flatnonzero(bad_step):
        read.counts["malformed"] += 1
        read.problem(f"{wheres[i]}, field {step_col!r}: {frame[step_col].iloc[i]!r} is not an integer step")
    keys = tuple(metrics)
    matrix = values.to_numpy(dtype=float)
    for i in np.flatnonzero(~bad_step):
        row = matrix[i]
        present = ~np.isnan(row)
        read.counts["kept"] += 1
        read.counts["values"] += int(present.sum())
        if present.all():
            read.run(str(runs.iloc[i])).add(int(steps.iloc[i]), keys, row.tolist())
        elif present.any():
            read.run(str(runs.iloc[i])).add(
                int(steps.iloc[i]), tuple(k for k, p in zip(keys, present, strict=True) if p), row[present].tolist()
            )
    _check_repeats(read, runs, steps, np.flatnonzero(~bad_step), wheres)
    read.notes["step_column"] = step_col
    return read


def _check_repeats(read: _FileRead, runs: pd.Series, steps: pd.Series, good: np.ndarray, wheres: list[str]) -> None:
    """A table has no resumes: a (run, step) on two rows is a problem (several runs in one
    file, most often), the later row winning when it is let through (lenient)."""
    frame = pd.DataFrame({"run": runs.iloc[good].to_numpy(), "step": steps.iloc[good].to_numpy()})
    dup = frame.duplicated(keep="first").to_numpy()
    if dup.any():
        i = good[np.flatnonzero(dup)[0]]
        read.problem(
            f"{wheres[i]}: step {int(steps.iloc[i])} of run {runs.iloc[i]!r} appears again ({int(dup.sum())} "
            "repeated (run, step) rows): several runs in one file? name the run column(s) with --run-column "
            "(lenient mode keeps the later row's values)"
        )


def _read_wandb_csv(path: Path) -> _FileRead:
    read = _FileRead(str(path), "wandb-csv")
    got = _table_frame(path, read)
    if got is None:
        return read
    frame, wheres = got
    step_col = step_column(frame.columns)
    if step_col is None:
        read.problem(f"{path}: no 'Step' column (have {list(frame.columns)[:20]})")
        read.counts["malformed"] += len(frame)
        return read
    columns: dict[str, list[tuple[str, str]]] = {}
    left_out = []
    for col in frame.columns:
        m = WANDB_COLUMN_RE.match(str(col))
        if col == step_col:
            continue
        if not m:
            read.problem(f"{path}: column {col!r} is not '<run name> - <key>' (not kept)")
            continue
        if m["bound"]:
            left_out.append(col)
            continue
        columns.setdefault(m["run"], []).append((m["key"], col))
    read.notes["columns_left_out"] = left_out
    steps = pd.to_numeric(frame[step_col].astype(str).str.strip(), errors="coerce")
    bad_step = (steps.isna() | (steps != steps.round())).to_numpy()
    for i in np.flatnonzero(bad_step):
        read.problem(f"{wheres[i]}, field {step_col!r}: {frame[step_col].iloc[i]!r} is not an integer step")
    read.counts["malformed"] += int(bad_step.sum())
    read.counts["kept"] += int((~bad_step).sum())
    for run_name, pairs in columns.items():
        values = _numeric_columns(frame, [c for _, c in pairs], wheres, read).to_numpy(dtype=float)
        keys = [k for k, _ in pairs]
        for i in np.flatnonzero(~bad_step):
            present = ~np.isnan(values[i])
            if present.any():
                read.counts["values"] += int(present.sum())
                read.run(run_name).add(
                    int(steps.iloc[i]),
                    tuple(k for k, p in zip(keys, present, strict=True) if p),
                    values[i][present].tolist(),
                )
    return read


# ------------------------------------------------------------------ MLflow
def _is_mlflow_run(here: Path) -> bool:
    """``meta.yaml`` naming a ``run_id`` beside ``metrics/``, ``params/`` or ``tags/`` (a run
    that logged no metric may have no ``metrics/``: an empty directory is not kept by every
    copy; a registered model's ``meta.yaml`` names no run)."""
    meta = here / "meta.yaml"
    return (
        meta.is_file()
        and any((here / d).is_dir() for d in ("metrics", "params", "tags"))
        and _yaml_field(meta, "run_id") is not None
    )


def _mlflow_run_dirs(root: Path) -> list[Path]:
    """Run directories under ``root`` (:func:`_is_mlflow_run`), the trash left out."""
    if _is_mlflow_run(root):
        return [root]
    out = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in (".trash", "metrics", "params", "tags", "artifacts"))
        here = Path(dirpath)
        if _is_mlflow_run(here):
            out.append(here)
            dirnames[:] = []
    return sorted(out)


def _yaml_field(path: Path, name: str) -> str | None:
    """A top-level ``name: value`` of a flat YAML file (MLflow's meta.yaml), or None."""
    try:
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(f"{name}:"):
                value = line.split(":", 1)[1].strip().strip("'\"")
                return value or None
    except OSError:
        return None
    return None


def _mlflow_run_name(run_dir: Path) -> str:
    tag = run_dir / "tags" / "mlflow.runName"
    if tag.is_file():
        name = tag.read_text(errors="replace").strip()
        if name:
            return name
    return _yaml_field(run_dir / "meta.yaml", "run_name") or run_dir.name


def _mlflow_metric(path: Path, key: str, run: str, read: _FileRead) -> None:
    """One metric file: ``timestamp value step`` lines (2, 3 or 5 fields, as MLflow's
    ``FileStore._get_metric_from_line`` accepts; 2 fields: step 0)."""
    collector = read.run(run, per_key=True)
    for number, raw in streams.iter_lines(path):
        read.counts["records"] += 1
        fields = raw.strip().split(" ")
        where = f"{path}:{number}"
        if not raw.strip():
            read.counts["foreign"] += 1
            continue
        try:
            if len(fields) not in (2, 3, 5):
                raise ValueError(f"{len(fields)} fields")
            int(fields[0])
            step = int(fields[2]) if len(fields) >= 3 else 0
        except ValueError as exc:
            read.counts["malformed"] += 1
            read.problem(f"{where}: not 'timestamp value step' ({exc})")
            continue
        try:
            value = float(fields[1])
        except ValueError:
            read.counts["malformed"] += 1
            read.counts["values_not_numeric"] += 1
            read.problem(f"{where}, field {key!r}: {fields[1][:40]!r} is not a number (not kept)")
            continue
        read.counts["kept"] += 1
        read.counts["values"] += 1
        collector.add(step, (key,), (value,))


def _read_mlflow(path: Path) -> _FileRead:
    read = _FileRead(str(path), "mlflow")
    run_dirs = _mlflow_run_dirs(path)
    if not run_dirs:
        read.problem(
            f"{path}: no MLflow run directory (meta.yaml naming a run_id beside metrics/, params/ or tags/) under it"
        )
    names: Counter[str] = Counter(_mlflow_run_name(d) for d in run_dirs)
    deleted: list[str] = []
    empty: list[str] = []
    for run_dir in run_dirs:
        if _yaml_field(run_dir / "meta.yaml", "lifecycle_stage") == "deleted":
            deleted.append(str(run_dir))
            continue
        name = _mlflow_run_name(run_dir)
        if names[name] > 1:  # two runs of one name: the run id tells them apart
            name = f"{name} ({run_dir.name[:8]})"
        metrics = run_dir / "metrics"
        files = sorted(p for p in metrics.rglob("*") if p.is_file()) if metrics.is_dir() else []
        if not files:  # a run killed before it logged, or one that logs no metric
            empty.append(str(run_dir))
        for file in files:
            _mlflow_metric(file, file.relative_to(metrics).as_posix(), name, read)
            read.counts["files"] += 1
    read.notes["deleted_runs_left_out"] = deleted
    read.notes["runs_without_metrics"] = empty
    return read


# ------------------------------------------------------------------ TensorBoard
#: a wandb run directory's name (``run-<date>-<id>``, offline ``offline-run-<date>-<id>``)
WANDB_RUN_DIR_RE = re.compile(r"^(?:offline-)?run-")


def wandb_run_dirs(path: Path) -> list[Path]:
    """The wandb run directories ``path`` is or holds: itself when it holds a ``run-*.wandb``
    history file, else its ``run-*`` / ``offline-run-*`` subdirectories that do (``path`` a
    ``wandb/`` directory). Only a directory named ``wandb``, ``latest-run``, ``run-*`` or
    ``offline-run-*`` is looked into (a SkyRL run directory is not walked)."""
    if not path.is_dir() or not (path.name in ("wandb", "latest-run") or WANDB_RUN_DIR_RE.match(path.name)):
        return []
    if any(path.glob("run-*.wandb")):
        return [path]
    runs = (d for d in path.iterdir() if d.is_dir() and WANDB_RUN_DIR_RE.match(d.name))
    return sorted(d for d in runs if any(d.glob("run-*.wandb")))


def _read_wandb(path: Path) -> _FileRead:
    """A wandb run directory (or a ``wandb/`` directory of runs) through
    :func:`saturation.wandb_history.read_wandb_run`: each run's steps on its step axis
    (``_step``, or the metric it declared with ``define_metric``, e.g. the Hugging Face
    Trainer's ``train/global_step``). Records: the history file's records; kept: the history
    rows placed on a step; malformed: rows that could not be (each a problem); foreign: the
    rest (run, config and metric records, rows of media only)."""
    from saturation.wandb_history import read_wandb_run, require_wandb

    read = _FileRead(str(path), "wandb")
    dirs = wandb_run_dirs(path)
    if not dirs:
        read.problem(f"{path}: no wandb run directory (a run-*.wandb history file) in it")
    require_wandb([str(d) for d in dirs])
    axes: dict[str, str] = {}
    not_read: dict[str, dict[str, str]] = {}
    for d in dirs:
        log = read_wandb_run(d)
        run = d.name
        read.counts["files"] += 1
        read.counts["records"] += log.lines
        read.counts["kept"] += log.blocks
        for problem in log.problems:
            read.problem(problem)
        read.counts["malformed"] += log.rows_without_step
        for name, n in (
            ("conflicting_values", log.conflicts),
            ("rows_before_step_axis", log.rows_before_step_axis),
            # resumed attempts are resolved in the history (wandb_history), before the collector
            ("values_superseded", log.values_superseded),
            ("restarts", log.restarts),
        ):
            read.notes[name] = read.notes.get(name, 0) + n
        collector = read.run(run)
        for step in sorted(log.steps):
            values = log.steps[step]
            collector.add(int(step), tuple(values), list(values.values()))
            read.counts["values"] += len(values)
        axes[run] = log.step_axis or "_step"
        not_read[run] = dict(log.non_numeric)
    read.counts["foreign"] = read.counts["records"] - read.counts["kept"] - read.counts["malformed"]
    read.notes["step_axis"] = axes
    read.notes["keys_not_read"] = not_read
    return read


def require_tensorboard() -> None:
    """Raise ValueError naming the optional extra when the ``tensorboard`` package is missing."""
    try:
        import tensorboard.backend.event_processing.event_file_loader  # noqa: F401
    except ImportError as exc:
        raise ValueError(f"reading TensorBoard event files needs the tensorboard package: {TENSORBOARD_HINT}") from exc


def _tb_files(path: Path) -> dict[str, list[Path]]:
    """Event files by run: a file is its directory's run; under a directory, each directory
    holding event files is one run (named by its path below ``path``, or ``path``'s name)."""
    if path.is_file():
        return {path.parent.resolve().name: [path]}
    out: dict[str, list[Path]] = {}
    for file in sorted(path.rglob("events.out.tfevents.*")):
        if not file.is_file():
            continue
        rel = file.parent.relative_to(path).as_posix()
        out.setdefault(path.resolve().name if rel == "." else rel, []).append(file)
    return out


def _tb_scalar(value: Any, plugins: dict[str, str]) -> float | None:
    """A Summary.Value as a float when it is a scalar (``simple_value``, or a 0-d tensor of the
    scalars plugin), else None."""
    from tensorboard.util import tensor_util

    if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
        plugins[value.tag] = value.metadata.plugin_data.plugin_name
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor" and plugins.get(value.tag) == "scalars":
        arr = tensor_util.make_ndarray(value.tensor)
        if arr.size == 1 and arr.dtype.kind in "fiu":
            return float(arr.reshape(()))
    return None


def _read_tensorboard(path: Path) -> _FileRead:
    require_tensorboard()
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    read = _FileRead(str(path), "tensorboard")
    runs = _tb_files(path)
    if not runs:
        read.problem(f"{path}: no events.out.tfevents.* file")
    other: Counter[str] = Counter()
    for run, files in runs.items():
        for file in files:
            plugins: dict[str, str] = {}
            read.counts["files"] += 1
            for event in EventFileLoader(str(file)).Load():
                read.counts["records"] += 1
                keys, values = [], []
                if event.HasField("summary"):
                    for value in event.summary.value:
                        number = _tb_scalar(value, plugins)
                        if number is None:
                            other[plugins.get(value.tag) or value.WhichOneof("value") or "empty"] += 1
                        else:
                            keys.append(value.tag)
                            values.append(number)
                if keys:
                    read.counts["kept"] += 1
                    read.counts["values"] += len(values)
                    read.run(run, per_key=True).add(int(event.step), tuple(keys), values)
                else:
                    read.counts["foreign"] += 1
                    if not event.HasField("summary"):
                        other[event.WhichOneof("what") or "empty"] += 1
    read.notes["non_scalar_values"] = dict(other)
    return read


# ------------------------------------------------------------------ detection
def _sniff_text(path: Path, limit: int = 1 << 24) -> str:
    """The first ``limit`` characters (NUL bytes dropped); empty when unreadable."""
    try:
        with streams.open_text(path) as f:
            return f.read(limit).replace("\x00", "")
    except (OSError, ValueError):
        return ""


def _detect_dir(path: Path) -> str | None:
    if wandb_run_dirs(path):
        return "wandb"
    if _trl_candidates(path):
        return "trl"
    if any(path.rglob("events.out.tfevents.*")):
        return "tensorboard"
    if _mlflow_run_dirs(path):
        return "mlflow"
    return None


def _has_step_line(head: bytes) -> bool:
    return any(m.start() == 0 or head[m.start() - 1] not in KEY_BYTES for m in VERL_STEP_FAST_RE.finditer(head))


def _per_step_columns(columns: list[str]) -> bool:
    """A step column and no trial identity (a graded-trial table has ``instance_id`` and
    ``reward``: :mod:`saturation.io` reads it)."""
    return step_column(columns) is not None and not {S.INSTANCE_ID, S.REWARD} <= set(columns)


def _detect_text(path: Path) -> str | None:
    head = _sniff_text(path)
    first = next((line for line in head.splitlines() if line.strip()), "")
    name = path.name.lower().removesuffix(".zst")
    if name.endswith(".json"):
        return "trl" if '"log_history"' in head or name == TRL_STATE else None
    if VERL_JSONL_HEAD.match(first):
        return "verl-jsonl"
    if "Step " in head and SKYRL_TRACKER_RE.search(ANSI_RE.sub("", head)):
        return "skyrl-console"
    if name.endswith((".jsonl", ".ndjson")):
        try:
            record = json.loads(first)
        except ValueError:
            return None
        return "table" if isinstance(record, dict) and _per_step_columns(list(record)) else None
    if name.endswith(".csv"):
        columns = _csv_header(path)
        if len(columns) > streams.MAX_COLUMNS:
            return "table"  # refused by the table reader, naming the limit
        step = step_column(columns)
        if step and any(WANDB_COLUMN_RE.match(c) for c in columns if c != step):
            return "wandb-csv"
        return "table" if _per_step_columns(columns) else None
    if _has_step_line(head.encode("utf-8", "replace")):
        return "verl-console"
    return None


def detect_format(path: str | Path) -> str | None:
    """The format of a file or directory (:data:`FORMATS`), from its name and first bytes;
    None when it is none of them (a SkyRL run directory, a trial table, a netCDF file).

    Parameters
    ----------
    path : str or Path
        A file or directory.

    Returns
    -------
    str or None
        One of :data:`FORMATS`, or None.
    """
    path = Path(path)
    if path.is_dir():
        return _detect_dir(path)
    name = path.name
    if not path.is_file():  # a FIFO, a device, a dangling link: never opened (a FIFO would block)
        return None
    if name.startswith("events.out.tfevents."):
        return "tensorboard"
    if name.endswith(".nc"):
        return None
    try:
        return _detect_text(path)
    except (ValueError, OSError, pd.errors.ParserError):
        return None


# ------------------------------------------------------------------ the Dataset
@dataclass
class RunLogs:
    """Per-step metrics read from run logs, with the accounting.

    Attributes
    ----------
    metrics : xarray.Dataset or None
        The per-step metrics (module docstring); None when nothing numeric was read.
    accounting : list of dict
        One per file: ``file``, ``format``, ``runs``, ``records`` (lines, rows, entries or
        events), ``kept``, ``foreign``, ``malformed`` (``records == kept + foreign +
        malformed``), ``values``, ``values_not_numeric``, ``values_null``,
        ``values_superseded`` (replaced by a later value at the same step), ``restarts``
        (times the step went backwards), ``validation_only_steps`` and format notes.
    problems : list of str
        Every problem, naming file[:line] and field.
    """

    metrics: xr.Dataset | None
    accounting: list[dict[str, Any]]
    problems: list[str]


def _is_validation(key: str) -> bool:
    return key.startswith(VALIDATION_PREFIXES)


def _file_accounting(read: _FileRead, resolved: Mapping[str, Any]) -> dict[str, Any]:
    counts = {k: int(read.counts.get(k, 0)) for k in ("records", "kept", "foreign", "malformed")}
    for k in ("values", "values_not_numeric", "values_null", "nul_bytes", "files", "problems"):
        if read.counts.get(k):
            counts[k] = int(read.counts[k])
    return {
        "file": read.path,
        "format": read.format,
        "runs": sorted(read.runs),
        **counts,
        "values_superseded": sum(r["superseded"] for r in resolved.values()),
        "restarts": sum(read.runs[r].restarts for r in read.runs),
        "steps": {r: v["n_steps"] for r, v in resolved.items()},
        "validation_only_steps": {r: v["validation_only"] for r, v in resolved.items() if v["validation_only"]},
        **{k: v for k, v in read.notes.items() if v not in (None, [], {})},
    }


def _steps_of(series: Mapping[str, tuple[np.ndarray, np.ndarray]], keys: Iterable[str]) -> np.ndarray:
    return _union_steps(series[k][0] for k in keys)


def _union_steps(arrays: Iterable[np.ndarray]) -> np.ndarray:
    """The sorted union of ascending step arrays; the keys of one signature share one array
    (:meth:`_Collector.resolve`), so each distinct array enters once."""
    distinct = list({id(a): a for a in arrays}.values())
    if len(distinct) == 1:
        return distinct[0]
    return np.unique(np.concatenate(distinct)) if distinct else np.zeros(0, np.int64)


def _validation_only(series: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> list[int]:
    """Steps at which every key logged is a validation key."""
    val = _steps_of(series, [k for k in series if _is_validation(k)])
    train = _steps_of(series, [k for k in series if not _is_validation(k)])
    return np.setdiff1d(val, train).tolist()


def _build(reads: Sequence[_FileRead]) -> tuple[xr.Dataset | None, list[dict[str, Any]]]:
    runs: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    accounting = []
    clash: list[str] = []
    for read in reads:
        resolved = {}
        for run, collector in read.runs.items():
            series, superseded = collector.resolve()
            if run in runs:
                clash.append(f"{read.path}: run {run!r} was read from another file too; give it a label")
            runs[run] = series
            resolved[run] = {
                "superseded": superseded,
                "n_steps": len(_steps_of(series, series)),
                "validation_only": _validation_only(series),
            }
        accounting.append(_file_accounting(read, resolved))
    if clash:
        raise RunLogError(clash)
    if not any(runs.values()):
        return None, accounting
    return _dataset(runs, accounting), accounting


def _dataset(runs: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray]]], accounting: list[dict]) -> xr.Dataset:
    keys = list(dict.fromkeys(k for series in runs.values() for k in series))
    steps = _union_steps(s for series in runs.values() for s, _ in series.values())
    run_names = list(runs)
    names = metric_variable_names(keys)
    data = {}
    for key in keys:
        arr = np.full((len(run_names), len(steps)), np.nan)
        for i, run in enumerate(run_names):
            if key in runs[run]:
                s, v = runs[run][key]
                arr[i, np.searchsorted(steps, s)] = v
        data[names[key]] = ((S.RUN, S.STEP), arr)
    ds = xr.Dataset(data, coords={S.RUN: np.array(run_names, dtype=object).astype(str), S.STEP: steps.astype(np.int64)})
    label_metrics(ds, names)
    for key in keys:
        ds.variables[names[key]].attrs["phase"] = "validation" if _is_validation(key) else "train"
    ds.attrs[S.ATTR_SOURCES] = json.dumps([a["file"] for a in accounting])
    ds.attrs["accounting"] = json.dumps(accounting, default=str)
    val_only = {r: s for a in accounting for r, s in a["validation_only_steps"].items()}
    ds.attrs["validation_only_steps"] = json.dumps(val_only)
    return ds


def _run_label(path: Path, taken: set[str]) -> str:
    """A file's run label: its stem (``.zst`` and the last suffix off), with its parent
    directory's name before it when another input has the same stem."""
    name = path.name.removesuffix(".zst")
    stem = Path(name).stem if path.is_file() else path.resolve().name
    return f"{path.resolve().parent.name}/{stem}" if stem in taken else stem


def _read_one(path: Path, fmt: str, run: str, run_column: Sequence[str] | None, workers: int | None) -> _FileRead:
    if fmt == "verl-console":
        return _read_verl_console(path, run, workers)
    if fmt == "skyrl-console":
        return _read_skyrl_console(path, run)
    if fmt == "verl-jsonl":
        return _read_verl_jsonl(path, run)
    if fmt == "trl":
        return _read_trl(path, None)
    if fmt == "table":
        return _read_table(path, run, run_column)
    if fmt == "wandb-csv":
        return _read_wandb_csv(path)
    if fmt == "mlflow":
        return _read_mlflow(path)
    if fmt == "wandb":
        return _read_wandb(path)
    return _read_tensorboard(path)


def read_runlogs(
    paths: Sequence[str | Path],
    *,
    format: str | None = None,
    run_column: Sequence[str] | None = None,
    strict: bool = True,
    workers: int | None = None,
) -> RunLogs:
    """Read per-step metrics from run logs of any supported framework (module docstring).

    Parameters
    ----------
    paths : sequence of str or Path
        Files or directories; each is one or more runs.
    format : str, optional
        One of :data:`FORMATS` for every path (default: detected per path, :func:`detect_format`).
    run_column : sequence of str, optional
        Per-step tables: the column(s) whose values name the run of each row (several runs in
        one file); several columns make labels ``col=value,col=value``.
    strict : bool, default True
        Raise :class:`RunLogError` listing every problem after reading everything; ``False``:
        keep what could be read and return the problems.
    workers : int, optional
        Processes reading one verl console log (default: 2 for a log over 256 MB, else 1).

    Returns
    -------
    RunLogs
        The metrics Dataset, the accounting per file and the problems.

    Raises
    ------
    RunLogError
        ``strict`` and a problem, or an undetectable path, or two inputs with one run name.
    ValueError
        An unknown ``format``, or TensorBoard files without the ``tensorboard`` package.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    reads: list[_FileRead] = []
    undetected = []
    taken: set[str] = set()
    for raw in paths:
        path = Path(raw)
        fmt = format or detect_format(path)
        if fmt is None:
            undetected.append(f"{path}: not a run log this reader knows ({', '.join(FORMATS)}); name one with --format")
            continue
        run = _run_label(path, taken)
        taken.add(run)
        reads.append(_read_one(path, fmt, run, run_column, workers))
    problems = undetected + [p for r in reads for p in r.problems]
    metrics, accounting = _build(reads)
    if strict and problems:
        raise RunLogError(problems)
    if metrics is not None:
        metrics.attrs["problems"] = json.dumps(problems)
    return RunLogs(metrics, accounting, problems)


def summary_lines(logs: RunLogs) -> list[str]:
    """What ``saturation ingest`` prints about run logs: one line per file (its format, the
    accounting identity, runs and steps, resumes) and one per run of validation-only steps.

    Parameters
    ----------
    logs : RunLogs
        What :func:`read_runlogs` returned.

    Returns
    -------
    list of str
        The lines.
    """
    out = []
    for a in logs.accounting:
        steps = ", ".join(f"{r} {n} steps" for r, n in a["steps"].items()) or "no values"
        line = (
            f"{a['file']} ({a['format']}): {a['records']} records: kept {a['kept']}, foreign {a['foreign']}, "
            f"malformed {a['malformed']}; {a.get('values', 0)} values ({steps})"
        )
        if a.get("values_not_numeric"):
            line += f"; {a['values_not_numeric']} not numeric (not kept)"
        if a.get("values_null"):
            line += f"; {a['values_null']} null (missing)"
        if a["values_superseded"] or a["restarts"]:
            line += f"; {a['values_superseded']} values logged again at a step already logged, the later kept"
            if a["restarts"]:
                line += f" (the step went back {a['restarts']} time(s): a resumed run)"
        if a.get("conflicting_values"):
            line += f"; {a['conflicting_values']} values logged again in one step, the first kept"
        if a.get("runs_without_metrics"):
            line += f"; {len(a['runs_without_metrics'])} run(s) without any metric file (not read)"
        if a.get("columns_left_out"):
            line += f"; {len(a['columns_left_out'])} __MIN/__MAX columns left out"
        if a.get("superseded_files"):
            line += f"; older trainer states not read: {len(a['superseded_files'])}"
        out.append(line)
        for run, steps_val in a["validation_only_steps"].items():
            shown = ", ".join(map(str, steps_val[:10])) + (" ..." if len(steps_val) > 10 else "")
            out.append(f"  run {run}: validation-only steps (their own phase: validation keys only) {shown}")
    return out


def read_metrics(path: str | Path, *, format: str | None = None, run_column: Sequence[str] | None = None) -> xr.Dataset:
    """Any per-step metrics file as a (run, step) Dataset: the netCDF of ``saturation ingest
    --metrics-out``, a metrics CSV, or a run log of any format of :data:`FORMATS`.

    The one loader behind ``--metrics`` and ``--metric``: strict (a problem raises).

    Parameters
    ----------
    path : str or Path
        The file or directory.
    format : str, optional
        Force a format (default: detected).
    run_column : sequence of str, optional
        Per-step tables: the column(s) naming each row's run.

    Returns
    -------
    xarray.Dataset
        The per-step metrics.

    Raises
    ------
    ValueError
        The file is not per-step metrics, or holds a problem (listed with file:line).
    """
    path = Path(path)
    if format is None and path.is_file() and path.suffix == ".nc":
        return read_series_file(path)
    res = read_runlogs([path], format=format, run_column=run_column, strict=True)
    if res.metrics is None:
        raise ValueError(f"{path}: no numeric per-step metrics found")
    return res.metrics


__all__ = [
    "FORMATS",
    "RunLogError",
    "RunLogs",
    "detect_format",
    "read_metrics",
    "read_runlogs",
    "require_tensorboard",
    "step_column",
    "summary_lines",
]
