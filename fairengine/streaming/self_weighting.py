"""A self-weighting subsample of the stream's stratified sample, for the methods that need rows.

The stratified sample (:mod:`.sample`) keeps k_s = min(N_s, L) rows of stratum s (a protected
group combination × label, N_s its exact row count): its inclusion probabilities k_s / N_s
differ across strata, so a method that treats its rows as the data (FlipTest, the
individual-fairness test, RTDP mitigation) would over-represent the small strata. The
subsample keeps, of every stratum,

    m_s = ⌊f N_s + ½⌋ rows,   f = min_s k_s / N_s   (the smallest sampling fraction),

rounded half up, in exact integer arithmetic: m_s = ⌊(2 k* N_s + N*) / (2 N*)⌋ with
(k*, N*) the stratum of the smallest fraction. Since f N_s ≤ k_s, m_s ≤ k_s: the subsample is
a subset of the sample. It keeps the m_s rows of the stratum with the smallest sample keys
(the sample's frame is in key order on every engine, and its rows are the stratum's k_s
smallest keys), so its stratum s is a uniform random subset of size m_s of the stratum's N_s
rows, deterministic given the seed. Every row of stratum s is then included with probability

    π_s = m_s / N_s,   |π_s − f| ≤ 1 / (2 N_s)

(equal to f exactly where f N_s is an integer, and in the stratum that sets f): the
subsample is a stratified simple random sample with proportional allocation, self-weighting
up to that rounding, so an unweighted estimate from it (a rate, a flip rate, a held-out
ε) estimates the full data's, as an unweighted estimate from the whole table would, and the
methods run on it unchanged. With ``sample_rows`` at least the number of rows, f = 1 and the
subsample is the whole table.

Where the engine recorded where each sampled row came from (the stream and Dask: file or
partition and row offset; :attr:`.sample.StratifiedSample.source_file`), the subsample's rows
are put back in the order of the source (the files in the pass's order, rows in file order),
so that a subsample holding every row is the table as an in-memory audit reads it; Spark's
sample has no row offsets and stays in key order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fairengine.errors import DataContractError
from fairengine.streaming.sample import WEIGHT_COLUMN, StratifiedSample

STRATA_COLUMNS = ("label", "rows", "sampled", "kept")
"""The strata table's columns after the protected attributes'."""


@dataclass(frozen=True)
class SelfWeightingSample:
    """The subsample (module docstring).

    ``frame``: its rows (the sample's columns, without the design weight), in source order
    where known (``in_source_order``); ``fraction``: f; ``strata``: one row per stratum, the
    protected attributes' values, ``label`` (0/1), ``rows`` N_s, ``sampled`` k_s and ``kept``
    m_s; ``total_rows``: N = Σ N_s; ``seed``: the sample's seed.
    """

    frame: pd.DataFrame
    fraction: float
    strata: pd.DataFrame
    total_rows: int
    seed: int
    in_source_order: bool

    @property
    def n_rows(self) -> int:
        return len(self.frame)

    @property
    def sizes(self) -> np.ndarray:
        """m_s per stratum, in the order of ``strata``."""
        return self.strata["kept"].to_numpy(np.int64)

    def describe(self) -> str:
        """What a finding computed on the subsample must say."""
        if self.n_rows == self.total_rows:
            return f"on all {self.total_rows:,} rows (the stream's sample holds every row)"
        return (
            f"from a self-weighting sample of {self.n_rows:,} of {self.total_rows:,} rows "
            f"(f = {self.fraction:.4g} of every protected group × label stratum, seed "
            f"{self.seed})"
        )


def smallest_fraction(
    sampled: Sequence[int] | np.ndarray, rows: Sequence[int] | np.ndarray
) -> tuple[int, int]:
    """(k*, N*): the stratum of the smallest sampling fraction k_s / N_s, compared exactly
    (cross-multiplied Python integers)."""
    k = [int(v) for v in np.asarray(sampled, dtype=np.int64)]
    n = [int(v) for v in np.asarray(rows, dtype=np.int64)]
    bad = len(k) != len(n) or not n
    if bad or any(ns < 1 or not 0 <= ks <= ns for ks, ns in zip(k, n, strict=True)):
        raise DataContractError(
            "strata need 0 <= sampled <= rows and rows >= 1 (and at least one stratum), got "
            f"sampled {k[:6]} of rows {n[:6]}"
        )
    best = 0
    for i in range(1, len(n)):
        if k[i] * n[best] < k[best] * n[i]:
            best = i
    return k[best], n[best]


def kept_rows(sampled: Sequence[int] | np.ndarray, rows: Sequence[int] | np.ndarray) -> np.ndarray:
    """m_s = ⌊f N_s + ½⌋ with f = min_s k_s / N_s (module docstring), for strata with
    ``sampled`` k_s of ``rows`` N_s rows, in exact integer arithmetic."""
    k_min, n_min = smallest_fraction(sampled, rows)
    return _kept(k_min, n_min, rows)


def _kept(k_min: int, n_min: int, rows: Sequence[int] | np.ndarray) -> np.ndarray:
    n = np.asarray(rows, dtype=np.int64)
    return np.array([(2 * k_min * int(v) + n_min) // (2 * n_min) for v in n], dtype=np.int64)


def self_weighting_subsample(
    sample: StratifiedSample, label: str, *, files: Sequence[str] = ()
) -> SelfWeightingSample:
    """The self-weighting subsample of ``sample`` (module docstring).

    Parameters
    ----------
    sample : the stratified sample of a pass (:attr:`fairengine.streaming.StreamedCounts.sample`).
    label : the label column (with the protected attributes, it names a row's stratum).
    files : the pass's files (or partitions) in reading order
        (:attr:`fairengine.streaming.StreamedCounts.files`): the order the rows are put back in.
    """
    strata = sample.strata.copy()
    attributes = [c for c in strata.columns if c not in ("label", "rows", "sampled")]
    frame = sample.frame
    rows = strata["rows"].to_numpy(np.int64)
    k_min, n_min = smallest_fraction(strata["sampled"].to_numpy(np.int64), rows)
    strata["kept"] = _kept(k_min, n_min, rows)
    fraction = k_min / n_min
    if len(frame) == 0:
        keep = np.zeros(0, dtype=bool)
    else:
        missing = [c for c in (*attributes, label, WEIGHT_COLUMN) if c not in frame.columns]
        if missing:
            raise DataContractError(
                f"the sample frame lacks column(s) {missing}; it has {list(frame.columns)}"
            )
        # a row's stratum: its protected values and label; k_s its rows in the sample, and
        # N_s = k_s × its design weight N_s / k_s
        stratum = frame.groupby([*attributes, label], sort=False, dropna=False).ngroup()
        stratum_arr = stratum.to_numpy(np.int64)
        k_s = np.bincount(stratum_arr)
        n_s = np.rint(
            frame[WEIGHT_COLUMN].groupby(stratum_arr).first().to_numpy(np.float64) * k_s
        ).astype(np.int64)
        m_s = _kept(k_min, n_min, n_s)
        rank = frame.groupby(stratum_arr, sort=False).cumcount().to_numpy(np.int64)
        keep = rank < np.minimum(m_s, k_s)[stratum_arr]  # the m_s smallest keys
        if int(keep.sum()) != int(strata["kept"].sum()):
            raise DataContractError(  # the frame disagrees with its strata table
                f"the sample's rows give {int(keep.sum())} kept rows, its strata "
                f"{int(strata['kept'].sum())}"
            )
    out = frame.loc[keep].drop(columns=[WEIGHT_COLUMN])
    in_source_order = False
    if sample.source_file is not None and sample.source_row is not None and len(frame):
        names = sample.source_file[keep]
        position = {name: i for i, name in enumerate(files)}
        unknown = sorted({str(n) for n in names if n not in position})
        for name in unknown:  # not in the given order (files not passed): after, by name
            position[name] = len(position)
        file_rank = np.fromiter((position[n] for n in names), dtype=np.int64, count=len(names))
        order = np.lexsort((sample.source_row[keep], file_rank))
        out = out.iloc[order]
        in_source_order = not unknown
    return SelfWeightingSample(
        frame=out.reset_index(drop=True),
        fraction=fraction,
        strata=strata,
        total_rows=int(rows.sum()),
        seed=sample.seed,
        in_source_order=in_source_order,
    )
