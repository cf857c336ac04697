"""The transfer model's cached numba kernel (models.transfer_kernel) against the PyMC graph
it replaces for integrated task effects: the same log density (up to a constant) and
gradient at random points for both random-walk forms, the gradient against finite
differences, a fit that compiles nothing, and (slow) the same posterior from both paths."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from saturation.configs import TransferConfig
from saturation.models import transfer, transfer_kernel
from saturation.models.transfer import RW_SD_SHAPE, build_transfer_model, transfer_data
from saturation.simulate import simulate_transfer


def _setup(crossing_spec, walk: str, seed: int = 1):
    ds, _ = simulate_transfer(crossing_spec, seed=seed)
    data = transfer_data(ds)
    config = TransferConfig(walk=walk)
    model, values = build_transfer_model(data, config)
    block = transfer_kernel.pack(values, len(data.arms), walk, config.priors, RW_SD_SHAPE)
    return data, config, model, block


def _point(model, theta):
    names = [model.rvs_to_values[v].name for v in model.free_RVs]
    start = model.initial_point()
    out, at = {}, 0
    for name in names:
        size = start[name].size
        out[name] = theta[at : at + size].reshape(start[name].shape)
        at += size
    assert at == theta.size
    return out


@pytest.mark.parametrize("walk", ["centred", "non-centred"])
def test_log_density_and_gradient_are_the_graphs(crossing_spec, walk):
    _, _, model, block = _setup(crossing_spec, walk)
    # the graph's free variables are the kernel's parameters (non-centred: the z, not the knots)
    free = [model.rvs_to_values[v].name.removesuffix("_log__") for v in model.free_RVs]
    kept = [n for n, _ in transfer_kernel.variables(walk, "arm") if walk == "centred" or not n.endswith("_knot")]
    assert free == kept
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    rng = np.random.default_rng(0)
    offsets = []
    for seed in range(6):
        theta = transfer_kernel.initial_point(block, seed)
        theta += rng.normal(0.0, 0.3, theta.size)
        grad = np.zeros_like(theta)
        value = transfer_kernel.logp_grad(theta, block, grad)
        point = _point(model, theta)
        offsets.append(value - logp(point))
        want = dlogp(point)
        np.testing.assert_allclose(grad, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    assert np.ptp(offsets) < 1e-8 and abs(offsets[0]) < 1e-4


@pytest.mark.parametrize("walk", ["centred", "non-centred"])
def test_gradient_is_the_derivative_of_the_value(crossing_spec, walk):
    _, _, _, block = _setup(crossing_spec, walk, seed=2)
    theta = transfer_kernel.initial_point(block, 5)
    grad = np.zeros_like(theta)
    transfer_kernel.logp_grad(theta, block, grad)
    g = np.zeros_like(theta)
    h = 1e-5
    for i in range(theta.size):
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        numeric = (transfer_kernel.logp_grad(up, block, g) - transfer_kernel.logp_grad(down, block, g)) / (2 * h)
        assert grad[i] == pytest.approx(numeric, rel=1e-4, abs=1e-4), i


def test_variables_follow_the_graphs_order():
    assert [n for n, _ in transfer_kernel.variables("centred", "arm")] == [
        "ungraded_rw_sd",
        "ungraded_knot",
        "ungraded_task_sd",
        "reward_rw_sd",
        "reward_knot",
        "reward_task_sd",
        "reward_sd",
    ]
    names = [n for n, _ in transfer_kernel.variables("non-centred", "arm")]
    assert names.index("ungraded_knot_z") < names.index("ungraded_knot")


def test_an_integrated_fit_compiles_nothing_and_imports_no_pytensor():
    code = """
import sys
from dataclasses import replace
from saturation.models.transfer import default_sampler, fit_transfer
from saturation.simulate import ArmSpec, TransferSpec, simulate_transfer
spec = TransferSpec(
    arms=(ArmSpec("base", 768, ((1, 0.4), (8, 0.3)), ((1, 0.4), (8, 0.6))),
          ArmSpec("s85", 768, ((1, 0.4), (8, 0.4)), ((1, 0.5), (8, 0.5)))),
    prompts_per_step=24, samples_per_prompt=4, pool_size=300, task_sd=0.5, ungraded_task_sd=0.5,
)
ds, _ = simulate_transfer(spec, seed=2)
fit = fit_transfer(ds, seed=1, sampler=replace(default_sampler("integrated"), draws=40, tune=40, chains=2))
print(fit.timings["compile"], "pymc" in sys.modules, "pytensor" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-3:] == ["0.0", "False", "False"], out.stdout + out.stderr


@pytest.mark.slow
def test_the_kernels_posterior_is_the_graphs(crossing_spec, monkeypatch):
    """Both paths at the default settings on the same data: every structural parameter's
    mean within 4 Monte-Carlo standard errors of the difference, sds within 10 %."""
    import arviz as az

    ds, _ = simulate_transfer(crossing_spec, seed=4)
    kernel = transfer.fit_transfer(ds, seed=1)
    assert kernel.timings["compile"] == 0.0
    monkeypatch.setattr(transfer_kernel, "compiled_model", lambda *a, **k: None)
    graph = transfer.fit_transfer(ds, seed=2)
    assert graph.timings["compile"] > 0.0
    for fit in (kernel, graph):
        assert fit.diagnostics["converged"], fit.diagnostics
    names = [f"{p}_{v}" for p in transfer.PARTS for v in ("knot", "rw_sd", "task_sd")] + ["reward_sd"]
    for name in names:
        a, b = kernel.idata.posterior[name], graph.idata.posterior[name]
        se = np.hypot(az.mcse(kernel.idata, var_names=[name])[name], az.mcse(graph.idata, var_names=[name])[name])
        gap = np.abs(a.mean(("chain", "draw")) - b.mean(("chain", "draw")))
        assert (gap <= 4 * se).all(), (name, gap.values, se.values)
        ratio = a.std(("chain", "draw")) / b.std(("chain", "draw"))
        assert ((ratio > 0.9) & (ratio < 1.1)).all(), (name, ratio.values)
    assert replace(kernel.config, sampler=graph.config.sampler) == graph.config


@pytest.mark.parametrize("walk", ["centred", "non-centred"])
def test_each_part_alone_is_its_factor_of_the_joint_density(crossing_spec, walk):
    """The parts share no parameter: a block of one part gives that part's factor of the
    joint log density (up to a constant) and the joint gradient's entries of its parameters;
    its expansion names that part's variables only."""
    data, config, _, block = _setup(crossing_spec, walk, seed=3)
    _, values = build_transfer_model(data, config)
    n_arms = len(data.arms)
    part_size = n_arms + n_arms * int(block[3]) + 1  # block[3]: the knots
    at = {"ungraded": slice(0, part_size), "reward": slice(part_size, None)}
    rng = np.random.default_rng(2)
    for part in ("ungraded", "reward"):
        one = transfer_kernel.pack(values, n_arms, walk, config.priors, RW_SD_SHAPE, part)
        offsets = []
        for seed in range(4):
            theta = transfer_kernel.initial_point(block, seed)
            theta += rng.normal(0.0, 0.3, theta.size)
            grad, g_one = np.zeros_like(theta), np.zeros(theta[at[part]].size)
            joint = transfer_kernel.logp_grad(theta, block, grad)
            # the other part's factor, from a block of the other part at the same point
            other = "reward" if part == "ungraded" else "ungraded"
            other_block = transfer_kernel.pack(values, n_arms, walk, config.priors, RW_SD_SHAPE, other)
            g_other = np.zeros(theta[at[other]].size)
            value = transfer_kernel.logp_grad(theta[at[part]], one, g_one)
            value_other = transfer_kernel.logp_grad(theta[at[other]], other_block, g_other)
            np.testing.assert_allclose(g_one, grad[at[part]], rtol=1e-10, atol=1e-10 * np.abs(grad).max())
            offsets.append(joint - value - value_other)
        assert np.ptp(offsets) < 1e-8 and abs(offsets[0]) < 1e-8, part
        names = [n for n, _ in transfer_kernel.variables(walk, "arm", (part,))]
        assert all(n.startswith(part) for n in names if n != "reward_sd")
        assert ("reward_sd" in names) == (part == "reward")
        assert transfer_kernel.initial_point(one, 0).size == theta[at[part]].size
