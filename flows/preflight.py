"""Checks an audit passes before any Prefect engine or server starts.

A typo in the config, a missing data file, a column that is not there, a label that is not
binary or an attribute with 300 groups must be reported in about a second, all at once, without
a framework traceback. :func:`preflight` runs those checks with nothing but pandas and the
config: the config (every problem listed), the data file (read and cleaned exactly as the flow
will read it), the column roles and data contract, the audit's work bounds
(:mod:`fairengine.work_bounds`), the browser that prints the report's PDF (``report.pdf``)
and whether the MLflow store answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fairengine.config import AuditConfig
from fairengine.errors import ConfigError, MlflowUnavailableError
from fairengine.work_bounds import check_work_bounds
from tasks.audit_inputs import AuditInputs
from tasks.data import dataset_from_config, resolve_data
from tasks.mlflow_store import StoreCheck, check_tracking_store
from tasks.settings import default_tracking_uri
from tasks.stream_data import STREAMED_ENGINES, data_engine, preflight_stream


@dataclass
class Preflight:
    """What the checks found: the parsed config, the data's shape, input warnings and the MLflow
    store's state (``None`` when the audit does not use MLflow)."""

    config: AuditConfig
    n_rows: int
    store: StoreCheck | None
    warnings: list[str] = field(default_factory=list)

    @property
    def mlflow_down(self) -> bool:
        return self.store is not None and not self.store.reachable


def _needs_store_for_model(uri: str | None) -> bool:
    """Whether loading ``model.uri`` goes through the tracking/registry store."""
    return bool(uri) and str(uri).startswith(("models:/", "runs:/"))


def preflight(
    raw: dict[str, Any], base_dir: Path | None, inputs: AuditInputs | None = None
) -> Preflight:
    """Run every check that needs no Prefect and no model; raise the first failing stage's
    :class:`~fairengine.errors.FairEngineError` (each stage lists all of its own problems).
    ``inputs``: the DataFrame/model object of an audit started from Python."""
    cfg = AuditConfig.from_dict(raw, base_dir=base_dir)
    given = inputs or AuditInputs()
    has_model = bool(cfg.model.uri) or given.model is not None
    if not has_model and not cfg.columns.score and not cfg.data.embedded:
        raise ConfigError("no scores to audit: set columns.score or model.uri")
    if given.model is not None and (cfg.model.uri or cfg.columns.score):
        raise ConfigError("give either a model object or model.uri/columns.score, not both")
    if given.storage_options:
        cfg.data.storage_options = dict(given.storage_options)
    if data_engine(cfg, given.frame is not None, given.source) in STREAMED_ENGINES:
        n_rows = preflight_stream(cfg, has_model, given.source)
        return Preflight(cfg, n_rows, _store_check(cfg), [])
    loaded = resolve_data(cfg, given.frame)
    frame, roles = loaded.frame, loaded.roles
    present = [a for a in roles.protected if a in frame.columns]
    check_work_bounds(cfg, {a: int(frame[a].nunique(dropna=True)) for a in present})
    if has_model:  # the model provides scores and chooses its features: check the rest
        roles = replace(roles, score=None, features=())
    dataset_from_config(frame, roles, cfg)
    if cfg.report.pdf:  # the browser that prints the PDF, before hours of audit
        from tasks.report_pdf import find_browser

        find_browser()
    return Preflight(cfg, len(frame), _store_check(cfg), list(loaded.warnings))


def _store_check(cfg: AuditConfig) -> StoreCheck | None:
    """The MLflow store's state when the audit uses it; an error when the model is loaded
    from a store that is down."""
    store = None
    if cfg.mlflow.enabled or _needs_store_for_model(cfg.model.uri):
        tracking_uri = cfg.mlflow.tracking_uri or default_tracking_uri()
        store = check_tracking_store(tracking_uri)
        if not store.reachable and _needs_store_for_model(cfg.model.uri):
            raise MlflowUnavailableError(
                f"the model {cfg.model.uri!r} is loaded from the MLflow store at {tracking_uri}, "
                f"which is not available: {store.reason}"
            )
    return store
