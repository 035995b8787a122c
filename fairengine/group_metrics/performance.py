"""Performance per group in the LiFT suite: the rates of :mod:`fairengine.group_performance`
(precision, recall, TNR, FNR, FPR, accuracy) with intervals, the AUC with its DeLong interval
(exact, binned or, with ``lift_compat`` and hard predictions, LiFT's AUC of the predictions),
the optional DeLong z-tests of equal AUC, and user-defined metrics."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from fairengine.dataset import AuditDataset
from fairengine.delong import auc_interval
from fairengine.errors import ConfigError
from fairengine.finding_keys import pair_token
from fairengine.group_metrics.config import GroupMetricsConfig
from fairengine.group_metrics.encoding import Encoding
from fairengine.group_metrics.result import (
    AucEstimate,
    CustomEstimate,
    MetricEstimate,
    Performance,
)
from fairengine.group_performance import (
    GroupAUC,
    ScoreOrder,
    binned_score_blocks,
    exact_score_blocks,
    group_auc,
    group_rates,
    hard_prediction_blocks,
)
from fairengine.group_table import GroupTable
from fairengine.intervals import wald_interval
from fairengine.results import Finding, Interval, gap_question

AUTO_AUC_BINS = 4096
"""Histogram bins of the AUC when `auc_bins` is null and the data exceeds `auc_exact_max_rows`."""


@dataclass(frozen=True)
class AucPlan:
    """How the suite computes the AUC, the same for every encoding: whether at all
    (``compute``), from the binned score histogram of the joint table (``binned``) or exactly
    with the rows' shared score ``order`` (None when not exact)."""

    compute: bool
    binned: bool
    order: ScoreOrder | None


def load_custom_metric(target: str) -> Callable[..., float]:
    """Import ``package.module:function``; raises :class:`ConfigError` when it cannot."""
    module, _, attr = target.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"custom metric {target!r} cannot be imported: {exc}") from None
    if not callable(fn):
        raise ConfigError(f"custom metric {target!r} is not callable")
    return fn


@dataclass(frozen=True)
class SuiteInputs:
    """What every encoding of one run of the suite is audited with: the dataset (None from
    streamed count tables: then no step may need rows), the settings,
    the group table, the levels audited, the performance metrics asked for, the AUC plan and the
    custom metrics (loaded)."""

    dataset: AuditDataset | None  # None for a streamed audit (count tables only)
    cfg: GroupMetricsConfig
    table: GroupTable
    levels: list[str]
    perf_names: list[str]
    auc: AucPlan
    customs: dict[str, Callable[..., float]]


def encoding_performance(
    enc: Encoding, inputs: SuiteInputs, findings: list[Finding], warnings: list[str]
) -> tuple[list[dict[str, Performance]], dict[str, np.ndarray]]:
    """The performance of every group of ``enc``: per group the metrics by name (for the
    details) and per metric the values over the groups (for the benefit vectors). The AUC
    appends its findings (``auc.<encoding>.<group>``, ``auc_gap.<encoding>.<a>_<b>``) and
    warnings."""
    dataset, cfg, table, levels = inputs.dataset, inputs.cfg, inputs.table, inputs.levels
    perf_names, auc, customs = inputs.perf_names, inputs.auc, inputs.customs
    m = enc.moments
    level = cfg.confidence_level
    per_group: list[dict[str, Performance]] = [{} for _ in m.categories]
    values: dict[str, np.ndarray] = {}
    if not (perf_names or cfg.performance_benefit_metrics):
        return per_group, values
    perf_rates = (
        group_rates(m, level, lift_compat=cfg.lift_compat)
        if "model" in levels or perf_names
        else {}
    )
    for name, gr_rate in perf_rates.items():
        if name not in perf_names and name not in cfg.performance_benefit_metrics:
            continue
        values[name] = gr_rate.estimate
        for i, entries in enumerate(per_group):
            entries[name] = MetricEstimate(
                estimate=float(gr_rate.estimate[i]),
                low=float(gr_rate.low[i]),
                high=float(gr_rate.high[i]),
            )
    if auc.compute:
        gauc = _auc(enc, dataset, table, cfg, auc)
        values["AUC"] = np.array([e.auc for e in gauc.estimates])
        for i, entry in enumerate(_auc_outputs(gauc, enc, cfg, findings, warnings)):
            per_group[i]["AUC"] = entry
    for name, fn in customs.items():
        assert dataset is not None  # custom metrics are refused without rows
        custom_vals = np.empty(len(m.categories))
        for i in range(len(m.categories)):
            in_group = enc.codes == i
            w = None if dataset.weights is None else dataset.weights[in_group]
            custom_vals[i] = float(
                fn(
                    dataset.label[in_group],
                    dataset.probability[in_group] if dataset.probability is not None else None,
                    dataset.prediction[in_group] if dataset.prediction is not None else None,
                    w,
                )
            )
        values[name] = custom_vals
        for i, entries in enumerate(per_group):
            entries[name] = CustomEstimate(estimate=float(custom_vals[i]))
    return per_group, values


def _auc(
    enc: Encoding,
    dataset: AuditDataset | None,
    table: GroupTable,
    cfg: GroupMetricsConfig,
    plan: AucPlan,
) -> GroupAUC:
    m = enc.moments
    compat = cfg.lift_compat
    if compat and table.hard:  # hard predictions (the AUC is only computed with scores)
        return group_auc(hard_prediction_blocks(m), lift_compat=True)
    if plan.binned:
        hw, hw2 = table.histogram(enc.name if enc.kind == "attribute" else None)
        return group_auc(binned_score_blocks(hw, hw2, m.n), lift_compat=compat)
    # the row codes were computed for this case (need_rows in run_group_metrics)
    assert enc.codes is not None and dataset is not None
    blocks = exact_score_blocks(
        enc.codes,
        len(m.categories),
        dataset.label,
        dataset.probability,  # type: ignore[arg-type]
        dataset.weights,
        plan.order,
    )
    return group_auc(blocks, lift_compat=compat)


def _auc_outputs(
    gauc: GroupAUC,
    enc: Encoding,
    cfg: GroupMetricsConfig,
    findings: list[Finding],
    warnings: list[str],
) -> list[AucEstimate]:
    """Every group's AUC details; appends the AUC findings and warnings."""
    level = cfg.confidence_level
    cats = enc.moments.categories
    entries = []
    for i, e in enumerate(gauc.estimates):
        ci = auc_interval(e.auc, e.se, level, cfg.auc_interval)
        entries.append(
            AucEstimate(
                estimate=float(e.auc),
                low=float(ci.low),
                high=float(ci.high),
                se=float(e.se),
                error_bound=float(gauc.error_bound[i]),
                n_pos=int(e.n_pos),
                n_neg=int(e.n_neg),
            )
        )
        if not np.isfinite(e.auc):
            warnings.append(
                f"AUC of {enc.name}={cats[i]} is undefined: it has {e.n_pos} positive and "
                f"{e.n_neg} negative row(s)"
            )
        elif gauc.all_tied[i] and not cfg.lift_compat:
            warnings.append(
                f"all scores are equal in {enc.name}={cats[i]}: AUC = 0.5 with zero variance "
                "(the score does not rank this group)"
            )
        bound = float(gauc.error_bound[i])
        note = f" (binned; exact AUC within ±{bound:.2g})" if bound > 0 else ""
        findings.append(
            Finding(
                key=f"auc.{enc.token}.{enc.name_token(cats[i])}",
                label=f"AUC, {enc.name}={cats[i]}",
                estimate=e.auc,
                interval=ci if np.isfinite(ci.low) else None,
                reading=(
                    f"AUC of the score within {enc.name}={cats[i]} is {e.auc:.3f}"
                    + (
                        f" ({level:.0%} CI {ci.low:.3f} to {ci.high:.3f})"
                        if np.isfinite(ci.low)
                        else ""
                    )
                    + note
                    + "."
                ),
            )
        )
    if cfg.auc_gap_tests and enc.kind == "attribute" and not cfg.lift_compat:
        findings += _auc_gap_findings(gauc, enc, level)
    return entries


def _auc_gap_findings(gauc: GroupAUC, enc: Encoding, level: float) -> list[Finding]:
    """The DeLong z-test of equal AUC in two independent groups, for every pair."""
    cats = enc.moments.categories
    est = gauc.estimates
    findings = []
    for a in range(len(est)):
        for b in range(a + 1, len(est)):
            d = est[a].auc - est[b].auc
            se = math.sqrt(est[a].variance + est[b].variance)
            # a group with zero DeLong variance (AUC 0 or 1, or all scores tied) would leave
            # its own sampling error out of se: no valid Wald test, the pair is not tested
            ok = bool(np.isfinite(d) and est[a].variance > 0 and est[b].variance > 0)
            p = float(2 * norm.sf(abs(d) / se)) if ok else None
            lo, hi = wald_interval(d, se, level) if ok else (np.nan, np.nan)
            findings.append(
                Finding(
                    key=f"auc_gap.{enc.token}.{pair_token(cats[a], cats[b])}",
                    label=f"AUC gap, {enc.name}: {cats[a]} − {cats[b]}",
                    estimate=float(d),
                    interval=Interval(float(lo), float(hi), level, "delong wald") if ok else None,
                    pvalue=p,
                    null_hypothesis="equal AUC in both groups",
                    question=(
                        gap_question("auc", enc.name, cats[a], cats[b])
                        if enc.kind == "attribute"
                        else None
                    ),
                    null_kind="zero",
                    reading=f"AUC of {cats[a]} minus {cats[b]} is {d:+.3f}."
                    + (
                        ""
                        if ok
                        else " Not tested: a group's AUC has zero or undefined DeLong variance."
                    ),
                )
            )
    return findings
