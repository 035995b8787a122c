"""Cost of FlipTest's further null refits (the decision step's draws,
:class:`fairengine.fliptest.resampler.FlipTestResampler`) per device, on Adult's sex pair
(500 per group, 39 features) and on the demo's hiring data (500 per group, 2 features).

For each data set: run FlipTest at its defaults, then draw one batch of permutation and one of
self-map refits for the large flipset through the resampler, on the CPU and (when torch sees
one) on the GPU, timing each and reporting the exceedances and the null's mean rate (both
devices draw the same law; their streams differ in floating point only). No Prefect or MLflow.

Usage::

    .venv/bin/python benchmarks/fliptest_refits_device.py [--adult DIR] [--batch N] [--out FILE]
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--batch", type=int, default=400)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "fliptest_refits_device.md")
    args = ap.parse_args()

    import numpy as np
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from fairengine.dataset import AuditDataset
    from fairengine.datasets import make_lipton_hiring
    from fairengine.fliptest import FlipTestConfig, run_fliptest
    from fairengine.fliptest.resampler import FlipTestResampler
    from fairengine.library_threads import single_threaded
    from fairengine.roles import ColumnRoles

    cases = []
    adult, _table, features, model = adult_dataset(args.adult)
    cases.append(("Adult, sex", adult, lambda f: model.predict_proba(f[features]), "sex"))
    data = make_lipton_hiring(seed=0)
    roles = data.roles
    train, audit = train_test_split(
        data.frame, test_size=0.5, random_state=0, stratify=data.frame["gender"]
    )
    feats = list(roles.features)
    lr = LogisticRegression().fit(train[feats], train[roles.label])
    hiring = AuditDataset.from_frame(
        audit.assign(score=lr.predict_proba(audit[feats])[:, 1]),
        ColumnRoles(label=roles.label, protected=roles.protected, features=feats, score="score"),
        threshold=0.5,
    )
    cases.append(("hiring (demo)", hiring, lambda f: lr.predict_proba(f[feats]), "gender"))

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    for name, dset, pp, attr in cases:
        cfg = FlipTestConfig(enabled=True, attributes=[attr])
        res = run_fliptest(dset, cfg, seed=0, predict_proba=pp)
        key = max((f for f in res.findings if f.resampling), key=lambda f: float(f.estimate)).key
        for dev in devices:
            rs = FlipTestResampler(dset, replace(cfg, device=dev), res, predict_proba=pp, seed=0)
            for part in ("permutation", "self-map"):
                rs.draw(key, part, 49, 8)  # warm-up: data, model, CUDA context
                with single_threaded():
                    t = time.perf_counter()
                    got = rs.draw(key, part, 1_000, args.batch)
                    sec = time.perf_counter() - t
                info, k = rs._tests[key]  # the batch's rates again, from the cache
                rates = (
                    rs._permutation(info, 1_000, args.batch)
                    if part == "permutation"
                    else rs._batch(("self-map", info.pair, info.index, 1_000, args.batch), info)
                )
                mean = float(np.mean(rates[:, k]))
                row = (
                    f"| {name} | {key} | {dev} | {part} | {args.batch} | {sec:.2f} | "
                    f"{1e3 * sec / args.batch:.2f} | {got} | {mean:.4f} |"
                )
                print(row, flush=True)
                rows.append(row)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    text = "\n".join(
        [
            "# FlipTest's further null refits per device",
            "",
            f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
            f"- command: `python benchmarks/fliptest_refits_device.py --batch {args.batch}`",
            f"- machine: {platform.system().lower()}, Python {platform.python_version()}, "
            f"GPU: {gpu}; numeric libraries single-threaded (as in the audit's decision step)",
            "- one batch of refits drawn by the resampler after a warm-up batch; observed "
            "flipset = the run's largest; exceedances = refits with a rate at least the "
            "observed one",
            "",
            "| data | flipset | device | null | refits | seconds | ms per refit | "
            "exceedances | null mean rate |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
