r"""The entropic optimal-transport map (Pooladian & Niles-Weed 2021; POT's "continuous" map).

With uniform weights on source points x_1..x_n and target points y_1..y_m, squared-Euclidean
cost c(x, y) = ‖x − y‖² on standardized features and regularization ε, Sinkhorn's algorithm
finds dual potentials (f, g) of

.. math:: \min_{P \in \Pi(a, b)} \langle C, P\rangle + \varepsilon\,\mathrm{KL}(P \,\|\, a b^\top).

The entropic map extends to any point x (in or out of sample) by the softmax

.. math:: T_\varepsilon(x) = \sum_j y_j\, \frac{\exp((g_j - c(x, y_j))/\varepsilon)}
          {\sum_k \exp((g_k - c(x, y_k))/\varepsilon)},

which on the fitted source points equals the barycentric projection of the entropic plan. It is
consistent for the Brenier map as ε → 0 with n (bias of order ε); ε is chosen on held-out data.

Implementation notes (``../shared/docs/fliptest_ot.md`` §2-3):

* The potentials come from a *stabilized scaling* Sinkhorn (Schmitzer 2019) in float32
  (:mod:`fairengine.transport.sinkhorn`, the one Sinkhorn loop of the package): the kernel is
  stored as K_ij = exp(−(C_ij − f_i − g_j)/ε) around the current potentials, iterations are two
  matrix-vector products, and the scalings are absorbed into (f, g) whenever they leave
  [e^−20, e^20]. This avoids both POT's log-domain cost (10-20× slower on CPU) and the silent
  underflow of the plain kernel at small ε.
* Convergence is checked: the L1 row-marginal error must fall below ``tol``. Otherwise
  :class:`TransportConvergenceError` names ε; the potentials are checked finite.
* ``transform`` is a batched, max-shifted softmax (never NaN for far queries, unlike POT's
  ``SinkhornTransport.transform``). The map can only return convex combinations of target
  points, so far-away queries collapse; :meth:`EntropicMap.ood_mask` flags them (k-NN distance
  to the fitted source above its in-sample ``ood_quantile``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from fairengine.errors import DataContractError
from fairengine.library_threads import small_problem_threads
from fairengine.transport._base import TransportConvergenceError, TransportMap, as_points
from fairengine.transport.sinkhorn import (
    CUTOFF,
    solve_points,
    solve_uniform,
    squared_cost,
    torch_device,
    torch_dtype,
    torch_squared_cost,
)


def median_cost(
    zs: np.ndarray, zt: np.ndarray, rng: np.random.Generator, n_pairs: int = 20_000
) -> float:
    """Median of ‖x_i − y_j‖² over ``n_pairs`` random (source, target) pairs (20,000 by
    default: about 1 % relative sampling error, small beside the ε grid's factor-3 steps)."""
    i = rng.integers(0, len(zs), n_pairs)
    j = rng.integers(0, len(zt), n_pairs)
    return float(np.median(((zs[i] - zt[j]) ** 2).sum(1)))


NUMPY_MAX_ENTRIES = 4_000_000
"""CPU problems up to this many kernel entries (2,000 x 2,000) run the Sinkhorn loop in numpy
(:class:`~fairengine.transport.sinkhorn.CostKernel`: 2-3x less overhead per iteration); larger
ones and CUDA run it in torch (threaded products and exponentials)."""


def sinkhorn_potentials(
    zs: np.ndarray,
    zt: np.ndarray,
    epsilon: float,
    *,
    max_iter: int = 2000,
    tol: float = 1e-4,
    dtype: str = "float32",
    device: str = "cpu",
    epsilon_label: str | None = None,
    overrelaxation: float | str = "auto",
    init: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Dual potentials (f, g) of entropic OT between uniform empirical measures.

    Stabilized scaling Sinkhorn (module docstring) with over-relaxation
    u ← u^{1−ω} (a / Kv)^ω (Thibault et al. 2017). ``overrelaxation`` "auto" (default) starts
    plain and raises ω from the observed convergence rate towards the optimum
    2 / (1 + √(1 − θ)) (:mod:`fairengine.transport.overrelaxation`); a number fixes ω. An
    over-relaxed solve that fails to converge is repeated plain (ω = 1). ``epsilon`` is in
    cost units. CPU problems up to :data:`NUMPY_MAX_ENTRIES` run the loop in numpy from the cost
    matrix (:func:`~fairengine.transport.sinkhorn.solve_uniform`, with a warm start at 4ε),
    others in torch from the points (:func:`~fairengine.transport.sinkhorn.solve_points`).
    Returns a dict with ``f`` and ``g`` (float64 numpy), ``n_iter``, ``marginal_error``
    (‖P1 − a‖₁) and ``overrelaxation`` (the last ω).
    Raises :class:`TransportConvergenceError` naming ε when the marginal error stays above
    ``tol`` after ``max_iter`` iterations or when a potential becomes non-finite.
    """
    label = epsilon_label or f"epsilon={epsilon:.4g}"
    dt, dev = torch_dtype(dtype), torch_device(device)
    if dev.type == "cpu" and len(zs) * len(zt) <= NUMPY_MAX_ENTRIES:
        run = solve_uniform(
            squared_cost(np.asarray(zs, np.float64), np.asarray(zt, np.float64)),
            epsilon,
            max_iter=max_iter,
            tol=tol,
            dtype=np.float32 if dtype == "float32" else np.float64,
            overrelaxation=overrelaxation,
            init=init,
        )
    else:
        run = solve_points(
            torch.as_tensor(zs, dtype=dt, device=dev),
            torch.as_tensor(zt, dtype=dt, device=dev),
            epsilon,
            max_iter=max_iter,
            tol=tol,
            overrelaxation=overrelaxation,
            init=init,
        )
    f_out, g_out, err, it, omega = run.f, run.g, run.marginal_error, run.n_iter, run.omega
    if not (math.isfinite(err) and np.isfinite(f_out).all() and np.isfinite(g_out).all()):
        raise TransportConvergenceError(
            f"Sinkhorn produced non-finite potentials at {label}; increase epsilon or use "
            "dtype='float64'"
        )
    if err >= tol:
        raise TransportConvergenceError(
            f"Sinkhorn did not converge at {label} within max_iter={max_iter} iterations "
            f"(marginal error {err:.2e} > tol={tol:g}); increase epsilon or max_iter"
        )
    return {
        "f": f_out,
        "g": g_out,
        "n_iter": it,
        "marginal_error": err,
        "overrelaxation": omega,
    }


def energy_distance(x: np.ndarray, y: np.ndarray) -> float:
    """Energy distance 2E‖X−Y‖ − E‖X−X′‖ − E‖Y−Y′‖ (Székely & Rizzo), V-statistic form."""
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    dxy = torch.cdist(xt, yt).mean()
    dxx = torch.cdist(xt, xt).mean()
    dyy = torch.cdist(yt, yt).mean()
    return float(2 * dxy - dxx - dyy)


class EntropicMap(TransportMap):
    """Entropic OT map with out-of-sample softmax transform (module docstring for formulas).

    Parameters
    ----------
    epsilon : regularization relative to the median pairwise cost of the (standardized)
        fit sample: ε = epsilon · median ‖x_i − y_j‖². ``None`` (default) selects it from
        ``epsilon_grid`` on held-out data (smallest held-out energy distance between the mapped
        held-out source and the held-out target; non-converging values are skipped).
    epsilon_grid : candidate relative ε values. Default (0.01, 0.03, 0.1).
    validation_fraction : share of each sample held out for the ε selection. Default 0.2.
    max_anchors : fit on at most this many points per sample (random subsample; the map is
        smooth, so anchors lose little). Default 20,000.
    max_iter, tol : Sinkhorn iteration cap and L1 marginal-error tolerance. Defaults 2000, 1e-4.
    dtype, device : torch dtype ("float32" default) and device ("cpu" default, or "cuda").
    batch_size : query rows per softmax batch in ``transform``. Default 4096.
    ood_k, ood_quantile : the out-of-distribution guard (k-th nearest-neighbour distance to the
        fitted source above its in-sample quantile). Defaults 5, 0.99.
    standardize : pooled z-scoring of features before the cost. Default True.
    random_state : seed for subsampling and the held-out split. Default 0.
    min_samples : minimum rows per sample. Default 10.
    constant_features : "raise" (default) or "hold" features constant over source and
        target fixed (:meth:`TransportMap.fit`).

    Attributes
    ----------
    epsilon_ (relative), epsilon_abs_ (cost units), median_cost_, support_ (standardized
    target anchors), potential_ (g), source_potential_ (f, for :meth:`inverse_transform`),
    anchors_ (standardized source anchors), n_iter_, marginal_error_, epsilon_scores_ (held-out
    energy distance per candidate, NaN if it did not converge), ood_threshold_.
    """

    def __init__(
        self,
        epsilon: float | None = None,
        *,
        epsilon_grid: Sequence[float] = (0.01, 0.03, 0.1),
        validation_fraction: float = 0.2,
        max_anchors: int = 20_000,
        max_iter: int = 2000,
        tol: float = 1e-4,
        dtype: str = "float32",
        device: str = "cpu",
        batch_size: int = 4096,
        ood_k: int = 5,
        ood_quantile: float = 0.99,
        standardize: bool = True,
        random_state: int = 0,
        min_samples: int = 10,
        constant_features: str = "raise",
    ) -> None:
        self.epsilon = epsilon
        self.epsilon_grid = epsilon_grid
        self.validation_fraction = validation_fraction
        self.max_anchors = max_anchors
        self.max_iter = max_iter
        self.tol = tol
        self.dtype = dtype
        self.device = device
        self.batch_size = batch_size
        self.ood_k = ood_k
        self.ood_quantile = ood_quantile
        self.standardize = standardize
        self.random_state = random_state
        self.min_samples = min_samples
        self.constant_features = constant_features

    def _check_params(self) -> None:
        if self.epsilon is not None and not (
            isinstance(self.epsilon, int | float)
            and self.epsilon > 0
            and math.isfinite(self.epsilon)
        ):
            raise DataContractError(
                f"epsilon must be a positive number or None, got {self.epsilon!r}"
            )
        grid = list(self.epsilon_grid)
        if self.epsilon is None and (not grid or any(not (e > 0) for e in grid)):
            raise DataContractError(f"epsilon_grid must be positive numbers, got {grid!r}")
        if not 0 < self.validation_fraction < 1:
            raise DataContractError(
                f"validation_fraction must lie in (0, 1), got {self.validation_fraction!r}"
            )
        if self.max_anchors < self.min_samples:
            raise DataContractError(f"max_anchors must be >= {self.min_samples}")
        torch_dtype(self.dtype)
        torch_device(self.device)

    def _fit(self, zs: np.ndarray, zt: np.ndarray) -> None:
        self._check_params()
        n_ops = min(len(zs), self.max_anchors) * min(len(zt), self.max_anchors)
        with small_problem_threads(n_ops):
            self._fit_potentials(zs, zt)

    def _fit_potentials(self, zs: np.ndarray, zt: np.ndarray) -> None:
        rng = np.random.default_rng(self.random_state)
        if len(zs) > self.max_anchors:
            zs = zs[rng.choice(len(zs), self.max_anchors, replace=False)]
        if len(zt) > self.max_anchors:
            zt = zt[rng.choice(len(zt), self.max_anchors, replace=False)]
        self.median_cost_ = median_cost(zs, zt, rng)
        if self.epsilon is None:
            self.epsilon_scores_ = self._select_epsilon(zs, zt, rng)
            finite = {e: s for e, s in self.epsilon_scores_.items() if math.isfinite(s)}
            if not finite:
                raise TransportConvergenceError(
                    "Sinkhorn did not converge for any epsilon in "
                    f"epsilon_grid={list(self.epsilon_grid)} "
                    f"(relative to the median cost {self.median_cost_:.3g}); use larger values"
                )
            best = min(finite.values())
            self.epsilon_ = float(min(e for e, s in finite.items() if s == best))
        else:
            self.epsilon_scores_ = {}
            self.epsilon_ = float(self.epsilon)
        self.epsilon_abs_ = self.epsilon_ * self.median_cost_
        sol = self._solve(zs, zt, self.epsilon_)
        self.support_ = zt
        self.potential_ = sol["g"]
        self.source_potential_ = sol["f"]
        self.n_iter_ = sol["n_iter"]
        self.marginal_error_ = sol["marginal_error"]
        self.anchors_ = zs
        self._fit_ood(zs, rng)

    def _solve(self, zs: np.ndarray, zt: np.ndarray, eps_rel: float) -> dict[str, Any]:
        eps_abs = eps_rel * self.median_cost_
        return sinkhorn_potentials(
            zs,
            zt,
            eps_abs,
            max_iter=self.max_iter,
            tol=self.tol,
            dtype=self.dtype,
            device=self.device,
            epsilon_label=(
                f"epsilon={eps_rel:g} (x median cost {self.median_cost_:.3g} = {eps_abs:.3g})"
            ),
        )

    def _select_epsilon(
        self, zs: np.ndarray, zt: np.ndarray, rng: np.random.Generator
    ) -> dict[float, float]:
        def split(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            perm = rng.permutation(len(z))
            k = max(1, round(self.validation_fraction * len(z)))
            return z[perm[k:]], z[perm[:k]]

        s_fit, s_val = split(zs)
        t_fit, t_val = split(zt)
        cap = 2000
        s_val, t_val = s_val[:cap], t_val[:cap]
        scores: dict[float, float] = {}
        for e in sorted(float(v) for v in self.epsilon_grid):
            try:
                sol = self._solve(s_fit, t_fit, e)
            except TransportConvergenceError:
                scores[e] = math.nan
                continue
            mapped = self._softmax_map(s_val, t_fit, sol["g"], e * self.median_cost_)
            scores[e] = energy_distance(mapped, t_val)
        return scores

    def _softmax_map(
        self, z: np.ndarray, support: np.ndarray, g: np.ndarray, eps_abs: float
    ) -> np.ndarray:
        dt, dev = torch_dtype(self.dtype), torch_device(self.device)
        y = torch.as_tensor(support, dtype=dt, device=dev)
        shift = torch.as_tensor(g, dtype=dt, device=dev) - (y * y).sum(1)
        out = np.empty((len(z), y.shape[1]))
        for start in range(0, len(z), self.batch_size):
            q = torch.as_tensor(z[start : start + self.batch_size], dtype=dt, device=dev)
            logits = torch.addmm(shift[None, :], q, y.T, beta=1.0 / eps_abs, alpha=2.0 / eps_abs)
            logits.sub_(logits.max(dim=1, keepdim=True).values)
            w = logits.masked_fill_(logits < -CUTOFF, -math.inf).exp_()  # no denormals
            out[start : start + len(q)] = (
                ((w @ y) / w.sum(dim=1, keepdim=True)).double().cpu().numpy()
            )
        return out

    def _transform(self, z: np.ndarray) -> np.ndarray:
        with small_problem_threads(min(len(z), self.batch_size) * len(self.support_)):
            return self._softmax_map(z, self.support_, self.potential_, self.epsilon_abs_)

    def inverse_transform(self, y: Any) -> np.ndarray:
        r"""The entropic map of the same plan from target to source, in original units:

        .. math:: T^{-1}_\varepsilon(y) = \sum_i x_i \exp((f_i - c(y, x_i))/ε) \big/
                  \sum_k \exp((f_k - c(y, x_k))/ε),

        with the source potential f of the fitted Sinkhorn problem. Entropic OT is symmetric,
        so this is what fitting ``target -> source`` with the same ε gives (up to Sinkhorn's
        tolerance) without a second solve; FlipTest's permutation null uses it to get both
        directions from one refit."""
        self._check_fitted()
        arr, _ = as_points("y", y, self.n_features_in_)
        z = self._za(arr)
        with small_problem_threads(min(len(z), self.batch_size) * len(self.anchors_)):
            return self._unza(
                self._softmax_map(z, self.anchors_, self.source_potential_, self.epsilon_abs_)
            )

    # ------------------------------------------------------------- out-of-distribution guard
    def _knn_distance(self, z: np.ndarray, ref: np.ndarray, k: int) -> np.ndarray:
        dt, dev = torch_dtype(self.dtype), torch_device(self.device)
        r = torch.as_tensor(ref, dtype=dt, device=dev)
        out = np.empty(len(z))
        for start in range(0, len(z), self.batch_size):
            q = torch.as_tensor(z[start : start + self.batch_size], dtype=dt, device=dev)
            d = torch_squared_cost(q, r)
            out[start : start + len(q)] = (
                d.topk(k, dim=1, largest=False).values[:, -1].sqrt().cpu().numpy()
            )
        return out

    def _fit_ood(self, zs: np.ndarray, rng: np.random.Generator) -> None:
        k = min(self.ood_k, len(zs) - 1)
        probe = zs if len(zs) <= 2000 else zs[rng.choice(len(zs), 2000, replace=False)]
        # k + 1 nearest includes the point itself (distance 0): leave-one-out k-NN distance
        self.ood_k_ = k
        self.ood_threshold_ = float(
            np.quantile(self._knn_distance(probe, zs, k + 1), self.ood_quantile)
        )

    def ood_mask(self, x: Any) -> np.ndarray:
        """Boolean mask of query rows outside the fitted source's support: k-NN distance to the
        fitted source points above its in-sample ``ood_quantile`` (so about 1 − ood_quantile of
        in-distribution points are flagged by construction). A query whose value of a held
        (constant) feature differs from the fitted constant is flagged too."""
        self._check_fitted()
        arr, _ = as_points("x", x, self.n_features_in_)
        held = ~self.active_
        off = np.any(arr[:, held] != self.mean_[held], axis=1)
        return off | (
            self._knn_distance(self._za(arr), self.anchors_, self.ood_k_) > self.ood_threshold_
        )
