"""What kind of model an audit audits (``task`` in the audit config; issue "Beyond binary
classifiers").

* ``binary`` (default): a 0/1 label and a score per row (a probability, a logit or a hard 0/1
  prediction; ``score_type``), thresholded into decisions.
* ``regression``: a real-valued target and a real-valued prediction per row (``score_type:
  value``); thresholds, positive labels and probabilities do not apply.
* ``multiclass``: a class label and a predicted class per row (``score_type: class``; a model's
  ``predict``); thresholds and positive labels do not apply.
* ``ranking``: a ranking score per item (``score_type: value``, higher ranks higher: a score
  column, a regressor's ``predict`` or a classifier's probability of the positive class),
  optionally the list (query) each item is ranked in (``columns.list_id``) and its relevance
  (``columns.label``, optional: non-negative, 0/1 or graded).

Each method declares the tasks it is defined for (:class:`fairengine.registry.MethodSpec`); in
an audit of another task it is listed as not applicable, with the reason, and does not run.
"""

from __future__ import annotations

from typing import Literal

Task = Literal["binary", "regression", "multiclass", "ranking"]
TASKS: tuple[Task, ...] = ("binary", "regression", "multiclass", "ranking")

TASK_NOUNS: dict[str, str] = {
    "binary": "binary classifiers",
    "regression": "regression models",
    "multiclass": "multiclass classifiers",
    "ranking": "rankings",
}
"""What each task audits, for the "not applicable" reasons."""

#: The score type of each task when the config names none (``score_type`` applies to binary).
DEFAULT_SCORE_TYPE: dict[str, str] = {
    "binary": "probability",
    "regression": "value",
    "multiclass": "class",
    "ranking": "value",
}


def not_applicable_reason(method: str, tasks: tuple[str, ...], task: str) -> str:
    """Why ``method`` (defined for ``tasks``) does not run in an audit of ``task``."""
    defined = " and ".join(TASK_NOUNS.get(t, t) for t in tasks)
    return f"not applicable to a {task} audit: {method} is defined for {defined} (task: {tasks[0]})"
