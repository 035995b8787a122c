"""Rates and pairs of the LiFT suite: the label base rate and the prediction rates of every
group with intervals, every pair's gaps and ratios (:mod:`fairengine.group_parity.rates`), the
largest gap per rate and the disparate-impact ratio of the extreme groups."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from fairengine.counts import GroupLabelMoments
from fairengine.group_metrics.encoding import Encoding
from fairengine.group_metrics.result import (
    EncodingPairs,
    GroupRate,
    LiftPredictionPair,
    LiftRate,
    LiftRatePair,
    PredictionPair,
    RatePair,
)
from fairengine.group_parity.rates import RATES, group_rates, pair_numbers, rate_pair_gaps
from fairengine.group_parity.result import RateName
from fairengine.intervals import wald_interval, wilson_interval
from fairengine.rate_gap import rate_gaps, rate_ratios, round_half_up
from fairengine.results import Finding, Interval

P = TypeVar("P", bound=RatePair)

_RATE_KEYS = {"positive_rate": "dp", "tpr": "tpr", "fpr": "fpr", "base_rate": "base_rate"}
_RATE_WORDS = {
    "positive_rate": "positive-prediction-rate (demographic parity)",
    "tpr": "true-positive-rate",
    "fpr": "false-positive-rate",
    "base_rate": "label base-rate",
}


@dataclass(frozen=True)
class EncodingRates:
    """The rates of one encoding's groups (arrays over the groups, as
    :func:`~fairengine.group_parity.rates.group_rates` returns them) and all their pairs:
    ``base`` and ``base_pairs`` at the dataset level, ``prediction`` and ``prediction_pairs``
    (positive rate, TPR, FPR) at the model level (None without that level)."""

    base: dict[str, np.ndarray]
    base_pairs: list[RatePair] | None
    prediction: dict[RateName, dict[str, np.ndarray]] | None
    prediction_pairs: dict[RateName, list[PredictionPair]] | None

    def all_pairs(self) -> dict[str, Sequence[RatePair]]:
        """Every audited rate's pairs, base rate first."""
        out: dict[str, Sequence[RatePair]] = {}
        if self.base_pairs is not None:
            out["base_rate"] = self.base_pairs
        for name, rows in (self.prediction_pairs or {}).items():
            out[name] = rows
        return out


def encoding_rates(
    m: GroupLabelMoments, levels: list[str], level: float, lift_compat: bool
) -> EncodingRates:
    """The rates and pairs of :class:`EncodingRates` at ``levels``. Pairs: Newcombe on counts
    (unweighted hard predictions and labels), else Wald; with ``lift_compat`` they carry
    LiFT's gap and the prediction-rate pairs with a group without the conditioning label are
    left out, as in LiFT."""
    cats = m.categories
    base = label_rates(m, level)
    base_pairs = None
    if "dataset" in levels:
        gaps = rate_gaps(
            base["estimate"],
            base["variance"],
            base["n"],
            tolerance=0.0,
            level=level,
            binomial=not m.weighted,
        )
        base_pairs = [
            LiftRatePair(**numbers.numbers(), lift_gap=_lift_gap(base, pair))
            if lift_compat
            else RatePair(**numbers.numbers())
            for numbers, pair in zip(pair_numbers(cats, base, gaps, level), gaps.pairs, strict=True)
        ]
    if "model" not in levels:
        return EncodingRates(base, base_pairs, None, None)
    prediction = group_rates(m, level)
    prediction_pairs: dict[RateName, list[PredictionPair]] = {}
    for name in RATES:
        r = prediction[name]
        gaps = rate_pair_gaps(m, r, tolerance=0.0, level=level)
        empty = r["n"] == 0
        prediction_pairs[name] = [
            LiftPredictionPair(**numbers.numbers(), pvalue=float(p), lift_gap=_lift_gap(r, (a, b)))
            if lift_compat
            else PredictionPair(**numbers.numbers(), pvalue=float(p))
            for numbers, (a, b), p in zip(
                pair_numbers(cats, r, gaps, level), gaps.pairs, gaps.pvalue, strict=True
            )
            if not (lift_compat and (empty[a] or empty[b]))
        ]
    return EncodingRates(base, base_pairs, prediction, prediction_pairs)


def _lift_gap(rate: dict[str, np.ndarray], pair: tuple[int, int]) -> float:
    """LiFT's gap of a pair (lift-semantics.md §1.5): the rates rounded half-up to 5 decimals
    before differencing, the absolute difference rounded again."""
    rounded = round_half_up(rate["estimate"][list(pair)])
    return float(round_half_up(abs(rounded[0] - rounded[1])))


def label_rates(m: GroupLabelMoments, level: float) -> dict[str, np.ndarray]:
    """Base rate P(y=1 | g) with its linearised variance and a Wilson/Wald interval."""
    tot = m.w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = m.w[:, 1] / tot
        var = ((1 - r) ** 2 * m.w2[:, 1] + r**2 * m.w2[:, 0]) / tot**2
    n = m.n.sum(axis=1)
    if not m.weighted:
        low, high = wilson_interval(m.n[:, 1], n, level)
    else:
        low, high = wald_interval(r, np.sqrt(var), level, (0.0, 1.0))
    return {"estimate": r, "variance": var, "n": n, "low": low, "high": high}


def rate_entry(r: dict[str, np.ndarray], i: int, lift_compat: bool) -> GroupRate:
    """The details of group ``i``'s rate ``r`` (with LiFT's rounded rate with ``lift_compat``)."""
    est, low, high = float(r["estimate"][i]), float(r["low"][i]), float(r["high"][i])
    if lift_compat:
        return LiftRate(est, low, high, lift=float(round_half_up(est)))
    return GroupRate(est, low, high)


def reported_pairs(rates: EncodingRates, k: int) -> EncodingPairs:
    """The pairs kept in the details: per rate the ``k`` with the largest |gap| (in pair
    order), with the number of pairs in all."""
    base, pred = rates.base_pairs, rates.prediction_pairs
    return EncodingPairs(
        base_rate=None if base is None else _top_pairs(base, k),
        base_rate_count=None if base is None else len(base),
        positive_rate=None if pred is None else _top_pairs(pred["positive_rate"], k),
        positive_rate_count=None if pred is None else len(pred["positive_rate"]),
        tpr=None if pred is None else _top_pairs(pred["tpr"], k),
        tpr_count=None if pred is None else len(pred["tpr"]),
        fpr=None if pred is None else _top_pairs(pred["fpr"], k),
        fpr_count=None if pred is None else len(pred["fpr"]),
    )


def _top_pairs(rows: list[P], k: int) -> tuple[P, ...]:
    if len(rows) <= k:
        return tuple(rows)
    key = [(-r.abs_gap if np.isfinite(r.abs_gap) else math.inf) for r in rows]
    idx = np.argsort(key, kind="stable")[:k]
    return tuple(rows[i] for i in sorted(idx.tolist()))


def gap_findings(
    rates: EncodingRates, enc: Encoding, lift_compat: bool, level: float
) -> list[Finding]:
    """The largest gap of every rate (``<dp|tpr|fpr|base_rate>_gap_max.<encoding>``; LiFT's
    gaps with ``lift_compat``) and the disparate-impact ratio of the groups with the lowest
    and highest positive-prediction rate (``dp_impact.<encoding>``)."""
    findings = []
    for name, rows in rates.all_pairs().items():
        vals = [r.reported_gap(lift_compat) for r in rows]
        finite = [v for v in vals if np.isfinite(v)]
        if finite:
            worst = rows[max(range(len(rows)), key=lambda i: _finite_or(vals[i], -1.0))]
            findings.append(
                Finding(
                    key=f"{_RATE_KEYS[name]}_gap_max.{enc.token}",
                    label=f"Largest {_RATE_WORDS[name]} gap, {enc.name}",
                    estimate=float(max(finite)),
                    reading=(
                        f"The largest {_RATE_WORDS[name]} gap over {len(rows)} pair(s) of "
                        f"{enc.name} is {max(finite):.3f} ({worst.a} vs {worst.b})."
                    ),
                )
            )
    pred, pred_pairs = rates.prediction, rates.prediction_pairs
    if pred is not None and pred_pairs is not None and pred_pairs["positive_rate"]:
        impact = _impact_finding(enc, pred["positive_rate"], level)
        if impact is not None:
            findings.append(impact)
    return findings


def _finite_or(value: float, default: float) -> float:
    return value if np.isfinite(value) else default


def _impact_finding(enc: Encoding, r: dict[str, np.ndarray], level: float) -> Finding | None:
    est = r["estimate"]
    if not np.any(np.isfinite(est)) or not np.nanmax(est) > 0:
        return None
    lo_g, hi_g = int(np.nanargmin(est)), int(np.nanargmax(est))
    rr = rate_ratios(est[[lo_g, hi_g]], r["variance"][[lo_g, hi_g]], level=level)
    ratio = float(rr.estimate[0])
    cats = enc.moments.categories
    flag = ratio < 0.8
    return Finding(
        key=f"dp_impact.{enc.token}",
        label=f"Disparate-impact ratio (lowest/highest positive-prediction rate), {enc.name}",
        estimate=ratio,
        interval=Interval(
            float(rr.low[0]),
            float(rr.high[0]),
            level,
            "log ratio (delta method), selected pair",
        ),
        reading=(
            f"{enc.name}={cats[lo_g]} has {ratio:.0%} of the positive-prediction rate of "
            f"{enc.name}={cats[hi_g]}: "
            + ("below the four-fifths (80 %) rule." if flag else "meets the four-fifths rule.")
        ),
    )
