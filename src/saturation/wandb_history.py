"""Per-step metrics of a wandb run directory, read offline from its ``run-<id>.wandb`` file.

SkyRL's default tracker is wandb (``trainer.logger: "wandb"``, ``skyrl/train/config/config.py``);
``Tracking.log`` calls ``wandb.log(data, step=step)``, so nothing reaches the console. A
run leaves ``wandb/run-<date>-<id>/`` (``wandb/offline-run-<date>-<id>/`` offline) holding
``run-<id>.wandb``: every history row, the config and the summary as protobuf ``Record``
messages in wandb's log-structured file (a 7-byte header ``:W&B`` / ``0xBEE1`` / version 0,
then 32 KiB blocks of CRC-32-checked chunks). ``files/output.log`` holds only captured
console output and, in offline runs, ``wandb-summary.json`` and ``config.yaml`` are often
not written, so the ``.wandb`` file is the one source read here (docs/skyrl.md).

The records are decoded with the ``wandb`` package's own protobuf classes
(``wandb.proto.wandb_internal_pb2``): install the optional extra ``saturation[wandb]``.
wandb >= 0.30 has no public reader of the file (``wandb.sdk.internal.datastore`` was
removed), so the chunk framing is read here.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from saturation.skyrl import ConsoleLog

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32 * 1024
CHUNK_HEADER = 7  # crc32 (4), length (2), type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
INSTALL_HINT = "pip install 'saturation[wandb]'"


def require_wandb(runs: Sequence[str]) -> None:
    """Raise ValueError naming the runs and what to install when ``wandb`` is missing."""
    try:
        import wandb.proto.wandb_internal_pb2  # noqa: F401
    except ImportError as exc:
        shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
        raise ValueError(
            f"{shown}: the metrics of this run are in a wandb history file; reading it needs the "
            f"wandb package ({INSTALL_HINT}) ({exc})"
        ) from exc


class HistoryTruncated(ValueError):
    """The file ends inside a chunk, or a chunk fails its checksum."""


def raw_records(path: Path) -> Iterator[bytes]:
    """The serialized ``Record`` messages of a ``.wandb`` file, in order. Raises
    :class:`HistoryTruncated` (after yielding the complete records) when the file ends
    inside a chunk or a chunk is corrupt; ValueError when it is not a wandb file."""
    data = path.read_bytes()
    if data[: len(HEADER)] != HEADER:
        raise ValueError(f"{path}: not a wandb history file (header {data[:7]!r})")
    pos, n = len(HEADER), len(data)
    pending: bytearray | None = None
    while pos < n:
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:  # the block's trailer is zero padding
            pos += left
            continue
        if pos + CHUNK_HEADER > n:
            raise HistoryTruncated(f"{path}: ends inside a chunk header at byte {pos}")
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + CHUNK_HEADER])
        if crc == 0 and length == 0 and kind == 0:  # zero-filled rest of a block
            pos += left
            continue
        end = pos + CHUNK_HEADER + length
        if end > n:
            raise HistoryTruncated(f"{path}: ends inside a record at byte {pos} (run still writing, or killed)")
        payload = data[pos + CHUNK_HEADER : end]
        if zlib.crc32(payload, zlib.crc32(bytes([kind]))) != crc:
            raise HistoryTruncated(f"{path}: corrupt chunk at byte {pos} (checksum)")
        pos = end
        if kind == FULL:
            pending = None
            yield payload
        elif kind == FIRST:
            pending = bytearray(payload)
        elif kind in (MIDDLE, LAST) and pending is not None:
            pending += payload
            if kind == LAST:
                yield bytes(pending)
                pending = None
        else:
            raise HistoryTruncated(f"{path}: chunk of type {kind} out of order at byte {pos}")
    if pending is not None:
        raise HistoryTruncated(f"{path}: ends inside a record split over chunks")


def _item_value(item: Any) -> Any:
    if item.value_json:
        return json.loads(item.value_json)  # NaN / Infinity are written as such
    oneofs = item.DESCRIPTOR.oneofs_by_name
    which = item.WhichOneof("value") if "value" in oneofs else None
    if which in (None, "none"):
        return None
    return json.loads(item.json) if which == "json" else getattr(item, which)


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def read_wandb_run(run_dir: str | Path) -> ConsoleLog:
    """The per-step history of one wandb run directory as a :class:`~saturation.skyrl.ConsoleLog`
    (``steps``: numeric values by ``_step``, keys as logged, e.g. ``policy/policy_entropy``;
    ``config``: the run config flattened to dotted keys, ``trainer.policy.model.path`` the
    run identity). Internal keys (``_step``, ``_runtime``, ``_timestamp``) are dropped;
    non-numeric values (media, tables) are listed in ``non_numeric``. A truncated file keeps
    the complete rows and reports the rest in ``problems``.

    Parameters
    ----------
    run_dir : path
        A wandb run directory (``wandb/run-*`` or ``wandb/offline-run-*``); every
        ``run-*.wandb`` file in it is read, in name order.

    Returns
    -------
    ConsoleLog
        The run's steps, config and accounting (``lines``: records read, ``bytes_read``);
        unreadable or truncated files, and a directory without a history file, are reported
        in ``problems`` rather than raised.

    Raises
    ------
    ImportError
        If the directory holds a history file and ``wandb`` (extra ``saturation[wandb]``) is
        not installed.
    """
    run_dir = Path(run_dir)
    out = ConsoleLog(str(run_dir))
    rows: list[dict[str, Any]] = []
    axes = StepAxes()
    files = sorted(run_dir.glob("run-*.wandb"))
    if not files:
        out.problems.append(f"{run_dir}: a wandb run directory without a run-*.wandb history file")
        return out
    from wandb.proto import wandb_internal_pb2 as pb

    config: dict[str, Any] = {}
    for path in files:
        out.bytes_read += path.stat().st_size
        try:
            for raw in raw_records(path):
                out.lines += 1
                record = pb.Record()  # type: ignore[attr-defined]
                try:
                    record.ParseFromString(raw)
                except Exception:  # a record type newer than this wandb's classes: not history
                    continue
                kind = record.WhichOneof("record_type")
                if kind == "history":
                    row = _history_row(record, out)
                    if row is not None:
                        rows.append(row)
                elif kind == "metric":
                    axes.define(record.metric)
                elif kind in ("run", "config"):
                    items = record.run.config.update if kind == "run" else record.config.update
                    for item in items:
                        key = item.key or ".".join(item.nested_key)
                        value = json.loads(item.value_json) if item.value_json else None
                        if key != "_wandb":
                            _flatten(
                                key,
                                value.get("value", value)
                                if isinstance(value, dict) and set(value) <= {"value", "desc"}
                                else value,
                                config,
                            )
        except HistoryTruncated as exc:
            out.problems.append(f"{exc}; the {len(out.steps)} steps before it were read")
        except (OSError, ValueError) as exc:
            out.problems.append(f"{path}: unreadable ({exc})")
    out.config = {k: str(v) for k, v in config.items()}
    _place_rows(rows, axes, out)
    return out


class StepAxes:
    """The x-axes a run declared with ``wandb.define_metric(name, step_metric=...)`` (its
    ``metric`` records): per metric name or glob (``"train/*"``, ``"*"``), the metric its
    values are plotted against. The Hugging Face Trainer's ``WandbCallback`` declares
    ``define_metric("*", step_metric="train/global_step", step_sync=True)`` and logs
    ``train/global_step`` with every row (transformers
    ``src/transformers/integrations/integration_utils.py``, ``WandbCallback.setup`` and
    ``WandbCallback.on_log``), so TRL's trainers and others built on it count their steps
    there, while wandb's own ``_step`` counts ``wandb.log`` calls."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.globs: dict[str, str] = {}
        #: the ``step_sync`` option of each glob (wandb writes the last value of the step
        #: metric into rows that lack it)
        self.synced: dict[str, bool] = {}

    def define(self, metric: Any) -> None:
        """Record one ``MetricRecord``: a name with its ``step_metric`` (``""``: defined with
        none, plotted on ``_step`` and not matched by the globs, as wandb does), or a glob
        with its ``step_metric`` and ``step_sync``."""
        if metric.name:
            self.names[metric.name] = metric.step_metric
        elif metric.glob_name and metric.step_metric:
            self.globs[metric.glob_name] = metric.step_metric
            self.synced[metric.glob_name] = bool(metric.options.step_sync)

    @property
    def default(self) -> str | None:
        """The step metric of the glob ``"*"``: the run's step axis (None: wandb's ``_step``)."""
        return self.globs.get("*")

    def of(self, key: str) -> str | None:
        """The step metric ``key`` is plotted against: its own declaration (``None`` for
        ``_step``), else the longest glob (``prefix*``) that matches it. (wandb itself picks
        among overlapping globs in no fixed order; the longest prefix is this reader's rule.)"""
        if key in self.names:
            return self.names[key] or None
        best, best_len = None, -1
        for glob, step_metric in self.globs.items():
            prefix = glob.removesuffix("*")
            if key.startswith(prefix) and len(prefix) > best_len:
                best, best_len = step_metric, len(prefix)
        return best


def _place_rows(rows: list[dict[str, Any]], axes: StepAxes, out: ConsoleLog) -> None:
    """Merge the history rows into ``out``'s steps. Without a declared step axis each row is
    placed at its ``_step``. With one (``axes.default``), at the row's value of that metric,
    or, as wandb's ``step_sync`` does, the last value logged before it; keys declared against
    another step metric are not read (listed in ``non_numeric``), nor are rows of values
    logged before the first value of the axis, which wandb plots at no step either (counted
    in ``rows_before_step_axis``)."""
    axis = axes.default
    if axis is not None:
        values = [row[axis] for row in rows if _is_number(row.get(axis))]
        if any(float(v) != int(v) for v in values):  # an epoch axis (0.25, 0.5, ...): not whole steps
            shown = next(v for v in values if float(v) != int(v))
            out.problems.append(
                f"{out.path}: the run's step axis {axis} is not whole steps (e.g. {shown:g}); "
                "its rows are placed by wandb's _step instead"
            )
            axis = None
    out.step_axis = axis or "_step"
    steps_metrics = {m for m in (*axes.names.values(), *axes.globs.values()) if m}
    synced = axes.synced.get("*", False)
    last: float | None = None
    early = 0
    for row in rows:
        if axis is None:
            _merge_row(_metric_values(row, out), row["_step"], out, repeats_restart=True)
            continue
        value = row.get(axis)
        if _is_number(value):
            last = value
        elif not synced:  # without step_sync wandb plots a row lacking the axis at no step
            last = None
        kept: dict[str, Any] = {}
        for key, v in row.items():
            if key.startswith("_") or key in steps_metrics:
                continue
            other = axes.of(key.removesuffix("._type").split("._", 1)[0])
            if other != axis:
                out.non_numeric.setdefault(key, f"logged against {other or '_step'}, not the run's step axis {axis}")
            else:
                kept[key] = v
        if kept and not _merge_row(_metric_values(kept, out), last, out, repeats_restart=False):
            early += 1
    out.rows_before_step_axis = early


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _history_row(record: Any, out: ConsoleLog) -> dict[str, Any] | None:
    """One history record's items by key (``_step`` included); None (a problem, counted in
    ``rows_without_step``) without a finite step."""
    row: dict[str, Any] = {}
    for item in record.history.item:
        row[item.key or ".".join(item.nested_key)] = _item_value(item)
    step = row.get("_step", record.history.step.num if record.history.HasField("step") else None)
    if not _is_number(step):
        out.problems.append(f"{out.path}: history row without a step")
        out.rows_without_step += 1
        return None
    row["_step"] = step
    return row


def _metric_values(row: dict[str, Any], out: ConsoleLog) -> dict[str, float]:
    """A row's numeric values by key; media and text listed in ``out.non_numeric``."""
    # a logged wandb object (a Table, an image) arrives flattened: ``key._type`` ("table-file")
    # beside ``key.ncols``, ``key.nrows``, ``key.size``, ... - numbers that are not metrics
    media = {k.removesuffix("._type"): v for k, v in row.items() if k.endswith("._type")}
    values: dict[str, float] = {}
    for key, value in row.items():
        if key.startswith("_"):
            continue
        owner = next((m for m in media if key.startswith(m + ".")), None)
        if owner is not None:
            out.non_numeric.setdefault(owner, f"a logged {media[owner]} (not a metric)")
        elif isinstance(value, dict) and "_type" in value:  # the same, not flattened
            out.non_numeric.setdefault(key, f"a logged {value['_type']} (not a metric)")
        elif isinstance(value, int | float):  # bools count; NaN stays NaN
            values[key] = float(value)
        else:
            out.non_numeric.setdefault(key, repr(value)[:80])
    return values


def _merge_row(values: dict[str, float], step: float | None, out: ConsoleLog, *, repeats_restart: bool) -> bool:
    """A row's metric values merged at ``step``; False when the row holds values but no step
    (logged before the first value of the run's step axis)."""
    out.block_lines += 1
    if not values:  # only tables or text (SkyRL's ``error/tracebacks``, logged without a step): no step
        out.records_without_metrics += 1
        return True
    if step is None:
        return False
    out.blocks += 1
    out.merge_step(int(step), values, repeats_restart=repeats_restart)
    return True


__all__ = ["INSTALL_HINT", "HistoryTruncated", "StepAxes", "raw_records", "read_wandb_run", "require_wandb"]
