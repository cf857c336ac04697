"""Does a ceiling hang on one curve family? The saturation curve against the hinge and the
exponential approach, per arm, by leave-one-step-out.

Per arm and on the same data - its per-step means, Gaussian with their sampling variance
plus a step noise - three curve families are fitted: the sigmoid of
:mod:`saturation.models.sigmoid` (Gaussian likelihood; PSIS-LOO of its NUTS draws), the
hinge (change point with separate segments) and the exponential approach of
:mod:`saturation.models.plateau` (exact draws and exact LOO). ArviZ's comparison gives each
family's ELPD and its stacking weight (Yao et al. 2018). A family is decisively better than
another when its ELPD is higher by more than :data:`DECISIVE_ELPD` and by more than
:data:`DECISIVE_SE` standard errors of the difference (the LOO FAQ calls differences below
4 small; stacking weights swing between near-ties: on 40 steps of 128 rollouts a hinge and
a sigmoid often differ by less than one SE). Two caveats follow:

* another family is decisively better than the sigmoid: the arm's ceiling rests on a
  family the data do not favour;
* the exponential is not decisively worse than the sigmoid, yet their asymptotes' 94 %
  HDIs do not overlap: the ceiling depends on the curve family, which the data cannot
  choose.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from saturation import schema as S
from saturation._lazy import held_idata, lazy
from saturation.models.persist import FitObject, TableView
from saturation.models.plateau import StepData, loo_entries, loo_table
from saturation.models.sampling import SamplerConfig, interval
from saturation.summary import json_safe, short_repr

if TYPE_CHECKING:
    import arviz as az
else:
    az = lazy("arviz")

#: the families compared, in the order of the tables
FAMILIES = ("sigmoid", "hinge", "exponential")
#: a family is decisively better than another when its ELPD is higher by more than this ...
DECISIVE_ELPD = 4.0
#: ... and by more than this many standard errors of the difference
DECISIVE_SE = 2.0


@dataclass
class FamilyComparison(FitObject):
    """Result of :func:`compare_curve_families`.

    Parameters
    ----------
    loo : dict
        Per arm, ``az.compare``'s table of the three families (ELPD, SE, stacking weight,
        ``loo_method``, ``caveat``).
    exponential_asymptote : dict
        Per arm, the exponential approach's asymptote ``{"mean", "median", "sd", "hdi"}``.
    sigmoid_asymptote : dict
        Per arm, the Gaussian sigmoid's asymptote (the fit the weights refer to).
    fits : dict
        Per arm, the hinge's and the exponential's InferenceData.
    """

    loo: dict[str, pd.DataFrame]
    exponential_asymptote: dict[str, dict[str, Any]]
    sigmoid_asymptote: dict[str, dict[str, Any]]
    fits: dict[str, dict[str, az.InferenceData]]

    def __repr__(self) -> str:
        head = f"FamilyComparison({len(self.loo)} arm(s))"
        lines = [
            f"{arm}: preferred {self.preferred(arm)}; weights "
            + ", ".join(f"{fam} {w:.2f}" for fam, w in t["weight"].items())
            for arm, t in self.loo.items()
        ]
        return short_repr(head, lines)

    def preferred(self, arm: str) -> str:
        """The family with the largest stacking weight for ``arm``."""
        return str(self.loo[arm]["weight"].idxmax())

    def _behind(self, arm: str, family: str, than: str) -> tuple[float, float]:
        """ELPD of ``than`` minus that of ``family`` and the SE of the difference."""
        t = self.loo[arm]
        d = float(t.loc[than, "elpd_loo"] - t.loc[family, "elpd_loo"])
        # az.compare gives the SE of each difference to the best model; between two others
        # the larger of the two SEs to the best stands in (conservative enough for a flag)
        if than == str(t["elpd_loo"].idxmax()):
            return d, float(t.loc[family, "dse"])
        return d, float(max(t.loc[family, "dse"], t.loc[than, "dse"]))

    def decisively_behind(self, arm: str, family: str, than: str) -> bool:
        """``than``'s ELPD exceeds ``family``'s by more than :data:`DECISIVE_ELPD` and by
        more than :data:`DECISIVE_SE` standard errors."""
        d, se = self._behind(arm, family, than)
        return d > max(DECISIVE_ELPD, DECISIVE_SE * se)

    def sigmoid_worse(self, arm: str) -> bool:
        """The best family is decisively better than the sigmoid."""
        best = str(self.loo[arm]["elpd_loo"].idxmax())
        return best != "sigmoid" and self.decisively_behind(arm, "sigmoid", best)

    def family_dependent(self, arm: str) -> bool:
        """The exponential is not decisively worse than the sigmoid, and their asymptotes'
        94 % HDIs do not overlap."""
        g, e = self.sigmoid_asymptote[arm]["hdi"], self.exponential_asymptote[arm]["hdi"]
        disjoint = g[1] < e[0] or e[1] < g[0]
        return disjoint and not self.decisively_behind(arm, "exponential", "sigmoid")

    def caveat(self, arm: str) -> str:
        """ "" unless the sigmoid's ceiling is doubtful: another family is decisively better
        (:meth:`sigmoid_worse`), or an equally good family puts the ceiling elsewhere
        (:meth:`family_dependent`)."""
        if self.sigmoid_worse(arm):
            best = str(self.loo[arm]["elpd_loo"].idxmax())
            d, se = self._behind(arm, "sigmoid", best)
            return (
                f"the data favour the {best} (ELPD {d:.1f} +- {se:.1f} above the sigmoid's): the sigmoid's ceiling "
                f"is an extrapolation of a family they do not favour"
            )
        if self.family_dependent(arm):
            d, se = self._behind(arm, "exponential", "sigmoid")
            return (
                f"the ceiling depends on the curve family: the sigmoid's {_fmt(self.sigmoid_asymptote[arm])} and the "
                f"exponential's {_fmt(self.exponential_asymptote[arm])} do not overlap, and the data do not tell the "
                f"two apart (ELPD difference {d:.1f} +- {se:.1f})"
            )
        return ""

    def to_dict(self) -> dict[str, Any]:
        """Per arm: ``weights`` and ``elpd`` ({"elpd", "se"}) by family, ``loo_method``,
        ``preferred`` (the largest stacking weight), ``sigmoid_decisively_worse``,
        ``family_dependent_ceiling``, ``caveat``, ``psis_caveat`` and both asymptotes (the ``families``
        entry of ``saturation compare --json``)."""
        out = {}
        for arm, t in self.loo.items():
            out[arm] = {
                "weights": {f: float(t.loc[f, "weight"]) for f in FAMILIES},
                "elpd": {f: {"elpd": float(t.loc[f, "elpd_loo"]), "se": float(t.loc[f, "se"])} for f in FAMILIES},
                "loo_method": {f: str(t.loc[f, "loo_method"]) for f in FAMILIES},
                "preferred": self.preferred(arm),
                "sigmoid_decisively_worse": self.sigmoid_worse(arm),
                "family_dependent_ceiling": self.family_dependent(arm),
                "caveat": self.caveat(arm),
                "psis_caveat": t.attrs.get("caveat", ""),
                "sigmoid_asymptote": self.sigmoid_asymptote[arm],
                "exponential_asymptote": self.exponential_asymptote[arm],
            }
        return out

    def summary(self) -> pd.DataFrame:
        """Every arm's LOO table, one block per arm (``arm`` and ``family`` columns)."""
        frames = [t.reset_index(names="family").assign(arm=arm) for arm, t in self.loo.items()]
        return pd.concat(frames, ignore_index=True)

    def tables(self) -> dict[str, TableView]:
        """``families_<arm>``: each arm's LOO table (``family`` a column)."""
        return {
            f"families_{arm}": TableView(t.reset_index(names="family"), f"Curve families for {arm} (LOO)")
            for arm, t in self.loo.items()
        }

    def details(self) -> list[str]:
        """:meth:`sentences`, each a sentence."""
        return [f"{line}." for line in self.sentences()]

    def results(self) -> dict[str, Any]:
        """``{"families": to_dict()}``."""
        return {"families": json_safe(self.to_dict())}

    def sentences(self) -> list[str]:
        """One line per arm: the weights, both ceilings and the caveats."""
        lines = []
        for arm, t in self.loo.items():
            w = ", ".join(f"{f} {t.loc[f, 'weight']:.2f}" for f in FAMILIES)
            e, g = self.exponential_asymptote[arm], self.sigmoid_asymptote[arm]
            close = "" if self.sigmoid_worse(arm) else ", the sigmoid not decisively worse than the best"
            line = (
                f"{arm}: curve families by leave-one-step-out (stacking weights) {w}{close}; asymptote "
                f"{_fmt(g)} (sigmoid) vs {_fmt(e)} (exponential)"
            )
            notes = [n for n in (self.caveat(arm), t.attrs.get("caveat", "")) if n]
            lines.append(line + (f". Caveat: {'; '.join(notes)}" if notes else ""))
        return lines


def _fmt(e: dict[str, Any]) -> str:
    return f"{e['mean']:.3f} [{e['hdi'][0]:.3f}, {e['hdi'][1]:.3f}]"


def arm_step_data(data: Any, a: int) -> StepData:
    """Arm ``a``'s observed steps as the plateau model's per-step inputs (one level named
    after the arm). A logged metric (:func:`saturation.models.sigmoid.series_arm_steps`)
    becomes a logged series as the plateau model reads one: no within-step variance, ``n``
    infinite, the step noise tau carries all of it (as the sigmoid's Gaussian fit of it)."""
    obs = data.n[a] > 0
    arm = data.arms[a]
    logged = data.summary.get("series") is not None
    n = np.full(int(obs.sum()), np.inf) if logged else data.n[a, obs]
    return StepData(
        data.steps[obs],
        [arm],
        data.mean[a, obs][None],
        n[None],
        data.var_mean[a, obs][None],
        "reward",
        summary={"arm": arm, "n_trials": None if logged else int(data.n[a].sum())},
    )


def compare_curve_families(fit: Any, *, seed: int = 0, sampler: SamplerConfig | None = None) -> FamilyComparison:
    """Compare the sigmoid, the hinge and the exponential approach per arm by LOO.

    Parameters
    ----------
    fit : SigmoidFit
        A sigmoid fit with the Gaussian likelihood: its per-step data are the other
        families' too, so every family has the same likelihood on the same per-step means
        (:meth:`saturation.models.sigmoid.SigmoidFit.families` refits a binomial fit
        with the Gaussian likelihood first).
    seed : int
        Seeds the hinge and the exponential fits.
    sampler : SamplerConfig, optional
        Sampler of the hinge and the exponential (default: their exact draws).

    Returns
    -------
    FamilyComparison
        Per arm the LOO table with stacking weights, both asymptotes and the fits.

    Notes
    -----
    The hinge and the exponential have exact leave-one-out values
    (:func:`saturation.models.plateau_model.exact_loo`), taken under independent step noise
    as the sigmoid's are: PSIS estimates of its NUTS draws, flagged in the table's
    ``caveat`` when a Pareto k exceeds 0.7.
    """
    if fit.estimands["likelihood"] != "gaussian":
        raise ValueError("the curve families are compared on a Gaussian sigmoid fit (SigmoidFit.families refits one)")
    data = fit.data
    tables, expo, sig, fits = {}, {}, {}, {}
    for a, arm in enumerate(data.arms):
        sd = arm_step_data(data, a)
        # independent step noise for every curve's LOO: the sigmoid has no AR(1) form
        elpd, method, arm_fits = loo_entries(
            sd, ("hinge", "exponential"), seed=seed, sampler=sampler, loo_noise="independent"
        )
        with warnings.catch_warnings():  # high Pareto k is the table's own caveat
            warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto", category=UserWarning)
            elpd["sigmoid"] = az.loo(fit.pointwise(a), pointwise=True)
        method["sigmoid"] = "PSIS"
        tables[arm] = loo_table(elpd, method)
        expo[arm] = interval(arm_fits["exponential"].posterior["asymptote"].to_numpy().ravel())
        sig[arm] = interval(held_idata(fit).posterior["asymptote"].isel({S.ARM: a}).to_numpy().ravel())
        fits[arm] = arm_fits
    return FamilyComparison(tables, expo, sig, fits)
