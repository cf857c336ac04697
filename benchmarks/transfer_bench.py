"""Benchmark the transfer fit on the embedded SWE-Gym replica and print its reproduction table.

    python benchmarks/transfer_bench.py [--reference PATH] [--draws N] [--task-effects integrated|sampled]
        [--arms base,s85]

Prints cold time (build + compile + sample), warm time (cached compiled model, second
seed), sampling time, min bulk ESS, ESS/s, max R-hat and divergences; then, as Markdown,
the reference study's transfer table next to the replica's raw empirical values and the
Bayesian estimates (posterior mean and 94 % HDI). The arms default to base and s85, the
fit issue 20's targets were set for (the embedded data also hold the LR arm since
2026-12-02; ``--arms base,s85,s85-lr1.2e-5`` fits all three). Speed is measured here, never in a timed
test; numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from dataclasses import replace
from pathlib import Path

import arviz as az
import numpy as np

from saturation import schema as S
from saturation.models import fit_transfer
from saturation.models.marginal import NODES, transfer_marginal_kernel, unpack_marginal_data
from saturation.models.sampling import ConvergenceWarning
from saturation.models.transfer import build_transfer_model, default_sampler
from saturation.replica import load_embedded

NAMES = {
    "ungraded_rate": S.UNGRADED_RATE,
    "graded_only_reward": "graded_only",
    "all_rollout_reward": "all_rollout",
    "ungraded": S.UNGRADED_RATE,
    "all_rollout": "all_rollout",
}


def _fmt(mean: float, hdi: list[float]) -> str:
    return f"{mean:.3f} [{hdi[0]:.3f}, {hdi[1]:.3f}]"


def kernel_us(fit, rounds: int = 12, calls: int = 200) -> float:
    """Median time of one likelihood evaluation (value and gradient, the kernel alone) at the
    posterior mean, in microseconds: the figure that says how fast this machine is today
    (the fit's time is about evaluations x this, shared by the chains over the cores)."""
    _, values = build_transfer_model(fit.data, fit.config)
    post = fit.idata.posterior
    mean = {v: post[v].mean(("chain", "draw")).to_numpy() for v in post.data_vars}
    z, w = np.polynomial.hermite.hermgauss(NODES)
    args = (
        mean["ungraded_curve"].ravel(),
        mean["reward_curve"].ravel(),
        float(mean["ungraded_task_sd"]),
        float(mean["reward_task_sd"]),
        mean["reward_sd"] ** -2.0,
        *unpack_marginal_data(values),
        z,
        w,
    )
    transfer_marginal_kernel(*args)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            transfer_marginal_kernel(*args)
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", default=str(Path(__file__).parents[1] / "data" / "reference.json"))
    ap.add_argument("--draws", type=int, help="draws per chain (default: the model's)")
    ap.add_argument("--task-effects", choices=S.TASK_EFFECTS, default="integrated")
    ap.add_argument("--arms", default="base,s85", help="comma-separated arms to fit (default: base,s85)")
    args = ap.parse_args()
    fit_arms = args.arms.split(",")
    ref = json.loads(Path(args.reference).read_text())["transfer"]
    ds = load_embedded("swegym")
    base = default_sampler(args.task_effects)
    cfg = replace(base, draws=args.draws or base.draws)
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for seed in (1, 2):
            t0 = time.perf_counter()
            fit = fit_transfer(ds, seed=seed, sampler=cfg, task_effects=args.task_effects, arms=fit_arms)
            times.append(time.perf_counter() - t0)
    d = fit.diagnostics
    s = fit.timings["sample"]
    print(
        f"data: {fit.data.summary['n_trials']} trials, {fit.data.summary['n_groups']} (arm, step, task) groups, "
        f"{fit.data.summary['n_tasks']} tasks (SYNTHETIC replica)"
    )
    print(
        f"cold {times[0]:.1f} s, warm {times[1]:.1f} s, sampling {s:.1f} s, min bulk ESS {d['ess_bulk_min']:.0f} "
        f"({d['ess_bulk_min'] / s:.0f}/s), R-hat max {d['rhat_max']:.4f}, divergences {d['divergences']}, "
        f"converged {d['converged']} "
        f"({fit.timings['sampler']}, task effects {args.task_effects}, {cfg.chains} x ({cfg.tune} + {cfg.draws}), "
        f"target_accept {cfg.target_accept})"
    )
    n_evals = int(fit.idata.sample_stats["n_steps"].sum())
    print(
        f"likelihood kernel: {kernel_us(fit):.0f} us per evaluation (median of 12 x 200 at the posterior mean); "
        f"{n_evals} evaluations in the kept draws\n"
    )
    arms = fit.data.arms
    emp = fit.data.empirical
    post = fit.idata.posterior
    print("| quantity | arm | reference study | replica (empirical) | Bayesian mean [94% HDI] |")
    print("|---|---|---|---|---|")
    first = slice(0, 4)
    for key, by_arm in ref["first_4_steps"].items():
        q = NAMES[key]
        for arm in arms:
            e = float(emp[q].sel({S.ARM: arm}).isel({S.STEP: first}).mean())
            draws = post[f"population_{q}"].sel({S.ARM: arm}).isel({S.STEP: first}).mean(S.STEP)
            hdi = az.hdi(draws.values.ravel(), hdi_prob=S.HDI_PROB)
            print(
                f"| first 4 steps: {key} | {arm} | {by_arm[arm]:.4f} | {e:.4f} | "
                f"{_fmt(float(draws.mean()), list(hdi))} |"
            )
    rows = {r["step"]: r for r in fit.estimands["by_step"]}
    for pub in ref["by_step"]:
        step = pub["step"]
        for key in ("ungraded", "all_rollout"):
            q = NAMES[key]
            for arm in arms:
                if arm not in rows.get(step, {}):
                    continue
                b = rows[step][arm]
                print(
                    f"| step {step}: {key} | {arm} | {pub[key][arm]:.3f} | {b['empirical'][q]:.3f} | "
                    f"{_fmt(b[q]['mean'], b[q]['hdi'])} |"
                )
    for arm in fit.to_dict()["arms"]:
        c = fit.estimands["crossover_step"][arm]
        ini = fit.estimands["initial"][arm]
        gap = ini["delta_all_rollout"]
        print(
            f"\n{arm} - {fit.config.reference}: initial all-rollout gap {_fmt(gap['mean'], gap['hdi'])}, "
            f"P(> 0) = {ini['p_positive']:.3f}; crossover step {c['mean']:.1f} [{c['hdi'][0]:.0f}, {c['hdi'][1]:.0f}], "
            f"P(no crossover) = {c['p_no_crossover']:.3f}"
        )


if __name__ == "__main__":
    main()
