"""Whole-process start-up times: what a user waits for from the prompt to the answer.

    python benchmarks/startup_bench.py [--runs 7] [--json PATH]

Times, each in a fresh interpreter (``sys.executable``, so the package it imports is the one
this interpreter imports; the ``saturation`` console script runs the same
``saturation.cli.main``), started from an empty temporary directory:

- ``import saturation``;
- ``saturation describe FILE.csv`` on the embedded SWE-smith trials written out as a plain
  CSV (46,592 rows): the time to the first line of output and to the end of the process;
- ``saturation plateau`` (the embedded SWE-smith data, Gaussian likelihood, the exact
  sampler; 4 chains x 1000 draws): to the end of the process, interpreter teardown included;
- ``saturation compare FILE --metric KEY`` (saturation curves, nutpie on the cached numba
  kernel, 4 x (500 + 2000) draws) on the embedded g1 data-pool arms (3 runs x 50 logged
  steps) and on a made-up series of 2 runs x 400 steps (a sigmoid rise with Gaussian
  noise, seeded); and the 400-step one again with an empty numba cache in every run
  (``NUMBA_CACHE_DIR`` a new folder: the first use on a machine, which compiles the kernel);
- ``saturation plateau FILE --metric KEY`` on a made-up logged series of 4,000 steps (one
  run: the same sigmoid rise, flat after about step 300, Gaussian noise, seeded): fitted on
  500 bin means with AR(1) step noise;
- ``saturation transfer`` (the embedded SWE-Gym trials, the default arms: all three, integrated task
  effects: nutpie on the cached numba kernel, 4 x (500 + 800) draws), with the numba cache
  of earlier runs and with an empty one (the first use on a machine).

Each is run ``--runs`` times after one untimed warm-up run (which writes the bytecode
caches, as a first run on a user's machine does: ``PYTHONDONTWRITEBYTECODE`` is removed
from the commands' environment); the median and the spread (min-max) of the wall time and the median CPU seconds
of the process (user + system, less sensitive to other jobs) are printed with the
machine's load average before and after. Speed is measured here, never in a timed test: the figures depend on the
machine and its load (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAIN = "from saturation.cli import run; run()"  # what the console script runs
#: the rows run with a new, empty numba cache each time end with this
EMPTY_CACHE = ", empty numba cache"


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds to the first line of stdout and to the process's exit, and the process's CPU
    seconds (user + system: less sensitive to the machine's load than the wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first_line = proc.stdout.readline()
    t_first = time.perf_counter() - t0
    _, err = proc.communicate()
    t_end = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err.strip()[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return (t_first if first_line else t_end), t_end, cpu


def _user_env() -> dict[str, str]:
    """The environment of a user's shell: this one without ``PYTHONDONTWRITEBYTECODE``, so
    the warm-up run writes the package's bytecode as a first run on a user's machine does
    (a sandbox that sets it would otherwise compile every module in every timed run: 0.1-0.3 s)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _series_csv(path: Path, n_runs: int = 2, n_steps: int = 400) -> None:
    """A logged reward of ``n_runs`` runs: a sigmoid rise to 0.5-0.6 with Gaussian noise."""
    import numpy as np

    rng = np.random.default_rng(0)
    step = np.arange(1, n_steps + 1)
    lines = ["run,step,reward/mean"]
    for r in range(n_runs):
        mean = 0.1 + (0.5 + 0.1 * r - 0.1) / (1 + (60.0 / step) ** 1.5)
        lines += [f"run{r},{t},{v:.5f}" for t, v in zip(step, mean + rng.normal(0, 0.02, n_steps), strict=True)]
    path.write_text("\n".join(lines) + "\n")


def _row(name: str, values: list[float], cpu: list[float] | None = None) -> dict[str, float | str | int | None]:
    return {
        "what": name,
        "median_s": statistics.median(values),
        "min_s": min(values),
        "max_s": max(values),
        "cpu_median_s": statistics.median(cpu) if cpu else None,
        "runs": len(values),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each command (default 7)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--only", metavar="WORD", help="time only the commands whose name contains WORD")
    args = parser.parse_args()

    from saturation import io, replica

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        csv = cwd / "swesmith.trials.csv"
        csv.write_bytes(io.decompress((replica.data_dir() / "swesmith-codesearch.trials.csv.zst").read_bytes()))
        commands = {
            "import saturation": [sys.executable, "-c", "import saturation"],
            "saturation describe FILE.csv": [sys.executable, "-c", MAIN, "describe", str(csv)],
            "saturation plateau (embedded, exact)": [sys.executable, "-c", MAIN, "plateau"],
        }
        series = cwd / "series400.csv"
        _series_csv(series)
        g1 = replica.data_dir() / "g1-pool-arms.metrics.csv"
        compare = [sys.executable, "-c", MAIN, "compare", "--metric"]
        commands["saturation compare (3 runs x 50 steps)"] = [*compare, "reward/avg_raw_reward", str(g1)]
        commands["saturation compare (2 runs x 400 steps)"] = [*compare, "reward/mean", str(series)]
        commands[f"saturation compare (2 runs x 400 steps){EMPTY_CACHE}"] = commands[
            "saturation compare (2 runs x 400 steps)"
        ]
        long = cwd / "series4000.csv"
        _series_csv(long, n_runs=1, n_steps=4000)
        commands["saturation plateau FILE --metric KEY (4,000 logged steps)"] = [
            sys.executable,
            "-c",
            MAIN,
            "plateau",
            str(long),
            "--metric",
            "reward/mean",
        ]
        commands["saturation transfer (embedded, default arms)"] = [sys.executable, "-c", MAIN, "transfer"]
        commands[f"saturation transfer (embedded){EMPTY_CACHE}"] = commands[
            "saturation transfer (embedded, default arms)"
        ]
        if args.only:
            commands = {k: v for k, v in commands.items() if args.only in k}
        times: dict[str, list[tuple[float, float, float]]] = {}
        for name, cmd in commands.items():
            env = _user_env()
            if name.endswith(EMPTY_CACHE):  # a new, empty numba cache per run: compiled each time
                env["NUMBA_CACHE_DIR"] = ""
            runs = []
            for i in range(args.runs + 1):
                if name.endswith(EMPTY_CACHE):
                    env["NUMBA_CACHE_DIR"] = str(cwd / f"numba-cache-{i}")
                t = _timed(cmd, cwd, env)
                if i:  # the first run is a warm-up: bytecode caches, the page cache
                    runs.append(t)
            times[name] = runs
    load_after = os.getloadavg()

    rows = [_row(name, [t[1] for t in ts], [t[2] for t in ts]) for name, ts in times.items()]
    if "saturation describe FILE.csv" in times:
        first = [t[0] for t in times["saturation describe FILE.csv"]]
        rows.insert(2, _row("saturation describe FILE.csv, first line", first))
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores; load average (1/5/15 min) before "
        f"{'/'.join(f'{x:.2f}' for x in load_before)}, after {'/'.join(f'{x:.2f}' for x in load_after)}"
    )
    print(f"{'what':<62} {'median':>8} {'min':>7} {'max':>7} {'CPU':>6}  (seconds, whole process, {args.runs} runs)")
    for r in rows:
        cpu = f"{r['cpu_median_s']:>6.2f}" if r["cpu_median_s"] is not None else f"{'':>6}"
        print(f"{r['what']:<62} {r['median_s']:>8.2f} {r['min_s']:>7.2f} {r['max_s']:>7.2f} {cpu}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"load_before": load_before, "load_after": load_after, "rows": rows}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
