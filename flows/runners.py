"""The task runner of an audit (``runner`` config): Prefect's thread pool or prefect-dask."""

from __future__ import annotations

import os
from typing import Any

from fairengine.config import AuditConfig
from fairengine.errors import ConfigError


def task_runner_for(cfg: AuditConfig) -> Any:
    """A fresh task runner for one audit run, as configured.

    ``threads``: :class:`prefect.task_runners.ThreadPoolTaskRunner`. ``dask``:
    :class:`prefect_dask.DaskTaskRunner` on ``runner.dask_address`` or a local cluster of
    processes; refuses to start without a Prefect server (``PREFECT_API_URL``).
    """
    r = cfg.runner
    if r.kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=r.max_workers)
    if not os.environ.get("PREFECT_API_URL"):
        raise ConfigError(
            "runner.kind=dask needs a Prefect server: start `prefect server start` and set "
            "PREFECT_API_URL (in embedded mode every Dask worker would start its own temporary "
            "API server)"
        )
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise ConfigError(
            "runner.kind=dask needs the prefect-dask package (pip install prefect-dask)"
        ) from None
    if r.dask_address:
        return DaskTaskRunner(address=r.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": r.dask_workers,
            "threads_per_worker": r.dask_threads_per_worker,
            "processes": True,
            "dashboard_address": None,
        }
    )
