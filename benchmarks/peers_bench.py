"""saturation's plateau fit beside what a user would run instead, in paired whole processes.

    python benchmarks/peers_bench.py [--runs 3] [--draws 1000,5000] [--peers mcp,brms,...]
        [--peers-dir ../shared/peers] [--peer-python PYTHON] [--json PATH]

Every tool fits one change point (a continuous hinge) to the entity level of the embedded
SWE-smith trials (42,224 graded trials over 91 steps), written out as a plain CSV. Each
command runs in a fresh process, timed from start to exit (interpreter or R start-up,
imports, reading, fitting, teardown: what the user waits for); in each round the tools run
one after another in a rotated order, so that a change in the machine's load falls on all of
them. Printed per tool: the median (min-max) wall time, the smallest bulk ESS over the
tool's parameters, bulk ESS per second of whole process, and saturation's ESS per second
over the tool's.

saturation runs ``saturation plateau FILE --levels entity --continuity hinge --json -`` (the
exact sampler, 4 chains) at each ``--draws`` value per chain; the default command
(``--continuity auto``: the hinge and the jump; its default draws, 4 x 5000) is timed too. The peers are the runners in
``--peers-dir`` (``README.md`` there: R's mcp, brms and segmented; plain PyMC, NumPyro,
ruptures and Rbeast in ``--peer-python``'s environment), each at its own default of 4 x
(1000 + 1000) draws; segmented and ruptures give no posterior (no ESS). The machine's load
average is printed before and after. Speed is measured here, never in a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAIN = "from saturation.cli import run; run()"  # what the console script runs
PEERS = {
    "mcp": ("R", "mcp_plateau.R"),
    "brms": ("R", "brms_plateau.R"),
    "segmented": ("R", "segmented_plateau.R"),
    "pymc": ("py", "pymc_plateau.py"),
    "numpyro": ("py", "numpyro_plateau.py"),
    "ruptures": ("py", "ruptures_plateau.py"),
    "beast": ("py", "beast_plateau.py"),
}


def _run(cmd: list[str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    # a user's environment: bytecode written once and reused (a sandbox may forbid it)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    # the JSON document after any other output: saturation's --json - (indented, after its
    # table) or a runner's one line
    lines = proc.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("{"):
            try:
                return wall, json.loads("\n".join(lines[i:]))
            except json.JSONDecodeError:
                continue
    return wall, {}


def _saturation_ess(out: dict) -> float:
    return float(out["diagnostics"]["ess_bulk_min"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds of paired runs (default 3)")
    parser.add_argument("--draws", default="1000,5000", help="saturation's draws per chain, comma-separated")
    parser.add_argument("--peers", default=",".join(PEERS), help="peers to run (default: all)")
    parser.add_argument("--peers-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "peers"))
    parser.add_argument("--peer-python", default=os.environ.get("PEERS_PYTHON", sys.executable))
    parser.add_argument("--level", default="entity")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args()

    from saturation import io, replica
    from saturation.limits import EXACT_DRAWS

    peers_dir = Path(args.peers_dir)
    rscript = shutil.which("Rscript")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "swesmith.trials.csv"
        csv.write_bytes(io.decompress((replica.data_dir() / "swesmith-codesearch.trials.csv.zst").read_bytes()))
        base = [sys.executable, "-c", MAIN, "plateau", str(csv), "--levels", args.level, "--json", "-"]
        commands: dict[str, list[str]] = {}
        for d in (int(v) for v in args.draws.split(",")):
            # the peers' model: a hinge with independent step noise
            same = ["--continuity", "hinge", "--noise", "independent", "--draws", str(d)]
            commands[f"saturation, hinge, 4 x {d}"] = [*base, *same]
        commands[f"saturation, default (hinge and jump, independent or AR(1) noise), 4 x {EXACT_DRAWS}"] = base
        for name in args.peers.split(","):
            kind, script = PEERS[name]
            if kind == "R":
                if rscript is None:
                    print(f"skipped {name}: no Rscript on PATH")
                    continue
                commands[name] = [rscript, str(peers_dir / script), str(csv), args.level]
            else:
                commands[name] = [args.peer_python, str(peers_dir / script), str(csv), args.level]
        names = list(commands)
        for name in names:  # warm-up: bytecode and compile caches, the page cache
            _run(commands[name])
        results: dict[str, list[tuple[float, dict]]] = {name: [] for name in names}
        for r in range(args.runs):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                results[name].append(_run(commands[name]))
    load_after = os.getloadavg()

    rows = []
    for name, runs in results.items():
        walls = [w for w, _ in runs]
        if name.startswith("saturation"):
            ess = [_saturation_ess(out) for _, out in runs]
        else:
            ess = [float(out["ess_min"]) for _, out in runs if out.get("ess_min") is not None]
        wall = statistics.median(walls)
        rate = statistics.median([e / w for e, (w, _) in zip(ess, runs, strict=False)]) if ess else None
        rows.append(
            {
                "tool": name,
                "wall_median_s": wall,
                "wall_min_s": min(walls),
                "wall_max_s": max(walls),
                "ess_bulk_min": statistics.median(ess) if ess else None,
                "ess_per_s": rate,
                "runs": len(walls),
            }
        )
    best_peer = max(
        (r["ess_per_s"] for r in rows if not r["tool"].startswith("saturation") and r["ess_per_s"]), default=None
    )
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores; load average (1/5/15 min) before "
        f"{'/'.join(f'{x:.2f}' for x in load_before)}, after {'/'.join(f'{x:.2f}' for x in load_after)}"
    )
    head = f"{'tool':<48} {'wall':>7} {'min':>7} {'max':>7} {'bulk ESS':>9} {'ESS/s':>8}"
    print(f"{head}  (whole process, {args.runs} rounds)")
    for r in rows:
        ess = f"{r['ess_bulk_min']:>9.0f}" if r["ess_bulk_min"] is not None else f"{'-':>9}"
        rate = f"{r['ess_per_s']:>8.1f}" if r["ess_per_s"] is not None else f"{'-':>8}"
        print(
            f"{r['tool']:<48} {r['wall_median_s']:>7.2f} {r['wall_min_s']:>7.2f} {r['wall_max_s']:>7.2f} {ess} {rate}"
        )
    if best_peer:
        for r in rows:
            if r["tool"].startswith("saturation") and r["ess_per_s"]:
                print(f"{r['tool']}: {r['ess_per_s'] / best_peer:.0f}x the best peer's ESS per second")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"load_before": load_before, "load_after": load_after, "rows": rows}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
