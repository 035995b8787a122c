"""The one Sinkhorn loop (:mod:`fairengine.transport.sinkhorn`) and adaptive over-relaxation:
agreement with POT's log-domain Sinkhorn, the same potentials through every kernel (numpy cost
matrix, torch points, a stack of problems, a shared kernel), the closed form of the ω rule,
fewer iterations than plain Sinkhorn at small ε, and the plain fallback."""

from __future__ import annotations

import math

import numpy as np
import ot
import pytest
import torch

from fairengine.transport.entropic import sinkhorn_potentials
from fairengine.transport.entropic_batch import (
    batched_sinkhorn,
    solve_splits_one_by_one,
    stabilized_batch_sinkhorn,
    stacked_softmax_images,
)
from fairengine.transport.overrelaxation import (
    OMEGA_MAX,
    overrelaxation_from_rate,
    overrelaxation_from_rates,
)
from fairengine.transport.sinkhorn import (
    ABSORB,
    balancing_shift,
    c_transform_start,
    check_due,
    scaling_sinkhorn,
    solve_points,
    solve_uniform,
    squared_cost,
)


@pytest.fixture(scope="module")
def clustered() -> tuple[np.ndarray, np.ndarray]:
    """Points in separated clusters with a few outliers: Sinkhorn converges slowly at small ε
    (the kernel nearly decouples the clusters), as on one-hot Adult features."""
    rng = np.random.default_rng(3)
    centres = rng.normal(scale=3.0, size=(6, 4))
    xs = centres[rng.integers(0, 6, 300)] + rng.normal(scale=0.4, size=(300, 4))
    xt = centres[rng.integers(0, 6, 280)] + rng.normal(scale=0.4, size=(280, 4)) + 0.3
    xs[:3] += 8.0
    return xs, xt


def _plan(cost: np.ndarray, f: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    return np.exp((f[:, None] + g[None, :] - cost) / eps)


def test_potentials_give_pots_plan(clustered):
    """float64 numpy loop at a tight tolerance: the plan exp((f + g − C)/ε) a bᵀ equals POT's
    log-domain Sinkhorn plan, and its marginals are uniform."""
    xs, xt = clustered
    cost = squared_cost(xs, xt)
    eps = 0.05 * float(np.median(cost))
    run = solve_uniform(cost, eps, max_iter=20_000, tol=1e-9, dtype=np.float64)
    assert run.marginal_error < 1e-9
    plan = _plan(cost, run.f, run.g, eps)
    a, b = np.full(len(xs), 1 / len(xs)), np.full(len(xt), 1 / len(xt))
    ref = ot.sinkhorn(a, b, cost, eps, method="sinkhorn_log", stopThr=1e-12, numItermax=50_000)
    assert np.abs(plan - ref).sum() < 1e-6
    np.testing.assert_allclose(plan.sum(1), a, atol=1e-9)
    np.testing.assert_allclose(plan.sum(0), b, atol=1e-9)


def test_numpy_and_torch_loops_agree(clustered):
    """Same algorithm in both back ends (float64, same tolerance): the same transport plan."""
    xs, xt = clustered
    cost = squared_cost(xs, xt)
    eps = 0.02 * float(np.median(cost))
    run = solve_uniform(cost, eps, max_iter=20_000, tol=1e-8, dtype=np.float64)
    pts = solve_points(torch.as_tensor(xs), torch.as_tensor(xt), eps, max_iter=20_000, tol=1e-8)
    f, g = pts.f, pts.g
    assert pts.marginal_error < 1e-8
    diff = np.abs(_plan(cost, run.f, run.g, eps) - _plan(cost, f, g, eps)).sum()
    assert diff < 1e-7


def test_omega_rule_closed_form():
    """From plain Sinkhorn's rate θ the rule gives ω* = 2/(1 + √(1 − θ)); at ω* the optimal
    over-relaxed rate is ω* − 1, and observing that rate at ω* recovers the same θ (and ω*)."""
    for theta in (0.5, 0.9, 0.99):
        best = 2 / (1 + math.sqrt(1 - theta))
        assert overrelaxation_from_rate(theta, 1.0) == pytest.approx(min(best, OMEGA_MAX))
        if best < OMEGA_MAX:
            assert overrelaxation_from_rate(best - 1, best) == pytest.approx(best, rel=1e-6)
    # never lowered, capped; a non-decreasing error, or a rate faster than ω − 1 (outside the
    # model: a transient), keeps ω
    assert overrelaxation_from_rate(0.1, 1.6) == 1.6
    assert overrelaxation_from_rate(0.3, 1.0) > 1.0
    assert overrelaxation_from_rate(0.9999999, 1.0) == OMEGA_MAX
    assert overrelaxation_from_rate(1.2, 1.3) == 1.3
    assert overrelaxation_from_rate(math.nan, 1.3) == 1.3
    np.testing.assert_allclose(
        overrelaxation_from_rates(np.array([0.9, 1.5]), np.array([1.0, 1.4])),
        [2 / (1 + math.sqrt(0.1)), 1.4],
    )


def test_adaptive_overrelaxation_needs_fewer_iterations_for_the_same_map(clustered):
    """At small ε adaptive ω reaches the tolerance in fewer iterations than plain Sinkhorn and
    the fixed ω = 1.3, and the barycentric images agree with a float64 solution converged to
    1e-10 at least as well as plain Sinkhorn's at the same tolerance."""
    xs, xt = clustered
    cost = squared_cost(xs, xt)
    eps = 0.01 * float(np.median(cost))
    f0, g0 = c_transform_start(cost)
    runs = {
        w: scaling_sinkhorn(cost, eps, f0, g0, max_iter=20_000, tol=1e-4, overrelaxation=w)
        for w in (1.0, 1.3, "auto")
    }
    assert all(r.marginal_error < 1e-4 for r in runs.values())
    assert runs["auto"].n_iter < runs[1.3].n_iter < runs[1.0].n_iter
    assert runs["auto"].omega > 1.3
    exact = solve_uniform(cost, eps, max_iter=50_000, tol=1e-10, dtype=np.float64)

    def images(g: np.ndarray) -> np.ndarray:
        logits = (g[None, :] - cost) / eps
        w = np.exp(logits - logits.max(1, keepdims=True))
        return (w @ xt) / w.sum(1, keepdims=True)

    truth = images(exact.g)
    err = {w: np.abs(images(r.g) - truth).max() for w, r in runs.items()}
    assert err["auto"] <= err[1.0] * 1.05


def test_sinkhorn_potentials_reports_omega_and_falls_back_to_plain(clustered, monkeypatch):
    """The public solver reports the ω it ended with; an over-relaxed run that fails is rerun
    plain (after the warm start at 4ε) and the iterations of every run are counted."""
    xs, xt = clustered
    eps = 0.05 * float(np.median(squared_cost(xs, xt)))
    sol = sinkhorn_potentials(xs, xt, eps)
    assert sol["overrelaxation"] >= 1.0 and sol["marginal_error"] < 1e-4

    import fairengine.transport.sinkhorn as sn

    real = sn.scaling_sinkhorn
    seen = []

    def failing_when_relaxed(*args, **kwargs):
        seen.append(kwargs["overrelaxation"])
        run = real(*args, **kwargs)
        if kwargs["overrelaxation"] != 1.0:
            run.marginal_error = math.inf
        return run

    monkeypatch.setattr(sn, "scaling_sinkhorn", failing_when_relaxed)
    sol2 = sinkhorn_potentials(xs, xt, eps)
    assert seen == ["auto", "auto", 1.0]  # warm start, solve, plain rerun
    assert sol2["overrelaxation"] == 1.0 and sol2["n_iter"] > sol["n_iter"]


def test_split_solves_one_by_one_match_the_batched_torch_solver(clustered):
    """The CPU path of the split refits (numpy, one replicate at a time, images from the kept
    cost matrix) and the batched torch solver (kept for CUDA, images by a batched softmax)
    give the same images, forward and inverse."""
    xs, _ = clustered
    rng = np.random.default_rng(0)
    idx = np.stack([rng.permutation(300) for _ in range(4)])
    x = torch.as_tensor(xs[idx[:, :150]], dtype=torch.float64)
    y = torch.as_tensor(xs[idx[:, 150:]], dtype=torch.float64)
    eps = 0.05 * float(np.median(squared_cost(xs[:150], xs[150:])))
    fwd1, inv1, ok1 = solve_splits_one_by_one(x, y, eps, 20_000, 1e-6, inverse=True)
    f2, g2, ok2 = stabilized_batch_sinkhorn(x, y, eps, max_iter=20_000, tol=1e-6)
    assert ok1.all() and ok2.all()
    fwd2 = stacked_softmax_images(x, y, g2, eps).numpy()
    inv2 = stacked_softmax_images(y, x, f2, eps).numpy()
    scale = float(np.abs(xs).max())
    assert np.abs(fwd1 - fwd2).max() < 1e-4 * scale
    assert np.abs(inv1 - inv2).max() < 1e-4 * scale  # type: ignore[operator]
    # and the images are barycentres of the plan of the one-by-one potentials
    for r in range(4):
        cost = squared_cost(x[r].numpy(), y[r].numpy())
        run = solve_uniform(cost, eps, max_iter=20_000, tol=1e-6, dtype=np.float64)
        plan = _plan(cost, run.f, run.g, eps)
        assert np.allclose(fwd1[r], plan @ y[r].numpy() / plan.sum(1, keepdims=True), atol=1e-8)


def test_balancing_shift_recentres_without_a_rebuild():
    """u e^c, v e^-c leaves the plan unchanged; the shift puts both ranges inside ±ABSORB when
    each spans less than 2·ABSORB, and there is none when they cannot both fit."""
    e = math.exp
    c = balancing_shift(e(10.4), e(-20.3), e(19.4), e(-12.1))  # the 20k x 20k case
    assert c is not None
    assert -ABSORB <= -20.3 + c <= 10.4 + c <= ABSORB
    assert -ABSORB <= -12.1 - c <= 19.4 - c <= ABSORB
    assert balancing_shift(e(25.0), e(-20.0), e(1.0), e(-1.0)) is None  # u spans 45 > 40
    assert balancing_shift(e(18.0), e(-18.0), e(25.0), e(24.0)) is None  # u and v pull apart


def test_one_loop_gives_the_same_potentials_through_every_kernel(clustered):
    """One problem solved by the one loop through each kernel, float64, plain Sinkhorn to
    1e-9 from the c-transform start: the numpy cost-matrix kernel, the torch points kernel,
    the stacked kernels (the problem repeated with two others, finished at different
    iterations) and the shared kernel (uniform weights, the problem as a batch of one) give
    the same plan."""
    xs, xt = clustered
    xs, xt = xs[:120], xt[:100]
    cost = squared_cost(xs, xt)
    eps = 0.05 * float(np.median(cost))
    f0, g0 = c_transform_start(cost)
    kw = {"max_iter": 20_000, "tol": 1e-9, "overrelaxation": 1.0}
    ref = scaling_sinkhorn(cost, eps, f0, g0, dtype=np.float64, **kw)
    assert ref.marginal_error < 1e-9
    plan = _plan(cost, ref.f, ref.g, eps)
    pts = solve_points(torch.as_tensor(xs), torch.as_tensor(xt), eps, init=(f0, g0), **kw)
    assert np.abs(_plan(cost, pts.f, pts.g, eps) - plan).sum() < 1e-8
    rng = np.random.default_rng(5)
    x = torch.as_tensor(np.stack([xs, xs[rng.permutation(120)], xs + 0.1]))
    y = torch.as_tensor(np.stack([xt, xt, xt[rng.permutation(100)] * 1.2]))
    f, g, ok = stabilized_batch_sinkhorn(x, y, eps, **kw)
    assert ok.all()
    assert np.abs(_plan(cost, f[0].numpy(), g[0].numpy(), eps) - plan).sum() < 1e-8
    a = np.full((120, 1), 1 / 120)
    b = np.full((100, 1), 1 / 100)
    shared = batched_sinkhorn(xs, xt, a, b, eps, f0, g0, **kw)
    assert shared.converged.all() and shared.marginal_error[0] < 1e-9
    g_shared = g0 + eps * shared.log_v[:, 0]
    # the shared kernel's potentials: g from log v; f is the c-transform of g (a row step)
    f_shared = -eps * np.log(np.exp((g_shared[None, :] - cost) / eps).sum(1) * 120)
    assert np.abs(_plan(cost, f_shared, g_shared, eps) - plan).sum() < 1e-6


def test_the_checks_run_every_iteration_then_every_fifth():
    assert all(check_due(i) for i in range(1, 51))
    assert [i for i in range(51, 71) if check_due(i)] == [55, 60, 65, 70]
