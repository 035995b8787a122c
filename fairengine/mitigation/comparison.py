"""Side-by-side comparison with fairlearn's ``ThresholdOptimizer`` on one attribute.

fairlearn (Hardt et al. 2016; notes ``intersectional.md`` §2.1) equalises a rate *exactly* across
the groups of one (merged) sensitive column, with group-specific randomised thresholds, for the
accuracy objective. We fit it on the calibration split with the audited scores as a prefit
estimator and compare on the held-out split: expected loss and smoothed ε of the constrained
metrics, for the base classifier, fairlearn, and RTDP at the target ε and at ε = 0 (fairlearn's
own target). fairlearn is optional: without it the comparison is skipped with a reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin

from fairengine.intersectional.cells import table_from_arrays
from fairengine.intersectional.metrics import differential_fairness
from fairengine.mitigation.result import ComparisonRow

#: our constraint -> fairlearn's constraints argument
FAIRLEARN_CONSTRAINTS = {
    "sp": "demographic_parity",
    "tpr": "true_positive_rate_parity",
    "fpr": "false_positive_rate_parity",
    "eo": "equalized_odds",
}


class _ScoreAsEstimator(ClassifierMixin, BaseEstimator):
    """A prefit "estimator" whose ``predict_proba`` is the score column of X."""

    def fit(self, x: Any, y: Any) -> _ScoreAsEstimator:
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, x: pd.DataFrame) -> np.ndarray:
        f = np.asarray(x["score"], dtype=np.float64)
        return np.column_stack([1 - f, f])

    def predict(self, x: pd.DataFrame) -> np.ndarray:
        return (np.asarray(x["score"]) > 0.5).astype(int)


def fairlearn_probabilities(
    constraint: str,
    fit: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    seed: int = 0,
) -> np.ndarray:
    """P(ỹ = 1) on the test rows from a ThresholdOptimizer fitted on ``fit = (labels, y, score)``;
    ``test = (labels, score)``. Raises ImportError without fairlearn."""
    from fairlearn.postprocessing import ThresholdOptimizer

    labels_fit, y_fit, f_fit = fit
    labels_test, f_test = test
    opt = ThresholdOptimizer(
        estimator=_ScoreAsEstimator().fit(None, None),
        constraints=FAIRLEARN_CONSTRAINTS[constraint],
        objective="accuracy_score",
        prefit=True,
        predict_method="predict_proba",
    )
    opt.fit(pd.DataFrame({"score": f_fit}), y_fit, sensitive_features=labels_fit)
    pmf = opt._pmf_predict(pd.DataFrame({"score": f_test}), sensitive_features=labels_test)
    return np.asarray(pmf)[:, 1]


def compare_row(
    name: str,
    pi: np.ndarray,
    y: np.ndarray,
    codes: np.ndarray,
    levels: tuple[str, ...],
    attribute: str,
    metrics: list[str],
    *,
    cost_fp: float,
    cost_fn: float,
    alpha: float,
    beta: float,
    outcomes: str,
) -> ComparisonRow:
    """Expected loss and smoothed ε per metric of decisions with P(ỹ = 1) = ``pi``."""
    table = table_from_arrays([attribute], [levels], [codes], y, pi, hard=False)
    loss = float(np.mean(np.where(y == 1, cost_fn * (1 - pi), cost_fp * pi)))
    eps = {
        m: float(differential_fairness(table, m, alpha=alpha, beta=beta, outcomes=outcomes).epsilon)
        for m in metrics
    }
    accuracy = float(np.mean(np.where(y == 1, pi, 1 - pi)))
    return ComparisonRow(name=name, loss=loss, accuracy=accuracy, epsilon=eps)
