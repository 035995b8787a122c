"""Benefit vectors of the LiFT suite and their inequality indices (GEI, Atkinson, Theil L/T,
CV; :mod:`fairengine.inequality`): one finding per index and vector."""

from __future__ import annotations

import math

import numpy as np

from fairengine.finding_keys import part_token
from fairengine.group_metrics.config import GroupMetricsConfig
from fairengine.group_metrics.encoding import Encoding
from fairengine.group_metrics.result import (
    Benefit,
    BenefitSummary,
    ListedBenefit,
    SummarizedBenefit,
)
from fairengine.inequality import TOKENS, aggregate
from fairengine.results import Finding

MAX_BENEFIT_ENTRIES = 100
"""A longer benefit vector is summarised in the details, not listed."""


def benefit(
    tag: str,
    labels: list[str],
    values: np.ndarray,
    cfg: GroupMetricsConfig,
    enc: Encoding,
    findings: list[Finding],
    warnings: list[str],
) -> Benefit:
    """Aggregate one benefit vector (entries ``values`` named ``labels``): returns its details
    and appends a finding per index of ``cfg.aggregate_metrics``. Undefined entries are left
    out of the indices (with a warning), except with ``lift_compat``."""
    drop_nan = not cfg.lift_compat
    vals = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(vals) if drop_nan else np.ones(vals.shape, dtype=bool)
    if drop_nan and not keep.all():
        warnings.append(
            f"benefit vector {tag} of {enc.name}: {int((~keep).sum())} undefined entr"
            f"{'y' if (~keep).sum() == 1 else 'ies'} left out of the aggregates"
        )
    aggs: dict[str, float] = {}
    for name in cfg.aggregate_metrics:
        param = {
            "GENERALIZED_ENTROPY_INDEX": cfg.gei_alpha,
            "ATKINSON_INDEX": cfg.atkinson_epsilon,
        }.get(name)
        val = aggregate(name, vals[keep], param, lift_compat=cfg.lift_compat)
        aggs[name] = val
        ptxt = "" if param is None else f"({param:g})"
        findings.append(
            Finding(
                key=f"{TOKENS[name]}.{part_token(tag)}.{enc.token}",
                label=f"{name.replace('_', ' ').title()}{ptxt} of the {tag} benefit vector, "
                f"{enc.name}",
                estimate=val,
                reading=(
                    f"Inequality ({name.lower()}{ptxt}) of {tag} across {enc.name} "
                    f"({int(keep.sum())} entries): {val:.4g} (0 = all equal)."
                ),
            )
        )
    if vals.size <= MAX_BENEFIT_ENTRIES:
        return ListedBenefit(
            n_entries=int(vals.size),
            aggregates=aggs,
            entries=dict(zip(labels, vals.tolist(), strict=True)),
        )
    fin = vals[np.isfinite(vals)]  # keep the details small (pairs of a large intersection)
    return SummarizedBenefit(
        n_entries=int(vals.size),
        aggregates=aggs,
        summary=BenefitSummary(
            min=float(fin.min()) if fin.size else math.nan,
            max=float(fin.max()) if fin.size else math.nan,
            mean=float(fin.mean()) if fin.size else math.nan,
        ),
    )
