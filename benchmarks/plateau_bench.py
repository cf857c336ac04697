"""Benchmark the plateau fit on the embedded SWE-smith replica (42,511 graded trials).

    python benchmarks/plateau_bench.py [--draws 1000] [--samplers exact,nutpie,pymc] [--models separate,pooled]

Prints, per sampler and model: cold time (build + compile + sample), warm time (cached
compiled model, new data), sampling time, min bulk ESS, ESS/s, max R-hat, divergences.
Speed is measured here, never in a timed test. Numbers depend on the machine's load:
compare ratios.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from saturation.models import SamplerConfig, fit_plateau
from saturation.models.sampling import ConvergenceWarning
from saturation.replica import load_embedded


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--samplers", default="exact,nutpie,pymc")
    ap.add_argument("--models", default="separate,pooled")
    args = ap.parse_args()
    ds = load_embedded("swesmith")
    print(
        f"data: {int(ds['graded'].sum())} graded trials, {np.unique(ds['step']).size} steps, "
        f"levels {list(ds['level'].values)} (SYNTHETIC replica)"
    )
    print(
        f"{'model':<9} {'sampler':<7} {'cold s':>7} {'warm s':>7} {'sample s':>8} {'ESS min':>8} "
        f"{'ESS/s':>7} {'R-hat':>6} {'div':>4}"
    )
    for model in args.models.split(","):
        for sampler in args.samplers.split(","):
            cfg = SamplerConfig(draws=args.draws, tune=args.draws, sampler=sampler)
            times = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                for seed in (1, 2):  # second run reuses the compiled model (nutpie)
                    t0 = time.perf_counter()
                    fit = fit_plateau(ds, shared=(model == "pooled"), seed=seed, sampler=cfg)
                    times.append(time.perf_counter() - t0)
            d = fit.diagnostics
            sample = fit.timings["sample"]
            print(
                f"{model:<9} {sampler:<7} {times[0]:7.1f} {times[1]:7.1f} {sample:8.1f} "
                f"{d['ess_bulk_min']:8.0f} {d['ess_bulk_min'] / sample:7.0f} {d['rhat_max']:6.3f} "
                f"{d['divergences']:4d}",
                flush=True,
            )


if __name__ == "__main__":
    main()
