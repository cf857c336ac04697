"""Settings out of range are refused in one place, before any data are read (issue 40)."""

from __future__ import annotations

import math

import pytest

from saturation.cli import main
from saturation.limits import MAX_TOTAL_DRAWS, rope_problems, sampler_problems


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"draws": 1_000_000, "chains": 4}, "exceeds 100,000"),
        ({"chains": 1}, "chains must be"),
        ({"seed": -1}, "seed must be"),
        ({"target_accept": math.nan}, "target_accept must"),
        ({"target_accept": 1.0}, "target_accept must"),
        ({"draws": 1e12}, "draws must be a whole number"),
        ({"tune": -3}, "tune must be"),
    ],
)
def test_sampler_settings_out_of_range_are_named(settings, needle):
    (problem,) = sampler_problems(**settings)
    assert needle in problem


def test_sampler_defaults_and_the_bound_itself_pass():
    assert sampler_problems(draws=1000, tune=1000, chains=4, target_accept=0.95, seed=0) == []
    assert sampler_problems(draws=MAX_TOTAL_DRAWS // 4, chains=4) == []


def test_the_memory_bound_prints_an_estimate():
    (problem,) = sampler_problems(draws=1_000_000, chains=4)
    assert "GiB" in problem and "11.9" in problem


@pytest.mark.parametrize(
    ("rope", "relative", "top", "needle"),
    [
        (5.0, None, 1.0, "at least half the metric's range"),
        (0.5, None, 1.0, "at least half"),
        (0.0, None, 1.0, "rope must be a positive"),
        (0.01, 1.5, 1.0, "rope_relative must lie"),
        (0.01, None, -1.0, "metric_max must be"),
    ],
)
def test_rope_out_of_range(rope, relative, top, needle):
    assert any(needle in p for p in rope_problems(rope, relative, top))


def test_a_wide_rope_is_fine_on_a_wide_metric():
    assert rope_problems(5.0, 0.2, 100.0) == []


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plateau", "--rope", "5"], "at least half the metric's range"),
        (["plateau", "--draws", "1000000"], "exceeds 100,000"),
        (["plateau", "--chains", "1"], "chains must be"),
        # the exact sampler's default draws (5,000 a chain) bound the chains when --draws is not given
        (["plateau", "--chains", "32"], "160,000 exceeds 100,000 (the draws are kept in memory"),
        (["plateau", "--chains", "32"], "(--draws not given: 5000 a chain)"),
        (["plateau", "--seed", "-1"], "seed must be"),
        (["transfer", "--chains", "1"], "chains must be"),
        (["compare", "x.csv", "--draws", "1000000"], "exceeds 100,000"),
    ],
)
def test_cli_refuses_before_reading_data(argv, needle, capsys, monkeypatch):
    """Exit 2 and one line, and no data loaded (the loader would fail the test)."""
    import saturation.replica as replica

    def no_load(*a, **k):
        raise AssertionError("data loaded before the settings were checked")

    monkeypatch.setattr(replica, "load_embedded", no_load)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and err.startswith("error: ")


def test_argument_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["plateau", "--no-such-option"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "--no-such-option" in err
    with pytest.raises(SystemExit) as info:
        main(["plateau", "--rope", "abc"])
    assert info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_break_outside_the_steps_is_a_usage_error(capsys):
    """Documented exit 2 (a bad option value), was 1."""
    assert main(["plateau", "--breakpoint", "500"]) == 2
    err = capsys.readouterr().err
    assert "breakpoint 500 outside the observed steps" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("sampler", "needle"),
    [
        ("draws = 1000000000000", "exceeds 100,000"),
        ("seed = -1", "seed must be"),
        ("target_accept = nan", "target_accept must"),
        ("chains = 1", "chains must be"),
    ],
)
def test_spec_settings_are_checked_by_the_same_rule(tmp_path, sampler, needle):
    from saturation.spec import SpecError, load_spec

    spec = tmp_path / "p.toml"
    spec.write_text(f'[analysis]\nkind = "plateau"\n[data]\ntrials = "embedded:swesmith"\n[sampler]\n{sampler}\n')
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert needle in str(info.value) and str(spec) in str(info.value)


def test_spec_rope_checked_by_the_config(tmp_path):
    from saturation.spec import SpecError, load_spec

    spec = tmp_path / "p.toml"
    spec.write_text('[analysis]\nkind = "plateau"\n[data]\ntrials = "embedded:swesmith"\n[model]\nrope = 5.0\n')
    with pytest.raises(SpecError, match="at least half the metric's range"):
        load_spec(spec)


@pytest.mark.parametrize(
    ("kind", "field", "value", "needle"),
    [
        ("plateau", "tau_sd", math.nan, "finite number"),
        ("plateau", "spread_sd", -1.0, "must be positive"),
        ("plateau", "min_segment", 0, "whole number of steps"),
        ("plateau", "min_segment", 2.5, "whole number of steps"),
        ("sigmoid", "asymptote_sd", math.inf, "finite number"),
        ("transfer", "rw_sd", 0.0, "must be positive"),
    ],
)
def test_priors_out_of_range_are_refused_when_built(kind, field, value, needle):
    from dataclasses import fields

    from saturation.models.plateau import PlateauPriors
    from saturation.models.sigmoid import SigmoidPriors
    from saturation.models.transfer import TransferPriors

    cls = {"plateau": PlateauPriors, "sigmoid": SigmoidPriors, "transfer": TransferPriors}[kind]
    if field not in {f.name for f in fields(cls)}:
        pytest.fail(f"{cls.__name__} has no field {field}: update this test")
    with pytest.raises(ValueError, match=needle):
        cls(**{field: value})
    cls()  # the defaults pass the same rule


def test_a_spec_prior_of_nan_is_one_line_naming_the_spec(tmp_path):
    from saturation.spec import SpecError, load_spec

    spec = tmp_path / "p.toml"
    spec.write_text('[analysis]\nkind = "plateau"\n[data]\ntrials = "embedded:swesmith"\n[priors]\ntau_sd = nan\n')
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert "prior tau_sd must be a finite number" in str(info.value) and str(spec) in str(info.value)


def test_a_nuts_change_point_fit_expected_to_take_too_long_is_refused_before_compiling(monkeypatch):
    """A binomial plateau over 250 steps x 6 rollouts ran at 1-2 draws/s (ETA 80-120 min) with
    no warning: now refused up front with the estimate and what to do instead; the sizes
    measured to finish (40 and 100 steps) pass, and the limit is the user's to raise."""
    import time

    import numpy as np

    import saturation.limits as limits
    from saturation.limits import fit_time_problem
    from saturation.models import fit_plateau
    from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau

    settings = {"chains": 4, "draws": 1000, "tune": 1000, "likelihood": "binomial"}
    assert fit_time_problem(40, 31, 1, **settings) == "" and fit_time_problem(100, 91, 1, **settings) == ""
    message = fit_time_problem(250, 241, 1, **settings)
    assert "about 52 min" in message and "SATURATION_MAX_FIT_SECONDS" in message and "Gaussian" in message
    assert fit_time_problem(100, 91, 1, **{**settings, "likelihood": "zoib"})  # its latent offsets count twice

    spec = PlateauSpec(
        levels=(LevelSpec("file", 0.3, 0.004, 0.0, 100.0),),
        n_steps=250,
        prompts_per_step=1,
        samples_per_prompt=6,
        ungraded_rate=0.0,
    )
    ds, _ = simulate_plateau(spec, seed=1)
    ds["reward"] = ("trial", (np.random.default_rng(0).random(ds.sizes["trial"]) < ds["reward"].values).astype(float))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="about 52 min here, more than the limit of 300 s"):
        fit_plateau(ds, likelihood="binomial", response="reward")
    assert time.perf_counter() - t0 < 30  # refused before the NUTS model is compiled
    monkeypatch.setattr(limits, "MAX_FIT_SECONDS", 10**6)
    assert fit_time_problem(250, 241, 1, **settings) == ""


def test_a_fit_refuses_its_settings_given_twice():
    """config= and a keyword set away from its default: the keyword would be silently ignored,
    so every fit function refuses the pair (keywords at their defaults pass)."""
    import pytest

    from saturation.limits import config_or_keywords
    from saturation.models import fit_plateau, fit_transfer
    from saturation.models.learning import ReliabilityConfig, diagnose_reliability
    from saturation.models.plateau import PlateauConfig
    from saturation.models.sigmoid import SigmoidConfig, fit_sigmoid
    from saturation.models.transfer import TransferConfig

    calls = [
        (fit_plateau, PlateauConfig(), {"rope": 0.5}),
        (fit_sigmoid, SigmoidConfig(), {"reference": "t2"}),
        (fit_transfer, TransferConfig(), {"walk": "gaussian"}),
        (diagnose_reliability, ReliabilityConfig(), {"pass1": "reward/mean"}),
    ]
    for fn, config, kw in calls:
        with pytest.raises(TypeError, match=f"{fn.__name__}: give the settings as config= or as keywords, not both"):
            fn(None, config, **kw)
    config_or_keywords(fit_plateau, PlateauConfig(), {"rope": 0.01, "rope_relative": 0.2, "noise": None})
    config_or_keywords(fit_plateau, None, {"rope": 0.5})


def test_draws_not_given_are_checked_at_the_default_and_said_so():
    """chains x draws with the draws not given: checked at the default a fit would take
    (SamplerConfig: the exact sampler's 5,000), and the message says the draws were not given."""
    from saturation.configs import SamplerConfig

    (problem,) = SamplerConfig(chains=32).problems()
    assert problem.startswith("chains x draws = 160,000 exceeds 100,000") and problem.endswith(
        "(draws not given: 5000 a chain)"
    )
    assert SamplerConfig(chains=20).problems() == []
    assert sampler_problems(chains=32) == []  # no default given: the product is not checked
    (cli,) = sampler_problems(chains=64, default_draws=2000, draws_name="--draws")
    assert cli.startswith("chains x draws = 128,000") and cli.endswith("(--draws not given: 2000 a chain)")


def _blas_probe(code: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter (the BLAS library reads its thread count once,
    when NumPy is first imported) without any BLAS thread variable unless ``env`` sets one."""
    import os
    import subprocess
    import sys

    from saturation.limits import BLAS_THREAD_VARIABLES

    clean = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES and k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], env={**clean, **(env or {})}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


POOLS = (
    "import numpy, threadpoolctl; "
    "print(sorted({p['num_threads'] for p in threadpoolctl.threadpool_info() if p['user_api'] == 'blas'}))"
)


def test_the_command_line_runs_blas_on_one_thread_before_numpy_is_imported():
    # what the console script does before any command: the variables are set while NumPy is not loaded yet
    probe = (
        "import os, sys; import saturation.cli as c; "
        "c.main = lambda: print(os.environ['OPENBLAS_NUM_THREADS'], 'numpy' in sys.modules) or 0; c.run()"
    )
    assert _blas_probe(probe) == "1 False"
    # and then NumPy's BLAS has one thread (two or more without it on a multi-core machine)
    assert _blas_probe("from saturation.limits import single_thread_blas; single_thread_blas(); " + POOLS) == "[1]"


def test_a_blas_thread_count_the_user_set_is_kept():
    code = "from saturation.limits import single_thread_blas; print(single_thread_blas()); " + POOLS
    mine = {"OPENBLAS_NUM_THREADS": "2"}
    assert _blas_probe(code, mine).splitlines() == ["True", _blas_probe(POOLS, mine)]
    # an OpenMP thread count the user set is theirs too (OpenBLAS built with OpenMP reads it)
    omp = "import os; from saturation.limits import single_thread_blas; single_thread_blas(); "
    assert _blas_probe(omp + "print(os.environ.get('OPENBLAS_NUM_THREADS'))", {"OMP_NUM_THREADS": "2"}) == "None"
    # too late once NumPy is loaded: said, not pretended
    late = "import numpy; from saturation.limits import single_thread_blas; print(single_thread_blas())"
    assert _blas_probe(late) == "False"
