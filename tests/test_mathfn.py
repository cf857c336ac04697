"""The normal and Student-t functions computed without SciPy (saturation.mathfn) against
SciPy's, and curves.expit against scipy.special.expit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr
from scipy import special

from saturation import curves, mathfn


def test_ndtr_is_scipys():
    x = np.concatenate([np.linspace(-37.0, 8.0, 901), [0.0, -1e-12, 1e-12]])
    got = np.array([mathfn.ndtr(v) for v in x])
    want = special.ndtr(x)
    rel = np.abs(got - want) / want
    assert rel[x > -8].max() <= 2e-14 and rel.max() <= 5e-13, (rel[x > -8].max(), rel.max())


def test_ndtri_is_scipys_and_handles_the_edges():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.random(3000), [1e-300, 1e-20, 0.5, 1 - 1e-16, 0.025, 0.975]])
    np.testing.assert_allclose(mathfn.ndtri(p), special.ndtri(p), rtol=2e-15, atol=1e-15)
    ranks = (np.arange(1, 2001) - 0.375) / (2000 + 0.25)  # rank normalisation's values, shaped
    assert mathfn.ndtri(ranks.reshape(40, 50)).shape == (40, 50)
    edges = mathfn.ndtri(np.array([0.0, 1.0, -0.1, 1.5, np.nan]))
    assert edges[0] == -np.inf and edges[1] == np.inf and np.isnan(edges[2:]).all()


def test_ndtri_is_the_standard_librarys_as241_vectorised():
    """The same rational approximations in the same order as ``NormalDist.inv_cdf``: the
    central region bit for bit, the tails (through NumPy's log) within two ulps."""
    import statistics

    rng = np.random.default_rng(2)
    p = np.concatenate([rng.random(20000), 10.0 ** -rng.uniform(0, 300, 5000), 1 - 10.0 ** -rng.uniform(0, 15, 5000)])
    p = p[(p > 0) & (p < 1)]
    want = np.array([statistics.NormalDist().inv_cdf(v) for v in p.tolist()])
    got = mathfn.ndtri(p)
    central = np.abs(p - 0.5) <= 0.425
    assert np.array_equal(got[central], want[central])
    np.testing.assert_allclose(got[~central], want[~central], rtol=4.5e-16, atol=0)


@pytest.mark.parametrize(("dfs", "rtol"), [((1, 2, 3, 5, 7.5, 10, 30), 1e-12), ((88, 150, 297, 1000), 1e-11)])
def test_t_cdf_tails_are_scipys(dfs, rtol):
    """The smaller tail (the p-value) to rtol of SciPy's stdtr, both signs, large t included."""
    rng = np.random.default_rng(1)
    for df in dfs:
        for t in np.concatenate([np.abs(rng.normal(0.0, 3.0, 200)), [0.01, 0.1, 6.0, 12.0, 40.0, 100.0, 1e4]]):
            want = special.stdtr(df, -t)
            assert abs(mathfn.t_cdf(-t, df) - want) <= rtol * want, (df, t)
            assert abs(mathfn.t_cdf(t, df) - special.stdtr(df, t)) <= 1e-15 + rtol * want


def test_t_cdf_closed_forms_near_zero_and_edges():
    """At 1 and 2 degrees of freedom the distribution function has closed forms (Cauchy;
    1/2 + t / (2 sqrt(2 + t^2))): exact to 1e-14 even at t = 1e-8, where SciPy's stdtr is
    3e-9 off; infinities and NaN."""
    for t in (-50.0, -3.0, -1e-3, -1e-8, 0.0):  # the lower tail, written without cancellation
        a, r = abs(t), math.sqrt(2 + t * t)
        cauchy = math.atan2(1.0, a) / math.pi  # 1/2 - atan(|t|)/pi
        assert math.isclose(mathfn.t_cdf(t, 1), cauchy, rel_tol=1e-14), t
        assert math.isclose(mathfn.t_cdf(t, 2), 1 / (r * (r + a)), rel_tol=1e-14), t
    for t in (1e-8, 0.7, 20.0):
        assert math.isclose(mathfn.t_cdf(t, 1), 0.5 + math.atan(t) / math.pi, rel_tol=1e-15)
    assert mathfn.t_cdf(np.inf, 4) == 1.0 and mathfn.t_cdf(-np.inf, 4) == 0.0 and math.isnan(mathfn.t_cdf(np.nan, 4))
    with pytest.raises(ValueError, match="degrees of freedom"):
        mathfn.t_cdf(1.0, 0)


def test_expit_is_scipys():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.normal(0.0, 8.0, 20000), [-709.0, -40.0, 0.0, 40.0, 800.0]])
    np.testing.assert_allclose(curves.expit(x), special.expit(x), rtol=0, atol=4e-16)
    assert curves.expit(800.0) == 1.0 and curves.expit(-800.0) == 0.0
    assert isinstance(curves.expit(0.3), float)  # a scalar for a scalar, as SciPy's
    labelled = xr.DataArray([0.0, 2.0], dims="step")
    assert isinstance(curves.expit(labelled), xr.DataArray)  # a DataArray stays one, as with SciPy's
