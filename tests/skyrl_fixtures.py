"""Generate SkyRL-shaped console logs for tests and the ingest benchmark (docs/skyrl.md).

The shapes follow the issue's description of skyrl-train output: Ray actor prefixes, ANSI
colour codes, ``[repeated Nx across cluster]`` suffixes, ``Step N:`` followed by a
Python-literal dict over several lines (decimals as 4-place strings), async trainers'
second ``timing/*`` block, an eval-only line and command-line overrides.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

PREFIX = "(skyrl_entrypoint pid=2143) "
OVERRIDES = ("trainer.policy.model.path=Qwen/Qwen3-8B trainer.algorithm.advantage_estimator=rloo "
             'trainer.algorithm.loss_reduction="sequence_mean" trainer.policy.optimizer_config.lr=8e-06 '
             "generator.n_samples_per_prompt=8")


def step_metrics(step: int, rng: np.random.Generator) -> dict[str, object]:
    return {
        "generate/avg_num_tokens": f"{5000 + rng.normal(0, 100):.4f}",
        "policy/policy_entropy": f"{0.08 - 0.0002 * step:.4f}",
        "policy/policy_loss": f"{rng.normal(0, 0.01):.4f}",
        "reward/avg_raw_reward": f"{min(0.3 + 0.01 * step, 0.5):.4f}",
        "reward/avg_pass_at_8": f"{0.62 + 0.0005 * step:.4f}",
        "reward/file_reward": f"{0.85 + 0.001 * step:.4f}",
        "trainer/global_step": step,
    }


def console_log(n_steps: int = 6, *, seed: int = 0, async_timing: bool = True, eval_only: bool = False,
                noise_lines: int = 3, rollouts: int = 0) -> str:
    """A console log as text with ``n_steps`` step blocks; per step ``noise_lines`` engine
    lines and, per rollout, a ``Reward details: {...}`` line and a ``Saving trajectory``
    line (``rollouts``; a real run prints prompts x samples of them, e.g. 64 x 8)."""
    rng = np.random.default_rng(seed)
    out = io.StringIO()
    out.write(f"{PREFIX}\x1b[32mINFO\x1b[0m launching: python -m skyrl_train.entrypoints.main_base {OVERRIDES}\n")
    for step in range(1, n_steps + 1):
        for i in range(noise_lines):
            out.write(f"(AsyncVLLMInferenceEngine pid={3000 + i}, ip=10.0.0.{i}) INFO generating batch "
                      f"[repeated {i + 2}x across cluster]\n")
        for r in range(rollouts):
            inst = f"repo__name-{r // 8:04d}"
            out.write(f"(SkyRLGymGenerator pid=4100) Reward details: {{'file_reward': {rng.random():.4f}, "
                      f"'module_reward': {rng.random():.4f}, 'entity_reward': {rng.random():.4f}}}\n")
            out.write(f"(SkyRLGymGenerator pid=4100) Saving trajectory to /data/traj/step_{step}/train/"
                      f"{inst}_{r % 8}.json\n")
        out.write(f"{PREFIX}\x1b[36m2026-08-12 12:48:{step:02d}\x1b[0m | INFO | trainer:train:412 - Step {step}:\n")
        items = list(step_metrics(step, rng).items())
        out.write(PREFIX + "{" + repr(items[0][0]) + ": " + repr(items[0][1]) + ",\n")
        for key, value in items[1:-1]:
            out.write(f"{PREFIX} {key!r}: {value!r},\n")
        out.write(f"{PREFIX} {items[-1][0]!r}: {items[-1][1]!r}}}\n")
        if async_timing:
            out.write(f"{PREFIX}Step {step}:\n")
            out.write(PREFIX + repr({"timing/step": f"{30 + rng.normal(0, 1):.4f}", "timing/generate": "12.5000"}) + "\n")
    if eval_only:
        out.write(f"{PREFIX}Metrics from eval only run: "
                  + repr({"eval/swe_gym/avg_score": "0.4100", "eval/swe_gym/pass_at_8": "0.6200"}) + "\n")
    return out.getvalue()


def write(path: Path, text: str) -> Path:
    """Write ``text`` (zstd-compressed when the name ends in .zst)."""
    data = text.encode()
    if path.suffix == ".zst":
        import zstandard

        data = zstandard.ZstdCompressor(level=3).compress(data)
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------ run directories
#: gold edits of every fixture instance (the shape of a trajectory's ``target``)
GOLD = {"file_changes": [
    {"file": "pkg/a.py", "changes": {"edited_modules": ["pkg/a.py:A"], "edited_entities": ["pkg/a.py:A.m"],
                                     "added_modules": [], "added_entities": []}},
    {"file": "pkg/b.py", "changes": {"edited_modules": ["pkg/b.py:f"], "edited_entities": ["pkg/b.py:f"]}},
]}

#: answers and, written out by hand, their (n_pred, n_gold, n_tp) at file, module, entity
ANSWERS = {
    "perfect": ([{"file": "pkg/a.py", "class_name": "A", "function_name": "m"},
                 {"file": "pkg/b.py", "function_name": "f"}], [(2, 2, 2), (2, 2, 2), (2, 2, 2)]),
    "partial": ([{"file": "pkg/a.py", "class_name": "A", "function_name": "m"}, {"file": "pkg/c.py"}],
                [(2, 2, 1), (1, 2, 1), (1, 2, 1)]),
    "wrong": ([{"file": "pkg/c.py", "function_name": "g"}], [(1, 2, 0), (1, 2, 0), (1, 2, 0)]),
    "file_only": ([{"file": "pkg/a.py"}], [(1, 2, 1), (0, 2, 0), (0, 2, 0)]),
}
TEXT_ANSWER = "Found it.\n```\npkg/a.py\nclass: A\nfunction: m\n\npkg/b.py\nfunction: f\n```"  # = perfect
REWARDS = {"perfect": 3.0, "partial": 1.5, "wrong": 0.0, "file_only": 0.5}


def trajectory(instance: str, kind: str, *, rep: int = 0) -> dict[str, object]:
    """One trajectory record; ``kind`` is an ANSWERS key, ``text`` (raw message only),
    ``none`` (no answer), ``several`` (two fenced blocks) or ``empty_file``."""
    parsed: object
    raw = ""
    if kind in ANSWERS:
        parsed = ANSWERS[kind][0]
    elif kind == "text":
        parsed, raw = None, TEXT_ANSWER
    elif kind == "none":
        parsed, raw = None, "I could not find anything."
    elif kind == "several":
        parsed, raw = None, TEXT_ANSWER + "\n" + TEXT_ANSWER
    else:
        parsed = [{"file": "", "function_name": "f"}]
    reward = REWARDS.get(kind, 3.0 if kind == "text" else 0.0)
    return {"instance_id": instance, "target": GOLD, "total_reward": reward,
            "reward_dict": {"file_reward": reward / 3, "module_reward": reward / 3, "entity_reward": reward / 3},
            "raw_final_message": raw, "parsed_final_message": parsed,
            "metrics_dict": {"num_turns": 5 + rep, "num_tool_calls": 9, "wall_clock_s": 41.5}}


#: per (step, phase): the kind of each instance_rep file (".error" for a crashed rollout)
PLAN = {
    (1, "train"): {"repo__x-1_0": "partial", "repo__x-1_1": "wrong", "repo__y-2_0": "file_only",
                   "repo__y-2_1": ".error"},
    (2, "train"): {"repo__x-1_0": "perfect", "repo__x-1_1": "text", "repo__y-2_0": "none",
                   "repo__y-2_1": "several"},
    (2, "eval"): {"repo__z-9_0": "perfect", "repo__z-9_1": "empty_file"},
}
EXPECTED_UNGRADED = {(1, "train", "repo__y-2", 1): "error_file", (2, "train", "repo__y-2", 0): "no_answer",
                     (2, "train", "repo__y-2", 1): "several_answers", (2, "eval", "repo__z-9", 1): "empty_file_name"}


def eval_dump_lines(n_prompts: int = 3, samples: int = 2) -> list[dict[str, object]]:
    """Eval-dump records; prompt p sample s scores p == 0 (1.0) else 0.5 * s, the last one
    has no score (ungraded)."""
    out = []
    for p in range(n_prompts):
        for s in range(samples):
            out.append({"input_prompt": [{"role": "user", "content": f"task {p}"}], "output_response": TEXT_ANSWER,
                        "score": 1.0 if p == 0 else 0.5 * s, "stop_reason": "stop", "data_source": "swe_gym",
                        "env_extras": {"instance_id": f"gym__t-{p}", "target": GOLD}})
    out[-1]["score"] = None
    return out


def run_dir(root: Path, *, model: str = "Qwen/Qwen3-8B", zst: bool = True) -> Path:
    """A SkyRL-shaped run directory: console log, trajectories (train + eval, one .error),
    an eval dump for step 3 and one for step 2 (superseded by step 2's eval trajectories),
    an eval-only log named by checkpoint step, the eval-log index and a stray file."""
    import json

    root.mkdir(parents=True, exist_ok=True)
    ext = ".zst" if zst else ""
    write(root / f"train.log{ext}", console_log(3, eval_only=False).replace("Qwen/Qwen3-8B", model))
    for (step, phase), files in PLAN.items():
        d = root / "trajectories" / f"step_{step}" / phase
        d.mkdir(parents=True, exist_ok=True)
        for name, kind in files.items():
            if kind == ".error":
                write(d / f"{name}.error", "Traceback (most recent call last):\nRuntimeError: sandbox timed out\n")
            else:
                inst, rep = name.rsplit("_", 1)
                write(d / f"{name}.json{ext}", json.dumps(trajectory(inst, kind, rep=int(rep)), indent=1))
    for step in (2, 3):
        d = root / "dumped_evals" / f"global_step_{step}_evals"
        d.mkdir(parents=True, exist_ok=True)
        write(d / f"swe_gym.jsonl{ext}", "\n".join(json.dumps(r) for r in eval_dump_lines()) + "\n")
    write(root / "eval_ckpt_struct_step40.log", f"{PREFIX}Metrics from eval only run: "
          + repr({"eval/swe_gym/avg_score": "0.4100", "eval/swe_gym/pass_at_8": "0.6200"}) + "\n")
    write(root / "eval_log_index.txt", "# eval log -> run label\neval_ckpt_struct_step40.log\ts85\n")
    write(root / "notes.md", "not a SkyRL file\n")
    return root
