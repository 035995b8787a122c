"""A whole streamed audit through the CLI (issue 21): ``fairengine audit`` on Parquet folders of
10M and 20M rows (files of 2M rows written by ``benchmarks/scale.py``: race, sex, age band,
label, score), group parity + group metrics + proportion permutation tests + intersectional,
MLflow off, in a fresh process each; wall time and peak RSS of the audit process (and of its
children: Prefect's embedded server is one).

Usage::

    .venv/bin/python benchmarks/stream_audit.py --data /tmp/fairengine-scale --sizes 10 20

Writes ``benchmarks/results/stream_audit.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
FILE_ROWS = 2_000_000


def run(files: list[Path], home: Path) -> dict[str, float | str]:
    folder = home / f"data-{len(files)}"
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:  # a folder of links: the source is a folder, as a user's export would be
        link = folder / f.name
        if not link.exists():
            link.symlink_to(f)
    config = {
        "name": f"stream-{len(files) * 2}M",
        "data": {"path": str(folder), "engine": "stream"},
        "columns": {"label": "y", "protected": ["race", "sex", "age"], "score": "score"},
        "methods": {
            "group_parity": {"enabled": True},
            "group_metrics": {"enabled": True},
            "permutation_tests": {"enabled": True},
            "intersectional": {"enabled": True},
            "fliptest": {"enabled": False},
            "individual_fairness": {"enabled": False},
            "mitigation": {"enabled": False},
        },
        "mlflow": {"enabled": False},
        "output": {"dir": str(home / "reports")},
    }
    path = home / f"audit-{len(files)}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "FAIRENGINE_HOME": str(home / "fe"),
        "PREFECT_HOME": str(home / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "true",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "GX_ANALYTICS_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "audit", "--config", str(path), "--quiet"],
        cwd=REPO, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode not in (0, 1):  # 1: a failing verdict
        raise SystemExit(f"audit failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return {
        "rows": len(files) * FILE_ROWS,
        "wall": wall,
        "peak_mb": max(peak, before) / 1024,
        "verdict": proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else "",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/tmp/fairengine-scale")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 20], help="millions of rows")
    ap.add_argument("--out", type=Path, default=RESULTS / "stream_audit.md")
    args = ap.parse_args()
    files = sorted(Path(args.data).glob("part-*.parquet"))
    home = Path(tempfile.mkdtemp(prefix="fairengine-stream-audit-"))
    rows = []
    for size in args.sizes:
        k = size * 1_000_000 // FILE_ROWS
        if k > len(files):
            raise SystemExit(f"{args.data} has {len(files)} files; write more with scale.py")
        r = run(files[:k], home)
        print(r, flush=True)
        rows.append(r)
    load = os.getloadavg()[0]
    lines = [
        "# A streamed audit through the CLI (issue 21)",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- machine: {platform.system().lower()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; 1-min load average {load:.1f} at the end",
        "- command: `.venv/bin/python benchmarks/stream_audit.py "
        f"--sizes {' '.join(map(str, args.sizes))}`",
        "- audit: `fairengine audit --quiet`, `data.engine: stream` over a folder of 2M-row "
        "Parquet files (race, sex, age band, label, score; `benchmarks/scale.py`), group parity, "
        "group metrics, proportion permutation tests and intersectional at their defaults, "
        "MLflow off; a fresh process (Prefect's embedded server included) per size. Peak RSS: "
        "the largest resident set of the audit's processes (getrusage of the children).",
        "",
        "| rows | wall s | peak RSS MB | first line of the output |",
        "|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {int(r['rows']):,} | {float(r['wall']):.1f} | {float(r['peak_mb']):.0f} | "
            f"{r['verdict']} |"
        )
    args.out.write_text("\n".join(lines) + "\n")
    print(args.out.read_text())


if __name__ == "__main__":
    main()
