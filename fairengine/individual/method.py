"""Audit entry point: :func:`run_individual_fairness` (method name ``individual_fairness``).

Pipeline (Maity, Xue, Yurochkin & Sun, ICLR 2021; notes ``individual.md`` §5):

1. wrap the model for gradients (``as_differentiable_model``; torch modules and sklearn
   LogisticRegression/MLPClassifier/Pipelines exactly, black boxes only when ``black_box`` is
   set) and encode the audit rows into the model's input space;
2. fit the fair metric on the audited rows (the paper) or on a held-out share of them;
3. run the gradient-flow attack on every audited row (:func:`~fairengine.individual.
   gradient_flow.gradient_flow`);
4. test the mean loss ratio (eq. 3.10) and the error-rate ratio (eq. 3.11-3.12) against δ.

Findings: ``individual.loss_ratio`` (S_n with its two-sided CI and the one-sided p-value of
H0: E[r] <= δ), ``individual.loss_ratio_lb`` (the paper's T_n), and the same two for
``individual.error_rate_ratio``. ``details`` holds the settings, metric provenance, per-row ratio
histogram, the top-k rows (original vs mapped features), T_n as a function of the number of
steps, displacement and per-group summaries; it stays small (no per-row arrays).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
import pandas as pd
import torch

from fairengine.dataset import AuditDataset
from fairengine.devices import resolve_device
from fairengine.errors import ConfigError, DataContractError, ModelLoadError
from fairengine.individual.attack import FlowResult, gradient_flow
from fairengine.individual.config import IndividualConfig
from fairengine.individual.fair_metric import (
    DiscountedDirectionsMetric,
    EXPLOREMetric,
    FACEMetric,
    FairMetricBase,
    MahalanobisMetric,
    SensitiveSubspaceMetric,
    SVDSensitiveSubspaceMetric,
    explore_pairs,
)
from fairengine.individual.ratio_tests import (
    ErrorRateRatioResult,
    LossRatioResult,
    error_rate_ratio_test,
    loss_ratio_test,
)
from fairengine.individual.result import (
    AttackRun,
    AttackSettings,
    DiscountedDirectionsProvenance,
    Displacement,
    DivergedAttackDetails,
    ErrorRateRatioSummary,
    EXPLOREProvenance,
    FACEProvenance,
    FloorDiagnostics,
    GroupRatio,
    IndividualFairnessDetails,
    LossRatioSummary,
    MahalanobisProvenance,
    MetricProvenance,
    ModelSummary,
    Quantiles,
    RatioHistogram,
    SensitiveSubspaceProvenance,
    StepBound,
    SVDProvenance,
    TopPoint,
)
from fairengine.individual.task_models import TASK_LOSSES, task_model
from fairengine.individual.torch_models import (
    ModelAdapter,
    as_differentiable_model,
    fit_surrogate,
)
from fairengine.results import Finding, Interval, MethodResult

__all__ = ["METHOD", "TITLE", "run_individual_fairness"]

METHOD = "individual_fairness"
TITLE = "Individual fairness: gradient-flow attack and loss-ratio test (Maity et al. 2021)"
PREFIX = "individual"


def _not_run(config: IndividualConfig, reason: str, start: float) -> MethodResult:
    return MethodResult(
        method=METHOD, title=TITLE, status="not_run", parameters=_parameters(config),
        reason=reason, seconds=time.perf_counter() - start,
    )  # fmt: skip


def _parameters(config: IndividualConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def run_individual_fairness(
    dataset: AuditDataset,
    config: IndividualConfig | None = None,
    *,
    seed: int = 0,
    model: Any = None,
) -> MethodResult:
    """Individual-fairness audit of ``model`` on ``dataset`` (see the module docstring).

    Returns status ``not_run`` when disabled or when there is no model. Raises
    :class:`~fairengine.errors.ModelLoadError` for a model without gradients when
    ``black_box`` is ``"none"``, :class:`~fairengine.errors.DataContractError` for missing or
    non-finite features and :class:`~fairengine.errors.ConfigError` for unusable metric
    parameters. A diverging attack gives status ``failed`` with the reason.
    """
    start = time.perf_counter()
    cfg = IndividualConfig() if config is None else config
    if not isinstance(cfg, IndividualConfig):
        raise ConfigError(f"config must be an IndividualConfig, got {type(cfg).__name__}")
    if not cfg.enabled:
        return _not_run(cfg, "disabled in the configuration", start)
    if model is None:
        return _not_run(
            cfg,
            "the individual-fairness test attacks the model itself and needs it (a torch module, "
            "a fitted scikit-learn model or an MLflow model); the audit has only scores",
            start,
        )
    if not isinstance(dataset, AuditDataset):
        raise DataContractError(f"dataset must be an AuditDataset, got {type(dataset).__name__}")
    device = resolve_device(cfg.device, "methods.individual_fairness.device")
    warnings: list[str] = []
    cols = list(dataset.feature_columns)
    if not cols:
        raise DataContractError("the dataset has no feature columns; the attack needs features")
    features = dataset.features
    missing = [c for c in cols if features[c].isna().any()]
    if missing:
        raise DataContractError(
            f"feature column(s) {missing} have missing values; the gradient-flow attack needs "
            "complete feature rows (impute or drop them first)"
        )
    protected_features = [a for a in dataset.roles.protected if a in cols]
    if protected_features:
        warnings.append(
            f"protected attribute(s) {protected_features} are also model features: the fair "
            "metric treats changing them as free (their encoded axes are added to the sensitive "
            "subspace), so the test asks whether outcomes change with them or their proxies"
        )
    if dataset.weights is not None:
        warnings.append("sample weights are ignored: the loss-ratio test is unweighted")

    task = dataset.task
    if task in TASK_LOSSES:  # regression (squared loss) or multiclass (cross-entropy)
        try:
            adapter = task_model(model, cols, task, dataset.classes)
        except ModelLoadError as exc:
            return _not_run(cfg, f"not applicable to this {task} model: {exc}", start)
    elif task == "binary":
        adapter = as_differentiable_model(
            model, cols, black_box=cfg.black_box, fd_step=cfg.fd_step,
            smoothing_sigma=cfg.smoothing_sigma, smoothing_samples=cfg.smoothing_samples,
            seed=seed, positive_label=dataset.positive_label,
        )  # fmt: skip
    else:
        return _not_run(cfg, f"not applicable to a {task} audit", start)
    if not adapter.exact:
        warnings.append(
            f"approximate attack: {adapter.description}. A weaker attack finds smaller loss "
            "increases, so the test is conservative (fewer rejections) rather than invalid"
        )

    rng = np.random.default_rng(seed)
    n_all = dataset.n_rows
    rows = np.arange(n_all)
    fit_rows = rows
    surrogate = cfg.black_box == "surrogate" and not adapter.exact
    if cfg.metric_fit == "holdout" or surrogate:
        perm = rng.permutation(n_all)
        n_fit = max(2, round(cfg.metric_fit_fraction * n_all))
        fit_rows, rows = np.sort(perm[:n_fit]), np.sort(perm[n_fit:])
    if cfg.max_rows is not None and rows.size > cfg.max_rows:
        rows = np.sort(rng.choice(rows, size=cfg.max_rows, replace=False))
        warnings.append(f"audited a random subset of {cfg.max_rows} of {n_all} rows (max_rows)")
    if rows.size < 2:
        raise DataContractError(f"the audit needs at least 2 rows; {rows.size} remain")

    X_all = adapter.encode(features)
    if X_all.shape[0] != n_all or not np.isfinite(X_all).all():
        raise DataContractError(
            "the encoded features are not finite (check for infinite values in the feature columns)"
        )
    if len(adapter.feature_names) != X_all.shape[1]:  # preprocessing without feature names
        names = [f"x{j}" for j in range(X_all.shape[1])]
        adapter.feature_names, adapter.source_columns, adapter.decode = names, names, None
    if task == "binary":
        ver = adapter.verify(features.iloc[rows[:2000]])
    else:  # predictions in the target's units: a tolerance relative to their size
        scale = max(1.0, float(np.abs(dataset.label).max())) if task == "regression" else 1.0
        try:
            ver = adapter.verify(features.iloc[rows[:2000]], atol=1e-6 * scale)
        except ModelLoadError as exc:
            return _not_run(cfg, f"not applicable to this {task} model: {exc}", start)
    y_all = dataset.label.astype(np.float64 if task == "regression" else np.int64)
    X, y = X_all[rows], y_all[rows]

    if surrogate:  # distil the black box on the held-out rows, never on the audited ones
        adapter.classifier = fit_surrogate(
            adapter.classifier, X_all[fit_rows], seed=seed, num_threads=cfg.num_threads
        )
        adapter.description = adapter.classifier.description
    metric_rows = fit_rows if cfg.metric_fit == "holdout" else rows
    metric = _fit_metric(
        cfg, dataset, adapter, X_all[metric_rows], y_all[metric_rows], metric_rows, seed
    )
    lower = upper = None
    groups = [(g.columns, g.full) for g in adapter.onehot_groups]
    if cfg.domain in ("box", "simplex"):
        lower, upper = X_all.min(axis=0), X_all.max(axis=0)
        for g in adapter.onehot_groups:
            lower[g.columns], upper[g.columns] = 0.0, 1.0
    mutable = None
    if cfg.immutable_features:
        unknown = [c for c in cfg.immutable_features if c not in cols]
        if unknown:
            raise ConfigError(
                f"methods.individual_fairness.immutable_features {unknown} are not feature "
                f"columns ({cols})"
            )
        mutable = np.array([s not in cfg.immutable_features for s in adapter.source_columns])
    record = np.unique(np.round(np.geomspace(1, cfg.steps, cfg.lb_path_points)).astype(int))
    flow = gradient_flow(
        adapter.classifier, X, y, metric, lam=cfg.lam, steps=cfg.steps, eta=cfg.eta,
        schedule=cfg.schedule, power=cfg.power, domain=cfg.domain, lower=lower, upper=upper,
        onehot_groups=groups, mutable_mask=mutable, record_steps=record.tolist(),
        chunk_rows=cfg.chunk_rows, device=device, num_threads=cfg.num_threads,
        dtype=torch.float32 if cfg.dtype == "float32" else torch.float64,
    )  # fmt: skip
    warnings.extend(flow.warnings)
    params = _parameters(cfg) | {
        "device": device, "device_requested": cfg.device, "seed": seed,
        "model": adapter.description,
    }  # fmt: skip
    if flow.n_diverged:
        return MethodResult(
            method=METHOD, title=TITLE, status="failed", parameters=params,
            reason=(
                f"the gradient-flow attack diverged for {flow.n_diverged} of {rows.size} rows "
                f"(eta={cfg.eta:g}, lambda={cfg.lam:g}, max eta*lambda*sigma_max="
                f"{flow.settings['max_eta_lambda_sigma']:.3g}; stability needs < 1): reduce "
                "methods.individual_fairness.eta or lam"
            ),
            warnings=warnings, details=DivergedAttackDetails(_attack_settings(flow.settings)),
            seconds=time.perf_counter() - start,
        )  # fmt: skip

    lrt = loss_ratio_test(
        flow.loss_original, flow.loss_mapped, delta=cfg.delta, alpha=cfg.alpha,
        eps=cfg.loss_floor, ddof=cfg.ddof,
    )  # fmt: skip
    p0, p1, e0, e1, flip_rate = _outputs(adapter, dataset, X, flow.X, y)
    ert = error_rate_ratio_test(e0, e1, delta=cfg.delta, alpha=cfg.alpha)
    error_test = cfg.error_rate_test and task != "regression"
    if lrt.diagnostics.get("heavy_tail"):
        warnings.append(
            f"the top 1% of rows carry {lrt.diagnostics['top1pct_share']:.0%} of the summed loss "
            "ratios: the normal approximation of the loss-ratio test is unreliable (heavy tail)"
        )
    if lrt.n_dropped:
        warnings.append(f"{lrt.n_dropped} non-finite loss ratio(s) were dropped")

    findings = _findings(cfg, lrt, ert if error_test else None, task)
    details = _details(
        cfg, dataset, adapter, metric, flow, lrt, ert, rows, X, y, p0, p1, e0, e1, ver, seed,
        flip_rate=flip_rate, error_test=error_test,
    )  # fmt: skip
    return MethodResult(
        method=METHOD, title=TITLE, status="ok", parameters=params, findings=findings,
        details=details, warnings=warnings, seconds=time.perf_counter() - start,
    )  # fmt: skip


def _proba(adapter: ModelAdapter, X: np.ndarray) -> np.ndarray:
    clf = adapter.classifier.to("cpu", torch.float64)
    return clf.proba(torch.as_tensor(X, dtype=torch.float64)).cpu().numpy()


def _outputs(
    adapter: ModelAdapter, dataset: AuditDataset, X: np.ndarray, X_mapped: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float | None]:
    """The model's output per row before and after the attack (P(y=1) of a binary model, the
    prediction of a regression model, the probability of the row's class of a multiclass
    model), the errors before and after (a binary model's decisions at the dataset's threshold,
    a multiclass model's predicted class, none for regression) and the share of rows whose
    decision or class the attack flips (None for regression)."""
    out0, out1 = _proba(adapter, X), _proba(adapter, X_mapped)
    if dataset.task == "regression":
        none = np.zeros(len(y), dtype=bool)
        return out0, out1, none, none.copy(), None
    if dataset.task == "multiclass":
        rows = np.arange(len(y))
        yhat0, yhat1 = out0.argmax(axis=1), out1.argmax(axis=1)
        return (
            out0[rows, y],
            out1[rows, y],
            yhat0 != y,
            yhat1 != y,
            float(np.mean(yhat0 != yhat1)),
        )
    threshold = 0.5 if dataset.threshold is None else float(dataset.threshold)
    yhat0, yhat1 = (out0 > threshold).astype(int), (out1 > threshold).astype(int)
    return out0, out1, yhat0 != y, yhat1 != y, float(np.mean((out0 > 0.5) != (out1 > 0.5)))


def _protected_codes(dataset: AuditDataset, rows: np.ndarray) -> np.ndarray:
    return np.column_stack([dataset.groups[a].codes[rows] for a in dataset.roles.protected])


def _fit_metric(
    cfg: IndividualConfig,
    dataset: AuditDataset,
    adapter: ModelAdapter,
    X: np.ndarray,
    y: np.ndarray,
    rows: np.ndarray,
    seed: int,
) -> FairMetricBase:
    """The configured fair metric, fitted in the encoded (model-input) space."""
    p = dict(cfg.metric_params)
    key = "methods.individual_fairness.metric_params"
    prot_axes = [
        j for j, s in enumerate(adapter.source_columns) if s in set(dataset.roles.protected)
    ]
    try:
        if cfg.metric in ("sensitive_subspace", "svd"):
            allowed = {"C", "penalty", "solver", "max_iter", "fit_intercept", "discount"}
            if cfg.metric == "svd":
                allowed |= {"n_components"}
            _check_keys(p, allowed, key)
            n_comp = p.pop("n_components", None)
            ss = SensitiveSubspaceMetric(protected_columns=prot_axes, **p).fit(
                X, _protected_codes(dataset, rows)
            )
            if cfg.metric == "sensitive_subspace":
                return ss
            k = n_comp if n_comp is not None else ss.basis_.shape[1]
            m = SVDSensitiveSubspaceMetric(n_components=k, discount=p.get("discount", 0.0))
            m.fit(ss.coef_)
            m.provenance_ |= {"source": "stacked logistic coefficient vectors and axes"}
            return m
        if cfg.metric == "face":
            _check_keys(p, {"group_column", "n_components", "discount"}, key)
            col = p.pop("group_column", None)
            if col is None or col not in dataset.frame.columns:
                raise ConfigError(
                    f"{key}.group_column must name a column of comparable-set ids for the FACE "
                    f"metric; got {col!r}"
                )
            return FACEMetric(**p).fit(X, dataset.frame[col].to_numpy()[rows])
        if cfg.metric == "explore":
            _check_keys(
                p, {"n_iter", "batch_size", "step", "init", "n_comparable", "n_incomparable"}, key
            )
            nc, ni = p.pop("n_comparable", 10000), p.pop("n_incomparable", 5000)
            a = dataset.groups[dataset.roles.protected[0]].codes[rows]
            x1, x2, lab = explore_pairs(
                X, a, y, n_comparable=nc, n_incomparable=ni, random_state=seed
            )
            return EXPLOREMetric(random_state=seed, **p).fit(x1, x2, lab)
        if cfg.metric == "mahalanobis":
            _check_keys(p, {"sigma"}, key)
            return MahalanobisMetric(p.get("sigma")).fit(X)
        _check_keys(p, {"directions", "discount"}, key)
        return DiscountedDirectionsMetric(p.get("directions"), p.get("discount", 0.0)).fit(X)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:  # DataContractError and sklearn's errors
        raise ConfigError(f"{key} for metric {cfg.metric!r}: {exc}") from None


def _check_keys(params: dict[str, Any], allowed: set[str], key: str) -> None:
    extra = sorted(set(params) - allowed)
    if extra:
        raise ConfigError(f"unknown {key} key(s) {extra}; allowed here: {sorted(allowed)}")


def _interval(res: LossRatioResult | ErrorRateRatioResult, level: float, what: str) -> Interval:
    lo, hi = res.confidence_interval(level)
    return Interval(lo, hi, level, f"normal (Maity et al. 2021 {what})")


def _findings(
    cfg: IndividualConfig,
    lrt: LossRatioResult,
    ert: ErrorRateRatioResult | None,
    task: str = "binary",
) -> list[Finding]:
    level = 1.0 - cfg.alpha
    d = cfg.delta
    out = [
        Finding(
            key=f"{PREFIX}.loss_ratio",
            label="Mean loss ratio under the gradient-flow attack"
            + ("" if task == "binary" else f" ({TASK_LOSS_NAMES[task]})"),
            estimate=lrt.statistic,
            interval=_interval(lrt, level, "eq. 3.6"),
            pvalue=lrt.pvalue if math.isfinite(lrt.pvalue) else None,
            null_hypothesis=f"E[loss(Φ(x))/loss(x)] <= {d:g} (individually fair to tolerance δ)",
            reading=_reading("loss", lrt, d, level),
        ),
        Finding(
            key=f"{PREFIX}.loss_ratio_lb",
            label=f"Loss-ratio test statistic T_n (one-sided {level:.0%} lower bound)",
            estimate=lrt.lower_bound,
            reading=f"reject fairness when T_n > δ = {d:g}",
        ),
    ]
    if ert is not None:
        out += [
            Finding(
                key=f"{PREFIX}.error_rate_ratio",
                label="Error-rate ratio under the gradient-flow attack",
                estimate=ert.statistic,
                interval=_interval(ert, level, "eq. 3.12, delta method"),
                pvalue=ert.pvalue if math.isfinite(ert.pvalue) else None,
                null_hypothesis=f"E[err(Φ(x))]/E[err(x)] <= {d:g}",
                reading=_reading("error", ert, d, level),
            ),
            Finding(
                key=f"{PREFIX}.error_rate_ratio_lb",
                label=f"Error-rate-ratio statistic (one-sided {level:.0%} lower bound)",
                estimate=ert.lower_bound,
                reading=f"reject fairness when the bound > δ = {d:g}",
            ),
        ]
    return out


def _reading(kind: str, res: Any, delta: float, level: float) -> str:
    if not math.isfinite(res.statistic):
        return f"not computable ({res.status.replace('_', ' ')}); no conclusion"
    if res.status == "zero_variance":
        return (
            f"every audited row gives the same {kind} ratio {res.statistic:.4g}; with no spread "
            "the normal test is not valid, so it is not tested (no conclusion)"
        )
    what = (
        "the loss of similar individuals rises on average by a factor"
        if kind == "loss"
        else "the error rate of similar individuals changes by a factor"
    )
    verdict = (
        f"above the tolerance {delta:g} (evidence of individual unfairness)"
        if res.reject
        else f"not shown to exceed the tolerance {delta:g}"
    )
    return (
        f"After the attack {what} of {res.statistic:.3g} (one-sided {level:.0%} lower bound "
        f"{res.lower_bound:.3g}): {verdict}."
    )


def _json_row(
    frame: pd.DataFrame | None, Z: np.ndarray, names: list[str]
) -> dict[str, str | float]:
    if frame is None:
        return {n: round(float(v), 6) for n, v in zip(names, Z, strict=True)}
    row = frame.iloc[0]
    out: dict[str, str | float] = {}
    for c, v in row.items():
        out[str(c)] = round(float(v), 6) if isinstance(v, int | float | np.number) else str(v)
    return out


def _attack_settings(settings: dict[str, Any]) -> AttackSettings:
    """The typed form of :attr:`FlowResult.settings <fairengine.individual.attack.FlowResult>`."""
    return AttackSettings(
        lam=settings["lambda"], steps=settings["steps"], eta=settings["eta"],
        schedule=settings["schedule"], power=settings["power"],
        flow_time=settings["flow_time"], domain=settings["domain"], device=settings["device"],
        dtype=settings["dtype"], sigma_max=settings["sigma_max"],
        max_eta_lambda_sigma=settings["max_eta_lambda_sigma"],
        n_mutable=settings["n_mutable"], n_features=settings["n_features"],
    )  # fmt: skip


def _metric_provenance(p: dict[str, Any], fit: str) -> MetricProvenance:
    """The typed form of a fitted metric's ``provenance_`` with how it was fitted (``fit``)."""
    kind = p["metric"]
    if kind == "sensitive_subspace":
        return SensitiveSubspaceProvenance(
            metric=kind, estimator=p["estimator"], n_fit_rows=p["n_fit_rows"],
            n_attributes=p["n_attributes"], protected_axes=tuple(p["protected_axes"]),
            rank=p["rank"], discount=p["discount"], converged=p["converged"], fit=fit,
        )  # fmt: skip
    if kind == "svd_sensitive_subspace":
        return SVDProvenance(
            metric=kind, n_components=p["n_components"], n_fit_rows=p["n_fit_rows"],
            explained_share=p["explained_share"], source=p["source"], fit=fit,
        )  # fmt: skip
    if kind == "face":
        return FACEProvenance(
            metric=kind, n_components=p["n_components"], n_fit_rows=p["n_fit_rows"],
            n_groups=p["n_groups"], explained_share=p["explained_share"], fit=fit,
        )  # fmt: skip
    if kind == "explore":
        return EXPLOREProvenance(
            metric=kind, n_pairs=p["n_pairs"], n_iter=p["n_iter"], batch_size=p["batch_size"],
            init=p["init"], seed=p["seed"], final_nll=p["final_nll"], fit=fit,
        )  # fmt: skip
    if kind == "mahalanobis":
        return MahalanobisProvenance(metric=kind, source=p["source"], fit=fit)
    if kind == "discounted_directions":
        return DiscountedDirectionsProvenance(
            metric=kind, n_directions=p["n_directions"], rank=p["rank"], discount=p["discount"],
            fit=fit,
        )  # fmt: skip
    raise ValueError(f"no provenance type for the fair metric {kind!r}")


def _details(
    cfg: IndividualConfig,
    dataset: AuditDataset,
    adapter: ModelAdapter,
    metric: FairMetricBase,
    flow: FlowResult,
    lrt: LossRatioResult,
    ert: ErrorRateRatioResult,
    rows: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    p0: np.ndarray,
    p1: np.ndarray,
    e0: np.ndarray,
    e1: np.ndarray,
    verification: float | None,
    seed: int,
    *,
    flip_rate: float | None = None,
    error_test: bool = True,
) -> IndividualFairnessDetails:
    eps = cfg.loss_floor
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (flow.loss_mapped + eps) / (flow.loss_original + eps)
    finite = np.isfinite(ratio)
    level = 1.0 - cfg.alpha

    # histogram of per-row ratios: linear bins up to the 99th percentile, plus an overflow count
    rf = ratio[finite]
    hist = None
    if rf.size:
        top = float(np.quantile(rf, 0.99))
        lo = float(rf.min())
        hi = top if top > lo else lo + 1e-9
        counts, edges = np.histogram(rf[rf <= hi], bins=cfg.histogram_bins, range=(lo, hi))
        hist = RatioHistogram(
            edges=tuple(float(e) for e in edges), counts=tuple(int(c) for c in counts),
            n_above=int((rf > hi).sum()),
        )  # fmt: skip

    # T_n as a function of the number of steps
    lb_path = []
    for k in sorted(flow.loss_path):
        res = loss_ratio_test(
            flow.loss_original, flow.loss_path[k], delta=cfg.delta, alpha=cfg.alpha, eps=eps,
            ddof=cfg.ddof,
        )  # fmt: skip
        lb_path.append(StepBound(
            step=int(k), flow_time=float(flow.step_sizes[:k].sum()),
            statistic=res.statistic, lower_bound=res.lower_bound,
        ))  # fmt: skip

    # top-k rows: original vs mapped (decoded to table columns when the encoder is known)
    top_rows = []
    order = np.argsort(np.where(finite, -ratio, np.inf))[: cfg.top_k]
    for i in order:
        dec0 = adapter.decode(X[i : i + 1]) if adapter.decode else None
        dec1 = adapter.decode(flow.X[i : i + 1]) if adapter.decode else None
        change = flow.X[i] - X[i]
        big = np.argsort(-np.abs(change))[:5]
        top_rows.append(TopPoint(
            row=int(rows[i]), label=_label(dataset, y[i]), ratio=float(ratio[i]),
            loss_original=float(flow.loss_original[i]),
            loss_mapped=float(flow.loss_mapped[i]),
            proba_original=float(p0[i]), proba_mapped=float(p1[i]),
            sq_fair_distance=float(flow.sq_dist[i]),
            original=_json_row(dec0, X[i], adapter.feature_names),
            mapped=_json_row(dec1, flow.X[i], adapter.feature_names),
            largest_changes={
                (adapter.feature_names[j] if j < len(adapter.feature_names) else str(j)):
                round(float(change[j]), 6) for j in big
            },
        ))  # fmt: skip

    disp = flow.X - X
    euclid = np.sqrt((disp**2).sum(axis=1))
    share = None
    if metric.low_rank_ is not None:
        q = metric.low_rank_[0]
        inside = ((disp @ q) ** 2).sum(axis=1)
        tot = (disp**2).sum(axis=1)
        share = float(inside.sum() / tot.sum()) if tot.sum() else 0.0
    moves = Displacement(
        sq_fair_distance=_quantiles(flow.sq_dist), euclidean=_quantiles(euclid),
        share_in_sensitive_subspace=share,
    )  # fmt: skip

    per_group: dict[str, tuple[GroupRatio, ...]] = {}
    for a in dataset.roles.protected:
        enc = dataset.groups[a]
        codes = enc.codes[rows]
        per_group[a] = tuple(
            GroupRatio(
                group=enc.categories[g], n=int((codes == g).sum()),
                mean_ratio=float(ratio[(codes == g) & finite].mean())
                if ((codes == g) & finite).any() else None,
                error_rate_original=float(e0[codes == g].mean())
                if (codes == g).any() and error_test else None,
                error_rate_mapped=float(e1[codes == g].mean())
                if (codes == g).any() and error_test else None,
            )
            for g in range(enc.n_groups)
        )  # fmt: skip

    def interval(res: LossRatioResult | ErrorRateRatioResult) -> tuple[float | None, float | None]:
        return res.confidence_interval(level) if math.isfinite(res.statistic) else (None, None)

    loss_lo, loss_hi = interval(lrt)
    loss = LossRatioSummary(
        statistic=lrt.statistic, standard_error=lrt.standard_error,
        lower_bound=lrt.lower_bound, pvalue=lrt.pvalue, ci_low=loss_lo, ci_high=loss_hi,
        n=lrt.n,
        status=lrt.status, reject_unadjusted=lrt.reject, n_dropped=lrt.n_dropped,
        floor=FloorDiagnostics(**lrt.diagnostics),
    )  # fmt: skip
    err_lo, err_hi = interval(ert)
    err = ErrorRateRatioSummary(
        statistic=ert.statistic, standard_error=ert.standard_error,
        lower_bound=ert.lower_bound, pvalue=ert.pvalue, ci_low=err_lo, ci_high=err_hi,
        n=ert.n,
        status=ert.status, reject_unadjusted=ert.reject,
        error_rate_original=ert.error_rate_original, error_rate_mapped=ert.error_rate_mapped,
        enabled=error_test,
    )  # fmt: skip
    settings = _attack_settings(flow.settings)
    return IndividualFairnessDetails(
        delta=cfg.delta,
        alpha=cfg.alpha,
        n_audited=int(rows.size),
        model=ModelSummary(
            kind=adapter.kind,
            description=adapter.description,
            exact=adapter.exact,
            max_abs_proba_difference=verification,
            n_encoded_features=X.shape[1],
        ),
        metric=_metric_provenance(metric.provenance_, cfg.metric_fit),
        attack=AttackRun(
            **{f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)},
            seconds=flow.seconds,
            seed=seed,
        ),
        loss_ratio=loss,
        error_rate_ratio=err,
        label_flip_rate=flip_rate,
        mean_loss_original=float(flow.loss_original.mean()),
        mean_loss_mapped=float(flow.loss_mapped.mean()),
        ratio_histogram=hist,
        lower_bound_by_steps=tuple(lb_path),
        top_points=tuple(top_rows),
        displacement=moves,
        per_group=per_group,
        task=dataset.task,
        loss=TASK_LOSS_NAMES[dataset.task],
        classes=tuple(dataset.classes),
    )


TASK_LOSS_NAMES = {
    "binary": "cross-entropy",
    "regression": "squared loss",
    "multiclass": "cross-entropy (softmax)",
}
"""The audit's loss on the model output, per task."""


def _label(dataset: AuditDataset, y: Any) -> int | float | str:
    """A row's label as the report shows it: 0/1, the target, or the class name."""
    if dataset.task == "regression":
        return float(y)
    if dataset.task == "multiclass":
        return dataset.classes[int(y)]
    return int(y)


def _quantiles(x: np.ndarray) -> Quantiles:
    qs = np.quantile(x, [0.0, 0.25, 0.5, 0.75, 0.95, 1.0])
    return Quantiles(
        mean=float(x.mean()), min=float(qs[0]), q25=float(qs[1]), median=float(qs[2]),
        q75=float(qs[3]), q95=float(qs[4]), max=float(qs[5]),
    )  # fmt: skip
