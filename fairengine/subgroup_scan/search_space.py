"""The search space of the subgroup scan: coded features, cells and conjunction subgroups.

Every scanned feature is coded into at most ``levels`` values: a categorical feature keeps its
categories (an error names it when it has more than ``levels``), a numeric feature with more
than ``levels`` distinct values is cut at its quantiles q_{1/L}, …, q_{(L-1)/L} (duplicate edges
merged), giving readable bins ``age < 25``, ``25 ≤ age < 35``, ``age ≥ 45``.

A **cell** is one combination of the coded values that occurs in the data (rows are grouped by
their full code vector); the cell cube holds the per-cell sums that every subgroup statistic
needs (:mod:`fairengine.subgroup_scan.statistics`). A **subgroup** of depth k is a conjunction
``f_1 = v_1 and … and f_k = v_k`` of k distinct features (k = 1 … ``depth``) with at least
``min_size`` rows; as a set of rows it is a union of cells, so its sums are the sums of its
cells: the scan keeps a sparse cells × subgroups indicator matrix M and computes every subgroup
statistic at once as Mᵀ s for a vector (or matrix, one column per null draw) s of cell sums.
This is the depth-limited search space of slice finders (Chung et al. 2019, SliceFinder) and of
MDSS with conjunctions of single values (Zhang & Neill 2016, §3).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import sparse

from fairengine.errors import FairEngineError


class SubgroupScanError(FairEngineError):
    """Bad input to the subgroup scan (a feature, a parameter or the data)."""


@dataclass(frozen=True)
class CodedFeature:
    """One scanned feature: ``name``, the readable condition of each code (``labels[c]`` is
    e.g. ``"sex = Female"`` or ``"age < 25"``) and the bin edges of a binned numeric feature
    (empty for a categorical one)."""

    name: str
    labels: tuple[str, ...]
    edges: tuple[float, ...] = ()


@dataclass(frozen=True)
class CodedFeatures:
    """Features coded as integers: ``codes`` (n, F) with codes[i, f] in 0 … levels_f − 1."""

    features: tuple[CodedFeature, ...]
    codes: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.codes.shape[0])


def _edge_texts(edges: np.ndarray) -> list[str]:
    """The edges with 3 significant digits, more where two would read the same."""
    for digits in range(3, 17):
        texts = [f"{x:.{digits}g}" for x in edges]
        if len(set(texts)) == len(texts):
            return texts
    return [repr(float(x)) for x in edges]


def _bin_numeric(name: str, values: np.ndarray, levels: int) -> tuple[np.ndarray, CodedFeature]:
    qs = np.quantile(values, np.arange(1, levels) / levels)
    edges = np.unique(qs)
    # a bin [e_k, e_{k+1}): codes = number of edges <= x
    edges = edges[edges > values.min()]
    codes = np.searchsorted(edges, values, side="right")
    labels: list[str] = []
    e = _edge_texts(edges)
    for k in range(len(edges) + 1):
        if k == 0:
            labels.append(f"{name} < {e[0]}" if len(edges) else f"{name} (all)")
        elif k == len(edges):
            labels.append(f"{name} ≥ {e[-1]}")
        else:
            labels.append(f"{e[k - 1]} ≤ {name} < {e[k]}")
    return codes, CodedFeature(name, tuple(labels), tuple(float(e) for e in edges))


def code_features(frame: pd.DataFrame, features: list[str], levels: int = 5) -> CodedFeatures:
    """Code ``features`` of ``frame``: categories kept, numeric features with more than
    ``levels`` distinct values binned at their quantiles (at most ``levels`` bins)."""
    if isinstance(levels, bool) or not isinstance(levels, int) or not 2 <= levels <= 1000:
        raise SubgroupScanError(f"levels must be a whole number in [2, 1000], got {levels!r}")
    if not features:
        raise SubgroupScanError("features must name at least one column")
    codes = np.empty((len(frame), len(features)), dtype=np.int16)
    coded: list[CodedFeature] = []
    for j, name in enumerate(features):
        if name not in frame.columns:
            raise SubgroupScanError(f"feature {name!r} is not a column of the data")
        col = frame[name]
        if col.isna().any():
            raise SubgroupScanError(f"feature {name!r} has missing values")
        numeric = pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
        if numeric and col.nunique() > levels:
            c, feat = _bin_numeric(name, col.to_numpy(dtype=np.float64), levels)
        else:
            cat = pd.Categorical(col)
            if len(cat.categories) > levels and not numeric:
                raise SubgroupScanError(
                    f"feature {name!r} has {len(cat.categories)} categories, more than "
                    f"levels={levels}; merge categories or raise levels"
                )
            c = cat.codes.astype(np.int64)
            feat = CodedFeature(name, tuple(f"{name} = {v}" for v in cat.categories))
        codes[:, j] = c
        coded.append(feat)
    return CodedFeatures(tuple(coded), codes)


@dataclass(frozen=True)
class Cells:
    """Rows grouped by their full code vector: ``cell_of_row`` (n,), ``columns`` (F, C) the
    codes of each cell by feature (int32, contiguous per feature), ``order`` a row permutation
    sorting the rows by cell and ``starts`` (C,) the first position of each cell in that order
    (per-cell sums of rows in that order)."""

    cell_of_row: np.ndarray
    columns: np.ndarray
    order: np.ndarray
    starts: np.ndarray

    @property
    def n_cells(self) -> int:
        return int(self.columns.shape[1])

    @property
    def codes(self) -> np.ndarray:
        """(C, F) view of the cells' codes."""
        return self.columns.T

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Per-cell sums of a per-row array (bincount)."""
        return np.bincount(self.cell_of_row, weights=values, minlength=self.n_cells)


def group_cells(coded: CodedFeatures) -> Cells:
    """Group the rows into cells: a mixed-radix key of the codes, one stable argsort."""
    codes = coded.codes
    radix = np.array([len(f.labels) for f in coded.features], dtype=np.int64)
    if float(np.prod(radix.astype(np.float64))) >= 2.0**62:
        _, key = np.unique(codes, axis=0, return_inverse=True)
        key = np.asarray(key, dtype=np.int64).ravel()
    else:
        key = np.zeros(len(codes), dtype=np.int64)
        for j in range(codes.shape[1]):
            key = key * radix[j] + codes[:, j]
    order = np.argsort(key, kind="stable")
    ks = key[order]
    flag = np.empty(ks.size, dtype=bool)
    flag[:1] = True
    np.not_equal(ks[1:], ks[:-1], out=flag[1:])
    cell_of_row = np.empty(ks.size, dtype=np.int64)
    cell_of_row[order] = np.cumsum(flag) - 1
    first = order[flag]
    columns = np.ascontiguousarray(codes[first].T, dtype=np.int32)
    return Cells(cell_of_row, columns, order, np.flatnonzero(flag).astype(np.int64))


@dataclass(frozen=True)
class Subgroup:
    """A conjunction of single values: ``features`` (indices, increasing) and ``values``
    (their codes); ``rule`` its readable form (``"sex = Female and age < 25"``)."""

    features: tuple[int, ...]
    values: tuple[int, ...]
    rule: str


@dataclass(frozen=True)
class Combination:
    """One combination of features: ``features``, their numbers of levels ``shape`` and
    ``subgroup_of`` (∏ shape,): the subgroup index of each flat value combination (−1 when it
    has fewer than ``min_size`` rows)."""

    features: tuple[int, ...]
    shape: tuple[int, ...]
    subgroup_of: np.ndarray


#: Cells per block of the membership matrix built on the fly (bounds its memory).
BLOCK_CELLS = 1 << 16


@dataclass(frozen=True)
class SearchSpace:
    """All subgroups of depth 1 … ``depth`` with at least ``min_size`` rows.

    The (C, S) 0/1 membership matrix M (M[c, s] = 1 when cell c lies in subgroup s) is never
    stored whole: :meth:`membership` builds it for a block of cells (each cell lies in at most
    one subgroup per feature combination, so a block has at most ``len(combinations)`` entries
    per cell) and :meth:`subgroup_sums` computes Mᵀ w block by block. ``sizes``: rows of each
    subgroup.
    """

    coded: CodedFeatures
    cells: Cells
    subgroups: tuple[Subgroup, ...]
    combinations: tuple[Combination, ...]
    sizes: np.ndarray
    depth: int
    min_size: int

    @property
    def n_subgroups(self) -> int:
        return len(self.subgroups)

    def blocks(self) -> list[tuple[int, int]]:
        """Cell ranges [lo, hi) of at most :data:`BLOCK_CELLS` cells."""
        c = self.cells.n_cells
        return [(lo, min(c, lo + BLOCK_CELLS)) for lo in range(0, c, BLOCK_CELLS)]

    def membership(self, lo: int = 0, hi: int | None = None) -> sparse.csr_matrix:
        """Rows lo … hi − 1 of M as a sparse (hi − lo, S) matrix."""
        hi = self.cells.n_cells if hi is None else hi
        if lo == 0 and hi == self.cells.n_cells and "_whole" in self.__dict__:
            whole: sparse.csr_matrix = self.__dict__["_whole"]
            return whole
        cols = self.cells.columns[:, lo:hi]
        ids_t = np.empty((len(self.combinations), hi - lo), dtype=np.int32)
        for j, comb in enumerate(self.combinations):
            key = cols[comb.features[0]]
            for f, size in zip(comb.features[1:], comb.shape[1:], strict=True):
                key = key * size + cols[f]
            np.take(comb.subgroup_of, key, out=ids_t[j])
        ids = ids_t.T
        keep = ids >= 0
        if keep.all():
            indices = ids.ravel()
            indptr = np.arange(0, ids.size + 1, ids.shape[1], dtype=np.int64)
        else:
            indices = ids[keep]
            indptr = np.r_[0, np.cumsum(keep.sum(axis=1))]
        m = sparse.csr_matrix(
            (np.ones(indices.size, dtype=np.float32), indices, indptr),
            shape=(hi - lo, self.n_subgroups),
        )
        if lo == 0 and hi == self.cells.n_cells:
            self.__dict__["_whole"] = m  # one block: kept (frozen fields untouched)
        return m

    def subgroup_sums(self, per_cell: np.ndarray) -> np.ndarray:
        """Mᵀ w for per-cell values w of shape (C,) or (C, k): (S,) or (S, k), block by block
        (measured faster than one ``np.bincount`` per feature combination and column)."""
        w = np.asarray(per_cell, dtype=np.float64)
        out = np.zeros((self.n_subgroups, *w.shape[1:]))
        for lo, hi in self.blocks():
            out += self.membership(lo, hi).T @ w[lo:hi]
        return out

    def cell_mask(self, s: int) -> np.ndarray:
        """Boolean cell mask of subgroup ``s``."""
        g = self.subgroups[s]
        mask = np.ones(self.cells.n_cells, dtype=bool)
        for f, v in zip(g.features, g.values, strict=True):
            mask &= self.cells.columns[f] == v
        return mask

    def rows_in(self, s: int) -> np.ndarray:
        """Boolean row mask of subgroup ``s``."""
        return self.cell_mask(s)[self.cells.cell_of_row]


def build_search_space(
    coded: CodedFeatures, depth: int = 2, min_size: int = 30, cells: Cells | None = None
) -> SearchSpace:
    """Enumerate the conjunctions of ``depth`` or fewer features with ≥ ``min_size`` rows."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise SubgroupScanError(f"depth must be a whole number >= 1, got {depth!r}")
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 1:
        raise SubgroupScanError(f"min_size must be a whole number >= 1, got {min_size!r}")
    cells = group_cells(coded) if cells is None else cells
    n_cell = np.bincount(cells.cell_of_row, minlength=cells.n_cells)
    singletons = cells.n_cells == cells.cell_of_row.size
    radix = [len(f.labels) for f in coded.features]
    subgroups: list[Subgroup] = []
    combos: list[Combination] = []
    sizes: list[np.ndarray] = []
    n_features = len(coded.features)
    for k in range(1, min(depth, n_features) + 1):
        for combo in combinations(range(n_features), k):
            shape = tuple(radix[f] for f in combo)
            key = cells.columns[combo[0]]
            for f in combo[1:]:
                key = key * radix[f] + cells.columns[f]
            size = np.bincount(
                key, weights=None if singletons else n_cell, minlength=int(np.prod(shape))
            )
            keep = np.flatnonzero(size >= min_size)
            if keep.size == 0:
                continue
            new_id = np.full(size.size, -1, dtype=np.int32)
            new_id[keep] = len(subgroups) + np.arange(keep.size)
            for flat in keep:
                values = tuple(int(v) for v in np.unravel_index(int(flat), shape))
                rule = " and ".join(
                    coded.features[f].labels[v] for f, v in zip(combo, values, strict=True)
                )
                subgroups.append(Subgroup(tuple(combo), values, rule))
            sizes.append(size[keep])
            combos.append(Combination(tuple(combo), shape, new_id))
    if not subgroups:
        raise SubgroupScanError(
            f"no subgroup of depth <= {depth} has min_size={min_size} rows; lower min_size"
        )
    return SearchSpace(
        coded=coded,
        cells=cells,
        subgroups=tuple(subgroups),
        combinations=tuple(combos),
        sizes=np.concatenate(sizes),
        depth=depth,
        min_size=min_size,
    )
