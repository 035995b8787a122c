"""Locations and offline defaults shared by the CLI, the flow and the MLflow edge.

``FAIRENGINE_HOME`` (default ``./fairengine-runs``) holds the default local MLflow store
(``mlflow.db`` + ``mlartifacts/``), local report copies (``reports/``) and the demo's files.
"""

from __future__ import annotations

import os
from pathlib import Path

# Telemetry and update checks off unless the user decided otherwise (set before importing
# prefect or mlflow). Prefect's server telemetry stops only with the first; MLflow ignores
# DO_NOT_TRACK=1 and needs MLFLOW_DISABLE_TELEMETRY=true.
OFFLINE_DEFAULTS: dict[str, str] = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "GX_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "MPLBACKEND": "Agg",
}


# Bounded MLflow client retries. MLflow's defaults (7 retries, backoff factor 2, 120 s timeout)
# let one call to a stopped server block for minutes; an audit makes a handful of calls, so a
# server that is down reports within a minute with these (user settings win).
MLFLOW_CLIENT_DEFAULTS: dict[str, str] = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}


def apply_offline_defaults() -> None:
    """Set the offline/telemetry and MLflow client defaults for variables the user has not set,
    and create the folders that ``PREFECT_HOME`` and a ``sqlite:///`` ``MLFLOW_TRACKING_URI``
    name: Prefect's embedded server and MLflow's SQLite store do not create missing parent
    folders (Prefect retries its start until a timeout, then names neither the path nor why)."""
    for key, value in {**OFFLINE_DEFAULTS, **MLFLOW_CLIENT_DEFAULTS}.items():
        os.environ.setdefault(key, value)
    home = os.environ.get("PREFECT_HOME")
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    folders = [Path(home).expanduser()] if home else []
    if uri.startswith("sqlite:///") and uri != "sqlite:///:memory:":
        folders.append(Path(uri.removeprefix("sqlite:///")).expanduser().parent)
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:  # the server or the store then reports what it cannot open
            pass


def fairengine_home() -> Path:
    """``$FAIRENGINE_HOME`` or ``./fairengine-runs`` (absolute)."""
    return Path(os.environ.get("FAIRENGINE_HOME", "fairengine-runs")).expanduser().resolve()


def default_tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI`` if set, else a SQLite store under the FairEngine home."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{fairengine_home() / 'mlflow.db'}"


def default_artifact_root() -> Path:
    return fairengine_home() / "mlartifacts"


def default_report_dir() -> Path:
    return fairengine_home() / "reports"


def default_cache_dir() -> Path:
    return fairengine_home() / "cache"
