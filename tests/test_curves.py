"""Curve functions: values, tensors and numerical inverses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saturation import curves


def test_hinge_values():
    t = np.arange(0.0, 11.0)
    y = curves.hinge(t, start=1.0, early_slope=0.5, late_slope=0.1, changepoint=4.0)
    assert y[0] == 1.0
    assert y[4] == pytest.approx(3.0)
    assert y[10] == pytest.approx(3.0 + 0.6)
    yj = curves.hinge(t, start=1.0, early_slope=0.5, late_slope=0.1, changepoint=4.0, jump=0.2)
    np.testing.assert_allclose(yj - y, np.where(t >= 4, 0.2, 0.0))


def test_hinge_is_the_same_on_tensors():
    import pytensor.tensor as pt

    t = np.linspace(0, 20, 41)
    c = pt.dscalar("c")
    expr = curves.hinge(pt.as_tensor(t), start=0.3, early_slope=0.02, late_slope=-0.001, changepoint=c)
    got = expr.eval({c: 7.5})
    np.testing.assert_allclose(got, curves.hinge(t, start=0.3, early_slope=0.02, late_slope=-0.001, changepoint=7.5))


def test_exp_saturation():
    t = np.array([0.0, 1e6])
    y = curves.exp_saturation(t, asymptote=0.9, start=0.5, scale=3.0)
    np.testing.assert_allclose(y, [0.5, 0.9])


@settings(max_examples=40, deadline=None)
@given(st.floats(0.02, 0.98), st.floats(0.0, 2.5))
def test_logitnormal_location_inverts_mean(mean, sd):
    loc = curves.logitnormal_location(mean, sd)
    assert float(curves.logitnormal_mean(loc, sd)) == pytest.approx(mean, abs=1e-9)


def test_logitnormal_mean_matches_monte_carlo():
    rng = np.random.default_rng(0)
    z = rng.standard_normal(2_000_000)
    mc = curves.expit(0.7 + 1.3 * z).mean()
    assert float(curves.logitnormal_mean(0.7, 1.3)) == pytest.approx(mc, abs=1e-3)


def test_logitnormal_mean_matches_adaptive_quadrature_and_saturates_without_warnings():
    """Against scipy's adaptive quadrature of the integral on a grid of locations and sds
    (broadcast as the transfer fit calls it), and at locations where expit is 0 or 1 to
    double precision (no overflow warning: warnings are errors in the tests)."""
    from scipy import integrate, stats

    loc = np.array([-8.0, -2.5, -0.3, 0.0, 1.1, 4.0, 9.0])
    sd = np.array([[0.0], [0.4], [1.3], [3.0]])
    got = curves.logitnormal_mean(loc, sd)
    for i, s in enumerate(sd[:, 0]):
        for j, m in enumerate(loc):
            want = (
                curves.expit(m)
                if s == 0
                else integrate.quad(
                    lambda z, m=m, s=s: curves.expit(m + s * z) * stats.norm.pdf(z), -40, 40, epsabs=1e-14
                )[0]
            )
            assert got[i, j] == pytest.approx(want, rel=0, abs=1e-13 if s <= 1.5 else 3e-7)  # see curves._GH_NODES
    far = curves.logitnormal_mean(np.array([-1e308, -800.0, 800.0, 1e308]), 2.0)
    np.testing.assert_allclose(far, [0.0, 0.0, 1.0, 1.0], atol=1e-300)


@settings(max_examples=30, deadline=None)
@given(st.floats(0.05, 0.9), st.floats(0.05, 0.95))
def test_pass_at_k_concentration_inverse(mean, frac):
    k = 8
    upper = 1 - (1 - mean) ** k
    target = mean + frac * (upper - mean)
    kappa = curves.beta_concentration_for_pass_at_k(mean, target, k)
    assert float(curves.pass_at_k_beta(mean, kappa, k)) == pytest.approx(target, abs=1e-6)


def test_pass_at_k_matches_monte_carlo():
    rng = np.random.default_rng(1)
    p = rng.beta(0.3 * 2, 0.7 * 2, size=1_000_000)
    mc = (1 - (1 - p) ** 8).mean()
    assert float(curves.pass_at_k_beta(0.3, 2.0, 8)) == pytest.approx(mc, abs=2e-3)


def test_unreachable_pass_at_k_raises():
    with pytest.raises(ValueError, match="strictly between"):
        curves.beta_concentration_for_pass_at_k(0.5, 0.4, 8)


@pytest.mark.parametrize("sd", [0.3, 1.0, 2.0])
def test_closed_form_logitnormal_location_matches_the_bisection(sd):
    """The paired sigmoid's likelihood uses the closed-form location (three Newton steps);
    it must give the population mean the simulators' bisection gives."""
    mean = np.linspace(0.005, 0.995, 199)
    loc = curves.logitnormal_location_newton(np, mean, sd)
    tol = {0.3: 1e-12, 1.0: 1e-6, 2.0: 5e-4}[sd]
    assert np.abs(curves.logitnormal_mean(loc, sd) - mean).max() < tol
    inner = (mean > 0.02) & (mean < 0.98)
    np.testing.assert_allclose(loc[inner], curves.logitnormal_location(mean[inner], sd), atol=10 * tol)
    import pytensor
    import pytensor.tensor as pt

    m, s = pt.dvector("m"), pt.dscalar("s")
    # the same graph in PyTensor's Python implementations: no C compile (25 s in a clean clone)
    got = pytensor.function([m, s], curves.logitnormal_location_newton(pt, m, s), mode="FAST_COMPILE")(mean, sd)
    np.testing.assert_allclose(got, loc, rtol=1e-12)


def test_normal_pdf_is_scipys():
    """curves.normal_pdf gives scipy.stats.norm.pdf's numbers (the plateau's Bayes factor
    reads it without importing scipy.stats)."""
    from scipy import stats

    rng = np.random.default_rng(0)
    scale = rng.uniform(1e-6, 5.0, size=50)
    for x, loc in ((0.0, 0.0), (rng.normal(size=50), 0.3), (2.5, rng.normal(size=50))):
        assert np.array_equal(curves.normal_pdf(x, loc, scale), stats.norm.pdf(x, loc, scale))
    assert np.isnan(curves.normal_pdf(0.0, 0.0, -1.0)) and np.isnan(stats.norm.pdf(0.0, 0.0, -1.0))
