"""The streamed audit's pass on Spark (``data.engine: spark``): the data contract and the count
tables as Spark aggregations, collected into the same
:class:`~fairengine.streaming.tables.StreamedCounts` as the one-machine stream.

**Source** (:class:`SparkSource`): a Spark DataFrame the caller gives, a catalog table
(``spark.table(name)``: a Hive, Delta, Iceberg or Unity Catalog table the session knows), or
Parquet/CSV paths read by Spark; on the given ``SparkSession``, the active one, or a new one on
``master`` (default ``local[*]``). A glob over hive-partitioned folders
(``data/region=*/*.parquet``) is read with Spark's ``basePath`` set to the folder above the
first ``key=value`` one, so the partition columns are kept, as the stream keeps them.
Object-store URLs are passed to Spark as they are: Spark reads them through its own Hadoop
connectors (``s3a://`` needs ``hadoop-aws`` and ``spark.hadoop.fs.s3a.*``), not fsspec; the
footers are checked through fsspec with ``storage_options``.

**Contract.** For files, every file's footer is checked first (missing column, another type:
:meth:`fairengine.streaming.sources.StreamSource.check_file`, no row read). Then one Spark
aggregation counts, per input file (``input_file_name()``), the rows with a null label,
protected attribute, score or weight, a non-finite or out-of-range score, a negative weight and a
non-integer value of a float protected attribute; the first file (in path order) with a fault is
named with its count, in the stream's words (``part-00002.parquet: 1 row(s) with a null
'race' (protected attribute); every row needs one``). A table or DataFrame is named as such.

**Scores.** A score column of type ``probability`` or ``label`` is cast to double in Spark; a
``raw`` score or a model is turned into probabilities in Python with ``mapInPandas`` (the model
broadcast once), by the stream's own functions, so that p, its histogram bin and the hard
prediction 1{p > t} are the same floating-point numbers as the stream's.

**Counts.** One ``groupBy`` over (protected attributes, label, score bin) sums n, Σw, Σwq, Σw²,
Σw²q, Σw²q² and Σq (q the prediction: 1{p > t} when hard, p otherwise), collected (at most
ΠG·2·bins rows) and folded by :meth:`fairengine.streaming.folding.CountFolder.add_cells`; the
categories are then sorted as the pandas path sorts them. Counts are exact; float sums equal the
stream's up to the order of additions.

**Sample.** Stratum sizes come from the counts; the equal allocation L is the stream's
(:func:`fairengine.streaming.sample.allocation_level`); each stratum keeps its L rows with the
smallest ``xxhash64(seed, row values)`` (a window ``row_number``). The key depends on the row's
values only, not on partitions, files or executors, so the sample is reproducible on any cluster;
it is not the stream's sample (whose key is the file and row offset, which Spark does not
expose), and identical rows share a key.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd
import pyarrow as pa

from fairengine.errors import DataContractError
from fairengine.roles import ColumnRoles
from fairengine.streaming.batches import (
    MODEL_SCORE_COLUMN,
    ClusterError,
    FoldPlan,
    fold_plan,
)
from fairengine.streaming.contract import check_scores
from fairengine.streaming.locations import url
from fairengine.streaming.sample import WEIGHT_COLUMN, StratifiedSample, allocation_level
from fairengine.streaming.scoring import model_scores
from fairengine.streaming.sources import StreamSource
from fairengine.streaming.tables import StreamedCounts

#: Columns the pass adds to the frame (its probability, the input file).
P_COLUMN = "__fairengine_p"
FILE_COLUMN = "__fairengine_file"


def spark_session(master: str | None = None) -> Any:
    """The active ``SparkSession``, or a new one on ``master`` (default ``local[*]``, the Spark
    UI off)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    return (
        SparkSession.builder.master(master or "local[*]")
        .appName("fairengine-audit")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


class SparkSource:
    """A table for Spark: exactly one of ``frame`` (a Spark DataFrame), ``path`` (Parquet or
    CSV files, as :class:`StreamSource` takes them) or ``table`` (a catalog table name)."""

    def __init__(
        self,
        frame: Any = None,
        *,
        path: str | os.PathLike[str] | Sequence[str] | None = None,
        table: str | None = None,
        format: str | None = None,
        session: Any = None,
        master: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        given = [frame is not None, bool(path), bool(table)]
        if sum(given) != 1:
            raise DataContractError(
                "a Spark source needs exactly one of a DataFrame, data.path or data.table"
            )
        self.files: StreamSource | None = None
        if frame is not None:
            self.session = session or frame.sparkSession
            self.frame = frame
            self.name = "the Spark DataFrame"
        else:
            self.session = session or spark_session(master)
            if table:
                try:
                    self.frame = self.session.table(table)
                except Exception as exc:  # AnalysisException: no such table
                    raise DataContractError(
                        f"data.table {table!r}: Spark cannot read it ({_first_line(exc)})"
                    ) from None
                self.name = f"table {table}"
            else:
                assert path is not None
                self.files = files = StreamSource(
                    path, format=format, storage_options=storage_options
                )
                local = files.protocol is None
                paths = [os.path.abspath(p) for p in files.paths] if local else files.urls
                reader = self.session.read
                if files.partition_columns:  # hive folders below the files' common base
                    base = os.path.abspath(files.base) if local else url(files.protocol, files.base)
                    reader = reader.option("basePath", base)
                try:
                    if files.format == "csv":
                        self.frame = reader.csv(paths, header=True, inferSchema=True)
                    else:
                        self.frame = reader.parquet(*paths)
                except Exception as exc:  # AnalysisException, Py4JJavaError: no such scheme
                    hint = (
                        ""
                        if local
                        else "; Spark reads object stores through its own Hadoop connectors "
                        "(s3a:// needs hadoop-aws on the session's classpath and its "
                        "spark.hadoop.fs.s3a.* settings; data.storage_options are not passed "
                        "to Spark)"
                    )
                    raise ClusterError(
                        f"Spark cannot read {files.urls[0]!r}: {_first_line(exc)}{hint}"
                    ) from None
                self.name = "the files"

    @property
    def file_names(self) -> tuple[str, ...]:
        return tuple(self.files.files) if self.files is not None else (self.name,)

    def head(self, n: int) -> pd.DataFrame:
        """The first ``n`` rows as pandas (to settle a model's inputs)."""
        return self.frame.limit(n).toPandas()

    def count(self) -> int:
        return int(self.frame.count())

    def check_columns(self, columns: Sequence[str]) -> None:
        """Every column is in the frame's schema (each file's too, from its footer)."""
        if self.files is not None:
            expected = self.files.expected_types(list(columns))
            for fragment in self.files.fragments:
                self.files.check_file(fragment, expected)
        have = list(self.frame.columns)
        missing = [c for c in columns if c not in have]
        if missing:
            raise DataContractError(f"{self.name}: missing column(s) {missing}; it has {have}")

    def where(self, uri: str | None) -> str:
        """A file's name in messages (relative to the source's folder), from Spark's URI."""
        if self.files is None or not uri:
            return self.name
        parsed = urlparse(uri)
        path = unquote(parsed.path) if "://" in uri else uri
        if self.files.protocol is not None:  # bucket/key, as fsspec names it
            path = f"{parsed.netloc}{unquote(parsed.path)}"
        root = self.files.root
        return os.path.relpath(path, root) if root else path


def spark_counts(
    source: Any,
    roles: ColumnRoles,
    *,
    session: Any = None,
    master: str | None = None,
    batch_rows: int = 10_000,
    format: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> StreamedCounts:
    """:func:`fairengine.streaming.stream_counts` on Spark (module docstring).

    Parameters
    ----------
    source : a :class:`SparkSource`, a Spark DataFrame, or Parquet/CSV paths (an object-store
        URL as Spark's Hadoop connectors read it; ``storage_options`` for fsspec's look at the
        footers).
    session, master : the Spark session (:func:`spark_session`).
    batch_rows : rows per Arrow batch of ``mapInPandas`` (when a model or a raw score is
        turned into probabilities in Python).
    options : ``score_type``, ``threshold``, ``positive_label``, ``model``, ``features``,
        ``bins``, ``sample_rows``, ``sample_columns``, ``seed``: as
        :func:`fairengine.streaming.stream_counts` (:func:`.batches.fold_plan`).
    """
    from pyspark.sql import functions as F

    started = time.perf_counter()
    plan = fold_plan(roles, **options)
    src = _source(source, session, master, format, storage_options)
    src.check_columns(list(plan.columns))
    df = src.frame.select(*[F.col(f"`{c}`") for c in plan.columns]).withColumn(
        FILE_COLUMN, F.input_file_name()
    )
    _check_types(src, df, plan)
    df = _with_probability(src, df, plan, batch_rows)
    _check_contract(src, df, plan)
    folder = plan.folder()
    cells = _cell_sums(df, plan)
    groups = {a: pa.array(cells[a].tolist()) for a in roles.protected}
    raw_labels = cells[roles.label]
    label = (raw_labels == plan.positive_label).to_numpy(dtype=bool).astype(np.int8)
    sums = {k: cells[k].to_numpy() for k in ("n", "wp", "w2p2", "w", "w2", "w2p", "p_rows")}
    folder.add_cells(
        groups,
        label,
        pd.unique(raw_labels).tolist(),
        sums,
        cells["bin"].to_numpy() if "bin" in cells else None,
    )
    n_parts = int(df.rdd.getNumPartitions())
    counts = plan.finish(
        folder, None, files=src.file_names, n_batches=n_parts, started=started, engine="spark"
    )
    if plan.sample_rows:
        import dataclasses

        sample = _sample(df, plan, counts, cells, label)
        counts = dataclasses.replace(counts, sample=sample)
    return counts


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _source(
    source: Any,
    session: Any,
    master: str | None,
    format: str | None,
    storage_options: Mapping[str, Any] | None = None,
) -> SparkSource:
    if isinstance(source, SparkSource):
        return source
    if isinstance(source, str | os.PathLike | list | tuple):
        return SparkSource(
            path=source, format=format, session=session, master=master,
            storage_options=storage_options,
        )  # fmt: skip
    from pyspark.sql import DataFrame

    if isinstance(source, DataFrame):
        return SparkSource(source, session=session)
    raise DataContractError(
        f"a Spark source is a Spark DataFrame, a SparkSource or paths; got {type(source).__name__}"
    )


def _check_types(src: SparkSource, df: Any, plan: FoldPlan) -> None:
    """The score and weight columns are numeric (Spark's schema)."""
    from pyspark.sql.types import NumericType

    roles = plan.roles
    for col, what in ((roles.score, "score"), (roles.weight, "weight")):
        if col is not None and not isinstance(df.schema[col].dataType, NumericType):
            raise DataContractError(
                f"{src.name}: {what} column {col!r} must be numeric; found type "
                f"{df.schema[col].dataType.simpleString()}"
            )


def _with_probability(src: SparkSource, df: Any, plan: FoldPlan, batch_rows: int) -> Any:
    """``df`` with :data:`P_COLUMN`: the score cast to double, or (a raw score, a model) the
    stream's probabilities computed in Python by ``mapInPandas``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StructField, StructType

    roles = plan.roles
    if not plan.has_scores:
        return df
    if roles.score is not None and plan.score_type != "raw":
        return df.withColumn(P_COLUMN, F.col(f"`{roles.score}`").cast("double"))
    session = src.session
    session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch_rows))
    shared = session.sparkContext.broadcast(plan.model) if plan.model is not None else None
    features = list(plan.features)
    score, score_type = roles.score, plan.score_type

    def probabilities(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        for i, frame in enumerate(frames):
            where = f"{src_name_of(frame)}, Spark partition {part}, batch {i}"
            if shared is not None:
                batch = pa.RecordBatch.from_pandas(frame[features], preserve_index=False)
                p = check_scores(
                    where, model_scores(shared.value, batch, features, where), "model score",
                    score_type,
                )  # fmt: skip
            else:
                assert score is not None
                p = check_scores(where, frame[score].to_numpy(np.float64), score, score_type)
            yield frame.assign(**{P_COLUMN: p})

    schema = StructType([*df.schema.fields, StructField(P_COLUMN, DoubleType(), False)])
    return df.mapInPandas(probabilities, schema)


def src_name_of(frame: pd.DataFrame) -> str:
    """The file of a ``mapInPandas`` batch's first row (its basename), for messages."""
    if FILE_COLUMN in frame.columns and len(frame):
        uri = str(frame[FILE_COLUMN].iloc[0])
        if uri:
            return os.path.basename(unquote(urlparse(uri).path))
    return "the Spark data"


def _check_contract(src: SparkSource, df: Any, plan: FoldPlan) -> None:
    """One aggregation of the per-row checks, per file (module docstring)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType

    roles = plan.roles
    every = "every row needs one"
    label = F.col(f"`{roles.label}`")
    checks: list[tuple[str, Any]] = [
        (f"row(s) with a null {roles.label!r} (label); {every}", label.isNull())
    ]
    for a in roles.protected:
        c = F.col(f"`{a}`")
        checks.append((f"row(s) with a null {a!r} (protected attribute); {every}", c.isNull()))
        if isinstance(df.schema[a].dataType, DoubleType | FloatType):
            what = (
                f"non-integer value(s) of protected attribute {a!r}: it is continuous; bin it "
                "into groups first (e.g. pd.cut)"
            )
            checks.append((what, c.isNotNull() & (c != F.floor(c))))
    if roles.score is not None:
        s = F.col(f"`{roles.score}`").cast("double")
        bad = s.isNull() | F.isnan(s) | (F.abs(s) == float("inf"))
        checks.append((f"missing or infinite value(s) in score column {roles.score!r}", bad))
        if plan.score_type == "probability":
            what = (
                f"value(s) of score column {roles.score!r} outside [0, 1] (declared "
                "score_type='probability'; use score_type='raw' for logits)"
            )
            checks.append((what, ~bad & ((s < 0) | (s > 1))))
        if plan.score_type == "label":
            what = (
                f"value(s) of score column {roles.score!r} neither 0 nor 1 (declared "
                "score_type='label')"
            )
            checks.append((what, ~bad & (s != 0) & (s != 1)))
    if roles.weight is not None:
        w = F.col(f"`{roles.weight}`").cast("double")
        bad_w = w.isNull() | F.isnan(w) | (F.abs(w) == float("inf")) | (w < 0)
        what = f"value(s) of weight column {roles.weight!r} not finite and non-negative"
        checks.append((what, bad_w))
    aggs = [F.sum(cond.cast("long")).alias(f"c{i}") for i, (_, cond) in enumerate(checks)]
    try:
        rows = df.groupBy(FILE_COLUMN).agg(*aggs).collect()
    except Exception as exc:
        raise _spark_error(exc) from None
    faults = []
    for row in rows:
        for i, (what, _) in enumerate(checks):
            k = int(row[f"c{i}"] or 0)
            if k:
                faults.append((src.where(row[FILE_COLUMN]), i, k, what))
    if faults:
        where, _, k, what = min(faults)
        raise DataContractError(f"{where}: {k} {what}")


def _spark_error(exc: Exception) -> Exception:
    """A contract error raised in a Python worker (``mapInPandas``) as itself; anything else
    as a :class:`ClusterError`."""
    text = str(exc)
    marker = "DataContractError: "
    if marker in text:
        return DataContractError(text.split(marker, 1)[1].strip().splitlines()[0])
    return ClusterError(f"the Spark pass failed: {type(exc).__name__}: {_first_line(exc)}")


@contextlib.contextmanager
def arrow_transfer(session: Any) -> Iterator[None]:
    """``toPandas`` through Arrow (column batches, not pickled rows) for the block, the
    session's own setting restored after."""
    key = "spark.sql.execution.arrow.pyspark.enabled"
    before = session.conf.get(key, "false")
    session.conf.set(key, "true")
    try:
        yield
    finally:
        session.conf.set(key, before)


def _cell_sums(df: Any, plan: FoldPlan) -> pd.DataFrame:
    """The per-(groups, label, bin) sums (module docstring), collected as pandas."""
    from pyspark.sql import functions as F

    roles = plan.roles
    hard = plan.threshold is not None or not plan.has_scores
    w = F.col(f"`{roles.weight}`").cast("double") if roles.weight else F.lit(1.0)
    p = F.col(P_COLUMN)
    if not plan.has_scores:
        q = F.lit(0.0)
    elif hard:
        q = (p > F.lit(float(plan.threshold))).cast("double")  # type: ignore[arg-type]
    else:
        q = p
    keys = [F.col(f"`{a}`") for a in roles.protected] + [F.col(f"`{roles.label}`")]
    if plan.has_scores and plan.bins is not None:
        b = F.least(F.greatest(p * F.lit(float(plan.bins)), F.lit(0.0)), F.lit(plan.bins - 1.0))
        keys.append(b.cast("int").alias("bin"))
    aggs = [
        F.count(F.lit(1)).alias("n"),
        F.sum(w * q).alias("wp"),
        F.sum(w * w * q * q).alias("w2p2"),
        F.sum(w).alias("w"),
        F.sum(w * w).alias("w2"),
        F.sum(w * w * q).alias("w2p"),
        F.sum(q).alias("p_rows"),
    ]
    try:
        with arrow_transfer(df.sparkSession):
            cells = df.groupBy(*keys).agg(*aggs).toPandas()
    except Exception as exc:
        raise _spark_error(exc) from None
    for k in ("wp", "w2p2", "w", "w2", "w2p", "p_rows"):
        cells[k] = cells[k].astype(np.float64)
    cells["n"] = cells["n"].astype(np.int64)
    return cells


def _sample(
    df: Any, plan: FoldPlan, counts: StreamedCounts, cells: pd.DataFrame, label: np.ndarray
) -> StratifiedSample:
    """The stratified sample (module docstring)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    roles = plan.roles
    assert plan.sample_rows is not None
    strata_keys = [*roles.protected, roles.label]
    by_stratum = cells.assign(_y=label).groupby(strata_keys, dropna=False, sort=False)
    sizes = by_stratum["n"].sum()
    level = allocation_level(sizes.to_numpy(), plan.sample_rows)
    columns = [c for c in plan.columns]
    if plan.model is not None and roles.score is None:
        df = df.withColumn(MODEL_SCORE_COLUMN, F.col(P_COLUMN))
        columns.append(MODEL_SCORE_COLUMN)
    key = F.xxhash64(F.lit(int(plan.seed)), *[F.col(f"`{c}`") for c in plan.columns])
    window = Window.partitionBy(*[F.col(f"`{c}`") for c in strata_keys]).orderBy(
        key, *[F.col(f"`{c}`") for c in plan.columns]
    )
    picked = (
        df.withColumn("__key", key)
        .withColumn("__rank", F.row_number().over(window))
        .where(F.col("__rank") <= level)
        .orderBy("__key", *[F.col(f"`{c}`") for c in plan.columns])
        .select(*[F.col(f"`{c}`") for c in columns])
    )
    try:
        with arrow_transfer(df.sparkSession):
            frame = picked.toPandas()
    except Exception as exc:
        raise _spark_error(exc) from None
    stratum_of = pd.MultiIndex.from_frame(frame[strata_keys])
    n_s = sizes.reindex(stratum_of).to_numpy(np.float64)
    k_s = np.minimum(n_s, level)
    frame[WEIGHT_COLUMN] = n_s / np.maximum(k_s, 1)
    labels_of = dict(by_stratum["_y"].first().items())
    text = {a: _category_text(cells[a], counts.categories[a]) for a in roles.protected}
    records = []
    for stratum, n in sizes.items():
        values = stratum if isinstance(stratum, tuple) else (stratum,)
        rec: dict[str, object] = {a: text[a][values[j]] for j, a in enumerate(roles.protected)}
        rec["label"] = int(labels_of[stratum])
        rec["rows"] = int(n)
        rec["sampled"] = int(min(n, level))
        rec["_order"] = tuple(counts.categories[a].index(str(rec[a])) for a in roles.protected)
        records.append(rec)
    strata = (
        pd.DataFrame.from_records(records)
        .sort_values(["_order", "label"])
        .drop(columns="_order")
        .reset_index(drop=True)
    )
    return StratifiedSample(frame, strata, plan.sample_rows, level, plan.seed)


def _category_text(values: pd.Series, categories: tuple[str, ...]) -> dict[Any, str]:
    """Each raw value of an attribute -> its category text (both in the pandas sorted order)."""
    _, uniques = pd.factorize(values, sort=True)
    return dict(zip(list(uniques), categories, strict=True))


__all__ = ["P_COLUMN", "SparkSource", "spark_counts", "spark_session"]
