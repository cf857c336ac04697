"""What a hand-written model needs to be sampled by nutpie without compiling a PyMC graph.

nutpie samples a model through two C callbacks, the log density with its gradient and the
expansion of a draw into the stored variables, each passed one pointer of user data
(nutpie 0.16.8 ``compile_pymc.py:913-990``: ``_make_c_logp_func``, ``_make_c_expand_func``;
``CompiledPyMCModel._make_model``, :160-205, hands ``user_data.ctypes.data`` to both). The
kernels of :mod:`saturation.models.sigmoid_kernel` and :mod:`saturation.models.transfer_kernel`
are module-level ``numba.cfunc(..., cache=True)`` with these signatures whose user data is one
float64 block (its length first): they are compiled once per machine and loaded from numba's
cache after that, where nutpie's own callbacks close over the graph and are compiled again in
every process.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np
import pandas as pd

from saturation._lazy import import_nutpie

#: ``int64 logp(n_dim, x*, grad*, logp*, user_data*)``: 0, or nonzero for an invalid point
C_LOGP = numba.types.int64(
    numba.types.uint64,
    numba.types.CPointer(numba.types.double),
    numba.types.CPointer(numba.types.double),
    numba.types.CPointer(numba.types.double),
    numba.types.voidptr,
)
#: ``int64 expand(n_dim, n_expanded, x*, out*, user_data*)``
C_EXPAND = numba.types.int64(
    numba.types.uint64,
    numba.types.uint64,
    numba.types.CPointer(numba.types.double),
    numba.types.CPointer(numba.types.double),
    numba.types.voidptr,
)


@numba.njit(cache=True)
def block_at(data_: Any) -> np.ndarray:  # pragma: no cover - numba
    """The float64 data block behind a callback's user-data pointer (its length first)."""
    size = numba.carray(data_, (1,), np.float64)
    return numba.carray(data_, (int(size[0]),), np.float64)


#: 1/2 log(2 pi), the constant of Stirling's series
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@numba.njit(cache=True, error_model="numpy")
def lgamma_digamma(x: float) -> tuple[float, float]:
    """log Gamma(x) and digamma(x) together, for x > 0: one logarithm and one division where
    ``math.lgamma`` and a separate digamma take two of each (9 ns a pair against 15 ns). It raises
    nothing (``error_model="numpy"``, whichever kernel compiles it first): (inf, -inf) at 0,
    NaN at NaN; the kernels pass x > 0 (below 0 the recurrence gives log |Gamma(x)| and
    digamma where the product of the shifts is positive, NaN where it is negative).

    Notes
    -----
    Below 10 the recurrences :math:`\\log\\Gamma(x) = \\log\\Gamma(x + n) - \\log\\prod_{i<n}
    (x + i)` and :math:`\\psi(x) = \\psi(x + n) - \\sum_{i<n} 1 / (x + i)` move the argument
    to :math:`y = x + n \\ge 10`, where Stirling's series

    .. math::

        \\log\\Gamma(y) = (y - \\tfrac12)\\log y - y + \\tfrac12\\log 2\\pi + \\frac{1}{12y}
            - \\frac{1}{360y^3} + \\frac{1}{1260y^5} - \\frac{1}{1680y^7} + \\frac{1}{1188y^9}
            - \\frac{691}{360360y^{11}}

    and its derivative's series :math:`\\psi(y) = \\log y - \\frac{1}{2y} - \\frac{1}{12y^2} +
    \\frac{1}{120y^4} - \\frac{1}{252y^6} + \\frac{1}{240y^8} - \\frac{1}{132y^{10}}` share
    :math:`\\log y` and :math:`1/y`.
    Error against SciPy over [1e-6, 1e6], relative (absolute where the value is below 1):
    below 1e-14 for log Gamma, 1e-12 for digamma (``tests/models/test_kernel_abi.py``).
    """
    prod = 1.0
    shift = 0.0
    while x < 10.0:
        prod *= x
        shift += 1.0 / x
        x += 1.0
    lx = math.log(x)
    r = 1.0 / x
    f = r * r
    lg = (x - 0.5) * lx - x + _HALF_LOG_2PI
    tail = 1.0 / 1680 - f * (1.0 / 1188 - f * (691.0 / 360360))
    lg += r * (1.0 / 12 - f * (1.0 / 360 - f * (1.0 / 1260 - f * tail)))
    dg = lx - 0.5 * r - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))))
    if shift != 0.0:
        lg -= math.log(prod)
        dg -= shift
    return lg, dg


def nutpie_model(
    *,
    logp: Any,
    expand: Any,
    block: np.ndarray,
    n_dim: int,
    variables: Sequence[tuple[str, tuple[int, ...], tuple[str, ...]]],
    coords: dict[str, Sequence[Any]],
    initial_point: Callable[[Any], np.ndarray],
) -> Any:
    """A nutpie model (the interface of ``nutpie.compile_pymc_model``'s result) on cached
    callbacks ``logp`` and ``expand`` with the user data ``block``; ``variables`` are the
    expansion's (name, shape, dims) in its order. ``None`` when the installed nutpie does
    not have the interface this was written for (the caller then compiles its PyMC graph)."""
    compile_pymc = import_nutpie().compile_pymc  # nutpie without ArviZ (saturation._lazy)

    cls = getattr(compile_pymc, "CompiledPyMCModel", None)
    wanted = {"compiled_logp_func", "compiled_expand_func", "initial_point_func", "user_data", "shape_info"}
    if cls is None or not wanted <= {f.name for f in dataclasses.fields(cls)}:  # pragma: no cover
        return None
    names = [name for name, _, _ in variables]
    shapes = [tuple(shape) for _, shape, _ in variables]
    sizes = [int(np.prod(shape)) for shape in shapes]
    ends = np.cumsum(sizes)
    slices = [slice(int(e - s), int(e)) for s, e in zip(sizes, ends, strict=True)]
    block = np.ascontiguousarray(block, dtype=np.float64)
    block[0] = float(block.size)
    return cls(
        _n_dim=n_dim,
        dims={name: tuple(d) for name, _, d in variables},
        _coords={name: pd.Index(values) for name, values in coords.items()},  # as nutpie's own (:337-342)
        _shapes=dict(zip(names, shapes, strict=True)),
        compiled_logp_func=logp,
        compiled_expand_func=expand,
        initial_point_func=initial_point,
        shared_data={},
        user_data=block,
        n_expanded=int(ends[-1]),
        shape_info=(names, slices, shapes),
        logp_func=None,
        expand_func=None,
    )
