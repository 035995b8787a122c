"""Configuration of the LiFT group-metric suite (``methods.group_metrics`` in the audit YAML)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fairengine.delong import INTERVAL_METHODS
from fairengine.distribution_distance import DISTANCE_METRICS, check_distance_names
from fairengine.errors import ConfigError, DataContractError
from fairengine.group_performance import PERFORMANCE_METRICS, check_metric_names
from fairengine.inequality import AGGREGATE_METRICS, aggregate_name
from fairengine.intersection import DEFAULT_MAX_CELLS

LEVELS: tuple[str, ...] = ("model", "dataset")
DISTANCE_BENEFITS: tuple[str, ...] = ("SKEWS", "DEMOGRAPHIC_PARITY", "EQUALIZED_ODDS")


@dataclass
class GroupMetricsConfig:
    """Configuration of ``methods.group_metrics`` (every field has a documented default).

    enabled: run the method. Default true.
    lift_compat: reproduce LiFT's numbers (α=1 smoothing on raw masses, rounding to 5 decimals,
        AUC without the origin, raw-valued GEI/Atkinson/CV, …). Default false (correct
        definitions).
    attributes: protected attributes to audit; null = all of the data's protected attributes.
    intersection: also audit the intersection of all ``attributes`` (when there are ≥ 2).
        Default true.
    max_intersection_cells: error when the intersection has more non-empty cells. Default 64
        (the details grow by about 3 KB per cell).
    levels: "model" (prediction distribution, needs scores) and/or "dataset" (labels).
    reference: per attribute (or intersection name, e.g. "race & sex"), the reference
        distribution: {group: population share} or {group: [mass_outcome0, mass_outcome1]};
        attributes not listed use UNIFORM. Default {} (UNIFORM everywhere).
    smoothing: pseudo-count added to each observed cell for skews (counts units). Default 0.
    distance_metrics: subset of SKEWS, INF_NORM_DIST, TOTAL_VAR_DIST, JS_DIVERGENCE,
        KL_DIVERGENCE. Default all.
    performance_metrics: subset of AUC, PRECISION, RECALL, TNR, FNR, FPR, ACCURACY. Default all.
    auc_bins: null = exact AUC (one sort) up to ``auc_exact_max_rows`` rows and a 4096-bin
        histogram above; an integer B ≥ 2 = always the AUC from a B-bin score histogram
        (O(n); its error bound is reported). Default null.
    auc_exact_max_rows: above this many rows a null ``auc_bins`` means 4096 bins (the exact
        O(n log n) AUC takes ~13 CPU s and 2x the input's memory at 10M rows). Default 1000000.
    auc_interval: "wald" (pROC's DeLong interval) or "logit". Default "wald".
    auc_gap_tests: add tested findings auc_gap.<attr>.<a>_<b> (DeLong z-test of equal AUC
        in two independent groups) for single attributes. Default false.
    distance_benefit_metrics: benefit vectors from SKEWS, DEMOGRAPHIC_PARITY, EQUALIZED_ODDS.
        Default [SKEWS, DEMOGRAPHIC_PARITY].
    performance_benefit_metrics: benefit vectors from performance metrics (and names of
        ``custom_metrics``). Default [AUC, RECALL, FPR].
    aggregate_metrics: indices over each benefit vector: GENERALIZED_ENTROPY_INDEX,
        ATKINSON_INDEX, THEIL_L_INDEX, THEIL_T_INDEX, COEFFICIENT_OF_VARIATION. Default all.
    gei_alpha: α of the generalized entropy index. Default 2.0.
    atkinson_epsilon: ε ≥ 0 of the Atkinson index. Default 0.5.
    custom_metrics: {name: "package.module:function"}; function(label, score, prediction,
        weights) -> float evaluated per group. Default {}.
    confidence_level: level of every interval. Default 0.95.
    max_pairs_reported: per rate and attribute, the pairs kept in the details (largest |gap|
        first). Default 20.
    """

    enabled: bool = True
    lift_compat: bool = False
    attributes: list[str] | None = None
    intersection: bool = True
    max_intersection_cells: int = DEFAULT_MAX_CELLS
    levels: list[str] = field(default_factory=lambda: list(LEVELS))
    reference: dict[str, Any] = field(default_factory=dict)
    smoothing: float = 0.0
    distance_metrics: list[str] = field(default_factory=lambda: list(DISTANCE_METRICS))
    performance_metrics: list[str] = field(default_factory=lambda: list(PERFORMANCE_METRICS))
    auc_bins: int | None = None
    auc_exact_max_rows: int = 1_000_000
    auc_interval: str = "wald"
    auc_gap_tests: bool = False
    distance_benefit_metrics: list[str] = field(
        default_factory=lambda: ["SKEWS", "DEMOGRAPHIC_PARITY"]
    )
    performance_benefit_metrics: list[str] = field(default_factory=lambda: ["AUC", "RECALL", "FPR"])
    aggregate_metrics: list[str] = field(default_factory=lambda: list(AGGREGATE_METRICS))
    gei_alpha: float = 2.0
    atkinson_epsilon: float = 0.5
    custom_metrics: dict[str, str] = field(default_factory=dict)
    confidence_level: float = 0.95
    max_pairs_reported: int = 20

    def __post_init__(self) -> None:
        where = "methods.group_metrics"

        def fail(key: str, msg: str) -> None:
            raise ConfigError(f"{where}.{key} {msg}")

        if not 0 < self.confidence_level < 1:
            fail("confidence_level", f"must lie in (0, 1), got {self.confidence_level}")
        if not isinstance(self.max_intersection_cells, int) or self.max_intersection_cells < 1:
            fail("max_intersection_cells", f"must be >= 1, got {self.max_intersection_cells}")
        if not isinstance(self.max_pairs_reported, int) or self.max_pairs_reported < 0:
            fail("max_pairs_reported", f"must be >= 0, got {self.max_pairs_reported}")
        bad = [lv for lv in self.levels if lv not in LEVELS]
        if bad or not self.levels:
            fail("levels", f"must be a non-empty subset of {list(LEVELS)}, got {self.levels}")
        if not (self.smoothing >= 0 and math.isfinite(self.smoothing)):
            fail("smoothing", f"must be a finite number >= 0, got {self.smoothing}")
        if self.auc_bins is not None and (
            isinstance(self.auc_bins, bool)
            or not isinstance(self.auc_bins, int)
            or not 2 <= self.auc_bins <= 2**20
        ):
            fail("auc_bins", f"must be null or an integer in [2, 2^20], got {self.auc_bins!r}")
        if self.auc_interval not in INTERVAL_METHODS:
            fail(
                "auc_interval",
                f"must be one of {list(INTERVAL_METHODS)}, got {self.auc_interval!r}",
            )
        if not math.isfinite(self.gei_alpha):
            fail("gei_alpha", f"must be finite, got {self.gei_alpha}")
        if not (self.atkinson_epsilon >= 0 and math.isfinite(self.atkinson_epsilon)):
            fail("atkinson_epsilon", f"must be a finite number >= 0, got {self.atkinson_epsilon}")
        try:
            self.distance_metrics = check_distance_names(
                self.distance_metrics, f"{where}.distance_metrics"
            )
            self.performance_metrics = check_metric_names(
                self.performance_metrics, f"{where}.performance_metrics"
            )
            self.aggregate_metrics = [
                aggregate_name(a, f"{where}.aggregate_metrics") for a in self.aggregate_metrics
            ]
        except DataContractError as exc:
            raise ConfigError(str(exc)) from None
        dbm = [str(b).upper() for b in self.distance_benefit_metrics]
        bad = [b for b in dbm if b not in DISTANCE_BENEFITS]
        if bad:
            fail(
                "distance_benefit_metrics",
                f"has unknown name(s) {bad}; valid names: {list(DISTANCE_BENEFITS)}",
            )
        self.distance_benefit_metrics = dbm
        for name, target in self.custom_metrics.items():
            if not isinstance(target, str) or ":" not in target:
                fail(f"custom_metrics.{name}", f"must be 'package.module:function', got {target!r}")
            if str(name).upper() in PERFORMANCE_METRICS:
                fail(f"custom_metrics.{name}", "shadows a built-in performance metric")
        pbm = []
        for b in self.performance_benefit_metrics:
            if b in self.custom_metrics:
                pbm.append(b)
                continue
            try:
                pbm += check_metric_names([b], f"{where}.performance_benefit_metrics")
            except DataContractError as exc:
                raise ConfigError(f"{exc}; or a name of custom_metrics") from None
        self.performance_benefit_metrics = pbm
        if not isinstance(self.reference, dict):
            fail(
                "reference",
                f"must be a mapping from attribute to distribution, got {self.reference!r}",
            )
