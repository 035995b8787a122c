"""The Dask engine (``data.engine: dask``, :mod:`fairengine.streaming.dask_engine`; issue 21):
on a local cluster of two worker processes it folds the same count tables, sample and findings
as the one-machine stream and the in-memory (pandas) audit; a worker killed mid-pass is
survived (its tasks run again) or, when a file kills every worker that reads it, the audit
fails with a clear error and leaves no MLflow run; bad files and partitions are named."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import cloudpickle
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

import fairengine
from fairengine.errors import DataContractError, FairEngineError
from fairengine.streaming import stream_counts
from fairengine.streaming.batches import ClusterError
from fairengine.streaming.dask_engine import dask_counts
from tasks.mlflow_log import TAGS

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

# the test's models run on the worker processes, which cannot import this module by name
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return make_table(150_000)


@pytest.fixture(scope="module")
def parts(table: pd.DataFrame, session_tmp: Path) -> Path:
    return write_files(table, session_tmp / "dask-parts")


@pytest.fixture(scope="module")
def small(session_tmp: Path) -> tuple[pd.DataFrame, Path]:
    """A smaller table in 37 files, for the audits through the flow."""
    df = make_table(40_000, seed=1)
    return df, write_files(df, session_tmp / "dask-small-parts")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    with distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("roles", [ROLES, WEIGHTED], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("threshold", [0.5, None], ids=["hard", "expected"])
def test_dask_folds_the_streams_counts_and_sample(parts, client, roles, threshold) -> None:
    kw = {"threshold": threshold, "batch_rows": 1_500, "sample_rows": 4_000, "seed": 3}
    streamed = stream_counts(str(parts), roles, **kw)
    on_dask = dask_counts(str(parts), roles, client=client, split_every=3, **kw)
    same_counts(streamed, on_dask)
    assert on_dask.files == streamed.files and len(on_dask.files) == N_FILES
    assert on_dask.n_batches == streamed.n_batches
    # the sample's keys hash (file, row): the same rows whatever the cluster or the reduction
    pd.testing.assert_frame_equal(streamed.sample.frame, on_dask.sample.frame)
    pd.testing.assert_frame_equal(streamed.sample.strata, on_dask.sample.strata)


def test_a_dask_dataframe_is_folded_partition_by_partition(table, client) -> None:
    streamed = stream_counts(_frame_source(table), ROLES, threshold=0.5, batch_rows=10_000)
    frame = dd.from_pandas(table, npartitions=11)
    on_dask = dask_counts(frame, ROLES, client=client, threshold=0.5, batch_rows=4_000)
    same_counts(streamed, on_dask)
    assert on_dask.files == tuple(f"partition {i}" for i in range(11))


def _frame_source(table: pd.DataFrame):
    """The table as one in-memory Parquet file for the stream."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="dask-frame-"))
    table.to_parquet(folder / "all.parquet", index=False)
    return str(folder / "all.parquet")


def _settings(session_tmp: Path, **extra) -> dict:
    return {
        "label": "y",
        "protected": ["race", "sex"],
        "methods": COUNT_METHODS,
        "cache": {"enabled": False},
        "output": {"dir": str(session_tmp / "dask-reports")},
        "score": "score",
        "multiplicity": "holm",
        **extra,
    }


def test_a_dask_audit_gives_the_pandas_findings(small, cluster, session_tmp) -> None:
    table, parts = small
    settings = _settings(session_tmp)
    on_dask = fairengine.audit(
        str(parts), engine="dask", dask_address=cluster.scheduler_address, batch_rows=5_000,
        sample_rows=5_000, **settings,
    )  # fmt: skip
    in_memory = fairengine.audit(table, **settings)
    same_findings(on_dask, in_memory)
    assert any(
        "streamed audit (data.engine: dask): 40,000 rows in 37 file(s)" in w
        for w in on_dask.warnings
    )


def test_a_dask_dataframe_given_to_the_audit_runs_on_the_current_client(
    small, client, session_tmp
) -> None:
    table, _ = small
    settings = _settings(session_tmp)
    frame = dd.from_pandas(table, npartitions=6)
    on_dask = fairengine.audit(frame, batch_rows=4_000, sample_rows=5_000, **settings)
    in_memory = fairengine.audit(table, **settings)
    same_findings(on_dask, in_memory)
    where = f"as Dask tasks on the current Dask client's scheduler {client.scheduler.address}"
    assert any(
        "streamed audit (data.engine: dask): 40,000 rows in 6 file(s) or partition(s)" in w
        and where in w
        for w in on_dask.warnings
    )
    assert on_dask.dataset.source == "a Dask DataFrame"
    with pytest.raises(FairEngineError, match=r"data\.engine: stream cannot read a Dask DataFrame"):
        fairengine.audit(frame, engine="stream", **settings)
    with pytest.raises(FairEngineError, match=r"has no column\(s\) \['score'\]"):
        fairengine.audit(frame.drop(columns=["score"]), **settings)


def test_a_model_scores_a_dask_dataframe_given_to_the_audit(small, client, session_tmp) -> None:
    from sklearn.linear_model import LogisticRegression

    table, _ = small
    model = LogisticRegression().fit(table[["x"]], table["y"])
    settings = _settings(session_tmp, methods=["group_parity"])
    settings.pop("score")
    frame = dd.from_pandas(table, npartitions=60)  # < 1,000 rows each: the model's head spans 2
    on_dask = fairengine.audit(frame, model=model, features=["x"], batch_rows=4_000, **settings)
    in_memory = fairengine.audit(table, model=model, features=["x"], **settings)
    a = {f.key: f.estimate for f in on_dask.findings()}
    b = {f.key: f.estimate for f in in_memory.findings()}
    assert a.keys() == b.keys() and a
    for k in a:
        assert a[k] == pytest.approx(b[k], abs=1e-12, nan_ok=True), k
    assert on_dask.model.score_description == in_memory.model.score_description


def test_the_methods_that_need_rows_run_on_the_streams_sample(small, cluster, session_tmp) -> None:
    """The Dask pass draws the stream's stratified sample (the same row keys, each row's file
    and offset kept through the merges), so FlipTest and mitigation run on the same
    self-weighting subsample and give the stream's findings."""
    from sklearn.linear_model import LogisticRegression

    table, parts = small
    model = LogisticRegression().fit(table[["x"]], table["y"])
    methods = {
        **dict.fromkeys([*COUNT_METHODS, "individual_fairness"], False),
        "fliptest": True,
        "mitigation": {"variants": ["overall"], "compare_fairlearn": False},
    }
    settings = _settings(
        session_tmp, score=None, model=model, features=["x"], methods=methods, sample_rows=5_000
    )
    on_dask = fairengine.audit(
        str(parts), engine="dask", dask_address=cluster.scheduler_address, **settings
    )
    streamed = fairengine.audit(str(parts), engine="stream", **settings)
    for name in ("fliptest", "mitigation"):
        a, b = on_dask.method(name), streamed.method(name)
        assert a.status == b.status == "ok", (name, a.reason)
        assert a.parameters["sample"] == b.parameters["sample"]
        assert 0 < a.parameters["sample"]["rows"] < 5_000
        assert [(f.key, f.label, f.estimate, f.pvalue, f.decision) for f in a.findings] == [
            (f.key, f.label, f.estimate, f.pvalue, f.decision) for f in b.findings
        ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("drop_race", "part-002.parquet: missing column(s) ['race']"),
        ("null_race", "part-002.parquet, batch 0: 1 row(s) with a null 'race'"),
        ("text_score", "part-002.parquet: column 'score' has type "),
    ],
)
def test_a_bad_file_is_named(table, session_tmp, client, change: str, message: str) -> None:
    folder = write_files(table.iloc[:6_000], session_tmp / f"dask-bad-{change}", k=5)
    spoil_file(folder / "part-002.parquet", change)
    with pytest.raises(DataContractError) as err:
        dask_counts(str(folder), ROLES, client=client, threshold=0.5, retries=0)
    assert message in str(err.value)


def test_a_bad_partition_is_named(table, client) -> None:
    df = table.iloc[:6_000].copy()
    df.loc[df.index[3_000], "race"] = None  # partition 3 of 6
    with pytest.raises(DataContractError) as err:
        dask_counts(dd.from_pandas(df, npartitions=6), ROLES, client=client, retries=0)
    assert "partition 3, batch 0: 1 row(s) with a null 'race'" in str(err.value)
    frame = dd.from_pandas(table.iloc[:6_000], npartitions=3)
    odd = frame.map_partitions(
        lambda p: p.assign(score=p["score"].astype(str)) if p.index[0] == 2_000 else p,
        meta=frame._meta,
    )
    with pytest.raises(DataContractError) as err:
        dask_counts(odd, ROLES, client=client, retries=0)
    assert "partition 1: column 'score' has dtype" in str(err.value)


class SlowModel:
    """P(y=1 | x) of a fixed logistic model, slowly (so that a worker can be killed mid-pass);
    kills its own worker process on the file whose first x is ``poison`` (a file that no
    worker survives)."""

    def __init__(self, delay: float, poison: float | None = None) -> None:
        self.delay, self.poison = delay, poison

    def __call__(self, frame: pd.DataFrame) -> np.ndarray:
        if self.poison is not None and frame["x"].iloc[0] == self.poison:
            os._exit(1)
        time.sleep(self.delay)
        return 1 / (1 + np.exp(-(0.9 * frame["x"].to_numpy())))


def _mlflow_runs(uri: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    return [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]


def test_a_killed_worker_is_survived_and_mlflow_gets_one_run(small, session_tmp) -> None:
    table, parts = small
    uri = f"sqlite:///{session_tmp / 'dask-kill-mlflow.db'}"
    settings = _settings(session_tmp, methods=["group_parity"])
    settings.pop("score")
    model = SlowModel(delay=0.1)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as client:  # fmt: skip
        pids = client.run(os.getpid)
        killed: list[int] = []

        def kill_one() -> None:  # once the pass is under way, kill one worker process
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not killed:
                if any(client.processing().values()):
                    time.sleep(0.5)
                    pid = next(iter(pids.values()))
                    os.kill(pid, 9)
                    killed.append(pid)
                time.sleep(0.05)

        killer = threading.Thread(target=kill_one)
        killer.start()
        res = fairengine.audit(
            str(parts), engine="dask", dask_address=cluster.scheduler_address, model=model,
            features=["x"], batch_rows=500, mlflow={"tracking_uri": uri}, **settings,
        )  # fmt: skip
        killer.join()
    assert killed, "no worker was killed while the pass ran"
    expected = fairengine.audit(
        table, model=model.__class__(0.0), features=["x"], **settings
    )  # the same model, in memory
    a = {f.key: f.estimate for f in res.findings()}
    b = {f.key: f.estimate for f in expected.findings()}
    assert a.keys() == b.keys() and a
    for k in a:
        assert a[k] == pytest.approx(b[k], abs=1e-12, nan_ok=True), k
    runs = _mlflow_runs(uri)
    assert [r.info.status for r in runs] == ["FINISHED"]
    assert runs[0].data.tags[TAGS.verdict].lower() == res.verdict.status.lower()


def test_a_file_that_kills_every_worker_fails_cleanly_without_a_run(
    small, cluster, session_tmp
) -> None:
    parts = small[1]
    uri = f"sqlite:///{session_tmp / 'dask-poison-mlflow.db'}"
    settings = _settings(session_tmp, methods=["group_parity"])
    settings.pop("score")
    first_x = float(pd.read_parquet(parts / "part-005.parquet")["x"].iloc[0])
    with pytest.raises(FairEngineError) as err:
        fairengine.audit(
            str(parts), engine="dask", dask_address=cluster.scheduler_address,
            model=SlowModel(0.0, poison=first_x), features=["x"], batch_rows=10_000,
            mlflow={"tracking_uri": uri}, **settings,
        )  # fmt: skip
    assert isinstance(err.value, ClusterError)
    assert "the Dask pass failed" in str(err.value) and "KilledWorker" in str(err.value)
    assert _mlflow_runs(uri) == []
