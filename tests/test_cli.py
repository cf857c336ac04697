"""The command-line interface: exit codes, outputs and messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from saturation import schema as S
from saturation.cli import EMBEDDED_LEVELS, main
from saturation.io import open_trials
from saturation.series import read_metrics


def test_simulate_then_ingest_then_describe(tmp_path, capsys):
    out = tmp_path / "sim.csv.zst"
    assert main(["simulate", "plateau", str(out), "--seed", "2", "--truth", str(tmp_path / "truth.json")]) == 0
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth["levels"]["file"]["changepoint"] == 40.0
    nc = tmp_path / "trials.nc"
    assert main(["ingest", str(out), "-o", str(nc), "--json", str(tmp_path / "ingest.json")]) == 0
    printed = capsys.readouterr().out
    assert "rows read 46592: kept 46592" in printed
    assert f"46592 trials, levels {', '.join(truth['levels'])}" in printed and "np.str_" not in printed
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
    assert swesmith["levels"] == list(EMBEDDED_LEVELS["swesmith"])  # what `plateau --levels` checks against
    arms = {r["arm"]: r["n_trials"] for r in d["embedded: swegym"]["runs"]}
    assert arms == {"base": 20156, "s85": 19034, "s85-lr1.2e-5": 18048}


def test_the_cli_analyses_one_phase_and_says_what_it_left_out(tmp_path, capsys, small_plateau):
    """Train and eval trials in one table: plateau fits the train trials with a NOTE naming the
    eval trials left out (and the JSON's data summary says so); --phase eval fits the others;
    a phase the table lacks is a usage error (exit 2) on one line, before any fit."""
    import numpy as np
    import pandas as pd

    from saturation.io import trials_to_frame, write_table

    ds, _ = small_plateau
    frame = trials_to_frame(ds)
    ev = frame.assign(phase="eval", sample=frame["sample"])
    path = write_table(pd.concat([frame, ev], ignore_index=True), tmp_path / "mixed.csv")
    n = len(frame)
    rc = main(["plateau", str(path), "--levels", "file", "--json", str(tmp_path / "p.json")])
    out = capsys.readouterr().out
    assert rc in (0, 3), out
    assert f"NOTE: phase train only ({n} trials); left out: {n} eval trials (--phase to choose)" in out
    d = json.loads((tmp_path / "p.json").read_text())
    assert d["data"]["n_trials"] == n and d["data"]["phases_left_out"] == {"eval": n}
    assert main(["plateau", str(path), "--levels", "file", "--phase", "eval", "--json", str(tmp_path / "e.json")]) in (
        0,
        3,
    )
    assert json.loads((tmp_path / "e.json").read_text())["data"]["phase"] == "eval"
    capsys.readouterr()
    assert main(["plateau", str(path), "--phase", "eval_only"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: phase 'eval_only' is not in the trials (phases: eval, train)", err
    assert np.isfinite(d["levels"]["file"]["end"]["mean"])


def _plateau_trials_csv(tmp_path, levels, seed):
    """A small simulated trial table (40 steps of 16 prompts x 4 rollouts) written as CSV."""
    from saturation.io import write_table
    from saturation.simulate import PlateauSpec, simulate_plateau

    spec = PlateauSpec(
        levels=levels, n_steps=40, prompts_per_step=16, samples_per_prompt=4, pool_size=2000, task_sd=0.5
    )
    ds, _ = simulate_plateau(spec, seed=seed)
    return write_table(ds, tmp_path / "t.csv")


def test_plateau_command_writes_the_json_contract(tmp_path, capsys):
    from saturation.simulate import LevelSpec

    path = _plateau_trials_csv(tmp_path, (LevelSpec("file", 0.55, 0.02, 0.0, 15.0),), seed=8)
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
        "headroom_to_max",
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
    assert f"file: {lvl['verdict']} (" in out and f"answer: {d['summary']}." in out
    assert (tmp_path / "p.nc").stat().st_size > 0
    # a known break runs the split model (as the report does) and prints no change-point pooling
    rc = main(["plateau", str(path), "--breakpoint", "15", "--json", str(tmp_path / "k.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "known break at step 15 (split model" in out
    assert "shared change points" not in out and "pooled" not in out and "known (15)" in out
    assert json.loads((tmp_path / "k.json").read_text())["model"]["continuity"] == "jump"


def test_plateau_levels_get_their_own_change_points_unless_pooled(tmp_path, capsys):
    """Separate change points are the default (pooled ones undercovered on per-trial data,
    docs/calibration.md); ``--pooled`` opts in and says so; both at once is a usage error."""
    from saturation.simulate import LevelSpec

    levels = (LevelSpec("file", 0.55, 0.006, 0.0, 20.0), LevelSpec("module", 0.45, 0.006, 0.0, 20.0))
    path = _plateau_trials_csv(tmp_path, levels, seed=3)
    for flags in ([], ["--separate"]):
        assert main(["plateau", str(path), *flags, "--json", str(tmp_path / "s.json")]) == 0
        model_line = capsys.readouterr().out.splitlines()[0]
        assert "unknown break, separate change points" in model_line, model_line
        together = json.loads((tmp_path / "s.json").read_text())["together"]
        assert together["evidence_weight"] is None and together["caveat"].startswith("separate fits")
    assert main(["plateau", str(path), "--pooled", "--json", str(tmp_path / "p.json")]) == 0
    model_line = capsys.readouterr().out.splitlines()[0]
    assert "unknown break, change points pooled around a common one" in model_line, model_line
    together = json.loads((tmp_path / "p.json").read_text())["together"]
    assert 0 < together["evidence_weight"] <= 1 and together["caveat"] is None
    with pytest.raises(SystemExit) as exc:
        main(["plateau", str(path), "--pooled", "--separate"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


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


def test_diagnose_reward_components_and_their_usage_errors(tmp_path, capsys):
    argv = ["diagnose", "--draws", "250", "--components", "environment/pass_ratio,environment/tag_f1"]
    rc = main([*argv, "--weights", "0.7,0.3", "--json", str(tmp_path / "c.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "4. Did the reward's components move?" in out
    comp = json.loads((tmp_path / "c.json").read_text())["components"]
    assert list(comp["numbers"]["runs"]) == ["code-contests-algo"]
    assert comp["numbers"]["runs"]["code-contests-algo"]["composition_ok"] is True
    for bad, needle in (
        (["--weights", "0.7"], "weights: 1 weight(s) for 2 component(s)"),
        (["--weights", "0.7,inf"], "component_weights must be a finite number"),
        (["--weights", "0.7,x"], "not a comma-separated list of numbers"),
        (["--components", "environment/nope"], "no component 'environment/nope'"),
    ):
        args = [*argv, *bad] if bad[0] == "--weights" else ["diagnose", "--draws", "250", *bad]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err, err
    assert main(["diagnose", "--weights", "1"]) == 2
    assert "--weights needs --components" in capsys.readouterr().err


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
    metrics = read_metrics(mnc)
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


def test_ingest_warns_that_a_dynamic_sampling_runs_reward_metrics_are_of_the_kept_groups(tmp_path, capsys):
    """A run trained with dynamic sampling (upstream's filter lines in its console log): the
    ingest says so in a WARNING and in its JSON, and the metrics file keeps the counts."""
    from saturation.series import dynamic_sampling_runs
    from skyrl_fixtures import dynamic_sampling_log, write

    run = tmp_path / "g1-ds"
    write(run / "train.log", dynamic_sampling_log(5, kind="filter", seed=4)[0])
    mnc, rep = tmp_path / "metrics.nc", tmp_path / "ingest.json"
    assert main(["ingest", str(run), "--metrics-out", str(mnc), "--json", str(rep), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: run Qwen/Qwen3-8B trained with dynamic sampling (filter): SkyRL computes its reward/*" in out
    (note,) = json.loads(rep.read_text())["dynamic_sampling"]
    assert "logged pass@k is 1 by construction" in note
    metrics = read_metrics(mnc)
    assert dynamic_sampling_runs(metrics) == {"Qwen/Qwen3-8B": "filter"}
    assert int(metrics["dynamic_sampling_rounds"].notnull().sum()) == 5


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
    assert main(["ingest", str(table), "-o", str(table)]) == 2
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


# ------------------------------------------------------------------ help texts and defaults
def _parsers():
    """(prog, parser) of ``saturation`` and of every subcommand, from the real parser."""
    import argparse

    from saturation.cli import build_parser

    parser = build_parser()
    yield "saturation", parser
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    yield from ((f"saturation {name}", p) for name, p in sub.choices.items())


def test_every_option_has_help_and_shows_its_default():
    """Every option and positional of every subcommand (all but -h) has a help text, and one
    with a meaningful default (not None / False) names it: "(default X)"."""
    import argparse

    problems, seen = [], 0
    for prog, parser in _parsers():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            seen += 1
            name = f"{prog} {'/'.join(action.option_strings) or action.dest}"
            text = action.help or ""
            if not text.strip() or text == argparse.SUPPRESS:
                problems.append(f"{name}: no help")
                continue
            default = action.default
            if default is None or default is False or default == argparse.SUPPRESS:
                continue
            shown = {str(default)} | ({f"{default:g}"} if isinstance(default, float) else set())
            if "default" not in text or not any(s in text for s in shown):
                problems.append(f"{name}: default {default!r} not in its help {text!r}")
    assert seen > 80
    assert problems == []


def test_every_subcommand_has_a_help_line():
    import argparse

    from saturation.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert {a.dest: bool(a.help) for a in sub._choices_actions} == dict.fromkeys(sub.choices, True)


def test_sampler_help_says_what_auto_means_for_each_model():
    helps = {
        prog: {a.dest: a for a in p._actions}["sampler"]
        for prog, p in _parsers()
        if "sampler" in {a.dest for a in p._actions}
    }
    assert set(helps) == {"saturation plateau", "saturation transfer", "saturation compare"}
    plateau, transfer = helps["saturation plateau"], helps["saturation transfer"]
    compare = helps["saturation compare"]  # NUTS only, like transfer
    assert compare.help == transfer.help and compare.choices == transfer.choices
    assert "auto (default): exact" in plateau.help and "gaussian" in plateau.help and "nutpie" in plateau.help
    assert "exact" in plateau.choices
    assert transfer.help.startswith("auto (default): nutpie") and "exact" not in transfer.choices
    assert "for --likelihood" not in transfer.help


# ------------------------------------------------------------------ checks before the data are read
def _no_load(monkeypatch):
    """The data loader and the fits fail the test if called (the check must come first)."""
    import saturation.cli as cli

    def loaded(*args, **kwargs):
        raise AssertionError("the data were loaded before the arguments were checked")

    monkeypatch.setattr(cli, "_load_trials_arg", loaded)


def _small_table(path, levels=("file",), arms=("a",)):
    """A tiny trial table with per-level F1 columns and an arm column: CSV as written, any
    other suffix (.csv.zst, .jsonl, .parquet) through ``write_table``."""
    from saturation.io import read_trials, write_table

    rows = ["run,step,instance_id,sample,graded,reward" + "".join(f",{lvl}_f1" for lvl in levels) + ",arm"]
    for arm in arms:
        for step in range(8):
            for task in range(3):
                f1 = min(1.0, 0.1 * step + 0.05 * task)
                rows.append(f"r-{arm},{step},t{task},0,true,{f1}" + f",{f1}" * len(levels) + f",{arm}")
    csv = path.with_name(path.name.split(".")[0] + ".csv")
    csv.write_text("\n".join(rows) + "\n")
    return csv if path == csv else write_table(read_trials(csv), path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plateau", "--levels", "foo"], "unknown level(s) foo; have file, module, entity"),
        (["plateau", "--levels", "file,,entity"], "--levels file,,entity: empty name in the comma-separated list"),
        (["plateau", "--levels", "file,file"], "--levels: file given more than once"),
        (
            ["plateau", "--sampler", "exact", "--likelihood", "binomial"],
            "--sampler exact draws the Gaussian plateau model only",
        ),
        (["plateau", "--response", "reward", "--levels", "file"], "--levels applies to a per-level response"),
        (
            ["transfer", "--arms", "s85"],
            "invalid transfer configuration: a transfer analysis compares at least two arms",
        ),
        (["transfer", "--arms", "base,s85", "--reference", "x"], "invalid transfer configuration: reference arm x is"),
        (["simulate", "nope", "{tmp}/x.csv"], "unknown scenario nope; choose from plateau, transfer, series"),
    ],
)
def test_option_errors_come_before_the_data_load(argv, message, tmp_path, monkeypatch, capsys):
    _no_load(monkeypatch)
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}"), err
    assert len(err.strip().splitlines()) == 1 and "'" not in err and "[" not in err


@pytest.mark.parametrize("suffix", [".csv", ".csv.zst", ".nc"])
def test_unknown_level_of_a_file_is_found_from_its_header(suffix, tmp_path, monkeypatch, capsys):
    """CSV headers (plain or zstd) and a netCDF Dataset's level coordinate name the levels: an
    unknown level is an error before the rows are read."""
    path = tmp_path / f"t{suffix}"
    if suffix == ".nc":
        from saturation.io import read_trials, write_trials

        write_trials(read_trials(_small_table(tmp_path / "t.csv", ("file", "entity"))), path)
    else:
        assert _small_table(path, ("file", "entity")) == path
    _no_load(monkeypatch)
    assert main(["plateau", str(path), "--levels", "entity,foo,bar"]) == 2
    assert capsys.readouterr().err == "error: unknown level(s) foo, bar; have file, entity\n"


def test_option_errors_do_not_wait_for_the_scientific_stack():
    """A usage error is reported without importing numpy, xarray or PyMC (a fresh interpreter:
    the session's own imports do not count)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from saturation.cli import main\n"
        "codes = [main(['plateau', '--levels', 'foo']), main(['plateau', 'no/such.csv']),\n"
        "         main(['transfer', '--arms', 'base']), main(['simulate', 'nope', 'x.csv'])]\n"
        "heavy = [m for m in ('numpy', 'xarray', 'pymc', 'pytensor') if m in sys.modules]\n"
        "print(codes, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[2, 2, 2, 2] []", out.stderr


def test_plateau_checks_needing_the_data_come_before_the_fit(tmp_path, monkeypatch, capsys):
    """JSON lines name their levels only in the rows: checked after the load, before the fit."""
    import saturation.models

    def fitted(*args, **kwargs):
        raise AssertionError("fitted before the levels were checked")

    monkeypatch.setattr(saturation.models, "fit_plateau", fitted)
    path = _small_table(tmp_path / "t.jsonl", ("file", "entity"))
    assert main(["plateau", str(path), "--levels", "foo"]) == 2
    assert capsys.readouterr().err == "error: unknown level(s) foo; have file, entity\n"
    assert main(["plateau", str(path), "--response", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --response nosuch: no such variable in the trials; per level: f1, precision, ")
    assert err.endswith("; per trial: graded, reward\n")
    assert "'" not in err and "[" not in err


def test_transfer_checks_needing_the_data_come_before_the_fit(tmp_path, monkeypatch, capsys):
    import saturation.models

    def fitted(*args, **kwargs):
        raise AssertionError("fitted before the arms were checked")

    monkeypatch.setattr(saturation.models, "fit_transfer", fitted)
    path = _small_table(tmp_path / "t.csv", arms=("base", "s85"))
    assert main(["transfer", str(path), "--arms", "base,s90"]) == 2
    assert capsys.readouterr().err == "error: unknown arm(s) s90; the data has base, s85\n"
    assert main(["transfer", str(path), "--reference", "ref"]) == 2
    assert capsys.readouterr().err == "error: --reference ref is not an arm of the data; it has base, s85\n"
    one = _small_table(tmp_path / "one.csv")
    (tmp_path / "noarm.csv").write_text(
        "\n".join(",".join(line.split(",")[:-1]) for line in one.read_text().splitlines()) + "\n"
    )
    assert main(["transfer", str(tmp_path / "noarm.csv")]) == 2
    assert "needs trials with an arm column" in capsys.readouterr().err


def test_compare_checks_come_before_the_fit(tmp_path, monkeypatch, capsys):
    import saturation.models.sigmoid

    def fitted(*args, **kwargs):
        raise AssertionError("fitted before the arguments were checked")

    monkeypatch.setattr(saturation.models.sigmoid, "fit_sigmoid", fitted)
    path = _small_table(tmp_path / "t.csv", arms=("t2", "t2yarn"))
    assert main(["compare", str(tmp_path / "missing.csv")]) == 2
    assert capsys.readouterr().err.endswith("missing.csv: no such file or directory\n")
    assert main(["compare", str(path), "--arms", "t2,t2yarn", "--reference", "t3"]) == 2
    assert capsys.readouterr().err == (
        "error: invalid saturation-curve configuration: reference t3 is not one of the arms t2, t2yarn\n"
    )
    assert main(["compare", str(path), "--arms", "t2,t9"]) == 2
    assert capsys.readouterr().err == "error: unknown arm(s) t9; the data has t2, t2yarn\n"
    assert main(["compare", str(path), "--backtest", "3"]) == 2
    assert capsys.readouterr().err == (
        "error: invalid saturation-curve configuration: backtest 3: a back-test fits at least 5 steps per arm\n"
    )
    assert main(["compare", str(path), "--backtest", "500"]) == 2
    assert "needs a later step in every arm" in capsys.readouterr().err
    assert main(["compare", str(path), "--arm-attr", "t2=context"]) == 2
    assert capsys.readouterr().err.startswith("error: --arm-attr t2=context: expected ARM:KEY=VALUE (e.g. t2yarn:")
    assert main(["compare", str(path), "--match", "context="]) == 2
    assert capsys.readouterr().err == "error: --match context=: expected KEY or KEY=VALUE (e.g. context=81920)\n"
    assert main(["compare", str(path), "--arm-attr", "t9:context=1"]) == 2
    assert capsys.readouterr().err == "error: arm properties: unknown arm(s) t9; the data has t2, t2yarn\n"
    assert main(["compare", str(path), "--x", "compute"]) == 2
    assert capsys.readouterr().err.startswith("error: --x compute needs --metrics")
    assert main(["compare", str(path), "--metrics", str(path)]) == 2
    assert capsys.readouterr().err == "error: --metrics and --compute set the compute axis: add --x compute\n"
    assert main(["compare", str(path), "--x", "compute", "--metrics", str(tmp_path / "nope.csv")]) == 2
    assert "nope.csv: no such file or directory" in capsys.readouterr().err
    assert main(["compare", str(path), str(path), "--metric", "reward/avg_raw_reward"]) == 2
    assert "--metric reward/avg_raw_reward: give one per-step metrics file" in capsys.readouterr().err
    assert main(["compare", str(path), "--metric", "reward/avg_raw_reward", "--paired"]) == 2
    assert "--metric fits logged per-step values: --paired is for trials" in capsys.readouterr().err
    assert main(["compare", str(path), "--paired", "--likelihood", "gaussian"]) == 2
    assert "paired arms need binary rewards" in capsys.readouterr().err
    one = _small_table(tmp_path / "one.csv")
    (tmp_path / "noarm.csv").write_text(
        "\n".join(",".join(line.split(",")[:-1]) for line in one.read_text().splitlines()) + "\n"
    )
    assert main(["compare", str(tmp_path / "noarm.csv")]) == 2
    assert "needs trials with an arm column" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:  # no default data: the trials are required
        main(["compare"])
    assert info.value.code == 2


@pytest.mark.slow
def test_compare_command_fits_simulated_arms_and_writes_the_json_contract(tmp_path, capsys):
    arms = tmp_path / "arms.csv"
    assert main(["simulate", "sigmoid-arms", str(arms)]) == 0
    out = tmp_path / "compare.json"
    argv = ["compare", str(arms), "--reference", "t2", "--json", str(out), "--backtest", "25"]
    assert main(argv) == 0
    got = json.loads(out.read_text())
    assert set(got["forecast"]) == {"t2", "t2yarn"} and got["backtest"]["fit_steps"] == 25
    assert set(got["backtest"]["arms"]["t2"]) >= {"coverage", "mae", "mae_persistence", "held_out"}
    assert set(got) >= {"arms", "contrasts", "diagnostics", "reference"} and got["reference"] == "t2"
    assert set(got["contrasts"]) == {"t2yarn"} and got["contrasts"]["t2yarn"]["confounded"] is None
    for arm in ("t2", "t2yarn"):
        assert {"mean", "sd", "hdi"} <= set(got["arms"][arm]["asymptote"])
    text = capsys.readouterr().out
    assert "asymptote" in text and "No confounder declared" in text and "converged" in text
    assert "more steps (to step 60)" in text and "predictive intervals covered" in text
    # the same arms on a compute axis: the runs' logged seconds per step
    from saturation.series import write_metrics_csv
    from saturation.simulate import simulate_arm_step_metrics

    metrics = write_metrics_csv(simulate_arm_step_metrics(seed=0)[0], tmp_path / "metrics.csv")
    on_compute = tmp_path / "compute.json"
    argv = ["compare", str(arms), "--x", "compute", "--metrics", str(metrics), "--json", str(on_compute)]
    assert main(argv) == 0
    got = json.loads(on_compute.read_text())
    assert got["x"] == {"axis": "compute", "compute": "timing/step"}
    assert set(got["data"]["compute"]["arms"]) == {"t2", "t2yarn"}
    text = capsys.readouterr().out
    # the midpoint is printed in the compute axis' unit (the display table's column names it)
    assert "x = cumulative timing/step (compute)" in text and "midpoint (cumulative timing/step)" in text
    # the same arms as a metrics CSV of logged per-step means (each run an arm)
    from saturation.simulate import simulate_sigmoid_series

    logged = write_metrics_csv(simulate_sigmoid_series(seed=0)[0], tmp_path / "arms.metrics.csv")
    on_series = tmp_path / "series.json"
    argv = ["compare", str(logged), "--metric", "reward/avg_raw_reward", "--reference", "t2", "--json", str(on_series)]
    assert main(argv) == 0
    got = json.loads(on_series.read_text())
    assert got["data"]["series"] == "reward/avg_raw_reward" and got["likelihood"] == "gaussian"
    assert "reward/avg_raw_reward logged at 80 (arm, step) points" in capsys.readouterr().out


def test_numbers_out_of_range_are_usage_errors(capsys):
    for argv in (
        ["plateau", "--rope", "0"],
        ["plateau", "--rope-relative", "-0.1"],
        ["plateau", "--breakpoint", "-1"],
        ["plateau", "--breakpoint", "nan"],
        ["diagnose", "--pass-rope", "0"],
        ["diagnose", "--success-threshold", "inf"],
        ["transfer", "--knot-every", "0"],
        ["transfer", "--sampler", "exact"],
        ["calibrate", "plateau", "--misspecify-late-slope-sd", "-1"],
    ):
        # argparse's own check, or the config's validate() (the options a config declares)
        try:
            code = main(argv)
        except SystemExit as info:
            code = info.code
        assert code == 2, argv
        err = capsys.readouterr().err
        option = argv[-2].lstrip("-")
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert option in err or option.replace("-", "_") in err, (argv, err)


def test_fit_outputs_are_checked_before_the_data_load(tmp_path, monkeypatch, capsys):
    _no_load(monkeypatch)
    for command in ("plateau", "transfer", "describe", "diagnose"):
        assert main([command, "--json", str(tmp_path / "no" / "x.json")]) == 1, command
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "does not exist" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ missing inputs: exit 2, one line
@pytest.mark.parametrize(
    "argv",
    [
        ["plateau", "{missing}"],
        ["transfer", "{missing}"],
        ["describe", "{missing}"],
        ["diagnose", "{missing}"],
        ["diagnose", "--metrics", "{missing}"],
        ["ingest", "{missing}", "-o", "{tmp}/o.nc"],
        ["report", "{missing}", "--out", "{tmp}/r"],
        ["report", "--data", "{missing}", "--out", "{tmp}/r"],
    ],
)
def test_a_missing_input_is_a_usage_error_naming_the_file(argv, tmp_path, monkeypatch, capsys):
    from saturation.cli import EXIT_USAGE

    _no_load(monkeypatch)
    missing = tmp_path / "no" / "such.csv"
    argv = [a.replace("{missing}", str(missing)).replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    flag = "--metrics " if "--metrics" in argv else "--data " if "--data" in argv else ""
    assert err == f"error: {flag}{missing}: no such file or directory\n"
    assert not (tmp_path / "o.nc").exists() and not (tmp_path / "r").exists()


# ------------------------------------------------------------------ plain messages
def test_key_errors_print_their_message_with_plain_names():
    from saturation.cli import _error_of

    code, message = _error_of(KeyError("unknown level(s) ['foo']; have ['file', 'module', 'entity']"), str, str)
    assert (code, message) == (2, "unknown level(s) foo; have file, module, entity")
    assert _error_of(KeyError("unknown arm(s) [np.str_('x')]; the data has ['base']"), str, str)[1] == (
        "unknown arm(s) x; the data has base"
    )
    assert _error_of(KeyError("needs an 'arm' coordinate"), str, str)[1] == "needs an 'arm' coordinate"
    assert _error_of(KeyError("f1_n"), str, str)[1] == "unknown name 'f1_n'"  # a bare key, not a message


def test_a_key_error_from_a_command_is_one_plain_line(monkeypatch, capsys):
    import saturation.cli as cli

    def broken(args):
        raise KeyError("unknown arm(s) ['s90']; the data has ['base', 's85']")

    monkeypatch.setattr(cli, "_cmd_describe", broken)
    assert main(["describe"]) == 2
    assert capsys.readouterr().err == "error: unknown arm(s) s90; the data has base, s85\n"


def test_names_are_printed_plain():
    import numpy as np

    from saturation.cli import _names

    assert _names([np.str_("base"), np.str_("s85")]) == "base, s85"
    assert _names(np.array(["file", "module"], dtype=object)) == "file, module"


def test_transfer_summary_prints_arms_as_plain_names(tmp_path, monkeypatch, capsys):
    """The printed summary of a transfer fit (a stand-in for the fit: the printing is under
    test), and the arms of the real data step: plain str, never np.str_."""
    import types

    import numpy as np

    import saturation.models
    from saturation.io import read_trials
    from saturation.models.transfer import TransferFit, transfer_data

    path = _small_table(tmp_path / "t.csv", arms=("base", "s85"))
    assert all(type(a) is str for a in transfer_data(read_trials(path)).arms)

    ci = {"mean": 0.1, "sd": 0.01, "hdi": [0.08, 0.12]}
    out = {
        "data": {"n_trials": 48, "n_groups": 48, "synthetic": ""},
        "reference": "base",
        "arms": ["s85"],
        "initial": {
            "s85": {
                "steps": [0, 1],
                "delta_all_rollout": ci,
                "delta_graded_only": ci,
                "delta_ungraded_rate": ci,
                "p_positive": 0.9,
            }
        },
        "crossover_step": {"s85": {"mean": None, "p_no_crossover": 1.0}},
        "last_step": {"s85": {"step": 7, "delta_all_rollout": ci}},
        "verdicts": {"s85": "s85 starts ahead of base"},
        "diagnostics": {"rhat_max": 1.0, "ess_bulk_min": 1000.0, "divergences": 0, "converged": True},
    }
    import pandas as pd

    fit = types.SimpleNamespace(
        to_dict=lambda: out,
        table=lambda: pd.DataFrame([{"arm": np.str_("s85"), "crossover step": None, "P(no crossover)": 1.0}]),
        details=lambda: list(out["verdicts"].values()),
        answer=lambda: " ".join(out["verdicts"].values()),
        data=types.SimpleNamespace(arms=[np.str_("base"), np.str_("s85")], summary=out["data"]),
        config=types.SimpleNamespace(reference="base"),
        timings={"compile": 0.0, "sample": 0.0, "sampler": "nutpie"},
        parts=lambda: [],
    )
    fit.heading = lambda: TransferFit.heading(fit)  # the real heading, on the made-up draws' numbers
    monkeypatch.setattr(saturation.models, "fit_transfer", lambda *a, **k: fit)
    assert main(["transfer", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "transfer model: arms base, s85, reference base" in printed and "np.str_" not in printed
    assert "  s85\n" in printed and "s85 starts ahead of base" in printed


# ------------------------------------------------------------------ no third-party warnings
def test_importing_the_models_prints_no_third_party_warnings(tmp_path):
    """``python -W default -c "import saturation.models"`` prints nothing; nor does the first
    read of PyTensor's BLAS flag, which is where a pip-installed PyTensor warns that it found no
    BLAS (the first graph a fit compiles reads it). The cache directory is fresh, as on a new
    machine or on the first run of a day: ArviZ prints its refactor notice once a day, keyed on
    a stamp file in the user cache directory."""
    import os
    import subprocess
    import sys

    code = "import saturation.models\nimport pytensor\npytensor.config.blas__ldflags\n"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, check=True, timeout=300, env=env
    )
    assert out.stderr == ""


def test_plateau_by_run_prints_one_table_and_lists_the_failed_run(tmp_path, capsys):
    """``plateau --by run``: every run fitted (in process here), one row per run and level,
    the run too short to fit listed as failed (exit 1), one netCDF per fitted run."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "models"))
    from test_runs import _runs

    from saturation.io import write_table

    trials = write_table(_runs(["seed-1", "seed-2", "short"]), tmp_path / "runs.csv")
    out = tmp_path / "fits"
    args = ["plateau", str(trials), "--by", "run", "--scheduler", "sync", "--json", str(tmp_path / "r.json")]
    code = main([*args, "--idata", str(out)])
    text = capsys.readouterr().out
    assert code == 1
    assert "FAILED short:" in text and "2 of 3 runs fitted; 1 failed" in text
    # one block per (run, level) of the runs' display table (the report's table, the same cells)
    assert sum(line in ("  seed-1", "  seed-2") for line in text.splitlines()) == 4
    doc = json.loads((tmp_path / "r.json").read_text())
    assert set(doc["runs"]) == {"seed-1", "seed-2"} and doc["failures"][0]["run"] == "short"
    assert sorted(p.name for p in out.iterdir()) == ["seed-1.nc", "seed-2.nc"]
    assert main(["plateau", str(trials), "--by", "run", "--run", "seed-1"]) == 2


def test_diagnose_metrics_without_the_keys_names_the_file_and_never_uses_embedded_data(tmp_path, capsys, monkeypatch):
    """Issue 40: a metrics file whose keys are not SkyRL's exited 0 after analysing the
    embedded synthetic trials, skipping sections 2 and 3 silently."""
    import saturation.replica as replica

    metrics = tmp_path / "m.csv"
    metrics.write_text("run,step,critic/score/mean,actor/entropy\n" + "".join(f"r,{s},0.{s},1.0\n" for s in range(9)))

    def no_embedded(*a, **k):
        raise AssertionError("the embedded data were loaded for a user's file")

    monkeypatch.setattr(replica, "load_embedded", no_embedded)
    assert main(["diagnose", "--metrics", str(metrics)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {metrics}: none of the diagnoses fit this file")
    assert "pass_at_k" in err and "--pass1/--passk" in err and err.count("\n") == 1


def _sparse_series(path, knees):
    """A validation metric logged every 10 steps; each run a hinge with its knee between logged points."""
    import numpy as np

    rng = np.random.default_rng(3)
    lines = ["run,step,val/acc"]
    for run, (knee, late) in knees.items():
        for st in range(0, 301, 10):
            y = (0.2 + 0.4 * st / knee if st < knee else 0.6 + late * (st - knee)) + rng.normal(0, 0.01)
            lines.append(f"{run},{st},{y:.6f}")
    path.write_text("\n".join(lines) + "\n")


def test_plateau_on_a_logged_series_finds_a_knee_between_sparse_points(tmp_path, capsys):
    """Issue 44: a per-step series from one command, the change point on the step axis (a
    knee at 55 between logged steps 50 and 60 was "no change point": the first candidate
    was the 6th logged point); a certain late gain is "slowed", not "plateaued"."""
    metrics = tmp_path / "m.csv"
    _sparse_series(metrics, {"a": (55, 0.0), "b": (125, 0.0004)})
    out = tmp_path / "p.json"
    assert main(["plateau", str(metrics), "--metric", "val/acc", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["metric"] == "val/acc" and set(res["runs"]) == {"a", "b"}
    (a,) = res["runs"]["a"]["levels"].values()
    assert a["verdict"] == "plateaued" and a["changepoint"]["hdi"][0] <= 55 <= a["changepoint"]["hdi"][1]
    assert a["changepoint"]["hdi"][1] - a["changepoint"]["hdi"][0] < 10  # located inside one logging interval
    (b,) = res["runs"]["b"]["levels"].values()
    assert b["verdict"] == "slowed" and b["p_late_positive"] > 0.95
    printed = capsys.readouterr().out
    assert "run a, metric val/acc (31 logged steps)" in printed


def test_plateau_on_a_long_logged_series_fits_bin_means_and_says_so(tmp_path, capsys):
    """A series of 1,501 logged points (a PPO run's episode reward ran for minutes and 10 GB
    unbinned) is fitted on 375 bin means of 4-5 points; the output and the JSON say so, and the knee is
    still located."""
    rng = np.random.default_rng(3)
    steps = np.arange(1, 1502)
    y = np.minimum(steps, 600) / 1000.0 + rng.normal(0.0, 0.01, steps.size)
    metrics = tmp_path / "long.csv"
    metrics.write_text("step,reward\n" + "".join(f"{t},{v:.5f}\n" for t, v in zip(steps, y, strict=True)))
    out = tmp_path / "p.json"
    assert main(["plateau", str(metrics), "--metric", "reward", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(1501 logged steps, fitted as the means of 375 runs of 4-5 consecutive points)" in printed
    (run,) = json.loads(out.read_text())["runs"].values()
    assert run["data"]["binned"] == {"points": 1501, "bins": 375, "points_per_bin": [4, 5]}
    (level,) = run["levels"].values()
    lo, hi = level["changepoint"]["hdi"]
    assert lo - 10 <= 600 <= hi + 10 and level["verdict"] == "plateaued"


def test_plateau_metric_names_the_logged_keys_when_missing(tmp_path, capsys):
    metrics = tmp_path / "m.csv"
    _sparse_series(metrics, {"a": (55, 0.0)})
    assert main(["plateau", str(metrics), "--metric", "reward"]) == 2
    err = capsys.readouterr().err
    assert str(metrics) in err and "val/acc" in err and err.count("\n") == 1


def _console(setup: str, *args: str, tmp_path) -> tuple[int, str, str]:
    """Run ``setup``, then the console script (``saturation.cli.run``) with ``args``, in a
    fresh interpreter: its exit code, stdout and stderr."""
    import subprocess
    import sys

    code = setup + "from saturation.cli import run\nrun()\n"
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return out.returncode, out.stdout, out.stderr


def test_console_script_exits_with_mains_code_after_the_exit_handlers(tmp_path):
    """``run`` (the console script) ends the process without the interpreter's teardown, but
    only after the output is flushed and the atexit handlers ran; the exit code is main's."""
    marker = tmp_path / "handler-ran"
    code = f"import atexit, pathlib\natexit.register(lambda: pathlib.Path({str(marker)!r}).write_text('yes'))\n"
    rc, out, err = _console(code, "describe", tmp_path=tmp_path)
    assert rc == 0 and marker.read_text() == "yes"
    assert out.rstrip().splitlines()[-1] and "trials" in out  # the whole summary, flushed
    marker.unlink()
    rc, out, err = _console(code, "plateau", "--level", "no-such-level", tmp_path=tmp_path)
    assert rc == 2 and err.startswith("error:") and marker.read_text() == "yes"


def test_console_script_waits_for_a_running_thread(tmp_path):
    """A non-daemon thread still running when main returns: the ordinary exit, which waits."""
    marker = tmp_path / "thread-done"
    code = (
        "import pathlib, threading, time\n"
        f"threading.Thread(target=lambda: (time.sleep(1), pathlib.Path({str(marker)!r}).write_text('done'))).start()\n"
    )
    rc, _, _ = _console(code, "--version", tmp_path=tmp_path)
    assert rc == 0 and marker.read_text() == "done"
    marker.unlink()
    rc, _, _ = _console(code, "plateau", "--level", "no-such-level", tmp_path=tmp_path)
    assert rc == 2 and marker.read_text() == "done"


def test_warnings_are_shown_without_the_source_line_that_raised_them(tmp_path, capsys):
    """A warning during a command is its text (a multi-line convergence banner as it is, a
    one-line warning after "warning:"), never "cli.py:1050: ConvergenceWarning" and the
    source line; the formatter is restored when the command returns."""
    import warnings

    from saturation import cli

    before = warnings.formatwarning
    banner = "\n!!!!\nfit DID NOT CONVERGE: R-hat max 1.5\n!!!!"
    assert cli._format_warning(UserWarning(banner), UserWarning, "cli.py", 1050) == banner + "\n"
    assert cli._format_warning(RuntimeWarning("x\x1b[31m"), RuntimeWarning, "a.py", 3) == "warning: x\\x1b[31m\n"
    seen = []

    def command(args):
        seen.append(warnings.formatwarning)
        return 0

    parser = cli.build_parser
    try:
        cli.build_parser = lambda: _with_command(parser(), command)
        assert cli.main(["describe"]) == 0
    finally:
        cli.build_parser = parser
    assert seen == [cli._format_warning] and warnings.formatwarning is before


def _with_command(parser, command):
    """``parser`` whose ``describe`` runs ``command``."""
    parser.set_defaults(func=command)
    for action in parser._subparsers._group_actions:
        for sub in action.choices.values():
            sub.set_defaults(func=command)
    return parser


def test_describe_a_per_step_metrics_file_instead_of_refusing_it(tmp_path, capsys):
    """A per-step metrics file (here a CSV of step, reward, kl) is described as one: its runs,
    logged steps and metrics, and how to fit one; the JSON has the same. A file that is
    neither trials nor metrics keeps the trials' error."""
    metrics = tmp_path / "m.csv"
    metrics.write_text("step,reward,kl\n" + "".join(f"{t},{t / 100:.2f},{0.01 * t:.3f}\n" for t in range(1, 31)))
    out = tmp_path / "d.json"
    assert main(["describe", str(metrics), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "per-step metrics (not graded trials)" in printed and "steps 1..30 (30), 2 metrics" in printed
    (d,) = json.loads(out.read_text()).values()
    assert d["metrics"] == ["kl", "reward"] and d["runs"][0]["n_steps"] == 30
    (tmp_path / "bad.csv").write_text("a,b\n")
    assert main(["describe", str(tmp_path / "bad.csv")]) == 1
    assert "graded-trials input" in capsys.readouterr().err


def test_ingest_reads_a_wandb_run_directory_as_a_run_log(tmp_path, capsys):
    """A wandb run directory holds files/output.log, as a SkyRL run directory holds console
    logs: ingest reads it as the wandb run it is (on its declared step axis)."""
    pytest.importorskip("wandb")
    from saturation.series import read_metrics as read_metrics_nc
    from skyrl_fixtures import hf_trainer_wandb_run_dir

    root, _ = hf_trainer_wandb_run_dir(tmp_path / "trl")
    (run_dir,) = (root / "wandb").glob("offline-run-*")
    (run_dir / "files").mkdir(exist_ok=True)
    (run_dir / "files" / "output.log").write_text("training started\n")
    out = tmp_path / "m.nc"
    assert main(["ingest", str(run_dir), "--metrics-out", str(out)]) == 0
    assert "(wandb)" in capsys.readouterr().out
    assert list(read_metrics_nc(out)["step"].values) == [0, 5, 10, 15, 20]
