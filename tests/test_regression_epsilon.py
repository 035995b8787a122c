"""ε-differential fairness of a regression model's binned predictions
(:mod:`fairengine.regression.binned_epsilon`): equal to a direct computation from the bin
counts, consistent for a known truth (two normal prediction distributions, fixed bins: ε in
closed form from Φ), posterior-interval coverage in a simulation, the intersection of two
attributes, the method's findings and JSON round trip, and clear errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset, GroupEncoding
from fairengine.errors import ConfigError, DataContractError
from fairengine.finding_keys import part_token
from fairengine.regression.binned_epsilon import bin_edges, binned_epsilons
from fairengine.regression.config import RegressionConfig
from fairengine.regression.method import run_regression_metrics
from fairengine.regression.result import RegressionDetails
from fairengine.result_codec import decode, encode
from fairengine.roles import ColumnRoles

EDGES = [-1.0, 0.0, 1.0]


def _two_groups(n: int, shift: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    codes = (rng.random(n) < 0.4).astype(np.int64)
    return rng.normal(size=n) + shift * codes, codes


def _true_epsilon(shift: float) -> float:
    cuts = np.array([-np.inf, *EDGES, np.inf])
    pa = np.diff(stats.norm.cdf(cuts))
    pb = np.diff(stats.norm.cdf(cuts - shift))
    return float(np.max(np.abs(np.log(pa) - np.log(pb))))


def test_epsilon_equals_a_direct_computation_from_the_bin_counts() -> None:
    rng = np.random.default_rng(0)
    pred, codes = _two_groups(3000, 0.5, rng)
    enc = GroupEncoding("g", codes.astype(np.uint8), ("a", "b"))
    (eps,) = binned_epsilons(pred, [enc], bins=5, n_draws=0)
    edges = np.quantile(pred, [0.2, 0.4, 0.6, 0.8])
    bins = np.searchsorted(edges, pred, side="right")
    counts = np.array([np.bincount(bins[codes == s], minlength=5) for s in (0, 1)], float)
    alpha = 1.0 / 5
    logr = np.log(counts + alpha) - np.log(counts.sum(1, keepdims=True) + 5 * alpha)
    assert eps.epsilon == pytest.approx(float(np.max(logr.max(0) - logr.min(0))), abs=1e-12)
    assert eps.classes[0].startswith("< ") and eps.classes[-1].startswith(">= ")
    np.testing.assert_allclose(np.array(eps.counts), counts)


def test_consistent_for_the_closed_form_truth() -> None:
    rng = np.random.default_rng(1)
    pred, codes = _two_groups(400_000, 0.5, rng)
    enc = GroupEncoding("g", codes.astype(np.uint8), ("a", "b"))
    (eps,) = binned_epsilons(pred, [enc], bins=EDGES, n_draws=0)
    assert eps.epsilon == pytest.approx(_true_epsilon(0.5), abs=0.03)


def test_posterior_interval_coverage() -> None:
    """200 data sets of 4,000 rows: the 90 % posterior interval covers the true ε in
    0.82–0.97 of them (the binomial 99.9 % band around 0.90 is 0.83–0.96)."""
    truth = _true_epsilon(0.5)
    rng = np.random.default_rng(2)
    covered = 0
    reps = 200
    for i in range(reps):
        pred, codes = _two_groups(4000, 0.5, rng)
        enc = GroupEncoding("g", codes.astype(np.uint8), ("a", "b"))
        (eps,) = binned_epsilons(pred, [enc], bins=EDGES, n_draws=400, confidence_level=0.9, seed=i)
        assert eps.posterior is not None
        iv = eps.posterior.interval
        covered += iv.low <= truth <= iv.high
    assert 0.82 <= covered / reps <= 0.97, covered / reps


def _dataset(n: int = 2000) -> AuditDataset:
    rng = np.random.default_rng(3)
    df = pd.DataFrame({
        "sex": rng.choice(["f", "m"], n),
        "race": rng.choice(["x", "y", "z"], n),
        "y": rng.normal(size=n),
    })  # fmt: skip
    df["pred"] = df["y"] + 0.3 * (df["sex"] == "m") + rng.normal(scale=0.5, size=n)
    roles = ColumnRoles(label="y", protected=("sex", "race"), score="pred")
    return AuditDataset.from_frame(df, roles, task="regression")


def test_the_method_reports_each_attribute_and_the_intersection() -> None:
    ds = _dataset()
    res = run_regression_metrics(ds, RegressionConfig(n_permutations=99, epsilon_draws=200))
    found = {f.key: f for f in res.findings}
    both = f"reg_epsilon.{part_token('sex & race')}"
    for key in ("reg_epsilon.sex", "reg_epsilon.race", both):
        assert key in found and found[key].pvalue is None and found[key].interval is not None
    details = res.details
    assert isinstance(details, RegressionDetails) and len(details.epsilon) == 3
    assert details.epsilon[2].groups == ("f & x", "f & y", "f & z", "m & x", "m & y", "m & z")
    back = decode(RegressionDetails, json.loads(json.dumps(encode(details))))
    assert back == details
    off = run_regression_metrics(ds, RegressionConfig(n_permutations=99, epsilon_bins=None))
    assert not any(f.key.startswith("reg_epsilon") for f in off.findings)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1, "epsilon_bins must be a whole number >= 2"),
        ([1.0, 0.5], "epsilon_bins must be a whole number >= 2"),
        (True, "'methods.regression_metrics.epsilon_bins' must be an integer or a list, got True"),
    ],
)
def test_bad_bins_are_named(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AuditConfig.from_dict(
            {"task": "regression", "methods": {"regression_metrics": {"epsilon_bins": value}}}
        )


def test_too_few_distinct_predictions_ask_for_edges() -> None:
    with pytest.raises(DataContractError, match="give the bin edges"):
        bin_edges(np.zeros(100), 5)
    assert bin_edges(np.arange(100.0), [3, 1, 2][:1]).tolist() == [3.0]
