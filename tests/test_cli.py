"""The command-line interface: exit codes, outputs and messages."""

from __future__ import annotations

import json

import pytest

from saturation import schema as S
from saturation.cli import main
from saturation.io import open_trials


def test_simulate_then_ingest_then_describe(tmp_path, capsys):
    out = tmp_path / "sim.csv.zst"
    assert main(["simulate", "plateau", str(out), "--seed", "2", "--truth", str(tmp_path / "truth.json")]) == 0
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth["levels"]["file"]["changepoint"] == 40.0
    nc = tmp_path / "trials.nc"
    assert main(["ingest", str(out), "-o", str(nc), "--json", str(tmp_path / "ingest.json")]) == 0
    printed = capsys.readouterr().out
    assert "rows read 46592: kept 46592" in printed
    ds = open_trials(nc)
    assert ds.sizes[S.TRIAL] == 46592
    report = json.loads((tmp_path / "ingest.json").read_text())
    assert report["accounting"]["rejected"] == 0
    assert main(["describe", str(nc), "--json", str(tmp_path / "d.json")]) == 0
    d = json.loads((tmp_path / "d.json").read_text())
    (summary,) = d.values()
    assert summary["runs"][0]["steps"] == [0, 90]
    assert summary["runs"][0]["n_trials"] == 46592


def test_ingest_bad_data_exits_1_with_locations(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("run,step,instance_id,sample,graded,reward\nr,x,a,0,true,1\nr,0,a,0,maybe,1\n")
    assert main(["ingest", str(bad), "-o", str(tmp_path / "t.nc")]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: line 2: column 'step'" in err
    assert f"{bad}: line 3: column 'graded'" in err
    assert not (tmp_path / "t.nc").exists()


def test_ingest_lenient_writes_rejects(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("run,step,instance_id,sample,graded,reward\nr,x,a,0,true,1\nr,0,a,0,true,1\n")
    assert main(["ingest", str(bad), "-o", str(tmp_path / "t.nc"), "--lenient"]) == 0
    out = capsys.readouterr().out
    assert "rows read 2: kept 1 (of which ungraded 0), rejected 1" in out
    assert (tmp_path / "t.rejected.csv").read_text().count("line 2") == 1


def test_unknown_scenario_and_usage(tmp_path, capsys):
    assert main(["simulate", "nope", str(tmp_path / "x.csv")]) == 2
    assert "unknown scenario" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2


def test_describe_defaults_to_embedded_synthetic_data(capsys, tmp_path):
    assert main(["describe", "--json", str(tmp_path / "d.json")]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC" in out
    d = json.loads((tmp_path / "d.json").read_text())
    swesmith = d["embedded: swesmith"]
    assert swesmith["synthetic"]
    assert swesmith["runs"][0]["n_graded"] == 42511
    assert swesmith["levels"] == ["file", "module", "entity"]
    arms = {r["arm"]: r["n_trials"] for r in d["embedded: swegym"]["runs"]}
    assert arms == {"base": 20156, "s85": 19034}


def test_plateau_command_writes_the_json_contract(tmp_path, capsys):
    from saturation.io import write_table
    from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau

    spec = PlateauSpec(
        levels=(LevelSpec("file", 0.55, 0.02, 0.0, 15.0),),
        n_steps=40,
        prompts_per_step=16,
        samples_per_prompt=4,
        pool_size=2000,
        task_sd=0.5,
    )
    ds, _ = simulate_plateau(spec, seed=8)
    path = write_table(ds, tmp_path / "t.csv")
    rc = main(
        [
            "plateau",
            str(path),
            "--separate",
            "--tune",
            "1500",
            "--json",
            str(tmp_path / "p.json"),
            "--idata",
            str(tmp_path / "p.nc"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "change point" in out and "diagnostics: R-hat max" in out
    d = json.loads((tmp_path / "p.json").read_text())
    assert set(d) >= {"data", "model", "levels", "diagnostics"}
    assert d["model"]["breakpoint"] == "unknown"
    assert d["data"]["n_trials"] == 40 * 16 * 4
    lvl = d["levels"]["file"]
    assert {
        "changepoint",
        "early_slope",
        "late_slope",
        "start",
        "end",
        "headroom",
        "p_early_positive",
        "p_late_in_rope",
        "bf01_late_zero",
        "p_plateaued_by_step",
        "verdict",
        "reason",
        "late_gain_upper",
        "slowdown_ratio",
        "bf_changepoint_vs_line",
        "davies",
    } <= set(lvl)
    assert lvl["verdict"] in ("plateaued", "slowed", "still rising", "no change point", "undetermined")
    assert f"file: {lvl['verdict'].upper()}" in out and f"verdict: {d['summary']}" in out
    assert (tmp_path / "p.nc").stat().st_size > 0
    # a known break runs the split model (as the report does) and prints no change-point pooling
    rc = main(["plateau", str(path), "--breakpoint", "15", "--json", str(tmp_path / "k.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "known break at step 15 (split model" in out
    assert "shared change points" not in out and "pooled" not in out and "    change point " not in out
    assert json.loads((tmp_path / "k.json").read_text())["model"]["continuity"] == "jump"


def test_diagnose_command_defaults_to_the_embedded_data(tmp_path, capsys):
    rc = main(["diagnose", "--draws", "500", "--json", str(tmp_path / "d.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "SYNTHETIC" in out
    for title in ("1. Real skill", "2. Reliability", "3. Did policy entropy collapse"):
        assert title in out
    d = json.loads((tmp_path / "d.json").read_text())
    assert set(d) == {"data", "cardinality", "reliability", "entropy"}
    for part in ("cardinality", "reliability", "entropy"):
        assert set(d[part]) == {"verdicts", "numbers", "diagnostics"}
        assert d[part]["diagnostics"]["converged"]
    assert set(d["cardinality"]["verdicts"]) == {"file", "module", "entity", "n_locations"}
    assert d["entropy"]["numbers"]["runs"]["code-contests-g1"]["verdict"] == "entropy collapse"


def test_ingest_skyrl_run_directories(tmp_path, capsys):
    from skyrl_fixtures import run_dir

    a, b = run_dir(tmp_path / "base"), run_dir(tmp_path / "s85", model="ckpt/s85")
    nc, mnc, rep = tmp_path / "trials.nc", tmp_path / "metrics.nc", tmp_path / "ingest.json"
    argv = [
        "ingest",
        str(a),
        str(b),
        "-o",
        str(nc),
        "--metrics-out",
        str(mnc),
        "--arm",
        f"{a}=base",
        "--arm",
        f"{b}=s85",
        "--json",
        str(rep),
        "--no-progress",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "rows read 48: kept 36 (of which ungraded 4" in out and "superseded eval-dump rows 12" in out
    assert "answers: empty_file_name 2, finish_call 22, no_finish_call 4" in out and "WARNING" not in out
    assert "ignored (not a SkyRL file)" in out
    trials = open_trials(nc)
    assert set(trials["run"].values) == {"Qwen/Qwen3-8B", "ckpt/s85"} and set(trials["arm"].values) == {"base", "s85"}
    metrics = open_trials(mnc)
    assert "s85" in metrics["run"].values and "reward_mean" in metrics
    assert json.loads(rep.read_text())["accounting"]["rows_kept"] == 36
    assert main(["describe", str(nc)]) == 0
    bad = run_dir(tmp_path / "bad")
    (bad / "trajectories" / "step_1" / "train" / "x_0.json.zst").write_bytes(b"not zstd")
    assert main(["ingest", str(bad), "-o", str(tmp_path / "b.nc")]) == 1
    assert "x_0.json.zst" in capsys.readouterr().err
    assert main(["ingest", str(bad), "-o", str(tmp_path / "b.nc"), "--lenient"]) == 0
    assert "1 problem(s)" in capsys.readouterr().out
    assert main(["ingest", str(bad), str(nc), "-o", str(tmp_path / "c.nc")]) == 1
    assert "mix of SkyRL run directories" in capsys.readouterr().err


def test_ingest_never_exits_0_with_an_output_unwritten(tmp_path, capsys):
    from skyrl_fixtures import trajectory, write_trajectory

    root = tmp_path / "traj_only"
    write_trajectory(
        root / "trajectories" / "step_1" / "train" / "repo__a-1_0.json", trajectory("repo__a-1", "perfect")
    )
    mnc = tmp_path / "metrics.nc"
    assert main(["ingest", str(root), "-o", str(tmp_path / "t.nc"), "--metrics-out", str(mnc), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "--metrics-out" in err and "no per-step metrics found" in err and "nothing written" in err
    assert not mnc.exists() and not (tmp_path / "t.nc").exists()
    table = tmp_path / "t.csv"
    table.write_text("run,step,instance_id,sample,graded,reward\nr,1,a,0,true,1.0\n")
    assert main(["ingest", str(table), "-o", str(table)]) == 1
    assert "would overwrite" in capsys.readouterr().err
    assert table.read_text().startswith("run,step")


def test_help_imports_no_scientific_stack():
    """`saturation --help` and `import saturation` stay light: numpy, pandas, xarray, SciPy, PyMC
    and ArviZ are imported by the commands that use them (a fresh interpreter, so the test
    session's own imports do not count)."""
    import subprocess
    import sys

    code = (
        "import sys, saturation, saturation.cli\n"
        "from saturation.cli import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = [m for m in ('numpy', 'pandas', 'xarray', 'scipy', 'pymc', 'arviz', 'dask') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_scenario_names_are_the_registry():
    from saturation.scenarios import SCENARIOS

    assert tuple(SCENARIOS) == S.SCENARIO_NAMES
