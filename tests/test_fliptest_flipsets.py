"""Flipsets (Definition 4.1), the DP-count identity (Proposition 4.2), equalized-odds strata and
transparency reports (Definition 4.3) on hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fairengine.fliptest import (
    compute_flipsets,
    flipset_masks,
    marginal_histograms,
    sign_test,
    transparency_report,
)
from fairengine.transport import EntropicMap, ExactOTMap


def test_flipset_masks():
    pos, neg = flipset_masks([1, 1, 0, 0], [1, 0, 1, 0])
    assert pos.tolist() == [False, True, False, False]
    assert neg.tolist() == [False, False, True, False]


@pytest.mark.parametrize("seed", range(4))
def test_net_flips_equal_dp_count_gap_for_exact_bijection(seed):
    """Proposition 4.2: with an exact bijection, |F+| − |F−| = #positives(S) − #positives(S′)."""
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(300, 3))
    xt = rng.normal(size=(300, 3)) * 1.3 + 0.4
    w = rng.normal(size=3)

    def decide(x, group):
        return np.sin(2 * x[:, 0]) + x @ w > 0.2

    fs = compute_flipsets(ExactOTMap(), xs, xt, decide, "a", "b")
    assert fs.net == int(decide(xs, "a").sum()) - int(decide(xt, "b").sum())
    assert sorted(np.round(fs.images, 8).tolist()) == sorted(np.round(xt, 8).tolist())  # bijection


def test_equalized_odds_maps_within_label_strata():
    """Each stratum is mapped onto the same stratum of the target, so the identity holds per
    stratum (and in total)."""
    rng = np.random.default_rng(7)
    xs, xt = rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 0.5
    ys = np.r_[np.zeros(120, int), np.ones(80, int)]
    yt = np.r_[np.zeros(120, int), np.ones(80, int)]
    xt[yt == 1] += 3.0  # strata far apart: a stratum-blind map would mix them

    def decide(x, group):
        return x[:, 0] > 1.0

    fs = compute_flipsets(ExactOTMap(), xs, xt, decide, "a", "b", ys, yt)
    for y in (0, 1):
        got = set(map(tuple, np.round(fs.images[ys == y], 8)))
        assert got == set(map(tuple, np.round(xt[yt == y], 8)))
        net = fs.positive[ys == y].sum() - fs.negative[ys == y].sum()
        assert net == decide(xs[ys == y], "a").sum() - decide(xt[yt == y], "b").sum()


def test_transparency_report_by_hand():
    x = np.zeros((4, 2))
    images = np.array([[2.0, -1.0], [4.0, 1.0], [1.0, -3.0], [9.0, 9.0]])
    mask = np.array([True, True, True, False])
    rep = transparency_report(x, images, mask, np.array([2.0, 1.0]), ["work", "hair"])
    np.testing.assert_allclose(rep.mean_difference, [7 / 6, -1.0])
    np.testing.assert_allclose(rep.consistency, [1.0, -1 / 3])
    assert rep.ranking("mean_difference") == ["work", "hair"]
    assert rep.ranking("consistency") == ["work", "hair"]
    assert rep.n == 3


def test_sign_test_matches_scipy_binomtest():
    rng = np.random.default_rng(0)
    disp = rng.normal(0.2, 1, size=(60, 3))
    disp[:5, 2] = 0.0
    mask = rng.random(60) < 0.7
    p = sign_test(disp, mask)
    for j in range(3):
        d = disp[mask, j]
        ref = stats.binomtest(int((d > 0).sum()), int((d != 0).sum()), 0.5).pvalue
        assert p[j] == pytest.approx(ref, rel=1e-10)


def test_marginal_histograms_count_members():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 2))
    m = rng.random(100) < 0.3
    h = marginal_histograms(x, {"positive": m}, ["a", "b"], bins=5)
    assert sum(h["a"]["group"]) == 100
    assert sum(h["b"]["positive"]) == m.sum()
    assert len(h["a"]["edges"]) == 6


def test_entropic_flipsets_close_to_exact_on_lipton():
    """fliptest_ot.md §3.6: the entropic map agrees with exact OT on ~99% of flip decisions."""
    from fairengine.datasets import make_lipton_hiring

    f = make_lipton_hiring(1000).frame
    x = f[["work_exp", "hair_len"]].to_numpy()
    w, m = x[f.gender == "woman"], x[f.gender == "man"]

    def decide(z, group):
        return z @ np.array([1.4028, 1.1688]) > 0.8684

    ex = compute_flipsets(ExactOTMap(), w, m, decide, "woman", "man")
    en = compute_flipsets(EntropicMap(epsilon=0.01), w, m, decide, "woman", "man")
    assert np.mean(ex.mapped_decision == en.mapped_decision) > 0.97
