"""The production set-up of docs/deployments.md on a real PostgreSQL, end to end on 127.0.0.1.

Started once for the module (each in its own process group, killed at the end):

* a throw-away PostgreSQL cluster under the test's tmp dir (``initdb`` + ``postgres -D``,
  127.0.0.1 only, password auth; see ``postgres_support``) with the databases ``prefect`` and
  ``mlflow`` owned by one login role;
* ``prefect server start`` with ``PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://...``
  and its own PREFECT_HOME;
* ``mlflow server`` with ``MLFLOW_BACKEND_STORE_URI=postgresql://...`` (psycopg2), artifacts
  proxied to a folder under tmp, a webhook encryption key, webhook delivery to loopback http;
* the webhook receiver (``python -m deployments.webhook_receiver``, event dispatch);
* the deployments the way the docs' production section sets them up: ``prefect work-pool create
  fairengine-audits --type process``, ``prefect --no-prompt deploy --all --prefect-file
  prefect.yaml`` (``deployments/prefect.yaml`` with its pull directory set to this checkout) and
  ``prefect worker start --pool fairengine-audits`` with ``MLFLOW_TRACKING_URI`` and
  ``FAIRENGINE_AUDIT_CONFIG``.

A model version registered through the MLflow server is delivered by MLflow's webhook to the
receiver, becomes a Prefect event, the trigger of the deployed ``registry-audit`` creates a flow
run, the worker runs it: exactly one audit run lands in MLflow and the version carries its
verdict. The rows are then read back from PostgreSQL itself (psycopg2), and at the end every
process is stopped and checked gone.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import postgres_support
import pytest
import yaml
from deployments_support import (
    REPO,
    TERMINAL,
    Managed,
    clean_env,
    deployment_id,
    flow_runs,
    free_port,
    healthy,
    http,
    start,
    stop_all,
    unfinished_triggered_runs,
    wait_until,
)
from postgres_support import (
    ROLE,
    SYSTEM_USER,
    PostgresCluster,
    start_mlflow_server_pg,
    start_postgres,
    start_prefect_server_pg,
)

from deployments.registry_events import AUDIT_DEPLOYMENT, AUDIT_FLOW_NAME

pytestmark = [pytest.mark.flow, pytest.mark.timeout(420)]

MODEL = "fe-pg-model"
EXPERIMENT = "fe-pg-audits"
POOL = "fairengine-audits"  # the docs' (and prefect.yaml's) work pool
AUDIT_TIMEOUT = 150.0


class Stack:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.logs = tmp / "logs"
        self.procs: list[Managed] = []
        self.pg: PostgresCluster | None = None
        self.secret = secrets.token_urlsafe(24)
        self.prefect_api = ""
        self.prefect_home = Path()
        self.mlflow_url = ""
        self.receiver_url = ""
        self.deployment = ""
        self.webhook_id = ""
        self.client: Any = None
        self.version = ""
        self.base_config = tmp / "audit.yaml"
        self.timings: dict[str, float] = {}

    @property
    def db(self) -> PostgresCluster:
        assert self.pg is not None
        return self.pg

    def env(self, **extra: str) -> dict[str, str]:
        """What the docs give the receiver, ``prefect deploy`` and the worker."""
        return clean_env(
            PREFECT_API_URL=self.prefect_api,
            MLFLOW_TRACKING_URI=self.mlflow_url,
            PREFECT_HOME=str(self.tmp / "prefect-client"),
            PREFECT_LOGGING_LEVEL="INFO",
            FAIRENGINE_HOME=str(self.tmp / "fairengine-home"),
            FAIRENGINE_AUDIT_CONFIG=str(self.base_config),
            FAIRENGINE_WEBHOOK_SECRET=self.secret,
            PREFECT_WORKER_QUERY_SECONDS="2",  # default 10 s
            **extra,
        )

    def audit_runs(self, version: str) -> list[Any]:
        exp = self.client.get_experiment_by_name(EXPERIMENT)
        if exp is None:
            return []
        flt = (
            f"tags.`fairness.model_name` = '{MODEL}' AND tags.`fairness.model_version` = "
            f"'{version}'"
        )
        return self.client.search_runs([exp.experiment_id], filter_string=flt, max_results=100)

    def verdict_tag(self, version: str) -> dict[str, str] | None:
        tags = self.client.get_model_version(MODEL, version).tags
        return tags if "fairness.verdict" in tags else None


def _deploy_project(s: Stack) -> None:
    """The docs' production commands, against the server: work pool, ``prefect deploy``."""
    project = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    # the only edit a team makes for its hosts: the pull directory is this checkout
    project["pull"][0]["prefect.deployments.steps.set_working_directory"]["directory"] = str(REPO)
    workdir = s.tmp / "project"
    workdir.mkdir()
    (workdir / "deployments").symlink_to(REPO / "deployments")
    (workdir / "prefect.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
    prefect = str(Path(sys.executable).parent / "prefect")
    for args in (
        [prefect, "work-pool", "create", POOL, "--type", "process"],
        [prefect, "--no-prompt", "deploy", "--all", "--prefect-file", "prefect.yaml"],
    ):
        out = subprocess.run(
            args,
            env=s.env(),
            cwd=workdir,
            capture_output=True,
            timeout=120,
            start_new_session=True,
        )
        assert out.returncode == 0, (out.stdout + out.stderr).decode(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    import mlflow
    from cryptography.fernet import Fernet
    from mlflow import MlflowClient
    from sklearn.linear_model import LogisticRegression

    from fairengine.datasets import make_lipton_hiring

    tmp = tmp_path_factory.mktemp("deployments-pg")
    s = Stack(tmp)
    t0 = time.monotonic()
    saved_uris = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    try:
        s.pg = start_postgres(tmp, s.logs)
        s.timings["postgres"] = time.monotonic() - t0
        prefect_proc, s.prefect_api, s.prefect_home = start_prefect_server_pg(tmp, s.logs, s.pg)
        s.procs.append(prefect_proc)
        mlflow_proc, s.mlflow_url = start_mlflow_server_pg(
            tmp, s.logs, s.pg, Fernet.generate_key().decode()
        )
        s.procs.append(mlflow_proc)

        # audit data, base config and model while the servers migrate their databases
        features = ["work_exp", "hair_len"]
        frame = make_lipton_hiring(n_per_group=400, seed=3).frame
        model = LogisticRegression().fit(frame[features], frame["hired"])
        frame.to_csv(tmp / "hiring.csv", index=False)
        config = {
            "name": "deployment-pg-test",
            "data": {"path": "hiring.csv"},
            "columns": {"label": "hired", "protected": ["gender"], "features": features},
            "threshold": 0.5,
            "validation": {"min_group_size": 30},
            "output": {"dir": str(tmp / "reports")},
            "mlflow": {"experiment": EXPERIMENT},
        }
        s.base_config.write_text(json.dumps(config))  # JSON is YAML

        wait_until(
            lambda: healthy(f"{s.prefect_api}/health"), 150, "prefect server", (prefect_proc,)
        )
        wait_until(lambda: healthy(f"{s.mlflow_url}/health"), 150, "mlflow server", (mlflow_proc,))
        s.timings["servers"] = time.monotonic() - t0

        port = free_port()
        receiver = start(
            "receiver",
            [sys.executable, "-m", "deployments.webhook_receiver", "--port", str(port)],
            s.env(),
            tmp,
            s.logs,
        )
        s.procs.append(receiver)
        s.receiver_url = receiver_url = f"http://127.0.0.1:{port}/mlflow/webhook"
        _deploy_project(s)
        s.deployment = deployment_id(s.prefect_api, AUDIT_DEPLOYMENT) or ""
        assert s.deployment, f"{AUDIT_DEPLOYMENT} not deployed"
        worker = start(
            "worker",
            [str(Path(sys.executable).parent / "prefect"), "worker", "start", "--pool", POOL],
            s.env(),
            tmp,
            s.logs,
        )
        s.procs.append(worker)
        s.timings["deployed"] = time.monotonic() - t0

        mlflow.set_tracking_uri(s.mlflow_url)
        mlflow.set_registry_uri(s.mlflow_url)
        s.client = MlflowClient(tracking_uri=s.mlflow_url, registry_uri=s.mlflow_url)
        s.webhook_id = s.client.create_webhook(
            name="fairengine",
            url=receiver_url,
            events=["model_version.created", "model_version_alias.created"],
            secret=s.secret,
        ).webhook_id
        time.sleep(1.5)  # the server caches each event's webhooks for MLFLOW_WEBHOOK_CACHE_TTL
        wait_until(
            lambda: healthy(receiver_url.rsplit("/", 2)[0] + "/healthz"),
            60,
            "webhook receiver",
            (receiver,),
        )
        # the worker's first poll; runs created before it would simply wait for it
        wait_until(
            lambda: http("POST", f"{s.prefect_api}/work_pools/{POOL}/workers/filter", {})[1],
            60,
            "the worker to report to its pool",
            (worker,),
        )

        # a model version registered through the MLflow server, artifacts proxied by it
        train = s.client.create_experiment("fe-pg-train")
        with mlflow.start_run(experiment_id=train):
            info = mlflow.sklearn.log_model(
                model,
                name="model",
                registered_model_name=MODEL,
                pyfunc_predict_fn="predict_proba",
                pip_requirements=["scikit-learn"],
            )
        s.version = str(info.registered_model_version)
        s.timings["registered"] = time.monotonic() - t0
        yield s
    finally:
        s.logs.mkdir(parents=True, exist_ok=True)
        (s.logs / "timings.json").write_text(json.dumps(s.timings))
        mlflow.set_tracking_uri(saved_uris[0])
        mlflow.set_registry_uri(saved_uris[1])
        servers = {"prefect-server", "mlflow-server"}
        clients = [p for p in s.procs if p.name not in servers]
        # clients first, then the servers, then the database they write to
        survivors = stop_all(clients) | stop_all([p for p in s.procs if p.name in servers])
        if s.pg is not None:
            left = s.pg.stop()
            if left:
                survivors["postgres"] = left
        assert not survivors, f"processes left running: {survivors}"
        assert s.pg is None or not s.pg.owns_root or not s.pg.root.exists()


def test_registered_version_is_audited_once_through_the_worker(stack: Stack) -> None:
    """webhook (MLflow on PostgreSQL) -> receiver -> Prefect event -> the deployed trigger ->
    a flow run in the process pool, run by the worker -> one audit run, verdict on the version."""
    assert stack.version == "1"
    wait_until(
        lambda: stack.verdict_tag(stack.version),
        AUDIT_TIMEOUT,
        "the verdict tag on version 1",
        tuple(stack.procs),
        interval=1.0,
    )
    time.sleep(3)  # a duplicate (it must not exist) would have been created by now
    wait_until(
        lambda: not unfinished_triggered_runs(stack.prefect_api, stack.deployment),
        60,
        "the triggered flow runs to finish",
        tuple(stack.procs),
        interval=1.0,
    )
    runs = flow_runs(stack.prefect_api, stack.deployment)
    (run,) = [r for r in runs if not r.get("auto_scheduled")]
    assert run["state_type"] == "COMPLETED", run["state"]
    assert run["work_pool_name"] == POOL
    assert run["parameters"]["model_name"] == MODEL
    assert run["parameters"]["model_version"] == "1"
    assert run["parameters"]["source"] == "webhook"

    (audit,) = stack.audit_runs(stack.version)
    assert audit.info.status == "FINISHED"
    assert audit.data.tags["fairness.trigger"] == "mlflow.model_version.created"
    assert audit.data.tags["fairness.trigger_source"] == "webhook"
    assert audit.data.tags["fairness.prefect_flow_run_id"] == run["id"]
    assert audit.data.tags["fairness.model_uri"] == f"models:/{MODEL}/1"
    assert any(k.startswith("dp_gap.gender.") for k in audit.data.metrics)  # a real audit
    # the audit's evidence went through the server's artifact proxy to the folder under tmp
    assert audit.info.artifact_uri.startswith("mlflow-artifacts:")
    stored = stack.tmp / "mlflow-artifacts"
    assert list(stored.glob(f"*/{audit.info.run_id}/artifacts/audit/audit.json"))
    tags = stack.verdict_tag(stack.version)
    assert tags is not None
    assert tags["fairness.audit_run_id"] == audit.info.run_id
    assert tags["fairness.verdict"] == audit.data.tags["fairness.verdict"]
    assert tags["fairness.verdict"] in {"pass", "fail", "incomplete"}
    _, health = http("GET", stack.receiver_url.rsplit("/", 2)[0] + "/healthz")
    assert health["counts"] == {"accepted": 1}


def test_the_data_is_in_postgresql(stack: Stack) -> None:
    """Read back from the databases themselves: both servers wrote to PostgreSQL, not SQLite."""
    db = stack.db
    (audit,) = stack.audit_runs(stack.version)

    # Prefect: the deployment, its pool, the flow run, the event and the flow's claim Variable
    assert db.query(
        "prefect",
        "SELECT d.name, wp.type FROM deployment d JOIN work_queue wq ON wq.id = d.work_queue_id"
        " JOIN work_pool wp ON wp.id = wq.work_pool_id WHERE d.id = %s",
        (stack.deployment,),
    ) == [("registry-audit", "process")]
    rows = db.query(
        "prefect",
        "SELECT fr.id::text, fr.state_type::text, fr.parameters->>'model_version'"
        " FROM flow_run fr JOIN flow f ON f.id = fr.flow_id"
        " WHERE f.name = %s AND fr.deployment_id = %s AND NOT fr.auto_scheduled",
        (AUDIT_FLOW_NAME, stack.deployment),
    )
    assert rows == [(audit.data.tags["fairness.prefect_flow_run_id"], "COMPLETED", "1")]
    (n_flow_runs,) = db.query("prefect", "SELECT count(*) FROM flow_run")[0]
    assert n_flow_runs >= 2  # the audit flow run and its subflow (the audit itself)
    assert db.query(
        "prefect",
        "SELECT count(*) FROM events WHERE event = 'mlflow.model_version.created'"
        " AND resource->>'mlflow.model_version' = '1'",
    ) == [(1,)]
    claim = db.query(
        "prefect", "SELECT value->>'state' FROM variable WHERE name LIKE 'fairengine-audit-%%'"
    )
    assert claim == [("done",)]

    # MLflow: the audit run, the model version and its verdict tag, the webhook
    assert db.query(
        "mlflow",
        "SELECT r.status, e.name FROM runs r JOIN experiments e USING (experiment_id)"
        " WHERE r.run_uuid = %s",
        (audit.info.run_id,),
    ) == [("FINISHED", EXPERIMENT)]
    assert db.query(
        "mlflow",
        "SELECT count(*) FROM runs r JOIN experiments e USING (experiment_id)"
        " WHERE e.name = %s AND r.lifecycle_stage = 'active'",
        (EXPERIMENT,),
    ) == [(1,)]
    assert db.query("mlflow", "SELECT version FROM model_versions WHERE name = %s", (MODEL,)) == [
        (1,)
    ]
    assert db.query(
        "mlflow",
        "SELECT value FROM model_version_tags WHERE name = %s AND version = 1"
        " AND key = 'fairness.verdict'",
        (MODEL,),
    ) == [(audit.data.tags["fairness.verdict"],)]
    ((url, stored_secret),) = db.query(
        "mlflow", "SELECT url, secret FROM webhooks WHERE webhook_id = %s", (stack.webhook_id,)
    )
    assert url.startswith("http://127.0.0.1:")
    assert stack.secret not in stored_secret  # encrypted with MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY

    # Prefect's migrations create pg_trgm: a trusted extension (PostgreSQL >= 13), so the
    # database's owner can, no superuser needed
    assert db.query(
        "prefect", "SELECT extowner::regrole::text FROM pg_extension WHERE extname = 'pg_trgm'"
    ) == [(ROLE,)]
    # the tables belong to the servers' role, and no SQLite store was created on the side
    assert db.query(
        "mlflow", "SELECT tableowner FROM pg_tables WHERE tablename = 'model_versions'"
    ) == [(ROLE,)]
    assert not list(stack.prefect_home.rglob("*.db"))
    assert not list(stack.tmp.glob("*.db")) and not (stack.tmp / "mlruns").exists()
    runs = flow_runs(stack.prefect_api, stack.deployment)
    assert all(r["state_type"] in TERMINAL for r in runs if not r.get("auto_scheduled"))


def test_the_cluster_listens_on_loopback_only_with_passwords(stack: Stack) -> None:
    db = stack.db
    admin = db.connect(admin=True)
    try:
        with admin.cursor() as cur:
            cur.execute("SHOW listen_addresses")
            assert cur.fetchone() == ("127.0.0.1",)
            cur.execute("SHOW unix_socket_directories")
            assert cur.fetchone() == ("",)
            cur.execute(
                "SELECT type, database, user_name, address, auth_method FROM pg_hba_file_rules"
            )
            assert cur.fetchall() == [("host", ["all"], ["all"], "127.0.0.1", "scram-sha-256")]
            cur.execute("SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = %s", (ROLE,))
            assert cur.fetchone() == (False, False)
    finally:
        admin.close()
    import psycopg2

    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(
            host="127.0.0.1", port=db.port, dbname="prefect", user=ROLE, password="wrong"
        )
    assert db.managed is not None
    if os.geteuid() == 0:  # initdb/postgres refuse root: the postmaster runs as postgres
        uid = pwd.getpwnam(SYSTEM_USER).pw_uid
        assert Path(f"/proc/{db.managed.proc.pid}").stat().st_uid == uid
        assert db.data.stat().st_uid == uid and db.owns_root
        assert (stack.tmp / "postgres").resolve() == db.root


# ------------------------------------------------------------------ no cluster needed
def test_root_without_a_postgres_user_fails_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_such_user(name: str) -> Any:
        raise KeyError(name)

    monkeypatch.setattr(postgres_support.os, "geteuid", lambda: 0)
    monkeypatch.setattr(postgres_support.pwd, "getpwnam", no_such_user)
    with pytest.raises(pytest.fail.Exception, match="no 'postgres' system user"):
        postgres_support._run_as_postgres()


def test_missing_server_binaries_fail_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(postgres_support.shutil, "which", lambda name: None)
    monkeypatch.setattr(postgres_support, "PG_ROOTS", tmp_path / "none")
    with pytest.raises(pytest.fail.Exception, match="install Debian's postgresql"):
        postgres_support.start_postgres(tmp_path, tmp_path / "logs")
    assert not (tmp_path / "postgres").exists()


def test_binaries_from_path_first_then_the_newest_debian_major(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for d in ("9.6", "15", "16", "17-incomplete"):
        (tmp_path / "lib" / d / "bin").mkdir(parents=True)
        for exe in ("initdb", "postgres") if d != "17-incomplete" else ("initdb",):
            (tmp_path / "lib" / d / "bin" / exe).touch()
    monkeypatch.setattr(postgres_support, "PG_ROOTS", tmp_path / "lib")
    monkeypatch.setattr(postgres_support.shutil, "which", lambda name: None)
    assert postgres_support.postgres_bindir() == tmp_path / "lib" / "16" / "bin"
    on_path = tmp_path / "path"
    on_path.mkdir()
    for exe in ("initdb", "postgres"):
        (on_path / exe).touch()
    monkeypatch.setattr(postgres_support.shutil, "which", lambda name: str(on_path / name))
    assert postgres_support.postgres_bindir() == on_path
