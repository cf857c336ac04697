"""Read and write graded-trial tables and trial Datasets.

Formats: ``.csv``, ``.parquet``, ``.jsonl``/``.ndjson``, each optionally compressed
with zstandard (an added ``.zst`` suffix). Directories are searched recursively for
those files; several paths are read and concatenated. See ``docs/input-format.md``.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import xarray as xr
import zstandard

from saturation import __version__, streams
from saturation import schema as S
from saturation._lazy import xarray_without_dask
from saturation.files import (
    check_netcdf,
    not_regular,
    write_atomic,
    write_netcdf,
)
from saturation.validate import Locations, Problem, RawTable, TrialValidationError, Validated, validate_trials

xarray_without_dask()  # trial Datasets are built here: no dask import for them

PathArg = str | PathLike[str]
TEXT_FORMATS = ("csv", "jsonl", "ndjson")
FORMATS = (*TEXT_FORMATS, "parquet")
SUFFIXES = tuple(f".{f}" for f in FORMATS) + tuple(f".{f}.zst" for f in FORMATS)


def table_format(path: PathArg) -> tuple[str, bool]:
    """Return ``(format, zstd_compressed)`` from a file name, or raise ValueError."""
    name = Path(path).name.lower()
    compressed = name.endswith(".zst")
    if compressed:
        name = name[: -len(".zst")]
    for fmt in FORMATS:
        if name.endswith("." + fmt):
            return ("jsonl" if fmt == "ndjson" else fmt), compressed
    raise ValueError(f"{path}: unsupported file type; expected one of {', '.join(SUFFIXES)}")


def expand_paths(paths: PathArg | Iterable[PathArg], *, skipped: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Expand files and directories (recursively) into a sorted list of table files.

    A table file in a directory that is not a regular file (:func:`not_regular`: a dangling
    symbolic link, a FIFO, a device) is never opened: it is appended to ``skipped`` as
    ``(path, reason)`` so the caller can account for it. A path given directly that is not
    a regular file is a ``ValueError`` naming it.
    """
    if isinstance(paths, str | PathLike):
        paths = [paths]
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            named = sorted(f for f in p.rglob("*") if f.name.lower().endswith(SUFFIXES) and not f.is_dir())
            found = [f for f in named if not not_regular(f)]
            passed = [(f, not_regular(f)) for f in named if not_regular(f)]
            if skipped is not None:
                skipped.extend(passed)
            if not found:
                why = "; ".join(f"{f}: {r}" for f, r in passed[:3])
                extra = f" that can be read ({why})" if why else ""
                raise FileNotFoundError(f"{p}: directory holds no {'/'.join(SUFFIXES)} files{extra}")
            out.extend(found)
        elif p.exists() or p.is_symlink():
            reason = not_regular(p)
            if reason:
                raise ValueError(f"{p}: {reason}")
            table_format(p)
            out.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    return out


def decompress(data: bytes, limit: int | None = None) -> bytes:
    """Decompress every zstd frame; raise ValueError on a corrupt or truncated stream, or
    when the output exceeds ``limit`` bytes (checked as it grows, so a bomb stops early).

    Parameters
    ----------
    data : bytes
        One or more concatenated zstd frames (empty input gives empty output).
    limit : int or None, default None
        Largest decompressed size accepted, in bytes; ``None`` means
        :data:`saturation.streams.MAX_FILE_BYTES` (64 GiB unless the environment variable
        ``SATURATION_MAX_FILE_BYTES`` sets it).

    Returns
    -------
    bytes
        The decompressed frames, concatenated.

    Raises
    ------
    ValueError
        On a corrupt or truncated stream; :class:`saturation.streams.TooLargeError` (a
        ValueError) when the output would exceed ``limit``.
    """
    limit = streams.MAX_FILE_BYTES if limit is None else limit
    chunks: list[bytes] = []
    total = 0
    while data:
        dobj = zstandard.ZstdDecompressor().decompressobj()
        pos = 0
        while pos < len(data) and not dobj.eof:
            try:
                out = dobj.decompress(data[pos : pos + (1 << 16)])
            except zstandard.ZstdError as exc:
                raise ValueError(f"corrupt zstd stream ({exc})") from exc
            pos += 1 << 16
            total += len(out)
            if total > limit:
                raise streams.TooLargeError(
                    f"decompresses to more than {limit:,} bytes (the limit; raise it with SATURATION_MAX_FILE_BYTES)"
                )
            chunks.append(out)
        if not dobj.eof:
            raise ValueError("truncated zstd stream (the frame ends before its end marker)")
        data = dobj.unused_data
    return b"".join(chunks)


def _iter_raw(path: Path) -> Iterator[RawTable]:
    """One file as RawTables (values untyped, one locator per row): a CSV file in blocks of
    lines (:func:`_csv_tables`), any other file whole."""
    source = str(path)
    fmt, compressed = table_format(path)
    if fmt == "csv":
        yield from _csv_tables(path)
        return
    if fmt == "parquet":
        data = path.read_bytes()
        if compressed:
            try:
                data = decompress(data)
            except ValueError as exc:
                yield RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", str(exc))])
                return
        if not data.strip():
            yield RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", "empty file")])
            return
        yield from _read_parquet(source, data)
        return
    table = RawTable(source, pd.DataFrame(), [])
    reader = _JsonRows(table)
    with _stream_problems(table):
        for number, line in streams.iter_lines(path):
            if len(reader.records) + len(table.unparsable) >= MAX_ROWS and line.strip():
                table.problems.append(_too_many_rows(source, number))
                break
            if line is streams.OVERLONG:
                _reject_overlong(table, number)
            else:
                reader.add(number, line)
    reader.finish()
    yield table


def _too_many_rows(source: str, line: int) -> Problem:
    """A text table past :data:`MAX_ROWS` rows: reading stops at ``line`` (a small compressed
    file can hold hundreds of millions of rows)."""
    return Problem(
        source,
        "",
        "",
        f"more than {MAX_ROWS:,} rows, the limit (raise it with SATURATION_MAX_ROWS): reading stopped at "
        f"line {line:,}; the rows before it were read",
    )


@contextlib.contextmanager
def _stream_problems(table: RawTable) -> Iterator[None]:
    """A damaged stream (truncated, too large) or an unreadable file while reading ``table``
    becomes one file-level problem of it; the rows read before it are kept."""
    try:
        yield
    except (streams.TruncatedStreamError, streams.TooLargeError) as exc:
        table.problems.append(Problem(table.source, "", "", f"{exc}; the rows before it were read"))
    except OSError as exc:
        table.problems.append(Problem(table.source, "", "", f"unreadable ({exc})"))


def _csv_tables(path: Path) -> Iterator[RawTable]:
    """A CSV file as RawTables, one per block of lines (:func:`streams.iter_line_blocks`),
    so memory is bounded by a block.

    The header is read line by line (:class:`_CsvRows`). When it names every required
    column once, each later block goes to :class:`_CsvBlock` (plain lines parsed by pyarrow
    in one call, the others line by line exactly as :class:`_CsvRows` reads them; rows
    keep their line numbers and file order). Any other header is read line by line
    throughout, as a single table."""
    source = str(path)
    head = RawTable(source, pd.DataFrame(), [])
    rows = _CsvRows(head)
    fast: _CsvBlock | None = None
    tail = RawTable(source, pd.DataFrame(), [])
    n_rows = 0
    with _stream_problems(tail):
        for first, text in streams.iter_line_blocks(path):
            if n_rows + len(rows.rows) + len(head.unparsable) > MAX_ROWS:
                tail.problems.append(_too_many_rows(source, first))
                break
            if fast is not None:
                block = fast.table(first, text)
                n_rows += len(block.frame) + len(block.unparsable)
                yield block
                continue
            if text is streams.OVERLONG:  # an overlong line is a block of its own
                _reject_overlong(head, first)
                continue
            pos, number = 0, first
            while pos < len(text):  # line by line until the header is known, then the rest in one block
                end = text.find("\n", pos)
                end = len(text) if end < 0 else end
                had_header = rows.header is not None
                rows.add(number, text[pos:end].removesuffix("\r"))
                pos, number = end + 1, number + 1
                if had_header or rows.header is None:
                    continue
                fast = None if rows.too_wide else _CsvBlock.for_header(source, rows.header)
                if fast is not None:
                    if pos < len(text):
                        block = fast.table(number, text[pos:])
                        n_rows += len(block.frame) + len(block.unparsable)
                        yield block
                    break
    if fast is None:  # read line by line: one table, checked as a whole
        head.problems.extend(tail.problems)
        rows.finish()
        yield head
        return
    if not n_rows and not head.unparsable and not head.problems and not tail.problems:
        tail.problems.append(Problem(source, "", "", "empty file (header only, no rows)"))
    yield head
    yield tail


def _reject_overlong(table: RawTable, number: int) -> None:
    """Line ``number`` was too long to keep (:data:`streams.OVERLONG`): one unparsable row."""
    table.reject_line(
        f"line {number}",
        f"line longer than {streams.MAX_LINE_CHARS:,} characters (raise SATURATION_MAX_LINE_CHARS)",
        "<overlong line>",
    )


def _csv_fields(table: RawTable, loc: str, line: str, n_fields: int | None) -> list[str] | None:
    """The fields of one CSV line (one physical line is one record; ``n_fields`` None: the
    header), or None when the line is rejected in ``table`` (malformed, or not ``n_fields``
    fields); a malformed header is a problem and no fields."""
    try:
        row = next(csv.reader([line], strict=True))
    except csv.Error as exc:
        if n_fields is None:
            table.problems.append(Problem(table.source, loc, "", f"malformed CSV header ({exc})"))
            return []
        table.reject_line(loc, f"malformed CSV ({exc})", line)
        return None
    if n_fields is not None and len(row) != n_fields:
        table.reject_line(loc, f"expected {n_fields} fields, found {len(row)}", line)
        return None
    return row


class _CsvBlock:
    """The rows of one block of a CSV file whose header is complete.

    A line is *plain* when it has no quote, no NUL, no carriage return but a final one,
    exactly the header's number of commas, no more bytes than Python's CSV field limit and
    no byte-order mark at its start: such lines split into fields the same way in
    Python's ``csv`` and in pyarrow, so they are parsed by pyarrow in one call (as text:
    the validator types the values). Blank lines are skipped; every other line is read by
    :func:`_csv_fields`, as the line-by-line reader reads it."""

    def __init__(self, source: str, header: list[str]) -> None:
        self.source, self.header = source, header

    @classmethod
    def for_header(cls, source: str, header: list[str]) -> _CsvBlock | None:
        """The block reader for this header, or None when the file must be read line by
        line (no header, a required column missing, a name repeated)."""
        if len(set(header)) != len(header) or not set(S.REQUIRED_COLUMNS) <= set(header):
            return None
        return cls(source, header)

    def table(self, first: int, text: str) -> RawTable:
        """One block (whole lines, the first numbered ``first``) as a RawTable."""
        table = RawTable(self.source, pd.DataFrame(columns=self.header, dtype=object), [])
        if text is streams.OVERLONG:
            _reject_overlong(table, first)
            return table
        data = text.encode("utf-8")
        b = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(b == 10)
        if not data.endswith(b"\n"):
            ends = np.append(ends, len(b))
        starts = np.concatenate(([0], ends[:-1] + 1))
        stop = ends - ((ends > starts) & (b[np.maximum(ends - 1, 0)] == 13))

        def count(mask: np.ndarray) -> np.ndarray:  # per line, the bytes in [start, stop) marked
            at = np.flatnonzero(mask)
            return np.searchsorted(at, stop) - np.searchsorted(at, starts)

        blank = stop == starts
        plain = ~blank & (count(b == 44) == len(self.header) - 1)  # commas
        plain &= count((b == 34) | (b == 13) | (b == 0)) == 0  # a quote, a carriage return inside, NUL
        plain &= stop - starts <= csv.field_size_limit()  # a longer field is Python csv's error
        head3 = b[np.minimum(starts[:, None] + np.arange(3), max(len(b) - 1, 0))] if len(b) else np.zeros((0, 3))
        plain &= ~(head3 == np.frombuffer(b"\xef\xbb\xbf", dtype=np.uint8)).all(axis=1)  # pyarrow drops a BOM
        parsed = self._parse_plain(b, starts, ends, plain)
        if parsed is None:
            plain[:] = False
        rows, numbers = [], []
        for i in np.flatnonzero(~plain & ~blank).tolist():
            line = data[starts[i] : stop[i]].decode("utf-8")
            fields = _csv_fields(table, f"line {first + i}", line, len(self.header)) if line.strip() else None
            if fields is not None:
                rows.append(fields)
                numbers.append(first + i)
        parts = [parsed] if parsed is not None else []
        order = np.flatnonzero(plain) + first
        if rows:
            parts.append(pa.table({h: pa.array([r[j] for r in rows], pa.string()) for j, h in enumerate(self.header)}))
            order = np.concatenate([order, np.asarray(numbers, dtype=np.int64)])
        if not parts:
            return table
        combined = pa.concat_tables(parts)
        if rows:
            sort = np.argsort(order, kind="stable")
            combined, order = combined.take(pa.array(sort)), order[sort]
        table.frame = combined.to_pandas()
        table.locations = Locations("line", order)
        return table

    def _parse_plain(self, b: np.ndarray, starts: np.ndarray, ends: np.ndarray, plain: np.ndarray) -> Any:
        """The plain lines as a pyarrow table of text columns; None when there are none, or
        if pyarrow's rows do not match the lines (then every line is read as before)."""
        from pyarrow import csv as pacsv

        n = int(plain.sum())
        if not n:
            return None
        sub = b.tobytes() if n == len(plain) else b[np.repeat(plain, ends - starts + 1)[: len(b)]].tobytes()
        names = [f"c{j}" for j in range(len(self.header))]
        try:
            parsed = pacsv.read_csv(
                io.BytesIO(sub),
                read_options=pacsv.ReadOptions(column_names=names),
                parse_options=pacsv.ParseOptions(
                    quote_char=False, double_quote=False, escape_char=False, newlines_in_values=False
                ),
                convert_options=pacsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False, check_utf8=False
                ),
            )
        except pa.ArrowInvalid:  # pragma: no cover - plain lines always parse
            return None
        if parsed.num_rows != n:  # pragma: no cover - a plain line is one row
            return None
        return parsed.rename_columns(self.header)


class _CsvRows:
    """CSV records, one per physical line (a field spanning lines is not a trial-table
    value): a malformed line is one unparsable row with its own line number, and reading
    goes on."""

    def __init__(self, table: RawTable) -> None:
        self.table = table
        self.header: list[str] | None = None
        self.rows: list[list[str]] = []
        self.locations: list[str] = []
        #: the header has more than streams.MAX_COLUMNS columns: later lines are rejected unread
        self.too_wide = False

    def add(self, number: int, line: str) -> None:
        if self.header is None:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            return  # blank line: not a row
        loc = f"line {number}"
        if self.too_wide:
            self.table.unparsable.append((loc, line[:200]))
            return
        row = _csv_fields(self.table, loc, line, None if self.header is None else len(self.header))
        if row is None:
            return
        if self.header is None:
            self.header = [h.strip() for h in row]
            wide = streams.too_many_columns(len(row))
            if wide:  # refused before any row is parsed
                self.too_wide = True
                self.table.problems.append(Problem(self.table.source, loc, "", f"{wide}; every row rejected unread"))
            return
        self.rows.append(row)
        self.locations.append(loc)

    def finish(self) -> None:
        t = self.table
        if not self.header or not any(self.header):
            if not t.problems:
                t.problems.append(Problem(t.source, "", "", "empty file (no header)"))
            return
        if not self.rows and not t.unparsable and not t.problems:
            t.problems.append(Problem(t.source, "", "", "empty file (header only, no rows)"))
        columns = _unique_columns(self.header) if not self.too_wide else []
        t.frame = (
            pd.DataFrame(self.rows, columns=columns, dtype=object)
            if self.rows
            else pd.DataFrame(columns=columns, dtype=object)
        )
        t.locations = self.locations
        dupes = sorted(h for h, count in Counter(self.header).items() if count > 1)
        if dupes:
            t.problems.append(Problem(t.source, "line 1", "", f"duplicate column name(s) {dupes}"))
            t.duplicate_columns = dupes


def _unique_columns(header: list[str]) -> list[str]:
    """The header with repeated names made distinct (``name``, ``name#2``, ...) so that a
    frame can hold them; the duplicates themselves are a reported problem."""
    seen: dict[str, int] = {}
    out = []
    for h in header:
        seen[h] = seen.get(h, 0) + 1
        out.append(h if seen[h] == 1 else f"{h}#{seen[h]}")
    return out


class _JsonRows:
    """JSON Lines records; a malformed line is one unparsable row, and reading goes on."""

    def __init__(self, table: RawTable) -> None:
        self.table = table
        self.records: list[dict[str, object]] = []
        self.locations: list[str] = []
        self.columns: set[str] = set()  # the keys seen, bounded by streams.MAX_COLUMNS

    def add(self, number: int, line: str) -> None:
        t = self.table
        line = line.strip()
        if not line:
            return
        loc = f"line {number}"
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5,000-digit integer, deep nesting
            t.reject_line(loc, f"malformed JSON ({str(exc)[:120]})", line)
            return
        if not isinstance(obj, dict):
            t.reject_line(loc, f"expected a JSON object, found {type(obj).__name__}", line)
            return
        too_many = streams.admit_keys(self.columns, obj)
        if too_many:
            t.reject_line(loc, too_many, line)
            return
        self.records.append(obj)
        self.locations.append(loc)

    def finish(self) -> None:
        t = self.table
        t.frame = pd.DataFrame.from_records(self.records).astype(object) if self.records else pd.DataFrame(dtype=object)
        t.frame.columns = [str(c) for c in t.frame.columns]
        t.locations = self.locations
        if not self.records and not t.unparsable and not t.problems:
            t.problems.append(Problem(t.source, "", "", "empty file"))


#: rows per batch of the parquet reader (memory is bounded by a batch and the typed rows)
PARQUET_BATCH_ROWS = 1 << 18
#: trials (rows) one input file may hold: a parquet file's row count and a trial Dataset's
#: ``trial`` dimension are read from the header and checked before any row is (the typed
#: rows take about 240 bytes each: 5 million is about 1.2 GB and 9 s); 5 million unless
#: ``SATURATION_MAX_ROWS`` sets it
MAX_ROWS = streams.env_int("SATURATION_MAX_ROWS", 5_000_000)


def _read_parquet(source: str, data: bytes) -> Iterator[RawTable]:
    """A parquet file as RawTables of :data:`PARQUET_BATCH_ROWS` rows; numbers, booleans and
    text stay typed, anything else is read as Python objects."""
    import pyarrow.parquet as pq

    n_rows = 0
    try:
        file = pq.ParquetFile(io.BytesIO(data))
        if file.metadata.num_rows > MAX_ROWS:  # from the footer, before a row is decoded
            message = (
                f"{file.metadata.num_rows:,} rows, more than the limit of {MAX_ROWS:,} (raise it with "
                "SATURATION_MAX_ROWS); not read"
            )
            yield RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", message)])
            return
        batches = file.iter_batches(batch_size=PARQUET_BATCH_ROWS)
        for batch in batches:
            frame = pa.Table.from_batches([batch]).to_pandas()
            for col in frame.columns:
                dtype = frame[col].dtype
                typed = (
                    pd.api.types.is_numeric_dtype(dtype)
                    or pd.api.types.is_bool_dtype(dtype)
                    or pd.api.types.is_string_dtype(dtype)
                )
                if isinstance(dtype, pd.CategoricalDtype) or not typed:
                    frame[col] = frame[col].astype(object)
            yield RawTable(source, frame, Locations("row", np.arange(n_rows + 1, n_rows + len(frame) + 1)))
            n_rows += len(frame)
    except Exception as exc:  # pyarrow raises several types for a broken file
        after = f"; the {n_rows:,} rows before it were read" if n_rows else ""
        yield RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", f"unreadable parquet ({exc}){after}")])
        return
    if not n_rows:
        yield RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", "empty file (no rows)")])


# --------------------------------------------------------------------- Dataset
def _build_dataset(valid: Validated, sources: Sequence[str]) -> xr.Dataset:
    ds = dataset_from_frame(
        valid.frame,
        levels=valid.levels,
        extra=valid.extra_columns,
        accounting=valid.accounting,
        sources=sources,
    )
    # problems that concern a whole file (unreadable, missing column) stay visible
    ds.attrs["file_problems"] = json.dumps([str(p) for p in valid.problems if not p.location])
    ds.attrs["renamed_columns"] = json.dumps(valid.renamed)
    return ds


def dataset_from_frame(
    frame: pd.DataFrame,
    *,
    levels: Sequence[str],
    extra: Sequence[str] = (),
    accounting: dict[str, int] | None = None,
    sources: Sequence[str] = (),
) -> xr.Dataset:
    """Build a trial Dataset from a typed frame (validated rows or simulator output)."""
    n = len(frame)
    if accounting is None:
        ungraded = int((~frame[S.GRADED].to_numpy(dtype=bool)).sum())
        accounting = {"read": n, "kept": n, "ungraded": ungraded, "rejected": 0}
    coords: dict[str, Any] = {}
    for col in S.TRIAL_COORDS:
        if col in frame.columns:
            values = frame[col]
            coords[col] = _variable(values.to_numpy(np.int64)) if col in (S.STEP, S.SAMPLE) else _shared_strings(values)
    data_vars: dict[str, Any] = {
        S.GRADED: _variable(frame[S.GRADED].to_numpy(dtype=bool)),
        S.REWARD: _variable(frame[S.REWARD].to_numpy(dtype=float)),
    }
    levels = list(levels)
    if levels:
        for fld in S.LEVEL_FIELDS:
            arr = np.full((n, len(levels)), np.nan)
            for j, level in enumerate(levels):
                col = f"{level}_{fld}"
                if col in frame.columns:
                    arr[:, j] = frame[col].to_numpy(dtype=float)
            data_vars[fld] = _variable(arr, (S.TRIAL, S.LEVEL))
    for col in extra:
        numeric = pd.api.types.is_numeric_dtype(frame[col].dtype)
        data_vars[col] = _variable(frame[col].to_numpy()) if numeric else _shared_strings(frame[col])
    ds = xr.Dataset(data_vars, coords={**coords, S.LEVEL: np.asarray(levels, dtype=object)})
    ds.attrs.update(
        {
            S.ATTR_SOURCES: json.dumps([str(s) for s in sources]),
            S.ATTR_ROWS_READ: accounting["read"],
            S.ATTR_ROWS_KEPT: accounting["kept"],
            S.ATTR_ROWS_UNGRADED: accounting["ungraded"],
            S.ATTR_ROWS_REJECTED: accounting["rejected"],
            S.ATTR_VERSION: __version__,
        }
    )
    _describe_vars(ds)
    return ds


def _variable(values: np.ndarray, dims: tuple[str, ...] = (S.TRIAL,)) -> xr.Variable:
    """A trial Variable of a plain numpy array, built on xarray's fast path: the array needs
    none of xarray's conversions, whose checks import dask.array (0.75 s) and, for object
    arrays, look at every cell for dates."""
    return xr.Variable(dims, np.asarray(values), fastpath=True)


def _shared_strings(values: pd.Series) -> xr.Variable:
    """A text column as a trial Variable of Python strings in which equal values are one
    object (a million rows of one run name are a million pointers to one string)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return _variable(np.asarray(uniques.to_numpy(dtype=object), dtype=object)[codes])


def _describe_vars(ds: xr.Dataset) -> None:
    ds[S.GRADED].attrs["description"] = "rollout was graded (false: crashed/unparsable, reward 0)"
    ds[S.REWARD].attrs["description"] = "logged reward (0 for ungraded rollouts)"
    for fld in S.LEVEL_FIELDS:
        if fld in ds:
            ds[fld].attrs["description"] = f"per-level {fld}; NaN when missing or ungraded"


def read_trials(
    paths: PathArg | Iterable[PathArg],
    *,
    strict: bool = True,
    rejects: PathArg | None = None,
) -> xr.Dataset:
    """Read graded-trial tables into a trial Dataset.

    Parameters
    ----------
    paths : path or iterable of paths
        Files (``.csv``, ``.parquet``, ``.jsonl``/``.ndjson``, optionally ``.zst``) or
        directories (searched recursively). All are read and concatenated.
    strict : bool, default True
        Raise :class:`~saturation.validate.TrialValidationError` listing every problem
        (file, row/line, column). With ``strict=False`` rows with problems are rejected,
        counted in ``attrs['rows_rejected']`` and, if ``rejects`` is given, written there
        with their reasons.
    rejects : path, optional
        CSV side file for rejected rows (lenient mode); written even when empty.

    Returns
    -------
    xarray.Dataset
        Dims ``trial`` and ``level``; trial coords run, step, instance_id, sample (and
        arm, phase, dataset when present); variables graded, reward and per level f1,
        precision, recall, n_pred, n_gold, n_tp (NaN when missing); extra columns as
        trial variables. ``attrs`` hold the sources and the row accounting
        (rows_read == rows_kept + rows_rejected).
    """
    return read_trials_report(paths, strict=strict, rejects=rejects)[0]


def read_trials_report(
    paths: PathArg | Iterable[PathArg],
    *,
    strict: bool = True,
    rejects: PathArg | None = None,
) -> tuple[xr.Dataset, Validated]:
    """Like :func:`read_trials` but also return the validation result (problems, rejects).

    Parameters
    ----------
    paths : path or iterable of paths
        Files (``.csv``, ``.parquet``, ``.jsonl``/``.ndjson``, optionally ``.zst``) or
        directories (searched recursively). All are read and concatenated.
    strict : bool, default True
        Raise :class:`~saturation.validate.TrialValidationError` listing every problem;
        with ``strict=False`` rows with problems are rejected and counted instead.
    rejects : path, optional
        CSV side file for rejected rows (columns source, location, reasons, raw), written
        once validation passes (always in lenient mode), even when empty and before the
        error for having no valid rows.

    Returns
    -------
    (xarray.Dataset, Validated)
        The trial Dataset of :func:`read_trials` and the
        :class:`~saturation.validate.Validated` result (typed kept rows, rejected rows
        with reasons, problems, accounting, levels, extra and renamed columns).

    Raises
    ------
    TrialValidationError
        In strict mode on any problem, and in either mode when no valid row remains.
    FileNotFoundError
        If a path does not exist or a directory holds no table files.
    ValueError
        If a file's suffix is not a supported table format.
    """
    skipped: list[tuple[Path, str]] = []
    files = expand_paths(paths, skipped=skipped)
    not_read = [Problem(str(f), "", "", reason) for f, reason in skipped]  # listed, never silently left out
    if not_read and strict:
        raise TrialValidationError(not_read)
    valid = validate_trials((t for p in files for t in _iter_raw(p)), strict=strict)
    valid.problems[:0] = not_read
    if rejects is not None:
        write_atomic(rejects, neutralise_formulas(valid.rejected).to_csv(index=False).encode())
    if not len(valid.frame):
        acc = valid.accounting
        first = Problem("<input>", "", "", f"no valid rows: {acc['read']} read, {acc['rejected']} rejected")
        raise TrialValidationError([first, *valid.problems])
    return _build_dataset(valid, [str(p) for p in files]), valid


class OutputError(ValueError):
    """An output path the command refuses before writing anything: outside its output root,
    the same file as another output or as an input (after resolving symbolic links)."""


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@,-]")
#: longest name component written (file systems allow 255 bytes; suffixes are added)
MAX_NAME = 120


def safe_name(name: str) -> str:
    """A spec, run or arm name as one file-name component, safe to join to a directory.

    Every character but ASCII letters, digits and ``. _ + = @ , -`` becomes ``_`` (so a
    ``/``, a ``\\``, a NUL, a control character or a space never reaches the file system);
    leading dots become ``_`` (no hidden file, no ``.`` or ``..``); an empty name is ``_``;
    a name longer than :data:`MAX_NAME` is cut and given a hash of the whole name. Two
    different names can give one component (``a/b`` and ``a_b``): callers that need
    distinct files check for that (:func:`saturation.report.run_report` refuses, the
    report's files of one section get a numbered suffix).

    Parameters
    ----------
    name : str
        Any text (a spec ``name``, a run or an arm from the data).

    Returns
    -------
    str
        A non-empty component without path separators, never ``.`` or ``..``.
    """
    text = _UNSAFE.sub("_", str(name))
    stripped = text.lstrip(".")
    text = "_" * (len(text) - len(stripped)) + stripped
    if len(text) > MAX_NAME:
        text = text[: MAX_NAME - 17] + "-" + hashlib.sha256(str(name).encode()).hexdigest()[:16]
    return text or "_"


#: first characters that make a spreadsheet read a CSV cell as a formula (OWASP's list)
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise_formulas(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell that a spreadsheet would run as a formula prefixed by
    ``'``: a cell starting with ``= + - @``, a tab or a carriage return (a run name
    ``=cmd|' /C calc'!A0``, a rejected row's raw field). A cell that is a plain number
    (``-7``, ``+0.5``) is left as it is; numeric columns are never touched.

    Parameters
    ----------
    frame : pandas.DataFrame
        A table about to be written as CSV.

    Returns
    -------
    pandas.DataFrame
        A copy with the risky text cells prefixed (``frame`` itself when there is none).
    """

    def safe(value: Any) -> Any:
        if not isinstance(value, str) or not value.startswith(FORMULA_PREFIXES):
            return value
        if value[0] in "+-":
            try:
                float(value)
                return value
            except ValueError:
                pass
        return "'" + value

    out = frame
    for col in frame.columns:
        if not (frame[col].dtype == object or pd.api.types.is_string_dtype(frame[col].dtype)):
            continue
        fixed = frame[col].map(safe)
        if not fixed.equals(frame[col]):
            out = out.copy() if out is frame else out
            out[col] = fixed
    return out


def write_trials(ds: xr.Dataset, path: PathArg) -> Path:
    """Write a trial Dataset to netCDF (atomic, :func:`write_netcdf`); :func:`open_trials`
    reads it back losslessly.

    Parameters
    ----------
    ds : xarray.Dataset
        A trial Dataset (from :func:`read_trials` or a simulator), attrs included.
    path : path
        Target netCDF file (conventionally ``.nc``); replaced if it exists.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OSError
        If the file cannot be written.
    """
    return write_netcdf(ds, path)


def load_netcdf(path: PathArg) -> xr.Dataset:
    """A netCDF input checked by :func:`check_netcdf`, then read into memory (h5netcdf);
    a read failure is a ValueError naming the file."""
    check_netcdf(path)
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            return ds.load()
    except (OSError, RuntimeError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: unreadable netCDF ({type(exc).__name__}: {str(exc)[:200]})") from None


def _variable_name(column: str, levels: Sequence[str]) -> str:
    """A trials-table column as the Dataset's variable: ``file_f1`` is ``f1`` at level ``file``."""
    for level in levels:
        fld = column.removeprefix(f"{level}_")
        if fld != column and fld in S.LEVEL_FIELDS:
            return f"{fld}[level={level}]"
    return column


def trial_dataset_problems(ds: xr.Dataset, source: str) -> list[Problem]:
    """A trial Dataset checked by the rules of the tables (:func:`validate_trials`): steps
    and samples non-negative integers, rewards finite, per-level rates in [0, 1] and counts
    consistent, no trial twice; and its row counts (``rows_read`` = ``rows_kept`` +
    ``rows_rejected`` (+ ingest's ``rows_superseded``), ``rows_kept`` its trials,
    ``rows_ungraded`` its ungraded trials).

    Parameters
    ----------
    ds : xarray.Dataset
        A trial Dataset (from a netCDF input).
    source : str
        The file it came from, named in each problem.

    Returns
    -------
    list of Problem
        Each naming the file, the trial (its index, from 0) and the variable.
    """
    missing = [v for v in (S.GRADED, S.REWARD, S.RUN, S.STEP, S.INSTANCE_ID, S.SAMPLE) if v not in ds.variables]
    if S.TRIAL not in ds.dims or missing:
        have = ", ".join(sorted(map(str, ds.variables))) or "none"
        what = f"no variable(s) {', '.join(missing)}" if missing else f"no '{S.TRIAL}' dimension"
        return [Problem(source, "", "", f"not a trial Dataset ({what}; has {have})")]
    frame = trials_to_frame(ds)
    n = len(frame)
    levels = [str(v) for v in ds[S.LEVEL].to_numpy()] if S.LEVEL in ds.variables else []
    table = RawTable(source, frame, Locations("trial", np.arange(n)))
    try:
        validate_trials([table], strict=True)
        problems: list[Problem] = []
    except TrialValidationError as err:
        problems = [
            Problem(p.source, p.location, "", f"variable '{_variable_name(p.column, levels)}': {p.message}")
            if p.column
            else p
            for p in err.problems
        ]
    ungraded = int((~ds[S.GRADED].to_numpy().astype(bool)).sum())
    names = (S.ATTR_ROWS_READ, S.ATTR_ROWS_KEPT, S.ATTR_ROWS_UNGRADED, S.ATTR_ROWS_REJECTED)
    attrs = {k: ds.attrs.get(k) for k in names}
    if any(v is not None and not _is_count(v) for v in attrs.values()):
        problems.append(Problem(source, "", "", f"row counts {attrs} are not whole numbers >= 0"))
        return problems
    read, kept, ung, rej = attrs.values()
    superseded = ds.attrs.get("rows_superseded", 0)  # ingest's: trials a later attempt replaced
    rej = int(rej or 0) + (int(superseded) if _is_count(superseded) else 0)
    if kept is not None and int(kept) != n:
        problems.append(Problem(source, "", "", f"attribute {S.ATTR_ROWS_KEPT}={kept} but it holds {n:,} trials"))
    if ung is not None and int(ung) != ungraded:
        msg = f"attribute {S.ATTR_ROWS_UNGRADED}={ung} but {ungraded:,} trials are ungraded"
        problems.append(Problem(source, "", "", msg))
    if read is not None and kept is not None and int(read) != int(kept) + rej:
        msg = f"attributes {S.ATTR_ROWS_READ}={read} != {S.ATTR_ROWS_KEPT}={kept} + {S.ATTR_ROWS_REJECTED}"
        msg += f"={attrs[S.ATTR_ROWS_REJECTED] or 0}" + (f" + rows_superseded={superseded}" if superseded else "")
        problems.append(Problem(source, "", "", msg))
    return problems


def _is_count(value: Any) -> bool:
    value = value.item() if isinstance(value, np.generic) else value
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def open_trials(path: PathArg) -> xr.Dataset:
    """Open a trial Dataset written by :func:`write_trials` (loaded into memory), refusing
    what would read other files or inflate past :data:`MAX_NETCDF_BYTES`
    (:func:`check_netcdf`) and checking it by the rules of the tables
    (:func:`trial_dataset_problems`).

    Parameters
    ----------
    path : path
        netCDF file written by :func:`write_trials` (read with the h5netcdf engine).

    Returns
    -------
    xarray.Dataset
        The trial Dataset as written (dims ``trial`` and ``level``, the coordinates,
        variables and ``attrs`` of :func:`read_trials`), fully loaded; the file is closed.

    Raises
    ------
    ValueError
        The file is refused (:func:`check_netcdf`) or unreadable.
    TrialValidationError
        The Dataset breaks a rule of the tables, one problem per trial and variable.
    """
    check_netcdf(path)
    try:
        with xr.open_dataset(path, engine="h5netcdf") as lazy:
            if lazy.sizes.get(S.TRIAL, 0) > MAX_ROWS:
                raise ValueError(
                    f"{path}: {lazy.sizes[S.TRIAL]:,} trials, more than the limit of {MAX_ROWS:,} "
                    "(raise it with SATURATION_MAX_ROWS)"
                )
            ds = lazy.load()
    except (OSError, RuntimeError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: unreadable netCDF ({type(exc).__name__}: {str(exc)[:200]})") from None
    problems = trial_dataset_problems(ds, str(path))
    if problems:
        raise TrialValidationError(problems)
    return ds


def trials_to_frame(ds: xr.Dataset) -> pd.DataFrame:
    """Flatten a trial Dataset back to the input table format (one row per trial)."""
    out: dict[str, object] = {}
    for col in S.TRIAL_COORDS:
        if col in ds.coords:
            out[col] = ds[col].to_numpy()
    out[S.GRADED] = ds[S.GRADED].to_numpy()
    out[S.REWARD] = ds[S.REWARD].to_numpy()
    for level in ds[S.LEVEL].to_numpy() if S.LEVEL in ds.dims else []:
        for fld in S.LEVEL_FIELDS:
            if fld in ds:
                values = ds[fld].sel({S.LEVEL: level}).to_numpy()
                if fld in S.LEVEL_COUNTS:
                    values = pd.array(np.where(np.isnan(values), 0, values).astype(np.int64), dtype="Int64")
                    values[np.isnan(ds[fld].sel({S.LEVEL: level}).to_numpy())] = pd.NA
                out[f"{level}_{fld}"] = values
    for name, var in ds.data_vars.items():
        if var.dims == (S.TRIAL,) and name not in (S.GRADED, S.REWARD):
            out[str(name)] = var.to_numpy()
    return pd.DataFrame(out)


def _to_jsonl(frame: pd.DataFrame) -> bytes:
    """JSON lines with full float precision (pandas' to_json rounds to 10 digits)."""
    columns = list(frame.columns)
    cols = [frame[c].astype(object).where(frame[c].notna(), None).tolist() for c in columns]
    lines = []
    for row in zip(*cols, strict=True):
        rec = {c: (v.item() if isinstance(v, np.generic) else v) for c, v in zip(columns, row, strict=True)}
        lines.append(json.dumps(rec, allow_nan=False))
    return ("\n".join(lines) + "\n").encode()


def write_table(ds_or_frame: xr.Dataset | pd.DataFrame, path: PathArg) -> Path:
    """Write trials in the public table format chosen by the suffix (csv/parquet/jsonl[.zst]).

    Parameters
    ----------
    ds_or_frame : xarray.Dataset or pandas.DataFrame
        A trial Dataset, flattened to one row per trial (:func:`trials_to_frame`:
        columns run, step, instance_id, sample, the optional coords present, graded,
        reward, ``<level>_<field>`` per level and the extra trial variables), or a frame
        already in that table format, written as is (without its index).
    path : path
        Target file; the suffix (``.csv``, ``.parquet``, ``.jsonl`` or ``.ndjson``,
        optionally followed by ``.zst`` for zstd compression) picks the format.
        Replaced atomically if it exists.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        If the suffix is not a supported table format.
    OSError
        If the file cannot be written.
    """
    path = Path(path)
    frame = trials_to_frame(ds_or_frame) if isinstance(ds_or_frame, xr.Dataset) else ds_or_frame
    fmt, compressed = table_format(path)
    if fmt == "csv":
        data = frame.to_csv(index=False, lineterminator="\n").encode()
    elif fmt == "jsonl":
        data = _to_jsonl(frame)
    else:
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        data = buf.getvalue()
    if compressed:
        data = zstandard.ZstdCompressor(level=19).compress(data)
    return write_atomic(path, data)
