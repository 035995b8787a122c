"""Prefect's embedded server process, launched without importing Prefect's server module.

When no Prefect API is configured, Prefect's client starts its embedded (ephemeral) server:
``prefect.server.api.server.SubprocessASGIServer`` launches ``uvicorn`` on Prefect's
``create_app`` factory in a subprocess and the client talks to it over HTTP on 127.0.0.1. The
client-side object lives in ``prefect.server.api.server``, a module that imports the whole
server (FastAPI, the API routers, the ORM): 1.7-1.8 s of one core in the audit's process, for a
server that runs in another process anyway. The audit's process never uses that module for
anything but the launch and the address.

:class:`EmbeddedServerProcess` launches the very same server process, with the command and
environment of ``SubprocessASGIServer._run_uvicorn_command`` (Prefect 3.8.8: ``uvicorn
--factory prefect.server.api.server:create_app`` with ``PREFECT_UI_ENABLED=0``,
``PREFECT__SERVER_EPHEMERAL=1``, ``PREFECT__SERVER_FINAL=1`` and the current settings as
environment variables; ``tests/test_embedded_server_process.py`` compares the two), and points
this process's Prefect settings at it through ``PREFECT_API_URL`` (set in ``os.environ``, then
``prefect.context.refresh_global_settings_context()``, which Prefect itself calls after its
plugins changed the environment). The client then reaches it like any server, without
importing the server module; child processes (Dask workers) inherit the address and report to
the same server instead of each starting one. Like Prefect's, the process is stopped when this
process exits (``atexit``: terminate, then kill after 5 s), after Prefect's own exit hooks
drained the logs and events, which were registered later.

Used by the ``fairengine`` command only (:func:`flows.startup.launch_embedded_server`), whose
process is the audit's alone: a notebook's ``fairengine.audit`` keeps Prefect's own start
(:func:`flows.startup.start_embedded_server`), so a user's later Prefect calls in that session
are not sent to a server of ours.

uvicorn exits with code 3 when its port was taken between the choice and the bind;
:meth:`EmbeddedServerProcess.wait` then relaunches on a new port, as Prefect does, and
:meth:`EmbeddedServerProcess.point_prefect_here` is called again by whoever joins the start
(:meth:`flows.startup.ServerStart.join`), before any Prefect client exists.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field

HOST = "127.0.0.1"
EPHEMERAL_TIMEOUT = "Timed out while attempting to connect to ephemeral Prefect API server"
"""Prefect's message when its embedded (ephemeral) server does not start in time."""
APP_FACTORY = "prefect.server.api.server:create_app"
"""The ASGI application factory Prefect's embedded server runs."""
SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
}
"""What ``SubprocessASGIServer._run_uvicorn_command`` adds to the environment: no UI, the
ephemeral server's reduced services, no further app instances in the process."""
PORT_TAKEN_EXIT = 3
"""uvicorn's exit code when it could not bind its port, or when the application's start-up
failed (``STARTUP_FAILURE``: e.g. a database it cannot open)."""
MAX_LAUNCHES = 3
"""Launches (on a new port each) before exit code 3 is taken for a failed start-up rather than
a port taken meanwhile (Prefect's own loop relaunches without end)."""
POLL_S = 0.1
"""Seconds between two health checks while the server starts (Prefect's interval)."""


def free_port(host: str = HOST) -> int:
    """A port on ``host`` that nothing listens on now (the system's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_command(port: int) -> list[str]:
    """``python -m uvicorn ... --factory prefect.server.api.server:create_app`` on
    127.0.0.1:``port``: Prefect's embedded server command, with this interpreter."""
    import prefect

    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(prefect.__module_path__.parent),
        "--factory",
        APP_FACTORY,
        "--host",
        HOST,
        "--port",
        str(port),
        "--log-level",
        "error",
        "--lifespan",
        "on",
    ]


def server_environment() -> dict[str, str]:
    """The server process's environment: this process's, :data:`SERVER_ENV`, and the current
    Prefect settings as environment variables (the settings in force when called: call it
    inside ``temporary_settings`` to start the server with other settings).
    ``PREFECT_API_URL`` is left out: the server serves the API, it reports to none."""
    from prefect.settings import get_current_settings

    env = {
        **os.environ,
        **SERVER_ENV,
        **get_current_settings().to_environment_variables(exclude_unset=True),
    }
    env.pop("PREFECT_API_URL", None)
    return env


def health_ok(api_url: str, timeout: float = 1.0) -> bool:
    """Whether ``<api_url>/health`` answers 200 now."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


@dataclass
class EmbeddedServerProcess:
    """Prefect's embedded server in a subprocess of this one (module docstring).

    ``env`` is the process's environment (:func:`server_environment`, fixed at launch and used
    again for a relaunch); ``server_process`` the running ``subprocess.Popen``; ``port`` where it
    listens. :attr:`running` mirrors ``SubprocessASGIServer.running``."""

    env: dict[str, str]
    port: int = 0
    server_process: subprocess.Popen[bytes] | None = None
    launches: int = 0
    _stop_registered: bool = field(default=False, repr=False)

    @property
    def api_url(self) -> str:
        return f"http://{HOST}:{self.port}/api"

    @property
    def running(self) -> bool:
        return self.server_process is not None and self.server_process.poll() is None

    def launch(self) -> None:
        """Launch the server process on a free port (it answers a few seconds later: wait)."""
        self.port = free_port()
        self.server_process = subprocess.Popen(server_command(self.port), env=self.env)
        self.launches += 1
        if not self._stop_registered:
            atexit.register(self.stop)
            self._stop_registered = True

    def point_prefect_here(self) -> None:
        """Make this process's Prefect settings (and its future children) use this server:
        ``PREFECT_API_URL`` in ``os.environ``, Prefect's global settings re-read. Unless set,
        ``PREFECT_UI_URL`` is set empty: the server serves no UI (as Prefect's own embedded
        server), and Prefect would otherwise derive one from the API's address and log a
        "View at" link to it."""
        from prefect.context import refresh_global_settings_context

        os.environ["PREFECT_API_URL"] = self.api_url
        os.environ.setdefault("PREFECT_UI_URL", "")
        refresh_global_settings_context()

    def wait(self, timeout: float) -> None:
        """Poll the health check until the server answers; relaunch on a new port when its
        port was taken (:data:`PORT_TAKEN_EXIT`; at most :data:`MAX_LAUNCHES` launches).
        Raises ``RuntimeError`` with Prefect's
        :data:`EPHEMERAL_TIMEOUT` wording when it did not answer within ``timeout`` seconds,
        and :class:`~fairengine.errors.OrchestrationUnavailableError` with its exit code when
        it exited (its own error went to this process's stderr, which it shares)."""
        deadline = time.monotonic() + timeout
        while True:
            process = self.server_process
            assert process is not None, "launch() first"
            code = process.poll()
            if code == PORT_TAKEN_EXIT and self.launches < MAX_LAUNCHES:
                self.launch()
                continue
            if code is not None:
                from fairengine.errors import OrchestrationUnavailableError

                raise OrchestrationUnavailableError(
                    f"Prefect's embedded server exited with code {code} before it answered "
                    f"(launched {self.launches} time(s); its error is printed above): nothing "
                    "was audited. Start a server once "
                    "with `fairengine server start` (its log is kept) or set PREFECT_API_URL to "
                    "a running Prefect server, and re-run"
                )
            if health_ok(self.api_url):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{EPHEMERAL_TIMEOUT}.")
            time.sleep(POLL_S)

    def stop(self) -> None:
        """Terminate the server process (kill it after 5 s)."""
        process, self.server_process = self.server_process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
