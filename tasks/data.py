"""Pipeline steps that read the audit data and build the validated audit dataset."""

from __future__ import annotations

from typing import Any

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError
from fairengine.loaders import read_table
from fairengine.roles import ColumnRoles


def resolve_data(cfg: AuditConfig) -> tuple[pd.DataFrame, ColumnRoles, dict[str, Any]]:
    """The table, its column roles and a description of its source.

    ``data.path`` reads CSV/Parquet; ``data.embedded`` generates a packaged dataset whose roles
    are used for any ``columns`` entry the config leaves empty.
    """
    if cfg.data.embedded:
        from fairengine.datasets import load_embedded

        ds = load_embedded(cfg.data.embedded, **cfg.data.params)
        c = cfg.columns
        roles = ColumnRoles(
            label=c.label or ds.roles.label,
            protected=tuple(c.protected) or ds.roles.protected,
            score=c.score or ds.roles.score,
            features=tuple(c.features) if c.features is not None else ds.roles.features,
            weight=c.weight or ds.roles.weight,
        )
        return ds.frame, roles, {"name": ds.name, "source": f"embedded:{ds.name}"}
    if not cfg.data.path:
        raise ConfigError("data.path (a CSV or Parquet file) or data.embedded is required")
    frame = read_table(cfg.data.path, cfg.data.format)
    return frame, cfg.roles(), {"name": cfg.name, "source": cfg.data.path}


@task(name="load-data", cache_policy=NO_CACHE)
def load_data(cfg: AuditConfig) -> tuple[pd.DataFrame, ColumnRoles, dict[str, Any]]:
    """Read the audit table (see :func:`resolve_data`)."""
    frame, roles, source = resolve_data(cfg)
    get_run_logger().info(
        "Loaded %d rows x %d columns from %s", len(frame), frame.shape[1], source["source"]
    )
    return frame, roles, source


@task(name="build-dataset", cache_policy=NO_CACHE)
def build_dataset(frame: pd.DataFrame, roles: ColumnRoles, cfg: AuditConfig) -> AuditDataset:
    """Validate the data contract and encode groups (:meth:`AuditDataset.from_frame`)."""
    return AuditDataset.from_frame(
        frame,
        roles,
        score_type=cfg.score_type,
        threshold=cfg.threshold,
        positive_label=cfg.positive_label,
        min_group_size=cfg.validation.min_group_size,
    )
