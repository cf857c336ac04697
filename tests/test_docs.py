"""The documentation's examples run as written from the repository root of a fresh clone, and
the generated CLI reference is current."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: what a run of the examples may leave in the repository root: never part of the stand-in
OUTPUTS = {"img", "report", "calibration"}


def _runner():
    spec = importlib.util.spec_from_file_location("run_doc_examples", ROOT / "scripts" / "run_doc_examples.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tracked_top_level() -> set[str]:
    """The repository's top-level entries a fresh clone has (git's tracked files), else (an
    unpacked sdist, no git) every entry that is not hidden."""
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        ).stdout
        names = {line.split("/", 1)[0] for line in out.splitlines() if line}
    except (OSError, subprocess.SubprocessError):
        names = set()
    return names or {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}


@pytest.fixture
def clone_root(tmp_path):
    """A stand-in for the root of a fresh clone, copy-free: a symbolic link per tracked
    top-level entry (data/, models/, README.md, ...) and nothing else, so repository paths
    resolve while whatever the examples write lands in the temporary directory (nothing is
    created for them beforehand: no img/)."""
    root = tmp_path / "clone"
    root.mkdir()
    for name in sorted(_tracked_top_level() - OUTPUTS):
        if (ROOT / name).exists():
            (root / name).symlink_to(ROOT / name, target_is_directory=(ROOT / name).is_dir())
    assert not (root / "img").exists()
    return root


def test_cli_reference_is_generated_from_the_current_parser():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_cli_reference
    finally:
        sys.path.pop(0)
    assert (ROOT / "docs" / "cli-reference.md").read_text() == gen_cli_reference.render(), (
        "run: python scripts/gen_cli_reference.py"
    )


def test_cli_reference_documents_the_exit_codes():
    from saturation.cli import EXIT_DATA, EXIT_INTERRUPTED, EXIT_NOT_CONVERGED, EXIT_USAGE

    text = " ".join((ROOT / "docs" / "cli-reference.md").read_text().split())  # argparse wraps lines
    assert f"exit codes: 0 success; {EXIT_DATA} invalid data or an I/O fault" in text
    assert f"{EXIT_USAGE} usage: a bad option or value" in text and "or a missing input path" in text
    assert f"{EXIT_NOT_CONVERGED} a fit ran but did not converge" in text
    assert f"{EXIT_INTERRUPTED} interrupted" in text


def test_getting_started_examples_run(clone_root):
    ns = _runner().run(ROOT / "docs" / "getting-started.md", clone_root)
    assert ns["fit"].diagnostics["converged"]
    assert ns["__skipped__"] == []
    # the page's numbers are the ones the code prints
    text = (ROOT / "docs" / "getting-started.md").read_text()
    trials = ns["trials"]
    assert f"{trials.sizes['trial']:,} trials, {int(trials['graded'].sum()):,} graded" in text


def test_readme_examples_run(clone_root):
    """The README's Python block, from the repository root (it reads the shipped table)."""
    ns = _runner().run(ROOT / "README.md", clone_root)
    assert ns["__skipped__"] == []
    assert ns["ds"].sizes["trial"] == ns["ds"].attrs["rows_kept"] == 46592
    assert "run" in ns["stats"].dims and "step" in ns["stats"].dims
    assert ns["truth"]
    assert repr(ns["fit"]).startswith("PlateauFit(response f1, 3 level(s) x 91 steps")


def test_tutorial_examples_run_except_the_transfer_fit(tmp_path, clone_root):
    """Every tutorial block but the minutes-long transfer fit (that one runs in the slow test),
    from the repository root; the page creates img/ itself."""
    runner = _runner()
    blocks = [b for b in runner.blocks(ROOT / "docs" / "tutorial.md") if "fit_transfer(swegym" not in b]
    page = tmp_path / "page.md"
    page.write_text("".join(f"```python\n{b}```\n" for b in blocks))
    ns = runner.run(page, clone_root)
    assert (clone_root / "img" / "tutorial_plateau.pdf").exists()
    # the replica's levels stop (its file level's change point moved from about 10 to 12
    # when the trials default began to weigh in a decisive jump, so "together" is not pinned)
    assert {e["verdict"] for e in ns["fit"].to_dict()["levels"].values()} <= {"plateaued", "slowed"}
    assert len(blocks) == len(runner.blocks(ROOT / "docs" / "tutorial.md")) - 1
    assert ns["__skipped__"] == []


@pytest.mark.slow
def test_whole_tutorial_runs(clone_root):
    ns = _runner().run(ROOT / "docs" / "tutorial.md", clone_root)
    assert ns["transfer"].diagnostics["converged"]
    assert (clone_root / "img" / "tutorial_transfer.png").exists()


#: the notebook page's NUTS fits (about a minute together): run by the slow test only
NUTS_BLOCKS = ("fit_sigmoid(", "fit_transfer(")


def test_notebook_walkthrough_runs_except_the_nuts_fits(tmp_path, clone_root):
    """docs/notebook.md: every analysis fitted, summarised, plotted, saved and loaded back
    (the sigmoid and transfer fits, NUTS, in the slow test)."""
    runner = _runner()
    blocks = [b for b in runner.blocks(ROOT / "docs" / "notebook.md") if not any(n in b for n in NUTS_BLOCKS)]
    assert len(blocks) == len(runner.blocks(ROOT / "docs" / "notebook.md")) - 2
    page = tmp_path / "page.md"
    page.write_text("".join(f"```python\n{b}```\n" for b in blocks))
    ns = runner.run(page, clone_root)
    assert ns["__skipped__"] == []
    assert (clone_root / "img" / "notebook_plateau.png").exists()
    assert ns["again"].table_text().equals(ns["fit"].table_text())
    assert set(ns["learned"].figures()) == {"pass_at_k", "entropy"}


@pytest.mark.slow
def test_whole_notebook_walkthrough_runs(clone_root):
    ns = _runner().run(ROOT / "docs" / "notebook.md", clone_root)
    assert ns["curves"].diagnostics["converged"] and ns["transfer"].diagnostics["converged"]
    assert (clone_root / "img" / "notebook_transfer.png").exists()


def test_placeholder_blocks_are_skipped_visibly(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\n```\n\n```python\n# placeholder: your own run directory\n"
        'ds = read("runs/")\n```\n\n```python\ny = x + 1\n```\n'
    )
    ns = _runner().run(page, tmp_path)
    assert ns["y"] == 2 and "ds" not in ns
    assert ns["__skipped__"] == [f"{page} block 2"]
    assert f"skipped {page} block 2 (placeholder: your own run directory)" in capsys.readouterr().err


def test_every_docs_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert [p for p in pages if p not in nav] == []
