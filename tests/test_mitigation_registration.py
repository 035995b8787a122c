"""Registration policy of the mitigated model (fairengine/mitigation/registration.py).

Unit checks of each ``register_if`` policy at and around the target, and one statistical check:
on the synthetic generator of notes §5 with a fixed rule whose true ε_eo is known in closed form
and exceeds the target, ``upper_bound`` registers it in at most ≈ 1 − confidence of held-out
samples (the one-sided bound's coverage), while ``point`` registers it far more often.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from fairengine.datasets import make_intersectional_synthetic
from fairengine.datasets.intersectional_synthetic import DEFAULT_MU0, DEFAULT_MU1
from fairengine.errors import ConfigError
from fairengine.mitigation import (
    REGISTER_POLICIES,
    MitigationConfig,
    RegistrationDecision,
    registration_decision,
)
from fairengine.mitigation.evaluation import EpsilonEstimate, evaluate_rule, rule_cells
from fairengine.mitigation.registration import target_met_level

TARGET = 0.1
BELOW = math.nextafter(TARGET, 0.0)
ABOVE = math.nextafter(TARGET, 1.0)


def eps(estimate: float, upper: float, metric: str = "eo") -> EpsilonEstimate:
    return EpsilonEstimate(
        metric=metric,
        estimate=estimate,
        low=min(estimate, upper) / 2,
        high=upper * 1.1,
        upper_bound=upper,
        prob_below_target=None,
        pair=(0, 1),
        component="fpr",
    )


# (point, upper) -> level; the target itself counts as met ("<= target")
LEVELS = [
    ((0.02, 0.05), "upper_bound"),
    ((BELOW, TARGET), "upper_bound"),
    ((TARGET, TARGET), "upper_bound"),
    ((TARGET, ABOVE), "point"),
    ((0.05, 0.81), "point"),
    ((ABOVE, 0.81), "no"),
    ((0.11, 0.81), "no"),
    ((0.05, math.inf), "point"),
    ((math.inf, math.inf), "no"),
    ((math.nan, math.nan), "no"),
    ((0.05, math.nan), "point"),
]


@pytest.mark.parametrize(("values", "level"), LEVELS)
def test_target_met_level_at_and_around_the_boundary(values, level) -> None:
    assert target_met_level({"eo": eps(*values)}, TARGET) == level


@pytest.mark.parametrize(("values", "level"), LEVELS)
@pytest.mark.parametrize("policy", REGISTER_POLICIES)
def test_each_policy_registers_exactly_at_its_level(values, level, policy) -> None:
    d = registration_decision({"eo": eps(*values)}, TARGET, policy, 0.95)
    expected = {
        "upper_bound": level == "upper_bound",
        "point": level in ("upper_bound", "point"),
        "always": True,
    }[policy]
    assert d.allowed is expected
    assert d.target_met == level and d.policy == policy
    assert d.point["eo"] == values[0] or math.isnan(values[0])
    assert f"register_if: {policy}" in d.reason


def test_reason_names_the_deciding_quantity_value_and_target() -> None:
    e = {"eo": eps(0.111, 0.812)}
    d = registration_decision(e, TARGET, "upper_bound", 0.95)
    assert not d.allowed
    assert d.reason.startswith("the held-out ε_eo 95 % upper bound 0.812 exceeds the target 0.1")
    assert "point estimate ε_eo 0.111" in d.reason
    d = registration_decision(e, TARGET, "point", 0.95)
    assert d.reason.startswith("the held-out ε_eo point estimate 0.111 exceeds the target 0.1")
    d = registration_decision({"eo": eps(0.02, 0.09)}, TARGET, "upper_bound", 0.9)
    assert d.allowed and "90 % upper bound 0.09 is within the target 0.1" in d.reason
    # point estimate above the target with the bound below (pathological): the point decides
    d = registration_decision({"eo": eps(0.12, 0.09)}, TARGET, "upper_bound", 0.95)
    assert not d.allowed and "point estimate 0.12 exceeds" in d.reason


def test_several_metrics_must_all_meet_the_target() -> None:
    e = {"tpr": eps(0.02, 0.05, "tpr"), "fpr": eps(0.05, 0.3, "fpr")}
    assert target_met_level(e, TARGET) == "point"
    d = registration_decision(e, TARGET, "upper_bound", 0.95)
    assert not d.allowed
    assert "ε_fpr 95 % upper bound 0.3 exceeds" in d.reason and "ε_tpr 95 %" not in d.reason
    assert d.upper_bound == {"tpr": 0.05, "fpr": 0.3}
    e["tpr"] = eps(0.2, 0.4, "tpr")
    assert target_met_level(e, TARGET) == "no"
    assert registration_decision(e, TARGET, "point", 0.95).allowed is False
    assert target_met_level({}, TARGET) == "no"


def test_decision_round_trips_through_strict_json() -> None:
    d = registration_decision({"eo": eps(0.05, math.inf)}, TARGET, "point", 0.95)
    back = RegistrationDecision.from_dict(json.loads(json.dumps(d.to_dict(), allow_nan=False)))
    assert back == d and back.upper_bound["eo"] == math.inf


def test_bad_policy_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"methods\.mitigation\.register_if"):
        registration_decision({"eo": eps(0.05, 0.05)}, TARGET, "bound", 0.95)
    with pytest.raises(ConfigError, match=r"methods\.mitigation\.register_if must be one of"):
        MitigationConfig(register_if="never")
    assert MitigationConfig().register_if == "upper_bound"


# a fixed rule on the 2 × 2 synthetic data: τ, p, q per intersection
TAU = np.array([0.4, 0.5, 0.6, 0.5])
P = np.array([0.05, 0.10, 0.0, 0.20])
Q = np.array([0.90, 0.80, 1.0, 0.70])


def true_eps_eo() -> float:
    """Population ε_eo of the rule: z | y, s ~ N(μ, 1), score σ(z) > τ ⇔ z > logit τ."""
    logit = np.log(TAU / (1 - TAU))
    tpr = P + (Q - P) * stats.norm.sf(logit - np.array(DEFAULT_MU1))
    fpr = P + (Q - P) * stats.norm.sf(logit - np.array(DEFAULT_MU0))
    return float(max(np.log(tpr.max() / tpr.min()), np.log(fpr.max() / fpr.min())))


@pytest.mark.slow
def test_upper_bound_policy_rarely_registers_a_rule_that_misses_the_target() -> None:
    truth = true_eps_eo()
    target = truth - 0.02  # the rule truly misses the target
    reps = 200
    registered = {p: 0 for p in REGISTER_POLICIES}
    rng = np.random.default_rng(1)
    for r in range(reps):
        d = make_intersectional_synthetic(n=20_000, seed=500 + r).frame
        g = ((d.attr_a == "a1").astype(int) * 2 + (d.attr_b == "b1").astype(int)).to_numpy()
        cells, rows = rule_cells(g, d.y.to_numpy(), d.score.to_numpy(), TAU)
        ev = evaluate_rule(cells, rows, P, Q, metrics=["eo"], n_draws=2000, n_realised=0,
                           rng=rng)
        decisions = {p: registration_decision(ev.epsilon, target, p, 0.95)
                     for p in REGISTER_POLICIES}
        for p, dec in decisions.items():
            registered[p] += dec.allowed
        # upper_bound registers => point registers
        assert decisions["point"].allowed or not decisions["upper_bound"].allowed
    # P(U <= target) <= P(U < truth) ≈ 0.05; Monte-Carlo sd over 200 reps ≈ 0.015: allow 4 sd
    assert registered["upper_bound"] / reps <= 0.05 + 0.062, registered
    assert registered["point"] / reps >= 0.2, registered
    assert registered["always"] == reps
