"""Per-group rates with intervals and pairwise gaps and ratios, from the per-(group, label)
sufficient statistics of :mod:`fairengine.counts` (one pass over the rows): the statistics of
``group_parity``, shared with the LiFT suite (:mod:`fairengine.group_metrics`).
"""

from __future__ import annotations

import numpy as np

from fairengine.counts import GroupLabelMoments
from fairengine.dataset import AuditDataset
from fairengine.group_parity.result import PairNumbers, RateName
from fairengine.intervals import wald_interval, wilson_interval
from fairengine.rate_gap import RateGaps, effective_sample_size, rate_gaps, rate_ratios

# rate name -> (labels it conditions on, metric key prefix, human name)
RATES: dict[RateName, tuple[tuple[int, ...], str, str]] = {
    "positive_rate": ((0, 1), "dp_gap", "Demographic parity gap (positive-prediction rate)"),
    "tpr": ((1,), "tpr_gap", "Equalized odds: true-positive-rate gap"),
    "fpr": ((0,), "fpr_gap", "Equalized odds: false-positive-rate gap"),
}


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
) -> dict[RateName, dict[str, np.ndarray]]:
    """Per-group rates with intervals: Wilson for hard predictions (on the counts; with weights
    on the effective counts r̂·n_eff of :func:`fairengine.rate_gap.effective_sample_size`,
    stored as ``n_effective``), Wald for expected counts."""
    out: dict[RateName, dict[str, np.ndarray]] = {}
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


def pair_numbers(
    cats: tuple[str, ...], rate: dict[str, np.ndarray], gaps: RateGaps, level: float
) -> list[PairNumbers]:
    """:class:`PairNumbers` of every pair of ``gaps.pairs`` (in that order) of one rate of
    :func:`group_rates`, the ratios from :func:`fairengine.rate_gap.rate_ratios`."""
    ratios = rate_ratios(rate["estimate"], rate["variance"], level=level)
    return [
        PairNumbers(
            a=cats[a],
            b=cats[b],
            gap=float(gaps.estimate[k]),
            abs_gap=float(abs(gaps.estimate[k])),
            gap_low=float(gaps.low[k]),
            gap_high=float(gaps.high[k]),
            ratio=float(ratios.estimate[k]),
            ratio_low=float(ratios.low[k]),
            ratio_high=float(ratios.high[k]),
            impact_ratio=float(ratios.impact[k]),
            four_fifths_violated=bool(ratios.four_fifths[k]),
        )
        for k, (a, b) in enumerate(gaps.pairs)
    ]
