"""Speed of the transport maps (fliptest_ot.md §3.1-3.5).

1. EntropicMap fit + transform, 20,000 x 20,000 points in 10-D (target < 20 s on 2 cores), on a
   10-D benchmark with a known Brenier map T* = ∇φ (L2-UVP reported), against POT's
   ``SinkhornTransport`` with its defaults (log-domain, the baseline) on a 2,000-point problem,
   timed in the same run (ratio = POT / ours on the same 2,000-point problem).
2. Exact OT (``ot.emd``) on 5,000 points: time with the raised cap, and the cost excess of POT's
   default ``numItermax=100000`` (silently suboptimal; ExactOTMap raises instead).

Run: ``.venv/bin/python benchmarks/fliptest_speed.py [--device cuda] [--n 20000]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import ot
import torch

from fairengine.transport import EntropicMap, ExactOTMap, TransportConvergenceError

try:
    from fliptest_markdown import write
except ImportError:  # run from the repo root as a module path
    from benchmarks.fliptest_markdown import write


def brenier_benchmark(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, callable]:
    """Source: correlated Gaussian with two mixture shifts; target ∇φ(x′) of a fresh source
    sample, φ(x) = ½xᵀAx + bᵀx + Σ_k c_k softplus(w_kᵀx) (convex), so T* = ∇φ."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    cov = q @ np.diag(np.linspace(0.5, 2.0, d)) @ q.T
    chol = np.linalg.cholesky(cov)
    shifts = np.stack([np.zeros(d), np.r_[2.0, -1.0, np.zeros(d - 2)]])
    a_mat = q @ np.diag(np.linspace(0.6, 1.6, d)) @ q.T
    b = rng.normal(scale=0.5, size=d)
    w = rng.normal(size=(4, d))
    c = np.array([1.0, 0.8, 0.6, 0.4])

    def sample(m: int) -> np.ndarray:
        comp = rng.integers(0, 2, m)
        return rng.normal(size=(m, d)) @ chol.T + shifts[comp]

    def grad_phi(x: np.ndarray) -> np.ndarray:
        s = 1 / (1 + np.exp(-(x @ w.T)))
        return x @ a_mat + b + (s * c) @ w

    return sample(n), grad_phi(sample(n)), grad_phi, sample


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--exact-n", type=int, default=5_000)
    ap.add_argument("--baseline-n", type=int, default=2_000)
    args = ap.parse_args()
    d = 10
    body = ["## EntropicMap, fit + transform", ""]
    body += ["| problem | n x n | fit s | transform s | total s | iterations | L2-UVP % |"]
    body += ["|---|---|---|---|---|---|---|"]

    xs, xt, grad_phi, sample = brenier_benchmark(args.n, d, 0)
    held = sample(5000)
    truth = grad_phi(held)
    c0 = time.process_time()
    t0 = time.perf_counter()
    m = EntropicMap(epsilon=0.03, device=args.device).fit(xs, xt)
    t1 = time.perf_counter()
    m.transform(xs)
    t2 = time.perf_counter()
    cpu = time.process_time() - c0
    uvp = 100 * ((m.transform(held) - truth) ** 2).sum(1).mean() / xt.var(0).sum()
    total = t2 - t0
    body.append(
        f"| 10-D Brenier, eps = 0.03 median | {args.n:,} | {t1 - t0:.1f} | {t2 - t1:.1f} | "
        f"**{total:.1f}** | {m.n_iter_} | {uvp:.2f} |"
    )

    # baseline: POT SinkhornTransport defaults (log-domain) vs ours, same 2k problem, same eps
    nb = args.baseline_n
    bs, bt = xs[:nb], xt[:nb]
    t0 = time.perf_counter()
    ours = EntropicMap(epsilon=0.03, device=args.device).fit(bs, bt)
    ours_img = ours.transform(bs)
    t_ours = time.perf_counter() - t0
    zs, zt = ours._z(bs), ours._z(bt)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pot = ot.da.SinkhornTransport(reg_e=ours.epsilon_abs_, tol=1e-9, max_iter=1000)
        pot.fit(Xs=zs, Xt=zt)
        pot_img = ours._unz(pot.transform(Xs=zs + 0.0))
    t_pot = time.perf_counter() - t0
    diff = float(np.abs(pot_img - ours_img).max() / bt.std(0).max())
    body.append(f"| same, ours | {nb:,} | | | {t_ours:.2f} | {ours.n_iter_} | |")
    body.append(
        f"| same, POT SinkhornTransport defaults (log-domain, baseline) | {nb:,} | | | "
        f"{t_pot:.2f} | | |"
    )
    body += [
        "",
        f"- target: 20k x 20k fit + transform < 20 s: **{total:.1f} s** "
        f"({'met' if total < 20 else 'NOT met'} in wall time); process CPU time {cpu:.1f} s "
        f"(both cores together; {cpu / 2:.1f} s per core if the two were ours alone).",
        f"- speed-up over POT's default SinkhornTransport on the same {nb:,}-point problem: "
        f"**{t_pot / t_ours:.1f}x**; max map difference {diff:.1e} target SDs.",
    ]

    ne = args.exact_n
    xs, xt, *_ = brenier_benchmark(ne, 8, 1)
    t0 = time.perf_counter()
    ex = ExactOTMap().fit(xs, xt)
    t_ex = time.perf_counter() - t0
    try:
        ExactOTMap(max_iter=100_000).fit(xs, xt)
        capped = "optimal"
    except TransportConvergenceError:
        capped = "raises TransportConvergenceError"
    zs, zt = ex._z(xs), ex._z(xt)
    cmat = ot.dist(zs, zt)
    w = np.full(ne, 1 / ne)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default_cost = float(ot.emd2(w, w, cmat))
    body += [
        "",
        "## Exact OT (ot.emd)",
        "",
        "| n x n, d = 8 | ExactOTMap fit s | POT default numItermax=100000 |",
        "|---|---|---|",
        f"| {ne:,} | {t_ex:.1f} | cost {100 * (default_cost / ex.cost_ - 1):+.1f} % vs optimum "
        f"(POT only warns); ExactOTMap with that cap {capped} |",
    ]
    write(
        f"fliptest_speed{'_cuda' if args.device == 'cuda' else ''}",
        "FlipTest transport-map speed",
        body,
        args.device,
    )


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
