"""Validation of graded-trial tables: every problem collected, raised once.

:func:`validate_trials` takes the raw tables produced by the readers (one per file,
values still as read) and returns typed rows plus an exact row accounting. In strict
mode (the default) any problem raises :class:`TrialValidationError` listing all of
them, each with file, row or line, and column. In lenient mode rows with problems are
rejected (and can be written to a side file with their reasons); nothing is dropped
without being counted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, overload

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from saturation import schema as S
from saturation.streams import too_many_columns

#: At most this many problems are printed in an exception message.
MAX_PROBLEMS_SHOWN = 50


@dataclass(frozen=True)
class Problem:
    """One validation problem, located as precisely as the input allows."""

    source: str
    location: str  # "line 7", "row 3", or "" for file-level problems
    column: str  # "" when the problem is not about one column
    message: str

    def __str__(self) -> str:
        parts = [self.source]
        if self.location:
            parts.append(self.location)
        if self.column:
            parts.append(f"column '{self.column}'")
        return ": ".join(parts) + ": " + self.message


class TrialValidationError(ValueError):
    """Raised once with every problem found in the input.

    The message counts the problems and lists the first :data:`MAX_PROBLEMS_SHOWN` of
    them, one a line.

    Parameters
    ----------
    problems : sequence of Problem
        Every problem found, in the order found.

    Attributes
    ----------
    problems : list of Problem
        The same problems, as a list (all of them, also those the message leaves out).
    """

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        shown = [f"  - {p}" for p in self.problems[:MAX_PROBLEMS_SHOWN]]
        more = len(self.problems) - len(shown)
        tail = (
            f"\n  ... and {more} more (read leniently to write every rejected row with its reason)" if more > 0 else ""
        )
        super().__init__(f"{len(self.problems)} problem(s) in the graded-trials input:\n" + "\n".join(shown) + tail)


class Locations(Sequence[str]):
    """Row locators ``"line 7"`` / ``"row 3"`` kept as numbers (a million rows are a million
    integers, not a million strings); ``locations[i]`` is the text of row ``i``.

    Parameters
    ----------
    kind : str
        ``"line"`` (text formats: the physical line) or ``"row"`` (parquet: the row, from 1).
    numbers : array of int
        One number per row.
    """

    def __init__(self, kind: str, numbers: np.ndarray) -> None:
        self.kind = kind
        self.numbers = np.asarray(numbers, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.numbers)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [f"{self.kind} {n}" for n in self.numbers[i].tolist()]
        return f"{self.kind} {int(self.numbers[i])}"


@dataclass
class RawTable:
    """One input file (or one block of a large file) as read: values untyped, one locator
    per row."""

    source: str
    frame: pd.DataFrame
    locations: Sequence[str]
    #: problems found while reading (empty file, corrupt stream, malformed lines)
    problems: list[Problem] = field(default_factory=list)
    #: rows that could not even be parsed into fields (location, raw text)
    unparsable: list[tuple[str, str]] = field(default_factory=list)
    #: column names the header repeats (every row is then rejected: which one is meant?)
    duplicate_columns: list[str] = field(default_factory=list)

    def reject_line(self, location: str, message: str, text: str) -> None:
        """A line that cannot be parsed into fields: one problem and one unparsable row
        (its first 200 characters kept for the rejects file)."""
        self.problems.append(Problem(self.source, location, "", message))
        self.unparsable.append((location, text[:200]))


@dataclass
class Validated:
    """Result of :func:`validate_trials`.

    ``frame`` holds the kept rows, typed, with ``_table``/``_row`` columns (which input table, which of its rows);
    ``rejected`` one row per rejected input row with its reasons; ``accounting`` the
    counts read / kept / ungraded / rejected (read == kept + rejected).
    """

    frame: pd.DataFrame
    rejected: pd.DataFrame
    problems: list[Problem]
    accounting: dict[str, int]
    levels: list[str]
    extra_columns: list[str]
    #: extra columns stored under another name (original -> stored), see safe_column_name
    renamed: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------ parsing helpers
def _is_empty(values: pd.Series) -> np.ndarray:
    out = values.isna().to_numpy(dtype=bool).copy()
    as_str = values[~out].astype(str).str.strip()
    out[~out] = (as_str == "").to_numpy()
    return out


def _parse_float(values: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(float values with NaN for empty, empty mask, mask of unparsable non-empty cells).

    Vectorised: numeric columns are taken as they are; text is parsed by ``pd.to_numeric``
    in one call (one arrow cast when the text is typed ``str`` and every cell is a number),
    so whether a cell is a number never depends on the other cells of its column.
    Booleans are unparsable (JSON true/false must not become 1/0 silently in a numeric
    column); the per-cell check for them runs only on columns that hold a mix of types
    (``infer_dtype``), never on plain text or numbers. A cell reading "nan" is a number
    (NaN), not a typo."""
    if pd.api.types.is_bool_dtype(values.dtype):  # a boolean column: no cell is a number
        empty = values.isna().to_numpy(dtype=bool)
        return np.full(len(values), np.nan), empty, ~empty
    arr = empty = None
    if _is_arrow_text(values):  # one arrow cast when every non-empty cell is a number
        text = pa.array(values)
        blank = pc.fill_null(pc.equal(text, ""), True)
        with contextlib.suppress(pa.ArrowInvalid):  # a cell that is not a number, or spaces
            cast = pc.cast(pc.if_else(blank, pa.scalar(None, text.type), text), pa.float64())
            arr = np.array(cast.to_numpy(zero_copy_only=False), dtype=float)
            empty = np.asarray(blank.to_numpy(zero_copy_only=False), dtype=bool)
    if arr is None or empty is None:
        arr, empty = _parse_float_cells(values)
    candidates = ~empty & np.isnan(arr)
    bad = candidates.copy()
    if candidates.any():
        bad[candidates] = ~_is_nan_literal(values[candidates])
    return arr, empty, bad


def _is_arrow_text(values: pd.Series) -> bool:
    """Text typed as ``str`` (arrow strings), not Python objects."""
    return pd.api.types.is_string_dtype(values.dtype) and not pd.api.types.is_object_dtype(values.dtype)


def _parse_float_cells(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(float values with NaN for empty and unreadable cells, empty mask) of a column that
    is not boolean."""
    if pd.api.types.is_numeric_dtype(values.dtype):
        arr = values.to_numpy(dtype=float, na_value=np.nan).copy()
        return arr, np.isnan(arr)
    empty = _is_empty(values)
    clean = values.where(~empty, None)
    kind = pd.api.types.infer_dtype(clean, skipna=True)
    if kind not in ("string", "empty", "floating", "integer", "mixed-integer-float", "decimal"):
        clean = clean.map(_bool_to_num)  # mixed types: booleans possible
    # what a cell reads as is to_numeric's, the same whatever the other cells hold (the
    # arrow cast above reads exactly the numbers to_numeric reads; tested)
    arr = np.array(pd.to_numeric(clean, errors="coerce").to_numpy(dtype=float, na_value=np.nan), dtype=float)
    arr[empty] = np.nan
    return arr, empty


def _to_float(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Parse to float; returns (values with NaN for empty, mask of unparsable non-empty)."""
    arr, _, bad = _parse_float(values)
    return arr, bad


def _bool_to_num(v: object) -> object:
    # JSON true/false must not become 1/0 silently in numeric columns
    if isinstance(v, bool | np.bool_):
        return "not-a-number"
    return v


def _is_nan_literal(values: pd.Series) -> np.ndarray:
    return values.astype(str).str.strip().str.lower().isin(["nan"]).to_numpy()


#: integers at or above this magnitude are rejected: a float64 (how the values are typed)
#: cannot hold them exactly, and an int64 coordinate would wrap
MAX_INT: Final = 2**53


def _to_int(values: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse integers. Returns (float array, empty mask, bad mask for non-integers and for
    integers too large to store exactly, ``|x| >= 2**53``)."""
    arr, empty, bad = _parse_float(values)
    with np.errstate(invalid="ignore"):  # NaN (empty or bad cells) compares False and is masked
        non_int = (arr != np.floor(arr)) | (np.abs(arr) >= MAX_INT)  # inf: too large
    return arr, empty, bad | (non_int & ~empty & ~bad)


_TRUE = ["true", "1", "1.0"]
_FALSE = ["false", "0", "0.0"]


def _to_bool(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(true mask, mask of cells that are not a boolean: empty or unreadable). Booleans,
    1/0 and the text true/false/1/0/1.0/0.0 (any case, spaces around) are booleans."""
    if pd.api.types.is_bool_dtype(values.dtype) and not values.isna().any():
        arr = values.to_numpy(dtype=bool)
        return arr, np.zeros(len(arr), dtype=bool)
    text = values.astype(str).str.strip().str.lower()
    true = text.isin(_TRUE).to_numpy()
    false = text.isin(_FALSE).to_numpy()
    return true, ~(true | false)


def _to_str(values: pd.Series) -> pd.Series:
    """Text cells as text ("" for empty; any other value as ``str`` of it). Text typed as
    ``str`` stays in arrow (no Python string per cell)."""
    empty = _is_empty(values)
    if _is_arrow_text(values):
        return values.where(~empty, "")
    return values.astype(object).where(~empty, "").map(str)


def _describe(value: object) -> str:
    if isinstance(value, np.generic):  # a typed column's cell reads as the plain value
        value = value.item()
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 40 else text[:37] + "..."


# ------------------------------------------------------------------ the validator
def _level_columns(columns: Sequence[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for col in columns:
        m = S.LEVEL_COLUMN_RE.match(col)
        if m:
            out.setdefault(m["level"], {})[m["field"]] = col
    return out


class _Reasons:
    """Why each rejected row of one table is rejected: the reasons of the few bad rows, and
    those that concern every row (a missing or repeated column)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: dict[int, list[str]] = {}
        self.every: list[str] = []

    def add(self, i: int, reason: str) -> None:
        self.rows.setdefault(i, []).append(reason)

    def bad(self) -> np.ndarray:
        mask = np.full(self.n, bool(self.every))
        mask[list(self.rows)] = True
        return mask

    def text(self, i: int) -> str:
        return "; ".join([*self.every, *self.rows.get(i, [])])


def _validate_table(table: RawTable, renamed: dict[str, str]) -> tuple[pd.DataFrame, _Reasons, list[Problem]]:
    """Type one table's rows. Returns (typed frame, per-row reasons, problems); extra
    columns renamed on the way are added to ``renamed``."""
    raw = table.frame
    n = len(raw)
    reasons = _Reasons(n)
    problems: list[Problem] = list(table.problems)
    locs = table.locations

    def flag(mask: np.ndarray, column: str, make_msg: Callable[..., str]) -> None:
        if not mask.any():
            return
        for i in np.flatnonzero(mask).tolist():
            msg = make_msg(i)
            problems.append(Problem(table.source, locs[i], column, msg))
            reasons.add(i, f"{column}: {msg}")

    missing = [c for c in S.REQUIRED_COLUMNS if c not in raw.columns]
    if missing and n:
        msg = "missing required column(s) " + ", ".join(f"'{c}'" for c in missing)
        problems.append(Problem(table.source, "", "", msg + f" (all {n} rows rejected)"))
        reasons.every.append(msg)
    if table.duplicate_columns and n:
        reasons.every.append(f"duplicate column name(s) {table.duplicate_columns} (all {n} rows rejected)")
    msg = too_many_columns(raw.shape[1])
    wide = bool(msg)
    if wide and n:
        problems.append(Problem(table.source, "", "", msg + f" (all {n} rows rejected)"))
        reasons.every.append(msg)
    typed = pd.DataFrame(index=raw.index)
    if missing or table.duplicate_columns or wide or n == 0:
        return typed, reasons, problems

    for col in raw.columns:  # netCDF cannot store a NUL inside a string
        if pd.api.types.is_string_dtype(raw[col].dtype):
            nul = raw[col].astype(str).str.contains("\x00", regex=False).to_numpy(dtype=bool)
            flag(nul, str(col), lambda i: "contains a NUL character")
    for col in (S.RUN, S.INSTANCE_ID):
        values = _to_str(raw[col])
        flag((values == "").to_numpy(dtype=bool), col, lambda i: "missing value")
        typed[col] = values
    for col in (S.STEP, S.SAMPLE):
        arr, empty, bad = _to_int(raw[col])
        flag(empty, col, lambda i: "missing value")
        flag(bad, col, lambda i, c=col: f"{_describe(raw[c].iat[i])} is not an integer below 2^53")
        neg = ~bad & ~empty & (np.nan_to_num(arr) < 0)
        flag(neg, col, lambda i, c=col: f"{_describe(raw[c].iat[i])} is negative")
        typed[col] = np.where(bad | empty | neg, -1, np.nan_to_num(arr)).astype(np.int64)
    graded, bad_graded = _to_bool(raw[S.GRADED])
    flag(
        bad_graded,
        S.GRADED,
        lambda i: f"{_describe(raw[S.GRADED].iat[i])} is not a boolean (true/false/1/0)",
    )
    typed[S.GRADED] = graded
    reward, bad_reward = _to_float(raw[S.REWARD])
    flag(bad_reward, S.REWARD, lambda i: f"{_describe(raw[S.REWARD].iat[i])} is not a number")
    nonfinite = graded & ~bad_reward & ~np.isfinite(reward)
    flag(nonfinite, S.REWARD, lambda i: f"non-finite reward {_describe(raw[S.REWARD].iat[i])} on a graded row")
    typed[S.REWARD] = reward

    _type_optional_coords(raw, typed, flag)

    levels = _level_columns(list(raw.columns))
    for fields in levels.values():
        _type_level_fields(raw, fields, ~graded & ~bad_graded, typed, flag)
    extra = _type_extra_columns(raw, levels, set(typed.columns), renamed)
    if extra:  # added in one call: one column at a time is quadratic in the columns
        typed = pd.concat([typed, pd.DataFrame(extra, index=raw.index)], axis=1)
    return typed, reasons, problems


Flag = Callable[[np.ndarray, str, Callable[..., str]], None]


def _type_optional_coords(raw: pd.DataFrame, typed: pd.DataFrame, flag: Flag) -> None:
    """Type the optional coordinates present (phase must be one of ``schema.PHASES``)."""
    for col in S.OPTIONAL_COORDS:
        if col in raw.columns:
            values = _to_str(raw[col])
            if col == S.PHASE:
                wrong = ((values != "") & ~values.isin(list(S.PHASES))).to_numpy(dtype=bool)
                flag(wrong, col, lambda i, v=values: f"{_describe(v.iat[i])} is not one of " + "/".join(S.PHASES))
            typed[col] = values


def _type_level_fields(
    raw: pd.DataFrame, fields: dict[str, str], ungraded: np.ndarray, typed: pd.DataFrame, flag: Flag
) -> None:
    """Type one level's columns (rates in [0, 1], counts non-negative integers, n_tp within
    n_pred and n_gold, nothing on an ungraded row) into ``typed``."""
    counts: dict[str, np.ndarray] = {}
    for fld, col in fields.items():
        if fld in S.LEVEL_RATES:
            arr, bad = _to_float(raw[col])
            flag(bad, col, lambda i, c=col: f"{_describe(raw[c].iat[i])} is not a number")
            out = ~bad & np.isfinite(arr) & ((arr < 0) | (arr > 1))
            out |= ~bad & np.isinf(arr)
            flag(out, col, lambda i, c=col: f"{_describe(raw[c].iat[i])} is outside [0, 1]")
        else:
            arr, empty, bad = _to_int(raw[col])
            flag(bad, col, lambda i, c=col: f"{_describe(raw[c].iat[i])} is not an integer below 2^53")
            neg = ~bad & ~empty & (np.nan_to_num(arr) < 0)
            flag(neg, col, lambda i, c=col: f"{_describe(raw[c].iat[i])} is a negative count")
            counts[fld] = np.where(bad | neg, np.nan, arr)
        present = np.isfinite(arr) & ungraded
        flag(present, col, lambda i, c=col: f"value {_describe(raw[c].iat[i])} on an ungraded row (must be empty)")
        typed[col] = arr
    if S.N_TP not in counts:
        return
    tp = counts[S.N_TP]
    for other in (S.N_PRED, S.N_GOLD):  # each bound checked on its own, whichever is given
        if other in counts:
            bound = counts[other]
            with np.errstate(invalid="ignore"):
                over = (tp > bound) & np.isfinite(tp) & np.isfinite(bound)
            flag(
                over,
                fields[S.N_TP],
                lambda i, tp=tp, bound=bound, other=other: f"n_tp={tp[i]:g} exceeds {other}={bound[i]:g}",
            )


def _type_extra_columns(
    raw: pd.DataFrame, levels: dict[str, dict[str, str]], typed: set[str], renamed: dict[str, str]
) -> dict[str, object]:
    """Every other column (numeric if it parses, else text) under a name that cannot
    replace a Dataset variable (nor one of ``typed``); renames are recorded in ``renamed``."""
    known = set(S.REQUIRED_COLUMNS) | set(S.OPTIONAL_COORDS)
    known |= {c for f in levels.values() for c in f.values()}
    taken = set(typed) | known
    out: dict[str, object] = {}
    for col in raw.columns:
        if col in known:
            continue
        name = safe_column_name(str(col), taken)
        taken.add(name)
        if name != col:
            renamed[str(col)] = name
        arr, bad = _to_float(raw[col])
        out[name] = arr if not bad.any() else _to_str(raw[col])
    return out


def safe_column_name(col: str, taken: set[str]) -> str:
    """``col`` as a trial-variable name that netCDF can store and that cannot replace one
    of the Dataset's own names (:data:`~saturation.schema.RESERVED_NAMES`), nor the
    validator's ``_table``/``_row``, nor read as a ``<level>_<field>`` column: other
    characters become ``_``; a name starting with ``_`` or a digit gets an ``x`` prefix; a
    reserved or level-like name an ``_extra`` suffix; a taken one ``_2``, ``_3``, ..."""
    name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in col) or "unnamed"
    if name.startswith("_") or name[0].isdigit():
        name = ("x" if name.startswith("_") else "x_") + name
    if name in S.RESERVED_NAMES or S.LEVEL_COLUMN_RE.match(name):
        name = f"{name}_extra"
    base, k = name, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _reject_duplicates(
    frame: pd.DataFrame,
    key: list[str],
    dup: np.ndarray,
    origins: list[tuple[str, Sequence[str]]],
    problems: list[Problem],
    rejected_rows: list[dict[str, object]],
) -> None:
    """One problem and one rejected row per repeat of a trial key, naming where the key
    was first seen (only the rows of repeated keys are looked at)."""
    involved = np.flatnonzero(frame.duplicated(key, keep=False).to_numpy())
    sub = frame.iloc[involved]
    keys = list(sub[key].itertuples(index=False, name=None))
    rows = zip(sub["_table"].tolist(), sub["_row"].tolist(), strict=True)
    places = [(origins[t][0], origins[t][1][r]) for t, r in rows]  # (source, location) of each involved row
    first_loc: dict[tuple[object, ...], str] = {}
    for k, (src, loc) in zip(keys, places, strict=True):
        first_loc.setdefault(k, f"{src} {loc}")
    for j, pos in enumerate(involved.tolist()):
        if not dup[pos]:
            continue
        ident = {name: (v.item() if isinstance(v, np.generic) else v) for name, v in zip(key, keys[j], strict=True)}
        msg = f"duplicate trial {ident} (first seen at {first_loc[keys[j]]})"
        src, loc = places[j]
        problems.append(Problem(src, loc, "", msg))
        rejected_rows.append({"source": src, "location": loc, "reasons": msg, "raw": ""})


def validate_trials(tables: Iterable[RawTable], *, strict: bool = True) -> Validated:
    """Validate and type graded-trial tables, collecting every problem.

    Parameters
    ----------
    tables : iterable of RawTable
        One per input file or block of a file, as produced by :mod:`saturation.io`;
        consumed one at a time (a generator keeps memory bounded by a block).
    strict : bool, default True
        Raise :class:`TrialValidationError` with all problems if there is any. When
        False, rows with problems are rejected and reported in ``Validated.rejected``.

    Returns
    -------
    Validated
        Kept rows (typed), rejected rows with reasons, problems and accounting, where
        ``read == kept + rejected`` and ``ungraded`` counts kept rows with graded false.
    """
    problems: list[Problem] = []
    renamed: dict[str, str] = {}
    typed_parts: list[pd.DataFrame] = []
    rejected_rows: list[dict[str, object]] = []
    origins: list[tuple[str, Sequence[str]]] = []  # per table: source, row locators
    n_read = 0
    for table in tables:
        typed, reasons, probs = _validate_table(table, renamed)
        problems.extend(probs)
        n_read += len(table.frame) + len(table.unparsable)
        for loc, text in table.unparsable:
            rejected_rows.append({"source": table.source, "location": loc, "reasons": "unparsable line", "raw": text})
        bad = reasons.bad()
        for i in np.flatnonzero(bad).tolist():
            rejected_rows.append(
                {
                    "source": table.source,
                    "location": table.locations[i],
                    "reasons": reasons.text(i),
                    "raw": table.frame.iloc[i].to_json(default_handler=str),
                }
            )
        if len(typed.columns):
            keep = typed.loc[~bad].copy()
            keep["_table"] = len(origins)
            keep["_row"] = np.flatnonzero(~bad)
            typed_parts.append(keep)
            origins.append((table.source, table.locations))

    frame = pd.concat(typed_parts, ignore_index=True) if typed_parts else pd.DataFrame()
    typed_parts.clear()  # the blocks' rows, now in frame
    if len(frame):
        # fill optional coords absent from some files with "" (explicitly unknown); a trial
        # with no phase (a table without the column beside one with it, or a blank cell) is a
        # training trial, so `--phase train` selects it
        for col in S.OPTIONAL_COORDS:
            if col in frame.columns:
                values = frame[col].astype(object)
                unknown = values.isna() | (values == "") if col == S.PHASE else values.isna()
                frame[col] = values.where(~unknown, S.DEFAULT_PHASE if col == S.PHASE else "")
        key = [c for c in S.TRIAL_KEY if c in frame.columns]
        dup = frame.duplicated(key, keep="first").to_numpy()
        if dup.any():
            _reject_duplicates(frame, key, dup, origins, problems, rejected_rows)
            frame = frame.loc[~dup].reset_index(drop=True)

    if strict and problems:
        raise TrialValidationError(problems)
    if n_read == 0 and not problems:
        raise TrialValidationError([Problem("<input>", "", "", "no rows to read")])
    levels = S.level_order(list(_level_columns(list(frame.columns)).keys())) if len(frame) else []
    level_cols = {c for lvl in _level_columns(list(frame.columns)).values() for c in lvl.values()}
    extra = [
        c
        for c in frame.columns
        if c not in S.REQUIRED_COLUMNS and c not in S.OPTIONAL_COORDS and c not in level_cols and not c.startswith("_")
    ]
    n_kept = len(frame)
    accounting = {
        "read": n_read,
        "kept": n_kept,
        "ungraded": int((~frame[S.GRADED].astype(bool)).sum()) if n_kept else 0,
        "rejected": len(rejected_rows),
    }
    if accounting["read"] != accounting["kept"] + accounting["rejected"]:  # pragma: no cover
        raise AssertionError(f"row accounting does not add up: {accounting}")
    rejected = pd.DataFrame(rejected_rows, columns=["source", "location", "reasons", "raw"])
    return Validated(frame, rejected, problems, accounting, levels, extra, renamed)
