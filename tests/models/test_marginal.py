"""Task effects integrated out of the transfer likelihood: the value against a dense grid, the
exact gradient against finite differences, the pattern reduction against no reduction, the
same numbers in PyTensor's Python and numba modes, the task sd -> 0 limit."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import expit, logsumexp

from saturation.models.marginal import (
    MARGINAL_DATA,
    NODES,
    binomial_patterns,
    pack_marginal_data,
    task_segments,
    transfer_marginal_kernel,
)
from saturation.models.marginal_op import TransferMarginal, log_transfer_marginal

GRID = np.linspace(-12.0, 12.0, 8001)
RGRID = np.linspace(-2.5, 2.5, 8001)


def _problem(
    seed: int = 1,
    n_tasks: int = 40,
    n_cells: int = 12,
    n_arms: int = 2,
    rollouts: int = 8,
    extra_groups: int = 3,
    fixed_n: bool = False,
):
    """Groups of (task, cell), unique per pair (one arm, one step of one task), ungraded
    counts and graded rewards' sufficient statistics."""
    rng = np.random.default_rng(seed)
    task = np.concatenate([np.arange(n_tasks), rng.integers(0, n_tasks, extra_groups * n_tasks)])
    cell = rng.integers(0, n_cells, len(task))
    keep = np.unique(task * 1000 + cell, return_index=True)[1]
    task, cell = task[keep], cell[keep]
    # fixed_n: every group the same rollouts (the kernel then takes one log per node, not per group)
    n = np.full(len(task), float(rollouts)) if fixed_n else rng.integers(1, rollouts + 1, len(task)).astype(float)
    k = rng.binomial(n.astype(int), 0.35).astype(float)
    gn = n - k
    y = [rng.normal(0.45, 0.2, int(m)) for m in gn]
    data = {
        "task": task,
        "cell": cell,
        "arm": cell % n_arms,
        "k": k,
        "n": n,
        "gn": gn,
        "gs": np.array([v.sum() for v in y]),
        "gq": np.array([(v**2).sum() for v in y]),
        "n_tasks": n_tasks,
    }
    params = {"cu": rng.normal(-0.5, 0.6, n_cells), "cr": rng.normal(0.0, 0.5, n_cells), "prec": np.array([20.0, 30.0])}
    return data, params


def _inputs(data, *, dedupe: bool = True) -> list[np.ndarray]:
    """The kernel's data inputs in MARGINAL_DATA order (``dedupe=False``: one pattern per task)."""
    order, start, end = task_segments(data["task"], data["n_tasks"])
    if dedupe:
        pat = binomial_patterns(data["cell"][order], data["k"][order], data["n"][order], start, end)
    else:
        pat = {
            "u_cell": data["cell"][order],
            "u_k": data["k"][order],
            "u_n": data["n"][order],
            "u_start": start,
            "u_end": end,
            "u_weight": np.ones(data["n_tasks"]),
        }
    reward = {
        "cell": data["cell"][order],
        "g_arm": data["arm"][order],
        "g_n": data["gn"][order],
        "g_sum": data["gs"][order],
        "g_sumsq": data["gq"][order],
        "task_start": start,
        "task_end": end,
    }
    return [{**pat, **reward}[name] for name in MARGINAL_DATA]


def _kernel(params, inputs, tau_u, tau_r, nodes=NODES):
    z, w = np.polynomial.hermite.hermgauss(nodes)
    return transfer_marginal_kernel(params["cu"], params["cr"], tau_u, tau_r, params["prec"], *inputs, z, w)


def _brute(data, params, tau_u, tau_r):
    """Both integrals on dense grids (Riemann sums; the integrands are ~0 at the ends)."""
    x = params["cu"][data["cell"]][:, None] + GRID[None, :]
    ll = data["k"][:, None] * x - data["n"][:, None] * np.logaddexp(0, x)
    tot = np.zeros((data["n_tasks"], len(GRID)))
    np.add.at(tot, data["task"], ll)
    prior = -0.5 * (GRID / tau_u) ** 2 - np.log(tau_u) - 0.5 * np.log(2 * np.pi) + np.log(GRID[1] - GRID[0])
    ungraded = logsumexp(tot + prior, axis=1).sum()
    mu = expit(params["cr"])[data["cell"]][:, None] + RGRID[None, :]
    lam = params["prec"][data["arm"]][:, None]
    gn, gs, gq = (data[v][:, None] for v in ("gn", "gs", "gq"))
    ll = 0.5 * gn * np.log(lam / (2 * np.pi)) - 0.5 * lam * (gq - 2 * mu * gs + gn * mu * mu)
    tot = np.zeros((data["n_tasks"], len(RGRID)))
    np.add.at(tot, data["task"], ll)
    prior = -0.5 * (RGRID / tau_r) ** 2 - np.log(tau_r) - 0.5 * np.log(2 * np.pi) + np.log(RGRID[1] - RGRID[0])
    return float(ungraded + logsumexp(tot + prior, axis=1).sum())


@pytest.mark.parametrize("fixed_n", [False, True], ids=["varying-rollouts", "same-rollouts"])
@pytest.mark.parametrize(("tau_u", "tau_r"), [(0.05, 0.02), (0.5, 0.1), (1.2, 0.3)])
def test_value_matches_a_dense_grid(tau_u, tau_r, fixed_n):
    data, params = _problem(fixed_n=fixed_n)
    value = _kernel(params, _inputs(data), tau_u, tau_r)[0]
    ref = _brute(data, params, tau_u, tau_r)
    # the reward part is exact; the 5-node rule on these small binomial tasks errs by well under
    # 1e-3 per task (1e-5 at sd 0.5); 7 nodes are closer still
    assert value == pytest.approx(ref, abs=1e-3 * data["n_tasks"])
    assert abs(_kernel(params, _inputs(data), tau_u, tau_r, nodes=7)[0] - ref) <= abs(value - ref) + 1e-9


@pytest.mark.parametrize("fixed_n", [False, True], ids=["varying-rollouts", "same-rollouts"])
def test_gradient_is_exact(fixed_n):
    """The gradient of the value the kernel returns (not of the integral): finite differences
    agree to their own error, including the centre's and the scale's dependence on the inputs."""
    data, params = _problem(seed=2, fixed_n=fixed_n)
    inputs = _inputs(data)
    tau_u, tau_r, eps = 0.6, 0.15, 1e-6
    _, d_cu, d_cr, d_tu, d_tr, d_prec = _kernel(params, inputs, tau_u, tau_r)

    def f(name=None, i=0, delta=0.0, tu=tau_u, tr=tau_r):
        p = {k: v.copy() for k, v in params.items()}
        if name:
            p[name][i] += delta
        return _kernel(p, inputs, tu, tr)[0]

    for name, grad in (("cu", d_cu), ("cr", d_cr), ("prec", d_prec)):
        for i in range(len(grad)):
            step = eps * max(1.0, abs(params[name][i]))
            fd = (f(name, i, step) - f(name, i, -step)) / (2 * step)
            assert grad[i] == pytest.approx(fd, rel=1e-6, abs=1e-6), (name, i)
    assert d_tu == pytest.approx((f(tu=tau_u + eps) - f(tu=tau_u - eps)) / (2 * eps), rel=1e-6)
    assert d_tr == pytest.approx((f(tr=tau_r + eps) - f(tr=tau_r - eps)) / (2 * eps), rel=1e-6)


def test_patterns_change_nothing_but_the_cost():
    """Tasks with identical (cell, ungraded, rollouts) groups are computed once and weighted:
    value and gradient equal the unreduced computation."""
    data, params = _problem(seed=5, n_tasks=300, n_cells=6, rollouts=2, extra_groups=1)
    reduced, full = _inputs(data), _inputs(data, dedupe=False)
    assert len(reduced[MARGINAL_DATA.index("u_start")]) < 0.8 * data["n_tasks"]  # there are duplicates
    assert reduced[MARGINAL_DATA.index("u_weight")].sum() == data["n_tasks"]
    for a, b in zip(_kernel(params, reduced, 0.7, 0.2), _kernel(params, full, 0.7, 0.2), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-10)


def _rule_directly(data, params, tau_u, nodes=NODES):
    """The binomial part's adaptive Gauss-Hermite rule written out in NumPy, task by task: the
    mode by 200 Newton steps (each clipped to 2 logits), the scale from the curvature there, the nodes' log integrands
    summed in logarithms. The kernel computes the same rule with fewer transcendental calls."""
    z, w = np.polynomial.hermite.hermgauss(nodes)
    total = 0.0
    for i in range(data["n_tasks"]):
        mine = data["task"] == i
        c, k, n = params["cu"][data["cell"][mine]], data["k"][mine], data["n"][mine]
        th = 0.0
        for _ in range(200):
            r = expit(c + th)
            step = (k.sum() - (n * r).sum() - th / tau_u**2) / ((n * r * (1 - r)).sum() + 1 / tau_u**2)
            th += np.clip(step, -2.0, 2.0)
        r = expit(c + th)
        s = np.sqrt(2.0 / ((n * r * (1 - r)).sum() + 1 / tau_u**2))
        t = th + s * z
        x = c[:, None] + t[None, :]
        h = (k[:, None] * x - n[:, None] * np.logaddexp(0, x)).sum(axis=0) - 0.5 * t**2 / tau_u**2
        total += logsumexp(np.log(w) + z**2 + h) + np.log(s) - np.log(tau_u) - 0.5 * np.log(2 * np.pi)
    return total


@pytest.mark.parametrize(
    ("rollouts", "fixed_n", "extra_groups", "tau_u", "spread"),
    [
        (8, True, 3, 0.7, 0.6),  # the common case: equal integer rollouts (one integer power per node)
        (8, False, 3, 0.7, 0.6),  # unequal rollouts: logarithms per group
        (512, True, 30, 3.0, 3.0),  # large powers and ratios: the logarithmic fallback
        (64, True, 5, 4.0, 25.0),  # curves at +-25 logits: e_g beyond 1e30 at the mode
    ],
    ids=["same-rollouts", "varying-rollouts", "large-powers", "saturated-cells"],
)
@pytest.mark.parametrize("nodes", [1, 4, 5, 7])
def test_binomial_part_is_the_rule_written_out(rollouts, fixed_n, extra_groups, tau_u, spread, nodes):
    data, params = _problem(seed=7, n_tasks=25, rollouts=rollouts, extra_groups=extra_groups, fixed_n=fixed_n)
    params["cu"] = np.random.default_rng(8).normal(-0.5, spread, len(params["cu"]))
    ref = _rule_directly(data, params, tau_u, nodes)
    # the reward part alone: a task sd of zero's limit is not needed, subtract the kernel's own
    # reward part (a kernel call with no binomial groups)
    inputs = _inputs(data)
    empty = list(inputs)
    for name in ("u_cell", "u_k", "u_n", "u_start", "u_end", "u_weight"):
        empty[MARGINAL_DATA.index(name)] = inputs[MARGINAL_DATA.index(name)][:0]
    value = _kernel(params, inputs, tau_u, 0.2, nodes)[0] - _kernel(params, empty, tau_u, 0.2, nodes)[0]
    assert np.isfinite(value)
    assert value == pytest.approx(ref, rel=1e-10, abs=1e-8)


def test_tiny_task_sds_are_the_likelihood_without_task_effects():
    """At task sd -> 0 the integral is the likelihood at theta = 0 (no funnel, finite gradient)."""
    data, params = _problem(seed=4)
    value, d_cu, d_cr, d_tu, d_tr, _ = _kernel(params, _inputs(data), 1e-5, 1e-6)
    cu, mu, lam = params["cu"][data["cell"]], expit(params["cr"])[data["cell"]], params["prec"][data["arm"]]
    plain = (data["k"] * cu - data["n"] * np.logaddexp(0, cu)).sum() + (
        0.5 * data["gn"] * np.log(lam / (2 * np.pi))
        - 0.5 * lam * (data["gq"] - 2 * mu * data["gs"] + data["gn"] * mu**2)
    ).sum()
    assert value == pytest.approx(plain, abs=1e-4)
    assert np.isfinite(d_cu).all() and np.isfinite(d_cr).all() and np.isfinite(d_tu) and np.isfinite(d_tr)


def test_extreme_curves_stay_finite():
    """Far from any posterior (warm-up): cells at logit +-40 and a wide task sd."""
    data, params = _problem(seed=6)
    params["cu"][:3] = [40.0, -40.0, 25.0]
    out = _kernel(params, _inputs(data), 4.0, 0.5)
    assert all(np.isfinite(np.asarray(v)).all() for v in out)


def test_op_in_python_and_numba_modes_equals_the_kernel():
    data, params = _problem(seed=3)
    inputs = _inputs(data)
    cu, cr, tu, tr, prec = pt.dvector("cu"), pt.dvector("cr"), pt.dscalar("tu"), pt.dscalar("tr"), pt.dvector("prec")
    # packed data as shared variables, as pm.Data gives them (constants would be baked into the
    # numba code)
    packed = pack_marginal_data(dict(zip(MARGINAL_DATA, inputs, strict=True)))
    out = log_transfer_marginal(
        cu, cr, tu, tr, prec, *(pytensor.shared(packed[k]) for k in ("m_float", "m_int", "m_layout"))
    )
    grads = pytensor.grad(out, [cu, cr, tu, tr, prec])
    want = _kernel(params, inputs, 0.7, 0.2)
    for mode in ("FAST_RUN", "NUMBA"):
        f = pytensor.function([cu, cr, tu, tr, prec], [out, *grads], mode=mode)
        got = f(params["cu"], params["cr"], 0.7, 0.2, params["prec"])
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_segments_and_argument_checks():
    order, start, end = task_segments(np.array([2, 0, 2, 1, 0]), 4)
    np.testing.assert_array_equal(np.array([2, 0, 2, 1, 0])[order], [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(start, [0, 2, 3, 5])
    np.testing.assert_array_equal(end, [2, 3, 5, 5])  # task 3 has no group: empty segment
    with pytest.raises(ValueError, match="nodes"):
        TransferMarginal(nodes=0)
    with pytest.raises(TypeError, match="takes 8 inputs"):
        TransferMarginal().make_node(np.zeros(2))
    assert NODES >= 5
