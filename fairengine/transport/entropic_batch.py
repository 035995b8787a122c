r"""Many entropic OT problems on one point set at once: the refits of FlipTest's nulls and
bootstrap (``../shared/docs/fliptest_ot.md`` §4.4) as one batched Sinkhorn. The iteration itself
is the package's one Sinkhorn loop (:func:`fairengine.transport.sinkhorn.scaling_iterations`);
this module chooses its kernel (:class:`~fairengine.transport.sinkhorn.SharedKernel`,
:class:`~fairengine.transport.sinkhorn.StackedKernels`, or one problem at a time) and turns the
potentials into images.

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
caller refits it on its own (the stabilized solver). FlipTest uses this for the bootstrap
(:func:`reweighted_refits`: the observed map's potentials centre the kernel).

The two nulls split a point set instead, and there a shared kernel fails: on one-hot data with
outliers most splits leave some point with no counterpart within float range of the reference
(measured on Adult: most permutation replicates). :func:`split_refits` therefore runs the
stabilized solver itself on R problems at once (:func:`stabilized_batch_sinkhorn`: a kernel and
potentials per replicate, batched products). That saves the per-iteration overhead, which
dominates small problems: 2x faster than one-by-one refits on self-map halves of 250 points;
on 500 x 500 permutation splits it was slower (memory-bound products), so the permutation null
is refitted one by one and shared between the two directions instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from fairengine.library_threads import small_problem_threads
from fairengine.transport.entropic import EntropicMap, median_cost
from fairengine.transport.sinkhorn import (
    CUTOFF,
    SharedKernel,
    StackedKernels,
    scaling_iterations,
    solve_uniform,
    squared_cost,
    torch_device,
    torch_dtype,
    torch_squared_cost,
)


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
        logits = (gt[None, :] - torch_squared_cost(xt[i : i + block], yt)) / epsilon
        if exclude_diagonal:
            rows = torch.arange(i, min(i + block, len(x)))
            logits[rows - i, rows] = -math.inf
        out[i : i + block] = (-epsilon * (torch.logsumexp(logits, dim=1) - math.log(m))).numpy()
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
    overrelaxation: float | str = "auto",
) -> BatchSinkhorn:
    """Sinkhorn for R weightings of one cost matrix (module docstring).

    ``x`` (n, d) and ``y`` (m, d) standardized points; ``a`` (n, R) and ``b`` (m, R)
    non-negative weights, each column summing to 1; ``epsilon`` in cost units; ``f0``, ``g0``
    the reference potentials the shared kernel is centred on. Over-relaxed updates on the
    support of each replicate: ω = ``overrelaxation``, or with "auto" (default) one ω per
    replicate raised from its observed rate (:mod:`fairengine.transport.overrelaxation`). A
    replicate stops when its L1 row- and column-marginal errors are below ``tol``.
    """
    dt, dev = torch.float64, torch_device(device)
    aa = torch.as_tensor(a, dtype=dt, device=dev)
    ba = torch.as_tensor(b, dtype=dt, device=dev)
    support = (aa > 0, ba > 0)
    kernel = SharedKernel(
        torch.as_tensor(x, dtype=dt, device=dev),
        torch.as_tensor(y, dtype=dt, device=dev),
        epsilon,
        torch.as_tensor(f0, dtype=dt, device=dev),
        torch.as_tensor(g0, dtype=dt, device=dev),
        support,
    )
    stats = scaling_iterations(
        kernel,
        aa,
        ba,
        problems=a.shape[1],
        max_iter=max_iter,
        tol=tol,
        overrelaxation=overrelaxation,
        support=support,
    )
    v_out = kernel.v_out.cpu().numpy()
    v_out[:, ~stats.converged] = 0.0
    with np.errstate(divide="ignore"):
        log_v = np.log(v_out)
    return BatchSinkhorn(
        log_v=log_v,
        converged=stats.converged,
        n_iter=stats.n_iter,
        marginal_error=stats.marginal_error,
    )


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
        logits = (gt[None, :] - torch_squared_cost(qt[i : i + block], yt)) / epsilon
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
    with small_problem_threads(float(len(zs) * len(zt))):
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


def stabilized_batch_sinkhorn(
    x: torch.Tensor,
    y: torch.Tensor,
    epsilon: float,
    *,
    max_iter: int = 2000,
    tol: float = 1e-4,
    overrelaxation: float = 1.3,
) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """The stabilized scaling Sinkhorn of :func:`~fairengine.transport.entropic.sinkhorn_potentials`
    for R independent problems of equal sizes at once: ``x`` (R, n, d), ``y`` (R, m, d),
    uniform weights, one ε (cost units). Every replicate keeps its own kernel and potentials
    (absorbed separately when its scalings leave [e^−20, e^20]), so no replicate is limited by
    another's range; the batch only shares the loop, which on small problems costs more than
    the products themselves.

    Returns potentials f (R, n), g (R, m) and a (R,) bool mask of replicates that reached
    ``tol`` with finite potentials (the others should be refitted on their own)."""
    n, m = x.shape[1], y.shape[1]
    kernel = StackedKernels(x, y, epsilon)
    stats = scaling_iterations(
        kernel,
        1.0 / n,
        1.0 / m,
        problems=x.shape[0],
        max_iter=max_iter,
        tol=tol,
        overrelaxation=overrelaxation,
    )
    f_out, g_out = kernel.f_out, kernel.g_out
    ok = stats.converged.copy()
    ok &= np.isfinite(f_out.cpu().numpy()).all(1) & np.isfinite(g_out.cpu().numpy()).all(1)
    return f_out, g_out, ok


def split_refits(
    estimator: EntropicMap,
    pool: np.ndarray,
    source: np.ndarray,
    target: np.ndarray,
    *,
    inverse: bool = False,
    rng: np.random.Generator | None = None,
    max_chunk_bytes: float | None = None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Refits of an entropic map with a fixed relative ε between subsets of one point set, all
    at once: replicate r maps ``pool[source[r]]`` onto ``pool[target[r]]`` (FlipTest's
    permutation null: a random split of S ∪ S′; its self-map null: random halves of S).

    ``source`` (R, k) and ``target`` (R, l) are row indices into ``pool`` (original units).
    Standardization (pooled mean and SD, constant columns held) and ε in cost units
    (``estimator.epsilon`` × the median cost between the first replicate's two sides) are
    computed once from the pool, which for these splits is every replicate's own pooled
    sample. Replicates run through :func:`stabilized_batch_sinkhorn` in chunks of at most
    ``max_chunk_bytes`` of kernel (default 16 MB on the CPU, whose loop solves them one by one,
    and 512 MB on a GPU, whose batched solver wants many at once).

    Returns the images of each replicate's source rows (R, k, d), with ``inverse`` the images
    of its target rows under the inverse map (R, l, d), and a (R,) mask of replicates that
    converged (the others should be refitted on their own)."""
    if estimator.epsilon is None:
        raise ValueError("split_refits needs a fixed epsilon (the observed fit's)")
    rng = np.random.default_rng(0) if rng is None else rng
    center = pool.mean(axis=0)
    sd = pool.std(axis=0)
    active = sd > 1e-12 * np.maximum(1.0, np.abs(center))
    z = ((pool - center) / np.where(active, sd, 1.0))[:, active]
    eps = float(estimator.epsilon) * median_cost(z[source[0]], z[target[0]], rng)
    dt = torch_dtype(estimator.dtype)
    zt = torch.as_tensor(z, dtype=dt)
    r_all, k_rows, l_rows = source.shape[0], source.shape[1], target.shape[1]
    if max_chunk_bytes is None:
        max_chunk_bytes = 1.6e7 if estimator.device == "cpu" else 5.12e8
    chunk = max(1, int(max_chunk_bytes // (k_rows * l_rows * (4 if dt == torch.float32 else 8))))
    images = np.empty((r_all, k_rows, pool.shape[1]))
    inv = np.empty((r_all, l_rows, pool.shape[1])) if inverse else None
    ok = np.zeros(r_all, bool)
    with small_problem_threads(float(min(chunk, r_all) * k_rows * l_rows)):
        for start in range(0, r_all, chunk):
            sl = slice(start, min(start + chunk, r_all))
            xs = zt[torch.as_tensor(source[sl])]
            ys = zt[torch.as_tensor(target[sl])]
            if estimator.device == "cpu":
                fz, bz, good = solve_splits_one_by_one(
                    xs, ys, eps, estimator.max_iter, estimator.tol, inverse=inverse
                )
            else:
                f, g, good = stabilized_batch_sinkhorn(
                    xs.to(estimator.device),
                    ys.to(estimator.device),
                    eps,
                    max_iter=estimator.max_iter,
                    tol=estimator.tol,
                )
                f, g = f.cpu(), g.cpu()
                fz = stacked_softmax_images(xs, ys, g, eps).double().numpy()
                bz = stacked_softmax_images(ys, xs, f, eps).double().numpy() if inverse else None
            ok[sl] = good
            images[sl] = _unstandardize(fz, center, sd, active)
            if inv is not None:
                inv[sl] = _unstandardize(bz, center, sd, active)  # type: ignore[arg-type]
    return images, inv, ok


def solve_splits_one_by_one(
    xs: torch.Tensor,
    ys: torch.Tensor,
    eps: float,
    max_iter: int,
    tol: float,
    *,
    inverse: bool = False,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """The replicates of :func:`split_refits` solved one at a time by the numpy loop
    (:func:`~fairengine.transport.sinkhorn.solve_uniform`, adaptive over-relaxation), in
    the points' dtype, each with its images (and, with ``inverse``, its target's images under
    the inverse map) computed from the same cost matrix (:func:`barycentric_images`). On CPU this
    beats :func:`stabilized_batch_sinkhorn`: each replicate's kernel stays in cache and stops
    at its own convergence (measured on Adult's self-map halves, 49 x 250 x 250: 0.6 s
    against 3.4 s); the images from the kept cost matrix cost half of torch's batched softmax
    (500 x 500, 2 features: 0.85 ms against 2.3 ms each)."""
    npd = np.float32 if xs.dtype == torch.float32 else np.float64
    x64, y64 = xs.double().numpy(), ys.double().numpy()
    fwd = np.full(x64.shape, np.nan)
    inv = np.full(y64.shape, np.nan) if inverse else None
    good = np.zeros(len(x64), bool)
    for r in range(len(x64)):
        cost = squared_cost(x64[r], y64[r])
        run = solve_uniform(cost, eps, max_iter=max_iter, tol=tol, dtype=npd)
        good[r] = run.marginal_error < tol and np.isfinite(run.f).all() and np.isfinite(run.g).all()
        if not good[r]:
            continue
        fwd[r] = barycentric_images(cost, run.g, eps, y64[r])
        if inv is not None:
            inv[r] = barycentric_images(cost.T, run.f, eps, x64[r])
    return fwd, inv, good


def barycentric_images(
    cost: np.ndarray, potential: np.ndarray, eps: float, support: np.ndarray
) -> np.ndarray:
    """T(x_i) = Σ_j s_j softmax_j((h_j − C_ij)/ε) (float64; ``cost`` is overwritten-safe: a
    new array holds the logits)."""
    logits = potential[None, :] - cost
    logits *= 1.0 / eps
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    return (logits @ support) / logits.sum(axis=1, keepdims=True)


def stacked_softmax_images(
    q: torch.Tensor, support: torch.Tensor, potential: torch.Tensor, eps: float
) -> torch.Tensor:
    """Batched T(q) = Σ_j s_j softmax_j((h_j − ‖q − s_j‖²)/ε), (R, nq, d)."""
    logits = torch.baddbmm(
        (potential - (support * support).sum(2))[:, None, :] / eps,
        q,
        support.transpose(1, 2),
        alpha=2.0 / eps,
    )
    logits.sub_(logits.amax(2, keepdim=True))
    w = logits.masked_fill_(logits < -CUTOFF, -math.inf).exp_()
    return torch.bmm(w, support) / w.sum(2, keepdim=True)


def _unstandardize(
    z: np.ndarray, center: np.ndarray, sd: np.ndarray, active: np.ndarray
) -> np.ndarray:
    out = np.broadcast_to(center, (*z.shape[:-1], len(center))).copy()
    out[..., active] = z * sd[active] + center[active]
    return out
