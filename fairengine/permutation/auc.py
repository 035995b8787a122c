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
serve both groups. Per permutation the cost is the two cumulative sums (O(n), int32, no sort)
plus O(#runs) float64 work (DiCiccio et al. 2020, §3.2: studentize the Mann–Whitney
difference by DeLong in every permutation). Everything is batched over (T_chunk, n) arrays.

Backends: numpy (default) and torch (``device="cuda"`` when a GPU is available, ``"cpu"``
otherwise; torch draws its own random subsets, so p-values differ from numpy's by Monte-Carlo
noise only).
"""

from __future__ import annotations

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


def auc_pair_numpy(
    ranked: RankedSample, in_a_pos: np.ndarray, in_a_neg: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """AUC and DeLong variance of group A (indicators) and of its complement B, per row.

    ``in_a_pos`` (T, n1) and ``in_a_neg`` (T, n0) are 0/1 (bool or int) group-A indicators of
    the sorted positives/negatives. Returns (auc_A, var_A, auc_B, var_B), each of shape (T,).
    """
    r = ranked
    gp = np.asarray(in_a_pos)
    gn = np.asarray(in_a_neg)
    gp8 = gp.view(np.int8) if gp.dtype == bool else gp.astype(np.int8)
    gn8 = gn.view(np.int8) if gn.dtype == bool else gn.astype(np.int8)
    # a few permutations at a time keep the (T, n) and (T, runs) arrays in cache
    step = max(1, CACHE_ELEMENTS // max(gp8.shape[1] + gn8.shape[1], 1))
    out = []
    for i in range(0, gp8.shape[0], step):
        p_at = np.take(_cumulative(gp8[i : i + step]), r.pos_bounds, axis=1).astype(np.float64)
        n_at = np.take(_cumulative(gn8[i : i + step]), r.neg_bounds, axis=1).astype(np.float64)
        auc_a, var_a = _group(p_at, n_at)
        auc_b, var_b = _group(r.pos_bounds[None, :] - p_at, r.neg_bounds[None, :] - n_at)
        out.append((auc_a, var_a, auc_b, var_b))
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
