"""Result tables as CSV, Markdown and LaTeX: the writers the report and calibrate share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from saturation.io import write_atomic


def _cell(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return f"{value:.{digits}g}"
    return str(value)


def table_markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (numbers to 4 significant digits)."""
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    sep = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = [
        "| " + " | ".join(_cell(v).replace("|", "\\|") for v in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, sep, *rows]) + "\n"


def _tex(text: str) -> str:
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
    ):
        text = text.replace(a, b)
    return text


def table_latex(frame: pd.DataFrame, caption: str = "") -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}``); text columns left,
    numeric columns right aligned."""
    align = "".join("r" if pd.api.types.is_numeric_dtype(frame[c]) else "l" for c in frame.columns)
    lines = [
        f"% {caption}" if caption else "% table",
        f"\\begin{{tabular}}{{{align}}}",
        "\\toprule",
        " & ".join(_tex(str(c)) for c in frame.columns) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(_tex(_cell(v)) for v in row) + " \\\\" for row in frame.itertuples(index=False)]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def write_tables(frame: pd.DataFrame, stem: Path, caption: str = "") -> list[Path]:
    """Write ``stem.csv`` (full precision), ``stem.md`` and ``stem.tex`` (atomically; a result
    table, not a trial table: that is :func:`saturation.io.write_table`)."""
    paths = [stem.with_suffix(".csv"), stem.with_suffix(".md"), stem.with_suffix(".tex")]
    write_atomic(paths[0], frame.to_csv(index=False, lineterminator="\n"))
    write_atomic(paths[1], table_markdown(frame))
    write_atomic(paths[2], table_latex(frame, caption))
    return paths
