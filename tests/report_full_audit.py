"""A full every-method audit result for the report's browser test and render benchmark.

Builds the :class:`~fairengine.results.AuditResult` an audit of the demo's setting would give,
by calling the methods' pure functions (no Prefect, no MLflow): Lipton et al.'s synthetic hiring
data (:func:`fairengine.datasets.make_lipton_hiring`, the demo's data) with a second protected
attribute, an age band derived from work experience with noise (levels ``<30``, ``30-50``,
``>50``: markup-like characters the report must escape), audited for a logistic regression.

Every method of the audit (:data:`fairengine.registry.BUILT_IN`: group parity, the LiFT
group-metric suite, permutation tests, intersectional differential fairness, FlipTest, the
individual-fairness test, mitigation) runs and succeeds; a method added there without a runner
here makes :func:`build_full_audit` raise, so "every method" stays true. Two more entries
exercise the other statuses, produced by the real code paths: a *failed* individual-fairness
test of a black-box copy of the model (the :class:`~fairengine.errors.ModelLoadError` message,
recorded as :func:`flows.method_steps.run_methods` records a raised error) and a *not run*
FlipTest without a model function (as in an audit of scores from a data column). Data
validation runs the real Great Expectations suite (:func:`tasks.validate.validate_frame`);
metadata carries package versions, the seed and the measured step timings, in the shape the
audit flow writes.

``scale="small"`` keeps resampling counts low (seconds, for the browser test); ``"full"`` uses
the demo's sizes (5,000 rows per group) and default-sized resampling where affordable.

Regenerate the JSON form with ``.venv/bin/python benchmarks/report_render.py --write-json PATH``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.datasets import make_lipton_hiring
from fairengine.fliptest import run_fliptest
from fairengine.group_metrics import run_group_metrics
from fairengine.group_parity import group_parity
from fairengine.individual import run_individual_fairness
from fairengine.intersectional import run_intersectional
from fairengine.permutation import run_permutation_tests
from fairengine.registry import built_in_for, method_spec
from fairengine.results import AuditResult, MethodResult
from fairengine.roles import ColumnRoles
from fairengine.subgroup_scan.method import run_subgroup_scan
from fairengine.verdict import finalize_audit

BUILT_IN = built_in_for("binary")  # the methods of a binary audit

AGE_COLUMN = "age_band"
AGE_LEVELS = ("<30", "30-50", ">50")
FEATURES = ("work_exp", "hair_len")
SCALES: dict[str, dict[str, Any]] = {
    "small": {
        "n_per_group": 600,
        "methods": {
            "group_parity": {"tolerance": 0.05},
            "group_metrics": {},
            "permutation_tests": {"n_permutations": 199},
            "intersectional": {"n_bootstrap": 200, "n_posterior": 400},
            "fliptest": {
                "enabled": True,
                "attributes": ["gender"],
                "max_per_group": 300,
                "n_permutations": 4,
                "n_selfmap": 4,
                "n_bootstrap": 4,
            },
            "individual_fairness": {"steps": 40, "max_rows": 400, "lb_path_points": 6},
            "mitigation": {
                "enabled": True,
                "n_posterior": 400,
                "n_realised": 50,
                "compare_fairlearn": False,
            },
        },
    },
    "full": {
        "n_per_group": 5000,
        "methods": {
            "group_parity": {"tolerance": 0.05},
            "group_metrics": {},
            "permutation_tests": {"n_permutations": 1999},
            "intersectional": {"n_bootstrap": 2000, "n_posterior": 4000},
            "fliptest": {
                "enabled": True,
                "max_per_group": 1000,
                "n_permutations": 39,
                "n_selfmap": 19,
                "n_bootstrap": 19,
            },
            "individual_fairness": {"steps": 200, "max_rows": 2000},
            "mitigation": {"enabled": True},
        },
    },
}
"""Data size and method parameters per scale (``full`` follows the demo's audit.yaml)."""


class _BlackBox:
    """A model offering only ``predict_proba`` (no gradients, not a known sklearn class)."""

    def __init__(self, model: LogisticRegression) -> None:
        self._model = model

    def predict_proba(self, X: Any) -> np.ndarray:
        return self._model.predict_proba(X)


def hiring_frame(n_per_group: int, seed: int) -> pd.DataFrame:
    """The demo's hiring data plus ``age_band``: work experience (z-scored) plus N(0, 0.8²)
    noise, cut at its 40% and 80% quantiles into ``<30``, ``30-50``, ``>50``."""
    frame = make_lipton_hiring(n_per_group=n_per_group, seed=seed).frame.copy()
    rng = np.random.default_rng(seed + 17)
    latent = frame["work_exp"].to_numpy() + rng.normal(0.0, 0.8, len(frame))
    cuts = np.quantile(latent, [0.4, 0.8])
    frame[AGE_COLUMN] = np.asarray(AGE_LEVELS, dtype=object)[np.searchsorted(cuts, latent)]
    return frame


def audit_config(scale: str, seed: int) -> AuditConfig:
    """The resolved audit configuration of this audit (every method enabled)."""
    spec = SCALES[scale]
    return AuditConfig.from_dict(
        {
            "name": f"report-full-{scale}",
            "data": {"embedded": "lipton_hiring", "params": {"n_per_group": spec["n_per_group"]}},
            "columns": {
                "label": "hired",
                "protected": ["gender", AGE_COLUMN],
                "features": list(FEATURES),
            },
            "model": {"uri": "models:/fairengine-demo-hiring/1"},
            "score_type": "probability",
            "threshold": 0.5,
            "validation": {"min_group_size": 30},
            "methods": spec["methods"],
            "mlflow": {"enabled": False},
            "alpha": 0.05,
            "multiplicity": "holm",
            "seed": seed,
        }
    )


def _timed(timings: dict[str, float], step: str, fn: Callable[..., Any], *args: Any, **kw: Any):
    start = time.perf_counter()
    try:
        return fn(*args, **kw)
    finally:
        timings[step] = round(time.perf_counter() - start, 4)


def _mitigation(ds: AuditDataset, methods: Any, seed: int) -> MethodResult:
    """The RTDP mitigation step (imported here: it is the newest method)."""
    from fairengine.mitigation import run_mitigation

    return run_mitigation(ds, methods.mitigation, seed=seed)


def _failed(name: str, title: str, fn: Callable[[], MethodResult]) -> MethodResult:
    """Run ``fn``; a raised error becomes a ``failed`` result as the audit flow records it."""
    try:
        return fn()
    except Exception as exc:
        return MethodResult(name, title, status="failed", reason=f"{type(exc).__name__}: {exc}")


def build_full_audit(
    scale: Literal["small", "full"] = "small",
    seed: int = 0,
    *,
    validate: bool = True,
) -> AuditResult:
    """Run every method on the hiring data and assemble the audit (module docstring).

    ``validate=False`` skips Great Expectations (the report then says validation did not run).
    """
    from flows.audit import package_versions  # heavy (prefect); only for the metadata
    from tasks.validate import validate_frame

    if scale not in SCALES:
        raise ValueError(f"scale must be one of {sorted(SCALES)}, got {scale!r}")
    cfg = audit_config(scale, seed)
    timings: dict[str, float] = {}
    frame = _timed(timings, "load_data", hiring_frame, SCALES[scale]["n_per_group"], seed)
    train = frame.sample(frac=0.5, random_state=seed)
    audit = frame.drop(train.index).reset_index(drop=True)
    features = list(FEATURES)
    model = _timed(
        timings,
        "load_model",
        LogisticRegression().fit,
        train[features],
        train["hired"],
    )
    audit["score"] = _timed(
        timings, "score_data", lambda: model.predict_proba(audit[features])[:, 1]
    )
    roles = ColumnRoles(
        label="hired", protected=("gender", AGE_COLUMN), score="score", features=tuple(features)
    )
    validation = None
    if validate:
        validation = _timed(
            timings, "validate_data", validate_frame, audit, roles, min_group_size=30
        )
    ds = _timed(timings, "build_dataset", AuditDataset.from_frame, audit, roles, threshold=0.5)

    m = cfg.methods

    def predict(X: pd.DataFrame) -> np.ndarray:
        return model.predict_proba(X[features])[:, 1]

    runners: dict[str, Callable[[], MethodResult]] = {
        "group_parity": lambda: group_parity(
            ds,
            tolerance=m.group_parity.tolerance,
            confidence_level=m.group_parity.confidence_level,
        ),
        "group_metrics": lambda: run_group_metrics(ds, m.group_metrics, seed=seed),
        "permutation_tests": lambda: run_permutation_tests(ds, m.permutation_tests, seed=seed),
        "intersectional": lambda: run_intersectional(ds, m.intersectional, seed=seed),
        "fliptest": lambda: run_fliptest(ds, m.fliptest, seed=seed, predict_proba=predict),
        "individual_fairness": lambda: run_individual_fairness(
            ds, m.individual_fairness, seed=seed, model=model
        ),
        "mitigation": lambda: _mitigation(ds, m, seed),
        "subgroup_scan": lambda: run_subgroup_scan(
            ds, dataclasses.replace(m.subgroup_scan, min_draws=199), seed=seed
        ),
    }
    unknown = [name for name in BUILT_IN if name not in runners]
    if unknown:
        raise KeyError(f"report_full_audit does not know how to run {unknown}; add them")
    methods: list[MethodResult] = []
    for name in BUILT_IN:
        title = method_spec(name).title
        result = _timed(timings, name, _failed, name, title, runners[name])
        if result.seconds is not None:
            timings[name] = round(result.seconds, 4)
        methods.append(result)
    methods.append(  # failed: the gradient test of a model without gradients
        _failed(
            "individual_fairness",
            "Individual fairness of a black-box copy of the model",
            lambda: run_individual_fairness(
                ds, m.individual_fairness, seed=seed, model=_BlackBox(model)
            ),
        )
    )
    methods.append(run_fliptest(ds, m.fliptest, seed=seed))  # not run: no model function
    versions = package_versions()
    return finalize_audit(
        config=cfg.to_dict(),
        dataset={**ds.summary(), "name": "lipton-hiring-with-age", "source": "embedded"},
        model={
            "uri": cfg.model.uri,
            "name": "fairengine-demo-hiring",
            "version": "1",
            "score_type": "probability",
            "threshold": 0.5,
        },
        validation=validation,
        methods=methods,
        alpha=cfg.alpha,
        multiplicity=cfg.multiplicity,
        metadata={
            "versions": versions,
            "fairengine_version": versions["fairengine"],
            "seed": seed,
            "timings": timings,
        },
    )
