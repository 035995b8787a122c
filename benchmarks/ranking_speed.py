"""Speed of the ranking statistics and within-list permutation tests (issue 22, ranking part).

Data: ``--items`` items (default 100,000), group A 30 %, scores normal with a small shift for
A, in one list and in lists of 100 and of 10 items (and lists of 5–195 items, uneven). Each
table row is one call (wall and CPU time, load average before and after):

1. :func:`fairengine.ranking.ranking_statistics` without tests (exposure, top 10 %/20 %
   shares and skews, NDKL, precision/recall@k with 0/1 relevance);
2. :func:`fairengine.ranking.pair_permutation_tests` with ``--permutations`` (default 10,000)
   studentized permutations: exposure and top-10 %/20 % rate differences on shared
   permutations.

Usage::

    nice -n 10 .venv/bin/python benchmarks/ranking_speed.py [--items 100000] [--permutations 10000]

Writes ``benchmarks/results/ranking_speed.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairengine.ranking import pair_permutation_tests, ranking_statistics

RESULTS = Path(__file__).resolve().parent / "results"


def data(n: int, layout: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    codes = (rng.random(n) < 0.3).astype(np.int64)  # code 1 = group A
    scores = rng.normal(size=n) + 0.05 * codes
    relevance = (scores + rng.normal(size=n) > 0.5).astype(np.float64)
    if layout == "one list":
        lists = np.zeros(n, dtype=np.int64)
    elif layout == "uneven lists":
        sizes = rng.integers(5, 196, size=n // 50)
        sizes = sizes[np.cumsum(sizes) <= n]
        sizes[-1] += n - sizes.sum()
        lists = np.repeat(np.arange(sizes.size), sizes)
    else:
        size = int(layout.split()[2])
        lists = np.arange(n) // size
    return scores, codes, lists, relevance


def timed(fn):  # type: ignore[no-untyped-def]
    load0 = os.getloadavg()[0]
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return out, wall, cpu, load0, os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--permutations", type=int, default=10_000)
    args = parser.parse_args()
    n, t = args.items, args.permutations
    rows = []
    results = []
    for layout in ("one list", "lists of 100", "lists of 10", "uneven lists"):
        s, g, lists, rel = data(n, layout)
        n_lists = int(lists.max()) + 1
        _, wall, cpu, l0, l1 = timed(
            lambda s=s, g=g, lists=lists, rel=rel: ranking_statistics(
                s, g, ["B", "A"], lists=lists, relevance=rel, n_permutations=0
            )
        )
        rows.append((f"statistics, {layout} ({n_lists:,})", wall, cpu, l0, l1))
        res, wall, cpu, l0, l1 = timed(
            lambda s=s, g=g, lists=lists: pair_permutation_tests(
                s, g, ["B", "A"], group_a="A", group_b="B", lists=lists, n_permutations=t
            )
        )
        rows.append((f"3 tests x {t:,} permutations, {layout} ({n_lists:,})", wall, cpu, l0, l1))
        results.append((layout, res))
        print(rows[-2], rows[-1], flush=True)
    lines = [
        "# Ranking statistics and permutation-test speed (issue 22, ranking part)",
        "",
        f"Date: {datetime.now(UTC).isoformat(timespec='seconds')}  ",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPU(s), Python "
        f"{platform.python_version()}, numpy {np.__version__}  ",
        f"Command: `nice -n 10 .venv/bin/python benchmarks/ranking_speed.py --items {n} "
        f"--permutations {t}`  ",
        "The machine is shared with other engineers' jobs (load average before → after).",
        "",
        f"Data: {n:,} items, group A 30 %; lists (count in brackets) as named.",
        "",
        "| call | wall | CPU | load before → after |",
        "|---|---:|---:|---|",
    ]
    lines += [f"| {r[0]} | {r[1]:.2f} s | {r[2]:.2f} s | {r[3]:.2f} → {r[4]:.2f} |" for r in rows]
    lines += ["", "Results of the tests (A − B):", "", "| lists | test | Z | p | exceedances |"]
    lines += ["|---|---|---:|---:|---:|"]
    for layout, res in results:
        for tt in res.tests:
            lines.append(
                f"| {layout} | {tt.name} | {tt.statistic:.4g} | {tt.pvalue:.4g} | {tt.n_extreme} |"
            )
    lines += [
        "",
        "How: the items of both groups are centred within their lists and stacked as [u, u²] "
        "for the three statistics (6 columns); each batch of permutations is one bool mask "
        "(permutations × items) times that matrix. One list: the engine's exact random-subset "
        "sampler (`random_subset_masks`). Several lists: a uniform key per item, and the n_A,l "
        "items of smallest key in list l are A (one sort per list of a padded (batch, lists, "
        "longest) array, or one sort of keys offset by the list index when padding would more "
        "than double the work); lists holding one group only add fixed sums. Studentization "
        "per permutation (Welch se of the centred values); p = (1 + b)/(1 + T).",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ranking_speed.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
