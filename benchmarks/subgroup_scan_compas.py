"""The subgroup scan on ProPublica's COMPAS data: the example of ``docs/subgroup_scan.md``.

Rows: the ProPublica filters (6,172 rows). Model: the decile score's calibration table,
p = P(two_year_recid | decile_score) (calibrated on every decile by construction); decision:
"high risk" = decile score >= 5 (ProPublica's medium or high). Scanned: sex, race, age_cat,
c_charge_degree and priors_count (quantile bins), depth 2, min_size 50. Scans: calibration
(two-sided, exact null) and FPR (two-sided, predictions permuted among the non-recidivists),
plus the Gaussian mode of the calibration scan and MDSS value subsets (AIF360 ``bias_scan``
beside ours).

Usage::

    .venv/bin/python benchmarks/subgroup_scan_compas.py [--data CSV] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fairengine.subgroup_scan import code_features, scan_subgroups  # noqa: E402
from fairengine.subgroup_scan.mdss import mdss_scan  # noqa: E402
from fairengine.subgroup_scan.method import reading  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data" / "compas" / "compas-scores-two-years.csv.gz"
FEATURES = ["sex", "race", "age_cat", "c_charge_degree", "priors_count"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    df = pd.read_csv(args.data)
    df = df[
        df.days_b_screening_arrest.between(-30, 30)
        & (df.is_recid != -1)
        & (df.c_charge_degree != "O")
        & (df.score_text != "N/A")
    ].reset_index(drop=True)
    y = df.two_year_recid.to_numpy(float)
    p = df.groupby("decile_score").two_year_recid.transform("mean").to_numpy(float)
    high = (df.decile_score >= 5).to_numpy(float)
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"COMPAS, {len(df):,} rows; scanned {FEATURES}, depth 2, min_size 50")
    for stat, mode in (("calibration", "exact"), ("calibration", "gaussian"), ("fpr", "exact")):
        t0 = time.perf_counter()
        res = scan_subgroups(
            df,
            FEATURES,
            y,
            probability=p if stat == "calibration" else None,
            decision=high if stat != "calibration" else None,
            statistic=stat,
            depth=2,
            min_size=50,
            levels=6,
            top_k=5,
            mode=mode,
            min_draws=1999,
            seed=1,
        )
        dt = time.perf_counter() - t0
        say(
            f"\n{stat} ({mode}): {res.n_subgroups} subgroups, max |Z| = {res.statistic:.2f}, "
            f"calibrated p = {res.pvalue:.4g} ({res.null.draws} null scans, decision "
            f"{res.null.decision}); naive min p = {res.naive_min_pvalue:.2g}, Bonferroni "
            f"{res.bonferroni_pvalue:.2g}; null 95% critical value of max |Z| = "
            f"{res.null.critical_value:.2f}; {dt:.1f} s"
        )
        say(
            "| rank | rule | n | observed | null | Z | deviation [simultaneous 95%] | step-down p |"
        )
        say("|---:|---|---:|---:|---:|---:|---|---:|")
        for s in res.top:
            say(
                f"| {s.rank + 1} | {s.rule} | {s.n:,} | {s.observed_rate:.3f} | "
                f"{s.expected_rate:.3f} | {s.z:.2f} | {s.deviation:+.3f} "
                f"[{s.interval.low:+.3f}, {s.interval.high:+.3f}] | {s.adjusted_pvalue:.4g} |"
            )
        say(f"top reading: {reading(res.top[0], stat)}")
    coded = code_features(df, FEATURES, levels=6)
    from aif360.detectors.mdss_detector import bias_scan

    frame = pd.DataFrame(coded.codes, columns=FEATURES)
    for direction, over in (("positive", False), ("negative", True)):
        t0 = time.perf_counter()
        ours = mdss_scan(coded, y, p, direction, restarts=10, seed=0)
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, score = bias_scan(
            frame, pd.Series(y), pd.Series(p), overpredicted=over, num_iters=10, penalty=1e-17
        )
        t_aif = time.perf_counter() - t0
        say(
            f"\nMDSS {direction}: ours score {ours.score:.4f} (q̂ {ours.q_hat:.3f}, n "
            f"{ours.size:,}, {t_ours:.1f} s): {ours.rule}; AIF360 bias_scan score {score} "
            f"({t_aif:.1f} s)"
        )
    load = os.getloadavg()
    say(
        f"\nload {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
