"""The one data loader of the CLI, the specs and the report: the embedded data, trial Datasets
written by ``saturation ingest``, graded-trial tables and run logs.

Its own module (above ``replica`` and ``runlogs``, below ``spec``) so that a command reading
the user's files (``saturation describe FILE``) imports neither the models nor the embedded
data's module: both are imported only when asked for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from saturation import schema as S
from saturation.io import open_trials, read_trials


def load_inputs(paths: Sequence[str | Path] | None, *, default: str, kind: str = "trials") -> xr.Dataset:
    """The one data loader of the CLI and the specs: no paths, the embedded data set
    ``default``; one ``.nc``, a trial Dataset written by ``saturation ingest``; ``kind``
    "series", a metrics CSV or a run log (:func:`saturation.runlogs.read_metrics`); else
    graded-trial tables (files or directories)."""

    if not paths:
        from saturation import replica  # the embedded data sets (imports the models)

        return replica.load_embedded(default)
    if kind == "series":
        if len(paths) != 1:
            raise ValueError(f"a series is one per-step metrics file, got {len(paths)} paths")
        from saturation.runlogs import read_metrics

        return read_metrics(paths[0])  # a metrics CSV or .nc, or any run log (runlogs.FORMATS)
    if len(paths) == 1 and str(paths[0]).endswith(".nc"):
        return open_trials(paths[0])
    if all(str(p).endswith(".nc") for p in paths):  # several ingested runs: one trial Dataset
        return _concat_trials([open_trials(p) for p in paths], [str(p) for p in paths])
    return read_trials(list(paths))


def _concat_trials(parts: list[xr.Dataset], names: list[str]) -> xr.Dataset:
    """Trial Datasets of different runs (one per ``saturation ingest`` output) as one: the
    trials concatenated, the row accounting summed; a run found in two files is an error
    (which file's trials would it be?)."""
    seen: dict[str, str] = {}
    for part, name in zip(parts, names, strict=True):
        for run in map(str, np.unique(part[S.RUN].to_numpy())) if S.RUN in part.coords else []:
            if run in seen:
                raise ValueError(f"{name}: run {run!r} is also in {seen[run]}; give each run's trials once")
            seen[run] = name
    out = xr.concat(parts, dim=S.TRIAL, join="outer", combine_attrs="drop_conflicts")
    for attr in (S.ATTR_ROWS_READ, S.ATTR_ROWS_KEPT, S.ATTR_ROWS_UNGRADED, S.ATTR_ROWS_REJECTED):
        out.attrs[attr] = int(sum(int(p.attrs.get(attr, 0)) for p in parts))
    out.attrs[S.ATTR_SOURCES] = json.dumps(names)
    return out
