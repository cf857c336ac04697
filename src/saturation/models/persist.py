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
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import numpy as np
import pandas as pd
import xarray as xr

from saturation._lazy import as_inference_data, lazy
from saturation.summary import cell_text, first_sentence, fit_html

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
        if callable(getattr(value, "groups", None)) and hasattr(value, "posterior"):  # an InferenceData
            idata = as_inference_data(value)
            return {"__idata__": {g: self.encode(idata[g]) for g in idata.groups()}}
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
        if "__idata__" in value:
            return az.InferenceData(**{g: self.decode(v) for g, v in value["__idata__"].items()})
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
    fit : FitObject
        The fit object (a dataclass; its ``idata`` field, when it has one, becomes the
        file's InferenceData groups; nested fits keep theirs in the record).
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
    # an analysis of several fits (``SeriesDiagnosis``, ``PlateauRuns``) has no InferenceData
    # of its own: each part's is in its record
    idata = as_inference_data(fit.idata) if hasattr(fit, "idata") else az.InferenceData()
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
    if "idata" in {f.name for f in dataclasses.fields(cls)}:
        return cls(idata=idata, **kwargs)
    return cls(**kwargs)


@dataclasses.dataclass(frozen=True)
class TableView:
    """One display table of an analysis: the frame every front end prints (interval cells
    as ``{"mean", "hdi"}``, :func:`saturation.summary.interval_cell`) and its caption."""

    frame: pd.DataFrame
    caption: str


@dataclasses.dataclass(frozen=True)
class FigureView:
    """One figure of an analysis: ``draw()`` returns the matplotlib figure; the caption says
    what is drawn, the band level and the data."""

    draw: Callable[[], Any]
    caption: str


class FitObject:
    """What every analysis object (``PlateauFit``, ``TransferFit``, ``SigmoidFit``,
    ``Diagnosis``, ``SeriesDiagnosis``, ``PlateauRuns``) shares: the views every front end
    renders (:meth:`tables` / :meth:`table`, :meth:`figures` / :meth:`plot`, :meth:`answer`,
    :meth:`details`, :meth:`results`), :meth:`save` and :meth:`load` through one netCDF file
    (:func:`save_fit`, :func:`load_fit`) and the notebook view. The CLI, the report and a
    notebook print these; none of them derives a number or a verdict of its own."""

    def summary(self) -> pd.DataFrame:  # pragma: no cover - every fit object defines its own
        raise NotImplementedError

    def tables(self) -> dict[str, TableView]:  # pragma: no cover - every analysis defines its own
        """The display tables by file name, the main one first."""
        raise NotImplementedError

    def table(self) -> pd.DataFrame:
        """The main display table (the first of :meth:`tables`): what ``saturation <command>``
        prints and the report's first table of the analysis."""
        return next(iter(self.tables().values())).frame

    def table_text(self) -> pd.DataFrame:
        """:meth:`table` with every cell as the text the CLI and the report print
        (``mean [low, high]`` for an interval; :func:`saturation.summary.cell_text`)."""
        return self.table().map(lambda v: cell_text(v, missing="-"))

    def figures(self) -> dict[str, FigureView]:
        """The figures by name (drawn only when asked: :meth:`plot`)."""
        return {}

    def plot(self, name: str | None = None) -> Any:
        """Draw one of :meth:`figures` (default: the first) and return the matplotlib figure.

        Parameters
        ----------
        name : str, optional
            A key of :meth:`figures`.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        figs = self.figures()
        if not figs:
            raise ValueError(f"{type(self).__name__} draws no figure")
        if name is None:
            name = next(iter(figs))
        if name not in figs:
            raise ValueError(f"{type(self).__name__} has no figure {name!r}; it has {', '.join(figs)}")
        return figs[name].draw()

    def answer(self) -> str:
        """The analysis' answer in a few sentences (the report's verdict line); by default
        :meth:`details` in one line."""
        return " ".join(self.details())

    def details(self) -> list[str]:
        """One sentence per unit (level, arm, run): its verdict and the numbers that decided it."""
        return []

    def headline(self) -> str:
        """The answer in one short sentence, to quote (the report's contents): by default
        :meth:`answer`'s first sentence."""
        return first_sentence(self.answer())

    def results(self) -> dict[str, Any]:
        """Every estimand, JSON-ready (the report's ``results.json`` entry)."""
        to_dict: Callable[[], dict[str, Any]] = getattr(self, "to_dict")  # noqa: B009 - every analysis has one
        return to_dict()

    def inference_data(self) -> dict[str, Any]:
        """The InferenceData this analysis holds, by file stem (what the report writes)."""
        return {}

    def heading(self) -> list[str]:
        """What a front end prints before the tables: the model and the data in a line, then
        any note on the data (synthetic, dynamic sampling)."""
        return []

    def parts(self) -> list[FitObject]:
        """The sub-analyses its config asks for (a back-test, a curve-family comparison),
        rendered after it by every front end; fitted on the first call, then kept."""
        return []

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
