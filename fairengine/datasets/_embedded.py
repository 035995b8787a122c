"""The :class:`EmbeddedDataset` container and the parameter checks the generators share."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fairengine.errors import DataContractError
from fairengine.roles import ColumnRoles


@dataclass(frozen=True, eq=False)
class EmbeddedDataset:
    """A dataset generated (or loaded) in code, with its roles and provenance.

    Parameters
    ----------
    name : short identifier (the key in :data:`fairengine.datasets.EMBEDDED` for generators).
    frame : the table, one row per individual.
    roles : which column is the label, the protected attribute(s), the score, the features.
    description : one paragraph saying what the data is and how it was made.
    citation : the source paper (and data source) to cite.
    truth : known true (population) quantities of the generative model, e.g. closed-form
        fairness metrics; empty when none are known.
    positive_label : the value of ``roles.label`` that counts as the positive outcome.

    Equality and hashing are by identity (``eq=False``): a DataFrame has no boolean ``==``.
    Every column named in ``roles`` must exist in ``frame``.
    """

    name: str
    frame: pd.DataFrame
    roles: ColumnRoles
    description: str
    citation: str
    truth: dict[str, float] = field(default_factory=dict)
    positive_label: Any = 1

    def __post_init__(self) -> None:
        if not isinstance(self.frame, pd.DataFrame):
            raise DataContractError(
                f"EmbeddedDataset.frame must be a pandas DataFrame, got {type(self.frame).__name__}"
            )
        if not isinstance(self.roles, ColumnRoles):
            raise DataContractError(
                f"EmbeddedDataset.roles must be a ColumnRoles, got {type(self.roles).__name__}"
            )
        needed = [*self.roles.role_columns(), *(self.roles.features or ())]
        missing = [c for c in dict.fromkeys(needed) if c not in self.frame.columns]
        if missing:
            raise DataContractError(
                f"dataset {self.name!r}: roles name column(s) {missing} that the frame lacks; "
                f"it has {list(map(str, self.frame.columns))}"
            )
        object.__setattr__(self, "truth", {str(k): float(v) for k, v in self.truth.items()})

    @property
    def n_rows(self) -> int:
        return len(self.frame)

    def __repr__(self) -> str:
        return (
            f"EmbeddedDataset(name={self.name!r}, rows={len(self.frame)}, "
            f"columns={list(map(str, self.frame.columns))}, roles={self.roles!r}, "
            f"truth={self.truth!r})"
        )


def check_int(name: str, value: object, minimum: int) -> int:
    """``value`` as an ``int`` when it is an integer (not a bool) ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise DataContractError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_seed(value: object, name: str = "seed") -> int:
    """A seed for the legacy ``np.random`` API: an integer in [0, 2**32 - 1]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or not 0 <= int(value) <= 2**32 - 1
    ):
        raise DataContractError(f"{name} must be an integer in [0, 2**32 - 1], got {value!r}")
    return int(value)


def check_vector(
    name: str,
    value: object,
    length: int,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    open_interval: bool = False,
) -> np.ndarray:
    """``value`` as a float array of ``length`` finite entries in [low, high] (or (low, high))."""
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray):
        raise DataContractError(f"{name} must be a sequence of {length} numbers, got {value!r}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataContractError(
            f"{name} must be a sequence of {length} numbers, got {value!r}"
        ) from None
    if arr.shape != (length,):
        raise DataContractError(
            f"{name} must have exactly {length} entries, got {len(arr.ravel())}: {value!r}"
        )
    if not np.all(np.isfinite(arr)):
        raise DataContractError(f"{name} must be finite, got {value!r}")
    inside = (arr > low) & (arr < high) if open_interval else (arr >= low) & (arr <= high)
    if not np.all(inside):
        lo, hi = ("(", ")") if open_interval else ("[", "]")
        raise DataContractError(f"{name} entries must lie in {lo}{low}, {high}{hi}, got {value!r}")
    return arr
