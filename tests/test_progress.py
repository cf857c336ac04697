"""The progress display: plain lines off a terminal, a rich live view on one, stages and
counted stages reported from deep in the stack, and nutpie's draws routed into it."""

from __future__ import annotations

import io
import re
import time

import numpy as np
import pymc as pm

from saturation import progress
from saturation.models.sampling import SamplerConfig, sample_model
from saturation.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    with Progress(3, "report", stream=stream, interval=0.05) as bar:
        assert not bar.live and progress.current() is bar
        bar.set_item("swegym-transfer")
        progress.stage("sample", total=4000, unit="draws")
        time.sleep(0.1)
        progress.advance(1000, note="2 divergences")
        time.sleep(0.15)  # periodic status lines while the item runs
        bar.update()
    assert progress.current() is not bar
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("report 0/3 [0 s] swegym-transfer")
    status = [ln for ln in lines if "sample 1000/4000 draws" in ln]
    assert status, lines
    rate = re.search(r"sample 1000/4000 draws, (\d+) draws/s, ETA (\d+) s, 2 divergences", status[-1])
    assert rate and 0 < int(rate.group(1)) <= 1000 / 0.1 + 1, status[-1]
    assert lines[-1].startswith("report: 1/3 done in ")
    n = len(lines)
    time.sleep(0.15)
    assert len(stream.getvalue().splitlines()) == n  # closed: the ticker stopped


def test_disabled_prints_nothing_and_stages_without_a_display_are_no_ops():
    quiet = io.StringIO()
    with Progress(4, "x", enabled=False, stream=quiet, interval=0.01) as bar:
        bar.set_item("a")
        progress.stage("fit")
        bar.log("a log line")
        time.sleep(0.05)
    assert quiet.getvalue() == ""
    while progress.current() is not None:  # pragma: no cover - a display another test left open
        progress.current().close()
    progress.stage("nothing open")  # no display: nothing happens, nothing fails
    progress.advance(3)


def test_bytes_are_shown_as_mb_per_second():
    stream = io.StringIO()
    bar = Progress(4, "ingest", stream=stream, interval=0)
    for _ in range(4):
        bar.update(nbytes=3e6)
    bar.set_item("run-a")
    assert re.search(r"ingest 4/4 \[0 s\] 12 MB, \d+ MB/s run-a", bar.status())
    assert bar.close() >= 0


def test_nested_displays_report_to_the_innermost():
    outer_s, inner_s = io.StringIO(), io.StringIO()
    with Progress(2, "outer", stream=outer_s, interval=0) as outer:
        with Progress(1, "inner", stream=inner_s, interval=0) as inner:
            assert progress.current() is inner
            progress.stage("compile")
            assert inner.stage_name == "compile" and outer.stage_name == ""
        assert progress.current() is outer


def test_live_display_on_a_terminal_keeps_log_lines_off_the_bar():
    term = _Terminal()
    with Progress(2, "report", stream=term) as bar:
        assert bar.live
        bar.set_item("plateau")
        progress.stage("sample", total=100, unit="draws")
        progress.advance(50)
        bar.log("  plateau (plateau): 3.2 s")
        bar.update()
    text = term.getvalue()
    assert "report" in text and "plateau" in text and "sample" in text
    # the log line is printed on a line of its own, above the live view
    lines = [ln for ln in re.split(r"[\r\n]", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)) if "3.2 s" in ln]
    assert lines and all(ln.strip() == "plateau (plateau): 3.2 s" for ln in lines), lines


def test_names_from_data_reach_the_terminal_escaped_and_never_as_markup():
    """A run or spec name carrying an OSC title sequence, a carriage return and rich markup:
    on the live view and in plain lines its control characters are shown escaped and its
    brackets as written (before, the live view printed them raw and rendered the markup)."""
    name = "\x1b]0;pwned\x07run[bold red]X[/]\rover"
    for stream in (_Terminal(), io.StringIO()):
        with Progress(2, name, stream=stream) as bar:
            bar.set_item(name)
            progress.stage(name, total=10, unit="draws")
            progress.advance(5, note=name)
            bar.log(name)
            bar.update()
        text = stream.getvalue()
        assert "\x1b]0;" not in text and "\x07" not in text and "\rover" not in text
        assert "\\x1b]0;pwned\\x07run[bold red]X[/]\\rover" in text


def test_nutpie_draws_reach_the_display():
    """A (tiny) real nutpie run inside a display: compile, then the draws counted up to
    chains x (draws + tune)."""
    with pm.Model() as model:
        pm.Normal("x", shape=2)
    stream = io.StringIO()
    seen = []
    with Progress(1, "fit", stream=stream, interval=0) as bar:
        real = bar.advance

        def spy(done, note=""):
            seen.append(done)
            real(done, note=note)

        bar.advance = spy  # type: ignore[method-assign]
        idata, _ = sample_model(
            model,
            cache_key=None,
            data={},
            seed=1,
            config=SamplerConfig(draws=300, tune=200, chains=2, sampler="nutpie"),
        )
        assert bar.stage_name == "sample" and bar.stage_total == 2 * (300 + 200)
    assert idata.posterior.sizes["draw"] == 300
    assert seen and seen[-1] == 1000 and np.all(np.diff(seen) >= 0), seen
