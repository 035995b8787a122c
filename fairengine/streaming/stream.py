"""One pass over a large table: every record batch checked, scored, folded into the count grid
and offered to the stratified sample (:func:`stream_counts`).

Memory is bounded by the batch (``batch_rows`` rows, or a Parquet row group when that is larger:
the reader decodes a column chunk at a time), the grid and the sample, not by the number of rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fairengine.roles import ColumnRoles
from fairengine.streaming.batches import DEFAULT_BINS, MODEL_SCORE_COLUMN, fold_plan
from fairengine.streaming.scoring import ScoreModel
from fairengine.streaming.sources import DEFAULT_BATCH_ROWS, StreamSource
from fairengine.streaming.tables import StreamedCounts

__all__ = ["DEFAULT_BINS", "MODEL_SCORE_COLUMN", "stream_counts"]


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
    storage_options: Mapping[str, Any] | None = None,
) -> StreamedCounts:
    """Stream ``source`` once and return its :class:`StreamedCounts`.

    Parameters
    ----------
    source : a :class:`StreamSource` or what opens one (a Parquet file, folder, glob, list of
        files, or a CSV glob; local, or an object-store URL such as ``s3://bucket/data/`` with
        ``storage_options`` for its fsspec filesystem).
    roles, score_type, threshold, positive_label : as
        :meth:`fairengine.dataset.AuditDataset.from_frame`.
    model : scores each batch when ``roles.score`` is None (:mod:`.scoring`); ``features`` are
        its input columns (default ``roles.features``).
    batch_rows : rows per record batch.
    bins : score-histogram bins for the binned AUC (None: none).
    sample_rows : size of the stratified sample (:mod:`.sample`; None: no sample);
        ``sample_columns`` the extra columns it keeps (default: the features).
    seed : seed of the sample's keys (:func:`fairengine.streaming.sample.row_keys`).
    """
    started = time.perf_counter()
    plan = fold_plan(
        roles,
        score_type=score_type,
        threshold=threshold,
        positive_label=positive_label,
        model=model,
        features=features,
        bins=bins,
        sample_rows=sample_rows,
        sample_columns=sample_columns,
        seed=seed,
    )
    src = (
        source
        if isinstance(source, StreamSource)
        else StreamSource(
            source,
            format=format,
            batch_rows=batch_rows,
            dictionary_columns=roles.protected,
            storage_options=storage_options,
        )
    )
    folder = plan.folder()
    reservoir = plan.reservoir()
    n_batches = 0
    for batch in src.batches(plan.columns):
        plan.fold(folder, reservoir, batch.where, batch.data, name=batch.file, start=batch.start)
        n_batches += 1
    return plan.finish(folder, reservoir, files=src.files, n_batches=n_batches, started=started)
