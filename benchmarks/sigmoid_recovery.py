"""Coverage of the saturation-curve model on per-trial data that is not the model.

Two arms (A = 0.40 and 0.65, B = 1.5, C_mid = 8, 50 steps, 16 prompts x 8 rollouts per
step, logit-normal prompt difficulty shared within a group and across arms), N seeds:
the share of (arm, parameter) 94 % HDIs that hold the truth, P(A higher) for the higher
arm, convergence and fit times. Run: python benchmarks/sigmoid_recovery.py [N]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from saturation.models.sigmoid import fit_sigmoid
from saturation.simulate import SigmoidArm, SigmoidArmsSpec, simulate_sigmoid_arms

SPEC = SigmoidArmsSpec(
    arms=(
        SigmoidArm("low", asymptote=0.4, efficiency=1.5, midpoint=8.0),
        SigmoidArm("high", asymptote=0.65, efficiency=1.5, midpoint=8.0),
    ),
    n_steps=50,
)


def main(n: int) -> None:
    inside: dict[str, list[bool]] = {}
    p_higher, converged, seconds = [], [], []
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
        print(f"seed {seed}: P(A_high > A_low) = {p_higher[-1]:.3f}, {seconds[-1]:.1f} s", flush=True)
    total = [v for vs in inside.values() for v in vs]
    print(f"coverage of the 94 % HDIs: {sum(total)}/{len(total)} = {np.mean(total):.2f}")
    for q, vs in inside.items():
        print(f"  {q}: {sum(vs)}/{len(vs)}")
    print(f"P(A_high > A_low): median {np.median(p_higher):.3f}, min {min(p_higher):.3f}")
    print(f"converged {sum(converged)}/{n}; fit time median {np.median(seconds):.1f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
