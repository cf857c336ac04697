"""Generate docs/cli-reference.md from the argparse parser (tests/test_docs.py checks it is current).

python scripts/gen_cli_reference.py [--check]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "cli-reference.md"


def render() -> str:
    os.environ["COLUMNS"] = "100"  # stable wrapping of argparse's help text
    from saturation.cli import build_parser

    parser = build_parser()
    parser.prog = "saturation"
    lines = [
        "# CLI reference",
        "",
        "Generated from the code by `python scripts/gen_cli_reference.py`; do not edit by hand.",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        lines += [f"## saturation {name}", "", "```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        return 0 if OUT.read_text() == text else 1
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
