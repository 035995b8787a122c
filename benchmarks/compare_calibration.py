"""Calibration of the paired model comparison (:func:`fairengine.comparison.compare_models`).

Simulations with known truth (full-size versions of ``tests/test_comparison_calibration.py``).
Rows: group A or B (``share`` of A), label y ~ Bernoulli(0.4) independent of everything (so a
group's TPR and FPR equal its selection rate in the population). Baseline ŷ_b ~ Bernoulli(p_b[g]);
the candidate keeps ŷ_b and moves it monotonically to reach rate p_c[g] (turns 0s into 1s with
probability (p_c − p_b)/(1 − p_b), or 1s into 0s with probability 1 − p_c/p_b), then a share ν of
its rows is redrawn independently ~ Bernoulli(p_c[g]) (ν: how much the models disagree). True
gaps g_m = p_m[A] − p_m[B], Δ = |g_c| − |g_b|; δ = 0.02, α = 0.05, default resampling (B = 1,999,
growing while a decision is within Monte-Carlo error, cap 31,999).

Measured per scenario over R replicates: the rate of "not_worse" (U < δ) and of "worse" (L > 0),
each as settled decisions (flag True) and as point decisions (p ≤ α, which also counts decisions
left open at Monte-Carlo resolution: an upper bound on the settled rate), the rate of questions
undetermined at Monte-Carlo resolution, and the 99 % Clopper–Pearson upper bound of the point
rate. Type-I scenarios are at the non-inferiority boundary Δ = δ (not_worse must be ≤ α) or at
Δ = 0 (worse must be ≤ α). As an ablation, the naive percentile bootstrap of Δ̂ (declare
not_worse when the 95 % percentile of Δ̂* is below δ) on the same draws' budget shows the bias
the smooth contrasts avoid.

Usage: ``.venv/bin/python benchmarks/compare_calibration.py [--reps R]``; writes
``benchmarks/results/compare_calibration.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from scipy.stats import beta

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairengine.comparison import compare_models
from fairengine.comparison._cells import CellTable, Question, gaps

RESULTS = Path(__file__).resolve().parent / "results"
ALPHA = 0.05
DELTA = 0.02


def paired_rows(
    rng: np.random.Generator,
    n: int,
    pb: tuple[float, float],
    pc: tuple[float, float],
    nu: float,
    share: float = 0.5,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(y, ŷ_base, ŷ_cand, group) of ``n`` rows of the population in the module docstring."""
    g = (rng.random(n) >= share).astype(np.int64)
    b_rate = np.asarray(pb)[g]
    c_rate = np.asarray(pc)[g]
    yb = (rng.random(n) < b_rate).astype(np.int8)
    u = rng.random(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(yb == 1, True, u < (c_rate - b_rate) / (1 - b_rate))
        down = np.where(yb == 0, False, u < c_rate / b_rate)
    yc = np.where(c_rate >= b_rate, up, down).astype(np.int8)
    redraw = rng.random(n) < nu
    yc[redraw] = rng.random(int(redraw.sum())) < c_rate[redraw]
    y = (rng.random(n) < 0.4).astype(np.int8)
    return y, yb, yc, g


@dataclass(frozen=True)
class Scenario:
    name: str
    pb: tuple[float, float]
    pc: tuple[float, float]
    nu: float
    n: int
    metrics: tuple[str, ...] = ("selection_rate",)
    share: float = 0.5
    naive: bool = False

    @property
    def truth(self) -> float:
        return abs(self.pc[0] - self.pc[1]) - abs(self.pb[0] - self.pb[1])


def run(sc: Scenario, reps: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(("nw", "nw_p", "w", "w_p", "mc", "naive"), 0)
    resamples = 0
    t0 = time.perf_counter()
    for r in range(reps):
        y, yb, yc, g = paired_rows(rng, sc.n, sc.pb, sc.pc, sc.nu, sc.share)
        res = compare_models(
            y, yb, yc, {"grp": (g, ["A", "B"])}, metrics=sc.metrics, alpha=ALPHA, seed=r
        )
        qs = res.questions
        counts["nw"] += any(q.not_worse is True for q in qs)
        counts["nw_p"] += any(q.pvalue_not_worse <= ALPHA for q in qs)
        counts["w"] += any(q.worse is True for q in qs)
        counts["w_p"] += any(q.pvalue_worse <= ALPHA for q in qs)
        counts["mc"] += any(q.decision.endswith("(Monte-Carlo resolution)") for q in qs)
        resamples += res.n_resamples
        if sc.naive:
            counts["naive"] += naive_not_worse(y, yb, yc, g, rng)
    out = {k: v / reps for k, v in counts.items()}
    out["seconds"] = (time.perf_counter() - t0) / reps
    out["resamples"] = resamples / reps
    out["reps"] = reps
    for k in ("nw_p", "w_p", "naive"):
        out[k + "_ub"] = upper99(counts[k], reps)
    return out


def naive_not_worse(
    y: np.ndarray, yb: np.ndarray, yc: np.ndarray, g: np.ndarray, rng: np.random.Generator
) -> bool:
    """Ablation: percentile bootstrap of Δ̂ = |ĝ_c| − |ĝ_b| (1,999 paired resamples)."""
    table = CellTable.from_rows(y, yb, yc, [g], [2])
    q = [Question(0, "grp", 0, 1, "selection_rate")]
    draws = rng.multinomial(table.n_rows, table.counts / table.n_rows, size=1999)
    gb, gc = gaps(table, draws, q)
    d = np.abs(gc[:, 0]) - np.abs(gb[:, 0])
    return bool(np.quantile(d, 1 - ALPHA) < DELTA)


def upper99(k: int, n: int) -> float:
    """One-sided 99 % Clopper–Pearson upper bound of a rate from k of n."""
    return 1.0 if k == n else float(beta.ppf(0.99, k + 1, n - k))


def scenarios(n: int) -> tuple[list[Scenario], list[Scenario], list[Scenario]]:
    d = DELTA
    boundary = [
        Scenario(
            "Δ = δ, g_base = 0 (hard case)",
            (0.3, 0.3),
            (0.3 + d / 2, 0.3 - d / 2),
            0.1,
            n,
            naive=True,
        ),
        Scenario(
            "Δ = δ, g_base = 0, models disagree (ν = 0.5)",
            (0.3, 0.3),
            (0.3 + d / 2, 0.3 - d / 2),
            0.5,
            n,
            naive=True,
        ),
        Scenario(
            "Δ = δ, g_base = 0, n = 1,000, groups 80/20",
            (0.3, 0.3),
            (0.3 + d / 2, 0.3 - d / 2),
            0.1,
            1000,
            share=0.8,
            naive=True,
        ),
        Scenario(
            "Δ = δ, g_base = 0, all three metrics (family of 3)",
            (0.3, 0.3),
            (0.3 + d / 2, 0.3 - d / 2),
            0.1,
            n,
            ("selection_rate", "tpr", "fpr"),
        ),
        Scenario(
            "Δ = δ, g_base = 0.05, g_cand = 0.07", (0.35, 0.30), (0.36, 0.29), 0.1, n, naive=True
        ),
        Scenario(
            "Δ = δ, opposite signs (g_base = 0.03, g_cand = −0.05)",
            (0.33, 0.30),
            (0.28, 0.33),
            0.1,
            n,
            naive=True,
        ),
        Scenario(
            "Δ = δ, both gaps tiny (g_base = 0.005, g_cand = 0.025)",
            (0.3025, 0.2975),
            (0.3125, 0.2875),
            0.1,
            n,
            naive=True,
        ),
    ]
    equal = [
        Scenario("Δ = 0, equal gaps 0.05, ν = 0.3", (0.325, 0.275), (0.325, 0.275), 0.3, n),
        Scenario("Δ = 0, both gaps 0, ν = 0.3", (0.3, 0.3), (0.3, 0.3), 0.3, n),
        Scenario(
            "Δ = 0, both gaps 0, all three metrics",
            (0.3, 0.3),
            (0.3, 0.3),
            0.3,
            n,
            ("selection_rate", "tpr", "fpr"),
        ),
        Scenario("Δ = 0, gaps 0.04 and −0.04 (sign flip)", (0.32, 0.28), (0.28, 0.32), 0.1, n),
    ]
    power = (
        [
            Scenario(
                f"g_base = 0.08 → g_cand = 0.02 (Δ = −0.06), n = {m:,}",
                (0.34, 0.26),
                (0.31, 0.29),
                0.1,
                m,
            )
            for m in (1000, 2000, 4000, 8000)
        ]
        + [
            Scenario(
                f"g_base = 0.04 → g_cand = 0.02 (Δ = −0.02), n = {m:,}",
                (0.32, 0.28),
                (0.31, 0.29),
                0.1,
                m,
            )
            for m in (4000, 16000)
        ]
        + [
            Scenario(f"g_base = 0 → g_cand = 0 (Δ = 0), n = {m:,}", (0.3, 0.3), (0.3, 0.3), 0.1, m)
            for m in (4000, 16000)
        ]
    )
    return boundary, equal, power


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=1000, help="replicates per type-I scenario")
    ap.add_argument("--power-reps", type=int, default=400)
    ap.add_argument("--n", type=int, default=4000, help="rows of the type-I scenarios")
    args = ap.parse_args()
    boundary, equal, power = scenarios(args.n)
    t0 = time.time()
    lines = [
        "# Paired model comparison: type-I error and power",
        "",
        f"Date: {datetime.now(UTC).isoformat(timespec='seconds')}  ",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPU(s), numpy {np.__version__}  ",
        f"Command: `.venv/bin/python benchmarks/compare_calibration.py --reps {args.reps} "
        f"--power-reps {args.power_reps} --n {args.n}`  ",
        f"α = {ALPHA}, δ = {DELTA}, default resampling (B = 1,999 growing ×2 while a decision is "
        "within Monte-Carlo error, cap 31,999). Population: see the script's docstring.",
        "",
        "Rates over the replicates of the family (any question). *point*: p ≤ α (includes "
        "decisions left open at Monte-Carlo resolution); *settled*: the flag is True; "
        "*MC open*: replicates with a question undetermined at Monte-Carlo resolution; "
        "*99 % UB*: one-sided Clopper–Pearson upper bound of the point rate.",
        "",
        "## 1. Non-inferiority at the boundary Δ = δ: declaring not_worse is a type-I error "
        "(must be ≤ α)",
        "",
        "| scenario | n | not_worse point | 99 % UB | settled | MC open | naive percentile "
        "bootstrap of Δ̂ (99 % UB) | mean resamples | s / replicate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    b_rates, naive_rates, e_rates, mc_open = [], [], [], []
    for i, sc in enumerate(boundary):
        r = run(sc, args.reps, 1000 + i)
        b_rates.append((r["nw_p"], r["nw_p_ub"]))
        mc_open.append(r["mc"])
        if sc.naive:
            naive_rates.append((sc.name, r["naive"]))
        naive = f"{r['naive']:.3f} ({r['naive_ub']:.3f})" if sc.naive else "—"
        lines.append(
            f"| {sc.name} | {sc.n:,} | {r['nw_p']:.3f} | {r['nw_p_ub']:.3f} | {r['nw']:.3f} | "
            f"{r['mc']:.3f} | {naive} | {r['resamples']:,.0f} | {r['seconds']:.3f} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        "## 2. Equal gaps Δ = 0: declaring worse is a type-I error (must be ≤ α)",
        "",
        "| scenario | n | worse point | 99 % UB | settled | MC open | not_worse point | "
        "mean resamples | s / replicate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, sc in enumerate(equal):
        r = run(sc, args.reps, 2000 + i)
        e_rates.append((r["w_p"], r["w_p_ub"]))
        mc_open.append(r["mc"])
        lines.append(
            f"| {sc.name} | {sc.n:,} | {r['w_p']:.3f} | {r['w_p_ub']:.3f} | {r['w']:.3f} | "
            f"{r['mc']:.3f} | {r['nw_p']:.3f} | {r['resamples']:,.0f} | {r['seconds']:.3f} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        "## 3. Power of not_worse (candidate fairer or equally fair)",
        "",
        "| scenario | not_worse settled | not_worse point | MC open | worse point | "
        "mean resamples | s / replicate |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, sc in enumerate(power):
        r = run(sc, args.power_reps, 3000 + i)
        mc_open.append(r["mc"])
        lines.append(
            f"| {sc.name} | {r['nw']:.3f} | {r['nw_p']:.3f} | {r['mc']:.3f} | {r['w_p']:.3f} | "
            f"{r['resamples']:,.0f} | {r['seconds']:.3f} |"
        )
        print(lines[-1], flush=True)
    worst_b = max(b_rates)
    worst_e = max(e_rates)
    lines += [
        "",
        "## Reading",
        "",
        f"- Non-inferiority at the boundary: the largest point rejection rate is "
        f"{worst_b[0]:.3f} (99 % upper bound {worst_b[1]:.3f}) against α = {ALPHA}; the "
        "procedure is conservative, as expected from two-sided simultaneous bands over the 4Q "
        "contrasts used for one one-sided bound (about α/2 per side with one question).",
        f"- Equal gaps: the largest rate of declaring worse is {worst_e[0]:.3f} (99 % upper "
        f"bound {worst_e[1]:.3f}).",
        "- The naive percentile bootstrap of Δ̂ rejects at "
        + ", ".join(f"{v:.3f}" for _, v in naive_rates)
        + " in the boundary scenarios marked with it (same order as the table): far above α "
        "where a true gap is 0 or small against its SE (E|ĝ| ≈ 0.8·se biases Δ̂ towards the "
        "candidate), near α where both gaps are clearly non-zero.",
        f"- Replicates with a question left undetermined at Monte-Carlo resolution (cap "
        f"31,999): at most {max(mc_open):.3f}; they count in the point columns when p ≤ α, "
        "never in the settled ones.",
        "",
        f"Total time: {time.time() - t0:.0f} s.",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "compare_calibration.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
