"""Run the ```python blocks of a Markdown page in order, in one namespace.

    python scripts/run_doc_examples.py docs/tutorial.md [--cwd docs]

Used by tests/test_docs.py (so the examples cannot rot) and, with ``--cwd docs``, to
regenerate the tutorial's figures in docs/img/.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

BLOCK_RE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(path: str | Path) -> list[str]:
    return BLOCK_RE.findall(Path(path).read_text())


def run(path: str | Path, cwd: str | Path) -> dict[str, object]:
    """Execute every python block of ``path`` with ``cwd`` as the working directory."""
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    old = Path.cwd()
    os.chdir(cwd)
    try:
        for i, code in enumerate(blocks(path)):
            exec(compile(code, f"{path} block {i + 1}", "exec"), namespace)  # our own docs pages
    finally:
        os.chdir(old)
    return namespace


if __name__ == "__main__":
    args = sys.argv[1:]
    cwd = args[args.index("--cwd") + 1] if "--cwd" in args else "."
    run(Path(args[0]).resolve(), cwd)
