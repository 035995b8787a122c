"""Area under the ROC curve with DeLong's variance, in O(n log n) by ranks.

For positives X_1..X_m and negatives Y_1..Y_n with scores, the AUC is the Mann–Whitney
statistic with ties counting one half (DeLong, DeLong & Clarke-Pearson 1988, §2):

    θ̂ = (1/(m n)) Σ_i Σ_j ψ(X_i, Y_j),   ψ(x, y) = 1{x > y} + ½·1{x = y}.

DeLong's *structural components* (placements) are

    V10(X_i) = (1/n) Σ_j ψ(X_i, Y_j),      V01(Y_j) = (1/m) Σ_i ψ(X_i, Y_j),

so θ̂ = mean V10 = mean V01, and the variance of θ̂ is estimated by

    Var(θ̂) = S10/m + S01/n,   S10 = Σ_i (V10_i − θ̂)²/(m−1),   S01 = Σ_j (V01_j − θ̂)²/(n−1).

Sun & Xu (2014, IEEE SPL 21:1389) compute the placements from midranks instead of the m×n
kernel matrix: V10_i = (R_i − R^X_i)/n and V01_j = 1 − (R_j − R^Y_j)/m, with R the midrank in
the pooled sample and R^X, R^Y the midranks within each class. Here the same quantities come
from one sort of the distinct scores and cumulative class totals per tie block, which also
works with weights.

**Weights.** With sampling weights w the weighted AUC is
θ̂_w = Σ_i Σ_j w_i w_j ψ(X_i, Y_j) / (W_X W_Y) (what ``sklearn.metrics.roc_auc_score`` computes
with ``sample_weight``); the placements become weighted averages over the other class, and the
variance is the linearisation (influence-function) estimator with the usual m/(m−1) finite-sample
factor,

    Var(θ̂_w) = m/(m−1) Σ_i w_i² (V10_i − θ̂)² / W_X²  +  n/(n−1) Σ_j w_j² (V01_j − θ̂)² / W_Y²,

which reduces exactly to DeLong's S10/m + S01/n when every weight is 1.

Every function also works on a *histogram* of scores (:func:`auc_delong_from_histogram`): the
placements are constant within a block of tied scores, so per-block sums of w and w² per class
are sufficient statistics for θ̂ and its DeLong variance. Histograms of partitions add up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError
from fairengine.intervals import wald_interval, z_value
from fairengine.results import Interval

INTERVAL_METHODS: tuple[str, ...] = ("wald", "logit")


@dataclass(frozen=True)
class AUCEstimate:
    """AUC θ̂ with its DeLong variance.

    ``n_pos``/``n_neg`` are row counts of each class (not weight totals); ``weight_pos`` and
    ``weight_neg`` are the class weight totals (equal to the counts without weights).
    ``variance`` is NaN when a class has a single row (S10 or S01 undefined).
    """

    auc: float
    variance: float
    se: float
    n_pos: int
    n_neg: int
    weight_pos: float
    weight_neg: float

    def confidence_interval(self, confidence_level: float = 0.95, method: str = "wald") -> Interval:
        """Interval for the AUC; see :func:`auc_interval`."""
        return auc_interval(self.auc, self.se, confidence_level, method)


@dataclass(frozen=True)
class DeLongPlacements:
    """Per-row structural components: ``v10`` for positives, ``v01`` for negatives (row order
    of the inputs restricted to each class), and the AUC they average to."""

    auc: float
    v10: np.ndarray
    v01: np.ndarray


def _check_inputs(
    y: np.ndarray, score: np.ndarray, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    y_arr = np.asarray(y)
    s = np.asarray(score)
    if y_arr.ndim != 1 or s.ndim != 1 or y_arr.shape != s.shape:
        raise DataContractError(
            f"y and score must be 1-D arrays of the same length, got shapes {y_arr.shape} "
            f"and {s.shape}"
        )
    if y_arr.dtype == bool:
        y_arr = y_arr.astype(np.int8)
    if not np.issubdtype(y_arr.dtype, np.number):
        raise DataContractError(f"y must hold 0/1 labels, got dtype {y_arr.dtype}")
    bad = ~np.isin(y_arr, (0, 1))
    if bad.any():
        raise DataContractError(
            f"y must hold 0/1 labels; found {int(bad.sum())} other value(s) "
            f"(e.g. {y_arr[bad][:3].tolist()})"
        )
    if not np.issubdtype(s.dtype, np.number) or s.dtype == bool:
        raise DataContractError(f"score must be numeric, got dtype {s.dtype}")
    s = s.astype(np.float64, copy=False)
    if not np.all(np.isfinite(s)):
        raise DataContractError(
            f"score has {int((~np.isfinite(s)).sum())} missing or infinite value(s)"
        )
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != s.shape:
            raise DataContractError(
                f"weights must have the same length as score ({s.shape[0]}), got {w.shape}"
            )
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise DataContractError("weights must be finite and non-negative")
    return y_arr.astype(np.int8, copy=False), s, w


def _class_histogram(
    y: np.ndarray, score: np.ndarray, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct score (ascending): stats[k, c] for class c and k indexing (w, w², n).

    Returns (inverse index of each row into the distinct scores, stats of shape (3, 2, U)).
    """
    uniq, inv = np.unique(score, return_inverse=True)
    u = uniq.shape[0]
    idx = 2 * inv.astype(np.intp) + y
    n = np.bincount(idx, minlength=2 * u).reshape(u, 2).T.astype(np.float64)
    w: np.ndarray  # float64 (numpy's stubs type a weighted bincount as integer)
    w2: np.ndarray
    if weights is None:
        w = w2 = n
    else:
        w = np.bincount(idx, weights=weights, minlength=2 * u).reshape(u, 2).T
        w2 = np.bincount(idx, weights=weights * weights, minlength=2 * u).reshape(u, 2).T
    return inv, np.stack([w, w2, n])


def _block_placements(
    w_neg: np.ndarray, w_pos: np.ndarray
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Placements per tie block from per-block class weights (blocks in ascending score).

    V10 of a positive in block b = (W_neg below b + ½ W_neg in b) / W_neg;
    V01 of a negative in block b = (W_pos above b + ½ W_pos in b) / W_pos.
    """
    tot_neg = float(w_neg.sum())
    tot_pos = float(w_pos.sum())
    below_neg = np.cumsum(w_neg) - w_neg
    above_pos = tot_pos - np.cumsum(w_pos)
    with np.errstate(invalid="ignore", divide="ignore"):
        v10 = (below_neg + 0.5 * w_neg) / tot_neg
        v01 = (above_pos + 0.5 * w_pos) / tot_pos
    return tot_neg, tot_pos, v10, v01


def auc_delong_from_histogram(
    neg: np.ndarray,
    pos: np.ndarray,
    neg_w2: np.ndarray | None = None,
    pos_w2: np.ndarray | None = None,
    n_neg: int | None = None,
    n_pos: int | None = None,
) -> AUCEstimate:
    """AUC and DeLong variance from per-score-block class totals (blocks in ascending score).

    ``neg[b]``/``pos[b]`` are the (weighted) numbers of negatives/positives whose score falls in
    block b; ``neg_w2``/``pos_w2`` the per-block sums of squared weights (default: equal to
    ``neg``/``pos``, i.e. unit weights); ``n_neg``/``n_pos`` the row counts of each class
    (default: the totals). Blocks are treated as ties. When the blocks are the distinct scores
    this is exact; when they are bins of a histogram, pairs sharing a bin count one half, so the
    AUC is off by at most ½ Σ_b pos_b neg_b / (W_pos W_neg) (see :func:`binned_auc_error_bound`).
    A class with no mass gives NaN (the AUC is undefined).
    """
    neg = np.asarray(neg, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    neg_w2 = neg if neg_w2 is None else np.asarray(neg_w2, dtype=np.float64)
    pos_w2 = pos if pos_w2 is None else np.asarray(pos_w2, dtype=np.float64)
    tot_neg, tot_pos, v10, v01 = _block_placements(neg, pos)
    m = round(tot_pos) if n_pos is None else int(n_pos)
    n = round(tot_neg) if n_neg is None else int(n_neg)
    if not (tot_pos > 0 and tot_neg > 0):
        return AUCEstimate(np.nan, np.nan, np.nan, m, n, tot_pos, tot_neg)
    ok_pos = pos > 0
    ok_neg = neg > 0
    auc = float(np.dot(pos[ok_pos], v10[ok_pos]) / tot_pos)
    with np.errstate(invalid="ignore", divide="ignore"):
        s10 = float(np.dot(pos_w2[ok_pos], (v10[ok_pos] - auc) ** 2)) / tot_pos**2
        s01 = float(np.dot(neg_w2[ok_neg], (v01[ok_neg] - auc) ** 2)) / tot_neg**2
        var = (m / (m - 1) * s10 if m > 1 else np.nan) + (n / (n - 1) * s01 if n > 1 else np.nan)
    var = float(max(var, 0.0)) if np.isfinite(var) else float("nan")
    return AUCEstimate(auc, var, float(np.sqrt(var)), m, n, tot_pos, tot_neg)


def binned_auc_error_bound(neg: np.ndarray, pos: np.ndarray) -> float:
    """Largest possible |AUC(binned) − AUC(exact)|: ½ Σ_b pos_b neg_b / (W_pos W_neg).

    Pairs of a positive and a negative in the same bin count ½ in the binned AUC and 0, ½ or 1
    in the exact one; all other pairs are ordered correctly by the bins.
    """
    neg = np.asarray(neg, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    denom = float(neg.sum() * pos.sum())
    return float(0.5 * np.dot(neg, pos) / denom) if denom > 0 else float("nan")


def auc_delong(y: np.ndarray, score: np.ndarray, weights: np.ndarray | None = None) -> AUCEstimate:
    """AUC of ``score`` for 0/1 labels ``y`` with DeLong's variance (module docstring).

    Ties count ½. Cost: one sort, O(n log n). ``weights`` (optional, non-negative) gives the
    weighted AUC and its linearisation variance. Raises :class:`DataContractError` for
    non-binary labels, non-finite scores, mismatched lengths, or a class with no rows or no
    weight (the AUC is undefined). A class with a single row gives ``variance`` NaN.
    """
    y_arr, s, w = _check_inputs(y, score, weights)
    n_pos = int(y_arr.sum())
    n_neg = int(y_arr.shape[0] - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise DataContractError(
            f"the AUC needs both classes; got {n_pos} positive and {n_neg} negative row(s)"
        )
    _, stats = _class_histogram(y_arr, s, w)
    w_cls, w2_cls = stats[0], stats[1]
    if not (w_cls[0].sum() > 0 and w_cls[1].sum() > 0):
        raise DataContractError("the AUC needs positive total weight in both classes")
    return auc_delong_from_histogram(w_cls[0], w_cls[1], w2_cls[0], w2_cls[1], n_neg, n_pos)


def delong_placements(
    y: np.ndarray, score: np.ndarray, weights: np.ndarray | None = None
) -> DeLongPlacements:
    """DeLong's structural components V10 (positives) and V01 (negatives), in input order.

    With weights, each placement is the weighted average of ψ over the other class. Useful for
    studentized two-group tests (the variance of a difference of independent AUCs is the sum
    of their variances) and for comparing correlated AUCs.
    """
    y_arr, s, w = _check_inputs(y, score, weights)
    if y_arr.sum() == 0 or y_arr.sum() == y_arr.shape[0]:
        raise DataContractError("DeLong placements need both classes in y")
    inv, stats = _class_histogram(y_arr, s, w)
    _, tot_pos, v10_b, v01_b = _block_placements(stats[0][0], stats[0][1])
    pos = y_arr == 1
    v10 = v10_b[inv[pos]]
    v01 = v01_b[inv[~pos]]
    wp = None if w is None else w[pos]
    auc = float(np.average(v10, weights=wp)) if tot_pos > 0 else float("nan")
    return DeLongPlacements(auc, v10, v01)


def auc_interval(
    auc: float, se: float, confidence_level: float = 0.95, method: str = "wald"
) -> Interval:
    """Confidence interval for an AUC from its standard error.

    ``wald``: θ̂ ± z·se clipped to [0, 1] (pROC's DeLong interval). ``logit``: the Wald interval
    on logit(θ̂) with se/(θ̂(1−θ̂)) by the delta method, mapped back (stays inside (0, 1), better
    coverage near 0 or 1; degenerate at θ̂ ∈ {0, 1}, where it returns [θ̂, θ̂]).
    """
    if method not in INTERVAL_METHODS:
        raise DataContractError(
            f"AUC interval method must be one of {list(INTERVAL_METHODS)}, got {method!r}"
        )
    z_value(confidence_level)  # validates the level
    if not (np.isfinite(auc) and np.isfinite(se)):
        return Interval(float("nan"), float("nan"), confidence_level, f"delong {method}")
    if method == "wald":
        low, high = wald_interval(auc, se, confidence_level, bounds=(0.0, 1.0))
        return Interval(float(low), float(high), confidence_level, "delong wald")
    if auc <= 0.0 or auc >= 1.0:
        return Interval(float(auc), float(auc), confidence_level, "delong logit")
    lg = np.log(auc / (1 - auc))
    lo, hi = wald_interval(lg, se / (auc * (1 - auc)), confidence_level)
    return Interval(
        float(1 / (1 + np.exp(-lo))), float(1 / (1 + np.exp(-hi))), confidence_level, "delong logit"
    )


def auc_delong_interval(
    y: np.ndarray,
    score: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    confidence_level: float = 0.95,
    method: str = "wald",
) -> tuple[AUCEstimate, Interval]:
    """:func:`auc_delong` and its confidence interval (:func:`auc_interval`)."""
    est = auc_delong(y, score, weights)
    return est, est.confidence_interval(confidence_level, method)
