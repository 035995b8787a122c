"""Aggregate inequality indices over a benefit vector b_1..b_n (LiFT §3; Shorrocks 1980;
Atkinson 1970; Speicher et al. 2018, whose "unified approach" AIF360 implements).

With μ = (1/n) Σ b_i and x_i = b_i / μ:

* GENERALIZED_ENTROPY_INDEX(α) = (1/(n α(α−1))) Σ (x_i^α − 1), with the limits
  α = 1: (1/n) Σ x_i ln x_i (THEIL_T_INDEX) and α = 0: −(1/n) Σ ln x_i (THEIL_L_INDEX);
* ATKINSON_INDEX(ε) = 1 − ((1/n) Σ x_i^(1−ε))^(1/(1−ε)), and at ε = 1: 1 − (Π x_i)^(1/n);
* COEFFICIENT_OF_VARIATION = σ/μ with the population σ (= √(2·GEI(2))).

The indices are defined for non-negative benefits with μ > 0: in the default mode a vector with
a negative or non-finite entry, an empty vector, or μ = 0 gives NaN; zeros take the
mathematical limits (0·ln 0 = 0 in Theil T; Theil L and GEI(α ≤ 0) are +∞; Atkinson(ε ≥ 1) is
1), σ is computed stably (two-pass). ``lift_compat=True`` reproduces LiFT's ``BenefitMap``:
raw (possibly negative) values for GEI, Atkinson and CV, |b| for the two Theil indices,
special cases when |α−1|, |α|, |ε−1| < 1e-12, 0·ln 0 = NaN, and the variance as
Σb²/n − μ² (slightly non-zero, or NaN under the root, for equal entries).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fairengine.errors import DataContractError

AGGREGATE_METRICS: tuple[str, ...] = (
    "GENERALIZED_ENTROPY_INDEX",
    "ATKINSON_INDEX",
    "THEIL_L_INDEX",
    "THEIL_T_INDEX",
    "COEFFICIENT_OF_VARIATION",
)
ALIASES: dict[str, str] = {
    "GEI": "GENERALIZED_ENTROPY_INDEX",
    "ATKINSON": "ATKINSON_INDEX",
    "ATKINSONS_INDEX": "ATKINSON_INDEX",  # LiFT's documented (but ignored) spelling
    "THEIL_L": "THEIL_L_INDEX",
    "THEIL_T": "THEIL_T_INDEX",
    "CV": "COEFFICIENT_OF_VARIATION",
}
TOKENS: dict[str, str] = {
    "GENERALIZED_ENTROPY_INDEX": "gei",
    "ATKINSON_INDEX": "atkinson",
    "THEIL_L_INDEX": "theil_l",
    "THEIL_T_INDEX": "theil_t",
    "COEFFICIENT_OF_VARIATION": "cv",
}
_TOL = 1e-12


def aggregate_name(name: str, where: str = "aggregate metric") -> str:
    """The canonical name of an aggregate metric (case-insensitive, aliases accepted).

    Raises :class:`DataContractError` listing the valid names (LiFT silently drops unknown ones).
    """
    key = str(name).strip().upper()
    key = ALIASES.get(key, key)
    if key not in AGGREGATE_METRICS:
        raise DataContractError(
            f"{where}: unknown aggregate metric {name!r}; valid names: {list(AGGREGATE_METRICS)} "
            f"(aliases: {sorted(ALIASES)})"
        )
    return key


def _clean(b: Sequence[float] | np.ndarray) -> np.ndarray | None:
    """The vector as float64, or None when the indices are undefined for it (default mode)."""
    x = np.asarray(b, dtype=np.float64).ravel()
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0) or not x.sum() > 0:
        return None
    return x


def _lift_mean(b: np.ndarray) -> float:
    if b.size == 0:
        return math.nan  # LiFT: 0/0
    total = 0.0
    for v in b.tolist():  # sequential left fold, as in Scala
        total += v
    return total / b.size


def _lift_gei(b: np.ndarray, alpha: float) -> float:
    n = b.size
    with np.errstate(all="ignore"):
        x = b / _lift_mean(b) if n else b
        if abs(alpha - 1.0) < _TOL:
            terms = x * np.log(x)
            return _lift_mean(terms) if n else math.nan
        if abs(alpha) < _TOL:
            return _lift_mean(-np.log(x)) if n else math.nan
        total = 0.0
        for v in (np.power(x, alpha) - 1.0).tolist():
            total += v
        return total / (n * alpha * (alpha - 1.0))


def generalized_entropy_index(
    b: Sequence[float] | np.ndarray, alpha: float = 2.0, *, lift_compat: bool = False
) -> float:
    """GE(α) of the benefit vector ``b`` (module docstring)."""
    if lift_compat:
        return float(_lift_gei(np.asarray(b, dtype=np.float64).ravel(), alpha))
    x = _clean(b)
    if x is None:
        return math.nan
    x = x / x.mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        if abs(alpha - 1.0) < _TOL:
            return float(np.mean(np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)))
        if abs(alpha) < _TOL:
            return float(np.mean(-np.log(x)))
        return float(np.mean(np.power(x, alpha) - 1.0) / (alpha * (alpha - 1.0)))


def theil_t_index(b: Sequence[float] | np.ndarray, *, lift_compat: bool = False) -> float:
    """Theil T = GE(1); LiFT applies it to |b|."""
    if lift_compat:
        return generalized_entropy_index(np.abs(np.asarray(b, float)), 1.0, lift_compat=True)
    return generalized_entropy_index(b, 1.0)


def theil_l_index(b: Sequence[float] | np.ndarray, *, lift_compat: bool = False) -> float:
    """Theil L (mean log deviation) = GE(0); LiFT applies it to |b|."""
    if lift_compat:
        return generalized_entropy_index(np.abs(np.asarray(b, float)), 0.0, lift_compat=True)
    return generalized_entropy_index(b, 0.0)


def atkinson_index(
    b: Sequence[float] | np.ndarray, epsilon: float = 0.5, *, lift_compat: bool = False
) -> float:
    """Atkinson's index A(ε), ε ≥ 0 the inequality aversion (module docstring)."""
    if lift_compat:
        v = np.asarray(b, dtype=np.float64).ravel()
        n = v.size
        with np.errstate(all="ignore"):
            x = v / _lift_mean(v) if n else v
            if abs(epsilon - 1.0) < _TOL:
                prod = 1.0
                for t in x.tolist():
                    prod *= t
                return float(1.0 - prod ** (1.0 / n))
            a = 1.0 - epsilon
            return float(1.0 - _lift_mean(np.power(x, a)) ** (1.0 / a))
    if epsilon < 0:
        raise DataContractError(f"Atkinson epsilon must be >= 0, got {epsilon}")
    clean = _clean(b)
    if clean is None:
        return math.nan
    x = clean / clean.mean()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if abs(epsilon - 1.0) < _TOL:
            if np.any(x == 0):
                return 1.0
            return float(1.0 - np.exp(np.mean(np.log(x))))
        a = 1.0 - epsilon
        if a < 0 and np.any(x == 0):
            return 1.0
        return float(1.0 - np.mean(np.power(x, a)) ** (1.0 / a))


def coefficient_of_variation(
    b: Sequence[float] | np.ndarray, *, lift_compat: bool = False
) -> float:
    """σ/μ with the population standard deviation (LiFT: √(Σb²/n − μ²)/μ on raw values)."""
    if lift_compat:
        v = np.asarray(b, dtype=np.float64).ravel()
        if v.size == 0:
            return math.nan
        mu = _lift_mean(v)
        var = _lift_mean(v * v) - mu * mu
        with np.errstate(invalid="ignore", divide="ignore"):
            return float(np.sqrt(var) / mu)
    x = _clean(b)
    if x is None:
        return math.nan
    return float(np.std(x) / np.mean(x))


def aggregate(
    name: str,
    b: Sequence[float] | np.ndarray,
    param: float | None = None,
    *,
    lift_compat: bool = False,
) -> float:
    """Evaluate the aggregate metric ``name`` (with α or ε = ``param`` where it takes one)."""
    key = aggregate_name(name)
    if key == "GENERALIZED_ENTROPY_INDEX":
        return generalized_entropy_index(
            b, 2.0 if param is None else param, lift_compat=lift_compat
        )
    if key == "ATKINSON_INDEX":
        return atkinson_index(b, 0.5 if param is None else param, lift_compat=lift_compat)
    if key == "THEIL_L_INDEX":
        return theil_l_index(b, lift_compat=lift_compat)
    if key == "THEIL_T_INDEX":
        return theil_t_index(b, lift_compat=lift_compat)
    return coefficient_of_variation(b, lift_compat=lift_compat)
