"""Lazy imports: heavy packages load when first used, and the light commands never load them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: what the light paths (describe, the exact plateau fit) must not import (each costs a fraction
#: of a second to seconds)
HEAVY = ("pymc", "arviz", "pytensor", "numba", "nutpie", "dask", "distributed", "scipy", "scipy.stats", "matplotlib")


def _imported(code: str, cwd: Path) -> list[str]:
    """The HEAVY modules a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport sys\nprint('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=300, cwd=cwd
    )
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("HEAVY=")][-1]
    return [m for m in line.removeprefix("HEAVY=").split(",") if m]


def test_lazy_module_imports_on_first_attribute(tmp_path):
    code = (
        "import sys\n"
        "from saturation._lazy import lazy\n"
        "m = lazy('fractions')\n"
        "assert 'fractions' not in sys.modules, 'imported before use'\n"
        "assert m.Fraction(1, 2) == 0.5\n"
        "assert 'fractions' in sys.modules\n"
        "assert repr(m).endswith('(imported)>')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=tmp_path)


def test_import_saturation_and_its_models_stay_light(tmp_path):
    assert _imported("import saturation, saturation.models, saturation.spec", tmp_path) == []


def test_models_package_imports_a_model_module_on_first_use(tmp_path):
    """``saturation.models`` resolves its public names and submodules on first use: importing
    one model module (the sigmoid, for ``compare``) does not import the others."""
    code = (
        "import sys\n"
        "import saturation.models as m\n"
        "from saturation.models.sigmoid import fit_sigmoid\n"
        "assert 'saturation.models.transfer' not in sys.modules\n"
        "assert sorted(m._HOMES) == m.__all__\n"
        "for name in m.__all__:\n"
        "    assert getattr(m, name).__name__ == name\n"
        "assert m.transfer.fit_transfer is m.fit_transfer\n"
        "try:\n"
        "    m.no_such_name\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=tmp_path)


def test_describe_imports_no_modelling_stack(tmp_path):
    data = ROOT / "data" / "swesmith-codesearch.trials.csv.zst"
    code = f"from saturation.cli import main\nassert main(['describe', {str(data)!r}]) == 0"
    assert _imported(code, tmp_path) == []


def test_exact_gaussian_plateau_imports_no_modelling_stack(tmp_path):
    """The default plateau fit (exact draws) needs neither PyMC, PyTensor, ArviZ nor SciPy;
    the InferenceData is built (and ArviZ imported) when it is written or read."""
    code = "from saturation.cli import main\nassert main(['plateau', '--draws', '1000']) == 0"
    assert _imported(code, tmp_path) == []
    out = tmp_path / "fit.nc"
    code = f"from saturation.cli import main\nassert main(['plateau', '--draws', '1000', '--idata', {str(out)!r}]) == 0"
    assert "arviz" in _imported(code, tmp_path)
    assert out.exists()


def test_xarray_recognises_dask_arrays_once_dask_is_imported(tmp_path):
    """xarray_without_dask only answers "no dask" while dask is not imported: chunked data
    built afterwards is still chunked, and computes."""
    pytest.importorskip("dask.array")
    code = (
        "import sys\n"
        "import numpy as np, xarray as xr\n"
        "import saturation.aggregate  # installs the shortcut\n"
        "ds = xr.Dataset({'a': ('x', np.arange(4.0))}, coords={'x': np.arange(4)})\n"
        "assert 'dask' not in sys.modules, 'a plain Dataset imported dask'\n"
        "import dask.array as da\n"
        "c = xr.Dataset({'a': ('x', da.arange(4.0, chunks=2))})\n"
        "assert c['a'].chunks == ((2, 2),), c['a'].chunks\n"
        "assert float(c['a'].sum().compute()) == 6.0\n"
        "assert ds.chunk({'x': 2})['a'].chunks == ((2, 2),)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=tmp_path)


def test_nutpie_fits_import_no_arviz(tmp_path):
    """``compare`` and ``transfer`` sample with nutpie on cached kernels and read its raw
    draws: no ArviZ (nor scipy.stats, matplotlib, PyMC) is imported; the fit's InferenceData
    is built, and ArviZ imported, when it is asked for, and it is the real ArviZ's."""
    data = ROOT / "data" / "g1-pool-arms.metrics.csv"
    code = (
        "from saturation.cli import main\n"
        f"assert main(['compare', '--metric', 'reward/avg_raw_reward', {str(data)!r}]) == 0\n"
    )
    heavy = _imported(code, tmp_path)
    assert "nutpie" in heavy and "numba" in heavy
    assert not {"arviz", "scipy.stats", "matplotlib", "pymc", "pytensor"} & set(heavy), heavy
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from saturation.configs import SamplerConfig, SigmoidConfig\n"
        "from saturation.models.sigmoid import fit_sigmoid\n"
        "from saturation.simulate import SigmoidArmsSpec, simulate_sigmoid_arms\n"
        "ds, _ = simulate_sigmoid_arms(SigmoidArmsSpec(n_steps=12, prompts_per_step=4, samples_per_prompt=4), seed=1)\n"
        "sampler = SamplerConfig(draws=50, tune=50, chains=2)\n"
        "fit = fit_sigmoid(ds, SigmoidConfig(likelihood='gaussian', sampler=sampler))\n"
        "assert 'arviz' not in sys.modules\n"
        "import arviz\n"
        "assert type(arviz).__name__ == 'module' and hasattr(arviz, 'from_dict')\n"
        "assert isinstance(fit.idata, arviz.InferenceData)\n"
        "assert fit.idata.posterior['asymptote'].shape == (2, 50, 2)\n"
        "assert sys.modules['nutpie.sample'].arviz.from_dict is arviz.from_dict  # the stand-in hands on the real one\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, cwd=tmp_path)


def test_deferred_inference_data_reads_replaces_and_converts_its_groups():
    import numpy as np
    import xarray as xr

    from saturation._lazy import DeferredInferenceData, InferenceDataField, held_idata

    post = xr.Dataset({"a": (("chain", "draw"), np.zeros((2, 3)))})
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((2, 3), dtype=bool))})
    held = DeferredInferenceData(post, sample_stats=stats)
    assert held.groups() == ["posterior", "sample_stats"] and "sample_stats" in held
    assert held["sample_stats"] is stats and held.posterior is post
    held.posterior = post.assign(b=post["a"] + 1)
    assert list(held.posterior.data_vars) == ["a", "b"]
    with pytest.raises(TypeError, match="posterior: a Dataset"):
        held.posterior = np.zeros(3)
    with pytest.raises(AttributeError):
        held.no_such_group  # noqa: B018

    class Fit:
        idata = InferenceDataField()

        def __init__(self, idata):
            self.idata = idata

    fit = Fit(held)
    assert held_idata(fit) is held  # read as held: no conversion
    real = fit.idata
    assert type(real).__name__ == "InferenceData" and real.groups() == ["posterior", "sample_stats"]
    xr.testing.assert_identical(real.posterior, held.posterior)
    assert held_idata(fit) is real


def test_a_deferred_group_is_made_once_when_first_read_and_keeps_its_place():
    import numpy as np
    import xarray as xr

    from saturation._lazy import DeferredInferenceData
    from saturation.models.sampling import stamp_attrs

    post = xr.Dataset({"a": (("chain", "draw"), np.zeros((2, 3)))})
    calls = []

    def make():
        calls.append(1)
        return xr.Dataset({"y": (("chain", "draw"), np.ones((2, 3)))})

    held = DeferredInferenceData(post)
    held.add_deferred_group("log_likelihood", make)
    held.add_groups(observed_data=xr.Dataset({"y": ("step", np.ones(3))}))
    with pytest.raises(ValueError, match="already exists"):
        held.add_deferred_group("log_likelihood", make)
    stamp_attrs(held, "m", {"k": 1}, {}, {"converged": True})
    assert held.groups() == ["posterior", "log_likelihood", "observed_data"] and "log_likelihood" in held
    assert calls == [] and held.posterior.attrs["model"] == "m"  # stamped, not made
    ll = held.log_likelihood
    assert calls == [1] and ll.attrs["model"] == "m" and float(ll["y"].sum()) == 6.0
    assert held["log_likelihood"] is ll and held.get("log_likelihood") is ll and calls == [1]
    real = held.to_inference_data()
    assert real.groups() == ["posterior", "log_likelihood", "observed_data"] and calls == [1]
    fresh = DeferredInferenceData(post)
    fresh.add_deferred_group("log_likelihood", make)
    assert fresh.to_inference_data().groups() == ["posterior", "log_likelihood"] and calls == [1, 1]


def test_the_arviz_stand_in_answers_only_nutpies_annotations():
    """Outside nutpie's own module code, even while nutpie is being imported, the stand-in
    hands out the real ArviZ (another thread importing ArviZ then is not fooled)."""
    import arviz

    from saturation._lazy import _ArvizUntilUsed

    stand_in = _ArvizUntilUsed()  # as during the import window
    assert stand_in.InferenceData is arviz.InferenceData
    assert stand_in.from_dict is arviz.from_dict
    nutpies = {"__name__": "nutpie.sample", "stand_in": stand_in}
    placeholder = eval("stand_in.InferenceData", nutpies)  # evaluated as in nutpie.sample
    assert placeholder is not arviz.InferenceData and placeholder.__name__ == "_InferenceDataAnnotation"
    stand_in.__dict__["_importing"] = False  # after the window: the real class for nutpie too
    assert eval("stand_in.InferenceData", nutpies) is arviz.InferenceData
