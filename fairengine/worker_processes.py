"""Worker processes for the computations that hold Python's GIL (FlipTest's refits).

FlipTest's Sinkhorn loop on its 500 x 500 problems spends about half of every iteration in
Python and in numpy calls on 500-element vectors, which hold the GIL: on this project's 2-core
machine its group pairs on two threads took 17 s of wall time for 23 s of CPU (1.35 cores), and
inside the audit, next to the other methods' threads, the whole method phase used 1.3 of the 2
cores. A computation run here goes to a pool of worker processes instead (one GIL each), while
the calling thread waits without holding the GIL, so the audit's other threads keep their core.

The pool is joblib's ``loky`` reusable executor (scikit-learn's dependency: cloudpickle for the
payload, workers that do not re-run the caller's ``__main__``), kept between calls and shut
down after :data:`IDLE_SECONDS` without work. Workers run their numeric libraries on one thread
each (``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/``MKL_NUM_THREADS`` = 1, as the audit's own
concurrent methods do: :mod:`fairengine.library_threads`), so a computation gives the same
numbers in a worker as on a thread.

:func:`run` falls back to running the computation on the calling thread, with the same result,
when the pool is off (``FAIRENGINE_WORKER_PROCESSES=0``, or one core), when the payload cannot
be pickled (e.g. a model object that does not pickle) or when the pool breaks (a worker killed);
:func:`last_fallback` says why the latest call fell back. Errors raised by the computation
itself are re-raised in the caller unchanged.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "FAIRENGINE_WORKER_PROCESSES"
"""Environment variable: the number of worker processes (0 turns the pool off); default the
machine's cores, at most :data:`MAX_WORKERS`."""

MAX_WORKERS = 4
IDLE_SECONDS = 300
"""Workers shut down after this long without work (a later call starts them again)."""

WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

_lock = threading.Lock()
_state = threading.local()
_last_used: float | None = None  # time.monotonic() of the latest call given to the pool


class _PayloadError(Exception):
    """The payload of a call could not be pickled (raised before anything is submitted)."""


def workers() -> int:
    """Worker processes to use: :data:`ENV` when set (0 = none), else the cores (at most
    :data:`MAX_WORKERS`), and none on a single core (nothing to gain)."""
    raw = os.environ.get(ENV)
    if raw is not None and raw.strip():
        try:
            n = int(raw)
        except ValueError:
            from fairengine.errors import ConfigError

            raise ConfigError(
                f"{ENV} must be a whole number of worker processes (0 turns them off); got {raw!r}"
            ) from None
        return max(0, n)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    return 0 if cores < 2 else min(MAX_WORKERS, cores)


def _executor() -> Any:
    global _last_used
    from joblib.externals.loky import get_reusable_executor

    _last_used = time.monotonic()

    with _lock:  # one pool per process; loky re-creates it when it broke
        return get_reusable_executor(
            max_workers=workers(), timeout=IDLE_SECONDS, env=dict(WORKER_ENV)
        )


def _call(payload: bytes) -> Any:
    """Runs in a worker: unpickle ``(fn, args, kwargs)`` and call it."""
    import pickle

    fn, args, kwargs = pickle.loads(payload)
    return fn(*args, **kwargs)


def _warm(modules: tuple[str, ...]) -> int:
    """Runs in a worker: import ``modules`` ahead of the first real call."""
    import importlib

    for name in modules:
        importlib.import_module(name)
    return os.getpid()


def warm_up(modules: tuple[str, ...] = ()) -> list[Future[int]]:
    """Start the workers (and import ``modules`` in each) without waiting: the imports then
    happen while the caller does something else (e.g. waits for Prefect's server). Returns
    the futures (nothing when the pool is off)."""
    n = workers()
    if n == 0:
        return []
    try:
        pool = _executor()
        return [pool.submit(_warm, tuple(modules)) for _ in range(n)]
    except Exception:  # a pool that cannot start: the calls fall back to threads
        return []


def last_fallback() -> str | None:
    """Why this thread's latest :func:`run` ran on the calling thread (``None``: in a worker)."""
    return getattr(_state, "fallback", None)


def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker process (module docstring), or on this thread when
    the pool is off, the payload does not pickle or the pool broke. ``fn`` must be importable
    (a module-level function) for the worker to find it."""
    return run_many(fn, [args], **kwargs)[0]


def run_many(fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], **kwargs: Any) -> list[T]:
    """``[fn(*args, **kwargs) for args in calls]``, spread over the worker processes at once
    (in order), or all on this thread when the pool is off, a payload does not pickle or the
    pool broke (same results; :func:`last_fallback` says why)."""

    def here(reason: str) -> list[T]:
        _state.fallback = reason
        return [fn(*args, **kwargs) for args in calls]

    _state.fallback = None
    if not calls:
        return []
    if workers() == 0:
        return here(f"{ENV}=0 or a single core")
    try:
        payloads = [_dumps((fn, args, kwargs)) for args in calls]
    except _PayloadError as exc:
        return here(f"the computation's inputs do not pickle ({exc})")
    try:
        pool = _executor()
        futures = [pool.submit(_call, payload) for payload in payloads]
    except Exception as exc:  # the pool cannot start (e.g. no /dev/shm): compute here
        return here(f"no worker process could start ({type(exc).__name__}: {exc})")
    try:
        return [future.result() for future in futures]
    except Exception as exc:
        if _broken(exc):  # a worker died (killed, out of memory): compute here
            return here(f"a worker process stopped ({type(exc).__name__}: {exc})")
        raise


def pool_is_warm() -> bool:
    """Whether the worker processes are up: the pool took a call less than 90% of
    :data:`IDLE_SECONDS` ago (loky stops idle workers after that) and is not turned off."""
    used = _last_used
    return used is not None and time.monotonic() - used < 0.9 * IDLE_SECONDS and workers() > 0


def run_many_if_warm(
    fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], **kwargs: Any
) -> list[T]:
    """:func:`run_many` while the workers are up (:func:`pool_is_warm`: e.g. right after an
    audit's FlipTest), else on this thread: work that is worth spreading over idle workers
    (the report's FlipTest figures after the decisions) but not worth starting them for (a
    report rendered from cached results). Same results either way."""
    if len(calls) > 1 and pool_is_warm():
        return run_many(fn, calls, **kwargs)
    _state.fallback = "the worker processes are not up"
    return [fn(*args, **kwargs) for args in calls]


def _dumps(obj: Any) -> bytes:
    import cloudpickle

    try:
        return cloudpickle.dumps(obj)
    except Exception as exc:  # any object that refuses: pickle.PicklingError, TypeError, ...
        raise _PayloadError(f"{type(exc).__name__}: {exc}") from None


def _broken(exc: BaseException) -> bool:
    from concurrent.futures.process import BrokenProcessPool

    from joblib.externals.loky.process_executor import TerminatedWorkerError

    return isinstance(exc, BrokenProcessPool | TerminatedWorkerError)
