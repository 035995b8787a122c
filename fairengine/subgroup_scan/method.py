"""The subgroup-scan method of an audit: scan the conjunctions of the protected attributes and
the chosen features for the subgroup where the model deviates most, with a p-value that
accounts for the search (:mod:`fairengine.subgroup_scan.scan`); this module checks the inputs,
runs the scan and writes the findings.

Findings: ``scan_<statistic>.<rank>`` for each of the top-k subgroups (rank 1 = the maximum):
the estimate is the deviation (O − E)/n of the subgroup (observed minus predicted positive rate
for calibration; the subgroup's rate minus the stratum's for the rate statistics) with its
simultaneous interval; the p-value is the Westfall–Young step-down p-value over the whole search
space (for rank 1, the calibrated p-value of the maximum), a Monte-Carlo estimate carried as a
:class:`~fairengine.results.ResamplingPart` named ``null scan``; the reading is the rule
("sex = Female and age < 25: observed 0.38 vs predicted 0.58, n = 246"). The findings join the
audit's multiplicity family like every tested finding.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import pandas as pd

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.results import Finding, MethodResult, ResamplingPart
from fairengine.sequential_mc import SequentialSpec
from fairengine.subgroup_scan.config import SubgroupScanConfig
from fairengine.subgroup_scan.result import KEPT_MAXIMA, SubgroupScanDetails
from fairengine.subgroup_scan.scan import ScannedSubgroup, ScanResult, scan_subgroups

METHOD = "subgroup_scan"
TITLE = "Subgroup scan (the worst subgroup, with a search-adjusted p-value)"

_WORDS = {
    "calibration": ("observed", "predicted"),
    "positive_rate": ("positive rate", "overall"),
    "tpr": ("TPR", "overall"),
    "fpr": ("FPR", "overall"),
}
_NULLS = {
    "calibration": "the model is calibrated on every scanned subgroup (y ~ Bernoulli(p))",
    "positive_rate": "positive predictions are exchangeable across rows",
    "tpr": "positive predictions are exchangeable among the rows with y = 1",
    "fpr": "positive predictions are exchangeable among the rows with y = 0",
}


def _params(config: SubgroupScanConfig) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def reading(sub: ScannedSubgroup, statistic: str) -> str:
    """ "sex = Female and age < 25: observed 0.38 vs predicted 0.58, n = 246"."""
    seen, null = _WORDS[statistic]
    return (
        f"{sub.rule}: {seen} {sub.observed_rate:.2f} vs {null} {sub.expected_rate:.2f}, "
        f"n = {sub.n:,}"
    )


SHORT_NAMES = {
    "calibration": "calibration",
    "positive_rate": "positive rate",
    "tpr": "TPR",
    "fpr": "FPR",
}
"""The statistic's name in a finding's label (kept short: the label is one line of the
report's top findings)."""


def scan_findings(result: ScanResult, null_hypothesis: str) -> list[Finding]:
    """One finding per reported subgroup (module docstring)."""
    out: list[Finding] = []
    b = result.null.draws
    for j, sub in enumerate(result.top, start=1):
        exceed = round(sub.adjusted_pvalue * (b + 1) - 1)
        out.append(
            Finding(
                key=f"scan_{result.statistic_name}.{j}",
                label=f"scan #{j}, {SHORT_NAMES.get(result.statistic_name, '')}: {sub.rule}",
                estimate=sub.deviation,
                interval=sub.interval,
                pvalue=sub.adjusted_pvalue,
                null_hypothesis=(
                    f"{null_hypothesis}; step-down over {result.n_subgroups} subgroups"
                ),
                reading=reading(sub, result.statistic_name),
                resampling=(ResamplingPart("null scan", int(exceed), int(b)),),
                null_kind="zero",
            )
        )
    return out


def scan_frame(dataset: AuditDataset, config: SubgroupScanConfig) -> pd.DataFrame:
    """The scanned columns: the protected attributes (as their group labels), then
    ``config.features`` (a name that is not a column is an error naming it)."""
    columns: dict[str, Any] = {}
    for attr, enc in dataset.groups.items():
        columns[attr] = pd.Categorical.from_codes(
            enc.codes.astype(np.int64), categories=pd.Index(list(enc.categories))
        )
    for name in config.features:
        if name in columns:
            continue
        if name not in dataset.frame.columns:
            raise DataContractError(
                f"methods.{METHOD}.features names {name!r}, which is not a column of the data"
            )
        columns[name] = dataset.frame[name].to_numpy()
    if not columns:
        raise DataContractError(f"{METHOD} needs protected attributes or features to scan")
    return pd.DataFrame(columns)


def run_subgroup_scan(
    dataset: AuditDataset, config: SubgroupScanConfig, *, seed: int = 0, alpha: float = 0.05
) -> MethodResult:
    """The subgroup scan of ``dataset`` (module docstring)."""
    start = time.perf_counter()
    frame = scan_frame(dataset, config)
    probability = decision = None
    if config.statistic == "calibration":
        if dataset.probability is None:
            raise DataContractError(
                f"methods.{METHOD}.statistic 'calibration' needs probability scores "
                "(score_type: probability)"
            )
        probability = dataset.probability
    else:
        if dataset.prediction is None or dataset.prediction_mode != "hard":
            raise DataContractError(
                f"methods.{METHOD}.statistic {config.statistic!r} needs hard predictions "
                "(set a threshold)"
            )
        decision = dataset.prediction
    if dataset.weights is not None:
        raise DataContractError(f"{METHOD} does not support row weights yet")
    result = scan_subgroups(
        frame,
        list(frame.columns),
        dataset.label,
        probability,
        decision,
        statistic=config.statistic,
        sides=config.sides,
        depth=config.depth,
        min_size=config.min_size,
        levels=config.levels,
        top_k=config.top_k,
        jaccard=float(config.jaccard),
        mode=config.mode,
        alpha=alpha,
        confidence_level=config.confidence_level,
        min_draws=config.min_draws,
        sequential=SequentialSpec(alpha=alpha, procedure="none", max_resamples=config.max_draws),
        seed=seed,
    )
    warnings: list[str] = []
    if not config.held_out:
        warnings.append(
            "the scores were computed on the model's training rows (held_out: false): "
            "in-sample fits track the labels, so the calibration null is conservative and "
            "a biased subgroup may be missed; audit held-out predictions"
        )
    if result.null.decision == "undetermined":
        warnings.append(
            f"the p-value of the maximum is undetermined after {result.null.sequential_draws:,} "
            f"null scans (raise methods.{METHOD}.max_draws)"
        )
    null = dataclasses.replace(result.null, maxima=result.null.maxima[:KEPT_MAXIMA])
    details = SubgroupScanDetails(
        statistic_name=result.statistic_name,
        sides=result.sides,
        mode=config.mode,
        features=tuple(frame.columns),
        depth=result.depth,
        min_size=result.min_size,
        levels=config.levels,
        n_rows=result.n_rows,
        n_subgroups=result.n_subgroups,
        held_out=config.held_out,
        statistic=result.statistic,
        pvalue=result.pvalue,
        naive_min_pvalue=result.naive_min_pvalue,
        bonferroni_pvalue=result.bonferroni_pvalue,
        null=null,
        top=result.top,
    )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters=_params(config),
        findings=scan_findings(result, _NULLS[config.statistic]),
        details=details,
        warnings=warnings,
        seconds=round(time.perf_counter() - start, 4),
    )
