"""Reference-based distances (fairengine.distribution_distance): hand-computed values, scipy
cross-checks, log(0) and zero-count cases, counts-vs-proportions scale, LiFT's formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import entropy

from fairengine.distribution_distance import (
    check_distance_names,
    distribution_distances,
    reference_masses,
    skews,
)
from fairengine.errors import DataContractError

P = np.array([30.0, 10.0, 40.0, 20.0])  # counts over 4 categories, P = 100
Q = np.full(4, 0.25)


def test_hand_computed_against_uniform() -> None:
    d = distribution_distances(P, Q)
    ph = P / 100
    # |p̂ − q̂| = (.05, .15, .15, .05): max .15, TV = ½·.4 = .2
    assert d.inf_norm == pytest.approx(0.15)
    assert d.total_variation == pytest.approx(0.2)
    kl = sum(p * math.log2(p / 0.25) for p in ph)
    assert d.kl_divergence == pytest.approx(kl)
    assert d.kl_divergence == pytest.approx(entropy(ph, Q, base=2))
    assert d.js_divergence == pytest.approx(jensenshannon(ph, Q, base=2) ** 2)
    np.testing.assert_allclose(d.skews, np.log(ph / 0.25))


def test_identical_distributions_are_at_distance_zero() -> None:
    d = distribution_distances([5, 5, 10], [0.25, 0.25, 0.5])
    assert d.inf_norm == pytest.approx(0) and d.total_variation == pytest.approx(0)
    assert d.kl_divergence == pytest.approx(0, abs=1e-15)
    assert d.js_divergence == pytest.approx(0, abs=1e-15)
    np.testing.assert_allclose(d.skews, 0, atol=1e-15)


def test_zero_count_category_log0() -> None:
    p = np.array([0.0, 10.0, 10.0, 20.0])
    d = distribution_distances(p, Q)
    assert d.skews[0] == -np.inf  # ln 0
    ph = p / p.sum()
    # 0·log 0 = 0 in KL
    assert d.kl_divergence == pytest.approx(sum(x * math.log2(x / 0.25) for x in ph if x > 0))
    assert math.isfinite(d.js_divergence) and 0 < d.js_divergence < 1
    # a pseudo-count a makes it finite: ln((0 + a)/(P + aK)) − ln q̂
    s = skews(p, Q, smoothing=0.5)
    assert s[0] == pytest.approx(math.log(0.5 / (40 + 2.0)) - math.log(0.25))


def test_reference_zero_where_observed_positive_gives_infinite_kl() -> None:
    d = distribution_distances([1, 1], [1, 0])
    assert d.kl_divergence == np.inf and d.skews[1] == np.inf
    assert d.js_divergence == pytest.approx(jensenshannon([0.5, 0.5], [1, 0], base=2) ** 2)
    assert d.total_variation == pytest.approx(0.5)


def test_disjoint_supports_js_is_one_bit() -> None:
    assert distribution_distances([1, 0], [0, 1]).js_divergence == pytest.approx(1.0)


def test_default_is_scale_invariant() -> None:
    a = distribution_distances(P, Q)
    b = distribution_distances(P / 100, Q * 7)
    np.testing.assert_allclose(a.skews, b.skews)
    assert a.kl_divergence == pytest.approx(b.kl_divergence)


def test_lift_skews_and_kl_formula_and_scale_dependence() -> None:
    """LiFT §1.4: α = 1 on raw masses. Same proportions, different scale -> different skews;
    TV, INF and JS do not change."""
    props = np.array([0.1, 0.2, 0.3, 0.4])
    q = np.full(4, 0.25)
    s1 = skews(props, q, lift_compat=True)
    s20 = skews(props * 20, q, lift_compat=True)
    k = 4
    expected1 = np.log((props + 1) / (1 + k)) + math.log(k)  # uniform q: ln((p+1)/(P+K)) + ln K
    np.testing.assert_allclose(s1, expected1)
    expected20 = np.log((20 * props + 1) / (20 + k)) + math.log(k)
    np.testing.assert_allclose(s20, expected20)
    assert not np.allclose(s1, s20)
    d1 = distribution_distances(props, q, lift_compat=True)
    d20 = distribution_distances(props * 20, q, lift_compat=True)
    assert d1.total_variation == pytest.approx(d20.total_variation)
    assert d1.js_divergence == pytest.approx(d20.js_divergence)
    # with a uniform q the smoothed q stays uniform, so KL is unaffected; a non-uniform
    # reference given as proportions vs as counts changes LiFT's KL (but not ours)
    assert d1.kl_divergence == pytest.approx(d20.kl_divergence)
    qn = np.array([0.4, 0.3, 0.2, 0.1])
    lift_p = distribution_distances(props, qn, lift_compat=True).kl_divergence
    lift_c = distribution_distances(props, qn * 1000, lift_compat=True).kl_divergence
    assert lift_p != pytest.approx(lift_c, rel=1e-3)
    ours = [distribution_distances(props, qn * s).kl_divergence for s in (1, 1000)]
    assert ours[0] == pytest.approx(ours[1])
    # KL = (1/ln2)[(1/P) Σ p ln(p/(q+1)) + ln((Q+K)/P)]
    p20 = props * 20
    kl = (np.sum(p20 * np.log(p20 / (q + 1))) / 20 + math.log((1 + k) / 20)) / math.log(2)
    assert d20.kl_divergence == pytest.approx(kl)
    # the smoothed non-uniform reference q = (.7, .3) is flattened to (.567, .433)
    sk = skews([0.7, 0.3], [0.7, 0.3], lift_compat=True)
    np.testing.assert_allclose(sk, 0.0, atol=1e-15)  # p smoothed the same way
    flat = (np.array([0.7, 0.3]) + 1) / (1 + 2)
    np.testing.assert_allclose(flat, [0.5667, 0.4333], atol=1e-4)


def test_reference_masses_uniform_shares_and_pairs() -> None:
    groups = ("a", "b")
    np.testing.assert_allclose(reference_masses("UNIFORM", groups, [0.6, 0.4]), 0.25)
    np.testing.assert_allclose(reference_masses(None, groups, [0.6, 0.4]), 0.25)
    q = reference_masses({"a": 0.7, "b": 0.3}, groups, np.array([0.6, 0.4]))
    np.testing.assert_allclose(q, [[0.42, 0.28], [0.18, 0.12]])
    q = reference_masses({"a": [1, 2], "b": [3, 4]}, groups, [0.5, 0.5])
    np.testing.assert_allclose(q, [[1, 2], [3, 4]])


@pytest.mark.parametrize(
    "spec,match",
    [
        ({"a": 0.5}, r"missing \['b'\]"),
        ({"a": 0.5, "b": 0.3, "z": 0.2}, r"unknown \['z'\]"),
        ({"a": -0.5, "b": 1.5}, "non-negative"),
        ({"a": 0.0, "b": 0.0}, "zero total mass"),
        ({"a": [1, 2, 3], "b": [1, 1]}, "pair"),
        ({"a": "x", "b": 1}, "share or a pair"),
        ("normal", "'uniform' or a mapping"),
    ],
)
def test_reference_validation(spec, match) -> None:
    with pytest.raises(DataContractError, match=match):
        reference_masses(spec, ("a", "b"), [0.5, 0.5], where="reference.sex")


@pytest.mark.parametrize(
    "p,q,match",
    [
        ([1, -1], [1, 1], "non-negative"),
        ([0, 0], [1, 1], "zero total mass"),
        ([1, 2, 3], [1, 1], "same categories"),
        ([1, np.nan], [1, 1], "finite"),
    ],
)
def test_bad_masses(p, q, match) -> None:
    with pytest.raises(DataContractError, match=match):
        distribution_distances(p, q)


def test_unknown_distance_name_lists_valid_ones() -> None:
    assert check_distance_names(["skews", "KL_DIVERGENCE"], "x") == ["SKEWS", "KL_DIVERGENCE"]
    with pytest.raises(DataContractError, match=r"valid names.*TOTAL_VAR_DIST"):
        check_distance_names(["HELLINGER"], "methods.group_metrics.distance_metrics")
