"""Read speed and peak memory of the verl console-log reader (saturation.runlogs).

Generates a verl console log of ``--mb`` megabytes in a temporary directory (deleted
afterwards): the driver's output of a 2025-style run, ``(TaskRunner pid=N)`` prefixes, one
``step:N - key:value ...`` line per step (``--keys`` metrics, values as verl's
``concat_dict_to_str`` prints numpy scalars: ``np.float64(...)``) between ``--foreign``
other lines (progress bars, worker INFO lines, printed samples), a resume every 2,000 steps.
Then reads it with :func:`saturation.runlogs.read_runlogs` in a fresh process and prints
MB/s and the peak resident memory of the reader and its worker processes.

    python benchmarks/runlog_bench.py --mb 1024 --foreign 20      # a realistic mix
    python benchmarks/runlog_bench.py --mb 1024 --foreign 0       # step lines only (worst case)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READER = r"""
import json, resource, sys, time
from saturation.runlogs import read_runlogs
path, workers = sys.argv[1], (int(sys.argv[2]) if sys.argv[2] != "auto" else None)
r0 = resource.getrusage(resource.RUSAGE_SELF)
cpu0 = r0.ru_utime + r0.ru_stime
t = time.perf_counter()
res = read_runlogs([path], strict=False, workers=workers)
elapsed = time.perf_counter() - t
a = res.accounting[0]
own_r, kid_r = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
own, kids = own_r.ru_maxrss / 1024, kid_r.ru_maxrss / 1024
cpu = own_r.ru_utime + own_r.ru_stime + kid_r.ru_utime + kid_r.ru_stime - cpu0
print(json.dumps({"seconds": elapsed, "records": a["records"], "kept": a["kept"], "values": a.get("values", 0),
                  "superseded": a["values_superseded"], "restarts": a["restarts"],
                  "steps": res.metrics.sizes["step"], "rss_mb": own, "worker_rss_mb": kids, "cpu": cpu}))
"""


def step_line(step: int, keys: int) -> bytes:
    items = [f"step:{step}", f"training/global_step:{step}", "training/epoch:0"]
    names = ["actor/entropy", "actor/pg_loss", "critic/score/mean", "response_length/mean", "timing_s/gen"]
    for i in range(keys - 2):
        name = names[i % len(names)] + (f"_{i // len(names)}" if i >= len(names) else "")
        items.append(f"{name}:np.float64({0.123456789012345 + i * 1e-3 + step * 1e-7!r})")
    return ("(TaskRunner pid=2101) " + " - ".join(items) + "\n").encode()


FOREIGN = [
    b"(TaskRunner pid=2101) Training Progress:  12%|#2        | 120/1000 [1:02:03<7:34:12, 31.01s/it]\n",
    b"(WorkerDict pid=3312) INFO 03-01 12:00:00 [model_runner.py:1234] Graph capturing finished in 12 secs\n",
    b"(TaskRunner pid=2101) [prompt] <|im_start|>user\\nSolve 12*7 and give the answer after ####.<|im_end|>\n",
    b"(TaskRunner pid=2101) [response] 12*7 = 84. The answer is #### 84<|im_end|>\n",
    b"(TaskRunner pid=2101) [ground_truth] 84\n",
    b"(TaskRunner pid=2101) [score] 1.0\n",
]


def generate(path: Path, mb: int, keys: int, foreign: int) -> None:
    target = mb << 20
    written, step, last_resume = 0, 1, 0
    with open(path, "wb") as f:
        while written < target:
            block = []
            for _ in range(500):
                block.append(step_line(step, keys))
                block.extend(FOREIGN[i % len(FOREIGN)] for i in range(foreign))
                step += 1
                if step % 2000 == 0 and step > last_resume:
                    last_resume = step
                    step -= 50  # a resume from a checkpoint 50 steps back
            data = b"".join(block)
            f.write(data)
            written += len(data)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=int, default=1024)
    p.add_argument("--keys", type=int, default=60, help="metrics per step line (verl logs 60-150)")
    p.add_argument("--foreign", type=int, default=20, help="other lines between two step lines")
    p.add_argument("--workers", default="auto", help="reader processes (auto: 2 over 256 MB)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        path = Path(tmp) / "verl_console.log"
        t = time.perf_counter()
        generate(path, args.mb, args.keys, args.foreign)
        size = path.stat().st_size
        print(f"generated {size / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s", flush=True)
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        out = subprocess.run(
            [sys.executable, "-c", READER, str(path), args.workers], capture_output=True, text=True, env=env, check=True
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"{size / 1e6:.0f} MB, {args.keys} keys a step line, {args.foreign} other lines a step, workers "
        f"{args.workers}: {r['seconds']:.1f} s wall, {size / 1e6 / r['seconds']:.0f} MB/s; {r['cpu']:.1f} CPU-s, "
        f"{size / 1e6 / r['cpu']:.0f} MB per CPU-s; {r['records']:,} lines, "
        f"{r['kept']:,} step lines, {r['values']:,} values, {r['steps']:,} steps, {r['superseded']:,} values "
        f"superseded over {r['restarts']} resumes; peak RSS reader {r['rss_mb']:.0f} MB, workers "
        f"{r['worker_rss_mb']:.0f} MB (largest)"
    )


if __name__ == "__main__":
    main()
