"""Run logs of other frameworks -> the per-step metrics Dataset (saturation.runlogs).

Each fixture is written by the framework's own logging code (tests/runlog_fixtures.py); every
logged value is asserted at its step, and the accounting identity
``records == kept + foreign + malformed`` on every file."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

import runlog_fixtures as F
from saturation import runlogs as R
from saturation import schema as S


def _value(ds, run, key, step):
    return float(ds[S.metric_variable(ds, key)].sel({S.RUN: run, S.STEP: step}))


def _assert_logged(ds, run, logged, *, digits=None):
    """Every (step, key, value) logged is in the Dataset at its step (the last logged wins);
    every other cell of the run is missing."""
    expect: dict[tuple[int, str], float] = {}
    for step, metrics in logged:
        for key, value in metrics.items():
            expect[(step, key)] = float(f"{value:.{digits}f}") if digits is not None else float(value)
    for (step, key), value in expect.items():
        got = _value(ds, run, key, step)
        assert (math.isnan(value) and math.isnan(got)) or got == value, (run, step, key, got, value)
    n_cells = int(sum(np.isfinite(ds[v].sel({S.RUN: run})).sum() for v in ds.data_vars))
    assert n_cells == sum(1 for v in expect.values() if not math.isnan(v))


def _identity(accounting):
    for a in accounting:
        assert a["records"] == a["kept"] + a["foreign"] + a["malformed"], a


def _verl_run(seed=0, steps=12, val_every=5):
    rng = np.random.default_rng(seed)
    logged = [(0, F.verl_val_metrics(rng))]
    logged += [(s, F.verl_metrics(s, rng, val=s % val_every == 0)) for s in range(1, steps + 1)]
    return logged


@pytest.mark.parametrize("variant", ["2025", "2024"])
def test_verl_console_every_value_at_its_step(tmp_path, variant):
    logged = _verl_run()
    path = F.write_verl_console(tmp_path / "ppo_gsm8k.log", logged, variant=variant)
    assert R.detect_format(path) == "verl-console"
    res = R.read_runlogs([path])
    ds = res.metrics
    # 2024's tracker rounds to 3 places; 2025's pprint.pformat keeps every digit (np.float64(...))
    _assert_logged(ds, "ppo_gsm8k", logged, digits=3 if variant == "2024" else None)
    (a,) = res.accounting
    _identity(res.accounting)
    assert a["kept"] == len(logged) and a["malformed"] == 0 and a["foreign"] == len(logged) + 3
    assert a["line_prefixes"] == {"(TaskRunner pid=...)" if variant == "2025" else "(main_task pid=...)": 13}
    # validation before training: its own phase
    assert json.loads(ds.attrs["validation_only_steps"]) == {"ppo_gsm8k": [0]}
    val = S.metric_variable(ds, "val-core/openai/gsm8k/reward/mean@1")
    assert ds[val].attrs["phase"] == "validation"
    assert ds[S.metric_variable(ds, "critic/score/mean")].attrs["phase"] == "train"
    assert np.isnan(_value(ds, "ppo_gsm8k", "critic/score/mean", 0))


def test_verl_console_resumed_run_later_attempt_wins(tmp_path):
    first = _verl_run(seed=0, steps=13)
    rng = np.random.default_rng(1)
    # resumed from the step-10 checkpoint: validation at step 10 alone, then steps 11.. again
    second = [(10, F.verl_val_metrics(rng))] + [(s, F.verl_metrics(s, rng, val=s % 5 == 0)) for s in range(11, 16)]
    path = F.write_verl_console(tmp_path / "run.log", first + second)
    res = R.read_runlogs([path])
    ds = res.metrics
    merged: dict[int, dict] = {}
    for step, metrics in first + second:
        merged.setdefault(step, {}).update(metrics)  # later wins, key by key
    _assert_logged(ds, "run", sorted(merged.items()))
    (a,) = res.accounting
    assert a["restarts"] == 1
    # replaced: the val keys at step 10, every key of steps 11-13
    assert a["values_superseded"] == 2 + sum(len(first[s][1]) for s in (11, 12, 13))
    assert a["kept"] == len(first) + len(second)
    # step 10 holds training keys too (the first attempt's): not validation-only
    assert json.loads(ds.attrs["validation_only_steps"]) == {"run": [0]}
    assert any("resumed run" in line for line in R.summary_lines(res))


def test_verl_console_nul_bytes_and_malformed_lines(tmp_path):
    logged = _verl_run(steps=6)
    path = F.write_verl_console(tmp_path / "crash.log", logged)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    n = next(i for i, line in enumerate(lines) if b"step:3 - " in line)
    lines[n] = b"\x00\x00\x00" + lines[n]  # a log may hold NUL bytes (a crash)
    bad = next(i for i, line in enumerate(lines) if b"step:5 - " in line)
    lines[bad] = lines[bad][: lines[bad].index(b"actor/entropy") + 8]  # truncated mid-key
    lines[bad + 1] = lines[bad + 1] + b" - "  # foreign line, untouched
    text = b"\n".join(lines).replace(b"critic/score/max:np.float64(1.0)", b"critic/score/max:True", 1)
    path.write_bytes(text)
    with pytest.raises(R.RunLogError) as err:
        R.read_runlogs([path])
    msg = str(err.value)
    assert f"crash.log:{bad + 1}: item" in msg
    assert "field 'critic/score/max': 'True' is not a number" in msg
    res = R.read_runlogs([path], strict=False)
    (a,) = res.accounting
    _identity(res.accounting)
    assert a["malformed"] == 1 and a["nul_bytes"] == 3 and a["values_not_numeric"] == 1
    assert 5 not in res.metrics[S.STEP].values  # its one line was malformed
    assert _value(res.metrics, "crash", "critic/score/mean", 3) == float(logged[3][1]["critic/score/mean"])


def test_verl_console_parallel_matches_serial(tmp_path, monkeypatch):
    logged = _verl_run(steps=300)
    path = F.write_verl_console(tmp_path / "big.log", logged + logged[5:9])  # a resume near the end
    monkeypatch.setattr(R, "BLOCK_BYTES", 4096)  # many blocks, lines cut across them
    serial = R.read_runlogs([path], workers=1)
    parallel = R.read_runlogs([path], workers=2)
    assert serial.metrics.identical(parallel.metrics)
    assert serial.accounting[0]["restarts"] == parallel.accounting[0]["restarts"] == 1
    assert serial.accounting[0]["values_superseded"] == parallel.accounting[0]["values_superseded"] > 0


def test_verl_file_logger_jsonl(tmp_path):
    logged = _verl_run()
    logged[3][1]["actor/pg_loss"] = np.float64("nan")  # orjson writes NaN as null
    path = F.write_verl_jsonl(tmp_path / "exp.jsonl", logged)
    assert R.detect_format(path) == "verl-jsonl"
    res = R.read_runlogs([path])
    logged[3][1].pop("actor/pg_loss")
    _assert_logged(res.metrics, "exp", logged)
    (a,) = res.accounting
    assert a["values_null"] == 1 and a["kept"] == a["records"] == len(logged)
    with open(path, "a") as f:
        f.write('{"step": 99, "data": {"a": "high"}}\n{"step": "x"}\nnot json\n')
    with pytest.raises(R.RunLogError) as err:
        R.read_runlogs([path])
    n = len(logged)
    assert f"exp.jsonl:{n + 1}, field 'a': 'high' is not a number" in str(err.value)
    assert f"exp.jsonl:{n + 2}: not a verl file-tracker record" in str(err.value)
    assert f"exp.jsonl:{n + 3}: malformed JSON" in str(err.value)
    _identity(R.read_runlogs([path], strict=False).accounting)


def test_trl_checkpoints_newest_complete_state(tmp_path):
    out = F.write_trl_output(tmp_path / "qwen-grpo", list(range(10, 101, 10)), save_every=50, logging_steps=10)
    root = tmp_path / "qwen-grpo"
    assert R.detect_format(root) == "trl"
    assert R.detect_format(root / "checkpoint-50" / "trainer_state.json") == "trl"
    res = R.read_runlogs([root])
    logged = [(row["step"], {k: v for k, v in row.items() if k != "step"}) for row in out["history"]]
    _assert_logged(res.metrics, "qwen-grpo", logged)
    (a,) = res.accounting
    assert a["file"].endswith("checkpoint-100/trainer_state.json")
    assert a["superseded_files"] == [str(root / "checkpoint-50" / "trainer_state.json")]
    assert a["kept"] == a["records"] == len(out["history"])
    assert a["logging_steps"] == 10
    assert S.metric_variable(res.metrics, "rewards/accuracy_reward/mean")
    assert res.metrics[S.metric_variable(res.metrics, "eval_reward")].attrs["phase"] == "validation"
    # a half-written newest state: reported; lenient mode reads the newest complete one
    (root / "checkpoint-150").mkdir()
    (root / "checkpoint-150" / "trainer_state.json").write_text('{"log_history": [{"loss": 1.0, "st')
    with pytest.raises(R.RunLogError, match=r"checkpoint-150/trainer_state.json: not a complete JSON file"):
        R.read_runlogs([root])
    lenient = R.read_runlogs([root], strict=False)
    assert lenient.accounting[0]["file"].endswith("checkpoint-100/trainer_state.json")


def test_table_with_several_runs_and_run_column(tmp_path):
    path = tmp_path / "export.csv"
    rows = ["global_step,algorithm,seed,reward,entropy"]
    for algo in ("grpo", "ppo"):
        for seed in (0, 1):
            rows += [f"{s},{algo},{seed},{s / 10 + seed},{1 - s / 20}" for s in range(1, 6)]
    path.write_text("\n".join(rows) + "\n")
    assert R.detect_format(path) == "table"
    with pytest.raises(R.RunLogError) as err:
        R.read_runlogs([path])
    assert "export.csv:2, field 'algorithm': 'grpo' is not a number" in str(err.value)
    assert "--run-column" in str(err.value)
    res = R.read_runlogs([path], run_column=["algorithm", "seed"])
    ds = res.metrics
    assert sorted(ds[S.RUN].values) == [
        "algorithm=grpo,seed=0",
        "algorithm=grpo,seed=1",
        "algorithm=ppo,seed=0",
        "algorithm=ppo,seed=1",
    ]
    assert _value(ds, "algorithm=ppo,seed=1", "reward", 3) == 0.3 + 1
    assert _value(ds, "algorithm=grpo,seed=0", "entropy", 5) == 0.75
    _identity(res.accounting)
    # two runs and no run column: the repeated steps are a problem, not silently merged
    only = tmp_path / "two.csv"
    only.write_text("step,reward\n1,0.1\n2,0.2\n1,0.3\n")
    with pytest.raises(R.RunLogError, match=r"two.csv:4: step 1 of run 'two' appears again"):
        R.read_runlogs([only])


def test_wandb_chart_export(tmp_path):
    path = tmp_path / "wandb_export_2025-03-01T12_00_00.csv"
    header = '"Step","grpo-7b - train/reward","grpo-7b - train/reward__MIN","grpo-7b - train/reward__MAX",'
    header += '"ppo-7b - train/reward","ppo-7b - train/reward__MIN","ppo-7b - train/reward__MAX"'
    lines = [header]
    for s in range(0, 50, 10):
        lines.append(f'"{s}","{s / 100}","{s / 100 - 0.01}","{s / 100 + 0.01}","{s / 200}","{s / 200}","{s / 200}"')
    lines.append('"50","0.5","0.49","0.51","",,')  # ppo stopped earlier
    path.write_text("\n".join(lines) + "\n")
    assert R.detect_format(path) == "wandb-csv"
    res = R.read_runlogs([path])
    ds = res.metrics
    assert sorted(ds[S.RUN].values) == ["grpo-7b", "ppo-7b"]
    for s in range(0, 50, 10):
        assert _value(ds, "grpo-7b", "train/reward", s) == s / 100
        assert _value(ds, "ppo-7b", "train/reward", s) == s / 200
    assert np.isnan(_value(ds, "ppo-7b", "train/reward", 50))
    assert list(ds.data_vars) == ["train_reward"]
    (a,) = res.accounting
    assert len(a["columns_left_out"]) == 4
    _identity(res.accounting)


def test_mlflow_file_store(tmp_path):
    pytest.importorskip("mlflow")
    rng = np.random.default_rng(3)
    runs = {
        "grpo-seed0": [
            (s, {"critic/score/mean": float(rng.uniform()), "actor/entropy": float(rng.uniform())}) for s in range(1, 8)
        ],
        "grpo-seed1": [(s, {"critic/score/mean": float(rng.uniform())}) for s in range(1, 5)],
    }
    store = F.write_mlflow(tmp_path, runs)
    assert R.detect_format(store) == "mlflow"
    res = R.read_runlogs([store])
    for name, logged in runs.items():
        _assert_logged(res.metrics, name, logged)
    (a,) = res.accounting
    assert a["kept"] == a["records"] == sum(len(m) for logged in runs.values() for _, m in logged)
    assert a["restarts"] == 0  # one file per key: the step restarts per file, not per run
    metric = next(store.rglob("metrics/critic/score/mean"))
    with open(metric, "a") as f:
        f.write("1796408429999 0.9 3\n17 oops 4\n")
    res = R.read_runlogs([store], strict=False)
    assert any(f"{metric}:" in p and "'oops' is not a number" in p for p in res.problems)
    assert res.accounting[0]["values_superseded"] == 1  # step 3 logged again: the later line wins
    _identity(res.accounting)


@pytest.mark.parametrize("style", ["torch", "tensorboard"])
def test_tensorboard_events(tmp_path, style):
    pytest.importorskip("tensorboard")
    rng = np.random.default_rng(4)
    logged = [
        (s, {"train/reward": float(np.float32(rng.uniform())), "train/kl": float(np.float32(rng.uniform()))})
        for s in range(1, 9)
    ]
    logdir = F.write_tensorboard(tmp_path / "tensorboard_log" / "proj" / "exp1", logged, style=style)
    assert R.detect_format(logdir) == "tensorboard"
    res = R.read_runlogs([logdir])
    _assert_logged(res.metrics, "exp1", logged)
    (a,) = res.accounting
    _identity(res.accounting)
    assert a["kept"] == 16 and a["foreign"] == 1  # the file_version event
    # a resume writes a second event file: its values win
    import time

    time.sleep(1.1)  # event file names carry the second they were opened
    again = [(s, {"train/reward": float(np.float32(rng.uniform()))}) for s in range(6, 11)]
    F.write_tensorboard(logdir, again, style=style)
    res = R.read_runlogs([logdir.parent])
    merged: dict[int, dict] = {}
    for step, metrics in logged + again:
        merged.setdefault(step, {}).update(metrics)
    _assert_logged(res.metrics, "exp1", sorted(merged.items()))
    assert res.accounting[0]["values_superseded"] == 3


def test_tensorboard_missing_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_file_loader", None)
    with pytest.raises(ValueError, match=r"pip install 'saturation\[tensorboard\]'"):
        R.read_runlogs([path])


def test_read_metrics_dispatches_and_undetected_inputs(tmp_path):
    from saturation.io import write_netcdf

    logged = _verl_run(steps=4)
    log = F.write_verl_console(tmp_path / "r.log", logged)
    ds = R.read_metrics(log)
    write_netcdf(ds, tmp_path / "m.nc")
    back = R.read_metrics(tmp_path / "m.nc")
    assert back[S.metric_variable(back, "critic/score/mean")].equals(ds[S.metric_variable(ds, "critic/score/mean")])
    other = tmp_path / "notes.txt"
    other.write_text("nothing here\n")
    with pytest.raises(R.RunLogError, match="not a run log this reader knows"):
        R.read_runlogs([other])
    # a graded-trial table is not a per-step table
    trials = tmp_path / "trials.csv"
    trials.write_text("run,step,instance_id,sample,graded,reward\na,1,x,0,1,1.0\n")
    assert R.detect_format(trials) is None


def test_cli_ingest_metrics_out(tmp_path, capsys):
    from saturation.cli import main

    logged = _verl_run(steps=8)
    log = F.write_verl_console(tmp_path / "run.log", logged)
    out = tmp_path / "m.nc"
    assert main(["ingest", str(log), "--metrics-out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "(verl-console)" in text and "validation-only steps" in text
    ds = R.read_metrics(out)
    _assert_logged(ds, "run", logged)
    table = tmp_path / "t.csv"
    table.write_text("update,algo,reward\n1,a,0.1\n1,b,0.2\n")
    assert main(["ingest", str(table), "--metrics-out", str(tmp_path / "t.nc"), "--run-column", "algo"]) == 0
    assert main(["ingest", str(table), "--metrics-out", str(tmp_path / "t2.nc")]) == 1
    assert "--run-column" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::saturation.models.sampling.ConvergenceWarning")  # 2 x 200 draws: exit 3 allowed
def test_cli_compare_reads_a_trainer_state(tmp_path, capsys):
    from saturation.cli import main

    F.write_trl_output(tmp_path / "grpo", list(range(10, 301, 10)), save_every=300, logging_steps=10)
    state = tmp_path / "grpo" / "checkpoint-300" / "trainer_state.json"
    # TRL's reward is a sum of reward functions ([0, 2] here): not a rate, refused with the reason
    assert main(["compare", str(state), "--metric", "reward", "--draws", "200", "--chains", "2"]) == 1
    assert "is a rate in [0, 1]" in capsys.readouterr().err
    metric = "rewards/accuracy_reward/mean"
    code = main(["compare", str(state), "--metric", metric, "--draws", "200", "--chains", "2"])
    assert code in (0, 3)
    assert "saturation curves" in capsys.readouterr().out


def test_plateau_answers_from_a_raw_verl_console_log_and_a_trl_run(tmp_path, capsys):
    """Issue 42's done-when through issue 44's command: the raw file in, the answer out, no
    conversion step (the exact sampler: no compile)."""
    from saturation.cli import main

    rng = np.random.default_rng(5)
    logged = []
    for step in range(1, 121):
        m = F.verl_metrics(step, rng, val=step % 10 == 0)
        m["critic/score/mean"] = np.float64((0.2 + 0.5 * step / 40 if step < 40 else 0.7) + rng.normal(0, 0.01))
        logged.append((step, m))
    log = F.write_verl_console(tmp_path / "verl.log", logged)
    out = tmp_path / "p.json"
    assert main(["plateau", str(log), "--metric", "critic/score/mean", "--json", str(out)]) == 0
    (run,) = json.loads(out.read_text())["runs"].values()
    (est,) = run["levels"].values()
    assert est["verdict"] == "plateaued" and est["changepoint"]["hdi"][0] <= 40 <= est["changepoint"]["hdi"][1]
    # the validation metric, logged every 10 steps, is its own series on the step axis
    assert main(["plateau", str(log), "--metric", "val-core/openai/gsm8k/reward/mean@1"]) in (0, 3)

    F.write_trl_output(tmp_path / "grpo", list(range(10, 301, 10)), save_every=150, logging_steps=10)
    assert main(["plateau", str(tmp_path / "grpo"), "--metric", "reward", "--json", str(out)]) in (0, 3)
    res = json.loads(out.read_text())
    assert res["metric"] == "reward" and len(res["runs"]) == 1
    (est,) = next(iter(res["runs"].values()))["levels"].values()
    assert est["headroom_to_max"] is None  # TRL's reward is a sum of reward functions: [0, 2] here
    assert "outside [0, 1]" in capsys.readouterr().out


def test_a_skyrl_console_log_given_as_a_file_reads_as_in_its_run_directory(tmp_path):
    """A SkyRL console log (written by loguru through Ray's prefix, ANSI colours on) passed as
    a file is detected and reads the same per-step metrics as its run directory does; the
    run is the policy model path; every line is accounted for."""
    from saturation.ingest import ingest_runs
    from skyrl_fixtures import console_log, write

    path = write(tmp_path / "run" / "train.log", console_log(6))
    assert R.detect_format(path) == "skyrl-console"
    res = R.read_runlogs([path], strict=True)
    acc = res.accounting[0]
    assert acc["format"] == "skyrl-console" and acc["records"] == acc["kept"] + acc["foreign"] + acc["malformed"]
    assert acc["records"] == len(path.read_text().splitlines())
    by_dir = ingest_runs([tmp_path / "run"], progress=False).metrics
    got = res.metrics
    assert got["run"].values.tolist() == by_dir["run"].values.tolist() == ["Qwen/Qwen3-8B"]
    assert got["step"].values.tolist() == by_dir["step"].values.tolist() == [1, 2, 3, 4, 5, 6]
    for var in by_dir.data_vars:
        assert var in got, var
        np.testing.assert_array_equal(got[var].values, by_dir[var].values)
    assert got["reward_mean"].attrs["metric_name"] == "reward/avg_raw_reward"


def test_verl_console_items_off_the_fast_path_keep_their_values(tmp_path):
    """The fast split takes ``key:value`` items whose key holds no ``:``; a key that does
    (a data source named ``a:b``), a numpy scalar, an empty value and a word each leave it,
    and every item still lands as the line-by-line rule says."""
    path = tmp_path / "run.log"
    path.write_text(
        "step:1 - val-core/a:b/acc/mean@4:0.25 - actor/entropy:np.float64(0.5) - x:np.int64(3)\n"
        "step:2 - val-core/a:b/acc/mean@4:0.75 - actor/entropy:0.4 - x:4\n"
        "step:3 - actor/entropy:high - x:5 - y:\n"
    )
    res = R.read_runlogs([path], strict=False)
    ds = res.metrics
    assert (
        _value(ds, "run", "val-core/a:b/acc/mean@4", 1) == 0.25
        and _value(ds, "run", "val-core/a:b/acc/mean@4", 2) == 0.75
    )
    assert _value(ds, "run", "actor/entropy", 1) == 0.5 and _value(ds, "run", "x", 1) == 3.0
    assert _value(ds, "run", "x", 3) == 5.0 and math.isnan(_value(ds, "run", "actor/entropy", 3))
    assert any(f"{path}:3" in p and "'actor/entropy': 'high' is not a number" in p for p in res.problems)
    assert any(f"{path}:3" in p and "'y': '' is not a number" in p for p in res.problems)


def _hinge_logged(n: int = 80, knee: int = 30, seed: int = 11) -> list[tuple[int, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    return [
        (step, {"critic/score/mean": float(0.2 + 0.5 * min(step, knee) / knee + rng.normal(0, 0.01))})
        for step in range(1, n + 1)
    ]


def test_a_wandb_directory_of_a_hugging_face_trainer_run_is_a_run_log(tmp_path):
    """A wandb run directory (or its wandb/ parent) is read as per-step metrics on the run's
    declared step axis (train/global_step), with the accounting's records = kept + foreign +
    malformed and the axis and the keys not read in its notes."""
    pytest.importorskip("wandb")
    from skyrl_fixtures import hf_trainer_wandb_run_dir

    root, logged = hf_trainer_wandb_run_dir(tmp_path / "trl")
    (run_dir,) = (root / "wandb").glob("offline-run-*")
    assert R.detect_format(run_dir) == R.detect_format(root / "wandb") == "wandb"
    assert R.detect_format(root) is None  # the run's parent directory: a SkyRL-style run directory for ingest
    res = R.read_runlogs([run_dir])
    ds = res.metrics
    assert list(ds["step"].values) == [0, 5, 10, 15, 20]
    reward = ds[next(v for v in ds.data_vars if ds[v].attrs.get("metric_name") == "train/reward")]
    assert reward.sel(step=10).item() == logged[10]["train/reward"]
    (acc,) = res.accounting
    _identity(res.accounting)
    assert acc["malformed"] == 0 and acc["kept"] == 4 * 3  # two profiling rows and the logs (story/* is not read)
    assert (
        acc["step_axis"] == {run_dir.name: "train/global_step"}
        and "story/pnl_mean" in acc["keys_not_read"][run_dir.name]
    )
    assert acc["conflicting_values"] == 4  # each step's second profiling call (the first is kept)
    assert "4 values logged again in one step, the first kept" in R.summary_lines(res)[0]


@pytest.mark.parametrize("fmt", ["verl-jsonl", "mlflow", "tensorboard", "table", "wandb-csv", "skyrl-console", "wandb"])
def test_plateau_answers_from_the_raw_file_of_every_format(tmp_path, capsys, fmt):
    """Issue 42's done-when for the formats the test above does not cover: each file written
    as its framework writes it, given as it is to ``saturation plateau FILE --metric KEY``,
    answers with the knee located (the exact sampler: no compile, no conversion step)."""
    from saturation.cli import main

    logged = _hinge_logged()
    key = "critic/score/mean"
    if fmt == "verl-jsonl":
        path = F.write_verl_jsonl(tmp_path / "metrics.jsonl", logged)
    elif fmt == "mlflow":
        path = F.write_mlflow(tmp_path, {"run": logged})
    elif fmt == "tensorboard":
        path = F.write_tensorboard(tmp_path / "tb" / "run", logged, style="torch")
    elif fmt == "table":
        path = tmp_path / "export.csv"
        path.write_text("global_step,critic/score/mean\n" + "".join(f"{s},{m[key]!r}\n" for s, m in logged))
    elif fmt == "wandb-csv":
        path = tmp_path / "wandb_export.csv"
        path.write_text('"Step","grpo - critic/score/mean"\n' + "".join(f"{s},{m[key]!r}\n" for s, m in logged))
    elif fmt == "wandb":
        pytest.importorskip("wandb")
        from skyrl_fixtures import wandb_run_dir

        root = wandb_run_dir(tmp_path / "run", payloads={s: {key: m[key]} for s, m in logged})
        (path,) = (root / "wandb").glob("offline-run-*")
    else:
        from skyrl_fixtures import Loguru

        lg = Loguru()
        try:
            text = "".join(lg.console_log({"reward/avg_raw_reward": m[key]}, s) for s, m in logged)
        finally:
            lg.logger.remove()
        path = tmp_path / "train.log"
        path.write_text(text)
        key = "reward/avg_raw_reward"
    assert R.detect_format(path) == fmt
    out = tmp_path / "p.json"
    assert main(["plateau", str(path), "--metric", key, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["metric"] == key and len(res["runs"]) == 1
    (est,) = next(iter(res["runs"].values()))["levels"].values()
    assert est["changepoint"]["hdi"][0] <= 30 <= est["changepoint"]["hdi"][1]
    assert est["verdict"] == "plateaued"


def test_a_jsonl_tables_lines_are_counted_once_and_a_record_of_too_many_keys_is_refused(tmp_path, monkeypatch):
    """records == kept + foreign + malformed for a JSON Lines table (its lines were counted
    twice: 6 records for 3 lines); a record whose keys would pass the column limit is one
    malformed line with its reason, the others are kept."""
    import saturation.streams as streams

    monkeypatch.setattr(streams, "MAX_COLUMNS", 10)
    path = tmp_path / "m.jsonl"
    wide = json.dumps({"step": 3, **{f"k{i}": 0.5 for i in range(20)}})
    path.write_text('{"step": 1, "reward": 0.5}\n\n{"step": 2, "reward": 0.6}\n' + wide + "\nnot json\n")
    res = R.read_runlogs([path], strict=False)
    a = res.accounting[0]
    assert (a["records"], a["kept"], a["foreign"], a["malformed"]) == (5, 2, 1, 2)
    assert any(f"{path}:4: 21 keys, 20 of them new: more than the limit of 10 columns" in p for p in res.problems)
    assert res.metrics["step"].values.tolist() == [1, 2]


def test_an_mlflow_run_that_logged_no_metric_is_listed_not_dropped(tmp_path):
    """A run started and ended without a metric (a run killed before its first step) has
    no metric file: it is named in the accounting, not silently left out; values logged
    twice at one step without the step going back are not called a resumed run."""
    pytest.importorskip("mlflow")
    store = F.write_mlflow(tmp_path, {"run": _hinge_logged()[:10], "killed": []})
    res = R.read_runlogs([store])
    (a,) = res.accounting
    _identity(res.accounting)
    assert len(a["runs_without_metrics"]) == 1 and list(a["steps"]) == ["run"]
    assert "1 run(s) without any metric file (not read)" in R.summary_lines(res)[0]


def test_a_wandb_csv_export_with_a_step_column_per_run_keeps_the_step_axis(tmp_path):
    """wandb adds `<run> - _step` columns when a chart's x-axis is not _step: the key _step
    is read as a metric of its own (a variable other than the step coordinate)."""
    path = tmp_path / "export.csv"
    rows = "".join(f"{s},{s / 100:.2f},{3 * s}\n" for s in range(1, 21))
    path.write_text('"Step","grpo - train/reward","grpo - _step"\n' + rows)
    ds = R.read_metrics(path)
    assert list(ds["step"].values) == list(range(1, 21))
    names = {str(ds[v].attrs.get("metric_name")): v for v in ds.data_vars}
    assert set(names) >= {"train/reward", "_step"} and names["_step"] != "step"
    assert ds[names["_step"]].sel(run="grpo", step=4).item() == 12
