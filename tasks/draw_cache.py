"""The decision step's further resamples, kept on disk with the audit's cache.

The audit's sequential decisions (:func:`fairengine.decisions.decide_family`) draw more
permutations and FlipTest refits where a decision is open. Every batch is a seeded stream of its
own (test key, part, start, size), so its exceedance count is a pure function of the data, the
model, the method's settings, the seed and the code: the same ingredients as a method step's
cache key (:mod:`tasks.caching`). :class:`CachedDraws` keeps each batch's count in
``<cache dir>/draws/<sha256>.json`` and reads it back on a re-run, so a re-run from the cache
does not redraw the refits that certified a flipset (the demo's take about 30 s).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from fairengine.dataset import AuditDataset
from fairengine.decisions import SETTINGS_CAP, BoundedResampler, Resampler
from fairengine.results import to_jsonable
from tasks.caching import dataset_identity, engine_source_hash, model_identity

DRAW_FOLDER = "draws"


def draw_identity(
    dataset: AuditDataset, model_info: dict[str, Any], settings: dict[str, Any], seed: int
) -> str:
    """What a batch's count depends on besides its own (key, part, start, size): the data, the
    model, the settings of the methods that draw (``{method: config}``), the seed, the code."""
    h = hashlib.sha256()
    for part in (dataset_identity(dataset), model_identity(model_info), engine_source_hash()):
        h.update(part.encode())
    h.update(json.dumps(to_jsonable(settings), sort_keys=True).encode())
    h.update(str(int(seed)).encode())
    return h.hexdigest()


class CachedDraws:
    """``resampler`` with its batches kept in ``folder`` under ``identity``
    (a :class:`fairengine.decisions.Resampler`, bounded when the wrapped one is)."""

    def __init__(self, resampler: Resampler, folder: Path, identity: str) -> None:
        self.resampler = resampler
        self.folder = Path(folder)
        self.identity = identity
        self.hits = 0
        self.misses = 0

    def can_extend(self, key: str) -> bool:
        return self.resampler.can_extend(key)

    def max_resamples(self, key: str) -> int | None:
        if isinstance(self.resampler, BoundedResampler):
            return self.resampler.max_resamples(key)
        return None

    def cap_setting(self, key: str) -> str:
        if isinstance(self.resampler, BoundedResampler):
            return self.resampler.cap_setting(key)
        return SETTINGS_CAP

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        name = hashlib.sha256(
            json.dumps([self.identity, key, part, int(start), int(batch)]).encode()
        ).hexdigest()
        path = self.folder / f"{name}.json"
        try:
            stored = json.loads(path.read_text())
            if stored["batch"] == int(batch):
                self.hits += 1
                return int(stored["exceedances"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # absent or unreadable: draw it
        got = int(self.resampler.draw(key, part, start, batch))
        self.misses += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(
                {"key": key, "part": part, "start": start, "batch": batch, "exceedances": got}, fh
            )
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
        return got
