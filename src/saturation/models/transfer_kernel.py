"""The transfer model with integrated task effects as cached numba code.

:func:`saturation.models.transfer.build_transfer_model` states the model as a PyMC graph
around the integrated likelihood of :mod:`saturation.models.marginal`; nutpie compiled the
graph again in every process (about 10 s of a 20 s fit). Here the rest of the graph, the
priors of the random-walk sds, the knots (centred or non-centred), the task and reward
sds and the linear interpolation of the knots to the steps, is written out with its
gradient around the same likelihood kernel, as module-level numba functions with
``cache=True`` (:mod:`saturation.models.kernel_abi`). ``tests/models/test_transfer_kernel.py``
checks the value (up to a constant) and the gradient against the graph's
``compile_logp`` / ``compile_dlogp`` and the posterior against the graph's.

The two parts (ungraded, reward) share no parameter, and each part's likelihood reads only
its own curves and sds: the joint posterior is the product of the two parts' posteriors.
A fit samples each part alone (:func:`pack`'s ``part``: a block of that part's parameters
and data), each with its own step size and mass matrix, and joins the draws
(:func:`saturation.models.sampling.sample_compiled_parts`). The sampled task effects
(``task_effects="sampled"``) stay on the PyMC graph.

Notes
-----
Per part :math:`p` (ungraded, reward) and arm :math:`a`: :math:`\\sigma_{pa} \\sim
\\mathrm{Gamma}(8, 8 / \\bar\\sigma)` on :math:`\\log\\sigma_{pa}` (with its Jacobian); the
knots :math:`k_{pa0} \\sim N(m_p, s_0)`, :math:`k_{paj} - k_{pa,j-1} \\sim N(0, \\sigma_{pa})`
(centred), or :math:`k_{pa0} = m_p + s_0 z_{pa0}`, :math:`k_{paj} = k_{pa0} + \\sigma_{pa}
\\sum_{i \\le j} z_{pai}` with :math:`z \\sim N(0, 1)` (non-centred); the task sd
:math:`\\tau_p` and the reward sd :math:`\\rho_a` HalfNormal on their logs. The curves
:math:`c_{pa} = B k_{pa}` (:math:`B` steps x knots) and the precisions :math:`\\rho_a^{-2}`
enter :func:`~saturation.models.marginal.transfer_marginal_kernel`, whose gradient is
carried back through :math:`B`, the walk and the logs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from saturation.models.kernel_abi import C_EXPAND, C_LOGP, block_at, nutpie_model
from saturation.models.marginal import NODES, transfer_marginal_kernel, unpack_arrays

#: the two parts, in the graph's order
PARTS = ("ungraded", "reward")
CENTRED, NON_CENTRED = 0, 1
#: which parts a block's parameters and data hold (:func:`pack`'s ``part``)
BOTH, UNGRADED_ONLY, REWARD_ONLY = 0, 1, 2
#: the marginal's data arrays (rows of ``m_layout``, :data:`~saturation.models.marginal.MARGINAL_DATA`)
#: of each part: the binomial part's by task pattern, the reward part's by group and task
PART_ROWS = {"ungraded": range(0, 6), "reward": range(6, 13)}
#: header: length, arms, steps, knots, walk, quadrature nodes, the packed marginal data's
#: float, int and layout lengths, the parts (BOTH, UNGRADED_ONLY or REWARD_ONLY), then the
#: priors (intercept sd, rw sd, rw-sd Gamma shape, ungraded task sd, reward task sd, reward
#: sd) and the two knot-0 prior centres
_HEAD = 10
_PRIORS = 8
_LOG_2PI = math.log(2.0 * math.pi)
_LOG_HALFNORMAL = 0.5 * math.log(2.0 / math.pi)


@numba.njit(cache=True)
def _layout(block: np.ndarray) -> tuple[int, int, int, int, int, int, int, int, int]:
    """Sizes and the start of each region of the block: arms, steps, knots, walk, nodes,
    then the starts of the basis, the quadrature rule, the marginal's floats and ints."""
    n_arms, n_steps, n_knots = int(block[1]), int(block[2]), int(block[3])
    walk, nodes = int(block[4]), int(block[5])
    basis_at = _HEAD + _PRIORS
    rule_at = basis_at + n_steps * n_knots
    float_at = rule_at + 2 * nodes
    int_at = float_at + int(block[6])
    return n_arms, n_steps, n_knots, walk, nodes, basis_at, rule_at, float_at, int_at


@numba.njit(cache=True)
def _parts(block: np.ndarray) -> tuple[int, int]:
    """The parts [first, last) a block's parameters hold (0: ungraded, 1: reward)."""
    which = int(block[9])
    return (1 if which == REWARD_ONLY else 0), (1 if which == UNGRADED_ONLY else 2)


@numba.njit(cache=True)
def _halfnormal_log(eta: float, scale: float) -> tuple[float, float]:
    """log HalfNormal(e^eta; scale) + eta (the log transform's Jacobian) and its eta-derivative."""
    s = math.exp(eta)
    q = s / scale
    return _LOG_HALFNORMAL - math.log(scale) - 0.5 * q * q + eta, 1.0 - q * q


@numba.njit(cache=True)
def _knots(
    theta: np.ndarray, at: int, n_knots: int, walk: int, mu0: float, s0: float, sd: float, out: np.ndarray
) -> float:
    """The arm's knots from its parameters at ``theta[at:at + n_knots]`` into ``out``, and
    the walk's log prior (centred: of the knots given the sd; non-centred: of the z)."""
    lp = 0.0
    if walk == CENTRED:
        for j in range(n_knots):
            out[j] = theta[at + j]
        d = (out[0] - mu0) / s0
        lp += -0.5 * _LOG_2PI - math.log(s0) - 0.5 * d * d
        for j in range(1, n_knots):
            d = (out[j] - out[j - 1]) / sd
            lp += -0.5 * _LOG_2PI - math.log(sd) - 0.5 * d * d
    else:
        out[0] = mu0 + s0 * theta[at]
        lp += -0.5 * _LOG_2PI - 0.5 * theta[at] * theta[at]
        for j in range(1, n_knots):
            out[j] = out[j - 1] + sd * theta[at + j]
            lp += -0.5 * _LOG_2PI - 0.5 * theta[at + j] * theta[at + j]
    return lp


@numba.njit(cache=True)
def _knots_grad(
    theta: np.ndarray,
    at: int,
    n_knots: int,
    walk: int,
    mu0: float,
    s0: float,
    sd: float,
    knots: np.ndarray,
    g_knots: np.ndarray,
    grad: np.ndarray,
) -> float:
    """Adds to ``grad[at:at + n_knots]`` the gradient of the walk's prior and of the
    likelihood (``g_knots``: its gradient in the knots); returns the derivative in log sd."""
    d_log_sd = 0.0
    if walk == CENTRED:
        grad[at] += g_knots[0] - (knots[0] - mu0) / (s0 * s0)
        for j in range(1, n_knots):
            grad[at + j] += g_knots[j]
            d = knots[j] - knots[j - 1]
            grad[at + j] -= d / (sd * sd)
            grad[at + j - 1] += d / (sd * sd)
            d_log_sd += -1.0 + d * d / (sd * sd)
    else:
        tail = 0.0  # sum of g_knots[j] over j >= i
        for i in range(n_knots - 1, 0, -1):
            tail += g_knots[i]
            grad[at + i] += sd * tail - theta[at + i]
            d_log_sd += tail * sd * theta[at + i]
        tail += g_knots[0]
        grad[at] += s0 * tail - theta[at]
    return d_log_sd


@numba.njit(cache=True, error_model="numpy")
def logp_grad(theta: np.ndarray, block: np.ndarray, grad: np.ndarray) -> float:
    """The log density at ``theta`` (unconstrained, the graph's order: per part its log
    random-walk sds, its knots or their z, its log task sd; then the log reward sds) and its
    gradient written into ``grad``; ``block`` is :func:`pack`'s data block. A block of one
    part (:func:`pack`'s ``part``) holds that part's parameters (the reward part's with the
    log reward sds) and data only: the two parts share no parameter, so each part's
    posterior is its own factor of the joint one."""
    n_arms, n_steps, n_knots, walk, nodes, basis_at, rule_at, float_at, int_at = _layout(block)
    first, last = _parts(block)
    intercept_sd, rw_mean, shape = block[_HEAD], block[_HEAD + 1], block[_HEAD + 2]
    task_scale = (block[_HEAD + 3], block[_HEAD + 4])
    reward_scale = block[_HEAD + 5]
    mu0 = (block[_HEAD + 6], block[_HEAD + 7])
    basis = block[basis_at:rule_at].reshape((n_steps, n_knots))
    z, w = block[rule_at : rule_at + nodes], block[rule_at + nodes : float_at]
    floats = block[float_at:int_at]
    ints = block[int_at : int_at + int(block[7])].view(np.int64)
    layout = block[int_at + int(block[7]) : int_at + int(block[7]) + int(block[8])].view(np.int64).reshape((13, 2))
    rate = shape / rw_mean
    gamma_const = shape * math.log(rate) - math.lgamma(shape)
    part_size = n_arms + n_arms * n_knots + 1

    for i in range(grad.shape[0]):
        grad[i] = 0.0
    total = 0.0
    knots = np.zeros((2, n_arms, n_knots))
    curves = np.zeros((2, n_arms * n_steps))
    taus = np.ones(2)  # a part without data: its sd enters nothing
    for p in range(first, last):
        base = (p - first) * part_size
        for a in range(n_arms):
            eta = theta[base + a]
            sd = math.exp(eta)
            total += gamma_const + (shape - 1.0) * eta - rate * sd + eta
            grad[base + a] += shape - rate * sd
            at = base + n_arms + a * n_knots
            total += _knots(theta, at, n_knots, walk, mu0[p], intercept_sd, sd, knots[p, a])
            for t in range(n_steps):
                c = 0.0
                for k in range(n_knots):
                    c += basis[t, k] * knots[p, a, k]
                curves[p, a * n_steps + t] = c
        eta = theta[base + part_size - 1]
        value, d_eta = _halfnormal_log(eta, task_scale[p])
        total += value
        grad[base + part_size - 1] += d_eta
        taus[p] = math.exp(eta)
    rho_at = (last - first) * part_size
    prec = np.ones(n_arms)
    if last == 2:
        for a in range(n_arms):
            value, d_eta = _halfnormal_log(theta[rho_at + a], reward_scale)
            total += value
            grad[rho_at + a] += d_eta
            prec[a] = math.exp(-2.0 * theta[rho_at + a])

    d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12 = unpack_arrays(floats, ints, layout)
    value, d_cu, d_cr, d_tu, d_tr, d_prec = transfer_marginal_kernel(
        curves[0], curves[1], taus[0], taus[1], prec, d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12, z, w
    )
    total += value
    g_knots = np.empty(n_knots)
    for p in range(first, last):
        base = (p - first) * part_size
        d_c = d_cu if p == 0 else d_cr
        grad[base + part_size - 1] += (d_tu if p == 0 else d_tr) * taus[p]
        for a in range(n_arms):
            for k in range(n_knots):
                g = 0.0
                for t in range(n_steps):
                    g += d_c[a * n_steps + t] * basis[t, k]
                g_knots[k] = g
            sd = math.exp(theta[base + a])
            at_knots = base + n_arms + a * n_knots
            grad[base + a] += _knots_grad(
                theta, at_knots, n_knots, walk, mu0[p], intercept_sd, sd, knots[p, a], g_knots, grad
            )
    if last == 2:
        for a in range(n_arms):
            grad[rho_at + a] += -2.0 * prec[a] * d_prec[a]
    return total


@numba.cfunc(C_LOGP, cache=True)
def _c_logp(dim: int, x_: Any, out_: Any, logp_: Any, data_: Any) -> int:  # pragma: no cover - numba
    """nutpie's log-density callback (:data:`~saturation.models.kernel_abi.C_LOGP`)."""
    block = block_at(data_)
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
    """nutpie's draw-expansion callback: per part the random-walk sds, (non-centred: the z,)
    the knots and the task sd; then the reward sds; sds on their own scale (the block's
    parts only)."""
    block = block_at(data_)
    n_arms, n_knots, walk = int(block[1]), int(block[3]), int(block[4])
    first, last = _parts(block)
    x = numba.carray(x_, (dim,))
    out = numba.carray(out_, (expanded,))
    intercept_sd = block[_HEAD]
    part_size = n_arms + n_arms * n_knots + 1
    o = 0
    knots = np.empty(n_knots)
    for p in range(first, last):
        base = (p - first) * part_size
        for a in range(n_arms):
            out[o + a] = math.exp(x[base + a])
        o += n_arms
        if walk == NON_CENTRED:
            for i in range(n_arms * n_knots):
                out[o + i] = x[base + n_arms + i]
            o += n_arms * n_knots
        for a in range(n_arms):
            sd = math.exp(x[base + a])
            _knots(x, base + n_arms + a * n_knots, n_knots, walk, block[_HEAD + 6 + p], intercept_sd, sd, knots)
            for k in range(n_knots):
                out[o + a * n_knots + k] = knots[k]
        o += n_arms * n_knots
        out[o] = math.exp(x[base + part_size - 1])
        o += 1
    if last == 2:
        for a in range(n_arms):
            out[o + a] = math.exp(x[(last - first) * part_size + a])
    return 0


def pack(
    values: dict[str, np.ndarray], n_arms: int, walk: str, priors: Any, shape: float, part: str | None = None
) -> np.ndarray:
    """The kernel's data block: the header, the priors, the interpolation basis (steps x
    knots), the Gauss-Hermite rule and the marginal's packed data (ints stored bit for bit).

    ``values`` are the graph's data values with integrated task effects
    (:func:`~saturation.models.transfer.transfer_values`: ``basis``, ``prior_mu`` and the
    packed ``m_float``, ``m_int``, ``m_layout`` of
    :func:`~saturation.models.marginal.pack_marginal_data`); ``shape`` the random-walk sds'
    Gamma shape; ``part`` ("ungraded" or "reward"): a block of that part alone (its
    parameters, and the other part's data arrays left empty), None: both.
    """
    packed = values
    basis = np.asarray(values["basis"], dtype=np.float64)
    z, w = np.polynomial.hermite.hermgauss(NODES)
    ints = np.ascontiguousarray(packed["m_int"], dtype=np.int64).view(np.float64)
    rows = np.array(packed["m_layout"], dtype=np.int64)
    if part is not None:
        for other, at in PART_ROWS.items():
            if other != part:
                rows[list(at)] = 0  # an empty [0, 0) slice
    layout = np.ascontiguousarray(rows).ravel().view(np.float64)
    head = [
        0.0,
        float(n_arms),
        float(basis.shape[0]),
        float(basis.shape[1]),
        float(CENTRED if walk == "centred" else NON_CENTRED),
        float(NODES),
        float(packed["m_float"].size),
        float(ints.size),
        float(layout.size),
        float({None: BOTH, "ungraded": UNGRADED_ONLY, "reward": REWARD_ONLY}[part]),
    ]
    prior = [
        priors.intercept_sd,
        priors.rw_sd,
        shape,
        priors.task_sd,
        priors.reward_task_sd,
        priors.reward_sd,
        *np.asarray(values["prior_mu"], dtype=np.float64),
    ]
    block = np.concatenate(
        [np.asarray(head + [float(q) for q in prior]), basis.ravel(), z, w, packed["m_float"], ints, layout]
    )
    block[0] = float(block.size)
    return block


def variables(walk: str, arm_dim: str, parts: Sequence[str] = PARTS) -> list[tuple[str, tuple[str, ...]]]:
    """The expansion's variables (name, dims) in :func:`_c_expand`'s order, of ``parts``."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for part in parts:
        out.append((f"{part}_rw_sd", (arm_dim,)))
        if walk != "centred":
            out.append((f"{part}_knot_z", (arm_dim, "knot")))
        out += [(f"{part}_knot", (arm_dim, "knot")), (f"{part}_task_sd", ())]
    if "reward" in parts:
        out.append(("reward_sd", (arm_dim,)))
    return out


def initial_point(block: np.ndarray, seed: Any) -> np.ndarray:
    """A chain's start, as PyMC's initial point for nutpie: each prior's support point on the
    unconstrained scale (the Gamma's and HalfNormal's: their mean and scale; the centred
    knots: the knot-0 prior centre) plus Uniform(-1, 1) jitter."""
    n_arms, n_knots = int(block[1]), int(block[3])
    walk = int(block[4])
    first, last = _parts(block)
    start: list[np.ndarray] = []
    for p in range(first, last):
        start.append(np.full(n_arms, math.log(block[_HEAD + 1])))
        centre = block[_HEAD + 6 + p] if walk == CENTRED else 0.0
        start.append(np.full(n_arms * n_knots, centre))
        start.append(np.array([math.log(block[_HEAD + 3 + p])]))
    if last == 2:
        start.append(np.full(n_arms, math.log(block[_HEAD + 5])))
    flat = np.concatenate(start)
    return flat + np.random.default_rng(seed).uniform(-1.0, 1.0, size=flat.size)


def compiled_model(
    values: dict[str, np.ndarray],
    walk: str,
    priors: Any,
    shape: float,
    coords: dict[str, Sequence[Any]],
    arm_dim: str,
    part: str | None = None,
) -> Any:
    """A nutpie model of the transfer model (integrated task effects) on the cached
    callbacks; ``coords`` must name ``arm_dim`` and ``"knot"``; ``part`` ("ungraded" or
    "reward"): that part's model alone (:func:`pack`), None: both. ``None`` when the installed
    nutpie lacks the interface (:func:`~saturation.models.kernel_abi.nutpie_model`)."""
    n_arms, n_knots = len(coords[arm_dim]), len(coords["knot"])
    block = pack(values, n_arms, walk, priors, shape, part)
    sizes = {(arm_dim,): (n_arms,), (arm_dim, "knot"): (n_arms, n_knots), (): ()}
    parts = PARTS if part is None else (part,)
    n_dim = len(parts) * (n_arms + n_arms * n_knots + 1) + (n_arms if "reward" in parts else 0)
    return nutpie_model(
        logp=_c_logp,
        expand=_c_expand,
        block=block,
        n_dim=n_dim,
        variables=[(name, sizes[dims], dims) for name, dims in variables(walk, arm_dim, parts)],
        coords={arm_dim: coords[arm_dim], "knot": coords["knot"]},
        initial_point=lambda seed: initial_point(block, seed),
    )
