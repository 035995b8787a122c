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
from typing import Any

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
from fairengine.intervals import wald_interval, wilson_interval
from fairengine.rate_gap import (
    RateGaps,
    effective_sample_size,
    rate_gaps,
    rate_ratios,
    round_half_up,
)
from fairengine.results import Finding, Interval, MethodResult, gap_question

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

# rate name -> (labels it conditions on, metric key prefix, human name)
RATES: dict[str, tuple[tuple[int, ...], str, str]] = {
    "positive_rate": ((0, 1), "dp_gap", "Demographic parity gap (positive-prediction rate)"),
    "tpr": ((1,), "tpr_gap", "Equalized odds: true-positive-rate gap"),
    "fpr": ((0,), "fpr_gap", "Equalized odds: false-positive-rate gap"),
}


def metric_token(value: str) -> str:
    """A group or attribute name made safe for flat MLflow metric names (injective):
    :func:`fairengine.finding_keys.key_token`."""
    return key_token(value)


def moments_for(dataset: AuditDataset, attribute: str) -> GroupLabelMoments:
    """The sufficient-statistic table of ``attribute`` for this dataset's predictions."""
    enc = dataset.groups[attribute]
    return GroupLabelMoments.from_arrays(
        attribute,
        enc.categories,
        enc.codes,
        dataset.label,
        dataset.require_scores("group parity"),
        dataset.weights,
        hard=dataset.threshold is not None,
    )


def group_rates(
    moments: GroupLabelMoments, level: float = 0.95
) -> dict[str, dict[str, np.ndarray]]:
    """Per-group rates with intervals: Wilson for hard predictions (on the counts; with weights
    on the effective counts r̂·n_eff of :func:`fairengine.rate_gap.effective_sample_size`,
    stored as ``n_effective``), Wald for expected counts."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, (labels, _, _) in RATES.items():
        m, var, n = moments.rate(labels)
        entry = {"estimate": m, "variance": var, "n": n}
        if moments.hard and not moments.weighted:
            low, high = wilson_interval(np.round(m * n), n, level)
        elif moments.hard:
            cols = list(labels)
            n_eff = effective_sample_size(
                m, var, n, moments.w[:, cols].sum(axis=1), moments.w2[:, cols].sum(axis=1)
            )
            low, high = wilson_interval(m * n_eff, n_eff, level)
            entry["n_effective"] = n_eff
        else:
            low, high = wald_interval(m, np.sqrt(var), level, bounds=(0.0, 1.0))
        out[name] = {**entry, "low": low, "high": high}
    return out


def rate_pair_gaps(
    moments: GroupLabelMoments,
    rate: dict[str, np.ndarray],
    *,
    tolerance: float,
    level: float,
) -> RateGaps:
    """Pairwise gaps of one rate of :func:`group_rates` with interval and tolerance test:
    Newcombe on counts (unweighted hard predictions) or effective counts (weighted hard
    predictions), Wald for expected counts (:func:`fairengine.rate_gap.rate_gaps`)."""
    return rate_gaps(
        rate["estimate"],
        rate["variance"],
        rate["n"],
        tolerance=tolerance,
        level=level,
        binomial=moments.hard and not moments.weighted,
        n_effective=rate.get("n_effective") if moments.hard else None,
    )


def comparison_rows(
    cats: tuple[str, ...],
    rate: dict[str, np.ndarray],
    gaps: RateGaps,
    level: float,
    lift_compat: bool,
    *,
    skip: np.ndarray | None = None,
    pvalues: bool = False,
    tests: list[str] | None = None,
) -> list[dict[str, Any]]:
    """JSON-ready rows for every pair (a, b) of ``gaps.pairs``: the signed and absolute gap
    with its interval (and tolerance p-value when ``pvalues``, with the name of its test when
    ``tests`` is given, one per pair), the ratio r_a/r_b with its log interval, the
    disparate-impact ratio min/max and the four-fifths flag; with ``lift_compat`` also LiFT's
    gap of rates rounded half-up first. Pairs with a group flagged in ``skip`` are left out."""
    ratios = rate_ratios(rate["estimate"], rate["variance"], level=level)
    rounded = round_half_up(rate["estimate"])
    rows = []
    for k, (a, b) in enumerate(gaps.pairs):
        if skip is not None and (skip[a] or skip[b]):
            continue
        row: dict[str, Any] = {
            "a": cats[a],
            "b": cats[b],
            "gap": float(gaps.estimate[k]),
            "abs_gap": float(abs(gaps.estimate[k])),
            "gap_low": float(gaps.low[k]),
            "gap_high": float(gaps.high[k]),
        }
        if pvalues:
            row["pvalue"] = float(gaps.pvalue[k])
            if tests is not None:
                row["test"] = tests[k]
        row.update(
            ratio=float(ratios.estimate[k]),
            ratio_low=float(ratios.low[k]),
            ratio_high=float(ratios.high[k]),
            impact_ratio=float(ratios.impact[k]),
            four_fifths_violated=bool(ratios.four_fifths[k]),
        )
        if lift_compat:
            row["lift_gap"] = float(round_half_up(abs(rounded[a] - rounded[b])))
        rows.append(row)
    return rows


def pair_comparisons(
    moments: GroupLabelMoments,
    level: float = 0.95,
    *,
    tolerance: float = 0.0,
    rates: dict[str, dict[str, np.ndarray]] | None = None,
    lift_compat: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Every pair a < b of every rate of :data:`RATES`: signed and absolute gap with interval
    and tolerance p-value, ratio r_a/r_b with its log interval, disparate-impact ratio
    min/max and the four-fifths flag (JSON-ready rows, for details and reports).

    ``lift_compat=True`` adds LiFT's numbers (``lift_gap``): rates rounded half-up to 5
    decimals *before* differencing, the absolute difference rounded again (LiFT §1.5); pairs
    where a group has no row with the conditioning label are left out, as in LiFT.
    """
    rates = group_rates(moments, level) if rates is None else rates
    cats = moments.categories
    out: dict[str, list[dict[str, Any]]] = {}
    for name in RATES:
        r = rates[name]
        gaps = rate_pair_gaps(moments, r, tolerance=tolerance, level=level)
        skip = (r["n"] == 0) if lift_compat else None
        rows = comparison_rows(cats, r, gaps, level, lift_compat, skip=skip, pvalues=True)
        out[name] = rows
    return out


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
    attrs = list(dataset.roles.protected) if attributes is None else list(attributes)
    unknown = [a for a in attrs if a not in dataset.groups]
    if unknown:
        raise DataContractError(
            f"group_parity attributes {unknown} are not protected attributes of the dataset "
            f"({list(dataset.groups)})"
        )
    findings: list[Finding] = []
    warnings: list[str] = []
    details: dict[str, Any] = {
        "prediction": dataset.prediction_mode,
        "threshold": dataset.threshold,
        "tolerance": tolerance,
        "exact": {"mode": exact, "max_rows": exact_max_rows, "max_cells": EXACT_MAX_CELLS},
        "attributes": {},
    }
    if exact == "always" and not (dataset.threshold is not None and dataset.weights is None):
        why = "it has sample weights" if dataset.threshold is not None else "it has no threshold"
        warnings.append(
            "group_parity exact is 'always', but the exact test needs unweighted hard "
            f"predictions and this audit does not ({why}): every pair's p-value comes from "
            "the interval inversion"
        )
    for attr in attrs:
        mom = moments_for(dataset, attr)
        rates = group_rates(mom, confidence_level)
        cats = mom.categories
        cache: dict[tuple[int, int, int, int], float] = {}
        chosen: dict[str, ExactChoice] = {}
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
        details["attributes"][attr] = {
            "groups": [
                {
                    "group": cats[g],
                    "n": int(mom.n[g].sum()),
                    "weight": float(mom.w[g].sum()),
                    "rates": {
                        name: {k: float(r[k][g]) for k in ("estimate", "low", "high")}
                        for name, r in rates.items()
                    },
                }
                for g in range(len(cats))
            ],
            "pairs": {
                name: comparison_rows(
                    cats,
                    rates[name],
                    chosen[name].gaps,
                    confidence_level,
                    False,
                    pvalues=True,
                    tests=chosen[name].tests,
                )
                for name in RATES
            },
        }
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
            "threshold": dataset.threshold,
            "prediction": dataset.prediction_mode,
        },
        findings=findings,
        details=details,
        warnings=warnings,
        seconds=time.perf_counter() - start,
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
