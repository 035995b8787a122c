"""Speed and memory of the subgroup scan at scale, with AIF360's ``bias_scan`` in the same run.

Set-up (issue 24): n rows (default 1,000,000), 10 categorical features of 5 levels (uniform),
a calibrated model p ~ Beta(2, 3), y ~ Bernoulli(p) except a planted depth-2 subgroup
(f0 = 1 and f1 = 2, 4% of rows) with odds multiplied by ``--shift`` (1.15); depth 2, min_size
100: 10·5 + 45·25 = 1,175 subgroups. Timed, one after the other:

1. observed scan: coding the features, the cells, the search space, the cell sums and every
   subgroup's Z (:func:`code_features` … :func:`observed_scan`);
2. calibrated p-value: the exact null (y* ~ Bernoulli(p)) through the sequential Monte-Carlo
   scheme (no top-up: ``min_draws=0``), and the Gaussian mode likewise (S × S covariance
   factor: 1,175 subgroups); then both with the method's default top-up to 999 null scans;
3. AIF360 0.6.1 ``bias_scan`` (Bernoulli, ``overpredicted=False``, 1 restart) on a random
   subsample of ``--aif-rows`` rows (it is too slow on all rows: see the results file), and our
   :func:`mdss_scan` on the same subsample.

Peak memory is the process's maximum resident set size (``ru_maxrss``) after each step.

Usage::

    .venv/bin/python benchmarks/subgroup_scan_speed.py [--rows N] [--aif-rows M] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fairengine.subgroup_scan import (  # noqa: E402
    build_search_space,
    cell_outcomes,
    code_features,
    observed_scan,
    scan_space,
)
from fairengine.subgroup_scan.mdss import mdss_scan  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--aif-rows", type=int, default=20_000)
    ap.add_argument("--shift", type=float, default=1.15)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    n = args.rows
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 5, size=(n, 10)).astype(np.int8)
    frame = pd.DataFrame({f"f{j}": codes[:, j] for j in range(10)})
    p = rng.beta(2, 3, n)
    planted = (codes[:, 0] == 1) & (codes[:, 1] == 2)
    q = args.shift
    y = (rng.random(n) < np.where(planted, q * p / (1 - p + q * p), p)).astype(np.float64)
    del codes
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"rows {n:,}, 10 features x 5 levels, depth 2, min_size 100, planted odds x{q}")
    base = _rss_mb()
    t0 = time.perf_counter()
    coded = code_features(frame, list(frame.columns), levels=5)
    space = build_search_space(coded, depth=2, min_size=100)
    cells = cell_outcomes(space, "calibration", y, p)
    scan = observed_scan(space, cells, "two-sided")
    t_obs = time.perf_counter() - t0
    best = space.subgroups[int(scan.ranking[0])]
    say(
        f"observed scan: {t_obs:.2f} s ({space.n_subgroups} subgroups, {space.cells.n_cells:,} "
        f"cells); best {best.rule!r}, Z = {scan.z[scan.ranking[0]]:.2f}; peak RSS "
        f"{_rss_mb():.0f} MB (data alone {base:.0f} MB)"
    )
    for mode in ("exact", "gaussian"):
        t0 = time.perf_counter()
        res = scan_space(space, cells, top_k=5, min_draws=0, mode=mode, seed=1)
        dt = time.perf_counter() - t0
        say(
            f"calibrated p-value ({mode}): {dt:.1f} s, {res.null.draws} null scans, "
            f"p = {res.pvalue:.4g} ({res.null.decision}), top rule {res.top[0].rule!r}; "
            f"peak RSS {_rss_mb():.0f} MB"
        )
    for mode in ("exact", "gaussian"):
        t0 = time.perf_counter()
        res = scan_space(space, cells, top_k=5, min_draws=999, mode=mode, seed=2)
        dt = time.perf_counter() - t0
        say(
            f"calibrated p-value + 999 null scans for the intervals ({mode}): {dt:.1f} s, "
            f"{res.null.draws} null scans, p = {res.pvalue:.4g}; peak RSS {_rss_mb():.0f} MB"
        )
    sub = rng.choice(n, size=min(args.aif_rows, n), replace=False)
    fs, ys, ps = frame.iloc[sub].reset_index(drop=True), y[sub], p[sub]
    from aif360.detectors.mdss_detector import bias_scan

    t0 = time.perf_counter()
    _, score = bias_scan(
        fs, pd.Series(ys), pd.Series(ps), overpredicted=False, num_iters=1, penalty=1e-17
    )
    t_aif = time.perf_counter() - t0
    say(f"AIF360 bias_scan on {len(sub):,} rows (1 restart): {t_aif:.1f} s, score {score}")
    t0 = time.perf_counter()
    m = mdss_scan(code_features(fs, list(fs.columns)), ys, ps, "positive", restarts=1)
    say(
        f"our mdss_scan on the same rows (1 restart): {time.perf_counter() - t0:.1f} s, score "
        f"{m.score:.4f}, {m.rule!r}"
    )
    say(f"final peak RSS {_rss_mb():.0f} MB")
    load = os.getloadavg()
    say(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
