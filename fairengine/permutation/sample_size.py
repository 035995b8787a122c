"""Sample-size planning for the studentized two-group test (DiCiccio et al. 2020, §5.1).

The studentized statistic Z = Δ̂/se is asymptotically N(Δ/σ_Δ, 1), and so is its permutation
distribution under H0 (Theorems 2–3), so the permutation test behaves like a two-sample Wald
test. For a rate metric with group rates r_A, r_B conditioning on a subset of rows with base
rates β_A, β_B (the share of the group's rows the rate is computed on: P(y=1) for TPR/FNR,
P(y=0) for FPR/TNR, P(ŷ=1) for precision, 1 for positive rate/accuracy) and group shares
π_A, π_B = 1 − π_A of N rows,

    σ²_Δ(N) = [ r_A(1−r_A)/(π_A β_A) + r_B(1−r_B)/(π_B β_B) ] / N,

and the test at level α detects δ = r_A − r_B with power 1−β when |δ|/σ_Δ(N) ≥ z_{1−α/2} +
z_{1−β} (z_{1−α} one-sided):

    N = (z_{1−α/2} + z_{1−β})² [ r_A(1−r_A)/(π_A β_A) + r_B(1−r_B)/(π_B β_B) ] / δ².

The paper's version is the power-½ special case (the difference sitting at the critical value).
For the AUC the group variance is Hanley & McNeil's (1982)
Var(AUC) = [A(1−A) + (m−1)(Q1−A²) + (n−1)(Q2−A²)]/(m n), Q1 = A/(2−A), Q2 = 2A²/(1+A), with
m = N π β and n = N π (1−β) positives/negatives (β = prevalence); N is found by bisection.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import norm

from fairengine.errors import DataContractError
from fairengine.permutation.metrics import canonical_metric

#: What each rate's denominator conditions on, i.e. what ``base_rate`` means.
BASE_RATE_MEANING: dict[str, str] = {
    "positive_rate": "1 (all rows)",
    "accuracy": "1 (all rows)",
    "calibration": "1 (all rows)",
    "tpr": "P(y=1 | group)",
    "fnr": "P(y=1 | group)",
    "fpr": "P(y=0 | group)",
    "tnr": "P(y=0 | group)",
    "precision": "P(prediction=1 | group)",
    "auc": "P(y=1 | group) (prevalence)",
}


@dataclass(frozen=True)
class SampleSizePlan:
    """Rows needed in total and per group (and in each group's conditioning subset)."""

    metric: str
    rate_a: float
    rate_b: float
    difference: float
    base_rate_a: float
    base_rate_b: float
    share_a: float
    alpha: float
    power: float
    alternative: str
    n_total: int
    n_a: int
    n_b: int
    n_conditioning_a: int
    n_conditioning_b: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One paragraph for the CLI."""
        return (
            f"To detect a {self.metric} difference of {self.difference:+.4g} "
            f"({self.rate_a:.4g} vs {self.rate_b:.4g}) with power {self.power:.0%} at "
            f"alpha={self.alpha:g} ({self.alternative}), audit about {self.n_total:,} rows: "
            f"{self.n_a:,} in group A and {self.n_b:,} in group B "
            f"({self.n_conditioning_a:,} and {self.n_conditioning_b:,} rows the metric "
            f"conditions on: {BASE_RATE_MEANING.get(self.metric, '')})."
        )


def _z(alpha: float, power: float, alternative: str) -> float:
    if not 0 < alpha < 1:
        raise DataContractError(f"alpha must lie in (0, 1), got {alpha}")
    if not 0 < power < 1:
        raise DataContractError(f"power must lie in (0, 1), got {power}")
    if alternative not in ("two-sided", "greater", "less"):
        raise DataContractError(
            f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}"
        )
    za = norm.ppf(1 - alpha / 2) if alternative == "two-sided" else norm.ppf(1 - alpha)
    return float(za + norm.ppf(power))


def _check_unit(name: str, value: float, open_interval: bool = False) -> float:
    v = float(value)
    ok = 0 < v < 1 if open_interval else 0 < v <= 1
    if not ok:
        rng = "(0, 1)" if open_interval else "(0, 1]"
        raise DataContractError(f"{name} must lie in {rng}, got {value!r}")
    return v


def _hanley_mcneil(auc: float, m: float, n: float) -> float:
    q1 = auc / (2 - auc)
    q2 = 2 * auc * auc / (1 + auc)
    return (auc * (1 - auc) + (m - 1) * (q1 - auc * auc) + (n - 1) * (q2 - auc * auc)) / (m * n)


def _sd_difference(
    metric: str, ra: float, rb: float, ba: float, bb: float, share_a: float, n_total: float
) -> float:
    """σ_Δ at N rows (module docstring)."""
    if metric == "auc":
        va = _hanley_mcneil(ra, n_total * share_a * ba, n_total * share_a * (1 - ba))
        vb = _hanley_mcneil(rb, n_total * (1 - share_a) * bb, n_total * (1 - share_a) * (1 - bb))
        return math.sqrt(va + vb)
    var = ra * (1 - ra) / (share_a * ba) + rb * (1 - rb) / ((1 - share_a) * bb)
    return math.sqrt(var / n_total)


def plan_sample_size(
    metric: str,
    rate_a: float,
    rate_b: float,
    *,
    base_rate_a: float | None = None,
    base_rate_b: float | None = None,
    share_a: float = 0.5,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
) -> SampleSizePlan:
    """Rows an audit needs for the studentized permutation test to detect ``rate_a − rate_b``.

    Parameters
    ----------
    metric : a built-in rate (``tpr``, ``fnr``, ``fpr``, ``tnr``, ``precision``,
        ``positive_rate``, ``accuracy``) or ``auc``.
    rate_a, rate_b : the metric's value in group A and group B under the alternative to detect.
    base_rate_a, base_rate_b : share of each group's rows the metric conditions on (see
        :data:`BASE_RATE_MEANING`; the prevalence for ``auc``). Default 1 for rates over all
        rows; required otherwise.
    share_a : fraction of all rows in group A. Default 0.5.
    alpha : significance level. Default 0.05.
    power : desired power 1 − β. Default 0.8.
    alternative : ``two-sided`` (default), ``greater`` or ``less``.

    Returns a :class:`SampleSizePlan` (``n_total``, ``n_a``, ``n_b``, conditioning rows).
    """
    name = canonical_metric(metric)
    if name == "calibration":
        raise DataContractError(
            "sample-size planning supports rates and auc; calibration has no closed-form "
            "variance in terms of its value"
        )
    ra = _check_unit("rate_a", rate_a, open_interval=True)
    rb = _check_unit("rate_b", rate_b, open_interval=True)
    if ra == rb:
        raise DataContractError("rate_a and rate_b are equal: there is no difference to detect")
    all_rows = name in ("positive_rate", "accuracy")
    if base_rate_a is None or base_rate_b is None:
        if not all_rows:
            raise DataContractError(
                f"metric {name!r} conditions on {BASE_RATE_MEANING[name]}; give base_rate_a "
                "and base_rate_b"
            )
    ba = 1.0 if base_rate_a is None else _check_unit("base_rate_a", base_rate_a)
    bb = 1.0 if base_rate_b is None else _check_unit("base_rate_b", base_rate_b)
    if name == "auc" and (ba >= 1 or bb >= 1):
        raise DataContractError("for auc, base rates are prevalences and must lie in (0, 1)")
    sa = _check_unit("share_a", share_a, open_interval=True)
    z = _z(alpha, power, alternative)
    delta = abs(ra - rb)
    if name == "auc":
        lo, hi = 4.0, 4.0
        while delta / _sd_difference(name, ra, rb, ba, bb, sa, hi) < z:
            lo, hi = hi, hi * 2
            if hi > 1e13:
                raise DataContractError("the difference is too small to plan for")
        while hi - lo > 0.5:
            mid = (lo + hi) / 2
            if delta / _sd_difference(name, ra, rb, ba, bb, sa, mid) >= z:
                hi = mid
            else:
                lo = mid
        n_total = math.ceil(hi)
    else:
        v1 = ra * (1 - ra) / (sa * ba) + rb * (1 - rb) / ((1 - sa) * bb)
        n_total = math.ceil(z * z * v1 / (delta * delta))
    n_a = math.ceil(n_total * sa)
    n_b = math.ceil(n_total * (1 - sa))
    return SampleSizePlan(
        metric=name,
        rate_a=ra,
        rate_b=rb,
        difference=ra - rb,
        base_rate_a=ba,
        base_rate_b=bb,
        share_a=sa,
        alpha=alpha,
        power=power,
        alternative=alternative,
        n_total=n_total,
        n_a=n_a,
        n_b=n_b,
        n_conditioning_a=math.ceil(n_a * ba),
        n_conditioning_b=math.ceil(n_b * bb),
    )


def minimum_detectable_difference(
    metric: str,
    rate: float,
    n_total: int,
    *,
    base_rate_a: float | None = None,
    base_rate_b: float | None = None,
    share_a: float = 0.5,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Smallest |r_A − r_B| (two-sided, around a common ``rate``: r_A = rate + δ/2,
    r_B = rate − δ/2) the test detects with the given power at ``n_total`` rows (the inverse
    of :func:`plan_sample_size`; the paper's Figure 3 at power ½)."""
    name = canonical_metric(metric)
    r = _check_unit("rate", rate, open_interval=True)
    if n_total < 4:
        raise DataContractError(f"n_total must be >= 4, got {n_total}")
    all_rows = name in ("positive_rate", "accuracy")
    if (base_rate_a is None or base_rate_b is None) and not all_rows:
        raise DataContractError(f"metric {name!r} needs base_rate_a and base_rate_b")
    ba = 1.0 if base_rate_a is None else _check_unit("base_rate_a", base_rate_a)
    bb = 1.0 if base_rate_b is None else _check_unit("base_rate_b", base_rate_b)
    sa = _check_unit("share_a", share_a, open_interval=True)
    z = _z(alpha, power, "two-sided")
    lo, hi = 0.0, 2 * min(r, 1 - r)
    for _ in range(100):
        mid = (lo + hi) / 2
        sd = _sd_difference(name, r + mid / 2, r - mid / 2, ba, bb, sa, n_total)
        if mid / sd >= z:
            hi = mid
        else:
            lo = mid
    return hi
