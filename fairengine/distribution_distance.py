"""Distance of an observed distribution from a reference distribution (LiFT §1.3–1.4).

The observed distribution is a table of masses p_c over K categories c = (group g, outcome v):
the outcome is the prediction (model level; expected counts without a threshold) or the label
(dataset level). The reference q is UNIFORM (q_c = 1/K) or supplied by the user. With
p̂ = p/P and q̂ = q/Q (P = Σp, Q = Σq):

* skew_c = ln(p̃_c / q̂_c) with p̃_c = (p_c + a)/(P + aK), a ≥ 0 a pseudo-count in the units of
  p (counts; default 0, so a category with no mass has skew −∞);
* INF_NORM_DIST = max_c |p̂_c − q̂_c|  (Chebyshev);
* TOTAL_VAR_DIST = ½ Σ_c |p̂_c − q̂_c|;
* KL_DIVERGENCE = Σ_{c: p̂_c > 0} p̂_c log₂(p̂_c / q̂_c)  (bits; +∞ when q̂_c = 0 < p̂_c);
* JS_DIVERGENCE = ½ KL(p̂‖m) + ½ KL(q̂‖m), m = ½(p̂ + q̂)  (bits, in [0, 1]).

All of them are invariant to the scale of p and of q (counts or proportions give the same
numbers), unlike LiFT's. ``lift_compat=True`` reproduces LiFT exactly: Laplace smoothing α = 1
added to the *raw* masses, skew_c = ln(p_c+1) − ln(q_c+1) − ln(P+K) + ln(Q+K), and
KL = (1/ln 2)[(1/P) Σ_{p_c>0} p_c ln(p_c/(q_c+1)) + ln((Q+K)/P)] (only q smoothed), so both
depend on whether p and q hold counts or proportions; TV, INF and JS are the same in both modes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fairengine.errors import DataContractError

DISTANCE_METRICS: tuple[str, ...] = (
    "SKEWS",
    "INF_NORM_DIST",
    "TOTAL_VAR_DIST",
    "JS_DIVERGENCE",
    "KL_DIVERGENCE",
)
LIFT_ALPHA = 1.0
_LN2 = math.log(2.0)


@dataclass(frozen=True)
class DistributionDistances:
    """Skews per category and the four scalar distances (see module docstring)."""

    skews: np.ndarray
    inf_norm: float
    total_variation: float
    js_divergence: float
    kl_divergence: float

    def scalar(self, name: str) -> float:
        return {
            "INF_NORM_DIST": self.inf_norm,
            "TOTAL_VAR_DIST": self.total_variation,
            "JS_DIVERGENCE": self.js_divergence,
            "KL_DIVERGENCE": self.kl_divergence,
        }[name]


def _as_masses(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        raise DataContractError(f"{name} has no categories")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise DataContractError(f"{name} must hold finite non-negative masses, got {a.tolist()}")
    if not a.sum() > 0:
        raise DataContractError(f"{name} has zero total mass")
    return a


def _kl_bits(p: np.ndarray, q: np.ndarray) -> float:
    """Σ_{p>0} p log₂(p/q) for normalised p, q (+∞ where q = 0 < p)."""
    pos = p > 0
    with np.errstate(divide="ignore"):
        return float(np.sum(p[pos] * (np.log(p[pos]) - np.log(q[pos]))) / _LN2)


def skews(p: Any, q: Any, *, smoothing: float = 0.0, lift_compat: bool = False) -> np.ndarray:
    """ln of observed over reference share per category (module docstring for both modes)."""
    p_a, q_a = _as_masses(p, "observed distribution"), _as_masses(q, "reference distribution")
    _same_size(p_a, q_a)
    k = p_a.size
    with np.errstate(divide="ignore", invalid="ignore"):
        if lift_compat:
            a = LIFT_ALPHA
            return (
                np.log(p_a + a)
                - np.log(q_a + a)
                - math.log(p_a.sum() + a * k)
                + math.log(q_a.sum() + a * k)
            )
        if smoothing < 0 or not math.isfinite(smoothing):
            raise DataContractError(f"smoothing must be a finite number >= 0, got {smoothing!r}")
        pt = (p_a + smoothing) / (p_a.sum() + smoothing * k)
        return np.log(pt) - np.log(q_a / q_a.sum())


def distribution_distances(
    p: Any, q: Any, *, smoothing: float = 0.0, lift_compat: bool = False
) -> DistributionDistances:
    """All five LiFT distance metrics of observed masses ``p`` from reference masses ``q``.

    ``p`` and ``q`` are aligned arrays over the same categories (any non-negative scale, not
    all zero). Raises :class:`DataContractError` for negative, non-finite, all-zero or
    misaligned masses.
    """
    p_a, q_a = _as_masses(p, "observed distribution"), _as_masses(q, "reference distribution")
    _same_size(p_a, q_a)
    ph, qh = p_a / p_a.sum(), q_a / q_a.sum()
    diff = np.abs(ph - qh)
    m = 0.5 * (ph + qh)
    js = 0.5 * _kl_bits(ph, m) + 0.5 * _kl_bits(qh, m)
    if lift_compat:
        big_p, big_q, k = p_a.sum(), q_a.sum(), p_a.size
        pos = p_a > 0
        kl = (
            float(np.sum(p_a[pos] * np.log(p_a[pos] / (q_a[pos] + LIFT_ALPHA)))) / big_p
            + math.log((big_q + LIFT_ALPHA * k) / big_p)
        ) / _LN2
    else:
        kl = _kl_bits(ph, qh)
    return DistributionDistances(
        skews=skews(p_a, q_a, smoothing=smoothing, lift_compat=lift_compat),
        inf_norm=float(diff.max()),
        total_variation=float(0.5 * diff.sum()),
        js_divergence=float(min(max(js, 0.0), 1.0)),
        kl_divergence=float(kl),
    )


def _same_size(p: np.ndarray, q: np.ndarray) -> None:
    if p.shape != q.shape:
        raise DataContractError(
            f"observed and reference distributions must have the same categories; got {p.size} "
            f"and {q.size} masses"
        )


def reference_masses(
    spec: Mapping[str, Any] | str | None,
    groups: Sequence[str],
    outcome_share: np.ndarray,
    *,
    where: str = "reference",
) -> np.ndarray:
    """Reference masses q[g, v] over (group, outcome) categories, shape ``(G, 2)``.

    ``spec`` is ``None`` or ``"uniform"`` (q = 1/(2G) everywhere: LiFT's UNIFORM) or a mapping
    from *every* group name to either its population share s_g (then q[g, v] = s_g · π_v with
    π = ``outcome_share``, the observed overall outcome distribution: outcome independent of
    the group, groups at their population shares) or a pair [q_g0, q_g1] of masses for
    outcome 0 and 1. Raises :class:`DataContractError`, naming ``where``, for missing or
    unknown groups, negative or non-finite masses, or an all-zero reference.
    """
    g = len(groups)
    if spec is None or (isinstance(spec, str) and spec.upper() == "UNIFORM"):
        return np.full((g, 2), 1.0 / (2 * g))
    if not isinstance(spec, Mapping):
        raise DataContractError(
            f"{where} must be 'uniform' or a mapping from group to share or [mass_0, mass_1], "
            f"got {spec!r}"
        )
    keys = [str(k) for k in spec]
    missing = [c for c in groups if c not in keys]
    unknown = [k for k in keys if k not in groups]
    if missing or unknown:
        raise DataContractError(
            f"{where} must name exactly the groups {list(groups)}; missing {missing}, "
            f"unknown {unknown}"
        )
    byname = {str(k): v for k, v in spec.items()}
    q = np.empty((g, 2))
    pi = np.asarray(outcome_share, dtype=np.float64)
    for i, c in enumerate(groups):
        v = byname[c]
        if isinstance(v, bool) or not isinstance(v, int | float | list | tuple):
            raise DataContractError(
                f"{where}.{c} must be a share or a pair [mass_0, mass_1], got {v!r}"
            )
        if isinstance(v, list | tuple):
            if len(v) != 2 or any(isinstance(x, bool) or not isinstance(x, int | float) for x in v):
                raise DataContractError(
                    f"{where}.{c} must be a pair of numbers [mass_0, mass_1], got {v!r}"
                )
            q[i] = v
        else:
            q[i] = float(v) * pi
    if not np.all(np.isfinite(q)) or np.any(q < 0):
        raise DataContractError(f"{where} masses must be finite and non-negative, got {spec!r}")
    if not q.sum() > 0:
        raise DataContractError(f"{where} has zero total mass")
    return q


def check_distance_names(names: Sequence[str], where: str) -> list[str]:
    """Upper-cased distance-metric names; raises naming the valid ones for an unknown one."""
    out = []
    for name in names:
        key = str(name).upper()
        if key not in DISTANCE_METRICS:
            raise DataContractError(
                f"{where}: unknown distance metric {name!r}; valid names: {list(DISTANCE_METRICS)}"
            )
        out.append(key)
    return out
