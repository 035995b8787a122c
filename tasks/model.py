"""Load the audited model from MLflow, settle where its scores come from, and score the data.

:func:`resolve_scores` is the audit flow's one call: it loads the model (``model.uri``), takes
its input columns from the model's signature (:func:`plan_model_input`), chooses the score
source (:func:`choose_score_source`: ``predict_proba`` of the underlying estimator when there is
one, else the pyfunc's output; hard labels only with ``score_type: label``), scores the data
and builds the handles every model-dependent method gets from that same source
(:func:`model_handles`). The pure rules (what counts as labels, exact dtype conversions, the
source itself) live in :mod:`fairengine.model_scores`; this module is the MLflow edge.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.config import AuditConfig
from fairengine.dataset import class_text
from fairengine.errors import ConfigError, ModelLoadError
from fairengine.model_scores import (
    LOG_WITH_PROBABILITIES,
    InputColumn,
    LabelOnlyModel,
    ModelInput,
    RawModelScores,
    ScoreSource,
    SourceProbability,
    classify_output,
    constant_output_error,
    conversion_note,
    label_indicator,
    label_positive_value,
    labels_error,
    match_schema,
    positive_column,
    probability_logit_module,
    raw_model,
    source_scores,
)
from fairengine.roles import ColumnRoles
from fairengine.scores import ROW_SUM_TOLERANCE, to_probability
from tasks.model_objects import object_fingerprint, object_model

SCORE_COLUMN = "_fairengine_score"
_REGISTRY_URI = re.compile(
    r"^models:/(?P<name>[^/@]+)(?:/(?P<version>[^/]+)|@(?P<alias>[^/]+))?/?$"
)
_SCHEMA_FAILURE = re.compile(
    r"^Failed to enforce schema of data '.*?' with schema '(?P<schema>.*?)'\. "
    r"Error: (?P<cause>.*)$",
    re.S,
)


def describe_model_uri(uri: str, tracking_uri: str) -> dict[str, Any]:
    """Name and version of a ``models:/name/version`` or ``models:/name@alias`` URI.

    The alias is resolved to its version in the registry. Other URIs (``runs:/``, paths, and
    MLflow 3's logged-model URIs ``models:/m-<id>`` that ``log_model`` returns) give
    ``name``/``version`` ``None``.
    """
    info: dict[str, Any] = {"uri": uri, "name": None, "version": None, "alias": None}
    m = _REGISTRY_URI.match(uri)
    if not m:
        return info
    if m["version"] is None and m["alias"] is None:  # models:/<model id>: not the registry
        return {**info, "model_id": m["name"]}
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    name, version, alias = m["name"], m["version"], m["alias"]
    try:
        if alias:
            mv = client.get_model_version_by_alias(name, alias)
        elif version and version.isdigit():
            mv = client.get_model_version(name, version)
        else:
            raise ModelLoadError(
                f"model URI {uri!r}: the part after the name must be a version number or "
                "'@alias' (models:/name/3 or models:/name@champion)"
            )
    except ModelLoadError:
        raise
    except Exception as exc:
        raise ModelLoadError(
            f"could not find model {uri!r} in the MLflow registry at {tracking_uri}: "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from None
    info.update(name=name, version=str(mv.version), alias=alias, run_id=mv.run_id)
    return info


def load_pyfunc(uri: str, tracking_uri: str) -> Any:
    """``mlflow.pyfunc.load_model(uri)`` with a readable error naming the URI.

    MLflow's load-time checks of the model's recorded requirements and Python version against
    this environment only produce warnings on its logger (0.4-1 s, one ``importlib.metadata``
    lookup per requirement); they are skipped when that logger drops warnings anyway (the CLI
    without ``--debug`` sets ``MLFLOW_LOGGING_LEVEL=ERROR``).
    """
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    quiet = not logging.getLogger("mlflow").isEnabledFor(logging.WARNING)
    try:
        return mlflow.pyfunc.load_model(uri, suppress_warnings=quiet)
    except Exception as exc:
        raise ModelLoadError(
            f"could not load model {uri!r} (tracking store {tracking_uri}): "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (for one-line user-facing errors)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def mlflow_cause(exc: BaseException) -> str:
    """An exception's whole message; for MLflow's schema-enforcement failure, its cause and the
    schema, without the dump of the input rows that MLflow puts in front of them."""
    text = str(exc).strip()
    m = _SCHEMA_FAILURE.match(text)
    if m:
        return f"{m['cause'].strip()} (model input schema: {m['schema']})"
    return f"{type(exc).__name__}: {text}"


# --------------------------------------------------------------------------- what the model is
def model_flavor(pyfunc: Any) -> str:
    """The flavor whose loader serves the pyfunc: ``sklearn``, ``pytorch``, ``xgboost``, …;
    ``python_function`` for a custom ``PythonModel``."""
    loader = str(getattr(pyfunc, "loader_module", None) or "")
    if loader in ("mlflow.pyfunc.model", ""):
        return "python_function"
    return loader.removeprefix("mlflow.")


def pyfunc_predict_fn(pyfunc: Any) -> str:
    """The method the pyfunc's ``predict`` calls (``pyfunc_predict_fn`` at logging time)."""
    try:
        return str(pyfunc.metadata.flavors["python_function"].get("predict_fn") or "predict")
    except Exception:  # no metadata: the default
        return "predict"


def _underlying(pyfunc: Any, flavor: str) -> Any:
    """The flavor's raw model, or ``None`` for a custom pyfunc (whose ``predict`` is the model:
    an attribute such as ``.model`` inside it is not what the pyfunc serves)."""
    if flavor == "python_function":
        return None
    raw = raw_model(pyfunc)
    return None if raw is pyfunc else raw


def _estimator_name(raw: Any) -> str:
    steps = getattr(raw, "steps", None)
    if steps:
        return f"Pipeline[{type(steps[-1][1]).__name__}]"
    return type(raw).__name__


def _model_name(pyfunc: Any, flavor: str, raw: Any) -> tuple[str, str | None]:
    """("the sklearn flavor's LogisticRegression", "LogisticRegression") and the like; a
    Python object (:mod:`tasks.model_objects`) is "the Python model <name>"."""
    given = getattr(pyfunc, "object_name", None)
    if isinstance(given, str):
        return f"the Python model {given}", given
    if raw is not None:
        name = _estimator_name(raw)
        return f"the {flavor} flavor's {name}", name
    if flavor == "python_function":
        try:
            name = type(pyfunc.unwrap_python_model()).__name__
            return f"the custom pyfunc {name}", name
        except Exception:  # not a PythonModel
            pass
    return f"the {flavor} pyfunc", None


def _is_torch_module(obj: Any) -> bool:
    """Whether ``obj`` is a torch module (without importing torch when nothing loaded it)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


# --------------------------------------------------------------------------- input columns
def input_schema(pyfunc: Any) -> list[InputColumn] | None:
    """The named columns of the model's input signature; ``None`` without a signature or for a
    tensor signature (no column names)."""
    try:
        schema = pyfunc.metadata.get_input_schema()
    except Exception:  # no metadata
        return None
    if schema is None or schema.is_tensor_spec() or not schema.has_input_names():
        return None
    out = []
    for spec in schema.inputs:
        t = spec.type
        out.append(InputColumn(str(spec.name), str(getattr(t, "name", t)), bool(spec.required)))
    return out


def plan_model_input(
    pyfunc: Any,
    frame: pd.DataFrame,
    roles: ColumnRoles,
    features: list[str] | None = None,
) -> tuple[ModelInput, list[str]]:
    """The model's input columns and the audit's notes about them.

    With a signature: its columns (protected attributes included when the model takes them;
    the label and score never), with exact dtype conversions where the table's dtype differs
    (:func:`fairengine.model_scores.match_schema`); ``columns.features`` (``features``), if
    given, must name the same columns. A mismatch raises :class:`ModelLoadError` naming the
    missing and extra columns and the conversions, with MLflow's own message. Without a
    signature: ``columns.features``, else the columns the estimator was fitted on
    (``feature_names_in_``: scikit-learn estimators and pipelines fitted on a DataFrame), else
    every column without a role.
    """
    columns = [c for c in frame.columns if c != SCORE_COLUMN]
    schema = input_schema(pyfunc)
    fitted = getattr(_underlying(pyfunc, model_flavor(pyfunc)), "feature_names_in_", None)
    if schema is None and features is None and fitted is not None:
        return _fitted_input([str(c) for c in fitted], frame, roles), []
    if schema is None:
        chosen = roles.feature_columns(columns)
        origin = "columns.features" if roles.features is not None else "default"
        missing = [c for c in chosen if c not in frame.columns]
        if missing:
            raise ModelLoadError(
                f"the model needs feature column(s) {missing} that the data does not have "
                f"(columns.features); the data has {columns}"
            )
        if fitted is not None and sorted(map(str, fitted)) == sorted(chosen):
            chosen = [str(c) for c in fitted]  # the same columns, in the order it was fitted on
        return ModelInput(tuple(chosen), origin), []  # type: ignore[arg-type]
    names = [c.name for c in schema]
    forbidden = [c for c in (roles.label, roles.score) if c is not None and c in names]
    if forbidden:
        raise ModelLoadError(
            f"the model's signature takes {forbidden} as input, but those columns are the "
            "audit's label/score; a model must not see the outcome it predicts"
        )
    match = match_schema(frame.loc[:, columns], schema, roles.role_columns())
    if not match.ok:
        raise ModelLoadError(_mismatch_message(pyfunc, frame, match, roles))
    if features is not None and set(features) != set(match.columns):
        raise ModelLoadError(
            f"columns.features {list(features)} differs from the model's signature "
            f"{list(match.columns)} (not in the signature: "
            f"{[c for c in features if c not in match.columns]}; in the signature but not in "
            f"columns.features: {[c for c in match.columns if c not in features]}); the model "
            "takes exactly its signature's columns: remove columns.features or make it match"
        )
    notes = [conversion_note(match.conversions)] if match.conversions else []
    return ModelInput(match.columns, "signature", match.conversions), notes


def _fitted_input(names: list[str], frame: pd.DataFrame, roles: ColumnRoles) -> ModelInput:
    """The columns a model without a signature was fitted on (scikit-learn's
    ``feature_names_in_``, set when it was fitted on a DataFrame), checked against the data: as
    with a signature, a protected attribute the model takes is passed, the label and the score
    never."""
    forbidden = [c for c in (roles.label, roles.score) if c is not None and c in names]
    if forbidden:
        raise ModelLoadError(
            f"the model was fitted on {forbidden} (feature_names_in_), but those columns are the "
            "audit's label/score; a model must not see the outcome it predicts"
        )
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise ModelLoadError(
            f"the model was fitted on the column(s) {missing} (feature_names_in_), which the "
            f"data does not have; the data has {[str(c) for c in frame.columns]}"
        )
    return ModelInput(tuple(names), "fitted")


def _mismatch_message(pyfunc: Any, frame: pd.DataFrame, match: Any, roles: ColumnRoles) -> str:
    parts = ["the audit data does not match the model's input signature:"]
    if match.missing:
        parts.append(f"missing column(s) {list(match.missing)} (the model needs them);")
    if match.extra:
        parts.append(
            f"the data has other column(s) without a role {list(match.extra)} that the model "
            "does not take (a renamed or differently encoded column?);"
        )
    if match.problems:
        parts.append(
            "dtype conversion(s) needed that are not exact: " + "; ".join(match.problems) + "."
        )
    if match.conversions:
        exact = ", ".join(c.text() for c in match.conversions)
        parts.append(f"Exact dtype conversion(s) the audit makes itself: {exact}.")
    parts.append(
        "Give the model the columns it was trained on (the protected attributes "
        f"{list(roles.protected)} are passed when the signature names them)."
    )
    # what MLflow itself says about the same input (without the rows it would print)
    given = [c for c in frame.columns if c in match.columns or c in match.extra]
    try:
        pyfunc.predict(frame.loc[:, given].head(20))
    except Exception as exc:
        parts.append(f"MLflow: {mlflow_cause(exc)}")
    return " ".join(parts)


def _scoring_failure(exc: BaseException, model_input: ModelInput, raw: Any) -> ModelLoadError:
    """The error for a model that raised while scoring the audit rows, with the whole cause and
    what to set when the input columns were a guess (no signature)."""
    cols = list(model_input.columns)
    msg = f"the model could not score the audit data (input columns {cols}): {mlflow_cause(exc)}"
    if model_input.origin != "signature":
        fitted = getattr(raw, "feature_names_in_", None)
        msg += (
            ". The model has no signature, so the audit gave it "
            + (
                "every column without a role (protected attributes, label and weight left out)"
                if model_input.origin == "default"
                else "columns.features"
            )
            + ". If it takes other columns (e.g. the protected attributes), list its inputs in "
            "columns.features, or log the model with a signature "
            "(mlflow.sklearn.log_model(clf, name=..., input_example=X.head()))"
        )
        if fitted is not None:
            msg += f"; the model was fitted on the columns {list(map(str, fitted))}"
    return ModelLoadError(msg)


# --------------------------------------------------------------------------- the score source
@dataclass(frozen=True)
class ClassProbability:
    """A multiclass model's (n, K) class probabilities and the class of each column (as text,
    :func:`fairengine.dataset.class_text`)."""

    classes: tuple[str, ...]
    matrix: np.ndarray


@dataclass(frozen=True)
class ModelScores:
    """The audit rows' scores (on ``score_type``'s scale), their source and notes; a multiclass
    model's class probabilities when it has them."""

    scores: np.ndarray
    source: ScoreSource
    warnings: tuple[str, ...] = ()
    class_probability: ClassProbability | None = None


def choose_score_source(
    pyfunc: Any,
    frame: pd.DataFrame,
    model_input: ModelInput,
    score_type: str,
    positive_label: Any,
    task: str = "binary",
) -> ModelScores:
    """Settle the score source of ``pyfunc`` and score the rows of ``frame`` (its
    ``model_input`` columns) with it.

    1. ``score_type`` probability/raw and a raw estimator with ``predict_proba`` (scikit-learn
       flavor, xgboost/lightgbm sklearn API): its column for ``positive_label`` (``classes_``).
    2. Else the pyfunc's ``predict``: one score per row or two class columns are scores; labels
       (text, booleans, two distinct values, only integers) are a :class:`ModelLoadError` that
       says how to log the model with probabilities, unless ``score_type`` is ``label``.
    3. ``score_type: label``: the pyfunc's labels as 1{ŷ = positive label}; scores are an error.

    A constant output is always an error.
    """
    flavor = model_flavor(pyfunc)
    predict_fn = pyfunc_predict_fn(pyfunc)
    raw = _underlying(pyfunc, flavor)
    name, estimator = _model_name(pyfunc, flavor, raw)
    features = model_input.prepare(frame)
    n = len(features)
    notes: list[str] = []
    if score_type == "value" and task == "ranking" and _has_proba(raw):
        return _ranking_probabilities(pyfunc, features, model_input, raw, name, flavor, estimator)
    if score_type == "value":
        return _regression_predictions(
            pyfunc, features, model_input, raw, name, flavor, estimator, task
        )
    if score_type == "class":
        return _predicted_classes(pyfunc, features, model_input, raw, name, flavor, estimator)
    if (
        score_type != "label"
        and raw is not None
        and not _is_torch_module(raw)
        and hasattr(raw, "predict_proba")
    ):
        if score_type == "raw":
            raise ModelLoadError(
                f"score_type is raw (logits), but {name} gives probabilities (predict_proba), "
                "which the audit uses; set score_type: probability"
            )
        where = f"{name} (model.uri)"
        col = positive_column(getattr(raw, "classes_", None), positive_label, where)
        classes = getattr(raw, "classes_", None)
        cls = col if classes is None else classes[col]
        cls = cls.item() if isinstance(cls, np.generic) else cls
        served = (
            "; its pyfunc predict serves hard labels, so the audit calls predict_proba"
            if predict_fn == "predict"
            else f" (pyfunc_predict_fn={predict_fn!r})"
        )
        source = ScoreSource(
            "predict_proba",
            f"predict_proba of {name}, column {col} (class {cls!r}){served}",
            score_type,
            flavor=flavor,
            estimator=estimator,
            column=col,
            positive_class=cls,
        )
        try:
            scores = source_scores(pyfunc, source, features)
        except ModelLoadError:
            raise
        except Exception as exc:
            raise _scoring_failure(exc, model_input, raw) from None
        out = classify_output(
            scores, n, score_type="probability", positive_label=positive_label,
            what=f"predict_proba of {name}",
        )  # fmt: skip
        if out.is_labels:
            notes.append(
                f"predict_proba of {name} takes only the values {list(out.distinct)} on the "
                "audit data: its probabilities are hard labels (an unpruned tree?), so AUC-type "
                "metrics describe labels"
            )
        return ModelScores(scores, source, tuple(notes))

    what = f"the pyfunc predict of {name}"
    try:
        output = pyfunc.predict(features)
    except Exception as exc:
        raise _scoring_failure(exc, model_input, raw) from None
    out = classify_output(
        output, n, score_type=score_type, positive_label=positive_label, what=what
    )
    if score_type == "label":
        if not out.is_labels:
            raise ModelLoadError(
                f"score_type is label, but {what} returned {out.n_distinct} distinct scores "
                f"(e.g. {list(out.distinct)[:4]}), not hard labels; set score_type: probability "
                "(or raw) to audit the scores"
            )
        positive = label_positive_value(out.distinct, positive_label, what)
        source = ScoreSource(
            "label",
            f"hard labels from {what}, 1 = {positive!r} (score_type: label; threshold not used)",
            score_type,
            flavor=flavor,
            estimator=estimator,
            positive_class=positive,
        )
        return ModelScores(label_indicator(output, positive, n, what), source)
    if out.is_labels:
        raise labels_error(out.distinct, what, _how_to_serve_probabilities(flavor, raw), out.text)
    if score_type == "probability":
        outside = (out.scores < 0) | (out.scores > 1)
        if outside.any():
            raise ModelLoadError(
                f"{what} returned {int(outside.sum())} value(s) outside [0, 1] (from "
                f"{out.scores.min():.4g} to {out.scores.max():.4g}) with score_type probability; "
                "if they are logits, set score_type: raw"
            )
    shape = (
        f"column {out.column}"
        + (f" ({out.column_name!r})" if out.column_name is not None else "")
        + (" minus the other column (two logits)" if out.logit_difference else "")
        + " of two"
        if out.column is not None
        else "one score per row"
    )
    source = ScoreSource(
        "pyfunc_output",
        f"output of {what}, {shape} ({score_type})",
        score_type,
        flavor=flavor,
        estimator=estimator,
        column=out.column,
        positive_class=out.column_name,
        logit_difference=out.logit_difference,
    )
    return ModelScores(out.scores, source, tuple(notes))


def _has_proba(raw: Any) -> bool:
    return raw is not None and not _is_torch_module(raw) and hasattr(raw, "predict_proba")


def _ranking_probabilities(
    pyfunc: Any,
    features: pd.DataFrame,
    model_input: ModelInput,
    raw: Any,
    name: str,
    flavor: str,
    estimator: str | None,
) -> ModelScores:
    """A ranking by a binary classifier: its probability of the second class of ``classes_``
    (scikit-learn's positive class), never its hard labels (which would tie every item)."""
    classes = list(getattr(raw, "classes_", []))
    if len(classes) != 2:
        raise ModelLoadError(
            f"task: ranking ranks items by a score; {name} is a classifier with "
            f"{len(classes)} classes {classes[:6]}: rank by a score column (columns.score) or "
            "give a regressor or a binary classifier"
        )
    cls = classes[1].item() if isinstance(classes[1], np.generic) else classes[1]
    source = ScoreSource(
        "predict_proba",
        f"predict_proba of {name}, column 1 (class {cls!r}), the ranking score",
        "value",
        flavor=flavor,
        estimator=estimator,
        column=1,
        positive_class=cls,
    )
    try:
        scores = np.asarray(source_scores(pyfunc, source, features), dtype=np.float64)
    except ModelLoadError:
        raise
    except Exception as exc:
        raise _scoring_failure(exc, model_input, raw) from None
    if len(scores) > 1 and np.all(scores == scores[0]):
        raise constant_output_error(f"predict_proba of {name}", scores[0])
    return ModelScores(scores, source)


def _regression_predictions(
    pyfunc: Any,
    features: pd.DataFrame,
    model_input: ModelInput,
    raw: Any,
    name: str,
    flavor: str,
    estimator: str | None,
    task: str = "regression",
) -> ModelScores:
    """A regression audit's predictions (or a ranking's scores): the pyfunc's ``predict``, one
    finite number per row (shape (n,) or (n, 1)); anything else is a :class:`ModelLoadError`
    saying what came back."""
    what = f"the pyfunc predict of {name}"
    try:
        output = pyfunc.predict(features)
    except Exception as exc:
        raise _scoring_failure(exc, model_input, raw) from None
    values = output.to_numpy() if hasattr(output, "to_numpy") else output
    arr = np.asarray(values)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    n = len(features)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ModelLoadError(
            f"task: {task} needs one prediction per row, but {what} returned shape "
            f"{arr.shape} for {n} rows"
        )
    if not (np.issubdtype(arr.dtype, np.number) and not np.issubdtype(arr.dtype, np.bool_)):
        raise ModelLoadError(
            f"task: {task} needs numeric predictions, but {what} returned values of type "
            f"{arr.dtype} (e.g. {list(arr[:3])}); is this a classifier?"
        )
    pred = arr.astype(np.float64)
    bad = ~np.isfinite(pred)
    if bad.any():
        raise ModelLoadError(f"{what} returned {int(bad.sum())} missing or infinite prediction(s)")
    if n > 1 and np.all(pred == pred[0]):
        raise constant_output_error(what, pred[0])
    source = ScoreSource(
        "pyfunc_output",
        f"output of {what}, one prediction per row ({task})",
        "value",
        flavor=flavor,
        estimator=estimator,
    )
    return ModelScores(pred, source)


def _predicted_classes(
    pyfunc: Any,
    features: pd.DataFrame,
    model_input: ModelInput,
    raw: Any,
    name: str,
    flavor: str,
    estimator: str | None,
) -> ModelScores:
    """A multiclass audit's predictions: the pyfunc's ``predict``, one class per row (shape
    (n,) or (n, 1)), and the estimator's ``predict_proba`` (columns named by ``classes_``) when
    it has one; or, when the pyfunc serves an (n, K) probability matrix (logged with
    ``pyfunc_predict_fn="predict_proba"``), that matrix and its most probable class per row
    (``classes_`` names the columns). The dataset checks the classes against the label's."""
    what = f"the pyfunc predict of {name}"
    try:
        output = pyfunc.predict(features)
    except Exception as exc:
        raise _scoring_failure(exc, model_input, raw) from None
    values = output.to_numpy() if hasattr(output, "to_numpy") else output
    arr = np.asarray(values)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    n = len(features)
    classes = _class_names(raw)
    if arr.ndim == 2 and arr.shape[0] == n and arr.shape[1] > 1:
        if classes is None or len(classes) != arr.shape[1]:
            raise ModelLoadError(
                f"task: multiclass: {what} returned a matrix of shape {arr.shape} (class "
                "probabilities?) and the model does not name its columns (no classes_ of "
                f"{arr.shape[1]} classes): log it so that its pyfunc predicts classes "
                "(mlflow.sklearn.log_model's default), or give the probabilities as data columns "
                "(columns.class_scores)"
            )
        matrix = _probability_matrix(arr, what)
        source = ScoreSource(
            "pyfunc_output",
            f"output of {what}: class probabilities ({len(classes)} columns), the predicted "
            "class their most probable one (multiclass)",
            "class",
            flavor=flavor,
            estimator=estimator,
        )
        predicted = np.asarray(classes, dtype=object)[np.argmax(matrix, axis=1)]
        return ModelScores(predicted, source, (), ClassProbability(classes, matrix))
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ModelLoadError(
            f"task: multiclass needs one predicted class per row, but {what} returned shape "
            f"{arr.shape} for {n} rows"
        )
    probability = None
    notes: tuple[str, ...] = ()
    if classes is not None and _has_proba(raw):
        try:
            matrix = _probability_matrix(np.asarray(raw.predict_proba(features)), "predict_proba")
        except (ModelLoadError, ValueError, TypeError, AttributeError) as exc:
            notes = (f"class probabilities not available from predict_proba of {name}: {exc}",)
        else:
            if matrix.shape == (n, len(classes)):
                probability = ClassProbability(classes, matrix)
    detail = f"; class probabilities from predict_proba of {name}" if probability else ""
    source = ScoreSource(
        "pyfunc_output",
        f"output of {what}, one predicted class per row (multiclass){detail}",
        "class",
        flavor=flavor,
        estimator=estimator,
    )
    return ModelScores(arr, source, notes, probability)


def served_classes(output: Any, raw: Any) -> np.ndarray:
    """A multiclass pyfunc's output as one class per row: its classes as they are, or, for a
    pyfunc serving class probabilities (n, K), the class (``classes_``) of each row's most
    probable column (as :func:`_predicted_classes` reads it for the audit's rows)."""
    values = output.to_numpy() if hasattr(output, "to_numpy") else output
    arr = np.asarray(values)
    if arr.ndim == 2 and arr.shape[1] == 1:
        return arr[:, 0]
    classes = _class_names(raw)
    if arr.ndim == 2 and classes is not None and len(classes) == arr.shape[1]:
        return np.asarray(classes, dtype=object)[np.argmax(arr, axis=1)]
    return arr


def _class_names(raw: Any) -> tuple[str, ...] | None:
    """The estimator's ``classes_`` as class text, or None when it has none."""
    classes = getattr(raw, "classes_", None) if raw is not None else None
    if classes is None or _is_torch_module(raw):
        return None
    return tuple(class_text(c) for c in list(classes))


def _probability_matrix(arr: np.ndarray, what: str) -> np.ndarray:
    """``arr`` as float64 class probabilities: finite, in [0, 1], rows summing to 1."""
    try:
        matrix = np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError):
        raise ModelLoadError(f"{what} returned non-numeric class probabilities") from None
    if not np.all(np.isfinite(matrix)) or matrix.min() < 0 or matrix.max() > 1:
        raise ModelLoadError(f"{what} returned values outside [0, 1] as class probabilities")
    if np.any(np.abs(matrix.sum(axis=1) - 1.0) > ROW_SUM_TOLERANCE):
        raise ModelLoadError(f"{what} returned class probabilities whose rows do not sum to 1")
    return matrix


def _how_to_serve_probabilities(flavor: str, raw: Any) -> str:
    if flavor == "sklearn" and raw is not None:
        return (
            f"The estimator {_estimator_name(raw)} has no predict_proba: use a classifier that "
            "has one (e.g. SVC(probability=True) or CalibratedClassifierCV) and log it with "
            f"{LOG_WITH_PROBABILITIES}."
        )
    return (
        "Log the model so that its pyfunc serves the probability of the positive class: a "
        f"scikit-learn classifier with {LOG_WITH_PROBABILITIES}, or a PythonModel whose predict "
        "returns P(y=1) per row (or two class columns)."
    )


@task(name="score-data", cache_policy=NO_CACHE)
def score_data(
    pyfunc: Any,
    frame: pd.DataFrame,
    model_input: ModelInput,
    score_type: str,
    positive_label: Any,
    task: str = "binary",
) -> ModelScores:
    """Score the audit rows with the model (:func:`choose_score_source`)."""
    result = choose_score_source(pyfunc, frame, model_input, score_type, positive_label, task)
    get_run_logger().info(
        "Scored %d rows with the model: %s", len(frame), result.source.description
    )
    return result


@task(name="load-model", cache_policy=NO_CACHE)
def load_model(uri: str, tracking_uri: str) -> tuple[Any, dict[str, Any]]:
    """Resolve and load the model; returns the pyfunc model and its registry description."""
    info = describe_model_uri(uri, tracking_uri)
    model = load_pyfunc(uri, tracking_uri)
    get_run_logger().info("Loaded model %s (version %s)", uri, info.get("version"))
    return model, info


@task(name="describe-model-object", cache_policy=NO_CACHE)
def describe_object_model(obj: Any) -> tuple[Any, dict[str, Any]]:
    """A Python model object as a pyfunc and its description: ``uri`` ``python:<name>`` (no
    registry identity) and its content ``fingerprint`` (the cache keys' model identity)."""
    pyfunc = object_model(obj)
    name = getattr(pyfunc, "object_name", None) or type(raw_model(pyfunc)).__name__
    info = {"uri": f"python:{name}", "name": None, "version": None, "alias": None}
    info["fingerprint"] = object_fingerprint(obj)
    get_run_logger().info("Scoring with the Python model %s", name)
    return pyfunc, info


# --------------------------------------------------------------------------- handles
@dataclass(frozen=True)
class ModelHandles:
    """What the model-dependent methods receive, all from one :class:`ScoreSource`.

    ``predict_proba``: a function of a feature frame returning P(y=1) per row (FlipTest); in a
    regression audit the prediction, in a multiclass audit the predicted class.
    ``model``: for the individual-fairness test, the estimator whose ``predict_proba`` is the
    source (converted to torch there), the torch module of a pytorch model (its output read as
    logits), a black-box :class:`~fairengine.model_scores.SourceProbability` over the pyfunc
    otherwise, or a :class:`~fairengine.model_scores.LabelOnlyModel` for hard labels.
    """

    predict_proba: Callable[[pd.DataFrame], np.ndarray]
    model: Any
    source: ScoreSource

    def get(self, name: str) -> Any:
        """The handle a method asks for by name (``flows/method_steps.py``)."""
        return {"predict_proba": self.predict_proba, "model": self.model}.get(name)


def model_handles(
    pyfunc: Any,
    source: ScoreSource,
    model_input: ModelInput,
    score_type: str,
    positive_label: Any = 1,
) -> ModelHandles:
    """The handles of every model-dependent method, from the audit's score source."""

    def through_pyfunc(features: pd.DataFrame) -> np.ndarray:
        prepared = model_input.prepare(features)
        if score_type == "class":  # a multiclass model's predicted classes, as it returns them
            return served_classes(pyfunc.predict(prepared), raw)
        scores = source_scores(pyfunc, source, prepared)
        return to_probability(scores, score_type)  # type: ignore[arg-type]

    model: Any
    raw = _underlying(pyfunc, source.flavor or "python_function")
    predict_proba: Callable[[pd.DataFrame], np.ndarray] = through_pyfunc
    if source.kind == "predict_proba" and raw is not None and score_type not in ("value", "class"):
        # the raw estimator's predict_proba, as through the pyfunc: the handle pickles without
        # MLflow and Prefect (FlipTest sends it to its worker processes)
        predict_proba = RawModelScores(raw, source, model_input, score_type)
    if score_type in ("value", "class"):  # regression/multiclass: its own object
        model = raw if raw is not None else pyfunc
    elif source.kind == "label":
        model = LabelOnlyModel(source)
    elif source.kind == "predict_proba":
        model = raw
    elif raw is not None and _is_torch_module(raw):
        model = raw if score_type == "raw" else probability_logit_module(raw, source.column)
    else:
        model = SourceProbability(pyfunc, source, model_input, score_type, positive_label)
    return ModelHandles(predict_proba, model, source)


# --------------------------------------------------------------------------- the flow's call
@dataclass
class ScoredData:
    """The audit's scores settled: the table (with ``_fairengine_score`` when a model scored
    it), the roles (score and model features set), the model handles (``None`` for a data
    column), the model description for the result, and notes for the audit's warnings."""

    frame: pd.DataFrame
    roles: ColumnRoles
    handles: ModelHandles | None
    model_info: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def attach_class_probability(
    frame: pd.DataFrame, probability: ClassProbability | None, roles: ColumnRoles
) -> tuple[tuple[tuple[str, str], ...] | None, list[str]]:
    """A multiclass model's class probabilities as columns ``_fairengine_score[<class>]`` of
    ``frame`` (in place) and the ``class_scores`` role naming them, when the model's classes
    are the label's; else no columns and a note saying why the probabilities are not used."""
    if probability is None or roles.label is None:
        return None, []
    label = {class_text(v) for v in pd.unique(frame[roles.label].dropna())}
    if label != set(probability.classes):
        return None, [
            f"the model's class probabilities are not used: its classes "
            f"{list(probability.classes)[:10]} are not the label's {sorted(label)[:10]}"
        ]
    pairs = tuple((c, f"{SCORE_COLUMN}[{c}]") for c in probability.classes)
    for k, (_, column) in enumerate(pairs):
        frame[column] = probability.matrix[:, k]
    return pairs, []


def _run_plain(step: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    del step
    return fn(*args, **kwargs)


def resolve_scores(
    cfg: AuditConfig,
    frame: pd.DataFrame,
    roles: ColumnRoles,
    tracking_uri: str,
    timed: Callable[..., Any] = _run_plain,
    model_object: Any = None,
) -> ScoredData:
    """Where the audit's scores come from, settled once (module docstring).

    ``model.uri`` (or ``model_object``, a Python model given to ``fairengine.audit``, served
    through :func:`tasks.model_objects.object_model`): load the model, take its inputs from its
    signature (a Python object has none), choose the score source,
    score the rows into ``_fairengine_score`` and build the method handles from that source.
    Else the data's ``columns.score``. ``timed(step, fn, *args)`` runs the steps (the flow
    times them). ``model_info`` holds the registry identity plus ``score_source`` (its
    ``description`` is shown in the report) and ``model_input`` (columns, origin, conversions).
    """
    base_info: dict[str, Any] = {"uri": None, "name": None, "version": None}
    if model_object is not None:
        pyfunc, info = timed("load_model", describe_object_model, model_object)
    elif not cfg.model.uri:
        if roles.score is None:
            raise ConfigError("no scores to audit: set columns.score or model.uri")
        source = ScoreSource.from_data_column(roles.score, cfg.score_type)
        return ScoredData(frame, roles, None, {**base_info, "score_source": source.to_dict()})
    else:
        pyfunc, info = timed("load_model", load_model, cfg.model.uri, tracking_uri)
    model_input, notes = plan_model_input(pyfunc, frame, roles, cfg.columns.features)
    scored = timed(
        "score_data",
        score_data,
        pyfunc,
        frame,
        model_input,
        cfg.score_type,
        cfg.positive_label,
        cfg.task,
    )
    out = frame.copy()
    out[SCORE_COLUMN] = scored.scores
    new_roles = dataclasses.replace(roles, score=SCORE_COLUMN, features=model_input.columns)
    pairs, probability_notes = attach_class_probability(out, scored.class_probability, roles)
    if pairs is not None:
        new_roles = dataclasses.replace(new_roles, class_scores=pairs)
    handles = model_handles(pyfunc, scored.source, model_input, cfg.score_type, cfg.positive_label)
    warnings = [*notes, *scored.warnings, *probability_notes]
    if cfg.score_type == "label" and cfg.threshold not in (None, 0.5):
        warnings.append(
            f"threshold {cfg.threshold} is not used: with score_type label the model's labels "
            "are the predictions"
        )
    model_info = {
        **base_info,
        **info,
        "score_source": scored.source.to_dict(),
        "model_input": model_input.to_dict(),
    }
    return ScoredData(out, new_roles, handles, model_info, warnings)
