r"""Exact optimal transport between two empirical samples (the paper's in-sample map).

``ot.emd`` (network simplex) solves min_P ⟨C, P⟩ over couplings of the uniform measures. With
equal sample sizes the optimal plan is a permutation (Birkhoff), so ``fit_transform`` returns the
matched target point of every source point: FlipTest's bijection (Black et al. 2020, §3). With
unequal sizes it returns the barycentric projection n_s · P y.

Pitfall (``../shared/docs/fliptest_ot.md`` §3.1): POT's default ``numItermax=100000`` stops early
above about 1k points and only warns (at n = 5,000 the plan cost was 16 % above optimal). We use
``max_iter=10**8`` and raise :class:`TransportConvergenceError` when the solver reports anything
but optimality.

Out of sample, ``transform`` uses the semi-discrete (c-transform) rule of the dual potential g:
T(x) = y_{j*}, j* = argmin_j c(x, y_j) − g_j, the ε → 0 limit of the entropic map. The dual of
an assignment problem is degenerate (ties), so a query equal to a fitted source point returns its
plan image instead; ``fit_transform`` returns the in-sample bijection directly.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import ot

from fairengine.errors import DataContractError
from fairengine.transport._base import (
    TransportConvergenceError,
    TransportMap,
    as_points,
    cost_matrix,
)


class ExactOTMap(TransportMap):
    """Exact OT map (``ot.emd``); the in-sample bijection of FlipTest.

    Parameters
    ----------
    cost : "sqeuclidean" (default; unique Brenier map) or "sqcityblock" ((Σ|x−y|)², the cost of
        FlipTest's exact-OT code; not strictly convex, so plans are not unique).
    max_iter : network-simplex iteration cap. Default 10**8 (POT's 100,000 is too small).
    max_samples : largest sample allowed per side (memory is about 40·n² bytes). Default 10,000.
    standardize, min_samples, constant_features : as in every map (:meth:`TransportMap.fit`).
        Defaults True, 10, "raise".

    Attributes
    ----------
    cost_ (total transport cost in standardized units), matching_ (target index per source row
    when sizes are equal, else None), potential_ (dual g), images_ (standardized in-sample
    images), support_ (standardized target).
    """

    def __init__(
        self,
        cost: str = "sqeuclidean",
        *,
        max_iter: int = 100_000_000,
        max_samples: int = 10_000,
        standardize: bool = True,
        min_samples: int = 10,
        constant_features: str = "raise",
    ) -> None:
        self.cost = cost
        self.max_iter = max_iter
        self.max_samples = max_samples
        self.standardize = standardize
        self.min_samples = min_samples
        self.constant_features = constant_features

    def _fit(self, zs: np.ndarray, zt: np.ndarray) -> None:
        if self.cost not in ("sqeuclidean", "sqcityblock"):
            raise DataContractError(
                f"cost must be 'sqeuclidean' or 'sqcityblock', got {self.cost!r}"
            )
        big = max(len(zs), len(zt))
        if big > self.max_samples:
            raise DataContractError(
                f"ExactOTMap: {big} points exceed max_samples={self.max_samples} (memory about "
                f"40·n² bytes = {40 * big**2 / 1e9:.1f} GB); subsample or use EntropicMap"
            )
        n, m = len(zs), len(zt)
        c = cost_matrix(zs, zt, self.cost)
        a, b = np.full(n, 1.0 / n), np.full(m, 1.0 / m)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan, log = ot.emd(a, b, c, numItermax=int(self.max_iter), log=True)
        problems = [str(w.message) for w in caught if "numItermax" in str(w.message)]
        if log.get("warning") is not None or log.get("result_code", 1) != 1 or problems:
            raise TransportConvergenceError(
                f"ot.emd did not reach optimality with max_iter={self.max_iter} "
                f"({log.get('warning') or problems}); raise max_iter or subsample"
            )
        self.cost_ = float(log["cost"])
        self.potential_ = np.asarray(log["v"], dtype=np.float64)
        self.support_ = zt
        self.anchors_ = zs
        self.images_ = (plan @ zt) * n
        self.matching_ = plan.argmax(axis=1) if n == m else None

    def fit_transform(self, source, target) -> np.ndarray:
        """Fit, then the in-sample images: the matched target points (a bijection when the
        samples have equal sizes), in original units."""
        self.fit(source, target)
        return self._unza(self.images_)

    def transform_fitted(self, source: Any) -> np.ndarray:
        """The in-sample images (the bijection), as ``fit_transform`` returned them; ``source``
        must be the fitted sample (checked by size and by its standardized points)."""
        self._check_fitted()
        arr, _ = as_points("source", source, self.n_features_in_)
        za = self._za(arr)
        if za.shape != self.anchors_.shape or not np.allclose(
            za, self.anchors_, rtol=0.0, atol=1e-9
        ):
            raise DataContractError(
                "transform_fitted: source is not the sample this ExactOTMap was fitted on; "
                "use transform(x) for other points"
            )
        return self._unza(self.images_)

    def _transform(self, z: np.ndarray) -> np.ndarray:
        out = np.empty_like(z)
        for start in range(0, len(z), 2048):
            q = z[start : start + 2048]
            j = np.argmin(cost_matrix(q, self.support_, self.cost) - self.potential_, axis=1)
            res = self.support_[j]
            # fitted source points keep their plan image (the dual is degenerate: ties)
            d_src = cost_matrix(q, self.anchors_, "sqeuclidean")
            i = d_src.argmin(axis=1)
            same = d_src[np.arange(len(q)), i] <= 1e-10
            res[same] = self.images_[i[same]]
            out[start : start + len(q)] = res
        return out
