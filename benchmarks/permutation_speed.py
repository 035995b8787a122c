"""Speed of the permutation tests (issue 4 targets), with baselines measured in the same run.

1. 10,000 permutations of the studentized FNR difference on 1,000,000 rows (hard predictions):
   target < 1 s. Baseline: permuting the 1e6 rows and recomputing both FNRs per permutation
   with numpy (timed on a few permutations, extrapolated per permutation).
2. 10,000 permutations of the studentized AUC difference (DeLong per permutation) on 100,000
   rows: target < 30 s on 2 cores and >= 15x faster than a loop calling scikit-learn's
   ``roc_auc_score`` (for both groups) per permutation — that loop is timed on a subset of
   permutations and extrapolated per permutation (it does not even compute DeLong variances).

Usage::

    .venv/bin/python benchmarks/permutation_speed.py                 # numpy backend
    .venv/bin/python benchmarks/permutation_speed.py --device cuda   # torch on the GPU
    .venv/bin/python benchmarks/permutation_speed.py --device cpu    # torch on the CPU

Writes ``benchmarks/results/permutation_speed[_<device>].md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairengine.permutation import permutation_test

RESULTS = Path(__file__).resolve().parent / "results"


def fnr_data(n: int, rng: np.random.Generator):
    g = rng.random(n) < 0.3
    y = rng.binomial(1, np.where(g, 0.6, 0.3)).astype(np.int8)
    yhat = np.where(rng.random(n) < 0.8, y, 1 - y).astype(np.int8)
    return y, yhat, g


def auc_data(n: int, rng: np.random.Generator):
    g = rng.random(n) < 0.4
    y = rng.binomial(1, np.where(g, 0.35, 0.25)).astype(np.int8)
    s = 1 / (1 + np.exp(-rng.normal(1.2 * y - 0.6, 1.0)))
    return y, s, g


def naive_fnr_per_perm(y, yhat, g, reps: int, rng) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        m = rng.permutation(g)
        out = []
        for grp in (m, ~m):
            pos = y[grp] == 1
            f = np.mean(yhat[grp][pos] == 0)
            out.append((f, f * (1 - f) / pos.sum()))
        _ = (out[0][0] - out[1][0]) / np.sqrt(out[0][1] + out[1][1])
    return (time.perf_counter() - t) / reps


def sklearn_auc_per_perm(y, s, g, reps: int, rng) -> tuple[float, float]:
    """(wall, CPU) seconds per permutation of the scikit-learn loop."""
    t, c = time.perf_counter(), time.process_time()
    for _ in range(reps):
        m = rng.permutation(g)
        _ = roc_auc_score(y[m], s[m]) - roc_auc_score(y[~m], s[~m])
    return (time.perf_counter() - t) / reps, (time.process_time() - c) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=["numpy", "cpu", "cuda"], default="numpy")
    ap.add_argument("--permutations", type=int, default=10_000)
    ap.add_argument("--fnr-rows", type=int, default=1_000_000)
    ap.add_argument("--auc-rows", type=int, default=100_000)
    ap.add_argument("--sklearn-reps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3, help="FNR timing repeats (best of)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    t_perm = args.permutations
    device = "numpy (CPU)"
    backend = {"backend": "numpy"}
    if args.device != "numpy":
        import torch

        if args.device == "cuda" and not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA GPU available")
        backend = {"backend": "torch", "device": args.device}
        device = f"torch {torch.__version__} on {args.device}" + (
            f" ({torch.cuda.get_device_name(0)})" if args.device == "cuda" else ""
        )
    print(f"device used: {device}")

    # 1. FNR on 1e6 rows
    y, yhat, g = fnr_data(args.fnr_rows, rng)
    best = np.inf
    for _ in range(args.repeats):
        t = time.perf_counter()
        res = permutation_test(y, yhat, g, metric="fnr", n_permutations=t_perm, seed=1)
        best = min(best, time.perf_counter() - t)
    naive = naive_fnr_per_perm(y, yhat, g, 5, rng)
    fnr_row = (
        f"| FNR diff, studentized, {args.fnr_rows:,} rows | {t_perm:,} | {best:.3f} s "
        f"| {naive * 1e3:.1f} ms/perm → {naive * t_perm:.0f} s (extrapolated from 5) "
        f"| {naive * t_perm / best:,.0f}x | < 1 s: {'met' if best < 1 else 'NOT met'} |"
    )
    print(fnr_row, f"(p={res.pvalue:.4f}, path={res.path})")

    # 2. AUC on 1e5 rows
    y, s, g = auc_data(args.auc_rows, rng)
    sk, sk_cpu = sklearn_auc_per_perm(y, s, g, args.sklearn_reps, rng)
    t, c = time.perf_counter(), time.process_time()
    res = permutation_test(y, s, g, metric="auc", n_permutations=t_perm, seed=2, **backend)
    auc_s, auc_cpu = time.perf_counter() - t, time.process_time() - c
    sk2, sk2_cpu = sklearn_auc_per_perm(y, s, g, args.sklearn_reps, rng)
    sk, sk_cpu = (sk + sk2) / 2, (sk_cpu + sk2_cpu) / 2  # before and after: load drifts
    ratio = sk * t_perm / auc_s
    ratio_cpu = sk_cpu * t_perm / auc_cpu
    auc_row = (
        f"| AUC diff, DeLong-studentized per permutation, {args.auc_rows:,} rows | {t_perm:,} "
        f"| {auc_s:.2f} s wall ({auc_cpu:.2f} s CPU) | sklearn roc_auc_score loop "
        f"{sk * 1e3:.1f} ms/perm wall ({sk_cpu * 1e3:.1f} ms CPU) → {sk * t_perm:.0f} s "
        f"(extrapolated from 2×{args.sklearn_reps}, timed before and after) "
        f"| {ratio:.1f}x wall, {ratio_cpu:.1f}x CPU "
        f"| < 30 s and >= 15x: {'met' if auc_s < 30 and ratio >= 15 else 'NOT met'} (wall) |"
    )
    print(auc_row, f"(p={res.pvalue:.4f}, path={res.path})")

    load = os.getloadavg()
    lines = [
        "# Permutation-test speed",
        "",
        f"Date: {datetime.now(UTC).isoformat(timespec='seconds')}  ",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPU(s), Python "
        f"{platform.python_version()}, numpy {np.__version__}; device used: {device}  ",
        f"Load average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
        "(other jobs were sharing the cores when this is above the CPU count)  ",
        f"Command: `.venv/bin/python benchmarks/permutation_speed.py --device {args.device}"
        f" --permutations {t_perm}`",
        "",
        "| test | permutations | FairEngine | baseline (same run) | speed-up | target |",
        "|---|---|---|---|---|---|",
        fnr_row,
        auc_row,
        "",
        "The FNR test runs on the (label, prediction) cell counts: 10,000 multivariate "
        "hypergeometric draws over 4 cells, independent of the row count. The AUC test sorts "
        "once and computes both groups' Mann–Whitney AUC and DeLong variance per permutation "
        "from cumulative counts (O(n) per permutation, batched). The sklearn baseline is timed "
        "on a subset of permutations and extrapolated per permutation; it computes the two "
        "AUCs only (no variance).",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if args.device == "numpy" else f"_{args.device}"
    out = RESULTS / f"permutation_speed{suffix}.md"
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
