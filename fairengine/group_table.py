"""One pass over the rows: sufficient statistics per (joint cell, label) for several attributes.

For protected attributes A_1..A_k the rows are bucketed by their *joint* cell (the intersection
of all k attributes, :mod:`fairengine.intersection`) and label y. Each bucket keeps the sums of
:class:`fairengine.counts.GroupLabelMoments` (n, Σw, Σwp, Σw², Σw²p, Σw²p²) and, optionally, a
histogram of the score in ``bins`` equal-width bins on [0, 1] (Σw and Σw² per bin) for the
binned AUC. Every single attribute's table is a *marginal* of the joint one (sums add up), so the
suite for k attributes and their intersection costs one pass over the rows, in blocks
(:func:`fairengine.counts.label_cell_sums`): unweighted hard predictions take a single
``np.bincount`` per block over (joint cell, y, ŷ). Without weights, Σw = Σw² = n and Σw²p = Σwp;
with hard predictions Σw²p² = Σw²p; those sums are not recomputed. Tables of row partitions add
up (``a + b``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from fairengine.counts import GroupLabelMoments, label_cell_sums
from fairengine.dataset import GroupEncoding
from fairengine.errors import DataContractError
from fairengine.intersection import SEPARATOR

_STATS = ("n", "w", "wp", "w2", "w2p", "w2p2")
MAX_HISTOGRAM_CELLS = 2**27


@dataclass(frozen=True)
class GroupTable:
    """Sums per (observed joint cell, label); ``stats[name]`` has shape ``(C, 2)``.

    ``members[c, i]`` is the group code of joint cell c on attribute i. ``hist_w``/``hist_w2``
    (shape ``(C, 2, bins)``) hold the score histogram when ``bins`` was given.
    """

    attributes: tuple[str, ...]
    categories: tuple[tuple[str, ...], ...]
    members: np.ndarray
    stats: dict[str, np.ndarray]
    weighted: bool
    hard: bool
    bins: int | None = None
    hist_w: np.ndarray | None = None
    hist_w2: np.ndarray | None = None

    @classmethod
    def from_arrays(
        cls,
        parts: Sequence[GroupEncoding],
        label: np.ndarray,
        prediction: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        hard: bool,
        score: np.ndarray | None = None,
        bins: int | None = None,
    ) -> GroupTable:
        """Accumulate the table in one pass (see module docstring).

        ``label`` is 0/1, ``prediction`` the positive-prediction probability (0/1 when
        ``hard``), ``score`` the probability used for the AUC histogram (needed with ``bins``).
        """
        parts = tuple(parts)
        if not parts:
            raise DataContractError("an intersection needs at least one attribute")
        total = 1
        for part in parts:
            total *= part.n_groups
        if bins is not None:
            if score is None:
                raise DataContractError("a binned score histogram needs the score array")
            if not isinstance(bins, int | np.integer) or bins < 2:
                raise DataContractError(f"bins must be an integer >= 2, got {bins!r}")
            if 2 * total * bins > MAX_HISTOGRAM_CELLS:
                raise DataContractError(
                    f"a score histogram of {bins} bins over {total} joint groups needs "
                    f"{2 * total * bins} cells (limit {MAX_HISTOGRAM_CELLS}); use fewer bins"
                )
        stats, hist_w, hist_w2 = label_cell_sums(
            [(part.codes, part.n_groups) for part in parts],
            label,
            prediction,
            weights,
            hard=hard,
            score=score,
            bins=bins,
        )
        present = np.flatnonzero(stats["n"].sum(axis=1) > 0)
        stats = _map_shared(stats, lambda v: v[present])
        if hist_w is not None:
            same = hist_w2 is hist_w
            hist_w = hist_w[present]
            hist_w2 = hist_w if same else hist_w2[present]  # type: ignore[index]
        members = np.empty((present.size, len(parts)), dtype=np.intp)
        rest = present.astype(np.int64)
        for i in range(len(parts) - 1, -1, -1):
            members[:, i] = rest % parts[i].n_groups
            rest //= parts[i].n_groups
        return cls(
            attributes=tuple(p.attribute for p in parts),
            categories=tuple(p.categories for p in parts),
            members=members,
            stats=stats,
            weighted=weights is not None,
            hard=hard,
            bins=bins,
            hist_w=hist_w,
            hist_w2=hist_w2,
        )

    # ------------------------------------------------------------------ views
    @property
    def intersection_name(self) -> str:
        return SEPARATOR.join(self.attributes)

    @functools.cached_property
    def intersection_categories(self) -> tuple[str, ...]:
        return tuple(
            SEPARATOR.join(self.categories[i][g] for i, g in enumerate(row))
            for row in self.members.tolist()
        )

    def _index(self, attribute: str | None) -> tuple[str, tuple[str, ...], np.ndarray]:
        """(name, categories, group code of each joint cell) for an attribute or the
        intersection (``None`` or the intersection name)."""
        if attribute is None or (
            attribute == self.intersection_name and attribute not in self.attributes
        ):
            cats = self.intersection_categories
            return self.intersection_name, cats, np.arange(len(cats))
        if attribute not in self.attributes:
            raise DataContractError(
                f"attribute {attribute!r} is not in this table ({list(self.attributes)})"
            )
        i = self.attributes.index(attribute)
        return attribute, self.categories[i], self.members[:, i]

    def _marginal(self, a: np.ndarray, codes: np.ndarray, g: int) -> np.ndarray:
        """Sums of the joint cells' rows of ``a`` per group (``codes``: group of each cell), in
        one ``np.add.reduceat`` pass over the cells sorted by group."""
        if codes.shape[0] == g and np.array_equal(codes, np.arange(g)):
            return a.astype(np.float64)  # the intersection: every cell is its own group
        out = np.zeros((g, *a.shape[1:]), dtype=np.float64)
        if codes.size == 0:
            return out
        order = np.argsort(codes, kind="stable")
        sizes = np.bincount(codes, minlength=g)
        filled = np.flatnonzero(sizes)
        starts = np.cumsum(sizes)[filled] - sizes[filled]
        out[filled] = np.add.reduceat(a[order].astype(np.float64, copy=False), starts, axis=0)
        return out

    def moments(self, attribute: str | None = None) -> GroupLabelMoments:
        """The :class:`GroupLabelMoments` of one attribute (a marginal of the joint table) or,
        with ``None``, of the intersection of all attributes (observed cells only)."""
        name, cats, codes = self._index(attribute)
        g = len(cats)
        sums = _map_shared(
            {k: self.stats[k] for k in _STATS}, lambda a: self._marginal(a, codes, g)
        )
        return GroupLabelMoments(
            attribute=name,
            categories=cats,
            weighted=self.weighted,
            hard=self.hard,
            **sums,
        )

    def histogram(self, attribute: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Score histograms (Σw, Σw²) of shape ``(G, 2, bins)`` per group and label."""
        if self.hist_w is None or self.hist_w2 is None:
            raise DataContractError("this table was built without a score histogram (bins)")
        _, cats, codes = self._index(attribute)
        hw = self._marginal(self.hist_w, codes, len(cats))
        hw2 = hw if self.hist_w2 is self.hist_w else self._marginal(self.hist_w2, codes, len(cats))
        return hw, hw2

    def __add__(self, other: GroupTable) -> GroupTable:
        """Merge the tables of two row partitions (same attributes, groups and settings)."""
        same = (self.attributes, self.categories, self.weighted, self.hard, self.bins) == (
            other.attributes,
            other.categories,
            other.weighted,
            other.hard,
            other.bins,
        )
        if not same:
            raise DataContractError(
                "can only add group tables of the same attributes, groups and settings"
            )
        keys = {tuple(r) for r in self.members.tolist()} | {
            tuple(r) for r in other.members.tolist()
        }
        members = np.array(sorted(keys), dtype=np.intp).reshape(len(keys), len(self.attributes))
        pos = {k: i for i, k in enumerate(map(tuple, members.tolist()))}

        def merged(a: np.ndarray | None, b: np.ndarray | None, ma, mb) -> np.ndarray | None:
            if a is None or b is None:
                return None
            out = np.zeros((len(keys), *a.shape[1:]))
            np.add.at(out, [pos[tuple(r)] for r in ma.tolist()], a)
            np.add.at(out, [pos[tuple(r)] for r in mb.tolist()], b)
            return out

        stats = {
            k: merged(self.stats[k], other.stats[k], self.members, other.members) for k in _STATS
        }
        hw = merged(self.hist_w, other.hist_w, self.members, other.members)
        hw2 = (
            hw
            if self.hist_w2 is self.hist_w and other.hist_w2 is other.hist_w
            else merged(self.hist_w2, other.hist_w2, self.members, other.members)
        )
        return replace(self, members=members, stats=stats, hist_w=hw, hist_w2=hw2)  # type: ignore[arg-type]


def _map_shared(
    arrays: dict[str, np.ndarray], fn: Callable[[np.ndarray], np.ndarray]
) -> dict[str, np.ndarray]:
    """``{k: fn(v)}``, computed once per distinct array: sums that are the same array (Σw = n
    without weights, Σw²p² = Σw²p with hard predictions) stay one array."""
    done: dict[int, np.ndarray] = {}
    out = {}
    for k, v in arrays.items():
        if id(v) not in done:
            done[id(v)] = fn(v)
        out[k] = done[id(v)]
    return out
