"""The stream, Dask and Spark engines against the pandas audit (issue 21): 2,000,000 rows, three
protected attributes, label and score, written as 37 Parquet files.

Two comparisons per engine:

1. **Methods on the count tables** — group parity, group metrics (AUC gap tests on), the
   proportion permutation tests and the intersectional audit, each run from the engine's
   :class:`~fairengine.streaming.StreamedCounts` and on the in-memory dataset with the same seed;
   every number of every result (estimates, p-values, intervals, tables) compared to 1e-12.
2. **Whole audits** — ``fairengine.audit`` with ``engine=`` stream, dask (a LocalCluster of two
   worker processes), spark (``local[2]``) and pandas, the permutation tests on the count-based
   metrics: every finding's estimate and p-value to 1e-12 and every decision and the verdict
   equal (the AUC excepted: a streamed audit's AUC is the 4,096-bin one).

Writes ``benchmarks/results/engines_exactness.md``. Run:
``PYTHONPATH=. python benchmarks/engines_exactness.py [--rows N]``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

N_FILES = 37
SEED = 11
PERMUTATION_METRICS = ["positive_rate", "tpr", "fpr", "fnr", "precision"]


def synthetic(n: int, seed: int = 7) -> pd.DataFrame:
    """Unequal groups and rates; a score that depends on the group and the label."""
    rng = np.random.default_rng(seed)
    race = rng.choice(np.array(["white", "black", "asian", "hispanic", "other"]), n,
                      p=[0.55, 0.2, 0.12, 0.1, 0.03])  # fmt: skip
    sex = rng.choice(np.array(["f", "m"]), n)
    age = rng.choice(np.array(["<25", "25-60", ">60"]), n, p=[0.2, 0.6, 0.2])
    shift = (race == "black") * 0.3 + (sex == "f") * 0.2 + (age == ">60") * 0.1
    y = (rng.random(n) < 0.3 + 0.2 * (race == "white")).astype(np.int64)
    score = 1 / (1 + np.exp(-(-0.5 + 1.5 * y - shift + rng.normal(0, 1, n))))
    return pd.DataFrame({"race": race, "sex": sex, "age": age, "y": y, "score": score})


def max_diff(a: Any, b: Any, path: str = "") -> tuple[float, int, list[str]]:
    """(largest |a - b| over the numbers, numbers compared, mismatches that are not numbers)."""
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return math.inf, 0, [f"{path}: keys differ"]
        out = (0.0, 0, [])
        for k in a:
            d, n, bad = max_diff(a[k], b[k], f"{path}.{k}")
            out = (max(out[0], d), out[1] + n, out[2] + bad)
        return out
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return math.inf, 0, [f"{path}: lengths differ"]
        out = (0.0, 0, [])
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d, n, bad = max_diff(x, y, f"{path}[{i}]")
            out = (max(out[0], d), out[1] + n, out[2] + bad)
        return out
    if isinstance(a, float) and isinstance(b, float | int):
        if math.isnan(a) or math.isnan(b):
            return (0.0, 1, []) if math.isnan(a) and math.isnan(b) else (math.inf, 1, [path])
        if math.isinf(a) or math.isinf(b):
            return (0.0, 1, []) if a == b else (math.inf, 1, [path])
        return abs(a - b) / max(1.0, abs(a)), 1, []
    return (0.0, 0, []) if a == b else (0.0, 0, [f"{path}: {a!r} != {b!r}"])


def method_results(ds_or_counts: Any, from_counts: bool) -> dict[str, Any]:
    from fairengine.group_metrics.config import GroupMetricsConfig
    from fairengine.group_metrics.method import run_group_metrics, run_group_metrics_from_counts
    from fairengine.group_parity.method import group_parity, group_parity_from_counts
    from fairengine.intersectional.config import IntersectionalConfig
    from fairengine.intersectional.method import (
        run_intersectional,
        run_intersectional_from_counts,
    )
    from fairengine.permutation.config import PermutationConfig
    from fairengine.permutation.method import (
        run_permutation_tests,
        run_permutation_tests_from_counts,
    )

    gm = GroupMetricsConfig(auc_gap_tests=True)
    pc = PermutationConfig(metrics=PERMUTATION_METRICS, n_permutations=499)
    ic = IntersectionalConfig(n_bootstrap=300, n_posterior=300)
    x = ds_or_counts
    if from_counts:
        res = [
            group_parity_from_counts(x),
            run_group_metrics_from_counts(x, gm),
            run_permutation_tests_from_counts(x, pc, seed=SEED),
            run_intersectional_from_counts(x, ic, seed=SEED),
        ]
    else:
        res = [
            group_parity(x),
            run_group_metrics(x, gm),
            run_permutation_tests(x, pc, seed=SEED),
            run_intersectional(x, ic, seed=SEED),
        ]
    out = {}
    for r in res:
        d = r.to_dict()
        d.pop("seconds", None)
        d.pop("warnings", None)
        out[r.method] = d
    return out


def compare_audits(a: Any, b: Any) -> tuple[int, float, list[str], bool]:
    """Findings compared, the largest estimate/p-value difference, decision mismatches, same
    verdict."""
    fa = {f.key: f for f in a.findings()}
    fb = {f.key: f for f in b.findings()}
    bad = [] if set(fa) == set(fb) else ["finding keys differ"]
    worst = 0.0
    keys = [k for k in fa if "auc" not in k and k in fb]
    for k in keys:
        for x, y in ((fa[k].estimate, fb[k].estimate), (fa[k].pvalue, fb[k].pvalue)):
            if x is None or y is None:
                if (x is None) != (y is None):
                    bad.append(k)
            elif not (math.isnan(x) and math.isnan(y)):
                worst = max(worst, abs(x - y))
        if fa[k].decision != fb[k].decision:
            bad.append(f"{k}: decision")
    return len(keys), worst, bad, a.verdict.status == b.verdict.status


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--out", default="benchmarks/results/engines_exactness.md")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import distributed
    from pyspark.sql import SparkSession

    import fairengine
    from fairengine.dataset import AuditDataset
    from fairengine.roles import ColumnRoles
    from fairengine.streaming import stream_counts
    from fairengine.streaming.dask_engine import dask_counts
    from fairengine.streaming.spark_engine import spark_counts

    roles = ColumnRoles(label="y", protected=("race", "sex", "age"), score="score")
    tmp = Path(tempfile.mkdtemp(prefix="engines-"))
    df = synthetic(args.rows)
    folder = tmp / "parts"
    folder.mkdir()
    for i, (lo, hi) in enumerate(
        itertools.pairwise(np.linspace(0, args.rows, N_FILES + 1).astype(int))
    ):
        pq.write_table(
            pa.Table.from_pandas(df.iloc[lo:hi], preserve_index=False),
            folder / f"part-{i:05d}.parquet",
        )
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(tmp / "spark"))
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    lines = []
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        ds = AuditDataset.from_frame(df, roles, threshold=0.5)
        pandas_methods = method_results(ds, from_counts=False)
        passes = {
            "stream": lambda: stream_counts(str(folder), roles, threshold=0.5,
                                            batch_rows=100_000),
            "dask": lambda: dask_counts(str(folder), roles, client=client, threshold=0.5,
                                        batch_rows=100_000),
            "spark": lambda: spark_counts(str(folder), roles, session=spark, threshold=0.5),
        }  # fmt: skip
        lines += [
            "## Methods on the count tables (vs the same methods on the in-memory dataset)",
            "",
            "| engine | pass (s) | numbers compared | largest difference | other mismatches |",
            "|---|---:|---:|---:|---|",
        ]
        for name, run in passes.items():
            t = time.perf_counter()
            counts = run()
            seconds = time.perf_counter() - t
            d, n, bad = max_diff(pandas_methods, method_results(counts, from_counts=True))
            shown = "; ".join(b[:120] for b in bad[:2]) + (
                f" (+{len(bad) - 2})" if len(bad) > 2 else ""
            )
            lines.append(f"| {name} | {seconds:.1f} | {n:,} | {d:.1e} | {shown or 'none'} |")
            print(lines[-1], flush=True)
        settings = {
            "label": "y",
            "protected": ["race", "sex", "age"],
            "score": "score",
            # the count-based permutation metrics: the AUC tests need rows (a streamed audit runs
            # them on its sample, so they are not comparable; on 2M rows in memory they dominate)
            "methods": {
                "group_parity": {},
                "group_metrics": {},
                "permutation_tests": {"metrics": PERMUTATION_METRICS},
                "intersectional": {},
            },
            "cache": {"enabled": False},
            "output": {"dir": str(tmp / "reports")},
            "seed": SEED,
        }
        t = time.perf_counter()
        in_memory = fairengine.audit(df, **settings)
        base = time.perf_counter() - t
        lines += [
            "",
            "## Whole audits (`fairengine.audit`, vs the pandas audit)",
            "",
            f"pandas audit: {base:.1f} s, verdict {in_memory.verdict.status.upper()}.",
            "",
            "| engine | audit (s) | findings compared | largest difference "
            "| mismatches | same verdict |",
            "|---|---:|---:|---:|---|---|",
        ]
        extra = {
            "stream": {"engine": "stream"},
            "dask": {"engine": "dask", "dask_address": cluster.scheduler_address},
            "spark": {"engine": "spark"},
        }
        for name, kw in extra.items():
            t = time.perf_counter()
            res = fairengine.audit(str(folder), **kw, **settings)
            seconds = time.perf_counter() - t
            n, worst, bad, same = compare_audits(res, in_memory)
            lines.append(
                f"| {name} | {seconds:.1f} | {n} | {worst:.1e} | {bad[:3] or 'none'} | "
                f"{'yes' if same else 'NO'} |"
            )
            print(lines[-1], flush=True)
    spark.stop()
    load = os.getloadavg()
    head = [
        "# Engines: stream, Dask and Spark vs the pandas audit",
        "",
        f"`PYTHONPATH=. python benchmarks/engines_exactness.py --rows {args.rows}`: "
        f"{args.rows:,} rows (race 5 groups, sex 2, age 3; label; score) in {N_FILES} Parquet "
        "files; thresholded predictions (0.5); Dask: LocalCluster of 2 worker processes; "
        "Spark: local[2]; seed 11. The AUC is excepted from the audit comparison (a streamed "
        "audit's AUC is the 4,096-bin one; the methods comparison runs both on the same data "
        "and compares it too). Differences are absolute (relative above 1).",
        f"Machine: {os.cpu_count()} cores; load average at the end {load[0]:.1f}, "
        f"{load[1]:.1f}, {load[2]:.1f} (other jobs ran at the same time: times are upper "
        "bounds).",
        "",
    ]
    Path(args.out).write_text("\n".join(head + lines) + "\n")
    print(Path(args.out).read_text())


if __name__ == "__main__":
    main()
