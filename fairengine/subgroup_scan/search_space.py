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


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _bin_numeric(name: str, values: np.ndarray, levels: int) -> tuple[np.ndarray, CodedFeature]:
    qs = np.quantile(values, np.arange(1, levels) / levels)
    edges = np.unique(qs)
    # a bin [e_k, e_{k+1}): codes = number of edges <= x
    edges = edges[edges > values.min()]
    codes = np.searchsorted(edges, values, side="right")
    labels: list[str] = []
    for k in range(len(edges) + 1):
        if k == 0:
            labels.append(f"{name} < {_fmt(edges[0])}" if len(edges) else f"{name} (all)")
        elif k == len(edges):
            labels.append(f"{name} ≥ {_fmt(edges[-1])}")
        else:
            labels.append(f"{_fmt(edges[k - 1])} ≤ {name} < {_fmt(edges[k])}")
    return codes, CodedFeature(name, tuple(labels), tuple(float(e) for e in edges))


def code_features(frame: pd.DataFrame, features: list[str], levels: int = 5) -> CodedFeatures:
    """Code ``features`` of ``frame``: categories kept, numeric features with more than
    ``levels`` distinct values binned at their quantiles (at most ``levels`` bins)."""
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 2:
        raise SubgroupScanError(f"levels must be a whole number >= 2, got {levels!r}")
    if not features:
        raise SubgroupScanError("features must name at least one column")
    codes = np.empty((len(frame), len(features)), dtype=np.int64)
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
    """Rows grouped by their full code vector: ``cell_of_row`` (n,), ``codes`` (C, F) of each
    cell, ``order`` a row permutation sorting the rows by cell and ``starts`` (C,) the first
    position of each cell in that order (for ``np.add.reduceat``)."""

    cell_of_row: np.ndarray
    codes: np.ndarray
    order: np.ndarray
    starts: np.ndarray

    @property
    def n_cells(self) -> int:
        return int(self.codes.shape[0])

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Per-cell sums of a per-row array (bincount)."""
        return np.bincount(self.cell_of_row, weights=values, minlength=self.n_cells)


def group_cells(coded: CodedFeatures) -> Cells:
    """Group the rows into cells (mixed-radix key of the codes, then ``np.unique``)."""
    codes = coded.codes
    radix = np.array([len(f.labels) for f in coded.features], dtype=np.int64)
    if float(np.prod(radix.astype(np.float64))) < 2.0**62:
        key = np.zeros(len(codes), dtype=np.int64)
        for j in range(codes.shape[1]):
            key = key * radix[j] + codes[:, j]
        _, first, cell_of_row = np.unique(key, return_index=True, return_inverse=True)
    else:
        _, first, cell_of_row = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    cell_of_row = np.asarray(cell_of_row, dtype=np.int64).ravel()
    order = np.argsort(cell_of_row, kind="stable")
    counts = np.bincount(cell_of_row)
    starts = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
    return Cells(cell_of_row, codes[first], order, starts)


@dataclass(frozen=True)
class Subgroup:
    """A conjunction of single values: ``features`` (indices, increasing) and ``values``
    (their codes); ``rule`` its readable form (``"sex = Female and age < 25"``)."""

    features: tuple[int, ...]
    values: tuple[int, ...]
    rule: str


@dataclass(frozen=True)
class SearchSpace:
    """All subgroups of depth 1 … ``depth`` with at least ``min_size`` rows.

    ``membership`` is the sparse (C, S) 0/1 matrix M with M[c, s] = 1 when cell c lies in
    subgroup s; ``sizes`` the rows of each subgroup.
    """

    coded: CodedFeatures
    cells: Cells
    subgroups: tuple[Subgroup, ...]
    membership: sparse.csr_matrix
    sizes: np.ndarray
    depth: int
    min_size: int

    @property
    def n_subgroups(self) -> int:
        return len(self.subgroups)

    def rows_in(self, s: int) -> np.ndarray:
        """Boolean row mask of subgroup ``s``."""
        g = self.subgroups[s]
        mask = np.ones(self.coded.n_rows, dtype=bool)
        for f, v in zip(g.features, g.values, strict=True):
            mask &= self.coded.codes[:, f] == v
        return mask


def build_search_space(
    coded: CodedFeatures, depth: int = 2, min_size: int = 30, cells: Cells | None = None
) -> SearchSpace:
    """Enumerate the conjunctions of ``depth`` or fewer features with ≥ ``min_size`` rows."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise SubgroupScanError(f"depth must be a whole number >= 1, got {depth!r}")
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 1:
        raise SubgroupScanError(f"min_size must be a whole number >= 1, got {min_size!r}")
    cells = group_cells(coded) if cells is None else cells
    n_cell = np.bincount(cells.cell_of_row, minlength=cells.n_cells).astype(np.float64)
    radix = [len(f.labels) for f in coded.features]
    subgroups: list[Subgroup] = []
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    n_features = len(coded.features)
    for k in range(1, min(depth, n_features) + 1):
        for combo in combinations(range(n_features), k):
            key = np.zeros(cells.n_cells, dtype=np.int64)
            shape = [radix[f] for f in combo]
            for f in combo:
                key = key * radix[f] + cells.codes[:, f]
            size = np.bincount(key, weights=n_cell, minlength=int(np.prod(shape)))
            keep = np.flatnonzero(size >= min_size)
            if keep.size == 0:
                continue
            new_id = np.full(size.size, -1, dtype=np.int64)
            new_id[keep] = len(subgroups) + np.arange(keep.size)
            for flat in keep:
                values = tuple(int(v) for v in np.unravel_index(int(flat), shape))
                rule = " and ".join(
                    coded.features[f].labels[v] for f, v in zip(combo, values, strict=True)
                )
                subgroups.append(Subgroup(tuple(combo), values, rule))
            sizes.append(size[keep])
            in_kept = new_id[key] >= 0
            rows.append(np.flatnonzero(in_kept))
            cols.append(new_id[key][in_kept])
    if not subgroups:
        raise SubgroupScanError(
            f"no subgroup of depth <= {depth} has min_size={min_size} rows; lower min_size"
        )
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    membership = sparse.csr_matrix(
        (np.ones(r.size, dtype=np.float64), (r, c)), shape=(cells.n_cells, len(subgroups))
    )
    return SearchSpace(
        coded=coded,
        cells=cells,
        subgroups=tuple(subgroups),
        membership=membership,
        sizes=np.concatenate(sizes),
        depth=depth,
        min_size=min_size,
    )
