r"""Fair metrics d²(x, x') = (x − x')ᵀ Σ (x − x') on the model's input space, as estimators.

Every metric is a scikit-learn-style estimator: parameters in ``__init__``, work in ``fit``,
learned state ending in ``_``. After ``fit`` each exposes

* ``sigma_`` (d × d, symmetric PSD) and ``sq_dist(X1, X2)`` (per-row d²);
* ``transform(X)`` = X L with Σ = L Lᵀ, so that d²(x, x') = ‖transform(x) − transform(x')‖²;
* ``basis_`` (d × k, orthonormal columns) for the subspace metrics Σ = I − (1 − w) Q Qᵀ, where
  moving inside span(Q) costs ``discount`` w ∈ [0, 1) times the Euclidean cost (w = 0: free);
* ``provenance_``: how it was fitted (a small JSON-ready dict for the report).

Metrics (notes ``individual.md`` §3):

* :class:`SensitiveSubspaceMetric` — Yurochkin et al. (2020) App. B.1, the metric of Maity et al.
  (2021) §4.2/App. F.2: fit one (multinomial) logistic regression per protected attribute on x,
  H = span of the coefficient vectors (orthonormalised by SVD, ``scipy.linalg.orth``),
  Σ = I − P_H. Protected attributes that are themselves model inputs add their unit axes e_j to H
  (moving them is free), and are left out of the regressions' inputs.
* :class:`SVDSensitiveSubspaceMetric` — the top-k right singular vectors of a matrix whose rows
  span the sensitive directions (uncentred; e.g. sensitive-term embeddings, or stacked
  coefficient vectors as in the original SenSR code), Σ = I − QQᵀ.
* :class:`FACEMetric` — Mukherjee et al. (2020) "FACE" (= SenSR App. B.2): centre each group of
  mutually comparable samples at its mean, stack, take the top-k right singular vectors.
* :class:`EXPLOREMetric` — Mukherjee et al. (2020) "EXPLORE": pairs (x1, x2) labelled comparable
  (1) or not (0), P(comparable) = 2/(1 + e^{d²}); Σ is the MLE over the PSD cone, fitted by
  projected mini-batch gradient descent with steps 1/(1 + ⌊m/100⌋).
* :class:`MahalanobisMetric` — a user-supplied PSD Σ.
* :class:`DiscountedDirectionsMetric` — user-supplied free ("discounted") directions, e.g. the
  simulation metric of Maity et al. §4.1: in 2-D with the free direction v = (cos β, sin β),
  Σ = I − v vᵀ and d² = (uᵀ(x − x'))² with u ⊥ v.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from fairengine.errors import DataContractError

__all__ = [
    "DiscountedDirectionsMetric",
    "EXPLOREMetric",
    "FACEMetric",
    "FairMetricBase",
    "MahalanobisMetric",
    "SVDSensitiveSubspaceMetric",
    "SensitiveSubspaceMetric",
    "explore_pairs",
]


def _as_matrix(X: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataContractError(f"{name} must be a numeric array") from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise DataContractError(f"{name} must be 2-D (rows × features), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr).all(axis=0)).tolist()
        raise DataContractError(
            f"{name} has missing or infinite values in column(s) {bad[:10]}; impute them first"
        )
    return arr


def _orthonormal_basis(vectors: np.ndarray, d: int) -> np.ndarray:
    """Orthonormal basis (d × k) of the span of the rows of ``vectors`` (SVD, rank-revealing)."""
    if vectors.size == 0:
        return np.zeros((d, 0))
    return scipy.linalg.orth(vectors.T)


class FairMetricBase(BaseEstimator):
    """Shared behaviour of fitted fair metrics (``sigma_`` and optional ``basis_``/``discount``)."""

    def _set_subspace(self, basis: np.ndarray, discount: float, d: int) -> None:
        q = np.asarray(basis, dtype=np.float64).reshape(d, -1)
        self.basis_ = q
        self.n_features_in_ = d
        self.sigma_ = np.eye(d) - (1.0 - discount) * (q @ q.T)
        self.sigma_ = 0.5 * (self.sigma_ + self.sigma_.T)

    def _check_fitted(self) -> None:
        if not hasattr(self, "sigma_"):
            raise DataContractError(f"{type(self).__name__} is not fitted; call fit() first")

    @property
    def low_rank_(self) -> tuple[np.ndarray, float] | None:
        """(Q, discount) when Σ = I − (1 − w) QQᵀ, else None (used for O(ndk) penalties)."""
        if hasattr(self, "basis_"):
            return self.basis_, float(getattr(self, "discount", 0.0))
        return None

    def sq_dist(self, X1: Any, X2: Any) -> np.ndarray:
        """Per-row squared fair distance (x1 − x2)ᵀ Σ (x1 − x2)."""
        self._check_fitted()
        a = _as_matrix(X1, "X1")
        b = _as_matrix(X2, "X2")
        if a.shape != b.shape or a.shape[1] != self.n_features_in_:
            raise DataContractError(
                f"X1 and X2 must both have shape (n, {self.n_features_in_}); got {a.shape} and "
                f"{b.shape}"
            )
        diff = a - b
        return np.einsum("ij,jk,ik->i", diff, self.sigma_, diff)

    def transform(self, X: Any) -> np.ndarray:
        """X L with Σ = L Lᵀ (symmetric square root), so d² is a Euclidean distance after it."""
        self._check_fitted()
        a = _as_matrix(X, "X")
        w, v = np.linalg.eigh(self.sigma_)
        root = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T
        return a @ root

    def largest_eigenvalue(self) -> float:
        """σ_max of Σ: the Euler step of the penalty is stable iff η λ σ_max < 1."""
        self._check_fitted()
        return float(np.linalg.eigvalsh(self.sigma_)[-1])


def _check_discount(discount: float) -> float:
    if not (isinstance(discount, int | float) and 0.0 <= float(discount) < 1.0):
        raise DataContractError(f"discount must lie in [0, 1), got {discount!r}")
    return float(discount)


class MahalanobisMetric(FairMetricBase):
    """A user-supplied Mahalanobis matrix Σ (symmetric PSD, d × d)."""

    def __init__(self, sigma: Any = None) -> None:
        self.sigma = sigma

    def fit(self, X: Any = None, y: Any = None) -> MahalanobisMetric:
        """Validate Σ (symmetric, PSD up to 1e-10 relative); ``X``, if given, fixes d."""
        if self.sigma is None:
            raise DataContractError("MahalanobisMetric needs sigma (a d × d PSD matrix)")
        s = _as_matrix(self.sigma, "sigma")
        if s.shape[0] != s.shape[1]:
            raise DataContractError(f"sigma must be square, got shape {s.shape}")
        if not np.allclose(s, s.T, atol=1e-10 * max(1.0, np.abs(s).max())):
            raise DataContractError("sigma must be symmetric")
        w = np.linalg.eigvalsh(s)
        if w[0] < -1e-10 * max(1.0, abs(w[-1])):
            raise DataContractError(
                f"sigma must be positive semi-definite; smallest eigenvalue {w[0]:.3g}"
            )
        if X is not None and _as_matrix(X, "X").shape[1] != s.shape[0]:
            raise DataContractError(
                f"sigma is {s.shape[0]} × {s.shape[0]} but X has {_as_matrix(X, 'X').shape[1]} "
                "columns"
            )
        self.sigma_ = 0.5 * (s + s.T)
        self.n_features_in_ = s.shape[0]
        self.provenance_ = {"metric": "mahalanobis", "source": "user-supplied sigma"}
        return self


class DiscountedDirectionsMetric(FairMetricBase):
    """Σ = I − (1 − w) QQᵀ for user-given free directions (rows of ``directions``).

    Maity et al. (2021) §4.1 simulation: ``directions=[[cos β, sin β]]`` (β = 0 is the true metric,
    β = 5°, 10° the misspecified ones) gives d² = (uᵀ(x − x'))², u = (−sin β, cos β).
    """

    def __init__(self, directions: Any = None, discount: float = 0.0) -> None:
        self.directions = directions
        self.discount = discount

    def fit(self, X: Any = None, y: Any = None) -> DiscountedDirectionsMetric:
        if self.directions is None:
            raise DataContractError("DiscountedDirectionsMetric needs directions (k × d)")
        w = _check_discount(self.discount)
        v = _as_matrix(self.directions, "directions")
        d = v.shape[1]
        if X is not None and _as_matrix(X, "X").shape[1] != d:
            raise DataContractError(f"directions have {d} columns but X has a different width")
        self._set_subspace(_orthonormal_basis(v, d), w, d)
        self.provenance_ = {
            "metric": "discounted_directions",
            "n_directions": int(v.shape[0]),
            "rank": int(self.basis_.shape[1]),
            "discount": w,
        }
        return self

    @classmethod
    def rotated_2d(cls, degrees: float, discount: float = 0.0) -> DiscountedDirectionsMetric:
        """The simulation metric of Maity et al. §4.1: free direction (cos β, sin β), fitted."""
        b = math.radians(degrees)
        return cls(directions=[[math.cos(b), math.sin(b)]], discount=discount).fit()


class SensitiveSubspaceMetric(FairMetricBase):
    """Sensitive-subspace metric from logistic regressions of the protected attributes (B.1).

    Parameters
    ----------
    C, penalty, solver, max_iter, fit_intercept : passed to sklearn ``LogisticRegression``
        (defaults = sklearn's defaults, the paper's audit metric: L2, C = 1, lbfgs, 100 iter).
    protected_columns : indices of model-input columns that *are* protected attributes (or their
        one-hot columns): their unit axes are added to H and they are excluded from the
        regressions' inputs.
    discount : cost w of moving inside H (0: free, the paper).

    ``fit(X, A)``: ``A`` is (n,) or (n, m) integer group codes (one column per protected
    attribute); a binary attribute contributes one coefficient vector, a K-class one K vectors
    (multinomial; their span has rank K − 1 after removing the common component).
    """

    def __init__(
        self,
        C: float = 1.0,
        penalty: str = "l2",
        solver: str = "lbfgs",
        max_iter: int = 100,
        fit_intercept: bool = True,
        protected_columns: Sequence[int] | None = None,
        discount: float = 0.0,
    ) -> None:
        self.C = C
        self.penalty = penalty
        self.solver = solver
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.protected_columns = protected_columns
        self.discount = discount

    def fit(self, X: Any, A: Any) -> SensitiveSubspaceMetric:
        Xa = _as_matrix(X, "X")
        n, d = Xa.shape
        codes = np.asarray(A)
        if codes.ndim == 1:
            codes = codes[:, None]
        if codes.ndim != 2 or codes.shape[0] != n:
            raise DataContractError(
                f"A must have one row per row of X ({n}); got shape {np.shape(A)}"
            )
        w = _check_discount(self.discount)
        prot = sorted({int(j) for j in (self.protected_columns or ())})
        if any(j < 0 or j >= d for j in prot):
            raise DataContractError(f"protected_columns {prot} out of range for {d} columns")
        keep = np.setdiff1d(np.arange(d), prot)
        vectors: list[np.ndarray] = []
        converged = True
        for col in range(codes.shape[1]):
            a = codes[:, col]
            if np.unique(a).size < 2:
                raise DataContractError(
                    f"protected attribute column {col} of A has a single value; the sensitive "
                    "subspace needs at least two groups"
                )
            kw: dict[str, Any] = {
                "C": self.C, "solver": self.solver, "max_iter": self.max_iter,
                "fit_intercept": self.fit_intercept,
            }  # fmt: skip
            if self.penalty != "l2":
                kw["l1_ratio"] = 1.0 if self.penalty == "l1" else 0.0
                if self.penalty == "none":
                    kw["C"] = np.inf
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                lr = LogisticRegression(**kw).fit(Xa[:, keep], a)
            converged &= not any(issubclass(c.category, ConvergenceWarning) for c in caught)
            coef = np.zeros((lr.coef_.shape[0], d))
            coef[:, keep] = lr.coef_
            vectors.extend(coef)
        for j in prot:
            e = np.zeros(d)
            e[j] = 1.0
            vectors.append(e)
        basis = _orthonormal_basis(np.asarray(vectors), d)
        self._set_subspace(basis, w, d)
        self.coef_ = np.asarray(vectors)
        self.provenance_ = {
            "metric": "sensitive_subspace",
            "estimator": f"LogisticRegression(C={self.C}, penalty={self.penalty!r}, "
            f"solver={self.solver!r}, max_iter={self.max_iter})",
            "n_fit_rows": int(n),
            "n_attributes": int(codes.shape[1]),
            "protected_axes": prot,
            "rank": int(basis.shape[1]),
            "discount": w,
            "converged": bool(converged),
        }
        return self


class SVDSensitiveSubspaceMetric(FairMetricBase):
    """Σ = I − QQᵀ with Q the top ``n_components`` right singular vectors of X (uncentred).

    Use when the rows of X themselves span the sensitive directions (sensitive-term embeddings,
    stacked classifier coefficients). For groups of comparable samples use :class:`FACEMetric`.
    """

    def __init__(self, n_components: int = 1, discount: float = 0.0) -> None:
        self.n_components = n_components
        self.discount = discount

    def fit(self, X: Any, y: Any = None) -> SVDSensitiveSubspaceMetric:
        Xa = _as_matrix(X, "X")
        k = _check_components(self.n_components, Xa.shape)
        _, s, vt = np.linalg.svd(Xa, full_matrices=False)
        q = _sign_fix(vt[:k].T)
        self._set_subspace(q, _check_discount(self.discount), Xa.shape[1])
        self.singular_values_ = s
        self.provenance_ = {
            "metric": "svd_sensitive_subspace", "n_components": k, "n_fit_rows": Xa.shape[0],
            "explained_share": float((s[:k] ** 2).sum() / max((s**2).sum(), 1e-300)),
        }  # fmt: skip
        return self


class FACEMetric(FairMetricBase):
    """FACE: top-k principal directions of within-group-centred comparable samples.

    ``fit(X, groups)``: ``groups`` labels each row with the id of its set of mutually comparable
    samples (e.g. counterfactual pairs share an id). Rows are centred at their group mean,
    stacked, and Q = top ``n_components`` right singular vectors (deterministic sign).
    """

    def __init__(self, n_components: int = 1, discount: float = 0.0) -> None:
        self.n_components = n_components
        self.discount = discount

    def fit(self, X: Any, groups: Any) -> FACEMetric:
        Xa = _as_matrix(X, "X")
        g = np.asarray(groups)
        if g.shape != (Xa.shape[0],):
            raise DataContractError(
                f"groups must give one comparable-set id per row ({Xa.shape[0]}), got shape "
                f"{g.shape}"
            )
        k = _check_components(self.n_components, Xa.shape)
        _, inv, counts = np.unique(g, return_inverse=True, return_counts=True)
        if counts.max() < 2:
            raise DataContractError("FACE needs comparable sets with at least 2 rows each")
        sums = np.zeros((counts.size, Xa.shape[1]))
        np.add.at(sums, inv, Xa)
        centred = Xa - (sums / counts[:, None])[inv]
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        self._set_subspace(_sign_fix(vt[:k].T), _check_discount(self.discount), Xa.shape[1])
        self.singular_values_ = s
        self.provenance_ = {
            "metric": "face", "n_components": k, "n_fit_rows": int(Xa.shape[0]),
            "n_groups": int(counts.size),
            "explained_share": float((s[:k] ** 2).sum() / max((s**2).sum(), 1e-300)),
        }  # fmt: skip
        return self


def _check_components(k: Any, shape: tuple[int, int]) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= min(shape):
        raise DataContractError(f"n_components must be an integer in [1, {min(shape)}], got {k!r}")
    return int(k)


def _sign_fix(q: np.ndarray) -> np.ndarray:
    """Make each column's largest-|.| entry positive (deterministic SVD signs)."""
    idx = np.argmax(np.abs(q), axis=0)
    signs = np.sign(q[idx, np.arange(q.shape[1])])
    signs[signs == 0] = 1.0
    return q * signs


class EXPLOREMetric(FairMetricBase):
    """EXPLORE (Mukherjee et al. 2020): MLE of Σ under P(comparable | D) = 2/(1 + exp(DᵀΣD)).

    Negative log-likelihood per pair with d = DᵀΣD: y = 1: log(1 + e^d) − log 2;
    y = 0: −log((e^d − 1)/(e^d + 1)). Its derivative in d is g = σ(d) (y = 1) and
    −σ(d)·2/(e^d − 1) (y = 0), so ∇_Σ = mean(g_i D_i D_iᵀ). Projected mini-batch gradient descent:
    Σ ← Π_PSD(Σ − t_m ∇), t_m = ``step`` /(1 + ⌊m/100⌋), d clamped at ≥ 1e-10, Π_PSD clips
    eigenvalues below 0. Deviation from the authors' code: t_m is halved (up to 30 times) until
    the mini-batch NLL does not increase — incomparable pairs at d ≈ 0 have gradients ~1/d that
    otherwise make the fixed-step iteration diverge. ``init="identity"`` (the authors' Adult
    code) or ``"random"`` (a normalised Wishart draw, as inFairness). ``nll_`` records the
    full-data NLL every 100 steps.
    """

    def __init__(
        self,
        n_iter: int = 2000,
        batch_size: int = 1000,
        step: float = 1.0,
        init: str = "identity",
        random_state: int | None = 0,
    ) -> None:
        self.n_iter = n_iter
        self.batch_size = batch_size
        self.step = step
        self.init = init
        self.random_state = random_state

    @staticmethod
    def negative_log_likelihood(sigma: np.ndarray, D: np.ndarray, y: np.ndarray) -> float:
        """Mean EXPLORE negative log-likelihood of Σ for pair differences D and labels y."""
        d = np.maximum(np.einsum("ij,jk,ik->i", D, sigma, D), 1e-10)
        nll_comp = np.logaddexp(0.0, d) - math.log(2.0)
        nll_inc = -(np.log(-np.expm1(-d)) - np.log1p(np.exp(-d)))
        return float(np.mean(np.where(y == 1, nll_comp, nll_inc)))

    def fit(self, X1: Any, X2: Any, y: Any) -> EXPLOREMetric:
        a = _as_matrix(X1, "X1")
        b = _as_matrix(X2, "X2")
        if a.shape != b.shape:
            raise DataContractError(f"X1 and X2 must have the same shape, got {a.shape}, {b.shape}")
        lab = np.asarray(y).ravel()
        if lab.shape[0] != a.shape[0] or not np.isin(lab, (0, 1)).all():
            raise DataContractError("y must hold one 0/1 comparability label per pair")
        if self.init not in ("identity", "random"):
            raise DataContractError(f"init must be 'identity' or 'random', got {self.init!r}")
        n, d = a.shape
        D = a - b
        rng = np.random.default_rng(self.random_state)
        if self.init == "identity":
            sigma = np.eye(d)
        else:
            g = rng.standard_normal((d, d))
            sigma = g @ g.T
            sigma /= np.linalg.norm(sigma)
        bs = min(int(self.batch_size), n)
        nll = []
        for m in range(int(self.n_iter)):
            idx = rng.choice(n, size=bs, replace=False)
            Db, yb = D[idx], lab[idx]
            dist = np.maximum(np.einsum("ij,jk,ik->i", Db, sigma, Db), 1e-10)
            sig = 1.0 / (1.0 + np.exp(-dist))
            # y = 0: −σ(d)·2/(e^d − 1) = −2e^{−d}/(1 − e^{−2d}), stable for large d
            gcoef = np.where(yb == 1, sig, -2.0 * np.exp(-dist) / -np.expm1(-2.0 * dist))
            grad = (Db * gcoef[:, None]).T @ Db / bs
            t = self.step / (1.0 + m // 100)
            before = self.negative_log_likelihood(sigma, Db, yb)
            for _ in range(30):  # backtracking: halve t until the batch NLL does not increase
                w, v = np.linalg.eigh(0.5 * ((sigma - t * grad) + (sigma - t * grad).T))
                cand = (v * np.clip(w, 0.0, None)) @ v.T
                if self.negative_log_likelihood(cand, Db, yb) <= before:
                    sigma = cand
                    break
                t *= 0.5
            if m % 100 == 0 or m == self.n_iter - 1:
                nll.append(self.negative_log_likelihood(sigma, D, lab))
        self.sigma_ = 0.5 * (sigma + sigma.T)
        self.n_features_in_ = d
        self.nll_ = np.asarray(nll)
        self.provenance_ = {
            "metric": "explore", "n_pairs": int(n), "n_iter": int(self.n_iter),
            "batch_size": bs, "init": self.init, "seed": self.random_state,
            "final_nll": float(nll[-1]) if nll else math.nan,
        }  # fmt: skip
        return self


def explore_pairs(
    X: Any,
    protected: Any,
    label: Any,
    *,
    n_comparable: int = 10000,
    n_incomparable: int = 5000,
    random_state: int | None = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Comparable/incomparable pairs by the EXPLORE authors' Adult heuristic.

    Comparable (1): same label, different protected group (``n_comparable`` per label value).
    Incomparable (0): different labels (``n_incomparable``). Returns (X1, X2, y).
    """
    Xa = _as_matrix(X, "X")
    a = np.asarray(protected).ravel()
    lab = np.asarray(label).ravel()
    rng = np.random.default_rng(random_state)
    x1, x2, yy = [], [], []
    for c in np.unique(lab):
        idx = np.flatnonzero(lab == c)
        i = rng.choice(idx, size=n_comparable)
        j = rng.choice(idx, size=n_comparable)
        ok = a[i] != a[j]
        x1.append(Xa[i[ok]])
        x2.append(Xa[j[ok]])
        yy.append(np.ones(int(ok.sum()), dtype=np.int64))
    i = rng.choice(Xa.shape[0], size=4 * n_incomparable)
    j = rng.choice(Xa.shape[0], size=4 * n_incomparable)
    ok = np.flatnonzero(lab[i] != lab[j])[:n_incomparable]
    x1.append(Xa[i[ok]])
    x2.append(Xa[j[ok]])
    yy.append(np.zeros(ok.size, dtype=np.int64))
    return np.concatenate(x1), np.concatenate(x2), np.concatenate(yy)
