"""Scores -> probabilities -> hard or expected predictions (fairengine.scores)."""

from __future__ import annotations

import numpy as np
import pytest

from fairengine.errors import DataContractError
from fairengine.scores import positive_prediction, to_probability


def test_sigmoid_closed_form_and_stability() -> None:
    s = np.array([-800.0, -2.0, 0.0, 2.0, 800.0])
    with np.errstate(all="raise"):  # no overflow warnings for extreme logits
        p = to_probability(s, "raw")
    np.testing.assert_allclose(p[1:4], 1 / (1 + np.exp(-s[1:4])), rtol=1e-15)
    assert p[0] == 0.0 and p[-1] == 1.0


def test_probability_passthrough() -> None:
    s = np.array([0.1, 0.9])
    np.testing.assert_array_equal(to_probability(s, "probability"), s)


def test_lift_threshold_example() -> None:
    """LiFT's own test (lift-semantics §1.1): RAW scores with t=0.6, applied after the sigmoid."""
    raw = np.array([0.3, 0.4, 0.8, 0.1, 0.7, 0.6, 0.9, 0.3, 0.2, 0.8])
    # LiFT's expected output: sigmoid first (sigmoid(0.4)=0.599 <= 0.6 < sigmoid(0.6)=0.646)
    np.testing.assert_array_equal(
        positive_prediction(to_probability(raw, "raw"), 0.6), [0, 0, 1, 0, 1, 1, 1, 0, 0, 1]
    )


def test_threshold_is_strict() -> None:
    # the same numbers read as probabilities: 0.6 is not > 0.6
    raw = np.array([0.3, 0.4, 0.8, 0.1, 0.7, 0.6, 0.9, 0.3, 0.2, 0.8])
    np.testing.assert_array_equal(positive_prediction(raw, 0.6), [0, 0, 1, 0, 1, 0, 1, 0, 0, 1])
    np.testing.assert_array_equal(positive_prediction(np.array([0.5, 0.5000001]), 0.5), [0, 1])


def test_no_threshold_gives_expected_counts() -> None:
    p = np.array([0.2, 0.7, 0.9])
    np.testing.assert_array_equal(positive_prediction(p, None), p)
    assert positive_prediction(p, None).sum() == pytest.approx(1.8)


def test_bad_inputs() -> None:
    with pytest.raises(DataContractError, match="score_type"):
        to_probability(np.zeros(2), "logits")
    with pytest.raises(DataContractError, match="threshold"):
        positive_prediction(np.zeros(2), -0.1)
