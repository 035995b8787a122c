"""The mitigation step on Adult at its defaults, LPs through highspy (now) against one
``scipy.optimize.linprog`` call per LP (before), interleaved in one process.

Set-up as ``full_audit_adult.py`` (:func:`full_audit_adult.adult_dataset`: 45,222 rows, the
logistic regression, ``sex`` and ``race`` protected): ``run_mitigation(ds,
MitigationConfig(enabled=True), seed=0)``, every variant, the overall variant deployed, the
fairlearn comparison on. The numeric libraries are single-threaded as in the flow. Each
repetition runs "before" (``tests/linprog_reference.py``'s :func:`use_linprog`, the code this
replaced) and "after" back to back, in alternating order; CPU seconds are
``time.process_time()`` (all threads of the process), wall seconds ``time.perf_counter()``.
Every number of the two results must be equal (the run fails otherwise).

Second setting (``--paper``, on by default): ``benchmarks/mitigation_adult.py``'s 30
intersections (sex × age bin × race, gradient-boosted model, ε = 0.5, 50 robust draws,
``exclude_sparse`` below 100 rows), once each way.

Usage::

    .venv/bin/python benchmarks/mitigation_lp_speed.py [--repeats 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from full_audit_adult import ADULT, adult_dataset  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--adult", type=Path, default=ADULT)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "mitigation_lp_speed.md")
    ap.add_argument("--no-paper", dest="paper", action="store_false")
    args = ap.parse_args()

    import highspy
    import scipy
    from linprog_reference import use_linprog
    from test_mitigation_lp_highs import _differences

    from fairengine.library_threads import single_threaded
    from fairengine.mitigation import MitigationConfig, run_mitigation

    ds, *_ = adult_dataset(args.adult)
    cfg = MitigationConfig(enabled=True)
    times: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    results = {}
    load = [os.getloadavg()[0]]

    def once(which: str) -> None:
        t, c = time.perf_counter(), time.process_time()
        if which == "before":
            with use_linprog():
                res = run_mitigation(ds, cfg, seed=0)
        else:
            res = run_mitigation(ds, cfg, seed=0)
        times[which].append((time.process_time() - c, time.perf_counter() - t))
        results[which] = res

    with single_threaded():
        once("after")  # warm-up: imports (fairlearn, highspy), first HiGHS instance
        once("before")
        times["before"].clear()
        times["after"].clear()
        for i in range(args.repeats):
            for which in ("before", "after") if i % 2 == 0 else ("after", "before"):
                once(which)
            load.append(os.getloadavg()[0])
    diff = _differences(results["after"], results["before"])
    if diff:
        raise SystemExit(f"the results differ: {diff[:10]}")
    after = results["after"]
    variants = {v.variant: v for v in after.details.variants}

    def med(which: str, j: int) -> float:
        return statistics.median(t[j] for t in times[which])

    lines = [
        "# Mitigation step on Adult: LPs through highspy vs scipy linprog",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, scipy {scipy.__version__} "
        f"(its HiGHS {scipy.optimize._highspy._core.HIGHS_VERSION_MAJOR}."
        f"{scipy.optimize._highspy._core.HIGHS_VERSION_MINOR}), highspy "
        f"{highspy.HIGHS_VERSION_MAJOR}.{highspy.HIGHS_VERSION_MINOR}."
        f"{highspy.HIGHS_VERSION_PATCH}; numeric libraries single-threaded; 1-minute load "
        f"average {min(load):.1f}-{max(load):.1f} during the runs (other jobs share the cores).",
        "",
        f"`run_mitigation(ds, MitigationConfig(enabled=True), seed=0)` on all {ds.n_rows:,} rows "
        f"(sex × race, every variant, overall deployed, fairlearn comparison on): "
        f"{args.repeats} interleaved repetitions after one warm-up each; medians, and every "
        f"repetition. Command: `nice -n 5 .venv/bin/python benchmarks/mitigation_lp_speed.py "
        f"--repeats {args.repeats}`.",
        "",
        "| LP path | CPU s (median) | wall s (median) | CPU s, each repetition |",
        "|---|---:|---:|---|",
    ]
    for which, label in (
        ("before", "before: `scipy.optimize.linprog(method='highs')` per LP"),
        ("after", "after: highspy, warm re-solves in the overall search"),
    ):
        each = ", ".join(f"{t[0]:.2f}" for t in times[which])
        lines.append(f"| {label} | {med(which, 0):.2f} | {med(which, 1):.2f} | {each} |")
    ov = variants["overall"]
    lines += [
        "",
        f"CPU ratio before/after: **{med('before', 0) / med('after', 0):.1f}x**. The overall "
        f"variant solved {ov.n_lp_solves:,} LPs in the deployed fit (plus the two fits of the "
        f"fairlearn comparison on one attribute); its fit took {ov.seconds:.2f} s wall in the "
        f"last 'after' run. Every number of the two results is equal (findings, thresholds, "
        f"p, q, held-out estimates, comparison), checked by the benchmark.",
        "",
    ]
    if args.paper:
        lines += paper_setting(_differences, use_linprog, single_threaded)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


def paper_setting(differences, use_linprog, single_threaded) -> list[str]:
    """The 30-intersection setting of ``mitigation_adult.py``, before and after, once each."""
    from mitigation_adult import AGE_BINS, audit_frame

    from fairengine.dataset import AuditDataset
    from fairengine.mitigation import MitigationConfig, run_mitigation
    from fairengine.roles import ColumnRoles

    frame, _ = audit_frame()
    roles = ColumnRoles(label="income_gt_50k", protected=("sex", "race"), score="score")
    data = AuditDataset.from_frame(frame, roles, score_type="probability", threshold=0.5)
    cfg = MitigationConfig(
        enabled=True,
        attributes=["sex", "age", "race"],
        bins={"age": AGE_BINS},
        constraints=["eo"],
        epsilon=0.5,
        min_support=100,
        exclude_sparse=True,
        robust_draws=50,
        compare_fairlearn=False,
    )
    rows, results = [], {}
    with single_threaded():
        for which in ("after", "before"):
            t, c = time.perf_counter(), time.process_time()
            if which == "before":
                with use_linprog():
                    res = run_mitigation(data, cfg, seed=0)
            else:
                res = run_mitigation(data, cfg, seed=0)
            cpu, wall = time.process_time() - c, time.perf_counter() - t
            ov = next(v for v in res.details.variants if v.variant == "overall")
            rows.append(
                f"| {which} | {cpu:.2f} | {wall:.2f} | {ov.seconds:.2f} | {ov.n_lp_solves:,} |"
            )
            results[which] = res
    diff = differences(results["after"], results["before"])
    if diff:
        raise SystemExit(f"the results differ (30 intersections): {diff[:10]}")
    return [
        "## 30 intersections (mitigation_adult.py's setting)",
        "",
        f"sex × age (≤25, 26–45, >45) × race (5 categories) on the {data.n_rows:,}-row audit "
        "half, gradient-boosted model, eo at ε = 0.5, 50 robust draws, intersections under "
        "100 rows unconstrained, no fairlearn comparison; once each way, load as above; every "
        "number of the two results equal.",
        "",
        "| LP path | CPU s | wall s | overall fit, wall s | overall LPs |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
    ]


if __name__ == "__main__":
    main()
