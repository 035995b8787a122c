"""Models given as Python objects (``fairengine.audit(..., model=clf)``), served through the part
of MLflow's pyfunc interface that :mod:`tasks.model` reads, so that an object is scored exactly
as the same model logged to MLflow would be.

:func:`object_model` wraps

* a fitted scikit-learn-style classifier with ``predict_proba`` (scikit-learn estimators and
  pipelines, xgboost's ``XGBClassifier``, lightgbm's ``LGBMClassifier``): flavor ``sklearn``
  (``xgboost``/``lightgbm`` for theirs), raw model = the object, so the audit calls its
  ``predict_proba`` as it does for ``mlflow.sklearn.log_model``;
* a ``torch.nn.Module``: flavor ``pytorch``, ``predict`` as MLflow's pytorch pyfunc
  (``float32`` tensor of the feature columns, ``no_grad``, output as a DataFrame), and the module
  itself for the individual-fairness test's gradients;
* native boosters (``xgboost.Booster``, ``lightgbm.Booster``): their ``predict`` of a frame
  (through ``xgboost.DMatrix``) as the score;
* any other callable ``f(features: DataFrame) -> P(y=1)`` (one number per row, or two class
  columns): a custom pyfunc whose ``predict`` is the call;
* an MLflow ``PyFuncModel`` already loaded: used as it is.

:func:`object_fingerprint` is the object's content hash (SHA-256 of its cloudpickle bytes): the
model's identity in the audit's cache keys, so that a refitted model never reuses a stale step.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from fairengine.errors import ConfigError


class ObjectModel:
    """A Python model object behind the pyfunc interface :mod:`tasks.model` reads:
    ``loader_module`` (the flavor), ``metadata`` (``None``: no signature, so the features are
    ``columns.features`` or every column without a role), ``get_raw_model()``, ``predict()`` and
    ``object_name`` (how the audit names it)."""

    metadata = None

    def __init__(
        self,
        obj: Any,
        flavor: str,
        predict: Callable[[pd.DataFrame], Any],
        name: str,
    ) -> None:
        self.obj = obj
        self.loader_module = "" if flavor == "python_function" else f"mlflow.{flavor}"
        self._predict = predict
        self.object_name = name

    def get_raw_model(self) -> Any:
        return self.obj

    def predict(self, data: pd.DataFrame) -> Any:
        return self._predict(data)

    def __repr__(self) -> str:
        return f"ObjectModel({self.object_name}, flavor={self.loader_module or 'python_function'})"


def _torch_predict(module: Any) -> Callable[[pd.DataFrame], pd.DataFrame]:
    import torch

    def predict(data: pd.DataFrame) -> pd.DataFrame:
        training = module.training  # inference mode for the call only: the user's module keeps
        module.eval()  # its own mode (dropout/batch-norm as mlflow.pytorch serves them)
        try:
            with torch.no_grad():
                out = module(torch.from_numpy(data.to_numpy(dtype=np.float32)))
        finally:
            module.train(training)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the torch module returned {type(out).__name__}, not one tensor")
        return pd.DataFrame(out.detach().cpu().numpy(), index=data.index)

    return predict


def _root_module(obj: Any) -> str:
    return type(obj).__module__.split(".")[0]


def object_model(obj: Any) -> Any:
    """``obj`` behind the pyfunc interface (module docstring); a :class:`ConfigError` naming
    ``model`` and what it accepts when ``obj`` is none of those."""
    if hasattr(obj, "loader_module") and hasattr(obj, "metadata") and hasattr(obj, "predict"):
        return obj  # an MLflow PyFuncModel
    root = _root_module(obj)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        return ObjectModel(obj, "pytorch", _torch_predict(obj), type(obj).__name__)
    if hasattr(obj, "predict_proba") and hasattr(obj, "predict"):
        flavor = root if root in ("xgboost", "lightgbm") else "sklearn"
        return ObjectModel(obj, flavor, obj.predict, _estimator_name(obj))
    if root == "xgboost" and type(obj).__name__ == "Booster":

        def booster_predict(data: pd.DataFrame) -> np.ndarray:
            import xgboost

            return np.asarray(obj.predict(xgboost.DMatrix(data)))

        return ObjectModel(obj, "python_function", booster_predict, "xgboost.Booster")
    if hasattr(obj, "predict") and callable(obj.predict):
        name = f"{root}.{type(obj).__name__}" if root == "lightgbm" else type(obj).__name__
        return ObjectModel(obj, "python_function", obj.predict, name)
    if callable(obj):
        name = getattr(obj, "__qualname__", None) or type(obj).__name__
        return ObjectModel(obj, "python_function", obj, f"callable {name}")
    raise ConfigError(
        f"model: expected a fitted classifier with predict_proba (scikit-learn, xgboost, "
        f"lightgbm), a torch.nn.Module, a callable returning P(y=1) per row, or an MLflow model "
        f"URI (models:/name/version, runs:/...); got {type(obj).__name__}"
    )


def _estimator_name(obj: Any) -> str:
    steps = getattr(obj, "steps", None)
    if steps:
        return f"Pipeline[{type(steps[-1][1]).__name__}]"
    return type(obj).__name__


def object_fingerprint(obj: Any) -> str:
    """SHA-256 of ``obj``'s cloudpickle bytes; ``unhashed-<random>`` when it cannot be pickled
    (its audit steps are then never reused from the cache)."""
    import cloudpickle

    try:
        return hashlib.sha256(cloudpickle.dumps(obj)).hexdigest()
    except Exception:  # a closure over a socket, a lock, ...: no content identity
        return f"unhashed-{uuid.uuid4().hex}"
