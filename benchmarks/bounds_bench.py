"""Time and peak memory of every resource bound on hostile inputs, as a user meets them.

Each case builds a small file that would be huge once read (a netCDF header claiming 4 GiB,
a parquet of 10 million rows, a 20,000-column CSV, a console block of 50,000 keys, a zstd
bomb, a 20,000-step logged series with an unknown break), runs the ``saturation`` command a
user would run on it in a fresh process under ``/usr/bin/time``, and prints the exit code,
the first line of the message, the wall time and the peak resident memory. The figures go to
docs/performance.md ("Resource bounds").

Run: ``python benchmarks/bounds_bench.py`` (about a minute; needs ``/usr/bin/time``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HEADER = "run,step,instance_id,sample,graded,reward"


def nc_claiming_4gib(d: Path) -> Path:
    """A netCDF4 trial file whose ``reward`` variable is 4 GiB of float64 once read (chunked,
    never written: the file is a few KB; gzip-compressed zeros would be about 4 MB)."""
    import h5py

    path = d / "bomb.nc"
    with h5py.File(path, "w") as f:
        f.create_dataset("reward", shape=(1 << 29,), dtype="f8", chunks=(1 << 20,), compression="gzip")
    return path


def parquet_10m_rows(d: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 10_000_000
    table = pa.table(
        {
            "run": pa.array(["r"] * 1).take(pa.array(np.zeros(n, dtype=np.int32))),
            "step": pa.array(np.zeros(n, dtype=np.int64)),
            "instance_id": pa.array(["a"] * 1).take(pa.array(np.zeros(n, dtype=np.int32))),
            "sample": pa.array(np.arange(n, dtype=np.int64)),
            "graded": pa.array(np.ones(n, dtype=bool)),
            "reward": pa.array(np.ones(n)),
        }
    )
    path = d / "big.parquet"
    pq.write_table(table, path, compression="zstd")
    return path


def wide_csv(d: Path, columns: int = 20_000, rows: int = 200) -> Path:
    path = d / "wide.csv"
    with path.open("w") as f:
        f.write("step," + ",".join(f"k{i}" for i in range(columns)) + "\n")
        row = ",".join(["0.5"] * columns)
        for s in range(rows):
            f.write(f"{s},{row}\n")
    return path


def console_block_50k_keys(d: Path) -> Path:
    head = "2025-01-01 00:00:00.000 | INFO     | skyrl_train.utils.tracking:log:123 - Step {}: "
    path = d / "train.log"
    with path.open("w") as f:
        f.write(head.format(1) + "\n{'reward/avg_raw_reward': 0.25}\n")
        f.write(head.format(2) + "\n{" + ", ".join(f"'k{i}': 0.5" for i in range(50_000)) + "}\n")
    return path


def zstd_bomb(d: Path) -> Path:
    """A trial CSV of one valid row then 2 GiB of one repeated row, zstd-compressed."""
    import zstandard

    path = d / "bomb.csv.zst"
    row = b"r,0,a,0,true,1\n"
    with path.open("wb") as f, zstandard.ZstdCompressor(level=19).stream_writer(f) as w:
        w.write((HEADER + "\n").encode())
        chunk = row * (1 << 16)
        for _ in range((2 << 30) // len(chunk)):
            w.write(chunk)
    return path


def long_series(d: Path, steps: int = 20_000) -> Path:
    rng = np.random.default_rng(0)
    t = np.arange(steps)
    y = np.minimum(t, steps // 2) / steps + rng.normal(0, 0.02, steps)
    path = d / "metrics.csv"
    path.write_text("step,reward\n" + "".join(f"{s},{v:.5f}\n" for s, v in zip(t, y, strict=True)))
    return path


CASES = [
    ("netCDF claiming 4 GiB", nc_claiming_4gib, ["describe"]),
    ("parquet of 10M rows", parquet_10m_rows, ["describe"]),
    ("CSV of 20,000 columns x 200 rows", wide_csv, ["ingest", "--metrics-out", "{d}/m.nc"]),
    ("console block of 50,000 keys", console_block_50k_keys, ["ingest", "--metrics-out", "{d}/m.nc"]),
    ("zstd bomb (2 GiB from a small file)", zstd_bomb, ["describe"]),
    ("20,000-step series, unknown break", long_series, ["plateau", "--metric", "reward"]),
]


def run(cmd: list[str]) -> tuple[int, str, float, float]:
    """Exit code, first message line, wall seconds, peak RSS (MB) of one fresh process."""
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", *cmd], capture_output=True, text=True, check=False, timeout=1800
    )
    lines = proc.stderr.strip().splitlines()
    wall, kb = lines[-1].split()
    message = next((ln for ln in lines[:-1] if ln.strip() and "Command exited" not in ln), "")
    return proc.returncode, message.strip()[:140], float(wall), int(kb) / 1024


def main() -> int:
    exe = str(Path(sys.executable).with_name("saturation"))
    print("| input | file size | command | exit | message | wall s | peak MB |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for name, build, args in CASES:
            path = build(d)
            cmd = [exe, args[0], str(path), *(a.format(d=d) for a in args[1:])]
            code, message, wall, peak = run(cmd)
            size = path.stat().st_size
            shown = f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.0f} KB"
            print(f"| {name} | {shown} | `saturation {args[0]}` | {code} | {message} | {wall:.2f} | {peak:.0f} |")
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
