"""Change-point coverage on the per-trial generator, and the checks behind the pooling
decision (docs/calibration.md, "What was wrong, and what changed", item 4).

    python scripts/small_design_checks.py VARIANT CHANGEPOINT SIMS SEED [PROFILE]

PROFILE: a ``calibrate.PROFILES`` design (default ``small``). VARIANT: the pooled model (the
default before 2026-12-03) on ``base`` (the calibrate generator), ``notask`` (no task
effect), ``nostep`` (no step noise), ``fpconst`` (the spurious rate held constant),
``cluster`` (cluster-robust per-step variance), ``de`` (a pooled design effect), ``gauss``
(the step means' residuals replaced by Gaussian noise of the same per-level covariance
around the true curve: the model's own likelihood at a fixed truth), ``w1L`` (pooled with
evidence weight 1/L); or ``separate`` (each level its own change point, today's default).
Prints the coverage of the change point's and the early slope's 94 % HDIs and every miss.
Seeds as ``calibrate.run_trials_task`` (seed * 100003 + sim * 7).
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import replace

import numpy as np

from saturation.calibrate import PROFILES, study_levels
from saturation.models import SamplerConfig, fit_plateau
from saturation.models.plateau import PlateauConfig, StepData, step_data
from saturation.simulate import PlateauSpec, simulate_plateau


def _cluster_variance(ds, sd: StepData) -> np.ndarray:
    """CR0 (G / (G - 1)) variance of each per-step mean, prompt groups as clusters."""
    frame = ds[["f1", "graded"]].to_dataframe().reset_index()
    frame["step"] = ds["step"].values[frame["trial"].values]
    frame["iid"] = ds["instance_id"].values[frame["trial"].values]
    frame = frame[frame["graded"]]
    out = np.zeros_like(sd.var_mean)
    for i, level in enumerate(sd.levels):
        g = frame[frame["level"] == level].groupby(["step", "iid"])["f1"].agg(["sum", "size"]).reset_index()
        for j, step in enumerate(sd.steps):
            gg = g[g["step"] == step]
            ybar = gg["sum"].sum() / gg["size"].sum()
            e = gg["sum"] - ybar * gg["size"]
            out[i, j] = len(gg) / (len(gg) - 1) * (e**2).sum() / gg["size"].sum() ** 2
    return out


def main(variant: str, cp: float, nsim: int, seed0: int, profile: str = "small") -> None:
    prof = dict(PROFILES[profile])
    levels = study_levels(cp)
    if variant == "notask":
        prof["task_sd"] = 0.0
    if variant == "nostep":
        prof["step_sd"] = prof["level_step_sd"] = 0.0
    if variant == "fpconst":
        levels = tuple(replace(lv, fp_prob_start=lv.fp_prob_end) for lv in levels)
    res = []
    t0 = time.time()
    for sim in range(nsim):
        seed = seed0 * 100003 + sim * 7
        ds, truth = simulate_plateau(PlateauSpec(levels=levels, run="x", **prof), seed=seed)
        data = step_data(ds)
        if variant in ("cluster", "de"):
            vm = _cluster_variance(ds, data)
            if variant == "de":
                vm = data.var_mean * vm.sum(axis=1, keepdims=True) / data.var_mean.sum(axis=1, keepdims=True)
            data.var_mean = vm
        if variant == "gauss":
            mu = truth["curves"]["f1"].sel(level=data.levels).transpose("level", "step").values
            rng = np.random.default_rng(seed + 1)
            cov = np.cov(data.y - mu)
            data.y = mu + rng.multivariate_normal(np.zeros(len(data.levels)), cov, size=mu.shape[1]).T
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sampler = SamplerConfig(chains=4, draws=500, sampler="exact")
            if variant == "w1L":
                config = PlateauConfig(shared=True, evidence_weight=1 / len(data.levels), sampler=sampler)
                fit = fit_plateau(data, config, seed=seed)
            else:
                fit = fit_plateau(data, shared=variant != "separate", sampler=sampler, seed=seed)
        for lv in levels:
            est = fit.estimands["levels"][lv.name]
            lo, hi = est["changepoint"]["hdi"]
            elo, ehi = est["early_slope"]["hdi"]
            res.append(
                {
                    "sim": sim,
                    "level": lv.name,
                    "lo": lo,
                    "hi": hi,
                    "mean": est["changepoint"]["mean"],
                    "inside": bool(lo <= cp <= hi),
                    "early_in": bool(elo <= lv.early_slope <= ehi),
                }
            )
    cov_cp = np.mean([r["inside"] for r in res])
    cov_early = np.mean([r["early_in"] for r in res])
    print(
        f"{profile} {variant} cp {cp:g}: change point {cov_cp:.3f}, early slope {cov_early:.3f} "
        f"over {len(res)} level fits ({nsim} simulations, seed {seed0}, {time.time() - t0:.0f} s)"
    )
    for r in res:
        if not r["inside"]:
            print("  miss", r)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:6])
