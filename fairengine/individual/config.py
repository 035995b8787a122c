"""Configuration of the individual-fairness test (``methods.individual_fairness`` in the YAML).

Defaults follow the recommended specification (``individual.md`` §5): the paper's Adult attack
settings (λ = 50, η = 0.01 constant, T = 200 — the steps that actually produced the paper's
Table 1, §2.5), the sensitive-subspace metric fitted on the audited rows as in the paper,
δ = 1.25, α = 0.05, a loss floor ε = 1e-4 nats and the ddof-1 variance of the paper's text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fairengine.devices import check_device
from fairengine.errors import ConfigError
from fairengine.setting_checks import require_integer

__all__ = ["METRICS", "IndividualConfig"]

METRICS = (
    "sensitive_subspace",
    "svd",
    "face",
    "explore",
    "mahalanobis",
    "discounted_directions",
)
_KEY = "methods.individual_fairness"


@dataclass
class IndividualConfig:
    """Individual fairness test of Maity et al. (2021): every field's default is documented.

    enabled: run the method (it is ``not_run`` anyway when the audit has no model).
    delta: tolerance δ of H0: E[loss ratio] <= δ (and error-rate ratio <= δ). Default 1.25.
    alpha: one-sided level of the lower bounds and the CIs' 1 − alpha. Default 0.05.
    metric: fair metric: ``sensitive_subspace`` (logistic regressions of the protected
        attributes, the paper), ``svd`` (the top ``metric_params.n_components`` right
        singular vectors of those stacked coefficient vectors, as the SenSR code), ``face``
        (comparable sets named by ``metric_params.group_column``), ``explore`` (pairs by the
        EXPLORE Adult heuristic),
        ``mahalanobis`` (``metric_params.sigma``, in the encoded space), ``discounted_directions``
        (``metric_params.directions``: free directions, in the encoded space).
    metric_params: extra parameters of the metric (e.g. ``{C: 1.0}`` for sensitive_subspace,
        ``{n_components: 1}``, ``{n_iter: 2000}``, ``{discount: 0.0}``). Default ``{}``.
    metric_fit: ``audit`` (fit the metric on the audited rows, the paper) or ``holdout`` (fit
        it on a random ``metric_fit_fraction`` of the rows and audit only the others). Default
        ``audit``.
    metric_fit_fraction: share of rows used to fit the metric with ``holdout``. Default 0.5.
    lam: penalty λ of the attack. Default 50.
    steps: number of Euler steps T. Default 200.
    eta: step size η (η_k = η, or η k^-power with ``schedule: power``). Default 0.01.
    schedule: ``constant`` or ``power``. Default ``constant``.
    power: exponent p of the ``power`` schedule. Default 2/3.
    domain: ``none`` (the paper: continuous relaxation), ``box`` (clamp to the audited rows'
        per-feature range) or ``simplex`` (box + one-hot blocks projected onto the simplex).
        Default ``none``.
    immutable_features: table columns the attack may not change. Default ``[]``.
    loss_floor: ε in r = (ℓ1 + ε)/(ℓ0 + ε), in nats. Default 1e-4.
    ddof: variance denominator n − ddof (1: the paper's text; 0: its code). Default 1.
    error_rate_test: also run the error-rate-ratio test (eq. 3.11-3.12). Default true.
    max_rows: audit at most this many rows (a seeded random subset); null = all. Default 10000.
    black_box: ``none`` (gradients must be exact), ``finite_difference``, ``smoothed`` or
        ``surrogate`` (models with only predict_proba; approximate; ``surrogate`` distils the
        model into an MLP on a held-out ``metric_fit_fraction`` of the rows and audits the rest
        with the model's own losses). Default ``none``.
    fd_step: finite-difference step h (encoded units). Default 1e-4.
    smoothing_sigma: σ of the Gaussian-smoothing gradient. Default 0.1.
    smoothing_samples: directions per row and step for ``smoothed``. Default 20.
    device: ``auto`` (CUDA when available, else CPU), ``cpu``, ``cuda`` or ``cuda:<n>``.
        Default ``auto``. The result's ``parameters`` record the device used (``device``) and
        this setting (``device_requested``).
    chunk_rows: rows per attack batch (memory bound; results do not depend on it); null = all.
    num_threads: torch CPU threads for the attack; null = torch's default. Default null.
    dtype: ``float64`` (default; exact reproduction) or ``float32`` (about 2x faster on CPU).
    top_k: rows with the largest ratios shown in the report. Default 10.
    histogram_bins: bins of the per-row ratio histogram. Default 30.
    lb_path_points: number of steps k at which T_n(k) is recorded. Default 12.
    """

    enabled: bool = True
    delta: float = 1.25
    alpha: float = 0.05
    metric: str = "sensitive_subspace"
    metric_params: dict[str, Any] = field(default_factory=dict)
    metric_fit: str = "audit"
    metric_fit_fraction: float = 0.5
    lam: float = 50.0
    steps: int = 200
    eta: float = 0.01
    schedule: str = "constant"
    power: float = 2.0 / 3.0
    domain: str = "none"
    immutable_features: list[str] = field(default_factory=list)
    loss_floor: float = 1e-4
    ddof: int = 1
    error_rate_test: bool = True
    max_rows: int | None = 10000
    black_box: str = "none"
    fd_step: float = 1e-4
    smoothing_sigma: float = 0.1
    smoothing_samples: int = 20
    device: str = "auto"
    chunk_rows: int | None = None
    num_threads: int | None = None
    dtype: str = "float64"
    top_k: int = 10
    histogram_bins: int = 30
    lb_path_points: int = 12

    def __post_init__(self) -> None:
        _finite(self.delta, "delta", low=0.0, strict=True)
        _finite(self.alpha, "alpha", low=0.0, strict=True)
        if not self.alpha < 1:
            raise ConfigError(f"{_KEY}.alpha must lie in (0, 1), got {self.alpha!r}")
        _choice(self.metric, "metric", METRICS)
        if not isinstance(self.metric_params, dict):
            raise ConfigError(f"{_KEY}.metric_params must be a mapping, got {self.metric_params!r}")
        _choice(self.metric_fit, "metric_fit", ("audit", "holdout"))
        _finite(self.metric_fit_fraction, "metric_fit_fraction", low=0.0, strict=True)
        if not self.metric_fit_fraction < 1:
            raise ConfigError(
                f"{_KEY}.metric_fit_fraction must lie in (0, 1), got {self.metric_fit_fraction!r}"
            )
        _finite(self.lam, "lam", low=0.0)
        _integer(self.steps, "steps", 1)
        _finite(self.eta, "eta", low=0.0, strict=True)
        _choice(self.schedule, "schedule", ("constant", "power"))
        _finite(self.power, "power", low=0.0)
        _choice(self.domain, "domain", ("none", "box", "simplex"))
        if not isinstance(self.immutable_features, list):
            raise ConfigError(f"{_KEY}.immutable_features must be a list of column names")
        _finite(self.loss_floor, "loss_floor", low=0.0)
        if self.ddof not in (0, 1) or isinstance(self.ddof, bool):
            raise ConfigError(f"{_KEY}.ddof must be 0 or 1, got {self.ddof!r}")
        if self.max_rows is not None:
            _integer(self.max_rows, "max_rows", 2)
        _choice(self.black_box, "black_box", ("none", "finite_difference", "smoothed", "surrogate"))
        _finite(self.fd_step, "fd_step", low=0.0, strict=True)
        _finite(self.smoothing_sigma, "smoothing_sigma", low=0.0, strict=True)
        _integer(self.smoothing_samples, "smoothing_samples", 1)
        check_device(self.device, f"{_KEY}.device")
        if self.chunk_rows is not None:
            _integer(self.chunk_rows, "chunk_rows", 1)
        if self.num_threads is not None:
            _integer(self.num_threads, "num_threads", 1)
        _choice(self.dtype, "dtype", ("float64", "float32"))
        _integer(self.top_k, "top_k", 0)
        _integer(self.histogram_bins, "histogram_bins", 1)
        _integer(self.lb_path_points, "lb_path_points", 2)


def _finite(value: Any, name: str, *, low: float, strict: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or (strict and value == low):
        rel = ">" if strict else ">="
        raise ConfigError(f"{_KEY}.{name} must be a finite number {rel} {low:g}, got {value!r}")


def _integer(value: Any, name: str, low: int) -> None:
    require_integer(_KEY, name, value, low)


def _choice(value: Any, name: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{_KEY}.{name} must be one of {list(allowed)}, got {value!r}")
