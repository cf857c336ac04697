"""Declarative analysis specs (``models/*.toml``): load, validate, resolve data.

One TOML file per analysis::

    [analysis]
    kind = "plateau"              # plateau | diagnose | series | transfer
    title = "..."                 # one line
    question = "..."              # what the analysis asks

    [data]
    trials = "embedded:swesmith"  # or a path (relative to the spec file): tables or .nc
    # series = "embedded:code-contests"   (kind "series": per-step metrics CSV or .nc)
    reference = "embedded"        # optional: show the study's published figures

    [model]                       # kind-specific keys (MODEL_KEYS)
    [priors]                      # fields of PlateauPriors / TransferPriors
    [sampler]                     # draws, tune, chains, seed, sampler, target_accept
    [figures]
    include = ["curves", "slopes"]

:func:`validate_spec` collects every problem (unknown section or key, wrong type, value
outside its choices, missing or unreadable data) and raises :class:`SpecError` once.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import xarray as xr

from saturation import replica, settings
from saturation import schema as S
from saturation.aggregate import select_phase
from saturation.arms import parse_arm_properties
from saturation.configs import (
    MIN_FIT_STEPS,
    CardinalityConfig,
    ComponentsConfig,
    EntropyConfig,
    PlateauConfig,
    PlateauPriors,
    ReliabilityConfig,
    SamplerConfig,
    SeriesConfig,
    SigmoidConfig,
    TransferConfig,
    TransferPriors,
    with_overrides,
)
from saturation.inputs import load_inputs
from saturation.io import expand_paths
from saturation.limits import sampler_problems
from saturation.models.sigmoid import default_sampler as sigmoid_sampler
from saturation.models.transfer import default_sampler
from saturation.replica import EMBEDDED_SERIES, EMBEDDED_TRIALS
from saturation.runlogs import read_metrics

KINDS = ("plateau", "diagnose", "series", "transfer", "compare")
EMBEDDED = "embedded:"

_STR, _NUM, _INT, _BOOL, _STRS, _NUMS = settings.KINDS

#: the [model] keys of each kind: a config's fields where its analysis has one (their kinds
#: and choices declared once, :mod:`saturation.settings`), and the selection keys around it
MODEL_KEYS: dict[str, dict[str, str]] = {
    "plateau": {**settings.spec_keys(PlateauConfig), "run": _STR, "compare": _STRS, "by": _STR, "runs": _STRS},
    "diagnose": settings.spec_keys(CardinalityConfig),
    # the series kind's keys are its parts' fields (pass_rope is ReliabilityConfig.rope, ...)
    "series": {
        **settings.spec_keys(ReliabilityConfig),
        **settings.spec_keys(EntropyConfig),
        **settings.spec_keys(ComponentsConfig),
        **settings.spec_keys(SeriesConfig),
        "plateau_after": _NUM,
    },
    "transfer": settings.spec_keys(TransferConfig),
    "compare": settings.spec_keys(SigmoidConfig),
}
#: the [model] keys with a fixed set of values, by kind
MODEL_CHOICES: dict[str, dict[str, tuple[str, ...]]] = {
    "plateau": {
        **settings.spec_choices(PlateauConfig),
        "compare": ("hinge", "hinge-separate", "hinge-shared", "linear", "exponential"),
    },
    "transfer": settings.spec_choices(TransferConfig),
    "compare": settings.spec_choices(SigmoidConfig),
}
FIGURES: dict[str, tuple[str, ...]] = {
    "plateau": ("curves", "slopes", "plateaued_by", "ppc", "loo"),
    "diagnose": ("cardinality",),
    "series": ("pass_at_k", "entropy", "components"),
    "transfer": ("transfer",),
    "compare": ("saturation",),
}
#: the keys of the other sections with a fixed set of values
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("sampler", "sampler"): S.SAMPLERS,
    ("data", "phase"): S.PHASES,
}
SECTION_KEYS: dict[str, dict[str, str]] = {
    "analysis": {"kind": _STR, "title": _STR, "question": _STR, "name": _STR, "order": _INT},
    "data": {"trials": _STR, "series": _STR, "reference": _STR, "metrics": _STR, "phase": _STR},
    "sampler": {
        "draws": _INT,
        "tune": _INT,
        "chains": _INT,
        "seed": _INT,
        "sampler": _STR,
        "target_accept": _NUM,
        "low_rank": _BOOL,
    },
    "figures": {"include": _STRS},
}


class SpecError(ValueError):
    """Every problem of one or more specs, raised once."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{len(problems)} problem(s) in the analysis spec(s):\n  - " + "\n  - ".join(problems))


@dataclass
class Spec:
    """One validated analysis spec."""

    name: str
    path: Path
    kind: str
    title: str
    question: str
    data: dict[str, str]
    model: dict[str, Any] = field(default_factory=dict)
    priors: dict[str, Any] = field(default_factory=dict)
    sampler: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    #: ``[analysis] order``: where the section stands in a report (lower first); specs
    #: without one follow, in file-name order
    order: int | None = None

    @property
    def seed(self) -> int:
        return int(self.sampler.get("seed", 0))

    def canonical(self) -> str:
        """The spec's content as canonical JSON (the cache key's first part)."""
        return json.dumps(self.raw, sort_keys=True, default=str)


#: the [model] keys of a plateau spec that are not PlateauConfig fields: the run(s) to select
#: and ``by = "run"`` (data, not model structure), and the LOO comparison's models (a report
#: option)
PLATEAU_SELECTION = ("run", "runs", "by", "compare")


def sampler_config(spec: Spec) -> SamplerConfig:
    """The spec's [sampler] settings on top of the model's own defaults (the transfer
    model's: ``transfer.default_sampler``; the saturation curves': ``sigmoid.default_sampler(paired)``);
    the seed is the spec's own (``Spec.seed``)."""
    if spec.kind == "transfer":
        base = default_sampler(spec.model.get("task_effects", "integrated"))
    else:
        base = sigmoid_sampler(bool(spec.model.get("paired"))) if spec.kind == "compare" else SamplerConfig()
    return with_overrides(base, {k: v for k, v in spec.sampler.items() if k != "seed"})


def analysis_config(spec: Spec) -> PlateauConfig | TransferConfig | CardinalityConfig | SeriesConfig | SigmoidConfig:
    """The one typed config of the spec's analysis, built once here: every default is the
    config dataclass's own (the spec sets only what it names)."""
    m, sampler = spec.model, sampler_config(spec)
    if spec.kind == "plateau":
        keys = {k: v for k, v in m.items() if k not in PLATEAU_SELECTION}
        return PlateauConfig(**keys, priors=PlateauPriors(**spec.priors), sampler=sampler)
    if spec.kind == "transfer":
        arms = tuple(m["arms"]) if m.get("arms") else None
        return TransferConfig(**{**m, "arms": arms}, priors=TransferPriors(**spec.priors), sampler=sampler)
    if spec.kind == "compare":
        arm_attrs, match = parse_arm_properties(m.get("arm_attrs", []), m.get("match", []))
        keys = {k: v for k, v in m.items() if k not in ("arm_attrs", "match", "arms")}
        arms = tuple(m["arms"]) if m.get("arms") else None
        return SigmoidConfig(**keys, arms=arms, arm_attrs=arm_attrs, match=match, sampler=sampler)
    # the trend fits' own default draws unless the spec gives them
    draws = {"chains": sampler.chains, **({"draws": sampler.draws} if sampler.draws is not None else {})}
    if spec.kind == "diagnose":
        levels = tuple(m["levels"]) if m.get("levels") else None
        return CardinalityConfig(levels=levels, run=m.get("run"), **draws)
    runs = tuple(m["runs"]) if m.get("runs") else None
    pass1 = m.get("pass1", S.REWARD_MEAN)
    rope = {"rope": m["pass_rope"]} if "pass_rope" in m else {}
    entropy_rope = {"rope_relative": m["entropy_rope"]} if "entropy_rope" in m else {}
    after = m.get("plateau_after")
    return SeriesConfig(
        reliability=ReliabilityConfig(runs=runs, pass1=pass1, passk=m.get("passk", S.PASS_AT_K), **rope, **draws),
        entropy=EntropyConfig(
            runs=runs, entropy=m.get("entropy", S.POLICY_ENTROPY), reward=pass1, **entropy_rope, **draws
        ),
        reference_runs=tuple(m["reference_runs"]) if m.get("reference_runs") else None,
        plateau_run=m.get("plateau_run"),
        plateau=(
            PlateauConfig(response=pass1, breakpoint=float(after), sampler=sampler)
            if m.get("plateau_run") and after is not None
            else None
        ),
        components=(
            ComponentsConfig(
                components=tuple(m["components"]),
                weights=tuple(float(w) for w in m["component_weights"]) if "component_weights" in m else None,
                runs=tuple(m["components_runs"]) if m.get("components_runs") else None,
                reward=pass1,
                **({"rope": m["component_rope"]} if "component_rope" in m else {}),
                **draws,
            )
            if m.get("components")
            else None
        ),
    )


def _type_ok(value: Any, kind: str) -> bool:
    if kind == _STR:
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUM:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == _NUMS:
        return isinstance(value, list) and all(_type_ok(v, _NUM) for v in value)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _prior_keys(kind: str) -> dict[str, str]:

    cls = {"plateau": PlateauPriors, "transfer": TransferPriors}.get(kind)
    if cls is None:
        return {}
    return {f.name: (_INT if f.name == "min_segment" else _NUM) for f in fields(cls)}


def _check_section(
    where: str,
    section: str,
    table: Any,
    allowed: dict[str, str],
    problems: list[str],
    choices_of: dict[str, tuple[str, ...]] | None = None,
) -> None:
    if not isinstance(table, dict):
        problems.append(f"{where}: [{section}] must be a table")
        return
    for key, value in table.items():
        if key not in allowed:
            hint = f"; allowed: {', '.join(sorted(allowed))}" if allowed else f"; [{section}] takes no keys here"
            problems.append(f"{where}: [{section}] unknown key {key!r}{hint}")
        elif not _type_ok(value, allowed[key]):
            problems.append(f"{where}: [{section}] {key} must be a {allowed[key]}, got {value!r}")
        elif (section, key) in CHOICES or key in (choices_of or {}):
            choices = CHOICES.get((section, key)) or (choices_of or {})[key]
            bad = [v for v in (value if isinstance(value, list) else [value]) if v not in choices]
            if bad:
                problems.append(f"{where}: [{section}] {key}: {bad} not among {list(choices)}")


def data_path(value: str, spec_path: Path) -> Path | None:
    """The file or directory a data entry names (None for embedded data)."""
    if value.startswith(EMBEDDED):
        return None
    path = Path(value)
    return path if path.is_absolute() else spec_path.parent / path


def _check_data(where: str, spec_path: Path, kind: str, data: dict[str, Any], problems: list[str]) -> None:

    needed = "series" if kind == "series" or (kind in ("compare", "plateau") and "series" in data) else "trials"
    if needed not in data:
        problems.append(f"{where}: [data] {needed} is missing (a path or '{EMBEDDED}<name>')")
    embedded = {"trials": EMBEDDED_TRIALS, "series": EMBEDDED_SERIES, "metrics": EMBEDDED_SERIES}
    if "metrics" in data and kind != "compare":
        problems.append(f"{where}: [data] metrics (per-step compute for the x axis) is a compare spec's")
    for key in ("trials", "series", "metrics"):
        value = data.get(key)
        if not isinstance(value, str):
            continue
        if value.startswith(EMBEDDED):
            name = value[len(EMBEDDED) :]
            if name not in embedded[key]:
                problems.append(f"{where}: [data] {key}: no embedded data set {name!r}; have {sorted(embedded[key])}")
        else:
            path = data_path(value, spec_path)
            if path is None or not path.exists():
                problems.append(f"{where}: [data] {key}: {value!r} does not exist (resolved to {path})")
    ref = data.get("reference")
    if isinstance(ref, str) and ref != "embedded":
        path = data_path(ref, spec_path)
        if path is None or not path.exists():
            problems.append(f"{where}: [data] reference: {ref!r} does not exist (use 'embedded' or a path)")


def _check_by_run(where: str, model: dict[str, Any], problems: list[str]) -> None:
    """A plateau spec's ``by = "run"`` (one fit per run) and its ``runs`` selection."""
    if "by" in model:
        if model["by"] != "run":
            problems.append(f'{where}: [model] by must be "run" (one fit per run), got {model["by"]!r}')
        if "run" in model:
            problems.append(f'{where}: [model] by = "run" fits every run; run picks one: give one of them')
    elif "runs" in model:
        problems.append(f'{where}: [model] runs selects the runs of by = "run"; without it, use run')


def _check_compare(where: str, model: dict[str, Any], data: dict[str, Any], problems: list[str]) -> None:
    """A compare spec's declared arm properties, confounders, horizon and back-test."""
    for key in ("arm_attrs", "match"):
        items = model.get(key, [])
        if isinstance(items, list):
            try:
                parse_arm_properties(items if key == "arm_attrs" else [], items if key == "match" else [])
            except ValueError as err:
                problems.append(f"{where}: [model] {key}: {err}")
    if isinstance(model.get("horizon"), int) and model["horizon"] < 1:
        problems.append(f"{where}: [model] horizon must be >= 1, got {model['horizon']}")
    if isinstance(model.get("backtest"), int) and model["backtest"] < MIN_FIT_STEPS:
        problems.append(f"{where}: [model] backtest must be >= {MIN_FIT_STEPS} steps, got {model['backtest']}")
    if ("series" in data) != ("metric" in model):
        problems.append(f"{where}: [data] series (per-step metrics, each run an arm) and [model] metric go together")
    if "series" in data and "trials" in data:
        problems.append(f"{where}: [data] give trials or series (with [model] metric), not both")
    if "metric" in model and model.get("paired"):
        problems.append(f"{where}: [model] metric fits logged values: paired is for trials (shared instances)")
    if model.get("x") == "compute" and "metrics" not in data and "series" not in data:
        problems.append(f'{where}: [model] x = "compute" needs [data] metrics (the per-step compute of the runs)')
    if model.get("x", "step") == "step" and ("compute" in model or "metrics" in data):
        problems.append(f'{where}: [model] compute and [data] metrics set the compute axis: add x = "compute"')


def _check_series(where: str, model: dict[str, Any], problems: list[str]) -> None:
    """A series spec's reward components: weights and runs only with components, one weight each."""
    comps, weights = model.get("components"), model.get("component_weights")
    for key in ("component_weights", "components_runs", "component_rope"):
        if key in model and not comps:
            problems.append(f"{where}: [model] {key} needs components (the reward components to diagnose)")
    if isinstance(comps, list) and isinstance(weights, list) and comps and len(weights) != len(comps):
        problems.append(
            f"{where}: [model] component_weights: {len(weights)} weight(s) for {len(comps)} component(s) {comps}"
        )
    rope = model.get("component_rope")
    if isinstance(rope, int | float) and not isinstance(rope, bool) and rope <= 0:
        problems.append(f"{where}: [model] component_rope must be positive, got {rope}")


def validate_spec(raw: dict[str, Any], path: Path) -> Spec:
    """Validate one parsed spec; raise :class:`SpecError` listing every problem."""
    where = str(path)
    problems: list[str] = []
    allowed_sections = ("analysis", "data", "model", "priors", "sampler", "figures")
    for section in raw:
        if section not in allowed_sections:
            problems.append(f"{where}: unknown section [{section}]; allowed: {', '.join(allowed_sections)}")
    analysis = raw.get("analysis", {})
    kind = analysis.get("kind") if isinstance(analysis, dict) else None
    if kind not in KINDS:
        problems.append(f"{where}: [analysis] kind must be one of {list(KINDS)}, got {kind!r}")
    _check_section(where, "analysis", analysis, SECTION_KEYS["analysis"], problems)
    for section in ("data", "sampler", "figures"):
        _check_section(where, section, raw.get(section, {}), SECTION_KEYS[section], problems)
    if kind in KINDS:
        _check_section(where, "model", raw.get("model", {}), MODEL_KEYS[kind], problems, MODEL_CHOICES.get(kind))
        _check_section(where, "priors", raw.get("priors", {}), _prior_keys(kind), problems)
        include = (
            raw.get("figures", {}).get("include", list(FIGURES[kind])) if isinstance(raw.get("figures"), dict) else []
        )
        if isinstance(include, list):
            bad = [f for f in include if f not in FIGURES[kind]]
            if bad:
                problems.append(
                    f"{where}: [figures] include: {bad} not available for {kind}; available: {list(FIGURES[kind])}"
                )
        if isinstance(raw.get("data", {}), dict):
            _check_data(where, path, kind, raw.get("data", {}), problems)
    if kind == "plateau" and isinstance(raw.get("model"), dict):
        _check_by_run(where, raw["model"], problems)
    if kind == "compare" and isinstance(raw.get("model"), dict):
        data_table = raw.get("data")
        _check_compare(where, raw["model"], data_table if isinstance(data_table, dict) else {}, problems)
    if kind == "series" and isinstance(raw.get("model"), dict):
        _check_series(where, raw["model"], problems)
    sampler = raw.get("sampler", {}) if isinstance(raw.get("sampler"), dict) else {}
    # only values of the right type: a wrong type was reported above, once
    ranges: dict[str, Any] = {
        k: v
        for k, v in sampler.items()
        if k in ("draws", "tune", "chains", "target_accept", "seed")
        and isinstance(v, int | float if k == "target_accept" else int)
        and not isinstance(v, bool)
    }
    problems += [f"{where}: [sampler] {p}" for p in sampler_problems(**ranges)]
    if problems:
        raise SpecError(problems)
    assert kind is not None
    figures = raw.get("figures", {}).get("include", list(FIGURES[kind]))
    spec = Spec(
        name=str(analysis.get("name", path.stem)),
        path=path,
        kind=kind,
        title=str(analysis.get("title", path.stem)),
        question=str(analysis.get("question", "")),
        data=dict(raw.get("data", {})),
        model=dict(raw.get("model", {})),
        priors=dict(raw.get("priors", {})),
        sampler=dict(raw.get("sampler", {})),
        figures=list(figures),
        raw=raw,
        order=analysis.get("order"),
    )
    # the analysis' own config checks its ranges (the ROPE, the sampler): the same rule as the CLI's
    try:
        config = analysis_config(spec)
        check = getattr(config, "validate", None)
        if check is not None:
            check()
    except ValueError as exc:
        raise SpecError([f"{where}: {' '.join(str(exc).split())}"]) from None
    return spec


def load_spec(path: str | Path) -> Spec:
    """Read and validate one spec file (TOML).

    Parameters
    ----------
    path : str or pathlib.Path
        The spec file (``models/*.toml`` are the shipped ones).

    Returns
    -------
    Spec
        The validated spec; its analysis config is ``analysis_config(spec)``.

    Raises
    ------
    SpecError
        Listing every problem: a missing file, invalid TOML, unknown or ill-typed keys.
    """
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError([f"{path}: no such spec file"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([f"{path}: not valid TOML ({exc})"]) from None
    return validate_spec(raw, path)


def load_specs(paths: list[str | Path]) -> list[Spec]:
    """Read and validate several specs (files or directories of ``*.toml``); every problem
    of every spec is raised at once. Names must be unique."""
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.toml")) if p.is_dir() else [p])
    specs, problems = [], []
    for f in files:
        try:
            specs.append(load_spec(f))
        except SpecError as exc:
            problems.extend(exc.problems)
    names = [s.name for s in specs]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"analysis name {name!r} is used by several specs")
    if not files:
        problems.append(f"no spec files in {[str(p) for p in paths]}")
    if problems:
        raise SpecError(problems)
    # a report's sections: by [analysis] order, then as the files were given (sorted by name)
    return sorted(specs, key=lambda s: (s.order is None, s.order or 0))


def default_spec_dir() -> Path:
    """The shipped specs: the installed copy, else the repository's ``models/``."""
    installed = Path(__file__).parent / "_embedded" / "models"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[2] / "models"


def _source(spec: Spec, key: str, override: str | Path | None) -> tuple[str | None, Path]:
    """(embedded name or None, path) of the spec's ``trials``/``series`` data."""

    value = str(override) if override is not None else spec.data[key]
    if value.startswith(EMBEDDED):
        name = value[len(EMBEDDED) :]
        files = {**replica.EMBEDDED_TRIALS, **replica.EMBEDDED_SERIES}
        return name, replica.data_dir() / files[name]
    path = Path(value) if override is not None else data_path(value, spec.path)
    assert path is not None
    return None, path


def load_metrics(spec: Spec) -> xr.Dataset | None:
    """The spec's ``[data] metrics`` (per-step metrics of the runs: a compare spec's compute
    axis), or None when it names none."""
    if "metrics" not in spec.data:
        return None
    name, path = _source(spec, "metrics", None)
    return replica.load_embedded(name) if name is not None else read_metrics(path)


def data_hash(spec: Spec, key: str, override: str | Path | None = None) -> str:
    """Content hash of the spec's data (cheap: the data are not parsed)."""

    name, path = _source(spec, key, override)
    if name is not None:
        return replica.content_hash(path)
    digest = hashlib.sha256()
    if path.is_file():
        files = [path]
    elif key == "trials":
        files = expand_paths(path)
    else:  # a run directory of per-step metrics (TRL checkpoints, mlruns, TensorBoard): every regular file
        files = sorted(f for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    for f in files:
        digest.update(str(f.relative_to(path) if f != path else f.name).encode() + b"\0")
        digest.update(f.read_bytes())
    return digest.hexdigest()


def load_data(spec: Spec, key: str, override: str | Path | None = None) -> xr.Dataset:
    """The spec's ``trials`` or ``series`` data (``override`` replaces the source); trials of
    one phase, ``[data] phase`` or the default rule (:func:`~saturation.aggregate.select_phase`)."""
    name, path = _source(spec, key, override)
    ds = load_inputs(None, default=name) if name is not None else load_inputs([path], default="", kind=key)
    if key != "trials":
        return ds
    try:
        return select_phase(ds, spec.data.get("phase"))
    except ValueError as err:
        raise SpecError([f"{spec.path}: [data] phase: {err}"]) from None
