"""The streamed audit's pass on a Dask cluster (``data.engine: dask``): one task per file or
partition, tree-reduced into the same :class:`~fairengine.streaming.tables.StreamedCounts` as the
one-machine stream.

**Tasks.** A Parquet/CSV source (a file, folder, glob or list; :class:`.sources.StreamSource`)
gives one :func:`dask.delayed` task per file: it reads the file in record batches, checks its
schema and each batch's data contract, scores the batch and folds it into a
:class:`~fairengine.streaming.folding.CountFolder` and a
:class:`~fairengine.streaming.sample.StratifiedReservoir` (:meth:`.batches.FoldPlan.fold`, the
one-machine stream's own step). A ``dask.dataframe.DataFrame`` gives one task per partition
(``to_delayed``), each checked against the frame's declared columns and dtypes first. Errors
name the file (``part-00017.parquet, batch 0: …``) or the partition (``partition 17 …``).

**Reduction.** The folders are merged pairwise in a tree of fan-in ``split_every``
(:meth:`CountFolder.merge`, :meth:`StratifiedReservoir.merge`) on the workers; the root is
finished on the client (:meth:`.batches.FoldPlan.finish`). Integer counts are exact in any order;
the categories are sorted at the end with ``pandas.factorize(sort=True)`` whatever the order
they were found in, so the codes, the tables and every p-value drawn from them with a seed equal
the stream's and the pandas path's. Float sums (probabilities, weights) equal them up to the
order of additions (≈1e-16 relative).

**Sample.** Each row's key is a seeded hash of its file and row offset
(:func:`fairengine.streaming.sample.row_keys`), so for files the merged sample is the one the
stream draws, whatever the cluster. For a DataFrame the key uses the partition number and the
row offset in the partition: the sample depends on the frame's partitioning (not on the
workers or the reduction).

**Cluster.** ``client`` (a ``distributed.Client``) or ``address`` (a scheduler's, e.g.
``tcp://scheduler:8786``); neither: for a DataFrame, the current client (the one its data may
live on) when there is one; else a ``LocalCluster`` of ``n_workers`` processes is started for
the pass and closed after. Tasks get ``retries`` retries (a worker lost mid-pass: its tasks run
again elsewhere). Dask retries every failed task, a contract error too (reading one bad file
again is cheap); the :class:`~fairengine.errors.DataContractError` is then raised on the client
with its message; anything else that stops the pass is a :class:`ClusterError`.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd
import pyarrow as pa

from fairengine.errors import DataContractError, FairEngineError
from fairengine.roles import ColumnRoles
from fairengine.streaming.batches import ClusterError, FoldPlan, fold_plan
from fairengine.streaming.folding import CountFolder
from fairengine.streaming.sample import StratifiedReservoir
from fairengine.streaming.sources import DEFAULT_BATCH_ROWS, StreamSource
from fairengine.streaming.tables import StreamedCounts

Folded = tuple[CountFolder, StratifiedReservoir | None, int]
"""A task's result: its folder, its sample reservoir and its number of batches."""


def fold_file(plan: FoldPlan, source: StreamSource, index: int, expected: dict) -> Folded:
    """Fold file ``index`` of ``source`` (one task)."""
    folder, reservoir = plan.folder(), plan.reservoir()
    n = 0
    for batch in source.file_batches(source.fragments[index], list(plan.columns), expected):
        plan.fold(folder, reservoir, batch.where, batch.data, name=batch.file, start=batch.start)
        n += 1
    return folder, reservoir, n


def fold_partition(
    plan: FoldPlan, frame: pd.DataFrame, index: int, dtypes: dict[str, str], batch_rows: int
) -> Folded:
    """Fold partition ``index`` of a Dask DataFrame (one task), its columns and dtypes checked
    against the frame's declared ``dtypes`` first."""
    name = f"partition {index}"
    missing = [c for c in plan.columns if c not in frame.columns]
    if missing:
        raise DataContractError(
            f"{name}: missing column(s) {missing}; the partition has columns {list(frame.columns)}"
        )
    for col in plan.columns:
        if str(frame[col].dtype) != dtypes[col]:
            raise DataContractError(
                f"{name}: column {col!r} has dtype {frame[col].dtype}, the frame declares "
                f"{dtypes[col]}"
            )
    folder, reservoir = plan.folder(), plan.reservoir()
    n = 0
    for start in range(0, len(frame), batch_rows):
        part = frame.iloc[start : start + batch_rows][list(plan.columns)]
        data = pa.RecordBatch.from_pandas(part, preserve_index=False)
        plan.fold(folder, reservoir, f"{name}, batch {n}", data, name=name, start=start)
        n += 1
    return folder, reservoir, n


def merge_folded(*parts: Folded) -> Folded:
    """Merge task results (one node of the reduction tree) into a copy of the first: a task's
    inputs are left as they were, so that a retried merge counts every row once."""
    folder, reservoir, n = copy.deepcopy(parts[0])
    for other, other_reservoir, m in parts[1:]:
        remap = folder.merge(other)
        if reservoir is not None and other_reservoir is not None:
            reservoir.merge(other_reservoir, remap)
        n += m
    return folder, reservoir, n


@contextlib.contextmanager
def dask_client(
    client: Any = None, address: str | None = None, n_workers: int = 2
) -> Iterator[Any]:
    """The client to run on: ``client`` as given, one connected to ``address``, or one on a
    ``LocalCluster`` of ``n_workers`` worker processes started here and closed on exit."""
    if client is not None:
        yield client
        return
    from distributed import Client, LocalCluster

    if address:
        try:
            with Client(address, timeout="30s") as c:
                yield c
        except OSError as exc:
            raise ClusterError(f"data.dask_address {address!r}: no Dask scheduler ({exc})") from exc
        return
    with (
        LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def dask_counts(
    source: Any,
    roles: ColumnRoles,
    *,
    client: Any = None,
    address: str | None = None,
    n_workers: int = 2,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    format: str | None = None,
    split_every: int = 8,
    retries: int = 2,
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> StreamedCounts:
    """:func:`fairengine.streaming.stream_counts` on a Dask cluster (module docstring).

    Parameters
    ----------
    source : a ``dask.dataframe.DataFrame``, a :class:`StreamSource`, or what opens one (a
        Parquet file, folder, glob or list of files, a CSV glob; local, or an object-store URL
        with ``storage_options``, read by each worker through fsspec).
    client, address, n_workers : the cluster (:func:`dask_client`).
    split_every : fan-in of the reduction tree.
    retries : how often a task is re-run when its worker is lost.
    options : ``score_type``, ``threshold``, ``positive_label``, ``model``, ``features``,
        ``bins``, ``sample_rows``, ``sample_columns``, ``seed``: as
        :func:`fairengine.streaming.stream_counts` (:func:`.batches.fold_plan`).
    """
    from dask.delayed import Delayed, delayed

    started = time.perf_counter()
    plan = fold_plan(roles, **options)
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise DataContractError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
        raise DataContractError(f"split_every must be an integer >= 2, got {split_every!r}")
    tasks: list[Delayed]
    shared_plan = delayed(plan, traverse=False)  # one key in the graph: the model shipped once
    if _is_dask_frame(source):
        if client is None and not address:
            client = current_client()
        missing = [c for c in plan.columns if c not in source.columns]
        if missing:
            raise DataContractError(
                f"the Dask DataFrame has no column(s) {missing}; it has {list(source.columns)}"
            )
        dtypes = {c: str(source.dtypes[c]) for c in plan.columns}
        parts = source.to_delayed()
        files = tuple(f"partition {i}" for i in range(len(parts)))
        tasks = [
            delayed(fold_partition, pure=False)(shared_plan, p, i, dtypes, batch_rows)
            for i, p in enumerate(parts)
        ]
    else:
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
        expected = src.expected_types(list(plan.columns))
        files = tuple(src.files)
        shared = delayed(src, traverse=False)
        tasks = [
            delayed(fold_file, pure=False)(shared_plan, shared, i, expected)
            for i in range(len(src.fragments))
        ]
    while len(tasks) > 1:
        tasks = [
            delayed(merge_folded, pure=False)(*tasks[i : i + split_every])
            for i in range(0, len(tasks), split_every)
        ]
    with dask_client(client, address, n_workers) as c:
        future = c.compute(tasks[0], retries=retries)
        try:
            folder, reservoir, n_batches = future.result()
        except FairEngineError:
            raise
        except Exception as exc:
            raise ClusterError(
                f"the Dask pass failed: {type(exc).__name__}: {exc}".rstrip()
            ) from exc
        finally:
            with contextlib.suppress(Exception):
                future.cancel()
    return plan.finish(
        folder, reservoir, files=files, n_batches=n_batches, started=started, engine="dask"
    )


def current_client() -> Any:
    """The current ``distributed.Client`` (a notebook's), or None."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return default_client()
    except ValueError:  # no client
        return None


def _is_dask_frame(source: Any) -> bool:
    if isinstance(source, str | os.PathLike | StreamSource | list | tuple):
        return False
    try:
        import dask.dataframe as dd
    except ImportError:  # pragma: no cover - dask is a dependency
        return False
    return isinstance(source, dd.DataFrame)
