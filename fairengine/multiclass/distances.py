"""Distances between two groups' predicted-class distributions (categorical, K outcomes).

With p, q the predicted-class distributions of groups A and B (p_c = P(ŷ = c | A), the
selection rates of :mod:`.rates`; expected counts with ``probabilities="expected"``):

* ``tv`` — total variation  ½ Σ_c |p_c − q_c|  (LiFT's TOTAL_VAR_DIST, lift-semantics §1.4);
* ``js`` — Jensen–Shannon divergence in bits  ½ KL(p‖m) + ½ KL(q‖m), m = ½(p + q), with
  0·log 0 = 0 (LiFT's JS_DIVERGENCE, §1.4, which needs no smoothing; in [0, 1]). It is the
  square of ``scipy.spatial.distance.jensenshannon(p, q, base=2)``;
* ``hellinger`` — Hellinger distance  √(½ Σ_c (√p_c − √q_c)²)  in [0, 1] (Hellinger 1909;
  LiFT's spec does not list it; the ½ makes disjoint supports give 1).

LiFT measures a distribution against a reference (UNIFORM or user-given); here the reference of
group A's distribution is group B's, which is LiFT's formula with q the other group. All three
are 0 exactly when p = q, and are symmetric. The permutation test of H0 "the two groups'
predictions have the same distribution" is in :mod:`.permutation`.
"""

from __future__ import annotations

import numpy as np

DISTANCES: tuple[str, ...] = ("tv", "js", "hellinger")
DISTANCE_LABELS: dict[str, str] = {
    "tv": "total variation distance",
    "js": "Jensen–Shannon divergence (bits)",
    "hellinger": "Hellinger distance",
}


def _xlog2x_over(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(a > 0, a * np.log2(np.where(a > 0, a, 1.0) / np.where(m > 0, m, 1.0)), 0.0)


def class_distances(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(TV, JS, Hellinger) of distributions p, q (..., K) along the last axis: (..., 3)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    tv = 0.5 * np.abs(p - q).sum(-1)
    m = 0.5 * (p + q)
    js = 0.5 * (_xlog2x_over(p, m).sum(-1) + _xlog2x_over(q, m).sum(-1))
    h2 = 0.5 * ((np.sqrt(np.maximum(p, 0.0)) - np.sqrt(np.maximum(q, 0.0))) ** 2).sum(-1)
    hell = np.sqrt(np.clip(h2, 0.0, 1.0))
    return np.stack([tv, np.maximum(js, 0.0), hell], axis=-1)
