"""More permutations for a method's pairwise group tests, when the audit's sequential decisions
ask for them (:class:`PairResampler`, a :class:`fairengine.decisions.Resampler`).

The regression, multiclass and ranking methods test every planned pair of groups of each
protected attribute (:func:`fairengine.group_pairs.planned_pairs`); pair i, numbered over the
attributes in order, drew its first permutations from ``pair_seed(seed, i)``. A further batch of
``batch`` permutations after ``start`` draws from ``pair_seed(seed, i, start)``: independent of
the first stream and of each other, reproducible. One batch serves every test of the pair (their
statistics share the permutations, as in the method), so it is computed once per (pair, start,
batch) and cached; a test's exceedances are read from the batch by its finding key, whose last
two parts (``<attr>.<a>_<b>``) name the pair.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from fairengine import progress
from fairengine.dataset import AuditDataset
from fairengine.finding_keys import pair_token, part_token
from fairengine.group_pairs import pair_seed, planned_pairs


class PairResampler:
    """Draws more permutations for the pair tests of one method (module docstring).

    Subclasses set :attr:`method` and :attr:`task` and implement :meth:`extends` (which finding
    keys are permutation tests) and :meth:`exceedances` (one batch of a pair: the exceedance
    count of each of its tests, by finding key). ``config`` needs ``enabled`` and
    ``max_pairs``.
    """

    method: str = ""
    task: str = ""

    def __init__(self, dataset: AuditDataset, config: Any, *, seed: int = 0):
        self.dataset = dataset
        self.config = config
        self.seed = int(seed)
        self._pairs: dict[str, tuple[int, str, int, int]] = {}  # pair token -> its draw
        self._batches: dict[tuple[int, int, int], dict[str, int]] = {}
        self._lock = threading.Lock()
        if dataset.task != self.task or dataset.prediction is None:
            return
        stream = 0
        for attr, enc in dataset.groups.items():
            for a, b in planned_pairs(enc.sizes(), config.max_pairs):
                token = f"{part_token(attr)}.{pair_token(enc.categories[a], enc.categories[b])}"
                self._pairs[token] = (stream, attr, a, b)
                stream += 1

    @staticmethod
    def _token(key: str) -> str:
        return ".".join(key.split(".")[-2:])

    def extends(self, key: str) -> bool:
        """Whether ``key`` names one of the method's permutation tests."""
        raise NotImplementedError

    def exceedances(
        self, attr: str, codes: np.ndarray, a: int, b: int, seed: np.random.SeedSequence, batch: int
    ) -> dict[str, int]:
        """One batch of ``batch`` permutations of the pair (``a``, ``b``) of ``attr``
        (``codes``: its group codes), drawn from ``seed``: exceedances by finding key."""
        raise NotImplementedError

    def can_extend(self, key: str) -> bool:
        return bool(self.config.enabled) and self.extends(key) and self._token(key) in self._pairs

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        stream, attr, a, b = self._pairs[self._token(key)]
        cache_key = (stream, int(start), int(batch))
        with self._lock:  # one batch per pair, even when its tests are drawn on threads
            counts = self._batches.get(cache_key)
            if counts is None:
                progress.report(
                    self.method, f"more permutations for {key}: {start:,} -> {start + batch:,}"
                )
                codes = self.dataset.groups[attr].codes.astype(np.intp)
                seed = pair_seed(self.seed, stream, int(start))
                counts = self.exceedances(attr, codes, a, b, seed, int(batch))
                self._batches[cache_key] = counts
        return counts[key]
