r"""The gradient-flow attack of Maity et al. (ICLR 2021), eq. 2.6-2.8 and Algorithm 1, batched.

For an audit row (x0, y0), the unfair map Φ(x0, y0) = X(T) solves the ODE
Ẋ(t) = ∇_x{ℓ(f(X(t)), y0) − λ d²(X(t), x0)}, X(0) = x0 (eq. 2.6), integrated by forward Euler
(eq. 2.8), started at the original point:

.. math::

    x^{(k)} = Π\bigl(x^{(k-1)} + η_k\, M \odot [\,∇_x ℓ(f(x^{(k-1)}), y_0)
              - 2λ Σ (x^{(k-1)} - x_0)\,]\bigr), \qquad k = 1..T,

with η_k = η (``schedule="constant"``) or η_k = η k^{−p} (``"power"``, p = 2/3 in the paper's
simulation), M a 0/1 mask of mutable features and Π the optional domain projection (``"box"``:
clamp each feature to [lower, upper]; ``"simplex"``: the box plus a Euclidean projection of every
one-hot block onto the probability simplex — or onto {v ≥ 0, Σ v ≤ 1} when the encoder dropped a
category). ``domain="none"`` is the paper.

All rows move at once. The loss is computed per row and **summed** before differentiating, so
each row's gradient is its own: the result does not depend on how many rows are processed
together (``chunk_rows``), unlike inFairness's auditor which averages over the batch (notes
§1.4). Gradients are taken w.r.t. x only (``torch.autograd.grad``); the model is in ``eval()``.

Divergence. The penalty alone maps the displacement by (1 − 2η_kλσ) per step along an eigen-
direction of Σ with eigenvalue σ, so the discretisation is stable iff η_k λ σ_max < 1 (notes §5.3);
a warning is issued otherwise. A row whose iterate becomes non-finite or moves farther than
``divergence_norm`` from x0 is frozen at its last good iterate and flagged in ``diverged``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fairengine import devices, progress
from fairengine.errors import ConfigError, DataContractError
from fairengine.individual.fair_metric import FairMetricBase

__all__ = ["FlowResult", "gradient_flow", "project_simplex", "resolve_device", "step_sizes"]

SCHEDULES = ("constant", "power")
DOMAINS = ("none", "box", "simplex")


@dataclass
class FlowResult:
    """Output of :func:`gradient_flow` (numpy arrays, one entry per audit row).

    ``X`` = Φ(x0); ``loss_original``/``loss_mapped`` = ℓ at x0 and at Φ(x0); ``loss_path`` maps
    each recorded step k to the per-row loss at x^{(k)}; ``sq_dist`` = d²(x0, Φ(x0));
    ``diverged`` flags rows that were frozen; ``mean_loss`` is the per-step mean loss
    (k = 0..T−1) over all rows.
    """

    X: np.ndarray
    loss_original: np.ndarray
    loss_mapped: np.ndarray
    sq_dist: np.ndarray
    diverged: np.ndarray
    loss_path: dict[int, np.ndarray]
    step_sizes: np.ndarray
    mean_loss: np.ndarray
    settings: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def n_diverged(self) -> int:
        return int(self.diverged.sum())

    @property
    def flow_time(self) -> float:
        return float(self.step_sizes.sum())


def step_sizes(
    eta: float, steps: int, schedule: str = "constant", power: float = 2 / 3
) -> np.ndarray:
    """η_k for k = 1..T: constant η, or η k^{−power}."""
    k = np.arange(1, steps + 1, dtype=np.float64)
    return np.full(steps, float(eta)) if schedule == "constant" else float(eta) * k ** (-power)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``"auto"``/None → CUDA when available else CPU; ``"cuda"`` without a GPU is an error
    (:func:`fairengine.devices.resolve_device`)."""
    return torch.device(devices.resolve_device(None if device is None else str(device)))


def project_simplex(U: torch.Tensor, full: bool = True) -> torch.Tensor:
    """Row-wise Euclidean projection onto {v ≥ 0, Σv = 1} (``full``) or {v ≥ 0, Σv ≤ 1}.

    Sort-based algorithm (Held et al. 1974; Duchi et al. 2008): with u sorted decreasingly,
    ρ = max{j : u_(j) − (Σ_{r≤j} u_(r) − 1)/j > 0}, τ = (Σ_{r≤ρ} u_(r) − 1)/ρ, v = max(u − τ, 0).
    For the capped set, v = max(u, 0) when that already sums to ≤ 1.
    """
    srt, _ = torch.sort(U, dim=1, descending=True)
    css = torch.cumsum(srt, dim=1) - 1.0
    j = torch.arange(1, U.shape[1] + 1, device=U.device, dtype=U.dtype)
    cond = srt - css / j > 0
    rho = (cond * j).argmax(1, keepdim=True)  # last True (cond is prefix-true)
    tau = css.gather(1, rho) / (rho + 1).to(U.dtype)
    proj = torch.clamp(U - tau, min=0.0)
    if not full:
        pos = torch.clamp(U, min=0.0)
        inside = pos.sum(1, keepdim=True) <= 1.0
        proj = torch.where(inside, pos, proj)
    return proj


class _Penalty:
    """d²(x, x0) and its gradient 2Σ(x − x0), low-rank when Σ = I − (1 − w)QQᵀ."""

    def __init__(self, metric: FairMetricBase, d: int, device: torch.device, dtype: torch.dtype):
        lr = metric.low_rank_
        if getattr(metric, "n_features_in_", d) != d:
            raise DataContractError(
                f"the fair metric was fitted on {metric.n_features_in_} features but the attack "
                f"space has {d}"
            )
        self.q: torch.Tensor | None
        self.sigma: torch.Tensor | None
        if lr is not None:
            self.q = torch.as_tensor(lr[0], device=device, dtype=dtype)
            self.c = 1.0 - lr[1]
            self.sigma = None
        else:
            self.q = None
            self.sigma = torch.as_tensor(metric.sigma_, device=device, dtype=dtype)

    def sigma_times(self, delta: torch.Tensor) -> torch.Tensor:
        if self.q is not None:
            return torch.addmm(delta, delta @ self.q, self.q.T, alpha=-self.c)
        assert self.sigma is not None  # __init__ sets sigma exactly when q is None
        return delta @ self.sigma

    def sq(self, delta: torch.Tensor, s_delta: torch.Tensor | None = None) -> torch.Tensor:
        sd = self.sigma_times(delta) if s_delta is None else s_delta
        return (sd * delta).sum(1)


def gradient_flow(
    classifier: Any,
    X0: Any,
    y: Any,
    metric: FairMetricBase,
    *,
    lam: float = 50.0,
    steps: int = 200,
    eta: float = 0.01,
    schedule: str = "constant",
    power: float = 2 / 3,
    domain: str = "none",
    lower: Any = None,
    upper: Any = None,
    onehot_groups: list[tuple[list[int], bool]] | None = None,
    mutable_mask: Any = None,
    record_steps: list[int] | None = None,
    chunk_rows: int | None = None,
    device: str | torch.device | None = "cpu",
    dtype: torch.dtype = torch.float64,
    divergence_norm: float = 1e6,
    num_threads: int | None = None,
) -> FlowResult:
    """Run the attack on every row of ``X0`` (n × d, the model-input space) with labels ``y``.

    Parameters
    ----------
    classifier : an object with ``loss_and_grad(X, y)``, ``loss(X, y)`` and ``to(device, dtype)``
        (:class:`~fairengine.individual.torch_models.TorchClassifier` or
        :class:`~fairengine.individual.torch_models.BlackBoxClassifier`).
    metric : a fitted fair metric (``sigma_`` or ``basis_``) on the same d features.
    lam, steps, eta, schedule, power : λ, T, η and the step schedule (see module docstring).
    domain, lower, upper, onehot_groups : projection after each step (``onehot_groups`` = list
        of (column indices, full simplex?) pairs; used by ``"simplex"``).
    mutable_mask : d booleans; False freezes a feature (zero gradient). Default all mutable.
    record_steps : steps k in [0, T] at which to keep every row's loss (for T_n as a function of
        T); 0 and T are always kept.
    chunk_rows : process rows in chunks of this size (memory); results do not depend on it.
    device : ``"cpu"`` (default), ``"cuda"`` or ``"auto"``.
    num_threads : torch CPU threads during the attack (restored afterwards); None keeps torch's
        setting. On an oversubscribed machine 1 thread can be much faster for small matrices.
    """
    if num_threads is not None:
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ConfigError(f"num_threads must be an integer >= 1, got {num_threads!r}")
        previous = torch.get_num_threads()
        torch.set_num_threads(num_threads)
        try:
            return gradient_flow(
                classifier,
                X0,
                y,
                metric,
                lam=lam,
                steps=steps,
                eta=eta,
                schedule=schedule,
                power=power,
                domain=domain,
                lower=lower,
                upper=upper,
                onehot_groups=onehot_groups,
                mutable_mask=mutable_mask,
                record_steps=record_steps,
                chunk_rows=chunk_rows,
                device=device,
                dtype=dtype,
                divergence_norm=divergence_norm,
            )
        finally:
            torch.set_num_threads(previous)
    t_start = time.perf_counter()
    dev = resolve_device(device)
    X0n = np.array(X0, dtype=np.float64, copy=True)
    yn = np.array(y, copy=True).ravel()
    if X0n.ndim != 2:
        raise DataContractError(f"X0 must be 2-D (rows × features), got shape {X0n.shape}")
    n, d = X0n.shape
    if yn.shape[0] != n:
        raise DataContractError(f"y has {yn.shape[0]} entries for {n} rows of X0")
    if not np.isfinite(X0n).all():
        raise DataContractError("X0 has missing or infinite values; the attack needs finite inputs")
    _check_positive("lam", lam, allow_zero=True)
    _check_positive("eta", eta)
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ConfigError(f"steps must be an integer >= 1, got {steps!r}")
    if schedule not in SCHEDULES:
        raise ConfigError(f"schedule must be one of {list(SCHEDULES)}, got {schedule!r}")
    if domain not in DOMAINS:
        raise ConfigError(f"domain must be one of {list(DOMAINS)}, got {domain!r}")
    etas = step_sizes(eta, int(steps), schedule, power)
    warnings: list[str] = []
    smax = metric.largest_eigenvalue()
    unstable = int(np.sum(etas * lam * smax >= 1.0))
    if unstable:
        warnings.append(
            f"{unstable} of {steps} Euler steps have eta*lambda*sigma_max >= 1 (eta_1={etas[0]:g}, "
            f"lambda={lam:g}, sigma_max={smax:.3g}): the discretised penalty overshoots and may "
            "diverge; reduce eta or lambda"
        )
    rec = sorted({0, int(steps), *(int(k) for k in (record_steps or []) if 0 <= k <= steps)})

    clf = classifier.to(dev, dtype)
    pen = _Penalty(metric, d, dev, dtype)
    mask = None
    if mutable_mask is not None:
        m = np.asarray(mutable_mask, dtype=bool).ravel()
        if m.shape[0] != d:
            raise DataContractError(f"mutable_mask has {m.shape[0]} entries for {d} features")
        mask = torch.as_tensor(m, device=dev, dtype=dtype)
    lo = hi = None
    if domain in ("box", "simplex"):
        lo = torch.as_tensor(
            np.full(d, -np.inf) if lower is None else np.asarray(lower, float), device=dev,
            dtype=dtype,
        )  # fmt: skip
        hi = torch.as_tensor(
            np.full(d, np.inf) if upper is None else np.asarray(upper, float), device=dev,
            dtype=dtype,
        )  # fmt: skip
        if lo.shape != (d,) or hi.shape != (d,):
            raise DataContractError(f"lower and upper must have {d} entries")
    groups = [
        (torch.as_tensor(list(idx), device=dev, dtype=torch.long), bool(full))
        for idx, full in (onehot_groups or [])
        if len(idx) > 0
    ]

    chunk = n if not chunk_rows else max(1, int(chunk_rows))
    out_X = np.empty_like(X0n)
    out_l0 = np.empty(n)
    out_l1 = np.empty(n)
    out_div = np.zeros(n, dtype=bool)
    path = {k: np.empty(n) for k in rec}
    sum_loss = np.zeros(int(steps))
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        x0 = torch.as_tensor(X0n[a:b], device=dev, dtype=dtype)
        yy = torch.as_tensor(yn[a:b], device=dev, dtype=dtype)
        delta = torch.zeros_like(x0)  # state: x = x0 + delta
        x = x0
        if lo is not None and hi is not None:  # set together (box or simplex domain)
            dlo, dhi = lo - x0, hi - x0  # the box in displacement coordinates
        frozen = torch.zeros(b - a, dtype=torch.bool, device=dev)
        any_frozen = False
        for k in range(int(steps)):
            if k % 25 == 0:
                progress.report(
                    "individual_fairness",
                    "attack steps",
                    (a // chunk) * int(steps) + k,
                    -(-n // chunk) * int(steps),
                )
            loss, g = clf.loss_and_grad(x, yy)
            if k in path:
                path[k][a:b] = loss.cpu().numpy()
            sum_loss[k] += float(loss.sum())
            grad = g.add_(pen.sigma_times(delta), alpha=-2.0 * lam)  # ∇ℓ − 2λΣ(x − x0)
            if mask is not None:
                grad.mul_(mask)
            d_new = delta.add(grad, alpha=float(etas[k]))
            if lo is not None:
                d_new = torch.maximum(torch.minimum(d_new, dhi), dlo)
            if domain == "simplex" and groups:
                x_new = x0 + d_new
                for idx, full in groups:
                    x_new[:, idx] = project_simplex(x_new[:, idx], full)
                d_new = x_new - x0
            # one reduction: NaN/inf rows give a non-finite sum, which fails the comparison
            bad = ~(torch.linalg.vector_norm(d_new, dim=1) <= divergence_norm)
            if any_frozen or bool(bad.any()):
                frozen |= bad
                any_frozen = True
                d_new = torch.where(frozen[:, None], delta, d_new)
            delta = d_new
            x = x0 + delta
        l1 = clf.loss(x, yy)
        path[int(steps)][a:b] = l1.cpu().numpy()
        out_X[a:b] = x.cpu().numpy()
        out_l0[a:b] = path[0][a:b]
        out_l1[a:b] = l1.cpu().numpy()
        out_div[a:b] = frozen.cpu().numpy()
    delta_all = torch.as_tensor(out_X - X0n, dtype=torch.float64)
    pen_cpu = _Penalty(metric, d, torch.device("cpu"), torch.float64)
    sq = pen_cpu.sq(delta_all).numpy()
    if out_div.any():
        warnings.append(
            f"the gradient flow diverged for {int(out_div.sum())} of {n} rows (non-finite or "
            f"moved farther than {divergence_norm:g}); they were frozen at their last finite "
            "iterate: reduce eta or lambda"
        )
    settings = {
        "lambda": float(lam), "steps": int(steps), "eta": float(eta), "schedule": schedule,
        "power": float(power) if schedule == "power" else None,
        "flow_time": float(etas.sum()), "domain": domain, "device": str(dev),
        "dtype": str(dtype).replace("torch.", ""), "sigma_max": smax,
        "max_eta_lambda_sigma": float(etas.max() * lam * smax),
        "n_mutable": int(d if mask is None else int(mask.sum())), "n_features": d,
    }  # fmt: skip
    return FlowResult(
        X=out_X, loss_original=out_l0, loss_mapped=out_l1, sq_dist=sq, diverged=out_div,
        loss_path=path, step_sizes=etas, mean_loss=sum_loss / n,
        settings=settings, warnings=warnings, seconds=time.perf_counter() - t_start,
    )  # fmt: skip


def _check_positive(name: str, value: Any, allow_zero: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {bound}, got {value!r}")
