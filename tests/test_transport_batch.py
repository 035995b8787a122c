"""The batched Sinkhorn behind FlipTest's bootstrap refits: each replicate equals the
stabilized single-problem solver on the resampled points, replicates it cannot serve are
reported (not returned wrong), and FlipTest's bootstrap gives the same statistics batched as
refitted one by one."""

from __future__ import annotations

import numpy as np
import pytest

import fairengine.fliptest.statistics as fs
from fairengine.transport import EntropicMap, ExactOTMap
from fairengine.transport.entropic import median_cost, sinkhorn_potentials
from fairengine.transport.entropic_batch import (
    batched_images,
    batched_sinkhorn,
    reweighted_refits,
    soft_c_transform,
)


def _softmax_map(q: np.ndarray, y: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    c = ((q[:, None, :] - y[None]) ** 2).sum(-1)
    logits = (g[None] - c) / eps
    w = np.exp(logits - logits.max(1, keepdims=True))
    return w @ y / w.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    n = 250
    x = rng.normal(size=(n, 3))
    y = rng.normal(size=(n, 3)) * [1.3, 1.0, 0.8] + [0.4, 0.0, -0.2]
    eps = 0.05 * median_cost(x, y, rng)
    return x, y, eps


def test_bootstrap_replicates_equal_single_solves_on_the_resampled_points(problem):
    x, y, eps = problem
    rng = np.random.default_rng(1)
    n = len(x)
    draws = [(rng.integers(0, n, n), rng.integers(0, n, n)) for _ in range(5)]
    a = np.stack([np.bincount(i, minlength=n) / n for i, _ in draws], 1)
    b = np.stack([np.bincount(j, minlength=n) / n for _, j in draws], 1)
    ref = sinkhorn_potentials(x, y, eps, dtype="float64", tol=1e-9, max_iter=20_000)
    f0 = soft_c_transform(x, y, eps, ref["g"])
    sol = batched_sinkhorn(x, y, a, b, eps, f0, ref["g"], tol=1e-9, max_iter=20_000)
    assert sol.converged.all() and (sol.marginal_error < 1e-9).all()
    images, ok = batched_images(x, y, ref["g"], sol.log_v, eps)
    assert ok.all() and images.shape == (5, n, 3)
    for r, (i, j) in enumerate(draws):
        single = sinkhorn_potentials(x[i], y[j], eps, dtype="float64", tol=1e-9, max_iter=20_000)
        expected = _softmax_map(x, y[j], single["g"], eps)  # every original row, as queries
        np.testing.assert_allclose(images[r], expected, atol=1e-5)
        # unsampled target rows get no weight
        assert np.all(np.isneginf(sol.log_v[np.bincount(j, minlength=n) == 0, r]))


def test_split_replicates_with_diagonal_free_reference(problem):
    """The permutation-null shape: one pooled set split into pseudo-source and -target."""
    x, y, eps = problem
    rng = np.random.default_rng(1)
    pool = np.vstack([x, y])
    n = len(x)
    labels = [rng.permutation(np.r_[np.ones(n, bool), np.zeros(n, bool)]) for _ in range(3)]
    a = np.stack([lab / n for lab in labels], 1).astype(float)
    b = np.stack([~lab / n for lab in labels], 1).astype(float)
    f0 = soft_c_transform(pool, pool, eps, exclude_diagonal=True)
    g0 = soft_c_transform(pool, pool, eps, f0, exclude_diagonal=True)
    sol = batched_sinkhorn(pool, pool, a, b, eps, f0, g0, tol=1e-9, max_iter=20_000)
    assert sol.converged.all()
    images, ok = batched_images(pool, pool, g0, sol.log_v, eps)
    assert ok.all()
    for r, lab in enumerate(labels):
        single = sinkhorn_potentials(
            pool[lab], pool[~lab], eps, dtype="float64", tol=1e-9, max_iter=20_000
        )
        expected = _softmax_map(pool[lab], pool[~lab], single["g"], eps)
        np.testing.assert_allclose(images[r][lab], expected, atol=1e-5)


def test_a_replicate_out_of_reach_is_reported_not_returned(problem):
    x, y, eps = problem
    far = np.vstack([x, [[60.0, 60.0, 60.0]]])  # a source point no target is near
    n = len(far)
    a = np.zeros((n, 2))
    a[:-1, 0] = 1.0 / (n - 1)  # replicate 0 leaves the far point out
    a[:, 1] = 1.0 / n  # replicate 1 must move it
    b = np.full((len(y), 2), 1.0 / len(y))
    f0 = soft_c_transform(x, y, eps)
    f0 = np.r_[f0, f0.mean()]  # a reference that knows nothing of the far point
    g0 = soft_c_transform(y, x, eps)
    sol = batched_sinkhorn(far, y, a, b, eps, f0, g0, max_iter=500)
    assert sol.converged.tolist() == [True, False]


def test_reweighted_refits_match_the_map_and_fliptest_bootstrap_agrees(problem, monkeypatch):
    x, y, _ = problem
    m = EntropicMap(epsilon=0.05).fit(x, y)
    n = len(x)
    uniform = np.full((n, 1), 1.0 / n)
    images, ok = reweighted_refits(m, uniform, uniform, x[:40])
    assert ok.all()
    # weights of the fit itself reproduce the fitted map (up to Sinkhorn's tolerance)
    np.testing.assert_allclose(images[0], m.transform(x[:40]), atol=2e-2)

    def decide(pts, group):
        return pts[:, 0] + 0.5 * pts[:, 1] > 0.3

    kw = dict(n_permutations=0, n_selfmap=0, n_bootstrap=30, seed=4)
    batched = fs.flip_test(EntropicMap(epsilon=0.05), x, y, decide, "a", "b", **kw)
    monkeypatch.setattr(fs, "_reweightable", lambda *args: False)
    single = fs.flip_test(EntropicMap(epsilon=0.05), x, y, decide, "a", "b", **kw)
    assert batched.bootstrap_batched == 30 and single.bootstrap_batched == 0
    for k in fs.KINDS:
        diff = np.abs(
            batched.tests[k].bootstrap_distribution - single.tests[k].bootstrap_distribution
        )
        # the same draws; the refits differ only by the fixed standardization/ε and
        # Sinkhorn's tolerance: at most a few boundary flips of 250 per replicate
        assert diff.max() <= 4 / n
        assert np.corrcoef(batched.flip_frequency[k], single.flip_frequency[k])[0, 1] > 0.9


def test_permutation_refits_serve_both_directions():
    """The reverse direction's permutation null from the forward refits' inverse maps has the
    distribution of its own refits (same null, same ε); exact maps do not share."""
    rng = np.random.default_rng(5)
    n = 200
    xa = rng.normal(size=(n, 2))
    xb = rng.normal(size=(n, 2)) * [1.0, 1.4] + [0.3, 0.0]

    def decide(pts, group):
        return pts[:, 0] - 0.4 * pts[:, 1] > 0.1

    kw = dict(n_selfmap=0, n_bootstrap=0, n_permutations=60)
    fwd = fs.flip_test(EntropicMap(epsilon=0.05), xa, xb, decide, "a", "b", seed=1, **kw)
    shared = fwd.reverse_permutation_null
    assert shared is not None and shared.rates.shape == (60, 2)
    rev = fs.flip_test(
        EntropicMap(epsilon=0.05), xb, xa, decide, "b", "a", seed=2, permutation_null=shared, **kw
    )
    own = fs.flip_test(EntropicMap(epsilon=0.05), xb, xa, decide, "b", "a", seed=2, **kw)
    assert rev.permutation_null_reused and not own.permutation_null_reused
    np.testing.assert_array_equal(rev.tests["positive"].null_distribution, shared.rates[:, 0])
    for j, k in enumerate(fs.KINDS):
        a, b = shared.rates[:, j], own.tests[k].null_distribution
        # two samples of 60 draws of the same null: means within 4 standard errors
        se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
        assert abs(a.mean() - b.mean()) <= 4 * se + 1e-9
    # a different refit count or ε: the direction refits on its own
    other = fs.flip_test(
        EntropicMap(epsilon=0.1), xb, xa, decide, "b", "a", seed=2, permutation_null=shared, **kw
    )
    assert not other.permutation_null_reused
    exact = fs.flip_test(ExactOTMap(), xa, xb, decide, "a", "b", seed=1, **kw)
    assert exact.reverse_permutation_null is None


def test_batched_selfmap_null_matches_one_by_one(monkeypatch):
    """Self-map refits through the batched stabilized solver: each replicate's images equal a
    single fit on the same halves (same ε in cost units), and the null distribution matches
    the one-by-one refits (same draws) up to boundary flips."""
    from fairengine.transport.entropic_batch import split_refits

    rng = np.random.default_rng(8)
    n = 240
    xs = rng.normal(size=(n, 3))
    halves = [rng.permutation(n) for _ in range(6)]
    a = np.stack([h[: n // 2] for h in halves])
    b = np.stack([h[n // 2 :] for h in halves])
    images, _, ok = split_refits(EntropicMap(epsilon=0.05), xs, a, b)
    assert ok.all()
    m = EntropicMap(epsilon=0.05).fit(xs[a[0]], xs[b[0]])  # replicate 0 sets ε: same ε here
    np.testing.assert_allclose(images[0], m.transform(xs[a[0]]), atol=2e-3)

    def decide(pts, group):
        return pts[:, 0] + pts[:, 2] > 0.2

    xt = rng.normal(size=(n, 3)) + np.array([0.5, 0.0, 0.0])
    kw = dict(n_permutations=0, n_bootstrap=0, n_selfmap=30, seed=5)
    batched = fs.flip_test(EntropicMap(epsilon=0.05), xs, xt, decide, "a", "b", **kw)

    def not_converged(estimator, pool, source, target, **kwargs):
        return np.zeros((*source.shape, pool.shape[1])), None, np.zeros(len(source), bool)

    import fairengine.transport.entropic_batch as entropic_batch  # imported where it is used

    monkeypatch.setattr(entropic_batch, "split_refits", not_converged)
    single = fs.flip_test(EntropicMap(epsilon=0.05), xs, xt, decide, "a", "b", **kw)
    for k in fs.KINDS:
        diff = batched.tests[k].selfmap_distribution - single.tests[k].selfmap_distribution
        assert np.abs(diff).max() <= 4 / (n // 2)


def test_stacked_model_calls_split_back_per_replicate(monkeypatch):
    calls = []

    def decide(pts, group):
        calls.append(len(pts))
        return pts[:, 0] > 0

    rng = np.random.default_rng(0)
    points = [rng.normal(size=(n, 2)) for n in (3, 4, 2, 6, 1)]
    monkeypatch.setattr(fs, "DECIDE_ROWS", 7)
    out = fs._decide_stacked(decide, points, "a")
    assert [o.tolist() for o in out] == [(p[:, 0] > 0).tolist() for p in points]
    assert calls == [7, 2, 7]  # 3+4 | 2 (6 would pass 7) | 6+1
    assert fs._decide_stacked(decide, [], "a") == []


def test_problems_over_the_memory_limit_refit_one_by_one(problem, monkeypatch):
    x, y, _ = problem
    monkeypatch.setattr(fs, "BATCH_MAX_ENTRIES", len(x) * len(y) - 1)
    res = fs.flip_test(
        EntropicMap(epsilon=0.05),
        x,
        y,
        lambda pts, group: pts[:, 0] > 0,
        "a",
        "b",
        n_permutations=0,
        n_selfmap=0,
        n_bootstrap=3,
    )
    assert res.bootstrap_batched == 0 and len(res.tests["positive"].bootstrap_distribution) == 3


def _masked_pow_sweeper(ktu, a, b, w, off):
    """The torch sweep with masks after each product (the reference)."""

    def sweep(u, v, ru):
        ru.reciprocal_().mul_(a)
        if w is not None:
            ru.pow_(w)
        u.mul_(ru)
        if off[0] is not None:
            u.masked_fill_(off[0], 0.0)
        rv = ktu(u).mul_(v).reciprocal_().mul_(b)
        if w is not None:
            rv.pow_(w)
        v.mul_(rv)
        if off[1] is not None:
            v.masked_fill_(off[1], 0.0)

    return sweep


@pytest.mark.parametrize("overrelaxation", [1.0, 1.4, "auto"])
def test_bootstrap_sweep_equals_the_masked_sweep(problem, monkeypatch, overrelaxation):
    """The batched bootstrap keeps the scalings 0 off each replicate's support by adding 1 to
    the marginal there instead of masking after each product: plain or over-relaxed, the
    iterations and the log scalings equal the masked sweep's bit for bit."""
    from fairengine.transport import sinkhorn

    x, y, eps = problem
    rng = np.random.default_rng(7)
    n = len(x)
    draws = [(rng.integers(0, n, n), rng.integers(0, n, n)) for _ in range(6)]
    a = np.stack([np.bincount(i, minlength=n) / n for i, _ in draws], 1)
    b = np.stack([np.bincount(j, minlength=n) / n for _, j in draws], 1)
    ref = sinkhorn_potentials(x, y, eps, dtype="float64", tol=1e-9, max_iter=20_000)
    f0 = soft_c_transform(x, y, eps, ref["g"])

    def solve():
        return batched_sinkhorn(
            x, y, a, b, eps, f0, ref["g"], tol=1e-7, overrelaxation=overrelaxation
        )

    new = solve()
    monkeypatch.setattr(sinkhorn._TorchOps, "sweeper", staticmethod(_masked_pow_sweeper))
    old = solve()
    assert new.converged.all() and old.converged.all()
    np.testing.assert_array_equal(new.n_iter, old.n_iter)
    off = np.isneginf(old.log_v)
    np.testing.assert_array_equal(np.isneginf(new.log_v), off)
    assert off.any()  # unsampled target rows: the support masks are exercised
    np.testing.assert_array_equal(new.log_v, old.log_v)
