"""The special functions the hand-written kernels share, against SciPy's."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

from saturation.models import kernel_abi

# both sides of the recurrence's threshold (10), integers, and the beta-binomial's range
X = np.concatenate(
    [np.geomspace(1e-6, 1e6, 400), np.arange(1.0, 50.0), 10.0 + np.array([-1e-12, 0.0, 1e-12]), [9.999, 10.001]]
)


def test_digamma_is_scipys():
    np.testing.assert_allclose([kernel_abi.digamma(v) for v in X], digamma(X), rtol=1e-12, atol=1e-12)


def test_lgamma_and_digamma_together_are_scipys():
    pairs = np.array([kernel_abi.lgamma_digamma(v) for v in X])
    np.testing.assert_allclose(pairs[:, 0], gammaln(X), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(pairs[:, 1], digamma(X), rtol=1e-12, atol=1e-12)
    # and the digamma half is the lone digamma's to rounding
    np.testing.assert_allclose(pairs[:, 1], [kernel_abi.digamma(v) for v in X], rtol=1e-14, atol=1e-14)
