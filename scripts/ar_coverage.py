"""Coverage of the plateau model's 94 % HDIs when the step noise is autocorrelated.

The data are made here, per step, not by the model: a hinge (rise, then flat) plus step
effects that follow an AR(1) process (drifting prompt difficulty, a logged running mean)
or a slow random-walk drift in difficulty, plus within-step sampling noise for trial-like
data (none for a logged series). Each series is fitted with independent step noise, with
``noise="ar1"`` and with ``noise="auto"`` (the two averaged by their evidence: the default
on trials); the share of fits whose 94 % HDI holds the truth is printed with its 94 % Beta
interval, per class and quantity, with the shapes the fits named (``curve_shape``) and the
coverage among the fits named ``break`` (covered and named, of those named).

    python scripts/ar_coverage.py [--reps 60] [--seed 3] [--noise independent,ar1,auto] [--kinds drift,series]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from saturation.models import fit_plateau
from saturation.models.plateau import StepData

STEPS = np.arange(91.0)
TRUTH = {"changepoint": 40.0, "early_slope": 0.3 / 40, "late_slope": 0.0}


def hinge(t: np.ndarray) -> np.ndarray:
    c = TRUTH["changepoint"]
    return np.where(t < c, 0.3 + TRUTH["early_slope"] * t, 0.3 + TRUTH["early_slope"] * c)


def ar1(rng: np.random.Generator, n: int, sd: float, phi: float) -> np.ndarray:
    e = np.empty(n)
    e[0] = rng.normal(0, sd)
    for t in range(1, n):
        e[t] = phi * e[t - 1] + rng.normal(0, sd * np.sqrt(1 - phi**2))
    return e


def make(kind: str, rng: np.random.Generator) -> StepData:
    """One series of ``kind``: (noise process, within-step variance)."""
    n = len(STEPS)
    sampling = 0.0 if kind.startswith("series") else 0.012**2
    if "drift" in kind:  # difficulty drifting as a random walk, centred
        walk = np.cumsum(rng.normal(0, 0.004, n))
        eta = walk - walk.mean()
    else:
        phi = {"0.6": 0.6, "0.85": 0.85, "0": 0.0}[kind.split("AR ")[1].split(")")[0]]
        eta = ar1(rng, n, 0.02, phi)
    y = hinge(STEPS) + eta + rng.normal(0, np.sqrt(sampling), n)
    var = np.full((1, n), sampling)
    return StepData(STEPS, ["m"], y[None], np.full((1, n), 300.0 if sampling else np.inf), var, "m", None, {}, None)


def inside(est: dict, key: str) -> bool:
    e = est[key]
    return e is not None and e["hdi"][0] <= TRUTH[key] <= e["hdi"][1]


def beta_interval(k: int, n: int) -> str:
    lo, hi = stats.beta.ppf([0.03, 0.97], k + 0.5, n - k + 0.5)
    return f"{k / n:.2f} [{lo:.2f}, {hi:.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--noise", default="independent,ar1,auto", help="noise models to fit, comma-separated")
    ap.add_argument("--kinds", default=None, help="only the classes whose name contains one of these, comma-separated")
    args = ap.parse_args()
    kinds = [
        "series (AR 0)",
        "series (AR 0.6)",
        "series (AR 0.85)",
        "trials (AR 0)",
        "trials (AR 0.6)",
        "trials (AR 0.85)",
        "trials (drift)",
    ]
    keys = ("changepoint", "early_slope", "late_slope")
    print(f"{args.reps} series per class, seed {args.seed}; truth: change point 40, early slope 0.0075, late 0\n")
    head = "| data | noise model | change point | early slope | late slope | verdicts | shapes |"
    print(head + " change point / early / late, the fits named `break` |")
    print("|---|---|---|---|---|---|---|---|")
    t_all = time.perf_counter()
    wanted = args.kinds.split(",") if args.kinds else None
    for kind in kinds:
        if wanted and not any(w in kind for w in wanted):
            continue
        rng = np.random.default_rng([args.seed, kinds.index(kind)])
        data = [make(kind, rng) for _ in range(args.reps)]
        for noise in args.noise.split(","):
            hits = dict.fromkeys(keys, 0)
            named = dict.fromkeys(keys, 0)  # the same among the fits whose shape was named "break"
            verdicts: dict[str, int] = {}
            shapes: dict[str, int] = {}
            for r, sd in enumerate(data):
                est = fit_plateau(sd, noise=noise, seed=r).estimands["levels"]["m"]
                shape = est.get("curve_shape", "-")
                for key in keys:
                    hits[key] += inside(est, key)
                    named[key] += inside(est, key) and shape == "break"
                verdicts[est["verdict"]] = verdicts.get(est["verdict"], 0) + 1
                shapes[shape] = shapes.get(shape, 0) + 1
            cells = " | ".join(beta_interval(hits[k], args.reps) for k in keys)
            v = ", ".join(f"{k} {c}" for k, c in sorted(verdicts.items(), key=lambda kv: -kv[1]))
            sh = ", ".join(f"{k} {c}" for k, c in sorted(shapes.items(), key=lambda kv: -kv[1]))
            n_break = shapes.get("break", 0)
            brk = " / ".join(beta_interval(named[k], n_break) for k in keys) if n_break else "-"
            print(f"| {kind} | {noise} | {cells} | {v} | {sh} | {brk} |", flush=True)
    print(f"\n{time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
