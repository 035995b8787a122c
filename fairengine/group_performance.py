"""Model performance per group, with confidence intervals, from sufficient statistics.

From the (weighted, expected) confusion counts of group g (LiFT §1.7, AIF360's generalized
confusion matrix), with p_i the positive-prediction probability (0/1 with a threshold):

    TP = Σ w p y,  FP = Σ w p (1−y),  FN = Σ w (1−p) y,  TN = Σ w (1−p)(1−y),

    PRECISION = TP/(TP+FP)   RECALL (TPR) = TP/(TP+FN)   FNR = FN/(TP+FN)
    FPR = FP/(FP+TN)         TNR = TN/(FP+TN)            ACCURACY = (TP+TN)/(TP+FP+FN+TN)

A rate whose denominator is 0 is undefined (NaN) — e.g. RECALL of a group with no positives.
Intervals: Wilson (1927) score intervals on the counts for unweighted hard predictions; otherwise
Wald intervals with the linearisation variance Σ_i w_i² (a_i − m)² / W² of the ratio m = Σwa/Σw
(a_i the row's contribution; written in the moments of :mod:`fairengine.counts`).

AUC per group: the Mann–Whitney AUC of the probability score with DeLong's variance
(:mod:`fairengine.delong`), exactly (one sort of the scores shared by all attributes, then a
stable counting sort by group) or from a per-group score histogram (O(n), mergeable, with a
reported error bound).

``lift_compat=True`` reproduces LiFT's ``StatsUtils.getMetricFn``: a rate is 0.0 whenever its
numerator is 0 (even with a zero denominator), and AUC is LiFT's trapezoid without the (0, 0)
origin on the *prediction* (the thresholded 0/1 prediction when a threshold is set), i.e. the
Mann–Whitney AUC minus FP_top·TP_top/(2·N·P) for the top tie block; one distinct score gives 0.0.
LiFT evaluates these on a Bernoulli sample; here they use all rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairengine.counts import GroupLabelMoments
from fairengine.delong import AUCEstimate
from fairengine.errors import DataContractError
from fairengine.intervals import wald_interval, wilson_interval

RATE_METRICS: tuple[str, ...] = ("PRECISION", "RECALL", "TNR", "FNR", "FPR", "ACCURACY")
PERFORMANCE_METRICS: tuple[str, ...] = ("AUC", *RATE_METRICS)


@dataclass(frozen=True)
class GroupRate:
    """One rate for every group: estimate, interval, numerator and denominator (weighted)."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    numerator: np.ndarray
    denominator: np.ndarray
    variance: np.ndarray
    interval_method: str


def confusion_counts(m: GroupLabelMoments) -> dict[str, np.ndarray]:
    """TP, FP, FN, TN per group (weighted, expected counts) from the moment table."""
    return {
        "TP": m.wp[:, 1],
        "FP": m.wp[:, 0],
        "FN": m.w[:, 1] - m.wp[:, 1],
        "TN": m.w[:, 0] - m.wp[:, 0],
    }


def _ratio(num: np.ndarray, den: np.ndarray, lift_compat: bool) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / den, np.nan)
    if lift_compat:
        r = np.where(num == 0, 0.0, r)
    return r


def _linearised_variances(
    m: GroupLabelMoments, est: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Var of each rate by linearisation, Σ w² (a − r)² / W² over the rows the rate averages."""

    def sq(lbl: int, centre: np.ndarray, flip: bool = False) -> np.ndarray:
        # Σ_{y=lbl} w² (a − centre)², with a = p (flip=False) or a = 1 − p (flip=True)
        w2, w2p, w2p2 = m.w2[:, lbl], m.w2p[:, lbl], m.w2p2[:, lbl]
        c = 1 - centre if flip else centre
        return w2p2 - 2 * c * w2p + c * c * w2

    tpr, fpr, prec, acc = est["RECALL"], est["FPR"], est["PRECISION"], est["ACCURACY"]
    cc = confusion_counts(m)
    with np.errstate(invalid="ignore", divide="ignore"):
        pos = m.w[:, 1]
        neg = m.w[:, 0]
        pp = cc["TP"] + cc["FP"]
        v_tpr = sq(1, tpr) / pos**2
        v_fpr = sq(0, fpr) / neg**2
        # precision: rows weighted by w·p, a = y: Σ w² p² (y − prec)² / (Σ w p)²
        v_prec = ((1 - prec) ** 2 * m.w2p2[:, 1] + prec**2 * m.w2p2[:, 0]) / pp**2
        v_acc = (sq(1, acc) + sq(0, acc, flip=True)) / (pos + neg) ** 2
    out = {
        "RECALL": v_tpr,
        "FNR": v_tpr,
        "FPR": v_fpr,
        "TNR": v_fpr,
        "PRECISION": v_prec,
        "ACCURACY": v_acc,
    }
    return {k: np.maximum(v, 0.0) for k, v in out.items()}


def group_rates(
    m: GroupLabelMoments, level: float = 0.95, *, lift_compat: bool = False
) -> dict[str, GroupRate]:
    """Every rate of :data:`RATE_METRICS` per group, with intervals (module docstring)."""
    cc = confusion_counts(m)
    tp, fp, fn, tn = cc["TP"], cc["FP"], cc["FN"], cc["TN"]
    fractions = {
        "PRECISION": (tp, tp + fp),
        "RECALL": (tp, tp + fn),
        "FNR": (fn, tp + fn),
        "FPR": (fp, fp + tn),
        "TNR": (tn, fp + tn),
        "ACCURACY": (tp + tn, tp + fp + fn + tn),
    }
    est = {k: _ratio(num, den, lift_compat) for k, (num, den) in fractions.items()}
    var = _linearised_variances(m, {k: _ratio(*fractions[k], False) for k in fractions})
    binomial = m.hard and not m.weighted
    out: dict[str, GroupRate] = {}
    for k, (num, den) in fractions.items():
        if binomial:
            low, high = wilson_interval(np.round(num), np.round(den), level)
            method = "wilson"
        else:
            low, high = wald_interval(_ratio(num, den, False), np.sqrt(var[k]), level, (0.0, 1.0))
            method = "wald (linearised variance)"
        out[k] = GroupRate(est[k], low, high, num, den, var[k], method)
    return out


# ---------------------------------------------------------------------------- AUC per group
@dataclass(frozen=True)
class ScoreBlocks:
    """Class totals per block of tied scores, for all groups at once (flat, vectorised).

    Blocks are sorted by group ``code`` and, within a group, by ascending score. ``w``/``w2``
    have shape ``(2, B)`` (row 0 negatives, row 1 positives: Σw and Σw²); ``n`` is ``(G, 2)``
    row counts [n_neg, n_pos]. ``exact`` says whether blocks are the distinct scores (else bins).
    """

    code: np.ndarray
    w: np.ndarray
    w2: np.ndarray
    n: np.ndarray
    exact: bool

    @property
    def n_groups(self) -> int:
        return int(self.n.shape[0])


@dataclass(frozen=True)
class ScoreOrder:
    """The rows sorted by score once, shared by every attribute: ``rank[i]`` is row i's
    position in ``order``; ``score``, ``label``, ``weights`` are in sorted order."""

    rank: np.ndarray
    score: np.ndarray
    label: np.ndarray
    weights: np.ndarray | None


def score_order(
    score: np.ndarray, label: np.ndarray, weights: np.ndarray | None = None
) -> ScoreOrder:
    """Sort the rows by score once (O(n log n)); see :class:`ScoreOrder`."""
    order = np.argsort(score, kind="stable")
    rank = np.empty(order.shape[0], dtype=np.int64)
    rank[order] = np.arange(order.shape[0], dtype=np.int64)
    return ScoreOrder(
        rank,
        score[order],
        np.asarray(label)[order],
        None if weights is None else weights[order],
    )


def exact_score_blocks(
    codes: np.ndarray,
    n_groups: int,
    label: np.ndarray,
    score: np.ndarray,
    weights: np.ndarray | None = None,
    order: ScoreOrder | None = None,
) -> ScoreBlocks:
    """Distinct-score blocks per group. With the shared score order, rows are put in (group,
    score) order by sorting the integer keys code·n + rank (a value sort, no argsort), then
    tie blocks are runs of equal (group, score)."""
    if order is None:
        order = score_order(score, label, weights)
    n = order.rank.shape[0]
    key = np.asarray(codes, dtype=np.int64) * n
    key += order.rank
    key.sort()
    c = key // n
    key -= c * n  # now the rank of each row, in (group, score) order
    s = order.score[key]
    y = order.label[key].astype(np.intp)
    w = None if order.weights is None else order.weights[key]
    del key
    new = np.empty(n, dtype=bool)
    if n:
        new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    new[1:] |= c[1:] != c[:-1]
    del s
    block = np.cumsum(new, dtype=np.int64)
    block -= 1
    nb = int(block[-1]) + 1 if n else 0
    block *= 2
    block += y
    wsum = np.bincount(block, weights=w, minlength=2 * nb).reshape(nb, 2).T
    if w is None:
        w2sum = wsum
    else:
        w2sum = np.bincount(block, weights=w * w, minlength=2 * nb).reshape(nb, 2).T
    counts = np.bincount(2 * c + y, minlength=2 * n_groups).reshape(n_groups, 2)
    return ScoreBlocks(c[new], wsum, w2sum, counts, exact=True)


def binned_score_blocks(hist_w: np.ndarray, hist_w2: np.ndarray, n: np.ndarray) -> ScoreBlocks:
    """Blocks from per-group score histograms ``(G, 2, bins)`` and row counts ``n`` (G, 2)."""
    g, _, bins = hist_w.shape
    return ScoreBlocks(
        np.repeat(np.arange(g), bins),
        hist_w.transpose(1, 0, 2).reshape(2, g * bins),
        hist_w2.transpose(1, 0, 2).reshape(2, g * bins),
        np.asarray(n).astype(np.int64),
        exact=False,
    )


def hard_prediction_blocks(m: GroupLabelMoments) -> ScoreBlocks:
    """Blocks of a 0/1 prediction straight from the count table: block 0 = ŷ 0, block 1 = ŷ 1."""
    c = m.counts  # (G, 2 labels, 2 predictions)
    blocks = binned_score_blocks(c, c, m.n)
    return ScoreBlocks(blocks.code, blocks.w, blocks.w2, blocks.n, exact=True)


@dataclass(frozen=True)
class GroupAUC:
    """AUC per group with DeLong standard errors; ``error_bound`` > 0 only for binned AUC."""

    estimates: list[AUCEstimate]
    error_bound: np.ndarray
    exact: bool
    all_tied: np.ndarray


def group_auc(blocks: ScoreBlocks, *, lift_compat: bool = False) -> GroupAUC:
    """AUC (ties ½) and DeLong variance of every group at once; NaN where a group lacks a
    class. Placements per block (:mod:`fairengine.delong`):
    V10 = (W_neg below + ½ W_neg in block)/W_neg, V01 = (W_pos above + ½ W_pos in block)/W_pos,
    AUC_g = Σ w_pos V10 / W_pos, Var = m/(m−1) Σ w²_pos (V10−AUC)²/W_pos² + (same for V01).

    ``lift_compat`` subtracts LiFT's missing-origin term FP_top·TP_top/(2NP) (top block = the
    highest non-empty score block) and leaves the variance undefined (LiFT has none).
    """
    g = blocks.n_groups
    code = blocks.code
    wn, wp = blocks.w[0], blocks.w[1]
    tot_n = np.bincount(code, weights=wn, minlength=g)
    tot_p = np.bincount(code, weights=wp, minlength=g)
    first = np.searchsorted(code, np.arange(g))
    first_c = np.minimum(first, max(code.size - 1, 0))

    def excl_within(v: np.ndarray) -> np.ndarray:
        cs = np.cumsum(v, dtype=np.float64) - v  # exclusive running sum over all blocks
        return cs - cs[first_c][code] if v.size else cs

    with np.errstate(invalid="ignore", divide="ignore"):
        # placements, in place to keep the number of block-sized temporaries small
        v10 = excl_within(wn)
        v10 += 0.5 * wn
        v10 /= tot_n[code]
        v01 = excl_within(wp)
        v01 += 0.5 * wp
        np.subtract(tot_p[code], v01, out=v01)
        v01 /= tot_p[code]
        auc = np.bincount(code, weights=wp * np.nan_to_num(v10), minlength=g) / tot_p
        auc_b = np.nan_to_num(auc)[code]
        v10 -= auc_b
        v10 *= v10
        v10 *= blocks.w2[1]
        s10 = np.bincount(code, weights=np.nan_to_num(v10), minlength=g) / tot_p**2
        v01 -= auc_b
        v01 *= v01
        v01 *= blocks.w2[0]
        s01 = np.bincount(code, weights=np.nan_to_num(v01), minlength=g) / tot_n**2
        del v10, v01, auc_b
        m_pos = blocks.n[:, 1].astype(np.float64)
        m_neg = blocks.n[:, 0].astype(np.float64)
        var = m_pos / (m_pos - 1) * s10 + m_neg / (m_neg - 1) * s01
    var = np.where((m_pos > 1) & (m_neg > 1) & np.isfinite(var), np.maximum(var, 0.0), np.nan)
    defined = (tot_p > 0) & (tot_n > 0)
    auc = np.where(defined, auc, np.nan)
    var = np.where(defined, var, np.nan)
    nonempty = (wn + wp) > 0
    n_blocks = np.bincount(code, weights=nonempty, minlength=g)
    if lift_compat:
        last = np.full(g, -1, dtype=np.int64)
        np.maximum.at(last, code[nonempty], np.flatnonzero(nonempty))
        with np.errstate(invalid="ignore", divide="ignore"):
            top = np.where(last >= 0, wn[last] * wp[last], 0.0) / (2 * tot_n * tot_p)
        auc = auc - top
        auc = np.where(n_blocks == 0, 0.0, auc)
        auc = np.where(blocks.n.sum(axis=1) == 1, np.nan, auc)  # LiFT throws on one row
        var = np.full(g, np.nan)
    if blocks.exact:
        bound = np.zeros(g)
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            bound = 0.5 * np.bincount(code, weights=wn * wp, minlength=g) / (tot_n * tot_p)
    ests = [
        AUCEstimate(
            float(auc[i]),
            float(var[i]),
            float(np.sqrt(var[i])),
            int(blocks.n[i, 1]),
            int(blocks.n[i, 0]),
            float(tot_p[i]),
            float(tot_n[i]),
        )
        for i in range(g)
    ]
    return GroupAUC(ests, bound, blocks.exact, n_blocks == 1)


def check_metric_names(names: list[str], where: str) -> list[str]:
    """Upper-cased performance-metric names; raises naming the valid ones for an unknown one."""
    out = []
    for name in names:
        key = str(name).upper()
        if key == "TPR":
            key = "RECALL"
        if key not in PERFORMANCE_METRICS:
            raise DataContractError(
                f"{where}: unknown performance metric {name!r}; valid names: "
                f"{list(PERFORMANCE_METRICS)} (TPR is an alias of RECALL)"
            )
        out.append(key)
    return out
