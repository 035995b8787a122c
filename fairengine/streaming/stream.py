"""One pass over a large table: every record batch checked, scored, folded into the count grid
and offered to the stratified sample (:func:`stream_counts`).

Memory is bounded by the batch (``batch_rows`` rows, or a Parquet row group when that is larger:
the reader decodes a column chunk at a time), the grid and the sample, not by the number of rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from fairengine.errors import DataContractError
from fairengine.roles import ColumnRoles
from fairengine.scores import check_score_type, effective_threshold
from fairengine.streaming.contract import (
    CheckedBatch,
    _array,
    check_label,
    check_protected,
    check_scores,
    check_weights,
    predictions,
)
from fairengine.streaming.folding import CountFolder
from fairengine.streaming.sample import StratifiedReservoir
from fairengine.streaming.scoring import ScoreModel, model_scores
from fairengine.streaming.sources import DEFAULT_BATCH_ROWS, StreamSource
from fairengine.streaming.tables import StreamedCounts

#: The sample's column of the model's scores (when a model scores the batches).
MODEL_SCORE_COLUMN = "__model_score"

#: Score-histogram bins of the binned AUC (the pandas path's automatic choice above 1M rows).
DEFAULT_BINS = 4096


def stream_counts(
    source: StreamSource | str | os.PathLike[str] | Sequence[str],
    roles: ColumnRoles,
    *,
    score_type: str = "probability",
    threshold: float | None = None,
    positive_label: Any = 1,
    model: ScoreModel | None = None,
    features: Sequence[str] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    bins: int | None = DEFAULT_BINS,
    sample_rows: int | None = None,
    sample_columns: Sequence[str] | None = None,
    seed: int = 0,
    format: str | None = None,
) -> StreamedCounts:
    """Stream ``source`` once and return its :class:`StreamedCounts`.

    Parameters
    ----------
    source : a :class:`StreamSource` or what opens one (a Parquet file, folder, glob, list of
        files, or a CSV glob).
    roles, score_type, threshold, positive_label : as
        :meth:`fairengine.dataset.AuditDataset.from_frame`.
    model : scores each batch when ``roles.score`` is None (:mod:`.scoring`); ``features`` are
        its input columns (default ``roles.features``).
    batch_rows : rows per record batch.
    bins : score-histogram bins for the binned AUC (None: none).
    sample_rows : size of the stratified sample (:mod:`.sample`; None: no sample);
        ``sample_columns`` the extra columns it keeps (default: the features).
    seed : seed of the sample's keys.
    """
    started = time.perf_counter()
    src = (
        source
        if isinstance(source, StreamSource)
        else StreamSource(
            source, format=format, batch_rows=batch_rows, dictionary_columns=roles.protected
        )
    )
    st = check_score_type(score_type)
    t = effective_threshold(st, threshold)
    has_scores = roles.score is not None or model is not None
    feats = list(features if features is not None else (roles.features or ()))
    if roles.score is None and model is not None and not feats:
        raise DataContractError(
            "a model needs its feature columns: give features or roles.features"
        )
    extra = list(sample_columns if sample_columns is not None else feats) if sample_rows else []
    columns = list(
        dict.fromkeys(
            [
                *roles.role_columns(),
                *(feats if model is not None and roles.score is None else []),
                *extra,
            ]
        )
    )
    folder = CountFolder(
        roles.protected,
        hard=t is not None or not has_scores,
        weighted=roles.weight is not None,
        bins=bins if has_scores else None,
    )
    reservoir = StratifiedReservoir(roles.protected, sample_rows, seed) if sample_rows else None
    label_column = roles.label
    if label_column is None:
        raise DataContractError("a streamed audit needs a label column (roles.label)")
    n_batches = 0
    for batch in src.batches(columns):
        where = batch.where
        data = batch.data
        label, label_values = check_label(
            where, _array(data, label_column), label_column, positive_label
        )
        groups = {
            a: check_protected(where, _array(data, a, decode=False), a) for a in roles.protected
        }
        probability = None
        if roles.score is not None:
            probability = check_scores(where, _array(data, roles.score), roles.score, st)
        elif model is not None:
            probability = check_scores(
                where, model_scores(model, data, feats, where), "model score", st
            )
        weights = (
            check_weights(where, _array(data, roles.weight), roles.weight) if roles.weight else None
        )
        checked = CheckedBatch(
            where,
            data.num_rows,
            label,
            label_values,
            groups,
            probability,
            predictions(probability, t),
            weights,
        )
        codes = folder.add(checked)
        if reservoir is not None:
            sample_data = data.select([c for c in columns if c in data.schema.names])
            if probability is not None and roles.score is None:
                sample_data = sample_data.append_column(MODEL_SCORE_COLUMN, pa.array(probability))
            reservoir.add(sample_data, codes, label, folder.shape)
        n_batches += 1
    if folder.n_rows == 0:
        raise DataContractError("the data has no rows; an audit needs at least one row per group")
    if len(folder.label_values) > 2:
        shown = sorted(map(repr, folder.label_values))[:6]
        raise DataContractError(
            f"label column {roles.label!r} must be binary; over all files it has "
            f"{len(folder.label_values)} distinct values (e.g. {', '.join(shown)})"
        )
    if len(folder.label_values) == 2 and folder.n_positive == 0:
        shown = sorted(map(repr, folder.label_values))
        raise DataContractError(
            f"label column {roles.label!r} has values {', '.join(shown)} but positive_label="
            f"{positive_label!r} is not one of them; set positive_label"
        )
    if roles.weight is not None and not folder.weight_total > 0:
        raise DataContractError(f"weight column {roles.weight!r} sums to zero")
    categories, order = folder.categories()
    grid, hw, hw2 = folder.sorted_grid(order)
    sample = None
    if reservoir is not None:
        values = {a: _discovery_values(categories[a], order[a]) for a in roles.protected}
        sample = reservoir.result(values, order)
    return StreamedCounts(
        roles=roles,
        categories=categories,
        grid=grid,
        n_rows=folder.n_rows,
        score_type=st,
        threshold=t,
        positive_label=positive_label,
        weighted=roles.weight is not None,
        has_scores=has_scores,
        bins=folder.bins if hw is not None else None,
        hist_w=hw,
        hist_w2=hw2,
        files=tuple(src.files),
        n_batches=n_batches,
        sample=sample,
        label_rate=folder.n_positive / folder.n_rows,
        seconds={"stream": time.perf_counter() - started},
    )


def _discovery_values(categories: tuple[str, ...], order: np.ndarray) -> list[str]:
    """The category of each discovery code."""
    return [categories[int(s)] for s in order]
