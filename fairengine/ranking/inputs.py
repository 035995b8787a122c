"""Input contract of the ranking statistics: one check at the public boundary, and the ranks.

A ranking audit sees, per item (row): a ``score`` (higher = ranked higher), optionally the id of
the list (query) it is ranked in (``lists``; default: one list of all items), optionally a
relevance label (0/1 or graded, non-negative), and a group code in 0..G−1 with G category
labels. Rankings are within lists: item i of list l gets the rank

    r_i = 1 + #{j in l : s_j > s_i} + #{j in l : s_j = s_i, j before i in row order}

**Ties policy** (``ties``): ``"order"`` (default) breaks tied scores by row order (the earlier
row ranks higher; shuffle the rows first for a random tie-break), ``"error"`` refuses tied
scores within a list and names the list and the score. The permutation tests hold the ranks
fixed, so their validity does not depend on the tie-break.

Every public function of :mod:`fairengine.ranking` passes its arguments through
:func:`check_inputs`, whose errors (:class:`~fairengine.errors.DataContractError`) name the
array or parameter and say what was expected: non-finite scores, a list with a single item
(no ranking), unknown group codes, and (:func:`resolve_cutoff`) a top-k count larger than a
list.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError
from fairengine.json_result import JsonResult

TIES: tuple[str, ...] = ("order", "error")
#: Fewest items a list may have: one item is no ranking.
MIN_LIST_SIZE = 2


@dataclass(frozen=True)
class RankingInputs:
    """Checked inputs: float64 ``scores``, int64 group ``codes`` with their ``categories``,
    int64 ``lists`` (list index 0..L−1 per row, in sorted order of the given ids), float64
    ``relevance`` (None: not given), int64 ``ranks`` (1-based within each list),
    ``list_sizes[l]`` and ``list_ids[l]`` (the given id of list l, as text)."""

    scores: np.ndarray
    codes: np.ndarray
    categories: tuple[str, ...]
    lists: np.ndarray
    relevance: np.ndarray | None
    ranks: np.ndarray
    list_sizes: np.ndarray
    list_ids: tuple[str, ...]

    @property
    def n_lists(self) -> int:
        return int(self.list_sizes.size)

    def exposure(self) -> np.ndarray:
        """Position-discounted exposure 1/log2(1 + r) of every item (:mod:`.exposure`)."""
        return position_exposure(self.ranks)


@dataclass(frozen=True)
class Cutoff(JsonResult):
    """A top-k cutoff: ``count`` items of every list, or the ``fraction`` of each list's items
    rounded up (k_l = ⌈f · n_l⌉, so at least one item); ``token`` names it in finding keys
    (``k10``, ``10pct``) and ``label`` in text (``top 10``, ``top 10%``)."""

    count: int | None
    fraction: float | None
    token: str
    label: str

    def per_list(self, list_sizes: np.ndarray) -> np.ndarray:
        """k_l for every list (int64)."""
        sizes = np.asarray(list_sizes, dtype=np.int64)
        if self.count is not None:
            return np.full(sizes.shape, self.count, dtype=np.int64)
        assert self.fraction is not None
        # round first so that 0.1 * 30 = 3.0000000000000004 gives 3, not 4
        return np.maximum(1, np.ceil(np.round(self.fraction * sizes, 9))).astype(np.int64)


def position_exposure(ranks: object) -> np.ndarray:
    """Exposure of rank r: 1/log2(1 + r) (the DCG position discount used by Singh & Joachims
    2018, "Fairness of exposure in rankings", KDD, §3: v_j = 1/log(1 + j))."""
    r = np.asarray(ranks, dtype=np.float64)
    return 1.0 / np.log2(1.0 + r)


def _fraction_token(f: float) -> str:
    pct = round(100 * f, 6)
    text = f"{pct:g}".replace(".", "p")
    return f"{text}pct"


def resolve_cutoff(
    k: object,
    list_sizes: np.ndarray | None = None,
    name: str = "k",
    list_ids: Sequence[str] = (),
) -> Cutoff:
    """A :class:`Cutoff` from ``k``: an int ≥ 1 is a count of items per list, a float in
    (0, 1] a fraction of each list (0.1: the top 10%). With ``list_sizes``, a count larger
    than the smallest list is an error naming the list size."""
    if isinstance(k, Cutoff):
        cut = k
    elif isinstance(k, bool) or not isinstance(k, int | float | np.integer | np.floating):
        raise DataContractError(
            f"{name} must be an item count (int >= 1) or a fraction of each list (float in "
            f"(0, 1]), got {k!r}"
        )
    elif isinstance(k, int | np.integer):
        if k < 1:
            raise DataContractError(f"{name} must be at least 1 item, got {k}")
        cut = Cutoff(int(k), None, f"k{int(k)}", f"top {int(k)}")
    else:
        f = float(k)
        if not (math.isfinite(f) and 0 < f <= 1):
            raise DataContractError(
                f"{name} as a fraction of each list must lie in (0, 1], got {k!r} (give an "
                f"int for a count of items)"
            )
        pct = f"{round(100 * f, 6):g}"
        cut = Cutoff(None, f, _fraction_token(f), f"top {pct}%")
    if list_sizes is not None and cut.count is not None:
        sizes = np.asarray(list_sizes)
        if sizes.size and cut.count > int(sizes.min()):
            short = int(np.argmin(sizes))
            lid = repr(list_ids[short]) if list_ids else str(short)
            raise DataContractError(
                f"{name} = {cut.count} is larger than a list: list {lid} has "
                f"{int(sizes[short])} items (give a fraction such as 0.1 for lists of "
                f"different lengths)"
            )
    return cut


def resolve_cutoffs(
    ks: object, list_sizes: np.ndarray, name: str = "k", list_ids: Sequence[str] = ()
) -> tuple[Cutoff, ...]:
    """:func:`resolve_cutoff` of one value or a sequence of them; distinct tokens required."""
    seq = list(ks) if isinstance(ks, list | tuple) else [ks]
    cuts = tuple(resolve_cutoff(k, list_sizes, f"{name}[{i}]", list_ids) for i, k in enumerate(seq))
    tokens = [c.token for c in cuts]
    if len(set(tokens)) != len(tokens):
        raise DataContractError(f"{name} holds the same cutoff twice: {tokens}")
    return cuts


def _finite(name: str, values: object, n: int | None) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype.kind not in "biuf":
        raise DataContractError(f"{name} must be numeric, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    if a.ndim != 1:
        raise DataContractError(f"{name} must be a 1-D array (one value per item), got {a.shape}")
    if n is not None and a.shape[0] != n:
        raise DataContractError(
            f"{name} has {a.shape[0]} items but scores has {n}: every array needs one value "
            f"per item"
        )
    bad = ~np.isfinite(a)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise DataContractError(
            f"{name} must hold finite numbers: {int(bad.sum())} NaN/infinite value(s), the "
            f"first at row {first} ({a[first]})"
        )
    return a


def _codes(groups: object, cats: tuple[str, ...], n: int) -> np.ndarray:
    g = np.asarray(groups)
    if g.ndim != 1 or g.shape[0] != n:
        raise DataContractError(
            f"groups must be a 1-D array of group codes with one per item ({n}), got shape "
            f"{g.shape}"
        )
    if g.dtype.kind not in "iu":
        if g.dtype.kind == "f" and np.all(np.isfinite(g)) and np.all(g == np.round(g)):
            g = g.astype(np.int64)
        else:
            raise DataContractError(
                f"groups must hold integer codes 0..{len(cats) - 1} (indices into categories), "
                f"got dtype {g.dtype}"
            )
    codes = g.astype(np.int64, copy=False)
    if n and (codes.min() < 0 or codes.max() >= len(cats)):
        raise DataContractError(
            f"groups must hold codes 0..{len(cats) - 1} (one per category), found "
            f"{int(codes.min())}..{int(codes.max())}"
        )
    return codes


def _list_index(lists: object | None, n: int) -> tuple[np.ndarray, tuple[str, ...]]:
    if lists is None:
        return np.zeros(n, dtype=np.int64), ("0",)
    a = np.asarray(lists)
    if a.ndim != 1 or a.shape[0] != n:
        raise DataContractError(
            f"lists must be a 1-D array of list (query) ids with one per item ({n}), got shape "
            f"{a.shape}"
        )
    if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        raise DataContractError("lists must not hold NaN ids: every item needs its list")
    if a.dtype.kind == "O" and any(v is None for v in a):
        raise DataContractError("lists must not hold None ids: every item needs its list")
    try:
        ids, index = np.unique(a, return_inverse=True)
    except TypeError as exc:
        raise DataContractError(f"lists must hold comparable ids of one type: {exc}") from exc
    return index.astype(np.int64).ravel(), tuple(str(v) for v in ids)


def rank_within_lists(
    scores: np.ndarray, lists: np.ndarray, list_ids: Sequence[str] = (), ties: str = "order"
) -> np.ndarray:
    """1-based ranks within each list, descending score, ties by ``ties`` (module docstring)."""
    n = scores.shape[0]
    order = np.lexsort((np.arange(n), -scores, lists))
    ls, ss = lists[order], scores[order]
    if ties == "error" and n > 1:
        same = (ls[1:] == ls[:-1]) & (ss[1:] == ss[:-1])
        if same.any():
            j = int(np.flatnonzero(same)[0])
            lid = list_ids[int(ls[j])] if list_ids else str(int(ls[j]))
            raise DataContractError(
                f"scores has {int(same.sum())} tie(s) within lists (ties='error'), the first in "
                f"list {lid!r} at score {float(ss[j])!r} (rows {int(order[j])} and "
                f"{int(order[j + 1])}); "
                f"use ties='order' to break ties by row order"
            )
    starts = np.flatnonzero(np.r_[True, ls[1:] != ls[:-1]]) if n else np.empty(0, np.int64)
    first = np.repeat(starts, np.diff(np.r_[starts, n]))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.arange(n) - first + 1
    return ranks


def check_inputs(
    scores: object,
    groups: object,
    categories: Sequence[object],
    *,
    lists: object | None = None,
    relevance: object | None = None,
    ties: str = "order",
) -> RankingInputs:
    """Validate the items of a ranking audit and rank them within their lists (module
    docstring). ``groups`` holds integer codes 0..G−1 indexing ``categories``; every category
    needs at least one item; every list at least :data:`MIN_LIST_SIZE` items."""
    s = _finite("scores", scores, None)
    n = s.shape[0]
    if n == 0:
        raise DataContractError("scores is empty: a ranking needs items")
    cats = tuple(str(c) for c in categories)
    if len(cats) == 0:
        raise DataContractError("categories must name at least one group")
    if len(set(cats)) != len(cats):
        raise DataContractError(f"categories must be distinct labels, got {list(cats)}")
    codes = _codes(groups, cats, n)
    if ties not in TIES:
        raise DataContractError(f"ties must be one of {list(TIES)}, got {ties!r}")
    rel = None if relevance is None else _finite("relevance", relevance, n)
    if rel is not None and np.any(rel < 0):
        raise DataContractError("relevance must be non-negative (0/1 or graded labels)")
    index, ids = _list_index(lists, n)
    sizes = np.bincount(index, minlength=len(ids)).astype(np.int64)
    if sizes.min() < MIN_LIST_SIZE:
        short = int(np.argmin(sizes))
        raise DataContractError(
            f"list {ids[short]!r} has {int(sizes[short])} item(s) in lists; a ranking needs at "
            f"least {MIN_LIST_SIZE} items per list (drop single-item lists)"
        )
    counts = np.bincount(codes, minlength=len(cats))
    for code, (cat, size) in enumerate(zip(cats, counts, strict=True)):
        if size < 1:
            raise DataContractError(
                f"group {cat!r} (code {code}) has no items in groups; drop it from categories"
            )
    ranks = rank_within_lists(s, index, ids, ties)
    return RankingInputs(s, codes, cats, index, rel, ranks, sizes, ids)
