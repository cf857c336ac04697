"""The allowed ranges of the settings every analysis shares, checked in one place.

The command line (before it reads any data), the analysis specs (when they are loaded) and
the config dataclasses (``validate()``) all call these functions, so a value refused in
one is refused in all, with the same one-line message. Nothing here imports numpy or PyMC:
the CLI checks its options in milliseconds.
"""

from __future__ import annotations

import math
from typing import Any

#: the sampler's defaults (``models.sampling.SamplerConfig``'s fields read these)
DEFAULT_DRAWS = 1000
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
    if _is_int(draws) and _is_int(chains) and draws >= 1 and chains >= 1 and draws * chains > MAX_TOTAL_DRAWS:
        gib = draws * chains * BYTES_PER_DRAW / 2**30
        out.append(
            f"chains x draws = {chains * draws:,} exceeds {MAX_TOTAL_DRAWS:,} (the draws are kept in memory: about "
            f"{gib:.1f} GiB for a three-level plateau fit, more for larger models)"
        )
    if target_accept is not None and (not _is_real(target_accept) or not 0 < target_accept < 1):
        out.append(f"target_accept must lie strictly between 0 and 1, got {target_accept!r}")
    if seed is not None and (not _is_int(seed) or not 0 <= seed <= MAX_SEED):
        out.append(f"seed must be a whole number in [0, 2**32 - 1], got {seed!r}")
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
