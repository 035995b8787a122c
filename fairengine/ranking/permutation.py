"""Studentized permutation tests of exposure and top-k differences between two groups, permuting
the group labels within lists (the rankings stay fixed).

**Null.** The ranking treats the two groups alike: within each list, the labels A/B of the
items of A ∪ B are exchangeable given their ranks. A permutation draws, independently in every
list, a uniformly random reassignment of that list's A/B labels to its A ∪ B items (each list
keeps its numbers of A and B items); items of other groups keep their ranks and play no part.

**Statistics.** For a per-item value x_i — the exposure 1/log2(1 + r_i) (:mod:`.exposure`), or
the top-k indicator 1{r_i ≤ k_l} (:mod:`.topk`; its group mean is the group's *top-k rate*, and
in one list equal rates ⇔ equal skew@k ⇔ top-k shares proportional to the groups' sizes) —
let c_l be the mean of x over the A ∪ B items of list l and u_i = x_i − c_{l(i)}. Then

    Δ = ū_A − ū_B,     se² = s²_A/n_A + s²_B/n_B      (s²: sample variances of u in A, B),
    Z = Δ / se.

Centring within lists makes E[Δ] = 0 exactly under the permutation null, also when lists differ
in length and composition (a short list gives every item more exposure: without centring, a
group concentrated in short lists would differ in raw exposure under the null). With one list
Δ is the raw difference of the group means, reported as ``difference`` in every case. The
p-value compares Z with the Z of every permutation, each studentized with its own se (DiCiccio,
Vasudevan, Basu, Kenthapadi & Agarwal 2020, "Evaluating fairness using permutation tests", KDD,
§3.3). The test is exact under the exchangeability null whatever the statistic; for one list,
DiCiccio et al. show the studentized test is also asymptotically valid for the weak null of
equal means when the groups' variances and sizes differ (with several lists that is the
same construction, not proven here). p = (1 + n_extreme)/(1 + n_permutations)
with the tie tolerance of :func:`fairengine.permutation.two_group.permutation_pvalue`.

**Vectorized over permutations.** All statistics (exposure and every cutoff) share the
permutations: per batch of ``CHUNK_ELEMENTS // n`` permutations one (batch × n) label mask and
one product with the n × 2m matrix [u, u²] of the m statistics give every group sum. With a
single list the masks are the engine's exact random k-subsets
(:func:`~fairengine.permutation.cell_draws.random_subset_masks`); with several, every item gets
a uniform key and the n_A,l items of smallest key in list l are A, for all lists at once
(:func:`within_list_masks`). Only lists that hold both groups are drawn; the others add fixed
sums. 10,000 permutations of 100,000 items (3 tests) take 5–7 s in one list, 9–23 s in 1,000
to 10,000 lists (benchmarks/results/ranking_speed.md).

**Resampling counts and seeds** (as :mod:`fairengine.regression.permutation`): each test reports
n_extreme of n_permutations, recorded in its finding as a
:class:`~fairengine.results.ResamplingPart` named ``permutation``; pair i of
:func:`all_pair_tests` draws from :func:`pair_seed` (seed, i), and a sequential decision draws
more with ``n_permutations=batch`` and ``seed=pair_seed(seed, i, start)`` — the observed
statistics are deterministic, so the new n_extreme of each test adds to its count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from fairengine.errors import DataContractError
from fairengine.group_pairs import pair_seed, resolve_group
from fairengine.json_result import JsonResult
from fairengine.library_threads import single_threaded
from fairengine.permutation.cell_draws import random_subset_masks
from fairengine.permutation.metrics import studentize as studentized
from fairengine.permutation.two_group import CHUNK_ELEMENTS, permutation_pvalue
from fairengine.ranking.inputs import Cutoff, check_inputs, resolve_cutoffs
from fairengine.ranking.topk import in_top
from fairengine.results import Interval

ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater", "less")
STUDENTIZATIONS: tuple[str, ...] = ("per_permutation", "none")
#: Fewest items a group of a tested pair needs: a variance needs two.
MIN_GROUP_SIZE = 2
#: Largest (lists × longest list) / items for which the within-list draws sort per list.
PAD_FACTOR = 2.0

__all__ = ["RankPairTests", "RankTest", "all_pair_tests", "pair_permutation_tests", "pair_seed"]


@dataclass(frozen=True)
class RankTest(JsonResult):
    """Test of H0: the groups are exchangeable within lists, by the difference of the group
    means of ``quantity`` (``exposure``, or ``topk`` at ``cutoff``: the top-k rate).

    ``value_a``/``value_b`` are the group means and ``difference`` their difference;
    ``adjusted_difference`` is Δ of the within-list centred values (equal to ``difference``
    with one list), ``se`` its Welch standard error with the t ``interval`` (Welch–
    Satterthwaite df); ``statistic`` is Z = Δ/se (``studentize="none"``: Δ) and ``pvalue`` =
    (1 + n_extreme)/(1 + n_permutations); ``n_undefined`` permuted statistics were NaN and
    counted as extreme."""

    quantity: str
    cutoff: Cutoff | None
    value_a: float
    value_b: float
    difference: float
    adjusted_difference: float
    se: float
    interval: Interval
    statistic: float
    pvalue: float
    n_extreme: int
    n_undefined: int
    n_permutations: int
    alternative: str
    studentize: str

    @property
    def name(self) -> str:
        """``exposure`` or ``topk_<cutoff token>`` (``topk_10pct``)."""
        return self.quantity if self.cutoff is None else f"{self.quantity}_{self.cutoff.token}"


@dataclass(frozen=True)
class RankPairTests(JsonResult):
    """Every permutation test of one pair of groups (A = ``group_a``, B = ``group_b``) on the
    same ``n_permutations`` within-list permutations; ``n_lists_mixed`` lists hold items of
    both groups (only those are permuted)."""

    attribute: str
    group_a: str
    group_b: str
    n_a: int
    n_b: int
    n_lists: int
    n_lists_mixed: int
    tests: tuple[RankTest, ...]

    def test(self, name: str) -> RankTest:
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(f"no test {name!r}; have {[t.name for t in self.tests]}")


def pair_permutation_tests(
    scores: object,
    groups: object,
    categories: Sequence[object],
    *,
    group_a: int | str,
    group_b: int | str,
    lists: object | None = None,
    k: object = (0.1, 0.2),
    exposure: bool = True,
    n_permutations: int = 1999,
    alternative: str = "two-sided",
    studentize: str = "per_permutation",
    confidence_level: float = 0.95,
    seed: int | np.random.SeedSequence | np.random.Generator | None = 0,
    attribute: str = "group",
    ties: str = "order",
) -> RankPairTests:
    """Studentized within-list permutation tests between ``group_a`` and ``group_b`` (labels
    or codes) of the exposure difference (``exposure``) and of the top-k rate difference at
    every cutoff of ``k`` (``k=()``: none), on shared permutations (module docstring).
    ``alternative="greater"``: A gets more exposure (a higher top-k rate) than B."""
    data = check_inputs(scores, groups, categories, lists=lists, ties=ties)
    a = resolve_group(group_a, data.categories, "group_a")
    b = resolve_group(group_b, data.categories, "group_b")
    if a == b:
        raise DataContractError(f"group_a and group_b must differ, both are {data.categories[a]!r}")
    empty = k is None or (isinstance(k, list | tuple) and len(k) == 0)
    cuts = () if empty else resolve_cutoffs(k, data.list_sizes, list_ids=data.list_ids)
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int | np.integer):
        raise DataContractError(f"n_permutations must be an integer, got {n_permutations!r}")
    if n_permutations < 1:
        raise DataContractError(f"n_permutations must be >= 1, got {n_permutations}")
    if alternative not in ALTERNATIVES:
        raise DataContractError(f"alternative must be one of {list(ALTERNATIVES)}")
    if studentize not in STUDENTIZATIONS:
        raise DataContractError(f"studentize must be one of {list(STUDENTIZATIONS)}")
    if not exposure and not cuts:
        raise DataContractError("nothing to test: exposure=False and no cutoff in k")
    if not 0 < confidence_level < 1:
        raise DataContractError(f"confidence_level must lie in (0, 1), got {confidence_level}")
    for code in (a, b):
        size = int(np.count_nonzero(data.codes == code))
        if size < MIN_GROUP_SIZE:
            raise DataContractError(
                f"group {data.categories[code]!r} has {size} item(s) in groups; a permutation "
                f"test needs at least {MIN_GROUP_SIZE} items per group"
            )
    columns: list[np.ndarray] = []
    specs: list[tuple[str, Cutoff | None]] = []
    if exposure:
        columns.append(data.exposure())
        specs.append(("exposure", None))
    for c in cuts:
        columns.append(in_top(data, c).astype(np.float64))
        specs.append(("topk", c))
    rows = (data.codes == a) | (data.codes == b)
    x = np.stack(columns, axis=1)[rows]
    in_a = data.codes[rows] == a
    li = np.unique(data.lists[rows], return_inverse=True)[1].ravel()
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    tests, n_mixed = _run(
        x, in_a, li, specs, int(n_permutations), rng, studentize, alternative, confidence_level
    )
    return RankPairTests(
        attribute,
        data.categories[a],
        data.categories[b],
        int(in_a.sum()),
        int((~in_a).sum()),
        int(li.max()) + 1,
        n_mixed,
        tests,
    )


def all_pair_tests(
    scores: object,
    groups: object,
    categories: Sequence[object],
    *,
    seed: int = 0,
    **options: object,
) -> tuple[RankPairTests, ...]:
    """:func:`pair_permutation_tests` for every pair of codes a < b, in order (0,1), (0,2), …;
    pair i draws from :func:`pair_seed` (seed, i)."""
    n_groups = len(categories)
    pairs = [(a, b) for a in range(n_groups) for b in range(a + 1, n_groups)]
    return tuple(
        pair_permutation_tests(
            scores,
            groups,
            categories,
            group_a=a,
            group_b=b,
            seed=pair_seed(seed, i),
            **options,  # type: ignore[arg-type]
        )
        for i, (a, b) in enumerate(pairs)
    )


def _moments(
    sums_a: np.ndarray, total: np.ndarray, n_a: int, n_b: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Δ, se, and the two variance terms s²/n from the group sums of [u, u²] (last axis)."""
    s1a, s2a = sums_a[..., 0::2], sums_a[..., 1::2]
    s1b, s2b = total[..., 0::2] - s1a, total[..., 1::2] - s2a
    ma, mb = s1a / n_a, s1b / n_b
    va = np.maximum(s2a - n_a * ma**2, 0.0) / (n_a - 1) / n_a
    vb = np.maximum(s2b - n_b * mb**2, 0.0) / (n_b - 1) / n_b
    return ma - mb, np.sqrt(va + vb), va, vb


def within_list_masks(
    rng: np.random.Generator, lists: np.ndarray, labels: np.ndarray, size: int
) -> np.ndarray:
    """``size`` independent uniform permutations of the bool ``labels`` within each list, as a
    (size, n) mask; ``lists`` is sorted (list index per item).

    Every item gets an independent uniform key, and the n_A,l items of smallest key in list l
    are A: a uniformly random n_A,l-subset of the list (the keys' order is a uniform
    permutation; float64 keys tie with probability about n_l²/2⁵³). The n_A,l-th smallest key
    of every list comes from one sort: per list in a (size, lists, longest) array (short
    sorts, padding keys 2 sort last) when that padding costs at most :data:`PAD_FACTOR` times
    the items, else of the keys offset by the list index. (The engine's random-subset sampler,
    exact for one large list, is slower here: its surplus corrections dominate on short
    lists.)
    """
    n = labels.size
    starts = np.flatnonzero(np.r_[True, lists[1:] != lists[:-1]])
    sizes = np.diff(np.r_[starts, n])
    n_a = np.add.reduceat(labels.astype(np.int64), starts)
    n_lists, longest = starts.size, int(sizes.max())
    if n_lists * longest <= PAD_FACTOR * n:
        keys = rng.random((size, n_lists, longest))
        slot = np.arange(n) - np.repeat(starts, sizes)  # position within its list
        flat = np.repeat(np.arange(n_lists), sizes) * longest + slot
        padding = flat.size < n_lists * longest
        if padding:
            valid = np.zeros(n_lists * longest, dtype=bool)
            valid[flat] = True
            keys.reshape(size, -1)[:, np.flatnonzero(~valid)] = 2.0
        kth = np.sort(keys, axis=2)[:, np.arange(n_lists), np.maximum(n_a - 1, 0)]
        kth[:, n_a == 0] = -1.0
        out = (keys <= kth[:, :, None]).reshape(size, -1)
        return np.take(out, flat, axis=1) if padding else out
    offset = rng.random((size, n)) + lists[None, :]
    kth = np.sort(offset, axis=1)[:, np.maximum(starts + n_a - 1, 0)]
    kth[:, n_a == 0] = -1.0
    return np.asarray(offset <= kth[:, lists])


def _run(
    x: np.ndarray,
    in_a: np.ndarray,
    li: np.ndarray,
    specs: list[tuple[str, Cutoff | None]],
    t: int,
    rng: np.random.Generator,
    studentize_mode: str,
    alternative: str,
    level: float,
) -> tuple[tuple[RankTest, ...], int]:
    n_lists = int(li.max()) + 1
    count = np.bincount(li, minlength=n_lists).astype(np.float64)
    centre = np.stack([np.bincount(li, weights=col, minlength=n_lists) for col in x.T], axis=1)
    u = x - (centre / count[:, None])[li]
    n_a_list = np.bincount(li, weights=in_a.astype(np.float64), minlength=n_lists)
    mixed = (n_a_list > 0) & (n_a_list < count)
    n_mixed = int(mixed.sum())
    n_a, n_b = int(in_a.sum()), int((~in_a).sum())
    v = np.empty((x.shape[0], 2 * x.shape[1]))
    v[:, 0::2], v[:, 1::2] = u, u**2
    total = v.sum(axis=0)
    obs_d, obs_se, obs_va, obs_vb = _moments(v[in_a].sum(axis=0), total, n_a, n_b)
    # only the items of mixed lists move; the others add fixed sums
    keep = mixed[li]
    fixed = v[~keep & in_a].sum(axis=0)
    order = np.argsort(li[keep], kind="stable")
    lm, vm, gm = li[keep][order], v[keep][order], in_a[keep][order]
    n = lm.size
    null_d = np.empty((t, x.shape[1]))
    null_se = np.empty((t, x.shape[1]))
    batch = max(1, CHUNK_ELEMENTS // max(n, 1))
    with single_threaded():
        for done in range(0, t, batch):
            size = min(batch, t - done)
            if n_mixed == 0:
                sums = np.broadcast_to(fixed, (size, fixed.size))
            else:
                if n_mixed == 1:
                    mask = random_subset_masks(rng, n, int(gm.sum()), size)
                else:
                    mask = within_list_masks(rng, lm, gm, size)
                sums = mask.astype(np.float64) @ vm + fixed
            d, se, _, _ = _moments(sums, total, n_a, n_b)
            null_d[done : done + size] = d
            null_se[done : done + size] = se
    means_a = x[in_a].mean(axis=0)
    means_b = x[~in_a].mean(axis=0)
    tests = []
    for j, (quantity, cut) in enumerate(specs):
        dj, sej = float(obs_d[j]), float(obs_se[j])
        if studentize_mode == "per_permutation":
            stat = float(studentized(np.asarray(dj), np.asarray(sej)))
            null = studentized(null_d[:, j], null_se[:, j])
        else:
            stat, null = dj, null_d[:, j]
        pvalue, n_ext, n_nan = permutation_pvalue(stat, null, alternative)
        tests.append(
            RankTest(
                quantity,
                cut,
                float(means_a[j]),
                float(means_b[j]),
                float(means_a[j] - means_b[j]),
                dj,
                sej,
                _welch_interval(dj, float(obs_va[j]), float(obs_vb[j]), n_a, n_b, level),
                stat,
                pvalue,
                n_ext,
                n_nan,
                t,
                alternative,
                studentize_mode,
            )
        )
    return tuple(tests), n_mixed


def _welch_interval(d: float, va: float, vb: float, n_a: int, n_b: int, level: float) -> Interval:
    """d ± t_{df, 1−α/2} · √(va + vb), df of Welch–Satterthwaite (va, vb: s²/n)."""
    se = math.sqrt(va + vb)
    denom = va**2 / (n_a - 1) + vb**2 / (n_b - 1)
    df = (va + vb) ** 2 / denom if denom > 0 else math.inf
    q = float(stats.t.ppf(0.5 + level / 2, df)) if math.isfinite(df) else 0.0
    return Interval(d - q * se, d + q * se, level, "welch t (within-list centred)")
