"""Curve families per arm (models.families): the per-arm data, the sigmoid's pointwise log
likelihood, the caveat rule and (slow) which family wins on data shaped like each one."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from saturation import curves
from saturation.models import families
from saturation.models.sigmoid import ArmSteps, SigmoidConfig, SigmoidFit


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
    one = families.sigmoid_pointwise(fit, 1)
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
        families.sigmoid_pointwise(fit, 0)


def test_the_caveat_rule_follows_the_sigmoids_stacking_weight():
    def table(w_sig, w_hinge, w_exp):
        t = pd.DataFrame(
            {
                "elpd_loo": [1.0, 2.0, 3.0],
                "se": [0.1, 0.1, 0.1],
                "weight": [w_sig, w_hinge, w_exp],
                "loo_method": ["PSIS", "exact", "exact"],
            },
            index=list(families.FAMILIES),
        )
        t.attrs["caveat"] = ""
        return t

    interval = {"mean": 0.5, "sd": 0.01, "hdi": [0.48, 0.52]}
    comp = families.FamilyComparison(
        {"a": table(0.6, 0.3, 0.1), "b": table(0.2, 0.7, 0.1)},
        {"a": interval, "b": interval},
        {"a": interval, "b": interval},
        {},
    )
    assert comp.caveat("a") == "" and comp.preferred("b") == "hinge"
    assert comp.caveat("b").startswith("the data prefer the hinge (stacking weight 0.70 against the sigmoid's 0.20)")
    out = comp.to_dict()
    json.dumps(out)
    assert out["b"]["preferred"] == "hinge" and out["a"]["weights"]["sigmoid"] == 0.6
    lines = comp.sentences()
    assert "Caveat" not in lines[0] and "Caveat: the data prefer the hinge" in lines[1]


@pytest.mark.slow
def test_the_family_that_shaped_the_data_wins():
    """A sharp hinge (rise until step 15, flat after) and a smooth sigmoid, 40 steps of 128
    clustered rollouts each: the hinge carries most of the stacking weight on the first arm,
    the smooth families (sigmoid + exponential) on the second, and the first arm's ceiling is
    flagged as resting on a family the data do not prefer."""
    x = np.arange(1.0, 41)
    hinge = np.where(x < 15, 0.2 + 0.03 * (x - 1), 0.2 + 0.03 * 14)
    smooth = curves.sigmoid_saturation(x, r0=0.2, asymptote=0.6, efficiency=1.5, midpoint=12.0)
    data = _arms({"hinged": hinge, "smooth": smooth}, seed=3)
    comp = families.compare_curve_families(data, seed=1)
    w = {arm: comp.tables[arm]["weight"] for arm in data.arms}
    assert w["hinged"]["hinge"] > 0.5, w
    assert w["smooth"]["sigmoid"] + w["smooth"]["exponential"] > 0.5, w
    assert comp.caveat("hinged") != ""
