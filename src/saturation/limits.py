"""The allowed ranges of the settings every analysis shares, checked in one place.

The command line (before it reads any data), the analysis specs (when they are loaded) and
the config dataclasses (``validate()``) all call these functions, so a value refused in
one is refused in all, with the same one-line message. Nothing here imports numpy or PyMC:
the CLI checks its options in milliseconds.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

#: the sampler's defaults (``configs.SamplerConfig``'s fields read these): draws per chain of
#: NUTS, and of the exact Gaussian plateau sampler, whose draws are independent and cost
#: about 10 us each (4 x 5,000 add about 0.2 s to a three-level fit: docs/performance.md)
DEFAULT_DRAWS = 1000
EXACT_DRAWS = 5000
DEFAULT_TUNE = 1000
DEFAULT_CHAINS = 4
#: chains x draws at most: the draws are held in memory (a plateau fit of three levels over
#: 91 steps keeps about 3 KB per draw, so the bound is about 0.3 GB)
MAX_TOTAL_DRAWS = 100_000
#: tuning draws per chain at most
MAX_TUNE = 100_000
#: chains at most (R-hat needs at least two)
MAX_CHAINS = 64
#: bytes a draw of a three-level plateau fit keeps (measured: 11.9 GiB for 4 x 10^6 draws)
BYTES_PER_DRAW = 3_200
#: seeds are 32-bit unsigned integers (NumPy's and nutpie's generators take them)
MAX_SEED = 2**32 - 1
#: bytes a change-point fit may take, estimated before it starts (:func:`fit_memory_problem`):
#: 8 GiB unless the environment variable ``SATURATION_MAX_FIT_BYTES`` sets it
MAX_FIT_BYTES = int(v) if (v := os.environ.get("SATURATION_MAX_FIT_BYTES", "").strip()).isdigit() else 8 << 30
#: bytes a plateau fit takes per (level, candidate change point, step) cell (peak resident
#: memory measured on the exact sampler, one level, 4 x 250 draws: 176, 176 and 169 at 1,000,
#: 2,000 and 4,000 steps logged at every step; the NUTS path is not measured)
FIT_BYTES_PER_CELL = 180


#: seconds a NUTS change-point fit may be expected to take before it is refused
#: (:func:`fit_time_problem`): 300 unless ``SATURATION_MAX_FIT_SECONDS`` sets it
MAX_FIT_SECONDS = int(v) if (v := os.environ.get("SATURATION_MAX_FIT_SECONDS", "").strip()).isdigit() else 300
#: seconds per (level, candidate, step) cell of one gradient of the NUTS plateau likelihood,
#: and leapfrog steps per draw as a function of the steps (measured 2026-12-05, binomial, one
#: level, 4 chains x (1000 + 1000), 2 cores: 40 steps 25 s with 12 leapfrog steps a draw,
#: 100 steps 191 s with 27; the formula gives 22 s and 206 s)
NUTS_SECONDS_PER_CELL = 0.2e-6
NUTS_COMPILE_SECONDS = 10.0


#: the environment variables that set the thread count of the BLAS libraries NumPy may be
#: built with (OpenBLAS, as in NumPy's wheels; MKL; Apple's Accelerate; BLIS)
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")


def single_thread_blas() -> bool:
    """Run the BLAS library on one thread unless the environment says otherwise.

    Sets each of :data:`BLAS_THREAD_VARIABLES` to 1, unless the environment sets one of them
    or ``OMP_NUM_THREADS`` (which OpenBLAS built with OpenMP reads, after its own variable):
    then the user's choice is left as it is. The BLAS calls of
    an analysis are on small matrices (tens to a few thousand rows), which one thread does
    as fast; OpenBLAS's idle worker threads spin after each call, and the chains, the dask
    workers and the two sampled parts already use the cores. Measured on the default
    report (2 cores): 109.6 -> 92.5 CPU-s at the same wall time; ``saturation plateau``
    1.44-1.54 -> 1.32-1.38 s (docs/performance.md). The command line calls this before it
    imports NumPy.

    Returns
    -------
    bool
        Whether it can take effect: False when NumPy was imported already (the BLAS library
        read its thread count then).
    """
    if not any(os.environ.get(name) for name in (*BLAS_THREAD_VARIABLES, "OMP_NUM_THREADS")):
        for name in BLAS_THREAD_VARIABLES:
            os.environ[name] = "1"
    return "numpy" not in sys.modules


def nuts_leapfrog_per_draw(steps: int) -> float:
    return 2.0 + 0.25 * steps


def fit_time_problem(
    steps: int, candidates: int, levels: int, *, chains: int, draws: int, tune: int, likelihood: str
) -> str:
    """What is wrong with the expected time of a NUTS change-point fit ("" when it is within
    :data:`MAX_FIT_SECONDS`).

    Each gradient of the marginal likelihood over the candidate change points touches
    levels x candidates x steps cells; the leapfrog steps per draw grow with the steps
    (:func:`nuts_leapfrog_per_draw`), and two cores run the chains. The estimate is
    ``compile + chains x (tune + draws) x leapfrog x cells x seconds_per_cell / 2``; the
    ZOIB's latent step offsets count twice.

    Parameters
    ----------
    steps, candidates, levels : int
        Steps with data, candidate change points, levels fitted together.
    chains, draws, tune : int
        The sampler's settings.
    likelihood : str
        "binomial" or "zoib".

    Returns
    -------
    str
        The estimate, the limit and what to do instead, or ``""``.
    """
    cells = steps * candidates * levels * (2 if likelihood == "zoib" else 1)
    per_chain = (tune + draws) * nuts_leapfrog_per_draw(steps) * cells * NUTS_SECONDS_PER_CELL
    cores = min(chains, os.cpu_count() or 1, 2)
    seconds = NUTS_COMPILE_SECONDS + chains * per_chain / max(cores, 1)
    if seconds <= MAX_FIT_SECONDS:
        return ""
    shown = f"{seconds / 60:,.0f} min" if seconds >= 120 else f"{seconds:,.0f} s"
    return (
        f"likelihood '{likelihood}' with an unknown change point samples {candidates:,} candidate change points x "
        f"{steps:,} steps x {levels} level(s) in every NUTS gradient: about {shown} here, more than the limit of "
        f"{MAX_FIT_SECONDS:,} s (raise it with SATURATION_MAX_FIT_SECONDS); fit the per-step means with the "
        "Gaussian likelihood (the default: exact, about a second, right with tens of trials a step), give the "
        "break (--breakpoint), or fit fewer steps"
    )


class OptionError(ValueError):
    """A setting that does not fit the data (a break outside the observed steps, ...): a usage
    error (the CLI's exit code 2), found only once the data are read."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def sampler_problems(
    *,
    draws: Any = None,
    tune: Any = None,
    chains: Any = None,
    target_accept: Any = None,
    seed: Any = None,
    default_draws: int | None = None,
    draws_name: str = "draws",
) -> list[str]:
    """What is wrong with these sampler settings (``None``: not given, not checked).

    Parameters
    ----------
    draws, tune, chains : int, optional
        Draws and tuning draws per chain, and chains.
    target_accept : float, optional
        NUTS target acceptance rate.
    seed : int, optional
        The random seed.
    default_draws : int, optional
        The draws per chain a fit takes when ``draws`` is not given: chains x draws is then
        checked at it, and its message says so.
    draws_name : str, default "draws"
        How the draws setting is named where it is given (``--draws`` on the command line).

    Returns
    -------
    list of str
        One message per problem, naming the setting, the value and the allowed range
        (empty when all is well).
    """
    out = []
    if draws is not None and (not _is_int(draws) or draws < 1):
        out.append(f"draws must be a whole number >= 1, got {draws!r}")
    if tune is not None and (not _is_int(tune) or not 0 <= tune <= MAX_TUNE):
        out.append(f"tune must be a whole number in [0, {MAX_TUNE:,}], got {tune!r}")
    if chains is not None and (not _is_int(chains) or not 2 <= chains <= MAX_CHAINS):
        out.append(f"chains must be a whole number in [2, {MAX_CHAINS}] (R-hat compares chains), got {chains!r}")
    total, not_given = draws, ""
    if draws is None and default_draws is not None:
        total, not_given = default_draws, f" ({draws_name} not given: {default_draws} a chain)"
    if _is_int(total) and _is_int(chains) and total >= 1 and chains >= 1 and total * chains > MAX_TOTAL_DRAWS:
        gib = total * chains * BYTES_PER_DRAW / 2**30
        out.append(
            f"chains x draws = {chains * total:,} exceeds {MAX_TOTAL_DRAWS:,} (the draws are kept in memory: about "
            f"{gib:.1f} GiB for a three-level plateau fit, more for larger models){not_given}"
        )
    if target_accept is not None and (not _is_real(target_accept) or not 0 < target_accept < 1):
        out.append(f"target_accept must lie strictly between 0 and 1, got {target_accept!r}")
    if seed is not None and (not _is_int(seed) or not 0 <= seed <= MAX_SEED):
        out.append(f"seed must be a whole number in [0, 2**32 - 1], got {seed!r}")
    return out


def prior_problems(priors: Any) -> list[str]:
    """What is wrong with a Priors dataclass's values: every number finite, every scale
    (a field ending in ``_sd``) positive, ``min_segment`` a positive integer; None (from the
    data) and tuples of centres are checked element by element.

    Parameters
    ----------
    priors : dataclass instance
        :class:`~saturation.configs.PlateauPriors`, ``TransferPriors`` or ``SigmoidPriors``.

    Returns
    -------
    list of str
        One message per problem (empty when all is well).
    """
    from dataclasses import fields

    out = []
    for f in fields(priors):
        value = getattr(priors, f.name)
        if value is None:
            continue
        values = list(value) if isinstance(value, tuple | list) else [value]
        if not all(_is_real(v) and math.isfinite(v) for v in values):
            out.append(f"prior {f.name} must be a finite number, got {value!r}")
        elif f.name.endswith("_sd") and not all(v > 0 for v in values):
            out.append(f"prior {f.name} is a scale: it must be positive, got {value!r}")
        elif f.name == "min_segment" and (not _is_int(value) or value < 1):
            out.append(f"prior min_segment must be a whole number of steps >= 1, got {value!r}")
    return out


def rope_problems(rope: Any = None, rope_relative: Any = None, metric_max: Any = None) -> list[str]:
    """What is wrong with a plateau ROPE (``None``: not given, not checked).

    A region of practical equivalence as wide as half the metric's range would call any
    late change "flat"; a relative ROPE of 1 or more would call a late gain as large as the
    whole early rise "flat".

    Parameters
    ----------
    rope : float, optional
        Absolute ROPE on the late gain, in metric units.
    rope_relative : float, optional
        Relative ROPE, a share of the early gain.
    metric_max : float, optional
        The metric's maximum (its range is taken as [0, metric_max]).

    Returns
    -------
    list of str
        One message per problem (empty when all is well).
    """
    out = []
    if rope is not None:
        if not _is_real(rope) or rope <= 0:
            out.append(f"rope must be a positive number (metric units), got {rope!r}")
        elif _is_real(metric_max) and metric_max > 0 and rope >= metric_max / 2:
            out.append(
                f"rope {rope:g} is at least half the metric's range [0, {metric_max:g}]: every late change would "
                "count as flat (give a smaller rope, or metric_max for a metric on another scale)"
            )
    if rope_relative is not None and (not _is_real(rope_relative) or not 0 < rope_relative < 1):
        out.append(
            f"rope_relative must lie strictly between 0 and 1 (a share of the early gain), got {rope_relative!r}"
        )
    if metric_max is not None and (not _is_real(metric_max) or metric_max <= 0):
        out.append(f"metric_max must be a positive number, got {metric_max!r}")
    return out


def fit_memory_problem(steps: int, candidates: int, levels: int, *, pooled_graph: bool = False) -> str:
    """What is wrong with the size of a change-point fit ("" when it fits :data:`MAX_FIT_BYTES`).

    The fit holds arrays of candidates x steps per level (the likelihood of every step under
    every candidate change point): about :data:`FIT_BYTES_PER_CELL` bytes a cell. A pooled
    model sampled by NUTS also holds candidates x candidates arrays (the levels' change
    points around the common one).

    Parameters
    ----------
    steps, candidates, levels : int
        Steps with data, candidate change points, levels fitted together.
    pooled_graph : bool
        A pooled model sampled by NUTS.

    Returns
    -------
    str
        The estimate and the limit, or ``""``.
    """
    need = FIT_BYTES_PER_CELL * steps * candidates * levels + (32 * candidates * candidates if pooled_graph else 0)
    if need <= MAX_FIT_BYTES:
        return ""
    return (
        f"a change-point fit of {levels} level(s) over {steps:,} steps with {candidates:,} candidate change points "
        f"would take about {need / 2**30:,.1f} GiB (candidates x steps x levels x {FIT_BYTES_PER_CELL} bytes), more "
        f"than the limit of {MAX_FIT_BYTES / 2**30:,.1f} GiB (raise it with SATURATION_MAX_FIT_BYTES); give the break "
        "(--breakpoint) or fit fewer steps (every k-th)"
    )


def config_or_keywords(fn: Any, config: object | None, given: dict[str, Any]) -> None:
    """Refuse a fit function's settings given twice: ``config`` and a keyword set away from
    its default (the keyword would be ignored).

    Parameters
    ----------
    fn : callable
        The fit function (its keyword-only defaults are the "not given" values).
    config : object or None
        The config passed.
    given : dict
        The settings' keyword arguments as passed.

    Raises
    ------
    TypeError
        When ``config`` is given with any keyword that differs from its default.
    """
    if config is None:
        return
    defaults = getattr(fn, "__kwdefaults__", None) or {}
    clash = sorted(k for k, v in given.items() if not (v is defaults.get(k) or _equal(v, defaults.get(k))))
    if clash:
        raise TypeError(
            f"{fn.__name__}: give the settings as config= or as keywords, not both (config with {', '.join(clash)})"
        )


def _equal(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return False
