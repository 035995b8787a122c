"""The RTDP LP as it was solved before highspy (FairEngine up to 2026-11-26): one
``scipy.optimize.linprog(method="highs")`` call per LP, the same code verbatim. The reference the
tests (``test_mitigation_lp_highs.py``) and ``benchmarks/mitigation_lp_speed.py`` compare the
highspy path with; :func:`use_linprog` makes :class:`RTDPPostProcessor` solve every LP with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from fairengine.mitigation import postprocessor
from fairengine.mitigation.lp import FEASIBILITY_TOL, LPSolution, MitigationError
from fairengine.mitigation.rates import AffineRate


def solve_rtdp_lp_linprog(
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
    """Minimise the expected cost subject to the ε window on every block (module docstring).

    ``epsilon = inf`` drops the fairness rows (the cost-optimal post-processor). The first
    ``n_point_blocks`` blocks (default all) are reported in ``binding``.
    """
    k = int(np.asarray(cost_p).shape[0])
    use = [] if math.isinf(epsilon) else [b for b in blocks if b.mask.any()]
    nb = len(use)
    nvar = 2 * k + 2 * nb
    rows, cols, vals, rhs = [], [], [], []
    r0 = 0
    e = math.exp(epsilon) if nb else 1.0
    for i, blk in enumerate(use):
        idx = np.flatnonzero(blk.mask)
        n = idx.size
        m_col, big_m_col = 2 * k + 2 * i, 2 * k + 2 * i + 1
        up = r0 + np.arange(n)  # a p + b q − M ≤ −c
        lo = r0 + n + np.arange(n)  # −a p − b q + m ≤ c
        rows += [up, up, up, lo, lo, lo]
        cols += [idx, k + idx, np.full(n, big_m_col), idx, k + idx, np.full(n, m_col)]
        vals += [blk.a[idx], blk.b[idx], -np.ones(n), -blk.a[idx], -blk.b[idx], np.ones(n)]
        rhs += [-blk.c[idx], blk.c[idx]]
        r0 += 2 * n
        rows.append(np.array([r0, r0]))  # M − e^ε m ≤ 0
        cols.append(np.array([big_m_col, m_col]))
        vals.append(np.array([1.0, -e]))
        rhs.append(np.array([0.0]))
        r0 += 1
        if outcomes == "both":  # e^ε M − m ≤ e^ε − 1
            rows.append(np.array([r0, r0]))
            cols.append(np.array([big_m_col, m_col]))
            vals.append(np.array([e, -1.0]))
            rhs.append(np.array([e - 1.0]))
            r0 += 1
    if monotone:  # p_s − q_s ≤ 0
        mono = r0 + np.arange(k)
        rows += [mono, mono]
        cols += [np.arange(k), k + np.arange(k)]
        vals += [np.ones(k), -np.ones(k)]
        rhs.append(np.zeros(k))
        r0 += k
    c = np.concatenate([cost_p, cost_q, np.zeros(2 * nb)])
    bounds = [(0.0, 1.0)] * (2 * k) + [(rate_floor, 1.0)] * (2 * nb)
    if r0:
        a_ub = sparse.csr_array(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(r0, nvar),
        )
        b_ub = np.concatenate(rhs)
    else:
        a_ub, b_ub = None, None
    res = linprog(
        c,
        A_ub=a_ub,
        b_ub=b_ub,
        bounds=bounds,
        method="highs",
        options={"primal_feasibility_tolerance": 1e-9, "dual_feasibility_tolerance": 1e-9},
    )
    if res.status != 0:
        raise MitigationError(
            f"the RTDP linear program was not solved (HiGHS status {res.status}: {res.message}); "
            f"it is always feasible for rate_floor <= alpha/(alpha+beta), so this is a numerical "
            f"problem: K={k}, {nb} constrained block(s), epsilon={epsilon}"
        )
    x = np.clip(res.x, [b[0] for b in bounds], [b[1] for b in bounds])
    violation = 0.0
    slack = None
    if a_ub is not None:
        slack = b_ub - a_ub @ x
        violation = float(max(0.0, -slack.min()))
    if violation > FEASIBILITY_TOL:
        raise MitigationError(
            f"the RTDP solution violates a constraint by {violation:.3g} on the fitting data "
            f"(tolerance {FEASIBILITY_TOL}); epsilon={epsilon}"
        )
    p, q = x[:k], x[k : 2 * k]
    binding = []
    npb = nb if n_point_blocks is None else min(n_point_blocks, nb)
    r0 = 0
    for i, blk in enumerate(use):
        idx = np.flatnonzero(blk.mask)
        n = idx.size
        if i < npb and slack is not None:
            side = np.full(k, "", dtype=object)
            side[idx[slack[r0 + n : r0 + 2 * n] < 1e-7]] = "min"
            side[idx[slack[r0 : r0 + n] < 1e-7]] = "max"
            binding.append(side)
        r0 += 2 * n + (2 if outcomes == "both" else 1)
    pairs = [(float(x[2 * k + 2 * i]), float(x[2 * k + 2 * i + 1])) for i in range(nb)]
    return LPSolution(
        p=p,
        q=q,
        value=float(res.fun + constant),
        bounds=pairs,
        max_violation=violation,
        binding=binding,
        iterations=int(getattr(res, "nit", 0) or 0),
    )


class LinprogProgram:
    """:class:`fairengine.mitigation.lp.RTDPProgram`'s interface, every LP through linprog."""

    def __init__(
        self,
        k: int,
        epsilon: float,
        *,
        outcomes: str = "positive",
        rate_floor: float = 1e-3,
        monotone: bool = True,
    ) -> None:
        self.epsilon = epsilon
        self.kw = {"outcomes": outcomes, "rate_floor": rate_floor, "monotone": monotone}

    def solve(
        self,
        cost_p: np.ndarray,
        cost_q: np.ndarray,
        constant: float,
        blocks: list[AffineRate],
        *,
        n_point_blocks: int | None = None,
    ) -> LPSolution:
        return solve_rtdp_lp_linprog(
            cost_p,
            cost_q,
            constant,
            blocks,
            self.epsilon,
            n_point_blocks=n_point_blocks,
            **self.kw,  # type: ignore[arg-type]
        )


@contextmanager
def use_linprog() -> Iterator[None]:
    """Within the block, :class:`RTDPPostProcessor` solves its LPs as before highspy."""
    saved = postprocessor.solve_rtdp_lp, postprocessor.RTDPProgram
    postprocessor.solve_rtdp_lp = solve_rtdp_lp_linprog
    postprocessor.RTDPProgram = LinprogProgram  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        postprocessor.solve_rtdp_lp, postprocessor.RTDPProgram = saved  # type: ignore[misc]
