"""Random permutations and bootstraps as draws over cells or rows, in batches.

**Cells.** When a statistic depends on the rows only through how many rows of each cell
(e.g. each (label, prediction) pair) fall in each group, a uniformly random permutation of the
group labels is, for group A of size n_A, a *multivariate hypergeometric* draw of A's cell
counts from the pooled counts C (and B gets C − X_A). This is exact in distribution and costs
O(#cells) per permutation whatever the row count (lift-semantics §7.3); cells whose rows
contribute the same sums to the statistic can be drawn as one (their split does not matter).
Within-outcome permutations (DiCiccio et al. 2020, §3.1) are independent hypergeometric draws
per label stratum with that stratum's group-A size. A pooled nonparametric bootstrap of n rows
is a multinomial draw over the (group, cell) counts with probabilities C/n.

**Rows.** When rows are not interchangeable (continuous scores, weights), a permutation is a
uniformly random subset of k of the n positions. :func:`random_subset_masks` draws a batch of
them exactly from one random 16-bit key per position plus a small exact correction of the count,
a few vectorised passes instead of a per-element Fisher–Yates shuffle.
"""

from __future__ import annotations

import numpy as np


def hypergeometric_cell_draws(
    rng: np.random.Generator, cell_counts: np.ndarray, n_draw: int, size: int
) -> np.ndarray:
    """``size`` draws of group A's cell counts: multivariate hypergeometric(C, n_draw).

    ``cell_counts`` are the pooled counts C (non-negative integers, shape (K,)); returns an
    int64 array (size, K) whose rows sum to ``n_draw``. Drawn by numpy's
    ``Generator.multivariate_hypergeometric`` (method ``marginals``: K − 1 univariate
    hypergeometric draws per permutation); one cell needs no draw.
    """
    c = np.asarray(cell_counts, dtype=np.int64)
    if n_draw < 0 or n_draw > int(c.sum()):
        raise ValueError(f"cannot draw {n_draw} rows from {int(c.sum())}")
    if n_draw == 0:
        return np.zeros((size, c.size), dtype=np.int64)
    if c.size == 1:
        return np.full((size, 1), n_draw, dtype=np.int64)
    return rng.multivariate_hypergeometric(c, n_draw, size=size).astype(np.int64, copy=False)


def stratified_cell_draws(
    rng: np.random.Generator,
    cell_counts: list[np.ndarray],
    n_draw: list[int],
    size: int,
) -> np.ndarray:
    """Independent hypergeometric draws per stratum, concatenated along the cell axis.

    ``cell_counts[s]`` are stratum s's pooled cell counts and ``n_draw[s]`` group A's rows in
    that stratum (within-outcome permutations: strata are the labels).
    """
    parts = [
        hypergeometric_cell_draws(rng, c, k, size) for c, k in zip(cell_counts, n_draw, strict=True)
    ]
    return np.concatenate(parts, axis=1)


def multinomial_cell_draws(
    rng: np.random.Generator, cell_counts: np.ndarray, size: int, n: int | None = None
) -> np.ndarray:
    """``size`` bootstrap resamples of n rows (default: the total) as multinomial counts over
    cells with probabilities C/ΣC; returns int64 (size, K)."""
    c = np.asarray(cell_counts, dtype=np.float64)
    total = c.sum()
    n = round(total) if n is None else int(n)
    return rng.multinomial(n, c / total, size=size).astype(np.int64)


def random_subset_masks(rng: np.random.Generator, n: int, k: int, size: int) -> np.ndarray:
    """``size`` independent uniformly random k-subsets of ``range(n)`` as a bool (size, n) mask.

    Exact, in two steps: (1) every position joins independently with probability ≈ k/n (one
    random 16-bit key per position), which conditional on the count K is a uniformly random
    K-subset; (2) the |K − k| surplus (missing) members are removed (added) by uniform sampling
    without replacement among the current members (non-members): probes at uniformly random
    positions, accepted when they hit the right kind, processed in batches in probe order so the
    result is the same as one-at-a-time sequential sampling. Removing a uniform subset of a
    uniform subset leaves a uniform k-subset (and symmetrically for adding), whatever the
    probability in (1).
    """
    if not 0 <= k <= n:
        raise ValueError(f"subset size {k} must lie in [0, {n}]")
    if k == 0 or k == n:
        return np.full((size, n), k == n, dtype=bool)
    # step (1) at 1/65536 resolution, from the bit generator's raw 64-bit words (four 16-bit
    # keys each): the expected surplus |E K − k| is below n/131072 instead of n/512 with
    # one-byte keys, so step (2) has only the binomial spread of K to correct
    cut = min(65535, max(1, round(65536 * k / n)))
    words = rng.bit_generator.random_raw(-(-size * n // 4))
    mask = words.view(np.uint16)[: size * n].reshape(size, n) < np.uint16(cut)
    del words
    # per row: count_nonzero of a contiguous bool row is a vectorized byte count, 6x faster
    # than its axis=1 form (a cast and a sum) on (44, 45,222) masks
    surplus = np.fromiter((np.count_nonzero(row) for row in mask), np.int64, size) - k
    active = np.flatnonzero(surplus)
    while active.size:
        need = np.abs(surplus[active])
        want = surplus[active] > 0  # True: remove members; False: add non-members
        frac = k / n
        hit = np.maximum(np.where(want, frac, 1.0 - frac), 1e-3)
        # probes per row for its own surplus (1.5x the expected need, plus 16)
        n_probe = np.minimum(4 * n, np.ceil(1.5 * need / hit).astype(np.int64) + 16)
        rows = np.repeat(active, n_probe)
        cols = rng.integers(0, n, size=rows.size)
        ok = mask[rows, cols] == np.repeat(want, n_probe)
        # first occurrence of each (row, col) only, keeping probe order
        key = rows[ok].astype(np.int64) * n + cols[ok]
        _, first = np.unique(key, return_index=True)
        first.sort()
        r_ok = rows[ok][first]
        c_ok = cols[ok][first]
        # rank of each accepted probe within its row, keep the first |surplus| per row
        starts = np.searchsorted(r_ok, active)
        rank = np.arange(r_ok.size) - np.repeat(starts, np.diff(np.append(starts, r_ok.size)))
        limit = np.repeat(need, np.diff(np.append(starts, r_ok.size)))
        keep = rank < limit
        mask[r_ok[keep], c_ok[keep]] = ~mask[r_ok[keep], c_ok[keep]]
        done = np.bincount(r_ok[keep], minlength=size)
        surplus -= np.sign(surplus) * done
        active = np.flatnonzero(surplus)
    return mask


def stratified_subset_masks(
    rng: np.random.Generator, sizes: list[int], ks: list[int], size: int
) -> np.ndarray:
    """Random k_s-subsets drawn independently within consecutive strata of sizes n_s,
    concatenated to a bool (size, Σ n_s) mask (within-outcome permutations of rows)."""
    return np.concatenate(
        [random_subset_masks(rng, n, k, size) for n, k in zip(sizes, ks, strict=True)], axis=1
    )
