"""Scores to probabilities to (hard or expected) positive predictions.

Follows LiFT's conventions (``../shared/docs/lift-semantics.md`` §1.1):

* ``score_type="raw"``: p = 1 / (1 + e^(−s)) (the logistic sigmoid);
  ``score_type="probability"``: p = s, which must lie in [0, 1];
  ``score_type="label"``: s is a hard 0/1 prediction ŷ and p = ŷ; the threshold does not apply
  (ŷ is its own decision: 1{ŷ > t} = ŷ for every t in [0, 1)), and ranking metrics such as the
  AUC are not applicable (one step, no ranking).
* ``score_type="value"``: the prediction of a regression model (``task: regression``), a real
  number audited as it is; thresholds and probabilities do not apply.
* ``score_type="class"``: the predicted class of a multiclass classifier (``task:
  multiclass``), one of the label's values.
* With a threshold t, the prediction is ŷ = 1{p > t} (**strict**), on the probability scale.
* Without a threshold, p itself is the probability of a positive prediction, so summing it over a
  group gives the *expected* number of positive predictions ("expected counts").
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from scipy.special import expit

from fairengine.errors import DataContractError

#: Tolerance on |Σ_c P_ic − 1| for a row of class probabilities (multiclass audits).
ROW_SUM_TOLERANCE = 1e-6

ScoreType = Literal["raw", "probability", "label", "value", "class"]
SCORE_TYPES: tuple[str, ...] = ("raw", "probability", "label", "value", "class")
BINARY_SCORE_TYPES: tuple[str, ...] = ("raw", "probability", "label")
"""The score types of a binary audit; ``value`` is a regression model's prediction, ``class``
a multiclass classifier's predicted class."""

#: The threshold of hard 0/1 labels: 1{ŷ > 0.5} = ŷ, so labels are their own predictions.
LABEL_THRESHOLD = 0.5

#: Why AUC-type metrics are not computed for ``score_type: label`` (shown in the results).
LABEL_AUC_REASON = (
    "not applicable: score_type is label (hard 0/1 predictions); an AUC needs scores that rank "
    "the rows, and the AUC of a 0/1 prediction is only (TPR + TNR) / 2"
)


def check_score_type(score_type: str) -> ScoreType:
    """Return ``score_type`` if valid, else raise naming the valid values."""
    if score_type not in SCORE_TYPES:
        raise DataContractError(
            f"score_type must be one of {list(SCORE_TYPES)}, got {score_type!r}"
        )
    return score_type  # type: ignore[return-value]


def check_threshold(threshold: float | None) -> float | None:
    """Return ``threshold`` as a float in [0, 1] (or ``None``), else raise."""
    if threshold is None:
        return None
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        raise DataContractError(
            f"threshold must be a number in [0, 1] on the probability scale or null, "
            f"got {threshold!r}"
        ) from None
    if not 0.0 <= t <= 1.0:
        raise DataContractError(
            f"threshold must lie in [0, 1] (it applies to probabilities, after the sigmoid for "
            f"raw scores), got {t}"
        )
    return t


def positive_class_scores(output: Any, n_rows: int) -> np.ndarray | None:
    """Scores of the positive class from a model's ``predict`` output (array or pandas):
    column 1 of two class probabilities, the only column of one, or the 1-D output itself;
    ``None`` when the output is not one score per row of ``n_rows``."""
    values = output.to_numpy() if hasattr(output, "to_numpy") else output
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 2 and arr.shape[1] == 2:
        arr = arr[:, 1]
    elif arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1 or arr.shape[0] != n_rows:
        return None
    return arr


def effective_threshold(score_type: str, threshold: float | None) -> float | None:
    """The threshold that turns probabilities into predictions: ``threshold`` (checked), but
    :data:`LABEL_THRESHOLD` for hard labels whatever was configured, so that labels are audited
    as hard predictions (not as expected counts)."""
    if check_score_type(score_type) == "label":
        return LABEL_THRESHOLD
    return check_threshold(threshold)


def to_probability(score: np.ndarray, score_type: ScoreType) -> np.ndarray:
    """Map scores to probabilities: the sigmoid for raw scores, identity for probabilities and
    for hard 0/1 labels (whose "probability" of a positive prediction is the label itself).

    The sigmoid is scipy's ``expit``, which is stable for large |s| (no overflow warnings).
    """
    s = np.asarray(score, dtype=np.float64)
    if check_score_type(score_type) == "raw":
        return expit(s)
    return s


def positive_prediction(
    prob: np.ndarray, threshold: float | None, score_type: str | None = None
) -> np.ndarray:
    """Probability of a positive prediction per row.

    With a threshold: the hard prediction 1{p > t} as 0.0/1.0. Without: p itself, so group sums
    are expected counts of positive predictions. With ``score_type="label"`` p is already the
    0/1 prediction and is returned as it is (the threshold does not apply).
    """
    p = np.asarray(prob, dtype=np.float64)
    if score_type is not None and check_score_type(score_type) == "label":
        return p.copy()
    t = check_threshold(threshold)
    if t is None:
        return p
    return (p > t).astype(np.float64)
