"""fairengine.decisions: the audit's MMCTest over a mixed family, checked against known truth.

Monte-Carlo p-values are simulated with their *ideal* p-values known (exceedances drawn as
Binomial(batch, p), or from real permutations of simulated data), so the decision of the
procedure on the ideal p-values (``adjust_pvalues(p) <= alpha``) is the truth. Statistical tests
state what they check, size their runs to the Monte-Carlo error and print what they measured in
their assertion messages. The full-size simulations are ``benchmarks/decisions_simulation.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import zlib
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom, norm

from fairengine.decisions import (
    DecisionSettingsError,
    FamilyResult,
    FamilyTest,
    MonteCarloPart,
    ResamplingSettings,
    decide_family,
)
from fairengine.errors import FairEngineError
from fairengine.multiplicity import adjust_pvalues
from fairengine.permutation.two_group import permutation_test
from fairengine.results import (
    AuditResult,
    Finding,
    Interval,
    MethodResult,
    ResamplingPart,
    gap_question,
)
from fairengine.verdict import finalize_audit

ALPHA = 0.05


# --- Simulated resamplers ----------------------------------------------------------------------


class BinomialResampler:
    """Independent resamples: a batch of part ``name`` of test ``key`` has
    Binomial(batch, p[key][name]) exceedances (one shared, seeded generator)."""

    def __init__(self, p: dict[str, dict[str, float]], rng: np.random.Generator) -> None:
        self.p, self.rng = p, rng

    def can_extend(self, key: str) -> bool:
        return key in self.p

    def first(self, key: str, name: str, n: int) -> int:
        return int(self.rng.binomial(n, self.p[key][name]))

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        return int(self.rng.binomial(batch, self.p[key][part]))


class ComonotoneResampler(BinomialResampler):
    """Maximally dependent tests (as when every test reuses the same permutations): resample r
    has one uniform U_r shared by all tests and parts, an exceedance of a part with ideal p iff
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


class KeyedResampler(BinomialResampler):
    """Deterministic: each (key, part, start) batch draws from its own SeedSequence."""

    def _rng(self, key: str, part: str, start: int) -> np.random.Generator:
        tag = zlib.crc32(f"{key}/{part}".encode())
        return np.random.default_rng(np.random.SeedSequence(7, spawn_key=(tag, start)))

    def first(self, key: str, name: str, n: int) -> int:
        return int(self._rng(key, name, 0).binomial(n, self.p[key][name]))

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        return int(self._rng(key, part, start).binomial(batch, self.p[key][part]))


def mixed_family(
    exact: list[float],
    mc: dict[str, dict[str, float]],
    first: dict[str, int],
    resampler: BinomialResampler,
) -> list[FamilyTest]:
    """Exact tests ``e0, e1, …`` then Monte-Carlo tests whose parts start with ``first[key]``
    resamples drawn by ``resampler`` (as the method itself would have drawn them)."""
    tests = [FamilyTest(f"e{i}", pvalue=float(v)) for i, v in enumerate(exact)]
    for key, parts in mc.items():
        n = first[key]
        tests.append(
            FamilyTest(
                key,
                parts=tuple(
                    MonteCarloPart(name, resampler.first(key, name, n), n) for name in parts
                ),
            )
        )
    return tests


def ideal_pvalues(exact: list[float], mc: dict[str, dict[str, float]]) -> np.ndarray:
    return np.r_[exact, [max(parts.values()) for parts in mc.values()]]


def wrong_decision(result: FamilyResult, true_reject: np.ndarray) -> bool:
    """Whether a settled decision differs from the procedure on the ideal p-values."""
    d = np.asarray([x.decision for x in result.decisions])
    return bool(np.any(((d == "reject") & ~true_reject) | ((d == "fail_to_reject") & true_reject)))


def decision_names(result: FamilyResult) -> tuple[str, ...]:
    return tuple(d.decision for d in result.decisions)


# --- (1) Closed forms and structure ------------------------------------------------------------


@pytest.mark.parametrize("procedure", ["holm", "bh", "none"])
def test_exact_only_family_is_adjust_pvalues(procedure: str) -> None:
    """With exact p-values only, the decisions and adjusted p-values are those of
    :func:`adjust_pvalues` (ties and a p-value exactly on a Holm/BH threshold included), the
    intervals are points, and nothing is drawn."""
    rng = np.random.default_rng(1)
    p = np.r_[rng.uniform(0, 0.01, 8), rng.uniform(size=12), [0.0, 1.0, 0.05 / 24, 0.05 / 24]]
    rng.shuffle(p)
    res = decide_family(
        [FamilyTest(f"t{i}", pvalue=float(v)) for i, v in enumerate(p)], ALPHA, procedure
    )
    adj = adjust_pvalues(p, procedure)
    assert decision_names(res) == tuple(np.where(adj <= ALPHA, "reject", "fail_to_reject"))
    assert np.array_equal([d.adjusted_pvalue for d in res.decisions], adj)
    assert np.array_equal([d.pvalue for d in res.decisions], p)
    assert all(d.pvalue_low == d.pvalue_high == d.pvalue for d in res.decisions)
    assert all(d.resamples_needed is None and d.parts == () for d in res.decisions)
    assert (res.resamples_drawn, res.looks, res.open_per_look) == (0, 0, ())
    assert 0 < res.count("reject") < p.size
    assert decide_family([], ALPHA, procedure).decisions == ()


def test_monte_carlo_without_resampler_is_undetermined_not_fail_to_reject() -> None:
    """S = 0 of n = 49 in a Holm family of 13 (12 exact p ≥ 0.2): p̂ = 1/50 and its Holm-adjusted
    value 13/50 = 0.26 would read "not rejected" at a fixed n, yet the ideal p may be ≈ 0. The
    Clopper–Pearson interval at ε = 1e-3 is [0, 1 − (ε/2)^(1/49)] ≈ [0, 0.144], which straddles
    the critical value α/13, so the test is undetermined, and settling it needs the least n with
    1 − (ε/2)^(1/n) ≤ α/13 (≈ 1,973 resamples). A resampler that can draw more settles it."""
    exact = list(np.linspace(0.2, 0.95, 12))
    tests = [FamilyTest(f"e{i}", pvalue=float(v)) for i, v in enumerate(exact)]
    tests.append(FamilyTest("mc", parts=(MonteCarloPart("permutation", 0, 49),)))
    res = decide_family(tests, ALPHA, "holm")
    d = res.decisions[-1]
    assert d.decision == "undetermined", d
    assert d.pvalue == pytest.approx(1 / 50) and d.adjusted_pvalue == pytest.approx(13 / 50)
    eps = ResamplingSettings().risk
    assert d.pvalue_low == 0.0
    assert d.pvalue_high == pytest.approx(1 - (eps / 2) ** (1 / 49), rel=1e-9)
    assert d.resamples == 49 and res.resamples_drawn == 0
    needed = math.log(eps / 2) / math.log(1 - ALPHA / 13)
    assert d.resamples_needed is not None and math.isfinite(d.resamples_needed)
    assert d.resamples_needed > 49
    assert abs(d.resamples_needed - math.ceil(needed)) <= 1, (d.resamples_needed, needed)
    assert all(x.decision == "fail_to_reject" for x in res.decisions[:-1])
    # the same test with a resampler whose permutations never exceed (ideal p = 0) is rejected
    more = decide_family(
        tests,
        ALPHA,
        "holm",
        resampler=BinomialResampler({"mc": {"permutation": 0.0}}, np.random.default_rng(0)),
    )
    assert more.decisions[-1].decision == "reject"
    assert more.decisions[-1].resamples == 49 + more.resamples_drawn > 49
    assert more.decisions[-1].pvalue_high <= ALPHA / 13


class CappedResampler(BinomialResampler):
    """A :class:`BinomialResampler` whose tests may reach at most ``cap`` resamples (a
    :class:`fairengine.decisions.BoundedResampler`, like FlipTest's refits); it records every
    batch it draws."""

    def __init__(self, p, rng, cap: int) -> None:
        super().__init__(p, rng)
        self.cap = cap
        self.batches: list[tuple[str, str, int, int]] = []

    def max_resamples(self, key: str) -> int | None:
        return self.cap

    def cap_setting(self, key: str) -> str:
        return "methods.toy.max_refits"

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        self.batches.append((key, part, start, batch))
        return super().draw(key, part, start, batch)


def test_a_test_that_cannot_be_certified_within_its_cap_draws_nothing() -> None:
    """Holm over 13 tests (12 exact p >= 0.2): a strong Monte-Carlo test at S = 0 of 49 needs
    about 1,973 resamples to be certified below α/13 (the test above). Under a cap of 500 even
    500 resamples without an exceedance cannot certify it, so none is drawn and it is
    undetermined with its cap and what would settle it; under a cap of 5,000 it is drawn and
    rejected. A weak test (ideal p = 0.04, S = 2 of 49: open, its interval holds α/13) that
    cannot be rejected at the cap either is still drawn, because more resamples settle it as
    not rejected."""
    exact = list(np.linspace(0.2, 0.95, 12))
    tests = [FamilyTest(f"e{i}", pvalue=float(v)) for i, v in enumerate(exact)]
    strong = FamilyTest("strong", parts=(MonteCarloPart("permutation", 0, 49),))
    weak = FamilyTest("weak", parts=(MonteCarloPart("permutation", 2, 49),))
    p = {"strong": {"permutation": 0.0}, "weak": {"permutation": 0.04}}
    alone = decide_family([*tests, strong, weak], ALPHA, "holm")
    assert [d.decision for d in alone.decisions[-2:]] == ["undetermined", "undetermined"]
    rs = CappedResampler(p, np.random.default_rng(1), cap=500)
    res = decide_family([*tests, strong, weak], ALPHA, "holm", resampler=rs)
    d_strong, d_weak = res.decisions[-2:]
    assert d_strong.decision == "undetermined" and d_strong.resamples == 49
    assert d_strong.resample_cap == 500 and d_strong.cap_setting == "methods.toy.max_refits"
    assert d_strong.resamples_needed is not None and d_strong.resamples_needed > 500
    assert not [b for b in rs.batches if b[0] == "strong"], rs.batches
    assert d_weak.decision == "fail_to_reject" and d_weak.resamples > 49
    assert all(b[2] + b[3] <= 500 for b in rs.batches)
    roomy = CappedResampler(p, np.random.default_rng(1), cap=5_000)
    res = decide_family([*tests, strong, weak], ALPHA, "holm", resampler=roomy)
    assert res.decisions[-2].decision == "reject"
    assert 1_900 < res.decisions[-2].resamples <= 5_000


def test_cap_words_name_the_setting_that_stopped_the_draws() -> None:
    """An undetermined Monte-Carlo finding whose settling needs more than its cap says so and
    names the setting (permutation tests: decisions.max_resamples)."""
    f = Finding(
        key="perm_tpr.g.a_b",
        label="TPR gap",
        estimate=0.3,
        pvalue=0.02,
        null_hypothesis="equal TPR",
        resampling=[ResamplingPart("permutation", 0, 49)],
    )
    m = MethodResult(method="permutation_tests", title="t", findings=[f])
    exact = [
        Finding(key=f"e{i}", label="x", estimate=0.0, pvalue=float(v), null_hypothesis="h")
        for i, v in enumerate(np.linspace(0.2, 0.95, 12))
    ]
    other = MethodResult(method="group_metrics", title="t", findings=exact)
    audit = finalize_audit(
        config={},
        dataset={},
        model={},
        validation=None,
        methods=[m, other],
        resampling=ResamplingSettings(max_resamples=500),
        resampler=CappedResampler(
            {"perm_tpr.g.a_b": {"permutation": 0.0}}, np.random.default_rng(0), cap=10**6
        ),
    )
    got = audit.methods[0].findings[0]
    assert got.decision == "undetermined"
    assert "The audit draws at most 500 (decisions.max_resamples)." in got.reading


@pytest.mark.parametrize("parts", [{"x": 0.05}, {"x": 0.05, "y": 0.01}, {"x": 0.02, "y": 0.05}])
def test_ideal_p_on_its_threshold_stays_undetermined_at_the_cap(parts: dict[str, float]) -> None:
    """Holm, m = 2: an exact p = 1e-9 and a Monte-Carlo test with ideal p = max(parts) = 0.05,
    whose Holm critical value is α itself. No interval can exclude α, so every part is drawn to
    the cap and the test is undetermined (never fail_to_reject; a wrong settled decision has
    probability ≤ ε = 1e-3 per run), with an interval covering 0.05 and a resamples-needed
    estimate beyond the cap. Five seeds."""
    cap = 20_000
    settings = ResamplingSettings(max_resamples=cap)
    for seed in range(5):
        rs = BinomialResampler({"mc": parts}, np.random.default_rng(seed))
        tests = mixed_family([1e-9], {"mc": parts}, {"mc": 999}, rs)
        res = decide_family(tests, ALPHA, "holm", settings, rs)
        d = res.decisions[1]
        assert decision_names(res) == ("reject", "undetermined"), (seed, d)
        assert all(p.resamples == cap for p in d.parts), d.parts
        assert d.pvalue_low <= 0.05 <= d.pvalue_high, d
        assert d.resamples_needed is not None and d.resamples_needed > cap, d.resamples_needed
        schedule = settings.schedule(999, True)
        assert res.looks == len(schedule) - 1 and res.open_per_look == (1,) * res.looks
        assert res.resamples_drawn == len(parts) * (cap - 999)


def test_decisions_are_deterministic_and_do_not_depend_on_the_order() -> None:
    """A deterministic resampler (each (key, part, start) batch seeded by itself) gives the same
    FamilyResult twice, and the same per-test decisions, counts and bounds when the family is
    given in the reverse order (decisions depend on the tests, not their positions)."""
    mc = {
        "a": {"x": 0.0018},
        "b": {"x": 0.0023, "y": 0.002},
        "c": {"x": 0.3},
        "d": {"x": 0.0},
        "f": {"x": 0.05},
    }
    rs = KeyedResampler(mc, np.random.default_rng(0))
    exact = [1e-7, 1e-7, 0.2, 0.5, 0.9, 0.0012, 0.04, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99]
    tests = mixed_family(exact, mc, dict.fromkeys(mc, 999), rs)
    settings = ResamplingSettings(max_resamples=30_000, risk=0.01)
    one = decide_family(tests, ALPHA, "holm", settings, rs)
    two = decide_family(tests, ALPHA, "holm", settings, KeyedResampler(mc, None))  # type: ignore[arg-type]
    assert one == two
    assert one.resamples_drawn > 0 and one.looks >= 2, one.open_per_look
    rev = decide_family(tests[::-1], ALPHA, "holm", settings, rs)
    assert {d.key: d for d in rev.decisions} == {d.key: d for d in one.decisions}
    assert rev.resamples_drawn == one.resamples_drawn


@pytest.mark.parametrize(
    "procedure,exact",
    [("holm", [0.03]), ("bh", [0.03, 0.9])],
)
def test_exact_test_left_open_by_a_monte_carlo_test_is_undetermined(
    procedure: str, exact: list[float]
) -> None:
    """An exact p = 0.03 whose decision hinges on a Monte-Carlo test (2 of 99, interval ≈
    [0.001, 0.11], no resampler): Holm m = 2 rejects it iff the Monte-Carlo p lies below it and
    is ≤ α/2; BH m = 3 iff the Monte-Carlo p is ≤ 2α/3. Its decision is open exactly when the
    Monte-Carlo one is, so both must come back undetermined (the exact one with no parts and no
    resamples-needed estimate of its own), not an exception (an earlier version raised
    ``ValueError: zero-size array to reduction operation maximum``; it crashed 6 of 4,000 BH
    audits of ``benchmarks/decisions_simulation.py``). In an audit, the exact finding is
    undetermined too and the verdict is incomplete."""
    tests = [FamilyTest(f"e{i}", pvalue=v) for i, v in enumerate(exact)]
    tests.append(FamilyTest("mc", parts=(MonteCarloPart("permutation", 2, 99),)))
    res = decide_family(tests, ALPHA, procedure)
    e, mc = res.decisions[0], res.decisions[-1]
    assert (e.decision, mc.decision) == ("undetermined", "undetermined"), res.decisions
    assert e.parts == () and e.resamples_needed is None and e.pvalue_low == e.pvalue_high == 0.03
    assert mc.resamples_needed is not None and 99 < mc.resamples_needed < math.inf
    if procedure == "holm":
        methods = _methods(ResamplingPart("permutation", 2, 99), perm_question=None)
        methods[0] = dataclasses.replace(methods[0], findings=[
            Finding(
                "dp_gap.sex.female_male", "Positive-rate gap", 0.1, None, pvalue=0.03,
                null_hypothesis="|gap| ≤ 0.02", null_kind="tolerance",
            )
        ])  # fmt: skip
        a = _audit(methods)
        assert [f.decision for f in a.findings()] == ["undetermined", "undetermined"]
        assert a.verdict.status == "incomplete" and "2 test(s) undetermined" in a.verdict.summary


def _bad_resampler(value: int):
    class Bad:
        def can_extend(self, key: str) -> bool:
            return True

        def draw(self, key: str, part: str, start: int, batch: int) -> int:
            return batch + 1 if value > 0 else -1

    return Bad()


_MC = FamilyTest("m", parts=(MonteCarloPart("permutation", 2, 99),))
_BAD_CALLS = [
    (
        "duplicate key",
        lambda: decide_family([FamilyTest("a", 0.1), FamilyTest("a", 0.2)]),
        "distinct key",
    ),
    (
        "both",
        lambda: decide_family([FamilyTest("a", 0.1, (MonteCarloPart("p", 1, 9),))]),
        "'a': give either an exact pvalue or Monte-Carlo parts",
    ),
    (
        "neither",
        lambda: decide_family([FamilyTest("a")]),
        "'a': give either an exact pvalue or Monte-Carlo parts",
    ),
    (
        "S > n",
        lambda: decide_family([FamilyTest("a", parts=(MonteCarloPart("p", 10, 9),))]),
        r"'a', part 'p': needs 0 <= exceedances <= resamples >= 1, got 10 of 9",
    ),
    (
        "S < 0",
        lambda: decide_family([FamilyTest("a", parts=(MonteCarloPart("p", -1, 9),))]),
        "exceedances <= resamples",
    ),
    (
        "n = 0",
        lambda: decide_family([FamilyTest("a", parts=(MonteCarloPart("p", 0, 0),))]),
        "resamples >= 1",
    ),
    ("p > 1", lambda: decide_family([FamilyTest("a", 1.5)]), r"'a': pvalue 1.5 outside \[0, 1\]"),
    ("p nan", lambda: decide_family([FamilyTest("a", math.nan)]), "outside"),
    ("alpha", lambda: decide_family([FamilyTest("a", 0.1)], alpha=1.0), "alpha"),
    (
        "procedure",
        lambda: decide_family([FamilyTest("a", 0.1)], procedure="bonferroni"),
        "multiplicity must be one of",
    ),
    (
        "draw > batch",
        lambda: decide_family([_MC], resampler=_bad_resampler(1)),
        r"resampler returned \d+ exceedances for a batch of \d+ \('m', part 'permutation'\)",
    ),
    (
        "draw < 0",
        lambda: decide_family([_MC], resampler=_bad_resampler(-1)),
        "resampler returned -1 exceedances",
    ),
    ("risk 0", lambda: ResamplingSettings(risk=0.0), "resampling_risk must lie in"),
    ("risk 1", lambda: ResamplingSettings(risk=1), "resampling_risk"),
    ("risk bool", lambda: ResamplingSettings(risk=True), "resampling_risk"),
    ("growth 1", lambda: ResamplingSettings(growth=1.0), r"growth must lie in \(1, 100\]"),
    ("growth big", lambda: ResamplingSettings(growth=101), "growth"),
    ("cap 0", lambda: ResamplingSettings(max_resamples=0), "max_resamples must be an integer"),
    ("cap float", lambda: ResamplingSettings(max_resamples=99.5), "max_resamples"),
    ("k 0", lambda: ResamplingSettings(spending_k=0), "spending_k must be a number > 0"),
    ("k inf", lambda: ResamplingSettings(spending_k=math.inf), "spending_k"),
]


@pytest.mark.parametrize("call,match", [c[1:] for c in _BAD_CALLS], ids=[c[0] for c in _BAD_CALLS])
def test_bad_inputs_raise_decision_settings_error_naming_the_problem(call, match: str) -> None:
    with pytest.raises(DecisionSettingsError, match=match) as info:
        call()
    assert isinstance(info.value, FairEngineError)


# --- (2) The resampling risk is bounded (item c) -----------------------------------------------

# 30 tests: 20 exact (4 tiny, 16 in [0.08, 0.95]) and 10 Monte-Carlo, three with two parts
# (p = max of the parts). Holm rejects 7 (ideal p / critical value of the Monte-Carlo tests:
# 0.72, 0.86, 0.94 rejected; 1.06, 1.20, 1.43 not); BH rejects 8 (0.56 … 0.96 rejected, the
# step-up rescuing 0.0123 > 7α/30; 1.03, 1.03, 1.12 not).
RISK_EXACT = [1e-7] * 4 + [round(float(v), 3) for v in np.linspace(0.08, 0.95, 16)]
RISK_FAMILIES = {
    "holm": [
        (0.0015, 0.0009),
        (0.0018,),
        (0.00195,),
        (0.0023, 0.0021),
        (0.0026,),
        (0.0031,),
        (0.012,),
        (0.03, 0.031),
        (0.06,),
        (0.2,),
    ],
    "bh": [
        (0.0075, 0.004),
        (0.0095,),
        (0.0123,),
        (0.0128, 0.0127),
        (0.0155,),
        (0.0172,),
        (0.0205,),
        (0.03, 0.02),
        (0.06,),
        (0.3,),
    ],
}


def risk_simulation(procedure: str, risk: float, runs: int, seed: int) -> dict[str, int]:
    """``runs`` audits of the borderline family, alternating independent and comonotone
    resampling; first n = 999 or 1999 per test. Counts runs with a wrong settled decision, with
    an undetermined test, and with a wrong decision of the fixed-n point p-values."""
    mc = {
        f"mc{j}": {f"part{k}": v for k, v in enumerate(ps)}
        for j, ps in enumerate(RISK_FAMILIES[procedure])
    }
    first = {key: (999, 1999)[j % 2] for j, key in enumerate(mc)}
    truth = adjust_pvalues(ideal_pvalues(RISK_EXACT, mc), procedure) <= ALPHA
    rng = np.random.default_rng(seed)
    out = dict.fromkeys(("wrong", "undetermined", "fixed_wrong"), 0)
    for r in range(runs):
        rs = (BinomialResampler, ComonotoneResampler)[r % 2](mc, rng)
        tests = mixed_family(RISK_EXACT, mc, first, rs)
        point = [
            t.pvalue
            if t.pvalue is not None
            else max((p.exceedances + 1) / (p.resamples + 1) for p in t.parts)
            for t in tests
        ]
        out["fixed_wrong"] += bool(np.any((adjust_pvalues(point, procedure) <= ALPHA) != truth))
        res = decide_family(tests, ALPHA, procedure, ResamplingSettings(risk=risk), rs)
        out["wrong"] += wrong_decision(res, truth)
        out["undetermined"] += res.count("undetermined") > 0
    return out


@pytest.mark.slow
def test_wrong_decision_rate_of_borderline_mixed_families_is_within_the_risk() -> None:
    """The guarantee: P(any settled decision ≠ the decision on the ideal p-values) ≤ ε. 150 Holm
    and 150 BH audits (N = 300) at ε = 0.05: the fraction with a wrong settled decision must be
    ≤ 0.05 + 3·SE, SE = √(0.05·0.95/N) = 0.0126. The families are hard: the point p-values of
    the first resamples decide wrongly in most runs, and some test reaches the cap undecided.
    At ε = 1e-3 (the default; another N = 300) the count must be plausible under
    Binomial(N, 1e-3) (one-sided p ≥ 0.001, i.e. ≤ 3 wrong runs)."""
    runs = 150
    n = 2 * runs
    at05 = [risk_simulation(proc, 0.05, runs, seed) for proc, seed in (("holm", 1), ("bh", 2))]
    wrong = sum(o["wrong"] for o in at05)
    fixed = sum(o["fixed_wrong"] for o in at05)
    undetermined = sum(o["undetermined"] for o in at05)
    bound = 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)
    measured = (
        f"eps=0.05: {wrong}/{n} runs wrong ({wrong / n:.4f}, bound {bound:.4f}); fixed-n point "
        f"p-values wrong in {fixed}/{n}; runs with an undetermined test {undetermined}/{n}"
    )
    assert wrong / n <= bound, measured
    assert fixed / n >= 0.5, measured
    assert undetermined > 0, measured
    at3 = [risk_simulation(proc, 1e-3, runs, seed) for proc, seed in (("holm", 3), ("bh", 4))]
    wrong3 = sum(o["wrong"] for o in at3)
    measured += f"; eps=1e-3: {wrong3}/{n} runs wrong ({wrong3 / n:.4f})"
    print(measured)
    assert binom.sf(wrong3 - 1, n, 1e-3) >= 1e-3, measured


# --- (3) Work against a fixed number of resamples (item d) -------------------------------------

_WORK_GRID = (999, 1999, 2999, 3999, 4999, 7499, 9999, 14_999, 19_999, 49_999, 99_999)


def fixed_b_agreement(p_mc: np.ndarray, exact: np.ndarray, b: int, rng, runs: int = 2000) -> float:
    """Fraction of ``runs`` audits whose Holm decisions with B resamples per Monte-Carlo test
    (p̂ = (S + 1)/(B + 1)) equal the decisions on the ideal p-values."""
    truth = adjust_pvalues(np.r_[p_mc, exact], "holm") <= ALPHA
    s = rng.binomial(b, np.broadcast_to(p_mc, (runs, p_mc.size)))
    full = np.c_[(s + 1) / (b + 1), np.broadcast_to(exact, (runs, exact.size))]
    adj = np.apply_along_axis(adjust_pvalues, 1, full, "holm")
    return float(np.mean(np.all((adj <= ALPHA) == truth, axis=1)))


def work_comparison(p_mc: np.ndarray, exact: np.ndarray, first: int, runs: int, seed: int):
    """Mean total resamples (all Monte-Carlo tests, first ones included) of ``runs`` sequential
    audits at the defaults (ε = 1e-3, growth 2, cap 99,999), its SE and wrong-run count; and the
    smallest B of the grid agreeing with the ideal decisions in ≥ 99 % of 2,000 audits."""
    rng = np.random.default_rng(seed)
    mc = {f"mc{i}": {"permutation": float(v)} for i, v in enumerate(p_mc)}
    truth = adjust_pvalues(np.r_[p_mc, exact], "holm") <= ALPHA
    totals, wrong = [], 0
    for _ in range(runs):
        rs = BinomialResampler(mc, rng)
        tests = [
            FamilyTest(
                k, parts=(MonteCarloPart("permutation", rs.first(k, "permutation", first), first),)
            )
            for k in mc
        ] + [FamilyTest(f"e{i}", pvalue=float(v)) for i, v in enumerate(exact)]
        res = decide_family(tests, ALPHA, "holm", ResamplingSettings(), rs)
        totals.append(sum(d.resamples for d in res.decisions))
        wrong += wrong_decision(res, truth)
    b = next(b for b in _WORK_GRID if fixed_b_agreement(p_mc, exact, b, rng) >= 0.99)
    return float(np.mean(totals)), float(np.std(totals) / math.sqrt(runs)), wrong, b


_NULL_P = np.random.default_rng(2014).uniform(size=85)
_WORK_EXACT = np.array([1e-5, 3e-4, 0.3, 0.6, 0.9])


def test_sequential_work_for_strong_tests_is_the_price_of_certifying_them() -> None:
    """Item d as specified: 100 tests, 10 Monte-Carlo with p = 1e-6, 85 Monte-Carlo null
    (p ~ U(0, 1)), 5 exact; each Monte-Carlo test starts with the method's default 1,999
    permutations. A fixed B = 3,999 already reproduces the ideal decisions in ≥ 99 % of audits
    here (with no guarantee), while the sequential scheme must *certify* each p = 1e-6 test
    below α/99 ≈ 5.05e-4 at a tiny spent error (about 30,000 resamples each). That price is
    bounded: the sequential mean total stays within 1.35x of 95·B of the smallest reliable grid
    B (measured 472,324 against 379,905: 1.24x; with spending_k = 1,000 it was 789,605), with
    no wrong settled decision."""
    p_mc = np.r_[np.full(10, 1e-6), _NULL_P]
    seq, se, wrong, b = work_comparison(p_mc, _WORK_EXACT, 1999, 10, 5)
    measured = f"sequential {seq:,.0f} (SE {se:,.0f}, wrong {wrong}) vs fixed B={b}: {95 * b:,}"
    print(measured)
    assert wrong == 0, measured
    assert seq < 1.35 * 95 * b, measured


def test_sequential_work_is_below_the_reliable_fixed_b_with_borderline_tests() -> None:
    """The same family with 5 of the 85 null tests replaced by borderline Monte-Carlo tests
    (p = 1e-4, 1.5e-4, 1.5e-3, 2e-3, 3e-3 around Holm's ≈ 5e-4), where a fixed B must be large
    to reproduce the ideal decisions: the sequential mean total (10 audits, SE printed) must be
    below 95·B of the smallest grid B agreeing in ≥ 99 % of 2,000 audits, with no wrong settled
    decision."""
    p_mc = np.r_[np.full(10, 1e-6), _NULL_P[:80], [1e-4, 1.5e-4, 1.5e-3, 2e-3, 3e-3]]
    seq, se, wrong, b = work_comparison(p_mc, _WORK_EXACT, 1999, 10, 6)
    measured = f"sequential {seq:,.0f} (SE {se:,.0f}, wrong {wrong}) vs fixed B={b}: {95 * b:,}"
    print(measured)
    assert wrong == 0, measured
    assert b >= 9999, measured
    assert seq + 3 * se < 95 * b, measured


# --- (4) The audit: one deciding test per question, the verdict, the JSON ----------------------

Q_RATE = gap_question("positive_rate", "sex", "female", "male")
STRONG_PERM = ResamplingPart("permutation", 0, 1999)


def finding(audit: AuditResult, key: str) -> Finding:
    return next(f for f in audit.findings() if f.key == key)


def _methods(
    perm: ResamplingPart = STRONG_PERM,
    extra_exact: float | None = None,
    perm_question: str | None = Q_RATE,
) -> list[MethodResult]:
    """A group_parity-like method (tolerance nulls) and a permutation-like method (zero null,
    one Monte-Carlo part), both testing the positive-rate gap of female − male."""
    gp = [
        Finding(
            "dp_gap.sex.female_male",
            "Positive-rate gap, sex: female − male",
            0.04,
            Interval(0.01, 0.07),
            pvalue=0.30,
            null_hypothesis="|gap| ≤ 0.02",
            reading="Positive rate of female minus male is +0.040.",
            question=Q_RATE,
            null_kind="tolerance",
        ),
        Finding(
            "tpr_gap.sex.female_male",
            "TPR gap, sex: female − male",
            0.01,
            Interval(-0.03, 0.05),
            pvalue=0.8,
            null_hypothesis="|gap| ≤ 0.02",
            question=gap_question("tpr", "sex", "female", "male"),
            null_kind="tolerance",
        ),
    ]
    if extra_exact is not None:
        gp.append(
            Finding(
                "fpr_gap.sex.female_male",
                "FPR gap, sex: female − male",
                0.2,
                Interval(0.1, 0.3),
                pvalue=extra_exact,
                null_hypothesis="|gap| ≤ 0.02",
                question=gap_question("fpr", "sex", "female", "male"),
                null_kind="tolerance",
            )
        )
    pt = Finding(
        "perm_positive_rate.sex.female_male",
        "Positive rate difference, sex: female − male",
        0.04,
        Interval(0.01, 0.07),
        pvalue=(perm.exceedances + 1) / (perm.resamples + 1),
        null_hypothesis="positive rate(female) = positive rate(male)",
        resampling=[perm],
        question=perm_question,
        null_kind="zero",
    )
    return [
        MethodResult("group_parity", "Group parity", findings=gp),
        MethodResult("permutation_tests", "Permutation tests", findings=[pt]),
    ]


def _audit(methods: list[MethodResult], **kwargs) -> AuditResult:
    return finalize_audit(
        config={}, dataset={}, model={}, validation=None, methods=methods, **kwargs
    )


def test_one_deciding_test_per_question_and_gap_null_flips_it() -> None:
    """Same ``gap_question``: by default the tolerance test decides and the permutation test
    (strong evidence against a zero gap: 0 of 1,999) is ``supporting``, counted neither in the
    family nor in the verdict (pass). ``gap_null="zero"`` flips the roles: the permutation test
    decides and its rejection fails the audit, read as "not zero"."""
    a = _audit(_methods())
    dp, tpr, perm = (
        finding(a, k)
        for k in (
            "dp_gap.sex.female_male",
            "tpr_gap.sex.female_male",
            "perm_positive_rate.sex.female_male",
        )
    )
    assert (dp.decision, perm.decision) == ("fail_to_reject", "supporting")
    assert perm.decided_by == dp.key and dp.decided_by is None
    assert perm.adjusted_pvalue is None and not perm.counts and dp.counts
    assert "Supporting evidence (not counted in the verdict)" in perm.reading
    assert "|gap| ≤ 0.02" in perm.reading
    assert dp.adjusted_pvalue == pytest.approx(0.6)  # Holm over the 2 deciding tests only
    assert a.verdict.status == "pass" and "None of 2 tests" in a.verdict.summary
    assert (a.decisions.n_tests, a.decisions.n_supporting, a.decisions.gap_null) == (
        2,
        1,
        "tolerance",
    )

    z = _audit(_methods(), gap_null="zero")
    dp, perm = (
        finding(z, "dp_gap.sex.female_male"),
        finding(z, "perm_positive_rate.sex.female_male"),
    )
    assert (dp.decision, perm.decision) == ("supporting", "reject")
    assert dp.decided_by == perm.key and perm.decided_by is None
    assert perm.pvalue_bounds is not None and perm.pvalue_bounds[1] <= ALPHA / 2
    assert "the difference is not zero" in perm.reading
    assert z.verdict.status == "fail"
    assert z.verdict.summary.startswith("1 of 2 tests reject") and "different from zero" in (
        z.verdict.summary
    )
    assert len(z.verdict.reasons) == 1 and "not zero" in z.verdict.reasons[0]
    assert (z.decisions.n_rejected, z.decisions.n_supporting) == (1, 1)
    assert tpr.decision == "fail_to_reject"


def test_readings_name_the_null_that_was_rejected() -> None:
    """A tolerance rejection reads "exceeds the tolerance", a zero-null rejection "not zero",
    in the finding and in the verdict's reasons, and the summary counts each kind."""
    a = _audit(_methods(extra_exact=1e-6, perm_question=None))
    fpr, perm = (
        finding(a, "fpr_gap.sex.female_male"),
        finding(a, "perm_positive_rate.sex.female_male"),
    )
    assert (fpr.decision, perm.decision) == ("reject", "reject")
    assert "the difference exceeds the tolerance (|gap| ≤ 0.02 rejected)" in fpr.reading
    assert "the difference is not zero" in perm.reading and "tolerance" not in perm.reading
    assert "2 of 4 tests reject" in a.verdict.summary
    assert re.search(r"1 beyond (its|their) tolerance", a.verdict.summary), a.verdict.summary
    assert "1 different from zero" in a.verdict.summary
    reasons = " | ".join(a.verdict.reasons)
    assert "exceeds the tolerance" in reasons and "not zero" in reasons


def test_undetermined_makes_the_verdict_incomplete_or_is_counted_beside_a_rejection() -> None:
    """A permutation test at 3 of 199 (p̂ = 0.02) in a Holm family of 3 without a resampler
    is undetermined: with no rejection the verdict is ``incomplete`` and its summary says
    "undetermined"; with a rejection it is ``fail`` and says how many are undetermined. A
    resampler that draws more (ideal p = 0) settles it."""
    a = _audit(_methods(ResamplingPart("permutation", 3, 199), perm_question=None))
    perm = finding(a, "perm_positive_rate.sex.female_male")
    assert perm.decision == "undetermined" and perm.counts
    assert (
        perm.pvalue_bounds is not None
        and perm.pvalue_bounds[0] < ALPHA / 3 < (perm.pvalue_bounds[1])
    )
    assert perm.resamples_needed is not None and perm.resamples_needed > 199
    assert "Undetermined (Monte-Carlo resolution): after 199 permutation resamples" in perm.reading
    assert a.verdict.status == "incomplete"
    assert "1 test(s) undetermined" in a.verdict.summary
    assert any("undetermined at Monte-Carlo resolution" in r for r in a.verdict.reasons)
    assert a.decisions.n_undetermined == 1

    f = _audit(_methods(ResamplingPart("permutation", 3, 199), 1e-6, perm_question=None))
    assert f.verdict.status == "fail"
    assert f.verdict.summary.endswith("1 undetermined at Monte-Carlo resolution."), f.verdict
    assert "1 of 4 tests reject" in f.verdict.summary

    rs = BinomialResampler(
        {"perm_positive_rate.sex.female_male": {"permutation": 0.0}}, np.random.default_rng(0)
    )
    s = _audit(_methods(ResamplingPart("permutation", 3, 199), perm_question=None), resampler=rs)
    perm = finding(s, "perm_positive_rate.sex.female_male")
    assert perm.decision == "reject" and s.verdict.status == "fail"
    assert perm.resampling[0].resamples == 199 + s.decisions.resamples_drawn > 199
    assert perm.resampling[0].exceedances == 3
    assert perm.pvalue == pytest.approx(4 / (perm.resampling[0].resamples + 1))
    assert s.decisions.looks >= 1


def test_audit_json_round_trip_keeps_the_decision_fields() -> None:
    """``AuditResult.from_json(to_json())`` keeps resampling parts, p-value bounds, resamples
    needed (finite and infinite), question, null kind, decided_by and the DecisionRecord."""
    for audit in (
        _audit(_methods(ResamplingPart("permutation", 3, 199), perm_question=None)),
        _audit(_methods(), gap_null="zero"),
        _audit(_methods()),
    ):
        text = audit.to_json()
        json.loads(text)
        back = AuditResult.from_json(text)
        assert back.to_dict() == audit.to_dict()
        assert back.decisions == audit.decisions
        for f in audit.findings():
            g = finding(back, f.key)
            assert (g.resampling, g.pvalue_bounds, g.resamples_needed) == (
                f.resampling,
                f.pvalue_bounds,
                f.resamples_needed,
            )
            assert (g.question, g.null_kind, g.decided_by, g.decision) == (
                f.question,
                f.null_kind,
                f.decided_by,
                f.decision,
            )
    # an undetermined test whose estimate sits on its critical value carries resamples_needed=inf
    audit = _audit(_methods(ResamplingPart("permutation", 3, 199), perm_question=None))
    key = "perm_positive_rate.sex.female_male"
    audit = dataclasses.replace(
        audit,
        methods=[
            dataclasses.replace(
                m,
                findings=[
                    dataclasses.replace(f, resamples_needed=math.inf) if f.key == key else f
                    for f in m.findings
                ],
            )
            for m in audit.methods
        ],
    )
    text = audit.to_json()
    assert '"resamples_needed": "Infinity"' in text
    back = finding(AuditResult.from_json(text), "perm_positive_rate.sex.female_male")
    assert back.resamples_needed == math.inf


# --- (5) Family-wise error of a whole audit under the global null (item a) ---------------------

GROUPS = 5
PAIRS = list(combinations(range(GROUPS), 2))


def two_proportion_p(k1: np.ndarray, n1: np.ndarray, k2: np.ndarray, n2: np.ndarray) -> np.ndarray:
    """Two-sided pooled two-proportion z-test p-values."""
    pooled = (k1 + k2) / (n1 + n2)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    z = np.divide(k1 / n1 - k2 / n2, se, out=np.zeros_like(se), where=se > 0)
    return 2 * norm.sf(np.abs(z))


class PermutationResampler:
    """Real permutations: the studentized positive-rate permutation test of a pair of groups
    (:func:`fairengine.permutation.two_group.permutation_test`), batch ``start`` of test i drawn
    from ``SeedSequence(seed, spawn_key=(i, start))`` and the first from ``(i,)``."""

    def __init__(self, y: np.ndarray, yhat: np.ndarray, g: np.ndarray, seed: int) -> None:
        self.y, self.yhat, self.g, self.seed = y, yhat, g, seed
        self.index = {f"perm{a}{b}": i for i, (a, b) in enumerate(PAIRS)}

    def can_extend(self, key: str) -> bool:
        return key in self.index

    def _count(self, key: str, n: int, spawn: tuple[int, ...]) -> int:
        a, b = PAIRS[self.index[key]]
        rows = (self.g == a) | (self.g == b)
        res = permutation_test(
            self.y[rows],
            self.yhat[rows],
            self.g[rows] == a,
            metric="positive_rate",
            n_permutations=n,
            seed=np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=spawn)),
        )
        return int(res.n_extreme)

    def first(self, key: str, n: int) -> int:
        return self._count(key, n, (self.index[key],))

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        return self._count(key, batch, (self.index[key], start))


def null_audit(seed: int, n_rows: int = 1500, first: int = 99) -> dict[str, float]:
    """One dataset under the global null (group independent of label and prediction): 30
    dependent tests (positive rate, TPR, FPR for the 10 pairs of 5 groups); the 10 positive-rate
    tests are Monte-Carlo permutation tests, the 20 TPR/FPR tests exact z-tests."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, GROUPS, n_rows)
    y = (rng.random(n_rows) < 0.4).astype(int)
    yhat = np.where(rng.random(n_rows) < 0.75, y, 1 - y)
    a, b = np.asarray(PAIRS).T

    def counts(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = np.bincount(g[mask], weights=yhat[mask], minlength=GROUPS)
        n = np.bincount(g[mask], minlength=GROUPS).astype(float)
        return k, n

    z_all = []
    for mask in (np.ones(n_rows, bool), y == 1, y == 0):
        k, n = counts(mask)
        z_all.append(two_proportion_p(k[a], n[a], k[b], n[b]))
    rs = PermutationResampler(y, yhat, g, seed)
    tests = [
        FamilyTest(f"z{m}{i}", pvalue=float(p)) for m in (1, 2) for i, p in enumerate(z_all[m])
    ]
    tests += [
        FamilyTest(k, parts=(MonteCarloPart("permutation", rs.first(k, first), first),))
        for k in rs.index
    ]
    res = decide_family(tests, ALPHA, "holm", ResamplingSettings(), rs)
    exact_only = adjust_pvalues(np.concatenate(z_all), "holm") <= ALPHA
    return {
        "reject": res.count("reject") > 0,
        "undetermined": res.count("undetermined") > 0,
        "drawn": res.resamples_drawn,
        "z_reject": bool(exact_only.any()),
    }


@pytest.mark.slow
def test_family_wise_error_under_the_global_null_with_dependent_tests() -> None:
    """Global null, 1,500 rows, 5 groups: Holm through ``decide_family`` over 30 dependent tests
    (10 permutation tests starting at 99 permutations, drawing more where open; 20 z-tests)
    must reject anything in at most 0.05 + 3·SE of 500 datasets (SE = √(0.05·0.95/500) =
    0.0097). Printed beside it: the same rate when all 30 are z-tests (Holm of
    ``adjust_pvalues``), and the permutations drawn."""
    runs = 500
    out = [null_audit(seed) for seed in range(runs)]
    fwer = float(np.mean([o["reject"] for o in out]))
    z_fwer = float(np.mean([o["z_reject"] for o in out]))
    undetermined = float(np.mean([o["undetermined"] for o in out]))
    drawn = float(np.mean([o["drawn"] for o in out]))
    bound = 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
    measured = (
        f"FWER {fwer:.4f} (bound {bound:.4f}) over {runs} datasets; all-z Holm FWER {z_fwer:.4f}; "
        f"datasets with an undetermined test {undetermined:.4f}; mean permutations drawn "
        f"{drawn:,.0f}; datasets that drew more {np.mean([o['drawn'] > 0 for o in out]):.3f}"
    )
    print(measured)
    assert fwer <= bound, measured
    assert any(o["drawn"] > 0 for o in out), measured  # the resampler path is exercised


def test_threaded_draws_equal_sequential_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """One look's batches are drawn on threads (fairengine.decisions.DRAW_WORKERS); with a
    resampler whose batches are their own streams, the result equals drawing them one by one,
    whatever order the threads finish in."""
    import time

    import fairengine.decisions as decisions

    mc = {"a": {"x": 0.0018}, "b": {"x": 0.0023, "y": 0.002}, "c": {"x": 0.04}, "d": {"x": 0.0}}

    class Jittery(KeyedResampler):
        def draw(self, key: str, part: str, start: int, batch: int) -> int:
            time.sleep(0.002 * (zlib.crc32(f"{key}{start}".encode()) % 5))
            return super().draw(key, part, start, batch)

    rs = Jittery(mc, np.random.default_rng(0))
    tests = mixed_family([1e-7, 0.2, 0.0012, 0.04], mc, dict.fromkeys(mc, 999), rs)
    settings = ResamplingSettings(max_resamples=30_000, risk=0.01)
    monkeypatch.setattr(decisions, "DRAW_WORKERS", 4)
    monkeypatch.setattr(decisions, "_idle_cores", lambda: 4)  # however busy the machine is
    threaded = decide_family(tests, ALPHA, "holm", settings, rs)
    monkeypatch.setattr(decisions, "DRAW_WORKERS", 1)
    sequential = decide_family(tests, ALPHA, "holm", settings, rs)
    assert threaded == sequential
    assert threaded.resamples_drawn > 0 and max(threaded.open_per_look) >= 2


@pytest.mark.parametrize(
    ("others_busy", "own_cpu", "children_cpu", "expected"),
    [
        (0.0, 2.0, 0.0, 2),
        (0.2, 1.8, 0.0, 2),
        (0.3, 0.0, 0.0, 2),
        (1.0, 1.0, 0.0, 1),
        (1.6, 0.4, 0.0, 1),
        (2.0, 0.0, 0.0, 1),
        # the audit's worker processes (FlipTest's refits) are its own work, not others'
        (0.0, 0.4, 1.6, 2),
        (1.0, 0.2, 0.8, 1),
    ],
)
def test_idle_cores_are_those_other_processes_left_since_the_last_reading(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    others_busy: float,
    own_cpu: float,
    children_cpu: float,
    expected: int,
) -> None:
    """The drawing threads follow the cores that other processes left idle between two
    readings (/proc/stat's busy time of all cores less this process's own CPU time and its
    child processes', per second
    of wall time), not an instantaneous count of runnable threads: a quiet 2-core machine gets
    two even while the audit itself keeps both busy, a machine with one core's worth of other
    work or more gets one (never zero). Readings closer than MIN_WINDOW keep the estimate;
    no /proc/stat: every core."""
    import fairengine.decisions as decisions

    monkeypatch.setattr(decisions.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(decisions.os, "sysconf", lambda name: 100, raising=False)
    monkeypatch.setattr(decisions, "_LAST", {})
    clock = {"wall": 1000.0, "own": 50.0, "children": 7.0}
    monkeypatch.setattr(decisions.time, "monotonic", lambda: clock["wall"])
    monkeypatch.setattr(decisions.time, "process_time", lambda: clock["own"])
    monkeypatch.setattr(decisions, "_children_cpu", lambda: clock["children"])
    stat = tmp_path / "stat"

    def write(busy_ticks: int) -> None:  # user nice system idle iowait irq softirq steal
        stat.write_text(f"cpu  {busy_ticks} 0 0 500000 100 0 0 0 0 0\ncpu0 ...\n")

    write(10_000)
    assert decisions._idle_cores(stat=stat) == 2  # the first reading: no interval yet
    seconds = 10.0  # then 10 s in which others and this process used the CPU as given
    clock["wall"] += seconds
    clock["own"] += own_cpu * seconds
    clock["children"] += children_cpu * seconds
    write(10_000 + round(100 * seconds * (others_busy + own_cpu + children_cpu)))
    assert decisions._idle_cores(stat=stat) == expected
    clock["wall"] += decisions.MIN_WINDOW / 2  # too soon for a new reading: same estimate
    write(10_000 + round(100 * seconds * 2.0))
    assert decisions._idle_cores(stat=stat) == expected
    assert decisions._idle_cores(stat=tmp_path / "absent") == 2
