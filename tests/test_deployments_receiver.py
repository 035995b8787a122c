"""The webhook receiver and the registry-event vocabulary, without any server.

The receiver runs on a real socket (``127.0.0.1``, a free port) with a recording dispatcher in
place of Prefect; signatures are built independently with MLflow's own signing function
(``mlflow.webhooks.delivery._generate_hmac_signature``) where MLflow is importable.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from deployments_support import clean_env, free_port, http, signed_headers, webhook_body

from deployments.registry_events import (
    EXAMPLE_PAYLOADS,
    MalformedEvent,
    RegistryEvent,
    audit_key,
    is_example_payload,
)
from deployments.registry_sensor import _watermark_after, poll_registry
from deployments.webhook_receiver import (
    DispatchedEvents,
    ReceiverConfig,
    SeenDeliveries,
    WebhookHandlerCore,
    WebhookRejected,
    make_server,
    sign,
    verify_delivery,
)

pytestmark = pytest.mark.flow  # the deployment tests run serially (they bind sockets)

SECRET = "s3cret-for-tests"
DATA_V7 = {
    "name": "credit-scorer",
    "version": "7",
    "source": "models:/m-123",
    "run_id": "r1",
    "tags": {},
    "description": None,
}


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.events: list[RegistryEvent] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, event: RegistryEvent) -> str:
        if self.fail:
            raise ConnectionError("prefect down")
        with self.lock:
            self.events.append(event)
        return f"ref-{len(self.events)}"


@pytest.fixture()
def receiver():
    rec = Recorder()
    server = make_server(ReceiverConfig(secrets=[SECRET], port=0, max_body_bytes=4096), rec)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, rec
    server.shutdown()
    server.server_close()


# ------------------------------------------------------------------ signature
def test_signature_matches_mlflows_own_signing() -> None:
    pytest.importorskip("mlflow", reason="cross-check against MLflow's signing function")
    from mlflow.webhooks.delivery import _generate_hmac_signature

    body = '{"entity": "model_version", "data": {"name": "ü"}}'
    assert sign(SECRET, "d-1", "1700000000", body.encode()) == _generate_hmac_signature(
        SECRET, "d-1", "1700000000", body
    )


def test_signature_by_hand() -> None:
    body = b'{"a": 1}'
    digest = hmac.new(b"k", b"id.123." + body, hashlib.sha256).digest()
    assert sign("k", "id", "123", body) == "v1," + base64.b64encode(digest).decode()


def test_verify_accepts_valid_and_rotated_secrets() -> None:
    body = b'{"x": 1}'
    now = 1_700_000_000
    h = signed_headers(SECRET, body, delivery_id="d1", timestamp=now)
    assert verify_delivery(h, body, [SECRET], now=now, tolerance_seconds=300) == ("d1", now)
    # the receiver knows the new and old secret during a rotation
    assert verify_delivery(h, body, ["new", SECRET], now=now + 10, tolerance_seconds=300)[0] == "d1"
    # the sender may send several signatures (space separated)
    h2 = dict(h)
    h2["X-MLflow-Signature"] = "v1,AAAA " + h["X-MLflow-Signature"]
    assert verify_delivery(h2, body, [SECRET], now=now, tolerance_seconds=300)[0] == "d1"


@pytest.mark.parametrize(
    ("mutate", "status"),
    [
        (lambda h, b: ({k: v for k, v in h.items() if k != "X-MLflow-Signature"}, b), 401),
        (lambda h, b: ({k: v for k, v in h.items() if k != "X-MLflow-Timestamp"}, b), 401),
        (lambda h, b: ({k: v for k, v in h.items() if k != "X-MLflow-Delivery-Id"}, b), 401),
        (lambda h, b: ({**h, "X-MLflow-Signature": "v0,abc"}, b), 401),
        (lambda h, b: ({**h, "X-MLflow-Timestamp": "12a"}, b), 401),
        (lambda h, b: (h, b + b" "), 403),  # body changed after signing
        (lambda h, b: ({**h, "X-MLflow-Delivery-Id": "other"}, b), 403),  # id swapped
        (lambda h, b: ({**h, "X-MLflow-Signature": sign("wrong", "d1", "1700000000", b)}, b), 403),
    ],
)
def test_verify_rejects_unsigned_and_forged(mutate, status) -> None:
    body = b'{"x": 1}'
    h, b = mutate(signed_headers(SECRET, body, delivery_id="d1", timestamp=1_700_000_000), body)
    with pytest.raises(WebhookRejected) as err:
        verify_delivery(h, b, [SECRET], now=1_700_000_000, tolerance_seconds=300)
    assert err.value.status == status


@pytest.mark.parametrize("skew", [-301, 301, -10_000])
def test_verify_rejects_stale_and_future_timestamps(skew: int) -> None:
    body = b"{}"
    now = 1_700_000_000
    h = signed_headers(SECRET, body, delivery_id="d1", timestamp=now + skew)
    with pytest.raises(WebhookRejected) as err:
        verify_delivery(h, body, [SECRET], now=now, tolerance_seconds=300)
    assert err.value.status == 401 and "window" in err.value.reason
    # just inside the window is fine
    h = signed_headers(SECRET, body, delivery_id="d1", timestamp=now + (300 if skew > 0 else -300))
    assert verify_delivery(h, body, [SECRET], now=now, tolerance_seconds=300)


def test_config_requires_a_secret() -> None:
    with pytest.raises(ValueError, match="secret is required"):
        ReceiverConfig(secrets=["", ""])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_pending": 0}, "max_pending must be an integer >= 1"),
        ({"dispatch_workers": 0}, "dispatch_workers must be an integer >= 1"),
        ({"retry_after_seconds": 1.5}, "retry_after_seconds must be an integer"),
        ({"backlog": -1}, "backlog must be"),
        ({"dispatch_workers": 32, "max_pending": 8}, r"max_pending \(8\) must be >= dispatch_"),
        ({"body_timeout_seconds": 0}, "body_timeout_seconds must be > 0"),
    ],
)
def test_config_rejects_bad_load_limits(kwargs, match) -> None:
    from fairengine.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        ReceiverConfig(secrets=[SECRET], **kwargs)


# ------------------------------------------------------------------ replay memory
def test_seen_deliveries_reserve_release_and_expiry() -> None:
    seen = SeenDeliveries(ttl=300, capacity=3)
    assert seen.reserve("a", 0) and not seen.reserve("a", 1)
    seen.release("a")
    assert seen.reserve("a", 2)
    assert seen.reserve("b", 3) and seen.reserve("c", 4) and seen.reserve("d", 5)
    assert len(seen) == 3 and "a" not in seen  # capacity evicts the oldest
    assert seen.reserve("e", 5 + 601) and len(seen) == 1  # older than 2 * ttl: forgotten


def test_core_replay_and_dispatch_failure_retry() -> None:
    clock = [1_700_000_000.0]
    rec = Recorder(fail=True)
    core = WebhookHandlerCore(ReceiverConfig(secrets=[SECRET]), rec, clock=lambda: clock[0])
    body = webhook_body("model_version.created", DATA_V7)
    h = signed_headers(SECRET, body, delivery_id="d1", timestamp=int(clock[0]))
    # Prefect unreachable: 503, and the id is not burnt so MLflow's retry can succeed
    assert core.handle(h, body).status == 503
    rec.fail = False
    assert core.handle(h, body).status == 202
    assert core.handle(h, body).status == 409  # the same delivery again: replay
    assert len(rec.events) == 1
    assert core.counts == {"rejected_503": 1, "accepted": 1, "rejected_409": 1}


def test_concurrent_duplicates_dispatch_once() -> None:
    gate = threading.Event()

    class Slow(Recorder):
        def __call__(self, event):
            gate.wait(5)
            return super().__call__(event)

    rec = Slow()
    core = WebhookHandlerCore(ReceiverConfig(secrets=[SECRET]), rec)
    body = webhook_body("model_version.created", DATA_V7)
    h = signed_headers(SECRET, body)
    out: list[int] = []
    threads = [
        threading.Thread(target=lambda: out.append(core.handle(h, body).status)) for _ in range(8)
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join()
    assert sorted(out) == [202] + [409] * 7 and len(rec.events) == 1


# ------------------------------------------------------------------ one dispatch per event
def test_dispatched_events_single_flight_under_concurrency() -> None:
    """Concurrent callers of one key: one dispatch, everyone gets its reference."""
    events = DispatchedEvents(ttl=300, capacity=10)
    gate = threading.Event()
    calls: list[str] = []

    def dispatch() -> str:
        calls.append("x")
        gate.wait(5)
        return "ref-1"

    out: list[tuple[str, bool]] = []
    threads = [
        threading.Thread(target=lambda: out.append(events.dispatch_once("k", 0.0, dispatch)))
        for _ in range(12)
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)  # all twelve are in: one dispatching, eleven waiting on it
    gate.set()
    for t in threads:
        t.join(5)
    assert calls == ["x"]
    assert sorted(out) == [("ref-1", False)] + [("ref-1", True)] * 11
    # later within the window: remembered; after it: dispatched again
    assert events.dispatch_once("k", 299.0, lambda: "ref-2") == ("ref-1", True)
    assert events.dispatch_once("k", 301.0, lambda: "ref-2") == ("ref-2", False)


def test_dispatched_events_failure_reaches_waiters_and_is_not_remembered() -> None:
    events = DispatchedEvents(ttl=300, capacity=2)
    gate = threading.Event()

    def failing() -> str:
        gate.wait(5)
        raise ConnectionError("prefect down")

    errors: list[BaseException] = []

    def call() -> None:
        try:
            events.dispatch_once("k", 0.0, failing)
        except ConnectionError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(5)
    assert len(errors) == 4 and "k" not in events
    assert events.dispatch_once("k", 1.0, lambda: "ok") == ("ok", False)  # the retry dispatches
    # capacity: the oldest key is forgotten
    events.dispatch_once("a", 2.0, lambda: "a")
    events.dispatch_once("b", 3.0, lambda: "b")
    assert "k" not in events and "a" in events and "b" in events


def test_core_same_event_under_a_new_delivery_id_is_dispatched_once() -> None:
    rec = Recorder()
    core = WebhookHandlerCore(ReceiverConfig(secrets=[SECRET]), rec)
    body = webhook_body("model_version.created", DATA_V7)
    first = core.handle(signed_headers(SECRET, body), body)
    again = core.handle(signed_headers(SECRET, body), body)  # MLflow re-sent it, new id
    assert (first.status, again.status) == (202, 202)
    assert first.body["ref"] == again.body["ref"] == "ref-1"
    assert (first.body["deduplicated"], again.body["deduplicated"]) == (False, True)
    assert len(rec.events) == 1 and core.counts == {"accepted": 1, "deduplicated": 1}
    # another event of the same version is its own audit
    alias = webhook_body(
        "model_version_alias.created",
        {"name": "credit-scorer", "alias": "champion", "version": "7"},
    )
    assert core.handle(signed_headers(SECRET, alias), alias).body["deduplicated"] is False
    assert len(rec.events) == 2


# ------------------------------------------------------------------ over HTTP
def test_http_valid_delivery_becomes_one_event(receiver) -> None:
    server, rec = receiver
    body = webhook_body("model_version.created", DATA_V7)
    h = signed_headers(SECRET, body)
    status, reply = http("POST", server.url, data=body, headers=h)
    assert status == 202 and reply["status"] == "accepted"
    assert (reply["model_name"], reply["model_version"]) == ("credit-scorer", "7")
    (ev,) = rec.events
    assert ev.event_name == "mlflow.model_version.created" and ev.source == "webhook"
    assert ev.delivery_id == h["X-MLflow-Delivery-Id"]
    assert http("POST", server.url, data=body, headers=h)[0] == 409
    assert len(rec.events) == 1


def test_http_rejections(receiver) -> None:
    server, rec = receiver
    body = webhook_body("model_version.created", DATA_V7)
    # unsigned
    assert http("POST", server.url, data=body, headers={})[0] == 401
    # forged (wrong secret)
    assert http("POST", server.url, data=body, headers=signed_headers("guess", body))[0] == 403
    # stale: signed correctly ten minutes ago
    old = signed_headers(SECRET, body, timestamp=int(time.time()) - 600)
    assert http("POST", server.url, data=body, headers=old)[0] == 401
    # oversized: refused on Content-Length, before reading or verifying
    big = b"{" + b" " * 5000 + b"}"
    assert http("POST", server.url, data=big, headers=signed_headers(SECRET, big))[0] == 413
    # wrong path, wrong method
    assert http("POST", server.url + "x", data=body, headers=signed_headers(SECRET, body))[0] == 404
    assert http("GET", server.url)[0] == 404
    # signed but not JSON / not an object / missing fields: 400
    for bad in (b"not json", b"[1]", webhook_body("model_version.created", {"name": "m"})):
        assert http("POST", server.url, data=bad, headers=signed_headers(SECRET, bad))[0] == 400
    assert rec.events == []
    status, health = http("GET", server.url.rsplit("/", 2)[0] + "/healthz")
    assert status == 200
    assert health["counts"] == {
        "rejected_401": 2,
        "rejected_403": 1,
        "rejected_413": 1,
        "rejected_400": 3,
    }


def test_http_prefect_down_is_503_with_retry_after(receiver) -> None:
    server, rec = receiver
    rec.fail = True
    body = webhook_body("model_version.created", DATA_V7)
    h = signed_headers(SECRET, body)
    r = httpx.post(server.url, content=body, headers=h, timeout=10)
    assert r.status_code == 503 and r.headers["retry-after"] == "2"
    assert r.headers["connection"] == "close"
    rec.fail = False
    r = httpx.post(server.url, content=body, headers=h, timeout=10)  # MLflow's retry, same id
    assert r.status_code == 202 and "retry-after" not in r.headers
    assert r.headers["content-type"] == "application/json" and "server" not in r.headers
    # a trailing slash is not the webhook path
    assert httpx.post(server.url + "/", content=body, headers=h, timeout=10).status_code == 404
    health = httpx.get(server.url.rsplit("/", 2)[0] + "/healthz", timeout=10).json()
    assert health == {"status": "ok", "counts": {"rejected_503": 1, "accepted": 1}, "pending": 0}


def test_http_body_must_arrive_in_time() -> None:
    """A client that announces a body and never sends it gets 408, not a thread held forever."""
    config = ReceiverConfig(secrets=[SECRET], port=0, body_timeout_seconds=0.5)
    server = make_server(config, Recorder())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(
                f"POST {config.path} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n".encode()
            )
            started = time.monotonic()
            reply = sock.recv(4096).decode()
        assert reply.startswith("HTTP/1.1 408") and time.monotonic() - started < 5
        assert server.core.counts == {"rejected_408": 1}
    finally:
        server.shutdown(timeout=10)
        server.server_close()
    thread.join(10)
    assert not thread.is_alive()


def test_shutdown_answers_the_delivery_in_flight_then_stops() -> None:
    gate = threading.Event()

    class Gated(Recorder):
        def __call__(self, event):
            gate.wait(10)
            return super().__call__(event)

    rec = Gated()
    server = make_server(ReceiverConfig(secrets=[SECRET], port=0), rec)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    body = webhook_body("model_version.created", DATA_V7)
    answers: list[int] = []
    client = threading.Thread(
        target=lambda: answers.append(
            httpx.post(server.url, content=body, headers=signed_headers(SECRET, body)).status_code
        )
    )
    client.start()
    deadline = time.monotonic() + 10
    while httpx.get(server.url.rsplit("/", 2)[0] + "/healthz").json()["pending"] != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    stopper = threading.Thread(target=server.shutdown)
    stopper.start()
    time.sleep(0.5)
    assert stopper.is_alive()  # shutdown waits for the delivery in flight
    gate.set()
    stopper.join(10)
    client.join(10)
    thread.join(10)
    assert answers == [202] and len(rec.events) == 1 and not thread.is_alive()
    server.server_close()
    with pytest.raises(httpx.ConnectError):
        httpx.post(server.url, content=body, headers=signed_headers(SECRET, body), timeout=5)


def test_cli_receiver_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    """``python -m deployments.webhook_receiver``: READY line, /healthz, prompt SIGTERM exit."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "deployments.webhook_receiver", "--port", str(port)],
        env=clean_env(FAIRENGINE_WEBHOOK_SECRET=SECRET, PREFECT_HOME=str(tmp_path / "prefect")),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        lines: list[str] = []
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("READY "):
                break
        assert lines and lines[-1].split() == ["READY", f"http://127.0.0.1:{port}/mlflow/webhook"]
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()
        assert health == {"status": "ok", "counts": {}, "pending": 0}
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode in (-signal.SIGTERM, 0), "".join(lines)


def test_http_drops_test_webhook_example_and_other_events(receiver) -> None:
    server, rec = receiver
    for kind, data in EXAMPLE_PAYLOADS.items():
        body = webhook_body(kind, data)
        status, reply = http("POST", server.url, data=body, headers=signed_headers(SECRET, body))
        assert status == 200 and reply["status"] == "ignored" and "test_webhook" in reply["reason"]
    body = webhook_body("model_version_tag.set", {"name": "m", "version": "1", "key": "k"})
    status, reply = http("POST", server.url, data=body, headers=signed_headers(SECRET, body))
    assert status == 200 and reply["status"] == "ignored"
    # the alias an audit itself sets on a pass does not start another audit
    body = webhook_body(
        "model_version_alias.created", {"name": "m", "alias": "fair-approved", "version": "2"}
    )
    status, reply = http("POST", server.url, data=body, headers=signed_headers(SECRET, body))
    assert status == 200 and reply["status"] == "ignored"
    assert rec.events == []
    # a real alias event passes
    body = webhook_body(
        "model_version_alias.created", {"name": "m", "alias": "champion", "version": "2"}
    )
    assert http("POST", server.url, data=body, headers=signed_headers(SECRET, body))[0] == 202
    (ev,) = rec.events
    assert (ev.kind, ev.alias, ev.model_version) == ("model_version_alias.created", "champion", "2")


def test_example_payloads_are_mlflows() -> None:
    pytest.importorskip("mlflow", reason="cross-check against MLflow's example payloads")
    from mlflow.webhooks.types import ModelVersionAliasCreatedPayload, ModelVersionCreatedPayload

    assert EXAMPLE_PAYLOADS["model_version.created"] == ModelVersionCreatedPayload.example()
    assert EXAMPLE_PAYLOADS["model_version_alias.created"] == (
        ModelVersionAliasCreatedPayload.example()
    )
    # a real version of a model that happens to be called example_model is not dropped
    real = {**ModelVersionCreatedPayload.example(), "source": "models:/m-9f", "run_id": "x"}
    assert not is_example_payload({"entity": "model_version", "action": "created", "data": real})


# ------------------------------------------------------------------ events and keys
def test_event_ids_are_deterministic_per_model_version_event() -> None:
    a = RegistryEvent("model_version.created", "m", "3", source="webhook", delivery_id="x")
    b = RegistryEvent("model_version.created", "m", "3", source="sensor", delivery_id="y")
    c = RegistryEvent("model_version.created", "m", "4")
    d = RegistryEvent("model_version_alias.created", "m", "3", alias="champion")
    assert a.event_id == b.event_id and a.key == b.key
    assert len({a.event_id, c.event_id, d.event_id}) == 3
    assert a.key == audit_key("m", "3", "mlflow.model_version.created")
    assert isinstance(a.event_id, uuid.UUID) and a.event_id.version == 5
    res = d.resource()
    assert res["prefect.resource.id"] == "mlflow.registered_model.m"
    assert (res["mlflow.model_version"], res["mlflow.alias"]) == ("3", "champion")
    assert d.flow_parameters() == {
        "model_name": "m",
        "model_version": "3",
        "alias": "champion",
        "reason": "mlflow.model_version_alias.created",
        "source": "webhook",
    }


@pytest.mark.parametrize(
    "body",
    [
        {"entity": "model_version", "action": "created", "data": {"name": "m", "version": "x"}},
        {"entity": "model_version", "action": "created", "data": {"version": "1"}},
        {"entity": "model_version_alias", "action": "created", "data": {"name": "m", "version": 1}},
        {"entity": "model_version", "action": "created"},
    ],
)
def test_malformed_events(body) -> None:
    with pytest.raises(MalformedEvent):
        RegistryEvent.from_webhook(body)


def test_prefect_event_shape_matches_the_trigger() -> None:
    pytest.importorskip("prefect", reason="builds a prefect.events.Event")
    from deployments.registry_events import prefect_event
    from deployments.serve import registry_trigger

    ev = RegistryEvent.from_webhook(json.loads(webhook_body("model_version.created", DATA_V7)))
    pe = prefect_event(ev)
    trigger = registry_trigger()
    assert pe.id == ev.event_id and pe.event in trigger.expect
    assert trigger.match.matches(pe.resource)
    assert registry_trigger(["credit-scorer", "x"]).match.matches(pe.resource)
    assert not registry_trigger(["other-model"]).match.matches(pe.resource)
    # every templated parameter reads a label the event carries
    for template in trigger.parameters.values():
        if "resource[" in template:
            assert template.split("'")[1] in pe.resource


# ------------------------------------------------------------------ sensor logic
class FakeRegistry:
    """Just what the sensor calls on an MlflowClient."""

    def __init__(self) -> None:
        self.versions: dict[str, list[int]] = {}
        self.aliases: dict[str, dict[str, str]] = {}

    def search_registered_models(self, max_results, page_token=None):
        return _Page([type("M", (), {"name": n}) for n in self.versions], None)

    def search_model_versions(self, filter_string, order_by, max_results, page_token=None):
        name = filter_string.split("'")[1]
        after = int(filter_string.rsplit(">", 1)[1])
        found = [v for v in sorted(self.versions.get(name, [])) if v > after]
        return _Page([type("V", (), {"version": str(v)}) for v in found], None)

    def get_registered_model(self, name):
        if name not in self.versions:
            raise LookupError(name)
        return type("R", (), {"aliases": self.aliases.get(name, {})})


class _Page(list):
    def __init__(self, items, token) -> None:
        super().__init__(items)
        self.token = token


def test_sensor_polls_new_versions_and_alias_moves() -> None:
    reg = FakeRegistry()
    reg.versions = {"a": [1, 2]}
    reg.aliases = {"a": {"champion": "1"}}
    events, state = poll_registry(reg, None, None)  # first poll: record, emit nothing
    assert events == [] and state == {"versions": {"a": 2}, "aliases": {"a": {"champion": "1"}}}
    events, state = poll_registry(reg, state, None)
    assert events == []
    reg.versions = {"a": [1, 2, 3], "b": [1]}
    reg.aliases = {"a": {"champion": "3", "fair-approved": "3"}}
    events, state = poll_registry(reg, state, None)
    got = [(e.kind, e.model_name, e.model_version, e.alias, e.source) for e in events]
    assert got == [
        ("model_version.created", "a", "3", "", "sensor"),
        ("model_version_alias.created", "a", "3", "champion", "sensor"),
        ("model_version.created", "b", "1", "", "sensor"),  # a new model: all its versions
    ]
    assert state["versions"] == {"a": 3, "b": 1}
    # backfill reports what exists on the first poll
    events, _ = poll_registry(reg, None, ["b"], backfill=True)
    assert [(e.model_name, e.model_version) for e in events] == [("b", "1")]
    # a model that does not exist yet starts at 0
    events, state = poll_registry(reg, None, ["later"])
    assert events == [] and state["versions"] == {"later": 0}
    reg.versions["later"] = [1]
    events, _ = poll_registry(reg, state, ["later"])
    assert [(e.model_name, e.model_version) for e in events] == [("later", "1")]


def test_sensor_watermark_stops_at_a_failed_dispatch() -> None:
    state = {"versions": {"a": 1, "b": 1}, "aliases": {}}
    events = [
        RegistryEvent("model_version.created", "a", "2", source="sensor"),
        RegistryEvent("model_version.created", "b", "2", source="sensor"),
        RegistryEvent("model_version.created", "b", "3", source="sensor"),
    ]
    full = {"versions": {"a": 2, "b": 3}, "aliases": {"a": {}, "b": {}}}
    # b v2 was not handed over: a advances, b stays at 1 and is polled again next time
    assert _watermark_after(state, events, 1, full)["versions"] == {"a": 2, "b": 1}
    assert _watermark_after(state, events, 3, full) == full


# ------------------------------------------------------------------ base config
def test_config_for_version(tmp_path: Path) -> None:
    from deployments.registry_audit import config_for_version, load_base_config
    from fairengine.errors import ConfigError

    p = tmp_path / "audit.yaml"
    p.write_text("data: {path: d.csv}\ncolumns: {label: y, protected: [g], score: s}\n")
    base, base_dir = load_base_config(str(p))
    assert base_dir == str(tmp_path.resolve())
    cfg = config_for_version(base, "models:/m/3")
    assert cfg["model"] == {"uri": "models:/m/3"} and "score" not in cfg["columns"]
    assert base["columns"]["score"] == "s"  # the base is not modified
    with pytest.raises(ConfigError, match="does not exist"):
        load_base_config(str(tmp_path / "nope.yaml"))


def test_serve_builds_the_audit_and_sensor_deployments(tmp_path: Path) -> None:
    pytest.importorskip("prefect", reason="builds Prefect runner deployments")
    from deployments.registry_events import AUDIT_DEPLOYMENT_NAME, TRIGGER_PARAMETERS
    from deployments.serve import build_deployments

    cfg = tmp_path / "audit.yaml"
    cfg.write_text("{}")
    audit, sensor = build_deployments(
        str(cfg),
        model_name="credit-scorer",
        cron="0 3 * * 1",
        sensor_interval=60,
        sensor_models=["credit-scorer"],
    )
    assert audit.name == AUDIT_DEPLOYMENT_NAME
    assert audit.entrypoint == "deployments.registry_audit.registry_audit_flow"
    assert audit.parameters == {"base_config": str(cfg.resolve())}
    (schedule,) = audit.schedules
    assert schedule.schedule.cron == "0 3 * * 1" and schedule.schedule.timezone == "UTC"
    assert schedule.parameters == {
        "model_name": "credit-scorer",
        "alias": "champion",
        "reason": "schedule",
        "source": "schedule",
    }
    (trigger,) = audit.triggers
    assert trigger.parameters == TRIGGER_PARAMETERS
    assert sensor.entrypoint == "deployments.registry_sensor.registry_sensor_flow"
    assert sensor.parameters == {"model_names": ["credit-scorer"]}
    assert sensor.schedules[0].schedule.interval.total_seconds() == 60
    # no cron: triggers only; a cron without a model is refused
    (only,) = build_deployments(str(cfg))
    assert not only.schedules and len(only.triggers) == 1
    with pytest.raises(ValueError, match="--model-name"):
        build_deployments(str(cfg), cron="* * * * *")
