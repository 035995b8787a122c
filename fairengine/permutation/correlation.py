"""Permutation test of zero Pearson correlation, studentized (DiCiccio et al. 2020, §4.1).

FairTest (Tramèr et al. 2017) tests association between a continuous protected attribute X and
the model error E by permuting E against X with Pearson's r as the statistic. That permutation
distribution approximates the sampling distribution of r only under *independence*; when X and
E are uncorrelated but dependent (e.g. the error's spread depends on X), √n·r has asymptotic
variance E[X̃²Ẽ²]/(Var X · Var E) ≠ 1 while the permutation distribution of √n·r has variance 1,
so the test of H0: ρ = 0 is invalid (the paper's Table 1). The studentized statistic

    Z = √n · r / τ̂,   τ̂² = n Σ x̃_i² ẽ_i² / (Σ x̃_i² · Σ ẽ_i²)   ⇒   Z = Σ x̃ ẽ / √(Σ x̃² ẽ²)

(x̃, ẽ centred; the means and Σx̃², Σẽ² do not change under permutation) is asymptotically
N(0, 1) under both the sampling and the permutation distribution, so its permutation test is
asymptotically valid for H0: ρ = 0 and exact under independence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError
from fairengine.permutation.two_group import ALTERNATIVES, permutation_pvalue


@dataclass
class CorrelationTestResult:
    """``statistic`` (Z when studentized, r otherwise), ``pvalue`` = (1+b)/(1+T),
    ``correlation`` r, and the T permuted statistics ``null_distribution``."""

    statistic: float
    pvalue: float
    correlation: float
    null_distribution: np.ndarray
    n_permutations: int
    studentized: bool
    alternative: str


def correlation_permutation_test(
    x: np.ndarray,
    e: np.ndarray,
    *,
    n_permutations: int = 999,
    studentize: bool = True,
    alternative: str = "two-sided",
    seed: int | np.random.Generator | None = 0,
    chunk: int = 256,
) -> CorrelationTestResult:
    """Permutation test of H0: corr(X, E) = 0 (studentized by default; module docstring).

    ``studentize=False`` is FairTest's un-studentized Pearson-r permutation test.
    """
    xa = np.asarray(x, dtype=np.float64)
    ea = np.asarray(e, dtype=np.float64)
    if xa.ndim != 1 or xa.shape != ea.shape or xa.size < 3:
        raise DataContractError("x and e must be 1-D arrays of the same length (at least 3)")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ea))):
        raise DataContractError("x and e must be finite")
    if alternative not in ALTERNATIVES:
        raise DataContractError(f"alternative must be one of {list(ALTERNATIVES)}")
    if n_permutations < 1:
        raise DataContractError(f"n_permutations must be >= 1, got {n_permutations}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    xc = xa - xa.mean()
    ec = ea - ea.mean()
    sxx, see = float(xc @ xc), float(ec @ ec)
    if sxx == 0 or see == 0:
        raise DataContractError("x and e must not be constant")
    xc2 = xc * xc
    denom = np.sqrt(sxx * see)

    def stat(num: np.ndarray, q: np.ndarray) -> np.ndarray:
        if studentize:
            with np.errstate(invalid="ignore", divide="ignore"):
                return num / np.sqrt(q)
        return num / denom

    r = float(xc @ ec) / denom
    obs = float(stat(np.asarray(xc @ ec), np.asarray(xc2 @ (ec * ec))))
    null = []
    done = 0
    while done < n_permutations:
        size = min(chunk, n_permutations - done)
        ep = rng.permuted(np.broadcast_to(ec, (size, ec.size)), axis=1)
        null.append(stat(ep @ xc, (ep * ep) @ xc2))
        done += size
    null_arr = np.concatenate(null)
    p, _, _ = permutation_pvalue(obs, null_arr, alternative)
    return CorrelationTestResult(obs, p, r, null_arr, n_permutations, studentize, alternative)
