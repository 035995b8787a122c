"""Distances between two groups' prediction distributions, for many group splits at once.

With the pooled predictions of groups A and B sorted once, x_(1) ≤ … ≤ x_(n), a split of the
rows into A and B is a 0/1 mask over the sorted positions, and both empirical CDFs at x_(i) are
running sums: with weights w (1 when unweighted), c_i = Σ_{j ≤ i} w_j·[j ∈ A], C_i = Σ_{j ≤ i} w_j,

    F_A(x_(i)) = c_i / c_n,   F_B(x_(i)) = (C_i − c_i) / (C_n − c_n),   D_i = F_A − F_B.

* **Kolmogorov–Smirnov**: KS = max_i |D_i| over the last position of every run of tied values
  (where both CDFs jump); as ``scipy.stats.ks_2samp(...).statistic``.
* **Wasserstein-1**: W1 = ∫ |F_A − F_B| dx = Σ_{i<n} |D_i| (x_(i+1) − x_(i)); as
  ``scipy.stats.wasserstein_distance`` (Ramdas, García Trillos & Cuturi 2017, "On Wasserstein
  two-sample testing", Entropy 19:47, eq. (1)).

So each split costs O(n) — one cumulative sum, one product with the gaps — and a batch of T
splits is a (T, n) array processed by vectorised passes (the sort is done once for all of them,
as the AUC path of :mod:`fairengine.permutation.auc` ranks once). Both distances are
non-negative and larger means more different: a permutation test counts permuted values ≥ the
observed one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The distance names, in result order.
DISTANCES: tuple[str, ...] = ("ks", "wasserstein")


@dataclass(frozen=True)
class SortedSample:
    """The pooled predictions sorted once: ``gaps`` x_(i+1) − x_(i) (0 after the last),
    ``ends`` the positions where a run of ties ends, ``cum_weight`` C_i (None: unweighted,
    C_i = i + 1) and ``weights`` in sorted order (None: unweighted)."""

    n: int
    gaps: np.ndarray
    ends: np.ndarray | None  # None: no ties, every position ends a run
    cum_weight: np.ndarray
    weights: np.ndarray | None


def sorted_sample(x_sorted: np.ndarray, weights_sorted: np.ndarray | None) -> SortedSample:
    """The :class:`SortedSample` of predictions already in ascending order."""
    n = x_sorted.size
    gaps = np.zeros(n, dtype=np.float64)
    gaps[:-1] = np.diff(x_sorted)
    tie_end = np.ones(n, dtype=bool)
    tie_end[:-1] = gaps[:-1] != 0
    ends = None if tie_end.all() else np.flatnonzero(tie_end)
    if weights_sorted is None:
        cum = np.arange(1, n + 1, dtype=np.float64)
    else:
        cum = np.cumsum(weights_sorted)
    return SortedSample(n, gaps, ends, cum, weights_sorted)


class DistanceScan:
    """KS and W1 of T splits at once, accumulated over consecutive blocks of sorted positions
    (a block of a few thousand positions stays in cache through all the passes; the running sum
    is carried from block to block). ``totals_a`` are each split's c_n (A's total weight)."""

    def __init__(self, sample: SortedSample, totals_a: np.ndarray):
        self.sample = sample
        ta = np.asarray(totals_a, dtype=np.float64).reshape(-1, 1)
        tb = sample.cum_weight[-1] - ta
        with np.errstate(divide="ignore", invalid="ignore"):
            self.alpha = 1.0 / ta + 1.0 / tb
            self.beta = 1.0 / tb
        t = ta.shape[0]
        self.carry = np.zeros((t, 1))
        self.w1 = np.zeros(t)
        self.ks = np.zeros(t)

    def update(self, start: int, block: np.ndarray) -> None:
        """Add positions start … start + B − 1: ``block`` is the (T, B) float 0/1 mask there."""
        s = self.sample
        stop = start + block.shape[1]
        m = block if s.weights is None else block * s.weights[start:stop]
        c = np.cumsum(m, axis=1)
        c += self.carry
        self.carry = c[:, -1:].copy()
        # D = c/c_n − (C − c)/(C_n − c_n) = c·(1/c_n + 1/(C_n − c_n)) − C/(C_n − c_n)
        c *= self.alpha
        c -= s.cum_weight[start:stop] * self.beta
        np.abs(c, out=c)
        self.w1 += c @ s.gaps[start:stop]
        if s.ends is None:
            np.maximum(self.ks, c.max(axis=1), out=self.ks)
        else:
            lo, hi = np.searchsorted(s.ends, (start, stop))
            if hi > lo:
                np.maximum(self.ks, c[:, s.ends[lo:hi] - start].max(axis=1), out=self.ks)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(KS, W1) of every split; NaN where a side has zero weight."""
        bad = ~np.isfinite(self.alpha[:, 0])
        if bad.any():
            return np.where(bad, np.nan, self.ks), np.where(bad, np.nan, self.w1)
        return self.ks, self.w1


def distances(sample: SortedSample, masks_f64: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """KS and W1 between A (mask 1) and B (mask 0) for each row of the (T, n) float 0/1 array
    ``masks_f64`` over the sorted positions (one block)."""
    w = None if sample.weights is None else sample.weights
    totals = masks_f64.sum(axis=1) if w is None else masks_f64 @ w
    scan = DistanceScan(sample, totals)
    scan.update(0, masks_f64)
    return scan.result()
