"""Inputs an audit receives as Python objects rather than through its config: the table
(instead of ``data.path``) and the model (instead of ``model.uri``), from ``fairengine.audit``;
and the object-store credentials (``data.storage_options``), kept out of the flow's recorded
parameters."""

from __future__ import annotations

from typing import Any

import pandas as pd


class AuditInputs:
    """The table and/or model object of an audit started from Python.

    ``frame`` is a pandas DataFrame (audited in memory); ``source`` a Dask or Spark DataFrame
    (audited by the Dask or Spark engine, where it lives); ``storage_options`` the
    ``data.storage_options`` of an object-store ``data.path`` (:func:`split_storage_options`).

    A plain slotted class, not a dataclass: Prefect records a flow's parameters in its API by
    encoding them to JSON, which would copy a dataclass's DataFrame field by field; an object
    without ``__dict__`` is recorded as the placeholder ``<AuditInputs>`` instead (so are the
    storage options it carries).
    """

    __slots__ = ("frame", "model", "source", "storage_options")

    def __init__(
        self,
        frame: pd.DataFrame | None = None,
        model: Any = None,
        source: Any = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.frame = frame
        self.model = model
        self.source = source
        self.storage_options = dict(storage_options or {})

    def __repr__(self) -> str:
        rows = "no table" if self.frame is None else f"{len(self.frame):,} rows"
        if self.source is not None:
            rows = type(self.source).__name__
        model = "no model" if self.model is None else type(self.model).__name__
        return f"AuditInputs({rows}, {model})"


def split_storage_options(
    config: dict[str, Any], inputs: AuditInputs | None
) -> tuple[dict[str, Any], AuditInputs | None]:
    """``config`` without ``data.storage_options`` and ``inputs`` carrying them: the flow's
    ``config`` parameter, which Prefect records in its database, then holds no credentials."""
    data = config.get("data")
    if not isinstance(data, dict) or not data.get("storage_options"):
        return config, inputs
    given = inputs or AuditInputs()
    rest = {k: v for k, v in data.items() if k != "storage_options"}
    carried = AuditInputs(
        given.frame, given.model, given.source, {**given.storage_options, **data["storage_options"]}
    )
    return {**config, "data": rest}, carried


class ComparisonInputs:
    """The table and/or the two model objects of a comparison started from Python
    (``fairengine.compare``); slotted for the reason :class:`AuditInputs` is."""

    __slots__ = ("baseline", "candidate", "frame")

    def __init__(
        self, frame: pd.DataFrame | None = None, baseline: Any = None, candidate: Any = None
    ) -> None:
        self.frame = frame
        self.baseline = baseline
        self.candidate = candidate

    def __repr__(self) -> str:
        rows = "no table" if self.frame is None else f"{len(self.frame):,} rows"
        return f"ComparisonInputs({rows})"
