"""The mitigation step: fit RTDP variants on a calibration split, evaluate them on held-out data.

:func:`run_mitigation` encodes the intersections of ``methods.mitigation.attributes`` (binned by
``bins``), splits the rows stratified by (intersection, label) into a calibration (fitting) split
and a held-out split, fits every requested :class:`RTDPPostProcessor` variant at the target ε, and
evaluates each rule and the base classifier (threshold τ₀ on the audited score) on the held-out
split (:func:`fairengine.mitigation.evaluation.evaluate_rule`). It returns a
:class:`~fairengine.results.MethodResult` named ``mitigation`` whose findings are the held-out ε
before and after (the deployed variant) and the expected loss before and after, with intervals.
They are estimates, not tests: the audit's verdict is about the audited model; the report shows
whether the mitigated rule meets the target (one-sided upper bound ≤ ε, and the point estimate).
Its details are a :class:`~fairengine.mitigation.result.DeployedMitigation`
(:class:`~fairengine.mitigation.result.MitigationDetails` when the deployed variant could not be
fitted): ``registration`` says whether ``register_if`` allows registering the deployed rule
(:func:`fairengine.mitigation.registration.registration_decision`); ``postprocessor`` holds the
deployed rule as plain data (:class:`~fairengine.mitigation.result.DeployedRule`: attributes,
levels, bins, thresholds, p, q), from which :mod:`tasks.mitigated_model` builds the MLflow pyfunc
model.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, TypedDict

import numpy as np

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.intersectional.cells import MAX_LEVELS, check_levels
from fairengine.intersectional.method import intersection_codes
from fairengine.mitigation.comparison import compare_row, fairlearn_probabilities
from fairengine.mitigation.config import WHERE, MitigationConfig
from fairengine.mitigation.evaluation import RuleEvaluation, evaluate_rule, rule_cells
from fairengine.mitigation.lp import MitigationError
from fairengine.mitigation.postprocessor import MitigationInfeasible, RTDPPostProcessor
from fairengine.mitigation.rates import CONSTRAINT_RATES, support_mask
from fairengine.mitigation.registration import registration_decision, target_met_level
from fairengine.mitigation.result import (
    BaseEvaluation,
    Comparison,
    DeployedMitigation,
    DeployedRule,
    IntersectionRow,
    MitigationDetails,
    RateChange,
    Split,
    VariantFailure,
    VariantFit,
)
from fairengine.mitigation.split import stratified_split
from fairengine.results import Finding, Interval, MethodResult

METHOD = "mitigation"
TITLE = "Mitigation: randomised thresholding post-processor (RTDP) to an ε target"
VARIANT_TITLES = {
    "randomization_only": "randomisation only (base threshold, LP over flip probabilities)",
    "thresholds_only": "deterministic thresholds only (window sweep)",
    "sequential": "sequential (thresholds, then LP)",
    "overall": "overall (threshold search with the LP inside)",
}
#: Per-intersection rows are kept in ``details`` up to this many intersections.
DETAILS_MAX_INTERSECTIONS = 200


class _RuleOptions(TypedDict):
    """The keyword arguments of :func:`evaluate_rule` that come from the config."""

    metrics: list[str]
    outcomes: str
    alpha: float
    beta: float
    cost_fp: float
    cost_fn: float
    min_support: int
    exclude_sparse: bool
    target: float | None
    n_draws: int
    n_realised: int
    confidence_level: float


class _CompareOptions(TypedDict):
    """The keyword arguments of :func:`compare_row` that come from the config."""

    cost_fp: float
    cost_fn: float
    alpha: float
    beta: float
    outcomes: str


def encode_intersections(
    dataset: AuditDataset, cfg: MitigationConfig
) -> tuple[list[str], list[tuple[str, ...]], np.ndarray, tuple[int, ...]]:
    """Attributes, levels, flat intersection id per row, and the grid shape."""
    attrs, levels, codes = intersection_codes(dataset, cfg.attributes, cfg.bins, WHERE)
    shape = tuple(len(lv) for lv in levels)
    check_levels(attrs, list(shape), max_levels=MAX_LEVELS, max_intersections=cfg.max_intersections)
    flat = np.ravel_multi_index([c.astype(np.intp) for c in codes], shape)
    return attrs, levels, np.asarray(flat, dtype=np.intp), shape


def rule_text(tau: float, p: float, q: float) -> str:
    """The rule of one intersection in plain words."""

    def chance(x: float) -> str:
        if x >= 1 - 1e-9:
            return "always positive"
        if x <= 1e-9:
            return "always negative"
        return f"positive with probability {x:.3f}"

    if tau < 0:
        return f"every score: {chance(q)}"
    if tau >= 1:
        return f"every score: {chance(p)}"
    return f"score > {tau:.3f}: {chance(q)}; otherwise: {chance(p)}"


def run_mitigation(
    dataset: AuditDataset, config: MitigationConfig | None = None, *, seed: int = 0
) -> MethodResult:
    """Fit and evaluate the RTDP variants (module docstring)."""
    start = time.perf_counter()
    cfg = MitigationConfig() if config is None else config
    score = dataset.require_scores("mitigation")
    if dataset.probability is not None:
        score = dataset.probability
    score = np.asarray(score, dtype=np.float64)
    y = np.asarray(dataset.label, dtype=np.intp)
    weights = dataset.weights
    attrs, levels, groups, shape = encode_intersections(dataset, cfg)
    k = int(np.prod(shape))
    names = [" × ".join(levels[j][c] for j, c in enumerate(t)) for t in np.ndindex(*shape)]
    tau0 = (
        float(dataset.threshold)
        if dataset.threshold is not None
        else cfg.cost_fp / (cfg.cost_fp + cfg.cost_fn)
    )
    warnings: list[str] = []
    if dataset.threshold is None:
        warnings.append(
            f"the audit has no threshold (expected counts); the base classifier for the "
            f"comparison thresholds the score at the cost-optimal {tau0:.3g}"
        )
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
    fit_idx, test_idx = stratified_split(2 * groups + y, cfg.test_size, rng)
    sizes_fit = np.bincount(groups[fit_idx], minlength=k)
    sizes_test = np.bincount(groups[test_idx], minlength=k)
    thin = [names[s] for s in range(k) if 0 < min(sizes_fit[s], sizes_test[s]) < cfg.min_support]
    if thin:
        warnings.append(
            f"{len(thin)} intersection(s) have fewer than min_support={cfg.min_support} rows in "
            f"a split (e.g. {', '.join(thin[:3])}); their held-out rates are uncertain"
        )

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        return groups[idx], y[idx], score[idx], None if weights is None else weights[idx]

    common = _RuleOptions(
        metrics=list(cfg.constraints),
        outcomes=cfg.outcomes,
        alpha=cfg.smoothing_alpha,
        beta=cfg.smoothing_beta,
        cost_fp=cfg.cost_fp,
        cost_fn=cfg.cost_fn,
        min_support=cfg.min_support,
        exclude_sparse=cfg.exclude_sparse,
        target=cfg.epsilon,
        n_draws=cfg.n_posterior,
        n_realised=cfg.n_realised if weights is None else 0,
        confidence_level=cfg.confidence_level,
    )

    # ε is evaluated over the intersections the rule constrains (support on the fitting split)
    fit_rows = np.stack(
        [np.bincount(groups[fit_idx][y[fit_idx] == v], minlength=k) for v in (0, 1)], axis=1
    )
    constrained = {
        r: support_mask(r, fit_rows, min_support=cfg.min_support, exclude_sparse=cfg.exclude_sparse)
        for m in cfg.constraints
        for r in CONSTRAINT_RATES[m]
    }

    def evaluate(tau: np.ndarray, p: np.ndarray, q: np.ndarray, idx: np.ndarray) -> RuleEvaluation:
        g, yy, f, w = rows(idx)
        cells, counts = rule_cells(g, yy, f, tau, w)
        return evaluate_rule(
            cells,
            counts,
            p,
            q,
            rng=np.random.default_rng(np.random.SeedSequence([seed, 11])),
            constrained=constrained,
            **common,
        )

    ones, zeros = np.ones(k), np.zeros(k)
    base_tau = np.full(k, tau0)
    base_test = evaluate(base_tau, zeros, ones, test_idx)
    base_fit = evaluate(base_tau, zeros, ones, fit_idx)

    variants: list[VariantFit | VariantFailure] = []
    fitted: dict[str, RTDPPostProcessor] = {}
    for variant in cfg.variants:
        t0 = time.perf_counter()
        post = cfg.postprocessor(variant, base_threshold=tau0, seed=seed)
        title = VARIANT_TITLES[variant]
        try:
            g, yy, f, w = rows(fit_idx)
            post.fit(g, yy, f, w, grid_shape=shape)
        except MitigationInfeasible as exc:
            variants.append(VariantFailure(variant, title, "infeasible", str(exc)))
            continue
        except MitigationError as exc:
            variants.append(VariantFailure(variant, title, "failed", str(exc)))
            continue
        fitted[variant] = post
        test = evaluate(post.thresholds_, post.p_, post.q_, test_idx)
        level = target_met_level(test.epsilon, cfg.epsilon)
        variants.append(
            VariantFit(
                variant=variant,
                title=title,
                status="ok",
                fit_loss=post.fit_loss_,
                fit_epsilon=dict(post.fit_epsilon_),
                test=test.record(),
                meets_target=level == "upper_bound",
                point_meets_target=level != "no",
                n_lp_solves=post.n_lp_solves_,
                sweeps=post.sweeps_,
                lp_max_violation=post.lp_max_violation_,
                thresholds_feasible=post.thresholds_feasible_,
                seconds=round(time.perf_counter() - t0, 4),
                warnings=tuple(post.warnings_),
            )
        )

    deployed = fitted.get(cfg.deploy)
    if deployed is None:
        why = next(
            (
                v.reason
                for v in variants
                if isinstance(v, VariantFailure) and v.variant == cfg.deploy
            ),
            "",
        )
        return MethodResult(
            METHOD,
            TITLE,
            status="failed",
            reason=f"the deployed variant {cfg.deploy!r} could not be fitted: {why}",
            parameters=_parameters(cfg),
            details=MitigationDetails(
                variants=tuple(variants), base=BaseEvaluation(test=base_test.record())
            ),
            warnings=warnings,
            seconds=round(time.perf_counter() - start, 4),
        )
    after = evaluate(deployed.thresholds_, deployed.p_, deployed.q_, test_idx)
    comparison = _fairlearn_comparison(
        cfg, dataset, attrs, levels, groups, y, score, fit_idx, test_idx, tau0, seed, warnings
    )
    findings = _findings(cfg, base_test, after)
    intersections = None
    if k <= DETAILS_MAX_INTERSECTIONS:
        intersections = _intersection_rows(deployed, names, sizes_fit, sizes_test, base_test, after)
    else:
        warnings.append(
            f"{k} intersections: the per-intersection table is omitted from the report "
            f"(over {DETAILS_MAX_INTERSECTIONS}); the rule is in details.postprocessor"
        )
    levels_out = tuple(tuple(lv) for lv in levels)
    bins_out = {a: tuple(e) for a, e in cfg.bins.items()}
    details = DeployedMitigation(
        attributes=tuple(attrs),
        levels=levels_out,
        bins=bins_out,
        grid_shape=tuple(shape),
        constraints=tuple(cfg.constraints),
        target_epsilon=cfg.epsilon,
        base_threshold=tau0,
        split=Split(
            fit_rows=int(fit_idx.size),
            test_rows=int(test_idx.size),
            test_size=cfg.test_size,
            stratified_by="intersection × label",
        ),
        base=BaseEvaluation(fit=base_fit.record(), test=base_test.record()),
        after=after.record(),
        # whether register_if allows registering this rule (fairengine.mitigation.registration)
        registration=registration_decision(
            after.epsilon, cfg.epsilon, cfg.register_if, cfg.confidence_level
        ),
        variants=tuple(dataclasses.replace(v, deployed=v.variant == cfg.deploy) for v in variants),
        deploy=cfg.deploy,
        comparison=comparison,
        postprocessor=_deployed_rule(deployed, attrs, levels_out, bins_out, dataset.score_type),
        intersections=intersections,
    )
    warnings += list(deployed.warnings_)
    return MethodResult(
        METHOD,
        TITLE,
        parameters=_parameters(cfg),
        findings=findings,
        details=details,
        warnings=warnings,
        seconds=round(time.perf_counter() - start, 4),
    )


def _deployed_rule(
    post: RTDPPostProcessor,
    attrs: list[str],
    levels: tuple[tuple[str, ...], ...],
    bins: dict[str, tuple[float, ...]],
    score_type: str,
) -> DeployedRule:
    """The fitted rule as plain data (:meth:`RTDPPostProcessor.rules` and the intersections)."""
    return DeployedRule(
        thresholds=tuple(post.thresholds_.tolist()),
        p=tuple(post.p_.tolist()),
        q=tuple(post.q_.tolist()),
        grid_shape=tuple(int(n) for n in post.grid_shape_),
        seen=tuple(post.seen_.tolist()),
        source=tuple(post.source_.tolist()),
        global_source=post.global_source_,
        constraints=tuple(post.constraints),
        epsilon=post.epsilon,
        variant=post.variant,
        outcomes=post.outcomes,
        attributes=tuple(attrs),
        levels=levels,
        bins=bins,
        score_type=score_type,
    )


def _parameters(cfg: MitigationConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def _findings(
    cfg: MitigationConfig, before: RuleEvaluation, after: RuleEvaluation
) -> list[Finding]:
    level = cfg.confidence_level
    out: list[Finding] = []
    for m in cfg.constraints:
        b, a = before.epsilon[m], after.epsilon[m]
        met = target_met_level({m: a}, cfg.epsilon)
        out.append(
            Finding(
                key=f"mitigation.eps_before.{m}",
                label=f"held-out ε ({m}), audited model",
                estimate=b.estimate,
                interval=Interval(b.low, b.high, level, "beta-posterior"),
                reading=f"before mitigation ε_{m} = {b.estimate:.3f} on held-out data",
            )
        )
        verdict = (
            "meets the target (upper bound below it)"
            if met == "upper_bound"
            else (
                "point estimate meets the target, but the upper bound does not"
                if met == "point"
                else "does NOT meet the target on held-out data"
            )
        )
        out.append(
            Finding(
                key=f"mitigation.eps_after.{m}",
                label=f"held-out ε ({m}), mitigated ({cfg.deploy})",
                estimate=a.estimate,
                interval=Interval(a.low, a.high, level, "beta-posterior"),
                reading=(
                    f"after mitigation ε_{m} = {a.estimate:.3f}, {level:.0%} upper bound "
                    f"{a.upper_bound:.3f}, target {cfg.epsilon:g}: {verdict}"
                ),
            )
        )
    for key, ev, who in (
        ("loss_before", before, "audited model"),
        ("loss_after", after, "mitigated"),
    ):
        out.append(
            Finding(
                key=f"mitigation.{key}",
                label=f"held-out expected cost, {who}",
                estimate=ev.loss.estimate,
                interval=Interval(ev.loss.low, ev.loss.high, level, "normal"),
                reading=f"expected cost per row {ev.loss.estimate:.4f} ({who})",
            )
        )
    return out


def _intersection_rows(
    post: RTDPPostProcessor,
    names: list[str],
    sizes_fit: np.ndarray,
    sizes_test: np.ndarray,
    before: RuleEvaluation,
    after: RuleEvaluation,
) -> tuple[IntersectionRow, ...]:
    rates = sorted({r for m in post.constraints for r in CONSTRAINT_RATES[m]})
    out = []
    for s, name in enumerate(names):
        tau, p, q = float(post.thresholds_[s]), float(post.p_[s]), float(post.q_[s])
        out.append(
            IntersectionRow(
                intersection=name,
                n_fit=int(sizes_fit[s]),
                n_test=int(sizes_test[s]),
                threshold=tau,
                p=p,
                q=q,
                rule=rule_text(tau, p, q),
                fallback_from=None if post.seen_[s] else names[int(post.source_[s])],
                binding=tuple(sorted({str(b[s]) for b in post.binding_.values() if b[s]})),
                rates={
                    r: RateChange(_num(before.group_rates[r][s]), _num(after.group_rates[r][s]))
                    for r in rates
                },
            )
        )
    return tuple(out)


def _num(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def _fairlearn_comparison(
    cfg: MitigationConfig,
    dataset: AuditDataset,
    attrs: list[str],
    levels: list[tuple[str, ...]],
    groups: np.ndarray,
    y: np.ndarray,
    score: np.ndarray,
    fit_idx: np.ndarray,
    test_idx: np.ndarray,
    tau0: float,
    seed: int,
    warnings: list[str],
) -> Comparison | None:
    """Loss and ε on one attribute: base, RTDP at ε and at 0, fairlearn ThresholdOptimizer."""
    if not cfg.compare_fairlearn:
        return None
    attribute = cfg.compare_attribute or attrs[0]
    if attribute not in attrs:
        raise DataContractError(
            f"{WHERE}.compare_attribute {attribute!r} is not one of the mitigation attributes "
            f"{attrs}"
        )
    if cfg.cost_fp != cfg.cost_fn:
        warnings.append(
            "fairlearn comparison skipped: ThresholdOptimizer has no cost-weighted objective "
            "(cost_fp != cost_fn)"
        )
        return None
    j = attrs.index(attribute)
    shape = tuple(len(lv) for lv in levels)
    codes = np.unravel_index(groups, shape)[j].astype(np.intp)
    lv = levels[j]
    labels = np.asarray(lv, dtype=object)[codes]
    metrics = list(cfg.constraints)
    kw = _CompareOptions(
        cost_fp=cfg.cost_fp,
        cost_fn=cfg.cost_fn,
        alpha=cfg.smoothing_alpha,
        beta=cfg.smoothing_beta,
        outcomes=cfg.outcomes,
    )
    yt, ct = y[test_idx], codes[test_idx]
    rows = [
        compare_row(
            f"audited model (threshold {tau0:g})",
            (score[test_idx] > tau0).astype(float),
            yt,
            ct,
            lv,
            attribute,
            metrics,
            **kw,
        )
    ]
    for eps in (cfg.epsilon, 0.0):
        post = cfg.postprocessor(cfg.deploy, base_threshold=tau0, seed=seed, epsilon=eps)
        post.fit(codes[fit_idx], y[fit_idx], score[fit_idx], grid_shape=(len(lv),))
        pi = post.predict_proba(ct, score[test_idx])
        rows.append(
            compare_row(f"RTDP {cfg.deploy}, ε = {eps:g}", pi, yt, ct, lv, attribute, metrics, **kw)
        )
    if len(metrics) > 1:
        warnings.append("fairlearn comparison uses only the first constraint (one at a time)")
    try:
        pi = fairlearn_probabilities(
            metrics[0],
            (labels[fit_idx], y[fit_idx], score[fit_idx]),
            (labels[test_idx], score[test_idx]),
            seed,
        )
    except ImportError:
        warnings.append("fairlearn comparison skipped: fairlearn is not installed")
        return Comparison(attribute, tuple(rows), None)
    except Exception as exc:  # fairlearn's own failure: reported, not fatal
        warnings.append(f"fairlearn ThresholdOptimizer failed: {type(exc).__name__}: {exc}")
        return Comparison(attribute, tuple(rows), None)
    rows.append(
        compare_row(
            f"fairlearn ThresholdOptimizer ({metrics[0]}, exact parity)",
            pi,
            yt,
            ct,
            lv,
            attribute,
            metrics,
            **kw,
        )
    )
    return Comparison(attribute, tuple(rows), metrics[0])
