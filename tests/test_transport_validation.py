"""The held-out validation protocol (§4.3): statistics cross-checked against scipy, a correct
map passes and a wrong map is flagged."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fairengine.transport import LinearOTMap, validate_map
from fairengine.transport._base import TransportMap
from fairengine.transport.validation import _energy_permutation, _ks_permutation


class _Identity(TransportMap):
    """A deliberately wrong map (no transport at all)."""

    def __init__(self, standardize: bool = True, min_samples: int = 10) -> None:
        self.standardize = standardize
        self.min_samples = min_samples

    def _fit(self, zs, zt):
        pass

    def _transform(self, z):
        return z


def test_ks_and_energy_match_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=150), rng.normal(0.3, 1.2, size=120)
    a[:10] = b[:10]  # ties across samples
    stat, null = _ks_permutation(a, b, rng, 50)
    assert stat == pytest.approx(stats.ks_2samp(a, b).statistic)
    assert null.shape == (50,)
    e, enull = _energy_permutation(a[:, None], b[:, None], rng, 20)
    # scipy's energy_distance is the square root of the 1-D energy distance
    assert np.sqrt(e) == pytest.approx(stats.energy_distance(a, b), rel=1e-10)
    assert enull.shape == (20,)


@pytest.fixture(scope="module")
def gaussians():
    rng = np.random.default_rng(1)
    xs = rng.normal(size=(1500, 2))
    xt = rng.normal(size=(1500, 2)) @ np.array([[1.3, 0.4], [0.0, 0.8]]) + 1.0
    return xs, xt


def test_correct_map_passes(gaussians):
    """The linear map is the true OT map between Gaussians: every check passes."""
    xs, xt = gaussians
    v = validate_map(LinearOTMap(), xs, xt, decide=lambda x: x.sum(1) > 2, random_state=3)
    assert v.passed, v.warnings
    assert all(k < q for k, q in zip(v.ks, v.ks_null_q95, strict=True))
    assert v.monotonicity_violation == 0.0
    assert 0.9 < v.cost_ratio < 1.2
    assert v.cycle_error < 1e-8
    assert v.exact_agreement > 0.9
    assert v.to_dict()["passed"] is True


def test_wrong_map_is_flagged(gaussians):
    xs, xt = gaussians
    v = validate_map(_Identity(), xs, xt, decide=lambda x: x.sum(1) > 2, random_state=3)
    assert not v.passed
    assert v.energy_pvalue < 0.05
    assert v.positive_rate_gap_ci[1] < 0  # identity maps too few points into the positive region
    assert any("KS" in w for w in v.warnings)
