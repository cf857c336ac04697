"""The plateau model's one decision rule: a level's verdict from its estimands
(:func:`plateau_verdict`, thresholds in :class:`saturation.configs.VerdictRule`), the verdict
vocabulary, the printed names of the quantities and the summary sentence. The CLI, the
report and calibrate take verdicts only from here."""

from __future__ import annotations

from typing import Any

from saturation.configs import VerdictRule

#: One printed name per reported quantity (the CLI, the report, the verdict reasons and the
#: docs use these; no two quantities share a label).
LABELS = {
    "p_flat": "P(flat)",
    "p_late_in_rope": "P(|late gain| < ROPE)",
    "p_late_in_rope_relative": "P(|late gain| < relative ROPE x early gain)",
    "headroom_to_max": "headroom to the metric's maximum",
    "p_no_change": "P(|end - start| < ROPE)",
    "p_rise_positive": "P(rise > 0)",
    "p_late_gain_beyond_rope": "P(late gain > ROPE)",
    "p_late_loss_beyond_rope": "P(late gain < -ROPE)",
    "end_gain": "gain over the end window",
    "p_end_gain_beyond_rope": "P(end-window gain > ROPE)",
    "p_end_loss_beyond_rope": "P(end-window gain < -ROPE)",
    "smooth_end_gain": "the smooth curve's gain over the end window",
    "p_smooth_end_in_rope": "P(|the smooth curve's end-window gain| < ROPE)",
    "p_smooth_end_positive": "P(the smooth curve's end-window gain > 0)",
    "p_smooth_slowed": "P(the smooth curve's end-window slope < SLOW x its slope before)",
}


#: the per-level plateau verdicts, in the order the rule tries them (:func:`plateau_verdict`)
VERDICTS = ("flat", "no change point", "undetermined", "declining", "plateaued", "slowed", "still rising")


#: the verdicts that say "it stopped rising" (headlines, the calibration's false-stop and power rates)
STOPPED_VERDICTS = ("plateaued", "slowed")


#: the verdicts whose late segment is flat ("slowed" is still gaining): what "flat after the
#: break" means when a published reading is compared with a fit
FLAT_LATE_VERDICTS = ("plateaued", "flat")


FLAT_DEFINITION = "flat: the late gain inside the absolute ROPE or inside the relative ROPE x the early gain"


#: what each verdict says in the summary sentence: (of one level, of several)
VERDICT_PHRASES = {
    "flat": ("stayed flat (no change over the window)",) * 2,
    "no change point": ("shows no change point", "show no change point"),
    "undetermined": ("is undetermined", "are undetermined"),
    "declining": ("is declining", "are declining"),
    "plateaued": ("plateaued (stopped rising)",) * 2,
    "slowed": ("slowed down, not shown to have stopped", "slowed down, not shown to have stopped"),
    "still rising": ("is still rising", "are still rising"),
}


def verdict_summary(levels: dict[str, dict[str, Any]]) -> str:
    """One sentence from the per-level verdicts, e.g. "file plateaued (stopped rising);
    module slowed down, not shown to have stopped; entity is still rising"; with one level, "The
    metric ..."; with every level alike, "All 3 levels ..."."""
    by_verdict: dict[str, list[str]] = {}
    for lv, e in levels.items():
        by_verdict.setdefault(e["verdict"], []).append(lv)
    if len(levels) == 1:
        return f"The metric {VERDICT_PHRASES[next(iter(by_verdict))][0]}"
    if len(by_verdict) == 1:
        return f"All {len(levels)} levels {VERDICT_PHRASES[next(iter(by_verdict))][1]}"
    return "; ".join(f"{', '.join(lvs)} {VERDICT_PHRASES[v][len(lvs) > 1]}" for v, lvs in by_verdict.items())


#: the shapes :func:`curve_shape` tells apart, and what each says in a verdict's reason
CURVE_SHAPES = {
    "break": "a break, not a smooth approach",
    "smooth": "a smooth approach, no sharp break (the change point marks where it bent most)",
    "straight": "a straight line",
    "unclear": "a break and a smooth approach not told apart",
}


def curve_shape(est: dict[str, Any], rule: VerdictRule | None = None) -> str:
    """The shape of a level's curve from its Bayes factors (a key of :data:`CURVE_SHAPES`):
    "smooth" when the exponential approach beats both the change point and the line by at
    least ``rule.bf_shape``; "break" when the change point beats the smooth approach by that
    much and the line (BF(change point : line) >= 1); "straight" when the line beats both;
    otherwise "unclear"."""
    rule = rule or VerdictRule()
    vs_break, vs_line = est["bf_smooth_vs_break"], est["bf_smooth_vs_line"]
    cp_vs_line = est.get("bf_changepoint_vs_line") or 1.0
    if vs_break >= rule.bf_shape and vs_line >= rule.bf_shape:
        return "smooth"
    if vs_break <= 1.0 / rule.bf_shape and cp_vs_line >= 1.0:
        return "break"
    if vs_line <= 1.0 / rule.bf_shape and cp_vs_line < 1.0:
        return "straight"
    return "unclear"


def plateau_verdict(
    est: dict[str, Any], rule: VerdictRule | None = None, *, known_break: bool = False
) -> dict[str, str]:
    """The verdict of one level from its estimands (the one rule the CLI, the report and
    calibrate use).

    In order: "flat" (the whole change from start to end inside the absolute ROPE: nothing
    was learnt in the window, e.g. a run resumed after it saturated); "declining" (the late
    gain after the break, or the gain over the end window, decisively below -ROPE: a loss in
    the metric's own units); "no change point" (unknown break only: the straight line has
    the larger marginal likelihood, or the change-point mass piles on the outermost
    candidates); "undetermined" when the rise up to just after the break is not decisively
    positive (nothing to plateau from); "plateaued" (late gain inside the ROPE, and neither
    the late gain nor the end window's gain decisively above the absolute ROPE: a gain that
    is small relative to the rise but certainly there in the metric's units is not a
    plateau); "slowed" (late slope decisively below ``slow_ratio`` x the rise's average
    rate up to just after the break, a jump included: slower, not shown to have stopped);
    "still rising" (late slope decisively positive, not slower); otherwise "undetermined".
    The end window (:func:`end_window`, a straight line over the last third of the run) is
    the shape-robust reading of "still moving at the end?". When the fit weighed a smooth
    approach against the break (``curve_shape``, :func:`curve_shape`), the reason says
    which shape the data prefer. "No change point" is not said when the smooth approach
    beat the line by ``bf_shape`` (the curve bends, whether or not a break is told from the
    bend). A smooth approach (exponential or S-shaped) has no break for a late segment to
    be measured after: when the shape is "smooth", "plateaued", "slowed" and "still rising"
    are read from the smooth curve's own draws over the end window (:func:`_smooth_verdict`;
    without an end window, "flat" is the late gain inside the absolute ROPE,
    ``p_late_in_rope``, instead of P(flat)).

    Parameters
    ----------
    est : dict
        One level's estimands (``PlateauFit.estimands["levels"][level]``).
    rule : VerdictRule, optional
        The thresholds (default :class:`VerdictRule`).
    known_break : bool
        The change point was given, not estimated (no "no change point" verdict).

    Returns
    -------
    dict
        ``{"verdict": one of VERDICTS, "reason": a sentence with the numbers behind it}``.
    """
    rule = rule or VerdictRule()
    out = _verdict(est, rule, known_break)
    shape = est.get("curve_shape")
    if shape in ("break", "smooth") and out["verdict"] not in ("flat", "undetermined"):
        bf = est["bf_smooth_vs_break"]
        text = CURVE_SHAPES[shape]
        if shape == "smooth" and est.get("smooth_form"):
            text = text.replace("a smooth approach", f"a smooth approach ({est['smooth_form']})", 1)
        out["reason"] += f"; shape: {text} (BF smooth : break = {bf:.2g})"
    return out


def _verdict(est: dict[str, Any], rule: VerdictRule, known_break: bool) -> dict[str, str]:
    """:func:`plateau_verdict`'s verdict and reason before the curve's shape is named."""
    bf = est.get("bf_changepoint_vs_line")
    if est["p_no_change"] >= rule.p_flat:
        return {
            "verdict": "flat",
            "reason": f"{LABELS['p_no_change']} = {est['p_no_change']:.2f}: no change over the window",
        }
    declining = _declining(est, rule)
    if declining is not None:
        return declining
    # a smooth approach beat the line decisively: the curve bends, not "no change point"
    # (the hinge may lose to the line on an S-shaped rise, whose slow start it cannot draw)
    curved = est.get("bf_smooth_vs_line", 0.0) >= rule.bf_shape
    if not known_break and not curved:
        if bf is not None and bf < rule.bf_line:
            return {
                "verdict": "no change point",
                "reason": f"a straight line fits better (BF change point : line = {bf:.2g})",
            }
        if est.get("edge_mass", 0.0) > rule.edge_mass:
            return {
                "verdict": "no change point",
                "reason": f"{est['edge_mass']:.0%} of the change-point mass on the outermost "
                f"{rule.edge_candidates} candidate steps (no break inside the run)",
            }
    if est["p_rise_positive"] < rule.p_rise:
        return {
            "verdict": "undetermined",
            "reason": f"no decisive rise before the break ({LABELS['p_rise_positive']} = {est['p_rise_positive']:.2f})",
        }
    if est.get("curve_shape") == "smooth" and "p_smooth_end_in_rope" in est:
        return _smooth_verdict(est, rule)
    late_gaining = est["p_late_gain_beyond_rope"] >= rule.p_still
    end_gaining = est.get("p_end_gain_beyond_rope", 0.0) >= rule.p_still
    gaining = late_gaining or end_gaining
    # a smooth approach too short for an end window: "flat" is the late gain inside the
    # absolute ROPE (no break for "small relative to the early gain" to be measured after)
    flat_key = "p_late_in_rope" if est.get("curve_shape") == "smooth" else "p_flat"
    if est[flat_key] >= rule.p_flat and not gaining:
        end = (
            f", nor over the end window ({LABELS['p_end_gain_beyond_rope']} = {est['p_end_gain_beyond_rope']:.2f})"
            if "p_end_gain_beyond_rope" in est
            else ""
        )
        return {
            "verdict": "plateaued",
            "reason": f"{LABELS[flat_key]} = {est[flat_key]:.2f} and no decisive late gain beyond the absolute ROPE "
            f"({LABELS['p_late_gain_beyond_rope']} = {est['p_late_gain_beyond_rope']:.2f} < {rule.p_still:g}{end})",
        }
    if est["p_slowed"] >= rule.p_slow:
        still = (
            f"still gaining ({LABELS['p_late_gain_beyond_rope']} = {est['p_late_gain_beyond_rope']:.2f})"
            if late_gaining
            else f"still gaining at the end ({LABELS['p_end_gain_beyond_rope']} = {est['p_end_gain_beyond_rope']:.2f})"
            if end_gaining
            else f"flatness not confirmed ({LABELS[flat_key]} = {est[flat_key]:.2f})"
        )
        return {
            "verdict": "slowed",
            "reason": f"P(late slope < {rule.slow_ratio:g} x early slope) = {est['p_slowed']:.2f}; {still}",
        }
    if est["p_late_positive"] >= rule.p_still:
        return {"verdict": "still rising", "reason": f"P(late slope > 0) = {est['p_late_positive']:.2f}"}
    return {
        "verdict": "undetermined",
        "reason": f"neither flat ({LABELS[flat_key]} = {est[flat_key]:.2f}), clearly slower "
        f"(P = {est['p_slowed']:.2f}) nor clearly rising (P(late slope > 0) = {est['p_late_positive']:.2f})",
    }


def _smooth_verdict(est: dict[str, Any], rule: VerdictRule) -> dict[str, str]:
    """The verdict of a curve of the shape "smooth" (no break to measure a late segment
    after) from the smooth approach's own draws over the end window: "plateaued" when its
    gain there is inside the absolute ROPE with P >= ``p_flat`` and neither the hinge's
    late gain nor the end window's line gains decisively beyond it; "slowed" when the end
    window's slope is below ``slow_ratio`` x the slope before it with P >= ``p_slow``;
    "still rising" when the end-window gain is positive with P >= ``p_still``."""
    decisive_gain = max(est["p_late_gain_beyond_rope"], est.get("p_end_gain_beyond_rope", 0.0))
    flat = est["p_smooth_end_in_rope"]
    if flat >= rule.p_flat and decisive_gain < rule.p_still:
        return {
            "verdict": "plateaued",
            "reason": f"{LABELS['p_smooth_end_in_rope']} = {flat:.2f} and no decisive gain beyond the absolute ROPE "
            f"(P(late or end-window gain > ROPE) = {decisive_gain:.2f} < {rule.p_still:g})",
        }
    if est["p_smooth_slowed"] >= rule.p_slow:
        return {
            "verdict": "slowed",
            "reason": f"{LABELS['p_smooth_slowed'].replace('SLOW', f'{rule.slow_ratio:g}')} = "
            f"{est['p_smooth_slowed']:.2f}; flatness not confirmed ({LABELS['p_smooth_end_in_rope']} = {flat:.2f})",
        }
    if est["p_smooth_end_positive"] >= rule.p_still:
        return {
            "verdict": "still rising",
            "reason": f"{LABELS['p_smooth_end_positive']} = {est['p_smooth_end_positive']:.2f}",
        }
    return {
        "verdict": "undetermined",
        "reason": f"neither flat ({LABELS['p_smooth_end_in_rope']} = {flat:.2f}), clearly slower "
        f"(P = {est['p_smooth_slowed']:.2f}) nor clearly rising ({LABELS['p_smooth_end_positive']} = "
        f"{est['p_smooth_end_positive']:.2f})",
    }


def _declining(est: dict[str, Any], rule: VerdictRule) -> dict[str, str] | None:
    """ "declining": the late gain (after the break) or the end window's gain decisively below
    -ROPE, a loss in the metric's own units; None otherwise."""
    for key in ("p_late_loss_beyond_rope", "p_end_loss_beyond_rope"):
        if est.get(key, 0.0) >= rule.p_still:
            return {"verdict": "declining", "reason": f"{LABELS[key]} = {est[key]:.2f} >= {rule.p_still:g}"}
    return None
