"""The data of a streamed audit (``data.engine: stream``, ``dask`` or ``spark``;
:mod:`fairengine.streaming`): which engine reads the data, and the one pass that checks, scores
and folds every record batch into the count tables, with its stratified sample as a dataset for
what needs rows. The three engines give the same count tables; ``stream`` reads the files on
this machine, ``dask`` on a Dask cluster (:mod:`fairengine.streaming.dask_engine`), ``spark`` on
a Spark session (:mod:`fairengine.streaming.spark_engine`).

A model is settled on the first rows of the source exactly as for an in-memory audit
(:func:`tasks.model.resolve_scores`: the same score source, model input and handles), then scores
each batch through the handles' ``predict_proba``. A streamed source has no content fingerprint
short of reading it (the count tables get one, shown in the report): with the cache on, a pass
over files is cached by every file's path, size and version plus the pass's settings and the
model (:func:`tasks.caching.streamed_source_identity`), and the method steps by the count
tables' content.

The methods that need rows (FlipTest, the individual-fairness test, mitigation) run on the
self-weighting subsample of the stratified sample
(:mod:`fairengine.streaming.self_weighting`: every row included with the same probability f),
as a dataset with the model's handles (:class:`RowSample`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError
from fairengine.roles import ColumnRoles
from fairengine.scores import effective_threshold
from fairengine.streaming.sources import cluster_frame_engine
from fairengine.urls import is_url
from tasks.caching import streamed_pass_cache_options, streamed_source_identity

if TYPE_CHECKING:  # pyarrow is imported only by a streamed audit
    from fairengine.streaming.self_weighting import SelfWeightingSample
    from tasks.model import ModelHandles

PARQUET_SUFFIXES = (".parquet", ".pq")
HEAD_ROWS = 1_000
"""Rows read from the start of a streamed source to settle the model's score source."""

STREAMED_ENGINES = ("stream", "dask", "spark")
"""The engines whose audits run on count tables (:class:`StreamedData`), not an in-memory frame."""


def _is_parquet(path: str) -> bool:
    p = Path(path)
    if p.is_dir():
        return any(q.suffix in PARQUET_SUFFIXES for q in p.rglob("*"))
    return p.suffix in PARQUET_SUFFIXES or str(path).endswith(
        tuple(f"*{s}" for s in PARQUET_SUFFIXES)
    )


def data_engine(cfg: AuditConfig, frame_given: bool, source: Any = None) -> str:
    """``pandas``, ``stream``, ``dask`` or ``spark`` for this audit (``data.engine``; ``auto``:
    stream a folder or glob of Parquet files, an object-store URL, and a Parquet file of more
    than ``data.stream_above_rows`` rows, counted from its metadata). ``source``: a Dask or
    Spark DataFrame given from Python, audited by its own engine."""
    engine = cfg.data.engine
    if source is not None:
        own = cluster_frame_engine(source)
        if own is None:
            raise ConfigError(
                "data: expected a pandas, Dask or Spark DataFrame or a path, got "
                f"{type(source).__name__}"
            )
        if engine not in ("auto", own):
            raise ConfigError(
                f"data.engine: {engine} cannot read a {own.capitalize()} DataFrame; leave "
                f"engine out (or set engine={own!r}) to audit it with the {own} engine"
            )
        if cfg.data.path or cfg.data.table:
            raise ConfigError(f"data: give a {own.capitalize()} DataFrame or data.path, not both")
        if cfg.task != "binary":
            raise ConfigError(
                f"task {cfg.task} audits of a {own.capitalize()} DataFrame are "
                "not streamed yet; use a pandas DataFrame"
            )
        return own
    url = bool(cfg.data.path) and is_url(str(cfg.data.path))
    if engine == "pandas":
        if url:
            raise ConfigError(
                f"data.engine: pandas reads local files; the object-store URL "
                f"{cfg.data.path!r} is read by data.engine: stream or dask (leave engine out)"
            )
        return "pandas"
    why_not = None
    if frame_given:
        why_not = "the data is a DataFrame (already in memory)"
    elif cfg.data.embedded:
        why_not = "data.embedded is generated in memory"
    elif not cfg.data.path and not (engine == "spark" and cfg.data.table):
        why_not = "no data.path" + (" or data.table" if engine == "spark" else "")
    elif cfg.task != "binary":
        why_not = f"task {cfg.task} audits are not streamed yet"
    elif (
        cfg.data.names is not None
        or cfg.data.na_values
        or cfg.data.missing != "error"
        or cfg.data.skip_rows
    ):
        why_not = (
            "data.names, data.na_values, data.skip_rows and data.missing: drop apply to "
            "in-memory tables"
        )
    if engine in STREAMED_ENGINES:
        if why_not:
            raise ConfigError(f"data.engine: {engine} cannot read this audit's data: {why_not}")
        return engine
    if url:  # the in-memory reader reads local files only
        if why_not:
            raise ConfigError(f"the object-store URL {cfg.data.path!r} is streamed: {why_not}")
        return "stream"
    if why_not or not _is_parquet(str(cfg.data.path)):
        return "pandas"
    path = str(cfg.data.path)
    if Path(path).is_dir() or any(c in path for c in "*?["):
        return "stream"  # several files: the in-memory reader takes one file
    from fairengine.streaming import StreamSource

    try:
        rows = StreamSource(str(cfg.data.path)).dataset.count_rows()
    except DataContractError:
        return "pandas"  # the in-memory reader gives its own error
    return "stream" if rows > cfg.data.stream_above_rows else "pandas"


@dataclass(frozen=True)
class RowSample:
    """The self-weighting subsample for the methods that need rows: ``subsample``
    (:class:`fairengine.streaming.self_weighting.SelfWeightingSample`; None without a sample),
    ``dataset`` (it as an :class:`AuditDataset`; None when it cannot be one) and ``problem``
    (why the row methods cannot run on it: a group it lacks, with the sizes)."""

    subsample: SelfWeightingSample | None
    dataset: AuditDataset | None
    problem: str | None = None

    def describe(self) -> str:
        """What a finding computed on it says (``on all N rows`` when it holds every row)."""
        return "" if self.subsample is None else self.subsample.describe()


@dataclass
class StreamedData:
    """What the pass produced: the count tables, the sample as a dataset (``None`` without one),
    the roles, the model's description and the warnings for the report; ``handles`` the
    model's handles (None for a score column) and ``rows`` the self-weighting subsample the
    methods that need rows run on."""

    counts: Any  # fairengine.streaming.StreamedCounts
    sample: AuditDataset | None
    sample_frame: pd.DataFrame | None
    sample_roles: ColumnRoles
    roles: ColumnRoles
    model_info: dict[str, Any]
    source: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    cached: bool = False
    """Whether the pass's results came from the cache (unchanged files)."""
    handles: ModelHandles | None = None
    rows: RowSample | None = None

    def fingerprint(self) -> str:
        """SHA-256 of the count tables (categories and every grid array): the content the
        count-based findings depend on."""
        h = hashlib.sha256()
        for attr, cats in self.counts.categories.items():
            h.update(repr((attr, cats)).encode())
        for name in sorted(self.counts.grid):
            arr = np.ascontiguousarray(self.counts.grid[name])
            h.update(name.encode())
            h.update(str(arr.dtype).encode())
            h.update(arr.tobytes())
        return h.hexdigest()


def stream_audit_data(
    cfg: AuditConfig,
    tracking_uri: str,
    timed: Callable[..., Any],
    model_object: Any = None,
    engine: str = "stream",
    frame: Any = None,
    cache_dir: Path | None = None,
) -> StreamedData:
    """Open ``data.path`` (or, on Spark, ``data.table``; or the Dask or Spark DataFrame
    ``frame``), settle the score source (a score column, or the model on the first rows), make
    the ``engine``'s pass into the count tables and the sample (module docstring). With
    ``cache_dir`` (the audit's cache) a pass over files is cached by their sizes and versions
    (:func:`tasks.caching.streamed_source_identity`)."""
    from fairengine.streaming.sample import WEIGHT_COLUMN
    from fairengine.streaming.stream import MODEL_SCORE_COLUMN
    from tasks.model import resolve_scores

    roles = cfg.roles()
    path = str(cfg.data.path) if cfg.data.path else ""
    source, head_of = _open_source(cfg, engine, roles, frame)
    warnings: list[str] = []
    model_fn = None
    handles = None
    score_type = cfg.score_type
    stream_roles = roles
    if cfg.model.uri or model_object is not None:
        head = head_of(HEAD_ROWS)
        scored = resolve_scores(
            cfg, head, dataclasses.replace(roles, score=None), tracking_uri, timed=timed,
            model_object=model_object,
        )  # fmt: skip
        assert scored.handles is not None
        handles = scored.handles
        model_info = scored.model_info
        warnings += scored.warnings
        model_fn = scored.handles.predict_proba  # probabilities, after the score type
        if score_type == "raw":
            score_type = "probability"
        features = list(scored.roles.features or ())
        stream_roles = dataclasses.replace(roles, score=None, features=tuple(features))
    else:
        if roles.score is None:
            raise ConfigError("no scores to audit: set columns.score or model.uri")
        from fairengine.model_scores import ScoreSource

        model_info = {
            "uri": None,
            "name": None,
            "version": None,
            "score_source": ScoreSource.from_data_column(roles.score, cfg.score_type).to_dict(),
        }
        features = list(roles.features or ())
    threshold = effective_threshold(score_type, cfg.threshold)
    step = pass_step(engine)
    arguments = {
        "score_type": score_type,
        "threshold": threshold,
        "positive_label": cfg.positive_label,
        "model": model_fn,
        "features": features,
        "batch_rows": cfg.data.batch_rows,
        "sample_rows": cfg.data.sample_rows,
        "seed": cfg.seed,
    }
    # the pass's settings as its cache key sees them (the model: by its identity)
    settings = {k: v for k, v in arguments.items() if k != "model"}
    settings.update(
        roles=stream_roles.to_dict(),
        positive_label=str(cfg.positive_label),
        format=cfg.data.format,
    )
    identity = (
        streamed_source_identity(engine, source, settings, model_info)
        if cache_dir is not None
        else None
    )
    cached = False
    if identity is None:  # cache off, or a DataFrame or table: no file versions to key on
        counts = timed(step, _pass_of(cfg, engine), source, stream_roles, **arguments)
    else:
        options = streamed_pass_cache_options(identity, cache_dir, cfg.cache.expiration_days)
        run = streamed_pass.with_options(name=step.replace("_", "-"), **options)
        state = timed(
            step, run, _pass_of(cfg, engine), source, stream_roles, return_state=True, **arguments
        )
        counts = state.result()
        cached = state.name == "Cached"
    sample = sample_frame = None
    sample_roles = stream_roles
    if counts.sample is not None and counts.sample.n_rows:
        sample_frame = counts.sample.frame.drop(columns=[WEIGHT_COLUMN])
        if model_fn is not None:
            sample_roles = dataclasses.replace(stream_roles, score=MODEL_SCORE_COLUMN)
        sample = AuditDataset.from_frame(
            sample_frame,
            sample_roles,
            score_type=score_type,
            threshold=cfg.threshold,
            positive_label=cfg.positive_label,
        )
    rows = row_sample(counts, sample_roles, score_type, cfg)
    where = {
        "stream": f"{len(counts.files):,} file(s), {counts.n_batches:,} batch(es) of at most "
        f"{cfg.data.batch_rows:,} rows",
        "dask": f"{len(counts.files):,} file(s) or partition(s) as Dask tasks on "
        + (cfg.data.dask_address or _dask_cluster(cfg, frame)),
        "spark": f"{len(counts.files):,} file(s) or table(s), aggregated by Spark",
    }[engine]
    warnings.append(
        f"streamed audit (data.engine: {engine}): {counts.n_rows:,} rows in {where}; group "
        f"parity, group metrics (AUC from a {counts.bins or 0:,}-bin score histogram), the "
        "proportion permutation tests and intersectional ε are computed from exact counts over "
        "all rows; tests that need rows "
        + (counts.sample.describe() if counts.sample is not None else "are skipped")
        + "; FlipTest, individual fairness and mitigation need the rows and "
        + (
            f"run {rows.describe()}"
            if rows.dataset is not None and rows.problem is None
            else f"do not run ({rows.problem or 'no sample'})"
        )
        + (
            ""
            if cache_dir is None
            else "; the pass's results were reused from the cache (the files are unchanged)"
            if cached
            else "; the pass is cached by the files' sizes and versions"
            if identity is not None
            else "; the pass is not cached (a DataFrame or table has no file versions to key "
            "on), the methods' results are (by the count tables' content)"
        )
    )
    if frame is not None:
        kind = f"a {engine.capitalize()} DataFrame"
        described = {"name": cfg.name or kind, "source": kind}
    elif engine == "spark" and cfg.data.table:
        described = {"name": cfg.name or cfg.data.table, "source": f"table {cfg.data.table}"}
    elif is_url(path):
        described = {"name": cfg.name or path.rstrip("/*").rsplit("/", 1)[-1], "source": path}
    else:
        described = {
            "name": cfg.name or Path(path.rstrip("/*")).name,
            "source": os.path.abspath(path) if not any(c in path for c in "*?[") else path,
        }
    return StreamedData(
        counts,
        sample,
        sample_frame,
        sample_roles,
        stream_roles,
        model_info,
        described,
        warnings,
        cached=cached,
        handles=handles,
        rows=rows,
    )


def pass_step(engine: str) -> str:
    """The name of an engine's pass in the audit's timings (``stream_data``, ``dask_data``)."""
    return f"{engine}_data"


@task(name="stream-data", cache_policy=NO_CACHE)
def streamed_pass(run: Callable[..., Any], source: Any, roles: ColumnRoles, **kwargs: Any) -> Any:
    """The engine's pass ``run(source, roles, **kwargs)`` as a Prefect task, so that it can be
    cached (:func:`tasks.caching.streamed_pass_cache_options`)."""
    return run(source, roles, **kwargs)


def _dask_cluster(cfg: AuditConfig, frame: Any) -> str:
    """Where a Dask pass ran when no ``data.dask_address`` was given."""
    if frame is not None:
        from fairengine.streaming.dask_engine import current_client

        client = current_client()
        if client is not None:
            return f"the current Dask client's scheduler {client.scheduler.address}"
    return f"a local cluster of {cfg.data.dask_workers} workers"


def row_sample(counts: Any, roles: ColumnRoles, score_type: str, cfg: AuditConfig) -> RowSample:
    """The self-weighting subsample of ``counts.sample`` as a dataset with the sample's
    ``roles``, or why the methods that need rows cannot run on it: no sample, a stratum with
    no sampled row (``data.sample_rows`` below the number of strata), or a protected group of
    the data with no row in it (each named, with its size in the data)."""
    from fairengine.streaming.self_weighting import self_weighting_subsample

    if counts.sample is None:
        return RowSample(None, None, "no stratified sample was drawn (data.sample_rows)")
    assert roles.label is not None
    try:
        sub = self_weighting_subsample(counts.sample, roles.label, files=counts.files)
    except DataContractError as exc:  # the methods that need rows say it; the rest runs
        return RowSample(None, None, f"no self-weighting subsample: {exc}")
    if sub.n_rows == 0:
        return RowSample(
            sub,
            None,
            f"the stratified sample of {counts.sample.n_rows:,} rows misses a stratum "
            f"(data.sample_rows {counts.sample.sample_rows:,} is below the "
            f"{len(counts.sample.strata):,} protected group × label strata), so no "
            "self-weighting subsample can be drawn; raise data.sample_rows",
        )
    described = f"the self-weighting sample of {sub.n_rows:,} rows (f = {sub.fraction:.4g})"
    try:
        dataset = AuditDataset.from_frame(
            sub.frame,
            roles,
            score_type=score_type,
            threshold=cfg.threshold,
            positive_label=cfg.positive_label,
            task=cfg.task,
        )
    except DataContractError as exc:
        return RowSample(sub, None, f"{described}: {exc}; raise data.sample_rows")
    lacking = []
    for attr, cats in counts.categories.items():
        have = set(dataset.groups[attr].categories)
        lacking += [
            f"{attr}={c!r} ({int(n):,} rows in the data)"
            for c, n in zip(cats, counts.group_sizes(attr), strict=True)
            if c not in have
        ]
    if lacking:
        return RowSample(
            sub,
            None,
            f"{described} has no row of {', '.join(lacking[:5])}"
            f"{' …' if len(lacking) > 5 else ''}; raise data.sample_rows",
        )
    return RowSample(sub, dataset)


def _open_source(
    cfg: AuditConfig, engine: str, roles: ColumnRoles, frame: Any = None
) -> tuple[Any, Callable[[int], pd.DataFrame]]:
    """The engine's source and a function giving its first rows (for settling a model)."""
    if engine == "spark":
        from fairengine.streaming.spark_engine import SparkSource

        spark = SparkSource(
            frame, path=cfg.data.path, table=cfg.data.table, format=cfg.data.format,
            master=cfg.data.spark_master, storage_options=cfg.data.storage_options,
        )  # fmt: skip
        return spark, spark.head
    if frame is not None:  # a Dask DataFrame: its first partitions
        return frame, functools.partial(_dask_head, frame)
    from fairengine.streaming import StreamSource

    source = StreamSource(
        str(cfg.data.path),
        format=cfg.data.format,
        batch_rows=cfg.data.batch_rows,
        dictionary_columns=roles.protected,
        storage_options=cfg.data.storage_options,
    )
    return source, lambda n: source.dataset.head(n).to_pandas()


def _dask_head(frame: Any, n: int) -> pd.DataFrame:
    """The first ``n`` rows of a Dask DataFrame, computing as few partitions as give them (the
    first, then twice as many, ...)."""
    import warnings

    k = 1
    while True:
        with warnings.catch_warnings():  # "insufficient elements": we ask for more next
            warnings.simplefilter("ignore", UserWarning)
            head = frame.head(n, npartitions=k, compute=True)
        if len(head) >= n or k >= frame.npartitions:
            return head
        k = min(2 * k, frame.npartitions)


def _pass_of(cfg: AuditConfig, engine: str) -> Callable[..., Any]:
    """The engine's pass (:func:`fairengine.streaming.stream_counts` or its cluster twin), with
    the cluster settings of ``data`` bound."""
    if engine == "dask":
        from fairengine.streaming.dask_engine import dask_counts

        return functools.partial(
            dask_counts,
            address=cfg.data.dask_address,
            n_workers=cfg.data.dask_workers,
        )
    if engine == "spark":
        from fairengine.streaming.spark_engine import spark_counts

        return spark_counts
    from fairengine.streaming import stream_counts

    return stream_counts


def check_streamed_group_sizes(counts: Any, min_group_size: int) -> None:
    """Every group of every protected attribute has at least ``min_group_size`` rows over all
    files (the in-memory contract's check, on the exact counts)."""
    for attr, cats in counts.categories.items():
        sizes = counts.group_sizes(attr)
        small = [
            f"{c!r} (n={int(n)})" for c, n in zip(cats, sizes, strict=True) if n < min_group_size
        ]
        if small:
            raise DataContractError(
                f"protected attribute {attr!r} has group(s) below the minimum size "
                f"{min_group_size}: {', '.join(small)}; merge small groups or lower "
                "validation.min_group_size"
            )
        if len(cats) < 2:
            raise DataContractError(
                f"protected attribute {attr!r} has a single value {cats[0]!r}; a fairness audit "
                "needs at least two groups"
            )


def preflight_stream(cfg: AuditConfig, has_model: bool, frame: Any = None) -> int:
    """The checks a streamed audit can make before it starts: the source opens, and every role
    column (and listed feature) is in its schema; returns the row count from the files'
    metadata (a Spark table: its row count from Spark; a Dask or Spark DataFrame: 0, not
    counted before the pass). Each file's own schema is checked when the pass reaches it."""
    from fairengine.streaming import StreamSource

    roles = cfg.roles()
    needed = [c for c in (roles.label, *roles.protected) if c is not None]
    if roles.weight:
        needed.append(roles.weight)
    if not has_model:
        if roles.score is None:
            raise ConfigError("no scores to audit: set columns.score or model.uri")
        needed.append(roles.score)
    needed += list(cfg.columns.features or ())
    if frame is not None:
        have = list(frame.columns)
        missing = [c for c in dict.fromkeys(needed) if c not in have]
        if missing:
            kind = (cluster_frame_engine(frame) or "the").capitalize()
            raise DataContractError(
                f"the {kind} DataFrame has no column(s) {missing}; it has {have}"
            )
        return 0
    if cfg.data.engine == "spark" and cfg.data.table:
        from fairengine.streaming.spark_engine import SparkSource

        table = SparkSource(table=cfg.data.table, master=cfg.data.spark_master)
        table.check_columns(list(dict.fromkeys(needed)))
        return table.count()
    source = StreamSource(
        str(cfg.data.path), format=cfg.data.format, storage_options=cfg.data.storage_options
    )
    source.expected_types(list(dict.fromkeys(needed)))
    return int(source.dataset.count_rows())
