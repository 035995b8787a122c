"""Studentized permutation tests of per-class rate gaps between two groups, and permutation
tests of the distances between their predicted-class distributions, on shared permutations.

**Rate differences** (H0: m_A = m_B for one metric and class). Every one-vs-rest rate — the
selection rate, TPR and FPR of class c — is a ratio of row sums m = Σa/Σb, a ratio metric of
the permutation engine (:mod:`.class_sums`, :class:`fairengine.permutation.metrics.RatioMetric`),
and the engine's pieces are reused: the five sufficient sums (A, B, AA, AB, BB), the value and
delta-method variance (:func:`~fairengine.permutation.metrics.ratio_value_variance`), the
studentization Z = Δ/se of the observed and of *every* permuted difference (DiCiccio,
Vasudevan, Basu, Kenthapadi & Agarwal 2020, KDD, §3.3: asymptotically valid for the weak null
m_A = m_B even when the groups' sizes and variances differ) and the +1 p-value with its tie
tolerance (:func:`~fairengine.permutation.two_group.permutation_pvalue`).

**Distances** (H0: both groups' predictions have the same distribution): total variation,
Jensen–Shannon and Hellinger (:mod:`.distances`), not studentized: under that null the rows of
the two groups are exchangeable and the permutation test is exact.

**Draws.** A permutation reassigns the pair's rows to pseudo-groups of the original sizes n_A,
n_B. Every statistic depends on a pseudo-group only through its stratum sums
(:mod:`.class_sums`), which are

* ``cells`` (unweighted hard predictions): functions of the K² (y, ŷ) cell counts, so a
  permutation is one exact multivariate hypergeometric draw of A's cell counts from the pair's
  pooled counts (:func:`~fairengine.permutation.cell_draws.hypergeometric_cell_draws`,
  lift-semantics §7.3): O(K²) per permutation, whatever the row count;
* ``rows`` (weights or expected counts): a uniformly random n_A-subset of the rows
  (:func:`~fairengine.permutation.cell_draws.random_subset_masks`, batches of
  ``CHUNK_ELEMENTS // n`` permutations as the engine's row path), with the sums one matrix
  product per true-class stratum (rows sorted by class once).

All 3K rate tests and the three distances of a pair read the same permutations; each test's
marginal null distribution is that of its own permutation test, so each p-value is valid; the
tests of one pair are dependent.

**Resampling counts.** Each test reports n_extreme of n_permutations (p = (1 + n_extreme) /
(1 + n_permutations)), recorded in its finding as a :class:`~fairengine.results.ResamplingPart`
named ``permutation``. A sequential decision draws more by calling
:func:`pair_permutation_tests` again with ``n_permutations=batch`` and
``seed=pair_seed(seed, pair_index, start)`` (:func:`fairengine.regression.permutation.pair_seed`,
the convention of :class:`fairengine.permutation.method.PermutationResampler`): the observed
statistics are deterministic, so the new n_extreme of each test adds to its count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError
from fairengine.group_pairs import pair_seed, resolve_group
from fairengine.intervals import newcombe_interval, wald_interval
from fairengine.json_result import JsonResult
from fairengine.library_threads import single_threaded
from fairengine.multiclass.class_sums import (
    RATE_METRICS,
    cell_counts,
    class_distribution,
    group_sums,
    one_hot,
    rate_sums,
    row_stats,
    stats_width,
    sums_from_cells,
)
from fairengine.multiclass.distances import DISTANCES, class_distances
from fairengine.multiclass.inputs import MulticlassInputs, check_inputs
from fairengine.multiclass.rates import prediction_kind, rate_intervals, rate_rows, stratum_rows
from fairengine.permutation.cell_draws import hypergeometric_cell_draws, random_subset_masks
from fairengine.permutation.metrics import ratio_value_variance, studentize
from fairengine.permutation.two_group import CHUNK_ELEMENTS, permutation_pvalue
from fairengine.results import Interval

ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater", "less")
STUDENTIZATIONS: tuple[str, ...] = ("per_permutation", "none")
#: Permutations per batch of the cell path (bounds its temporaries to a few MB).
CELL_BATCH = 8192

__all__ = [
    "ALTERNATIVES",
    "STUDENTIZATIONS",
    "ClassDistanceTest",
    "PairTests",
    "RateDifferenceTest",
    "all_pair_tests",
    "pair_permutation_tests",
    "pair_seed",
]


@dataclass(frozen=True)
class RateDifferenceTest(JsonResult):
    """Test of H0: m_A = m_B for the rate ``metric`` (``selection``, ``tpr``, ``fpr``) of one
    class.

    ``difference`` = ``value_a`` − ``value_b`` with the delta-method ``se`` and an interval
    (Newcombe's hybrid score method 10 on counts, on effective counts when weighted; Wald for
    expected counts); ``statistic`` is the studentized Z (``studentize="none"``: Δ itself)
    whose permutation p-value is ``pvalue`` = (1 + n_extreme)/(1 + n_permutations);
    ``n_undefined`` permuted statistics were undefined (a pseudo-group without conditioning
    rows) and counted as extreme."""

    metric: str
    class_label: str
    class_code: int
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
class ClassDistanceTest(JsonResult):
    """Test of H0: both groups' predicted classes have the same distribution, by the distance
    ``metric`` (``tv``, ``js``, ``hellinger``): ``pvalue`` = (1 + n_extreme)/(1 +
    n_permutations) with n_extreme the permuted distances ≥ ``statistic`` (100 ε relative
    tolerance)."""

    metric: str
    statistic: float
    pvalue: float
    n_extreme: int
    n_undefined: int
    n_permutations: int


@dataclass(frozen=True)
class PairTests(JsonResult):
    """Every permutation test of one pair of groups (A = ``group_a``, B = ``group_b``), all on
    the same ``n_permutations`` permutations, drawn over ``cells`` or ``rows`` (module
    docstring); ``prediction`` as in :class:`~.rates.ClassRates`."""

    attribute: str
    classes: tuple[str, ...]
    group_a: str
    group_b: str
    n_a: int
    n_b: int
    weighted: bool
    prediction: str
    draws: str
    differences: tuple[RateDifferenceTest, ...]
    distances: tuple[ClassDistanceTest, ...]

    def difference(self, metric: str, class_label: str) -> RateDifferenceTest:
        for t in self.differences:
            if t.metric == metric and t.class_label == str(class_label):
                return t
        have = [(t.metric, t.class_label) for t in self.differences]
        raise KeyError(f"no difference test ({metric!r}, {class_label!r}); have {have}")

    def distance(self, metric: str) -> ClassDistanceTest:
        for t in self.distances:
            if t.metric == metric:
                return t
        raise KeyError(f"no distance test {metric!r}; have {[t.metric for t in self.distances]}")


@dataclass(frozen=True)
class _Options:
    metrics: tuple[str, ...]
    distance_tests: bool
    n_permutations: int
    alternative: str
    studentize: str
    level: float


def _options(
    metrics: Sequence[str],
    distance_tests: bool,
    n_permutations: int,
    alternative: str,
    studentize_mode: str,
    level: float,
) -> _Options:
    unknown = [m for m in metrics if m not in RATE_METRICS]
    if unknown:
        raise DataContractError(f"unknown metric(s) {unknown}; have {list(RATE_METRICS)}")
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int | np.integer):
        raise DataContractError(f"n_permutations must be an integer, got {n_permutations!r}")
    if n_permutations < 1:
        raise DataContractError(f"n_permutations must be >= 1, got {n_permutations}")
    if alternative not in ALTERNATIVES:
        raise DataContractError(f"alternative must be one of {list(ALTERNATIVES)}")
    if studentize_mode not in STUDENTIZATIONS:
        raise DataContractError(f"studentize must be one of {list(STUDENTIZATIONS)}")
    if not metrics and not distance_tests:
        raise DataContractError("nothing to test: no metrics and distance_tests=False")
    if not 0 < level < 1:
        raise DataContractError(f"confidence_level must lie in (0, 1), got {level}")
    order = tuple(m for m in RATE_METRICS if m in metrics)
    return _Options(order, distance_tests, int(n_permutations), alternative, studentize_mode, level)


def pair_permutation_tests(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    classes: Sequence[object],
    *,
    group_a: int | str,
    group_b: int | str,
    weights: object | None = None,
    probabilities: str = "argmax",
    metrics: Sequence[str] = RATE_METRICS,
    distance_tests: bool = True,
    n_permutations: int = 1999,
    alternative: str = "two-sided",
    studentize: str = "per_permutation",
    confidence_level: float = 0.95,
    seed: int | np.random.SeedSequence | np.random.Generator | None = 0,
    attribute: str = "group",
) -> PairTests:
    """Permutation tests between groups ``group_a`` and ``group_b`` (labels or codes): the
    studentized tests of the per-class differences of ``metrics`` (selection, tpr, fpr; every
    class) and (``distance_tests``) the TV, JS and Hellinger tests, on shared permutations of
    the two groups' rows (module docstring). Inputs as :func:`~.rates.group_class_rates`.

    ``alternative`` applies to the differences (``greater``: m_A > m_B); the distances are
    one-sided by nature. ``studentize="none"`` gives the plain permutation test of Δ, exact
    only under the strong null (kept for comparison).
    """
    opts = _options(
        metrics, distance_tests, n_permutations, alternative, studentize, confidence_level
    )
    data = check_inputs(
        y, prediction, groups, categories, classes, weights, probabilities=probabilities
    )
    a = resolve_group(group_a, data.categories, "group_a")
    b = resolve_group(group_b, data.categories, "group_b")
    if a == b:
        raise DataContractError(f"group_a and group_b must differ, both are {data.categories[a]!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    kind = prediction_kind(prediction, probabilities)
    return _pair(data, _Shared.of(data), a, b, opts, rng, attribute, kind)


def all_pair_tests(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    classes: Sequence[object],
    *,
    weights: object | None = None,
    probabilities: str = "argmax",
    metrics: Sequence[str] = RATE_METRICS,
    distance_tests: bool = True,
    n_permutations: int = 1999,
    alternative: str = "two-sided",
    studentize: str = "per_permutation",
    confidence_level: float = 0.95,
    seed: int = 0,
    attribute: str = "group",
    pairs: Sequence[tuple[int | str, int | str]] | None = None,
    first_stream: int = 0,
) -> tuple[PairTests, ...]:
    """:func:`pair_permutation_tests` for every pair of codes a < b, in order (0,1), (0,2), …,
    or for the given ``pairs`` (labels or codes, e.g. the largest groups' pairs when the audit
    caps them); the i-th pair draws from :func:`pair_seed` (seed, first_stream + i), so an audit
    numbering its pairs across attributes passes its running count. The inputs are checked
    and tabulated once."""
    opts = _options(
        metrics, distance_tests, n_permutations, alternative, studentize, confidence_level
    )
    data = check_inputs(
        y, prediction, groups, categories, classes, weights, probabilities=probabilities
    )
    shared = _Shared.of(data)
    kind = prediction_kind(prediction, probabilities)
    n_groups = len(data.categories)
    if pairs is None:
        codes = [(a, b) for a in range(n_groups) for b in range(a + 1, n_groups)]
    else:
        codes = []
        for ga, gb in pairs:
            a = resolve_group(ga, data.categories, "pairs: group_a")
            b = resolve_group(gb, data.categories, "pairs: group_b")
            if a == b:
                raise DataContractError(f"pairs: a pair of {data.categories[a]!r} with itself")
            codes.append((a, b))
    return tuple(
        _pair(
            data,
            shared,
            a,
            b,
            opts,
            np.random.default_rng(pair_seed(seed, first_stream + i)),
            attribute,
            kind,
        )
        for i, (a, b) in enumerate(codes)
    )


@dataclass(frozen=True)
class _Shared:
    """Per-input tables every pair reads: stratum sums (G, K, 2+3K), stratum rows (G, K) and,
    for the cell path, the cell counts (G, K, K)."""

    table: np.ndarray
    rows: np.ndarray
    cells: np.ndarray | None

    @classmethod
    def of(cls, data: MulticlassInputs) -> _Shared:
        if data.unit_cells:
            cells = cell_counts(data)
            return cls(sums_from_cells(cells), stratum_rows(data), cells)
        return cls(group_sums(data), stratum_rows(data), None)


def _cell_null(
    pooled: np.ndarray, n_a: int, t: int, rng: np.random.Generator, k: int
) -> list[np.ndarray]:
    """Stratum sums of pseudo-group A, (batch, K, 2+3K) per batch, by hypergeometric draws."""
    out = []
    for done in range(0, t, CELL_BATCH):
        size = min(CELL_BATCH, t - done)
        x = hypergeometric_cell_draws(rng, pooled, n_a, size)
        out.append(sums_from_cells(x.reshape(size, k, k)))
    return out


def _row_null(
    data: MulticlassInputs, a: int, b: int, t: int, rng: np.random.Generator
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Observed and permuted stratum sums of A by row masks (rows of the pair sorted by y)."""
    k = data.n_classes
    rows = np.flatnonzero((data.codes == a) | (data.codes == b))
    order = np.argsort(data.y[rows], kind="stable")
    rows = rows[order]
    y = data.y[rows]
    q = data.probability[rows] if data.probability is not None else None
    if q is None:
        assert data.predicted is not None
        q = one_hot(data.predicted[rows], k)
    w = None if data.weights is None else data.weights[rows]
    v = row_stats(q, w)
    bounds = np.searchsorted(y, np.arange(k + 1))
    n = rows.size
    in_a = data.codes[rows] == a
    n_a = int(in_a.sum())

    def sums(mask: np.ndarray) -> np.ndarray:
        out = np.zeros((mask.shape[0], k, stats_width(k)))
        mf = mask.astype(np.float64)
        for c in range(k):
            lo, hi = bounds[c], bounds[c + 1]
            if hi > lo:
                out[:, c, :] = mf[:, lo:hi] @ v[lo:hi]
        return out

    batch = max(1, CHUNK_ELEMENTS // max(n, 1))
    null = []
    with single_threaded():
        observed = sums(in_a[None, :])[0]
        for done in range(0, t, batch):
            null.append(sums(random_subset_masks(rng, n, n_a, min(batch, t - done))))
    return observed, null


def _pair(
    data: MulticlassInputs,
    shared: _Shared,
    a: int,
    b: int,
    opts: _Options,
    rng: np.random.Generator,
    attribute: str,
    kind: str,
) -> PairTests:
    k, t = data.n_classes, opts.n_permutations
    total = shared.table[a] + shared.table[b]
    if shared.cells is not None:
        draws = "cells"
        obs_a = shared.table[a]
        pooled = (shared.cells[a] + shared.cells[b]).ravel()
        null_a = _cell_null(pooled, int(shared.cells[a].sum()), t, rng, k)
    else:
        draws = "rows"
        obs_a, null_a = _row_null(data, a, b, t, rng)
    obs_b = total - obs_a
    metric_idx = [RATE_METRICS.index(m) for m in opts.metrics]
    null_z = np.empty((t, len(metric_idx), k))
    null_dist = np.empty((t, len(DISTANCES)))
    done = 0
    for pa in null_a:
        size = pa.shape[0]
        pb = total[None] - pa
        ma, va = ratio_value_variance(rate_sums(pa)[:, metric_idx])
        mb, vb = ratio_value_variance(rate_sums(pb)[:, metric_idx])
        if opts.studentize == "per_permutation":
            null_z[done : done + size] = studentize(ma - mb, np.sqrt(va + vb))
        else:
            null_z[done : done + size] = ma - mb
        if opts.distance_tests:
            null_dist[done : done + size] = class_distances(
                class_distribution(pa), class_distribution(pb)
            )
        done += size
    # observed: the same functions on the true split
    sums_a, sums_b = rate_sums(obs_a)[metric_idx], rate_sums(obs_b)[metric_idx]
    ma, va = ratio_value_variance(sums_a)
    mb, vb = ratio_value_variance(sums_b)
    diff = ma - mb
    se = np.sqrt(va + vb)
    stat = studentize(diff, se) if opts.studentize == "per_permutation" else diff
    rows_a = rate_rows(shared.rows[a])[metric_idx]
    rows_b = rate_rows(shared.rows[b])[metric_idx]
    low, high, method = _difference_interval(data, sums_a, sums_b, rows_a, rows_b, diff, se, opts)
    tests = []
    for j, metric in enumerate(opts.metrics):
        for c in range(k):
            pvalue, n_ext, n_nan = permutation_pvalue(
                float(stat[j, c]), null_z[:, j, c], opts.alternative
            )
            tests.append(
                RateDifferenceTest(
                    metric,
                    data.classes[c],
                    c,
                    float(ma[j, c]),
                    float(mb[j, c]),
                    float(diff[j, c]),
                    float(se[j, c]),
                    Interval(float(low[j, c]), float(high[j, c]), opts.level, method),
                    float(stat[j, c]),
                    pvalue,
                    n_ext,
                    n_nan,
                    t,
                    opts.alternative,
                    opts.studentize,
                )
            )
    dists = []
    if opts.distance_tests:
        observed = class_distances(class_distribution(obs_a), class_distribution(obs_b))
        for i, name in enumerate(DISTANCES):
            pvalue, n_ext, n_nan = permutation_pvalue(
                float(observed[i]), null_dist[:, i], "greater"
            )
            dists.append(ClassDistanceTest(name, float(observed[i]), pvalue, n_ext, n_nan, t))
    return PairTests(
        attribute,
        data.classes,
        data.categories[a],
        data.categories[b],
        data.sizes[a],
        data.sizes[b],
        data.weights is not None,
        kind,
        draws,
        tuple(tests),
        tuple(dists),
    )


def _difference_interval(
    data: MulticlassInputs,
    sums_a: np.ndarray,
    sums_b: np.ndarray,
    rows_a: np.ndarray,
    rows_b: np.ndarray,
    diff: np.ndarray,
    se: np.ndarray,
    opts: _Options,
) -> tuple[np.ndarray, np.ndarray, str]:
    """Newcombe's hybrid score interval on (effective) counts, Wald for expected counts."""
    weighted = data.weights is not None
    ma, _, na, *_ = rate_intervals(sums_a, rows_a, data.hard, weighted, opts.level)
    mb, _, nb, *_ = rate_intervals(sums_b, rows_b, data.hard, weighted, opts.level)
    if data.hard:
        if weighted:
            k1, k2 = ma * na, mb * nb
            method = "newcombe hybrid score (effective counts)"
        else:
            k1, k2 = np.round(ma * na), np.round(mb * nb)
            method = "newcombe hybrid score"
        low, high = newcombe_interval(k1, na, k2, nb, opts.level)
        return low, high, method
    low, high = wald_interval(diff, se, opts.level, bounds=(-1.0, 1.0))
    return low, high, "wald (expected counts)"
