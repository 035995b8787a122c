"""The numeric libraries' thread pools: capped at one thread inside blocks, restored after the
last overlapping block ends, also when blocks overlap on several threads."""

from __future__ import annotations

import threading

import torch
from threadpoolctl import threadpool_info

from fairengine.library_threads import (
    concurrent_tasks_single_threaded,
    single_threaded,
    small_problem_threads,
)


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_single_threaded_caps_and_restores():
    torch.set_num_threads(2)
    before = _blas_threads()
    with single_threaded():
        assert torch.get_num_threads() == 1
        assert all(n == 1 for n in _blas_threads())
        with single_threaded():  # nested: still capped, not restored early
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    assert _blas_threads() == before


def test_overlapping_blocks_on_threads_restore_once_the_last_ends():
    """Torch is capped per thread; the process-wide BLAS cap is restored only after the last
    block, whichever thread it is on, ends."""
    torch.set_num_threads(2)
    before = _blas_threads()
    inside = threading.Event()
    release = threading.Event()
    seen = []

    def worker():
        with single_threaded():
            inside.set()
            release.wait(10)
            seen.append(("worker torch", torch.get_num_threads()))

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(10)
    with single_threaded():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2  # the main thread's own setting is back
    release.set()
    t.join(10)
    assert seen == [("worker torch", 1)]
    assert _blas_threads() == before


def test_cap_on_the_main_thread_reaches_threads_started_inside():
    torch.set_num_threads(2)
    seen = []
    with single_threaded():
        t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        t.start()
        t.join(10)
    assert seen == [1]
    assert torch.get_num_threads() == 2


def test_small_problems_only():
    torch.set_num_threads(2)
    with small_problem_threads(1e4):
        assert torch.get_num_threads() == 1
    with small_problem_threads(1e9):
        assert torch.get_num_threads() == 2


def test_concurrent_tasks_fill_the_cores():
    assert concurrent_tasks_single_threaded(7, cores=2)
    assert concurrent_tasks_single_threaded(2, cores=2)
    assert not concurrent_tasks_single_threaded(1, cores=2)
    assert not concurrent_tasks_single_threaded(3, cores=16)


def test_worker_threads_follow_the_process_cap():
    """A thread started before the cap (a task runner's) keeps its own torch setting unless it
    follows the process cap, as the method tasks do."""
    from fairengine.library_threads import follow_process_cap

    torch.set_num_threads(2)
    go, ready = threading.Event(), threading.Event()
    seen = []

    def worker():
        torch.get_num_threads()  # the thread has its own setting from here on
        ready.set()
        go.wait(10)
        seen.append(torch.get_num_threads())
        with follow_process_cap():
            seen.append(torch.get_num_threads())
        seen.append(torch.get_num_threads())

    t = threading.Thread(target=worker)
    t.start()
    ready.wait(10)
    with single_threaded():
        go.set()
        t.join(10)
    assert seen == [2, 1, 2]
    with follow_process_cap():  # no cap open: nothing changes
        assert torch.get_num_threads() == 2
