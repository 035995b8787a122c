"""MDSS value-subset scan: the best subset of values per feature (Zhang & Neill 2016).

The search space is every subgroup ∏_f V_f with V_f a non-empty subset of the values of feature
f (V_f = all values leaves f unrestricted), scored by MDSS's Bernoulli score
F(S) = max_q [O_S log q − Σ_{i∈S} log(1 − p_i + q p_i)] (q > 1 for ``positive``, q < 1 for
``negative``; :func:`~fairengine.subgroup_scan.statistics.bernoulli_score`).

**Coordinate ascent with restarts** (Neill 2012, fast generalized subset scan; AIF360's
``MDSS.scan``): start from all features unrestricted (first restart) or random value subsets
(the others: each value kept with one random probability per restart, a feature's restriction
dropped if it would leave fewer than 10 rows, as AIF360's ``get_random_subset``), then
repeatedly optimise one feature's value subset with the others fixed, until a
full pass improves nothing. The result is a local optimum; restarts make the global one likely.

**One feature's optimal subset, exactly** (the linear-time subset scanning property, Speakman,
McFowland & Neill 2016, for this score): for a fixed q the score is additive over values,
F_V(q) = Σ_{v∈V} F_v(q), so the best V at q is {v : F_v(q) > 0}. Each F_v is concave in log q
with F_v(1) = 0, so (``positive``) it is positive exactly on (1, r_v) for its root r_v > 1
(values with O_v ≤ E_v have none). Hence the optimal set at any q is a prefix of the values
sorted by r_v decreasing, and max_V max_q F_V(q) = max_j F(P_j) over the L prefixes P_j, each
scored at its own q̂ (for ``negative``: roots r_v < 1, sorted increasing). L + 1 evaluations,
no approximation.

References: Zhang, Z. & Neill, D. B. (2016) Identifying significant predictive bias in
classifiers. arXiv:1611.08292. Neill, D. B. (2012) Fast subset scan for spatial pattern
detection. JRSS-B 74:337-360. Speakman, S., McFowland, E. & Neill, D. B. (2016) Scalable
detection of anomalous patterns with connectivity constraints. J. Comput. Graph. Stat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairengine.subgroup_scan.search_space import CodedFeatures, SubgroupScanError
from fairengine.subgroup_scan.statistics import bernoulli_score

_ROOT_BISECTIONS = 64
_LOG_Q_LIMIT = 50.0


@dataclass(frozen=True)
class MdssSubset:
    """The best value subset found: ``values`` per restricted feature (feature index, codes),
    its readable ``rule``, ``score`` and ``q_hat``, ``size`` rows with ``observed`` Σy and
    ``expected`` Σp."""

    values: tuple[tuple[int, tuple[int, ...]], ...]
    rule: str
    score: float
    q_hat: float
    size: int
    observed: float
    expected: float


def _roots(
    codes: np.ndarray, y: np.ndarray, p: np.ndarray, n_values: int, sign: float
) -> np.ndarray:
    """Per value, log of the root r_v of F_v on the ``sign`` side of log q = 0 (0 when F_v is
    never positive there; ±_LOG_Q_LIMIT when it stays positive)."""
    o = np.bincount(codes, weights=y, minlength=n_values)
    e = np.bincount(codes, weights=p, minlength=n_values)
    has = np.bincount(codes, minlength=n_values) > 0
    live = has & (sign * (o - e) > 0)
    lo = np.zeros(n_values)  # |log q| where F > 0 (or 0)
    hi = np.full(n_values, _LOG_Q_LIMIT)

    def f(x: np.ndarray) -> np.ndarray:
        q = np.exp(sign * x)
        logs = np.bincount(codes, weights=np.log1p(p * (q[codes] - 1.0)), minlength=n_values)
        return o * sign * x - logs

    still = f(hi) > 0
    for _ in range(_ROOT_BISECTIONS):
        mid = 0.5 * (lo + hi)
        pos = f(mid) > 0
        lo = np.where(pos, mid, lo)
        hi = np.where(pos, hi, mid)
    out = np.where(still, _LOG_Q_LIMIT, 0.5 * (lo + hi))
    return np.where(live, out, 0.0)


def _best_values(
    codes: np.ndarray, y: np.ndarray, p: np.ndarray, n_values: int, direction: str
) -> tuple[np.ndarray, float, float]:
    """Optimal value subset of one feature over the given rows: (mask, score, q̂)."""
    sign = 1.0 if direction == "positive" else -1.0
    roots = _roots(codes, y, p, n_values, sign)
    order = np.argsort(-roots, kind="stable")
    best = (np.zeros(n_values, dtype=bool), 0.0, 1.0)
    chosen = np.zeros(n_values, dtype=bool)
    for v in order:
        if roots[v] <= 0:
            break
        chosen[v] = True
        rows = chosen[codes]
        res = bernoulli_score(float(y[rows].sum()), p[rows], direction)
        if res.score > best[1]:
            best = (chosen.copy(), res.score, res.q_hat)
    return best


def mdss_scan(
    coded: CodedFeatures,
    labels: np.ndarray,
    probability: np.ndarray,
    direction: str = "positive",
    restarts: int = 10,
    seed: int = 0,
    max_passes: int = 100,
) -> MdssSubset:
    """Best MDSS value subset by coordinate ascent with ``restarts`` starts (module docstring).

    ``direction``: ``positive`` finds observed above predicted (q > 1, the model
    under-predicts; AIF360 ``overpredicted=False``), ``negative`` the reverse."""
    if direction not in ("positive", "negative"):
        raise SubgroupScanError(f"direction must be 'positive' or 'negative', got {direction!r}")
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
        raise SubgroupScanError(f"restarts must be a whole number >= 1, got {restarts!r}")
    y = np.asarray(labels, dtype=np.float64)
    p = np.asarray(probability, dtype=np.float64)
    codes = coded.codes
    if y.shape != (coded.n_rows,) or p.shape != (coded.n_rows,):
        raise SubgroupScanError("labels and probability must have one value per row")
    sizes = [len(f.labels) for f in coded.features]
    n_f = len(sizes)
    rng = np.random.default_rng(seed)
    best_masks: list[np.ndarray] = [np.ones(k, dtype=bool) for k in sizes]
    best_score, best_q = -1.0, 1.0
    for r in range(restarts):
        if r == 0:
            masks = [np.ones(k, dtype=bool) for k in sizes]
        else:  # as AIF360: each value kept with a random probability, ≥ 10 rows left
            prob = rng.random()
            masks = [np.ones(k, dtype=bool) for k in sizes]
            rows = np.ones(coded.n_rows, dtype=bool)
            for f in rng.permutation(n_f):
                m = rng.random(sizes[f]) < prob
                if m.any() and not m.all():
                    kept = rows & m[codes[:, f]]
                    if kept.sum() >= 10:
                        masks[f], rows = m, kept
        score, q_hat = -1.0, 1.0
        for _ in range(max_passes):
            improved = False
            for f in rng.permutation(n_f):
                rows = np.ones(coded.n_rows, dtype=bool)
                for g in range(n_f):
                    if g != f:
                        rows &= masks[g][codes[:, g]]
                mask, s, q = _best_values(codes[rows, f], y[rows], p[rows], sizes[f], direction)
                if s > score + 1e-10:
                    score, q_hat, improved = s, q, True
                    masks[f] = mask if mask.any() else np.ones(sizes[f], dtype=bool)
            if not improved:
                break
        if score > best_score:
            best_score, best_q, best_masks = score, q_hat, [m.copy() for m in masks]
    rows = np.ones(coded.n_rows, dtype=bool)
    values: list[tuple[int, tuple[int, ...]]] = []
    parts: list[str] = []
    for f, m in enumerate(best_masks):
        rows &= m[codes[:, f]]
        if not m.all():
            vals = tuple(int(v) for v in np.flatnonzero(m))
            values.append((f, vals))
            feat = coded.features[f]
            parts.append(" or ".join(feat.labels[v] for v in vals))
    rule = " and ".join(f"({x})" if " or " in x else x for x in parts) or "all rows"
    return MdssSubset(
        values=tuple(values),
        rule=rule,
        score=max(best_score, 0.0),
        q_hat=best_q,
        size=int(rows.sum()),
        observed=float(y[rows].sum()),
        expected=float(p[rows].sum()),
    )
