"""The :class:`~fairengine.results.Finding` list of the multiclass statistics.

Keys (:mod:`fairengine.finding_keys`: metric and attribute by ``part_token``, classes and groups
by ``key_token``, a pair by ``pair_token``):

======================================================  ==================================  ======
key                                                     what                                tested
======================================================  ==================================  ======
``mc_group_<metric>.<class>.<attr>.<group>``            one group's selection rate, TPR or  no
                                                        FPR of one class
``mc_<metric>.<class>.<attr>.<a>_<b>``                  difference of that rate between     yes
                                                        two groups (``mc_tpr.High.race.…``)
``mc_<tv|js|hellinger>.<attr>.<a>_<b>``                 distance between the two groups'    yes
                                                        predicted-class distributions
``mc_epsilon.<attr>``                                   smoothed ε-differential fairness    no
======================================================  ==================================  ======

with ``<metric>`` one of ``selection``, ``tpr``, ``fpr``. Permutation findings carry their
exceedance count as a :class:`~fairengine.results.ResamplingPart` named ``permutation`` (the
audit's sequential decisions may extend it: :func:`.permutation.pair_seed`); two-sided rate
differences name their question (:func:`~fairengine.results.gap_question` of
``mc_<metric>.<class>``) with ``null_kind="zero"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fairengine.finding_keys import key_token, pair_token, part_token
from fairengine.multiclass.class_sums import RATE_LABELS, RATE_METRICS
from fairengine.multiclass.distances import DISTANCE_LABELS
from fairengine.multiclass.epsilon import MulticlassEpsilon
from fairengine.multiclass.permutation import ClassDistanceTest, PairTests, RateDifferenceTest
from fairengine.multiclass.rates import ClassRates
from fairengine.results import Finding, ResamplingPart, gap_question

_STUDENTIZE_WORDS = {
    "per_permutation": "studentized permutation test",
    "none": "un-studentized permutation test",
}
_CONDITION = {
    "selection": "",
    "tpr": " among rows of true class {c}",
    "fpr": " among rows of another true class",
}


def _rate_words(metric: str, cls: str) -> str:
    """``true-positive rate of class High`` and the like."""
    return f"{RATE_LABELS[metric]} of class {cls}"


def multiclass_findings(
    rates: ClassRates | None = None,
    pairs: Sequence[PairTests] = (),
    epsilon: MulticlassEpsilon | None = None,
) -> list[Finding]:
    """Findings of per-group rates, pair tests and ε (module docstring), in that order."""
    out: list[Finding] = []
    if rates is not None:
        out += _rate_findings(rates)
    for pt in pairs:
        out += [_difference_finding(pt, t) for t in pt.differences]
        out += [_distance_finding(pt, t) for t in pt.distances]
    if epsilon is not None:
        out.append(_epsilon_finding(epsilon))
    return out


def _rate_findings(r: ClassRates) -> list[Finding]:
    out = []
    attr = r.attribute
    for g in r.groups:
        for metric in RATE_METRICS:
            for c, cls in enumerate(r.classes):
                est = g.rate(metric, c)
                iv = est.interval
                cond = _CONDITION[metric].format(c=cls)
                out.append(
                    Finding(
                        key=(
                            f"mc_group_{metric}.{key_token(cls)}.{part_token(attr)}."
                            f"{key_token(g.group)}"
                        ),
                        label=f"{_rate_words(metric, cls)}, {attr}={g.group}",
                        estimate=est.value,
                        interval=iv,
                        reading=(
                            f"In {attr}={g.group}, {est.value:.1%} of rows{cond} are predicted "
                            f"class {cls} ({iv.level:.0%} CI {iv.low:.1%} to {iv.high:.1%}; "
                            f"{est.n:,} rows)."
                            if est.n
                            else f"In {attr}={g.group} no row is of true class {cls}: the "
                            f"{RATE_LABELS[metric]} is undefined."
                        ),
                    )
                )
    return out


def _pair_key(prefix: str, pt: PairTests) -> str:
    return f"{prefix}.{part_token(pt.attribute)}.{pair_token(pt.group_a, pt.group_b)}"


def _difference_finding(pt: PairTests, t: RateDifferenceTest) -> Finding:
    attr, a, b, cls = pt.attribute, pt.group_a, pt.group_b, t.class_label
    human = _rate_words(t.metric, cls)
    rel = {"two-sided": "=", "greater": "≤", "less": "≥"}[t.alternative]
    iv = t.interval
    key = f"mc_{t.metric}.{key_token(cls)}.{part_token(attr)}.{pair_token(pt.group_a, pt.group_b)}"
    if math.isnan(t.difference):  # a group without rows of the conditioning class: not tested
        return Finding(
            key=key,
            label=f"{human} difference, {attr}: {a} − {b}",
            estimate=t.difference,
            reading=(
                f"The {human} is undefined in {attr}={a if math.isnan(t.value_a) else b} (no "
                f"row it conditions on), so its difference is not tested."
            ),
        )
    return Finding(
        key=key,
        label=f"{human} difference, {attr}: {a} − {b}",
        estimate=t.difference,
        interval=iv,
        pvalue=t.pvalue,
        null_hypothesis=f"{human}({a}) {rel} {human}({b})",
        reading=(
            f"The {human} of {attr}={a} minus that of {attr}={b} is {t.difference:+.1%} "
            f"({t.value_a:.1%} vs {t.value_b:.1%}; {iv.level:.0%} CI {iv.low:+.1%} to "
            f"{iv.high:+.1%}); {_STUDENTIZE_WORDS[t.studentize]} p={t.pvalue:.4g} "
            f"({t.n_extreme} of {t.n_permutations} permuted statistics as extreme)."
        ),
        resampling=(ResamplingPart("permutation", t.n_extreme, t.n_permutations),),
        question=(
            gap_question(f"mc_{t.metric}.{cls}", attr, a, b)
            if t.alternative == "two-sided"
            else None
        ),
        null_kind="zero",
    )


def _distance_finding(pt: PairTests, t: ClassDistanceTest) -> Finding:
    attr, a, b = pt.attribute, pt.group_a, pt.group_b
    human = DISTANCE_LABELS[t.metric]
    return Finding(
        key=_pair_key(f"mc_{t.metric}", pt),
        label=f"{human} of the predicted classes, {attr}: {a} vs {b}",
        estimate=t.statistic,
        pvalue=t.pvalue,
        null_hypothesis=(
            f"the predicted classes of {attr}={a} and {attr}={b} have the same distribution"
        ),
        reading=(
            f"The {human} between the predicted-class distributions of {attr}={a} and "
            f"{attr}={b} is {t.statistic:.4g} (0: identical); permutation p={t.pvalue:.4g} "
            f"({t.n_extreme} of {t.n_permutations} permuted distances as large)."
        ),
        resampling=(ResamplingPart("permutation", t.n_extreme, t.n_permutations),),
    )


def _epsilon_finding(e: MulticlassEpsilon) -> Finding:
    post = e.posterior
    interval = post.interval if post is not None else None
    ratio = f"{min(e.epsilon, 700.0):.3g}"
    return Finding(
        key=f"mc_epsilon.{part_token(e.attribute)}",
        label=f"ε-differential fairness over {len(e.classes)} predicted classes, {e.attribute}",
        estimate=e.epsilon,
        interval=interval,
        reading=(
            f"Across the groups of {e.attribute}, the probability of a predicted class differs "
            f"by a factor of up to e^{ratio} ≈ {_exp(e.epsilon):.3g} (smoothed ε = "
            f"{e.epsilon:.3g}, empirical {e.epsilon_empirical:.3g}), largest for class "
            f"{e.class_label}: {e.group_high} vs {e.group_low}."
            + (
                f" Posterior {interval.level:.0%} interval {interval.low:.3g} to "
                f"{interval.high:.3g}."
                if interval is not None
                else ""
            )
        ),
    )


def _exp(x: float) -> float:
    return math.exp(min(x, 700.0))
