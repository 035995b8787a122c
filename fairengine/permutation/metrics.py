"""Group metrics as ratio statistics, and their closed-form (delta-method) variances.

Every built-in proportion-type metric of a group G is a *ratio of row sums*

    m(G) = Σ_{i∈G} a_i / Σ_{i∈G} b_i,

with per-row numerator a_i and denominator b_i that depend only on the label y_i, the
positive prediction p_i (0/1 with a threshold, the probability without: expected counts), the
probability s_i (calibration only) and the weight w_i (1 without weights):

=====================  =====================  =====================
metric                 a_i / w_i              b_i / w_i
=====================  =====================  =====================
``positive_rate``      p                      1
``tpr`` (recall)       p·y                    y
``fnr``                (1−p)·y                y
``fpr``                p·(1−y)                1−y
``tnr``                (1−p)·(1−y)            1−y
``precision``          p·y                    p
``accuracy``           p·y + (1−p)(1−y)       1
``calibration``        s − y                  1
=====================  =====================  =====================

(``calibration`` is calibration-in-the-large, mean predicted probability minus observed rate.)
The delta-method (ratio-estimator) variance of m̂ = A/B, with A = Σa, B = Σb, is

    Var(m̂) ≈ Σ_i (a_i − m̂ b_i)² / B² = (Σa² − 2 m̂ Σab + m̂² Σb²) / B²,

so five sums per group — ``A, B, AA = Σa², AB = Σab, BB = Σb²`` — are sufficient for the
value and its standard error. For unweighted hard predictions it is the binomial m̂(1−m̂)/n of
the conditioning rows (e.g. FNR(1−FNR)/n_pos), which is the studentization of DiCiccio et al.
(2020, §3.3); weighted and expected-count rates get the linearisation variance of
:mod:`fairengine.counts`. The two-group statistic is Δ̂ = m̂_A − m̂_B with
se = √(Var m̂_A + Var m̂_B) (independent groups).

Because the sums are linear in the rows, rows with the same (a, b) — the four (y, ŷ) cells of
unweighted hard predictions — are interchangeable: the sums are (cell counts) @ (cell values),
which is what makes permutations over cells exact and O(1) in the row count
(:mod:`fairengine.permutation.cell_draws`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError

#: Column order of the sufficient sums.
SUMS: tuple[str, ...] = ("A", "B", "AA", "AB", "BB")


@dataclass(frozen=True)
class RatioMetric:
    """A group metric m = Σa/Σb (module docstring). ``numerator``/``denominator`` map
    (y, p, s) to per-row a/w and b/w; ``proportion`` says a ≤ b are 0/1 for hard predictions
    (so Wilson/Newcombe intervals apply); ``needs`` names what the denominator conditions on
    (for error messages)."""

    name: str
    label: str
    numerator: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    denominator: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    proportion: bool
    needs: str
    uses_probability: bool = False


def _ones(y: np.ndarray, p: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.ones(y.shape, dtype=np.float64)


RATIO_METRICS: dict[str, RatioMetric] = {
    m.name: m
    for m in (
        RatioMetric(
            "positive_rate", "positive-prediction rate", lambda y, p, s: p, _ones, True, "rows"
        ),
        RatioMetric(
            "tpr",
            "true-positive rate (recall)",
            lambda y, p, s: p * y,
            lambda y, p, s: y,
            True,
            "positive labels",
        ),
        RatioMetric(
            "fnr",
            "false-negative rate",
            lambda y, p, s: (1 - p) * y,
            lambda y, p, s: y,
            True,
            "positive labels",
        ),
        RatioMetric(
            "fpr",
            "false-positive rate",
            lambda y, p, s: p * (1 - y),
            lambda y, p, s: 1 - y,
            True,
            "negative labels",
        ),
        RatioMetric(
            "tnr",
            "true-negative rate",
            lambda y, p, s: (1 - p) * (1 - y),
            lambda y, p, s: 1 - y,
            True,
            "negative labels",
        ),
        RatioMetric(
            "precision",
            "precision",
            lambda y, p, s: p * y,
            lambda y, p, s: p,
            True,
            "positive predictions",
        ),
        RatioMetric(
            "accuracy",
            "accuracy",
            lambda y, p, s: p * y + (1 - p) * (1 - y),
            _ones,
            True,
            "rows",
        ),
        RatioMetric(
            "calibration",
            "calibration-in-the-large (mean probability − positive rate)",
            lambda y, p, s: s - y,
            _ones,
            False,
            "rows",
            uses_probability=True,
        ),
    )
}

#: Names accepted as aliases of built-in metrics.
ALIASES: dict[str, str] = {"recall": "tpr", "sensitivity": "tpr", "specificity": "tnr"}
#: Every built-in metric name (ratio metrics and the rank metric ``auc``).
BUILTIN_METRICS: tuple[str, ...] = (*RATIO_METRICS, "auc")


def canonical_metric(name: str) -> str:
    """The built-in metric ``name`` resolves to (aliases applied); raises for unknown names."""
    key = ALIASES.get(name, name)
    if key not in BUILTIN_METRICS:
        raise DataContractError(
            f"unknown metric {name!r}; built-in metrics are {list(BUILTIN_METRICS)} "
            f"(aliases {sorted(ALIASES)}), or pass a callable f(y, score, weights) -> float"
        )
    return key


def row_values(
    metric: RatioMetric,
    y: np.ndarray,
    prediction: np.ndarray,
    probability: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Per-row contributions to the five sums: an (n, 5) array of (a, b, a², ab, b²)."""
    yf = np.asarray(y, dtype=np.float64)
    p = np.asarray(prediction, dtype=np.float64)
    s = p if probability is None else np.asarray(probability, dtype=np.float64)
    a = np.asarray(metric.numerator(yf, p, s), dtype=np.float64)
    b = np.asarray(metric.denominator(yf, p, s), dtype=np.float64)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        a, b = a * w, b * w
    return np.stack([a, b, a * a, a * b, b * b], axis=-1)


def ratio_value_variance(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Value m = A/B and delta-method variance (AA − 2m·AB + m²·BB)/B² from sums (..., 5).

    NaN where B = 0 (the metric is undefined: no rows it conditions on). The variance is
    clipped at 0 (it is a sum of squares; rounding can make it −1e-17).
    """
    s = np.asarray(sums, dtype=np.float64)
    a, b, aa, ab, bb = (s[..., k] for k in range(5))
    with np.errstate(invalid="ignore", divide="ignore"):
        m = a / b
        undefined = b == 0
        if np.any(undefined):
            m = np.where(undefined, np.nan, m)
        # (aa − 2m·ab + m²·bb) / b², in place (the same floating-point operations)
        var = m * ab
        var *= -2.0
        var += aa
        var += m * m * bb
        var /= b * b
    return m, np.maximum(var, 0.0)


def studentized_difference(
    sums_a: np.ndarray, sums_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Δ = m_A − m_B, its standard error √(Var m_A + Var m_B), and Z = Δ/se.

    Conventions for degenerate permutations: se = 0 gives Z = 0 when Δ = 0 and ±∞ otherwise
    (a difference with no sampling noise is as extreme as it gets); an undefined metric
    (no conditioning rows in a group) gives NaN.
    """
    ma, va = ratio_value_variance(sums_a)
    mb, vb = ratio_value_variance(sums_b)
    diff = ma - mb
    se = np.sqrt(va + vb)
    return diff, se, studentize(diff, se)


def studentize(diff: np.ndarray, se: np.ndarray) -> np.ndarray:
    """Z = Δ/se with Z = 0 for 0/0 and ±∞ for Δ ≠ 0 over se = 0; NaN stays NaN."""
    d = np.asarray(diff, dtype=np.float64)
    s = np.asarray(se, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        positive = s > 0
        if positive.all():  # the usual case: Z = Δ/se (NaN Δ stays NaN)
            return d / s
        z = np.where(positive, d / s, np.where(d == 0, 0.0, np.sign(d) * np.inf))
    return np.where(np.isnan(d) | np.isnan(s), np.nan, z)


def cell_values(metric: RatioMetric) -> np.ndarray:
    """The (4, 5) sums contributed by one row of each cell of unweighted hard predictions,
    cells in order (y, ŷ) = (0,0) TN, (0,1) FP, (1,0) FN, (1,1) TP: the group sums are
    (cell counts) @ (cell values)."""
    cy = np.array([0.0, 0.0, 1.0, 1.0])
    cp = np.array([0.0, 1.0, 0.0, 1.0])
    return row_values(metric, cy, cp)
