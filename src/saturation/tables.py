"""Result tables as CSV, Markdown and LaTeX: the writers the report and calibrate share."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from saturation.io import neutralise_formulas, write_atomic
from saturation.summary import cell_text, shows_median


def _is_interval(value: Any) -> bool:
    return isinstance(value, dict) and "mean" in value and "hdi" in value


def numeric_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every interval column split into numeric ``<col> mean``,
    ``<col> hdi_low`` and ``<col> hdi_high`` columns, and ``<col> median`` where a cell shows
    its median (:func:`saturation.summary.shows_median`; NaN elsewhere); a text cell in
    such a column, e.g. "known (46)", goes to ``<col> note``: what the CSV holds."""
    out: dict[str, Any] = {}
    for col in frame.columns:
        values = list(frame[col])
        if not any(_is_interval(v) for v in values):
            out[col] = frame[col]
            continue
        out[f"{col} mean"] = [v["mean"] if _is_interval(v) else np.nan for v in values]
        out[f"{col} hdi_low"] = [v["hdi"][0] if _is_interval(v) else np.nan for v in values]
        out[f"{col} hdi_high"] = [v["hdi"][1] if _is_interval(v) else np.nan for v in values]
        shown = [v["median"] if _is_interval(v) and shows_median(v) else np.nan for v in values]
        if not all(np.isnan(shown)):  # the median where the cell shows it instead of the mean
            out[f"{col} median"] = shown
        notes = [None if _is_interval(v) or v is None else str(v) for v in values]
        if any(notes):
            out[f"{col} note"] = notes
    return pd.DataFrame(out, index=frame.index)


#: control characters and line separators: a newline inside a Markdown cell, a LaTeX
#: comment or a table row would start a line of its own (a live ``\\input`` in a .tex)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def flat(text: Any) -> str:
    """``text`` on one line: every control character (newline, carriage return, tab, ESC,
    ...) and line separator becomes a space."""
    return _CONTROL.sub(" ", str(text))


#: what can start raw HTML in Markdown (a tag, a closing tag, a comment, a declaration, a
#: processing instruction, an autolink) or a character reference (``&name;``, ``&#12;``)
_MARKUP_START = re.compile(r"<(?=[A-Za-z/!?])|&(?=[A-Za-z#])")


def markdown_text(text: Any) -> str:
    """``text`` safe inside Markdown, on one line (:func:`flat`): every ``<`` that could open
    raw HTML and every ``&`` that could start a character reference is escaped, so a name
    such as ``<img src=x onerror=...>`` is shown, never run, when the Markdown is rendered;
    a leading ``>`` (a quote) or ``#`` (a heading) is escaped too. Comparisons stay readable
    ("P(late gain > ROPE) = 0.40 < 0.95")."""
    out = _MARKUP_START.sub(lambda m: html.escape(m.group(0)), flat(text))
    return "\\" + out if out[:1] in (">", "#") else out


def table_markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (numbers to 4 significant digits; text on one line,
    HTML escaped, ``|`` escaped)."""
    head = "| " + " | ".join(markdown_text(c).replace("|", "\\|") for c in frame.columns) + " |"
    sep = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = [
        "| " + " | ".join(markdown_text(cell_text(v)).replace("|", "\\|") for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, sep, *rows]) + "\n"


def _tex(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (text mode), on one line."""
    text = flat(text)
    for a, b in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("#", r"\#"),
        ("_", r"\_"),
        ("{", r"\{"),
        ("}", r"\}"),
        ("$", r"\$"),
        ("~", r"\textasciitilde{}"),
        ("^", r"\^{}"),
        ("<", r"\textless{}"),
        (">", r"\textgreater{}"),
        ("|", r"\textbar{}"),
    ):
        text = text.replace(a, b)
    return text


def _tex_cell(value: Any) -> str:
    """A number as siunitx's ``\num{...}`` (``9e-05`` becomes 9 x 10^-5, not raw text);
    everything else as escaped text."""
    if isinstance(value, float | np.floating | int | np.integer) and not isinstance(value, bool | np.bool_):
        text = cell_text(value)
        return f"\\num{{{text}}}" if text else ""
    return _tex(cell_text(value))


def table_latex(frame: pd.DataFrame, caption: str = "") -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs,siunitx}``: numbers are
    ``\\num{}``); text columns left, numeric columns right aligned; special characters
    escaped."""
    align = "".join("r" if pd.api.types.is_numeric_dtype(frame[c]) else "l" for c in frame.columns)
    lines = [
        f"% {flat(caption)}" if caption else "% table",  # one line: a newline would end the comment
        "% needs \\usepackage{booktabs,siunitx}",
        f"\\begin{{tabular}}{{{align}}}",
        "\\toprule",
        " & ".join(_tex(str(c)) for c in frame.columns) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(_tex_cell(v) for v in row) + " \\\\" for row in frame.itertuples(index=False)]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def write_tables(frame: pd.DataFrame, stem: Path, caption: str = "") -> list[Path]:
    """Write ``stem.csv`` (numbers only, full precision: interval cells split by
    :func:`numeric_frame`), ``stem.md`` and ``stem.tex`` (formatted text), atomically. A
    result table, not a trial table: that is :func:`saturation.io.write_table`."""
    stem = Path(stem)  # suffixes appended, not replaced: a stem may hold dots ("families_model-1.5B")
    paths = [stem.with_name(f"{stem.name}{ext}") for ext in (".csv", ".md", ".tex")]
    csv = neutralise_formulas(numeric_frame(frame))  # no cell a spreadsheet would run as a formula
    write_atomic(paths[0], csv.to_csv(index=False, lineterminator="\n"))
    write_atomic(paths[1], table_markdown(frame))
    write_atomic(paths[2], table_latex(frame, caption))
    return paths
