r"""Held-out evaluation of a threshold rule (notes ``intersectional.md`` §4.8).

A rule (τ_s, p_s, q_s) gives each held-out row the probability π_i = q_s if f_i > τ_s else p_s of a
positive decision. Every quantity depends on the data only through the cells
``C[s, y, a]`` (weighted rows of intersection s with label y, above (a = 1) or not above (a = 0)
its threshold), so:

* **Expected-rate ε (primary).** A rate of intersection s is affine in its share above threshold:
  r_s = p_s + (q_s − p_s) Â_s, smoothed as (q u + p (d − u) + α)/(d + α + β). Its interval is the
  **exact posterior** Â_s ~ Beta(α₀ + u_s, β₀ + d_s − u_s) mapped through the affine function (no
  Monte-Carlo noise from the randomisation); ε per draw as in the audit
  (:func:`fairengine.intersectional.metrics.pairwise_epsilon`). Reported: the point estimate, the
  equal-tailed interval, the one-sided upper bound, P(ε ≤ target) and the pair attaining ε.
The cells have the layout of the audit's count table with "above" in the place of ŷ, so the
audit's :func:`~fairengine.intersectional.metrics.rate_counts` reads (u, d) off them.

* **Realised ε.** What an auditor sees after drawing the decisions: per cell, positives ~
  Binomial(rows, π); the distribution of ε over ``n_realised`` draws.
* **Loss, accuracy, TPR, FPR, selection rate**: means of per-row expected values over the cells,
  with normal intervals from the per-row variance (CLT over held-out rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from fairengine.intersectional.metrics import pairwise_epsilon, rate_counts
from fairengine.mitigation.rates import CONSTRAINT_RATES, support_mask
from fairengine.mitigation.result import EpsilonEstimate, Estimate, SplitEvaluation
from fairengine.mitigation.scores import check_rows


@dataclass
class RuleEvaluation:
    """Everything computed for one rule on one split: :meth:`record` is what the result keeps
    (``group_rates``, the smoothed rate per intersection, feed its per-intersection table)."""

    epsilon: dict[str, EpsilonEstimate]
    loss: Estimate
    accuracy: Estimate
    tpr: Estimate
    fpr: Estimate
    selection_rate: Estimate
    group_rates: dict[str, np.ndarray] = field(default_factory=dict)
    confidence_level: float = 0.95

    def record(self) -> SplitEvaluation:
        """The evaluation as the result's details keep it."""
        return SplitEvaluation(
            epsilon=dict(self.epsilon),
            loss=self.loss,
            accuracy=self.accuracy,
            tpr=self.tpr,
            fpr=self.fpr,
            selection_rate=self.selection_rate,
            confidence_level=self.confidence_level,
        )


def rule_cells(
    groups: np.ndarray,
    label: np.ndarray,
    score: np.ndarray,
    thresholds: np.ndarray,
    sample_weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(K, 2, 2)`` weighted cells ``C[s, y, above]`` (weights normalised to mean 1) and the
    unweighted row counts, for per-intersection ``thresholds`` (one bincount each)."""
    tau = np.asarray(thresholds, dtype=np.float64)
    k = tau.shape[0]
    g, y, f, w = check_rows(groups, label, score, sample_weight)
    if g.size and g.max() >= k:
        raise ValueError(f"groups must be intersection ids in 0..{k - 1}")
    above = (f > tau[g]).astype(np.intp)
    idx = 4 * g + 2 * y + above
    w = w * (w.shape[0] / w.sum())
    cells = np.bincount(idx, weights=w, minlength=4 * k).reshape(k, 2, 2)
    rows = np.bincount(idx, minlength=4 * k).reshape(k, 2, 2).astype(np.float64)
    return cells, rows


def _cell_mean(
    value: np.ndarray, cells: np.ndarray, rows: np.ndarray, select: np.ndarray, z: float
) -> Estimate:
    """Mean of a per-cell value over the selected cells, with a CLT interval."""
    w = cells * select
    total = w.sum()
    if total <= 0:
        return Estimate(float("nan"), float("nan"), float("nan"))
    mean = float((w * value).sum() / total)
    r = rows * select
    n = r.sum()
    var = float((r * (value - mean) ** 2).sum() / max(n, 1.0))
    half = float(z * np.sqrt(var / max(n, 1.0)))
    return Estimate(mean, mean - half, mean + half)


def evaluate_rule(
    cells: np.ndarray,
    rows: np.ndarray,
    p: np.ndarray,
    q: np.ndarray,
    *,
    metrics: list[str] | tuple[str, ...],
    outcomes: str = "positive",
    alpha: float = 0.5,
    beta: float = 0.5,
    cost_fp: float = 1.0,
    cost_fn: float = 1.0,
    min_support: int = 30,
    exclude_sparse: bool = False,
    target: float | None = None,
    n_draws: int = 4000,
    n_realised: int = 200,
    prior: tuple[float, float] = (0.5, 0.5),
    confidence_level: float = 0.95,
    rng: np.random.Generator | None = None,
    constrained: dict[str, np.ndarray] | None = None,
) -> RuleEvaluation:
    """Evaluate the rule with flip probabilities ``p``, ``q`` on held-out ``cells`` (see
    :func:`rule_cells` and the module docstring).

    ``constrained`` (rate -> (K,) bool) restricts ε to the intersections the rule constrained (those
    with rows in the held-out denominator among them); by default the support policy on the
    held-out rows decides.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    gamma = 1.0 - confidence_level
    z = float(stats.norm.ppf(1 - gamma / 2))
    pi = np.stack([p, q], axis=-1)[:, None, :]  # (K, 1, 2): π by above
    pi = np.broadcast_to(pi, cells.shape)
    rates_needed = sorted({r for m in metrics for r in CONSTRAINT_RATES[m]})
    k = cells.shape[0]
    a0, b0 = prior
    point: dict[str, np.ndarray] = {}
    draws: dict[str, np.ndarray] = {}
    realised: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    # realised decisions: positives per cell ~ Binomial(rows, π)
    pos = None
    if n_realised:
        pos = rng.binomial(rows.astype(np.int64), pi, size=(n_realised, *rows.shape))
    for r in rates_needed:
        if constrained is not None and r in constrained:
            masks[r] = np.asarray(constrained[r], dtype=bool) & support_mask(r, rows.sum(axis=2))
        else:
            masks[r] = support_mask(
                r, rows.sum(axis=2), min_support=min_support, exclude_sparse=exclude_sparse
            )
        u, d = rate_counts(cells, r)
        expected = q * u + p * (d - u)
        with np.errstate(invalid="ignore", divide="ignore"):
            point[r] = np.where(
                d + alpha + beta > 0, (expected + alpha) / (d + alpha + beta), np.nan
            )
        share = rng.beta(a0 + u, b0 + np.maximum(d - u, 0.0), size=(n_draws, k))
        draws[r] = p + (q - p) * share
        if pos is not None:
            kk, dd = rate_counts(_realised_counts(pos, rows), r)
            realised[r] = (kk + alpha) / (dd + alpha + beta)
    eps: dict[str, EpsilonEstimate] = {}
    for m in metrics:
        best = None
        draw_eps = np.full(n_draws, -np.inf)
        real_eps = np.full(n_realised, -np.inf) if pos is not None else None
        for r in CONSTRAINT_RATES[m]:
            e, hi, lo, _ = pairwise_epsilon(point[r], masks[r], outcomes)
            if best is None or float(e) > best[0]:
                best = (float(e), (int(hi), int(lo)), r)
            draw_eps = np.maximum(draw_eps, pairwise_epsilon(draws[r], masks[r], outcomes)[0])
            if real_eps is not None:
                real_eps = np.maximum(
                    real_eps, pairwise_epsilon(realised[r], masks[r], outcomes)[0]
                )
        assert best is not None
        lo_q, hi_q = _quantiles(draw_eps, [gamma / 2, 1 - gamma / 2])
        summary: tuple[float | None, float | None, float | None] = (None, None, None)
        if real_eps is not None:  # mean and interval of the realised ε
            rl, rh = _quantiles(real_eps, [gamma / 2, 1 - gamma / 2])
            summary = (float(real_eps.mean()), float(rl), float(rh))
        eps[m] = EpsilonEstimate(
            metric=m,
            estimate=best[0],
            low=float(lo_q),
            high=float(hi_q),
            upper_bound=float(_quantiles(draw_eps, [confidence_level])[0]),
            prob_below_target=None if target is None else float(np.mean(draw_eps <= target)),
            pair=best[1],
            component=best[2],
            realised_mean=summary[0],
            realised_low=summary[1],
            realised_high=summary[2],
        )
    # per-row expected loss / decision by cell [s, y, above]
    y1 = np.zeros(cells.shape)
    y1[:, 1, :] = 1.0
    loss_v = np.where(y1 == 1, cost_fn * (1 - pi), cost_fp * pi)
    err_v = np.where(y1 == 1, 1 - pi, pi)
    every = np.ones(cells.shape)
    return RuleEvaluation(
        epsilon=eps,
        loss=_cell_mean(loss_v, cells, rows, every, z),
        accuracy=_flip(_cell_mean(err_v, cells, rows, every, z)),
        tpr=_cell_mean(np.asarray(pi), cells, rows, y1, z),
        fpr=_cell_mean(np.asarray(pi), cells, rows, 1 - y1, z),
        selection_rate=_cell_mean(np.asarray(pi), cells, rows, every, z),
        group_rates=point,
        confidence_level=confidence_level,
    )


def _realised_counts(pos: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Cells ``(R, K, 2, 2)`` indexed [s, y, ŷ] from realised positives per [s, y, above]: the
    "above" axis is summed and split into ŷ = 0/1."""
    yhat1 = pos.sum(axis=-1)
    yhat0 = rows.sum(axis=-1)[None] - yhat1
    return np.stack([yhat0, yhat1], axis=-1)


def _quantiles(x: np.ndarray, qs: list[float]) -> np.ndarray:
    """Quantiles without interpolation (draws may be ``inf`` when a rate draw is 0)."""
    return np.quantile(x, qs, method="inverted_cdf")


def _flip(e: Estimate) -> Estimate:
    """1 − an estimate (accuracy from the error rate)."""
    return Estimate(1 - e.estimate, 1 - e.high, 1 - e.low)
