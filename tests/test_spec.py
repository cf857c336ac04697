"""Analysis specs: the shipped ones validate; every kind of mistake is reported at once."""

from __future__ import annotations

import pytest

from saturation.spec import FIGURES, KINDS, SpecError, default_spec_dir, load_spec, load_specs

GOOD = """
[analysis]
kind = "plateau"
title = "t"
[data]
trials = "embedded:swesmith"
[model]
levels = ["file"]
rope = 0.02
[sampler]
draws = 200
"""


def test_shipped_specs_validate():
    specs = load_specs([default_spec_dir()])
    assert {s.name for s in specs} == {
        "swesmith-plateau",
        "swesmith-split46",
        "learning-diagnostics",
        "swegym-transfer",
        "swegym-lr-arm",
        "code-contests",
        "r2egym-tools",
        "r2egym-tools-compute",
        "g1-pool-arms",
    }
    assert {s.kind for s in specs} == set(KINDS)
    for s in specs:
        assert set(s.figures) <= set(FIGURES[s.kind]) and s.title and s.question


def test_good_spec_and_defaults(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text(GOOD)
    spec = load_spec(path)
    assert spec.name == "a" and spec.kind == "plateau" and spec.seed == 0
    assert spec.figures == list(FIGURES["plateau"])
    assert spec.model == {"levels": ["file"], "rope": 0.02}


def test_every_problem_is_reported_once(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("""
[analysis]
kind = "plateau"
colour = "red"
[data]
trials = "missing/trials.csv"
reference = "nowhere.json"
[model]
rope = "wide"
likelihood = "poisson"
arms = ["a"]
[priors]
tau_sd = 0.1
bogus = 1
[sampler]
draws = 0
chains = 2.5
[figures]
include = ["curves", "transfer"]
[extra]
x = 1
""")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    for needle in (
        "unknown section [extra]",
        "[analysis] unknown key 'colour'",
        "missing/trials.csv' does not exist",
        "reference: 'nowhere.json' does not exist",
        "[model] rope must be a number",
        "['poisson'] not among",
        "[model] unknown key 'arms'",
        "[priors] unknown key 'bogus'",
        "[sampler] draws must be a whole number >= 1",
        "[sampler] chains must be a integer",
        "['transfer'] not available for plateau",
    ):
        assert needle in text, needle
    assert str(path) in text and len(info.value.problems) == 11


def test_missing_kind_data_and_duplicate_names(tmp_path):
    (tmp_path / "a.toml").write_text('[analysis]\nkind = "series"\n')
    (tmp_path / "b.toml").write_text("not = [toml")
    (tmp_path / "c.toml").write_text(GOOD.replace('title = "t"', 'name = "same"'))
    (tmp_path / "d.toml").write_text(GOOD.replace('title = "t"', 'name = "same"'))
    with pytest.raises(SpecError) as info:
        load_specs([tmp_path])
    text = str(info.value)
    assert "[data] series is missing" in text and "not valid TOML" in text
    assert "analysis name 'same' is used by several specs" in text
    with pytest.raises(SpecError, match="kind must be one of"):
        (tmp_path / "e.toml").write_text("[analysis]\n")
        load_spec(tmp_path / "e.toml")
    with pytest.raises(SpecError, match="no embedded data set 'nope'"):
        (tmp_path / "f.toml").write_text(GOOD.replace("embedded:swesmith", "embedded:nope"))
        load_spec(tmp_path / "f.toml")


def test_transfer_walk_is_checked(tmp_path):
    text = (default_spec_dir() / "swegym-transfer.toml").read_text()
    path = tmp_path / "t.toml"
    path.write_text(text.replace("knot_every = 4.0", 'knot_every = 4.0\nwalk = "non-centred"'))
    assert load_spec(path).model["walk"] == "non-centred"
    path.write_text(text.replace("knot_every = 4.0", 'knot_every = 4.0\nwalk = "sideways"'))
    with pytest.raises(SpecError, match="sideways"):
        load_spec(path)


def test_every_shipped_spec_builds_its_one_typed_config():
    """The spec -> config step resolves every default once, in the config dataclasses: a
    known break gives the split model, the transfer spec gets the transfer model's sampler
    defaults under its [sampler] table, a series spec its reliability, entropy and
    known-break plateau configs."""
    from saturation.models.learning import CardinalityConfig
    from saturation.models.plateau import PlateauConfig
    from saturation.models.transfer import TransferConfig, default_sampler
    from saturation.spec import SeriesConfig, analysis_config, default_spec_dir, load_spec

    specs = {p.stem: load_spec(p) for p in sorted(default_spec_dir().glob("*.toml"))}
    configs = {name: analysis_config(spec) for name, spec in specs.items()}
    unknown = configs["swesmith-plateau"]
    assert isinstance(unknown, PlateauConfig)
    assert (unknown.breakpoint, unknown.continuity, unknown.levels) == (None, "hinge", ("file", "module", "entity"))
    split = configs["swesmith-split46"]
    assert isinstance(split, PlateauConfig)
    assert (split.breakpoint, split.continuity, split.shared) == (46, "jump", False)
    transfer = configs["swegym-transfer"]
    assert isinstance(transfer, TransferConfig) and transfer.task_effects == "integrated"
    assert transfer.sampler == default_sampler("integrated")  # the spec sets only the seed
    cardinality = configs["learning-diagnostics"]
    assert isinstance(cardinality, CardinalityConfig) and cardinality.levels == ("file", "module", "entity")
    series = configs["code-contests"]
    assert isinstance(series, SeriesConfig)
    assert series.reliability.runs == series.entropy.runs == ("code-contests-base", "code-contests-g1")
    assert (series.reliability.rope, series.entropy.rope_relative) == (0.05, 0.05)
    assert series.plateau is not None and series.plateau.breakpoint == 15.0 and series.plateau.continuity == "jump"
    assert series.plateau_run == "code-contests-base" and series.plateau.response == "reward_mean"
    comps = series.components
    assert comps is not None and comps.components == ("environment/pass_ratio", "environment/tag_f1")
    assert (comps.weights, comps.runs, comps.rope) == ((0.7, 0.3), ("code-contests-algo",), 0.05)
    from saturation.models.sigmoid import DEFAULT_SAMPLER, SigmoidConfig

    tools = configs["r2egym-tools"]
    assert isinstance(tools, SigmoidConfig) and tools.reference == "t2yarn" and tools.sampler == DEFAULT_SAMPLER
    assert tools.arm_attrs == {"t2": {"context": "32768"}, "t2yarn": {"context": "81920"}, "t2ns": {"context": "81920"}}
    assert tools.match == {"context": "81920"} and (tools.horizon, tools.delta) == (20, 0.01)
    assert tools.x == "step"
    pool = configs["g1-pool-arms"]
    assert isinstance(pool, SigmoidConfig) and (pool.metric, pool.reference) == ("reward/avg_raw_reward", "raw")
    assert specs["g1-pool-arms"].model["families"] is True  # cheap on Gaussian logged values
    on_compute = configs["r2egym-tools-compute"]
    assert isinstance(on_compute, SigmoidConfig) and (on_compute.x, on_compute.compute) == ("compute", "timing/step")


def test_compare_spec_problems_are_listed(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("""
[analysis]
kind = "compare"
[data]
trials = "embedded:r2egym"
[model]
arm_attrs = ["t2=context"]
match = ["context="]
horizon = 0
backtest = 3
""")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    needles = (
        "arm_attrs: t2=context: expected ARM:KEY=VALUE",
        "match: context=: expected KEY",
        "horizon must be >= 1",
        "backtest must be >= 5",
    )
    for needle in needles:
        assert needle in text, text


def test_compare_spec_compute_axis_problems_are_listed(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("""
[analysis]
kind = "compare"
[data]
trials = "embedded:r2egym"
[model]
x = "compute"
""")
    with pytest.raises(SpecError, match=r'x = "compute" needs \[data\] metrics'):
        load_spec(path)
    path.write_text("""
[analysis]
kind = "compare"
[data]
trials = "embedded:r2egym"
metrics = "embedded:nope"
[model]
compute = "timing/step"
x = "tokens"
""")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    for needle in ("metrics: no embedded data set 'nope'", "x: ['tokens'] not among ['step', 'compute']"):
        assert needle in text, text
    path.write_text("""
[analysis]
kind = "plateau"
[data]
trials = "embedded:swesmith"
metrics = "embedded:r2egym-compute"
""")
    with pytest.raises(SpecError, match=r"metrics .* is a compare spec's"):
        load_spec(path)


def test_compare_spec_on_a_logged_metric(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("""
[analysis]
kind = "compare"
[data]
series = "embedded:g1-pool-arms"
[model]
paired = true
""")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    assert "[data] series (per-step metrics, each run an arm) and [model] metric go together" in text, text
    assert "trials is missing" not in text, text
    path.write_text("""
[analysis]
kind = "compare"
[data]
series = "embedded:g1-pool-arms"
trials = "embedded:r2egym"
[model]
metric = "reward/avg_raw_reward"
families = true
""")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    assert "give trials or series" in text and "families" not in text, text


def test_series_spec_component_problems_are_listed(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("""
[analysis]
kind = "series"
[data]
series = "embedded:code-contests"
[model]
components = ["environment/pass_ratio", "environment/tag_f1"]
component_weights = [0.7]
component_rope = -1
""")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    for needle in ("component_weights: 1 weight(s) for 2 component(s)", "component_rope must be positive"):
        assert needle in text, text
    path.write_text("""
[analysis]
kind = "series"
[data]
series = "embedded:code-contests"
[model]
component_weights = [0.7, "x"]
""")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    assert "component_weights needs components" in text and "list of numbers" in text, text


def test_several_ingested_runs_load_as_one_trial_dataset(tmp_path):
    """``saturation plateau a.nc b.nc --by run``: the runs' trial Datasets concatenated, the
    accounting summed; the same run in two files is an error naming both."""
    import numpy as np
    import pytest

    from saturation.inputs import load_inputs
    from saturation.io import write_trials
    from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau

    paths = []
    for name in ("run-a", "run-b"):
        spec = PlateauSpec(levels=(LevelSpec("file", 0.6, 0.01, 0.0, 8.0),), n_steps=16, prompts_per_step=4, run=name)
        paths.append(write_trials(simulate_plateau(spec, seed=1)[0], tmp_path / f"{name}.nc"))
    ds = load_inputs([str(p) for p in paths], default="")
    assert sorted(np.unique(ds["run"].to_numpy())) == ["run-a", "run-b"]
    assert ds.attrs["rows_kept"] == ds.sizes["trial"] == 2 * 16 * 4 * 8
    with pytest.raises(ValueError, match="run 'run-a' is also in"):
        load_inputs([str(paths[0]), str(paths[0])], default="")


def test_data_phase_is_validated_and_applied(tmp_path):
    """``[data] phase``: a value outside train/eval/eval_only is a spec problem; a phase the
    data lack stops the load with the spec's path; the phase the data hold is kept."""
    from saturation.spec import load_data

    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace('trials = "embedded:swesmith"', 'trials = "embedded:swesmith"\nphase = "test"'))
    with pytest.raises(SpecError, match="phase"):
        load_spec(bad)
    absent = tmp_path / "absent.toml"
    absent.write_text(GOOD.replace('trials = "embedded:swesmith"', 'trials = "embedded:swesmith"\nphase = "eval"'))
    with pytest.raises(SpecError, match=r"absent.toml: \[data\] phase: phase 'eval' is not in the trials"):
        load_data(load_spec(absent), "trials")
    good = tmp_path / "good.toml"
    good.write_text(GOOD.replace('trials = "embedded:swesmith"', 'trials = "embedded:swesmith"\nphase = "train"'))
    assert load_data(load_spec(good), "trials").attrs["phase"] == "train"


def test_sections_follow_analysis_order_then_file_names(tmp_path):
    """The study's headline question comes first (it was section 8 of 9, alphabetical):
    ``[analysis] order`` places a section; specs without one follow in file-name order."""
    assert [s.name for s in load_specs([default_spec_dir()])][:2] == ["swesmith-plateau", "swesmith-split46"]
    body = '[data]\ntrials = "embedded:swesmith"\n'
    (tmp_path / "a.toml").write_text('[analysis]\nkind = "plateau"\n' + body)
    (tmp_path / "b.toml").write_text('[analysis]\nkind = "plateau"\norder = 2\n' + body)
    (tmp_path / "c.toml").write_text('[analysis]\nkind = "plateau"\norder = 1\n' + body)
    (tmp_path / "d.toml").write_text('[analysis]\nkind = "plateau"\n' + body)
    assert [s.name for s in load_specs([tmp_path])] == ["c", "b", "a", "d"]
    (tmp_path / "e.toml").write_text('[analysis]\nkind = "plateau"\norder = "first"\n' + body)
    with pytest.raises(SpecError, match="order"):
        load_specs([tmp_path])
