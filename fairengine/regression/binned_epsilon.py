"""ε-differential fairness of a regression model's predictions on a documented discretisation.

Foulds, Islam, Keya & Pan (2020), "An intersectional definition of fairness" (ICDE), define
ε-differential fairness for any finite outcome set; a real-valued prediction ŷ becomes one by
binning: with edges e_1 < … < e_{B−1}, bin b(ŷ) = #{j : e_j ≤ ŷ}, so bin 0 is ŷ < e_1 and bin
B−1 is ŷ ≥ e_{B−1}. The edges are the user's (``bins`` a list of numbers) or the pooled
predictions' quantiles at 1/B, …, (B−1)/B (``bins`` an integer B; equal quantiles collapse, so
heavily tied predictions may give fewer bins, stated in the result). Then

    ε = max_b max_{s, s'} |ln P(b(ŷ) = b | s) − ln P(b(ŷ) = b | s')|

over the groups s of each protected attribute and over the intersections of all of them
(:func:`fairengine.intersection.intersect_groups`), with the smoothed (Dirichlet posterior mean)
estimator and, with ``n_draws`` > 0, its Dirichlet posterior interval:
:func:`fairengine.multiclass.epsilon.differential_fairness` on the bin codes. ε depends on the
discretisation (finer bins, larger ε): compare audits at the same ``bins``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from fairengine.dataset import GroupEncoding
from fairengine.errors import DataContractError
from fairengine.intersection import intersect_groups
from fairengine.multiclass.epsilon import MulticlassEpsilon, differential_fairness


def bin_edges(prediction: np.ndarray, bins: int | Sequence[float]) -> np.ndarray:
    """The bin edges (module docstring): the user's, sorted and distinct, or the pooled
    quantiles (duplicates removed)."""
    if isinstance(bins, int | np.integer):
        if isinstance(bins, bool) or bins < 2:
            raise DataContractError(f"bins must be a whole number >= 2, got {bins!r}")
        qs = np.arange(1, int(bins)) / int(bins)
        edges = np.unique(np.quantile(prediction, qs))
        if edges.size == 0 or (edges.size == 1 and np.all(prediction >= edges[0])):
            raise DataContractError(
                "the predictions take too few distinct values to bin them into quantiles; "
                "give the bin edges (methods.regression_metrics.epsilon_bins: [e1, e2, ...])"
            )
    else:
        edges = np.asarray(list(bins), dtype=np.float64)
        if edges.size == 0 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
            raise DataContractError(
                f"bins must be a whole number >= 2 or increasing finite edges, got {bins!r}"
            )
    return edges


def bin_labels(edges: np.ndarray) -> tuple[str, ...]:
    """``< e1``, ``[e1, e2)``, …, ``>= e_last`` (4 significant digits)."""
    e = [f"{v:.4g}" for v in edges]
    inner = [f"[{a}, {b})" for a, b in itertools.pairwise(e)]
    return (f"< {e[0]}", *inner, f">= {e[-1]}")


def binned_epsilons(
    prediction: np.ndarray,
    groups: Sequence[GroupEncoding],
    *,
    bins: int | Sequence[float] = 5,
    weights: np.ndarray | None = None,
    concentration: float = 1.0,
    n_draws: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> tuple[MulticlassEpsilon, ...]:
    """ε of the binned predictions for each attribute of ``groups`` and, with two or more, for
    their intersection (last), each a :class:`MulticlassEpsilon` whose classes are the bins."""
    pred = np.asarray(prediction, dtype=np.float64)
    edges = bin_edges(pred, bins)
    codes = np.searchsorted(edges, pred, side="right")
    labels = bin_labels(edges)
    parts = list(groups)
    encodings = [*parts, intersect_groups(parts).encoding] if len(parts) > 1 else parts
    return tuple(
        differential_fairness(
            codes,
            codes,
            enc.codes.astype(np.intp),
            enc.categories,
            labels,
            weights=weights,
            concentration=concentration,
            n_draws=n_draws,
            confidence_level=confidence_level,
            seed=np.random.SeedSequence(int(seed), spawn_key=(i,)),
            attribute=enc.attribute,
        )
        for i, enc in enumerate(encodings)
    )
