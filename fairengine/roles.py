"""Column roles: which column of a table plays which part in an audit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    class_scores : a multiclass audit's probability columns, ``{class: column}`` (stored as
        ``((class, column), ...)``, classes as text): column c holds P(ŷ = c) per row. With
        them and no ``score``, the predicted class is the most probable one.
    """

    label: str | None
    protected: tuple[str, ...]
    score: str | None = None
    features: tuple[str, ...] | None = None
    weight: str | None = None
    list_id: str | None = None
    class_scores: tuple[tuple[str, str], ...] | None = None

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
        if self.class_scores is not None:
            object.__setattr__(self, "class_scores", _class_score_pairs(self.class_scores))
        named = self.role_columns()
        dupes = sorted({c for c in named if named.count(c) > 1})
        if dupes:
            raise DataContractError(
                f"column(s) {dupes} are given more than one role "
                "(label, protected, score, weight, list_id, class_scores); "
                "each column may play one role"
            )

    def role_columns(self) -> list[str]:
        """Label, protected, score, weight, list-id and class-score columns (those present),
        in that order."""
        cols = [self.label, *self.protected, self.score, self.weight, self.list_id]
        cols += [column for _, column in self.class_scores or ()]
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
            **({"class_scores": dict(self.class_scores)} if self.class_scores else {}),
        }


def _class_score_pairs(value: object) -> tuple[tuple[str, str], ...]:
    """``{class: column}`` (or its pairs) as ``((class, column), ...)``, classes as text; an
    empty mapping, a repeated class or a non-text column name is a :class:`DataContractError`."""
    items = value.items() if isinstance(value, Mapping) else value
    try:
        pairs = tuple((str(c), column) for c, column in items)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise DataContractError(
            "columns.class_scores must map each class to its probability column "
            f"({{class: column}}), got {value!r}"
        ) from None
    bad = [column for _, column in pairs if not isinstance(column, str) or not column]
    if not pairs or bad:
        raise DataContractError(
            "columns.class_scores must map each class to the name of its probability column, "
            f"got {value!r}"
        )
    classes = [c for c, _ in pairs]
    repeated = sorted({c for c in classes if classes.count(c) > 1})
    if repeated:
        raise DataContractError(f"columns.class_scores names class(es) {repeated} twice")
    return pairs
