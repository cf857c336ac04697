"""SkyRL / codescout run directories built the way the upstream code writes them.

Every writer here performs the upstream call itself (docs/skyrl.md cites the lines):

* console tracker: loguru with SkyRL's sink (format string, ``colorize=True``, INFO coloured
  ``<bold><green>``) and ``ConsoleLogger.log``: ``logger.info(f"Step {step}: \\n{pprint.pformat(
  stringify_floats(data))}")`` with floats turned into ``f"{x:.4f}"`` strings; then Ray's
  ``print_worker_logs`` prefix ``{CYAN}({actor} pid={pid}[, ip={ip}]){RESET_ALL} `` on every
  line;
* codescout trajectories: ``json.dump(result_dict, f, indent=2)`` of the eight real keys,
  ``raw_final_message = json.dumps(structured_locations)`` for a ``localization_finish``
  call, ``messages`` as OpenHands event dumps with the token ids of every turn;
* eval dumps: ``json.dumps(entry, ensure_ascii=False) + "\\n"`` per rollout with SkyRL's keys
  and a per-token list ``score``; ``aggregated_results.jsonl`` = one line of eval metrics.

The expected scores are written out by hand (counts per level), never computed by the
package under test.
"""

from __future__ import annotations

import io
import json
import pprint
import re
from pathlib import Path
from typing import Any

import numpy as np

CYAN, RESET = "\x1b[36m", "\x1b[0m"  # colorama.Fore.CYAN, colorama.Style.RESET_ALL
#: SkyRL's loguru sink format (skyrl/train/utils/utils.py configure_ray_worker_logging)
SKYRL_FORMAT = (
    "<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <8}</level> | "
    "<cyan>{name}</cyan>:<cyan>{function}</cyan>:<cyan>{line}</cyan> - <level>{message}</level>"
)
TRAINER = ("skyrl_entrypoint", 2143)
OVERRIDES = (
    "trainer.policy.model.path=Qwen/Qwen3-8B trainer.algorithm.advantage_estimator=rloo "
    'trainer.algorithm.loss_reduction="sequence_mean" trainer.policy.optimizer_config.lr=8e-06 '
    "generator.n_samples_per_prompt=8 trainer.logger=console"
)
PREFIX = f"{CYAN}({TRAINER[0]} pid={TRAINER[1]}){RESET} "


# ------------------------------------------------------------------ console
def stringify_floats(obj: Any) -> Any:
    """What SkyRL's ``ConsoleLogger.stringify_floats`` does to a metrics dict."""
    if isinstance(obj, float):
        return f"{obj:.4f}"
    if isinstance(obj, dict):
        return {k: stringify_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [stringify_floats(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(stringify_floats(v) for v in obj)
    return obj


class Loguru:
    """A loguru sink like SkyRL's (``colorize=True``), writing into a string."""

    def __init__(self, *, colorize: bool = True, fmt: str = SKYRL_FORMAT) -> None:
        from loguru import logger

        self.logger = logger
        self.buffer = io.StringIO()
        logger.remove()
        logger.level("INFO", color="<bold><green>")
        self.id = logger.add(self.buffer, colorize=colorize, level="INFO", backtrace=False, diagnose=False, format=fmt)

    def console_log(self, data: dict[str, Any], step: int) -> str:
        """``ConsoleLogger.log(data, step)``; returns the text it wrote."""
        return self.info(f"Step {step}: \n{pprint.pformat(stringify_floats(data))}")

    def info(self, message: str) -> str:
        start = self.buffer.tell()
        self.logger.opt(depth=1).info(message)
        return self.buffer.getvalue()[start:]

    def close(self) -> None:
        self.logger.remove(self.id)


def ray_lines(text: str, actor: str = TRAINER[0], pid: int = TRAINER[1], ip: str | None = None) -> str:
    """Ray's ``print_worker_logs``: every line of a worker's output prefixed with
    ``{CYAN}({actor} pid={pid}[, ip={ip}]){RESET_ALL} ``."""
    where = f"{pid}, ip={ip}" if ip else f"{pid}"
    return "".join(f"{CYAN}({actor} pid={where}){RESET} {line}\n" for line in text.splitlines())


def step_metrics(step: int, rng: np.random.Generator, *, n_samples: int = 8) -> dict[str, Any]:
    """A synchronous SkyRL trainer's per-step payload (real key names, trainer.py)."""
    return {
        "generate/avg_num_tokens": 5000 + rng.normal(0, 100),
        "generate/max_num_tokens": 16384,
        "generate/min_num_tokens": 812,
        "generate/std_num_tokens": 1400.5 + rng.normal(0, 10),
        "generate/batch_num_seq": 512,
        "generate/batch_padded_seq_len": 16384,
        "loss/avg_final_rewards": 0.3 + 0.01 * step,
        "loss/avg_raw_advantages": 0.0,
        "loss/avg_raw_advantages_abs": 0.41,
        "policy/final_loss": rng.normal(0, 0.01),
        "policy/grad_norm": 0.21 + rng.random() / 10,
        "policy/loss_metrics/clip_ratio": 0.0012,
        "policy/policy_entropy": 0.08 - 0.0002 * step,
        "policy/policy_loss": rng.normal(0, 0.01),
        "policy/policy_lr": 1e-6,
        "policy/response_length": 4890.0,
        f"reward/avg_pass_at_{n_samples}": 0.62 + 0.0005 * step,
        "reward/avg_raw_reward": min(0.3 + 0.01 * step, 0.5),
        "reward/mean_positive_reward": min(0.3 + 0.01 * step, 0.5),
        "trainer/epoch": 0,
        "trainer/global_step": step,
        "trainer/tokens_per_second_per_gpu": 1840.2,
        "timing/step": 300.0 + rng.normal(0, 5),
        "timing/generate": 180.5,
        "timing/policy_train": 90.25,
    }


def console_log(
    n_steps: int = 6,
    *,
    seed: int = 0,
    async_timing: bool = True,
    eval_only: bool = False,
    noise_lines: int = 3,
    rollouts: int = 0,
) -> str:
    """A SkyRL console log (what the driver prints): the ``set -x`` echo of the launch
    command, per step ``noise_lines`` vLLM engine lines from other actors, per rollout a
    reward-details line and a trajectory-saving line (``rollouts``), the step's
    ``Step N:`` block from the trainer actor and, with ``async_timing``, the fully async
    trainer's second block (``timing/*``)."""
    rng = np.random.default_rng(seed)
    log = Loguru()
    out = io.StringIO()
    out.write(f"+ python -m skyrl.train.entrypoints.main_base {OVERRIDES}\n")
    try:
        for step in range(1, n_steps + 1):
            for i in range(noise_lines):
                out.write(
                    ray_lines(
                        "INFO 08-12 12:48:01 [loggers.py:123] Avg prompt throughput: 1834.2 tokens/s",
                        "AsyncVLLMInferenceEngine",
                        3000 + i,
                        f"10.0.0.{i}",
                    )
                )
            for r in range(rollouts):
                out.write(
                    ray_lines(
                        log.info(f"Reward details: {{'file_reward': {rng.random()}, 'module_reward': {rng.random()}}}"),
                        "CodeSearchGenerator",
                        4100,
                    )
                )
                out.write(
                    ray_lines(
                        log.info(
                            f"Saving trajectory to /ckpt/trajectories/step_{step}/train/"
                            f"repo__name-{r // 8:04d}_{r % 8}.json"
                        ),
                        "CodeSearchGenerator",
                        4100,
                    )
                )
            payload = step_metrics(step, rng)
            timing = {k: payload.pop(k) for k in [k for k in payload if k.startswith("timing/")]}
            out.write(ray_lines(log.console_log(payload, step)))
            if async_timing:
                out.write(ray_lines(log.console_log(timing, step)))
        if eval_only:
            out.write(
                log.info(
                    "Metrics from eval only run: "
                    + str({"eval/swe_gym/avg_score": 0.41, "eval/swe_gym/pass_at_8": 0.62})
                )
            )
    finally:
        log.close()
    return out.getvalue()


def write(path: Path, text: str) -> Path:
    """Write ``text`` (zstd-compressed when the name ends in .zst)."""
    data = text.encode()
    if path.suffix == ".zst":
        import zstandard

        data = zstandard.ZstdCompressor(level=3).compress(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------ trajectories
#: gold edits of every fixture instance: codescout's ``target`` (= the ``file_changes``
#: column of adityasoni17/SWE-smith-py-code-search), ``null`` lists included
GOLD = [
    {
        "changes": {
            "added_entities": ["pkg/a.py:A.new"],
            "added_modules": None,
            "edited_entities": ["pkg/a.py:A.m"],
            "edited_modules": ["pkg/a.py:A"],
        },
        "file": "pkg/a.py",
    },
    {
        "changes": {
            "added_entities": None,
            "added_modules": None,
            "edited_entities": ["pkg/b.py:f"],
            "edited_modules": ["pkg/b.py:f"],
        },
        "file": "pkg/b.py",
    },
]

#: structured locations (the finish tool's ``{file, class_name, function_name}``) and, by
#: hand, their (n_pred, n_gold, n_tp) at file, module, entity against GOLD
ANSWERS = {
    "perfect": (
        [
            {"file": "pkg/a.py", "class_name": "A", "function_name": "m"},
            {"file": "pkg/b.py", "class_name": None, "function_name": "f"},
        ],
        [(2, 2, 2), (2, 2, 2), (2, 2, 2)],
    ),
    "partial": (
        [
            {"file": "pkg/a.py", "class_name": "A", "function_name": "m"},
            {"file": "pkg/c.py", "class_name": None, "function_name": None},
        ],
        [(2, 2, 1), (1, 2, 1), (1, 2, 1)],
    ),
    "wrong": ([{"file": "pkg/c.py", "class_name": None, "function_name": "g"}], [(1, 2, 0), (1, 2, 0), (1, 2, 0)]),
    "file_only": ([{"file": "pkg/a.py", "class_name": None, "function_name": None}], [(1, 2, 1), (0, 2, 0), (0, 2, 0)]),
    "class_only": ([{"file": "pkg/a.py", "class_name": "A", "function_name": None}], [(1, 2, 1), (1, 2, 1), (0, 2, 0)]),
    # upstream compares verbatim: "./pkg/a.py" is not "pkg/a.py"
    "dot_slash": ([{"file": "./pkg/a.py", "class_name": "A", "function_name": "m"}], [(1, 2, 0), (1, 2, 0), (1, 2, 0)]),
    # a blank file anywhere empties the whole prediction
    "empty_file": (
        [
            {"file": "pkg/a.py", "class_name": "A", "function_name": "m"},
            {"file": " ", "class_name": None, "function_name": "f"},
        ],
        [(0, 2, 0), (0, 2, 0), (0, 2, 0)],
    ),
}
#: a plain-text answer (no finish call): upstream scores it 0 at every level
TEXT_ANSWER = "Found it.\n```\npkg/a.py\nclass: A\nfunction: m\n\npkg/b.py\nfunction: f\n```"


def f1_by_hand(n_pred: int, n_gold: int, n_tp: int) -> float:
    if not n_gold or not n_pred or not n_tp:
        return 0.0
    p, r = n_tp / n_pred, n_tp / n_gold
    return 2 * p * r / (p + r)


def expected_counts(kind: str) -> list[tuple[int, int, int]]:
    """(n_pred, n_gold, n_tp) per level of a fixture kind (no finish call: nothing predicted)."""
    return ANSWERS[kind][1] if kind in ANSWERS else [(0, 2, 0)] * 3


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "id": f"evt-{kind}-{len(fields)}", "timestamp": "2026-08-12T12:48:01.123456", **fields}


def _token_event(rng: np.random.Generator, prompt_len: int, response_len: int) -> dict[str, Any]:
    return _event(
        "TokenEvent",
        source="agent",
        prompt_token_ids=rng.integers(0, 151_000, prompt_len).tolist(),
        response_token_ids=rng.integers(0, 151_000, response_len).tolist(),
    )


def messages(
    locations: list[dict[str, Any]] | None,
    *,
    final_text: str = "",
    turns: int = 3,
    tokens: int = 2000,
    seed: int = 0,
    finish_calls: int = 1,
) -> list[dict[str, Any]]:
    """OpenHands event dumps of a conversation: system prompt, user message, ``turns``
    terminal calls with their observations and TokenEvents (cumulative prompts of about
    ``tokens`` ids per turn), then ``finish_calls`` ``localization_finish`` actions (or a
    final text message)."""
    rng = np.random.default_rng(seed)
    tools = [
        {"name": "terminal", "description": "Run a shell command"},
        {"name": "localization_finish", "description": "Report the code locations"},
    ]
    events = [
        _event("SystemPromptEvent", source="agent", system_prompt={"type": "text", "text": "You are..."}, tools=tools),
        _event(
            "MessageEvent",
            source="user",
            llm_message={
                "role": "user",
                "content": [{"type": "text", "text": "Locate the code to change."}],
                "tool_calls": None,
            },
        ),
    ]
    for t in range(turns):
        call = {
            "id": f"chatcmpl-tool-{t}",
            "name": "terminal",
            "arguments": json.dumps({"command": "grep -rn f pkg"}),
            "origin": "completion",
        }
        events.append(
            _event(
                "ActionEvent",
                source="agent",
                thought=[{"type": "text", "text": "search"}],
                action={"kind": "TerminalAction", "command": "grep -rn f pkg"},
                tool_name="terminal",
                tool_call_id=call["id"],
                tool_call=call,
                llm_response_id=f"chatcmpl-{t}",
                security_risk="UNKNOWN",
            )
        )
        events.append(
            _event(
                "ObservationEvent",
                source="environment",
                tool_name="terminal",
                tool_call_id=call["id"],
                observation={
                    "kind": "TerminalObservation",
                    "content": [{"type": "text", "text": "pkg/a.py:3: def m(self):"}],
                    "is_error": False,
                },
            )
        )
        events.append(_token_event(rng, tokens * (t + 1), tokens // 4))
    for c in range(finish_calls if locations is not None else 0):
        args = {"locations": locations}
        call = {
            "id": f"chatcmpl-tool-f{c}",
            "name": "localization_finish",
            "arguments": json.dumps(args),
            "origin": "completion",
        }
        events.append(
            _event(
                "ActionEvent",
                source="agent",
                thought=[],
                action={"kind": "LocalizationFinishAction", **args},
                tool_name="localization_finish",
                tool_call_id=call["id"],
                tool_call=call,
                llm_response_id="chatcmpl-last",
                security_risk="UNKNOWN",
            )
        )
        events.append(
            _event(
                "ObservationEvent",
                source="environment",
                tool_name="localization_finish",
                tool_call_id=call["id"],
                observation={
                    "kind": "LocalizationFinishObservation",
                    "content": [{"type": "text", "text": json.dumps(locations, indent=2)}],
                    "is_error": False,
                },
            )
        )
    if final_text:
        events.append(
            _event(
                "MessageEvent",
                source="agent",
                llm_message={
                    "role": "assistant",
                    "content": [{"type": "text", "text": final_text}],
                    "tool_calls": None,
                },
            )
        )
    events.append(_token_event(rng, tokens * (turns + 1), tokens // 8))
    return events


def trajectory(
    instance: str,
    kind: str,
    *,
    rep: int = 0,
    tokens: int = 2000,
    turns: int = 3,
    old_format: bool = False,
    logged: dict[str, float] | None = None,
) -> dict[str, Any]:
    """One codescout trajectory ``result_dict`` (code_search_generator.py).

    ``kind``: an ANSWERS key (a ``localization_finish`` call with those locations), ``text``
    (a plain-text answer, no finish call), ``none`` (nothing) or ``twice`` (two finish calls:
    upstream's exactly-once rule gives no locations). ``old_format``: as written before
    codescout stored the call in ``raw_final_message`` (the answer only in ``messages``).
    ``logged`` replaces the hand-computed reward_dict values (a disagreeing log)."""
    locations = ANSWERS[kind][0] if kind in ANSWERS else (ANSWERS["perfect"][0] if kind == "twice" else None)
    final_message = TEXT_ANSWER if kind == "text" else ""
    structured = locations if kind in ANSWERS else None
    raw = json.dumps(structured) if structured is not None and not old_format else final_message
    matches = re.findall(r"```(.*?)```", final_message, re.DOTALL)
    parsed = matches[-1] if matches else final_message
    f1 = [f1_by_hand(*c) for c in expected_counts(kind)] if structured is not None else [0.0, 0.0, 0.0]
    reward_dict: dict[str, float] = {
        "multilevel_localization_f1_reward": sum(f1),
        "file_reward": f1[0],
        "module_reward": f1[1],
        "entity_reward": f1[2],
    }
    reward_dict.update(logged or {})
    events = messages(
        locations,
        final_text=final_message,
        turns=turns,
        tokens=tokens,
        seed=rep,
        finish_calls=2 if kind == "twice" else 1,
    )
    n_actions = sum(e["kind"] == "ActionEvent" for e in events)
    n_tokens = sum(e["kind"] == "TokenEvent" for e in events)
    metrics = {
        "tokens": 9000 + rep,
        "steps": n_tokens,
        "avg_tool_calls_per_step": 0.0,
        "wall_clock_duration": 41.5,
        "total_prompt_tokens": tokens * (turns + 1),
        "total_response_tokens": 1500,
        "avg_prompt_tokens_per_step": 2000.0,
        "avg_response_tokens_per_step": 375.0,
        "num_turns": 5 + rep,
        "num_tool_calls": n_actions,
        "num_tool_calls_per_turn": n_actions / n_tokens,
        "tool_calls_by_turn": [1] * n_tokens,
    }
    return {
        "instance_id": instance,
        "target": GOLD,
        "total_reward": sum(f1),
        "reward_dict": reward_dict,
        "parsed_final_message": parsed,
        "raw_final_message": raw,
        "messages": events,
        "metrics_dict": metrics,
    }


def write_trajectory(path: Path, record: dict[str, Any]) -> Path:
    """``json.dump(result_dict, f, indent=2)`` as codescout writes it (zstd for ``.zst``)."""
    buf = io.StringIO()
    json.dump(record, buf, indent=2)
    return write(path, buf.getvalue())


#: per (step, phase): the kind of each instance_rep file (".error" for a crashed rollout)
PLAN = {
    (1, "train"): {
        "repo__x-1_0": "partial",
        "repo__x-1_1": "wrong",
        "repo__y-2_0": "file_only",
        "repo__y-2_1": ".error",
    },
    (2, "train"): {
        "repo__x-1_0": "perfect",
        "repo__x-1_1": "text",
        "repo__y-2_0": "none",
        "repo__y-2_1": "twice",
        "repo__w-3_0": "class_only",
        "repo__w-3_1": "dot_slash",
    },
    (2, "eval"): {"repo__z-9_0": "perfect", "repo__z-9_1": "empty_file"},
}
#: the answer status the ingest should report per kind
EXPECTED_STATUS = {
    **{k: "finish_call" for k in ANSWERS},
    "empty_file": "empty_file_name",
    "text": "no_finish_call",
    "none": "no_finish_call",
    "twice": "several_finish_calls",
}
EXPECTED_UNGRADED = {(1, "train", "repo__y-2", 1): "error_file"}
ERROR_TEXT = (
    'sandbox timed out\nTraceback (most recent call last):\n  File "code_search_generator.py", line 309\n'
    "RuntimeError: sandbox timed out\n"
)


# ------------------------------------------------------------------ eval dumps
def transcript(locations: list[dict[str, Any]] | None, *, calls: int = 1) -> str:
    """A decoded multi-turn transcript (``tokenizer.decode(response_ids)``): Hermes tool
    calls as the model emits them, tool output in between."""
    parts = [
        "<|im_start|>assistant\n<think>\nSearch first.\n</think>\n\n<tool_call>\n"
        + json.dumps({"name": "terminal", "arguments": {"command": "grep -rn 'def m' pkg"}})
        + "\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\npkg/a.py:3:    def m(self):\n"
        "pkg/c.py:9: def g():\n</tool_response><|im_end|>\n"
    ]
    for _ in range(calls if locations is not None else 0):
        parts.append(
            "<|im_start|>assistant\n<tool_call>\n"
            + json.dumps({"name": "localization_finish", "arguments": {"locations": locations}})
            + "\n</tool_call><|im_end|>"
        )
    return "".join(parts)


def eval_dump_lines(n_prompts: int = 3, samples: int = 2) -> list[dict[str, Any]]:
    """``dump_per_dataset_eval_results`` entries. Prompt p sample s: p == 0 answers perfectly
    (per-token score 3.0 at the last token), p == 1 gives a wrong answer, p == 2 ends without
    a finish call (score 0); the last entry's score is None (ungraded)."""
    out = []
    for p in range(n_prompts):
        for _ in range(samples):
            kind = ("perfect", "wrong", None)[p % 3]
            locations = ANSWERS[kind][0] if kind else None
            reward = [f1_by_hand(*c) for c in ANSWERS[kind][1]] if kind else [0.0]
            score: Any = [0.0] * 40 + [float(sum(reward))]
            out.append(
                {
                    "input_prompt": f"<|im_start|>user\nLocate the bug in task {p}<|im_end|>\n",
                    "output_response": transcript(locations),
                    "score": score,
                    "stop_reason": "stop",
                    "env_class": "code_search",
                    "env_extras": {
                        "instance_id": f"gym__t-{p}",
                        "file_changes": GOLD,
                        "target": GOLD,
                        "data_source": "swe_gym",
                    },
                    "data_source": "swe_gym",
                }
            )
    out[-1]["score"] = None
    return out


def write_eval_dump(d: Path, entries: list[dict[str, Any]], metrics: dict[str, float], ext: str = "") -> None:
    """Per data source ``{source}.jsonl`` and ``aggregated_results.jsonl`` (one line)."""
    by_source: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_source.setdefault(e["data_source"] or "unknown", []).append(e)
    for source, rows in by_source.items():
        write(
            d / f"{source.replace('/', '_')}.jsonl{ext}",
            "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in rows),
        )
    write(d / f"aggregated_results.jsonl{ext}", json.dumps(metrics, ensure_ascii=False) + "\n")


EVAL_METRICS = {
    "eval/swe_gym/avg_score": 1.0,
    "eval/swe_gym/pass_at_2": 0.6667,
    "eval/swe_gym/mean_positive_reward": 1.0,
    "eval/all/avg_score": 1.0,
    "eval/all/pass_at_2": 0.6667,
}


def run_dir(root: Path, *, model: str = "Qwen/Qwen3-8B", zst: bool = True, tokens: int = 300) -> Path:
    """A codescout run directory: the console log, ``trajectories/step_k/{train,eval}/``
    (one ``.error``), ``dumped_evals/global_step_3_evals/`` (trials + aggregate) and
    ``global_step_2_evals/`` (superseded by step 2's eval trajectories), an eval-only log
    named by checkpoint step, the eval-log index and a stray file."""
    root.mkdir(parents=True, exist_ok=True)
    ext = ".zst" if zst else ""
    write(root / f"train.log{ext}", console_log(3, eval_only=False).replace("Qwen/Qwen3-8B", model))
    for (step, phase), files in PLAN.items():
        d = root / "trajectories" / f"step_{step}" / phase
        for name, kind in files.items():
            if kind == ".error":
                write(d / f"{name}.error", ERROR_TEXT)
            else:
                inst, rep = name.rsplit("_", 1)
                write_trajectory(d / f"{name}.json{ext}", trajectory(inst, kind, rep=int(rep), tokens=tokens))
    for step in (2, 3):
        write_eval_dump(root / "dumped_evals" / f"global_step_{step}_evals", eval_dump_lines(), EVAL_METRICS, ext)
    log = Loguru(colorize=False)
    try:
        write(
            root / "eval_ckpt_struct_step40.log",
            log.info(
                "Metrics from eval only run: " + str({"eval/swe_gym/avg_score": 0.41, "eval/swe_gym/pass_at_8": 0.62})
            ),
        )
    finally:
        log.close()
    write(root / "eval_log_index.txt", "# eval log -> run label\neval_ckpt_struct_step40.log\ts85\n")
    write(root / "notes.md", "not a SkyRL file\n")
    return root


def eval_only_run_dir(
    root: Path, *, tokens: int = 300, checkpoint: int = 85, label: str = "s85-step85", score: float = 0.4123456
) -> Path:
    """An eval-only run (``main_generate``) of the checkpoint ``global_step_{checkpoint}``:
    ``step_None/eval/`` trajectories, ``dumped_evals/eval_only/``, and the driver log with the
    console tracker's ``Step 0`` block (loguru's default handler, no colour) and ``Metrics from
    eval only run: {...}``; the eval-log index names the log ``label``."""
    root.mkdir(parents=True, exist_ok=True)
    d = root / "trajectories" / "step_None" / "eval"
    for i, kind in enumerate(["perfect", "partial", "text"]):
        write_trajectory(d / f"repo__e-{i}_0.json", trajectory(f"repo__e-{i}", kind, tokens=tokens))
    write_eval_dump(root / "dumped_evals" / "eval_only", eval_dump_lines(2, 2), EVAL_METRICS)
    default = (
        "<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <8}</level> | "
        "<cyan>{name}</cyan>:<cyan>{function}</cyan>:<cyan>{line}</cyan> - <level>{message}</level>"
    )
    log = Loguru(colorize=False, fmt=default)
    try:
        results = {"eval/swe_gym/avg_score": score, "eval/swe_gym/pass_at_8": 0.625}
        text = (
            "+ python -m skyrl.train.entrypoints.main_generate "
            f"trainer.policy.model.path=ckpt/s85/global_step_{checkpoint} trainer.logger=console\n"
        )
        text += ray_lines(log.console_log(results, 0), "eval_entrypoint", 777)
        text += log.info(f"Metrics from eval only run: {results}")
    finally:
        log.close()
    write(root / "eval.log", text)
    write(root / "eval_log_index.txt", f"eval.log {label}\n")
    return root


def probe_eval_logs(root: Path, steps: tuple[int, ...] = (5, 10, 15), label: str = "g1-probe") -> Path:
    """A probe-set directory as the study lists it (``logs/codesearch_probe/``: "probe-set eval
    logs at steps 5/10/15"): one eval-only driver log per checkpoint, each launched with
    ``global_step_{k}`` and named by its step, and the eval-log index naming them ``label``."""
    log = Loguru(colorize=False)
    try:
        for k in steps:
            results = {"eval/swe_smith_probe/avg_score": 0.6 + 0.01 * k, "eval/swe_smith_probe/pass_at_8": 0.8}
            text = (
                "+ python -m skyrl.train.entrypoints.main_generate "
                f"trainer.policy.model.path=ckpt/g1/global_step_{k} trainer.logger=console\n"
            )
            text += ray_lines(log.console_log(results, 0), "eval_entrypoint", 777)
            text += log.info(f"Metrics from eval only run: {results}")
            write(root / f"probe_step{k}.log", text)
    finally:
        log.close()
    write(root / "eval_log_index.txt", "".join(f"probe_step{k}.log\t{label}\n" for k in steps))
    return root


# ------------------------------------------------------------------ wandb
def wandb_run_dir(
    root: Path, n_steps: int = 4, *, seed: int = 0, tables: bool = False, payloads: dict[int, dict] | None = None
) -> Path:
    """A run whose tracker was wandb (SkyRL's default), offline: in a subprocess, what
    ``Tracking(backend="wandb")`` does - ``wandb.init(project=, name=, config=asdict(cfg),
    tags=)``, ``wandb.log(data, step=step)`` per step (with a NaN), ``wandb.finish(exit_code=0)``
    - with the working directory ``root``, so the run lands in ``root/wandb/offline-run-*``.

    ``tables``: also what SkyRL a9564572 logs as ``wandb.Table``: per step the
    ``TrajectoryLogger``'s sample table (``skyrl/train/utils/tracking.py:150-180``,
    ``self.logger.log({key: new_table}, step=step)``) and, after the last step, the crash
    handler's ``error/tracebacks`` table logged without a step (``tracking.py:120-127``).
    ``payloads``: the metrics logged per step instead of :func:`step_metrics`' (and no NaN)."""

    rng = np.random.default_rng(seed)
    if payloads is None:
        payloads = {s: step_metrics(s, rng) for s in range(1, n_steps + 1)}
        payloads[2]["policy/policy_kl"] = float("nan")
    config = {
        "trainer": {
            "policy": {"model": {"path": "Qwen/Qwen3-8B"}},
            "algorithm": {"advantage_estimator": "rloo"},
            "logger": "wandb",
            "project_name": "skyrl",
            "run_name": "code_search",
        },
        "generator": {"n_samples_per_prompt": 8},
    }
    script = (
        "import json, sys, wandb\n"
        "cfg = json.loads(sys.argv[1]); payloads = json.loads(sys.argv[2])\n"
        "run = wandb.init(project='skyrl', name='code_search', config=cfg, tags=None)\n"
        "print('training started')\n"
        "tables = bool(int(sys.argv[3]))\n"
        "for step, data in sorted(payloads.items(), key=lambda kv: int(kv[0])):\n"
        "    wandb.log(data=data, step=int(step), commit=True)\n"
        "    if tables:\n"
        "        t = wandb.Table(columns=['step', 'prompt', 'response', 'reward'], data=[[int(step), 'p', 'r', 0.5]])\n"
        "        wandb.log({'train/samples': t}, step=int(step))\n"
        "if tables:\n"
        "    error_table = wandb.Table(columns=['step', 'type', 'traceback'])\n"
        "    error_table.add_data(len(payloads), 'RuntimeError', 'Traceback (most recent call last): ...')\n"
        "    wandb.log({'error/tracebacks': error_table})\n"
        "wandb.finish(exit_code=0)\n"
    )
    run_wandb_script(root, script, json.dumps(config), json.dumps(payloads, allow_nan=True), str(int(tables)))
    return root


def run_wandb_script(root: Path, script: str, *args: str) -> None:
    """Run ``script`` (wandb calls) in a subprocess with the working directory ``root``,
    wandb offline and silent, so its run lands in ``root/wandb/offline-run-*``."""
    import os
    import subprocess
    import sys

    root.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_CONSOLE": "off",
    }
    subprocess.run(
        [sys.executable, "-c", script, *args], cwd=root, env=env, check=True, capture_output=True, timeout=300
    )


def wandb_expected(n_steps: int = 4, *, seed: int = 0) -> dict[int, dict[str, float]]:
    """The values :func:`wandb_run_dir` logged (unrounded: wandb stores the floats)."""
    rng = np.random.default_rng(seed)
    out = {s: {k: float(v) for k, v in step_metrics(s, rng).items()} for s in range(1, n_steps + 1)}
    out[2]["policy/policy_kl"] = float("nan")
    return out


def hf_trainer_wandb_run_dir(root: Path, n_steps: int = 4, *, logging_steps: int = 5) -> tuple[Path, dict]:
    """A run of a Hugging Face Trainer (TRL's GRPOTrainer) tracked by wandb, offline: in a
    subprocess, the calls its callbacks make - ``WandbCallback.setup``'s
    ``define_metric("train/global_step")`` and ``define_metric("*",
    step_metric="train/global_step", step_sync=True)``, ``WandbCallback.on_log``'s
    ``wandb.log({**rewrite_logs(logs), "train/global_step": state.global_step})`` every
    ``logging_steps`` (transformers ``src/transformers/integrations/integration_utils.py``),
    TRL's ``profiling_context`` ``wandb.log({"profiling/Time taken: GRPOTrainer.<name>":
    duration})`` twice a step without a step (``trl/extras/profiling.py``) - plus a user's own
    axis (``define_metric("story/*", step_metric="story/global_step")``). wandb's ``_step``
    counts the calls (4 a logging step here), not the trainer's steps.

    Returns the run's root and, per global step, the ``train/`` values logged."""

    rng = np.random.default_rng(7)
    logs = {
        str(logging_steps * k): {"train/reward": float(rng.uniform(0, 1)), "train/kl": float(rng.uniform(0, 0.1))}
        for k in range(1, n_steps + 1)
    }
    script = (
        "import json, sys, wandb\n"
        "logs = json.loads(sys.argv[1])\n"
        "run = wandb.init(project='huggingface')\n"
        "wandb.define_metric('train/global_step')\n"
        "wandb.define_metric('*', step_metric='train/global_step', step_sync=True)\n"
        "wandb.define_metric('story/global_step')\n"
        "wandb.define_metric('story/*', step_metric='story/global_step')\n"
        "for i, (gs, values) in enumerate(sorted(logs.items(), key=lambda kv: int(kv[0]))):\n"
        "    for call in range(2):\n"
        "        wandb.log({'profiling/Time taken: GRPOTrainer._prepare_inputs': 0.5 + call})\n"
        "    wandb.log({**values, 'train/global_step': int(gs)})\n"
        "    wandb.log({'story/pnl_mean': float(i), 'story/global_step': i})\n"
        "wandb.finish(exit_code=0)\n"
    )
    run_wandb_script(root, script, json.dumps(logs))
    return root, {int(k): v for k, v in logs.items()}


# ------------------------------------------------------------------ dynamic sampling
#: the launch command of a dynamic-sampling run (Hydra overrides echoed by ``set -x``)
DS_OVERRIDES = OVERRIDES.replace("trainer.logger=console", "trainer.train_batch_size=16 trainer.logger=console")


def omegaconf_yaml(kind: str | None) -> str:
    """What ``OmegaConf.to_yaml(cfg)`` prints for the part of SkyRL's config that matters
    here (``yaml.dump(..., default_flow_style=False, sort_keys=False)``, None as ``null``;
    skyrl_train/config/ppo_base_config.yaml L82 and L118-121 at the fork's 81e5a97c)."""
    import yaml

    cfg = {
        "trainer": {
            "policy": {"model": {"path": "Qwen/Qwen3-8B"}},
            "train_batch_size": 16,
            "algorithm": {
                "advantage_estimator": "rloo",
                "dynamic_sampling": {"type": kind, "max_sample_batches": 30, "min_replace_ratio": 0.3},
                "clip_cov": {"clip_ratio": 0.0002},
            },
            "logger": "console",
        },
        "generator": {"n_samples_per_prompt": 8},
    }
    return yaml.dump(cfg, default_flow_style=False, allow_unicode=True, sort_keys=False)


def dynamic_sampling_log(
    n_steps: int = 6,
    *,
    kind: str = "filter",
    seed: int = 0,
    batch: int = 16,
    n: int = 8,
    config: str = "override",
    unfinished: bool = False,
) -> tuple[str, dict[int, dict[str, Any]]]:
    """A SkyRL console log of a run with dynamic sampling, and per step what happened.

    Per generation round a dataloader batch of ``batch`` prompts (success rates Beta around
    a rising curve: the prompt difficulty varies), ``n`` binary rollouts each. The rounds go
    through upstream's rule and its log calls (the same f-strings, skyrl_train/utils/
    trainer_utils.py at the fork's 81e5a97c: handle_filter_sampling L432-523,
    handle_replace_sampling L338-430): filter drops the groups whose rewards' ``np.std`` is
    0 and resamples until ``batch`` prompts are kept, then truncates to ``batch * n``
    trajectories; replace copies random good groups over the bad ones when more than 0.3 of
    the batch is good, else warns and resamples. The step's ``reward/avg_raw_reward`` and
    ``reward/avg_pass_at_{n}`` are then computed on the processed batch as
    ``get_metrics_from_generator_output`` does (generators/utils.py L121-158) and logged in
    the step's block. ``config``: "override" (``trainer.algorithm.dynamic_sampling.type=``
    on the launch line), "yaml" (the config dump only) or "none" (neither: only the round
    lines tell). ``unfinished``: the log ends after a last step's round lines (a crash
    before its training finished).

    Returns the text and per step: ``rounds``, ``generated``, ``mixed`` (prompts whose
    rollouts' rewards differ; ``mixed_last`` in the last round), ``logged_reward``,
    ``logged_pass``, ``generated_mean`` (mean reward of every rollout generated) and
    ``true_rate`` (the prompts' expected success).
    """
    rng = np.random.default_rng(seed)
    log = Loguru()
    out = io.StringIO()
    overrides = DS_OVERRIDES + (f" trainer.algorithm.dynamic_sampling.type={kind}" if config == "override" else "")
    out.write(f"+ python -m skyrl_train.entrypoints.main_base {overrides}\n")
    truth: dict[int, dict[str, Any]] = {}

    def info(message: str) -> None:
        out.write(ray_lines(log.info(message)))

    def warning(message: str) -> None:
        start = log.buffer.tell()
        log.logger.opt(depth=1).warning(message)
        out.write(ray_lines(log.buffer.getvalue()[start:]))

    try:
        if config == "yaml":
            info(omegaconf_yaml(kind))
        for step in range(1, n_steps + 2 if unfinished else n_steps + 1):
            rate = 0.15 + 0.7 * step / (n_steps + 1)  # the policy's mean success over prompts
            rounds, generated, mixed = 0, 0, 0
            all_rewards: list[float] = []
            kept: list[list[float]] = []
            while True:
                rounds += 1
                p = rng.beta(2 * rate / (1 - rate), 2.0, batch)
                groups = [list((rng.random(n) < pi).astype(float)) for pi in p]
                all_rewards += [r for g in groups for r in g]
                generated += batch
                good = [g for g in groups if np.std(g) > 0 or n == 1]  # upstream keeps lone rollouts
                mixed += len(good)
                if kind == "filter":
                    kept += good
                    info("============= Dynamic sampling filter =============")
                    if len(kept) < batch:
                        info(f"Dynamic sampling: {len(kept)} < {batch} prompts")
                        info(f"Resample batch {rounds}, continue sampling...")
                        info("==================================================")
                        continue
                    info(f"Dynamic sampling: collected {len(kept)} >= {batch} prompts")
                    info("==================================================")
                    processed = kept[:batch]
                    break
                info(f"Replace sampling: {len(good)} good UIDs out of {batch} total prompts")
                if len(good) > batch * 0.3:
                    bad = [g for g in groups if np.std(g) == 0 and n > 1]
                    info("============= Dynamic sampling replace ===========")
                    info(f"Number of good prompts: {len(good)}")
                    info(f"Number of bad prompts: {len(bad)}")
                    picks = rng.permutation(len(good))[: len(bad)] if len(good) >= len(bad) else None
                    if picks is None:
                        picks = rng.integers(0, len(good), len(bad))
                    processed = good + [good[i] for i in picks]  # copies share their uid
                    info(f"After replacement - Replaced {len(bad) * n // n} bad prompts")  # bad indices // n
                    info("==================================================")
                    break
                warning("===================== Warning (Dynamic sampling replace) ====================")
                warning("In this mini-batch, most training samples receive low variance rewards.")
                warning("If you continue to see this warning, please check your data difficulty distribution.")
                warning("==================================================")
            if step > n_steps:  # unfinished: the round lines of a step that never logged
                break
            rewards = [r for g in processed for r in g]
            # upstream's pass@n counts unique uids: replace's copies carry their source's uid
            unique = processed if kind == "filter" else good
            logged_reward = float(np.mean(rewards))
            logged_pass = sum(1 for g in unique if any(r > 0 for r in g)) / len(unique)
            info(f"reward/avg_pass_at_{n}: {logged_pass}, reward/avg_raw_reward: {logged_reward}")
            payload = step_metrics(step, rng, n_samples=n)
            payload.update({"reward/avg_raw_reward": logged_reward, f"reward/avg_pass_at_{n}": logged_pass})
            out.write(ray_lines(log.console_log(payload, step)))
            truth[step] = {
                "rounds": rounds,
                "generated": generated,
                "mixed": mixed,
                "logged_reward": logged_reward,
                "logged_pass": logged_pass,
                "mixed_last": len(good),  # the last round's mixed groups
                "generated_mean": float(np.mean(all_rewards)),
                "true_rate": rate,
            }
    finally:
        log.close()
    return out.getvalue(), truth
