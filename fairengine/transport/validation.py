r"""Held-out validation of a transport map (``../shared/docs/fliptest_ot.md`` §4.3).

The map is refitted on ``1 − test_fraction`` of each sample and judged on the held-out rest, in
standardized units (the fitted map's pooled scaling):

1. Pushforward fidelity of T(source_test) against target_test:
   (a) per-feature two-sample KS statistic beside its permutation null (95 % quantile and
       p-value; the paper reports the KS without a yardstick);
   (b) energy distance (Székely & Rizzo) with a permutation p-value (multivariate);
   (c) the paper's regression-MSE check done correctly: regress each feature on the others on
       target-fit data (each feature with its *own* regression; the notebooks reuse the hair
       regressor for work experience), MSE on mapped points over MSE on target_test (≈ 1);
   (d) with a decision function f: P[f(T(x)) = 1] − P[f(y) = 1] with a bootstrap CI (any gap
       biases |F+| − |F−| away from the demographic-parity count gap).
2. Optimality: mean ‖x − T(x)‖² over the exact OT cost between equal-size subsamples
   (``ot.emd2``; ratio ≈ 1; entropic blur can push it below 1), and the monotonicity violation
   rate ⟨T(x) − T(x′), x − x′⟩ < 0 over random pairs (0 for gradients of convex potentials).
3. With f: flip-decision agreement with the exact OT bijection on the subsample.
4. Forward/reverse consistency: mean cycle error ‖T_BA(T_AB(x)) − x‖ of a reverse refit.

Thresholds for ``warnings``: KS above its null 95 % quantile, energy p < 0.05, a positive-rate
CI excluding 0, cost ratio outside [0.9, 1.2], MSE ratio outside [0.8, 1.25] with its bootstrap
interval excluding 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ot
import torch
from sklearn.base import clone

from fairengine.transport._base import TransportMap, as_points, sq_euclidean


@dataclass
class MapValidation:
    """Outcome of :func:`validate_map`; ``to_dict()`` is small and JSON-ready."""

    n_fit: tuple[int, int]
    n_test: tuple[int, int]
    features: list[str]
    ks: list[float]
    ks_null_q95: list[float]
    ks_pvalue: list[float]
    energy: float
    energy_pvalue: float
    mse_ratio: list[float | None]
    cost_ratio: float
    monotonicity_violation: float
    positive_rate_gap: float | None = None
    positive_rate_gap_ci: tuple[float, float] | None = None
    exact_agreement: float | None = None
    cycle_error: float | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.warnings

    def to_dict(self) -> dict[str, Any]:
        from fairengine.results import to_jsonable

        d = to_jsonable(self.__dict__)
        d["passed"] = self.passed
        return d


def _ks_permutation(
    a: np.ndarray, b: np.ndarray, rng: np.random.Generator, n_perm: int
) -> tuple[float, np.ndarray]:
    """KS statistic of a vs b and its permutation null (vectorized over permutations)."""
    pooled = np.concatenate([a, b])
    order = np.argsort(pooled, kind="stable")
    v = pooled[order]
    last = np.flatnonzero(np.r_[v[1:] != v[:-1], True])  # evaluate at the end of tie blocks
    n1, n2 = len(a), len(b)
    is_a = (order < n1).astype(np.float64)

    def stat(lab: np.ndarray) -> np.ndarray:
        ca = np.cumsum(lab, axis=-1)[..., last]
        cb = (last + 1) - ca
        return np.abs(ca / n1 - cb / n2).max(axis=-1)

    perms = np.argsort(rng.random((n_perm, n1 + n2)), axis=1)
    null = stat(is_a[perms])
    return float(stat(is_a)), null


def _energy_permutation(
    x: np.ndarray, y: np.ndarray, rng: np.random.Generator, n_perm: int
) -> tuple[float, np.ndarray]:
    """Energy distance and its permutation null via quadratic forms of one distance matrix."""
    z = torch.as_tensor(np.vstack([x, y]))
    d = torch.cdist(z, z).numpy()
    n1, n2 = len(x), len(y)
    lab = np.zeros((n_perm + 1, n1 + n2))
    lab[0, :n1] = 1.0
    lab[1:] = (np.argsort(rng.random((n_perm, n1 + n2)), axis=1) < n1).astype(np.float64)
    dl = d @ lab.T  # (N, R+1)
    s_aa = np.einsum("rn,nr->r", lab, dl)
    s_a_all = dl.sum(axis=0)  # 1ᵀ D l
    total = d.sum()
    s_ab = s_a_all - s_aa
    s_bb = total - 2 * s_a_all + s_aa
    e = 2 * s_ab / (n1 * n2) - s_aa / n1**2 - s_bb / n2**2
    return float(e[0]), e[1:]


def _ols_residuals(train: np.ndarray, j: int, evals: list[np.ndarray]) -> list[np.ndarray]:
    """Squared residuals of feature j regressed (OLS, on ``train``) on the other features."""
    others = [k for k in range(train.shape[1]) if k != j]
    xtr = np.c_[np.ones(len(train)), train[:, others]]
    beta, *_ = np.linalg.lstsq(xtr, train[:, j], rcond=None)
    return [(e[:, j] - np.c_[np.ones(len(e)), e[:, others]] @ beta) ** 2 for e in evals]


def validate_map(
    estimator: TransportMap,
    source: Any,
    target: Any,
    *,
    decide: Callable[[np.ndarray], np.ndarray] | None = None,
    test_fraction: float = 0.2,
    n_permutations: int = 200,
    n_bootstrap: int = 1000,
    max_exact: int = 1000,
    cycle: bool = True,
    feature_names: list[str] | None = None,
    confidence_level: float = 0.95,
    random_state: int = 0,
) -> MapValidation:
    """Validate ``estimator`` (unfitted; it is cloned and refitted) from ``source`` to ``target``.

    ``decide`` maps an array of points in *original units* to 0/1 decisions (the audited model).
    See the module docstring for every check and its threshold.
    """
    rng = np.random.default_rng(random_state)
    xs, names = as_points("source", source)
    xt, _ = as_points("target", target, xs.shape[1])
    if feature_names is not None:
        names = list(feature_names)

    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        perm = rng.permutation(len(x))
        k = max(2, round(test_fraction * len(x)))
        return x[perm[k:]], x[perm[:k]]

    s_fit, s_test = split(xs)
    t_fit, t_test = split(xt)
    fwd = clone(estimator).fit(s_fit, t_fit)
    mapped = fwd.transform(s_test)
    z = fwd._z
    zm, zt_test, zt_fit, zs_test = z(mapped), z(t_test), z(t_fit), z(s_test)
    warnings: list[str] = []

    ks, q95, pks = [], [], []
    for j in range(xs.shape[1]):
        stat, null = _ks_permutation(zm[:, j], zt_test[:, j], rng, n_permutations)
        ks.append(stat)
        q95.append(float(np.quantile(null, 0.95)))
        pks.append(float((1 + np.sum(null >= stat - 1e-12)) / (n_permutations + 1)))
        if stat > q95[-1]:
            warnings.append(
                f"feature {names[j]!r}: held-out KS {stat:.3f} above its permutation-null "
                f"95% quantile {q95[-1]:.3f}"
            )

    cap = 1000
    a = zm[rng.permutation(len(zm))[:cap]]
    b = zt_test[rng.permutation(len(zt_test))[:cap]]
    energy, e_null = _energy_permutation(a, b, rng, n_permutations)
    e_p = float((1 + np.sum(e_null >= energy - 1e-12)) / (n_permutations + 1))
    if e_p < 0.05:
        warnings.append(f"energy distance {energy:.4f} rejects equal distributions (p={e_p:.3f})")

    mse_ratio: list[float | None] = []
    for j in range(xs.shape[1]):
        if xs.shape[1] < 2 or not fwd.active_[j]:  # held (constant) features: nothing to check
            mse_ratio.append(None)
            continue
        r_test, r_mapped = _ols_residuals(zt_fit, j, [zt_test, zm])
        if not r_test.mean() > 0:  # feature j is a function of the others in the target
            mse_ratio.append(None)
            continue
        r = float(r_mapped.mean() / r_test.mean())
        mse_ratio.append(r)
        # bootstrap interval of the ratio: warn only when it excludes 1 and r is far from 1
        bm = r_mapped[rng.integers(0, len(r_mapped), (500, len(r_mapped)))].mean(1)
        bt = r_test[rng.integers(0, len(r_test), (500, len(r_test)))].mean(1)
        lo, hi = np.quantile(bm / bt, [0.025, 0.975])
        if not 0.8 <= r <= 1.25 and not lo <= 1.0 <= hi:
            warnings.append(
                f"feature {names[j]!r}: regression-MSE ratio {r:.2f} (mapped/target; "
                f"95% bootstrap interval {lo:.2f} to {hi:.2f})"
            )

    k = min(max_exact, len(zs_test), len(zt_test))
    ss = zs_test[rng.permutation(len(zs_test))[:k]]
    tt = zt_test[rng.permutation(len(zt_test))[:k]]
    w = np.full(k, 1.0 / k)
    cmat = sq_euclidean(ss, tt)
    plan = ot.emd(w, w, cmat, numItermax=100_000_000)
    exact_cost = float((plan * cmat).sum())
    ms = z(fwd.transform(fwd._unz(ss)))
    map_cost = float(((ms - ss) ** 2).sum(1).mean())
    cost_ratio = map_cost / exact_cost if exact_cost > 0 else float("nan")
    if not 0.9 <= cost_ratio <= 1.2:
        warnings.append(f"transport cost {cost_ratio:.3f} x the exact OT cost on a subsample")

    i1, i2 = rng.integers(0, len(zs_test), (2, 5000))
    inner = ((zm[i1] - zm[i2]) * (zs_test[i1] - zs_test[i2])).sum(1)
    mono = float(np.mean(inner < -1e-12))

    gap = gap_ci = agreement = None
    if decide is not None:
        pm = np.asarray(decide(mapped), dtype=bool)
        pt = np.asarray(decide(t_test), dtype=bool)
        gap = float(pm.mean() - pt.mean())
        boot = rng.binomial(len(pm), pm.mean(), n_bootstrap) / len(pm) - rng.binomial(
            len(pt), pt.mean(), n_bootstrap
        ) / len(pt)
        alpha = 1 - confidence_level
        gap_ci = (float(np.quantile(boot, alpha / 2)), float(np.quantile(boot, 1 - alpha / 2)))
        if gap_ci[0] > 0 or gap_ci[1] < 0:
            warnings.append(
                f"mapped positive rate differs from the target's by {gap:+.3f} "
                f"(CI {gap_ci[0]:+.3f} to {gap_ci[1]:+.3f})"
            )
        exact_img = fwd._unz(tt[plan.argmax(axis=1)])
        est_img = fwd._unz(ms)
        agreement = float(
            np.mean(
                np.asarray(decide(exact_img), dtype=bool) == np.asarray(decide(est_img), dtype=bool)
            )
        )

    cycle_error = None
    if cycle:
        rev = clone(estimator).fit(t_fit, s_fit)
        back = z(rev.transform(mapped))
        cycle_error = float(np.sqrt(((back - zs_test) ** 2).sum(1)).mean())

    return MapValidation(
        n_fit=(len(s_fit), len(t_fit)),
        n_test=(len(s_test), len(t_test)),
        features=names,
        ks=ks,
        ks_null_q95=q95,
        ks_pvalue=pks,
        energy=energy,
        energy_pvalue=e_p,
        mse_ratio=mse_ratio,
        cost_ratio=cost_ratio,
        monotonicity_violation=mono,
        positive_rate_gap=gap,
        positive_rate_gap_ci=gap_ci,
        exact_agreement=agreement,
        cycle_error=cycle_error,
        warnings=warnings,
    )
