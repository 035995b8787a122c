"""Studentized permutation tests of regression gaps between two groups, on shared permutations.

**Differences** (H0: the group means are equal). Each metric is a group mean, i.e. a ratio of
row sums m = Σ a_i / Σ b_i with b_i = w_i, so it *is* a ratio metric of the permutation engine
(:class:`fairengine.permutation.metrics.RatioMetric`, weights w_i, 1 when unweighted):

======================  ==========  ==========
metric                  a_i / w_i   b_i / w_i
======================  ==========  ==========
``mean_prediction``     ŷ           1
``mean_residual``       y − ŷ       1
``mae``                 |y − ŷ|     1
``mse``                 (y − ŷ)²    1
======================  ==========  ==========

and the engine's pieces are reused unchanged: the five sufficient sums per row
(:func:`~fairengine.permutation.metrics.row_values`), the value and delta-method variance
(:func:`~fairengine.permutation.metrics.ratio_value_variance`), the studentization Z = Δ/se of the
observed and of *every* permuted difference (DiCiccio, Vasudevan, Basu, Kenthapadi & Agarwal
2020, "Evaluating fairness using permutation tests", KDD, §3.3: asymptotically valid for the weak
null m_A = m_B even when the groups' variances and sizes differ), exact random subsets of rows
(:func:`~fairengine.permutation.cell_draws.random_subset_masks`, batches of
``CHUNK_ELEMENTS // n`` permutations as the engine's row path) and the +1 p-value with its tie
tolerance (:func:`~fairengine.permutation.two_group.permutation_pvalue`). On a single metric this
is the engine's ``rows`` path step for step: with the rows in ascending prediction order and the
same seed, ``mean_prediction`` of probabilities gives the p-value of
``permutation_test(metric="positive_rate")`` (tests/test_regression_permutation.py). The
engine's entry point itself is not used because it checks binary labels and probabilities.

**Why one driver instead of one engine call per metric.** All metrics and both distances read
the same permutation of the group labels: per batch one random mask, one product of the mask
with the *distinct* columns of the stacked per-row sums (7 columns for 4 metrics unweighted),
and one cumulative sum for the distances (:mod:`.distances`, rows sorted by prediction once).
Each test's marginal null distribution is exactly that of its own permutation test, so its
p-value is valid; the tests of one pair are dependent, as the joint block of the engine's maxT
path is. On 100,000 rows and 10,000 permutations the four differences take 4.2 s shared against
18.9 s as four separate calls, all six tests 9.6 s (benchmarks/results/regression_speed.md).

**Distances** (H0: the two groups' predictions have the same distribution): Kolmogorov–Smirnov
and Wasserstein-1, not studentized — under that null the groups are exchangeable and the
permutation test is exact.

**Resampling counts.** Each test reports n_extreme of n_permutations (p = (1 + n_extreme) /
(1 + n_permutations)), recorded in its finding as a
:class:`~fairengine.results.ResamplingPart` named ``permutation``. A sequential decision draws
more by calling :func:`pair_permutation_tests` again with ``n_permutations=batch`` and
``seed=pair_seed(seed, pair_index, start)``: the observed statistics are deterministic, so the
new n_extreme of each test adds to its count.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import stats

from fairengine.errors import DataContractError
from fairengine.group_pairs import pair_seed, resolve_group
from fairengine.json_result import JsonResult
from fairengine.library_threads import single_threaded
from fairengine.permutation.cell_draws import random_subset_masks
from fairengine.permutation.metrics import (
    RatioMetric,
    ratio_value_variance,
    row_values,
)
from fairengine.permutation.metrics import studentize as studentized
from fairengine.permutation.two_group import CHUNK_ELEMENTS, permutation_pvalue
from fairengine.regression.distances import DISTANCES, DistanceScan, distances, sorted_sample
from fairengine.regression.inputs import check_inputs
from fairengine.regression.mean_intervals import mean_moments
from fairengine.results import Interval

ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater", "less")
STUDENTIZATIONS: tuple[str, ...] = ("per_permutation", "none")
#: Sorted positions per block of the fused product-and-scan loop (fits in cache).
BLOCK_POSITIONS = 8192


def _ones(y: np.ndarray, p: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.ones(y.shape, dtype=np.float64)


#: The difference metrics as ratio metrics of the permutation engine (module docstring).
DIFFERENCE_METRICS: dict[str, RatioMetric] = {
    m.name: m
    for m in (
        RatioMetric("mean_prediction", "mean prediction", lambda y, p, s: p, _ones, False, "rows"),
        RatioMetric(
            "mean_residual", "mean residual (y − ŷ)", lambda y, p, s: y - p, _ones, False, "rows"
        ),
        RatioMetric(
            "mae", "mean absolute error", lambda y, p, s: np.abs(y - p), _ones, False, "rows"
        ),
        RatioMetric(
            "mse", "mean squared error", lambda y, p, s: (y - p) ** 2, _ones, False, "rows"
        ),
    )
}


@dataclass(frozen=True)
class DifferenceTest(JsonResult):
    """Test of H0: m_A = m_B for one metric.

    ``difference`` = ``value_a`` − ``value_b`` with Welch's standard error ``se`` and interval
    (t with Welch–Satterthwaite degrees of freedom, on Kish effective sizes when weighted);
    ``statistic`` is the studentized Z (``studentize="none"``: Δ itself) whose permutation
    p-value is ``pvalue`` = (1 + n_extreme)/(1 + n_permutations); ``n_undefined`` permuted
    statistics were undefined (a pseudo-group of zero weight) and counted as extreme."""

    metric: str
    value_a: float
    value_b: float
    difference: float
    se: float
    interval: Interval
    statistic: float
    pvalue: float
    n_extreme: int
    n_undefined: int
    n_permutations: int
    alternative: str
    studentize: str


@dataclass(frozen=True)
class DistanceTest(JsonResult):
    """Test of H0: both groups' predictions have the same distribution, by the distance
    ``metric`` (``ks`` or ``wasserstein``): ``pvalue`` = (1 + n_extreme)/(1 + n_permutations)
    with n_extreme the permuted distances ≥ ``statistic`` (100 ε relative tolerance)."""

    metric: str
    statistic: float
    pvalue: float
    n_extreme: int
    n_undefined: int
    n_permutations: int


@dataclass(frozen=True)
class PairTests(JsonResult):
    """Every permutation test of one pair of groups (A = ``group_a``, B = ``group_b``), all on
    the same ``n_permutations`` permutations."""

    attribute: str
    group_a: str
    group_b: str
    n_a: int
    n_b: int
    weighted: bool
    differences: tuple[DifferenceTest, ...]
    distances: tuple[DistanceTest, ...]

    def difference(self, metric: str) -> DifferenceTest:
        for t in self.differences:
            if t.metric == metric:
                return t
        have = [t.metric for t in self.differences]
        raise KeyError(f"no difference test {metric!r}; have {have}")

    def distance(self, metric: str) -> DistanceTest:
        for t in self.distances:
            if t.metric == metric:
                return t
        have = [t.metric for t in self.distances]
        raise KeyError(f"no distance test {metric!r}; have {have}")


def pair_permutation_tests(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    *,
    group_a: int | str,
    group_b: int | str,
    weights: object | None = None,
    metrics: Sequence[str] = tuple(DIFFERENCE_METRICS),
    distance_tests: bool = True,
    n_permutations: int = 1999,
    alternative: str = "two-sided",
    studentize: str = "per_permutation",
    confidence_level: float = 0.95,
    seed: int | np.random.SeedSequence | np.random.Generator | None = 0,
    attribute: str = "group",
    workers: int = 1,
) -> PairTests:
    """Permutation tests between groups ``group_a`` and ``group_b`` (labels or codes): the
    studentized difference tests of ``metrics`` and (``distance_tests``) the KS and W1 tests,
    on shared permutations of the two groups' rows (module docstring).

    ``workers`` > 1 computes the permuted statistics of consecutive batches on that many
    threads (the masks are still drawn in order on the calling thread, so the result does not
    depend on ``workers``).

    ``alternative`` applies to the differences (``greater``: m_A > m_B); the distances are
    one-sided by nature. ``studentize="none"`` gives the plain permutation test of Δ, which
    is exact only under the strong null (kept for comparison).
    """
    data = check_inputs(y, prediction, groups, categories, weights)
    a = resolve_group(group_a, data.categories, "group_a")
    b = resolve_group(group_b, data.categories, "group_b")
    if a == b:
        raise DataContractError(f"group_a and group_b must differ, both are {data.categories[a]!r}")
    unknown = [m for m in metrics if m not in DIFFERENCE_METRICS]
    if unknown:
        raise DataContractError(f"unknown metric(s) {unknown}; have {list(DIFFERENCE_METRICS)}")
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int | np.integer):
        raise DataContractError(f"n_permutations must be an integer, got {n_permutations!r}")
    if n_permutations < 1:
        raise DataContractError(f"n_permutations must be >= 1, got {n_permutations}")
    if alternative not in ALTERNATIVES:
        raise DataContractError(f"alternative must be one of {list(ALTERNATIVES)}")
    if studentize not in STUDENTIZATIONS:
        raise DataContractError(f"studentize must be one of {list(STUDENTIZATIONS)}")
    if not metrics and not distance_tests:
        raise DataContractError("nothing to test: no metrics and distance_tests=False")
    if not 0 < confidence_level < 1:
        raise DataContractError(f"confidence_level must lie in (0, 1), got {confidence_level}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise DataContractError(f"workers must be an integer >= 1, got {workers!r}")
    rows = (data.codes == a) | (data.codes == b)
    in_a = data.codes[rows] == a
    w = None if data.weights is None else data.weights[rows]
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    diffs, dists = _run(
        data.y[rows],
        data.prediction[rows],
        w,
        in_a,
        [DIFFERENCE_METRICS[m] for m in metrics],
        distance_tests,
        int(n_permutations),
        rng,
        studentize,
        alternative,
        confidence_level,
        workers,
    )
    return PairTests(
        attribute,
        data.categories[a],
        data.categories[b],
        int(in_a.sum()),
        int((~in_a).sum()),
        w is not None,
        diffs,
        dists,
    )


def all_pair_tests(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    *,
    weights: object | None = None,
    seed: int = 0,
    **options: object,
) -> tuple[PairTests, ...]:
    """:func:`pair_permutation_tests` for every pair of codes a < b, in order (0,1), (0,2), …;
    pair i draws from :func:`pair_seed` (seed, i)."""
    n_groups = len(categories)
    pairs = [(a, b) for a in range(n_groups) for b in range(a + 1, n_groups)]
    return tuple(
        pair_permutation_tests(
            y,
            prediction,
            groups,
            categories,
            group_a=a,
            group_b=b,
            weights=weights,
            seed=pair_seed(seed, i),
            **options,  # type: ignore[arg-type]
        )
        for i, (a, b) in enumerate(pairs)
    )


def _welch(
    values: np.ndarray, w: np.ndarray | None, g: np.ndarray, level: float
) -> tuple[float, float, float, float, Interval]:
    """Values of A and B, Welch's se and interval of their difference."""
    ma = mean_moments(values[g], None if w is None else w[g])
    mb = mean_moments(values[~g], None if w is None else w[~g])
    va, vb = ma.se**2, mb.se**2
    se = math.sqrt(va + vb)
    denom = va**2 / max(ma.n_eff - 1, 1) + vb**2 / max(mb.n_eff - 1, 1)
    df = (va + vb) ** 2 / denom if denom > 0 else float("inf")
    q = float(stats.t.ppf(0.5 + level / 2, df)) if math.isfinite(df) else 0.0
    d = ma.m - mb.m
    return ma.m, mb.m, d, se, Interval(d - q * se, d + q * se, level, "welch t")


def _run(
    y: np.ndarray,
    p: np.ndarray,
    w: np.ndarray | None,
    in_a: np.ndarray,
    metrics: list[RatioMetric],
    with_distances: bool,
    t: int,
    rng: np.random.Generator,
    studentize_mode: str,
    alternative: str,
    level: float,
    workers: int = 1,
) -> tuple[tuple[DifferenceTest, ...], tuple[DistanceTest, ...]]:
    order = np.argsort(p, kind="stable")
    y, p, g = y[order], p[order], in_a[order]
    w = None if w is None else w[order]
    n, k = p.size, int(g.sum())
    blocks = [row_values(rm, y, p, None, w) for rm in metrics]
    v = np.concatenate(blocks, axis=1) if blocks else np.empty((n, 0))
    vu, inverse = _distinct_columns(v)
    sums_a, sums_b = vu[g].sum(axis=0), vu[~g].sum(axis=0)
    total = (sums_a + sums_b)[None, :]
    sample = sorted_sample(p, w) if with_distances else None
    batch = max(1, CHUNK_ELEMENTS // max(n, 1))
    null_d = [np.empty(t) for _ in metrics]
    null_se = [np.empty(t) for _ in metrics]
    null_dist = [np.empty(t) for _ in DISTANCES]

    def one_batch(done: int, mask: np.ndarray) -> None:
        """Permuted statistics of the permutations done … done + len(mask) − 1."""
        size = mask.shape[0]
        if sample is None:  # the engine's row path: one product per batch
            pa = mask.astype(np.float64) @ vu
        else:  # blocks of positions, each kept in cache for the product and the scan
            totals = np.full(size, float(k)) if w is None else mask.astype(np.float64) @ w
            scan = DistanceScan(sample, totals)
            pa = np.zeros((size, vu.shape[1]))
            for j0 in range(0, n, BLOCK_POSITIONS):
                mf = mask[:, j0 : j0 + BLOCK_POSITIONS].astype(np.float64)
                pa += mf @ vu[j0 : j0 + BLOCK_POSITIONS]
                with np.errstate(divide="ignore", invalid="ignore"):
                    scan.update(j0, mf)
            ks, w1 = scan.result()
            null_dist[0][done : done + size] = ks
            null_dist[1][done : done + size] = w1
        pb = total - pa
        for j in range(len(metrics)):
            cols = inverse[5 * j : 5 * j + 5]
            ma, va = ratio_value_variance(pa[:, cols])
            mb, vb = ratio_value_variance(pb[:, cols])
            null_d[j][done : done + size] = ma - mb
            null_se[j][done : done + size] = np.sqrt(va + vb)

    starts = range(0, t, batch)
    with single_threaded():  # small products per block: a second BLAS thread only waits
        if workers == 1:
            for done in starts:
                one_batch(done, random_subset_masks(rng, n, k, min(batch, t - done)))
        else:  # masks drawn here in order (the seeded stream), statistics on the workers
            with ThreadPoolExecutor(max_workers=workers) as pool:
                pending: deque[Future[None]] = deque()
                for done in starts:
                    mask = random_subset_masks(rng, n, k, min(batch, t - done))
                    pending.append(pool.submit(one_batch, done, mask))
                    while len(pending) > 2 * workers:
                        pending.popleft().result()
                for f in pending:
                    f.result()
    diffs = []
    for j, rm in enumerate(metrics):
        cols = inverse[5 * j : 5 * j + 5]
        ma, va = ratio_value_variance(sums_a[cols])
        mb, vb = ratio_value_variance(sums_b[cols])
        if studentize_mode == "per_permutation":
            stat = float(studentized(np.asarray(ma - mb), np.asarray(np.sqrt(va + vb))))
            null = studentized(null_d[j], null_se[j])
        else:
            stat, null = float(ma - mb), null_d[j]
        pvalue, n_ext, n_nan = permutation_pvalue(stat, null, alternative)
        vals = np.asarray(rm.numerator(y, p, p), dtype=np.float64)
        value_a, value_b, d, se, interval = _welch(vals, w, g, level)
        diffs.append(
            DifferenceTest(
                rm.name,
                value_a,
                value_b,
                d,
                se,
                interval,
                stat,
                pvalue,
                n_ext,
                n_nan,
                t,
                alternative,
                studentize_mode,
            )
        )
    dists: list[DistanceTest] = []
    if sample is not None:
        obs_ks, obs_w1 = distances(sample, g[None, :].astype(np.float64))
        for name, obs, null in zip(DISTANCES, (obs_ks, obs_w1), null_dist, strict=True):
            pvalue, n_ext, n_nan = permutation_pvalue(float(obs[0]), null, "greater")
            dists.append(DistanceTest(name, float(obs[0]), pvalue, n_ext, n_nan, t))
    return tuple(diffs), tuple(dists)


def _distinct_columns(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct columns of ``v`` (first occurrences, in order) and, for every column of
    ``v``, its index among them: equal columns have equal permuted sums, computed once."""
    first: dict[bytes, int] = {}
    keep: list[int] = []
    inverse = np.empty(v.shape[1], dtype=np.intp)
    for c in range(v.shape[1]):
        key = np.ascontiguousarray(v[:, c]).tobytes()
        if key not in first:
            first[key] = len(keep)
            keep.append(c)
        inverse[c] = first[key]
    return np.ascontiguousarray(v[:, keep]), inverse
