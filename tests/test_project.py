"""Project wiring: the README commands and CI stay in sync."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", setup)


def test_readme_has_exactly_two_setup_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    assert "saturation describe" in commands[0] or "saturation report" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = _readme_commands()[1]
    assert any(line == command or line.startswith(command + " || exit 1") for line in ci.splitlines())


#: ARCHITECTURE.md's layers: a module may import only from strictly lower layers
LAYERS = [
    [
        "schema",
        "curves",
        "summary",
        "progress",
        "cluster",
        "mathfn",
        "streams",
        "models.marginal",
        "models.ahead",
        "arms",
        "limits",
        "_lazy",
        "files",
        "settings",
    ],
    [
        "aggregate",
        "configs",
        "frequentist",
        "localization",
        "validate",
        "models._exact",
        "models.persist",
        "models.kernel_abi",
        "models.marginal_op",
    ],
    [
        "io",
        "trajectory",
        "models.sampling",
        "models.plateau_data",
        "models.verdicts",
        "models.sigmoid_kernel",
        "models.transfer_kernel",
        "models.pass_at_k_kernel",
    ],
    ["series", "tables", "report_html", "plots", "models.plateau_model"],
    ["simulate", "skyrl", "models.plateau", "models.transfer"],
    ["wandb_history", "models", "models.learning", "models.runs", "models.families"],
    ["replica", "ingest", "models.sigmoid", "runlogs"],
    ["inputs"],
    ["calibrate", "spec", "scenarios"],
    ["plan"],
    ["report"],
    ["cli"],
    [""],  # "": the package itself (saturation/__init__.py): its public API names every layer's objects
]


def test_imports_follow_the_layers():
    """Every ``from saturation... import`` (top-level or deferred) points down the layers of
    ARCHITECTURE.md, and no module imports another module's private (``_``) name."""
    import ast

    root = Path(__file__).resolve().parents[1] / "src" / "saturation"
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    seen, problems = set(), []
    for f in sorted(root.rglob("*.py")):
        parts = f.relative_to(root).with_suffix("").parts
        mod = ".".join(p for p in parts if p != "__init__")
        seen.add(mod)
        assert mod in layer, f"{mod} is in no layer of ARCHITECTURE.md / LAYERS"
        for node in ast.walk(ast.parse(f.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("saturation")):
                continue
            target = node.module.removeprefix("saturation").removeprefix(".")
            # "from saturation import io" / "from saturation.models import sigmoid_kernel": the modules
            package = root.joinpath(*target.split(".")) if target else root
            submodules = [a.name for a in node.names if (package / f"{a.name}.py").exists()]
            prefix = f"{target}." if target else ""
            targets = [prefix + name for name in submodules] if submodules or not target else [target]
            for t in targets:
                if t != mod and t in layer and layer[t] >= layer[mod]:
                    problems.append(f"{mod} (layer {layer[mod]}) imports {t} (layer {layer[t]})")
            if target and target != "models" and target.split(".")[0] != mod.split(".")[0]:
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
                if private:
                    problems.append(f"{mod} imports private {private} from {target}")
    assert not problems, problems
    assert seen == set(layer), sorted(set(layer) - seen)


def test_public_api_docstrings_are_complete():
    """numpydoc validation of the whole public API (``saturation.__all__`` and
    ``saturation.models.__all__``): every parameter documented (PR01, PR02), no unknown
    parameter documented (PR10), a Returns section where something is returned (RT01), for
    every public object without exception."""
    pytest.importorskip("numpydoc")  # in the test extra
    from numpydoc.validate import validate

    import saturation
    import saturation.models as models

    objects = [getattr(saturation, n) for n in saturation.__all__ if n not in ("HDI_PROB", "__version__")]
    objects += [getattr(models, n) for n in models.__all__]
    problems = {}
    for obj in objects:
        name = f"{obj.__module__}.{obj.__qualname__}"
        errors = [msg for code, msg in validate(name)["errors"] if code in ("PR01", "PR02", "PR10", "RT01")]
        if errors:
            problems[name] = errors
    assert not problems, problems


def test_public_api_is_lazy_and_complete():
    """``dir(saturation)`` is the public API (no ``sys``, ``Any``, ``warnings``), every name
    resolves, each to the object its module owns, and none is imported before it is used."""
    import importlib

    import saturation

    assert dir(saturation) == sorted(saturation.__all__)
    assert not {"Any", "sys", "warnings", "types", "TYPE_CHECKING"} & set(dir(saturation))
    for name in saturation.__all__:
        if name in ("HDI_PROB", "__version__"):
            continue
        obj = getattr(saturation, name)
        module = importlib.import_module(saturation._LAZY[name])
        assert obj is getattr(module, name), name
    assert saturation.aggregate is importlib.import_module("saturation.aggregate").aggregate  # the function
    assert saturation.calibrate is importlib.import_module("saturation.calibrate").calibrate


def test_plateau_defaults_have_one_home():
    """fit_plateau's keyword defaults are PlateauConfig's field defaults, and the CLI's
    plateau options default to the same values (the spec passes only what it sets)."""
    import dataclasses
    import inspect

    from saturation.cli import build_parser
    from saturation.models.plateau import PlateauConfig, fit_plateau

    fields = {f.name: f.default for f in dataclasses.fields(PlateauConfig) if f.default is not dataclasses.MISSING}
    params = inspect.signature(fit_plateau).parameters
    shared = set(fields) & set(params) - {"continuity"}  # continuity: None = by the break, resolved in the config
    assert shared >= {"response", "breakpoint", "shared", "likelihood", "rope", "rope_relative", "metric_max"}
    assert {k: params[k].default for k in shared} == {k: fields[k] for k in shared}
    # the command's options are the config's fields, unset unless given: its config is the default one
    from saturation.cli import _plateau_config

    config = _plateau_config(build_parser().parse_args(["plateau"]))
    assert dataclasses.replace(config, sampler=PlateauConfig().sampler) == PlateauConfig()


def test_api_page_lists_every_public_object():
    """docs/api.md documents every name of ``saturation.__all__`` (mkdocstrings renders it)."""
    import re

    import saturation

    page = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    documented = set(re.findall(r"^::: ([\w.]+)$", page, re.M))
    missing = [f"{saturation._LAZY[n]}.{n}" for n in saturation.__all__ if n in saturation._LAZY]
    assert not [m for m in missing if m not in documented]
