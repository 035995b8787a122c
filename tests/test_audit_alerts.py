"""Alerts: an audit's outcome as Prefect events, and an automation that posts them to a webhook.

Unit part: the events' resource, payload and names built from a real audit result. Flow part,
with the real components on 127.0.0.1 in temporary folders (telemetry off): ``prefect server
start`` (through ``fairengine server start``), an HTTP sink (a ``http.server`` thread that
records the POSTs it receives), a Webhook block and an automation created against the server
with Prefect's Python API (:func:`tasks.audit_events.create_alert_automation`, run in a
subprocess that points ``PREFECT_API_URL`` at the server), then ``fairengine audit`` with
MLflow on SQLite: a failing audit posts a Slack-compatible ``{"text": ...}`` within a bounded
time, and a passing audit posts nothing while its ``fairengine.audit.completed`` event does
reach the server (read back through the events API).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from deployments_support import clean_env, http

from fairengine.audit_context import DatasetSummary, ModelIdentity
from fairengine.results import AuditResult, DecisionRecord, Verdict
from flows.prefect_server import read_record, stop_server
from tasks.audit_events import (
    AUDIT_COMPLETED,
    AUDIT_FAILED,
    audit_event_names,
    audit_payload,
    audit_related,
    audit_resource,
)
from tasks.comparison_log import COMPARISON_WORSE

REPO = Path(__file__).resolve().parents[1]
DELIVERY_TIMEOUT_S = 60.0
"""How long the failing audit's message may take to reach the sink once the audit has ended."""


# --------------------------------------------------------------------------- unit
def _result(status: str = "fail", model: dict[str, Any] | None = None) -> AuditResult:
    return AuditResult(
        audit_id="abc123def456",
        created_at="2026-01-01T00:00:00+00:00",
        alpha=0.05,
        multiplicity="holm",
        config={},
        dataset=DatasetSummary(name="loans", n_rows=100, fingerprint="f" * 64),
        model=ModelIdentity.from_dict(
            model if model is not None else {"name": "credit", "version": "7", "uri": "m"}
        ),
        validation=None,
        methods=[],
        verdict=Verdict(status=status, summary='1 test "rejected"', reasons=["a", "b"]),  # type: ignore[arg-type]
        decisions=DecisionRecord(n_tests=5, n_rejected=1, n_not_rejected=3, n_undetermined=1),
    )


def test_the_resource_is_the_model_version_else_the_data() -> None:
    resource = audit_resource(_result())
    assert resource["prefect.resource.id"] == "mlflow.model-version.credit.7"
    assert resource["prefect.resource.name"] == "credit version 7"
    assert resource["fairengine.verdict"] == "fail"
    no_model = audit_resource(_result(model={}))
    assert no_model["prefect.resource.id"] == "fairengine.audit-data." + "f" * 16
    assert no_model["prefect.resource.name"] == "loans"
    assert all(isinstance(v, str) for v in resource.values())


def test_the_payload_carries_verdict_counts_run_and_report() -> None:
    info = {"run_id": "r1", "experiment_id": "1", "artifact_uri": "file:///a", "tracking_uri": "t"}
    payload = audit_payload(_result(), info, {"report": "/tmp/x/report.html"})
    assert payload["verdict"]["status"] == "fail" and payload["verdict"]["reasons_total"] == 2
    assert payload["counts"] == {
        "tests": 5,
        "rejected": 1,
        "not_rejected": 3,
        "undetermined": 1,
        "supporting": 0,
    }
    assert payload["mlflow"]["run_id"] == "r1"
    assert payload["report_uri"] == "file:///a/audit/report.html"
    assert payload["model"] == {"name": "credit", "version": "7", "uri": "m"}
    json.dumps(payload)  # JSON as it is
    local = audit_payload(_result(), None, {"report": "/tmp/x/report.html"})
    assert local["mlflow"] is None and local["report_uri"] == "file:///tmp/x/report.html"
    assert audit_related(info) == [
        {"prefect.resource.id": "mlflow.run.r1", "prefect.resource.role": "mlflow-run"}
    ]
    assert audit_related(None) == []


def test_a_fail_emits_failed_and_completed_a_pass_only_completed() -> None:
    assert audit_event_names(_result("fail")) == [AUDIT_COMPLETED, AUDIT_FAILED]
    assert audit_event_names(_result("pass")) == [AUDIT_COMPLETED]
    assert audit_event_names(_result("incomplete")) == [AUDIT_COMPLETED]


# --------------------------------------------------------------------------- real chain
class _Sink(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append(
            {"path": self.path, "headers": dict(self.headers), "body": body.decode()}
        )
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def sink() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An HTTP server on 127.0.0.1 that records every POST; yields its URL and the records."""
    received: list[dict[str, Any]] = []
    handler = type("Sink", (_Sink,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/fairness", received
    finally:
        server.shutdown()
        server.server_close()


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: int = 300):
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )


def _config(tmp: Path, name: str, gap: float) -> Path:
    """A scored data set whose positive rate differs by ``gap`` between the two sexes."""
    rng = np.random.default_rng(5)
    n = 3000
    sex = rng.choice(["f", "m"], n)
    y = rng.binomial(1, 0.4, n)
    score = np.clip(rng.normal(0.3 + 0.3 * y + np.where(sex == "f", -gap, 0.0), 0.15), 0, 1)
    pd.DataFrame({"sex": sex, "y": y, "score": score}).to_csv(tmp / f"{name}.csv", index=False)
    config = {
        "name": name,
        "data": {"path": f"{name}.csv"},
        "columns": {"label": "y", "protected": ["sex"], "score": "score"},
        "methods": {
            "permutation_tests": {"n_permutations": 199},
            "fliptest": {"enabled": False},
            "individual_fairness": {"enabled": False},
            "intersectional": {"enabled": False},
            "mitigation": {"enabled": False},
        },
        "output": {"dir": str(tmp / "reports")},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp / 'mlflow.db'}", "experiment": "alerts"},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


COMPARE_WORSE = """
import sys
import numpy as np, pandas as pd
import fairengine
rng = np.random.default_rng(3)
n = 4000
df = pd.DataFrame({"sex": rng.choice(["f", "m"], n), "x": rng.normal(size=n)})
df["y"] = rng.binomial(1, 0.4, n)
f = (df["sex"] == "f").to_numpy()
fair = lambda X: 1 / (1 + np.exp(-X["x"].to_numpy()))
unfair = lambda X: 1 / (1 + np.exp(-(X["x"].to_numpy() - 1.5 * f[X.index])))
c = fairengine.compare(df, baseline=fair, candidate=unfair, label="y", protected="sex",
                       features=["x"], output={"dir": sys.argv[1] + "/cmp"})
print(c.verdict.status)
"""
"""A comparison run from Python whose candidate lowers women's scores: verdict ``worse``."""


def _events(api: str, name: str) -> list[dict[str, Any]]:
    status, page = http(
        "POST",
        f"{api}/events/filter",
        {"filter": {"event": {"name": [name]}, "occurred": {"since": "2000-01-01T00:00:00Z"}}},
    )
    assert status == 200, page
    return list(page["events"])


def _wait(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return bool(predicate())


@pytest.mark.flow
def test_a_failing_audit_and_a_worse_comparison_post_to_the_webhook_a_pass_does_not(
    tmp_path: Path, sink: tuple[str, list[dict[str, Any]]]
) -> None:
    url, received = sink
    home = tmp_path / "home"
    env = clean_env(
        FAIRENGINE_HOME=str(home),
        PREFECT_HOME=str(tmp_path / "server-prefect"),
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    try:
        started = _run(
            ["-m", "flows.cli", "server", "start", "--port", "0", "--no-ui"], env, tmp_path
        )
        assert started.returncode == 0, started.stdout + started.stderr
        record = read_record(home)
        assert record is not None
        api = record.api_url
        client_env = {**env, "PREFECT_API_URL": api}
        created = _run(
            [
                "-c",
                "import sys; from tasks.audit_events import create_alert_automation as c; "
                "print(c(sys.argv[1]))",
                url,
            ],
            client_env,
            REPO,
        )
        assert created.returncode == 0, created.stderr[-4000:]
        status, automation = http("GET", f"{api}/automations/{created.stdout.strip()}")
        assert status == 200 and automation["enabled"], automation
        assert automation["actions"][0]["type"] == "call-webhook"

        # a passing audit: its `completed` event reaches the server, nothing is posted
        passing = _run(
            ["-m", "flows.cli", "audit", "--config", str(_config(tmp_path, "fair", 0.0))],
            client_env,
            tmp_path,
        )
        assert passing.returncode == 0, passing.stderr[-4000:]
        assert "Verdict: PASS" in passing.stdout, passing.stdout
        assert _wait(lambda: len(_events(api, AUDIT_COMPLETED)) == 1, 30)
        (done,) = _events(api, AUDIT_COMPLETED)
        assert done["payload"]["verdict"]["status"] == "pass"
        assert done["payload"]["mlflow"]["run_id"]
        assert done["resource"]["prefect.resource.id"].startswith("fairengine.audit-data.")

        # a failing audit: `failed` reaches the server and the automation posts the message
        start = time.monotonic()
        failing = _run(
            ["-m", "flows.cli", "audit", "--config", str(_config(tmp_path, "unfair", 0.15))],
            client_env,
            tmp_path,
        )
        assert failing.returncode == 0, failing.stderr[-4000:]
        assert "Verdict: FAIL" in failing.stdout, failing.stdout
        ended = time.monotonic()
        assert _wait(lambda: len(received) >= 1, DELIVERY_TIMEOUT_S), (
            f"no POST within {DELIVERY_TIMEOUT_S:.0f} s; events: {_events(api, AUDIT_FAILED)}"
        )
        delivered = time.monotonic()
        # the server acts on an event before it has stored it: wait until it can be read back
        assert _wait(lambda: len(_events(api, AUDIT_FAILED)) == 1, 30)
        (failed,) = _events(api, AUDIT_FAILED)
        run_id = failed["payload"]["mlflow"]["run_id"]
        (post,) = received
        assert post["path"] == "/hooks/fairness"
        assert post["headers"].get("Content-Type") == "application/json"
        message = json.loads(post["body"])
        assert set(message) == {"text"}
        text = message["text"]
        assert text.startswith("FairEngine audit FAIL: unfair - ")
        assert failed["payload"]["verdict"]["summary"] in text
        assert run_id in text and "audit/report.html" in text
        assert f"rejected {failed['payload']['counts']['rejected']}" in text
        time.sleep(3)  # nothing else arrives: the pass posted nothing, the fail posted once
        assert len(received) == 1

        # a comparison whose candidate is worse than its baseline: the same automation posts
        compared = _run(["-c", COMPARE_WORSE, str(tmp_path)], client_env, REPO)
        assert compared.returncode == 0, compared.stderr[-4000:]
        assert compared.stdout.strip() == "worse", compared.stdout
        assert _wait(lambda: len(received) >= 2, DELIVERY_TIMEOUT_S), "no POST for the comparison"
        assert _wait(lambda: len(_events(api, COMPARISON_WORSE)) == 1, 30)
        worse_text = json.loads(received[1]["body"])["text"]
        assert worse_text.startswith("FairEngine audit WORSE: ")
        assert "more unequal than the baseline" in worse_text and "comparison.html" in worse_text
        print(text)
        print(json.dumps(failed["payload"]))
        print(f"audit run {ended - start:.1f} s, message {delivered - ended:.1f} s after it ended")
    finally:
        stop_server(home=home)
