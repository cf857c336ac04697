"""Generated hostile input over the documented formats (issue 18): the accounting identity
holds on every case, nothing raises but the documented errors, time stays bounded, and the
inputs are never modified."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from pandas import testing as pd_testing

from saturation.io import read_trials_report
from saturation.validate import TrialValidationError

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
HEADER = "run,step,instance_id,sample,graded,reward,file_f1,file_n_pred,file_n_tp"

#: field values a hostile table may hold
FIELD = st.one_of(
    st.sampled_from(
        [
            "r",
            "a",
            "0",
            "1",
            "true",
            "false",
            "nan",
            "inf",
            "-1",
            "1e20",
            str(2**63 + 5),
            "",
            '"',
            '"a,b"',
            "x\x00y",
            "1.5",
            "0.25",
            " 2 ",
            "9" * 300,
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)
ROW = st.lists(FIELD, min_size=0, max_size=11).map(lambda fields: ",".join(f.replace("\n", " ") for f in fields))


def _read(path):
    """Lenient read; the only exception allowed is 'no valid rows'."""
    try:
        ds, valid = read_trials_report([path], strict=False)
    except TrialValidationError as exc:
        assert "no valid rows" in str(exc) or "empty file" in str(exc)
        return None
    acc = valid.accounting
    assert acc["read"] == acc["kept"] + acc["rejected"]
    assert ds.sizes.get("trial", 0) == acc["kept"]
    return valid


@SETTINGS
@given(rows=st.lists(ROW, max_size=30), crlf=st.booleans())
def test_csv_rows_are_all_accounted_for(tmp_path, rows, crlf):
    path = tmp_path / "t.csv"
    sep = "\r\n" if crlf else "\n"
    text = sep.join([HEADER, *rows]) + sep
    path.write_bytes(text.encode())
    before = path.read_bytes()
    t0 = time.perf_counter()
    valid = _read(path)
    assert time.perf_counter() - t0 < 10
    n_lines = sum(1 for r in rows if r.strip())
    if valid is not None:  # one row per non-blank line after the header, kept or rejected
        assert valid.accounting["read"] == n_lines
    assert path.read_bytes() == before


JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**25), max_value=10**25),
        st.floats(allow_nan=True),
        st.text(max_size=8),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
RECORD = st.fixed_dictionaries(
    {
        "run": st.sampled_from(["r", "q", "", 3]),
        "step": st.one_of(st.integers(-2, 60), st.just(10**20), JSON_VALUE),
        "instance_id": st.sampled_from(["a", "b", "", None]),
        "sample": st.integers(-1, 3),
        "graded": st.one_of(st.booleans(), st.sampled_from(["yes", 1, None])),
        "reward": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3)),
    },
    optional={"f1": JSON_VALUE, "_x": JSON_VALUE, "level": JSON_VALUE, "file_n_tp": st.integers(-1, 5)},
)
LINE = st.one_of(
    RECORD.map(lambda r: json.dumps(r)),
    st.text(max_size=30).map(lambda t: t.replace("\n", " ")),
    st.just("[" * 5000),
    st.just('{"step": ' + "1" * 5000 + "}"),
)


@SETTINGS
@given(lines=st.lists(LINE, max_size=25))
def test_jsonl_lines_are_all_accounted_for(tmp_path, lines):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    valid = _read(path)
    if valid is not None:
        assert valid.accounting["read"] == sum(1 for line in lines if line.strip())


FOREIGN = st.one_of(
    st.text(max_size=40).map(lambda t: t.replace("\n", " ").replace("\r", " ")),
    st.sampled_from(
        [
            "Step 9:",
            "Step 2: ",
            " }",
            "{'foo': 1}",
            " 'hello world'",
            '{"a": 1}',
            "  warnings.warn(",
            "Step 3:" + " " * 500 + "x",
            "\x1b[31m(other pid=5) Step 1:\x1b[0m",
            "[repeated 3x across cluster]",
        ]
    ),
)


@SETTINGS
@given(noise=st.lists(st.tuples(st.integers(0, 400), FOREIGN, st.booleans()), max_size=12))
def test_console_blocks_are_parsed_or_reported(tmp_path, noise):
    """Real tracker blocks with foreign lines from other actors (and, flagged, from the
    trainer's own source) inserted anywhere: every step is parsed exactly or a problem
    names it; nothing raises; time is bounded."""
    from saturation.skyrl import read_console_log
    from skyrl_fixtures import ray_lines
    from test_skyrl import _blocks, _expected

    lines = "".join(_blocks(4)).splitlines(keepends=True)
    for at, text, same in sorted(noise, key=lambda x: -x[0]):
        foreign = ray_lines(text) if same else ray_lines(text, "AsyncVLLMInferenceEngine", 3001, "10.0.0.2")
        lines.insert(min(at, len(lines)), foreign or "\n")
    path = tmp_path / "f.log"
    path.write_text("".join(lines))
    t0 = time.perf_counter()
    log = read_console_log(path)
    assert time.perf_counter() - t0 < 5
    expected = _expected(4)
    acc = log.accounting()
    assert acc["lines"] == sum(line.count("\n") for line in lines)
    for step, values in expected.items():
        if log.steps.get(step, {}) == values or log.steps.get(step, {}).items() >= values.items():
            continue
        assert log.problems, (step, log.steps.get(step), noise)


@pytest.mark.parametrize("seed", range(3))
def test_eval_dump_rows_are_all_accounted_for(tmp_path, seed):
    import random

    from saturation.ingest import ingest_runs

    rng = random.Random(seed)
    d = tmp_path / "run" / "dumped_evals" / "global_step_1_evals"
    d.mkdir(parents=True)
    pool = [
        json.dumps({"input_prompt": "p", "score": 1.0, "env_extras": {"instance_id": "t"}}),
        json.dumps({"score": [0.0, 1e308, 1e308]}),
        json.dumps({"score": "1"}),
        json.dumps({"score": None}),
        '{"score": ' + "7" * 5000 + "}",
        "[" * 3000,
        "not json",
        json.dumps([1, 2]),
        json.dumps({"score": 1.0, "env_extras": {"file_changes": "x.py"}}),
        json.dumps({"score": 1.0, "output_response": "<tool_call>" * 50, "env_extras": {"file_changes": []}}),
    ]
    lines = [rng.choice(pool) for _ in range(200)]
    (d / "x.jsonl").write_text("\n".join(lines) + "\n")
    res = ingest_runs([tmp_path / "run"], strict=False, progress=False)
    acc = res.accounting
    assert acc["rows_read"] == 200 == acc["rows_kept"] + acc["rows_rejected"] + acc["rows_superseded"]


# ------------------------------------------------------------------ trajectories and wandb
#: how a codescout trajectory can be damaged: a field replaced by any JSON value or removed,
#: the file cut short (plain or zstd), or bytes overwritten
TRAJECTORY_FIELDS = (
    "instance_id",
    "target",
    "total_reward",
    "reward_dict",
    "parsed_final_message",
    "raw_final_message",
    "messages",
    "metrics_dict",
)
DAMAGE = st.one_of(
    st.tuples(st.just("replace"), st.sampled_from(TRAJECTORY_FIELDS), JSON_VALUE),
    st.tuples(st.just("drop"), st.sampled_from(TRAJECTORY_FIELDS), st.none()),
    st.tuples(st.just("cut"), st.floats(0, 1), st.booleans()),
    st.tuples(st.just("flip"), st.floats(0, 1), st.binary(min_size=1, max_size=8)),
)


@SETTINGS
@given(damage=st.lists(DAMAGE, min_size=1, max_size=3), zst=st.booleans())
def test_damaged_trajectories_are_kept_or_reported(tmp_path, damage, zst):
    """Trajectories written as codescout writes them (``json.dump(result_dict, f, indent=2)``,
    zstd for ``.zst``), one of them damaged: every file is one row (kept, ungraded or
    rejected with a problem naming it), nothing raises, time is bounded, inputs unchanged."""
    import io as _io

    import zstandard

    from saturation.ingest import ingest_runs
    from skyrl_fixtures import trajectory, write_trajectory

    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "run"  # one directory per example
    d = root / "trajectories" / "step_1" / "train"
    ext = ".json.zst" if zst else ".json"
    for rep in (0, 1):
        write_trajectory(d / f"repo__a-1_{rep}{ext}", trajectory("repo__a-1", "perfect", rep=rep, tokens=50))
    record: dict = trajectory("repo__b-2", "partial", tokens=50)
    raw: bytes | None = None
    for kind, where, what in damage:
        if kind in ("replace", "drop") and raw is None:
            if kind == "replace":
                record[where] = what
            else:
                record.pop(where, None)
            continue
        if raw is None:
            buf = _io.StringIO()
            json.dump(record, buf, indent=2)
            raw = buf.getvalue().encode()
        at = int(where * len(raw)) if kind in ("cut", "flip") else 0
        if kind == "cut":
            raw = raw[:at]
        elif kind == "flip":
            raw = raw[:at] + what + raw[at + len(what) :]
    target = d / f"repo__b-2_0{ext}"
    if raw is None:
        write_trajectory(target, record)
    else:
        target.write_bytes(zstandard.ZstdCompressor().compress(raw) if zst else raw)
    before = {p: p.read_bytes() for p in d.iterdir()}
    t0 = time.perf_counter()
    res = ingest_runs([root], strict=False, progress=False)
    assert time.perf_counter() - t0 < 10
    acc = res.accounting
    assert acc["rows_read"] == 3 == acc["rows_kept"] + acc["rows_rejected"] + acc["rows_superseded"]
    event(f"kept {acc['rows_kept']}, rejected {acc['rows_rejected']}")
    if acc["rows_rejected"]:
        assert any("repo__b-2_0" in p for p in res.problems), res.problems
    assert {p: p.read_bytes() for p in d.iterdir()} == before


@pytest.fixture(scope="module")
def wandb_history(tmp_path_factory):
    """One real ``run-<id>.wandb`` file, written by wandb itself (skyrl_fixtures)."""
    pytest.importorskip("wandb")  # the test extra installs it
    from skyrl_fixtures import wandb_run_dir

    root = wandb_run_dir(tmp_path_factory.mktemp("wandb") / "run")
    path = next(root.glob("wandb/offline-run-*/run-*.wandb"))
    return path.relative_to(root), path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(["cut", "flip", "insert"]), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
        min_size=1,
        max_size=3,
    )
)
def test_damaged_wandb_histories_are_read_or_reported(tmp_path, wandb_history, edits):
    """A real wandb history cut, overwritten or with bytes inserted anywhere (the header,
    chunk headers, CRCs, protobuf payloads): without a problem naming the file every step
    is read with the logged values; nothing raises; time is bounded; the file is unchanged."""
    import math

    from saturation.ingest import ingest_runs
    from skyrl_fixtures import wandb_expected

    rel, original = wandb_history
    data = original.read_bytes()
    for kind, where, what in edits:
        at = int(where * len(data))
        data = {
            "cut": data[:at],
            "flip": data[:at] + what + data[at + len(what) :],
            "insert": data[:at] + what + data[at:],
        }[kind]
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "run"  # one directory per example
    path = root / rel
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    t0 = time.perf_counter()
    res = ingest_runs([root], strict=False, progress=False)
    assert time.perf_counter() - t0 < 10
    acc = res.accounting["dirs"][0]
    assert acc["wandb_runs"] == 1
    event("reported" if res.problems else "read in full")
    if res.problems:
        assert any(path.name in p for p in res.problems), res.problems
    else:  # undamaged where it matters: the steps and values as logged
        expected = wandb_expected()
        assert acc["wandb_runs_read"][0]["steps"] == 4
        got = res.metrics["policy_entropy"].values[0].tolist()
        assert got == [expected[s]["policy/policy_entropy"] for s in sorted(expected)]
        kl = res.metrics["policy_policy_kl"].sel(step=2).item()
        assert math.isnan(kl)
    assert path.read_bytes() == data


#: rows the block reader parses in bulk (plain) mixed with every kind it must hand to the
#: line-by-line reader (quotes, wrong field counts, blank and whitespace lines, stray
#: carriage returns, NUL, duplicates, values Python reads and pyarrow does not)
GOOD_ROW = st.builds(
    lambda run, step, inst, sample, graded, reward, f1: f"{run},{step},{inst},{sample},{graded},{reward},{f1},1,1",
    st.sampled_from(["r", "q"]),
    st.integers(0, 3),
    st.sampled_from(["a", "b", "c"]),
    st.integers(0, 2),
    st.sampled_from(["true", "false", "1", "0", "True", " true"]),
    st.sampled_from(["0.5", "1", "", " 1", "1_0", "nan", "inf", "x", "1e-3", "\u0661"]),
    st.sampled_from(["0.25", "", "2", "-0.1", "0.5"]),
)
MIXED_ROW = st.one_of(
    GOOD_ROW,
    GOOD_ROW,
    GOOD_ROW,
    ROW,
    GOOD_ROW.map(lambda r: r.replace(",a,", ',"a",', 1)),
    GOOD_ROW.map(lambda r: r + "\r"),
    GOOD_ROW.map(lambda r: r.replace(",", ",\r", 1)),
    st.sampled_from(["", "   ", "\t", "\ufeff" + HEADER]),
)


@SETTINGS
@given(rows=st.lists(MIXED_ROW, max_size=40), block=st.sampled_from([1, 64, 300, 1 << 23]), crlf=st.booleans())
def test_block_reader_reads_csv_as_the_line_reader_does(tmp_path, rows, block, crlf):
    """The block reader (plain lines through pyarrow, in blocks of ``block`` characters) and
    the line-by-line reader give the same Dataset, accounting, problems and rejected rows."""
    import xarray as xr

    from saturation import io as sio
    from saturation import streams

    path = tmp_path / "t.csv"
    sep = "\r\n" if crlf else "\n"
    path.write_bytes((sep.join([HEADER, *rows]) + sep).encode())

    def read():
        try:
            ds, valid = read_trials_report([path], strict=False)
        except TrialValidationError as exc:
            return None, sorted(str(p) for p in exc.problems), None, None
        rejected = valid.rejected.sort_values(["location", "reasons"]).reset_index(drop=True)
        return ds, sorted(str(p) for p in valid.problems), valid.accounting, rejected

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(streams, "BLOCK_CHARS", block)
        fast = read()
        mp.setattr(sio._CsvBlock, "for_header", classmethod(lambda cls, source, header: None))
        mp.setattr(streams, "BLOCK_CHARS", 1 << 23)
        slow = read()
    finally:
        mp.undo()
    assert fast[1] == slow[1]
    assert fast[2] == slow[2]
    if slow[0] is None:
        assert fast[0] is None
        return
    xr.testing.assert_identical(fast[0], slow[0])
    pd_testing.assert_frame_equal(fast[3], slow[3])
    event(f"kept {slow[2]['kept']} rejected {slow[2]['rejected']}")


# ------------------------------------------------------------------ issue 41: spec files and .nc inputs
SPEC_LINES = [
    line for line in (Path(__file__).parents[1] / "models" / "swesmith-plateau.toml").read_text().splitlines()
]
#: values a hostile spec may give any key
SPEC_VALUE = st.one_of(
    st.sampled_from(
        [
            '""',
            '"../victim"',
            '"/etc/passwd"',
            '"a\\nb"',
            "nan",
            "inf",
            "-1",
            "0",
            "1e308",
            "true",
            "[]",
            "{}",
            '"embedded:nope"',
            '["x", 1]',
            str(2**64),
            '"\\u0000"',
            '"$\\\\input{x}"',
        ]
    ),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=False).map(lambda f: "nan" if f != f else repr(f)),
    st.text(max_size=20).map(json.dumps),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(SPEC_LINES) - 1), st.sampled_from(["value", "drop", "dup", "junk"]), SPEC_VALUE),
        min_size=1,
        max_size=4,
    )
)
def test_hostile_spec_files_load_or_say_what_is_wrong_naming_the_file(tmp_path, edits):
    """A real spec with values replaced (hostile strings, non-finite and huge numbers, wrong
    types), lines dropped, repeated or replaced by junk: it loads to a typed config, or the
    one error is a SpecError whose every line names the spec file; never another exception,
    and fast (no data is read)."""
    from saturation.spec import SpecError, analysis_config, load_spec

    lines = list(SPEC_LINES)
    for at, how, value in edits:
        line = lines[at]
        if how == "value" and "=" in line and not line.lstrip().startswith("#"):
            lines[at] = line.split("=", 1)[0] + "= " + value
        elif how == "drop":
            lines[at] = ""
        elif how == "dup":
            lines.insert(at, line)
        elif how == "junk":
            lines[at] = value
    path = tmp_path / "fuzzed.toml"
    path.write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    try:
        analysis_config(load_spec(path))
        event("loaded")
    except SpecError as exc:
        event("refused")
        assert all(str(path) in line for line in str(exc).splitlines()[1:] if line.strip()), str(exc)
    assert time.perf_counter() - t0 < 5


@pytest.fixture(scope="module")
def small_trials_nc(tmp_path_factory):
    """A small trial Dataset as write_trials writes it, and its bytes."""
    from saturation.io import write_trials
    from saturation.simulate import PlateauSpec, simulate_plateau

    ds, _ = simulate_plateau(PlateauSpec(n_steps=5, prompts_per_step=3, samples_per_prompt=2), seed=1)
    path = write_trials(ds, tmp_path_factory.mktemp("nc") / "t.nc")
    return ds, path.read_bytes()


NC_VALUE = st.sampled_from([-7.0, -1.0, 0.0, 0.5, 1.0, 5.0, float("nan"), float("inf"), -float("inf"), 1e300, 2.0**60])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(
        st.tuples(
            st.sampled_from(["step", "sample", "reward", "f1", "graded", "attr"]), st.integers(0, 10**6), NC_VALUE
        ),
        max_size=4,
    ),
    cut=st.one_of(st.none(), st.integers(1, 4000)),
)
def test_hostile_nc_inputs_are_read_validated_or_refused_naming_the_file(tmp_path, small_trials_nc, edits, cut):
    """A trial .nc with values a table would reject (negative or non-integer steps, F1 out of
    [0, 1], non-finite rewards, lying row counts) or cut short: open_trials returns a Dataset
    that breaks no rule of the tables, or raises a ValueError naming the file; nothing else."""
    from saturation.io import open_trials, trial_dataset_problems, write_trials

    ds, data = small_trials_nc
    path = tmp_path / "t.nc"
    if cut is not None:
        path.write_bytes(data[: max(0, len(data) - cut)])
    else:
        ds = ds.copy(deep=True)
        for var, index, value in edits:
            if var == "attr":
                ds.attrs[["rows_read", "rows_kept", "rows_ungraded"][index % 3]] = (
                    int(min(abs(value), 2**40)) if value == value and abs(value) != float("inf") else 0
                )
                continue
            arr = ds[var].to_numpy().copy()
            flat = arr.reshape(-1)
            i = index % flat.size
            if var in ("step", "sample"):
                flat[i] = int(value) if value == value and abs(value) < 2**62 else -1
            elif var == "graded":
                flat[i] = bool(value == value and value > 0)
            else:
                flat[i] = value
            ds[var] = ds[var].copy(data=arr)
        write_trials(ds, path)
    t0 = time.perf_counter()
    try:
        got = open_trials(path)
        event("read")
        assert trial_dataset_problems(got, str(path)) == []
    except ValueError as exc:  # TrialValidationError included
        event("refused")
        assert str(path) in str(exc)
    assert time.perf_counter() - t0 < 10
