"""Sequential Monte Carlo decisions for a family of resampling tests (MMCTest).

A permutation or bootstrap test with B resamples estimates its *ideal* p-value
p_i = P(T* ≥ t_obs) (T* a resampled statistic) and cannot report less than 1/(B+1); after a
Holm adjustment over m ≈ 100 tests, strong evidence then reads "not rejected" merely because B
was too small, and a p-value near its threshold is put on either side by resampling noise. This
module decides each test at its multiplicity-adjusted level *sequentially*, drawing resamples in
batches only for the tests whose decision is still open, with a bounded probability ``risk`` (ε)
that any decision differs from the one the procedure would take on the ideal p-values.

Algorithm: MMCTest (Gandy & Hahn 2014) with the step-up/step-down procedures of Gandy & Hahn
(2016); the interval and spending formulas follow the R package ``simctest`` (``mmctest``, by
the same authors), with the three changes marked below.

* Model. After n_i resamples of test i, its exceedance count is S_i ~ Binomial(n_i, p_i):
  every resample is independent (permutations drawn with replacement), and the ``draw`` callback
  returns how many new resampled statistics were ≥ the observed one.
* Look schedule (fixed in advance). Batch j has b_j = round(b_1·g^(j-1)) resamples
  (``first_batch`` b_1, ``growth`` g), so after look j every open test has
  n_(j) = b_1 + … + b_j resamples; the last batch is cut so that n_(J) = ``max_resamples``.
* Error spending. With ρ(n) = n/(n + k) (k = ``spending_k``, 1000 as in ``simctest``), test
  i's interval at look j has error level
      a_j = (ε/m) · (ρ(n_(j)) − ρ(n_(j−1))) / ρ(n_(J)),    ρ(n_(0)) = 0,
  so Σ_i Σ_j a_j = ε. *Change 1*: ``simctest`` spends 1 − (1 − ε)^(1/m) per test (Šidák, exact
  under independent tests) over an unbounded ρ; we spend ε/m (Bonferroni: valid when tests share
  their permutations, i.e. under any dependence) and normalise ρ to the capped schedule, so the
  whole of ε is spent by the cap.
* Clopper–Pearson interval (two-sided, a_j/2 in each tail), with B⁻¹(q; a, b) the Beta quantile:
      L = B⁻¹(a_j/2; S, n − S + 1)   (0 if S = 0),
      U = B⁻¹(1 − a_j/2; S + 1, n − S)   (1 if S = n).
  *Change 2*: a test's interval is intersected with its previous ones, so [L_i, U_i] only
  shrinks. On the event E that every interval ever computed covers its p_i,
  P(E) ≥ 1 − Σ a = 1 − ε by the union bound, and the intersection covers p_i too. Off E an
  intersection can be empty; it is then collapsed to the nearer old end point, which keeps the
  intervals nested.
* Classification. Let h(q) = {i : adjusted_i(q) ≤ α} be the procedure (Holm, BH or none, with
  the adjusted p-values of :func:`fairengine.multiplicity.adjust_pvalues`, the audit's rule).
  Holm and BH are *monotone*: q ≤ q' componentwise ⇒ h(q') ⊆ h(q). On E, L ≤ p ≤ U, so
      h(U) ⊆ h(p) ⊆ h(L):
  tests in h(U) are rejected by the ideal procedure ("reject"), tests outside h(L) are not
  ("fail_to_reject"), the rest are undecided and get the next batch. Because intervals are
  nested, decisions once taken stay taken and settled tests are never drawn again. Hence
      P(some "reject"/"fail_to_reject" differs from the decision on the ideal p-values) ≤ ε.
* Stop when no test is undecided or the schedule reaches ``max_resamples``. *Change 3*: tests
  still undecided at the cap are "undetermined", never "fail_to_reject" (a p-value on the
  threshold itself is never settled, and deciding one against a fixed threshold has infinite
  expected work: Hahn 2018). For them the result gives a plug-in estimate of the resamples
  that would settle them (see :func:`resamples_to_settle`).

:func:`besag_clifford_pvalue` is the single-test sequential p-value of Besag & Clifford (1991):
stop at the h-th exceedance.

References: Gandy, A. & Hahn, G. (2014) MMCTest — a safe algorithm for implementing multiple
Monte Carlo tests. Scand. J. Stat. 41:1083-1101. Gandy, A. & Hahn, G. (2016) A framework for
Monte Carlo based multiple testing. Scand. J. Stat. 43:1046-1063. Hahn, G. (2018) On the expected
runtime of multiple testing algorithms with bounded error (arXiv:1807.10801). Besag, J. &
Clifford, P. (1991) Sequential Monte Carlo p-values. Biometrika 78:301-304. Clopper, C. J. &
Pearson, E. S. (1934) Biometrika 26:404-413.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.special import betaincinv

from fairengine.errors import FairEngineError
from fairengine.multiplicity import METHODS, adjust_pvalues
from fairengine.results import encode_float

Procedure = Literal["holm", "bh", "none"]
McDecision = Literal["reject", "fail_to_reject", "undetermined"]
#: ``draw(indices, batch)``: for each test in ``indices``, draw ``batch`` new resamples and return
#: how many resampled statistics were ≥ the observed one (integer array, ``len(indices)``).
DrawExceedances = Callable[[np.ndarray, int], np.ndarray]
#: ``draw(batch)``: ``batch`` new resamples of one test; a boolean array, True where the resampled
#: statistic is ≥ the observed one, in the order drawn.
DrawIndicators = Callable[[int], np.ndarray]

_BISECTIONS = 50  # on c ∈ [0, 1]: τ to 1e-15
_LOG_BISECTIONS = 40  # on log n ∈ [0, log 1e15]: n to a relative 3e-11
_HUGE_N = 1e15


class SequentialMonteCarloError(FairEngineError):
    """Bad input to the sequential Monte Carlo engine (a spec field, ``n_tests`` or ``draw``)."""


def _err(name: str, expected: str, got: object) -> SequentialMonteCarloError:
    return SequentialMonteCarloError(f"{name} {expected}, got {got!r}")


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise _err(name, f"must be an integer >= {minimum}", value)
    return int(value)


def _check_open_unit(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise _err(name, "must be a number in (0, 1)", value)
    if not 0.0 < float(value) < 1.0:
        raise _err(name, "must lie in (0, 1)", value)
    return float(value)


@dataclass(frozen=True)
class SequentialSpec:
    """Settings of :func:`sequential_decisions` (see the module docstring for the formulas).

    ``alpha``: level of the multiplicity-adjusted decisions; ``procedure``: ``holm``, ``bh`` or
    ``none``; ``risk``: ε, bound on the probability that any settled decision differs from the
    ideal one; ``first_batch``, ``growth``: b_1 and g of the batch sizes b_j = round(b_1·g^(j−1));
    ``max_resamples``: the cap per test; ``spending_k``: k of ρ(n) = n/(n + k).
    """

    alpha: float = 0.05
    procedure: str = "holm"
    risk: float = 1e-3
    first_batch: int = 99
    growth: float = 2.0
    max_resamples: int = 99_999
    spending_k: float = 1000.0

    def __post_init__(self) -> None:
        _check_open_unit("alpha", self.alpha)
        _check_open_unit("risk", self.risk)
        if self.procedure not in METHODS:
            raise _err("procedure", f"must be one of {list(METHODS)}", self.procedure)
        _check_int("first_batch", self.first_batch, 1)
        _check_int("max_resamples", self.max_resamples, 1)
        if self.max_resamples < self.first_batch:
            raise _err(
                "max_resamples", f"must be >= first_batch ({self.first_batch})", self.max_resamples
            )
        g = self.growth
        if isinstance(g, bool) or not isinstance(g, int | float) or not 1.0 <= g <= 100.0:
            raise _err("growth", "must be a number in [1, 100]", g)
        k = self.spending_k
        if isinstance(k, bool) or not isinstance(k, int | float) or not 0 < k < math.inf:
            raise _err("spending_k", "must be a finite number > 0", k)
        if self.max_resamples / self.first_batch > 1e6 and g < 1.0 + 1e-3:
            raise _err("growth", "gives more than a million looks; use growth > 1", g)

    def schedule(self) -> np.ndarray:
        """Cumulative resamples n_(1) < … < n_(J) = ``max_resamples`` after each look."""
        totals: list[int] = []
        total, j = 0, 0
        while total < self.max_resamples:
            batch = max(1, round(self.first_batch * self.growth**j))
            total = min(self.max_resamples, total + batch)
            totals.append(total)
            j += 1
        return np.asarray(totals, dtype=np.int64)

    def look_levels(self, n_tests: int) -> np.ndarray:
        """Per-test error a_j spent at each look: (ε/m)·(ρ(n_(j)) − ρ(n_(j−1)))/ρ(n_(J))."""
        m = _check_int("n_tests", n_tests, 1)
        n = self.schedule().astype(np.float64)
        rho = n / (n + self.spending_k)
        spent = np.diff(np.r_[0.0, rho]) / rho[-1]
        return (self.risk / m) * spent


def clopper_pearson(
    exceedances: np.ndarray, resamples: np.ndarray, error: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Clopper–Pearson interval for p from S of n, error ``error`` (half per tail).

    L = B⁻¹(e/2; S, n − S + 1) (0 if S = 0), U = B⁻¹(1 − e/2; S + 1, n − S) (1 if S = n).
    ``exceedances`` may be non-integer (used by :func:`resamples_to_settle`).
    """
    s = np.asarray(exceedances, dtype=np.float64)
    n = np.asarray(resamples, dtype=np.float64)
    e = np.broadcast_to(np.asarray(error, dtype=np.float64), s.shape)
    s, n = np.broadcast_arrays(s, n)
    low = np.zeros(s.shape)
    high = np.ones(s.shape)
    pos = s > 0
    low[pos] = betaincinv(s[pos], n[pos] - s[pos] + 1.0, e[pos] / 2.0)
    below = s < n
    high[below] = betaincinv(s[below] + 1.0, n[below] - s[below], 1.0 - e[below] / 2.0)
    return low, high


def rejected_by(pvalues: np.ndarray, alpha: float, procedure: str) -> np.ndarray:
    """h(q): mask of the tests whose adjusted p-value is ≤ α (the audit's decision rule)."""
    return adjust_pvalues(np.asarray(pvalues, dtype=np.float64), procedure) <= alpha


def critical_values(
    pvalues: np.ndarray, indices: np.ndarray, alpha: float, procedure: str
) -> np.ndarray:
    """τ_i = sup{c : i ∈ h(q with q_i = c)} for each i in ``indices``, the others held at
    ``pvalues`` (bisection on c ∈ [0, 1]; h is monotone in q_i)."""
    return critical_values_of(
        lambda q: rejected_by(q, alpha, procedure), np.asarray(pvalues, dtype=np.float64), indices
    )


def critical_values_of(
    rejected: Callable[[np.ndarray], np.ndarray], pvalues: np.ndarray, indices: np.ndarray
) -> np.ndarray:
    """:func:`critical_values` for any monotone rule ``rejected(q) -> mask`` (bisection)."""
    q = np.asarray(pvalues, dtype=np.float64)
    out = np.empty(len(indices))
    for k, i in enumerate(indices):
        trial = q.copy()

        def rej(c: float, trial: np.ndarray = trial, i: int = int(i)) -> bool:
            trial[i] = c
            return bool(rejected(trial)[i])

        if rej(1.0):
            out[k] = 1.0
            continue
        if not rej(0.0):
            out[k] = 0.0
            continue
        lo, hi = 0.0, 1.0
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if rej(mid) else (lo, mid)
        out[k] = lo
    return out


def resamples_to_settle(p_hat: np.ndarray, tau: np.ndarray, error: float) -> np.ndarray:
    """Plug-in estimate of the resamples after which a Clopper–Pearson interval at ``error``,
    with S = p̂·n, excludes the critical value τ: the least n with U(n) ≤ τ (p̂ < τ) or L(n) > τ
    (p̂ > τ), by bisection on log n; ∞ when p̂ = τ or n would exceed 1e15."""
    p = np.asarray(p_hat, dtype=np.float64)
    t = np.asarray(tau, dtype=np.float64)
    out = np.full(p.shape, math.inf)

    def settled(n: np.ndarray, pp: np.ndarray, tt: np.ndarray) -> np.ndarray:
        low, high = clopper_pearson(pp * n, n, error)
        return np.where(pp < tt, high <= tt, low > tt)

    todo = p != t
    pp, tt = p[todo], t[todo]
    big = np.full(pp.shape, _HUGE_N)
    ok = settled(big, pp, tt)
    lo = np.zeros(pp.shape)  # log n known not to settle (n = 1 is treated as a lower bound)
    hi = np.full(pp.shape, math.log(_HUGE_N))
    for _ in range(_LOG_BISECTIONS):
        mid = 0.5 * (lo + hi)
        s = settled(np.exp(mid), pp, tt)
        hi = np.where(s, mid, hi)
        lo = np.where(s, lo, mid)
    res = np.where(ok, np.ceil(np.exp(hi)), math.inf)
    out[todo] = res
    return out


@dataclass(frozen=True)
class SequentialResult:
    """Outcome of :func:`sequential_decisions`; per-test arrays are in the tests' order.

    ``exceedances`` S_i and ``resamples`` n_i; ``pvalue_estimate`` (S_i + 1)/(n_i + 1);
    ``ci_low``/``ci_high`` the final (intersected) Clopper–Pearson bounds; ``decisions`` in
    {``reject``, ``fail_to_reject``, ``undetermined``}; ``resamples_needed_estimate`` NaN for
    settled tests, else :func:`resamples_to_settle` at the last look's level with the other
    tests at their estimates S/n (a value ≤ n_i means the test waits on other tests' intervals).
    ``open_per_look`` counts the tests drawn at each look.
    """

    spec: SequentialSpec
    exceedances: np.ndarray
    resamples: np.ndarray
    pvalue_estimate: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    decisions: tuple[McDecision, ...]
    resamples_needed_estimate: np.ndarray
    open_per_look: tuple[int, ...] = field(default=())

    @property
    def n_tests(self) -> int:
        return len(self.decisions)

    @property
    def total_resamples(self) -> int:
        return int(self.resamples.sum())

    def mask(self, decision: McDecision) -> np.ndarray:
        """Boolean mask of the tests with ``decision``."""
        return np.asarray([d == decision for d in self.decisions], dtype=bool)

    @property
    def all_settled(self) -> bool:
        return "undetermined" not in self.decisions

    def to_dict(self) -> dict[str, Any]:
        s = self.spec
        return {
            "method": "MMCTest (Gandy & Hahn 2014)",
            "spec": {
                "alpha": s.alpha,
                "procedure": s.procedure,
                "risk": s.risk,
                "first_batch": s.first_batch,
                "growth": s.growth,
                "max_resamples": s.max_resamples,
                "spending_k": s.spending_k,
            },
            "total_resamples": self.total_resamples,
            "open_per_look": list(self.open_per_look),
            "tests": [
                {
                    "exceedances": int(self.exceedances[i]),
                    "resamples": int(self.resamples[i]),
                    "pvalue_estimate": encode_float(self.pvalue_estimate[i]),
                    "ci_low": encode_float(self.ci_low[i]),
                    "ci_high": encode_float(self.ci_high[i]),
                    "decision": self.decisions[i],
                    "resamples_needed_estimate": encode_float(self.resamples_needed_estimate[i]),
                }
                for i in range(self.n_tests)
            ],
        }


def _checked_counts(raw: object, size: int, batch: int) -> np.ndarray:
    counts = np.asarray(raw)
    if counts.shape != (size,):
        raise _err("draw", f"must return an array of shape ({size},)", f"shape {counts.shape}")
    if counts.dtype == bool or not np.issubdtype(counts.dtype, np.number):
        raise _err("draw", "must return integer exceedance counts", f"dtype {counts.dtype}")
    values = counts.astype(np.float64)
    if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
        raise _err("draw", "must return whole-number counts", counts[:5].tolist())
    if np.any(values < 0) or np.any(values > batch):
        bad = values[(values < 0) | (values > batch)][:5].tolist()
        raise _err("draw", f"must return counts in [0, batch={batch}]", bad)
    return values.astype(np.int64)


def sequential_decisions(
    draw: DrawExceedances, n_tests: int, spec: SequentialSpec | None = None
) -> SequentialResult:
    """Decide ``n_tests`` resampling tests at their multiplicity-adjusted level with MMCTest.

    At each look, ``draw(indices, batch)`` is called once with the (sorted) indices of the tests
    still undecided and the batch size; it returns their new exceedance counts. See the module
    docstring for the guarantee: P(any settled decision differs from the procedure applied to
    the ideal p-values) ≤ ``spec.risk``.
    """
    spec = SequentialSpec() if spec is None else spec
    if not isinstance(spec, SequentialSpec):
        raise _err("spec", "must be a SequentialSpec", type(spec).__name__)
    if not callable(draw):
        raise _err("draw", "must be callable as draw(indices, batch)", draw)
    m = _check_int("n_tests", n_tests, 1)
    schedule = spec.schedule()
    levels = spec.look_levels(m)
    s = np.zeros(m, dtype=np.int64)
    n = np.zeros(m, dtype=np.int64)
    low = np.zeros(m)
    high = np.ones(m)
    open_ = np.ones(m, dtype=bool)
    open_per_look: list[int] = []
    previous = 0
    for n_j, a_j in zip(schedule, levels, strict=True):
        idx = np.flatnonzero(open_)
        if idx.size == 0:
            break
        batch = int(n_j - previous)
        previous = int(n_j)
        open_per_look.append(int(idx.size))
        s[idx] += _checked_counts(draw(idx.copy(), batch), idx.size, batch)
        n[idx] = n_j
        new_low, new_high = clopper_pearson(s[idx], n[idx], a_j)
        # Nested intervals: intersect, and collapse an empty intersection (only possible off the
        # coverage event) onto the nearer old end point.
        lo = np.minimum(np.maximum(low[idx], new_low), high[idx])
        high[idx] = np.maximum(np.minimum(high[idx], new_high), lo)
        low[idx] = lo
        settled_reject = rejected_by(high, spec.alpha, spec.procedure)
        maybe_reject = rejected_by(low, spec.alpha, spec.procedure)
        open_ &= maybe_reject & ~settled_reject
    reject = rejected_by(high, spec.alpha, spec.procedure)
    keep = ~rejected_by(low, spec.alpha, spec.procedure)
    decisions: tuple[McDecision, ...] = tuple(
        "reject" if r else "fail_to_reject" if k else "undetermined"
        for r, k in zip(reject, keep, strict=True)
    )
    needed = np.full(m, math.nan)
    undetermined = np.flatnonzero(~reject & ~keep)
    if undetermined.size:
        p_hat = s / np.maximum(n, 1)
        tau = critical_values(p_hat, undetermined, spec.alpha, spec.procedure)
        needed[undetermined] = resamples_to_settle(p_hat[undetermined], tau, float(levels[-1]))
    return SequentialResult(
        spec=spec,
        exceedances=s,
        resamples=n,
        pvalue_estimate=(s + 1.0) / (n + 1.0),
        ci_low=low,
        ci_high=high,
        decisions=decisions,
        resamples_needed_estimate=needed,
        open_per_look=tuple(open_per_look),
    )


@dataclass(frozen=True)
class BesagCliffordResult:
    """Besag & Clifford (1991) sequential p-value of one test.

    ``pvalue`` = h/L when the h-th exceedance came at resample L (``stopped_early``), else
    (S + 1)/(N + 1) after all N = ``max_resamples`` resamples with S < h exceedances.
    ``resamples`` is L or N; ``resamples_drawn`` counts those drawn past L in the last batch too.
    """

    pvalue: float
    exceedances: int
    resamples: int
    resamples_drawn: int
    stopped_early: bool


def besag_clifford_pvalue(
    draw: DrawIndicators, h: int = 10, max_resamples: int = 999, batch: int = 100
) -> BesagCliffordResult:
    """Sequential p-value of Besag & Clifford (1991): resample until h exceedances or N.

    Under the null, with continuous statistics, P(p ≤ x) = x at each value x the p-value can
    take (h/L for L = h … N, and (S + 1)/(N + 1) for S < h), so it is exact like the fixed-N
    p-value (S + 1)/(N + 1), which it equals when h > N. Resamples are drawn ``batch`` at a time.
    """
    h = _check_int("h", h, 1)
    big_n = _check_int("max_resamples", max_resamples, 1)
    batch = _check_int("batch", batch, 1)
    if not callable(draw):
        raise _err("draw", "must be callable as draw(batch)", draw)
    found, used = 0, 0
    while used < big_n:
        size = min(batch, big_n - used)
        ind = np.asarray(draw(size))
        if ind.shape != (size,) or ind.dtype != bool:
            raise _err(
                "draw",
                f"must return a boolean array of shape ({size},)",
                f"{ind.dtype} {ind.shape}",
            )
        running = found + np.cumsum(ind)
        hit = np.flatnonzero(running >= h)
        if hit.size:
            stop = used + int(hit[0]) + 1
            return BesagCliffordResult(h / stop, h, stop, used + size, True)
        found = int(running[-1])
        used += size
    return BesagCliffordResult((found + 1) / (big_n + 1), found, big_n, big_n, False)
