"""The Prefect API an audit reports to, and ``fairengine server``: one Prefect server kept running.

Without a Prefect server, every ``fairengine audit`` process starts Prefect's embedded
(ephemeral) API server and stops it when it exits, which costs several seconds per audit
(``benchmarks/results/startup.md``). ``fairengine server start`` runs Prefect's own
``prefect server start --host 127.0.0.1 --port <port>`` as a detached process (its own session,
output appended to ``$FAIRENGINE_HOME/prefect-server.log``), waits until ``/api/health``
answers, and records the URL and process id in ``$FAIRENGINE_HOME/prefect-server.json``. Later
audits with the same ``FAIRENGINE_HOME`` report to that server instead of starting their own,
and its UI (``http://127.0.0.1:<port>``) shows every audit's flow run, task runs and logs.

Which API an audit uses (:func:`choose_prefect_api`, called before Prefect is imported, because
Prefect reads its settings once, at import):

1. ``PREFECT_API_URL`` in the environment: Prefect's own setting, used as it is;
2. else the server recorded by ``fairengine server start``, when its health check answers:
   ``PREFECT_API_URL`` is set to it for this process and its children (Dask workers);
3. else Prefect's default: the API URL of the active Prefect profile, or the embedded server.

A record whose process has gone is removed; one whose process lives but does not answer is
kept (``fairengine server stop`` ends it) and the audit falls back to step 3.

``prefect server start --background`` is not used: it returns before the server answers, records
only a process id (no URL), and leaves the server's output on pipes that no process reads.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fairengine.errors import FairEngineError
from flows.prefect_database import seed_database
from tasks.settings import OFFLINE_DEFAULTS, fairengine_home

HOST = "127.0.0.1"
DEFAULT_PORT = 4200
RECORD_FILE = "prefect-server.json"
LOG_FILE = "prefect-server.log"
HEALTH_TIMEOUT_S = 2.0
"""How long an audit waits for a recorded server's health check before using Prefect's default."""


class PrefectServerError(FairEngineError):
    """``fairengine server`` could not start or stop the server (the message says why)."""


@dataclass(frozen=True)
class ServerRecord:
    """A server started by ``fairengine server start``: where it answers and which process it is."""

    api_url: str
    pid: int
    port: int
    log: str
    ui: bool
    prefect_home: str | None
    started_at: str

    @property
    def ui_url(self) -> str | None:
        return self.api_url.removesuffix("/api") if self.ui else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerRecord:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class PrefectApi:
    """The API an audit reports to: ``mode`` is ``environment`` (``PREFECT_API_URL`` was set),
    ``server`` (a running ``fairengine server``) or ``default`` (Prefect's choice: the active
    profile's API URL, else the embedded server); ``note`` explains a fallback."""

    mode: str
    url: str | None = None
    note: str | None = None


def record_path(home: Path | None = None) -> Path:
    """``$FAIRENGINE_HOME/prefect-server.json``."""
    return (home or fairengine_home()) / RECORD_FILE


def read_record(home: Path | None = None) -> ServerRecord | None:
    """The recorded server, or ``None`` (no record, or one that cannot be read)."""
    try:
        return ServerRecord.from_dict(json.loads(record_path(home).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def api_healthy(api_url: str, timeout: float = HEALTH_TIMEOUT_S) -> bool:
    """Whether ``<api_url>/health`` answers 200 within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _is_our_server(pid: int) -> bool:
    """Whether ``pid`` still runs ``prefect server start`` (a recycled pid is left alone)."""
    import psutil

    try:
        cmdline = psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
    return any(
        Path(arg).name == "prefect" and cmdline[i + 1 : i + 3] == ["server", "start"]
        for i, arg in enumerate(cmdline)
    )


def choose_prefect_api(home: Path | None = None) -> PrefectApi:
    """Decide which Prefect API this process reports to (module docstring) and set
    ``PREFECT_API_URL`` when that is a running ``fairengine server``.

    Call it before Prefect is imported: Prefect reads ``PREFECT_API_URL`` once, at import.
    """
    env_url = os.environ.get("PREFECT_API_URL")
    if env_url:
        return PrefectApi("environment", env_url)
    record = read_record(home)
    if record is None:
        return PrefectApi("default")
    if api_healthy(record.api_url):
        if "prefect.context" in sys.modules:  # settings already read: too late to switch
            return PrefectApi(
                "default", note="Prefect was imported before the server could be chosen"
            )
        os.environ["PREFECT_API_URL"] = record.api_url
        return PrefectApi("server", record.api_url)
    if not process_alive(record.pid):
        record_path(home).unlink(missing_ok=True)
        why = "is no longer running (record removed)"
    else:
        why = "does not answer (`fairengine server stop` ends it)"
    return PrefectApi(
        "default", note=f"the fairengine server at {record.api_url} (pid {record.pid}) {why}"
    )


# --------------------------------------------------------------------------- fairengine server
def server_command(port: int, host: str = HOST, ui: bool = True) -> list[str]:
    """Prefect's ``prefect server start`` for ``host:port``, with this interpreter."""
    cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)]
    return cmd + ([] if ui else ["--no-ui"])


def free_port(host: str = HOST) -> int:
    """A port on ``host`` that nothing listens on now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_free(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _write_record(record: ServerRecord, home: Path | None) -> None:
    path = record_path(home)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record.to_dict(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def server_status(home: Path | None = None) -> tuple[ServerRecord | None, bool]:
    """The recorded server (or ``None``) and whether it answers its health check."""
    record = read_record(home)
    return record, record is not None and api_healthy(record.api_url)


def start_server(
    port: int = DEFAULT_PORT,
    *,
    ui: bool = True,
    timeout: float = 120.0,
    home: Path | None = None,
) -> tuple[ServerRecord, bool]:
    """Start ``prefect server start`` on 127.0.0.1 (``port`` 0: a free one), wait until it
    answers and record it; returns the record and whether it was already running.

    The server inherits the environment (``PREFECT_HOME``: where its SQLite database lives;
    the offline defaults are applied) and keeps running after this process exits.
    """
    home = home or fairengine_home()
    record, healthy = server_status(home)
    if record is not None:
        if healthy:
            return record, True
        if process_alive(record.pid):
            raise PrefectServerError(
                f"a fairengine server (pid {record.pid}) is recorded at {record.api_url} but "
                f"does not answer; stop it with `fairengine server stop` (log: {record.log})"
            )
        record_path(home).unlink(missing_ok=True)
    if port == 0:
        port = free_port()
    elif not _port_free(port):
        raise PrefectServerError(
            f"port {port} on {HOST} is in use; choose another with --port (0 picks a free one)"
        )
    home.mkdir(parents=True, exist_ok=True)
    log = home / LOG_FILE
    # a fresh SQLite database: the shipped schema instead of Prefect's 114 migrations
    seed_database(fresh_settings=True)
    env = {**OFFLINE_DEFAULTS, **os.environ}
    env.pop("PREFECT_API_URL", None)  # the server serves the API; it reports to none
    started = time.monotonic()
    with open(log, "ab") as out:
        out.write(f"--- fairengine server start {datetime.now(UTC).isoformat()}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            server_command(port, ui=ui),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=home,
            start_new_session=True,  # its own process group, detached from this terminal
        )
    api_url = f"http://{HOST}:{port}/api"
    while not api_healthy(api_url, timeout=1.0):
        if proc.poll() is not None:
            raise PrefectServerError(
                f"prefect server start exited with code {proc.returncode} before it answered; "
                f"the end of its log ({log}):\n{_log_tail(log)}"
            )
        if time.monotonic() - started > timeout:
            _end_group(proc.pid, grace=5.0)
            raise PrefectServerError(
                f"the Prefect server did not answer at {api_url} within {timeout:.0f} s (stopped "
                f"it); the end of its log ({log}):\n{_log_tail(log)}"
            )
        time.sleep(0.2)
    record = ServerRecord(
        api_url=api_url,
        pid=proc.pid,
        port=port,
        log=str(log),
        ui=ui,
        prefect_home=os.environ.get("PREFECT_HOME"),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _write_record(record, home)
    return record, False


def _end_group(pid: int, grace: float) -> None:
    """SIGTERM the process group led by ``pid`` (the server and anything it started), then
    SIGKILL whatever is left after ``grace`` seconds."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    target = pgid if pgid == pid else None  # a session leader started by start_server

    def send(sig: int) -> None:
        try:
            if target is not None:
                os.killpg(target, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and process_alive(pid):
        time.sleep(0.1)
    if process_alive(pid):
        send(signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and process_alive(pid):
            time.sleep(0.1)


def stop_server(timeout: float = 15.0, home: Path | None = None) -> ServerRecord | None:
    """Stop the recorded server (SIGTERM, SIGKILL after ``timeout`` s) and remove the record;
    returns the record, or ``None`` when no server was recorded."""
    record = read_record(home)
    if record is None:
        return None
    if process_alive(record.pid) and _is_our_server(record.pid):
        _end_group(record.pid, grace=timeout)
        if process_alive(record.pid):
            raise PrefectServerError(f"the Prefect server (pid {record.pid}) did not stop")
    record_path(home).unlink(missing_ok=True)
    return record
