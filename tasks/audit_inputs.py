"""Inputs an audit receives as Python objects rather than through its config: the table
(instead of ``data.path``) and the model (instead of ``model.uri``), from ``fairengine.audit``."""

from __future__ import annotations

from typing import Any

import pandas as pd


class AuditInputs:
    """The table and/or model object of an audit started from Python.

    A plain slotted class, not a dataclass: Prefect records a flow's parameters in its API by
    encoding them to JSON, which would copy a dataclass's DataFrame field by field; an object
    without ``__dict__`` is recorded as the placeholder ``<AuditInputs>`` instead.
    """

    __slots__ = ("frame", "model")

    def __init__(self, frame: pd.DataFrame | None = None, model: Any = None) -> None:
        self.frame = frame
        self.model = model

    def __repr__(self) -> str:
        rows = "no table" if self.frame is None else f"{len(self.frame):,} rows"
        model = "no model" if self.model is None else type(self.model).__name__
        return f"AuditInputs({rows}, {model})"


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
