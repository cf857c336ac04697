"""The saturation curve's cached numba kernel (models.sigmoid_kernel) against the PyMC graph
it replaces for the unpaired likelihoods: the same log density (up to a constant) and
gradient at random points, the gradient against finite differences, a chain's start, the
data block, and (slow) the same posterior from both paths."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from saturation.configs import SigmoidConfig, SigmoidPriors
from saturation.models import sigmoid, sigmoid_kernel
from saturation.models.sigmoid import arm_steps, build_sigmoid_model, sigmoid_values
from saturation.simulate import SigmoidArmsSpec, simulate_sigmoid_arms


def _design(likelihood: str, seed: int = 3, n_steps: int = 20):
    ds, _ = simulate_sigmoid_arms(SigmoidArmsSpec(n_steps=n_steps, prompts_per_step=8, samples_per_prompt=4), seed=seed)
    data = arm_steps(ds)
    if likelihood == "gaussian":  # graded rewards as per-step means with their sampling variance
        data = replace(data, binary=False)
    return data


def _points(model, values, n_arms, rng, n=12):
    names = [model.rvs_to_values[v].name for v in model.free_RVs]
    for _ in range(n):
        theta = rng.normal(0.0, 1.5, 5 * n_arms)
        theta[3 * n_arms : 4 * n_arms] += values["midpoint_mu"]
        theta[4 * n_arms :] += 3.0 if "log_kappa" in names else -3.0
        yield theta, {name: theta[i * n_arms : (i + 1) * n_arms] for i, name in enumerate(names)}


@pytest.mark.parametrize("likelihood", ["gaussian", "binomial"])
def test_log_density_and_gradient_are_the_graphs(likelihood):
    """At random points, including ones where the curve is clipped at 1e-6 or 1 - 1e-6:
    the value differs from the graph's by one constant (PyMC writes log(2 pi) to single
    precision) and the gradient is the graph's."""
    data = _design(likelihood)
    config = SigmoidConfig(likelihood=likelihood, priors=SigmoidPriors(step_sd=0.1))
    model, used, values = build_sigmoid_model(data, config)
    assert used == likelihood and sigmoid_values(data, config)[0] == used
    block = sigmoid_kernel.pack(values, used, config.priors)
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    offsets = []
    for theta, point in _points(model, values, len(data.arms), np.random.default_rng(0)):
        grad = np.zeros_like(theta)
        value = sigmoid_kernel.logp_grad(theta, block, grad)
        offsets.append(value - logp(point))
        want = dlogp(point)
        np.testing.assert_allclose(grad, want, rtol=1e-8, atol=1e-7 * max(1.0, np.abs(want).max()))
    assert np.ptp(offsets) < 1e-9 and abs(offsets[0]) < 1e-6


@pytest.mark.parametrize("likelihood", ["gaussian", "binomial"])
def test_gradient_is_the_derivative_of_the_value(likelihood):
    data = _design(likelihood, seed=8)
    config = SigmoidConfig(likelihood=likelihood)
    used, values = sigmoid_values(data, config)
    block = sigmoid_kernel.pack(values, used, config.priors)
    rng = np.random.default_rng(4)
    n_arms = len(data.arms)
    for _ in range(5):
        theta = rng.normal(0.0, 0.7, 5 * n_arms)
        theta[3 * n_arms : 4 * n_arms] += values["midpoint_mu"]
        theta[4 * n_arms :] += 3.5 if used == "binomial" else -3.0
        grad = np.zeros_like(theta)
        sigmoid_kernel.logp_grad(theta, block, grad)
        h = 1e-6
        for i in range(theta.size):
            up, down = theta.copy(), theta.copy()
            up[i] += h
            down[i] -= h
            g = np.zeros_like(theta)
            numeric = (sigmoid_kernel.logp_grad(up, block, g) - sigmoid_kernel.logp_grad(down, block, g)) / (2 * h)
            assert grad[i] == pytest.approx(numeric, rel=1e-5, abs=1e-5)


def test_data_block_and_start():
    data = _design("binomial")
    config = SigmoidConfig()
    used, values = sigmoid_values(data, config)
    block = sigmoid_kernel.pack(values, used, config.priors)
    n_arms, n_cells = len(data.arms), len(values["x"])
    assert block[0] == block.size and block[1] == sigmoid_kernel.BETA_BINOMIAL
    assert (block[2], block[3]) == (n_arms, n_cells)
    assert block.size == 4 + 6 + 2 * n_arms + 6 * n_cells
    start = sigmoid_kernel.initial_point(block, 7)
    np.testing.assert_array_equal(start, sigmoid_kernel.initial_point(block, 7))
    centre = np.concatenate(
        [values["r0_mu"], np.zeros(2 * n_arms), values["midpoint_mu"], np.full(n_arms, config.priors.log_kappa_mu)]
    )
    assert np.all(np.abs(start - centre) <= 1.0) and not np.array_equal(start, centre)
    with pytest.raises(KeyError):
        sigmoid_kernel.pack(values, "binomial-paired", config.priors)


def test_an_unpaired_fit_compiles_nothing_and_imports_no_pymc():
    """In a fresh interpreter: a Gaussian fit of two short arms samples on the cached kernel
    (compile time 0) without importing PyMC or PyTensor."""
    code = """
import sys
from saturation.models.sigmoid import arm_steps, fit_sigmoid
from saturation.configs import SamplerConfig, SigmoidConfig
from saturation.simulate import SigmoidArmsSpec, simulate_sigmoid_arms
ds, _ = simulate_sigmoid_arms(SigmoidArmsSpec(n_steps=12, prompts_per_step=4, samples_per_prompt=4), seed=1)
sampler = SamplerConfig(draws=50, tune=50, chains=2)
fit = fit_sigmoid(ds, SigmoidConfig(likelihood="gaussian", sampler=sampler))
print(fit.timings["compile"], "pymc" in sys.modules, "pytensor" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-3:] == ["0.0", "False", "False"], out.stdout + out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("likelihood", ["gaussian", "binomial"])
def test_the_kernels_posterior_is_the_graphs(likelihood, monkeypatch):
    """Both paths at their default settings on the same data: every curve parameter's mean
    within 4 Monte-Carlo standard errors (of the difference), sds within 10 %, both
    converged."""
    import arviz as az

    data = _design(likelihood, seed=11, n_steps=30)
    config = SigmoidConfig(likelihood=likelihood)
    kernel = sigmoid.fit_sigmoid(data, config, seed=1)
    assert kernel.timings["compile"] == 0.0
    monkeypatch.setattr(sigmoid_kernel, "compiled_model", lambda *a, **k: None)
    graph = sigmoid.fit_sigmoid(data, config, seed=2)
    assert graph.timings["compile"] > 0.0
    for fit in (kernel, graph):
        assert fit.diagnostics["converged"], fit.diagnostics
    names = ["r0_logit", "asymptote_logit", "log_efficiency", "log_midpoint", sigmoid_kernel.nuisance_name(likelihood)]
    for name in names:
        a, b = kernel.idata.posterior[name], graph.idata.posterior[name]
        se = np.hypot(az.mcse(kernel.idata, var_names=[name])[name], az.mcse(graph.idata, var_names=[name])[name])
        gap = np.abs(a.mean(("chain", "draw")) - b.mean(("chain", "draw")))
        assert (gap <= 4 * se).all(), (name, gap.values, se.values)
        ratio = a.std(("chain", "draw")) / b.std(("chain", "draw"))
        assert ((ratio > 0.9) & (ratio < 1.1)).all(), (name, ratio.values)
