r"""The randomised thresholding derived predictor (RTDP) as a scikit-learn-style estimator.

Morina et al., "Auditing and achieving intersectional fairness in classification problems"
(arXiv:1911.01468), mitigation half; notes ``intersectional.md`` §1.5 and §4.6–4.7. Intersection s
gets a threshold τ_s and flip probabilities (p_s, q_s):

    P(ỹ = 1 | f, s) = q_s if f > τ_s else p_s,

chosen to minimise the expected cost c_FP·FP + c_FN·FN subject to ε-differential fairness of the
constrained rates (``sp``, ``tpr``, ``fpr``, ``eo``; several at once allowed) over the
intersections. Variants (``variant``):

* ``randomization_only``: τ_s = τ₀ for all s (the base classifier's threshold; for a binary
  predictor this is Hardt et al.'s derived predictor over K groups); one LP over (p, q).
* ``thresholds_only``: p = 0, q = 1, deterministic thresholds from the exact window sweep
  (:mod:`fairengine.mitigation.thresholds`); may be infeasible, then :class:`MitigationInfeasible`.
* ``sequential``: thresholds_only's τ (or, when that is infeasible, each intersection's
  cost-optimal threshold, with a warning), then the LP with τ fixed.
* ``overall``: coordinate descent over the per-intersection threshold grids with the exact LP
  inside, V(τ) = min over (p, q)
  (notes §4.6 variant 4, "nested"), started from the better of sequential's and the base
  thresholds, so its fit cost is never above either of them.

``robust_draws > 0`` adds the scenario constraint of §4.7: the ε window must hold for each of that
many posterior draws of the rates, so it holds out of sample with high probability (variants with
an LP; for ``overall`` the threshold search uses the plain LP and the final LP is robust).

Intersections without rows at fit time get the rule of their parent group (``fallback="parent"``:
the largest fitted intersection sharing all but the last attribute, then all but the last two, ...)
or of the largest fitted intersection (``"global"``), never an implicit "negative".
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from fairengine.errors import ConfigError, DataContractError
from fairengine.intersectional.metrics import OUTCOMES, pairwise_epsilon
from fairengine.mitigation.lp import LPSolution, MitigationError, RTDPProgram, solve_rtdp_lp
from fairengine.mitigation.rates import (
    CONSTRAINT_RATES,
    MITIGATION_METRICS,
    AffineRate,
    affine_rate,
    cost_coefficients,
    rate_rates,
    scenario_rates,
    support_mask,
)
from fairengine.mitigation.scores import GroupScores, candidate_thresholds, check_rows
from fairengine.mitigation.thresholds import threshold_sweep

VARIANTS: tuple[str, ...] = ("randomization_only", "thresholds_only", "sequential", "overall")
FALLBACKS: tuple[str, ...] = ("parent", "global")


class MitigationInfeasible(MitigationError):
    """Deterministic thresholds alone cannot reach the target ε on the fitting data."""


class RTDPPostProcessor:
    """Randomised thresholding derived predictor (module docstring).

    Parameters
    ----------
    constraints : metrics whose ε is bounded: any of ``sp``, ``tpr``, ``fpr``, ``eo``.
    epsilon : target ε ≥ 0 (``math.inf``: no constraint, the cost-optimal post-processor).
    variant : one of ``randomization_only``, ``thresholds_only``, ``sequential``, ``overall``.
    cost_fp, cost_fn : costs of a false positive / negative (accuracy: 1 and 1).
    outcomes : ``positive`` (ratios of r) or ``both`` (also of 1 − r, Foulds' DF).
    smoothing_alpha, smoothing_beta : α, β of the constrained rates (k + α)/(d + α + β). Default
        0 (empirical rates): with smoothing, a small intersection can be made all-negative
        (true rate 0) while its smoothed rate α/(d + α + β) still sits inside the window. The
        constant predictor (at α/(α + β) with smoothing) is always feasible.
    base_threshold : τ₀, the base classifier's threshold (``randomization_only`` keeps it).
    n_thresholds : candidate thresholds per intersection (its score quantiles), G.
    rate_floor : δ, the smallest allowed rate (rules out the all-negative predictor).
    monotone : require p_s ≤ q_s (a higher score never lowers the chance of a positive).
    min_support, exclude_sparse : intersections with fewer denominator rows than ``min_support``
        are left unconstrained when ``exclude_sparse`` (the audit's support policy).
    robust_draws : number of posterior scenarios in the robust constraint (0: off).
    robust_prior : the Beta prior of the scenarios.
    max_sweeps, max_seconds : limits of the ``overall`` coordinate descent.
    fallback : rule for intersections unseen at fit time: ``parent`` or ``global``.
    random_state : seed of the robust scenarios.
    """

    def __init__(
        self,
        *,
        constraints: tuple[str, ...] | list[str] = ("eo",),
        epsilon: float = 0.2,
        variant: str = "overall",
        cost_fp: float = 1.0,
        cost_fn: float = 1.0,
        outcomes: str = "positive",
        smoothing_alpha: float = 0.0,
        smoothing_beta: float = 0.0,
        base_threshold: float = 0.5,
        n_thresholds: int = 50,
        rate_floor: float = 1e-3,
        monotone: bool = True,
        min_support: int = 30,
        exclude_sparse: bool = False,
        robust_draws: int = 0,
        robust_prior: tuple[float, float] = (0.5, 0.5),
        max_sweeps: int = 5,
        max_seconds: float = 60.0,
        fallback: str = "parent",
        random_state: int = 0,
    ) -> None:
        self.constraints = constraints
        self.epsilon = epsilon
        self.variant = variant
        self.cost_fp = cost_fp
        self.cost_fn = cost_fn
        self.outcomes = outcomes
        self.smoothing_alpha = smoothing_alpha
        self.smoothing_beta = smoothing_beta
        self.base_threshold = base_threshold
        self.n_thresholds = n_thresholds
        self.rate_floor = rate_floor
        self.monotone = monotone
        self.min_support = min_support
        self.exclude_sparse = exclude_sparse
        self.robust_draws = robust_draws
        self.robust_prior = robust_prior
        self.max_sweeps = max_sweeps
        self.max_seconds = max_seconds
        self.fallback = fallback
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        def bad(name: str, what: str) -> ConfigError:
            return ConfigError(f"{name} must be {what}, got {getattr(self, name)!r}")

        cons = list(self.constraints)
        if (
            not cons
            or any(c not in MITIGATION_METRICS for c in cons)
            or len(set(cons)) != len(cons)
        ):
            raise ConfigError(
                f"constraints must be a non-empty list of distinct metrics from "
                f"{list(MITIGATION_METRICS)} (elift/slift describe the labels, which "
                f"post-processing cannot change), got {self.constraints!r}"
            )
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, int | float) or math.isnan(eps) or eps < 0:
            raise bad("epsilon", "a number >= 0 (inf for no constraint)")
        if self.variant not in VARIANTS:
            raise bad("variant", f"one of {list(VARIANTS)}")
        for name in ("cost_fp", "cost_fn"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise bad(name, "a finite number >= 0")
        if self.cost_fp + self.cost_fn <= 0:
            raise ConfigError("cost_fp and cost_fn cannot both be 0")
        if self.outcomes not in OUTCOMES:
            raise bad("outcomes", f"one of {list(OUTCOMES)}")
        for name in ("smoothing_alpha", "smoothing_beta"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise bad(name, "a finite number >= 0")
        if not 0 <= self.base_threshold <= 1:
            raise bad("base_threshold", "a probability threshold in [0, 1]")
        if not (isinstance(self.n_thresholds, int) and self.n_thresholds >= 2):
            raise bad("n_thresholds", "an integer >= 2")
        a, b = self.smoothing_alpha, self.smoothing_beta
        ceiling = a / (a + b) if a + b > 0 else 1.0
        if not 0 < self.rate_floor <= ceiling:
            raise ConfigError(
                f"rate_floor must be in (0, alpha/(alpha+beta)] = (0, {ceiling:g}] so that the "
                f"constant predictor stays feasible, got {self.rate_floor!r}"
            )
        if not (isinstance(self.robust_draws, int) and self.robust_draws >= 0):
            raise bad("robust_draws", "an integer >= 0")
        if not (isinstance(self.max_sweeps, int) and self.max_sweeps >= 1):
            raise bad("max_sweeps", "an integer >= 1")
        if not self.max_seconds > 0:
            raise bad("max_seconds", "a number > 0")
        if self.fallback not in FALLBACKS:
            raise bad("fallback", f"one of {list(FALLBACKS)}")

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        groups: np.ndarray,
        y: np.ndarray,
        score: np.ndarray,
        sample_weight: np.ndarray | None = None,
        *,
        n_groups: int | None = None,
        grid_shape: tuple[int, ...] | None = None,
    ) -> RTDPPostProcessor:
        """Fit on intersection ids ``groups`` (0..K−1, flat indices in ``grid_shape`` when given),
        0/1 labels ``y`` and probability scores ``score``."""
        self._check_params()
        start = time.perf_counter()
        if grid_shape is not None:
            k_grid = int(np.prod(grid_shape))
            if n_groups is not None and n_groups != k_grid:
                raise DataContractError("n_groups must equal the product of grid_shape")
            n_groups = k_grid
        data = GroupScores.from_arrays(groups, y, score, sample_weight, n_groups=n_groups)
        k = data.n_groups
        cand = candidate_thresholds(data, self.n_thresholds, self.base_threshold)
        u_pos, u_neg = data.above(cand)
        rates = rate_rates(list(self.constraints))
        masks = {
            r: support_mask(
                r, data.rows, min_support=self.min_support, exclude_sparse=self.exclude_sparse
            )
            for r in rates
        }
        cost_p, cost_q, const = cost_coefficients(
            u_pos, u_neg, data.totals, data.total_weight, self.cost_fp, self.cost_fn
        )
        rows = np.arange(k)
        eps = float(self.epsilon)
        self.warnings_: list[str] = []
        self.n_lp_solves_ = 0
        scen_seed = np.random.SeedSequence(self.random_state)
        program = RTDPProgram(
            k, eps, outcomes=self.outcomes, rate_floor=self.rate_floor, monotone=self.monotone
        )

        # each rate's affine coefficients at every candidate threshold (K, G), computed once;
        # an LP picks one column per intersection (elementwise the same numbers)
        grid_blocks = {
            r: affine_rate(
                r,
                u_pos,
                u_neg,
                data.totals,
                masks[r],
                alpha=self.smoothing_alpha,
                beta=self.smoothing_beta,
            )
            for r in rates
        }

        def lp_at(idx: np.ndarray, robust: bool) -> LPSolution:
            up, un = u_pos[rows, idx], u_neg[rows, idx]
            blocks: list[AffineRate] = [
                AffineRate(r, g.a[rows, idx], g.b[rows, idx], g.c[rows, idx], g.mask)
                for r, g in grid_blocks.items()
            ]
            n_point = len(blocks)
            if robust and self.robust_draws and not math.isinf(eps):
                rng = np.random.default_rng(scen_seed)  # same scenarios on every call
                for r in rates:
                    blocks += scenario_rates(
                        r,
                        up,
                        un,
                        data.totals,
                        masks[r],
                        self.robust_draws,
                        prior=self.robust_prior,
                        rng=rng,
                    )
            self.n_lp_solves_ += 1
            if not robust:  # the threshold search: warm re-solves of one model, same values
                return program.solve(
                    cost_p[rows, idx], cost_q[rows, idx], const, blocks, n_point_blocks=n_point
                )
            return solve_rtdp_lp(  # the LP whose solution is the rule: from scratch
                cost_p[rows, idx],
                cost_q[rows, idx],
                const,
                blocks,
                eps,
                outcomes=self.outcomes,
                rate_floor=self.rate_floor,
                monotone=self.monotone,
                n_point_blocks=n_point,
            )

        base_idx = np.argmin(np.abs(cand - self.base_threshold), axis=1)
        self.thresholds_feasible_: bool | None = None
        self.thresholds_exact_: bool | None = None
        self.sweeps_ = 0
        self.converged_ = True
        sol: LPSolution | None = None
        if self.variant == "randomization_only":
            idx = base_idx
            sol = lp_at(idx, robust=True)
        else:
            grid_rates = {}
            for r, blk in grid_blocks.items():
                grid_rates[r] = (blk.b + blk.c, blk.mask)  # p = 0, q = 1
            search = threshold_sweep(
                grid_rates,
                cost_q + const / k,
                eps,
                outcomes=self.outcomes,
                rate_floor=self.rate_floor,
            )
            self.thresholds_feasible_ = search.index is not None
            self.thresholds_exact_ = search.exact
            if self.variant == "thresholds_only":
                if search.index is None:
                    raise MitigationInfeasible(
                        f"deterministic thresholds alone cannot bring {list(self.constraints)} "
                        f"to epsilon={eps:g} on the fitting data (no window of the candidate "
                        f"grid fits every intersection); use variant 'sequential' or 'overall', "
                        f"which add randomisation"
                    )
                idx = search.index
            else:
                if search.index is None:
                    idx = (cost_q + const / k).argmin(axis=1)
                    self.warnings_.append(
                        f"thresholds alone cannot reach epsilon={eps:g}; the LP started from "
                        "each intersection's cost-optimal threshold"
                    )
                else:
                    idx = search.index
                if self.variant == "sequential" or math.isinf(eps):
                    sol = lp_at(idx, robust=True)
                else:  # start from the better of sequential's and the base thresholds
                    value = lp_at(idx, robust=False).value
                    base_value = lp_at(base_idx, robust=False).value
                    if base_value < value:
                        idx, value = base_idx, base_value
                    idx = self._coordinate_descent(idx, value, cand, u_pos, u_neg, lp_at, start)
                    sol = lp_at(idx, robust=True)
        self._store(data, cand, idx, sol, rates, masks, u_pos, u_neg, grid_shape)
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def _coordinate_descent(
        self,
        idx: np.ndarray,
        value: float,
        cand: np.ndarray,
        u_pos: np.ndarray,
        u_neg: np.ndarray,
        lp_at: Any,
        start: float,
    ) -> np.ndarray:
        """Minimise V(τ) = LP value over the per-intersection grids, one intersection at a time,
        from thresholds ``idx`` whose V is ``value``."""
        idx = idx.copy()
        k = cand.shape[0]
        # distinct (u⁺, u⁻) per intersection: other candidates give the same LP
        options = []
        for s in range(k):
            _, first = np.unique(np.stack([u_pos[s], u_neg[s]], axis=1), axis=0, return_index=True)
            options.append(np.sort(first))
        order = np.argsort(-(u_pos[:, 0] + u_neg[:, 0]), kind="stable")  # largest first
        for sweep in range(self.max_sweeps):
            self.sweeps_ = sweep + 1
            improved = False
            for s in order:
                if options[s].size <= 1:
                    continue
                best_g, best_v = idx[s], value
                for g in options[s]:
                    if g == idx[s]:
                        continue
                    trial = idx.copy()
                    trial[s] = g
                    v = lp_at(trial, robust=False).value
                    if v < best_v - 1e-12:
                        best_g, best_v = g, v
                if best_g != idx[s]:
                    idx[s], value, improved = best_g, best_v, True
                if time.perf_counter() - start > self.max_seconds:
                    self.converged_ = False
                    self.warnings_.append(
                        f"overall: stopped at the time budget (max_seconds={self.max_seconds:g}) "
                        f"in sweep {sweep + 1}; the thresholds are the best found so far"
                    )
                    return idx
            if not improved:
                return idx
        self.converged_ = False
        self.warnings_.append(
            f"overall: still improving after max_sweeps={self.max_sweeps}; raise it to search on"
        )
        return idx

    def _store(
        self,
        data: GroupScores,
        cand: np.ndarray,
        idx: np.ndarray,
        sol: LPSolution | None,
        rates: list[str],
        masks: dict[str, np.ndarray],
        u_pos: np.ndarray,
        u_neg: np.ndarray,
        grid_shape: tuple[int, ...] | None,
    ) -> None:
        k = data.n_groups
        rows = np.arange(k)
        tau = cand[rows, idx].astype(np.float64)
        if sol is None:  # thresholds only
            p, q = np.zeros(k), np.ones(k)
            self.lp_max_violation_ = 0.0
            binding = {}
        else:
            p, q = np.clip(sol.p, 0, 1), np.clip(sol.q, 0, 1)
            self.lp_max_violation_ = sol.max_violation
            binding = {r: b for r, b in zip(rates, sol.binding, strict=False)}
        up, un = u_pos[rows, idx], u_neg[rows, idx]
        cp, cq, const = cost_coefficients(
            up, un, data.totals, data.total_weight, self.cost_fp, self.cost_fn
        )
        self.fit_loss_ = float(cp @ p + cq @ q + const)
        self.fit_rates_ = {}
        for r in rates:
            blk = affine_rate(
                r,
                up,
                un,
                data.totals,
                masks[r],
                alpha=self.smoothing_alpha,
                beta=self.smoothing_beta,
            )
            self.fit_rates_[r] = blk.values(p, q)
        self.constrained_ = masks
        self.binding_ = {r: binding.get(r, np.full(k, "", dtype=object)) for r in rates}
        self.fit_epsilon_ = {
            m: max(
                float(pairwise_epsilon(self.fit_rates_[r], masks[r], self.outcomes)[0])
                for r in CONSTRAINT_RATES[m]
            )
            for m in self.constraints
        }
        self.seen_ = data.sizes > 0
        self.fit_sizes_ = data.sizes
        self.source_ = fallback_sources(self.seen_, data.sizes, grid_shape, self.fallback)
        self.thresholds_ = tau[self.source_]
        self.p_ = p[self.source_]
        self.q_ = q[self.source_]
        self.n_groups_ = k
        self.grid_shape_ = tuple(grid_shape) if grid_shape is not None else (k,)

    # ------------------------------------------------------------------ predict
    def _check_fitted(self) -> None:
        if not hasattr(self, "thresholds_"):
            raise ConfigError("this RTDPPostProcessor is not fitted yet; call fit() first")

    def predict_proba(self, groups: np.ndarray, score: np.ndarray) -> np.ndarray:
        """P(ỹ = 1) per row: q_s if score > τ_s else p_s."""
        self._check_fitted()
        g = np.asarray(groups)
        f = np.asarray(score, dtype=np.float64)
        check_rows(g, np.zeros(g.shape[0], dtype=int), f)
        if g.size and g.max() >= self.n_groups_:
            raise DataContractError(
                f"groups must be intersection ids in 0..{self.n_groups_ - 1}, got {g.max()}"
            )
        return np.where(f > self.thresholds_[g], self.q_[g], self.p_[g])

    def predict(
        self, groups: np.ndarray, score: np.ndarray, random_state: int | None = None
    ) -> np.ndarray:
        """Randomised 0/1 decisions ỹ ~ Bernoulli(:meth:`predict_proba`)."""
        pi = self.predict_proba(groups, score)
        return (np.random.default_rng(random_state).random(pi.shape[0]) < pi).astype(int)

    @property
    def global_source_(self) -> int:
        """The intersection whose rule rows of a category unseen at fit time get: the largest
        fitted one."""
        self._check_fitted()
        return int(np.argmax(np.where(self.seen_, self.fit_sizes_, -1)))

    def rules(self) -> dict[str, Any]:
        """The fitted rule as plain data (thresholds, p, q per intersection and the settings)."""
        self._check_fitted()
        return {
            "thresholds": self.thresholds_.tolist(),
            "p": self.p_.tolist(),
            "q": self.q_.tolist(),
            "grid_shape": list(self.grid_shape_),
            "seen": self.seen_.tolist(),
            "source": self.source_.tolist(),
            "global_source": self.global_source_,
            "constraints": list(self.constraints),
            "epsilon": self.epsilon,
            "variant": self.variant,
            "outcomes": self.outcomes,
        }


def fallback_sources(
    seen: np.ndarray,
    sizes: np.ndarray,
    grid_shape: tuple[int, ...] | None,
    fallback: str = "parent",
) -> np.ndarray:
    """For each intersection, the fitted intersection whose rule it uses (itself when seen).

    ``parent``: the largest seen intersection sharing the first p−1 attribute codes, then p−2,
    …; ``global`` (or no grid): the largest seen intersection.
    """
    k = seen.shape[0]
    out = np.arange(k)
    if seen.all():
        return out
    if not seen.any():
        raise DataContractError("no intersection has rows to fit the post-processor on")
    largest = int(np.argmax(np.where(seen, sizes, -1)))
    if fallback == "global" or grid_shape is None or len(grid_shape) < 2:
        out[~seen] = largest
        return out
    codes = np.stack(np.unravel_index(np.arange(k), grid_shape), axis=1)
    for s in np.flatnonzero(~seen):
        choice = largest
        for depth in range(len(grid_shape) - 1, 0, -1):
            same = (codes[:, :depth] == codes[s, :depth]).all(axis=1) & seen
            if same.any():
                choice = int(np.argmax(np.where(same, sizes, -1)))
                break
        out[s] = choice
    return out
