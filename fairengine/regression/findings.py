"""The :class:`~fairengine.results.Finding` list of the regression statistics.

Keys (:mod:`fairengine.finding_keys`: attribute by ``part_token``, groups by ``key_token``, a
pair by ``pair_token``):

=====================================  ==========================================  ==========
key                                    what                                        tested
=====================================  ==========================================  ==========
``reg_group_<q>.<attr>.<group>``       summary q of :data:`.summaries.SUMMARY_     no
                                       QUANTITIES` (mean_prediction, mae, …)
``reg_<metric>.<attr>.<a>_<b>``        difference of ``mean_prediction``,           yes
                                       ``mean_residual``, ``mae`` or ``mse``
``reg_ks.<attr>.<a>_<b>``,             distance between the groups' predictions    yes
``reg_wasserstein.<attr>.<a>_<b>``
``reg_bgl_<loss>.<attr>.<group>``      bounded group loss, H0: loss ≤ ζ            yes
``reg_epsilon.<attr>``                 ε of the binned predictions (attribute or    no
                                       intersection ``a & b``)
=====================================  ==========================================  ==========

e.g. ``reg_mae.sex.Female_Male``. Permutation findings carry their exceedance count as a
:class:`~fairengine.results.ResamplingPart` named ``permutation`` (the audit's sequential
decisions may extend it: :func:`.permutation.pair_seed`); differences of a two-sided test name
their question (:func:`~fairengine.results.gap_question` of ``reg_<metric>``) with
``null_kind="zero"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fairengine.finding_keys import key_token, pair_token, part_token
from fairengine.multiclass.epsilon import MulticlassEpsilon
from fairengine.regression.bounded_loss import BoundedGroupLoss
from fairengine.regression.permutation import DifferenceTest, DistanceTest, PairTests
from fairengine.regression.summaries import SUMMARY_QUANTITIES, GroupSummaries
from fairengine.results import Finding, Interval, ResamplingPart, gap_question

#: Plain-language names of the summary quantities and difference metrics.
LABELS: dict[str, str] = {
    "mean_prediction": "mean prediction",
    "mean_target": "mean target",
    "mean_residual": "mean residual (target − prediction)",
    "mae": "mean absolute error",
    "mse": "mean squared error",
    "rmse": "root mean squared error",
    "ks": "Kolmogorov–Smirnov distance between the predictions",
    "wasserstein": "Wasserstein-1 distance between the predictions",
    "squared": "mean squared error",
    "absolute": "mean absolute error",
}
_STUDENTIZE_WORDS = {
    "per_permutation": "studentized permutation test",
    "none": "un-studentized permutation test",
}


def regression_findings(
    summaries: GroupSummaries | None = None,
    pairs: Sequence[PairTests] = (),
    bounded: Sequence[BoundedGroupLoss] = (),
) -> list[Finding]:
    """Findings of per-group summaries, pair tests and bounded group losses (module docstring),
    in that order."""
    out: list[Finding] = []
    if summaries is not None:
        out += _summary_findings(summaries)
    for pt in pairs:
        out += [_difference_finding(pt, t) for t in pt.differences]
        out += [_distance_finding(pt, t) for t in pt.distances]
    for bg in bounded:
        out += _bounded_findings(bg)
    return out


def _summary_findings(s: GroupSummaries) -> list[Finding]:
    out = []
    attr = s.attribute
    for g in s.groups:
        for q in SUMMARY_QUANTITIES:
            est = g.estimate(q)
            iv = est.interval
            out.append(
                Finding(
                    key=f"reg_group_{q}.{part_token(attr)}.{key_token(g.group)}",
                    label=f"{LABELS[q]}, {attr}={g.group}",
                    estimate=est.value,
                    interval=iv,
                    reading=(
                        f"The {LABELS[q]} of {attr}={g.group} is {est.value:.4g} "
                        f"({iv.level:.0%} CI {iv.low:.4g} to {iv.high:.4g}; {g.n:,} rows"
                        + (f", effective size {g.n_effective:,.0f}" if s.weighted else "")
                        + ")."
                    ),
                )
            )
    return out


def _pair_key(prefix: str, pt: PairTests) -> str:
    return f"{prefix}.{part_token(pt.attribute)}.{pair_token(pt.group_a, pt.group_b)}"


def _difference_finding(pt: PairTests, t: DifferenceTest) -> Finding:
    attr, a, b = pt.attribute, pt.group_a, pt.group_b
    human = LABELS[t.metric]
    rel = {"two-sided": "=", "greater": "≤", "less": "≥"}[t.alternative]
    iv = t.interval
    direction = ""
    if t.metric == "mean_residual":
        direction = " (a positive residual means the model under-predicts)"
    return Finding(
        key=_pair_key(f"reg_{t.metric}", pt),
        label=f"{human} difference, {attr}: {a} − {b}",
        estimate=t.difference,
        interval=iv,
        pvalue=t.pvalue,
        null_hypothesis=f"{human}({a}) {rel} {human}({b})",
        reading=(
            f"The {human} of {attr}={a} minus that of {attr}={b} is {t.difference:+.4g} "
            f"({t.value_a:.4g} vs {t.value_b:.4g}; {iv.level:.0%} CI {iv.low:+.4g} to "
            f"{iv.high:+.4g}){direction}; {_STUDENTIZE_WORDS[t.studentize]} p={t.pvalue:.4g} "
            f"({t.n_extreme} of {t.n_permutations} permuted statistics as extreme)."
        ),
        resampling=(ResamplingPart("permutation", t.n_extreme, t.n_permutations),),
        question=(
            gap_question(f"reg_{t.metric}", attr, a, b) if t.alternative == "two-sided" else None
        ),
        null_kind="zero",
    )


def _distance_finding(pt: PairTests, t: DistanceTest) -> Finding:
    attr, a, b = pt.attribute, pt.group_a, pt.group_b
    human = LABELS[t.metric]
    return Finding(
        key=_pair_key(f"reg_{t.metric}", pt),
        label=f"{human}, {attr}: {a} vs {b}",
        estimate=t.statistic,
        pvalue=t.pvalue,
        null_hypothesis=f"the predictions of {attr}={a} and {attr}={b} have the same distribution",
        reading=(
            f"The {human} of {attr}={a} and {attr}={b} is {t.statistic:.4g} (0: identical "
            f"distributions); permutation p={t.pvalue:.4g} ({t.n_extreme} of "
            f"{t.n_permutations} permuted distances as large)."
        ),
        resampling=(ResamplingPart("permutation", t.n_extreme, t.n_permutations),),
    )


def _bounded_findings(bg: BoundedGroupLoss) -> list[Finding]:
    out = []
    attr, level, zeta = bg.attribute, bg.confidence_level, bg.bound
    human = LABELS[bg.loss]
    for g in bg.groups:
        verdict = (
            f"at most ζ = {zeta:g} with {level:.0%} confidence"
            if g.upper <= zeta
            else f"not shown to be at most ζ = {zeta:g}"
        )
        out.append(
            Finding(
                key=f"reg_bgl_{bg.loss}.{part_token(attr)}.{key_token(g.group)}",
                label=f"bounded group loss ({human} ≤ {zeta:g}), {attr}={g.group}",
                estimate=g.mean_loss,
                interval=Interval(
                    g.lower, g.upper, 2 * level - 1, f"one-sided {level:.0%} bounds (Hall 1992)"
                ),
                pvalue=g.pvalue,
                null_hypothesis=f"{human}({g.group}) ≤ {zeta:g}",
                reading=(
                    f"The {human} of {attr}={g.group} is {g.mean_loss:.4g}, upper {level:.0%} "
                    f"bound {g.upper:.4g}: {verdict}; p={g.pvalue:.4g} for the null that it is "
                    f"at most ζ (a rejection means the loss exceeds the bound)."
                ),
            )
        )
    return out


def epsilon_findings(epsilons: Sequence[MulticlassEpsilon]) -> list[Finding]:
    """``reg_epsilon.<attr>``: ε-differential fairness of the binned predictions (an estimate
    with its Dirichlet posterior interval; :mod:`.binned_epsilon`)."""
    out = []
    for e in epsilons:
        interval = e.posterior.interval if e.posterior is not None else None
        factor = math.exp(min(e.epsilon, 700.0))
        out.append(
            Finding(
                key=f"reg_epsilon.{part_token(e.attribute)}",
                label=(
                    f"ε-differential fairness of the predictions in {len(e.classes)} bins, "
                    f"{e.attribute}"
                ),
                estimate=e.epsilon,
                interval=interval,
                reading=(
                    f"Across the groups of {e.attribute}, the probability of a prediction bin "
                    f"differs by a factor of up to {factor:.3g} (smoothed ε = {e.epsilon:.3g}, "
                    f"empirical {e.epsilon_empirical:.3g}), largest for predictions "
                    f"{e.class_label}: {e.group_high} vs {e.group_low}."
                    + (
                        f" Posterior {interval.level:.0%} interval {interval.low:.3g} to "
                        f"{interval.high:.3g}."
                        if interval is not None
                        else ""
                    )
                ),
            )
        )
    return out
