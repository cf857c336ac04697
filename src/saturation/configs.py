"""The analyses' configs and priors: one dataclass per analysis, the only home of its settings.

Each field is declared once with :func:`saturation.settings.setting`: its help text (this
module's API docs), its command-line option and its spec key come from that declaration
(:mod:`saturation.settings`), and its range is checked by the class's ``validate()`` for
the CLI, the specs and the Python API alike. The fit functions take one of these or
keywords, never both (:func:`saturation.limits.config_or_keywords`).

Nothing here imports numpy: the command line builds its options from these classes in
milliseconds. The numeric use of the priors (scaling them to the data) lives with each model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from saturation import schema as S
from saturation import settings
from saturation.limits import (
    DEFAULT_CHAINS,
    DEFAULT_DRAWS,
    DEFAULT_TUNE,
    EXACT_DRAWS,
    prior_problems,
    rope_problems,
    sampler_problems,
)
from saturation.settings import STRS, document, setting


class _CheckedPriors:
    """What every Priors dataclass shares: its values are checked when it is made
    (:func:`saturation.limits.prior_problems`: finite numbers, positive scales)."""

    def __post_init__(self) -> None:
        problems = prior_problems(self)
        if problems:
            raise ValueError("; ".join(problems))


# ====================================================================== sampler
@dataclass(frozen=True)
class SamplerConfig:
    """Sampler settings. ``sampler``: "auto" (default: the fastest that works for the model:
    independent exact draws for the Gaussian plateau model, else nutpie), "exact" (Gaussian
    plateau model only, see ``models._exact``), "nutpie" (falls back to "pymc" if nutpie is
    not installed), "pymc", or "numpyro" (only if numpyro and jax are installed; measured
    in benchmarks/plateau_bench.py, not a dependency).

    Parameters
    ----------
    draws : int, optional
        Draws per chain kept; None (the default): the sampler's own default,
        :data:`~saturation.limits.EXACT_DRAWS` (5,000) for the exact sampler's independent
        draws, :data:`~saturation.limits.DEFAULT_DRAWS` (1,000) for NUTS
        (:meth:`draws_for`).
    tune : int
        Tuning (warm-up) draws per chain (unused by the exact sampler).
    chains : int
        Chains (independent streams of draws for the exact sampler).
    sampler : {"auto", "exact", "nutpie", "pymc", "numpyro"}
        Which sampler (above).
    target_accept : float
        NUTS target acceptance rate.
    progress : bool
        Show the sampler's progress bar.
    low_rank : bool
        nutpie only: adapt a low-rank mass matrix (for strongly correlated posteriors).
    """

    draws: int | None = None
    tune: int = DEFAULT_TUNE
    chains: int = DEFAULT_CHAINS
    sampler: str = "auto"
    target_accept: float = 0.95
    progress: bool = False
    low_rank: bool = False

    def draws_for(self, exact: bool) -> int:
        """Draws per chain: ``draws`` when given, else the default of the sampler that draws
        (``exact``: the exact Gaussian plateau sampler; else NUTS).

        Parameters
        ----------
        exact : bool
            Whether the exact sampler draws the fit.

        Returns
        -------
        int
            Draws per chain.
        """
        if self.draws is not None:
            return self.draws
        return EXACT_DRAWS if exact else DEFAULT_DRAWS

    def resolved(self, exact: bool) -> SamplerConfig:
        """These settings with ``draws`` filled in (:meth:`draws_for`): what a fit records."""
        return self if self.draws is not None else replace(self, draws=self.draws_for(exact))

    def problems(self) -> list[str]:
        """Every setting out of its range (:func:`saturation.limits.sampler_problems`).

        Returns
        -------
        list of str
            One line per problem.
        """
        return sampler_problems(
            draws=self.draws,
            # not given: chains x draws checked at the larger of the two samplers' defaults
            default_draws=max(DEFAULT_DRAWS, EXACT_DRAWS),
            tune=self.tune,
            chains=self.chains,
            target_accept=self.target_accept,
        )

    def validate(self) -> None:
        """Raise ValueError naming every setting out of its range."""
        problems = self.problems()
        if problems:
            raise ValueError("invalid sampler settings: " + "; ".join(problems))


#: the SamplerConfig fields a spec's [sampler] table or the command line may set
OVERRIDABLE = ("draws", "tune", "chains", "sampler", "target_accept", "low_rank", "progress")


def with_overrides(base: SamplerConfig, overrides: dict[str, Any]) -> SamplerConfig:
    """``base`` (a model's default sampler) with the given settings replaced; ``None``
    values (an option not given) keep the default. The CLI and the report both use it."""

    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ValueError(f"unknown sampler setting(s) {unknown}; known: {list(OVERRIDABLE)}")
    config = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    config.validate()
    return config


def transfer_sampler(task_effects: str) -> SamplerConfig:
    """The sampler settings of a transfer fit with these ``task_effects`` unless told
    otherwise (:data:`saturation.schema.TRANSFER_SAMPLER`; ``models.transfer`` says why).

    Parameters
    ----------
    task_effects : {"integrated", "sampled"}
        The transfer model's task effects.

    Returns
    -------
    SamplerConfig
        Its default settings.
    """
    return SamplerConfig(**S.TRANSFER_SAMPLER[task_effects], low_rank=False)  # type: ignore[arg-type]


# ====================================================================== plateau
@dataclass(frozen=True)
class VerdictRule:
    """Thresholds of the one plateau decision rule (``models.verdicts.plateau_verdict``).

    Chosen from calibration on per-trial simulations that are not the model
    (docs/calibration.md, "Verdicts and shapes on data that is not the model"): on steadily
    rising metrics at most 5 % "plateaued" or "slowed" in every design; on data shaped like
    the reference study at least 80 % where the data can show it (64 prompts a step).

    Parameters
    ----------
    bf_line : float
        "No change point" when BF(change point : line) is below this.
    edge_mass : float
        ... or when more than this posterior mass sits on the outermost candidates.
    edge_candidates : int
        How many candidates at each end count as the edge.
    p_rise : float
        Nothing can plateau before it rose: P(rise > 0) at least this (the rise up to just after the break).
    p_flat : float
        "Plateaued": P(flat) at least this (flat: the late gain inside the absolute ROPE or
        inside the relative ROPE x the early gain).
    slow_ratio : float
        "Slowed": the late slope below this multiple of the rise's average rate ...
    p_slow : float
        ... with at least this probability (0.85 from the verdict calibration of issue 44,
        docs/calibration.md: rising lines called "slowed" stayed at 0.039 at most, 4 prompts
        a step, from 0.95 down to 0.80, while study-shaped runs in the noisy design were
        called 0.78 -> 0.91).
    p_still : float
        "Still rising": P(late slope > 0) at least this.
    bf_shape : float
        The curve's shape (``models.verdicts.curve_shape``): a smooth approach, a break or a
        line when its Bayes factor against the others is at least this. 30 from the
        calibration (docs/calibration.md): hinge-shaped per-trial data reached BF(smooth :
        break) 7-9 at their 95th percentile (the smooth curve's Occam factor, where the
        noise hides the kink), so 3 named 19-36 % of them smooth; smooth approaches on logged
        series reach 10^3.5 and more.
    """

    bf_line: float = 1.0
    edge_mass: float = 0.5
    edge_candidates: int = 3
    p_rise: float = 0.95
    p_flat: float = 0.90
    slow_ratio: float = 0.5
    p_slow: float = 0.85
    p_still: float = 0.95
    bf_shape: float = 30.0


@dataclass(frozen=True)
class PlateauPriors(_CheckedPriors):
    r"""Priors of the plateau model (``None``: scaled to the data,
    :func:`saturation.models.plateau.resolve_priors`; the model's Notes give each).

    Parameters
    ----------
    min_segment : int
        Fewest steps on each side of a candidate change point.
    start_mu, level_mu : float, optional
        Prior centres of the start and of the value at the change point (default: the mean
        of the first 3 steps / of the last third). Fixed centres make the prior independent
        of the data (simulation-based calibration needs that).
    start_sd, level_sd : float, optional
        Their prior sds (default: the range of the per-step means, at least 0.01).
    late_slope_sd : float, optional
        A fixed late-slope prior sd (default: the unit-information width per candidate).
    jump_sd : float, optional
        Prior sd of the jump at a known break (split model; default the range).
    tau_sd : float, optional
        HalfNormal scale of the step overdispersion (default the range).
    spread_sd : float
        HalfNormal scale, in steps, of the spread of pooled level change points.
    log_kappa_mu, log_kappa_sd : float
        Binomial likelihood: Normal prior of the beta-binomial log concentration.
    log_phi_mu, log_phi_sd : float
        ZOIB likelihood: Normal prior of the interior Beta's log precision.
    tau_logit_sd : float
        ZOIB: HalfNormal scale of the logit-scale step offsets.
    interior_shift_sd, interior_weight_mu, interior_weight_sd : float
        ZOIB: Normal priors of the interior mean's shift and its weight on the curve.
    """

    min_segment: int = 5
    start_mu: float | None = None
    level_mu: float | None = None
    start_sd: float | None = None
    level_sd: float | None = None
    late_slope_sd: float | None = None
    jump_sd: float | None = None
    tau_sd: float | None = None
    spread_sd: float = 5.0
    log_kappa_mu: float = math.log(200.0)
    log_kappa_sd: float = 1.5
    log_phi_mu: float = math.log(5.0)
    log_phi_sd: float = 1.5
    tau_logit_sd: float = 0.5
    interior_shift_sd: float = 1.5
    interior_weight_mu: float = 0.5
    interior_weight_sd: float = 0.5


@document
@dataclass(frozen=True)
class PlateauConfig:
    """Structure and settings of one plateau fit (``saturation plateau``; a spec of kind
    "plateau"), stamped into the InferenceData attrs."""

    response: str = setting(
        S.F1,
        metavar="NAME",
        help="The per-level variable (f1, precision, recall, ...), a trial variable (e.g. reward) or a logged "
        "series' variable.",
    )
    levels: tuple[str, ...] | None = setting(
        None, metavar="L1,L2", help="The levels to fit, e.g. file,module (default: all levels)."
    )
    breakpoint: float | None = setting(
        None, metavar="STEP", help="A known break step (default: unknown, marginalised over every candidate step)."
    )
    shared: bool = setting(
        False,
        flag="--pooled",
        help="Pool the levels' change points around a common one (default: each level its own; pooled "
        "intervals undercover when the levels share a misfit, docs/calibration.md).",
    )
    continuity: str | None = setting(
        None,
        choices=S.CONTINUITIES,
        help="hinge (continuous), jump (the split model) or auto (both, averaged by their exact marginal "
        "likelihoods). Default: jump for a known break; for an unknown one auto, which for trials weighs the "
        "jump in only where it is decisively better than the hinge (jump_gate).",
    )
    jump_gate: float | None = setting(
        None,
        flag=None,
        spec=None,
        help="With continuity auto: the jump is weighed in only for levels where BF(jump : hinge) is at least "
        "this (the hinge alone elsewhere); None: always averaged.",
    )
    likelihood: str = setting(
        "gaussian",
        choices=S.LIKELIHOODS,
        help="gaussian: per-step means with their sampling variance and overdispersion; binomial: "
        "beta-binomial success counts of a 0/1 response; zoib: zero-one-inflated Beta on per-trial values in "
        "[0, 1] (docs/plateau.md).",
    )
    rope: float = setting(S.DEFAULT_ROPE, metavar="X", help="The late-gain ROPE, in the metric's units.")
    rope_relative: float | None = setting(
        S.DEFAULT_ROPE_RELATIVE,
        metavar="SHARE",
        help="Also flat when the late gain is within +-SHARE x the early gain (0 or None: the absolute ROPE alone).",
    )
    rule: VerdictRule = setting(
        default_factory=VerdictRule, flag=None, spec=None, help="Thresholds of the verdict rule."
    )
    priors: PlateauPriors = setting(
        default_factory=PlateauPriors, flag=None, spec=None, help="The priors (a spec's [priors] table)."
    )
    sampler: SamplerConfig = setting(
        default_factory=SamplerConfig, flag=None, spec=None, help="Sampler settings (a spec's [sampler] table)."
    )
    noise: str | None = setting(
        None,
        choices=S.NOISES,
        help="The step noise: independent across steps; ar1: autocorrelated on the step axis (drifting "
        "difficulty, smoothed logs), its coefficient summed exactly; or auto: both, averaged by their evidence "
        "(half the prior mass on independent noise). ar1 and auto need the Gaussian likelihood and the exact "
        "sampler. Default: ar1 for a logged series, auto for trials, independent for the sampled likelihoods "
        "(with a warning when the residuals are autocorrelated).",
    )
    metric_max: float | None = setting(
        1.0,
        metavar="X",
        help="The metric's maximum, to which the headroom is measured (1 for a rate); None, or data outside "
        "[0, X]: no headroom to the maximum.",
    )
    evidence_weight: float | None = setting(
        None,
        flag=None,
        spec=None,
        help="Pooled model: the weight of the levels' combined evidence on the common change point; None "
        "estimates it from the data, 1.0 treats the levels as independent.",
    )

    def __post_init__(self) -> None:
        if self.continuity is None:
            # an unknown break resolves at the fit: "auto" for a logged series, else "hinge"
            object.__setattr__(self, "continuity", "jump" if self.breakpoint is not None else None)
        if self.levels is not None:
            object.__setattr__(self, "levels", tuple(self.levels))
        if self.rope_relative == 0:  # "0: off", as the command line has always read it
            object.__setattr__(self, "rope_relative", None)

    @property
    def exact(self) -> bool:
        """The exact sampler draws this fit: the Gaussian likelihood, sampler "auto" or
        "exact" (the only path with the shapes' evidences and AR(1) step noise)."""
        return self.likelihood == "gaussian" and self.sampler.sampler in ("auto", "exact")

    def validate(self) -> None:
        """Raise ValueError naming every setting out of its range."""
        problems = []
        if self.evidence_weight is not None and not 0 < self.evidence_weight <= 1:
            problems.append(f"evidence_weight must lie in (0, 1], got {self.evidence_weight}")
        if self.jump_gate is not None and (self.continuity not in (None, "auto") or not self.jump_gate > 0):
            problems.append(f"jump_gate needs continuity 'auto' and a Bayes factor above 0, got {self.jump_gate!r}")
        if self.continuity is not None and self.continuity not in S.CONTINUITIES:
            problems.append(f"continuity must be one of {S.CONTINUITIES}, got {self.continuity!r}")
        if self.likelihood not in S.LIKELIHOODS:
            problems.append(f"likelihood must be one of {S.LIKELIHOODS}, got {self.likelihood!r}")
        if self.noise is not None and self.noise not in S.NOISES:
            problems.append(f"noise must be one of {S.NOISES}, got {self.noise!r}")
        elif self.noise in ("ar1", "auto") and not self.exact:
            problems.append(f"noise {self.noise!r} needs the Gaussian likelihood and the exact sampler (auto or exact)")
        if self.breakpoint is not None and not (math.isfinite(self.breakpoint) and self.breakpoint >= 0):
            problems.append(f"breakpoint must be a step (a number >= 0), got {self.breakpoint!r}")
        problems += rope_problems(self.rope, self.rope_relative, self.metric_max)
        problems += self.sampler.problems()
        if self.priors.min_segment < 2:
            problems.append("priors.min_segment must be >= 2")
        if problems:
            raise ValueError("invalid plateau configuration:\n  - " + "\n  - ".join(problems))


# ====================================================================== transfer
@dataclass(frozen=True)
class TransferPriors(_CheckedPriors):
    """Priors (logit scale) of the transfer model.

    Intercepts ~ N(logit of the reference arm's empirical first-step value, ``intercept_sd``);
    random-walk increments between knots ~ N(0, sigma_f), sigma_f ~
    Gamma(8, 8 / ``rw_sd``) (``RW_SD_SHAPE``; mean ``rw_sd``; zero-avoiding, which removes the funnel a
    half-normal left at sigma_f -> 0); ungraded task-effect sd (logit scale) ~
    HalfNormal(``task_sd``); reward task-effect sd (reward scale) ~
    HalfNormal(``reward_task_sd``); per-trial reward sd per arm ~ HalfNormal(``reward_sd``).
    Calibrate's simulator reads these same fields.

    Parameters
    ----------
    intercept_sd : float
        Prior sd of the first knot (logit scale).
    rw_sd : float
        Prior mean of the random-walk increment sd between knots.
    task_sd : float
        HalfNormal scale of the ungraded part's task-effect sd (logit scale).
    reward_task_sd : float
        HalfNormal scale of the reward part's task-effect sd (reward scale).
    reward_sd : float
        HalfNormal scale of the per-trial reward sd per arm.
    start_mu : tuple of float, optional
        Fixed prior means of the first knot (logit ungraded rate, logit graded-only reward)
        instead of the data-centred ones (simulation-based calibration needs data-free priors).
    """

    intercept_sd: float = 1.5
    rw_sd: float = 0.25
    task_sd: float = 1.0
    reward_task_sd: float = 0.25
    reward_sd: float = 0.5
    start_mu: tuple[float, float] | None = None


@document
@dataclass(frozen=True)
class TransferConfig:
    """Structure and settings of one transfer fit (``saturation transfer``; a spec of kind
    "transfer"), stamped into the InferenceData attrs."""

    reference: str = setting("base", metavar="ARM", help="The reference arm.")
    arms: tuple[str, ...] | None = setting(
        None, metavar="A1,A2", help="The arms to include, the reference among them (default: all)."
    )
    first_steps: int = setting(4, help="The initial window, in steps.")
    knot_every: float = setting(4.0, metavar="STEPS", help="The knot spacing of the arm curves, in steps.")
    walk: str = setting(
        "auto",
        choices=S.WALKS,
        help="The parametrisation of the knot random walks: auto is centred with at least 400 trials per knot "
        "and arm, else non-centred.",
    )
    task_effects: str = setting(
        "integrated",
        choices=S.TASK_EFFECTS,
        help="integrated: the task effects integrated out per task (exact for the reward, quadrature for the "
        "ungraded indicator; about 50 parameters, no funnel when a task sd is near zero); sampled: every task "
        "effect a parameter, the same model (the slow cross-check, with more draws by default).",
    )
    priors: TransferPriors = setting(
        default_factory=TransferPriors, flag=None, spec=None, help="The priors (a spec's [priors] table)."
    )
    sampler: SamplerConfig = setting(
        default_factory=SamplerConfig, flag=None, spec=None, help="Sampler settings (a spec's [sampler] table)."
    )

    def validate(self, data: object = None) -> None:
        """Raise ValueError naming every setting out of its range (and, given the data, a
        reference arm they lack or fewer than two arms).

        Parameters
        ----------
        data : TransferData, optional
            The data the fit will read.
        """
        problems = self.sampler.problems()
        if self.first_steps < 1:
            problems.append(f"first_steps must be >= 1, got {self.first_steps}")
        if not self.knot_every > 0:
            problems.append(f"knot_every must be positive, got {self.knot_every}")
        if self.walk not in S.WALKS:
            problems.append(f"walk must be one of {list(S.WALKS)}, got {self.walk!r}")
        if self.task_effects not in S.TASK_EFFECTS:
            problems.append(f"task_effects must be one of {list(S.TASK_EFFECTS)}, got {self.task_effects!r}")
        if self.arms is not None and len(self.arms) < 2:
            problems.append(f"a transfer analysis compares at least two arms, got {', '.join(self.arms)}")
        elif self.arms is not None and self.reference not in self.arms:
            problems.append(f"reference arm {self.reference} is not one of the arms {', '.join(self.arms)}")
        arms = getattr(data, "arms", None)
        if arms is not None:
            if self.reference not in arms:
                problems.append(f"reference arm {self.reference!r} not in the data's arms {arms}")
            if len(arms) < 2:
                problems.append(f"need at least two arms, have {arms}")
        if problems:
            raise ValueError("invalid transfer configuration:\n  - " + "\n  - ".join(problems))


# ====================================================================== saturation curves
#: the saturation curve's likelihoods ("auto": binomial for binary rewards, else Gaussian)
SIGMOID_LIKELIHOODS = ("auto", "binomial", "gaussian")
#: NUTS settings of a saturation-curve fit: the asymptote and the midpoint trade off until a
#: run has bent well past its midpoint; with 1000 draws per chain R-hat reached 1.015 (bulk ESS
#: about 700) on simulated arms, so twice that, and target_accept 0.95. nutpie's low-rank mass
#: matrix follows the ridge (30 leapfrog steps a draw instead of 80 on the embedded r2egym arms,
#: half the time) but failed the convergence check in 13 of 100 SBC fits against 7 with the
#: diagonal one (1-2 divergences, bulk ESS down to 252): kept diagonal (docs/compare.md).
#: 500 tuning draws, not 1500: on the SBC design (``calibrate sigmoid``, seed 0, 100 fits of 4 x
#: 2000 draws) 3 fits missed the convergence check after 500, 10 after 1500 (divergences each;
#: the same coverage), and the tuning was 44 % of the leapfrog steps of the r2egym section
SIGMOID_SAMPLER = SamplerConfig(draws=2000, tune=500, target_accept=0.95)
#: paired arms (instance effects): the same ridge in more dimensions. With SIGMOID_SAMPLER 5 of
#: 8 simulated checkpoint-eval fits missed R-hat <= 1.01 on the asymptote and midpoint (1.011,
#: bulk ESS >= 520, no divergences); with 3000 draws after 2000 tuning all 5 passed (R-hat
#: <= 1.008, bulk ESS >= 570; docs/compare.md)
PAIRED_SAMPLER = SamplerConfig(draws=3000, tune=2000, target_accept=0.95)
#: "will more steps pay?": the expected gain over this many steps past an arm's last step ...
FORECAST_HORIZON = 20
#: ... against this threshold (the reference study's "flat within +-0.01")
FORECAST_DELTA = 0.01
#: a curve of four parameters is fitted on at least this many steps per arm
MIN_FIT_STEPS = 5
#: the curve's x axis: the step (counted from 1) or the compute spent through the step
X_AXES = ("step", "compute")
#: the default per-step compute: the trainer's wall-clock seconds per step (``Timer`` in
#: skyrl/train/utils/utils.py:32-45, logged as ``timing/step``, trainer.py:342,527); on a fixed
#: cluster GPU-seconds are this times the GPU count, a factor that only rescales C_mid
DEFAULT_COMPUTE = "timing/step"


@dataclass(frozen=True)
class SigmoidPriors(_CheckedPriors):
    """Priors of the saturation curve (per arm, independent across arms).

    ``r0`` and ``asymptote`` on the logit scale: logit(R0) ~ N(logit(first-step mean),
    ``r0_sd``) (centred on the data: where the run starts is observed), logit(A) ~
    N(0, ``asymptote_sd``) (not centred on the data: the ceiling must not be pulled to
    the last value); log B ~ N(0, ``efficiency_sd``); log C_mid ~ N(log of the x where the
    observed curve gets half-way, ``midpoint_sd``); the step noise tau ~
    HalfNormal(``step_sd``) (Gaussian likelihood) or the beta-binomial concentration
    log kappa ~ N(log 50, ``log_kappa_sd``) (binomial: prompt groups make a step's
    successes overdispersed).

    Parameters
    ----------
    r0_sd : float
        Prior sd of logit R0.
    r0_mu : float, optional
        A fixed prior centre of logit R0 instead of the first step's (SBC needs data-free priors).
    asymptote_sd : float
        Prior sd of logit A.
    efficiency_sd : float
        Prior sd of log B. 0.5: B in [0.37, 2.7] a priori (95 %). A steep B makes the curve a
        step whose position between two observed steps the data cannot locate; with 0.75 one
        of 8 simulated fits (benchmarks/sigmoid_recovery.py) sat in that ridge (R-hat 1.58,
        73 divergences), with 0.5 none did.
    midpoint_sd : float
        Prior sd of log C_mid.
    midpoint_mu : float, optional
        A fixed prior centre of log C_mid instead of the data's half-rise.
    step_sd : float
        HalfNormal scale of the Gaussian likelihood's step noise.
    log_kappa_mu, log_kappa_sd : float
        Binomial: the Normal prior of the beta-binomial log concentration.
    instance_sd : float
        Paired arms: HalfNormal scale of the instance effects' sd (logit scale).
    step_logit_sd : float
        Paired arms: HalfNormal scale of the (arm, step) jitter's sd (logit scale).
    """

    r0_sd: float = 1.0
    r0_mu: float | None = None
    asymptote_sd: float = 1.5
    efficiency_sd: float = 0.5
    midpoint_sd: float = 1.0
    midpoint_mu: float | None = None
    step_sd: float = 0.05
    log_kappa_mu: float = math.log(50.0)
    log_kappa_sd: float = 1.5
    instance_sd: float = 1.0
    step_logit_sd: float = 0.2


@document
@dataclass(frozen=True)
class SigmoidConfig:
    """Settings of one saturation-curve fit (``saturation compare``; a spec of kind
    "compare"), stamped into the InferenceData attrs. Each field is the CLI option and the
    spec key of the same name."""

    arms: tuple[str, ...] | None = setting(None, help="The arms to compare (default: all).", metavar="A,B")
    reference: str | None = setting(
        None, help="The arm the others are compared with (default: the first arm).", metavar="ARM"
    )
    likelihood: str = setting(
        "auto",
        choices=SIGMOID_LIKELIHOODS,
        help="auto: beta-binomial when every reward is 0 or 1 (resolve rates), else Gaussian on the per-step "
        "means with their sampling variance.",
    )
    priors: SigmoidPriors = setting(default_factory=SigmoidPriors, help="The curve's priors.", flag=None, spec=None)
    sampler: SamplerConfig = setting(
        SIGMOID_SAMPLER, help="NUTS settings (a spec's [sampler] table).", flag=None, spec=None
    )
    horizon: int = setting(
        FORECAST_HORIZON,
        help="Will more steps pay? The curve's gain over this many steps past each arm's last step ...",
    )
    delta: float = setting(FORECAST_DELTA, help="... reported as P(gain > delta).", metavar="D")
    arm_attrs: dict[str, dict[str, str]] = setting(
        default_factory=dict,
        kind=STRS,
        flag=None,
        help="Declared properties of the arms that may confound a contrast and that the trials do not carry, "
        '{arm: {key: value}} (spec: ["t2yarn:context=81920", ...]; CLI: --arm-attr t2yarn:context=81920).',
    )
    match: dict[str, str | None] = setting(
        default_factory=dict,
        kind=STRS,
        flag=None,
        help="The declared confounders, {key: value or None}: a contrast is matched on a key when both arms "
        'have that value (None: the same value), else it is flagged CONFOUNDED (spec: ["context=81920"]; '
        "CLI: --match context=81920).",
    )
    x: str = setting(
        "step",
        choices=X_AXES,
        help="The x axis: the step, or the compute each arm's run spent through the step (the cumulative "
        "``compute`` of the per-step metrics of the arms' runs).",
    )
    compute: str = setting(
        DEFAULT_COMPUTE,
        metavar="KEY[*KEY]",
        help="With x = compute: the per-step compute metric, a logged key (timing/step: seconds per step) or "
        "a product of keys (generate/avg_num_tokens*generate/batch_num_seq: tokens).",
    )
    paired: bool = setting(
        False,
        help="Arms evaluated on shared instances (checkpoint evals on one instance set) share logit-normal "
        "instance effects: a binomial per (arm, step, instance) instead of one beta-binomial cell per "
        "(arm, step) (binary rewards; its default sampler: 3000 draws after 2000 tuning).",
    )
    metric: str | None = setting(
        None,
        metavar="KEY",
        help="Fit a logged per-step metric of a series (each run an arm; e.g. reward/avg_raw_reward) instead "
        "of trials, with the Gaussian likelihood.",
    )
    backtest: int | None = setting(
        None,
        metavar="K",
        help="Also fit each arm's first K steps and check the forecast of its later steps: predictive-interval "
        "coverage and error against carrying the last value forward (doubles the time).",
    )
    families: bool = setting(
        False,
        help="Also compare the sigmoid with the hinge and the exponential approach per arm by "
        "leave-one-step-out: is a ceiling an artefact of the curve family?",
    )

    def validate(self) -> None:
        """Raise ValueError naming every setting out of its range or in conflict."""
        problems = self.sampler.problems()
        if self.metric is not None and (self.paired or self.likelihood == "binomial"):
            problems.append("a logged metric has no rollout counts: it is fitted unpaired, Gaussian")
        if self.paired and self.likelihood == "gaussian":
            problems.append("paired arms need binary rewards (the binomial likelihood, not the gaussian one)")
        if self.x not in X_AXES:
            problems.append(f"x must be one of {list(X_AXES)}, got {self.x!r}")
        if not all(part.strip() for part in self.compute.split("*")):
            problems.append(f"compute must be a metric key or a product of them (a*b), got {self.compute!r}")
        if self.likelihood not in SIGMOID_LIKELIHOODS:
            problems.append(f"likelihood must be one of {list(SIGMOID_LIKELIHOODS)}, got {self.likelihood!r}")
        if self.horizon < 1:
            problems.append(f"horizon must be at least 1 step, got {self.horizon}")
        if not math.isfinite(self.delta) or self.delta < 0:
            problems.append(f"delta must be a non-negative number, got {self.delta}")
        if self.backtest is not None and self.backtest < MIN_FIT_STEPS:
            problems.append(f"backtest {self.backtest}: a back-test fits at least {MIN_FIT_STEPS} steps per arm")
        if self.arms is not None and self.reference is not None and self.reference not in self.arms:
            problems.append(f"reference {self.reference} is not one of the arms {', '.join(self.arms)}")
        if any(not key for key in self.match) or any(not key for a in self.arm_attrs.values() for key in a):
            problems.append("an arm property needs a name (e.g. context)")
        if problems:
            raise ValueError("invalid saturation-curve configuration: " + "; ".join(problems))


# ====================================================================== learning diagnostics
@document
@dataclass(frozen=True)
class CardinalityConfig:
    """Settings of ``models.learning.diagnose_cardinality``: real localisation skill or a
    cardinality prior, per level of graded trials (stamped into its InferenceData attrs)."""

    levels: tuple[str, ...] | None = setting(None, flag=None, help="The levels (default: every level of the data).")
    run: str | None = setting(None, flag=None, help="The run, when the trials hold several.")
    draws: int = setting(1000, flag=None, spec=None, check="count", help="Draws per chain of each trend fit.")
    chains: int = setting(4, flag=None, spec=None, check="count", help="Chains of each trend fit.")

    def validate(self) -> None:
        """Raise ValueError naming every setting out of its range."""
        settings.check(self, "cardinality")


@document
@dataclass(frozen=True)
class ReliabilityConfig:
    """Settings of ``models.learning.diagnose_reliability``: reliability (pass@1, the mean
    reward) against capability (pass@k) in logged per-step series."""

    runs: tuple[str, ...] | None = setting(None, flag=None, help="The runs (default: every run that logged both).")
    pass1: str = setting(S.REWARD_MEAN, metavar="KEY", help="The mean-reward (pass@1) key of the metrics.")
    passk: str = setting(S.PASS_AT_K, metavar="KEY", help="The pass@k key of the metrics.")
    rope: float = setting(
        S.PASS_AT_K_ROPE,
        flag="--pass-rope",
        spec="pass_rope",
        metavar="DELTA",
        check="positive",
        help="The ROPE on the change of pass@k from the first to the last step.",
    )
    draws: int = setting(1000, flag=None, spec=None, check="count", help="Draws per chain of each trend fit.")
    chains: int = setting(4, flag=None, spec=None, check="count", help="Chains of each trend fit.")

    def validate(self) -> None:
        """Raise ValueError naming every setting out of its range."""
        settings.check(self, "reliability")


@document
@dataclass(frozen=True)
class EntropyConfig:
    """Settings of ``models.learning.diagnose_entropy``: did the policy entropy collapse, and
    did it turn together with the reward?"""

    runs: tuple[str, ...] | None = setting(None, flag=None, help="The runs (default: every run that logged both).")
    entropy: str = setting(S.POLICY_ENTROPY, metavar="KEY", help="The policy-entropy key of the metrics.")
    reward: str = setting(
        S.REWARD_MEAN, flag=None, spec=None, help="The reward key (the reliability diagnosis' pass1)."
    )
    rope_relative: float = setting(
        S.ENTROPY_ROPE_RELATIVE,
        flag="--entropy-rope",
        spec="entropy_rope",
        metavar="SHARE",
        check="positive",
        help="The ROPE on the entropy's relative change from the first to the last step.",
    )
    draws: int = setting(1000, flag=None, spec=None, check="count", help="Draws per chain of each trend fit.")
    chains: int = setting(4, flag=None, spec=None, check="count", help="Chains of each trend fit.")

    def validate(self) -> None:
        """Raise ValueError naming every setting out of its range."""
        settings.check(self, "entropy")


@document
@dataclass(frozen=True)
class ComponentsConfig:
    """Settings of ``models.learning.diagnose_components``: did each component of a
    composite reward move?"""

    components: tuple[str, ...] = setting(
        metavar="KEY1,KEY2",
        help="The reward components, by logged key (e.g. environment/pass_ratio,environment/tag_f1) or variable.",
    )
    weights: tuple[float, ...] | None = setting(
        None,
        spec="component_weights",
        metavar="W1,W2",
        check="finite",
        help="Their weights in the reward: checks that the logged components add up to the logged reward, and "
        "gives each component's share of the reward's change (None: not checked, no shares).",
    )
    runs: tuple[str, ...] | None = setting(
        None, flag=None, spec="components_runs", help="The runs (default: every run that logged all components)."
    )
    reward: str = setting(S.REWARD_MEAN, flag=None, spec=None, help="The reward key.")
    rope: float = setting(
        S.COMPONENT_ROPE,
        flag="--component-rope",
        spec="component_rope",
        metavar="DELTA",
        check="positive",
        help="The ROPE on each component's change.",
    )
    draws: int = setting(1000, flag=None, spec=None, check="count", help="Draws per chain of each trend fit.")
    chains: int = setting(4, flag=None, spec=None, check="count", help="Chains of each trend fit.")

    def __post_init__(self) -> None:
        if not self.components:
            raise ValueError("components: name at least one reward component")
        if self.weights is not None and len(self.weights) != len(self.components):
            raise ValueError(
                f"weights: {len(self.weights)} weight(s) for {len(self.components)} component(s) "
                f"{', '.join(self.components)}"
            )
        problems = settings.problems(self)
        if problems:
            raise ValueError("; ".join(problems))


@document
@dataclass(frozen=True)
class SeriesConfig:
    """A series analysis (a spec of kind "series"): the reliability (pass@1 vs pass@k) and
    entropy diagnoses of the same runs and, when the spec names ``plateau_run`` and
    ``plateau_after``, the plateau model with that known break on that run's pass@1 and,
    when it names ``components``, the reward components' diagnosis."""

    reliability: ReliabilityConfig = setting(
        default_factory=ReliabilityConfig, flag=None, spec=None, help="pass@1 against pass@k."
    )
    entropy: EntropyConfig = setting(
        default_factory=EntropyConfig,
        flag=None,
        spec=None,
        help="The entropy diagnosis (run where the series logs the entropy).",
    )
    reference_runs: tuple[str, ...] | None = setting(
        None, flag=None, help="The study's names of the runs, in ``runs`` order (the replica's check only)."
    )
    plateau_run: str | None = setting(None, flag=None, help="The run whose pass@1 gets the plateau model.")
    plateau: PlateauConfig | None = setting(
        None, flag=None, spec=None, help="That model (a known break: the spec's ``plateau_after``)."
    )
    components: ComponentsConfig | None = setting(
        None, flag=None, spec=None, help="The reward components' diagnosis (the spec names ``components``)."
    )


@document
@dataclass(frozen=True)
class DiagnoseConfig:
    """The diagnoses of ``saturation diagnose``: cardinality on graded trials, reliability
    and entropy on logged series where they log the keys, the reward components when named,
    pass@k from prompt groups when asked."""

    cardinality: CardinalityConfig = setting(
        default_factory=CardinalityConfig, flag=None, spec=None, help="Precision, recall and cardinality per level."
    )
    reliability: ReliabilityConfig = setting(
        default_factory=ReliabilityConfig,
        flag=None,
        spec=None,
        help="pass@1 against pass@k (its ``pass1`` is the entropy diagnosis' reward too).",
    )
    entropy: EntropyConfig = setting(default_factory=EntropyConfig, flag=None, spec=None, help="The entropy diagnosis.")
    components: ComponentsConfig | None = setting(None, flag=None, spec=None, help="The reward components.")
    groups: bool = setting(
        False,
        spec=None,
        help="Also fit pass@1 and pass@k from the trials' prompt groups (beta-binomial, NUTS).",
    )
    success_threshold: float = setting(
        1.0,
        spec=None,
        metavar="REWARD",
        check="finite",
        help="With groups: a rollout succeeds when graded and its reward is at least this.",
    )

    def validate(self) -> None:
        """Raise ValueError naming every setting out of its range (the parts' included)."""
        settings.check(self, "diagnose", self.cardinality, self.reliability, self.entropy)


# ====================================================================== pass@k from prompt groups
@dataclass(frozen=True)
class PassAtKPriors(_CheckedPriors):
    """Priors of the pass@k group model (``models.learning.fit_pass_at_k``): Normal priors
    (mean, sd) of the logit-mean trend's intercept ``a0``, slope ``a1`` and bend ``a2``, of
    the log-concentration trend's ``g0``, ``g1`` and ``g2``, and the HalfNormal scale of the
    per-step overdispersion ``sigma``. Calibration's simulator reads these same fields.

    Parameters
    ----------
    a0_mu, a0_sd : float
        logit pass@1 at the first step.
    a1_mu, a1_sd : float
        Its change over the run (logit scale).
    a2_mu, a2_sd : float
        Its bend (the quadratic term, zero at both ends).
    g0_mu, g0_sd : float
        log concentration of the prompts' success probabilities at the first step (log 2:
        prompts far apart in difficulty, the U-shaped Beta of RL prompt pools).
    g1_mu, g1_sd : float
        Its change over the run.
    g2_mu, g2_sd : float
        Its bend.
    sigma_sd : float
        HalfNormal scale of the per-step overdispersion of logit pass@1.
    """

    a0_mu: float = 0.0
    a0_sd: float = 2.0
    a1_mu: float = 0.0
    a1_sd: float = 2.0
    a2_mu: float = 0.0
    a2_sd: float = 1.0
    g0_mu: float = math.log(2.0)
    g0_sd: float = 1.5
    g1_mu: float = 0.0
    g1_sd: float = 1.0
    g2_mu: float = 0.0
    g2_sd: float = 1.0
    sigma_sd: float = 0.5

    def normals(self) -> dict[str, tuple[float, float]]:
        """The Normal priors as ``{parameter: (mean, sd)}`` (``sigma`` aside).

        Returns
        -------
        dict
            ``{"a0": (a0_mu, a0_sd), ...}``.
        """
        return {p: (getattr(self, f"{p}_mu"), getattr(self, f"{p}_sd")) for p in ("a0", "a1", "a2", "g0", "g1", "g2")}


__all__ = [
    "CardinalityConfig",
    "ComponentsConfig",
    "DiagnoseConfig",
    "EntropyConfig",
    "PassAtKPriors",
    "PlateauConfig",
    "PlateauPriors",
    "ReliabilityConfig",
    "SamplerConfig",
    "SeriesConfig",
    "SigmoidConfig",
    "SigmoidPriors",
    "TransferConfig",
    "TransferPriors",
    "VerdictRule",
]
