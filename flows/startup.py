"""Start-up of an audit: Prefect's embedded server starts early, and the audit's imports run
while it starts.

Without a Prefect server (no ``PREFECT_API_URL``), the flow's first API call
(``prefect.client.orchestration.get_client``) starts Prefect's embedded server
(:class:`prefect.server.api.server.SubprocessASGIServer`) and waits until it answers: 3-7 s of a
subprocess importing the server app, migrating its SQLite database and starting its services,
while the calling process only polls the health check and one of two cores idles. The steps
then spend CPU on imports they could have done during that wait (MLflow and the model flavour's
loader in ``load_model``, Great Expectations in ``validate_data``, the report's modules in
``render_report``).

:func:`prepare_while_server_starts` (called by :func:`flows.audit.run_audit`, hence by the CLI
and ``fairengine.audit``) starts that same server explicitly before the flow:

1. Prefect's server module is imported on the calling thread (an import on a second thread
   would only take turns with the calling thread's imports on the GIL);
2. ``SubprocessASGIServer().start()`` runs on a background thread: it launches the server
   process and polls its health check (sleeping, so it leaves the GIL to the calling thread);
3. meanwhile the calling thread runs the given ``extra`` warm-ups and imports what the
   configured steps will need (:func:`import_warmups`), in order, while the server is still
   starting: an import left when it answers is left to its step, which imports it as before
   (a step read back from the cache may not need it at all);
4. it joins the start. The server is a per-port singleton: the flow's ``get_client()`` finds
   it running and uses it, so no second server starts.

The overlap moves work, it removes none: it pays where a core is free (the demo's warm re-run
as a CLI call, 9.5-9.7 s against 11.5-13.1 s), and not on a machine whose cores are busy,
where the server and the audit share the same CPU time (``benchmarks/results/startup.md``).

:func:`start_embedded_server` begins step 1-2 earlier; :func:`prepare_while_server_starts`
then joins that start. Whoever starts it must let :func:`prepare_while_server_starts` (or
:meth:`ServerStart.join`) join it before anything asks Prefect for a client: ``start()`` marks
the server running before it answers.

The ``fairengine`` command does better (:func:`launch_embedded_server`, called once the inputs
passed their checks, before the flow's modules are imported): it launches the same server
process itself (:mod:`flows.embedded_server_process`: Prefect's command and environment) and
points the process's Prefect settings at it with ``PREFECT_API_URL``, so the CLI process
never imports Prefect's server module (step 1: 1.7-1.8 s of its one busy core). The demo's
audit re-run from the cache: 9.5 s against 11.2 s (``benchmarks/results/startup.md``);
launched before the data checks instead, 9.1-9.3 s against 8.9-9.2 s: no gain, and bad input
would have started a server. ``fairengine.audit`` in a notebook keeps step 1-2: a
user's later Prefect calls in that session must not be sent to a server of ours.

Nothing starts when the embedded server does not apply (``PREFECT_API_URL`` set, e.g. by
``fairengine server``; ephemeral mode off; already inside a flow or task run) or already runs
in this process (an earlier audit of the same Python session): the warm-up imports are then
left to the steps, and only ``extra`` runs. A server that does not answer within
``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` raises
:class:`~fairengine.errors.OrchestrationUnavailableError` with what to do.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairengine import progress
from fairengine.config import AuditConfig
from fairengine.errors import OrchestrationUnavailableError
from flows.embedded_server_process import (
    EPHEMERAL_TIMEOUT,
    EmbeddedServerProcess,
    server_environment,
)
from flows.prefect_database import seed_database

log = logging.getLogger(__name__)

SERVER_MODULE = "prefect.server.api.server"
"""The module of Prefect's embedded server (:class:`SubprocessASGIServer`)."""
THREAD_NAME = "fairengine-prefect-server"
"""The background thread that starts the embedded server."""
PROGRESS_STEP = "prefect_server"
"""The progress step of the server start (``[fairengine] prefect_server: ...``)."""


def embedded_server_timeout_message() -> str:
    """What to do when Prefect's embedded server did not start within its timeout: the
    setting, its value, the Prefect home it was starting in, and the two ways out."""
    from prefect.settings import PREFECT_HOME, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    timeout = PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
    return (
        f"Prefect's embedded server did not start within {timeout:g} s "
        f"(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS) in PREFECT_HOME "
        f"{str(PREFECT_HOME.value())!r}: nothing was audited. The machine may be overloaded or "
        "the folder not writable; raise the timeout (e.g. "
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=300), or start a server once with "
        "`fairengine server start` and re-run (audits then report to it)"
    )


# --------------------------------------------------------------------------- the server start
def embedded_server_applies() -> bool:
    """Whether a Prefect client made now would start the embedded server, as
    ``prefect.client.orchestration.get_client`` decides: no ``PREFECT_API_URL``, ephemeral mode
    enabled, and no flow or task run (whose client this process already has) in progress."""
    from prefect.context import FlowRunContext, TaskRunContext
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return False
    return FlowRunContext.get() is None and TaskRunContext.get() is None


def embedded_server_running() -> bool:
    """Whether this process already runs Prefect's embedded server (an earlier audit)."""
    module = sys.modules.get(SERVER_MODULE)
    if module is None:  # nothing imported it: nothing started it
        return False
    server = module.SubprocessASGIServer()  # the singleton the flow's client would use
    return bool(server.running and server.server_process is not None)


SKIPPED_AT_START = {
    "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": ("PREFECT_API_BLOCKS_REGISTER_ON_START",),
    "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": ("PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION",),
}
"""Prefect settings (with their older names) that the embedded server starts with turned off,
unless the user set them."""


def embedded_server_settings() -> dict[Any, Any]:
    """The settings the embedded server starts with: no block-type registration at start
    (:data:`SKIPPED_AT_START`). Before it answers, Prefect's server imports every installed
    Prefect collection (prefect-dask imports distributed) and writes their block types to its
    database: 1.4-1.9 s of the 5.0 s start of a fresh-home server on the 2-core machine. The
    audit's flow uses no stored block; a block saved through the client (``Block.save``, e.g.
    an alert's webhook) registers its own type. A setting given in the environment (under
    either name) is kept."""
    import prefect.settings as ps

    return {
        getattr(ps, name): False
        for name, older in SKIPPED_AT_START.items()
        if not any(n in os.environ for n in (name, *older))
    }


@dataclass
class ServerStart:
    """A start of Prefect's embedded server on a background thread: :meth:`join` waits for it.

    ``server`` is the :class:`SubprocessASGIServer` singleton that the flow's client uses;
    ``begun`` the ``time.perf_counter()`` of the start."""

    server: Any
    begun: float
    thread: threading.Thread | None = None
    error: BaseException | None = None
    seconds: float | None = None
    answered: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        """The background thread: start the server (:func:`embedded_server_settings`), or wait
        for the one :func:`launch_embedded_server` launched; keep the error for :meth:`join`."""
        from prefect.settings import (
            PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
            temporary_settings,
        )

        try:
            if isinstance(self.server, EmbeddedServerProcess):
                self.server.wait(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
            else:
                with temporary_settings(updates=embedded_server_settings()):
                    self.server.start()
        except BaseException as exc:  # re-raised on the joining thread
            self.error = exc
        finally:
            self.seconds = time.perf_counter() - self.begun
            self.answered.set()

    @property
    def pid(self) -> int | None:
        """The server process's id (``None`` before it is launched)."""
        process = self.server.server_process
        return None if process is None else int(process.pid)

    def join(self) -> float:
        """Wait until the server answers; returns the seconds waited here. Raises
        :class:`OrchestrationUnavailableError` when it did not start within its timeout, and
        any other error of the start as it was raised."""
        waited = time.perf_counter()
        if self.thread is not None:
            self.thread.join()
        _forget(self)
        waited = time.perf_counter() - waited
        launched = isinstance(self.server, EmbeddedServerProcess)
        if self.error is None:
            if launched:  # its port may have changed (taken): before any client is made
                self.server.point_prefect_here()
            progress.report(PROGRESS_STEP, f"finished in {self.seconds:.1f} s")
            return waited
        progress.report(PROGRESS_STEP, "failed")
        if launched:
            self.server.stop()
        if EPHEMERAL_TIMEOUT in str(self.error):
            raise OrchestrationUnavailableError(embedded_server_timeout_message()) from None
        raise self.error


_lock = threading.Lock()
_pending: ServerStart | None = None
"""The start begun by :func:`start_embedded_server` and not joined yet."""


def _forget(start: ServerStart) -> None:
    global _pending
    with _lock:
        if _pending is start:
            _pending = None


def start_embedded_server() -> ServerStart | None:
    """Begin starting Prefect's embedded server now, on a background thread, when the flow
    would start it (:func:`embedded_server_applies`) and it is not running yet; ``None``
    otherwise. A start begun before and not joined yet is returned again.

    Imports Prefect's server module on the calling thread first (about 1.5 s). The caller must
    join the start (:meth:`ServerStart.join`, or :func:`prepare_while_server_starts`) before
    any Prefect client is made in this process."""
    global _pending
    with _lock:
        if _pending is not None:
            return _pending
    if not embedded_server_applies() or embedded_server_running():
        return None
    seed_database()  # a fresh SQLite database: the shipped schema, not 114 migrations
    module = importlib.import_module(SERVER_MODULE)
    with _lock:
        if _pending is not None:  # another thread began one meanwhile
            return _pending
        start = ServerStart(module.SubprocessASGIServer(), time.perf_counter())
        start.thread = threading.Thread(target=start.run, name=THREAD_NAME, daemon=True)
        _pending = start
    progress.report(PROGRESS_STEP, "started")
    start.thread.start()
    return start


_launched: EmbeddedServerProcess | None = None
"""The server process :func:`launch_embedded_server` launched in this process."""


def launched_api_url() -> str | None:
    """The API address of the server :func:`launch_embedded_server` launched, while it runs."""
    return _launched.api_url if _launched is not None and _launched.running else None


def launch_embedded_server() -> ServerStart | None:
    """Launch Prefect's embedded server process without importing Prefect's server module
    (:mod:`flows.embedded_server_process`; the ``fairengine`` command's way, its process being
    the audit's alone) and point this process's Prefect settings at it; ``None`` when the
    embedded server does not apply (:func:`embedded_server_applies`) or runs already. A start
    begun before and not joined yet is returned again. As with
    :func:`start_embedded_server`, the caller joins the start before any Prefect client is
    made (:func:`prepare_while_server_starts` does)."""
    global _pending, _launched
    with _lock:
        if _pending is not None:
            return _pending
    if os.environ.get("PREFECT_API_URL"):
        return None
    if not embedded_server_applies() or embedded_server_running():
        return None
    from prefect.settings import temporary_settings

    seed_database()
    begun = time.perf_counter()
    with temporary_settings(updates=embedded_server_settings()):
        server = EmbeddedServerProcess(server_environment())
    server.launch()
    server.point_prefect_here()
    with _lock:
        _launched = server
        start = ServerStart(server, begun)
        start.thread = threading.Thread(target=start.run, name=THREAD_NAME, daemon=True)
        _pending = start
    progress.report(PROGRESS_STEP, "started")
    start.thread.start()
    return start


# --------------------------------------------------------------------------- warm-ups
@dataclass(frozen=True)
class WarmUp:
    """Work that a step of the audit will do anyway and that can be done ahead, during the
    server's start: ``name`` (for the progress line) and ``run`` (imports, mostly)."""

    name: str
    run: Callable[[], object]


def _import(*modules: str) -> Callable[[], None]:
    def run() -> None:
        for name in modules:
            importlib.import_module(name)

    return run


def is_mlflow_model_uri(uri: str | None) -> bool:
    """Whether ``model.uri`` is loaded through MLflow (every URI but a ``python:`` object)."""
    return bool(uri) and not str(uri).startswith("python:")


REGISTERED_MODEL = re.compile(
    r"^models:/(?P<name>[^/@]+)(?:/(?P<version>\d+)|@(?P<alias>[^/]+))/?$"
)
"""``models:/name/3`` or ``models:/name@alias``: a version of the model registry."""
RUN_MODEL = re.compile(r"^runs:/(?P<run_id>[^/]+)/(?P<path>.+?)/?$")
"""``runs:/<run id>/<path>``: a model logged in a run."""


def model_location(uri: str, tracking_uri: str) -> str | None:
    """Where the model of ``uri`` is stored (the folder holding its ``MLmodel``), resolved
    through the registry and tracking store at ``tracking_uri`` only (never MLflow's global
    default store); ``None`` for a URI this does not resolve (MLflow 3's ``models:/m-<id>``)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    if m := REGISTERED_MODEL.match(uri):
        version = m["version"] or client.get_model_version_by_alias(m["name"], m["alias"]).version
        return str(client.get_model_version_download_uri(m["name"], str(version)))
    if m := RUN_MODEL.match(uri):
        return f"{client.get_run(m['run_id']).info.artifact_uri.rstrip('/')}/{m['path']}"
    if uri.startswith(("models:/", "runs:/")):
        return None
    return uri  # a path or a storage URI


def model_loader_modules(uri: str, tracking_uri: str) -> list[str]:
    """The modules that ``mlflow.pyfunc.load_model(uri)`` will import to load the model: the
    flavour's MLflow module (``mlflow.sklearn``, ``mlflow.pytorch``, ...) and, for a
    scikit-learn model saved with skops or cloudpickle, that package. Read from the model's
    ``MLmodel`` file (:func:`model_location`; one small file copied from the artifact store);
    ``[]`` when the URI does not resolve here."""
    import yaml
    from mlflow.artifacts import download_artifacts

    location = model_location(uri, tracking_uri)
    if location is None:
        return []
    with tempfile.TemporaryDirectory(prefix="fairengine-mlmodel-") as tmp:
        path = download_artifacts(
            artifact_uri=f"{location.rstrip('/')}/MLmodel", dst_path=tmp, tracking_uri=tracking_uri
        )
        flavors = (yaml.safe_load(Path(path).read_text()) or {}).get("flavors") or {}
    modules = []
    pyfunc = flavors.get("python_function") or {}
    loader = pyfunc.get("loader_module")
    if isinstance(loader, str) and loader.startswith("mlflow."):
        modules.append(loader)
    sklearn = flavors.get("sklearn") or {}
    serialization = {"skops": "skops.io", "cloudpickle": "cloudpickle"}
    if sklearn.get("serialization_format") in serialization:
        modules.append(serialization[sklearn["serialization_format"]])
    if "pytorch" in flavors:
        modules.append("torch")
    return modules


def _model_loader(uri: str, tracking_uri: str) -> Callable[[], None]:
    def run() -> None:
        importlib.import_module("mlflow.pyfunc")
        for name in model_loader_modules(uri, tracking_uri):
            importlib.import_module(name)

    return run


def validation_will_run(cfg: AuditConfig) -> bool:
    """Whether ``validate_data`` is sure to run rather than be read from the cache: caching is
    off, or the cache holds no key of any step yet (the first audit with this cache)."""
    from flows.method_steps import cache_root

    root = cache_root(cfg)
    return root is None or not (root / "keys").is_dir()


def import_warmups(cfg: AuditConfig) -> list[WarmUp]:
    """What the configured steps will import, in the order worth doing it while the server
    starts: MLflow and the model flavour's loader when ``model.uri`` is an MLflow URI
    (``load_model`` runs whatever the cache holds), the report's modules (``render_report``,
    every audit), and Great
    Expectations when ``validate_data`` is sure to run (:func:`validation_will_run`; a re-run
    reads its result from the cache and never imports it)."""
    from tasks.settings import default_tracking_uri

    out = []
    if is_mlflow_model_uri(cfg.model.uri):
        assert cfg.model.uri is not None
        tracking_uri = cfg.mlflow.tracking_uri or default_tracking_uri()
        out.append(WarmUp("model loader", _model_loader(cfg.model.uri, tracking_uri)))
    out.append(WarmUp("report", _import("tasks.report")))
    # not torch: the warm-ups run for a likely re-run, whose FlipTest and individual-fairness
    # results come from the cache without it (fairengine.transport imports it on first use)
    if validation_will_run(cfg):
        great_expectations = _import(
            "great_expectations",
            "great_expectations.expectations",
            "great_expectations.data_context.types.base",
        )
        out.append(WarmUp("Great Expectations", great_expectations))
    return out


@dataclass(frozen=True)
class StartupOutcome:
    """What :func:`prepare_while_server_starts` did: whether it started (or joined) the
    embedded server and its process id; ``server_seconds`` from the start until it answered;
    ``waited_seconds`` the calling thread spent blocked on it after the warm-ups;
    ``warmed``/``left`` the import warm-ups done during the start and those left to their
    steps; ``failed`` the warm-ups that raised (their step reports the real error)."""

    server_started: bool
    server_pid: int | None
    server_seconds: float | None
    waited_seconds: float
    warmed: tuple[str, ...]
    left: tuple[str, ...]
    failed: tuple[str, ...]


def _run_warmup(warmup: WarmUp | Callable[[], object], failed: list[str]) -> bool:
    """Run one warm-up; a failure is noted in ``failed`` (and logged at debug level)."""
    name = warmup.name if isinstance(warmup, WarmUp) else getattr(warmup, "__name__", "extra")
    run = warmup.run if isinstance(warmup, WarmUp) else warmup
    try:
        run()
    except Exception as exc:  # a warm-up only saves time: the step itself reports the error
        log.debug("warm-up %s failed: %s: %s", name, type(exc).__name__, exc)
        failed.append(name)
        return False
    return True


def prepare_while_server_starts(
    cfg: AuditConfig,
    extra: Sequence[Callable[[], object]] = (),
    *,
    warm_imports: bool = True,
) -> StartupOutcome:
    """Start Prefect's embedded server (or join the start :func:`start_embedded_server`
    began), and while it starts run ``extra`` (every one, in order, server or not) and then,
    with ``warm_imports``, the import warm-ups of :func:`import_warmups` for ``cfg`` until
    the server answers; join it before returning. With no embedded server to start, only
    ``extra`` runs.

    Raises :class:`~fairengine.errors.OrchestrationUnavailableError` when the server does
    not answer within ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``."""
    start = start_embedded_server()
    failed: list[str] = []
    for fn in extra:
        _run_warmup(fn, failed)
    warmed: list[str] = []
    left: list[str] = []
    if start is not None and warm_imports:
        for warmup in import_warmups(cfg):
            if start.answered.is_set():
                left.append(warmup.name)
                continue
            if _run_warmup(warmup, failed):
                warmed.append(warmup.name)
    waited = start.join() if start is not None else 0.0
    return StartupOutcome(
        server_started=start is not None,
        server_pid=None if start is None else start.pid,
        server_seconds=None if start is None else start.seconds,
        waited_seconds=round(waited, 4),
        warmed=tuple(warmed),
        left=tuple(left),
        failed=tuple(failed),
    )
