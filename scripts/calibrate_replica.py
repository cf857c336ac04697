"""Search the answer-model parameters of the SWE-smith replica (run once; prints a spec).

    python scripts/calibrate_replica.py PATH/TO/reference.json

Reading of the published figures (docs/data.md): start/end are the metric's level at
the first and last step. The replica's true F1 per level is a continuous hinge from the
published start to the published end with a change point early enough (step 8) that
the study's split OLS at step 46 returns the published early slopes; the late slope is
the published one. This script fits, per level, the spurious-location probabilities at
start and end and the extra-location mean so that the expected precision, recall and
predicted count at the first and last step match the published values. The noise
(task_sd, step_sd) sets the t-values; ``tests/test_replica.py`` checks everything on the
embedded data. The chosen numbers are copied into ``saturation.replica``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy import optimize

from saturation.frequentist import split_ols
from saturation.simulate import LevelSpec, level_curves

#: per-level change points (early enough for the published slopes; see docs/data.md)
CHANGEPOINTS = {"file": 9.0, "module": 10.0, "entity": 8.0}
LAST = 90
SPLIT = 46
SD = float(np.sqrt(0.5**2 + 0.05**2 + 0.03**2))  # task_sd, step_sd, level_step_sd of the replica


STEPS = np.arange(LAST + 1)


def level_spec(name: str, ref: dict, x: np.ndarray) -> LevelSpec:
    sat = ref["saturation"]["levels"][name]
    pr = ref["precision_recall"]["levels"][name]
    start, gain = x[0], x[1]
    c = CHANGEPOINTS[name]
    return LevelSpec(
        name,
        float(start),
        float(gain) / c,
        sat["late_slope"],
        c,
        n_gold_mean=pr["n_gold"],
        fp_prob_start=float(x[2]),
        fp_prob_end=float(x[3]),
        fp_extra=float(x[4]),
    )


def residuals(x: np.ndarray, name: str, ref: dict) -> np.ndarray:
    """Scaled misfits: P/R/n_pred at both ends (unit 0.01), early split-OLS slope (unit
    10 %), F1 start/end (unit 0.25: nearly free, the published F1 and P/R are not jointly
    reachable as per-trial means, see docs/data.md)."""
    sat = ref["saturation"]["levels"][name]
    pr = ref["precision_recall"]["levels"][name]
    try:
        cur = level_curves(level_spec(name, ref, x), STEPS, 0, SD)
    except ValueError:
        return np.full(10, 100.0)
    out = [(cur[f][i] - pr[f][j]) / 0.01 for f in ("precision", "recall", "n_pred") for i, j in ((0, 0), (-1, 1))]
    early = split_ols(STEPS, cur["f1"], SPLIT).loc["early", "slope"]
    out.append((early - sat["early_slope"]) / (0.1 * sat["early_slope"]))
    out += [(cur["f1"][0] - sat["start"]) / 0.25, (cur["f1"][-1] - sat["end"]) / 0.25]
    return np.array(out)


def main() -> None:
    ref = json.loads(Path(sys.argv[1]).read_text())
    for name in ("file", "module", "entity"):
        sat = ref["saturation"]["levels"][name]
        x0 = [sat["start"], sat["end"] - sat["start"], 0.3, 0.02, 0.5]
        res = optimize.least_squares(
            residuals,
            x0=x0,
            args=(name, ref),
            diff_step=1e-3,
            bounds=([0.05, 0.0, 1e-4, 1e-4, 1e-3], [0.99, 0.5, 0.999, 0.999, 5.0]),
        )
        spec = level_spec(name, ref, res.x)
        cur = level_curves(spec, STEPS, 0, SD)
        print(f"{name}: {spec}")
        print(f"   scaled residuals P0 P1 R0 R1 pred0 pred1 slope F1_0 F1_1 = {np.round(res.fun, 2)}")
        print(f"   expected f1 {cur['f1'][0]:.3f} -> {cur['f1'][-1]:.3f}", flush=True)


if __name__ == "__main__":
    main()
