"""Every figure of ``saturation.plots``: drawn into a new figure and into a given ``ax=``, and
what is drawn is what its data sibling returns (the frame the paper's numbers come from);
``save_figure``'s files.

The fits are cheap: the Gaussian plateau model and the trend diagnoses use the exact
sampler (independent draws, no MCMC); the transfer figure gets a hand-built fit with the
attributes it reads (a NUTS transfer fit takes minutes)."""

from __future__ import annotations

import re
import struct
from dataclasses import replace
from types import MethodType, SimpleNamespace

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgb
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure

from saturation import plots
from saturation import schema as S
from saturation.models import fit_plateau, transfer_data
from saturation.models.learning import diagnose_cardinality, diagnose_entropy, diagnose_reliability
from saturation.models.plateau import compare_plateau_models
from saturation.models.transfer import PARTS, QUANTITIES, TransferConfig, TransferFit
from saturation.simulate import ArmSpec, SeriesSpec, TransferSpec, simulate_series, simulate_transfer


# ---------------------------------------------------------------- fixtures (cheap fits)
@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def trials(small_plateau):
    return small_plateau[0]


@pytest.fixture(scope="module")
def plateau_fit(trials):
    """Two levels, unknown change point (exact sampler: well under a second)."""
    return fit_plateau(trials, seed=1)


@pytest.fixture(scope="module")
def outlier_fit(plateau_fit):
    """The same posterior with two observed means moved far out of the predictive band (one
    above at step index 2 of the first level, one below at index 5 of the second)."""
    y = plateau_fit.data.y.copy()
    y[0, 2] += 1.0
    y[1, 5] -= 1.0
    return replace(plateau_fit, data=replace(plateau_fit.data, y=y))


@pytest.fixture(scope="module")
def break_fit(trials):
    """A known break at step 6: the figure marks it, there is no change-point posterior."""
    return fit_plateau(trials, breakpoint=6, seed=1)


@pytest.fixture(scope="module")
def loo_table(trials):
    table, _ = compare_plateau_models(trials, models=("hinge-separate", "hinge-shared"), seed=1)
    return table


@pytest.fixture(scope="module")
def cardinality(trials):
    return diagnose_cardinality(trials, seed=1)


@pytest.fixture(scope="module")
def series():
    """Two runs of per-step metrics (pass@1, pass@8, entropy)."""
    a, _ = simulate_series(SeriesSpec(run="run-a", n_steps=12, prompts_per_step=16), seed=1)
    b, _ = simulate_series(
        SeriesSpec(run="run-b", n_steps=12, prompts_per_step=16, reward=((1, 0.2), (12, 0.4))), seed=2
    )
    return xr.concat([a, b], dim=S.RUN)


@pytest.fixture(scope="module")
def reliability(series):
    return diagnose_reliability(series, seed=1)


@pytest.fixture(scope="module")
def entropy(series):
    return diagnose_entropy(series, seed=1)


@pytest.fixture(scope="module")
def transfer_fit():
    """What ``plot_transfer`` and ``transfer_frame`` read of a TransferFit: the data (three
    arms, one without trials at its last two steps), the reference, posterior curves and
    task sds (random draws here, not a fit) and the crossover-step posterior."""
    spec = TransferSpec(
        arms=(
            ArmSpec("base", 128, ((1, 0.4), (8, 0.3)), ((1, 0.4), (8, 0.6))),
            ArmSpec("s85", 128, ((1, 0.4), (8, 0.4)), ((1, 0.55), (8, 0.45))),
            ArmSpec("s70", 96, ((1, 0.4), (8, 0.4)), ((1, 0.5), (8, 0.5))),
        ),
        prompts_per_step=4,
        samples_per_prompt=4,
        pool_size=60,
    )
    data = transfer_data(simulate_transfer(spec, seed=1)[0])
    rng = np.random.default_rng(0)
    n_arm, n_step = len(data.arms), len(data.steps)
    coords = {"chain": [0, 1], "draw": np.arange(50), S.ARM: data.arms, S.STEP: data.steps}
    post = {}
    for part in PARTS:
        post[f"{part}_curve"] = (("chain", "draw", S.ARM, S.STEP), rng.normal(-0.3, 0.3, (2, 50, n_arm, n_step)))
        post[f"{part}_task_sd"] = (("chain", "draw"), rng.uniform(0.2, 0.6, (2, 50)))
    idata = az.InferenceData(posterior=xr.Dataset(post, coords=coords))
    crossover = {
        "s85": {"mass": {"3": 0.2, "4": 0.5, "5": 0.1}, "p_no_crossover": 0.2, "mean": 4.0, "hdi": [3.0, 5.0]},
        "s70": {"mass": {"2": 0.05, "6": 0.15}, "p_no_crossover": 0.8, "mean": 5.0, "hdi": [2.0, 6.0]},
    }
    side = {"s85": {"p_positive": 0.99}, "s70": {"p_positive": 0.5}}  # s85 starts ahead, s70 level
    estimands = {"crossover_step": crossover, "initial": side, "last_step": side}
    fit = SimpleNamespace(idata=idata, data=data, config=TransferConfig(reference="base"), estimands=estimands)
    fit.decisions = MethodType(TransferFit.decisions, fit)  # the real decision rule on these estimands
    fit.frame = MethodType(TransferFit.frame, fit)
    fit.crossover = MethodType(TransferFit.crossover, fit)
    return fit


# ---------------------------------------------------------------- helpers
def _new_figure(plot, *args, **kwargs) -> Figure:
    """``plot`` without ``ax=``: a new figure."""
    before = set(plt.get_fignums())
    fig = plot(*args, **kwargs)
    assert isinstance(fig, Figure) and fig.number not in before
    return fig


def _into_ax(plot, *args, **kwargs):
    """``plot`` with ``ax=``: draws on that axes and returns its figure, no new figure or axes."""
    fig, ax = plt.subplots()
    before = set(plt.get_fignums())
    out = plot(*args, ax=ax, **kwargs)
    assert out is fig and fig.axes == [ax] and set(plt.get_fignums()) == before
    return ax


def _line(ax, label):
    found = [line for line in ax.lines if line.get_label() == label]
    assert len(found) == 1, (label, [line.get_label() for line in ax.lines])
    return found[0]


def _assert_xy(line, x, y):
    np.testing.assert_allclose(np.asarray(line.get_xdata(), float), np.asarray(x, float))
    np.testing.assert_allclose(np.asarray(line.get_ydata(), float), np.asarray(y, float))


def _assert_band(coll, x, low, high):
    """A fill_between band spans exactly [low, high] at every x."""
    assert isinstance(coll, PolyCollection)  # what fill_between returns
    v = np.concatenate([p.vertices for p in coll.get_paths()])
    for xi, lo, hi in zip(np.asarray(x, float), low, high, strict=True):
        at = v[np.isclose(v[:, 0], xi), 1]
        assert at.size and np.isclose(at.min(), lo) and np.isclose(at.max(), hi), (xi, lo, hi, at)


def _assert_errorbars(container, x, y, low, high, axis="y"):
    """Markers at (x, y) and error bars from ``low`` to ``high`` along ``axis``."""
    assert isinstance(container, ErrorbarContainer)
    data_line, _caps, (bars,) = container.lines
    _assert_xy(data_line, x, y)
    seg = np.array(bars.get_segments())  # (point, 2 ends, xy)
    k = 1 if axis == "y" else 0
    np.testing.assert_allclose(seg[:, 0, k], low)
    np.testing.assert_allclose(seg[:, 1, k], high)


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _by(frame, **where):
    mask = np.ones(len(frame), bool)
    for k, v in where.items():
        mask &= (frame[k] == v).to_numpy()
    return frame[mask]


# ---------------------------------------------------------------- plateau
def test_plateau_data_is_the_fits_curves(plateau_fit):
    frame = plots.plateau_data(plateau_fit)
    levels, steps = plateau_fit.data.levels, plateau_fit.data.steps
    assert list(dict.fromkeys(frame["level"])) == levels and len(frame) == len(levels) * len(steps)
    np.testing.assert_allclose(frame["observed"], plateau_fit.data.y.ravel())
    assert (frame["hdi_low"] <= frame["mean"]).all() and (frame["mean"] <= frame["hdi_high"]).all()
    for level in levels:
        mass = plateau_fit.estimands["levels"][level]["changepoint_mass"]
        sub = _by(frame, level=level)
        np.testing.assert_allclose(sub["p_changepoint"], [mass.get(str(int(s)), 0.0) for s in sub["step"]])
        assert sub["p_changepoint"].sum() == pytest.approx(1.0)


def test_plot_plateau_draws_one_panel_pair_per_level(plateau_fit):
    frame = plots.plateau_data(plateau_fit)
    levels = plateau_fit.data.levels
    fig = _new_figure(plots.plot_plateau, plateau_fit)
    axes = np.array(fig.axes).reshape(2, len(levels))
    for i, level in enumerate(levels):
        sub, top, bottom = _by(frame, level=level), axes[0, i], axes[1, i]
        assert top.get_title() == level
        _assert_band(top.collections[0], sub["step"], sub["hdi_low"], sub["hdi_high"])
        mean, observed, cp = top.lines
        _assert_xy(mean, sub["step"], sub["mean"])
        _assert_xy(observed, sub["step"], sub["observed"])
        assert mean.get_color() == plots.colour(i)
        # the change-point posterior mean, marked in both panels; its mass as bars below
        cp_mean = plateau_fit.estimands["levels"][level]["changepoint"]["mean"]
        for line in (cp, *bottom.lines):
            np.testing.assert_allclose(line.get_xdata(), [cp_mean, cp_mean])
        (bars,) = bottom.containers
        assert isinstance(bars, BarContainer) and len(bars) == len(sub)
        np.testing.assert_allclose([b.get_x() + b.get_width() / 2 for b in bars], sub["step"])
        np.testing.assert_allclose([b.get_height() for b in bars], sub["p_changepoint"])
    assert axes[0, 0].get_ylabel() == plateau_fit.data.response
    assert sorted(_legend(axes[0, 0])) == sorted([plots.HDI_LABEL, "posterior mean", "observed"])


def test_plot_plateau_marks_a_known_break(break_fit):
    """A known break has no change-point posterior: one row of panels, no P = 1 spike."""
    fig = _new_figure(plots.plot_plateau, break_fit, ylabel="F1")
    assert len(fig.axes) == len(break_fit.data.levels)
    for top in fig.axes:
        dashed = [line for line in top.lines if line.get_linestyle() == "--"]
        assert len(top.lines) == 3 and len(dashed) == 1  # curve, points, the break (no change-point line)
        np.testing.assert_allclose(dashed[0].get_xdata(), [6, 6])
    assert fig.axes[0].get_ylabel() == "F1"


def test_plot_plateau_into_an_axes(plateau_fit):
    frame = plots.plateau_data(plateau_fit)
    levels = plateau_fit.data.levels
    ax = _into_ax(plots.plot_plateau, plateau_fit, ylabel="metric")
    assert len(ax.collections) == len(levels) and len(ax.lines) == 2 * len(levels)
    for i, level in enumerate(levels):
        sub = _by(frame, level=level)
        _assert_band(ax.collections[i], sub["step"], sub["hdi_low"], sub["hdi_high"])
        _assert_xy(_line(ax, level), sub["step"], sub["mean"])
        _assert_xy(ax.lines[2 * i + 1], sub["step"], sub["observed"])
    assert _legend(ax) == levels and ax.get_ylabel() == "metric"


def test_slopes_data_is_the_fits_estimands(plateau_fit):
    frame = plots.slopes_data(plateau_fit)
    assert len(frame) == 2 * len(plateau_fit.data.levels)
    for row in frame.itertuples():
        e = plateau_fit.estimands["levels"][row.level][f"{row.segment}_slope"]
        assert (row.mean, row.hdi_low, row.hdi_high) == (e["mean"], *e["hdi"])


def _label_power(ax, prefix):
    """The power of ten a slope axis is drawn in, read from its label ("early slope
    ($10^{-2}$ f1 / step)"); the axis must carry no offset text."""
    fig = ax.get_figure()
    fig.canvas.draw()
    assert ax.xaxis.get_offset_text().get_text() == ""
    m = re.fullmatch(rf"{prefix}slope \((?:\$10\^\{{(-?\d+)\}}\$ )?f1 / step\)", ax.get_xlabel())
    assert m, ax.get_xlabel()
    return int(m.group(1) or 0)


def test_plot_slopes_one_panel_per_segment(plateau_fit):
    frame = plots.slopes_data(plateau_fit)
    levels = plateau_fit.data.levels
    ys = np.arange(len(levels))[::-1]
    fig = _new_figure(plots.plot_slopes, plateau_fit)
    assert len(fig.axes) == 2
    powers = []
    for seg, ax in zip(("early", "late"), fig.axes, strict=True):
        sub = _by(frame, segment=seg).set_index("level").loc[levels]
        scale = 10.0 ** _label_power(ax, f"{seg} ")
        powers.append(scale)
        _assert_xy(_line(ax, f"{seg} segment"), sub["mean"] / scale, ys)
        (hdis,) = [c for c in ax.collections if isinstance(c, LineCollection)]
        seg_xy = np.array(hdis.get_segments())
        np.testing.assert_allclose(seg_xy[:, :, 1], np.column_stack([ys, ys]))
        np.testing.assert_allclose(seg_xy[:, :, 0], sub[["hdi_low", "hdi_high"]].to_numpy() / scale)
        # the drawn numbers are in [-10, 10): the power of ten took the rest
        assert np.abs(seg_xy[:, :, 0]).max() < 10
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == levels


def test_plot_slopes_into_an_axes(plateau_fit):
    frame = plots.slopes_data(plateau_fit)
    levels = plateau_fit.data.levels
    ys = np.arange(len(levels))[::-1]
    ax = _into_ax(plots.plot_slopes, plateau_fit)
    hdis = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(hdis) == 2
    scale = 10.0 ** _label_power(ax, "")
    for seg, shift, coll in zip(("early", "late"), (0.12, -0.12), hdis, strict=True):
        sub = _by(frame, segment=seg).set_index("level").loc[levels]
        _assert_xy(_line(ax, f"{seg} segment"), sub["mean"] / scale, ys + shift)
        np.testing.assert_allclose(
            np.array(coll.get_segments())[:, :, 0], sub[["hdi_low", "hdi_high"]].to_numpy() / scale
        )
    assert _legend(ax) == ["early segment", "late segment"]
    assert [t.get_text() for t in ax.get_yticklabels()] == levels


def test_plot_plateaued_by_one_step_curve_per_level(plateau_fit):
    frame = plots.plateaued_by_data(plateau_fit)
    levels = plateau_fit.data.levels
    assert list(dict.fromkeys(frame["level"])) == levels and frame["p_plateaued"].between(0, 1).all()
    assert (frame["p_plateaued"] == 0).any()  # not a constant the figure could get right by accident
    new = _new_figure(plots.plot_plateaued_by, plateau_fit)
    assert len(new.axes) == 1
    for ax in (new.axes[0], _into_ax(plots.plot_plateaued_by, plateau_fit)):
        assert len(ax.lines) == len(levels) and _legend(ax) == levels
        for level in levels:
            sub = _by(frame, level=level)
            line = _line(ax, level)
            _assert_xy(line, sub["step"], sub["p_plateaued"])
            assert line.get_drawstyle() == "steps-post"
        assert ax.get_ylim() == (-0.02, 1.02)


def test_ppc_data_is_reproducible_and_its_coverage_consistent(plateau_fit):
    frame = plots.ppc_data(plateau_fit, seed=0)
    assert frame.equals(plots.ppc_data(plateau_fit, seed=0))
    assert not np.allclose(frame["predictive_mean"], plots.ppc_data(plateau_fit, seed=1)["predictive_mean"])
    inside = (frame["hdi_low"] <= frame["observed"]) & (frame["observed"] <= frame["hdi_high"])
    assert (frame["covered"] == inside).all()
    np.testing.assert_allclose(frame["observed"], plateau_fit.data.y.ravel())
    with pytest.raises(ValueError, match="Gaussian likelihood"):
        plots.ppc_data(SimpleNamespace(config=SimpleNamespace(likelihood="binomial")))


def test_ppc_data_does_not_cover_observations_outside_the_band(plateau_fit, outlier_fit):
    frame, odd = plots.ppc_data(plateau_fit, seed=0), plots.ppc_data(outlier_fit, seed=0)
    n_steps = len(plateau_fit.data.steps)
    above, below = 2, n_steps + 5
    assert odd.loc[above, "observed"] > odd.loc[above, "hdi_high"] and not odd.loc[above, "covered"]
    assert odd.loc[below, "observed"] < odd.loc[below, "hdi_low"] and not odd.loc[below, "covered"]
    rest = ~frame.index.isin([above, below])
    assert (odd.loc[rest, "covered"] == frame.loc[rest, "covered"]).all()
    same = ["level", "step", "predictive_mean", "hdi_low", "hdi_high"]  # the posterior did not change
    pd.testing.assert_frame_equal(odd[same], frame[same])


def test_plot_ppc_panels_and_into_an_axes(outlier_fit):
    fit = outlier_fit  # coverage below 100 %: the legend's share is computed, not a constant
    frame = plots.ppc_data(fit, seed=3)
    levels = fit.data.levels
    labels = [f"{lv}: {_by(frame, level=lv)['covered'].mean():.0%} inside" for lv in levels]
    assert not any(label.endswith(" 100% inside") for label in labels)
    fig = _new_figure(plots.plot_ppc, fit, seed=3)
    assert len(fig.axes) == len(levels)
    for level, label, ax in zip(levels, labels, fig.axes, strict=True):
        sub = _by(frame, level=level)
        _assert_band(ax.collections[0], sub["step"], sub["hdi_low"], sub["hdi_high"])
        _assert_xy(_line(ax, label), sub["step"], sub["observed"])
        assert _legend(ax) == [label]
    ax = _into_ax(plots.plot_ppc, fit, seed=3)
    assert len(ax.collections) == len(levels) and _legend(ax) == labels
    for i, level in enumerate(levels):
        sub = _by(frame, level=level)
        _assert_band(ax.collections[i], sub["step"], sub["hdi_low"], sub["hdi_high"])
        _assert_xy(_line(ax, labels[i]), sub["step"], sub["observed"])
    assert ax.get_ylabel() == f"{fit.data.response} (predictive {plots.HDI_LABEL})"


# ---------------------------------------------------------------- LOO
def test_loo_data_keeps_the_table_with_the_model_as_a_column(loo_table):
    frame = plots.loo_data(loo_table)
    assert list(frame["model"]) == list(loo_table.index)
    assert list(frame.columns[:8]) == ["model", "rank", "elpd_loo", "se", "elpd_diff", "dse", "weight", "warning"]
    assert list(frame.columns[8:]) == ["loo_method", "caveat"]
    np.testing.assert_allclose(frame["elpd_loo"], loo_table["elpd_loo"])
    plain = plots.loo_data(loo_table.drop(columns=["loo_method", "caveat"]))
    assert "loo_method" not in plain and "caveat" not in plain


def test_plot_loo_marks_unreliable_psis_estimates(loo_table):
    """Models whose PSIS-LOO has Pareto k > 0.7 get a cross on their ELPD and say so."""
    table = loo_table.copy()
    table["loo_method"] = "PSIS"
    table["warning"] = [True, False][: len(table)] + [False] * (len(table) - 2)
    frame = plots.loo_data(table)
    ys = np.arange(len(frame))[::-1]
    ax = _new_figure(plots.plot_loo, table).axes[0]
    (cross,) = [line for line in ax.lines if line.get_marker() == "x"]
    assert cross.get_label() == "Pareto k > 0.7 (unreliable)"
    _assert_xy(cross, frame["elpd_loo"][frame["warning"]], ys[frame["warning"].to_numpy()])
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0].endswith("(PSIS, k > 0.7)") and not labels[1].endswith("k > 0.7)")


@pytest.mark.parametrize("method", [True, False], ids=["with-loo-method", "without"])
def test_plot_loo_draws_elpd_and_differences(loo_table, method):
    table = loo_table if method else loo_table.drop(columns=["loo_method", "caveat"])
    frame = plots.loo_data(table)
    ys = np.arange(len(frame))[::-1]
    best = frame["elpd_loo"].iloc[0]
    bad = frame["warning"].astype(bool).to_numpy()  # PSIS with Pareto k > 0.7: marked in the label and by a cross
    labels = (
        [
            f"{m} ({how}{', k > 0.7' if b else ''})"
            for m, how, b in zip(frame["model"], frame["loo_method"], bad, strict=True)
        ]
        if method
        else [f"{m}{' (k > 0.7)' if b else ''}" for m, b in zip(frame["model"], bad, strict=True)]
    )
    for ax in (_new_figure(plots.plot_loo, table).axes[0], _into_ax(plots.plot_loo, table)):
        elpd, diff = ax.containers
        e, s = frame["elpd_loo"], frame["se"]
        _assert_errorbars(elpd, e, ys, e - s, e + s, axis="x")
        d = best - frame["elpd_diff"]
        _assert_errorbars(diff, d, ys - 0.15, d - frame["dse"], d + frame["dse"], axis="x")
        assert [t.get_text() for t in ax.get_yticklabels()] == labels
        crosses = ["Pareto k > 0.7 (unreliable)"] if bad.any() else []
        assert _legend(ax) == [*crosses, "ELPD +- SE", "best - difference +- SE"]  # lines before error bars


# ---------------------------------------------------------------- diagnostics
def test_cardinality_data_is_the_diagnosis(cardinality):
    frame = plots.cardinality_data(cardinality)
    levels = list(cardinality.numbers["levels"])
    assert len(frame) == len(levels) * 3 * 2
    for row in frame.itertuples():
        e = cardinality.numbers["levels"][row.level][row.quantity][row.when]
        assert (row.mean, row.hdi_low, row.hdi_high) == (e["mean"], *e["hdi"])


def _assert_cardinality(ax, frame, quantities, levels):
    x = np.arange(len(levels))
    containers = iter(ax.containers)
    for quantity in quantities:
        offset = {S.PRECISION: -0.15, S.RECALL: 0.15, "pred_over_gold": 0.0}[quantity]
        for when, shift in (("start", -0.05), ("end", 0.05)):
            sub = _by(frame, quantity=quantity, when=when).set_index("level").loc[levels]
            c = next(containers)
            name = "predicted/gold" if quantity == "pred_over_gold" else quantity
            assert c.get_label() == f"{name} {when}"
            _assert_errorbars(c, x + offset + shift, sub["mean"], sub["hdi_low"], sub["hdi_high"])
    assert next(containers, None) is None
    assert [t.get_text() for t in ax.get_xticklabels()] == levels


def test_plot_cardinality_both_panels_and_into_an_axes(cardinality):
    frame = plots.cardinality_data(cardinality)
    levels = list(cardinality.numbers["levels"])
    fig = _new_figure(plots.plot_cardinality, cardinality)
    rates, ratio = fig.axes
    _assert_cardinality(rates, frame, (S.PRECISION, S.RECALL), levels)
    _assert_cardinality(ratio, frame, ("pred_over_gold",), levels)
    np.testing.assert_allclose(ratio.lines[-1].get_ydata(), [1.0, 1.0])  # predicted = gold
    ax = _into_ax(plots.plot_cardinality, cardinality)
    _assert_cardinality(ax, frame, (S.PRECISION, S.RECALL), levels)
    assert ax.get_ylabel() == "precision / recall"


def test_series_data_is_the_long_form_of_the_series(series):
    frame = plots.series_data(series, ["reward_mean", "pass_at_k"])
    assert list(frame.columns) == [S.RUN, S.STEP, "variable", "value"]
    assert len(frame) == 2 * series.sizes[S.RUN] * series.sizes[S.STEP]
    for row in frame.sample(10, random_state=0).itertuples():
        assert row.value == float(series[row.variable].sel({S.RUN: row.run, S.STEP: row.step}))
    holes = series.copy(deep=True)
    holes["reward_mean"][0, 3] = np.nan
    assert len(plots.series_data(holes, ["reward_mean"])) == len(frame) // 2 - 1  # missing steps dropped


def _assert_series(ax, frame, diag, run, variables, labels):
    """Observed series and the fitted trend band: the band is the diagnosis' own (and its
    ends are the reported start and end)."""
    for var, label in zip(variables, labels, strict=True):
        sub = _by(frame, run=run, variable=var)
        observed = _line(ax, f"{label}, observed")
        _assert_xy(observed, sub[S.STEP], sub["value"])
        trend = _line(ax, f"{label}, trend (94 % HDI)")
        band = diag.bands[f"{var}/{run}"]
        _assert_xy(trend, band["step"], band["mean"])
        rgb = to_rgb(trend.get_color())
        (coll,) = [c for c in ax.collections if np.allclose(c.get_facecolor()[0][:3], rgb)]
        _assert_band(coll, band["step"], band["hdi_low"], band["hdi_high"])
        num = diag.numbers["runs"][run][var]
        np.testing.assert_allclose(band["mean"].iloc[[0, -1]], [num["start"]["mean"], num["end"]["mean"]])
        np.testing.assert_allclose(band["step"], sub[S.STEP])


@pytest.mark.parametrize("kind", ["pass_at_k", "entropy"])
def test_plot_per_run_series_panels_and_into_an_axes(series, reliability, entropy, kind):
    if kind == "pass_at_k":
        plot, diag, variables = plots.plot_pass_at_k, reliability, ["reward_mean", "pass_at_k"]
        labels = ["pass@1 (mean reward)", "pass@8"]
    else:
        plot, diag, variables, labels = plots.plot_entropy, entropy, ["policy_entropy"], ["policy entropy"]
    frame = plots.series_data(series, variables)
    runs = [str(r) for r in series[S.RUN].values]
    fig = _new_figure(plot, series, diag)
    assert [ax.get_title() for ax in fig.axes] == runs
    for run, ax in zip(runs, fig.axes, strict=True):
        _assert_series(ax, frame, diag, run, variables, labels)
        assert len(ax.lines) == 2 * len(variables) and len(ax.collections) == len(variables)
    # one legend for all panels, in the figure
    # one short legend: a colour per series, then the two line styles
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [*labels, "observed", "trend (94 % HDI band)"]
    ax = _into_ax(plot, series, diag)
    for run in runs:
        _assert_series(ax, frame, diag, run, variables, [f"{run} {lab}" for lab in labels])
    assert _legend(ax) == [
        f"{run} {lab}, {what}" for run in runs for lab in labels for what in ("observed", "trend (94 % HDI)")
    ]


@pytest.fixture(scope="module")
def components():
    """A composite-reward run beside a plain one, and its components' diagnosis."""
    from saturation.models.learning import ComponentsConfig, diagnose_components

    comps = (("environment/pass_ratio", 0.7, ((1, 0.45),), 10), ("environment/tag_f1", 0.3, ((1, 0.55),), 4))
    algo, _ = simulate_series(SeriesSpec(run="algo", n_steps=12, prompts_per_step=16, components=comps), seed=3)
    plain, _ = simulate_series(SeriesSpec(run="run-a", n_steps=12, prompts_per_step=16), seed=1)
    both = xr.concat([algo, plain], dim=S.RUN, join="outer")
    config = ComponentsConfig(components=("environment/pass_ratio", "environment/tag_f1"), weights=(0.7, 0.3))
    return both, diagnose_components(both, config, seed=1)


def test_plot_components_one_panel_per_diagnosed_run(components):
    series, diag = components
    variables = ["environment_pass_ratio", "environment_tag_f1", "reward_mean"]
    labels = ["environment/pass_ratio", "environment/tag_f1", "reward/avg_raw_reward"]
    frame = plots.components_data(series, diag)
    assert set(frame[S.RUN]) == {"algo"} and set(frame["variable"]) == set(variables)
    fig = _new_figure(plots.plot_components, series, diag)
    assert [ax.get_title() for ax in fig.axes] == ["algo"]  # not the run without components
    _assert_series(fig.axes[0], frame, diag, "algo", variables, labels)
    assert _overlaps(fig) == []


# ---------------------------------------------------------------- transfer
def test_transfer_data_skips_steps_without_trials_and_gaps_to_the_reference(transfer_fit):
    frame = plots.transfer_data(transfer_fit)
    data = transfer_fit.data
    assert len(frame) == int(data.observed.sum()) * len(QUANTITIES)
    assert set(_by(frame, arm="s70")["step"]) == set(data.steps[:6])
    assert _by(frame, arm="base")["gap_mean"].isna().all() and not _by(frame, arm="s85")["gap_mean"].isna().any()
    emp = _by(frame, arm="s85", quantity=S.GRADED_ONLY)["empirical"]
    np.testing.assert_allclose(emp, data.empirical[S.GRADED_ONLY].sel({S.ARM: "s85"}))


def test_plot_transfer_curves_gaps_and_crossover(transfer_fit):
    """Top row: the three quantities' curves per arm; bottom row: the gaps to the reference;
    the crossover HDI shaded on the all-rollout gap, for arms that probably cross."""
    full = plots.transfer_data(transfer_fit)
    arms = list(dict.fromkeys(full["arm"]))
    others = [a for a in arms if a != "base"]
    fig = _new_figure(plots.plot_transfer, transfer_fit)
    assert len(fig.axes) == 6
    top, bottom = fig.axes[:3], fig.axes[3:]
    for c, q in enumerate(plots.TRANSFER_LABELS):
        frame = _by(full, quantity=q)
        curves, gaps = top[c], bottom[c]
        assert curves.get_ylabel() == plots.TRANSFER_LABELS[q]
        assert len(curves.collections) == len(arms)
        for i, arm in enumerate(arms):
            sub = _by(frame, arm=arm)
            _assert_band(curves.collections[i], sub["step"], sub["hdi_low"], sub["hdi_high"])
            _assert_xy(_line(curves, arm), sub["step"], sub["mean"])
            _assert_xy(curves.lines[2 * i + 1], sub["step"], sub["empirical"])
        assert len(gaps.collections) == len(others)
        for i, arm in enumerate(others):
            sub = _by(frame, arm=arm)
            _assert_band(gaps.collections[i], sub["step"], sub["gap_hdi_low"], sub["gap_hdi_high"])
            _assert_xy(_line(gaps, f"{arm} - base"), sub["step"], sub["gap_mean"])
        spans = [p for p in gaps.patches if p.get_width() > 0]
        if q == S.ALL_ROLLOUT:  # the rule names s85's crossover (P = 0.8), not s70's (0.2): one span
            (span,) = spans
            np.testing.assert_allclose([span.get_x(), span.get_x() + span.get_width()], [3.0, 5.0])
        else:
            assert spans == []
    (legend,) = fig.legends  # the arms' legend sits above the panels, clear of the curves
    assert [t.get_text() for t in legend.get_texts()] == arms and legend.get_title().get_text() == "94 % HDI bands"
    assert top[0].get_legend() is None and bottom[0].get_legend() is None
    for arm in others:  # a gap line wears its arm's colour (the legend above names it)
        assert _line(bottom[0], f"{arm} - base").get_color() == _line(top[0], arm).get_color()


def test_plot_transfer_into_an_axes_draws_the_curves_of_one_quantity(transfer_fit):
    frame = _by(plots.transfer_data(transfer_fit), quantity=S.GRADED_ONLY)
    arms = list(dict.fromkeys(frame["arm"]))
    ax = _into_ax(plots.plot_transfer, transfer_fit, quantity=S.GRADED_ONLY)
    assert _legend(ax) == arms and len(ax.lines) == 2 * len(arms) and not ax.containers
    for i, arm in enumerate(arms):
        sub = _by(frame, arm=arm)
        _assert_band(ax.collections[i], sub["step"], sub["hdi_low"], sub["hdi_high"])
        _assert_xy(_line(ax, arm), sub["step"], sub["mean"])
        _assert_xy(ax.lines[2 * i + 1], sub["step"], sub["empirical"])
    assert ax.get_ylabel() == "graded-only reward"


# ---------------------------------------------------------------- style and files
def test_colour_cycles_the_palette_and_style_is_a_context():
    assert [plots.colour(i) for i in range(len(plots.PALETTE) + 2)] == [*plots.PALETTE, *plots.PALETTE[:2]]
    before = plt.rcParams["pdf.fonttype"]
    with plots.style():
        assert plt.rcParams["pdf.fonttype"] == 42 and plt.rcParams["font.size"] == 8
    assert plt.rcParams["pdf.fonttype"] == before


def _png_dpi(png: bytes) -> float:
    i = png.index(b"pHYs")
    x_per_metre, _, unit = struct.unpack(">IIB", png[i + 4 : i + 13])
    assert unit == 1  # metres
    return x_per_metre * 0.0254


def test_save_figure_writes_a_vector_pdf_and_a_300_dpi_png(tmp_path, plateau_fit):
    fig = plots.plot_plateau(plateau_fit)
    paths = plots.save_figure(fig, tmp_path / "curves")
    assert paths == [tmp_path / "curves.pdf", tmp_path / "curves.png"]
    pdf, png = (p.read_bytes() for p in paths)
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and _png_dpi(png) == pytest.approx(300, abs=0.1)
    assert b"/CreationDate" not in pdf
    # reproducible bytes: the same figure drawn and saved again is the same file
    again = plots.save_figure(plots.plot_plateau(plateau_fit), tmp_path / "again")
    assert again[0].read_bytes() == pdf
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.pdf", "again.png", "curves.pdf", "curves.png"]


def _font_subtypes(pdf: bytes) -> set[str]:
    return {m.decode() for m in re.findall(rb"/Subtype\s*/(\w+)", pdf)} & {
        "Type1",
        "Type3",
        "TrueType",
        "Type0",
        "CIDFontType0",
        "CIDFontType2",
    }


def test_saved_pdf_embeds_truetype_fonts_not_type3(tmp_path, plateau_fit):
    fig = plots.plot_plateau(plateau_fit)
    pdf = plots.save_figure(fig, tmp_path / "curves")[0].read_bytes()
    fonts = _font_subtypes(pdf)
    assert "Type3" not in fonts and fonts & {"TrueType", "CIDFontType2"}, fonts


def test_the_font_check_sees_truetype_when_saved_inside_the_style(tmp_path, plateau_fit):
    """The check of the test above, on a PDF saved with the package style in effect (what
    ``save_figure`` should do itself): TrueType (CID) fonts, no Type 3."""
    fig = plots.plot_plateau(plateau_fit)
    with plots.style():
        pdf = plots.save_figure(fig, tmp_path / "curves")[0].read_bytes()
    fonts = _font_subtypes(pdf)
    assert "Type3" not in fonts and "CIDFontType2" in fonts, fonts


# ---------------------------------------------------------------- no overlapping text
def _texts(fig):
    """Every drawn, non-empty text of the figure with its window bounding box: titles,
    labels, legends, annotations, and the tick labels of ticks inside the view (matplotlib
    keeps label objects for ticks outside it that are never drawn)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    tick_labels, drawn = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            pad = 1e-9 * max(abs(lo), abs(hi), 1.0)
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                tick_labels |= {id(tick.label1), id(tick.label2)}
                if lo - pad <= tick.get_loc() <= hi + pad:
                    drawn += [lab for lab in (tick.label1, tick.label2) if lab.get_visible()]
    texts = [t for t in fig.findobj(plt.Text) if id(t) not in tick_labels] + drawn
    out = []
    for t in texts:
        if t.get_visible() and t.get_text().strip():
            bb = t.get_window_extent(renderer)
            if bb.width > 0 and bb.height > 0:
                out.append((t, bb))
    return out


def _overlaps(fig, tol=1.0):
    texts = _texts(fig)
    bad = []
    for i, (a, ba) in enumerate(texts):
        for b, bb in texts[i + 1 :]:
            w = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            h = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            if w > tol and h > tol:
                bad.append((a.get_text(), b.get_text()))
    return bad


def test_overlap_check_finds_overlapping_text():
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "one label")
    ax.text(0.5, 0.5, "another")
    assert _overlaps(fig) == [("one label", "another")]


@pytest.mark.parametrize(
    "make",
    [
        "plateau",
        "plateau_break",
        "slopes",
        "plateaued_by",
        "ppc",
        "loo",
        "cardinality",
        "pass_at_k",
        "entropy",
        "transfer",
    ],
)
def test_no_text_overlaps_in_any_figure(make, request):
    """Labels, ticks, titles and legends of every figure keep clear of each other."""
    get = request.getfixturevalue
    figures = {
        "plateau": lambda: plots.plot_plateau(get("plateau_fit"), ylabel="graded-only mean F1"),
        "plateau_break": lambda: plots.plot_plateau(get("break_fit"), ylabel="graded-only mean F1"),
        "slopes": lambda: plots.plot_slopes(get("plateau_fit")),
        "plateaued_by": lambda: plots.plot_plateaued_by(get("plateau_fit")),
        "ppc": lambda: plots.plot_ppc(get("outlier_fit")),
        "loo": lambda: plots.plot_loo(get("loo_table")),
        "cardinality": lambda: plots.plot_cardinality(get("cardinality")),
        "pass_at_k": lambda: plots.plot_pass_at_k(get("series"), get("reliability")),
        "entropy": lambda: plots.plot_entropy(get("series"), get("entropy")),
        "transfer": lambda: plots.plot_transfer(get("transfer_fit")),
    }
    fig = figures[make]()
    assert _overlaps(fig) == []


# ---------------------------------------------------------------- saturation curves (compare)
@pytest.fixture(scope="module")
def sigmoid_fit():
    """A SigmoidFit with a made-up posterior (random draws around two curves, no sampler) on
    two simulated arms of different lengths."""
    from saturation.models import sigmoid
    from saturation.simulate import SigmoidArm, SigmoidArmsSpec, simulate_sigmoid_arms

    spec = SigmoidArmsSpec(
        arms=(SigmoidArm("a", n_steps=12), SigmoidArm("b", asymptote=0.6, n_steps=8)),
        n_steps=12,
        prompts_per_step=4,
        samples_per_prompt=4,
    )
    data = sigmoid.arm_steps(simulate_sigmoid_arms(spec, seed=2)[0])
    rng = np.random.default_rng(1)
    shape = (2, 40, 2)
    post = {
        "r0": rng.uniform(0.05, 0.15, shape),
        "asymptote": rng.uniform(0.4, 0.7, shape),
        "efficiency": rng.uniform(1.0, 2.0, shape),
        "midpoint": rng.uniform(6.0, 12.0, shape),
    }
    idata = az.from_dict(posterior=post, coords={S.ARM: data.arms}, dims={k: [S.ARM] for k in post})
    asym = {
        arm: {"mean": float(post["asymptote"][..., i].mean()), "hdi": [0.41, 0.69]} for i, arm in enumerate(data.arms)
    }
    est = {"arms": {arm: {"asymptote": a} for arm, a in asym.items()}}
    return sigmoid.SigmoidFit(idata, sigmoid.SigmoidConfig(horizon=5), data, est, {"converged": True}, {})


def test_saturation_curves_on_a_compute_axis_are_drawn_against_the_compute(sigmoid_fit):
    from dataclasses import replace

    from saturation.models import sigmoid
    from saturation.simulate import SigmoidArm, SigmoidArmsSpec, simulate_arm_step_metrics, simulate_sigmoid_arms

    spec = SigmoidArmsSpec(
        arms=(SigmoidArm("a", n_steps=12, seconds_per_step=500.0), SigmoidArm("b", n_steps=8, seconds_per_step=900.0)),
        n_steps=12,
        prompts_per_step=4,
        samples_per_prompt=4,
    )
    trials, _ = simulate_sigmoid_arms(spec, seed=2)
    data = sigmoid.arm_steps(trials, metrics=simulate_arm_step_metrics(spec, seed=2, cv=0.0)[0])
    post = sigmoid_fit.idata.posterior.copy()
    post["midpoint"] = post["midpoint"] * 500.0  # the made-up midpoints in compute units
    fit = replace(sigmoid_fit, idata=az.InferenceData(posterior=post), data=data)
    frame = plots.saturation_curves_data(fit)
    b = _by(frame, arm="b")
    np.testing.assert_allclose(b["x"], 900.0 * b["step"])  # through step 8, then the same rate
    fig = _new_figure(plots.plot_saturation_curves, fit)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "cumulative timing/step (compute)"
    seen = _by(frame, arm="b", forecast=False)
    _assert_xy(_line(ax, "b"), seen["x"], seen["mean"])
    assert _overlaps(fig) == []


def test_saturation_curves_data_is_the_fits_curve_over_data_and_horizon(sigmoid_fit):
    frame = plots.saturation_curves_data(sigmoid_fit)
    a, b = _by(frame, arm="a"), _by(frame, arm="b")
    assert list(a["step"]) == list(range(1, 18)) and list(b["step"]) == list(range(1, 14))  # last + 5
    assert list(a["forecast"]) == [False] * 12 + [True] * 5 and b["observed"].iloc[8:].isna().all()
    np.testing.assert_allclose(a["observed"].iloc[:12], sigmoid_fit.data.mean[0])
    draws = curve_draws_of(sigmoid_fit, 1.0)
    assert a["mean"].iloc[0] == pytest.approx(draws[:, 0].mean())
    assert (a["hdi_low"] <= a["mean"]).all() and (a["mean"] <= a["hdi_high"]).all()
    assert (a["asymptote_low"] == 0.41).all() and (a["asymptote_high"] == 0.69).all()


def curve_draws_of(fit, x):
    from saturation.models.sigmoid import curve_draws

    return curve_draws(fit.idata, np.array([x]))[:, :, 0]


def test_plot_saturation_curves_draws_each_arm_its_band_forecast_and_ceiling(sigmoid_fit):
    fig = _new_figure(plots.plot_saturation_curves, sigmoid_fit)
    ax = fig.axes[0]
    frame = plots.saturation_curves_data(sigmoid_fit)
    assert _legend(ax) == ["a", "b"]
    for arm in ["a", "b"]:
        seen = _by(frame, arm=arm, forecast=False)
        _assert_xy(_line(ax, arm), seen["step"], seen["mean"])
    # the ceilings in their own panel, not at steps of the data axis (issue 43)
    assert not [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    side = fig.axes[1]
    bars = [c for c in side.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2 and side.get_xlabel() == "ceiling" and not side.get_xticks().size
    _assert_errorbars(bars[1], [1], [_by(frame, arm="b")["asymptote"].iloc[0]], [0.41], [0.69])
    # the dotted lines at each posterior mean ceiling that the caption promises
    dotted = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == ":")
    assert dotted == pytest.approx(sorted(_by(frame, arm=a)["asymptote"].iloc[0] for a in ["a", "b"]))
    ax2 = _into_ax(plots.plot_saturation_curves, sigmoid_fit)
    assert _legend(ax2) == ["a", "b"]


def test_data_strings_with_dollars_are_drawn_as_text(tmp_path):
    """A run, arm or level name holding ``$`` (or a mathtext command) is text in the
    package's style: the figure draws and saves (issue 41: it failed in mathtext)."""
    import matplotlib.pyplot as plt

    with plots.style():
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1], label="arm $x^{ and $\\frac{")
        ax.set_yticks([0, 1], ["$lvl", "a$b$\\sqrt"])
        ax.set_title("run $\\undefined{$")
        ax.legend()
    plots.save_figure(fig, tmp_path / "dollars")
    plt.close(fig)
    assert (tmp_path / "dollars.png").stat().st_size > 0 and (tmp_path / "dollars.pdf").stat().st_size > 0
