r"""Maity, Xue, Yurochkin & Sun (ICLR 2021) §3: the mean loss-ratio and error-rate-ratio tests.

Given the unfair map Φ (the gradient-flow attack, :mod:`fairengine.individual.attack`) and
an audit sample (x_i, y_i), i = 1..n:

**Mean loss ratio** (§3.1, eq. 3.4-3.10). With per-row losses ℓ0_i = ℓ(f(x_i), y_i) and
ℓ1_i = ℓ(f(Φ(x_i, y_i)), y_i) and a loss floor ε ≥ 0 (``eps``, §5.5 of the project notes),

.. math::

    r_i = \frac{ℓ1_i + ε}{ℓ0_i + ε}, \qquad S_n = \frac1n \sum_i r_i, \qquad
    V_n^2 = \frac{1}{n - \text{ddof}} \sum_i (r_i - S_n)^2, \qquad SE = V_n/\sqrt n.

H0: E[r] ≤ δ against H1: E[r] > δ (δ = 1.25, the "five-fourths rule", §3.2). The test statistic
is the one-sided (1 − α) lower confidence bound T_n = S_n − z_{1−α} SE (eq. 3.10); H0 is rejected
iff T_n > δ, equivalently iff the p-value 1 − Φ((S_n − δ)/SE) is below α. The two-sided interval
is S_n ± z_{1−α/2} SE (eq. 3.6). The paper's text uses ddof = 1; its code uses ddof = 0.

**Error-rate ratio** (§3.2, eq. 3.11-3.12, App. C). With e0_i = 1[ŷ(x_i) ≠ y_i] and
e1_i = 1[ŷ(Φ(x_i)) ≠ y_i], means B_n = ē0 (denominator) and A_n = ē1 (numerator), sample
covariance matrix V̂ of (e1, e0) (ddof 1), the ratio τ̂ = A_n/B_n has delta-method variance

.. math::

    \widehat{Var}(τ̂) = \frac{A_n^2 \hat V_{00} + B_n^2 \hat V_{11} - 2 A_n B_n \hat V_{01}}
                           {n\, B_n^4}

(V̂_11 = Var e1, V̂_00 = Var e0, V̂_01 = Cov(e1, e0)), and T̃_n = τ̂ − z_{1−α} SE is compared with
δ in the same way.

Degenerate cases (never reported as "fair"): fewer than 2 usable rows gives NaN statistics and
p-value (status ``"too_few_rows"``); zero standard error (every row's ratio equal) gives a NaN
p-value, the finding is not tested (status ``"zero_variance"``: no spread to calibrate the
normal test with, and a p-value is never 0 from a zero variance); no errors at the original
points makes the error-rate ratio undefined (status ``"no_errors_at_original_points"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from fairengine.errors import DataContractError

__all__ = [
    "ErrorRateRatioResult",
    "LossRatioResult",
    "error_rate_ratio_test",
    "loss_ratio_test",
]


def _check_level(alpha: float, delta: float) -> None:
    if not (isinstance(alpha, int | float) and 0.0 < float(alpha) < 1.0):
        raise DataContractError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not (isinstance(delta, int | float) and math.isfinite(delta) and delta > 0):
        raise DataContractError(f"delta must be a finite number > 0, got {delta!r}")


def _one_sided(estimate: float, se: float, delta: float, alpha: float) -> tuple[float, float, str]:
    """(lower bound, p-value, status) of the one-sided z test of H0: mean <= delta."""
    if not math.isfinite(estimate) or not math.isfinite(se):
        return math.nan, math.nan, "undefined"
    if se == 0.0:  # no spread to calibrate a normal test with: not tested, never p = 0
        return estimate, math.nan, "zero_variance"
    z = float(norm.ppf(1.0 - alpha))
    return estimate - z * se, float(norm.sf((estimate - delta) / se)), "ok"


@dataclass(frozen=True)
class _RatioResultBase:
    statistic: float
    standard_error: float
    lower_bound: float
    pvalue: float
    delta: float
    alpha: float
    n: int
    status: str

    @property
    def reject(self) -> bool:
        """True iff H0 (ratio <= delta) is rejected at ``alpha`` (LB > delta). False on NaN (also
        when the test is not defined: zero variance)."""
        return bool(
            math.isfinite(self.pvalue)
            and math.isfinite(self.lower_bound)
            and self.lower_bound > self.delta
        )

    def confidence_interval(self, confidence_level: float | None = None) -> tuple[float, float]:
        """Two-sided normal interval ``statistic ± z_{1-(1-level)/2}·SE`` (eq. 3.6).

        ``confidence_level`` defaults to ``1 - alpha``.
        """
        level = 1.0 - self.alpha if confidence_level is None else float(confidence_level)
        if not 0.0 < level < 1.0:
            raise DataContractError(f"confidence_level must lie in (0, 1), got {level!r}")
        z = float(norm.ppf(0.5 + level / 2.0))
        return self.statistic - z * self.standard_error, self.statistic + z * self.standard_error

    @property
    def null_distribution(self) -> Any:
        """Asymptotic null distribution of (statistic − delta)/SE: standard normal (scipy)."""
        return norm()


@dataclass(frozen=True)
class LossRatioResult(_RatioResultBase):
    """Result of :func:`loss_ratio_test` (scipy.stats-like).

    ``statistic`` is S_n (mean ratio), ``lower_bound`` the paper's test statistic T_n,
    ``ratios`` the per-row ratios used (non-finite ones removed when ``drop_nonfinite``),
    ``n_dropped`` how many were removed, ``diagnostics`` the floor / tail diagnostics of §5.5.
    """

    ratios: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    n_dropped: int = 0
    diagnostics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ErrorRateRatioResult(_RatioResultBase):
    """Result of :func:`error_rate_ratio_test`: ``statistic`` is τ̂ = ē1/ē0."""

    error_rate_original: float = math.nan
    error_rate_mapped: float = math.nan
    covariance: tuple[tuple[float, float], tuple[float, float]] | None = None


def loss_ratio_test(
    loss_original: np.ndarray,
    loss_mapped: np.ndarray,
    *,
    delta: float = 1.25,
    alpha: float = 0.05,
    eps: float = 0.0,
    ddof: int = 1,
    drop_nonfinite: bool = True,
) -> LossRatioResult:
    """Mean loss-ratio test of Maity et al. (2021), eq. 3.4-3.10 (see the module docstring).

    Parameters
    ----------
    loss_original, loss_mapped : per-row losses ℓ(f(x_i), y_i) and ℓ(f(Φ(x_i)), y_i), >= 0.
    delta : the tolerance δ of H0: E[r] <= δ (default 1.25).
    alpha : level; the lower bound is one-sided at 1 − α (default 0.05).
    eps : loss floor ε in r = (ℓ1 + ε)/(ℓ0 + ε) (default 0, the paper; the audit uses 1e-4).
    ddof : delta degrees of freedom of V_n (1: paper's text; 0: paper's code, inFairness).
    drop_nonfinite : drop non-finite ratios (the paper's code) instead of raising.
    """
    _check_level(alpha, delta)
    if not (isinstance(eps, int | float) and math.isfinite(eps) and eps >= 0):
        raise DataContractError(f"eps (loss floor) must be a finite number >= 0, got {eps!r}")
    if ddof not in (0, 1):
        raise DataContractError(f"ddof must be 0 or 1, got {ddof!r}")
    l0 = np.asarray(loss_original, dtype=np.float64).ravel()
    l1 = np.asarray(loss_mapped, dtype=np.float64).ravel()
    if l0.shape != l1.shape:
        raise DataContractError(
            f"loss_original and loss_mapped must have the same length, got {l0.size} and {l1.size}"
        )
    if np.any(l0 < 0) or np.any(l1 < 0):
        raise DataContractError("losses must be >= 0 (a loss ratio needs non-negative losses)")
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (l1 + eps) / (l0 + eps)
    finite = np.isfinite(r)
    n_dropped = int((~finite).sum())
    if n_dropped and not drop_nonfinite:
        raise DataContractError(
            f"{n_dropped} loss ratio(s) are not finite (zero original loss with eps=0?); set a "
            "loss floor eps > 0 or drop_nonfinite=True"
        )
    r = r[finite]
    n = int(r.size)
    diagnostics = _floor_diagnostics(l0, r, eps)
    if n < 2:
        return LossRatioResult(
            math.nan, math.nan, math.nan, math.nan, delta, alpha, n, "too_few_rows",
            ratios=r, n_dropped=n_dropped, diagnostics=diagnostics,
        )  # fmt: skip
    s = float(r.mean())
    v = float(np.sqrt(np.sum((r - s) ** 2) / (n - ddof)))
    se = v / math.sqrt(n)
    lb, p, status = _one_sided(s, se, delta, alpha)
    return LossRatioResult(
        s, se, lb, p, delta, alpha, n, status, ratios=r, n_dropped=n_dropped,
        diagnostics=diagnostics,
    )  # fmt: skip


def _floor_diagnostics(l0: np.ndarray, r: np.ndarray, eps: float) -> dict[str, Any]:
    """§5.5 diagnostics: rows below the floor, smallest loss, largest ratio, top-1 % share."""
    out: dict[str, Any] = {
        "eps": eps,
        "n_below_floor": int(np.sum(l0 < eps)) if eps > 0 else int(np.sum(l0 == 0)),
        "min_loss_original": float(l0.min()) if l0.size else math.nan,
        "max_ratio": float(r.max()) if r.size else math.nan,
    }
    if r.size:
        k = max(1, math.ceil(0.01 * r.size))
        top = np.partition(r, r.size - k)[r.size - k :]
        total = float(r.sum())
        out["top1pct_share"] = float(top.sum() / total) if total > 0 else math.nan
    else:
        out["top1pct_share"] = math.nan
    out["heavy_tail"] = bool(np.isfinite(out["top1pct_share"]) and out["top1pct_share"] > 0.2)
    return out


def error_rate_ratio_test(
    error_original: np.ndarray,
    error_mapped: np.ndarray,
    *,
    delta: float = 1.25,
    alpha: float = 0.05,
) -> ErrorRateRatioResult:
    """Error-rate ratio test of Maity et al. (2021), eq. 3.11-3.12 and App. C (delta method).

    ``error_original``/``error_mapped`` are 0/1 (or bool) indicators of a misclassification at
    x_i and at Φ(x_i). The variance uses the ddof-1 sample covariance, as the paper's code
    (``np.cov``).
    """
    _check_level(alpha, delta)
    e0 = np.asarray(error_original, dtype=np.float64).ravel()
    e1 = np.asarray(error_mapped, dtype=np.float64).ravel()
    if e0.shape != e1.shape:
        raise DataContractError(
            f"error_original and error_mapped must have the same length, got {e0.size} and "
            f"{e1.size}"
        )
    if not (np.isin(e0, (0.0, 1.0)).all() and np.isin(e1, (0.0, 1.0)).all()):
        raise DataContractError("error indicators must be 0/1 (or boolean)")
    n = int(e0.size)
    if n < 2:
        return ErrorRateRatioResult(
            math.nan, math.nan, math.nan, math.nan, delta, alpha, n, "too_few_rows"
        )
    b, a = float(e0.mean()), float(e1.mean())
    if b == 0.0:
        return ErrorRateRatioResult(
            math.nan, math.nan, math.nan, math.nan, delta, alpha, n,
            "no_errors_at_original_points", error_rate_original=b, error_rate_mapped=a,
        )  # fmt: skip
    d0, d1 = e0 - b, e1 - a
    s00 = float(d0 @ d0) / (n - 1)
    s11 = float(d1 @ d1) / (n - 1)
    s01 = float(d0 @ d1) / (n - 1)
    tau = a / b
    var = max((s11 * b * b + s00 * a * a - 2.0 * s01 * a * b) / (n * b**4), 0.0)
    se = math.sqrt(var)
    lb, p, status = _one_sided(tau, se, delta, alpha)
    return ErrorRateRatioResult(
        tau, se, lb, p, delta, alpha, n, status, error_rate_original=b, error_rate_mapped=a,
        covariance=((s11, s01), (s01, s00)),
    )  # fmt: skip
