"""Regenerate the embedded SYNTHETIC replica in data/ (deterministic).

    python scripts/make_embedded_data.py [OUTDIR]

The specs and seeds live in ``saturation.replica``; ``tests/test_replica.py`` checks that
this script reproduces the committed files byte for byte (after decompression) and that
the study's own method recovers the published figures within the stated tolerances.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from saturation.replica import build_embedded


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "data"
    manifest = build_embedded(out)
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
