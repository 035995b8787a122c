"""Render time of a real audit's report: COMPAS, race x sex (issue "A report that stays readable
on real audits": under 2 s).

The audit is ``tests/test_report_real_audits_browser.py``'s COMPAS audit (group parity, the LiFT
suite, permutation tests and intersectional differential fairness on the ProPublica data,
``decile_score / 10`` as the score, threshold 0.45), run once through the real flow
(``flows.audit.run_audit``, embedded Prefect, MLflow off). Then :func:`tasks.report.render_report`
is timed ``--repeats`` times in the same process (wall and CPU), against a same-run baseline:
:meth:`AuditResult.to_json` of the same result. Writes
``benchmarks/results/report_render_compas.md``.

Run: ``.venv/bin/python benchmarks/report_render_compas.py [--repeats 7]`` (needs ``../shared``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
for _key, _value in {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "GX_ANALYTICS_ENABLED": "false",
}.items():
    os.environ.setdefault(_key, _value)

TARGET_SECONDS = 2.0
OUT = REPO / "benchmarks" / "results" / "report_render_compas.md"


def timed(fn, repeats: int) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="render-compas-"))
    os.environ["PREFECT_HOME"] = str(home / "prefect")
    os.environ["FAIRENGINE_HOME"] = str(home / "fairengine")
    from test_report_real_audits_browser import compas_config

    from flows.audit import run_audit
    from tasks.report import render_report

    t0 = time.perf_counter()
    run = run_audit(compas_config(home, REPO.parent / "shared"))
    audit_s = time.perf_counter() - t0
    result = run.result
    html = render_report(result)  # first render: template compile, first figure
    wall, cpu = timed(lambda: render_report(result), args.repeats)
    jwall, jcpu = timed(result.to_json, args.repeats)
    load = os.getloadavg()
    n_tests = sum(1 for f in result.findings() if f.counts)
    lines = [
        "# Report render time of a real audit: COMPAS, race x sex",
        "",
        f"- Date: {datetime.now(UTC).isoformat(timespec='seconds')}; 2 cores; load average "
        f"at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (shared machine: CPU times "
        "are the stable numbers)",
        f"- Command: `.venv/bin/python benchmarks/report_render_compas.py --repeats "
        f"{args.repeats}`",
        f"- Audit: {n_tests} deciding tests, {len(result.findings())} findings, "
        f"{len(result.methods)} method sections, run through the flow in {audit_s:.1f} s; "
        f"report {len(html.encode()) / 1e6:.2f} MB, {html.count('<svg')} inline SVGs",
        "",
        "| measurement | wall median (s) | wall best (s) | CPU median (s) |",
        "|---|---|---|---|",
        f"| render_report ({args.repeats}x) | {statistics.median(wall):.3f} | {min(wall):.3f} | "
        f"{statistics.median(cpu):.3f} |",
        f"| baseline: AuditResult.to_json() | {statistics.median(jwall):.4f} | "
        f"{min(jwall):.4f} | {statistics.median(jcpu):.4f} |",
        "",
        f"Target < {TARGET_SECONDS:g} s (CPU median): "
        f"**{'met' if statistics.median(cpu) < TARGET_SECONDS else 'not met'}**.",
    ]
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
