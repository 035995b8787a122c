"""The count tables of a streamed audit: every sum the count-based methods read, over the grid
of all protected attributes' groups.

For protected attributes A_1..A_k with G_1..G_k groups (codes in the sorted order of
:meth:`fairengine.dataset.AuditDataset.from_frame`), label y and positive-prediction
probability p_i (0/1 with a threshold) and weight w_i (1 without weights), the grid keeps for
each cell (c_1, …, c_k, y)

    n = Σ 1,  W = Σ w,  S = Σ w p,  W2 = Σ w²,  S2 = Σ w² p,  Q2 = Σ w² p²,  P = Σ p,

(the sums of :class:`fairengine.counts.GroupLabelMoments`, plus the unweighted P that the
intersection table's row counts need with weights) and, optionally, the score histogram
Σw, Σw² per cell, label and bin. Every table a method reads is a sum of grid cells:

* :meth:`StreamedCounts.moments` — an attribute's (or the intersection's) ``GroupLabelMoments``;
* :meth:`StreamedCounts.group_table` — the ``GroupTable`` of the LiFT suite over some attributes;
* :meth:`StreamedCounts.intersection_table` — the ``IntersectionTable`` C[s, y, ŷ];
* :meth:`StreamedCounts.cell_counts` — the (TN, FP, FN, TP) counts of two groups, what the
  proportion permutation tests draw from.

With unweighted hard predictions every entry is an integer count (held exactly in float64 below
2^53 rows), so the tables equal the pandas path's exactly; float sums (probabilities, weights)
equal them up to the order of summation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairengine.counts import GroupLabelMoments
from fairengine.errors import DataContractError
from fairengine.group_table import GroupTable
from fairengine.intersectional.cells import IntersectionTable, check_levels
from fairengine.roles import ColumnRoles
from fairengine.scores import ScoreType

STATS = ("n", "w", "wp", "w2", "w2p", "w2p2")


@dataclass(frozen=True)
class StreamedCounts:
    """The folded grid of a streamed audit (module docstring) and where it came from.

    ``grid[name]`` has shape ``(G_1, …, G_k, 2)`` (``p_rows`` only with weights);
    ``hist_w``/``hist_w2`` shape ``(G_1, …, G_k, 2, bins)``. ``sample`` is the stratified
    sample drawn in the same pass (None when not asked for).
    """

    roles: ColumnRoles
    categories: dict[str, tuple[str, ...]]
    grid: dict[str, np.ndarray]
    n_rows: int
    score_type: ScoreType
    threshold: float | None
    positive_label: Any
    weighted: bool
    has_scores: bool
    bins: int | None = None
    hist_w: np.ndarray | None = None
    hist_w2: np.ndarray | None = None
    files: tuple[str, ...] = ()
    n_batches: int = 0
    sample: Any = None
    label_rate: float = float("nan")
    seconds: dict[str, float] = field(default_factory=dict)

    # ------------------------------------------------------------------ what it is
    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(self.categories)

    @property
    def hard(self) -> bool:
        """Thresholded (0/1) predictions; labels only count as hard too (no ŷ)."""
        return self.threshold is not None or not self.has_scores

    @property
    def prediction_mode(self) -> str:
        """``hard`` or ``expected``, as :attr:`fairengine.dataset.AuditDataset.prediction_mode`."""
        return "expected" if self.threshold is None else "hard"

    def require_scores(self, what: str) -> None:
        if not self.has_scores:
            raise DataContractError(
                f"{what} needs model scores: name a score column in roles.score or give a model"
            )

    def group_sizes(self, attribute: str) -> np.ndarray:
        """Rows per group of ``attribute``, in code order."""
        return self._collapse(self.grid["n"], [self._axis(attribute)]).sum(axis=-1)

    def summary(self) -> dict[str, Any]:
        """JSON-ready description (as :meth:`AuditDataset.summary`, without a fingerprint)."""
        return {
            "n_rows": self.n_rows,
            "files": len(self.files),
            "batches": self.n_batches,
            "roles": self.roles.to_dict(),
            "score_type": self.score_type,
            "threshold": self.threshold,
            "positive_label": self.positive_label,
            "label_rate": self.label_rate,
            "groups": {
                a: dict(zip(c, self.group_sizes(a).astype(int).tolist(), strict=True))
                for a, c in self.categories.items()
            },
        }

    # ------------------------------------------------------------------ grid algebra
    def _axis(self, attribute: str) -> int:
        if attribute not in self.categories:
            raise DataContractError(
                f"attribute {attribute!r} is not a protected attribute of the stream "
                f"({list(self.categories)})"
            )
        return list(self.categories).index(attribute)

    def _collapse(self, a: np.ndarray, keep: list[int]) -> np.ndarray:
        """Sum ``a`` (grid axes first) over the grid axes not in ``keep``, the kept axes moved
        into the order of ``keep``."""
        k = len(self.categories)
        drop = tuple(j for j in range(k) if j not in keep)
        out = a.sum(axis=drop) if drop else a
        kept = sorted(keep)
        if kept != keep:
            out = np.moveaxis(out, [kept.index(j) for j in keep], list(range(len(keep))))
        return out

    def _flat(self, a: np.ndarray, keep: list[int]) -> np.ndarray:
        """The kept axes collapsed and flattened in mixed-radix (C) order: ``(ΠG, …)``."""
        out = self._collapse(a, keep)
        cells = int(np.prod([len(self.categories[self.attributes[j]]) for j in keep]))
        return out.reshape(cells, *out.shape[len(keep) :])

    # ------------------------------------------------------------------ tables
    def _sums(self, keep: list[int]) -> dict[str, np.ndarray]:
        """The six sums over the kept axes, flattened, sharing arrays as the pandas path does
        (Σw = Σw² = n without weights, Σw²p = Σwp without weights, Σw²p² = Σw²p when hard)."""
        n = self._flat(self.grid["n"], keep).astype(np.float64)
        wp = self._flat(self.grid["wp"], keep).astype(np.float64)
        if self.weighted:
            out = {name: self._flat(self.grid[name], keep).astype(np.float64) for name in STATS}
            out["n"] = n
            if self.hard:
                out["w2p2"] = out["w2p"]
            return out
        w2p2 = wp if self.hard else self._flat(self.grid["w2p2"], keep).astype(np.float64)
        return {"n": n, "w": n, "wp": wp, "w2": n, "w2p": wp, "w2p2": w2p2}

    def moments(self, attribute: str | None = None) -> GroupLabelMoments:
        """``GroupLabelMoments`` of one attribute, or of the intersection of all (observed
        cells only, as :meth:`GroupTable.moments`)."""
        if attribute is None:
            return self.group_table(None).moments(None)
        keep = [self._axis(attribute)]
        return GroupLabelMoments(
            attribute=attribute,
            categories=self.categories[attribute],
            weighted=self.weighted,
            hard=self.hard,
            **self._sums(keep),
        )

    def group_table(self, attributes: list[str] | None, *, histogram: bool = False) -> GroupTable:
        """The :class:`GroupTable` of ``attributes`` (all when None), observed cells only, as
        :meth:`GroupTable.from_arrays` builds it from rows; with ``histogram`` the score
        histogram too."""
        attrs = list(self.attributes) if attributes is None else list(attributes)
        keep = [self._axis(a) for a in attrs]
        stats = self._sums(keep)
        present = np.flatnonzero(stats["n"].sum(axis=1) > 0)
        done: dict[int, np.ndarray] = {}
        for k, v in list(stats.items()):
            if id(v) not in done:
                done[id(v)] = v[present]
            stats[k] = done[id(v)]
        hw = hw2 = None
        bins = None
        if histogram:
            if self.hist_w is None or self.hist_w2 is None:
                raise DataContractError("the stream was folded without a score histogram (bins)")
            bins = self.bins
            hw = self._flat(self.hist_w, keep)[present]
            hw2 = hw if not self.weighted else self._flat(self.hist_w2, keep)[present]
        members = np.empty((present.size, len(attrs)), dtype=np.intp)
        rest = present.astype(np.int64)
        for i in range(len(attrs) - 1, -1, -1):
            g = len(self.categories[attrs[i]])
            members[:, i] = rest % g
            rest //= g
        return GroupTable(
            attributes=tuple(attrs),
            categories=tuple(self.categories[a] for a in attrs),
            members=members,
            stats=stats,
            weighted=self.weighted,
            hard=self.hard,
            bins=bins,
            hist_w=hw,
            hist_w2=hw2,
        )

    def intersection_table(
        self,
        attributes: list[str] | None = None,
        *,
        max_levels: int = 64,
        max_intersections: int = 10_000,
    ) -> IntersectionTable:
        """The :class:`IntersectionTable` C[s, y, ŷ] of ``attributes`` (all when None), as
        :func:`fairengine.intersectional.cells.table_from_arrays` builds it: weights scaled to
        mean 1 over the rows, ``rows`` the unweighted counts."""
        attrs = list(self.attributes) if attributes is None else list(attributes)
        check_levels(
            attrs,
            [len(self.categories[a]) for a in attrs],
            max_levels=max_levels,
            max_intersections=max_intersections,
        )
        keep = [self._axis(a) for a in attrs]
        k = int(np.prod([len(self.categories[a]) for a in attrs]))
        n = self._flat(self.grid["n"], keep).astype(np.float64).reshape(k, 2)
        if not self.has_scores:
            pos_rows = np.zeros_like(n)
        elif self.weighted:
            pos_rows = self._flat(self.grid["p_rows"], keep).astype(np.float64).reshape(k, 2)
        else:
            pos_rows = self._flat(self.grid["wp"], keep).astype(np.float64).reshape(k, 2)
        rows = np.stack([n - pos_rows, pos_rows], axis=-1)
        counts = rows
        if self.weighted:
            scale = self.n_rows / float(self.grid["w"].sum())
            w = self._flat(self.grid["w"], keep).reshape(k, 2) * scale
            wp = (
                self._flat(self.grid["wp"], keep).reshape(k, 2) * scale
                if self.has_scores
                else np.zeros_like(w)
            )
            counts = np.stack([w - wp, wp], axis=-1)
        if not rows.sum() > 0:
            raise DataContractError("the intersection table is empty: no rows to audit")
        mode = (
            "none"
            if not self.has_scores
            else ("hard" if self.threshold is not None else "expected")
        )
        return IntersectionTable(
            tuple(attrs),
            tuple(self.categories[a] for a in attrs),
            counts,
            rows,
            self.weighted,
            mode,  # type: ignore[arg-type]
        )

    def cell_counts(self, attribute: str, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(TN, FP, FN, TP) row counts of groups ``a`` and ``b`` of ``attribute`` (int64), as
        :func:`fairengine.counts.binary_cell_counts` counts them on the pair's rows; needs hard
        predictions."""
        if self.threshold is None or not self.has_scores:
            raise DataContractError("cell counts need thresholded (hard) predictions")
        keep = [self._axis(attribute)]
        n = self._collapse(self.grid["n"], keep)
        pos = self._collapse(self.grid["p_rows" if self.weighted else "wp"], keep)

        def cells(g: int) -> np.ndarray:
            tn_fp = [n[g, 0] - pos[g, 0], pos[g, 0]]
            fn_tp = [n[g, 1] - pos[g, 1], pos[g, 1]]
            return np.rint(np.array([*tn_fp, *fn_tp])).astype(np.int64)

        return cells(a), cells(b)
