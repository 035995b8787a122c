"""What every engine does to one batch of rows, and how a pass ends.

:class:`FoldPlan` holds what a pass checks, scores and folds each batch with (roles, score type,
threshold, model, the columns read, the sample's size and seed). Its :meth:`FoldPlan.fold` is
the body of the pass for one batch — the data contract (:mod:`.contract`), the scores
(:mod:`.scoring`), the count grid (:mod:`.folding`) and the sample (:mod:`.sample`) — and is
the same whether the batch comes from the one-machine stream (:mod:`.stream`), a Dask
partition (:mod:`.dask_engine`) or a Spark ``mapInPandas`` task (:mod:`.spark_engine`).
:meth:`FoldPlan.finish` makes the checks that need all rows and builds the
:class:`~fairengine.streaming.tables.StreamedCounts`, so every engine ends in the same object.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from fairengine.errors import DataContractError, FairEngineError
from fairengine.roles import ColumnRoles
from fairengine.scores import ScoreType, check_score_type, effective_threshold
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
from fairengine.streaming.sample import StratifiedReservoir, row_keys
from fairengine.streaming.scoring import ScoreModel, model_scores
from fairengine.streaming.tables import StreamedCounts

#: The sample's column of the model's scores (when a model scores the batches).
MODEL_SCORE_COLUMN = "__model_score"

#: Score-histogram bins of the binned AUC (the pandas path's automatic choice above 1M rows).
DEFAULT_BINS = 4096


class ClusterError(FairEngineError):
    """A cluster engine could not finish the pass (workers lost beyond the retries, no
    scheduler, no Spark session)."""


@dataclass(frozen=True)
class FoldPlan:
    """How a pass treats each batch (module docstring); build it with :func:`fold_plan`."""

    roles: ColumnRoles
    score_type: ScoreType
    threshold: float | None
    positive_label: Any
    model: ScoreModel | None
    features: tuple[str, ...]
    columns: tuple[str, ...]
    bins: int | None
    sample_rows: int | None
    seed: int

    @property
    def has_scores(self) -> bool:
        return self.roles.score is not None or self.model is not None

    def folder(self) -> CountFolder:
        """An empty count folder."""
        return CountFolder(
            self.roles.protected,
            hard=self.threshold is not None or not self.has_scores,
            weighted=self.roles.weight is not None,
            bins=self.bins if self.has_scores else None,
        )

    def reservoir(self) -> StratifiedReservoir | None:
        """An empty sample reservoir (None without a sample)."""
        if not self.sample_rows:
            return None
        return StratifiedReservoir(self.roles.protected, self.sample_rows, self.seed)

    def check(self, where: str, data: pa.RecordBatch) -> CheckedBatch:
        """The batch after the data contract and the scoring; errors name ``where``."""
        roles = self.roles
        assert roles.label is not None  # fold_plan refuses a missing label
        label, label_values = check_label(
            where, _array(data, roles.label), roles.label, self.positive_label
        )
        groups = {
            a: check_protected(where, _array(data, a, decode=False), a) for a in roles.protected
        }
        probability = None
        if roles.score is not None:
            probability = check_scores(
                where, _array(data, roles.score), roles.score, self.score_type
            )
        elif self.model is not None:
            scores = model_scores(self.model, data, list(self.features), where)
            probability = check_scores(where, scores, "model score", self.score_type)
        weights = (
            check_weights(where, _array(data, roles.weight), roles.weight) if roles.weight else None
        )
        return CheckedBatch(
            where,
            data.num_rows,
            label,
            label_values,
            groups,
            probability,
            predictions(probability, self.threshold),
            weights,
        )

    def fold(
        self,
        folder: CountFolder,
        reservoir: StratifiedReservoir | None,
        where: str,
        data: pa.RecordBatch,
        *,
        name: str,
        start: int,
    ) -> None:
        """Check, score and fold one batch; offer it to the sample with the keys of rows
        ``start…`` of ``name`` (:func:`fairengine.streaming.sample.row_keys`)."""
        checked = self.check(where, data)
        codes = folder.add(checked)
        if reservoir is not None:
            sample_data = data.select([c for c in self.columns if c in data.schema.names])
            if checked.probability is not None and self.roles.score is None:
                sample_data = sample_data.append_column(
                    MODEL_SCORE_COLUMN, pa.array(checked.probability)
                )
            keys = row_keys(self.seed, name, start, data.num_rows)
            reservoir.add(
                sample_data, codes, checked.label, folder.shape, keys, name=name, start=start
            )

    def finish(
        self,
        folder: CountFolder,
        reservoir: StratifiedReservoir | None,
        *,
        files: Sequence[str],
        n_batches: int,
        started: float,
        engine: str = "stream",
    ) -> StreamedCounts:
        """The checks that need every row, then the :class:`StreamedCounts` of the pass."""
        roles = self.roles
        if folder.n_rows == 0:
            raise DataContractError(
                "the data has no rows; an audit needs at least one row per group"
            )
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
                f"{self.positive_label!r} is not one of them; set positive_label"
            )
        if roles.weight is not None and not folder.weight_total > 0:
            raise DataContractError(f"weight column {roles.weight!r} sums to zero")
        categories, order = folder.categories()
        grid, hw, hw2 = folder.sorted_grid(order)
        sample = None
        if reservoir is not None:
            values = {a: discovery_values(categories[a], order[a]) for a in roles.protected}
            sample = reservoir.result(values, order)
        return StreamedCounts(
            roles=roles,
            categories=categories,
            grid=grid,
            n_rows=folder.n_rows,
            score_type=self.score_type,
            threshold=self.threshold,
            positive_label=self.positive_label,
            weighted=roles.weight is not None,
            has_scores=self.has_scores,
            bins=folder.bins if hw is not None else None,
            hist_w=hw,
            hist_w2=hw2,
            files=tuple(files),
            n_batches=n_batches,
            sample=sample,
            label_rate=folder.n_positive / folder.n_rows,
            seconds={engine: time.perf_counter() - started},
        )


def fold_plan(
    roles: ColumnRoles,
    *,
    score_type: str = "probability",
    threshold: float | None = None,
    positive_label: Any = 1,
    model: ScoreModel | None = None,
    features: Sequence[str] | None = None,
    bins: int | None = DEFAULT_BINS,
    sample_rows: int | None = None,
    sample_columns: Sequence[str] | None = None,
    seed: int = 0,
) -> FoldPlan:
    """The :class:`FoldPlan` of a pass (parameters as :func:`fairengine.streaming.stream_counts`):
    the score type checked, the threshold settled, the columns to read listed."""
    if roles.label is None:
        raise DataContractError("a streamed audit needs a label column (roles.label)")
    st = check_score_type(score_type)
    t = effective_threshold(st, threshold)
    feats = list(features if features is not None else (roles.features or ()))
    if roles.score is None and model is not None and not feats:
        raise DataContractError(
            "a model needs its feature columns: give features or roles.features"
        )
    if sample_rows is not None and (
        isinstance(sample_rows, bool) or not isinstance(sample_rows, int) or sample_rows < 1
    ):
        raise DataContractError(f"sample_rows must be a positive integer, got {sample_rows!r}")
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
    return FoldPlan(
        roles=roles,
        score_type=st,
        threshold=t,
        positive_label=positive_label,
        model=model,
        features=tuple(feats),
        columns=tuple(columns),
        bins=bins,
        sample_rows=sample_rows,
        seed=seed,
    )


def discovery_values(categories: tuple[str, ...], order: np.ndarray) -> list[str]:
    """The category of each discovery code."""
    return [categories[int(s)] for s in order]
