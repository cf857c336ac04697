"""Scale: reading a million trials, and the pooled plateau fit at hundreds of steps.

    python benchmarks/scale_bench.py read [--trials 1000000] [--format csv,parquet,csv.zst]
    python benchmarks/scale_bench.py fit [--steps 91,300,1000] [--trials 40000]
    python benchmarks/scale_bench.py runs [--runs 20] [--workers 2] [--steps 91]

``read`` writes the embedded SWE-smith replica's design scaled up (3 levels, 91 steps, the
replica's curves; ``simulate_plateau``) as a trial table and times ``read_trials`` on it in
a fresh process, three times (the median is printed; the import of ``saturation.io`` is
included): wall and CPU seconds, and the process's peak resident memory (``VmHWM`` of
the child: its ``ru_maxrss`` would include the parent's peak, which Linux carries across
fork and exec).

``fit`` simulates the same 3 levels over N steps (change points scaled with the run length,
``--trials`` in all, as in issue 24's table)
and times, in a fresh process, reading nothing: aggregate, then the 3-level pooled fit with
the default (exact) sampler, twice (the second is the warm figure), with the peak memory.

``runs`` times ``fit_plateau_runs`` on ``--runs`` simulated runs (3 levels, ``--steps`` each)
in one call, serial and on a Dask LocalCluster.

Speed is measured here, never in a timed test; the figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

CHILD_READ = """
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from saturation.io import read_trials_report
ds, valid = read_trials_report(sys.argv[1], strict=False)
out = dict(wall=time.perf_counter() - t0, cpu=time.process_time() - c0, accounting=valid.accounting,
           rss_gb=int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1e6)
print(json.dumps(out))
"""

CHILD_FIT = """
import json, resource, sys, time, warnings
import xarray as xr
from saturation.aggregate import aggregate
from saturation.models import fit_plateau
ds = xr.open_dataset(sys.argv[1]).load()
out = {}
t0, c0 = time.perf_counter(), time.process_time()
agg = aggregate(ds)
out["aggregate"] = time.process_time() - c0
for name, seed in (("cold", 1), ("warm", 2)):
    t0, c0 = time.perf_counter(), time.process_time()
    fit = fit_plateau(agg, shared=True, seed=seed)  # the pooled fit, as benchmarked since issue 24
    out[name + "_wall"] = time.perf_counter() - t0
    out[name + "_cpu"] = time.process_time() - c0
out["diagnostics"] = {k: fit.diagnostics[k] for k in ("rhat_max", "ess_bulk_min")}
out["changepoint"] = {lvl: round(float(v["changepoint"]["mean"]), 2) for lvl, v in fit.to_dict()["levels"].items()}
out["rss_gb"] = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1e6
print(json.dumps(out))
"""


def _spec(n_steps: int, per_step: int):  # type: ignore[no-untyped-def]
    from saturation.replica import SWESMITH_SPEC

    scale = n_steps / SWESMITH_SPEC.n_steps
    levels = tuple(
        replace(
            lv, changepoint=lv.changepoint * scale, early_slope=lv.early_slope / scale, late_slope=lv.late_slope / scale
        )
        for lv in SWESMITH_SPEC.levels
    )
    prompts = max(1, per_step // SWESMITH_SPEC.samples_per_prompt)
    return replace(SWESMITH_SPEC, levels=levels, n_steps=n_steps, prompts_per_step=prompts, n_graded=None)


def _child(code: str, *args: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"benchmark child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_read(n_trials: int, formats: list[str]) -> None:
    from saturation.io import write_table
    from saturation.replica import SWESMITH_SPEC
    from saturation.simulate import simulate_plateau

    per_step = n_trials // SWESMITH_SPEC.n_steps
    spec = replace(_spec(SWESMITH_SPEC.n_steps, per_step), pool_size=max(SWESMITH_SPEC.pool_size, per_step))
    t0 = time.perf_counter()
    ds, _ = simulate_plateau(spec, seed=3)
    print(f"simulated {ds.sizes['trial']:,} trials x {ds.sizes['level']} levels in {time.perf_counter() - t0:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in formats:
            path = Path(tmp) / f"trials.{fmt}"
            t0 = time.perf_counter()
            write_table(ds, path)
            size = path.stat().st_size / 1e6
            runs = [_child(CHILD_READ, str(path)) for _ in range(3)]  # the machine's noise: median of 3
            res = sorted(runs, key=lambda r: r["wall"])[1]
            walls = ", ".join(f"{r['wall']:.1f}" for r in runs)
            print(
                f"{fmt:<9} {size:7.0f} MB  read+validate {res['wall']:6.1f} s wall (median of {walls}) "
                f"{res['cpu']:6.1f} CPU-s  peak {max(r['rss_gb'] for r in runs):.2f} GB  {res['accounting']}",
                flush=True,
            )


def bench_fit(steps: list[int], trials: int) -> None:
    from saturation.io import write_netcdf
    from saturation.simulate import simulate_plateau

    with tempfile.TemporaryDirectory() as tmp:
        for n in steps:
            ds, truth = simulate_plateau(_spec(n, trials // n), seed=5)
            path = Path(tmp) / f"sim{n}.nc"
            write_netcdf(ds, path)
            res = _child(CHILD_FIT, str(path))
            true_cp = {k: round(float(v["changepoint"]), 1) for k, v in truth["levels"].items()}
            print(
                f"{n:5d} steps {ds.sizes['trial']:>8,} trials: aggregate {res['aggregate']:5.2f} CPU-s, "
                f"fit cold {res['cold_wall']:6.2f} s ({res['cold_cpu']:6.2f} CPU-s), warm {res['warm_wall']:6.2f} s "
                f"({res['warm_cpu']:6.2f} CPU-s), peak {res['rss_gb']:.2f} GB; "
                f"R-hat {res['diagnostics']['rhat_max']:.3f}"
                f"; change points {res['changepoint']} (truth {true_cp})",
                flush=True,
            )


def bench_runs(n_runs: int, workers: int, steps: int) -> None:
    import xarray as xr

    from saturation.aggregate import aggregate
    from saturation.models.runs import fit_plateau_runs
    from saturation.simulate import simulate_plateau

    parts = []
    for r in range(n_runs):
        ds, _ = simulate_plateau(replace(_spec(steps, 40_000 // steps), run=f"run-{r:02d}"), seed=100 + r)
        parts.append(aggregate(ds))
    agg = xr.concat(parts, dim="run")
    for label, kwargs in (
        ("in process", {"scheduler": "sync"}),
        (f"LocalCluster of {workers} workers", {"workers": workers}),
    ):
        t0 = time.perf_counter()
        res = fit_plateau_runs(agg, **kwargs)
        print(
            f"{n_runs} runs x 3 levels x {steps} steps, {label}: {time.perf_counter() - t0:.1f} s; "
            f"{len(res.fits)} fitted, {len(res.failures)} failed",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("read")
    r.add_argument("--trials", type=int, default=1_000_000)
    r.add_argument("--format", default="csv,parquet")
    f = sub.add_parser("fit")
    f.add_argument("--steps", default="91,300,1000")
    f.add_argument("--trials", type=int, default=40_000, help="trials in all (per step: trials / steps)")
    m = sub.add_parser("runs")
    m.add_argument("--runs", type=int, default=20)
    m.add_argument("--workers", type=int, default=2)
    m.add_argument("--steps", type=int, default=91)
    args = ap.parse_args()
    if args.what == "read":
        bench_read(args.trials, args.format.split(","))
    elif args.what == "fit":
        bench_fit([int(s) for s in args.steps.split(",")], args.trials)
    else:
        bench_runs(args.runs, args.workers, args.steps)
    print(f"(parent peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB; {np.__name__})")


if __name__ == "__main__":
    main()
