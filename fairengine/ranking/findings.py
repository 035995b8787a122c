"""The :class:`~fairengine.results.Finding` list of the ranking statistics.

Keys (:mod:`fairengine.finding_keys`: attribute by ``part_token``, groups by ``key_token``, a
pair by ``pair_token``; ``<k>`` is the cutoff's token, ``10pct`` for the top 10% of each list,
``k10`` for the top 10 items):

==========================================  ==========================================  =======
key                                         what                                        tested
==========================================  ==========================================  =======
``rank_group_exposure.<attr>.<group>``      mean exposure per item                      no
``rank_group_exposure_per_relevance...``    exposure per unit of mean relevance         no
``rank_exposure.<attr>.<a>_<b>``            exposure difference (within-list test)      yes
``rank_exposure_ratio.<attr>.<a>_<b>``      exposure ratio                              no
``rank_dtr.<attr>.<a>_<b>``                 disparate treatment ratio (relevance)       no
``rank_topk_share_<k>.<attr>.<group>``      share of the top k                          no
``rank_skew_<k>.<attr>.<group>``            skew@k = ln(share / expected share)         no
``rank_minskew_<k>.<attr>``,                MinSkew@k, MaxSkew@k                        no
``rank_maxskew_<k>.<attr>``
``rank_topk_rate_<k>.<attr>.<a>_<b>``       difference in top-k rates (within lists)    yes
``rank_ndkl.<attr>``                        NDKL (mean over lists)                      no
``rank_precision_<k>.<attr>.<group>``,      precision@k, recall@k (relevance)           no
``rank_recall_<k>.<attr>.<group>``
==========================================  ==========================================  =======

e.g. ``rank_topk_share_10pct.race.Black``. A pair's exposure difference is tested when its
:class:`~.permutation.RankPairTests` holds the exposure test (otherwise the difference of
:class:`~.exposure.GroupExposures` is reported untested under the same key). Permutation
findings carry their exceedance count as a :class:`~fairengine.results.ResamplingPart` named
``permutation`` (the audit's sequential decisions may extend it: :func:`.permutation.pair_seed`);
two-sided tests name their question (:func:`~fairengine.results.gap_question`) with
``null_kind="zero"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fairengine.finding_keys import key_token, pair_token, part_token
from fairengine.ranking.discounted_kl import NDKL
from fairengine.ranking.exposure import GroupExposures
from fairengine.ranking.permutation import RankPairTests, RankTest
from fairengine.ranking.precision import PrecisionAtK
from fairengine.ranking.topk import TopKShares
from fairengine.results import Finding, ResamplingPart, gap_question

_STUDENTIZE_WORDS = {
    "per_permutation": "studentized within-list permutation test",
    "none": "un-studentized within-list permutation test",
}


def ranking_findings(
    exposure: GroupExposures | None = None,
    topk: Sequence[TopKShares] = (),
    ndkl: NDKL | None = None,
    precision: Sequence[PrecisionAtK] = (),
    pairs: Sequence[RankPairTests] = (),
) -> list[Finding]:
    """Findings of group exposure, top-k representation, NDKL, precision/recall@k and the pair
    tests (module docstring), in that order (each pair's tests after the exposure findings)."""
    out: list[Finding] = []
    tested = {(p.attribute, p.group_a, p.group_b): p for p in pairs}
    shown = (
        set()
        if exposure is None
        else {(exposure.attribute, p.group_a, p.group_b) for p in exposure.pairs}
    )
    if exposure is not None:
        out += _exposure_findings(exposure, tested)
    for t in topk:
        out += _topk_findings(t)
    if ndkl is not None:
        out.append(_ndkl_finding(ndkl))
    for p in precision:
        out += _precision_findings(p)
    for pt in pairs:
        for test in pt.tests:
            if test.quantity == "exposure" and (pt.attribute, pt.group_a, pt.group_b) in shown:
                continue  # already among the exposure findings
            out.append(_test_finding(pt, test))
    return out


def _num(x: float | None) -> str:
    return "undefined" if x is None or math.isnan(x) else f"{x:.4g}"


def _pair_key(prefix: str, attr: str, a: str, b: str) -> str:
    return f"{prefix}.{part_token(attr)}.{pair_token(a, b)}"


def _group_key(prefix: str, attr: str, g: str) -> str:
    return f"{prefix}.{part_token(attr)}.{key_token(g)}"


def _exposure_findings(
    e: GroupExposures, tested: dict[tuple[str, str, str], RankPairTests]
) -> list[Finding]:
    attr = e.attribute
    out = []
    for g in e.groups:
        out.append(
            Finding(
                key=_group_key("rank_group_exposure", attr, g.group),
                label=f"mean exposure per item, {attr}={g.group}",
                estimate=g.mean_exposure,
                reading=(
                    f"Items of {attr}={g.group} get a mean exposure of {g.mean_exposure:.4g} "
                    f"(1/log2(1 + rank); 1 at the top of a list; {g.n:,} items)."
                ),
            )
        )
        if g.exposure_per_relevance is not None:
            out.append(
                Finding(
                    key=_group_key("rank_group_exposure_per_relevance", attr, g.group),
                    label=f"exposure per unit of mean relevance, {attr}={g.group}",
                    estimate=g.exposure_per_relevance,
                    reading=(
                        f"Items of {attr}={g.group} get {_num(g.exposure_per_relevance)} "
                        f"exposure per unit of mean relevance (mean relevance "
                        f"{_num(g.mean_relevance)})."
                    ),
                )
            )
    for p in e.pairs:
        a, b = p.group_a, p.group_b
        pt = tested.get((attr, a, b))
        test = None
        if pt is not None:
            test = next((t for t in pt.tests if t.quantity == "exposure"), None)
        if pt is not None and test is not None:
            out.append(_test_finding(pt, test))
        else:
            out.append(
                Finding(
                    key=_pair_key("rank_exposure", attr, a, b),
                    label=f"exposure difference, {attr}: {a} − {b}",
                    estimate=p.difference,
                    reading=(
                        f"Items of {attr}={a} get {p.difference:+.4g} mean exposure compared "
                        f"with {attr}={b} (not tested)."
                    ),
                )
            )
        out.append(
            Finding(
                key=_pair_key("rank_exposure_ratio", attr, a, b),
                label=f"exposure ratio, {attr}: {a} / {b}",
                estimate=p.ratio,
                reading=(
                    f"The mean exposure of {attr}={a} is {_num(p.ratio)} times that of "
                    f"{attr}={b} (1: demographic parity of exposure, Singh & Joachims 2018)."
                ),
            )
        )
        if p.treatment_ratio is not None:
            out.append(
                Finding(
                    key=_pair_key("rank_dtr", attr, a, b),
                    label=f"disparate treatment ratio, {attr}: {a} / {b}",
                    estimate=p.treatment_ratio,
                    reading=(
                        f"Per unit of mean relevance, {attr}={a} gets {_num(p.treatment_ratio)} "
                        f"times the exposure of {attr}={b} (1: exposure proportional to "
                        f"relevance, Singh & Joachims 2018)."
                    ),
                )
            )
    return out


def _topk_findings(t: TopKShares) -> list[Finding]:
    attr, tok, lab = t.attribute, t.cutoff.token, t.cutoff.label
    out = []
    for g in t.groups:
        out.append(
            Finding(
                key=_group_key(f"rank_topk_share_{tok}", attr, g.group),
                label=f"share of the {lab}, {attr}={g.group}",
                estimate=g.share_top,
                reading=(
                    f"{attr}={g.group} holds {g.share_top:.1%} of the {lab} ({g.n_top:,} of "
                    f"{t.n_top:,} items) against {g.share_expected:.1%} expected from its share "
                    f"of the lists; {g.rate:.1%} of its items reach the {lab}."
                ),
            )
        )
        out.append(
            Finding(
                key=_group_key(f"rank_skew_{tok}", attr, g.group),
                label=f"skew@{lab}, {attr}={g.group}",
                estimate=g.skew,
                reading=(
                    f"skew = ln(share/expected share) of {attr}={g.group} in the {lab} is "
                    f"{g.skew:+.3g} (0: proportional; < 0: under-represented)."
                ),
            )
        )
    for which, value, group in (
        ("min", t.min_skew, t.min_group),
        ("max", t.max_skew, t.max_group),
    ):
        out.append(
            Finding(
                key=f"rank_{which}skew_{tok}.{part_token(attr)}",
                label=f"{which.capitalize()}Skew@{lab}, {attr}",
                estimate=value,
                reading=(
                    f"The {'most under' if which == 'min' else 'most over'}-represented group of "
                    f"{attr} in the {lab} is {group} (skew {value:+.3g}; Geyik et al. 2019)."
                ),
            )
        )
    return out


def _ndkl_finding(n: NDKL) -> Finding:
    lists = "" if n.n_lists == 1 else f", mean over {n.n_lists:,} lists"
    spread = "" if n.n_lists == 1 else f" (lists from {n.min_list:.3g} to {n.max_list:.3g})"
    return Finding(
        key=f"rank_ndkl.{part_token(n.attribute)}",
        label=f"NDKL of {n.attribute}{lists}",
        estimate=n.value,
        reading=(
            f"The normalized discounted KL divergence of {n.attribute} is {n.value:.3g}{spread}: "
            f"0 when every prefix of the ranking has the list's group mix, larger when the top "
            f"positions are skewed (Geyik et al. 2019)."
        ),
    )


def _precision_findings(p: PrecisionAtK) -> list[Finding]:
    attr, tok, lab = p.attribute, p.cutoff.token, p.cutoff.label
    out = []
    for g in p.groups:
        out.append(
            Finding(
                key=_group_key(f"rank_precision_{tok}", attr, g.group),
                label=f"precision@{lab}, {attr}={g.group}",
                estimate=g.precision,
                reading=(
                    f"{_num(g.precision)} of the {g.n_top:,} items of {attr}={g.group} in the "
                    f"{lab} are relevant (all groups: {_num(p.overall.precision)})."
                ),
            )
        )
        out.append(
            Finding(
                key=_group_key(f"rank_recall_{tok}", attr, g.group),
                label=f"recall@{lab}, {attr}={g.group}",
                estimate=g.recall,
                reading=(
                    f"{_num(g.recall)} of the {g.n_relevant:,} relevant items of "
                    f"{attr}={g.group} are in the {lab} (all groups: {_num(p.overall.recall)})."
                ),
            )
        )
    return out


def _test_finding(pt: RankPairTests, t: RankTest) -> Finding:
    attr, a, b = pt.attribute, pt.group_a, pt.group_b
    rel = {"two-sided": "=", "greater": "≤", "less": "≥"}[t.alternative]
    iv = t.interval
    lists = (
        ""
        if pt.n_lists == 1
        else f"; within-list difference {t.adjusted_difference:+.4g} over {pt.n_lists:,} lists"
    )
    if t.cutoff is None:
        prefix, human = "rank_exposure", "mean exposure"
        what = f"mean exposure {t.value_a:.4g} vs {t.value_b:.4g}"
    else:
        prefix, human = f"rank_topk_rate_{t.cutoff.token}", f"rate of reaching the {t.cutoff.label}"
        what = f"{t.value_a:.1%} vs {t.value_b:.1%} of their items reach the {t.cutoff.label}"
    return Finding(
        key=_pair_key(prefix, attr, a, b),
        label=f"{human} difference, {attr}: {a} − {b}",
        estimate=t.adjusted_difference,
        interval=iv,
        pvalue=t.pvalue,
        null_hypothesis=(
            f"{human}({a}) {rel} {human}({b}): within each list, the ranking treats "
            f"{attr}={a} and {attr}={b} alike (their labels are exchangeable given the ranks)"
        ),
        reading=(
            f"{attr}={a} minus {attr}={b}: {t.difference:+.4g} ({what}{lists}; "
            f"{iv.level:.0%} CI {iv.low:+.4g} to {iv.high:+.4g}); "
            f"{_STUDENTIZE_WORDS[t.studentize]} p={t.pvalue:.4g} ({t.n_extreme} of "
            f"{t.n_permutations} permuted statistics as extreme)."
        ),
        resampling=(ResamplingPart("permutation", t.n_extreme, t.n_permutations),),
        question=gap_question(prefix, attr, a, b) if t.alternative == "two-sided" else None,
        null_kind="zero",
    )
