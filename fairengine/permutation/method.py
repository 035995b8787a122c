"""The audit method ``permutation_tests``: every pair of groups of every protected attribute,
for every configured metric, tested by :func:`~fairengine.permutation.permutation_test`.

Findings are keyed ``perm_<metric>.<attribute>.<a>_<b>`` (a before b in sorted group order;
estimate = metric(a) − metric(b)); their raw p-values are adjusted across the whole audit by
:mod:`fairengine.verdict`. The details (:class:`~fairengine.permutation.result.PermutationDetails`)
also carry this method's own family — raw and adjusted p-values (``family_multiplicity``) and
decisions at ``alpha`` — and, per test, the permutation histogram, the Monte-Carlo error of the
p-value and its Wilson interval.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fairengine import progress, worker_processes
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError
from fairengine.finding_keys import pair_token, part_token
from fairengine.multiplicity import adjust_pvalues
from fairengine.permutation.config import (
    WHERE,
    PermutationConfig,
    permutation_bound_problem,
    planned_permutation_tests,
    resolve_backend,
)
from fairengine.permutation.joint import JointFamily, joint_family, maxt_exceedances
from fairengine.permutation.metrics import ALIASES, RATIO_METRICS
from fairengine.permutation.result import (
    NullHistogram,
    PermutationDetails,
    PermutationFamily,
    PermutationTestRecord,
    SkippedTest,
)
from fairengine.permutation.two_group import (
    PermutationTestResult,
    permutation_test,
    permutation_test_from_counts,
)
from fairengine.results import (
    Finding,
    Interval,
    JointEvidence,
    MethodResult,
    ResamplingPart,
    gap_question,
)
from fairengine.scores import LABEL_AUC_REASON

if TYPE_CHECKING:
    from fairengine.streaming.tables import StreamedCounts

METHOD = "permutation_tests"
TITLE = "Permutation tests of metric differences (studentized)"

_LABELS = {**{k: m.label for k, m in RATIO_METRICS.items()}, "auc": "AUC"}
_STUDENTIZE_WORDS = {
    "per_permutation": "studentized permutation test",
    "none": "un-studentized permutation test",
    "lift_compat": "LiFT-style permutation test",
}


def load_custom_metric(name: str, target: str) -> Callable[..., float]:
    """Import ``package.module:function`` for custom metric ``name`` (ConfigError if absent)."""
    module_name, _, attr = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"{WHERE}.custom_metrics.{name}: cannot import {target!r} ({exc})"
        ) from None
    if not callable(obj):
        raise ConfigError(f"{WHERE}.custom_metrics.{name}: {target!r} is not callable")
    return obj


def _null_words(metric: str, a: str, b: str, alternative: str) -> str:
    rel = {"two-sided": "=", "greater": "≤", "less": "≥"}[alternative]
    return f"{metric}({a}) {rel} {metric}({b})"


@dataclass(frozen=True)
class PlannedTest:
    """One (attribute, metric, pair of groups) test of the method, in the method's order."""

    index: int
    attribute: str
    metric_name: str
    metric: Any
    a: int
    b: int
    group_a: str
    group_b: str
    key: str
    metric_key: str


def _attributes(dataset: AuditDataset, config: PermutationConfig) -> list[str]:
    return _tested_attributes(list(dataset.groups), config)


def _tested_attributes(protected: list[str], config: PermutationConfig) -> list[str]:
    attrs = list(protected) if config.attributes is None else list(config.attributes)
    unknown = [a for a in attrs if a not in protected]
    if unknown:
        raise ConfigError(
            f"{WHERE}.attributes {unknown} are not protected attributes of the dataset "
            f"({list(protected)})"
        )
    return attrs


def planned_tests(dataset: AuditDataset, config: PermutationConfig) -> list[PlannedTest]:
    """Every test of the method in order (attribute, metric, pair), with its stream index."""
    attrs = _attributes(dataset, config)
    return _planned({a: dataset.groups[a].categories for a in attrs}, config)


def _planned(
    categories: dict[str, tuple[str, ...]], config: PermutationConfig
) -> list[PlannedTest]:
    """The tests of :func:`planned_tests` over the tested attributes' ``categories``."""
    customs = {n: load_custom_metric(n, t) for n, t in config.custom_metrics.items()}
    out: list[PlannedTest] = []
    for attr, cats in categories.items():
        for metric_name in config.metrics:
            metric_key = ALIASES.get(metric_name, metric_name)
            metric: Any = customs.get(metric_name, metric_key)
            for a in range(len(cats)):
                for b in range(a + 1, len(cats)):
                    key = (
                        f"perm_{part_token(metric_name)}.{part_token(attr)}."
                        f"{pair_token(cats[a], cats[b])}"
                    )
                    out.append(
                        PlannedTest(
                            len(out),
                            attr,
                            metric_name,
                            metric,
                            a,
                            b,
                            cats[a],
                            cats[b],
                            key,
                            metric_key,
                        )
                    )
    return out


def _skip_reason(dataset: AuditDataset, test: PlannedTest) -> str | None:
    if test.metric_key == "auc" and dataset.score_type == "label":
        return f"{test.key}: skipped, AUC {LABEL_AUC_REASON}"
    if test.metric_key == "auc" and dataset.weights is not None:
        return f"{test.key}: skipped, the AUC permutation test does not support sample weights"
    return None


WORKER_WORK = 20_000_000
"""Row-permutations (rows x permutations) from which a further batch of a test goes to a
worker process: Adult's AUC batches of thousands of permutations of 45,222 rows do; small
batches cost less than the trip."""


def _run_test(
    dataset: AuditDataset,
    config: PermutationConfig,
    test: PlannedTest,
    n_permutations: int,
    rng: np.random.Generator,
    *,
    worker: bool = False,
) -> PermutationTestResult:
    """One planned test on the dataset's rows. ``worker``: a large CPU test (at least
    :data:`WORKER_WORK` row-permutations) runs in a worker process
    (:mod:`fairengine.worker_processes`; its numpy loops hold the GIL between calls), with the
    same result as on this thread (the generator travels with its state)."""
    prediction = dataset.require_scores("permutation tests")
    probability = dataset.probability
    enc = dataset.groups[test.attribute]
    rows = (enc.codes == test.a) | (enc.codes == test.b)
    w = dataset.weights
    backend, device = resolve_backend(config)
    call: Any = permutation_test
    if worker and device == "cpu" and int(rows.sum()) * int(n_permutations) >= WORKER_WORK:
        call = functools.partial(worker_processes.run, permutation_test)
    return call(
        dataset.label[rows],
        prediction[rows],
        enc.codes[rows] == test.a,
        metric=test.metric,
        probability=None if probability is None else probability[rows],
        weights=None if w is None else w[rows],
        n_permutations=int(n_permutations),
        alternative=config.alternative,
        studentize=config.studentize,
        scheme=config.scheme,
        confidence_level=config.confidence_level,
        n_bootstrap=int(config.n_bootstrap),
        min_group_size=int(config.min_group_size),
        seed=rng,
        backend=backend,
        device=device,
        group_names=(f"{test.attribute}={test.group_a}", f"{test.attribute}={test.group_b}"),
    )


def _skipped(test: PlannedTest, reason: str) -> SkippedTest:
    return SkippedTest(
        test.attribute, test.group_a, test.group_b, test.metric_name, test.key, reason
    )


#: The path-specific fields of :class:`PermutationTestRecord` (``PermutationTestResult.extra``).
_EXTRA_FIELDS = frozenset(
    {"cell_counts_a", "cell_counts_b", "variance_a", "variance_b", "bootstrap_sd"}
)


def _optional_counts(x: Any) -> tuple[int, ...] | None:
    return None if x is None else tuple(int(v) for v in x)


def _optional_float(x: Any) -> float | None:
    return None if x is None else float(x)


def _record(
    test: PlannedTest, res: PermutationTestResult, bins: int, adjusted: float, alpha: float
) -> PermutationTestRecord:
    """The details record of one test run, with its p-value adjusted within the family."""
    unknown = set(res.extra) - _EXTRA_FIELDS
    if unknown:  # a new path-specific field needs its place in PermutationTestRecord
        raise TypeError(f"{test.key}: result fields {sorted(unknown)} have no details field")
    ci = res.confidence_interval()
    p_low, p_high = res.pvalue_interval()
    h = res.null_histogram(bins)
    return PermutationTestRecord(
        attribute=test.attribute,
        group_a=test.group_a,
        group_b=test.group_b,
        metric=res.metric,
        key=test.key,
        statistic=float(res.statistic),
        pvalue=float(res.pvalue),
        pvalue_se=float(res.pvalue_se),
        pvalue_interval=(p_low, p_high),
        difference=float(res.difference),
        se=float(res.se),
        ci=(float(ci.low), float(ci.high)),
        ci_method=ci.method,
        value_a=float(res.value_a),
        value_b=float(res.value_b),
        n_a=int(res.n_a),
        n_b=int(res.n_b),
        n_permutations=int(res.n_permutations),
        n_extreme=int(res.n_extreme),
        n_undefined=int(res.n_undefined),
        alternative=res.alternative,
        studentize=res.studentize,
        scheme=res.scheme,
        path=res.path,
        null_histogram=NullHistogram(
            edges=tuple(float(e) for e in h["edges"]),
            counts=tuple(int(c) for c in h["counts"]),
            observed=float(h["observed"]),
            n_nonfinite=None if "n_nonfinite" not in h else int(h["n_nonfinite"]),
        ),
        pvalue_interval_level=0.95,
        pvalue_adjusted_family=adjusted,
        decision_family="reject" if adjusted <= alpha else "fail_to_reject",
        cell_counts_a=_optional_counts(res.extra.get("cell_counts_a")),
        cell_counts_b=_optional_counts(res.extra.get("cell_counts_b")),
        variance_a=_optional_float(res.extra.get("variance_a")),
        variance_b=_optional_float(res.extra.get("variance_b")),
        bootstrap_sd=_optional_float(res.extra.get("bootstrap_sd")),
    )


#: First spawn-key entry of the joint-permutation streams (apart from the per-test streams).
JOINT_STREAM = 1_000_003


def joint_block(attribute: str) -> str:
    """Name of the joint permutation block of ``attribute``'s ratio-metric tests."""
    return f"permutation_tests.{part_token(attribute)}"


def _joint_family(
    dataset: AuditDataset, config: PermutationConfig, attribute: str
) -> JointFamily | None:
    """The joint family of ``attribute``'s ratio-metric tests, or None when there is none (no
    ratio metric, not studentized per permutation)."""
    if not config.joint or config.studentize != "per_permutation":
        return None
    metrics = [
        ALIASES.get(m, m)
        for m in config.metrics
        if m not in config.custom_metrics and ALIASES.get(m, m) in RATIO_METRICS
    ]
    if not metrics:
        return None
    enc = dataset.groups[attribute]
    sizes = np.bincount(enc.codes, minlength=enc.n_groups)
    members = [int(k) for k in np.flatnonzero(sizes >= config.joint_min_group_size)]
    if len(members) < 2:
        return None
    return joint_family(
        dataset.label,
        dataset.require_scores("permutation tests"),
        enc.codes,
        enc.n_groups,
        list(dict.fromkeys(metrics)),
        weights=dataset.weights,
        probability=dataset.probability,
        alternative=config.alternative,
        scheme=config.scheme,
        groups=members,
    )


def _joint_counts(
    family: JointFamily, seed: int, attr_index: int, start: int, batch: int
) -> np.ndarray:
    ss = np.random.SeedSequence(seed, spawn_key=(JOINT_STREAM, attr_index, int(start)))
    return maxt_exceedances(family, np.random.default_rng(ss), batch)


def _joint_evidence(
    dataset: AuditDataset,
    config: PermutationConfig,
    findings: list[Finding],
    tests: dict[str, PlannedTest],
    seed: int,
) -> list[Finding]:
    """The findings with each ratio-metric finding's place in its attribute's joint maxT block
    attached (new findings; the others as they were)."""
    findings = list(findings)
    for attr_index, attr in enumerate(_attributes(dataset, config)):
        family = _joint_family(dataset, config, attr)
        if family is None:
            continue
        counts = _joint_counts(family, seed, attr_index, 0, int(config.n_permutations))
        column = {label: j for j, label in enumerate(family.labels)}
        rank = {int(j): r for r, j in enumerate(family.order)}
        for i, f in enumerate(findings):
            t = tests[f.key]
            j = column.get((t.metric_key, t.a, t.b))
            if t.attribute != attr or j is None or not family.tested[j]:
                continue
            findings[i] = dataclasses.replace(
                f,
                joint=JointEvidence(
                    joint_block(attr),
                    rank[j],
                    ResamplingPart("maxT permutation", int(counts[j]), int(config.n_permutations)),
                ),
            )
    return findings


class PermutationResampler:
    """Draws more permutations for this method's tests (a :class:`fairengine.decisions.Resampler`).

    Test i's further batches draw from ``SeedSequence(seed, spawn_key=(i, start))``, where
    ``start`` is the number of permutations it already has: independent of its first
    ``SeedSequence(seed, spawn_key=(i,))`` stream and of each other, and reproducible.
    """

    def __init__(self, dataset: AuditDataset, config: PermutationConfig, *, seed: int = 0):
        self.dataset = dataset
        self.config = config
        self.seed = int(seed)
        self._tests = {t.key: t for t in planned_tests(dataset, config)}
        self._attr_index = {a: i for i, a in enumerate(_attributes(dataset, config))}
        self._families: dict[str, JointFamily | None] = {}
        self._joint_draws: dict[tuple[str, int, int], np.ndarray] = {}
        self._lock = threading.Lock()

    def can_extend(self, key: str) -> bool:
        return self.config.enabled and key in self._tests

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        test = self._tests[key]
        if part == "maxT permutation":
            return self._draw_joint(test, start, batch)
        ss = np.random.SeedSequence(self.seed, spawn_key=(test.index, int(start)))
        progress.report(METHOD, f"more permutations for {key}: {start:,} -> {start + batch:,}")
        rng = np.random.default_rng(ss)
        res = _run_test(self.dataset, self.config, test, batch, rng, worker=True)
        return int(res.n_extreme)

    def _draw_joint(self, test: PlannedTest, start: int, batch: int) -> int:
        """One batch of joint permutations serves every open test of the block (cached)."""
        attr = test.attribute
        with self._lock:
            if attr not in self._families:
                self._families[attr] = _joint_family(self.dataset, self.config, attr)
            family = self._families[attr]
        if family is None:
            raise ValueError(f"{test.key}: no joint permutation block")
        cache_key = (attr, int(start), int(batch))
        with self._lock:  # one batch per block, even when its tests are drawn on threads
            counts = self._joint_counts_cached(family, attr, cache_key, start, batch)
        j = family.labels.index((test.metric_key, test.a, test.b))
        return int(counts[j])

    def _joint_counts_cached(
        self,
        family: JointFamily,
        attr: str,
        cache_key: tuple[str, int, int],
        start: int,
        batch: int,
    ) -> np.ndarray:
        if cache_key not in self._joint_draws:
            progress.report(
                METHOD, f"joint permutations for {attr}: {start:,} -> {start + batch:,}"
            )
            attr_index = self._attr_index[attr]
            self._joint_draws[cache_key] = _joint_counts(
                family, self.seed, attr_index, start, batch
            )
        return self._joint_draws[cache_key]


def run_permutation_tests(
    dataset: AuditDataset, config: PermutationConfig, *, seed: int = 0
) -> MethodResult:
    """Run the configured permutation tests on ``dataset`` (see module docstring).

    Test number i (in attribute, metric, pair order) draws from
    ``numpy.random.SeedSequence(seed, spawn_key=(i,))``, so runs are reproducible. A test that
    cannot be run (a group below ``min_group_size``, a metric undefined in a group, a custom
    metric that raises, AUC with sample weights) is skipped with a warning and reported in the
    details. Each finding carries its exceedance count, so the audit can draw more permutations
    (:class:`PermutationResampler`) where its decision is open.
    """
    start = time.perf_counter()
    if not config.enabled:
        return MethodResult(
            method=METHOD, title=TITLE, status="not_run", reason="disabled in the configuration"
        )
    dataset.require_scores("permutation tests")
    backend, device = resolve_backend(config)  # a ConfigError here, before any test runs
    attrs = _attributes(dataset, config)
    levels = {a: dataset.groups[a].n_groups for a in attrs}
    too_many = permutation_bound_problem(config, levels)
    if too_many:
        raise ConfigError(too_many)
    plan = planned_tests(dataset, config)
    return _tests_result(
        plan,
        config,
        seed,
        attrs=attrs,
        levels=levels,
        skip_reason=lambda test: _skip_reason(dataset, test),
        run_test=lambda test, n, rng: _run_test(dataset, config, test, n, rng),
        joint=lambda findings: _joint_evidence(
            dataset, config, findings, {t.key: t for t in plan}, seed
        ),
        prediction_mode=dataset.prediction_mode,
        threshold=dataset.threshold,
        backend=backend,
        device=device,
        start=start,
    )


#: Why a test needs rows on a streamed audit (count tables only).
NEEDS_ROWS = (
    "needs rows: a streamed audit tests only proportion metrics of unweighted thresholded "
    "predictions from its cell counts"
)


def run_permutation_tests_from_counts(
    counts: StreamedCounts,
    config: PermutationConfig,
    *,
    seed: int = 0,
    sample: AuditDataset | None = None,
) -> MethodResult:
    """:func:`run_permutation_tests` from the count tables of a streamed audit
    (:class:`fairengine.streaming.StreamedCounts`) instead of rows.

    A test of a proportion metric (positive rate, TPR, FNR, FPR, TNR, precision, accuracy) on
    unweighted thresholded predictions depends on the rows only through both groups' (y, ŷ)
    cell counts and draws its permutations from them (:func:`permutation_test_from_counts`):
    it is the same test, with the same draws from the same seed, as on rows. Every other test
    (AUC, calibration, custom metrics, expected counts, weights) needs rows: without
    ``sample`` it is skipped, with the reason in the warnings and the details; with ``sample``
    (an :class:`AuditDataset` of the stream's stratified sample,
    :attr:`fairengine.streaming.StreamedCounts.sample`) it runs on the sample's rows, and its
    finding's label and reading say that it comes from a sample of N rows, not from all rows
    (as does a warning listing them). The joint maxT block permutes rows and is not attached.
    """
    start = time.perf_counter()
    if not config.enabled:
        return MethodResult(
            method=METHOD, title=TITLE, status="not_run", reason="disabled in the configuration"
        )
    counts.require_scores("permutation tests")
    backend, device = resolve_backend(config)
    attrs = _tested_attributes(list(counts.categories), config)
    levels = {a: len(counts.categories[a]) for a in attrs}
    too_many = permutation_bound_problem(config, levels)
    if too_many:
        raise ConfigError(too_many)
    plan = _planned({a: counts.categories[a] for a in attrs}, config)
    from_cells = counts.threshold is not None and not counts.weighted

    def needs_rows(test: PlannedTest) -> bool:
        metric = RATIO_METRICS.get(test.metric_key) if isinstance(test.metric, str) else None
        return metric is None or metric.uses_probability or not from_cells

    def skip_reason(test: PlannedTest) -> str | None:
        if not needs_rows(test):
            return None
        if sample is None:
            return f"{test.key}: skipped, {NEEDS_ROWS}"
        return _skip_reason(sample, test)

    def run_test(test: PlannedTest, n: int, rng: np.random.Generator) -> PermutationTestResult:
        if sample is not None and needs_rows(test):
            return _run_test(sample, config, _on_sample(sample, test), n, rng)
        counts_a, counts_b = counts.cell_counts(test.attribute, test.a, test.b)
        return permutation_test_from_counts(
            counts_a,
            counts_b,
            metric=test.metric_key,
            n_permutations=int(n),
            alternative=config.alternative,
            studentize=config.studentize,
            scheme=config.scheme,
            confidence_level=config.confidence_level,
            n_bootstrap=int(config.n_bootstrap),
            min_group_size=int(config.min_group_size),
            seed=rng,
            group_names=(f"{test.attribute}={test.group_a}", f"{test.attribute}={test.group_b}"),
        )

    def joint(findings: list[Finding]) -> list[Finding]:
        if config.joint and config.studentize == "per_permutation":
            warnings_extra.append(
                "the joint maxT permutation block permutes rows; a streamed audit does not "
                "attach it (the tests' own p-values are unchanged)"
            )
        return findings

    warnings_extra: list[str] = []
    _by_key = {t.key: t for t in plan}
    result = _tests_result(
        plan,
        config,
        seed,
        attrs=attrs,
        levels=levels,
        skip_reason=skip_reason,
        run_test=run_test,
        joint=joint,
        prediction_mode=counts.prediction_mode,
        threshold=counts.threshold,
        backend=backend,
        device=device,
        start=start,
    )
    if sample is not None:
        sampled = [f.key for f in result.findings if needs_rows(_by_key[f.key])]
        note = f"from a sample of {sample.n_rows:,} rows"
        findings = [
            dataclasses.replace(
                f,
                label=f"{f.label} ({note})",
                reading=f"{f.reading} Computed {note} (the stream's stratified sample), not "
                "from all rows.",
            )
            if f.key in sampled
            else f
            for f in result.findings
        ]
        if sampled:
            warnings_extra.append(
                f"{len(sampled)} permutation test(s) need rows and were computed {note}, not "
                f"from all {counts.n_rows:,} rows: {', '.join(sampled[:5])}"
                + (" …" if len(sampled) > 5 else "")
            )
        result = dataclasses.replace(result, findings=findings)
    if warnings_extra:
        result = dataclasses.replace(result, warnings=[*result.warnings, *warnings_extra])
    return result


class CountsPermutationResampler:
    """More permutations for the tests of a streamed audit
    (:func:`run_permutation_tests_from_counts`), for the audit's sequential decisions: test i
    draws its batch after ``start`` from ``SeedSequence(seed, spawn_key=(i, start))``, the
    convention of :class:`PermutationResampler`.
    A test that runs from cell counts draws from them (the draws the same test on rows would
    make); a test computed on the stream's stratified ``sample`` (AUC, calibration, expected
    counts: they need rows) draws more permutations of the same sample's rows, so its
    Monte-Carlo p-value of the sample's test is decided like any other (its finding still says
    that it comes from the sample)."""

    def __init__(
        self,
        counts: StreamedCounts,
        config: PermutationConfig,
        *,
        seed: int = 0,
        sample: AuditDataset | None = None,
    ):
        self.counts = counts
        self.config = config
        self.seed = int(seed)
        self.sample = sample
        self._tests: dict[str, PlannedTest] = {}
        self._on_rows: dict[str, PlannedTest] = {}
        if not config.enabled or not counts.has_scores:
            return
        from_cells = counts.threshold is not None and not counts.weighted
        attrs = _tested_attributes(list(counts.categories), config)
        for test in _planned({a: counts.categories[a] for a in attrs}, config):
            metric = RATIO_METRICS.get(test.metric_key) if isinstance(test.metric, str) else None
            if from_cells and metric is not None and not metric.uses_probability:
                self._tests[test.key] = test
            elif sample is not None and _skip_reason(sample, test) is None:
                self._on_rows[test.key] = test

    def can_extend(self, key: str) -> bool:
        return key in self._tests or key in self._on_rows

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        test = self._tests.get(key) or self._on_rows[key]
        ss = np.random.SeedSequence(self.seed, spawn_key=(test.index, int(start)))
        progress.report(METHOD, f"more permutations for {key}: {start:,} -> {start + batch:,}")
        cfg = self.config
        if key in self._on_rows:
            assert self.sample is not None
            on_sample = _on_sample(self.sample, test)
            rows = _run_test(self.sample, cfg, on_sample, batch, np.random.default_rng(ss))
            return int(rows.n_extreme)
        counts_a, counts_b = self.counts.cell_counts(test.attribute, test.a, test.b)
        res = permutation_test_from_counts(
            counts_a,
            counts_b,
            metric=test.metric_key,
            n_permutations=int(batch),
            alternative=cfg.alternative,
            studentize=cfg.studentize,
            scheme=cfg.scheme,
            confidence_level=cfg.confidence_level,
            n_bootstrap=int(cfg.n_bootstrap),
            min_group_size=int(cfg.min_group_size),
            seed=np.random.default_rng(ss),
            group_names=(f"{test.attribute}={test.group_a}", f"{test.attribute}={test.group_b}"),
        )
        return int(res.n_extreme)


def _on_sample(sample: AuditDataset, test: PlannedTest) -> PlannedTest:
    """``test`` with its group codes those of the sample's encoding (the sample may lack a
    group: then the codes are -1 and the test finds no rows for it)."""
    cats = sample.groups[test.attribute].categories
    code = {c: i for i, c in enumerate(cats)}
    return dataclasses.replace(test, a=code.get(test.group_a, -1), b=code.get(test.group_b, -1))


def _tests_result(
    plan: list[PlannedTest],
    config: PermutationConfig,
    seed: int,
    *,
    attrs: list[str],
    levels: dict[str, int],
    skip_reason: Callable[[PlannedTest], str | None],
    run_test: Callable[[PlannedTest, int, np.random.Generator], PermutationTestResult],
    joint: Callable[[list[Finding]], list[Finding]],
    prediction_mode: str,
    threshold: float | None,
    backend: str,
    device: str,
    start: float,
) -> MethodResult:
    """Run ``plan`` (test i on ``SeedSequence(seed, spawn_key=(i,))``) and build the result;
    ``run_test`` runs one test on rows or on cell counts."""
    n_tests = planned_permutation_tests(config, levels)
    findings: list[Finding] = []
    warnings: list[str] = []
    run: list[tuple[PlannedTest, PermutationTestResult]] = []
    skipped: list[SkippedTest] = []
    for test in plan:
        progress.report(METHOD, "tests", test.index, n_tests)
        key = test.key
        attr, human = test.attribute, _LABELS.get(test.metric_key, test.metric_name)
        ga, gb = test.group_a, test.group_b
        reason = skip_reason(test)
        if reason is not None:
            warnings.append(reason)
            skipped.append(_skipped(test, reason))
            continue
        ss = np.random.SeedSequence(seed, spawn_key=(test.index,))
        try:
            res = run_test(test, int(config.n_permutations), np.random.default_rng(ss))
        except DataContractError as exc:
            msg = f"{key}: not tested: {exc}"
            warnings.append(msg)
            skipped.append(_skipped(test, str(exc)))
            continue
        if not np.isfinite(res.pvalue):
            msg = (
                f"{key}: not tested: the observed statistic is undefined "
                "(zero bootstrap standard deviation)"
            )
            warnings.append(msg)
            skipped.append(_skipped(test, msg))
            continue
        ci = res.confidence_interval()
        findings.append(
            Finding(
                key=key,
                label=f"{human} difference, {attr}: {ga} − {gb}",
                estimate=res.difference,
                interval=Interval(ci.low, ci.high, ci.level, ci.method),
                pvalue=res.pvalue,
                null_hypothesis=_null_words(test.metric_name, ga, gb, config.alternative),
                reading=(
                    f"{human} of {attr}={ga} minus {attr}={gb} is "
                    f"{res.difference:+.4f} ({res.value_a:.4f} vs {res.value_b:.4f}; "
                    f"{config.confidence_level:.0%} CI {ci.low:+.4f} to "
                    f"{ci.high:+.4f}); {_STUDENTIZE_WORDS[config.studentize]} "
                    f"p={res.pvalue:.4g} ({res.n_extreme} of {res.n_permutations} "
                    "permuted statistics as extreme)."
                ),
                resampling=[ResamplingPart("permutation", res.n_extreme, res.n_permutations)],
                question=(
                    gap_question(test.metric_key, attr, ga, gb)
                    if config.alternative == "two-sided"
                    else None
                ),
                null_kind="zero",
            )
        )
        if res.n_undefined:
            warnings.append(
                f"{key}: {res.n_undefined} of {res.n_permutations} permuted "
                "statistics were undefined (a pseudo-group without the rows the "
                "metric conditions on) and were counted as extreme (conservative)"
            )
        run.append((test, res))
    findings = joint(findings)
    raw = [float(res.pvalue) for _, res in run]
    adjusted = adjust_pvalues(raw, config.family_multiplicity) if raw else np.array([])
    tests = tuple(
        _record(test, res, config.histogram_bins, float(p), config.alpha)
        for (test, res), p in zip(run, adjusted, strict=True)
    )
    details = PermutationDetails(
        prediction=prediction_mode,
        threshold=threshold,
        studentize=config.studentize,
        scheme=config.scheme,
        alternative=config.alternative,
        family=PermutationFamily(
            multiplicity=config.family_multiplicity,
            alpha=config.alpha,
            keys=tuple(t.key for t in tests),
            raw_pvalues=tuple(raw),
            adjusted_pvalues=tuple(float(p) for p in adjusted),
            n_rejected=sum(t.decision_family == "reject" for t in tests),
        ),
        tests=tests,
        skipped=tuple(skipped),
    )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters={
            "metrics": list(config.metrics),
            "attributes": attrs,
            "n_permutations": int(config.n_permutations),
            "alternative": config.alternative,
            "studentize": config.studentize,
            "scheme": config.scheme,
            "confidence_level": config.confidence_level,
            "alpha": config.alpha,
            "family_multiplicity": config.family_multiplicity,
            "n_bootstrap": int(config.n_bootstrap),
            "min_group_size": int(config.min_group_size),
            "custom_metrics": dict(config.custom_metrics),
            "backend": backend,
            "backend_requested": config.backend,
            "device": device,
            "device_requested": config.device,
            "seed": seed,
            "prediction": prediction_mode,
            "threshold": threshold,
        },
        findings=findings,
        details=details,
        warnings=warnings,
        seconds=time.perf_counter() - start,
    )
