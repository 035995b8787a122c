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

The pass over the rows (:func:`label_cell_sums`, :func:`binary_cell_counts`) runs in blocks of
:data:`CHUNK_ROWS` rows: each block's cell index is built in the smallest unsigned integer type
that holds it and summed with one ``np.bincount`` per statistic, so the temporaries stay in the
CPU cache and the memory used does not grow with the row count (no float or ``intp`` copy of a
whole column). With hard predictions the prediction is part of the cell index, (group, y, ŷ),
and every sum is a count or a sum of weights of one bincount.
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
        """Accumulate the sums in one pass over the rows (:func:`label_cell_sums`)."""
        g = len(categories)
        codes = np.asarray(codes)
        if codes.shape != np.shape(label) or codes.shape != np.shape(prediction):
            raise DataContractError("codes, label and prediction must have the same length")
        sums, _, _ = label_cell_sums([(codes, g)], label, prediction, weights, hard=hard)
        return cls(
            attribute=attribute,
            categories=tuple(categories),
            weighted=weights is not None,
            hard=hard,
            **sums,
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
        summed: dict[int, np.ndarray] = {}  # by array: unweighted tables share their sums

        def over_labels(a: np.ndarray) -> np.ndarray:
            if id(a) not in summed:
                if cols == [0, 1]:
                    summed[id(a)] = a[:, 0] + a[:, 1]
                elif len(cols) == 1:
                    summed[id(a)] = a[:, cols[0]].copy()
                else:
                    summed[id(a)] = a[:, cols].sum(axis=1)
            return summed[id(a)]

        n, w, s = over_labels(self.n), over_labels(self.w), over_labels(self.wp)
        w2, s2, q2 = over_labels(self.w2), over_labels(self.w2p), over_labels(self.w2p2)
        with np.errstate(invalid="ignore", divide="ignore"):
            m = np.where(w > 0, s / w, np.nan)
            var = np.where(w > 0, (q2 - 2 * m * s2 + m * m * w2) / (w * w), np.nan)
        return m, np.maximum(var, 0.0), n


#: Rows per block of the passes over the rows (temporaries of a block stay in the CPU cache).
CHUNK_ROWS = 1 << 16


def index_dtype(max_value: int) -> np.dtype:
    """The smallest unsigned integer dtype that holds ``0..max_value`` (``intp`` from 2**32 on),
    e.g. for group codes and cell indices; ``np.bincount`` accepts all of them."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if max_value <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.intp)


def label_cell_sums(
    codes: Sequence[tuple[np.ndarray, int]],
    label: np.ndarray,
    prediction: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    hard: bool,
    score: np.ndarray | None = None,
    bins: int | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray | None]:
    """The sums of :class:`GroupLabelMoments` per (joint cell, label) in one pass over the rows.

    ``codes`` are ``(codes_i, G_i)`` of k attributes; the joint cell of a row is the mixed-radix
    code ``((c_1·G_2 + c_2)·G_3 + c_3)…`` (:func:`fairengine.intersection.joint_codes`), so the
    sums have shape ``(ΠG_i, 2)`` indexed ``[cell, label]``. ``label`` is 0/1, ``prediction``
    the positive-prediction probability (0/1 when ``hard``; any non-zero value counts as a
    positive prediction then). With ``bins``, also the histograms Σw and Σw² of ``score`` in
    ``bins`` equal-width bins on [0, 1], shape ``(ΠG_i, 2, bins)`` (the same array twice
    without weights). Counts are exact; weighted sums are added block by block.
    """
    y = np.asarray(label)
    n = y.shape[0]
    codes = [(np.asarray(c), int(g)) for c, g in codes]
    for c, _ in codes:
        if c.shape != (n,):
            raise DataContractError("codes, label and prediction must have the same length")
    if np.shape(prediction) != (n,):
        raise DataContractError("codes, label and prediction must have the same length")
    total = 1
    for _, g in codes:
        total *= g
    if total >= 2**62:
        raise DataContractError("too many possible group combinations to encode")
    cells = 2 * total  # (cell, label)
    k = 2 * cells if hard else cells  # hard: (cell, label, prediction)
    dtype = index_dtype(k - 1)
    hist_cells = cells * bins if bins is not None else 0
    hdtype = index_dtype(hist_cells - 1) if bins is not None else None
    step = max(CHUNK_ROWS, k, hist_cells)  # a block's bincount is never longer than the block
    p = np.asarray(prediction)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    s = None if bins is None else np.asarray(score)
    names = _block_sums(hard, w is not None)
    acc = {name: np.zeros(k, dtype=np.int64 if name == "n" else np.float64) for name in names}
    hist: np.ndarray | None = None
    hist2: np.ndarray | None = None
    if bins is not None:
        hist = np.zeros(hist_cells, dtype=np.int64 if w is None else np.float64)
        hist2 = hist if w is None else np.zeros(hist_cells)
    for lo in range(0, n, step):
        block = slice(lo, lo + step)
        parts = [_checked_codes(c[block], g) for c, g in codes]
        idx = parts[0].astype(dtype)
        for part, (_, g) in zip(parts[1:], codes[1:], strict=True):
            idx *= g
            _add_into(idx, part)
        idx *= 2
        _add_into(idx, y[block])
        wb = None if w is None else w[block]
        if bins is not None:
            assert s is not None and hist is not None and hist2 is not None  # all set with bins
            b = np.multiply(s[block], bins, dtype=np.float64)
            np.clip(b, 0, bins - 1, out=b)
            hidx = idx.astype(hdtype)
            hidx *= bins
            np.add(hidx, b, out=hidx, casting="unsafe")  # truncation: the bin of the score
            del b
            hist += np.bincount(hidx, weights=wb, minlength=hist_cells)
            if wb is not None:  # weighted (wb is None exactly when w is)
                hist2 += np.bincount(hidx, weights=np.square(wb), minlength=hist_cells)
            del hidx
        pb = p[block]
        if hard:
            idx *= 2
            _add_into(idx, _as_bool(pb))
        for name, values in _block_values(names, pb, wb, hard):
            acc[name] += np.bincount(idx, weights=values, minlength=k)
    sums = _moment_sums(acc, total, hard, w is not None)
    if bins is None:
        return sums, None, None
    shape = (total, 2, bins)
    assert hist is not None and hist2 is not None  # allocated above when bins is given
    h = hist.reshape(shape)
    return sums, h, h if hist2 is hist else hist2.reshape(shape)


def _checked_codes(block: np.ndarray, n_groups: int) -> np.ndarray:
    """A block of group codes, checked to lie in ``0..n_groups-1`` (the cell index would
    otherwise wrap around in its small integer type)."""
    if not np.issubdtype(block.dtype, np.integer):
        raise DataContractError(f"group codes must be integers, got dtype {block.dtype}")
    if block.max() >= n_groups or (block.dtype.kind == "i" and block.min() < 0):
        raise DataContractError(f"group codes must lie in 0..{n_groups - 1}")
    return block


def _add_into(idx: np.ndarray, values: np.ndarray) -> None:
    """``idx += values`` for non-negative integer (or bool) values that fit ``idx``'s dtype;
    one-byte values are read as uint8 (no mixed-type loop)."""
    if values.dtype.itemsize == 1 and values.dtype.kind in "biu":
        values = values.view(np.uint8)
    np.add(idx, values, out=idx, casting="unsafe")


def _block_sums(hard: bool, weighted: bool) -> tuple[str, ...]:
    """Statistics bincounted per block: with hard predictions over (cell, label, prediction)
    the row count and Σw, Σw² (the others are their ŷ=1 parts); otherwise over (cell, label)."""
    if hard:
        return ("n", "w", "w2") if weighted else ("n",)
    return ("n", "w", "wp", "w2", "w2p", "w2p2") if weighted else ("n", "wp", "w2p2")


def _block_values(names: tuple[str, ...], p: np.ndarray, w: np.ndarray | None, hard: bool):
    """(name, per-row values or None for counts) of one block, in ``names`` order."""
    if hard:
        yield "n", None
        if w is not None:
            yield "w", w
            yield "w2", w * w
        return
    pf = np.asarray(p, dtype=np.float64)
    yield "n", None
    if w is None:
        yield "wp", pf
        yield "w2p2", pf * pf
        return
    wp = w * pf
    yield "w", w
    yield "wp", wp
    w2 = w * w
    yield "w2", w2
    w2 *= pf  # w² p
    yield "w2p", w2
    w2 *= pf  # w² p²
    yield "w2p2", w2


def _moment_sums(
    acc: dict[str, np.ndarray], total: int, hard: bool, weighted: bool
) -> dict[str, np.ndarray]:
    """The six (cell, label) sums of :class:`GroupLabelMoments` from the bincounted ones."""
    if hard:
        n3 = acc["n"].reshape(total, 2, 2).astype(np.float64)
        w3 = acc["w"].reshape(total, 2, 2) if weighted else n3
        w23 = acc["w2"].reshape(total, 2, 2) if weighted else n3
        wp = w3[..., 1].copy()
        w2p = wp if not weighted else w23[..., 1].copy()
        sums = {"n": n3.sum(axis=2), "wp": wp, "w2p": w2p, "w2p2": w2p}
        sums["w"] = w3.sum(axis=2) if weighted else sums["n"]
        sums["w2"] = w23.sum(axis=2) if weighted else sums["n"]
        return sums
    sums = {name: a.reshape(total, 2).astype(np.float64, copy=False) for name, a in acc.items()}
    if not weighted:
        sums |= {"w": sums["n"], "w2": sums["n"], "w2p": sums["wp"]}
    return sums


def binary_cell_counts(
    in_a: np.ndarray, label: np.ndarray, prediction: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows per (y, ŷ) cell — TN, FP, FN, TP — of group A (``in_a``) and of group B (the rest).

    All three arrays hold 0/1 values (bool or integers; a float prediction counts non-zero as
    positive). Counted with ``np.count_nonzero`` of their conjunctions, block by block, and
    inclusion–exclusion: with G, Y, P the indicators, A's TP = #(G∧Y∧P), FN = #(G∧Y) − TP,
    FP = #(G∧P) − TP, TN = #G − #(G∧Y) − #(G∧P) + TP (the same for all rows without G).
    Returns two int64 arrays of shape (4,).
    """
    n = np.shape(label)[0]
    c = np.zeros(7, dtype=np.int64)  # #G, #Y, #P, #GY, #GP, #YP, #GYP
    for lo in range(0, n, CHUNK_ROWS):
        block = slice(lo, lo + CHUNK_ROWS)
        g, yb, pb = (_as_bool(a[block]) for a in (in_a, label, prediction))
        gy = g & yb
        yp = yb & pb
        c += (
            np.count_nonzero(g),
            np.count_nonzero(yb),
            np.count_nonzero(pb),
            np.count_nonzero(gy),
            np.count_nonzero(g & pb),
            np.count_nonzero(yp),
            np.count_nonzero(gy & pb),
        )
    ng, ny, np_, ngy, ngp, nyp, ngyp = (int(v) for v in c)
    a = np.array([ng - ngy - ngp + ngyp, ngp - ngyp, ngy - ngyp, ngyp], dtype=np.int64)
    pooled = np.array([n - ny - np_ + nyp, np_ - nyp, ny - nyp, nyp], dtype=np.int64)
    return a, pooled - a


def _as_bool(block: np.ndarray) -> np.ndarray:
    """A block of 0/1 values as bool: itself, a view of one-byte integers, else ``!= 0``."""
    if block.dtype == np.bool_:
        return block
    if block.dtype.itemsize == 1 and block.dtype.kind in "iu":
        return block.view(np.bool_)
    return block != 0
