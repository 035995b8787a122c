r"""Figure 1 of Maity et al. (ICLR 2021, §4.1 / App. E): the test statistic over a grid of
logistic classifiers on the 2-D simulation (:func:`fairengine.datasets.make_maity_simulation`).

For each (θ1, θ2) ∈ {−4, −3.6, ..., 4}² the classifier is f(x) = σ(θᵀx + b) with the intercept b
solving Σ_i σ(θᵀx_i + b) = Σ_i y_i (the logistic-loss score equation in b; bisection on
[−20, 20] to 1e-7, as the authors' ``loss_linear.py``). The fair metric leaves the direction
v = (cos β, sin β) free (β = 0: the true metric; 5°, 10°: misspecified), i.e.
d² = (uᵀ(x − x'))² with u = (−sin β, cos β). The attack is Algorithm 1 with λ = 100, T = 400,
η_k = 0.02 k^{−2/3} and the statistic is T_n = S_n − 1.645 V_n/√n with ddof 0 (the paper's
code).

``replicate_quirks=True`` reproduces the authors' stored grids: their attack's classifier adds
the fitted intercept twice (logit θᵀx + 2b, ``individual.md`` §2.9). With the correct single
intercept (the default) the values differ, but the decision pattern the paper describes — reject
iff |θ1| is large, whatever θ2 — is the same under the true metric.

All 441 classifiers × n rows are attacked in one batched flow: the row's (θ1, θ2, b) are appended
as immutable input columns, so every row carries its own classifier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fairengine.datasets import make_maity_simulation
from fairengine.individual.attack import gradient_flow
from fairengine.individual.fair_metric import DiscountedDirectionsMetric
from fairengine.individual.torch_models import TorchClassifier

__all__ = ["Figure1Grid", "figure1_grid", "fit_intercepts"]

GRID = np.round(np.arange(-4.0, 4.1, 0.4), 10)


def fit_intercepts(
    X: np.ndarray, y: np.ndarray, thetas: np.ndarray, lo: float = -20.0, hi: float = 20.0,
    tol: float = 1e-7,
) -> np.ndarray:  # fmt: skip
    """b solving Σ σ(θᵀx_i + b) = Σ y_i for each row θ of ``thetas`` (vectorised bisection)."""
    z = X @ thetas.T  # (n, m)
    target = float(np.sum(y))
    lo_v = np.full(thetas.shape[0], lo)
    hi_v = np.full(thetas.shape[0], hi)
    while np.max(hi_v - lo_v) > tol:
        mid = 0.5 * (lo_v + hi_v)
        f = np.sum(1.0 / (1.0 + np.exp(-(z + mid))), axis=0) - target
        hi_v = np.where(f > 0, mid, hi_v)
        lo_v = np.where(f > 0, lo_v, mid)
    return 0.5 * (lo_v + hi_v)


class _RowLogit(nn.Module):
    """logit = x1 θ1 + x2 θ2 + m·b, with (θ1, θ2, b) read from input columns 2..4."""

    def __init__(self, intercept_multiplier: float) -> None:
        super().__init__()
        self.m = intercept_multiplier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 0] * x[:, 2] + x[:, 1] * x[:, 3] + self.m * x[:, 4]


@dataclass
class Figure1Grid:
    """``lower_bound[i, j]`` is T_n for (θ1, θ2) = (grid[i], grid[j]); ``pvalue`` its test."""

    angle: float
    grid: np.ndarray
    lower_bound: np.ndarray
    mean_ratio: np.ndarray
    pvalue: np.ndarray
    replicate_quirks: bool

    def reject(self, delta: float = 1.25) -> np.ndarray:
        return self.lower_bound > delta


def figure1_grid(
    angle: float = 0.0,
    *,
    replicate_quirks: bool = False,
    n: int = 400,
    seed: int = 1,
    lam: float = 100.0,
    steps: int = 400,
    eta: float = 0.02,
    delta: float = 1.25,
    grid: np.ndarray | None = None,
    device: str = "cpu",
    num_threads: int | None = None,
) -> Figure1Grid:
    """Compute the Figure 1 grid at rotation ``angle`` (degrees). See the module docstring."""
    from scipy.stats import norm

    ds = make_maity_simulation(n=n, seed=seed)
    X = ds.frame[["x1", "x2"]].to_numpy(float)
    y = ds.frame["y"].to_numpy()
    g = GRID if grid is None else np.asarray(grid, float)
    t1, t2 = np.meshgrid(g, g, indexing="ij")
    thetas = np.column_stack([t1.ravel(), t2.ravel()])
    b = fit_intercepts(X, y, thetas)
    m = thetas.shape[0]
    rows = np.column_stack([np.tile(X, (m, 1)), np.repeat(thetas, n, axis=0), np.repeat(b, n)])
    yy = np.tile(y, m)
    beta = math.radians(angle)
    metric = DiscountedDirectionsMetric(
        directions=[[math.cos(beta), math.sin(beta), 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0],
                    [0, 0, 0, 0, 1]],
    ).fit()  # fmt: skip
    clf = TorchClassifier(_RowLogit(2.0 if replicate_quirks else 1.0), "logits")
    flow = gradient_flow(
        clf, rows, yy, metric, lam=lam, steps=steps, eta=eta, schedule="power", power=2 / 3,
        mutable_mask=[True, True, False, False, False], device=device,
        num_threads=num_threads,
    )  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (flow.loss_mapped / flow.loss_original).reshape(m, n)
    ok = np.isfinite(r)
    cnt = ok.sum(axis=1)
    rz = np.where(ok, r, 0.0)
    mean = rz.sum(axis=1) / cnt
    sd = np.sqrt(np.where(ok, (r - mean[:, None]) ** 2, 0.0).sum(axis=1) / cnt)  # ddof 0
    se = sd / np.sqrt(cnt)
    lb = mean - 1.645 * se
    with np.errstate(divide="ignore", invalid="ignore"):
        pval = np.where(se > 0, norm.sf((mean - delta) / se), np.where(mean > delta, 0.0, 1.0))
    shape = (g.size, g.size)
    return Figure1Grid(
        float(angle),
        g,
        lb.reshape(shape),
        mean.reshape(shape),
        pval.reshape(shape),
        replicate_quirks,
    )
