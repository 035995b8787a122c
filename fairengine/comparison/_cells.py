"""The paired count table of two models and the contrasts computed from (resampled) counts.

Every row falls in one cell (j, y, ŷ_base, ŷ_cand), where j is the row's *joint* group over all
protected attributes (only observed joint groups get an index, so the table has 8·J cells with
J ≤ n). Every rate of every group of every attribute is a ratio of sums of these counts:

* selection rate of model m in group g: #{g, ŷ_m = 1} / #{g},
* TPR: #{g, y = 1, ŷ_m = 1} / #{g, y = 1},   FPR: #{g, y = 0, ŷ_m = 1} / #{g, y = 0},

where "in group g" of attribute k sums the joint groups j whose k-th code is g. Hence a
resample of rows drawn with replacement (both models, the label and the groups of a row kept
together: the paired bootstrap) changes the statistics only through its cell counts, and those
counts are exactly Multinomial(n, N_c / n) (Efron & Tibshirani 1993, §6: the bootstrap draws n
rows from the empirical distribution, which puts mass N_c / n on cell c). :func:`contrast_draws`
draws B resamples as a (B, 8J) count matrix, in chunks that bound the memory by
:data:`CHUNK_ENTRIES` counts, never a B × n index matrix.

For question j (attribute, pair (a, b), metric) the signed gap of model m is
g_m = r_{m,a} − r_{m,b}, and the four *contrasts* are c_{σ,s} = σ·g_cand − s·g_base,
(σ, s) ∈ {(+,+), (+,−), (−,+), (−,−)} in that column order (:data:`SIGNS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: (σ, s) of the four contrast columns of each question, in column order.
SIGNS: tuple[tuple[int, int], ...] = ((1, 1), (1, -1), (-1, 1), (-1, -1))
#: Most counts held at once by one chunk of multinomial draws (8 bytes each: 32 MiB).
CHUNK_ENTRIES = 1 << 22

# Cell layout inside a joint group: index y*4 + ŷ_base*2 + ŷ_cand.
_Y1 = np.array([0, 0, 0, 0, 1, 1, 1, 1], dtype=bool)
_BASE1 = np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=bool)
_CAND1 = np.array([0, 1, 0, 1, 0, 1, 0, 1], dtype=bool)


@dataclass(frozen=True)
class Question:
    """One question of the family: attribute ``attribute`` (index ``k``), groups ``a`` < ``b``
    (codes in category order) and ``metric``."""

    k: int
    attribute: str
    a: int
    b: int
    metric: str


@dataclass(frozen=True)
class CellTable:
    """Counts per (joint group, y, ŷ_base, ŷ_cand): ``counts`` (8J,), ``members`` (J, K) the
    code of each joint group on each attribute, ``n_groups`` per attribute."""

    counts: np.ndarray
    members: np.ndarray
    n_groups: tuple[int, ...]

    @classmethod
    def from_rows(
        cls,
        label: np.ndarray,
        base: np.ndarray,
        cand: np.ndarray,
        codes: list[np.ndarray],
        n_groups: list[int],
    ) -> CellTable:
        """Tabulate 0/1 ``label``, ``base``, ``cand`` and integer ``codes`` (one per attribute)."""
        stacked = np.stack([np.asarray(c, dtype=np.int64) for c in codes], axis=1)
        members, joint = np.unique(stacked, axis=0, return_inverse=True)
        joint = np.asarray(joint).reshape(-1)
        cell = joint * 8 + label.astype(np.int64) * 4 + base.astype(np.int64) * 2
        cell += cand.astype(np.int64)
        counts = np.bincount(cell, minlength=8 * members.shape[0])
        return cls(counts=counts, members=members, n_groups=tuple(int(g) for g in n_groups))

    @property
    def n_rows(self) -> int:
        return int(self.counts.sum())

    def group_counts(self, counts: np.ndarray, k: int) -> np.ndarray:
        """(B, G_k, 8) counts per group of attribute ``k`` from (B, 8J) joint-cell counts."""
        b = counts.shape[0]
        per_joint = counts.reshape(b, -1, 8).astype(np.float64)
        onehot = np.zeros((self.members.shape[0], self.n_groups[k]))
        onehot[np.arange(self.members.shape[0]), self.members[:, k]] = 1.0
        return np.einsum("bjc,jg->bgc", per_joint, onehot)


def rates(group: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base rate, candidate rate, denominator), each (B, G), from (B, G, 8) group counts; a
    rate is NaN where its denominator is 0."""
    if metric == "selection_rate":
        keep = np.ones(8, dtype=bool)
    elif metric == "tpr":
        keep = _Y1
    else:
        keep = ~_Y1
    den = group[:, :, keep].sum(axis=2)
    num_base = group[:, :, keep & _BASE1].sum(axis=2)
    num_cand = group[:, :, keep & _CAND1].sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num_base / den, num_cand / den, den


def gaps(
    table: CellTable, counts: np.ndarray, questions: list[Question]
) -> tuple[np.ndarray, np.ndarray]:
    """Signed gaps (g_base, g_cand), each (B, Q), of every question from (B, 8J) counts (NaN
    where a rate of the pair is undefined in that resample)."""
    b = counts.shape[0]
    g_base = np.empty((b, len(questions)))
    g_cand = np.empty((b, len(questions)))
    by_k: dict[int, np.ndarray] = {}
    cache: dict[tuple[int, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for i, q in enumerate(questions):
        if q.k not in by_k:
            by_k[q.k] = table.group_counts(counts, q.k)
        key = (q.k, q.metric)
        if key not in cache:
            cache[key] = rates(by_k[q.k], q.metric)
        rb, rc, _ = cache[key]
        g_base[:, i] = rb[:, q.a] - rb[:, q.b]
        g_cand[:, i] = rc[:, q.a] - rc[:, q.b]
    return g_base, g_cand


def contrasts(g_base: np.ndarray, g_cand: np.ndarray) -> np.ndarray:
    """(B, 4Q) contrasts c_{σ,s} = σ·g_cand − s·g_base, question-major (columns 4j..4j+3 are
    question j's, in :data:`SIGNS` order)."""
    b, q = g_base.shape
    out = np.empty((b, q, 4))
    for col, (sigma, s) in enumerate(SIGNS):
        out[:, :, col] = sigma * g_cand - s * g_base
    return out.reshape(b, 4 * q)


def contrast_draws(
    table: CellTable, questions: list[Question], rng: np.random.Generator, n_draws: int
) -> np.ndarray:
    """(n_draws, 4Q) contrasts of ``n_draws`` paired-bootstrap resamples (multinomial over the
    cells, drawn in chunks of at most :data:`CHUNK_ENTRIES` counts); NaN where a rate is
    undefined in a resample."""
    n = table.n_rows
    pvals = table.counts / n
    per_chunk = max(1, CHUNK_ENTRIES // table.counts.size)
    out = np.empty((n_draws, 4 * len(questions)))
    done = 0
    while done < n_draws:
        size = min(per_chunk, n_draws - done)
        counts = rng.multinomial(n, pvals, size=size)
        g_base, g_cand = gaps(table, counts, questions)
        out[done : done + size] = contrasts(g_base, g_cand)
        done += size
    return out
