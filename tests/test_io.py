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
