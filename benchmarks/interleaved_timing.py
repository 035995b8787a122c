"""Timing shared by the benchmarks that race FairEngine against a peer in one process."""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable

import numpy as np


def interleaved(
    fns: dict[str, Callable[[], object]], repeats: int
) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of each function, called in turn A, B, A, B, … (one untimed
    warm-up each: imports, caches) so that a change of the machine's load hits all alike."""
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return {k: (float(np.median(wall[k])), float(np.median(cpu[k]))) for k in fns}


def traced_peak(fn: Callable[[], object]) -> float:
    """tracemalloc peak (bytes) of one call (numpy reports its buffers to tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return float(peak)
