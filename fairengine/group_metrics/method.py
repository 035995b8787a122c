"""LiFT's group-metric suite on sufficient statistics: ``run_group_metrics``.

For each protected attribute and the intersection of all of them (``lift-semantics.md`` §1–3):

* distances of the prediction distribution (model level; expected counts without a threshold)
  and of the label distribution (dataset level) over (group, outcome) categories from a
  reference (UNIFORM or user-supplied): skews, infinity norm, total variation, JS and KL
  (:mod:`.distances`);
* demographic parity and equalized odds (TPR, FPR) for every pair of groups: signed and
  absolute gap with interval, ratio with interval, disparate-impact ratio and four-fifths flag
  (:mod:`.rates`, on :mod:`fairengine.group_parity.rates`), plus the base-rate (label) parity
  of the data;
* performance per group with intervals: AUC (DeLong), precision, recall, TNR, FNR, FPR,
  accuracy, and user-defined metrics (:mod:`.performance`);
* aggregate inequality indices (GEI, Atkinson, Theil L/T, CV) over benefit vectors built from
  the distance metrics and the performance metrics (:mod:`.benefits`).

The details are a :class:`~fairengine.group_metrics.result.GroupMetricsDetails`.

Everything except the exact AUC and custom metrics comes from one count table per (joint group,
label) built in a single pass over the rows (:mod:`fairengine.group_table`); the exact AUC adds
one sort of the scores shared by all attributes (``auc_bins`` makes it a histogram, O(n)).
``lift_compat=True`` reproduces LiFT's numbers (see ``docs/group_metrics.md`` for every
difference).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.group_metrics.benefits import benefit
from fairengine.group_metrics.config import GroupMetricsConfig
from fairengine.group_metrics.distances import encoding_distances
from fairengine.group_metrics.encoding import Encoding
from fairengine.group_metrics.performance import (
    AUTO_AUC_BINS,
    AucPlan,
    SuiteInputs,
    encoding_performance,
    load_custom_metric,
)
from fairengine.group_metrics.rates import (
    encoding_rates,
    gap_findings,
    rate_entry,
    reported_pairs,
)
from fairengine.group_metrics.result import (
    AucNotApplicable,
    AucSetup,
    Benefit,
    EncodingMetrics,
    GroupMetricsDetails,
    MetricsGroup,
)
from fairengine.group_performance import score_order
from fairengine.group_table import GroupTable
from fairengine.intersection import intersect_groups
from fairengine.results import Finding, MethodResult
from fairengine.scores import LABEL_AUC_REASON

if TYPE_CHECKING:
    from fairengine.streaming.tables import StreamedCounts

METHOD = "group_metrics"
TITLE = "Group metrics (LiFT suite)"


def run_group_metrics(
    dataset: AuditDataset, config: GroupMetricsConfig | None = None, *, seed: int = 0
) -> MethodResult:
    """Compute the whole LiFT suite (module docstring) and return a :class:`MethodResult`.

    Findings (estimates with intervals where defined; untested unless ``auc_gap_tests``):
    ``<kl|js|tv|inf_norm>_<pred|label>.<attr>``, ``dp_impact.<attr>`` (lowest/highest
    positive-prediction rate), ``<dp|tpr|fpr|base_rate>_gap_max.<attr>``, ``auc.<attr>.<group>``,
    ``<gei|atkinson|theil_l|theil_t|cv>.<benefit>.<attr>`` and, optionally,
    ``auc_gap.<attr>.<a>_<b>``. ``<attr>`` is the attribute or the intersection
    (``race_x_sex``); names are tokens of :func:`fairengine.finding_keys.key_token`. ``seed``
    is unused (the suite is deterministic) and kept for the contract.
    """
    del seed
    start = time.perf_counter()
    cfg = config or GroupMetricsConfig()
    plan = _plan(
        cfg,
        list(dataset.roles.protected),
        has_scores=dataset.prediction is not None,
        score_type=dataset.score_type,
    )
    attrs, warnings, levels = plan.attrs, plan.warnings, plan.levels
    perf_names, want_auc, has_scores = plan.perf_names, plan.want_auc, plan.has_scores
    compat = cfg.lift_compat
    hard = dataset.threshold is not None
    prediction = (  # (has_scores: the dataset's prediction is not None)
        dataset.prediction
        if dataset.prediction is not None
        else np.zeros(dataset.n_rows, dtype=np.int8)
    )
    bins = cfg.auc_bins
    if bins is None and want_auc and dataset.n_rows > cfg.auc_exact_max_rows:
        bins = AUTO_AUC_BINS
        warnings.append(
            f"AUC from a {bins}-bin score histogram ({dataset.n_rows:,} rows > "
            f"methods.group_metrics.auc_exact_max_rows); its error bound is in the details"
        )
    binned = want_auc and bins is not None and not (compat and hard)

    # ---------------------------------------------------------------- one pass: joint table
    parts = [dataset.groups[a] for a in attrs]
    table = GroupTable.from_arrays(
        parts,
        dataset.label,
        prediction,
        dataset.weights,
        hard=hard or not has_scores,
        score=dataset.probability if binned else None,
        bins=bins if binned else None,
    )
    encodings = [Encoding(a, "attribute", table.moments(a), dataset.groups[a].codes) for a in attrs]
    if cfg.intersection and len(attrs) >= 2:
        _check_cells(table, attrs, cfg)
        encodings.append(Encoding(table.intersection_name, "intersection", table.moments(None)))
    need_rows = (want_auc and not binned and not (compat and hard)) or bool(cfg.custom_metrics)
    if need_rows:
        for e in encodings:
            if e.codes is None:
                e.codes = intersect_groups(
                    parts, max_cells=cfg.max_intersection_cells
                ).encoding.codes
    auc = AucPlan(
        compute=want_auc,
        binned=binned,
        order=(
            score_order(dataset.probability, dataset.label, dataset.weights)  # type: ignore[arg-type]
            if want_auc and not binned and not (compat and hard)
            else None
        ),
    )
    customs = {k: load_custom_metric(v) for k, v in cfg.custom_metrics.items()}
    inputs = SuiteInputs(dataset, cfg, table, levels, perf_names, auc, customs)
    return _suite_result(
        plan, inputs, encodings, bins, dataset.threshold, dataset.prediction_mode, start
    )


def run_group_metrics_from_counts(
    counts: StreamedCounts, config: GroupMetricsConfig | None = None, *, seed: int = 0
) -> MethodResult:
    """:func:`run_group_metrics` from the count tables of a streamed audit
    (:class:`fairengine.streaming.StreamedCounts`) instead of rows.

    Everything the suite computes from its :class:`GroupTable` is the same as on rows. The AUC
    is the binned one from the stream's score histogram (``auc_bins`` bins when set, else the
    histogram's; the pandas path bins too above ``auc_exact_max_rows`` rows), with its error
    bound, and says so in a warning; the exact AUC and custom metrics need rows and are
    refused (run them on the stream's sample, whose findings must say they come from it).
    """
    del seed
    start = time.perf_counter()
    cfg = config or GroupMetricsConfig()
    if cfg.custom_metrics:
        raise DataContractError(
            f"methods.group_metrics.custom_metrics {sorted(cfg.custom_metrics)} need rows; a "
            "streamed audit has count tables only (run them on its stratified sample)"
        )
    plan = _plan(
        cfg,
        list(counts.roles.protected),
        has_scores=counts.has_scores,
        score_type=counts.score_type,
    )
    compat, hard = cfg.lift_compat, counts.threshold is not None
    bins = None
    binned = plan.want_auc and not (compat and hard)
    if binned:
        bins = cfg.auc_bins if cfg.auc_bins is not None else counts.bins
        if bins is None:
            raise DataContractError(
                "the AUC of a streamed audit comes from its score histogram, and this stream "
                "was folded without one (bins=None)"
            )
        if bins != counts.bins:
            raise DataContractError(
                f"methods.group_metrics.auc_bins={bins} differs from the stream's histogram "
                f"({counts.bins} bins); stream with bins={bins}"
            )
        plan.warnings.append(
            f"AUC from a {bins}-bin score histogram (streamed audit: the exact AUC needs rows); "
            "its error bound is in the details"
        )
    table = counts.group_table(plan.attrs, histogram=binned)
    encodings = [Encoding(a, "attribute", table.moments(a)) for a in plan.attrs]
    if cfg.intersection and len(plan.attrs) >= 2:
        _check_cells(table, plan.attrs, cfg)
        encodings.append(Encoding(table.intersection_name, "intersection", table.moments(None)))
    auc = AucPlan(compute=plan.want_auc, binned=binned, order=None)
    inputs = SuiteInputs(None, cfg, table, plan.levels, plan.perf_names, auc, {})
    return _suite_result(
        plan, inputs, encodings, bins, counts.threshold, counts.prediction_mode, start
    )


@dataclass
class _Plan:
    """What the suite audits, from the settings and whether there are scores."""

    attrs: list[str]
    warnings: list[str]
    levels: list[str]
    perf_names: list[str]
    want_auc: bool
    auc_not_applicable: bool
    has_scores: bool


def _plan(
    cfg: GroupMetricsConfig, protected: list[str], *, has_scores: bool, score_type: str
) -> _Plan:
    attrs = list(protected) if cfg.attributes is None else list(cfg.attributes)
    unknown = [a for a in attrs if a not in protected]
    if unknown or not attrs:
        raise DataContractError(
            f"methods.group_metrics.attributes {unknown or attrs} are not protected attributes "
            f"of the dataset ({list(protected)})"
        )
    warnings: list[str] = []
    levels = [lv for lv in cfg.levels if lv == "dataset" or has_scores]
    if "model" in cfg.levels and not has_scores:
        warnings.append("no model scores: model-level metrics and performance were skipped")
    perf_names = cfg.performance_metrics if has_scores else []
    want_auc = "AUC" in perf_names or "AUC" in cfg.performance_benefit_metrics
    want_auc = want_auc and has_scores
    auc_not_applicable = want_auc and score_type == "label"
    if auc_not_applicable:  # hard labels rank nothing: no AUC findings, the reason recorded
        want_auc = False
        perf_names = [p for p in perf_names if p != "AUC"]
        warnings.append(f"AUC {LABEL_AUC_REASON}")
    return _Plan(attrs, warnings, levels, perf_names, want_auc, auc_not_applicable, has_scores)


def _check_cells(table: GroupTable, attrs: list[str], cfg: GroupMetricsConfig) -> None:
    cells = table.members.shape[0]
    if cells > cfg.max_intersection_cells:
        raise DataContractError(
            f"the intersection of {attrs} has {cells} non-empty cells, more than "
            f"methods.group_metrics.max_intersection_cells={cfg.max_intersection_cells}; "
            "drop an attribute, merge small groups or raise the limit"
        )


def _suite_result(
    plan: _Plan,
    inputs: SuiteInputs,
    encodings: list[Encoding],
    bins: int | None,
    threshold: float | None,
    prediction_mode: str,
    start: float,
) -> MethodResult:
    """The suite's result over its encodings (rows or streamed counts)."""
    cfg, levels, perf_names, warnings = inputs.cfg, plan.levels, plan.perf_names, plan.warnings
    compat, level, has_scores = cfg.lift_compat, cfg.confidence_level, plan.has_scores
    attrs, auc_not_applicable, binned = plan.attrs, plan.auc_not_applicable, inputs.auc.binned
    ref_unknown = [k for k in cfg.reference if k not in {e.name for e in encodings}]
    if ref_unknown:
        raise DataContractError(
            f"methods.group_metrics.reference names {ref_unknown}, which are not audited "
            f"attributes ({[e.name for e in encodings]})"
        )

    findings: list[Finding] = []
    by_encoding: dict[str, EncodingMetrics] = {}
    for enc in encodings:
        by_encoding[enc.name] = _audit_encoding(enc, inputs, findings, warnings)
    auc_setup: AucSetup | AucNotApplicable = (
        AucNotApplicable(method=None, applicable=False, reason=LABEL_AUC_REASON)
        if auc_not_applicable
        else AucSetup(
            method="binned" if binned else "exact",
            bins=bins if binned else None,
            score="prediction" if compat else "probability",
        )
    )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters={
            "lift_compat": compat,
            "attributes": attrs,
            "intersection": bool(cfg.intersection and len(attrs) >= 2),
            "levels": levels,
            "reference": {
                e.name: ("user" if e.name in cfg.reference else "UNIFORM") for e in encodings
            },
            "smoothing": cfg.smoothing,
            "distance_metrics": cfg.distance_metrics,
            "performance_metrics": perf_names,
            "auc_bins": cfg.auc_bins,
            "auc_interval": cfg.auc_interval,
            "distance_benefit_metrics": cfg.distance_benefit_metrics,
            "performance_benefit_metrics": cfg.performance_benefit_metrics,
            "aggregate_metrics": cfg.aggregate_metrics,
            "gei_alpha": cfg.gei_alpha,
            "atkinson_epsilon": cfg.atkinson_epsilon,
            "confidence_level": level,
            "threshold": threshold,
            "prediction": prediction_mode if has_scores else None,
        },
        findings=findings,
        details=GroupMetricsDetails(
            lift_compat=compat,
            prediction=prediction_mode if has_scores else None,
            threshold=threshold,
            levels=tuple(levels),
            auc=auc_setup,
            encodings=by_encoding,
        ),
        warnings=warnings,
        seconds=time.perf_counter() - start,
    )


def _audit_encoding(
    enc: Encoding, inputs: SuiteInputs, findings: list[Finding], warnings: list[str]
) -> EncodingMetrics:
    """The suite for one encoding: its details; appends its findings and warnings (in the
    order: largest gaps and impact ratio, distances with the skews' indices, AUC, the parity
    and performance benefit vectors' indices)."""
    cfg, levels = inputs.cfg, inputs.levels
    m = enc.moments
    cats = m.categories
    level = cfg.confidence_level
    compat = cfg.lift_compat

    rates = encoding_rates(m, levels, level, compat)
    findings += gap_findings(rates, enc, compat, level)
    benefits: dict[str, Benefit] = {}
    distances = encoding_distances(enc, cfg, levels, findings, warnings, benefits)
    performance, perf = encoding_performance(enc, inputs, findings, warnings)

    # ------------------------------------------------------------ benefit vectors
    pairs = rates.all_pairs()
    if "DEMOGRAPHIC_PARITY" in cfg.distance_benefit_metrics:
        for name, tag in (("positive_rate", "dp_pred"), ("base_rate", "dp_label")):
            dp_rows = pairs.get(name)
            if dp_rows:
                benefits[tag] = benefit(
                    tag,
                    [f"{r.a}|{r.b}" for r in dp_rows],
                    np.array([r.reported_gap(compat) for r in dp_rows]),
                    cfg,
                    enc,
                    findings,
                    warnings,
                )
    if "EQUALIZED_ODDS" in cfg.distance_benefit_metrics and "model" in levels:
        eo_rows = [(n, r) for n in ("fpr", "tpr") for r in pairs.get(n, [])]
        if eo_rows:
            benefits["eo"] = benefit(
                "eo",
                [f"{r.a}|{r.b}|{n}" for n, r in eo_rows],
                np.array([r.reported_gap(compat) for _, r in eo_rows]),
                cfg,
                enc,
                findings,
                warnings,
            )
    for name in cfg.performance_benefit_metrics:
        if name in perf:
            tag = name.lower()
            benefits[tag] = benefit(tag, list(cats), perf[name], cfg, enc, findings, warnings)

    pred = rates.prediction
    groups = tuple(
        MetricsGroup(
            group=group,
            n=int(m.n[i].sum()),
            weight=float(m.w[i].sum()),
            base_rate=rate_entry(rates.base, i, compat),
            positive_rate=None if pred is None else rate_entry(pred["positive_rate"], i, compat),
            tpr=None if pred is None else rate_entry(pred["tpr"], i, compat),
            fpr=None if pred is None else rate_entry(pred["fpr"], i, compat),
            performance=performance[i] or None,
        )
        for i, group in enumerate(cats)
    )
    return EncodingMetrics(
        kind=enc.kind,
        groups=groups,
        pairs=reported_pairs(rates, cfg.max_pairs_reported),
        distances=distances,
        benefits=benefits,
    )
