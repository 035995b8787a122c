"""FairEngine as an MLflow model evaluator: the audit inside ``mlflow.models.evaluate``.

Registered under the name ``fairengine`` through the ``mlflow.model_evaluator`` entry point
(``pyproject.toml``), so that::

    result = mlflow.models.evaluate(
        "models:/credit-scorer/3", eval_df, targets="y", model_type="classifier",
        evaluators=["default", "fairengine"],
        evaluator_config={"fairengine": {"protected": ["sex", "race"]}},
    )
    mlflow.validate_evaluation_results(
        {"fairness.verdict_fail": MetricThreshold(threshold=0, greater_is_better=False)}, result
    )

runs the audit of the CLI (:func:`flows.audit.run_audit`: the same validation, methods and
defaults) on the evaluation's rows and logs it into the evaluation's run, not into a run of its
own: the metrics of :func:`tasks.mlflow_log.audit_metrics` named ``fairness.<flat name>``
(``fairness.dp_gap.sex.female_male``, ``fairness.verdict_fail``, ``fairness.tests_rejected``,
...), ``audit/audit.json``, ``audit/report.html``, the findings table and the methods'
artifacts, and the tags ``fairness.verdict``, ``fairness.audit_id`` and ``fairness.kind``
(``evaluation``).

Where the audit's inputs come from:

* rows: the evaluation data (its feature columns, which must include the protected attributes,
  and the ``targets`` column as the label), handed to the flow as a Parquet file in a
  temporary folder, so that it is read and checked exactly as a ``data.path`` of the CLI;
* scores: the evaluated model, loaded by the flow from its URI (``models:/<model id>`` of the
  model ``evaluate`` loaded, or ``model_uri`` of the evaluator config, e.g. a
  ``models:/name/version`` whose registry version is then tagged with the verdict), so the
  methods that need the model (FlipTest, individual fairness) get it; without a model, the
  ``predictions`` column of the data (``columns.score``).

The evaluator config (``evaluator_config={"fairengine": {...}}``) takes ``protected`` (required:
column names, or a DataFrame of the attributes when ``feature_names`` leaves them out of the
evaluation's features),
``features``, ``weight``, ``model_uri``, ``metric_prefix`` (default ``fairness.``),
``tag_model_version`` (default true) and every key of the audit YAML except ``data``, ``model``,
``columns`` and ``mlflow``, which ``evaluate`` supplies. An unknown key is an error with a
did-you-mean hint, at the top level as in every section.

This module is imported by MLflow whenever ``mlflow.models.evaluation`` is imported: it imports
only MLflow's base class at load time and the flow when an evaluation runs.
"""

from __future__ import annotations

import dataclasses
import difflib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.models.evaluation.base import EvaluationResult, ModelEvaluator

from fairengine.config import AuditConfig
from fairengine.errors import ConfigError

EVALUATOR_NAME = "fairengine"
"""The name to list in ``evaluators=[...]`` and to key ``evaluator_config`` with."""

DEFAULT_METRIC_PREFIX = "fairness."

REPORT_ARTIFACT_NAME = "fairness_report"
"""The report's key in ``EvaluationResult.artifacts`` (a text artifact: the HTML page)."""
AUDIT_ARTIFACT_NAME = "fairness_audit"
"""``audit.json``'s key in ``EvaluationResult.artifacts`` (a JSON artifact)."""

SUPPLIED_BY_EVALUATE = {
    "data": "the rows are mlflow.evaluate's `data`",
    "model": "the model is mlflow.evaluate's `model` (or set `model_uri`)",
    "columns": (
        "set `protected` (and `features`, `weight`); the label is mlflow.evaluate's `targets` "
        "and the scores come from the model or mlflow.evaluate's `predictions` column"
    ),
    "mlflow": "the audit is logged into the evaluation's own run",
}
"""Audit config sections the evaluator fills from the ``evaluate`` call, with the reason."""


@dataclass(frozen=True)
class EvaluatorOptions:
    """The evaluator's own keys of ``evaluator_config["fairengine"]``.

    ``protected``: the protected attributes: column names of the evaluation data, or a
    DataFrame of them (one row per evaluation row, in order) when they are not among the
    evaluation's feature columns (``mlflow.evaluate(feature_names=[...])`` leaves them out so
    that MLflow's default evaluator can call a model that does not take them). ``features``:
    the model's input columns (default: its signature's, as in the CLI). ``weight``: a row
    weight column. ``model_uri``: the model the audit loads, when not the evaluated one's
    ``models:/<model id>`` (give the registry URI to have its version tagged).
    ``metric_prefix``: put before every metric name. ``tag_model_version``: tag an audited
    registry version with the verdict and this run (``fairness.verdict``, ...).
    """

    protected: tuple[str, ...]
    protected_values: pd.DataFrame | None = None
    features: tuple[str, ...] | None = None
    weight: str | None = None
    model_uri: str | None = None
    metric_prefix: str = DEFAULT_METRIC_PREFIX
    tag_model_version: bool = True


OPTION_KEYS = tuple(
    f.name for f in dataclasses.fields(EvaluatorOptions) if f.name != "protected_values"
)
AUDIT_KEYS = tuple(
    f.name for f in dataclasses.fields(AuditConfig) if f.name not in SUPPLIED_BY_EVALUATE
)


def _where(key: str) -> str:
    return f"evaluator_config[{EVALUATOR_NAME!r}][{key!r}]"


def split_config(evaluator_config: dict[str, Any] | None) -> tuple[EvaluatorOptions, dict]:
    """The evaluator's options and the audit settings of ``evaluator_config["fairengine"]``.

    Raises :class:`ConfigError` for an unknown key (with a did-you-mean hint), a section that
    ``evaluate`` supplies, or a missing or malformed ``protected``.
    """
    raw = dict(evaluator_config or {})
    problems: list[str] = []
    options: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    for key, value in raw.items():
        if key in OPTION_KEYS:
            options[key] = value
        elif key in AUDIT_KEYS:
            settings[key] = value
        elif key in SUPPLIED_BY_EVALUATE:
            problems.append(f"{_where(key)} is not set here: {SUPPLIED_BY_EVALUATE[key]}")
        else:
            close = difflib.get_close_matches(str(key), [*OPTION_KEYS, *AUDIT_KEYS], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(
                f"unknown key {_where(str(key))}{hint} (known keys: "
                f"{sorted([*OPTION_KEYS, *AUDIT_KEYS])})"
            )
    protected = options.get("protected")
    values = None
    if isinstance(protected, pd.Series):
        protected = protected.to_frame()
    if isinstance(protected, pd.DataFrame):
        values = protected.reset_index(drop=True)
        protected = list(values.columns)
    if isinstance(protected, str):
        protected = [protected]
    if not protected or not all(isinstance(p, str) for p in protected):
        problems.append(
            f"{_where('protected')} must name the protected attribute column(s) of the "
            f"evaluation data, e.g. ['sex', 'race'] (got {protected!r})"
        )
        protected = []
    features = options.get("features")
    if isinstance(features, str):
        features = [features]
    if problems:
        raise ConfigError(_listing(problems), problems)
    return (
        EvaluatorOptions(
            protected=tuple(protected),
            protected_values=values,
            features=tuple(features) if features is not None else None,
            weight=options.get("weight"),
            model_uri=options.get("model_uri"),
            metric_prefix=str(options.get("metric_prefix", DEFAULT_METRIC_PREFIX)),
            tag_model_version=bool(options.get("tag_model_version", True)),
        ),
        settings,
    )


def _listing(problems: list[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems in the fairengine evaluator config:\n" + "\n".join(
        f"  - {p}" for p in problems
    )


def evaluation_frame(dataset: Any, protected_values: pd.DataFrame | None = None) -> pd.DataFrame:
    """The evaluation's rows as one table: the feature columns, the ``targets`` column,
    without a model the ``predictions`` column (``mlflow.data.evaluation_dataset``) and the
    columns of ``protected_values`` (given as a DataFrame in the evaluator config)."""
    features = dataset.features_data
    if not isinstance(features, pd.DataFrame):
        raise ConfigError(
            "the fairengine evaluator needs the evaluation data as a pandas DataFrame (or an "
            "MLflow pandas dataset) holding the protected attribute columns; got "
            f"{type(features).__name__}"
        )
    frame = features.copy()
    if dataset.targets_name is None or dataset.labels_data is None:
        raise ConfigError("the fairengine evaluator needs mlflow.evaluate's `targets` (labels)")
    frame[dataset.targets_name] = dataset.labels_data
    if dataset.predictions_name is not None and dataset.predictions_data is not None:
        frame[dataset.predictions_name] = dataset.predictions_data
    if protected_values is not None:
        if len(protected_values) != len(frame):
            raise ConfigError(
                f"{_where('protected')}: the DataFrame of protected attributes has "
                f"{len(protected_values)} rows, the evaluation data {len(frame)}"
            )
        clash = [c for c in protected_values.columns if c in frame.columns]
        if clash:
            raise ConfigError(
                f"{_where('protected')}: column(s) {clash} are in the evaluation data too; "
                "name them (a list) or leave them out of the data"
            )
        frame = pd.concat(
            [frame.reset_index(drop=True), protected_values.reset_index(drop=True)], axis=1
        )
    bad = [c for c in frame.columns if not isinstance(c, str)]
    if bad:
        raise ConfigError(f"the evaluation data's column names must be text; got {bad[:5]}")
    return frame


def model_uri_of(model: Any, model_id: str | None, options: EvaluatorOptions) -> str | None:
    """The URI the audit loads the evaluated model from (``None``: no model, scores in the
    data): ``model_uri`` of the config, else ``models:/<model id>`` of the evaluated model."""
    if options.model_uri:
        return options.model_uri
    if model is None:
        return None
    found = getattr(model, "model_id", None) or model_id
    if not found:
        raise ConfigError(
            "the fairengine evaluator audits a logged MLflow model: the evaluated model has no "
            f"model id (a plain function or a model loaded from a path); set {_where('model_uri')}"
            " to its models:/ or runs:/ URI, or evaluate without a model with "
            "predictions=<score column> in the data"
        )
    return f"models:/{found}"


def audit_config(
    options: EvaluatorOptions,
    settings: dict[str, Any],
    *,
    data_path: str,
    label: str,
    model_uri: str | None,
    score_column: str | None,
    tracking_uri: str,
    name: str | None,
) -> dict[str, Any]:
    """The audit config (a YAML's dict) of an evaluation; MLflow logging is off in the flow (the
    evaluator logs into the evaluation's run) but its store is the evaluation's."""
    columns: dict[str, Any] = {"label": label, "protected": list(options.protected)}
    if options.features is not None:
        columns["features"] = list(options.features)
    if options.weight is not None:
        columns["weight"] = options.weight
    if model_uri is None:
        if score_column is None:
            raise ConfigError(
                "the fairengine evaluator needs scores: evaluate a model, or give "
                "mlflow.evaluate(predictions=<score column>) with the scores in the data"
            )
        columns["score"] = score_column
    config: dict[str, Any] = {
        **settings,
        "data": {"path": data_path},
        "columns": columns,
        "mlflow": {"enabled": False, "tracking_uri": tracking_uri},
    }
    if model_uri is not None:
        config["model"] = {"uri": model_uri}
    if name and "name" not in settings:
        config["name"] = name
    return config


class FairEngineEvaluator(ModelEvaluator):
    """The FairEngine audit as an MLflow evaluator (module docstring)."""

    name = EVALUATOR_NAME

    @classmethod
    def can_evaluate(cls, *, model_type: Any, evaluator_config: Any, **kwargs: Any) -> bool:
        """Binary classifiers (``model_type="classifier"``); a bad config is reported by
        :meth:`evaluate` rather than silently skipping the audit."""
        del evaluator_config, kwargs
        return model_type == "classifier"

    def evaluate(
        self,
        *,
        model_type: Any,
        dataset: Any,
        run_id: str,
        evaluator_config: dict[str, Any] | None,
        model: Any = None,
        extra_metrics: Any = None,
        custom_artifacts: Any = None,
        predictions: Any = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """Run the audit on the evaluation's rows and log it into ``run_id``."""
        import mlflow
        from mlflow.models.evaluation.artifacts import (
            JsonEvaluationArtifact,
            TextEvaluationArtifact,
        )

        from flows.audit import run_audit
        from tasks.mlflow_log import REPORT_ARTIFACT, TAGS, log_audit_record, tag_audited_version

        del model_type, extra_metrics, custom_artifacts, predictions
        options, settings = split_config(evaluator_config)
        frame = evaluation_frame(dataset, options.protected_values)
        missing = [c for c in options.protected if c not in frame.columns]
        if missing:
            raise ConfigError(
                f"{_where('protected')}: column(s) {missing} are not in the evaluation data "
                f"(columns: {list(frame.columns)}); with mlflow.evaluate(feature_names=...), "
                "give them as a DataFrame: 'protected': df[['sex', ...]]"
            )
        uri = model_uri_of(model, kwargs.get("model_id"), options)
        tracking_uri = mlflow.get_tracking_uri()
        with tempfile.TemporaryDirectory(prefix="fairengine-evaluation-") as tmp:
            data_path = Path(tmp) / "evaluation.parquet"
            try:
                frame.to_parquet(data_path, index=False)
            except Exception as exc:  # pyarrow: a column of mixed types, an unnamed index, ...
                raise ConfigError(
                    "the fairengine evaluator hands the evaluation rows to the audit as Parquet, "
                    f"which failed: {type(exc).__name__}: {exc}"
                ) from None
            config = audit_config(
                options,
                settings,
                data_path=str(data_path),
                label=dataset.targets_name,
                model_uri=uri,
                score_column=dataset.predictions_name if model is None else None,
                tracking_uri=tracking_uri,
                name=getattr(dataset, "name", None),
            )
            try:
                AuditConfig.from_dict(config)  # every problem named before the flow starts
            except ConfigError as exc:
                raise ConfigError(
                    f"evaluator_config[{EVALUATOR_NAME!r}]: {exc}", exc.problems
                ) from None
            audit = run_audit(config)
        result = audit.result
        client = mlflow.MlflowClient(tracking_uri=tracking_uri)
        tags = {TAGS.audit_id: result.audit_id, TAGS.verdict: result.verdict.status}
        tags[TAGS.kind] = "evaluation"
        if result.model.name:
            tags[TAGS.model_name] = str(result.model.name)
            tags[TAGS.model_version] = str(result.model.version)
        if result.model.uri:
            tags[TAGS.model_uri] = str(result.model.uri)
        for key, value in tags.items():
            client.set_tag(run_id, key, value)
        html = Path(audit.paths["report"]).read_text("utf-8")
        pdf = Path(audit.paths["pdf"]) if audit.paths.get("pdf") else None
        metrics = log_audit_record(
            client, run_id, result, html, pdf=pdf, metric_prefix=options.metric_prefix
        )
        artifact_uri = client.get_run(run_id).info.artifact_uri
        tag_audited_version(client, result, run_id, artifact_uri, options.tag_model_version)
        artifacts: dict[str, Any] = {
            REPORT_ARTIFACT_NAME: TextEvaluationArtifact(
                uri=f"{artifact_uri}/{REPORT_ARTIFACT}", content=html
            ),
            AUDIT_ARTIFACT_NAME: JsonEvaluationArtifact(
                uri=f"{artifact_uri}/audit/audit.json", content=result.to_dict()
            ),
        }
        return EvaluationResult(metrics=metrics, artifacts=artifacts, run_id=run_id)
