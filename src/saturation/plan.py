"""A report on the user's own runs: which analyses their data support.

``saturation report PATH...`` with data paths (graded-trial tables, run directories, ingested
``.nc`` files, or any per-step metrics file :func:`saturation.runlogs.read_metrics` accepts)
reads each input once, decides which analyses fit what it holds, and writes one ordinary spec
per analysis under ``<out>/specs/`` (the user can edit and re-run them with
``saturation report <out>/specs``). What does not fit is listed with a one-line reason.

The sections, in the order a reader asks (a plateau first):

* per-step metrics: the plateau of the mean reward, one fit per run; the runs' ceilings
  compared (two or more runs; each run an arm); pass@1 against pass@k and the policy's
  entropy (when both are logged);
* trials: the plateau of graded F1 per level (else of the reward; one fit per run when the
  trials hold several runs and no arms); the arms' ceilings and the transfer between arms
  (two or more arms); real skill or a cardinality prior (precision, recall, predicted and
  gold counts per level).

Nothing here fits a model: the specs are run by :func:`saturation.report.run_report`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from saturation import schema as S
from saturation.aggregate import select_phase
from saturation.inputs import load_inputs
from saturation.io import safe_name, write_atomic
from saturation.runlogs import detect_format

#: per analysis kind, the title and question of a section on the user's own data (a shipped
#: spec's are the study's; the report uses them for ``--data`` too)
GENERIC = {
    "plateau": (
        "Plateau and change point",
        "Did the metric stop rising; when (posterior over the change point); is it still gaining, flat or "
        "declining; how much headroom is left?",
    ),
    "compare": (
        "Ceilings of the arms",
        "Which arm has the higher ceiling, which only gets there faster, and will more steps pay?",
    ),
    "transfer": (
        "Transfer between arms",
        "How far apart do the arms start, do they cross, and where do they end?",
    ),
    "diagnose": ("Real skill or a cardinality prior", "Did precision and recall rise, or only the count of answers?"),
    "series": (
        "Reliability, capability and entropy",
        "Did pass@k (capability) move or only the mean reward (reliability)? Did the policy's entropy collapse?",
    ),
}


#: the directory (inside the report's output) of the specs a plan writes
SPEC_DIR = "specs"
#: order of the sections: the question a reader asks first comes first
ORDER = ("plateau", "compare", "transfer", "diagnose", "series")
#: a change point needs this many steps with data (``models.plateau.MIN_STEPS``)
MIN_STEPS = 4
CARDINALITY = (S.PRECISION, S.RECALL, S.N_PRED, S.N_GOLD)


@dataclass
class Plan:
    """The analyses chosen for the inputs: the spec files written and what was left out."""

    specs: list[Path] = field(default_factory=list)
    #: {"task", "status": "skipped", "error": reason}, as :class:`saturation.report.Report` lists them
    skipped: list[dict[str, str]] = field(default_factory=list)


def is_data(path: str | Path) -> bool:
    """Whether a report argument is data, not a spec: a spec is a ``.toml`` file or a directory
    holding ``.toml`` files at its top level."""
    path = Path(path)
    if path.is_dir():
        return not any(path.glob("*.toml"))
    return path.suffix != ".toml"


def input_kind(path: Path) -> str:
    """ "series" for a per-step metrics file (any :data:`saturation.runlogs.FORMATS`, or a
    ``.nc`` without a trial dimension), else "trials"."""
    if detect_format(path) is not None:
        return "series"
    if path.suffix == ".nc" and path.is_file():
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            return "trials" if S.TRIAL in ds.dims else "series"
    return "trials"


#: the training reward as each stack logs it, first found wins: SkyRL (``reward/avg_raw_reward``),
#: verl (``critic/score/mean``: the task score; ``critic/rewards/mean`` adds the KL penalty),
#: TRL (``reward`` in ``trainer_state.json``, ``train/reward`` in TensorBoard and wandb)
REWARD_KEYS = ("reward/avg_raw_reward", "critic/score/mean", "reward", "train/reward")
#: validation rewards: verl's ``val-core/<data source>/<variable>/mean@N``, TRL's ``eval_reward``
VALIDATION_KEY = re.compile(r"^(val-core/.+/(reward|score|acc)/mean@\d+|eval_reward|eval/reward)$")


def reward_keys(series: xr.Dataset) -> list[tuple[str, str]]:
    """(logged key, variable) of the rewards a report fits: the training reward (the first of
    :data:`REWARD_KEYS` that was logged) and every validation reward."""
    by_key = {str(series[v].attrs.get("metric_name", v)): str(v) for v in series.data_vars}
    train = [(k, by_key[k]) for k in REWARD_KEYS if k in by_key][:1]
    if not train and S.REWARD_MEAN in series:
        train = [(str(series[S.REWARD_MEAN].attrs.get("metric_name", S.REWARD_MEAN)), S.REWARD_MEAN)]
    return train + [(k, v) for k, v in sorted(by_key.items()) if VALIDATION_KEY.match(k)]


def _logged(ds: xr.Dataset, var: str) -> bool:
    return var in ds and bool(ds[var].notnull().any())


def _runs_with(series: xr.Dataset, var: str) -> list[str]:
    steps = series[var].notnull().sum(S.STEP).to_numpy()
    return [str(r) for r, k in zip(series[S.RUN].to_numpy(), steps, strict=True) if k >= MIN_STEPS]


def _series_specs(stem: str, path: Path, series: xr.Dataset) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    specs: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    data = {"series": str(path)}
    rewards = reward_keys(series)
    if not rewards:
        logged = sorted(str(series[v].attrs.get("metric_name", v)) for v in series.data_vars)
        shown = ", ".join(logged[:12]) + (f" and {len(logged) - 12} more" if len(logged) > 12 else "")
        skipped.append(
            (
                f"{stem}-plateau",
                f"no reward recognised (looked for {', '.join(REWARD_KEYS)} and validation rewards) among {shown}; "
                'name one in a plateau spec ([data] series, [model] response = the key as logged, by = "run")',
            )
        )
        return specs, skipped
    for i, (key, var) in enumerate(rewards):
        name = f"{stem}-plateau" if i == 0 else f"{stem}-plateau-{safe_name(key)}"
        runs = _runs_with(series, var)
        if not runs:
            skipped.append((name, f"no run logged {key!r} at {MIN_STEPS} or more steps"))
            continue
        specs.append(
            {
                "name": name,
                "kind": "plateau",
                "data": data,
                "model": {"response": key, "by": "run"},
                "figures": ["curves"],
                "about": key,
            }
        )
        if i == 0 and len(runs) >= 2:
            specs.append(
                {
                    "name": f"{stem}-ceilings",
                    "kind": "compare",
                    "data": data,
                    "model": {"metric": key, "arms": runs},
                    "figures": ["saturation"],
                }
            )
        elif i == 0:
            skipped.append((f"{stem}-ceilings", "one run: ceilings are compared between two or more runs"))
    missing = [k for k in (S.PASS_AT_K, S.POLICY_ENTROPY) if not _logged(series, k)]
    if missing:
        skipped.append((f"{stem}-reliability", f"not logged: {', '.join(missing)} (both are needed)"))
    else:
        specs.append(
            {
                "name": f"{stem}-reliability",
                "kind": "series",
                "data": data,
                "model": {"pass1": S.REWARD_MEAN, "passk": S.PASS_AT_K, "entropy": S.POLICY_ENTROPY},
                "figures": ["pass_at_k", "entropy"],
            }
        )
    return specs, skipped


def _trial_specs(stem: str, path: Path, ds: xr.Dataset) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    specs: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    data = {"trials": str(path)}
    levels = [str(v) for v in ds[S.LEVEL].to_numpy()] if S.LEVEL in ds.coords else []
    arms = sorted(map(str, np.unique(ds[S.ARM].to_numpy()))) if S.ARM in ds.coords else []
    runs = sorted(map(str, np.unique(ds[S.RUN].to_numpy()))) if S.RUN in ds.coords else []
    f1 = _logged(ds, S.F1)
    model: dict[str, Any] = {"response": S.F1 if f1 else S.REWARD}
    if f1 and levels:
        model["levels"] = levels
    if len(runs) > 1 and len(arms) < 2:
        model["by"] = "run"
    specs.append(
        {
            "name": f"{stem}-plateau",
            "kind": "plateau",
            "data": data,
            "about": "graded F1" if f1 else S.REWARD,
            "model": model,
            "figures": ["curves"] if "by" in model else ["curves", "slopes", "plateaued_by"],
        }
    )
    if len(arms) >= 2:
        specs.append(
            {"name": f"{stem}-ceilings", "kind": "compare", "data": data, "model": {}, "figures": ["saturation"]}
        )
        specs.append(
            {
                "name": f"{stem}-transfer",
                "kind": "transfer",
                "data": data,
                "model": {"reference": arms[0], "arms": arms},
                "figures": ["transfer"],
            }
        )
    else:
        skipped.append((f"{stem}-arms", "the trials hold no arms to compare (an 'arm' column with two or more)"))
    absent = [v for v in CARDINALITY if not _logged(ds, v)]
    if absent or not levels:
        skipped.append((f"{stem}-cardinality", f"not in the trials: {', '.join(absent) or 'levels'}"))
    else:
        specs.append(
            {"name": f"{stem}-cardinality", "kind": "diagnose", "data": data, "model": {}, "figures": ["cardinality"]}
        )
    return specs, skipped


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string: JSON's escapes are TOML's


def spec_text(spec: dict[str, Any], source: Path) -> str:
    """The TOML of one planned spec (what :func:`saturation.spec.load_spec` reads)."""
    title, question = GENERIC[spec["kind"]]
    about = spec.get("about")
    lines = [
        f"# written by saturation report from {json.dumps(str(source))}; edit and re-run: saturation report <this dir>",
        "[analysis]",
        f"kind = {_toml_value(spec['kind'])}",
        f"title = {_toml_value(f'{title}' + (f' of {about}' if about else '') + f' ({source.name})')}",
        f"question = {_toml_value(question)}",
        "",
        "[data]",
        *(f"{k} = {_toml_value(v)}" for k, v in spec["data"].items()),
        "",
        "[model]",
        *(f"{k} = {_toml_value(v)}" for k, v in spec["model"].items()),
        "",
        "[sampler]",
        "seed = 0",
        "",
        "[figures]",
        f"include = {_toml_value(spec['figures'])}",
    ]
    return "\n".join(lines) + "\n"


def plan_report(paths: Sequence[str | Path], out: str | Path) -> Plan:
    """Read each data path once, choose the analyses its contents support and write their
    specs to ``<out>/specs/<name>.toml``; returns the :class:`Plan`.

    An input that cannot be read at all is an error (ValueError naming it): there would be
    nothing to report on."""
    chosen: list[tuple[dict[str, Any], Path]] = []
    plan = Plan()
    stems: dict[str, int] = {}
    for raw in paths:
        path = Path(raw).resolve()
        stem = safe_name(path.stem if path.is_file() else path.name) or "data"
        stems[stem] = stems.get(stem, 0) + 1
        if stems[stem] > 1:
            stem = f"{stem}-{stems[stem]}"
        kind = input_kind(path)
        ds = load_inputs([path], default="", kind=kind)
        if kind == "trials":
            ds = select_phase(ds, None)
            specs, skipped = _trial_specs(stem, path, ds)
        else:
            specs, skipped = _series_specs(stem, path, ds)
        chosen += [(s, path) for s in specs]
        plan.skipped += [{"task": name, "status": "skipped", "error": why} for name, why in skipped]
    chosen.sort(key=lambda item: ORDER.index(item[0]["kind"]))
    spec_dir = Path(out) / SPEC_DIR
    spec_dir.mkdir(parents=True, exist_ok=True)
    for i, (spec, source) in enumerate(chosen, 1):
        target = spec_dir / f"{i:02d}-{spec['name']}.toml"
        write_atomic(target, spec_text(spec, source).encode())
        plan.specs.append(target)
    return plan
