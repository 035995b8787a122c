"""How the ``fairengine`` command stops: SIGINT/SIGTERM end an audit within seconds.

The audit flow runs in a worker thread (:func:`in_worker_thread`) so that Prefect's SIGTERM
bridge, which waits for running tasks, never owns the main thread's handlers. On a signal the
main thread raises :class:`AuditInterrupted` and the CLI calls :func:`hard_exit`: an MLflow run
still being logged is discarded, child processes (Prefect's embedded server, Dask workers) are
stopped, and the process exits 128 + the signal number. Results of method steps that had
finished are already in the cache (Prefect persists a task's result when it completes).

A command that finishes ends the process after its exit hooks, without the interpreter's module
teardown (:func:`end_after_exit_hooks`).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from typing import Any

from flows.cli_console import CONSOLE


class AuditInterrupted(BaseException):
    """Raised in the main thread by SIGINT/SIGTERM (a BaseException, so that no ``except
    Exception`` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def hard_exit(code: int) -> None:
    """End the process now: discard an MLflow run still being logged, stop child processes
    (Prefect's embedded server, Dask workers) and ``os._exit`` without waiting for method
    threads, which Python cannot interrupt. Results of finished methods are already in the
    cache (Prefect persists a task's result when it completes)."""
    try:
        from tasks.mlflow_log import discard_open_runs

        for run_id in discard_open_runs():
            CONSOLE.say(f"discarded the partial MLflow run {run_id}")
    except Exception:  # exiting anyway
        pass
    try:
        import psutil

        children = psutil.Process().children(recursive=True)
        for child in children:
            child.terminate()
        _, alive = psutil.wait_procs(children, timeout=1.0)
        for child in alive:
            child.kill()
    except Exception:  # exiting anyway
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def end_after_exit_hooks(outcome: dict[str, int]) -> None:
    """End the process with ``outcome["code"]`` once every exit hook has run, skipping the
    interpreter's teardown of its modules.

    With torch, Prefect, MLflow and scikit-learn loaded, that teardown (freeing every module and
    object, no Python code) takes 2-3 s after an audit (``benchmarks/results/startup.md``) and
    has no effect outside the process. Registered first, this hook runs last: after Prefect's
    services drained (``threading`` exit hooks) and after every later ``atexit`` hook (the
    embedded server's stop, MLflow's, weakref finalizers); it then shuts logging down (the one
    hook registered before it) and flushes the standard streams. Without a code (``main``
    raised) it does nothing and Python exits as usual.
    """

    def end() -> None:
        code = outcome.get("code")
        if code is None:
            return
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    atexit.register(end)


def _on_signal(signum: int, _frame: Any) -> None:
    CONSOLE.say(
        f"{signal.Signals(signum).name} received: stopping. Finished method results stay in the "
        "cache; no partial MLflow run is kept."
    )
    raise AuditInterrupted(signum)


def install_signal_handlers() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGTERM, _on_signal)


def in_worker_thread(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a worker thread while the main thread waits for signals.

    Prefect's flow engine replaces the SIGTERM handler of the main thread while a flow runs and,
    on SIGTERM, waits for the running tasks before it exits (minutes for a long permutation
    step). Run elsewhere, the flow leaves the main thread's handlers alone: SIGINT/SIGTERM
    raise :class:`AuditInterrupted` here at once and :func:`main` ends the process.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # re-raised in the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="fairengine-audit", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
