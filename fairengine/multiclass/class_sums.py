"""Sufficient sums of the one-vs-rest rates: per (group, true class) stratum, one pass.

Row i has true class y_i, per-class prediction q_ic (the indicator 1{ŷ_i = c} for hard
predictions, the probability P_ic for expected counts; :mod:`.inputs`) and weight w_i (1 without
weights). Per stratum (g, y) the table keeps, along its last axis (:data:`STATS` layout),

    W = Σ w,  W2 = Σ w²,  S_c = Σ w q_c,  S2_c = Σ w² q_c,  Q2_c = Σ w² q_c²   (c = 0..K−1),

2 + 3K numbers. Each one-vs-rest rate of class c is a ratio of row sums m = Σa/Σb over the rows
it conditions on, exactly the engine's ratio metric (:mod:`fairengine.permutation.metrics`) with
a_i = w_i q_ic and b_i = w_i on

=================  ===========================  =================
metric             rate                         conditioning rows
=================  ===========================  =================
``selection``      P(ŷ = c)                     all
``tpr``            P(ŷ = c | y = c)             y = c
``fpr``            P(ŷ = c | y ≠ c)             y ≠ c
=================  ===========================  =================

so its five sums (A, B, AA, AB, BB) = (Σ S_c, Σ W, Σ Q2_c, Σ S2_c, Σ W2) over those strata
(:func:`rate_sums`), and its value and linearisation variance (AA − 2m·AB + m²·BB)/B² are
:func:`~fairengine.permutation.metrics.ratio_value_variance` (for unweighted hard predictions
the binomial m(1 − m)/n, as in :mod:`fairengine.counts`). Sums of strata add up, so the same
table of a permuted pseudo-group (cell counts or a row mask) gives every permuted rate.

For unweighted hard predictions the table is a function of the (y, ŷ) cell counts X alone:
W = W2 = Σ_ŷ X[y, ŷ] and S_c = S2_c = Q2_c = X[y, c] (:func:`sums_from_cells`).
"""

from __future__ import annotations

import numpy as np

from fairengine.multiclass.inputs import MulticlassInputs

#: The one-vs-rest rates, in table order.
RATE_METRICS: tuple[str, ...] = ("selection", "tpr", "fpr")
RATE_LABELS: dict[str, str] = {
    "selection": "selection rate",
    "tpr": "true-positive rate",
    "fpr": "false-positive rate",
}


def stats_width(k: int) -> int:
    """Length 2 + 3K of a stratum's sums."""
    return 2 + 3 * k


def cell_counts(data: MulticlassInputs) -> np.ndarray:
    """Unweighted (group, y, ŷ) counts, int64 (G, K, K): one ``bincount``."""
    assert data.predicted is not None
    g, k = len(data.categories), data.n_classes
    idx = (data.codes * k + data.y) * k + data.predicted
    return np.bincount(idx, minlength=g * k * k).reshape(g, k, k).astype(np.int64)


def sums_from_cells(counts: np.ndarray) -> np.ndarray:
    """Stratum sums (..., K, 2 + 3K) of unweighted hard predictions from cell counts
    (..., K, K) indexed [y, ŷ] (module docstring)."""
    x = np.asarray(counts, dtype=np.float64)
    w = x.sum(axis=-1, keepdims=True)
    return np.concatenate([w, w, x, x, x], axis=-1)


def row_stats(q: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """Per-row contributions (n, 2 + 3K) = (w, w², w q, w² q, w² q²) (module docstring)."""
    n = q.shape[0]
    if w is None:
        ones = np.ones((n, 1))
        return np.concatenate([ones, ones, q, q, q * q], axis=1)
    w1 = w[:, None]
    w2 = w1 * w1
    return np.concatenate([w1, w2, w1 * q, w2 * q, w2 * q * q], axis=1)


def one_hot(codes: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((codes.shape[0], k))
    out[np.arange(codes.shape[0]), codes] = 1.0
    return out


def group_sums(data: MulticlassInputs) -> np.ndarray:
    """The table (G, K, 2 + 3K) of every group (module docstring), by ``bincount``."""
    g, k = len(data.categories), data.n_classes
    if data.unit_cells:
        return sums_from_cells(cell_counts(data))
    width = stats_width(k)
    out = np.zeros((g, k, width))
    w = data.weights
    if data.predicted is not None:  # weighted hard predictions: weight sums per cell
        assert w is not None
        idx = (data.codes * k + data.y) * k + data.predicted
        wc = np.bincount(idx, weights=w, minlength=g * k * k).reshape(g, k, k)
        w2c = np.bincount(idx, weights=w * w, minlength=g * k * k).reshape(g, k, k)
        return np.concatenate(
            [wc.sum(-1, keepdims=True), w2c.sum(-1, keepdims=True), wc, w2c, w2c], axis=-1
        )
    assert data.probability is not None
    idx = data.codes * k + data.y
    stats = row_stats(data.probability, w)
    for j in range(width):
        out[..., j] = np.bincount(idx, weights=stats[:, j], minlength=g * k).reshape(g, k)
    return out


def rate_sums(table: np.ndarray) -> np.ndarray:
    """Five sums (..., 3, K, 5) of (selection, tpr, fpr) × class from stratum sums
    (..., K, 2 + 3K): (A, B, AA, AB, BB) in the engine's order (module docstring)."""
    t = np.asarray(table, dtype=np.float64)
    k = t.shape[-2]
    w, w2 = t[..., 0], t[..., 1]  # (..., K_y)
    s, s2, q2 = t[..., 2 : 2 + k], t[..., 2 + k : 2 + 2 * k], t[..., 2 + 2 * k :]  # [y, c]
    total = [s.sum(-2), np.broadcast_to(w.sum(-1)[..., None], (*s.shape[:-2], k))]
    total += [q2.sum(-2), s2.sum(-2), np.broadcast_to(w2.sum(-1)[..., None], total[0].shape)]
    diag = [
        np.diagonal(s, axis1=-2, axis2=-1),
        w,
        np.diagonal(q2, axis1=-2, axis2=-1),
        np.diagonal(s2, axis1=-2, axis2=-1),
        w2,
    ]
    sel = np.stack(total, axis=-1)
    tpr = np.stack(diag, axis=-1)
    return np.stack([sel, tpr, sel - tpr], axis=-3)


def class_distribution(table: np.ndarray) -> np.ndarray:
    """The predicted-class distribution (..., K): Σ_y S_c / Σ_y W (the selection rates)."""
    t = np.asarray(table, dtype=np.float64)
    k = t.shape[-2]
    s = t[..., 2 : 2 + k].sum(-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return s / t[..., 0].sum(-1)[..., None]
