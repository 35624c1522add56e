"""Client quotas on a real node: set with bin/kafka-configs.sh, enforced on confluent-kafka
(librdkafka) producers and consumers, which see the throttling (throttle_cb); Kafka's describe
output and error messages; quotas kept across a restart (metadata log)."""

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from .clients import create_topic, wait_for
from .configs_tool import ConfigsTool
from .mirror_helpers import scrape
from .mirror_helpers import total as metric
from .node import Node

pytestmark = pytest.mark.serial  # measures time: bin/test.sh runs it alone

WINDOWS = 3  # quota.window.num: a rate is taken over at least 2 s, so tests stay short
RATE = 200_000  # bytes/s
VALUE = b"x" * 10_000


class QuotaNode(ConfigsTool):
    def __init__(self, workdir: Path) -> None:
        self.node = Node(workdir, quota__window__num=str(WINDOWS))


@pytest.fixture(scope="module")
def qn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuotaNode]:
    q = QuotaNode(tmp_path_factory.mktemp("quotas") / "n1")
    q.node.start()
    try:
        yield q
    finally:
        q.node.kill()


def _produce(bootstrap: str, topic: str, client_id: str, total: int) -> tuple[float, list[Any]]:
    """Produce ``total`` bytes of values as fast as librdkafka goes: (seconds, throttle
    events)."""
    throttles: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 64_000,
            "throttle_cb": throttles.append,
        }
    )
    start = time.monotonic()
    for _ in range(total // len(VALUE)):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - start
    p.poll(0.5)  # throttle events are served from poll
    return elapsed, throttles


def test_producer_byte_rate_bounds_a_producer(qn: QuotaNode) -> None:
    create_topic(qn.node.bootstrap, "q-prod", 1)
    out = qn.ok("--alter", "--add-config", f"producer_byte_rate={RATE}", "--client", "slow-p")
    assert out == "Completed updating config for client slow-p.\n"
    total = 1_500_000
    fast, fast_throttles = _produce(qn.node.bootstrap, "q-prod", "fast-p", total)
    slow, throttles = _produce(qn.node.bootstrap, "q-prod", "slow-p", total)
    # A rate is taken over at least (windows - 1) seconds: that much arrives at once, the
    # rest at the quota. Margins for a loaded machine: at least 60% of the ideal time.
    ideal = (total - (WINDOWS - 1) * RATE) / RATE
    print(f"produce {total} B: unthrottled {fast:.2f} s, at {RATE} B/s {slow:.2f} s")
    assert slow >= 0.6 * ideal, (slow, ideal)
    assert slow < ideal + 20
    assert fast < slow
    assert not fast_throttles
    assert throttles, "librdkafka reported no throttling"
    assert max(t.throttle_time for t in throttles) > 0
    m = scrape(qn.node)
    assert metric(m, "kafka_server_produce_byte_rate", user="", client_id="slow-p") > 0
    assert metric(m, "kafka_server_produce_throttle_time", client_id="slow-p") > 0
    assert metric(m, "kafka_server_produce_byte_rate", client_id="fast-p") == 0  # no quota
    assert metric(m, "kafka_server_quota_throttled_requests_total", quota_type="Produce") > 0


def test_old_produce_versions_get_a_delayed_response(qn: QuotaNode) -> None:
    """Before KIP-219 (Produce < v6) clients do not throttle themselves: the node holds the
    response back for the throttle time instead (kafka-python speaking Kafka 0.11's Produce v3)."""
    from kafka import KafkaProducer

    create_topic(qn.node.bootstrap, "q-old", 1)
    qn.ok("--alter", "--add-config", f"producer_byte_rate={RATE}", "--client", "old-p")
    p = KafkaProducer(
        bootstrap_servers=qn.node.bootstrap, client_id="old-p", api_version=(0, 11),
        linger_ms=5, batch_size=64_000, max_in_flight_requests_per_connection=5,
    )  # fmt: skip
    total = 1_500_000
    start = time.monotonic()
    try:
        futures = [p.send("q-old", VALUE) for _ in range(total // len(VALUE))]
        p.flush(timeout=60)
        for f in futures:
            f.get(timeout=5)
    finally:
        p.close(timeout=5)
    elapsed = time.monotonic() - start
    ideal = (total - (WINDOWS - 1) * RATE) / RATE
    print(f"produce v3 {total} B at {RATE} B/s: {elapsed:.2f} s")
    assert 0.6 * ideal <= elapsed < ideal + 20


def _consume(bootstrap: str, topic: str, client_id: str, count: int) -> tuple[float, list[Any]]:
    throttles: list[Any] = []
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"g-{client_id}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "throttle_cb": throttles.append,
        }
    )
    c.subscribe([topic])
    got = 0
    start = time.monotonic()
    deadline = start + 90
    try:
        while got < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += 1
        assert got == count, f"read {got} of {count}"
        return time.monotonic() - start, throttles
    finally:
        c.close()


def test_consumer_byte_rate_bounds_a_consumer(qn: QuotaNode) -> None:
    create_topic(qn.node.bootstrap, "q-cons", 1)
    total = 1_500_000
    _produce(qn.node.bootstrap, "q-cons", "filler", total)
    qn.ok("--alter", "--add-config", f"consumer_byte_rate={RATE}", "--client", "slow-c")
    n = total // len(VALUE)
    fast, fast_throttles = _consume(qn.node.bootstrap, "q-cons", "fast-c", n)
    slow, throttles = _consume(qn.node.bootstrap, "q-cons", "slow-c", n)
    ideal = (total - (WINDOWS - 1) * RATE) / RATE
    print(f"consume {total} B: unthrottled {fast:.2f} s, at {RATE} B/s {slow:.2f} s")
    assert slow >= 0.6 * ideal, (slow, ideal)
    assert slow < ideal + 20
    assert fast < slow
    assert not fast_throttles
    assert throttles, "librdkafka reported no throttling"
    m = scrape(qn.node)
    assert metric(m, "kafka_server_quota_throttle_seconds_total", quota_type="Fetch") > 1


def test_describe_format(qn: QuotaNode) -> None:
    qn.ok("--alter", "--entity-type", "users", "--entity-name", "alice",
          "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=20000000")  # fmt: skip
    qn.ok("--alter", "--entity-type", "users", "--entity-default",
          "--add-config", "request_percentage=12.5")  # fmt: skip
    qn.ok("--alter", "--user", "alice", "--client", "app", "--add-config", "producer_byte_rate=5")
    qn.ok("--alter", "--entity-type", "ips", "--entity-name", "10.1.2.3",
          "--add-config", "connection_creation_rate=10")  # fmt: skip
    out = qn.ok("--describe", "--entity-type", "users", "--entity-name", "alice")
    # Java's HashMap order and Double.toString, as Kafka's tool prints them
    assert out == (
        "Quota configs for user-principal 'alice' are "
        "consumer_byte_rate=2.0E7, producer_byte_rate=1048576.0\n"
    )
    out = qn.ok("--describe", "--entity-type", "users")
    assert "Quota configs for the default user-principal are request_percentage=12.5\n" in out
    assert "user-principal 'alice', client-id" not in out  # strict: users alone
    out = qn.ok("--describe", "--entity-type", "users", "--entity-default")
    assert out == "Quota configs for the default user-principal are request_percentage=12.5\n"
    out = qn.ok("--describe", "--user", "alice", "--client", "app")
    assert out == (
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=5.0\n"
    )
    out = qn.ok("--describe", "--entity-type", "users", "--entity-type", "clients")
    assert out == (
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=5.0\n"
    )
    out = qn.ok("--describe", "--entity-type", "clients", "--entity-type", "users",
                "--entity-name", "app", "--entity-name", "alice")  # fmt: skip
    assert "user-principal 'alice', client-id 'app'" in out
    out = qn.ok("--describe", "--entity-type", "ips")
    assert out == "Quota configs for ip '10.1.2.3' are connection_creation_rate=10.0\n"
    out = qn.ok("--alter", "--entity-type", "users", "--entity-default",
                "--delete-config", "request_percentage")  # fmt: skip
    assert out == "Completed updating default config for users in the cluster.\n"
    assert qn.ok("--describe", "--entity-type", "users", "--entity-default") == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--add-config", "producer_byte_rate=abc"),
         "Cannot parse quota configuration value for producer_byte_rate: abc"),
        (("--add-config", "producer_byte_rate=-5"),
         "Quota producer_byte_rate must be greater than 0"),
        (("--add-config", "producer_byte_rate=0"),
         "Quota producer_byte_rate must be greater than 0"),
        (("--add-config", "producer_byte_rate=1.5"),
         "producer_byte_rate cannot be a fractional value."),
        (("--add-config", "no_such_rate=5"),
         "Only quota configs can be added for 'clients' using --bootstrap-server. "
         "Unexpected config names: no_such_rate"),
        (("--add-config", "connection_creation_rate=5"),
         "Only quota configs can be added for 'clients'"),
        (("--delete-config", "consumer_byte_rate"), "Invalid config(s): consumer_byte_rate"),
    ],
)  # fmt: skip
def test_bad_input(qn: QuotaNode, args: tuple[str, ...], message: str) -> None:
    qn.fails("--alter", "--client", "bad-c", *args, message=message)
    assert qn.ok("--describe", "--client", "bad-c") == ""


def test_bad_ip_and_keys(qn: QuotaNode) -> None:
    qn.fails("--alter", "--ip", "1.2.3.4", "--add-config", "producer_byte_rate=5",
             message="Only connection quota configs can be added for 'ips'")  # fmt: skip
    qn.fails("--alter", "--ip", "no such host.invalid", "--add-config",
             "connection_creation_rate=5",
             message="no such host.invalid is not a valid IP or resolvable host.")  # fmt: skip
    qn.fails("--alter", "--ip", "1.2.3.4", "--add-config", "connection_creation_rate=2.5",
             message="connection_creation_rate cannot be a fractional value.")  # fmt: skip


def _served(port: int) -> bool:
    """Does a new connection get an answer (ApiVersions v0) rather than being closed?"""
    request = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            return len(s.recv(4)) == 4
    except OSError:
        return False


def test_ip_connection_creation_rate(qn: QuotaNode) -> None:
    """KIP-612: past its address's rate a new connection is held, then closed unserved."""
    qn.ok("--alter", "--ip", "127.0.0.1", "--add-config", "connection_creation_rate=5")
    try:
        time.sleep(WINDOWS + 0.5)  # a fresh rate: the tool's own connections have aged out
        start = time.monotonic()
        served = [_served(qn.node.port) for _ in range(40)]
        elapsed = time.monotonic() - start
        # (windows - 1) seconds' worth come at once, then about 5 a second: a refused
        # connection is closed only after its throttle time, which paces this client
        print(f"{served.count(True)} of 40 connections served in {elapsed:.1f} s at 5/s")
        assert served[:8] == [True] * 8
        assert served.count(True) <= 10 + 5 * elapsed * 1.3 + 2, (served, elapsed)
        assert served.count(False) >= 5, served
        m = scrape(qn.node)
        assert metric(m, "kafka_network_connections_rejected_total",
                      limit="connection_creation_rate") == served.count(False)  # fmt: skip
    finally:
        time.sleep(WINDOWS + 0.5)
        qn.ok("--alter", "--ip", "127.0.0.1", "--delete-config", "connection_creation_rate")


def _metadata_v4(sock: socket.socket, corr: int, client_id: bytes) -> int:
    """One Metadata v4 request (all topics) on ``sock``; the response's throttle_time_ms."""
    body = (
        struct.pack(">hhih", 3, 4, corr, len(client_id)) + client_id + struct.pack(">i?", -1, False)
    )
    sock.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    data = sock.recv(size, socket.MSG_WAITALL)
    got, throttle = struct.unpack_from(">ii", data)
    assert got == corr
    return int(throttle)


def test_request_percentage_throttles_requests(qn: QuotaNode) -> None:
    """Handling time over request_percentage: responses carry throttle_time_ms and the
    connection is muted that long."""
    qn.ok("--alter", "--client", "busy", "--add-config", "request_percentage=0.01")
    with socket.create_connection(("127.0.0.1", qn.node.port), timeout=30) as s:
        assert _metadata_v4(s, 1, b"free") == 0
        start = time.monotonic()
        throttles: list[int] = []
        while sum(1 for t in throttles if t) < 3 and len(throttles) < 5000:
            throttles.append(_metadata_v4(s, len(throttles) + 2, b"busy"))
        elapsed = time.monotonic() - start
    waited = sum(throttles) / 1000
    print(f"{len(throttles)} Metadata requests at request_percentage=0.01: {elapsed:.1f} s, "
          f"throttled 3 times, {waited:.1f} s in all")  # fmt: skip
    assert max(throttles) > 0
    # each mute is kept: the next request waits it out (the last one's is not waited for)
    assert elapsed >= 0.8 * (waited - throttles[-1] / 1000)
    m = scrape(qn.node)
    assert metric(m, "kafka_server_request_request_time", client_id="busy") > 0
    assert metric(m, "kafka_server_quota_throttled_requests_total", quota_type="Request") > 0


def test_rpcs_v0_and_v1(qn: QuotaNode) -> None:
    """DescribeClientQuotas / AlterClientQuotas at both versions, validate_only, non-strict
    filters and Kafka's error codes, over the wire."""
    from broker.cli.admin import Session
    from protocol.build import build
    from protocol.registry import REGISTRY

    async def run() -> None:
        s = await Session.open([("127.0.0.1", qn.node.port)], {}, "rpc-test")
        try:

            async def call(key: int, version: int, fields: dict[str, Any]) -> Any:
                body = build(REGISTRY.spec(key).request_type(version), fields)
                return await s.conn.send(body, version)

            def alter(name: str, ops: list[dict[str, Any]], validate: bool) -> dict[str, Any]:
                entity = [{"entity_type": "client-id", "entity_name": name}]
                return {"entries": [{"entity": entity, "ops": ops}], "validate_only": validate}

            op = {"key": "consumer_byte_rate", "value": 1000.0, "remove": False}
            for v in (0, 1):
                r = await call(49, v, alter(f"rpc-{v}", [op], True))  # validate_only
                assert r.entries[0].error_code == 0
                d = await call(48, v, {"components": [
                    {"entity_type": "client-id", "match_type": 0, "match": f"rpc-{v}"}],
                    "strict": False})  # fmt: skip
                assert d.error_code == 0 and list(d.entries) == []
                r = await call(49, v, alter(f"rpc-{v}", [op], False))
                assert r.entries[0].error_code == 0
                d = await call(48, v, {"components": [
                    {"entity_type": "client-id", "match_type": 0, "match": f"rpc-{v}"}],
                    "strict": False})  # fmt: skip
                assert [(e.values[0].key, e.values[0].value) for e in d.entries] == [
                    ("consumer_byte_rate", 1000.0)
                ]
                bad = {"key": "consumer_byte_rate", "value": 1.5, "remove": False}
                r = await call(49, v, alter(f"rpc-{v}", [bad], False))
                assert r.entries[0].error_code == 42  # INVALID_REQUEST
                assert (
                    r.entries[0].error_message == "consumer_byte_rate cannot be a fractional value."
                )
                d = await call(48, v, {"components": [
                    {"entity_type": "group", "match_type": 2, "match": None}], "strict": False})  # fmt: skip
                assert d.error_code == 35 and d.entries is None  # UNSUPPORTED_VERSION
        finally:
            s.close()

    asyncio.run(run())


def test_controller_mutation_rate(qn: QuotaNode) -> None:
    """KIP-599: partitions created count against controller_mutation_rate; over it, the strict
    versions refuse with THROTTLING_QUOTA_EXCEEDED, older ones are throttled only."""
    from broker.cli.admin import Session
    from protocol.build import build
    from protocol.registry import REGISTRY

    qn.ok("--alter", "--client", "mut", "--add-config", "controller_mutation_rate=1")

    async def call(key: int, version: int, fields: dict[str, Any]) -> Any:
        # a connection each: a throttled one is muted for its throttle time
        s = await Session.open([("127.0.0.1", qn.node.port)], {"client.id": "mut"}, "mut")
        try:
            return await s.conn.send(
                build(REGISTRY.spec(key).request_type(version), fields), version
            )
        finally:
            s.close()

    def create(name: str, partitions: int) -> dict[str, Any]:
        topic = {"name": name, "num_partitions": partitions, "replication_factor": 1,
                 "assignments": [], "configs": []}  # fmt: skip
        return {"topics": [topic], "timeout_ms": 10000, "validate_only": False}

    async def run() -> None:
        # 12 partitions within the 10 s the rate starts over: 1.2/s, 0.2 over for 10 s
        r = await call(19, 7, create("mut-a", 12))
        assert r.topics[0].error_code == 0
        assert 1500 <= r.throttle_time.total_seconds() * 1000 <= 2500
        r = await call(19, 7, create("mut-b", 1))
        assert r.topics[0].error_code == 89  # THROTTLING_QUOTA_EXCEEDED
        assert r.topics[0].error_message == "The throttling quota has been exceeded."
        assert r.throttle_time.total_seconds() > 0
        r = await call(19, 5, create("mut-c", 1))  # before v6: permissive
        assert r.topics[0].error_code == 0 and r.throttle_time.total_seconds() > 0
        r = await call(20, 5, {"topic_names": ["mut-a"], "timeout_ms": 10000})
        assert r.responses[0].error_code == 89
        r = await call(20, 4, {"topic_names": ["mut-a"], "timeout_ms": 10000})
        assert r.responses[0].error_code == 0

    asyncio.run(run())


def test_quotas_survive_a_restart(qn: QuotaNode) -> None:
    qn.ok("--alter", "--client", "durable", "--add-config", "consumer_byte_rate=4096")
    before = qn.ok("--describe", "--entity-type", "clients")
    assert "Quota configs for client-id 'durable' are consumer_byte_rate=4096.0\n" in before
    assert qn.node.stop() == 0
    qn.node.start()
    wait_for(
        lambda: qn.tool("--describe", "--entity-type", "clients").returncode == 0, 30, "the node"
    )
    assert qn.ok("--describe", "--entity-type", "clients") == before
