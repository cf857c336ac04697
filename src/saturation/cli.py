"""Command-line interface: ``saturation <command> ...``.

Exit codes (``EXIT_CODES``, shown by ``saturation --help``): 0 success; 1 invalid data or an
I/O fault; 2 usage (a bad option or value, an unknown name, a missing input path); 3 a fit did
not converge; 130 interrupted.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from saturation import __version__
from saturation import schema as S

if TYPE_CHECKING:
    import xarray as xr

# numpy, xarray, pandas, PyMC and ArviZ are imported by the commands that need them, not here:
# `saturation --help` then takes 0.05 s instead of 1.8-12 s (docs/performance.md)

#: exit codes (docs/cli.md, EXIT_CODES): 0 success; 1 invalid data or an I/O fault (the message
#: names the file); 2 usage (a bad option, value or spec, an unknown name, a missing input path);
#: 3 a fit ran but did not converge (its numbers are written, flagged, and must not be used)
EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_NOT_CONVERGED = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
#: the epilog of ``saturation --help`` (and so of docs/cli-reference.md)
EXIT_CODES = (
    f"exit codes: {EXIT_OK} success; {EXIT_DATA} invalid data or an I/O fault (every problem printed, "
    f"naming the file); {EXIT_USAGE} usage: a bad option or value, an unknown name (level, arm, "
    f"scenario, variable) or a missing input path, found before the data are read where it can be; "
    f"{EXIT_NOT_CONVERGED} a fit ran but did not converge (its numbers are written, flagged NOT "
    f"CONVERGED, and must not be used); {EXIT_INTERRUPTED} interrupted. An error is one line "
    "'error: ...' on stderr; --debug (anywhere on the command line) shows the traceback instead."
)


class UsageError(Exception):
    """A bad option, value, name or input path (exit code 2, a one-line message)."""


def _names(values: Any) -> str:
    """Names as plain text: ``file, module, entity`` (never a list's or numpy's repr)."""
    return ", ".join(str(v) for v in values)


#: a Python list of quoted names in a message (``['a', 'b']``, ``[np.str_('a')]``)
_NAME_LIST_RE = re.compile(r"\[((?:np\.str_\()?'[^'\[\]]*'\)?(?:, (?:np\.str_\()?'[^'\[\]]*'\)?)*)\]")


def _plain_names(message: str) -> str:
    """``"unknown level(s) ['foo']; have ['file', 'module']"`` -> ``unknown level(s) foo; have file, module``."""
    return _NAME_LIST_RE.sub(lambda m: ", ".join(re.findall(r"'([^']*)'", m.group(1))), message)


def _require_inputs(paths: Sequence[str] | None, flag: str = "") -> None:
    """Every input path must exist (a usage error, before anything is imported or read)."""
    for path in paths or []:
        if not Path(path).exists():
            raise UsageError(f"{flag + ' ' if flag else ''}{path}: no such file or directory")


def _shown(text: str) -> str:
    from saturation.progress import terminal_text

    return terminal_text(text)


def _print(msg: str = "") -> None:
    print(_shown(msg), flush=True)


def _write_json(obj: Any, path: str) -> None:
    from saturation.summary import json_safe

    text = json.dumps(json_safe(obj), indent=2, allow_nan=False)
    if path == "-":
        sys.stdout.write(text + "\n")
    else:
        from saturation.io import write_atomic

        write_atomic(path, (text + "\n").encode())


# ------------------------------------------------------------------ simulate
def _cmd_simulate(args: argparse.Namespace) -> int:
    if args.scenario not in S.SCENARIO_NAMES:
        raise UsageError(f"unknown scenario {args.scenario}; choose from {_names(S.SCENARIO_NAMES)}")
    _check_outputs([], [args.out, args.truth])
    from saturation.io import table_format, write_netcdf, write_table, write_trials
    from saturation.scenarios import scenario
    from saturation.series import write_metrics_csv

    data, truth = scenario(args.scenario, seed=args.seed)
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
            write_netcdf(data, out)
        else:
            write_metrics_csv(data, out)
        _print(f"wrote per-step series ({args.scenario}, seed {args.seed}) to {out}")
    if args.truth:
        _write_json(truth, args.truth)
        _print(f"truth: {args.truth}")
    return EXIT_OK


# ------------------------------------------------------------------ ingest
def _print_accounting(ds: xr.Dataset) -> None:
    a = {k: int(ds.attrs[k]) for k in (S.ATTR_ROWS_READ, S.ATTR_ROWS_KEPT, S.ATTR_ROWS_UNGRADED, S.ATTR_ROWS_REJECTED)}
    _print(
        f"rows read {a[S.ATTR_ROWS_READ]}: kept {a[S.ATTR_ROWS_KEPT]} "
        f"(of which ungraded {a[S.ATTR_ROWS_UNGRADED]}), rejected {a[S.ATTR_ROWS_REJECTED]}"
    )


def _pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{flag} expects DIR=NAME, got {item!r}")
        key, value = item.split("=", 1)
        out[key.rstrip("/")] = value
    return out


def _print_problems(problems: list[Any], header: str, rest: str, shown: int = 20) -> None:
    """The first ``shown`` problems after ``header``; where the others are (``rest``)."""
    _print(header)
    for problem in problems[:shown]:
        _print(f"  - {problem}")
    if len(problems) > shown:
        _print(f"  ... and {len(problems) - shown} more {rest}")


def _print_run_accounting(acc: dict[str, Any]) -> None:
    """What ``ingest`` of run directories read, per directory and in total."""
    for d in acc["dirs"]:
        _print(
            f"{d['dir']} (run {d['run']}): {d['trajectory_files']} trajectory files, {d['eval_dump_files']} "
            f"eval dumps, {len(d['console_logs'])} console logs, {d['wandb_runs']} wandb runs, "
            f"{d['metrics_csvs']} metrics CSVs, "
            f"{d['r2e_trajectory_files']} R2E-Gym eval files, {d['index_files']} index files, "
            f"{d['ignored_files']} ignored"
        )
        for w in d.get("wandb_runs_read", []):
            _print(
                f"  wandb run {w['file']}: {w['lines']} records, {w['steps']} steps on its step axis "
                f"{w['step_axis']}, {len(w['keys_not_read'])} keys not read (media, text or another step axis)"
            )
        for name in d["ignored"][:10]:
            _print(f"  ignored (not a SkyRL file): {name}")
    _print(
        f"rows read {acc['rows_read']}: kept {acc['rows_kept']} (of which ungraded {acc['rows_ungraded']}"
        + "".join(f"{': ' if i == 0 else ', '}{k} {v}" for i, (k, v) in enumerate(acc["ungraded_reasons"].items()))
        + f"), rejected {acc['rows_rejected']}, superseded eval-dump rows {acc['rows_superseded']}"
    )
    for note in acc["notes"]:
        _print(f"NOTE: {note}")
    if acc["answer_statuses"]:
        _print("answers: " + ", ".join(f"{k} {v}" for k, v in acc["answer_statuses"].items()))
    mismatches = acc["reward_dict_mismatches"]
    if mismatches:
        _print(
            "WARNING: recomputed F1 differs from the logged reward_dict on "
            + ", ".join(f"{v} trial(s) at the {k} level" for k, v in mismatches.items())
            + " (kept as recomputed; flagged in reward_dict_mismatch / mismatched_levels)"
        )


def _cmd_ingest_runs(args: argparse.Namespace) -> int:
    from saturation.ingest import IngestError, ingest_runs
    from saturation.io import write_netcdf as write_metrics
    from saturation.io import write_trials

    try:
        res = ingest_runs(
            [p.rstrip("/") for p in args.inputs],
            strict=not args.lenient,
            labels=_pairs(args.label, "--label"),
            arms=_pairs(args.arm, "--arm"),
            index=args.index or (),
            include_added=args.include_added,
            progress=args.progress,
            workers=args.workers,
        )
    except IngestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_DATA
    acc = res.accounting
    _print_run_accounting(acc)
    sampling = _dynamic_sampling_warnings(res.metrics) if res.metrics is not None else []
    if res.problems:
        _print_problems(
            res.problems,
            f"{len(res.problems)} problem(s) (lenient mode: the rest was ingested):",
            "(all in --json and the Dataset attrs)",
        )
    if args.json:
        _write_json(
            {
                "output": args.output,
                "metrics_output": args.metrics_out,
                "accounting": acc,
                "problems": res.problems,
                "dynamic_sampling": sampling,
            },
            args.json,
        )
    # an asked-for output that cannot be written is an error, never a silent exit 0; checked
    # before anything is written
    missing = []
    if args.output and res.trials is None:
        missing.append(f"-o {args.output}: no trials found (no trajectory files or eval dumps)")
    if args.metrics_out and res.metrics is None:
        missing.append(
            f"--metrics-out {args.metrics_out}: no per-step metrics found (no console log with "
            "'Step N:' blocks, wandb history, eval aggregate or metrics CSV)"
        )
    if missing:
        for line in missing:
            print(f"error: {line}; nothing written", file=sys.stderr)
        return EXIT_DATA
    if res.trials is not None and args.output:
        write_trials(res.trials, args.output)
        _print(f"wrote {args.output}: {res.trials.sizes['trial']} trials, levels {_names(res.trials[S.LEVEL].values)}")
    if res.metrics is not None:
        if args.metrics_out:
            write_metrics(res.metrics, args.metrics_out)
            _print(
                f"wrote {args.metrics_out}: per-step metrics, runs {_names(res.metrics[S.RUN].values)}, "
                f"{res.metrics.sizes[S.STEP]} steps, {len(res.metrics.data_vars)} metrics"
            )
        else:
            _print(f"per-step metrics of runs {_names(res.metrics[S.RUN].values)} found; write them with --metrics-out")
    _print(f"done in {acc['seconds']:.1f} s ({acc['megabytes']:.0f} MB)")
    return EXIT_OK


def _dynamic_sampling_warnings(series: xr.Dataset, runs: Sequence[str] | None = None) -> list[str]:
    """Print (and return) a WARNING per run of ``series`` that trained with dynamic sampling:
    its logged reward metrics are of the kept groups (``series.dynamic_sampling_notes``)."""
    from saturation.series import dynamic_sampling_notes

    notes = dynamic_sampling_notes(series, runs)
    for note in notes:
        _print(f"WARNING: {note}")
    return notes


def _check_outputs(inputs: Sequence[str], outputs: Sequence[str | None]) -> None:
    """Before anything is read or written: every output must be writable (its directory
    exists, it is not a directory), distinct from every other output, and none may be an
    input or land inside a directory of input tables (it would be read next time); the last
    two are usage errors (exit 2)."""
    resolved = {Path(p).resolve() for p in inputs}
    seen: dict[Path, str] = {}
    for out in outputs:
        if not out or out == "-":
            continue
        target = Path(out).resolve()  # symbolic links resolved: two names of one file are one output
        if target in seen:
            raise UsageError(f"{out}: two outputs would be the same file ({seen[target]}); give each its own path")
        seen[target] = out
        if target in resolved or any(i.is_dir() and i in target.parents and not _is_run_dir(i) for i in resolved):
            raise UsageError(f"{out}: the output would overwrite or land among the inputs; choose another path")
        if target.is_dir():
            raise ValueError(f"{out}: is a directory; give a file path")
        if not target.parent.is_dir():
            raise ValueError(f"{out}: its directory {target.parent} does not exist")


def _is_run_dir(path: Path) -> bool:
    from saturation.ingest import looks_like_run_dir

    return looks_like_run_dir(path)


def _cmd_ingest(args: argparse.Namespace) -> int:
    _require_inputs(args.inputs)
    default_rejects = str(Path(args.output).with_suffix("")) + ".rejected.csv" if args.output and args.lenient else None
    _check_outputs(args.inputs, [args.output, args.metrics_out, args.json, args.rejects or default_rejects])
    from saturation.ingest import looks_like_run_dir
    from saturation.io import read_trials_report, write_trials
    from saturation.runlogs import wandb_run_dirs

    # a wandb run directory holds files/output.log, as a SkyRL run directory holds console logs
    runs = [looks_like_run_dir(p) and not wandb_run_dirs(Path(p)) for p in args.inputs]
    if args.format or args.run_column or _runlog_inputs(args.inputs, runs):
        return _cmd_ingest_runlogs(args)
    if any(runs):
        if not all(runs):
            raise ValueError(
                "mix of SkyRL run directories and trial tables; ingest them separately: "
                + ", ".join(p for p, r in zip(args.inputs, runs, strict=True) if not r)
            )
        return _cmd_ingest_runs(args)
    if args.metrics_out:
        raise ValueError(
            f"--metrics-out: {_names(args.inputs)} is neither a SkyRL run directory nor a run log this reader "
            f"knows ({', '.join(S.RUNLOG_FORMATS)}); name its format with --format"
        )
    for flag in ("label", "arm", "index", "include_added", "workers"):
        if getattr(args, flag):
            raise ValueError(f"--{flag.replace('_', '-')} applies to SkyRL run directories only")
    if not args.output:
        raise ValueError("-o/--output is required for trial tables")

    rejects = args.rejects or default_rejects
    ds, valid = read_trials_report(args.inputs, strict=not args.lenient, rejects=rejects)
    write_trials(ds, args.output)
    _print(f"read {len(json.loads(ds.attrs[S.ATTR_SOURCES]))} file(s)")
    _print_accounting(ds)
    for old, new in json.loads(ds.attrs.get("renamed_columns", "{}")).items():
        _print(f"column {old!r} stored as {new!r} (its name is taken by the trial Dataset or cannot be stored)")
    if valid.problems:
        _print_problems(
            valid.problems, f"{len(valid.problems)} problem(s); rejected rows with reasons: {rejects}", f"in {rejects}"
        )
    _print(f"wrote {args.output}: {ds.sizes.get('trial', 0)} trials, levels {_names(ds[S.LEVEL].values)}")
    if args.json:
        _write_json(
            {
                "output": args.output,
                "accounting": valid.accounting,
                "problems": [str(p) for p in valid.problems],
                "rejects": rejects,
            },
            args.json,
        )
    return EXIT_OK


def _runlog_inputs(inputs: Sequence[str], skyrl: Sequence[bool]) -> bool:
    """Whether the inputs are run logs of other frameworks (runlogs.FORMATS); a mix with
    SkyRL run directories or trial tables is a usage error."""
    from saturation.runlogs import detect_format

    kinds = [None if r else detect_format(p) for p, r in zip(inputs, skyrl, strict=True)]
    if any(kinds) and not all(kinds):
        others = [p for p, k in zip(inputs, kinds, strict=True) if k is None]
        raise UsageError(
            f"mix of run logs and other inputs ({_names(others)}); ingest them separately, or name the format "
            "of every input with --format"
        )
    return any(kinds)


def _cmd_ingest_runlogs(args: argparse.Namespace) -> int:
    """``saturation ingest`` of verl / TRL / TensorBoard / MLflow / wandb-export / table run logs."""
    for flag in ("output", "label", "arm", "index", "include_added", "workers", "rejects"):
        if getattr(args, flag):
            raise UsageError(f"--{flag.replace('_', '-')} does not apply to run logs (write them with --metrics-out)")
    from saturation.io import write_netcdf
    from saturation.runlogs import RunLogError, read_runlogs, summary_lines
    from saturation.settings import split_names

    try:
        res = read_runlogs(
            args.inputs,
            format=args.format,
            run_column=list(split_names(args.run_column, "--run-column")) if args.run_column is not None else None,
            strict=not args.lenient,
        )
    except RunLogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_DATA
    for line in summary_lines(res):
        _print(line)
    if res.problems:
        _print_problems(
            res.problems, f"{len(res.problems)} problem(s) (lenient mode: the rest was read):", "(in --json)"
        )
    if args.json:
        _write_json(
            {"metrics_output": args.metrics_out, "accounting": res.accounting, "problems": res.problems}, args.json
        )
    if res.metrics is None:
        print("error: no numeric per-step metrics found; nothing written", file=sys.stderr)
        return EXIT_DATA
    runs = _names(res.metrics[S.RUN].values)
    if args.metrics_out:
        write_netcdf(res.metrics, args.metrics_out)
        _print(
            f"wrote {args.metrics_out}: per-step metrics, runs {runs}, {res.metrics.sizes[S.STEP]} steps, "
            f"{len(res.metrics.data_vars)} metrics"
        )
    else:
        _print(f"per-step metrics of runs {runs} found; write them with --metrics-out")
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
        "accounting": {
            k: int(ds.attrs.get(k, 0))
            for k in (S.ATTR_ROWS_READ, S.ATTR_ROWS_KEPT, S.ATTR_ROWS_UNGRADED, S.ATTR_ROWS_REJECTED)
        },
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
    _print(
        f"   {d['n_trials']} trials; rows read {a['rows_read']}, kept {a['rows_kept']} "
        f"(ungraded {a['rows_ungraded']}), rejected {a['rows_rejected']}"
    )
    for r in d["runs"]:
        label = " / ".join(f"{k}={r[k]}" for k in (S.RUN, S.ARM, S.PHASE) if r.get(k))
        rw = r["reward_graded_only"]
        _print(
            f"   {label}: steps {r['steps'][0]}..{r['steps'][1]} ({r['n_steps']}), "
            f"{r['n_trials']} trials, graded {r['graded_rate']:.1%}, "
            f"graded-only reward {rw['start']:.3f} -> {rw['end']:.3f}"
        )
        for lvl, vals in r.get("levels", {}).items():
            parts = [f"{fld} {v['start']:.3f}->{v['end']:.3f}" for fld, v in vals.items() if fld != S.N_TP]
            _print(f"      {lvl:<8} " + ", ".join(parts))
    _print("   (start/end: graded-only means at the first and last step)")


def _cmd_describe(args: argparse.Namespace) -> int:
    _require_inputs(args.trials)
    _check_outputs(args.trials, [args.json])
    # loaded one at a time, each described as soon as it is read (the first lines come early)
    loaders: dict[str, Callable[[], xr.Dataset]]
    if args.trials:
        loaders = {", ".join(args.trials): lambda: _load_trials_arg(args.trials, "")}
    else:
        from saturation import replica  # the embedded data (its import pulls in the models)

        loaders = {f"embedded: {name}": partial(replica.load_embedded, name) for name in replica.EMBEDDED_TRIALS}
    out = {}
    for name, load in loaders.items():
        try:
            ds = load()
        except Exception as exc:  # not graded trials: a per-step metrics file is described as one
            series, per_step = _metrics_or_error(args.trials)
            if series is None:
                raise (per_step or exc) from None
            out[name] = describe_series(series)
            _print_series_description(name, out[name])
            continue
        d = describe(ds)
        out[name] = d
        _print_description(name, d)
    if args.json:
        _write_json(out, args.json)
    return EXIT_OK


def _metrics_or_error(paths: Sequence[str] | None) -> tuple[xr.Dataset | None, Exception | None]:
    """One path read as per-step metrics: (the Dataset, None); (None, the error) when it is a
    run log of a known format (or a metrics .nc) that could not be read; (None, None) when it
    is not one."""
    if not paths or len(paths) != 1:
        return None, None
    from saturation.runlogs import detect_format, read_metrics

    try:
        return read_metrics(paths[0]), None
    except Exception as exc:
        known = detect_format(paths[0]) is not None
        return None, exc if known else None


def describe_series(series: xr.Dataset) -> dict[str, Any]:
    """Summary of a per-step metrics Dataset (run, step): per run its logged steps and how
    many metrics it holds; the keys as logged."""
    import numpy as np

    keys = {str(v): str(series[v].attrs.get("metric_name", v)) for v in series.data_vars if S.STEP in series[v].dims}
    runs = []
    for run in series[S.RUN].to_numpy() if S.RUN in series.dims else [None]:
        sub = series.sel({S.RUN: run}) if run is not None else series
        logged = [sub[v].notnull() for v in keys]
        any_logged = np.logical_or.reduce([m.to_numpy() for m in logged]) if logged else np.zeros(0, bool)
        steps = sub[S.STEP].to_numpy()[any_logged]
        runs.append(
            {
                "run": str(run) if run is not None else "",
                "steps": [int(steps.min()), int(steps.max())] if len(steps) else None,
                "n_steps": len(steps),
                "n_metrics": int(sum(bool(m.any()) for m in logged)),
            }
        )
    return {"kind": "per-step metrics", "metrics": sorted(keys.values()), "runs": runs}


def _print_series_description(name: str, d: dict[str, Any]) -> None:
    _print(f"== {name}: per-step metrics (not graded trials)")
    for r in d["runs"]:
        span = f"steps {r['steps'][0]}..{r['steps'][1]} ({r['n_steps']})" if r["steps"] else "no logged step"
        _print(f"   run {r['run']}: {span}, {r['n_metrics']} metrics")
    shown = d["metrics"][:40]
    more = f" and {len(d['metrics']) - 40} more" if len(d["metrics"]) > 40 else ""
    _print(f"   metrics: {', '.join(shown)}{more}")
    _print("   (fit one with `saturation plateau FILE --metric KEY` or `saturation compare FILE --metric KEY`)")


# ------------------------------------------------------------------ plateau
def _load_trials_arg(paths: list[str] | None, default: str) -> xr.Dataset:
    from saturation.inputs import load_inputs

    return load_inputs(paths, default=default)


def _load_phase_trials(args: argparse.Namespace, default: str) -> xr.Dataset:
    """The trials of one phase (``--phase``; default: the only one, or train of several,
    ``aggregate.select_phase``), a NOTE printed when other phases' trials were left out."""
    from saturation.aggregate import phase_note, select_phase

    ds = _load_trials_arg(args.trials, default)
    try:
        ds = select_phase(ds, args.phase)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if note := phase_note(ds):
        _print(f"NOTE: {note}")
    return ds


#: the levels of the embedded trial sets the commands default to (tests/test_cli.py checks
#: them against the data), so that a level name can be checked before the data are loaded
EMBEDDED_LEVELS = {"swesmith": S.CANONICAL_LEVELS}


def _csv_header_levels(path: Path) -> set[str] | None:
    """The level names of a CSV table's header (its first non-blank line; ``.zst`` streamed),
    as the reader derives them (``validate._level_columns``); None if it cannot be read."""
    import contextlib
    import csv
    from collections.abc import Generator
    from typing import cast

    from saturation import streams

    try:
        lines = cast("Generator[tuple[int, str], None, None]", streams.iter_lines(path))
        with contextlib.closing(lines):  # the file is closed after its first line
            for _, line in lines:
                if line is streams.OVERLONG:
                    return None
                text = line.removeprefix("\ufeff")
                if text.strip():
                    header = next(csv.reader([text], strict=True))
                    return {m["level"] for h in header if (m := S.LEVEL_COLUMN_RE.match(h.strip()))}
    except Exception:  # an unreadable file: the loader reports it properly
        return None
    return None


def _peek_levels(paths: list[str] | None, default: str) -> list[str] | None:
    """The level names of the input without reading its rows: the embedded data's, a netCDF
    Dataset's level coordinate (opened lazily) or the union of CSV headers. None when only the
    rows tell (JSON lines, parquet, an unreadable file): then the loaded data are checked."""
    if not paths:
        known = EMBEDDED_LEVELS.get(default)
        return list(known) if known is not None else None
    if len(paths) == 1 and paths[0].endswith(".nc"):
        try:
            import xarray as xr

            from saturation.io import check_netcdf

            check_netcdf(paths[0])  # nothing opened that would read another file
            with xr.open_dataset(paths[0], engine="h5netcdf") as ds:
                return [str(v) for v in ds[S.LEVEL].to_numpy()] if S.LEVEL in ds.dims else []
        except Exception:  # not a trial Dataset: the loader reports it
            return None
    from saturation.io import expand_paths, table_format

    found: set[str] = set()
    for path in expand_paths(paths):
        fmt, _ = table_format(path)
        levels = _csv_header_levels(path) if fmt == "csv" else None
        if levels is None:
            return None
        found |= levels
    return S.level_order(found)


def _check_levels(levels: list[str], have: list[str], response: str) -> None:
    if response in have:  # a trial variable: it is its own (only) level
        if levels != [response]:
            raise UsageError(
                f"--levels applies to a per-level response ({_names(S.LEVEL_FIELDS)}); --response {response} "
                "is a trial variable"
            )
        return
    unknown = [lvl for lvl in levels if lvl not in have]
    if unknown:
        raise UsageError(f"unknown level(s) {_names(unknown)}; have {_names(have) or 'none'}")


def _check_ranges(args: argparse.Namespace) -> None:
    """The sampler's and the ROPE's ranges (:mod:`saturation.limits`, the rule the specs and
    the configs use), checked before any data are read or memory allocated."""
    from saturation.limits import DEFAULT_CHAINS, DEFAULT_DRAWS, EXACT_DRAWS, rope_problems, sampler_problems

    given = {k: getattr(args, k) for k in ("draws", "tune", "chains", "seed") if getattr(args, k, None) is not None}
    if "draws" in given:  # chains x draws is bounded: the chains at their default when not given
        given.setdefault("chains", DEFAULT_CHAINS)
    # draws not given: the product at the command's default (plateau: the larger of the exact
    # sampler's and NUTS's, as SamplerConfig checks it)
    default = max(DEFAULT_DRAWS, EXACT_DRAWS) if getattr(args, "command", None) == "plateau" else DEFAULT_DRAWS
    problems = sampler_problems(**given, default_draws=default, draws_name="--draws")
    if getattr(args, "rope", None) is not None and hasattr(args, "rope_relative"):
        problems += rope_problems(args.rope, args.rope_relative or None, getattr(args, "metric_max", None))
    if problems:
        raise UsageError("; ".join(problems))


def _check_plateau_args(args: argparse.Namespace) -> Any:
    """Everything about the plateau options that can be checked before the data are read;
    returns the analysis' config (``PlateauConfig``)."""
    config = _plateau_config(args)
    if args.sampler == "exact" and config.likelihood != "gaussian":
        raise UsageError(
            f"--sampler exact draws the Gaussian plateau model only; --likelihood {config.likelihood} "
            "needs auto (nutpie), nutpie, pymc or numpyro"
        )
    _check_sampler_installed(args.sampler)
    _require_inputs(args.trials)
    _check_outputs(args.trials, [args.json, args.idata])
    levels, response = list(config.levels or []), config.response
    if levels and response not in S.LEVEL_FIELDS:  # per-level variables are exactly these
        _check_levels(levels, [response], response)
    elif levels:
        have = _peek_levels(args.trials, "swesmith")
        if have is not None:
            _check_levels(levels, have, response)
    return config


def _check_plateau_data(ds: xr.Dataset, config: Any) -> None:
    """The cheap checks that need the loaded trials (before the aggregation and the fit)."""
    levels, response = list(config.levels or []), config.response
    if S.TRIAL not in ds.dims:
        return
    if response not in ds.data_vars:
        per_level = [str(v) for v in ds.data_vars if S.LEVEL in ds[v].dims]
        per_trial = [str(v) for v in ds.data_vars if S.LEVEL not in ds[v].dims]
        raise UsageError(
            f"--response {response}: no such variable in the trials; per level: {_names(per_level) or 'none'}; "
            f"per trial: {_names(per_trial)}"
        )
    if levels:
        by_level = S.LEVEL in ds[response].dims
        _check_levels(levels, [str(v) for v in ds[S.LEVEL].to_numpy()] if by_level else [response], response)


def _cmd_plateau(args: argparse.Namespace) -> int:
    if args.metric is not None:
        return _cmd_plateau_series(args)
    if args.by:
        return _cmd_plateau_runs(args)
    config = _check_plateau_args(args)
    ds = _load_phase_trials(args, "swesmith")
    _check_plateau_data(ds, config)
    from saturation.models import fit_plateau

    fit = fit_plateau(ds, config, run=args.run, seed=args.seed)
    _show(fit)
    return _finish_fit(args, fit, fit.to_dict())


def _check_series_args(args: argparse.Namespace) -> None:
    """``plateau --metric``'s options, checked before the file is read."""
    for flag, given in (("--levels", args.levels), ("--by", args.by), ("--phase", args.phase)):
        if given:
            raise UsageError(f"--metric fits a logged per-step series: {flag} is for trial tables")
    if len(args.trials) != 1:
        raise UsageError(f"--metric {args.metric}: give one per-step metrics file")
    _require_inputs(args.trials)
    _check_outputs(args.trials, [args.json, args.idata])


def _cmd_plateau_series(args: argparse.Namespace) -> int:
    """``saturation plateau FILE --metric KEY``: a logged per-step series (any per-step
    metrics file the readers accept), one fit per run that logged the key; ``--json``
    holds ``{"metric", "runs": {run: the plateau JSON}}``."""
    _check_series_args(args)
    from dataclasses import replace

    from saturation.models import fit_plateau
    from saturation.models.runs import metric_runs
    from saturation.runlogs import read_metrics

    series = read_metrics(path := args.trials[0])
    var, runs = metric_runs(series, args.metric, args.run, where=str(path))
    if args.idata and len(runs) > 1:
        raise UsageError(f"--idata writes one fit: {path} has {len(runs)} runs of {args.metric!r}; pick one with --run")
    config = replace(_plateau_config(args), response=var)
    fits = {run: fit_plateau(series, config, run=run, seed=args.seed) for run in runs}
    for run, fit in fits.items():
        binned = fit.data.summary.get("binned")
        logged = (
            f"{binned['points']} logged steps, fitted as the means of {binned['bins']} runs of "
            f"{'-'.join(map(str, sorted(set(binned['points_per_bin']))))} consecutive points"
            if binned
            else f"{len(fit.data.steps)} logged steps"
        )
        _print(f"run {run}, metric {args.metric} ({logged}):")
        _show(fit)
        _print_diagnostics(fit.diagnostics, fit.timings)
    if args.json:
        runs_out = {run: fit.to_dict() for run, fit in fits.items()}
        _write_json({"metric": args.metric, "source": str(path), "runs": runs_out}, args.json)
    if args.idata:
        from saturation.io import write_netcdf

        write_netcdf(fits[runs[0]].idata, args.idata)
    return EXIT_OK if all(f.diagnostics["converged"] for f in fits.values()) else EXIT_NOT_CONVERGED


def _cell(value: Any) -> str:
    """One cell of an analysis' display table as text (:func:`saturation.summary.cell_text`)."""
    from saturation.summary import cell_text

    return _shown(cell_text(value, missing="-"))


def _show(analysis: Any) -> None:
    """An analysis as every command prints it: its heading, its display table
    (``analysis.table()``, one block per row), the sentences behind it (``details()``) and
    the answer (``answer()``); then the sentences of each sub-analysis it asked for
    (``parts()``: a back-test, a curve-family comparison)."""
    for line in analysis.heading():
        _print(_shown(line))
    for row in analysis.table().to_dict(orient="records"):
        (_, first), *rest = row.items()
        _print(f"  {_cell(first)}")
        for col, value in rest:
            _print(f"    {col:<34} {_cell(value)}")
    details, answer = analysis.details(), analysis.answer()
    for line in details:
        _print(f"  {_shown(line)}")
    if answer != " ".join(details):  # an answer that is not just the sentences above
        _print(f"  answer: {_shown(answer)}")
    for part in analysis.parts():
        for line in part.details():
            _print(f"  {_shown(line)}")
        if not getattr(part, "diagnostics", {}).get("converged", True):
            _print(f"  WARNING: the {type(part).__name__} fit did not converge: its figures are not trustworthy")


def _plateau_config(args: argparse.Namespace) -> Any:
    """The plateau options as the analysis' one config (``PlateauConfig``: the options the
    user gave, every other field the dataclass's default), checked by its ``validate()``."""
    from saturation import settings
    from saturation.configs import PlateauConfig

    return _validated(PlateauConfig(**settings.given(PlateauConfig, args), sampler=_sampler_args(args)))


def _validated(config: Any) -> Any:
    """``config`` after its ``validate()``: a value out of its range is a usage error."""
    try:
        config.validate()
    except ValueError as err:
        raise UsageError(" ".join(str(err).replace(":\n  - ", ": ").replace("\n  - ", "; ").split())) from None
    return config


def _cmd_plateau_runs(args: argparse.Namespace) -> int:
    """``saturation plateau --by run``: every run fitted on its own (a Dask LocalCluster by
    default), one table of verdicts, the failed runs listed; exit 1 if a run failed, 3 if
    a fit did not converge."""
    if args.run:
        raise UsageError("--by run fits every run; --run picks one: give one of them")
    idata_dir, args.idata = args.idata, None
    config = _check_plateau_args(args)
    if idata_dir and not Path(idata_dir).resolve().parent.is_dir():
        raise ValueError(f"{idata_dir}: its directory {Path(idata_dir).resolve().parent} does not exist")
    ds = _load_phase_trials(args, "swesmith")
    _check_plateau_data(ds, config)
    from saturation import progress
    from saturation.models.runs import fit_plateau_runs, run_names

    if not (n := len(run_names(ds))):
        raise UsageError("--by run: the data hold no run coordinate")
    cluster = args.scheduler or f"a LocalCluster of {args.workers} workers"
    _print(f"plateau fits of {n} runs on {'this process' if args.scheduler == 'sync' else cluster}")
    with progress.Progress(n, "plateau --by run", enabled=args.progress) as bar:
        res = fit_plateau_runs(
            ds,
            config,
            seed=args.seed,
            scheduler=args.scheduler,
            workers=args.workers,
            progress=lambda done, total: bar.update(done - bar.done),
        )
    _show(res)
    for line in res.status_lines():
        _print(line)
    if args.json:
        _write_json(res.to_dict(), args.json)
    if idata_dir:
        res.write_inference_data(idata_dir)
    return EXIT_DATA if res.failures else EXIT_OK if res.converged else EXIT_NOT_CONVERGED


def _diagnose_config(args: argparse.Namespace) -> Any:
    """``diagnose``'s options as the analysis' one config (``DiagnoseConfig`` and its parts:
    the options the user gave), checked by their ``validate()`` before any data is read."""
    from saturation import settings
    from saturation.configs import (
        CardinalityConfig,
        ComponentsConfig,
        DiagnoseConfig,
        EntropyConfig,
        ReliabilityConfig,
    )

    _require_inputs(args.trials)
    _require_inputs([args.metrics] if args.metrics else [], "--metrics")
    _check_outputs([*args.trials, *([args.metrics] if args.metrics else [])], [args.json])
    if args.weights is not None and args.components is None:
        raise UsageError("--weights needs --components (the components they weigh)")
    draws = {"draws": args.draws, "chains": args.chains}
    try:
        components = settings.given(ComponentsConfig, args)
        config = DiagnoseConfig(
            **settings.given(DiagnoseConfig, args),
            cardinality=CardinalityConfig(**draws),
            reliability=ReliabilityConfig(**settings.given(ReliabilityConfig, args), **draws),
            entropy=EntropyConfig(**settings.given(EntropyConfig, args), **draws),
            components=ComponentsConfig(**components, **draws) if components else None,
        )
    except ValueError as err:  # a part's own check at construction (components and weights)
        raise UsageError(str(err)) from None
    return _validated(config)


def _cmd_diagnose(args: argparse.Namespace) -> int:
    config = _diagnose_config(args)
    from saturation import replica
    from saturation.models.learning import diagnose
    from saturation.runlogs import read_metrics

    # the embedded data only when no input is given (the demo); a user's file is never
    # completed with the synthetic replica's data
    demo = not args.trials and not args.metrics
    ds = _load_phase_trials(args, "swesmith") if args.trials or demo else None
    series = read_metrics(args.metrics) if args.metrics else replica.load_embedded("code-contests") if demo else None
    res = diagnose(ds, series, config, run=args.run, seed=args.seed, where=args.metrics or "")
    for line in res.heading():
        _print(_shown(line))
    sampling = _dynamic_sampling_warnings(series) if series is not None else []
    for title, part in res.sections():
        _print(title)
        for sentence in part.details():
            _print(f"  {_shown(sentence)}")
        d = part.diagnostics
        _print(
            f"  diagnostics: R-hat max {d['rhat_max']:.3f}, bulk ESS min {d['ess_bulk_min']:.0f}, divergences "
            f"{d['divergences']} -> {'converged' if d['converged'] else 'NOT CONVERGED: do not use these numbers'}"
        )
    if args.json:
        out = res.to_dict()
        _write_json({**out, "data": {**out["data"], "dynamic_sampling": sampling}}, args.json)
    return EXIT_OK if res.diagnostics["converged"] else EXIT_NOT_CONVERGED


# ------------------------------------------------------------------ transfer
def _sampler_args(args: argparse.Namespace, base: Any = None) -> Any:
    """The model's default sampler settings (``base``) with the command line's overrides."""
    from saturation.configs import SamplerConfig, with_overrides

    given = {k: getattr(args, k) for k in ("draws", "tune", "chains")}
    return with_overrides(base or SamplerConfig(), {**given, "sampler": args.sampler, "progress": args.progress})


#: what ``--sampler auto`` means per fitting command (models.plateau.fit_plateau and
#: models.sampling.sample_model: "auto" is nutpie unless the exact draws apply)
SAMPLER_HELP = {
    "plateau": "auto (default): exact independent draws, no MCMC, for --likelihood gaussian, nutpie's NUTS for "
    "binomial and zoib; exact: gaussian only; nutpie, pymc: NUTS; numpyro: NUTS in JAX (needs numpyro and "
    "jax installed)",
    "transfer": "auto (default): nutpie's NUTS; pymc: PyMC's NUTS; numpyro: NUTS in JAX (needs numpyro and jax "
    "installed); the exact sampler exists for the Gaussian plateau model only",
}
SAMPLER_HELP["compare"] = SAMPLER_HELP["transfer"]  # both NUTS-only models


def _check_sampler_installed(sampler: str) -> None:
    import importlib.util

    if sampler == "numpyro" and any(importlib.util.find_spec(m) is None for m in ("numpyro", "jax")):
        raise UsageError("--sampler numpyro needs numpyro and jax installed (not dependencies of saturation)")


def _add_sampler_args(p: argparse.ArgumentParser, model: str, defaults: Any = (1000, 1000, 4)) -> None:
    draws, tune, chains = defaults
    p.add_argument(
        "--seed", type=int, default=0, help="seeds the sampler: same seed and data, same numbers (default 0)"
    )
    if model == "plateau":
        from saturation.limits import EXACT_DRAWS

        draws = f"{EXACT_DRAWS} for the exact sampler's independent draws, {draws} for NUTS"
    p.add_argument("--draws", type=_positive, metavar="N", help=f"draws per chain (default {draws})")
    unused = "; unused by the exact draws" if model == "plateau" else ""
    p.add_argument("--tune", type=_non_negative, metavar="N", help=f"tuning draws per chain (default {tune}{unused})")
    p.add_argument("--chains", type=_positive, metavar="N", help=f"chains (default {chains})")
    p.add_argument(
        "--sampler",
        choices=[s for s in S.SAMPLERS if model == "plateau" or s != "exact"],
        default="auto",
        help=SAMPLER_HELP[model],
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="live progress of the compile and the draws on stderr (status lines every 10 s when not a terminal)",
    )


def _add_phase_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--phase",
        choices=S.PHASES,
        help="the trials' phase to analyse (default: the only one; of several, train, the others left out "
        "with a note); train and eval trials are never pooled",
    )


def _add_cluster_args(p: argparse.ArgumentParser, scope: str = "") -> None:
    """``--scheduler`` and ``--workers`` of the commands that fan tasks out with
    :func:`saturation.cluster.map_tasks`; ``scope`` prefixes their help (e.g. "--by run: ")."""
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help=f"{scope}dask scheduler (tcp://host:port); default: a LocalCluster on this machine; 'sync': no dask",
    )
    p.add_argument(
        "--workers", type=_positive, default=2, metavar="N", help=f"{scope}LocalCluster worker processes (default 2)"
    )


def _finish_fit(args: argparse.Namespace, fit: Any, out: dict[str, Any]) -> int:
    """The end every fitting command shares: the diagnostics line, ``--json`` and ``--idata``
    written, exit 0 when the fit converged and 3 when not."""
    _print_diagnostics(out["diagnostics"], fit.timings)
    if args.json:
        _write_json(out, args.json)
    if args.idata:
        from saturation.io import write_netcdf

        write_netcdf(fit.idata, args.idata)
    return EXIT_OK if out["diagnostics"]["converged"] else EXIT_NOT_CONVERGED


def _print_diagnostics(d: dict[str, Any], timings: dict[str, Any]) -> None:
    from saturation.models.sampling import nuisance_text

    _print(
        f"diagnostics: R-hat max {d['rhat_max']:.3f}, bulk ESS min {d['ess_bulk_min']:.0f}, "
        f"divergences {d['divergences']}{nuisance_text(d)} -> "
        f"{'converged' if d['converged'] else 'NOT CONVERGED: do not use these numbers'}"
    )
    _print(f"time: compile {timings['compile']:.1f} s, sampling {timings['sample']:.1f} s ({timings['sampler']})")


def _check_transfer_args(args: argparse.Namespace) -> Any:
    """The transfer options that can be checked before the data are read; returns the
    analysis' config (``TransferConfig``, checked by its ``validate()``)."""
    from saturation import settings
    from saturation.configs import TransferConfig, transfer_sampler

    given = settings.given(TransferConfig, args)
    _validated(TransferConfig(**given))  # the options first, the sampler's after
    sampler = _sampler_args(args, transfer_sampler(given.get("task_effects", "integrated")))
    config = _validated(TransferConfig(**given, sampler=sampler))
    _check_sampler_installed(args.sampler)
    _require_inputs(args.trials)
    _check_outputs(args.trials, [args.json, args.idata])
    return config


def _check_transfer_data(ds: xr.Dataset, arms: list[str] | None, reference: str | None) -> None:
    """The cheap checks that need the loaded trials (before the model is built); a
    ``reference`` of None (the model picks it) is not checked."""
    if S.TRIAL not in ds.dims:
        return
    if S.ARM not in ds.coords:
        raise UsageError("comparing arms needs trials with an arm column; these have none")
    import numpy as np

    have = [str(a) for a in np.unique(ds[S.ARM].to_numpy().astype(str))]
    unknown = [a for a in arms or [] if a not in have]
    if unknown:
        raise UsageError(f"unknown arm(s) {_names(unknown)}; the data has {_names(have)}")
    if reference is not None and reference not in have:  # with --arms, checked before the load
        raise UsageError(f"--reference {reference} is not an arm of the data; it has {_names(have)}")


def _cmd_transfer(args: argparse.Namespace) -> int:
    config = _check_transfer_args(args)
    ds = _load_phase_trials(args, "swegym")
    _check_transfer_data(ds, list(config.arms) if config.arms else None, config.reference)
    from saturation.models import fit_transfer

    fit = fit_transfer(ds, config, seed=args.seed)
    _show(fit)
    return _finish_fit(args, fit, fit.to_dict())


# ------------------------------------------------------------------ compare
def _compare_config(args: argparse.Namespace) -> Any:
    """``compare``'s options as the analysis' one config (``SigmoidConfig``: the options the
    user gave, checked by its ``validate()``), and what only the command line has: the
    inputs and outputs, the declared arm properties and confounders, the x axis's inputs."""
    from saturation import settings
    from saturation.arms import parse_arm_properties  # light: checked before the data load
    from saturation.configs import PAIRED_SAMPLER, SIGMOID_SAMPLER, SigmoidConfig

    given = settings.given(SigmoidConfig, args)
    if args.metric is not None:
        if len(args.trials) != 1:
            raise UsageError(f"--metric {args.metric}: give one per-step metrics file (CSV or .nc), not trial tables")
        for flag, value in (("--paired", args.paired), ("--metrics", args.metrics), ("--phase", args.phase)):
            if value:
                raise UsageError(f"--metric fits logged per-step values: {flag} is for trials")
    _validated(SigmoidConfig(**given))  # the options first, the sampler's after
    _check_sampler_installed(args.sampler)
    if args.x == "compute" and not (args.metrics or args.metric):
        raise UsageError("--x compute needs --metrics (the per-step metrics of the arms' runs, with --compute)")
    if args.x != "compute" and (args.metrics or args.compute):  # --metric: the series' own runs
        raise UsageError("--metrics and --compute set the compute axis: add --x compute")
    _require_inputs(args.trials)
    _require_inputs([args.metrics] if args.metrics else [], "--metrics")
    _check_outputs([*args.trials, *([args.metrics] if args.metrics else [])], [args.json, args.idata])
    try:
        arm_attrs, _ = parse_arm_properties(args.arm_attr or [], [])
    except ValueError as err:
        raise UsageError(f"--arm-attr {err}") from None
    try:
        _, match = parse_arm_properties([], args.match or [])
    except ValueError as err:
        raise UsageError(f"--match {err}") from None
    sampler = _sampler_args(args, PAIRED_SAMPLER if args.paired else SIGMOID_SAMPLER)
    return _validated(SigmoidConfig(**given, arm_attrs=arm_attrs, match=match, sampler=sampler))


def _cmd_compare(args: argparse.Namespace) -> int:
    config = _compare_config(args)
    from saturation.models.sigmoid import compare_data, fit_sigmoid
    from saturation.runlogs import read_metrics

    if config.metric is not None:  # a logged per-step metric: each run of the series is an arm
        ds, metrics = read_metrics(args.trials[0]), None
    else:
        ds = _load_phase_trials(args, "")
        _check_transfer_data(ds, list(config.arms or []), config.reference)
        metrics = read_metrics(args.metrics) if args.metrics else None
    data = compare_data(ds, config, metrics)  # every check on the data before the fit
    sampling = _dynamic_sampling_warnings(ds, data.arms) if config.metric is not None else None
    fit = fit_sigmoid(data, config, seed=args.seed)
    _show(fit)
    out = {**fit.to_dict(), **{k: v for part in fit.parts() for k, v in part.results().items()}}
    if sampling is not None:
        out["data"] = {**out["data"], "dynamic_sampling": sampling}
    return _finish_fit(args, fit, out)


# ------------------------------------------------------------------ report
def _cmd_report(args: argparse.Namespace) -> int:
    _require_inputs(args.specs)
    if args.data is not None and not args.data.startswith("embedded:"):  # spec.EMBEDDED (not imported: slow)
        _require_inputs([args.data], "--data")
        if any(not (Path(p).suffix == ".toml" or Path(p).is_dir()) for p in args.specs):
            raise UsageError("--data replaces the data of specs: give spec files with it, or data paths without it")
    from saturation.report import run_report

    _print(f"saturation report -> {args.out}/")
    report = run_report(
        args.specs or None,
        data=args.data,
        out=args.out,
        force=args.force,
        progress=args.progress,
        log=_print,
        scheduler=args.scheduler,
        workers=args.workers,
    )
    for s in report.sections:
        _print(f"  {s.title}: {s.verdict}")
    _print(
        f"wrote {Path(args.out) / 'REPORT.md'}, REPORT.html, results.json, tables, figures and fits "
        f"({len(report.sections)} analyses) in {report.seconds:.1f} s"
    )
    if not report.converged:
        bad = [s.name for s in report.sections if not s.converged]
        print(
            f"WARNING: fits that did not converge: {', '.join(bad)}; their numbers are not trustworthy", file=sys.stderr
        )
    failed = [f["task"] for f in report.failures if f.get("status", "failed") == "failed"]
    skipped = [f for f in report.failures if f.get("status") == "skipped"]
    for f in skipped:
        _print(f"  not run: {f['task']}: {f['error']}")
    if failed:
        print(f"ERROR: analyses failed: {', '.join(failed)}", file=sys.stderr)
        return EXIT_DATA
    if not report.sections:
        print("error: none of the analyses fits these data (each reason is listed above)", file=sys.stderr)
        return EXIT_DATA
    return EXIT_OK if report.converged else EXIT_NOT_CONVERGED


# ------------------------------------------------------------------ calibrate
def _cmd_calibrate(args: argparse.Namespace) -> int:
    from saturation.calibrate import calibrate, write_outputs
    from saturation.progress import Progress

    if args.model != "plateau" and (args.misspecify_late_slope_sd or args.levels != 1):
        raise UsageError("--misspecify-late-slope-sd and --levels apply to the plateau model only")
    if args.levels < 1:
        raise UsageError(f"--levels must be >= 1, got {args.levels}")
    from saturation.calibrate import TrialsSetting

    trials = args.model == "plateau-trials"
    sbc_only = args.model not in ("plateau", "plateau-trials") or args.levels > 1
    trials_setting = TrialsSetting()
    cells = len(trials_setting.changepoints) * len(trials_setting.profiles)
    n = (
        args.sims * cells + args.null_sims + args.power_sims
        if trials
        else args.sims
        if sbc_only
        else args.sims + args.null_sims * 2 + args.power_sims * 3
    )
    bar = Progress(n, f"calibrate {args.model}", enabled=args.progress)

    def tick(done: int, total: int) -> None:
        bar.update(done - bar.done)

    where = args.scheduler or f"a LocalCluster with {args.workers} workers"
    checks = "" if sbc_only else (f", {args.null_sims} null and {args.power_sims} power simulations per effect size")
    if trials:
        _print(
            f"calibrating the plateau model on per-trial data that is not the model: {args.sims} simulations per "
            f"(design, change point) cell x {cells} cells, {args.null_sims} rising lines, {args.power_sims} "
            f"study-shaped data sets, on {where}"
        )
    else:
        _print(f"calibrating the {args.model} model: {args.sims} SBC simulations{checks}, on {where}")
    overrides: dict[str, Any] = {"n_levels": args.levels} if args.levels > 1 else {}
    if args.misspecify_late_slope_sd:
        overrides["fit_late_slope_sd"] = args.misspecify_late_slope_sd
    try:
        cal = calibrate(
            args.model,
            sims=args.sims,
            null_sims=args.null_sims,
            power_sims=args.power_sims,
            seed=args.seed,
            scheduler=args.scheduler,
            workers=args.workers,
            progress=tick,
            **overrides,
        )
    finally:
        bar.close()
    write_outputs(cal, args.out)
    table = cal.table
    for row in table.itertuples(index=False):
        p = (
            ""
            if row.p_value != row.p_value
            else (
                f", uniformity p = {row.p_value:.3f}, coverage p = "
                f"{row.coverage_p:.3f}, Holm-adjusted p = {row.p_adjusted:.3f}"
            )
        )
        verdict = {True: "ok", False: "FAILS", None: "reported"}[row.passes]
        _print(f"  {row.check}: {row.value:.3f} [{row.interval_low:.3f}, {row.interval_high:.3f}]{p} - {verdict}")
    if cal.failures:
        _print(f"{len(cal.failures)} task(s) failed after retries (listed in calibration.json):")
        for f in cal.failures[:10]:
            _print(f"  - {f['task']}: {f['error']}")
    _print(
        f"wrote {args.out}/ (calibration.nc, verdict.csv/.md/.tex, ranks.pdf/.png, calibration.json) "
        f"in {cal.seconds:.1f} s"
    )
    failed = [r.check for r in table.itertuples(index=False) if r.passes is False]
    if failed or cal.failures:
        print(
            f"WARNING: calibration checks failed: {', '.join(failed) or 'none'}; failed tasks: {len(cal.failures)}",
            file=sys.stderr,
        )
    return EXIT_OK


# ------------------------------------------------------------------ parser
def _bounded_int(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return value

    return parse


_positive = _bounded_int(1)
_non_negative = _bounded_int(0)


def _real(minimum: float | None = None, *, inclusive: bool = True) -> Any:
    """An argparse type: a finite number, at least (``inclusive``) or above ``minimum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if minimum is not None and (value < minimum if inclusive else value <= minimum):
            raise argparse.ArgumentTypeError(f"{value:g} must be {'>=' if inclusive else '>'} {minimum:g}")
        return value

    return parse


_finite = _real()
_positive_real = _real(0.0, inclusive=False)
_non_negative_real = _real(0.0)


PROGRESS_HELP = (
    "progress on stderr: a live bar on a terminal, else periodic status lines (default: on; --no-progress: none)"
)


class _Parser(argparse.ArgumentParser):
    """argparse with the documented error contract: one line ``error: ...`` naming the
    command, exit 2 (argparse prints the whole usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from saturation import settings  # light: the configs import no numpy
    from saturation.configs import (
        SIGMOID_SAMPLER,
        ComponentsConfig,
        DiagnoseConfig,
        EntropyConfig,
        PlateauConfig,
        ReliabilityConfig,
        SigmoidConfig,
        TransferConfig,
    )

    parser = _Parser(
        prog="saturation",
        description="Bayesian analysis of RL training dynamics (plateaus, change points, transfer).",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"saturation {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "report",
        help="run every analysis spec (models/*.toml) and write REPORT.md, tables, "
        "figures, fits and results.json (default: the embedded data)",
    )
    p.add_argument(
        "specs",
        nargs="*",
        metavar="PATH",
        help="spec files or directories of specs (default: the shipped models/); or your own data: trial tables, "
        "run directories, ingested .nc files or per-step metrics (verl, TRL, TensorBoard, MLflow, wandb, CSV): "
        "the analyses they support are chosen, their specs written to OUT/specs/",
    )
    p.add_argument("--data", metavar="PATH", help="replace every spec's data source (trials, or a metrics CSV)")
    p.add_argument("--out", default="report", metavar="DIR", help="output directory (default report/)")
    p.add_argument("--force", action="store_true", help="refit even when the cache is valid")
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the analyses as dask tasks: 'local' (a LocalCluster) or tcp://host:port "
        "(default: one after the other in this process)",
    )
    p.add_argument(
        "--workers", type=_positive, default=2, metavar="N", help="LocalCluster worker processes (default 2)"
    )
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=PROGRESS_HELP)
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "calibrate",
        help="simulation-based calibration, HDI coverage, false-plateau rate and power of a model, run as dask tasks",
    )
    p.add_argument(
        "model",
        choices=S.CALIBRATION_MODELS,
        help="the model to calibrate (plateau: also the learning-diagnostics trends; transfer, pass-at-k and "
        "sigmoid (the saturation curves of compare): SBC and coverage only; plateau-trials: coverage and verdicts "
        "on per-trial data that is not the model, --sims per cell, --null-sims rising lines, --power-sims "
        "study-shaped data sets)",
    )
    p.add_argument("--sims", type=_positive, default=200, metavar="N", help="SBC simulations (default 200)")
    p.add_argument(
        "--null-sims",
        type=_non_negative,
        default=100,
        metavar="N",
        help="plateau: steadily rising null simulations per rise (default 100)",
    )
    p.add_argument(
        "--power-sims",
        type=_non_negative,
        default=50,
        metavar="N",
        help="plateau: true-plateau simulations per effect size (default 50)",
    )
    _add_cluster_args(p)
    p.add_argument(
        "--seed", type=int, default=0, help="seeds the simulations and the fits: same seed, same numbers (default 0)"
    )
    p.add_argument("--out", default="calibration", metavar="DIR", help="output directory (default calibration/)")
    p.add_argument(
        "--levels",
        type=_positive,
        default=1,
        metavar="N",
        help="plateau: N metrics with pooled change points (SBC only; default 1, a single metric)",
    )
    p.add_argument(
        "--misspecify-late-slope-sd",
        type=_positive_real,
        metavar="SD",
        help="plateau: fit with this late-slope prior sd instead of the simulating one (shows a failing check)",
    )
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=PROGRESS_HELP)
    p.set_defaults(func=_cmd_calibrate)

    p = sub.add_parser("simulate", help="write a simulated data set with known truth")
    p.add_argument("scenario", metavar="SCENARIO", help="one of: " + ", ".join(S.SCENARIO_NAMES))
    p.add_argument(
        "out",
        metavar="OUT",
        help="output file: trials as .csv/.parquet/.jsonl (each optionally .zst) or .nc; series as a "
        "metrics CSV or .nc",
    )
    p.add_argument("--seed", type=int, default=0, help="seeds the simulation: same seed, same data (default 0)")
    p.add_argument("--truth", metavar="PATH", help="also write the truth as JSON")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser(
        "ingest", help="read SkyRL run directories or graded-trial tables, validate, write a netCDF Dataset"
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="SkyRL run directories (trajectories, eval dumps, console logs, eval_log_index.txt; "
        "docs/skyrl.md) or trial tables / directories of them",
    )
    p.add_argument(
        "-o",
        "--output",
        help="output netCDF path (trials.nc); required unless run directories are read with --metrics-out only",
    )
    p.add_argument("--metrics-out", metavar="PATH", help="run directories: write the per-step metrics (netCDF)")
    p.add_argument(
        "--label",
        action="append",
        metavar="DIR=NAME",
        help="run directories: run label of DIR (default: trainer.policy.model.path, else the "
        "directory name); repeatable",
    )
    p.add_argument("--arm", action="append", metavar="DIR=NAME", help="run directories: arm of DIR; repeatable")
    p.add_argument(
        "--index", action="append", metavar="PATH", help="run directories: an extra eval_log_index.txt; repeatable"
    )
    p.add_argument(
        "--include-added",
        action="store_true",
        help="run directories: count added_modules/added_entities as gold locations (the upstream "
        "reward does not, so the recomputed F1 then differs from the logged one)",
    )
    p.add_argument(
        "--workers",
        type=_positive,
        metavar="N",
        help="run directories: processes parsing trajectory files (default: the CPUs available)",
    )
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=PROGRESS_HELP)
    p.add_argument(
        "--lenient",
        action="store_true",
        help="reject bad rows/files (reported with file and line) and ingest the rest instead of failing",
    )
    p.add_argument("--rejects", metavar="PATH", help="tables: side file for rejected rows (lenient mode)")
    p.add_argument(
        "--format",
        choices=S.RUNLOG_FORMATS,
        help="run logs of other frameworks (docs/your-run.md): read every INPUT as this format (default: detected "
        "from name and content)",
    )
    p.add_argument(
        "--run-column",
        metavar="COL[,COL]",
        help="per-step tables: the column(s) naming each row's run (several runs in one file, e.g. algorithm,seed)",
    )
    p.add_argument("--json", metavar="PATH", help="write the accounting/validation report as JSON")
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser(
        "describe", help="summarise trials or a per-step metrics file (default: the embedded synthetic data)"
    )
    p.add_argument(
        "trials",
        nargs="*",
        metavar="TRIALS",
        help="trial tables or a .nc Dataset, or one per-step metrics file or run log",
    )
    p.add_argument("--json", metavar="PATH", help="write the summary as JSON ('-' for stdout)")
    p.set_defaults(func=_cmd_describe)

    p = sub.add_parser("plateau", help="Bayesian change-point / plateau analysis (default: embedded SWE-smith)")
    p.add_argument("trials", nargs="*", metavar="TRIALS", help="trial tables or a .nc Dataset")
    _add_phase_arg(p)
    p.add_argument("--run", help="run to analyse when the data hold several")
    p.add_argument(
        "--metric",
        metavar="KEY",
        help="fit a logged per-step series instead of trials: TRIALS is one per-step metrics file and KEY its "
        "metric as logged (e.g. critic/score/mean); one fit per run that logged it",
    )
    p.add_argument(
        "--by",
        choices=["run"],
        help="fit every run on its own and print one table of verdicts (a Dask LocalCluster by default; "
        "--idata is then a directory of one netCDF per run)",
    )
    _add_cluster_args(p, "--by run: ")
    settings.add_options(p, PlateauConfig, exclude=("shared",))  # one help text, one check (validate)
    pooling = p.add_mutually_exclusive_group()
    pooling.add_argument("--pooled", action="store_true", help=settings.help_of(PlateauConfig, "shared"))
    pooling.add_argument("--separate", action="store_true", help="each level its own change point (the default)")
    _add_sampler_args(p, "plateau")
    p.add_argument("--json", metavar="PATH", help="write the estimands as JSON ('-' for stdout)")
    p.add_argument("--idata", metavar="PATH", help="write the InferenceData (netCDF)")
    p.set_defaults(func=_cmd_plateau)

    p = sub.add_parser(
        "diagnose",
        help="learning diagnostics: skill vs cardinality prior, pass@1 vs pass@k, "
        "entropy (default: embedded SWE-smith trials + code-contests series)",
    )
    p.add_argument("trials", nargs="*", metavar="TRIALS", help="trial tables or a .nc Dataset")
    _add_phase_arg(p)
    p.add_argument(
        "--metrics",
        metavar="PATH",
        help="per-step metrics: a CSV (columns run, step, metric names) or the .nc of ingest --metrics-out",
    )
    p.add_argument("--run", help="run of the trials to analyse when they hold several")
    for cls in (ReliabilityConfig, EntropyConfig, ComponentsConfig, DiagnoseConfig):  # one help, one check
        settings.add_options(p, cls)
    p.add_argument(
        "--seed", type=int, default=0, help="seeds the samplers: same seed and data, same numbers (default 0)"
    )
    p.add_argument("--draws", type=_positive, default=1000, metavar="N", help="draws per chain (default 1000)")
    p.add_argument("--chains", type=_positive, default=4, metavar="N", help="chains (default 4)")
    p.add_argument("--json", metavar="PATH", help="write verdicts and numbers as JSON ('-' for stdout)")
    p.set_defaults(func=_cmd_diagnose)

    p = sub.add_parser("transfer", help="hierarchical multi-arm transfer analysis (default: embedded SWE-Gym)")
    p.add_argument("trials", nargs="*", metavar="TRIALS", help="trial tables or a .nc Dataset (needs an arm column)")
    _add_phase_arg(p)
    settings.add_options(p, TransferConfig)  # one help text, one check (validate)
    _add_sampler_args(
        p, "transfer", defaults=tuple(S.TRANSFER_SAMPLER["integrated"][k] for k in ("draws", "tune", "chains"))
    )
    p.add_argument("--json", metavar="PATH", help="write the estimands as JSON ('-' for stdout)")
    p.add_argument("--idata", metavar="PATH", help="write the InferenceData (netCDF)")
    p.set_defaults(func=_cmd_transfer)

    p = sub.add_parser(
        "compare",
        help="compare recipe arms by their saturation curves: ceiling (asymptote), efficiency, midpoint",
    )
    p.add_argument(
        "trials",
        nargs="+",
        metavar="TRIALS",
        help="trial tables or a .nc Dataset with an arm column (try: saturation simulate sigmoid-arms arms.csv); "
        "with --metric, one per-step metrics file",
    )
    _add_phase_arg(p)
    settings.add_options(p, SigmoidConfig)  # the config's fields: one help text, one check (validate)
    p.add_argument(
        "--arm-attr",
        action="append",
        metavar="ARM:KEY=VALUE",
        help="declare a property of an arm that the trials do not carry, e.g. t2yarn:context=81920 (repeatable; "
        "default: none)",
    )
    p.add_argument(
        "--match",
        action="append",
        metavar="KEY[=VALUE]",
        help="a declared confounder: a contrast is matched when both arms have VALUE (KEY alone: the same value), "
        "else it is flagged CONFOUNDED in the text and the JSON (repeatable; default: none)",
    )
    p.add_argument(
        "--metrics",
        metavar="PATH",
        help="--x compute: per-step metrics of the arms' runs (a metrics CSV, or the .nc of ingest --metrics-out)",
    )
    _add_sampler_args(p, "compare", defaults=(SIGMOID_SAMPLER.draws, SIGMOID_SAMPLER.tune, SIGMOID_SAMPLER.chains))
    p.add_argument("--json", metavar="PATH", help="write the estimands as JSON ('-' for stdout)")
    p.add_argument("--idata", metavar="PATH", help="write the InferenceData (netCDF)")
    p.set_defaults(func=_cmd_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere, not only before the command
    from saturation.settings import OptionValueError

    try:
        args = parser.parse_args([a for a in argv if a != "--debug"])
    except OptionValueError as err:  # a list option's value (settings.add_options): one line, exit 2
        print(f"error: {_shown(str(err))}", file=sys.stderr)
        return EXIT_USAGE
    args.debug = debug
    shown_as = warnings.formatwarning
    if not debug:  # a warning as its message alone, not the source line that raised it
        warnings.formatwarning = _format_warning
    try:
        _check_ranges(args)
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted (outputs are written atomically: none is left half-written)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        code, message = _error_of(exc, *_error_classes())
        print(f"error: {_shown(message)}", file=sys.stderr)
        return code
    finally:
        warnings.formatwarning = shown_as


def _format_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """A warning as the command line shows it: its text (a convergence warning is its own
    banner), ``warning:`` before a one-line one; never the file, line and source that
    raised it (``--debug`` shows those)."""
    text = _shown(str(message))
    return f"{text}\n" if "\n" in text.strip() else f"warning: {text.strip()}\n"


def run() -> NoReturn:
    """The ``saturation`` console script: :func:`main` with the BLAS library on one thread
    (:func:`saturation.limits.single_thread_blas`, unless the environment sets its thread
    count), then the process ends without the interpreter's teardown when nothing needs it.

    Freeing every module and object at exit costs 0.1-0.2 s of a command that answers in
    about 1.5 s (``docs/performance.md``). After ``main`` returns, the standard streams are
    flushed and the exit handlers run (``atexit``: logging's flush, ``weakref.finalize``
    cleanups such as temporary directories, a dask cluster's shutdown), then the process
    exits with ``os._exit``. Every output is complete by then (files are written atomically
    and closed before ``main`` returns). While a non-daemon thread is still running, the
    ordinary exit (which waits for it) is used instead, as it is when a stream cannot be
    flushed.
    """
    from saturation.limits import single_thread_blas

    single_thread_blas()
    code = main()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe (``| head``): the ordinary exit reports it as Python does
        sys.exit(code)
    atexit._run_exitfuncs()
    os._exit(code)


class _NotRaised(Exception):
    """Stands for an error class whose module was never imported (so it cannot have been raised)."""


def _error_classes() -> tuple[type, type, type]:
    """TrialValidationError, SpecError and io.OutputError, looked up without importing their
    modules: ``saturation.spec`` imports numpy, pandas and xarray (most of a second), which a usage
    error must not wait for."""
    validate, spec = sys.modules.get("saturation.validate"), sys.modules.get("saturation.spec")
    return (
        getattr(validate, "TrialValidationError", _NotRaised),
        getattr(spec, "SpecError", _NotRaised),
        getattr(sys.modules.get("saturation.io"), "OutputError", _NotRaised),
    )


def _error_of(exc: Exception, validation: type, spec: type, output: type = _NotRaised) -> tuple[int, str]:
    """The exit code and one-line message of an error (no traceback; ``--debug`` shows it)."""
    from saturation.limits import OptionError
    from saturation.settings import OptionValueError

    if isinstance(exc, UsageError | OptionError | OptionValueError | output):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, validation):
        return EXIT_DATA, str(exc)
    if isinstance(exc, spec):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, KeyError):
        # str(KeyError) is the repr of its argument: quotes around the whole message
        key = exc.args[0] if exc.args else ""
        if isinstance(key, str) and " " in key:  # a message ("unknown arm(s) ['x']; ..."), names made plain
            return EXIT_USAGE, _plain_names(key)
        return EXIT_USAGE, f"unknown name {key!r}"  # a bare key
    if isinstance(exc, OSError):  # a missing, unreadable or unwritable path, a full disk
        where = f"{exc.filename}: " if exc.filename else ""
        return EXIT_DATA, f"{where}{exc.strerror or exc}"
    if isinstance(exc, ValueError | MemoryError | RecursionError):
        return EXIT_DATA, str(exc) or type(exc).__name__
    return EXIT_DATA, (
        f"internal error ({type(exc).__name__}: {str(exc)[:200]}); please report it with the output of --debug"
    )


if __name__ == "__main__":  # pragma: no cover
    run()
