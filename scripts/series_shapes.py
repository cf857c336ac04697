"""Verdicts of the plateau model on logged per-step series whose shape is not the model's.

Each class is generated here, per step, by a process that is not the hinge (logistic rises,
with and without a creep after them, exponential approaches, collapses, sparse logging)
with AR(1) step noise, and fitted as a logged series (``fit_plateau`` on a run/step Dataset,
the exact Gaussian sampler, the default verdict rule). Prints one row per class: the verdict counts, the share with the
honest verdict and its 94 % Beta interval, and (where a knee exists) how often the change
point's 94 % HDI holds it.

    python scripts/series_shapes.py [--reps 40] [--seed 7] [--only S-shaped]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
import xarray as xr
from scipy import stats

from saturation import curves
from saturation.models import fit_plateau


def ar1(rng: np.random.Generator, n: int, sd: float, phi: float) -> np.ndarray:
    """Stationary AR(1) noise with marginal sd ``sd``."""
    e = np.empty(n)
    e[0] = rng.normal(0, sd)
    innov = sd * np.sqrt(1 - phi**2)
    for t in range(1, n):
        e[t] = phi * e[t - 1] + rng.normal(0, innov)
    return e


def logistic(t: np.ndarray, lo: float, hi: float, mid: float, width: float) -> np.ndarray:
    return curves.logistic_rise(t, start=lo, level=hi, midpoint=mid, width=width)


#: class -> (steps, mean curve, honest verdicts, true knee or None)
def classes() -> dict[str, tuple[np.ndarray, np.ndarray, tuple[str, ...], float | None]]:
    t435 = np.arange(435.0)
    creep = np.where(t435 < 60, logistic(t435, 0.1, 0.64, 25, 7), 0.0)
    creep = np.where(t435 < 60, creep, logistic(60.0, 0.1, 0.64, 25, 7) + 0.0003 * (t435 - 60))
    t91 = np.arange(91.0)
    t200 = np.arange(0.0, 201.0, 10.0)
    t2000 = np.arange(2000.0)
    collapse = np.where(t91 < 30, 0.2 + 0.4 * t91 / 30, np.where(t91 < 60, 0.6, 0.6 - 0.004 * (t91 - 60)))
    return {
        "creep after an S-shaped rise (435 steps)": (t435, creep, ("slowed", "still rising"), None),
        "smooth exponential approach, no break": (t91, 0.2 + 0.5 * (1 - np.exp(-t91 / 40)), ("slowed",), None),
        "S-shaped rise, saturated by step 40": (t91, logistic(t91, 0.2, 0.7, 20, 5), ("plateaued",), None),
        "S-shaped rise, still bending at the end": (
            t91,
            logistic(t91, 0.2, 0.7, 45, 12),
            ("slowed", "still rising"),
            None,
        ),
        "validation every 10 steps, knee at 55": (
            t200,
            np.where(t200 < 55, 0.2 + 0.4 * t200 / 55, 0.6),
            ("plateaued",),
            55.0,
        ),
        "rise, flat, then collapse": (t91, collapse, ("declining",), None),
        "already saturated at 0.945 (resumed at 101)": (np.arange(101.0, 301.0), np.full(200, 0.945), ("flat",), None),
        "hinge then flat (control)": (t91, np.where(t91 < 40, 0.3 + 0.3 * t91 / 40, 0.6), ("plateaued",), 40.0),
        "rising line (control)": (t91, 0.3 + 0.003 * t91, ("no change point", "still rising"), None),
        # longer than MAX_SERIES_POINTS: fitted on 500 bin means of 4 points
        "hinge then flat, 2,000 steps (binned)": (
            t2000,
            np.where(t2000 < 800, 0.3 + 0.3 * t2000 / 800, 0.6),
            ("plateaued",),
            800.0,
        ),
        "rising line, 2,000 steps (binned, control)": (
            t2000,
            0.3 + 0.00015 * t2000,
            ("no change point", "still rising"),
            None,
        ),
    }


def beta_interval(k: int, n: int) -> tuple[float, float]:
    return float(stats.beta.ppf(0.03, k + 0.5, n - k + 0.5)), float(stats.beta.ppf(0.97, k + 0.5, n - k + 0.5))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--noise", type=float, default=0.01, help="marginal sd of the step noise")
    ap.add_argument("--phi", type=float, default=0.5, help="AR(1) coefficient of the step noise")
    ap.add_argument("--only", default="", help="run only the classes whose name contains this")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"noise sd {args.noise}, AR(1) phi {args.phi}, {args.reps} series per class, seed {args.seed}\n")
    print("| class | honest verdict | share honest [94 % interval] | verdicts | knee inside the HDI | shapes |")
    print("|---|---|---|---|---|---|")
    t_all = time.perf_counter()
    for name, (steps, mu, honest, knee) in classes().items():
        if args.only not in name:
            continue
        counts: Counter[str] = Counter()
        shapes: Counter[str] = Counter()
        log_bf: list[float] = []
        inside = 0
        for r in range(args.reps):
            y = mu + ar1(rng, len(steps), args.noise, args.phi)
            ds = xr.Dataset({"metric": (("run", "step"), y[None])}, coords={"run": ["r"], "step": steps})
            est = fit_plateau(ds, response="metric", seed=r).estimands["levels"]["metric"]
            counts[est["verdict"]] += 1
            shapes[est.get("curve_shape", "-")] += 1
            if "bf_smooth_vs_break" in est:
                log_bf.append(float(np.log10(max(est["bf_smooth_vs_break"], 1e-300))))
            cp = est["changepoint"]
            if knee is not None and cp is not None and cp["hdi"][0] <= knee <= cp["hdi"][1]:
                inside += 1
        k = sum(counts[v] for v in honest)
        lo, hi = beta_interval(k, args.reps)
        verdicts = ", ".join(f"{v} {c}" for v, c in counts.most_common())
        knee_text = f"{inside}/{args.reps}" if knee is not None else "-"
        shape_text = ", ".join(f"{v} {c}" for v, c in shapes.most_common())
        if log_bf:  # the 10/50/90 % quantiles of log10 BF(smooth : break)
            q = np.quantile(log_bf, [0.1, 0.5, 0.9])
            shape_text += f" (log10 BF smooth : break {q[0]:.1f} / {q[1]:.1f} / {q[2]:.1f})"
        print(
            f"| {name} | {' or '.join(honest)} | {k / args.reps:.2f} [{lo:.2f}, {hi:.2f}] | {verdicts} | {knee_text} "
            f"| {shape_text} |",
            flush=True,
        )
    print(f"\n{time.perf_counter() - t_all:.1f} s")


if __name__ == "__main__":
    main()
