"""The ε functional and the DF metrics: invariants of notes §4.9 and the AIF360 cross-check."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from fairengine.intersectional import (
    differential_fairness,
    elift_epsilon,
    pairwise_epsilon,
    table_from_arrays,
)
from fairengine.intersectional.metrics import METRICS

MODEL = ("sp", "tpr", "fpr", "eo")


def _brute_pairwise(r: np.ndarray, outcomes: str) -> float:
    """max over ordered pairs |ln r_i − ln r_j| (and of 1 − r under "both"), by loops."""
    sides = [r] if outcomes == "positive" else [r, 1 - r]
    return max(
        abs(math.log(s[i]) - math.log(s[j]))
        for s in sides
        for i, j in itertools.permutations(range(len(r)), 2)
    )


def _random_table(seed: int, levels=(2, 3, 2), n: int = 4000, skew: float = 1.0):
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, L, n) for L in levels]
    s = np.ravel_multi_index(codes, levels)
    k = int(np.prod(levels))
    base = rng.uniform(0.05, 0.6, k) ** skew
    y = (rng.random(n) < base[s]).astype(np.int8)
    score = np.clip(rng.normal(0.35 + 0.3 * y + rng.normal(0, 0.1, k)[s], 0.2), 0, 1)
    return table_from_arrays(
        [f"a{j}" for j in range(len(levels))],
        [[str(i) for i in range(L)] for L in levels],
        codes,
        y,
        (score > 0.5).astype(float),
    )


# --------------------------------------------------------------------------- ε functional


@pytest.mark.parametrize("outcomes", ["positive", "both"])
def test_pairwise_epsilon_equals_brute_force_and_is_relabel_invariant(outcomes: str) -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        r = rng.uniform(0.01, 0.99, rng.integers(2, 9))
        eps, hi, lo, side = pairwise_epsilon(r, outcomes=outcomes)
        assert eps == pytest.approx(_brute_pairwise(r, outcomes), rel=1e-12)
        s = (1 - r) if side == 1 else r
        assert abs(math.log(s[hi]) - math.log(s[lo])) == pytest.approx(float(eps), rel=1e-12)
        assert r[hi] >= r[lo]  # the pair is reported as (larger rate, smaller rate)
        perm = rng.permutation(r.size)
        assert pairwise_epsilon(r[perm], outcomes=outcomes)[0] == pytest.approx(float(eps))


def test_epsilon_zero_iff_equal_scale_invariant_and_infinite_on_zero_rate() -> None:
    assert pairwise_epsilon(np.full(5, 0.3))[0] == 0.0
    assert pairwise_epsilon(np.zeros(3))[0] == 0.0  # all rates equal (zero): no disparity
    assert pairwise_epsilon(np.array([0.3, 0.3 + 1e-9]))[0] > 0
    r = np.array([0.1, 0.2, 0.35])
    assert pairwise_epsilon(r * 0.5)[0] == pytest.approx(float(pairwise_epsilon(r)[0]))
    assert pairwise_epsilon(np.array([0.0, 0.2]))[0] == np.inf
    assert np.isnan(pairwise_epsilon(np.array([0.2, np.nan]))[0])  # < 2 auditable groups
    # Leading replicate axes broadcast.
    many = np.array([[0.1, 0.2], [0.3, 0.3]])
    np.testing.assert_allclose(pairwise_epsilon(many)[0], [math.log(2), 0.0])


def test_known_epsilon_knob() -> None:
    """Every intersection at r_ref except one at r_ref·e^{−ε*}: ε_slift = ε* exactly (notes §5);
    under "both", max(ε*, ln((1 − r_ref e^{−ε*})/(1 − r_ref)))."""
    r_ref, eps_star = 0.6, 0.7
    n = np.array([1000, 1000, 1000, 1000])
    low = r_ref * math.exp(-eps_star)
    rates = np.array([r_ref, r_ref, r_ref, low])
    for outcomes, expected in [
        ("positive", eps_star),
        ("both", max(eps_star, math.log((1 - low) / (1 - r_ref)))),
    ]:
        counts = np.zeros((4, 2, 2))
        counts[:, 1, 0] = rates * n
        counts[:, 0, 0] = (1 - rates) * n
        t = _counts_table(counts)
        df = differential_fairness(t, "slift", alpha=0, beta=0, outcomes=outcomes)
        assert df.epsilon == pytest.approx(expected, rel=1e-12)
        assert df.ratio == pytest.approx(math.exp(-expected))
        assert df.pair[1] == 3 or df.pair[0] == 3


def _counts_table(counts: np.ndarray):
    from fairengine.intersectional.cells import IntersectionTable

    k = counts.shape[0]
    return IntersectionTable(("s",), (tuple(map(str, range(k))),), counts, counts, False, "hard")


# --------------------------------------------------------------------------- invariants


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("outcomes", ["positive", "both"])
def test_elift_le_slift_le_twice_elift(seed: int, outcomes: str) -> None:
    """r̄ is a convex combination of the r_s, so ε_elift ≤ ε_slift ≤ 2 ε_elift (α = β = 0)."""
    t = _random_table(seed, skew=2.0)
    el = differential_fairness(t, "elift", alpha=0, beta=0, outcomes=outcomes).epsilon
    sl = differential_fairness(t, "slift", alpha=0, beta=0, outcomes=outcomes).epsilon
    assert el <= sl + 1e-12
    assert sl <= 2 * el + 1e-12
    assert sl > 0


@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("outcomes", ["positive", "both"])
def test_marginal_epsilon_le_intersectional(seed: int, outcomes: str) -> None:
    """A coarser group's rate is a convex combination of its intersections' rates, so every
    marginal (and every sub-intersection) ε is ≤ the intersectional ε (α = β = 0, §1.3)."""
    t = _random_table(seed)
    for metric in METRICS:
        full = differential_fairness(t, metric, alpha=0, beta=0, outcomes=outcomes).epsilon
        for sub in (["a0"], ["a1"], ["a2"], ["a0", "a2"], ["a1", "a2"]):
            part = differential_fairness(
                t.marginal(sub), metric, alpha=0, beta=0, outcomes=outcomes
            ).epsilon
            assert part <= full + 1e-12, (metric, sub)


def test_eo_is_max_of_tpr_and_fpr_and_names_its_component() -> None:
    t = _random_table(3)
    tpr, fpr, eo = (differential_fairness(t, m) for m in ("tpr", "fpr", "eo"))
    assert eo.epsilon == max(tpr.epsilon, fpr.epsilon)
    assert eo.component == ("tpr" if tpr.epsilon >= fpr.epsilon else "fpr")


def test_smoothed_tends_to_empirical_and_empirical_is_plain_ratio() -> None:
    t = _random_table(5)
    for metric in METRICS:
        emp = differential_fairness(t, metric, alpha=0, beta=0).epsilon
        for a in (1e-3, 1e-6):
            assert differential_fairness(t, metric, alpha=a, beta=a).epsilon == pytest.approx(
                emp, abs=20 * a
            )
    # Empirical slift from the raw counts by hand.
    k = t.counts[:, 1, :].sum(axis=1)
    n = t.counts.sum(axis=(1, 2))
    assert differential_fairness(t, "slift", alpha=0, beta=0).epsilon == pytest.approx(
        _brute_pairwise(k / n, "positive")
    )


def test_empirical_epsilon_is_infinite_when_a_group_has_no_positives() -> None:
    counts = np.zeros((3, 2, 2))
    counts[:, 0, 0] = [10, 20, 30]
    counts[:, 1, 0] = [0, 5, 9]
    t = _counts_table(counts)
    assert differential_fairness(t, "slift", alpha=0, beta=0).epsilon == np.inf
    assert np.isfinite(differential_fairness(t, "slift").epsilon)


def test_elift_epsilon_against_overall_rate() -> None:
    r = np.array([0.1, 0.2, 0.4])
    eps, at, side = elift_epsilon(r, 0.25)
    assert eps == pytest.approx(math.log(0.25 / 0.1)) and at == 0 and side == 0
    eps_b, _, _side_b = elift_epsilon(r, 0.25, outcomes="both")
    assert eps_b == pytest.approx(max(math.log(2.5), math.log(0.75 / 0.6)))


def test_empty_intersections_are_excluded_not_imputed() -> None:
    counts = np.zeros((4, 2, 2))
    counts[:3, 0, 0] = [50, 60, 70]
    counts[:3, 1, 1] = [10, 30, 20]
    t = _counts_table(counts)
    df = differential_fairness(t, "slift", alpha=0, beta=0)
    assert df.rates["base_rate"].status.tolist() == ["ok", "ok", "ok", "empty"]
    assert df.excluded == {"base_rate": [3]}
    assert df.epsilon == pytest.approx(math.log((30 / 90) / (10 / 60)))
    inc = differential_fairness(t, "slift", include_empty=True)  # prior mean 0.5 enters
    assert inc.epsilon > differential_fairness(t, "slift").epsilon


# --------------------------------------------------------------------------- AIF360


def test_both_outcomes_smoothed_matches_hand_computed_foulds_edf() -> None:
    """AIF360's smoothed EDF (BinaryLabelDatasetMetric, concentration 1):
    sbr_s = (P_s + 1/2)/(n_s + 1), ε = max over ordered pairs of max(|ln sbr_i − ln sbr_j|,
    |ln(1 − sbr_i) − ln(1 − sbr_j)|). For (P, n) = (3, 10), (1, 10), (8, 10):
    sbr = 3.5/11, 1.5/11, 8.5/11; positive side ln(8.5/1.5) = ln(17/3) = 1.7346;
    negative side ln(9.5/2.5) = ln 3.8 = 1.3350; so ε = ln(17/3)."""
    counts = np.zeros((3, 2, 2))
    counts[:, 1, 0] = [3, 1, 8]
    counts[:, 0, 0] = [7, 9, 2]
    df = differential_fairness(_counts_table(counts), "slift", alpha=0.5, beta=0.5, outcomes="both")
    assert df.epsilon == pytest.approx(math.log(17 / 3), rel=1e-12)
    assert df.epsilon == pytest.approx(1.7346010553881064, rel=1e-12)
    assert df.pair == (2, 1) and df.side == "positive"


def _adult_like(seed: int, n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {"sex": rng.integers(0, 2, n), "race": rng.integers(0, 3, n), "age": rng.integers(0, 2, n)}
    )
    p = 0.1 + 0.2 * df["sex"] + 0.1 * df["race"] - 0.05 * df["age"]
    df["y"] = (rng.random(n) < p).astype(int)
    df["pred"] = (rng.random(n) < p + 0.05).astype(int)
    return df


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_aif360_smoothed_edf(seed: int) -> None:
    """Cross-check with aif360 0.6.1 when installed (dev extra); the hand-computed case above
    runs without it."""
    pytest.importorskip("aif360", reason="aif360 not installed; hand-computed case covers it")
    from aif360.datasets import BinaryLabelDataset
    from aif360.metrics import BinaryLabelDatasetMetric
    from aif360.sklearn.metrics import smoothed_edf

    frame = _adult_like(seed)
    attrs = ["sex", "race", "age"]
    t = table_from_arrays(
        attrs,
        [["0", "1"], ["0", "1", "2"], ["0", "1"]],
        [frame[a].to_numpy() for a in attrs],
        frame["y"].to_numpy(),
        frame["pred"].to_numpy(float),
    )
    ours_data = differential_fairness(t, "slift", outcomes="both").epsilon
    ours_model = differential_fairness(t, "sp", outcomes="both").epsilon
    bld = BinaryLabelDataset(
        df=frame[[*attrs, "y"]].astype(float),
        label_names=["y"],
        protected_attribute_names=attrs,
    )
    ref = BinaryLabelDatasetMetric(bld).smoothed_empirical_differential_fairness(1.0)
    assert ours_data == pytest.approx(ref, rel=1e-10)
    idx = pd.MultiIndex.from_frame(frame[attrs])
    y_true = pd.Series(frame["y"].to_numpy(), index=idx)
    y_pred = frame["pred"].to_numpy()
    assert ours_model == pytest.approx(smoothed_edf(y_true, y_pred, prot_attr=attrs), rel=1e-10)
