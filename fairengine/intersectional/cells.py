"""The count table over all intersections of protected attributes, and the support policy.

Every differential-fairness metric (Foulds et al. 2020; Morina et al. 2019, notes
``intersectional.md`` §1.2–1.3) depends on the data only through the count tensor

    C[s, y, ŷ] = Σ_i w_i · 1{s_i = s, y_i = y} · P(ŷ_i = ŷ),     s ∈ A_1 × … × A_p,

where the intersection id s is the flat index of the attribute codes (c_1, …, c_p) in an
L_1 × … × L_p grid (``np.ravel_multi_index``), so K = ∏ L_j. ``P(ŷ_i = 1)`` is the hard prediction
(0/1) with a threshold or the score itself without one (expected counts; the audited classifier is
then the randomised ŷ ~ Bernoulli(p)). The table is built in one ``np.bincount`` pass over the flat
index 2s + y, holds every intersection (empty ones included) and is mergeable (``a + b``), so
point estimates, bootstrap replicates and posterior draws never touch the rows again.

Weights are normalised to mean 1 over the rows, so the weighted counts are on the scale of row
counts and the smoothing (k + α)/(d + α + β) does not depend on the weights' unit.

Support policy (notes §4.2), per metric j and intersection s with denominator d_{j,s}:

* ``empty``: no rows at all (n_s = 0);
* ``unsupported``: rows, but d_{j,s} = 0 (e.g. no positives, so the TPR is undefined);
* ``sparse``: 0 < d_{j,s} < ``min_support`` (rows, not weights);
* ``ok``: otherwise.

The headline ε runs over the ``sparse`` and ``ok`` intersections (d ≥ 1, as AIF360 and Foulds'
code do); ``exclude_sparse`` drops the sparse ones, ``include_empty`` keeps all K (only the
Bayesian estimator is meaningful then: the posterior of an empty cell is the prior). No
intersection is ever imputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fairengine.errors import DataContractError

PredictionMode = Literal["hard", "expected", "none"]
SupportStatus = Literal["empty", "unsupported", "sparse", "ok"]
STATUSES: tuple[str, ...] = ("empty", "unsupported", "sparse", "ok")

#: Default caps: levels of one attribute, and intersections of the whole grid.
MAX_LEVELS = 64
MAX_INTERSECTIONS = 10_000


@dataclass(frozen=True, eq=False)
class IntersectionTable:
    """Counts ``C[s, y, ŷ]`` over every intersection s of ``attributes``.

    Attributes
    ----------
    attributes : the protected attributes, in grid order.
    levels : the category labels of each attribute (``levels[j][c]`` is code c of attribute j).
    counts : float array ``(K, 2, 2)``, the (weighted, expected) totals ``C[s, y, ŷ]``; with no
        predictions (``prediction == "none"``) everything sits in ``ŷ = 0``.
    rows : float array ``(K, 2, 2)``, the same without weights (row counts; fractional in the
        expected mode), used for support and as sample sizes by the resampling estimators.
    weighted : whether the rows carried weights (normalised to mean 1).
    prediction : ``hard`` (thresholded), ``expected`` (probabilities) or ``none`` (labels only).
    """

    attributes: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    counts: np.ndarray
    rows: np.ndarray
    weighted: bool
    prediction: PredictionMode

    @property
    def shape(self) -> tuple[int, ...]:
        """Grid shape (L_1, …, L_p)."""
        return tuple(len(lv) for lv in self.levels)

    @property
    def n_intersections(self) -> int:
        return int(self.counts.shape[0])

    @property
    def n_rows(self) -> float:
        return float(self.rows.sum())

    @property
    def has_predictions(self) -> bool:
        return self.prediction != "none"

    def labels(self) -> list[tuple[str, ...]]:
        """The level tuple of each intersection id s = 0..K−1."""
        codes = np.unravel_index(np.arange(self.n_intersections), self.shape)
        return [
            tuple(self.levels[j][codes[j][s]] for j in range(len(self.levels)))
            for s in range(self.n_intersections)
        ]

    def names(self, sep: str = " × ") -> list[str]:
        """Readable names, e.g. ``"Female × ≤25 × Black"``."""
        return [sep.join(t) for t in self.labels()]

    def sizes(self) -> np.ndarray:
        """Row count n_s of each intersection (unweighted)."""
        return self.rows.sum(axis=(1, 2))

    def marginal(self, attributes: Sequence[str]) -> IntersectionTable:
        """The table of a subset of the attributes (the others summed out).

        Coarser groups are unions of intersections, so their counts are sums of cells; this is
        what makes every marginal rate a convex combination of intersection rates (§1.3).
        """
        keep = [self._axis(a) for a in attributes]
        if len(set(keep)) != len(keep) or not keep:
            raise DataContractError(
                f"marginal attributes must be distinct and non-empty, got {list(attributes)}"
            )
        return IntersectionTable(
            attributes=tuple(self.attributes[k] for k in keep),
            levels=tuple(self.levels[k] for k in keep),
            counts=collapse_counts(self.counts, self.shape, keep),
            rows=collapse_counts(self.rows, self.shape, keep),
            weighted=self.weighted,
            prediction=self.prediction,
        )

    def __add__(self, other: IntersectionTable) -> IntersectionTable:
        """Merge the tables of two partitions of the rows (same attributes and levels)."""
        if (self.attributes, self.levels, self.prediction, self.weighted) != (
            other.attributes,
            other.levels,
            other.prediction,
            other.weighted,
        ):
            raise DataContractError(
                "can only add intersection tables with the same attributes, levels, prediction "
                "mode and weighting"
            )
        return IntersectionTable(
            self.attributes,
            self.levels,
            self.counts + other.counts,
            self.rows + other.rows,
            self.weighted,
            self.prediction,
        )

    def _axis(self, attribute: str) -> int:
        try:
            return self.attributes.index(attribute)
        except ValueError:
            raise DataContractError(
                f"attribute {attribute!r} is not in this table (attributes {list(self.attributes)})"
            ) from None


def collapse_counts(counts: np.ndarray, shape: Sequence[int], keep: Sequence[int]) -> np.ndarray:
    """Sum a count array ``(..., K, 2, 2)`` over the grid axes not in ``keep``.

    ``shape`` is the grid (L_1, …, L_p) with K = ∏ L_j; the result has shape
    ``(..., K', 2, 2)`` with K' = ∏_{j ∈ keep} L_j, in the order of ``keep``. Works on a leading
    replicate axis, so bootstrap replicates of marginal tables come from the same draws.
    """
    lead = counts.shape[:-3]
    grid = counts.reshape((*lead, *shape, 2, 2))
    nl = len(lead)
    drop = tuple(nl + j for j in range(len(shape)) if j not in keep)
    out = grid.sum(axis=drop) if drop else grid
    kept_sorted = sorted(keep)
    if list(keep) != kept_sorted:  # reorder the kept grid axes to the requested order
        perm = [kept_sorted.index(k) for k in keep]
        out = np.moveaxis(out, [nl + p for p in perm], [nl + i for i in range(len(keep))])
    k_new = int(np.prod([shape[j] for j in keep]))
    return out.reshape((*lead, k_new, 2, 2))


def check_levels(
    attributes: Sequence[str],
    n_levels: Sequence[int],
    *,
    max_levels: int = MAX_LEVELS,
    max_intersections: int = MAX_INTERSECTIONS,
    where: str = "methods.intersectional",
) -> None:
    """Raise a clear :class:`DataContractError` when the grid is too fine to audit.

    An attribute with more than ``max_levels`` levels (e.g. an unbinned age or a zip code), or a
    grid with more than ``max_intersections`` cells, makes most intersections empty or tiny: every
    ε would be driven by noise. The message names the attribute and the cap to raise.
    """
    for a, n in zip(attributes, n_levels, strict=True):
        if n > max_levels:
            raise DataContractError(
                f"protected attribute {a!r} has {n} levels, more than {where}.max_levels="
                f"{max_levels}; bin or merge its levels (e.g. give {where}.bins.{a} edges) or "
                f"raise {where}.max_levels"
            )
    k = int(np.prod([int(n) for n in n_levels], dtype=np.float64))
    if k > max_intersections:
        shown = " × ".join(f"{a} ({n})" for a, n in zip(attributes, n_levels, strict=True))
        raise DataContractError(
            f"the intersections of {shown} form {k} cells, more than {where}.max_intersections="
            f"{max_intersections}; audit fewer attributes, bin their levels or raise the cap"
        )


def table_from_arrays(
    attributes: Sequence[str],
    levels: Sequence[Sequence[str]],
    codes: Sequence[np.ndarray],
    label: np.ndarray,
    prediction: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    *,
    hard: bool = True,
    max_levels: int = MAX_LEVELS,
    max_intersections: int = MAX_INTERSECTIONS,
) -> IntersectionTable:
    """Build the :class:`IntersectionTable` from per-row arrays in one pass.

    Parameters
    ----------
    attributes : attribute names; ``levels[j]`` the labels of attribute j's codes.
    codes : one integer array per attribute with values in ``0..len(levels[j])−1``.
    label : 0/1 outcomes.
    prediction : P(ŷ = 1) per row in [0, 1] (0/1 when ``hard``), or ``None`` (labels only).
    weights : optional non-negative sample weights (normalised to mean 1 here).
    hard : whether ``prediction`` is thresholded (0/1).
    max_levels, max_intersections : caps, see :func:`check_levels`.
    """
    attributes = tuple(str(a) for a in attributes)
    levels_t = tuple(tuple(str(v) for v in lv) for lv in levels)
    if not attributes:
        raise DataContractError("at least one protected attribute is needed for intersections")
    if len(levels_t) != len(attributes) or len(codes) != len(attributes):
        raise DataContractError("attributes, levels and codes must have the same length")
    n_levels = [len(lv) for lv in levels_t]
    check_levels(attributes, n_levels, max_levels=max_levels, max_intersections=max_intersections)
    y = np.asarray(label)
    n = y.shape[0]
    if y.ndim != 1 or not np.isin(y, (0, 1)).all():
        raise DataContractError("label must be a one-dimensional 0/1 array")
    cols = []
    for a, c, L in zip(attributes, codes, n_levels, strict=True):
        c = np.asarray(c)
        if c.shape != (n,):
            raise DataContractError(f"codes of {a!r} must have one entry per row ({n})")
        if n and (not np.issubdtype(c.dtype, np.integer) or c.min() < 0 or c.max() >= L):
            raise DataContractError(f"codes of {a!r} must be integers in 0..{L - 1}")
        cols.append(c.astype(np.intp))
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,):
            raise DataContractError(f"weights must have one entry per row ({n})")
        bad = ~np.isfinite(w) | (w < 0)
        if bad.any():
            raise DataContractError(
                f"weights must be finite and non-negative; {int(bad.sum())} value(s) are not "
                f"(e.g. {w[bad][:3].tolist()})"
            )
        if not w.sum() > 0:
            raise DataContractError("weights sum to zero; no row carries weight")
        w = w * (n / w.sum())
    p = None
    if prediction is not None:
        p = np.asarray(prediction, dtype=np.float64)
        if p.shape != (n,) or not np.all((p >= 0) & (p <= 1)):
            raise DataContractError("prediction must be one value in [0, 1] per row")
        if hard and not np.isin(p, (0.0, 1.0)).all():
            raise DataContractError("hard predictions must be 0/1; pass hard=False for scores")
    k = int(np.prod(n_levels))
    s = np.ravel_multi_index(cols, n_levels) if n else np.zeros(0, np.intp)
    idx = 2 * s + y.astype(np.intp)
    rows = _cells(idx, None, p, k)
    counts = rows if w is None else _cells(idx, w, p, k)
    if not rows.sum() > 0:
        raise DataContractError("the intersection table is empty: no rows to audit")
    mode: PredictionMode = "none" if p is None else ("hard" if hard else "expected")
    return IntersectionTable(attributes, levels_t, counts, rows, w is not None, mode)


def _cells(idx: np.ndarray, w: np.ndarray | None, p: np.ndarray | None, k: int) -> np.ndarray:
    """(K, 2, 2) totals: Σ w over (s, y), split by P(ŷ=1)."""
    tot = np.bincount(idx, weights=w, minlength=2 * k).astype(np.float64)
    pos = (
        np.zeros_like(tot)
        if p is None
        else np.bincount(idx, weights=p if w is None else w * p, minlength=2 * k)
    )
    return np.stack([tot - pos, pos], axis=-1).reshape(k, 2, 2)


def support_status(
    rows_denominator: np.ndarray, n_rows: np.ndarray, min_support: int = 30
) -> np.ndarray:
    """Status per intersection (see the module docstring): array of ``STATUSES`` strings."""
    d = np.asarray(rows_denominator, dtype=np.float64)
    n = np.asarray(n_rows, dtype=np.float64)
    out = np.full(d.shape, "ok", dtype=object)
    out[d < min_support] = "sparse"
    out[d <= 0] = "unsupported"
    out[n <= 0] = "empty"
    return out


def auditable_mask(
    status: np.ndarray, *, exclude_sparse: bool = False, include_empty: bool = False
) -> np.ndarray:
    """Which intersections enter ε: ``sparse``/``ok`` by default (d ≥ 1), see the policy."""
    keep = np.isin(status, ("ok",) if exclude_sparse else ("ok", "sparse"))
    if include_empty:
        keep |= np.isin(status, ("empty", "unsupported"))
    return keep
