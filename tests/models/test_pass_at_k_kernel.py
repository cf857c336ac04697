"""The pass@k group model's cached numba kernel (models.pass_at_k_kernel) against the PyMC
graph it replaces: the same log density (up to a constant) and gradient at random points,
the gradient against finite differences, a fit that compiles nothing, and (slow) the same
posterior from both paths."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from saturation.configs import PassAtKPriors
from saturation.models import learning, pass_at_k_kernel
from saturation.models.learning import build_pass_at_k_model, group_counts
from saturation.models.sampling import SamplerConfig
from saturation.simulate import SeriesSpec, simulate_prompt_groups


def _values(seed=1, n_steps=12, prompts=20):
    ds, _ = simulate_prompt_groups(SeriesSpec(n_steps=n_steps, prompts_per_step=prompts), seed=seed)
    counts = group_counts(ds)
    steps = np.unique(counts["step"].values)
    key = np.stack([np.searchsorted(steps, counts["step"].values), counts["n"].values, counts["s"].values], axis=1)
    uniq, weight = np.unique(key, axis=0, return_counts=True)
    x = (steps - steps[0]) / max(float(steps[-1] - steps[0]), 1.0)
    values = {
        "t": uniq[:, 0],
        "n": uniq[:, 1].astype(float),
        "s": uniq[:, 2].astype(float),
        "w": weight.astype(float),
        "x": x,
    }
    return ds, values, steps


def test_log_density_and_gradient_are_the_graphs():
    _, values, steps = _values()
    priors = PassAtKPriors(a2_sd=0.7, sigma_sd=0.3)
    model = build_pass_at_k_model(values, steps, priors)
    names = [model.rvs_to_values[v].name for v in model.free_RVs]
    assert names == ["a0", "a1", "a2", "g0", "g1", "g2", "sigma_log__", "eps"]
    block = pass_at_k_kernel.pack(values, priors)
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    rng = np.random.default_rng(0)
    offsets = []
    for seed in range(8):
        theta = pass_at_k_kernel.initial_point(block, seed) + rng.normal(0.0, 0.5, 7 + len(steps))
        point = {n: theta[i] for i, n in enumerate(names[:7])} | {"eps": theta[7:]}
        grad = np.zeros_like(theta)
        value = pass_at_k_kernel.logp_grad(theta, block, grad)
        offsets.append(value - logp(point))
        want = dlogp(point)
        np.testing.assert_allclose(grad, want, rtol=1e-8, atol=1e-8 * np.abs(want).max())
    assert np.ptp(offsets) < 1e-8 and abs(offsets[0]) < 1e-4


def test_gradient_is_the_derivative_of_the_value():
    _, values, _ = _values(seed=4)
    block = pass_at_k_kernel.pack(values, PassAtKPriors())
    theta = pass_at_k_kernel.initial_point(block, 2)
    grad, g = np.zeros_like(theta), np.zeros_like(theta)
    pass_at_k_kernel.logp_grad(theta, block, grad)
    h = 1e-6
    for i in range(theta.size):
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        numeric = (pass_at_k_kernel.logp_grad(up, block, g) - pass_at_k_kernel.logp_grad(down, block, g)) / (2 * h)
        assert grad[i] == pytest.approx(numeric, rel=1e-5, abs=1e-5), i


def test_a_fit_compiles_nothing_and_imports_no_pymc():
    code = """
import sys, warnings
from saturation.models.learning import fit_pass_at_k
from saturation.models.sampling import SamplerConfig
from saturation.simulate import SeriesSpec, simulate_prompt_groups
ds, _ = simulate_prompt_groups(SeriesSpec(n_steps=10, prompts_per_step=10), seed=1)
warnings.simplefilter("ignore")
d = fit_pass_at_k(ds, seed=0, sampler=SamplerConfig(draws=40, tune=40, chains=2))
print(d.numbers["timings"]["compile"], "pymc" in sys.modules, "pytensor" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-3:] == ["0.0", "False", "False"], out.stdout + out.stderr


@pytest.mark.slow
def test_the_kernels_posterior_is_the_graphs(monkeypatch):
    import arviz as az

    ds, _, _ = _values(seed=7, n_steps=30, prompts=48)
    cfg = SamplerConfig(draws=1000, tune=1000, chains=4)
    kernel = learning.fit_pass_at_k(ds, seed=1, sampler=cfg)
    assert kernel.numbers["timings"]["compile"] == 0.0
    monkeypatch.setattr(pass_at_k_kernel, "compiled_model", lambda *a, **k: None)
    graph = learning.fit_pass_at_k(ds, seed=2, sampler=cfg)
    assert graph.numbers["timings"]["compile"] > 0.0
    for d in (kernel, graph):
        assert d.diagnostics["converged"], d.diagnostics
    for name in [*pass_at_k_kernel.PARAMS, "passk_end", "pass1_end"]:
        a, b = kernel.idata.posterior[name], graph.idata.posterior[name]
        se = np.hypot(az.mcse(kernel.idata, var_names=[name])[name], az.mcse(graph.idata, var_names=[name])[name])
        assert float(abs(a.mean() - b.mean())) <= 4 * float(se), name
        assert 0.9 < float(a.std() / b.std()) < 1.1, name
