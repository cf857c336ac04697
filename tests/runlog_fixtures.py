"""Run logs written the way each framework writes them (tests/test_runlogs.py).

* verl console tracker: ``concat_dict_to_str`` below is verl's function, copied line for line
  (verl imports torch at module import, so it cannot be imported here):
  volcengine/verl@b178a3cd ``verl/utils/logger/aggregate_logger.py:26-32`` (pprint.pformat
  values) and, before 2025, the same function with ``f"{k}:{v:.3f}"``
  (volcengine/verl@30911f13 ``verl/utils/logger/aggregate_logger.py``); ``LocalLogger.log``
  prints it (``:49-51``) and Ray prefixes the driver's stdout with ``(TaskRunner pid=N)``
  (2024: ``(main_task pid=N)``, coloured).
* verl file tracker: ``FileLogger.log`` (``verl/utils/tracking.py:250-252``):
  ``orjson.dumps({"step": step, "data": data}, option=orjson.OPT_SERIALIZE_NUMPY) + b"\\n"``.
* TRL: ``transformers.TrainerState`` filled as ``Trainer.log`` fills it (transformers 5.x
  ``trainer.py``: ``logs["epoch"] = self.state.epoch``; ``output = {**logs, "step":
  self.state.global_step}``; ``self.state.log_history.append(output)``) and written by
  ``TrainerState.save_to_json``; GRPO's keys as TRL's ``GRPOTrainer`` logs them.
* MLflow: ``mlflow.log_metrics`` into a file store (``MLFLOW_ALLOW_FILE_STORE=true``).
* TensorBoard: ``tensorboard.summary.Writer.add_scalar`` (TF2-style scalar tensors), and
  torch's ``SummaryWriter.add_scalar`` path: ``Summary(value=[Summary.Value(tag=name,
  simple_value=scalar)])`` (torch/utils/tensorboard/summary.py ``scalar``, new_style=False)
  written as an ``Event`` by tensorboard's ``EventFileWriter``.
"""

from __future__ import annotations

import numbers
import os
import pprint
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def concat_dict_to_str(dict: dict, step):
    output = [f"step:{step}"]
    for k, v in dict.items():
        if isinstance(v, numbers.Number):
            output.append(f"{k}:{pprint.pformat(v)}")
    output_str = " - ".join(output)
    return output_str


def concat_dict_to_str_2024(dict: dict, step):
    output = [f"step:{step}"]
    for k, v in dict.items():
        if isinstance(v, numbers.Number):
            output.append(f"{k}:{v:.3f}")
    output_str = " - ".join(output)
    return output_str


def verl_metrics(step: int, rng: np.random.Generator, *, val: bool = False, source: str = "openai/gsm8k") -> dict:
    """A verl step's metrics as ``RayPPOTrainer.fit`` collects them (numpy scalars from
    ``reduce_metrics``, ints for the global step)."""
    m: dict[str, Any] = {
        "training/global_step": step,
        "training/epoch": 0,
        "actor/entropy": np.float64(rng.uniform(0.2, 0.6)),
        "actor/pg_loss": np.float64(rng.normal()),
        "actor/grad_norm": np.float64(rng.uniform(0, 2)),
        "critic/score/mean": np.float64(rng.uniform(0, 1)),
        "critic/score/max": np.float64(1.0),
        "critic/rewards/mean": float(rng.uniform(0, 1)),
        "response_length/mean": np.float64(rng.uniform(100, 900)),
        "global_seqlen/min": np.int64(rng.integers(1000, 5000)),
        "perf/max_memory_allocated_gb": np.float64(rng.uniform(10, 60)),
        "timing_s/step": np.float64(rng.uniform(20, 90)),
        "timing_per_token_ms/gen": np.float64(rng.uniform(0, 1)),
    }
    if val:
        m[f"val-core/{source}/reward/mean@1"] = np.float64(rng.uniform(0, 1))
        m[f"val-aux/{source}/reward/std@1"] = np.float64(rng.uniform(0, 1))
    return m


def verl_val_metrics(rng: np.random.Generator, source: str = "openai/gsm8k") -> dict:
    """What ``_validate`` returns (logged alone before training and at a resume)."""
    return {
        f"val-core/{source}/reward/mean@1": np.float64(rng.uniform(0, 1)),
        f"val-aux/{source}/reward/std@1": np.float64(rng.uniform(0, 1)),
    }


def write_verl_console(
    path: Path, logged: list[tuple[int, Mapping[str, Any]]], *, variant: str = "2025", foreign: bool = True
) -> Path:
    """Print each (step, metrics) as ``LocalLogger.log`` does, behind Ray's prefix, between
    other driver output (as a captured ``ray job`` log)."""
    fmt = concat_dict_to_str if variant == "2025" else concat_dict_to_str_2024
    prefix = "(TaskRunner pid=2101) " if variant == "2025" else "\x1b[36m(main_task pid=58213)\x1b[0m "
    lines = []
    if foreign:
        lines += [f"{prefix}Training Progress:   0%|          | 0/100 [00:00<?, ?it/s]", "", "INFO  worker started"]
    for step, metrics in logged:
        lines.append(prefix + fmt(dict(metrics), step=step))
        if foreign:
            lines.append(f"{prefix}step {step} done; training/global_step:{step} noted")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_verl_jsonl(path: Path, logged: list[tuple[int, Mapping[str, Any]]]) -> Path:
    """verl's ``FileLogger`` (verl/utils/tracking.py:248-252), unbuffered binary writes."""
    import orjson

    with open(path, "wb", buffering=0) as fp:
        for step, data in logged:
            fp.write(orjson.dumps({"step": step, "data": dict(data)}, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    return path


def trl_logs(step: int, rng: np.random.Generator) -> dict[str, float]:
    """A GRPO training log row as TRL's ``GRPOTrainer.log`` passes it to ``Trainer.log``."""
    return {
        "loss": float(rng.normal(0, 0.01)),
        "grad_norm": float(rng.uniform(0, 1)),
        "learning_rate": 1e-6 * (1 - step / 1000),
        "num_tokens": float(1000 * step),
        "completions/mean_length": float(rng.uniform(100, 500)),
        "rewards/accuracy_reward/mean": float(rng.uniform(0, 1)),
        "rewards/accuracy_reward/std": float(rng.uniform(0, 0.5)),
        "rewards/format_reward/mean": float(rng.uniform(0, 1)),
        "reward": float(rng.uniform(0, 2)),
        "reward_std": float(rng.uniform(0, 1)),
        "kl": float(rng.uniform(0, 0.1)),
        "entropy": float(rng.uniform(0.1, 0.9)),
        "clip_ratio/region_mean": 0.0,
    }


def write_trl_output(root: Path, steps: list[int], *, save_every: int, logging_steps: int, seed: int = 0) -> dict:
    """A GRPO output directory: ``checkpoint-N/trainer_state.json`` every ``save_every``
    steps, written by ``TrainerState.save_to_json``; returns the full log history."""
    from transformers import TrainerState

    rng = np.random.default_rng(seed)
    state = TrainerState(logging_steps=logging_steps, save_steps=save_every, max_steps=max(steps))
    for step in steps:
        state.global_step = step
        state.epoch = step / 500
        logs = trl_logs(step, rng)
        logs["epoch"] = state.epoch  # Trainer.log
        state.log_history.append({**logs, "step": state.global_step})
        if step % (2 * logging_steps) == 0:
            eval_logs = {"eval_loss": float(rng.uniform()), "eval_reward": float(rng.uniform()), "epoch": state.epoch}
            state.log_history.append({**eval_logs, "step": state.global_step})
        if step % save_every == 0:
            ckpt = root / f"checkpoint-{step}"
            ckpt.mkdir(parents=True, exist_ok=True)
            state.save_to_json(str(ckpt / "trainer_state.json"))
    return {"history": list(state.log_history), "state": state}


def write_mlflow(root: Path, runs: Mapping[str, list[tuple[int, Mapping[str, float]]]]) -> Path:
    """``mlflow.log_metrics(metrics, step=...)`` per step into a file store at ``root/mlruns``
    (as verl's ``_MlflowLoggingAdapter.log`` calls it, verl/utils/tracking.py:292-309)."""
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    import mlflow

    store = root / "mlruns"
    mlflow.set_tracking_uri(store.as_uri())
    exp = mlflow.set_experiment("verl-demo")
    for name, logged in runs.items():
        with mlflow.start_run(experiment_id=exp.experiment_id, run_name=name):
            for step, metrics in logged:
                mlflow.log_metrics(metrics=dict(metrics), step=step)
    return store


def write_tensorboard(logdir: Path, logged: list[tuple[int, Mapping[str, float]]], *, style: str) -> Path:
    """Scalars into an event file: ``style="torch"`` as torch's SummaryWriter.add_scalar
    writes them (simple_value), ``style="tensorboard"`` with tensorboard.summary.Writer."""
    logdir.mkdir(parents=True, exist_ok=True)
    if style == "tensorboard":
        from tensorboard.summary import Writer

        writer = Writer(str(logdir))
        for step, metrics in logged:
            for key, value in metrics.items():
                writer.add_scalar(key, value, step, wall_time=1.0e9 + step)
        writer.close()
        return logdir
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(logdir))
    for step, metrics in logged:
        for key, value in metrics.items():  # SummaryWriter.add_scalar: one event per scalar
            summary = Summary(value=[Summary.Value(tag=key, simple_value=float(value))])
            writer.add_event(Event(summary=summary, wall_time=1.0e9 + step, step=step))
    writer.close()
    return logdir
