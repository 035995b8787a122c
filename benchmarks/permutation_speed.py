"""Speed of the permutation tests (issue 4 targets), with baselines measured in the same run.

1. 10,000 permutations of the studentized FNR difference on 1,000,000 rows (hard predictions):
   target < 1 s. Baseline: permuting the 1e6 rows and recomputing both FNRs per permutation
   with numpy (timed on a few permutations, extrapolated per permutation).
2. 10,000 permutations of the studentized AUC difference (DeLong per permutation) on 100,000
   rows: target < 30 s on 2 cores and >= 15x faster than a loop calling scikit-learn's
   ``roc_auc_score`` (for both groups) per permutation — that loop is timed on a subset of
   permutations and extrapolated per permutation (it does not even compute DeLong variances).
3. (issue 23) the FNR test of 1 against the strongest hand-written numpy baseline at matched
   work, interleaved in one process (A, B, A, B, …; medians and their ratio): count the
   (group, label, prediction) cells with one ``np.bincount``, draw the same number of
   permutations as ``Generator.multivariate_hypergeometric`` cell counts, compute the same
   studentized statistic Z = ΔFNR / √(Var_A + Var_B) (binomial variances) and the same
   (1 + b)/(1 + T) p-value. Two baseline variants: drawing all four (y, ŷ) cells, and drawing
   only the three cells the FNR reads (negatives merged; fewer draws). Target: FairEngine at
   least as fast as the faster variant, peak memory (tracemalloc) under 2x the role columns
   (label int8, prediction int8, group mask bool: 3 bytes per row).

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

from interleaved_timing import interleaved, traced_peak

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


def numpy_fnr_test(y, yhat, g, t: int, seed: int, merge: bool) -> float:
    """The hand-written numpy peer of ``permutation_test(metric="fnr")`` (all rows, two-sided,
    studentized per permutation): one bincount over (group, y, ŷ), ``t`` multivariate
    hypergeometric draws of group A's cell counts (all four cells, or with ``merge`` the
    negatives as one cell: the FNR does not read their split), Z per draw, p = (1 + b)/(1 + t)
    with undefined permuted Z counted as extreme (as FairEngine does)."""
    rng = np.random.default_rng(seed)
    code = 2 * y + yhat  # int8, cells TN FP FN TP
    code += g.view(np.int8) << 2
    cells = np.bincount(code, minlength=8)
    cb, ca = cells[:4], cells[4:]
    colors = ca + cb
    if merge:
        colors = np.array([colors[0] + colors[1], colors[2], colors[3]])
    xa = rng.multivariate_hypergeometric(colors, int(ca.sum()), size=t)
    xb = colors - xa

    def z(a, b):  # a[..., -2] = FN, a[..., -1] = TP
        pos_a, pos_b = a[..., -2] + a[..., -1], b[..., -2] + b[..., -1]
        fa, fb = a[..., -2] / pos_a, b[..., -2] / pos_b
        return (fa - fb) / np.sqrt(fa * (1 - fa) / pos_a + fb * (1 - fb) / pos_b)

    with np.errstate(invalid="ignore", divide="ignore"):
        z_obs, z_null = z(ca, cb), z(xa, xb)
    extreme = ~(np.abs(z_null) < abs(z_obs) * (1 - 100 * np.finfo(float).eps))
    return (1 + int(np.count_nonzero(extreme))) / (1 + t)


def peer_rows(rows: list[int], t_perm: int, repeats: int) -> list[str]:
    """Section 3: FairEngine's FNR test against the numpy baselines, interleaved."""
    out = [
        "| rows | permutations | repeats | numpy, 4 cells: wall / CPU ms "
        "| numpy, 3 cells: wall / CPU ms | FairEngine: wall / CPU ms "
        "| ratio vs faster numpy (wall / CPU) | peak / role columns: numpy 4 cells, "
        "3 cells, FairEngine | targets |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n in rows:
        out.append(peer_row(n, t_perm, repeats))
        print(out[-1])
    return out


def peer_row(n: int, t_perm: int, repeats: int) -> str:
    y, yhat, g = fnr_data(n, np.random.default_rng(7))
    fns = {
        "np4": lambda: numpy_fnr_test(y, yhat, g, t_perm, 1, merge=False),
        "np3": lambda: numpy_fnr_test(y, yhat, g, t_perm, 1, merge=True),
        "fe": lambda: permutation_test(y, yhat, g, metric="fnr", n_permutations=t_perm, seed=1),
    }
    fe, p4, p3 = fns["fe"]().pvalue, fns["np4"](), fns["np3"]()
    # the same test: p-values agree within Monte-Carlo error (the random streams differ)
    se = np.sqrt(max(fe * (1 - fe), 1 / t_perm) * 2 / t_perm)
    assert abs(fe - p4) < 6 * se and abs(fe - p3) < 6 * se, (fe, p4, p3)
    med = interleaved(fns, repeats)
    roles = y.nbytes + yhat.nbytes + g.nbytes
    peaks = {k: traced_peak(fn) / roles for k, fn in fns.items()}
    best = min(med["np4"][0], med["np3"][0])
    best_cpu = min(med["np4"][1], med["np3"][1])
    ratio, ratio_cpu = best / med["fe"][0], best_cpu / med["fe"][1]
    met = (
        f"speed {'met' if ratio >= 1.0 else 'NOT met'}, "
        f"memory {'met' if peaks['fe'] < 2.0 else 'NOT met'}"
    )
    return (
        f"| {n:,} | {t_perm:,} | {repeats} "
        f"| {med['np4'][0] * 1e3:.2f} / {med['np4'][1] * 1e3:.2f} "
        f"| {med['np3'][0] * 1e3:.2f} / {med['np3'][1] * 1e3:.2f} "
        f"| {med['fe'][0] * 1e3:.2f} / {med['fe'][1] * 1e3:.2f} "
        f"| {ratio:.2f}x / {ratio_cpu:.2f}x "
        f"| {peaks['np4']:.2f}, {peaks['np3']:.2f}, {peaks['fe']:.2f} | {met} "
        f"(p: FairEngine {fe:.4f}, numpy {p4:.4f} / {p3:.4f}) |"
    )


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
    ap.add_argument(
        "--peer-rows",
        type=int,
        nargs="*",
        default=[10_000, 1_000_000, 10_000_000],
        help="rows of the interleaved comparison with the numpy baseline (section 3)",
    )
    ap.add_argument("--peer-repeats", type=int, default=21, help="interleaved repeats")
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

    # 3. FNR vs the numpy multivariate_hypergeometric baseline, interleaved
    load_peer = os.getloadavg()[0]
    peer = peer_rows(args.peer_rows, t_perm, args.peer_repeats)

    load = os.getloadavg()
    lines = [
        "# Permutation-test speed",
        "",
        f"Date: {datetime.now(UTC).isoformat(timespec='seconds')}  ",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPU(s), Python "
        f"{platform.python_version()}, numpy {np.__version__}; device used: {device}  ",
        f"Load average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
        "(other jobs were sharing the cores when this is above the CPU count)  ",
        f"Command: `nice -n 10 .venv/bin/python benchmarks/permutation_speed.py --device "
        f"{args.device} --permutations {t_perm}`",
        "",
        "| test | permutations | FairEngine | baseline (same run) | speed-up | target |",
        "|---|---|---|---|---|---|",
        fnr_row,
        auc_row,
        "",
        "The FNR test runs on the (label, prediction) cell counts: 10,000 multivariate "
        "hypergeometric draws over the 3 cells the FNR tells apart (TN and FP merged), "
        "independent of the row count (the rows are only counted, blockwise). The AUC test sorts "
        "once and computes both groups' Mann–Whitney AUC and DeLong variance per permutation "
        "from cumulative counts (O(n) per permutation, batched). The sklearn baseline is timed "
        "on a subset of permutations and extrapolated per permutation; it computes the two "
        "AUCs only (no variance).",
        "",
        "## FNR test vs the hand-written numpy baseline, interleaved (issue 23)",
        "",
        f"Load average when this section started: {load_peer:.2f} (2 cores shared with other "
        "engineers' jobs). Same test on both sides (`numpy_fnr_test` in the benchmark): all-rows "
        "permutations, two-sided, Z = ΔFNR / √(FNR_A(1−FNR_A)/n⁺_A + FNR_B(1−FNR_B)/n⁺_B) per "
        "permutation, p = (1 + b)/(1 + T); the p-values of both sides are checked to agree "
        "within Monte-Carlo error in the run (their random streams differ). numpy counts the "
        "8 (group, y, ŷ) cells with one `np.bincount` of 4g + 2y + ŷ (int8) and draws "
        "`Generator.multivariate_hypergeometric` over the 4 (y, ŷ) cells, or over 3 (TN and "
        "FP merged, which the FNR does not tell apart). FairEngine: `permutation_test(y, ŷ, "
        "g, metric='fnr')`, which validates the inputs, counts the cells blockwise with "
        "`np.count_nonzero` (no copy of a column), merges cells with equal sums and draws "
        "with `multivariate_hypergeometric`. Calls alternate numpy 4, numpy 3, FairEngine, … "
        "after one warm-up each; medians; ratio = faster numpy median / FairEngine median "
        "(> 1: FairEngine faster). Peak = tracemalloc peak of one call / bytes of the role "
        "columns (label int8 + prediction int8 + group bool = 3 bytes per row); below about "
        "1M rows the T-sized arrays (draws, null distribution) dominate the peak on both "
        "sides. FairEngine draws the same cells in the same order as the 3-cell baseline, so "
        "at the same seed their p-values are equal (shown in the last column). Where the "
        "draws dominate (few rows: the same `multivariate_hypergeometric` call on both sides) "
        "FairEngine's general ratio-metric statistic (five sums per group, the conventions "
        "for degenerate permutations, the result object) costs a few tenths of a millisecond "
        "more than the FNR-only baseline.",
        "",
        *peer,
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if args.device == "numpy" else f"_{args.device}"
    out = RESULTS / f"permutation_speed{suffix}.md"
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
