"""The Spark engine (``data.engine: spark``, :mod:`fairengine.streaming.spark_engine`; issue 21)
on a real local Spark session (``local[2]``): Spark's aggregations give the one-machine stream's
count tables (integer cells exactly, float sums to 1e-12) and strata, a model or raw score is
turned into the same probabilities by ``mapInPandas``, an audit of a catalog table has the
pandas audit's findings, and bad files are named with their counts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from engines_support import (
    COUNT_METHODS,
    N_FILES,
    ROLES,
    WEIGHTED,
    same_counts,
    same_findings,
    spoil_file,
    write_files,
)
from engines_support import table as make_table
from sklearn.linear_model import LogisticRegression

import fairengine
from fairengine.errors import DataContractError, FairEngineError
from fairengine.roles import ColumnRoles
from fairengine.streaming import stream_counts
from fairengine.streaming.self_weighting import self_weighting_subsample
from fairengine.streaming.spark_engine import spark_counts

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """One local Spark session for the module (UI off, temp dirs, the venv's Python)."""
    from pyspark.sql import SparkSession

    tmp = tmp_path_factory.mktemp("spark")
    old = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("fairengine-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(tmp / "local"))
        .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return make_table(60_000)


@pytest.fixture(scope="module")
def parts(table: pd.DataFrame, session_tmp: Path) -> Path:
    return write_files(table, session_tmp / "spark-parts")


@pytest.mark.parametrize(
    ("roles", "threshold"), [(ROLES, 0.5), (WEIGHTED, None)], ids=["hard", "weighted-expected"]
)
def test_spark_aggregates_the_streams_counts(parts, spark, roles, threshold) -> None:
    kw = {"threshold": threshold, "sample_rows": 3_000, "seed": 5}
    streamed = stream_counts(str(parts), roles, batch_rows=4_000, **kw)
    on_spark = spark_counts(str(parts), roles, session=spark, **kw)
    same_counts(streamed, on_spark)
    assert on_spark.files == streamed.files and len(on_spark.files) == N_FILES
    # the strata and their allocation are the stream's; the rows drawn differ (another key)
    pd.testing.assert_frame_equal(streamed.sample.strata, on_spark.sample.strata)
    assert on_spark.sample.level == streamed.sample.level
    assert on_spark.sample.n_rows == streamed.sample.n_rows
    again = spark_counts(str(parts), roles, session=spark, **kw)  # the same seed: same rows
    pd.testing.assert_frame_equal(again.sample.frame, on_spark.sample.frame)
    # each sampled row is a row of the data with its stratum's design weight n_s / k_s
    frame = on_spark.sample.frame
    merged = frame.merge(
        on_spark.sample.strata.rename(columns={"label": "y"}), on=["race", "sex", "y"]
    )
    np.testing.assert_allclose(merged["__sample_weight"], merged["rows"] / merged["sampled"])
    # the self-weighting subsample of the methods that need rows: the stream's design and
    # sizes m_s (Spark's rows carry no offsets: it stays in key order)
    subs = [self_weighting_subsample(c.sample, "y", files=c.files) for c in (streamed, on_spark)]
    pd.testing.assert_frame_equal(subs[0].strata, subs[1].strata)
    assert subs[0].in_source_order and not subs[1].in_source_order
    kept = subs[1].frame.groupby(["race", "sex", "y"]).size()
    assert kept.tolist() == subs[1].strata["kept"].tolist()


def test_a_model_and_raw_scores_are_mapped_in_pandas(table, parts, spark) -> None:
    model = LogisticRegression().fit(table[["x"]], table["y"])
    roles = ColumnRoles(label="y", protected=("race", "sex"), features=("x",))
    kw = {"threshold": 0.5, "model": model.predict_proba, "features": ["x"], "sample_rows": 500}
    streamed = stream_counts(str(parts), roles, batch_rows=7_000, **kw)
    on_spark = spark_counts(str(parts), roles, session=spark, batch_rows=5_000, **kw)
    same_counts(streamed, on_spark)
    assert "__model_score" in on_spark.sample.frame.columns
    raw = ColumnRoles(label="y", protected=("race", "sex"), score="logit")
    kw = {"threshold": None, "score_type": "raw"}
    same_counts(
        stream_counts(str(parts), raw, **kw), spark_counts(str(parts), raw, session=spark, **kw)
    )


def test_an_audit_of_a_catalog_table_gives_the_pandas_findings(spark, session_tmp) -> None:
    df = make_table(20_000, seed=2)
    spark.createDataFrame(df).write.mode("overwrite").saveAsTable("audit_rows")
    settings = {
        "label": "y",
        "protected": ["race", "sex"],
        "score": "score",
        "methods": COUNT_METHODS,
        "cache": {"enabled": False},
        "output": {"dir": str(session_tmp / "spark-reports")},
        "multiplicity": "holm",
    }
    on_spark = fairengine.audit(None, engine="spark", table="audit_rows", **settings)
    in_memory = fairengine.audit(df, **settings)
    same_findings(on_spark, in_memory)
    assert any("streamed audit (data.engine: spark): 20,000 rows" in w for w in on_spark.warnings)
    assert on_spark.dataset.source == "table audit_rows"


def test_a_spark_dataframe_given_to_the_audit_runs_on_its_session(spark, session_tmp) -> None:
    df = make_table(20_000, seed=3)
    settings = {
        "label": "y",
        "protected": ["race", "sex"],
        "score": "score",
        "methods": COUNT_METHODS,
        "cache": {"enabled": False},
        "output": {"dir": str(session_tmp / "spark-frame-reports")},
        "multiplicity": "holm",
    }
    on_spark = fairengine.audit(spark.createDataFrame(df), **settings)
    in_memory = fairengine.audit(df, **settings)
    same_findings(on_spark, in_memory)
    assert any("streamed audit (data.engine: spark): 20,000 rows" in w for w in on_spark.warnings)
    assert on_spark.dataset.source == "a Spark DataFrame"


def test_a_glob_over_hive_folders_keeps_the_partition_columns(table, spark, session_tmp) -> None:
    folder = session_tmp / "spark-hive"
    for race, rows in table.groupby("race"):
        write_files(rows.drop(columns=["race"]), folder / f"race={race}", k=3)
    glob = str(folder / "race=*" / "*.parquet")
    roles = ColumnRoles(label="y", protected=("race", "sex"), score="score")
    kw = {"threshold": 0.5, "sample_rows": 2_000, "seed": 1}
    streamed = stream_counts(glob, roles, batch_rows=5_000, **kw)
    on_spark = spark_counts(glob, roles, session=spark, **kw)
    # unweighted, Σw² per bin is Σw: also when a group first appears after the first batch
    # (here each race's files come one after the other; the folder's padding kept them apart)
    np.testing.assert_array_equal(streamed.hist_w2, streamed.hist_w)
    same_counts(streamed, on_spark)  # race, a folder name, is a column for both engines
    assert on_spark.categories["race"] == ("a", "b", "c", "d")
    assert on_spark.files == streamed.files and "race=b/part-001.parquet" in on_spark.files
    pd.testing.assert_frame_equal(streamed.sample.strata, on_spark.sample.strata)


def test_an_object_store_url_spark_cannot_read_says_what_it_needs(spark, table, session_tmp):
    from object_store_support import s3_server

    with s3_server() as s3:
        url = s3.upload(write_files(table.iloc[:3_000], session_tmp / "spark-s3", k=2), "p")
        with pytest.raises(FairEngineError) as err:
            spark_counts(
                f"{url}/*.parquet", ROLES, session=spark, storage_options=s3.storage_options
            )
    message = str(err.value)
    assert f"Spark cannot read '{url}/part-000.parquet'" in message
    assert "hadoop-aws" in message and s3.secret not in message


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("drop_race", "part-002.parquet: missing column(s) ['race']"),
        ("text_score", "part-002.parquet: column 'score' has type "),
        ("null_race", "part-002.parquet: 2 row(s) with a null 'race' (protected attribute)"),
        ("big_score", "part-004.parquet: 1 value(s) of score column 'score' outside [0, 1]"),
    ],
)
def test_a_bad_file_is_named(table, session_tmp, spark, change: str, message: str) -> None:
    folder = write_files(table.iloc[:6_000], session_tmp / f"spark-bad-{change}", k=5)
    name = "part-004.parquet" if change == "big_score" else "part-002.parquet"
    spoil_file(folder / name, change, rows=2)
    with pytest.raises(DataContractError) as err:
        spark_counts(str(folder), ROLES, session=spark, threshold=0.5)
    assert message in str(err.value)
