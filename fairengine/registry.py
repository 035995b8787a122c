"""Every audit method, listed once: the method contract (issue "One method contract").

A method is a :class:`MethodSpec`:

* ``name``: its ``methods.<name>`` config section, its result's ``method``, its report
  section and the prefix owner of its findings;
* ``title``: the heading the audit shows;
* ``config``: its configuration dataclass, built from ``methods.<name>`` with the audit's
  checks (unknown keys get a did-you-mean error); every config has ``enabled: bool``, which
  decides whether the audit runs the method (a disabled method is listed as ``not_run``);
* ``needs``: what it needs from the model: ``"none"`` (the dataset's scores are enough),
  ``"predict_proba"`` (a function of a feature frame returning P(y = 1), e.g. FlipTest), or
  ``"model"`` (the underlying estimator or torch module, e.g. the gradient-flow attack). A
  method that needs the model is ``not_run`` with the reason when the scores come from a data
  column;
* ``tasks``: the audit tasks it is defined for (:mod:`fairengine.prediction_task`; default
  ``("binary",)``); in an audit of another task it is ``not_run`` as not applicable, with the
  reason;
* ``details``: the frozen dataclass of its result's details (a :class:`MethodDetails`
  subclass; :class:`NoDetails` for a method whose findings say everything): what its report
  view draws, read back from ``audit.json`` as that type;
* ``run(dataset, config, context) -> MethodResult``: the computation, pure except for
  ``context.store`` (a folder the method may keep reusable artifacts in across runs, e.g.
  FlipTest's fitted maps; ``None`` when the audit's cache is off);
* ``summary(result, config) -> str``: one log line after a successful run;
* ``run_counts(counts, config, context) -> MethodResult`` (optional): the same method from the
  count tables of a streamed audit (``data.engine: stream``; :mod:`fairengine.streaming`),
  ``context.sample`` the stream's stratified sample as a dataset for what needs rows. A method
  without it needs the rows: a streamed audit runs its ``run`` on the self-weighting subsample
  of that sample (:mod:`fairengine.streaming.self_weighting`), with the model's handles;
* ``min_group_rows(config) -> int`` (optional): the fewest rows per protected group the method
  needs; a streamed audit whose self-weighting subsample has fewer rows of a group than this
  (while the data has at least this many) lists the method as ``not_run``, naming the group
  and both sizes, instead of running it on a group the sample made too small.

The audit flow runs every registered method through one generic Prefect task
(:mod:`tasks.method_task`), caches it with the same key ingredients (data, model, settings,
seed, code), and reads nothing method-specific. A new method is one module (its config class
and run function) plus one entry in :data:`METHODS` (or :func:`register` for a method that
lives outside this package); ``methods.<name>`` of the audit config then configures it.

The run functions import their method's modules when called, so that reading a config (the
CLI's fail-fast path) does not load torch, POT or scikit-learn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fairengine.dataset import AuditDataset
from fairengine.fliptest.config import FlipTestConfig
from fairengine.fliptest.result import FlipTestDetails, MapCacheUse
from fairengine.group_metrics.config import GroupMetricsConfig
from fairengine.group_metrics.result import GroupMetricsDetails
from fairengine.group_parity.config import GroupParityConfig
from fairengine.group_parity.result import GroupParityDetails
from fairengine.individual.config import IndividualConfig
from fairengine.individual.result import IndividualFairnessDetails
from fairengine.intersectional.config import IntersectionalConfig
from fairengine.intersectional.result import IntersectionalDetails
from fairengine.mitigation.config import MitigationConfig
from fairengine.mitigation.result import DeployedMitigation, MitigationDetails
from fairengine.multiclass.config import MulticlassConfig
from fairengine.multiclass.result import MulticlassDetails
from fairengine.permutation.config import PermutationConfig
from fairengine.permutation.result import PermutationDetails
from fairengine.prediction_task import TASKS
from fairengine.ranking.config import RankingConfig
from fairengine.ranking.result import RankingDetails
from fairengine.regression.config import RegressionConfig
from fairengine.regression.result import RegressionDetails
from fairengine.results import MethodDetails, MethodResult, NoDetails, register_details
from fairengine.subgroup_scan.config import SubgroupScanConfig
from fairengine.subgroup_scan.result import SubgroupScanDetails

if TYPE_CHECKING:  # pyarrow is imported only by a streamed audit
    from fairengine.streaming.tables import StreamedCounts

ModelNeed = Literal["none", "predict_proba", "model"]
MODEL_NEEDS: tuple[ModelNeed, ...] = ("none", "predict_proba", "model")


@dataclass(frozen=True)
class RunContext:
    """What the audit gives a method besides the dataset and its config."""

    seed: int = 0
    model: Any = None
    """The model in the form the method's ``needs`` names (None for ``needs="none"``)."""
    store: Path | None = None
    """A folder for artifacts the method may reuse across runs (None: keep nothing)."""


@dataclass(frozen=True)
class CountsContext:
    """What a streamed audit gives a method besides the count tables and its config."""

    seed: int = 0
    sample: AuditDataset | None = None
    """The stream's stratified sample as a dataset (None: no sample was drawn)."""


@dataclass(frozen=True)
class MethodSpec:
    """One audit method (module docstring)."""

    name: str
    title: str
    config: type
    run: Callable[[AuditDataset, Any, RunContext], MethodResult]
    needs: ModelNeed = "none"
    summary: Callable[[MethodResult, Any], str] | None = None
    details: type[MethodDetails] = NoDetails
    tasks: tuple[str, ...] = ("binary",)
    run_counts: Callable[[StreamedCounts, Any, CountsContext], MethodResult] | None = None
    min_group_rows: Callable[[Any], int] | None = None

    def applies_to(self, task: str) -> bool:
        """Whether the method is defined for an audit of ``task``."""
        return task in self.tasks

    def __post_init__(self) -> None:
        unknown = [t for t in self.tasks if t not in TASKS]
        if not self.tasks or unknown:
            raise ValueError(
                f"method {self.name!r}: tasks must be some of {list(TASKS)}, got {self.tasks!r}"
            )
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"method name {self.name!r} must be a Python identifier")
        if not is_dataclass(self.config) or "enabled" not in {f.name for f in fields(self.config)}:
            raise ValueError(
                f"method {self.name!r}: its config {self.config!r} must be a dataclass with an "
                "'enabled' field"
            )
        if self.needs not in MODEL_NEEDS:
            raise ValueError(
                f"method {self.name!r}: needs must be one of {list(MODEL_NEEDS)}, "
                f"got {self.needs!r}"
            )
        if not (isinstance(self.details, type) and issubclass(self.details, MethodDetails)):
            raise ValueError(
                f"method {self.name!r}: details must be a MethodDetails subclass, "
                f"got {self.details!r}"
            )
        register_details(self.name, self.details)


# --- the built-in methods' run functions and log lines ----------------------------------------


def _run_group_parity(
    dataset: AuditDataset, config: GroupParityConfig, context: RunContext
) -> MethodResult:
    from fairengine.group_parity.method import group_parity

    return group_parity(
        dataset,
        tolerance=config.tolerance,
        confidence_level=config.confidence_level,
        exact=config.exact,
        exact_max_rows=config.exact_max_rows,
    )


def _counts_group_parity(
    counts: StreamedCounts, config: GroupParityConfig, context: CountsContext
) -> MethodResult:
    from fairengine.group_parity.method import group_parity_from_counts

    return group_parity_from_counts(
        counts,
        tolerance=config.tolerance,
        confidence_level=config.confidence_level,
        exact=config.exact,
        exact_max_rows=config.exact_max_rows,
    )


def _group_parity_summary(result: MethodResult, config: GroupParityConfig) -> str:
    assert isinstance(result.details, GroupParityDetails)
    return (
        f"Group parity: {len(result.findings)} gaps over "
        f"{len(result.details.attributes)} attribute(s) in {result.seconds or 0.0:.2f} s"
    )


def _run_group_metrics(
    dataset: AuditDataset, config: GroupMetricsConfig, context: RunContext
) -> MethodResult:
    from fairengine.group_metrics.method import run_group_metrics

    return run_group_metrics(dataset, config, seed=context.seed)


def _counts_group_metrics(
    counts: StreamedCounts, config: GroupMetricsConfig, context: CountsContext
) -> MethodResult:
    from fairengine.group_metrics.method import run_group_metrics_from_counts

    return run_group_metrics_from_counts(counts, config, seed=context.seed)


def _group_metrics_summary(result: MethodResult, config: GroupMetricsConfig) -> str:
    assert isinstance(result.details, GroupMetricsDetails)
    kinds = [e.kind for e in result.details.encodings.values()]
    return (
        f"Group metrics (LiFT suite{', lift_compat' if config.lift_compat else ''}): "
        f"{len(result.findings)} findings over {kinds.count('attribute')} "
        f"attribute(s){' + intersection' if 'intersection' in kinds else ''} in "
        f"{result.seconds or 0.0:.2f} s"
    )


def _run_permutation_tests(
    dataset: AuditDataset, config: PermutationConfig, context: RunContext
) -> MethodResult:
    from fairengine.permutation import run_permutation_tests

    return run_permutation_tests(dataset, config, seed=context.seed)


def _counts_permutation_tests(
    counts: StreamedCounts, config: PermutationConfig, context: CountsContext
) -> MethodResult:
    from fairengine.permutation.method import run_permutation_tests_from_counts

    return run_permutation_tests_from_counts(
        counts, config, seed=context.seed, sample=context.sample
    )


def _permutation_summary(result: MethodResult, config: PermutationConfig) -> str:
    details = result.details
    assert isinstance(details, PermutationDetails)
    return (
        f"Permutation tests: {len(result.findings)} tests "
        f"({len(details.skipped)} skipped), {details.family.n_rejected} "
        f"rejected at alpha={config.alpha:g} within the method ({config.family_multiplicity}), "
        f"{config.n_permutations} permutations each, in {result.seconds or 0.0:.2f} s"
    )


def _run_intersectional(
    dataset: AuditDataset, config: IntersectionalConfig, context: RunContext
) -> MethodResult:
    from fairengine.intersectional import run_intersectional

    return run_intersectional(dataset, config, seed=context.seed)


def _counts_intersectional(
    counts: StreamedCounts, config: IntersectionalConfig, context: CountsContext
) -> MethodResult:
    from fairengine.intersectional.method import run_intersectional_from_counts

    return run_intersectional_from_counts(counts, config, seed=context.seed)


def _intersectional_summary(result: MethodResult, config: IntersectionalConfig) -> str:
    details = result.details
    assert isinstance(details, IntersectionalDetails)
    return (
        f"Intersectional: {len(result.findings)} findings over {details.n_intersections} "
        f"intersections of {' x '.join(details.attributes)} ({len(result.warnings)} "
        f"warning(s)) in {result.seconds or 0.0:.2f} s"
    )


def _run_fliptest(
    dataset: AuditDataset, config: FlipTestConfig, context: RunContext
) -> MethodResult:
    """FlipTest with its fitted maps kept in ``context.store`` (reused by a later run whose
    step is not cached as a whole), else in a fresh temporary folder (saved for the run's
    artifacts, never reused); the result's ``artifacts`` list them."""
    import dataclasses
    import tempfile

    from fairengine.fliptest import run_fliptest
    from fairengine.fliptest.method import map_artifacts
    from fairengine.transport import MapCache

    cache = None
    if context.model is not None and config.enabled:
        folder = context.store or Path(tempfile.mkdtemp(prefix="fairengine-fliptest-maps-"))
        cache = MapCache(folder)
    result = run_fliptest(
        dataset, config, seed=context.seed, predict_proba=context.model, map_cache=cache
    )
    if result.status == "ok":
        assert isinstance(result.details, FlipTestDetails)
        result = dataclasses.replace(
            result,
            artifacts=map_artifacts(result),
            details=dataclasses.replace(
                result.details,
                map_cache=MapCacheUse(
                    folder=None if cache is None else str(cache.directory),
                    reused_across_runs=context.store is not None,
                    loaded=0 if cache is None else cache.hits,
                    fitted=0 if cache is None else cache.misses,
                ),
            ),
        )
    return result


def _fliptest_summary(result: MethodResult, config: FlipTestConfig) -> str:
    details = result.details
    assert isinstance(details, FlipTestDetails)
    cache = details.map_cache or MapCacheUse(None, False, 0, 0)
    return (
        f"FlipTest ({config.estimator} map, {config.mode}, {details.task}): "
        f"{len(result.findings)} flipset "
        f"findings over {len(details.pairs)} group pair(s) in "
        f"{result.seconds or 0.0:.2f} s; {cache.loaded} map(s) loaded from "
        f"{cache.folder}, {cache.fitted} fitted and saved"
        + ("" if cache.reused_across_runs else " (not reused: step caching is off)")
    )


def _run_individual_fairness(
    dataset: AuditDataset, config: IndividualConfig, context: RunContext
) -> MethodResult:
    from fairengine.individual import run_individual_fairness

    return run_individual_fairness(dataset, config, seed=context.seed, model=context.model)


def _individual_summary(result: MethodResult, config: IndividualConfig) -> str:
    details = result.details
    assert isinstance(details, IndividualFairnessDetails)
    lr = details.loss_ratio
    return (
        f"Individual fairness: mean loss ratio {lr.statistic:.3f}, lower bound "
        f"{lr.lower_bound:.3f} vs delta {details.delta:.2f} on "
        f"{details.n_audited} rows in {result.seconds or 0.0:.2f} s"
    )


def _run_mitigation(
    dataset: AuditDataset, config: MitigationConfig, context: RunContext
) -> MethodResult:
    from fairengine.mitigation import run_mitigation

    return run_mitigation(dataset, config, seed=context.seed)


def _mitigation_summary(result: MethodResult, config: MitigationConfig) -> str:
    details = result.details
    assert isinstance(details, DeployedMitigation)
    registration = details.registration
    return (
        f"Mitigation ({config.deploy}, target ε={config.epsilon:g}): held-out "
        + ", ".join(
            f"ε_{m} {e.estimate:.3f} (upper {e.upper_bound:.3f})"
            for m, e in details.after.epsilon.items()
        )
        + f" in {result.seconds or 0.0:.1f} s; target met: {registration.target_met} "
        f"({registration.reason})"
    )


def _run_regression_metrics(
    dataset: AuditDataset, config: RegressionConfig, context: RunContext
) -> MethodResult:
    from fairengine.regression.method import run_regression_metrics

    return run_regression_metrics(dataset, config, seed=context.seed)


def _regression_summary(result: MethodResult, config: RegressionConfig) -> str:
    details = result.details
    assert isinstance(details, RegressionDetails)
    pairs = sum(len(a.pairs) for a in details.attributes)
    return (
        f"Regression metrics: {len(details.attributes)} attribute(s), {pairs} group pair(s) x "
        f"{config.n_permutations} permutations in {result.seconds or 0.0:.1f} s"
    )


def _run_multiclass_metrics(
    dataset: AuditDataset, config: MulticlassConfig, context: RunContext
) -> MethodResult:
    from fairengine.multiclass.method import run_multiclass_metrics

    return run_multiclass_metrics(dataset, config, seed=context.seed)


def _multiclass_summary(result: MethodResult, config: MulticlassConfig) -> str:
    details = result.details
    assert isinstance(details, MulticlassDetails)
    pairs = sum(len(a.pairs) for a in details.attributes)
    return (
        f"Multiclass metrics: {len(details.classes)} classes, {len(details.attributes)} "
        f"attribute(s), {pairs} group pair(s) x {config.n_permutations} permutations in "
        f"{result.seconds or 0.0:.1f} s"
    )


def _run_ranking_metrics(
    dataset: AuditDataset, config: RankingConfig, context: RunContext
) -> MethodResult:
    from fairengine.ranking.method import run_ranking_metrics

    return run_ranking_metrics(dataset, config, seed=context.seed)


def _ranking_summary(result: MethodResult, config: RankingConfig) -> str:
    details = result.details
    assert isinstance(details, RankingDetails)
    pairs = sum(a.pairs_planned for a in details.attributes)
    return (
        f"Ranking metrics: {details.n_items:,} items in {details.n_lists:,} list(s), "
        f"{len(details.attributes)} attribute(s), {pairs} group pair(s) x "
        f"{config.n_permutations} within-list permutations in {result.seconds or 0.0:.1f} s"
    )


def _run_subgroup_scan(
    dataset: AuditDataset, config: SubgroupScanConfig, context: RunContext
) -> MethodResult:
    from fairengine.subgroup_scan.method import run_subgroup_scan

    return run_subgroup_scan(dataset, config, seed=context.seed)


def _subgroup_scan_summary(result: MethodResult, config: SubgroupScanConfig) -> str:
    details = result.details
    assert isinstance(details, SubgroupScanDetails)
    best = details.top[0].rule if details.top else "none"
    return (
        f"Subgroup scan ({details.statistic_name}, depth {details.depth}): "
        f"{details.n_subgroups} subgroups, worst {best!r}, calibrated p = {details.pvalue:.3g} "
        f"({details.null.draws} null scans) in {result.seconds or 0.0:.1f} s"
    )


METHODS: list[MethodSpec] = [
    MethodSpec(
        "group_parity",
        "Demographic parity and equalized odds",
        GroupParityConfig,
        _run_group_parity,
        summary=_group_parity_summary,
        details=GroupParityDetails,
        run_counts=_counts_group_parity,
    ),
    MethodSpec(
        "group_metrics",
        "Group metrics (LiFT suite)",
        GroupMetricsConfig,
        _run_group_metrics,
        summary=_group_metrics_summary,
        details=GroupMetricsDetails,
        run_counts=_counts_group_metrics,
    ),
    MethodSpec(
        "permutation_tests",
        "Permutation tests",
        PermutationConfig,
        _run_permutation_tests,
        summary=_permutation_summary,
        details=PermutationDetails,
        run_counts=_counts_permutation_tests,
    ),
    MethodSpec(
        "intersectional",
        "Intersectional differential fairness",
        IntersectionalConfig,
        _run_intersectional,
        summary=_intersectional_summary,
        details=IntersectionalDetails,
        run_counts=_counts_intersectional,
    ),
    MethodSpec(
        "fliptest",
        "FlipTest (optimal-transport flipsets)",
        FlipTestConfig,
        _run_fliptest,
        needs="predict_proba",
        summary=_fliptest_summary,
        details=FlipTestDetails,
        tasks=("binary", "regression", "multiclass"),
        min_group_rows=lambda config: int(config.min_group_size),
    ),
    MethodSpec(
        "individual_fairness",
        "Individual fairness (Maity et al. gradient-flow test)",
        IndividualConfig,
        _run_individual_fairness,
        needs="model",
        summary=_individual_summary,
        details=IndividualFairnessDetails,
        tasks=("binary", "regression", "multiclass"),
    ),
    MethodSpec(
        "mitigation",
        "Mitigation (RTDP post-processing to an ε target)",
        MitigationConfig,
        _run_mitigation,
        summary=_mitigation_summary,
        details=MitigationDetails,
        min_group_rows=lambda config: int(config.min_support),
    ),
    MethodSpec(
        "regression_metrics",
        "Regression fairness (errors, bias and predictions by group)",
        RegressionConfig,
        _run_regression_metrics,
        summary=_regression_summary,
        details=RegressionDetails,
        tasks=("regression",),
    ),
    MethodSpec(
        "multiclass_metrics",
        "Multiclass fairness (per-class rates and predicted-class distributions by group)",
        MulticlassConfig,
        _run_multiclass_metrics,
        summary=_multiclass_summary,
        details=MulticlassDetails,
        tasks=("multiclass",),
    ),
    MethodSpec(
        "ranking_metrics",
        "Ranking fairness (exposure and top-k representation by group)",
        RankingConfig,
        _run_ranking_metrics,
        summary=_ranking_summary,
        details=RankingDetails,
        tasks=("ranking",),
    ),
    MethodSpec(
        "subgroup_scan",
        "Subgroup scan (the worst subgroup, with a search-adjusted p-value)",
        SubgroupScanConfig,
        _run_subgroup_scan,
        summary=_subgroup_scan_summary,
        details=SubgroupScanDetails,
    ),
]
"""Every method of an audit, in report order."""

BUILT_IN = tuple(m.name for m in METHODS)
"""The methods of this package (typed sections of :class:`fairengine.config.MethodsConfig`)."""


def built_in_for(task: str) -> tuple[str, ...]:
    """The built-in methods defined for audits of ``task`` (``binary``, ``regression``)."""
    return tuple(m.name for m in METHODS if m.name in BUILT_IN and m.applies_to(task))


def method_spec(name: str) -> MethodSpec:
    """The registered method called ``name`` (KeyError listing the known names)."""
    for spec in METHODS:
        if spec.name == name:
            return spec
    raise KeyError(f"no audit method {name!r}; registered: {[m.name for m in METHODS]}")


def register(spec: MethodSpec) -> MethodSpec:
    """Add a method defined outside this package (after the built-in ones, in call order);
    ``methods.<spec.name>`` then configures it. A name already registered is an error."""
    if any(m.name == spec.name for m in METHODS):
        raise ValueError(f"an audit method called {spec.name!r} is already registered")
    METHODS.append(spec)
    return spec


def unregister(name: str) -> None:
    """Remove a method added by :func:`register` (built-in methods stay)."""
    if name in BUILT_IN:
        raise ValueError(f"{name!r} is a built-in method")
    METHODS[:] = [m for m in METHODS if m.name != name]
