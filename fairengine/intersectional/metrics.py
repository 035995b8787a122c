r"""Differential-fairness ε metrics over intersections, as functions of a count table.

Definitions (Foulds, Islam, Keya & Pan, "An intersectional definition of fairness", ICDE 2020;
per-metric form of Morina et al., arXiv:1911.01468, Tables 1–2; notes ``intersectional.md``
§1.2–1.3). Each metric is a per-intersection rate r_s = k_s / d_s read off ``C[s, y, ŷ]``:

=========  ================================  ==========================  =====================
metric     rate                              k_s                         d_s
=========  ================================  ==========================  =====================
``slift``  base rate P(y=1 | s)              C[s, 1, ·]                  C[s, ·, ·]
``elift``  base rate vs the overall rate r̄   C[s, 1, ·]                  C[s, ·, ·]
``sp``     selection rate P(ŷ=1 | s)         C[s, ·, 1]                  C[s, ·, ·]
``tpr``    P(ŷ=1 | y=1, s)                   C[s, 1, 1]                  C[s, 1, ·]
``fpr``    P(ŷ=1 | y=0, s)                   C[s, 0, 1]                  C[s, 0, ·]
``eo``     both ``tpr`` and ``fpr``          —                           —
=========  ================================  ==========================  =====================

With smoothed rates r̃_s = (k_s + α)/(d_s + α + β) (α = β = 0: empirical) over the auditable
intersections S* (:mod:`fairengine.intersectional.cells`):

.. math::

    \varepsilon_{pos}(r) = \max_{s,s'} |\ln r_s - \ln r_{s'}| = \ln\max_s r_s - \ln\min_s r_s,
    \qquad \varepsilon_{both}(r) = \max(\varepsilon_{pos}(r), \varepsilon_{pos}(1 - r))

    \varepsilon_{elift} = \max_s |\ln r_s - \ln \bar r|, \quad \bar r = \sum_s k_s / \sum_s d_s
    \ \text{(unsmoothed; under "both" also } |\ln(1-r_s) - \ln(1-\bar r)|)

    \varepsilon_{eo} = \max(\varepsilon_{tpr}, \varepsilon_{fpr})

``outcomes="both"`` is Foulds' DF (every outcome value); ``"positive"`` (default) is the
positive-outcome form. e^{−ε} is the equivalent "four-fifths"-style ratio. Conventions: a zero rate
next to a positive one gives ε = ∞ (never clipped; the group is named); rates that are all equal
(even all zero) give ε = 0; fewer than two auditable intersections give NaN.

Every function broadcasts over leading axes of the count array ``(..., K, 2, 2)``, so bootstrap
replicates and posterior draws reuse them. Relations (tested): with α = β = 0, r̄ lies in
[min r, max r], hence ε_elift ≤ ε_slift ≤ 2 ε_elift; and a coarser group's rate is a convex
combination of its intersections' rates, hence every marginal ε ≤ the intersectional ε.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fairengine.errors import DataContractError
from fairengine.intersectional.cells import IntersectionTable, auditable_mask, support_status

Outcomes = Literal["positive", "both"]
OUTCOMES: tuple[str, ...] = ("positive", "both")
DATA_METRICS: tuple[str, ...] = ("elift", "slift")
MODEL_METRICS: tuple[str, ...] = ("sp", "tpr", "fpr", "eo")
METRICS: tuple[str, ...] = DATA_METRICS + MODEL_METRICS
#: metric -> the rate(s) it is built from.
METRIC_RATES: dict[str, tuple[str, ...]] = {
    "elift": ("base_rate",),
    "slift": ("base_rate",),
    "sp": ("selection_rate",),
    "tpr": ("tpr",),
    "fpr": ("fpr",),
    "eo": ("tpr", "fpr"),
}
METRIC_NAMES: dict[str, str] = {
    "elift": "elift (base rate vs overall)",
    "slift": "impact ratio / slift (base rate)",
    "sp": "statistical parity (selection rate)",
    "tpr": "TPR parity (equal opportunity)",
    "fpr": "FPR parity",
    "eo": "equalized odds (TPR and FPR)",
}

#: outcome convention -> its name and the source that uses it (named wherever an ε is shown).
CONVENTION_NAMES: dict[str, str] = {
    "positive": "positive outcome only, Morina et al.",
    "both": "both outcomes, Foulds et al. / AIF360",
}
#: metric -> (what ε bounds under "positive", what it bounds under "both").
CONVENTION_BOUNDS: dict[str, tuple[str, str]] = {
    "elift": ("P(y=1 | s) vs overall", "P(y=1 | s) and P(y=0 | s) vs overall"),
    "slift": ("P(y=1 | s)", "P(y=1 | s) and P(y=0 | s)"),
    "sp": ("P(ŷ=1 | s)", "P(ŷ=1 | s) and P(ŷ=0 | s)"),
    "tpr": ("TPR", "TPR and FNR"),
    "fpr": ("FPR", "FPR and TNR"),
    "eo": ("TPR and FPR", "TPR, FNR, FPR and TNR"),
}
#: metrics whose "both" form AIF360 computes (``smoothed_empirical_differential_fairness`` on the
#: labels, ``smoothed_edf`` on the predictions); for the others "both" is Foulds et al.'s form.
AIF360_METRICS: tuple[str, ...] = ("slift", "sp")


@dataclass(frozen=True)
class EpsilonConventions:
    """The smoothed ε of one metric under the configured outcome convention and the other one.

    ε_positive bounds |ln r_s − ln r_s'| (Morina et al.'s tables); ε_both also bounds
    |ln(1 − r_s) − ln(1 − r_s')| (Foulds et al.'s DF; AIF360's smoothed EDF), so
    ε_both = max(ε_positive, ε_positive(1 − r)) ≥ ε_positive. Only ``outcomes`` is tested and
    decides; ``other_epsilon`` is a point estimate shown beside it, never a finding.
    """

    metric: str
    outcomes: str
    name: str
    bounds: str
    epsilon: float
    other_outcomes: str
    other_name: str
    other_bounds: str
    other_epsilon: float

    @classmethod
    def of(
        cls, metric: str, outcomes: str, epsilon: float, other_epsilon: float
    ) -> EpsilonConventions:
        check_metric(metric)
        other = "both" if check_outcomes(outcomes) == "positive" else "positive"
        return cls(
            metric=metric,
            outcomes=outcomes,
            name=convention_name(metric, outcomes),
            bounds=CONVENTION_BOUNDS[metric][OUTCOMES.index(outcomes)],
            epsilon=float(epsilon),
            other_outcomes=other,
            other_name=convention_name(metric, other),
            other_bounds=CONVENTION_BOUNDS[metric][OUTCOMES.index(other)],
            other_epsilon=float(other_epsilon),
        )

    @property
    def epsilon_positive(self) -> float:
        return self.epsilon if self.outcomes == "positive" else self.other_epsilon

    @property
    def epsilon_both(self) -> float:
        return self.epsilon if self.outcomes == "both" else self.other_epsilon

    def sentence(self) -> str:
        """The reading's clause on the other convention, e.g. "Under both outcomes, as Foulds et
        al. and AIF360 compute it (bounding P(y=1 | s) and P(y=0 | s)): ε = 1.883 (shown, not
        tested)."."""
        who = self.other_name.split(", ", 1)[1].replace(" / ", " and ")
        where = "both outcomes" if self.other_outcomes == "both" else "the positive outcome only"
        return (
            f"Under {where}, as {who} compute it (bounding {self.other_bounds}): "
            f"ε = {self.other_epsilon:.3f} (shown, not tested)."
        )


def convention_name(metric: str, outcomes: str) -> str:
    """The name of ``outcomes`` for ``metric``: AIF360 is cited only where it computes that ε."""
    name = CONVENTION_NAMES[check_outcomes(outcomes)]
    if outcomes == "both" and metric not in AIF360_METRICS:
        name = name.replace(" / AIF360", "")
    return name


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise DataContractError(f"unknown intersectional metric {metric!r}; use one of {METRICS}")
    return metric


def check_outcomes(outcomes: str) -> str:
    if outcomes not in OUTCOMES:
        raise DataContractError(f"outcomes must be one of {list(OUTCOMES)}, got {outcomes!r}")
    return outcomes


def rate_counts(counts: np.ndarray, rate: str) -> tuple[np.ndarray, np.ndarray]:
    """Numerator k and denominator d of ``rate`` per intersection from ``C[..., s, y, ŷ]``."""
    c = np.asarray(counts, dtype=np.float64)
    if rate == "base_rate":
        return c[..., 1, :].sum(axis=-1), c.sum(axis=(-2, -1))
    if rate == "selection_rate":
        return c[..., :, 1].sum(axis=-1), c.sum(axis=(-2, -1))
    if rate == "tpr":
        return c[..., 1, 1], c[..., 1, :].sum(axis=-1)
    if rate == "fpr":
        return c[..., 0, 1], c[..., 0, :].sum(axis=-1)
    raise DataContractError(f"unknown rate {rate!r}")


def smoothed_rates(
    k: np.ndarray, d: np.ndarray, alpha: float = 0.5, beta: float = 0.5
) -> np.ndarray:
    """r̃ = (k + α)/(d + α + β), the Beta(α, β) posterior mean; NaN where d + α + β = 0."""
    k = np.asarray(k, dtype=np.float64)
    den = np.asarray(d, dtype=np.float64) + alpha + beta
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (k + alpha) / den, np.nan)


def _logs(r: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(r)


def _spread(logr: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """max − min of ``logr`` over ``valid`` entries of the last axis, and the arg max / arg min."""
    hi_v = np.where(valid, logr, -np.inf)
    lo_v = np.where(valid, logr, np.inf)
    hi = np.argmax(hi_v, axis=-1)
    lo = np.argmin(lo_v, axis=-1)
    top = np.take_along_axis(hi_v, hi[..., None], axis=-1)[..., 0]
    bot = np.take_along_axis(lo_v, lo[..., None], axis=-1)[..., 0]
    with np.errstate(invalid="ignore"):
        eps = top - bot
    eps = np.where(top == bot, 0.0, eps)  # all equal, including all rates zero (−inf − −inf)
    eps = np.where(valid.sum(axis=-1) >= 2, eps, np.nan)
    return eps, hi, lo


def pairwise_epsilon(
    rates: np.ndarray, mask: np.ndarray | None = None, outcomes: str = "positive"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ε = max over pairs |ln r_s − ln r_s'| over the last axis (slift, sp, tpr, fpr).

    Returns ``(eps, hi, lo, side)``: the intersection with the larger and the smaller rate on the
    attaining side, and ``side`` 0 (positive outcome r) or 1 (negative outcome 1 − r).
    NaN rates (no denominator in a replicate) are skipped.
    """
    check_outcomes(outcomes)
    r = np.asarray(rates, dtype=np.float64)
    valid = ~np.isnan(r)
    if mask is not None:
        valid &= np.broadcast_to(np.asarray(mask, dtype=bool), r.shape)
    eps, hi, lo = _spread(_logs(r), valid)
    side = np.zeros(eps.shape, dtype=np.intp)
    if outcomes == "both":
        eps_n, hi_n, lo_n = _spread(_logs(1.0 - r), valid)
        neg = eps_n > eps
        # On the negative side the larger 1 − r is the smaller r: report (larger r, smaller r).
        hi, lo = np.where(neg, lo_n, hi), np.where(neg, hi_n, lo)
        eps = np.where(neg, eps_n, eps)
        side = neg.astype(np.intp)
    return eps, hi, lo, side


def elift_epsilon(
    rates: np.ndarray,
    overall: np.ndarray | float,
    mask: np.ndarray | None = None,
    outcomes: str = "positive",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ε_elift = max_s |ln r_s − ln r̄| (and |ln(1−r_s) − ln(1−r̄)| under "both").

    ``overall`` has the leading shape of ``rates`` without the last axis. Returns
    ``(eps, at, side)``, ``at`` the intersection farthest from the overall rate.
    """
    check_outcomes(outcomes)
    r = np.asarray(rates, dtype=np.float64)
    rbar = np.asarray(overall, dtype=np.float64)[..., None]
    valid = ~np.isnan(r)
    if mask is not None:
        valid &= np.broadcast_to(np.asarray(mask, dtype=bool), r.shape)

    def dev(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        la, lb = _logs(a), _logs(b)
        with np.errstate(invalid="ignore"):
            x = np.abs(la - lb)
        return np.where(la == lb, 0.0, x)  # equal, including both zero

    d = np.where(valid, dev(r, rbar), -np.inf)
    side = np.zeros(r.shape[:-1], dtype=np.intp)
    if outcomes == "both":
        dn = np.where(valid, dev(1.0 - r, 1.0 - rbar), -np.inf)
        side = (dn.max(axis=-1) > d.max(axis=-1)).astype(np.intp)
        d = np.maximum(d, dn)
    at = np.argmax(d, axis=-1)
    eps = np.take_along_axis(d, at[..., None], axis=-1)[..., 0]
    eps = np.where(valid.sum(axis=-1) >= 1, eps, np.nan)
    return eps, at, side


def epsilon_from_counts(
    counts: np.ndarray,
    metric: str,
    masks: dict[str, np.ndarray],
    *,
    alpha: float = 0.5,
    beta: float = 0.5,
    outcomes: str = "positive",
) -> np.ndarray:
    """ε of ``metric`` for count arrays ``(..., K, 2, 2)`` (vectorised over leading axes).

    ``masks[rate]`` selects the auditable intersections of each rate the metric uses (fixed from
    the original data; a replicate's empty cell falls back to the prior mean α/(α+β), or is
    skipped with α = β = 0).
    """
    check_metric(metric)
    if metric == "eo":
        return np.maximum(
            epsilon_from_counts(counts, "tpr", masks, alpha=alpha, beta=beta, outcomes=outcomes),
            epsilon_from_counts(counts, "fpr", masks, alpha=alpha, beta=beta, outcomes=outcomes),
        )
    rate = METRIC_RATES[metric][0]
    k, d = rate_counts(counts, rate)
    r = smoothed_rates(k, d, alpha, beta)
    if metric == "elift":
        return elift_epsilon(r, overall_rate(k, d), masks[rate], outcomes)[0]
    return pairwise_epsilon(r, masks[rate], outcomes)[0]


def overall_rate(k: np.ndarray, d: np.ndarray) -> np.ndarray:
    """r̄ = Σ_s k_s / Σ_s d_s over all rows (unsmoothed; N is large)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(k).sum(axis=-1) / np.asarray(d).sum(axis=-1)


@dataclass
class RateTable:
    """One rate over the intersections: counts, support status, smoothed rates."""

    rate: str
    k: np.ndarray
    d: np.ndarray
    rows: np.ndarray
    status: np.ndarray
    mask: np.ndarray
    smoothed: np.ndarray


@dataclass
class DifferentialFairness:
    """ε of one metric on one count table (smoothed point estimate), and how it is attained.

    ``pair`` is (intersection with the larger rate, intersection with the smaller rate) for the
    pairwise metrics, (the farthest intersection, −1 for "overall") for elift. ``component`` says
    which rate attains eo's max; ``side`` whether the positive (r) or negative (1 − r) outcome does.
    """

    metric: str
    outcomes: str
    epsilon: float
    pair: tuple[int, int]
    side: str
    component: str
    rates: dict[str, RateTable]
    overall: float | None = None
    alpha: float = 0.5
    beta: float = 0.5
    excluded: dict[str, list[int]] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """The equivalent ratio e^{−ε} (1 is perfect parity)."""
        return float(np.exp(-self.epsilon))

    @property
    def masks(self) -> dict[str, np.ndarray]:
        return {name: rt.mask for name, rt in self.rates.items()}


def rate_table(
    table: IntersectionTable,
    rate: str,
    *,
    alpha: float = 0.5,
    beta: float = 0.5,
    min_support: int = 30,
    exclude_sparse: bool = False,
    include_empty: bool = False,
) -> RateTable:
    """Counts, status (support policy) and smoothed rates of ``rate`` on ``table``."""
    k, d = rate_counts(table.counts, rate)
    _, rows = rate_counts(table.rows, rate)
    status = support_status(rows, table.sizes(), min_support)
    mask = auditable_mask(status, exclude_sparse=exclude_sparse, include_empty=include_empty)
    return RateTable(rate, k, d, rows, status, mask, smoothed_rates(k, d, alpha, beta))


def differential_fairness(
    table: IntersectionTable,
    metric: str,
    *,
    alpha: float = 0.5,
    beta: float = 0.5,
    outcomes: str = "positive",
    min_support: int = 30,
    exclude_sparse: bool = False,
    include_empty: bool = False,
) -> DifferentialFairness:
    """Smoothed ε of ``metric`` on ``table`` with the attaining pair and per-intersection rates.

    α = β = 0 gives the empirical estimator (ε = ∞ when an auditable rate is 0). Raises
    :class:`DataContractError` for a model metric on a table without predictions, for negative
    smoothing, and when fewer than two intersections are auditable for the metric.
    """
    check_metric(metric)
    check_outcomes(outcomes)
    if alpha < 0 or beta < 0 or not np.isfinite(alpha + beta):
        raise DataContractError(f"smoothing alpha and beta must be >= 0, got {alpha}, {beta}")
    if metric in MODEL_METRICS and not table.has_predictions:
        raise DataContractError(
            f"metric {metric!r} needs model predictions; the table has labels only"
        )
    rates = {
        rate: rate_table(
            table,
            rate,
            alpha=alpha,
            beta=beta,
            min_support=min_support,
            exclude_sparse=exclude_sparse,
            include_empty=include_empty,
        )
        for rate in METRIC_RATES[metric]
    }
    for rt in rates.values():
        need = 1 if metric == "elift" else 2
        if rt.mask.sum() < need:
            raise DataContractError(
                f"metric {metric!r}: only {int(rt.mask.sum())} of {table.n_intersections} "
                f"intersections of {list(table.attributes)} have rows for the {rt.rate} "
                f"denominator (statuses: {_status_counts(rt.status)}); at least {need} are needed"
            )
    excluded = {name: np.flatnonzero(~rt.mask).tolist() for name, rt in rates.items()}
    if metric == "elift":
        rt = rates["base_rate"]
        rbar = float(overall_rate(rt.k, rt.d))
        eps, at, side = elift_epsilon(rt.smoothed, rbar, rt.mask, outcomes)
        return DifferentialFairness(
            epsilon=float(eps),
            pair=(int(at), -1),
            side=_side(side),
            component="base_rate",
            overall=rbar,
            excluded=excluded,
            metric=metric,
            outcomes=outcomes,
            rates=rates,
            alpha=alpha,
            beta=beta,
        )
    best = None
    for name, rt in rates.items():
        eps, hi, lo, side = pairwise_epsilon(rt.smoothed, rt.mask, outcomes)
        if best is None or eps > best[0]:
            best = (float(eps), (int(hi), int(lo)), _side(side), name)
    assert best is not None
    return DifferentialFairness(
        epsilon=best[0],
        pair=best[1],
        side=best[2],
        component=best[3],
        excluded=excluded,
        metric=metric,
        outcomes=outcomes,
        rates=rates,
        alpha=alpha,
        beta=beta,
    )


def _side(side: np.ndarray | int) -> str:
    return "negative" if int(side) == 1 else "positive"


def _status_counts(status: np.ndarray) -> dict[str, int]:
    values, counts = np.unique(status.astype(str), return_counts=True)
    return dict(zip(values.tolist(), counts.astype(int).tolist(), strict=True))
