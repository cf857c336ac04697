"""Task effects integrated out by adaptive Gauss-Hermite quadrature: value against a dense
grid, gradient against finite differences, the same in PyTensor's C and numba modes."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import expit, logsumexp

from saturation.models.marginal import NODES, TaskMarginal, log_task_marginal, task_segments

GRID = np.linspace(-12.0, 12.0, 4001)


def _problem(kind: str, seed: int = 1, n_tasks: int = 40, n_groups: int = 110):
    rng = np.random.default_rng(seed)
    task = rng.integers(0, n_tasks, n_groups)
    task[:n_tasks] = np.arange(n_tasks)  # every task has a group
    c = rng.normal(-0.4, 0.6, n_groups)
    n = np.full(n_groups, 8.0)
    if kind == "binomial":
        a, b = rng.binomial(8, 0.35, n_groups).astype(float), n
        d = prec = np.ones(n_groups)
    else:
        a = rng.integers(0, 9, n_groups).astype(float)  # graded count, may be 0
        mu = expit(c + rng.normal(0, 0.5, n_groups))
        y = [rng.normal(m, 0.2, int(k)) for m, k in zip(mu, a, strict=True)]
        b = np.array([v.sum() for v in y])
        d = np.array([(v**2).sum() for v in y])
        prec = np.full(n_groups, 1 / 0.2**2)
    return task, c, a, b, d, prec


def _brute(kind, task, c, a, b, d, prec, tau):
    """log of the integral on a dense grid (trapezoid-free Riemann sum; the integrand is ~0 at
    the ends)."""
    x = c[:, None] + GRID[None, :]
    if kind == "binomial":
        ll = a[:, None] * x - b[:, None] * np.logaddexp(0, x)
    else:
        r = expit(x)
        ll = -0.5 * prec[:, None] * (d[:, None] - 2 * r * b[:, None] + a[:, None] * r * r)
    tot = np.zeros((task.max() + 1, len(GRID)))
    np.add.at(tot, task, ll)
    lp = -0.5 * (GRID / tau) ** 2 - np.log(tau) - 0.5 * np.log(2 * np.pi)
    return float(logsumexp(tot + lp, axis=1).sum() + tot.shape[0] * np.log(GRID[1] - GRID[0]))


def _compiled(kind, task, a, b, d, mode):
    order, start, end = task_segments(task, task.max() + 1)
    cv, tau, pv = pt.dvector("c"), pt.dscalar("tau"), pt.dvector("prec")
    out = log_task_marginal(kind, cv, tau, a[order], b[order], d[order], pv, start, end)
    grads = pytensor.grad(out, [cv, tau, pv])
    return order, pytensor.function([cv, tau, pv], [out, *grads], mode=mode)


@pytest.mark.parametrize("kind", ["binomial", "gaussian"])
@pytest.mark.parametrize("tau", [0.05, 0.5, 1.2])
def test_value_matches_a_dense_grid(kind, tau):
    task, c, a, b, d, prec = _problem(kind)
    order, f = _compiled(kind, task, a, b, d, "FAST_RUN")
    value = f(c[order], tau, prec[order])[0]
    ref = _brute(kind, task, c, a, b, d, prec, tau)
    # per task the 7-node rule is accurate to ~1e-4 on these small tasks; at a wide task sd the
    # reward likelihood's flat tail (expit saturates) is harder: 6e-4 per task at sd 1.2
    per_task = 1e-3 if tau > 1 else 2e-4
    assert value == pytest.approx(ref, abs=per_task * (task.max() + 1))


@pytest.mark.parametrize("kind", ["binomial", "gaussian"])
def test_gradient_matches_finite_differences(kind):
    task, c, a, b, d, prec = _problem(kind, seed=2)
    order, f = _compiled(kind, task, a, b, d, "FAST_RUN")
    c, prec, tau, eps = c[order], prec[order], 0.6, 1e-6
    _, dc, dtau, dprec = f(c, tau, prec)
    for j in (0, 7, 50):
        e = np.zeros_like(c)
        e[j] = eps
        fd = (f(c + e, tau, prec)[0] - f(c - e, tau, prec)[0]) / (2 * eps)
        assert dc[j] == pytest.approx(fd, rel=2e-3, abs=1e-5)
    fd_tau = (f(c, tau + eps, prec)[0] - f(c, tau - eps, prec)[0]) / (2 * eps)
    # the quadrature's centre and scale are held fixed in the gradient: exact to quadrature error
    assert dtau == pytest.approx(fd_tau, rel=2e-3)
    if kind == "gaussian":
        e = np.zeros_like(prec)
        e[3] = 1e-3
        fd_prec = (f(c, tau, prec + e)[0] - f(c, tau, prec - e)[0]) / 2e-3
        assert dprec[3] == pytest.approx(fd_prec, rel=2e-3)


def test_numba_mode_equals_python_mode():
    task, c, a, b, d, prec = _problem("binomial", seed=3)
    order, f_c = _compiled("binomial", task, a, b, d, "FAST_RUN")
    _, f_n = _compiled("binomial", task, a, b, d, "NUMBA")
    for x, y in zip(f_c(c[order], 0.7, prec[order]), f_n(c[order], 0.7, prec[order]), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12)


def test_tiny_task_sd_is_the_likelihood_without_task_effects():
    """At task sd -> 0 the integral is the likelihood at theta = 0 (no funnel, finite gradient)."""
    task, c, a, b, d, prec = _problem("binomial", seed=4)
    order, f = _compiled("binomial", task, a, b, d, "FAST_RUN")
    value, dc, dtau, _ = f(c[order], 1e-4, prec[order])
    assert value == pytest.approx(float((a * c - b * np.logaddexp(0, c)).sum()), abs=1e-3)
    assert np.isfinite(dc).all() and np.isfinite(dtau)


def test_segments_and_argument_checks():
    order, start, end = task_segments(np.array([2, 0, 2, 1, 0]), 4)
    np.testing.assert_array_equal(np.array([2, 0, 2, 1, 0])[order], [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(start, [0, 2, 3, 5])
    np.testing.assert_array_equal(end, [2, 3, 5, 5])  # task 3 has no group: empty segment
    with pytest.raises(ValueError, match="kind must be one of"):
        TaskMarginal("poisson")
    with pytest.raises(ValueError, match="nodes"):
        TaskMarginal("binomial", nodes=0)
    assert NODES >= 5
