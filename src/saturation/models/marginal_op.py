"""The integrated transfer likelihood of :mod:`saturation.models.marginal` as one PyTensor
``Op`` (value and exact gradient from the numba kernel), for the PyMC graph of
:func:`saturation.models.transfer.build_transfer_model`. Kept apart from the kernel so that
the cached kernel path (:mod:`saturation.models.transfer_kernel`) imports no PyTensor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

from saturation.models.marginal import NODES, transfer_marginal_kernel, unpack_arrays


class TransferMarginal(Op):
    """PyTensor Op ``(cu, cr, tau_u, tau_r, prec, *data) -> (logp, *gradient)`` around
    :func:`transfer_marginal_kernel`. Only the first output is meant to be used; the others are
    its gradient (the Op's ``grad``)."""

    __props__ = ("nodes",)
    #: number of differentiable inputs (cu, cr, tau_u, tau_r, prec); the rest are data
    N_PARAMS = 5
    #: packed data: floats, ints, layout (:func:`pack_marginal_data`)
    N_DATA = 3

    def __init__(self, nodes: int = NODES):
        if not 1 <= nodes <= 20:
            raise ValueError(f"nodes must be in 1..20, got {nodes}")
        self.nodes = int(nodes)
        #: Gauss-Hermite nodes and weights (not a prop: derived from ``nodes``)
        self.rule = np.polynomial.hermite.hermgauss(self.nodes)

    def make_node(self, *inputs: Any) -> Apply:
        """Inputs: cu, cr, tau_u, tau_r, prec, then the packed data (:func:`pack_marginal_data`)."""
        if len(inputs) != self.N_PARAMS + self.N_DATA:
            raise TypeError(f"TransferMarginal takes {self.N_PARAMS + self.N_DATA} inputs, got {len(inputs)}")
        floats = [pt.as_tensor_variable(v).astype("float64") for v in inputs[:5]]
        data = [pt.as_tensor_variable(v) for v in inputs[5:]]
        data = [data[0].astype("float64"), data[1].astype("int64"), data[2].astype("int64")]
        if floats[0].ndim != 1 or floats[1].ndim != 1 or floats[2].ndim != 0 or floats[3].ndim != 0:
            raise ValueError("TransferMarginal: cu, cr must be vectors, tau_u, tau_r scalars")
        outputs = [pt.dscalar(), pt.dvector(), pt.dvector(), pt.dscalar(), pt.dscalar(), pt.dvector()]
        return Apply(self, [*floats, *data], outputs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        cu, cr, tau_u, tau_r, prec, floats, ints, layout = inputs
        z, w = self.rule
        out = transfer_marginal_kernel(
            cu, cr, float(tau_u), float(tau_r), prec, *unpack_arrays(floats, ints, layout), z, w
        )
        for slot, value in zip(output_storage, out, strict=True):
            slot[0] = np.asarray(value)

    def grad(self, inputs: Sequence[Any], output_grads: Sequence[Any]) -> list[Any]:
        # first-order only: the extra outputs are the gradient of the first
        _, *grads = self.make_node(*inputs).outputs
        g = output_grads[0]
        return [g * v for v in grads] + [DisconnectedType()() for _ in range(self.N_DATA)]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        # every output depends on the parameters (the data inputs carry no gradient)
        return [[i < self.N_PARAMS] * 6 for i in range(self.N_PARAMS + self.N_DATA)]


@register_funcify_default_op_cache_key(TransferMarginal)
def _numba_transfer_marginal(op: TransferMarginal, node: Any = None, **kwargs: Any) -> Any:
    z, w = op.rule

    @numba.njit
    def transfer_marginal(cu, cr, tau_u, tau_r, prec, floats, ints, layout):
        d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12 = unpack_arrays(floats, ints, layout)
        value, d_cu, d_cr, d_tu, d_tr, d_prec = transfer_marginal_kernel(
            cu, cr, tau_u.item(), tau_r.item(), prec, d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12, z, w
        )
        return np.asarray(value), d_cu, d_cr, np.asarray(d_tu), np.asarray(d_tr), d_prec

    return transfer_marginal


def log_transfer_marginal(cu: Any, cr: Any, tau_u: Any, tau_r: Any, prec: Any, *data: Any, nodes: int = NODES) -> Any:
    """The transfer model's log likelihood (a PyTensor scalar) with both parts' task effects
    integrated out; ``data`` = the packed (floats, ints, layout) of :func:`pack_marginal_data`."""
    return TransferMarginal(nodes).make_node(cu, cr, tau_u, tau_r, prec, *data).outputs[0]
