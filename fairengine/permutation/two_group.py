"""Two-group permutation test of a metric difference, studentized as DiCiccio et al. require.

For groups A and B and a metric m (a rate, the AUC, or any callable), the observed difference
is Δ̂ = m̂_A − m̂_B. A plain permutation test of Δ̂ is exact only for the *strong* null that
both groups' data come from the same distribution; for the fairness question — the *weak* null
m_A = m_B while base rates and score distributions may differ — it can be badly invalid
(DiCiccio, Vasudevan, Basu, Kenthapadi & Agarwal, KDD 2020, §2.2–§3.3). The cure is an
asymptotically pivotal statistic: every statistic, the observed one and each permuted one, is
divided by **its own** standard error, Z = Δ/se(Δ), with

* the closed-form (delta-method) variance for proportion metrics (:mod:`.metrics`),
* DeLong's variance for the AUC (:mod:`.auc`, Theorem 2 of the paper),
* a bootstrap variance for custom metrics (eq. (1): resample each group with replacement).

``studentize="none"`` keeps the un-studentized Δ for comparison, and ``"lift_compat"`` is
LiFT's approximation (lift-semantics §2): Z_obs = Δ̂ / s_boot with s_boot the SD of Δ over a
*pooled* (not group-stratified) bootstrap, and every permuted δ_b divided by the SD of the
permutation distribution itself.

Permutation schemes: ``all_rows`` (group labels permuted over all rows) and
``within_outcome`` (permuted separately among positives and among negatives, §3.1).

p-value with the +1 correction (Phipson & Smyth 2010): p = (1 + b)/(1 + T), b the number of
permuted statistics at least as extreme as the observed one (two-sided: |Z_b| ≥ |Z_obs|; with a
relative tolerance of 100 machine epsilons for ties, as scipy). Permuted statistics that are
undefined (e.g. a pseudo-group without positives for the FNR) count as extreme, which keeps the
test conservative; their number is reported. The Monte-Carlo standard error of p is
√(p(1−p)/T) and the Wilson interval for the exact permutation p-value is computed from b of T
(DiCiccio et al. §5.1).

One path per statistic kind, each a small strategy (:class:`_StatisticKind`) that returns the
observed Δ̂ with se(Δ̂) and, batch by batch, the permuted Δ_b with se_b:

* ``cells`` (:class:`_CellCounts`): unweighted hard predictions of a rate, permutations as
  multivariate hypergeometric draws of group A's (y, ŷ) cell counts (:mod:`.cell_draws`);
* ``rows`` (:class:`_RowSums`): weighted rows and expected counts, the five sums of random
  row subsets by one matrix product per batch (:mod:`.metrics`);
* ``auc-numpy``/``auc-torch-<device>`` (:class:`_AucRanks`): AUC and DeLong variance per
  permutation from one ranking of the rows (:mod:`.auc`);
* ``custom`` (:class:`_CustomMetric`): the callable on each pseudo-group, bootstrap se.

One driver (:func:`permutation_test` and :func:`_run`) does everything else: the argument
checks, the seeded generator, the batches, the studentization, the exceedance count and
p-value, and the :class:`PermutationTestResult` with its interval inputs.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from fairengine.counts import CHUNK_ROWS, binary_cell_counts
from fairengine.devices import resolve_device
from fairengine.errors import DataContractError
from fairengine.intervals import newcombe_interval, wald_interval, wilson_interval, z_value
from fairengine.permutation import auc as auc_mod
from fairengine.permutation.cell_draws import (
    hypergeometric_cell_draws,
    multinomial_cell_draws,
    random_subset_masks,
    stratified_cell_draws,
)
from fairengine.permutation.metrics import (
    RATIO_METRICS,
    RatioMetric,
    canonical_metric,
    cell_values,
    ratio_value_variance,
    row_values,
    studentize,
)
from fairengine.results import Interval

ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater", "less")
STUDENTIZATIONS: tuple[str, ...] = ("per_permutation", "none", "lift_compat")
SCHEMES: tuple[str, ...] = ("all_rows", "within_outcome")
BACKENDS: tuple[str, ...] = ("numpy", "torch")
#: Elements of a (T_chunk, n) batch processed at once by the row, AUC and custom paths.
CHUNK_ELEMENTS = 2_000_000

CustomMetric = Callable[[np.ndarray, np.ndarray, np.ndarray | None], float]


class CustomMetricError(DataContractError):
    """A user-supplied metric raised or returned something that is not a finite-or-NaN float."""


@dataclass
class PermutationTestResult:
    """Result of :func:`permutation_test`, shaped like ``scipy.stats.permutation_test``'s.

    ``statistic`` is the test statistic (Z = Δ/se when studentized, Δ otherwise);
    ``difference`` is Δ̂ = m̂_A − m̂_B with standard error ``se``; ``null_distribution`` holds
    the T permuted statistics (NaN where undefined). ``pvalue`` = (1 + n_extreme)/(1 + T).
    """

    metric: str
    statistic: float
    pvalue: float
    null_distribution: np.ndarray
    difference: float
    se: float
    value_a: float
    value_b: float
    n_a: int
    n_b: int
    n_permutations: int
    n_extreme: int
    n_undefined: int
    alternative: str
    studentize: str
    scheme: str
    path: str
    interval_method: str
    confidence_level: float = 0.95
    extra: dict[str, Any] = field(default_factory=dict)
    _interval_inputs: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def pvalue_se(self) -> float:
        """Monte-Carlo standard error of the p-value, √(p(1−p)/T)."""
        p = self.pvalue
        return math.sqrt(p * (1.0 - p) / self.n_permutations)

    def pvalue_interval(self, confidence_level: float = 0.95) -> tuple[float, float]:
        """Wilson interval for the exact permutation p-value from n_extreme of T."""
        low, high = wilson_interval(self.n_extreme, self.n_permutations, confidence_level)
        return float(low), float(high)

    def confidence_interval(self, confidence_level: float | None = None) -> Interval:
        """Interval for the difference Δ = m_A − m_B (Newcombe for unweighted hard-prediction
        proportions, else Wald Δ̂ ± z·se with the closed-form/DeLong/bootstrap se)."""
        level = self.confidence_level if confidence_level is None else confidence_level
        z_value(level)
        inp = self._interval_inputs
        if self.interval_method == "newcombe":
            low, high = newcombe_interval(inp["k_a"], inp["n_a"], inp["k_b"], inp["n_b"], level)
        else:
            low, high = wald_interval(self.difference, self.se, level)
        return Interval(float(low), float(high), level, self.interval_method)

    def decision(self, alpha: float = 0.05) -> str:
        """``reject`` when p ≤ α, else ``fail_to_reject`` (no multiplicity adjustment)."""
        return "reject" if self.pvalue <= alpha else "fail_to_reject"

    def null_histogram(self, bins: int = 30) -> dict[str, Any]:
        """Histogram of the finite permuted statistics (for the report), plus the observed."""
        finite = self.null_distribution[np.isfinite(self.null_distribution)]
        if finite.size == 0:
            return {"edges": [], "counts": [], "observed": self.statistic}
        lo = float(min(finite.min(), self.statistic if math.isfinite(self.statistic) else 0))
        hi = float(max(finite.max(), self.statistic if math.isfinite(self.statistic) else 0))
        if hi <= lo:
            hi = lo + 1.0
        counts, edges = np.histogram(finite, bins=bins, range=(lo, hi))
        return {
            "edges": [round(float(e), 6) for e in edges],
            "counts": counts.astype(int).tolist(),
            "observed": self.statistic,
            "n_nonfinite": int(self.null_distribution.size - finite.size),
        }

    def to_dict(self, *, histogram_bins: int = 30) -> dict[str, Any]:
        """JSON-ready summary (the null distribution as a histogram, not the T values)."""
        ci = self.confidence_interval()
        pl, ph = self.pvalue_interval()
        return {
            "metric": self.metric,
            "statistic": self.statistic,
            "pvalue": self.pvalue,
            "pvalue_se": self.pvalue_se,
            "pvalue_interval": [pl, ph],
            "difference": self.difference,
            "se": self.se,
            "ci": [ci.low, ci.high],
            "ci_method": ci.method,
            "value_a": self.value_a,
            "value_b": self.value_b,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "n_permutations": self.n_permutations,
            "n_extreme": self.n_extreme,
            "n_undefined": self.n_undefined,
            "alternative": self.alternative,
            "studentize": self.studentize,
            "scheme": self.scheme,
            "path": self.path,
            "null_histogram": self.null_histogram(histogram_bins),
            **self.extra,
        }


def permutation_pvalue(
    observed: float, null: np.ndarray, alternative: str = "two-sided"
) -> tuple[float, int, int]:
    """(1 + b)/(1 + T) with b the permuted statistics at least as extreme as ``observed``.

    Ties within 100 machine epsilons (relative) count as extreme; NaN permuted statistics count
    as extreme (conservative). A NaN observed statistic gives p = NaN. Returns (p, b, number of
    NaN permuted statistics).
    """
    null = np.asarray(null, dtype=np.float64)
    nan = np.isnan(null)
    if math.isnan(observed):
        return float("nan"), 0, int(nan.sum())
    gamma = 100 * np.finfo(np.float64).eps * abs(observed) if math.isfinite(observed) else 0.0
    with np.errstate(invalid="ignore"):
        if alternative == "two-sided":
            ext = np.abs(null) >= abs(observed) - gamma
        elif alternative == "greater":
            ext = null >= observed - gamma
        elif alternative == "less":
            ext = null <= observed + gamma
        else:
            raise DataContractError(
                f"alternative must be one of {list(ALTERNATIVES)}, got {alternative!r}"
            )
    b = int(np.count_nonzero(ext | nan))
    return (1.0 + b) / (1.0 + null.size), b, int(nan.sum())


# ----------------------------------------------------------------------------- validation


def _check_inputs(
    y: Any, prediction: Any, in_a: Any, probability: Any, weights: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Validate the arrays without copying them: labels and predictions keep their dtype (the
    count path reads them as they are; the other paths convert), ``in_a`` becomes bool."""
    ya = np.asarray(y)
    if ya.ndim != 1:
        raise DataContractError(f"y must be a 1-D array of 0/1 labels, got shape {ya.shape}")
    n = ya.shape[0]
    if not _is_binary(ya):
        raise DataContractError("y must hold 0/1 labels only")
    p = None if prediction is None else _numeric(prediction)
    if p is None or p.shape != (n,):
        raise DataContractError(
            f"prediction must be a 1-D array with one value per row ({n}), got "
            f"{None if p is None else p.shape}"
        )
    if n and not (p.min() >= 0 and p.max() <= 1):  # NaN fails both comparisons
        raise DataContractError(
            "prediction must hold positive-prediction probabilities in [0, 1] (0/1 when "
            "thresholded)"
        )
    g = np.asarray(in_a)
    if g.shape != (n,) or not _is_binary(g):
        raise DataContractError(
            f"in_a must be a boolean array marking group A's rows, one per row ({n})"
        )
    g = g.astype(bool, copy=False)
    s = None
    if probability is not None:
        s = np.asarray(probability, dtype=np.float64)
        if s.shape != (n,) or not np.all(np.isfinite(s)):
            raise DataContractError(f"probability must be {n} finite values")
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise DataContractError(f"weights must be {n} finite, non-negative values")
    return ya, p, g, s, w


def _numeric(values: Any) -> np.ndarray:
    """``values`` as a bool, integer or float array (other inputs converted to float64)."""
    a = np.asarray(values)
    if a.dtype.kind in "biuf":
        return a
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataContractError(f"prediction must be numeric, got dtype {a.dtype}") from None


def _is_binary(a: np.ndarray) -> bool:
    """Whether every value is 0 or 1, without a copy: min/max for integers, a blockwise count
    of the zeros and ones for floats."""
    if a.dtype == np.bool_:
        return True
    if a.dtype.kind in "iu":
        return a.size == 0 or bool(a.min() >= 0 and a.max() <= 1)
    if a.dtype.kind != "f":
        return False
    n01 = 0
    for lo in range(0, a.size, CHUNK_ROWS):
        block = a[lo : lo + CHUNK_ROWS]
        n01 += int(np.count_nonzero(block == 0)) + int(np.count_nonzero(block == 1))
    return n01 == a.size


def _check_options(
    n_permutations: int,
    alternative: str,
    studentize_mode: str,
    scheme: str,
    confidence_level: float,
    n_bootstrap: int,
    backend: str,
) -> None:
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int | np.integer):
        raise DataContractError(f"n_permutations must be an integer, got {n_permutations!r}")
    if n_permutations < 1:
        raise DataContractError(f"n_permutations must be >= 1, got {n_permutations}")
    for name, value, allowed in (
        ("alternative", alternative, ALTERNATIVES),
        ("studentize", studentize_mode, STUDENTIZATIONS),
        ("scheme", scheme, SCHEMES),
        ("backend", backend, BACKENDS),
    ):
        if value not in allowed:
            raise DataContractError(f"{name} must be one of {list(allowed)}, got {value!r}")
    if not 0 < confidence_level < 1:
        raise DataContractError(f"confidence_level must lie in (0, 1), got {confidence_level}")
    if n_bootstrap < 2:
        raise DataContractError(f"n_bootstrap must be >= 2, got {n_bootstrap}")


# ----------------------------------------------------------------------------- entry point


def permutation_test(
    y: np.ndarray,
    prediction: np.ndarray,
    in_a: np.ndarray,
    *,
    metric: str | CustomMetric = "fnr",
    probability: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    n_permutations: int = 1999,
    alternative: str = "two-sided",
    studentize: str = "per_permutation",
    scheme: str = "all_rows",
    confidence_level: float = 0.95,
    n_bootstrap: int = 50,
    min_group_size: int = 2,
    seed: int | np.random.Generator | None = 0,
    backend: str = "numpy",
    device: str | None = None,
    group_names: tuple[str, str] = ("A", "B"),
) -> PermutationTestResult:
    """Permutation test of H0: m(A) = m(B) for a metric m (module docstring).

    Parameters
    ----------
    y : 0/1 labels of the rows of both groups.
    prediction : positive predictions, 0/1 (thresholded) or probabilities (expected counts).
    in_a : boolean mask, True for group A's rows (the others are group B).
    metric : a built-in name (``positive_rate``, ``tpr``/``recall``, ``fnr``, ``fpr``, ``tnr``,
        ``precision``, ``accuracy``, ``calibration``, ``auc``) or a callable
        ``f(y, score, weights) -> float`` (score = ``probability`` if given, else
        ``prediction``; weights None when unweighted).
    probability : scores for ``auc`` and ``calibration`` (default: ``prediction``).
    weights : optional non-negative sample weights (not supported for ``auc``).
    n_permutations : T, default 1999.
    alternative : ``two-sided`` (default), ``greater`` (m_A > m_B) or ``less``.
    studentize : ``per_permutation`` (default; the paper), ``none`` or ``lift_compat``.
    scheme : ``all_rows`` (default) or ``within_outcome``.
    confidence_level : level of the effect-size interval. Default 0.95.
    n_bootstrap : bootstrap resamples per group for custom metrics (and for LiFT's pooled
        bootstrap). Default 50.
    min_group_size : fewest rows a group may have. Default 2.
    seed : seed or ``numpy.random.Generator`` (reproducible by default).
    backend : ``numpy`` (default) or ``torch`` (AUC only; ``device`` ``auto``/``None`` (the
        default: CUDA when available, else CPU), ``cpu``, ``cuda`` or ``cuda:<n>``; a CUDA
        device torch does not see is a :class:`~fairengine.errors.ConfigError`). torch draws
        its own permutations, so its p-values differ from numpy's by Monte-Carlo noise only.
    group_names : names of A and B used in error messages.

    Raises :class:`DataContractError` for bad input, a group smaller than ``min_group_size``,
    or a metric that is undefined in an observed group (e.g. FNR of a group with no positive
    labels), and :class:`CustomMetricError` when a custom metric raises.
    """
    ya, p, g, s, w = _check_inputs(y, prediction, in_a, probability, weights)
    _check_options(
        n_permutations, alternative, studentize, scheme, confidence_level, n_bootstrap, backend
    )
    n_a = int(np.count_nonzero(g))
    n_b = g.size - n_a
    for group, size in zip(group_names, (n_a, n_b), strict=True):
        if size < min_group_size:
            raise DataContractError(
                f"group {group!r} has {size} row(s); the permutation test needs at least "
                f"{min_group_size} per group"
            )
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    settings = _Settings(
        n_permutations=int(n_permutations),
        alternative=alternative,
        studentize=studentize,
        scheme=scheme,
        confidence_level=confidence_level,
        n_bootstrap=int(n_bootstrap),
        group_names=group_names,
        backend=backend,
        device=device,
    )
    kind = _statistic_kind(metric, ya, p, g, s, w, settings, rng)
    return _run(kind, settings, rng, (n_a, n_b))


def permutation_test_from_counts(
    counts_a: np.ndarray,
    counts_b: np.ndarray,
    *,
    metric: str = "fnr",
    n_permutations: int = 1999,
    alternative: str = "two-sided",
    studentize: str = "per_permutation",
    scheme: str = "all_rows",
    confidence_level: float = 0.95,
    n_bootstrap: int = 50,
    min_group_size: int = 2,
    seed: int | np.random.Generator | None = 0,
    group_names: tuple[str, str] = ("A", "B"),
) -> PermutationTestResult:
    """:func:`permutation_test` of a proportion metric on unweighted 0/1 predictions, from both
    groups' (TN, FP, FN, TP) row counts instead of rows (the ``cells`` path: the statistic
    depends on the rows only through these counts, and a permutation is a hypergeometric draw
    of group A's counts). With the same counts and seed it returns exactly what
    :func:`permutation_test` returns on the rows.
    """
    ca = np.asarray(counts_a)
    cb = np.asarray(counts_b)
    for name, c in (("counts_a", ca), ("counts_b", cb)):
        if c.shape != (4,) or np.any(c < 0) or np.any(c != np.round(c)):
            raise DataContractError(
                f"{name} must be four non-negative whole-number counts (TN, FP, FN, TP)"
            )
    ca, cb = ca.astype(np.int64), cb.astype(np.int64)
    _check_options(
        n_permutations, alternative, studentize, scheme, confidence_level, n_bootstrap, "numpy"
    )
    rm = RATIO_METRICS.get(canonical_metric(str(metric)))
    if rm is None or rm.uses_probability:
        raise DataContractError(
            f"metric {metric!r} is not a proportion of (y, ŷ) cells; it needs rows"
        )
    n_a, n_b = int(ca.sum()), int(cb.sum())
    for group, size in zip(group_names, (n_a, n_b), strict=True):
        if size < min_group_size:
            raise DataContractError(
                f"group {group!r} has {size} row(s); the permutation test needs at least "
                f"{min_group_size} per group"
            )
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    settings = _Settings(
        n_permutations=int(n_permutations),
        alternative=alternative,
        studentize=studentize,
        scheme=scheme,
        confidence_level=confidence_level,
        n_bootstrap=int(n_bootstrap),
        group_names=group_names,
    )
    kind = _CellCounts.from_counts(ca, cb, rm, settings)
    return _run(kind, settings, rng, (n_a, n_b))


def _statistic_kind(
    metric: str | CustomMetric,
    y: np.ndarray,
    p: np.ndarray,
    g: np.ndarray,
    s: np.ndarray | None,
    w: np.ndarray | None,
    st: _Settings,
    rng: np.random.Generator,
) -> _StatisticKind:
    """The statistic kind (path) that tests ``metric`` on these rows: cell counts for unweighted
    hard predictions of a rate, the custom path for a callable, the AUC, else row sums."""
    if callable(metric):
        y8, score = y.astype(np.int8), p.astype(np.float64, copy=False)
        return _CustomMetric.build(y8, score if s is None else s, g, w, metric, st)
    name = canonical_metric(str(metric))
    rm = RATIO_METRICS.get(name)
    if rm is not None and w is None and not rm.uses_probability and _is_binary(p):
        return _CellCounts.build(y, p, g, rm, st)  # the rows as they are: counts only
    y, p = y.astype(np.int8), p.astype(np.float64, copy=False)
    if rm is None:  # the AUC
        if w is not None:
            raise DataContractError(
                "the AUC permutation test does not support sample weights (DeLong's variance "
                "per permutation is for unweighted rows); drop the weights or use another metric"
            )
        torch_seed = int(rng.integers(0, 2**63 - 1))
        return _AucRanks.build(y, p if s is None else s, g, torch_seed, st)
    if rm.uses_probability and s is None:
        s = p
    return _RowSums.build(y, p, s, g, w, rm, st)


# ----------------------------------------------------------------------------- the driver


@dataclass(frozen=True)
class _Settings:
    """The options of one test, shared by the driver and the statistic kinds (checked by
    :func:`_check_options`; ``backend``/``device`` concern the AUC only)."""

    n_permutations: int
    alternative: str
    studentize: str
    scheme: str
    confidence_level: float
    n_bootstrap: int
    group_names: tuple[str, str]
    backend: str = "numpy"
    device: str | None = None


@dataclass(frozen=True)
class _Observed:
    """A statistic kind's observed Δ̂ = m̂_A − m̂_B, its se(Δ̂), both group values, the inputs of
    the effect-size interval and extra result fields."""

    difference: float
    se: float
    values: tuple[float, float]
    interval_inputs: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _StatisticKind(ABC):
    """One path of the test: how a statistic kind gets Δ and se(Δ), observed and permuted.

    The driver (:func:`_run`) calls ``observe`` once, then ``null`` for consecutive batches of
    at most ``batch_size`` permutations until T are drawn, then (``lift_compat`` only)
    ``pooled_bootstrap_sd``, all on the test's generator in that order: the order of the draws
    is part of the seeded result. ``metric``, ``path`` and ``interval_method`` label the
    result."""

    metric: str
    path: str
    interval_method: str
    batch_size: int
    st: _Settings

    @abstractmethod
    def observe(self, rng: np.random.Generator) -> _Observed:
        """Δ̂, se(Δ̂) and the group values; an error when m is undefined in an observed group."""

    @abstractmethod
    def null(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Un-studentized Δ_b and their own se_b for ``size`` permutations (NaN: undefined)."""

    @abstractmethod
    def pooled_bootstrap_sd(self, rng: np.random.Generator) -> float:
        """LiFT's s_boot: the SD of Δ over a pooled bootstrap that ignores the groups."""


def _run(
    kind: _StatisticKind, st: _Settings, rng: np.random.Generator, sizes: tuple[int, int]
) -> PermutationTestResult:
    """The shared driver: the observed statistic, T permuted ones drawn in batches, the
    studentization (module docstring), the p-value and the result."""
    obs = kind.observe(rng)
    t, chunk = st.n_permutations, kind.batch_size
    batches = [kind.null(rng, min(chunk, t - done)) for done in range(0, t, chunk)]
    if len(batches) == 1:
        null_diff, null_se = batches[0]
    else:
        null_diff = np.concatenate([d for d, _ in batches])
        null_se = np.concatenate([se for _, se in batches])
    boot_sd = kind.pooled_bootstrap_sd(rng) if st.studentize == "lift_compat" else None
    if st.studentize == "per_permutation":
        statistic = float(studentize(np.asarray(obs.difference), np.asarray(obs.se)))
        null = studentize(null_diff, null_se)
    elif st.studentize == "none":
        statistic, null = obs.difference, np.asarray(null_diff, dtype=np.float64)
    else:  # lift_compat: observed / pooled-bootstrap SD, permuted / permutation SD
        finite = null_diff[np.isfinite(null_diff)]
        s_perm = float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0
        sd = np.asarray(boot_sd if boot_sd is not None else np.nan)
        statistic = float(studentize(np.asarray(obs.difference), sd))
        null = studentize(null_diff, np.full_like(null_diff, s_perm))
    pvalue, b, n_nan = permutation_pvalue(statistic, null, st.alternative)
    extra = dict(obs.extra)
    if boot_sd is not None:
        extra["bootstrap_sd"] = boot_sd
    return PermutationTestResult(
        metric=kind.metric,
        statistic=statistic,
        pvalue=pvalue,
        null_distribution=np.asarray(null, dtype=np.float64),
        difference=float(obs.difference),
        se=float(obs.se),
        value_a=float(obs.values[0]),
        value_b=float(obs.values[1]),
        n_a=sizes[0],
        n_b=sizes[1],
        n_permutations=t,
        n_extreme=b,
        n_undefined=n_nan,
        alternative=st.alternative,
        studentize=st.studentize,
        scheme=st.scheme,
        path=kind.path,
        interval_method=kind.interval_method,
        confidence_level=st.confidence_level,
        extra=extra,
        _interval_inputs=obs.interval_inputs,
    )


def _undefined_error(metric: str, needs: str, names: tuple[str, str], which: list[int]) -> NoReturn:
    groups = ", ".join(repr(names[i]) for i in which)
    raise DataContractError(
        f"metric {metric!r} is undefined for group(s) {groups}: no {needs} "
        f"(it conditions on them); the test cannot be run for this pair"
    )


def _row_strata(y: np.ndarray, g: np.ndarray, scheme: str) -> tuple[list[np.ndarray], list[int]]:
    """Rows permuted together (all rows, or the negatives and the positives) and group A's
    rows in each."""
    if scheme == "all_rows":
        return [np.arange(y.size)], [int(g.sum())]
    strata = [np.flatnonzero(y == 0), np.flatnonzero(y == 1)]
    return strata, [int(g[r].sum()) for r in strata]


def _subset_masks(
    rng: np.random.Generator, strata: list[np.ndarray], ks: list[int], size: int, n: int
) -> np.ndarray:
    """``size`` group-A masks (size, n) over rows, permuting within the given strata."""
    if len(strata) == 1:  # all rows (in order): no copy into a mask of zeros
        return random_subset_masks(rng, n, ks[0], size)
    mask = np.zeros((size, n), dtype=bool)
    for rows, k in zip(strata, ks, strict=True):
        mask[:, rows] = random_subset_masks(rng, rows.size, k, size)
    return mask


def _row_batch_size(n: int) -> int:
    """Permutations per (T_chunk, n) batch of row masks."""
    return max(1, CHUNK_ELEMENTS // max(n, 1))


def _sd(values: np.ndarray | list[float]) -> float:
    """Sample SD of the finite values (NaN for fewer than two)."""
    d = np.asarray(values)
    d = d[np.isfinite(d)]
    return float(np.std(d, ddof=1)) if d.size > 1 else float("nan")


# ----------------------------------------------------------------------------- ratio metrics


def _ratio_observed(
    rm: RatioMetric,
    sums: tuple[np.ndarray, np.ndarray],
    names: tuple[str, str],
    interval_inputs: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> _Observed:
    """Δ̂ and se from both groups' five sums (:mod:`.metrics`); an error when m is undefined in
    an observed group."""
    ma, va = ratio_value_variance(sums[0])
    mb, vb = ratio_value_variance(sums[1])
    undefined = [i for i, m in enumerate((ma, mb)) if np.isnan(m)]
    if undefined:
        _undefined_error(rm.name, rm.needs, names, undefined)
    return _Observed(
        float(ma - mb),
        float(np.sqrt(va + vb)),
        (float(ma), float(mb)),
        interval_inputs or {},
        extra or {},
    )


def _ratio_null(pa: np.ndarray, pb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Permuted Δ_b and se_b from the pseudo-groups' five sums (T_chunk, 5)."""
    na_, va_ = ratio_value_variance(pa)
    nb_, vb_ = ratio_value_variance(pb)
    return na_ - nb_, np.sqrt(va_ + vb_)


@dataclass(frozen=True)
class _CellCounts(_StatisticKind):
    """Unweighted hard predictions: permutations as hypergeometric draws over (y, ŷ) cells.

    The rows are only counted (:func:`fairengine.counts.binary_cell_counts`, no copy of a
    column); everything after works on the 4 + 4 counts. All T permutations are one batch."""

    rm: RatioMetric
    values: np.ndarray  # (4, 5): the sums one row of each cell adds (TN, FP, FN, TP)
    counts_a: np.ndarray
    counts_b: np.ndarray
    merged_values: np.ndarray
    pooled: list[np.ndarray]
    k_a: list[int]

    @classmethod
    def build(
        cls, y: np.ndarray, p: np.ndarray, g: np.ndarray, rm: RatioMetric, st: _Settings
    ) -> _CellCounts:
        counts_a, counts_b = binary_cell_counts(g, y, p)
        return cls.from_counts(counts_a, counts_b, rm, st)

    @classmethod
    def from_counts(
        cls, counts_a: np.ndarray, counts_b: np.ndarray, rm: RatioMetric, st: _Settings
    ) -> _CellCounts:
        """The path from both groups' (TN, FP, FN, TP) row counts (what :meth:`build` counts)."""
        values = cell_values(rm)
        # strata: all rows, or y=0 (cells TN, FP) and y=1 (cells FN, TP)
        strata = [[0, 1, 2, 3]] if st.scheme == "all_rows" else [[0, 1], [2, 3]]
        v, pooled, k_a = _merged_cells(values, counts_a + counts_b, counts_a, strata)
        t = st.n_permutations  # one batch
        return cls(
            rm.name, "cells", "newcombe", t, st, rm, values, counts_a, counts_b, v, pooled, k_a
        )

    def observe(self, rng: np.random.Generator) -> _Observed:
        sums_a, sums_b = self.counts_a @ self.values, self.counts_b @ self.values
        return _ratio_observed(
            self.rm,
            (sums_a, sums_b),
            self.st.group_names,
            {"k_a": sums_a[0], "n_a": sums_a[1], "k_b": sums_b[0], "n_b": sums_b[1]},
            {"cell_counts_a": self.counts_a.tolist(), "cell_counts_b": self.counts_b.tolist()},
        )

    def null(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.pooled) == 1:
            xa = hypergeometric_cell_draws(rng, self.pooled[0], self.k_a[0], size)
        else:
            xa = stratified_cell_draws(rng, self.pooled, self.k_a, size)
        pa = (self.merged_values.T @ xa.T).T  # (T, 5), contiguous columns: sums read by column
        pooled_sums = np.concatenate(self.pooled) @ self.merged_values
        return _ratio_null(pa, pooled_sums[None, :] - pa)

    def pooled_bootstrap_sd(self, rng: np.random.Generator) -> float:
        """LiFT's pooled bootstrap: multinomial draws over the eight (group, cell) counts."""
        counts = np.concatenate([self.counts_a, self.counts_b])
        boot = multinomial_cell_draws(rng, counts, self.st.n_bootstrap)
        ba, _ = ratio_value_variance(boot[:, :4] @ self.values)
        bb, _ = ratio_value_variance(boot[:, 4:] @ self.values)
        return _sd(ba - bb)


def _merged_cells(
    values: np.ndarray, pooled: np.ndarray, counts_a: np.ndarray, strata: list[list[int]]
) -> tuple[np.ndarray, list[np.ndarray], list[int]]:
    """Cells of a stratum whose rows add the same sums (equal rows of ``values``, e.g. TN and
    FP for the FNR) merged into one: the group sums depend on the draw only through the merged
    counts, whose law is again multivariate hypergeometric, so fewer cells give the same null
    distribution with fewer draws. Returns the merged cell values (stacked over strata), each
    stratum's pooled merged counts and group A's rows per stratum."""
    merged, pooled_m, k_a = [], [], []
    for cells in strata:
        first: dict[tuple[float, ...], int] = {}  # cell values -> merged cell, in cell order
        counts: list[int] = []
        for c in cells:
            key = tuple(values[c].tolist())
            if key not in first:
                first[key] = len(counts)
                counts.append(0)
            counts[first[key]] += int(pooled[c])
        merged.append(np.array(list(first), dtype=np.float64).reshape(len(first), -1))
        pooled_m.append(np.array(counts, dtype=np.int64))
        k_a.append(int(counts_a[cells].sum()))
    return np.concatenate(merged), pooled_m, k_a


@dataclass(frozen=True)
class _RowSums(_StatisticKind):
    """Weighted rows or expected counts: permuted group sums by (mask @ per-row sums)."""

    rm: RatioMetric
    g: np.ndarray
    v: np.ndarray
    sums_a: np.ndarray
    sums_b: np.ndarray
    strata: list[np.ndarray]
    ks: list[int]

    @classmethod
    def build(
        cls,
        y: np.ndarray,
        p: np.ndarray,
        s: np.ndarray | None,
        g: np.ndarray,
        w: np.ndarray | None,
        rm: RatioMetric,
        st: _Settings,
    ) -> _RowSums:
        v = row_values(rm, y, p, s, w)
        strata, ks = _row_strata(y, g, st.scheme)
        sums_a, sums_b = v[g].sum(axis=0), v[~g].sum(axis=0)
        t = _row_batch_size(g.size)
        return cls(rm.name, "rows", "wald", t, st, rm, g, v, sums_a, sums_b, strata, ks)

    def observe(self, rng: np.random.Generator) -> _Observed:
        return _ratio_observed(self.rm, (self.sums_a, self.sums_b), self.st.group_names)

    def null(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        mask = _subset_masks(rng, self.strata, self.ks, size, self.g.size)
        pa = mask.astype(np.float64) @ self.v
        return _ratio_null(pa, (self.sums_a + self.sums_b)[None, :] - pa)

    def pooled_bootstrap_sd(self, rng: np.random.Generator) -> float:
        """LiFT's pooled bootstrap: multinomial row counts, ignoring the groups."""
        n, g = self.g.size, self.g
        diffs = []
        for _ in range(self.st.n_bootstrap):
            c = rng.multinomial(n, np.full(n, 1.0 / n)).astype(np.float64)
            ba, _ = ratio_value_variance((c * g) @ self.v)
            bb, _ = ratio_value_variance((c * ~g) @ self.v)
            diffs.append(ba - bb)
        return _sd(diffs)


# ----------------------------------------------------------------------------- AUC


@dataclass(frozen=True)
class _TorchDraws:
    """The AUC's permutations in torch on ``device``, from their own seed (numpy's exact subset
    sampler on a CPU, faster there than ``kthvalue``; :func:`.auc.torch_subset_masks` on a
    GPU)."""

    device: str
    generator: Any
    np_rng: np.random.Generator

    @classmethod
    def build(cls, device: str | None, seed: int) -> _TorchDraws:
        try:
            import torch
        except ImportError as exc:  # pragma: no cover - torch is a dependency
            raise DataContractError("backend='torch' needs torch installed") from exc
        dev = resolve_device(device)
        gen = torch.Generator(device=dev).manual_seed(seed)
        return cls(dev, gen, np.random.default_rng(seed))

    def masks(self, n: int, k: int, size: int) -> Any:
        import torch

        if self.device == "cpu":
            return torch.from_numpy(random_subset_masks(self.np_rng, n, k, size))
        return auc_mod.torch_subset_masks(n, k, size, self.generator, self.device)


@dataclass(frozen=True)
class _AucRanks(_StatisticKind):
    """AUC difference studentized by DeLong's variance in every permutation (:mod:`.auc`):
    the rows are ranked once, a permutation only moves group-A indicators."""

    g: np.ndarray
    ranked: auc_mod.RankedSample
    k1: int  # group A's positives
    k0: int  # group A's negatives
    torch_draws: _TorchDraws | None

    @classmethod
    def build(
        cls, y: np.ndarray, score: np.ndarray, g: np.ndarray, torch_seed: int, st: _Settings
    ) -> _AucRanks:
        for i, rows in enumerate((g, ~g)):
            n_pos = int(y[rows].sum())
            if n_pos == 0 or n_pos == rows.sum():
                _undefined_error("auc", "positive and negative labels both", st.group_names, [i])
        ranked = auc_mod.rank_sample(y, score)
        k1, k0 = int(g[ranked.pos_rows].sum()), int(g[ranked.neg_rows].sum())
        draws = _TorchDraws.build(st.device, torch_seed) if st.backend == "torch" else None
        path = "auc-numpy" if draws is None else f"auc-torch-{draws.device}"
        on_gpu = draws is not None and draws.device.startswith("cuda")
        budget = CHUNK_ELEMENTS * (16 if on_gpu else 1)
        t = max(1, budget // max(ranked.n_pos + ranked.n_neg, 1))
        return cls("auc", path, "wald", t, st, g, ranked, k1, k0, draws)

    def observe(self, rng: np.random.Generator) -> _Observed:
        r, g = self.ranked, self.g
        a, va, b, vb = auc_mod.auc_pair_numpy(r, g[r.pos_rows][None, :], g[r.neg_rows][None, :])
        return _Observed(
            float(a[0] - b[0]),
            float(np.sqrt(va[0] + vb[0])),
            (float(a[0]), float(b[0])),
            extra={"variance_a": float(va[0]), "variance_b": float(vb[0])},
        )

    def null(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        r, k1, k0 = self.ranked, self.k1, self.k0
        n1, n0 = r.n_pos, r.n_neg
        draw = self._masks(rng)
        if self.st.scheme == "all_rows":
            mask = draw(n1 + n0, k1 + k0, size)
            mp, mn = mask[:, :n1], mask[:, n1:]
        else:
            mp, mn = draw(n1, k1, size), draw(n0, k0, size)
        if self.torch_draws is None:
            pa, pva, pb, pvb = auc_mod.auc_pair_numpy(r, mp, mn)
        else:
            pa, pva, pb, pvb = auc_mod.auc_pair_torch(r, mp, mn, self.torch_draws.device)
        return pa - pb, np.sqrt(pva + pvb)

    def _masks(self, rng: np.random.Generator) -> Callable[[int, int, int], Any]:
        """(n, k, size) -> ``size`` random k-subsets of range(n) as a bool mask."""
        if self.torch_draws is not None:
            return self.torch_draws.masks
        return lambda n, k, size: random_subset_masks(rng, n, k, size)

    def pooled_bootstrap_sd(self, rng: np.random.Generator) -> float:
        """LiFT's pooled bootstrap SD of AUC_A − AUC_B (rows resampled ignoring groups)."""
        ranked, g = self.ranked, self.g
        n = g.size
        gpos, gneg = g[ranked.pos_rows], g[ranked.neg_rows]
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=self.st.n_bootstrap)
        cp, cn = counts[:, ranked.pos_rows], counts[:, ranked.neg_rows]
        aa, _ = auc_mod.auc_weighted_numpy(ranked, cp * gpos, cn * gneg)
        ab, _ = auc_mod.auc_weighted_numpy(ranked, cp * ~gpos, cn * ~gneg)
        return _sd(aa - ab)


# ----------------------------------------------------------------------------- custom metrics


def _call_metric(
    f: CustomMetric, y: np.ndarray, s: np.ndarray, w: np.ndarray | None, name: str
) -> float:
    try:
        value = f(y, s, w)
    except Exception as exc:
        raise CustomMetricError(
            f"custom metric {name!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    try:
        return float(value)
    except (TypeError, ValueError):
        raise CustomMetricError(
            f"custom metric {name!r} must return a float, got {type(value).__name__}"
        ) from None


@dataclass(frozen=True)
class _CustomMetric(_StatisticKind):
    """Custom metric: rows permuted in batches, the callable evaluated per pseudo-group, and
    (``per_permutation``) each permuted difference studentized by its own bootstrap variance
    (DiCiccio et al. eq. (1): each group resampled with replacement)."""

    f: CustomMetric
    y: np.ndarray
    s: np.ndarray
    g: np.ndarray
    w: np.ndarray | None
    strata: list[np.ndarray]
    ks: list[int]

    @classmethod
    def build(
        cls,
        y: np.ndarray,
        s: np.ndarray,
        g: np.ndarray,
        w: np.ndarray | None,
        f: CustomMetric,
        st: _Settings,
    ) -> _CustomMetric:
        strata, ks = _row_strata(y, g, st.scheme)
        name, t = getattr(f, "__name__", "custom"), _row_batch_size(y.size)
        return cls(name, "custom", "wald (bootstrap se)", t, st, f, y, s, g, w, strata, ks)

    def _value(self, rows: np.ndarray, y: np.ndarray, s: np.ndarray, w: np.ndarray | None) -> float:
        """f on the rows ``rows`` (a mask) of (y, s, w)."""
        return _call_metric(self.f, y[rows], s[rows], None if w is None else w[rows], self.metric)

    def _pair(self, mask: np.ndarray, rng: np.random.Generator, boot: bool) -> tuple[float, float]:
        """Δ of the pseudo-groups ``mask``/``~mask`` and, with ``boot``, its bootstrap se."""
        va, vb = (
            self._value(mask, self.y, self.s, self.w),
            self._value(~mask, self.y, self.s, self.w),
        )
        if not boot:
            return va - vb, float("nan")
        var = self._boot_var(mask, rng) + self._boot_var(~mask, rng)
        return va - vb, math.sqrt(var) if var >= 0 else float("nan")

    def _boot_var(self, rows: np.ndarray, rng: np.random.Generator) -> float:
        """Bootstrap variance of f on one group (DiCiccio et al. eq. (1)); NaN resamples
        dropped."""
        y, s, w = self.y[rows], self.s[rows], None if self.w is None else self.w[rows]
        idx = rng.integers(0, y.size, size=(self.st.n_bootstrap, y.size))
        f, name = self.f, self.metric
        vals = np.array(
            [_call_metric(f, y[i], s[i], None if w is None else w[i], name) for i in idx]
        )
        vals = vals[np.isfinite(vals)]
        return float(np.var(vals, ddof=1)) if vals.size > 1 else float("nan")

    def observe(self, rng: np.random.Generator) -> _Observed:
        values = (
            self._value(self.g, self.y, self.s, self.w),
            self._value(~self.g, self.y, self.s, self.w),
        )
        undefined = [i for i, v in enumerate(values) if not math.isfinite(v)]
        if undefined:
            _undefined_error(
                self.metric,
                "value (the custom metric returned NaN/inf)",
                self.st.group_names,
                undefined,
            )
        diff, se = self._pair(self.g, rng, True)
        return _Observed(diff, se, values)

    def null(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        boot = self.st.studentize == "per_permutation"
        masks = _subset_masks(rng, self.strata, self.ks, size, self.y.size)
        pairs = [self._pair(m, rng, boot) for m in masks]
        return (
            np.asarray([d for d, _ in pairs], dtype=np.float64),
            np.asarray([se for _, se in pairs], dtype=np.float64),
        )

    def pooled_bootstrap_sd(self, rng: np.random.Generator) -> float:
        """LiFT's pooled bootstrap: rows resampled ignoring groups (resamples that lose a group
        are skipped)."""
        n, vals = self.y.size, []
        for _ in range(self.st.n_bootstrap):
            idx = rng.integers(0, n, n)
            gi = self.g[idx]
            if gi.all() or not gi.any():
                continue
            yy, ss, ww = self.y[idx], self.s[idx], None if self.w is None else self.w[idx]
            vals.append(self._value(gi, yy, ss, ww) - self._value(~gi, yy, ss, ww))
        return _sd(vals)
