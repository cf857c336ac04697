"""Ingest of SkyRL run directories: trajectories, eval dumps, logs, index, accounting."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zstandard

from saturation.ingest import IngestError, ingest_runs, looks_like_run_dir, scan_run_dir
from skyrl_fixtures import (
    ANSWERS,
    ERROR_TEXT,
    EXPECTED_STATUS,
    EXPECTED_UNGRADED,
    GOLD,
    PLAN,
    eval_only_run_dir,
    expected_counts,
    f1_by_hand,
    probe_eval_logs,
    run_dir,
    trajectory,
    write,
    write_trajectory,
)


@pytest.mark.parametrize("zst", [True, False])
def test_run_directory_ingests_to_the_expected_dataset(tmp_path, zst):
    root = run_dir(tmp_path / "run_a", zst=zst)
    assert looks_like_run_dir(root) and not looks_like_run_dir(tmp_path / "missing")
    res = ingest_runs([root], progress=False, workers=1)
    ds = res.trials
    assert res.problems == []
    acc = res.accounting
    # 12 trajectory files + 6 lines of the step-3 eval dump + 6 superseded lines of step 2
    assert (acc["rows_read"], acc["rows_kept"], acc["rows_rejected"], acc["rows_superseded"]) == (24, 18, 0, 6)
    assert acc["ungraded_reasons"] == {"error_file": 1, "no_score": 1}
    assert acc["answer_statuses"] == {
        "empty_file_name": 1,
        "finish_call": 11,
        "no_finish_call": 2,
        "not_rescored": 1,
        "several_finish_calls": 1,
    }
    assert acc["reward_dict_mismatches"] == {}  # every recomputed F1 equals the logged one
    assert acc["dirs"][0]["ignored"] == [str(root / "notes.md")]
    assert ds.attrs["rows_read"] == 24 and ds.attrs["rows_kept"] == 18 and ds.attrs["rows_superseded"] == 6
    assert set(np.unique(ds["run"].values)) == {"Qwen/Qwen3-8B"}
    assert list(ds["level"].values) == ["file", "module", "entity"]
    key = list(
        zip(
            ds["step"].values.tolist(),
            ds["phase"].values.tolist(),
            ds["instance_id"].values.tolist(),
            ds["sample"].values.tolist(),
            strict=True,
        )
    )
    for (step, phase), files in PLAN.items():
        for name, kind in files.items():
            inst, rep = name.rsplit("_", 1)
            i = key.index((step, phase, inst, int(rep)))
            reason = EXPECTED_UNGRADED.get((step, phase, inst, int(rep)))
            assert bool(ds["graded"][i]) is (reason is None)
            if reason is not None:
                assert ds["ungraded_reason"].values[i] == reason
                assert ds["reward"][i] == 0 and np.isnan(ds["f1"][i]).all()
                assert ds["error_message"].values[i] == "sandbox timed out"
                continue
            assert ds["answer_status"].values[i] == EXPECTED_STATUS[kind], (name, kind)
            counts = expected_counts(kind)
            for j, (n_pred, n_gold, n_tp) in enumerate(counts):
                assert (ds["n_pred"][i, j], ds["n_gold"][i, j], ds["n_tp"][i, j]) == (n_pred, n_gold, n_tp), (kind, j)
                assert ds["f1"][i, j] == pytest.approx(f1_by_hand(n_pred, n_gold, n_tp))
            # a text answer or no finish call: 0 at every level, as the upstream reward scores it
            assert ds["reward"][i] == pytest.approx(sum(f1_by_hand(*c) for c in counts))
            assert ds["file_reward"][i] == pytest.approx(ds["f1"][i, 0])
            assert ds["reward_dict_mismatch"][i] == 0
            assert ds["num_turns"][i] == 5 + int(rep)
    evals = ds.where(ds["dataset"] == "swe_gym", drop=True)
    assert evals.sizes["trial"] == 6 and set(evals["step"].values) == {3}
    # per-token scores reduced to their sum; perfect (3.0), wrong (0), no finish call (0), ungraded
    assert sorted(evals["reward"].values.tolist()) == [0.0, 0.0, 0.0, 0.0, 3.0, 3.0]
    assert int((~evals["graded"].astype(bool)).sum()) == 1
    assert sorted(evals["answer_status"].values.tolist()) == [
        "",
        "finish_call",
        "finish_call",
        "finish_call",
        "finish_call",
        "not_rescored",
    ]
    rescored = evals.where(evals["answer_status"] == "finish_call", drop=True)
    assert sorted(rescored["f1"].sel(level="file").values.tolist()) == [0.0, 0.0, 1.0, 1.0]
    assert evals["source"].values[0].endswith(":1")
    m = res.metrics
    assert sorted(m["run"].values) == ["Qwen/Qwen3-8B", "s85"]
    assert m["reward_mean"].sel(run="Qwen/Qwen3-8B", step=3).item() == pytest.approx(0.33)
    assert m["eval_swe_gym_avg_score"].sel(run="s85", step=40).item() == pytest.approx(0.41)
    # aggregated_results.jsonl: the step's eval metrics, not a trial
    assert m["eval_swe_gym_avg_score"].sel(run="Qwen/Qwen3-8B", step=3).item() == pytest.approx(1.0)
    assert m["eval_swe_gym_avg_score"].sel(run="Qwen/Qwen3-8B", step=2).item() == pytest.approx(1.0)
    assert json.loads(m.attrs["config/Qwen/Qwen3-8B"])["trainer.algorithm.advantage_estimator"] == "rloo"


def test_logged_rewards_that_disagree_are_counted_not_replaced(tmp_path):
    root = tmp_path / "r"
    d = root / "trajectories" / "step_1" / "train"
    write_trajectory(d / "repo__a-1_0.json", trajectory("repo__a-1", "partial", logged={"file_reward": 0.9}))
    write_trajectory(d / "repo__a-1_1.json", trajectory("repo__a-1", "perfect"))
    res = ingest_runs([root], progress=False, workers=1)
    assert res.accounting["reward_dict_mismatches"] == {"file": 1}
    ds = res.trials
    assert ds["reward_dict_mismatch"].values.tolist() == [1.0, 0.0]
    assert ds["mismatched_levels"].values.tolist() == ["file", ""]
    assert ds["f1"].sel(level="file").values[0] == pytest.approx(0.5)  # recomputed, not the logged 0.9
    assert ds["file_reward"].values[0] == pytest.approx(0.9)  # the logged value is kept beside it


def test_a_finish_call_upstream_rejected_scores_zero(tmp_path):
    root = tmp_path / "r"
    d = root / "trajectories" / "step_1" / "train"
    # one localization_finish action, but codescout stored no structured answer: its last-turn
    # sanity check rejected the call and the reward is 0
    write_trajectory(
        d / "repo__a-1_0.json",
        trajectory(
            "repo__a-1",
            "partial",
            old_format=True,
            logged={"file_reward": 0.0, "module_reward": 0.0, "entity_reward": 0.0},
        ),
    )
    res = ingest_runs([root], progress=False, workers=1)
    ds = res.trials
    assert ds["answer_status"].values.tolist() == ["finish_call_rejected"]
    assert ds["f1"].values[0].tolist() == [0.0, 0.0, 0.0] and ds["n_pred"].values[0].tolist() == [0, 0, 0]
    assert res.accounting["reward_dict_mismatches"] == {}


def test_a_json_looking_text_answer_is_not_a_finish_call(tmp_path):
    root = tmp_path / "r"
    d = root / "trajectories" / "step_1" / "train"
    text = json.dumps(ANSWERS["perfect"][0])
    record = trajectory("repo__a-1", "none")
    record["raw_final_message"] = record["parsed_final_message"] = text  # the model wrote JSON as text
    write_trajectory(d / "repo__a-1_0.json", record)
    record = trajectory("repo__a-2", "none")
    record["raw_final_message"] = record["parsed_final_message"] = '["pkg/a.py", "pkg/b.py"]'
    write_trajectory(d / "repo__a-2_0.json", record)
    ds = ingest_runs([root], progress=False, workers=1).trials
    assert ds["answer_status"].values.tolist() == ["no_finish_call", "no_finish_call"]
    assert bool(ds["graded"].all()) and float(ds["f1"].max()) == 0.0


def test_transcripts_rescore_only_a_finish_call_that_passes_the_last_turn_check(tmp_path):
    from skyrl_fixtures import transcript

    perfect = ANSWERS["perfect"][0]
    quoted = transcript(None).replace(
        "pkg/c.py:9: def g():",
        "log: <tool_call>"
        + json.dumps({"name": "localization_finish", "arguments": {"locations": perfect}})
        + "</tool_call>",
    )
    parallel = transcript(perfect).replace(
        '<|im_start|>assistant\n<tool_call>\n{"name": "localization_finish"',
        '<|im_start|>assistant\n<tool_call>{"name": "terminal", '
        '"arguments": {}}</tool_call>\n<tool_call>\n'
        '{"name": "localization_finish"',
    )
    d = tmp_path / "run" / "dumped_evals" / "global_step_1_evals"
    d.mkdir(parents=True)
    lines = [
        {
            "input_prompt": f"p{i}",
            "output_response": t,
            "score": [0.0, 0.0],
            "data_source": "x",
            "env_extras": {"instance_id": f"t{i}", "file_changes": GOLD},
        }
        for i, t in enumerate([quoted, parallel])
    ]
    (d / "x.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ds = ingest_runs([tmp_path / "run"], progress=False).trials
    assert ds["answer_status"].values.tolist() == ["not_rescored", "finish_call_rejected"]
    assert np.isnan(ds["f1"].values[0]).all() and ds["f1"].values[1].tolist() == [0.0, 0.0, 0.0]


def test_a_training_log_with_an_eval_only_line_keeps_its_training_metrics(tmp_path):
    from skyrl_fixtures import Loguru, console_log

    root = tmp_path / "both"
    log = Loguru(colorize=False)
    try:
        tail = log.info("Metrics from eval only run: " + str({"eval/x/avg_score": 0.5}))
    finally:
        log.close()
    write(root / "job_step7.out", console_log(3) + tail)
    res = ingest_runs([root], progress=False)
    m = res.metrics
    assert 3 in m["step"].values and "reward_mean" in m and res.problems == []


def test_compact_or_odd_json_falls_back_to_a_full_parse(tmp_path):
    root = tmp_path / "r"
    d = root / "trajectories" / "step_1" / "train"
    record = trajectory("repo__a-1", "perfect", tokens=5)
    (d).mkdir(parents=True)
    (d / "repo__a-1_0.json").write_text(json.dumps(record, separators=(",", ":")))
    odd = json.dumps({"instance_id": "repo__a-2", "messages": []}, indent=2)[:-2]
    odd += ',\n  "x": {\n  "total_reward": 99\n  },\n  "total_reward": 1.0, "target": []\n}'
    (d / "repo__a-2_0.json").write_text(odd)
    ds = ingest_runs([root], progress=False, workers=1).trials
    assert ds["reward"].values.tolist() == [3.0, 1.0]


def test_level_fields_in_logged_dicts_cannot_overwrite_the_scores(tmp_path):
    root = tmp_path / "r"
    record = trajectory("repo__a-1", "perfect")
    record["reward_dict"]["file_f1"] = -1.0
    record["metrics_dict"]["module_n_tp"] = 99
    record["metrics_dict"]["file_reward"] = 7.0  # the name is taken by reward_dict's entry
    write_trajectory(root / "trajectories" / "step_1" / "train" / "repo__a-1_0.json", record)
    ds = ingest_runs([root], progress=False, workers=1).trials
    assert ds["f1"].sel(level="file").item() == 1.0 and ds["n_tp"].sel(level="module").item() == 2
    assert ds["x_file_f1"].item() == -1.0 and ds["x_module_n_tp"].item() == 99
    assert ds["file_reward"].item() == 1.0 and ds["metrics_dict_file_reward"].item() == 7.0


def test_string_where_a_list_belongs_is_reported(tmp_path):
    root = tmp_path / "r"
    record = trajectory("repo__a-1", "perfect")
    record["target"] = [{"file": "pkg/a.py", "changes": {"edited_modules": "pkg/a.py:A"}}]
    path = write_trajectory(root / "trajectories" / "step_1" / "train" / "repo__a-1_0.json", record)
    with pytest.raises(IngestError, match=r"edited_modules is a str, not a list"):
        ingest_runs([root], progress=False, workers=1)
    res = ingest_runs([root], strict=False, progress=False, workers=1)
    assert res.accounting["rows_rejected"] == 1 and str(path) in res.problems[0]


def test_agentic_code_search_string_targets_grade_text_answers(tmp_path):
    root = tmp_path / "r"
    record = trajectory("repo__a-1", "text")
    record["target"] = "[('pkg/a.py', [44, 3]), ('pkg/b.py', [10, 1])]"
    record["reward_dict"] = {"file_reward": 1.0}
    write_trajectory(root / "trajectories" / "step_1" / "train" / "repo__a-1_0.json", record)
    ds = ingest_runs([root], progress=False, workers=1).trials
    assert ds["answer_status"].item() == "text_answer"
    assert ds["f1"].sel(level="file").item() == 1.0
    assert np.isnan(ds["f1"].sel(level="module").item())  # no module gold in a string target
    assert ds["reward_dict_mismatch"].item() == 0


def test_eval_only_run_is_placed_as_eval_only(tmp_path):
    root = eval_only_run_dir(tmp_path / "evalrun")
    res = ingest_runs([root], progress=False, workers=1)
    assert res.problems == []
    ds = res.trials
    acc = res.accounting
    # 3 trajectories + 4 dump lines superseded by them; the eval_only aggregate is metrics, not a trial
    assert (acc["rows_read"], acc["rows_kept"], acc["rows_rejected"], acc["rows_superseded"]) == (7, 3, 0, 4)
    assert set(ds["phase"].values) == {"eval_only"}
    assert set(ds["step"].values) == {85}  # from the checkpoint path it was launched with
    assert set(ds["run"].values) == {"s85-step85"}  # the index label
    assert res.accounting["answer_statuses"]["finish_call"] >= 2
    m = res.metrics
    assert list(m["run"].values) == ["s85-step85"] and list(m["step"].values) == [85]
    assert m["eval_swe_gym_avg_score"].item() == pytest.approx(0.4123456)  # the driver's unrounded line wins


def test_probe_set_one_directory_per_checkpoint_shares_the_run_label(tmp_path):
    """A probe set evaluated a directory per checkpoint (steps 5/10/15, each an eval-only run
    with the same index label): its trials at their checkpoint steps under one run, phase
    eval_only, every row accounted for; two eval-only directories at the same checkpoint, or a
    training directory, with one label stay an error."""
    dirs = [
        eval_only_run_dir(tmp_path / f"probe_step{k}", checkpoint=k, label="g1-probe", score=0.5 + 0.01 * k)
        for k in (5, 10, 15)
    ]
    res = ingest_runs(dirs, progress=False, workers=1)
    assert res.problems == []
    ds = res.trials
    assert set(zip(ds["run"].values, ds["step"].values.tolist(), ds["phase"].values, strict=True)) == {
        ("g1-probe", k, "eval_only") for k in (5, 10, 15)
    }
    assert res.accounting["rows_kept"] == 9 and res.accounting["rows_read"] == 21  # 3 x (3 kept + 4 superseded)
    m = res.metrics
    assert list(m["step"].values) == [5, 10, 15]
    assert m["eval_swe_gym_avg_score"].sel(run="g1-probe").values.tolist() == pytest.approx([0.55, 0.60, 0.65])
    again = eval_only_run_dir(tmp_path / "again", checkpoint=10, label="g1-probe")
    with pytest.raises(ValueError, match="same run identity 'g1-probe'"):
        ingest_runs([*dirs, again], progress=False, workers=1)
    train = run_dir(tmp_path / "train")
    with pytest.raises(ValueError, match="same run identity 'g1-probe'"):
        ingest_runs([train, dirs[0]], labels={"train": "g1-probe"}, progress=False, workers=1)


def test_probe_set_logs_in_one_directory_are_placed_by_their_names(tmp_path):
    """The probe set's logs in one directory: each log's metrics at the step in its name
    (5/10/15) under the index label; eval-only trials beside them cannot be placed (three
    checkpoints named), so they are kept at step 0 with a problem naming the checkpoints."""
    root = probe_eval_logs(tmp_path / "codesearch_probe")
    res = ingest_runs([root], progress=False, workers=1)
    assert res.problems == []
    m = res.metrics
    assert list(m["run"].values) == ["g1-probe"] and list(m["step"].values) == [5, 10, 15]
    assert m["eval_swe_smith_probe_avg_score"].values.ravel().tolist() == pytest.approx([0.65, 0.70, 0.75])
    write_trajectory(
        root / "trajectories" / "step_None" / "eval" / "repo__e-0_0.json", trajectory("repo__e-0", "perfect")
    )
    res = ingest_runs([root], strict=False, progress=False, workers=1)
    (problem,) = res.problems
    assert "1 eval-only trial file(s), but its eval-only logs name checkpoints 5, 10, 15" in problem
    assert set(res.trials["step"].values) == {0} and set(res.trials["phase"].values) == {"eval_only"}


def test_parallel_parse_equals_serial(tmp_path):
    root = tmp_path / "r"
    kinds = [*sorted(ANSWERS), "text", "none", "twice"]
    for i in range(300):
        d = root / "trajectories" / f"step_{1 + i // 100}" / "train"
        if i % 37 == 36:
            write(d / f"repo__p-{i}_0.error", ERROR_TEXT)
        else:
            write_trajectory(d / f"repo__p-{i}_0.json", trajectory(f"repo__p-{i}", kinds[i % len(kinds)], tokens=50))
    serial = ingest_runs([root], progress=False, workers=1)
    parallel = ingest_runs([root], progress=False, workers=2)
    assert parallel.trials.drop_attrs().equals(serial.trials.drop_attrs())
    assert parallel.accounting["rows_kept"] == 300
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:  # any executor with map, e.g. distributed.Client.get_executor()
        on_executor = ingest_runs([root], progress=False, executor=pool)
    assert on_executor.trials.drop_attrs().equals(serial.trials.drop_attrs())


def test_trajectories_parse_on_a_dask_cluster(tmp_path):
    from distributed import Client

    root = tmp_path / "r"
    for i in range(20):
        write_trajectory(
            root / "trajectories" / "step_1" / "train" / f"repo__p-{i}_0.json",
            trajectory(f"repo__p-{i}", "partial", tokens=20),
        )
    serial = ingest_runs([root], progress=False, workers=1)
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        res = ingest_runs([root], progress=False, executor=client.get_executor())
    assert res.trials.drop_attrs().equals(serial.trials.drop_attrs())


def test_writes_and_reads_back_through_netcdf_and_the_models(tmp_path):
    from saturation.aggregate import aggregate
    from saturation.io import open_trials, write_trials

    res = ingest_runs([run_dir(tmp_path / "r")], progress=False)
    back = open_trials(write_trials(res.trials, tmp_path / "t.nc"))
    assert back.identical(res.trials) or back.equals(res.trials)
    agg = aggregate(back)
    assert int(agg["n_trials"].sum()) == 18


def test_two_runs_get_labels_and_arms(tmp_path):
    a = run_dir(tmp_path / "base")
    b = run_dir(tmp_path / "s85")
    with pytest.raises(ValueError, match="same run identity"):
        ingest_runs([a, b], progress=False)
    res = ingest_runs(
        [a, b], labels={"base": "base-run", "s85": "s85-run"}, arms={"base": "base", "s85": "s85"}, progress=False
    )
    assert set(res.trials["arm"].values) == {"base", "s85"}
    assert set(res.trials["run"].values) == {"base-run", "s85-run"}
    assert (res.trials["arm"] == "s85").sum() == 18


def test_malformed_inputs_are_reported_and_the_rest_ingested(tmp_path):
    root = run_dir(tmp_path / "bad", zst=False)
    d = root / "trajectories" / "step_1" / "train"
    (d / "repo__q-3_0.json").write_text('{"instance_id": "repo__q-3",\n "total_reward": }')
    (d / "repo__q-4_0.json").write_text(
        json.dumps({"instance_id": "repo__q-4", "parsed_final_message": [{"file": "a.py"}], "total_reward": "high"})
    )
    (d / "no-rep-number.json").write_text("{}")
    (d / "repo__q-5_0.json").write_text(json.dumps({"instance_id": "other", "total_reward": 1.0}))
    dump = root / "dumped_evals" / "global_step_3_evals" / "swe_gym.jsonl"
    dump.write_text(dump.read_text() + "{not json\n" + json.dumps({"score": "1", "input_prompt": "x"}) + "\n")
    lines = "".join(json.dumps({"score": 1.0, "input_prompt": f"p{i}"}) + "\n" for i in range(20000))
    cut = zstandard.ZstdCompressor().compress(lines.encode())[:-7]  # several blocks; the last one cut
    (root / "dumped_evals" / "global_step_4_evals").mkdir()
    (root / "dumped_evals" / "global_step_4_evals" / "other.jsonl.zst").write_bytes(cut)
    (root / "eval_log_index.txt").write_text("eval_ckpt_struct_step40.log\ts85\njust-one-field\n")
    write(root / "eval_final.log", "Metrics from eval only run: {'eval/x/avg_score': '0.5'}\n")
    with pytest.raises(IngestError) as info:
        ingest_runs([root], progress=False)
    problems = info.value.problems
    text = "\n".join(problems)
    assert f"{d / 'repo__q-3_0.json'}:2: malformed JSON" in text
    assert f"{d / 'repo__q-4_0.json'}: field 'total_reward': 'high' is not a finite number" in text
    assert f"{d / 'no-rep-number.json'}: file name is not <instance_id>_<rep>.json" in text
    assert "field 'instance_id' is 'other'" in text
    assert f"{dump}:7: malformed JSON" in text
    assert f"{dump}:8: field 'score': 1 is not a finite number or a list of them" in text
    assert "other.jsonl.zst: truncated zstd stream" in text
    assert f"{root / 'eval_log_index.txt'}:2: index line" in text
    assert "eval_final.log: no checkpoint step" in text
    res = ingest_runs([root], strict=False, progress=False)
    assert res.problems == problems
    acc = res.accounting
    # four trajectory files, two dump lines and the cut last line of the truncated dump
    assert acc["rows_rejected"] == 7
    assert any("other.jsonl.zst:" in p and "malformed JSON" in p for p in res.problems)
    assert acc["rows_read"] == acc["rows_kept"] + acc["rows_rejected"] + acc["rows_superseded"]
    assert acc["rows_kept"] > 18  # the lines of the truncated dump before the cut were kept
    assert json.loads(res.metrics.attrs["eval_only_unplaced"])[0]["metrics"] == {"eval/x/avg_score": 0.5}


def test_scan_classifies_files(tmp_path):
    c = scan_run_dir(run_dir(tmp_path / "r"))
    assert c.summary() == {
        "trajectory_files": 12,
        "eval_dump_files": 2,
        "eval_aggregate_files": 2,
        "console_logs": 2,
        "wandb_runs": 0,
        "metrics_csvs": 0,
        "r2e_trajectory_files": 0,
        "index_files": 1,
        "ignored_files": 1,
    }
    with pytest.raises(FileNotFoundError):
        scan_run_dir(tmp_path / "nothing")


def test_wandb_run_is_read_from_its_history_file(tmp_path):
    pytest.importorskip("wandb")  # the test extra installs it; without it the next test applies
    from skyrl_fixtures import wandb_expected, wandb_run_dir

    root = wandb_run_dir(tmp_path / "wandb_run")
    run_dir_trajectories = root / "trajectories" / "step_1" / "train"
    write_trajectory(run_dir_trajectories / "repo__a-1_0.json", trajectory("repo__a-1", "perfect"))
    res = ingest_runs([root], progress=False, workers=1)
    assert res.problems == []
    acc = res.accounting
    assert acc["rows_read"] == acc["rows_kept"] + acc["rows_rejected"] + acc["rows_superseded"] == 1
    m = res.metrics
    assert list(m["run"].values) == ["Qwen/Qwen3-8B"]  # trainer.policy.model.path from the run config
    expected = wandb_expected()
    assert list(m["step"].values) == sorted(expected)
    assert m["policy_entropy"].values[0].tolist() == [expected[s]["policy/policy_entropy"] for s in sorted(expected)]
    assert m["reward_mean"].sel(step=3).item() == expected[3]["reward/avg_raw_reward"]  # unrounded
    assert np.isnan(m["policy_policy_kl"].sel(step=2).item())
    acc = res.accounting["dirs"][0]
    assert acc["wandb_runs"] == 1 and acc["console_logs"] == [] and acc["wandb_runs_read"][0]["steps"] == 4
    assert all("wandb" in p for p in acc["ignored"])  # wandb's debug logs are not console logs


def test_wandb_run_of_a_hugging_face_trainer_is_read_on_its_global_step(tmp_path):
    """The Trainer declares train/global_step as every metric's x-axis (define_metric) while
    wandb's _step counts log calls: the values land on the trainer's steps, profiling values
    logged several times a step are not read as restarts, and a key on the user's own axis
    (story/*) is listed as not read."""
    pytest.importorskip("wandb")
    from saturation.wandb_history import read_wandb_run
    from skyrl_fixtures import hf_trainer_wandb_run_dir

    root, logged = hf_trainer_wandb_run_dir(tmp_path / "trl")
    (run_dir,) = (root / "wandb").glob("offline-run-*")
    log = read_wandb_run(run_dir)
    assert log.step_axis == "train/global_step" and log.problems == []
    # wandb's step_sync stores the last train/global_step in every row (0 before the first)
    assert sorted(log.steps) == [0, *sorted(logged)] == [0, 5, 10, 15, 20]
    assert list(log.steps[0]) == ["profiling/Time taken: GRPOTrainer._prepare_inputs"]
    for step, values in logged.items():
        assert {k: log.steps[step][k] for k in values} == values
    assert log.restarts == 0 and log.conflicts > 0  # the second profiling call of a step keeps the first
    assert "train/global_step" not in log.steps[5] and "story/global_step" not in log.steps[5]
    not_read = "logged against story/global_step, not the run's step axis train/global_step"
    assert log.non_numeric["story/pnl_mean"] == not_read


def test_wandb_run_without_the_extra_says_what_to_install(tmp_path, monkeypatch):
    import builtins

    root = tmp_path / "w"
    (root / "wandb" / "offline-run-20261201_120000-abc").mkdir(parents=True)
    (root / "wandb" / "offline-run-20261201_120000-abc" / "run-abc.wandb").write_bytes(b":W&B")
    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name.startswith("wandb"):
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(ValueError, match=r"pip install 'saturation\[wandb\]'"):
        ingest_runs([root], progress=False)


def test_a_wandb_directory_without_history_beside_a_console_log_is_a_note(tmp_path):
    """A wandb run never synced (only files/output.log) beside the console log that holds
    every step: strict ingest reads the console log and notes the wandb directory (it failed
    before); without the console log it is still a problem."""
    from skyrl_fixtures import console_log

    root = tmp_path / "run"
    wdir = root / "wandb" / "run-20261201_120000-abc123"
    write(wdir / "files" / "output.log", "captured stdout\n")
    write(root / "train.log", console_log(3))
    res = ingest_runs([root], progress=False)
    assert res.problems == [] and sorted(res.metrics["step"].values.tolist()) == [1, 2, 3]
    assert len(res.accounting["notes"]) == 1 and str(wdir) in res.accounting["notes"][0]
    (root / "train.log").unlink()
    with pytest.raises(IngestError, match=r"without a run-\*.wandb history file"):
        ingest_runs([root], progress=False)


def test_truncated_wandb_history_is_reported(tmp_path):
    pytest.importorskip("wandb")
    from skyrl_fixtures import wandb_run_dir

    root = wandb_run_dir(tmp_path / "cut")
    history = next(root.glob("wandb/offline-run-*/run-*.wandb"))
    history.write_bytes(history.read_bytes()[:-40])
    res = ingest_runs([root], strict=False, progress=False)
    assert len(res.problems) == 1 and "run-" in res.problems[0] and "steps before it were read" in res.problems[0]
    with pytest.raises(IngestError):
        ingest_runs([root], progress=False)


# ---------------------------------------------------------------- R2E-Gym checkpoint evals
def _r2e_dir(tmp_path, zst=False):
    from r2e_fixtures import write_eval

    root = tmp_path / "r2egym_t2"
    images = [f"namanjain12/pandas_final:{i:04x}" for i in range(4)]
    files = {
        "eval_ckpt_struct_t2_step10": [(images[0], 1.0), (images[1], 0.0), (images[2], 0.0), (images[3], None)],
        "eval_ckpt_struct_t2_step20": [(images[0], 1.0), (images[1], 1.0), (images[2], 0.0)],
        "eval_ckpt_struct_y_step10": [(images[0], 1.0), (images[1], 1.0), (images[2], 1.0), (images[0], 0.0)],
    }
    for name, results in files.items():
        path = write_eval(root, name, results)
        if zst:
            path.with_name(path.name + ".zst").write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
            path.unlink()
    (root / "eval_log_index.txt").write_text(
        "# file -> run label\n"
        "eval_ckpt_struct_t2_step10.jsonl\tt2\n"
        "eval_ckpt_struct_t2_step20.jsonl\tt2\n"
        "eval_ckpt_struct_y_step10.jsonl\tt2yarn\n"
    )
    (root / "notes.jsonl").write_text('{"note": "not a trajectory"}\n')
    return root, images


@pytest.mark.parametrize("zst", [False, True])
def test_r2e_gym_checkpoint_evals_ingest_per_instance_resolves(tmp_path, zst):
    root, images = _r2e_dir(tmp_path, zst)
    c = scan_run_dir(root)
    assert len(c.r2e_trajectories) == 3 and [p.name for p in c.ignored] == ["notes.jsonl"]
    assert looks_like_run_dir(root)
    res = ingest_runs([root], progress=False)
    t = res.trials
    frame = t[["run", "arm", "step", "instance_id", "sample", "graded", "reward", "ungraded_reason"]].to_dataframe()
    assert len(frame) == 11 and res.accounting["rows_read"] == 11 and res.accounting["rows_rejected"] == 0
    assert set(zip(frame["run"], frame["arm"], strict=True)) == {("t2", "t2"), ("t2yarn", "t2yarn")}
    by = frame.groupby(["arm", "step"])
    assert by["reward"].sum().to_dict() == {("t2", 10): 1.0, ("t2", 20): 2.0, ("t2yarn", 10): 3.0}
    assert by.size().to_dict() == {("t2", 10): 4, ("t2", 20): 3, ("t2yarn", 10): 4}
    # the crashed-free rollout without a reward is ungraded, not a 0 that counts as graded
    none = frame[~frame["graded"].astype(bool)]
    assert list(none["instance_id"]) == [images[3]] and list(none["ungraded_reason"]) == ["no_score"]
    # an instance evaluated twice in one file is two samples
    again = frame[(frame["arm"] == "t2yarn") & (frame["instance_id"] == images[0])]
    assert sorted(again["sample"]) == [0, 1] and sorted(again["reward"]) == [0.0, 1.0]
    assert set(np.unique(t["dataset"].values)) == {"r2egym"}
    assert set(np.unique(t["stop_reason"].values)) == {"agent"}
    np.testing.assert_array_equal(np.unique(t["tokens_total"].values), [3000.0])  # 3 steps x 1000 tokens
    # the trials feed the saturation-curve model's per (arm, step) counts
    from saturation.models.sigmoid import arm_steps

    counts = arm_steps(t)
    assert counts.arms == ["t2", "t2yarn"]
    np.testing.assert_array_equal(counts.n, [[4, 3], [4, 0]])


def test_r2e_gym_bad_lines_are_reported_with_file_line_and_field(tmp_path):
    from r2e_fixtures import trajectory

    root, _ = _r2e_dir(tmp_path)
    bad = root / "eval_ckpt_struct_t2_step30.jsonl"
    good = trajectory("img:ok", 1.0, exp_name="x")
    no_image = json.loads(good)
    del no_image["docker_image"], no_image["ds"]["docker_image"]
    bad_reward = json.loads(good) | {"reward": "yes"}
    bad.write_text(good + "\n" + json.dumps(no_image) + "\n" + json.dumps(bad_reward) + "\n{truncated\n")
    with pytest.raises(IngestError) as info:
        ingest_runs([root], progress=False)
    text = str(info.value)
    for needle in (
        f"{bad}:2: field 'ds.docker_image': missing",
        f"{bad}:3: field 'reward': 'yes' is not a finite number",
        f"{bad}:4: ",
    ):
        assert needle in text, text
    res = ingest_runs([root], strict=False, progress=False)
    acc = res.accounting
    assert acc["rows_read"] == 15 and acc["rows_kept"] == 12 and acc["rows_rejected"] == 3
    assert res.trials.sizes["trial"] == 12 and int((res.trials["step"] == 30).sum()) == 1
