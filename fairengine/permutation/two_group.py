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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
#: Elements of a (T_chunk, n) batch processed at once by the row and AUC paths.
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
        n01 += np.count_nonzero(block == 0) + np.count_nonzero(block == 1)
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
    for name, size in zip(group_names, (n_a, n_b), strict=True):
        if size < min_group_size:
            raise DataContractError(
                f"group {name!r} has {size} row(s); the permutation test needs at least "
                f"{min_group_size} per group"
            )
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    common = {
        "n_permutations": int(n_permutations),
        "alternative": alternative,
        "studentize_mode": studentize,
        "scheme": scheme,
        "confidence_level": confidence_level,
        "n_bootstrap": int(n_bootstrap),
        "rng": rng,
        "group_names": group_names,
    }
    name = None if callable(metric) else canonical_metric(str(metric))
    rm = RATIO_METRICS.get(name) if name is not None else None
    if rm is not None and w is None and not rm.uses_probability and _is_binary(p):
        return _cell_test(ya, p, g, rm, **common)  # the rows as they are: counts only
    ya, p = ya.astype(np.int8), p.astype(np.float64, copy=False)
    if callable(metric):
        return _custom_test(ya, p if s is None else s, g, w, metric, **common)
    if name == "auc":
        if w is not None:
            raise DataContractError(
                "the AUC permutation test does not support sample weights (DeLong's variance "
                "per permutation is for unweighted rows); drop the weights or use another metric"
            )
        seed_t = int(rng.integers(0, 2**63 - 1))
        return _auc_test(ya, p if s is None else s, g, backend, device, seed_t, **common)
    rm = RATIO_METRICS[name]  # type: ignore[index]
    if rm.uses_probability and s is None:
        s = p
    return _row_test(ya, p, s, g, w, rm, **common)


# ----------------------------------------------------------------------------- shared pieces


def _undefined_error(metric: str, needs: str, names: tuple[str, str], which: list[int]) -> None:
    groups = ", ".join(repr(names[i]) for i in which)
    raise DataContractError(
        f"metric {metric!r} is undefined for group(s) {groups}: no {needs} "
        f"(it conditions on them); the test cannot be run for this pair"
    )


def _finish(
    *,
    metric: str,
    diff_obs: float,
    se_obs: float,
    values: tuple[float, float],
    null_diff: np.ndarray,
    null_se: np.ndarray,
    studentize_mode: str,
    boot_sd: float | None,
    n_sizes: tuple[int, int],
    n_permutations: int,
    alternative: str,
    scheme: str,
    path: str,
    confidence_level: float,
    interval_method: str,
    interval_inputs: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> PermutationTestResult:
    if studentize_mode == "per_permutation":
        obs = float(studentize(diff_obs, se_obs))
        null = studentize(null_diff, null_se)
    elif studentize_mode == "none":
        obs, null = diff_obs, np.asarray(null_diff, dtype=np.float64)
    else:  # lift_compat: observed / pooled-bootstrap SD, permuted / permutation SD
        finite = null_diff[np.isfinite(null_diff)]
        s_perm = float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0
        obs = float(studentize(diff_obs, boot_sd if boot_sd is not None else np.nan))
        null = studentize(null_diff, np.full_like(null_diff, s_perm))
    pvalue, b, n_nan = permutation_pvalue(obs, null, alternative)
    ex = dict(extra or {})
    if boot_sd is not None:
        ex["bootstrap_sd"] = boot_sd
    return PermutationTestResult(
        metric=metric,
        statistic=obs,
        pvalue=pvalue,
        null_distribution=np.asarray(null, dtype=np.float64),
        difference=float(diff_obs),
        se=float(se_obs),
        value_a=float(values[0]),
        value_b=float(values[1]),
        n_a=n_sizes[0],
        n_b=n_sizes[1],
        n_permutations=n_permutations,
        n_extreme=b,
        n_undefined=n_nan,
        alternative=alternative,
        studentize=studentize_mode,
        scheme=scheme,
        path=path,
        interval_method=interval_method,
        confidence_level=confidence_level,
        extra=ex,
        _interval_inputs=interval_inputs,
    )


# ----------------------------------------------------------------------------- ratio metrics


def _cell_test(
    y: np.ndarray,
    p: np.ndarray,
    g: np.ndarray,
    rm: RatioMetric,
    *,
    n_permutations: int,
    alternative: str,
    studentize_mode: str,
    scheme: str,
    confidence_level: float,
    n_bootstrap: int,
    rng: np.random.Generator,
    group_names: tuple[str, str],
) -> PermutationTestResult:
    """Unweighted hard predictions: permutations as hypergeometric draws over (y, ŷ) cells.

    The rows are only counted (:func:`fairengine.counts.binary_cell_counts`, no copy of a
    column); everything after works on the 4 + 4 counts."""
    values = cell_values(rm)
    counts_a, counts_b = binary_cell_counts(g, y, p)
    sums_a, sums_b = counts_a @ values, counts_b @ values
    ma, va = ratio_value_variance(sums_a)
    mb, vb = ratio_value_variance(sums_b)
    undefined = [i for i, m in enumerate((ma, mb)) if np.isnan(m)]
    if undefined:
        _undefined_error(rm.name, rm.needs, group_names, undefined)
    pooled = counts_a + counts_b
    t = n_permutations
    # strata: all rows, or y=0 (cells TN, FP) and y=1 (cells FN, TP)
    strata = [[0, 1, 2, 3]] if scheme == "all_rows" else [[0, 1], [2, 3]]
    v, pooled_m, k_a = _merged_cells(values, pooled, counts_a, strata)
    if len(pooled_m) == 1:
        xa = hypergeometric_cell_draws(rng, pooled_m[0], k_a[0], t)
    else:
        xa = stratified_cell_draws(rng, pooled_m, k_a, t)
    pa = (v.T @ xa.T).T  # (T, 5) with contiguous columns: the sums read column by column
    pb = (np.concatenate(pooled_m) @ v)[None, :] - pa
    na_, va_ = ratio_value_variance(pa)
    nb_, vb_ = ratio_value_variance(pb)
    boot_sd = None
    if studentize_mode == "lift_compat":
        boot = multinomial_cell_draws(rng, np.concatenate([counts_a, counts_b]), n_bootstrap)
        ba, _ = ratio_value_variance(boot[:, :4] @ values)
        bb, _ = ratio_value_variance(boot[:, 4:] @ values)
        d = (ba - bb)[np.isfinite(ba - bb)]
        boot_sd = float(np.std(d, ddof=1)) if d.size > 1 else float("nan")
    return _finish(
        metric=rm.name,
        diff_obs=float(ma - mb),
        se_obs=float(np.sqrt(va + vb)),
        values=(float(ma), float(mb)),
        null_diff=na_ - nb_,
        null_se=np.sqrt(va_ + vb_),
        studentize_mode=studentize_mode,
        boot_sd=boot_sd,
        n_sizes=(int(counts_a.sum()), int(counts_b.sum())),
        n_permutations=t,
        alternative=alternative,
        scheme=scheme,
        path="cells",
        confidence_level=confidence_level,
        interval_method="newcombe",
        interval_inputs={
            "k_a": sums_a[0],
            "n_a": sums_a[1],
            "k_b": sums_b[0],
            "n_b": sums_b[1],
        },
        extra={"cell_counts_a": counts_a.tolist(), "cell_counts_b": counts_b.tolist()},
    )


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


def _subset_batches(
    rng: np.random.Generator, strata: list[np.ndarray], ks: list[int], t: int, n: int
):
    """Yield group-A masks (T_chunk, n) over rows, permuting within the given strata."""
    chunk = max(1, CHUNK_ELEMENTS // max(n, 1))
    done = 0
    while done < t:
        size = min(chunk, t - done)
        mask = np.zeros((size, n), dtype=bool)
        for rows, k in zip(strata, ks, strict=True):
            mask[:, rows] = random_subset_masks(rng, rows.size, k, size)
        yield mask
        done += size


def _row_test(
    y: np.ndarray,
    p: np.ndarray,
    s: np.ndarray | None,
    g: np.ndarray,
    w: np.ndarray | None,
    rm: RatioMetric,
    *,
    n_permutations: int,
    alternative: str,
    studentize_mode: str,
    scheme: str,
    confidence_level: float,
    n_bootstrap: int,
    rng: np.random.Generator,
    group_names: tuple[str, str],
) -> PermutationTestResult:
    """Weighted rows or expected counts: permuted group sums by (mask @ per-row sums)."""
    v = row_values(rm, y, p, s, w)
    n = y.size
    sums_a, sums_b = v[g].sum(axis=0), v[~g].sum(axis=0)
    total = sums_a + sums_b
    ma, va = ratio_value_variance(sums_a)
    mb, vb = ratio_value_variance(sums_b)
    undefined = [i for i, m in enumerate((ma, mb)) if np.isnan(m)]
    if undefined:
        _undefined_error(rm.name, rm.needs, group_names, undefined)
    if scheme == "all_rows":
        strata, ks = [np.arange(n)], [int(g.sum())]
    else:
        strata = [np.flatnonzero(y == 0), np.flatnonzero(y == 1)]
        ks = [int(g[r].sum()) for r in strata]
    pa = np.concatenate(
        [m.astype(np.float64) @ v for m in _subset_batches(rng, strata, ks, n_permutations, n)]
    )
    pb = total[None, :] - pa
    na_, va_ = ratio_value_variance(pa)
    nb_, vb_ = ratio_value_variance(pb)
    boot_sd = None
    if studentize_mode == "lift_compat":
        diffs = []
        for _ in range(n_bootstrap):
            c = rng.multinomial(n, np.full(n, 1.0 / n)).astype(np.float64)
            ba, _ = ratio_value_variance((c * g) @ v)
            bb, _ = ratio_value_variance((c * ~g) @ v)
            diffs.append(ba - bb)
        d = np.asarray(diffs)
        d = d[np.isfinite(d)]
        boot_sd = float(np.std(d, ddof=1)) if d.size > 1 else float("nan")
    return _finish(
        metric=rm.name,
        diff_obs=float(ma - mb),
        se_obs=float(np.sqrt(va + vb)),
        values=(float(ma), float(mb)),
        null_diff=na_ - nb_,
        null_se=np.sqrt(va_ + vb_),
        studentize_mode=studentize_mode,
        boot_sd=boot_sd,
        n_sizes=(int(g.sum()), int((~g).sum())),
        n_permutations=n_permutations,
        alternative=alternative,
        scheme=scheme,
        path="rows",
        confidence_level=confidence_level,
        interval_method="wald",
        interval_inputs={},
    )


# ----------------------------------------------------------------------------- AUC


def _auc_test(
    y: np.ndarray,
    score: np.ndarray,
    g: np.ndarray,
    backend: str,
    device: str | None,
    torch_seed: int,
    *,
    n_permutations: int,
    alternative: str,
    studentize_mode: str,
    scheme: str,
    confidence_level: float,
    n_bootstrap: int,
    rng: np.random.Generator,
    group_names: tuple[str, str],
) -> PermutationTestResult:
    """AUC difference studentized by DeLong's variance in every permutation (:mod:`.auc`)."""
    for i, rows in enumerate((g, ~g)):
        n_pos = int(y[rows].sum())
        if n_pos == 0 or n_pos == rows.sum():
            _undefined_error("auc", "positive and negative labels both", group_names, [i])
    ranked = auc_mod.rank_sample(y, score)
    gp_obs = g[ranked.pos_rows][None, :]
    gn_obs = g[ranked.neg_rows][None, :]
    a, va, b, vb = auc_mod.auc_pair_numpy(ranked, gp_obs, gn_obs)
    n1, n0 = ranked.n_pos, ranked.n_neg
    k1, k0 = int(gp_obs.sum()), int(gn_obs.sum())
    k = k1 + k0
    t = n_permutations
    if backend == "torch":
        diffs, ses, used = _auc_null_torch(ranked, scheme, k, k1, k0, t, device, torch_seed)
    else:
        used = "numpy"
        diffs, ses = [], []
        chunk = max(1, CHUNK_ELEMENTS // max(n1 + n0, 1))
        done = 0
        while done < t:
            size = min(chunk, t - done)
            if scheme == "all_rows":
                mask = random_subset_masks(rng, n1 + n0, k, size)
                mp, mn = mask[:, :n1], mask[:, n1:]
            else:
                mp = random_subset_masks(rng, n1, k1, size)
                mn = random_subset_masks(rng, n0, k0, size)
            pa, pva, pb, pvb = auc_mod.auc_pair_numpy(ranked, mp, mn)
            diffs.append(pa - pb)
            ses.append(np.sqrt(pva + pvb))
            done += size
        diffs, ses = np.concatenate(diffs), np.concatenate(ses)
    boot_sd = None
    if studentize_mode == "lift_compat":
        boot_sd = _auc_pooled_bootstrap_sd(ranked, g, n_bootstrap, rng)
    return _finish(
        metric="auc",
        diff_obs=float(a[0] - b[0]),
        se_obs=float(np.sqrt(va[0] + vb[0])),
        values=(float(a[0]), float(b[0])),
        null_diff=diffs,
        null_se=ses,
        studentize_mode=studentize_mode,
        boot_sd=boot_sd,
        n_sizes=(int(g.sum()), int((~g).sum())),
        n_permutations=t,
        alternative=alternative,
        scheme=scheme,
        path=f"auc-{used}",
        confidence_level=confidence_level,
        interval_method="wald",
        interval_inputs={},
        extra={"variance_a": float(va[0]), "variance_b": float(vb[0])},
    )


def _auc_pooled_bootstrap_sd(
    ranked: auc_mod.RankedSample, g: np.ndarray, n_bootstrap: int, rng: np.random.Generator
) -> float:
    """LiFT's pooled bootstrap SD of AUC_A − AUC_B (rows resampled ignoring groups)."""
    n = g.size
    gpos, gneg = g[ranked.pos_rows], g[ranked.neg_rows]
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_bootstrap)
    cp, cn = counts[:, ranked.pos_rows], counts[:, ranked.neg_rows]
    aa, _ = auc_mod.auc_weighted_numpy(ranked, cp * gpos, cn * gneg)
    ab, _ = auc_mod.auc_weighted_numpy(ranked, cp * ~gpos, cn * ~gneg)
    d = (aa - ab)[np.isfinite(aa - ab)]
    return float(np.std(d, ddof=1)) if d.size > 1 else float("nan")


def _auc_null_torch(
    ranked: auc_mod.RankedSample,
    scheme: str,
    k: int,
    k1: int,
    k0: int,
    t: int,
    device: str | None,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, str]:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        raise DataContractError("backend='torch' needs torch installed") from exc
    dev = resolve_device(device)
    gen = torch.Generator(device=dev).manual_seed(seed)
    np_rng = np.random.default_rng(seed)
    n1, n0 = ranked.n_pos, ranked.n_neg
    budget = CHUNK_ELEMENTS * (16 if dev.startswith("cuda") else 1)
    chunk = max(1, budget // max(n1 + n0, 1))
    diffs, ses = [], []
    done = 0
    while done < t:
        size = min(chunk, t - done)
        if dev == "cpu":  # numpy's exact subset sampler is faster than kthvalue on a CPU
            if scheme == "all_rows":
                mask = torch.from_numpy(random_subset_masks(np_rng, n1 + n0, k, size))
                mp, mn = mask[:, :n1], mask[:, n1:]
            else:
                mp = torch.from_numpy(random_subset_masks(np_rng, n1, k1, size))
                mn = torch.from_numpy(random_subset_masks(np_rng, n0, k0, size))
        elif scheme == "all_rows":
            mask = auc_mod.torch_subset_masks(n1 + n0, k, size, gen, dev)
            mp, mn = mask[:, :n1], mask[:, n1:]
        else:
            mp = auc_mod.torch_subset_masks(n1, k1, size, gen, dev)
            mn = auc_mod.torch_subset_masks(n0, k0, size, gen, dev)
        pa, pva, pb, pvb = auc_mod.auc_pair_torch(ranked, mp, mn, dev)
        diffs.append(pa - pb)
        ses.append(np.sqrt(pva + pvb))
        done += size
    return np.concatenate(diffs), np.concatenate(ses), f"torch-{dev}"


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


def _boot_var(
    f: CustomMetric,
    y: np.ndarray,
    s: np.ndarray,
    w: np.ndarray | None,
    n_boot: int,
    rng: np.random.Generator,
    name: str,
) -> float:
    """Bootstrap variance of f on one group (DiCiccio et al. eq. (1)); NaN resamples dropped."""
    m = y.size
    idx = rng.integers(0, m, size=(n_boot, m))
    vals = np.array([_call_metric(f, y[i], s[i], None if w is None else w[i], name) for i in idx])
    vals = vals[np.isfinite(vals)]
    return float(np.var(vals, ddof=1)) if vals.size > 1 else float("nan")


def _custom_test(
    y: np.ndarray,
    s: np.ndarray,
    g: np.ndarray,
    w: np.ndarray | None,
    f: CustomMetric,
    *,
    n_permutations: int,
    alternative: str,
    studentize_mode: str,
    scheme: str,
    confidence_level: float,
    n_bootstrap: int,
    rng: np.random.Generator,
    group_names: tuple[str, str],
) -> PermutationTestResult:
    """Custom metric: rows permuted in batches, the callable evaluated per pseudo-group, and
    (``per_permutation``) each permuted difference studentized by its own bootstrap variance."""
    name = getattr(f, "__name__", "custom")

    def pair(mask: np.ndarray, boot: bool) -> tuple[float, float]:
        wa = None if w is None else w[mask]
        wb = None if w is None else w[~mask]
        va = _call_metric(f, y[mask], s[mask], wa, name)
        vb = _call_metric(f, y[~mask], s[~mask], wb, name)
        if not boot:
            return va - vb, float("nan")
        var = _boot_var(f, y[mask], s[mask], wa, n_bootstrap, rng, name) + _boot_var(
            f, y[~mask], s[~mask], wb, n_bootstrap, rng, name
        )
        return va - vb, math.sqrt(var) if var >= 0 else float("nan")

    wa_obs = None if w is None else w[g]
    wb_obs = None if w is None else w[~g]
    va_obs = _call_metric(f, y[g], s[g], wa_obs, name)
    vb_obs = _call_metric(f, y[~g], s[~g], wb_obs, name)
    undefined = [i for i, v in enumerate((va_obs, vb_obs)) if not math.isfinite(v)]
    if undefined:
        _undefined_error(name, "value (the custom metric returned NaN/inf)", group_names, undefined)
    diff_obs, se_obs = pair(g, True)
    n = y.size
    if scheme == "all_rows":
        strata, ks = [np.arange(n)], [int(g.sum())]
    else:
        strata = [np.flatnonzero(y == 0), np.flatnonzero(y == 1)]
        ks = [int(g[r].sum()) for r in strata]
    boot = studentize_mode == "per_permutation"
    diffs, ses = [], []
    for masks in _subset_batches(rng, strata, ks, n_permutations, n):
        for m in masks:
            d, se = pair(m, boot)
            diffs.append(d)
            ses.append(se)
    boot_sd = None
    if studentize_mode == "lift_compat":
        vals = []
        for _ in range(n_bootstrap):
            idx = rng.integers(0, n, n)
            gi = g[idx]
            if gi.all() or not gi.any():
                continue
            yy, ss = y[idx], s[idx]
            ww = None if w is None else w[idx]
            vals.append(
                _call_metric(f, yy[gi], ss[gi], None if ww is None else ww[gi], name)
                - _call_metric(f, yy[~gi], ss[~gi], None if ww is None else ww[~gi], name)
            )
        d = np.asarray(vals)
        d = d[np.isfinite(d)]
        boot_sd = float(np.std(d, ddof=1)) if d.size > 1 else float("nan")
    return _finish(
        metric=name,
        diff_obs=diff_obs,
        se_obs=se_obs,
        values=(va_obs, vb_obs),
        null_diff=np.asarray(diffs, dtype=np.float64),
        null_se=np.asarray(ses, dtype=np.float64),
        studentize_mode=studentize_mode,
        boot_sd=boot_sd,
        n_sizes=(int(g.sum()), int((~g).sum())),
        n_permutations=n_permutations,
        alternative=alternative,
        scheme=scheme,
        path="custom",
        confidence_level=confidence_level,
        interval_method="wald (bootstrap se)",
        interval_inputs={},
    )
