"""Null draws of the whole scan, vectorized over draws through the cell sums.

Each draw produces a new outcome sum per cell, W*_c, and the subgroup sums O* = Mᵀ W* (sparse
products over blocks of cells, one per batch of draws); the scanned maximum of draw b is
max_A t(Z*_{A,b}).

**Exact mode** (the null itself):

* ``calibration``: y*_i ~ Bernoulli(p_i) independently (the model's probabilities are the
  truth). Rows are sorted by cell once; for a block of cells, uniforms u (rows, b) are drawn and
  1[u < p] summed within each cell (a sparse cells × rows 0/1 matrix, measured 2.5× faster
  than ``np.add.reduceat``; skipped when every cell is one row).
* ``positive_rate`` / ``tpr`` / ``fpr``: ŷ permuted uniformly within the stratum (all rows, or
  the rows with y = 1, or y = 0). The cell sums of a permuted 0/1 vector are multivariate
  hypergeometric: K positives drawn without replacement from cells of sizes n_c. Drawn in two
  stages, exactly: the positives per block of cells (multivariate hypergeometric over the block
  sizes), then within each block given its count (``Generator.multivariate_hypergeometric``,
  ``method="count"``).

**Gaussian mode** (Hothorn, Bretz & Westfall 2008; the maximum of a Gaussian vector with the
exact null covariance of the subgroup statistics): with g_c iid N(0, 1) per cell,

* calibration: W*_c = Σ_c p + √V_c g_c, so Cov(O*_A, O*_B) = Σ_{c ⊂ A∩B} V_c = V_{A∩B} and
  Cov(Z*_A, Z*_B) = V_{A∩B}/√(V_A V_B), the covariance of the exact null;
* permutation: W*_c = n_c π + s (√n_c g_c − (n_c/N) Σ_c' √n_c' g_c'), s² = π(1 − π)N/(N − 1),
  so Cov(O*_A, O*_B) = s²(n_{A∩B} − n_A n_B/N), the hypergeometric covariance.

With at most ``COVARIANCE_MAX_SUBGROUPS`` subgroups the S × S covariance itself is formed
(:func:`null_covariance`, from U-way marginal tables) and factored once, so a draw costs S²
whatever the rows; above that, the per-cell form draws it without forming the matrix, at O(C)
per draw. Memory: the work
arrays of a block are at most ``BLOCK_CELLS`` cells (and their rows) × the draws of a batch,
capped at about 2²³ numbers by splitting the batch.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from fairengine.subgroup_scan.search_space import SearchSpace, SubgroupScanError
from fairengine.subgroup_scan.statistics import CellOutcomes, moments

MODES = ("exact", "gaussian")
_MAX_ELEMENTS = 1 << 23  # numbers in one block's work array (32 MB as float32)


def null_covariance(space: SearchSpace, cells: CellOutcomes) -> np.ndarray:
    """The exact null covariance (S, S) of the subgroup sums O_A.

    calibration: Cov(O_A, O_B) = V_{A∩B} = Σ_{c ⊂ A∩B} V_c; permutation nulls:
    s²(n_{A∩B} − n_A n_B/N), s² = π(1 − π)N/(N − 1). A∩B of a conjunction over features P and
    one over Q is a conjunction over U = P ∪ Q (empty when they disagree on a shared feature),
    so every entry is a cell of the U-way marginal table of V_c (or n_c): one ``np.bincount``
    over the cells per largest U (210 four-way tables for 10 features at depth 2), the smaller
    tables as their marginals, then fancy indexing.
    """
    weights = cells.variance if cells.kind == "calibration" else cells.n
    columns = space.cells.columns
    radix = [len(f.labels) for f in space.coded.features]
    n_sub = space.n_subgroups
    cov = np.zeros((n_sub, n_sub))
    groups = []
    for comb in space.combinations:
        flat = np.flatnonzero(comb.subgroup_of >= 0)
        values = np.array(np.unravel_index(flat, comb.shape)).T  # (n_kept, |P|)
        groups.append((comb.features, comb.subgroup_of[flat], values))
    pairs = [(i, j) for i in range(len(groups)) for j in range(i, len(groups))]
    unions = {(i, j): tuple(sorted(set(groups[i][0]) | set(groups[j][0]))) for i, j in pairs}
    # the largest unions from the cells (one bincount each); the others as their marginals
    tables: dict[tuple[int, ...], np.ndarray] = {}
    for union in sorted(set(unions.values()), key=len, reverse=True):
        parent = next((t for t in tables if set(union) <= set(t)), None)
        if parent is not None:
            drop = tuple(k for k, f in enumerate(parent) if f not in union)
            tables[union] = tables[parent].sum(axis=drop)
            continue
        key = np.zeros(space.cells.n_cells, dtype=np.int64)
        for f in union:
            key = key * radix[f] + columns[f]
        shape = tuple(radix[f] for f in union)
        table = np.bincount(key, weights=weights, minlength=int(np.prod(shape)))
        tables[union] = table.reshape(shape)
    for i, j in pairs:
        (fp, ids_p, vals_p), (fq, ids_q, vals_q) = groups[i], groups[j]
        union = unions[(i, j)]
        table = tables[union]
        index = []
        clash = np.zeros((len(ids_p), len(ids_q)), dtype=bool)
        for f in union:
            if f in fp:
                a = vals_p[:, fp.index(f)][:, None]
                if f in fq:
                    clash |= a != vals_q[:, fq.index(f)][None, :]
                index.append(np.broadcast_to(a, clash.shape))
            else:
                index.append(np.broadcast_to(vals_q[:, fq.index(f)][None, :], clash.shape))
        block = np.where(clash, 0.0, table[tuple(index)])
        cov[np.ix_(ids_p, ids_q)] = block
        cov[np.ix_(ids_q, ids_p)] = block.T
    if cells.kind != "calibration":
        big_n = float(cells.n.sum())
        pi = cells.stratum_positives / big_n
        n_a = np.diag(cov).copy()
        cov = pi * (1.0 - pi) * big_n / (big_n - 1.0) * (cov - np.outer(n_a, n_a) / big_n)
    return cov


#: Up to this many subgroups the Gaussian mode draws from the S × S covariance factor (cost S²
#: per draw, independent of the rows); above, per cell (cost proportional to the cells).
COVARIANCE_MAX_SUBGROUPS = 4000


class NullDraws:
    """Draws batches of null subgroup sums O* (S, b) for one statistic and mode."""

    def __init__(self, space: SearchSpace, cells: CellOutcomes, mode: str = "exact") -> None:
        if mode not in MODES:
            raise SubgroupScanError(f"mode must be one of {list(MODES)}, got {mode!r}")
        self.space = space
        self.cells = cells
        self.mode = mode
        self._blocks = space.blocks()
        c = space.cells
        self._row_starts = np.r_[c.starts, c.order.size]
        self._singletons = c.n_cells == c.order.size
        if cells.probability is not None and mode == "exact":
            self._p_sorted = cells.probability[c.order].astype(np.float32)
        self._n_int = np.rint(cells.n).astype(np.int64)
        self._big_n = float(cells.n.sum())
        self._k = cells.stratum_positives
        self._pi = self._k / self._big_n
        self._aggregators: dict[tuple[int, int], sparse.csr_matrix] = {}
        self._factor: tuple[np.ndarray, np.ndarray] | None = None

    def _covariance_factor(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean E (S,), L (S, S)) with L Lᵀ the null covariance. The matrix is singular (a
        depth-1 subgroup is the sum of its depth-2 parts), so L is the Cholesky factor of
        Σ + εI, ε = 1e-10 · mean(diag Σ) (relative noise 1e-5 on Z at most), with an eigen-
        factor (negative eigenvalues clipped) if that still fails."""
        if self._factor is None:
            cov = null_covariance(self.space, self.cells)
            jitter = 1e-10 * float(np.mean(np.diag(cov)))
            try:
                factor = np.linalg.cholesky(cov + jitter * np.eye(cov.shape[0]))
            except np.linalg.LinAlgError:
                lam, vec = np.linalg.eigh(cov)
                factor = vec * np.sqrt(np.clip(lam, 0.0, None))[None, :]
            self._factor = (moments(self.space, self.cells).expected, factor)
        return self._factor

    def _block_sums(self, rng: np.random.Generator, lo: int, hi: int, b: int) -> np.ndarray:
        """W* (hi − lo, b) of the cells of one block, calibration or Gaussian."""
        c = self.cells
        if self.mode == "gaussian":
            g = rng.standard_normal((hi - lo, b), dtype=np.float32)
            if c.kind == "calibration":
                g *= np.sqrt(c.variance[lo:hi]).astype(np.float32)[:, None]
                g += c.expected[lo:hi].astype(np.float32)[:, None]
                return g
            g *= np.sqrt(c.n[lo:hi]).astype(np.float32)[:, None]
            return g  # centred part; see subgroup_sums
        r0, r1 = int(self._row_starts[lo]), int(self._row_starts[hi])
        hits = (rng.random((r1 - r0, b), dtype=np.float32) < self._p_sorted[r0:r1, None]).astype(
            np.float32
        )
        if self._singletons:
            return hits
        return np.asarray(self._aggregator(lo, hi) @ hits)

    def _aggregator(self, lo: int, hi: int) -> sparse.csr_matrix:
        """Sparse (cells, rows) 0/1 matrix summing a block's rows (sorted by cell) per cell."""
        key = (lo, hi)
        if key not in self._aggregators:
            r0, r1 = int(self._row_starts[lo]), int(self._row_starts[hi])
            sizes = np.diff(self._row_starts[lo : hi + 1])
            cell = np.repeat(np.arange(hi - lo), sizes)
            agg = sparse.csr_matrix(
                (np.ones(r1 - r0, dtype=np.float32), (cell, np.arange(r1 - r0))),
                shape=(hi - lo, r1 - r0),
            )
            if len(self._blocks) == 1:
                self._aggregators[key] = agg
            return agg
        return self._aggregators[key]

    def _hypergeometric_block(
        self, rng: np.random.Generator, lo: int, hi: int, counts: np.ndarray
    ) -> np.ndarray:
        """Exact permutation-null cell sums of one block (hi − lo, b) given its positives."""
        s = self._n_int[lo:hi]
        w = np.zeros((hi - lo, counts.size), dtype=np.float32)
        live = np.flatnonzero(s > 0)
        if counts.size and np.all(counts == counts[0]):  # one block: one vectorized call
            draws = rng.multivariate_hypergeometric(
                s[live], int(counts[0]), size=counts.size, method="count"
            )
            w[live] = draws.T
            return w
        for d, k in enumerate(counts):
            w[live, d] = rng.multivariate_hypergeometric(s[live], int(k), method="count")
        return w

    def subgroup_sums(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        """O* (S, batch) of ``batch`` independent null draws (blocks outside, draws inside,
        so that each block's membership is built once per batch)."""
        space = self.space
        if self.mode == "gaussian" and space.n_subgroups <= COVARIANCE_MAX_SUBGROUPS:
            mean, factor = self._covariance_factor()
            g = rng.standard_normal((space.n_subgroups, batch))
            return mean[:, None] + factor @ g
        out = np.zeros((space.n_subgroups, batch))
        total = np.zeros(batch)
        exact_perm = self.mode == "exact" and self.cells.kind != "calibration"
        gauss_perm = self.mode == "gaussian" and self.cells.kind != "calibration"
        if exact_perm:
            sizes = np.array([self._n_int[lo:hi].sum() for lo, hi in self._blocks])
            per_block = rng.multivariate_hypergeometric(sizes, self._k, size=batch)
        for j, (lo, hi) in enumerate(self._blocks):
            m_t = space.membership(lo, hi).T
            rows = int(self._row_starts[hi] - self._row_starts[lo])
            step = max(1, _MAX_ELEMENTS // max(rows, hi - lo, 1))
            for d0 in range(0, batch, step):
                d1 = min(batch, d0 + step)
                if exact_perm:
                    w = self._hypergeometric_block(rng, lo, hi, per_block[d0:d1, j])
                else:
                    w = self._block_sums(rng, lo, hi, d1 - d0)
                out[:, d0:d1] += m_t @ w
                if gauss_perm:
                    total[d0:d1] += w.sum(axis=0)
        if gauss_perm:
            n_a = space.subgroup_sums(self.cells.n)
            s = np.sqrt(self._pi * (1.0 - self._pi) * self._big_n / (self._big_n - 1.0))
            out = n_a[:, None] * self._pi + s * (out - (n_a / self._big_n)[:, None] * total)
        return out
