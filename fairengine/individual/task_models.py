r"""Regression models and multiclass classifiers for the gradient-flow attack (issue 22).

The individual-fairness test (Maity, Xue, Yurochkin & Sun 2021; Xue, Yurochkin & Sun 2020)
compares the audit's loss ℓ(f(x), y) at x and at the attacked point Φ(x). The paper's loss is a
binary classifier's cross-entropy (:mod:`fairengine.individual.torch_models`); for other models
the audit's loss on the model output is

* **regression**, the squared loss ℓ(f(x), y) = (f(x) − y)², with ∂ℓ/∂x = 2 (f(x) − y) ∇f(x);
  for a linear model f(x) = wᵀx + b and a move x → x + t u the loss is (r + t wᵀu)² with
  r = f(x) − y, so along a fair direction u with wᵀu = 0 the ratio is exactly 1;
* **multiclass**, the cross-entropy of the softmax ℓ(z(x), y) = −z_y(x) + log Σ_k e^{z_k(x)}
  of the logits z(x) (``log_softmax``, stable in float64).

:class:`TorchTaskModel` wraps a torch module (a prediction per row, or K logits per row in the
order of the audit's classes) with that loss, its x-gradient (``torch.autograd.grad``; the
module's parameters are never touched) and its output. :func:`task_model` converts fitted
scikit-learn models exactly: linear regressors (``LinearRegression``, ``Ridge``, ``RidgeCV``,
``Lasso``, ``ElasticNet``: an exact linear layer), ``MLPRegressor``, a multinomial
``LogisticRegression`` (its softmax; a one-vs-rest model's normalised sigmoids are not a
softmax and are refused) and ``MLPClassifier``, alone or at the end of a ``Pipeline``
(the attack then runs in the preprocessing's output space, as for binary models). Any other
model raises :class:`~fairengine.errors.ModelLoadError` with the reason, which the method
reports as not applicable.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from fairengine.errors import ModelLoadError
from fairengine.individual.torch_models import (
    MLPModule,
    ModelAdapter,
    describe_preprocessing,
    identity_decoder,
    numeric_encoder,
    pipeline_encoder,
    unwrap_model,
)

__all__ = [
    "LINEAR_REGRESSORS",
    "LinearPredictionModule",
    "SoftmaxLogitModule",
    "TorchTaskModel",
    "task_loss",
    "task_model",
]

LINEAR_REGRESSORS = ("LinearRegression", "Ridge", "RidgeCV", "Lasso", "ElasticNet")
"""scikit-learn regressors whose prediction is exactly ``X @ coef_ + intercept_``."""
TASK_LOSSES = {"regression": "squared", "multiclass": "cross_entropy"}


def task_loss(out: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
    """Per-row loss of a model output: (f(x) − y)² for ``regression`` ((n,) or (n, 1)
    predictions), −log softmax(z)_y for ``multiclass`` ((n, K) logits, y the class codes)."""
    if task == "regression":
        if out.ndim == 2 and out.shape[1] == 1:
            out = out[:, 0]
        if out.ndim != 1:
            raise ModelLoadError(
                f"a regression model must return one prediction per row; it returned shape "
                f"{tuple(out.shape)}"
            )
        return (out - y) ** 2
    if task == "multiclass":
        if out.ndim != 2 or out.shape[1] < 2:
            raise ModelLoadError(
                f"a multiclass model must return K >= 2 logits per row; it returned shape "
                f"{tuple(out.shape)}"
            )
        return -torch.log_softmax(out, dim=1).gather(1, y.long()[:, None])[:, 0]
    raise ModelLoadError(f"no loss for a {task} audit (regression or multiclass)")


class TorchTaskModel:
    """A differentiable regression model (squared loss) or multiclass classifier
    (cross-entropy of the softmax of its logits): per-row loss, its x-gradient, and
    :meth:`proba` = the prediction (regression) or the class probabilities (multiclass).

    The interface of :class:`~fairengine.individual.torch_models.TorchClassifier` (``loss``,
    ``loss_and_grad``, ``proba``, ``to``), so that the gradient-flow attack runs unchanged."""

    def __init__(
        self,
        module: nn.Module,
        task: str,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        exact: bool = True,
        description: str = "torch module",
    ) -> None:
        if task not in TASK_LOSSES:
            raise ModelLoadError(f"task must be regression or multiclass, got {task!r}")
        self.module = copy.deepcopy(module).to(device=device, dtype=dtype).eval()
        self.module.requires_grad_(False)  # private copy: gradients w.r.t. x only
        self.task = task
        self.output = "prediction" if task == "regression" else "logits"
        self.dtype = dtype
        self.device = torch.device(device)
        self.exact = exact
        self.description = description

    def to(self, device: str | torch.device, dtype: torch.dtype | None = None) -> TorchTaskModel:
        """A copy on ``device`` (and ``dtype``)."""
        dt = self.dtype if dtype is None else dtype
        return TorchTaskModel(
            self.module, self.task, dtype=dt, device=device, exact=self.exact,
            description=self.description,
        )  # fmt: skip

    def loss(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-row loss ℓ(f(x_i), y_i) (no gradient tracking)."""
        with torch.no_grad():
            return task_loss(self.module(X), y, self.task)

    def loss_and_grad(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row loss and ∂ℓ_i/∂x_i (gradient of the summed loss: rows are independent)."""
        with torch.enable_grad():
            Xg = X.detach().requires_grad_(True)
            loss = task_loss(self.module(Xg), y, self.task)
            (grad,) = torch.autograd.grad(loss.sum(), Xg)
        return loss.detach(), grad

    def proba(self, X: torch.Tensor) -> torch.Tensor:
        """The prediction (n,) of a regression model, the class probabilities (n, K) of a
        multiclass classifier."""
        with torch.no_grad():
            out = self.module(X)
            if self.task == "regression":
                return out[:, 0] if out.ndim == 2 else out
            return torch.softmax(out, dim=1)


class LinearPredictionModule(nn.Module):
    """f(x) = x w + b: a linear regressor's prediction (float64 buffers)."""

    coef: torch.Tensor  # buffers (registered in __init__)
    intercept: torch.Tensor

    def __init__(self, coef: Any, intercept: Any) -> None:
        super().__init__()
        self.register_buffer("coef", torch.as_tensor(np.asarray(coef, np.float64).reshape(-1)))
        b = (
            float(np.ravel(np.asarray(intercept, dtype=np.float64))[0])
            if np.size(intercept)
            else 0.0
        )
        self.register_buffer("intercept", torch.as_tensor(b, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.coef + self.intercept


class SoftmaxLogitModule(nn.Module):
    """z(x) = x Wᵀ + b: the K logits of a multinomial logistic model (K × d ``coef``)."""

    coef: torch.Tensor  # buffers (registered in __init__)
    intercept: torch.Tensor

    def __init__(self, coef: Any, intercept: Any) -> None:
        super().__init__()
        self.register_buffer("coef", torch.as_tensor(np.asarray(coef, dtype=np.float64)))
        self.register_buffer(
            "intercept", torch.as_tensor(np.ravel(np.asarray(intercept, dtype=np.float64)))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.coef.T + self.intercept


class _Columns(nn.Module):
    """The columns ``order`` of ``inner``'s (n, K) output (the audit's class order)."""

    order: torch.Tensor

    def __init__(self, inner: nn.Module, order: list[int]) -> None:
        super().__init__()
        self.inner = inner
        self.register_buffer("order", torch.as_tensor(order, dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x).index_select(1, self.order)


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def class_order(model_classes: Any, classes: tuple[str, ...], name: str) -> list[int]:
    """For each of the audit's ``classes`` (text, sorted), the column of ``model_classes``
    that predicts it (compared as text); a class the model lacks is an error naming it."""
    text = [str(_plain(c)) for c in model_classes]
    missing = [c for c in classes if c not in text]
    if missing:
        raise ModelLoadError(
            f"{name} has the classes {text[:10]}, without {missing[:5]} of the label; its "
            "cross-entropy at rows of those classes is infinite"
        )
    return [text.index(c) for c in classes]


def _convert(estimator: Any, task: str, classes: tuple[str, ...]) -> tuple[nn.Module, str]:
    """(torch module, description) of a fitted scikit-learn model, exactly; else
    ModelLoadError saying which models are supported."""
    name = type(estimator).__name__
    if task == "regression":
        if name in LINEAR_REGRESSORS and hasattr(estimator, "coef_"):
            coef = np.asarray(estimator.coef_, dtype=np.float64)
            if coef.ndim == 2 and coef.shape[0] != 1:
                raise ModelLoadError(
                    f"{name} predicts {coef.shape[0]} targets; the audit needs one"
                )
            return (
                LinearPredictionModule(coef.reshape(-1), getattr(estimator, "intercept_", 0.0)),
                f"{name} (exact linear layer)",
            )
        if name == "MLPRegressor" and hasattr(estimator, "coefs_"):
            mod = MLPModule(estimator.coefs_, estimator.intercepts_, estimator.activation)
            return mod, f"MLPRegressor ({estimator.activation}, exact torch equivalent)"
        raise ModelLoadError(
            f"{name} offers no gradients: for a regression audit the supported models are torch "
            f"modules, {', '.join(LINEAR_REGRESSORS)}, MLPRegressor and Pipelines ending in them"
        )
    model_classes = getattr(estimator, "classes_", None)
    if name == "LogisticRegression" and hasattr(estimator, "coef_") and model_classes is not None:
        coef = np.asarray(estimator.coef_, dtype=np.float64)
        intercept = np.ravel(np.asarray(estimator.intercept_, dtype=np.float64))
        multi = getattr(estimator, "multi_class", "auto")  # (scikit-learn < 1.8)
        if len(model_classes) > 2 and (multi == "ovr" or estimator.solver == "liblinear"):
            raise ModelLoadError(
                f"{name} is one-vs-rest (multi_class='ovr' or solver='liblinear'): its "
                "probabilities are normalised sigmoids, not a softmax, and have no exact "
                "cross-entropy gradient here; fit it multinomial (the default of lbfgs)"
            )
        if coef.shape[0] == 1:  # two classes: logits (0, z) give softmax = sigmoid
            coef = np.vstack([np.zeros_like(coef), coef])
            intercept = np.r_[0.0, intercept]
        order = class_order(model_classes, classes, name)
        module: nn.Module = SoftmaxLogitModule(coef[order], intercept[order])
        return module, f"{name} (multinomial, exact softmax of {len(order)} logits)"
    if name == "MLPClassifier" and hasattr(estimator, "coefs_") and model_classes is not None:
        if estimator.out_activation_ != "softmax":
            raise ModelLoadError(
                f"MLPClassifier with out_activation_={estimator.out_activation_!r} is not a "
                "softmax over the classes"
            )
        mlp = MLPModule(estimator.coefs_, estimator.intercepts_, estimator.activation)
        order = class_order(model_classes, classes, name)
        return _Columns(mlp, order), f"MLPClassifier ({estimator.activation}, exact softmax)"
    raise ModelLoadError(
        f"{name} offers no gradients: for a multiclass audit the supported models are torch "
        "modules (K logits in the label's class order), a multinomial LogisticRegression, "
        "MLPClassifier and Pipelines ending in them"
    )


def task_model(
    model: Any,
    feature_columns: list[str] | tuple[str, ...],
    task: str,
    classes: tuple[str, ...] = (),
) -> ModelAdapter:
    """Wrap a regression model or a multiclass classifier for the gradient-flow attack with
    the audit's loss (module docstring). ``classes``: the multiclass audit's classes in code
    order (a torch module's K logits must be in that order; scikit-learn models are
    reordered through their ``classes_``). The adapter's ``reference_proba`` is the model's
    own ``predict`` (regression) or ``predict_proba`` (multiclass, in the audit's class order),
    against which :meth:`ModelAdapter.verify` checks the conversion. Raises
    :class:`ModelLoadError` with the reason for a model it cannot convert exactly."""
    if task not in TASK_LOSSES:
        raise ModelLoadError(f"task must be regression or multiclass, got {task!r}")
    cols = [str(c) for c in feature_columns]
    inner = unwrap_model(model)
    if isinstance(inner, nn.Module):
        out = "one prediction per row" if task == "regression" else "K logits per row"
        return ModelAdapter(
            TorchTaskModel(inner, task, description=f"torch {type(inner).__name__}"),
            numeric_encoder(cols), cols, cols, [], identity_decoder(cols), True, "torch",
            f"torch module {type(inner).__name__} ({out}; {TASK_LOSSES[task]} loss)",
        )  # fmt: skip
    steps = getattr(inner, "steps", None)
    final = inner[-1] if steps else inner
    module, desc = _convert(final, task, classes)
    if steps:
        pre = inner[:-1]
        encode = pipeline_encoder(pre)
        names, sources, groups, decode = describe_preprocessing(pre, cols)
        desc = f"{desc} after sklearn preprocessing ({', '.join(n for n, _ in steps[:-1])})"
        kind = f"Pipeline[{type(final).__name__}]"
    else:
        encode = numeric_encoder(cols)
        names, sources, groups, decode = cols, cols, [], identity_decoder(cols)
        kind = type(inner).__name__
    reference: Callable[[pd.DataFrame], np.ndarray]
    if task == "regression":

        def reference(frame: pd.DataFrame) -> np.ndarray:
            return np.ravel(np.asarray(inner.predict(frame.loc[:, cols]), dtype=np.float64))

    else:
        order = class_order(final.classes_, classes, type(final).__name__)

        def reference(frame: pd.DataFrame) -> np.ndarray:
            return np.asarray(inner.predict_proba(frame.loc[:, cols]))[:, order]

    clf = TorchTaskModel(module, task, description=desc)
    desc = f"{desc}; {TASK_LOSSES[task]} loss"
    return ModelAdapter(
        clf, encode, names, sources, groups, decode, True, kind, desc, reference_proba=reference
    )
