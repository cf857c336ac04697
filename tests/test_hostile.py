"""Hostile input and faults (issue 18): nothing lost, nothing overwritten, no tracebacks,
bounded cost. Each case is a regression test; test_fuzz.py adds generated inputs."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zstandard

from saturation.cli import EXIT_DATA, EXIT_NOT_CONVERGED, EXIT_OK, EXIT_USAGE, main
from saturation.io import read_trials_report
from saturation.validate import TrialValidationError

HEADER = "run,step,instance_id,sample,graded,reward"


def _rows(n: int, start: int = 0) -> list[str]:
    return [f"r,{i // 10},i{i % 10},0,true,{(i % 7) / 7:.3f}" for i in range(start, start + n)]


def _lenient(path):
    ds, valid = read_trials_report([path], strict=False)
    acc = valid.accounting
    assert acc["read"] == acc["kept"] + acc["rejected"]
    return ds, valid


# ------------------------------------------------------------------ rows never lost
def test_a_huge_csv_field_is_one_rejected_row(tmp_path):
    rows = _rows(20)
    rows[5] = "r,0,i5," + "9" * 200_000 + ",true,1"
    path = tmp_path / "t.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    _, valid = _lenient(path)
    assert valid.accounting == {"read": 20, "kept": 19, "ungraded": 0, "rejected": 1}
    assert any(p.location == "line 7" and "field larger" in p.message for p in valid.problems)


def test_a_stray_quote_is_one_rejected_row_with_its_own_line(tmp_path):
    rows = _rows(200)
    rows[10] = 'r,1,"i0,0,true,1'  # line 12
    path = tmp_path / "t.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    _, valid = _lenient(path)
    assert valid.accounting["read"] == 200 and valid.accounting["rejected"] == 1
    assert [p.location for p in valid.problems] == ["line 12"]
    assert main(["ingest", str(path), "-o", str(tmp_path / "o.nc"), "--lenient"]) == 0


def test_a_5000_digit_integer_in_jsonl_and_eval_dumps(tmp_path):
    lines = [
        json.dumps({"run": "r", "step": i, "instance_id": "a", "sample": 0, "graded": True, "reward": 1.0})
        for i in range(5)
    ]
    lines[2] = '{"run": "r", "step": ' + "1" * 5000 + ', "instance_id": "a", "sample": 0, "graded": true}'
    lines[3] = "[" * 100_000 + "]" * 100_000  # nesting deep enough for a RecursionError
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    _, valid = _lenient(path)
    assert valid.accounting == {"read": 5, "kept": 3, "ungraded": 0, "rejected": 2}

    from saturation.ingest import ingest_runs

    d = tmp_path / "run" / "dumped_evals" / "global_step_1_evals"
    d.mkdir(parents=True)
    good = json.dumps(
        {
            "input_prompt": "p",
            "output_response": "",
            "score": 1.0,
            "data_source": "x",
            "env_extras": {"instance_id": "t"},
        }
    )
    (d / "x.jsonl").write_text("\n".join([good, '{"score": ' + "7" * 5000 + "}", "[" * 100_000, good]) + "\n")
    res = ingest_runs([tmp_path / "run"], strict=False, progress=False)
    acc = res.accounting
    assert (acc["rows_read"], acc["rows_kept"], acc["rows_rejected"]) == (4, 2, 2)
    assert sum("malformed JSON" in p for p in res.problems) == 2


@pytest.mark.parametrize("cut", [1, 4, 9])
def test_small_truncated_zst_files_are_reported(tmp_path, cut):
    data = zstandard.ZstdCompressor().compress(("\n".join([HEADER, *_rows(3)]) + "\n").encode())
    path = tmp_path / "t.csv.zst"
    path.write_bytes(data[:-cut])
    with pytest.raises(TrialValidationError, match=r"truncated|corrupt"):
        read_trials_report([path])
    from saturation.ingest import IngestError, ingest_runs

    d = tmp_path / "run" / "dumped_evals" / "global_step_1_evals"
    d.mkdir(parents=True)
    line = json.dumps({"input_prompt": "p", "score": 1.0, "env_extras": {"instance_id": "t"}}) + "\n"
    (d / "x.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(line.encode())[:-cut])
    with pytest.raises(IngestError, match=r"truncated|corrupt"):
        ingest_runs([tmp_path / "run"], progress=False)


# ------------------------------------------------------------------ values never silently wrong
@pytest.mark.parametrize("value", ["1e20", str(10**30), str(2**63 + 5), str(2**53)])
def test_integers_that_do_not_fit_are_rejected(tmp_path, value):
    path = tmp_path / "t.csv"
    path.write_text(f"{HEADER}\nr,{value},a,0,true,1\nr,1,a,{value},true,1\nr,2,a,0,true,1\n")
    with pytest.raises(TrialValidationError) as info:
        read_trials_report([path])
    text = str(info.value)
    assert f"{path}: line 2: column 'step'" in text and f"{path}: line 3: column 'sample'" in text
    assert "below 2^53" in text


def test_extra_columns_never_replace_trial_variables(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "run,step,instance_id,sample,graded,reward,file_f1,f1,_x,level,a/b,\nr,0,a,0,true,1,0.5,9,7,3,2,1\n"
    )
    ds, valid = read_trials_report([path])
    assert ds["f1"].sel(level="file").item() == 0.5
    assert valid.renamed == {"f1": "f1_extra", "_x": "x_x", "level": "level_extra", "a/b": "a_b", "": "unnamed"}
    assert list(ds["level"].values) == ["file"]
    assert ds["f1_extra"].item() == 9 and ds["x_x"].item() == 7 and ds["level_extra"].item() == 3
    assert json.loads(ds.attrs["renamed_columns"])["f1"] == "f1_extra"


def test_n_tp_cannot_exceed_n_pred_without_n_gold(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(f"{HEADER},file_n_pred,file_n_tp\nr,0,a,0,true,1,1,3\n")
    with pytest.raises(TrialValidationError, match="n_tp=3 exceeds n_pred=1"):
        read_trials_report([path])


def test_nul_characters_are_rejected_not_written(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(f"{HEADER}\nr\x00x,0,a,0,true,1\nr,1,a,0,true,1\n")
    _, valid = _lenient(path)
    assert valid.accounting["rejected"] == 1 and "NUL" in str(valid.problems[0])
    out = tmp_path / "o.nc"
    assert main(["ingest", str(path), "-o", str(out), "--lenient"]) == 0 and out.exists()


# ------------------------------------------------------------------ outputs never destroy inputs
@pytest.mark.parametrize("flag", ["-o", "--rejects", "--json"])
def test_an_output_that_is_an_input_is_refused(tmp_path, capsys, flag):
    path = tmp_path / "v.csv"
    path.write_text("\n".join([HEADER, *_rows(5)]) + "\n")
    before = path.read_bytes()
    argv = ["ingest", str(path), "--lenient"]
    argv += ["-o", str(path)] if flag == "-o" else ["-o", str(tmp_path / "o.nc"), flag, str(path)]
    assert main(argv) == EXIT_USAGE
    assert "would overwrite" in capsys.readouterr().err
    assert path.read_bytes() == before and not (tmp_path / "o.nc").exists()


def test_a_failed_or_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch):
    from saturation import files as io  # the one writer: its fault-injection seam
    from saturation.io import write_trials

    path = tmp_path / "t.csv"
    path.write_text("\n".join([HEADER, *_rows(5)]) + "\n")
    ds, _ = read_trials_report([path])
    out = tmp_path / "o.nc"
    out.write_bytes(b"previous result")

    def boom(file, data, target):  # SIGINT half-way through writing the file
        file.write(data[: len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(io, "_write_payload", boom)
    with pytest.raises(KeyboardInterrupt):
        write_trials(ds, out)
    assert out.read_bytes() == b"previous result"
    assert {p.name for p in tmp_path.iterdir()} == {"t.csv", "o.nc"}  # no partial file left


@pytest.mark.parametrize("where", ["dir", "missing_parent", "rejects_dir", "json_dir"])
def test_unwritable_outputs_are_one_line_errors_before_anything_is_written(tmp_path, capsys, where):
    path = tmp_path / "v.csv"
    path.write_text("\n".join([HEADER, *_rows(5), "r,x,a,0,true,1"]) + "\n")
    out = tmp_path / "o.nc"
    argv = {
        "dir": ["-o", str(tmp_path)],
        "missing_parent": ["-o", str(tmp_path / "no" / "such" / "o.nc")],
        "rejects_dir": ["-o", str(out), "--rejects", str(tmp_path / "no" / "r.csv")],
        "json_dir": ["-o", str(out), "--json", str(tmp_path / "no" / "r.json")],
    }[where]
    assert main(["ingest", str(path), "--lenient", *argv]) == EXIT_DATA
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def _fail_plain_writes(monkeypatch, err, only: str = ""):
    """Every file write through ``write_atomic`` fails with ``err`` (a full disk, no
    permission): the sandbox runs as root with free disk, so the fault is injected at the
    one place every output is written. ``only``: just the file of that name."""
    from saturation import files as io  # the one writer: its fault-injection seam

    real = io._write_payload

    def failing(file, data, target):
        if target.name.startswith(only):
            file.write(data[: len(data) // 2])  # a partial file exists when the fault strikes
            raise OSError(err, os.strerror(err))
        return real(file, data, target)

    monkeypatch.setattr(io, "_write_payload", failing)


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EACCES, errno.EROFS])
@pytest.mark.parametrize("what", ["-o", "--json", "--rejects"])
def test_a_full_disk_or_denied_write_is_one_line_and_keeps_the_old_file(tmp_path, capsys, monkeypatch, err, what):
    path = tmp_path / "v.csv"
    bad = ["r,x,a,0,true,1"] if what == "--rejects" else []  # else no rejects file is due
    path.write_text("\n".join([HEADER, *_rows(20), *bad]) + "\n")
    target = tmp_path / {"-o": "o.nc", "--json": "o.json", "--rejects": "r.csv"}[what]
    target.write_bytes(b"previous")
    argv = [
        "ingest",
        str(path),
        *(["--lenient"] if bad else []),
        "-o",
        str(target if what == "-o" else tmp_path / "o.nc"),
    ]
    argv += [what, str(target)] if what != "-o" else []
    _fail_plain_writes(monkeypatch, err, only=target.name)
    assert main(argv) == EXIT_DATA
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == f"error: could not write {target}: {os.strerror(err)}", lines
    assert not any("Traceback" in line for line in lines)
    assert target.read_bytes() == b"previous"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_a_failed_figure_or_report_write_keeps_nothing_half_written(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from saturation.plots import save_figure
    from saturation.tables import write_tables

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    (tmp_path / "f.pdf").write_bytes(b"old figure")
    _fail_plain_writes(monkeypatch, errno.ENOSPC)
    with pytest.raises(OSError, match=r"could not write .*f\.pdf: No space left on device"):
        save_figure(fig, tmp_path / "f")
    plt.close(fig)
    with pytest.raises(OSError, match=r"could not write .*t\.csv"):
        write_tables(pd.DataFrame({"a": [1]}), tmp_path / "t")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf"]
    assert (tmp_path / "f.pdf").read_bytes() == b"old figure"


def test_a_really_full_disk(tmp_path, capsys):
    """The real fault on a 256 KB tmpfs when this machine lets us mount one (root in the
    sandbox); HDF5 writing straight to a full disk used to crash the interpreter."""
    import shutil
    import subprocess

    mnt = tmp_path / "full"
    mnt.mkdir()
    if (
        shutil.which("mount") is None
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
    ):
        pytest.skip("cannot mount a small tmpfs here (not root); the injected faults above cover the code path")
    try:
        (mnt / "o.nc").write_bytes(b"previous")
        path = tmp_path / "v.csv"
        path.write_text(
            "\n".join([HEADER, *[f"r,{i // 50},i{i % 50},0,true,{i % 7 / 7:.4f}" for i in range(20000)]]) + "\n"
        )
        assert main(["ingest", str(path), "-o", str(mnt / "o.nc")]) == EXIT_DATA
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"error: could not write {mnt / 'o.nc'}: No space left on device"
        )
        assert sorted(p.name for p in mnt.iterdir()) == ["o.nc"]
        assert (mnt / "o.nc").read_bytes() == b"previous"
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# ------------------------------------------------------------------ bounded time and memory
@pytest.mark.parametrize("spaces", [3000, 200_000])
def test_runs_of_spaces_are_linear_time(tmp_path, spaces):
    from saturation.skyrl import read_console_log

    path = tmp_path / "s.log"
    path.write_text(f"Step 1:{' ' * spaces}x\n" * 20 + "Step 2: \n{'a': '1.0000'" + " " * spaces + "}\n")
    t0 = time.perf_counter()
    log = read_console_log(path)
    assert time.perf_counter() - t0 < 2.0
    assert log.steps == {2: {"a": 1.0}}


def test_a_log_without_newlines_is_bounded(tmp_path):
    from saturation.skyrl import read_console_log

    path = tmp_path / "n.log"
    path.write_bytes(b"x" * (40 << 20) + b"\nStep 3: \n{'a': 1}\n")
    t0 = time.perf_counter()
    log = read_console_log(path)
    assert time.perf_counter() - t0 < 5.0
    assert log.steps == {3: {"a": 1.0}} and log.overlong_lines == 1
    assert "line longer than" in log.problems[0] and log.problems[0].startswith(f"{path}:1:")


def test_decompression_bombs_stop_at_the_limit(tmp_path, monkeypatch):
    from saturation import streams, trajectory

    bomb = zstandard.ZstdCompressor(level=3).compress((HEADER + "\n" + "r,0,a,0,true,1\n" * ((8 << 20) // 15)).encode())
    path = tmp_path / "b.csv.zst"
    path.write_bytes(bomb)
    monkeypatch.setattr(streams, "MAX_FILE_BYTES", 1 << 20)
    with pytest.raises(TrialValidationError, match="more than 1,048,576"):
        read_trials_report([path])
    record = zstandard.ZstdCompressor(level=3).compress(b'{\n  "instance_id": "' + b"a" * (8 << 20) + b'"\n}')
    t = tmp_path / "run" / "step_1" / "train"
    t.mkdir(parents=True)
    (t / "a_0.json.zst").write_bytes(record)
    monkeypatch.setattr(trajectory, "MAX_TRAJECTORY_BYTES", 1 << 20)
    from saturation.ingest import ingest_runs

    res = ingest_runs([tmp_path / "run"], strict=False, progress=False, workers=1)
    assert res.accounting["rows_rejected"] == 1 and "more than 1,048,576" in res.problems[0]


def test_a_newline_free_table_is_bounded(tmp_path, monkeypatch):
    from saturation import streams

    monkeypatch.setattr(streams, "MAX_LINE_CHARS", 1 << 20)
    path = tmp_path / "z.csv.zst"
    path.write_bytes(
        zstandard.ZstdCompressor().compress(HEADER.encode() + b"\n" + b"0" * (30 << 20) + b"\nr,0,a,0,true,1\n")
    )
    _, valid = _lenient(path)
    assert valid.accounting["rejected"] == 1 and "longer than" in str(valid.problems[0])


# ------------------------------------------------------------------ one-line errors, documented codes
def test_duplicate_headers_are_a_message(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("run,step,instance_id,sample,graded,reward,reward\nr,0,a,0,true,1,2\n")
    assert main(["ingest", str(path), "-o", str(tmp_path / "o.nc")]) == EXIT_DATA
    assert "duplicate column name(s) ['reward']" in capsys.readouterr().err
    assert main(["describe", str(path)]) == EXIT_DATA
    assert "duplicate column" in capsys.readouterr().err


def test_skyrl_fields_of_the_wrong_type_are_messages(tmp_path):
    from saturation.ingest import ingest_runs

    d = tmp_path / "run" / "step_1" / "train"
    d.mkdir(parents=True)
    base = {"instance_id": "a", "total_reward": 1.0, "raw_final_message": "[]", "target": []}
    bad = {
        "a_0": {**base, "target": 7},
        "a_1": {**base, "target": [{"file": "x.py", "changes": 3}]},
        "a_2": {**base, "total_reward": 10**400 if False else 2**70, "target": [{"file": 1}]},
        "a_3": {**base, "target": {"file_changes": "x.py"}},
    }
    for name, record in bad.items():
        (d / f"{name}.json").write_text(json.dumps(record, indent=2))
    (d / f"a_{2**70}.json").write_text(json.dumps(base, indent=2))
    dump = tmp_path / "run" / "dumped_evals" / f"global_step_{2**70}_evals"
    dump.mkdir(parents=True)
    (dump / "x.jsonl").write_text(json.dumps({"score": 1.0}) + "\n")
    res = ingest_runs([tmp_path / "run"], strict=False, progress=False, workers=1)
    assert res.accounting["rows_rejected"] == 6 and res.accounting["rows_read"] == 6
    assert all("Traceback" not in p for p in res.problems)
    assert any("repetition" in p or "too large" in p for p in res.problems)


@pytest.mark.parametrize(
    "argv", [["plateau", "--draws", "0"], ["plateau", "--chains", "0"], ["transfer", "--tune", "-1"]]
)
def test_zero_draws_or_chains_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_USAGE


def test_lenient_with_nothing_readable_is_a_message(tmp_path, capsys):
    path = tmp_path / "n.csv"
    path.write_text(f"{HEADER}\nr,x,a,0,true,1\n")
    assert main(["ingest", str(path), "-o", str(tmp_path / "o.nc"), "--lenient"]) == EXIT_DATA
    err = capsys.readouterr().err
    assert "no valid rows" in err and "'graded'" not in err


def test_unknown_run_is_an_error(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("\n".join([HEADER, *_rows(30), *[r.replace("r,", "q,", 1) for r in _rows(30)]]) + "\n")
    assert (
        main(["plateau", str(path), "--response", "reward", "--run", "nosuch", "--draws", "10", "--tune", "10"])
        == EXIT_DATA
    )
    assert "run 'nosuch' is not in the data (runs: ['q', 'r'])" in capsys.readouterr().err
    one = tmp_path / "one.csv"
    one.write_text("\n".join([HEADER, *_rows(30)]) + "\n")
    assert (
        main(["plateau", str(one), "--response", "reward", "--run", "nosuch", "--draws", "10", "--tune", "10"])
        == EXIT_DATA
    )
    assert "run 'nosuch' is not in the data (runs: ['r'])" in capsys.readouterr().err


def test_degenerate_data_gets_a_message_not_a_fit(tmp_path, capsys):
    path = tmp_path / "u.csv"
    path.write_text(HEADER + "\n" + "\n".join(f"r,{i},a,0,false,0" for i in range(10)) + "\n")
    assert main(["plateau", str(path), "--response", "reward"]) == EXIT_DATA
    assert "no graded trials" in capsys.readouterr().err
    one = tmp_path / "one.csv"
    one.write_text(HEADER + "\n" + "\n".join(f"r,3,a{i},0,true,1" for i in range(10)) + "\n")
    assert main(["plateau", str(one), "--response", "reward"]) == EXIT_DATA
    assert "one step" in capsys.readouterr().err
    flat = tmp_path / "flat.csv"
    flat.write_text(HEADER + "\n" + "\n".join(f"r,{i},a{j},0,true,0.5" for i in range(12) for j in range(3)) + "\n")
    assert main(["plateau", str(flat), "--response", "reward"]) == EXIT_DATA
    assert "is constant (0.5)" in capsys.readouterr().err


def test_internal_errors_are_one_line_unless_debug(monkeypatch, capsys):
    import saturation.cli as cli

    def broken(args):
        raise AttributeError("something deep")

    monkeypatch.setattr(cli, "_cmd_describe", broken)
    assert main(["describe"]) == EXIT_DATA
    err = capsys.readouterr().err
    assert err.startswith("error: internal error (AttributeError") and "Traceback" not in err
    with pytest.raises(AttributeError):
        main(["--debug", "describe"])
    with pytest.raises(AttributeError):
        main(["describe", "--debug"])


def test_ingest_never_modifies_its_inputs(tmp_path):
    from skyrl_fixtures import run_dir

    root = run_dir(tmp_path / "r", zst=False)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert (
        main(
            [
                "ingest",
                str(root),
                "-o",
                str(tmp_path / "o.nc"),
                "--metrics-out",
                str(tmp_path / "m.nc"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert np.all([p.exists() for p in before])


def test_two_reports_into_one_directory_cannot_interleave(tmp_path):
    import os
    import subprocess
    import sys

    from saturation.report import LOCK_NAME, _lock

    out = tmp_path / "rep"
    out.mkdir()
    with _lock(out):
        assert (out / LOCK_NAME).read_text() == str(os.getpid())
        with pytest.raises(ValueError, match="another saturation report"), _lock(out):
            pass
    assert not (out / LOCK_NAME).exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / LOCK_NAME).write_text(dead.stdout.strip())  # a lock left by a process that has ended
    with _lock(out):
        pass


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("base", s, "t", 1.0) for s in range(5)], "compares arms"),
        ([("base", s, "t", 1.0) for s in range(5)] + [("s85", 1, "t", 1.0), ("s85", 2, "t", 0.0)], "only 2 step"),
        ([(a, s, t, 0.5) for a in ("base", "s85") for s in range(5) for t in ("t1", "t2")], "no gap to estimate"),
    ],
)
def test_degenerate_transfer_data_gets_a_message(rows, message):
    import xarray as xr

    from saturation.models.transfer import transfer_data

    n = len(rows)
    ds = xr.Dataset(
        {"graded": ("trial", np.ones(n, bool)), "reward": ("trial", np.array([r[3] for r in rows]))},
        coords={
            "arm": ("trial", [r[0] for r in rows]),
            "step": ("trial", [r[1] for r in rows]),
            "instance_id": ("trial", [r[2] for r in rows]),
            "run": ("trial", ["r"] * n),
            "sample": ("trial", np.arange(n)),
        },
    )
    with pytest.raises(ValueError, match=message):
        transfer_data(ds)


def test_pass_at_k_on_too_few_steps_or_an_unknown_run_is_a_message():
    import xarray as xr

    from saturation.models.learning import group_counts

    n = 8
    ds = xr.Dataset(
        {"graded": ("trial", np.ones(n, bool)), "reward": ("trial", np.ones(n))},
        coords={
            "run": ("trial", ["r"] * n),
            "step": ("trial", [0, 0, 0, 0, 1, 1, 1, 1]),
            "instance_id": ("trial", ["a", "a", "b", "b"] * 2),
            "sample": ("trial", [0, 1] * 4),
        },
    )
    with pytest.raises(ValueError, match="3 or more steps"):
        group_counts(ds)
    with pytest.raises(ValueError, match="run 'q' is not in the data"):
        group_counts(ds, run="q")


@pytest.mark.parametrize("reward", [0.0, 1.0])
def test_pass_at_k_when_every_rollout_fails_or_succeeds_is_a_message(reward):
    import xarray as xr

    from saturation.models.learning import fit_pass_at_k

    n = 24
    ds = xr.Dataset(
        {"graded": ("trial", np.ones(n, bool)), "reward": ("trial", np.full(n, reward))},
        coords={
            "run": ("trial", ["r"] * n),
            "step": ("trial", np.repeat([0, 1, 2], 8)),
            "instance_id": ("trial", ["a", "b"] * 12),
            "sample": ("trial", np.arange(n) % 4),
        },
    )
    what = "failed" if reward == 0 else "succeeded"
    with pytest.raises(ValueError, match=f"every one of the 24 rollouts {what}"):
        fit_pass_at_k(ds)


# ------------------------------------------------------------------ issue 41: never delete, overwrite or leak
def test_write_atomic_never_follows_a_planted_symlink_or_replaces_a_link(tmp_path):
    """A symlink planted at the old predictable temporary name (``.NAME.PID.partial``) in a
    shared output directory is neither followed nor renamed over the output; an output
    that is itself a symlink is refused, its target untouched."""
    from saturation.io import write_atomic

    victim = tmp_path / "victim.txt"
    victim.write_text("not yours")
    out = tmp_path / "out"
    out.mkdir()
    planted = out / f".results.json.{os.getpid()}.partial"
    planted.symlink_to(victim)
    write_atomic(out / "results.json", "new")
    assert victim.read_text() == "not yours"
    assert not (out / "results.json").is_symlink() and (out / "results.json").read_text() == "new"
    assert planted.is_symlink()  # not ours: left alone
    mode = (out / "results.json").stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # what a plain open would give, not mkstemp's 0600
    (out / "REPORT.md").symlink_to(victim)
    with pytest.raises(OSError, match=r"REPORT\.md: it is a symbolic link"):
        write_atomic(out / "REPORT.md", "x")
    assert victim.read_text() == "not yours" and (out / "REPORT.md").is_symlink()
    assert not [p for p in out.iterdir() if p.name.endswith(".partial") and not p.is_symlink()]


def _made_up_runner(monkeypatch, names=(), extra=()):
    """A plateau analysis without a fit: it writes a table of the data's runs, a table per
    name in ``names`` (as a report names files after arms), a fit file, a figure and a plain
    file through the report's ``_Out``; returns the list of analyses it ran."""
    import xarray as xr

    from saturation import report

    ran = []

    def made_up(spec, ds, reference, out):
        import matplotlib.pyplot as plt

        ran.append(spec.name)
        frame = pd.DataFrame({"run": [str(r) for r in np.unique(ds["run"].values)]})
        for name in ["estimates", *(f"families_{n}" for n in names), *extra]:
            out.table(frame, name, f"{spec.title}: {name}")
        out.idata(xr.Dataset({"x": ("d", np.arange(3.0))}), "plateau_fit")
        out.figure(lambda: plt.figure(figsize=(1, 1)), "curves", "a figure")
        diag = {"rhat_max": 1.0, "ess_bulk_min": 900.0, "ess_tail_min": 800.0, "divergences": 0, "converged": True}
        return {"verdict": "made up.", "details": [], "results": {}, "diagnostics": diag}

    monkeypatch.setitem(report.RUNNERS, "plateau", made_up)
    return ran


def _spec(path, trials, name=None, title="T"):
    line = "" if name is None else f"name = {json.dumps(name)}\n"
    path.write_text(f'[analysis]\nkind = "plateau"\ntitle = {json.dumps(title)}\n{line}[data]\ntrials = "{trials}"\n')
    return path


def _trials(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([HEADER, *_rows(30)]) + "\n")
    return path


def test_the_reports_clean_up_never_deletes_its_input(tmp_path, monkeypatch, capsys):
    """The issue's repro: spec plateau.toml, trials plateau/trials.csv, ``--out .``: the
    section's directory is the data's; a re-run deletes only what the report wrote (its
    manifest): the input and a user's file there survive, a table no longer written goes."""
    ran = _made_up_runner(monkeypatch, extra=["old_table"])
    monkeypatch.chdir(tmp_path)
    trials = _trials(tmp_path / "plateau" / "trials.csv")
    before = trials.read_bytes()
    (tmp_path / "plateau" / "notes.txt").write_text("mine")
    _spec(tmp_path / "plateau.toml", "plateau/trials.csv")
    assert main(["report", "plateau.toml", "--out", ".", "--no-progress"]) == 0
    assert trials.read_bytes() == before and (tmp_path / "plateau" / "old_table.csv").exists()
    _made_up_runner(monkeypatch)  # the next run writes no old_table
    assert main(["report", "plateau.toml", "--out", ".", "--no-progress", "--force"]) == 0
    assert trials.read_bytes() == before and (tmp_path / "plateau" / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "plateau" / "old_table.csv").exists()  # the report's own stale file: swept
    assert (tmp_path / "plateau" / "estimates.csv").exists() and ran == ["plateau"]
    capsys.readouterr()


@pytest.mark.parametrize("name", ["../victim", "ABS", "", "..", "Qwen/Qwen3-8B", "a\nb<c>"])
def test_spec_names_never_become_paths_outside_out(tmp_path, monkeypatch, capsys, name):
    """A spec ``name`` (or a file stem such as ``...toml``'s ``..``) is sanitised into one
    directory inside --out; files beside --out, in its root and the lock survive."""
    _made_up_runner(monkeypatch)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    name = str(victim) if name == "ABS" else name
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    _trials(tmp_path / "specs" / "t.csv")
    spec = _spec(tmp_path / "specs" / "s.toml", "t.csv", name=name)
    if name == "..":  # the name comes from the file: "...toml" has the stem ".."
        spec = _spec(tmp_path / "specs" / "...toml", "t.csv")
    for _ in range(2):  # the second run sweeps
        assert main(["report", str(spec), "--out", str(out), "--no-progress", "--force"]) == 0, capsys.readouterr()
    assert (victim / "keep.txt").read_text() == "keep" and (out / "mine.txt").read_text() == "mine"
    (section,) = json.loads((out / "results.json").read_text())["analyses"].values()
    for rel in section["tables"] + section["figures"] + section["fits"]:
        path = (out / rel).resolve()
        assert path.parent.parent == out.resolve() and path.exists(), rel
    capsys.readouterr()


def test_run_and_arm_names_in_file_names_are_sanitised_and_kept_apart(tmp_path, monkeypatch):
    from saturation.report import run_report

    _made_up_runner(monkeypatch, names=["Qwen/Qwen3-8B", "Qwen_Qwen3-8B", "../../../x", "/etc/passwd"])
    _trials(tmp_path / "t.csv")
    rep = run_report([_spec(tmp_path / "s.toml", "t.csv", name="s")], out=tmp_path / "out", progress=False)
    tables = rep.sections[0].tables
    assert len(set(tables)) == len(tables) == 5
    assert "s/families_Qwen_Qwen3-8B.md" in tables and "s/families_Qwen_Qwen3-8B-2.md" in tables
    assert all((tmp_path / "out" / t).resolve().parent == (tmp_path / "out" / "s").resolve() for t in tables)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "s.toml", "t.csv"]


def test_two_analyses_never_share_a_directory(tmp_path, monkeypatch, capsys):
    """``same`` and ``same/`` get their own directories and tables; names that would give
    one directory (``a/b`` and ``a_b``, or one named like REPORT.md) are refused first."""
    _made_up_runner(monkeypatch)
    _trials(tmp_path / "t.csv")
    one = _spec(tmp_path / "one.toml", "t.csv", name="same", title="One")
    two = _spec(tmp_path / "two.toml", "t.csv", name="same/", title="Two")
    out = tmp_path / "out"
    assert main(["report", str(one), str(two), "--out", str(out), "--no-progress"]) == 0
    analyses = json.loads((out / "results.json").read_text())["analyses"]
    assert analyses["same"]["tables"] != analyses["same/"]["tables"]
    assert {Path(t).parent.name for a in analyses.values() for t in a["tables"]} == {"same", "same_"}
    capsys.readouterr()
    for a, b in [("a/b", "a_b"), ("x", "REPORT.md"), ("R", "r")]:
        _spec(one, "t.csv", name=a)
        _spec(two, "t.csv", name=b)
        assert main(["report", str(one), str(two), "--out", str(tmp_path / "o2"), "--no-progress"]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "taken by" in err, err
        assert not (tmp_path / "o2").exists()


def test_the_report_never_overwrites_or_reads_its_own_outputs(tmp_path, monkeypatch, capsys):
    """An input where an output goes is refused before it is replaced; ``--out`` inside the
    data directory is refused (the second run would read estimates.csv as trials)."""
    _made_up_runner(monkeypatch)
    monkeypatch.chdir(tmp_path)
    trials = _trials(tmp_path / "plateau" / "estimates.csv")
    before = trials.read_bytes()
    _spec(tmp_path / "plateau.toml", "plateau/estimates.csv")
    assert main(["report", "plateau.toml", "--out", ".", "--no-progress"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "would overwrite this input" in err and len(err.strip().splitlines()) == 1
    assert trials.read_bytes() == before
    data = tmp_path / "data"
    _trials(data / "t.csv")
    _spec(tmp_path / "d.toml", "data")
    for out in ("data/report", "data"):
        assert main(["report", "d.toml", "--out", out, "--no-progress"]) == EXIT_USAGE
        assert "read the report's own files as data" in capsys.readouterr().err
    assert sorted(p.name for p in data.iterdir()) == ["t.csv"]
    assert main(["report", "d.toml", "--data", "data", "--out", "data/r", "--no-progress"]) == EXIT_USAGE


@pytest.mark.parametrize("fault", ["outside", "outside_hashed", "truncated_fit", "empty_png", "corrupt", "wrong_type"])
def test_a_cache_record_is_checked_never_trusted_by_existence(tmp_path, monkeypatch, capsys, fault):
    """A section.json naming a file outside its directory (a local file would be copied into
    REPORT.md and embedded in REPORT.html), a truncated fit, an empty PNG, a corrupt or
    ill-typed record: never reused, the analysis refitted with a one-line note, no crash."""
    import hashlib

    ran = _made_up_runner(monkeypatch)
    _trials(tmp_path / "t.csv")
    spec = _spec(tmp_path / "s.toml", "t.csv", name="s")
    secret = tmp_path / "secret.md"
    secret.write_text("SECRET-TOKEN")
    out = tmp_path / "out"
    argv = ["report", str(spec), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    record = out / "s" / "section.json"
    obj = json.loads(record.read_text())
    if fault.startswith("outside"):
        obj["tables"].append("../../secret.md")
        if fault == "outside_hashed":
            obj["written"]["../../secret.md"] = hashlib.sha256(secret.read_bytes()).hexdigest()
        record.write_text(json.dumps(obj))
    elif fault == "truncated_fit":
        fit = out / "s" / "plateau_fit.nc"
        fit.write_bytes(fit.read_bytes()[:100])
    elif fault == "empty_png":
        (out / "s" / "curves.png").write_bytes(b"")
    elif fault == "corrupt":
        record.write_text(record.read_text()[:50])
    else:
        obj["seconds"] = "soon"
        record.write_text(json.dumps(obj))
    capsys.readouterr()
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert ran == ["s", "s"]  # refitted
    note = [line for line in text.splitlines() if "note:" in line]
    assert len(note) == 1 and ("not trusted" in note[0] or "changed" in note[0]), text
    assert "note: " in (out / "REPORT.md").read_text()
    for page in ("REPORT.md", "REPORT.html"):
        assert "SECRET-TOKEN" not in (out / page).read_text()
    assert secret.read_text() == "SECRET-TOKEN"
    assert main(argv) == 0 and ran == ["s", "s"]  # the refit's record is trusted again: reused
    assert "note:" not in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--metrics-out", "--json", "--rejects", "--json-default-rejects", "--link"])
def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys, flag):
    """``ingest -o x --metrics-out x`` (or ``--json x``, ``--rejects x``, the default rejects
    file, a symlink to the other output): exit 2, one line, nothing written."""
    from skyrl_fixtures import run_dir

    path = tmp_path / "v.csv"
    path.write_text("\n".join([HEADER, *_rows(5), "r,x,a,0,true,1"]) + "\n")
    out = tmp_path / "x.nc"
    argv = ["ingest", str(path), "--lenient", "-o", str(out)]
    if flag == "--metrics-out":
        argv = ["ingest", str(run_dir(tmp_path / "run", zst=False)), "-o", str(out), flag, str(out), "--no-progress"]
    elif flag == "--json-default-rejects":
        argv += ["--json", str(tmp_path / "x.rejected.csv")]
    elif flag == "--link":
        (tmp_path / "link.json").symlink_to(out)
        argv += ["--json", str(tmp_path / "link.json")]
    else:
        argv += [flag, str(out)]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "the same file" in err, err
    assert not out.exists() and not (tmp_path / "x.rejected.csv").exists()


HOSTILE_RUN = "=cmd|' /C calc'!A0\x1b]0;owned\x07<img src=x onerror=alert(1)>"


def test_every_writer_escapes_for_its_format(tmp_path, monkeypatch, capsys):
    """A run name with a spreadsheet formula, terminal escapes and HTML, a spec title with a
    newline and a live ``\\input``: the CSV cell is neutralised, the .tex has no line that
    TeX would run, REPORT.md shows the HTML as text, the terminal shows the escapes escaped."""
    _made_up_runner(monkeypatch)
    rows = [f"{HOSTILE_RUN},{i // 10},i{i % 10},0,true,{(i % 7) / 7:.3f}" for i in range(30)]
    (tmp_path / "t.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    title = "T\n\\input{/etc/passwd}\n\\immediate\\write18{id} <script>alert(1)</script>"
    spec = _spec(tmp_path / "s.toml", "t.csv", name="s", title=title)
    out = tmp_path / "out"
    assert main(["report", str(spec), "--out", str(out), "--no-progress"]) == 0
    csv = (out / "s" / "estimates.csv").read_text().splitlines()
    assert csv[1].startswith("\"'=cmd") or csv[1].startswith("'=cmd"), csv
    tex = (out / "s" / "estimates.tex").read_text()
    live = [line for line in tex.splitlines() if not line.startswith("%")]  # a comment ends at its line
    assert not [line for line in live if "\\input" in line or "\\write18" in line or "\\immediate" in line]
    assert tex.splitlines()[0].startswith("% T \\input{/etc/passwd} \\immediate")  # inert: one comment line
    md = (out / "REPORT.md").read_text()
    assert "<img" not in md and "<script>" not in md and "&lt;img src=x" in md and "&lt;script>" in md
    assert "\x1b" not in md and "\n\\input" not in md
    capsys.readouterr()
    assert main(["ingest", str(tmp_path / "t.csv"), "-o", str(tmp_path / "t.nc")]) == 0
    assert main(["describe", str(tmp_path / "t.nc")]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown and "\\x1b]0;owned\\x07" in shown


def test_rejected_rows_with_formulas_are_neutralised_numbers_kept(tmp_path, monkeypatch):
    """The rejects CSV names the file (here ``=cmd|calc.csv``) and holds the raw row: no cell
    starts a formula; a plain number such as -7 is left as it is."""
    from saturation.io import neutralise_formulas

    monkeypatch.chdir(tmp_path)
    path = Path("=cmd|calc.csv")
    path.write_text("\n".join([HEADER, *_rows(5), "r,-7,a,0,true,1"]) + "\n")
    read_trials_report([path], strict=False, rejects=tmp_path / "r.csv")
    frame = pd.read_csv(tmp_path / "r.csv", dtype=str)
    cells = [c for c in frame.to_numpy().ravel() if isinstance(c, str)]
    assert "'=cmd|calc.csv" in cells and not any(c.startswith(("=", "+", "@", "\t")) for c in cells), cells
    frame = pd.DataFrame({"a": ["-7", "+0.5", "-x", "@a", "\tb", "ok"], "n": [-1.0, 2, 3, 4, 5, 6]})
    assert list(neutralise_formulas(frame)["a"]) == ["-7", "+0.5", "'-x", "'@a", "'\tb", "ok"]
    assert list(neutralise_formulas(frame)["n"]) == [-1.0, 2, 3, 4, 5, 6]


def test_dangling_links_fifos_and_devices_are_listed_never_opened(tmp_path, capsys):
    """In an input directory: a dangling symlink (an unfetched git-annex file) and a FIFO
    are listed as not read with the reason (strict: an error naming them; lenient: file
    problems), the FIFO never opened (it would block forever); given directly, an error."""
    from saturation.io import read_trials_report

    d = tmp_path / "data"
    d.mkdir()
    (d / "a.csv").write_text("\n".join([HEADER, *_rows(20)]) + "\n")
    (d / "b.csv").symlink_to(tmp_path / ".git" / "annex" / "objects" / "b")
    os.mkfifo(d / "c.csv")
    with pytest.raises(TrialValidationError) as info:
        read_trials_report([d])
    text = str(info.value)
    assert "b.csv: a dangling symbolic link" in text and "c.csv: a FIFO; never opened" in text
    ds, valid = read_trials_report([d], strict=False)
    listed = json.loads(ds.attrs["file_problems"])
    assert any("b.csv: a dangling" in p for p in listed) and any("c.csv: a FIFO" in p for p in listed)
    assert valid.accounting["read"] == 20
    assert main(["ingest", str(d), "-o", str(tmp_path / "o.nc"), "--lenient"]) == 0
    assert "c.csv: a FIFO; never opened" in capsys.readouterr().out
    assert main(["ingest", str(d / "c.csv"), "-o", str(tmp_path / "o2.nc")]) == EXIT_DATA
    assert "c.csv: a FIFO; never opened" in capsys.readouterr().err
    assert main(["ingest", str(d / "b.csv"), "-o", str(tmp_path / "o2.nc")]) == EXIT_USAGE  # no such input


# ------------------------------------------------------------------ issue 41, second half: netCDF inputs
def _trials_nc(tmp_path, name="t.nc", **edit):
    """A small trial Dataset (one level) written by write_trials; ``edit`` maps a variable to
    {index: value} changed before writing, ``attrs`` to attributes replaced."""
    from saturation.io import write_trials
    from saturation.simulate import PlateauSpec, simulate_plateau

    ds, _ = simulate_plateau(PlateauSpec(n_steps=6, prompts_per_step=4, samples_per_prompt=2), seed=0)
    ds = ds.copy(deep=True)
    for var, changes in edit.items():
        if var == "attrs":
            ds.attrs.update(changes)
            continue
        values = ds[var].values
        for index, value in changes.items():
            values[index] = value
    path = tmp_path / name
    write_trials(ds, path)
    return path


def _plant_external_run(path, secret):
    """Replace the ``run`` coordinate of a trial .nc by a dataset whose bytes are those of
    ``secret`` (HDF5 external raw storage), as a hostile file would."""
    import h5py

    with h5py.File(path, "r+") as f:
        n = f["run"].shape[0]
        attrs = {k: v for k, v in f["run"].attrs.items() if k != "DIMENSION_LIST"}
        del f["run"]
        dset = f.create_dataset("run", shape=(n,), dtype="S8", external=[(str(secret), 0, 8 * n)])
        dset.attrs.update(attrs)
        dset.dims[0].attach_scale(f[S_TRIAL])


S_TRIAL = "trial"


@pytest.mark.parametrize("how", ["external", "external_link", "virtual"])
def test_a_netcdf_input_that_reads_another_file_is_refused(tmp_path, capsys, how):
    import h5py

    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"PASSWORD" * 10_000)
    path = _trials_nc(tmp_path)
    if how == "external":
        _plant_external_run(path, secret)
        named = "variable 'run' is stored in another file"
    elif how == "external_link":
        other = _trials_nc(tmp_path, "other.nc")
        with h5py.File(path, "r+") as f:
            del f["reward"]
            f["reward"] = h5py.ExternalLink(str(other), "/reward")
        named = "'reward' is a link into another file"
    else:
        with h5py.File(path, "r+") as f:
            n = f["reward"].shape[0]
            layout = h5py.VirtualLayout(shape=(n,), dtype="f8")
            layout[:] = h5py.VirtualSource(str(secret), "x", shape=(n,))
            del f["reward"]
            f.create_virtual_dataset("reward", layout)
        named = "variable 'reward' is a virtual dataset"
    assert main(["plateau", str(path), "--draws", "10", "--tune", "10"]) == EXIT_DATA
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err and named in err
    assert "PASSWORD" not in err
    with pytest.raises(ValueError, match=named):
        from saturation.series import read_metrics

        read_metrics(path)  # a metrics .nc is checked the same way


def test_a_netcdf_bomb_is_refused_from_its_header(tmp_path, capsys):
    import h5py

    path = _trials_nc(tmp_path)
    with h5py.File(path, "r+") as f:  # 4 GiB of rewards that are never written: a file of kilobytes
        f.create_dataset("bomb", shape=(1 << 29,), dtype="f8", chunks=(1 << 20,), compression="gzip")
    assert path.stat().st_size < 1 << 20
    t0 = time.perf_counter()
    assert main(["plateau", str(path), "--draws", "10", "--tune", "10"]) == EXIT_DATA
    assert time.perf_counter() - t0 < 10
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err
    assert "hold 4,294,9" in err and "more than the limit of 2,147,483,648" in err
    assert "SATURATION_MAX_NETCDF_BYTES" in err


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ({"step": {0: -7}}, "trial 0: variable 'step': -7 is negative"),
        ({"f1": {(1, 0): 5.0}}, "trial 1: variable 'f1[level=file]': 5.0 is outside [0, 1]"),
        ({"reward": {2: np.inf}, "graded": {2: True}}, "trial 2: variable 'reward': non-finite reward inf"),
        ({"step": {1: 0}, "instance_id": {1: None}, "sample": {1: None}}, "duplicate trial"),
        ({"attrs": {"rows_read": 99}}, "attributes rows_read=99 != rows_kept="),
        ({"attrs": {"rows_kept": 3}}, "attribute rows_kept=3 but it holds"),
    ],
)
def test_a_netcdf_trial_dataset_is_validated_like_a_table(tmp_path, capsys, edit, named):
    from saturation.io import open_trials

    if "instance_id" in edit:  # trial 1 a copy of trial 0's key
        ok = open_trials(_trials_nc(tmp_path, "ok.nc"))
        edit = {k: {1: ok[k].to_numpy()[:1].tolist()[0]} for k in ("step", "instance_id", "sample")}
    path = _trials_nc(tmp_path, **edit)
    with pytest.raises(TrialValidationError) as info:
        open_trials(path)
    assert f"{path}: " in str(info.value) and named in str(info.value)
    assert main(["plateau", str(path), "--draws", "10", "--tune", "10"]) == EXIT_DATA
    assert named in capsys.readouterr().err


# ------------------------------------------------------------------ issue 41: steps never silently dropped
def test_a_level_missing_at_some_steps_is_an_error_naming_it_not_dropped_steps(tmp_path, capsys):
    from saturation.io import read_trials
    from saturation.models.plateau import step_data

    rows = []
    for step in range(12):
        for i in range(4):
            f1 = min(1.0, 0.2 + 0.06 * step) if i % 2 else 0.1 + 0.05 * step
            module = "" if step >= 8 else f"{f1 / 2:.3f}"  # the module level stops being graded at step 8
            rows.append(f"r,{step},i{i},0,true,{f1:.3f},{f1:.3f},{module}")
    path = tmp_path / "t.csv"
    path.write_text("run,step,instance_id,sample,graded,reward,file_f1,module_f1\n" + "\n".join(rows) + "\n")
    ds = read_trials([path])
    with pytest.raises(ValueError, match=r"level 'module' at step\(s\) 8, 9, 10, 11, where other levels have data"):
        step_data(ds)
    assert step_data(ds, levels=["file"]).steps.tolist() == list(range(12))  # alone, every step of its own
    assert step_data(ds, levels=["module"]).steps.tolist() == list(range(8))
    assert main(["plateau", str(path), "--draws", "10", "--tune", "10"]) == EXIT_DATA
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "level 'module' at step(s) 8, 9, 10, 11" in err


# ------------------------------------------------------------------ issue 41: degenerate arms never fitted
@pytest.mark.parametrize("how", ["crashed", "all_zero"])
def test_compare_refuses_an_arm_whose_rollouts_all_crashed_or_agree(tmp_path, capsys, how):
    from saturation.io import read_trials
    from saturation.models.sigmoid import arm_steps

    arms = tmp_path / "arms.csv"
    assert main(["simulate", "sigmoid-arms", str(arms)]) == 0
    frame = pd.read_csv(arms)
    victim = sorted(frame["arm"].unique())[-1]
    rows = frame["arm"] == victim
    frame.loc[rows, "reward"] = 0.0
    if how == "crashed":
        frame.loc[rows, "graded"] = False
    frame.to_csv(arms, index=False)
    capsys.readouterr()
    message = "none of its .* rollouts is graded" if how == "crashed" else "every one of its .* rollouts has reward 0"
    with pytest.raises(ValueError, match=f"arm '{victim}': {message}"):
        arm_steps(read_trials([arms]))
    t0 = time.perf_counter()
    assert main(["compare", str(arms)]) == EXIT_DATA
    assert time.perf_counter() - t0 < 20  # refused before any fit
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"arm '{victim}'" in err


# ------------------------------------------------------------------ issue 41: resource bounds up front
def test_a_table_of_10000_columns_is_refused_up_front_and_wide_tables_are_linear(tmp_path, capsys):
    from saturation.runlogs import RunLogError, read_runlogs

    wide = 10_000
    trials = tmp_path / "t.csv"
    trials.write_text(
        HEADER + "," + ",".join(f"x{i}" for i in range(wide)) + "\n" + "r,0,a,0,true,1" + ",1" * wide + "\n"
    )
    t0 = time.perf_counter()
    with pytest.raises(TrialValidationError, match=r"10,006 columns, more than the limit of 4,096 \(raise it with "):
        read_trials_report([trials])
    metrics = tmp_path / "m.csv"
    metrics.write_text("run,step," + ",".join(f"m{i}" for i in range(wide)) + "\n" + "r,1" + ",0.5" * wide + "\n")
    with pytest.raises(RunLogError, match=r"10,002 columns, more than the limit of 4,096"):
        read_runlogs([metrics], strict=True)
    assert time.perf_counter() - t0 < 10
    # under the limit the cost is linear in the columns: 4,000 extra columns well under 4x 1,000's time
    times = {}
    for n in (1000, 4000):
        path = tmp_path / f"w{n}.csv"
        path.write_text(HEADER + "," + ",".join(f"x{i}" for i in range(n)) + "\n" + "r,0,a,0,true,1" + ",1" * n + "\n")
        t0 = time.perf_counter()
        ds, _ = read_trials_report([path])
        times[n] = time.perf_counter() - t0
        assert len(ds.data_vars) == 2 + n
    assert times[4000] < 8 * times[1000] + 1.0, times


def test_a_wide_tables_rows_are_refused_unread_and_every_row_is_counted(tmp_path, monkeypatch):
    """The column limit is checked on the header, before any row is parsed (a 20,000-column
    CSV of 200 rows took 4-6 s and 340-550 MB to refuse; now the time of a tiny file): no
    pandas parse of a metrics table, no field split of a trial row; every row still counted."""
    import saturation.io as sio
    import saturation.runlogs as runlogs
    from saturation.runlogs import RunLogError, read_runlogs

    wide, rows = 5_000, 7
    trials = tmp_path / "t.csv"
    trials.write_text(
        HEADER + "," + ",".join(f"x{i}" for i in range(wide)) + "\n" + ("r,0,a,0,true,1" + ",1" * wide + "\n") * rows
    )
    split = sio._csv_fields
    calls = []
    monkeypatch.setattr(sio, "_csv_fields", lambda *a: calls.append(a[2][:10]) or split(*a))
    with pytest.raises(TrialValidationError, match="every row rejected unread"):
        read_trials_report([trials])
    assert len(calls) == 1  # the header alone
    with pytest.raises(TrialValidationError, match=f"no valid rows: {rows} read, {rows} rejected"):
        read_trials_report([trials], strict=False)  # every row accounted for

    def no_parse(*args, **kwargs):
        raise AssertionError("a table over the column limit was parsed")

    metrics = tmp_path / "m.csv"
    metrics.write_text(
        "run,step," + ",".join(f"m{i}" for i in range(wide)) + "\n" + ("r,1" + ",0.5" * wide + "\n") * rows
    )
    monkeypatch.setattr(runlogs.pd, "read_csv", no_parse)
    with pytest.raises(RunLogError, match=f"5,002 columns, more than the limit of 4,096.*its {rows} rows not read"):
        read_runlogs([metrics], strict=True)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_text_table_past_the_row_limit_stops_reading_and_says_so(tmp_path, monkeypatch, suffix):
    """A small .zst can hold hundreds of millions of rows (a 0.2 MB file of 2 GiB of rows
    filled 23 GB and was killed): text tables stop at SATURATION_MAX_ROWS as parquet and
    netCDF do, strict mode refuses the file, lenient keeps and counts what was read."""
    import saturation.io as sio
    import saturation.streams as streams

    monkeypatch.setattr(sio, "MAX_ROWS", 40)
    monkeypatch.setattr(streams, "BLOCK_CHARS", 256)
    path = tmp_path / f"t{suffix}"
    if suffix == ".csv":
        path.write_bytes(
            zstandard.ZstdCompressor().compress(
                (HEADER + "\n" + "".join(f"r,{i},a,0,true,1\n" for i in range(200))).encode()
            )
        )
        path = path.rename(tmp_path / "t.csv.zst")
    else:
        path.write_text(
            "".join(
                json.dumps({"run": "r", "step": i, "instance_id": "a", "sample": 0, "graded": True, "reward": 1}) + "\n"
                for i in range(200)
            )
        )
    with pytest.raises(
        TrialValidationError, match=r"more than 40 rows, the limit \(raise it with SATURATION_MAX_ROWS\)"
    ):
        read_trials_report([path])
    ds, _ = read_trials_report([path], strict=False)
    read = ds.attrs["rows_read"]
    assert 40 <= read < 200 and read == ds.attrs["rows_kept"] + ds.attrs["rows_rejected"]


def _console_block(step, items):
    head = f"2025-01-01 00:00:00.000 | INFO     | skyrl_train.utils.tracking:log:123 - Step {step}: "
    return head + "\n{" + ", ".join(f"'{k}': {v}" for k, v in items) + "}\n"


def test_a_console_block_of_50000_keys_is_refused_and_its_step_overflow_is_a_message(tmp_path):
    from saturation.skyrl import LogFormatError, metrics_dataset, read_console_log

    log = tmp_path / "train.log"
    big = [(f"k{i}", 0.5) for i in range(50_000)]
    small = [("reward/avg_raw_reward", 0.25)]
    log.write_text(
        _console_block(1, small)
        + _console_block(2, big)
        + _console_block(99999999999999999999, small)
        + _console_block(3, small)
    )
    t0 = time.perf_counter()
    out = read_console_log(log)
    assert time.perf_counter() - t0 < 5
    assert sorted(out.steps) == [1, 3]
    assert any("50,000 keys, more than the limit of 4,096" in p for p in out.problems)
    assert any("'Step 99999999999999999999:' is not a step below 2^53" in p for p in out.problems)
    assert metrics_dataset([out])["step"].values.tolist() == [1, 3]
    with pytest.raises(LogFormatError, match="50,000 keys"):
        read_console_log(log, strict=True)


def test_a_parquet_of_10_million_rows_is_refused_from_its_footer(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 10_000_000
    table = pa.table(
        {
            "run": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), pa.array(["r"])),
            "step": np.arange(n) // 1000,
            "instance_id": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), pa.array(["a"])),
            "sample": np.arange(n) % 1000,
            "graded": np.ones(n, bool),
            "reward": np.zeros(n),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, compression="zstd")
    del table
    assert path.stat().st_size < 2 << 20
    t0 = time.perf_counter()
    with pytest.raises(TrialValidationError, match=r"10,000,000 rows, more than the limit of 5,000,000"):
        read_trials_report([path])
    assert time.perf_counter() - t0 < 2


def test_a_series_of_20000_steps_is_binned_and_answered_not_refused(tmp_path, capsys):
    """20,000 steps logged at every step would have needed about 67 GiB unbinned (refused
    before anything was allocated); the series is now fitted on 500 bin means and 600
    candidates. The refusal itself is still what a fit too big for memory gets."""
    steps = np.arange(20_000)
    frame = pd.DataFrame({"run": "r", "step": steps, "acc": np.minimum(steps, 10_000) / 20_000})
    path = tmp_path / "m.csv"
    frame.to_csv(path, index=False)
    t0 = time.perf_counter()
    assert main(["plateau", str(path), "--metric", "acc"]) in (EXIT_OK, EXIT_NOT_CONVERGED)
    assert time.perf_counter() - t0 < 60
    assert "(20000 logged steps, fitted as the means of 500 runs of 40 consecutive points)" in capsys.readouterr().out
    from saturation.limits import fit_memory_problem

    problem = fit_memory_problem(20_000, 19_991, 1)
    assert "over 20,000 steps with 19,991 candidate change points would take about 67.0 GiB" in problem
    assert "more than the limit of 8.0 GiB (raise it with SATURATION_MAX_FIT_BYTES)" in problem
    assert fit_memory_problem(91, 80, 3) == ""  # the study's fits are far below it
    assert "GiB" in fit_memory_problem(5000, 4990, 3, pooled_graph=True)


# ------------------------------------------------------------------ issue 41: upstream SkyRL cases
def _pretty_print_example(lg, prompt, response, reward):
    """SkyRL's ``pretty_print_example`` (a9564572 skyrl/train/utils/trajectory_logging.py:43-92):
    one loguru message, every line of prompt and response in its own colour tag."""
    p = {f"p{i}": line for i, line in enumerate(str(prompt).splitlines() or [""])}
    r = {f"r{i}": line for i, line in enumerate(str(response).splitlines() or [""])}
    prompt_fmt = "\n".join(f"<cyan>{{{k}}}</cyan>" for k in p)
    response_fmt = "\n".join(f"<green>{{{k}}}</green>" for k in r)
    fmt = f"Example:\n  Input: {prompt_fmt}\n  Output (Total Reward: {{reward}}):\n{response_fmt}"
    start = lg.buffer.tell()
    lg.logger.opt(colors=True).info(fmt, **p, **r, reward=f"{reward:.4f}")
    return lg.buffer.getvalue()[start:]


def test_a_printed_example_with_a_step_line_never_becomes_metrics(tmp_path):
    from saturation.skyrl import read_console_log
    from skyrl_fixtures import Loguru

    lg = Loguru()
    try:
        text = lg.info("trainer.policy.model.path=Qwen/Qwen3-8B")
        for step in (1, 2, 3):
            response = f"Training log I saw:\nStep {step}:\n{{'reward/avg_raw_reward': '0.9900'}}\ndone"
            text += _pretty_print_example(lg, [{"role": "user", "content": "p"}], response, 1.0)
            text += lg.console_log({"reward/avg_raw_reward": 0.3 + step / 100, "policy/entropy": 0.5}, step)
    finally:
        lg.logger.remove()
    log = read_console_log(write_text(tmp_path / "train.log", text))
    assert {s: v["reward/avg_raw_reward"] for s, v in log.steps.items()} == {1: 0.31, 2: 0.32, 3: 0.33}
    assert log.conflicts == 0 and log.accounting()["step_markers_not_the_trackers"] == 3


def write_text(path, text):
    path.write_text(text)
    return path


def test_a_crashed_and_resumed_run_keeps_the_later_attempt_and_counts_the_overlap(tmp_path):
    from saturation.skyrl import metrics_dataset, read_console_log
    from skyrl_fixtures import Loguru

    lg = Loguru()
    try:
        text = ""
        for step in range(1, 6):  # the first attempt crashes after logging step 5
            text += lg.console_log({"reward/avg_raw_reward": 0.1 * step, "policy/entropy": 0.5}, step)
        text += lg.info("No checkpoint after step 3; resuming from global_step_3")
        for step in range(4, 8):  # the resumed attempt re-runs steps 4 and 5, then goes on
            text += lg.console_log({"reward/avg_raw_reward": 0.1 * step + 0.05, "policy/entropy": 0.4}, step)
    finally:
        lg.logger.remove()
    log = read_console_log(write_text(tmp_path / "train.log", text))
    reward = {s: v["reward/avg_raw_reward"] for s, v in log.steps.items()}
    assert reward == pytest.approx({1: 0.1, 2: 0.2, 3: 0.3, 4: 0.45, 5: 0.55, 6: 0.65, 7: 0.75})
    acc = log.accounting()
    assert (acc["restarts"], acc["resumed_steps"], acc["values_superseded"], acc["conflicting_values"]) == (1, 2, 4, 0)
    ds = metrics_dataset([log])
    assert ds["reward_mean"].sel(step=4).item() == pytest.approx(0.45)


def test_wandb_tables_and_a_stepless_traceback_are_kept_out_of_the_metrics(tmp_path):
    from saturation.skyrl import metrics_dataset
    from saturation.wandb_history import read_wandb_run
    from skyrl_fixtures import wandb_expected, wandb_run_dir

    pytest.importorskip("wandb")
    root = wandb_run_dir(tmp_path / "run", 3, tables=True)
    log = read_wandb_run(next(root.glob("wandb/offline-run-*")))
    assert sorted(log.steps) == [1, 2, 3]  # no phantom step 4 from the traceback table
    expected = wandb_expected(3)
    assert set(log.steps[1]) == set(expected[1])  # no 'error/tracebacks.ncols' / '.nrows' / '.size'
    assert log.non_numeric["error/tracebacks"] == "a logged table-file (not a metric)"
    assert log.accounting()["records_without_metrics"] == 1
    ds = metrics_dataset([log])
    assert ds.sizes["step"] == 3 and not any("tracebacks" in str(v) for v in ds.data_vars)


def _mini_swe_traj(instance_id, reward):
    """mini-swe-agent's ``save_traj`` as SkyRL's mini-swe-agent example calls it (a9564572
    examples/train/mini_swe_agent/mini_swe_generator.py:125: ``save_traj(agent, path,
    exit_status=, result=, extra_info=, reward=, eval_error=)``): the info dict, the messages,
    ``trajectory_format`` and the keyword arguments at the top level."""
    return {
        "info": {
            "exit_status": "Submitted",
            "submission": "diff --git a/x.py b/x.py",
            "model_stats": {"instance_cost": 0.0, "api_calls": 7},
            "mini_version": "1.9.0",
        },
        "messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "fix"}],
        "trajectory_format": "mini-swe-agent-1",
        "reward": reward,
        "eval_error": None,
    }


def test_a_mini_swe_agent_trajectory_at_codescouts_paths_is_another_format(tmp_path):
    from saturation.ingest import ingest_runs
    from skyrl_fixtures import run_dir, write_trajectory

    root = run_dir(tmp_path / "run", zst=False)
    d = root / "trajectories" / "step_1" / "train"
    write_trajectory(d / "django__django-11099_0.json", _mini_swe_traj("django__django-11099", 1))
    write_trajectory(d / "django__django-11099_1.json", _mini_swe_traj("django__django-11099", 0))
    res = ingest_runs([root], strict=False, progress=False)
    mine = [p for p in res.problems if "django__django-11099" in p]
    assert len(mine) == 2 and all("another format: a mini-swe-agent trajectory" in p for p in mine), mine
    assert all("'total_reward': None" not in p for p in res.problems)
    acc = res.accounting
    assert acc["rows_read"] == acc["rows_kept"] + acc["rows_rejected"] + acc.get("rows_superseded", 0)


def test_a_trial_jsonl_record_of_too_many_keys_is_one_rejected_row(tmp_path, monkeypatch):
    """A JSON Lines trial table is bounded like a CSV header: a record whose keys would pass
    the column limit is rejected with its line and reason, before a frame is built."""
    import saturation.streams as streams

    monkeypatch.setattr(streams, "MAX_COLUMNS", 12)
    row = {"run": "r", "step": 0, "instance_id": "a", "sample": 0, "graded": True, "reward": 1.0}
    path = tmp_path / "t.jsonl"
    wide = {**row, "sample": 1, **{f"x{i}": 1 for i in range(30)}}
    path.write_text(json.dumps(row) + "\n" + json.dumps(wide) + "\n" + json.dumps({**row, "sample": 2}) + "\n")
    message = "line 2: 36 keys, 30 of them new: more than the limit of 12 columns"
    with pytest.raises(TrialValidationError, match=message):
        read_trials_report([path])
    ds, _ = read_trials_report([path], strict=False)
    assert ds.sizes["trial"] == 2 and ds.attrs["rows_read"] == 3 and ds.attrs["rows_rejected"] == 1
