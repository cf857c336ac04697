"""Read and write graded-trial tables and trial Datasets.

Formats: ``.csv``, ``.parquet``, ``.jsonl``/``.ndjson``, each optionally compressed
with zstandard (an added ``.zst`` suffix). Directories are searched recursively for
those files; several paths are read and concatenated. See ``docs/input-format.md``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
import zstandard

from saturation import __version__
from saturation import schema as S
from saturation.validate import Problem, RawTable, Validated, validate_trials

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
    raise ValueError(
        f"{path}: unsupported file type; expected one of {', '.join(SUFFIXES)}"
    )


def expand_paths(paths: PathArg | Iterable[PathArg]) -> list[Path]:
    """Expand files and directories (recursively) into a sorted list of table files."""
    if isinstance(paths, str | PathLike):
        paths = [paths]
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(SUFFIXES))
            if not found:
                raise FileNotFoundError(f"{p}: directory holds no {'/'.join(SUFFIXES)} files")
            out.extend(found)
        elif p.exists():
            table_format(p)
            out.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    return out


def _decompress(data: bytes) -> bytes:
    """Decompress every zstd frame; raise ValueError on a corrupt or truncated stream."""
    chunks: list[bytes] = []
    while data:
        dobj = zstandard.ZstdDecompressor().decompressobj()
        try:
            chunks.append(dobj.decompress(data))
        except zstandard.ZstdError as exc:
            raise ValueError(f"corrupt zstd stream ({exc})") from exc
        if not dobj.eof:
            raise ValueError("truncated zstd stream (the frame ends before its end marker)")
        data = dobj.unused_data
    return b"".join(chunks)


def _read_raw(path: Path) -> RawTable:
    """Read one file into a RawTable (values untyped, one locator per row)."""
    source = str(path)
    fmt, compressed = table_format(path)
    data = path.read_bytes()
    if compressed:
        try:
            data = _decompress(data)
        except ValueError as exc:
            return RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", str(exc))])
    if not data.strip():
        return RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", "empty file")])
    if fmt == "csv":
        return _read_csv(source, data)
    if fmt == "jsonl":
        return _read_jsonl(source, data)
    return _read_parquet(source, data)


def _read_csv(source: str, data: bytes) -> RawTable:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", f"not UTF-8 text ({exc})")])
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header or not any(h.strip() for h in header):
        return RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", "empty file (no header)")])
    header = [h.strip() for h in header]
    problems: list[Problem] = []
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        problems.append(Problem(source, "line 1", "", f"duplicate column name(s) {dupes}"))
    rows: list[list[str]] = []
    locations: list[str] = []
    unparsable: list[tuple[str, str]] = []
    try:
        for row in reader:
            line = f"line {reader.line_num}"
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line: not a row
            if len(row) != len(header):
                problems.append(
                    Problem(source, line, "", f"expected {len(header)} fields, found {len(row)}")
                )
                unparsable.append((line, ",".join(row)))
                continue
            rows.append(row)
            locations.append(line)
    except csv.Error as exc:
        problems.append(Problem(source, f"line {reader.line_num}", "", f"malformed CSV ({exc})"))
    if not rows and not unparsable and not problems:
        problems.append(Problem(source, "", "", "empty file (header only, no rows)"))
    frame = pd.DataFrame(rows, columns=header, dtype=object) if rows else pd.DataFrame(columns=header, dtype=object)
    return RawTable(source, frame, locations, problems, unparsable)


def _read_jsonl(source: str, data: bytes) -> RawTable:
    records: list[dict[str, object]] = []
    locations: list[str] = []
    problems: list[Problem] = []
    unparsable: list[tuple[str, str]] = []
    for number, raw_line in enumerate(data.split(b"\n"), start=1):
        line = raw_line.strip()
        if not line:
            continue
        loc = f"line {number}"
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(Problem(source, loc, "", f"malformed JSON ({exc})"))
            unparsable.append((loc, line.decode("utf-8", "replace")[:200]))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(source, loc, "", f"expected a JSON object, found {type(obj).__name__}"))
            unparsable.append((loc, line.decode("utf-8", "replace")[:200]))
            continue
        records.append(obj)
        locations.append(loc)
    frame = pd.DataFrame.from_records(records).astype(object) if records else pd.DataFrame(dtype=object)
    return RawTable(source, frame, locations, problems, unparsable)


def _read_parquet(source: str, data: bytes) -> RawTable:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises several types for a broken file
        return RawTable(source, pd.DataFrame(), [], [Problem(source, "", "", f"unreadable parquet ({exc})")])
    frame = table.to_pandas().astype(object)
    if frame.empty:
        return RawTable(source, frame, [], [Problem(source, "", "", "empty file (no rows)")])
    return RawTable(source, frame, [f"row {i + 1}" for i in range(len(frame))])


# --------------------------------------------------------------------- Dataset
def _build_dataset(valid: Validated, sources: Sequence[str]) -> xr.Dataset:
    ds = dataset_from_frame(
        valid.frame, levels=valid.levels, extra=valid.extra_columns,
        accounting=valid.accounting, sources=sources,
    )
    # problems that concern a whole file (unreadable, missing column) stay visible
    ds.attrs["file_problems"] = json.dumps([str(p) for p in valid.problems if not p.location])
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
    coords: dict[str, tuple[str, np.ndarray]] = {}
    for col in S.TRIAL_COORDS:
        if col in frame.columns:
            values = frame[col].to_numpy()
            coords[col] = (S.TRIAL, values.astype(np.int64) if col in (S.STEP, S.SAMPLE) else values.astype(object))
    data_vars: dict[str, tuple[tuple[str, ...], np.ndarray]] = {
        S.GRADED: ((S.TRIAL,), frame[S.GRADED].to_numpy(dtype=bool)),
        S.REWARD: ((S.TRIAL,), frame[S.REWARD].to_numpy(dtype=float)),
    }
    levels = list(levels)
    if levels:
        for fld in S.LEVEL_FIELDS:
            arr = np.full((n, len(levels)), np.nan)
            for j, level in enumerate(levels):
                col = f"{level}_{fld}"
                if col in frame.columns:
                    arr[:, j] = frame[col].to_numpy(dtype=float)
            data_vars[fld] = ((S.TRIAL, S.LEVEL), arr)
    for col in extra:
        values = frame[col].to_numpy()
        data_vars[col] = ((S.TRIAL,), values if values.dtype != object else values.astype(object))
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
    """Like :func:`read_trials` but also return the validation result (problems, rejects)."""
    files = expand_paths(paths)
    valid = validate_trials([_read_raw(p) for p in files], strict=strict)
    if rejects is not None:
        valid.rejected.to_csv(rejects, index=False)
    return _build_dataset(valid, [str(p) for p in files]), valid


def write_netcdf(ds: xr.Dataset, path: PathArg) -> Path:
    """Write ``ds`` to netCDF (h5netcdf) atomically: into a temporary file beside ``path``,
    then renamed over it, so a reader never sees a half-written file."""
    import os

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        ds.to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_trials(ds: xr.Dataset, path: PathArg) -> Path:
    """Write a trial Dataset to netCDF (atomic, :func:`write_netcdf`); :func:`open_trials`
    reads it back losslessly."""
    return write_netcdf(ds, path)


def open_trials(path: PathArg) -> xr.Dataset:
    """Open a trial Dataset written by :func:`write_trials` (loaded into memory)."""
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


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
    """Write trials in the public table format chosen by the suffix (csv/parquet/jsonl[.zst])."""
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
    path.write_bytes(data)
    return path
