"""Every fit object saves to one netCDF file and loads back equal, field by field; loading
builds nothing but saturation's own dataclasses."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from saturation.models import fit_plateau
from saturation.models.persist import GROUP, load_fit
from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau


def _equal(a, b, where="fit"):
    """Deep equality of saved and loaded values (arrays exactly, text arrays by value)."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            if f.name != "idata":
                _equal(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
        return
    if isinstance(a, xr.Dataset):
        xr.testing.assert_identical(a, b)
        return
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_dtype=False)
        return
    if isinstance(a, np.ndarray):
        assert a.shape == np.shape(b), where
        if a.dtype.kind in "OUS":
            assert [str(v) for v in a.ravel()] == [str(v) for v in np.asarray(b).ravel()], where
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
        return
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _equal(a[k], b[k], f"{where}[{k!r}]")
        return
    if isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _equal(x, y, f"{where}[{i}]")
        return
    if isinstance(a, np.generic):  # a numpy scalar comes back as the Python value it holds
        a = a.item()
    if isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
        return
    assert a == b and type(a) is type(b), (where, a, b)


def _round_trip(fit, tmp_path):
    path = fit.save(tmp_path / "fit.nc")
    back = type(fit).load(path)
    _equal(fit, back)
    for group in fit.idata.groups():
        xr.testing.assert_identical(fit.idata[group], back.idata[group])
    assert GROUP not in back.idata.groups()
    return back


def test_a_plateau_fit_saves_and_loads_equal(tmp_path):
    spec = PlateauSpec(levels=(LevelSpec("file", 0.5, 0.01, 0.0, 20.0),), n_steps=40)
    ds, _ = simulate_plateau(spec, seed=3)
    fit = fit_plateau(ds, seed=1)
    back = _round_trip(fit, tmp_path)
    assert back.verdicts() == fit.verdicts() and repr(back) == repr(fit)
    pd.testing.assert_frame_equal(back.summary(), fit.summary())


def test_a_sigmoid_fit_and_a_diagnosis_save_and_load_equal(tmp_path, monkeypatch):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_learning import _made_up_series, _made_up_trend
    from test_sigmoid import _made_up_fit

    from saturation.models.learning import Diagnosis, diagnose_reliability
    from saturation.models.sigmoid import SigmoidConfig, _estimands, arm_steps, forecast
    from saturation.simulate import SigmoidArmsSpec, simulate_sigmoid_arms

    ds, _ = simulate_sigmoid_arms(SigmoidArmsSpec(n_steps=12, prompts_per_step=4, samples_per_prompt=4), seed=3)
    data = arm_steps(ds)
    fit = _made_up_fit(data, {"t2": (0.1, 0.5, 3.0, 4.0), "t2yarn": (0.1, 0.9, 2.0, 30.0)})
    fit.estimands = _estimands(fit.idata, data, "t2", "gaussian", SigmoidConfig())
    fit.estimands["forecast"] = forecast(fit.idata, data, horizon=8, delta=0.05)
    back = _round_trip(fit, tmp_path)
    assert back.verdicts() == fit.verdicts()

    monkeypatch.setattr("saturation.models.learning.trend_draws", _made_up_trend)
    d = diagnose_reliability(_made_up_series(12, reward_mean=(0.3, 0.5), pass_at_k=(0.55, 0.8)), seed=1)
    (tmp_path / "d").mkdir()
    back = _round_trip(d, tmp_path / "d")
    assert isinstance(back, Diagnosis) and back.verdicts() == d.verdicts() and back.bands.keys() == d.bands.keys()


def test_a_transfer_fit_with_its_dataset_saves_and_loads_equal(tmp_path, crossing_spec):
    """TransferData holds an xarray Dataset (the empirical curves): it travels as a group of
    its own. The posterior is made up (no sampler run)."""
    import arviz as az

    from saturation.models import transfer_data
    from saturation.models.transfer import TransferConfig, TransferFit
    from saturation.simulate import simulate_transfer

    ds, _ = simulate_transfer(crossing_spec, seed=0)
    data = transfer_data(ds)
    post = {"gap": np.random.default_rng(0).normal(size=(2, 50, len(data.steps)))}
    idata = az.from_dict(posterior=post, coords={"step": data.steps}, dims={"gap": ["step"]})
    est = {"reference": data.arms[0], "crossover": {"p_none": 1.0, "mean": None, "hdi": None}, "steps": [1, 2]}
    fit = TransferFit(idata, TransferConfig(), data, est, {"converged": True, "rhat_max": float("nan")}, {"s": 1.0})
    back = _round_trip(fit, tmp_path)
    assert isinstance(back.data.empirical, xr.Dataset)


def test_loading_builds_only_saturations_dataclasses(tmp_path):
    """A file whose record names another class (``subprocess.Popen``, a module outside the
    package) is refused naming it: loading never imports or calls anything the file names
    outside saturation."""
    spec = PlateauSpec(levels=(LevelSpec("file", 0.5, 0.01, 0.0, 20.0),), n_steps=30)
    fit = fit_plateau(simulate_plateau(spec, seed=3)[0], seed=1)
    path = fit.save(tmp_path / "fit.nc")
    import arviz as az

    from saturation.io import write_netcdf

    idata = az.from_netcdf(path)
    record = json.loads(idata[GROUP].attrs["fit"])
    for bad in ("subprocess.Popen", "os.system", "saturation.io.write_atomic"):
        evil = {**record, "class": bad}
        idata[GROUP].attrs["fit"] = json.dumps(evil)
        write_netcdf(idata, tmp_path / "evil.nc")
        with pytest.raises(ValueError, match=r"not (one of saturation's|a saturation dataclass)"):
            load_fit(tmp_path / "evil.nc")
    from saturation.models.transfer import TransferFit

    with pytest.raises(ValueError, match="holds a PlateauFit, not a TransferFit"):
        TransferFit.load(path)
    write_netcdf(xr.Dataset({"x": ("d", [1.0])}), tmp_path / "plain.nc")
    with pytest.raises(ValueError, match="not a saved fit"):
        load_fit(tmp_path / "plain.nc")


def test_every_fit_shows_itself_in_a_notebook_with_names_escaped(tmp_path, monkeypatch):
    """``_repr_html_``: the short repr and the summary table as HTML; a name from the data
    carrying markup is shown, never run."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_learning import _made_up_series, _made_up_trend

    from saturation.models.learning import diagnose_reliability

    spec = PlateauSpec(
        levels=(LevelSpec("file", 0.5, 0.01, 0.0, 20.0),), n_steps=30, run="<img src=x onerror=alert(1)>"
    )
    fit = fit_plateau(simulate_plateau(spec, seed=3)[0], seed=1)
    page = fit._repr_html_()
    assert page.startswith("<p><strong>PlateauFit(") and "<table" in page and "changepoint" in page
    assert "<img" not in page
    from saturation.summary import fit_html

    shown = fit_html(
        "Fit(<b>x</b>)\n<img src=x>: plateaued", pd.DataFrame({"unit": ["<script>1</script>"], "mean": [0.5]})
    )
    assert "<b>" not in shown and "<script>" not in shown and "<img" not in shown
    assert "&lt;script&gt;1&lt;/script&gt;" in shown and "&lt;img src=x&gt;: plateaued" in shown
    monkeypatch.setattr("saturation.models.learning.trend_draws", _made_up_trend)
    d = diagnose_reliability(_made_up_series(12, reward_mean=(0.3, 0.5), pass_at_k=(0.55, 0.8)), seed=1)
    assert "<table" in d._repr_html_() and "pass_at_k.change" in d._repr_html_()
