"""Configuration of the ranking method (``methods.ranking_metrics`` in the audit YAML)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fairengine.errors import ConfigError
from fairengine.setting_checks import require_alternative, require_integers, require_level

#: Tie-breaking policies of the ranks (:data:`fairengine.ranking.TIES`).
RANKING_TIES = ("order", "error")
#: Studentizations of the tests (:data:`fairengine.ranking.permutation.STUDENTIZATIONS`).
RANKING_STUDENTIZATIONS = ("per_permutation", "none")


def _is_cutoff(k: object) -> bool:
    """An item count (an integer >= 1, also written 5.0) or a fraction in (0, 1)."""
    if isinstance(k, bool) or not isinstance(k, int | float) or not math.isfinite(k):
        return False
    return 0 < k < 1 if isinstance(k, float) and k < 1 else k >= 1 and k == int(k)


@dataclass
class RankingConfig:
    """Fairness of a ranking (``task: ranking``;
    :func:`fairengine.ranking.method.run_ranking_metrics`).

    ``k``: the top-k cutoffs, each an item count per list (an integer >= 1) or a fraction of
    every list (a number in (0, 1): 0.1 is the top 10%); default the top 10% and 20%.
    ``exposure_test``: test the pairwise differences in mean position-discounted exposure
    (Singh & Joachims 2018) besides the top-k rate differences. ``n_permutations``: within-list
    permutations per pair of groups (shared by its tests; default 1,999). ``max_pairs``: at
    most this many pairs per attribute (the largest groups first; default 15).
    ``relevance_threshold``: an item is relevant when its relevance is >= this (precision@k
    and recall@k); ``None`` (default): relevance > 0. ``ties``: ``order`` (tied scores ranked
    in row order) or ``error``. ``studentize``: ``per_permutation`` (default) or ``none``.
    ``confidence_level`` (default 0.95), ``alternative`` (``two-sided``, ``greater``: the first
    group of a pair gets more exposure, ``less``).
    """

    enabled: bool = True
    k: list[float] = field(default_factory=lambda: [0.1, 0.2])
    exposure_test: bool = True
    n_permutations: int = 1999
    max_pairs: int = 15
    relevance_threshold: float | None = None
    ties: str = "order"
    studentize: str = "per_permutation"
    confidence_level: float = 0.95
    alternative: str = "two-sided"

    def __post_init__(self) -> None:
        where = "methods.ranking_metrics"
        ks = self.k if isinstance(self.k, list | tuple) else [self.k]
        bad = [k for k in ks if not _is_cutoff(k)]
        if bad or not ks:
            raise ConfigError(
                f"{where}.k must list top-k cutoffs: item counts (integers >= 1) or fractions "
                f"of each list (numbers in (0, 1)), got {self.k!r}"
            )
        # 1.0 and 5.0 from YAML are counts written as floats; 0.1 is a fraction
        self.k = [int(k) if float(k) >= 1 else float(k) for k in ks]
        require_integers(where, self, (("n_permutations", 19), ("max_pairs", 1)))
        if self.relevance_threshold is not None and not (
            isinstance(self.relevance_threshold, int | float)
            and not isinstance(self.relevance_threshold, bool)
            and math.isfinite(self.relevance_threshold)
        ):
            raise ConfigError(
                f"{where}.relevance_threshold must be a number or null, "
                f"got {self.relevance_threshold!r}"
            )
        if self.ties not in RANKING_TIES:
            raise ConfigError(
                f"{where}.ties must be one of {list(RANKING_TIES)}, got {self.ties!r}"
            )
        if self.studentize not in RANKING_STUDENTIZATIONS:
            raise ConfigError(
                f"{where}.studentize must be one of {list(RANKING_STUDENTIZATIONS)}, "
                f"got {self.studentize!r}"
            )
        require_level(where, "confidence_level", self.confidence_level)
        require_alternative(where, self.alternative)
