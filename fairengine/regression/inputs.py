"""Input contract of the regression statistics: one check at the public boundary.

A regression audit sees, per row, a target y (real, or 0/1), a prediction ŷ (real), a group code
in 0..G−1 with G category labels, and optionally a non-negative sample weight. Every public
function of :mod:`fairengine.regression` passes its arguments through :func:`check_inputs`, whose
errors (:class:`~fairengine.errors.DataContractError`) name the array and say what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError

#: Fewest rows a group may have: a variance needs two.
MIN_GROUP_SIZE = 2


@dataclass(frozen=True)
class RegressionInputs:
    """Checked inputs: float64 ``y``/``prediction``, int64 ``codes``, the category labels and
    float64 ``weights`` (None: unweighted); ``sizes[g]`` is the row count of group g."""

    y: np.ndarray
    prediction: np.ndarray
    codes: np.ndarray
    categories: tuple[str, ...]
    weights: np.ndarray | None
    sizes: tuple[int, ...]

    def rows(self, code: int) -> np.ndarray:
        """Boolean mask of group ``code``'s rows."""
        return np.asarray(self.codes == code)


def _finite_float(name: str, values: object, n: int | None) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype.kind not in "biuf":
        raise DataContractError(f"{name} must be numeric, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    if a.ndim != 1:
        raise DataContractError(f"{name} must be a 1-D array (one value per row), got {a.shape}")
    if n is not None and a.shape[0] != n:
        raise DataContractError(
            f"{name} has {a.shape[0]} rows but y has {n}: every array needs one value per row"
        )
    bad = ~np.isfinite(a)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise DataContractError(
            f"{name} must hold finite numbers: {int(bad.sum())} NaN/infinite value(s), the "
            f"first at row {first} ({a[first]})"
        )
    return a


def check_inputs(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    weights: object | None = None,
    *,
    min_group_size: int = MIN_GROUP_SIZE,
) -> RegressionInputs:
    """Validate the rows of a regression audit (module docstring).

    ``groups`` holds integer codes 0..G−1 indexing ``categories``; each group needs at least
    ``min_group_size`` rows (of positive weight, when weighted).
    """
    ya = _finite_float("y", y, None)
    n = ya.shape[0]
    p = _finite_float("prediction", prediction, n)
    cats = tuple(str(c) for c in categories)
    if len(cats) == 0:
        raise DataContractError("categories must name at least one group")
    if len(set(cats)) != len(cats):
        raise DataContractError(f"categories must be distinct labels, got {list(cats)}")
    g = np.asarray(groups)
    if g.ndim != 1 or g.shape[0] != n:
        raise DataContractError(
            f"groups must be a 1-D array of group codes with one per row ({n}), got shape {g.shape}"
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
    w = None if weights is None else _finite_float("weights", weights, n)
    if w is not None and np.any(w < 0):
        raise DataContractError("weights must be non-negative")
    sizes = tuple(int(c) for c in np.bincount(codes, minlength=len(cats)))
    for code, (cat, size) in enumerate(zip(cats, sizes, strict=True)):
        if size < min_group_size:
            raise DataContractError(
                f"group {cat!r} (code {code}) has {size} row(s) in groups; regression "
                f"statistics need at least {min_group_size} rows per group"
            )
        if w is not None:
            positive = int(np.count_nonzero(w[codes == code] > 0))
            if positive < min_group_size:
                raise DataContractError(
                    f"weights of group {cat!r} are positive on {positive} row(s); regression "
                    f"statistics need at least {min_group_size} rows of positive weight per group"
                )
    return RegressionInputs(ya, p, codes, cats, w, sizes)
