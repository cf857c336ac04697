"""Transfer model: data accounting, recovery of known curves and crossover, no-crossover null."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from saturation import curves
from saturation import schema as S
from saturation.io import trials_to_frame
from saturation.models import fit_transfer, transfer_data, transfer_frame
from saturation.models.transfer import (
    LEAD_PROB,
    SAMPLED_SAMPLER,
    TransferConfig,
    knot_basis,
    resolve_walk,
)
from saturation.simulate import ArmSpec, TransferSpec, simulate_transfer

#: the sampled form, the cross-check: the crossing scenario's R-hat sat at 1.010 with 1000 + 1000
LONG_SAMPLED = replace(SAMPLED_SAMPLER, draws=1500, tune=1500)


def _spec(arms, n_steps=24, prompts=48, samples=4):
    per_arm = n_steps * prompts * samples
    return TransferSpec(
        arms=tuple(ArmSpec(name, per_arm, u, g) for name, u, g in arms),
        prompts_per_step=prompts,
        samples_per_prompt=samples,
        pool_size=600,
        task_sd=0.5,
        ungraded_task_sd=0.5,
        step_sd=0.03,
    )


# the crossing scenario (the recovery test's) is the ``crossing_spec`` fixture of tests/conftest.py
NO_CROSSING = _spec(
    (
        ("base", ((1, 0.40), (24, 0.35)), ((1, 0.40), (24, 0.50))),
        ("s85", ((1, 0.35), (24, 0.30)), ((1, 0.55), (24, 0.65))),
    )
)


def _inside(e, value):
    return e["hdi"][0] <= value <= e["hdi"][1]


def test_transfer_data_accounts_for_every_trial(crossing_spec):
    ds, _ = simulate_transfer(crossing_spec, seed=1)
    data = transfer_data(ds)
    assert data.n.sum() == ds.sizes[S.TRIAL]
    assert data.n_graded.sum() + data.n_ungraded.sum() == ds.sizes[S.TRIAL]
    frame = trials_to_frame(ds)
    sub = frame[(frame[S.ARM] == "s85") & (frame[S.STEP] == 3)]
    emp = data.empirical.sel({S.ARM: "s85", S.STEP: 3})
    assert float(emp[S.UNGRADED_RATE]) == pytest.approx(1 - sub[S.GRADED].mean(), abs=1e-12)
    assert float(emp["graded_only"]) == pytest.approx(sub.loc[sub[S.GRADED], S.REWARD].mean(), abs=1e-12)
    assert float(emp["all_rollout"]) == pytest.approx(sub[S.REWARD].mean(), abs=1e-12)
    with pytest.raises(KeyError, match="unknown arm"):
        transfer_data(ds, arms=["base", "nope"])


def test_knot_basis_interpolates_linearly():
    steps = np.arange(1.0, 24.0)
    knots, basis = knot_basis(steps, 4.0)
    np.testing.assert_allclose(basis.sum(axis=1), 1.0)
    values = np.sin(knots)
    np.testing.assert_allclose(basis @ values, np.interp(steps, knots, values))


def test_walk_parametrisation_follows_trials_per_knot(crossing_spec):
    """auto: centred with >= 400 trials per knot and arm (the recovery scenario: 24 steps x 192
    trials, 7 knots), non-centred below (the same design with 12 trials per step)."""
    rich = transfer_data(simulate_transfer(crossing_spec, seed=1)[0])
    assert resolve_walk(rich, TransferConfig()) == "centred"
    thin_spec = _spec(
        ((name, u, g) for name, u, g in (("base", ((1, 0.4),), ((1, 0.4),)), ("s85", ((1, 0.4),), ((1, 0.5),)))),
        prompts=3,
    )
    thin = transfer_data(simulate_transfer(thin_spec, seed=1)[0])
    assert resolve_walk(thin, TransferConfig()) == "non-centred"
    assert resolve_walk(thin, TransferConfig(walk="centred")) == "centred"
    with pytest.raises(ValueError, match="walk must be one of"):
        TransferConfig(walk="sideways", knot_every=0).validate()


def test_crossover_steps_vectorised_matches_definition():
    rng = np.random.default_rng(0)
    steps = np.arange(1, 11)
    gaps = rng.normal(size=(200, 10)) + np.linspace(1, -1, 10)
    got = curves.crossover_steps(gaps, steps)
    for g, c in zip(gaps, got, strict=True):
        if g[-1] >= 0:
            assert np.isnan(c)
        else:
            j = int(np.flatnonzero(steps == c)[0])
            assert (g[j:] < 0).all() and (j == 0 or g[j - 1] >= 0)


@pytest.mark.slow
def test_recovers_initial_advantage_and_crossover(crossing_spec):
    ds, truth = simulate_transfer(crossing_spec, seed=2)
    fit = fit_transfer(ds, seed=1)
    assert fit.diagnostics["converged"], fit.diagnostics
    ini = fit.estimands["initial"]["s85"]
    t4 = truth["first_4_steps"]
    for q in ("all_rollout", "graded_only", S.UNGRADED_RATE):
        assert _inside(ini[f"delta_{q}"], t4[q]["s85"] - t4[q]["base"]), (q, ini[f"delta_{q}"])
    cross = fit.estimands["crossover_step"]["s85"]
    assert _inside(cross, truth["crossover_step"]["s85"]), cross
    assert cross["p_no_crossover"] < 0.05
    assert ini["p_positive"] > 0.9
    # population curves: truth inside the 94 % band at most steps (bands are pointwise)
    frame = transfer_frame(fit)
    tc = truth["curves"]
    inside = [
        row.hdi_low <= float(tc[row.quantity].sel({S.ARM: row.arm, S.STEP: row.step})) <= row.hdi_high
        for row in frame.itertuples()
    ]
    assert np.mean(inside) > 0.85
    # attrs and JSON shape
    attrs = fit.idata.posterior.attrs
    assert attrs["model"] == "transfer" and "config" in attrs and "data_summary" in attrs
    assert fit.config.walk == "centred" and '"walk": "centred"' in attrs["config"]
    out = fit.to_dict()
    assert out["reference"] == "base" and out["arms"] == ["s85"]
    assert {"step", "base", "s85"} <= set(out["by_step"][0])


@pytest.mark.slow
def test_no_crossover_when_the_arm_stays_ahead():
    ds, truth = simulate_transfer(NO_CROSSING, seed=3)
    assert np.isnan(truth["crossover_step"]["s85"])
    fit = fit_transfer(ds, seed=1)
    assert fit.diagnostics["converged"], fit.diagnostics
    assert fit.estimands["crossover_step"]["s85"]["p_no_crossover"] > 0.9
    last = fit.estimands["last_step"]["s85"]["delta_all_rollout"]
    assert last["hdi"][0] > 0


def _task_sd_zero(spec):
    return replace(spec, task_sd=0.0, ungraded_task_sd=0.0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_converges_and_recovers_when_the_task_sds_are_zero(crossing_spec, seed):
    """Data without any task effect (the funnel of the sampled form): the default fit converges
    (R-hat <= 1.01, ESS, no divergence) and still covers the truth."""
    ds, truth = simulate_transfer(_task_sd_zero(crossing_spec), seed=seed)
    fit = fit_transfer(ds, seed=1)
    assert fit.diagnostics["converged"], fit.diagnostics
    assert fit.diagnostics["divergences"] == 0
    t4 = truth["first_4_steps"]["all_rollout"]
    assert _inside(fit.estimands["initial"]["s85"]["delta_all_rollout"], t4["s85"] - t4["base"])
    assert _inside(fit.estimands["crossover_step"]["s85"], truth["crossover_step"]["s85"])
    # the simulator's per-step noise (sd 0.03, logit) is all a task effect can pick up here
    assert fit.estimands["task_effect_sd"]["reward"]["mean"] < 0.05


@pytest.mark.slow
def test_integrated_equals_sampled_task_effects(crossing_spec):
    """The same model two ways: task effects integrated out (exact / quadrature) and sampled one
    by one. Every reported quantity agrees to Monte Carlo error."""
    ds, _ = simulate_transfer(crossing_spec, seed=2)
    integrated = fit_transfer(ds, seed=1)
    sampled = fit_transfer(ds, seed=1, task_effects="sampled", sampler=LONG_SAMPLED)
    assert integrated.diagnostics["converged"] and sampled.diagnostics["converged"]
    a, b = integrated.summary().set_index(["arm", "estimand"]), sampled.summary().set_index(["arm", "estimand"])
    for key in a.index:
        # Monte Carlo sd of a mean with ESS >= 400 in both fits: sd / 20 each; 4 of them is generous
        tol = 4 * max(a.loc[key, "sd"], 1e-3) / 20 * np.sqrt(2) if np.isfinite(a.loc[key, "sd"]) else 0.03
        assert a.loc[key, "mean"] == pytest.approx(b.loc[key, "mean"], abs=tol), key
    for part in ("ungraded", "reward"):
        ia, sa = integrated.estimands["task_effect_sd"][part], sampled.estimands["task_effect_sd"][part]
        assert ia["mean"] == pytest.approx(sa["mean"], abs=4 * ia["sd"] / 20 * np.sqrt(2) + 1e-3), part


@pytest.mark.filterwarnings("ignore::saturation.models.ConvergenceWarning")
@pytest.mark.slow
@pytest.mark.parametrize("converged", [True, False], ids=["converged", "not-converged"])
def test_transfer_command_writes_the_json_contract(tmp_path, capsys, monkeypatch, crossing_spec, converged):
    """Short chains: the contract (JSON shape, exit code = converged flag) is under test here, so
    the convergence verdict is made up (the real diagnostics with the flag, R-hat and ESS
    replaced) and the exit code, the printed verdict and the JSON must follow it."""
    import json

    from saturation.cli import main
    from saturation.io import write_table
    from saturation.models import transfer

    real = transfer.diagnostics
    made_up = (
        {"converged": True, "rhat_max": 1.001, "ess_bulk_min": 5000.0}
        if converged
        else {"converged": False, "rhat_max": 1.2}
    )
    monkeypatch.setattr(transfer, "diagnostics", lambda idata, names: {**real(idata, names), **made_up})
    ds, _ = simulate_transfer(crossing_spec, seed=2)  # same shapes as the recovery test: cached model
    path = write_table(ds, tmp_path / "t.csv")
    rc = main(
        ["transfer", str(path), "--seed", "1", "--draws", "300", "--tune", "300", "--json", str(tmp_path / "t.json")]
    )
    out = capsys.readouterr().out
    d = json.loads((tmp_path / "t.json").read_text())
    assert d["diagnostics"]["converged"] is converged and d["diagnostics"]["rhat_max"] == made_up["rhat_max"]
    if converged:
        assert rc == 0 and "-> converged" in out, out
    else:
        assert rc == 3 and "R-hat max 1.200" in out and "NOT CONVERGED: do not use these numbers" in out, out
    assert "crossover step" in out and "diagnostics: R-hat max" in out
    assert set(d) >= {"data", "reference", "arms", "initial", "crossover_step", "by_step", "diagnostics"}
    ini = d["initial"]["s85"]
    assert {"delta_all_rollout", "delta_graded_only", "delta_ungraded_rate", "p_positive"} <= set(ini)
    assert set(ini["delta_all_rollout"]) == {"mean", "median", "sd", "hdi"}
    assert {"mean", "sd", "hdi", "p_no_crossover"} <= set(d["crossover_step"]["s85"])
    row = d["by_step"][0]
    assert {"all_rollout", "graded_only", "ungraded_rate"} <= set(row["s85"])
    assert d["data"]["n_trials"] == ds.sizes[S.TRIAL]


@pytest.mark.parametrize(
    ("p_start", "p_end", "p_none", "start", "end", "crossed"),
    [
        (LEAD_PROB, 1 - LEAD_PROB, 0.1, "ahead", "behind", True),
        (LEAD_PROB - 0.01, 1 - LEAD_PROB + 0.01, 0.1, "level", "level", True),
        (1 - LEAD_PROB, LEAD_PROB, 0.5, "behind", "ahead", False),
    ],
)
def test_decisions_follow_the_one_rule(made_up_transfer_fit, p_start, p_end, p_none, start, end, crossed):
    """Start and end sides from P(gap > 0) against LEAD_PROB, boundaries included; a crossover
    named only when P(no crossover) < 0.5; the sentence says which arm leads and from when."""
    fit = made_up_transfer_fit("s85", "lr", p_start, p_end, 4.2, p_none)
    d = fit.decisions()["lr"]
    assert d == {"start": start, "end": end, "crossover": 4.2 if crossed else None}
    sentence = fit.verdicts()["lr"]
    words = {"ahead": "ahead of", "behind": "behind", "level": "level with"}
    assert sentence.startswith(f"lr starts {words[start]} s85")
    assert f"{end} at step 36" in sentence
    if crossed:
        assert ("s85 overtakes it at step 4" if start == "ahead" else "s85 leads from step 4 [2, 6] on") in sentence
    else:
        assert "no crossover (P = 0.50)" in sentence
    assert "base" not in sentence  # the reference is named, not assumed


def test_repr_is_a_short_summary(made_up_transfer_fit):
    fit = made_up_transfer_fit("base", "s85", 0.99, 0.01, 5.0, 0.1)
    text = repr(fit)
    assert text.startswith("TransferFit(2 arms") and "reference base" in text and "converged" in text
    assert "s85: starts ahead, ends behind, crossover at step 5" in text
    assert len(text.splitlines()) == 2 and len(text) < 400


@pytest.mark.parametrize("p_none", [1.0, 0.999])
def test_no_crossover_anywhere_gives_a_sentence_and_a_table(made_up_transfer_fit, p_none):
    """Issue 40: with no crossover in (almost) any draw the crossover's interval does not exist
    (mean None); the verdict said nothing and crashed formatting it (TypeError, exit 1)."""
    fit = made_up_transfer_fit("base", "s85", LEAD_PROB, LEAD_PROB, None, p_none)
    fit.estimands["crossover_step"]["s85"]["hdi"] = [None, None]
    last = fit.estimands["last_step"]["s85"]
    last.update({f"delta_{q}": last[f"delta_{S.ALL_ROLLOUT}"] for q in (S.GRADED_ONLY, S.UNGRADED_RATE)})
    assert fit.decisions()["s85"]["crossover"] is None
    sentence = fit.verdicts()["s85"]
    assert f"no crossover (P = {p_none:.2f})" in sentence and sentence.startswith("s85 starts ahead of base")
    table = fit.summary()
    cross = table[table["estimand"] == "crossover_step"].iloc[0]
    assert cross["mean"] is None or np.isnan(cross["mean"])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::saturation.models.sampling.ConvergenceWarning")  # short chains: draws compared
def test_a_fit_gives_the_same_draws_whatever_the_process_fitted_before(crossing_spec):
    """A fit's draws do not depend on what the process fitted before it: B alone and B after
    A (same shapes, other data: one compiled model serves both through its data) give
    identical draws. (Issue 40's LR-arm difference was not this: it came from PyTensor's
    on-disk numba cache, cold in a first process and warm after; see the closing note.)"""
    from saturation.models.sampling import SamplerConfig, clear_compiled_cache

    sampler = SamplerConfig(draws=150, tune=150, chains=2)
    a, _ = simulate_transfer(crossing_spec, seed=1)
    # B: the same trials with other rewards (every shape the same, as the LR arm's data
    # against the s85 arm's: a hand-written cache key cannot tell them apart)
    b = a.copy(deep=True)
    b["reward"] = b["reward"].where(np.arange(b.sizes["trial"]) % 3 != 0, 1.0 - b["reward"])
    clear_compiled_cache()
    alone = fit_transfer(b, sampler=sampler, seed=3).idata.posterior
    clear_compiled_cache()
    fit_transfer(a, sampler=sampler, seed=3)
    after = fit_transfer(b, sampler=sampler, seed=3).idata.posterior
    for name in alone.data_vars:
        np.testing.assert_array_equal(alone[name].values, after[name].values, err_msg=name)


_DRAWS_HASH = """
import hashlib, warnings
from dataclasses import replace
import numpy as np
from saturation.models.transfer import default_sampler, fit_transfer
from saturation.simulate import ArmSpec, TransferSpec, simulate_transfer
warnings.simplefilter("ignore")
spec = TransferSpec(
    arms=(ArmSpec("base", 1536, ((1, 0.4), (16, 0.3)), ((1, 0.4), (16, 0.6))),
          ArmSpec("s85", 1536, ((1, 0.4), (16, 0.4)), ((1, 0.5), (16, 0.5)))),
    prompts_per_step=24, samples_per_prompt=4, pool_size=300, task_sd=0.5, ungraded_task_sd=0.5,
)
ds, _ = simulate_transfer(spec, seed=2)
fit = fit_transfer(ds, seed=1, sampler=replace(default_sampler("integrated"), draws=60, tune=60, chains=2))
h = hashlib.sha256()
for name in sorted(fit.idata.posterior.data_vars):
    h.update(np.ascontiguousarray(fit.idata.posterior[name].values).tobytes())
print(h.hexdigest())
"""


@pytest.mark.slow
def test_same_draws_with_a_cold_or_a_warm_compile_cache(tmp_path):
    """Issue 40: the same seed and data gave different draws in a process that compiled the
    model's numba code (empty caches) than in every later process (cached code), because the
    kernel's fast-math reassociation changed the sums once inlined. Two processes over one pair
    of fresh cache directories: the first compiles everything, the second loads it."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "PYTENSOR_FLAGS": f"base_compiledir={tmp_path / 'pytensor'}",
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
        "PYTHONHASHSEED": "0",
    }

    def child():
        return subprocess.run([sys.executable, "-c", _DRAWS_HASH], env=env, capture_output=True, text=True, timeout=600)

    run = [child()]
    assert any((tmp_path / "numba").rglob("*.nbi")), "the first process wrote no numba cache"
    run.append(child())
    for r in run:
        assert r.returncode == 0, r.stderr[-2000:]
    cold, warm = (r.stdout.split()[-1] for r in run)
    assert cold == warm


@pytest.mark.parametrize("n_steps", [1, 2])
def test_a_run_of_one_or_two_steps_is_one_clear_error(n_steps):
    spec = _spec(
        [("base", ((1, 0.4), (n_steps, 0.3)), ((1, 0.4), (n_steps, 0.6))), ("s85", ((1, 0.4),), ((1, 0.5),))],
        n_steps=n_steps,
        prompts=8,
    )
    ds, _ = simulate_transfer(spec, seed=1)
    with pytest.raises(ValueError, match=rf"arm 'base' has graded trials at only {n_steps} step\(s\).*at least 3"):
        fit_transfer(ds, seed=1)


def test_the_parts_are_sampled_apart_the_reward_part_at_its_higher_target_accept(monkeypatch, crossing_spec):
    """Plumbing (no sampling): fit_transfer hands the two parts to ``sample_compiled_parts``
    with the settings' target_accept for the ungraded part and at least REWARD_TARGET_ACCEPT
    for the reward part; parts with different chains or draws are refused."""
    from saturation.models import sampling, transfer
    from saturation.models.sampling import SamplerConfig

    seen = {}

    class Stop(Exception):
        pass

    def capture(parts, *, seed, coords):
        seen["parts"] = [(name, config) for name, _, config in parts]
        raise Stop

    monkeypatch.setattr(transfer, "sample_compiled_parts", capture)
    ds, _ = simulate_transfer(crossing_spec, seed=0)
    for target, reward in ((0.8, transfer.REWARD_TARGET_ACCEPT), (0.99, 0.99)):
        sampler = replace(transfer.default_sampler("integrated"), target_accept=target)
        with pytest.raises(Stop):
            fit_transfer(ds, sampler=sampler)
        (u_name, u_config), (r_name, r_config) = seen["parts"]
        assert (u_name, r_name) == ("ungraded", "reward")
        assert u_config.target_accept == target and r_config.target_accept == reward
        assert (u_config.chains, u_config.draws) == (r_config.chains, r_config.draws)
    with pytest.raises(ValueError, match="same chains and draws"):
        sampling.sample_compiled_parts(
            [("a", None, SamplerConfig(draws=10)), ("b", None, SamplerConfig(draws=20))], seed=0, coords={}
        )
