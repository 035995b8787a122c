"""flows/embedded_server_process.py: the server process the CLI launches is Prefect's own
embedded server (same command, same environment as ``SubprocessASGIServer``), it answers, a
port taken meanwhile is left for a new one, a start-up that keeps failing is a clear
OrchestrationUnavailableError after a bounded number of launches, and stop() ends it."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from fairengine.errors import OrchestrationUnavailableError
from flows import embedded_server_process as esp


def test_the_launch_is_prefects_own_command_and_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``SubprocessASGIServer._run_uvicorn_command`` passes to ``subprocess.Popen`` for a
    port equals :func:`server_command` and :func:`server_environment` (with no
    ``PREFECT_API_URL``, which Prefect would pass on and we never do)."""
    import prefect.server.api.server as server_module

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    seen: dict[str, object] = {}

    def fake_popen(*args: object, **kwargs: object) -> str:
        seen.update(kwargs)
        return "process"

    monkeypatch.setattr(server_module.subprocess, "Popen", fake_popen)
    server = object.__new__(server_module.SubprocessASGIServer)  # not the shared singleton
    server.port = 8765
    assert server._run_uvicorn_command() == "process"
    assert seen["args"] == esp.server_command(8765)
    assert seen["env"] == esp.server_environment()
    assert set(esp.SERVER_ENV.items()) <= set(esp.server_environment().items())


def test_the_server_environment_never_reports_to_an_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert "PREFECT_API_URL" not in esp.server_environment()


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in esp.server_environment().items() if not k.startswith("PREFECT_API_")}
    env["PREFECT_HOME"] = str(tmp / "prefect-home")
    env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{tmp / 'prefect.db'}"
    return env


@pytest.mark.flow
def test_a_port_taken_meanwhile_is_left_for_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first launch gets a port another socket listens on (the race between the choice and
    uvicorn's bind): uvicorn exits with code 3, the wait relaunches on a new port, and the
    server answers there; stop() ends it."""
    import httpx

    taken = socket.socket()
    taken.bind((esp.HOST, 0))
    taken.listen()
    ports = [int(taken.getsockname()[1])]
    real_free_port = esp.free_port
    monkeypatch.setattr(esp, "free_port", lambda: ports.pop() if ports else real_free_port())
    server = esp.EmbeddedServerProcess(_env(tmp_path))
    try:
        server.launch()
        first = server.port
        server.wait(timeout=180)
        assert server.launches == 2 and server.port != first
        assert httpx.get(server.api_url + "/health").json() is True
        process = server.server_process
        assert process is not None
    finally:
        server.stop()
        taken.close()
    assert process.poll() is not None and not server.running


@pytest.mark.flow
def test_a_start_up_that_keeps_failing_is_orchestration_unavailable(tmp_path: Path) -> None:
    """A database the server cannot open fails its start-up (uvicorn's exit code 3, the code of
    a taken port too): after MAX_LAUNCHES launches the wait raises the error with the code,
    instead of relaunching without end as Prefect's own loop would."""
    env = _env(tmp_path)
    missing = tmp_path / "no-such-folder" / "deeper" / "prefect.db"
    env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{missing}"
    server = esp.EmbeddedServerProcess(env)
    try:
        server.launch()
        with pytest.raises(OrchestrationUnavailableError, match="exited with code 3"):
            server.wait(timeout=300)
        assert server.launches == esp.MAX_LAUNCHES
    finally:
        server.stop()


def test_a_server_that_does_not_answer_in_time_times_out_with_prefects_wording(
    tmp_path: Path,
) -> None:
    """A process that never answers: the wait ends at its timeout with Prefect's message (which
    :meth:`flows.startup.ServerStart.join` turns into OrchestrationUnavailableError)."""
    server = esp.EmbeddedServerProcess(dict(os.environ))
    server.port = esp.free_port()
    server.server_process = subprocess.Popen(["sleep", "30"])
    server.launches = 1
    try:
        with pytest.raises(RuntimeError, match=esp.EPHEMERAL_TIMEOUT):
            server.wait(timeout=0.3)
    finally:
        server.stop()
    assert server.server_process is None
