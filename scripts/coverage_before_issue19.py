"""Coverage of the plateau model as it was before issue 19 (commit fe85e3a) on the
per-trial scenarios of ``saturation calibrate plateau-trials --seed 11`` (same simulator,
same seeds), for the before/after table in docs/calibration.md:

    git worktree add /tmp/old fe85e3a
    PYTHONPATH=/tmp/old/src python scripts/coverage_before_issue19.py study,noisy
    PYTHONPATH=/tmp/old/src python scripts/coverage_before_issue19.py small

The old package has no ``calibrate.study_levels`` / ``PROFILES``; they are repeated here.
Writes /tmp/exp/before_<designs>.json and prints one line per (design, change point).
"""

import json
import sys
import warnings
from dataclasses import replace

import numpy as np

from saturation.models import SamplerConfig, fit_plateau
from saturation.replica import SWESMITH_SPEC, load_reference
from saturation.simulate import PlateauSpec, simulate_plateau

warnings.simplefilter("ignore")
PROFILES = {
    "study": {"prompts_per_step": 64, "n_graded": 42511, "task_sd": 0.5, "step_sd": 0.05, "level_step_sd": 0.03},
    "noisy": {"prompts_per_step": 64, "n_graded": 42511, "task_sd": 1.0, "step_sd": 0.15, "level_step_sd": 0.08},
    "small": {"prompts_per_step": 12, "n_graded": None, "task_sd": 0.5, "step_sd": 0.05, "level_step_sd": 0.03},
}
ref = load_reference()["saturation"]["levels"]


def levels(cp):
    return tuple(
        replace(
            s,
            start=ref[s.name]["start"],
            early_slope=ref[s.name]["early_slope"] * 46 / cp,
            changepoint=cp,
            late_slope=ref[s.name]["late_slope"],
        )
        for s in SWESMITH_SPEC.levels
    )


out = {}
for prof in sys.argv[1].split(","):
    for cp in (20.0, 46.0, 70.0):
        cov = {p: [] for p in ("changepoint", "early_slope", "late_slope")}
        for sim in range(30):
            seed = 11 * 100_003 + sim * 7  # the seeds of calibrate.run_trials_task (seed 11, kind coverage)
            lv = levels(cp)
            ds, _ = simulate_plateau(PlateauSpec(levels=lv, run="trials-coverage", **PROFILES[prof]), seed=seed)
            fit = fit_plateau(ds, sampler=SamplerConfig(chains=4, draws=500, sampler="exact"), seed=seed)
            for level in lv:
                e = fit.estimands["levels"][level.name]
                for p, true in (
                    ("changepoint", cp),
                    ("early_slope", level.early_slope),
                    ("late_slope", level.late_slope),
                ):
                    cov[p].append(e[p]["hdi"][0] <= true <= e[p]["hdi"][1])
        out[f"{prof} {cp:g}"] = {p: float(np.mean(v)) for p, v in cov.items()}
        print(prof, cp, out[f"{prof} {cp:g}"], flush=True)
with open(f"/tmp/before_{sys.argv[1].replace(',', '_')}.json", "w") as fh:
    json.dump(out, fh)
