"""Streamed audits at scale (issue 21): wall time and peak RSS of the count-based methods over
10M, 30M (and 100M) rows of Parquet, against the same work in pandas at 10M.

The data: 3 protected attributes (race: 5 string groups, sex: 2 integer groups, age: 3 string
groups), a 0/1 label and a probability score, in Parquet files of 2M rows each; a size of N rows
is the first N/2M files (written once, reused). Each measurement runs in its own subprocess, so
its peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is its own:

* ``stream``: :func:`fairengine.streaming.stream_counts` (threshold 0.5, 1M-row batches), then
  group parity, group metrics, the proportion permutation tests (positive rate, TPR, FPR;
  1999 permutations) and the intersectional audit from the counts;
* ``pandas``: ``pd.read_parquet`` of the same files, ``AuditDataset.from_frame`` and the same
  four methods on rows; its findings are compared with the stream's (largest difference).

Usage::

    nice -n 10 .venv/bin/python benchmarks/scale.py --sizes 10 30 100 --pandas 10 \
        --data /tmp/fairengine-scale --out benchmarks/results/scale.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROWS_PER_FILE = 2_000_000
ROLES = {"label": "y", "protected": ("race", "sex", "age"), "score": "score"}


def write_data(folder: Path, n_files: int, seed: int = 0) -> list[Path]:
    """Files part-00000.parquet … of ROWS_PER_FILE rows each (existing files are kept)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n_files):
        path = folder / f"part-{i:05d}.parquet"
        paths.append(path)
        if path.exists():
            continue
        rng = np.random.default_rng([seed, i])
        n = ROWS_PER_FILE
        race = rng.choice(
            np.array(["white", "black", "asian", "hispanic", "other"]),
            n,
            p=[0.55, 0.2, 0.12, 0.1, 0.03],
        )
        sex = rng.integers(1, 3, n)
        age = rng.choice(np.array(["<25", "25-60", ">60"]), n, p=[0.2, 0.6, 0.2])
        shift = (race == "black") * 0.3 + (sex == 2) * 0.2 + (age == ">60") * 0.1
        y = (rng.random(n) < 0.3 + 0.2 * (race == "white")).astype(np.int64)
        score = 1 / (1 + np.exp(-(-0.5 + 1.5 * y - shift + rng.normal(0, 1, n))))
        frame = pd.DataFrame({"race": race, "sex": sex, "age": age, "y": y, "score": score})
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp)
        tmp.rename(path)
    return paths


def _configs() -> tuple[Any, Any, Any]:
    from fairengine.group_metrics.config import GroupMetricsConfig
    from fairengine.intersectional.config import IntersectionalConfig
    from fairengine.permutation.config import PermutationConfig

    return (
        GroupMetricsConfig(),
        PermutationConfig(metrics=["positive_rate", "tpr", "fpr"]),
        IntersectionalConfig(),
    )


def _findings(results: list[Any]) -> dict[str, list[float | None]]:
    out = {}
    for r in results:
        for f in r.findings:
            iv = f.interval
            out[f"{r.method}:{f.key}"] = [
                f.estimate,
                None if iv is None else iv.low,
                None if iv is None else iv.high,
                f.pvalue,
            ]
    return out


def run_stream(paths: list[str], batch_rows: int) -> dict[str, Any]:
    from fairengine.group_metrics.method import run_group_metrics_from_counts
    from fairengine.group_parity.method import group_parity_from_counts
    from fairengine.intersectional.method import run_intersectional_from_counts
    from fairengine.permutation.method import run_permutation_tests_from_counts
    from fairengine.roles import ColumnRoles
    from fairengine.streaming import stream_counts

    gm, perm, inter = _configs()
    t = {}
    t0 = time.perf_counter()
    counts = stream_counts(paths, ColumnRoles(**ROLES), threshold=0.5, batch_rows=batch_rows)
    t["stream"] = time.perf_counter() - t0
    results = []
    for name, fn in (
        ("group_parity", lambda: group_parity_from_counts(counts)),
        ("group_metrics", lambda: run_group_metrics_from_counts(counts, gm)),
        ("permutation_tests", lambda: run_permutation_tests_from_counts(counts, perm, seed=0)),
        ("intersectional", lambda: run_intersectional_from_counts(counts, inter, seed=0)),
    ):
        t1 = time.perf_counter()
        results.append(fn())
        t[name] = time.perf_counter() - t1
    t["total"] = time.perf_counter() - t0
    return {"rows": counts.n_rows, "seconds": t, "findings": _findings(results)}


def run_stream_memory(paths: list[str], batch_rows: int) -> dict[str, Any]:
    """Peak RSS after the imports and after the stream alone (no methods)."""
    from fairengine.roles import ColumnRoles
    from fairengine.streaming import stream_counts

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    counts = stream_counts(paths, ColumnRoles(**ROLES), threshold=0.5, batch_rows=batch_rows)
    return {
        "rows": counts.n_rows,
        "batches": counts.n_batches,
        "imports_rss_mb": base,
        "seconds": {"stream": time.perf_counter() - t0},
        "findings": {},
    }


def run_pandas(paths: list[str]) -> dict[str, Any]:
    import pandas as pd

    from fairengine.dataset import AuditDataset
    from fairengine.group_metrics.method import run_group_metrics
    from fairengine.group_parity.method import group_parity
    from fairengine.intersectional.method import run_intersectional
    from fairengine.permutation.method import run_permutation_tests
    from fairengine.roles import ColumnRoles

    gm, perm, inter = _configs()
    t = {}
    t0 = time.perf_counter()
    frame = pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
    t["read"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    ds = AuditDataset.from_frame(frame, ColumnRoles(**ROLES), threshold=0.5)
    t["dataset"] = time.perf_counter() - t1
    results = []
    for name, fn in (
        ("group_parity", lambda: group_parity(ds)),
        ("group_metrics", lambda: run_group_metrics(ds, gm)),
        ("permutation_tests", lambda: run_permutation_tests(ds, perm, seed=0)),
        ("intersectional", lambda: run_intersectional(ds, inter, seed=0)),
    ):
        t1 = time.perf_counter()
        results.append(fn())
        t[name] = time.perf_counter() - t1
    t["total"] = time.perf_counter() - t0
    return {"rows": ds.n_rows, "seconds": t, "findings": _findings(results)}


def child(args: argparse.Namespace) -> None:
    paths = args.files
    if args.child == "memory":
        out = run_stream_memory(paths, args.batch_rows)
    elif args.child == "stream":
        out = run_stream(paths, args.batch_rows)
    else:
        out = run_pandas(paths)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def measure(engine: str, paths: list[Path], batch_rows: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", engine, "--batch-rows", str(batch_rows)]
    cmd += ["--files", *map(str, paths)]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{engine} on {len(paths)} files failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(engine=engine, process_wall=wall, load_before=load, load_after=os.getloadavg()[0])
    return out


def largest_difference(a: dict[str, list], b: dict[str, list]) -> tuple[int, float]:
    common = set(a) & set(b)
    worst = 0.0
    for k in common:
        for x, y in zip(a[k], b[k], strict=True):
            if x is None or y is None:
                assert x is y, k
            elif not (np.isnan(x) and np.isnan(y)):
                worst = max(worst, abs(x - y))
    return len(common), worst


def _size_mb(folder: str) -> float:
    return sum(p.stat().st_size for p in Path(folder).glob("part-*.parquet")) / 2**20


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    stream = [r for r in runs if r["engine"] == "stream"]
    rows = np.array([r["rows"] for r in stream], dtype=float)
    secs = np.array([r["seconds"]["total"] for r in stream])
    lines = [
        "# Streamed audits at scale (issue 21)",
        "",
        f"Command: `nice -n 10 .venv/bin/python benchmarks/scale.py --sizes "
        f"{' '.join(map(str, args.sizes))} --pandas {' '.join(map(str, args.pandas))} "
        f"--batch-rows {args.batch_rows}`",
        f"Machine: {os.cpu_count()} cores shared with other sessions, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}; "
        "load average (1 min) before/after each run in the table.",
        "Data: 3 protected attributes (race 5 groups, sex 2, age 3), label, probability score; "
        f"Parquet files of {ROWS_PER_FILE:,} rows. Work: group parity + group metrics (binned "
        "AUC, 4096 bins) + proportion permutation tests (positive rate, TPR, FPR; 1999 "
        "permutations, 42 tests) + intersectional (2000 bootstrap, 4000 posterior draws), "
        "threshold 0.5. Each run is its own process; peak RSS is its ru_maxrss. The files "
        f"({_size_mb(args.data):.0f} MB on disk in all) were written before the runs and read "
        "through the OS page cache (warm).",
        "",
        "| engine | rows | stream/read s | methods s | total s | peak RSS MB | load before/after |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        s = r["seconds"]
        first = s.get("stream", s.get("read", 0.0) + s.get("dataset", 0.0))
        methods = sum(
            s[k] for k in ("group_parity", "group_metrics", "permutation_tests", "intersectional")
        )
        lines.append(
            f"| {r['engine']} | {r['rows']:,} | {first:.1f} | {methods:.1f} | {s['total']:.1f} "
            f"| {r['peak_rss_mb']:.0f} | {r['load_before']:.2f} / {r['load_after']:.2f} |"
        )
    lines.append("")
    for r in runs:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in r["seconds"].items())
        lines.append(f"- {r['engine']} {r['rows']:,} rows, seconds: {parts}")
    if len(stream) >= 2:
        slope, intercept = np.polyfit(rows, secs, 1)
        lines += [
            "",
            f"Linear fit of the stream's total time: {intercept:.2f} s + {slope * 1e6:.3f} s per "
            f"million rows (→ {intercept + slope * 1e8:.0f} s at 100M).",
        ]
    for p in (r for r in runs if r["engine"] == "pandas"):
        match = next((s for s in stream if s["rows"] == p["rows"]), None)
        if match is not None:
            n, worst = largest_difference(p["findings"], match["findings"])
            lines.append(
                f"Findings at {p['rows']:,} rows: {n} findings in both engines, largest "
                f"difference in estimate/interval/p-value {worst:.2g}; pandas/stream time "
                f"{p['seconds']['total'] / match['seconds']['total']:.1f}x, peak RSS "
                f"{p['peak_rss_mb'] / match['peak_rss_mb']:.1f}x."
            )
    return "\n".join(lines) + "\n"


def memory_report(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return ""
    lines = [
        "",
        "## Memory of the stream alone",
        "",
        "Peak RSS of a process that imports fairengine.streaming and streams the files (no "
        "methods): after the imports, and at the end. The Parquet files hold row groups of "
        "1,048,576 rows, so a larger batch_rows reads at most a row group at a time.",
        "",
        "| rows | batch_rows | batches | stream s | RSS after imports MB | peak RSS MB | "
        "stream's share MB |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['rows']:,} | {r['batch_rows']:,} | {r['batches']:,} | "
            f"{r['seconds']['stream']:.1f} | {r['imports_rss_mb']:.0f} | {r['peak_rss_mb']:.0f} | "
            f"{r['peak_rss_mb'] - r['imports_rss_mb']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100], help="millions")
    parser.add_argument("--pandas", type=int, nargs="*", default=[10], help="millions")
    parser.add_argument("--data", default="/tmp/fairengine-scale")
    parser.add_argument("--batch-rows", type=int, default=1 << 20)
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--memory",
        type=int,
        nargs="*",
        default=[1 << 16, 1 << 18, 1 << 20],
        help="batch sizes of the stream-only memory runs (at the smallest and largest size)",
    )
    parser.add_argument("--child", choices=["stream", "pandas", "memory"], help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    folder = Path(args.data)
    t0 = time.perf_counter()
    paths = write_data(folder, max(args.sizes + args.pandas) * 1_000_000 // ROWS_PER_FILE)
    print(f"data ready in {time.perf_counter() - t0:.0f} s", flush=True)
    runs = []
    for size in sorted(set(args.sizes) | set(args.pandas)):
        files = paths[: size * 1_000_000 // ROWS_PER_FILE]
        engines = (["stream"] if size in args.sizes else []) + (
            ["pandas"] if size in args.pandas else []
        )
        for engine in engines:
            r = measure(engine, files, args.batch_rows)
            print(engine, size, json.dumps(r["seconds"]), f"{r['peak_rss_mb']:.0f} MB", flush=True)
            runs.append(r)
    memory = []
    for size in sorted({min(args.sizes), max(args.sizes)}):
        files = paths[: size * 1_000_000 // ROWS_PER_FILE]
        for batch_rows in args.memory:
            r = measure("memory", files, batch_rows)
            r["batch_rows"] = batch_rows
            print("memory", size, batch_rows, f"{r['peak_rss_mb']:.0f} MB", flush=True)
            memory.append(r)
    text = report(runs, args) + memory_report(memory)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
