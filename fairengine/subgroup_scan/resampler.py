"""More null scans for the subgroup scan's findings, when the audit's sequential decisions ask
for them (a :class:`fairengine.decisions.Resampler`).

Finding ``scan_<statistic>.<j>`` carries the exceedance count of its step-down p-value
p̃_j = (1 + #{b : the null scan b exceeds at some reported rank l ≤ j})/(B + 1)
(:mod:`fairengine.subgroup_scan.scan`): the frequency of a per-draw event, so a further batch
of null scans adds its own count. The resampler rebuilds the observed scan from the dataset and
the config exactly as the method does (same search space, same ranking, same reported ranks),
then draws batch ``(start, batch)`` from the stream ``default_rng([seed, 0x5CA7, start])``,
independent of the method's first draws (``default_rng(seed)``) and of other batches. One
batch serves every finding of the scan (they share the null scans, as in the method): it is
computed once per (start, batch) and cached.
"""

from __future__ import annotations

import threading

import numpy as np

from fairengine import progress
from fairengine.dataset import AuditDataset
from fairengine.subgroup_scan.config import SubgroupScanConfig
from fairengine.subgroup_scan.method import METHOD, scan_frame
from fairengine.subgroup_scan.null import NullDraws
from fairengine.subgroup_scan.scan import (
    NullBatch,
    ObservedScan,
    null_scan_batch,
    observed_scan,
    select_top,
)
from fairengine.subgroup_scan.search_space import build_search_space, code_features
from fairengine.subgroup_scan.statistics import cell_outcomes

_STREAM = 0x5CA7


class SubgroupScanResampler:
    """Draws more null scans for the findings of ``subgroup_scan`` (module docstring)."""

    def __init__(self, dataset: AuditDataset, config: SubgroupScanConfig, *, seed: int = 0):
        self.dataset = dataset
        self.config = config
        self.seed = int(seed)
        self._keys = {f"scan_{config.statistic}.{j}": j - 1 for j in range(1, config.top_k + 1)}
        self._state: tuple[NullDraws, ObservedScan, np.ndarray] | None = None
        self._batches: dict[tuple[int, int], NullBatch] = {}
        self._lock = threading.Lock()

    def can_extend(self, key: str) -> bool:
        return bool(self.config.enabled) and key in self._keys

    def _prepare(self) -> tuple[NullDraws, ObservedScan, np.ndarray]:
        if self._state is None:
            cfg, ds = self.config, self.dataset
            frame = scan_frame(ds, cfg)
            coded = code_features(frame, list(frame.columns), cfg.levels)
            space = build_search_space(coded, cfg.depth, cfg.min_size)
            cells = cell_outcomes(
                space,
                cfg.statistic,
                ds.label,
                ds.probability if cfg.statistic == "calibration" else None,
                ds.prediction if cfg.statistic != "calibration" else None,
            )
            scan = observed_scan(space, cells, cfg.sides)
            ranks = select_top(space, scan, cfg.top_k, float(cfg.jaccard))
            self._state = (NullDraws(space, cells, cfg.mode), scan, ranks)
        return self._state

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        j = self._keys[key]
        cache_key = (int(start), int(batch))
        with self._lock:
            got = self._batches.get(cache_key)
            if got is None:
                progress.report(METHOD, f"more null scans: {start:,} -> {start + batch:,}")
                draws, scan, ranks = self._prepare()
                rng = np.random.default_rng([self.seed, _STREAM, int(start)])
                got = null_scan_batch(draws, scan, self.config.sides, ranks, rng, int(batch))
                self._batches[cache_key] = got
        if j >= got.exceeds.shape[1]:
            return 0
        return int(got.exceeds[:, j].sum())
