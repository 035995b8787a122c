"""The data contract of :meth:`fairengine.dataset.AuditDataset.from_frame`, checked batch by
batch: nulls in the label, a protected attribute or the score; a non-binary label; a continuous
protected attribute; a non-numeric, non-finite or out-of-range score; negative or non-finite
weights. Each error names the file and the batch and counts the rows at fault
(``part-00017.parquet, batch 0: 3 rows with a null 'race'``). The checks that need every row
(at most two label values over all batches, the positive label among them, at least two groups,
positive total weight) are made by :class:`~fairengine.streaming.folding.CountFolder` at the end.

The numbers produced are the pandas path's: the label is ``1{y = positive_label}`` (pandas
equality), the probability :func:`fairengine.scores.to_probability` of the score and the
prediction :func:`fairengine.scores.positive_prediction` of the probability.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from fairengine.errors import DataContractError
from fairengine.scores import ScoreType, positive_prediction, to_probability


@dataclass(frozen=True)
class CheckedBatch:
    """One batch after the contract: label 0/1 (int8), each protected attribute's values (an
    arrow array without nulls), probability and prediction (None without scores), weights
    (None without a weight column), and the label values seen in the batch."""

    where: str
    n_rows: int
    label: np.ndarray
    label_values: list[Any]
    groups: dict[str, pa.Array]
    probability: np.ndarray | None
    prediction: np.ndarray | None
    weights: np.ndarray | None


def _array(batch: pa.RecordBatch, name: str, *, decode: bool = True) -> pa.Array:
    """Column ``name`` of the batch; a dictionary-encoded one decoded unless ``decode`` is
    False."""
    col = batch.column(batch.schema.get_field_index(name))
    if decode and pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col


def _nulls(where: str, col: pa.Array, name: str, what: str) -> None:
    if col.null_count:
        raise DataContractError(
            f"{where}: {col.null_count} row(s) with a null {name!r} ({what}); every row needs one"
        )


def check_label(
    where: str, col: pa.Array, name: str, positive_label: Any
) -> tuple[np.ndarray, list[Any]]:
    """``1{y = positive_label}`` (int8) and the distinct label values of the batch."""
    _nulls(where, col, name, "label")
    series = col.to_pandas()
    values = pd.unique(series).tolist()
    if len(values) > 2:
        shown = sorted(map(repr, values))[:6]
        raise DataContractError(
            f"{where}: label column {name!r} must be binary; found {len(values)} distinct values "
            f"(e.g. {', '.join(shown)})"
        )
    return (series == positive_label).to_numpy(dtype=bool).astype(np.int8), values


def check_protected(where: str, col: pa.Array, name: str) -> pa.Array:
    """The attribute's values (no nulls; a float attribute must hold whole numbers), possibly
    dictionary-encoded."""
    _nulls(where, col, name, "protected attribute")
    if pa.types.is_floating(col.type):
        x = col.to_numpy(zero_copy_only=False)
        bad = int(np.count_nonzero(np.mod(x, 1) != 0))
        if bad:
            raise DataContractError(
                f"{where}: protected attribute {name!r} is continuous ({bad} non-integer "
                "value(s)); bin it into groups first (e.g. pd.cut)"
            )
    return col


def check_scores(
    where: str, col: pa.Array | np.ndarray, name: str, score_type: ScoreType
) -> np.ndarray:
    """The probability of a positive prediction per row (the score checked as the pandas path
    checks it: numeric, finite, in [0, 1] for probabilities, 0/1 for labels)."""
    if isinstance(col, pa.Array):
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            raise DataContractError(
                f"{where}: score column {name!r} must be numeric; found type {col.type}"
            )
        nulls = col.null_count
        s = col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    else:
        nulls = 0
        s = np.asarray(col, dtype=np.float64)
    bad = ~np.isfinite(s)
    if nulls or bad.any():
        raise DataContractError(
            f"{where}: score column {name!r} has {int(bad.sum())} missing or infinite value(s)"
        )
    if score_type == "probability":
        out = int(np.count_nonzero((s < 0) | (s > 1)))
        if out:
            raise DataContractError(
                f"{where}: score column {name!r} is declared score_type='probability' but {out} "
                "value(s) lie outside [0, 1]; use score_type='raw' for logits"
            )
    if score_type == "label":
        out = int(np.count_nonzero((s != 0) & (s != 1)))
        if out:
            raise DataContractError(
                f"{where}: score column {name!r} is declared score_type='label' but {out} "
                "value(s) are neither 0 nor 1"
            )
    return to_probability(s, score_type)


def check_weights(where: str, col: pa.Array, name: str) -> np.ndarray:
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise DataContractError(
            f"{where}: weight column {name!r} must be numeric; found type {col.type}"
        )
    w = col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    bad = int(np.count_nonzero(~np.isfinite(w) | (w < 0))) + (
        col.null_count if col.null_count else 0
    )
    if bad:
        raise DataContractError(
            f"{where}: weight column {name!r} must be finite and non-negative; {bad} "
            "value(s) are not"
        )
    return w


def predictions(probability: np.ndarray | None, threshold: float | None) -> np.ndarray | None:
    return None if probability is None else positive_prediction(probability, threshold)
