"""The decisions of an earlier audit, for the report's compare view.

:func:`tasks.mlflow_log.previous_audits` collects the earlier audits of a registered model from
MLflow: their estimates come from the runs' metrics; their decisions (reject, not rejected,
undetermined, ...) are not metrics, so they are read here from the run's ``audit/audit.json``
artifact, which every audit run carries. The report's trend section
(:func:`tasks.report.page.trend_view`) lists first the findings whose decision changed since
the previous audit. A run whose artifact cannot be read gives ``None``: the trend then compares
estimates only, as for histories collected before decisions were recorded.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

AUDIT_JSON = "audit/audit.json"
"""The audit result on an audit run (logged by :func:`tasks.mlflow_log.log_audit`)."""

log = logging.getLogger(__name__)


def decisions_of(audit: dict[str, Any], keys: Iterable[str]) -> dict[str, str]:
    """``{finding key: decision}`` of the tested findings of an ``audit.json`` dictionary whose
    key is in ``keys`` (any format: only ``methods[].findings[]`` with ``key``, ``pvalue`` and
    ``decision`` are read)."""
    wanted = set(keys)
    out: dict[str, str] = {}
    for method in audit.get("methods") or []:
        for f in method.get("findings") or []:
            key = f.get("key")
            if key in wanted and f.get("pvalue") is not None and f.get("decision"):
                out[str(key)] = str(f["decision"])
    return out


def logged_decisions(client: Any, run_id: str, keys: Iterable[str]) -> dict[str, str] | None:
    """The decisions (:func:`decisions_of`) of audit run ``run_id``, read from its
    :data:`AUDIT_JSON` with the MLflow ``client``; ``None`` (and a logged warning) when the
    artifact cannot be read."""
    try:
        with tempfile.TemporaryDirectory(prefix="fairengine-history-") as tmp:
            path = client.download_artifacts(run_id, AUDIT_JSON, tmp)
            audit = json.loads(Path(path).read_text(encoding="utf-8"))
    except Exception as exc:  # a missing or unreadable artifact must not fail the audit
        log.warning("could not read the decisions of audit run %s: %s", run_id, exc)
        return None
    if not isinstance(audit, dict):
        return None
    return decisions_of(audit, keys)
