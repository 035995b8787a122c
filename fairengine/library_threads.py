"""Threads of the numeric libraries (BLAS, OpenMP, torch) while FairEngine computes.

numpy's OpenBLAS, scikit-learn's OpenMP and torch each keep a pool of one thread per core. When
two of those pools run at once on the same cores (the audit runs its methods concurrently; a
method runs its refits concurrently), their threads wait on each other: measured on this
project's 2-core machine with one other busy process, a 500 x 40 x 500 float64 product took
11.0 ms on OpenBLAS's two threads against 3.4 ms on one, and torch's 500 x 500 x 49 product
7.4 ms against 0.46 ms (16x). Small problems gain nothing from a second thread anyway.

:func:`single_threaded` caps them at one thread for a block. The BLAS limit (threadpoolctl) set
from the main thread holds for every thread, so it is reference-counted across threads
(overlapping blocks restore the original size only when the last one ends); torch's setting
(OpenMP's) is per thread, so each thread caps and restores its own, and a cap set on the main
thread is inherited by threads started later (the flow's task-runner threads).
:func:`small_problem_threads` applies it to problems below :data:`SMALL_PROBLEM` operations.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SMALL_PROBLEM = 2.5e7
"""Problems with fewer operations (e.g. kernel entries) than this run single-threaded."""

_lock = threading.Lock()
_depth = 0  # open blocks, all threads together (the BLAS/OpenMP limits are per process)
_saved: dict[str, Any] = {}
_local = threading.local()  # torch's intra-op setting is per thread (OpenMP's ICVs)


@functools.cache
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController  # inspects the loaded libraries: once

    return ThreadpoolController()


def _enter() -> None:
    global _depth
    import torch

    with _lock:
        _depth += 1
        if _depth == 1:
            _saved["limiter"] = _controller().limit(limits=1, user_api="blas")
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        _local.torch = torch.get_num_threads()
        if _local.torch > 1:
            torch.set_num_threads(1)
    _local.depth = depth + 1


def _exit() -> None:
    global _depth
    import torch

    _local.depth -= 1
    if _local.depth == 0 and torch.get_num_threads() != _local.torch:
        torch.set_num_threads(_local.torch)
    with _lock:
        _depth -= 1
        if _depth == 0:
            limiter = _saved.pop("limiter", None)
            if limiter is not None:
                limiter.restore_original_limits()


@contextmanager
def single_threaded() -> Iterator[None]:
    """BLAS, OpenMP and torch intra-op pools at one thread for the block (module docstring)."""
    _enter()
    try:
        yield
    finally:
        _exit()


@contextmanager
def small_problem_threads(n_ops: float, limit: float = SMALL_PROBLEM) -> Iterator[None]:
    """:func:`single_threaded` when ``n_ops`` < ``limit``; otherwise the pools as they are."""
    if n_ops < limit:
        with single_threaded():
            yield
    else:
        yield


@contextmanager
def follow_process_cap() -> Iterator[None]:
    """In a worker thread: :func:`single_threaded` for the block when a single-threaded block is
    open anywhere in the process (the flow's, around its concurrent methods), so that this
    thread's own torch pool is capped too (torch's setting is per thread, and a task-runner
    thread started before the flow's cap keeps the default)."""
    if _depth > 0:
        with single_threaded():
            yield
    else:
        yield


def concurrent_tasks_single_threaded(n_tasks: int, cores: int | None = None) -> bool:
    """Whether ``n_tasks`` tasks running at once fill the machine's cores, so that each should
    keep its libraries single-threaded (one level of parallelism, across the tasks)."""
    return n_tasks >= (cores or os.cpu_count() or 1)
