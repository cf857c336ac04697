"""Readers, writers and the netCDF round trip."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from saturation import schema as S
from saturation.io import (
    open_trials,
    read_trials,
    table_format,
    trials_to_frame,
    write_table,
    write_trials,
)

FORMATS = ["csv", "csv.zst", "parquet", "parquet.zst", "jsonl", "jsonl.zst", "ndjson", "ndjson.zst"]


def _strip_attrs(ds: xr.Dataset) -> xr.Dataset:
    ds = ds.copy()
    ds.attrs = {}
    return ds


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_to_the_same_dataset(small_plateau, tmp_path, fmt):
    ds, _ = small_plateau
    ref = read_trials(write_table(ds, tmp_path / "ref.csv"))
    got = read_trials(write_table(ds, tmp_path / f"trials.{fmt}"))
    xr.testing.assert_identical(_strip_attrs(got), _strip_attrs(ref))
    # and the table round trip reproduces the simulated dataset values exactly
    np.testing.assert_array_equal(got[S.F1].values, ds[S.F1].values)
    np.testing.assert_array_equal(got[S.GRADED].values, ds[S.GRADED].values)


def test_attrs_record_sources_and_accounting(small_plateau, tmp_path):
    ds, _ = small_plateau
    path = write_table(ds, tmp_path / "t.csv")
    got = read_trials(path)
    assert json.loads(got.attrs[S.ATTR_SOURCES]) == [str(path)]
    n = ds.sizes[S.TRIAL]
    assert got.attrs[S.ATTR_ROWS_READ] == n
    assert got.attrs[S.ATTR_ROWS_KEPT] == n
    assert got.attrs[S.ATTR_ROWS_REJECTED] == 0
    assert got.attrs[S.ATTR_ROWS_UNGRADED] == int((~ds[S.GRADED]).sum())
    assert got.attrs[S.ATTR_ROWS_UNGRADED] > 0


def test_ungraded_levels_are_nan_not_zero(small_plateau, tmp_path):
    ds, _ = small_plateau
    got = read_trials(write_table(ds, tmp_path / "t.csv"))
    ungraded = ~got[S.GRADED].values
    assert np.isnan(got[S.F1].values[ungraded]).all()
    assert np.isnan(got[S.N_PRED].values[ungraded]).all()
    assert not np.isnan(got[S.F1].values[~ungraded]).any()


def test_directory_and_several_paths_concatenate(small_plateau, tmp_path):
    ds, _ = small_plateau
    frame = trials_to_frame(ds)
    half = len(frame) // 2
    (tmp_path / "d").mkdir()
    write_table(frame.iloc[:half], tmp_path / "d" / "a.csv")
    write_table(frame.iloc[half:], tmp_path / "d" / "b.jsonl.zst")
    from_dir = read_trials(tmp_path / "d")
    from_list = read_trials([tmp_path / "d" / "a.csv", tmp_path / "d" / "b.jsonl.zst"])
    assert from_dir.sizes[S.TRIAL] == len(frame)
    xr.testing.assert_identical(_strip_attrs(from_dir), _strip_attrs(from_list))
    assert from_dir.attrs[S.ATTR_ROWS_READ] == len(frame)


def test_netcdf_round_trip_is_lossless(small_plateau, tmp_path):
    ds, _ = small_plateau
    got = read_trials(write_table(ds, tmp_path / "t.parquet"))
    back = open_trials(write_trials(got, tmp_path / "t.nc"))
    xr.testing.assert_identical(back, got)
    assert back[S.GRADED].dtype == bool


def test_extra_columns_are_kept(tmp_path):
    frame = pd.DataFrame(
        {
            "run": ["r"] * 3,
            "step": [0, 0, 1],
            "instance_id": ["a", "b", "a"],
            "sample": [0, 0, 0],
            "graded": ["TRUE", "false", "1"],
            "reward": [0.5, 0, 1.0],
            "turns": [3, 5, 4],
            "note": ["x", "y", ""],
            "arm": ["base"] * 3,
        }
    )
    got = read_trials(write_table(frame, tmp_path / "t.csv"))
    assert got["turns"].values.tolist() == [3.0, 5.0, 4.0]
    assert got["note"].values.tolist() == ["x", "y", ""]
    assert got[S.GRADED].values.tolist() == [True, False, True]
    assert got.sizes[S.LEVEL] == 0
    assert got[S.ARM].values.tolist() == ["base"] * 3


def test_custom_level_names_follow_the_pattern(tmp_path):
    frame = pd.DataFrame(
        {
            "run": ["r"] * 2,
            "step": [0, 1],
            "instance_id": ["a", "a"],
            "sample": [0, 0],
            "graded": [1, 1],
            "reward": [0.5, 1.0],
            "line_range_f1": [0.5, 1.0],
            "file_f1": [1.0, 1.0],
        }
    )
    got = read_trials(write_table(frame, tmp_path / "t.csv"))
    assert got[S.LEVEL].values.tolist() == ["file", "line_range"]
    assert np.isnan(got[S.PRECISION].values).all()


def test_unsupported_suffix_and_missing_path(tmp_path):
    with pytest.raises(ValueError, match="unsupported file type"):
        table_format(tmp_path / "t.xlsx")
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_trials(tmp_path / "missing.csv")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_blocks_and_batches_read_as_one_table(small_plateau, tmp_path, monkeypatch, fmt):
    """A file read in many blocks (CSV) or batches (parquet) gives the Dataset, accounting,
    problems and rejected rows of one read as a whole; row locators continue across them."""
    from saturation import io as sio
    from saturation import streams
    from saturation.io import read_trials_report

    ds, _ = small_plateau
    frame = trials_to_frame(ds)
    frame.loc[[3, 250, 251], "step"] = -1  # bad rows in different blocks (384 rows in all)
    graded = np.flatnonzero(frame["graded"].to_numpy())
    frame.loc[graded[-5], "reward"] = np.inf  # a graded row: a non-finite reward
    frame = pd.concat([frame, frame.iloc[[10]]], ignore_index=True)  # a duplicate trial, last row
    path = tmp_path / f"t.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)

    def read():
        got, valid = read_trials_report(path, strict=False)
        return got, valid.accounting, [str(p) for p in valid.problems], valid.rejected

    whole = read()
    monkeypatch.setattr(streams, "BLOCK_CHARS", 2000)
    monkeypatch.setattr(sio, "PARQUET_BATCH_ROWS", 37)
    blocks = read()
    xr.testing.assert_identical(blocks[0], whole[0])
    assert blocks[1] == whole[1] and whole[1]["rejected"] == 5
    assert sorted(blocks[2]) == sorted(whole[2])
    pd.testing.assert_frame_equal(blocks[3].sort_values("location"), whole[3].sort_values("location"))
    unit = "line" if fmt == "csv" else "row"
    offset = 2 if fmt == "csv" else 1  # the header is line 1
    assert f"{unit} {250 + offset}" in set(whole[3]["location"])
    assert any(f"first seen at {path} {unit} {10 + offset}" in p for p in whole[2])
