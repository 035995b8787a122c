"""Test-session isolation: every Prefect/MLflow home and URI points into a temporary directory,
and every telemetry or update check is off, *before* prefect or mlflow is imported."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_TMP = Path(
    tempfile.mkdtemp(prefix=f"fairengine-tests-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-")
)
os.environ.update(
    {
        "PREFECT_HOME": str(_TMP / "prefect"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(_TMP / "prefect" / "storage"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "DO_NOT_TRACK": "true",
        "MLFLOW_TRACKING_URI": f"sqlite:///{_TMP / 'mlflow.db'}",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "GX_ANALYTICS_ENABLED": "false",
        "MPLBACKEND": "Agg",
        "FAIRENGINE_HOME": str(_TMP / "fairengine-runs"),
        "FAIRENGINE_STRICT_REPORT": "1",  # a report view that raises fails the test
    }
)
for _k in ("PREFECT_API_URL", "PREFECT_API_KEY", "MLFLOW_REGISTRY_URI"):
    os.environ.pop(_k, None)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared directory (datasets, docs); CI has it beside the repository."""
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}; tests need it beside the repository")
    return SHARED


@pytest.fixture(scope="session")
def session_tmp() -> Path:
    return _TMP
