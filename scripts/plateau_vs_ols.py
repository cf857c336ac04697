"""The study's split OLS next to the Bayesian plateau fits on the embedded SWE-smith replica.

    python scripts/plateau_vs_ols.py [--reference data/reference.json]

Prints a Markdown table per level: the reference study's published early/late slopes and
t-values, split OLS at the published split on the replica's per-step means, the Bayesian
jump model at the same known break (the study's method with uncertainty) and the Bayesian
unknown-change-point hinge (separate change points, the default).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from saturation import schema as S
from saturation.aggregate import aggregate
from saturation.frequentist import split_ols
from saturation.models import fit_plateau
from saturation.replica import load_embedded


def _fmt(e: dict) -> str:
    return f"{e['mean']:.5f} [{e['hdi'][0]:.5f}, {e['hdi'][1]:.5f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", default=str(Path(__file__).parents[1] / "data" / "reference.json"))
    args = ap.parse_args()
    sat = json.loads(Path(args.reference).read_text())["saturation"]
    split = sat["split_step"]
    ds = load_embedded("swesmith")
    agg = aggregate(ds, by=(S.STEP,))
    steps = agg[S.STEP].to_numpy()
    jump = fit_plateau(ds, breakpoint=split, continuity="jump", shared=False, seed=1)
    free = fit_plateau(ds, seed=1)
    print(
        f"split at step {split}; Bayesian: posterior mean [94% HDI]; diagnostics jump "
        f"{jump.diagnostics['converged']}, unknown {free.diagnostics['converged']}\n"
    )
    print(
        "| level | segment | published slope (t) | split OLS slope (t) | Bayes jump @ split | Bayes hinge, unknown c |"
    )
    print("|---|---|---|---|---|---|")
    for level, pub in sat["levels"].items():
        ols = split_ols(steps, agg["f1_mean"].sel({S.LEVEL: level}).to_numpy(), split)
        ej, ef = jump.estimands["levels"][level], free.estimands["levels"][level]
        for seg in ("early", "late"):
            print(
                f"| {level} | {seg} | {pub[f'{seg}_slope']:.5f} ({pub[f'{seg}_t']:.2f}) | "
                f"{ols.loc[seg, 'slope']:.5f} ({ols.loc[seg, 't']:.2f}) | {_fmt(ej[f'{seg}_slope'])} | "
                f"{_fmt(ef[f'{seg}_slope'])} |"
            )
        print(
            f"| {level} | change point | {split} (chosen) | - | {split} (fixed) | "
            f"{ef['changepoint']['mean']:.1f} [{ef['changepoint']['hdi'][0]:.0f}, {ef['changepoint']['hdi'][1]:.0f}] |"
        )
        print(
            f"| {level} | P(\\|late gain\\| < ROPE) / P(early > 0) | - | - | {ej['p_late_in_rope']:.3f} / "
            f"{ej['p_early_positive']:.3f} | {ef['p_late_in_rope']:.3f} / {ef['p_early_positive']:.3f} |"
        )
    tg = free.estimands.get("together") or {}
    if tg:
        r = tg["changepoint_range"]
        print(
            f"\nlevels together: range of change points {r['mean']:.1f} [{r['hdi'][0]:.0f}, {r['hdi'][1]:.0f}] steps, "
            f"P(range <= 2) = {tg['p_range_le_2_steps']:.3f}"
        )


if __name__ == "__main__":
    main()
