"""Render time and size of a full every-method HTML report (issue 9: < 2 s, < 2 MB).

The audit: :func:`report_full_audit.build_full_audit` (``tests/report_full_audit.py``) at the
``full`` scale: the demo's hiring data (5,000 rows per gender) with a second protected attribute
(a three-level age band), every audit method run by its pure function with the demo's or the
default resampling counts, plus a failed and a not-run method, Great Expectations validation and
run metadata. Building it takes minutes (FlipTest's map refits dominate); ``--audit-json`` reuses
a saved one and ``--write-json`` saves it.

Measured on that result, in one process:

* the first render after import (compiles the template, first matplotlib figure and font
  set-up) and, in a fresh interpreter, the import of :mod:`tasks.report` plus the first render;
* ``--repeats`` further renders: median and best wall-clock and CPU (process) time;
* baselines in the same run: the JSON serialisation of the same result
  (:meth:`AuditResult.to_json`) and the same render with the plot functions replaced by a fixed
  tiny SVG (the template and formatting alone), so the plots' share is explicit;
* optionally (``--compare-plots FILE``) the same render with the figure functions of another
  version of ``tasks/report/plots.py``, e.g. the one before this benchmark's optimisation:
  ``git show 3f4fb0f:tasks/report/plots.py > /tmp/report_plots_before.py``;
* the HTML size, the SVG share of it and the number of figures.

Run: ``.venv/bin/python benchmarks/report_render.py`` (writes
``benchmarks/results/report_render.md``). The machine is shared, so the load average is
recorded and the ratios against the same-run baselines are the numbers to compare.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("MPLBACKEND", "Agg")
for _key, _value in {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "GX_ANALYTICS_ENABLED": "false",
}.items():
    os.environ.setdefault(_key, _value)

import matplotlib  # noqa: E402

import tasks.report as report  # noqa: E402
import tasks.report.plots as report_plots  # noqa: E402
from fairengine.audit_file import load_audit  # noqa: E402
from fairengine.results import AuditResult  # noqa: E402
from tasks.report.methods import BUILT_IN_VIEWS as VIEW_MODULES  # noqa: E402

TARGET_SECONDS = 2.0
TARGET_BYTES = 2_000_000
PLOT_FUNCTIONS = (
    "group_rates_svg",
    "interval_forest_svg",
    "null_histogram_svg",
    "curve_svg",
    "marginal_overlay_svg",
)
"""The figure functions the report's views call (patched in each view module for the
baselines)."""
STUB_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>'
COLD_START = """
import os, sys, time
sys.path.insert(0, {repo!r})
os.environ.setdefault("MPLBACKEND", "Agg")
t0 = time.perf_counter()
from tasks.report import render_report
from fairengine.audit_file import load_audit
t1 = time.perf_counter()
result = load_audit({path!r})
t2, c2 = time.perf_counter(), time.process_time()
render_report(result)
t3, c3 = time.perf_counter(), time.process_time()
print(t1 - t0, t3 - t2, c3 - c2)
"""


def timed(fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Median and best wall-clock and CPU seconds of ``repeats`` calls of ``fn``."""
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return {
        "wall_median": statistics.median(wall),
        "wall_best": min(wall),
        "cpu_median": statistics.median(cpu),
        "cpu_best": min(cpu),
    }


@contextmanager
def plot_functions(replacements: dict[str, Callable[..., str]]) -> Iterator[None]:
    """Temporarily replace the figure functions the report's views call."""
    saved = [
        (module, name, getattr(module, name))
        for module in VIEW_MODULES
        for name in replacements
        if hasattr(module, name)
    ]
    try:
        for module, name, _ in saved:
            setattr(module, name, replacements[name])
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


def counting(calls: dict[str, int]) -> dict[str, Callable[..., str]]:
    """Wrappers of the real figure functions that count their calls."""

    def wrap(name: str) -> Callable[..., str]:
        real = getattr(report_plots, name)

        def counted(*args: Any, **kwargs: Any) -> str:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        return counted

    return {name: wrap(name) for name in PLOT_FUNCTIONS}


def load_module(path: Path) -> Any:
    """Import a standalone copy of a module from ``path``."""
    spec = importlib.util.spec_from_file_location("report_plots_compared", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--compare-plots: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_average() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def build_or_load(args: argparse.Namespace) -> tuple[AuditResult, str, float | None]:
    """The audit result, a description of where it came from and its build time."""
    if args.audit_json:
        path = Path(args.audit_json)
        result = load_audit(path)
        name = (result.config or {}).get("name")
        return result, f"`{path}` (audit {name!r}, saved by an earlier `--write-json`)", None
    from report_full_audit import build_full_audit

    start = time.perf_counter()
    result = build_full_audit(args.scale, seed=args.seed)
    took = time.perf_counter() - start
    if args.write_json:
        Path(args.write_json).write_text(result.to_json(), encoding="utf-8")
    return result, f"built by `build_full_audit({args.scale!r}, seed={args.seed})`", took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=["small", "full"], default="full")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--audit-json", help="reuse an audit result saved with --write-json")
    parser.add_argument("--write-json", help="save the built audit result here")
    parser.add_argument("--compare-plots", help="another tasks/report/plots.py to time too")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "report_render.md"))
    args = parser.parse_args()

    result, source, build_seconds = build_or_load(args)
    json_path = Path(args.write_json or args.audit_json or "")
    if not json_path.name:
        json_path = Path(os.environ.get("TMPDIR", "/tmp")) / "report_render_audit.json"
        json_path.write_text(result.to_json(), encoding="utf-8")

    # cold start in a fresh interpreter: import of tasks.report, then the first render
    cold = subprocess.run(
        [sys.executable, "-c", COLD_START.format(repo=str(REPO), path=str(json_path))],
        capture_output=True,
        text=True,
        check=True,
    )
    cold_import, cold_render, cold_cpu = (float(x) for x in cold.stdout.split())

    # first render in this process (template compile, first figures), counting the figures
    calls: dict[str, int] = {}
    with plot_functions(counting(calls)):
        w0 = time.perf_counter()
        html = report.render_report(result)
        first = time.perf_counter() - w0

    render = timed(lambda: report.render_report(result), args.repeats)
    to_json = timed(result.to_json, max(args.repeats, 5))
    stub = {name: (lambda *a, **k: STUB_SVG) for name in PLOT_FUNCTIONS}
    with plot_functions(stub):
        no_plots = timed(lambda: report.render_report(result), args.repeats)
    compared = None
    if args.compare_plots:
        other = load_module(Path(args.compare_plots))
        with plot_functions({name: getattr(other, name) for name in PLOT_FUNCTIONS}):
            report.render_report(result)  # its own first figure
            compared = timed(lambda: report.render_report(result), max(3, args.repeats // 2))

    size = len(html.encode("utf-8"))
    svgs = re.findall(r"<svg\b.*?</svg>", html, re.S)
    svg_bytes = sum(len(s.encode("utf-8")) for s in svgs)
    json_bytes = len(result.to_json().encode("utf-8"))
    n_figures = sum(calls.values())
    plots_cpu = render["cpu_median"] - no_plots["cpu_median"]

    lines = [
        "# HTML report: render time and size of a full every-method report",
        "",
        f"- Date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, matplotlib {matplotlib.__version__}; load average at "
        f"the end {load_average()} (the 2 cores are shared with other jobs: wall-clock times "
        "are pessimistic, CPU times and same-run ratios are the stable numbers)",
        f"- Command: `.venv/bin/python benchmarks/report_render.py {' '.join(sys.argv[1:])}`",
        f"- Audit: {source}"
        + (f" in {build_seconds:.0f} s" if build_seconds is not None else "")
        + f"; {len(result.methods)} method sections ("
        + ", ".join(f"{m.method}: {m.status}" for m in result.methods)
        + f"); {sum(1 for f in result.findings() if f.tested)} tested findings; "
        f"{result.dataset.n_rows if result.dataset.n_rows is not None else '?'} audit rows",
        f"- Figures: {n_figures} inline SVGs ("
        + ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
        + ")",
        "",
        "| measurement | wall median (s) | wall best (s) | CPU median (s) |",
        "|---|---|---|---|",
        f"| render_report, repeated ({args.repeats}x) | {render['wall_median']:.3f} | "
        f"{render['wall_best']:.3f} | {render['cpu_median']:.3f} |",
        f"| render_report, first call in this process | {first:.3f} | | |",
        f"| fresh interpreter: import tasks.report (prefect, matplotlib, jinja2) | "
        f"{cold_import:.3f} | | |",
        f"| fresh interpreter: first render_report after that import | {cold_render:.3f} | | "
        f"{cold_cpu:.3f} |",
        f"| baseline: same render, plots replaced by a fixed SVG | "
        f"{no_plots['wall_median']:.3f} | {no_plots['wall_best']:.3f} | "
        f"{no_plots['cpu_median']:.3f} |",
        f"| baseline: AuditResult.to_json() of the same result | {to_json['wall_median']:.4f} | "
        f"{to_json['wall_best']:.4f} | {to_json['cpu_median']:.4f} |",
    ]
    if compared is not None:
        lines.append(
            f"| same render with `{args.compare_plots}` figure functions | "
            f"{compared['wall_median']:.3f} | {compared['wall_best']:.3f} | "
            f"{compared['cpu_median']:.3f} |"
        )
    lines += [
        "",
        "| size | bytes | |",
        "|---|---|---|",
        f"| HTML report | {size:,} | {size / json_bytes:.2f}x the JSON |",
        f"| of which inline SVG | {svg_bytes:,} | {svg_bytes / size:.0%} of the HTML, "
        f"{svg_bytes / max(len(svgs), 1) / 1024:.1f} KiB per figure |",
        f"| audit JSON (the source of truth) | {json_bytes:,} | |",
        "",
        "Ratios (same run):",
        "",
        f"- render / JSON serialisation: {render['wall_median'] / to_json['wall_median']:.0f}x "
        f"wall, {render['cpu_median'] / max(to_json['cpu_median'], 1e-9):.0f}x CPU.",
        f"- render / render without plots: {render['wall_median'] / no_plots['wall_median']:.1f}x"
        f" wall; the plots take {plots_cpu:.3f} s CPU "
        f"({plots_cpu / render['cpu_median']:.0%} of the render), "
        f"{1000 * plots_cpu / max(n_figures, 1):.1f} ms CPU per figure.",
    ]
    if compared is not None:
        lines.append(
            f"- compared figure functions / current: "
            f"{compared['wall_median'] / render['wall_median']:.1f}x wall, "
            f"{compared['cpu_median'] / render['cpu_median']:.1f}x CPU "
            f"(whole render)."
        )
    met_cpu = max(render["cpu_median"], cold_cpu) < TARGET_SECONDS
    met_wall = render["wall_median"] < TARGET_SECONDS and cold_render < TARGET_SECONDS
    lines += [
        "",
        f"- Target render < {TARGET_SECONDS:g} s, on CPU time (one core's work: the wall-clock "
        f"time on an idle core; the render is single-threaded): repeated median "
        f"{render['cpu_median']:.3f} s, first render in a fresh interpreter {cold_cpu:.3f} s: "
        f"**{'met' if met_cpu else 'missed'}**.",
        f"- Same target on wall-clock time at this run's load ({load_average()}): repeated "
        f"median {render['wall_median']:.3f} s (best {render['wall_best']:.3f} s), first "
        f"render in a fresh interpreter {cold_render:.3f} s: "
        f"**{'met' if met_wall else 'missed under this load'}**.",
        f"- Target size < {TARGET_BYTES / 1e6:g} MB: {size / 1e6:.2f} MB: "
        f"**{'met' if size < TARGET_BYTES else 'missed'}**.",
        "",
    ]
    text = "\n".join(lines)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
