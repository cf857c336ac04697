"""Coverage of the saturation-curve model on per-trial data that is not the model.

Two arms (A = 0.40 and 0.65, B = 1.5, C_mid = 8, 50 steps, 16 prompts x 8 rollouts per
step, logit-normal prompt difficulty shared within a group and across arms), N seeds:
the share of (arm, parameter) 94 % HDIs that hold the truth, P(A higher) for the higher
arm, the forecast gain from step 50 to 70 (truth inside its HDI), convergence and fit
times; with a back-test step K, also each seed's back-test fitted on the first K steps:
coverage of the 94 % predictive intervals of the later steps, and the mean absolute error
against carrying the last value forward.
Run: python benchmarks/sigmoid_recovery.py [N] [K]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from saturation import curves
from saturation.models.sigmoid import backtest_sigmoid, fit_sigmoid
from saturation.simulate import SigmoidArm, SigmoidArmsSpec, simulate_sigmoid_arms

SPEC = SigmoidArmsSpec(
    arms=(
        SigmoidArm("low", asymptote=0.4, efficiency=1.5, midpoint=8.0),
        SigmoidArm("high", asymptote=0.65, efficiency=1.5, midpoint=8.0),
    ),
    n_steps=50,
)


def main(n: int, k: int | None) -> None:
    inside: dict[str, list[bool]] = {}
    p_higher, converged, seconds = [], [], []
    bt_inside, bt_mae, bt_persist, bt_seconds, bt_converged = [], [], [], [], []
    for seed in range(n):
        ds, truth = simulate_sigmoid_arms(SPEC, seed=100 + seed)
        t0 = time.perf_counter()
        fit = fit_sigmoid(ds, reference="low", seed=seed)
        seconds.append(time.perf_counter() - t0)
        converged.append(fit.diagnostics["converged"])
        p_higher.append(fit.estimands["contrasts"]["high"]["p_asymptote_higher"])
        for arm, true in truth["arms"].items():
            for q in ("asymptote", "efficiency", "midpoint"):
                lo, hi = fit.estimands["arms"][arm][q]["hdi"]
                inside.setdefault(q, []).append(bool(lo <= true[q] <= hi))
            now, later = curves.sigmoid_saturation(
                np.array([50.0, 70.0]),
                r0=true["r0"],
                asymptote=true["asymptote"],
                efficiency=true["efficiency"],
                midpoint=true["midpoint"],
            )
            lo, hi = fit.estimands["forecast"][arm]["gain"]["hdi"]
            inside.setdefault(f"gain 50->70 ({arm})", []).append(bool(lo <= later - now <= hi))
        print(f"seed {seed}: P(A_high > A_low) = {p_higher[-1]:.3f}, {seconds[-1]:.1f} s", flush=True)
        if k is not None:
            t0 = time.perf_counter()
            bt = backtest_sigmoid(ds, k, seed=seed)
            bt_seconds.append(time.perf_counter() - t0)
            bt_converged.append(bt.fit.diagnostics["converged"])
            bt_inside += list(bt.frame["inside"])
            bt_mae += [a["mae"] for a in bt.arms.values()]
            bt_persist += [a["mae_persistence"] for a in bt.arms.values()]
            print("  " + "\n  ".join(bt.sentences()), flush=True)
    total = [v for vs in inside.values() for v in vs]
    print(f"coverage of the 94 % HDIs: {sum(total)}/{len(total)} = {np.mean(total):.2f}")
    for q, vs in inside.items():
        print(f"  {q}: {sum(vs)}/{len(vs)}")
    print(f"P(A_high > A_low): median {np.median(p_higher):.3f}, min {min(p_higher):.3f}")
    print(f"converged {sum(converged)}/{n}; fit time median {np.median(seconds):.1f} s")
    if k is not None:
        print(
            f"back-test on {k} steps: {sum(bt_inside)}/{len(bt_inside)} later steps inside their 94 % predictive "
            f"intervals ({np.mean(bt_inside):.2f}); mean absolute error median {np.median(bt_mae):.3f} "
            f"(persistence {np.median(bt_persist):.3f}); converged {sum(bt_converged)}/{n}; "
            f"time median {np.median(bt_seconds):.1f} s"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, int(sys.argv[2]) if len(sys.argv) > 2 else None)
