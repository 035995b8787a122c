"""Object-store reads and the streamed audit's cache (issue 21, docs/large_data.md).

1. The pass alone (``stream_counts``) over the same Parquet files on local disk and in an S3
   bucket served by moto's S3 server on 127.0.0.1 (s3fs through ``storage_options``): the
   fsspec/s3fs overhead of reading objects over HTTP, not a real network's latency.
2. A whole streamed audit (``fairengine.audit``, engine stream, group parity + group metrics +
   proportion permutation tests + intersectional, MLflow off) of the local folder with the
   cache on: cold (empty cache), then a re-run on the unchanged files (the pass, the method
   steps and the sample's validation reused), then after touching one file (the pass runs
   again; the methods are reused, the count tables being the same).

Usage::

    .venv/bin/python benchmarks/object_store_cache.py --rows 2000000 --files 10

Writes ``benchmarks/results/object_store_cache.md``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import socket
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
METHODS = ["group_parity", "group_metrics", "permutation_tests", "intersectional"]


def make_files(rows: int, files: int, folder: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    race = rng.choice(["a", "b", "c", "d"], rows, p=[0.5, 0.3, 0.15, 0.05])
    x = rng.normal(size=rows)
    y = (rng.random(rows) < 1 / (1 + np.exp(-(x + 0.4 * (race == "a"))))).astype(np.int8)
    df = pd.DataFrame(
        {
            "race": race,
            "sex": rng.choice(["f", "m"], rows),
            "y": y,
            "score": 1 / (1 + np.exp(-(0.9 * x + 0.5 * (race == "a")))),
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    for i, idx in enumerate(np.array_split(np.arange(rows), files)):
        df.iloc[idx].to_parquet(folder / f"part-{i:03d}.parquet", index=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--out", type=Path, default=RESULTS / "object_store_cache.md")
    args = ap.parse_args()

    import boto3
    import s3fs
    from moto.server import ThreadedMotoServer

    import fairengine
    from fairengine.roles import ColumnRoles
    from fairengine.streaming import stream_counts

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    tmp = Path(tempfile.mkdtemp(prefix="fairengine-objstore-bench-"))
    folder = tmp / "parts"
    make_files(args.rows, args.files, folder)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    lines: list[str] = []
    try:
        options = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "bench", "secret": "bench"}
        boto3.client(
            "s3",
            endpoint_url=options["endpoint_url"],
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        ).create_bucket(Bucket="bench")
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        for path in sorted(folder.glob("*.parquet")):
            fs.put_file(str(path), f"bench/parts/{path.name}")
        roles = ColumnRoles(label="y", protected=("race", "sex"), score="score")
        kw = {"threshold": 0.5, "sample_rows": 100_000}
        passes = {}
        for name, source, extra in (
            ("local folder", str(folder), {}),
            (
                "s3:// (moto on 127.0.0.1)",
                "s3://bench/parts/*.parquet",
                {"storage_options": options},
            ),
        ):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                counts = stream_counts(source, roles, **kw, **extra)
                best = min(best, time.perf_counter() - start)
            passes[name] = (best, counts.n_rows)
        settings = {
            "label": "y",
            "protected": ["race", "sex"],
            "score": "score",
            "methods": METHODS,
            "engine": "stream",
            "cache": {"dir": str(tmp / "cache")},
            "output": {"dir": str(tmp / "reports")},
        }
        audits = {}
        for name in ("cold (empty cache)", "re-run, unchanged files"):
            start = time.perf_counter()
            result = fairengine.audit(str(folder), **settings)
            audits[name] = (time.perf_counter() - start, result)
        part = folder / "part-000.parquet"
        st = part.stat()
        os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        start = time.perf_counter()
        result = fairengine.audit(str(folder), **settings)
        audits["re-run, one file touched"] = (time.perf_counter() - start, result)
    finally:
        server.stop()

    load = os.getloadavg()[0]
    lines += [
        "# Object-store reads and the streamed audit's cache",
        "",
        f"`benchmarks/object_store_cache.py --rows {args.rows} --files {args.files}`, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; 1-min load average {load:.1f} at the end (other jobs "
        "ran on the machine: upper bounds).",
        "",
        "## The pass alone (`stream_counts`, best of 3)",
        "",
        "| source | rows | seconds |",
        "|---|---:|---:|",
        *[f"| {k} | {n:,} | {t:.2f} |" for k, (t, n) in passes.items()],
        "",
        "## A whole streamed audit with the cache on (`fairengine.audit`, engine stream)",
        "",
        "| run | seconds | reused from the cache |",
        "|---|---:|---|",
    ]
    for name, (seconds, res) in audits.items():
        reused = sorted(
            k.removesuffix(" (cached)") for k in res.metadata.timings if "(cached)" in k
        )
        lines.append(f"| {name} | {seconds:.1f} | {', '.join(reused) or '—'} |")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
