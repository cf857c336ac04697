"""saturation report: a small end-to-end run (every analysis kind), the cache, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from saturation.cli import main
from saturation.io import write_table
from saturation.report import run_report, table_latex, table_markdown
from saturation.simulate import simulate_transfer

TINY = "[sampler]\ndraws = 200\nchains = 2\nseed = 3\n"


def _specs(root: Path) -> Path:
    # same shapes as the transfer tests, so the compiled model is reused
    from models.test_transfer import CROSSING

    specs = root / "specs"
    specs.mkdir()
    ds, _ = simulate_transfer(CROSSING, seed=2)
    write_table(ds, specs / "transfer.csv.zst")
    (specs / "plateau.toml").write_text(f"""
[analysis]
kind = "plateau"
title = "Plateau (tiny)"
question = "Did it plateau?"
[data]
trials = "embedded:swesmith"
reference = "embedded"
[model]
levels = ["file", "module"]
compare = ["hinge", "hinge-separate"]
{TINY}
[figures]
include = ["curves", "slopes", "plateaued_by", "ppc", "loo"]
""")
    (specs / "diagnose.toml").write_text(f"""
[analysis]
kind = "diagnose"
title = "Cardinality (tiny)"
[data]
trials = "embedded:swesmith"
reference = "embedded"
[model]
levels = ["entity"]
{TINY}""")
    (specs / "series.toml").write_text(f"""
[analysis]
kind = "series"
title = "Code contests (tiny)"
[data]
series = "embedded:code-contests"
reference = "embedded"
[model]
runs = ["code-contests-base", "code-contests-g1"]
reference_runs = ["Qwen3-8B base", "g1"]
{TINY}""")
    (specs / "transfer.toml").write_text("""
[analysis]
kind = "transfer"
title = "Transfer (tiny, short chains)"
[data]
trials = "transfer.csv.zst"
[sampler]
draws = 100
tune = 100
chains = 2
seed = 1
""")
    return specs


@pytest.mark.filterwarnings("ignore::saturation.models.ConvergenceWarning")
def test_small_report_end_to_end_and_cache(tmp_path, monkeypatch):
    from saturation.models import transfer

    real = transfer.diagnostics

    def failing(idata, names):  # made-up diagnostics: the transfer fit "did not converge"
        return {**real(idata, names), "converged": False, "rhat_max": 1.2}

    monkeypatch.setattr(transfer, "diagnostics", failing)
    specs = _specs(tmp_path)
    out = tmp_path / "report"
    rep = run_report([specs], out=out, progress=False)
    names = {s.name: s for s in rep.sections}
    assert set(names) == {"plateau", "diagnose", "series", "transfer"}
    text = (out / "REPORT.md").read_text()
    for s in rep.sections:
        assert s.title in text and s.verdict in text
        for f in [*s.tables, *s.figures, *s.fits]:
            assert (out / f).exists(), f
        for fig in s.figures:
            assert (out / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert (out / fig).with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
        for table in s.tables:
            assert (out / table).with_suffix(".tex").read_text().count("\\toprule") == 1
    assert len(names["plateau"].figures) == 5 and "plateau/loo.md" in names["plateau"].tables
    assert "plateau/published_vs_bayes.md" in names["plateau"].tables
    assert "Published" in text and "SYNTHETIC" in text
    # a fit that did not converge: the report must say so loudly
    assert not names["transfer"].converged
    assert "NOT CONVERGED" in text and "WARNING" in text
    results = json.loads((out / "results.json").read_text())
    assert set(results["analyses"]) == set(names)
    plateau = results["analyses"]["plateau"]["results"]["plateau"]
    assert plateau["levels"]["file"]["changepoint"]["hdi"][0] is not None
    # the headline and the sentences come from the model's verdicts (one rule)
    assert plateau["summary"] in names["plateau"].verdict
    for level, e in plateau["levels"].items():
        assert any(d.startswith(f"{level}: {e['verdict']} ({e['reason']})") for d in names["plateau"].details)
    assert "The study found every level" in names["plateau"].verdict
    assert set(results["analyses"]["plateau"]["results"]["ppc_coverage"]) == {"file", "module"}

    again = run_report([specs], out=out, progress=False)
    assert all(s.cached for s in again.sections)
    assert (
        json.loads((out / "results.json").read_text())["analyses"]["plateau"]["results"]
        == results["analyses"]["plateau"]["results"]
    )

    spec = specs / "diagnose.toml"
    spec.write_text(spec.read_text().replace("seed = 3", "seed = 4"))
    third = run_report([specs], out=out, progress=False)
    assert {s.name for s in third.sections if not s.cached} == {"diagnose"}
    forced = run_report([specs / "plateau.toml"], out=out, force=True, progress=False)
    assert not forced.sections[0].cached
    # same seed and inputs, same numbers
    assert forced.sections[0].results["plateau"] == names["plateau"].results["plateau"]


def test_report_cli_and_spec_errors(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[analysis]\nkind = "plateau"\n[data]\ntrials = "embedded:swesmith"\n[model]\n'
        f'levels = ["file"]\n{TINY}[figures]\ninclude = ["curves"]\n'
    )
    assert main(["report", str(spec), "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and (tmp_path / "r" / "REPORT.md").exists()
    (tmp_path / "bad.toml").write_text('[analysis]\nkind = "plateau"\n[model]\nbreakpoint = "46"\n')
    assert main(["report", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err
    assert "[data] trials is missing" in err and "breakpoint must be a number" in err


def test_table_writers_escape_and_align():
    import pandas as pd

    frame = pd.DataFrame({"name_x": ["a_b", "50%"], "value": [0.123456, float("nan")], "ok": [True, False]})
    md = table_markdown(frame)
    assert md.splitlines()[0] == "| name_x | value | ok |" and "| a_b | 0.1235 | yes |" in md
    tex = table_latex(frame, "cap")
    assert "\\begin{tabular}{lrr}" in tex and "name\\_x" in tex and "50\\%" in tex and "\\bottomrule" in tex


def test_report_analyses_as_dask_tasks_with_a_failing_one(tmp_path, capsys):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "series.toml").write_text(f"""
[analysis]
kind = "series"
title = "Code contests (tiny)"
[data]
series = "embedded:code-contests"
{TINY}""")
    (specs / "broken.toml").write_text(f"""
[analysis]
kind = "series"
title = "A run that is not in the data"
[data]
series = "embedded:code-contests"
[model]
runs = ["no-such-run"]
{TINY}""")
    out = tmp_path / "r"
    rc = main(["report", str(specs), "--out", str(out), "--scheduler", "local", "--workers", "2", "--no-progress"])
    assert rc == 1
    assert "broken: FAILED" in capsys.readouterr().out
    text = (out / "REPORT.md").read_text()
    assert "ERROR: 1 analysis(es) failed" in text and "Code contests (tiny)" in text
    results = json.loads((out / "results.json").read_text())
    assert set(results["analyses"]) == {"series"} and results["failed"][0]["task"] == "broken"
    # the cluster's section equals the in-process one (same seed, same numbers; served from the cache)
    again = run_report([specs / "series.toml"], out=out, progress=False)
    assert again.sections[0].cached
