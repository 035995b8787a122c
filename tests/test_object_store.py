"""Object-store URLs (``data.path: s3://bucket/prefix/*.parquet``, ``data.storage_options``;
:mod:`fairengine.streaming.locations`) against a real S3 endpoint: moto's S3 server on
127.0.0.1, reached by s3fs with an endpoint URL, a key and a secret. The stream and Dask engines
read the uploaded files into exactly the count tables and sample of the same files on local
disk; a streamed audit of the URL gives exactly the local audit's findings; the credentials
reach neither the audit's JSON and report, nor MLflow, nor Prefect's database, nor the logs;
missing buckets, prefixes, matches and protocol packages are errors naming the URL or the
package."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from engines_support import COUNT_METHODS, ROLES, WEIGHTED, same_counts, write_files
from engines_support import table as make_table
from object_store_support import S3Server, s3_server

import fairengine
from fairengine.config import REDACTED, AuditConfig
from fairengine.errors import ConfigError, DataContractError
from fairengine.streaming import StreamSource, stream_counts
from tasks.audit_inputs import split_storage_options

N_FILES = 7


@pytest.fixture(scope="module")
def s3() -> S3Server:
    with s3_server() as server:
        yield server


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return make_table(30_000, seed=4)


@pytest.fixture(scope="module")
def local(table: pd.DataFrame, session_tmp: Path) -> Path:
    folder = write_files(table, session_tmp / "objstore-parts", k=N_FILES)
    csv = session_tmp / "objstore-csv"
    csv.mkdir(exist_ok=True)
    for path in sorted(folder.glob("*.parquet")):
        pd.read_parquet(path).to_csv(csv / f"{path.stem}.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def remote(s3: S3Server, local: Path, session_tmp: Path) -> str:
    s3.upload(session_tmp / "objstore-csv", "scored-csv")
    return s3.upload(local, "scored")


@pytest.mark.parametrize("roles", [ROLES, WEIGHTED], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("layout", ["glob", "prefix"])
def test_the_stream_reads_s3_into_the_local_counts_and_sample(s3, local, remote, roles, layout):
    kw = {"threshold": 0.5, "batch_rows": 1_700, "sample_rows": 3_000, "seed": 9}
    on_disk = stream_counts(str(local), roles, **kw)
    url = f"{remote}/*.parquet" if layout == "glob" else f"{remote}/"
    from_s3 = stream_counts(url, roles, storage_options=s3.storage_options, **kw)
    same_counts(on_disk, from_s3)
    assert from_s3.files == on_disk.files and len(from_s3.files) == N_FILES
    assert from_s3.n_batches == on_disk.n_batches
    # the sample's keys hash (file name, row): the same rows from the store as from the disk
    pd.testing.assert_frame_equal(on_disk.sample.frame, from_s3.sample.frame)


def test_a_csv_glob_on_s3_is_streamed(s3, session_tmp, remote) -> None:
    kw = {"threshold": None, "batch_rows": 2_500}
    on_disk = stream_counts(str(session_tmp / "objstore-csv" / "*.csv"), ROLES, **kw)
    url = f"s3://{s3.bucket}/scored-csv/*.csv"
    from_s3 = stream_counts(url, ROLES, storage_options=s3.storage_options, **kw)
    same_counts(on_disk, from_s3)
    assert from_s3.files == on_disk.files


def test_the_dask_engine_reads_s3_on_worker_processes(s3, local, remote) -> None:
    distributed = pytest.importorskip("distributed")
    from fairengine.streaming.dask_engine import dask_counts

    kw = {"threshold": 0.5, "batch_rows": 2_000, "sample_rows": 2_000, "seed": 2}
    on_disk = stream_counts(str(local), ROLES, **kw)
    # worker processes: the source (its s3fs filesystem, credentials inside) is pickled to them
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        from_s3 = dask_counts(
            f"{remote}/*.parquet", ROLES, client=client, storage_options=s3.storage_options, **kw
        )
    same_counts(on_disk, from_s3)
    pd.testing.assert_frame_equal(on_disk.sample.frame, from_s3.sample.frame)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://no-such-bucket/scored/", "the data path 's3://no-such-bucket/scored/' does not "),
        ("s3://{bucket}/no-such-prefix/", "the data path 's3://{bucket}/no-such-prefix/' does "),
        ("s3://{bucket}/scored/*.orc", "no file matches 's3://{bucket}/scored/*.orc'"),
        ("s3://no-such-bucket/x/*.parquet", "no file matches 's3://no-such-bucket/x/*.parquet'"),
    ],
    ids=["bucket", "prefix", "no-match", "glob-in-missing-bucket"],
)
def test_a_missing_bucket_prefix_or_match_names_the_url(s3, remote, url, message) -> None:
    url, message = url.format(bucket=s3.bucket), message.format(bucket=s3.bucket)
    with pytest.raises(DataContractError) as err:
        StreamSource(url, storage_options=s3.storage_options)
    assert message in str(err.value)
    assert s3.secret not in str(err.value)


def test_a_protocol_without_its_package_names_the_package(monkeypatch) -> None:
    from fsspec.registry import known_implementations

    monkeypatch.setitem(
        known_implementations,
        "lakefake",
        {"class": "lakefake_fsspec.LakeFileSystem", "err": "Install lakefake_fsspec"},
    )
    assert "lakefake_fsspec" not in sys.modules
    with pytest.raises(DataContractError) as err:
        StreamSource("lakefake://bucket/data/*.parquet")
    assert "needs the package 'lakefake_fsspec'" in str(err.value)
    assert "pip install lakefake_fsspec" in str(err.value)
    with pytest.raises(DataContractError, match="no filesystem for the protocol 'nosuchproto'"):
        StreamSource("nosuchproto://bucket/data/")


def test_storage_options_need_a_url_and_are_redacted_in_the_config() -> None:
    options = {
        "endpoint_url": "http://127.0.0.1:9000",
        "key": "AKIDEXAMPLE",
        "secret": "hunter2",
        "client_kwargs": {"region_name": "eu-west-1", "aws_session_token": "tok"},
    }
    cfg = AuditConfig.from_dict(
        {"data": {"path": "s3://b/p/", "storage_options": options}, "columns": {"label": "y"}}
    )
    assert cfg.data.storage_options == options  # used as given
    written = cfg.to_dict()["data"]["storage_options"]
    assert written == {
        "endpoint_url": "http://127.0.0.1:9000",
        "key": REDACTED,
        "secret": REDACTED,
        "client_kwargs": {"region_name": "eu-west-1", "aws_session_token": REDACTED},
    }
    with pytest.raises(ConfigError, match=r"data\.storage_options apply to an object-store URL"):
        AuditConfig.from_dict({"data": {"path": "/tmp/x.parquet", "storage_options": options}})
    # a relative base folder does not turn a URL into a local path
    cfg = AuditConfig.from_dict({"data": {"path": "s3://b/p/*.parquet"}}, base_dir=Path("/srv"))
    assert cfg.data.path == "s3://b/p/*.parquet"
    raw = {"data": {"path": "s3://b/p/", "storage_options": options}, "seed": 3}
    rest, inputs = split_storage_options(raw, None)
    assert rest == {"data": {"path": "s3://b/p/"}, "seed": 3}
    assert inputs is not None and inputs.storage_options == options
    assert raw["data"]["storage_options"] == options  # the caller's dict is left as it was


def _files_containing(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.flow
def test_an_audit_of_s3_equals_the_local_audit_and_writes_no_credentials(
    s3, local, remote, session_tmp, tmp_path, capfd
) -> None:
    mlflow_root = tmp_path / "mlflow"
    mlflow_root.mkdir()
    uri = f"sqlite:///{mlflow_root / 'mlflow.db'}"
    settings = {
        "label": "y",
        "protected": ["race", "sex"],
        "score": "score",
        "methods": COUNT_METHODS,
        "cache": {"enabled": False},
        "batch_rows": 3_000,
        "sample_rows": 4_000,
        "seed": 5,
    }
    from_s3 = fairengine.audit(
        f"{remote}/*.parquet", engine="stream", storage_options=s3.storage_options,
        output={"dir": str(tmp_path / "reports")}, mlflow={"tracking_uri": uri}, **settings,
    )  # fmt: skip
    on_disk = fairengine.audit(
        str(local), engine="stream", output={"dir": str(tmp_path / "local-reports")}, **settings
    )
    a = {f.key: f for f in from_s3.findings()}
    b = {f.key: f for f in on_disk.findings()}
    assert a.keys() == b.keys() and len(a) > 50
    for k in a:  # the same engine on the same bytes: exactly the same numbers
        assert (a[k].estimate, a[k].pvalue, a[k].decision) == (
            b[k].estimate,
            b[k].pvalue,
            b[k].decision,
        ) or (a[k].estimate != a[k].estimate and b[k].estimate != b[k].estimate), k
    assert from_s3.verdict.status == on_disk.verdict.status
    assert from_s3.dataset.n_rows == on_disk.dataset.n_rows == 30_000
    assert from_s3.dataset.source == f"{remote}/*.parquet"
    written = from_s3.config["data"]["storage_options"]
    assert written == {"endpoint_url": s3.endpoint, "key": REDACTED, "secret": REDACTED}
    # nothing the audit wrote or logged holds the key or the secret: its JSON and report,
    # MLflow's database and artifacts, Prefect's database (the flow's recorded parameters)
    out = capfd.readouterr()
    recorded = f"{remote}/*.parquet".encode()  # the scans do see what was recorded: the URL
    assert _files_containing(session_tmp / "prefect", recorded)  # (a flow parameter)
    assert _files_containing(mlflow_root, recorded)  # (an MLflow parameter)
    for needle in (s3.secret, s3.key):
        assert needle not in out.out and needle not in out.err
        for root in (tmp_path, session_tmp / "prefect", Path(from_s3.paths["json"]).parent):
            assert _files_containing(root, needle.encode()) == [], needle
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert len(runs) == 1
    artifacts = Path(runs[0].info.artifact_uri.removeprefix("file://"))
    assert (artifacts / "audit" / "audit.json").is_file()
    for needle in (s3.secret, s3.key):
        assert _files_containing(artifacts, needle.encode()) == [], needle
    params = runs[0].data.params
    assert params["data.storage_options.secret"] == REDACTED
    assert not any(s3.secret in v or s3.key in v for v in params.values())


def test_an_object_store_url_is_streamed_and_the_in_memory_reader_refuses_it() -> None:
    from tasks.stream_data import data_engine

    columns = {"label": "y", "protected": ["race"], "score": "score"}
    for path in ("s3://b/p/", "s3://b/p/*.parquet", "s3://b/p/one.csv"):
        cfg = AuditConfig.from_dict({"data": {"path": path}, "columns": columns})
        assert data_engine(cfg, False) == "stream", path
    cfg = AuditConfig.from_dict({"data": {"path": "s3://b/p/", "engine": "dask"}})
    assert data_engine(cfg, False) == "dask"
    cfg = AuditConfig.from_dict({"data": {"path": "s3://b/p/", "engine": "pandas"}})
    with pytest.raises(ConfigError, match=r"data\.engine: pandas reads local files"):
        data_engine(cfg, False)
    cfg = AuditConfig.from_dict({"data": {"path": "s3://b/x.csv", "missing": "drop"}})
    with pytest.raises(ConfigError, match=r"is streamed: data\.names, data\.na_values"):
        data_engine(cfg, False)


@pytest.mark.flow
def test_the_cli_audits_an_s3_url_and_records_no_credentials(s3, remote, tmp_path) -> None:
    import os
    import subprocess

    import yaml

    config_dir, home = tmp_path / "config", tmp_path / "home"
    config_dir.mkdir()
    config = {
        "data": {
            "path": f"{remote}/*.parquet",
            "storage_options": s3.storage_options,
            "batch_rows": 5_000,
            "sample_rows": 3_000,
        },
        "columns": {"label": "y", "protected": ["race", "sex"], "score": "score"},
        "methods": {m: {"enabled": m == "group_parity"} for m in COUNT_METHODS},
        "cache": {"enabled": False},
        "output": {"dir": str(home / "reports")},
        "mlflow": {"tracking_uri": f"sqlite:///{home / 'mlflow.db'}"},
    }
    (config_dir / "audit.yaml").write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "PREFECT_HOME": str(home / "prefect"),
        "FAIRENGINE_HOME": str(home / "fairengine"),
    }
    run = subprocess.run(
        [sys.executable, "-m", "flows.cli", "audit", "--config", str(config_dir / "audit.yaml")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        timeout=600,
    )
    assert run.returncode in (0, 1), run.stderr[-2000:]  # 1: a FAIL verdict
    assert "Verdict:" in run.stdout + run.stderr
    written = list((home / "reports").rglob("audit.json"))
    assert len(written) == 1
    assert f"{remote}/*.parquet".encode() in written[0].read_bytes()
    assert _files_containing(home / "prefect", f"{remote}/*.parquet".encode())
    assert list((home / "mlartifacts").rglob("audit.json"))  # MLflow's artifacts: under home
    for needle in (s3.secret, s3.key):
        assert needle not in run.stdout and needle not in run.stderr
        assert _files_containing(home, needle.encode()) == [], needle
