"""One schema per config: a field's help, CLI option, spec key, kind and choices are declared
once (``saturation.settings.setting``) and every front end reads them from there."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from saturation import settings
from saturation.configs import (
    CardinalityConfig,
    ComponentsConfig,
    DiagnoseConfig,
    EntropyConfig,
    PlateauConfig,
    ReliabilityConfig,
    SeriesConfig,
    SigmoidConfig,
    TransferConfig,
)

CONFIGS = (
    PlateauConfig,
    TransferConfig,
    SigmoidConfig,
    ReliabilityConfig,
    EntropyConfig,
    ComponentsConfig,
    DiagnoseConfig,
    CardinalityConfig,
    SeriesConfig,
)


def _parser(cls: type) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    settings.add_options(parser, cls)
    return parser


@pytest.mark.parametrize("cls", CONFIGS)
def test_every_option_is_a_declared_field_with_its_help_and_default(cls):
    parser = _parser(cls)
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    declared = {
        (f.metadata["flag"] or f.name).lstrip("-").replace("-", "_"): f
        for f in dataclasses.fields(cls)
        if "help" in f.metadata and f.metadata["flag"] is not None
    }
    assert set(actions) == set(declared)
    for name, action in actions.items():
        f = declared[name]
        assert action.help.startswith(settings.cli_text(f.metadata["help"])), name
        assert action.default is None  # given() tells an option set from one left at its default
        if f.metadata["choices"]:
            assert tuple(action.choices) == f.metadata["choices"]


@pytest.mark.parametrize("cls", CONFIGS)
def test_the_docstring_documents_every_declared_field(cls):
    pytest.importorskip("numpydoc")
    from numpydoc.validate import validate

    doc = cls.__doc__
    for f in dataclasses.fields(cls):
        assert f"\n    {f.name} : " in doc, f.name
    errors = [code for code, _ in validate(f"saturation.configs.{cls.__name__}")["errors"]]
    assert not {"PR01", "PR02", "PR10"} & set(errors)


def test_the_command_line_and_a_spec_give_the_same_config(tmp_path):
    """The same settings through the CLI's options and through a spec's [model] keys build
    equal configs (the sampler aside, which each front end sets from its own defaults)."""
    from saturation.cli import _plateau_config, build_parser
    from saturation.spec import analysis_config, load_spec

    argv = ["plateau", "--levels", "file,module", "--rope", "0.02", "--rope-relative", "0", "--noise", "ar1"]
    argv += ["--pooled", "--breakpoint", "40", "--metric-max", "100"]
    cli = _plateau_config(build_parser().parse_args(argv))
    spec = tmp_path / "p.toml"
    spec.write_text(
        '[analysis]\nkind = "plateau"\ntitle = "t"\n[data]\ntrials = "embedded:swesmith"\n'
        '[model]\nlevels = ["file", "module"]\nrope = 0.02\nrope_relative = 0\nnoise = "ar1"\nshared = true\n'
        "breakpoint = 40\nmetric_max = 100\n"
    )
    from_spec = analysis_config(load_spec(spec))
    assert dataclasses.replace(cli, sampler=from_spec.sampler) == from_spec
    assert cli.rope_relative is None and cli.levels == ("file", "module") and cli.shared


def test_spec_keys_and_choices_follow_the_config_of_each_kind():
    from saturation.spec import MODEL_CHOICES, MODEL_KEYS

    assert set(settings.spec_keys(SigmoidConfig)) <= set(MODEL_KEYS["compare"])
    assert "priors" not in MODEL_KEYS["plateau"] and "sampler" not in MODEL_KEYS["compare"]
    # the same key, a different set of values per analysis
    assert MODEL_CHOICES["plateau"]["likelihood"] == ("gaussian", "binomial", "zoib")
    assert MODEL_CHOICES["compare"]["likelihood"] == ("auto", "binomial", "gaussian")
    assert MODEL_KEYS["compare"]["arm_attrs"] == settings.STRS


def test_a_list_option_refuses_empty_and_repeated_names():
    parser = _parser(PlateauConfig)
    assert parser.parse_args(["--levels", "file, module"]).levels == ("file", "module")
    with pytest.raises(settings.OptionValueError, match=r"--levels file,,entity: empty name"):
        parser.parse_args(["--levels", "file,,entity"])
    with pytest.raises(settings.OptionValueError, match="--levels: file given more than once"):
        parser.parse_args(["--levels", "file,file"])


def test_a_range_declared_with_the_field_is_checked_under_its_spec_name():
    assert settings.problems(ReliabilityConfig(rope=0.0)) == ["pass_rope must be a positive number, got 0.0"]
    assert settings.problems(DiagnoseConfig(success_threshold=float("inf"))) == [
        "success_threshold must be a finite number, got inf"
    ]
    with pytest.raises(ValueError, match="component_weights must be a finite number"):
        ComponentsConfig(components=("a", "b"), weights=(0.5, float("nan")))
    assert settings.problems(EntropyConfig()) == []


def test_given_returns_only_the_options_set():
    parser = _parser(SigmoidConfig)
    args = parser.parse_args(["--horizon", "30", "--families"])
    assert settings.given(SigmoidConfig, args) == {"horizon": 30, "families": True}
    config = SigmoidConfig(**settings.given(SigmoidConfig, args))
    assert config.delta == SigmoidConfig().delta and config.backtest is None


def test_a_list_of_numbers_may_repeat_and_the_docstring_names_each_fields_type():
    """Equal weights (0.5,0.5) are numbers, not names given twice; a field's documented type
    is its own (a nested config, a dict), not its spec kind."""
    parser = _parser(ComponentsConfig)
    assert parser.parse_args(["--components", "a,b", "--weights", "0.5,0.5"]).weights == (0.5, 0.5)
    with pytest.raises(settings.OptionValueError, match="not a comma-separated list of numbers"):
        parser.parse_args(["--weights", "0.5,x"])
    assert "\n    plateau : PlateauConfig or None\n" in SeriesConfig.__doc__
    assert "\n    arm_attrs : dict\n" in SigmoidConfig.__doc__
    assert "\n    levels : tuple of str or None\n" in PlateauConfig.__doc__
