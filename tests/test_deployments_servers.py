"""Registry-event and scheduled audits end to end, with real servers on 127.0.0.1.

Started once for the module (each in its own process group, killed at the end):
``prefect server start`` (own PREFECT_HOME), ``mlflow server`` (SQLite backend, artifacts under
tmp, webhook delivery to loopback http allowed), the webhook receiver
(``python -m deployments.webhook_receiver``) and the deployments
(``python -m deployments.serve`` with a ``* * * * *`` cron and the registry trigger).
The test process talks to MLflow through ``MlflowClient`` on the server's URL and reads Prefect
through its REST API.

The tests run in file order and build on each other (model ``fe-hiring-model``, versions 1-3;
``fe-scheduled-model`` for the schedule):

1. the cron schedule has produced an audit of ``models:/fe-scheduled-model@champion`` (then the
   schedule is switched off);
2. version 1, registered through the MLflow server in the fixture -> webhook -> Prefect event ->
   trigger -> exactly one audit run, whose verdict tag lands on version 1; the alias
   ``champion`` -> 1 -> one more audit;
3. version 2 (webhook paused): one signed delivery sent twice (409 the second time) plus the
   same event under a new delivery id -> one Prefect event;
4. version 3 (webhook paused): forged, tampered, unsigned, stale and oversized deliveries are
   refused and reach neither Prefect nor MLflow;
5. the polling sensor reports versions 1-3 and the alias: version 3 is audited (source
   ``sensor``); versions 1 and 2 keep exactly one audit per event; a second poll reports nothing;
6. direct deployment runs for an audit that already ran (MLflow record) or is running (claim
   Variable) are skipped by the flow itself.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from deployments_support import (
    REPO,
    TERMINAL,
    Managed,
    clean_env,
    deployment_id,
    events,
    flow_runs,
    free_port,
    healthy,
    http,
    post_webhook,
    signed_headers,
    start,
    start_mlflow_server,
    start_prefect_server,
    stop_all,
    unfinished_triggered_runs,
    wait_until,
    webhook_body,
)

from deployments.registry_events import AUDIT_DEPLOYMENT

pytestmark = pytest.mark.flow

MODEL = "fe-hiring-model"
SCHED_MODEL = "fe-scheduled-model"  # audited by the cron schedule only
EXPERIMENT = "fe-deployment-audits"
AUDIT_TIMEOUT = 150.0


class Stack:
    """Handles on the running servers and what the tests share."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.logs = tmp / "logs"
        self.procs: list[Managed] = []
        self.secret = secrets.token_urlsafe(24)
        self.prefect_api = ""
        self.mlflow_url = ""
        self.receiver_url = ""
        self.deployment = ""
        self.webhook_id = ""
        self.client: Any = None
        self.model: Any = None
        self.features = ["work_exp", "hair_len"]
        self.serve_started = 0.0
        self.train_exp = ""
        self.v1 = ""

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(
            PREFECT_API_URL=self.prefect_api,
            MLFLOW_TRACKING_URI=self.mlflow_url,
            PREFECT_HOME=str(self.tmp / "prefect-client"),
            PREFECT_LOGGING_LEVEL="INFO",
            PREFECT_RUNNER_POLL_FREQUENCY="2",
            FAIRENGINE_HOME=str(self.tmp / "fairengine-home"),
            FAIRENGINE_WEBHOOK_SECRET=self.secret,
            **extra,
        )

    # ------------------------------------------------------------- reads
    def audit_runs(self, version: str | None = None, model: str = MODEL) -> list[Any]:
        exp = self.client.get_experiment_by_name(EXPERIMENT)
        if exp is None:
            return []
        flt = f"tags.`fairness.model_name` = '{model}'"
        if version is not None:
            flt += f" AND tags.`fairness.model_version` = '{version}'"
        return self.client.search_runs([exp.experiment_id], filter_string=flt, max_results=100)

    def verdict_tag(self, version: str) -> dict[str, str] | None:
        tags = self.client.get_model_version(MODEL, version).tags
        return tags if "fairness.verdict" in tags else None

    def settle(self, timeout: float = AUDIT_TIMEOUT) -> None:
        """Wait until every triggered flow run of the audit deployment has finished."""
        time.sleep(4)  # let an event in flight become a flow run
        wait_until(
            lambda: not unfinished_triggered_runs(self.prefect_api, self.deployment),
            timeout,
            "triggered audit runs to finish",
            tuple(self.procs),
            interval=1.0,
        )

    def failed_runs(self) -> list[dict[str, Any]]:
        return [
            r
            for r in flow_runs(self.prefect_api, self.deployment)
            if not r.get("auto_scheduled") and r["state_type"] in TERMINAL - {"COMPLETED"}
        ]

    def register_version(self, model: str = MODEL) -> str:
        import mlflow

        with mlflow.start_run(experiment_id=self.train_exp):
            info = mlflow.sklearn.log_model(
                self.model,
                name="model",
                registered_model_name=model,
                pyfunc_predict_fn="predict_proba",
                pip_requirements=["scikit-learn"],
            )
        return str(info.registered_model_version)

    def set_webhook(self, active: bool) -> None:
        self.client.update_webhook(self.webhook_id, status="ACTIVE" if active else "DISABLED")
        time.sleep(1.5)  # the server caches webhooks per event for MLFLOW_WEBHOOK_CACHE_TTL=1 s


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    import mlflow
    from mlflow import MlflowClient
    from sklearn.linear_model import LogisticRegression

    from fairengine.datasets import make_lipton_hiring

    tmp = tmp_path_factory.mktemp("deployments")
    s = Stack(tmp)
    saved_uris = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    try:
        prefect_proc, s.prefect_api = start_prefect_server(tmp, s.logs)
        s.procs.append(prefect_proc)
        mlflow_proc, s.mlflow_url = start_mlflow_server(tmp, s.logs)
        s.procs.append(mlflow_proc)

        # audit data and model while the servers start
        data = make_lipton_hiring(n_per_group=400, seed=3)
        frame = data.frame
        s.model = LogisticRegression().fit(frame[s.features], frame["hired"])
        data_path = tmp / "hiring.csv"
        frame.to_csv(data_path, index=False)
        config = {
            "name": "deployment-test",
            "data": {"path": data_path.name},
            "columns": {"label": "hired", "protected": ["gender"], "features": s.features},
            "threshold": 0.5,
            "validation": {"min_group_size": 30},
            "output": {"dir": str(tmp / "reports")},
            "mlflow": {"experiment": EXPERIMENT},
        }
        base_config = tmp / "audit.yaml"
        base_config.write_text(json.dumps(config))  # JSON is YAML

        wait_until(
            lambda: healthy(f"{s.prefect_api}/health"), 120, "prefect server", (prefect_proc,)
        )
        wait_until(lambda: healthy(f"{s.mlflow_url}/health"), 120, "mlflow server", (mlflow_proc,))

        # first sensor poll records the (empty) registry state; runs while we start the rest
        first_poll = subprocess.Popen(
            [sys.executable, "-m", "deployments.registry_sensor", "--model", MODEL],
            env=s.env(),
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        port = free_port()
        receiver = start(
            "receiver",
            [sys.executable, "-m", "deployments.webhook_receiver", "--port", str(port)],
            s.env(),
            tmp,
            s.logs,
        )
        s.procs.append(receiver)
        s.receiver_url = f"http://127.0.0.1:{port}/mlflow/webhook"
        serve = start(
            "serve",
            [
                sys.executable,
                "-m",
                "deployments.serve",
                "--base-config",
                str(base_config),
                "--model-name",
                SCHED_MODEL,
                "--alias",
                "champion",
                "--cron",
                "* * * * *",
                "--limit",
                "3",
            ],
            s.env(),
            tmp,
            s.logs,
        )
        s.procs.append(serve)
        s.serve_started = time.time()

        mlflow.set_tracking_uri(s.mlflow_url)
        mlflow.set_registry_uri(s.mlflow_url)
        s.client = MlflowClient(tracking_uri=s.mlflow_url, registry_uri=s.mlflow_url)
        # model artifacts under the test's tmp dir (never ./mlruns in the cwd)
        s.train_exp = s.client.create_experiment(
            "fe-train", artifact_location=(tmp / "train-artifacts").as_uri()
        )
        # the cron's model, registered before the webhook exists (no registry event for it)
        sched_version = s.register_version(SCHED_MODEL)
        s.client.set_registered_model_alias(SCHED_MODEL, "champion", sched_version)
        s.webhook_id = s.client.create_webhook(
            name="fairengine-test",
            url=s.receiver_url,
            events=["model_version.created", "model_version_alias.created"],
            secret=s.secret,
        ).webhook_id
        # the server caches the webhooks of each event for MLFLOW_WEBHOOK_CACHE_TTL=1 s, and the
        # registrations above cached "none": a version registered within that second (a quiet
        # machine gets here that fast) would not be delivered
        time.sleep(1.5)

        out, _ = first_poll.communicate(timeout=180)
        assert first_poll.returncode == 0, out.decode(errors="replace")[-3000:]
        assert json.loads(out.decode().strip().splitlines()[-1])["initialised"] is True

        wait_until(
            lambda: healthy(s.receiver_url.rsplit("/", 2)[0] + "/healthz"),
            60,
            "webhook receiver",
            (receiver,),
        )
        s.deployment = wait_until(
            lambda: deployment_id(s.prefect_api, AUDIT_DEPLOYMENT),
            120,
            "the served audit deployment",
            (serve,),
        )
        status, autos = http("POST", f"{s.prefect_api}/automations/filter", {})
        assert status == 200 and any(
            a["name"] == "fairengine-audit-on-registry-event" for a in autos
        ), autos
        # register version 1 and point an alias at it now: their audits run while the cron
        # test waits for the next minute (test_registering_a_version_audits_it_once checks them)
        s.v1 = s.register_version()
        s.client.set_registered_model_alias(MODEL, "champion", s.v1)
        yield s
    finally:
        mlflow.set_tracking_uri(saved_uris[0])
        mlflow.set_registry_uri(saved_uris[1])
        servers = {"prefect-server", "mlflow-server"}
        clients = [p for p in s.procs if p.name not in servers]
        # clients first (serve pauses its schedule through the API at shutdown), then servers
        survivors = stop_all(clients) | stop_all([p for p in s.procs if p.name in servers])
        assert not survivors, f"processes left running: {survivors}"


def _one_run_per_trigger(runs: list[Any]) -> dict[str, Any]:
    by_trigger: dict[str, list[Any]] = {}
    for r in runs:
        by_trigger.setdefault(r.data.tags.get("fairness.trigger", "?"), []).append(r)
    assert all(len(v) == 1 for v in by_trigger.values()), {
        k: [r.info.run_id for r in v] for k, v in by_trigger.items()
    }
    return {k: v[0] for k, v in by_trigger.items()}


def test_cron_schedule_produces_an_audit(stack: Stack) -> None:
    """The served deployment's ``* * * * *`` schedule audits ``models:/<model>@champion``. Once
    its first run has started the schedule is switched off (and later ticks deleted), so that
    the other tests do not compete with a run every minute."""

    def auto_runs() -> list[dict[str, Any]]:
        return [
            r for r in flow_runs(stack.prefect_api, stack.deployment) if r.get("auto_scheduled")
        ]

    def first_started() -> list[dict[str, Any]]:
        return [r for r in auto_runs() if r["state_type"] != "SCHEDULED"]

    started = wait_until(first_started, 180, "a scheduled run to start", tuple(stack.procs), 1.0)
    status, dep = http("GET", f"{stack.prefect_api}/deployments/{stack.deployment}")
    assert status == 200
    (schedule,) = dep["schedules"]
    assert schedule["schedule"]["cron"] == "* * * * *" and schedule["active"]
    assert schedule["parameters"] == {
        "model_name": SCHED_MODEL,
        "alias": "champion",
        "reason": "schedule",
        "source": "schedule",
    }
    assert set(dep["parameters"]) == {"base_config"}  # nothing leaks into triggered runs

    def paused() -> bool:  # a busy server (SQLite locked) may answer 503: try again
        url = f"{stack.prefect_api}/deployments/{stack.deployment}/schedules/{schedule['id']}"
        return http("PATCH", url, {"active": False})[0] in (200, 204)

    wait_until(paused, 60, "the schedule to be paused", tuple(stack.procs), 2.0)
    for r in auto_runs():
        if r["state_type"] == "SCHEDULED":
            http("DELETE", f"{stack.prefect_api}/flow_runs/{r['id']}")

    first = _finished(stack, started[0]["id"])
    assert first["state_type"] == "COMPLETED", first["state"]
    assert first["parameters"]["model_name"] == SCHED_MODEL
    (run,) = [
        r
        for r in stack.audit_runs(model=SCHED_MODEL)
        if r.data.tags.get("fairness.prefect_flow_run_id") == first["id"]
    ]
    assert run.info.status == "FINISHED"
    assert run.data.tags["fairness.trigger"].startswith("schedule@")
    assert run.data.tags["fairness.trigger_source"] == "schedule"
    assert run.data.tags["fairness.trigger_alias"] == "champion"
    assert run.data.tags["fairness.model_uri"] == f"models:/{SCHED_MODEL}/1"  # champion -> 1
    assert stack.client.get_model_version(SCHED_MODEL, "1").tags["fairness.verdict"] in {
        "pass",
        "fail",
        "incomplete",
    }


def test_registering_a_version_audits_it_once(stack: Stack) -> None:
    """Version 1 was registered through the MLflow server (fixture): webhook -> receiver ->
    Prefect event -> trigger -> exactly one audit, whose verdict tag is on the version; the
    alias ``champion`` -> 1 is a second event with its own single audit."""
    version = stack.v1
    assert version == "1"
    wait_until(
        lambda: len(stack.audit_runs(version)) >= 2,
        AUDIT_TIMEOUT,
        "the audits of version 1 (new version, alias)",
        tuple(stack.procs),
    )
    stack.settle()
    assert stack.failed_runs() == []
    runs = _one_run_per_trigger(stack.audit_runs(version))
    assert set(runs) == {"mlflow.model_version.created", "mlflow.model_version_alias.created"}
    run = runs["mlflow.model_version.created"]
    assert run.info.status == "FINISHED"
    assert run.data.tags["fairness.trigger_source"] == "webhook"
    assert run.data.tags["fairness.model_uri"] == f"models:/{MODEL}/1"
    assert any(k.startswith("dp_gap.gender.") for k in run.data.metrics)  # a real audit
    alias_run = runs["mlflow.model_version_alias.created"]
    assert alias_run.data.tags["fairness.trigger_alias"] == "champion"
    # the version carries the verdict of the audit run it names
    tags = stack.client.get_model_version(MODEL, version).tags
    assert tags["fairness.audit_run_id"] in {r.info.run_id for r in runs.values()}
    assert (
        tags["fairness.verdict"]
        == (stack.client.get_run(tags["fairness.audit_run_id"]).data.tags["fairness.verdict"])
    )
    assert tags["fairness.verdict"] in {"pass", "fail", "incomplete"}
    _, health = http("GET", stack.receiver_url.rsplit("/", 2)[0] + "/healthz")
    assert health["counts"] == {"accepted": 2}

    # MLflow's "test webhook" button sends a fake example payload: acknowledged, nothing started
    result = stack.client.test_webhook(stack.webhook_id)
    assert result.success and result.response_status == 200, result
    assert json.loads(result.response_body)["status"] == "ignored"
    _, health = http("GET", stack.receiver_url.rsplit("/", 2)[0] + "/healthz")
    assert health["counts"] == {"accepted": 2, "ignored": 1}


def test_same_delivery_twice_is_dispatched_once(stack: Stack) -> None:
    """Version 2 with the webhook paused: we deliver its event ourselves, signed like MLflow.
    The same delivery twice -> 202 then 409; the same event under a new delivery id -> 202 (the
    receiver cannot know), deduplicated downstream. The single audit is checked after the
    sensor test (so that both audits run while the next tests proceed)."""
    stack.set_webhook(False)
    version = stack.register_version()
    assert version == "2"
    mv = stack.client.get_model_version(MODEL, version)
    data = {
        "name": MODEL,
        "version": version,
        "source": mv.source,
        "run_id": mv.run_id,
        "tags": {},
        "description": None,
    }
    body = webhook_body("model_version.created", data)
    headers = signed_headers(stack.secret, body)
    status, reply = post_webhook(stack.receiver_url, body, headers)
    assert status == 202 and reply["status"] == "accepted", reply
    status, reply = post_webhook(stack.receiver_url, body, headers)  # the same delivery again
    assert status == 409 and reply["status"] == "rejected"
    again = webhook_body("model_version.created", data)
    assert post_webhook(stack.receiver_url, again, signed_headers(stack.secret, again))[0] == 202
    # both accepted deliveries carry the same Prefect event id: one event is stored
    labels = {"mlflow.model_name": MODEL, "mlflow.model_version": version}
    wait_until(
        lambda: events(stack.prefect_api, "mlflow.model_version.created", labels),
        30,
        "the v2 event",
    )
    time.sleep(2)
    assert len(events(stack.prefect_api, "mlflow.model_version.created", labels)) == 1


def test_forged_unsigned_stale_and_oversized_deliveries_audit_nothing(stack: Stack) -> None:
    version = stack.register_version()  # webhook still paused: MLflow sends nothing
    assert version == "3"
    _, before = http("GET", stack.receiver_url.rsplit("/", 2)[0] + "/healthz")
    data = {"name": MODEL, "version": version, "source": "x", "run_id": "y", "tags": {}}
    body = webhook_body("model_version.created", data)
    forged = signed_headers("not-the-secret", body)
    assert post_webhook(stack.receiver_url, body, forged)[0] == 403
    tampered = signed_headers(stack.secret, body)
    tampered["X-MLflow-Signature"] = tampered["X-MLflow-Signature"][:-6] + "AAAAA="
    assert post_webhook(stack.receiver_url, body, tampered)[0] == 403
    assert post_webhook(stack.receiver_url, body, {})[0] == 401
    stale = signed_headers(stack.secret, body, timestamp=int(time.time()) - 3600)
    assert post_webhook(stack.receiver_url, body, stale)[0] == 401
    big = b'{"pad": "' + b"x" * 70_000 + b'"}'
    assert post_webhook(stack.receiver_url, big, signed_headers(stack.secret, big))[0] == 413

    _, after = http("GET", stack.receiver_url.rsplit("/", 2)[0] + "/healthz")
    assert after["counts"].get("accepted") == before["counts"].get("accepted")
    assert after["counts"]["rejected_403"] == before["counts"].get("rejected_403", 0) + 2
    time.sleep(3)
    labels = {"mlflow.model_name": MODEL, "mlflow.model_version": version}
    assert events(stack.prefect_api, "mlflow.model_version.created", labels) == []
    assert not [
        r
        for r in flow_runs(stack.prefect_api, stack.deployment)
        if r["parameters"].get("model_version") == version
    ]
    assert stack.audit_runs(version) == [] and stack.verdict_tag(version) is None


def _poll_sensor(stack: Stack) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "deployments.registry_sensor", "--model", MODEL],
        env=stack.env(),
        cwd=stack.tmp,
        capture_output=True,
        timeout=180,
        start_new_session=True,
    )
    assert out.returncode == 0, (out.stdout + out.stderr).decode(errors="replace")[-3000:]
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def test_polling_sensor_emits_the_same_events(stack: Stack) -> None:
    """The sensor reports everything since its first poll (versions 1-3, the alias); only
    version 3, which no webhook reported, is audited; versions 1 and 2 keep exactly one audit
    per event (this also completes the duplicate-delivery test for version 2)."""
    polled = _poll_sensor(stack)
    assert polled["initialised"] is False
    assert sorted(map(tuple, polled["emitted"])) == [
        (MODEL, "1", "mlflow.model_version.created"),
        (MODEL, "1", "mlflow.model_version_alias.created"),
        (MODEL, "2", "mlflow.model_version.created"),
        (MODEL, "3", "mlflow.model_version.created"),
    ]
    for version in ("2", "3"):
        wait_until(
            lambda v=version: stack.verdict_tag(v),
            AUDIT_TIMEOUT,
            f"the v{version} verdict",
            tuple(stack.procs),
        )
    stack.settle()
    assert stack.failed_runs() == []
    (run2,) = stack.audit_runs("2")
    assert run2.data.tags["fairness.trigger"] == "mlflow.model_version.created"
    assert run2.data.tags["fairness.trigger_source"] == "webhook"
    assert stack.verdict_tag("2")["fairness.audit_run_id"] == run2.info.run_id
    (run3,) = stack.audit_runs("3")
    assert run3.data.tags["fairness.trigger_source"] == "sensor"
    assert stack.verdict_tag("3")["fairness.audit_run_id"] == run3.info.run_id
    assert set(_one_run_per_trigger(stack.audit_runs("1"))) == {
        "mlflow.model_version.created",
        "mlflow.model_version_alias.created",
    }
    # one flow run per event: the sensor's events for 1 and 2 had the ids of the webhook's
    per_version: dict[str, int] = {}
    for r in flow_runs(stack.prefect_api, stack.deployment):
        if r["parameters"].get("model_name") == MODEL:
            per_version[r["parameters"]["model_version"]] = (
                per_version.get(r["parameters"]["model_version"], 0) + 1
            )
    assert per_version == {"1": 2, "2": 1, "3": 1}
    assert not [
        r
        for r in flow_runs(stack.prefect_api, stack.deployment)
        if r["parameters"].get("model_name") == "example_model"  # MLflow's test payload
    ]
    assert _poll_sensor(stack)["emitted"] == []


def _deployment_run(stack: Stack, parameters: dict[str, str]) -> str:
    status, run = http(
        "POST",
        f"{stack.prefect_api}/deployments/{stack.deployment}/create_flow_run",
        {"parameters": parameters, "idempotency_key": str(uuid.uuid4())},
    )
    assert status in (200, 201), run
    return run["id"]


def _finished(stack: Stack, run_id: str) -> dict[str, Any]:
    return wait_until(
        lambda: (lambda r: r if r["state_type"] in TERMINAL else None)(
            http("GET", f"{stack.prefect_api}/flow_runs/{run_id}")[1]
        ),
        AUDIT_TIMEOUT,
        f"flow run {run_id}",
        tuple(stack.procs),
        interval=1.0,
    )


def test_flow_skips_an_audit_that_ran_or_is_running(stack: Stack) -> None:
    """Beyond Prefect's event-id window, the flow itself refuses a second audit: found in MLflow
    (version 1, re-sent through a second receiver in ``--dispatch deployment`` mode, which
    starts the deployment with ``run_deployment``), or claimed by a running audit (a claim
    Variable planted for version 3 / ``manual``)."""
    from deployments.registry_audit import claim_name
    from deployments.registry_events import audit_key

    port = free_port()
    receiver2 = start(
        "receiver-deployment-mode",
        [
            sys.executable,
            "-m",
            "deployments.webhook_receiver",
            "--port",
            str(port),
            "--dispatch",
            "deployment",
        ],
        stack.env(),
        stack.tmp,
        stack.logs,
    )
    stack.procs.append(receiver2)
    url2 = f"http://127.0.0.1:{port}/mlflow/webhook"
    wait_until(lambda: healthy(url2.rsplit("/", 2)[0] + "/healthz"), 60, "receiver 2", (receiver2,))

    key = audit_key(MODEL, "3", "manual")
    planted = {"state": "running", "claimed_at": time.time(), "flow_run_id": "elsewhere"}
    status, _ = http(
        "POST", f"{stack.prefect_api}/variables/", {"name": claim_name(key), "value": planted}
    )
    assert status == 201
    claimed = _deployment_run(
        stack,
        {"model_name": MODEL, "model_version": "3", "reason": "manual"},
    )
    # the version-1 event again, twice under new delivery ids: one flow run (Prefect's
    # idempotency key = the audit key), which finds the audit in MLflow and skips
    data = {"name": MODEL, "version": "1", "source": "s", "run_id": "r", "tags": {}}
    refs = []
    for _ in range(2):
        body = webhook_body("model_version.created", data)
        status, reply = post_webhook(url2, body, signed_headers(stack.secret, body))
        assert status == 202, reply
        refs.append(reply["ref"])
    assert refs[0] == refs[1]
    again = refs[0]
    final = _finished(stack, again)
    assert final["state_type"] == "COMPLETED", final["state"]
    assert final["deployment_id"] == stack.deployment
    assert final["parameters"]["source"] == "webhook"
    assert _finished(stack, claimed)["state_type"] == "COMPLETED"
    assert len(_one_run_per_trigger(stack.audit_runs("1"))) == 2  # unchanged
    assert [r.data.tags["fairness.trigger"] for r in stack.audit_runs("3")] == [
        "mlflow.model_version.created"
    ]
    status, var = http("GET", f"{stack.prefect_api}/variables/name/{claim_name(key)}")
    assert status == 200 and var["value"] == planted  # the claim holder's, untouched


def test_prefect_yaml_deploys_the_same_deployments(stack: Stack) -> None:
    """``deployments/prefect.yaml`` (names suffixed so as not to replace the served ones) is
    accepted by ``prefect deploy``: the deployment, its cron with its own parameters, the
    process work pool, and the trigger's automation with the parameter templates left for the
    server to render."""
    import yaml

    from deployments.registry_events import AUDIT_FLOW_NAME, TRIGGER_PARAMETERS

    project = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    for dep in project["deployments"]:
        dep["name"] += "-yaml-check"
        dep["work_pool"]["name"] = "fe-test-pool"
    project["pull"][0]["prefect.deployments.steps.set_working_directory"]["directory"] = str(REPO)
    workdir = stack.tmp / "yaml-project"
    workdir.mkdir()
    (workdir / "deployments").symlink_to(REPO / "deployments")
    (workdir / "prefect.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
    prefect = str(Path(sys.executable).parent / "prefect")
    for args in (
        [prefect, "work-pool", "create", "fe-test-pool", "--type", "process"],
        [prefect, "--no-prompt", "deploy", "--all", "--prefect-file", "prefect.yaml"],
    ):
        out = subprocess.run(args, env=stack.env(), cwd=workdir, capture_output=True, timeout=180)
        assert out.returncode == 0, (out.stdout + out.stderr).decode(errors="replace")[-3000:]

    dep_id = deployment_id(stack.prefect_api, f"{AUDIT_FLOW_NAME}/registry-audit-yaml-check")
    assert dep_id
    _, dep = http("GET", f"{stack.prefect_api}/deployments/{dep_id}")
    assert dep["work_pool_name"] == "fe-test-pool"
    assert dep["entrypoint"] == "deployments/registry_audit.py:registry_audit_flow"
    (schedule,) = dep["schedules"]
    assert schedule["schedule"]["cron"] == "0 3 * * 1"
    assert schedule["parameters"]["reason"] == "schedule"
    _, autos = http("POST", f"{stack.prefect_api}/automations/filter", {})
    (auto,) = [a for a in autos if a["actions"][0].get("deployment_id") == dep_id]
    assert set(auto["trigger"]["expect"]) == {
        "mlflow.model_version.created",
        "mlflow.model_version_alias.created",
    }
    assert auto["actions"][0]["parameters"] == TRIGGER_PARAMETERS
    sensor = deployment_id(
        stack.prefect_api, "fairengine-registry-sensor/registry-sensor-yaml-check"
    )
    assert sensor
    _, sdep = http("GET", f"{stack.prefect_api}/deployments/{sensor}")
    assert sdep["schedules"][0]["active"] is False
