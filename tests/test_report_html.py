"""REPORT.html: self-contained, escaped, the same content as REPORT.md, and rendered by a real
headless browser (Debian's Chromium) with every figure drawn."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from saturation.report import Report, Section
from saturation.report_html import write_report_html
from saturation.summary import interval_cell
from saturation.tables import write_tables

CHROMIUM = "/usr/bin/chromium"

VERDICT = "Flat <b>after</b> step 46 & beyond."


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text of every <td> / <th>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.cells: list[tuple[str, str]] = []
        self._cell: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("td", "th"):
            self._cell, self._text = tag, []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell:
            self.cells.append((tag, "".join(self._text).strip()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell:
            self._text.append(data)


def _parse(text: str) -> _Tags:
    parser = _Tags()
    parser.feed(text)
    parser.close()
    return parser


def _figure(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    fig, ax = plt.subplots(figsize=(4, 2.5))
    ax.plot(np.arange(20), rng.normal(size=20).cumsum())
    ax.set_xlabel("step")
    for suffix in (".png", ".pdf"):
        fig.savefig(path.with_suffix(suffix), dpi=100)
    plt.close(fig)


@pytest.fixture
def report(tmp_path: Path) -> Report:
    """Two analyses (one not converged), two figures, one table, one failed analysis."""
    out = tmp_path / "report"
    (out / "plateau").mkdir(parents=True)
    (out / "transfer").mkdir()
    _figure(out / "plateau" / "curves", 1)
    _figure(out / "transfer" / "gap_over_steps", 2)
    frame = pd.DataFrame(
        {
            "level": ["file", "module", "entity <x> & co"],
            "late gain": [0.0081234567, 1.5e-05, np.nan],
            "n": [10, 2, 33],
            "inside HDI": [True, False, True],
            "change point": [
                interval_cell({"mean": 9.93, "hdi": [9.0, 11.0]}),
                interval_cell({"mean": 0.0512, "hdi": [0.036, 0.066]}),
                "known (46)",
            ],
        }
    )
    write_tables(frame, out / "plateau" / "estimates", "Estimates (94 % HDI)")
    (out / "plateau" / "plateau_fit.nc").write_bytes(b"")
    diag = {"rhat_max": 1.001, "ess_bulk_min": 3456.0, "ess_tail_min": 3300.0, "divergences": 0, "converged": True}
    plateau = Section(
        name="plateau",
        kind="plateau",
        title="SWE-smith: plateau & change points",
        question="Did F1 stop rising?",
        verdict=VERDICT,
        details=["file: plateaued (P = 0.99)", "a <script>alert(1)</script> detail"],
        diagnostics=diag,
        converged=True,
        tables=["plateau/estimates.md"],
        figures=["plateau/curves.png"],
        fits=["plateau/plateau_fit.nc"],
        warnings=["Pareto k > 0.7 for 2 observations"],
        seconds=3.2,
        synthetic="SYNTHETIC replica",
    )
    transfer = Section(
        name="transfer",
        kind="transfer",
        title="SWE-Gym transfer",
        question="",
        verdict="s85 starts ahead. Then falls behind.",
        details=[],
        diagnostics={**diag, "rhat_max": 1.2, "divergences": 7, "converged": False},
        converged=False,
        figures=["transfer/gap_over_steps.png"],
        cached=True,
    )
    plateau.captions = {"plateau/curves.png": "Graded-only F1 per level, 94 % HDI"}  # the coming Section.captions
    return Report(
        out=out,
        sections=[plateau, transfer],
        seconds=12.5,
        failures=[{"task": "code-contests", "error": "KilledWorker: <oom>"}],
    )


def test_html_is_self_contained_and_escaped(report: Report) -> None:
    path = write_report_html(report)
    assert path == report.out / "REPORT.html"
    text = path.read_text(encoding="utf-8")
    page = _parse(text)

    # no external reference of any kind: no http(s) src/href, no CSS url() or @import
    refs = [v for _, attrs in page.tags for k, v in attrs.items() if k in ("src", "href") and v is not None]
    assert refs, "no src/href at all"
    assert not [r for r in refs if re.match(r"\s*(https?:)?//", r, flags=re.I)]
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, flags=re.I)
    assert "url(" not in text and "@import" not in text
    assert not [t for t, a in page.tags if t in ("link", "iframe", "object", "embed")]
    assert not [a for t, a in page.tags if t == "script" and "src" in a]
    # every relative link points at a file of the report directory
    for ref in refs:
        if not ref.startswith(("data:", "#")):
            assert (report.out / ref).exists(), ref

    # every figure embedded as a PNG data URI, alt text = its caption
    imgs = [a for t, a in page.tags if t == "img"]
    assert len(imgs) == 2
    for img in imgs:
        src = img["src"] or ""
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    assert [img["alt"] for img in imgs] == ["Graded-only F1 per level, 94 % HDI", "gap over steps"]
    assert 'href="plateau/curves.pdf"' in text and 'href="transfer/gap_over_steps.pdf"' in text
    assert 'href="plateau/plateau_fit.nc"' in text

    # text escaped
    assert "Flat &lt;b&gt;after&lt;/b&gt; step 46 &amp; beyond." in text
    assert "<b>after</b>" not in text
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "KilledWorker: &lt;oom&gt;" in text
    assert "SWE-smith: plateau &amp; change points" in text

    # the table: a real <table> with the CSV's rows (4 significant digits, yes/no, blanks)
    assert text.count("<table") == 1 and "<thead>" in text and "<tbody>" in text
    csv = pd.read_csv(report.out / "plateau" / "estimates.csv")
    heads = [c for kind, c in page.cells if kind == "th"]
    # the CSV splits the interval column into numbers; the page shows it as one column again
    split = ["change point mean", "change point hdi_low", "change point hdi_high", "change point note"]
    assert list(csv.columns) == ["level", "late gain", "n", "inside HDI", *split]
    assert heads == ["level", "late gain", "n", "inside HDI", "change point"]
    cells = [c for kind, c in page.cells if kind == "td"]
    assert len(cells) == len(csv) * len(heads)
    rows = [cells[i : i + len(heads)] for i in range(0, len(cells), len(heads))]
    assert rows == [
        ["file", "0.008123", "10", "yes", "9.9 [9.0, 11.0]"],
        ["module", "1.5e-05", "2", "no", "0.051 [0.036, 0.066]"],
        ["entity <x> & co", "", "33", "yes", "known (46)"],
    ]
    assert 'data-value="0.0081234567"' in text  # sorting uses the full value
    # REPORT.md's table rounds every interval cell as the page does (one rule: one
    # significant digit of the width; they differed, 0.315 [0.242, 0.380] vs 0.32 [0.24, 0.38])
    md_rows = (report.out / "plateau" / "estimates.md").read_text().splitlines()
    assert "| 9.9 [9.0, 11.0] |" in md_rows[-3] and "| 0.051 [0.036, 0.066] |" in md_rows[-2]

    # banners and REPORT.md's content
    assert "NOT CONVERGED" in text
    assert re.search(r'class="banner nonconv"[^>]*>WARNING: 1 fit\(s\) did not converge \(transfer\)', text)
    assert re.search(r'class="banner error"[^>]*>ERROR: 1 analysis\(es\) failed', text)
    assert "SYNTHETIC replica" in text
    assert "Pareto k &gt; 0.7 for 2 observations" in text
    assert "R-hat max 1.200" in text and "divergences 7" in text and "reused from the cache in this run." in text
    assert "Did F1 stop rising?" in text
    ids = {a["id"] for _, a in page.tags if a.get("id")}
    hrefs = [a.get("href") or "" for t, a in page.tags if t == "a"]
    contents = [h[1:] for h in hrefs if h.startswith("#")]
    assert contents == ["1-swe-smith-plateau--change-points", "2-swe-gym-transfer"]
    assert set(contents) <= ids
    md = _report_md(report)
    md_anchors = re.findall(r"\]\(#([^)]+)\)", md)
    assert contents == md_anchors  # the same anchors as REPORT.md's contents
    # tables and figures carry the same numbers on both (section.item; the page counted
    # through the whole report, REPORT.md per section)
    labels = re.findall(r'class="label">((?:Table|Figure) \d+\.\d+)\.', text)
    assert labels and labels == re.findall(r"\*\*?((?:Table|Figure) \d+\.\d+)[.:]", md)
    assert {"table-1-1", "figure-1-1", "figure-2-1"} <= ids


def _report_md(report: Report) -> str:
    from saturation.report import write_report_md

    return write_report_md(report).read_text()


def test_missing_figure_is_counted_not_hidden(report: Report) -> None:
    (report.out / "transfer" / "gap_over_steps.png").unlink()
    text = write_report_html(report).read_text(encoding="utf-8")
    imgs = [a for t, a in _parse(text).tags if t == "img"]
    assert len(imgs) == 2 and "src" not in imgs[1]
    assert "figure file missing: transfer/gap_over_steps.png" in text


# ------------------------------------------------------------------ the browser
def _chromium() -> str:
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found:
        return found
    reason = f"Chromium not found ({CHROMIUM}; install it with: apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: the browser check of REPORT.html cannot be skipped in CI")
    pytest.skip(reason)


def test_missing_chromium_fails_in_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(f"{__name__}.CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot be skipped in CI"):
        _chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="Chromium not found"):
        _chromium()


def _run_chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves: the page must need no network
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"chromium exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def test_html_renders_in_headless_chromium(report: Report, tmp_path: Path) -> None:
    chromium = _chromium()
    path = write_report_html(report)
    n = len([f for s in report.sections for f in s.figures])

    dom = _run_chromium(chromium, tmp_path / "profile-dom", "--dump-dom", path.as_uri()).stdout
    tags = _parse(dom).tags
    body = [a for t, a in tags if t == "body"]
    assert body, f"no <body> in the dumped DOM:\n{dom[:2000]}"
    assert body[0].get("data-figures") == f"{n}/{n}", body[0]
    imgs = [a for t, a in tags if t == "img"]
    assert len(imgs) == n
    assert all(a.get("data-rendered") == "yes" for a in imgs), [a.get("data-rendered") for a in imgs]

    shot = tmp_path / "shot.png"
    _run_chromium(chromium, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1200,2000", path.as_uri())
    assert shot.exists() and shot.stat().st_size > 0
    pixels = mpimg.imread(shot)
    assert pixels.shape[:2] == (2000, 1200)
    assert float(np.std(pixels)) > 0, "blank screenshot"


def test_table_sorts_on_header_click_in_chromium(report: Report, tmp_path: Path) -> None:
    """Click headers in a real browser and read the row order back from the DOM: numbers sort
    as numbers (blanks last), text as text, a second click reverses."""
    chromium = _chromium()
    path = write_report_html(report)
    clicks = """<script>
window.addEventListener("load", function () {
  var heads = document.querySelectorAll("table.sortable thead th button");
  function order() {
    return Array.prototype.map.call(document.querySelectorAll("table.sortable tbody tr"),
      function (r) { return r.cells[0].textContent; }).join("|");
  }
  var seen = [];
  heads[1].click(); seen.push(order());
  heads[0].click(); seen.push(order());
  heads[2].click(); seen.push(order());
  heads[2].click(); seen.push(order() + " " + heads[2].parentNode.getAttribute("aria-sort"));
  document.body.dataset.orders = seen.join(";");
});
</script></body>"""
    probe = path.with_name("probe.html")
    probe.write_text(path.read_text(encoding="utf-8").replace("</body>", clicks, 1), encoding="utf-8")
    dom = _run_chromium(chromium, tmp_path / "profile-sort", "--dump-dom", probe.as_uri()).stdout
    body = next(a for t, a in _parse(dom).tags if t == "body")
    assert (body.get("data-orders") or "").split(";") == [
        "module|file|entity <x> & co",  # late gain ascending: 1.5e-05 < 0.0081 (as text: "0.0…" < "1.…"), blank last
        "entity <x> & co|file|module",  # level ascending (text)
        "module|file|entity <x> & co",  # n ascending: 2, 10, 33 (numbers, not "10" < "2")
        "entity <x> & co|file|module descending",
    ]
