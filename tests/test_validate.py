"""Every bad input gets a message naming file, row/line and column; nothing is dropped silently."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import zstandard

from saturation import schema as S
from saturation.io import read_trials
from saturation.validate import TrialValidationError

HEADER = "run,step,instance_id,sample,graded,reward,file_f1,file_n_pred,file_n_gold,file_n_tp\n"
GOOD = "r,0,a,0,true,1.0,1.0,1,1,1\n"


def _csv(tmp_path, body: str, name: str = "t.csv"):
    path = tmp_path / name
    path.write_text(HEADER + body)
    return path


def _error(path) -> str:
    with pytest.raises(TrialValidationError) as info:
        read_trials(path)
    return str(info.value)


@pytest.mark.parametrize(
    ("row", "column", "fragment"),
    [
        ("r,x,a,0,true,1,1,1,1,1", "step", "is not an integer"),
        ("r,-3,a,0,true,1,1,1,1,1", "step", "is negative"),
        ("r,1.5,a,0,true,1,1,1,1,1", "step", "is not an integer"),
        ("r,0,a,-1,true,1,1,1,1,1", "sample", "is negative"),
        ("r,0,a,0,yes,1,1,1,1,1", "graded", "is not a boolean"),
        ("r,0,a,0,true,nan,1,1,1,1", "reward", "non-finite reward"),
        ("r,0,a,0,true,inf,1,1,1,1", "reward", "non-finite reward"),
        ("r,0,a,0,true,abc,1,1,1,1", "reward", "is not a number"),
        ("r,0,a,0,true,1,1.2,1,1,1", "file_f1", "outside [0, 1]"),
        ("r,0,a,0,true,1,-0.1,1,1,1", "file_f1", "outside [0, 1]"),
        ("r,0,a,0,true,1,1,-1,1,1", "file_n_pred", "negative count"),
        ("r,0,a,0,true,1,1,1,2,2.5", "file_n_tp", "is not an integer"),
        ("r,0,a,0,true,1,1,1,2,2", "file_n_tp", "n_tp=2 exceeds n_pred=1"),
        ("r,0,a,0,false,0,0.5,,,", "file_f1", "on an ungraded row"),
        (",0,a,0,true,1,1,1,1,1", "run", "missing value"),
    ],
)
def test_bad_value_names_file_line_and_column(tmp_path, row, column, fragment):
    path = _csv(tmp_path, GOOD + row + "\n")
    msg = _error(path)
    assert f"{path}: line 3: column '{column}'" in msg
    assert fragment in msg


def test_graded_accepts_any_case(tmp_path):
    body = "".join(f"r,{i},a,0,{g},0,,,,\n" for i, g in enumerate(["TRUE", "False", "1", "0", "tRuE"]))
    ds = read_trials(_csv(tmp_path, body))
    assert ds[S.GRADED].values.tolist() == [True, False, True, False, True]


def test_all_problems_are_collected_and_raised_once(tmp_path):
    path = _csv(tmp_path, GOOD + "r,x,a,0,maybe,1,2,1,1,1\n" + "r,0,a,-1,true,1,1,1,1,1\n")
    with pytest.raises(TrialValidationError) as info:
        read_trials(path)
    problems = info.value.problems
    assert {p.column for p in problems} == {"step", "graded", "file_f1", "sample"}
    assert {p.location for p in problems} == {"line 3", "line 4"}
    assert "4 problem(s)" in str(info.value)


def test_missing_required_column(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("run,step,instance_id,graded,reward\nr,0,a,true,1\n")
    assert f"{path}: missing required column(s) 'sample'" in _error(path)


def test_empty_files(tmp_path):
    (tmp_path / "e.csv").write_text("")
    assert "e.csv: empty file" in _error(tmp_path / "e.csv")
    (tmp_path / "h.csv").write_text(HEADER)
    assert "h.csv: empty file (header only" in _error(tmp_path / "h.csv")
    (tmp_path / "e.jsonl").write_text("\n\n")
    assert "e.jsonl: empty file" in _error(tmp_path / "e.jsonl")


def test_duplicate_trials_name_both_places(tmp_path):
    path = _csv(tmp_path, GOOD + "r,1,a,0,true,1,1,1,1,1\n" + GOOD)
    msg = _error(path)
    assert f"{path}: line 4: duplicate trial" in msg
    assert f"first seen at {path} line 2" in msg


def test_duplicates_across_files(tmp_path):
    a = _csv(tmp_path, GOOD, "a.csv")
    b = _csv(tmp_path, GOOD, "b.csv")
    with pytest.raises(TrialValidationError, match="duplicate trial"):
        read_trials([a, b])


def test_same_key_in_train_and_eval_is_not_a_duplicate(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("run,phase,step,instance_id,sample,graded,reward\nr,train,0,a,0,1,1\nr,eval,0,a,0,1,1\n")
    assert read_trials(path).sizes[S.TRIAL] == 2


def test_phase_must_be_train_or_eval(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("run,phase,step,instance_id,sample,graded,reward\nr,test,0,a,0,1,1\n")
    assert f"{path}: line 2: column 'phase'" in _error(path)


def test_a_table_without_phase_beside_an_eval_table_is_the_training_phase(tmp_path):
    """A training table with no phase column read with an eval table (the way a trainer
    writes them): its rows are 'train', selectable by --phase train and the default."""
    from saturation.aggregate import select_phase

    train = _csv(tmp_path, "r,0,a,0,true,0.5,0.5,1,1,1\nr,1,a,0,true,0.7,0.7,1,1,1\n", "train.csv")
    evals = tmp_path / "eval.csv"
    evals.write_text("run,phase,step,instance_id,sample,graded,reward\nr,eval,1,a,0,1,1\nr,,1,b,0,1,0\n")
    ds = read_trials([train, evals])
    assert sorted(ds[S.PHASE].to_numpy().tolist()) == ["eval", "train", "train", "train"]  # the blank cell too
    kept = select_phase(ds)
    assert kept.sizes[S.TRIAL] == 3 and kept.attrs["phase"] == "train"
    assert select_phase(ds, "eval").sizes[S.TRIAL] == 1


def test_corrupt_and_truncated_zstd(tmp_path):
    data = zstandard.ZstdCompressor().compress((HEADER + GOOD * 50).encode())
    trunc = tmp_path / "trunc.csv.zst"
    trunc.write_bytes(data[: len(data) // 2])
    assert "trunc.csv.zst: truncated zstd stream" in _error(trunc)
    corrupt = tmp_path / "corrupt.csv.zst"
    corrupt.write_bytes(b"this is not zstd at all")
    assert "corrupt.csv.zst: corrupt zstd stream" in _error(corrupt)


def test_malformed_json_line(tmp_path):
    path = tmp_path / "t.jsonl"
    good = json.dumps({"run": "r", "step": 0, "instance_id": "a", "sample": 0, "graded": True, "reward": 1.0})
    path.write_text(good + "\n{not json\n" + "[1, 2]\n")
    msg = _error(path)
    assert f"{path}: line 2: malformed JSON" in msg
    assert f"{path}: line 3: expected a JSON object" in msg


def test_json_booleans_and_numbers(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [
        {"run": "r", "step": 0, "instance_id": "a", "sample": 0, "graded": True, "reward": 1.0},
        {"run": "r", "step": 1, "instance_id": "a", "sample": 0, "graded": 0, "reward": 0},
        {"run": "r", "step": True, "instance_id": "a", "sample": 1, "graded": "x", "reward": 0},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    msg = _error(path)
    assert f"{path}: line 3: column 'step'" in msg
    assert f"{path}: line 3: column 'graded'" in msg


def test_csv_wrong_field_count(tmp_path):
    path = _csv(tmp_path, GOOD + "r,1,a,0,true\n")
    assert f"{path}: line 3: expected 10 fields, found 5" in _error(path)


def test_lenient_mode_accounts_for_every_row(tmp_path):
    body = GOOD + "r,x,a,0,true,1,1,1,1,1\n" + "r,1,a,0,true\n" + "r,2,a,0,false,0,,,,\n" + GOOD
    path = _csv(tmp_path, body)
    rejects = tmp_path / "rejects.csv"
    ds = read_trials(path, strict=False, rejects=rejects)
    assert ds.attrs[S.ATTR_ROWS_READ] == 5
    assert ds.attrs[S.ATTR_ROWS_KEPT] == 2
    assert ds.attrs[S.ATTR_ROWS_UNGRADED] == 1
    assert ds.attrs[S.ATTR_ROWS_REJECTED] == 3
    side = pd.read_csv(rejects)
    assert side["location"].tolist() == ["line 4", "line 3", "line 6"]
    assert "is not an integer" in side.loc[side.location == "line 3", "reasons"].item()
    assert "duplicate trial" in side.loc[side.location == "line 6", "reasons"].item()


def test_lenient_mode_records_file_level_problems(tmp_path):
    good = _csv(tmp_path, GOOD, "good.csv")
    bad = tmp_path / "bad.csv.zst"
    bad.write_bytes(b"garbage")
    ds = read_trials([good, bad], strict=False)
    assert ds.attrs[S.ATTR_ROWS_KEPT] == 1
    unreadable = json.loads(ds.attrs["file_problems"])
    assert len(unreadable) == 1
    assert "bad.csv.zst: corrupt zstd stream" in unreadable[0]


def test_a_cell_reads_as_the_same_number_whatever_its_column_holds():
    """Text typed as ``str`` is cast by arrow when every cell is a number, else read by
    ``pd.to_numeric``: both read each of these cells the same way, alone or beside a cell
    that is not a number (the result of a cell never depends on its neighbours)."""
    import pandas as pd

    from saturation.validate import RawTable, validate_trials

    cells = ["1", " 1", "1_0", "1e3", "+1", ".5", "5.", "inf", "-Infinity", "nan", "NaN", "1e400", "0x10", "\u0661"]

    def reward(cell, beside, dtype):
        frame = pd.DataFrame(
            {"run": ["r", "r"], "step": ["0", "1"], "instance_id": ["a", "a"], "sample": ["0", "0"]}
            | {"graded": ["true", "true"], "reward": [cell, beside]},
            dtype=dtype,
        )
        valid = validate_trials([RawTable("t.csv", frame, ["line 2", "line 3"])], strict=False)
        kept = valid.frame.loc[valid.frame["step"] == 0, "reward"]
        return float(kept.iloc[0]) if len(kept) else "rejected"

    for cell in cells:
        results = {reward(cell, beside, dtype) for beside in ("0.5", "x") for dtype in (object, str)}
        results = {"nan" if isinstance(r, float) and r != r else r for r in results}
        assert len(results) == 1, (cell, results)
