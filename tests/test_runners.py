"""The task-runner choice (``runner`` config): threads by default, Dask only with a server."""

from __future__ import annotations

import pytest

from fairengine.config import AuditConfig
from fairengine.errors import ConfigError
from flows.runners import task_runner_for


def test_threads_by_default() -> None:
    from prefect.task_runners import ThreadPoolTaskRunner

    runner = task_runner_for(AuditConfig())
    assert isinstance(runner, ThreadPoolTaskRunner)
    runner = task_runner_for(AuditConfig.from_dict({"runner": {"max_workers": 3}}))
    assert runner._max_workers == 3


def test_dask_needs_a_prefect_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with pytest.raises(ConfigError, match="PREFECT_API_URL"):
        task_runner_for(AuditConfig.from_dict({"runner": {"kind": "dask"}}))


def test_dask_runner_on_a_local_cluster_or_an_address(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect_dask import DaskTaskRunner

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:1/api")  # not contacted here
    local = task_runner_for(AuditConfig.from_dict({"runner": {"kind": "dask", "dask_workers": 3}}))
    assert isinstance(local, DaskTaskRunner)
    assert local.cluster_kwargs["n_workers"] == 3
    remote = task_runner_for(
        AuditConfig.from_dict({"runner": {"kind": "dask", "dask_address": "tcp://h:8786"}})
    )
    assert remote.address == "tcp://h:8786"


@pytest.mark.parametrize(
    ("runner", "message"),
    [
        ({"kind": "ray"}, "runner.kind"),
        ({"max_workers": 0}, "runner.max_workers"),
        ({"dask_workers": 0}, "runner.dask_workers"),
    ],
)
def test_bad_runner_settings(runner: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AuditConfig.from_dict({"runner": runner})
