"""Command-line interface: ``saturation <command> ...``.

Exit codes: 0 success, 1 invalid data (validation report printed), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from saturation import __version__
from saturation import schema as S
from saturation.validate import TrialValidationError

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2


def _print(msg: str = "") -> None:
    print(msg, flush=True)


def _write_json(obj: Any, path: str) -> None:
    text = json.dumps(obj, indent=2, default=_json_default)
    if path == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(path).write_text(text + "\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if np.isnan(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
    raise TypeError(f"not JSON serialisable: {type(o)}")


# ------------------------------------------------------------------ simulate
def _cmd_simulate(args: argparse.Namespace) -> int:
    from saturation import replica
    from saturation.io import table_format, write_table, write_trials

    data, truth = replica.scenario(args.scenario, seed=args.seed)
    out = Path(args.out)
    if "trial" in data.dims:
        if out.suffix == ".nc":
            write_trials(data, out)
        else:
            table_format(out)
            write_table(data, out)
        _print(f"wrote {data.sizes['trial']} simulated trials ({args.scenario}, seed {args.seed}) to {out}")
    else:
        if out.suffix == ".nc":
            data.to_netcdf(out, engine="h5netcdf")
        else:
            replica.write_metrics_csv(data, out)
        _print(f"wrote per-step series ({args.scenario}, seed {args.seed}) to {out}")
    if args.truth:
        _write_json(replica.truth_to_json(truth), args.truth)
        _print(f"truth: {args.truth}")
    return EXIT_OK


# ------------------------------------------------------------------ ingest
def _print_accounting(ds: xr.Dataset) -> None:
    a = {k: int(ds.attrs[k]) for k in (S.ATTR_ROWS_READ, S.ATTR_ROWS_KEPT, S.ATTR_ROWS_UNGRADED, S.ATTR_ROWS_REJECTED)}
    _print(
        f"rows read {a[S.ATTR_ROWS_READ]}: kept {a[S.ATTR_ROWS_KEPT]} "
        f"(of which ungraded {a[S.ATTR_ROWS_UNGRADED]}), rejected {a[S.ATTR_ROWS_REJECTED]}"
    )


def _cmd_ingest(args: argparse.Namespace) -> int:
    from saturation.io import read_trials_report, write_trials

    rejects = args.rejects or (str(Path(args.output).with_suffix("")) + ".rejected.csv" if args.lenient else None)
    ds, valid = read_trials_report(args.inputs, strict=not args.lenient, rejects=rejects)
    write_trials(ds, args.output)
    _print(f"read {len(json.loads(ds.attrs[S.ATTR_SOURCES]))} file(s)")
    _print_accounting(ds)
    if valid.problems:
        _print(f"{len(valid.problems)} problem(s); rejected rows with reasons: {rejects}")
        for p in valid.problems[:20]:
            _print(f"  - {p}")
        if len(valid.problems) > 20:
            _print(f"  ... and {len(valid.problems) - 20} more in {rejects}")
    _print(f"wrote {args.output}: {ds.sizes.get('trial', 0)} trials, levels {list(ds[S.LEVEL].values)}")
    if args.json:
        _write_json({"output": args.output, "accounting": valid.accounting,
                     "problems": [str(p) for p in valid.problems], "rejects": rejects}, args.json)
    return EXIT_OK


# ------------------------------------------------------------------ describe
def describe(ds: xr.Dataset) -> dict[str, Any]:
    """Summary of a trial Dataset: runs, arms, steps, graded rate, start/end means."""
    from saturation.aggregate import aggregate

    by = [c for c in (S.RUN, S.ARM, S.PHASE, S.STEP) if c in ds.coords]
    agg = aggregate(ds, by=by)
    group_dims = [d for d in by if d != S.STEP]
    runs = []
    stacked = agg.stack(group=group_dims) if group_dims else agg.expand_dims(group=[()])
    for g in range(stacked.sizes["group"]):
        cell = stacked.isel(group=g)
        n = cell[S.N_TRIALS].to_numpy()
        if n.sum() == 0:
            continue
        steps = cell[S.STEP].to_numpy()[n > 0]
        first, last = int(steps.min()), int(steps.max())
        row: dict[str, Any] = {d: str(cell[d].item()) for d in group_dims}
        row.update(
            {
                "steps": [first, last],
                "n_steps": len(steps),
                "n_trials": int(n.sum()),
                "n_graded": int(cell[S.N_GRADED].sum()),
                "graded_rate": float(cell[S.N_GRADED].sum() / n.sum()),
                "reward_graded_only": {
                    "start": float(cell["reward_mean"].sel({S.STEP: first})),
                    "end": float(cell["reward_mean"].sel({S.STEP: last})),
                },
            }
        )
        if S.LEVEL in cell.dims:
            row["levels"] = {
                str(lvl): {
                    fld: {
                        "start": float(cell[f"{fld}_mean"].sel({S.STEP: first, S.LEVEL: lvl})),
                        "end": float(cell[f"{fld}_mean"].sel({S.STEP: last, S.LEVEL: lvl})),
                    }
                    for fld in S.LEVEL_FIELDS
                    if f"{fld}_mean" in cell
                }
                for lvl in cell[S.LEVEL].to_numpy()
            }
        runs.append(row)
    return {
        "sources": json.loads(ds.attrs.get(S.ATTR_SOURCES, "[]")),
        "synthetic": ds.attrs.get(S.ATTR_SYNTHETIC, ""),
        "accounting": {k: int(ds.attrs.get(k, 0)) for k in (S.ATTR_ROWS_READ, S.ATTR_ROWS_KEPT, S.ATTR_ROWS_UNGRADED, S.ATTR_ROWS_REJECTED)},
        "n_trials": int(ds.sizes.get(S.TRIAL, 0)),
        "levels": [str(v) for v in ds[S.LEVEL].to_numpy()] if S.LEVEL in ds.dims else [],
        "runs": runs,
        "note": "start/end are graded-only means at the first and last step of each run",
    }


def _print_description(name: str, d: dict[str, Any]) -> None:
    _print(f"== {name}")
    if d["synthetic"]:
        _print(f"   NOTE: {d['synthetic']}")
    a = d["accounting"]
    _print(f"   {d['n_trials']} trials; rows read {a['rows_read']}, kept {a['rows_kept']} "
           f"(ungraded {a['rows_ungraded']}), rejected {a['rows_rejected']}")
    for r in d["runs"]:
        label = " / ".join(f"{k}={r[k]}" for k in (S.RUN, S.ARM, S.PHASE) if r.get(k))
        rw = r["reward_graded_only"]
        _print(f"   {label}: steps {r['steps'][0]}..{r['steps'][1]} ({r['n_steps']}), "
               f"{r['n_trials']} trials, graded {r['graded_rate']:.1%}, "
               f"graded-only reward {rw['start']:.3f} -> {rw['end']:.3f}")
        for lvl, vals in r.get("levels", {}).items():
            parts = [f"{fld} {v['start']:.3f}->{v['end']:.3f}" for fld, v in vals.items() if fld != S.N_TP]
            _print(f"      {lvl:<8} " + ", ".join(parts))
    _print("   (start/end: graded-only means at the first and last step)")


def _cmd_describe(args: argparse.Namespace) -> int:
    from saturation import replica
    from saturation.io import open_trials, read_trials

    if args.trials:
        paths = args.trials
        if len(paths) == 1 and paths[0].endswith(".nc"):
            datasets = {paths[0]: open_trials(paths[0])}
        else:
            datasets = {", ".join(paths): read_trials(paths)}
    else:
        datasets = {f"embedded: {name}": replica.load_embedded(name) for name in replica.EMBEDDED_TRIALS}
    out = {}
    for name, ds in datasets.items():
        d = describe(ds)
        out[name] = d
        _print_description(name, d)
    if args.json:
        _write_json(out, args.json)
    return EXIT_OK


# ------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="saturation",
        description="Bayesian analysis of RL training dynamics (plateaus, change points, transfer).",
    )
    parser.add_argument("--version", action="version", version=f"saturation {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("simulate", help="write a simulated data set with known truth")
    p.add_argument("scenario", help="one of: " + ", ".join(_scenarios()))
    p.add_argument("out", help="output file (.csv/.parquet/.jsonl[.zst] or .nc)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH", help="also write the truth as JSON")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser("ingest", help="read graded-trial tables, validate, write a netCDF Dataset")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files or directories")
    p.add_argument("-o", "--output", required=True, help="output netCDF path (trials.nc)")
    p.add_argument("--lenient", action="store_true", help="reject bad rows instead of failing")
    p.add_argument("--rejects", metavar="PATH", help="side file for rejected rows (lenient mode)")
    p.add_argument("--json", metavar="PATH", help="write the accounting/validation report as JSON")
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser("describe", help="summarise trials (default: the embedded synthetic data)")
    p.add_argument("trials", nargs="*", metavar="TRIALS", help="trial tables or a .nc Dataset")
    p.add_argument("--json", metavar="PATH", help="write the summary as JSON ('-' for stdout)")
    p.set_defaults(func=_cmd_describe)
    return parser


def _scenarios() -> list[str]:
    from saturation.replica import SCENARIOS

    return list(SCENARIOS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except TrialValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_DATA
    except (FileNotFoundError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_DATA if not isinstance(exc, KeyError) else EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
