"""More permutations for the multiclass method's tests, when the audit's sequential decisions
ask for them (a :class:`fairengine.decisions.Resampler`; the convention of
:mod:`fairengine.regression.resampler`): pair i's batch after ``start`` draws from
``pair_seed(seed, i, start)``, one batch serves every test of the pair and is cached, and a
test's new exceedances are read from the findings the batch gives (the same keys)."""

from __future__ import annotations

import threading

import numpy as np

from fairengine import progress
from fairengine.dataset import AuditDataset
from fairengine.finding_keys import pair_token, part_token
from fairengine.group_pairs import pair_seed, planned_pairs
from fairengine.multiclass.config import MulticlassConfig
from fairengine.multiclass.findings import multiclass_findings
from fairengine.multiclass.method import METHOD
from fairengine.multiclass.permutation import pair_permutation_tests


class MulticlassResampler:
    """Draws more permutations for the tests of ``multiclass_metrics`` (module docstring)."""

    def __init__(self, dataset: AuditDataset, config: MulticlassConfig, *, seed: int = 0):
        self.dataset = dataset
        self.config = config
        self.seed = int(seed)
        self._pairs: dict[str, tuple[int, str, int, int]] = {}  # pair token -> its draw
        self._batches: dict[tuple[int, int, int], dict[str, int]] = {}
        self._lock = threading.Lock()
        if dataset.task != "multiclass" or dataset.prediction is None:
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

    def can_extend(self, key: str) -> bool:
        return (
            bool(self.config.enabled)
            and key.startswith("mc_")
            and not key.startswith(("mc_group_", "mc_epsilon"))
            and self._token(key) in self._pairs
        )

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        stream, attr, a, b = self._pairs[self._token(key)]
        cache_key = (stream, int(start), int(batch))
        with self._lock:  # one batch per pair, even when its tests are drawn on threads
            counts = self._batches.get(cache_key)
            if counts is None:
                progress.report(
                    METHOD, f"more permutations for {key}: {start:,} -> {start + batch:,}"
                )
                counts = self._draw(stream, attr, a, b, start, batch)
                self._batches[cache_key] = counts
        return counts[key]

    def _draw(
        self, stream: int, attr: str, a: int, b: int, start: int, batch: int
    ) -> dict[str, int]:
        ds, cfg = self.dataset, self.config
        enc = ds.groups[attr]
        tests = pair_permutation_tests(
            ds.label,
            ds.prediction,
            enc.codes.astype(np.intp),
            enc.categories,
            ds.classes,
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
        return {
            f.key: int(f.resampling[0].exceedances)
            for f in multiclass_findings(pairs=(tests,))
            if f.resampling
        }
