"""Demographic parity and equalized odds gaps for every pair of groups, with uncertainty.

Definitions (LiFT, ``../shared/docs/lift-semantics.md`` §1.5; Hardt et al. 2016 for equalized
odds), for groups a, b of a protected attribute and ŷ the (hard or expected) prediction:

* demographic parity gap:  P(ŷ=1 | a) − P(ŷ=1 | b)
* TPR gap (equal opportunity):  P(ŷ=1 | y=1, a) − P(ŷ=1 | y=1, b)
* FPR gap:  P(ŷ=1 | y=0, a) − P(ŷ=1 | y=0, b)

Equalized odds holds when both the TPR and FPR gaps are zero. Unlike LiFT, gaps are signed
(a − b with a before b in sorted group order), unrounded, and each comes with a confidence
interval and a test of H0: |gap| ≤ tolerance (:mod:`fairengine.rate_gap`: the test rejects
exactly when the interval lies outside [−τ, τ]). Without a threshold, rates are mean
probabilities (expected counts). Everything is computed from the per-(group, label) sufficient
statistics of :mod:`fairengine.counts`: one pass over the rows.

**Exact small-sample test** (``exact``, :mod:`fairengine.exact_tolerance`). For unweighted hard
predictions the tolerance p-value of a pair can come from the exact unconditional test
(Farrington–Manning score statistic, supremum over the nuisance rate) instead of the Newcombe
inversion, whose size exceeds α far in the tail for small groups and rare rates: ``"auto"``
(default) uses it when the smaller of the two groups' rate denominators (rows with the
conditioning label) is at most ``exact_max_rows`` (200) and the outcome table is within
:data:`fairengine.exact_tolerance.EXACT_MAX_CELLS`; ``"always"`` wherever it is defined (a
warning names each pair whose table is too large, and a weighted or expected-count audit gets
one warning that no pair can use it); ``"never"`` keeps the Newcombe inversion everywhere. The
reported interval stays Newcombe's, so for an exact pair the p-value and the interval are no
longer dual: the interval can lie outside [−τ, τ] while p > α, or the reverse. The **p-value
decides** (it is the exact test; the audit adjusts and decides on p-values), and the finding's
reading says that the p-value is the exact test's; ``details.attributes.<attr>.pairs`` names
the test of every pair (``test``).

A finding is left untested (p-value None, the reason in its reading and in the warnings) when
its gap is undefined (a group has no row with the conditioning label), when it repeats another
finding (a pair with no negative labels in either group has TPR gap = demographic-parity gap,
one with no positive labels has FPR gap = demographic-parity gap: the gap is tested once, as
``dp_gap``), or, for expected counts, when a group's predictions are all equal (zero variance,
no valid Wald test).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from fairengine.counts import GroupLabelMoments
from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.exact_tolerance import (
    EXACT_MAX_CELLS,
    EXACT_TEST,
    exact_cells,
    exact_tolerance_pvalue,
)
from fairengine.finding_keys import key_token, pair_token, part_token
from fairengine.group_parity.rates import (
    RATES,
    group_rates,
    moments_for,
    pair_numbers,
    rate_pair_gaps,
)
from fairengine.group_parity.result import (
    AttributeParity,
    ExactSettings,
    GroupParityDetails,
    GroupRates,
    ParityGroup,
    ParityPair,
    RateEstimate,
    RateName,
    RatePairs,
)
from fairengine.rate_gap import RateGaps
from fairengine.results import Finding, Interval, MethodResult, gap_question

if TYPE_CHECKING:
    from fairengine.streaming.tables import StreamedCounts

METHOD = "group_parity"
TITLE = "Demographic parity and equalized odds"

#: Values of ``exact`` (module docstring).
EXACT_MODES = ("auto", "always", "never")
#: Default of ``exact_max_rows``: the auto rule's largest smaller-group size.
EXACT_MAX_ROWS = 200
#: The tolerance test of a pair, as named in ``details`` (``test``).
NEWCOMBE_TEST = "Newcombe hybrid score interval inversion"
NEWCOMBE_EFFECTIVE_TEST = "Newcombe hybrid score interval inversion (effective counts)"
WALD_TEST = "Wald interval inversion"
EXACT_READING = (
    "; the p-value is the exact unconditional test's (Farrington–Manning score) and decides, "
    "the interval is Newcombe's"
)


def metric_token(value: str) -> str:
    """A group or attribute name made safe for flat MLflow metric names (injective):
    :func:`fairengine.finding_keys.key_token`."""
    return key_token(value)


@dataclasses.dataclass(frozen=True)
class ExactChoice:
    """The tolerance tests of one rate's pairs after :func:`exact_gaps`: ``gaps`` with the exact
    p-values put in, the name of each pair's test, and the pairs (a, b) of group indices that
    ``exact="always"`` could not test exactly (outcome table above ``EXACT_MAX_CELLS``)."""

    gaps: RateGaps
    tests: list[str]
    too_large: list[tuple[int, int]]


def exact_gaps(
    moments: GroupLabelMoments,
    rate: dict[str, np.ndarray],
    gaps: RateGaps,
    *,
    tolerance: float,
    exact: str = "auto",
    exact_max_rows: int = EXACT_MAX_ROWS,
    cache: dict[tuple[int, int, int, int], float] | None = None,
) -> ExactChoice:
    """Replace the Newcombe tolerance p-values of :func:`rate_pair_gaps` by the exact
    unconditional test's (:mod:`fairengine.exact_tolerance`) where ``exact`` asks for it
    (module docstring): only for unweighted hard predictions, both groups non-empty, and the
    outcome table within ``EXACT_MAX_CELLS``; with ``"auto"`` also only when the smaller rate
    denominator is at most ``exact_max_rows``. ``cache`` (keyed by the counts) lets rates with
    the same counts (a TPR gap equal to the DP gap) share one computation."""
    if moments.hard and not moments.weighted:
        base = NEWCOMBE_TEST
    else:
        base = NEWCOMBE_EFFECTIVE_TEST if moments.hard else WALD_TEST
    tests = [base] * len(gaps.pairs)
    if exact == "never" or not (moments.hard and not moments.weighted):
        return ExactChoice(gaps, tests, [])
    n = np.nan_to_num(rate["n"]).astype(np.int64)
    k = np.round(np.nan_to_num(rate["estimate"]) * n).astype(np.int64)
    pvalue = gaps.pvalue.copy()
    too_large: list[tuple[int, int]] = []
    cache = {} if cache is None else cache
    for idx, (a, b) in enumerate(gaps.pairs):
        na, nb = int(n[a]), int(n[b])
        if na == 0 or nb == 0:  # undefined gap: not tested
            continue
        fits = exact_cells(na, nb) <= EXACT_MAX_CELLS
        if exact == "auto" and not (fits and min(na, nb) <= exact_max_rows):
            continue
        if not fits:
            too_large.append((a, b))
            continue
        key = (int(k[a]), na, int(k[b]), nb)
        if key not in cache:
            cache[key] = exact_tolerance_pvalue(*key, tolerance)
        pvalue[idx] = cache[key]
        tests[idx] = EXACT_TEST
    return ExactChoice(dataclasses.replace(gaps, pvalue=pvalue), tests, too_large)


def group_parity(
    dataset: AuditDataset,
    *,
    tolerance: float = 0.05,
    confidence_level: float = 0.95,
    attributes: list[str] | None = None,
    exact: str = "auto",
    exact_max_rows: int = EXACT_MAX_ROWS,
) -> MethodResult:
    """Demographic-parity and equalized-odds gaps for all group pairs of each attribute.

    Parameters
    ----------
    dataset : the audit dataset (needs scores).
    tolerance : τ in H0: |gap| ≤ τ; gaps within τ are tolerated. Default 0.05.
    confidence_level : level of the reported intervals. Default 0.95.
    attributes : protected attributes to audit (default: all of ``dataset.roles.protected``).
    exact : ``"auto"`` (default), ``"always"`` or ``"never"``: where the tolerance p-value
        comes from the exact unconditional test instead of the Newcombe inversion (module
        docstring).
    exact_max_rows : with ``exact="auto"``, the exact test is used when the smaller rate
        denominator of the pair is at most this many rows. Default 200.

    Returns a :class:`MethodResult` whose findings are keyed ``dp_gap.<attr>.<a>_<b>``,
    ``tpr_gap.<attr>.<a>_<b>`` and ``fpr_gap.<attr>.<a>_<b>``; p-values are raw (the audit adjusts
    them for multiplicity).
    """
    start = time.perf_counter()
    _check_settings(tolerance, confidence_level, exact, exact_max_rows)
    attrs = list(dataset.roles.protected) if attributes is None else list(attributes)
    unknown = [a for a in attrs if a not in dataset.groups]
    if unknown:
        raise DataContractError(
            f"group_parity attributes {unknown} are not protected attributes of the dataset "
            f"({list(dataset.groups)})"
        )
    return _parity_result(
        lambda attr: moments_for(dataset, attr),
        attrs,
        threshold=dataset.threshold,
        weighted=dataset.weights is not None,
        prediction_mode=dataset.prediction_mode,
        tolerance=tolerance,
        confidence_level=confidence_level,
        exact=exact,
        exact_max_rows=exact_max_rows,
        start=start,
    )


def group_parity_from_counts(
    counts: StreamedCounts,
    *,
    tolerance: float = 0.05,
    confidence_level: float = 0.95,
    attributes: list[str] | None = None,
    exact: str = "auto",
    exact_max_rows: int = EXACT_MAX_ROWS,
) -> MethodResult:
    """:func:`group_parity` from the count tables of a streamed audit
    (:class:`fairengine.streaming.StreamedCounts`) instead of rows: the same findings, since
    everything here is a function of each attribute's :class:`GroupLabelMoments`."""
    start = time.perf_counter()
    _check_settings(tolerance, confidence_level, exact, exact_max_rows)
    counts.require_scores("group parity")
    attrs = list(counts.roles.protected) if attributes is None else list(attributes)
    unknown = [a for a in attrs if a not in counts.categories]
    if unknown:
        raise DataContractError(
            f"group_parity attributes {unknown} are not protected attributes of the dataset "
            f"({list(counts.categories)})"
        )
    return _parity_result(
        counts.moments,
        attrs,
        threshold=counts.threshold,
        weighted=counts.weighted,
        prediction_mode=counts.prediction_mode,
        tolerance=tolerance,
        confidence_level=confidence_level,
        exact=exact,
        exact_max_rows=exact_max_rows,
        start=start,
    )


def _check_settings(
    tolerance: float, confidence_level: float, exact: str, exact_max_rows: int
) -> None:
    if not tolerance >= 0 or not np.isfinite(tolerance):
        raise DataContractError(
            f"group_parity tolerance must be a finite number >= 0, got {tolerance!r}"
        )
    if not 0 < confidence_level < 1:
        raise DataContractError(
            f"group_parity confidence_level must lie in (0, 1), got {confidence_level!r}"
        )
    if exact not in EXACT_MODES:
        raise DataContractError(
            f"group_parity exact must be one of {list(EXACT_MODES)}, got {exact!r}"
        )
    if isinstance(exact_max_rows, bool) or not (
        isinstance(exact_max_rows, int | np.integer) and exact_max_rows >= 1
    ):
        raise DataContractError(
            f"group_parity exact_max_rows must be a whole number >= 1, got {exact_max_rows!r}"
        )


def _parity_result(
    moments_of: Callable[[str], GroupLabelMoments],
    attrs: list[str],
    *,
    threshold: float | None,
    weighted: bool,
    prediction_mode: str,
    tolerance: float,
    confidence_level: float,
    exact: str,
    exact_max_rows: int,
    start: float,
) -> MethodResult:
    """The method's result from each attribute's moment table (rows or streamed counts)."""
    findings: list[Finding] = []
    warnings: list[str] = []
    by_attribute: dict[str, AttributeParity] = {}
    if exact == "always" and not (threshold is not None and not weighted):
        why = "it has sample weights" if threshold is not None else "it has no threshold"
        warnings.append(
            "group_parity exact is 'always', but the exact test needs unweighted hard "
            f"predictions and this audit does not ({why}): every pair's p-value comes from "
            "the interval inversion"
        )
    for attr in attrs:
        mom = moments_of(attr)
        rates = group_rates(mom, confidence_level)
        cats = mom.categories
        cache: dict[tuple[int, int, int, int], float] = {}
        chosen: dict[RateName, ExactChoice] = {}
        for name in RATES:
            gaps = rate_pair_gaps(mom, rates[name], tolerance=tolerance, level=confidence_level)
            chosen[name] = exact_gaps(
                mom,
                rates[name],
                gaps,
                tolerance=tolerance,
                exact=exact,
                exact_max_rows=exact_max_rows,
                cache=cache,
            )
        by_attribute[attr] = AttributeParity(
            groups=_groups(mom, rates),
            pairs=RatePairs(
                positive_rate=_pairs(cats, rates, chosen, "positive_rate", confidence_level),
                tpr=_pairs(cats, rates, chosen, "tpr", confidence_level),
                fpr=_pairs(cats, rates, chosen, "fpr", confidence_level),
            ),
        )
        for name, (labels, prefix, human) in RATES.items():
            gaps, tests = chosen[name].gaps, chosen[name].tests
            n = rates[name]["n"]
            for k, (a, b) in enumerate(gaps.pairs):
                est = float(gaps.estimate[k])
                reason = _untested_reason(mom, name, labels, (a, b), bool(gaps.zero_variance[k]))
                if reason is None and (a, b) in chosen[name].too_large:
                    warnings.append(
                        f"{prefix} for {attr} {cats[a]!r} vs {cats[b]!r}: the exact test would "
                        f"enumerate {exact_cells(int(n[a]), int(n[b])):,} outcome tables, more "
                        f"than {EXACT_MAX_CELLS:,}; its p-value comes from the Newcombe "
                        "interval inversion"
                    )
                if reason is not None:
                    warnings.append(
                        f"{prefix} for {attr} {cats[a]!r} vs {cats[b]!r} is not tested: {reason}"
                    )
                low, high = float(gaps.low[k]), float(gaps.high[k])
                interval = (
                    Interval(low, high, confidence_level, gaps.interval_method)
                    if np.isfinite(low) and np.isfinite(high)
                    else None
                )
                words = f"{_rate_words(name)} of {attr}={cats[a]} minus {attr}={cats[b]}"
                if np.isfinite(est):
                    words += f" is {est:+.3f}"
                if interval is not None:
                    words += f" ({confidence_level:.0%} CI {low:+.3f} to {high:+.3f})"
                findings.append(
                    Finding(
                        key=f"{prefix}.{part_token(attr)}.{pair_token(cats[a], cats[b])}",
                        label=f"{human}, {attr}: {cats[a]} − {cats[b]}",
                        estimate=est,
                        interval=interval,
                        pvalue=(
                            float(gaps.pvalue[k])
                            if reason is None and np.isfinite(gaps.pvalue[k])
                            else None
                        ),
                        null_hypothesis=f"|gap| ≤ {tolerance:g}",
                        reading=words
                        + (
                            f"; not tested: {reason}."
                            if reason is not None
                            else (EXACT_READING if tests[k] == EXACT_TEST else "") + "."
                        ),
                        question=gap_question(name, attr, cats[a], cats[b]),
                        null_kind="tolerance" if tolerance > 0 else "zero",
                    )
                )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters={
            "tolerance": tolerance,
            "confidence_level": confidence_level,
            "attributes": attrs,
            "exact": exact,
            "exact_max_rows": exact_max_rows,
            "threshold": threshold,
            "prediction": prediction_mode,
        },
        findings=findings,
        details=GroupParityDetails(
            prediction=prediction_mode,
            threshold=threshold,
            tolerance=float(tolerance),
            exact=ExactSettings(
                mode=exact, max_rows=int(exact_max_rows), max_cells=EXACT_MAX_CELLS
            ),
            attributes=by_attribute,
        ),
        warnings=warnings,
        seconds=time.perf_counter() - start,
    )


def _groups(
    moments: GroupLabelMoments, rates: dict[RateName, dict[str, np.ndarray]]
) -> tuple[ParityGroup, ...]:
    """The details of every group of ``moments``: rows, weight and rates of
    :func:`~fairengine.group_parity.rates.group_rates`."""

    def rate(name: RateName, g: int) -> RateEstimate:
        r = rates[name]
        return RateEstimate(float(r["estimate"][g]), float(r["low"][g]), float(r["high"][g]))

    return tuple(
        ParityGroup(
            group=group,
            n=int(moments.n[g].sum()),
            weight=float(moments.w[g].sum()),
            rates=GroupRates(
                positive_rate=rate("positive_rate", g), tpr=rate("tpr", g), fpr=rate("fpr", g)
            ),
        )
        for g, group in enumerate(moments.categories)
    )


def _pairs(
    cats: tuple[str, ...],
    rates: dict[RateName, dict[str, np.ndarray]],
    chosen: dict[RateName, ExactChoice],
    name: RateName,
    level: float,
) -> tuple[ParityPair, ...]:
    """The details of every pair of the rate ``name``: its numbers and the p-value of the test
    :func:`exact_gaps` chose."""
    choice = chosen[name]
    return tuple(
        ParityPair(**numbers.numbers(), pvalue=float(choice.gaps.pvalue[k]), test=choice.tests[k])
        for k, numbers in enumerate(pair_numbers(cats, rates[name], choice.gaps, level))
    )


def _untested_reason(
    moments: GroupLabelMoments,
    name: str,
    labels: tuple[int, ...],
    pair: tuple[int, int],
    zero_variance: bool,
) -> str | None:
    """Why the gap of ``name`` between the groups of ``pair`` is not tested, or None.

    * undefined: a group has no (weighted) row with the conditioning label;
    * a repeat of the demographic-parity gap: TPR (FPR) conditions on y=1 (y=0), and when
      neither group has a row with the other label it is computed from exactly the rows of
      the positive-prediction rate, so the same gap would enter the test family twice;
    * zero variance (expected counts): the Wald test has no sampling error for that group.
    """
    cats = moments.categories
    cols = list(labels)
    empty = [cats[g] for g in pair if not moments.w[g, cols].sum() > 0]
    if empty:
        return f"the gap is undefined, no rows with the conditioning label in group(s) {empty}"
    if name != "positive_rate":
        other = [y for y in (0, 1) if y not in labels]
        if not any(moments.w[g, other].sum() > 0 for g in pair):
            kind = "negative" if other == [0] else "positive"
            return (
                f"the gap equals the demographic-parity gap (no {kind} labels in either "
                "group), which is tested once, as the dp_gap of this pair"
            )
    if zero_variance:
        flat = [cats[g] for g in pair if not moments.rate(labels)[1][g] > 0]
        return (
            f"zero variance, every prediction in group(s) {flat} is the same, so the Wald "
            "standard error would have no term for that group's sampling error"
        )
    return None


def _rate_words(name: str) -> str:
    return {
        "positive_rate": "Positive-prediction rate",
        "tpr": "True-positive rate",
        "fpr": "False-positive rate",
    }[name]
