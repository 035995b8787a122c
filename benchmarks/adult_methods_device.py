"""Every audit method on Adult at its defaults, one after the other, on the machine's device
(``device: auto``: CUDA when torch sees a GPU), then the audit's sequential decisions: the
method-level part of ``full_audit_adult.py`` without Prefect or MLflow, so that it runs on a GPU
machine that has only numpy, pandas, scikit-learn, scipy, torch and POT.

Set-up as ``full_audit_adult.py`` (:func:`full_audit_adult.adult_table`): all 45,222 cleaned
rows, the 5 standardised continuous columns and the one-hot categorical ones, a scikit-learn
logistic regression fitted on the train-file rows; ``sex`` and ``race`` protected. Each method
is timed alone (methods do not overlap here, unlike the flow's thread pool) with the numeric
libraries single-threaded as in the flow, then
:func:`fairengine.verdict.finalize_audit` decides the family with the permutation resampler.
``--fliptest-devices cpu,cuda`` adds FlipTest on ``sex`` per named device, for a same-machine
comparison.

Usage::

    .venv/bin/python benchmarks/adult_methods_device.py [--adult DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from full_audit_adult import ADULT, adult_dataset  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--adult", type=Path, default=ADULT)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "adult_methods_device.md")
    ap.add_argument("--fliptest-devices", default="")
    ap.add_argument("--skip-methods", action="store_true", help="only the FlipTest comparison")
    ap.add_argument("--findings", type=Path, help="write every finding's decision here (JSON)")
    args = ap.parse_args()

    import torch

    from fairengine.decisions import Resamplers
    from fairengine.fliptest import FlipTestConfig, run_fliptest
    from fairengine.fliptest.resampler import FlipTestResampler
    from fairengine.group_metrics import GroupMetricsConfig, run_group_metrics
    from fairengine.group_parity import group_parity
    from fairengine.individual import IndividualConfig, run_individual_fairness
    from fairengine.intersectional import IntersectionalConfig, run_intersectional
    from fairengine.library_threads import single_threaded
    from fairengine.mitigation import MitigationConfig, run_mitigation
    from fairengine.permutation import PermutationConfig, run_permutation_tests
    from fairengine.permutation.method import PermutationResampler
    from fairengine.verdict import finalize_audit

    t0 = time.perf_counter()
    ds, table, features, model = adult_dataset(args.adult)
    setup = time.perf_counter() - t0

    def predict_proba(frame):  # the flow's pyfunc wrapper: P(y = 1) from the feature frame
        return model.predict_proba(frame[features])

    fliptest = FlipTestConfig(enabled=True)
    steps = [
        ("group_parity", lambda: group_parity(ds)),
        ("group_metrics", lambda: run_group_metrics(ds, GroupMetricsConfig(), seed=0)),
        ("permutation_tests", lambda: run_permutation_tests(ds, PermutationConfig(), seed=0)),
        ("intersectional", lambda: run_intersectional(ds, IntersectionalConfig(), seed=0)),
        ("fliptest", lambda: run_fliptest(ds, fliptest, seed=0, predict_proba=predict_proba)),
        (
            "individual_fairness",
            lambda: run_individual_fairness(
                ds, IndividualConfig(enabled=True), seed=0, model=model
            ),
        ),
        ("mitigation", lambda: run_mitigation(ds, MitigationConfig(enabled=True), seed=0)),
    ]
    rows, results = [], []
    for name, run in [] if args.skip_methods else steps:
        t = time.perf_counter()
        with single_threaded():  # as in the flow, whose 7 methods fill the cores
            res = run()
        sec = time.perf_counter() - t
        results.append(res)
        params = res.parameters or {}
        device = params.get("device", "")
        rows.append(f"| {name} | {sec:.2f} | {res.status} | {device} | {len(res.findings)} |")
        print(name, f"{sec:.2f}", res.status, device, flush=True)
    t = time.perf_counter()
    audit = (
        None
        if args.skip_methods
        else finalize_audit(
            config={},
            dataset={},
            model={},
            validation=None,
            methods=results,
            resampler=Resamplers(
                PermutationResampler(ds, PermutationConfig(), seed=0),
                FlipTestResampler(
                    ds,
                    fliptest,
                    next(r for r in results if r.method == "fliptest"),
                    predict_proba=predict_proba,
                    seed=0,
                ),
            ),
        )
    )
    decide = time.perf_counter() - t
    rows.append(f"| decide | {decide:.2f} | | | |")
    method_total = sum(float(r.split("|")[2]) for r in rows)
    d = None if audit is None else audit.decisions
    if args.findings and audit is not None:
        import json

        table_out = {
            f.key: {
                "estimate": f.estimate,
                "pvalue": f.pvalue,
                "adjusted_pvalue": f.adjusted_pvalue,
                "decision": f.decision,
            }
            for m in audit.methods
            for f in m.findings
        }
        args.findings.write_text(json.dumps(table_out, indent=1, default=str))
    extra = []
    for dev in [x for x in args.fliptest_devices.split(",") if x]:
        cfg = replace(fliptest, attributes=["sex"], device=dev)
        t = time.perf_counter()
        res = run_fliptest(ds, cfg, seed=0, predict_proba=predict_proba)
        sec = time.perf_counter() - t
        rates = ", ".join(f"{f.key.split('.')[0]} {f.estimate:.3f}" for f in res.findings)
        extra.append(f"| {dev} | {sec:.2f} | {rates} |")
        print("fliptest sex", dev, f"{sec:.2f}", flush=True)

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    lines = [
        "# Adult: every method at its defaults on this machine's device, then the decisions",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- command: `python benchmarks/adult_methods_device.py {' '.join(sys.argv[1:])}`",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPU cores, Python "
        f"{platform.python_version()}, torch {torch.__version__}, GPU: {gpu}; torch threads "
        f"{torch.get_num_threads()}",
        f"- data: Adult, {len(table):,} rows, {len(features)} features; set-up {setup:.1f} s "
        "(not counted)",
        "- methods run one after the other (the flow runs them concurrently on a thread pool);"
        " no Prefect, MLflow or report: see `full_audit_adult.md` for the end-to-end audit",
        "",
        "| step | seconds | status | device | findings |",
        "|---|---|---|---|---|",
        *rows,
    ]
    if d is not None:
        lines += [
            "",
            f"Sum of the steps: **{method_total:.1f} s**. Decisions: {d.n_rejected} rejected, "
            f"{d.n_not_rejected} not rejected, {d.n_undetermined} undetermined of {d.n_tests}; "
            f"{d.resamples_drawn:,} resamples drawn in {d.looks} looks.",
        ]
    if extra:
        lines += [
            "",
            "## FlipTest on sex, per device (same machine, same process)",
            "",
            "| device | seconds | flip rates |",
            "|---|---|---|",
            *extra,
        ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
