"""Folding record batches into the count grid of :mod:`fairengine.streaming.tables`.

**Group categories across batches.** Each protected attribute's values get a *discovery code*
the first time a batch shows them (batches are dictionary-encoded, by the Parquet reader or
``pyarrow.compute.dictionary_encode``; only a batch's distinct values that occur in its rows
are looked up). The grid is
accumulated over discovery codes and grows when a new value appears. At the end the distinct
values are sorted with ``pandas.factorize(sort=True)`` — the function
:meth:`fairengine.dataset.AuditDataset.from_frame` applies to the whole column — and the grid's
axes are permuted into that order, so codes and categories equal the pandas path's for the
concatenated table.

**Per-batch sums.** A batch's sums per (joint cell, label) come from
:func:`fairengine.counts.label_cell_sums` — the same one-pass bincount as the pandas path — and are
added into the grid: integer counts exactly, float sums (probabilities, weights) in float64.
With weights the unweighted Σp per cell is added by one more bincount (the intersection table's
row counts need it). Memory: the grid (ΠG_j · 2 cells, times ``bins`` with the histogram) plus
one batch's temporaries; nothing grows with the row count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from fairengine.counts import index_dtype, label_cell_sums
from fairengine.dataset import _plain
from fairengine.errors import DataContractError
from fairengine.streaming.contract import CheckedBatch
from fairengine.streaming.tables import STATS


class CountFolder:
    """Accumulates :class:`~fairengine.streaming.contract.CheckedBatch` es into the grid.

    Parameters
    ----------
    attributes : the protected attributes, in roles order (the grid's axes).
    hard : thresholded predictions (or labels only): the prediction is part of the cell.
    weighted : whether rows carry weights.
    bins : score-histogram bins (None: no histogram).
    """

    def __init__(
        self, attributes: tuple[str, ...], *, hard: bool, weighted: bool, bins: int | None
    ):
        self.attributes = attributes
        self.hard = hard
        self.weighted = weighted
        self.bins = bins
        self._lookup: dict[str, dict[Any, int]] = {a: {} for a in attributes}
        self._values: dict[str, list[pa.Array]] = {a: [] for a in attributes}
        self._names = (*STATS, "p_rows") if weighted else ("n", "wp", "w2p2")
        self.grid: dict[str, np.ndarray] = {
            k: np.zeros((*(0,) * len(attributes), 2)) for k in self._names
        }
        self.grid["n"] = self.grid["n"].astype(np.int64)
        self.hist_w: np.ndarray | None = None
        self.hist_w2: np.ndarray | None = None
        self.label_values: list[Any] = []
        self.n_rows = 0
        self.n_positive = 0
        self.weight_total = 0.0

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(self._lookup[a]) for a in self.attributes)

    def _codes(self, attribute: str, values: pa.Array) -> np.ndarray:
        """Discovery codes of one batch's values (new values appended to the lookup)."""
        enc = values if pa.types.is_dictionary(values.type) else pc.dictionary_encode(values)
        lookup = self._lookup[attribute]
        local = enc.dictionary
        keys = local.to_pylist()
        idx = enc.indices.to_numpy(zero_copy_only=False)
        unknown = [i for i, k in enumerate(keys) if k not in lookup]
        if unknown:
            # a file's dictionary may hold values no row of this batch has: only used ones count
            used = np.bincount(idx, minlength=len(keys)) > 0
            new = [i for i in unknown if used[i]]
            for i in new:
                lookup[keys[i]] = len(lookup)
            if new:
                self._values[attribute].append(local.take(pa.array(new, pa.int64())))
        dtype = index_dtype(max(len(lookup) - 1, 0))
        mapping = np.fromiter((lookup.get(k, 0) for k in keys), dtype=dtype, count=len(keys))
        return np.take(mapping, idx)

    def _grow(self) -> None:
        """Pad the grid (and histogram) with zeros to the current numbers of groups."""
        shape = self.shape
        for k, a in self.grid.items():
            if a.shape[:-1] != shape:
                pad = [(0, s - o) for s, o in zip(shape, a.shape[:-1], strict=True)] + [(0, 0)]
                self.grid[k] = np.pad(a, pad)
        shared = self.hist_w2 is self.hist_w  # unweighted: Σw² is Σw, one array for both
        for name in ("hist_w", "hist_w2"):
            h = getattr(self, name)
            if h is not None and h.shape[:-2] != shape:
                pad = [(0, s - o) for s, o in zip(shape, h.shape[:-2], strict=True)]
                setattr(self, name, np.pad(h, [*pad, (0, 0), (0, 0)]))
        if shared:  # padding made two arrays; only hist_w is added to from here on
            self.hist_w2 = self.hist_w

    def add(self, batch: CheckedBatch) -> list[np.ndarray]:
        """Fold one batch in (module docstring); returns its discovery codes per attribute."""
        codes = [self._codes(a, batch.groups[a]) for a in self.attributes]
        self._grow()
        shape = self.shape
        for v in batch.label_values:
            if not any(_same(v, u) for u in self.label_values):
                self.label_values.append(v)
        n = batch.n_rows
        prediction = batch.prediction if batch.prediction is not None else np.zeros(n, np.int8)
        with_hist = self.bins is not None and batch.probability is not None
        sums, hw, hw2 = label_cell_sums(
            [(c, g) for c, g in zip(codes, shape, strict=True)],
            batch.label,
            prediction,
            batch.weights,
            hard=self.hard,
            score=batch.probability if with_hist else None,
            bins=self.bins if with_hist else None,
        )
        for k in self._names:
            if k == "p_rows":
                continue
            self.grid[k] += sums[k].reshape(*shape, 2).astype(self.grid[k].dtype, copy=False)
        if self.weighted:
            idx = np.ravel_multi_index(codes, shape) * 2 + batch.label if shape else batch.label
            pos = np.bincount(
                idx, weights=np.asarray(prediction, np.float64), minlength=2 * int(np.prod(shape))
            )
            self.grid["p_rows"] += pos.reshape(*shape, 2)
            assert batch.weights is not None
            self.weight_total += float(batch.weights.sum())
        if with_hist:
            assert hw is not None and hw2 is not None and self.bins is not None
            hshape = (*shape, 2, self.bins)
            if self.hist_w is None:
                self.hist_w = np.zeros(hshape, dtype=hw.dtype)
                self.hist_w2 = self.hist_w if not self.weighted else np.zeros(hshape)
            self.hist_w += hw.reshape(hshape)
            if self.weighted:
                assert self.hist_w2 is not None
                self.hist_w2 += hw2.reshape(hshape)
        self.n_rows += n
        self.n_positive += int(np.count_nonzero(batch.label))
        return codes

    def add_cells(
        self,
        groups: dict[str, pa.Array],
        label: np.ndarray,
        label_values: list[Any],
        sums: dict[str, np.ndarray],
        bin_index: np.ndarray | None = None,
    ) -> None:
        """Fold rows already summed per cell by another engine (Spark's ``groupBy``): one entry
        per (group combination, label[, score bin]) with its attributes' values ``groups``,
        its 0/1 ``label`` and its sums — ``n`` (rows), and ``wp``, ``w2p2`` (plus ``w``,
        ``w2``, ``w2p``, ``p_rows`` with weights) as :func:`fairengine.counts.label_cell_sums`
        defines them for the rows, the prediction in place of p when hard; with ``bin_index``
        the entries are per score bin and ``w``/``w2`` are also the histogram's Σw and Σw²."""
        codes = [self._codes(a, groups[a]) for a in self.attributes]
        self._grow()
        where = (*codes, np.asarray(label, dtype=np.intp))
        for k in self._names:
            np.add.at(self.grid[k], where, sums[k].astype(self.grid[k].dtype, copy=False))
        if bin_index is not None and self.bins is not None:
            hshape = (*self.shape, 2, self.bins)
            if self.hist_w is None:
                self.hist_w = np.zeros(hshape, dtype=np.float64 if self.weighted else np.int64)
                self.hist_w2 = self.hist_w if not self.weighted else np.zeros(hshape)
            cells = (*where, np.asarray(bin_index, dtype=np.intp))
            hw = sums["w"] if self.weighted else sums["n"]
            np.add.at(self.hist_w, cells, hw.astype(self.hist_w.dtype, copy=False))
            if self.weighted:
                assert self.hist_w2 is not None
                np.add.at(self.hist_w2, cells, sums["w2"])
        for v in label_values:
            if not any(_same(v, u) for u in self.label_values):
                self.label_values.append(v)
        n = np.asarray(sums["n"], dtype=np.int64)
        self.n_rows += int(n.sum())
        self.n_positive += int(n[np.asarray(label) == 1].sum())
        if self.weighted:
            self.weight_total += float(sums["w"].sum())

    def merge(self, other: CountFolder) -> list[np.ndarray]:
        """Add the folder of other rows (another file, partition or worker): its values are
        looked up as a batch's are, its grid added at the matching cells. Returns, per
        attribute, this folder's discovery code of each of the other's codes (what
        :meth:`fairengine.streaming.sample.StratifiedReservoir.merge` needs). The result is the
        folder of all rows up to the order of discovery, which :meth:`categories` undoes, and
        the order of float additions."""
        remap = []
        for a in self.attributes:
            parts = other._values[a]
            if parts:
                values = _concat(parts)
                remap.append(self._codes(a, values))
            else:
                remap.append(np.zeros(0, dtype=np.intp))
        self._grow()
        cells = np.ix_(*remap) if remap else ()
        for k in self._names:
            self.grid[k][cells] += other.grid[k]
        if other.hist_w is not None:
            if self.hist_w is None:
                hshape = (*self.shape, *other.hist_w.shape[len(remap) :])
                self.hist_w = np.zeros(hshape, dtype=other.hist_w.dtype)
                self.hist_w2 = self.hist_w if not self.weighted else np.zeros(hshape)
            self.hist_w[cells] += other.hist_w
            if self.weighted:
                assert self.hist_w2 is not None and other.hist_w2 is not None
                self.hist_w2[cells] += other.hist_w2
        for v in other.label_values:
            if not any(_same(v, u) for u in self.label_values):
                self.label_values.append(v)
        self.n_rows += other.n_rows
        self.n_positive += other.n_positive
        self.weight_total += other.weight_total
        return [np.asarray(r, dtype=np.intp) for r in remap]

    def categories(self) -> tuple[dict[str, tuple[str, ...]], dict[str, np.ndarray]]:
        """Each attribute's categories in the pandas order and, per attribute, the sorted code
        of each discovery code (module docstring); checks two groups and distinct texts."""
        cats: dict[str, tuple[str, ...]] = {}
        order: dict[str, np.ndarray] = {}
        for a in self.attributes:
            parts = self._values[a]
            values = _concat(parts).to_pandas() if parts else pd.Series([], dtype=object)
            codes, uniques = pd.factorize(values, sort=True)
            cats[a] = tuple(str(_plain(u)) for u in uniques)
            if len(set(cats[a])) != len(cats[a]):
                raise DataContractError(
                    f"protected attribute {a!r} has distinct values with the same text "
                    f"{cats[a]}; use one type per column"
                )
            if len(cats[a]) < 2:
                shown = cats[a][0] if cats[a] else None
                raise DataContractError(
                    f"protected attribute {a!r} has a single value {shown!r} over all files; "
                    "a fairness audit needs at least two groups"
                )
            order[a] = np.asarray(codes, dtype=np.intp)
        return cats, order

    def sorted_grid(
        self, order: dict[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray | None]:
        """The grid and histogram with every axis in sorted-category order."""

        def permute(a: np.ndarray) -> np.ndarray:
            out = a
            for j, attr in enumerate(self.attributes):
                inverse = np.argsort(order[attr])  # sorted code -> discovery code
                out = np.take(out, inverse, axis=j)
            return out

        grid = {k: permute(v) for k, v in self.grid.items()}
        hw = None if self.hist_w is None else permute(self.hist_w)
        hw2 = (
            None
            if self.hist_w2 is None
            else (hw if self.hist_w2 is self.hist_w else permute(self.hist_w2))
        )
        return grid, hw, hw2


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _concat(parts: list[pa.Array]) -> pa.Array:
    """One array of the parts (cast to the first part's type where sources differ, e.g. a
    string and a large_string column)."""
    first = parts[0].type
    return pa.concat_arrays([p if p.type == first else p.cast(first) for p in parts])
