"""Which pairs of groups a pairwise method tests, and the random stream of each pair.

Shared by the regression, multiclass and ranking statistics (:mod:`fairengine.regression`,
:mod:`fairengine.multiclass`, :mod:`fairengine.ranking`) and their audit methods:

* :func:`planned_pairs` — all pairs of group codes a < b, or, above a cap, the pairs whose
  smaller group is largest (their tests have the most power); :func:`untested_pairs_warning`
  says when some were left out;
* :func:`pair_seed` — pair i's permutations come from ``SeedSequence(seed, spawn_key=(i,))`` and
  a later batch after ``start`` permutations from ``spawn_key=(i, start)`` (the convention of
  :class:`fairengine.permutation.method.PermutationResampler`), so the audit's sequential
  decisions can draw more, reproducibly and independently of the first batch;
* :func:`resolve_group` — a group given by its label or its code, as a code.
"""

from __future__ import annotations

import numpy as np

from fairengine.errors import DataContractError


def planned_pairs(sizes: np.ndarray, max_pairs: int) -> list[tuple[int, int]]:
    """Pairs of group codes (a < b) to test: all of them when at most ``max_pairs``, else the
    pairs whose smaller group is largest (ties: the larger other group, then code order)."""
    g = len(sizes)
    pairs = [(a, b) for a in range(g) for b in range(a + 1, g)]
    if len(pairs) <= max_pairs:
        return pairs
    ranked = sorted(
        pairs, key=lambda p: (-min(sizes[p[0]], sizes[p[1]]), -max(sizes[p[0]], sizes[p[1]]), p)
    )
    return sorted(ranked[:max_pairs])


def untested_pairs_warning(attribute: str, tested: int, n_groups: int, method: str) -> str | None:
    """The method's warning when ``tested`` is fewer than the G(G−1)/2 pairs of ``n_groups``."""
    possible = n_groups * (n_groups - 1) // 2
    if tested >= possible:
        return None
    return (
        f"{attribute}: {tested} of {possible} group pairs tested (the largest groups; raise "
        f"methods.{method}.max_pairs to test more)"
    )


def pair_seed(seed: int, pair_index: int, start: int = 0) -> np.random.SeedSequence:
    """The stream of pair ``pair_index``'s permutations: ``SeedSequence(seed, spawn_key=(i,))``
    for the first batch, ``(i, start)`` for a later batch starting at permutation ``start``."""
    key = (int(pair_index),) if start == 0 else (int(pair_index), int(start))
    return np.random.SeedSequence(int(seed), spawn_key=key)


def resolve_group(group: int | str, categories: tuple[str, ...], name: str) -> int:
    """The code of ``group`` (a label of ``categories`` or a code); an error naming ``name``."""
    if isinstance(group, int | np.integer) and not isinstance(group, bool):
        if 0 <= int(group) < len(categories):
            return int(group)
    elif str(group) in categories:
        return categories.index(str(group))
    raise DataContractError(
        f"{name} must be a category label or code 0..{len(categories) - 1}, got {group!r}; "
        f"categories are {list(categories)}"
    )
