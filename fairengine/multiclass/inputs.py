"""Input contract of the multiclass statistics: one check at the public boundary.

A multiclass audit sees, per row, a true class code y ∈ 0..K−1 (``classes`` names the K
classes), a prediction, a group code in 0..G−1 with G category labels, and optionally a
non-negative sample weight. The prediction is either

* a 1-D array of **predicted class codes** ŷ ∈ 0..K−1, or
* an (n, K) **probability matrix** (rows non-negative, summing to 1 within 1e-6), read by
  ``probabilities``:

  - ``"argmax"`` (default): the predicted class is argmax_c P_ic, ties to the lowest code
    (``numpy.argmax``), and everything below is computed on hard predictions;
  - ``"expected"``: expected counts, q_ic = P_ic in place of the indicator 1{ŷ_i = c}
    (LiFT's "generalized prediction count distribution", lift-semantics §1.2, per class).

Every row then carries q_i ∈ [0, 1]^K with Σ_c q_ic = 1 (the one-hot of ŷ_i for hard
predictions). Every public function of :mod:`fairengine.multiclass` passes its arguments
through :func:`check_inputs`, whose errors (:class:`~fairengine.errors.DataContractError`) name
the array and say what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError
from fairengine.scores import ROW_SUM_TOLERANCE

PROBABILITY_MODES: tuple[str, ...] = ("argmax", "expected")


@dataclass(frozen=True)
class MulticlassInputs:
    """Checked inputs: int64 ``y`` (true class codes) and ``codes`` (group codes), the class and
    category labels, ``predicted`` (int64 class codes; None for expected counts),
    ``probability`` ((n, K) float64; None for hard predictions) and float64 ``weights`` (None:
    unweighted); ``sizes[g]`` is the row count of group g."""

    y: np.ndarray
    predicted: np.ndarray | None
    probability: np.ndarray | None
    codes: np.ndarray
    classes: tuple[str, ...]
    categories: tuple[str, ...]
    weights: np.ndarray | None
    sizes: tuple[int, ...]

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def hard(self) -> bool:
        """Whether the rows hold predicted classes (else expected counts)."""
        return self.predicted is not None

    @property
    def unit_cells(self) -> bool:
        """Whether the rows are interchangeable within their (y, ŷ) cell: unweighted hard
        predictions, the case of exact cell-count permutations."""
        return self.predicted is not None and self.weights is None


def _labels(name: str, values: Sequence[object]) -> tuple[str, ...]:
    labels = tuple(str(c) for c in values)
    if len(labels) == 0:
        raise DataContractError(f"{name} must name at least one label")
    if len(set(labels)) != len(labels):
        raise DataContractError(f"{name} must be distinct labels, got {list(labels)}")
    return labels


def _codes(name: str, values: object, n: int | None, k: int, what: str) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        want = "one per row" if n is None else f"one per row ({n})"
        raise DataContractError(
            f"{name} must be a 1-D array of {what} codes, {want}, got {a.shape}"
        )
    if a.dtype.kind not in "iu":
        ok = a.dtype.kind == "f" and bool(np.all(np.isfinite(a))) and bool(np.all(a == np.round(a)))
        if not ok:
            bad = ""
            if a.dtype.kind == "f":
                nan = ~np.isfinite(a)
                if nan.any():
                    bad = f"; {int(nan.sum())} NaN/infinite value(s), the first at row "
                    bad += str(int(np.flatnonzero(nan)[0]))
            raise DataContractError(
                f"{name} must hold integer {what} codes 0..{k - 1}, got dtype {a.dtype}{bad}"
            )
    c = a.astype(np.int64, copy=False)
    if c.size and (c.min() < 0 or c.max() >= k):
        out = np.flatnonzero((c < 0) | (c >= k))
        raise DataContractError(
            f"{name} must hold {what} codes 0..{k - 1}: {out.size} value(s) out of range, the "
            f"first {int(c[out[0]])} at row {int(out[0])}"
        )
    return c


def _probability(values: np.ndarray, n: int, k: int) -> np.ndarray:
    if values.dtype.kind not in "biuf":
        raise DataContractError(f"prediction must be numeric, got dtype {values.dtype}")
    p = values.astype(np.float64, copy=False)
    if p.shape != (n, k):
        raise DataContractError(
            f"prediction as a probability matrix must have shape (rows, classes) = ({n}, {k}), "
            f"got {p.shape}"
        )
    bad = ~np.isfinite(p)
    if bad.any():
        r = int(np.flatnonzero(bad.any(axis=1))[0])
        raise DataContractError(
            f"prediction must hold finite probabilities: {int(bad.sum())} NaN/infinite "
            f"value(s), the first in row {r}"
        )
    neg = p < 0
    if neg.any():
        r = int(np.flatnonzero(neg.any(axis=1))[0])
        raise DataContractError(
            f"prediction must hold probabilities >= 0; row {r} has {p[r].tolist()}"
        )
    sums = p.sum(axis=1)
    off = np.abs(sums - 1.0) > ROW_SUM_TOLERANCE
    if off.any():
        r = int(np.flatnonzero(off)[0])
        raise DataContractError(
            f"prediction rows must sum to 1 (within {ROW_SUM_TOLERANCE:g}): {int(off.sum())} "
            f"row(s) do not, the first row {r} sums to {float(sums[r])!r}"
        )
    return p


def check_inputs(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    classes: Sequence[object],
    weights: object | None = None,
    *,
    probabilities: str = "argmax",
    min_group_size: int = 1,
) -> MulticlassInputs:
    """Validate the rows of a multiclass audit (module docstring).

    ``y`` and a 1-D ``prediction`` hold class codes 0..K−1 indexing ``classes``; a 2-D
    ``prediction`` is an (n, K) probability matrix read as ``probabilities`` says. ``groups``
    holds codes 0..G−1 indexing ``categories``; each group needs ``min_group_size`` rows (of
    positive weight, when weighted).
    """
    if probabilities not in PROBABILITY_MODES:
        raise DataContractError(
            f"probabilities must be one of {list(PROBABILITY_MODES)}, got {probabilities!r}"
        )
    cls = _labels("classes", classes)
    cats = _labels("categories", categories)
    k = len(cls)
    if k < 2:
        raise DataContractError(f"classes must name at least two classes, got {list(cls)}")
    ya = _codes("y", y, None, k, "class")
    n = ya.shape[0]
    pa = np.asarray(prediction)
    predicted: np.ndarray | None
    probability: np.ndarray | None
    if pa.ndim == 2:
        probability = _probability(pa, n, k)
        if probabilities == "argmax":
            predicted, probability = np.argmax(probability, axis=1).astype(np.int64), None
        else:
            predicted = None
    else:
        predicted, probability = _codes("prediction", pa, n, k, "predicted class"), None
    codes = _codes("groups", groups, n, len(cats), "group")
    w = None
    if weights is not None:
        w = np.asarray(weights)
        if w.dtype.kind not in "biuf" or w.ndim != 1 or w.shape[0] != n:
            raise DataContractError(
                f"weights must be a 1-D numeric array with one value per row ({n}), got "
                f"dtype {w.dtype}, shape {w.shape}"
            )
        w = w.astype(np.float64, copy=False)
        bad = ~np.isfinite(w)
        if bad.any():
            raise DataContractError(
                f"weights must be finite: {int(bad.sum())} NaN/infinite value(s), the first at "
                f"row {int(np.flatnonzero(bad)[0])}"
            )
        if np.any(w < 0):
            raise DataContractError("weights must be non-negative")
    sizes = tuple(int(c) for c in np.bincount(codes, minlength=len(cats)))
    positive = (
        sizes
        if w is None
        else tuple(int(c) for c in np.bincount(codes[w > 0], minlength=len(cats)))
    )
    for code, (cat, pos) in enumerate(zip(cats, positive, strict=True)):
        if pos < min_group_size:
            what = "row(s)" if w is None else "row(s) of positive weight"
            raise DataContractError(
                f"group {cat!r} (code {code}) has {pos} {what} in groups; multiclass "
                f"statistics need at least {min_group_size} per group"
            )
    return MulticlassInputs(ya, predicted, probability, codes, cls, cats, w, sizes)
