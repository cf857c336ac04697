"""Throughput of the SkyRL console-log reader on a generated log.

    python benchmarks/ingest_bench.py [--mb 200] [--zst]

Generates a SkyRL-shaped console log of about ``--mb`` MB (tests/skyrl_fixtures.py: Ray
prefixes, ANSI codes, multi-line step blocks, async timing blocks, engine lines and per
rollout a ``Reward details`` and a ``Saving trajectory`` line), then
times ``saturation.skyrl.read_console_log`` on it and prints MB/s of decompressed text.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from saturation.skyrl import read_console_log
from skyrl_fixtures import console_log, write


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--zst", action="store_true", help="compress the log with zstandard first")
    ap.add_argument("--rollouts", type=int, default=512,
                    help="per-rollout lines per step (64 prompts x 8 samples in the study; 0: blocks only)")
    args = ap.parse_args()
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
