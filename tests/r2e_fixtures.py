"""R2E-Gym evaluation output built the way R2E-Gym writes it.

``runagent`` (R2E-Gym@69bc953 ``src/r2egym/agenthub/run/edit.py:154-162``) sets
``trajectory.reward``, ``.test_output``, ``.ds`` and ``.exp_name`` and returns
``trajectory.model_dump_json()``; ``runagent_multiple`` appends each result with
``f.write(result + "\\n")`` to ``{traj_dir}/{exp_name}.jsonl`` (``:218``, ``:290``). A rollout
that crashed returns None and writes nothing. The pydantic models below declare the fields
of ``TrajectoryStep`` and ``Trajectory`` in upstream's order and with upstream's types
(``src/r2egym/agenthub/trajectory/trajectory.py:19-98``), so ``model_dump_json`` writes what
upstream writes (R2E-Gym itself is not on PyPI). The reward is upstream's binary resolve:
1.0 iff the parsed test results equal the expected ones (``runtime/docker.py:539-564``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


class TrajectoryStep(BaseModel):
    step_idx: int
    thought: str
    action: str
    observation: str
    done: bool
    info: dict
    token_usage_prompt: int
    token_usage_completion: int
    token_usage_total: int
    llm_exec_time: float
    env_exec_time: float
    total_step_time: float
    total_time_traj: float
    step_count: int


class Trajectory(BaseModel):
    trajectory_steps: list[TrajectoryStep]
    problem_statement: str
    docker_image: str
    exp_name: str | None = None
    env_args: dict[str, Any] = Field(default_factory=dict)
    agent_args: dict[str, Any] = Field(default_factory=dict)
    ds: dict | None = None
    max_steps: int
    max_steps_absolute: int
    max_token_limit: int
    max_llm_time: int
    max_exec_time: int
    max_total_time: int
    exit_reason: str
    output_patch: str
    reward: float | None = None
    test_output: str | None = None
    custom_test_outputs: dict = {}
    regression_test_output: str | None = None


def trajectory(image: str, reward: float | None, *, exp_name: str, n_steps: int = 3, tokens: int = 1000) -> str:
    """One ``runagent`` result: ``trajectory.model_dump_json()``."""
    steps = [
        TrajectoryStep(
            step_idx=i,
            thought=f"look at the failing test {i}",
            action="<function=execute_bash>\n<parameter=cmd>pytest -x</parameter>\n</function>",
            observation="1 failed, 12 passed",
            done=i == n_steps - 1,
            info={},
            token_usage_prompt=tokens - 100,
            token_usage_completion=100,
            token_usage_total=tokens,
            llm_exec_time=2.5,
            env_exec_time=1.5,
            total_step_time=4.0,
            total_time_traj=4.0 * (i + 1),
            step_count=i + 1,
        )
        for i in range(n_steps)
    ]
    ds = {
        "repo_name": image.split("/")[-1].split(":")[0],
        "docker_image": image,
        "problem_statement": "Fix the off-by-one in the parser.",
        "expected_output_json": '{"test_parse": "PASSED"}',
    }
    traj = Trajectory(
        trajectory_steps=steps,
        problem_statement=ds["problem_statement"],
        docker_image=image,
        env_args={"ds": ds},
        agent_args={"llm_name": "hosted_vllm/g1"},
        max_steps=40,
        max_steps_absolute=50,
        max_token_limit=65536,
        max_llm_time=7200,
        max_exec_time=90,
        max_total_time=50000,
        exit_reason="agent",
        output_patch="diff --git a/p.py b/p.py\n",
    )
    traj.reward = reward  # edit.py:154-157
    traj.test_output = "PASSED test_parse"
    traj.ds = ds
    traj.exp_name = exp_name
    return traj.model_dump_json()


def write_eval(traj_dir: Path, exp_name: str, results: list[tuple[str, float | None]]) -> Path:
    """``runagent_multiple``: append every result to ``{traj_dir}/{exp_name}.jsonl``."""
    traj_dir.mkdir(parents=True, exist_ok=True)
    path = traj_dir / f"{exp_name}.jsonl"
    with open(path, "a") as f:
        for image, reward in results:
            f.write(trajectory(image, reward, exp_name=exp_name) + "\n")
    return path
