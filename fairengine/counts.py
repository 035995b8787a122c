"""Sufficient statistics per (group, label) cell: one pass over the rows, mergeable.

For row i with label y_i ∈ {0,1}, positive-prediction probability p_i (0/1 with a threshold,
the score without) and weight w_i (1 without weights), each cell (g, y) keeps

    n = Σ 1,  W = Σ w,  S = Σ w p,  W2 = Σ w²,  S2 = Σ w² p,  Q2 = Σ w² p².

Every group rate is a ratio m = S/W over a set of labels L (all labels for the positive-
prediction rate, y=1 for TPR, y=0 for FPR), and its linearisation variance is

    Var(m) ≈ Σ_i w_i² (p_i − m)² / W² = (Q2 − 2 m S2 + m² W2) / W²,

which for unweighted hard predictions reduces to the binomial m(1−m)/n. The LiFT count table
C[g, y, ŷ] (expected counts without a threshold) is ``counts``. Because every statistic is a sum,
tables of partitions add up (``a + b``), which is what makes the audit distributable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError

_FIELDS = ("n", "w", "wp", "w2", "w2p", "w2p2")


@dataclass(frozen=True)
class GroupLabelMoments:
    """Per-(group, label) sums; each array has shape ``(G, 2)`` indexed ``[group, label]``."""

    attribute: str
    categories: tuple[str, ...]
    n: np.ndarray
    w: np.ndarray
    wp: np.ndarray
    w2: np.ndarray
    w2p: np.ndarray
    w2p2: np.ndarray
    weighted: bool
    hard: bool

    @classmethod
    def from_arrays(
        cls,
        attribute: str,
        categories: Sequence[str],
        codes: np.ndarray,
        label: np.ndarray,
        prediction: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        hard: bool,
    ) -> GroupLabelMoments:
        """Accumulate the sums with one ``np.bincount`` per statistic over index 2g + y."""
        g = len(categories)
        codes = np.asarray(codes)
        if codes.shape != label.shape or codes.shape != prediction.shape:
            raise DataContractError("codes, label and prediction must have the same length")
        idx = 2 * codes + np.asarray(label, dtype=np.intp)
        p = np.asarray(prediction, dtype=np.float64)
        w = np.ones_like(p) if weights is None else np.asarray(weights, dtype=np.float64)
        w2 = w * w

        def cell_sum(v: np.ndarray | None) -> np.ndarray:
            return np.bincount(idx, weights=v, minlength=2 * g).reshape(g, 2).astype(np.float64)

        return cls(
            attribute=attribute,
            categories=tuple(categories),
            n=cell_sum(None),
            w=cell_sum(w),
            wp=cell_sum(w * p),
            w2=cell_sum(w2),
            w2p=cell_sum(w2 * p),
            w2p2=cell_sum(w2 * p * p),
            weighted=weights is not None,
            hard=hard,
        )

    def __add__(self, other: GroupLabelMoments) -> GroupLabelMoments:
        """Merge the tables of two partitions of the same rows' population."""
        if (self.attribute, self.categories, self.weighted, self.hard) != (
            other.attribute,
            other.categories,
            other.weighted,
            other.hard,
        ):
            raise DataContractError(
                "can only add moment tables of the same attribute, groups, weighting and "
                "prediction mode"
            )
        sums = {f: getattr(self, f) + getattr(other, f) for f in _FIELDS}
        return GroupLabelMoments(
            attribute=self.attribute,
            categories=self.categories,
            weighted=self.weighted,
            hard=self.hard,
            **sums,
        )

    @property
    def counts(self) -> np.ndarray:
        """LiFT's (weighted, expected) count table ``C[g, y, ŷ]`` of shape ``(G, 2, 2)``."""
        return np.stack([self.w - self.wp, self.wp], axis=-1)

    def rate(self, labels: Sequence[int] = (0, 1)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-group rate m = S/W over rows with label in ``labels``, its variance, and rows n.

        Groups with no such rows get NaN rate and variance.
        """
        cols = list(labels)
        n = self.n[:, cols].sum(axis=1)
        w = self.w[:, cols].sum(axis=1)
        s = self.wp[:, cols].sum(axis=1)
        w2 = self.w2[:, cols].sum(axis=1)
        s2 = self.w2p[:, cols].sum(axis=1)
        q2 = self.w2p2[:, cols].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            m = np.where(w > 0, s / w, np.nan)
            var = np.where(w > 0, (q2 - 2 * m * s2 + m * m * w2) / (w * w), np.nan)
        return m, np.maximum(var, 0.0), n
