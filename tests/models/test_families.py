"""Curve families per arm (models.families): the per-arm data, the sigmoid's pointwise log
likelihood, the caveat rule and (slow) which family wins on data shaped like each one."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from saturation import curves
from saturation.models import families
from saturation.models.sigmoid import ArmSteps, SigmoidConfig, SigmoidFit, fit_sigmoid


def _arms(shapes: dict[str, np.ndarray], seed: int = 0, prompts: int = 16, rollouts: int = 8) -> ArmSteps:
    """Per-trial binary rollouts (not any of the models): per step ``prompts`` prompts whose
    success rates are Beta with mean on the arm's curve (prompt clustering), ``rollouts`` each."""
    rng = np.random.default_rng(seed)
    names = list(shapes)
    t = len(next(iter(shapes.values())))
    n = np.full((len(names), t), float(prompts * rollouts))
    k = np.empty_like(n)
    var = np.empty_like(n)
    for a, name in enumerate(names):
        for j, m in enumerate(np.clip(shapes[name], 0.02, 0.98)):
            p = rng.beta(m * 10, (1 - m) * 10, prompts)
            y = (rng.random((prompts, rollouts)) < p[:, None]).ravel()
            k[a, j], var[a, j] = y.sum(), y.var(ddof=1) / y.size
    return ArmSteps(names, np.arange(1.0, t + 1), n, k, k / n, var, True, {"n_trials": int(n.sum())})


def test_arm_step_data_is_one_arms_observed_steps():
    data = _arms({"a": np.full(6, 0.3), "b": np.full(6, 0.6)})
    data.n[1, 2] = 0
    sd = families.arm_step_data(data, 1)
    assert sd.levels == ["b"] and list(sd.steps) == [1, 2, 4, 5, 6]
    np.testing.assert_array_equal(sd.y[0], data.mean[1, [0, 1, 3, 4, 5]])
    np.testing.assert_array_equal(sd.var_mean[0], data.var_mean[1, [0, 1, 3, 4, 5]])


def _made_up_gaussian_fit(data: ArmSteps, seed: int = 0) -> SigmoidFit:
    import arviz as az

    rng = np.random.default_rng(seed)
    shape = (2, 50, len(data.arms))
    post = {
        "r0": rng.uniform(0.2, 0.3, shape),
        "asymptote": rng.uniform(0.6, 0.7, shape),
        "efficiency": rng.uniform(1.0, 2.0, shape),
        "midpoint": rng.uniform(5.0, 10.0, shape),
        "tau": rng.uniform(0.01, 0.03, shape),
    }
    idata = az.from_dict(posterior=post, coords={"arm": data.arms}, dims={k: ["arm"] for k in post})
    est = {"likelihood": "gaussian", "reference": data.arms[0], "arms": {}, "contrasts": {}}
    return SigmoidFit(idata, SigmoidConfig(), data, est, {"converged": True}, {})


def test_the_sigmoids_pointwise_log_likelihood_is_the_gaussian_of_each_step_mean():
    data = _arms({"a": np.linspace(0.2, 0.6, 8), "b": np.linspace(0.3, 0.5, 8)})
    fit = _made_up_gaussian_fit(data)
    one = fit.pointwise(1)
    ll = one.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "level", "step") and ll.shape == (2, 50, 1, 8)
    post = fit.idata.posterior.isel(arm=1, chain=1, draw=7)
    mu = curves.sigmoid_saturation(
        data.x[3],
        r0=float(post["r0"]),
        asymptote=float(post["asymptote"]),
        efficiency=float(post["efficiency"]),
        midpoint=float(post["midpoint"]),
    )
    var = data.var_mean[1, 3] + float(post["tau"]) ** 2
    expect = -0.5 * np.log(2 * np.pi * var) - 0.5 * (data.mean[1, 3] - mu) ** 2 / var
    assert float(ll.isel(chain=1, draw=7, level=0, step=3)) == pytest.approx(expect)
    fit.estimands["likelihood"] = "binomial"
    with pytest.raises(ValueError, match="Gaussian"):
        fit.pointwise(0)


def test_a_logged_metric_is_compared_as_a_logged_series():
    """Logged per-step values (no rollout counts) enter the hinge and the exponential as the
    plateau model reads a logged series: n infinite, no within-step variance; the families'
    LOO then runs on the same values the sigmoid's Gaussian fit saw."""
    from saturation.models.sigmoid import series_arm_steps
    from saturation.simulate import SigmoidArmsSpec, simulate_sigmoid_series

    spec = SigmoidArmsSpec(n_steps=20, prompts_per_step=8, samples_per_prompt=4)
    series, truth = simulate_sigmoid_series(spec, seed=5)
    data = series_arm_steps(series, "reward/avg_raw_reward")
    sd = families.arm_step_data(data, 0)
    assert np.isinf(sd.n).all() and (sd.var_mean == 0).all() and sd.summary["n_trials"] is None
    np.testing.assert_array_equal(sd.y[0], data.mean[0])
    comp = families.compare_curve_families(_made_up_gaussian_fit(data), seed=1)
    for arm in data.arms:
        table = comp.loo[arm]
        assert set(table.index) == {"sigmoid", "hinge", "exponential"}
        assert np.isfinite(table["elpd_loo"]).all()
        assert table.loc["hinge", "loo_method"] == "exact" and table.loc["sigmoid", "loo_method"] == "PSIS"
        lo, hi = comp.exponential_asymptote[arm]["hdi"]
        assert lo <= truth["arms"][arm]["asymptote"] <= hi
        # no within-step variance: the hinge's step noise carries the logged values' scatter
        # (32 rollouts a step around a rate of 0.1-0.6, sd about 0.1)
        tau = float(comp.fits[arm]["hinge"].posterior["tau"].mean())
        assert 0.05 < tau < 0.2, tau


def test_the_caveat_rules_need_a_decisive_elpd_difference():
    def table(elpd, dse, weights):
        order = sorted(elpd, key=lambda f: -elpd[f])
        best = max(elpd.values())
        t = pd.DataFrame(
            {
                "elpd_loo": [elpd[f] for f in order],
                "elpd_diff": [best - elpd[f] for f in order],
                "dse": [dse[f] for f in order],
                "se": 1.0,
                "weight": [weights[f] for f in order],
                "loo_method": "exact",
            },
            index=order,
        )
        t.attrs["caveat"] = ""
        return t

    def iv(lo, hi):
        return {"mean": (lo + hi) / 2, "sd": 0.01, "hdi": [lo, hi]}

    zero = {"hinge": 0.0}
    tables = {
        # a near-tie: the hinge has the larger weight, the sigmoid 0.1 +- 0.9 behind
        "tie": table({"hinge": 10, "exponential": 9.6, "sigmoid": 9.9}, {**zero, "exponential": 0.7, "sigmoid": 0.9},
                     {"hinge": 0.6, "exponential": 0.0, "sigmoid": 0.4}),
        # 3 +- 0.5 behind: more than 2 SE but a small difference (< 4): not decisive
        "small": table({"hinge": 10, "exponential": 9.0, "sigmoid": 7.0}, {**zero, "exponential": 0.5, "sigmoid": 0.5},
                       {"hinge": 1.0, "exponential": 0.0, "sigmoid": 0.0}),
        # decisive: the sigmoid 12 +- 3 behind the hinge
        "kinked": table({"hinge": 20, "exponential": 6.0, "sigmoid": 8.0}, {**zero, "exponential": 3.0, "sigmoid": 3.0},
                        {"hinge": 1.0, "exponential": 0.0, "sigmoid": 0.0}),
    }  # fmt: skip
    sig = {"tie": iv(0.55, 0.70), "small": iv(0.55, 0.70), "kinked": iv(0.55, 0.70)}
    expo = {"tie": iv(0.50, 0.53), "small": iv(0.60, 0.62), "kinked": iv(0.60, 0.62)}
    comp = families.FamilyComparison(tables, expo, sig, {})
    assert comp.preferred("tie") == "hinge" and not comp.sigmoid_worse("tie")
    assert not comp.sigmoid_worse("small") and comp.caveat("small") == ""
    assert comp.sigmoid_worse("kinked")
    assert comp.caveat("kinked").startswith("the data favour the hinge (ELPD 12.0 +- 3.0 above the sigmoid's)")
    # tie: the exponential is as good as the sigmoid, but its ceiling [0.50, 0.53] misses the sigmoid's
    assert comp.family_dependent("tie") and not comp.family_dependent("small")
    assert comp.caveat("tie").startswith("the ceiling depends on the curve family")
    out = comp.to_dict()
    json.dumps(out)
    assert out["kinked"]["sigmoid_decisively_worse"] and out["tie"]["family_dependent_ceiling"]
    lines = comp.sentences()
    assert "not decisively worse" in lines[0] and "Caveat: the ceiling depends" in lines[0]
    assert "Caveat" not in lines[1] and "Caveat: the data favour the hinge" in lines[2]


@pytest.mark.slow
def test_the_sigmoids_ceiling_is_flagged_where_another_family_is_decisively_better():
    """60 steps of 512 clustered rollouts. An arm that bends at step 15 and keeps climbing
    slowly (0.003 a step): a saturating curve cannot follow it, the hinge beats the sigmoid
    decisively (about 12 +- 3 ELPD) and the ceiling is flagged. A smooth sigmoid arm: the
    sigmoid is not decisively worse than the best family. (A hinge that is flat after its
    bend is NOT decisive against the sigmoid, whose steep B mimics the kink: 1.7 +- 4.0 on
    40 steps of these data.)"""
    x = np.arange(1.0, 61)
    kinked = np.where(x < 15, 0.2 + 0.03 * (x - 1), 0.2 + 0.03 * 14 + 0.003 * (x - 15))
    smooth = curves.sigmoid_saturation(x, r0=0.2, asymptote=0.6, efficiency=1.5, midpoint=12.0)
    data = _arms({"kinked": kinked, "smooth": smooth}, seed=3, prompts=64)
    comp = fit_sigmoid(data, SigmoidConfig(likelihood="gaussian"), seed=1).families()
    assert comp.preferred("kinked") == "hinge" and comp.sigmoid_worse("kinked"), comp.loo["kinked"]
    assert comp.caveat("kinked").startswith("the data favour the hinge")
    assert not comp.sigmoid_worse("smooth"), comp.loo["smooth"]
