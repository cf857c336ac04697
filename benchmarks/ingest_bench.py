"""Throughput of the SkyRL readers on generated output.

    python benchmarks/ingest_bench.py [--mb 200] [--zst]
    python benchmarks/ingest_bench.py --trajectories 10000 [--zst]

Generates a SkyRL-shaped console log of about ``--mb`` MB (tests/skyrl_fixtures.py: Ray
prefixes, ANSI codes, multi-line step blocks, async timing blocks, engine lines and per
rollout a ``Reward details`` and a ``Saving trajectory`` line), then
times ``saturation.skyrl.read_console_log`` on it and prints MB/s of decompressed text.

With ``--trajectories N`` it instead writes a run directory of N trajectory files (the
fixture's record padded with a message history to about ``--kb`` KB each, 2 % ``.error``
files) and times ``saturation.ingest.ingest_runs`` on it: files/s and MB/s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from saturation.skyrl import read_console_log
from skyrl_fixtures import ANSWERS, console_log, trajectory, write


def trajectories(n: int, kb: float, zst: bool) -> None:
    import json

    kinds = sorted(ANSWERS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        size = 0
        for i in range(n):
            step, inst, rep = 1 + i // 512, f"repo__p-{(i % 512) // 8}", i % 8
            d = root / "trajectories" / f"step_{step}" / "train"
            d.mkdir(parents=True, exist_ok=True)
            if i % 50 == 49:
                size += write(d / f"{inst}_{rep}.error", "RuntimeError: sandbox timed out\n").stat().st_size
                continue
            record = trajectory(inst, kinds[i % len(kinds)], rep=rep)
            record["messages"] = [{"role": "tool", "content": "x" * 1000}] * max(0, int(kb) - 1)
            text = json.dumps(record)
            size += len(text.encode())
            write(d / f"{inst}_{rep}.json{'.zst' if zst else ''}", text)
        from saturation.ingest import ingest_runs

        t0 = time.perf_counter()
        res = ingest_runs([root], progress=False)
        elapsed = time.perf_counter() - t0
    acc = res.accounting
    print(f"{n} trajectory files, {size / 1e6:.0f} MB decompressed ({'zstd' if zst else 'plain'}): kept "
          f"{acc['rows_kept']}, ungraded {acc['rows_ungraded']}, rejected {acc['rows_rejected']}: {elapsed:.1f} s "
          f"= {n / elapsed:.0f} files/s = {size / 1e6 / elapsed:.1f} MB/s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--zst", action="store_true", help="compress the log with zstandard first")
    ap.add_argument("--rollouts", type=int, default=512,
                    help="per-rollout lines per step (64 prompts x 8 samples in the study; 0: blocks only)")
    ap.add_argument("--trajectories", type=int, default=0, help="benchmark trajectory files instead")
    ap.add_argument("--kb", type=float, default=16.0, help="size of one trajectory file in KB")
    args = ap.parse_args()
    if args.trajectories:
        trajectories(args.trajectories, args.kb, args.zst)
        return
    unit = console_log(20, eval_only=False, rollouts=args.rollouts)
    reps = max(1, int(args.mb * 1e6 / len(unit)))
    text = unit * reps  # step numbers repeat: blocks of one step merge, as in a resumed run
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / ("run.log.zst" if args.zst else "run.log"), text)
        size_mb = len(text.encode()) / 1e6
        t0 = time.perf_counter()
        log = read_console_log(path)
        elapsed = time.perf_counter() - t0
    acc = log.accounting()
    print(f"{size_mb:.0f} MB decompressed ({'zstd' if args.zst else 'plain'}), {acc['lines']} lines, "
          f"{acc['blocks']} blocks, {acc['malformed']} malformed: {elapsed:.1f} s = {size_mb / elapsed:.1f} MB/s")


if __name__ == "__main__":
    main()
