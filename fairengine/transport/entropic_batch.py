r"""Many entropic OT problems on one point set at once: the refits of FlipTest's nulls and
bootstrap (``../shared/docs/fliptest_ot.md`` §4.4) as one batched Sinkhorn.

Every refit of FlipTest maps a *weighted subset* of a fixed point set onto another: a bootstrap
replicate puts multiplicities on the source and target rows, the label-permutation null splits
the pooled rows S ∪ S′ into a pseudo-source and a pseudo-target, the self-map null splits S into
halves. With uniform weights on the chosen rows (duplicates counted), replicate r is entropic OT
between weights a_r (rows x) and b_r (rows y) of the same cost matrix C, and Sinkhorn for it is

.. math:: u_r ← a_r / (K v_r), \qquad v_r ← b_r / (K^\top u_r), \qquad
          K_{ij} = \exp((f^0_i + g^0_j − C_{ij}) / ε),

with one kernel K for every replicate (centred on reference potentials f⁰, g⁰), so R replicates
cost two matrix-matrix products per iteration instead of 2R matrix-vector products (about 10x
less time per replicate on 2 cores; memory-bound products become compute-bound ones). A
replicate's potentials are g_r = g⁰ + ε log v_r and its map is the usual softmax
(:mod:`fairengine.transport.entropic`):

.. math:: T_r(x) = \sum_j y_j\, v_{rj} e^{(g^0_j − c(x, y_j))/ε} \big/
          \sum_j v_{rj} e^{(g^0_j − c(x, y_j))/ε}.

The kernel is not re-centred per replicate (that is what keeps it shared), so a replicate whose
scalings leave float range, or that does not reach ``tol``, is reported as not converged and the
caller refits it on its own (the stabilized solver).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from fairengine.transport.entropic import EntropicMap, _cost, _device

# float64 throughout: the shared kernel is not re-centred per replicate, so scalings and kernel
# entries need float64's range (|log| up to ~700); entries below e^-_CUTOFF64 are set to 0, entries
# are capped at e^_KERNEL_MAX (reference potentials keep them below ~n) and a replicate whose
# |log u| or |log v| passes _SCALING_LIMIT is given up, so K v never overflows
_CUTOFF64 = 700.0
_KERNEL_MAX = 30.0
_SCALING_LIMIT = 670.0


@dataclass
class BatchSinkhorn:
    """Result of :func:`batched_sinkhorn` for R replicates.

    ``log_v`` (m, R) float64: log target scalings (−inf where b = 0); ``converged`` (R,) bool;
    ``n_iter`` (R,) iterations used; ``marginal_error`` (R,) final L1 row-marginal error.
    """

    log_v: np.ndarray
    converged: np.ndarray
    n_iter: np.ndarray
    marginal_error: np.ndarray


def soft_c_transform(
    x: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    g: np.ndarray | None = None,
    *,
    exclude_diagonal: bool = False,
    block: int = 2048,
) -> np.ndarray:
    r"""f_i = −ε log (1/m) Σ_j exp((g_j − ‖x_i − y_j‖²)/ε) (g = 0 by default), in float64.

    ``exclude_diagonal`` drops j = i (x and y the same points): reference potentials for the
    split problems, where no point is both source and target."""
    xt, yt = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    gt = torch.zeros(len(y), dtype=torch.float64) if g is None else torch.as_tensor(g)
    out = np.empty(len(x))
    m = len(y) - (1 if exclude_diagonal else 0)
    for i in range(0, len(x), block):
        logits = (gt[None, :] - _cost(xt[i : i + block], yt)) / epsilon
        if exclude_diagonal:
            rows = torch.arange(i, min(i + block, len(x)))
            logits[rows - i, rows] = -math.inf
        out[i : i + block] = (
            -epsilon * (torch.logsumexp(logits, dim=1) - math.log(m))
        ).numpy()
    return out


def batched_sinkhorn(
    x: np.ndarray,
    y: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    epsilon: float,
    f0: np.ndarray,
    g0: np.ndarray,
    *,
    max_iter: int = 2000,
    tol: float = 1e-4,
    device: str = "cpu",
    overrelaxation: float = 1.3,
) -> BatchSinkhorn:
    """Sinkhorn for R weightings of one cost matrix (module docstring).

    ``x`` (n, d) and ``y`` (m, d) standardized points; ``a`` (n, R) and ``b`` (m, R)
    non-negative weights, each column summing to 1; ``epsilon`` in cost units; ``f0``, ``g0``
    the reference potentials the shared kernel is centred on. Over-relaxed updates
    (ω = ``overrelaxation``) on the support of each replicate. A replicate stops when its L1
    row-marginal error (and, over-relaxed, its column error) is below ``tol``.
    """
    dt, dev = torch.float64, _device(device)
    xt = torch.as_tensor(x, dtype=dt, device=dev)
    yt = torch.as_tensor(y, dtype=dt, device=dev)
    logk = -_cost(xt, yt)
    logk.add_(torch.as_tensor(f0, dtype=dt, device=dev)[:, None])
    logk.add_(torch.as_tensor(g0, dtype=dt, device=dev)[None, :])
    logk.div_(epsilon)
    k = logk.masked_fill_(logk < -_CUTOFF64, -math.inf).clamp_(max=_KERNEL_MAX).exp_()
    del logk
    at = torch.as_tensor(a, dtype=dt, device=dev)
    bt = torch.as_tensor(b, dtype=dt, device=dev)
    r_all = at.shape[1]
    u = (at > 0).to(dt)
    v = (bt > 0).to(dt)
    done = np.zeros(r_all, bool)
    failed = np.zeros(r_all, bool)
    n_iter = np.zeros(r_all, int)
    err_out = np.full(r_all, math.inf)
    active = torch.arange(r_all, device=dev)
    omega = overrelaxation

    def relax(old: torch.Tensor, new: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if omega == 1.0:
            return new
        pos = w > 0
        out = torch.zeros_like(new)
        out[pos] = old[pos].pow(1 - omega) * new[pos].pow(omega)
        return out

    for it in range(1, max_iter + 1):
        if len(active) == 0:
            break
        ua, va, aa, ba = u[:, active], v[:, active], at[:, active], bt[:, active]
        kv = k @ va
        if it > 1:
            err = (ua * kv - aa).abs().sum(0)
            if omega != 1.0:
                small = err < tol
                if bool(small.any()):
                    col = (va * (k.T @ ua) - ba).abs().sum(0)
                    err = torch.maximum(err, col)
            err_np = err.double().cpu().numpy()
            idx = active.cpu().numpy()
            err_out[idx] = err_np
            n_iter[idx] = it
            fin = np.isfinite(err_np)
            stop = (err_np < tol) & fin
            done[idx[stop]] = True
            failed[idx[~fin]] = True
            keep = ~stop & fin
            if not keep.all():
                sel = torch.as_tensor(np.flatnonzero(keep), device=dev)
                active = active[sel]
                ua, va, aa, ba, kv = ua[:, sel], va[:, sel], aa[:, sel], ba[:, sel], kv[:, sel]
                if len(active) == 0:
                    break
        un = torch.where(aa > 0, aa / kv, torch.zeros_like(kv))
        un = relax(ua, un, aa)
        ktu = k.T @ un
        vn = torch.where(ba > 0, ba / ktu, torch.zeros_like(ktu))
        vn = relax(va, vn, ba)
        # out of range for the shared kernel (or non-finite): give the replicate up
        big = torch.maximum(_log_range(un), _log_range(vn))
        bad = ~(big <= _SCALING_LIMIT)
        u[:, active] = un
        v[:, active] = vn
        if bool(bad.any()):
            bad_np = bad.cpu().numpy()
            failed[active.cpu().numpy()[bad_np]] = True
            active = active[~bad]
    converged = done & ~failed
    with np.errstate(divide="ignore"):
        log_v = np.log(v.double().cpu().numpy())
    return BatchSinkhorn(
        log_v=log_v, converged=converged, n_iter=n_iter, marginal_error=err_out
    )


def _log_range(s: torch.Tensor) -> torch.Tensor:
    """Per column, max |log s| over the positive entries (inf if any entry is inf/nan)."""
    pos = s > 0
    logs = torch.where(pos, s.log().abs(), torch.zeros_like(s))
    bad = ~torch.isfinite(s)
    return torch.where(bad.any(0), torch.full_like(logs[0], math.inf), logs.max(0).values)


def batched_images(
    q: np.ndarray,
    y: np.ndarray,
    g0: np.ndarray,
    log_v: np.ndarray,
    epsilon: float,
    *,
    block: int = 1024,
) -> tuple[np.ndarray, np.ndarray]:
    """Images T_r(q) of query rows ``q`` (nq, d) under every replicate (module docstring), as
    an (R, nq, d) float64 array, and a (R,) mask of replicates whose images are all finite
    (a query whose every weighted target entry underflows has none)."""
    qt, yt = torch.as_tensor(q, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    gt = torch.as_tensor(g0, dtype=torch.float64)
    lv = torch.as_tensor(log_v, dtype=torch.float64)  # (m, R)
    r_all, d = lv.shape[1], y.shape[1]
    vmax = torch.where(torch.isfinite(lv), lv, torch.full_like(lv, -math.inf)).max(0).values
    vt = (lv - vmax[None, :]).exp()  # (m, R), each column's max is 1
    weighted = (vt[:, :, None] * yt[:, None, :]).reshape(len(y), r_all * d)
    out = np.empty((r_all, len(q), d))
    ok = np.ones(r_all, bool)
    for i in range(0, len(q), block):
        logits = (gt[None, :] - _cost(qt[i : i + block], yt)) / epsilon
        logits.sub_(logits.max(dim=1, keepdim=True).values)
        e = logits.exp_()
        num = (e @ weighted).reshape(-1, r_all, d)
        den = e @ vt  # (b, R)
        ok &= (den > 0).all(0).cpu().numpy()
        out[:, i : i + block] = (num / den[:, :, None]).permute(1, 0, 2).cpu().numpy()
    ok &= np.isfinite(out).all(axis=(1, 2))
    return out, ok


def reweighted_refits(
    fitted: EntropicMap, a: np.ndarray, b: np.ndarray, query: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Refits of a fitted :class:`EntropicMap` with new weights on its own points, all at once:
    replicate r puts weights ``a[:, r]`` on the fitted source points (``anchors_``, in fit
    order) and ``b[:, r]`` on the target points (``support_``); a bootstrap resample is the
    weighting by multiplicities / n. Standardization and ε (cost units) stay those of the
    fitted map, the kernel is centred on its potentials (a warm start).

    Returns the images of ``query`` (original units) under every replicate, (R, nq, d), and a
    (R,) mask of replicates that converged with finite images; the others should be refitted
    on their own.
    """
    eps = float(fitted.epsilon_abs_)
    zs, zt = fitted.anchors_, fitted.support_
    g0 = np.asarray(fitted.potential_, dtype=np.float64)
    f0 = soft_c_transform(zs, zt, eps, g0)
    sol = batched_sinkhorn(
        zs,
        zt,
        a,
        b,
        eps,
        f0,
        g0,
        max_iter=fitted.max_iter,
        tol=fitted.tol,
        device=fitted.device,
    )
    zq = fitted._za(np.asarray(query, dtype=np.float64))
    images, ok = batched_images(zq, zt, g0, sol.log_v, eps)
    out = np.stack([fitted._unza(images[r]) for r in range(images.shape[0])])
    return out, ok & sol.converged
