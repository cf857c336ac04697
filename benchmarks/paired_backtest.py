"""Back-tests of paired arms on simulated checkpoint evals that are not the model.

Two arms (A = 0.45 and 0.55, B = 1.5, C_mid = 6 and 7), 16 checkpoints, the same 150
instances at every checkpoint with one rollout each, a logit-normal instance difficulty
(sd 1.5) shared by the arms (the design of docs/compare.md's paired calibration). Per seed,
each arm fitted on its first K checkpoints and its later ones predicted, with and without
``paired``: coverage of the 94 % predictive intervals, their mean width, the mean absolute
error of the predictive mean and of persistence, convergence and time.
Run: python benchmarks/paired_backtest.py [N] [K]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from saturation.models.sigmoid import SigmoidConfig, backtest_sigmoid, default_sampler
from saturation.simulate import SigmoidArm, SigmoidArmsSpec, simulate_sigmoid_arms

SPEC = SigmoidArmsSpec(
    arms=(
        SigmoidArm("a", r0=0.1, asymptote=0.45, efficiency=1.5, midpoint=6.0),
        SigmoidArm("b", r0=0.1, asymptote=0.55, efficiency=1.5, midpoint=7.0),
    ),
    n_steps=16,
    prompts_per_step=150,
    samples_per_prompt=1,
    pool_size=150,
    task_sd=1.5,
    step_sd=0.05,
)


def main(n: int, k: int) -> None:
    rows: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for seed in range(n):
        ds, _ = simulate_sigmoid_arms(SPEC, seed=200 + seed)
        for paired in (False, True):
            config = SigmoidConfig(paired=paired, reference="a", sampler=default_sampler(paired))
            t0 = time.perf_counter()
            bt = backtest_sigmoid(ds, k, config, seed=seed)
            f = bt.frame
            rows[paired].append(
                {
                    "inside": float(f["inside"].sum()),
                    "held_out": float(len(f)),
                    "width": float((f["upper"] - f["lower"]).mean()),
                    "mae": float((f["mean"] - f["observed"]).abs().mean()),
                    "mae_persistence": float((f["persistence"] - f["observed"]).abs().mean()),
                    "converged": float(bt.fit.diagnostics["converged"]),
                    "seconds": time.perf_counter() - t0,
                }
            )
            r = rows[paired][-1]
            print(
                f"seed {seed} {'paired' if paired else 'unpaired'}: {r['inside']:.0f}/{r['held_out']:.0f} inside, "
                f"width {r['width']:.3f}, mae {r['mae']:.4f} (persistence {r['mae_persistence']:.4f}), "
                f"converged {bool(r['converged'])}, {r['seconds']:.1f} s",
                flush=True,
            )
    for paired, rs in rows.items():
        inside, held = sum(r["inside"] for r in rs), sum(r["held_out"] for r in rs)
        print(
            f"{'paired' if paired else 'unpaired'}: coverage {inside:.0f}/{held:.0f} = {inside / held:.3f}; "
            f"mean width {np.mean([r['width'] for r in rs]):.3f}; median mae {np.median([r['mae'] for r in rs]):.4f} "
            f"(persistence {np.median([r['mae_persistence'] for r in rs]):.4f}); "
            f"converged {sum(r['converged'] for r in rs):.0f}/{len(rs)}; "
            f"median time {np.median([r['seconds'] for r in rs]):.1f} s"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, int(sys.argv[2]) if len(sys.argv) > 2 else 10)
