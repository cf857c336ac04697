"""Sampling with nutpie (compiled-model cache) or PyMC's NUTS, and convergence checks."""

from __future__ import annotations

import json
import warnings
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import arviz as az
import numpy as np
import pymc as pm

from saturation import __version__
from saturation import schema as S

#: Convergence thresholds reported with every fit.
RHAT_MAX = 1.01
ESS_BULK_MIN = 400


class ConvergenceWarning(UserWarning):
    """A fit did not meet the convergence thresholds; its numbers are not trustworthy."""


@dataclass(frozen=True)
class SamplerConfig:
    """Sampler settings. ``sampler``: "auto" (default: the fastest that works for the model:
    independent exact draws for the Gaussian plateau model, else nutpie), "exact" (Gaussian
    plateau model only, see ``models._exact``), "nutpie" (falls back to "pymc" if nutpie is
    not installed), "pymc", or "numpyro" (only if numpyro and jax are installed; measured
    in benchmarks/plateau_bench.py, not a dependency)."""

    draws: int = 1000
    tune: int = 1000
    chains: int = 4
    sampler: str = "auto"
    target_accept: float = 0.95
    progress: bool = False
    #: nutpie only: adapt a low-rank mass matrix (for strongly correlated posteriors)
    low_rank: bool = False


_COMPILED: OrderedDict[Hashable, Any] = OrderedDict()
_CACHE_SIZE = 16


def available_samplers() -> list[str]:
    """NUTS implementations importable here (nutpie is a dependency; numpyro optional)."""
    import importlib.util

    out = [name for name in ("nutpie", "numpyro") if importlib.util.find_spec(name) is not None]
    return [*out, "pymc"]


def sample_model(
    model: pm.Model,
    *,
    cache_key: Hashable | None,
    data: dict[str, np.ndarray],
    seed: int,
    config: SamplerConfig,
    auto: str = "nutpie",
) -> tuple[az.InferenceData, dict[str, Any]]:
    """Sample ``model``; with nutpie, a compiled model is reused for the same ``cache_key``
    (model structure) and only the ``data`` (pm.Data values) are swapped.

    ``auto`` is the sampler used when ``config.sampler == "auto"``. Returns the
    InferenceData (posterior + sample_stats), timings in seconds and the sampler used.
    """
    import time

    sampler = auto if config.sampler == "auto" else config.sampler
    if sampler == "numpyro" and "numpyro" not in available_samplers():
        raise ValueError("sampler='numpyro' needs numpyro and jax installed (not dependencies of saturation)")
    if sampler == "nutpie" and "nutpie" not in available_samplers():  # pragma: no cover
        warnings.warn("nutpie is not installed; falling back to PyMC's NUTS", stacklevel=2)
        sampler = "pymc"
    timings: dict[str, Any] = {"compile": 0.0, "sample": 0.0, "sampler": sampler}
    if sampler == "nutpie":
        import nutpie

        t0 = time.perf_counter()
        compiled = _COMPILED.get(cache_key) if cache_key is not None else None
        if compiled is None:
            compiled = nutpie.compile_pymc_model(model, freeze_model=False)
            if cache_key is not None:
                _COMPILED[cache_key] = compiled
                while len(_COMPILED) > _CACHE_SIZE:
                    _COMPILED.popitem(last=False)
        else:
            _COMPILED.move_to_end(cache_key)
        compiled = compiled.with_data(**{k: v for k, v in data.items() if k in compiled.shared_data})
        timings["compile"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        idata = nutpie.sample(
            compiled, draws=config.draws, tune=config.tune, chains=config.chains,
            seed=seed, progress_bar=config.progress, save_warmup=False,
            target_accept=config.target_accept, low_rank_modified_mass_matrix=config.low_rank,
        )
        timings["sample"] = time.perf_counter() - t0
    elif sampler in ("pymc", "numpyro"):
        t0 = time.perf_counter()
        extra = {"nuts_sampler": "numpyro", "chain_method": "sequential"} if sampler == "numpyro" else {}
        with model:
            pm.set_data(data)
            idata = pm.sample(
                draws=config.draws, tune=config.tune, chains=config.chains, random_seed=seed,
                progressbar=config.progress, target_accept=config.target_accept,
                compute_convergence_checks=False, cores=min(config.chains, 2), **extra,
            )
        timings["sample"] = time.perf_counter() - t0  # numpyro: includes its JAX compile
    else:  # pragma: no cover - guarded by SamplerConfig users
        raise ValueError(f"unknown sampler {sampler!r}; choose from {available_samplers()}")
    return idata, timings


def diagnostics(idata: az.InferenceData, var_names: Sequence[str]) -> dict[str, Any]:
    """Max R-hat, min bulk/tail ESS and divergences over ``var_names``; ``converged`` flag."""
    post = idata.posterior[list(var_names)]
    rhat = az.rhat(post)
    ess_bulk = az.ess(post, method="bulk")
    ess_tail = az.ess(post, method="tail")

    def extreme(ds: Any, fn: Any) -> float:
        vals = [float(fn(ds[v].values)) for v in ds.data_vars if np.size(ds[v].values)]
        return float(fn(vals)) if vals else float("nan")

    rhat_max = extreme(rhat, np.nanmax)
    ess_min = extreme(ess_bulk, np.nanmin)
    ess_tail_min = extreme(ess_tail, np.nanmin)
    # independent draws ("exact" sampler) have no sample_stats: no trajectories, no divergences
    stats_ = idata.get("sample_stats")
    div = int(stats_["diverging"].sum()) if stats_ is not None and "diverging" in stats_ else 0
    n_chains = idata.posterior.sizes["chain"]
    n_draws = idata.posterior.sizes["draw"]
    ess_needed = min(ESS_BULK_MIN, n_chains * n_draws // 4)
    converged = bool(rhat_max <= RHAT_MAX and ess_min >= ess_needed and div == 0)
    return {
        "rhat_max": rhat_max,
        "ess_bulk_min": ess_min,
        "ess_tail_min": ess_tail_min,
        "divergences": div,
        "converged": converged,
        "thresholds": {"rhat_max": RHAT_MAX, "ess_bulk_min": ess_needed, "divergences": 0},
    }


def warn_if_not_converged(diag: dict[str, Any], what: str) -> None:
    if not diag["converged"]:
        warnings.warn(
            f"\n{'!' * 70}\n{what} DID NOT CONVERGE: R-hat max {diag['rhat_max']:.3f} "
            f"(<= {RHAT_MAX}), bulk ESS min {diag['ess_bulk_min']:.0f} "
            f"(>= {diag['thresholds']['ess_bulk_min']}), divergences {diag['divergences']} (0).\n"
            f"Do not read its tables; sample longer or revisit the model.\n{'!' * 70}",
            ConvergenceWarning,
            stacklevel=3,
        )


def interval(x: Any) -> dict[str, Any]:
    """Posterior mean, sd and 94 % HDI (``schema.HDI_PROB``) of a 1-D sample."""
    x = np.asarray(x, dtype=float)
    hdi = np.asarray(az.hdi(x, hdi_prob=S.HDI_PROB))
    return {"mean": float(np.mean(x)), "sd": float(np.std(x, ddof=1)), "hdi": [float(hdi[0]), float(hdi[1])]}


def stamp_attrs(idata: az.InferenceData, model: str, config: Any, data_summary: dict[str, Any],
                diag: dict[str, Any]) -> None:
    """Record the package version, model name, config (a dataclass), the input data's
    summary, the diagnostics and the interval convention on every InferenceData group."""
    attrs = {
        "saturation_version": __version__,
        "model": model,
        "config": json.dumps(asdict(config)),
        "data_summary": json.dumps(data_summary, default=str),
        "diagnostics": json.dumps(diag),
        "hdi_prob": S.HDI_PROB,
    }
    for group in idata.groups():
        getattr(idata, group).attrs.update(attrs)
