"""LiFT's group-metric suite on sufficient statistics: ``run_group_metrics``.

For each protected attribute and the intersection of all of them (``lift-semantics.md`` §1–3):

* distances of the prediction distribution (model level; expected counts without a threshold)
  and of the label distribution (dataset level) over (group, outcome) categories from a
  reference (UNIFORM or user-supplied): skews, infinity norm, total variation, JS and KL
  (:mod:`fairengine.distribution_distance`);
* demographic parity and equalized odds (TPR, FPR) for every pair of groups: signed and
  absolute gap with interval, ratio with interval, disparate-impact ratio and four-fifths flag
  (:func:`fairengine.group_parity.method.pair_comparisons`), plus the base-rate (label) parity
  of the data;
* performance per group with intervals: AUC (DeLong), precision, recall, TNR, FNR, FPR,
  accuracy (:mod:`fairengine.group_performance`), and user-defined metrics;
* aggregate inequality indices (GEI, Atkinson, Theil L/T, CV; :mod:`fairengine.inequality`) over
  benefit vectors built from the distance metrics and the performance metrics.

Everything except the exact AUC and custom metrics comes from one count table per (joint group,
label) built in a single pass over the rows (:mod:`fairengine.group_table`); the exact AUC adds
one sort of the scores shared by all attributes (``auc_bins`` makes it a histogram, O(n)).
``lift_compat=True`` reproduces LiFT's numbers (see ``docs/group_metrics.md`` for every
difference).
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from fairengine.counts import GroupLabelMoments
from fairengine.dataset import AuditDataset
from fairengine.delong import auc_interval
from fairengine.distribution_distance import (
    DistributionDistances,
    distribution_distances,
    reference_masses,
)
from fairengine.errors import ConfigError, DataContractError
from fairengine.finding_keys import intersection_token, key_token, pair_token, part_token
from fairengine.group_metrics.config import GroupMetricsConfig
from fairengine.group_parity.method import comparison_rows, pair_comparisons
from fairengine.group_parity.method import group_rates as parity_rates
from fairengine.group_performance import (
    GroupAUC,
    ScoreOrder,
    binned_score_blocks,
    exact_score_blocks,
    group_auc,
    group_rates,
    hard_prediction_blocks,
    score_order,
)
from fairengine.group_table import GroupTable
from fairengine.inequality import TOKENS, aggregate
from fairengine.intersection import SEPARATOR, intersect_groups
from fairengine.intervals import wald_interval, wilson_interval
from fairengine.rate_gap import rate_gaps, rate_ratios, round_half_up
from fairengine.results import Finding, Interval, MethodResult, gap_question
from fairengine.scores import LABEL_AUC_REASON

METHOD = "group_metrics"
TITLE = "Group metrics (LiFT suite)"
AUTO_AUC_BINS = 4096
"""Histogram bins of the AUC when `auc_bins` is null and the data exceeds `auc_exact_max_rows`."""
_SCALARS = ("INF_NORM_DIST", "TOTAL_VAR_DIST", "JS_DIVERGENCE", "KL_DIVERGENCE")
_DIST_TOKEN = {
    "INF_NORM_DIST": "inf_norm",
    "TOTAL_VAR_DIST": "tv",
    "JS_DIVERGENCE": "js",
    "KL_DIVERGENCE": "kl",
}
_LEVEL_TOKEN = {"model": "pred", "dataset": "label"}
MAX_BENEFIT_ENTRIES = 100
_RATE_KEYS = {"positive_rate": "dp", "tpr": "tpr", "fpr": "fpr", "base_rate": "base_rate"}


@dataclass
class _Encoding:
    name: str
    kind: str  # "attribute" | "intersection"
    moments: GroupLabelMoments
    codes: np.ndarray | None = None  # per-row group codes (only when needed)


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
    level = cfg.confidence_level
    compat = cfg.lift_compat
    attrs = list(dataset.roles.protected) if cfg.attributes is None else list(cfg.attributes)
    unknown = [a for a in attrs if a not in dataset.groups]
    if unknown or not attrs:
        raise DataContractError(
            f"methods.group_metrics.attributes {unknown or attrs} are not protected attributes "
            f"of the dataset ({list(dataset.groups)})"
        )
    warnings: list[str] = []
    has_scores = dataset.prediction is not None
    levels = [lv for lv in cfg.levels if lv == "dataset" or has_scores]
    if "model" in cfg.levels and not has_scores:
        warnings.append("no model scores: model-level metrics and performance were skipped")
    perf_names = cfg.performance_metrics if has_scores else []
    want_auc = "AUC" in perf_names or "AUC" in cfg.performance_benefit_metrics
    want_auc = want_auc and has_scores
    auc_not_applicable = want_auc and dataset.score_type == "label"
    if auc_not_applicable:  # hard labels rank nothing: no AUC findings, the reason recorded
        want_auc = False
        perf_names = [p for p in perf_names if p != "AUC"]
        warnings.append(f"AUC {LABEL_AUC_REASON}")
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
    encodings = [
        _Encoding(a, "attribute", table.moments(a), dataset.groups[a].codes) for a in attrs
    ]
    if cfg.intersection and len(attrs) >= 2:
        cells = table.members.shape[0]
        if cells > cfg.max_intersection_cells:
            raise DataContractError(
                f"the intersection of {attrs} has {cells} non-empty cells, more than "
                f"methods.group_metrics.max_intersection_cells={cfg.max_intersection_cells}; "
                "drop an attribute, merge small groups or raise the limit"
            )
        encodings.append(_Encoding(table.intersection_name, "intersection", table.moments(None)))
    need_rows = (want_auc and not binned and not (compat and hard)) or bool(cfg.custom_metrics)
    if need_rows:
        for e in encodings:
            if e.codes is None:
                e.codes = intersect_groups(
                    parts, max_cells=cfg.max_intersection_cells
                ).encoding.codes
    order = (
        score_order(dataset.probability, dataset.label, dataset.weights)  # type: ignore[arg-type]
        if want_auc and not binned and not (compat and hard)
        else None
    )
    customs = {k: load_custom_metric(v) for k, v in cfg.custom_metrics.items()}
    ref_unknown = [k for k in cfg.reference if k not in {e.name for e in encodings}]
    if ref_unknown:
        raise DataContractError(
            f"methods.group_metrics.reference names {ref_unknown}, which are not audited "
            f"attributes ({[e.name for e in encodings]})"
        )

    findings: list[Finding] = []
    details: dict[str, Any] = {
        "lift_compat": compat,
        "prediction": dataset.prediction_mode if has_scores else None,
        "threshold": dataset.threshold,
        "levels": levels,
        "auc": {
            "method": "binned" if binned else "exact",
            "bins": bins if binned else None,
            "score": "prediction" if compat else "probability",
        }
        if not auc_not_applicable
        else {"method": None, "applicable": False, "reason": LABEL_AUC_REASON},
        "encodings": {},
    }
    for enc in encodings:
        det, fnd = _audit_encoding(
            enc,
            dataset,
            cfg,
            table,
            levels,
            perf_names,
            want_auc,
            binned,
            order,
            customs,
            warnings,
        )
        details["encodings"][enc.name] = det
        findings += fnd
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
            "threshold": dataset.threshold,
            "prediction": dataset.prediction_mode if has_scores else None,
        },
        findings=findings,
        details=details,
        warnings=warnings,
        seconds=time.perf_counter() - start,
    )


# ------------------------------------------------------------------------------ per encoding
def _masses(m: GroupLabelMoments, lvl: str) -> np.ndarray:
    """(G, 2) masses over (group, outcome): predictions (model) or labels (dataset)."""
    if lvl == "model":
        return m.counts.sum(axis=1)  # sum over labels -> [ŷ=0, ŷ=1]
    return m.w.copy()


def _label_rates(m: GroupLabelMoments, level: float) -> dict[str, np.ndarray]:
    """Base rate P(y=1 | g) with its linearised variance and a Wilson/Wald interval."""
    tot = m.w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = m.w[:, 1] / tot
        var = ((1 - r) ** 2 * m.w2[:, 1] + r**2 * m.w2[:, 0]) / tot**2
    n = m.n.sum(axis=1)
    if not m.weighted:
        low, high = wilson_interval(m.n[:, 1], n, level)
    else:
        low, high = wald_interval(r, np.sqrt(var), level, (0.0, 1.0))
    return {"estimate": r, "variance": var, "n": n, "low": low, "high": high}


def _top_pairs(rows: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    if len(rows) <= k:
        return rows
    key = [(-r["abs_gap"] if np.isfinite(r["abs_gap"]) else math.inf) for r in rows]
    idx = np.argsort(key, kind="stable")[:k]
    return [rows[i] for i in sorted(idx.tolist())]


def _audit_encoding(
    enc: _Encoding,
    dataset: AuditDataset,
    cfg: GroupMetricsConfig,
    table: GroupTable,
    levels: list[str],
    perf_names: list[str],
    want_auc: bool,
    binned: bool,
    order: ScoreOrder | None,
    customs: dict[str, Callable[..., float]],
    warnings: list[str],
) -> tuple[dict[str, Any], list[Finding]]:
    m = enc.moments
    cats = m.categories
    g_n = len(cats)
    level = cfg.confidence_level
    compat = cfg.lift_compat
    tok = _name_token(enc, enc.name)
    findings: list[Finding] = []
    groups: list[dict[str, Any]] = [
        {"group": c, "n": int(m.n[i].sum()), "weight": float(m.w[i].sum())}
        for i, c in enumerate(cats)
    ]
    det: dict[str, Any] = {
        "kind": enc.kind,
        "groups": groups,
        "pairs": {},
        "distances": {},
        "benefits": {},
    }

    # ------------------------------------------------------------ rates and pairs
    base = _label_rates(m, level)
    for i, gr in enumerate(groups):
        gr["base_rate"] = _rate_entry(base, i, compat)
    pair_rows: dict[str, list[dict[str, Any]]] = {}
    if "dataset" in levels:
        pair_rows["base_rate"] = _base_rate_pairs(base, cats, level, compat, not m.weighted)
    if "model" in levels:
        prates = parity_rates(m, level)
        for i, gr in enumerate(groups):
            for name in ("positive_rate", "tpr", "fpr"):
                gr[name] = _rate_entry(prates[name], i, compat)
        pair_rows |= pair_comparisons(m, level, rates=prates, lift_compat=compat)
    for name, rows in pair_rows.items():
        det["pairs"][name] = _top_pairs(rows, cfg.max_pairs_reported)
        det["pairs"][f"{name}_count"] = len(rows)
        gap_key = "lift_gap" if compat else "abs_gap"
        vals = [r[gap_key] for r in rows if np.isfinite(r[gap_key])]
        if vals:
            worst = max(rows, key=lambda r: r[gap_key] if np.isfinite(r[gap_key]) else -1)
            findings.append(
                Finding(
                    key=f"{_RATE_KEYS[name]}_gap_max.{tok}",
                    label=f"Largest {_RATE_WORDS[name]} gap, {enc.name}",
                    estimate=float(max(vals)),
                    reading=(
                        f"The largest {_RATE_WORDS[name]} gap over {len(rows)} pair(s) of "
                        f"{enc.name} is {max(vals):.3f} ({worst['a']} vs {worst['b']})."
                    ),
                )
            )
    if "model" in levels and pair_rows.get("positive_rate"):
        _impact_finding(m, prates["positive_rate"], enc.name, tok, level, findings)

    # ------------------------------------------------------------ distances
    dist_names = cfg.distance_metrics
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
        det["distances"][lvl] = _distance_details(dd, p, q, mask, cats, dist_names)
        for name in _SCALARS:
            if name not in dist_names:
                continue
            val = dd.scalar(name)
            findings.append(
                Finding(
                    key=f"{_DIST_TOKEN[name]}_{_LEVEL_TOKEN[lvl]}.{tok}",
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
            benefit = sk if compat else np.exp(sk)  # representation ratio p̂/q̂ (≥ 0)
            labels = [f"{cats[g]}|{v}" for g, v in zip(*np.nonzero(mask), strict=True)]
            det["benefits"][f"skews_{_LEVEL_TOKEN[lvl]}"] = _benefit(
                f"skews_{_LEVEL_TOKEN[lvl]}",
                labels,
                benefit,
                cfg,
                enc,
                tok,
                findings,
                warnings,
                drop_nan=not compat,
            )

    # ------------------------------------------------------------ performance
    perf: dict[str, np.ndarray] = {}
    if perf_names or cfg.performance_benefit_metrics:
        perf_rates = (
            group_rates(m, level, lift_compat=compat) if "model" in levels or perf_names else {}
        )
        for name, gr_rate in perf_rates.items():
            if name not in perf_names and name not in cfg.performance_benefit_metrics:
                continue
            perf[name] = gr_rate.estimate
            for i, gr in enumerate(groups):
                gr.setdefault("performance", {})[name] = {
                    "estimate": float(gr_rate.estimate[i]),
                    "low": float(gr_rate.low[i]),
                    "high": float(gr_rate.high[i]),
                }
        if want_auc:
            gauc = _auc(enc, dataset, table, m, cfg, binned, order)
            perf["AUC"] = np.array([e.auc for e in gauc.estimates])
            _auc_outputs(gauc, enc, groups, cfg, tok, findings, warnings)
        for name, fn in customs.items():
            custom_vals = np.empty(g_n)
            for i in range(g_n):
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
            perf[name] = custom_vals
            for i, gr in enumerate(groups):
                gr.setdefault("performance", {})[name] = {"estimate": float(custom_vals[i])}

    # ------------------------------------------------------------ benefit vectors
    if "DEMOGRAPHIC_PARITY" in cfg.distance_benefit_metrics:
        for name, tag in (("positive_rate", "dp_pred"), ("base_rate", "dp_label")):
            dp_rows = pair_rows.get(name)
            if dp_rows:
                key = "lift_gap" if compat else "abs_gap"
                _store_benefit(
                    det,
                    tag,
                    [f"{r['a']}|{r['b']}" for r in dp_rows],
                    np.array([r[key] for r in dp_rows]),
                    cfg,
                    enc,
                    tok,
                    findings,
                    warnings,
                    compat,
                )
    if "EQUALIZED_ODDS" in cfg.distance_benefit_metrics and "model" in levels:
        eo_rows = [(n, r) for n in ("fpr", "tpr") for r in pair_rows.get(n, [])]
        if eo_rows:
            key = "lift_gap" if compat else "abs_gap"
            _store_benefit(
                det,
                "eo",
                [f"{r['a']}|{r['b']}|{n}" for n, r in eo_rows],
                np.array([r[key] for _, r in eo_rows]),
                cfg,
                enc,
                tok,
                findings,
                warnings,
                compat,
            )
    for name in cfg.performance_benefit_metrics:
        if name in perf:
            _store_benefit(
                det, name.lower(), list(cats), perf[name], cfg, enc, tok, findings, warnings, compat
            )
    return det, findings


def _name_token(enc: _Encoding, name: str) -> str:
    """Key token of an attribute or group name; for the intersection encoding, whose names join
    attribute (group) names with " & ", the tokens of the parts joined by ``_x_``."""
    if enc.kind == "intersection":
        return intersection_token(name.split(SEPARATOR))
    return key_token(name)


_RATE_WORDS = {
    "positive_rate": "positive-prediction-rate (demographic parity)",
    "tpr": "true-positive-rate",
    "fpr": "false-positive-rate",
    "base_rate": "label base-rate",
}
_DIST_WORDS = {
    "INF_NORM_DIST": "Infinity-norm distance",
    "TOTAL_VAR_DIST": "Total variation distance",
    "JS_DIVERGENCE": "Jensen–Shannon divergence (bits)",
    "KL_DIVERGENCE": "KL divergence (bits)",
}
_LEVEL_WORDS = {"model": "prediction", "dataset": "label"}


def _rate_entry(r: dict[str, np.ndarray], i: int, compat: bool) -> dict[str, float]:
    est = float(r["estimate"][i])
    out = {"estimate": est, "low": float(r["low"][i]), "high": float(r["high"][i])}
    if compat:
        out["lift"] = float(round_half_up(est))
    return out


def _base_rate_pairs(
    base: dict[str, np.ndarray],
    cats: tuple[str, ...],
    level: float,
    compat: bool,
    binomial: bool,
) -> list[dict[str, Any]]:
    """Label base-rate gaps; labels are 0/1, so unweighted data use Newcombe on the counts."""
    gaps = rate_gaps(
        base["estimate"],
        base["variance"],
        base["n"],
        tolerance=0.0,
        level=level,
        binomial=binomial,
    )
    return comparison_rows(cats, base, gaps, level, compat)


def _impact_finding(
    m: GroupLabelMoments,
    r: dict[str, np.ndarray],
    name: str,
    tok: str,
    level: float,
    findings: list[Finding],
) -> None:
    est = r["estimate"]
    if not np.any(np.isfinite(est)) or not np.nanmax(est) > 0:
        return
    lo_g, hi_g = int(np.nanargmin(est)), int(np.nanargmax(est))
    rr = rate_ratios(est[[lo_g, hi_g]], r["variance"][[lo_g, hi_g]], level=level)
    ratio = float(rr.estimate[0])
    cats = m.categories
    flag = ratio < 0.8
    findings.append(
        Finding(
            key=f"dp_impact.{tok}",
            label=f"Disparate-impact ratio (lowest/highest positive-prediction rate), {name}",
            estimate=ratio,
            interval=Interval(
                float(rr.low[0]),
                float(rr.high[0]),
                level,
                "log ratio (delta method), selected pair",
            ),
            reading=(
                f"{name}={cats[lo_g]} has {ratio:.0%} of the positive-prediction rate of "
                f"{name}={cats[hi_g]}: "
                + ("below the four-fifths (80 %) rule." if flag else "meets the four-fifths rule.")
            ),
        )
    )


def _distance_details(
    dd: DistributionDistances,
    p: np.ndarray,
    q: np.ndarray,
    mask: np.ndarray,
    cats: tuple[str, ...],
    names: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {n: dd.scalar(n) for n in _SCALARS if n in names}
    if "SKEWS" in names:
        sk = np.full(p.shape, np.nan)
        sk[mask] = dd.skews
        out["categories"] = [
            {
                "group": cats[g],
                "outcome": v,
                "observed": float(p[g, v]),
                "reference": float(q[g, v]),
                "skew": float(sk[g, v]),
            }
            for g in range(len(cats))
            for v in (0, 1)
            if mask[g, v]
        ]
    return out


def _auc(
    enc: _Encoding,
    dataset: AuditDataset,
    table: GroupTable,
    m: GroupLabelMoments,
    cfg: GroupMetricsConfig,
    binned: bool,
    order: ScoreOrder | None,
) -> GroupAUC:
    compat = cfg.lift_compat
    if compat and dataset.threshold is not None:
        return group_auc(hard_prediction_blocks(m), lift_compat=True)
    if binned:
        hw, hw2 = table.histogram(enc.name if enc.kind == "attribute" else None)
        return group_auc(binned_score_blocks(hw, hw2, m.n), lift_compat=compat)
    # the row codes were computed for this case (need_rows in run_group_metrics)
    assert enc.codes is not None
    blocks = exact_score_blocks(
        enc.codes,
        len(m.categories),
        dataset.label,
        dataset.probability,  # type: ignore[arg-type]
        dataset.weights,
        order,
    )
    return group_auc(blocks, lift_compat=compat)


def _auc_outputs(
    gauc: GroupAUC,
    enc: _Encoding,
    groups: list[dict[str, Any]],
    cfg: GroupMetricsConfig,
    tok: str,
    findings: list[Finding],
    warnings: list[str],
) -> None:
    level = cfg.confidence_level
    cats = enc.moments.categories
    for i, e in enumerate(gauc.estimates):
        ci = auc_interval(e.auc, e.se, level, cfg.auc_interval)
        groups[i].setdefault("performance", {})["AUC"] = {
            "estimate": e.auc,
            "low": ci.low,
            "high": ci.high,
            "se": e.se,
            "error_bound": float(gauc.error_bound[i]),
            "n_pos": e.n_pos,
            "n_neg": e.n_neg,
        }
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
                key=f"auc.{tok}.{_name_token(enc, cats[i])}",
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
        est = gauc.estimates
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
                        key=f"auc_gap.{tok}.{pair_token(cats[a], cats[b])}",
                        label=f"AUC gap, {enc.name}: {cats[a]} − {cats[b]}",
                        estimate=float(d),
                        interval=Interval(float(lo), float(hi), level, "delong wald")
                        if ok
                        else None,
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


def _benefit(
    tag: str,
    labels: list[str],
    values: np.ndarray,
    cfg: GroupMetricsConfig,
    enc: _Encoding,
    tok: str,
    findings: list[Finding],
    warnings: list[str],
    *,
    drop_nan: bool,
) -> dict[str, Any]:
    """Aggregate one benefit vector; returns its details entry and appends findings."""
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
                key=f"{TOKENS[name]}.{part_token(tag)}.{tok}",
                label=f"{name.replace('_', ' ').title()}{ptxt} of the {tag} benefit vector, "
                f"{enc.name}",
                estimate=val,
                reading=(
                    f"Inequality ({name.lower()}{ptxt}) of {tag} across {enc.name} "
                    f"({int(keep.sum())} entries): {val:.4g} (0 = all equal)."
                ),
            )
        )
    out: dict[str, Any] = {"n_entries": int(vals.size), "aggregates": aggs}
    if vals.size <= MAX_BENEFIT_ENTRIES:
        out["entries"] = dict(zip(labels, vals.tolist(), strict=True))
    else:  # keep the details small (pairs of a large intersection)
        fin = vals[np.isfinite(vals)]
        out["summary"] = {
            "min": float(fin.min()) if fin.size else math.nan,
            "max": float(fin.max()) if fin.size else math.nan,
            "mean": float(fin.mean()) if fin.size else math.nan,
        }
    return out


def _store_benefit(
    det: dict[str, Any],
    tag: str,
    labels: list[str],
    values: np.ndarray,
    cfg: GroupMetricsConfig,
    enc: _Encoding,
    tok: str,
    findings: list[Finding],
    warnings: list[str],
    compat: bool,
) -> None:
    det["benefits"][tag] = _benefit(
        tag, labels, values, cfg, enc, tok, findings, warnings, drop_nan=not compat
    )
