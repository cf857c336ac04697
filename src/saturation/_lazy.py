"""Heavy third-party modules bound at the top of a module, imported on first use.

``pm = lazy("pymc")`` reads like ``import pymc as pm`` but imports PyMC only when an
attribute of ``pm`` is first looked up (``pm.Model``): importing ``saturation.models.plateau``
then costs no PyMC, PyTensor or ArviZ import, and a command whose path never touches them
(``saturation describe``, the exact Gaussian plateau fit) never pays for them (seconds).
``sys.modules`` is left alone until the real import happens, so ``"pymc" in sys.modules``
still says whether PyMC was imported. Modules that subclass a class of a heavy package at
import time (``models.marginal``'s PyTensor ``Op``) import it directly instead.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _LazyModule(types.ModuleType):
    """Stands for the module ``name`` until an attribute is looked up, then delegates to it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_lazy_target"] = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # copy/pickle/introspection probes: not a use of the module
        target = self.__dict__["_lazy_target"]
        if target is None:
            target = importlib.import_module(self.__name__)
            self.__dict__["_lazy_target"] = target
        return getattr(target, attr)

    def __repr__(self) -> str:
        state = "imported" if self.__dict__["_lazy_target"] is not None else "not imported yet"
        return f"<lazy module {self.__name__!r} ({state})>"


def lazy(name: str) -> Any:
    """A stand-in for module ``name`` (e.g. ``"pymc"``, ``"scipy.stats"``) that imports it on
    first attribute access.

    Parameters
    ----------
    name : str
        The module's absolute name.

    Returns
    -------
    Any
        The stand-in (typed ``Any``: modules bind the real import under ``TYPE_CHECKING`` for mypy).
    """
    return _LazyModule(name)


class _DaskTypesOnceImported:
    """xarray's record of the dask duck-array module, answering "no dask array type" until
    ``dask.array`` is imported (no object can be a dask array before that), then the real one."""

    def __init__(self, factory: Any) -> None:
        self._factory = factory
        self._real: Any = None

    def _resolve(self) -> Any:
        if self._real is None:
            self._real = self._factory("dask")
        return self._real

    @property
    def type(self) -> tuple[type, ...]:
        if self._real is None and "dask.array" not in sys.modules:
            return ()
        return tuple(self._resolve().type)

    def __getattr__(self, attr: str) -> Any:  # module, version, available: the real record
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._resolve(), attr)


def _dask_collection_once_imported(real: Any) -> Any:
    def is_dask_collection(x: object) -> bool:
        # no dask collection exists before dask is imported (its graphs are dask objects)
        return "dask" in sys.modules and bool(real(x))

    is_dask_collection.__wrapped__ = real  # type: ignore[attr-defined]
    return is_dask_collection


def xarray_without_dask() -> None:
    """Stop xarray importing dask (0.1 s for ``dask``, 0.3-0.5 s for ``dask.array``) the first
    time it builds a Variable, while dask is not otherwise in use.

    xarray asks of every array it wraps whether it is a dask collection
    (``dask.base.is_dask_collection``) and a ``dask.array.Array``, importing dask to answer
    when dask is installed. Before dask is imported no object can be either (a dask array's
    class and its graph are dask's), so the answer is "no" without the import; once anything
    imports dask (a cluster, a chunked read) xarray asks dask again, as before. This replaces
    two private pieces of xarray (``xarray.namedarray.utils.is_dask_collection`` and the
    ``dask`` entry of ``xarray.namedarray.pycompat._cached_duck_array_modules``), each only
    when it is there in the expected form and not already replaced; otherwise xarray is left
    as it is (slower, same answers). ``tests/test_lazy.py`` checks both answers.
    """
    try:
        from xarray.namedarray import pycompat, utils
    except ImportError:  # pragma: no cover - an xarray without the namedarray package
        return
    cache = getattr(pycompat, "_cached_duck_array_modules", None)
    factory = getattr(pycompat, "DuckArrayModule", None)
    if isinstance(cache, dict) and factory is not None and "dask" not in cache:
        cache["dask"] = _DaskTypesOnceImported(factory)
    real = getattr(utils, "is_dask_collection", None)
    if callable(real) and not hasattr(real, "__wrapped__"):
        utils.is_dask_collection = _dask_collection_once_imported(real)
