"""Where an audit's scores come from, and what a model's output is: probabilities or labels.

An audit needs one number per row that ranks the rows: the probability of the positive class
(``score_type: probability``), a logit (``raw``), or, when the user opts in, the model's hard
0/1 decision (``label``). A model can hand out any of these, so the audit first settles its
**score source** once (:class:`ScoreSource`) and every method then uses that same source: the
scored column, FlipTest's ``predict_proba``, the individual-fairness model and the mitigated
model (:func:`source_scores`).

The sources, best first:

* ``predict_proba`` — the underlying estimator's ``predict_proba`` (scikit-learn flavor,
  xgboost/lightgbm sklearn API), column of the positive class found through ``classes_``
  (:func:`positive_column`). Used even when the pyfunc serves ``predict`` (hard labels).
* ``pyfunc_output`` — what the MLflow pyfunc's ``predict`` returns, when that is a score per row
  or two class columns (a ``PythonModel`` returning probabilities, a torch module's logits,
  ``pyfunc_predict_fn="predict_proba"`` of a flavor without a raw estimator).
* ``label`` — the pyfunc's hard labels, mapped to 1{ŷ = positive label}; only with
  ``score_type: label``.
* ``data_column`` — a score column of the audit data (no model).

A model's output is read by :func:`classify_output`: strings, booleans and outputs with only
two distinct values or only integers are **labels**, which are an error unless ``score_type`` is
``label`` (ranking metrics such as the AUC are meaningless on them); a constant output is always
an error. The model's input columns come from its signature (:func:`match_schema`), with exact
dtype conversions only (:class:`Conversion`; MLflow 3.17 refuses int64 -> double unless the
values are 0/1, although every |x| ≤ 2^53 converts exactly).

Pure: numpy and pandas. MLflow models are used by duck typing (``predict``, ``get_raw_model``,
``metadata``), never imported here, so a served mitigated model can use this module too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from fairengine.errors import ModelLoadError

ScoreSourceKind = Literal["predict_proba", "pyfunc_output", "label", "data_column"]
SCORE_SOURCE_KINDS: tuple[str, ...] = ("predict_proba", "pyfunc_output", "label", "data_column")

#: How to log a scikit-learn classifier so that its pyfunc serves probabilities.
LOG_WITH_PROBABILITIES = (
    'mlflow.sklearn.log_model(clf, name="model", pyfunc_predict_fn="predict_proba")'
)

_MAX_SHOWN = 6


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _shown(values: Sequence[Any]) -> str:
    vals = [_plain(v) for v in values]
    text = ", ".join(repr(v) for v in vals[:_MAX_SHOWN])
    return f"[{text}{', …' if len(vals) > _MAX_SHOWN else ''}]"


def _matches(value: Any, positive_label: Any) -> bool:
    """``value == positive_label`` for plain scalars of any type (no numpy broadcasting)."""
    try:
        return bool(_plain(value) == positive_label)
    except Exception:  # exotic types that cannot be compared: not equal
        return False


# --------------------------------------------------------------------------- the score source
@dataclass(frozen=True)
class ScoreSource:
    """Where the audit's scores come from (module docstring); recorded in the result's model
    description and stated in the report.

    ``column``: the column of the positive class in a two-column output (``predict_proba`` or a
    pyfunc's), ``None`` for one score per row. ``positive_class``: the class (``classes_``
    entry, output column name or label value) that counts as positive. ``logit_difference``:
    a two-column raw output (two logits z0, z1) scored as z1 − z0, whose sigmoid is the softmax
    probability of class 1.
    """

    kind: ScoreSourceKind
    description: str
    score_type: str
    flavor: str | None = None
    estimator: str | None = None
    column: int | None = None
    positive_class: Any = None
    logit_difference: bool = False

    def __post_init__(self) -> None:
        if self.kind not in SCORE_SOURCE_KINDS:
            raise ModelLoadError(
                f"score source kind must be one of {list(SCORE_SOURCE_KINDS)}, got {self.kind!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["positive_class"] = _plain(self.positive_class)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScoreSource:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    @classmethod
    def from_data_column(cls, column: str, score_type: str) -> ScoreSource:
        """The scores are the audit data's column ``column`` (no model)."""
        what = "hard 0/1 predictions" if score_type == "label" else f"{score_type} scores"
        return cls("data_column", f"the data column {column!r} ({what})", score_type)


def positive_column(classes: Sequence[Any] | None, positive_label: Any, where: str) -> int:
    """Index of the positive class in ``classes`` (a fitted classifier's ``classes_``).

    The class equal to ``positive_label``; for classes [0, 1] without such a class (the data's
    labels are text but the model was trained on their 0/1 encoding) the class 1. Raises
    :class:`ModelLoadError` for a non-binary classifier or a positive label that is not a class.
    """
    cls = [0, 1] if classes is None else [_plain(c) for c in classes]
    if len(cls) != 2:
        raise ModelLoadError(
            f"{where} has {len(cls)} classes {_shown(cls)}; a fairness audit needs a binary "
            "classifier"
        )
    hits = [i for i, c in enumerate(cls) if _matches(c, positive_label)]
    if hits:
        return hits[0]
    if sorted(cls) == [0, 1]:
        return cls.index(1)
    raise ModelLoadError(
        f"positive_label {positive_label!r} is not one of the classes {_shown(cls)} of {where}; "
        "set positive_label to the class that means the positive outcome"
    )


# --------------------------------------------------------------------------- reading outputs
@dataclass(frozen=True)
class ModelOutput:
    """One score per row read from a model's output, and what it looks like.

    ``scores``: float per row (the positive class's column of a two-column output, or the
    logit difference); ``distinct``: up to a few distinct values, sorted; ``is_labels``: the
    output is hard labels (text, booleans, two distinct values or only integers).
    """

    scores: np.ndarray
    column: int | None
    column_name: Any
    n_distinct: int
    distinct: tuple[Any, ...]
    is_labels: bool
    logit_difference: bool = False
    text: bool = False


def _as_array(output: Any) -> tuple[np.ndarray, list[Any] | None]:
    names = None
    values: Any  # 1-d or 2-d, or whatever the model returned (np.asarray below)
    if isinstance(output, pd.DataFrame):
        names = list(output.columns)
        values = output.to_numpy()
    elif isinstance(output, pd.Series):
        values = output.to_numpy()
    elif isinstance(output, dict):  # a pyfunc may return {name: column}
        names = list(output)
        values = np.column_stack([np.asarray(v) for v in output.values()])
    else:
        values = output
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # a torch tensor
        values = values.detach().cpu().numpy()
    return np.asarray(values), names


def _numeric(arr: np.ndarray) -> np.ndarray | None:
    """``arr`` as floats, or ``None`` when it holds text (or other non-numbers)."""
    if arr.dtype.kind in "biuf":
        return arr.astype(np.float64)
    if arr.dtype.kind == "O":
        try:
            return (
                pd.to_numeric(pd.Series(arr.ravel()), errors="raise")
                .to_numpy(dtype=np.float64, na_value=np.nan)
                .reshape(arr.shape)
            )
        except (TypeError, ValueError):
            return None
    return None


def _few_distinct(values: np.ndarray) -> tuple[int, tuple[Any, ...]]:
    uniq = pd.unique(pd.Series(values.ravel()))
    try:
        uniq = np.sort(np.asarray(uniq))  # (np.sort converts an ExtensionArray the same way)
    except TypeError:  # mixed types
        pass
    return len(uniq), tuple(_plain(v) for v in uniq[: _MAX_SHOWN + 1])


def classify_output(
    output: Any,
    n_rows: int,
    *,
    score_type: str,
    positive_label: Any,
    what: str,
) -> ModelOutput:
    """Read a model's output (array, DataFrame, Series) as one score per row.

    Accepted shapes: (n,), (n, 1) and (n, 2) (two class columns: the column named
    ``positive_label`` if the output names its columns, else column 1). With ``score_type:
    raw`` two columns are two logits, scored z1 − z0. Raises :class:`ModelLoadError` naming
    ``what`` (e.g. "the pyfunc predict of the sklearn flavor") for any other shape, missing or
    infinite values, a constant output, and text outputs outside ``score_type: label``. Whether
    the values are labels is reported in ``is_labels``; the caller decides what to do with that.
    """
    arr, names = _as_array(output)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr, names = arr[:, 0], None
    if arr.ndim not in (1, 2) or (arr.ndim == 2 and arr.shape[1] != 2) or arr.shape[0] != n_rows:
        extra = " (a multi-class model?)" if arr.ndim == 2 and arr.shape[1] > 2 else ""
        raise ModelLoadError(
            f"{what} returned output of shape {arr.shape} for {n_rows} rows{extra}; expected one "
            "score per row or two class columns"
        )
    column = name = None
    if arr.ndim == 2:
        column = 1
        if names is not None:
            hits = [i for i, c in enumerate(names) if _matches(c, positive_label)]
            column = hits[0] if hits else 1
            name = _plain(names[column])
    numbers = _numeric(arr)
    if numbers is None or arr.dtype.kind == "b":  # text or booleans: labels
        picked = arr if column is None else arr[:, column]
        n_distinct, distinct = _few_distinct(picked)
        if n_distinct == 1:
            raise constant_output_error(what, distinct[0])
        return ModelOutput(
            np.full(n_rows, np.nan), column, name, n_distinct, distinct, True, text=True
        )
    logit_difference = False
    if column is None:
        scores = numbers
    elif score_type == "raw":
        looks_like_probs = np.all((numbers >= 0) & (numbers <= 1)) and np.allclose(
            numbers.sum(axis=1), 1.0
        )
        if looks_like_probs:
            raise ModelLoadError(
                f"{what} returned two columns that sum to 1 (class probabilities) but "
                "score_type is raw; set score_type: probability"
            )
        other = 1 - column
        scores, logit_difference = numbers[:, column] - numbers[:, other], True
    else:
        scores = numbers[:, column]
    bad = ~np.isfinite(scores)
    if bad.any():
        raise ModelLoadError(
            f"{what} returned {int(bad.sum())} missing or infinite score(s) for {n_rows} rows "
            f"(first at row {int(np.flatnonzero(bad)[0])})"
        )
    n_distinct, distinct = _few_distinct(scores)
    if n_distinct == 1:
        raise constant_output_error(what, distinct[0])
    integer_valued = bool(np.all(scores == np.round(scores)))
    if integer_valued:  # shown and matched as the integers they are
        distinct = tuple(int(v) for v in distinct)
    return ModelOutput(
        scores,
        column,
        name,
        n_distinct,
        distinct,
        n_distinct == 2 or integer_valued,
        logit_difference,
    )


def constant_output_error(what: str, value: Any) -> ModelLoadError:
    """The error for a model that gives every row the same output."""
    return ModelLoadError(
        f"{what} returned the same value {value!r} for every row: a constant model cannot be "
        "audited (every group gets the same prediction); check that the model and its input "
        "columns are the ones intended"
    )


def label_positive_value(values: Sequence[Any], positive_label: Any, what: str) -> Any:
    """The output value that means a positive prediction, for hard-label outputs.

    ``positive_label`` when it is one of the two values; for numeric 0/1 labels without it
    (the data's labels are text, the model predicts their 0/1 encoding) the value 1. Raises
    :class:`ModelLoadError` naming the values otherwise (more than two labels, or a positive
    label that is not among them).
    """
    vals = [_plain(v) for v in values]
    if len(vals) > 2:
        raise ModelLoadError(
            f"{what} returned more than two labels {_shown(vals)}; a fairness audit needs a "
            "binary classifier"
        )
    hits = [v for v in vals if _matches(v, positive_label)]
    if hits:
        return hits[0]
    if all(isinstance(v, int | float | bool) for v in vals) and set(vals) <= {0, 1}:
        return 1
    raise ModelLoadError(
        f"{what} returned the labels {_shown(vals)} and positive_label {positive_label!r} is not "
        "one of them; set positive_label to the label that means the positive outcome"
    )


def label_indicator(output: Any, positive_value: Any, n_rows: int, what: str) -> np.ndarray:
    """1.0 where the model's label equals ``positive_value``, else 0.0 (one per row)."""
    arr, _ = _as_array(output)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1 or arr.shape[0] != n_rows:
        raise ModelLoadError(
            f"{what} returned output of shape {arr.shape} for {n_rows} rows; expected one label "
            "per row"
        )
    values = pd.Series(arr)
    missing = values.isna()
    if missing.any():
        raise ModelLoadError(
            f"{what} returned {int(missing.sum())} missing label(s) for {n_rows} rows"
        )
    hit = values.map(lambda v: _matches(v, positive_value))
    return hit.to_numpy(dtype=np.float64)


def labels_error(values: Sequence[Any], what: str, how_to_fix: str, text: bool) -> ModelLoadError:
    """The error for a model whose output is hard labels while scores were asked for."""
    kind = "text labels" if text else "only the values"
    return ModelLoadError(
        f"{what} returned {kind} {_shown(values)}: hard class labels, not scores, so the AUC, "
        f"calibration and the threshold would be meaningless. {how_to_fix} To audit the hard "
        "predictions as they are, set score_type: label (AUC-type metrics are then not "
        "applicable)."
    )


# --------------------------------------------------------------------------- scoring with a source
def raw_model(model: Any) -> Any:
    """The object under an MLflow pyfunc (``get_raw_model()``), or ``model`` itself."""
    get = getattr(model, "get_raw_model", None)
    if callable(get):
        try:
            return get()
        except Exception:  # flavors without a raw model: the pyfunc is all there is
            return model
    return model


def source_scores(model: Any, source: ScoreSource, features: pd.DataFrame) -> np.ndarray:
    """The scores of ``features`` by ``source`` on its own scale (probability, logit or 0/1
    label), one float per row: what the audit, FlipTest, the black-box individual-fairness
    model and the mitigated model all call.

    ``model`` is the loaded MLflow pyfunc (or, for ``predict_proba``, anything whose raw model
    has ``predict_proba``); ``features`` are already the model's input columns
    (:meth:`ModelInput.prepare`).
    """
    n = len(features)
    what = f"the model ({source.description})"
    if source.kind == "data_column":
        raise ModelLoadError("a data-column score source has no model to score new rows with")
    if source.kind == "predict_proba":
        out = np.asarray(raw_model(model).predict_proba(features), dtype=np.float64)
        if out.ndim != 2 or out.shape[0] != n or source.column is None:
            raise ModelLoadError(f"{what} returned predict_proba of shape {out.shape} for {n} rows")
        return out[:, source.column]
    out = model.predict(features)
    if source.kind == "label":
        return label_indicator(out, source.positive_class, n, what)
    arr, _ = _as_array(out)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    numbers = _numeric(arr)
    if numbers is None or numbers.shape[0] != n:
        raise ModelLoadError(f"{what} returned output of shape {arr.shape} for {n} rows")
    if arr.ndim == 1:
        return numbers
    if source.column is None or arr.shape[1] != 2:
        raise ModelLoadError(f"{what} returned output of shape {arr.shape}; expected {n} scores")
    if source.logit_difference:
        return numbers[:, source.column] - numbers[:, 1 - source.column]
    return numbers[:, source.column]


# --------------------------------------------------------------------------- model input columns
_NUMERIC_TYPES: dict[str, np.dtype[Any]] = {
    "double": np.dtype(np.float64),
    "float": np.dtype(np.float32),
    "long": np.dtype(np.int64),
    "integer": np.dtype(np.int32),
}


@dataclass(frozen=True)
class InputColumn:
    """One column of a model signature: name, MLflow type name (``double``, ``long``,
    ``string``, …) and whether the model requires it."""

    name: str
    type: str
    required: bool = True


@dataclass(frozen=True)
class Conversion:
    """An exact dtype conversion of one audit column to the type the model's signature wants."""

    column: str
    from_dtype: str
    to_type: str

    def text(self) -> str:
        return f"{self.column}: {self.from_dtype} -> {self.to_type}"


def _is_text(col: pd.Series) -> bool:
    return pd.api.types.is_string_dtype(col.dtype) or pd.api.types.is_object_dtype(col.dtype)


def _convert(col: pd.Series, to_type: str) -> tuple[pd.Series | None, str | None]:
    """``col`` converted exactly to ``to_type``: (converted, None), (None, None) when it is
    already acceptable to MLflow as it is, or (None, reason) when no exact conversion exists."""
    dtype = col.dtype
    if to_type in _NUMERIC_TYPES:
        target = _NUMERIC_TYPES[to_type]
        if dtype == target:
            return None, None
        if pd.api.types.is_object_dtype(dtype):
            col = col.infer_objects()
            dtype = col.dtype
        if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
            return None, (
                f"a {dtype} column cannot become {to_type}; encode it as the model was trained "
                "(e.g. one-hot), or log the model as a Pipeline that encodes it"
            )
        has_na = bool(col.isna().any())
        if has_na and target.kind in "iu":
            n_na = int(col.isna().sum())
            return None, f"it has {n_na} missing value(s), which {to_type} cannot hold"
        if dtype.kind == "f" or has_na:
            values = col.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            values = col.to_numpy()
        if target.kind == "f" and dtype.kind == "f":
            converted = values.astype(target)
            if not np.array_equal(converted.astype(np.float64), values, equal_nan=True):
                return None, f"its values change when stored as {to_type}"
            return pd.Series(converted, index=col.index, name=col.name), None
        if target.kind == "f":  # integers to floating point: exact up to 2^53 (2^24)
            bits = 53 if target == np.float64 else 24
            finite = values[~np.isnan(values)] if has_na else values
            if finite.size and max(abs(int(finite.min())), abs(int(finite.max()))) > 2**bits:
                return None, f"values beyond ±2^{bits} are not exact as {to_type}"
            return pd.Series(values.astype(target), index=col.index, name=col.name), None
        info = np.iinfo(target)
        if dtype.kind == "f" and not np.all(values == np.round(values)):
            return None, f"it holds non-integer values, which {to_type} would truncate"
        if values.size and (int(values.min()) < info.min or int(values.max()) > info.max):
            return None, f"values outside [{info.min}, {info.max}] do not fit {to_type}"
        return pd.Series(values.astype(target), index=col.index, name=col.name), None
    if to_type == "string":
        if _is_text(col):
            return None, None
        if isinstance(dtype, pd.CategoricalDtype) and all(
            isinstance(c, str) for c in dtype.categories
        ):
            return col.astype(object), None
        return None, (f"a {dtype} column is not text; the model was trained on text in this column")
    if to_type == "boolean":
        if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
            return None, None
        return None, f"a {dtype} column is not boolean"
    return None, None  # datetime, binary, nested types: MLflow's own enforcement decides


@dataclass(frozen=True)
class SchemaMatch:
    """How the audit table meets a model signature: columns the model needs that the table
    lacks, table columns (without a role) the model does not take, exact conversions to make and
    conversions that would lose information (``column: from -> to: reason``)."""

    columns: tuple[str, ...]
    missing: tuple[str, ...]
    extra: tuple[str, ...]
    conversions: tuple[Conversion, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.problems


def match_schema(
    frame: pd.DataFrame, schema: Sequence[InputColumn], role_columns: Sequence[str]
) -> SchemaMatch:
    """Compare ``frame`` with the model's signature ``schema``.

    The model's inputs are the schema's columns (optional ones only when present). ``extra``
    lists the table's columns that play no role (``role_columns``) and are not inputs.
    """
    names = [c.name for c in schema]
    missing = tuple(c.name for c in schema if c.required and c.name not in frame.columns)
    roles = set(role_columns)
    extra = tuple(c for c in map(str, frame.columns) if c not in names and c not in roles)
    columns = tuple(c.name for c in schema if c.name in frame.columns)
    conversions: list[Conversion] = []
    problems: list[str] = []
    for spec in schema:
        if spec.name not in frame.columns:
            continue
        col = frame[spec.name]
        converted, reason = _convert(col, spec.type)
        if reason is not None:
            problems.append(f"{spec.name}: {col.dtype} -> {spec.type}: {reason}")
        elif converted is not None:
            conversions.append(Conversion(spec.name, str(col.dtype), spec.type))
    return SchemaMatch(columns, missing, extra, tuple(conversions), tuple(problems))


@dataclass(frozen=True)
class ModelInput:
    """The model's input columns, where they came from (``signature``, ``columns.features``,
    ``fitted``: the estimator's ``feature_names_in_``, or ``default``: every column without a
    role) and the exact conversions applied to them."""

    columns: tuple[str, ...]
    origin: Literal["signature", "columns.features", "fitted", "default"]
    conversions: tuple[Conversion, ...] = field(default=())

    def prepare(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame``'s input columns, in order, with the recorded conversions applied (each
        checked to be exact on these rows, e.g. FlipTest's mapped rows)."""
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise ModelLoadError(
                f"the model needs the input column(s) {missing}, which the rows given lack"
            )
        out = frame.loc[:, list(self.columns)]
        if not self.conversions:
            return out
        out = out.copy()
        for conv in self.conversions:
            converted, reason = _convert(out[conv.column], conv.to_type)
            if reason is not None:
                raise ModelLoadError(
                    f"model input {conv.column!r} cannot be converted to {conv.to_type}: {reason}"
                )
            if converted is not None:
                out[conv.column] = converted
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "origin": self.origin,
            "conversions": [asdict(c) for c in self.conversions],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelInput:
        return cls(
            tuple(d["columns"]),
            d["origin"],
            tuple(Conversion(**c) for c in d.get("conversions") or ()),
        )


def conversion_note(conversions: Sequence[Conversion]) -> str:
    """One warning line for the audit about exact conversions to the model's signature."""
    listed = ", ".join(c.text() for c in conversions)
    return (
        f"model input: converted {listed} as the model's signature asks (exact: every value is "
        "represented without change; MLflow itself refuses int64 -> double unless all values "
        "are 0/1)"
    )


# --------------------------------------------------------------------------- model handles
@dataclass(frozen=True)
class RawModelScores:
    """The audit's scoring function over a flavor's raw model (e.g. the scikit-learn estimator
    under an MLflow ``sklearn`` model whose scores are its ``predict_proba``): the same numbers
    as scoring through the pyfunc (:func:`source_scores` reads the raw model's ``predict_proba``
    either way), and a module-level object, so the copy FlipTest sends to its worker processes
    holds the estimator only: a worker unpickles it without importing MLflow (1.2 s of CPU
    each) or Prefect."""

    raw: Any
    source: ScoreSource
    model_input: ModelInput
    score_type: str

    def __call__(self, features: pd.DataFrame) -> np.ndarray:
        from fairengine.scores import to_probability

        scores = source_scores(self.raw, self.source, self.model_input.prepare(features))
        return to_probability(scores, self.score_type)  # type: ignore[arg-type]


class SourceProbability:
    """A black-box classifier over a score source: ``predict_proba(X)`` gives the ``(n, 2)``
    class probabilities [1 − p, p] with p the source's score mapped to a probability (a sigmoid
    for ``raw``), like a scikit-learn classifier. Used by the individual-fairness test for
    models whose only interface is the pyfunc."""

    def __init__(
        self,
        model: Any,
        source: ScoreSource,
        model_input: ModelInput,
        score_type: str,
        positive_label: Any = 1,
    ) -> None:
        self.model = model
        self.source = source
        self.model_input = model_input
        self.score_type = score_type
        # column 1 of predict_proba is the positive class, whatever positive_label is
        self.classes_ = np.array([f"not {positive_label!r}", positive_label], dtype=object)
        # named inputs: the individual-fairness test then passes DataFrames with these columns
        self.feature_names_in_ = np.asarray(model_input.columns, dtype=object)

    def predict_proba(self, features: pd.DataFrame) -> np.ndarray:
        from fairengine.scores import to_probability

        frame = (
            features
            if isinstance(features, pd.DataFrame)
            else pd.DataFrame(np.asarray(features), columns=list(self.model_input.columns))
        )
        p = to_probability(
            source_scores(self.model, self.source, self.model_input.prepare(frame)),
            self.score_type,  # type: ignore[arg-type]
        )
        return np.column_stack([1.0 - p, p])


class LabelOnlyModel:
    """The model behind a ``score_type: label`` audit: it gives hard labels only, so it has no
    ``predict_proba`` and no gradients; the individual-fairness test (which needs class
    probabilities for its loss) reports that instead of attacking a step function."""

    def __init__(self, source: ScoreSource) -> None:
        self.source = source

    def __repr__(self) -> str:
        return f"LabelOnlyModel({self.source.description})"


def probability_logit_module(module: Any, column: int | None) -> Any:
    """A torch module whose output is the logit log p − log(1 − p) of ``module``'s probability
    of class 1 (its only output, or output ``column``), for the individual-fairness test, which
    reads torch outputs as logits. p is clamped to [1e-12, 1 − 1e-12]."""
    import torch
    from torch import nn

    class _ProbabilityLogit(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            p = self.inner(x)
            if p.ndim == 2 and column is not None:
                p = p[:, column]
            p = p.reshape(-1).clamp(1e-12, 1 - 1e-12)
            return torch.log(p) - torch.log1p(-p)

    return _ProbabilityLogit(module)
