"""Distances of the prediction distribution (model level) and of the label distribution
(dataset level) over (group, outcome) categories from a reference (UNIFORM or user-supplied):
skews, infinity norm, total variation, JS and KL (:mod:`fairengine.distribution_distance`),
and the skews' benefit vectors."""

from __future__ import annotations

import numpy as np

from fairengine.counts import GroupLabelMoments
from fairengine.distribution_distance import (
    DistributionDistances,
    distribution_distances,
    reference_masses,
)
from fairengine.group_metrics.benefits import benefit
from fairengine.group_metrics.config import GroupMetricsConfig
from fairengine.group_metrics.encoding import Encoding
from fairengine.group_metrics.result import (
    Benefit,
    EncodingDistances,
    LevelDistances,
    SkewCategory,
)
from fairengine.results import Finding

SCALARS = ("INF_NORM_DIST", "TOTAL_VAR_DIST", "JS_DIVERGENCE", "KL_DIVERGENCE")
_DIST_TOKEN = {
    "INF_NORM_DIST": "inf_norm",
    "TOTAL_VAR_DIST": "tv",
    "JS_DIVERGENCE": "js",
    "KL_DIVERGENCE": "kl",
}
_DIST_WORDS = {
    "INF_NORM_DIST": "Infinity-norm distance",
    "TOTAL_VAR_DIST": "Total variation distance",
    "JS_DIVERGENCE": "Jensen–Shannon divergence (bits)",
    "KL_DIVERGENCE": "KL divergence (bits)",
}
LEVEL_TOKEN = {"model": "pred", "dataset": "label"}
_LEVEL_WORDS = {"model": "prediction", "dataset": "label"}


def encoding_distances(
    enc: Encoding,
    cfg: GroupMetricsConfig,
    levels: list[str],
    findings: list[Finding],
    warnings: list[str],
    benefits: dict[str, Benefit],
) -> EncodingDistances:
    """The distances of ``enc`` at every level; appends their findings
    (``<kl|js|tv|inf_norm>_<pred|label>.<encoding>``) and, with SKEWS among
    ``distance_benefit_metrics``, the benefit vector ``skews_<pred|label>`` to ``benefits``
    (representation ratios p̂/q̂; LiFT's raw skews with ``lift_compat``)."""
    m = enc.moments
    cats = m.categories
    compat = cfg.lift_compat
    out: dict[str, LevelDistances] = {}
    for lvl in levels:
        p = _masses(m, lvl)
        spec = cfg.reference.get(enc.name)
        share = p.sum(axis=0) / p.sum()
        q = reference_masses(
            spec, cats, share, where=f"methods.group_metrics.reference[{enc.name!r}]"
        )
        mask = np.ones_like(p, dtype=bool)
        if compat and lvl == "dataset":
            mask = m.n > 0  # LiFT: only observed (label, group) combinations exist
            if spec is None:
                q = np.where(mask, 1.0 / mask.sum(), 0.0)
        dd = distribution_distances(p[mask], q[mask], smoothing=cfg.smoothing, lift_compat=compat)
        out[lvl] = _level_distances(dd, p, q, mask, cats, cfg.distance_metrics)
        for name in SCALARS:
            if name not in cfg.distance_metrics:
                continue
            val = dd.scalar(name)
            findings.append(
                Finding(
                    key=f"{_DIST_TOKEN[name]}_{LEVEL_TOKEN[lvl]}.{enc.token}",
                    label=f"{_DIST_WORDS[name]} of the {_LEVEL_WORDS[lvl]} distribution from "
                    f"the {'user' if spec is not None else 'uniform'} reference, {enc.name}",
                    estimate=val,
                    reading=(
                        f"{_DIST_WORDS[name]} of the {_LEVEL_WORDS[lvl]} distribution over "
                        f"({enc.name}, outcome) from the "
                        f"{'user-supplied' if spec is not None else 'uniform'} reference: "
                        f"{val:.4g}."
                    ),
                )
            )
        if "SKEWS" in cfg.distance_benefit_metrics:
            sk = dd.skews
            values = sk if compat else np.exp(sk)  # representation ratio p̂/q̂ (≥ 0)
            labels = [f"{cats[g]}|{v}" for g, v in zip(*np.nonzero(mask), strict=True)]
            tag = f"skews_{LEVEL_TOKEN[lvl]}"
            benefits[tag] = benefit(tag, labels, values, cfg, enc, findings, warnings)
    return EncodingDistances(model=out.get("model"), dataset=out.get("dataset"))


def _masses(m: GroupLabelMoments, lvl: str) -> np.ndarray:
    """(G, 2) masses over (group, outcome): predictions (model) or labels (dataset)."""
    if lvl == "model":
        return m.counts.sum(axis=1)  # sum over labels -> [ŷ=0, ŷ=1]
    return m.w.copy()


def _level_distances(
    dd: DistributionDistances,
    p: np.ndarray,
    q: np.ndarray,
    mask: np.ndarray,
    cats: tuple[str, ...],
    names: list[str],
) -> LevelDistances:
    """The details of one level: the requested scalar distances and, with SKEWS, every
    observed category's masses and skew."""
    categories = None
    if "SKEWS" in names:
        sk = np.full(p.shape, np.nan)
        sk[mask] = dd.skews
        categories = tuple(
            SkewCategory(
                group=cats[g],
                outcome=v,
                observed=float(p[g, v]),
                reference=float(q[g, v]),
                skew=float(sk[g, v]),
            )
            for g in range(len(cats))
            for v in (0, 1)
            if mask[g, v]
        )

    def scalar(name: str) -> float | None:
        return dd.scalar(name) if name in names else None

    return LevelDistances(
        INF_NORM_DIST=scalar("INF_NORM_DIST"),
        TOTAL_VAR_DIST=scalar("TOTAL_VAR_DIST"),
        JS_DIVERGENCE=scalar("JS_DIVERGENCE"),
        KL_DIVERGENCE=scalar("KL_DIVERGENCE"),
        categories=categories,
    )
