"""The saturation curve's log density and its gradient as cached numba code.

:func:`saturation.models.sigmoid.build_sigmoid_model` states the model as a PyMC graph.
nutpie compiles such a graph to numba in every new process (6-14 s for the curve, more
than the sampling), because the code it generates closes over the graph and cannot be
cached. The two unpaired likelihoods (Gaussian on per-step means, beta-binomial on per-step
successes) are small enough to write out by hand: here they are module-level numba
functions with ``cache=True``, compiled once per machine (the cache lives beside this file,
or in ``NUMBA_CACHE_DIR``) and loaded in milliseconds after that. They evaluate the same log
density as the PyMC graph, constant terms and the log transform's Jacobian included, and
its exact gradient; ``tests/models/test_sigmoid_kernel.py`` checks both against the graph's
own ``compile_logp`` / ``compile_dlogp`` at random points and the posteriors of the two
paths against each other.

The paired model (instance effects) stays on the PyMC graph.

Notes
-----
Parameters, per arm :math:`a` (the order of the graph's free variables): :math:`r_a =
\\operatorname{logit} R_{0a}`, :math:`\\alpha_a = \\operatorname{logit} A_a`, :math:`\\beta_a =
\\log B_a`, :math:`\\gamma_a = \\log C_a`, then the likelihood's nuisance :math:`\\eta_a`
(:math:`\\log \\tau_a` for the Gaussian, whose prior is HalfNormal on :math:`\\tau_a`, with
the Jacobian :math:`\\eta_a`; :math:`\\log\\kappa_a` for the beta-binomial).

With :math:`u = \\exp(B(\\gamma - \\log x))` and :math:`f = 1 / (1 + u)`, the mean is
:math:`\\mu = R_0 + (A - R_0) f`, clipped to :math:`[10^{-6}, 1 - 10^{-6}]` as the graph
clips it (zero gradient outside). Its partial derivatives:

.. math::

    \\partial_r \\mu = R_0 (1 - R_0)(1 - f), \\quad
    \\partial_\\alpha \\mu = A (1 - A) f, \\quad
    \\partial_\\gamma \\mu = -(A - R_0) f^2 u B, \\quad
    \\partial_\\beta \\mu = (\\gamma - \\log x)\\, \\partial_\\gamma \\mu .

Gaussian: :math:`\\ell = -\\tfrac12 \\log 2\\pi s^2 - (y - \\mu)^2 / 2 s^2` with :math:`s^2 =
v + \\tau^2`. Beta-binomial with :math:`a = \\mu\\kappa`, :math:`b = (1 - \\mu)\\kappa`:
:math:`\\ell = \\log\\binom{n}{k} + \\log B(k + a, n - k + b) - \\log B(a, b)`, whose
derivatives in :math:`a` and :math:`b` are differences of digamma functions.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from saturation.models.kernel_abi import C_EXPAND, C_LOGP, block_at, lgamma_digamma, nutpie_model

#: the likelihood codes the kernel reads from its data block
GAUSSIAN, BETA_BINOMIAL = 0, 1
LIKELIHOODS = {"gaussian": GAUSSIAN, "binomial": BETA_BINOMIAL}
#: the clip the graph applies to the mean
CLIP = 1e-6
#: the data block's header: its length, the likelihood code, arms, cells, then the priors
_HEAD = 4
_PRIORS = 6
_LOG_2PI = math.log(2.0 * math.pi)
_LOG_HALFNORMAL = 0.5 * math.log(2.0 / math.pi)


@numba.njit(cache=True)
def _normal_logp(z: float, mu: float, sd: float) -> float:
    d = (z - mu) / sd
    return -0.5 * _LOG_2PI - math.log(sd) - 0.5 * d * d


@numba.njit(cache=True, error_model="numpy")
def logp_grad(theta: np.ndarray, block: np.ndarray, grad: np.ndarray) -> float:
    """The log density at ``theta`` (unconstrained, the graph's order) and its gradient
    written into ``grad``; ``block`` is :func:`pack`'s data block."""
    like = int(block[1])
    n_arms = int(block[2])
    n_cells = int(block[3])
    p = _HEAD
    r0_sd, asym_sd, eff_sd, mid_sd, nuis_mu, nuis_sd = (
        block[p],
        block[p + 1],
        block[p + 2],
        block[p + 3],
        block[p + 4],
        block[p + 5],
    )
    p += _PRIORS
    r0_mu = block[p : p + n_arms]
    mid_mu = block[p + n_arms : p + 2 * n_arms]
    p += 2 * n_arms
    arm = block[p : p + n_cells]
    logx = block[p + n_cells : p + 2 * n_cells]
    y = block[p + 2 * n_cells : p + 3 * n_cells]
    n = block[p + 3 * n_cells : p + 4 * n_cells]
    v = block[p + 4 * n_cells : p + 5 * n_cells]
    lchoose = block[p + 5 * n_cells : p + 6 * n_cells]

    total = 0.0
    for i in range(5 * n_arms):
        grad[i] = 0.0
    r0 = np.empty(n_arms)
    asym = np.empty(n_arms)
    eff = np.empty(n_arms)
    nuis = np.empty(n_arms)  # tau (Gaussian) or kappa (beta-binomial)
    for a in range(n_arms):
        r, al, be, ga, et = (
            theta[a],
            theta[n_arms + a],
            theta[2 * n_arms + a],
            theta[3 * n_arms + a],
            theta[4 * n_arms + a],
        )
        total += _normal_logp(r, r0_mu[a], r0_sd) + _normal_logp(al, 0.0, asym_sd)
        total += _normal_logp(be, 0.0, eff_sd) + _normal_logp(ga, mid_mu[a], mid_sd)
        grad[a] = -(r - r0_mu[a]) / (r0_sd * r0_sd)
        grad[n_arms + a] = -al / (asym_sd * asym_sd)
        grad[2 * n_arms + a] = -be / (eff_sd * eff_sd)
        grad[3 * n_arms + a] = -(ga - mid_mu[a]) / (mid_sd * mid_sd)
        nuis[a] = math.exp(et)
        if like == GAUSSIAN:  # tau ~ HalfNormal(nuis_sd) on log tau, with its Jacobian
            tau = nuis[a]
            total += _LOG_HALFNORMAL - math.log(nuis_sd) - 0.5 * (tau / nuis_sd) ** 2 + et
            grad[4 * n_arms + a] = -((tau / nuis_sd) ** 2) + 1.0
        else:  # log kappa ~ N(nuis_mu, nuis_sd)
            total += _normal_logp(et, nuis_mu, nuis_sd)
            grad[4 * n_arms + a] = -(et - nuis_mu) / (nuis_sd * nuis_sd)
        r0[a] = 1.0 / (1.0 + math.exp(-r))
        asym[a] = 1.0 / (1.0 + math.exp(-al))
        eff[a] = math.exp(be)

    # beta-binomial terms that depend on the arm and the count only: kept while they repeat
    last_a, last_m, lg_km, common = -1, -1.0, 0.0, 0.0
    for c in range(n_cells):
        a = int(arm[c])
        ga = theta[3 * n_arms + a]
        gap = asym[a] - r0[a]
        du = ga - logx[c]
        u = math.exp(eff[a] * du)
        f = 1.0 / (1.0 + u)
        mu = r0[a] + gap * f
        inside = True
        if mu < CLIP:
            mu, inside = CLIP, False
        elif mu > 1.0 - CLIP:
            mu, inside = 1.0 - CLIP, False
        if like == GAUSSIAN:
            tau = nuis[a]
            s2 = v[c] + tau * tau
            d = y[c] - mu
            total += -0.5 * (_LOG_2PI + math.log(s2)) - 0.5 * d * d / s2
            dmu = d / s2
            # d/d log tau = tau * d/d tau, d/d tau = tau (d^2 / s2 - 1) / s2
            grad[4 * n_arms + a] += tau * tau * (d * d / s2 - 1.0) / s2
        else:
            kappa = nuis[a]
            k = y[c]
            m = n[c]
            al = mu * kappa
            be = (1.0 - mu) * kappa
            if a != last_a or m != last_m:
                last_a, last_m = a, m
                lg_k, dg_k = lgamma_digamma(kappa)
                lg_mk, dg_mk = lgamma_digamma(m + kappa)
                lg_km, common = lg_k - lg_mk, dg_k - dg_mk
            lg_ka, dg_ka = lgamma_digamma(k + al)
            lg_fb, dg_fb = lgamma_digamma(m - k + be)
            lg_a, dg_a = lgamma_digamma(al)
            lg_b, dg_b = lgamma_digamma(be)
            total += lchoose[c] + lg_ka + lg_fb - lg_a - lg_b + lg_km
            d_al = dg_ka - dg_a + common
            d_be = dg_fb - dg_b + common
            dmu = kappa * (d_al - d_be)
            grad[4 * n_arms + a] += kappa * (mu * d_al + (1.0 - mu) * d_be)
        if inside:
            grad[a] += dmu * r0[a] * (1.0 - r0[a]) * (1.0 - f)
            grad[n_arms + a] += dmu * asym[a] * (1.0 - asym[a]) * f
            dga = -gap * f * f * u * eff[a]
            grad[3 * n_arms + a] += dmu * dga
            grad[2 * n_arms + a] += dmu * dga * du
    return total


@numba.cfunc(C_LOGP, cache=True)
def _c_logp(dim: int, x_: Any, out_: Any, logp_: Any, data_: Any) -> int:  # pragma: no cover - numba
    """nutpie's log-density callback (:data:`~saturation.models.kernel_abi.C_LOGP`)."""
    block = block_at(data_)
    if dim != 5 * int(block[2]):
        return -1
    x = numba.carray(x_, (dim,))
    out = numba.carray(out_, (dim,))
    logp = numba.carray(logp_, (1,))
    try:  # as nutpie's own callback: an error (a division by zero far out in the tails) is an invalid point
        value = logp_grad(x, block, out)
    except Exception:
        return 1
    logp[0] = value
    for i in range(dim):
        if not math.isfinite(out[i]):
            return 3
    if not math.isfinite(value):
        return 4
    return 0


@numba.cfunc(C_EXPAND, cache=True)
def _c_expand(dim: int, expanded: int, x_: Any, out_: Any, data_: Any) -> int:  # pragma: no cover - numba
    """nutpie's draw-expansion callback: the free variables on their own scale (tau, not
    log tau), as the graph's expansion stores them."""
    block = block_at(data_)
    n_arms = int(block[2])
    if dim != 5 * n_arms or expanded != dim:
        return -1
    x = numba.carray(x_, (dim,))
    out = numba.carray(out_, (dim,))
    for i in range(dim):
        out[i] = x[i]
    if int(block[1]) == GAUSSIAN:
        for a in range(n_arms):
            out[4 * n_arms + a] = math.exp(x[4 * n_arms + a])
    return 0


def pack(values: dict[str, np.ndarray], likelihood: str, priors: Any) -> np.ndarray:
    """The kernel's data block: one float64 array (header, priors, per-arm prior centres,
    per-cell arm, log x, observation, count, sampling variance, log binomial coefficient).

    ``values`` are :func:`~saturation.models.sigmoid.build_sigmoid_model`'s data values;
    ``priors`` its :class:`~saturation.configs.SigmoidPriors`.
    """
    from scipy.special import gammaln

    code = LIKELIHOODS[likelihood]
    arm = np.asarray(values["arm_idx"], dtype=np.float64)
    n_arms = len(values["r0_mu"])
    n = np.asarray(values["n"], dtype=np.float64)
    if code == GAUSSIAN:
        y = np.asarray(values["mean"], dtype=np.float64)
        lchoose = np.zeros_like(y)
        nuis = (0.0, float(priors.step_sd))
    else:
        y = np.asarray(values["successes"], dtype=np.float64)
        lchoose = gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1)
        nuis = (float(priors.log_kappa_mu), float(priors.log_kappa_sd))
    head = [0.0, float(code), float(n_arms), float(len(arm))]
    prior = [priors.r0_sd, priors.asymptote_sd, priors.efficiency_sd, priors.midpoint_sd, *nuis]
    parts = [
        np.asarray(head + [float(q) for q in prior]),
        np.asarray(values["r0_mu"], dtype=np.float64),
        np.asarray(values["midpoint_mu"], dtype=np.float64),
        arm,
        np.log(np.asarray(values["x"], dtype=np.float64)),
        y,
        n,
        np.asarray(values["var_mean"], dtype=np.float64),
        lchoose,
    ]
    block = np.ascontiguousarray(np.concatenate(parts))
    block[0] = float(block.size)
    return block


def nuisance_name(likelihood: str) -> str:
    """The likelihood's nuisance variable as the graph names it."""
    return "tau" if LIKELIHOODS[likelihood] == GAUSSIAN else "log_kappa"


def initial_point(block: np.ndarray, seed: Any) -> np.ndarray:
    """A chain's start, as PyMC's initial point for nutpie: each prior's support point (the
    Normal's mean, the HalfNormal's scale) on the unconstrained scale, plus Uniform(-1, 1)
    jitter."""
    n_arms = int(block[2])
    p = _HEAD
    nuis_mu, nuis_sd = block[p + 4], block[p + 5]
    r0_mu = block[p + _PRIORS : p + _PRIORS + n_arms]
    mid_mu = block[p + _PRIORS + n_arms : p + _PRIORS + 2 * n_arms]
    nuis = math.log(nuis_sd) if int(block[1]) == GAUSSIAN else nuis_mu
    start = np.concatenate([r0_mu, np.zeros(2 * n_arms), mid_mu, np.full(n_arms, nuis)])
    rng = np.random.default_rng(seed)
    return start + rng.uniform(-1.0, 1.0, size=start.size)


def compiled_model(values: dict[str, np.ndarray], likelihood: str, priors: Any, arms: list[str], arm_dim: str) -> Any:
    """A nutpie model of the curve on the cached callbacks
    (:func:`~saturation.models.kernel_abi.nutpie_model`): nothing is compiled after the
    first use on a machine. ``None`` when the installed nutpie lacks the interface."""
    block = pack(values, likelihood, priors)
    names = ["r0_logit", "asymptote_logit", "log_efficiency", "log_midpoint", nuisance_name(likelihood)]
    n_arms = len(arms)
    return nutpie_model(
        logp=_c_logp,
        expand=_c_expand,
        block=block,
        n_dim=5 * n_arms,
        variables=[(name, (n_arms,), (arm_dim,)) for name in names],
        coords={arm_dim: arms},
        initial_point=lambda seed: initial_point(block, seed),
    )
