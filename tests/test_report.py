"""saturation report: a small end-to-end run (every analysis kind), the cache, the CLI."""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import replace
from html import escape as html_escape
from pathlib import Path

import pandas as pd
import pytest

from saturation.cli import main
from saturation.io import write_table
from saturation.report import run_report
from saturation.simulate import simulate_transfer
from saturation.spec import load_spec
from saturation.tables import markdown_text, table_latex, table_markdown

TINY = "[sampler]\ndraws = 200\nchains = 2\nseed = 3\n"


def _specs(root: Path, crossing_spec) -> Path:
    specs = root / "specs"
    specs.mkdir()
    ds, _ = simulate_transfer(crossing_spec, seed=2)  # the transfer tests' scenario: same model shapes
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
compare = ["hinge", "hinge-shared"]
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
components = ["environment/pass_ratio", "environment/tag_f1"]
component_weights = [0.7, 0.3]
{TINY}""")
    (specs / "compare.toml").write_text("""
[analysis]
kind = "compare"
title = "Tool arms (tiny, short chains)"
[data]
trials = "embedded:r2egym"
[model]
arms = ["t2", "t2yarn"]
reference = "t2yarn"
arm_attrs = ["t2:context=32768", "t2yarn:context=81920"]
match = ["context=81920"]
backtest = 40
[sampler]
draws = 100
tune = 100
chains = 2
seed = 1
""")
    (specs / "compute.toml").write_text("""
[analysis]
kind = "compare"
title = "Tool arms on the compute axis (tiny, short chains)"
[data]
trials = "embedded:r2egym"
metrics = "embedded:r2egym-compute"
[model]
arms = ["t2", "t2yarn"]
reference = "t2yarn"
x = "compute"
[sampler]
draws = 100
tune = 100
chains = 2
seed = 1
""")
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
def test_small_report_end_to_end_and_cache(tmp_path, monkeypatch, crossing_spec):
    from saturation.models import transfer

    real = transfer.diagnostics

    def failing(idata, names):  # made-up diagnostics: the transfer fit "did not converge"
        return {**real(idata, names), "converged": False, "rhat_max": 1.2}

    monkeypatch.setattr(transfer, "diagnostics", failing)
    specs = _specs(tmp_path, crossing_spec)
    out = tmp_path / "report"
    rep = run_report([specs], out=out, progress=False)
    names = {s.name: s for s in rep.sections}
    assert set(names) == {"plateau", "diagnose", "series", "transfer", "compare", "compute"}
    assert "ceiling" in names["compute"].verdict and any("midpoint ratio" in d for d in names["compute"].details)
    arms_md = (out / "compute" / "arms.md").read_text()
    assert "midpoint (cumulative timing/step)" in arms_md
    # the verdict is the short answer (each arm's ceiling, the flag); the sentences are the details
    assert "CONFOUNDED" in names["compare"].verdict and "Back-test" not in names["compare"].verdict
    compare_details = " ".join(names["compare"].details)
    assert "CONFOUNDED by context 32768 (t2) vs 81920 (t2yarn)" in compare_details
    assert "Back-test: t2: fitted on its first 40 steps" in compare_details
    series = names["series"]
    assert "Reward components: code-contests-algo: all components flat." in series.verdict
    assert "The study: both components flat." in series.verdict
    assert {"series/reward_components.md", "series/components.png"} <= {*series.tables, *series.figures}
    text = (out / "REPORT.md").read_text()
    for s in rep.sections:
        assert markdown_text(s.title) in text and markdown_text(s.verdict) in text  # HTML escaped
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
    # a fit that did not converge (made-up diagnostics): its section, REPORT.md and results.json say so
    bad = names["transfer"]
    assert not bad.converged and bad.diagnostics["rhat_max"] == 1.2
    assert any("transfer fit" in w and "DID NOT CONVERGE: R-hat max 1.200" in w for w in bad.warnings), bad.warnings
    listed = re.search(r"> \*\*WARNING: \d+ fit\(s\) did not converge \(([^)]*)\)", text)
    assert listed and "transfer" in listed.group(1).split(", ")
    md = _md_section(text, bad.title)
    assert "R-hat max 1.200" in md and "**NOT CONVERGED - do not read these numbers**" in md
    assert "> **WARNING: this fit did not meet the convergence thresholds" in md
    results = json.loads((out / "results.json").read_text())
    assert set(results["analyses"]) == set(names)
    assert results["analyses"]["transfer"]["converged"] is False
    assert results["analyses"]["transfer"]["diagnostics"]["rhat_max"] == 1.2
    plateau = results["analyses"]["plateau"]["results"]["plateau"]
    assert plateau["levels"]["file"]["changepoint"]["hdi"][0] is not None
    # the headline and the sentences come from the model's verdicts (one rule)
    assert plateau["summary"] in names["plateau"].verdict
    for level, e in plateau["levels"].items():
        assert any(d.startswith(f"{level}: {e['verdict']} ({e['reason']})") for d in names["plateau"].details)
    assert "The study found every level" in names["plateau"].verdict
    assert set(results["analyses"]["plateau"]["results"]["ppc_coverage"]) == {"file", "module"}
    # every figure has a caption that says what is drawn, with the band level
    for s in rep.sections:
        for j, fig in enumerate(s.figures, 1):
            caption = s.captions[fig]
            assert len(caption) > 60 and f"*Figure {rep.sections.index(s) + 1}.{j}. {markdown_text(caption)}*" in text
        banded = [f for f in s.figures if not f.endswith(("plateaued_by.png", "loo.png"))]  # no bands there
        assert all("94 %" in s.captions[f] for f in banded), s.name
    # the contents: each section's question and its short answer (the analysis' headline, a
    # whole sentence, never a cut of the verdict); REPORT.html lists the same
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    html = (out / "REPORT.html").read_text()
    for i, s in enumerate(rep.sections, 1):
        assert s.headline and len(s.headline) < len(s.verdict) + 1, s.name
        assert f"{i}. [{markdown_text(s.question or s.title)}](" in contents
        assert contents.count(f") - {markdown_text(s.headline)}\n") >= 1, s.name
        assert html_escape(s.headline) in html
    # the CSVs hold numbers; formatted intervals only in .md / .tex
    est = pd.read_csv(out / "plateau" / "estimates.csv")
    for col in ("early slope mean", "early slope hdi_low", "early slope hdi_high", "late gain mean"):
        assert pd.api.types.is_float_dtype(est[col]), col
    assert not est.map(lambda v: isinstance(v, str) and "[" in v).any().any()
    assert "[" in (out / "plateau" / "estimates.md").read_text()
    assert (out / "REPORT.html").read_text().count("data:image/png;base64,") == sum(
        len(s.figures) for s in rep.sections
    )
    fitted = {s.name: s.seconds for s in rep.sections}

    again = run_report([specs], out=out, progress=False)
    assert all(s.cached for s in again.sections)
    # a cached re-run keeps the original fit times and says it reused them
    assert {s.name: s.seconds for s in again.sections} == fitted
    text = (out / "REPORT.md").read_text()
    assert f"Fitted in {fitted['transfer']:.1f} s on " in text and "reused from the cache in this run" in text
    assert f"{len(fitted)} of {len(fitted)} analyses reused from the cache" in text
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


def _md_section(text: str, title: str) -> str:
    """The REPORT.md section of the analysis titled ``title`` (its heading to the next one)."""
    start = re.search(rf"^## \d+ {re.escape(title)}$", text, flags=re.MULTILINE)
    assert start, title
    end = text.find("\n## ", start.end())
    return text[start.start() : None if end < 0 else end]


def test_non_convergence_is_flagged_in_every_output_from_made_up_diagnostics(tmp_path, monkeypatch, capsys):
    """The plumbing without a fit: an analysis whose (made-up) diagnostics have R-hat 1.2 is
    flagged in its section record, REPORT.md (contents warning naming it, its section, its
    sampler warning), results.json and the exit code (3); a converged one beside it is not."""
    from saturation import report

    def made_up(spec, ds, reference, out):
        ok = spec.name == "good"
        if not ok:
            warnings.warn("made-up: the chains disagree", UserWarning, stacklevel=1)
        diag = {"rhat_max": 1.003, "ess_bulk_min": 900.0, "ess_tail_min": 800.0, "divergences": 0}
        if not ok:
            diag = {"rhat_max": 1.2, "ess_bulk_min": 35.0, "ess_tail_min": 30.0, "divergences": 4}
            diag["thresholds"] = {"rhat_max": 1.01, "ess_bulk_min": 100, "divergences": 0}  # 400 draws: draws / 4
        diag["converged"] = ok
        return {"verdict": f"{spec.name} verdict.", "details": [], "results": {}, "diagnostics": diag}

    monkeypatch.setitem(report.RUNNERS, "series", made_up)
    specs = tmp_path / "specs"
    specs.mkdir()
    for name in ("good", "bad"):
        (specs / f"{name}.toml").write_text(
            f'[analysis]\nkind = "series"\ntitle = "Analysis {name}"\n[data]\nseries = "embedded:code-contests"\n{TINY}'
        )
    out = tmp_path / "r"
    assert main(["report", str(specs), "--out", str(out), "--no-progress"]) == 3
    assert "WARNING: fits that did not converge: bad;" in capsys.readouterr().err
    text = (out / "REPORT.md").read_text()
    assert "> **WARNING: 1 fit(s) did not converge (bad)." in text
    bad, good = _md_section(text, "Analysis bad"), _md_section(text, "Analysis good")
    assert "R-hat max 1.200" in bad and "divergences 4" in bad
    assert "**NOT CONVERGED - do not read these numbers**" in bad
    assert "> **WARNING: this fit did not meet the convergence thresholds (R-hat <= 1.01, bulk ESS >= 100," in bad
    assert "> warning: made-up: the chains disagree" in bad
    assert "R-hat max 1.003" in good and ": converged." in good and "WARNING" not in good and "warning" not in good
    results = json.loads((out / "results.json").read_text())["analyses"]
    assert results["bad"]["converged"] is False and results["bad"]["diagnostics"]["rhat_max"] == 1.2
    assert results["good"]["converged"] is True
    record = json.loads((out / "bad" / "section.json").read_text())
    assert record["converged"] is False and record["warnings"] == ["made-up: the chains disagree"]
    # the converged analysis alone: no warning anywhere, exit code 0
    assert main(["report", str(specs / "good.toml"), "--out", str(tmp_path / "r2"), "--no-progress"]) == 0
    assert "WARNING" not in (tmp_path / "r2" / "REPORT.md").read_text()
    assert "did not converge" not in capsys.readouterr().err


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


def _series_and_broken(tmp_path, series: str, broken: str):
    """A specs directory: a tiny code-contests series spec named ``series`` and one named
    ``broken`` that loads but fails when fitted (a run that is not in the data)."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / f"{series}.toml").write_text(f"""
[analysis]
kind = "series"
title = "Code contests (tiny)"
[data]
series = "embedded:code-contests"
{TINY}""")
    (specs / f"{broken}.toml").write_text(f"""
[analysis]
kind = "series"
title = "A run that is not in the data"
[data]
series = "embedded:code-contests"
[model]
runs = ["no-such-run"]
{TINY}""")
    return specs


def test_report_analyses_as_dask_tasks_with_a_failing_one(tmp_path, capsys):
    specs = _series_and_broken(tmp_path, "series", "broken")
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


def test_in_process_one_failing_spec_is_named_and_the_others_still_run(tmp_path, capsys):
    """``--scheduler sync`` (no dask): a spec that loads but fails when fitted is listed with
    its name and reason; the other section is written (before, the first failure aborted
    the whole report)."""
    specs = _series_and_broken(tmp_path, "b-series", "a-broken")
    out = tmp_path / "r"
    rc = main(["report", str(specs), "--out", str(out), "--scheduler", "sync", "--no-progress"])
    assert rc == 1
    assert "a-broken: FAILED" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert set(results["analyses"]) == {"b-series"}
    failed = results["failed"][0]
    assert failed["task"] == "a-broken" and "unknown run(s) ['no-such-run']" in failed["error"]
    assert "Code contests (tiny)" in (out / "REPORT.md").read_text()


def test_a_by_run_spec_fits_every_run_and_lists_the_failed_one(tmp_path, monkeypatch):
    """A plateau spec with ``by = "run"``: one table row per run and level, one
    InferenceData per fitted run, the verdict counting the runs' verdicts, the run too
    short to fit named (here in process: RUNS_SCHEDULER; the Dask path is tested in
    tests/models/test_runs.py)."""
    import sys

    from saturation import report

    sys.path.insert(0, str(Path(__file__).parent / "models"))
    from test_runs import _runs

    monkeypatch.setattr(report, "RUNS_SCHEDULER", "sync")
    specs = tmp_path / "specs"
    specs.mkdir()
    write_table(_runs(["seed-1", "seed-2", "short"]), specs / "sweep.csv")
    (specs / "sweep.toml").write_text(f"""
[analysis]
kind = "plateau"
title = "Sweep"
[data]
trials = "sweep.csv"
[model]
by = "run"
{TINY}
""")
    rep = run_report([specs / "sweep.toml"], out=tmp_path / "out", progress=False)
    (section,) = rep.sections
    assert section.verdict.startswith("2 runs: file ") and "1 could not be fitted" in section.verdict
    assert any(d.startswith("short: could not be fitted") for d in section.details)
    table = pd.read_csv(tmp_path / "out" / "sweep" / "runs.csv")
    assert sorted(set(table["run"])) == ["seed-1", "seed-2"] and len(table) == 4
    assert sorted(Path(f).name for f in section.fits) == ["plateau_fit_seed-1.nc", "plateau_fit_seed-2.nc"]
    bad = specs / "bad.toml"
    bad.write_text('[analysis]\nkind = "plateau"\n[model]\nby = "step"\nrun = "x"\n')
    with pytest.raises(Exception, match='by must be "run"'):
        run_report([bad], out=tmp_path / "out2", progress=False)


@pytest.mark.parametrize(("end", "agrees"), [("behind", True), ("level", False), ("ahead", False)])
def test_lr_arm_reading_follows_the_models_decision(made_up_transfer_fit, end, agrees):
    """The LR section's study sentence reads the transfer fit's decision (the one rule), says
    the arm's data are assumed, and agrees only when the LR arm ends behind s85."""
    from saturation.replica import LR_ARM, _lr_arm_reading

    p_end = {"behind": 0.01, "level": 0.5, "ahead": 0.99}[end]
    text = _lr_arm_reading(made_up_transfer_fit("s85", LR_ARM, 0.4, p_end, 3.0, 0.1))
    assert "assumed" in text and "lower LR" in text
    assert ("The fit agrees in direction" in text) is agrees
    if agrees:
        assert text.endswith("s85 leading from step 3 on.")
    else:
        assert f"the arm is {end} with s85" in text
    assert _lr_arm_reading(made_up_transfer_fit("base", LR_ARM, 0.4, p_end, 3.0, 0.1)) == ""  # another reference
    assert _lr_arm_reading(made_up_transfer_fit("s85", "other", 0.4, p_end, 3.0, 0.1)) == ""  # no LR arm


# ---------------------------------------------------------------------- a report on the user's own runs
#: words of the reference study that never belong in a report on someone else's data
STUDY_WORDS = ("study", "SWE", "published", "s85", "Qwen", "g1", "split at step 46", "replica")


def _no_study_words(out: Path) -> None:
    for name in ("REPORT.md", "REPORT.html", "results.json"):
        text = re.sub(r"data:[a-z/+]+;base64,[A-Za-z0-9+/=]+", "", (out / name).read_text())  # embedded figures
        found = [w for w in STUDY_WORDS if w in text]
        assert not found, f"{name} says {found}"


def _verl_log(path: Path, n_steps: int = 60) -> Path:
    """verl's console log (its own LocalLogger format, tests/runlog_fixtures.py) of a run
    whose task score rises to 0.6 by step 30 and stays there."""
    import numpy as np

    from runlog_fixtures import verl_metrics, write_verl_console

    rng = np.random.default_rng(1)
    logged = []
    for step in range(1, n_steps + 1):
        m = verl_metrics(step, rng)
        m["critic/score/mean"] = np.float64(min(0.3 + 0.01 * step, 0.6) + rng.normal(0, 0.02))
        logged.append((step, m))
    return write_verl_console(path, logged)


def test_a_report_on_a_verl_log_answers_the_plateau_question_and_says_nothing_of_the_study(tmp_path, capsys):
    log = _verl_log(tmp_path / "train.log")
    out = tmp_path / "r"
    assert main(["report", str(log), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "not run: train-ceilings: one run" in printed and "not run: train-reliability: not logged" in printed
    text = (out / "REPORT.md").read_text()
    assert "## 1 Plateau and change point of critic/score/mean (train.log)" in text
    results = json.loads((out / "results.json").read_text())
    (section,) = results["analyses"].values()
    (run,) = section["results"]["runs"]["runs"].values()
    level = next(iter(run["levels"].values()))
    assert level["verdict"] == "plateaued" and 27 <= level["changepoint"]["mean"] <= 33
    assert {f["status"] for f in results["failed"]} == {"skipped"}
    assert (out / "specs" / "01-train-plateau.toml").exists()  # the spec it ran, to edit and re-run
    assert (out / "01-train-plateau" / "curves_1.png").exists()
    _no_study_words(out)


def test_a_report_on_user_trials_and_a_trl_run_directory_of_20_steps(tmp_path, capsys):
    from runlog_fixtures import write_trl_output
    from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau

    spec = PlateauSpec(
        levels=(LevelSpec("file", 0.5, 0.02, 0.0, 12),), n_steps=20, prompts_per_step=16, samples_per_prompt=4
    )
    ds, _ = simulate_plateau(spec, seed=4)
    write_table(ds, tmp_path / "trials.csv")
    write_trl_output(tmp_path / "trl", list(range(1, 21)), save_every=10, logging_steps=1)
    out = tmp_path / "r"
    rc = main(["report", str(tmp_path / "trials.csv"), str(tmp_path / "trl"), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    kinds = [s["kind"] for s in results["analyses"].values()]
    # the plateaus first (the question a reader asks first), then the cardinality diagnosis
    assert kinds == ["plateau", "plateau", "plateau", "diagnose"], list(results["analyses"])
    titles = [s["title"] for s in results["analyses"].values()]
    assert "Plateau and change point of graded F1 (trials.csv)" in titles
    assert "Plateau and change point of eval_reward (trl)" in titles
    _no_study_words(out)
    # the same command again: every section from the cache
    assert main(["report", str(tmp_path / "trials.csv"), str(tmp_path / "trl"), "--out", str(out)]) == 0
    assert all(s["cached"] for s in json.loads((out / "run.json").read_text())["analyses"].values())


def test_shipped_specs_on_user_data_run_what_fits_and_list_the_rest(tmp_path, capsys):
    """--data with the shipped specs: the study's title, prose and published figures never
    appear; a spec the data do not fit (the study's break at 46 on a 30-step run, a series
    spec on trials) is listed as skipped with its reason; exit 0 because some ran."""
    from saturation.simulate import LevelSpec, PlateauSpec, simulate_plateau
    from saturation.spec import default_spec_dir

    levels = tuple(LevelSpec(name, 0.5, 0.02, 0.0, 12) for name in ("file", "module", "entity"))
    ds, _ = simulate_plateau(PlateauSpec(levels=levels, n_steps=30, prompts_per_step=8, samples_per_prompt=4), seed=5)
    write_table(ds, tmp_path / "mine.csv")
    shipped = default_spec_dir()
    specs = [shipped / f"{n}.toml" for n in ("swesmith-plateau", "swesmith-split46", "learning-diagnostics")]
    specs.append(shipped / "code-contests.toml")
    out = tmp_path / "r"
    rc = main(["report", *map(str, specs), "--data", str(tmp_path / "mine.csv"), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    assert set(results["analyses"]) == {"swesmith-plateau", "learning-diagnostics"}
    skipped = {f["task"]: f["error"] for f in results["failed"]}
    assert set(skipped) == {"swesmith-split46", "code-contests"}
    assert "46" in skipped["swesmith-split46"]
    assert results["analyses"]["swesmith-plateau"]["title"] == "Plateau and change point (swesmith-plateau on mine.csv)"
    assert "published_vs_bayes" not in json.dumps(results)
    text = (out / "REPORT.md").read_text().replace("swesmith-split46", "").replace("swesmith-plateau", "")
    assert not [w for w in STUDY_WORDS if w in text.replace("(mine.csv)", "")]


def test_data_paths_and_data_override_do_not_mix(tmp_path, capsys):
    log = _verl_log(tmp_path / "train.log", 12)
    assert main(["report", str(log), "--data", str(log), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--data replaces the data of specs" in err


def test_results_json_is_byte_identical_cached_or_forced(tmp_path):
    """Issue 40: the same specs, data and seeds give byte-identical results.json whether the
    sections come from the cache or are refitted (--force); timings live in run.json."""
    log = _verl_log(tmp_path / "train.log", 40)
    out = tmp_path / "r"
    run_report([log], out=out, progress=False)
    first = (out / "results.json").read_bytes()
    again = run_report([log], out=out, progress=False)
    assert all(s.cached for s in again.sections) and (out / "results.json").read_bytes() == first
    forced = run_report([log], out=out, progress=False, force=True)
    assert not any(s.cached for s in forced.sections) and (out / "results.json").read_bytes() == first
    run = json.loads((out / "run.json").read_text())
    assert set(run) == {"seconds", "analyses"} and not any(v["cached"] for v in run["analyses"].values())


def test_markdown_text_escapes_markup_and_keeps_comparisons_readable():
    """A verdict's reason reads "P(late gain > ROPE) = 0.40 < 0.95" in REPORT.md (it read
    "&gt;" and "&lt;" before); whatever could start raw HTML or a character reference is
    still escaped, and a leading ">" or "#" cannot make a quote or a heading."""
    assert markdown_text("P(late gain > ROPE) = 0.40 < 0.95") == "P(late gain > ROPE) = 0.40 < 0.95"
    assert markdown_text("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)>"
    assert markdown_text("</b><!-- x --><?php <http://x.y>") == "&lt;/b>&lt;!-- x -->&lt;?php &lt;http://x.y>"
    assert markdown_text("&amp; &#60; a & b") == "&amp;amp; &amp;#60; a & b"
    assert markdown_text("> quote") == "\\> quote" and markdown_text("# head") == "\\# head"


def test_before_fit_is_called_when_an_analysis_fits_not_when_its_cache_is_reused(tmp_path):
    from saturation.report import run_analysis

    log = _verl_log(tmp_path / "train.log", 40)
    out = tmp_path / "r"
    run_report([log], out=out, progress=False)  # plans the specs (out/specs) and fits them
    spec = load_spec(sorted((out / "specs").glob("*.toml"))[0])
    seen: list[str] = []
    assert run_analysis(spec, out, before_fit=lambda s: seen.append(s.name)).cached and seen == []
    assert not run_analysis(spec, out, force=True, before_fit=lambda s: seen.append(s.name)).cached
    assert seen == [spec.name]


def test_the_kernels_of_the_shipped_analyses():
    from saturation.report import kernels_ahead, kernels_of
    from saturation.spec import default_spec_dir, load_specs

    specs = load_specs([default_spec_dir()])
    used = {s.name: kernels_of(s) for s in specs}
    assert used["swegym-transfer"] == ("saturation.models.transfer_kernel",)
    assert used["r2egym-tools"] == ("saturation.models.sigmoid_kernel",)
    assert used["swesmith-plateau"] == used["learning-diagnostics"] == used["code-contests"] == ()
    assert kernels_ahead(specs) == ["saturation.models.transfer_kernel", "saturation.models.sigmoid_kernel"]
    assert kernels_ahead([s for s in specs if s.name != "swesmith-plateau"][-3:]) == []  # a compare first
    # sampled task effects and paired arms are fitted on the PyMC graph: no kernel to wait for
    transfer = next(s for s in specs if s.name == "swegym-transfer")
    sampled = replace(transfer, model={**transfer.model, "task_effects": "sampled"})
    assert kernels_of(sampled) == ()
