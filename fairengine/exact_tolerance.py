"""Exact unconditional test of a tolerance null for the difference of two binomial proportions.

For hard predictions, group i contributes k_i positives out of n_i rows, K_i ~ Bin(n_i, p_i)
independently, and the tolerance null of :mod:`fairengine.rate_gap` is

    H0: |p₁ − p₂| ≤ τ   against   H1: |p₁ − p₂| > τ      (τ ≥ 0).

It is the union of two one-sided nulls, H0+: p₁ − p₂ ≤ τ and H0−: p₁ − p₂ ≥ −τ, and each is
tested exactly, without a normal approximation (Barnard 1947; for a non-zero margin Chan 1998):

* **Statistic.** The score statistic of Farrington & Manning (1990; the Miettinen–Nurminen
  1985 statistic without their variance factor n/(n−1)) for a difference δ, the statistic of
  Chan's (1998) exact tests with a non-zero margin,

      Z_δ(k₁, k₂) = (p̂₁ − p̂₂ − δ) / √(p̃₁(1 − p̃₁)/n₁ + p̃₂(1 − p̃₂)/n₂),

  with (p̃₁, p̃₂) the maximum-likelihood estimate restricted to p₁ − p₂ = δ: the root in
  [max(0, δ), min(1, 1 + δ)] of Farrington & Manning's (1990) cubic likelihood equation, solved
  in closed (trigonometric) form and polished by a Newton step (:func:`restricted_mle`; checked
  against direct maximisation of the likelihood in the tests). For δ = 0,
  p̃₁ = p̃₂ = (k₁ + k₂)/(n₁ + n₂) and Z₀ is the pooled score (Wald) statistic. The variance is
  never 0 for δ ≠ 0; for δ = 0 it is 0 only at k₁ + k₂ ∈ {0, n₁ + n₂}, where the numerator is
  0 too, and Z₀ = 0 there. Unlike an unpooled Wald statistic, whose variance is 0 at k = 0 and
  which is therefore not monotone in the counts, Z_τ grows with k₁ and falls with k₂ (checked
  over every table of the designs in tests/test_exact_tolerance.py), so its rejection regions
  are Barnard-convex.
* **One-sided p-values.** With t⁺ = Z_τ(k₁, k₂) observed,

      p⁺ = sup_{(p₁, p₂) ∈ H0+} P_{p₁,p₂}(Z_τ(K₁, K₂) ≥ t⁺),

  and p⁻ = sup_{H0−} P(Z_{−τ} ≤ Z_{−τ}(k₁, k₂)). Relabelling successes as failures
  (k ↦ n − k, p ↦ 1 − p) maps H0− onto H0+ and Z_{−τ}(k₁, k₂) onto −Z_τ(n₁ − k₁, n₂ − k₂),
  so p⁻ is p⁺ of the table (n₁ − k₁, n₂ − k₂): both come from one statistic table (the tests
  also compute p⁻ directly from Z_{−τ}). Statistics within 10⁻¹⁰·max(1, |t|) of t count as
  ties and are included in the tail (conservative against rounding).
* **Nuisance parameter.** When the rejection region {Z_τ ≥ t} is Barnard-convex, the supremum
  over H0+ is attained on its boundary p₁ − p₂ = τ (Röhmel & Mansmann 1999, for shifted nulls
  θ₂ ≤ g(θ₁) with g non-decreasing; for δ = 0 this is Barnard's own convexity condition; not
  re-derived here), so p⁺ is a supremum over one parameter p₂ ∈ [0, 1 − τ] with p₁ = p₂ + τ
  (tests/test_exact_tolerance.py checks numerically that interior points of H0+ give smaller
  tail probabilities). The search: a grid uniform in the variance-stabilising scale
  φ = arcsin √p, ⌈8√n₂⌉ + 64 points in p₂ and ⌈8√n₁⌉ + 64 in p₁ = p₂ + τ (their union;
  spacing ≤ 0.4 standard deviations 1/(2√n) of φ̂ of either group, while the tail
  probability changes on the scale of that standard deviation), then local refinement of the
  :data:`REFINE_PEAKS` highest grid maxima that reach at least :data:`REFINE_SHARE` of the
  highest, by nested grids of 17 points, each 1/8 as wide as the last, down to a width of
  10⁻¹⁰ in p₂. Every value taken is a tail
  probability at a point of H0+, so the search can only fall short of the supremum, by the
  curvature over the last width: against an independent dense search (20,002 points plus
  bounded Brent maximisation around five maxima) the two differ by at most 5·10⁻¹³ relative
  in the tests (asserted at 10⁻⁹), and against ``scipy.stats.barnard_exact`` (τ = 0) by
  ~10⁻¹⁵ (the grid alone, without the refinement, fails both checks). The nuisance range is
  not restricted to a confidence interval (Berger & Boos 1994); the p-values are the plain
  Barnard-type suprema.
* **Two-sided p-value** for H0: |Δ| ≤ τ:

      p = min(1, 2·min(p⁺, p⁻)),

  the same construction as :mod:`fairengine.rate_gap`'s interval inversion, where each
  one-sided test runs at α/2. For τ = 0 it is an exact two-sided test of p₁ = p₂ (the
  doubled smaller one-sided p-value); for τ > 0 its size at the boundary |Δ| = τ is at most α/2
  from the side that is tight, and at most α in all cases. p = 1 for τ ≥ 1 (H0 holds for every
  pair of rates). NaN where n₁ or n₂ is 0, as in
  :func:`fairengine.rate_gap.newcombe_tolerance_pvalue`.

Exactness holds by construction: every table in the level-α rejection region has
P_θ(Z_τ ≥ t) ≤ α at every θ of H0+, and tests/test_exact_tolerance.py checks the size by full
enumeration at boundary and interior points (the Newcombe inversion exceeds α = 10⁻³ there).

**Work.** The outcome table has (n₁ + 1)(n₂ + 1) cells; the statistic is computed once for all
of them (vectorised, in blocks of rows), and each side's rejection region {Z_τ ≥ t} is kept as
runs along the rows of the larger group (:func:`reject_runs`). A tail probability at a batch of
grid points is then Σ_i P(K₁ = i)·P(K₂ ∈ run_i) (:func:`run_tail_probabilities`): the pmf
vectors of all points at once, the run masses from running sums of the pmfs or from the
binomial distribution function. This equals the matrix-product form b₁ᵀ·R·b₂ of the outer
products of the pmf vectors (:func:`tail_probabilities`, used by the tests' full enumerations;
agreement 10⁻¹⁰ relative) at a fraction of its cost for large tables (∝ runs instead of cells
per point, and no BLAS threads, which are slow on a shared 2-core machine). There is no Python
loop over cells. Tables above :data:`EXACT_MAX_CELLS` cells are refused with a ValueError.
Binomial pmfs are computed in log space (``gammaln``): ~16× faster than
``scipy.stats.binom.pmf`` for 20,000 rows and equal to it within 10⁻¹⁰ relative (tests).
Measured (median of 5, τ = 0.05) on the development machine, whose 2 cores are shared with
another engineer's jobs (±50 %; docs/group_parity.md):

    n₁ × n₂           cells        time
    10 × 30           341          2 ms
    1 × 1,000         2,002        1 ms
    30 × 300          9,331        5 ms
    100 × 140         14,241       5 ms
    200 × 200         40,401       13 ms
    30 × 3,000        93,031       15 ms
    200 × 2,000       402,201      82 ms
    800 × 800         641,601      95 ms
    1,000 × 3,000     3.0 M        0.32 s
    200 × 19,000      3.8 M        0.25 s

References: Barnard GA (1947), Significance tests for 2×2 tables, Biometrika 34:123–138.
Farrington CP, Manning G (1990), Test statistics and sample size formulae for comparative
binomial trials with null hypothesis of non-zero risk difference or non-unity relative risk,
Stat Med 9:1447–1454. Miettinen O, Nurminen M (1985), Comparative analysis of two rates, Stat
Med 4:213–226. Chan ISF (1998), Exact tests of equivalence and efficacy with a non-zero lower
bound for comparative studies, Stat Med 17:1403–1413. Röhmel J, Mansmann U (1999),
Unconditional non-asymptotic one-sided tests for independent binomial proportions when the
interest lies in showing non-inferiority and/or superiority, Biometrical J 41:149–170. Berger
RL, Boos DD (1994), P values maximised over a confidence set for the nuisance parameter, J Am
Stat Assoc 89:1012–1016.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import bdtr, bdtrc, gammaln

#: Largest outcome table (n₁ + 1)(n₂ + 1) the exact test enumerates; larger ones raise.
EXACT_MAX_CELLS = 4_000_000

#: How the p-value of an exact pair is described in findings and details.
EXACT_TEST = "exact unconditional (Farrington–Manning score)"

#: Grid density: ⌈GRID_PER_SQRT_N·√n⌉ + GRID_MIN points uniform in arcsin √p per group.
GRID_PER_SQRT_N = 8.0
GRID_MIN = 64

#: Local maxima of the grid refined, points per refinement grid, final width in p₂.
REFINE_PEAKS = 3
REFINE_POINTS = 17
REFINE_WIDTH = 1e-10
#: Only grid maxima at least REFINE_SHARE of the highest are refined: at the grid's spacing a
#: grid value falls short of its local peak by far less than half, so a lower maximum cannot
#: hold the supremum.
REFINE_SHARE = 0.5

#: Runs of a rejection region are summed from running sums of the pmf when the group along
#: them has at most this many rows per run, else from ``bdtr`` (the measured crossover).
_SUMS_PER_RUN = 6

#: Statistics within TIE_RTOL·max(1, |t|) of the observed one count as ties (in the tail).
TIE_RTOL = 1e-10

#: Cells per block of rows when the statistic table is computed.
_ROW_BLOCK_CELLS = 1 << 16

#: Floats per block of grid points (bounds the memory of the products at ~16 MB a block).
_BLOCK_FLOATS = 2_000_000

_Runs = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class ExactTolerance:
    """One exact tolerance test (module docstring).

    ``pvalue`` = min(1, 2·min(``upper``, ``lower``)); ``upper`` is p⁺ (H0+: p₁ − p₂ ≤ τ),
    ``lower`` p⁻ (H0−: p₁ − p₂ ≥ −τ); ``statistic_upper`` = Z_τ(k₁, k₂) and
    ``statistic_lower`` = Z_{−τ}(k₁, k₂); ``nuisance_upper`` / ``nuisance_lower`` the p₂ on
    the boundary p₁ − p₂ = τ (resp. −τ) where the supremum was found; ``grid_points`` the size
    of the boundary grid. All NaN (and ``grid_points`` 0) where n₁ or n₂ is 0.
    """

    pvalue: float
    upper: float
    lower: float
    statistic_upper: float
    statistic_lower: float
    nuisance_upper: float
    nuisance_lower: float
    grid_points: int


def exact_cells(n1: int, n2: int) -> int:
    """Cells (n₁ + 1)(n₂ + 1) of the outcome table the exact test enumerates."""
    return (int(n1) + 1) * (int(n2) + 1)


def exact_defined(n1: int, n2: int) -> bool:
    """Whether the exact test runs for groups of n₁ and n₂ rows: both non-empty and the outcome
    table within :data:`EXACT_MAX_CELLS`."""
    return n1 > 0 and n2 > 0 and exact_cells(n1, n2) <= EXACT_MAX_CELLS


def restricted_mle(
    k1: np.ndarray | float,
    n1: np.ndarray | float,
    k2: np.ndarray | float,
    n2: np.ndarray | float,
    delta: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood (p̃₁, p̃₂) of two binomials restricted to p₁ − p₂ = δ, |δ| < 1.

    Farrington & Manning (1990): with θ = n₂/n₁, p̃₁ is the root in
    [max(0, δ), min(1, 1 + δ)] of a·x³ + b·x² + c·x + d with a = 1 + θ,
    b = −(1 + θ + p̂₁ + θp̂₂ + δ(θ + 2)), c = δ² + δ(2p̂₁ + θ + 1) + p̂₁ + θp̂₂,
    d = −p̂₁δ(1 + δ); closed form v = b³/(27a³) − bc/(6a²) + d/(2a),
    u = sign(v)·√(b²/(9a²) − c/(3a)), w = (π + arccos(v/u³))/3, p̃₁ = 2u·cos w − b/(3a),
    then a guarded Newton step on the cubic. p̃₂ = p̃₁ − δ. δ = 0: the pooled rate.
    """
    k1, n1, k2, n2 = (np.asarray(a, dtype=np.float64) for a in (k1, n1, k2, n2))
    shape = np.broadcast_shapes(k1.shape, n1.shape, k2.shape, n2.shape)
    if not abs(delta) < 1:
        raise ValueError(f"delta must lie in (-1, 1), got {delta}")
    if delta == 0:
        pooled = np.broadcast_to((k1 + k2) / (n1 + n2), shape)
        return pooled.copy(), pooled.copy()
    r1, r2 = k1 / n1, k2 / n2
    theta = n2 / n1
    a = 1.0 + theta
    s = r1 + theta * r2  # the one full-size sum; b, c and d follow from it
    b = -(1.0 + theta + delta * (theta + 2.0)) - s
    c = delta**2 + delta * (theta + 1.0) + s + (2.0 * delta) * r1
    d = (-delta * (1.0 + delta)) * r1
    b3a = b / (3.0 * a)
    v = b3a * b3a * b3a - b3a * c / (2.0 * a) + d / (2.0 * a)  # b³/(27a³) − bc/(6a²) + d/(2a)
    u = np.sqrt(np.maximum(b3a * b3a - c / (3.0 * a), 0.0))
    u = np.where(v >= 0, u, -u)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = (np.pi + np.arccos(np.clip(v / (u * u * u), -1.0, 1.0))) / 3.0
    x = np.where(u != 0, 2.0 * u * np.cos(w), 0.0) - b3a
    lo, hi = max(0.0, delta), min(1.0, 1.0 + delta)
    x = np.clip(x, lo, hi)
    # one guarded Newton step on the cubic: the closed form loses up to ~1e-10 near double roots
    fx = ((a * x + b) * x + c) * x + d
    slope = (3.0 * a * x + 2.0 * b) * x + c
    with np.errstate(invalid="ignore", divide="ignore"):
        step = np.clip(x - fx / slope, lo, hi)
    fstep = ((a * step + b) * step + c) * step + d
    x = np.where(np.abs(fstep) < np.abs(fx), step, x)
    x = np.broadcast_to(x, shape).copy()
    return x, x - delta


def score_statistic(
    k1: np.ndarray | float,
    n1: np.ndarray | float,
    k2: np.ndarray | float,
    n2: np.ndarray | float,
    delta: float,
) -> np.ndarray:
    """Farrington–Manning score statistic Z_δ for H0: p₁ − p₂ = δ (module docstring):
    (p̂₁ − p̂₂ − δ)/√(p̃₁(1 − p̃₁)/n₁ + p̃₂(1 − p̃₂)/n₂) with the restricted MLE of
    :func:`restricted_mle`; 0 where the restricted variance is 0 (δ = 0 and k₁ + k₂ ∈ {0, n₁ +
    n₂}, where the numerator is 0 as well)."""
    k1, n1, k2, n2 = (np.asarray(a, dtype=np.float64) for a in (k1, n1, k2, n2))
    t1, t2 = restricted_mle(k1, n1, k2, n2, delta)
    var = t1 * (1.0 - t1) / n1 + t2 * (1.0 - t2) / n2
    num = k1 / n1 - k2 / n2 - delta
    with np.errstate(invalid="ignore", divide="ignore"):
        z = num / np.sqrt(var)
    return np.where(var > 0, z, 0.0)


def statistic_table(n1: int, n2: int, delta: float) -> np.ndarray:
    """Z_δ(i, j) of :func:`score_statistic` for every outcome i = 0..n₁, j = 0..n₂ (shape
    (n₁ + 1, n₂ + 1)), computed in blocks of rows of about 2¹⁶ cells (cache-sized
    temporaries: about 2× faster than one pass over a table of millions of cells)."""
    j = np.arange(n2 + 1.0)[None, :]
    out = np.empty((n1 + 1, n2 + 1))
    step = max(1, _ROW_BLOCK_CELLS // (n2 + 1))
    for s in range(0, n1 + 1, step):
        i = np.arange(s, min(s + step, n1 + 1), dtype=np.float64)[:, None]
        out[s : s + i.shape[0]] = score_statistic(i, n1, j, n2, delta)
    return out


def binomial_pmfs(n: int, p: np.ndarray | float) -> np.ndarray:
    """P(K = k) for K ~ Bin(n, p), k = 0..n, one row per entry of ``p`` (shape (len(p), n+1)).

    Log space: exp(log C(n, k) + k·log p + (n − k)·log(1 − p)), exact at p ∈ {0, 1}; equal to
    ``scipy.stats.binom.pmf`` within 10⁻¹⁰ relative (tests: the rounding of log C(n, k) for
    n = 20,000) and ~16× faster for large n.
    """
    k = np.arange(n + 1, dtype=np.float64)
    p = np.clip(np.asarray(p, dtype=np.float64).ravel(), 0.0, 1.0)
    log_comb = gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
    inner = (p > 0) & (p < 1)
    safe = np.where(inner, p, 0.5)
    out = np.multiply.outer(np.log(safe), k)
    out += np.multiply.outer(np.log1p(-safe), n - k)
    out += log_comb
    np.exp(out, out=out)
    if not inner.all():  # point masses at k = 0 (p = 0) and k = n (p = 1)
        out[~inner] = 0.0
        out[p == 0, 0] = 1.0
        out[p == 1, n] = 1.0
    return out


def tail_probabilities(
    reject: np.ndarray, p1: np.ndarray | float, p2: np.ndarray | float
) -> np.ndarray:
    """P_{p₁,p₂}((K₁, K₂) ∈ R) for the outcome set R given as a boolean (or 0/1) array of
    shape (n₁ + 1, n₂ + 1), at every pair of entries of ``p1``, ``p2`` (broadcast).

    R may also be a stack of shape (m, n₁ + 1, n₂ + 1); then the result has shape
    (m, len(p)). Each block of points is one matrix product b₁ᵀ·R and a row-wise product with
    b₂ (outer products of the pmf vectors, never a loop over cells).
    """
    r = np.asarray(reject, dtype=np.float64)
    stacked = r.ndim == 3
    r = r if stacked else r[None]
    m, rows, cols = r.shape
    n1, n2 = rows - 1, cols - 1
    q1, q2 = np.broadcast_arrays(
        np.atleast_1d(np.asarray(p1, dtype=np.float64)),
        np.atleast_1d(np.asarray(p2, dtype=np.float64)),
    )
    q1, q2 = q1.ravel(), q2.ravel()
    wide = np.concatenate(list(r), axis=1)  # (n1+1, m·(n2+1)): all sets in one product
    out = np.empty((m, q1.size))
    block = max(1, _BLOCK_FLOATS // (m * cols + cols + rows))
    for s in range(0, q1.size, block):
        b1 = binomial_pmfs(n1, q1[s : s + block])
        b2 = binomial_pmfs(n2, q2[s : s + block])
        prod = (b1 @ wide).reshape(b1.shape[0], m, cols)
        out[:, s : s + block] = np.einsum("gmj,gj->mg", prod, b2)
    out = np.clip(out, 0.0, 1.0)
    return out if stacked else out[0]


def reject_runs(reject: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The outcome set R (boolean, shape (n₁ + 1, n₂ + 1)) as maximal runs along its rows:
    arrays (row, start, end) with R[row, start:end] all True (end exclusive). A Barnard-convex
    set has at most one run per row; any set is represented exactly."""
    r = np.asarray(reject, dtype=np.int8)
    pad = np.zeros((r.shape[0], 1), dtype=np.int8)
    step = np.diff(np.concatenate([pad, r, pad], axis=1), axis=1)
    rows, starts = np.nonzero(step == 1)
    _, ends = np.nonzero(step == -1)  # row-major order pairs each end with its start
    return rows, starts, ends


def run_tail_probabilities(
    runs: tuple[np.ndarray, np.ndarray, np.ndarray],
    n1: int,
    n2: int,
    p1: np.ndarray,
    p2: np.ndarray,
) -> np.ndarray:
    """P_{p₁,p₂}((K₁, K₂) ∈ R) for R given by :func:`reject_runs`, at every pair (p1[g], p2[g]).

    The same sum as :func:`tail_probabilities`, Σ_i P(K₁ = i)·P(K₂ ∈ R_i), with each run's
    P(s ≤ K₂ < e) taken from the distribution function of K₂ instead of a product with the
    indicator: from running sums of its pmf (forward for runs from 0, backward for runs to n₂,
    so the usual prefix and suffix runs carry no cancellation) when n₂ + 1 is at most
    ``_SUMS_PER_RUN`` times the number of runs, else from ``scipy.special.bdtr`` / ``bdtrc``
    at the run ends only. Work per grid point ∝ n₂ + runs or ∝ runs, against ∝ (n₁ + 1)(n₂ +
    1) for the matrix product, and no BLAS threads (whose two-thread products slowed down
    5–10× on this project's shared 2-core machine); agreement with the matrix-product form
    within 10⁻¹⁰ relative (tests).
    """
    rows, s, e = runs
    q1 = np.asarray(p1, dtype=np.float64).ravel()
    q2 = np.clip(np.asarray(p2, dtype=np.float64).ravel(), 0.0, 1.0)
    out = np.zeros(q1.size)
    if rows.size == 0:
        return out
    whole = (s == 0) & (e == n2 + 1)
    prefix = (s == 0) & ~whole
    suffix = (e == n2 + 1) & ~whole
    middle = ~(whole | prefix | suffix)
    sums = n2 + 1 <= _SUMS_PER_RUN * rows.size  # running sums cheaper than bdtr per run
    block = max(1, _BLOCK_FLOATS // (rows.size + n1 + 1 + (3 * (n2 + 2) if sums else 0)))
    for b in range(0, q1.size, block):
        c = q2[b : b + block, None]
        mass = np.ones((c.shape[0], rows.size))
        if sums:
            pmf = binomial_pmfs(n2, q2[b : b + block])
            zero = np.zeros((pmf.shape[0], 1))
            below = np.concatenate([zero, np.cumsum(pmf, axis=1)], axis=1)  # P(K < m)
            above = np.concatenate([np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
            mass[:, prefix] = below[:, e[prefix]]
            mass[:, suffix] = above[:, s[suffix]]  # P(K ≥ m)
            mass[:, middle] = below[:, e[middle]] - below[:, s[middle]]
        else:
            mass[:, prefix] = bdtr(e[prefix] - 1, n2, c)
            mass[:, suffix] = bdtrc(s[suffix] - 1, n2, c)
            if middle.any():
                mass[:, middle] = bdtr(e[middle] - 1, n2, c) - bdtr(s[middle] - 1, n2, c)
        weight = binomial_pmfs(n1, q1[b : b + block])[:, rows]
        out[b : b + block] = np.einsum("gr,gr->g", weight, mass)
    return np.clip(out, 0.0, 1.0)


def boundary_grid(n1: int, n2: int, tolerance: float) -> np.ndarray:
    """Values of p₂ on the boundary p₁ − p₂ = τ searched for the supremum (module docstring):
    uniform in arcsin √p₂ over [0, 1 − τ] and in arcsin √p₁ over [τ, 1] (mapped to p₂ = p₁ −
    τ), ⌈GRID_PER_SQRT_N·√n⌉ + GRID_MIN points each, sorted and unique."""
    g2 = math.ceil(GRID_PER_SQRT_N * math.sqrt(n2)) + GRID_MIN
    g1 = math.ceil(GRID_PER_SQRT_N * math.sqrt(n1)) + GRID_MIN
    p2 = np.sin(np.linspace(0.0, math.asin(math.sqrt(1.0 - tolerance)), g2)) ** 2
    p1 = np.sin(np.linspace(math.asin(math.sqrt(tolerance)), math.pi / 2, g1)) ** 2
    grid = np.concatenate([p2, p1 - tolerance, [0.0, 1.0 - tolerance]])
    return np.unique(np.clip(grid, 0.0, 1.0 - tolerance))


def boundary_supremum(
    tail: Callable[[np.ndarray], np.ndarray], grid: np.ndarray, top: float
) -> tuple[float, float]:
    """sup over p₂ ∈ [0, top] of ``tail`` (a vectorised function of p₂): its values on
    ``grid``, then the REFINE_PEAKS highest local maxima refined by nested grids of
    REFINE_POINTS points, each 1/8 as wide as the last, to a width of REFINE_WIDTH (module
    docstring). Returns (supremum, p₂ where it was found); every value is one ``tail`` took."""
    values = tail(grid)
    best = int(np.argmax(values))
    sup, arg = float(values[best]), float(grid[best])
    left = np.r_[-np.inf, values[:-1]]
    right = np.r_[values[1:], -np.inf]
    peaks = np.flatnonzero((values >= left) & (values >= right) & (values > 0))
    peaks = peaks[np.argsort(-values[peaks], kind="stable")][:REFINE_PEAKS]
    peaks = peaks[values[peaks] >= REFINE_SHARE * sup]  # lower ones cannot reach the top
    if peaks.size == 0 or sup >= 1.0:
        return min(sup, 1.0), arg
    last = grid.size - 1
    lo = grid[np.maximum(peaks - 1, 0)]
    hi = grid[np.minimum(peaks + 1, last)]
    rows = np.arange(peaks.size)
    for _ in range(60):
        pts = np.clip(np.linspace(lo, hi, REFINE_POINTS, axis=1), 0.0, top)  # (peaks, points)
        vals = tail(pts.ravel()).reshape(pts.shape)
        j = np.argmax(vals, axis=1)
        k = int(np.argmax(vals[rows, j]))
        if vals[k, j[k]] > sup:
            sup, arg = float(vals[k, j[k]]), float(pts[k, j[k]])
        lo = pts[rows, np.maximum(j - 1, 0)]
        hi = pts[rows, np.minimum(j + 1, REFINE_POINTS - 1)]
        if np.all(hi - lo <= REFINE_WIDTH):
            break
    return sup, arg


def _check_counts(k: int, n: int, name: str) -> None:
    if int(n) != n or n < 0:
        raise ValueError(f"{name} must be a whole number >= 0, got {n!r}")
    if int(k) != k or not 0 <= k <= n:
        raise ValueError(f"the count of group {name[-1]} must be a whole number in [0, {n}]")


def exact_tolerance_test(k1: int, n1: int, k2: int, n2: int, tolerance: float) -> ExactTolerance:
    """Exact unconditional test of H0: |p₁ − p₂| ≤ τ for k₁ of n₁ against k₂ of n₂ (module
    docstring): both one-sided p-values, their statistics and where the suprema lie.

    Raises ValueError for counts that are not whole numbers in [0, n], τ < 0 or not finite,
    and for tables above :data:`EXACT_MAX_CELLS` cells. NaN result where n₁ or n₂ is 0.
    """
    _check_counts(k1, n1, "n1")
    _check_counts(k2, n2, "n2")
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    k1, n1, k2, n2 = int(k1), int(n1), int(k2), int(n2)
    nan = float("nan")
    if n1 == 0 or n2 == 0:
        return ExactTolerance(nan, nan, nan, nan, nan, nan, nan, 0)
    cells = exact_cells(n1, n2)
    if cells > EXACT_MAX_CELLS:
        raise ValueError(
            f"the exact tolerance test of {n1} rows against {n2} enumerates {cells:,} outcome "
            f"tables, more than EXACT_MAX_CELLS = {EXACT_MAX_CELLS:,}; use the Newcombe "
            "interval inversion (fairengine.rate_gap.newcombe_tolerance_pvalue) for groups "
            "this large"
        )
    if tolerance >= 1:  # H0 holds for every pair of rates
        return ExactTolerance(1.0, 1.0, 1.0, nan, nan, nan, nan, 0)
    table = statistic_table(n1, n2, tolerance)  # Z_τ over every outcome
    observed = (table[k1, k2], table[n1 - k1, n2 - k2])  # p⁺ and, flipped, p⁻
    grid = boundary_grid(n1, n2, tolerance)
    found = []
    for t in observed:
        reject = table >= t - TIE_RTOL * max(1.0, abs(t))
        if n2 >= n1:  # runs along the larger group: fewer of them
            runs = reject_runs(reject)

            def tail(q: np.ndarray, runs: _Runs = runs) -> np.ndarray:
                return run_tail_probabilities(runs, n1, n2, q + tolerance, q)
        else:
            runs = reject_runs(reject.T)

            def tail(q: np.ndarray, runs: _Runs = runs) -> np.ndarray:
                return run_tail_probabilities(runs, n2, n1, q, q + tolerance)

        found.append(boundary_supremum(tail, grid, 1.0 - tolerance))
    (up, arg_up), (low, arg_low) = found
    return ExactTolerance(
        pvalue=min(1.0, 2.0 * min(up, low)),
        upper=up,
        lower=low,
        statistic_upper=float(observed[0]),
        statistic_lower=-float(observed[1]),  # Z_{−τ}(k) = −Z_τ(n − k)
        nuisance_upper=arg_up,
        nuisance_lower=1.0 - arg_low,  # p⁻ was searched on the relabelled scale q = 1 − p
        grid_points=int(grid.size),
    )


def exact_tolerance_pvalue(k1: int, n1: int, k2: int, n2: int, tolerance: float) -> float:
    """p-value min(1, 2·min(p⁺, p⁻)) of the exact unconditional test of H0: |p₁ − p₂| ≤ τ
    (module docstring; :func:`exact_tolerance_test` for the parts). NaN where n₁ or n₂ is 0."""
    return exact_tolerance_test(k1, n1, k2, n2, tolerance).pvalue
