"""Configuration of the permutation tests (``methods.permutation_tests``).

Every field has a documented default; :meth:`PermutationConfig.__post_init__` raises
:class:`~fairengine.errors.ConfigError` naming the key path
``methods.permutation_tests.<field>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fairengine.devices import check_device, resolve_device
from fairengine.errors import ConfigError
from fairengine.multiplicity import METHODS as MULTIPLICITY_METHODS
from fairengine.permutation.metrics import ALIASES, BUILTIN_METRICS
from fairengine.permutation.two_group import ALTERNATIVES, BACKENDS, SCHEMES, STUDENTIZATIONS

WHERE = "methods.permutation_tests"
#: ``backend`` values of the configuration: ``auto`` is resolved by :func:`resolve_backend`.
CONFIG_BACKENDS: tuple[str, ...] = ("auto", *BACKENDS)


@dataclass
class PermutationConfig:
    """Two-group permutation tests of metric differences for every pair of groups.

    Fields
    ------
    enabled : run the method. Default ``True``.
    metrics : metrics whose group differences are tested: ``positive_rate``, ``tpr``
        (``recall``), ``fnr``, ``fpr``, ``tnr``, ``precision``, ``accuracy``, ``calibration``
        (calibration-in-the-large, on the probabilities), ``auc`` (on the probabilities), or a
        name from ``custom_metrics``. Default ``[positive_rate, tpr, fpr, auc]``.
    attributes : protected attributes to test; ``None`` (default) = all.
    n_permutations : permutations T per test. Default 1999 (p-values in steps of 1/2000).
    alternative : ``two-sided`` (default), ``greater`` (metric of the first group of a pair
        larger) or ``less``. Pairs are (a, b) in sorted group order.
    studentize : ``per_permutation`` (default; DiCiccio et al.: each permuted difference divided
        by its own standard error), ``none`` (un-studentized, for comparison only: invalid under
        unequal base rates) or ``lift_compat`` (LiFT: pooled-bootstrap SD for the observed,
        permutation SD for the permuted differences).
    scheme : ``all_rows`` (default) or ``within_outcome`` (permute separately among positives
        and negatives).
    confidence_level : level of the effect-size intervals. Default 0.95.
    alpha : level of the within-method family decisions shown in the details (the audit's own
        decisions use the audit-level ``alpha`` and multiplicity). Default 0.05.
    family_multiplicity : adjustment of this method's own family of tests, reported in the
        details beside the raw p-values: ``holm`` (default), ``bh`` or ``none``.
    n_bootstrap : bootstrap resamples per group per permutation for custom metrics (and for
        LiFT's pooled bootstrap). Default 50.
    min_group_size : pairs with a group below this many rows are skipped with a warning.
        Default 10.
    custom_metrics : ``{name: "package.module:function"}``; each function is
        ``f(y, score, weights) -> float`` (score = probability). Default ``{}``.
    backend : engine of the AUC permutations (the other metrics always use numpy): ``auto``
        (default: ``torch`` when ``device`` resolves to a CUDA GPU, else ``numpy``, the fast
        path on a CPU), ``numpy`` or ``torch`` (on ``device``). torch draws its permutations
        from its own generator, so at the same seed its p-values differ from numpy's by
        Monte-Carlo noise only (both are valid permutation p-values).
    device : torch device for ``backend: torch``/``auto``: ``auto`` (default; CUDA when torch
        sees a GPU, else CPU), ``cpu``, ``cuda`` or ``cuda:<n>``; ``None`` means ``auto``.
        The result's ``parameters`` record the backend and device used (``backend``,
        ``device``; ``cpu`` for numpy) beside these settings (``backend_requested``,
        ``device_requested``).
    histogram_bins : bins of each permutation-distribution histogram in the details.
        Default 30.
    joint : also draw joint permutations of each attribute's group codes (one permutation shared
        by every pair and ratio metric of the attribute; ``fairengine.permutation.joint``), so
        that the audit's ``multiplicity: maxt`` can use the dependence between the tests
        (Westfall–Young maxT). Needs ``studentize: per_permutation``. Default ``None``: on when
        the audit's ``multiplicity`` is ``maxt`` and these tests decide (``decisions.gap_null:
        zero``, or a one-sided ``alternative``), off otherwise (about 1.5–3.5 s per attribute at
        45,000 rows and 1,999 permutations).
    joint_min_group_size : only pairs of groups with at least this many rows join the joint
        block; pairs with a smaller group are tested on their own (a block of one). The
        studentized gap of a tiny group is heavy-tailed under permutation and would dominate the
        block's maximum, costing every other test power. Default 100.
    max_tests : the most tests one audit may run (pairs of groups per attribute times
        metrics); more is an error before any test runs, naming the count. Default 500 (at
        1,999 permutations a test takes about 0.05-0.5 s on one core).
    """

    enabled: bool = True
    metrics: list[str] = field(default_factory=lambda: ["positive_rate", "tpr", "fpr", "auc"])
    attributes: list[str] | None = None
    n_permutations: int = 1999
    alternative: str = "two-sided"
    studentize: str = "per_permutation"
    scheme: str = "all_rows"
    confidence_level: float = 0.95
    alpha: float = 0.05
    family_multiplicity: str = "holm"
    n_bootstrap: int = 50
    min_group_size: int = 10
    custom_metrics: dict[str, Any] = field(default_factory=dict)
    backend: str = "auto"
    device: str | None = "auto"
    histogram_bins: int = 30
    max_tests: int = 500
    joint: bool | None = None
    joint_min_group_size: int = 100

    def __post_init__(self) -> None:
        def err(key: str, msg: str) -> ConfigError:
            return ConfigError(f"{WHERE}.{key} {msg}")

        if not isinstance(self.metrics, list) or not self.metrics:
            raise err("metrics", f"must be a non-empty list, got {self.metrics!r}")
        if not isinstance(self.custom_metrics, dict):
            raise err("custom_metrics", "must be a mapping {name: 'module:function'}")
        for name, target in self.custom_metrics.items():
            if not isinstance(target, str) or ":" not in target:
                raise err(
                    f"custom_metrics.{name}",
                    f"must be an import path 'package.module:function', got {target!r}",
                )
            if name in BUILTIN_METRICS or name in ALIASES:
                raise err(f"custom_metrics.{name}", "shadows a built-in metric; rename it")
        known = [*BUILTIN_METRICS, *ALIASES, *self.custom_metrics]
        for m in self.metrics:
            if m not in known:
                raise err("metrics", f"has unknown metric {m!r}; known: {known}")
        if len(set(self.metrics)) != len(self.metrics):
            raise err("metrics", f"lists a metric twice: {self.metrics}")
        if isinstance(self.n_permutations, bool) or int(self.n_permutations) < 1:
            raise err("n_permutations", f"must be an integer >= 1, got {self.n_permutations!r}")
        for key, value, allowed in (
            ("alternative", self.alternative, ALTERNATIVES),
            ("studentize", self.studentize, STUDENTIZATIONS),
            ("scheme", self.scheme, SCHEMES),
            ("family_multiplicity", self.family_multiplicity, MULTIPLICITY_METHODS),
            ("backend", self.backend, CONFIG_BACKENDS),
        ):
            if value not in allowed:
                raise err(key, f"must be one of {list(allowed)}, got {value!r}")
        for key in ("confidence_level", "alpha"):
            v = getattr(self, key)
            if not 0 < v < 1:
                raise err(key, f"must lie in (0, 1), got {v!r}")
        if self.n_bootstrap < 2:
            raise err("n_bootstrap", f"must be >= 2, got {self.n_bootstrap}")
        if self.min_group_size < 2:
            raise err("min_group_size", f"must be >= 2, got {self.min_group_size}")
        if self.histogram_bins < 1:
            raise err("histogram_bins", f"must be >= 1, got {self.histogram_bins}")
        if isinstance(self.joint_min_group_size, bool) or int(self.joint_min_group_size) < 2:
            raise err(
                "joint_min_group_size",
                f"must be an integer >= 2, got {self.joint_min_group_size!r}",
            )
        if isinstance(self.max_tests, bool) or int(self.max_tests) < 1:
            raise err("max_tests", f"must be an integer >= 1, got {self.max_tests!r}")
        if self.device is not None:
            check_device(self.device, f"{WHERE}.device")


def resolve_backend(config: PermutationConfig) -> tuple[str, str]:
    """The ``(backend, device)`` the AUC permutations run on: ``("numpy", "cpu")`` or
    ``("torch", <device>)``. ``backend: auto`` is torch when ``device`` resolves to a CUDA GPU,
    numpy otherwise; ``device: cuda`` without a GPU is a :class:`ConfigError` (for ``auto`` and
    ``torch``; ``numpy`` ignores ``device``)."""
    if config.backend == "numpy":
        return "numpy", "cpu"
    device = resolve_device(config.device, f"{WHERE}.device")
    if config.backend == "auto" and not device.startswith("cuda"):
        return "numpy", "cpu"
    return "torch", device


def n_pairs(levels: int) -> int:
    """Unordered pairs of ``levels`` groups: G(G−1)/2."""
    return levels * (levels - 1) // 2


def planned_permutation_tests(config: PermutationConfig, levels: Mapping[str, int]) -> int:
    """Tests :func:`~fairengine.permutation.run_permutation_tests` will run: for each tested
    attribute, its pairs of groups times the number of metrics."""
    attrs = list(levels) if config.attributes is None else list(config.attributes)
    return sum(n_pairs(levels[a]) for a in attrs if a in levels) * len(config.metrics)


def permutation_bound_problem(config: PermutationConfig, levels: Mapping[str, int]) -> str | None:
    """The message when the permutation tests exceed ``max_tests``, else ``None``."""
    planned = planned_permutation_tests(config, levels)
    if planned <= config.max_tests:
        return None
    attrs = list(levels) if config.attributes is None else list(config.attributes)
    parts = ", ".join(f"{a}: {levels[a]} groups, {n_pairs(levels[a]):,} pairs" for a in attrs)
    return (
        f"the permutation tests would run {planned:,} tests ({parts}; × {len(config.metrics)} "
        f"metrics), more than methods.permutation_tests.max_tests={config.max_tests}; merge or "
        "bin groups, restrict methods.permutation_tests.attributes or .metrics, or raise "
        "methods.permutation_tests.max_tests"
    )
