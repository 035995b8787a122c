"""Westfall–Young step-down maxT and minP adjusted p-values from a joint permutation matrix.

Holm's procedure controls the family-wise error rate (FWER) under any dependence, and pays for
that generality: FairEngine's permutation tests are strongly dependent (every pair of groups of
one attribute shares rows; TPR, FPR and positive-rate gaps are computed on the same rows). The
resampling step-down procedures of Westfall & Young (1993, *Resampling-Based Multiple Testing*;
Algorithm 2.8 for maxT, and its minP analogue) use the **joint** permutation distribution of all
test statistics instead, so they adapt to the dependence: with perfectly dependent tests the maxT
adjusted p-value equals the raw one, where Holm multiplies by m.

Input: ``observed`` (m,) statistics t_1..t_m and ``permuted`` (B, m) statistics t_{b,j}, where
row b was computed from **one** permutation π_b of the group labels applied to every test of
the family (see ``docs/maxt.md``). With ``alternative`` two-sided, greater or less, each
statistic s is first mapped to its "extremeness" |s|, s or −s; below, t means the mapped value.

**maxT** (Ge, Dudoit & Speed 2003, TEST 12:1–77, Box 2). Order the tests so that
t_(1) ≥ t_(2) ≥ … ≥ t_(m) (ties in input order). For each permutation b, the successive maxima
u_{b,j} = max_{k ≥ j} t_{b,(k)} (a cumulative maximum from the right along the sorted columns).
Then

    p̃_(j) = (1 + #{b : u_{b,j} ≥ t_(j)}) / (B + 1),   p̃_(j) ← max(p̃_(1), …, p̃_(j)).

The "+1" is the identity permutation, whose statistics are the observed ones, so that
u_{0,j} = t_(j) counts once (Phipson & Smyth 2010): p̃ is never 0 and the procedure controls the
FWER exactly under the permutation null for any B, not only as B → ∞.

**minP** (Ge et al. Box 4). The raw p-value of every statistic in the (B + 1) × m matrix (the
identity row first) is computed within its column by ranking,
p_{b,j} = #{b' : t_{b',j} ≥ t_{b,j}} / (B + 1). Tests are ordered by the observed raw p-values
increasing, q_{b,j} = min_{k ≥ j} p_{b,(k)} (cumulative minimum from the right), and
p̃_(j) = #{b : q_{b,j} ≤ p_(j)} / (B + 1) followed by the cumulative maximum. minP does not need
the statistics to share a null distribution (it works on p-values), but its adjusted p-values
are coarser: they cannot go below the smallest attainable raw p-value, which needs a large B.

**Comparable statistics.** maxT compares statistics of different tests with one another, so
they must have (approximately) the same null distribution: use studentized statistics
(Z = Δ/se, as the permutation tests already do). With raw differences of rates measured on
scales that differ across metrics or pairs, the test with the widest null distribution
dominates the maximum and the others lose power (the FWER is still controlled).

**Ties.** As in :func:`fairengine.permutation.permutation_pvalue` (and scipy), a statistic
counts as at least as extreme as the observed one when it is within a relative tolerance of
100 machine epsilons: u ≥ t − γ with γ = 100 ε |t| (γ = 0 for infinite t). Tied observed
statistics get equal adjusted p-values (the cumulative maximum equalises them).

**Undefined statistics.** A NaN permuted statistic (e.g. a pseudo-group with zero variance
under that permutation) is treated as −∞: it never attains the maximum and never counts as
extreme. This keeps the permutation argument exact — −∞ is just a value of a fixed function of
the permuted data — but it differs from :func:`~fairengine.permutation.permutation_pvalue`,
which counts NaN as extreme (conservative); ``n_undefined`` reports how many there were per
test. A NaN *observed* statistic marks an untestable test: it is left out of the family (its
column is ignored) and gets NaN p-values, as :func:`fairengine.multiplicity.adjust_pvalues` does.

**Caveat: subset pivotality.** The procedures control the FWER *strongly* (under any
combination of true and false nulls) when the joint null distribution of the statistics of the
true nulls does not depend on whether the other nulls hold (Westfall & Young 1993). Under
the complete null with exchangeable group labels the control is exact. With a partial null,
permuting the labels of all groups of an attribute also mixes in the groups that do differ, so
the condition holds only approximately (asymptotically, for studentized statistics).

Cost: O(B m) memory (one reordered copy of the matrix) and O(B m) time for maxT
(O(B m log B) for minP, one sort per column).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fairengine.errors import FairEngineError

Alternative = Literal["two-sided", "greater", "less"]
ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater", "less")
#: Relative tolerance for ties, as in :func:`fairengine.permutation.permutation_pvalue`.
TIE_RTOL = 100 * np.finfo(np.float64).eps


class MaxTInputError(FairEngineError):
    """The observed vector or the permutation matrix has the wrong shape, type or values."""


@dataclass(frozen=True)
class MaxTResult:
    """Adjusted p-values of a Westfall–Young step-down procedure (input order of the tests).

    ``adjusted_pvalues`` and ``raw_pvalues`` are (m,) arrays; ``raw_pvalues`` are the marginal
    permutation p-values (1 + #{b : t_{b,j} ≥ t_j}) / (B + 1). ``order`` lists the indices of the
    tested columns in step-down order (most significant first); tests with a NaN observed
    statistic are not in it and have NaN p-values. ``n_undefined`` counts the NaN permuted
    statistics of each test. ``method`` is ``"maxT"`` or ``"minP"``.
    """

    adjusted_pvalues: np.ndarray
    raw_pvalues: np.ndarray
    order: np.ndarray
    n_permutations: int
    n_undefined: np.ndarray
    alternative: str
    method: str

    def rejected(self, alpha: float = 0.05) -> np.ndarray:
        """Boolean (m,) array: adjusted p-value ≤ ``alpha`` (False for untested columns)."""
        if not 0.0 < alpha < 1.0:
            raise MaxTInputError(f"alpha must lie in (0, 1), got {alpha!r}")
        with np.errstate(invalid="ignore"):
            return np.asarray(self.adjusted_pvalues <= alpha)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN p-values become ``None``)."""

        def floats(a: np.ndarray) -> list[float | None]:
            return [float(v) if np.isfinite(v) else None for v in a]

        return {
            "method": self.method,
            "alternative": self.alternative,
            "n_permutations": self.n_permutations,
            "adjusted_pvalues": floats(self.adjusted_pvalues),
            "raw_pvalues": floats(self.raw_pvalues),
            "order": [int(i) for i in self.order],
            "n_undefined": [int(n) for n in self.n_undefined],
        }


def maxt_adjusted_pvalues(
    observed: np.ndarray, permuted: np.ndarray, alternative: str = "two-sided"
) -> MaxTResult:
    """Westfall–Young step-down maxT adjusted p-values (Ge, Dudoit & Speed 2003, Box 2).

    ``observed``: (m,) statistics; ``permuted``: (B, m) statistics, row b computed from one
    permutation of the labels shared by all m tests. See the module docstring for the
    formula, the identity permutation, ties and NaN handling.
    """
    t_obs, extreme, tested, n_undef = _prepare(observed, permuted, alternative)
    n_perm = extreme.shape[1]
    m = t_obs.size
    raw = np.full(m, np.nan)
    adjusted = np.full(m, np.nan)
    idx = np.flatnonzero(tested)
    if idx.size:
        t = t_obs[idx]
        order_local = np.argsort(-t, kind="stable")
        order = idx[order_local]
        threshold = t[order_local] - _gamma(t[order_local])
        # (m_tested, B) in step-down order; cumulative maximum from the least extreme test up.
        u = extreme[order]
        raw[order] = (1.0 + np.count_nonzero(u >= threshold[:, None], axis=1)) / (n_perm + 1.0)
        np.maximum.accumulate(u[::-1], axis=0, out=u[::-1])
        counts = np.count_nonzero(u >= threshold[:, None], axis=1)
        adjusted[order] = np.maximum.accumulate((1.0 + counts) / (n_perm + 1.0))
    else:
        order = idx
    return MaxTResult(
        adjusted_pvalues=adjusted,
        raw_pvalues=raw,
        order=order,
        n_permutations=n_perm,
        n_undefined=n_undef,
        alternative=alternative,
        method="maxT",
    )


def minp_adjusted_pvalues(
    observed: np.ndarray, permuted: np.ndarray, alternative: str = "two-sided"
) -> MaxTResult:
    """Westfall–Young step-down minP adjusted p-values (Ge, Dudoit & Speed 2003, Box 4).

    Same input as :func:`maxt_adjusted_pvalues`. Raw p-values of every permuted statistic are
    computed within its column by ranking over the B + 1 rows (identity included), in integer
    counts c_{b,j} = (B + 1) p_{b,j}; tests are ordered by the observed p-values increasing
    (ties by the observed statistic decreasing, then input order).
    """
    t_obs, extreme, tested, n_undef = _prepare(observed, permuted, alternative)
    n_perm = extreme.shape[1]
    m = t_obs.size
    raw = np.full(m, np.nan)
    adjusted = np.full(m, np.nan)
    idx = np.flatnonzero(tested)
    if idx.size:
        # counts[j, b]: rows of column j at least as extreme as row b (row 0 = identity).
        counts = np.empty((idx.size, n_perm + 1), dtype=np.int64)
        for r, j in enumerate(idx):
            col = np.concatenate(([t_obs[j]], extreme[j]))
            ranked = np.sort(col)
            counts[r] = col.size - np.searchsorted(ranked, col - _gamma(col), side="left")
        c_obs = counts[:, 0]
        raw[idx] = c_obs / (n_perm + 1.0)
        order_local = np.lexsort((np.arange(idx.size), -t_obs[idx], c_obs))
        order = idx[order_local]
        q = counts[order_local]
        np.minimum.accumulate(q[::-1], axis=0, out=q[::-1])
        hits = np.count_nonzero(q <= c_obs[order_local][:, None], axis=1)
        adjusted[order] = np.maximum.accumulate(hits / (n_perm + 1.0))
    else:
        order = idx
    return MaxTResult(
        adjusted_pvalues=adjusted,
        raw_pvalues=raw,
        order=order,
        n_permutations=n_perm,
        n_undefined=n_undef,
        alternative=alternative,
        method="minP",
    )


# ----------------------------------------------------------------------------- internals


def _gamma(t: np.ndarray) -> np.ndarray:
    """Tie tolerance 100 ε |t| (0 where t is infinite)."""
    return np.where(np.isfinite(t), TIE_RTOL * np.abs(t), 0.0)


def _prepare(
    observed: Any, permuted: Any, alternative: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Check the input; return mapped observed (m,), mapped permuted (m, B) with NaN → −∞,
    the tested mask (observed not NaN) and the NaN count per column."""
    if alternative not in ALTERNATIVES:
        raise MaxTInputError(
            f"alternative must be one of {list(ALTERNATIVES)}, got {alternative!r}"
        )
    try:
        obs = np.asarray(observed, dtype=np.float64)
        perm = np.asarray(permuted, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MaxTInputError(
            f"observed and permuted must be numeric arrays of statistics ({exc})"
        ) from None
    if obs.ndim != 1:
        raise MaxTInputError(f"observed must be a 1-D array (m,), got shape {obs.shape}")
    if perm.ndim != 2 or perm.shape[1] != obs.size:
        raise MaxTInputError(
            f"permuted must be a 2-D array (B, m) with m = {obs.size} columns (one per "
            f"observed statistic), got shape {perm.shape}"
        )
    if perm.shape[0] < 1:
        raise MaxTInputError("permuted must hold at least one permutation (B ≥ 1 rows)")
    n_undef = np.count_nonzero(np.isnan(perm), axis=0)
    # (m, B) layout: the step-down runs along axis 0 over contiguous rows of B permutations.
    ext = np.array(perm.T, dtype=np.float64, order="C")
    obs = obs.copy()
    if alternative == "two-sided":
        np.abs(ext, out=ext)
        np.abs(obs, out=obs)
    elif alternative == "less":
        np.negative(ext, out=ext)
        np.negative(obs, out=obs)
    ext[np.isnan(ext)] = -np.inf
    return obs, ext, ~np.isnan(obs), n_undef
