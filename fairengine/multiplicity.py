"""Multiplicity adjustment of p-values across all tests of an audit.

* Holm (1979) step-down: p̃_(i) = max_{j≤i} min(1, (m − j + 1) p_(j)); controls the family-wise
  error rate under any dependence.
* Benjamini–Hochberg (1995) step-up: p̃_(i) = min_{j≥i} min(1, m p_(j) / j); controls the false
  discovery rate under independence or positive regression dependence.

NaN p-values (untestable findings) stay NaN and do not count towards m.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Method = Literal["holm", "bh", "none"]
METHODS: tuple[str, ...] = ("holm", "bh", "none")
#: The audit's choices: these, plus ``maxt`` (Westfall–Young maxT inside joint permutation blocks,
#: Holm-weighted across blocks; :func:`fairengine.decisions.block_adjusted`).
AUDIT_PROCEDURES: tuple[str, ...] = (*METHODS, "maxt")


def adjust_pvalues(pvalues: np.ndarray | list[float], method: str = "holm") -> np.ndarray:
    """Adjusted p-values in the input order (see module docstring for the formulas)."""
    p = np.asarray(pvalues, dtype=np.float64)
    if method not in METHODS:
        raise ValueError(f"multiplicity method must be one of {list(METHODS)}, got {method!r}")
    if p.ndim != 1:
        raise ValueError("pvalues must be one-dimensional")
    ok = np.isfinite(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    out = np.full_like(p, np.nan)
    q = p[ok]
    m = q.size
    if m == 0 or method == "none":
        out[ok] = q
        return out
    order = np.argsort(q, kind="stable")
    sorted_p = q[order]
    rank = np.arange(1, m + 1)
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - rank + 1) * sorted_p))
    else:
        adj = np.minimum.accumulate(np.minimum(1.0, m * sorted_p / rank)[::-1])[::-1]
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out
