"""Per-group sufficient statistics of a trial Dataset (what the models consume), and the one
phase rule (:func:`select_phase`): which trials of train, eval and eval-only an analysis uses."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from saturation import schema as S
from saturation._lazy import xarray_without_dask

xarray_without_dask()  # every trial Dataset is built here or in io: no dask import for it

#: statistics computed for every summarised variable over graded trials
STAT_SUFFIXES = ("n", "sum", "sumsq", "mean")
#: extra statistics of variables bounded in [0, 1] (reward, f1, precision, recall): counts
#: of exact 0 and 1 and, over values strictly inside, sums of log y and log(1 - y)
BOUNDED_SUFFIXES = ("n0", "n1", "slogy", "slog1my")


class _Groups:
    """The cells of a dense grid over the ``by`` coordinates and per-cell sums over trials."""

    def __init__(self, ds: xr.Dataset, by: Sequence[str]) -> None:
        codes_list, self.uniques = [], []
        for name in by:
            codes, uniq = pd.factorize(ds[name].to_numpy(), sort=True)
            codes_list.append(codes)
            self.uniques.append(uniq)
        self.shape = tuple(len(u) for u in self.uniques)
        self.flat = np.ravel_multi_index(codes_list, self.shape) if len(self.shape) > 1 else codes_list[0]
        self.size = int(np.prod(self.shape))
        self.dims = tuple(by)

    def count(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.flat[mask], minlength=self.size).reshape(self.shape).astype(np.int64)

    def sums(self, values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(n, sum, sum of squares, mean)`` per cell over the masked trials."""
        idx, v = self.flat[mask], values[mask]
        n = np.bincount(idx, minlength=self.size).reshape(self.shape)
        s = np.bincount(idx, weights=v, minlength=self.size).reshape(self.shape)
        ss = np.bincount(idx, weights=v * v, minlength=self.size).reshape(self.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, s / np.where(n > 0, n, 1), np.nan)
        return n.astype(np.int64), s, ss, mean

    def bounded(self, values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, ...]:
        """Zero-one-inflated Beta statistics per cell (NaN where a value is outside [0, 1])."""
        idx, v = self.flat[mask], values[mask]
        inside = (v > 0) & (v < 1)
        safe = np.where(inside, v, 0.5)
        out_of_range = np.bincount(idx, weights=((v < 0) | (v > 1)).astype(float), minlength=self.size) > 0
        res = (
            np.bincount(idx, weights=(v == 0).astype(float), minlength=self.size),
            np.bincount(idx, weights=(v == 1).astype(float), minlength=self.size),
            np.bincount(idx, weights=np.where(inside, np.log(safe), 0.0), minlength=self.size),
            np.bincount(idx, weights=np.where(inside, np.log1p(-safe), 0.0), minlength=self.size),
        )
        return tuple(np.where(out_of_range, np.nan, r).reshape(self.shape) for r in res)


def _level_statistics(out: xr.Dataset, groups: _Groups, fld: str, values: np.ndarray, graded: np.ndarray) -> None:
    """Add the statistics of the per-level variable ``fld`` (values: trial x level) to ``out``."""
    rates = fld in S.LEVEL_RATES
    suffixes = STAT_SUFFIXES + (BOUNDED_SUFFIXES if rates else ())
    stats = [np.empty((*groups.shape, values.shape[1])) for _ in suffixes]
    for j in range(values.shape[1]):
        col = values[:, j]
        mask = graded & np.isfinite(col)
        parts = groups.sums(col, mask) + (groups.bounded(col, mask) if rates else ())
        for k, arr in enumerate(parts):
            stats[k][..., j] = arr
    for name, arr in zip(suffixes, stats, strict=True):
        out[f"{fld}_{name}"] = ((*groups.dims, S.LEVEL), arr.astype(np.int64) if name == "n" else arr)


def aggregate(ds: xr.Dataset, by: Sequence[str] | None = None) -> xr.Dataset:
    """Sufficient statistics per group (e.g. per run, arm and step).

    Parameters
    ----------
    ds : xarray.Dataset
        Trial Dataset from :func:`~saturation.io.read_trials` or a simulator.
    by : sequence of str, optional
        Trial coordinates to group by. Default ``("run", "arm", "step")`` restricted to
        the coordinates present. Naming a coordinate the Dataset lacks is an error.

    Returns
    -------
    xarray.Dataset
        One dim per ``by`` name (a dense grid over the observed values; empty cells have
        ``n_trials == 0`` and NaN means) plus ``level``. Variables:

        * ``n_trials``, ``n_graded``, ``ungraded_rate``;
        * ``reward_all_mean``: mean logged reward over all trials (ungraded count as logged);
        * for ``reward`` over graded trials and for each per-level variable
          (f1, precision, recall, n_pred, n_gold, n_tp) over graded trials where the
          value is present: ``<var>_n``, ``<var>_sum``, ``<var>_sumsq``, ``<var>_mean``;
        * for every other numeric per-trial variable (e.g. ``n_locations``) the same four
          statistics over graded trials where the value is present;
        * for ``reward``, f1, precision and recall also ``<var>_n0``, ``<var>_n1``,
          ``<var>_slogy``, ``<var>_slog1my`` (NaN where a value lies outside [0, 1]).

    Notes
    -----
    For a Gaussian likelihood on trial values :math:`y_i` with group mean
    :math:`\\mu_g`, :math:`(n_g, \\sum y, \\sum y^2)` are sufficient:
    :math:`\\sum_i (y_i-\\mu_g)^2 = \\sum y^2 - 2\\mu_g \\sum y + n_g \\mu_g^2`.
    For a zero-one-inflated Beta the counts of 0 and 1 and the sums of :math:`\\log y` and
    :math:`\\log(1-y)` over the values inside (0, 1) are sufficient.
    """
    if by is None:
        by = [c for c in S.DEFAULT_GROUP_BY if c in ds.coords]
    missing = [c for c in by if c not in ds.coords]
    if missing:
        raise KeyError(f"aggregate: the Dataset has no coordinate(s) {missing}; have {sorted(map(str, ds.coords))}")
    by = list(by)
    if not by:
        raise ValueError("aggregate: 'by' must name at least one trial coordinate")

    groups = _Groups(ds, by)
    count, sums, bounded, uniques = groups.count, groups.sums, groups.bounded, groups.uniques

    graded = ds[S.GRADED].to_numpy().astype(bool)
    reward = ds[S.REWARD].to_numpy().astype(float)
    everything = np.ones_like(graded)
    n_trials = count(everything)
    n_graded = count(graded)
    dims = tuple(by)
    out = xr.Dataset(coords={name: np.asarray(u) for name, u in zip(by, uniques, strict=True)})
    out[S.N_TRIALS] = (dims, n_trials)
    out[S.N_GRADED] = (dims, n_graded)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[S.UNGRADED_RATE] = (dims, np.where(n_trials > 0, 1 - n_graded / np.maximum(n_trials, 1), np.nan))
    finite_reward = np.isfinite(reward)
    _, s_all, _, _ = sums(np.where(finite_reward, reward, 0.0), everything)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["reward_all_mean"] = (dims, np.where(n_trials > 0, s_all / np.maximum(n_trials, 1), np.nan))
    for name, arr in zip(STAT_SUFFIXES, sums(reward, graded & finite_reward), strict=True):
        out[f"{S.REWARD}_{name}"] = (dims, arr)
    for name, arr in zip(BOUNDED_SUFFIXES, bounded(reward, graded & finite_reward), strict=True):
        out[f"{S.REWARD}_{name}"] = (dims, arr)

    # any other numeric per-trial variable (e.g. n_locations, turns, tokens), over graded trials
    extra = [
        str(v)
        for v, da in ds.data_vars.items()
        if v not in (S.GRADED, S.REWARD) and da.dims == (S.TRIAL,) and np.issubdtype(da.dtype, np.number)
    ]
    for var in extra:
        values = ds[var].to_numpy().astype(float)
        for name, arr in zip(STAT_SUFFIXES, sums(values, graded & np.isfinite(values)), strict=True):
            out[f"{var}_{name}"] = (dims, arr)

    if S.LEVEL in ds.dims and ds.sizes[S.LEVEL] > 0:
        out = out.assign_coords({S.LEVEL: ds[S.LEVEL].to_numpy()})
        for fld in S.LEVEL_FIELDS:
            if fld in ds:
                _level_statistics(
                    out, groups, fld, ds[fld].transpose(S.TRIAL, S.LEVEL).to_numpy().astype(float), graded
                )
    out.attrs.update({k: v for k, v in ds.attrs.items()})
    out.attrs["aggregated_by"] = ",".join(by)
    return out


def select_phase(ds: xr.Dataset, phase: str | None = None) -> xr.Dataset:
    """The trials of one phase (train, eval or eval_only): the one rule every analysis applies.

    Training rollouts, periodic evals and eval-only checkpoint runs answer different questions
    (other prompts, other sampling settings; an eval-only run sits at its checkpoint's step), so
    no model pools them: a step's mean over train and eval trials together is neither.

    Parameters
    ----------
    ds : xarray.Dataset
        Trial Dataset; without a ``phase`` coordinate, or with one phase, it is returned as is
        (``phase``, when given, must then be that phase).
    phase : str, optional
        The phase to keep. Default: the only one; of several, ``schema.DEFAULT_PHASE``
        ("train") when present, else an error (which of them is meant?).

    Returns
    -------
    xarray.Dataset
        The kept trials; ``attrs["phase"]`` names the phase kept and, when trials of other
        phases were left out, ``attrs["phases_left_out"]`` is ``{phase: trials}`` as JSON.

    Raises
    ------
    ValueError
        If ``phase`` is not in the data, or the data hold several phases, none of them
        "train", and ``phase`` is not given.
    """
    if S.PHASE not in ds.coords:
        if phase is not None:
            raise ValueError(f"phase {phase!r} asked for, but the trials have no phase column")
        return ds
    values = ds[S.PHASE].to_numpy().astype(str)
    names, counts = np.unique(values, return_counts=True)
    have = dict(zip(map(str, names), map(int, counts), strict=True))
    if phase is None:
        if len(have) <= 1:
            return ds
        if S.DEFAULT_PHASE not in have:
            listed = ", ".join(f"{k or '(blank)'} ({v} trials)" for k, v in have.items())
            raise ValueError(f"the trials hold several phases, {listed}: choose one (--phase, or [data] phase)")
        phase = S.DEFAULT_PHASE
    if phase not in have:
        raise ValueError(f"phase {phase!r} is not in the trials (phases: {', '.join(have) or 'none'})")
    if len(have) == 1:
        return ds.assign_attrs({S.ATTR_PHASE: phase})
    out = ds.isel({S.TRIAL: values == phase})
    left = {k: v for k, v in have.items() if k != phase}
    return out.assign_attrs({S.ATTR_PHASE: phase, S.ATTR_PHASES_LEFT_OUT: json.dumps(left)})


def phase_note(ds: xr.Dataset) -> str:
    """One sentence on the phases :func:`select_phase` left out ("" when none)."""
    left = phase_summary(ds).get("phases_left_out")
    if not left:
        return ""
    kept = ds.attrs.get(S.ATTR_PHASE, "?")
    others = ", ".join(f"{n} {k or '(blank phase)'}" for k, n in left.items())
    return f"phase {kept} only ({ds.sizes[S.TRIAL]} trials); left out: {others} trials (--phase to choose)"


def phase_summary(ds: xr.Dataset) -> dict[str, Any]:
    """``{"phase": ..., "phases_left_out": {phase: trials}}`` for a fit's data summary (empty
    when the trials carry no phase)."""
    if S.ATTR_PHASE not in ds.attrs and S.PHASE not in ds.coords:
        return {}
    phase = ds.attrs.get(S.ATTR_PHASE) or next(iter(np.unique(ds[S.PHASE].to_numpy().astype(str))), None)
    return {"phase": phase, "phases_left_out": json.loads(ds.attrs.get(S.ATTR_PHASES_LEFT_OUT, "{}") or "{}")}
