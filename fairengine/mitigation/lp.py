r"""The RTDP linear program for fixed thresholds (notes ``intersectional.md`` §1.5, §4.6).

Variables x = [p_1..p_K, q_1..q_K, (m_b, M_b) per constrained block b], 0 ≤ p, q ≤ 1 and
δ ≤ m_b, M_b ≤ 1 (δ = ``rate_floor``, which rules out the trivial all-negative predictor whose rates
are all 0). A block is one rate r_s = a_s p_s + b_s q_s + c_s (:class:`AffineRate`) over its
constrained intersections; "all pairs e^{−ε} ≤ r_s / r_s' ≤ e^{ε}" is linearised as

    r_s − M_b ≤ 0,   m_b − r_s ≤ 0   (each constrained s),     M_b − e^{ε} m_b ≤ 0,

plus e^{ε} M_b − m_b ≤ e^{ε} − 1 under ``outcomes="both"`` (the ratio of 1 − r too): 2K + 1 rows per
block instead of K(K − 1). Objective: the affine expected cost (:func:`cost_coefficients`).
Optional monotonicity rows p_s − q_s ≤ 0 (a higher score is never less likely to be positive).

Feasibility: p_s = q_s = α/(α + β) gives every smoothed rate that value (any constant ≥ δ without
smoothing), so the LP is always feasible when δ ≤ α/(α + β); a non-optimal HiGHS status is raised as
an error, never ignored. Solutions are verified: every row holds on the fitting data to within
``1e-8`` (HiGHS runs with a 1e-9 primal feasibility tolerance).

Solver: HiGHS through ``highspy`` (its low-level ``_Highs`` class, without the Python callbacks of
``highspy.Highs``) with the settings ``scipy.optimize.linprog(method="highs")`` used before: dual
simplex, presolve on, primal and dual feasibility tolerances 1e-9. :func:`solve_rtdp_lp` builds and
solves one LP from scratch. :class:`RTDPProgram` solves a sequence of LPs of one structure (the
same constrained intersections, ε, ``outcomes``, ``monotone`` and δ; other costs, rate
coefficients and right-hand sides), as the ``overall`` variant's threshold search does: it keeps
one HiGHS model, changes only the coefficients that differ from the previous LP, and re-solves from
the previous optimal basis (HiGHS skips presolve when it has a valid basis). The optimal value is
the same; where the LP has several optimal vertices the one returned may differ, so the LP whose
solution is the fitted rule is always solved from scratch (:func:`solve_rtdp_lp`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import highspy
import numpy as np

# highspy.Highs is this class plus Python callbacks (and a banner on stdout at its first
# construction); highspy exports _Highs in its __all__ for plain use
from highspy._core import _Highs
from scipy import sparse

from fairengine.errors import FairEngineError
from fairengine.mitigation.rates import AffineRate

#: Largest allowed violation of any LP row on the fitting data.
FEASIBILITY_TOL = 1e-8

#: The HiGHS options of every solve: those ``scipy.optimize.linprog(method="highs")`` sets
#: (scipy 1.17), with the 1e-9 feasibility tolerances this module always asked for.
HIGHS_OPTIONS: tuple[tuple[str, bool | int | float | str], ...] = (
    ("presolve", "on"),
    ("highs_debug_level", 0),
    ("dual_feasibility_tolerance", 1e-9),
    ("log_to_console", False),
    ("output_flag", False),
    ("primal_feasibility_tolerance", 1e-9),
    ("simplex_strategy", 1),  # dual simplex
)

_S = highspy.HighsModelStatus
#: HiGHS model status -> the status number and message scipy's linprog reported (0 optimal,
#: 1 iteration or time limit, 2 infeasible, 3 unbounded, 4 numerical or other problem)
_LINPROG_STATUS: dict[highspy.HighsModelStatus, tuple[int, str]] = {
    _S.kModelError: (2, ""),
    _S.kTimeLimit: (1, "Time limit reached. "),
    _S.kIterationLimit: (1, "Iteration limit reached. "),
    _S.kInfeasible: (2, "The problem is infeasible. "),
    _S.kUnbounded: (3, "The problem is unbounded. "),
    _S.kUnboundedOrInfeasible: (4, "The problem is unbounded or infeasible. "),
}


class MitigationError(FairEngineError):
    """The mitigation optimisation failed (a solver status other than optimal, or a violated
    constraint after solving); always a bug or a numerical problem, never silently ignored."""


@dataclass
class LPSolution:
    """An optimal (p, q) for fixed thresholds.

    ``value`` is the expected cost per unit weight including the constant; ``bounds`` the (m, M)
    of each block; ``max_violation`` the largest row violation on the fitting data;
    ``binding[i]`` per intersection which side of block i's window it sits on (``"max"``,
    ``"min"`` or ``""``), for the point (non-scenario) blocks.
    """

    p: np.ndarray
    q: np.ndarray
    value: float
    bounds: list[tuple[float, float]]
    max_violation: float
    binding: list[np.ndarray] = field(default_factory=list)
    iterations: int = 0


@dataclass(frozen=True)
class _Layout:
    """Where every coefficient of an RTDP LP sits: the sparsity pattern (``rows``, ``cols``, in
    the order the rows are written in the module docstring), the column bounds, and the index of
    each constrained block's intersections."""

    k: int
    epsilon: float
    outcomes: str
    monotone: bool
    rate_floor: float
    index: tuple[np.ndarray, ...]
    rows: np.ndarray
    cols: np.ndarray
    n_rows: int
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def build(
        cls,
        k: int,
        masks: list[np.ndarray],
        epsilon: float,
        outcomes: str,
        monotone: bool,
        rate_floor: float,
    ) -> _Layout:
        index = tuple(np.flatnonzero(m) for m in masks)
        nb = len(index)
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        r0 = 0
        for i, idx in enumerate(index):
            n = idx.size
            m_col, big_m_col = 2 * k + 2 * i, 2 * k + 2 * i + 1
            up = r0 + np.arange(n)  # a p + b q − M ≤ −c
            lo = r0 + n + np.arange(n)  # −a p − b q + m ≤ c
            rows += [up, up, up, lo, lo, lo]
            cols += [idx, k + idx, np.full(n, big_m_col), idx, k + idx, np.full(n, m_col)]
            r0 += 2 * n
            for _ in range(2 if outcomes == "both" else 1):  # the window row(s)
                rows.append(np.array([r0, r0]))
                cols.append(np.array([big_m_col, m_col]))
                r0 += 1
        if monotone:  # p_s − q_s ≤ 0
            mono = r0 + np.arange(k)
            rows += [mono, mono]
            cols += [np.arange(k), k + np.arange(k)]
            r0 += k
        nvar = 2 * k + 2 * nb
        return cls(
            k=k,
            epsilon=epsilon,
            outcomes=outcomes,
            monotone=monotone,
            rate_floor=rate_floor,
            index=index,
            rows=np.concatenate(rows).astype(np.intp) if rows else np.zeros(0, np.intp),
            cols=np.concatenate(cols).astype(np.intp) if cols else np.zeros(0, np.intp),
            n_rows=r0,
            lower=np.concatenate([np.zeros(2 * k), np.full(2 * nb, float(rate_floor))]),
            upper=np.ones(nvar),
        )

    @property
    def n_cols(self) -> int:
        return int(self.lower.shape[0])

    def coefficients(self, blocks: list[AffineRate]) -> tuple[np.ndarray, np.ndarray]:
        """The matrix values (in the order of ``rows``/``cols``) and the right-hand sides."""
        e = math.exp(self.epsilon) if self.index else 1.0
        vals: list[np.ndarray] = []
        rhs: list[np.ndarray] = []
        for blk, idx in zip(blocks, self.index, strict=True):
            a, b = blk.a[idx], blk.b[idx]
            n = idx.size
            vals += [a, b, -np.ones(n), -a, -b, np.ones(n), np.array([1.0, -e])]
            rhs += [-blk.c[idx], blk.c[idx], np.array([0.0])]
            if self.outcomes == "both":  # e^ε M − m ≤ e^ε − 1
                vals.append(np.array([e, -1.0]))
                rhs.append(np.array([e - 1.0]))
        if self.monotone:
            vals += [np.ones(self.k), -np.ones(self.k)]
            rhs.append(np.zeros(self.k))
        if not vals:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(vals).astype(np.float64), np.concatenate(rhs).astype(np.float64)


def _constrained(blocks: list[AffineRate], epsilon: float) -> list[AffineRate]:
    return [] if math.isinf(epsilon) else [b for b in blocks if b.mask.any()]


def _new_highs() -> _Highs:
    h = _Highs()
    for name, value in HIGHS_OPTIONS:
        h.setOptionValue(name, value)
    return h


def _pass_model(
    h: _Highs, layout: _Layout, cost: np.ndarray, vals: np.ndarray, rhs: np.ndarray
) -> sparse.csr_array | None:
    """Load the LP into ``h`` as scipy's linprog did (column-wise matrix, rows ``−inf ≤ A x ≤
    rhs``); returns the row-wise matrix (None without rows)."""
    a_ub = None
    if layout.n_rows:
        a_ub = sparse.csr_array(
            (vals, (layout.rows, layout.cols)), shape=(layout.n_rows, layout.n_cols)
        )
        a = a_ub.tocsc()
        start, index, value = a.indptr, a.indices, a.data
    else:
        start, index, value = np.zeros(layout.n_cols + 1, np.int32), np.zeros(0, np.int32), vals
    lp = highspy.HighsLp()
    lp.num_col_ = layout.n_cols
    lp.num_row_ = layout.n_rows
    lp.a_matrix_.num_col_ = layout.n_cols
    lp.a_matrix_.num_row_ = layout.n_rows
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.col_cost_ = cost
    lp.col_lower_ = layout.lower
    lp.col_upper_ = layout.upper
    lp.row_lower_ = np.full(layout.n_rows, -highspy.kHighsInf)
    lp.row_upper_ = rhs
    lp.a_matrix_.start_ = start
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    if h.passModel(lp) == highspy.HighsStatus.kError:
        raise MitigationError(f"HiGHS could not load the RTDP linear program: {layout.k=}")
    return a_ub


def _run(h: _Highs) -> tuple[bool, int, str, float, np.ndarray | None, int]:
    """Solve; (optimal, scipy-style status, message, objective, x, simplex iterations)."""
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    nit = int(info.simplex_iteration_count)
    if status == highspy.HighsModelStatus.kOptimal:
        x = np.asarray(h.getSolution().col_value, dtype=np.float64)
        return True, 0, "", float(info.objective_function_value), x, nit
    code, text = _LINPROG_STATUS.get(status, (4, ""))
    message = (
        f"{text}(HiGHS Status {int(status)}: model_status is {h.modelStatusToString(status)}; "
        f"primal_status is {h.solutionStatusToString(info.primal_solution_status)})"
    )
    return False, code, message, math.nan, None, nit


def _failure(code: int, message: str, k: int, nb: int, epsilon: float) -> MitigationError:
    return MitigationError(
        f"the RTDP linear program was not solved (HiGHS status {code}: {message}); "
        f"it is always feasible for rate_floor <= alpha/(alpha+beta), so this is a numerical "
        f"problem: K={k}, {nb} constrained block(s), epsilon={epsilon}"
    )


def _solution(
    layout: _Layout,
    x: np.ndarray,
    fun: float,
    constant: float,
    slack: np.ndarray | None,
    n_point_blocks: int | None,
    iterations: int,
) -> LPSolution:
    """Clip, verify every row on the fitting data, and read the binding sides."""
    k, nb = layout.k, len(layout.index)
    x = np.clip(x, layout.lower, layout.upper)
    violation = 0.0
    if slack is not None and slack.size:
        violation = float(max(0.0, -slack.min()))
    if violation > FEASIBILITY_TOL:
        raise MitigationError(
            f"the RTDP solution violates a constraint by {violation:.3g} on the fitting data "
            f"(tolerance {FEASIBILITY_TOL}); epsilon={layout.epsilon}"
        )
    binding = []
    npb = nb if n_point_blocks is None else min(n_point_blocks, nb)
    r0 = 0
    for i, idx in enumerate(layout.index):
        n = idx.size
        if i < npb and slack is not None:
            side = np.full(k, "", dtype=object)
            side[idx[slack[r0 + n : r0 + 2 * n] < 1e-7]] = "min"
            side[idx[slack[r0 : r0 + n] < 1e-7]] = "max"
            binding.append(side)
        r0 += 2 * n + (2 if layout.outcomes == "both" else 1)
    pairs = [(float(x[2 * k + 2 * i]), float(x[2 * k + 2 * i + 1])) for i in range(nb)]
    return LPSolution(
        p=x[:k],
        q=x[k : 2 * k],
        value=float(fun + constant),
        bounds=pairs,
        max_violation=violation,
        binding=binding,
        iterations=iterations,
    )


def solve_rtdp_lp(
    cost_p: np.ndarray,
    cost_q: np.ndarray,
    constant: float,
    blocks: list[AffineRate],
    epsilon: float,
    *,
    outcomes: str = "positive",
    rate_floor: float = 1e-3,
    monotone: bool = True,
    n_point_blocks: int | None = None,
) -> LPSolution:
    """Minimise the expected cost subject to the ε window on every block (module docstring),
    solved from scratch.

    ``epsilon = inf`` drops the fairness rows (the cost-optimal post-processor). The first
    ``n_point_blocks`` blocks (default all) are reported in ``binding``.
    """
    k = int(np.asarray(cost_p).shape[0])
    use = _constrained(blocks, epsilon)
    layout = _Layout.build(k, [b.mask for b in use], epsilon, outcomes, monotone, rate_floor)
    vals, rhs = layout.coefficients(use)
    cost = np.concatenate([cost_p, cost_q, np.zeros(2 * len(use))]).astype(np.float64)
    h = _new_highs()
    a_ub = _pass_model(h, layout, cost, vals, rhs)
    ok, code, message, fun, x, nit = _run(h)
    if not ok or x is None:
        raise _failure(code, message, k, len(use), epsilon)
    slack = None if a_ub is None else rhs - a_ub @ np.clip(x, layout.lower, layout.upper)
    return _solution(layout, x, fun, constant, slack, n_point_blocks, nit)


class RTDPProgram:
    """A sequence of RTDP LPs of one structure, each re-solved from the previous optimal basis
    (module docstring).

    Parameters
    ----------
    k : number of intersections.
    epsilon, outcomes, rate_floor, monotone : as :func:`solve_rtdp_lp`.

    :meth:`solve` takes the arguments of :func:`solve_rtdp_lp` that change between the LPs. The
    first call, and any call whose constrained blocks differ from the previous one's, loads the
    model from scratch; a call whose warm re-solve is not optimal is solved again from scratch
    (which raises :class:`MitigationError` as :func:`solve_rtdp_lp` does). ``n_warm_``,
    ``n_cold_`` count the two kinds of solve.
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        *,
        outcomes: str = "positive",
        rate_floor: float = 1e-3,
        monotone: bool = True,
    ) -> None:
        self.k = k
        self.epsilon = epsilon
        self.outcomes = outcomes
        self.rate_floor = rate_floor
        self.monotone = monotone
        self.n_warm_ = 0
        self.n_cold_ = 0
        self._h: _Highs | None = None
        self._layout: _Layout | None = None
        self._vals = np.zeros(0)
        self._rhs = np.zeros(0)
        self._cost = np.zeros(0)
        self._masks: tuple[np.ndarray, ...] = ()

    def _same_structure(self, use: list[AffineRate]) -> bool:
        return (
            self._layout is not None
            and len(use) == len(self._masks)
            and all(np.array_equal(b.mask, m) for b, m in zip(use, self._masks, strict=True))
        )

    def solve(
        self,
        cost_p: np.ndarray,
        cost_q: np.ndarray,
        constant: float,
        blocks: list[AffineRate],
        *,
        n_point_blocks: int | None = None,
    ) -> LPSolution:
        """The LP of :func:`solve_rtdp_lp` for these costs and blocks (same optimal value)."""
        if int(np.asarray(cost_p).shape[0]) != self.k:
            raise ValueError(
                f"cost_p has {np.asarray(cost_p).shape[0]} entries, expected k={self.k}"
            )
        use = _constrained(blocks, self.epsilon)
        cost = np.concatenate([cost_p, cost_q, np.zeros(2 * len(use))]).astype(np.float64)
        if self._h is None or not self._same_structure(use):
            return self._cold(cost, constant, use, n_point_blocks)
        layout = self._layout
        assert layout is not None
        vals, rhs = layout.coefficients(use)
        h = self._h
        for j in np.flatnonzero(vals != self._vals):
            h.changeCoeff(int(layout.rows[j]), int(layout.cols[j]), float(vals[j]))
        changed = np.flatnonzero(cost != self._cost)
        if changed.size:
            h.changeColsCost(changed.size, changed.astype(np.int32), cost[changed])
        for j in np.flatnonzero(rhs != self._rhs):
            h.changeRowBounds(int(j), -highspy.kHighsInf, float(rhs[j]))
        self._vals, self._rhs, self._cost = vals, rhs, cost
        ok, _, _, fun, x, nit = _run(h)
        if not ok or x is None:  # decide on a fresh solve, with solve_rtdp_lp's error
            return self._cold(cost, constant, use, n_point_blocks)
        self.n_warm_ += 1
        slack = None
        if layout.n_rows:
            xc = np.clip(x, layout.lower, layout.upper)
            activity = np.bincount(
                layout.rows, weights=vals * xc[layout.cols], minlength=layout.n_rows
            )
            slack = rhs - activity
        return _solution(layout, x, fun, constant, slack, n_point_blocks, nit)

    def _cold(
        self,
        cost: np.ndarray,
        constant: float,
        use: list[AffineRate],
        n_point_blocks: int | None,
    ) -> LPSolution:
        self._h = None
        layout = _Layout.build(
            self.k,
            [b.mask for b in use],
            self.epsilon,
            self.outcomes,
            self.monotone,
            self.rate_floor,
        )
        vals, rhs = layout.coefficients(use)
        h = _new_highs()
        a_ub = _pass_model(h, layout, cost, vals, rhs)
        ok, code, message, fun, x, nit = _run(h)
        if not ok or x is None:
            raise _failure(code, message, self.k, len(use), self.epsilon)
        self.n_cold_ += 1
        self._h, self._layout = h, layout
        self._masks = tuple(np.array(b.mask, dtype=bool) for b in use)
        self._vals, self._rhs, self._cost = vals, rhs, cost
        slack = None if a_ub is None else rhs - a_ub @ np.clip(x, layout.lower, layout.upper)
        return _solution(layout, x, fun, constant, slack, n_point_blocks, nit)
