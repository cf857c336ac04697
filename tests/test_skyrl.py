"""SkyRL console logs: streaming parse, accounting, malformed blocks (fixtures: skyrl_fixtures.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from saturation.skyrl import LogFormatError, clean_line, metrics_dataset, read_console_log
from skyrl_fixtures import PREFIX, console_log, write


def test_clean_line_strips_prefix_colour_and_repeat_marker():
    raw = "(TrainerActor pid=12, ip=10.1.2.3) \x1b[1;32mStep 3:\x1b[0m [repeated 4x across cluster]\n"
    assert clean_line(raw) == "Step 3:"


@pytest.mark.parametrize("suffix", [".log", ".log.zst"])
def test_console_log_to_metrics(tmp_path, suffix):
    path = write(tmp_path / f"run{suffix}", console_log(6, eval_only=True))
    log = read_console_log(path)
    assert sorted(log.steps) == [1, 2, 3, 4, 5, 6]
    assert log.steps[3]["reward/avg_raw_reward"] == pytest.approx(0.33)
    assert log.steps[3]["trainer/global_step"] == 3
    assert "timing/step" in log.steps[3]  # the async trainer's second block is merged by step
    assert log.eval_only == [{"eval/swe_gym/avg_score": 0.41, "eval/swe_gym/pass_at_8": 0.62}]
    assert log.config["trainer.policy.model.path"] == "Qwen/Qwen3-8B"
    assert log.config["trainer.algorithm.loss_reduction"] == "sequence_mean"
    assert log.run == "Qwen/Qwen3-8B"
    acc = log.accounting()
    assert acc["lines"] == len(console_log(6, eval_only=True).splitlines())
    assert acc["malformed"] == 0 and acc["blocks"] == 13
    ds = metrics_dataset([log])
    assert ds["reward_mean"].attrs["metric_name"] == "reward/avg_raw_reward"
    assert ds["pass_at_k"].attrs == {"metric_name": "reward/avg_pass_at_8", "k": 8}
    assert ds["policy_entropy"].sel(step=6).item() == pytest.approx(0.0788)
    assert ds.sizes == {"run": 1, "step": 6}
    assert json.loads(ds.attrs["config/Qwen/Qwen3-8B"])["generator.n_samples_per_prompt"] == "8"


def test_malformed_blocks_are_reported_with_file_and_line(tmp_path):
    good = console_log(2, async_timing=False)
    head = f"{PREFIX}2025-01-01 00:00:00.000 | INFO     | skyrl_train.utils.tracking:log:189 - Step"  # the tracker's
    bad = (
        good
        + f"{head} 3: \n{PREFIX}{{'reward/avg_raw_reward': '0.5',\n"  # truncated: next Step arrives
        + f"{head} 4: \n{PREFIX}{{'reward/avg_raw_reward': __import__('os').getcwd()}}\n"  # not a literal
        + f"{head} 5: \n{PREFIX}{{'reward/avg_raw_reward': '0.6', 'note': 'text'}}\n"
        + f"{head} 6: \n{PREFIX}{{'reward/avg_raw_reward': '0.7',\n"
    )  # truncated at end of file
    path = write(tmp_path / "bad.log", bad)
    log = read_console_log(path)
    assert sorted(log.steps) == [1, 2, 5]
    lines = bad.splitlines()
    first = lines.index(f"{PREFIX}{{'reward/avg_raw_reward': '0.5',") + 1
    assert any(p.startswith(f"{path}:{first}: truncated") for p in log.problems), log.problems
    assert any("malformed metrics block" in p for p in log.problems)
    assert any("end of file" in p for p in log.problems)
    assert log.accounting()["malformed"] == 3
    assert log.non_numeric == {"note": "text"}
    with pytest.raises(LogFormatError, match=r"bad\.log:\d+: truncated"):
        read_console_log(path, strict=True)


def test_a_step_logged_again_with_its_keys_is_a_resumed_attempt_that_wins(tmp_path):
    text = "Step 1:\n{'a': '1.0000', 'b': 2}\nStep 1:\n{'a': '1.5000', 'c': 3}\n"
    log = read_console_log(write(tmp_path / "c.log", text))
    assert log.steps[1] == {"a": 1.5, "c": 3.0}
    acc = log.accounting()
    assert (acc["restarts"], acc["resumed_steps"], acc["values_superseded"], acc["conflicting_values"]) == (1, 1, 2, 0)


def test_two_runs_share_steps_and_need_distinct_identities(tmp_path):
    a = read_console_log(write(tmp_path / "a.log", console_log(3)))
    b_text = console_log(4, seed=1).replace("Qwen/Qwen3-8B", "ckpt/s85")
    b = read_console_log(write(tmp_path / "b.log.zst", b_text))
    ds = metrics_dataset([a, b])
    assert list(ds["run"].values) == ["Qwen/Qwen3-8B", "ckpt/s85"]
    assert np.isnan(ds["reward_mean"].sel(run="Qwen/Qwen3-8B", step=4))
    with pytest.raises(ValueError, match="run identity"):
        metrics_dataset([a, a])


def test_blocks_across_chunk_boundaries_parse_the_same(tmp_path, monkeypatch):
    import saturation.skyrl as sk

    text = console_log(5, eval_only=True, rollouts=3)
    path = write(tmp_path / "chunks.log.zst", text)
    whole = read_console_log(path)
    for size in (37, 200, 1000):  # markers, blocks and eval lines split at every kind of place
        monkeypatch.setattr(sk, "CHUNK_CHARS", size)
        part = read_console_log(path)
        assert part.steps == whole.steps and part.eval_only == whole.eval_only
        assert part.config == whole.config
        assert part.accounting() == whole.accounting(), size
    assert whole.accounting()["lines"] == len(text.splitlines())


def test_truncated_zstd_log_keeps_the_blocks_before_the_cut(tmp_path):
    import zstandard

    text = console_log(40, rollouts=40, seed=3)
    data = zstandard.ZstdCompressor().compress(text.encode())
    path = tmp_path / "cut.log.zst"
    path.write_bytes(data[:-5])
    log = read_console_log(path)
    assert 0 < len(log.steps) < 40
    assert sorted(log.steps) == list(range(1, len(log.steps) + 1))
    assert len(log.problems) == 1 and "cut.log.zst: truncated zstd stream" in log.problems[0]
    with pytest.raises(LogFormatError, match="truncated zstd stream"):
        read_console_log(path, strict=True)


# ------------------------------------------------------------------ silent-loss cases (issue 17)
def _blocks(n=3, seed=0, actor="skyrl_entrypoint", pid=2143):
    from skyrl_fixtures import Loguru, ray_lines, step_metrics

    rng = np.random.default_rng(seed)
    log = Loguru()
    try:
        return [ray_lines(log.console_log(step_metrics(s, rng), s), actor, pid) for s in range(1, n + 1)]
    finally:
        log.close()


def _expected(n=3, seed=0):
    from skyrl_fixtures import step_metrics

    rng = np.random.default_rng(seed)
    return {
        s: {k: float(f"{v:.4f}") if isinstance(v, float) else float(v) for k, v in step_metrics(s, rng).items()}
        for s in range(1, n + 1)
    }


def _check(log, n=3):
    assert log.problems == []
    assert log.steps == _expected(n)


@pytest.mark.parametrize("prefix", ["0: ", "2026-08-12T12:48:01.123456789Z ", "3: 2026-08-12T12:48:01+00:00 "])
def test_a_prefix_on_every_line_is_learned_and_stripped(tmp_path, prefix):
    text = "".join(prefix + line + "\n" for line in "".join(_blocks()).splitlines())
    log = read_console_log(write(tmp_path / "p.log", text))
    _check(log)
    assert log.accounting()["line_prefix"] != ""


@pytest.mark.parametrize("actor", ["TrainerActor(name with spaces)", "a (b) c", "x pid=1 y"])
def test_ray_actor_names_of_any_shape(tmp_path, actor):
    _check(read_console_log(write(tmp_path / "a.log", "".join(_blocks(actor=actor)))))


def _interleave(block: str, at: int, foreign: str) -> str:
    lines = block.splitlines(keepends=True)
    return "".join(lines[:at]) + foreign + "".join(lines[at:])


def test_foreign_lines_inside_a_block_are_counted_not_fatal(tmp_path):
    from skyrl_fixtures import CYAN, RESET, ray_lines

    b = _blocks()
    other = ray_lines("{'note': 'another actor printed a dict', 'x': 1}", "AsyncVLLMInferenceEngine", 3001, "10.0.0.2")
    warning = ray_lines("/usr/lib/python3.11/site-packages/torch/x.py:12: UserWarning: something\n  warnings.warn(")
    tqdm = f"{CYAN}(skyrl_entrypoint pid=2143){RESET} Generating:  50%|#####     | 4/8 [00:01<00:01]\n"
    b[0] = _interleave(b[0], 1, other)  # between the header and the dict
    b[1] = _interleave(b[1], 5, warning + other)  # inside the dict: a warning, another actor
    b[2] = _interleave(b[2], 3, tqdm)  # a progress bar
    log = read_console_log(write(tmp_path / "i.log", "".join(b)))
    _check(log)
    assert log.accounting()["interleaved_lines"] == 5


def test_model_text_with_a_step_marker_adds_no_keys(tmp_path):
    from skyrl_fixtures import ray_lines

    model = ray_lines('Step 2:\n{"name": "terminal", "arguments": {"command": "ls"}}', "CodeSearchGenerator", 4100)
    b = _blocks()
    log = read_console_log(write(tmp_path / "m.log", b[0] + model + b[1] + b[2]))
    _check(log)
    assert log.accounting()["step_markers_not_the_trackers"] == 1  # no loguru header: model text


def test_progress_bar_glued_before_a_header(tmp_path):
    b = _blocks()
    first, rest = b[1].split("\n", 1)
    head, tail = first.split(")\x1b[0m ", 1)
    glued = f"{head})\x1b[0m \rGenerating:  88%|########8 | 7/8\rGenerating: 100%|##########| 8/8{tail}\n{rest}"
    _check(read_console_log(write(tmp_path / "t.log", b[0] + glued + b[2])))


def test_numpy_scalars_and_bare_nan_parse(tmp_path):
    import pprint

    from skyrl_fixtures import stringify_floats

    # what ConsoleLogger prints for values its float test misses (numpy-2 scalars); bare
    # nan / -inf written in by hand
    data = {
        "a": np.float32(0.5),
        "b": 1,
        "c": np.int64(3),
        "d": 2,
        "e": np.True_,
        "f": np.float32("nan"),
        "nan_name": float("nan"),
        "long/key/padding/to/force/one/key/per/line": 0,
    }
    text = "Step 1: \n" + pprint.pformat(stringify_floats(data)) + "\n"
    text = text.replace("'b': 1", "'b': nan").replace("'d': 2", "'d': -inf")
    log = read_console_log(write(tmp_path / "n.log", text))
    assert log.problems == []
    v = log.steps[1]
    assert v["a"] == 0.5 and np.isnan(v["b"]) and v["c"] == 3 and v["d"] == -np.inf and v["e"] == 1
    assert np.isnan(v["f"]) and np.isnan(v["nan_name"])


@pytest.mark.parametrize("cut", [1, 5, 12])
def test_small_truncated_zst_log_is_reported(tmp_path, cut):
    import zstandard

    data = zstandard.ZstdCompressor().compress("".join(_blocks(1)).encode())
    path = tmp_path / "small.log.zst"
    path.write_bytes(data[:-cut])
    log = read_console_log(path)
    assert len(log.problems) == 1 and ("truncated" in log.problems[0] or "corrupt" in log.problems[0])
    with pytest.raises(LogFormatError):
        read_console_log(path, strict=True)


def test_every_step_block_is_parsed_or_reported(tmp_path):
    b = _blocks(4)
    lines = b[2].splitlines(keepends=True)
    broken = "".join(lines[:4])  # the block of step 3 cut short by step 4
    log = read_console_log(write(tmp_path / "b.log", b[0] + b[1] + broken + b[3]))
    assert sorted(log.steps) == [1, 2, 4]
    assert len(log.problems) == 1 and "step 3" in log.problems[0]
    n = len((b[0] + b[1]).splitlines())
    assert log.problems[0].startswith(f"{tmp_path / 'b.log'}:{n + 2}:")


def test_same_source_lines_cannot_close_join_or_replace_a_block(tmp_path):
    b = _blocks()
    close = _interleave(b[0], 3, ray_lines_same(" }"))  # would close the dict early
    join = _interleave(b[1], 4, ray_lines_same(" 'hello world'"))  # would be joined to the next key
    log = read_console_log(write(tmp_path / "j.log", close + join + b[2]))
    _check(log)
    assert log.interleaved == 2
    replace = _interleave(b[0], 1, ray_lines_same("{'foo': 1}"))  # a dict line before the real one
    log = read_console_log(write(tmp_path / "r.log", replace + b[1] + b[2]))
    assert log.steps[1] == {"foo": 1.0}
    assert len(log.problems) == 1 and "more dict lines from the same source follow" in log.problems[0]


def ray_lines_same(text):
    from skyrl_fixtures import ray_lines

    return ray_lines(text)


def test_a_tracker_header_without_its_dict_is_reported(tmp_path):
    b = _blocks()
    header = b[1].splitlines(keepends=True)[0]
    log = read_console_log(write(tmp_path / "h.log", b[0] + header + b[2]))
    assert sorted(log.steps) == [1, 3] and log.markers_without_block == 1
    assert len(log.problems) == 1 and "not followed by its metrics dict" in log.problems[0]


# ------------------------------------------------------------------ dynamic sampling
@pytest.mark.parametrize(
    ("kind", "config"), [("filter", "override"), ("replace", "override"), ("filter", "yaml"), ("replace", "none")]
)
def test_dynamic_sampling_round_lines_become_per_step_counts(tmp_path, kind, config):
    """Each round line (upstream's own f-strings, written through loguru and Ray's prefix)
    is placed at the step whose block follows it; the counts per step are the fixture's, and
    the strategy comes from the override, the YAML dump or, with neither, the lines."""
    from skyrl_fixtures import dynamic_sampling_log

    text, truth = dynamic_sampling_log(8, kind=kind, config=config, seed=3)
    log = read_console_log(write(tmp_path / "run.log", text), strict=True)
    assert log.dynamic_sampling == kind
    assert log.yaml_dynamic_sampling == (kind if config == "yaml" else None)
    assert sorted(log.steps) == sorted(truth)
    for step, t in truth.items():
        got = {k.split("/")[1]: log.steps[step][k] for k in log.steps[step] if k.startswith("dynamic_sampling/")}
        assert got["rounds"] == t["rounds"] and got["prompts_generated"] == t["generated"]
        assert got["prompts_mixed"] == t["mixed"]
        assert got["prompts_trained"] == 16
        assert got["prompts_trained_mixed"] == (16 if kind == "filter" else t["mixed_last"])
        assert log.steps[step]["reward/avg_raw_reward"] == pytest.approx(t["logged_reward"], abs=5e-5)
    acc = log.accounting()
    assert acc["dynamic_sampling_lines"] > 0 and acc["dynamic_sampling_lines_unplaced"] == 0
    assert acc["malformed"] == 0 and acc["lines"] == len(text.splitlines())
    ds = metrics_dataset([log])
    assert ds.attrs["trainer.algorithm.dynamic_sampling.type/Qwen/Qwen3-8B"] == kind
    assert ds["dynamic_sampling_rounds"].attrs["metric_name"] == "dynamic_sampling/rounds"
    assert "per-round log lines" in ds["dynamic_sampling_rounds"].attrs["description"]


@pytest.mark.parametrize("kind", ["filter", "replace"])
def test_a_resumed_attempts_round_counts_win_as_its_metrics_do(tmp_path, kind):
    """A run that crashed after step 5 and restarted from step 1 appends a second attempt to
    the log: steps 1-3 take the second attempt's round counts (not the first's, kept before as
    'first wins'), steps 4-5 keep the first attempt's; the replaced round lines are counted."""
    from skyrl_fixtures import dynamic_sampling_log

    first, truth1 = dynamic_sampling_log(5, kind=kind, seed=3)
    second, truth2 = dynamic_sampling_log(3, kind=kind, seed=4)
    log = read_console_log(write(tmp_path / "run.log", first + second), strict=True)
    truth = {**truth1, **truth2}
    assert sorted(log.steps) == [1, 2, 3, 4, 5]
    differ = 0
    for step, t in truth.items():
        got = {k.split("/")[1]: log.steps[step][k] for k in log.steps[step] if k.startswith("dynamic_sampling/")}
        assert got["rounds"] == t["rounds"] and got["prompts_generated"] == t["generated"]
        assert got["prompts_mixed"] == t["mixed"]
        assert log.steps[step]["reward/avg_raw_reward"] == pytest.approx(t["logged_reward"], abs=5e-5)
        differ += step <= 3 and (t["rounds"], t["mixed"]) != (truth1[step]["rounds"], truth1[step]["mixed"])
    assert differ > 0  # the two attempts' counts differ somewhere, so the test can tell them apart
    acc = log.accounting()
    assert acc["resumed_steps"] == 3 and acc["conflicting_values"] == 0
    first_lines = read_console_log(write(tmp_path / "first.log", first)).accounting()["dynamic_sampling_lines"]
    assert 0 < acc["dynamic_sampling_lines_superseded"] < first_lines  # steps 1-3 of 5


def test_a_step_that_never_logged_leaves_its_round_lines_unplaced(tmp_path):
    from skyrl_fixtures import dynamic_sampling_log

    text, truth = dynamic_sampling_log(4, kind="filter", seed=1, unfinished=True)
    log = read_console_log(write(tmp_path / "run.log", text), strict=True)
    assert sorted(log.steps) == [1, 2, 3, 4] == sorted(truth)
    assert log.accounting()["dynamic_sampling_lines_unplaced"] >= 1


def test_without_dynamic_sampling_nothing_is_added(tmp_path):
    from skyrl_fixtures import Loguru, omegaconf_yaml, ray_lines

    log = read_console_log(write(tmp_path / "run.log", console_log(4)))
    assert log.dynamic_sampling is None and not any(k.startswith("dynamic_sampling/") for k in log.steps[2])
    assert not any(k.startswith("trainer.algorithm.dynamic_sampling") for k in metrics_dataset([log]).attrs)
    sink = Loguru()  # the config dump of a run with dynamic sampling off: type null
    try:
        dump = ray_lines(sink.info(omegaconf_yaml(None)))
    finally:
        sink.close()
    text = dump + console_log(2)
    log = read_console_log(write(tmp_path / "null.log", text))
    assert log.yaml_dynamic_sampling == "null" and log.dynamic_sampling is None


def test_a_restart_takes_each_steps_later_counts_and_a_bad_block_places_none(tmp_path):
    """Round lines go to the next tracker marker in the file, whatever its step: a restart
    appended to the log (steps 1-3, then 1-4 again) takes each step's later counts, as its
    metrics do (no conflicts); the rounds before a block that cannot be read are unplaced,
    never added to the next step."""
    from skyrl_fixtures import dynamic_sampling_log

    first, _ = dynamic_sampling_log(3, kind="filter", seed=1)
    second, t2 = dynamic_sampling_log(4, kind="filter", seed=2)
    log = read_console_log(write(tmp_path / "restart.log", first + second))
    for step in (1, 2, 3, 4):
        assert log.steps[step]["dynamic_sampling/rounds"] == t2[step]["rounds"]
        assert log.steps[step]["dynamic_sampling/prompts_generated"] == t2[step]["generated"]
    assert log.conflicts == 0 and log.accounting()["dynamic_sampling_lines_superseded"] > 0
    text, truth = dynamic_sampling_log(3, kind="filter", seed=5)
    lines = text.split("\n")
    header = next(i for i, line in enumerate(lines) if "Step 2:" in line)
    # step 2's dict holds a value that is no literal: the block is malformed
    j = next(i for i in range(header, len(lines)) if "'trainer/epoch': 0," in lines[i])
    lines[j] = lines[j].replace("'trainer/epoch': 0,", "'trainer/epoch': zero,")
    log = read_console_log(write(tmp_path / "bad.log", "\n".join(lines)))
    assert any("malformed" in p for p in log.problems) and 2 not in log.steps
    assert log.steps[1]["dynamic_sampling/rounds"] == truth[1]["rounds"]
    assert log.steps[3]["dynamic_sampling/rounds"] == truth[3]["rounds"]
    assert log.accounting()["dynamic_sampling_lines_unplaced"] == truth[2]["rounds"]  # one filter line a round


@pytest.mark.parametrize("chunk", [211, 459, 866, 903, 1500])
def test_the_yaml_dump_is_read_across_a_chunk_boundary(tmp_path, monkeypatch, chunk):
    import saturation.skyrl as sk
    from skyrl_fixtures import dynamic_sampling_log

    text, _ = dynamic_sampling_log(2, kind="filter", config="yaml", seed=0)
    path = write(tmp_path / "run.log", text)
    monkeypatch.setattr(sk, "CHUNK_CHARS", chunk)
    assert sk.read_console_log(path, strict=True).yaml_dynamic_sampling == "filter"
