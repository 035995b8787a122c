"""The webhook receiver under a burst: 500 concurrent deliveries on 127.0.0.1.

The real receiver (uvicorn, a free port) runs in a thread of this process with a recording
dispatcher in place of Prefect; the deliveries are signed like MLflow's and sent at once with
``httpx`` over 500 separate connections (no keep-alive). Every request must get an HTTP answer
(no reset, no timeout), 202 or a 503/429 that carries ``Retry-After``; a refused delivery is
re-sent unchanged (MLflow retries with the same delivery id) after ``Retry-After`` until it is
accepted, and the dispatcher must have seen each (model version, event) exactly once.
"""

from __future__ import annotations

import asyncio
import json
import resource
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from deployments_support import signed_headers, webhook_body

from deployments.registry_events import RegistryEvent
from deployments.webhook_receiver import ReceiverConfig, WebhookServer, make_server

pytestmark = [pytest.mark.flow, pytest.mark.timeout(120)]

SECRET = "load-test-secret"
N = 500
BUDGET_S = 60.0  # wall-clock bound of each burst test, retries included
RETRY_CODES = {429, 503}


class CountingDispatcher:
    """Counts dispatches per (model version, event); ``delay`` stands in for Prefect's latency."""

    def __init__(self, delay: float = 0.0, gate: threading.Event | None = None) -> None:
        self.delay = delay
        self.gate = gate
        self.calls: Counter[tuple[str, str, str]] = Counter()
        self.lock = threading.Lock()

    def __call__(self, event: RegistryEvent) -> str:
        if self.gate is not None:
            self.gate.wait(30)
        if self.delay:
            time.sleep(self.delay)
        with self.lock:
            self.calls[(event.model_version, event.kind, event.alias)] += 1
        return str(event.event_id)


@dataclass(frozen=True)
class Delivery:
    key: tuple[str, str, str]
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no HTTP answer at all
    retry_after: str | None
    body: dict | None
    error: str = ""


def delivery(version: int, kind: str, delivery_id: str | None = None) -> Delivery:
    if kind == "model_version.created":
        data = {"name": "m", "version": str(version), "source": "s", "run_id": "r", "tags": {}}
        alias = ""
    else:
        alias = "champion"
        data = {"name": "m", "alias": alias, "version": str(version)}
    body = webhook_body(kind, data)
    headers = signed_headers(SECRET, body, delivery_id=delivery_id or str(uuid.uuid4()))
    return Delivery((str(version), kind, alias), body, headers)


def distinct_deliveries(n: int) -> list[Delivery]:
    """``n`` distinct (model version, event) pairs, each under its own delivery id."""
    kinds = ("model_version.created", "model_version_alias.created")
    return [delivery(i // 2 + 1, kinds[i % 2]) for i in range(n)]


async def _burst(url: str, batch: list[Delivery]) -> list[Answer]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    timeout = httpx.Timeout(30.0)

    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:

        async def one(d: Delivery) -> Answer:
            try:
                r = await client.post(url, content=d.body, headers=d.headers)
            except httpx.HTTPError as exc:  # reset, refused, timeout: no HTTP answer
                return Answer(None, None, None, f"{type(exc).__name__}: {exc}")
            try:
                body = r.json()
            except json.JSONDecodeError:
                body = None
            return Answer(r.status_code, r.headers.get("retry-after"), body)

        return await asyncio.gather(*(one(d) for d in batch))


def burst(url: str, batch: list[Delivery], budget: float) -> list[Answer]:
    """Send ``batch`` concurrently (one connection each); fail the test past ``budget`` s."""
    return asyncio.run(asyncio.wait_for(_burst(url, batch), budget))


def check_answers(answers: list[Answer], allowed: set[int]) -> None:
    errors = [a.error for a in answers if a.status is None]
    assert not errors, f"{len(errors)} requests got no HTTP answer, e.g. {errors[:3]}"
    codes = Counter(a.status for a in answers)
    assert set(codes) <= allowed, f"unexpected status codes {dict(codes)}"
    for a in answers:
        if a.status in RETRY_CODES:
            assert a.retry_after is not None and a.retry_after.isdigit(), a
            assert int(a.retry_after) >= 1


def deliver_until_answered(
    url: str,
    batch: list[Delivery],
    allowed: set[int],
    deadline: float,
    first: list[Answer] | None = None,
) -> tuple[dict[int, Answer], list[Counter[int | None]]]:
    """Send ``batch``; re-send what got 429/503 after its ``Retry-After`` until none is left.

    ``first``: the answers of a first round already sent. Returns the final answer of each
    delivery (by index) and the status counts of every round.
    """
    final: dict[int, Answer] = {}
    todo = list(range(len(batch)))
    rounds: list[Counter[int | None]] = []
    while todo:
        left = deadline - time.monotonic()
        assert left > 0, f"not all accepted in time; rounds: {rounds}"
        if first is not None:
            answers, first = first, None
        else:
            answers = burst(url, [batch[i] for i in todo], left)
        rounds.append(Counter(a.status for a in answers))
        check_answers(answers, allowed)
        retry = [(i, a) for i, a in zip(todo, answers, strict=True) if a.status in RETRY_CODES]
        for i, a in zip(todo, answers, strict=True):
            final[i] = a
        todo = [i for i, _ in retry]
        if retry:
            time.sleep(max(int(a.retry_after or 1) for _, a in retry))
    return final, rounds


@pytest.fixture(autouse=True, scope="module")
def _enough_file_descriptors() -> Iterator[None]:
    """Client and server sockets of a 500-connection burst live in this one process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * N
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {want}")
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture()
def serve() -> Iterator:
    started: list[tuple[WebhookServer, threading.Thread]] = []

    def _serve(dispatcher: CountingDispatcher, **limits: int) -> WebhookServer:
        config = ReceiverConfig(secrets=[SECRET], port=0, retry_after_seconds=1, **limits)
        server = make_server(config, dispatcher)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        started.append((server, thread))
        return server

    yield _serve
    for server, thread in started:
        server.shutdown(timeout=15)
        server.server_close()
        thread.join(15)
        assert not thread.is_alive(), "the receiver did not stop"


# ------------------------------------------------------------------ distinct deliveries
@pytest.mark.parametrize(
    "limits",
    [
        {"dispatch_workers": 8, "max_pending": 64},  # small: the burst overflows, 503s follow
        {},  # the defaults (16 workers, 256 admitted)
    ],
    ids=["tight", "defaults"],
)
def test_500_concurrent_distinct_deliveries_are_each_dispatched_once(serve, limits) -> None:
    rec = CountingDispatcher(delay=0.005)
    server = serve(rec, **limits)
    batch = distinct_deliveries(N)
    assert len({d.key for d in batch}) == N
    started = time.monotonic()

    first = burst(server.url, batch, BUDGET_S)
    check_answers(first, {202, *RETRY_CODES})
    accepted = {d.key for d, a in zip(batch, first, strict=True) if a.status == 202}
    with rec.lock:
        after_first = Counter(rec.calls)
    # among the accepted ones, each (model version, event) was dispatched exactly once, and
    # nothing refused was dispatched
    assert set(after_first) == accepted and set(after_first.values()) == {1}

    final, rounds = deliver_until_answered(
        server.url, batch, {202, *RETRY_CODES}, started + BUDGET_S, first=first
    )
    assert all(a.status == 202 for a in final.values()), rounds
    assert all(a.body and not a.body["deduplicated"] for a in final.values())
    assert rec.calls == Counter({d.key: 1 for d in batch}), "each event exactly once"
    # the receiver's own counters agree
    health = httpx.get(server.url.rsplit("/", 2)[0] + "/healthz", timeout=10).json()
    refused = sum(c[s] for c in rounds for s in RETRY_CODES)
    assert health["counts"] == {"accepted": N, **({"busy": refused} if refused else {})}
    assert health["pending"] == 0
    print(f"\n{limits or 'defaults'}: status counts per round {[dict(c) for c in rounds]}")


# ------------------------------------------------------------------ duplicates
def test_500_copies_of_one_delivery_are_dispatched_once(serve) -> None:
    rec = CountingDispatcher(delay=0.05)
    server = serve(rec, dispatch_workers=8, max_pending=64)
    d = delivery(7, "model_version.created")
    started = time.monotonic()
    final, rounds = deliver_until_answered(
        server.url, [d] * N, {202, 409, *RETRY_CODES}, started + BUDGET_S
    )
    codes = Counter(a.status for a in final.values())
    assert codes == {202: 1, 409: N - 1}, rounds
    assert rec.calls == Counter({d.key: 1})


def test_500_deliveries_of_one_event_under_new_ids_are_dispatched_once(serve) -> None:
    """Distinct delivery ids, one (model version, event): the first dispatch is shared."""
    rec = CountingDispatcher(delay=0.2)  # long enough for many to arrive while it runs
    server = serve(rec, dispatch_workers=16, max_pending=128)
    batch = [delivery(3, "model_version_alias.created") for _ in range(N)]
    assert len({d.headers["X-MLflow-Delivery-Id"] for d in batch}) == N
    started = time.monotonic()
    final, rounds = deliver_until_answered(
        server.url, batch, {202, *RETRY_CODES}, started + BUDGET_S
    )
    assert all(a.status == 202 for a in final.values()), rounds
    refs = {a.body["ref"] for a in final.values()}
    assert len(refs) == 1
    assert sum(not a.body["deduplicated"] for a in final.values()) == 1
    assert rec.calls == Counter({batch[0].key: 1})


# ------------------------------------------------------------------ saturation, exactly
def test_saturated_receiver_answers_503_with_retry_after_and_stays_responsive(serve) -> None:
    """Dispatch blocked: exactly ``max_pending`` deliveries are admitted, the rest get 503 at
    once (not a hang or a reset), ``/healthz`` still answers (the event loop is free), and once
    dispatch resumes the admitted ones get 202 and the refused ones go through on re-sending."""
    gate = threading.Event()
    rec = CountingDispatcher(gate=gate)
    server = serve(rec, dispatch_workers=4, max_pending=8)
    batch = distinct_deliveries(20)
    results: list[list[Answer]] = []
    sender = threading.Thread(target=lambda: results.append(burst(server.url, batch, 45)))
    sender.start()
    health_url = server.url.rsplit("/", 2)[0] + "/healthz"
    deadline = time.monotonic() + 30
    health: dict = {}
    while time.monotonic() < deadline:
        health = httpx.get(health_url, timeout=5).json()
        if health["counts"].get("busy", 0) == 12:
            break
        time.sleep(0.05)
    assert health["pending"] == 8 and health["counts"] == {"busy": 12}, health
    assert rec.calls == Counter()  # the admitted ones are still waiting
    gate.set()
    sender.join(45)
    (answers,) = results
    check_answers(answers, {202, 503})
    assert Counter(a.status for a in answers) == {202: 8, 503: 12}
    assert all(a.retry_after == "1" for a in answers if a.status == 503)
    refused = [d for d, a in zip(batch, answers, strict=True) if a.status == 503]
    final, _ = deliver_until_answered(server.url, refused, {202, 503}, time.monotonic() + 30)
    assert all(a.status == 202 for a in final.values())
    assert rec.calls == Counter({d.key: 1 for d in batch})
