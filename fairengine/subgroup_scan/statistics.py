"""Subgroup statistics from per-cell sums: calibration, positive-rate, TPR and FPR deviations.

Every statistic of a subgroup A has the form Z_A = (O_A − E_A) / √V_A, with O_A a sum of a 0/1
outcome over the rows of A (in a stratum), E_A and V_A its mean and variance under the null:

* ``calibration`` (outcome y; model probability p): E_A = Σ_A p_i, V_A = Σ_A p_i(1 − p_i), the
  null being y_i ~ Bernoulli(p_i) independently (the model is calibrated on A). Z_A is the score
  statistic at q = 1 of MDSS's odds-shift model odds(y_i = 1) = q·p_i/(1 − p_i) for i ∈ A
  (Zhang & Neill 2016, eq. 2): ∂/∂q [Σ y_i log q − Σ log(1 − p_i + q p_i)] at q = 1 is O − E and
  its information is V.
* ``positive_rate`` (outcome ŷ over all rows), ``tpr`` (ŷ over the rows with y = 1), ``fpr``
  (ŷ over the rows with y = 0): under the null that the decisions are exchangeable within the
  stratum (a random permutation of ŷ within it), O_A is hypergeometric: with N rows and K
  positives in the stratum, π = K/N and n_A rows of A in it,
      E_A = n_A π,   V_A = n_A π(1 − π)(N − n_A)/(N − 1).

The cell sums are per-cell (O_c, n_c, Σ_c p, Σ_c p(1 − p)); a subgroup's are Mᵀ of them
(:class:`~fairengine.subgroup_scan.search_space.SearchSpace`). ``sides``: ``greater`` scans for
O > E (Z large), ``less`` for O < E, ``two-sided`` for |Z|. A subgroup with V_A = 0 (the whole
stratum, or all p ∈ {0, 1}) is undefined: its extremeness is −∞ and it is never selected.

:func:`bernoulli_score` is MDSS's Bernoulli log-likelihood ratio score of a set of rows,
F(q) = O log q − Σ log(1 − p_i + q p_i), maximised over q > 1 (``positive``: observed above
predicted) or q < 1 (``negative``), with its maximiser q̂ (Zhang & Neill 2016 §3.1; AIF360's
``Bernoulli`` scoring function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from fairengine.subgroup_scan.search_space import SearchSpace, SubgroupScanError

STATISTICS = ("calibration", "positive_rate", "tpr", "fpr")
SIDES = ("two-sided", "greater", "less")


@dataclass(frozen=True)
class CellOutcomes:
    """What the null draws need per cell, for one statistic.

    ``outcome`` (n,) the 0/1 outcome summed (y or ŷ), ``in_stratum`` (n,) the rows counted,
    ``probability`` (n,) p for ``calibration`` (None otherwise); per cell ``n`` (rows in the
    stratum), ``observed`` (Σ outcome), ``expected`` and ``variance`` (Σ p and Σ p(1 − p) for
    calibration; for the permutation nulls they are subgroup-level, see :func:`moments`).
    """

    kind: str
    outcome: np.ndarray
    in_stratum: np.ndarray
    probability: np.ndarray | None
    n: np.ndarray
    observed: np.ndarray
    expected: np.ndarray
    variance: np.ndarray

    @property
    def stratum_rows(self) -> int:
        return int(self.n.sum())

    @property
    def stratum_positives(self) -> int:
        return round(float(self.observed.sum()))


def _binary(name: str, values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or not np.all((v == 0) | (v == 1)):
        raise SubgroupScanError(f"{name} must be a 1-D array of 0/1 values")
    return v


def cell_outcomes(
    space: SearchSpace,
    kind: str,
    labels: np.ndarray,
    probability: np.ndarray | None = None,
    decision: np.ndarray | None = None,
) -> CellOutcomes:
    """Per-cell sums of statistic ``kind`` (``calibration`` needs ``labels`` and
    ``probability``; the rate statistics need ``decision`` and, for tpr/fpr, ``labels``)."""
    if kind not in STATISTICS:
        raise SubgroupScanError(f"statistic must be one of {list(STATISTICS)}, got {kind!r}")
    n_rows = space.coded.n_rows
    y = _binary("labels", labels)
    if y.size != n_rows:
        raise SubgroupScanError(f"labels has {y.size} rows, the features {n_rows}")
    cells = space.cells
    if kind == "calibration":
        if probability is None:
            raise SubgroupScanError("the calibration statistic needs probability (the scores)")
        p = np.asarray(probability, dtype=np.float64)
        if p.shape != (n_rows,) or not np.all((p >= 0) & (p <= 1)):
            raise SubgroupScanError("probability must be n values in [0, 1]")
        stratum = np.ones(n_rows, dtype=bool)
        outcome = y
        expected = cells.sums(p)
        variance = cells.sums(p * (1.0 - p))
    else:
        if decision is None:
            raise SubgroupScanError(f"the {kind} statistic needs decision (0/1 predictions)")
        outcome = _binary("decision", decision)
        if outcome.size != n_rows:
            raise SubgroupScanError(f"decision has {outcome.size} rows, the features {n_rows}")
        stratum = {"positive_rate": np.ones(n_rows, dtype=bool), "tpr": y == 1, "fpr": y == 0}[kind]
        if stratum.sum() < 2:
            raise SubgroupScanError(f"the {kind} statistic needs at least 2 rows in its stratum")
        p = None
        expected = np.zeros(cells.n_cells)
        variance = np.zeros(cells.n_cells)
    w = stratum.astype(np.float64)
    return CellOutcomes(
        kind=kind,
        outcome=outcome,
        in_stratum=stratum,
        probability=p,
        n=cells.sums(w),
        observed=cells.sums(outcome * w),
        expected=expected,
        variance=variance,
    )


@dataclass(frozen=True)
class SubgroupMoments:
    """Per subgroup: rows in the stratum ``n``, null mean ``expected`` E_A and variance
    ``variance`` V_A of O_A, and the observed sum ``observed`` O_A."""

    n: np.ndarray
    expected: np.ndarray
    variance: np.ndarray
    observed: np.ndarray


def moments(space: SearchSpace, cells: CellOutcomes) -> SubgroupMoments:
    """O_A, E_A and V_A of every subgroup (module docstring), in one pass over the cells."""
    sums = space.subgroup_sums(
        np.column_stack([cells.n, cells.observed, cells.expected, cells.variance])
    )
    n_a, obs = sums[:, 0], sums[:, 1]
    if cells.kind == "calibration":
        return SubgroupMoments(n_a, sums[:, 2], sums[:, 3], obs)
    big_n = float(cells.stratum_rows)
    pi = cells.stratum_positives / big_n
    var = n_a * pi * (1.0 - pi) * (big_n - n_a) / (big_n - 1.0)
    return SubgroupMoments(n_a, n_a * pi, var, obs)


def z_statistics(observed: np.ndarray, mom: SubgroupMoments) -> np.ndarray:
    """Z = (O − E)/√V; NaN where V = 0. ``observed`` is (S,) or (S, B)."""
    obs = np.asarray(observed, dtype=np.float64)
    v = mom.variance if obs.ndim == 1 else mom.variance[:, None]
    e = mom.expected if obs.ndim == 1 else mom.expected[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (obs - e) / np.sqrt(v)
    return np.where(v > 1e-12, z, np.nan)


def extremeness(z: np.ndarray, sides: str) -> np.ndarray:
    """The scanned value: Z, −Z or |Z| for ``greater``, ``less``, ``two-sided``; −∞ for NaN."""
    if sides not in SIDES:
        raise SubgroupScanError(f"sides must be one of {list(SIDES)}, got {sides!r}")
    t = z if sides == "greater" else -z if sides == "less" else np.abs(z)
    return np.where(np.isnan(t), -np.inf, t)


@dataclass(frozen=True)
class BernoulliScore:
    """MDSS Bernoulli score ``score`` = max_q F(q) in the ``direction`` and its maximiser
    ``q_hat`` (0 or ∞ at the boundary: no or every row positive)."""

    score: float
    q_hat: float


def _score_at(o: float, p: np.ndarray, q: float) -> float:
    if q == 0.0:
        return -float(np.log1p(-p).sum()) if o == 0 else -math.inf
    if math.isinf(q):
        return -float(np.log(p).sum()) if o == len(p) else -math.inf
    return float(o * math.log(q) - np.log1p(p * (q - 1.0)).sum())


def _log_q_hat(o: float, p: np.ndarray) -> float:
    """Root x of g(x) = Σ σ(x + logit p_i) − O (0 < O < n): safeguarded Newton on x = log q
    (g increases, g' = Σ σ(1 − σ)), bisection whenever a step leaves the bracket."""
    with np.errstate(divide="ignore"):
        lp = logit(p)
    lo, hi = -50.0, 50.0
    x = 0.0
    for _ in range(200):
        s = expit(x + lp)
        g = float(s.sum()) - o
        if abs(g) <= 1e-10 * max(1.0, o):
            return x
        if g < 0:
            lo = x
        else:
            hi = x
        d = float((s * (1.0 - s)).sum())
        step = x - g / d if d > 0 else math.nan
        x_new = step if lo < step < hi else 0.5 * (lo + hi)
        if abs(x_new - x) < 1e-13:
            return x_new
        x = x_new
    return x


def bernoulli_score(observed: float, probability: np.ndarray, direction: str) -> BernoulliScore:
    """MDSS's Bernoulli score of rows with outcome sum ``observed`` and probabilities
    ``probability``: F(q) = O log q − Σ log(1 − p_i + q p_i) maximised over q ≥ 1
    (``positive``) or q ≤ 1 (``negative``). q̂ solves Σ q p_i/(1 − p_i + q p_i) = O, found by
    safeguarded Newton on log q (the left side increases in q, F is concave in log q)."""
    if direction not in ("positive", "negative"):
        raise SubgroupScanError(f"direction must be 'positive' or 'negative', got {direction!r}")
    p = np.asarray(probability, dtype=np.float64)
    o = float(observed)
    if p.size == 0:
        return BernoulliScore(0.0, 1.0)
    if o <= 0.0:
        q = 0.0
    elif o >= p.size:
        q = math.inf
    else:
        q = math.exp(_log_q_hat(o, p))
    q = max(q, 1.0) if direction == "positive" else min(q, 1.0)
    return BernoulliScore(max(_score_at(o, p, q), 0.0), q)
