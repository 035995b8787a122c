r"""Per-intersection score summaries for threshold post-processing (notes ``intersectional.md``
§4.6).

For a threshold τ_s per intersection s (convention: a score ``f > τ_s`` is a predicted positive),
every rate of the randomised thresholding derived predictor is affine in its flip probabilities
once the weighted counts above the threshold are known:

    u⁺_s(τ) = Σ_i w_i 1{s_i = s, y_i = 1, f_i > τ_s},
    u⁻_s(τ) = Σ_i w_i 1{s_i = s, y_i = 0, f_i > τ_s}.

:class:`GroupScores` sorts each intersection's positive and negative scores once, so each u(τ) is
one ``searchsorted`` (O(log n)); :func:`candidate_thresholds` gives each intersection a grid of
G candidate thresholds (its score quantiles plus the base threshold and the two "all"/"none"
rules), and :meth:`GroupScores.above` evaluates u⁺, u⁻ on a whole (K, G) grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError

#: Threshold below every probability score: every row is above it (the all-positive rule).
ALL_ABOVE = -1.0
#: Threshold that no probability score exceeds (the all-negative rule).
NONE_ABOVE = 1.0


@dataclass(frozen=True, eq=False)
class GroupScores:
    """Sorted scores per intersection and label, with cumulative weights.

    Attributes
    ----------
    n_groups : K, the number of intersections (ids ``0..K−1``; empty ones allowed).
    scores : per label y ∈ {0, 1}, the scores sorted by (intersection, score).
    cum_weights : per label, the cumulative weights along ``scores`` (with a leading 0).
    offsets : per label, ``(K + 1,)`` start of each intersection's block in ``scores``.
    totals : ``(K, 2)`` weighted row totals N_s (y = 0) and P_s (y = 1).
    rows : ``(K, 2)`` unweighted row counts (for the support policy).
    total_weight : Σ w over all rows (the loss denominator).
    """

    n_groups: int
    scores: tuple[np.ndarray, np.ndarray]
    cum_weights: tuple[np.ndarray, np.ndarray]
    offsets: tuple[np.ndarray, np.ndarray]
    totals: np.ndarray
    rows: np.ndarray
    total_weight: float

    @classmethod
    def from_arrays(
        cls,
        groups: np.ndarray,
        label: np.ndarray,
        score: np.ndarray,
        sample_weight: np.ndarray | None = None,
        *,
        n_groups: int | None = None,
    ) -> GroupScores:
        """Summarise rows given as intersection ids, 0/1 labels, scores in [0, 1] and weights."""
        g, y, f, w = check_rows(groups, label, score, sample_weight)
        k = int(g.max()) + 1 if n_groups is None else int(n_groups)
        if g.size and g.max() >= k:
            raise DataContractError(f"groups must be intersection ids in 0..{k - 1}")
        order = np.lexsort((f, g))
        scores, cums, offs = [], [], []
        for label_value in (0, 1):
            sel = order[y[order] == label_value]
            scores.append(f[sel])
            cums.append(np.concatenate([[0.0], np.cumsum(w[sel])]))
            counts = np.bincount(g[sel], minlength=k)
            offs.append(np.concatenate([[0], np.cumsum(counts)]))
        totals = np.stack(
            [np.bincount(g, weights=w * (y == v), minlength=k) for v in (0, 1)], axis=1
        )
        rows = np.stack([np.bincount(g[y == v], minlength=k) for v in (0, 1)], axis=1)
        return cls(
            n_groups=k,
            scores=(scores[0], scores[1]),
            cum_weights=(cums[0], cums[1]),
            offsets=(offs[0], offs[1]),
            totals=totals.astype(np.float64),
            rows=rows.astype(np.float64),
            total_weight=float(w.sum()),
        )

    @property
    def positives(self) -> np.ndarray:
        """P_s, the weighted positives per intersection."""
        return self.totals[:, 1]

    @property
    def negatives(self) -> np.ndarray:
        """N_s, the weighted negatives per intersection."""
        return self.totals[:, 0]

    @property
    def sizes(self) -> np.ndarray:
        """Unweighted rows n_s per intersection."""
        return self.rows.sum(axis=1)

    def above(self, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """u⁺ and u⁻ (weighted counts with ``f > τ``) for thresholds ``(K,)`` or ``(K, G)``.

        One ``searchsorted`` per intersection and label over its sorted block (the loop is over
        intersections, each vectorised over the G candidates).
        """
        tau = np.asarray(thresholds, dtype=np.float64)
        squeeze = tau.ndim == 1
        tau2 = tau[:, None] if squeeze else tau
        if tau2.shape[0] != self.n_groups:
            raise DataContractError(
                f"thresholds must have one row per intersection ({self.n_groups}), "
                f"got shape {tau.shape}"
            )
        out = []
        for label_value in (0, 1):
            sc, cw, off = (
                self.scores[label_value],
                self.cum_weights[label_value],
                self.offsets[label_value],
            )
            u = np.zeros(tau2.shape)
            for s in range(self.n_groups):
                lo, hi = off[s], off[s + 1]
                if hi == lo:
                    continue
                pos = lo + np.searchsorted(sc[lo:hi], tau2[s], side="right")
                u[s] = cw[hi] - cw[pos]
            out.append(u[:, 0] if squeeze else u)
        return out[1], out[0]

    def all_scores(self, s: int) -> np.ndarray:
        """Every score of intersection ``s`` (both labels), unsorted."""
        parts = [self.scores[v][self.offsets[v][s] : self.offsets[v][s + 1]] for v in (0, 1)]
        return np.concatenate(parts)


def check_rows(
    groups: np.ndarray,
    label: np.ndarray,
    score: np.ndarray,
    sample_weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate the per-row inputs of a post-processor; errors name the argument."""
    g = np.asarray(groups)
    n = g.shape[0] if g.ndim == 1 else -1
    if g.ndim != 1 or (g.size and not np.issubdtype(g.dtype, np.integer)) or (g < 0).any():
        raise DataContractError("groups must be a 1-D array of non-negative intersection ids")
    y = np.asarray(label)
    if y.shape != (n,) or not np.isin(y, (0, 1)).all():
        raise DataContractError(f"label must be a 1-D 0/1 array with one entry per row ({n})")
    f = np.asarray(score, dtype=np.float64)
    if f.shape != (n,):
        raise DataContractError(f"score must have one entry per row ({n}), got shape {f.shape}")
    bad = ~np.isfinite(f) | (f < 0) | (f > 1)
    if bad.any():
        raise DataContractError(
            f"score must be probabilities in [0, 1]; {int(bad.sum())} value(s) are not "
            f"(e.g. {f[bad][:3].tolist()})"
        )
    if sample_weight is None:
        w = np.ones(n)
    else:
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (n,) or not np.all(np.isfinite(w) & (w >= 0)) or not w.sum() > 0:
            raise DataContractError(
                f"sample_weight must be {n} finite non-negative values with a positive sum"
            )
    if n == 0:
        raise DataContractError("no rows to fit the post-processor on")
    return g.astype(np.intp), y.astype(np.intp), f, w


def candidate_thresholds(
    scores: GroupScores, n_thresholds: int = 50, base_threshold: float = 0.5
) -> np.ndarray:
    """A ``(K, G)`` grid of candidate thresholds per intersection, each row sorted.

    Per intersection: its score quantiles at ``n_thresholds`` evenly spaced levels, the base
    threshold τ0, and the all-positive (``-1``) and all-negative (``1``) rules; rows are padded to
    a common width by repeating their last value (duplicates are harmless). Empty intersections
    get only the fixed candidates.
    """
    if n_thresholds < 2:
        raise DataContractError(f"n_thresholds must be >= 2, got {n_thresholds}")
    levels = np.linspace(0.0, 1.0, n_thresholds)
    fixed = np.array([ALL_ABOVE, base_threshold, NONE_ABOVE])
    rows = []
    for s in range(scores.n_groups):
        f = scores.all_scores(s)
        q = np.quantile(f, levels) if f.size else np.empty(0)
        rows.append(np.unique(np.concatenate([fixed, q])))
    width = max(r.size for r in rows)
    return np.stack([np.pad(r, (0, width - r.size), mode="edge") for r in rows])
