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
