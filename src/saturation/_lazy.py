"""What keeps a light command light (issue 45): heavy packages imported on first use
(:func:`lazy`), xarray kept from importing dask while dask is not in use
(:func:`xarray_without_dask`), and an InferenceData's groups held as Datasets until an
``arviz.InferenceData`` is asked for (:class:`DeferredInferenceData`).

``pm = lazy("pymc")`` reads like ``import pymc as pm`` but imports PyMC only when an
attribute of ``pm`` is first looked up (``pm.Model``): importing ``saturation.models.plateau``
then costs no PyMC, PyTensor or ArviZ import, and a command whose path never touches them
(``saturation describe``, the exact Gaussian plateau fit) never pays for them (seconds).
``sys.modules`` is left alone until the real import happens, so ``"pymc" in sys.modules``
still says whether PyMC was imported. Modules that subclass a class of a heavy package at
import time (``models.marginal``'s PyTensor ``Op``) import it directly instead.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.metadata
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

if TYPE_CHECKING:
    import arviz as az


class _LazyModule(types.ModuleType):
    """Stands for the module ``name`` until an attribute is looked up, then delegates to it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_lazy_target"] = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__") and attr not in ("__version__", "__all__"):
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


def posterior_dataset(draws: dict[str, np.ndarray], coords: dict[str, Any], dims: dict[str, list[str]]) -> xr.Dataset:
    """The posterior group ``arviz.from_dict(posterior=draws, coords=coords, dims=dims)``
    makes, without importing ArviZ: every array (chain, draw, *dims) with integer ``chain``
    and ``draw`` coordinates from 0, ``coords`` for the named dims, and ArviZ's two attrs
    (``created_at``, ``arviz_version``). Tested identical to ArviZ's (``created_at`` aside)."""
    data_vars = {}
    for name, ary in draws.items():
        ary = np.asarray(ary)
        extra = list(dims.get(name, []))
        if ary.ndim != 2 + len(extra):
            raise ValueError(f"{name}: shape {ary.shape} does not match dims (chain, draw, {extra})")
        shape = dict(zip(["chain", "draw", *extra], ary.shape, strict=True))
        values = {"chain": np.arange(shape["chain"]), "draw": np.arange(shape["draw"])} | {d: coords[d] for d in extra}
        data_vars[name] = xr.DataArray(
            ary,
            coords={d: xr.IndexVariable((d,), data=np.asarray(values[d])) for d in shape},
            dims=list(shape),
        )
    attrs = {
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "arviz_version": importlib.metadata.version("arviz"),
    }
    return xr.Dataset(data_vars=data_vars, attrs=attrs)


class DeferredInferenceData:
    """The groups of an InferenceData, held as xarray Datasets until an ``arviz.InferenceData``
    is asked for (:meth:`to_inference_data`): a fit (the exact sampler's, or nutpie's draws
    read by :func:`saturation.models.sampling.trace_groups`) reads, replaces and extends its
    groups as it would an InferenceData's (``posterior``, ``idata[name]``, assignment,
    ``add_groups``, ``groups``, ``get``) without importing ArviZ (more than a second); a fit
    object hands out the real one (:class:`InferenceDataField`), built from the same
    Datasets in the same order. A group may be added as a function that makes it
    (:meth:`add_deferred_group`): it is made the first time it is read, so a command that
    never reads it (the plateau fit's pointwise log-likelihood, read only by LOO and by a
    saved InferenceData) never pays for it."""

    def __init__(self, posterior: xr.Dataset, **groups: xr.Dataset) -> None:
        self._groups: dict[str, xr.Dataset | Callable[[], xr.Dataset]] = {"posterior": posterior}
        #: the InferenceData's own attributes (``InferenceData.attrs``)
        self.attrs: dict[str, Any] = {}
        self.add_groups(**groups)

    def _group(self, name: str) -> xr.Dataset:
        value = self._groups[name]
        if not isinstance(value, xr.Dataset):  # a deferred group: made once, on first read
            value = self._groups[name] = value()
        return value

    def __getattr__(self, name: str) -> xr.Dataset:
        if name in self.__dict__.get("_groups", {}):
            return self._group(name)
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        # a group is replaced as on an InferenceData (``idata.posterior = ...``)
        if name in self.__dict__.get("_groups", {}):
            if not isinstance(value, xr.Dataset):
                raise TypeError(f"{name}: a Dataset is needed, got {type(value).__name__}")
            self._groups[name] = value
        else:
            super().__setattr__(name, value)

    def __getitem__(self, name: str) -> xr.Dataset:
        return self._group(name)

    def __contains__(self, name: object) -> bool:
        return name in self._groups

    def groups(self) -> list[str]:
        """The group names, in the order they were added."""
        return list(self._groups)

    def get(self, name: str, default: Any = None) -> Any:
        """The group ``name``, or ``default``."""
        return self._group(name) if name in self._groups else default

    def add_groups(self, **groups: xr.Dataset) -> None:
        """Add Dataset groups (as ``InferenceData.add_groups`` with Datasets: empty ones skipped)."""
        for name, ds in groups.items():
            if name in self._groups:
                raise ValueError(f"[{name!r}] group(s) already exists.")
            if not isinstance(ds, xr.Dataset):
                raise TypeError(f"{name}: a Dataset is needed, got {type(ds).__name__}")
            if ds:
                self._groups[name] = ds

    def add_deferred_group(self, name: str, make: Callable[[], xr.Dataset]) -> None:
        """Add the group ``name`` as the function ``make`` that makes it (deterministically:
        it is called at most once, when the group is first read); it holds its place in the
        group order."""
        if name in self._groups:
            raise ValueError(f"[{name!r}] group(s) already exists.")
        self._groups[name] = make

    def update_group_attrs(self, attrs: dict[str, Any]) -> None:
        """Update every group's attrs with ``attrs`` (a deferred group's when it is made)."""
        for name, value in self._groups.items():
            if isinstance(value, xr.Dataset):
                value.attrs.update(attrs)
            else:
                self._groups[name] = _stamped(value, dict(attrs))

    def to_inference_data(self) -> az.InferenceData:
        """The ``arviz.InferenceData`` of these groups (ArviZ imported here)."""
        import arviz as az  # deferred: the point of this class

        groups = {name: self._group(name) for name in self._groups}
        idata = az.InferenceData(posterior=groups.pop("posterior"), attrs=self.attrs or None)
        for name, ds in groups.items():
            if ds:  # a deferred group that came out empty is skipped, as add_groups skips one
                idata.add_groups({name: ds})
        return idata

    def __repr__(self) -> str:
        return f"DeferredInferenceData(groups={self.groups()})"


def _stamped(make: Callable[[], xr.Dataset], attrs: dict[str, Any]) -> Callable[[], xr.Dataset]:
    def stamped() -> xr.Dataset:
        ds = make()
        ds.attrs.update(attrs)
        return ds

    return stamped


def as_inference_data(idata: Any) -> Any:
    """``idata`` as an ``arviz.InferenceData`` (a :class:`DeferredInferenceData` is converted)."""
    return idata.to_inference_data() if isinstance(idata, DeferredInferenceData) else idata


class InferenceDataField:
    """A fit's ``idata`` field: groups held as a :class:`DeferredInferenceData` (no ArviZ
    import while the fit is made and rendered) become an ``arviz.InferenceData`` the first
    time the field is read. Set on the class after the dataclass is made (so the field keeps
    no default): ``SigmoidFit.idata = InferenceDataField()``. The fit's own methods read
    :func:`held_idata` where either kind will do."""

    slot = "_idata"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.slot]
        if isinstance(value, DeferredInferenceData):
            value = obj.__dict__[self.slot] = value.to_inference_data()
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.slot] = value


def held_idata(fit: Any) -> Any:
    """``fit``'s InferenceData as it is held (an :class:`InferenceDataField`'s value, not
    converted): both kinds have ``attrs``, the groups as attributes and ``add_groups``.
    An object without the field (a stand-in with a plain ``idata``) gives its ``idata``."""
    held = getattr(fit, "__dict__", {}).get(InferenceDataField.slot)
    return fit.idata if held is None else held


class _InferenceDataAnnotation:
    """What ``arviz.InferenceData`` stands for in nutpie's annotations while nutpie is
    imported by :func:`import_nutpie` (never made, never checked against)."""


class _ArvizUntilUsed(types.ModuleType):
    """``arviz`` as nutpie's sampling module sees it (:func:`import_nutpie`): its annotations
    name ``arviz.InferenceData`` while the module is imported; any other use, or a use from
    outside nutpie, imports ArviZ."""

    def __init__(self) -> None:
        super().__init__("arviz")
        self.__dict__["_importing"] = True

    def __getattr__(self, attr: str) -> Any:
        # the placeholder only for nutpie's own module code (another thread's ``import arviz``
        # in these milliseconds gets the real class)
        caller = str(sys._getframe(1).f_globals.get("__name__", ""))
        if attr == "InferenceData" and self.__dict__["_importing"] and caller.split(".")[0] == "nutpie":
            return _InferenceDataAnnotation
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        if sys.modules.get("arviz") is self:
            del sys.modules["arviz"]
        return getattr(importlib.import_module("arviz"), attr)


def import_nutpie() -> Any:
    """nutpie, imported without importing ArviZ (1.4 s: scipy.stats, matplotlib, numba
    ufuncs), which ``nutpie.sample`` imports to convert its draws and names in annotations.

    While nutpie is imported, ``sys.modules["arviz"]`` is a stand-in that answers the
    annotations and imports the real ArviZ on any other use (then nothing is saved, and
    nothing changes); it is removed from ``sys.modules`` afterwards, so every later
    ``import arviz`` is the real one. Draws taken with ``return_raw_trace=True`` never use
    ArviZ (:func:`saturation.models.sampling.trace_groups` reads them). When ArviZ or nutpie
    is already imported, this is ``import nutpie``.
    """
    if "nutpie" in sys.modules or "arviz" in sys.modules:
        return importlib.import_module("nutpie")
    stand_in = _ArvizUntilUsed()
    sys.modules["arviz"] = stand_in
    try:
        return importlib.import_module("nutpie")
    finally:
        stand_in.__dict__["_importing"] = False
        if sys.modules.get("arviz") is stand_in:
            del sys.modules["arviz"]
