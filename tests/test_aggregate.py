"""Sufficient statistics equal a pandas groupby to 1e-12."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from saturation import schema as S
from saturation.aggregate import aggregate
from saturation.io import trials_to_frame
from saturation.simulate import ArmSpec, TransferSpec, simulate_transfer


def _check_against_pandas(ds, by):
    agg = aggregate(ds, by=by)
    frame = trials_to_frame(ds)
    graded = frame[frame[S.GRADED]]
    g_all = frame.groupby(list(by))
    g = graded.groupby(list(by))
    for key, sub in g_all:
        sel = dict(zip(by, key, strict=True))
        cell = agg.sel(sel)
        assert int(cell[S.N_TRIALS]) == len(sub)
        assert int(cell[S.N_GRADED]) == int(sub[S.GRADED].sum())
        np.testing.assert_allclose(float(cell["reward_all_mean"]), sub[S.REWARD].mean(), rtol=0, atol=1e-12)
    checked = 0
    for key, sub in g:
        sel = dict(zip(by, key, strict=True))
        cell = agg.sel(sel)
        r = sub[S.REWARD]
        np.testing.assert_allclose(float(cell["reward_sum"]), r.sum(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(float(cell["reward_sumsq"]), (r**2).sum(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(float(cell["reward_mean"]), r.mean(), rtol=0, atol=1e-12)
        for level in ds[S.LEVEL].values if S.LEVEL in ds.dims else []:
            for fld in S.LEVEL_FIELDS:
                col = sub[f"{level}_{fld}"].astype(float).dropna()
                c = cell.sel({S.LEVEL: level})
                assert int(c[f"{fld}_n"]) == len(col)
                np.testing.assert_allclose(float(c[f"{fld}_sum"]), col.sum(), rtol=0, atol=1e-12)
                np.testing.assert_allclose(float(c[f"{fld}_sumsq"]), (col**2).sum(), rtol=0, atol=1e-12)
                if len(col):
                    np.testing.assert_allclose(float(c[f"{fld}_mean"]), col.mean(), rtol=0, atol=1e-12)
                if fld in S.LEVEL_RATES:
                    inside = col[(col > 0) & (col < 1)]
                    assert int(c[f"{fld}_n0"]) == int((col == 0).sum())
                    assert int(c[f"{fld}_n1"]) == int((col == 1).sum())
                    np.testing.assert_allclose(float(c[f"{fld}_slogy"]), np.log(inside).sum(), rtol=1e-12, atol=1e-12)
                    np.testing.assert_allclose(
                        float(c[f"{fld}_slog1my"]), np.log1p(-inside).sum(), rtol=1e-12, atol=1e-12
                    )
                checked += 1
    return agg, checked


def test_plateau_aggregate_matches_pandas(small_plateau):
    ds, _ = small_plateau
    agg, checked = _check_against_pandas(ds, (S.RUN, S.STEP))
    assert checked > 0
    assert agg[S.F1 + "_mean"].dims == (S.RUN, S.STEP, S.LEVEL)


def test_transfer_aggregate_matches_pandas():
    spec = TransferSpec(
        arms=tuple(ArmSpec(a.name, 150, a.ungraded, a.graded_reward) for a in TransferSpec().arms),
        prompts_per_step=4,
        samples_per_prompt=4,
        pool_size=50,
    )
    ds, _ = simulate_transfer(spec, seed=1)
    agg, _ = _check_against_pandas(ds, (S.ARM, S.STEP))
    assert set(agg.dims) == {S.ARM, S.STEP}


def test_default_group_by_skips_absent_coords(small_plateau):
    ds, _ = small_plateau
    agg = aggregate(ds)
    assert S.ARM not in agg.dims
    assert agg.sizes[S.STEP] == 12


def test_empty_cells_are_explicit(small_plateau):
    ds, _ = small_plateau
    sub = ds.isel({S.TRIAL: ds[S.STEP].values != 5})
    two = sub.assign_coords({S.RUN: (S.TRIAL, np.where(sub[S.STEP].values < 3, "a", "b").astype(object))})
    agg = aggregate(two, by=(S.RUN, S.STEP))
    assert int(agg[S.N_TRIALS].sel({S.RUN: "a", S.STEP: 7})) == 0
    assert np.isnan(float(agg["f1_mean"].sel({S.RUN: "a", S.STEP: 7, S.LEVEL: "file"})))


def test_unknown_group_coordinate_is_an_error(small_plateau):
    ds, _ = small_plateau
    with pytest.raises(KeyError, match="no coordinate"):
        aggregate(ds, by=("arm", "step"))


def test_ungraded_do_not_enter_graded_statistics(small_plateau):
    ds, _ = small_plateau
    agg = aggregate(ds, by=(S.STEP,))
    assert (agg["f1_n"] <= agg[S.N_GRADED]).all()
    assert (agg["reward_n"] == agg[S.N_GRADED]).all()
    frame = pd.DataFrame({"u": agg[S.UNGRADED_RATE].values, "n": agg[S.N_TRIALS].values})
    assert ((frame.u >= 0) & (frame.u <= 1)).all()


def test_bounded_statistics_are_nan_outside_unit_interval(small_plateau):
    ds, _ = small_plateau
    ds = ds.copy(deep=True)
    reward = ds[S.REWARD].to_numpy().copy()
    first = int(np.flatnonzero(ds[S.GRADED].to_numpy())[0])
    reward[first] = 1.5
    ds[S.REWARD] = (S.TRIAL, reward)
    agg = aggregate(ds, by=(S.STEP,))
    step = ds[S.STEP].to_numpy()[first]
    assert np.isnan(float(agg["reward_n0"].sel({S.STEP: step})))
    others = agg["reward_n0"].drop_sel({S.STEP: step})
    assert np.isfinite(others.to_numpy()).all()


# ------------------------------------------------------------------ one phase per analysis
def _with_eval(ds, shift=0.3):
    """``ds`` (train) plus a copy of its trials as phase eval, every F1 and reward moved by
    ``shift`` (clipped): pooled with the train trials, every step mean would move."""
    import xarray as xr

    ev = ds.copy(deep=True)
    ev = ev.assign_coords({S.PHASE: (S.TRIAL, np.full(ev.sizes[S.TRIAL], "eval", dtype=object))})
    for var in (S.REWARD, S.F1):
        if var in ev:
            ev[var] = (ev[var] + shift).clip(0, 1)
    return xr.concat([ds, ev], dim=S.TRIAL)


def test_select_phase_rule(small_plateau):
    """One phase: as is. Train and eval: train, the eval trials counted as left out (attrs, the
    note, the fit summary). Eval and eval-only without a choice, or an absent phase: an error
    naming the phases. A chosen phase is kept alone."""
    from saturation.aggregate import phase_note, phase_summary, select_phase

    small_plateau, _ = small_plateau
    assert select_phase(small_plateau) is small_plateau
    mixed = _with_eval(small_plateau)
    n = small_plateau.sizes[S.TRIAL]
    train = select_phase(mixed)
    assert set(train[S.PHASE].values) == {"train"} and train.sizes[S.TRIAL] == n
    assert phase_summary(train) == {"phase": "train", "phases_left_out": {"eval": n}}
    assert phase_note(train) == f"phase train only ({n} trials); left out: {n} eval trials (--phase to choose)"
    ev = select_phase(mixed, "eval")
    assert set(ev[S.PHASE].values) == {"eval"} and phase_summary(ev)["phases_left_out"] == {"train": n}
    assert phase_note(select_phase(small_plateau, "train")) == ""
    no_train = ev.assign_coords({S.PHASE: (S.TRIAL, np.where(np.arange(n) % 2, "eval", "eval_only"))})
    with pytest.raises(ValueError, match=rf"several phases, eval \({n // 2} trials\), eval_only \({n // 2} trials\)"):
        select_phase(no_train)
    with pytest.raises(ValueError, match=r"phase 'eval_only' is not in the trials \(phases: eval, train\)"):
        select_phase(mixed, "eval_only")
    with pytest.raises(ValueError, match="no phase column"):
        select_phase(small_plateau.drop_vars(S.PHASE), "train")


def test_no_model_pools_train_and_eval_trials(small_plateau):
    """Every model entry point reads the train trials of a train + eval Dataset exactly as it
    reads the train trials alone (the plateau's per-step statistics, the per-run fits, the
    pass@k groups, the saturation-curve arms, the transfer groups)."""
    from saturation.models.learning import group_counts
    from saturation.models.plateau import step_data
    from saturation.models.sigmoid import arm_steps
    from saturation.models.transfer import transfer_data

    small_plateau, _ = small_plateau
    mixed = _with_eval(small_plateau)
    a, b = step_data(mixed, response=S.F1), step_data(small_plateau, response=S.F1)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.n, b.n)
    assert a.summary["phases_left_out"] == {"eval": small_plateau.sizes[S.TRIAL]}
    assert group_counts(mixed).equals(group_counts(small_plateau))
    spec = TransferSpec(
        arms=(
            ArmSpec("base", 6 * 16 * 4, ((1, 0.4), (6, 0.3)), ((1, 0.4), (6, 0.5))),
            ArmSpec("s85", 6 * 16 * 4, ((1, 0.4), (6, 0.4)), ((1, 0.5), (6, 0.45))),
        ),
        prompts_per_step=16,
        samples_per_prompt=4,
        pool_size=100,
    )
    arms, _ = simulate_transfer(spec, seed=1)
    arms_mixed = _with_eval(arms)
    x, y = arm_steps(arms_mixed), arm_steps(arms)
    np.testing.assert_array_equal(x.mean, y.mean)
    assert x.summary["phases_left_out"] == {"eval": arms.sizes[S.TRIAL]}
    t, u = transfer_data(arms_mixed), transfer_data(arms)
    assert t.summary["n_trials"] == u.summary["n_trials"] == arms.sizes[S.TRIAL]
    assert t.empirical.equals(u.empirical)
