"""A stratified sample of the rows, drawn in the same pass as the counts.

Strata are the (joint protected group, label) cells: every combination of the protected
attributes' values that occurs, times y ∈ {0, 1}. Each row gets a uniform random key
u_i ~ U(0, 1) from ``numpy.random.default_rng(seed)`` (drawn batch by batch in file order, so the
sample is reproducible), and stratum s keeps its k_s rows with the smallest keys — a uniform
random subset of its n_s rows without replacement (bottom-k / priority sampling, the reservoir
algorithm of Efraimidis & Spirakis 2006 with equal weights), where

    k_s = min(n_s, L),   L = max { L' : Σ_s min(n_s, L') ≤ sample_rows },

the largest equal allocation that fits ``sample_rows`` (small strata give all their rows, the
others share the rest equally). So the sample has at most ``sample_rows`` rows and every stratum
at least min(n_s, L) of its rows. Because L only decreases as rows arrive and a stratum's k_s
smallest keys are always among its earlier k smallest for any k ≥ k_s, rows beyond the current
L are dropped as soon as they can no longer be chosen: memory holds at most ``sample_rows`` rows
plus one batch's candidates. Each sampled row carries the design weight n_s / k_s (inverse
inclusion probability), so weighted estimates from the sample are unbiased for the full data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from fairengine.errors import DataContractError

#: Name of the design-weight column of the sample frame.
WEIGHT_COLUMN = "__sample_weight"


@dataclass(frozen=True)
class StratifiedSample:
    """The sample (``frame``: the columns read plus :data:`WEIGHT_COLUMN`) and its strata
    (``strata``: one row per (group combination, label) with ``rows`` n_s and ``sampled``
    k_s)."""

    frame: pd.DataFrame
    strata: pd.DataFrame
    sample_rows: int
    level: int
    seed: int

    @property
    def n_rows(self) -> int:
        return len(self.frame)

    def describe(self) -> str:
        """What a finding computed on the sample must say."""
        return (
            f"from a stratified sample of {self.n_rows:,} rows ({len(self.strata)} strata of "
            f"protected group × label, at most {self.level:,} rows each, seed {self.seed})"
        )


class StratifiedReservoir:
    """Draws :class:`StratifiedSample` batch by batch (module docstring)."""

    def __init__(self, attributes: tuple[str, ...], sample_rows: int, seed: int = 0):
        if isinstance(sample_rows, bool) or not isinstance(sample_rows, int) or sample_rows < 1:
            raise DataContractError(f"sample_rows must be a positive integer, got {sample_rows!r}")
        self.attributes = attributes
        self.sample_rows = sample_rows
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._ids: dict[tuple[int, ...], int] = {}  # (discovery codes…, label) -> stratum
        self._sizes = np.zeros(0, dtype=np.int64)
        self._threshold = np.zeros(0)
        self._keys = np.zeros(0)
        self._strata = np.zeros(0, dtype=np.intp)
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
        """The largest L with Σ min(n_s, L) ≤ sample_rows (module docstring)."""
        n = np.sort(self._sizes)
        if n.sum() <= self.sample_rows:
            return int(n.max()) if n.size else self.sample_rows
        lo, hi = 0, int(n[-1])
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if int(np.minimum(n, mid).sum()) <= self.sample_rows:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def add(
        self,
        data: pa.RecordBatch | pa.Table,
        codes: list[np.ndarray],
        label: np.ndarray,
        shape: tuple[int, ...],
    ) -> None:
        """Offer one batch (its discovery codes, in the folder's current grid ``shape``)."""
        stratum = self._stratum_ids(codes, label, shape)
        keys = self._rng.random(label.size)
        self._sizes += np.bincount(stratum, minlength=self._sizes.size)
        take = np.flatnonzero(keys < self._threshold[stratum])
        if take.size:
            rows = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
            rows = _decoded(rows.take(pa.array(take)))
            self._rows = rows if self._rows is None else pa.concat_tables([self._rows, rows])
            self._keys = np.concatenate([self._keys, keys[take]])
            self._strata = np.concatenate([self._strata, stratum[take]])
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
        """The sample, its rows in file order; ``values[a][code]`` the category of discovery
        code ``code`` and ``order`` the sorted code of each (for the strata table)."""
        frame = self._rows.to_pandas() if self._rows is not None else pd.DataFrame()
        sampled = np.bincount(self._strata, minlength=self._sizes.size)
        weight = self._sizes[self._strata] / np.maximum(sampled[self._strata], 1)
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
        return StratifiedSample(frame, strata, self.sample_rows, self.level, self.seed)


def _decoded(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary-encoded columns as plain values (the sample's frame then
    has the data's own dtypes, not pandas categoricals in file-dictionary order)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(field.type.value_type))
    return table
