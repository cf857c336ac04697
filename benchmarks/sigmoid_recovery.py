"""Coverage of the saturation-curve model on per-trial data that is not the model.

Two arms (A = 0.40 and 0.65, B = 1.5, C_mid = 8, 50 steps, 16 prompts x 8 rollouts per
step, logit-normal prompt difficulty shared within a group and across arms), N seeds:
the share of (arm, parameter) 94 % HDIs that hold the truth, P(A higher) for the higher
arm, the forecast gain from step 50 to 70 (truth inside its HDI), convergence and fit
times; with a back-test step K, also each seed's back-test fitted on the first K steps:
coverage of the 94 % predictive intervals of the later steps, and the mean absolute error
against carrying the last value forward.
With ``--design unsaturated``: arms that have not bent far by the last step (A = 0.45 and
0.60, a +0.15 arm, B = 1.2, C_mid = 20, 50 steps: the curves reach about 75 % of their
gain), where the ceiling rests on the curve's ridge. Also prints the bias of the posterior
means of the asymptote and the efficiency per arm (mean over seeds, how often above the truth).
Run: python benchmarks/sigmoid_recovery.py [N] [K] [--design study|unsaturated]
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
#: arms far from their ceilings at the last step (a +0.15 arm)
UNSATURATED = SigmoidArmsSpec(
    arms=(
        SigmoidArm("low", asymptote=0.45, efficiency=1.2, midpoint=20.0),
        SigmoidArm("high", asymptote=0.60, efficiency=1.2, midpoint=20.0),
    ),
    n_steps=50,
)
DESIGNS = {"study": (SPEC, 100), "unsaturated": (UNSATURATED, 200)}


def main(n: int, k: int | None, design: str = "study") -> None:
    spec, first_seed = DESIGNS[design]
    bias: dict[str, list[float]] = {}
    inside: dict[str, list[bool]] = {}
    p_higher, converged, seconds = [], [], []
    bt_inside, bt_mae, bt_persist, bt_seconds, bt_converged = [], [], [], [], []
    for seed in range(n):
        ds, truth = simulate_sigmoid_arms(spec, seed=first_seed + seed)
        t0 = time.perf_counter()
        fit = fit_sigmoid(ds, reference="low", seed=seed)
        seconds.append(time.perf_counter() - t0)
        converged.append(fit.diagnostics["converged"])
        p_higher.append(fit.estimands["contrasts"]["high"]["p_asymptote_higher"])
        for arm, true in truth["arms"].items():
            for q in ("asymptote", "efficiency", "midpoint"):
                lo, hi = fit.estimands["arms"][arm][q]["hdi"]
                inside.setdefault(q, []).append(bool(lo <= true[q] <= hi))
                bias.setdefault(f"{q} ({arm})", []).append(fit.estimands["arms"][arm][q]["mean"] - true[q])
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
    for q, vs in bias.items():
        if not q.startswith("midpoint"):
            above = int(np.sum(np.array(vs) > 0))
            print(f"  bias of the posterior mean, {q}: {np.mean(vs):+.3f}, above the truth {above}/{len(vs)}")
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
    args = sys.argv[1:]
    chosen = "study"
    if "--design" in args:
        at = args.index("--design")
        chosen = args[at + 1]
        del args[at : at + 2]
    main(int(args[0]) if args else 8, int(args[1]) if len(args) > 1 else None, chosen)
