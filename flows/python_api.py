"""One call from Python: ``fairengine.audit(df, label="y", protected=["sex"], model=clf)``.

:func:`audit` turns its keywords into the audit config a YAML file would hold (the same keys,
checked by the same :class:`~fairengine.config.AuditConfig`, with the same did-you-mean errors),
checks the config and the data before anything starts (:func:`flows.preflight.preflight`, as the
CLI does), and runs the same flow (:func:`flows.audit.run_audit`) on Prefect's embedded API, or
on a running ``fairengine server``. The table and the model are handed to the flow as objects
(:class:`tasks.audit_inputs.AuditInputs`): a DataFrame is read where a YAML file names a path,
and a model object is scored through the pyfunc interface an MLflow model has
(:mod:`tasks.model_objects`), so the findings are the CLI's for the same data, model and
settings.

Defaults are the CLI's, except that nothing is logged to MLflow unless asked
(``mlflow={"enabled": True, ...}``, or :meth:`AuditResult.log_to_mlflow` afterwards); the
report and ``audit.json`` are written where the CLI writes them (``output.dir``, default
``$FAIRENGINE_HOME/reports/<audit id>``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import difflib
import html
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fairengine import results
from fairengine.comparison.record import ModelComparison
from fairengine.config import AuditConfig
from fairengine.errors import ConfigError

COLUMN_KEYWORDS = (
    "label",
    "protected",
    "score",
    "features",
    "weight",
    "list_id",
    "class_scores",
)
"""Keywords that set ``columns.<keyword>`` of the config."""
DATA_KEYWORDS = (
    "format",
    "names",
    "na_values",
    "missing",
    "delimiter",
    "skip_initial_space",
    "skip_rows",
    "engine",
    "batch_rows",
    "sample_rows",
    "stream_above_rows",
    "dask_address",
    "dask_workers",
    "spark_master",
    "table",
    "storage_options",
)
"""Keywords that set ``data.<keyword>`` (how a file is read; ``na_values`` and ``missing`` also
apply to a DataFrame)."""
SETTING_KEYWORDS = tuple(
    f.name
    for f in dataclasses.fields(AuditConfig)
    if f.name not in ("data", "columns", "model", "methods")
)
"""The other top-level keys of the audit config, given as keywords with the YAML's values."""
TOP_FINDINGS = 10


class AuditResult(results.AuditResult):
    """An audit's result (:class:`fairengine.results.AuditResult`) with the ways out a notebook
    needs: :meth:`to_frame`, :meth:`save`, :meth:`log_to_mlflow` and a rich display
    (``_repr_html_``: verdict, counts and the top findings). ``paths`` are the files the audit
    wrote (``json``, ``report``; ``pdf`` when asked for)."""

    paths: dict[str, str]

    @classmethod
    def of(cls, result: results.AuditResult, paths: Mapping[str, str] | None = None) -> AuditResult:
        """``result`` as this class (the same objects, not copies)."""
        out = cls(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)})
        out.paths = dict(paths or {})
        return out

    @property
    def report_path(self) -> str | None:
        return getattr(self, "paths", {}).get("report")

    def to_frame(self) -> pd.DataFrame:
        """The findings as a tidy table: one row per finding of every method, the columns of
        :data:`tasks.findings_table.FINDINGS_COLUMNS` (label, decision, estimate, ci_low,
        ci_high, adjusted_pvalue, pvalue, attribute, group_a, group_b, metric, method, ...)."""
        from tasks.findings_table import findings_frame

        return findings_frame(self)

    def html(self) -> str:
        """The report's HTML: the file the audit wrote when it is still there, else rendered."""
        written = self.report_path
        if written and Path(written).is_file():
            return Path(written).read_text(encoding="utf-8")
        from tasks.report import render_report

        return render_report(self)

    def save(self, directory: str | os.PathLike[str], *, pdf: bool = False) -> dict[str, str]:
        """Write ``audit.json`` and ``report.html`` (and ``report.pdf`` with ``pdf=True``,
        printed by Chromium) into ``directory``; returns their paths."""
        from tasks.outputs import write_local_outputs

        html_text = self.html()
        paths = write_local_outputs(self, html_text, Path(directory).expanduser())
        if pdf:
            from tasks.report_pdf import write_pdf

            target = Path(paths["report"]).with_name("report.pdf")
            write_pdf(html_text, target)
            paths["pdf"] = str(target)
        self.paths = dict(paths)
        return paths

    def log_to_mlflow(
        self,
        tracking_uri: str | None = None,
        experiment: str = "fairengine-audits",
        *,
        tag_model_version: bool = True,
        run_tags: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Log the audit to MLflow as the CLI does (params, flat metrics, ``audit.json``, the
        report, the findings table; the audited model version tagged with the verdict when the
        model was a registry URI). Returns ``{"run_id", "experiment_id", ...}``. An audit already
        logged to that experiment is not logged twice."""
        from tasks.mlflow_log import log_audit
        from tasks.mlflow_store import check_tracking_store
        from tasks.settings import apply_offline_defaults, default_tracking_uri

        apply_offline_defaults()
        uri = tracking_uri or default_tracking_uri()
        store = check_tracking_store(uri)
        if not store.reachable:
            from fairengine.errors import MlflowUnavailableError

            raise MlflowUnavailableError(f"{store.reason}; nothing logged")
        pdf = getattr(self, "paths", {}).get("pdf")
        return log_audit(
            self,
            self.html(),
            tracking_uri=uri,
            experiment=experiment,
            tag_model_version=tag_model_version,
            run_tags=dict(run_tags or {}),
            pdf=Path(pdf) if pdf and Path(pdf).is_file() else None,
        )

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {label}" for label, n in _counts(self) if n)
        return (
            f"<AuditResult {self.audit_id}: {self.verdict.status.upper()} "
            f"({counts or 'no tests'}); .to_frame() for the findings>"
        )

    def _repr_html_(self) -> str:
        return summary_html(self)


def _counts(result: results.AuditResult) -> list[tuple[str, int]]:
    """The verdict's counts as the report shows them: from the audit's decision record
    (:class:`fairengine.results.DecisionRecord`), else from the deciding findings."""
    record = result.decisions
    if record is not None:
        return [
            ("rejected", record.n_rejected),
            ("not rejected", record.n_not_rejected),
            ("undetermined", record.n_undetermined),
        ]
    deciding = [f.decision for f in result.findings() if f.counts]
    return [
        ("rejected", deciding.count("reject")),
        ("not rejected", deciding.count("fail_to_reject")),
        ("undetermined", deciding.count("undetermined")),
    ]


def summary_html(result: results.AuditResult) -> str:
    """What a Jupyter cell shows for an audit: the verdict and its summary, the counts, the
    model and data, and the top findings ranked as the report ranks them (rejected first, then
    by effect size; :func:`tasks.report.findings.rank_key`), in plain inline-styled HTML."""
    from tasks.report.findings import (
        DECISION_LABELS,
        finding_attribute,
        finding_tolerance,
        finding_view,
        rank_key,
    )
    from tasks.report.plots import DECISION_COLORS

    protected = [str(a) for a in result.dataset.roles.protected]
    rows = [
        finding_view(f, finding_tolerance(f, m.parameters), finding_attribute(f, protected))
        for m in result.methods
        if m.status == "ok"
        for f in m.findings
        if f.counts
    ]
    rows.sort(key=rank_key)
    colour = {"pass": "#009E73", "fail": "#D55E00"}.get(result.verdict.status, "#E69F00")
    e = html.escape
    model = result.model.uri or result.model.score_description
    identity = " · ".join(
        e(str(x))
        for x in (
            result.dataset.name or result.dataset.source,
            f"{result.dataset.n_rows:,} rows" if isinstance(result.dataset.n_rows, int) else None,
            model,
        )
        if x
    )
    counts = " · ".join(f"{n:,} {label}" for label, n in _counts(result))
    cells = []
    for f in rows[:TOP_FINDINGS]:
        badge = DECISION_COLORS.get(str(f["decision"]), "#999999")
        cells.append(
            "<tr>"
            f"<td style='text-align:left'>{e(str(f['short_label']))}</td>"
            f"<td>{e(str(f['estimate']))}</td><td>{e(str(f['interval']))}</td>"
            f"<td>{e(str(f['adjusted_pvalue']))}</td>"
            f"<td style='color:{badge};font-weight:600'>{e(str(f['mark']))} "
            f"{e(DECISION_LABELS.get(str(f['decision']), str(f['decision'])))}</td></tr>"
        )
    more = len(rows) - TOP_FINDINGS
    table = (
        "<table><thead><tr><th style='text-align:left'>Finding</th><th>Estimate</th>"
        "<th>Interval</th><th>Adjusted p</th><th>Decision</th></tr></thead><tbody>"
        + "".join(cells)
        + "</tbody></table>"
        if cells
        else "<p>No tested findings.</p>"
    )
    notes = [f"{more:,} more: <code>.to_frame()</code> lists every finding"] if more > 0 else []
    report = getattr(result, "paths", {}).get("report")
    if report:
        notes.append(f"report: <code>{e(report)}</code>")
    tail = f"<p>{'; '.join(notes)}</p>" if notes else ""
    warnings = "".join(f"<li>{e(w)}</li>" for w in result.warnings)
    return (
        "<div class='fairengine-audit'>"
        f"<p><strong style='color:{colour}'>{e(result.verdict.status.upper())}</strong> — "
        f"{e(result.verdict.summary)}</p>"
        f"<p>{counts} (alpha {result.alpha:g}, {e(result.multiplicity)}) · {identity}</p>"
        + (
            f"<details><summary>Input warnings</summary><ul>{warnings}</ul></details>"
            if warnings
            else ""
        )
        + table
        + tail
        + "</div>"
    )


# --------------------------------------------------------------------------- building the config
def _did_you_mean(given: str, known: Iterable[str], what: str) -> ConfigError:
    known = sorted(known)
    close = difflib.get_close_matches(given, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {known}"
    return ConfigError(f"unknown {what} {given!r}{hint}")


def methods_section(methods: Any) -> dict[str, Any]:
    """The ``methods`` config section of the ``methods`` keyword: a name or a list of names
    (those methods on, every other off), or ``{name: True | False | {settings}}`` (settings
    switch the method on unless they say ``enabled: False``)."""
    from fairengine.registry import METHODS

    names = [m.name for m in METHODS]
    if methods is None:
        return {}
    if isinstance(methods, str):
        methods = [methods]
    if isinstance(methods, Mapping):
        out: dict[str, Any] = {}
        for name, value in methods.items():
            if name not in names:
                raise _did_you_mean(str(name), names, "method")
            if isinstance(value, bool):
                out[name] = {"enabled": value}
            elif isinstance(value, Mapping):
                out[name] = {"enabled": True, **value}
            else:
                raise ConfigError(
                    f"methods[{name!r}]: expected True, False or a mapping of its settings, "
                    f"got {type(value).__name__}"
                )
        return out
    if isinstance(methods, Iterable):
        chosen = [str(m) for m in methods]
        for name in chosen:
            if name not in names:
                raise _did_you_mean(name, names, "method")
        return {name: {"enabled": name in chosen} for name in names}
    raise ConfigError(
        "methods: expected a method name, a list of names or a mapping, got "
        f"{type(methods).__name__}"
    )


def audit_config(
    data: Any,
    *,
    label: str | None = None,
    protected: str | Iterable[str] | None = None,
    model: Any = None,
    score: str | None = None,
    methods: Any = None,
    **settings: Any,
) -> tuple[dict[str, Any], Any, Any]:
    """The audit config (a YAML's dict), the DataFrame (pandas, Dask or Spark) and the model
    object of an :func:`audit` call; unknown keywords are a :class:`ConfigError` with a
    did-you-mean."""
    known = {*COLUMN_KEYWORDS, *DATA_KEYWORDS, *SETTING_KEYWORDS, "model", "methods"}
    for key in settings:
        if key not in known:
            raise _did_you_mean(key, known, "keyword")
    raw: dict[str, Any] = {}
    columns: dict[str, Any] = {"label": label, "score": score}
    if isinstance(protected, str):
        protected = [protected]
    if protected is not None:
        columns["protected"] = list(protected)
    for key in ("features", "weight", "list_id", "class_scores"):
        if key in settings:
            value = settings.pop(key)
            columns[key] = [value] if key == "features" and isinstance(value, str) else value
    raw["columns"] = {k: v for k, v in columns.items() if v is not None}
    from fairengine.streaming.sources import cluster_frame_engine
    from fairengine.urls import is_url

    data_section = {k: settings.pop(k) for k in DATA_KEYWORDS if k in settings}
    frame: Any = None
    if isinstance(data, pd.DataFrame) or cluster_frame_engine(data) is not None:
        frame = data  # pandas: in memory; Dask or Spark: by its engine
    elif isinstance(data, str | os.PathLike):
        text = os.fspath(data)
        data_section["path"] = text if is_url(text) else str(Path(text).expanduser().resolve())
    elif data is None and "table" in data_section:
        pass  # a Spark catalog table (data.table, engine="spark")
    else:
        raise ConfigError(
            "data: expected a pandas, Dask or Spark DataFrame, the path of a CSV/Parquet file, "
            f"folder or glob, or an object-store URL; got {type(data).__name__}"
        )
    raw["data"] = data_section
    model_object = None
    if isinstance(model, str):
        raw["model"] = {"uri": model}
    elif model is not None:
        model_object = model
    section = methods_section(methods)
    if section:
        raw["methods"] = section
    mlflow = settings.pop("mlflow", None)
    if mlflow is None or mlflow is False:
        raw["mlflow"] = {"enabled": False}
    elif mlflow is True:
        raw["mlflow"] = {"enabled": True}
    elif isinstance(mlflow, Mapping):
        raw["mlflow"] = {"enabled": True, **dict(mlflow)}
    else:
        raise ConfigError(
            "mlflow= must be a mapping of the YAML's mlflow settings (e.g. {'tracking_uri': "
            "'sqlite:///mlflow.db'}), True (the default store) or False/None (off), "
            f"got {mlflow!r}"
        )
    raw.update(settings)
    AuditConfig.from_dict(raw)  # every config problem now, named as in the YAML
    return raw, frame, model_object


# --------------------------------------------------------------------------- the call
def audit(
    data: pd.DataFrame | str | os.PathLike[str] | None,
    *,
    label: str | None = None,
    protected: str | Iterable[str] | None = None,
    model: Any = None,
    score: str | None = None,
    methods: Any = None,
    **settings: Any,
) -> AuditResult:
    """Audit a model (or scores in the data) in one call; returns the :class:`AuditResult`.

    ``data``: a pandas DataFrame; a Dask DataFrame (audited by the Dask engine, on the
    current ``distributed.Client`` if there is one) or a Spark DataFrame (by the Spark engine,
    on its session); or the path of a CSV/Parquet file, folder or glob, or an object-store URL
    (``s3://bucket/prefix/*.parquet``, ``storage_options={...}`` for its fsspec filesystem)
    (read as ``data.path``;
    ``names=``, ``missing="drop"``, ``na_values=``, ``delimiter=``, ``format=``, ``engine=``,
    ``batch_rows=``, ``sample_rows=`` as in the YAML's ``data`` section; ``engine="stream"``
    reads Parquet/CSV files, folders or globs batch by batch, for data larger than memory;
    ``engine="dask"`` (``dask_address=``, ``dask_workers=``) and ``engine="spark"``
    (``spark_master=``; ``data=None, table="catalog.schema.table"`` for a catalog table) make
    the same pass on a cluster).
    ``label``, ``protected`` (one name or a list), ``features``, ``weight``: the column roles
    (``task="ranking"``: ``label`` is the optional relevance and ``list_id`` the list/query id
    column; ``task`` is ``binary``, ``regression``, ``multiclass`` or ``ranking``;
    ``task="multiclass"``: ``class_scores={class: column}`` names probability columns).
    ``model``: a fitted classifier with ``predict_proba`` (scikit-learn,
    xgboost, lightgbm), a ``torch.nn.Module``, a callable returning P(y=1) per row, or an MLflow
    model URI (``models:/name/3``, ``runs:/<id>/model``); or ``score=<column>`` when the data
    carries the scores. ``methods``: names to run (others off) or ``{name: settings}``. Every
    other keyword is a top-level key of the audit YAML (``alpha``, ``positive_label``,
    ``score_type``, ``threshold``, ``seed``, ``multiplicity``, ``decisions``, ``validation``,
    ``output``, ``report``, ``cache``, ``runner``, ``mlflow``, ``name``).
    """
    raw, frame, model_object = audit_config(
        data,
        label=label,
        protected=protected,
        model=model,
        score=score,
        methods=methods,
        **settings,
    )
    if "prefect" not in sys.modules:  # Prefect reads its settings and API address once
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")  # progress, not INFO chatter
        from flows.prefect_server import choose_prefect_api

        choose_prefect_api()
    from flows.preflight import preflight
    from tasks.audit_inputs import AuditInputs, split_storage_options
    from tasks.settings import apply_offline_defaults

    apply_offline_defaults()
    if isinstance(frame, pd.DataFrame) or frame is None:
        inputs = AuditInputs(frame, model_object)
    else:  # a Dask or Spark DataFrame
        inputs = AuditInputs(None, model_object, source=frame)
    raw, carried = split_storage_options(raw, inputs)  # credentials: never a flow parameter
    inputs = carried or inputs
    checked = preflight(raw, None, inputs)  # the CLI's input checks, before Prefect starts
    if checked.mlflow_down:
        assert checked.store is not None
        raise ConfigError(
            f"mlflow: the MLflow store {checked.store.uri} is not available "
            f"({checked.store.reason}); run without mlflow= and log later with "
            ".log_to_mlflow()"
        )
    from flows.audit import run_audit

    # a thread of its own: a notebook's running event loop stays out of Prefect's engine
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fairengine") as pool:
        run = pool.submit(run_audit, raw, None, inputs).result()
    return AuditResult.of(run.result, run.paths)


def load_audit(path: str | os.PathLike[str]) -> AuditResult:
    """Read an ``audit.json`` (any format this version reads) as an :class:`AuditResult`; its
    ``report.html`` beside it, if there, is what :meth:`AuditResult.save` copies."""
    from fairengine.audit_file import load_audit as read

    path = Path(path).expanduser()
    result = read(path)
    paths = {"json": str(path)}
    if (path.parent / "report.html").is_file():
        paths["report"] = str(path.parent / "report.html")
    return AuditResult.of(result, paths)


# --------------------------------------------------------------------------- compare
class Comparison(ModelComparison):
    """A comparison's record (:class:`fairengine.comparison.record.ModelComparison`) with
    :meth:`to_frame` (one row per question) and a rich display; ``paths`` are the files
    written (``json``, ``report``) and ``mlflow`` the run it was logged to, if any."""

    paths: dict[str, str]
    mlflow: dict[str, str] | None

    @classmethod
    def of(
        cls,
        record: ModelComparison,
        paths: Mapping[str, str] | None = None,
        mlflow: Mapping[str, str] | None = None,
    ) -> Comparison:
        out = cls(**{f.name: getattr(record, f.name) for f in dataclasses.fields(record)})
        object.__setattr__(out, "paths", dict(paths or {}))
        object.__setattr__(out, "mlflow", dict(mlflow) if mlflow else None)
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per question: metric, attribute, groups, both gaps, Δ̂, [low, high], the
        p-values, the decision and its reading."""
        return pd.DataFrame([dataclasses.asdict(q) for q in self.result.questions])

    def __repr__(self) -> str:
        return (
            f"<Comparison {self.comparison_id}: {self.verdict.status.upper()} "
            f"({self.candidate.label} vs {self.baseline.label}); .to_frame() for the gaps>"
        )

    def _repr_html_(self) -> str:
        e = html.escape
        colour = {"not_worse": "#009E73", "worse": "#D55E00"}.get(self.verdict.status, "#E69F00")
        order = {"worse": 0, "undetermined (Monte-Carlo resolution)": 1, "undetermined": 1}
        rows = sorted(
            (q for q in self.result.questions if q.decision != "not_tested"),
            key=lambda q: (order.get(q.decision, 2), -q.difference),
        )[:TOP_FINDINGS]
        body = "".join(
            f"<tr><td style='text-align:left'>{e(q.metric)}, {e(q.attribute)}: "
            f"{e(q.group_a)} − {e(q.group_b)}</td><td>{q.gap_baseline:.4f}</td>"
            f"<td>{q.gap_candidate:.4f}</td><td>[{q.low:.4f}, {q.high:.4f}]</td>"
            f"<td>{e(q.decision)}</td></tr>"
            for q in rows
        )
        return (
            f"<div><p><strong style='color:{colour}'>"
            f"{e(self.verdict.status.upper().replace('_', ' '))}</strong> — "
            f"{e(self.verdict.summary)}</p><p>candidate {e(self.candidate.label)} vs baseline "
            f"{e(self.baseline.label)} · {self.n_rows:,} rows</p><table><thead><tr>"
            "<th style='text-align:left'>Gap</th><th>Baseline</th><th>Candidate</th>"
            "<th>Δ = |cand| − |base|</th><th>Decision</th></tr></thead><tbody>"
            f"{body}</tbody></table></div>"
        )


def compare(
    data: pd.DataFrame | str | os.PathLike[str],
    *,
    baseline: Any,
    candidate: Any,
    label: str | None = None,
    protected: str | Iterable[str] | None = None,
    delta: float | None = None,
    **settings: Any,
) -> Comparison:
    """Compare ``candidate`` with ``baseline`` on the same rows (challenger vs champion):
    each a model URI (``models:/credit@champion``) or a model object as :func:`audit` takes.
    ``delta``: the non-inferiority margin (``comparison.delta``, default 0.02); the other
    keywords as :func:`audit` (``features=``, ``positive_label=``, ``threshold=``,
    ``alpha=``, ``mlflow=``, ...). The verdict is ``not_worse``, ``worse`` or
    ``inconclusive`` (:mod:`fairengine.comparison.record`)."""
    if "methods" in settings:
        raise ConfigError("methods: a comparison has no methods to choose; remove methods=")
    if delta is not None:
        settings["comparison"] = {**dict(settings.get("comparison") or {}), "delta": delta}
    raw, frame, _ = audit_config(data, label=label, protected=protected, **settings)
    if frame is not None and not isinstance(frame, pd.DataFrame):
        raise ConfigError(
            f"data: a comparison reads a pandas DataFrame or a file, got {type(frame).__name__}"
        )
    objects = {}
    uris = {}
    for side, model in (("baseline", baseline), ("candidate", candidate)):
        if model is None:
            raise ConfigError(f"{side}: expected a model URI or a model object, got None")
        if isinstance(model, str):
            uris[side] = model
        else:
            objects[side] = model
    from flows.preflight import preflight
    from tasks.audit_inputs import AuditInputs, ComparisonInputs
    from tasks.settings import apply_offline_defaults

    apply_offline_defaults()
    check_model = objects.get("candidate")
    checked = preflight(
        {**raw, "model": {"uri": uris["candidate"]}} if "candidate" in uris else raw,
        None,
        AuditInputs(frame, check_model),
    )
    if checked.mlflow_down:
        assert checked.store is not None
        raise ConfigError(
            f"mlflow: the MLflow store {checked.store.uri} is not available "
            f"({checked.store.reason})"
        )
    if "prefect" not in sys.modules:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from flows.compare import run_comparison

    inputs = ComparisonInputs(frame, objects.get("baseline"), objects.get("candidate"))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fairengine") as pool:
        run = pool.submit(
            run_comparison, raw, uris.get("baseline"), uris.get("candidate"), None, inputs
        ).result()
    return Comparison.of(run.comparison, run.paths, run.mlflow)
