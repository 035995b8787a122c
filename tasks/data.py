"""Pipeline steps that read the audit data and build the validated audit dataset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.config import AuditConfig
from fairengine.data_hygiene import clean_role_columns
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError
from fairengine.loaders import load_table
from fairengine.roles import ColumnRoles


@dataclass(frozen=True)
class LoadedData:
    """The audit table after reading and role-column cleaning.

    ``source``: ``{"name", "source"}`` describing where it came from (merged into the result's
    dataset summary); ``warnings``: one sentence per change or guess made while reading and
    cleaning (shown beside the verdict); ``dropped_rows``: rows dropped under
    ``data.missing: drop``.
    """

    frame: pd.DataFrame
    roles: ColumnRoles
    source: dict[str, Any]
    warnings: tuple[str, ...] = ()
    dropped_rows: int = 0


def resolve_data(cfg: AuditConfig, frame: pd.DataFrame | None = None) -> LoadedData:
    """The table, its column roles, a description of its source and the cleaning warnings.

    ``frame``: a table given from Python (``fairengine.audit(df, ...)``) instead of
    ``data.path``; it is cleaned like a file's table, on a copy (the caller's frame is never
    changed).

    ``data.path`` reads CSV/Parquet (:func:`fairengine.loaders.load_table`); ``data.embedded``
    generates a packaged dataset whose roles are used for any ``columns`` entry the config leaves
    empty. Either way the role columns are cleaned by
    :func:`fairengine.data_hygiene.clean_role_columns` (``data.na_values``, ``data.missing``).
    """
    notes: tuple[str, ...]
    source: dict[str, str | None]
    if frame is not None:
        if cfg.data.path or cfg.data.embedded:
            raise ConfigError("data: give a DataFrame or data.path/data.embedded, not both")
        if not isinstance(frame, pd.DataFrame):
            raise ConfigError(f"data: expected a pandas DataFrame, got {type(frame).__name__}")
        roles = cfg.roles()
        frame, notes = frame.copy(), ()
        source = {"name": cfg.name, "source": "pandas.DataFrame"}
    elif cfg.data.embedded:
        from fairengine.datasets import load_embedded

        ds = load_embedded(cfg.data.embedded, **cfg.data.params)
        c = cfg.columns
        roles = ColumnRoles(
            label=c.label or ds.roles.label,
            protected=tuple(c.protected) or ds.roles.protected,
            score=c.score or ds.roles.score,
            features=tuple(c.features) if c.features is not None else ds.roles.features,
            weight=c.weight or ds.roles.weight,
            list_id=c.list_id or ds.roles.list_id,
            class_scores=tuple(c.class_scores.items()) if c.class_scores else ds.roles.class_scores,
        )
        frame, notes = ds.frame, ()
        source = {"name": ds.name, "source": f"embedded:{ds.name}"}
    else:
        if not cfg.data.path:
            raise ConfigError("data.path (a CSV or Parquet file) or data.embedded is required")
        roles = cfg.roles()
        table = load_table(
            cfg.data.path,
            cfg.data.format,
            delimiter=cfg.data.delimiter,
            names=cfg.data.names,
            skip_initial_space=cfg.data.skip_initial_space,
            skip_rows=cfg.data.skip_rows,
        )
        frame, notes = table.frame, table.warnings
        source = {"name": cfg.name, "source": cfg.data.path}
    cleaned = clean_role_columns(
        frame, roles, na_values=cfg.data.na_values, missing=cfg.data.missing
    )
    return LoadedData(
        frame=cleaned.frame,
        roles=roles,
        source=source,
        warnings=tuple(notes) + cleaned.warnings,
        dropped_rows=cleaned.dropped_rows,
    )


WARNING_FORMAT = "Data: %s"
"""How :func:`load_data` logs each data warning to the flow run's log (the CLI, which prints
the same warnings itself, keeps these records off its console: ``flows.cli_console``)."""


@task(name="load-data", cache_policy=NO_CACHE)
def load_data(cfg: AuditConfig, frame: pd.DataFrame | None = None) -> LoadedData:
    """Read and clean the audit table (see :func:`resolve_data`); log every warning."""
    loaded = resolve_data(cfg, frame)
    logger = get_run_logger()
    logger.info(
        "Loaded %d rows x %d columns from %s",
        len(loaded.frame),
        loaded.frame.shape[1],
        loaded.source["source"],
    )
    for message in loaded.warnings:
        logger.warning(WARNING_FORMAT, message)
    return loaded


def dataset_from_config(frame: pd.DataFrame, roles: ColumnRoles, cfg: AuditConfig) -> AuditDataset:
    """:meth:`AuditDataset.from_frame` with the config's score, threshold and group settings
    (the CLI's preflight and the flow check the data contract with the same call)."""
    return AuditDataset.from_frame(
        frame,
        roles,
        score_type=cfg.score_type,
        threshold=cfg.threshold,
        positive_label=cfg.positive_label,
        min_group_size=cfg.validation.min_group_size,
        task=cfg.task,
    )


@task(name="build-dataset", cache_policy=NO_CACHE)
def build_dataset(frame: pd.DataFrame, roles: ColumnRoles, cfg: AuditConfig) -> AuditDataset:
    """Validate the data contract and encode groups (:func:`dataset_from_config`)."""
    return dataset_from_config(frame, roles, cfg)
