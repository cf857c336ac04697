"""Throughput of the SkyRL readers on output written the way upstream writes it.

    python benchmarks/ingest_bench.py [--mb 200] [--zst]
    python benchmarks/ingest_bench.py --trajectories 4000 [--kb 800] [--workers 2] [--zst]

Generates a console log of about ``--mb`` MB (tests/skyrl_fixtures.py: loguru with SkyRL's
coloured format, Ray prefixes, pprint step blocks, async timing blocks, engine lines and
per rollout a reward-details and a trajectory-saving line), then times
``saturation.skyrl.read_console_log`` on it and prints MB/s of decompressed text.

With ``--trajectories N`` it instead writes a run directory of N codescout trajectory files
(``json.dump(..., indent=2)`` of the real fields, OpenHands events with cumulative token ids
one per line, about ``--kb`` KB each; 2 % ``.error`` files; answers of every kind) and times
``saturation.ingest.ingest_runs`` on it: files/s and MB/s. The files were just written, so
they are read from the page cache: the figure is the parse rate, not the disk's.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from saturation.skyrl import read_console_log
from skyrl_fixtures import ANSWERS, ERROR_TEXT, console_log, trajectory, write


def trajectories(n: int, kb: float, zst: bool, workers: int | None) -> None:
    kinds = [*sorted(ANSWERS), "text", "none"]
    # cumulative prompts over 6 turns: about 0.45 KB of JSON per prompt token id
    tokens = max(10, int(kb * 1000 / 460 / 1.0))
    texts = {}
    for kind in kinds:  # one record per kind, re-labelled per file (building 0.8 MB records is slow)
        buf = io.StringIO()
        json.dump(trajectory("INSTANCE", kind, tokens=tokens, turns=6), buf, indent=2)
        texts[kind] = buf.getvalue()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        size = 0
        for i in range(n):
            step, inst, rep = 1 + i // 512, f"repo__p-{(i % 512) // 8}", i % 8
            d = root / "trajectories" / f"step_{step}" / "train"
            if i % 50 == 49:
                size += write(d / f"{inst}_{rep}.error", ERROR_TEXT).stat().st_size
                continue
            text = texts[kinds[i % len(kinds)]].replace('"INSTANCE"', json.dumps(inst), 1)
            size += len(text.encode())
            write(d / f"{inst}_{rep}.json{'.zst' if zst else ''}", text)
        from saturation.ingest import ingest_runs

        t0 = time.perf_counter()
        res = ingest_runs([root], progress=False, workers=workers)
        elapsed = time.perf_counter() - t0
    acc = res.accounting
    print(
        f"{n} trajectory files, {size / n / 1e3:.0f} KB each, {size / 1e6:.0f} MB decompressed "
        f"({'zstd' if zst else 'plain'}), workers {workers or 'default'}: kept {acc['rows_kept']}, ungraded "
        f"{acc['rows_ungraded']}, rejected {acc['rows_rejected']}, answers {acc['answer_statuses']}, "
        f"mismatches {acc['reward_dict_mismatches']}: {elapsed:.1f} s = {n / elapsed:.0f} files/s = "
        f"{size / 1e6 / elapsed:.0f} MB/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--zst", action="store_true", help="compress the log with zstandard first")
    ap.add_argument(
        "--rollouts",
        type=int,
        default=512,
        help="per-rollout lines per step (64 prompts x 8 samples in the study; 0: blocks only)",
    )
    ap.add_argument("--trajectories", type=int, default=0, help="benchmark trajectory files instead")
    ap.add_argument("--kb", type=float, default=800.0, help="size of one trajectory file in KB")
    ap.add_argument("--workers", type=int, default=None, help="trajectory parsing processes (default: CPUs)")
    args = ap.parse_args()
    if args.trajectories:
        trajectories(args.trajectories, args.kb, args.zst, args.workers)
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
    print(
        f"{size_mb:.0f} MB decompressed ({'zstd' if args.zst else 'plain'}), {acc['lines']} lines, "
        f"{acc['blocks']} blocks, {acc['malformed']} malformed: {elapsed:.1f} s = {size_mb / elapsed:.1f} MB/s"
    )


if __name__ == "__main__":
    main()
