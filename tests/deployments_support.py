"""Helpers for the deployment tests: real servers as subprocesses on 127.0.0.1, signed webhook
requests, and REST reads of the Prefect API (no in-process Prefect client, so the test session's
own isolated settings from conftest stay untouched).

Every process is started in its own session (process group) with the offline environment, its
output goes to a log file under the test's tmp dir, and :meth:`Managed.stop` terminates the
whole tree (the group plus any descendant that left it), then checks that nothing survived.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("deployments") is None:
    # `deployments` is not (yet) in the installed package list (pyproject packages.find):
    # make the repository importable so the tests find it like the CLI does from the repo root.
    sys.path.insert(0, str(REPO))

from deployments.webhook_receiver import (  # noqa: E402
    DELIVERY_ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
)

BIN = Path(sys.executable).parent

OFFLINE_ENV = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "GX_ANALYTICS_ENABLED": "false",
    "MPLBACKEND": "Agg",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}
_DROP = ("PREFECT_API_URL", "PREFECT_API_KEY", "MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The parent environment without Prefect/MLflow targets, plus the offline switches."""
    env = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith("PYTEST_")}
    env.update(OFFLINE_ENV)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def descendants(pid: int) -> set[int]:
    tree = _children()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class Managed:
    """A subprocess in its own process group, logging to ``log``."""

    name: str
    proc: subprocess.Popen
    log: Path
    seen: set[int] = field(default_factory=set)

    def tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def remember_tree(self) -> None:
        if self.proc.poll() is None:
            self.seen |= descendants(self.proc.pid)

    def stop(self, grace: float = 6.0) -> list[int]:
        """SIGTERM the group and every descendant, SIGKILL what remains; returns survivors."""
        self.remember_tree()
        targets = {self.proc.pid, *self.seen}
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            for pid in targets:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                self.proc.poll()
                if not any(alive(p) for p in targets):
                    break
                time.sleep(0.2)
            else:
                continue
            break
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return [p for p in targets if alive(p)]


def stop_all(procs: list[Managed]) -> dict[str, list[int]]:
    """Stop several processes in parallel; returns ``{name: surviving pids}`` (empty: clean)."""
    from concurrent.futures import ThreadPoolExecutor

    if not procs:
        return {}
    with ThreadPoolExecutor(len(procs)) as pool:
        left = list(pool.map(lambda p: p.stop(), procs))
    return {p.name: pids for p, pids in zip(procs, left, strict=True) if pids}


def start(name: str, args: list[str], env: dict[str, str], cwd: Path, logs: Path) -> Managed:
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    fh = log.open("ab")
    proc = subprocess.Popen(
        args,
        env=env,
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=fh,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    fh.close()
    return Managed(name, proc, log)


def http(
    method: str,
    url: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
    timeout: float = 30.0,
    unavailable_retries: int = 6,
) -> tuple[int, Any]:
    """One HTTP request; returns ``(status, parsed JSON or text)`` for any status.

    A ``503 Service Unavailable`` (a Prefect server on SQLite answers it when the database is
    busy on a loaded machine) is retried up to ``unavailable_retries`` times with a growing
    pause; the request is identical each time (idempotency keys included).
    """
    if body is not None:
        data = json.dumps(body).encode()
    for attempt in range(unavailable_retries + 1):
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        if status != 503 or attempt == unavailable_retries:
            break
        time.sleep(1.0 + attempt)
    try:
        return status, json.loads(raw.decode() or "null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return status, raw.decode(errors="replace")


def wait_until(
    check: Callable[[], Any],
    timeout: float,
    what: str,
    procs: tuple[Managed, ...] = (),
    interval: float = 0.5,
) -> Any:
    """Poll ``check`` until it returns something truthy; fail with the logs of ``procs``."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while time.monotonic() < deadline:
        for p in procs:
            if p.proc.poll() is not None:
                raise AssertionError(
                    f"{p.name} exited ({p.proc.returncode}) while waiting for {what}:\n{p.tail()}"
                )
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # not up yet
            last_exc = exc
        time.sleep(interval)
    logs = "\n".join(f"--- {p.name}\n{p.tail()}" for p in procs)
    raise AssertionError(
        f"timed out after {timeout:.0f}s waiting for {what} ({last_exc!r})\n{logs}"
    )


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except Exception:
        return False


# ------------------------------------------------------------------ servers
def start_prefect_server(tmp: Path, logs: Path) -> tuple[Managed, str]:
    port = free_port()
    env = clean_env(
        PREFECT_HOME=str(tmp / "prefect-server"),
        PREFECT_UI_ENABLED="false",
        PREFECT_SERVER_LOGGING_LEVEL="WARNING",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    proc = start(
        "prefect-server",
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env,
        tmp,
        logs,
    )
    return proc, f"http://127.0.0.1:{port}/api"


def start_mlflow_server(tmp: Path, logs: Path) -> tuple[Managed, str]:
    port = free_port()
    (tmp / "mlflow-artifacts").mkdir(parents=True, exist_ok=True)
    env = clean_env(
        MLFLOW_WEBHOOK_ALLOWED_SCHEMES="http,https",
        MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS="true",
        MLFLOW_WEBHOOK_CACHE_TTL="1",
    )
    proc = start(
        "mlflow-server",
        [
            str(BIN / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{tmp / 'mlflow-server.db'}",
            "--artifacts-destination",
            str(tmp / "mlflow-artifacts"),
            "--workers",
            "1",
        ],
        env,
        tmp,
        logs,
    )
    return proc, f"http://127.0.0.1:{port}"


# ------------------------------------------------------------------ webhooks
def webhook_body(kind: str, data: dict[str, Any]) -> bytes:
    entity, action = kind.split(".")
    from datetime import UTC, datetime

    return json.dumps(
        {
            "entity": entity,
            "action": action,
            "timestamp": datetime.now(UTC).isoformat(),
            "data": data,
        }
    ).encode()


def signed_headers(
    secret: str,
    body: bytes,
    *,
    delivery_id: str | None = None,
    timestamp: int | None = None,
) -> dict[str, str]:
    delivery_id = delivery_id or str(uuid.uuid4())
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {
        DELIVERY_ID_HEADER: delivery_id,
        TIMESTAMP_HEADER: ts,
        SIGNATURE_HEADER: sign(secret, delivery_id, ts, body),
    }


def post_webhook(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    return http("POST", url, data=body, headers=headers)


# ------------------------------------------------------------------ Prefect REST reads
def deployment_id(api: str, name: str) -> str | None:
    status, body = http("GET", f"{api}/deployments/name/{name}")
    return body["id"] if status == 200 else None


def flow_runs(api: str, deployment: str) -> list[dict[str, Any]]:
    status, body = http(
        "POST",
        f"{api}/flow_runs/filter",
        {"deployments": {"id": {"any_": [deployment]}}, "limit": 200},
    )
    assert status == 200, body
    return body


TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def unfinished_triggered_runs(api: str, deployment: str) -> list[dict[str, Any]]:
    """Runs created by triggers/API (not by the schedule) that have not finished."""
    return [
        r
        for r in flow_runs(api, deployment)
        if not r.get("auto_scheduled") and r["state_type"] not in TERMINAL
    ]


def events(api: str, name: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    status, body = http(
        "POST",
        f"{api}/events/filter",
        {"filter": {"event": {"name": [name]}, "resource": {"labels": labels}}, "limit": 50},
    )
    assert status == 200, body
    return body["events"]
