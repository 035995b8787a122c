"""Calibration / held-out split stratified by (intersection, label) (notes ``intersectional.md``
§4.8), so that small intersections appear in both splits."""

from __future__ import annotations

import numpy as np

from fairengine.errors import DataContractError


def stratified_split(
    strata: np.ndarray, test_size: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (fit, test): within each stratum a random ``round(test_size · n)`` rows go to
    the test split (at least one row each side when the stratum has two or more rows).

    Vectorised: one random permutation, then each row's rank inside its stratum.
    """
    key = np.asarray(strata)
    if key.ndim != 1 or key.size < 2:
        raise DataContractError("the mitigation split needs at least two rows")
    if not 0 < test_size < 1:
        raise DataContractError(f"test_size must be in (0, 1), got {test_size}")
    order = np.lexsort((rng.random(key.size), key))
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    sizes = np.diff(np.r_[starts, key.size])
    rank = np.arange(key.size) - np.repeat(starts, sizes)
    n_test = np.rint(sizes * test_size).astype(np.intp)
    n_test = np.where(sizes >= 2, np.clip(n_test, 1, sizes - 1), n_test)
    is_test = rank < np.repeat(n_test, sizes)
    return np.sort(order[~is_test]), np.sort(order[is_test])
