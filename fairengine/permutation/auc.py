"""Two-group AUC and DeLong variance for a whole batch of group assignments at once.

A permutation only relabels which rows belong to group A; the scores never move. So the pooled
rows are sorted **once** — positives and negatives separately, ascending — and cut into *runs*:
maximal stretches of the sorted scores holding only positives or only negatives, plus every tie
block that holds both (run b has P_b positives and N_b negatives; runs are ascending). Every
positive of a run has the same placement (negatives below it, ties ½), and so does every
negative. For a batch of group-A indicators g (or integer multiplicities, for bootstraps), with
cumulative sums N_A(k) of g over the first k sorted negatives and P_A(k) over the first k
sorted positives, and run b spanning positives [p_b, p_{b+1}) and negatives [q_b, q_{b+1}):

    PA_b = P_A(p_{b+1}) − P_A(p_b),   NA_b = N_A(q_{b+1}) − N_A(q_b)   (A-rows in run b),
    c_b = ½ (N_A(q_b) + N_A(q_{b+1}))     (A-negatives below a positive of run b, ties ½),
    d_b = m_A − ½ (P_A(p_b) + P_A(p_{b+1}))  (A-positives above a negative of run b, ties ½),

    AUC_A = Σ_b PA_b c_b / (m_A n_A)      (Mann–Whitney, ties ½),
    S10 = (Σ_b PA_b c_b²/n_A² − m_A AUC²)/(m_A − 1),
    S01 = (Σ_b NA_b d_b²/m_A² − n_A AUC²)/(n_A − 1),
    Var(AUC_A) = S10/m_A + S01/n_A        (DeLong, DeLong & Clarke-Pearson 1988),

with m_A, n_A the A-positives/negatives — exactly :func:`fairengine.delong.auc_delong` for each
assignment. Group B is the complement (N_B = N_total − N_A), so the same two cumulative sums
serve both groups: the smaller group's sums are taken over its runs and the other's are
expanded from them and constants of the runs (:func:`_pair`; exact while the sums stay below
2**53). Per permutation the cost is the two cumulative sums (O(n), in the smallest unsigned
dtype that holds the counts, no sort; a side with many rows per run in byte lanes, eight rows
per 64-bit word: :class:`_ByteLaneCounts`) plus O(#runs) float64 work in reused buffers
(DiCiccio et al. 2020, §3.2: studentize the Mann–Whitney difference by DeLong in every
permutation). Everything is batched over (T_chunk, n) arrays. On Adult (45,222 rows, 8,667
runs) a permutation (its subset mask included) costs about 0.31 ms of CPU against 0.51 ms
before the first speed changes (``benchmarks/results/full_audit_adult.md``, 2026-11-26); the
byte lanes take the sums alone from about 250 to 215 µs.

Backends: numpy (default) and torch (``device="cuda"`` when a GPU is available, ``"cpu"``
otherwise; torch draws its own random subsets, so p-values differ from numpy's by Monte-Carlo
noise only).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError

#: Elements of a (T, n) block processed together by the numpy path (fits a core's L2 cache).
CACHE_ELEMENTS = 250_000


@dataclass(frozen=True)
class RankedSample:
    """The pooled rows of two groups prepared for batched AUCs (module docstring).

    ``pos_rows``/``neg_rows`` index the input rows of the sorted positives/negatives;
    ``pos_bounds``/``neg_bounds`` (length R + 1) delimit each run's positives/negatives in
    those sorted orders.
    """

    pos_rows: np.ndarray
    neg_rows: np.ndarray
    pos_bounds: np.ndarray
    neg_bounds: np.ndarray

    @property
    def n_pos(self) -> int:
        return int(self.pos_rows.size)

    @property
    def n_neg(self) -> int:
        return int(self.neg_rows.size)

    @property
    def n_runs(self) -> int:
        return int(self.pos_bounds.size - 1)

    @functools.cached_property
    def run_sums(self) -> _RunSums:
        """The run constants of the batched pair AUC (:func:`_pair`), computed once."""
        return _RunSums.of(self)


def rank_sample(label: np.ndarray, score: np.ndarray) -> RankedSample:
    """Sort positives and negatives once and cut the scores into runs (module docstring)."""
    y = np.asarray(label)
    s = np.asarray(score, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise DataContractError("label and score must be 1-D arrays of the same length")
    if not np.all(np.isfinite(s)):
        raise DataContractError("score has missing or infinite values; the AUC needs scores")
    pos = y == 1
    pos_rows = np.flatnonzero(pos)
    neg_rows = np.flatnonzero(~pos)
    pos_rows = pos_rows[np.argsort(s[pos_rows], kind="stable")]
    neg_rows = neg_rows[np.argsort(s[neg_rows], kind="stable")]
    uniq, inv = np.unique(s, return_inverse=True)
    n_pos_block = np.bincount(inv[pos], minlength=uniq.size)
    n_neg_block = np.bincount(inv[~pos], minlength=uniq.size)
    kind = np.where(n_neg_block == 0, 1, np.where(n_pos_block == 0, 0, 2))  # 2 = mixed tie
    new_run = np.ones(uniq.size, dtype=bool)
    new_run[1:] = (kind[1:] != kind[:-1]) | (kind[1:] == 2)
    run = np.cumsum(new_run) - 1
    n_runs = int(run[-1]) + 1 if run.size else 0
    run_pos = np.bincount(run, weights=n_pos_block, minlength=n_runs).astype(np.int64)
    run_neg = np.bincount(run, weights=n_neg_block, minlength=n_runs).astype(np.int64)
    pos_bounds = np.concatenate([[0], np.cumsum(run_pos)]).astype(np.intp)
    neg_bounds = np.concatenate([[0], np.cumsum(run_neg)]).astype(np.intp)
    return RankedSample(pos_rows, neg_rows, pos_bounds, neg_bounds)


def _cumulative(g: np.ndarray) -> np.ndarray:
    """(T, k + 1) int32 cumulative sums with a leading zero column: out[:, j] = Σ_{<j} g."""
    out = np.zeros((g.shape[0], g.shape[1] + 1), dtype=np.int32)
    np.cumsum(g, axis=1, dtype=np.int32, out=out[:, 1:])
    return out


def _group(p_at: np.ndarray, n_at: np.ndarray, rowdot=None) -> tuple[np.ndarray, np.ndarray]:
    """AUC and DeLong variance of one group from its cumulative counts at the run bounds.

    ``p_at``/``n_at`` (T, R + 1): the group's positives/negatives among the first p_b/q_b
    sorted positives/negatives (module docstring), float64.
    """
    m = p_at[:, -1]
    n = n_at[:, -1]
    pa = np.diff(p_at, axis=1)
    na = np.diff(n_at, axis=1)
    c2 = n_at[:, :-1] + n_at[:, 1:]
    d2 = (2.0 * m)[:, None] - p_at[:, :-1] - p_at[:, 1:]
    pc = pa * c2
    u2 = pc.sum(axis=1)
    q10 = np.einsum("ij,ij->i", pc, c2)
    nd = na * d2
    q01 = np.einsum("ij,ij->i", nd, d2)
    return _auc_var(m, n, u2, q10, q01)


def _auc_var(
    m: np.ndarray, n: np.ndarray, u2: np.ndarray, q10: np.ndarray, q01: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """AUC and DeLong variance from m, n, 2U, Σ (2c)², Σ (2d)² (module docstring)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = u2 / (2.0 * m * n)
        s10 = (q10 / (4.0 * n * n) - m * auc * auc) / (m - 1.0)
        s01 = (q01 / (4.0 * m * m) - n * auc * auc) / (n - 1.0)
        var = s10 / m + s01 / n
    auc = np.where((m > 0) & (n > 0), auc, np.nan)
    var = np.where((m > 1) & (n > 1), np.maximum(var, 0.0), np.nan)
    return auc, var


def _count_dtype(n: int) -> type[np.unsignedinteger]:
    """Smallest unsigned integer dtype that holds the counts 0..n exactly."""
    return np.uint16 if n <= np.iinfo(np.uint16).max else np.uint32


#: A side of the sorted rows is counted in byte lanes (:class:`_ByteLaneCounts`) when it has
#: at least this many rows per run bound; below it numpy's row-wise cumulative sum is as fast.
BYTE_LANE_MIN_ROWS_PER_BOUND = 2.0

_LANES = np.uint64(0x0101010101010101)


class _ByteLaneCounts:
    """Cumulative counts of 0/1 rows at given bounds, eight rows per 64-bit word.

    Each row of 0/1 bytes is copied into a zero-padded buffer and read as little-endian 64-bit
    words w (bytes b_0..b_7). The product w · 0x0101010101010101 (mod 2**64) holds in its byte
    k the sum b_0 + … + b_k (at most 8: no carry between bytes), so its top byte is the word's
    count; shifted left by one byte, its byte k is the count of the bytes *before* k. The count
    before row j = 8q + o is then the cumulative count of words before q plus byte o of the
    shifted product of word q: a cumulative sum over n/8 words instead of n rows, plus two
    gathers at the bounds. Integer arithmetic throughout, so the counts equal the row-wise
    cumulative sum's exactly. On Adult's 34,014 sorted negatives (8,667 runs) 42 against 79 µs
    per permutation; no faster when the bounds are nearly as many as the rows (the positives:
    11,208 rows), where the row-wise sum is kept."""

    def __init__(self, t: int, n: int, bounds: np.ndarray) -> None:
        words = n // 8 + 1  # at least one padding byte: a bound at n falls inside a word
        self.n = n
        self.buf = np.zeros((t, 8 * words), dtype=np.uint8)
        self.prod = np.empty((t, words), dtype=np.uint64)
        self.top = np.empty((t, words), dtype=np.uint64)
        self.before = np.zeros((t, words + 1), dtype=np.uint32)  # words before q
        self.word = np.asarray(bounds, dtype=np.intp) >> 3
        self.shift = ((np.asarray(bounds, dtype=np.uint64) & np.uint64(7)) * np.uint64(8))[None, :]
        self.lane = np.empty((t, len(bounds)), dtype=np.uint64)

    def counts(self, g8: np.ndarray, out: np.ndarray) -> None:
        """``out`` (t, R + 1) float64 ← the counts of ones in ``g8`` (t, n) before each bound."""
        t = g8.shape[0]
        buf, prod, top = self.buf[:t], self.prod[:t], self.top[:t]
        before, lane = self.before[:t], self.lane[:t]
        buf[:, : self.n] = g8
        np.multiply(buf.view(np.uint64), _LANES, out=prod)
        np.right_shift(prod, np.uint64(56), out=top)
        np.cumsum(top, axis=1, dtype=np.uint32, out=before[:, 1:])
        np.left_shift(prod, np.uint64(8), out=prod)
        np.take(prod, self.word, axis=1, out=lane)
        np.right_shift(lane, self.shift, out=lane)
        np.bitwise_and(lane, np.uint64(0xFF), out=lane)
        np.add(np.take(before, self.word, axis=1), lane, out=out)


class _Workspace:
    """Buffers of :func:`auc_pair_numpy`, allocated once per call and reused for every chunk
    of permutations (fresh arrays per chunk cost page faults that doubled the time). A side
    with many rows per run bound is counted in byte lanes (:class:`_ByteLaneCounts`)."""

    def __init__(self, t: int, ranked: RankedSample) -> None:
        n_pos, n_neg, n_runs = ranked.n_pos, ranked.n_neg, ranked.n_runs
        self.lanes: dict[bool, _ByteLaneCounts] = {}
        for positives, n, bounds in (
            (True, n_pos, ranked.pos_bounds),
            (False, n_neg, ranked.neg_bounds),
        ):
            if n >= BYTE_LANE_MIN_ROWS_PER_BOUND * len(bounds):
                self.lanes[positives] = _ByteLaneCounts(t, n, bounds)
        self.cum_p = np.zeros((0 if True in self.lanes else t, n_pos + 1), _count_dtype(n_pos))
        self.cum_n = np.zeros((0 if False in self.lanes else t, n_neg + 1), _count_dtype(n_neg))
        self.p_at = np.empty((t, n_runs + 1))
        self.n_at = np.empty((t, n_runs + 1))
        self.runs = np.empty((6, t, n_runs))

    def at_bounds(self, g8: np.ndarray, bounds: np.ndarray, positives: bool) -> np.ndarray:
        """float64 (t, R + 1) cumulative sums of the 0/1 rows ``g8`` (uint8) at ``bounds``
        (the ranked sample's bounds of that side)."""
        t = g8.shape[0]
        out = (self.p_at if positives else self.n_at)[:t]
        lanes = self.lanes.get(positives)
        if lanes is not None:
            lanes.counts(g8, out)
            return out
        cum = (self.cum_p if positives else self.cum_n)[:t]
        np.cumsum(g8, axis=1, dtype=cum.dtype, out=cum[:, 1:])
        out[...] = np.take(cum, bounds, axis=1)
        return out


@dataclass(frozen=True)
class _RunSums:
    """Run-level constants of a :class:`RankedSample` for :func:`_pair` (all rows of a run in
    the group): per run the positives Pr_b and negatives Qr_b, C_b = Q(q_b) + Q(q_{b+1}),
    E_b = P(p_b) + P(p_{b+1}) (P, Q the pooled bounds), and the sums that do not depend on the
    draw."""

    pr: np.ndarray
    qr: np.ndarray
    c: np.ndarray
    e: np.ndarray
    c_weights: np.ndarray  # (R, 2): [Pr, Pr·C]
    pa_weights: np.ndarray  # (R, 2): [C, C²]
    e_weights: np.ndarray  # (R, 2): [Qr, Qr·E]
    na_weights: np.ndarray  # (R, 2): [E, E²]
    sum_pr_c: float  # Σ Pr·C
    sum_pr_c2: float  # Σ Pr·C²
    sum_qr_e: float  # Σ Qr·E
    sum_qr_e2: float  # Σ Qr·E²

    @classmethod
    def of(cls, ranked: RankedSample) -> _RunSums:
        pb = ranked.pos_bounds.astype(np.float64)
        qb = ranked.neg_bounds.astype(np.float64)
        pr, qr = np.diff(pb), np.diff(qb)
        c, e = qb[:-1] + qb[1:], pb[:-1] + pb[1:]
        return cls(
            pr=pr,
            qr=qr,
            c=c,
            e=e,
            c_weights=np.ascontiguousarray(np.stack([pr, pr * c], axis=1)),
            pa_weights=np.ascontiguousarray(np.stack([c, c * c], axis=1)),
            e_weights=np.ascontiguousarray(np.stack([qr, qr * e], axis=1)),
            na_weights=np.ascontiguousarray(np.stack([e, e * e], axis=1)),
            sum_pr_c=float(pr @ c),
            sum_pr_c2=float(pr @ (c * c)),
            sum_qr_e=float(qr @ e),
            sum_qr_e2=float(qr @ (e * e)),
        )


def _pair(
    p_at: np.ndarray,
    n_at: np.ndarray,
    k: _RunSums,
    totals: tuple[float, float],
    runs: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """AUC and DeLong variance of a group (cumulative counts ``p_at``/``n_at``, as in
    :func:`_group`) and of its complement, with the complement's sums expanded into the
    group's and the run constants instead of a second pass over its own arrays.

    With pa, na, c2 = 2c, e (so 2d = 2m − e) of the group, and pb = Pr − pa, nb = Qr − na,
    c2_B = C − c2, 2d_B = 2m_B + (e − E) of the complement:
        2U_B = Σ Pr·C − Σ Pr·c2 − Σ pa·C + 2U_A,
        Σ pb·c2_B² = Σ Pr·C² − 2Σ Pr·C·c2 + Σ Pr·c2² − Σ pa·C² + 2Σ pa·c2·C − Σ pa·c2²,
        Σ nb·(2d_B)² = 4m_B²·n_B + 4m_B·Σ nb·(e − E) + Σ nb·(e − E)²  (each expanded alike).
    Every term is an integer, so the sums are exact in float64 while they stay below 2**53
    (N²·M < 2**53 for M positives and N negatives: about 200,000 rows); the caller passes the
    smaller group, so the expansion never subtracts much larger terms from a small result.
    """
    t = p_at.shape[0]
    pa, na, c2, e, pc, ne = (
        (x[:t] for x in runs) if runs is not None else np.empty((6, *p_at.shape))[:, :, 1:]
    )
    m = p_at[:, -1]
    n = n_at[:, -1]
    np.subtract(p_at[:, 1:], p_at[:, :-1], out=pa)
    np.subtract(n_at[:, 1:], n_at[:, :-1], out=na)
    np.add(n_at[:, :-1], n_at[:, 1:], out=c2)
    np.add(p_at[:, :-1], p_at[:, 1:], out=e)
    np.multiply(pa, c2, out=pc)
    np.multiply(na, e, out=ne)
    u2_a = pc.sum(axis=1)
    q10_a = np.einsum("ij,ij->i", pc, c2)
    s_ne = ne.sum(axis=1)
    s_ne2 = np.einsum("ij,ij->i", ne, e)
    q01_a = 4.0 * m * m * n - 4.0 * m * s_ne + s_ne2

    # BLAS products of a few rows (OpenBLAS keeps them on the calling thread at these sizes:
    # measured, process CPU time below wall time with its default two threads)
    c2w = c2 @ k.c_weights  # Σ Pr·c2, Σ Pr·C·c2
    paw = pa @ k.pa_weights  # Σ pa·C, Σ pa·C²
    ew = e @ k.e_weights  # Σ Qr·e, Σ Qr·E·e
    naw = na @ k.na_weights  # Σ na·E, Σ na·E²
    pc_c = pc @ k.c  # Σ pa·c2·C
    ne_e = ne @ k.e  # Σ na·e·E
    c2sq_pr = np.einsum("ij,ij,j->i", c2, c2, k.pr)  # Σ Pr·c2²
    esq_qr = np.einsum("ij,ij,j->i", e, e, k.qr)  # Σ Qr·e²
    m_b = totals[0] - m
    n_b = totals[1] - n
    u2_b = k.sum_pr_c - c2w[:, 0] - paw[:, 0] + u2_a
    q10_b = k.sum_pr_c2 - 2.0 * c2w[:, 1] + c2sq_pr - paw[:, 1] + 2.0 * pc_c - q10_a
    s_h = ew[:, 0] - k.sum_qr_e - s_ne + naw[:, 0]  # Σ nb·(e − E)
    s_h2 = esq_qr - 2.0 * ew[:, 1] + k.sum_qr_e2 - s_ne2 + 2.0 * ne_e - naw[:, 1]
    q01_b = 4.0 * m_b * m_b * n_b + 4.0 * m_b * s_h + s_h2
    auc_a, var_a = _auc_var(m, n, u2_a, q10_a, q01_a)
    auc_b, var_b = _auc_var(m_b, n_b, u2_b, q10_b, q01_b)
    return auc_a, var_a, auc_b, var_b


def auc_pair_numpy(
    ranked: RankedSample, in_a_pos: np.ndarray, in_a_neg: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """AUC and DeLong variance of group A (indicators) and of its complement B, per row.

    ``in_a_pos`` (T, n1) and ``in_a_neg`` (T, n0) are 0/1 (bool or int) group-A indicators of
    the sorted positives/negatives. Returns (auc_A, var_A, auc_B, var_B), each of shape (T,).
    The smaller of the two groups (by the first row's size) is summed over its runs, the other
    one from it and the run constants (:func:`_pair`); the cumulative counts are kept in the
    smallest unsigned dtype that holds them.
    """
    r = ranked
    gp = np.asarray(in_a_pos)
    gn = np.asarray(in_a_neg)
    gp8 = gp.view(np.uint8) if gp.dtype == bool else gp.astype(np.uint8)
    gn8 = gn.view(np.uint8) if gn.dtype == bool else gn.astype(np.uint8)
    k = r.run_sums
    totals = (float(r.n_pos), float(r.n_neg))
    size_a = int(gp8[0].sum()) + int(gn8[0].sum()) if gp8.shape[0] else 0
    swap = 2 * size_a > r.n_pos + r.n_neg  # sum the smaller group directly
    # a few permutations at a time keep the (T, n) and (T, runs) arrays in cache
    step = max(1, CACHE_ELEMENTS // max(r.n_pos + r.n_neg, 1))
    ws = _Workspace(min(step, gp8.shape[0]), r)
    out = []
    for i in range(0, gp8.shape[0], step):
        p_at = ws.at_bounds(gp8[i : i + step], r.pos_bounds, positives=True)
        n_at = ws.at_bounds(gn8[i : i + step], r.neg_bounds, positives=False)
        if swap:
            np.subtract(r.pos_bounds, p_at, out=p_at)
            np.subtract(r.neg_bounds, n_at, out=n_at)
            auc_b, var_b, auc_a, var_a = _pair(p_at, n_at, k, totals, ws.runs)
        else:
            auc_a, var_a, auc_b, var_b = _pair(p_at, n_at, k, totals, ws.runs)
        out.append((auc_a, var_a, auc_b, var_b))
    if not out:
        empty = np.empty(0)
        return empty, empty, empty, empty
    auc_a, var_a, auc_b, var_b = (np.concatenate(x) for x in zip(*out, strict=True))
    return auc_a, var_a, auc_b, var_b


def auc_weighted_numpy(
    ranked: RankedSample, w_pos: np.ndarray, w_neg: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """AUC and DeLong variance for integer multiplicities (bootstrap resamples of one group):
    rows of ``w_pos`` (T, n1) / ``w_neg`` (T, n0) count how often each sorted row is drawn."""
    r = ranked
    wp = np.asarray(w_pos).astype(np.int32)
    wn = np.asarray(w_neg).astype(np.int32)
    p_at = np.take(_cumulative(wp), r.pos_bounds, axis=1).astype(np.float64)
    n_at = np.take(_cumulative(wn), r.neg_bounds, axis=1).astype(np.float64)
    return _group(p_at, n_at)


def auc_pair_torch(
    ranked: RankedSample, in_a_pos, in_a_neg, device
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Torch version of :func:`auc_pair_numpy` on ``device``; inputs are torch bool tensors."""
    import torch

    r = ranked
    f64 = torch.float64
    pos_b = torch.as_tensor(r.pos_bounds, device=device)
    neg_b = torch.as_tensor(r.neg_bounds, device=device)

    def at(g, bounds):
        # float32 counts are exact below 2**24 rows per class; int32 beyond
        dt = torch.float32 if g.shape[1] < 2**24 else torch.int32
        cum = torch.zeros((g.shape[0], g.shape[1] + 1), dtype=dt, device=device)
        torch.cumsum(g.to(dt), dim=1, out=cum[:, 1:])
        return cum.index_select(1, bounds).to(f64)

    def group(p_at, n_at):
        m = p_at[:, -1]
        n = n_at[:, -1]
        pa = torch.diff(p_at, dim=1)
        na = torch.diff(n_at, dim=1)
        c2 = n_at[:, :-1] + n_at[:, 1:]
        d2 = (2.0 * m)[:, None] - p_at[:, :-1] - p_at[:, 1:]
        pc = pa * c2
        nd = na * d2
        u2 = pc.sum(dim=1)
        q10 = (pc * c2).sum(dim=1)
        q01 = (nd * d2).sum(dim=1)
        return _auc_var(*(x.cpu().numpy() for x in (m, n, u2, q10, q01)))

    p_at = at(in_a_pos, pos_b)
    n_at = at(in_a_neg, neg_b)
    auc_a, var_a = group(p_at, n_at)
    auc_b, var_b = group(pos_b.to(f64)[None, :] - p_at, neg_b.to(f64)[None, :] - n_at)
    return auc_a, var_a, auc_b, var_b


def torch_subset_masks(n: int, k: int, size: int, generator, device):
    """Torch: ``size`` uniformly random k-subsets of range(n) as a bool (size, n) tensor.

    Keeps the k smallest of n iid float64 uniform keys per row (``kthvalue``); a row whose
    count is not k (a tie at the threshold, probability ~ n·2⁻⁵³) is redrawn by ``randperm``.
    """
    import torch

    if k == 0 or k == n:
        return torch.full((size, n), k == n, dtype=torch.bool, device=device)
    keys = torch.rand((size, n), generator=generator, dtype=torch.float64, device=device)
    thr = torch.kthvalue(keys, k, dim=1).values
    mask = keys <= thr[:, None]
    bad = torch.nonzero(mask.sum(dim=1) != k).flatten().tolist()
    for row in bad:
        perm = torch.randperm(n, generator=generator, device=device)
        mask[row] = False
        mask[row, perm[:k]] = True
    return mask
