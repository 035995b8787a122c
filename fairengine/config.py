"""The audit configuration: one YAML file names the data, model, roles, methods and parameters.

Every key has a documented default (see README "Configuration reference"); unknown keys are
errors with a did-you-mean hint, so a typo never silently falls back to a default. The resolved
configuration (defaults filled in) is printed in every report.

Example::

    data:
      path: scored.csv          # CSV or Parquet, relative to this file
    columns:
      label: y
      protected: [sex, race]
      score: score
    score_type: probability     # or raw (logits, passed through a sigmoid)
    threshold: 0.5              # null -> expected counts
    methods:
      group_parity: {tolerance: 0.05}
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fairengine.errors import ConfigError
from fairengine.fliptest.config import FlipTestConfig
from fairengine.fliptest.config import check_task as check_fliptest_task
from fairengine.group_metrics.config import GroupMetricsConfig
from fairengine.group_parity.config import GroupParityConfig
from fairengine.individual.config import IndividualConfig
from fairengine.intersectional.config import IntersectionalConfig
from fairengine.mitigation.config import MitigationConfig
from fairengine.multiclass.config import MulticlassConfig
from fairengine.multiplicity import AUDIT_PROCEDURES as MULTIPLICITY_METHODS
from fairengine.permutation.config import PermutationConfig
from fairengine.prediction_task import DEFAULT_SCORE_TYPE, TASKS
from fairengine.ranking.config import RankingConfig
from fairengine.registry import BUILT_IN, METHODS, method_spec
from fairengine.regression.config import RegressionConfig
from fairengine.roles import ColumnRoles
from fairengine.scores import BINARY_SCORE_TYPES, SCORE_TYPES
from fairengine.subgroup_scan.config import SubgroupScanConfig
from fairengine.urls import is_url

DATA_ENGINES = ("auto", "pandas", "stream", "dask", "spark")
"""Values of ``data.engine`` (:class:`DataConfig`)."""

PUBLIC_STORAGE_OPTIONS = frozenset(
    {"endpoint_url", "anon", "region_name", "use_ssl", "requester_pays", "version_aware"}
)
"""``data.storage_options`` keys whose values are written out as they are; every other value
(keys, secrets, tokens, anything unknown) is written as ``<redacted>``."""
REDACTED = "<redacted>"


def redact_storage_options(options: Any) -> Any:
    """``options`` with every value replaced by ``<redacted>`` but those of
    :data:`PUBLIC_STORAGE_OPTIONS` (nested mappings, e.g. ``client_kwargs``, likewise)."""
    if not isinstance(options, dict):
        return REDACTED
    return {
        k: (
            redact_storage_options(v)
            if isinstance(v, dict)
            else v
            if k in PUBLIC_STORAGE_OPTIONS and isinstance(v, str | bool | int | float)
            else REDACTED
        )
        for k, v in options.items()
    }


@dataclass
class DataConfig:
    """Where the audit data comes from: a file ``path`` or an ``embedded`` dataset name.

    ``delimiter`` (CSV; ``None`` = detected among ``,`` ``;`` tab ``|``), ``names`` (column
    names of a CSV without a header row), ``na_values`` (extra missing-value markers) and
    ``missing`` (``error``: missing values in a role column stop the audit; ``drop``: those rows
    are dropped and counted in the audit's warnings), ``skip_rows`` (lines at the top of a CSV
    file that are not data, such as the note that opens UCI's ``adult.test``, skipped before the
    header or first row) and ``skip_initial_space`` (drop the space
    after each CSV delimiter; ``None`` detects files written with ``", "``) are applied by
    :mod:`fairengine.loaders` and :mod:`fairengine.data_hygiene`.

    ``engine``: how the table is read. ``pandas`` loads it into memory; ``stream`` reads Parquet
    or CSV files (a file, a folder, a glob) in record batches of ``batch_rows``, checks each
    batch's data contract, scores it and folds it into the count tables of the count-based
    methods (memory bounded by the batch, not the row count), and draws a stratified sample of
    ``sample_rows`` rows for what needs rows (:mod:`fairengine.streaming`); ``auto`` (default)
    streams a folder or glob of Parquet files and a Parquet file of more than
    ``stream_above_rows`` rows (from its metadata), and loads everything else.

    ``dask`` and ``spark`` make the same pass on a cluster and give the same count tables and
    sample (:mod:`fairengine.streaming.dask_engine`, :mod:`fairengine.streaming.spark_engine`):
    ``dask`` on the scheduler at ``dask_address`` (none: a local cluster of ``dask_workers``
    worker processes, started for the audit and closed after); ``spark`` on the active
    ``SparkSession`` or a new one on ``spark_master`` (default ``local[*]``), reading
    ``path`` (Parquet or CSV) or the catalog table ``table`` (e.g. a lakehouse
    ``catalog.schema.table``).

    ``path`` may be an object-store URL (``s3://bucket/prefix/*.parquet``, ``gs://``,
    ``abfs://``), read through fsspec by the ``stream`` and ``dask`` engines;
    ``storage_options`` are the options of its fsspec filesystem (credentials, ``endpoint_url``;
    leave them out to use the environment's credentials). They are never written out: the
    audit's JSON, report and MLflow parameters show ``<redacted>`` for every value but a few
    harmless ones (:data:`PUBLIC_STORAGE_OPTIONS`).
    """

    path: str | None = None
    format: str | None = None
    embedded: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    delimiter: str | None = None
    names: list[str] | None = None
    na_values: list[str] = field(default_factory=list)
    missing: str = "error"
    skip_initial_space: bool | None = None
    skip_rows: int = 0
    engine: str = "auto"
    batch_rows: int = 1_000_000
    sample_rows: int = 100_000
    stream_above_rows: int = 5_000_000
    dask_address: str | None = None
    dask_workers: int = 2
    spark_master: str | None = None
    table: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.storage_options and not (self.path and is_url(self.path)):
            raise ConfigError(
                "data.storage_options apply to an object-store URL in data.path (s3://, gs://, "
                f"abfs://, ...); data.path is {self.path!r}"
            )
        if self.engine not in DATA_ENGINES:
            raise ConfigError(
                f"data.engine must be one of {list(DATA_ENGINES)}, got {self.engine!r}"
            )
        for key in ("batch_rows", "sample_rows", "stream_above_rows", "dask_workers"):
            value = getattr(self, key)
            if isinstance(value, bool) or not (isinstance(value, int) and value >= 1):
                raise ConfigError(f"data.{key} must be a whole number >= 1, got {value!r}")
        if self.dask_address is not None and self.engine != "dask":
            raise ConfigError(
                f"data.dask_address is set but data.engine is {self.engine!r}; set "
                "data.engine: dask"
            )
        if (self.spark_master is not None or self.table is not None) and self.engine != "spark":
            key = "table" if self.table is not None else "spark_master"
            raise ConfigError(
                f"data.{key} is set but data.engine is {self.engine!r}; set data.engine: spark"
            )
        if self.table is not None and self.path:
            raise ConfigError("data.table and data.path both name the data; give one")
        if isinstance(self.skip_rows, bool) or not (
            isinstance(self.skip_rows, int) and self.skip_rows >= 0
        ):
            raise ConfigError(
                "data.skip_rows must be a whole number >= 0 (lines at the top of a CSV file "
                f"that are not data), got {self.skip_rows!r}"
            )
        if self.missing not in ("error", "drop"):
            raise ConfigError(f"data.missing must be 'error' or 'drop', got {self.missing!r}")
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise ConfigError(
                f"data.delimiter must be a single character (e.g. ';' or a tab \"\\t\"), "
                f"got {self.delimiter!r}"
            )
        if self.names is not None:
            blank = [i + 1 for i, n in enumerate(self.names) if not str(n).strip()]
            dupes = sorted({n for n in self.names if self.names.count(n) > 1})
            if not self.names or blank or dupes:
                raise ConfigError(
                    "data.names must list one distinct, non-empty name per column of a CSV "
                    f"without a header row; got {len(self.names)} names"
                    + (f", blank at position(s) {blank}" if blank else "")
                    + (f", repeated: {dupes}" if dupes else "")
                )
        if self.embedded and (self.delimiter or self.names is not None):
            raise ConfigError("data.delimiter and data.names apply to CSV files, not to embedded")


@dataclass
class ColumnsConfig:
    """Column roles (see :class:`fairengine.roles.ColumnRoles`)."""

    label: str | None = None
    protected: list[str] = field(default_factory=list)
    score: str | None = None
    features: list[str] | None = None
    weight: str | None = None
    list_id: str | None = None
    class_scores: dict[str, str] | None = None
    """A multiclass audit's probability columns, ``{class: column}`` (P(ŷ = class) per row)."""


@dataclass
class ModelConfig:
    """The model to audit: an MLflow model URI, or ``None`` when the data carries scores."""

    uri: str | None = None


@dataclass
class ValidationConfig:
    """Data validation settings.

    ``min_group_size``: every group of a protected attribute needs this many rows.
    ``max_groups``: a protected attribute may have at most this many groups (a zip code with
    300 values would make 44,850 pairs to compare; see :mod:`fairengine.work_bounds`).
    """

    min_group_size: int = 30
    max_groups: int = 50


@dataclass
class MethodsConfig:
    """One section per audit method (``methods.<name>``); each has ``enabled``.

    The sections are the methods of :data:`fairengine.registry.METHODS`: the built-in ones are
    typed fields (checked against the registry when this module is imported), and a method
    registered from outside (:func:`fairengine.registry.register`) is configured the same
    way, ``methods.<its name>``, and kept in ``registered``. :meth:`section` gives any of them.
    """

    group_parity: GroupParityConfig = field(default_factory=GroupParityConfig)
    group_metrics: GroupMetricsConfig = field(default_factory=GroupMetricsConfig)
    permutation_tests: PermutationConfig = field(default_factory=PermutationConfig)
    intersectional: IntersectionalConfig = field(default_factory=IntersectionalConfig)
    fliptest: FlipTestConfig = field(default_factory=FlipTestConfig)
    individual_fairness: IndividualConfig = field(default_factory=IndividualConfig)
    mitigation: MitigationConfig = field(default_factory=MitigationConfig)
    regression_metrics: RegressionConfig = field(default_factory=RegressionConfig)
    multiclass_metrics: MulticlassConfig = field(default_factory=MulticlassConfig)
    ranking_metrics: RankingConfig = field(default_factory=RankingConfig)
    subgroup_scan: SubgroupScanConfig = field(default_factory=SubgroupScanConfig)
    registered: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    """Sections of the methods registered from outside this package (by name)."""

    def section(self, name: str) -> Any:
        """The config of method ``name`` (a registered method without a section in the audit
        config gets its defaults); KeyError for a name no method has."""
        if name in BUILT_IN:
            return getattr(self, name)
        if name not in self.registered:
            self.registered[name] = method_spec(name).config()
        return self.registered[name]


def _check_methods_config() -> None:
    """The typed sections of :class:`MethodsConfig` are exactly the registry's built-in
    methods, in order, each with its method's config class (a developer error otherwise)."""
    typed = [f for f in dataclasses.fields(MethodsConfig) if f.init]
    names = [f.name for f in typed]
    if names != list(BUILT_IN):
        raise RuntimeError(
            f"MethodsConfig sections {names} differ from the registry's methods {list(BUILT_IN)}"
        )
    for f in typed:
        factory = f.default_factory
        if factory is dataclasses.MISSING:
            raise RuntimeError(f"MethodsConfig.{f.name} has no default factory")
        made = factory()
        if type(made) is not method_spec(f.name).config:
            raise RuntimeError(
                f"MethodsConfig.{f.name} is {type(made).__name__}, the registry says "
                f"{method_spec(f.name).config.__name__}"
            )


_check_methods_config()


@dataclass
class OutputConfig:
    """Local copies of ``audit.json`` and ``report.html``: ``<dir>/<audit id>/``.

    ``None`` means ``$FAIRENGINE_HOME/reports`` (``FAIRENGINE_HOME`` defaults to
    ``./fairengine-runs``).
    """

    dir: str | None = None


@dataclass
class ReportConfig:
    """Extra forms of the HTML report. ``pdf``: also print it to ``report.pdf`` beside
    ``report.html`` (headless Chromium; logged to the MLflow run as ``audit/report.pdf``)."""

    pdf: bool = False


@dataclass
class MlflowConfig:
    """Where results are logged. ``tracking_uri=None`` uses ``$MLFLOW_TRACKING_URI`` if set,
    else a SQLite store at ``$FAIRENGINE_HOME/mlflow.db``."""

    enabled: bool = True
    tracking_uri: str | None = None
    experiment: str = "fairengine-audits"
    tag_model_version: bool = True
    approve_alias: str | None = None


@dataclass
class CacheConfig:
    """Caching of the method steps across runs (Prefect task caching, persisted results).

    A step is reused when the data content, the model version, its parameters and the code are
    unchanged (see ``tasks/caching.py``). ``dir=None`` means ``$FAIRENGINE_HOME/cache``.
    """

    enabled: bool = True
    dir: str | None = None
    expiration_days: float = 30.0


COMPARISON_METRICS = ("selection_rate", "tpr", "fpr")


@dataclass
class ComparisonConfig:
    """Challenger vs champion (``fairengine compare``, :mod:`fairengine.comparison`).

    ``delta``: the non-inferiority margin, in absolute rate units: the candidate passes when
    every tested gap |g_cand| is shown not to exceed |g_base| + ``delta`` (default 0.02).
    ``metrics``: the rates whose gaps are compared (``selection_rate``, ``tpr``, ``fpr``).
    ``baseline``: the model compared against when the command gives none (a model URI such as
    ``models:/credit@champion``). ``max_resamples``: the most paired bootstrap resamples drawn
    while a decision is within Monte-Carlo error of its threshold (default 31,999).
    """

    delta: float = 0.02
    metrics: list[str] = field(default_factory=lambda: list(COMPARISON_METRICS))
    baseline: str | None = None
    max_resamples: int = 31_999

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.delta) < 1.0:
            raise ConfigError(f"comparison.delta must lie in [0, 1), got {self.delta!r}")
        unknown = [m for m in self.metrics if m not in COMPARISON_METRICS]
        if unknown or not self.metrics:
            raise ConfigError(
                f"comparison.metrics must be a non-empty subset of {list(COMPARISON_METRICS)}, "
                f"got {self.metrics!r}"
            )
        if int(self.max_resamples) < 1999:
            raise ConfigError(
                f"comparison.max_resamples must be >= 1999, got {self.max_resamples!r}"
            )


@dataclass
class DecisionsConfig:
    """How the audit decides (:mod:`fairengine.verdict`, :mod:`fairengine.decisions`).

    ``gap_null``: when a gap is tested both against a tolerance (group parity: |gap| ≤ τ) and
    against zero (permutation tests, DeLong), which test decides: ``tolerance`` (default; the
    other is shown as supporting evidence) or ``zero``. ``resampling_risk``: bound on the
    probability that any Monte-Carlo decision differs from the decision on the exact p-values
    (default 0.001). ``max_resamples``: the most resamples a Monte-Carlo test may reach when the
    audit draws more to settle its decision (default 99,999); ``growth``: each further batch is
    this many times the previous one (default 2).
    """

    gap_null: str = "tolerance"
    resampling_risk: float = 1e-3
    max_resamples: int = 99_999
    growth: float = 2.0

    def __post_init__(self) -> None:
        if self.gap_null not in ("tolerance", "zero"):
            raise ConfigError(
                f"decisions.gap_null must be 'tolerance' or 'zero', got {self.gap_null!r}"
            )
        if not 0.0 < float(self.resampling_risk) < 1.0:
            raise ConfigError(
                f"decisions.resampling_risk must lie in (0, 1), got {self.resampling_risk!r}"
            )
        if int(self.max_resamples) < 1:
            raise ConfigError(f"decisions.max_resamples must be >= 1, got {self.max_resamples!r}")
        if not 1.0 < float(self.growth) <= 100.0:
            raise ConfigError(f"decisions.growth must lie in (1, 100], got {self.growth!r}")


RUNNER_KINDS = ("threads", "dask")


@dataclass
class RunnerConfig:
    """How the audit's method steps are executed (Prefect task runner).

    ``threads`` (default): Prefect's thread pool in the flow's process; right for one machine
    (numpy and torch release the GIL). ``dask``: prefect-dask's ``DaskTaskRunner`` on a local
    cluster of ``dask_workers`` processes, or on the scheduler at ``dask_address``
    (``tcp://host:8786``); needs a Prefect server (``PREFECT_API_URL``), since in embedded mode
    every Dask worker would start its own temporary API server.
    """

    kind: str = "threads"
    max_workers: int | None = None
    dask_address: str | None = None
    dask_workers: int = 2
    dask_threads_per_worker: int = 1


@dataclass
class AuditConfig:
    """The whole audit configuration."""

    data: DataConfig = field(default_factory=DataConfig)
    columns: ColumnsConfig = field(default_factory=ColumnsConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    task: str = "binary"
    score_type: str = "probability"
    threshold: float | None = 0.5
    positive_label: Any = 1
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    methods: MethodsConfig = field(default_factory=MethodsConfig)
    alpha: float = 0.05
    multiplicity: str = "maxt"
    decisions: DecisionsConfig = field(default_factory=DecisionsConfig)
    comparison: ComparisonConfig = field(default_factory=ComparisonConfig)
    seed: int = 0
    output: OutputConfig = field(default_factory=OutputConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    name: str | None = None

    def __post_init__(self) -> None:
        self._check_task()
        if self.methods.fliptest.enabled and self.task != "ranking":
            check_fliptest_task(self.methods.fliptest, self.task)
        if self.score_type not in SCORE_TYPES:
            raise ConfigError(
                f"score_type must be one of {list(BINARY_SCORE_TYPES)}, got {self.score_type!r}"
            )
        if self.threshold is not None and not 0.0 <= float(self.threshold) <= 1.0:
            raise ConfigError(f"threshold must lie in [0, 1] or be null, got {self.threshold!r}")
        if not 0.0 < float(self.alpha) < 1.0:
            raise ConfigError(f"alpha must lie in (0, 1), got {self.alpha!r}")
        if self.multiplicity not in MULTIPLICITY_METHODS:
            raise ConfigError(
                f"multiplicity must be one of {list(MULTIPLICITY_METHODS)}, "
                f"got {self.multiplicity!r}"
            )
        if self.validation.max_groups < 2:
            raise ConfigError(
                f"validation.max_groups must be >= 2, got {self.validation.max_groups}"
            )
        if self.validation.min_group_size < 1:
            raise ConfigError(
                f"validation.min_group_size must be >= 1, got {self.validation.min_group_size}"
            )
        pt = self.methods.permutation_tests
        if pt.joint is None:  # joint blocks matter when maxt decides rate-gap permutation tests
            pt.joint = self.multiplicity == "maxt" and (
                self.decisions.gap_null == "zero" or pt.alternative != "two-sided"
            )
        if self.cache.expiration_days <= 0:
            raise ConfigError(
                f"cache.expiration_days must be > 0, got {self.cache.expiration_days}"
            )
        r = self.runner
        if r.kind not in RUNNER_KINDS:
            raise ConfigError(f"runner.kind must be one of {list(RUNNER_KINDS)}, got {r.kind!r}")
        if r.max_workers is not None and r.max_workers < 1:
            raise ConfigError(f"runner.max_workers must be >= 1, got {r.max_workers}")
        if r.dask_workers < 1 or r.dask_threads_per_worker < 1:
            raise ConfigError("runner.dask_workers and runner.dask_threads_per_worker must be >= 1")
        if self.data.path and self.data.embedded:
            raise ConfigError("data: give either 'path' or 'embedded', not both")
        if self.model.uri and self.columns.score:
            raise ConfigError(
                "give either columns.score (scores already in the data) or model.uri (score "
                "with the model), not both"
            )

    def _check_task(self) -> None:
        """``task`` is one this version audits; a regression audit's predictions are values
        (``score_type: value``, no threshold: the defaults of a binary audit are replaced,
        anything else set for them is an error, see :meth:`from_dict`)."""
        if self.task not in TASKS:
            raise ConfigError(f"task must be one of {list(TASKS)}, got {self.task!r}")
        if self.task != "binary":
            own = DEFAULT_SCORE_TYPE[self.task]
            if (self.score_type, self.threshold) == ("probability", 0.5):  # binary defaults
                self.score_type, self.threshold = own, None
            if self.score_type != own or self.threshold is not None:
                raise ConfigError(
                    f"task: {self.task} audits its predictions as they are: score_type must be "
                    f"{own!r} and threshold null (got score_type {self.score_type!r}, "
                    f"threshold {self.threshold!r})"
                )
        elif self.score_type in SCORE_TYPES and self.score_type not in BINARY_SCORE_TYPES:
            tasks = [t for t, st in DEFAULT_SCORE_TYPE.items() if st == self.score_type]
            raise ConfigError(
                f"score_type {self.score_type!r} is the prediction of a {' or '.join(tasks)} "
                f"model: set task: {' or '.join(tasks)}, or one of {list(BINARY_SCORE_TYPES)} "
                "for a binary classifier"
            )

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_dict(cls, raw: dict[str, Any], base_dir: Path | None = None) -> AuditConfig:
        """Build from a plain dict (parsed YAML); relative ``data.path`` is resolved against
        ``base_dir``. Unknown keys and wrong types raise :class:`ConfigError` naming the key.
        With ``task: regression`` or ``multiclass``, ``score_type``, ``threshold`` and
        ``positive_label`` (binary settings) must not be set (the task's own score type,
        ``value`` or ``class``, and ``threshold: null`` are accepted)."""
        if not isinstance(raw, dict):
            raise ConfigError(f"the audit config must be a mapping, got {type(raw).__name__}")
        task = raw.get("task")
        if task in DEFAULT_SCORE_TYPE and task != "binary":
            own = DEFAULT_SCORE_TYPE[task]
            binary_only = {
                "score_type": raw.get("score_type", own) != own,
                "threshold": raw.get("threshold") is not None,
                "positive_label": "positive_label" in raw,
            }
            given = [k for k, bad in binary_only.items() if bad]
            if given:
                raise ConfigError(
                    f"{', '.join(given)}: binary-classifier setting(s) given with task: "
                    f"{task}; a {task} audit compares its predictions with the label as they "
                    "are (remove them)"
                )
            raw = {**raw, "score_type": own, "threshold": None}
        problems: list[str] = []
        cfg = _build(cls, raw, "", problems)
        if problems:
            raise ConfigError(_listing(problems), problems)
        if base_dir is not None:  # relative paths are relative to the config file
            for section, key in (("data", "path"), ("output", "dir"), ("cache", "dir")):
                part = getattr(cfg, section)
                value = getattr(part, key)
                if value and not is_url(value) and not Path(value).expanduser().is_absolute():
                    setattr(part, key, str((base_dir / value).resolve()))
        return cfg

    @classmethod
    def from_yaml(cls, path: str | Path) -> AuditConfig:
        """Read a YAML config file (relative ``data.path`` resolved against its folder)."""
        p = Path(path).expanduser()
        return cls.from_dict(read_config_file(p), base_dir=p.parent.resolve())

    def to_dict(self) -> dict[str, Any]:
        """Every setting as plain data; a registered method's section sits beside the built-in
        ones under ``methods``; ``data.storage_options`` redacted
        (:func:`redact_storage_options`): this is what the audit's JSON and MLflow record."""
        out = dataclasses.asdict(self)
        out["methods"].update(out["methods"].pop("registered"))
        out["data"]["storage_options"] = redact_storage_options(self.data.storage_options)
        return out

    def roles(self) -> ColumnRoles:
        """The column roles; raises when label or protected attributes are not set."""
        c = self.columns
        if not c.label and self.task != "ranking":
            raise ConfigError("columns.label is required (the binary outcome column)")
        if c.list_id and self.task != "ranking":
            raise ConfigError(
                f"columns.list_id ({c.list_id!r}) applies to task: ranking (the list or query "
                f"each item is ranked in); this is a {self.task} audit"
            )
        if c.class_scores and self.task != "multiclass":
            raise ConfigError(
                "columns.class_scores (one probability column per class) applies to task: "
                f"multiclass; this is a {self.task} audit"
            )
        if not c.protected:
            raise ConfigError("columns.protected must list at least one protected attribute")
        return ColumnRoles(
            label=c.label or None,
            protected=tuple(c.protected),
            score=c.score,
            features=tuple(c.features) if c.features is not None else None,
            weight=c.weight,
            list_id=c.list_id,
            class_scores=tuple(c.class_scores.items()) if c.class_scores else None,
        )


def read_config_file(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """The mapping in a YAML audit config file; :class:`ConfigError` naming the file when it is
    missing, not valid YAML, or not a mapping (an empty file is ``{}``)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"{what} {str(p)!r} does not exist")
    try:
        raw = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {str(p)!r} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{what} {str(p)!r} must hold a mapping of settings")
    return raw


def _listing(problems: list[str]) -> str:
    """One message for every problem found in a config."""
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems in the audit config:\n" + "\n".join(
        f"  - {p}" for p in problems
    )


def _build(cls: type, raw: dict[str, Any], prefix: str, problems: list[str]) -> Any:
    """``cls(**raw)`` with nested sections built recursively.

    Every problem (unknown key, wrong type, invalid value) is appended to ``problems`` instead of
    stopping at the first one; a section with a problem falls back to its defaults so that the
    rest of the config is still checked. The caller raises once, listing them all.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    registered: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{prefix}{key}"
        if cls is MethodsConfig and key not in fields and key in {m.name for m in METHODS}:
            if not isinstance(value, dict):
                problems.append(f"config key {where!r} must be a mapping, got {value!r}")
                continue
            registered[key] = _build(method_spec(key).config, value, f"{where}.", problems)
            continue
        if key not in fields:
            known = list(fields) + ([m.name for m in METHODS] if cls is MethodsConfig else [])
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else ""
            problems.append(
                f"unknown config key {where!r}{hint} (known keys here: {sorted(fields)})"
            )
            continue
        try:
            kwargs[key] = _coerce(hints[key], value, where, problems)
        except ConfigError as exc:
            problems.append(str(exc))
    try:
        built = cls(**kwargs)
        if registered:
            built.registered.update(registered)
        return built
    except (ConfigError, TypeError, ValueError) as exc:
        problems.append(
            str(exc)
            if isinstance(exc, ConfigError)
            else f"invalid config at {prefix or 'top level'}: {exc}"
        )
    try:
        return cls()
    except (ConfigError, TypeError, ValueError):  # no usable defaults: the problem is listed
        return None


def _coerce(tp: Any, value: Any, where: str, problems: list[str]) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _coerce(inner[0], value, where, problems)
        for option in inner:  # e.g. int | list[float]: the first type the value fits
            try:
                return _coerce(option, value, where, problems)
            except ConfigError:
                continue
        words = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
        kinds = " or ".join(
            words.get(a, "a list" if typing.get_origin(a) is list else str(a)) for a in inner
        )
        raise ConfigError(f"config key {where!r} must be {kinds}, got {value!r}")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a hint: a class, not an instance
        if not isinstance(value, dict):
            raise ConfigError(f"config key {where!r} must be a mapping, got {value!r}")
        return _build(tp, value, f"{where}.", problems)
    if origin is list:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ConfigError(f"config key {where!r} must be a list, got {value!r}")
        return [_coerce(args[0], v, f"{where}[{i}]", problems) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"config key {where!r} must be a mapping, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config key {where!r} must be true or false, got {value!r}")
        return value
    if tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"config key {where!r} must be a number, got {value!r}")
        if tp is int and float(value) != int(value):
            raise ConfigError(f"config key {where!r} must be an integer, got {value!r}")
        return tp(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config key {where!r} must be a string, got {value!r}")
        return value
    return value
