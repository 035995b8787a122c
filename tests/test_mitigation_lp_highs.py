"""The mitigation LP through highspy (:mod:`fairengine.mitigation.lp`) against the code it
replaced, one ``scipy.optimize.linprog(method="highs")`` call per LP (``linprog_reference.py``).

Every LP of the RTDP shape (notes ``intersectional.md`` §1.5) has the same optimal value both
ways; where the optimum is a unique vertex, the same solution. Random instances of that shape
(random rate coefficients, costs, constrained sets, ε, ``outcomes`` and monotonicity), degenerate
ones (tied intersections, zero costs, ε = 0, a rate coefficient 0), warm re-solves along a
threshold-search path against solves from scratch, the error on an infeasible LP, and the whole
``run_mitigation`` on a realistic dataset: every number of the result must equal the old one.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from linprog_reference import solve_rtdp_lp_linprog, use_linprog

from fairengine.dataset import AuditDataset
from fairengine.mitigation import MitigationConfig, MitigationError, run_mitigation
from fairengine.mitigation.lp import FEASIBILITY_TOL, RTDPProgram, solve_rtdp_lp
from fairengine.mitigation.rates import AffineRate
from fairengine.roles import ColumnRoles

RATES = ("tpr", "fpr", "selection_rate")


def _instance(rng: np.random.Generator, k: int, degenerate: bool = False):
    """Costs, constant and blocks of an RTDP LP: each rate r_s = a p + b q + c with
    a = (d − u)/(d + α + β), b = u/(d + α + β), c = α/(d + α + β), as affine_rate builds them."""
    n_blocks = int(rng.integers(1, 4))
    alpha = float(rng.choice([0.0, 0.5]))
    blocks = []
    for j in range(n_blocks):
        d = rng.integers(1, 400, k).astype(float)
        u = np.floor(d * rng.uniform(0, 1, k))
        if degenerate:  # ties, and rates with a or b exactly 0
            d[1::2], u[1::2] = d[0], u[0]
            u[rng.random(k) < 0.2] = 0.0
            full = rng.random(k) < 0.2
            u[full] = d[full]
        den = d + 2 * alpha
        mask = rng.random(k) < 0.85
        mask[: 2 if k >= 2 else 1] = True
        blocks.append(AffineRate(RATES[j], (d - u) / den, u / den, alpha / den + 0 * d, mask))
    cost_p = rng.normal(0, 0.05, k)
    cost_q = rng.normal(0, 0.05, k)
    if degenerate:
        cost_p[rng.random(k) < 0.3] = 0.0
        cost_q[1::2] = cost_q[0]
    return cost_p, cost_q, float(rng.uniform(0, 0.5)), blocks


def _settings(rng: np.random.Generator, degenerate: bool = False) -> dict:
    eps = float(rng.choice([0.0, 0.05, 0.2, 1.0, math.inf] if degenerate else [0.05, 0.2, 1.0]))
    return {
        "epsilon": eps,
        "outcomes": str(rng.choice(["positive", "both"])),
        "monotone": bool(rng.random() < 0.7),
        "rate_floor": 1e-3,
    }


def _row_violation(sol, blocks, settings) -> float:
    """Largest violation of the ε window by the solution's rates, recomputed from (p, q)."""
    if math.isinf(settings["epsilon"]):
        return 0.0
    e = math.exp(settings["epsilon"])
    worst = 0.0
    for blk in blocks:
        if not blk.mask.any():
            continue
        r = (blk.a * sol.p + blk.b * sol.q + blk.c)[blk.mask]
        worst = max(worst, r.max() - e * max(r.min(), settings["rate_floor"]))
        if settings["outcomes"] == "both":
            worst = max(worst, (1 - r).max() - e * (1 - r).min() - 1e-12)
    if settings["monotone"]:
        worst = max(worst, float((sol.p - sol.q).max()))
    return worst


@pytest.mark.parametrize("degenerate", [False, True])
def test_highspy_matches_linprog_on_random_rtdp_lps(degenerate: bool) -> None:
    """Same optimal value (to 1e-9), the same (p, q) (to 1e-9) and the same binding sides on
    every instance, degenerate ones (several optimal vertices) included: HiGHS 1.16 (highspy),
    solving from scratch with linprog's settings, returns the vertex scipy's HiGHS 1.12 did."""
    rng = np.random.default_rng(20261126 + degenerate)
    n = 150
    for _ in range(n):
        k = int(rng.integers(2, 13))
        cost_p, cost_q, const, blocks = _instance(rng, k, degenerate)
        kw = _settings(rng, degenerate)
        eps = kw.pop("epsilon")
        new = solve_rtdp_lp(cost_p, cost_q, const, blocks, eps, **kw)
        old = solve_rtdp_lp_linprog(cost_p, cost_q, const, blocks, eps, **kw)
        assert new.value == pytest.approx(old.value, abs=1e-9, rel=0)
        settings = {"epsilon": eps, **kw}
        assert _row_violation(new, blocks, settings) <= FEASIBILITY_TOL
        assert new.max_violation <= FEASIBILITY_TOL
        assert np.allclose(new.p, old.p, atol=1e-9, rtol=0)
        assert np.allclose(new.q, old.q, atol=1e-9, rtol=0)
        assert np.allclose(new.bounds, old.bounds, atol=1e-9, rtol=0)
        assert [list(b) for b in new.binding] == [list(b) for b in old.binding]


def _search_path(rng: np.random.Generator, k: int, steps: int):
    """A coordinate-descent-like path: one intersection's coefficients and costs change per LP,
    every mask stays (the shape of RTDPPostProcessor's threshold search)."""
    cost_p, cost_q, const, blocks = _instance(rng, k, degenerate=bool(rng.random() < 0.5))
    for _ in range(steps):
        s = int(rng.integers(k))
        cost_p, cost_q = cost_p.copy(), cost_q.copy()
        cost_p[s], cost_q[s] = rng.normal(0, 0.05, 2)
        if rng.random() < 0.2:
            cost_q[s] = 0.0
        new_blocks = []
        for blk in blocks:
            a, b = blk.a.copy(), blk.b.copy()
            share = float(rng.choice([0.0, 1.0, rng.uniform()]))  # a or b may become 0
            total = a[s] + b[s]
            a[s], b[s] = total * (1 - share), total * share
            new_blocks.append(AffineRate(blk.rate, a, b, blk.c, blk.mask))
        blocks = new_blocks
        yield cost_p, cost_q, const, blocks


def test_warm_resolves_have_the_values_of_solves_from_scratch() -> None:
    """RTDPProgram's warm re-solves along a search path: the optimal value of the LP solved from
    scratch (highspy and linprog) to 1e-9, a feasible (p, q), and warm solves actually used."""
    rng = np.random.default_rng(7)
    warm = 0
    for _ in range(12):
        k = int(rng.integers(2, 15))
        kw = _settings(rng)
        eps = kw.pop("epsilon")
        program = RTDPProgram(k, eps, **kw)
        for cost_p, cost_q, const, blocks in _search_path(rng, k, 40):
            got = program.solve(cost_p, cost_q, const, blocks)
            cold = solve_rtdp_lp(cost_p, cost_q, const, blocks, eps, **kw)
            old = solve_rtdp_lp_linprog(cost_p, cost_q, const, blocks, eps, **kw)
            assert got.value == pytest.approx(cold.value, abs=1e-9, rel=0)
            assert got.value == pytest.approx(old.value, abs=1e-9, rel=0)
            assert _row_violation(got, blocks, {"epsilon": eps, **kw}) <= FEASIBILITY_TOL
        warm += program.n_warm_
        assert program.n_cold_ == 1  # loaded once; every later LP a warm re-solve
    assert warm == 12 * 39


def test_program_reloads_when_the_constrained_set_changes() -> None:
    rng = np.random.default_rng(3)
    cost_p, cost_q, const, blocks = _instance(rng, 6)
    program = RTDPProgram(6, 0.2)
    program.solve(cost_p, cost_q, const, blocks)
    fewer = [dataclasses.replace(b, mask=b.mask & (np.arange(6) != 0)) for b in blocks]
    got = program.solve(cost_p, cost_q, const, fewer)
    assert program.n_cold_ == 2 and program.n_warm_ == 0
    old = solve_rtdp_lp_linprog(cost_p, cost_q, const, fewer, 0.2)
    assert got.value == pytest.approx(old.value, abs=1e-9, rel=0)
    with pytest.raises(ValueError, match="cost_p has 5 entries, expected k=6"):
        program.solve(cost_p[:5], cost_q[:5], const, blocks)


def _infeasible(k: int) -> list[AffineRate]:
    """A block whose rates are identically 0: m ≥ δ > 0 and m ≤ r = 0 cannot both hold."""
    z = np.zeros(k)
    return [AffineRate("tpr", z, z, z, np.ones(k, dtype=bool))]


def test_infeasible_lp_raises_like_linprog_did() -> None:
    """A non-optimal status is the error linprog's path raised, word for word, both from scratch
    and warm (the warm solve is retried from scratch, which raises)."""
    rng = np.random.default_rng(5)
    cost_p, cost_q = rng.normal(size=4), rng.normal(size=4)
    with pytest.raises(MitigationError, match=r"HiGHS status 2: .*Infeasible") as new:
        solve_rtdp_lp(cost_p, cost_q, 0.0, _infeasible(4), 0.2)
    with pytest.raises(MitigationError, match=r"HiGHS status 2: ") as old:
        solve_rtdp_lp_linprog(cost_p, cost_q, 0.0, _infeasible(4), 0.2)
    assert str(new.value) == str(old.value)  # the same status number and message
    program = RTDPProgram(4, 0.2)
    _, _, const, blocks = _instance(rng, 4)
    blocks = [dataclasses.replace(b, mask=np.ones(4, dtype=bool)) for b in blocks[:1]]
    program.solve(cost_p, cost_q, const, blocks)
    with pytest.raises(MitigationError, match=r"HiGHS status 2: .*Infeasible"):
        program.solve(cost_p, cost_q, const, _infeasible(4))


def _frame(n: int = 12_000, seed: int = 11) -> pd.DataFrame:
    """An Adult-like audit table: sex × race × age with base rates, scores and a calibrated
    model that differ by group."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n, p=[0.33, 0.67])
    race = rng.choice(["white", "black", "other"], n, p=[0.82, 0.1, 0.08])
    age = rng.uniform(17, 90, n)
    logit = -1.2 + 0.9 * (sex == "male") - 0.4 * (race != "white") + 0.02 * (age - 40)
    y = rng.binomial(1, 1 / (1 + np.exp(-logit)))
    x = rng.normal(1.4 * y, 1.0) + 0.5 * (sex == "male") - 0.3 * (race == "black") - 0.7
    return pd.DataFrame({"sex": sex, "race": race, "age": age, "y": y, "s": 1 / (1 + np.exp(-x))})


def _differences(a, b, path: str = "") -> list[str]:
    """Every leaf of two results that differs (floats exactly; ``seconds`` skipped)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), path
        out = []
        for f in dataclasses.fields(a):
            if f.name != "seconds":
                out += _differences(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
        return out
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        return [d for key in a for d in _differences(a[key], b[key], f"{path}[{key}]")]
    if isinstance(a, list | tuple):
        assert len(a) == len(b), path
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _differences(x, y, f"{path}[{i}]")
        ]
    if isinstance(a, np.ndarray):
        return [] if np.array_equal(a, b, equal_nan=a.dtype.kind == "f") else [path]
    if isinstance(a, float) and math.isnan(a):
        return [] if isinstance(b, float) and math.isnan(b) else [path]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.parametrize("robust_draws", [0, 20])
def test_run_mitigation_equals_the_linprog_path(robust_draws: int) -> None:
    """The whole mitigation step (every variant, the overall search with its ~hundreds of LPs,
    the fairlearn comparison) on an 18-intersection Adult-like table: findings, thresholds,
    p, q, held-out estimates and every other number equal the old path's exactly."""
    ds = AuditDataset.from_frame(
        _frame(), ColumnRoles("y", ("sex", "race"), score="s"), threshold=0.5
    )
    cfg = MitigationConfig(
        enabled=True,
        attributes=["sex", "race", "age"],
        bins={"age": [0, 30, 50, 100]},
        epsilon=0.2,
        robust_draws=robust_draws,
        n_posterior=500,
        n_realised=50,
    )
    new = run_mitigation(ds, cfg, seed=3)
    with use_linprog():
        old = run_mitigation(ds, cfg, seed=3)
    assert new.status == "ok"
    overall = next(v for v in new.details.variants if v.variant == "overall")
    assert overall.n_lp_solves > 100  # the warm path did the search
    assert _differences(new, old) == []
    f0 = new.findings[0]  # the comparison sees a last-bit change of an estimate
    moved = [dataclasses.replace(f0, estimate=np.nextafter(f0.estimate, 2.0)), *new.findings[1:]]
    assert len(_differences(dataclasses.replace(new, findings=moved), old)) == 1


def test_a_failed_warm_resolve_is_solved_again_from_scratch(monkeypatch) -> None:
    """A warm re-solve that ends non-optimal (simulated) is not trusted: the LP is loaded and
    solved from scratch, with the value linprog finds."""
    from fairengine.mitigation import lp

    real = lp._run
    calls = []

    def flaky(h):
        calls.append(1)
        if len(calls) == 2:  # the first warm re-solve
            return False, 4, "simulated", math.nan, None, 0
        return real(h)

    monkeypatch.setattr(lp, "_run", flaky)
    rng = np.random.default_rng(9)
    program = RTDPProgram(5, 0.2)
    path = list(_search_path(rng, 5, 3))
    for cost_p, cost_q, const, blocks in path:
        got = program.solve(cost_p, cost_q, const, blocks)
        old = solve_rtdp_lp_linprog(cost_p, cost_q, const, blocks, 0.2)
        assert got.value == pytest.approx(old.value, abs=1e-9, rel=0)
    assert (program.n_cold_, program.n_warm_) == (2, 1)
