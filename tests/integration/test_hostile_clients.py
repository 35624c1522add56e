"""What a hostile or careless client can make a real node hold (issue 16): size prefixes that
announce frames never sent, big frames before SASL authentication, connections opened and
closed by the thousand, and requests pipelined after a fatal one."""

from __future__ import annotations

import resource
import socket
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .clients import ck_read_all, create_topic, wait_for
from .node import Node, free_port

MiB = 1024 * 1024
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)


def open_files_allowed(wanted: int) -> int:
    """Raise this process's open-file limit (the nodes it starts inherit it) towards ``wanted``
    and return the limit it got."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        soft = new
    return wanted if soft == resource.RLIM_INFINITY else soft


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def api_versions_frame(corr: int, client_id: bytes = b"raw") -> bytes:
    body = struct.pack(">hhih", 18, 0, corr, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def until_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the node still sends before it closes the connection (fails on a timeout)."""
    sock.settimeout(timeout)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionError:
        pass
    return got


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    open_files_allowed(4096)  # before the node starts: it inherits the limit
    sasl_port = free_port()
    n = Node(
        tmp_path / "node",
        listeners="",  # set below, with the SASL listener
        **{"sasl__enabled__mechanisms": "PLAIN"},
    )
    n.sasl_port = sasl_port  # type: ignore[attr-defined]
    n.settings.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{n.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
            f"CONTROLLER://127.0.0.1:{n.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{n.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "sasl.server.max.receive.size": str(64 * 1024),
        }
    )
    n.start()
    yield n
    n.kill()


def test_size_prefixes_alone_do_not_take_memory(node: Node) -> None:
    assert node.proc is not None
    before = rss_mib(node.proc.pid)
    socks = []
    try:
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", node.port))
            s.sendall(struct.pack(">i", 100 * MiB))  # under socket.request.max.bytes
            socks.append(s)
        time.sleep(0.5)  # let the node read every prefix (nothing to wait on: it must not react)
        grown = rss_mib(node.proc.pid) - before
        assert grown < 100, f"20 announced 100 MiB frames cost {grown:.0f} MiB"
        # and the node still serves everyone else
        create_topic(node.bootstrap, "alive", 1)
    finally:
        for s in socks:
            s.close()


def test_frames_before_sasl_authentication_are_capped(node: Node) -> None:
    port = node.sasl_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(struct.pack(">i", 1 * MiB) + bytes(1024))  # above sasl.server.max.receive.size
        assert until_closed(s) == b""
    # an authenticated client may send big requests (the server's own limit applies then)
    create_topic(node.bootstrap, "big", 1)
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "message.max.bytes": 2 * MiB,
        }
    )
    value = bytes(range(256)) * 3000  # 768 KB, one frame well above the pre-auth cap
    producer.produce("big", value)
    assert producer.flush(15) == 0
    (rec,) = ck_read_all(node.bootstrap, "big", 1, 1)
    assert rec.value == value


def test_closed_connections_do_not_accumulate(node: Node) -> None:
    """Closed connections used to stay in reference cycles, each with its 64 KiB read chunk,
    until a full GC: five rounds of 1,000 took a node from 52 MB to 250 MB and rising."""
    assert node.proc is not None
    count = min(1000, (open_files_allowed(4096) - 200) // 2)  # the node's sockets and ours
    baseline = rss_mib(node.proc.pid)
    samples = []
    for _ in range(5):
        socks = [socket.create_connection(("127.0.0.1", node.port)) for _ in range(count)]
        for i, s in enumerate(socks):
            s.sendall(api_versions_frame(i))
        for s in socks:
            read_frame(s)  # every connection held and served
        for s in socks:
            s.close()
        wait_for(lambda: _open_connections(node) <= 1, 10, "the node to see the closes")
        samples.append(rss_mib(node.proc.pid))
    # the first round may leave freed memory with the allocator (reused by the next rounds)
    assert samples[0] - baseline < count * 0.15, f"{baseline:.0f} MiB before, then {samples}"
    assert max(samples) - samples[0] < 15, f"RSS after each round of {count}: {samples}"


def _scrape(node: Node) -> str:
    """The node's /metrics (its endpoint starts a moment after the Kafka listener)."""
    url = f"http://127.0.0.1:{node.metrics_port}/metrics"
    pages: list[str] = []

    def scraped() -> bool:
        try:
            pages.append(str(urllib.request.urlopen(url, timeout=5).read().decode()))
        except urllib.error.URLError:
            return False
        return True

    wait_for(scraped, 10, f"{url} to answer")
    return pages[0]


def _open_connections(node: Node) -> int:
    text = _scrape(node)
    for line in text.splitlines():
        if line.startswith("kafka_server_socket_server_connection_count"):
            return int(float(line.rsplit(" ", 1)[1]))
    raise AssertionError("no connection count metric")


def test_requests_pipelined_after_a_fatal_one_are_not_answered(node: Node) -> None:
    with socket.create_connection(("127.0.0.1", node.port)) as s:
        s.sendall(api_versions_frame(1))
        assert struct.unpack(">i", read_frame(s)[:4])[0] == 1
        bad = struct.pack(">hhih", 18, 0, 2, 500) + b"x"  # client id longer than the frame
        s.sendall(struct.pack(">i", len(bad)) + bad + api_versions_frame(3))
        assert until_closed(s) == b""  # no answer to 3, pipelined after the bad header


def _metric(node: Node, name: str, **labels: str) -> float:
    text = _scrape(node)
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}}" if want else f"{name} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _served(sock: socket.socket) -> bool:
    """Does the node answer ApiVersions on this connection (or has it closed it)?"""
    try:
        sock.settimeout(5)
        sock.sendall(api_versions_frame(7))
        return struct.unpack(">i", read_frame(sock)[:4])[0] == 7
    except (ConnectionError, OSError):
        return False


@pytest.mark.parametrize("overrides", ["", "127.0.0.1:5"])
def test_connection_limits(tmp_path: Path, overrides: str) -> None:
    node = Node(
        tmp_path / "node",
        max__connections__per__ip="3",
        max__connections__per__ip__overrides=overrides,
        max__connections="100",
    )
    node.start()
    allowed = 5 if overrides else 3
    socks: list[socket.socket] = []
    try:
        wait_for(lambda: _open_connections(node) == 0, 10, "the start-up probe to go")
        socks = [socket.create_connection(("127.0.0.1", node.port)) for _ in range(allowed + 2)]
        served = [_served(s) for s in socks]
        assert served == [True] * allowed + [False, False]
        assert (
            _metric(
                node, "kafka_network_connections_rejected_total", limit="max.connections.per.ip"
            )
            == 2
        )
        socks.pop(0).close()  # one leaves: a new one is let in
        wait_for(lambda: _open_connections(node) == allowed - 1, 10, "the close to be seen")
        with socket.create_connection(("127.0.0.1", node.port)) as s:
            assert _served(s)
    finally:
        for s in socks:
            s.close()
        node.kill()


def test_connection_creation_rate_throttles_new_connections(tmp_path: Path) -> None:
    node = Node(tmp_path / "node", max__connection__creation__rate="5")
    node.start()
    socks: list[socket.socket] = []
    try:
        time.sleep(1.2)  # let the bucket refill after the start-up probe
        started = time.monotonic()
        socks = [socket.create_connection(("127.0.0.1", node.port)) for _ in range(15)]
        answered_after = []
        for s in socks:
            assert _served(s)
            answered_after.append(time.monotonic() - started)
        # 5 at once (one second's worth), then 5 per second: the last one ~2 s later
        assert answered_after[4] < 1.0, answered_after
        assert answered_after[-1] >= 1.6, answered_after
        assert _metric(node, "kafka_network_acceptor_throttled_connections_total") >= 9
        # throttled, not refused: nothing was closed
        assert (
            _metric(node, "kafka_network_connections_rejected_total", limit="max.connections") == 0
        )
    finally:
        for s in socks:
            s.close()
        node.kill()
