"""The list of past audits behind ``fairengine history``: read from MLflow, newest first.

An audit run is any MLflow run tagged ``fairness.audit_id`` (:data:`tasks.mlflow_log.TAGS`):
the runs ``fairengine audit`` / ``fairengine log`` create (``fairness.kind`` ``audit``) and the
evaluation runs the MLflow evaluator logs into (``evaluation``). Each row: when the run started,
the audited model's name and version, the verdict, the counts behind it (rejected, not
rejected, undetermined: deciding tests only), the run and audit ids. The verdict, model and
ids are run tags; the counts are the run's metrics ``tests_rejected`` / ``tests_undetermined``
(also read with the evaluator's ``fairness.`` prefix, and ``tests_not_rejected`` when a run
has it); a count no metric carries is read from the decision record of the run's
``audit/audit.json`` (``decisions``), and is empty when that cannot be read either.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fairengine.errors import ConfigError
from tasks.audit_history import AUDIT_JSON
from tasks.mlflow_log import TAGS

FORMATS = ("table", "json", "csv")
DEFAULT_LIMIT = 20
METRIC_PREFIXES = ("", "fairness.")
"""Prefixes under which a run's count metrics are looked for (the evaluator's default is
``fairness.``)."""
COUNT_METRICS = {
    "rejected": "tests_rejected",
    "not_rejected": "tests_not_rejected",
    "undetermined": "tests_undetermined",
}
"""Count -> metric name (before a prefix)."""
COUNT_RECORD = {
    "rejected": "n_rejected",
    "not_rejected": "n_not_rejected",
    "undetermined": "n_undetermined",
}
"""Count -> field of the decision record in ``audit.json``."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditEntry:
    """One past audit, as ``fairengine history`` lists it (``None``: not recorded)."""

    started: str
    model_name: str | None
    model_version: str | None
    verdict: str | None
    rejected: int | None
    not_rejected: int | None
    undetermined: int | None
    run_id: str
    audit_id: str | None
    kind: str | None
    experiment: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


COLUMNS = tuple(f.name for f in fields(AuditEntry))


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _experiments(client: Any, name: str | None) -> dict[str, str]:
    """``{experiment id: name}``: the one named ``name``, else every active experiment."""
    if name is not None:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            import difflib

            names = [e.name for e in _all_experiments(client)]
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            known = ", ".join(repr(n) for n in sorted(names)) or "none"
            raise ConfigError(f"no MLflow experiment named {name!r}{hint} (experiments: {known})")
        return {exp.experiment_id: exp.name}
    return {e.experiment_id: e.name for e in _all_experiments(client)}


def _all_experiments(client: Any) -> list[Any]:
    out: list[Any] = []
    token = None
    while True:
        page = client.search_experiments(max_results=1000, page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def _count(metrics: dict[str, float], name: str) -> int | None:
    for prefix in METRIC_PREFIXES:
        value = metrics.get(f"{prefix}{name}")
        if value is not None:
            return int(value)
    return None


def _recorded_counts(client: Any, run_id: str) -> dict[str, Any]:
    """The decision record (``decisions``) of the run's ``audit.json``; ``{}`` if unreadable."""
    import tempfile

    try:
        with tempfile.TemporaryDirectory(prefix="fairengine-history-") as tmp:
            path = client.download_artifacts(run_id, AUDIT_JSON, tmp)
            audit = json.loads(Path(path).read_text(encoding="utf-8"))
    except Exception as exc:  # listed with empty counts rather than not at all
        log.warning("could not read %s of run %s: %s", AUDIT_JSON, run_id, exc)
        return {}
    record = audit.get("decisions") if isinstance(audit, dict) else None
    return record if isinstance(record, dict) else {}


def _entry(client: Any, run: Any, experiment: str) -> AuditEntry:
    tags, metrics = run.data.tags, run.data.metrics
    counts = {key: _count(metrics, metric) for key, metric in COUNT_METRICS.items()}
    if any(v is None for v in counts.values()):
        record = _recorded_counts(client, run.info.run_id)
        for key, value in counts.items():
            if value is None and isinstance(record.get(COUNT_RECORD[key]), int):
                counts[key] = int(record[COUNT_RECORD[key]])
    version = tags.get(TAGS.model_version)
    started = datetime.fromtimestamp((run.info.start_time or 0) / 1000, UTC)
    return AuditEntry(
        started=started.isoformat(timespec="seconds"),
        model_name=tags.get(TAGS.model_name),
        model_version=None if version in (None, "", "None") else version,
        verdict=tags.get(TAGS.verdict),
        rejected=counts["rejected"],
        not_rejected=counts["not_rejected"],
        undetermined=counts["undetermined"],
        run_id=run.info.run_id,
        audit_id=tags.get(TAGS.audit_id),
        kind=tags.get(TAGS.kind),
        experiment=experiment,
    )


def list_audits(
    tracking_uri: str,
    *,
    model: str | None = None,
    experiment: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[AuditEntry]:
    """The last ``limit`` finished audit runs (newest first) of ``experiment`` (default: every
    active experiment), of registered model ``model`` when given.

    Raises :class:`~fairengine.errors.ConfigError` for an unknown experiment (with the closest
    name) or a ``limit`` below 1.
    """
    from mlflow import MlflowClient

    if limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    experiments = _experiments(client, experiment)
    if not experiments:
        return []
    clauses = [f"tags.`{TAGS.audit_id}` IS NOT NULL", "attributes.status = 'FINISHED'"]
    if model is not None:
        clauses.append(f"tags.`{TAGS.model_name}` = '{_quoted(model)}'")
    runs: list[Any] = []
    token = None
    while len(runs) < limit:
        page = client.search_runs(
            list(experiments),
            filter_string=" and ".join(clauses),
            order_by=["attributes.start_time DESC"],
            max_results=min(limit - len(runs), 1000),
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            break
    return [_entry(client, r, experiments.get(r.info.experiment_id, "")) for r in runs[:limit]]


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def format_table(entries: list[AuditEntry]) -> str:
    """A fixed-width table for the terminal (``-``: not recorded); a sentence when empty."""
    if not entries:
        return "No audits found."
    header = (
        "date (UTC)",
        "model",
        "version",
        "verdict",
        "rejected",
        "not rej.",
        "undet.",
        "run id",
    )
    rows = [
        (
            e.started.replace("T", " ").removesuffix("+00:00"),
            _cell(e.model_name),
            _cell(e.model_version),
            _cell(e.verdict).upper() if e.verdict else "-",
            _cell(e.rejected),
            _cell(e.not_rejected),
            _cell(e.undetermined),
            e.run_id,
        )
        for e in entries
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    numeric = {4, 5, 6}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)])


def format_json(entries: list[AuditEntry]) -> str:
    """A JSON array of objects with the fields of :class:`AuditEntry` (``null``: not recorded)."""
    return json.dumps([e.to_dict() for e in entries], indent=2)


def format_csv(entries: list[AuditEntry]) -> str:
    """CSV with a header row of :data:`COLUMNS` (an empty cell: not recorded)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for e in entries:
        writer.writerow(e.to_dict())
    return out.getvalue()


def format_entries(entries: list[AuditEntry], fmt: str) -> str:
    """``entries`` in the format ``fmt`` (one of :data:`FORMATS`)."""
    return {"table": format_table, "json": format_json, "csv": format_csv}[fmt](entries)
