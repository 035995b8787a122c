"""The audit dataset: a table plus column roles, validated once at the boundary.

An :class:`AuditDataset` holds the label (0/1), the probability of a positive prediction per row
(hard 0/1 with a threshold, the probability itself without), each protected attribute encoded as
integer group codes with their labels, and optional sample weights. Everything downstream (count
tables, metrics, tests) consumes these arrays, never the raw frame.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fairengine.counts import index_dtype
from fairengine.errors import DataContractError
from fairengine.prediction_task import DEFAULT_SCORE_TYPE, TASKS
from fairengine.roles import ColumnRoles
from fairengine.scores import (
    ROW_SUM_TOLERANCE,
    ScoreType,
    check_score_type,
    effective_threshold,
    positive_prediction,
    to_probability,
)


@dataclass(frozen=True)
class GroupEncoding:
    """Integer codes ``0..G-1`` of one protected attribute and the group label of each code.

    :meth:`AuditDataset.from_frame` stores the codes in the smallest unsigned integer dtype that
    holds them (``uint8`` up to 256 groups; :func:`fairengine.counts.index_dtype`): do
    arithmetic on them after ``astype(np.intp)``, comparisons and indexing as they are.
    """

    attribute: str
    codes: np.ndarray
    categories: tuple[str, ...]

    @property
    def n_groups(self) -> int:
        return len(self.categories)

    def sizes(self, weights: np.ndarray | None = None) -> np.ndarray:
        """Row counts (or weight totals) per group, in code order."""
        return np.bincount(self.codes, weights=weights, minlength=self.n_groups)


@dataclass(frozen=True)
class AuditDataset:
    """Validated arrays of an audit. Build it with :meth:`from_frame`."""

    frame: pd.DataFrame
    roles: ColumnRoles
    label: np.ndarray
    probability: np.ndarray | None
    prediction: np.ndarray | None
    groups: dict[str, GroupEncoding]
    weights: np.ndarray | None
    score_type: ScoreType
    threshold: float | None
    positive_label: Any = 1
    feature_columns: tuple[str, ...] = field(default=())
    task: str = "binary"
    """``binary`` (0/1 ``label``, probabilities and thresholded ``prediction``) or
    ``regression`` (:mod:`fairengine.prediction_task`): ``label`` is the real-valued target
    (float64) and ``prediction`` the model's real-valued prediction; ``probability`` is None;
    or ``multiclass``: ``label`` and ``prediction`` are class codes 0..K−1 of ``classes``."""
    classes: tuple[str, ...] = ()
    """The classes of a multiclass audit, in code order (the label's values, sorted)."""
    lists: np.ndarray | None = None
    """A ranking audit's list (query) id per row (``roles.list_id``); None: one list."""
    class_probability: np.ndarray | None = None
    """A multiclass audit's (n, K) probability matrix, column k for ``classes[k]``
    (``roles.class_scores``); None when only predicted classes are known."""

    @property
    def relevance(self) -> np.ndarray | None:
        """A ranking audit's relevance labels (``label``, float64, non-negative); None when
        the audit has none (``roles.label`` is None) or is not a ranking audit."""
        if self.task != "ranking" or self.roles.label is None:
            return None
        return self.label

    @property
    def n_rows(self) -> int:
        return int(self.label.shape[0])

    @property
    def features(self) -> pd.DataFrame:
        return self.frame.loc[:, list(self.feature_columns)]

    @property
    def prediction_mode(self) -> str:
        """``hard`` (thresholded predictions) or ``expected`` (expected counts, no threshold)."""
        return "expected" if self.threshold is None else "hard"

    def require_scores(self, what: str) -> np.ndarray:
        """The positive-prediction array, or a clear error when the data carries no scores."""
        if self.prediction is None:
            raise DataContractError(
                f"{what} needs model scores: name a score column in roles.score or give a model"
            )
        return self.prediction

    def fingerprint(self) -> str:
        """SHA-256 of the content of the role and feature columns (not of object identity)."""
        return frame_fingerprint(self.frame, [*self.roles.role_columns(), *self.feature_columns])

    def summary(self) -> dict[str, Any]:
        """JSON-ready description: rows, fingerprint, roles, group sizes per attribute (and the
        task of a regression audit, ``label_rate`` then the mean target; of a multiclass
        audit with its ``classes``, no label rate)."""
        extra: dict[str, Any] = {} if self.task == "binary" else {"task": self.task}
        if self.task == "multiclass":
            extra["classes"] = list(self.classes)
        if self.task == "ranking":
            extra["n_lists"] = 1 if self.lists is None else int(pd.unique(self.lists).size)
        return {
            **extra,
            "n_rows": self.n_rows,
            "fingerprint": self.fingerprint(),
            "roles": self.roles.to_dict(),
            "score_type": self.score_type,
            "threshold": self.threshold,
            "positive_label": _plain(self.positive_label),
            "label_rate": (
                None
                if self.task == "multiclass" or (self.task == "ranking" and self.relevance is None)
                else float(self.label.mean())
                if self.n_rows
                else float("nan")
            ),
            "groups": {
                a: dict(zip(g.categories, g.sizes().astype(int).tolist(), strict=True))
                for a, g in self.groups.items()
            },
        }

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        roles: ColumnRoles,
        *,
        score_type: str = "probability",
        threshold: float | None = None,
        positive_label: Any = 1,
        min_group_size: int = 1,
        task: str = "binary",
    ) -> AuditDataset:
        """Validate ``frame`` against ``roles`` and build the dataset.

        ``task="regression"``: the label is a real-valued target (numeric, finite) and the
        score column the model's prediction (numeric, finite; ``score_type`` ``value``); no
        threshold or positive label applies. ``task="ranking"``: the score column ranks the
        items (numeric, finite; higher ranks higher) within the lists of ``roles.list_id``
        (one list without it); the label, when given, is their relevance (numeric, finite,
        non-negative).

        Raises :class:`DataContractError` naming the column and the problem for: a missing
        column, an empty table, a label that is not binary, nulls in the label or a protected
        attribute, a protected attribute with a single value or a continuous (non-integer float)
        one, a group with fewer than ``min_group_size`` rows, a non-numeric or non-finite score,
        a probability outside [0, 1], and negative, non-finite or all-zero weights.
        """
        if not isinstance(frame, pd.DataFrame):
            raise DataContractError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
        if not isinstance(roles, ColumnRoles):
            raise DataContractError(f"roles must be a ColumnRoles, got {type(roles).__name__}")
        if task not in TASKS:
            raise DataContractError(f"task must be one of {list(TASKS)}, got {task!r}")
        if task != "binary":
            score_type, threshold, positive_label = DEFAULT_SCORE_TYPE[task], None, None
        elif score_type in ("value", "class"):
            raise DataContractError(
                f"score_type {score_type!r} is a regression or multiclass model's prediction; "
                "set task='regression' or task='multiclass'"
            )
        st = check_score_type(score_type)
        t = effective_threshold(st, threshold)  # labels: their own hard predictions
        if not isinstance(min_group_size, int | np.integer) or min_group_size < 1:
            raise DataContractError(
                f"min_group_size must be a positive integer, got {min_group_size!r}"
            )
        features = roles.feature_columns(list(frame.columns))
        _check_columns_exist(frame, [*roles.role_columns(), *features])
        if len(frame) == 0:
            raise DataContractError(
                "the data has no rows; an audit needs at least one row per group"
            )

        classes: tuple[str, ...] = ()
        lists = None
        if roles.label is None:
            if task != "ranking":
                raise DataContractError(
                    f"a {task} audit needs a label column (roles.label); only a ranking audit "
                    "may go without (no relevance labels)"
                )
            label = np.full(len(frame), np.nan)
        elif task == "ranking":
            label = _encode_relevance(frame[roles.label], roles.label)
        elif task == "regression":
            label = _encode_target(frame[roles.label], roles.label)
        elif task == "multiclass":
            label, classes = _encode_classes(frame[roles.label], roles.label)
        else:
            label = _encode_label(frame[roles.label], roles.label, positive_label)
        if roles.list_id is not None:
            if task != "ranking":
                raise DataContractError(
                    f"roles.list_id ({roles.list_id!r}) applies to ranking audits; this is a "
                    f"{task} audit"
                )
            lists = _list_ids(frame[roles.list_id], roles.list_id)
        groups = {a: _encode_group(frame[a], a, min_group_size) for a in roles.protected}
        probability = prediction = class_probability = None
        if roles.class_scores and task != "multiclass":
            raise DataContractError(
                "roles.class_scores (one probability column per class) applies to multiclass "
                f"audits; this is a {task} audit"
            )
        if task in ("regression", "ranking") and roles.score is not None:
            prediction = _check_scores(frame[roles.score], roles.score, st)
        elif task == "multiclass" and (roles.score is not None or roles.class_scores):
            assert roles.label is not None
            if roles.class_scores:
                class_probability = _class_probabilities(frame, roles.class_scores, classes)
                prediction = np.argmax(class_probability, axis=1).astype(np.int64)
            if roles.score is not None:
                prediction = _predicted_classes(
                    frame[roles.score], roles.score, roles.label, classes
                )
        elif roles.score is not None:
            probability = _check_scores(frame[roles.score], roles.score, st)
            prediction = positive_prediction(probability, t)
        weights = _check_weights(frame[roles.weight], roles.weight) if roles.weight else None
        return cls(
            frame=frame,
            roles=roles,
            label=label,
            probability=probability,
            prediction=prediction,
            groups=groups,
            weights=weights,
            score_type=st,
            threshold=t,
            positive_label=positive_label,
            feature_columns=tuple(features),
            task=task,
            classes=classes,
            lists=lists,
            class_probability=class_probability,
        )


def frame_fingerprint(frame: pd.DataFrame, columns: list[str]) -> str:
    """SHA-256 over column names, dtypes and row hashes (``pd.util.hash_pandas_object``)."""
    h = hashlib.sha256()
    for c in columns:
        col = frame[c]
        h.update(str(c).encode())
        h.update(str(col.dtype).encode())
        h.update(pd.util.hash_pandas_object(col, index=False).to_numpy().tobytes())
    return h.hexdigest()


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def class_text(value: Any) -> str:
    """A class as a multiclass audit names it: the text of the plain Python value (numpy
    scalars unwrapped), so a label 2, a predicted ``np.int64(2)`` and a YAML key ``2`` agree."""
    return str(_plain(value))


def _examples(values: pd.Series, k: int = 5, width: int = 40) -> str:
    """Up to ``k`` distinct values of one column for a message, each cut to ``width`` characters
    (a message shows a column's values, never a row of the file)."""
    shown = []
    for v in pd.unique(values.iloc[: 100 * k]).tolist()[:k]:
        text = repr(_plain(v))
        shown.append(text if len(text) <= width else text[: width - 1] + "…")
    return "[" + ", ".join(shown) + "]"


def _check_columns_exist(frame: pd.DataFrame, needed: list[str]) -> None:
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise DataContractError(
            f"missing column(s) {missing}; the table has columns {list(map(str, frame.columns))}"
        )


def _encode_label(col: pd.Series, name: str, positive_label: Any) -> np.ndarray:
    nulls = int(col.isna().sum())
    if nulls:
        raise DataContractError(
            f"label column {name!r} has {nulls} missing value(s) (first at row "
            f"{col.index[col.isna()][0]!r}); every row needs a label"
        )
    values = pd.unique(col)
    shown = sorted(map(repr, (_plain(v) for v in values)))[:6]
    if len(values) > 2:
        raise DataContractError(
            f"label column {name!r} must be binary; found {len(values)} distinct values "
            f"(e.g. {', '.join(shown)})"
        )
    is_pos = (col == positive_label).to_numpy(dtype=bool)
    if len(values) == 2 and not is_pos.any():
        raise DataContractError(
            f"label column {name!r} has values {', '.join(shown)} but positive_label="
            f"{positive_label!r} is not one of them; set positive_label"
        )
    return is_pos.astype(np.int8)


def _numeric_label(
    col: pd.Series, name: str, role: str, kind: str, problems: str, need: str, *, negative: bool
) -> np.ndarray:
    """A numeric label column (booleans count as 0/1) as float64, with no missing or infinite
    values (and, unless ``negative``, none below 0); errors name the column and its ``role``."""
    if not pd.api.types.is_numeric_dtype(col.dtype):
        raise DataContractError(
            f"label column {name!r} ({role}) must be numeric{kind}; found dtype {col.dtype} "
            f"(e.g. {_examples(col)})"
        )
    y = col.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(y) if negative else ~np.isfinite(y) | (y < 0)
    if bad.any():
        raise DataContractError(
            f"label column {name!r} ({role}) has {int(bad.sum())} {problems} value(s) (e.g. "
            f"{_examples(col[bad])}); {need}"
        )
    return y


def _encode_target(col: pd.Series, name: str) -> np.ndarray:
    """A regression target: numeric (booleans count as 0/1), no missing or infinite values."""
    return _numeric_label(
        col, name, "the target of a regression audit", "", "missing or infinite",
        "every row needs a target", negative=True,
    )  # fmt: skip


def _encode_relevance(col: pd.Series, name: str) -> np.ndarray:
    """A ranking's relevance labels: numeric (booleans count as 0/1), finite, non-negative."""
    return _numeric_label(
        col, name, "the relevance of a ranking audit", " (0/1 or graded)",
        "missing, infinite or negative",
        "relevance must be a finite number >= 0 (leave columns.label out to audit without "
        "relevance)",
        negative=False,
    )  # fmt: skip


def _list_ids(col: pd.Series, name: str) -> np.ndarray:
    """A ranking audit's list (query) ids: any values, none missing."""
    nulls = int(col.isna().sum())
    if nulls:
        raise DataContractError(
            f"list-id column {name!r} has {nulls} missing value(s) (first at row "
            f"{col.index[col.isna()][0]!r}); every item must belong to a list"
        )
    sizes = col.value_counts(sort=False)
    single = sizes[sizes < 2]
    if len(single):
        shown = ", ".join(repr(_plain(v)) for v in single.index[:5])
        raise DataContractError(
            f"list-id column {name!r}: {len(single)} list(s) hold a single item ({shown}"
            f"{', …' if len(single) > 5 else ''}); a ranking needs at least 2 items per list "
            "(drop those rows, or leave columns.list_id out to rank all rows as one list)"
        )
    return col.to_numpy()


def _encode_classes(col: pd.Series, name: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """A multiclass label: no missing values, at least two classes; codes in sorted order."""
    nulls = int(col.isna().sum())
    if nulls:
        raise DataContractError(
            f"label column {name!r} has {nulls} missing value(s) (first at row "
            f"{col.index[col.isna()][0]!r}); every row needs a class"
        )
    codes, uniques = pd.factorize(col, sort=True)
    classes = tuple(class_text(u) for u in uniques)
    if len(classes) < 2:
        raise DataContractError(
            f"label column {name!r} has a single class {classes[0]!r}; a multiclass audit "
            "needs at least two"
        )
    if len(set(classes)) != len(classes):
        raise DataContractError(
            f"label column {name!r} has distinct values with the same text {classes}; use one "
            "type per column"
        )
    return codes.astype(np.int64), classes


def _predicted_classes(
    col: pd.Series, name: str, label: str, classes: tuple[str, ...]
) -> np.ndarray:
    """Predicted classes as codes of the label's ``classes`` (compared as text); a missing
    value or a class the label never takes is an error naming them."""
    nulls = int(col.isna().sum())
    if nulls:
        raise DataContractError(f"score column {name!r} has {nulls} missing predicted class(es)")
    text = col.map(class_text)
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted(set(text.unique()) - set(index))
    if unknown:
        raise DataContractError(
            f"score column {name!r} predicts class(es) {unknown[:5]} that the label column "
            f"{label!r} never takes (its classes: {list(classes)[:10]})"
        )
    return text.map(index).to_numpy(dtype=np.int64)


def _class_probabilities(
    frame: pd.DataFrame, class_scores: tuple[tuple[str, str], ...], classes: tuple[str, ...]
) -> np.ndarray:
    """The (n, K) probability matrix of ``roles.class_scores``, columns in the order of the
    label's ``classes``: every class needs a column, a class the label never takes is an error,
    and each column must hold finite probabilities in [0, 1] whose row sums are 1 within
    ``ROW_SUM_TOLERANCE`` (the multiclass statistics' contract)."""
    given = dict(class_scores)
    missing = [c for c in classes if c not in given]
    unknown = [c for c in given if c not in classes]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"no column for class(es) {missing[:10]}")
        if unknown:
            parts.append(f"class(es) {unknown[:10]} that the label never takes")
        raise DataContractError(
            f"columns.class_scores must give one probability column per class of the label "
            f"(its classes: {list(classes)[:10]}): {'; '.join(parts)}"
        )
    columns = [
        _finite_numbers(frame[given[c]], f"class-score column {given[c]!r} (class {c!r})")
        for c in classes
    ]
    for c, values in zip(classes, columns, strict=True):
        outside = (values < 0) | (values > 1)
        if outside.any():
            raise DataContractError(
                f"class-score column {given[c]!r} (class {c!r}) must hold probabilities in "
                f"[0, 1]; {int(outside.sum())} value(s) are not (e.g. {values[outside][0]:.4g})"
            )
    matrix = np.column_stack(columns)
    off = np.abs(matrix.sum(axis=1) - 1.0) > ROW_SUM_TOLERANCE
    if off.any():
        r = int(np.flatnonzero(off)[0])
        raise DataContractError(
            f"the class-score columns {[given[c] for c in classes][:10]} must sum to 1 in every "
            f"row (within {ROW_SUM_TOLERANCE:g}); {int(off.sum())} row(s) do not, e.g. row "
            f"{frame.index[r]!r} sums to {matrix[r].sum():.6g}"
        )
    return matrix


def _encode_group(col: pd.Series, name: str, min_size: int) -> GroupEncoding:
    nulls = int(col.isna().sum())
    if nulls:
        raise DataContractError(
            f"protected attribute {name!r} has {nulls} missing value(s) (first at row "
            f"{col.index[col.isna()][0]!r}); fill or drop them before the audit"
        )
    if pd.api.types.is_float_dtype(col.dtype) and not np.all(np.mod(col.to_numpy(float), 1) == 0):
        raise DataContractError(
            f"protected attribute {name!r} is continuous (non-integer floats); bin it into "
            "groups first (e.g. pd.cut)"
        )
    codes, uniques = pd.factorize(col, sort=True)
    categories = tuple(str(_plain(u)) for u in uniques)
    if len(set(categories)) != len(categories):
        raise DataContractError(
            f"protected attribute {name!r} has distinct values with the same text "
            f"{categories}; use one type per column"
        )
    if len(categories) < 2:
        raise DataContractError(
            f"protected attribute {name!r} has a single value {categories[0]!r}; "
            "a fairness audit needs at least two groups"
        )
    enc = GroupEncoding(name, codes.astype(index_dtype(len(categories) - 1)), categories)
    sizes = enc.sizes()
    small = [f"{c!r} (n={int(n)})" for c, n in zip(categories, sizes, strict=True) if n < min_size]
    if small:
        raise DataContractError(
            f"protected attribute {name!r} has group(s) below the minimum size {min_size}: "
            f"{', '.join(small)}; merge small groups or lower validation.min_group_size"
        )
    return enc


def _finite_numbers(col: pd.Series, what: str) -> np.ndarray:
    """``col`` as float64; a non-numeric dtype or a missing/infinite value is an error naming
    ``what`` (e.g. "score column 'p'") with examples."""
    if not (pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype)):
        raise DataContractError(
            f"{what} must be numeric; found dtype {col.dtype} (e.g. {_examples(col)})"
        )
    s = col.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(s)
    if bad.any():
        raise DataContractError(
            f"{what} has {int(bad.sum())} missing or infinite value(s) (e.g. {_examples(col[bad])})"
        )
    return s


def _check_scores(col: pd.Series, name: str, score_type: ScoreType) -> np.ndarray:
    s = _finite_numbers(col, f"score column {name!r}")
    if score_type == "probability":
        out = (s < 0) | (s > 1)
        if out.any():
            raise DataContractError(
                f"score column {name!r} is declared score_type='probability' but "
                f"{int(out.sum())} value(s) lie outside [0, 1] (e.g. {_examples(col[out])}); "
                "use score_type='raw' for logits"
            )
    if score_type == "label":
        out = (s != 0) & (s != 1)
        if out.any():
            raise DataContractError(
                f"score column {name!r} is declared score_type='label' (hard 0/1 predictions) "
                f"but {int(out.sum())} value(s) are neither 0 nor 1 (e.g. {_examples(col[out])}); "
                "use score_type='probability' or 'raw' for scores"
            )
    return to_probability(s, score_type)


def _check_weights(col: pd.Series, name: str) -> np.ndarray:
    if not pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
        raise DataContractError(f"weight column {name!r} must be numeric; found dtype {col.dtype}")
    w = col.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        raise DataContractError(
            f"weight column {name!r} must be finite and non-negative; {int(bad.sum())} value(s) "
            f"are not (e.g. {_examples(col[bad])})"
        )
    if not w.sum() > 0:
        raise DataContractError(f"weight column {name!r} sums to zero")
    return w
