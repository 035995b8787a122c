"""fairengine.sequential_mc: MMCTest (Gandy & Hahn 2014) checked against known truth.

Exceedance counts are drawn as Binomial(batch, p_i) with the ideal p-values p_i known, so the
decisions of the procedure on the ideal p-values (``adjust_pvalues(p) <= alpha``) are the truth.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import binom
from statsmodels.stats.proportion import proportion_confint

from fairengine.errors import FairEngineError
from fairengine.multiplicity import adjust_pvalues
from fairengine.sequential_mc import (
    SequentialMonteCarloError,
    SequentialSpec,
    besag_clifford_pvalue,
    clopper_pearson,
    critical_values,
    sequential_decisions,
)


def binomial_draw(p: np.ndarray, rng: np.random.Generator):
    """Independent tests: S_i ~ Binomial(batch, p_i)."""
    return lambda idx, batch: rng.binomial(batch, p[idx])


def comonotone_draw(p: np.ndarray, rng: np.random.Generator):
    """Maximally dependent tests (as when tests share their permutations): one uniform per
    resample for all tests, exceedance of test i iff U < p_i."""

    def draw(idx: np.ndarray, batch: int) -> np.ndarray:
        u = rng.random(batch)
        return (u[None, :] < p[idx, None]).sum(axis=1)

    return draw


def truth(p: np.ndarray, procedure: str, alpha: float = 0.05) -> np.ndarray:
    return adjust_pvalues(p, procedure) <= alpha


def wrong_decision(decisions: tuple[str, ...], true_reject: np.ndarray) -> bool:
    d = np.asarray(decisions)
    return bool(np.any(((d == "reject") & ~true_reject) | ((d == "fail_to_reject") & true_reject)))


# --- Building blocks -----------------------------------------------------------------------


def test_schedule_and_spending_sum_to_cap_and_risk() -> None:
    spec = SequentialSpec(first_batch=99, growth=2.0, max_resamples=99_999, risk=1e-3)
    sched = spec.schedule()
    assert sched[0] == 99 and sched[-1] == 99_999
    assert np.all(np.diff(sched)[:-1] == 99 * 2 ** np.arange(1, sched.size - 1))
    levels = spec.look_levels(37)
    assert np.all(levels > 0)
    assert levels.sum() == pytest.approx(1e-3 / 37, rel=1e-12)
    rho = sched / (sched + 1000.0)
    assert levels[0] / levels[1] == pytest.approx(rho[0] / (rho[1] - rho[0]), rel=1e-12)


@pytest.mark.parametrize("s,n", [(0, 10), (3, 10), (10, 10), (17, 4000), (0, 99_999)])
def test_clopper_pearson_matches_statsmodels_beta_interval(s: int, n: int) -> None:
    err = 1e-4
    low, high = clopper_pearson(np.array([s]), np.array([n]), err)
    ref_low, ref_high = proportion_confint(s, n, alpha=err, method="beta")
    assert low[0] == pytest.approx(ref_low, abs=1e-12)
    assert high[0] == pytest.approx(ref_high, abs=1e-12)


def test_critical_values_are_holm_and_bh_thresholds() -> None:
    """With the others fixed, Holm's τ for a lone small p is α/m, and α/(m−1) for each of two
    small ones (raising one above the other makes it second); BH's for the k-th is kα/m when
    the k−1 smaller are rejected and the larger ones are far above their thresholds."""
    lone = critical_values(np.array([1e-6, 0.5, 0.9, 0.95]), np.array([0]), 0.05, "holm")
    assert lone == pytest.approx([0.05 / 4], rel=1e-9)
    p = np.array([1e-6, 2e-6, 0.5, 0.9])
    tau_holm = critical_values(p, np.array([0, 1]), 0.05, "holm")
    assert tau_holm == pytest.approx([0.05 / 3, 0.05 / 3], rel=1e-9)
    tau_bh = critical_values(p, np.array([2]), 0.05, "bh")
    assert tau_bh == pytest.approx([3 * 0.05 / 4], rel=1e-9)


# --- (1) The resampling risk is bounded ----------------------------------------------------

# Borderline p-vectors (truth in comments). Holm m=5 thresholds 0.01, 0.0125, …; BH m=6
# thresholds jα/6 = 0.0083, 0.0167, 0.025, 0.0333, 0.0417, 0.05.
RISK_CASES = [
    ("holm", [0.008, 0.014, 0.02, 0.03, 0.5], "independent"),  # rejects {0}
    ("bh", [0.001, 0.009, 0.02, 0.034, 0.045, 0.3], "independent"),  # rejects {0, 1, 2}
    ("bh", [0.0166, 0.0335, 0.049], "independent"),  # step-up: rejects all three
    ("holm", [0.0505], "independent"),  # 1 % above α: not rejected
    ("holm", [0.0165, 0.0252, 0.9], "comonotone"),  # rejects {0}; 0.0252 vs α/2
]


@pytest.mark.slow
def test_wrong_decision_rate_is_within_the_risk_bound() -> None:
    """MMCTest's guarantee (Gandy & Hahn 2014, 2016): P(a settled decision differs from the
    procedure on the ideal p-values) ≤ ε. With ε = 0.05 and R = 160 runs per vector (N = 800),
    the number of runs with a wrong decision is stochastically ≤ Binomial(N, 0.05); we fail when
    that bound makes the observed count implausible (one-sided p < 0.001). The vectors are hard:
    the fixed B = 1999 decisions (p̂ = (S+1)/2000) on the same vectors are wrong in ≥ 20 % of the
    runs, and dropping the spending over tests and looks (level ε per interval) fails this test
    (63 wrong of 800 in our run)."""
    rng = np.random.default_rng(2014)
    risk, reps = 0.05, 160
    wrong = fixed_wrong = undetermined = runs = 0
    for procedure, pv, dependence in RISK_CASES:
        p = np.asarray(pv)
        spec = SequentialSpec(procedure=procedure, risk=risk)
        true_reject = truth(p, procedure)
        draw = (binomial_draw if dependence == "independent" else comonotone_draw)(p, rng)
        for _ in range(reps):
            res = sequential_decisions(draw, p.size, spec)
            wrong += wrong_decision(res.decisions, true_reject)
            undetermined += not res.all_settled
            s = rng.binomial(1999, p)
            fixed_wrong += bool(np.any(truth((s + 1) / 2000, procedure) != true_reject))
            runs += 1
    assert binom.sf(wrong - 1, runs, risk) >= 1e-3, (wrong, runs)
    assert fixed_wrong / runs >= 0.2, fixed_wrong / runs
    assert undetermined > 0  # the near-threshold vectors do reach the cap undecided


# --- (2) Clear-cut tests stop early ---------------------------------------------------------


@pytest.mark.parametrize("m", [1, 4, 20])
def test_p_zero_stops_at_the_first_look_whose_upper_bound_clears_holm(m: int) -> None:
    """p = 0 gives S = 0 always, so U_j = 1 − (a_j/2)^(1/n_j) (Clopper–Pearson) is
    deterministic; with all m tests at p = 0 Holm needs U ≤ α/m. The run must stop exactly at
    the first look where that holds (≈ m·log(2/a)/α resamples; the 2nd look for m = 1)."""
    spec = SequentialSpec()
    sched, levels = spec.schedule(), spec.look_levels(m)
    upper = 1 - (levels / 2) ** (1 / sched)
    first = int(np.argmax(upper <= 0.05 / m))
    res = sequential_decisions(lambda idx, b: np.zeros(idx.size, dtype=int), m, spec)
    assert res.decisions == ("reject",) * m
    assert np.all(res.resamples == sched[first])
    assert len(res.open_per_look) == first + 1
    if m == 1:
        assert first == 1  # 297 resamples


def test_large_p_is_settled_at_the_first_batch() -> None:
    rng = np.random.default_rng(1)
    p = np.array([0.9, 0.6, 0.3, 0.0])
    res = sequential_decisions(binomial_draw(p, rng), 4, SequentialSpec())
    assert res.decisions[:3] == ("fail_to_reject",) * 3
    assert np.all(res.resamples[:3] == 99)
    assert res.decisions[3] == "reject"


# --- (3) A p-value on its threshold stays undetermined -------------------------------------


def test_p_on_the_threshold_is_undetermined_at_the_cap() -> None:
    """Holm, m = 2, p = (0, α/1): the second test's threshold is exactly α, so no interval can
    exclude it; it is reported undetermined (not "fail_to_reject") after the cap, with a
    resamples-needed estimate beyond the cap. The p = 0 test is settled long before."""
    rng = np.random.default_rng(3)
    p = np.array([0.0, 0.05])
    spec = SequentialSpec(max_resamples=20_000)
    res = sequential_decisions(binomial_draw(p, rng), 2, spec)
    assert res.decisions == ("reject", "undetermined")
    assert res.resamples[1] == 20_000 and res.resamples[0] < 20_000
    assert math.isnan(res.resamples_needed_estimate[0])
    assert res.resamples_needed_estimate[1] > 20_000
    assert res.ci_low[1] <= 0.05 <= res.ci_high[1]
    payload = json.dumps(res.to_dict(), allow_nan=False)
    assert '"undetermined"' in payload and '"resamples": 20000' in payload


# --- (4) Work versus a fixed number of resamples -------------------------------------------


def test_realistic_audit_costs_under_half_of_an_equally_reliable_fixed_b() -> None:
    """100 tests: 10 with p = 1e-6, 85 null p ~ U(0, 1), 5 borderline around Holm's ≈ 5e-4.
    The fixed B that reproduces the ideal Holm decisions in ≥ 99.9 % of 2000 simulated audits
    (found on a grid) costs 100·B resamples; the sequential run (ε = 1e-3) must cost less than
    half of that, and none of its settled decisions may be wrong. The audit default B = 1999
    reproduces them far less often (cannot resolve p below 1/2000 after Holm)."""
    rng = np.random.default_rng(2014)
    p = np.r_[np.full(10, 1e-6), rng.uniform(size=85), [1e-4, 1.5e-4, 1.5e-3, 2e-3, 3e-3]]
    true_reject = truth(p, "holm")
    totals = []
    for _ in range(5):
        res = sequential_decisions(binomial_draw(p, rng), p.size, SequentialSpec())
        assert not wrong_decision(res.decisions, true_reject)
        assert sum(d == "undetermined" for d in res.decisions) <= 2
        batches = np.diff(np.r_[0, res.spec.schedule()])[: len(res.open_per_look)]
        assert res.total_resamples == int(np.dot(res.open_per_look, batches))
        totals.append(res.total_resamples)

    def agreement(b: int) -> float:
        s = rng.binomial(b, np.broadcast_to(p, (2000, p.size)))
        adj = np.apply_along_axis(adjust_pvalues, 1, (s + 1) / (b + 1), "holm")
        return float(np.mean(np.all((adj <= 0.05) == true_reject, axis=1)))

    assert agreement(1999) < 0.8
    fixed_b = next(b for b in (4999, 9999, 19_999, 49_999, 99_999) if agreement(b) >= 0.999)
    assert np.mean(totals) < 0.5 * p.size * fixed_b, (np.mean(totals), fixed_b)


def test_settled_tests_are_never_drawn_again() -> None:
    rng = np.random.default_rng(5)
    p = np.r_[0.0, 0.8, 0.004, 0.011, rng.uniform(size=6)]
    calls: list[np.ndarray] = []
    inner = binomial_draw(p, rng)

    def draw(idx: np.ndarray, batch: int) -> np.ndarray:
        calls.append(idx)
        return inner(idx, batch)

    sequential_decisions(draw, p.size, SequentialSpec(procedure="bh"))
    for before, after in itertools.pairwise(calls):
        assert set(after) <= set(before)


# --- (5) Agreement with fairengine.multiplicity when all are settled -----------------------


@pytest.mark.parametrize("procedure", ["holm", "bh", "none"])
def test_settled_decisions_equal_adjust_pvalues_on_the_true_p(procedure: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(5):
        p = np.r_[rng.uniform(0, 1e-4, size=8), rng.uniform(0.1, 1, size=22)]
        rng.shuffle(p)
        res = sequential_decisions(
            binomial_draw(p, rng), p.size, SequentialSpec(procedure=procedure)
        )
        assert res.all_settled
        expected = np.where(truth(p, procedure), "reject", "fail_to_reject")
        assert res.decisions == tuple(expected)
        assert np.all((res.ci_low <= p) & (p <= res.ci_high))
        assert np.allclose(res.pvalue_estimate, (res.exceedances + 1) / (res.resamples + 1))


# --- Besag & Clifford (1991) ---------------------------------------------------------------


def test_besag_clifford_pvalue_is_exact_under_the_null() -> None:
    """Continuous statistic under H0: each resample exceeds with probability U ~ U(0, 1). The
    sequential p-value with h = 10, N = 199 has P(p ≤ x) = x at x = 0.05 (= 10/200) and 0.1
    (= 10/100); 3000 runs, SE ≈ 0.004 and 0.0055, bound 4 SE. It stops early most of the time."""
    rng = np.random.default_rng(1991)
    runs = 3000
    pv = np.empty(runs)
    used = np.empty(runs)
    for r in range(runs):
        u = rng.random()
        res = besag_clifford_pvalue(lambda b, u=u: rng.random(b) < u, h=10, max_resamples=199)
        pv[r], used[r] = res.pvalue, res.resamples
    for x in (0.05, 0.1):
        assert abs(np.mean(pv <= x + 1e-12) - x) <= 4 * math.sqrt(x * (1 - x) / runs)
    assert used.mean() < 0.5 * 199


def test_besag_clifford_without_early_stop_is_the_fixed_n_pvalue() -> None:
    seq = iter([np.array([True, False, False]), np.array([False, True])])
    res = besag_clifford_pvalue(lambda b: next(seq)[:b], h=10, max_resamples=5, batch=3)
    assert (res.pvalue, res.exceedances, res.resamples, res.stopped_early) == (3 / 6, 2, 5, False)
    res = besag_clifford_pvalue(lambda b: np.ones(b, dtype=bool), h=2, max_resamples=50, batch=8)
    assert (res.pvalue, res.resamples, res.resamples_drawn) == (1.0, 2, 8)


# --- (6) Input validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": 0}, "alpha"),
        ({"procedure": "bonferroni"}, "procedure"),
        ({"risk": 0.0}, "risk"),
        ({"risk": True}, "risk"),
        ({"first_batch": 0}, "first_batch"),
        ({"first_batch": 9.5}, "first_batch"),
        ({"growth": 0.5}, "growth"),
        ({"max_resamples": 50}, "max_resamples"),
        ({"spending_k": -1.0}, "spending_k"),
    ],
)
def test_spec_errors_name_the_parameter(kwargs: dict, name: str) -> None:
    with pytest.raises(SequentialMonteCarloError, match=name) as info:
        SequentialSpec(**kwargs)
    assert isinstance(info.value, FairEngineError)


@pytest.mark.parametrize(
    "draw,what",
    [
        (lambda idx, b: np.zeros(idx.size + 1, dtype=int), "shape"),
        (lambda idx, b: np.full(idx.size, -1), r"\[0, batch"),
        (lambda idx, b: np.full(idx.size, b + 1), r"\[0, batch"),
        (lambda idx, b: np.full(idx.size, 0.5), "whole-number"),
        (lambda idx, b: np.zeros(idx.size, dtype=bool), "integer"),
    ],
)
def test_bad_draw_results_are_reported(draw, what: str) -> None:
    with pytest.raises(SequentialMonteCarloError, match=f"draw .*{what}"):
        sequential_decisions(draw, 3)


def test_bad_call_arguments_are_reported() -> None:
    ok = lambda idx, b: np.zeros(idx.size, dtype=int)  # noqa: E731
    with pytest.raises(SequentialMonteCarloError, match="n_tests"):
        sequential_decisions(ok, 0)
    with pytest.raises(SequentialMonteCarloError, match="spec"):
        sequential_decisions(ok, 2, spec={"alpha": 0.05})  # type: ignore[arg-type]
    with pytest.raises(SequentialMonteCarloError, match="draw"):
        sequential_decisions("not callable", 2)  # type: ignore[arg-type]
    with pytest.raises(SequentialMonteCarloError, match="h "):
        besag_clifford_pvalue(lambda b: np.zeros(b, dtype=bool), h=0)
    with pytest.raises(SequentialMonteCarloError, match="draw"):
        besag_clifford_pvalue(lambda b: np.zeros(b, dtype=int), h=2)
