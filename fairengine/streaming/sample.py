"""A stratified sample of the rows, drawn in the same pass as the counts.

Strata are the (joint protected group, label) cells: every combination of the protected
attributes' values that occurs, times y ∈ {0, 1}. Each row gets a uniform random key
u_i ∈ [0, 1) that is a seeded hash of where the row is — its file (or partition) name and its
row offset there (:func:`row_keys`, SplitMix64) — so the sample is reproducible and does not
depend on how the rows are cut into batches or spread over workers: the stream, Dask and any
other engine that reads the same files draw the same sample. Stratum s keeps its k_s rows
with the smallest keys — a uniform random subset of its n_s rows without replacement (bottom-k
/ priority sampling, the reservoir algorithm of Efraimidis & Spirakis 2006 with equal weights),
where

    k_s = min(n_s, L),   L = max { L' : Σ_s min(n_s, L') ≤ sample_rows },

the largest equal allocation that fits ``sample_rows`` (small strata give all their rows, the
others share the rest equally). So the sample has at most ``sample_rows`` rows and every stratum
at least min(n_s, L) of its rows. Because L only decreases as rows arrive and a stratum's k_s
smallest keys are always among its earlier k smallest for any k ≥ k_s, rows beyond the current
L are dropped as soon as they can no longer be chosen: memory holds at most ``sample_rows`` rows
plus one batch's candidates. Two reservoirs of disjoint rows merge exactly
(:meth:`StratifiedReservoir.merge`): each side's level is at least the merged one (a stratum's
rows on one side are at most its rows in all), so the merged stratum's smallest keys are among
the two sides' kept rows. Each sampled row carries the design weight n_s / k_s (inverse
inclusion probability), so weighted estimates from the sample are unbiased for the full data.

Each kept row also remembers where it came from (its file or partition name and row offset):
:attr:`StratifiedSample.source_file` and :attr:`StratifiedSample.source_row` put the sample
back in the order of the source (:mod:`fairengine.streaming.self_weighting` does, so that a
sample holding every row is the table in its file order).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from fairengine.errors import DataContractError

#: Name of the design-weight column of the sample frame.
WEIGHT_COLUMN = "__sample_weight"

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea & Flood 2014), elementwise on uint64 (wrapping)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def row_keys(seed: int, name: str, start: int, n: int) -> np.ndarray:
    """The sample keys in [0, 1) of rows ``start .. start + n - 1`` of file (or partition)
    ``name``: SplitMix64 of a seeded hash of the name plus the row offset, its top 53 bits
    scaled to [0, 1)."""
    digest = hashlib.blake2b(f"{seed}\x00{name}".encode(), digest_size=8).digest()
    base = np.uint64(int.from_bytes(digest, "little"))
    with np.errstate(over="ignore"):
        x = _splitmix64(base + np.arange(start, start + n, dtype=np.uint64))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53


@dataclass(frozen=True)
class StratifiedSample:
    """The sample (``frame``: the columns read plus :data:`WEIGHT_COLUMN`, its rows in the
    order of their keys) and its strata (``strata``: one row per (group combination, label)
    with ``rows`` n_s and ``sampled`` k_s). ``source_file``/``source_row``: each frame row's
    file (or partition) name and row offset there, where the engine knows them (the stream
    and Dask; None on Spark, which exposes no row offset)."""

    frame: pd.DataFrame
    strata: pd.DataFrame
    sample_rows: int
    level: int
    seed: int
    source_file: np.ndarray | None = None
    source_row: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return len(self.frame)

    def describe(self) -> str:
        """What a finding computed on the sample must say."""
        return (
            f"from a stratified sample of {self.n_rows:,} rows ({len(self.strata)} strata of "
            f"protected group × label, at most {self.level:,} rows each, seed {self.seed})"
        )


def allocation_level(sizes: np.ndarray, sample_rows: int) -> int:
    """The largest L with Σ_s min(n_s, L) ≤ ``sample_rows`` for stratum sizes ``sizes``
    (module docstring); ``sample_rows`` when all rows fit (no stratum is capped: a level of
    max n_s there would cap the largest stratum while its rows still arrive, and grow later,
    so that a pass over fewer rows than ``sample_rows`` lost rows)."""
    n = np.sort(np.asarray(sizes, dtype=np.int64))
    if n.sum() <= sample_rows:
        return sample_rows
    lo, hi = 0, int(n[-1])
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(np.minimum(n, mid).sum()) <= sample_rows:
            lo = mid
        else:
            hi = mid - 1
    return lo


class StratifiedReservoir:
    """Draws :class:`StratifiedSample` batch by batch (module docstring)."""

    def __init__(self, attributes: tuple[str, ...], sample_rows: int, seed: int = 0):
        if isinstance(sample_rows, bool) or not isinstance(sample_rows, int) or sample_rows < 1:
            raise DataContractError(f"sample_rows must be a positive integer, got {sample_rows!r}")
        self.attributes = attributes
        self.sample_rows = sample_rows
        self.seed = seed
        self._ids: dict[tuple[int, ...], int] = {}  # (discovery codes…, label) -> stratum
        self._sizes = np.zeros(0, dtype=np.int64)
        self._threshold = np.zeros(0)
        self._keys = np.zeros(0)
        self._strata = np.zeros(0, dtype=np.intp)
        self._names: dict[str, int] = {}  # file or partition name -> its id in _file
        self._file = np.zeros(0, dtype=np.int64)
        self._offset = np.zeros(0, dtype=np.int64)
        self._positions = True  # every row offered came with its name and offset
        self._rows: pa.Table | None = None
        self.level = sample_rows

    def _stratum_ids(
        self, codes: list[np.ndarray], label: np.ndarray, shape: tuple[int, ...]
    ) -> np.ndarray:
        dense = (
            np.ravel_multi_index(codes, shape) if shape else np.zeros(label.size, np.intp)
        ) * 2 + label
        present = np.flatnonzero(np.bincount(dense, minlength=2 * int(np.prod(shape))))
        table = np.zeros(2 * int(np.prod(shape)), dtype=np.intp)
        cells = np.unravel_index(present // 2, shape)
        for j, d in enumerate(present.tolist()):
            key = (*(int(c[j]) for c in cells), d % 2)
            if key not in self._ids:
                self._ids[key] = len(self._ids)
            table[d] = self._ids[key]
        grow = len(self._ids) - self._sizes.size
        if grow:
            self._sizes = np.concatenate([self._sizes, np.zeros(grow, np.int64)])
            self._threshold = np.concatenate([self._threshold, np.full(grow, np.inf)])
        return table[dense]

    def _level(self) -> int:
        return allocation_level(self._sizes, self.sample_rows)

    def add(
        self,
        data: pa.RecordBatch | pa.Table,
        codes: list[np.ndarray],
        label: np.ndarray,
        shape: tuple[int, ...],
        keys: np.ndarray,
        *,
        name: str | None = None,
        start: int = 0,
    ) -> None:
        """Offer one batch (its discovery codes, in the folder's current grid ``shape``, and
        its rows' keys, :func:`row_keys`); ``name`` and ``start``: its file (or partition) and
        the offset of its first row there (None: the sample has no source positions)."""
        stratum = self._stratum_ids(codes, label, shape)
        if name is None:
            self._positions = False
        self._sizes += np.bincount(stratum, minlength=self._sizes.size)
        take = np.flatnonzero(keys < self._threshold[stratum])
        if take.size:
            rows = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
            rows = _decoded(rows.take(pa.array(take)))
            self._rows = rows if self._rows is None else pa.concat_tables([self._rows, rows])
            self._keys = np.concatenate([self._keys, keys[take]])
            self._strata = np.concatenate([self._strata, stratum[take]])
            file_id = self._names.setdefault(name or "", len(self._names))
            self._file = np.concatenate([self._file, np.full(take.size, file_id, np.int64)])
            self._offset = np.concatenate([self._offset, start + take.astype(np.int64)])
        self.level = self._level()
        self._prune()

    def merge(self, other: StratifiedReservoir, remap: list[np.ndarray]) -> None:
        """Add the reservoir of other rows (module docstring); ``remap[j][c]`` is this side's
        discovery code of the other's code ``c`` of attribute j
        (:meth:`fairengine.streaming.folding.CountFolder.merge`)."""
        ids = np.zeros(len(other._ids), dtype=np.intp)
        for key, s in other._ids.items():
            mine = (*(int(remap[j][c]) for j, c in enumerate(key[:-1])), key[-1])
            if mine not in self._ids:
                self._ids[mine] = len(self._ids)
            ids[s] = self._ids[mine]
        grow = len(self._ids) - self._sizes.size
        if grow:
            self._sizes = np.concatenate([self._sizes, np.zeros(grow, np.int64)])
            self._threshold = np.concatenate([self._threshold, np.full(grow, np.inf)])
        np.add.at(self._sizes, ids, other._sizes)
        self._positions = self._positions and other._positions
        if other._rows is not None and other._keys.size:
            names = np.zeros(max(len(other._names), 1), dtype=np.int64)
            for n, i in other._names.items():
                names[i] = self._names.setdefault(n, len(self._names))
            self._file = np.concatenate([self._file, names[other._file]])
            self._offset = np.concatenate([self._offset, other._offset])
            self._rows = (
                other._rows
                if self._rows is None
                else pa.concat_tables([self._rows, other._rows], promote_options="permissive")
            )
            self._keys = np.concatenate([self._keys, other._keys])
            self._strata = np.concatenate([self._strata, ids[other._strata]])
        self.level = self._level()
        self._prune()

    def _prune(self) -> None:
        """Keep each stratum's ``level`` smallest keys; set each full stratum's threshold."""
        if self._rows is None or self._keys.size == 0:
            return
        order = np.lexsort((self._keys, self._strata))
        s = self._strata[order]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        rank = np.arange(s.size) - np.repeat(starts, np.diff(np.r_[starts, s.size]))
        keep = order[rank < self.level]
        keep.sort()
        if keep.size != self._keys.size:
            self._rows = self._rows.take(pa.array(keep))
            self._keys, self._strata = self._keys[keep], self._strata[keep]
            self._file, self._offset = self._file[keep], self._offset[keep]
        counts = np.bincount(self._strata, minlength=self._sizes.size)
        full = np.flatnonzero(counts >= self.level)
        self._threshold[:] = np.inf
        if full.size:
            top = np.full(self._sizes.size, -np.inf)
            np.maximum.at(top, self._strata, self._keys)
            self._threshold[full] = top[full]

    def result(
        self, values: dict[str, list[str]], order: dict[str, np.ndarray]
    ) -> StratifiedSample:
        """The sample, its rows in key order; ``values[a][code]`` the category of discovery
        code ``code`` and ``order`` the sorted code of each (for the strata table)."""
        by_key = np.argsort(self._keys, kind="stable")  # the same order however it was merged
        rows = self._rows.take(pa.array(by_key)) if self._rows is not None else None
        frame = rows.to_pandas() if rows is not None else pd.DataFrame()
        row_strata = self._strata[by_key]
        sampled = np.bincount(self._strata, minlength=self._sizes.size)
        weight = self._sizes[row_strata] / np.maximum(sampled[row_strata], 1)
        frame[WEIGHT_COLUMN] = weight.astype(np.float64)
        records = []
        for key, s in self._ids.items():
            rec: dict[str, object] = {a: values[a][key[j]] for j, a in enumerate(self.attributes)}
            rec["label"] = key[-1]
            rec["rows"] = int(self._sizes[s])
            rec["sampled"] = int(sampled[s])
            rec["_order"] = tuple(int(order[a][key[j]]) for j, a in enumerate(self.attributes))
            records.append(rec)
        strata = pd.DataFrame.from_records(records)
        if len(strata):
            strata = (
                strata.sort_values(["_order", "label"])
                .drop(columns="_order")
                .reset_index(drop=True)
            )
        source_file = source_row = None
        if self._positions:
            by_id = np.array(sorted(self._names, key=self._names.__getitem__), dtype=object)
            source_file = by_id[self._file[by_key]] if by_id.size else np.zeros(0, object)
            source_row = self._offset[by_key]
        return StratifiedSample(
            frame, strata, self.sample_rows, self.level, self.seed, source_file, source_row
        )


def _decoded(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary-encoded columns as plain values (the sample's frame then
    has the data's own dtypes, not pandas categoricals in file-dictionary order)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(field.type.value_type))
    return table
