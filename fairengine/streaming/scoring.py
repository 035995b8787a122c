"""Scores of a streamed batch: a score column of the data, or a model applied batch by batch.

A model is anything with a ``predict_proba``-like call: a callable ``f(features) -> scores`` on a
pandas DataFrame of the feature columns, returning one score per row or an ``(n, 2)`` array
whose second column is the positive class's (scikit-learn's ``predict_proba`` layout). The
product's model objects plug in as ``lambda X: source_scores(model, source, X)``
(:func:`fairengine.model_scores.source_scores`). Scores are then checked against the
``score_type`` like a score column (:func:`fairengine.streaming.contract.check_scores`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from fairengine.errors import DataContractError

ScoreModel = Callable[[pd.DataFrame], Any]


def model_scores(
    model: ScoreModel, data: pa.RecordBatch, features: list[str], where: str
) -> np.ndarray:
    """One score per row of ``data`` from ``model`` on its ``features`` columns."""
    frame = pa.Table.from_batches([data.select(features)]).to_pandas()
    try:
        out = np.asarray(model(frame))
    except Exception as exc:  # the model's own error, named with the batch
        raise DataContractError(
            f"{where}: the model failed on this batch: {type(exc).__name__}: {exc}"
        ) from exc
    if out.ndim == 2 and out.shape[1] == 2:
        out = out[:, 1]
    if out.shape != (data.num_rows,):
        raise DataContractError(
            f"{where}: the model returned shape {out.shape}; expected one score per row "
            f"({data.num_rows}) or (n, 2) class probabilities"
        )
    try:
        return out.astype(np.float64)
    except (TypeError, ValueError):
        raise DataContractError(
            f"{where}: the model returned non-numeric scores ({out.dtype})"
        ) from None
