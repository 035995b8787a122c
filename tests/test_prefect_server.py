"""Which Prefect API an audit reports to, and ``fairengine server`` (``flows/prefect_server.py``).

The choice is checked against small stand-ins (a loopback HTTP server that answers the health
check, records of processes that ended or do not answer). The ``flow`` tests use the real
components, really started on 127.0.0.1 in temporary folders with telemetry off: ``fairengine
server start`` runs ``prefect server start``, an audit reports its flow run to it (read back
through the server's REST API), ``fairengine server stop`` ends it; and with no server running
an audit falls back to Prefect's embedded server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from deployments_support import clean_env, http

from flows.prefect_server import (
    PrefectApi,
    ServerRecord,
    choose_prefect_api,
    process_alive,
    read_record,
    record_path,
    server_command,
    stop_server,
)

REPO = Path(__file__).resolve().parents[1]


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        ok = self.path == "/api/health"
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(b"true" if ok else b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[str]:
    """A loopback server answering ``GET /api/health`` like Prefect's; yields its API URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api"
    finally:
        server.shutdown()
        server.server_close()


def _record(api_url: str, pid: int, home: Path) -> ServerRecord:
    record = ServerRecord(
        api_url=api_url,
        pid=pid,
        port=int(api_url.rsplit(":", 1)[1].split("/")[0]),
        log=str(home / "prefect-server.log"),
        ui=False,
        prefect_home=None,
        started_at="2026-01-01T00:00:00+00:00",
    )
    home.mkdir(parents=True, exist_ok=True)
    record_path(home).write_text(json.dumps(record.to_dict()))
    return record


def _ended_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def no_api_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """No PREFECT_API_URL, and Prefect's settings not yet read (as in a fresh CLI process);
    whatever the test sets in PREFECT_API_URL is removed afterwards."""
    monkeypatch.setenv("PREFECT_API_URL", "set-by-the-test")  # records the state to restore
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.delitem(sys.modules, "prefect.context", raising=False)


def test_environment_url_wins_over_a_recorded_server(
    tmp_path: Path, health_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record(health_server, os.getpid(), tmp_path)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert choose_prefect_api(tmp_path) == PrefectApi("environment", "http://127.0.0.1:9/api")
    assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:9/api"


def test_a_recorded_server_that_answers_is_used(
    tmp_path: Path, health_server: str, no_api_url: None
) -> None:
    _record(health_server, os.getpid(), tmp_path)
    assert choose_prefect_api(tmp_path) == PrefectApi("server", health_server)
    assert os.environ["PREFECT_API_URL"] == health_server


def test_no_record_leaves_the_choice_to_prefect(tmp_path: Path, no_api_url: None) -> None:
    assert choose_prefect_api(tmp_path) == PrefectApi("default")
    assert "PREFECT_API_URL" not in os.environ


def test_a_record_of_an_ended_server_is_removed(tmp_path: Path, no_api_url: None) -> None:
    from flows.prefect_server import free_port

    _record(f"http://127.0.0.1:{free_port()}/api", _ended_pid(), tmp_path)
    api = choose_prefect_api(tmp_path)
    assert api.mode == "default" and "no longer running" in (api.note or "")
    assert read_record(tmp_path) is None
    assert "PREFECT_API_URL" not in os.environ


def test_a_live_server_that_does_not_answer_is_kept_but_not_used(
    tmp_path: Path, no_api_url: None
) -> None:
    from flows.prefect_server import free_port

    record = _record(f"http://127.0.0.1:{free_port()}/api", os.getpid(), tmp_path)
    api = choose_prefect_api(tmp_path)
    assert api.mode == "default" and "does not answer" in (api.note or "")
    assert read_record(tmp_path) == record
    assert "PREFECT_API_URL" not in os.environ
    # `stop` leaves a process that is not a Prefect server alone (this one is pytest)
    assert stop_server(home=tmp_path) == record
    assert process_alive(os.getpid()) and read_record(tmp_path) is None


def test_the_server_is_prefects_own_command_on_loopback() -> None:
    cmd = server_command(4321, ui=False)
    assert cmd[:5] == [sys.executable, "-m", "prefect", "server", "start"]
    assert cmd[5:] == ["--host", "127.0.0.1", "--port", "4321", "--no-ui"]


def test_server_command_help_lists_its_actions_and_options() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "flows.cli", "server", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr
    for word in ("start", "stop", "status", "--port", "--no-ui", "--timeout", "127.0.0.1"):
        assert word in r.stdout


# --------------------------------------------------------------------------- real servers
def _cli(*args: str, env: dict[str, str], cwd: Path, timeout: int = 300):
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def _audit_config(tmp: Path, name: str) -> Path:
    rng = np.random.default_rng(11)
    n = 2000
    frame = pd.DataFrame({"sex": rng.choice(["f", "m"], n), "race": rng.choice(["a", "b"], n)})
    frame["y"] = rng.binomial(1, 0.4, n)
    frame["score"] = np.clip(rng.normal(0.3 + 0.3 * frame["y"], 0.2), 0, 1)
    frame.to_csv(tmp / "scored.csv", index=False)
    config = {
        "name": name,
        "data": {"path": "scored.csv"},
        "columns": {"label": "y", "protected": ["sex", "race"], "score": "score"},
        "methods": {"permutation_tests": {"n_permutations": 199}},
        "output": {"dir": str(tmp / "reports")},
        "mlflow": {"enabled": False},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _flow_runs(api: str, name: str) -> list[dict]:
    status, runs = http(
        "POST", f"{api}/flow_runs/filter", {"flows": {"name": {"any_": ["fairness-audit"]}}}
    )
    assert status == 200, runs
    return [r for r in runs if (r["parameters"].get("config") or {}).get("name") == name]


@pytest.mark.flow
def test_fairengine_server_serves_later_audits_until_stopped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(
        FAIRENGINE_HOME=str(home),
        PREFECT_HOME=str(tmp_path / "server-prefect"),
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    try:
        started = _cli("server", "start", "--port", "0", "--no-ui", env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stdout + started.stderr
        record = read_record(home)
        assert record is not None and record.api_url.startswith("http://127.0.0.1:")
        assert record.api_url in started.stdout and process_alive(record.pid)
        again = _cli("server", "start", "--port", "0", env=env, cwd=tmp_path)
        assert again.returncode == 0 and "already running" in again.stdout
        assert read_record(home) == record
        status = _cli("server", "status", env=env, cwd=tmp_path)
        assert status.returncode == 0 and record.api_url in status.stdout

        # the audit process has its own Prefect home: an embedded server would use it
        audit_env = {**env, "PREFECT_HOME": str(tmp_path / "audit-prefect")}
        config = _audit_config(tmp_path, "served-audit")
        audit = _cli("audit", "--config", str(config), env=audit_env, cwd=tmp_path)
        assert audit.returncode == 0, audit.stderr[-4000:]
        assert f"on the Prefect server at {record.api_url} (fairengine server)" in audit.stderr
        assert not (tmp_path / "audit-prefect" / "prefect.db").exists()
        (run,) = _flow_runs(record.api_url, "served-audit")
        assert run["state_type"] == "COMPLETED"
        status, tasks = http(
            "POST",
            f"{record.api_url}/task_runs/filter",
            {"flow_runs": {"id": {"any_": [run["id"]]}}},
        )
        assert status == 200 and {"load-data", "assemble-audit"} <= {
            t["name"].rsplit("-", 1)[0] for t in tasks
        }

        stopped = _cli("server", "stop", env=env, cwd=tmp_path)
        assert stopped.returncode == 0 and "Stopped" in stopped.stdout
        assert not process_alive(record.pid) and read_record(home) is None
        assert _cli("server", "status", env=env, cwd=tmp_path).returncode == 1
    finally:
        stop_server(home=home)


@pytest.mark.flow
def test_audit_falls_back_to_the_embedded_server_when_none_runs(tmp_path: Path) -> None:
    from flows.prefect_server import free_port

    home = tmp_path / "home"
    _record(f"http://127.0.0.1:{free_port()}/api", _ended_pid(), home)  # a server that ended
    env = clean_env(
        FAIRENGINE_HOME=str(home),
        PREFECT_HOME=str(tmp_path / "audit-prefect"),
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    config = _audit_config(tmp_path, "embedded-audit")
    audit = _cli("audit", "--config", str(config), env=env, cwd=tmp_path)
    assert audit.returncode == 0, audit.stderr[-4000:]
    assert "is no longer running (record removed)" in audit.stderr
    assert "Prefect embedded mode" in audit.stderr
    assert read_record(home) is None
    # the embedded server kept the run in this process's own Prefect home
    assert (tmp_path / "audit-prefect" / "prefect.db").is_file()
    assert "Verdict:" in audit.stdout
