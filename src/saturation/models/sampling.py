"""Sampling with nutpie (compiled-model cache) or PyMC's NUTS, and convergence checks."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import asdict, is_dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from saturation import __version__, progress
from saturation import schema as S
from saturation._lazy import DeferredInferenceData, as_inference_data, import_nutpie, lazy, posterior_dataset
from saturation.configs import SamplerConfig
from saturation.mathfn import ndtri

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm
    from pymc import initial_point as pymc_initial_point
else:  # imported on first use: the exact draws need none of them (ARCHITECTURE.md); ArviZ
    # names only annotations here
    pm, pymc_initial_point = map(lazy, ("pymc", "pymc.initial_point"))

#: Convergence thresholds reported with every fit.
RHAT_MAX = 1.01
ESS_BULK_MIN = 400


class ConvergenceWarning(UserWarning):
    """A fit did not meet the convergence thresholds; its numbers are not trustworthy."""


_COMPILED: OrderedDict[Hashable, Any] = OrderedDict()


def clear_compiled_cache() -> None:
    """Forget every compiled model of this process (the next fit compiles afresh)."""
    _COMPILED.clear()


_CACHE_SIZE = 16


def available_samplers() -> list[str]:
    """NUTS implementations importable here (nutpie is a dependency; numpyro optional)."""
    import importlib.util

    out = [name for name in ("nutpie", "numpyro") if importlib.util.find_spec(name) is not None]
    return [*out, "pymc"]


def graph_fingerprint(model: pm.Model) -> str:
    """A hash of everything in ``model`` that the compiled log density depends on, except
    the values of its ``pm.Data`` containers (which a reused compiled model swaps).

    The graph of every random variable, potential and deterministic is walked from its
    outputs: each operation's type and parameters, each constant's dtype, shape and bytes
    (prior parameters written as Python numbers are constants of the graph), each shared
    variable's name, dtype and number of dimensions (its values and lengths are data, which
    the reused compiled model swaps: pass@k's distinct rows vary with the data), and the
    transforms. Two models with the same fingerprint compile to the same function of their
    data; a prior or a structural change gives another fingerprint. About a millisecond per
    hundred graph nodes.
    """
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.basic import Constant

    try:  # pytensor >= 2.32 (the old home warns)
        from pytensor.graph.traversal import ancestors
    except ImportError:  # pragma: no cover - older pytensor
        from pytensor.graph.basic import ancestors  # type: ignore[no-redef]

    outputs = [*model.basic_RVs, *model.potentials, *model.deterministics]
    outputs += [v for v in model.rvs_to_values.values() if v is not None]
    digest = hashlib.sha256()
    index: dict[int, int] = {}
    for var in ancestors(outputs):
        index[id(var)] = len(index)
        if isinstance(var, Constant):
            data = np.asarray(var.data)
            digest.update(f"C{data.dtype}{data.shape}".encode())
            digest.update(np.ascontiguousarray(data).tobytes())
        elif isinstance(var, SharedVariable):  # data: swapped by the reused model, shape included
            value = np.asarray(var.get_value(borrow=True))
            digest.update(f"S{var.name}{value.dtype}{value.ndim}".encode())
        elif var.owner is not None:
            op = var.owner.op
            props = tuple(getattr(op, name) for name in getattr(op, "__props__", ()))
            inputs = ",".join(str(index.get(id(i), "?")) for i in var.owner.inputs)
            digest.update(f"O{op!s}|{props}|{inputs}|{var.owner.outputs.index(var)}|{var.type}".encode())
        else:
            digest.update(f"I{var.name}{var.type}".encode())
    for rv, transform in sorted(model.rvs_to_transforms.items(), key=lambda kv: str(kv[0].name)):
        digest.update(f"T{rv.name}:{type(transform).__name__}:{getattr(transform, '__dict__', '')}".encode())
    digest.update(",".join(str(v.name) for v in model.free_RVs).encode())
    return digest.hexdigest()


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

    sampler = auto if config.sampler == "auto" else config.sampler
    if sampler == "numpyro" and "numpyro" not in available_samplers():
        raise ValueError("sampler='numpyro' needs numpyro and jax installed (not dependencies of saturation)")
    if sampler == "nutpie" and "nutpie" not in available_samplers():  # pragma: no cover
        warnings.warn("nutpie is not installed; falling back to PyMC's NUTS", stacklevel=2)
        sampler = "pymc"
    timings: dict[str, Any] = {"compile": 0.0, "sample": 0.0, "sampler": sampler}
    # one display for the whole fit: the caller's (a report, a CLI command), else our own
    # when the config asks for progress
    own = progress.Progress(1, "fit") if config.progress and progress.current() is None else None
    display = progress.current()
    try:
        if sampler == "nutpie":
            nutpie = import_nutpie()

            t0 = time.perf_counter()
            # the caller's key names the model; the fingerprint makes the reuse safe: a prior,
            # a shape or a structural option the key leaves out compiles a new model
            if cache_key is not None:
                cache_key = (cache_key, graph_fingerprint(model))
            compiled = _COMPILED.get(cache_key) if cache_key is not None else None
            reused = compiled is not None
            if compiled is None:
                progress.stage("compile")
                compiled = nutpie.compile_pymc_model(model, freeze_model=False)
                if cache_key is not None:
                    _COMPILED[cache_key] = compiled
                    while len(_COMPILED) > _CACHE_SIZE:
                        _COMPILED.popitem(last=False)
            else:
                _COMPILED.move_to_end(cache_key)
            compiled = compiled.with_data(**{k: v for k, v in data.items() if k in compiled.shared_data})
            if reused:
                compiled = _with_initial_points(compiled, model)
            timings["compile"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            idata = _nutpie_sample(compiled, seed, config, display)
            timings["sample"] = time.perf_counter() - t0
        elif sampler in ("pymc", "numpyro"):
            t0 = time.perf_counter()
            extra = {"nuts_sampler": "numpyro", "chain_method": "sequential"} if sampler == "numpyro" else {}
            progress.stage(f"sample ({sampler})")
            with model:
                pm.set_data(data)
                idata = pm.sample(
                    draws=config.draws_for(exact=False),
                    tune=config.tune,
                    chains=config.chains,
                    random_seed=seed,
                    # PyMC's own rich bar cannot run inside our live display
                    progressbar=config.progress and display is None,
                    target_accept=config.target_accept,
                    compute_convergence_checks=False,
                    cores=min(config.chains, 2),
                    **extra,
                )
            timings["sample"] = time.perf_counter() - t0  # numpyro: includes its JAX compile
        else:  # pragma: no cover - guarded by SamplerConfig users
            raise ValueError(f"unknown sampler {sampler!r}; choose from {available_samplers()}")
    finally:
        if own is not None:
            own.close()
    # a real InferenceData: a PyMC model's callers go on with PyMC and ArviZ (imported already)
    return _with_model_coords(as_inference_data(idata), model), timings


def sample_compiled(
    compiled: Any, *, seed: int, config: SamplerConfig, coords: dict[str, Sequence[Any]]
) -> tuple[DeferredInferenceData, dict[str, Any]]:
    """Sample a model that needs no compiling with nutpie: ``compiled`` has the interface
    of ``nutpie.compile_pymc_model``'s result on code compiled once per machine (e.g.
    :func:`saturation.models.sigmoid_kernel.compiled_model`). Same display, timings and
    settings as :func:`sample_model`; ``coords`` label the draws."""
    timings: dict[str, Any] = {"compile": 0.0, "sample": 0.0, "sampler": "nutpie"}
    own = progress.Progress(1, "fit") if config.progress and progress.current() is None else None
    try:
        t0 = time.perf_counter()
        idata = _nutpie_sample(compiled, seed, config, progress.current())
        timings["sample"] = time.perf_counter() - t0
    finally:
        if own is not None:
            own.close()
    return _with_coords(idata, coords), timings


def sample_compiled_parts(
    parts: Sequence[tuple[str, Any, SamplerConfig]], *, seed: int, coords: dict[str, Sequence[Any]]
) -> tuple[DeferredInferenceData, dict[str, Any]]:
    """Sample models that share no parameter one after the other (:func:`sample_compiled`
    each) and join their draws into one InferenceData: the posterior holds every part's
    variables, chain by chain (independent parts: any pairing of their chains is a draw of
    the joint posterior), ``sample_stats`` each part's along a ``part`` dimension (the
    divergences of all). ``parts``: (name, compiled model, its sampler settings; the same
    chains and draws for all); part ``k`` is seeded from (``seed``, ``k``)."""
    import xarray as xr

    if len({(c.chains, c.draws_for(exact=False)) for _, _, c in parts}) > 1:
        raise ValueError("the parts of one posterior need the same chains and draws")
    idatas, timings = [], {"compile": 0.0, "sample": 0.0, "sampler": "nutpie"}
    for k, (_, compiled, config) in enumerate(parts):
        part_seed = int(np.random.SeedSequence([seed, k]).generate_state(1)[0])
        idata, t = sample_compiled(compiled, seed=part_seed, config=config, coords=coords)
        idatas.append(idata)
        timings["sample"] += t["sample"]
    posteriors: list[xr.Dataset] = [i.posterior for i in idatas]
    stats_of: list[xr.Dataset] = [i.sample_stats for i in idatas]
    posterior = xr.merge(posteriors, combine_attrs="override")
    stats = xr.concat(stats_of, dim="part", combine_attrs="override")
    stats = stats.assign_coords(part=[name for name, _, _ in parts])
    return DeferredInferenceData(posterior, sample_stats=stats), timings


def _nutpie_sample(
    compiled: Any, seed: int, config: SamplerConfig, display: progress.Progress | None
) -> DeferredInferenceData:
    """nutpie's draws of ``compiled`` with ``config``'s settings, its progress in ``display``:
    the posterior and sample statistics, read by :func:`trace_groups` (no ArviZ import)."""
    nutpie = import_nutpie()

    total = config.chains * (config.draws_for(exact=False) + config.tune)
    progress.stage("sample", total=total, unit="draws")
    with _nutpie_progress(display, config.chains):
        raw = nutpie.sample(
            compiled,
            draws=config.draws_for(exact=False),
            tune=config.tune,
            chains=config.chains,
            seed=seed,
            progress_bar=display is not None,
            progress_rate=500,
            save_warmup=False,
            target_accept=config.target_accept,
            low_rank_modified_mass_matrix=config.low_rank,
            return_raw_trace=True,
        )
    draws, stats = raw.get_arrow_trace()
    return trace_groups(draws, stats, coords=compiled.coords)


#: sample statistics nutpie stores only when asked (its ``store_*`` settings, all off here)
#: and its own conversion leaves out when they are off
UNSTORED_STATS = frozenset(
    {
        "gradient",
        "unconstrained_draw",
        "mass_matrix_inv",
        "mass_matrix_eigvals",
        "mass_matrix_stds",
        "divergence_start",
        "divergence_end",
        "divergence_momentum",
        "divergence_start_gradient",
    }
)


def trace_groups(
    draw_batches: Sequence[Any], stat_batches: Sequence[Any], *, coords: dict[str, Any]
) -> DeferredInferenceData:
    """The posterior and ``sample_stats`` groups of nutpie's raw trace (one Arrow record
    batch of draws and one of statistics per chain, tuning draws first), as
    ``nutpie.sample`` would return them without ``return_raw_trace`` (its conversion through
    ``arviz.from_dict``, nutpie 0.16.8 nutpie/sample.py:57-152) but without importing ArviZ:
    the tuning draws dropped, each variable (chain, draw, *shape) with the dimension names
    of its Arrow field's metadata (``{name}_dim_{i}`` where it has none, as ArviZ names
    them), ``coords`` for the named dimensions; a chain with fewer draws is padded with NaN
    (float) or 0. Tested identical to nutpie's own conversion (``created_at`` aside).
    """
    if len(draw_batches) != len(stat_batches):
        raise ValueError(f"{len(draw_batches)} chains of draws but {len(stat_batches)} of statistics")
    n_tune = [int(np.asarray(stat.column("tuning")).sum()) for stat in stat_batches]
    n_kept = max((b.num_rows - t for b, t in zip(draw_batches, n_tune, strict=True)), default=0)
    groups = []
    for batches, skip in ((draw_batches, frozenset()), (stat_batches, UNSTORED_STATS)):
        values: dict[str, np.ndarray] = {}
        dims: dict[str, list[str]] = {}
        for chain, (batch, tune) in enumerate(zip(batches, n_tune, strict=True)):
            kept = batch.slice(tune, batch.num_rows - tune)
            for name in kept.column_names:
                if name not in skip:
                    _fill_column(values, dims, name, kept.column(name), chain, len(batches), n_kept)
        extra = {d: coords[d] for names in dims.values() for d in names if d in coords}
        extra |= {
            d: np.arange(ary.shape[2 + i])
            for name, ary in values.items()
            for i, d in enumerate(dims[name])
            if d not in coords
        }
        groups.append(posterior_dataset(values, coords=extra, dims=dims))
    return DeferredInferenceData(groups[0], sample_stats=groups[1])


def _fill_column(
    values: dict[str, np.ndarray],
    dims: dict[str, list[str]],
    name: str,
    column: Any,
    chain: int,
    n_chains: int,
    n_kept: int,
) -> None:
    """Chain ``chain``'s draws of one Arrow column into ``values[name]`` (chain, draw, *shape)."""
    import pyarrow

    meta = column.field.metadata or {}
    shape = [int(v) for v in meta[b"shape"].decode().split(",")] if meta.get(b"shape") else []
    named = meta[b"dims"].decode().split(",") if meta.get(b"dims") else []
    column = pyarrow.array(column)
    missing = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if hasattr(column, "flatten"):
        column = column.flatten()
    flat = column.to_numpy(zero_copy_only=False)
    if name not in values:
        dtype = np.dtype(column.type.to_pandas_dtype())
        fill = np.nan if dtype in (np.float64, np.float32) else 0
        values[name] = np.full((n_chains, n_kept, *shape), fill, dtype=dtype)
        dims[name] = named or [f"{name}_dim_{i}" for i in range(len(shape))]
    present = ~missing
    values[name][chain, : len(missing)][present] = flat.reshape((int(present.sum()), *shape))


def _with_model_coords(idata: az.InferenceData, model: pm.Model) -> az.InferenceData:
    """The InferenceData labelled with ``model``'s coordinates: a reused compiled model keeps
    the coordinate values of the model it was first compiled from (``with_data`` swaps the
    data only), so a fit of arms c, d after one of arms a, b would be labelled a, b."""
    return _with_coords(idata, {name: vals for name, vals in model.coords.items() if vals is not None})


def _with_coords(idata: Any, coords: dict[str, Sequence[Any]]) -> Any:
    """``idata`` with each group's dimensions of the same length labelled by ``coords``."""
    for group in idata.groups():
        ds = idata[group]
        new = {name: list(vals) for name, vals in coords.items() if name in ds.dims and ds.sizes[name] == len(vals)}
        if new:
            setattr(idata, group, ds.assign_coords(new))
    return idata


def _with_initial_points(compiled: Any, model: pm.Model) -> Any:
    """A reused compiled model with the initial points of ``model`` (this fit's data).

    ``with_data`` swaps nutpie's copies of the data but keeps the initial-point function
    of the model first compiled (nutpie 0.16.8 nutpie/compile_pymc.py:128-148; the function
    is built once, :546-554): a reused model would start its chains from the first data
    set's initial point, and the same seed and data would give other draws depending on
    what the process compiled first. The function is rebuilt the way nutpie builds it
    (PyMC's ``make_initial_point_fn``, support points with jitter on every free variable,
    transformed values) and flattened in the compiled model's variable order.
    """
    fn = pymc_initial_point.make_initial_point_fn(
        model=model, default_strategy="support_point", jitter_rvs=set(model.free_RVs), return_transformed=True
    )
    # nutpie's order: the free variables' value (transformed) variables (compile_pymc.py:700-712)
    names = [model.rvs_to_values[v].name for v in model.free_RVs]
    lock = threading.Lock()  # nutpie calls it from its chains' threads (as nutpie's own is locked)

    def initial_point(seed: Any) -> np.ndarray:
        with lock:
            point = fn(seed)
        flat = np.concatenate([np.asarray(point[n], dtype=np.float64).ravel() for n in names])
        if flat.size != compiled.n_dim:  # pragma: no cover - a nutpie layout this does not know
            raise ValueError(f"initial point has {flat.size} values, the compiled model {compiled.n_dim}")
        return flat

    return replace(compiled, initial_point_func=initial_point)


#: what nutpie's progress callback is asked to render: finished and total draws, then
#: each chain's divergences
_NUTPIE_TEMPLATE = (
    "{{ total_finished_draws }} {{ total_draws }}{% for chain in chains %} {{ chain.divergences }}{% endfor %}"
)


@contextlib.contextmanager
def _nutpie_progress(display: progress.Progress | None, chains: int) -> Iterator[None]:
    """Route nutpie's progress into ``display`` (draws done, divergences) while sampling.

    nutpie renders progress through a template callback only in notebooks; in a terminal
    it draws its own bar (which would fight our live display, and prints nothing useful
    to a log file). Its ``sample`` picks the progress kind from ``nutpie._lib.ProgressType``
    (nutpie 0.16.8 nutpie/sample.py:451-506, ``_BackgroundSampler.__init__``); for the duration of the call we
    make the terminal kind the template callback. Should nutpie's internals change, the
    fit still runs and the display shows the stage without draw counts.
    """
    module = sys.modules.get("nutpie.sample")
    lib: Any = getattr(module, "_lib", None)
    kinds: Any = getattr(lib, "ProgressType", None)
    if display is None or lib is None or not hasattr(kinds, "template_callback"):
        yield
        return

    def callback(text: str) -> None:
        try:
            numbers = [int(x) for x in text.split()]
        except ValueError:  # pragma: no cover - a template nutpie renders differently
            return
        done, divs = numbers[0], sum(numbers[2:])
        display.advance(done, note=f"{divs} divergences" if divs else "")

    class _Kinds:
        none = staticmethod(kinds.none)
        template_callback = staticmethod(kinds.template_callback)

        @staticmethod
        def indicatif(rate: int) -> Any:
            return kinds.template_callback(rate, _NUTPIE_TEMPLATE, chains, callback)

    class _Lib:
        ProgressType = _Kinds

        def __getattr__(self, name: str) -> Any:
            return getattr(lib, name)

    module._lib = _Lib()  # type: ignore[union-attr]
    try:
        yield
    finally:
        module._lib = lib  # type: ignore[union-attr]


def _split(x: np.ndarray) -> np.ndarray:
    """(chain, draw, K) -> (2 chain, draw // 2, K): first and last halves (odd middle dropped)."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half :]], axis=0)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 1 down each column of the 2-D ``x``, ties given their average rank:
    ``scipy.stats.rankdata(x, method="average", axis=0)`` (the ranks are halves of
    integers, so exact), without importing scipy.stats; tested equal to it."""
    x = np.asarray(x)
    # worked along rows of the transpose (contiguous), and returned laid out as rankdata's
    # (a transposed (K, N) array): the FFTs downstream then add in the same order and the
    # ESS comes out bit for bit the same
    xt = np.ascontiguousarray(x.T)
    k, n = xt.shape
    order = np.argsort(xt, axis=1)  # ties get one average rank: their order does not matter
    s = np.take_along_axis(xt, order, axis=1)
    pos = np.broadcast_to(np.arange(n), (k, n))
    # each sorted value's run of equal values (NaN: each its own run, as rankdata's NaNs
    # are propagated below): its first position and one past its last
    new = np.ones((k, n), dtype=bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    first = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    last = np.ones((k, n), dtype=bool)
    last[:, :-1] = new[:, 1:]
    end = np.minimum.accumulate(np.where(last, pos, n)[:, ::-1], axis=1)[:, ::-1] + 1
    out = np.empty((k, n), dtype=np.float64)
    np.put_along_axis(out, order, (first + 1 + end) / 2.0, axis=1)  # mean of ranks first+1 .. end
    nan = np.isnan(xt) if np.issubdtype(xt.dtype, np.floating) else np.zeros(xt.shape, bool)
    out[nan.any(axis=1)] = np.nan  # rankdata's nan_policy "propagate": a column with NaN is all NaN
    return out.T


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Rank-normalise every variable over all its (pooled) draws: average ranks of ties,
    Blom offset 3/8, normal quantiles (the ranks are halves of integers: the quantile of
    each possible rank computed once and looked up)."""

    flat = x.reshape(-1, x.shape[-1])
    rank = average_ranks(flat)
    n = flat.shape[0]
    table = ndtri((np.arange(2 * n + 1) / 2.0 - 0.375) / (n + 0.25))  # at rank = i / 2
    z = np.full(rank.shape, np.nan)
    ok = np.isfinite(rank)
    z[ok] = table[(2.0 * rank[ok]).astype(np.intp)]
    return z.reshape(x.shape)


def _rhat_basic(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), axis=0, ddof=1)
    within = np.var(x, axis=1, ddof=1).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _smooth_length(n: int) -> int:
    """The smallest 5-smooth number (2^a 3^b 5^c) at least ``n``."""
    best = 1 << max(int(n - 1).bit_length(), 0)
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def _ess_basic(x: np.ndarray) -> np.ndarray:
    """ESS of (chain, draw, K) with Geyer's initial positive and monotone sequences."""
    n_chain, n, k = x.shape
    # each chain's autocovariance by FFT along contiguous rows, zero-padded to a 5-smooth
    # length of at least 2n (no wrap-around; pocketfft is fastest on such lengths)
    centred = np.ascontiguousarray((x - x.mean(axis=1, keepdims=True)).transpose(0, 2, 1))  # (chain, K, draw)
    m = _smooth_length(2 * n)
    f = np.fft.rfft(centred, n=m, axis=2)
    acov = np.fft.irfft(f * np.conjugate(f), n=m, axis=2)[:, :, :n].transpose(0, 2, 1) / n
    mean_var = acov[:, 0].mean(axis=0) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if n_chain > 1:
        var_plus = var_plus + np.var(x.mean(axis=1), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # (lag, K)
    rho[0] = 1.0
    n_pairs = max((n - 2 + 1) // 2, 1)  # pairs (2p, 2p + 1) that the sequential rule can reach
    pairs = rho[: 2 * n_pairs].reshape(n_pairs, 2, k)
    sums = pairs.sum(axis=1)  # (pair, K)
    nonpos = sums <= 0
    # the last pair looked at: the first non-positive one, else the last reachable one
    end = np.where(nonpos.any(axis=0), nonpos.argmax(axis=0), n_pairs - 1)
    idx = np.arange(n_pairs)[:, None]
    running_min = np.minimum.accumulate(np.where(idx < end, sums, np.inf), axis=0)
    body = np.where(idx < end, running_min, 0.0).sum(axis=0)
    even = pairs[end, 0, np.arange(k)]
    stored = (end == 0) | (sums[end, np.arange(k)] >= 0)
    last = np.where((even > 0) | stored, even, 0.0)
    total = n_chain * n
    tau = np.maximum(-1.0 + 2.0 * body + last, 1.0 / np.log10(total))
    ess = total / tau
    constant = (x.max(axis=(0, 1)) - x.min(axis=(0, 1))) < np.finfo(float).resolution
    ess = np.where(constant, float(total), ess)
    return np.where(np.isnan(rho).any(axis=0) & ~constant, np.nan, ess)


def rhat_ess(x: np.ndarray) -> dict[str, np.ndarray]:
    """Rank-normalised split R-hat and bulk/tail ESS of every variable at once.

    ``x`` is (chain, draw, K). The same estimators as ``arviz.rhat`` (method "rank") and
    ``arviz.ess`` (methods "bulk" and "tail", Vehtari et al. 2021), vectorised over the K
    variables: ArviZ loops over scalars in Python, which took longer than sampling for the
    transfer model's thousands of task effects. Agreement with ArviZ is tested.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 3:
        raise ValueError(f"expected (chain, draw, K), got shape {x.shape}")
    n_chain, n_draw, k = x.shape
    nan = np.full(k, np.nan)
    bad = np.isnan(x).any(axis=(0, 1))
    if n_draw < 4:
        return {"rhat": nan, "ess_bulk": nan, "ess_tail": nan}
    split = _split(x)
    z = _z_scale(split)
    ess_bulk = _ess_basic(z)
    q = np.quantile(x.reshape(-1, k), [0.05, 0.95], axis=0)
    ess_tail = np.minimum(_ess_basic(_split((x <= q[0]).astype(float))), _ess_basic(_split((x <= q[1]).astype(float))))
    if n_chain < 2:
        rhat = nan
    else:
        folded = np.abs(split - np.median(split.reshape(-1, k), axis=0))
        rhat = np.maximum(_rhat_basic(z), _rhat_basic(_z_scale(folded)))
    return {
        name: np.where(bad, np.nan, v) for name, v in (("rhat", rhat), ("ess_bulk", ess_bulk), ("ess_tail", ess_tail))
    }


def diagnostics(idata: az.InferenceData, var_names: Sequence[str]) -> dict[str, Any]:
    """Max R-hat, min bulk/tail ESS and divergences over ``var_names``; ``converged`` flag."""
    post = idata.posterior
    n_chains = post.sizes["chain"]
    n_draws = post.sizes["draw"]
    arrays = [post[v].to_numpy().reshape(n_chains, n_draws, -1) for v in var_names]
    arrays = [a for a in arrays if a.shape[2]]
    if arrays:
        d = rhat_ess(np.concatenate(arrays, axis=2))
        rhat_max, ess_min, ess_tail_min = (
            float(np.nanmax(d["rhat"])),
            float(np.nanmin(d["ess_bulk"])),
            float(np.nanmin(d["ess_tail"])),
        )
    else:
        rhat_max = ess_min = ess_tail_min = float("nan")
    # independent draws ("exact" sampler) have no sample_stats: no trajectories, no divergences
    stats_ = idata.get("sample_stats")
    div = int(stats_["diverging"].sum()) if stats_ is not None and "diverging" in stats_ else 0
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


def nuisance_text(diag: dict[str, Any]) -> str:
    """ "; task effects (nuisance): R-hat max ..., bulk ESS min ..." when the diagnostics
    check nuisance effects separately (transfer model), else ""."""
    t = diag.get("task_effects")
    if not t:
        return ""
    return (
        f"; task effects (nuisance): R-hat max {t['rhat_max']:.3f} (<= {t['rhat_threshold']}), "
        f"bulk ESS min {t['ess_bulk_min']:.0f}"
    )


def warn_if_not_converged(diag: dict[str, Any], what: str) -> None:
    if not diag["converged"]:
        warnings.warn(
            f"\n{'!' * 70}\n{what} DID NOT CONVERGE: R-hat max {diag['rhat_max']:.3f} "
            f"(<= {RHAT_MAX}), bulk ESS min {diag['ess_bulk_min']:.0f} "
            f"(>= {diag['thresholds']['ess_bulk_min']}), divergences {diag['divergences']} (0)"
            + nuisance_text(diag)
            + ".\n"
            f"Do not read its tables; sample longer or revisit the model.\n{'!' * 70}",
            ConvergenceWarning,
            stacklevel=3,
        )


def hdi_1d(x: np.ndarray, prob: float = S.HDI_PROB) -> np.ndarray:
    """The narrowest interval holding ``prob`` of the draws ``x`` (1-D): ``arviz.hdi``'s
    algorithm for one variable (arviz 0.23 ``stats/stats.py::_hdi``, not circular, NaN not
    skipped), without importing ArviZ (a second and more); tested equal to it. All of
    ``x``'s values are one sample (:func:`hdi_columns` of them as one column)."""
    return hdi_columns(np.asarray(x).reshape(-1, 1), prob)[0]


def hdi_columns(x: np.ndarray, prob: float = S.HDI_PROB) -> np.ndarray:
    """The narrowest interval holding ``prob`` of each column's draws, for every column of
    ``x`` (draws, k) at once: (k, 2) (the first of equally narrow ones, as ``arviz.hdi``
    of a (1, draws, k) array picks); tested equal to it."""
    ary = np.sort(np.asarray(x, dtype=np.float64), axis=0)
    n = ary.shape[0]
    inc = int(np.floor(prob * n))
    if n - inc <= 0:
        raise ValueError("Too few elements for interval calculation. ")
    i = np.argmin(ary[inc:] - ary[: n - inc], axis=0)
    cols = np.arange(ary.shape[1])
    return np.stack([ary[i, cols], ary[i + inc, cols]], axis=-1)


def kde_at(x: np.ndarray, point: float) -> float:
    """Gaussian kernel density of the 1-D draws ``x`` at ``point`` with Scott's bandwidth:
    ``scipy.stats.gaussian_kde(x)(point)[0]`` computed the same way, operation for operation
    (scipy 1.17 ``stats/_kde.py`` and ``_stats.pyx::gaussian_kernel_estimate``: weights 1/n,
    ``np.cov`` with them, scipy.linalg's Cholesky factor and triangular solves, the kernel
    terms summed in draw order with libm's exp), without importing SciPy: in one dimension
    the Cholesky factor of the 1 x 1 covariance is its square root, and the triangular
    solves multiply the draws by its reciprocal and divide the single point by it, as the
    OpenBLAS of SciPy's wheels does (the other way round differs in the last bit); tested
    equal to it."""
    data = np.atleast_2d(np.asarray(x, dtype=float))
    if data.shape[0] != 1 or data.size < 2:
        raise ValueError("kde_at needs a 1-D sample of two or more draws")
    n = data.shape[1]
    weights = np.ones(n) / n
    factor = np.power(1 / np.vecdot(weights, weights), -1.0 / 5)  # Scott: neff ** (-1 / (d + 4))
    cov = float(np.cov(data, rowvar=True, bias=False, aweights=weights))
    if not cov > 0:
        raise ValueError("kde_at needs draws that are not all equal")  # scipy: a singular covariance
    cho = float(np.sqrt(cov) * factor)
    inv = 1.0 / cho
    pts = (data[0] * inv).tolist()
    at = float(point) / cho  # one value: divided (OpenBLAS's path for a single right-hand side)
    norm = math.pow(2 * math.pi, -1 / 2.0) / cho
    total = 0.0
    for w, p in zip(weights.tolist(), pts, strict=True):
        r = p - at
        total += w * (math.exp(-(r * r) / 2.0) * norm)
    return total


def interval(x: Any, *, center: str = "mean") -> dict[str, Any]:
    """Posterior mean, median, sd and 94 % HDI (``schema.HDI_PROB``) of the draws ``x``, all
    of its values one sample (a (chain, draw) array pooled). ``center="median"`` (a ratio,
    whose mean may not exist) marks the median as the point to show (``"center"``;
    :func:`saturation.summary.format_interval`)."""
    x = np.asarray(x, dtype=float)
    hdi = hdi_1d(x)
    out = {
        "mean": float(np.mean(x)),
        "median": float(np.median(x)),
        "sd": float(np.std(x, ddof=1)),
        "hdi": [float(hdi[0]), float(hdi[1])],
    }
    if center == "median":
        out["center"] = "median"
    return out


def stamp_attrs(
    idata: az.InferenceData,
    model: str,
    config: Any,
    data_summary: dict[str, Any],
    diag: dict[str, Any],
    timings: dict[str, Any] | None = None,
) -> None:
    """Record the package version, model name, config (a dataclass or a dict), the input
    data's summary, the diagnostics, the timings and the interval convention on every
    InferenceData group: the one place every fit's attrs are written (JSON strings, so
    netCDF stores them)."""
    attrs = {
        "saturation_version": __version__,
        "model": model,
        "config": json.dumps(asdict(config) if is_dataclass(config) else config, default=str),  # type: ignore[arg-type]
        "data_summary": json.dumps(data_summary, default=str),
        "diagnostics": json.dumps(diag),
        "hdi_prob": S.HDI_PROB,
    }
    if timings is not None:
        attrs["timings"] = json.dumps(timings, default=str)
    if isinstance(idata, DeferredInferenceData):  # a deferred group stamped when it is made
        idata.update_group_attrs(attrs)
        return
    for group in idata.groups():
        getattr(idata, group).attrs.update(attrs)


def merge_diagnostics(diags: list[dict[str, Any]]) -> dict[str, Any]:
    """One diagnostics record for several fits: worst R-hat and ESS, summed divergences,
    converged only when every fit converged."""
    return {
        "rhat_max": max(d["rhat_max"] for d in diags),
        "ess_bulk_min": min(d["ess_bulk_min"] for d in diags),
        "ess_tail_min": min(d["ess_tail_min"] for d in diags),
        "divergences": sum(d["divergences"] for d in diags),
        "converged": all(d["converged"] for d in diags),
        "thresholds": diags[0]["thresholds"],
    }
