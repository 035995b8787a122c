"""Exact unconditional test of a tolerance null for the difference of two binomial proportions.

For hard predictions, group i contributes k_i positives out of n_i rows, K_i ~ Bin(n_i, p_i)
independently, and the tolerance null of :mod:`fairengine.rate_gap` is

    H0: |p₁ − p₂| ≤ τ   against   H1: |p₁ − p₂| > τ      (τ ≥ 0).

It is the union of two one-sided nulls, H0+: p₁ − p₂ ≤ τ and H0−: p₁ − p₂ ≥ −τ, and each is
tested exactly, without a normal approximation (Barnard 1947; for a non-zero margin Chan 1998):

* **Statistic.** The score statistic of Farrington & Manning (1990, §2, eq. 1–2; the
  Miettinen–Nurminen 1985 statistic without their n/(n−1) factor) for a difference δ,

      Z_δ(k₁, k₂) = (p̂₁ − p̂₂ − δ) / √(p̃₁(1 − p̃₁)/n₁ + p̃₂(1 − p̃₂)/n₂),

  with (p̃₁, p̃₂) the maximum-likelihood estimate restricted to p₁ − p₂ = δ: the root in
  [max(0, δ), min(1, 1 + δ)] of the cubic of Farrington & Manning (1990, Appendix), solved in
  closed (trigonometric) form and polished by Newton steps (:func:`restricted_mle`). For δ = 0,
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
  so p⁻ is p⁺ of the table (n₁ − k₁, n₂ − k₂): both come from one statistic table and one set
  of binomial probabilities. Statistics within 10⁻¹⁰·max(1, |t|) of t count as ties and are
  included in the tail (conservative against rounding).
* **Nuisance parameter.** When the rejection region {Z_τ ≥ t} is Barnard-convex, the supremum
  over H0+ is attained on its boundary p₁ − p₂ = τ (Röhmel & Mansmann 1999, Biometrical J
  41:149–170, §3, Theorem 1; for δ = 0 this is Barnard's own condition), so p⁺ is a supremum
  over one parameter p₂ ∈ [0, 1 − τ] with p₁ = p₂ + τ (tests/test_exact_tolerance.py checks
  numerically that interior points of H0+ give smaller tail probabilities). The search:
  a grid uniform in the variance-stabilising scale φ = arcsin √p, ⌈8√n₂⌉ + 64 points in p₂ and
  ⌈8√n₁⌉ + 64 in p₁ = p₂ + τ (their union; spacing ≤ 0.4 standard deviations of φ̂ of either
  group, so a peak of the tail probability, at least about one standard deviation wide, is
  never stepped over), then local refinement of the :data:`REFINE_PEAKS` highest grid maxima
  by nested grids of 17 points, each one 1/8 as wide as the last, down to a width of 10⁻¹⁰
  in p₂. Every value taken is a tail probability at a point of H0+, so the search can only
  fall short of the supremum, and by at most the curvature over the last width: against a
  dense search (20,000 points plus bounded Brent maximisation) the relative shortfall is
  below 10⁻¹⁰ in the tests. The nuisance range is not restricted to a confidence interval
  (Berger & Boos 1994); the p-values are the plain Barnard-type suprema.
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
of them, and each grid point costs one product of the pmf vectors with the rejection indicator
(blocks of grid points as matrix products, both sides at once). Tables above
:data:`EXACT_MAX_CELLS` cells are refused with a ValueError. Binomial pmfs are computed in log
space (``gammaln``, ``xlogy``): 16× faster than ``scipy.stats.binom.pmf`` for a table of 20,000
rows and equal to it within 10⁻¹¹ relative (checked in the tests). Measured on one core
of the development machine (2 shared cores), one p-value:

    n₁ × n₂                 cells        time
    10 × 30                 341          ~5 ms
    30 × 300                9,331        ~15 ms
    200 × 200               40,401       ~30 ms
    1 × 1,000               2,002        ~10 ms
    200 × 2,000             402,201      ~0.2 s
    200 × 19,900            4.0 M        ~2 s

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
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, xlog1py, xlogy

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

#: Statistics within TIE_RTOL·max(1, |t|) of the observed one count as ties (in the tail).
TIE_RTOL = 1e-10

#: Grid points per block of the matrix products (bounds memory at ~50 MB for 4 M cells).
_BLOCK_FLOATS = 2_000_000


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

    Farrington & Manning (1990, Appendix): with θ = n₂/n₁, p̃₁ is the root in
    [max(0, δ), min(1, 1 + δ)] of a·x³ + b·x² + c·x + d with a = 1 + θ,
    b = −(1 + θ + p̂₁ + θp̂₂ + δ(θ + 2)), c = δ² + δ(2p̂₁ + θ + 1) + p̂₁ + θp̂₂,
    d = −p̂₁δ(1 + δ); closed form v = b³/(27a³) − bc/(6a²) + d/(2a),
    u = sign(v)·√(b²/(9a²) − c/(3a)), w = (π + arccos(v/u³))/3, p̃₁ = 2u·cos w − b/(3a),
    then two guarded Newton steps on the cubic. p̃₂ = p̃₁ − δ. δ = 0: the pooled rate.
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
    b = -(1.0 + theta + r1 + theta * r2 + delta * (theta + 2.0))
    c = delta**2 + delta * (2.0 * r1 + theta + 1.0) + r1 + theta * r2
    d = -r1 * delta * (1.0 + delta)
    v = b**3 / (27.0 * a**3) - b * c / (6.0 * a**2) + d / (2.0 * a)
    u = np.where(v >= 0, 1.0, -1.0) * np.sqrt(np.maximum(b**2 / (9.0 * a**2) - c / (3.0 * a), 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        w = (np.pi + np.arccos(np.clip(v / u**3, -1.0, 1.0))) / 3.0
    x = np.where(u != 0, 2.0 * u * np.cos(w), 0.0) - b / (3.0 * a)
    lo, hi = max(0.0, delta), min(1.0, 1.0 + delta)

    def cubic(z: np.ndarray) -> np.ndarray:
        return ((a * z + b) * z + c) * z + d

    x = np.clip(x, lo, hi)
    for _ in range(2):
        fx = cubic(x)
        slope = (3.0 * a * x + 2.0 * b) * x + c
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.clip(x - fx / slope, lo, hi)
        better = np.isfinite(step) & (np.abs(cubic(step)) < np.abs(fx))
        x = np.where(better, step, x)
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


def binomial_pmfs(n: int, p: np.ndarray) -> np.ndarray:
    """P(K = k) for K ~ Bin(n, p), k = 0..n, one row per entry of ``p`` (shape (len(p), n+1)).

    Log space: exp(log C(n, k) + k·log p + (n − k)·log(1 − p)), exact at p ∈ {0, 1}; equal to
    ``scipy.stats.binom.pmf`` within 10⁻¹¹ relative (tests) and much faster for large n.
    """
    k = np.arange(n + 1, dtype=np.float64)
    p = np.clip(np.asarray(p, dtype=np.float64).reshape(-1, 1), 0.0, 1.0)
    log_comb = gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
    return np.exp(log_comb + xlogy(k, p) + xlog1py(n - k, -p))


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


def _refine(
    reject: np.ndarray, grid: np.ndarray, values: np.ndarray, tolerance: float
) -> tuple[float, float]:
    """Supremum over p₂ ∈ [0, 1 − τ] of the tail probability of ``reject`` on the boundary,
    from its ``values`` on ``grid``: the REFINE_PEAKS highest local maxima refined by nested
    grids (module docstring). Returns (supremum, p₂ where it was found)."""
    best = int(np.argmax(values))
    sup, arg = float(values[best]), float(grid[best])
    left = np.r_[-np.inf, values[:-1]]
    right = np.r_[values[1:], -np.inf]
    peaks = np.flatnonzero((values >= left) & (values >= right) & (values > 0))
    peaks = peaks[np.argsort(-values[peaks], kind="stable")][:REFINE_PEAKS]
    if peaks.size == 0 or sup >= 1.0:
        return min(sup, 1.0), arg
    last = grid.size - 1
    lo = grid[np.maximum(peaks - 1, 0)]
    hi = grid[np.minimum(peaks + 1, last)]
    top = 1.0 - tolerance
    for _ in range(60):
        pts = np.linspace(lo, hi, REFINE_POINTS, axis=1)  # (peaks, points)
        vals = tail_probabilities(reject, pts.ravel() + tolerance, pts.ravel())
        vals = vals.reshape(pts.shape)
        j = np.argmax(vals, axis=1)
        rows = np.arange(pts.shape[0])
        k = int(np.argmax(vals[rows, j]))
        if vals[k, j[k]] > sup:
            sup, arg = float(vals[k, j[k]]), float(pts[k, j[k]])
        lo = pts[rows, np.maximum(j - 1, 0)]
        hi = pts[rows, np.minimum(j + 1, REFINE_POINTS - 1)]
        lo, hi = np.clip(lo, 0.0, top), np.clip(hi, 0.0, top)
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
    i = np.arange(n1 + 1.0)[:, None]
    j = np.arange(n2 + 1.0)[None, :]
    table = score_statistic(i, n1, j, n2, tolerance)  # Z_τ over every outcome
    observed = (table[k1, k2], table[n1 - k1, n2 - k2])  # p⁺ and, flipped, p⁻
    z_up, z_low = float(observed[0]), -float(observed[1])  # Z_{−τ}(k) = −Z_τ(n − k)
    reject = np.stack([table >= t - TIE_RTOL * max(1.0, abs(t)) for t in observed])
    grid = boundary_grid(n1, n2, tolerance)
    values = tail_probabilities(reject, grid + tolerance, grid)
    up, arg_up = _refine(reject[0], grid, values[0], tolerance)
    low, arg_low = _refine(reject[1], grid, values[1], tolerance)
    # p⁻ was searched on the relabelled scale: its q₂ is p₂ = 1 − q₂ on H0−'s boundary
    return ExactTolerance(
        pvalue=min(1.0, 2.0 * min(up, low)),
        upper=up,
        lower=low,
        statistic_upper=z_up,
        statistic_lower=z_low,
        nuisance_upper=arg_up,
        nuisance_lower=1.0 - arg_low,
        grid_points=int(grid.size),
    )


def exact_tolerance_pvalue(k1: int, n1: int, k2: int, n2: int, tolerance: float) -> float:
    """p-value min(1, 2·min(p⁺, p⁻)) of the exact unconditional test of H0: |p₁ − p₂| ≤ τ
    (module docstring; :func:`exact_tolerance_test` for the parts). NaN where n₁ or n₂ is 0."""
    return exact_tolerance_test(k1, n1, k2, n2, tolerance).pvalue
