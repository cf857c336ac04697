"""The documentation's examples run, and the generated CLI reference is current."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _runner():
    spec = importlib.util.spec_from_file_location("run_doc_examples", ROOT / "scripts" / "run_doc_examples.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_generated_from_the_current_parser():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_cli_reference
    finally:
        sys.path.pop(0)
    assert (ROOT / "docs" / "cli-reference.md").read_text() == gen_cli_reference.render(), (
        "run: python scripts/gen_cli_reference.py"
    )


def test_getting_started_examples_run(tmp_path):
    ns = _runner().run(ROOT / "docs" / "getting-started.md", tmp_path)
    assert ns["fit"].diagnostics["converged"]


def test_tutorial_examples_run_except_the_transfer_fit(tmp_path, monkeypatch):
    """Every tutorial block but the minutes-long transfer fit (that one runs in the slow test)."""
    runner = _runner()
    blocks = [b for b in runner.blocks(ROOT / "docs" / "tutorial.md") if "fit_transfer(swegym" not in b]
    page = tmp_path / "page.md"
    page.write_text("".join(f"```python\n{b}```\n" for b in blocks))
    (tmp_path / "img").mkdir()
    ns = runner.run(page, tmp_path)
    assert (tmp_path / "img" / "tutorial_plateau.pdf").exists()
    assert ns["fit"].to_dict()["together"]["p_range_le_2_steps"] > 0.5
    assert len(blocks) == len(runner.blocks(ROOT / "docs" / "tutorial.md")) - 1


@pytest.mark.slow
def test_whole_tutorial_runs(tmp_path):
    (tmp_path / "img").mkdir()
    ns = _runner().run(ROOT / "docs" / "tutorial.md", tmp_path)
    assert ns["transfer"].diagnostics["converged"]
    assert (tmp_path / "img" / "tutorial_transfer.png").exists()


def test_every_docs_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert [p for p in pages if p not in nav] == []
