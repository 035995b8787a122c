"""Configuration of the subgroup scan (``methods.subgroup_scan`` in the audit YAML)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fairengine.errors import ConfigError

_KEY = "methods.subgroup_scan"
#: The statistics the scan can maximise (:data:`fairengine.subgroup_scan.STATISTICS`).
SCAN_STATISTICS = ("calibration", "positive_rate", "tpr", "fpr")
SCAN_SIDES = ("two-sided", "greater", "less")
SCAN_MODES = ("exact", "gaussian")


def _whole(name: str, value: object, low: int, high: int | None = None) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if ok and high is not None:
        ok = value <= high  # type: ignore[operator]
    if not ok:
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{_KEY}.{name} must be a whole number {bound}, got {value!r}")


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{_KEY}.{name} must be one of {list(allowed)}, got {value!r}")


@dataclass
class SubgroupScanConfig:
    """Scan of conjunctions of attribute values for the worst subgroup, with a p-value that
    accounts for the search (:func:`fairengine.subgroup_scan.method.run_subgroup_scan`).

    ``features``: columns scanned besides the protected attributes (numeric ones binned at
    quantiles into at most ``levels`` bins); ``depth``: most conditions per rule (default 2);
    ``min_size``: fewest rows of a scanned subgroup; ``statistic``: ``calibration`` (observed
    vs predicted positives, needs probability scores), ``positive_rate``, ``tpr`` or ``fpr``
    (needs hard predictions); ``sides``: ``two-sided``, ``greater`` (observed above the null)
    or ``less``; ``top_k`` subgroups reported, pairwise Jaccard similarity at most
    ``jaccard``; ``mode``: ``exact`` (re-run the scan on null data) or ``gaussian`` (the
    maximum of a Gaussian vector with the exact null covariance); ``min_draws``: null scans
    behind the step-down p-values and simultaneous intervals (the sequential decision of the
    maximum may draw more, up to ``max_draws``); ``held_out``: whether the scores were
    computed on rows the model was not trained on (false: a warning; in-sample fits make the
    null conservative).
    """

    enabled: bool = False
    features: list[str] = field(default_factory=list)
    depth: int = 2
    min_size: int = 30
    levels: int = 5
    statistic: str = "calibration"
    sides: str = "two-sided"
    top_k: int = 5
    jaccard: float = 0.5
    mode: str = "exact"
    min_draws: int = 999
    max_draws: int = 9999
    confidence_level: float = 0.95
    held_out: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.features, list) or not all(
            isinstance(f, str) for f in self.features
        ):
            raise ConfigError(f"{_KEY}.features must be a list of column names")
        _whole("depth", self.depth, 1, 4)
        _whole("min_size", self.min_size, 1)
        _whole("levels", self.levels, 2, 1000)
        _whole("top_k", self.top_k, 1, 100)
        _whole("min_draws", self.min_draws, 0)
        _whole("max_draws", self.max_draws, 99)
        _choice("statistic", self.statistic, SCAN_STATISTICS)
        _choice("sides", self.sides, SCAN_SIDES)
        _choice("mode", self.mode, SCAN_MODES)
        if not isinstance(self.jaccard, int | float) or not 0.0 <= self.jaccard <= 1.0:
            raise ConfigError(f"{_KEY}.jaccard must lie in [0, 1], got {self.jaccard!r}")
        if not isinstance(self.confidence_level, float) or not 0 < self.confidence_level < 1:
            raise ConfigError(
                f"{_KEY}.confidence_level must lie in (0, 1), got {self.confidence_level!r}"
            )
        if not isinstance(self.held_out, bool):
            raise ConfigError(f"{_KEY}.held_out must be true or false, got {self.held_out!r}")
