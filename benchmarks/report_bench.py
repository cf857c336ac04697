"""Wall time of the full default report (every spec in models/ on the embedded data).

    python benchmarks/report_bench.py [--specs models/] [--skip-warm]

Runs ``saturation.report.run_report`` three times in one process: cold (fresh output
directory, nothing compiled), warm (fresh output directory again: compiled models are
reused, nothing is cached) and cached (the same directory again: every fit is reused).
Prints the per-analysis and total times.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    # as the command line runs: BLAS on one thread (set before NumPy is imported)
    from saturation.limits import single_thread_blas

    single_thread_blas()
    from saturation.report import run_report

    ap = argparse.ArgumentParser()
    ap.add_argument("--specs", nargs="*", default=None)
    ap.add_argument("--skip-warm", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("cold", Path(tmp) / "a")]
        if not args.skip_warm:
            runs.append(("warm", Path(tmp) / "b"))
        runs.append(("cached", runs[-1][1]))
        for label, out in runs:
            t0 = time.perf_counter()
            rep = run_report(args.specs, out=out, progress=False)
            total = time.perf_counter() - t0
            parts = ", ".join(
                f"{s.name} {'cached' if s.cached else f'{s.seconds:.1f} s'}{'' if s.converged else ' (NOT CONVERGED)'}"
                for s in rep.sections
            )
            print(f"{label}: {total:.1f} s total ({parts})", flush=True)


if __name__ == "__main__":
    main()
