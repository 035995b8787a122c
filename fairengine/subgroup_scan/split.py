"""Discover/estimate split: choose the subgroups on one part of the rows, test them on the other.

The scan's calibrated p-values (:mod:`~fairengine.subgroup_scan.scan`) pay for the search with
the null distribution of the maximum. A sample split pays with data instead (Cox 1975; the
"selective inference by splitting" baseline of Fithian, Sun & Taylor 2014): the rows are split
at random into a *discovery* part (``fraction`` of the rows) and an *estimation* part; the scan
runs on the discovery part only, and each of its top-k rules is then evaluated on the
estimation part, which played no role in choosing it. Given the rules, the estimation part's
statistics are those of k pre-specified subgroups: Z_A = (O_A − E_A)/√V_A with the normal
p-value of ``sides``, Holm-adjusted over the k rules, and a Bonferroni interval
δ̂_A ± z_{1−(1−level)/(2k)} √V_A / n_A of the deviation δ_A = (𝔼 O_A − E_A)/n_A. These are valid
conditionally on the selection (the two parts are independent), at the price of half the rows.

Feature bins are cut on all rows (they use the features only, never the outcomes).

References: Cox, D. R. (1975) A note on data-splitting for the evaluation of significance
levels. Biometrika 62:441-444. Fithian, W., Sun, D. & Taylor, J. (2014) Optimal inference after
model selection. arXiv:1410.2597.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from fairengine.multiplicity import adjust_pvalues
from fairengine.results import Interval
from fairengine.subgroup_scan.scan import ScanResult, naive_pvalues, scan_space
from fairengine.subgroup_scan.search_space import (
    CodedFeatures,
    SubgroupScanError,
    build_search_space,
    code_features,
)
from fairengine.subgroup_scan.statistics import cell_outcomes, moments


@dataclass(frozen=True)
class HeldOutEstimate:
    """One discovered rule on the estimation rows: ``n`` rows in the stratum, ``observed`` and
    ``expected`` rates, ``z``, its ``pvalue`` (normal), ``adjusted_pvalue`` (Holm over the k
    rules) and the Bonferroni ``interval`` of the deviation ``deviation``."""

    rule: str
    n: int
    observed_rate: float
    expected_rate: float
    z: float
    deviation: float
    interval: Interval
    pvalue: float
    adjusted_pvalue: float


@dataclass(frozen=True)
class SplitScanResult:
    """The discovery scan and its rules' estimates on the estimation rows."""

    discovery: ScanResult
    estimates: tuple[HeldOutEstimate, ...]
    discovery_rows: int
    estimation_rows: int


def _subset(coded: CodedFeatures, rows: np.ndarray) -> CodedFeatures:
    return CodedFeatures(coded.features, coded.codes[rows])


def split_scan(
    frame: pd.DataFrame,
    features: list[str],
    labels: np.ndarray,
    probability: np.ndarray | None = None,
    decision: np.ndarray | None = None,
    *,
    fraction: float = 0.5,
    statistic: str = "calibration",
    sides: str = "two-sided",
    depth: int = 2,
    min_size: int = 30,
    levels: int = 5,
    confidence_level: float = 0.95,
    seed: int = 0,
    **scan_options: Any,
) -> SplitScanResult:
    """Scan a random ``fraction`` of the rows, evaluate its top rules on the rest."""
    if not 0.0 < fraction < 1.0:
        raise SubgroupScanError(f"fraction must lie in (0, 1), got {fraction!r}")
    coded = code_features(frame, features, levels)
    n = coded.n_rows
    rng = np.random.default_rng([seed, 0x5C17])
    discover = np.zeros(n, dtype=bool)
    discover[rng.permutation(n)[: round(fraction * n)]] = True
    parts = []
    for rows in (discover, ~discover):
        space = build_search_space(_subset(coded, rows), depth, min_size)
        cells = cell_outcomes(
            space,
            statistic,
            np.asarray(labels)[rows],
            None if probability is None else np.asarray(probability)[rows],
            None if decision is None else np.asarray(decision)[rows],
        )
        parts.append((space, cells))
    (space_d, cells_d), (space_e, cells_e) = parts
    found = scan_space(
        space_d,
        cells_d,
        sides=sides,
        confidence_level=confidence_level,
        seed=seed,
        **scan_options,
    )
    index_e = {g.rule: s for s, g in enumerate(space_e.subgroups)}
    mom = moments(space_e, cells_e)
    k = len(found.top)
    crit = float(norm.ppf(1 - (1 - confidence_level) / (2 * k)))
    rows_out = []
    for sub in found.top:
        s = index_e.get(sub.rule)
        if s is None or mom.variance[s] <= 0:  # below min_size on the estimation rows
            rows_out.append((sub.rule, math.nan, math.nan, math.nan, math.nan))
            continue
        rows_out.append((sub.rule, mom.n[s], mom.observed[s], mom.expected[s], mom.variance[s]))
    z = np.array([(o - e) / math.sqrt(v) for _, _, o, e, v in rows_out])
    p = naive_pvalues(z, sides)
    adj = adjust_pvalues(p, "holm")
    estimates = []
    for (rule, n_a, o, e, v), zz, pp, aa in zip(rows_out, z, p, adj, strict=True):
        dev = (o - e) / n_a
        half = crit * math.sqrt(v) / n_a if np.isfinite(v) else math.nan
        estimates.append(
            HeldOutEstimate(
                rule=rule,
                n=0 if not np.isfinite(n_a) else round(n_a),
                observed_rate=o / n_a,
                expected_rate=e / n_a,
                z=float(zz),
                deviation=dev,
                interval=Interval(dev - half, dev + half, confidence_level, "Bonferroni normal"),
                pvalue=float(pp),
                adjusted_pvalue=float(aa),
            )
        )
    return SplitScanResult(found, tuple(estimates), int(discover.sum()), int((~discover).sum()))
