"""REPORT.html: the report as one self-contained page (figures embedded, CSS and JS inline).

The page carries what REPORT.md carries (title line, data notes, failure and
non-convergence banners, contents, and per analysis: question, verdict, details,
diagnostics, warnings, tables, figures, fits) and makes no request of its own: figures are
base64 PNG data URIs, style and script are inline, and a Content-Security-Policy forbids
anything else. Links to the CSV / LaTeX tables, the PDF figures and the fits are relative, so
they work while REPORT.html stays in the report directory.

Tables are rendered from the CSV next to each Markdown table (full precision in the file,
numbers shown to 4 significant digits, the exact value kept in ``data-value`` for sorting);
clicking a column header sorts by it. On load a small script marks every image
``data-rendered="yes"``/``"no"`` and sets ``data-figures="<rendered>/<total>"`` on the body,
which the tests read back from a headless browser.

Sections are duck-typed (the attributes of ``saturation.report.Section``): ``report`` sits
above this module and imports it, not the other way round.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import math
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import numpy as np
import pandas as pd

from saturation import __version__
from saturation import schema as S
from saturation.io import write_atomic
from saturation.models.sampling import nuisance_text
from saturation.summary import first_sentence, format_interval, interval_digits

__all__ = ["render_report_html", "write_report_html"]

#: no fetch of any kind: only inline style/script and data: images
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

_CSS = """
:root { --ink: #1d1d1f; --muted: #5b5b63; --rule: #1d1d1f; --hair: #d4d4d8; --accent: #1f4e8c;
  --bad: #a30d0d; --bad-bg: #fdecec; --warn: #8a4b00; --warn-bg: #fff4e0; --note-bg: #eef3fa; }
* { box-sizing: border-box; }
html { font-size: 17px; }
body { margin: 0 auto; max-width: 54rem; padding: 2.5rem 1.5rem 4rem; color: var(--ink); background: #fff;
  font-family: "Iowan Old Style", "Palatino Linotype", Palatino, "Book Antiqua", Georgia, "Times New Roman",
  serif; line-height: 1.5; text-rendering: optimizeLegibility; }
h1 { font-size: 2rem; font-weight: 600; margin: 0 0 .3rem; letter-spacing: -.01em; }
h2 { font-size: 1.35rem; font-weight: 600; margin: 2.8rem 0 .8rem; padding-top: .6rem;
  border-top: 1px solid var(--hair); }
h2 .num { color: var(--muted); font-weight: 400; margin-right: .4em; }
p { margin: .6rem 0; }
a { color: var(--accent); text-decoration: none; }
a:hover, a:focus { text-decoration: underline; }
.byline { color: var(--muted); font-size: .92rem; margin-bottom: 1.4rem; }
.lead { font-variant: small-caps; font-weight: 600; letter-spacing: .03em; margin-right: .3em; }
.banner { border-left: 6px solid; border-radius: 3px; padding: .7rem 1rem; margin: 1rem 0; }
.banner.note { border-color: var(--accent); background: var(--note-bg); }
.banner.error { border-color: var(--bad); background: var(--bad-bg); color: var(--bad); font-weight: 600; }
.banner.error ul { margin: .3rem 0 0; font-weight: 400; }
.banner.nonconv { border-color: var(--bad); background: var(--bad-bg); color: var(--bad); font-weight: 700;
  font-size: 1.05rem; }
.banner.warning { border-color: var(--warn); background: var(--warn-bg); color: var(--warn); }
.badge { display: inline-block; font: 700 .7rem/1.6 system-ui, sans-serif; letter-spacing: .05em;
  color: #fff; background: var(--bad); border-radius: 3px; padding: 0 .45em; margin-left: .5em;
  vertical-align: .2em; }
nav.contents { font-size: .95rem; }
nav.contents ol { padding-left: 1.6rem; }
nav.contents li { margin: .35rem 0; }
nav.contents .gist { color: var(--muted); }
ul.details { padding-left: 1.3rem; }
ul.details li { margin: .35rem 0; }
.diagnostics { font-size: .92rem; color: var(--muted); }
.diagnostics.bad { color: var(--bad); }
figure { margin: 1.8rem 0; }
/* tables may be wider than the text column (up to the window): centred on it, caption at the table's width */
figure.table { width: fit-content; min-width: 100%; max-width: min(calc(100vw - 4rem), 84rem);
  margin-left: 50%; transform: translateX(-50%); }
figure.table figcaption { width: 0; min-width: 100%; }
figcaption { font-size: .9rem; color: var(--muted); margin: .4rem 0; }
figcaption .label { font-weight: 700; color: var(--ink); }
figcaption .links { white-space: nowrap; }
.scroll { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; font: .8rem/1.35 system-ui, -apple-system, "Segoe UI", Roboto,
  "Helvetica Neue", Arial, sans-serif; font-variant-numeric: tabular-nums;
  border-top: 2px solid var(--rule); border-bottom: 2px solid var(--rule); }
thead th { border-bottom: 1px solid var(--rule); vertical-align: bottom; text-align: left; padding: 0;
  min-width: 4.5em; }
th.num, td.num { text-align: right; }
td { padding: .28rem .6rem; border-top: 1px solid #ececef; vertical-align: top; white-space: nowrap; }
td.long { white-space: normal; min-width: 16em; }
tbody tr:first-child td { border-top: none; }
tbody tr:hover { background: #f6f7f9; }
th button { all: unset; box-sizing: border-box; display: block; width: 100%; padding: .35rem .6rem;
  cursor: pointer; font-weight: 600; text-align: inherit; }
th button:focus-visible { outline: 2px solid var(--accent); outline-offset: -2px; }
th button::after { content: "\\2195"; color: #b4b4bb; margin-left: .3em; font-weight: 400; }
th[aria-sort="ascending"] button::after { content: "\\2191"; color: var(--ink); }
th[aria-sort="descending"] button::after { content: "\\2193"; color: var(--ink); }
td.empty { color: #b4b4bb; }
figure.plot img { display: block; margin: 0 auto; max-width: 100%; height: auto; }
figure.plot figcaption { text-align: center; }
.missing { color: var(--bad); font-weight: 600; }
.fits { font-size: .9rem; color: var(--muted); }
footer { margin-top: 3rem; font-size: .8rem; color: var(--muted); border-top: 1px solid var(--hair);
  padding-top: .6rem; }
@media print {
  html { font-size: 11pt; }
  body { max-width: none; padding: 0; }
  th button::after { content: none; }
  figure.table { width: auto; max-width: none; margin-left: 0; transform: none; }
  .scroll { overflow: visible; }
  td { white-space: normal; }
  figure, .banner { break-inside: avoid; }
  h2 { break-after: avoid; }
}
"""

_JS = """
(function () {
  "use strict";
  function key(cell) {
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-value");
    return v === null ? cell.textContent.trim() : v;
  }
  function isNum(s) { return s !== "" && isFinite(Number(s)); }
  function sortColumn(th) {
    var table = th.closest("table");
    var body = table.tBodies[0];
    var col = th.cellIndex;
    var rows = Array.prototype.slice.call(body.rows);
    var keys = rows.map(function (r) { return key(r.cells[col]); });
    var numeric = keys.every(function (k) { return k === "" || isNum(k); });
    var asc = th.getAttribute("aria-sort") !== "ascending";
    var order = rows.map(function (r, i) { return i; });
    order.sort(function (a, b) {
      var x = keys[a], y = keys[b];
      if (x === "" || y === "") { return x === y ? a - b : (x === "" ? 1 : -1); }
      var c = numeric ? Number(x) - Number(y) : x.localeCompare(y, undefined, {numeric: true});
      return (asc ? c : -c) || a - b;
    });
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    order.forEach(function (i) { body.appendChild(rows[i]); });
  }
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest && ev.target.closest("table.sortable thead th > button");
    if (button) { sortColumn(button.parentNode); }
  });
  window.addEventListener("load", function () {
    var imgs = document.querySelectorAll("img");
    var ok = 0;
    Array.prototype.forEach.call(imgs, function (img) {
      var rendered = img.complete && img.naturalWidth > 0;
      img.setAttribute("data-rendered", rendered ? "yes" : "no");
      if (rendered) { ok += 1; }
    });
    document.body.dataset.figures = ok + "/" + imgs.length;
  });
})();
"""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: CSS pixels per printed inch / 96: figures are shown at 1.25 x their print size
_SCREEN_SCALE = 1.25


class _SectionLike(Protocol):
    """What is read of a ``saturation.report.Section`` (read-only members: any subtype fits)."""

    @property
    def name(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def verdict(self) -> str: ...
    @property
    def headline(self) -> str: ...
    @property
    def details(self) -> Sequence[str]: ...
    @property
    def diagnostics(self) -> Mapping[str, Any]: ...
    @property
    def converged(self) -> bool: ...
    @property
    def tables(self) -> Sequence[str]: ...
    @property
    def figures(self) -> Sequence[str]: ...
    @property
    def fits(self) -> Sequence[str]: ...
    @property
    def warnings(self) -> Sequence[str]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def cached(self) -> bool: ...
    @property
    def synthetic(self) -> str: ...


class _ReportLike(Protocol):
    """What is read of a ``saturation.report.Report``."""

    @property
    def out(self) -> Path: ...
    @property
    def sections(self) -> Sequence[_SectionLike]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def failures(self) -> Sequence[Mapping[str, str]]: ...


# ------------------------------------------------------------------ small helpers
def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _href(path: str | Path) -> str:
    """A relative link to a file of the report directory (percent-encoded, then escaped)."""
    return _esc(quote(Path(path).as_posix()))


def anchor(title: str) -> str:
    """A heading's anchor, GitHub's slug: REPORT.md and REPORT.html share it."""
    keep = "".join(ch.lower() if ch.isalnum() else "-" if ch in " -" else "" for ch in title)
    return keep.strip("-") or "section"


def fit_time_text(section: Any) -> str:
    """ "Fitted in 40.8 s." or, for a section reused from the cache, how long the original
    fit took and when, and that this run reused it (a re-run never shows 0.3 s as a fit time)."""
    when = f" on {section.fitted_on}" if getattr(section, "fitted_on", "") else ""
    if section.cached:
        return f"Fitted in {_fmt(section.seconds, '.1f')} s{when}; reused from the cache in this run."
    return f"Fitted in {_fmt(section.seconds, '.1f')} s."


def run_time_text(report: Any) -> str:
    """ "101.4 s this run, 2 of 5 analyses reused from the cache" (the report's byline)."""
    cached = sum(bool(s.cached) for s in report.sections)
    reuse = f", {cached} of {len(report.sections)} analyses reused from the cache" if cached else ""
    return f"{_fmt(report.seconds, '.1f')} s this run{reuse}"


def contents_entry(s: Any) -> tuple[str, str]:
    """A section's line in the contents of REPORT.md and REPORT.html alike: its question
    (else its title) and its short answer (``headline``; a section recorded before there was
    one: the verdict's first sentence)."""
    return (s.question or s.title), (getattr(s, "headline", "") or first_sentence(s.verdict))


def _fmt(value: Any, spec: str) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return format(number, spec) if math.isfinite(number) else "n/a"


class _Interval:
    """An interval cell of a results CSV (its ``<col> mean`` / ``hdi_low`` / ``hdi_high``
    columns, and ``median`` where the cell shows it, as one "mean [low, high]" cell)."""

    def __init__(self, mean: float, low: float, high: float, median: float | None = None) -> None:
        self.mean, self.low, self.high, self.median = mean, low, high, median

    def text(self) -> str:
        e: dict[str, Any] = {"mean": self.mean, "hdi": [self.low, self.high]}
        if self.median is not None:  # the CSV's median column: the cell shows it (a ratio, a skewed posterior)
            e.update(median=self.median, center="median")
        return format_interval(e, interval_digits(self.low, self.high))


def _collapse_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Undo ``tables.numeric_frame`` for display: every ``<col> mean`` with its ``hdi_low``
    and ``hdi_high`` siblings (and ``note``) becomes one column ``<col>`` again."""
    out: dict[str, list[Any]] = {}
    done: set[str] = set()
    for col in frame.columns:
        if col in done:
            continue
        base = col[: -len(" mean")] if col.endswith(" mean") else None
        parts = [f"{base} hdi_low", f"{base} hdi_high"] if base else []
        if base is None or not all(p in frame.columns for p in parts):
            out[col] = list(frame[col])
            continue
        note = f"{base} note" if f"{base} note" in frame.columns else None
        median = f"{base} median" if f"{base} median" in frame.columns else None
        cells: list[Any] = []
        for i in range(len(frame)):
            m, lo, hi = (frame[c].iloc[i] for c in (col, *parts))
            med = frame[median].iloc[i] if median else np.nan
            if pd.notna(m):
                cells.append(_Interval(float(m), float(lo), float(hi), None if pd.isna(med) else float(med)))
            else:
                cells.append(frame[note].iloc[i] if note and pd.notna(frame[note].iloc[i]) else None)
        out[base] = cells
        done |= {col, *parts, *([note] if note else []), *([median] if median else [])}
    return pd.DataFrame(out)


def _cell(value: Any) -> tuple[str, str | None, bool]:
    """(shown text, sort value or None, numeric?) for one table cell."""
    if isinstance(value, _Interval):
        return value.text(), repr(value.mean), True
    if value is None or (isinstance(value, float | np.floating) and not np.isfinite(value)):
        return "", None, False
    if isinstance(value, bool | np.bool_):
        return ("yes" if value else "no"), None, False
    if isinstance(value, int | np.integer):
        return str(int(value)), str(int(value)), True
    if isinstance(value, float | np.floating):
        return f"{float(value):.4g}", repr(float(value)), True
    return str(value), None, False


def _png_display_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) in CSS pixels to show a PNG at: its print size (from the ``pHYs``
    resolution, 300 dpi for ``save_figure``'s) times :data:`_SCREEN_SCALE`, so a
    single-panel figure is not blown up to the text width; the pixel size when the PNG
    states no resolution. None when ``data`` is no PNG."""
    if len(data) < 24 or not data.startswith(_PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    i = 8
    while i + 8 <= len(data):
        (length,) = struct.unpack(">I", data[i : i + 4])
        kind = data[i + 4 : i + 8]
        if kind == b"pHYs" and length == 9 and i + 17 <= len(data):
            per_metre, _, unit = struct.unpack(">IIB", data[i + 8 : i + 17])
            if unit == 1 and per_metre > 0:
                scale = _SCREEN_SCALE * 96 / (per_metre * 0.0254)
                return max(1, round(width * scale)), max(1, round(height * scale))
        if kind in (b"IDAT", b"IEND"):
            break
        i += 12 + length
    return width, height


def _tex_caption(path: Path) -> str:
    """The caption ``write_tables`` wrote as the first line of the .tex (``% caption``)."""
    try:
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    except OSError:
        return ""
    text = first[2:].strip() if first.startswith("% ") else ""
    return "" if text == "table" else text


def figure_caption(section: Any, figure: str) -> str:
    """The figure's caption (what is drawn, the band level, the data) from
    ``section.captions``; an older cached section without one gets the figure's name."""
    captions = getattr(section, "captions", None)
    if isinstance(captions, Mapping):
        for key in (figure, Path(figure).stem):
            if captions.get(key):
                return str(captions[key])
    return Path(figure).stem.replace("_", " ")


# ------------------------------------------------------------------ pieces
def _table_html(frame: pd.DataFrame) -> str:
    frame = _collapse_intervals(frame)
    numeric = [
        (pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]))
        or any(isinstance(v, _Interval) for v in frame[c])
        for c in frame
    ]
    head = "".join(
        ('<th scope="col" class="num">' if num else '<th scope="col">')
        + f'<button type="button">{_esc(c)}</button></th>'
        for c, num in zip(frame.columns, numeric, strict=True)
    )
    rows = []
    for row in frame.itertuples(index=False):
        cells = []
        for value in row:
            text, sort, num = _cell(value)
            cls = "num" if num else "empty" if text == "" else "long" if len(text) > 32 else ""
            attrs = (f' class="{cls}"' if cls else "") + (f' data-value="{_esc(sort)}"' if sort is not None else "")
            cells.append(f"<td{attrs}>{_esc(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _table_block(out: Path, table: str, number: str) -> str:
    md = Path(table)
    csv, tex = md.with_suffix(".csv"), md.with_suffix(".tex")
    name = md.stem.replace("_", " ")
    caption = _tex_caption(out / tex)
    links = f'<a href="{_href(csv)}">CSV</a> · <a href="{_href(tex)}">LaTeX</a> · <a href="{_href(md)}">Markdown</a>'
    head = (
        f'<figcaption><span class="label">Table {number}.</span> {_esc(name)}'
        + (f": {_esc(caption)}" if caption else "")
        + f' <span class="links">({links})</span></figcaption>'
    )
    try:
        frame = pd.read_csv(out / csv, keep_default_na=False, na_values=[""], low_memory=False)
        body = _table_html(frame)
    except FileNotFoundError:
        body = f'<p class="missing">table file missing: {_esc(csv.as_posix())}</p>'
    except pd.errors.EmptyDataError:
        body = '<p class="missing">empty table</p>'
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        body = f'<p class="missing">unreadable table {_esc(csv.as_posix())}: {_esc(exc)}</p>'
    return f'<figure class="table" id="table-{number.replace(".", "-")}">{head}{body}</figure>'


def _figure_block(out: Path, section: Any, figure: str, number: str) -> str:
    caption = figure_caption(section, figure)
    pdf = Path(figure).with_suffix(".pdf")
    try:
        data = (out / figure).read_bytes()
    except OSError:
        data = b""
    if data:
        size = _png_display_size(data)
        dims = f' width="{size[0]}" height="{size[1]}"' if size else ""
        img = f'<img src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}"{dims} alt="{_esc(caption)}">'
        missing = ""
    else:  # still an <img>: the page's rendered/total count then shows the gap
        img = f'<img alt="{_esc(caption)}">'
        missing = f' <span class="missing">(figure file missing: {_esc(figure)})</span>'
    label = f'<span class="label">Figure {number}.</span>'
    return (
        f'<figure class="plot" id="figure-{number.replace(".", "-")}">{img}<figcaption>{label} '
        f'{_esc(caption)}{missing} <span class="links">(<a href="{_href(pdf)}">PDF</a>)</span></figcaption></figure>'
    )


def _diagnostics(s: _SectionLike) -> str:
    d: Mapping[str, Any] = s.diagnostics or {}
    state = "converged" if s.converged else "<strong>NOT CONVERGED - do not read these numbers</strong>"
    try:
        nuisance = nuisance_text(dict(d))
    except (KeyError, TypeError, ValueError):
        nuisance = ""
    timing = fit_time_text(s)
    text = (
        f"R-hat max {_fmt(d.get('rhat_max'), '.3f')}, min bulk ESS {_fmt(d.get('ess_bulk_min'), '.0f')}, "
        f"min tail ESS {_fmt(d.get('ess_tail_min'), '.0f')}, divergences {d.get('divergences', 0)}{nuisance}"
    )
    cls = "diagnostics" if s.converged else "diagnostics bad"
    return f'<p class="{cls}"><span class="lead">Diagnostics.</span> {_esc(text)}: {state}. {_esc(timing)}</p>'


def _section(out: Path, i: int, s: _SectionLike) -> list[str]:
    slug = anchor(f"{i} {s.title}")
    badge = "" if s.converged else '<span class="badge">NOT CONVERGED</span>'
    parts = [f'<section id="{_esc(slug)}">', f'<h2><span class="num">{i}</span>{_esc(s.title)}{badge}</h2>']
    if s.question:
        parts.append(f'<p><span class="lead">Question.</span> {_esc(s.question)}</p>')
    parts.append(f'<p><span class="lead">Verdict.</span> {_esc(s.verdict)}</p>')
    if s.details:
        parts.append('<ul class="details">' + "".join(f"<li>{_esc(d)}</li>" for d in s.details) + "</ul>")
    parts.append(_diagnostics(s))
    if not s.converged:
        parts.append(
            '<div class="banner nonconv" role="alert">NOT CONVERGED: this fit did not meet the convergence '
            "thresholds (R-hat &lt;= 1.01, bulk ESS &gt;= 400, no divergences). Do not read its numbers.</div>"
        )
    parts += [f'<div class="banner warning">warning: {_esc(w)}</div>' for w in s.warnings]
    parts += [f'<div class="banner warning">note: {_esc(n)}</div>' for n in getattr(s, "notes", ())]
    # numbered within the section, as REPORT.md numbers them: Table 2.1, Figure 2.3
    for k, table in enumerate(s.tables, 1):
        parts.append(_table_block(out, table, f"{i}.{k}"))
    for j, figure in enumerate(s.figures, 1):
        parts.append(_figure_block(out, s, figure, f"{i}.{j}"))
    if s.fits:
        links = ", ".join(f'<a href="{_href(f)}">{_esc(Path(f).name)}</a>' for f in s.fits)
        parts.append(f'<p class="fits">Fits (ArviZ InferenceData, netCDF): {links}</p>')
    parts.append("</section>")
    return parts


def _front(report: _ReportLike) -> list[str]:
    """Title, byline, data notes, failure and non-convergence banners, contents."""
    hdi = int(S.HDI_PROB * 100)
    parts = [
        "<header><h1>saturation report</h1>",
        f'<p class="byline">Generated by saturation {_esc(__version__)} on {_dt.date.today().isoformat()} '
        f"({_esc(run_time_text(report))}; intervals are {hdi} % highest-density intervals).</p></header>",
    ]
    for note in sorted({s.synthetic for s in report.sections if s.synthetic}):
        parts.append(
            f'<div class="banner note"><strong>Data note.</strong> {_esc(note)}. Published figures are shown next '
            "to the estimates for comparison; they are never used as results.</div>"
        )
    for status in ("failed", "skipped"):
        listed = [f for f in report.failures if f.get("status", "failed") == status]
        if not listed:
            continue
        items = "".join(
            f"<li><strong>{_esc(f.get('task', '?'))}</strong>: {_esc(f.get('error', ''))}</li>" for f in listed
        )
        parts.append(
            f'<div class="banner error" role="alert">ERROR: {len(listed)} analysis(es) failed and are '
            f"missing from this report:<ul>{items}</ul></div>"
            if status == "failed"
            else f'<div class="banner note"><strong>Not in this report ({len(listed)}): what the data do not '
            f"support.</strong><ul>{items}</ul></div>"
        )
    bad = [s.name for s in report.sections if not s.converged]
    if bad:
        parts.append(
            f'<div class="banner nonconv" role="alert">WARNING: {len(bad)} fit(s) did not converge '
            f"({_esc(', '.join(bad))}). Their numbers are not trustworthy; see their diagnostics.</div>"
        )
    entries = []
    for i, s in enumerate(report.sections, 1):
        badge = "" if s.converged else '<span class="badge">NOT CONVERGED</span>'
        question, answer = contents_entry(s)
        entries.append(
            f'<li><a href="#{_esc(anchor(f"{i} {s.title}"))}">{_esc(question)}</a>{badge} '
            f'<span class="gist">- {_esc(answer)}</span></li>'
        )
    parts.append(f'<nav class="contents"><h2>Contents</h2><ol>{"".join(entries)}</ol></nav>')
    return parts


def render_report_html(report: _ReportLike) -> str:
    """The text of REPORT.html (what :func:`write_report_html` writes).

    Parameters
    ----------
    report : saturation.report.Report
        As for :func:`write_report_html`.

    Returns
    -------
    str
        The HTML page.
    """
    out = Path(report.out)
    body = _front(report)
    for i, s in enumerate(report.sections, 1):
        body += _section(out, i, s)
    body.append(
        f"<footer>saturation {_esc(__version__)}. Tables: full precision in the CSV files; numbers here are shown "
        "to 4 significant digits (click a column header to sort). Figures: vector PDF beside each image.</footer>"
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta name="generator" content="saturation {_esc(__version__)}">',
            "<title>saturation report</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            *body,
            f"<script>{_JS}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


def write_report_html(report: _ReportLike) -> Path:
    """Write ``REPORT.html``, a self-contained page with REPORT.md's content, into ``report.out``.

    Every figure is embedded as a base64 PNG data URI (alt text: its caption), style and
    script are inline and a Content-Security-Policy blocks any other request. Tables are
    read from the CSV beside each Markdown table and rendered as sortable HTML tables
    (numbers to 4 significant digits). Links to the CSV / LaTeX / PDF / netCDF files are
    relative to the report directory.

    Parameters
    ----------
    report : saturation.report.Report
        The report (or any object with ``out``, ``sections``, ``seconds`` and ``failures``
        attributes). Each section is a :class:`saturation.report.Section`; its ``tables`` and
        ``figures`` are paths relative to ``report.out``. An optional ``captions`` attribute
        (figure path or stem -> caption) names the figures; without it a figure's caption is
        its file stem with underscores as spaces.

    Returns
    -------
    pathlib.Path
        ``report.out / "REPORT.html"``.

    Raises
    ------
    OSError
        If the file cannot be written.
    """
    path = Path(report.out) / "REPORT.html"
    write_atomic(path, render_report_html(report))
    return path
