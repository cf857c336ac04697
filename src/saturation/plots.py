"""Paper figures: one consistent, colour-blind-safe style; vector PDF and PNG.

Every ``plot_*`` function is keyword-only after the fitted object, accepts ``ax=`` (draw
into an existing axes; the compact one-panel form) and returns the figure; its sibling
``*_data`` returns the plotted numbers as a DataFrame. Bands are 94 % HDIs
(:data:`saturation.schema.HDI_PROB`).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
import xarray as xr
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from saturation import schema as S
from saturation._lazy import held_idata
from saturation.files import write_atomic
from saturation.models.sampling import hdi_columns

#: Okabe-Ito colours (colour-blind safe), in the order levels/arms/runs are drawn
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
#: widths in inches: one column / full page of a two-column paper
COLUMN, PAGE = 3.4, 7.0
STYLE: dict[str, Any] = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 3,
    "legend.frameon": False,
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
    "figure.dpi": 150,
    "axes.prop_cycle": cycler(color=list(PALETTE)),
    # data strings (run, arm, level names) are drawn as text, never parsed as mathtext: a "$"
    # in a name would otherwise fail the figure; the one mathtext label asks for it itself
    "text.parse_math": False,
}
BAND_ALPHA = 0.25
HDI_LABEL = S.HDI_LABEL


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The package's figure style (a matplotlib rc context)."""
    with mpl.rc_context(STYLE):  # type: ignore[arg-type]
        yield


def _figure(ax: Axes | None, width: float, height: float) -> tuple[Figure, Axes]:
    import matplotlib.pyplot as plt

    if ax is not None:
        fig = ax.get_figure()
        assert isinstance(fig, Figure)
        return fig, ax
    fig, new_ax = plt.subplots(figsize=(width, height), layout="constrained")
    return fig, new_ax


def _panels(ax: Axes | None, n: int, width: float, height: float, *, sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """``n`` side-by-side panels in a new figure, or ``ax`` itself ``n`` times (the
    compact one-panel form of the ``ax=`` argument)."""
    import matplotlib.pyplot as plt

    if ax is not None:
        fig, _ = _figure(ax, COLUMN, height)
        return fig, [ax] * n
    fig, axes = plt.subplots(1, n, figsize=(width, height), sharey=sharey, squeeze=False, layout="constrained")
    return fig, list(axes[0])


def save_figure(fig: Figure, stem: str | Path) -> list[Path]:
    """Write ``stem.pdf`` (vector, TrueType fonts) and ``stem.png`` (300 dpi); return both paths.

    Saved inside :func:`style`: the PDF font type (42, TrueType: journals reject Type 3)
    and the tight bounding box are savefig-time settings, so they must be in force here,
    not only while drawing.
    """
    stem = Path(stem)
    pdf, png = stem.with_name(f"{stem.name}.pdf"), stem.with_name(f"{stem.name}.png")  # a stem may hold dots
    engine = fig.get_layout_engine()
    with style():
        # the layout is computed once: a layout engine (constrained) re-runs at every draw,
        # twice a save with the tight bounding box, and was half of the save's time
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
        try:
            for path, kwargs in (
                (pdf, {"metadata": {"CreationDate": None}}),  # reproducible bytes: no time stamp
                (png, {"dpi": 300}),
            ):
                buf = io.BytesIO()
                fig.savefig(buf, format=path.suffix[1:], **kwargs)
                write_atomic(path, buf.getvalue())
        finally:
            fig.set_layout_engine(engine)
    return [pdf, png]


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


# ====================================================================== plateau
def plateau_data(fit: Any) -> pd.DataFrame:
    """Per (level, step): observed mean, posterior mean curve, 94 % band, P(change point)."""

    return fit.frame()


def plot_plateau(fit: Any, *, ax: Axes | None = None, ylabel: str | None = None) -> Figure:
    """Metric by step per level: observed means, posterior mean and 94 % band, the
    change-point posterior under each panel. With ``ax``: every level's curve on it.

    Parameters
    ----------
    fit : PlateauFit
        A plateau fit (:func:`saturation.fit_plateau`).
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.
    ylabel : str, optional
        The y axis label (default: the fitted response's name).

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    import matplotlib.pyplot as plt

    frame = plateau_data(fit)
    levels = list(dict.fromkeys(frame["level"]))
    ylabel = ylabel or fit.data.response
    with style():
        if ax is not None:
            fig, _ = _figure(ax, COLUMN, 2.2)
            for i, level in enumerate(levels):
                _curve(ax, frame[frame["level"] == level], colour(i), level)
            ax.set_xlabel("step")
            ax.set_ylabel(ylabel)
            ax.legend()
            return fig
        known = fit.config.breakpoint is not None  # no change-point posterior to draw
        fig, axes = plt.subplots(
            1 if known else 2,
            len(levels),
            figsize=(PAGE if len(levels) > 1 else COLUMN, 2.0 if known else 2.7),
            squeeze=False,
            sharex=True,
            layout="constrained",
            height_ratios=None if known else (3, 1),
        )
        for i, level in enumerate(levels):
            sub = frame[frame["level"] == level]
            top = axes[0, i]
            _curve(top, sub, colour(i), None)
            top.set_title(level)
            est = fit.levels()[level]
            if known:
                top.axvline(fit.config.breakpoint, color="0.3", lw=0.7, ls="--", label="known break")
                top.set_xlabel("step")
                if i == 0:
                    top.set_ylabel(ylabel)
                continue
            bottom = axes[1, i]
            if est.changepoint is not None:
                for a in (top, bottom):
                    a.axvline(est.changepoint.mean, color="0.3", lw=0.7, ls=":")
            bottom.bar(sub["step"], sub["p_changepoint"], width=1.0, color=colour(i), alpha=0.7)
            bottom.set_ylim(0, 1)
            bottom.set_yticks([0, 0.5, 1])
            bottom.set_xlabel("step")
            if i == 0:
                top.set_ylabel(ylabel)
                bottom.set_ylabel("P(change\npoint)", fontsize=7)
        fig.align_ylabels(axes[:, 0])
        axes[0, 0].legend(loc="lower right")
    return fig


def _curve(ax: Axes, sub: pd.DataFrame, colour: str, label: str | None) -> None:
    ax.fill_between(
        sub["step"],
        sub["hdi_low"],
        sub["hdi_high"],
        color=colour,
        alpha=BAND_ALPHA,
        lw=0,
        label=None if label else HDI_LABEL,
    )
    ax.plot(sub["step"], sub["mean"], color=colour, label=label or "posterior mean")
    ax.plot(
        sub["step"],
        sub["observed"],
        "o",
        color=colour,
        ms=2,
        alpha=0.6,
        mec="none",
        label=None if label else "observed",
    )


def slopes_data(fit: Any) -> pd.DataFrame:
    """Early and late slope per level: mean and 94 % HDI (metric units per step)."""
    rows = []
    for level, est in fit.levels().items():
        for seg in ("early", "late"):
            e = getattr(est, f"{seg}_slope")
            rows.append({"level": level, "segment": seg, "mean": e.mean, "hdi_low": e.hdi[0], "hdi_high": e.hdi[1]})
    return pd.DataFrame(rows)


def plot_slopes(fit: Any, *, ax: Axes | None = None) -> Figure:
    """Forest plot of the slopes per level with their 94 % HDIs: early and late segments in
    separate panels (their scales differ by orders of magnitude). With ``ax``: both on it.

    Parameters
    ----------
    fit : PlateauFit
        A plateau fit (:func:`saturation.fit_plateau`).
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    import matplotlib.pyplot as plt

    frame = slopes_data(fit)
    levels = list(dict.fromkeys(frame["level"]))
    with style():
        if ax is None:
            fig, axes = plt.subplots(
                1, 2, figsize=(COLUMN * 1.5, 0.45 + 0.28 * len(levels)), sharey=True, layout="constrained"
            )
            panels = list(zip(("early", "late"), axes, strict=True))
        else:
            fig, _ = _figure(ax, COLUMN, 2.0)
            panels = [("early", ax), ("late", ax)]
        ys = np.arange(len(levels))[::-1]
        unit = f"{fit.data.response} / step"
        # one power of ten per axes, in the label ("10^-4 f1 / step"), never as offset text
        scales = {
            id(a): _power(frame.loc[frame["segment"].isin([g for g, b in panels if b is a]), ["hdi_low", "hdi_high"]])
            for _, a in panels
        }
        for k, (seg, a) in enumerate(panels):
            sub = frame[frame["segment"] == seg].set_index("level").loc[levels]
            e = scales[id(a)]
            shift = 0.0 if ax is None else (0.12 if seg == "early" else -0.12)
            a.hlines(ys + shift, sub["hdi_low"] / 10.0**e, sub["hdi_high"] / 10.0**e, color=colour(k), lw=1.5)
            a.plot(sub["mean"] / 10.0**e, ys + shift, "o", color=colour(k), label=f"{seg} segment")
            a.axvline(0, color="0.4", lw=0.7)
            scale = f"$10^{{{e}}}$ " if e else ""
            label = f"{seg + ' ' if ax is None else ''}slope ({scale}{unit.replace('$', chr(92) + '$')})"
            a.set_xlabel(label, parse_math=bool(scale))
        panels[0][1].set_yticks(ys, levels)
        if ax is not None:
            ax.legend()
        fig.suptitle(f"slopes ({HDI_LABEL})", fontsize=8)
    return fig


def _power(values: Any) -> int:
    """The power of ten (a multiple of 1, at most 0) that brings the largest |value| into [1, 10)."""
    arr = np.abs(np.asarray(values, dtype=float))
    top = float(np.nanmax(arr)) if arr.size and np.isfinite(arr).any() else 0.0
    return min(int(np.floor(np.log10(top))), 0) if top > 0 else 0


def plateaued_by_data(fit: Any) -> pd.DataFrame:
    """P(change point <= t and late gain inside the ROPE) per level and step t."""
    rows = [
        {"level": level, "step": int(step), "p_plateaued": p}
        for level, est in fit.levels().items()
        for step, p in est.extra["p_plateaued_by_step"].items()
    ]
    return pd.DataFrame(rows)


def plot_plateaued_by(fit: Any, *, ax: Axes | None = None) -> Figure:
    """Posterior probability that each level has plateaued by step t.

    Parameters
    ----------
    fit : PlateauFit
        A plateau fit (:func:`saturation.fit_plateau`).
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    frame = plateaued_by_data(fit)
    with style():
        fig, ax = _figure(ax, COLUMN, 2.0)
        for i, level in enumerate(dict.fromkeys(frame["level"])):
            sub = frame[frame["level"] == level]
            ax.step(sub["step"], sub["p_plateaued"], where="post", color=colour(i), label=level)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("step t")
        ax.set_ylabel("P(plateaued by t)")
        ax.legend()
    return fig


def ppc_data(fit: Any, *, seed: int = 0) -> pd.DataFrame:
    """Posterior predictive check of the per-step means (Gaussian likelihood): the
    observed mean, the predictive mean and 94 % interval, and whether it covers the data.

    Replicates: mean curve + N(0, s_t^2/n_t + tau^2) per step and draw."""

    if fit.config.likelihood != "gaussian":
        raise ValueError("the posterior predictive check is implemented for the Gaussian likelihood")
    rng = np.random.default_rng(seed)
    mu = fit.curve_draws()  # (samples, levels, steps)
    tau = held_idata(fit).posterior["tau"].stack(sample=("chain", "draw")).transpose("sample", ...).to_numpy()
    sd = np.sqrt(fit.data.var_mean[None] + tau[:, :, None] ** 2)
    rep = mu + rng.standard_normal(mu.shape) * sd
    rows = []
    for j, level in enumerate(fit.data.levels):
        hdi = hdi_columns(rep[:, j, :])  # per step (arviz.hdi's, tested)
        for i, step in enumerate(fit.data.steps):
            obs = float(fit.data.y[j, i])
            rows.append(
                {
                    "level": level,
                    "step": int(step),
                    "observed": obs,
                    "predictive_mean": float(rep[:, j, i].mean()),
                    "hdi_low": float(hdi[i, 0]),
                    "hdi_high": float(hdi[i, 1]),
                    "covered": bool(hdi[i, 0] <= obs <= hdi[i, 1]),
                }
            )
    return pd.DataFrame(rows)


def plot_ppc(fit: Any, *, ax: Axes | None = None, seed: int = 0) -> Figure:
    """Observed per-step means against the 94 % posterior predictive interval, per level
    (the share covered is in the legend; about 94 % is what a calibrated model gives).

    Parameters
    ----------
    fit : PlateauFit
        A plateau fit (:func:`saturation.fit_plateau`).
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.
    seed : int, default 0
        Seeds the predictive draws.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """

    frame = ppc_data(fit, seed=seed)
    levels = list(dict.fromkeys(frame["level"]))
    with style():
        fig, axs = _panels(ax, len(levels), PAGE if len(levels) > 1 else COLUMN, 1.9 if ax is None else 2.0)
        for i, level in enumerate(levels):
            sub = frame[frame["level"] == level]
            a = axs[i]
            a.fill_between(sub["step"], sub["hdi_low"], sub["hdi_high"], color=colour(i), alpha=BAND_ALPHA, lw=0)
            a.plot(
                sub["step"],
                sub["observed"],
                "o",
                ms=2,
                color=colour(i),
                label=f"{level}: {sub['covered'].mean():.0%} inside",
            )
            a.set_xlabel("step")
            a.legend(loc="lower right")
        axs[0].set_ylabel(f"{fit.data.response} (predictive {HDI_LABEL})")
    return fig


def loo_data(table: pd.DataFrame) -> pd.DataFrame:
    """The ArviZ LOO comparison table with the model name as a column."""
    out = table.reset_index().rename(columns={"index": "model"})
    extra = [c for c in ("loo_method", "caveat") if c in out]
    return out[["model", "rank", "elpd_loo", "se", "elpd_diff", "dse", "weight", "warning", *extra]]


def plot_loo(table: pd.DataFrame, *, ax: Axes | None = None) -> Figure:
    """ELPD (LOO) of each model with its standard error, and the difference to the best.

    Parameters
    ----------
    table : pandas.DataFrame
        The comparison table of :func:`saturation.compare_plateau_models` (one row per model).
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    frame = loo_data(table)
    with style():
        fig, ax = _figure(ax, COLUMN, 0.5 + 0.3 * len(frame))
        ys = np.arange(len(frame))[::-1]
        ax.errorbar(frame["elpd_loo"], ys, xerr=frame["se"], fmt="o", color=colour(0), label="ELPD +- SE")
        bad = frame["warning"].astype(bool).to_numpy()
        if bad.any():  # PSIS with Pareto k > 0.7: the estimate itself is unreliable
            ax.plot(
                frame["elpd_loo"][bad], ys[bad], "x", color="black", ms=6, mew=1.0, label="Pareto k > 0.7 (unreliable)"
            )
        best = frame["elpd_loo"].iloc[0]
        ax.errorbar(
            best - frame["elpd_diff"],
            ys - 0.15,
            xerr=frame["dse"],
            fmt="^",
            color=colour(1),
            label="best - difference +- SE",
        )
        labels = (
            [
                f"{m} ({how}{', k > 0.7' if b else ''})"
                for m, how, b in zip(frame["model"], frame["loo_method"], bad, strict=True)
            ]
            if "loo_method" in frame
            else [f"{m}{' (k > 0.7)' if b else ''}" for m, b in zip(frame["model"], bad, strict=True)]
        )
        ax.set_yticks(ys, labels)
        ax.set_xlabel("ELPD (LOO; higher is better)")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2)
    return fig


# ====================================================================== diagnostics
def cardinality_data(diag: Any) -> pd.DataFrame:
    """Per level: precision, recall and predicted/gold ratio at the start and end (mean, HDI)."""
    rows = []
    for level in diag.units():
        for quantity in (S.PRECISION, S.RECALL, "pred_over_gold"):
            trend = diag.trend(level, quantity)
            for when in ("start", "end"):
                e = getattr(trend, when)
                low, high = e.hdi
                rows.append(
                    {
                        "level": level,
                        "quantity": quantity,
                        "when": when,
                        "mean": e.mean,
                        "hdi_low": low,
                        "hdi_high": high,
                    }
                )
    return pd.DataFrame(rows)


def plot_cardinality(diag: Any, *, ax: Axes | None = None) -> Figure:
    """Precision and recall (left) and predicted/gold locations (right) per level, start
    (open) -> end (filled), 94 % HDIs. With ``ax``: the precision/recall panel only.

    Parameters
    ----------
    diag : Diagnosis
        The result of :func:`saturation.diagnose_cardinality`.
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    import matplotlib.pyplot as plt

    frame = cardinality_data(diag)
    levels = list(dict.fromkeys(frame["level"]))
    with style():
        if ax is None:
            fig, (a1, a2) = plt.subplots(1, 2, figsize=(PAGE * 0.7, 2.0), layout="constrained", width_ratios=(2, 1))
        else:
            fig, a1 = _figure(ax, COLUMN, 2.0)
            a2 = None
        x = np.arange(len(levels))
        for k, (quantity, axis) in enumerate(((S.PRECISION, a1), (S.RECALL, a1), ("pred_over_gold", a2))):
            if axis is None:
                continue
            offset = {S.PRECISION: -0.15, S.RECALL: 0.15, "pred_over_gold": 0.0}[quantity]
            for when, marker, face in (("start", "o", "white"), ("end", "o", None)):
                sub = frame[(frame["quantity"] == quantity) & (frame["when"] == when)].set_index("level").loc[levels]
                shift = offset + (-0.05 if when == "start" else 0.05)
                axis.errorbar(
                    x + shift,
                    sub["mean"],
                    yerr=[sub["mean"] - sub["hdi_low"], sub["hdi_high"] - sub["mean"]],
                    fmt=marker,
                    color=colour(k),
                    mfc=face or colour(k),
                    ms=4,
                    label=f"{'predicted/gold' if quantity == 'pred_over_gold' else quantity} {when}",
                )
            axis.set_xticks(x, levels)
        a1.set_ylabel("precision / recall")
        a1.legend(ncols=2, fontsize=6, loc="lower center", bbox_to_anchor=(0.5, 1.0))
        if a2 is not None:
            a2.axhline(1.0, color="0.4", lw=0.7, ls=":")
            a2.set_ylabel("predicted / gold locations")
            a2.legend(fontsize=6, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return fig


def series_data(series: xr.Dataset, variables: list[str]) -> pd.DataFrame:
    """Long frame (run, step, variable, value) of a per-step series Dataset."""
    frame = series[variables].to_dataframe().reset_index().melt(id_vars=[S.RUN, S.STEP], var_name="variable")
    return frame.dropna(subset=["value"])


def _series_panel(
    ax: Axes, series: xr.Dataset, diag: Any, run: Any, variables: list[str], labels: list[str], colours: list[str]
) -> None:
    """Observed series (thin line and points) and the fitted trend (posterior mean and 94 %
    band, from the diagnosis' one-series change-point fits); without a band, the fitted
    start and end as squares with their HDIs."""
    bands = getattr(diag, "bands", {}) or {}
    for var, label, colour in zip(variables, labels, colours, strict=True):
        sub = series[var].sel({S.RUN: run}).dropna(S.STEP)
        ax.plot(
            sub[S.STEP], sub, "o-", color=colour, lw=0.5, ms=1.8, alpha=0.55, mec="none", label=f"{label}, observed"
        )
        band = bands.get(f"{var}/{run}")
        if band is not None:
            ax.fill_between(band["step"], band["hdi_low"], band["hdi_high"], color=colour, alpha=BAND_ALPHA, lw=0)
            ax.plot(band["step"], band["mean"], "-", color=colour, lw=1.3, label=f"{label}, trend ({HDI_LABEL})")
            continue
        trend = diag.trend(str(run), var)
        if trend is not None:
            steps = sub[S.STEP].to_numpy()
            for when, step in (("start", steps[0]), ("end", steps[-1])):
                e = getattr(trend, when)
                ax.errorbar(
                    step,
                    e.mean,
                    yerr=[[e.mean - e.hdi[0]], [e.hdi[1] - e.mean]],
                    fmt="s",
                    color=colour,
                    ms=3.5,
                    capsize=2,
                    mec="black",
                    mew=0.4,
                )
    ax.set_xlabel("step")


def _series_legend(
    fig: Figure, series: xr.Dataset, diag: Any, runs: list[Any], variables: list[str], labels: list[str]
) -> None:
    """A colour per series, then what the thin lines and the thick ones are: right of a single
    panel, above several."""
    from matplotlib.lines import Line2D

    bands = getattr(diag, "bands", {}) or {}
    banded = any(f"{v}/{r}" in bands for v in variables for r in runs)
    grey = "0.45"
    handles = [Line2D([], [], color=colour(v), lw=1.3) for v in range(len(variables))]
    handles.append(Line2D([], [], color=grey, lw=0.5, marker="o", ms=1.8, alpha=0.7))
    handles.append(Line2D([], [], color=grey, lw=1.3) if banded else Line2D([], [], color=grey, marker="s", ls="none"))
    names = [*labels, "observed", f"trend ({HDI_LABEL} band)" if banded else f"start and end ({HDI_LABEL})"]
    if len(runs) == 1:
        fig.legend(handles, names, loc="outside right upper", fontsize=6, frameon=False)
    else:
        fig.legend(handles, names, loc="outside upper center", ncols=min(len(names), 3), fontsize=6, frameon=False)


def _per_run(
    series: xr.Dataset, diag: Any, ax: Axes | None, variables: list[str], labels: list[str], ylabel: str
) -> Figure:

    # the diagnosed runs (a series may hold runs without these variables, e.g. a
    # composite-reward run without pass@k)
    runs = [r for r in series[S.RUN].values if str(r) in diag.numbers.get("runs", {})] or list(series[S.RUN].values)
    with style():
        width = min(PAGE, 0.5 + 2.6 * len(runs) + (1.6 if len(runs) == 1 else 0.0))  # a single panel: legend right
        fig, axs = _panels(ax, len(runs), width, 2.1, sharey=True)
        for r, run in enumerate(runs):
            colours = (
                [colour(r * len(variables) + v) for v in range(len(variables))]
                if ax is not None
                else [colour(v) for v in range(len(variables))]
            )
            run_labels = [f"{run} {lab}" for lab in labels] if ax is not None else labels
            _series_panel(axs[r], series, diag, run, variables, run_labels, colours)
            if ax is None:
                axs[r].set_title(str(run))
        axs[0].set_ylabel(ylabel)
        if ax is None:  # one short legend for all panels: a colour per series, then the two styles
            _series_legend(fig, series, diag, runs, variables, labels)
        else:
            axs[0].legend(fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=len(variables))
    return fig


def plot_pass_at_k(
    series: xr.Dataset, diag: Any, *, ax: Axes | None = None, pass1: str = S.REWARD_MEAN, passk: str = S.PASS_AT_K
) -> Figure:
    """pass@1 and pass@k per run (one panel each) with the fitted start and end (squares,
    94 % HDI): reliability moves pass@1, capability moves pass@k.

    Parameters
    ----------
    series : xarray.Dataset
        The per-step metrics series (dims run, step) the diagnosis was fitted to.
    diag : Diagnosis
        The result of :func:`saturation.diagnose_reliability`.
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.
    pass1 : str
        The pass@1 series' variable name.
    passk : str
        The pass@k series' variable name.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    k = series[passk].attrs.get("k", "k")
    return _per_run(series, diag, ax, [pass1, passk], ["pass@1 (mean reward)", f"pass@{k}"], "success rate")


def plot_entropy(series: xr.Dataset, diag: Any, *, ax: Axes | None = None, entropy: str = S.POLICY_ENTROPY) -> Figure:
    """Policy entropy per run with the fitted start and end (squares, 94 % HDI).

    Parameters
    ----------
    series : xarray.Dataset
        The per-step metrics series (dims run, step) the diagnosis was fitted to.
    diag : Diagnosis
        The result of :func:`saturation.diagnose_entropy`.
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.
    entropy : str
        The entropy series' variable name.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    return _per_run(series, diag, ax, [entropy], ["policy entropy"], "policy entropy")


def components_data(series: xr.Dataset, diag: Any) -> pd.DataFrame:
    """Long frame (run, step, variable, value) of the diagnosed runs' components and reward."""
    variables = _component_variables(series, diag)
    frame = series_data(series, variables)
    return frame[frame[S.RUN].astype(str).isin(diag.units())].reset_index(drop=True)


def _component_variables(series: xr.Dataset, diag: Any) -> list[str]:
    first = diag.units()[0]
    trends = [diag.trend(first, v) for v in diag.trend_variables(first)]
    return [t.variable for t in trends if t.component] + [t.variable for t in trends if not t.component]


def plot_components(series: xr.Dataset, diag: Any, *, ax: Axes | None = None) -> Figure:
    """A composite reward's components and the reward per run (one panel each): observed
    per-step values and each series' fitted trend (posterior mean, 94 % band).

    Parameters
    ----------
    series : xarray.Dataset
        The per-step metrics series (dims run, step) the diagnosis was fitted to.
    diag : Diagnosis
        The result of :func:`saturation.diagnose_components`.
    ax : matplotlib.axes.Axes, optional
        Draw every run on this axes (a single panel) instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    variables = _component_variables(series, diag)
    labels = [str(series[v].attrs.get("metric_name", v)) for v in variables]
    return _per_run(series, diag, ax, variables, labels, "value")


# ====================================================================== transfer
def transfer_data(fit: Any) -> pd.DataFrame:
    """Per (arm, step, quantity): empirical value, posterior mean and 94 % band, gap to
    the reference with its band."""

    return fit.frame()


#: the transfer model's three reported quantities and their axis labels
TRANSFER_LABELS = {
    S.ALL_ROLLOUT: "all-rollout reward",
    S.GRADED_ONLY: "graded-only reward",
    "ungraded_rate": "ungraded rate",
}


def plot_transfer(fit: Any, *, ax: Axes | None = None, quantity: str = S.ALL_ROLLOUT) -> Figure:
    """Per-arm population curves (posterior mean, 94 % band, empirical points) of the three
    quantities, all-rollout reward, graded-only reward and ungraded rate (top row), and each
    arm's gap to the reference (bottom row, zero line). The all-rollout gap panel shades the
    crossover step's 94 % HDI where the fit's decision rule names a crossover
    (``TransferFit.decisions``, the rule of the report and the CLI). With ``ax``: the curves
    of ``quantity`` only.

    Parameters
    ----------
    fit : TransferFit
        A transfer fit (:func:`saturation.fit_transfer`).
    ax : matplotlib.axes.Axes, optional
        Draw on this axes (a single panel) instead of a new figure.
    quantity : str
        With ``ax``: the quantity drawn (all-rollout reward by default).

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    import matplotlib.pyplot as plt

    full = transfer_data(fit)
    ref = fit.config.reference
    decided = fit.decisions()
    with style():
        if ax is not None:
            fig, _ = _figure(ax, COLUMN, 2.1)
            _transfer_curves(ax, full[full["quantity"] == quantity], quantity)
            ax.legend(title=f"{HDI_LABEL} bands")
            return fig
        quantities = list(TRANSFER_LABELS)
        fig, axes = plt.subplots(2, 3, figsize=(PAGE, 3.9), sharex=True, layout="constrained")
        for c, q in enumerate(quantities):
            frame = full[full["quantity"] == q]
            _transfer_curves(axes[0, c], frame, q)
            axes[0, c].set_xlabel("")  # shared with the gap panel below
            gap_ax = axes[1, c]
            for i, arm in enumerate(dict.fromkeys(frame["arm"])):
                if arm == ref:
                    continue
                g = frame[frame["arm"] == arm].dropna(subset=["gap_mean"])
                gap_ax.fill_between(
                    g["step"], g["gap_hdi_low"], g["gap_hdi_high"], color=colour(i), alpha=BAND_ALPHA, lw=0
                )
                gap_ax.plot(g["step"], g["gap_mean"], color=colour(i), label=f"{arm} - {ref}")
                cross = fit.crossover(arm)
                if q == S.ALL_ROLLOUT and decided[arm]["crossover"] is not None and cross is not None:
                    gap_ax.axvspan(*cross.hdi, color=colour(i), alpha=0.12, lw=0)
                    gap_ax.axvline(cross.mean, color=colour(i), lw=0.7, ls=":")
                    gap_ax.text(
                        cross.hdi[1] + 0.5,
                        0.97,
                        f"crossover {cross.mean:.0f} [{cross.hdi[0]:.0f}, {cross.hdi[1]:.0f}]",
                        transform=gap_ax.get_xaxis_transform(),
                        fontsize=6,
                        va="top",
                        color=colour(i),
                    )
            gap_ax.axhline(0, color="0.4", lw=0.7)
            gap_ax.set_xlabel("step")
            gap_ax.set_ylabel(f"gap to {ref}, {TRANSFER_LABELS[q].split()[0]}")
        # the arms' legend above the panels, where it cannot cover the first steps' curves; a
        # gap line has its arm's colour and the panel's label names the reference
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper center", ncols=len(labels), title=f"{HDI_LABEL} bands")
        fig.align_ylabels(axes[:, 0])
    return fig


def _transfer_curves(ax: Axes, frame: pd.DataFrame, quantity: str) -> None:
    for i, arm in enumerate(dict.fromkeys(frame["arm"])):
        sub = frame[frame["arm"] == arm]
        ax.fill_between(sub["step"], sub["hdi_low"], sub["hdi_high"], color=colour(i), alpha=BAND_ALPHA, lw=0)
        ax.plot(sub["step"], sub["mean"], color=colour(i), label=str(arm))
        ax.plot(sub["step"], sub["empirical"], "o", color=colour(i), ms=2, alpha=0.6, mec="none")
    ax.set_xlabel("step")
    ax.set_ylabel(TRANSFER_LABELS.get(quantity, quantity))


def saturation_curves_data(fit: Any) -> pd.DataFrame:
    """Per (arm, step): observed mean, fitted curve mean and 94 % band, forecast flag and the
    arm's ceiling (``SigmoidFit.frame``)."""
    return fit.frame()


def plot_saturation_curves(fit: Any, *, ax: Axes | None = None) -> Figure:
    """Each arm's saturation curve (``saturation compare``): the observed per-step values
    (points), the fitted curve's posterior mean and 94 % band over the data (solid) and over
    the forecast horizon (dashed, lighter band), each arm's posterior mean ceiling (dotted),
    and in a narrow panel at the right each arm's ceiling with its 94 % HDI (the asymptote;
    not data at a step).

    Parameters
    ----------
    fit : SigmoidFit
        A saturation-curve fit (:func:`saturation.fit_sigmoid`); on a compute axis the x
        axis is the cumulative compute instead of the step.
    ax : matplotlib.axes.Axes, optional
        Draw the curves on this axes, with the ceilings' panel inset at its right, instead
        of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    frame = saturation_curves_data(fit)
    compute = getattr(fit.data, "compute", None) is not None
    xcol = "x" if compute else "step"  # on a compute axis: the compute spent through each step
    with style():
        if ax is None:
            import matplotlib.pyplot as plt

            # the ceilings in their own narrow panel: they are not data at a step
            fig, (ax_, side) = plt.subplots(
                1, 2, figsize=(COLUMN, 2.4), layout="constrained", sharey=True, width_ratios=(6, 1)
            )
        else:
            fig, ax_ = _figure(ax, COLUMN, 2.4)
            side = ax_.inset_axes((1.03, 0.0, 0.14, 1.0), sharey=ax_)
        arms = list(dict.fromkeys(frame["arm"]))
        for i, arm in enumerate(arms):
            sub = frame[frame["arm"] == arm]
            seen, ahead = sub[~sub["forecast"]], sub[sub["forecast"]]
            ax_.plot(seen[xcol], seen["observed"], "o", color=colour(i), ms=1.8, alpha=0.5, mec="none")
            ax_.fill_between(seen[xcol], seen["hdi_low"], seen["hdi_high"], color=colour(i), alpha=BAND_ALPHA, lw=0)
            ax_.plot(seen[xcol], seen["mean"], color=colour(i), label=str(arm))
            if len(ahead):
                edge = pd.concat([seen.iloc[-1:], ahead])
                ax_.fill_between(
                    edge[xcol], edge["hdi_low"], edge["hdi_high"], color=colour(i), alpha=BAND_ALPHA / 2, lw=0
                )
                ax_.plot(edge[xcol], edge["mean"], color=colour(i), ls="--", lw=0.9)
            row = sub.iloc[0]
            ax_.axhline(row["asymptote"], color=colour(i), ls=":", lw=0.8)  # the posterior mean ceiling
            side.errorbar(
                i,
                row["asymptote"],
                yerr=[[row["asymptote"] - row["asymptote_low"]], [row["asymptote_high"] - row["asymptote"]]],
                fmt="D",
                ms=3,
                color=colour(i),
                elinewidth=1,
                capsize=0,
            )
        side.set_xlim(-0.7, len(arms) - 0.3)
        side.set_xticks([])
        side.set_xlabel("ceiling")
        side.tick_params(axis="y", labelleft=False)
        for edge_name in ("top", "right"):
            side.spines[edge_name].set_visible(False)
        ax_.set_xlabel(f"cumulative {fit.data.compute_key} (compute)" if compute else "step")
        metric = getattr(fit.config, "metric", None)
        ax_.set_ylabel(str(metric) if metric else "reward (all rollouts)")
        ax_.legend(loc="upper left")
    return fig
