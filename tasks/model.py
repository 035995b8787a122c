"""Load the audited model from MLflow and score the audit data with it."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.errors import ModelLoadError
from fairengine.scores import positive_class_scores

SCORE_COLUMN = "_fairengine_score"
_REGISTRY_URI = re.compile(
    r"^models:/(?P<name>[^/@]+)(?:/(?P<version>[^/]+)|@(?P<alias>[^/]+))?/?$"
)


def describe_model_uri(uri: str, tracking_uri: str) -> dict[str, Any]:
    """Name and version of a ``models:/name/version`` or ``models:/name@alias`` URI.

    The alias is resolved to its version in the registry. Other URIs (``runs:/``, paths) give
    ``name``/``version`` ``None``.
    """
    info: dict[str, Any] = {"uri": uri, "name": None, "version": None, "alias": None}
    m = _REGISTRY_URI.match(uri)
    if not m:
        return info
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
    """``mlflow.pyfunc.load_model(uri)`` with a readable error naming the URI."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    try:
        return mlflow.pyfunc.load_model(uri)
    except Exception as exc:
        raise ModelLoadError(
            f"could not load model {uri!r} (tracking store {tracking_uri}): "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from None


def predict_scores(model: Any, features: pd.DataFrame) -> np.ndarray:
    """Scores of the positive class: column 1 of a two-column output, else the 1-D output."""
    try:
        out = model.predict(features)
    except Exception as exc:
        raise ModelLoadError(
            f"the model could not score the audit data (feature columns {list(features.columns)}): "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from None
    arr = positive_class_scores(out, len(features))
    if arr is None:
        raise ModelLoadError(
            f"the model returned output of shape {np.shape(out)} for {len(features)} rows; "
            "expected one score per row (or two class probabilities)"
        )
    return arr


@task(name="load-model", cache_policy=NO_CACHE)
def load_model(uri: str, tracking_uri: str) -> tuple[Any, dict[str, Any]]:
    """Resolve and load the model; returns the pyfunc model and its registry description."""
    info = describe_model_uri(uri, tracking_uri)
    model = load_pyfunc(uri, tracking_uri)
    get_run_logger().info("Loaded model %s (version %s)", uri, info.get("version"))
    return model, info


@task(name="score-data", cache_policy=NO_CACHE)
def score_data(model: Any, frame: pd.DataFrame, feature_columns: list[str]) -> pd.DataFrame:
    """A copy of ``frame`` with the model's scores in column ``_fairengine_score``."""
    missing = [c for c in feature_columns if c not in frame.columns]
    if missing:
        raise ModelLoadError(
            f"the model needs feature column(s) {missing} that the data does not have"
        )
    scored = frame.copy()
    scored[SCORE_COLUMN] = predict_scores(model, frame.loc[:, feature_columns])
    get_run_logger().info("Scored %d rows with the model", len(frame))
    return scored


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (for one-line user-facing errors)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


class PyfuncProbability:
    """A black-box view of a loaded model: ``predict_proba(X)`` gives ``(n, 2)`` class
    probabilities from the pyfunc's scores (raw scores through a sigmoid when ``score_type`` is
    ``raw``), like a scikit-learn classifier."""

    def __init__(self, model: Any, score_type: str) -> None:
        self.model = model
        self.score_type = score_type

    def predict_proba(self, features: pd.DataFrame) -> np.ndarray:
        from fairengine.scores import to_probability

        p = to_probability(predict_scores(self.model, features), self.score_type)
        return np.column_stack([1.0 - p, p])


def model_handles(model: Any, score_type: str) -> dict[str, Any]:
    """What the model-dependent methods receive.

    ``predict_proba``: a function of a feature frame returning P(y=1) per row (FlipTest).
    ``model``: the underlying estimator or torch module when MLflow can unwrap it (so gradients
    are available to the individual-fairness test), else the black-box :class:`PyfuncProbability`.
    """
    proba = PyfuncProbability(model, score_type)
    raw: Any = None
    for unwrap in ("get_raw_model", "unwrap_python_model"):
        try:
            raw = getattr(model, unwrap)()
            break
        except Exception:  # not every flavor can be unwrapped; fall back to the black box
            continue
    return {
        "predict_proba": lambda features: proba.predict_proba(features)[:, 1],
        "model": raw if raw is not None else proba,
    }
