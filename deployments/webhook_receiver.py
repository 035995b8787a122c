"""A small HTTP receiver for MLflow 3 model-registry webhooks.

Run it next to the Prefect server (``docs/deployments.md``)::

    export FAIRENGINE_WEBHOOK_SECRET=...          # the secret given to MlflowClient.create_webhook
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    python -m deployments.webhook_receiver --port 8765            # binds 127.0.0.1

and register it in MLflow (the MLflow *server* must run with
``MLFLOW_WEBHOOK_ALLOWED_SCHEMES=http,https`` and ``MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS=true`` to
deliver to a loopback ``http`` URL)::

    MlflowClient("http://mlflow:5000").create_webhook(
        name="fairengine", url="http://127.0.0.1:8765/mlflow/webhook", secret=SECRET,
        events=["model_version.created", "model_version_alias.created"])

The HTTP layer is an ASGI (Starlette) app served by uvicorn (asyncio: thousands of open
connections cost a coroutine each, and the listen backlog is ``backlog``); the checks and the
dispatch below run in a bounded pool of ``dispatch_workers`` threads, so a slow Prefect never
blocks the event loop. At most ``max_pending`` deliveries are admitted at a time (verifying,
dispatching or waiting for a worker); one more is answered ``503`` with ``Retry-After`` rather
than left hanging or reset (MLflow retries 429/5xx and honours ``Retry-After``).

Every ``POST`` is checked in this order, cheapest first, and nothing is parsed or acted on
before the signature is verified:

1. path (404) and ``Content-Length`` present (411) and at most ``max_body_bytes`` (413, the body
   is not read); the body arrives within ``body_timeout_seconds`` (408); the receiver is not
   saturated (503 + ``Retry-After``: nothing was checked, the same delivery may be re-sent);
2. the headers ``X-MLflow-Delivery-Id``, ``X-MLflow-Timestamp`` and ``X-MLflow-Signature`` are
   present and well formed (401: unsigned);
3. the timestamp lies within ``tolerance_seconds`` of now (401: stale or from the future);
4. the signature matches: ``v1,<base64 HMAC-SHA256(secret, "{delivery_id}.{timestamp}.{body}")>``
   (MLflow's ``_generate_hmac_signature``; several space-separated signatures and several secrets
   are accepted, for rotation); compared in constant time (403: forged);
5. the delivery id was not accepted before (409: replay). Ids are remembered for the tolerance
   window (older deliveries fail step 3 anyway), and only once the event has been handed to
   Prefect: a delivery that failed with 503 may be retried by MLflow with the same id;
6. the body is a JSON MLflow registry event (400). MLflow's ``test_webhook`` example payload is
   acknowledged (200, ``ignored``) but starts nothing; so are events other than
   ``model_version.created`` / ``model_version_alias.created`` and ignored aliases;
7. the event is dispatched (:mod:`deployments.registry_events`): a Prefect event (default) or a
   deployment run; 202 on success, 503 + ``Retry-After`` when Prefect is unreachable (MLflow
   retries 5xx). Each (model version, event) -- the audit key -- is dispatched once per replay
   window (:class:`DispatchedEvents`): the same event under another delivery id, concurrent or
   later, shares the first dispatch's reference (202, ``"deduplicated": true``) instead of
   calling Prefect again. Prefect would have deduplicated it anyway (same event id / idempotency
   key, so the same reference); the receiver just does not depend on it under a burst.

``GET /healthz`` answers ``{"status": "ok", "counts": {...}, "pending": n}`` (request outcome
counters: ``accepted``, ``deduplicated``, ``ignored``, ``rejected_<status>``, ``busy``; the
deliveries admitted now; no secrets). The secret is read from an environment variable (never a
command-line argument: those are visible to every user in ``ps``) or from a Prefect ``Secret``
block.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import logging
import os
import socket
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from deployments.registry_events import (
    AUDITED_EVENTS,
    MalformedEvent,
    RegistryEvent,
    is_example_payload,
)
from fairengine.errors import ConfigError

DELIVERY_ID_HEADER = "X-MLflow-Delivery-Id"
TIMESTAMP_HEADER = "X-MLflow-Timestamp"
SIGNATURE_HEADER = "X-MLflow-Signature"
SIGNATURE_VERSION = "v1"
SECRET_ENV = "FAIRENGINE_WEBHOOK_SECRET"
#: The alias an audit sets on a pass: its creation starts no audit.
DEFAULT_IGNORED_ALIASES: frozenset[str] = frozenset({"fair-approved"})

logger = logging.getLogger("fairengine.webhook_receiver")

Dispatcher = Callable[[RegistryEvent], str]


class WebhookRejected(Exception):
    """A delivery refused with an HTTP status and a short, non-sensitive reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


@dataclass
class ReceiverConfig:
    """Receiver settings; every field has a safe default except the secret(s).

    ``secrets``: accepted HMAC secrets (several during a rotation). ``tolerance_seconds``: the
    accepted clock difference between MLflow and the receiver, and how long delivery ids are
    remembered (Standard Webhooks uses 5 minutes). ``max_body_bytes``: MLflow registry payloads
    are well under 10 KB. ``ignored_aliases``: aliases whose creation starts no audit (the alias
    an audit itself sets on a pass, so that it does not trigger itself).

    Load limits: ``dispatch_workers`` threads verify and dispatch (at most that many concurrent
    calls to Prefect); ``max_pending`` deliveries may be admitted at once, one more gets 503 with
    ``Retry-After: retry_after_seconds``; ``backlog`` is the listen queue of not yet accepted
    connections (the kernel caps it at ``net.core.somaxconn``); a body must arrive within
    ``body_timeout_seconds`` (a slow client cannot hold a slot); ``shutdown_timeout_seconds``
    bounds a graceful stop (in-flight deliveries are answered first).
    """

    secrets: Sequence[str]
    host: str = "127.0.0.1"
    port: int = 8765
    path: str = "/mlflow/webhook"
    max_body_bytes: int = 64 * 1024
    tolerance_seconds: float = 300.0
    max_remembered_deliveries: int = 100_000
    ignored_aliases: frozenset[str] = DEFAULT_IGNORED_ALIASES
    events: frozenset[str] = AUDITED_EVENTS
    dispatch_workers: int = 16
    max_pending: int = 256
    retry_after_seconds: int = 2
    backlog: int = 2048
    body_timeout_seconds: float = 15.0
    shutdown_timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        self.secrets = tuple(s for s in self.secrets if s)
        if not self.secrets:
            raise ConfigError(
                f"a webhook secret is required (set ${SECRET_ENV} or pass --secret-block); an "
                "unsigned receiver would start audits for anyone who can reach it"
            )
        if self.max_body_bytes < 1024:
            raise ConfigError(f"max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        if self.tolerance_seconds <= 0:
            raise ConfigError(f"tolerance_seconds must be > 0, got {self.tolerance_seconds}")
        unknown = set(self.events) - AUDITED_EVENTS
        if unknown:
            raise ConfigError(f"events {sorted(unknown)} are not one of {sorted(AUDITED_EVENTS)}")
        for name in ("dispatch_workers", "max_pending", "retry_after_seconds", "backlog"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if self.max_pending < self.dispatch_workers:
            raise ConfigError(
                f"max_pending ({self.max_pending}) must be >= dispatch_workers "
                f"({self.dispatch_workers}): every worker needs an admitted delivery to run"
            )
        for name in ("body_timeout_seconds", "shutdown_timeout_seconds"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
        self.ignored_aliases = frozenset(self.ignored_aliases)


def sign(secret: str, delivery_id: str, timestamp: str, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256(secret, "{delivery_id}.{timestamp}.{body}")>`` (MLflow 3)."""
    content = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode("utf-8"), content, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def verify_delivery(
    headers: Mapping[str, str],
    body: bytes,
    secrets: Iterable[str],
    *,
    now: float,
    tolerance_seconds: float,
) -> tuple[str, int]:
    """Check the signature headers of one delivery; returns ``(delivery_id, timestamp)``.

    Raises :class:`WebhookRejected` with 401 (unsigned, malformed, stale) or 403 (forged).
    ``headers`` lookups must be case-insensitive (``http.client.HTTPMessage`` is).
    """
    delivery_id = (headers.get(DELIVERY_ID_HEADER) or "").strip()
    timestamp = (headers.get(TIMESTAMP_HEADER) or "").strip()
    signature = (headers.get(SIGNATURE_HEADER) or "").strip()
    if not signature:
        raise WebhookRejected(401, "unsigned delivery")
    if not delivery_id or not timestamp:
        raise WebhookRejected(401, "missing delivery id or timestamp header")
    if len(delivery_id) > 128 or not delivery_id.isprintable():
        raise WebhookRejected(401, "malformed delivery id")
    if not timestamp.isdigit() or len(timestamp) > 12:
        raise WebhookRejected(401, "malformed timestamp")
    ts = int(timestamp)
    if abs(now - ts) > tolerance_seconds:
        raise WebhookRejected(401, "timestamp outside the accepted window (stale or replayed)")
    offered = [
        part.split(",", 1)[1].encode()
        for part in signature.split()
        if part.startswith(f"{SIGNATURE_VERSION},")
    ]
    if not offered:
        raise WebhookRejected(401, f"no {SIGNATURE_VERSION} signature")
    for secret in secrets:
        expected = sign(secret, delivery_id, timestamp, body).split(",", 1)[1].encode()
        matches = [hmac.compare_digest(expected, o) for o in offered]  # constant time each
        if any(matches):
            return delivery_id, ts
    raise WebhookRejected(403, "signature does not match")


class SeenDeliveries:
    """Delivery ids accepted within the replay window (thread-safe, bounded).

    ``reserve`` claims an id before dispatching (a concurrent duplicate is refused), ``release``
    gives it back when dispatch failed (so MLflow's retry can succeed), ``confirm`` keeps it.
    Entries older than ``ttl`` are dropped: such a delivery fails the timestamp check anyway.
    """

    def __init__(self, ttl: float, capacity: int) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def reserve(self, delivery_id: str, now: float) -> bool:
        with self._lock:
            self._expire(now)
            if delivery_id in self._seen:
                return False
            self._seen[delivery_id] = now
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)
            return True

    def release(self, delivery_id: str) -> None:
        with self._lock:
            self._seen.pop(delivery_id, None)

    def __contains__(self, delivery_id: str) -> bool:
        with self._lock:
            return delivery_id in self._seen

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def _expire(self, now: float) -> None:
        # margin: a timestamp may be up to `ttl` in the future as well as in the past
        horizon = now - 2 * self.ttl
        while self._seen:
            oldest_id, seen_at = next(iter(self._seen.items()))
            if seen_at >= horizon:
                break
            del self._seen[oldest_id]


class DispatchedEvents:
    """Single flight per audit key: each (model version, event) is dispatched once per window.

    :meth:`dispatch_once` calls ``dispatch`` for the first delivery of a key; a delivery of the
    same key (under another delivery id) that arrives while that call runs waits for it and gets
    its reference, and one that arrives later, within ``ttl``, gets the remembered reference.
    Prefect deduplicates the same way downstream (deterministic event id, ``run_deployment``
    idempotency key: the same reference), so this changes no outcome; it makes "dispatched once"
    hold at the receiver under a burst and saves the calls. A failed dispatch is not remembered
    (the next delivery tries again) and its error is raised to every caller that waited on it.
    Thread-safe; bounded to ``capacity`` keys (oldest dropped first).
    """

    def __init__(self, ttl: float, capacity: int) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self._done: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._running: dict[str, Future[str]] = {}
        self._lock = threading.Lock()

    def dispatch_once(self, key: str, now: float, dispatch: Callable[[], str]) -> tuple[str, bool]:
        """``(reference, deduplicated)``; ``deduplicated`` is False only for the call that ran."""
        with self._lock:
            while self._done:
                oldest, (_, at) = next(iter(self._done.items()))
                if at >= now - self.ttl:
                    break
                del self._done[oldest]
            remembered = self._done.get(key)
            if remembered is not None:
                return remembered[0], True
            running = self._running.get(key)
            if running is None:
                mine: Future[str] = Future()
                self._running[key] = mine
        if running is not None:
            return running.result(), True  # re-raises the running dispatch's error
        try:
            ref = dispatch()
        except BaseException as exc:
            with self._lock:
                del self._running[key]
            mine.set_exception(exc)
            raise
        with self._lock:
            del self._running[key]
            self._done[key] = (ref, now)
            while len(self._done) > self.capacity:
                self._done.popitem(last=False)
        mine.set_result(ref)
        return ref, False

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._done


@dataclass
class Outcome:
    """The answer to one delivery."""

    status: int
    body: dict[str, Any]


class WebhookHandlerCore:
    """The receiver's logic without HTTP: headers + body in, :class:`Outcome` out."""

    def __init__(
        self,
        config: ReceiverConfig,
        dispatch: Dispatcher,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.dispatch = dispatch
        self.clock = clock
        self.seen = SeenDeliveries(config.tolerance_seconds, config.max_remembered_deliveries)
        self.dispatched = DispatchedEvents(
            config.tolerance_seconds, config.max_remembered_deliveries
        )
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def snapshot_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def handle(self, headers: Mapping[str, str], body: bytes) -> Outcome:
        try:
            outcome = self._handle(headers, body)
        except WebhookRejected as exc:
            self.count(f"rejected_{exc.status}")
            logger.warning("Rejected webhook delivery: %s", exc.reason)
            return Outcome(exc.status, {"status": "rejected", "reason": exc.reason})
        self.count("deduplicated" if outcome.body.get("deduplicated") else outcome.body["status"])
        return outcome

    def _handle(self, headers: Mapping[str, str], body: bytes) -> Outcome:
        now = self.clock()
        delivery_id, _ = verify_delivery(
            headers,
            body,
            self.config.secrets,
            now=now,
            tolerance_seconds=self.config.tolerance_seconds,
        )
        if not self.seen.reserve(delivery_id, now):
            raise WebhookRejected(409, "delivery id already received (replay or duplicate)")
        keep = False
        try:
            outcome = self._dispatch(body, delivery_id)
            keep = True
            return outcome
        except WebhookRejected as exc:
            keep = exc.status < 500  # a 4xx body will not improve on retry; a 5xx may
            raise
        finally:
            if not keep:
                self.seen.release(delivery_id)

    def _dispatch(self, body: bytes, delivery_id: str) -> Outcome:
        try:
            parsed = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise WebhookRejected(400, "body is not UTF-8 JSON") from None
        if not isinstance(parsed, dict):
            raise WebhookRejected(400, "body is not a JSON object")
        kind = f"{parsed.get('entity')}.{parsed.get('action')}"
        if is_example_payload(parsed):
            logger.info("Ignored MLflow test_webhook example payload (delivery %s)", delivery_id)
            return Outcome(200, {"status": "ignored", "reason": "MLflow test_webhook example"})
        if kind not in self.config.events:
            return Outcome(200, {"status": "ignored", "reason": f"event {kind} not audited"})
        try:
            event = RegistryEvent.from_webhook(parsed, delivery_id)
        except MalformedEvent as exc:
            raise WebhookRejected(400, str(exc)) from None
        if event.alias and event.alias in self.config.ignored_aliases:
            return Outcome(200, {"status": "ignored", "reason": f"alias {event.alias} ignored"})
        try:
            ref, deduplicated = self.dispatched.dispatch_once(
                event.key, self.clock(), lambda: self.dispatch(event)
            )
        except Exception as exc:
            logger.error(
                "Could not hand %s %s v%s to Prefect: %s: %s",
                event.event_name,
                event.model_name,
                event.model_version,
                type(exc).__name__,
                exc,
            )
            raise WebhookRejected(503, "could not hand the event to Prefect; retry") from None
        logger.info(
            "Accepted %s for %s v%s (delivery %s) -> %s%s",
            event.event_name,
            event.model_name,
            event.model_version,
            delivery_id,
            ref,
            " (already dispatched)" if deduplicated else "",
        )
        return Outcome(
            202,
            {
                "status": "accepted",
                "event": event.event_name,
                "model_name": event.model_name,
                "model_version": event.model_version,
                "ref": ref,
                "deduplicated": deduplicated,
            },
        )


# ------------------------------------------------------------------ HTTP layer (ASGI + uvicorn)
def _reply(outcome: Outcome, retry_after: int) -> Response:
    """``outcome`` as JSON; a refusal closes the connection, a 429/503 says when to retry."""
    headers: dict[str, str] = {}
    if outcome.status >= 400:
        headers["Connection"] = "close"  # never keep a connection after a refusal
    if outcome.status in (429, 503):
        headers["Retry-After"] = str(retry_after)
    return Response(
        json.dumps(outcome.body).encode(),
        status_code=outcome.status,
        media_type="application/json",
        headers=headers,
    )


class WebhookApp:
    """The ASGI app: routing, size checks and admission on the event loop, the core in threads.

    ``pending`` counts the admitted deliveries (verifying, dispatching, or queued for one of the
    executor's threads); it is only read and written on the event loop, so it needs no lock.
    Admission happens after the body is read: answering before reading it would make the server
    close a socket with unread data, which the kernel turns into a connection reset.
    """

    def __init__(self, core: WebhookHandlerCore, executor: ThreadPoolExecutor) -> None:
        self.core = core
        self.executor = executor
        self.pending = 0
        self.app = Starlette(
            routes=[
                Route(core.config.path, self.webhook, methods=["POST"]),
                Route("/healthz", self.healthz, methods=["GET"]),
            ],
            exception_handlers={404: self.not_found, 405: self.not_found},
        )
        self.app.router.redirect_slashes = False  # /mlflow/webhook/ is not the webhook

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    def reply(self, outcome: Outcome) -> Response:
        return _reply(outcome, self.core.config.retry_after_seconds)

    def refuse(self, status: int, reason: str) -> Response:
        self.core.count(f"rejected_{status}")
        return self.reply(Outcome(status, {"status": "rejected", "reason": reason}))

    async def webhook(self, request: Request) -> Response:
        config = self.core.config
        if "chunked" in request.headers.get("transfer-encoding", "").lower():
            return self.refuse(411, "Content-Length required")
        try:
            length = int(request.headers.get("content-length") or "")
        except ValueError:
            return self.refuse(411, "Content-Length required")
        if length < 0 or length > config.max_body_bytes:
            return self.refuse(413, f"body larger than {config.max_body_bytes} bytes")
        try:
            body = await asyncio.wait_for(request.body(), config.body_timeout_seconds)
        except TimeoutError:
            return self.refuse(408, f"body not received within {config.body_timeout_seconds} s")
        except ClientDisconnect:
            return self.refuse(400, "client disconnected before sending the body")
        if len(body) != length:
            return self.refuse(400, "truncated body")
        if self.pending >= config.max_pending:
            self.core.count("busy")
            logger.debug("Receiver saturated (%d deliveries in progress): 503", self.pending)
            return self.reply(
                Outcome(
                    503,
                    {
                        "status": "busy",
                        "reason": f"{config.max_pending} deliveries in progress; retry after "
                        f"{config.retry_after_seconds} s",
                    },
                )
            )
        self.pending += 1
        try:
            loop = asyncio.get_running_loop()
            outcome = await loop.run_in_executor(
                self.executor, self.core.handle, request.headers, body
            )
        finally:
            self.pending -= 1
        return self.reply(outcome)

    async def healthz(self, request: Request) -> Response:
        counts = self.core.snapshot_counts()
        return self.reply(Outcome(200, {"status": "ok", "counts": counts, "pending": self.pending}))

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.reply(Outcome(404, {"status": "rejected", "reason": "not found"}))


def _listen(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket (``SO_REUSEADDR``; IPv6 when ``host`` is an IPv6 address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=backlog)


class WebhookServer:
    """The receiver on ``config.host:config.port`` (port 0: any free port), served by uvicorn.

    As with ``socketserver``, the socket is bound and listening once the object exists: ``url``
    is known at once and connections wait in the backlog until :meth:`serve_forever` runs.
    :meth:`serve_forever` blocks (in the main thread, SIGINT/SIGTERM stop it gracefully);
    :meth:`shutdown`, called from another thread, stops it and returns once the deliveries in
    flight were answered (at most ``shutdown_timeout_seconds``); :meth:`server_close` releases
    the socket and the dispatch threads.
    """

    def __init__(self, core: WebhookHandlerCore) -> None:
        config = core.config
        self.core = core
        self.executor = ThreadPoolExecutor(
            config.dispatch_workers, thread_name_prefix="webhook-dispatch"
        )
        self.app = WebhookApp(core, self.executor)
        self.socket = _listen(config.host, config.port, config.backlog)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self._uvicorn = uvicorn.Server(
            uvicorn.Config(
                self.app,
                lifespan="off",
                log_config=None,  # leave logging to the application
                access_log=False,
                server_header=False,
                backlog=config.backlog,
                timeout_keep_alive=5,
                timeout_graceful_shutdown=config.shutdown_timeout_seconds,  # type: ignore[arg-type]
            )
        )
        self._serving = threading.Event()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}{self.core.config.path}"

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or SIGINT/SIGTERM when run in the main thread)."""
        self._serving.set()
        try:
            if not self._uvicorn.should_exit:
                self._uvicorn.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop :meth:`serve_forever` and wait until it returned (if it was running)."""
        self._uvicorn.should_exit = True
        if self._serving.is_set():
            self._stopped.wait(timeout)

    def server_close(self) -> None:
        self.socket.close()
        self.executor.shutdown(wait=False, cancel_futures=True)


def make_server(config: ReceiverConfig, dispatch: Dispatcher | None = None) -> WebhookServer:
    """A bound, ready-to-serve receiver; ``dispatch`` defaults to posting Prefect events."""
    if dispatch is None:
        from deployments.registry_events import PrefectEventDispatcher

        dispatch = PrefectEventDispatcher()
    return WebhookServer(WebhookHandlerCore(config, dispatch))


def read_secrets(env_var: str = SECRET_ENV, block: str | None = None) -> list[str]:
    """Secrets from ``$env_var`` (comma-separated for a rotation) and/or a Prefect Secret block."""
    secrets = [s.strip() for s in os.environ.get(env_var, "").split(",") if s.strip()]
    if block:
        from prefect.blocks.system import Secret

        loaded = Secret.load(block)
        if isinstance(loaded, Coroutine):  # Prefect's async variant: inside an event loop
            loaded.close()
            raise RuntimeError(
                "read_secrets loads a Secret block synchronously; call it outside an event loop"
            )
        secrets.append(str(loaded.get()))
    return secrets


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m deployments.webhook_receiver",
        description="Receive signed MLflow webhooks and turn them into Prefect audit events.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--path", default="/mlflow/webhook")
    parser.add_argument(
        "--secret-env", default=SECRET_ENV, help=f"variable holding the secret ({SECRET_ENV})"
    )
    parser.add_argument("--secret-block", default=None, help="a Prefect Secret block name")
    parser.add_argument(
        "--dispatch",
        choices=("event", "deployment"),
        default="event",
        help="emit a Prefect event (matched by the deployment trigger) or run the deployment",
    )
    parser.add_argument(
        "--deployment", default=None, help="'flow/deployment' for --dispatch deployment"
    )
    parser.add_argument("--max-body-bytes", type=int, default=64 * 1024)
    parser.add_argument("--tolerance-seconds", type=float, default=300.0)
    parser.add_argument(
        "--workers", type=int, default=16, help="threads that verify and dispatch deliveries"
    )
    parser.add_argument(
        "--max-pending",
        type=int,
        default=256,
        help="deliveries admitted at once; more are answered 503 with Retry-After",
    )
    parser.add_argument("--retry-after", type=int, default=2, help="Retry-After seconds on 503")
    parser.add_argument("--backlog", type=int, default=2048, help="listen backlog")
    parser.add_argument(
        "--ignore-alias",
        action="append",
        default=None,
        help="alias whose creation starts no audit (repeatable; default: fair-approved)",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from tasks.settings import apply_offline_defaults

    apply_offline_defaults()
    config = ReceiverConfig(
        secrets=read_secrets(args.secret_env, args.secret_block),
        host=args.host,
        port=args.port,
        path=args.path,
        max_body_bytes=args.max_body_bytes,
        tolerance_seconds=args.tolerance_seconds,
        dispatch_workers=args.workers,
        max_pending=args.max_pending,
        retry_after_seconds=args.retry_after,
        backlog=args.backlog,
        ignored_aliases=(
            frozenset(args.ignore_alias)
            if args.ignore_alias is not None
            else DEFAULT_IGNORED_ALIASES
        ),
    )
    if args.dispatch == "deployment":
        from deployments.registry_events import AUDIT_DEPLOYMENT, DeploymentRunDispatcher

        dispatch: Dispatcher = DeploymentRunDispatcher(args.deployment or AUDIT_DEPLOYMENT)
    else:
        from deployments.registry_events import PrefectEventDispatcher

        dispatch = PrefectEventDispatcher()
    # import Prefect now rather than on the first delivery (MLflow waits 30 s for an answer)
    import prefect.client.orchestration
    import prefect.events  # noqa: F401

    server = make_server(config, dispatch)
    if config.host not in ("127.0.0.1", "::1", "localhost"):
        logger.warning(
            "Listening on %s: put a TLS-terminating proxy in front; the HMAC authenticates "
            "deliveries but does not encrypt them",
            config.host,
        )
    logger.info("Receiving MLflow webhooks at %s (dispatch: %s)", server.url, args.dispatch)
    print(f"READY {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
