"""Progress of long computations, reported to whatever front end is listening.

Methods call :func:`report` at natural checkpoints (a test finished, a batch of refits done);
without a listener it costs one attribute lookup. The CLI installs a listener that prints
throttled lines to stderr (``--quiet`` installs none). A listener must be cheap and must not
raise; it may be called from the audit's worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressEvent:
    """``step`` (a method or pipeline step name) reached ``done`` of ``total`` units of
    ``unit`` (``tests``, ``refits``, ``batches``); ``done``/``total`` are ``None`` for a plain
    message such as ``started``."""

    step: str
    message: str
    done: int | None = None
    total: int | None = None


Listener = Callable[[ProgressEvent], None]

_lock = threading.Lock()
_listener: Listener | None = None


def set_listener(listener: Listener | None) -> Listener | None:
    """Install ``listener`` (``None`` removes it); returns the previous one."""
    global _listener
    with _lock:
        previous, _listener = _listener, listener
    return previous


def report(step: str, message: str, done: int | None = None, total: int | None = None) -> None:
    """Tell the listener, if any, that ``step`` progressed."""
    listener = _listener
    if listener is not None:
        listener(ProgressEvent(step, message, done, total))
