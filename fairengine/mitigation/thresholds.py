r"""Deterministic per-intersection thresholds under an ε constraint: the window sweep.

Thresholds-only RTDP (p = 0, q = 1; notes ``intersectional.md`` §4.6, variant 2). Each candidate
threshold g of intersection s has a rate R_{j,s}(g) per constrained rate j and a cost L_s(g). "All
rates within a factor e^{ε}" is the same as "there is a window start m_j with every R_{j,s} in
[m_j, h(m_j)]", h(m) = e^{ε} m (under ``outcomes="both"`` also 1 − (1 − m) e^{−ε}, whichever is
smaller). For fixed window starts the problem separates by intersection: each picks its cheapest
candidate inside every window, so scanning the starts gives the optimum on the candidate grid.

* One rate (``sp``, ``tpr``, ``fpr``): every candidate rate is tried as a start; the result is the
  exact optimum over the grid.
* Several rates (``eo``, or several metrics): the starts are the product of per-rate grids thinned
  to at most ``max_combinations`` combinations (quantiles of each rate's candidate values); the
  result is feasible and optimal over those starts, and flagged ``exact = False``.

Window starts are at least ``rate_floor`` (the all-negative rule, all rates 0, is not a solution).
Intersections a rate does not constrain (no denominator rows) just take their cheapest candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class ThresholdSearch:
    """Result of the sweep: chosen candidate index per intersection (``None`` if infeasible)."""

    index: np.ndarray | None
    loss: float
    exact: bool
    n_windows: int
    window_starts: dict[str, float]


def window_upper(m: np.ndarray, epsilon: float, outcomes: str) -> np.ndarray:
    """h(m): the largest rate allowed with smallest rate m (module docstring)."""
    e = math.exp(epsilon)
    h = e * m
    if outcomes == "both":
        h = np.minimum(h, 1.0 - (1.0 - m) / e)
    return h


def threshold_sweep(
    rate_grids: dict[str, tuple[np.ndarray, np.ndarray]],
    loss: np.ndarray,
    epsilon: float,
    *,
    outcomes: str = "positive",
    rate_floor: float = 1e-3,
    max_combinations: int = 10_000,
    chunk_elements: int = 4_000_000,
) -> ThresholdSearch:
    """Cheapest per-intersection thresholds whose rates satisfy the ε window (module docstring).

    Parameters
    ----------
    rate_grids : rate name -> (R of shape (K, G), constrained mask of shape (K,)).
    loss : (K, G) cost contribution of each candidate (summing over s gives the total cost).
    epsilon : target ε (``inf``: no constraint).
    """
    k, g = loss.shape
    free = loss.min(axis=1)
    if math.isinf(epsilon) or not rate_grids:
        return ThresholdSearch(loss.argmin(axis=1), float(free.sum()), True, 0, {})
    names = list(rate_grids)
    per_rate = max(2, int(max_combinations ** (1.0 / len(names))))
    starts = []
    exact = True
    for name in names:
        r, mask = rate_grids[name]
        vals = np.unique(r[mask])
        vals = vals[vals >= rate_floor]
        if len(names) > 1 and vals.size > per_rate:
            vals = np.unique(np.quantile(vals, np.linspace(0, 1, per_rate), method="nearest"))
            exact = False
        starts.append(vals)
    if any(s.size == 0 for s in starts):
        return ThresholdSearch(None, math.inf, exact, 0, {})
    grid = np.stack(np.meshgrid(*starts, indexing="ij"), axis=-1).reshape(-1, len(names))
    chunk = max(1, chunk_elements // max(k * g, 1))
    best_total, best_combo, best_idx = math.inf, None, None
    for lo in range(0, grid.shape[0], chunk):
        combo = grid[lo : lo + chunk]  # (c, J)
        ok = np.ones((combo.shape[0], k, g), dtype=bool)
        for j, name in enumerate(names):
            r, mask = rate_grids[name]
            m = combo[:, j][:, None, None]
            inside = (r[None] >= m) & (r[None] <= window_upper(m, epsilon, outcomes) + 1e-12)
            ok &= inside | ~mask[None, :, None]
        cost = np.where(ok, loss[None], np.inf)
        idx = cost.argmin(axis=2)  # (c, K)
        total = np.take_along_axis(cost, idx[..., None], axis=2)[..., 0].sum(axis=1)
        i = int(np.argmin(total))
        if total[i] < best_total:
            best_total, best_combo, best_idx = float(total[i]), combo[i], idx[i]
    if best_idx is None or best_combo is None:  # set together: no feasible combination
        return ThresholdSearch(None, math.inf, exact, grid.shape[0], {})
    return ThresholdSearch(
        best_idx,
        best_total,
        exact,
        grid.shape[0],
        {n: float(v) for n, v in zip(names, best_combo, strict=True)},
    )
