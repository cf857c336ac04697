"""Save a fit object to one netCDF file and load it back: ``fit.save(path)``, ``Fit.load(path)``.

The file is the fit's own InferenceData (every group it holds: posterior, sample stats,
log likelihood, observed data, attrs) plus one group, ``saturation_fit``, with everything
else the object holds: its config, data, estimands, diagnostics and timings. Arrays go into
that group as variables; the rest is JSON in its ``fit`` attribute, where each array, data
frame or Dataset is a reference to a variable or to a group of its own
(``saturation_fit_<n>``), and each dataclass is named by its class.

Loading executes nothing from the file: a class is looked up only among the dataclasses of
the ``saturation`` package (any other name is an error), the file passes
:func:`saturation.files.check_netcdf` (no links into other files, bounded size) first, and
values are built from JSON and arrays only (no pickle).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any, Self

import numpy as np
import pandas as pd
import xarray as xr

from saturation._lazy import as_inference_data, lazy
from saturation.summary import fit_html

az = lazy("arviz")

#: the InferenceData group holding a fit object's non-draw parts
GROUP = "saturation_fit"
#: format version of that group (a file of another version is refused by name)
VERSION = 1


class _Encoder:
    """A fit object's fields as JSON with references to arrays, frames and Datasets."""

    def __init__(self) -> None:
        self.arrays: dict[str, xr.DataArray] = {}
        self.datasets: dict[str, xr.Dataset] = {}

    def array(self, value: np.ndarray) -> dict[str, Any]:
        name = f"a{len(self.arrays)}"
        arr = np.asarray(value)
        if arr.dtype == object:  # text: stored as fixed strings
            arr = arr.astype(str)
        self.arrays[name] = xr.DataArray(arr, dims=[f"{name}_{i}" for i in range(arr.ndim)])
        return {"__array__": name}

    def encode(self, value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            cls = type(value)
            fields = {f.name: self.encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return {"__dataclass__": f"{cls.__module__}.{cls.__qualname__}", "fields": fields}
        if isinstance(value, xr.Dataset):
            name = f"{GROUP}_{len(self.datasets)}"
            self.datasets[name] = value
            return {"__dataset__": name}
        if isinstance(value, pd.DataFrame):
            return {"__frame__": {str(c): self.array(value[c].to_numpy()) for c in value.columns}}
        if isinstance(value, np.ndarray):
            return self.array(value)
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, tuple):
            return {"__tuple__": [self.encode(v) for v in value]}
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, dict):
            if all(isinstance(k, str) for k in value):
                return {"__dict__": {k: self.encode(v) for k, v in value.items()}}
            return {"__items__": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        if isinstance(value, float) and not np.isfinite(value):
            return {"__float__": repr(value)}
        if value is None or isinstance(value, bool | int | float | str):
            return value
        raise TypeError(f"cannot save a {type(value).__name__} ({value!r:.60})")


def _allowed_class(path: str) -> type:
    """A dataclass of the ``saturation`` package by its ``module.QualName`` (nothing else)."""
    module, _, name = path.rpartition(".")
    if not (module == "saturation" or module.startswith("saturation.")) or "." in name or not name:
        raise ValueError(f"a saved fit names the class {path!r}, which is not one of saturation's")
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"a saved fit names {path!r}, which is not a saturation dataclass")
    return cls


class _Decoder:
    def __init__(self, arrays: xr.Dataset, datasets: dict[str, xr.Dataset]) -> None:
        self.arrays, self.datasets = arrays, datasets

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.decode(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "__array__" in value:
            return self.arrays[value["__array__"]].to_numpy()
        if "__dataset__" in value:
            return self.datasets[value["__dataset__"]]
        if "__frame__" in value:
            return pd.DataFrame({c: self.decode(v) for c, v in value["__frame__"].items()})
        if "__tuple__" in value:
            return tuple(self.decode(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {k: self.decode(v) for k, v in value["__dict__"].items()}
        if "__items__" in value:
            return {self.decode(k): self.decode(v) for k, v in value["__items__"]}
        if "__float__" in value:
            return float(value["__float__"])
        if "__dataclass__" in value:
            cls = _allowed_class(value["__dataclass__"])
            kwargs = {k: self.decode(v) for k, v in value["fields"].items()}
            init = {f.name for f in dataclasses.fields(cls) if f.init}
            obj = cls(**{k: v for k, v in kwargs.items() if k in init})
            for k, v in kwargs.items():  # fields set after __init__ (none today)
                if k not in init:
                    object.__setattr__(obj, k, v)
            return obj
        raise ValueError(f"a saved fit holds an unknown record ({sorted(value)[:3]})")


def save_fit(fit: Any, path: str | Path) -> Path:
    """Write ``fit`` (a fit object with an ``idata`` field) to one netCDF file, atomically.

    Parameters
    ----------
    fit : PlateauFit, TransferFit, SigmoidFit or Diagnosis
        The fit object.
    path : path
        The file to write (conventionally ``.nc``); replaced if it exists.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    from saturation.files import write_netcdf

    enc = _Encoder()
    fields = {f.name: enc.encode(getattr(fit, f.name)) for f in dataclasses.fields(fit) if f.name != "idata"}
    cls = type(fit)
    record = {"version": VERSION, "class": f"{cls.__module__}.{cls.__qualname__}", "fields": fields}
    idata = as_inference_data(fit.idata)
    groups = {g: idata[g] for g in idata.groups() if not g.startswith(GROUP)}
    out = az.InferenceData(**groups)
    out.add_groups({GROUP: xr.Dataset(enc.arrays, attrs={"fit": json.dumps(record)}), **enc.datasets})
    return write_netcdf(out, path)


def load_fit(path: str | Path, expected: type | None = None) -> Any:
    """Read a fit object written by :func:`save_fit`.

    Parameters
    ----------
    path : path
        The file.
    expected : type, optional
        The class the file must hold (``PlateauFit.load`` passes its own).

    Returns
    -------
    object
        The fit object, equal to the saved one in every field (arrays exactly).

    Raises
    ------
    ValueError
        Naming the file: not a saved fit, another format version, another class, a class
        that is not saturation's, or a file :func:`saturation.files.check_netcdf` refuses.
    """
    from saturation.files import check_netcdf

    path = Path(path)
    check_netcdf(path)
    idata = az.from_netcdf(path)
    if GROUP not in idata.groups():
        raise ValueError(f"{path}: not a saved fit (no {GROUP!r} group; fit.save(path) writes one)")
    record = json.loads(idata[GROUP].attrs["fit"])
    if record.get("version") != VERSION:
        raise ValueError(f"{path}: a saved fit of format version {record.get('version')}, this is {VERSION}")
    cls = _allowed_class(record["class"])
    if expected is not None and cls is not expected:
        raise ValueError(f"{path}: holds a {cls.__name__}, not a {expected.__name__}")
    extra = {g: idata[g].load() for g in idata.groups() if g.startswith(f"{GROUP}_")}
    arrays = idata[GROUP].load()
    kwargs = _Decoder(arrays, extra).decode({"__dict__": record["fields"]})
    idata = az.InferenceData(**{g: idata[g] for g in idata.groups() if not g.startswith(GROUP)})
    return cls(idata=idata, **kwargs)


class FitObject:
    """What every fit object (``PlateauFit``, ``TransferFit``, ``SigmoidFit``, ``Diagnosis``)
    shares beyond its own ``summary()``: :meth:`save` and :meth:`load` through one netCDF
    file (:func:`save_fit`, :func:`load_fit`) and the notebook view."""

    def summary(self) -> pd.DataFrame:  # pragma: no cover - every fit object defines its own
        raise NotImplementedError

    def _repr_html_(self) -> str:
        """The notebook view: the short repr and the :meth:`summary` table."""
        return fit_html(repr(self), self.summary())

    def save(self, path: str | Path) -> Path:
        """Write this fit to one netCDF file (its InferenceData plus everything else it holds;
        :mod:`saturation.models.persist`); :meth:`load` reads it back."""
        return save_fit(self, path)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """A fit written by :meth:`save`, equal to the saved one in every field."""
        fit: Self = load_fit(path, expected=cls)
        return fit
