"""Inequality indices (fairengine.inequality): hand-computed values, identities, limits at
zero, LiFT's quirks, and AIF360's generalized_entropy_index on a real benefit vector."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from fairengine.errors import DataContractError
from fairengine.inequality import (
    aggregate,
    aggregate_name,
    atkinson_index,
    coefficient_of_variation,
    generalized_entropy_index,
    theil_l_index,
    theil_t_index,
)

B = np.array([1.0, 2.0, 3.0])  # μ = 2, x = (.5, 1, 1.5)
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def aif360_gei(b: np.ndarray, alpha: float) -> float:
    """AIF360's formula (Speicher et al. 2018, eq. 3), written independently of ours."""
    mu = b.mean()
    if alpha == 1:
        return float(np.mean(b / mu * np.log(b / mu)))
    if alpha == 0:
        return float(-np.mean(np.log(b / mu)))
    return float(np.mean((b / mu) ** alpha - 1) / (alpha * (alpha - 1)))


def test_hand_computed_values() -> None:
    assert generalized_entropy_index(B, 2.0) == pytest.approx(0.5 / 6)  # (−.75 + 0 + 1.25)/6
    assert theil_t_index(B) == pytest.approx((0.5 * math.log(0.5) + 1.5 * math.log(1.5)) / 3)
    assert theil_l_index(B) == pytest.approx((math.log(2) - math.log(1.5)) / 3)
    assert coefficient_of_variation(B) == pytest.approx(math.sqrt(2 / 3) / 2)
    assert atkinson_index(B, 0.5) == pytest.approx(
        1 - ((math.sqrt(0.5) + 1 + math.sqrt(1.5)) / 3) ** 2
    )
    assert atkinson_index(B, 1.0) == pytest.approx(1 - 0.75 ** (1 / 3))
    assert atkinson_index(B, 0.0) == pytest.approx(0.0)


@pytest.mark.parametrize("alpha", [-1.0, 0.0, 0.5, 1.0, 2.0, 3.0])
def test_gei_matches_aif360_formula(alpha: float) -> None:
    b = np.random.default_rng(int(alpha * 10) + 20).uniform(0.1, 2.0, 50)
    assert generalized_entropy_index(b, alpha) == pytest.approx(aif360_gei(b, alpha), rel=1e-12)


def test_identities() -> None:
    b = np.random.default_rng(1).gamma(2.0, 1.0, 40)
    assert coefficient_of_variation(b) == pytest.approx(
        math.sqrt(2 * generalized_entropy_index(b, 2.0))
    )
    # GE is continuous in α at the Theil limits
    assert generalized_entropy_index(b, 1 + 1e-7) == pytest.approx(theil_t_index(b), rel=1e-5)
    assert generalized_entropy_index(b, 1e-7) == pytest.approx(theil_l_index(b), rel=1e-5)
    # Atkinson(ε) = 1 − (1 + ε(ε−1) GE(1−ε))^(1/(1−ε))  (Shorrocks 1980)
    eps = 0.5
    ge = generalized_entropy_index(b, 1 - eps)
    assert atkinson_index(b, eps) == pytest.approx(
        1 - (1 + eps * (eps - 1) * ge) ** (1 / (1 - eps))
    )
    # scale invariance
    assert theil_t_index(5 * b) == pytest.approx(theil_t_index(b))


def test_equal_vector_is_exactly_zero_in_default_mode_but_not_in_lift() -> None:
    v = [0.3, 0.3, 0.3]
    assert coefficient_of_variation(v) == 0.0
    lift = coefficient_of_variation(v, lift_compat=True)
    assert np.isnan(lift) or lift != 0.0  # Σb²/n − μ² is not exactly 0 (LiFT §3)


def test_zero_entries_take_the_limits() -> None:
    b = [0.0, 1.0, 2.0]
    x = np.array(b) / 1.0
    assert theil_t_index(b) == pytest.approx(np.mean([0.0, 0.0, 2 * math.log(2)]))
    assert theil_l_index(b) == np.inf
    assert atkinson_index(b, 1.0) == 1.0 and atkinson_index(b, 2.0) == 1.0
    assert generalized_entropy_index(b, 2.0) == pytest.approx(np.mean(x**2 - 1) / 2)
    # LiFT: 0·ln 0 = NaN in Theil T, +∞ in Theil L
    assert np.isnan(theil_t_index(b, lift_compat=True))
    assert theil_l_index(b, lift_compat=True) == np.inf


def test_negative_benefits() -> None:
    b = [-0.2, 0.1, 0.4]  # e.g. raw skews
    assert np.isnan(generalized_entropy_index(b, 2.0))
    assert np.isnan(theil_t_index(b)) and np.isnan(coefficient_of_variation(b))
    # LiFT: GEI on raw values, Theil on |b|
    mu = 0.1
    assert generalized_entropy_index(b, 2.0, lift_compat=True) == pytest.approx(
        np.sum((np.array(b) / mu) ** 2 - 1) / (3 * 2)
    )
    assert theil_t_index(b, lift_compat=True) == pytest.approx(theil_t_index(np.abs(b)))


def test_undefined_inputs_give_nan() -> None:
    for bad in ([], [0.0, 0.0], [1.0, np.nan]):
        assert np.isnan(generalized_entropy_index(bad, 2.0))
        assert np.isnan(atkinson_index(bad, 0.5))


def test_names_aliases_and_unknown() -> None:
    assert aggregate_name("atkinsons_index") == "ATKINSON_INDEX"
    assert aggregate_name("gei") == "GENERALIZED_ENTROPY_INDEX"
    assert aggregate("CV", B) == pytest.approx(coefficient_of_variation(B))
    assert aggregate("GENERALIZED_ENTROPY_INDEX", B, 0.0) == pytest.approx(theil_l_index(B))
    with pytest.raises(DataContractError, match=r"valid names.*THEIL_T_INDEX"):
        aggregate_name("GINI")
    with pytest.raises(DataContractError, match="epsilon"):
        atkinson_index(B, -1.0)


@pytest.mark.slow
def test_aif360_generalized_entropy_on_adult_benefit_vector() -> None:
    """AIF360's individual-fairness GEI uses b_i = ŷ_i − y_i + 1 (Speicher et al. 2018); on
    Adult with a simple rule as the prediction, our GEI of that vector equals AIF360's."""
    aif = pytest.importorskip("aif360.sklearn.metrics", reason="aif360 (dev extra) not installed")
    from fairengine.datasets import load_adult

    df = load_adult(DATA / "adult").frame
    y = df["income_gt_50k"].to_numpy()
    yhat = ((df["education_num"] >= 13) | (df["capital_gain"] > 5000)).to_numpy(int)
    b = yhat - y + 1.0
    for alpha in (0.0, 1.0, 2.0, 3.0):
        if alpha in (0.0,) and np.any(b == 0):
            assert theil_l_index(b) == np.inf
            continue
        ours = generalized_entropy_index(b, alpha)
        theirs = aif.generalized_entropy_index(b, alpha=alpha)
        assert ours == pytest.approx(theirs, rel=1e-12)
        assert ours == pytest.approx(aif360_gei(b, alpha) if alpha != 1 else ours)
    assert theil_t_index(b) == pytest.approx(aif.theil_index(b), rel=1e-12)
