r"""The linear (Gaussian, Bures-Wasserstein) OT map: the closed form between N(m_s, Σ_s) and
N(m_t, Σ_t) (Knott & Smith 1984), a baseline for the other estimators:

.. math:: T(x) = m_t + A (x − m_s), \qquad
          A = Σ_s^{-1/2} (Σ_s^{1/2} Σ_t Σ_s^{1/2})^{1/2} Σ_s^{-1/2}.

A is symmetric positive definite, so T is the gradient of a convex quadratic (the OT map
between the Gaussians, and between any two distributions of the same location-scatter family).
Exact for Gaussians; it cannot match non-Gaussian marginals (``fliptest_ot.md`` §3.6: Lipton
hair-length KS 0.068). Same formula as ``ot.da.LinearTransport``.
"""

from __future__ import annotations

import numpy as np

from fairengine.transport._base import TransportMap


def _sym_power(s: np.ndarray, p: float) -> np.ndarray:
    w, v = np.linalg.eigh((s + s.T) / 2)
    w = np.maximum(w, 1e-300)
    return (v * w**p) @ v.T


class LinearOTMap(TransportMap):
    """Gaussian closed-form OT map (module docstring).

    Parameters
    ----------
    reg : ridge added to both covariances (standardized units). Default 1e-8.
    standardize, min_samples, constant_features : as in every map (:meth:`TransportMap.fit`).
        Defaults True, 10, "raise".

    Attributes: ``A_`` (matrix), ``mean_source_``, ``mean_target_`` (standardized units).
    """

    def __init__(
        self,
        reg: float = 1e-8,
        *,
        standardize: bool = True,
        min_samples: int = 10,
        constant_features: str = "raise",
    ) -> None:
        self.reg = reg
        self.standardize = standardize
        self.min_samples = min_samples
        self.constant_features = constant_features

    def _fit(self, zs: np.ndarray, zt: np.ndarray) -> None:
        d = zs.shape[1]
        self.mean_source_, self.mean_target_ = zs.mean(0), zt.mean(0)
        cs = np.atleast_2d(np.cov(zs, rowvar=False, bias=True)) + self.reg * np.eye(d)
        ct = np.atleast_2d(np.cov(zt, rowvar=False, bias=True)) + self.reg * np.eye(d)
        rs = _sym_power(cs, 0.5)
        rs_inv = _sym_power(cs, -0.5)
        self.A_ = rs_inv @ _sym_power(rs @ ct @ rs, 0.5) @ rs_inv

    def _transform(self, z: np.ndarray) -> np.ndarray:
        return (z - self.mean_source_) @ self.A_ + self.mean_target_
