"""Joint permutations of one protected attribute: Westfall–Young step-down maxT exceedances.

The family is every studentized group gap of one attribute with G groups, for each metric μ of
a list of ratio metrics (:mod:`fairengine.permutation.metrics`) and each pair of group codes
a < b:

    Z_{μ,ab} = (m̂_μ(a) − m̂_μ(b)) / se,   se = √(Var m̂_μ(a) + Var m̂_μ(b)),

each variance floored at (1/(2B))² (:func:`floored_statistic`: a pseudo-group with a rate of 0
or 1 would otherwise give ±∞ and dominate every maximum),

with m̂_μ(g) = Σ_{i∈g} a_i / Σ_{i∈g} b_i and its delta-method variance from the five per-group
sums (A, B, AA, AB, BB) (the studentization of DiCiccio, Hong, Shah & Goel 2020, *Evaluating
Fairness Using Permutation Tests*, KDD, §3.3). Columns are ordered metric by metric, and within
a metric by pair (0,1), (0,2), …, (G−2,G−1). A column whose observed Z is NaN (the metric is
undefined in a group: no rows it conditions on) is left out of the family.

**One permutation per draw.** Draw b relabels the rows with ONE permutation π_b of the group
codes, shared by every metric and every pair, so that row b is a draw from the *joint*
permutation distribution of the statistic vector (``docs/maxt.md``, "Building the joint
permutation matrix"). The random stream is used in a documented, chunk-independent way so that
callers can reproduce the permutations: for draw b = 1, 2, … in turn, and for each stratum in
turn (``all_rows``: one stratum, all rows; ``within_outcome``: the rows with y = 0, then the
rows with y = 1, DiCiccio et al. §3.1), the stratum's codes, in row order, are replaced by
``rng.permutation(codes[stratum])``. (The permutations are drawn with replacement, so the B
draws are i.i.d.)

**Per-group sums, vectorised.** The sums are linear in the rows, so the sums of the c draws of a
chunk are one ``np.bincount`` over the offsets b·G + π_b(code) of the flattened (c, n) array of
permuted codes, per distinct sum column. When the rows take few distinct values of the
(n, 5·#metrics) matrix of per-row contributions (hard 0/1 predictions without weights have at
most 4: the (y, ŷ) cells), a single bincount of (draw, group, row type) counts is multiplied by
the K distinct rows instead. Peak extra memory is O(c·n) with c chosen so that it stays below
``max_chunk_bytes`` (32 MiB by default).

**maxT exceedances** (Westfall & Young 1993, *Resampling-Based Multiple Testing*, Algorithm 2.8;
Ge, Dudoit & Speed 2003, TEST 12:1–77, Box 2). Each statistic is mapped to t = |Z|
(two-sided), Z (greater) or −Z (less), NaN → −∞. With the defined tests in step-down order
t_(1) ≥ … ≥ t_(m') (ties in column order), the successive maxima of draw b are
u_{b,j} = max_{k ≥ j} t*_{b,(k)}, and :func:`maxt_exceedances` returns, per test,

    S_(j) = #{b : u_{b,j} ≥ t_(j) − γ_j},   γ_j = 100 ε |t_(j)| (0 for infinite t),

the tie tolerance of :mod:`fairengine.maxt`. S_(j) ~ Binomial(B, p̃_(j)), where
p̃_(j) = P(u*_j ≥ t_(j)) is the ideal maxT adjusted p-value *before* the monotonicity step, so a
sequential Monte-Carlo engine (:mod:`fairengine.sequential_mc`) can treat each S_j as one Monte
Carlo test. :func:`maxt_pvalues_from_counts` turns counts into

    p̂_(j) = (1 + S_(j)) / (1 + B),   p̂_(j) ← max(p̂_(1), …, p̂_(j)),

which, with the same permutations, equals :func:`fairengine.maxt.maxt_adjusted_pvalues`
applied to the (B, m) matrix of permuted statistics. The "+1" is the identity permutation.

A NaN permuted statistic (e.g. a pseudo-group without positive labels for ``tpr``) is −∞: it
never attains the maximum and never counts as extreme, as in :mod:`fairengine.maxt`. The
subset-pivotality caveat of ``docs/maxt.md`` applies: FWER control is exact under the complete
null with exchangeable codes and approximate (asymptotic, thanks to studentization) otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairengine.errors import DataContractError
from fairengine.maxt import ALTERNATIVES, TIE_RTOL
from fairengine.permutation.metrics import (
    ALIASES,
    RATIO_METRICS,
    ratio_value_variance,
    row_values,
    studentize,
)

SCHEMES: tuple[str, ...] = ("all_rows", "within_outcome")
#: Default bound on the extra memory of one chunk of draws (bytes).
DEFAULT_CHUNK_BYTES = 32 * 2**20
_N_SUMS = 5


@dataclass(frozen=True)
class JointFamily:
    """All (metric, pair a<b) studentized gaps Z = (m_a − m_b)/se of one attribute.

    ``labels[j]`` = (metric, a, b) of column j; ``observed`` (m,) the observed Z (NaN where
    undefined: such columns are out of the family, ``tested`` False); ``t_observed`` the mapped
    statistic |Z|, Z or −Z; ``order`` the defined columns in step-down order (most significant
    first, ties in column order). The remaining fields hold the data in the row order used to
    draw permutations (rows grouped by stratum) and are internal.
    """

    metrics: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...]
    labels: tuple[tuple[str, int, int], ...]
    observed: np.ndarray
    order: np.ndarray
    t_observed: np.ndarray
    tested: np.ndarray
    n_groups: int
    alternative: str
    scheme: str
    n_rows: int
    _codes: np.ndarray = field(repr=False)
    _strata: tuple[tuple[int, int], ...] = field(repr=False)
    _row_index: np.ndarray = field(repr=False)
    _types: np.ndarray | None = field(repr=False)
    _type_values: np.ndarray | None = field(repr=False)
    _columns: np.ndarray | None = field(repr=False)
    _column_map: np.ndarray | None = field(repr=False)

    @property
    def n_tests(self) -> int:
        """Number of columns m (defined or not)."""
        return len(self.labels)

    @property
    def tested_columns(self) -> np.ndarray:
        """Indices of the defined columns, increasing."""
        return np.flatnonzero(self.tested)


@dataclass(frozen=True)
class JointMaxTResult:
    """Result of :func:`joint_maxt_test` (arrays in column order, NaN for undefined columns).

    ``observed`` Z; ``adjusted_pvalues`` the maxT adjusted p-values; ``raw_pvalues`` the
    marginal permutation p-values (1 + #{b : t*_bj ≥ t_j}) / (1 + B); ``resamples`` B.
    """

    labels: tuple[tuple[str, int, int], ...]
    observed: np.ndarray
    adjusted_pvalues: np.ndarray
    raw_pvalues: np.ndarray
    resamples: int
    order: np.ndarray
    alternative: str
    scheme: str

    def rejected(self, alpha: float = 0.05) -> np.ndarray:
        """Boolean (m,) array: adjusted p-value ≤ ``alpha`` (False for undefined columns)."""
        if not 0.0 < alpha < 1.0:
            raise DataContractError(f"alpha must lie in (0, 1), got {alpha!r}")
        with np.errstate(invalid="ignore"):
            return np.asarray(self.adjusted_pvalues <= alpha)


# ----------------------------------------------------------------------------- public API


def joint_family(
    y: Any,
    prediction: Any,
    codes: Any,
    n_groups: int,
    metrics: Sequence[str],
    *,
    weights: Any = None,
    probability: Any = None,
    alternative: str = "two-sided",
    scheme: str = "all_rows",
    groups: Sequence[int] | None = None,
) -> JointFamily:
    """The family of studentized gaps of one attribute and its observed statistics.

    ``y`` 0/1 labels; ``prediction`` 0/1 positive predictions or probabilities in [0, 1]
    (expected counts); ``codes`` integer group codes in [0, ``n_groups``); ``metrics`` names of
    :data:`RATIO_METRICS` (aliases allowed); ``weights`` non-negative row weights (they multiply
    a and b); ``probability`` the scores for ``calibration`` (default ``prediction``);
    ``groups`` the codes whose pairs form the family (default all; every row is still permuted,
    so the other groups' rows move too). Raises :class:`DataContractError` naming the
    parameter at fault.
    """
    ya, p, c, g, w, s = _check_data(y, prediction, codes, n_groups, weights, probability)
    names = _check_metrics(metrics)
    _check_choice("alternative", alternative, ALTERNATIVES)
    _check_choice("scheme", scheme, SCHEMES)
    n = ya.size
    if groups is None:
        members = list(range(g))
    else:
        members = sorted({int(k) for k in groups})
        if any(not 0 <= k < g for k in members):
            raise DataContractError(
                f"groups must be codes in [0, n_groups={g}), got {list(groups)}"
            )
    # every row is permuted; only pairs of the listed groups are columns of the family
    pairs = tuple((a, b) for i, a in enumerate(members) for b in members[i + 1 :])
    labels = tuple((name, a, b) for name in names for a, b in pairs)
    values = np.concatenate(
        [row_values(RATIO_METRICS[name], ya, p, s, w) for name in names], axis=1
    )  # (n, 5 * n_metrics)
    sums = np.stack([np.bincount(c, values[:, k], g) for k in range(values.shape[1])], axis=1)
    observed = _statistics(sums[None], pairs, len(names))[0]
    t_obs = _extremeness(observed, alternative)
    tested = ~np.isnan(observed)
    idx = np.flatnonzero(tested)
    order = idx[np.argsort(-t_obs[idx], kind="stable")]
    for array in (observed, t_obs, tested, order):
        array.flags.writeable = False

    if scheme == "all_rows":
        row_index = np.arange(n)
        strata: tuple[tuple[int, int], ...] = ((0, n),)
    else:
        row_index = np.argsort(ya, kind="stable")
        n0 = int(np.count_nonzero(ya == 0))
        strata = tuple(st for st in ((0, n0), (n0, n)) if st[1] > st[0])
    code_dtype = np.uint8 if g <= 256 else np.uint16 if g <= 65536 else np.intp
    sorted_values = values[row_index]
    type_values, types = np.unique(sorted_values, axis=0, return_inverse=True)
    if type_values.shape[0] * g <= n:
        kind: dict[str, Any] = {
            "_types": types.reshape(-1).astype(np.intp),
            "_type_values": np.ascontiguousarray(type_values),
            "_columns": None,
            "_column_map": None,
        }
    else:
        columns, column_map = np.unique(sorted_values, axis=1, return_inverse=True)
        kind = {
            "_types": None,
            "_type_values": None,
            "_columns": np.ascontiguousarray(columns.T),  # (F, n) distinct sum columns
            "_column_map": column_map.reshape(-1).astype(np.intp),
        }
    return JointFamily(
        metrics=names,
        pairs=pairs,
        labels=labels,
        observed=observed,
        order=order,
        t_observed=t_obs,
        tested=tested,
        n_groups=g,
        alternative=alternative,
        scheme=scheme,
        n_rows=n,
        _codes=c[row_index].astype(code_dtype),
        _strata=strata,
        _row_index=row_index,
        **kind,
    )


def permuted_codes(family: JointFamily, rng: np.random.Generator, batch: int) -> np.ndarray:
    """The (batch, n) permuted group codes, in the input row order, that :func:`maxt_exceedances`
    would use with this ``rng`` state (the convention of the module docstring)."""
    _check_rng(rng)
    batch = _check_int("batch", batch, 1)
    out = np.empty((batch, family.n_rows), dtype=np.intp)
    out[:, family._row_index] = _draw_codes(family, rng, batch)
    return out


def joint_exceedances(
    family: JointFamily,
    rng: np.random.Generator,
    batch: int,
    *,
    max_chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """maxT exceedance counts S_j (see :func:`maxt_exceedances`) and marginal exceedance counts
    R_j = #{b : t*_bj ≥ t_j − γ_j} of ``batch`` joint permutations, both (m,) int64 arrays in
    column order (0 for undefined columns)."""
    _check_family(family)
    _check_rng(rng)
    batch = _check_int("batch", batch, 1)
    max_chunk_bytes = _check_int("max_chunk_bytes", max_chunk_bytes, 1)
    m = family.n_tests
    maxt = np.zeros(m, dtype=np.int64)
    marginal = np.zeros(m, dtype=np.int64)
    order = family.order
    if order.size == 0:
        return maxt, marginal
    t_sorted = family.t_observed[order]
    threshold = t_sorted - np.where(np.isfinite(t_sorted), TIE_RTOL * np.abs(t_sorted), 0.0)
    chunk = _chunk_size(family, max_chunk_bytes)
    done = 0
    while done < batch:
        size = min(chunk, batch - done)
        pseudo = _draw_codes(family, rng, size)
        z = _statistics(_chunk_sums(family, pseudo), family.pairs, len(family.metrics))
        t = _extremeness(z[:, order], family.alternative)
        t[np.isnan(t)] = -np.inf
        marginal[order] += np.count_nonzero(t >= threshold, axis=0)
        # successive maxima from the least extreme test up (Ge et al. 2003, Box 2, step 2)
        u = np.maximum.accumulate(t[:, ::-1], axis=1)[:, ::-1]
        maxt[order] += np.count_nonzero(u >= threshold, axis=0)
        done += size
    return maxt, marginal


def maxt_exceedances(
    family: JointFamily,
    rng: np.random.Generator,
    batch: int,
    *,
    max_chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> np.ndarray:
    """For each column j (column order), S_j = #{b : max_{k at or after j in step-down order}
    t*_bk ≥ t_j − γ_j} over ``batch`` new joint permutations drawn from ``rng``.

    S_j ~ Binomial(batch, p̃_j), p̃_j the ideal maxT adjusted p-value before the monotonicity
    step (Westfall & Young 1993, Alg. 2.8; Ge, Dudoit & Speed 2003, Box 2). Undefined columns
    (``family.tested`` False) get 0. The stream convention is in the module docstring; the
    counts do not depend on ``max_chunk_bytes``.
    """
    return joint_exceedances(family, rng, batch, max_chunk_bytes=max_chunk_bytes)[0]


def maxt_pvalues_from_counts(family: JointFamily, exceedances: Any, resamples: Any) -> np.ndarray:
    """Monotone maxT adjusted p-values from exceedance counts (column order, NaN if undefined):
    p̂_(j) = (1 + S_(j)) / (1 + n_(j)), then the cumulative maximum along ``family.order``.

    ``resamples`` is B (a scalar) or one count per column (a sequential engine's n_i).
    """
    _check_family(family)
    m = family.n_tests
    s = _check_counts("exceedances", exceedances, (m,))
    n = np.asarray(resamples)
    if n.ndim == 0:
        n = np.full(m, n)
    n = _check_counts("resamples", n, (m,))
    order = family.order
    if np.any(n[order] < 1) or np.any(s > n):
        raise DataContractError(
            "resamples must be >= 1 for every defined test and >= its exceedances"
        )
    out = np.full(m, np.nan)
    out[order] = np.maximum.accumulate((1.0 + s[order]) / (1.0 + n[order]))
    return out


def sequential_draw(
    family: JointFamily,
    rng: np.random.Generator,
    *,
    max_chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Callable[[np.ndarray, int], np.ndarray]:
    """A ``draw(indices, batch)`` callback for :func:`fairengine.sequential_mc.sequential_decisions`
    over the *defined* tests: index i is column ``family.tested_columns[i]`` (so pass
    ``n_tests = family.tested.sum()``). Each call draws ``batch`` joint permutations shared by
    all tests and returns the maxT exceedances of the requested ones."""
    columns = family.tested_columns

    def draw(indices: np.ndarray, batch: int) -> np.ndarray:
        counts = maxt_exceedances(family, rng, batch, max_chunk_bytes=max_chunk_bytes)
        return counts[columns[np.asarray(indices, dtype=np.intp)]]

    return draw


def joint_maxt_test(
    y: Any,
    prediction: Any,
    codes: Any,
    n_groups: int,
    metrics: Sequence[str],
    n_permutations: int = 999,
    seed: int | np.random.Generator | None = 0,
    *,
    weights: Any = None,
    probability: Any = None,
    alternative: str = "two-sided",
    scheme: str = "all_rows",
) -> JointMaxTResult:
    """Westfall–Young maxT test of every (metric, pair) gap of one attribute with
    ``n_permutations`` joint permutations (see :func:`joint_family` for the arguments)."""
    family = joint_family(
        y,
        prediction,
        codes,
        n_groups,
        metrics,
        weights=weights,
        probability=probability,
        alternative=alternative,
        scheme=scheme,
    )
    n_perm = _check_int("n_permutations", n_permutations, 1)
    if not (seed is None or isinstance(seed, np.random.Generator | int | np.integer)) or (
        isinstance(seed, bool)
    ):
        raise DataContractError(f"seed must be an int, a numpy Generator or None, got {seed!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    maxt, marginal = joint_exceedances(family, rng, n_perm)
    raw = np.where(family.tested, (1.0 + marginal) / (1.0 + n_perm), np.nan)
    return JointMaxTResult(
        labels=family.labels,
        observed=family.observed,
        adjusted_pvalues=maxt_pvalues_from_counts(family, maxt, n_perm),
        raw_pvalues=raw,
        resamples=n_perm,
        order=family.order,
        alternative=alternative,
        scheme=scheme,
    )


# ----------------------------------------------------------------------------- internals


def _extremeness(z: np.ndarray, alternative: str) -> np.ndarray:
    if alternative == "two-sided":
        return np.abs(z)
    if alternative == "less":
        return -z
    return np.array(z, dtype=np.float64, copy=True)


def floored_statistic(sums_a: np.ndarray, sums_b: np.ndarray) -> np.ndarray:
    """Z = (m_a − m_b)/se with each group's delta-method variance floored at (1/(2B))², the
    variance of half a count (B the group's denominator sum: its conditioning rows).

    Without the floor a pseudo-group whose rate is 0 or 1 has zero variance and a pair of them
    gives Z = ±∞, which then wins every permutation maximum: in COMPAS (race, 6 groups, 18
    Native-American rows) max |Z| over the 45 tests was infinite in 7 % of the permutations, so
    no test could reach a maxT p-value below 0.07. The floor changes only such degenerate cases
    and is applied to the observed and the permuted statistics alike, so the test stays exact.
    """
    ma, va = ratio_value_variance(sums_a)
    mb, vb = ratio_value_variance(sums_b)
    ba = np.asarray(sums_a, dtype=np.float64)[..., 1]
    bb = np.asarray(sums_b, dtype=np.float64)[..., 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        va = np.maximum(va, 0.25 / (ba * ba))
        vb = np.maximum(vb, 0.25 / (bb * bb))
    return studentize(ma - mb, np.sqrt(va + vb))


def _statistics(sums: np.ndarray, pairs: Sequence[tuple[int, int]], n_metrics: int) -> np.ndarray:
    """Z of every (metric, pair) column from per-group sums (c, G, 5·n_metrics) → (c, m)
    (:func:`floored_statistic`)."""
    pa = np.fromiter((a for a, _ in pairs), dtype=np.intp, count=len(pairs))
    pb = np.fromiter((b for _, b in pairs), dtype=np.intp, count=len(pairs))
    parts = []
    for k in range(n_metrics):
        s = sums[:, :, k * _N_SUMS : (k + 1) * _N_SUMS]
        parts.append(floored_statistic(s[:, pa], s[:, pb]))
    return np.concatenate(parts, axis=1)


def _draw_codes(family: JointFamily, rng: np.random.Generator, size: int) -> np.ndarray:
    """(size, n) permuted codes in the family's row order: draw by draw, stratum by stratum,
    each stratum's codes shuffled in place (= ``rng.permutation(codes[stratum])``)."""
    out = np.empty((size, family.n_rows), dtype=family._codes.dtype)
    out[:] = family._codes
    for b in range(size):
        row = out[b]
        for lo, hi in family._strata:
            rng.shuffle(row[lo:hi])
    return out


def _chunk_sums(family: JointFamily, pseudo: np.ndarray) -> np.ndarray:
    """Per-group sums (c, G, 5·n_metrics) of c draws of permuted codes (c, n)."""
    c, n = pseudo.shape
    g = family.n_groups
    idx = np.empty((c, n), dtype=np.intp)
    np.add(pseudo, (g * np.arange(c, dtype=np.intp))[:, None], out=idx)
    flat = idx.reshape(-1)
    if family._types is not None and family._type_values is not None:
        k = family._type_values.shape[0]
        flat *= k
        idx += family._types
        counts = np.bincount(flat, minlength=c * g * k).astype(np.float64)
        return (counts.reshape(c * g, k) @ family._type_values).reshape(c, g, -1)
    assert family._columns is not None and family._column_map is not None
    weights = np.empty((c, n), dtype=np.float64)
    distinct = np.empty((family._columns.shape[0], c * g), dtype=np.float64)
    for f, column in enumerate(family._columns):
        weights[:] = column
        distinct[f] = np.bincount(flat, weights.reshape(-1), minlength=c * g)
    return distinct[family._column_map].T.reshape(c, g, -1)


def _chunk_size(family: JointFamily, max_chunk_bytes: int) -> int:
    """Draws per chunk so that the chunk's temporaries stay below ``max_chunk_bytes``."""
    n, g, m = family.n_rows, family.n_groups, family.n_tests
    width = (
        family._type_values.shape[0] + family._type_values.shape[1]
        if family._type_values is not None
        else 2 * len(family.metrics) * _N_SUMS
    )
    per_draw = n * (family._codes.itemsize + 8 + 8) + 8 * g * width * 2 + 8 * m * 8
    return max(1, max_chunk_bytes // per_draw)


def _check_choice(name: str, value: object, allowed: Sequence[str]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise DataContractError(f"{name} must be one of {list(allowed)}, got {value!r}")


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise DataContractError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise DataContractError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_rng(rng: object) -> None:
    if not isinstance(rng, np.random.Generator):
        raise DataContractError(
            f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {rng!r}"
        )


def _check_family(family: object) -> None:
    if not isinstance(family, JointFamily):
        raise DataContractError(
            f"family must be a JointFamily from joint_family(), got {type(family).__name__}"
        )


def _check_counts(name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataContractError(f"{name} must be an array of whole-number counts") from None
    if a.shape != shape:
        raise DataContractError(f"{name} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a != np.round(a)) or np.any(a < 0):
        raise DataContractError(f"{name} must hold non-negative whole-number counts")
    return a.astype(np.int64)


def _check_metrics(metrics: object) -> tuple[str, ...]:
    if isinstance(metrics, str) or not isinstance(metrics, Sequence) or len(metrics) == 0:
        raise DataContractError(
            f"metrics must be a non-empty list of metric names, got {metrics!r}"
        )
    names: list[str] = []
    for name in metrics:
        key = ALIASES.get(name, name) if isinstance(name, str) else name
        if key not in RATIO_METRICS:
            raise DataContractError(
                f"metrics: {name!r} is not a ratio metric; joint permutations support "
                f"{list(RATIO_METRICS)} (aliases {sorted(ALIASES)}), not 'auc' or callables"
            )
        if key in names:
            raise DataContractError(f"metrics lists {key!r} twice")
        names.append(key)
    return tuple(names)


def _check_data(
    y: Any, prediction: Any, codes: Any, n_groups: Any, weights: Any, probability: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray | None, np.ndarray | None]:
    ya = np.asarray(y)
    if ya.ndim != 1 or ya.size == 0:
        raise DataContractError(f"y must be a non-empty 1-D array of 0/1 labels, got {ya.shape}")
    n = ya.size
    if ya.dtype == bool:
        ya = ya.astype(np.int8)
    if not np.issubdtype(ya.dtype, np.number) or not np.all(np.isin(ya, (0, 1))):
        raise DataContractError("y must hold 0/1 labels only")
    try:
        p = np.asarray(prediction, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataContractError("prediction must be numeric") from None
    if p.shape != (n,):
        raise DataContractError(
            f"prediction must be a 1-D array with one value per row ({n}), got {p.shape}"
        )
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise DataContractError(
            "prediction must hold 0/1 predictions or probabilities in [0, 1] (expected counts)"
        )
    g = _check_int("n_groups", n_groups, 2)
    c = np.asarray(codes)
    if c.shape != (n,):
        raise DataContractError(f"codes must be a 1-D array with one code per row ({n})")
    if c.dtype == bool or not np.issubdtype(c.dtype, np.number):
        raise DataContractError(f"codes must hold integer group codes, got dtype {c.dtype}")
    if np.issubdtype(c.dtype, np.floating):
        if not np.all(np.isfinite(c)) or np.any(c != np.round(c)):
            raise DataContractError("codes must hold integer group codes")
    if np.any(c < 0) or np.any(c >= g):
        raise DataContractError(f"codes must lie in [0, n_groups) = [0, {g})")
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise DataContractError(f"weights must be {n} finite, non-negative values")
    s = None
    if probability is not None:
        s = np.asarray(probability, dtype=np.float64)
        if s.shape != (n,) or not np.all(np.isfinite(s)):
            raise DataContractError(f"probability must be {n} finite values")
    return ya.astype(np.int8), p, c.astype(np.intp), g, w, s
