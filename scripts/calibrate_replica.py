"""Search the simulator parameters of the SWE-smith replica (run once; prints a spec).

Matches, on the *expected* per-step curves (no noise), the reference study's split-OLS
early/late slopes at step 46 and the start/end values read as segment fits (early fit
at the first step, late fit at the last step) of F1, precision, recall and predicted
count per level. The t-values are then set by the noise (task_sd, step_sd), checked by
simulation in ``tests/test_replica.py``. The chosen numbers are copied into
``saturation.replica``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy import optimize

from saturation.frequentist import split_ols
from saturation.simulate import LevelSpec, level_curves

REF = json.loads((Path(__file__).parents[2] / "shared/seed/reference.json").read_text()) if len(sys.argv) < 2 else json.loads(Path(sys.argv[1]).read_text())
STEPS = np.arange(91)
SPLIT = 46
SD = float(np.sqrt(1.0**2 + 0.1**2 + 0.05**2))


def seg(values: np.ndarray) -> tuple[float, float, float, float]:
    f = split_ols(STEPS, values, SPLIT)
    return f.loc["early", "slope"], f.loc["late", "slope"], f.loc["early", "fit_first"], f.loc["late", "fit_last"]


def loss(x: np.ndarray, name: str, c: float) -> float:
    sat = REF["saturation"]["levels"][name]
    pr = REF["precision_recall"]["levels"][name]
    b, gain, fp0, fp1, extra = x
    if not (0 < fp0 < 1 and 0 < fp1 < 1 and extra > 0 and 0 < b < 1 and 0 < b + gain < 1):
        return 1e6
    lv = LevelSpec(name, b, gain / c, sat["late_slope"], c, n_gold_mean=pr["n_gold"],
                   fp_prob_start=fp0, fp_prob_end=fp1, fp_extra=extra)
    try:
        cur = level_curves(lv, STEPS, 0, SD)
    except ValueError:
        return 1e6
    e, _, s0, s1 = seg(cur["f1"])
    err = [(e - sat["early_slope"]) / sat["early_slope"] * 0.5, (s0 - sat["start"]) / 0.01, (s1 - sat["end"]) / 0.01]
    for fld in ("precision", "recall", "n_pred"):
        _, _, a0, a1 = seg(cur[fld])
        err += [(a0 - pr[fld][0]) / 0.01, (a1 - pr[fld][1]) / 0.01]
    return float(np.sum(np.square(err)))


def main() -> None:
    for c in (8.0, 10.0):
        print(f"changepoint {c}")
        for name in ("file", "module", "entity"):
            sat = REF["saturation"]["levels"][name]
            x0 = [sat["start"] - 0.03, sat["end"] - sat["start"] + 0.03, 0.25, 0.05, 0.5]
            res = optimize.minimize(loss, x0, args=(name, c), method="Nelder-Mead",
                                    options={"maxiter": 600, "xatol": 1e-5, "fatol": 1e-6})
            print(f"  {name}: loss={res.fun:.3f} start={res.x[0]:.4f} gain={res.x[1]:.4f} "
                  f"fp_prob_start={res.x[2]:.4f} fp_prob_end={res.x[3]:.4f} fp_extra={res.x[4]:.4f}")


if __name__ == "__main__":
    main()
