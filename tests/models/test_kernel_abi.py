"""The special functions the hand-written kernels share, against SciPy's."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

from saturation.models import kernel_abi

# both sides of the recurrence's threshold (10), integers, and the beta-binomial's range
X = np.concatenate(
    [np.geomspace(1e-6, 1e6, 400), np.arange(1.0, 50.0), 10.0 + np.array([-1e-12, 0.0, 1e-12]), [9.999, 10.001]]
)


def test_lgamma_and_digamma_together_are_scipys():
    pairs = np.array([kernel_abi.lgamma_digamma(v) for v in X])
    np.testing.assert_allclose(pairs[:, 0], gammaln(X), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(pairs[:, 1], digamma(X), rtol=1e-12, atol=1e-12)


def test_lgamma_and_digamma_at_the_edges_raise_nothing():
    assert kernel_abi.lgamma_digamma(0.0) == (np.inf, -np.inf)
    assert np.isnan(kernel_abi.lgamma_digamma(np.nan)).all()
    # below 0 the recurrence's log |Gamma| (unused by the kernels, whose arguments are positive)
    np.testing.assert_allclose(kernel_abi.lgamma_digamma(-1.5), (gammaln(-1.5), digamma(-1.5)), rtol=1e-13)
