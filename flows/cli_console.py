"""What the ``fairengine`` command prints while it works, and what it keeps quiet.

:data:`CONSOLE` writes ``[fairengine] …`` lines to stderr (not ``print``: an audit flow's
``log_prints`` would turn them into Prefect logs); :class:`ProgressPrinter` shows
:mod:`fairengine.progress` events. Without ``--debug``, :func:`quiet_library_output` keeps
library chatter out: Prefect's and MLflow's INFO logs, MLflow's progress bars, warnings raised
inside installed packages, and Prefect's engine copies of a failure (the CLI prints the error
itself, once).
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, TextIO

PROGRESS_EVERY_S = 5.0  # at most one batch-progress line per step this often


@dataclass
class Console:
    """The CLI's stderr lines; ``quiet`` (``--quiet``) silences them."""

    quiet: bool = False

    def say(self, msg: str) -> None:
        if not self.quiet:
            sys.stderr.write(f"[fairengine] {msg}\n")
            sys.stderr.flush()


CONSOLE = Console()


class ProgressPrinter:
    """Prints :mod:`fairengine.progress` events: every step start/finish, and batch progress
    (``12/68 tests``) at most every :data:`PROGRESS_EVERY_S` seconds per step."""

    def __init__(self, console: Console = CONSOLE) -> None:
        self.console = console
        self.start = time.perf_counter()
        self.last: dict[str, float] = {}

    def __call__(self, event: Any) -> None:
        now = time.perf_counter()
        elapsed = f"{now - self.start:.0f} s"
        if event.done is None or not event.total:
            self.console.say(f"{event.step}: {event.message} [{elapsed}]")
            return
        if now - self.last.get(event.step, self.start) < PROGRESS_EVERY_S:
            return
        self.last[event.step] = now
        self.console.say(f"{event.step}: {event.done}/{event.total} {event.message} [{elapsed}]")


def quiet_library_output() -> None:
    """Before Prefect or MLflow is imported: their INFO chatter and progress bars off (user
    settings win), and warnings from installed packages dropped."""
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # runner: dask: the scheduler's and nannies' INFO lines (about 30 an audit); Dask reads its
    # config from the environment at import, its worker processes inherit it
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    # advice to library authors (MLflow's "add type hints to predict", deprecations) is not
    # for the person running an audit; --debug shows it
    warnings.showwarning = _show_own_warnings


_SHOW_WARNING = warnings.showwarning


def _show_own_warnings(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` of the CLI without ``--debug``: warnings raised inside installed
    libraries (``site-packages``) are dropped, FairEngine's own are shown."""
    if "site-packages" not in filename:
        _SHOW_WARNING(message, category, filename, lineno, file, line)


_ENGINE_FAILURE = (
    "Finished in state",
    "Task run failed",
    "Encountered exception",
    "Crash detected",
)


class _NoTraceback(logging.Filter):
    """Without ``--debug``: framework log records lose their traceback, and Prefect's engine
    records of a failed task or flow (the same error, three times) are dropped; the CLI prints
    the error itself, once."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.name.startswith("prefect")
            and record.levelno >= logging.ERROR
            and str(record.msg).startswith(_ENGINE_FAILURE)
        ):
            return False
        record.exc_info = None
        record.exc_text = None
        return True


class _NoDataWarningEcho(logging.Filter):
    """Without ``--debug``, on the console only: the data warnings that ``load_data`` logs to
    the flow run (:data:`tasks.data.WARNING_FORMAT`; still sent to the Prefect API, so a
    server's UI shows them) are dropped: the CLI prints each of them itself, after its input
    checks and again with the outcome."""

    def __init__(self, message_format: str) -> None:
        super().__init__()
        self.message_format = message_format

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.name.startswith("prefect.task_runs") and record.msg == self.message_format
        )


def quiet_engine_tracebacks() -> None:
    """Once Prefect is imported: its handlers drop tracebacks and engine failure copies, and
    its console the data warnings the CLI prints itself."""
    import prefect  # noqa: F401 - configures Prefect's handlers, which get the filter
    from prefect.logging.handlers import APILogHandler

    from tasks.data import WARNING_FORMAT

    loggers = [logging.getLogger()] + [
        logging.getLogger(name)
        for name in list(logging.Logger.manager.loggerDict)
        if name.startswith("prefect")
    ]
    for logger in loggers:
        for handler in logger.handlers:
            handler.addFilter(_NoTraceback())
            if not isinstance(handler, APILogHandler):
                handler.addFilter(_NoDataWarningEcho(WARNING_FORMAT))
