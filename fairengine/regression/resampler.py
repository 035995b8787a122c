"""More permutations for the regression method's tests, when the audit's sequential decisions
ask for them (a :class:`fairengine.decisions.Resampler`).

Pair i of the method (numbered over the attributes in order, as
:func:`fairengine.regression.method.run_regression_metrics` numbers them) drew its first
permutations from ``pair_seed(seed, i)``; a further batch of ``batch`` permutations after
``start`` draws from ``pair_seed(seed, i, start)`` — independent of the first stream and of each
other, reproducible. One batch serves every test of the pair (their statistics share the
permutations, as in the method), so it is computed once per (pair, start, batch) and cached.
"""

from __future__ import annotations

import threading

import numpy as np

from fairengine import progress
from fairengine.dataset import AuditDataset
from fairengine.finding_keys import pair_token, part_token
from fairengine.group_pairs import pair_seed, planned_pairs
from fairengine.regression.config import RegressionConfig
from fairengine.regression.method import METHOD
from fairengine.regression.permutation import PairTests, pair_permutation_tests


class RegressionResampler:
    """Draws more permutations for the tests of ``regression_metrics`` (module docstring)."""

    def __init__(self, dataset: AuditDataset, config: RegressionConfig, *, seed: int = 0):
        self.dataset = dataset
        self.config = config
        self.seed = int(seed)
        self._pairs: dict[str, tuple[int, str, int, int]] = {}  # key -> (stream, attr, a, b)
        self._batches: dict[tuple[int, int, int], PairTests] = {}
        self._lock = threading.Lock()
        if dataset.task != "regression" or dataset.prediction is None:
            return
        stream = 0
        for attr, enc in dataset.groups.items():
            for a, b in planned_pairs(enc.sizes(), config.max_pairs):
                token = f"{part_token(attr)}.{pair_token(enc.categories[a], enc.categories[b])}"
                names = [*config.metrics, *(("ks", "wasserstein") if config.distance_tests else ())]
                for name in names:
                    self._pairs[f"reg_{name}.{token}"] = (stream, attr, a, b)
                stream += 1

    def can_extend(self, key: str) -> bool:
        return bool(self.config.enabled) and key in self._pairs

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        stream, attr, a, b = self._pairs[key]
        cache_key = (stream, int(start), int(batch))
        with self._lock:  # one batch per pair, even when its tests are drawn on threads
            tests = self._batches.get(cache_key)
            if tests is None:
                progress.report(
                    METHOD, f"more permutations for {key}: {start:,} -> {start + batch:,}"
                )
                tests = self._draw(stream, attr, a, b, start, batch)
                self._batches[cache_key] = tests
        metric = key.split(".", 1)[0].removeprefix("reg_")
        if metric in ("ks", "wasserstein"):
            return int(tests.distance(metric).n_extreme)
        return int(tests.difference(metric).n_extreme)

    def _draw(self, stream: int, attr: str, a: int, b: int, start: int, batch: int) -> PairTests:
        ds, cfg = self.dataset, self.config
        enc = ds.groups[attr]
        assert ds.prediction is not None
        return pair_permutation_tests(
            ds.label,
            ds.prediction,
            enc.codes.astype(np.intp),
            enc.categories,
            group_a=a,
            group_b=b,
            weights=ds.weights,
            metrics=tuple(cfg.metrics),
            distance_tests=cfg.distance_tests,
            n_permutations=int(batch),
            alternative=cfg.alternative,
            confidence_level=cfg.confidence_level,
            seed=pair_seed(self.seed, stream, int(start)),
            attribute=attr,
        )
