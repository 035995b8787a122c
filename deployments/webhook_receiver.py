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

Every ``POST`` is checked in this order, cheapest first, and nothing is read, parsed or acted on
before the signature is verified:

1. path (404) and ``Content-Length`` present (411) and at most ``max_body_bytes`` (413, the body
   is not read);
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
   deployment run; 202 on success, 503 when Prefect is unreachable (MLflow retries 5xx).

``GET /healthz`` answers ``{"status": "ok", "counts": {...}}`` (request outcome counters, no
secrets). The secret is read from an environment variable (never a command-line argument: those
are visible to every user in ``ps``) or from a Prefect ``Secret`` block.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from deployments.registry_events import (
    AUDITED_EVENTS,
    MalformedEvent,
    RegistryEvent,
    is_example_payload,
)

DELIVERY_ID_HEADER = "X-MLflow-Delivery-Id"
TIMESTAMP_HEADER = "X-MLflow-Timestamp"
SIGNATURE_HEADER = "X-MLflow-Signature"
SIGNATURE_VERSION = "v1"
SECRET_ENV = "FAIRENGINE_WEBHOOK_SECRET"

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
    """

    secrets: Sequence[str]
    host: str = "127.0.0.1"
    port: int = 8765
    path: str = "/mlflow/webhook"
    max_body_bytes: int = 64 * 1024
    tolerance_seconds: float = 300.0
    max_remembered_deliveries: int = 100_000
    ignored_aliases: frozenset[str] = field(default_factory=lambda: frozenset({"fair-approved"}))
    events: frozenset[str] = AUDITED_EVENTS

    def __post_init__(self) -> None:
        self.secrets = tuple(s for s in self.secrets if s)
        if not self.secrets:
            raise ValueError(
                f"a webhook secret is required (set ${SECRET_ENV} or pass --secret-block); an "
                "unsigned receiver would start audits for anyone who can reach it"
            )
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        if self.tolerance_seconds <= 0:
            raise ValueError(f"tolerance_seconds must be > 0, got {self.tolerance_seconds}")
        unknown = set(self.events) - AUDITED_EVENTS
        if unknown:
            raise ValueError(f"events {sorted(unknown)} are not one of {sorted(AUDITED_EVENTS)}")
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
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def handle(self, headers: Mapping[str, str], body: bytes) -> Outcome:
        try:
            outcome = self._handle(headers, body)
        except WebhookRejected as exc:
            self.count(f"rejected_{exc.status}")
            logger.warning("Rejected webhook delivery: %s", exc.reason)
            return Outcome(exc.status, {"status": "rejected", "reason": exc.reason})
        self.count(outcome.body["status"])
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
            ref = self.dispatch(event)
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
            "Accepted %s for %s v%s (delivery %s) -> %s",
            event.event_name,
            event.model_name,
            event.model_version,
            delivery_id,
            ref,
        )
        return Outcome(
            202,
            {
                "status": "accepted",
                "event": event.event_name,
                "model_name": event.model_name,
                "model_version": event.model_version,
                "ref": ref,
            },
        )


class _Handler(BaseHTTPRequestHandler):
    server: WebhookServer
    server_version = "fairengine-webhook"
    sys_version = ""
    timeout = 15  # seconds per socket read: a slow client cannot hold a thread for long
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        core = self.server.core
        if self.path.split("?", 1)[0] != core.config.path:
            self._drain_and_reply(Outcome(404, {"status": "rejected", "reason": "not found"}))
            return
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            core.count("rejected_411")
            self._reply(Outcome(411, {"status": "rejected", "reason": "Content-Length required"}))
            return
        try:
            length = int(self.headers.get("Content-Length") or "")
        except ValueError:
            core.count("rejected_411")
            self._reply(Outcome(411, {"status": "rejected", "reason": "Content-Length required"}))
            return
        if length < 0 or length > core.config.max_body_bytes:
            core.count("rejected_413")
            self._reply(
                Outcome(
                    413,
                    {
                        "status": "rejected",
                        "reason": f"body larger than {core.config.max_body_bytes} bytes",
                    },
                )
            )
            return
        body = self.rfile.read(length)
        if len(body) != length:
            core.count("rejected_400")
            self._reply(Outcome(400, {"status": "rejected", "reason": "truncated body"}))
            return
        self._reply(core.handle(self.headers, body))

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/healthz":
            with self.server.core._lock:
                counts = dict(self.server.core.counts)
            self._reply(Outcome(200, {"status": "ok", "counts": counts}))
        else:
            self._reply(Outcome(404, {"status": "rejected", "reason": "not found"}))

    def _drain_and_reply(self, outcome: Outcome) -> None:
        self.close_connection = True
        self._reply(outcome)

    def _reply(self, outcome: Outcome) -> None:
        data = json.dumps(outcome.body).encode()
        if outcome.status >= 400:
            self.close_connection = True  # never keep a connection after a refusal
        self.send_response(outcome.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


class WebhookServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` bound to ``config.host:config.port`` (port 0: any free port)."""

    daemon_threads = True

    def __init__(self, core: WebhookHandlerCore) -> None:
        self.core = core
        super().__init__((core.config.host, core.config.port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}{self.core.config.path}"


def make_server(config: ReceiverConfig, dispatch: Dispatcher | None = None) -> WebhookServer:
    """A ready-to-serve receiver; ``dispatch`` defaults to posting Prefect events."""
    if dispatch is None:
        from deployments.registry_events import PrefectEventDispatcher

        dispatch = PrefectEventDispatcher()
    return WebhookServer(WebhookHandlerCore(config, dispatch))


def read_secrets(env_var: str = SECRET_ENV, block: str | None = None) -> list[str]:
    """Secrets from ``$env_var`` (comma-separated for a rotation) and/or a Prefect Secret block."""
    secrets = [s.strip() for s in os.environ.get(env_var, "").split(",") if s.strip()]
    if block:
        from prefect.blocks.system import Secret

        secrets.append(str(Secret.load(block).get()))
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
        **(
            {"ignored_aliases": frozenset(args.ignore_alias)}
            if args.ignore_alias is not None
            else {}
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
