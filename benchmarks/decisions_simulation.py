"""The audit's decisions on a mixed family (:mod:`fairengine.decisions`): risk, work and FWER.

Full-size versions of the simulations in ``tests/test_decisions.py``:

1. Resampling risk (item c): borderline mixed families (20 exact p-values, 10 Monte-Carlo tests
   with ideal p near their Holm/BH critical values, three with two parts), exceedances drawn as
   Binomial(batch, p) (independent tests) or from one uniform per resample shared by all tests
   (comonotone, as when tests reuse permutations). The fraction of audits in which any settled
   decision differs from the procedure on the ideal p-values, against ε; beside it the same
   family decided on the point p-values of the first resamples, and ``decide_family`` with
   the spending removed (level ε for every interval) as an ablation.
2. Work (item d): 100 tests (10 Monte-Carlo at p = 1e-6, 85 Monte-Carlo null, 5 exact), and the
   same with 5 null tests replaced by borderline ones: mean total resamples of the sequential
   scheme against 95·B for the smallest B of a grid whose Holm decisions agree with the ideal
   ones in ≥ 99 % of audits.
3. Family-wise error of a whole audit under the global null (item a): 1,500 rows, 5 groups
   independent of label and prediction, 30 dependent tests (positive rate, TPR, FPR for the 10
   pairs); the 10 positive-rate tests are studentized permutation tests
   (:func:`fairengine.permutation.two_group.permutation_test`) drawn further by a resampler of
   real permutations, the 20 TPR/FPR tests pooled two-proportion z-tests.

Usage: ``.venv/bin/python benchmarks/decisions_simulation.py [--quick]``; writes
``benchmarks/results/decisions_simulation.md``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairengine.decisions import (
    FamilyResult,
    FamilyTest,
    MonteCarloPart,
    ResamplingSettings,
    decide_family,
)
from fairengine.multiplicity import adjust_pvalues
from fairengine.permutation.two_group import permutation_test

RESULTS = Path(__file__).resolve().parent / "results"
ALPHA = 0.05


def mc_se(p: float, n: int) -> float:
    return float(np.sqrt(max(p * (1 - p), 1e-12) / n))


def upper95(k: int, n: int) -> float:
    """One-sided 95 % Clopper–Pearson upper bound of a rate from k of n."""
    from scipy.stats import beta

    return 1.0 if k == n else float(beta.ppf(0.95, k + 1, n - k))


# --- simulated resamplers ----------------------------------------------------------------------


class BinomialResampler:
    """Independent resamples: Binomial(batch, p[key][part]) exceedances."""

    def __init__(self, p: dict[str, dict[str, float]], rng: np.random.Generator) -> None:
        self.p, self.rng = p, rng

    def can_extend(self, key: str) -> bool:
        return key in self.p

    def first(self, key: str, name: str, n: int) -> int:
        return int(self.rng.binomial(n, self.p[key][name]))

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        return int(self.rng.binomial(batch, self.p[key][part]))


class ComonotoneResampler(BinomialResampler):
    """One uniform U_r per resample number r shared by every test and part; an exceedance iff
    U_r < p. Batches cover new resample numbers, so each part's count stays Binomial."""

    def __init__(self, p: dict[str, dict[str, float]], rng: np.random.Generator) -> None:
        super().__init__(p, rng)
        self.u = np.empty(0)

    def _count(self, p: float, start: int, stop: int) -> int:
        if stop > self.u.size:
            self.u = np.r_[self.u, self.rng.random(stop - self.u.size)]
        return int(np.count_nonzero(self.u[start:stop] < p))

    def first(self, key: str, name: str, n: int) -> int:
        return self._count(self.p[key][name], 0, n)

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        return self._count(self.p[key][part], start, start + batch)


class NoSpending(ResamplingSettings):
    """Ablation: every interval at level ε (no split over parts and looks)."""

    def look_errors(self, schedule: np.ndarray, n_parts: int) -> np.ndarray:
        return np.full(len(schedule), self.risk)


def wrong_decision(result: FamilyResult, true_reject: np.ndarray) -> bool:
    d = np.asarray([x.decision for x in result.decisions])
    return bool(np.any(((d == "reject") & ~true_reject) | ((d == "fail_to_reject") & true_reject)))


# --- 1. resampling risk ------------------------------------------------------------------------

RISK_EXACT = [1e-7] * 4 + [round(float(v), 3) for v in np.linspace(0.08, 0.95, 16)]
RISK_FAMILIES = {
    "holm": [(0.0015, 0.0009), (0.0018,), (0.00195,), (0.0023, 0.0021), (0.0026,), (0.0031,),
             (0.012,), (0.03, 0.031), (0.06,), (0.2,)],
    "bh": [(0.0075, 0.004), (0.0095,), (0.0123,), (0.0128, 0.0127), (0.0155,), (0.0172,),
           (0.0205,), (0.03, 0.02), (0.06,), (0.3,)],
}  # fmt: skip


def risk_runs(
    procedure: str, dependence: str, risk: float, runs: int, seed: int, spending: bool = True
) -> dict[str, float]:
    mc = {
        f"mc{j}": {f"part{k}": v for k, v in enumerate(ps)}
        for j, ps in enumerate(RISK_FAMILIES[procedure])
    }
    first = {key: (999, 1999)[j % 2] for j, key in enumerate(mc)}
    ideal = np.r_[RISK_EXACT, [max(ps.values()) for ps in mc.values()]]
    truth = adjust_pvalues(ideal, procedure) <= ALPHA
    rng = np.random.default_rng(seed)
    cls = BinomialResampler if dependence == "independent" else ComonotoneResampler
    settings = (ResamplingSettings if spending else NoSpending)(risk=risk)
    wrong = fixed = undetermined = 0
    drawn = []
    for _ in range(runs):
        rs = cls(mc, rng)
        tests = [FamilyTest(f"e{i}", pvalue=float(v)) for i, v in enumerate(RISK_EXACT)]
        tests += [
            FamilyTest(
                k,
                parts=tuple(MonteCarloPart(n, rs.first(k, n, first[k]), first[k]) for n in ps),
            )
            for k, ps in mc.items()
        ]
        point = [
            t.pvalue
            if t.pvalue is not None
            else max((p.exceedances + 1) / (p.resamples + 1) for p in t.parts)
            for t in tests
        ]
        fixed += bool(np.any((adjust_pvalues(point, procedure) <= ALPHA) != truth))
        res = decide_family(tests, ALPHA, procedure, settings, rs)
        wrong += wrong_decision(res, truth)
        undetermined += res.count("undetermined") > 0
        drawn.append(res.resamples_drawn)
    return {
        "wrong": wrong / runs,
        "fixed": fixed / runs,
        "undetermined": undetermined / runs,
        "drawn": float(np.mean(drawn)),
        "drawn_se": float(np.std(drawn) / math.sqrt(runs)),
    }


def risk_table(runs: int) -> list[str]:
    rows = [
        f"30 tests: 20 exact, 10 Monte-Carlo (first 999 or 1,999 resamples, three with two "
        f"parts; ideal p / critical value of the Monte-Carlo tests 0.72–1.43 for Holm, "
        f"0.56–1.12 for BH); α = 0.05, cap 99,999, growth 2; {runs} audits per row.",
        "",
        "| procedure | resampling | ε | spending | runs with a wrong settled decision (SE) "
        "| 95 % upper bound | fixed-n point p-values wrong (SE) | runs with an undetermined "
        "test | mean resamples drawn (SE) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    seed = 100
    kinds, rates = [], []
    for procedure in ("holm", "bh"):
        for dependence in ("independent", "comonotone"):
            for risk, spending in ((0.05, True), (1e-3, True), (0.05, False)):
                seed += 1
                r = risk_runs(procedure, dependence, risk, runs, seed, spending)
                kinds.append((risk, spending))
                rates.append(r["wrong"])
                k = round(r["wrong"] * runs)
                rows.append(
                    f"| {procedure} | {dependence} | {risk:g} | "
                    f"{'ε/M over looks' if spending else 'none (ablation)'} | "
                    f"{r['wrong']:.4f} ({mc_se(r['wrong'], runs):.4f}) | "
                    f"{upper95(k, runs):.4f} | {r['fixed']:.4f} ({mc_se(r['fixed'], runs):.4f}) "
                    f"| {r['undetermined']:.3f} | {r['drawn']:,.0f} ({r['drawn_se']:,.0f}) |"
                )
                print(rows[-1], flush=True)
    spent = [r for (risk, spending), r in zip(kinds, rates, strict=True) if spending]
    ablation = [r for (risk, spending), r in zip(kinds, rates, strict=True) if not spending]
    rows += [
        "",
        f"With the spending the wrong-decision rate is at most {max(spent):.4f} in every row, far "
        "below ε: the union bound over parts and looks is conservative. The ablation that gives "
        f"every interval level ε (no spending) errs in {min(ablation):.4f}–{max(ablation):.4f} "
        "of the audits at ε = 0.05, so these families can detect a broken spending at this "
        "number of runs. Decisions on the point p-values (S + 1)/(n + 1) of the first "
        "resamples are wrong in most audits of these families.",
        "",
    ]
    return rows


# --- 2. work -----------------------------------------------------------------------------------

WORK_GRID = (999, 1999, 2999, 3999, 4999, 7499, 9999, 14_999, 19_999, 49_999, 99_999)
WORK_EXACT = np.array([1e-5, 3e-4, 0.3, 0.6, 0.9])
NULL_P = np.random.default_rng(2014).uniform(size=85)
WORK_FAMILIES = {
    "10 strong + 85 null (item d)": np.r_[np.full(10, 1e-6), NULL_P],
    "10 strong + 80 null + 5 borderline": np.r_[
        np.full(10, 1e-6), NULL_P[:80], [1e-4, 1.5e-4, 1.5e-3, 2e-3, 3e-3]
    ],
}


def fixed_b(p_mc: np.ndarray, runs: int, seed: int) -> tuple[int, float]:
    """Smallest B of the grid with Holm decisions on (S + 1)/(B + 1) equal to the ideal ones in
    ≥ 99 % of ``runs`` audits, and that agreement."""
    rng = np.random.default_rng(seed)
    truth = adjust_pvalues(np.r_[p_mc, WORK_EXACT], "holm") <= ALPHA
    for b in WORK_GRID:
        s = rng.binomial(b, np.broadcast_to(p_mc, (runs, p_mc.size)))
        full = np.c_[(s + 1) / (b + 1), np.broadcast_to(WORK_EXACT, (runs, WORK_EXACT.size))]
        adj = np.apply_along_axis(adjust_pvalues, 1, full, "holm")
        agree = float(np.mean(np.all((adj <= ALPHA) == truth, axis=1)))
        if agree >= 0.99:
            return b, agree
    return WORK_GRID[-1], agree


def sequential_work(p_mc: np.ndarray, first: int, risk: float, runs: int, seed: int):
    rng = np.random.default_rng(seed)
    mc = {f"mc{i}": {"permutation": float(v)} for i, v in enumerate(p_mc)}
    truth = adjust_pvalues(np.r_[p_mc, WORK_EXACT], "holm") <= ALPHA
    totals, wrong, undetermined = [], 0, 0
    for _ in range(runs):
        rs = BinomialResampler(mc, rng)
        tests = [
            FamilyTest(k, parts=(MonteCarloPart("permutation", rs.first(k, "permutation", first),
                                                first),))
            for k in mc
        ] + [FamilyTest(f"e{i}", pvalue=float(v)) for i, v in enumerate(WORK_EXACT)]  # fmt: skip
        res = decide_family(tests, ALPHA, "holm", ResamplingSettings(risk=risk), rs)
        totals.append(sum(d.resamples for d in res.decisions))
        wrong += wrong_decision(res, truth)
        undetermined += res.count("undetermined")
    return float(np.mean(totals)), float(np.std(totals) / math.sqrt(runs)), wrong, undetermined


def work_table(runs: int, fixed_runs: int) -> list[str]:
    rows = [
        f"Holm, α = 0.05, 95 Monte-Carlo + 5 exact tests; sequential: cap 99,999, growth 2, "
        f"{runs} audits per row (total = all resamples of the Monte-Carlo tests, first ones "
        f"included); fixed B: smallest of {', '.join(f'{b:,}' for b in WORK_GRID)} whose "
        f"decisions equal the ideal ones in ≥ 99 % of {fixed_runs:,} audits.",
        "",
        "| family | first n | ε | sequential mean total (SE) | wrong settled / undetermined "
        "(all runs) | fixed B (agreement, SE) | fixed total 95·B | sequential / fixed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, (name, p_mc) in enumerate(WORK_FAMILIES.items()):
        b, agree = fixed_b(p_mc, fixed_runs, 500 + k)
        for first in (99, 999, 1999):
            for risk in (1e-3, 1e-2):
                seq, se, wrong, und = sequential_work(p_mc, first, risk, runs, 600 + k)
                rows.append(
                    f"| {name} | {first:,} | {risk:g} | {seq:,.0f} ({se:,.0f}) | {wrong} / {und} "
                    f"| {b:,} ({agree:.4f}, {mc_se(agree, fixed_runs):.4f}) | {95 * b:,} | "
                    f"{seq / (95 * b):.2f} |"
                )
                print(rows[-1], flush=True)
    # why the strong tests cost what they cost: S = 0, Clopper–Pearson upper bound at each look
    st = ResamplingSettings()
    sched = st.schedule(1999, True)
    upper = 1 - (st.look_errors(sched, 95) / 2) ** (1 / sched)
    thr = ALPHA / 99  # rank 2 of Holm: the exact 1e-5 is rank 1, the ten tied strong tests next
    j = int(np.argmax(upper <= thr))
    rows += [
        "",
        "At the defaults (first n = 1,999, ε = 1e-3, spending_k = "
        f"{st.spending_k:,.0f}) a test at p = 1e-6 (S = 0) has upper bounds "
        + ", ".join(
            f"{u:.2e} at {n:,}" for n, u in zip(sched[: j + 1], upper[: j + 1], strict=True)
        )
        + f"; the ten tie, so each must reach U ≤ α/99 = {thr:.3e}, i.e. {sched[j]:,} resamples, "
        "while a fixed B = 3,999 already reproduces the ideal decisions of the first family. "
        "The sequential scheme pays off when borderline tests force a fixed B to be large "
        "(second family).",
        "",
    ]
    return rows


# --- 3. FWER under the global null -------------------------------------------------------------

GROUPS = 5
PAIRS = list(combinations(range(GROUPS), 2))


def two_proportion_p(k1, n1, k2, n2) -> np.ndarray:
    pooled = (k1 + k2) / (n1 + n2)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    z = np.divide(k1 / n1 - k2 / n2, se, out=np.zeros_like(se), where=se > 0)
    return 2 * norm.sf(np.abs(z))


class PermutationResampler:
    """Positive-rate permutation test of a pair; batch ``start`` of test i from
    ``SeedSequence(seed, spawn_key=(i, start))``, the first batch from ``(i,)``."""

    def __init__(self, y, yhat, g, seed: int) -> None:
        self.y, self.yhat, self.g, self.seed = y, yhat, g, seed
        self.index = {f"perm{a}{b}": i for i, (a, b) in enumerate(PAIRS)}

    def can_extend(self, key: str) -> bool:
        return key in self.index

    def _count(self, key: str, n: int, spawn: tuple[int, ...]) -> int:
        a, b = PAIRS[self.index[key]]
        rows = (self.g == a) | (self.g == b)
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=spawn))
        res = permutation_test(
            self.y[rows],
            self.yhat[rows],
            self.g[rows] == a,
            metric="positive_rate",
            n_permutations=n,
            seed=rng,
        )
        return int(res.n_extreme)

    def first(self, key: str, n: int) -> int:
        return self._count(key, n, (self.index[key],))

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        return self._count(key, batch, (self.index[key], start))


def null_audit(seed: int, first: int, n_rows: int = 1500) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, GROUPS, n_rows)
    y = (rng.random(n_rows) < 0.4).astype(int)
    yhat = np.where(rng.random(n_rows) < 0.75, y, 1 - y)
    a, b = np.asarray(PAIRS).T
    z_all = []
    for mask in (np.ones(n_rows, bool), y == 1, y == 0):
        k = np.bincount(g[mask], weights=yhat[mask], minlength=GROUPS)
        n = np.bincount(g[mask], minlength=GROUPS).astype(float)
        z_all.append(two_proportion_p(k[a], n[a], k[b], n[b]))
    rs = PermutationResampler(y, yhat, g, seed)
    exact = [
        FamilyTest(f"z{m}{i}", pvalue=float(p)) for m in (1, 2) for i, p in enumerate(z_all[m])
    ]
    mc = [
        FamilyTest(k, parts=(MonteCarloPart("permutation", rs.first(k, first), first),))
        for k in rs.index
    ]
    out: dict[str, float] = {}
    for proc in ("holm", "bh"):
        try:
            res = decide_family(exact + mc, ALPHA, proc, ResamplingSettings(), rs)
        except ValueError:
            # an earlier decide_family raised when an exact test was left open by a Monte-Carlo
            # test at the cap (tests/test_decisions.py::test_exact_test_left_open_...); such a
            # dataset is counted apart and left out of the rates
            out[f"{proc}_crash"] = True
            continue
        out[f"{proc}_crash"] = False
        out[f"{proc}_reject"] = res.count("reject") > 0
        out[f"{proc}_undetermined"] = res.count("undetermined") > 0
        out[f"{proc}_drawn"] = res.resamples_drawn
        point = [t.pvalue for t in exact] + [
            (t.parts[0].exceedances + 1) / (t.parts[0].resamples + 1) for t in mc
        ]
        out[f"{proc}_fixed"] = bool(np.any(adjust_pvalues(point, proc) <= ALPHA))
        out[f"{proc}_z"] = bool(np.any(adjust_pvalues(np.concatenate(z_all), proc) <= ALPHA))
    return out


def fwer_table(datasets: int, first: int) -> list[str]:
    out = [null_audit(seed, first) for seed in range(datasets)]
    rows = [
        f"Global null: 1,500 rows, 5 groups (uniform), label ~ Bernoulli(0.4), prediction = label "
        f"with probability 0.75; 30 tests (10 positive-rate permutation tests starting at "
        f"{first} permutations, studentized, all rows; 20 TPR/FPR pooled z-tests); ε = 1e-3, cap "
        f"99,999; {datasets:,} datasets. Under the global null every rejection is false, so "
        "P(any rejection) is the family-wise error (and, for BH, the FDR).",
        "",
        "| procedure | P(any rejection), decide_family (SE) | fixed-n point p-values (SE) "
        "| all 30 as z-tests (SE) | datasets with an undetermined test | datasets that drew "
        "more | mean permutations drawn | datasets where decide_family raised (left out) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    crashes = 0
    for proc in ("holm", "bh"):
        ok = [o for o in out if not o[f"{proc}_crash"]]
        crashes += datasets - len(ok)
        n_ok = len(ok)
        col = {k: float(np.mean([o[f"{proc}_{k}"] for o in ok])) for k in (
            "reject", "fixed", "z", "undetermined")}  # fmt: skip
        drew = float(np.mean([o[f"{proc}_drawn"] > 0 for o in ok]))
        drawn = float(np.mean([o[f"{proc}_drawn"] for o in ok]))
        rows.append(
            f"| {proc} | {col['reject']:.4f} ({mc_se(col['reject'], n_ok):.4f}) | "
            f"{col['fixed']:.4f} ({mc_se(col['fixed'], n_ok):.4f}) | "
            f"{col['z']:.4f} ({mc_se(col['z'], n_ok):.4f}) | {col['undetermined']:.4f} | "
            f"{drew:.3f} | {drawn:,.0f} | {datasets - n_ok} |"
        )
        print(rows[-1], flush=True)
    rows.append("")
    if crashes:
        rows += [
            "Datasets where ``decide_family`` raised are left out of the rates (an earlier "
            "version raised ``ValueError: zero-size array to reduction operation maximum`` when "
            "an exact test's decision was left open by a Monte-Carlo test that reached the cap).",
            "",
        ]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    ap.add_argument("--risk-runs", type=int, default=None)
    ap.add_argument("--work-runs", type=int, default=None)
    ap.add_argument("--fixed-runs", type=int, default=None)
    ap.add_argument("--datasets", type=int, default=None)
    args = ap.parse_args()
    q = args.quick
    risk_n = args.risk_runs or (100 if q else 1000)
    work_n = args.work_runs or (10 if q else 100)
    fixed_n = args.fixed_runs or (2000 if q else 10_000)
    data_n = args.datasets or (300 if q else 4000)
    t0 = time.perf_counter()
    cmd = (
        ".venv/bin/python benchmarks/decisions_simulation.py"
        + (" --quick" if q else "")
        + f" --risk-runs {risk_n} --work-runs {work_n} --fixed-runs {fixed_n} --datasets {data_n}"
    )
    sections = [
        ("## 1. Resampling risk on borderline mixed families (item c)", lambda: risk_table(risk_n)),
        ("## 2. Work against a fixed number of resamples (item d)",
         lambda: work_table(work_n, fixed_n)),
        ("## 3. Family-wise error of a whole audit under the global null (item a)",
         lambda: fwer_table(data_n, 99)),
    ]  # fmt: skip
    lines = [
        "# Audit decisions on a mixed family: resampling risk, work and family-wise error",
        "",
        f"Date: {datetime.now(UTC).isoformat(timespec='seconds')}  ",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPU(s), numpy {np.__version__}  ",
        f"Command: `{cmd}`  ",
        f"Defaults of ``ResamplingSettings``: {ResamplingSettings()}",
        "",
        "Numbers in parentheses are Monte-Carlo standard errors: √(r(1 − r)/N) for a rate r "
        "over N runs, SD/√N for a mean.",
        "",
    ]
    for title, build in sections:
        s0 = time.perf_counter()
        lines += [title, "", *build(), f"({time.perf_counter() - s0:.0f} s)", ""]
    lines += [
        f"Run time: {time.perf_counter() - t0:.0f} s (load average at the end "
        f"{os.getloadavg()[0]:.1f}; other jobs may share the cores).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "decisions_simulation.md").write_text(text)


if __name__ == "__main__":
    main()
