"""Demographic parity and equalized odds gaps for every pair of groups, with uncertainty.

Definitions (LiFT, ``../shared/docs/lift-semantics.md`` §1.5; Hardt et al. 2016 for equalized
odds), for groups a, b of a protected attribute and ŷ the (hard or expected) prediction:

* demographic parity gap:  P(ŷ=1 | a) − P(ŷ=1 | b)
* TPR gap (equal opportunity):  P(ŷ=1 | y=1, a) − P(ŷ=1 | y=1, b)
* FPR gap:  P(ŷ=1 | y=0, a) − P(ŷ=1 | y=0, b)

Equalized odds holds when both the TPR and FPR gaps are zero. Unlike LiFT, gaps are signed
(a − b with a before b in sorted group order), unrounded, and each comes with a confidence
interval and a test of H0: |gap| ≤ tolerance (:mod:`fairengine.rate_gap`). Without a
threshold, rates are mean probabilities (expected counts). Everything is computed from the
per-(group, label) sufficient statistics of :mod:`fairengine.counts`: one pass over the rows.
"""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np

from fairengine.counts import GroupLabelMoments
from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.intervals import wald_interval, wilson_interval
from fairengine.rate_gap import RateGaps, rate_gaps, rate_ratios, round_half_up
from fairengine.results import Finding, Interval, MethodResult

METHOD = "group_parity"
TITLE = "Demographic parity and equalized odds"

# rate name -> (labels it conditions on, metric key prefix, human name)
RATES: dict[str, tuple[tuple[int, ...], str, str]] = {
    "positive_rate": ((0, 1), "dp_gap", "Demographic parity gap (positive-prediction rate)"),
    "tpr": ((1,), "tpr_gap", "Equalized odds: true-positive-rate gap"),
    "fpr": ((0,), "fpr_gap", "Equalized odds: false-positive-rate gap"),
}

_UNSAFE = re.compile(r"[^0-9A-Za-z_\-]+")


def metric_token(value: str) -> str:
    """A group or attribute name made safe for flat MLflow metric names."""
    token = _UNSAFE.sub("_", str(value)).strip("_")
    return token or "_"


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
    """Per-group rates with intervals: Wilson for unweighted hard predictions, else Wald."""
    out: dict[str, dict[str, np.ndarray]] = {}
    binomial = moments.hard and not moments.weighted
    for name, (labels, _, _) in RATES.items():
        m, var, n = moments.rate(labels)
        if binomial:
            low, high = wilson_interval(np.round(m * n), n, level)
        else:
            low, high = wald_interval(m, np.sqrt(var), level, bounds=(0.0, 1.0))
        out[name] = {"estimate": m, "variance": var, "n": n, "low": low, "high": high}
    return out


def comparison_rows(
    cats: tuple[str, ...],
    rate: dict[str, np.ndarray],
    gaps: RateGaps,
    level: float,
    lift_compat: bool,
    *,
    skip: np.ndarray | None = None,
    pvalues: bool = False,
) -> list[dict[str, Any]]:
    """JSON-ready rows for every pair (a, b) of ``gaps.pairs``: the signed and absolute gap
    with its interval (and tolerance p-value when ``pvalues``), the ratio r_a/r_b with its log
    interval, the disparate-impact ratio min/max and the four-fifths flag; with
    ``lift_compat`` also LiFT's gap of rates rounded half-up first. Pairs with a group flagged
    in ``skip`` are left out."""
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
    binomial = moments.hard and not moments.weighted
    cats = moments.categories
    out: dict[str, list[dict[str, Any]]] = {}
    for name in RATES:
        r = rates[name]
        gaps = rate_gaps(
            r["estimate"],
            r["variance"],
            r["n"],
            tolerance=tolerance,
            level=level,
            binomial=binomial,
        )
        skip = (r["n"] == 0) if lift_compat else None
        rows = comparison_rows(cats, r, gaps, level, lift_compat, skip=skip, pvalues=True)
        out[name] = rows
    return out


def group_parity(
    dataset: AuditDataset,
    *,
    tolerance: float = 0.05,
    confidence_level: float = 0.95,
    attributes: list[str] | None = None,
) -> MethodResult:
    """Demographic-parity and equalized-odds gaps for all group pairs of each attribute.

    Parameters
    ----------
    dataset : the audit dataset (needs scores).
    tolerance : τ in H0: |gap| ≤ τ; gaps within τ are tolerated. Default 0.05.
    confidence_level : level of the reported intervals. Default 0.95.
    attributes : protected attributes to audit (default: all of ``dataset.roles.protected``).

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
        "attributes": {},
    }
    for attr in attrs:
        mom = moments_for(dataset, attr)
        rates = group_rates(mom, confidence_level)
        cats = mom.categories
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
            "pairs": pair_comparisons(mom, confidence_level, tolerance=tolerance, rates=rates),
        }
        for name, (_, prefix, human) in RATES.items():
            r = rates[name]
            gaps = rate_gaps(
                r["estimate"],
                r["variance"],
                r["n"],
                tolerance=tolerance,
                level=confidence_level,
                binomial=mom.hard and not mom.weighted,
            )
            for k, (a, b) in enumerate(gaps.pairs):
                est = float(gaps.estimate[k])
                if not np.isfinite(est):
                    empty = [cats[g] for g in (a, b) if r["n"][g] == 0]
                    warnings.append(
                        f"{prefix} for {attr} {cats[a]!r} vs {cats[b]!r} is undefined: "
                        f"no rows with the conditioning label in group(s) {empty}"
                    )
                findings.append(
                    Finding(
                        key=f"{prefix}.{metric_token(attr)}.{metric_token(cats[a])}_{metric_token(cats[b])}",
                        label=f"{human}, {attr}: {cats[a]} − {cats[b]}",
                        estimate=est,
                        interval=Interval(
                            float(gaps.low[k]),
                            float(gaps.high[k]),
                            confidence_level,
                            gaps.interval_method,
                        ),
                        pvalue=float(gaps.pvalue[k]) if np.isfinite(gaps.pvalue[k]) else None,
                        null_hypothesis=f"|gap| ≤ {tolerance:g}",
                        reading=(
                            f"{_rate_words(name)} of {attr}={cats[a]} minus {attr}={cats[b]} is "
                            f"{est:+.3f} ({confidence_level:.0%} CI {gaps.low[k]:+.3f} to "
                            f"{gaps.high[k]:+.3f})."
                        ),
                    )
                )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters={
            "tolerance": tolerance,
            "confidence_level": confidence_level,
            "attributes": attrs,
            "threshold": dataset.threshold,
            "prediction": dataset.prediction_mode,
        },
        findings=findings,
        details=details,
        warnings=warnings,
        seconds=time.perf_counter() - start,
    )


def _rate_words(name: str) -> str:
    return {
        "positive_rate": "Positive-prediction rate",
        "tpr": "True-positive rate",
        "fpr": "False-positive rate",
    }[name]
