"""The subgroup scan and its selection-adjusted p-value.

**Observed scan.** For every subgroup A of the search space, Z_A = (O_A − E_A)/√V_A
(:mod:`~fairengine.subgroup_scan.statistics`) and its extremeness t_A (Z, −Z or |Z|); the scan
statistic is T = max_A t_A.

**Calibrated p-value of the maximum.** A naive p-value of the best subgroup ignores that it was
chosen out of S: under the null its p-value is far below uniform. The scan is re-run on null
data (:mod:`~fairengine.subgroup_scan.null`): p = P(T* ≥ T) with T* the maximum of a null
scan, estimated by the exceedances of B null draws, p̂ = (S + 1)/(B + 1), and decided at
``alpha`` by the project's sequential Monte-Carlo scheme (:func:`fairengine.sequential_mc.
sequential_decisions`, one test): batches are drawn until the Clopper–Pearson interval of p
excludes ``alpha`` (or the cap is reached: ``undetermined``). This is the randomization test of
Kulldorff's spatial scan statistic (Kulldorff 1997) and of MDSS (Zhang & Neill 2016 §4, who
calibrate by parametric bootstrap of y ~ Bernoulli(p)); in exact mode it is exact for any B
(Phipson & Smyth 2010).

**Top-k subgroups.** Subgroups are ranked by t; the top k are taken greedily, skipping any whose
Jaccard similarity |A∩B|/|A∪B| with an already chosen one exceeds ``jaccard``. Each gets the
Westfall–Young step-down maxT adjusted p-value over *all* S subgroups (Westfall & Young 1993,
Algorithm 2.8; :mod:`fairengine.maxt`): with t_(1) ≥ … ≥ t_(S) and u_{b,j} = max_{k ≥ j}
t*_{b,(k)}, the reported subgroups at ranks r_1 < … < r_k get

    p̃_j = (1 + #{b : u_{b,r_l} ≥ t_(r_l) for some l ≤ j}) / (B + 1).

Westfall & Young's p̃_j = max_{l ≤ j} (1 + #{b : u_{b,r_l} ≥ t_(r_l)})/(B + 1) estimates
max_l P(A_l); ours estimates P(∪_{l ≤ j} A_l) ≥ max_l P(A_l), so it is a (slightly)
conservative step-down p-value, monotone in j by construction, and, being the frequency of a
per-draw event, it is extended additively by more draws (the audit's sequential decisions,
:class:`~fairengine.subgroup_scan.resampler.SubgroupScanResampler`). p̃_1 is the calibrated
p-value of the maximum, and the family-wise error over all S subgroups is controlled (the k
reported ones are a subset). The **simultaneous intervals** of
the deviations δ_A = (𝔼 O_A − E_A)/n_A use c, the ``confidence_level`` quantile of the null
max_A |Z*_A|:  δ̂_A ± c √V_A / n_A (Hothorn, Bretz & Westfall 2008, §3): the coverage is
simultaneous over all S subgroups, hence valid for the selected ones whatever chose them, exact
at the null and approximate (variance evaluated at the null) away from it.

References: Zhang, Z. & Neill, D. B. (2016) Identifying significant predictive bias in
classifiers. arXiv:1611.08292 (FATML). Kulldorff, M. (1997) A spatial scan statistic. Comm.
Stat. Theory Methods 26:1481-1496. Westfall, P. H. & Young, S. S. (1993) Resampling-Based
Multiple Testing. Wiley. Hothorn, T., Bretz, F. & Westfall, P. (2008) Simultaneous inference in
general parametric models. Biom. J. 50:346-363. Phipson, B. & Smyth, G. K. (2010) Permutation
p-values should never be zero. Stat. Appl. Genet. Mol. Biol. 9:39.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from fairengine.maxt import TIE_RTOL
from fairengine.results import Interval
from fairengine.sequential_mc import McDecision, SequentialSpec, sequential_decisions
from fairengine.subgroup_scan.null import NullDraws
from fairengine.subgroup_scan.search_space import (
    SearchSpace,
    SubgroupScanError,
    build_search_space,
    code_features,
)
from fairengine.subgroup_scan.statistics import (
    CellOutcomes,
    SubgroupMoments,
    bernoulli_score,
    cell_outcomes,
    extremeness,
    moments,
    z_statistics,
)

_SUB_BATCH = 1024  # null draws per call of NullDraws (bounds the (S, b) work arrays)


@dataclass(frozen=True)
class ObservedScan:
    """Observed statistics of every subgroup: sums ``observed`` O_A, ``moments`` (n, E, V),
    ``z`` and the scanned extremeness ``t``; ``ranking`` the subgroups by t, largest first."""

    observed: np.ndarray
    moments: SubgroupMoments
    z: np.ndarray
    t: np.ndarray
    ranking: np.ndarray

    @property
    def maximum(self) -> float:
        return float(self.t[self.ranking[0]])


def observed_scan(space: SearchSpace, cells: CellOutcomes, sides: str) -> ObservedScan:
    """Z and t of every subgroup from the cell sums (one sparse product)."""
    mom = moments(space, cells)
    obs = mom.observed
    z = z_statistics(obs, mom)
    t = extremeness(z, sides)
    if not np.isfinite(t).any():
        raise SubgroupScanError("every subgroup statistic is undefined (zero null variance)")
    ranking = np.argsort(-t, kind="stable")
    return ObservedScan(obs, mom, z, t, ranking)


def select_top(space: SearchSpace, scan: ObservedScan, top_k: int, jaccard: float) -> np.ndarray:
    """Ranks (positions in ``scan.ranking``) of the top ``top_k`` subgroups whose pairwise
    Jaccard similarity (over rows) is at most ``jaccard``, greedily by t."""
    n_cell = np.bincount(space.cells.cell_of_row, minlength=space.cells.n_cells).astype(float)
    chosen: list[int] = []
    chosen_cols: list[np.ndarray] = []
    for rank, s in enumerate(scan.ranking):
        if len(chosen) >= top_k or not np.isfinite(scan.t[s]):
            break
        col = space.cell_mask(int(s)).astype(np.float64)
        size = float(n_cell @ col)
        ok = True
        for other in chosen_cols:
            inter = float(n_cell @ (col * other))
            union = size + float(n_cell @ other) - inter
            if union > 0 and inter / union > jaccard:
                ok = False
                break
        if ok:
            chosen.append(rank)
            chosen_cols.append(col)
    return np.asarray(chosen, dtype=np.int64)


@dataclass(frozen=True)
class NullMaximum:
    """The null distribution of the scan maximum and the calibrated p-value.

    ``draws`` B null scans, ``exceedances`` how many had T* ≥ T; ``pvalue`` (S + 1)/(B + 1);
    ``decision`` and ``pvalue_bounds`` from the sequential scheme (its first ``sequential_draws``
    draws; the rest top the null distribution up to ``min_draws`` for the intervals);
    ``critical_value`` c, the ``confidence_level`` quantile of max_A |Z*_A|; ``maxima`` the
    B null maxima of the scanned statistic (for the report's histogram)."""

    draws: int
    exceedances: int
    pvalue: float
    decision: McDecision
    pvalue_bounds: tuple[float, float]
    sequential_draws: int
    critical_value: float
    confidence_level: float
    mode: str
    maxima: tuple[float, ...]


@dataclass(frozen=True)
class ScannedSubgroup:
    """One reported subgroup: its ``rule``, ``rank`` among all S by t, ``size`` (rows) and
    ``n`` (rows in the statistic's stratum), the observed and null-expected sums and rates
    (``observed_rate`` = O/n, ``expected_rate`` = E/n), ``z``, the deviation (O − E)/n with its
    simultaneous ``interval``, the step-down ``adjusted_pvalue``, the ``naive_pvalue`` of its
    Z (normal, unadjusted) and, for calibration, MDSS's Bernoulli ``score`` and ``q_hat``."""

    rule: str
    conditions: tuple[str, ...]
    rank: int
    size: int
    n: int
    observed: float
    expected: float
    observed_rate: float
    expected_rate: float
    z: float
    deviation: float
    interval: Interval
    adjusted_pvalue: float
    naive_pvalue: float
    score: float | None = None
    q_hat: float | None = None


@dataclass(frozen=True)
class ScanResult:
    """Result of :func:`scan_subgroups` (scipy-like: ``statistic`` T, ``pvalue``)."""

    statistic_name: str
    sides: str
    statistic: float
    pvalue: float
    null: NullMaximum
    top: tuple[ScannedSubgroup, ...]
    n_subgroups: int
    n_rows: int
    depth: int
    min_size: int
    naive_min_pvalue: float
    bonferroni_pvalue: float


def naive_pvalues(z: np.ndarray, sides: str) -> np.ndarray:
    """Normal p-values of each Z (no adjustment for the search), NaN where undefined."""
    if sides == "greater":
        return norm.sf(z)
    if sides == "less":
        return norm.cdf(z)
    return 2.0 * norm.sf(np.abs(z))


@dataclass(frozen=True)
class NullBatch:
    """One batch of b null scans: the scanned maximum ``maxima`` (b,), max |Z*| ``abs_maxima``
    (b,) and ``exceeds`` (b, k): draw b exceeds at some reported rank l ≤ j (module docstring)."""

    maxima: np.ndarray
    abs_maxima: np.ndarray
    exceeds: np.ndarray


def null_scan_batch(
    draws: NullDraws,
    scan: ObservedScan,
    sides: str,
    ranks: np.ndarray,
    rng: np.random.Generator,
    batch: int,
) -> NullBatch:
    """Re-run the scan ``batch`` times on null data (in sub-batches bounding the memory)."""
    t_sel = scan.t[scan.ranking[ranks]]
    gam = t_sel - TIE_RTOL * np.abs(t_sel)
    maxima, abs_maxima, exceeds = [], [], []
    done = 0
    while done < batch:
        b = min(_SUB_BATCH, batch - done)
        z = z_statistics(draws.subgroup_sums(rng, b), scan.moments)
        t = extremeness(z, sides)  # (S, b)
        abs_maxima.append(np.where(np.isnan(z), -np.inf, np.abs(z)).max(axis=0))
        ordered = t[scan.ranking].T  # (b, S) in the observed order
        succ = np.maximum.accumulate(ordered[:, ::-1], axis=1)[:, ::-1]
        maxima.append(succ[:, 0])
        exceeds.append(np.logical_or.accumulate(succ[:, ranks] >= gam[None, :], axis=1))
        done += b
    return NullBatch(
        np.concatenate(maxima), np.concatenate(abs_maxima), np.concatenate(exceeds, axis=0)
    )


class _NullRun:
    """Keeps what the report and the step-down need from every null draw."""

    def __init__(
        self, draws: NullDraws, scan: ObservedScan, sides: str, ranks: np.ndarray, seed: int
    ) -> None:
        self.draws = draws
        self.scan = scan
        self.sides = sides
        self.ranks = ranks
        self.rng = np.random.default_rng(seed)
        self.batches: list[NullBatch] = []

    def draw(self, batch: int) -> int:
        got = null_scan_batch(self.draws, self.scan, self.sides, self.ranks, self.rng, batch)
        self.batches.append(got)
        return int(got.exceeds[:, 0].sum())


def scan_subgroups(
    frame: pd.DataFrame,
    features: list[str],
    labels: np.ndarray,
    probability: np.ndarray | None = None,
    decision: np.ndarray | None = None,
    *,
    statistic: str = "calibration",
    sides: str = "two-sided",
    depth: int = 2,
    min_size: int = 30,
    levels: int = 5,
    top_k: int = 5,
    jaccard: float = 0.5,
    mode: str = "exact",
    alpha: float = 0.05,
    confidence_level: float = 0.95,
    min_draws: int = 999,
    sequential: SequentialSpec | None = None,
    seed: int = 0,
) -> ScanResult:
    """Scan the conjunctions of ``features`` for the subgroup where ``statistic`` deviates most
    and calibrate its maximum against the null (module docstring)."""
    space = build_search_space(code_features(frame, features, levels), depth, min_size)
    cells = cell_outcomes(space, statistic, labels, probability, decision)
    return scan_space(
        space,
        cells,
        sides=sides,
        top_k=top_k,
        jaccard=jaccard,
        mode=mode,
        alpha=alpha,
        confidence_level=confidence_level,
        min_draws=min_draws,
        sequential=sequential,
        seed=seed,
    )


def scan_space(
    space: SearchSpace,
    cells: CellOutcomes,
    *,
    sides: str = "two-sided",
    top_k: int = 5,
    jaccard: float = 0.5,
    mode: str = "exact",
    alpha: float = 0.05,
    confidence_level: float = 0.95,
    min_draws: int = 999,
    sequential: SequentialSpec | None = None,
    seed: int = 0,
) -> ScanResult:
    """:func:`scan_subgroups` on a built search space and its cell sums."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise SubgroupScanError(f"top_k must be a whole number >= 1, got {top_k!r}")
    if not 0.0 <= jaccard <= 1.0:
        raise SubgroupScanError(f"jaccard must lie in [0, 1], got {jaccard!r}")
    if not 0.0 < confidence_level < 1.0:
        raise SubgroupScanError(f"confidence_level must lie in (0, 1), got {confidence_level!r}")
    if isinstance(min_draws, bool) or not isinstance(min_draws, int) or min_draws < 0:
        raise SubgroupScanError(f"min_draws must be a whole number >= 0, got {min_draws!r}")
    spec = sequential or SequentialSpec(alpha=alpha, procedure="none", max_resamples=9_999)
    scan = observed_scan(space, cells, sides)
    ranks = select_top(space, scan, top_k, jaccard)
    run = _NullRun(NullDraws(space, cells, mode), scan, sides, ranks, seed)
    seq = sequential_decisions(
        lambda idx, batch: np.asarray([run.draw(batch)], dtype=np.int64), 1, spec
    )
    seq_draws = int(seq.resamples[0])
    if seq_draws < min_draws:
        run.draw(min_draws - seq_draws)
    maxima = np.concatenate([x.maxima for x in run.batches])
    abs_maxima = np.concatenate([x.abs_maxima for x in run.batches])
    exceeds = np.concatenate([x.exceeds for x in run.batches], axis=0)  # (B, k)
    b = maxima.size
    exceed = int(exceeds[:, 0].sum())
    pvalue = (exceed + 1.0) / (b + 1.0)
    # critical value: the ceil((B + 1)·level)-th smallest of the B null maxima and T itself
    pool = np.sort(np.r_[abs_maxima, np.inf])
    crit = float(pool[min(b, math.ceil((b + 1) * confidence_level) - 1)])
    step = (1.0 + exceeds.sum(axis=0)) / (b + 1.0)
    naive = naive_pvalues(scan.z, sides)
    top: list[ScannedSubgroup] = []
    for j, rank in enumerate(ranks):
        s = int(scan.ranking[rank])
        g = space.subgroups[s]
        n_a = float(scan.moments.n[s])
        o, e, v = (
            float(scan.observed[s]),
            float(scan.moments.expected[s]),
            float(scan.moments.variance[s]),
        )
        dev = (o - e) / n_a
        half = crit * math.sqrt(v) / n_a
        score = q_hat = None
        if cells.kind == "calibration" and cells.probability is not None:
            rows = space.rows_in(s)
            bs = bernoulli_score(o, cells.probability[rows], "positive" if o >= e else "negative")
            score, q_hat = bs.score, bs.q_hat
        top.append(
            ScannedSubgroup(
                rule=g.rule,
                conditions=tuple(
                    space.coded.features[f].labels[v_]
                    for f, v_ in zip(g.features, g.values, strict=True)
                ),
                rank=int(rank),
                size=int(space.sizes[s]),
                n=round(n_a),
                observed=o,
                expected=e,
                observed_rate=o / n_a,
                expected_rate=e / n_a,
                z=float(scan.z[s]),
                deviation=dev,
                interval=Interval(
                    dev - half, dev + half, confidence_level, "simultaneous (null max |Z|)"
                ),
                adjusted_pvalue=float(step[j]),
                naive_pvalue=float(naive[s]),
                score=score,
                q_hat=q_hat,
            )
        )
    finite = np.isfinite(scan.t)
    min_naive = float(np.nanmin(naive[finite]))
    return ScanResult(
        statistic_name=cells.kind,
        sides=sides,
        statistic=scan.maximum,
        pvalue=pvalue,
        null=NullMaximum(
            draws=b,
            exceedances=exceed,
            pvalue=pvalue,
            decision=seq.decisions[0],
            pvalue_bounds=(float(seq.ci_low[0]), float(seq.ci_high[0])),
            sequential_draws=seq_draws,
            critical_value=crit,
            confidence_level=confidence_level,
            mode=run.draws.mode,
            maxima=tuple(float(x) for x in maxima),
        ),
        top=tuple(top),
        n_subgroups=space.n_subgroups,
        n_rows=space.coded.n_rows,
        depth=space.depth,
        min_size=space.min_size,
        naive_min_pvalue=min_naive,
        bonferroni_pvalue=min(1.0, min_naive * int(finite.sum())),
    )
