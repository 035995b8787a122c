"""Column roles: which column of a table plays which part in an audit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fairengine.errors import DataContractError


@dataclass(frozen=True)
class ColumnRoles:
    """Names of the columns that make an audit dataset.

    Parameters
    ----------
    label : the outcome column (binary; a regression target; a class; a ranking's relevance).
        ``None`` only in a ranking audit without relevance labels.
    protected : one or more protected-attribute columns (strings, categoricals, integers or
        booleans; bin continuous attributes such as age first).
    score : the model's score column (probability or raw logit, see ``score_type``); ``None``
        when a model will produce the scores.
    features : model input columns; ``None`` means every column not named in another role.
    weight : optional non-negative sample-weight column.
    list_id : a ranking audit's list (query) id column: items are ranked within their list
        (``None``: one list of every row).
    """

    label: str | None
    protected: tuple[str, ...]
    score: str | None = None
    features: tuple[str, ...] | None = None
    weight: str | None = None
    list_id: str | None = None

    def __post_init__(self) -> None:
        protected = self.protected
        if isinstance(protected, str):
            protected = (protected,)
        if not isinstance(protected, Sequence) or len(protected) == 0:
            raise DataContractError(
                "roles.protected must name at least one protected-attribute column"
            )
        object.__setattr__(self, "protected", tuple(str(c) for c in protected))
        if self.features is not None:
            object.__setattr__(self, "features", tuple(str(c) for c in self.features))
        roles = (self.label, *self.protected, self.score, self.weight, self.list_id)
        named = [c for c in roles if c is not None]
        dupes = sorted({c for c in named if named.count(c) > 1})
        if dupes:
            raise DataContractError(
                f"column(s) {dupes} are given more than one role "
                "(label, protected, score, weight, list_id); "
                "each column may play one role"
            )

    def role_columns(self) -> list[str]:
        """Label, protected, score, weight and list-id columns (those present), in that
        order."""
        cols = [self.label, *self.protected, self.score, self.weight, self.list_id]
        return [c for c in cols if c is not None]

    def feature_columns(self, columns: Sequence[str]) -> list[str]:
        """The feature columns given the table's ``columns``."""
        if self.features is not None:
            return list(self.features)
        taken = set(self.role_columns())
        return [c for c in columns if c not in taken]

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "protected": list(self.protected),
            "score": self.score,
            "features": list(self.features) if self.features is not None else None,
            "weight": self.weight,
            **({"list_id": self.list_id} if self.list_id is not None else {}),
        }
