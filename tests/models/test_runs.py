"""Many runs in one call (models.runs): per-run fits, failures accounted, Dask or not."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from saturation.models import fit_plateau
from saturation.models.plateau import PlateauConfig
from saturation.models.runs import fit_plateau_runs, run_names, run_seed
from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau


def _runs(names, n_steps=(24, 24, 6)):
    parts = []
    for i, (name, steps) in enumerate(zip(names, n_steps, strict=True)):
        spec = PlateauSpec(
            levels=(LevelSpec("file", 0.6, 0.01, 0.0, 10.0 + i), LevelSpec("module", 0.4, 0.01, 0.0, 12.0)),
            n_steps=steps,
            prompts_per_step=8,
            samples_per_prompt=4,
            pool_size=400,
            run=name,
        )
        parts.append(simulate_plateau(spec, seed=10 + i)[0])
    return xr.concat(parts, dim="trial")


def test_every_run_is_fitted_or_listed_as_failed():
    """Two fittable runs and one too short to hold two segments: two fits with the numbers
    a single-run fit with the run's seed gives, and one failure naming the run."""
    trials = _runs(["seed-1", "seed-2", "short"])
    assert run_names(trials) == ["seed-1", "seed-2", "short"]
    res = fit_plateau_runs(trials, PlateauConfig(), seed=4, scheduler="sync")
    assert list(res.fits) == ["seed-1", "seed-2"]
    assert [f["run"] for f in res.failures] == ["short"] and "segment" in res.failures[0]["error"]
    table = res.summary()
    assert len(table) == 4 and set(table["level"]) == {"file", "module"}
    alone = fit_plateau(trials, run="seed-2", seed=run_seed(4, "seed-2"))
    got = res.fits["seed-2"].estimands["levels"]["module"]
    want = alone.estimands["levels"]["module"]
    assert got["verdict"] == want["verdict"]
    assert got["changepoint"]["mean"] == pytest.approx(want["changepoint"]["mean"], abs=1e-12)
    assert res.to_dict()["table"][0]["run"] == "seed-1"
    assert res.fits["seed-1"].to_dict()["data"]["n_trials"] == 24 * 8 * 4
    assert res.status_lines()[0].startswith("FAILED short: ")
    assert res.status_lines()[-1] == "2 of 3 runs fitted; 1 failed; all converged"


def test_each_runs_inference_data_is_written_and_names_that_collide_are_refused(tmp_path):
    import dataclasses

    from saturation.models.runs import PlateauRuns

    res = fit_plateau_runs(_runs(["seed/1", "seed-2"], n_steps=(24, 24)), seed=4, scheduler="sync")
    written = res.write_inference_data(tmp_path / "fits")
    assert sorted(p.name for p in written) == ["seed-2.nc", "seed_1.nc"]
    clash = PlateauRuns({"a/b": res.fits["seed/1"], "a_b": res.fits["seed-2"]})
    with pytest.raises(ValueError, match=r"would share the file name a_b\.nc"):
        clash.write_inference_data(tmp_path / "other")
    assert not (tmp_path / "other").exists() and dataclasses.is_dataclass(clash)


def test_a_run_asked_for_must_exist():
    with pytest.raises(ValueError, match="not in the data"):
        fit_plateau_runs(_runs(["a", "b", "c"]), runs=["a", "zzz"], scheduler="sync")


@pytest.mark.slow
def test_runs_on_a_local_dask_cluster_give_the_serial_numbers():
    trials = _runs(["r1", "r2", "r3"], n_steps=(24, 24, 24))
    serial = fit_plateau_runs(trials, seed=1, scheduler="sync").summary()
    dask = fit_plateau_runs(trials, seed=1, workers=2).summary()
    np.testing.assert_array_equal(serial["changepoint"].to_numpy(), dask["changepoint"].to_numpy())
    assert list(serial["verdict"]) == list(dask["verdict"])
