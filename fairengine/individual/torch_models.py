r"""Models the gradient-flow attack can differentiate: torch modules, converted sklearn models.

The attack (:mod:`fairengine.individual.attack`) needs, for a binary classifier, the
per-row cross-entropy ℓ(f(x), y) and its gradient in x. This module provides

* :class:`TorchClassifier` — wraps a torch module returning a binary logit (n,) / (n, 1), two
  logits (n, 2), or (with ``output="probability"``) P(y = 1) or both probabilities. The loss is
  computed in float64 from logits (log-sigmoid / log-softmax), or ℓ = −log(max(p_y, 1e-15)) from
  probabilities (notes §5.5). Gradients come from ``torch.autograd.grad`` w.r.t. x only: the
  module's parameters are never touched (a private float64 copy in ``eval()`` mode is used).
* exact torch equivalents of fitted sklearn ``LogisticRegression`` and ``MLPClassifier``
  (``coef_``/``intercept_``; ``coefs_``/``intercepts_``/``activation``/``out_activation_``),
  and of ``Pipeline``\ s ending in them: the preprocessing steps (``StandardScaler``,
  ``OneHotEncoder``, ``ColumnTransformer`` ...) are applied by sklearn itself and the attack runs
  in their output space (standardised, one-hot encoded: the space the model's weights act on, as
  in the paper). Equivalence is verified against ``predict_proba`` on the audit rows
  (:meth:`ModelAdapter.verify`).
* a soft mixture Σ_t w_t σ(θ_tᵀx + b_t) for fairlearn's ``ExponentiatedGradient`` over linear
  models — how Maity et al. audited their Reduction model. fairlearn itself predicts with a
  *randomised* mixture of hard classifiers, so this is a smooth surrogate: labelled approximate.
* :class:`BlackBoxClassifier` — for models with only ``predict_proba``: central finite
  differences (exact for smooth models, zero for trees) or Gaussian-smoothing zeroth-order
  gradients ĝ = (1/(mσ)) Σ_j [ℓ(x + σu_j) − ℓ(x)] u_j (the gradient of E ℓ(x + σu)); both
  labelled approximate (notes §5.9).
* MLflow pyfunc models are unwrapped (``get_raw_model`` / ``unwrap_python_model``) by duck typing;
  this module never imports mlflow.

:func:`as_differentiable_model` picks the right one and returns a :class:`ModelAdapter`: the
classifier plus the encoder from the audit table to the attack space, the encoded feature names,
the one-hot groups (for the simplex projection) and a decoder back to readable columns.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from fairengine.errors import DataContractError, ModelLoadError

__all__ = [
    "BlackBoxClassifier",
    "LinearLogitModule",
    "MLPModule",
    "ModelAdapter",
    "SoftMixtureModule",
    "SurrogateClassifier",
    "TorchClassifier",
    "as_differentiable_model",
    "fit_surrogate",
    "sklearn_to_torch",
]

PROBA_FLOOR = 1e-15
BLACK_BOX_METHODS = ("none", "finite_difference", "smoothed", "surrogate")


# --------------------------------------------------------------------------- losses
def binary_cross_entropy_from_output(
    out: torch.Tensor, y: torch.Tensor, output: str
) -> torch.Tensor:
    """Per-row cross-entropy of a binary model output against y in {0, 1}.

    ``output="logits"``: (n,) or (n, 1) logit z of class 1 → softplus(z) − y z, computed stably;
    (n, 2) logits → −log_softmax[y]. ``output="probability"``: (n,) / (n, 1) P(y = 1), or (n, 2)
    probabilities → −log(max(p_y, 1e-15)).
    """
    if out.ndim == 2 and out.shape[1] == 1:
        out = out[:, 0]
    if output == "logits":
        if out.ndim == 1:
            return torch.nn.functional.softplus(torch.where(y > 0, -out, out))
        if out.ndim == 2 and out.shape[1] == 2:
            return -torch.log_softmax(out, dim=1).gather(1, y.long()[:, None])[:, 0]
    elif output == "probability":
        if out.ndim == 1:
            p_y = torch.where(y > 0, out, 1.0 - out)
        elif out.ndim == 2 and out.shape[1] == 2:
            p_y = out.gather(1, y.long()[:, None])[:, 0]
        else:
            p_y = None
        if p_y is not None:
            return -torch.log(torch.clamp(p_y, min=PROBA_FLOOR))
    raise ModelLoadError(
        f"the model must return one logit/probability per row or two per row (binary "
        f"classification); it returned shape {tuple(out.shape)}"
    )


def _positive_probability(out: torch.Tensor, output: str) -> torch.Tensor:
    if out.ndim == 2 and out.shape[1] == 1:
        out = out[:, 0]
    if output == "logits":
        return torch.sigmoid(out) if out.ndim == 1 else torch.softmax(out, dim=1)[:, 1]
    return out if out.ndim == 1 else out[:, 1]


# --------------------------------------------------------------------------- classifiers
class TorchClassifier:
    """A differentiable binary classifier: per-row loss, its x-gradient and P(y = 1).

    Parameters
    ----------
    module : torch module mapping (n, d) inputs to logits or probabilities (see module doc).
    output : ``"logits"`` or ``"probability"``.
    dtype, device : the module is deep-copied to this dtype/device in ``eval()`` mode.
    exact : whether the module *is* the audited model (False for surrogates).
    """

    def __init__(
        self,
        module: nn.Module,
        output: str = "logits",
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        exact: bool = True,
        description: str = "torch module",
    ) -> None:
        if output not in ("logits", "probability"):
            raise ModelLoadError(f"output must be 'logits' or 'probability', got {output!r}")
        self.module = copy.deepcopy(module).to(device=device, dtype=dtype).eval()
        self.module.requires_grad_(False)  # private copy: gradients w.r.t. x only
        self.output = output
        self.dtype = dtype
        self.device = torch.device(device)
        self.exact = exact
        self.description = description

    def to(self, device: str | torch.device, dtype: torch.dtype | None = None) -> TorchClassifier:
        """A copy on ``device`` (and ``dtype``)."""
        dt = self.dtype if dtype is None else dtype
        return TorchClassifier(
            self.module, self.output, dtype=dt, device=device, exact=self.exact,
            description=self.description,
        )  # fmt: skip

    def loss(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-row cross-entropy ℓ(f(x_i), y_i) (no gradient tracking)."""
        with torch.no_grad():
            return binary_cross_entropy_from_output(self.module(X), y, self.output)

    def loss_and_grad(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row loss and ∂ℓ_i/∂x_i (gradient of the *summed* loss, so rows are independent)."""
        with torch.enable_grad():
            Xg = X.detach().requires_grad_(True)
            loss = binary_cross_entropy_from_output(self.module(Xg), y, self.output)
            (grad,) = torch.autograd.grad(loss.sum(), Xg)
        return loss.detach(), grad

    def proba(self, X: torch.Tensor) -> torch.Tensor:
        """P(y = 1 | x) per row."""
        with torch.no_grad():
            return _positive_probability(self.module(X), self.output)


class BlackBoxClassifier:
    """Gradient-free access to a model through ``proba_fn`` (encoded rows → P(y = 1)).

    ``method="finite_difference"``: central differences with step ``fd_step`` (2d calls per row
    and step, batched). ``method="smoothed"``: Gaussian-smoothing zeroth-order estimate with
    ``n_samples`` directions of scale ``sigma``, drawn from a generator seeded with ``seed`` (the
    attack is then a randomised map; the seed is reported). Both are approximate.
    """

    exact = False

    def __init__(
        self,
        proba_fn: Callable[[np.ndarray], np.ndarray],
        method: str = "finite_difference",
        *,
        fd_step: float = 1e-4,
        sigma: float = 0.1,
        n_samples: int = 20,
        seed: int = 0,
        max_batch_rows: int = 200_000,
        description: str = "black-box predict_proba",
    ) -> None:
        if method not in ("finite_difference", "smoothed", "surrogate"):
            raise ModelLoadError(
                "black-box method must be 'finite_difference', 'smoothed' or 'surrogate', got "
                f"{method!r}"
            )
        self.proba_fn = proba_fn
        self.method = method
        self.fd_step = float(fd_step)
        self.sigma = float(sigma)
        self.n_samples = int(n_samples)
        self.seed = int(seed)
        self.max_batch_rows = int(max_batch_rows)
        self.description = f"{description} ({method}, approximate gradients)"
        self._rng = np.random.default_rng(seed)
        self.dtype = torch.float64
        self.device = torch.device("cpu")

    def to(
        self, device: str | torch.device, dtype: torch.dtype | None = None
    ) -> BlackBoxClassifier:
        return self  # numpy on the CPU; tensors are moved at the boundary

    def _proba(self, Z: np.ndarray) -> np.ndarray:
        out = [
            np.asarray(self.proba_fn(Z[i : i + self.max_batch_rows]), dtype=np.float64).ravel()
            for i in range(0, Z.shape[0], self.max_batch_rows)
        ]
        p = np.concatenate(out) if out else np.empty(0)
        if p.shape[0] != Z.shape[0]:
            raise ModelLoadError(
                f"black-box predict_proba returned {p.shape[0]} values for {Z.shape[0]} rows"
            )
        return p

    def _loss_np(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        p = self._proba(Z)
        p_y = np.where(y > 0, p, 1.0 - p)
        return -np.log(np.clip(p_y, PROBA_FLOOR, 1.0))

    def loss(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        Z, yy = X.detach().cpu().numpy(), y.detach().cpu().numpy()
        return torch.as_tensor(self._loss_np(Z, yy), dtype=X.dtype, device=X.device)

    def proba(self, X: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(
            self._proba(X.detach().cpu().numpy()), dtype=X.dtype, device=X.device
        )

    def loss_and_grad(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.method == "surrogate":
            raise ModelLoadError(
                "a 'surrogate' black box has no gradients of its own: wrap it with fit_surrogate()"
            )
        Z, yy = X.detach().cpu().numpy(), y.detach().cpu().numpy()
        n, d = Z.shape
        l0 = self._loss_np(Z, yy)
        if self.method == "finite_difference":
            h = self.fd_step
            eye = np.eye(d) * h
            plus = (Z[:, None, :] + eye[None]).reshape(n * d, d)
            minus = (Z[:, None, :] - eye[None]).reshape(n * d, d)
            yr = np.repeat(yy, d)
            g = (self._loss_np(plus, yr) - self._loss_np(minus, yr)).reshape(n, d) / (2 * h)
        else:
            m, s = self.n_samples, self.sigma
            u = self._rng.standard_normal((n, m, d))
            pts = (Z[:, None, :] + s * u).reshape(n * m, d)
            lu = self._loss_np(pts, np.repeat(yy, m)).reshape(n, m)
            g = np.einsum("nm,nmd->nd", lu - l0[:, None], u) / (m * s)
        t = torch.as_tensor
        return t(l0, dtype=X.dtype, device=X.device), t(g, dtype=X.dtype, device=X.device)


class SurrogateClassifier:
    """Transfer attack (notes §5.9, option 4): gradients from a differentiable ``surrogate``,
    losses and probabilities from the ``black_box`` itself. Φ is then a fixed map of (x, y) as
    long as the surrogate never saw the audited rows, so the test stays valid; it is
    conservative (the transferred attack is weaker)."""

    exact = False

    def __init__(self, surrogate: TorchClassifier, black_box: BlackBoxClassifier) -> None:
        self.surrogate = surrogate
        self.black_box = black_box
        self.description = f"{black_box.description.split(' (')[0]} (surrogate transfer attack)"
        self.dtype = surrogate.dtype
        self.device = surrogate.device

    def to(self, device: str | torch.device, dtype: torch.dtype | None = None) -> Any:
        return SurrogateClassifier(self.surrogate.to(device, dtype), self.black_box)

    def loss(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.black_box.loss(X, y)

    def proba(self, X: torch.Tensor) -> torch.Tensor:
        return self.black_box.proba(X)

    def loss_and_grad(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _, g = self.surrogate.loss_and_grad(X, y)
        return self.black_box.loss(X, y), g


def fit_surrogate(
    black_box: BlackBoxClassifier,
    X: np.ndarray,
    *,
    hidden: tuple[int, ...] = (64, 64),
    steps: int = 1000,
    lr: float = 1e-2,
    seed: int = 0,
    num_threads: int | None = None,
) -> SurrogateClassifier:
    """Distil ``black_box`` into a tanh MLP on rows ``X`` (never the audited rows): full-batch
    Adam on the cross-entropy against the soft targets p_bb(x). Seeded without touching torch's
    global RNG."""
    Xt = torch.as_tensor(np.asarray(X, dtype=np.float64))
    target = torch.as_tensor(black_box._proba(Xt.numpy()))
    sizes = [Xt.shape[1], *hidden, 1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b).double(), nn.Tanh()]
        net = nn.Sequential(*layers[:-1])
    mu, sd = Xt.mean(0), Xt.std(0).clamp_min(1e-8)
    model = nn.Sequential(_Standardise(mu, sd), net)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    previous = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        for _ in range(int(steps)):
            opt.zero_grad()
            z = model(Xt)[:, 0]
            nn.functional.binary_cross_entropy_with_logits(z, target).backward()
            opt.step()
    finally:
        torch.set_num_threads(previous)
    return SurrogateClassifier(TorchClassifier(model.eval(), "logits", exact=False), black_box)


class _Standardise(nn.Module):
    mu: torch.Tensor  # buffers (registered in __init__)
    sd: torch.Tensor

    def __init__(self, mu: torch.Tensor, sd: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mu", mu)
        self.register_buffer("sd", sd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mu) / self.sd


# --------------------------------------------------------------------------- torch modules
class LinearLogitModule(nn.Module):
    """z = x θ + b (binary logit); with ``intercept_multiplier=2`` the logit is xθ + 2b, the
    broadcasting quirk of Maity et al.'s simulation code (``individual.md`` §2.9)."""

    coef: torch.Tensor  # buffers (registered in __init__)
    intercept: torch.Tensor

    def __init__(self, coef: Any, intercept: Any, intercept_multiplier: float = 1.0) -> None:
        super().__init__()
        c = torch.as_tensor(np.asarray(coef, dtype=np.float64)).reshape(-1)
        self.register_buffer("coef", c)
        self.register_buffer(
            "intercept", torch.as_tensor(float(np.ravel(intercept)[0]), dtype=torch.float64)
        )
        self.intercept_multiplier = float(intercept_multiplier)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.coef + self.intercept_multiplier * self.intercept


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda t: t,
    "logistic": torch.sigmoid,
    "tanh": torch.tanh,
    "relu": torch.relu,
}


class MLPModule(nn.Module):
    """Dense feed-forward net with sklearn ``MLPClassifier`` semantics; returns the last layer's
    pre-activation (the binary logit when ``out_activation_ == "logistic"``)."""

    def __init__(self, weights: list[Any], biases: list[Any], activation: str) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ModelLoadError(f"unsupported MLP activation {activation!r}")
        self.activation = activation
        self.layers = nn.ModuleList()
        for w, b in zip(weights, biases, strict=True):
            w = np.asarray(w, dtype=np.float64)
            lin = nn.Linear(w.shape[0], w.shape[1]).double()
            with torch.no_grad():
                lin.weight.copy_(torch.as_tensor(w.T))
                lin.bias.copy_(torch.as_tensor(np.asarray(b, dtype=np.float64)))
            lin.requires_grad_(False)
            self.layers.append(lin)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act = _ACTIVATIONS[self.activation]
        for layer in self.layers[:-1]:
            x = act(layer(x))
        out = self.layers[-1](x)
        return out[:, 0] if out.shape[1] == 1 else out


class SoftMixtureModule(nn.Module):
    """P(y = 1 | x) = Σ_t w_t σ(x θ_t + b_t): a weighted mixture of logistic models (returns a
    probability; use ``output="probability"``)."""

    coefs: torch.Tensor  # buffers (registered in __init__)
    intercepts: torch.Tensor
    weights: torch.Tensor

    def __init__(self, coefs: Any, intercepts: Any, weights: Any) -> None:
        super().__init__()
        w = np.asarray(weights, dtype=np.float64)
        self.register_buffer("coefs", torch.as_tensor(np.asarray(coefs, dtype=np.float64)))
        self.register_buffer("intercepts", torch.as_tensor(np.ravel(intercepts).astype(float)))
        self.register_buffer("weights", torch.as_tensor(w / w.sum()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x @ self.coefs.T + self.intercepts) @ self.weights


def sklearn_to_torch(estimator: Any) -> tuple[nn.Module, str, bool, str]:
    """(module, output, exact, description) for a fitted LogisticRegression / MLPClassifier /
    fairlearn ExponentiatedGradient over logistic models; raises ModelLoadError otherwise."""
    name = type(estimator).__name__
    mod: nn.Module
    classes = getattr(estimator, "classes_", None)
    if classes is not None and len(classes) != 2:
        raise ModelLoadError(
            f"{name} has {len(classes)} classes; the individual-fairness test audits binary "
            "classifiers"
        )
    if name == "LogisticRegression" and hasattr(estimator, "coef_"):
        mod = LinearLogitModule(estimator.coef_[0], estimator.intercept_)
        return mod, "logits", True, "LogisticRegression (exact torch equivalent)"
    if name == "MLPClassifier" and hasattr(estimator, "coefs_"):
        if estimator.out_activation_ != "logistic":
            raise ModelLoadError(
                f"MLPClassifier with out_activation_={estimator.out_activation_!r} is not binary"
            )
        mod = MLPModule(estimator.coefs_, estimator.intercepts_, estimator.activation)
        return (
            mod,
            "logits",
            True,
            f"MLPClassifier ({estimator.activation}, exact torch equivalent)",
        )
    if hasattr(estimator, "predictors_") and hasattr(estimator, "weights_"):
        w = np.asarray(estimator.weights_, dtype=np.float64)
        keep = np.flatnonzero(w > 0)
        preds = [estimator.predictors_[int(i)] for i in keep]
        if not all(type(p).__name__ == "LogisticRegression" for p in preds):
            raise ModelLoadError(
                f"{name}: only mixtures of LogisticRegression predictors can be made differentiable"
            )
        coefs = np.stack([p.coef_[0] for p in preds])
        inter = np.array([float(np.ravel(p.intercept_)[0]) for p in preds])
        mod = SoftMixtureModule(coefs, inter, w[keep])
        desc = (
            f"{name}: soft mixture of its {len(preds)} logistic predictors (approximate: the "
            "fitted model randomises over hard predictions; Maity et al. audit this mixture)"
        )
        return mod, "probability", False, desc
    raise ModelLoadError(
        f"{name} offers no gradients: supported are torch modules, LogisticRegression, "
        "MLPClassifier, Pipelines ending in them, fairlearn ExponentiatedGradient over "
        "LogisticRegression, and MLflow pyfunc models wrapping these"
    )


# --------------------------------------------------------------------------- adapter
@dataclass
class OneHotGroup:
    """Encoded columns of one one-hot-encoded feature; ``full`` is False when a category was
    dropped (the group then lives in {v >= 0, Σv <= 1})."""

    source: str
    columns: list[int]
    full: bool = True
    categories: list[str] = field(default_factory=list)


@dataclass
class ModelAdapter:
    """The audited model as the attack sees it.

    ``classifier`` works on encoded rows (``encode(frame)``), ``feature_names`` name the encoded
    columns, ``source_columns[j]`` is the table column encoded column j comes from,
    ``onehot_groups`` are the one-hot blocks, ``decode`` maps encoded rows back to a table (or
    None when unknown), ``exact`` is False for surrogates and black-box gradients.
    """

    classifier: Any
    encode: Callable[[pd.DataFrame], np.ndarray]
    feature_names: list[str]
    source_columns: list[str]
    onehot_groups: list[OneHotGroup]
    decode: Callable[[np.ndarray], pd.DataFrame] | None
    exact: bool
    kind: str
    description: str
    reference_proba: Callable[[pd.DataFrame], np.ndarray] | None = None

    def verify(self, frame: pd.DataFrame, atol: float = 1e-6) -> float | None:
        """Max |P_torch(y=1) − predict_proba| on ``frame``; raises ModelLoadError above ``atol``.

        Returns None when there is no reference (torch modules, black boxes).
        """
        if self.reference_proba is None or not self.exact:
            return None
        ref = np.asarray(self.reference_proba(frame), dtype=np.float64)
        X = torch.as_tensor(self.encode(frame), dtype=torch.float64)
        clf = self.classifier.to("cpu", torch.float64)
        got = clf.proba(X).numpy()
        err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
        if not err <= atol:
            raise ModelLoadError(
                f"the torch conversion of the {self.kind} model disagrees with its predict_proba "
                f"by {err:.3g} (> {atol}); the model cannot be audited exactly — use a black-box "
                "option"
            )
        return err


def unwrap_model(model: Any) -> Any:
    """Peel MLflow pyfunc wrappers (duck-typed) down to the underlying model."""
    for _ in range(3):
        inner = None
        for attr in ("get_raw_model", "unwrap_python_model"):
            fn = getattr(model, attr, None)
            if callable(fn) and not isinstance(model, nn.Module):
                try:
                    inner = fn()
                    break
                except Exception:
                    continue
        if inner is None or inner is model:
            return model
        model = getattr(inner, "model", inner) if not _is_supported(inner) else inner
    return model


def _is_supported(obj: Any) -> bool:
    return isinstance(obj, nn.Module) or hasattr(obj, "predict_proba")


def numeric_encoder(columns: list[str]) -> Callable[[pd.DataFrame], np.ndarray]:
    def encode(frame: pd.DataFrame) -> np.ndarray:
        sub = frame.loc[:, columns]
        bad = [c for c in columns if not pd.api.types.is_numeric_dtype(sub[c].dtype)]
        if bad:
            raise DataContractError(
                f"feature column(s) {bad} are not numeric; a model that takes the table as-is "
                "needs numeric features (wrap it in a Pipeline with a OneHotEncoder)"
            )
        return np.array(sub.to_numpy(dtype=np.float64, na_value=np.nan), copy=True)

    return encode


def identity_decoder(columns: list[str]) -> Callable[[np.ndarray], pd.DataFrame]:
    return lambda Z: pd.DataFrame(np.asarray(Z), columns=columns)


def _positive_index(estimator: Any, positive_label: Any) -> int:
    classes = list(getattr(estimator, "classes_", [0, 1]))
    if len(classes) != 2:
        raise ModelLoadError(
            f"the model has {len(classes)} classes; the individual-fairness test needs a binary "
            "classifier"
        )
    if positive_label in classes:
        return classes.index(positive_label)
    return 1


def as_differentiable_model(
    model: Any,
    feature_columns: list[str] | tuple[str, ...],
    *,
    black_box: str = "none",
    fd_step: float = 1e-4,
    smoothing_sigma: float = 0.1,
    smoothing_samples: int = 20,
    seed: int = 0,
    positive_label: Any = 1,
    torch_output: str = "logits",
) -> ModelAdapter:
    """Wrap ``model`` for the gradient-flow attack (see the module docstring).

    ``model``: a torch module (inputs = the numeric ``feature_columns`` in order, output per
    ``torch_output``), a fitted sklearn estimator / Pipeline, an MLflow pyfunc model, or any
    object with ``predict_proba``. ``black_box``: ``"none"`` (default: gradients must be exact
    or the model is rejected), ``"finite_difference"`` or ``"smoothed"`` for models without
    gradients. Raises :class:`ModelLoadError` when the model cannot be differentiated and no
    black-box option is chosen.
    """
    if black_box not in BLACK_BOX_METHODS:
        raise ModelLoadError(
            f"black_box must be one of {list(BLACK_BOX_METHODS)}, got {black_box!r}"
        )
    cols = [str(c) for c in feature_columns]
    inner = unwrap_model(model)
    if isinstance(inner, nn.Module):
        return ModelAdapter(
            TorchClassifier(inner, torch_output, description=f"torch {type(inner).__name__}"),
            numeric_encoder(cols), cols, cols, [], identity_decoder(cols), True, "torch",
            f"torch module {type(inner).__name__}",
        )  # fmt: skip
    if not hasattr(inner, "predict_proba"):
        raise ModelLoadError(
            f"model of type {type(model).__name__} has neither gradients (torch module) nor "
            "predict_proba; the individual-fairness test needs class probabilities"
        )
    pos = _positive_index(inner, positive_label)
    steps = getattr(inner, "steps", None)
    if steps:
        pre = inner[:-1]
        final = inner[-1]
        encode = pipeline_encoder(pre)
        names, sources, groups, decode = describe_preprocessing(pre, cols)

        def ref(frame: pd.DataFrame) -> np.ndarray:
            return np.asarray(inner.predict_proba(frame.loc[:, cols]))[:, pos]

        def final_proba(Z: np.ndarray) -> np.ndarray:
            return np.asarray(final.predict_proba(Z))[:, pos]

        kind = f"Pipeline[{type(final).__name__}]"
        target = final
    else:
        encode = numeric_encoder(cols)
        names, sources, groups, decode = cols, cols, [], identity_decoder(cols)

        def ref(frame: pd.DataFrame) -> np.ndarray:
            return np.asarray(inner.predict_proba(frame.loc[:, cols]))[:, pos]

        def final_proba(Z: np.ndarray) -> np.ndarray:
            data = pd.DataFrame(Z, columns=cols) if hasattr(inner, "feature_names_in_") else Z
            return np.asarray(inner.predict_proba(data))[:, pos]

        kind = type(inner).__name__
        target = inner
    try:
        module, output, exact, desc = sklearn_to_torch(target)
        if pos == 0:
            module = _FlipModule(module, output)
        clf: Any = TorchClassifier(module, output, exact=exact, description=desc)
        if steps:
            desc = f"{desc} after sklearn preprocessing ({', '.join(n for n, _ in steps[:-1])})"
        return ModelAdapter(
            clf, encode, names, sources, groups, decode, exact, kind, desc,
            reference_proba=ref if exact else None,
        )  # fmt: skip
    except ModelLoadError as exc:
        if black_box == "none":
            raise ModelLoadError(
                f"{exc}. To audit it anyway set methods.individual_fairness.black_box to "
                "'finite_difference' (smooth models) or 'smoothed' (any model; approximate)"
            ) from None
    bb = BlackBoxClassifier(
        final_proba, black_box, fd_step=fd_step, sigma=smoothing_sigma,
        n_samples=smoothing_samples, seed=seed, description=kind,
    )  # fmt: skip
    return ModelAdapter(bb, encode, names, sources, groups, decode, False, kind, bb.description)


class _FlipModule(nn.Module):
    """Swap the classes of a binary module (when the positive label is ``classes_[0]``)."""

    def __init__(self, inner: nn.Module, output: str) -> None:
        super().__init__()
        self.inner = inner
        self.output = output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        if out.ndim == 2 and out.shape[1] == 2:
            return out.flip(1)
        return -out if self.output == "logits" else 1.0 - out


def pipeline_encoder(pre: Any) -> Callable[[pd.DataFrame], np.ndarray]:
    def encode(frame: pd.DataFrame) -> np.ndarray:
        Z = pre.transform(frame)
        if hasattr(Z, "toarray"):
            Z = Z.toarray()
        if isinstance(Z, pd.DataFrame):
            Z = Z.to_numpy()
        try:
            return np.array(Z, dtype=np.float64, copy=True)
        except (TypeError, ValueError):
            raise ModelLoadError(
                "the pipeline's preprocessing does not output numbers; the attack needs a numeric "
                "model input"
            ) from None

    return encode


def describe_preprocessing(
    pre: Any, cols: list[str]
) -> tuple[list[str], list[str], list[OneHotGroup], Callable[[np.ndarray], pd.DataFrame] | None]:
    """Encoded names, source column per encoded column, one-hot groups and a decoder for a
    preprocessing of a single ColumnTransformer / StandardScaler / OneHotEncoder (else names
    only)."""
    steps = [s for _, s in pre.steps] if hasattr(pre, "steps") else [pre]
    try:
        names = [str(n) for n in pre.get_feature_names_out(cols)]
    except Exception:
        fitted = getattr(pre, "feature_names_in_", None)
        if fitted is not None and [str(c) for c in fitted] != list(cols):
            raise ModelLoadError(
                f"the pipeline's preprocessing was fitted on the columns {[str(c) for c in fitted]}"
                f" but the model input is {list(cols)}; set columns.features to the columns it "
                "was fitted on"
            ) from None
        names = []
    if len(steps) != 1 or not names:  # no encoded names: the source columns are not known
        return names, names, [], None
    step = steps[0]
    blocks: list[tuple[Any, list[str], slice]] = []
    if type(step).__name__ == "ColumnTransformer":
        for name, trans, tcols in step.transformers_:
            sl = step.output_indices_.get(name, slice(0, 0))
            if sl.stop == sl.start or trans == "drop":
                continue
            tc = [cols[i] for i in tcols] if _is_int_list(tcols) else [str(c) for c in tcols]
            if hasattr(trans, "steps") and len(trans.steps) == 1:
                trans = trans.steps[0][1]
            blocks.append((trans, tc, sl))
    else:
        width = len(names) if names else None
        blocks.append((step, cols, slice(0, width)))
    sources: list[str] = [""] * len(names)
    groups: list[OneHotGroup] = []
    decoders: list[Callable[[np.ndarray, dict[str, Any]], None]] = []
    for trans, tc, sl in blocks:
        start = sl.start
        tname = type(trans).__name__ if not isinstance(trans, str) else trans
        if tname == "OneHotEncoder":
            pos = start
            for j, cats in enumerate(trans.categories_):
                dropped = trans.drop_idx_ is not None and trans.drop_idx_[j] is not None
                kept = [c for k, c in enumerate(cats) if not (dropped and k == trans.drop_idx_[j])]
                if getattr(trans, "_infrequent_enabled", False):
                    return names, names, [], None
                idx = list(range(pos, pos + len(kept)))
                for i in idx:
                    sources[i] = tc[j]
                groups.append(OneHotGroup(tc[j], idx, not dropped, [str(c) for c in kept]))
                decoders.append(
                    _onehot_decoder(tc[j], idx, kept, cats[trans.drop_idx_[j]] if dropped else None)
                )
                pos += len(kept)
        elif tname in ("StandardScaler", "MinMaxScaler", "passthrough", "FunctionTransformer"):
            for k, c in enumerate(tc):
                sources[start + k] = c
            decoders.append(_affine_decoder(trans, tc, start))
        else:
            return names, names, [], None
    if any(s == "" for s in sources):
        return names, names, [], None

    def decode(Z: np.ndarray) -> pd.DataFrame:
        out: dict[str, Any] = {}
        for dec in decoders:
            dec(np.asarray(Z, dtype=np.float64), out)
        return pd.DataFrame({c: out[c] for c in cols if c in out})

    return names, sources, groups, decode


def _is_int_list(x: Any) -> bool:
    arr = np.asarray(x)
    return arr.dtype.kind in "iu"


def _onehot_decoder(
    col: str, idx: list[int], kept: list[Any], dropped_cat: Any
) -> Callable[[np.ndarray, dict[str, Any]], None]:
    def dec(Z: np.ndarray, out: dict[str, Any]) -> None:
        block = Z[:, idx]
        cats = list(kept)
        if dropped_cat is not None:
            block = np.column_stack([block, 1.0 - block.sum(axis=1)])
            cats = [*cats, dropped_cat]
        out[col] = np.asarray(cats, dtype=object)[np.argmax(block, axis=1)]

    return dec


def _affine_decoder(trans: Any, tc: list[str], start: int) -> Callable[[np.ndarray, dict], None]:
    def dec(Z: np.ndarray, out: dict[str, Any]) -> None:
        block = Z[:, start : start + len(tc)]
        if not isinstance(trans, str) and hasattr(trans, "inverse_transform"):
            try:
                block = trans.inverse_transform(block)
            except Exception:
                pass
        for k, c in enumerate(tc):
            out[c] = np.asarray(block)[:, k]

    return dec
