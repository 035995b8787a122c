r"""The audit's decisions: one family, exact and Monte-Carlo p-values, and an honest third state.

Every deciding finding of an audit is one test of one family, adjusted by the audit's procedure
(Holm, Benjamini–Hochberg or none; :mod:`fairengine.multiplicity`) at level α. Some p-values are
exact functions of the data (Wald, score-interval inversion, Bayesian tail areas); others are
Monte-Carlo estimates from resamples (permutation tests, FlipTest's null refits). A resampling
p-value p̂ = (S + 1)/(n + 1) estimates the *ideal* p-value p = P(T* ≥ t_obs); with a fixed n it
can never go below 1/(n + 1), so after a Holm adjustment strong evidence can read "not rejected"
merely because n was small, and a p-value near its threshold lands on either side by noise.

This module decides the whole family with MMCTest (Gandy & Hahn 2014, 2016; the sequential
engine of :mod:`fairengine.sequential_mc`), extended to a *mixed* family:

* **Intervals.** An exact p-value is the point interval [p, p]. A Monte-Carlo p-value made of
  parts k (a FlipTest rate is tested against two nulls and p = max(p_perm, p_self)) has, per
  part, the Clopper–Pearson interval [L_k, U_k] of its S_k exceedances in n_k resamples, and the
  test's interval is [max_k L_k, max_k U_k] (max is monotone).
* **Error spending.** With M Monte-Carlo parts in the family and risk ε, part k spends ε/M over
  its looks: look j, at n_(j) resamples, has error (ε/M)(ρ(n_(j)) − ρ(n_(j−1)))/ρ(n_(J)),
  ρ(n) = n/(n + k_ρ), where n_(1) is the resamples the method drew itself and the later looks
  grow geometrically (``growth``) up to the cap n_(J) (``max_resamples``; n_(J) = n_(1) for a part
  that cannot draw more). The schedule is fixed before any data is seen, so by the union bound
  every interval ever computed covers its p with probability ≥ 1 − ε, under any dependence
  between tests. Intervals are intersected across looks (nested).
* **Classification.** h(q) = {i : adjusted_i(q) ≤ α}. Holm and BH are monotone, so on the
  coverage event h(U) ⊆ h(p) ⊆ h(L): tests in h(U) are **reject**, tests outside h(L) are
  **fail_to_reject**, and the others are open. Open tests whose parts can draw more resamples
  get their next batch; the loop ends when nothing open can draw more. Hence
  P(any reject/fail_to_reject differs from the decision on the ideal p-values) ≤ ε.
* **Undetermined.** A test still open at the end is **undetermined (Monte-Carlo resolution)**,
  never "not rejected": the data may hold strong evidence the resamples could not resolve. It
  comes with the resamples that would settle it (a plug-in estimate:
  :func:`fairengine.sequential_mc.resamples_to_settle` at its critical value, the other tests at
  their estimates).

The point p-values shown beside the decisions are the exact p-values and p̂ = max_k
(S_k + 1)/(n_k + 1); their adjusted values use the same procedure. A decision is taken on the
intervals, so a Monte-Carlo test can show an adjusted p̂ ≤ α and still be undetermined.

References: Gandy, A. & Hahn, G. (2014) MMCTest — a safe algorithm for implementing multiple
Monte Carlo tests. Scand. J. Stat. 41:1083-1101. Gandy, A. & Hahn, G. (2016) A framework for
Monte Carlo based multiple testing. Scand. J. Stat. 43:1046-1063. Hahn, G. (2018) On the expected
runtime of multiple testing algorithms with bounded error. arXiv:1807.10801.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from fairengine.errors import FairEngineError
from fairengine.multiplicity import AUDIT_PROCEDURES, adjust_pvalues
from fairengine.results import ResamplingPart as MonteCarloPart
from fairengine.sequential_mc import clopper_pearson, critical_values_of, resamples_to_settle

FamilyDecision = Literal["reject", "fail_to_reject", "undetermined"]


class DecisionSettingsError(FairEngineError):
    """Invalid decision settings (names the setting and what was expected)."""


@dataclass(frozen=True)
class ResamplingSettings:
    """How Monte-Carlo p-values are decided (config section ``decisions``).

    ``risk``: ε, the bound on the probability that any settled decision differs from the one the
    procedure takes on the ideal p-values (default 1e-3). ``growth``: each further batch of a test
    is ``growth`` times the previous one (first further batch = the resamples the method drew).
    ``max_resamples``: the most resamples one test may reach by drawing more (the cap).
    ``spending_k``: k of ρ(n) = n/(n + k) (10,000; ``simctest`` uses 1,000, which spends two
    thirds of the error at the audit's first look of 1,999 resamples, where only tests far from
    their threshold settle; 10,000 keeps more for the looks where strong tests are certified,
    and cut the work by 40 % in both scenarios of ``tests/test_decisions.py``).
    """

    risk: float = 1e-3
    growth: float = 2.0
    max_resamples: int = 99_999
    spending_k: float = 10_000.0

    def __post_init__(self) -> None:
        r = self.risk
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0.0 < float(r) < 1.0:
            raise DecisionSettingsError(f"decisions.resampling_risk must lie in (0, 1), got {r!r}")
        g = self.growth
        if isinstance(g, bool) or not isinstance(g, int | float) or not 1.0 < float(g) <= 100.0:
            raise DecisionSettingsError(f"decisions.growth must lie in (1, 100], got {g!r}")
        c = self.max_resamples
        if isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 1:
            raise DecisionSettingsError(
                f"decisions.max_resamples must be an integer >= 1, got {c!r}"
            )
        k = self.spending_k
        if isinstance(k, bool) or not isinstance(k, int | float) or not 0 < k < math.inf:
            raise DecisionSettingsError(f"decisions.spending_k must be a number > 0, got {k!r}")

    def schedule(self, first: int, can_extend: bool, cap: int | None = None) -> np.ndarray:
        """Cumulative resamples n_(1) = ``first`` < … < n_(J) of one part (fixed in advance),
        n_(J) = the smaller of ``max_resamples`` and the part's own ``cap``."""
        top = self.max_resamples if cap is None else min(self.max_resamples, int(cap))
        if not can_extend or first >= top:
            return np.asarray([first], dtype=np.int64)
        totals = [first]
        batch = float(first)
        while totals[-1] < top:
            batch *= self.growth
            totals.append(min(top, totals[-1] + max(1, round(batch))))
        return np.asarray(totals, dtype=np.int64)

    def look_errors(self, schedule: np.ndarray, n_parts: int) -> np.ndarray:
        """Error spent at each look: (ε/M)(ρ(n_(j)) − ρ(n_(j−1)))/ρ(n_(J))."""
        n = schedule.astype(np.float64)
        rho = n / (n + self.spending_k)
        return (self.risk / n_parts) * np.diff(np.r_[0.0, rho]) / rho[-1]


@dataclass(frozen=True)
class FamilyTest:
    """One test of the family: an exact ``pvalue``, or Monte-Carlo ``parts`` (p = max of parts).

    ``key`` names the test for :class:`Resampler` callbacks.
    """

    key: str
    pvalue: float | None = None
    parts: tuple[MonteCarloPart, ...] = ()
    block: str | None = None
    """Under ``procedure="maxt"``: the joint permutation block of the test (its p-value is then
    the block's successive-maximum exceedance probability p̃, see :func:`block_adjusted`);
    ``None``: a block of its own."""
    rank: int = 0
    """Position of the test in its block's step-down order (most significant first)."""

    @property
    def monte_carlo(self) -> bool:
        return bool(self.parts)


class Resampler(Protocol):
    """Draws more resamples for the Monte-Carlo tests it knows (a resampler whose resamples
    are costly may also bound them per test: :class:`BoundedResampler`)."""

    def can_extend(self, key: str) -> bool:
        """Whether test ``key`` can draw more resamples."""
        ...

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        """Exceedances among ``batch`` new resamples of part ``part`` of test ``key``; ``start``
        is the number already drawn (each (key, part, start) must be an independent stream).
        Called from several threads at once for different tests (thread-safe)."""
        ...


SETTINGS_CAP = "decisions.max_resamples"
"""The setting that caps every test's resamples unless its method sets its own cap."""


@runtime_checkable
class BoundedResampler(Resampler, Protocol):
    """A :class:`Resampler` with its own cap per test (e.g. FlipTest's map refits)."""

    def max_resamples(self, key: str) -> int | None:
        """The most resamples each part of test ``key`` may reach (None: the settings' cap)."""
        ...

    def cap_setting(self, key: str) -> str:
        """The configuration setting that sets :meth:`max_resamples` (named to the user when
        the cap stops an open decision, e.g. ``methods.fliptest.max_null_refits``)."""
        ...


class Resamplers:
    """Several methods' resamplers as one: each test goes to the first that can extend it."""

    def __init__(self, *resamplers: Resampler | None) -> None:
        self.resamplers = [r for r in resamplers if r is not None]

    def _owner(self, key: str) -> Resampler | None:
        return next((r for r in self.resamplers if r.can_extend(key)), None)

    def can_extend(self, key: str) -> bool:
        return self._owner(key) is not None

    def max_resamples(self, key: str) -> int | None:
        owner = self._owner(key)
        return owner.max_resamples(key) if isinstance(owner, BoundedResampler) else None

    def cap_setting(self, key: str) -> str:
        owner = self._owner(key)
        if isinstance(owner, BoundedResampler) and owner.max_resamples(key) is not None:
            return owner.cap_setting(key)
        return SETTINGS_CAP

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        owner = self._owner(key)
        if owner is None:
            raise KeyError(f"no resampler can draw more for test {key!r}")
        return owner.draw(key, part, start, batch)


@dataclass(frozen=True)
class TestDecision:
    """The decision on one test and the Monte-Carlo evidence behind it."""

    key: str
    decision: FamilyDecision
    pvalue: float
    adjusted_pvalue: float
    pvalue_low: float
    pvalue_high: float
    parts: tuple[MonteCarloPart, ...] = ()
    resamples_needed: float | None = None
    """For an undetermined test: the resamples (per part) that would settle it (inf if it sits
    on its critical value); None otherwise."""
    resample_cap: int = 0
    """The most resamples a part of this test could reach (its schedule's last look)."""
    cap_setting: str = SETTINGS_CAP
    """The setting that sets ``resample_cap`` (the audit's, or the method's own per-test cap)."""

    @property
    def resamples(self) -> int:
        return max((p.resamples for p in self.parts), default=0)


@dataclass(frozen=True)
class FamilyResult:
    """Decisions of the whole family, in the input order, and what it cost."""

    decisions: tuple[TestDecision, ...]
    alpha: float
    procedure: str
    settings: ResamplingSettings
    resamples_drawn: int = 0
    looks: int = 0
    open_per_look: tuple[int, ...] = field(default=())

    def count(self, decision: FamilyDecision) -> int:
        return sum(1 for d in self.decisions if d.decision == decision)


def _check(tests: Sequence[FamilyTest], alpha: float, procedure: str) -> None:
    if not 0.0 < float(alpha) < 1.0:
        raise DecisionSettingsError(f"alpha must lie in (0, 1), got {alpha!r}")
    if procedure not in PROCEDURES:
        raise DecisionSettingsError(
            f"multiplicity must be one of {list(PROCEDURES)}, got {procedure!r}"
        )
    keys = [t.key for t in tests]
    if len(set(keys)) != len(keys):
        raise DecisionSettingsError("every test of the family needs a distinct key")
    for t in tests:
        if t.monte_carlo == (t.pvalue is not None):
            raise DecisionSettingsError(
                f"test {t.key!r}: give either an exact pvalue or Monte-Carlo parts"
            )
        if t.pvalue is not None and not 0.0 <= t.pvalue <= 1.0:
            raise DecisionSettingsError(f"test {t.key!r}: pvalue {t.pvalue!r} outside [0, 1]")
        for p in t.parts:
            if p.resamples < 1 or not 0 <= p.exceedances <= p.resamples:
                raise DecisionSettingsError(
                    f"test {t.key!r}, part {p.name!r}: needs 0 <= exceedances <= resamples "
                    f">= 1, got {p.exceedances} of {p.resamples}"
                )


PROCEDURES: tuple[str, ...] = AUDIT_PROCEDURES


def block_adjusted(
    q: np.ndarray, blocks: Sequence[int], ranks: Sequence[int] | None = None
) -> np.ndarray:
    """Adjusted p-values of the step-down procedure over blocks (``multiplicity: maxt``).

    Each block B_k of tests (a joint permutation family; a test outside any family is a block of
    one) carries the weight |B_k|. While tests remain, block k's next test j (in step-down
    order) has the local p-value q_j = P(max over the block's tests at or after j of the
    permuted statistic ≥ t_j) (Westfall–Young maxT, step-down) and is rejected at level α when

        q_j ≤ α · |B_k| / Σ_{blocks l with tests left} |B_l|.

    This is the sequentially rejective procedure of Goeman & Solari (2010) for the local tests
    "some block's maxT p-value ≤ α |B_k| / Σ|B_l|": by the union bound the local test of the
    true nulls has level α (each block's maxT p-value is valid under subset pivotality), and it
    is monotone (fewer tests left ⇒ smaller maxima and a smaller denominator), so the
    family-wise error is at most α. With every block of size one it is exactly Holm's
    procedure. The adjusted p-value of a test is the least α rejecting it: process tests in
    increasing q_j/|B_k| (the next test of each block), each adjusted to the running maximum of
    q_j Σ|B_l|/|B_k|.
    """
    q = np.asarray(q, dtype=np.float64)
    m = q.size
    block_ids = np.asarray(blocks)
    rank = np.zeros(m, dtype=np.int64) if ranks is None else np.asarray(ranks, dtype=np.int64)
    members: dict[Any, list[int]] = {}
    for i in np.lexsort((np.arange(m), rank)):
        members.setdefault(block_ids[i].item(), []).append(int(i))
    size = {k: len(v) for k, v in members.items()}
    total = float(m)
    heap: list[tuple[float, int, Any]] = []
    for n_k, (k, v) in enumerate(members.items()):
        heapq.heappush(heap, (q[v[0]] / size[k], n_k, k))
    pointer = dict.fromkeys(members, 0)
    out = np.empty(m)
    running = 0.0
    while heap:
        ratio, n_k, k = heapq.heappop(heap)
        i = members[k][pointer[k]]
        running = max(running, min(1.0, ratio * total))
        out[i] = running
        pointer[k] += 1
        if pointer[k] < size[k]:
            heapq.heappush(heap, (q[members[k][pointer[k]]] / size[k], n_k, k))
        else:
            total -= size[k]
    return out


def _rule(
    procedure: str, alpha: float, blocks: Sequence[int], ranks: Sequence[int]
) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """(adjusted p-values, rejected mask) of the family's procedure, as functions of q."""
    if procedure == "maxt":

        def adjusted(q: np.ndarray) -> np.ndarray:
            return block_adjusted(q, blocks, ranks)
    else:

        def adjusted(q: np.ndarray) -> np.ndarray:
            return adjust_pvalues(q, procedure)

    def rejected(q: np.ndarray) -> np.ndarray:
        return adjusted(q) <= alpha

    return adjusted, rejected


DRAW_WORKERS = 4
"""At most this many threads draw one look's batches at once: each batch is its own seeded
stream, so the exceedances do not depend on the order or the number of threads."""


MIN_WINDOW = 0.2
"""Shortest interval in seconds between two readings of the machine's CPU time that
:func:`_idle_cores` turns into a new estimate (the kernel counts in 10 ms ticks)."""


@dataclass(frozen=True)
class _CpuReading:
    """A reading of ``/proc/stat`` and of this process's CPU time at one moment."""

    wall: float  # time.monotonic()
    busy: float  # CPU seconds of all cores outside idle and iowait since boot
    own: float  # CPU seconds of this process (every thread) and of its child processes


def _children_cpu() -> float:
    """CPU seconds of this process's live child processes (the worker processes that draw
    FlipTest's refits, Prefect's embedded server): the audit's own work, not other load."""
    import psutil

    total = 0.0
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                t = child.cpu_times()
                total += t.user + t.system
    return total


def _cpu_reading(stat: Path) -> _CpuReading:
    fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    own = time.process_time() + _children_cpu()
    return _CpuReading(time.monotonic(), (sum(fields[:8]) - idle) / ticks, own)


_LAST: dict[str, Any] = {}
"""The last reading (``"reading"``) and the estimate made from it (``"estimate"``)."""


def _idle_cores(stat: Path = Path("/proc/stat")) -> int:
    """Cores not busy with other work: the core count minus the cores that *other* processes
    kept busy since the previous reading (all cores' busy CPU time from ``/proc/stat`` less
    this process's own CPU time and its children's, over the wall time between the readings),
    rounded, at least 1. The first reading is taken when this module is imported, so the first
    look's estimate covers the audit's method steps. Readings closer than :data:`MIN_WINDOW`
    keep the last estimate; without ``/proc/stat``, the core count.

    On a busy 2-core machine two drawing threads made the decide step slower (23.7 s against
    17.4 s on one); on idle cores they share the work. An average over an interval, not an
    instantaneous count of runnable threads (``/proc/loadavg``, used before): one other thread
    of the audit or of Prefect's server that happened to be runnable at the instant of reading
    halved the drawing threads of an otherwise idle machine. No waiting: a look costs two
    small file reads, also where the draws are cheap and the looks many (simulations)."""
    cores = os.cpu_count() or 1
    try:
        now = _cpu_reading(stat)
    except (OSError, IndexError, ValueError):
        return cores
    prev = _LAST.get("reading")
    if prev is None or now.wall - prev.wall < MIN_WINDOW:
        if prev is None:
            _LAST["reading"] = now
        return int(_LAST.get("estimate", cores))
    others = max(0.0, (now.busy - prev.busy) - (now.own - prev.own)) / (now.wall - prev.wall)
    estimate = max(1, min(cores, round(cores - others)))
    _LAST.update(reading=now, estimate=estimate)
    return estimate


with contextlib.suppress(OSError, IndexError, ValueError):
    _LAST["reading"] = _cpu_reading(Path("/proc/stat"))


def _draw_look(resampler: Resampler, requests: list[tuple[str, str, int, int]]) -> list[int]:
    """Exceedances for each (key, part, start, batch) of one look, on up to
    :data:`DRAW_WORKERS` threads (no more than the idle cores)."""
    workers = min(DRAW_WORKERS, len(requests))
    if workers > 1:  # measured only when there is a choice
        workers = min(workers, _idle_cores())
    if workers <= 1:
        return [int(resampler.draw(*r)) for r in requests]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return [int(x) for x in pool.map(lambda r: resampler.draw(*r), requests)]


def _worth_drawing(
    rejected_by: Callable[[np.ndarray], np.ndarray],
    open_tests: np.ndarray,
    low: np.ndarray,
    exact: np.ndarray,
    s: np.ndarray,
    n: np.ndarray,
    own: np.ndarray,
    look: np.ndarray,
    schedules: list[np.ndarray],
    errors: list[np.ndarray],
) -> np.ndarray:
    """Which open tests are worth more resamples: those that can still be rejected at their
    cap, and those that cannot but look not rejected (p̂ = S/n; more resamples would settle
    them). An open test that looks rejected but cannot be certified even if every resample up
    to its cap fell short of the observed statistic (its Clopper–Pearson upper bound at the
    remaining looks, the other tests at their most favourable lower bounds) stays
    *undetermined* without drawing: "its smallest attainable adjusted p-value is above α".
    Only the work depends on this; every decision is still taken on the spent intervals."""
    worth = open_tests.copy()
    phat = exact.copy()
    best = np.full(exact.shape, np.nan)
    for i in np.unique(own):
        sel = np.flatnonzero(own == i)
        phat[i] = float((s[sel] / n[sel]).max())
        highs = []
        for k in sel:
            rest = schedules[k][look[k] + 1 :]
            if rest.size == 0:
                highs.append(1.0)  # cannot draw more: nothing to attain
                continue
            _, hi = clopper_pearson(np.full(rest.size, s[k]), rest, errors[k][look[k] + 1 :])
            highs.append(float(hi.min()))
        best[i] = max(highs)
    looks_rejected = rejected_by(phat)
    for i in np.flatnonzero(open_tests & ~np.isnan(best)):
        q = low.copy()
        q[i] = best[i]
        if not rejected_by(q)[i] and looks_rejected[i]:
            worth[i] = False
    return worth


def decide_family(
    tests: Sequence[FamilyTest],
    alpha: float = 0.05,
    procedure: str = "holm",
    settings: ResamplingSettings | None = None,
    resampler: Resampler | None = None,
) -> FamilyResult:
    """Decide every test of the family (module docstring): reject, fail_to_reject, or
    undetermined, drawing more resamples through ``resampler`` where a decision is open."""
    settings = settings or ResamplingSettings()
    _check(tests, alpha, procedure)
    m = len(tests)
    if m == 0:
        return FamilyResult((), alpha, procedure, settings)
    block_index: dict[str, int] = {}
    blocks = [
        block_index.setdefault(t.block, len(block_index)) if t.block is not None else -1 - i
        for i, t in enumerate(tests)
    ]
    adjusted_of, rejected_by = _rule(procedure, alpha, blocks, [t.rank for t in tests])
    # flatten the Monte-Carlo parts
    owner: list[int] = []
    names: list[str] = []
    s_list: list[int] = []
    n_list: list[int] = []
    for i, t in enumerate(tests):
        for p in t.parts:
            owner.append(i)
            names.append(p.name)
            s_list.append(int(p.exceedances))
            n_list.append(int(p.resamples))
    n_parts = len(owner)
    own = np.asarray(owner, dtype=np.int64)
    s = np.asarray(s_list, dtype=np.int64)
    n = np.asarray(n_list, dtype=np.int64)
    extendable = np.asarray(
        [resampler is not None and resampler.can_extend(tests[i].key) for i in owner], dtype=bool
    )
    capped = isinstance(resampler, BoundedResampler)
    caps = {
        i: resampler.max_resamples(tests[i].key) if capped else None  # type: ignore[union-attr]
        for i in set(owner)
        if extendable[owner.index(i)]
    }
    schedules = [
        settings.schedule(int(n[k]), bool(extendable[k]), caps.get(owner[k]))
        for k in range(n_parts)
    ]
    errors = [settings.look_errors(sch, max(n_parts, 1)) for sch in schedules]
    look = np.zeros(n_parts, dtype=np.int64)
    part_low = np.zeros(n_parts)
    part_high = np.ones(n_parts)

    def update(ks: np.ndarray) -> None:
        """Intersect each part's interval with its Clopper–Pearson interval at this look."""
        level = np.asarray([errors[k][look[k]] for k in ks])
        lo, hi = clopper_pearson(s[ks], n[ks], level)
        new_lo = np.minimum(np.maximum(part_low[ks], lo), part_high[ks])
        part_high[ks] = np.maximum(np.minimum(part_high[ks], hi), new_lo)
        part_low[ks] = new_lo

    exact = np.asarray([t.pvalue if t.pvalue is not None else np.nan for t in tests])

    def bounds() -> tuple[np.ndarray, np.ndarray]:
        low = exact.copy()
        high = exact.copy()
        for i in np.unique(own):
            sel = own == i
            low[i] = part_low[sel].max()
            high[i] = part_high[sel].max()
        return low, high

    update(np.arange(n_parts))
    drawn = 0
    open_per_look: list[int] = []
    while True:
        low, high = bounds()
        settled_reject = rejected_by(high)
        maybe_reject = rejected_by(low)
        open_tests = maybe_reject & ~settled_reject
        if n_parts and open_tests.any():
            open_tests &= _worth_drawing(
                rejected_by, open_tests, low, exact, s, n, own, look, schedules, errors
            )
        todo = (
            np.flatnonzero(
                open_tests[own] & extendable & (look < np.asarray([len(x) for x in schedules]) - 1)
            )
            if n_parts
            else np.array([], dtype=np.int64)
        )
        if todo.size == 0:
            break
        open_per_look.append(int(np.unique(own[todo]).size))
        assert resampler is not None
        batches = {int(k): int(schedules[k][look[k] + 1] - n[k]) for k in todo}
        exceedances = _draw_look(
            resampler, [(tests[own[k]].key, names[k], int(n[k]), batches[k]) for k in todo]
        )
        for k, got in zip(todo, exceedances, strict=True):
            batch = batches[int(k)]
            if not 0 <= got <= batch:
                raise DecisionSettingsError(
                    f"resampler returned {got} exceedances for a batch of {batch} "
                    f"({tests[own[k]].key!r}, part {names[k]!r})"
                )
            s[k] += got
            n[k] += batch
            drawn += batch
            look[k] += 1
        update(todo)

    low, high = bounds()
    reject = rejected_by(high)
    keep = ~rejected_by(low)
    point = exact.copy()
    phat = exact.copy()  # S/n for the critical-value search
    for i in np.unique(own):
        sel = own == i
        point[i] = float(((s[sel] + 1.0) / (n[sel] + 1.0)).max())
        phat[i] = float((s[sel] / n[sel]).max())
    adjusted = adjusted_of(point)
    undetermined = np.flatnonzero(~reject & ~keep)
    needed: dict[int, float] = {}
    if undetermined.size:
        tau = critical_values_of(rejected_by, phat, undetermined)
        for u, t_i in zip(undetermined, tau, strict=True):
            sel = np.flatnonzero(own == u)
            if sel.size == 0:  # an exact test whose decision waits on Monte-Carlo tests
                continue
            per = np.asarray(
                [
                    float(
                        resamples_to_settle(
                            np.asarray([s[k] / n[k]]), np.asarray([t_i]), float(errors[k][-1])
                        )[0]
                    )
                    for k in sel
                ]
            )
            ph = s[sel] / n[sel]
            if phat[u] < t_i:  # every part must fall below τ
                needed[int(u)] = float(per.max())
            else:  # one part above τ suffices
                above = per[ph > t_i]
                needed[int(u)] = float(above.min()) if above.size else math.inf
    out: list[TestDecision] = []
    for i, t in enumerate(tests):
        sel = np.flatnonzero(own == i)
        decision: FamilyDecision = (
            "reject" if reject[i] else "fail_to_reject" if keep[i] else "undetermined"
        )
        out.append(
            TestDecision(
                key=t.key,
                decision=decision,
                pvalue=float(point[i]),
                adjusted_pvalue=float(adjusted[i]),
                pvalue_low=float(low[i]),
                pvalue_high=float(high[i]),
                parts=tuple(MonteCarloPart(names[k], int(s[k]), int(n[k])) for k in sel),
                resamples_needed=needed.get(i),
                resample_cap=max((int(schedules[k][-1]) for k in sel), default=0),
                cap_setting=(  # the setting of the cap that binds: the smaller one
                    resampler.cap_setting(t.key)  # type: ignore[union-attr]
                    if capped and (caps.get(i) or math.inf) < settings.max_resamples
                    else SETTINGS_CAP
                ),
            )
        )
    return FamilyResult(
        decisions=tuple(out),
        alpha=float(alpha),
        procedure=procedure,
        settings=settings,
        resamples_drawn=drawn,
        looks=len(open_per_look),
        open_per_look=tuple(open_per_look),
    )
