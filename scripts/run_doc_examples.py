"""Run the ```python blocks of a Markdown page in order, in one namespace.

    python scripts/run_doc_examples.py docs/tutorial.md [--cwd docs]

Used by tests/test_docs.py (so the examples cannot rot: they run from a stand-in for the
repository root of a fresh clone, nothing created beforehand) and, with ``--cwd docs``, to
regenerate the tutorial's figures in docs/img/.

A block that is not meant to run as written (it names the reader's own files) says so with
a line ``# placeholder: <what to put there>``; it is skipped, and the skip is printed (to
stderr) and listed in the namespace's ``__skipped__``, never silent.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

BLOCK_RE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
#: the marker of a block that is not runnable as written
PLACEHOLDER_RE = re.compile(r"^\s*# placeholder:(.*)$", re.M)


def blocks(path: str | Path) -> list[str]:
    return BLOCK_RE.findall(Path(path).read_text())


def placeholder(code: str) -> str | None:
    """What a placeholder block stands for (its marker's text), or None for a runnable block."""
    m = PLACEHOLDER_RE.search(code)
    return m.group(1).strip() if m else None


def run(path: str | Path, cwd: str | Path) -> dict[str, object]:
    """Execute every python block of ``path`` with ``cwd`` as the working directory
    (placeholder blocks are skipped and reported)."""
    import matplotlib

    matplotlib.use("Agg")
    skipped: list[str] = []
    namespace: dict[str, object] = {"__name__": "__doc_example__", "__skipped__": skipped}
    old = Path.cwd()
    os.chdir(cwd)
    try:
        for i, code in enumerate(blocks(path)):
            where = f"{path} block {i + 1}"
            what = placeholder(code)
            if what is not None:
                skipped.append(where)
                print(f"skipped {where} (placeholder: {what})", file=sys.stderr)
                continue
            exec(compile(code, where, "exec"), namespace)  # our own docs pages
    finally:
        os.chdir(old)
    return namespace


if __name__ == "__main__":
    args = sys.argv[1:]
    cwd = args[args.index("--cwd") + 1] if "--cwd" in args else "."
    run(Path(args[0]).resolve(), cwd)
