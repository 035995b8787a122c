r"""Rates and expected cost of the randomised thresholding derived predictor as affine functions.

RTDP (Morina et al., arXiv:1911.01468; notes ``intersectional.md`` §1.5): intersection s has a
threshold τ_s and flip probabilities p_s = P(ỹ = 1 | f ≤ τ_s, s) and q_s = P(ỹ = 1 | f > τ_s, s).
With u the (weighted) count above τ_s in a rate's denominator set of size d (§1.5, "rates are affine
in (p, q)"), the smoothed rate is

    r_s = (q_s u_s + p_s (d_s − u_s) + α) / (d_s + α + β) = a_s p_s + b_s q_s + c_s,

for the selection rate (d = n_s, u = u⁺ + u⁻), the TPR (d = P_s, u = u⁺) and the FPR (d = N_s,
u = u⁻). The expected cost (c_FP E[FP] + c_FN E[FN]) / W is affine too, with coefficients

    q_s: (c_FP u⁻_s − c_FN u⁺_s) / W,     p_s: (c_FP (N_s − u⁻_s) − c_FN (P_s − u⁺_s)) / W,

plus the constant c_FN Σ_s P_s / W.

For the robust ("scenario") constraint of §4.7, the share of a rate's denominator above the
threshold is drawn from its posterior A_s ~ Beta(α₀ + u_s, β₀ + d_s − u_s); the population rate of
each draw is then p_s (1 − A_s) + q_s A_s, again affine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError

#: constraint metric -> the rates it bounds (``eo`` bounds both error rates).
CONSTRAINT_RATES: dict[str, tuple[str, ...]] = {
    "sp": ("selection_rate",),
    "tpr": ("tpr",),
    "fpr": ("fpr",),
    "eo": ("tpr", "fpr"),
}
MITIGATION_METRICS: tuple[str, ...] = tuple(CONSTRAINT_RATES)


@dataclass(frozen=True)
class AffineRate:
    """One constrained rate, ``r_s = a_s p_s + b_s q_s + c_s`` for the intersections in ``mask``."""

    rate: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    mask: np.ndarray

    def values(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The rates for flip probabilities ``p, q`` (NaN outside ``mask``)."""
        return np.where(self.mask, self.a * p + self.b * q + self.c, np.nan)


def rate_rates(metrics: list[str] | tuple[str, ...]) -> list[str]:
    """The distinct rates behind the constraint metrics, in a fixed order."""
    out: list[str] = []
    for m in metrics:
        if m not in CONSTRAINT_RATES:
            raise DataContractError(
                f"unknown mitigation constraint {m!r}; use any of {list(MITIGATION_METRICS)} "
                "(elift/slift are properties of the labels, which post-processing cannot change)"
            )
        out.extend(r for r in CONSTRAINT_RATES[m] if r not in out)
    return out


def rate_parts(
    rate: str,
    u_pos: np.ndarray,
    u_neg: np.ndarray,
    totals: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(u, d): the count above the threshold and the denominator of ``rate``.

    ``u_pos``, ``u_neg`` may carry a trailing candidate axis ``(K, G)``; ``d`` is then ``(K, 1)``.
    """
    neg, pos = _per_group(totals, u_pos)
    if rate == "selection_rate":
        return u_pos + u_neg, pos + neg
    if rate == "tpr":
        return u_pos, pos
    if rate == "fpr":
        return u_neg, neg
    raise DataContractError(f"unknown rate {rate!r}")


def support_mask(
    rate: str, rows: np.ndarray, *, min_support: int = 30, exclude_sparse: bool = False
) -> np.ndarray:
    """Intersections whose ``rate`` is constrained: denominator rows ≥ 1 (≥ ``min_support`` when
    ``exclude_sparse``), the audit's support policy (notes §4.2)."""
    _, d_rows = rate_parts(rate, np.zeros(len(rows)), np.zeros(len(rows)), rows)
    d_rows = np.asarray(d_rows).reshape(-1)
    return d_rows >= (min_support if exclude_sparse else 1)


def affine_rate(
    rate: str,
    u_pos: np.ndarray,
    u_neg: np.ndarray,
    totals: np.ndarray,
    mask: np.ndarray,
    *,
    alpha: float = 0.5,
    beta: float = 0.5,
) -> AffineRate:
    """The smoothed rate's affine coefficients (module docstring) for thresholds giving u⁺, u⁻."""
    u, d = rate_parts(rate, u_pos, u_neg, totals)
    den = np.broadcast_to(d + alpha + beta, np.shape(u))
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(den > 0, (d - u) / den, 0.0)
        b = np.where(den > 0, u / den, 0.0)
        c = np.where(den > 0, alpha / den, 0.0)
    live = (d + alpha + beta).reshape(-1) > 0
    return AffineRate(rate, a, b, c, np.asarray(mask, dtype=bool) & live)


def scenario_rates(
    rate: str,
    u_pos: np.ndarray,
    u_neg: np.ndarray,
    totals: np.ndarray,
    mask: np.ndarray,
    n_draws: int,
    *,
    prior: tuple[float, float] = (0.5, 0.5),
    rng: np.random.Generator,
) -> list[AffineRate]:
    """``n_draws`` posterior scenarios of ``rate``: A_s ~ Beta(α₀ + u_s, β₀ + d_s − u_s) and
    r_s = p_s (1 − A_s) + q_s A_s (notes §4.7, option 2)."""
    u, d = rate_parts(rate, u_pos, u_neg, totals)
    a0, b0 = prior
    u, d = np.asarray(u, dtype=np.float64), np.broadcast_to(d, np.shape(u))
    share = rng.beta(a0 + u, b0 + np.maximum(d - u, 0.0), size=(n_draws, u.shape[0]))
    zero = np.zeros(u.shape[0])
    m = np.asarray(mask, dtype=bool)
    return [AffineRate(rate, 1.0 - share[t], share[t], zero, m) for t in range(n_draws)]


def cost_coefficients(
    u_pos: np.ndarray,
    u_neg: np.ndarray,
    totals: np.ndarray,
    total_weight: float,
    cost_fp: float = 1.0,
    cost_fn: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, float]:
    """(coefficients of p, coefficients of q, constant) of the expected cost per unit weight.

    With a trailing candidate axis on ``u_pos``, ``u_neg`` the coefficients are ``(K, G)``.
    """
    neg, pos = _per_group(totals, u_pos)
    cq = (cost_fp * u_neg - cost_fn * u_pos) / total_weight
    cp = (cost_fp * (neg - u_neg) - cost_fn * (pos - u_pos)) / total_weight
    return cp, cq, float(cost_fn * totals[:, 1].sum() / total_weight)


def _per_group(totals: np.ndarray, like: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """N_s and P_s shaped to broadcast against ``like`` (``(K,)`` or ``(K, G)``)."""
    extra = (1,) * (np.ndim(like) - 1)
    t = np.asarray(totals, dtype=np.float64)
    return t[:, 0].reshape(-1, *extra), t[:, 1].reshape(-1, *extra)
