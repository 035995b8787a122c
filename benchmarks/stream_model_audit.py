"""A streamed audit scored by a real MLflow model (issue 21): 10M rows in 5 Parquet files (5
numeric features, race, sex, label), a scikit-learn ``LogisticRegression`` fitted on 100,000
of them and logged with ``mlflow.sklearn.log_model``'s defaults (its pyfunc serves hard labels;
the audit settles on ``predict_proba``), registered in a SQLite MLflow store and audited with
``fairengine audit`` (``data.engine: stream``: every record batch is scored as it is read).

Measured: the audit's wall time and peak RSS, its step timings (``audit.json``), and the model's
own ``predict_proba`` on the same 10M rows in memory (the cost of the scoring itself), each as
seconds per million rows.

``--row-methods``: group parity plus the methods that need rows (FlipTest, individual
fairness, mitigation), which a streamed audit runs on the self-weighting subsample of its
stratified sample (:mod:`fairengine.streaming.self_weighting`); the table then also gives the
subsample's size and f.

Usage::

    .venv/bin/python benchmarks/stream_model_audit.py [--rows 10] [--row-methods] [--out …]

Writes ``benchmarks/results/stream_model_audit.md`` (``stream_row_methods.md`` with
``--row-methods``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
FILE_ROWS = 2_000_000
FEATURES = [f"x{i}" for i in range(1, 6)]
COUNT_METHODS = ("group_parity", "group_metrics", "permutation_tests", "intersectional")
ROW_METHODS = ("fliptest", "individual_fairness", "mitigation")


def write_data(folder: Path, rows: int, seed: int = 0) -> list[Path]:
    """``rows`` rows in files of 2M: race (4 groups), sex, five features, label."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    files = []
    for i in range(rows // FILE_ROWS):
        n = FILE_ROWS
        race = rng.choice(np.array(["White", "Black", "Asian", "Other"]), n, p=[0.6, 0.2, 0.1, 0.1])
        sex = rng.choice(np.array(["F", "M"]), n)
        x = rng.normal(size=(n, len(FEATURES))).astype(np.float32)
        x[:, 0] += 0.4 * (race == "White")
        logit = x @ np.array([1.0, -0.5, 0.3, 0.0, 0.2], dtype=np.float32) - 0.5
        y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int8)
        frame = pd.DataFrame(x, columns=FEATURES)
        frame["race"], frame["sex"], frame["y"] = race, sex, y
        path = folder / f"part-{i:03d}.parquet"
        frame.to_parquet(path, index=False, row_group_size=500_000)
        files.append(path)
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10, help="millions of rows (a multiple of 2)")
    ap.add_argument("--row-methods", action="store_true", help="group parity + the row methods")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.out is None:
        name = "stream_row_methods.md" if args.row_methods else "stream_model_audit.md"
        args.out = RESULTS / name
    chosen = ("group_parity", *ROW_METHODS) if args.row_methods else COUNT_METHODS
    rows = args.rows * 1_000_000
    home = Path(tempfile.mkdtemp(prefix="fairengine-stream-model-"))
    env = {
        **os.environ,
        "FAIRENGINE_HOME": str(home / "fe"),
        "PREFECT_HOME": str(home / "prefect"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "true",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "GX_ANALYTICS_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    os.environ.update({k: v for k, v in env.items() if k != "PATH"})
    started = time.perf_counter()
    files = write_data(home / "data", rows)
    print(f"wrote {len(files)} files in {time.perf_counter() - started:.1f} s", flush=True)

    import mlflow
    from sklearn.linear_model import LogisticRegression

    head = pd.read_parquet(files[0]).head(100_000)
    model = LogisticRegression().fit(head[FEATURES], head["y"])
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    with mlflow.start_run():
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            registered_model_name="stream-bench",
            input_example=head[FEATURES].head(3),
        )
    uri = f"models:/stream-bench/{info.registered_model_version}"

    # the scoring itself: predict_proba over the same rows, in memory, one file at a time
    t0 = time.perf_counter()
    for f in files:
        model.predict_proba(pd.read_parquet(f, columns=FEATURES))
    in_memory = time.perf_counter() - t0

    config = {
        "name": f"stream-model-{args.rows}M",
        "data": {"path": str(home / "data"), "engine": "stream"},
        "columns": {"label": "y", "protected": ["race", "sex"], "features": FEATURES},
        "model": {"uri": uri},
        "methods": {m: {"enabled": m in chosen} for m in (*COUNT_METHODS, *ROW_METHODS)},
        "output": {"dir": str(home / "reports")},
    }
    path = home / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "audit", "--config", str(path), "--quiet"],
        cwd=REPO, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if proc.returncode not in (0, 1):
        raise SystemExit(f"audit failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    (result,) = (home / "reports").glob("*/audit.json")
    audit = json.loads(result.read_text())
    timings = audit["metadata"]["timings"]
    source = audit["model"]["score_source"]["description"]
    load = os.getloadavg()[0]
    m = rows / 1e6
    lines = [
        "# A streamed audit scored by a real MLflow model (issue 21)",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- machine: {platform.system().lower()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; 1-min load average {load:.1f} at the end (other jobs "
        "shared the cores)",
        f"- command: `.venv/bin/python benchmarks/stream_model_audit.py --rows {args.rows}"
        + (" --row-methods`" if args.row_methods else "`"),
        f"- data: {rows:,} rows in {len(files)} Parquet files (5 float32 features, race, sex, "
        "label); model: `LogisticRegression` logged with `mlflow.sklearn.log_model` defaults, "
        f"registered as `{uri}`; score source: {source}",
        f"- audit: `fairengine audit --quiet`, `data.engine: stream`, {', '.join(chosen)}; "
        "MLflow logging on (SQLite store)",
        *_row_method_lines(audit),
        "",
        "| measure | seconds | seconds per million rows |",
        "|---|---:|---:|",
        f"| whole audit (fresh process, Prefect start included) | {wall:.1f} | {wall / m:.2f} |",
    ]
    for step, sec in sorted(timings.items(), key=lambda kv: -kv[1]):
        lines.append(f"| step `{step}` | {sec:.1f} | {sec / m:.2f} |")
    lines += [
        f"| `predict_proba` alone, in memory, file by file | {in_memory:.1f} | "
        f"{in_memory / m:.2f} |",
        "",
        f"Peak RSS of the audit's processes: {peak:.0f} MB. Verdict line: "
        f"{proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ''}",
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print(args.out.read_text())


def _row_method_lines(audit: dict) -> list[str]:
    """The self-weighting subsample the row methods ran on, and their status."""
    out = []
    for m in audit["methods"]:
        disabled = m["status"] == "not_run" and "disabled" in str(m["reason"])
        if m["method"] not in ROW_METHODS or disabled:
            continue
        sample = m["parameters"].get("sample") if m["status"] == "ok" else None
        if sample:
            out.append(
                f"- `{m['method']}`: {m['status']}, on a self-weighting sample of "
                f"{sample['rows']:,} of {sample['of_rows']:,} rows (f = {sample['fraction']:.4g}), "
                f"{len(m['findings'])} findings ("
                + ", ".join(
                    f"{n} {d}"
                    for d, n in sorted(Counter(f["decision"] for f in m["findings"]).items())
                )
                + ")"
            )
        else:
            out.append(f"- `{m['method']}`: {m['status']} ({m['reason']})")
    return out


if __name__ == "__main__":
    main()
