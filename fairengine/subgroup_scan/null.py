"""Null draws of the whole scan, vectorized over draws through the cell sums.

Each draw produces a new outcome sum per cell, W*_c, and the subgroup sums O* = Mᵀ W* (one sparse
product for a batch of draws); the scanned maximum of draw b is max_A t(Z*_{A,b}).

**Exact mode** (the null itself):

* ``calibration``: y*_i ~ Bernoulli(p_i) independently (the model's probabilities are the
  truth). Rows are sorted by cell once; a batch draws uniforms u (b, n) and sums 1[u < p] within
  each cell (``np.add.reduceat``).
* ``positive_rate`` / ``tpr`` / ``fpr``: ŷ permuted uniformly within the stratum (all rows, or
  the rows with y = 1, or y = 0). The cell sums of a permuted 0/1 vector are multivariate
  hypergeometric: K positives drawn without replacement from cells of sizes n_c
  (``Generator.multivariate_hypergeometric``, ``method="count"``: O(N) per draw, no sort),
  which is exactly the law of the permuted sums.

**Gaussian mode** (Hothorn, Bretz & Westfall 2008; the maximum of a Gaussian vector with the
exact null covariance of the subgroup statistics): with g_c iid N(0, 1) per cell,

* calibration: W*_c = Σ_c p + √V_c g_c, so Cov(O*_A, O*_B) = Σ_{c ⊂ A∩B} V_c = V_{A∩B} and
  Cov(Z*_A, Z*_B) = V_{A∩B}/√(V_A V_B), the covariance of the exact null;
* permutation: W*_c = n_c π + s (√n_c g_c − (n_c/N) Σ_c' √n_c' g_c'), s² = π(1 − π)N/(N − 1),
  so Cov(O*_A, O*_B) = s²(n_{A∩B} − n_A n_B/N), the hypergeometric covariance.

Both draw the covariance without forming the S × S matrix, at O(C) per draw.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from fairengine.subgroup_scan.search_space import SearchSpace, SubgroupScanError
from fairengine.subgroup_scan.statistics import CellOutcomes

MODES = ("exact", "gaussian")
_ELEMENTS_PER_CHUNK = 1 << 23  # uniforms per chunk of the calibration draws (32 MB float32)


class NullDraws:
    """Draws batches of null subgroup sums O* (S, b) for one statistic and mode."""

    def __init__(self, space: SearchSpace, cells: CellOutcomes, mode: str = "exact") -> None:
        if mode not in MODES:
            raise SubgroupScanError(f"mode must be one of {list(MODES)}, got {mode!r}")
        self.space = space
        self.cells = cells
        self.mode = mode
        self._mt = sparse.csr_matrix(space.membership.T)
        order = space.cells.order
        self._starts = space.cells.starts
        if cells.probability is not None and mode == "exact":
            self._p_sorted = cells.probability[order].astype(np.float32)
        n_c = cells.n
        self._n_int = np.rint(n_c).astype(np.int64)
        self._big_n = float(n_c.sum())
        self._k = cells.stratum_positives

    def _cell_sums(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        """W* (C, batch)."""
        c = self.cells
        if self.mode == "gaussian":
            g = rng.standard_normal((c.n.size, batch))
            if c.kind == "calibration":
                return c.expected[:, None] + np.sqrt(c.variance)[:, None] * g
            pi = self._k / self._big_n
            s = np.sqrt(pi * (1.0 - pi) * self._big_n / (self._big_n - 1.0))
            root = np.sqrt(c.n)[:, None] * g
            total = root.sum(axis=0, keepdims=True)
            return c.n[:, None] * pi + s * (root - (c.n / self._big_n)[:, None] * total)
        if c.kind == "calibration":
            n = self._p_sorted.size
            per = max(1, _ELEMENTS_PER_CHUNK // max(n, 1))
            out = np.empty((c.n.size, batch))
            done = 0
            while done < batch:
                m = min(per, batch - done)
                hits = rng.random((m, n), dtype=np.float32) < self._p_sorted
                out[:, done : done + m] = np.add.reduceat(
                    hits, self._starts, axis=1, dtype=np.int32
                ).T
                done += m
            return out
        # permutation within the stratum: multivariate hypergeometric cell sums
        sizes = self._n_int
        keep = np.flatnonzero(sizes > 0)
        out = np.zeros((c.n.size, batch))
        draws = rng.multivariate_hypergeometric(sizes[keep], self._k, size=batch, method="count")
        out[keep] = draws.T
        return out

    def subgroup_sums(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        """O* (S, batch) of ``batch`` independent null draws."""
        w = self._cell_sums(rng, batch)
        return np.asarray(self._mt @ w)
