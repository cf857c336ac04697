"""Shared output helpers: JSON-safe values and interval text.

One home for what the CLI, the report, calibrate and the replica's truth files all write:
numbers as plain Python (NaN and infinities as ``null``), and "mean [low, high]" interval
strings. Imports only numpy, so the CLI can use it without loading the models.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np


def json_safe(obj: Any) -> Any:
    """``obj`` with numpy scalars and arrays as Python values, tuples as lists, dict keys
    as strings, non-finite floats as ``None`` and xarray Datasets as
    ``{"coords": {...}, "data_vars": {...}}`` (nested lists): ``json.dumps`` then writes
    valid JSON (no ``NaN``)."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if hasattr(obj, "data_vars") and hasattr(obj, "coords"):  # an xarray Dataset
        return {
            "coords": {str(k): json_safe(v.values) for k, v in obj.coords.items()},
            "data_vars": {str(k): json_safe(v.values) for k, v in obj.data_vars.items()},
        }
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def interval_digits(low: float, high: float) -> int:
    """Decimals that show an interval's width to one significant digit (0 to 6; 3 when the
    width is zero or not finite): the one rounding rule of every results table, in REPORT.md,
    REPORT.html and LaTeX alike (``46 [40, 52]``, ``0.32 [0.24, 0.38]``, ``0.0031 [0.0024,
    0.0038]``)."""
    width = abs(high - low)
    if width > 0 and math.isfinite(width):
        return min(max(1 - math.floor(math.log10(width)), 0), 6)
    return 3


def shows_median(e: dict[str, Any]) -> bool:
    """Whether an interval is shown by its median: it asks for it (``"center": "median"``, a
    ratio), or its mean lies outside its own HDI (a skewed or heavy-tailed posterior, whose
    mean would read as a mistake beside its interval)."""
    if e.get("median") is None:
        return False
    low, high = e["hdi"]
    return e.get("center") == "median" or not (low <= e["mean"] <= high)


def format_interval(e: dict[str, Any] | None, digits: int = 3) -> str:
    """``"mean [low, high]"`` of an interval dict (``{"mean", "hdi"}``), or ``"median m [low,
    high]"`` when :func:`shows_median`; ``"-"`` when missing."""
    if not e or e.get("mean") is None:
        return "-"
    point = f"median {_fixed(e['median'], digits)}" if shows_median(e) else _fixed(e["mean"], digits)
    return f"{point} [{_fixed(e['hdi'][0], digits)}, {_fixed(e['hdi'][1], digits)}]"


def _fixed(value: float, digits: int) -> str:
    """``value`` to ``digits`` decimals, a rounded zero without its sign ("0.00", not "-0.00")."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def convergence_words(diag: dict[str, Any] | None) -> str:
    """``"converged (R-hat max 1.002, bulk ESS min 3697)"`` or ``"NOT converged (...)"`` of a
    diagnostics dict (``models.sampling.diagnostics``); ``""`` when there is none."""
    if not diag or "converged" not in diag:
        return ""
    word = "converged" if diag["converged"] else "NOT converged"
    rhat, ess = diag.get("rhat_max"), diag.get("ess_bulk_min")
    numbers = [
        f"R-hat max {rhat:.3f}" if rhat is not None else "",
        f"bulk ESS min {ess:.0f}" if ess is not None else "",
    ]
    shown = ", ".join(n for n in numbers if n)
    return f"{word} ({shown})" if shown else word


class Interval(dict[str, Any]):
    """An interval estimate as a table cell: a dict ``{"mean", "hdi": [low, high]}`` (JSON
    and every writer read it as one) that shows itself as ``mean [low, high]`` to the
    decimals of :func:`interval_digits` (a notebook, the CLI and the report print the same
    text)."""

    @property
    def mean(self) -> float:
        """The posterior mean."""
        return float(self["mean"])

    @property
    def hdi(self) -> tuple[float, float]:
        """The 94 % HDI's bounds."""
        return float(self["hdi"][0]), float(self["hdi"][1])

    def __str__(self) -> str:
        return cell_text(self)

    __repr__ = __str__


def interval_cell(e: dict[str, Any] | None) -> Interval | None:
    """A table cell holding an interval (``{"mean", "hdi"}``, e.g. from
    ``sampling.interval``): the CSV gets its numbers in three columns, Markdown, LaTeX and
    HTML the text ``"mean [low, high]"`` to the decimals of
    :func:`~saturation.summary.interval_digits` (the same in every format)."""
    if not e or e.get("mean") is None:
        return None
    cell = Interval(mean=float(e["mean"]), hdi=[float(e["hdi"][0]), float(e["hdi"][1])])
    cell.update({k: e[k] for k in ("median", "center") if e.get(k) is not None})
    return cell


def cell_text(value: Any, digits: int = 4, missing: str = "") -> str:
    """One display-table cell as text, the same in every front end (REPORT.md, LaTeX, the
    CLI, ``table_text()``): an interval ``mean [low, high]`` to the decimals of
    :func:`interval_digits`, a missing or non-finite value as ``missing``, a bool as yes/no,
    a number to ``digits`` significant digits, anything else as it is."""
    if isinstance(value, dict) and "mean" in value and "hdi" in value:
        return format_interval(value, interval_digits(*value["hdi"]))
    if value is None or (isinstance(value, float | np.floating) and not np.isfinite(value)):
        return missing
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return f"{value:.{digits}g}"
    return str(value)


def data_text(summary: dict[str, Any], n_steps: int | None) -> str:
    """ "Data: 42,511 trials (40,020 graded) over 91 steps." from a data summary (what is
    known; empty when nothing is), for figure captions.

    Parameters
    ----------
    summary : dict
        A data summary (``n_trials``, ``n_graded``, either may be missing).
    n_steps : int, optional
        The number of steps.

    Returns
    -------
    str
        The sentence, or "".
    """
    n, graded = summary.get("n_trials"), summary.get("n_graded")
    trials = f"{int(n):,} trials" + (f" ({int(graded):,} graded)" if graded is not None else "") if n else ""
    parts = [trials, f"{n_steps} steps" if n_steps else ""]
    text = " over ".join(p for p in parts if p)
    return f"Data: {text}." if text else ""


def short_repr(head: str, lines: Any = (), width: int = 100) -> str:
    """A fit object's ``repr``: ``<head>`` then one indented line per unit (level, arm, run),
    each cut at ``width`` characters: a few lines where the dataclass repr printed every
    array (tens of thousands of characters)."""
    body = [f"  {ln}" if len(ln) <= width else f"  {ln[: width - 3]}..." for ln in lines]
    return "\n".join([head, *body])


def interval_rows(tree: dict[str, Any], units: tuple[str, ...]) -> list[dict[str, Any]]:
    """The tidy rows of a fit's nested estimands: one per interval (a dict with ``mean`` and
    ``hdi``) and per probability (a number under a key starting ``p_``), with the keys on the
    way to it as ``units`` (as many as given; deeper keys join the estimand's name with
    ``.``), and ``mean``, ``sd``, ``hdi_low``, ``hdi_high`` (a probability has its value as
    ``mean`` and no interval).

    Parameters
    ----------
    tree : dict
        Nested estimands (``{"arms": {"t2": {"asymptote": {"mean", "median", "sd", "hdi"}}}}``).
    units : tuple of str
        Column names of the leading keys (``("part", "arm")``).

    Returns
    -------
    list of dict
        The rows, in the tree's order.
    """
    rows: list[dict[str, Any]] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        if "mean" in node and "hdi" in node and len(path) > len(units):
            low, high = node["hdi"]
            rows.append(_row(path, units, node["mean"], node.get("sd"), low, high))
            return
        for key, value in node.items():
            here = (*path, str(key))
            if key.startswith("p_") and isinstance(value, int | float) and len(here) > len(units):
                rows.append(_row(here, units, float(value), None, None, None))
            else:
                walk(value, here)

    walk(tree, ())
    return rows


def _row(path: tuple[str, ...], units: tuple[str, ...], mean: Any, sd: Any, low: Any, high: Any) -> dict[str, Any]:
    n = len(units)
    return {
        **dict(zip(units, path[:n], strict=True)),
        "estimand": ".".join(path[n:]),
        "mean": mean,
        "sd": sd,
        "hdi_low": low,
        "hdi_high": high,
    }


def fit_html(head: str, table: Any) -> str:
    """A fit object's notebook view (``_repr_html_``): its short ``repr`` as a heading and its
    tidy ``summary()`` table, every name from the data HTML-escaped.

    Parameters
    ----------
    head : str
        The fit's ``repr`` (first line bold, the rest as lines).
    table : pandas.DataFrame
        The fit's ``summary()``.

    Returns
    -------
    str
        An HTML fragment.
    """
    import html

    lines = [html.escape(line) for line in head.splitlines()]
    top = f"<p><strong>{lines[0]}</strong>" + "".join(f"<br>{line}" for line in lines[1:]) + "</p>" if lines else ""
    return top + table.to_html(index=False, escape=True, float_format=lambda v: f"{v:.4g}", na_rep="")


def first_sentence(text: str) -> str:
    """The first sentence of ``text``: up to the first full stop followed by a space and a
    capital letter (or an opening parenthesis) or by the end, or a full stop after a number
    or a closing bracket followed by a space and a lower-case word (a sentence that starts
    with an arm's name: "... -0.004]. t2: 20 more steps"); never inside a number such as
    0.051 or after "e.g." before a lower-case word. The default of ``headline()``."""
    text = text.strip()
    match = re.search(r"[.?!](?=\s+[A-Z(]|\s*$)|(?<=[\d)\]])\.(?=\s+[a-z])", text)
    return text if match is None else text[: match.end()]
