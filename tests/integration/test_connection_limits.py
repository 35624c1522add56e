"""Connection limits of a real node, with raw sockets and a stock client (issue 16):
connections.max.idle.ms, max.connections (node and listener, the inter-broker listener's
exception), max.connection.creation.rate per listener and connections.max.reauth.ms. max.connections.per.ip and the
node-wide creation rate on a lone listener are in test_hostile_clients."""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .clients import admin, wait_for
from .node import Node, free_port
from .test_hostile_clients import (
    _metric,
    _open_connections,
    _served,
    api_versions_frame,
    read_frame,
    until_closed,
)


def client_listener_node(tmp_path: Path, **overrides: str) -> Node:
    """A node whose clients connect on CLIENT (``node.client_port``), with PLAINTEXT its
    inter-broker listener and CONTROLLER its controller's."""
    node = Node(tmp_path / "node", **overrides)
    client_port = free_port()
    node.client_port = client_port  # type: ignore[attr-defined]
    node.settings.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CLIENT://127.0.0.1:{client_port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
            f"CLIENT://127.0.0.1:{client_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
        }
    )
    return node


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()


def connect(port: int, socks: list[socket.socket]) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    socks.append(s)
    return s


def _readable(sock: socket.socket, timeout: float) -> bool:
    """poll, not select: in a long pytest run descriptors pass select()'s FD_SETSIZE (1024)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(int(timeout * 1000)))


def test_idle_connections_are_closed(tmp_path: Path, sockets: list[socket.socket]) -> None:
    node = Node(tmp_path / "node", connections__max__idle__ms="1000")
    node.start()
    try:
        idle, busy = connect(node.port, sockets), connect(node.port, sockets)
        assert _served(idle) and _served(busy)
        last_used = time.monotonic()
        closed_after = None
        while time.monotonic() - last_used < 4:
            assert _served(busy), "a connection in use was closed"
            if closed_after is None and _readable(idle, 0):
                closed_after = time.monotonic() - last_used
                assert until_closed(idle, timeout=1) == b""  # readable: the node closed it
            time.sleep(0.2)
        assert closed_after is not None and 0.9 <= closed_after <= 2.5, closed_after
        assert _metric(node, "kafka_network_idle_connections_closed_total") >= 1
        # a stock client reconnects as it needs to
        assert admin(node.bootstrap).list_topics(timeout=10).brokers
    finally:
        node.kill()


def test_max_connections_blocks_accepting_until_a_connection_closes(
    tmp_path: Path, sockets: list[socket.socket]
) -> None:
    node = client_listener_node(tmp_path, max__connections="3")
    node.start()
    port: int = node.client_port  # type: ignore[attr-defined]
    try:
        wait_for(lambda: _open_connections(node) == 0, 10, "the start-up probe to go")
        first = [connect(port, sockets) for _ in range(3)]
        assert all(_served(s) for s in first)
        waiting = connect(port, sockets)  # TCP is up (the backlog), but it is not served
        waiting.sendall(api_versions_frame(9))
        assert not _readable(waiting, 1.0), "served past max.connections"
        assert _metric(node, "kafka_network_acceptor_blocked_seconds_total", listener="CLIENT") > 0
        first[0].close()  # one leaves: the one waiting is let in, and served
        waiting.settimeout(5)
        assert read_frame(waiting)[:4] == (9).to_bytes(4, "big")
        # The inter-broker listener is not held by max.connections: it gets in, and the least
        # recently active client connection is closed to make room.
        assert _served(connect(node.port, sockets))
        assert until_closed(first[1]) == b""
        assert _served(first[2]) and _served(waiting)
        assert _metric(node, "kafka_server_socket_server_connection_creation_total") >= 5
        assert _metric(node, "kafka_server_socket_server_connection_close_total") >= 2
        assert (
            _metric(node, "kafka_server_socket_server_listener_connection_count", listener="CLIENT")
            == 2
        )
    finally:
        node.kill()


def test_listener_max_connections(tmp_path: Path, sockets: list[socket.socket]) -> None:
    node = client_listener_node(tmp_path, listener__name__client__max__connections="2")
    node.start()
    port: int = node.client_port  # type: ignore[attr-defined]
    try:
        wait_for(lambda: _open_connections(node) == 0, 10, "the start-up probe to go")
        two = [connect(port, sockets) for _ in range(2)]
        assert all(_served(s) for s in two)
        waiting = connect(port, sockets)
        waiting.sendall(api_versions_frame(9))
        assert not _readable(waiting, 0.5), "served past the listener's limit"
        # other listeners are not held by it: a stock client on PLAINTEXT works
        assert admin(node.bootstrap).list_topics(timeout=10).brokers
        two[0].close()
        waiting.settimeout(5)
        assert read_frame(waiting)[:4] == (9).to_bytes(4, "big")
    finally:
        node.kill()


def _answer_times(port: int, n: int, sockets: list[socket.socket]) -> list[float]:
    started = time.monotonic()
    socks = [connect(port, sockets) for _ in range(n)]
    times = []
    for s in socks:
        assert _served(s)
        times.append(time.monotonic() - started)
    return times


def test_creation_rate_spares_the_inter_broker_listener(
    tmp_path: Path, sockets: list[socket.socket]
) -> None:
    node = client_listener_node(
        tmp_path,
        max__connection__creation__rate="5",
        listener__name__client__max__connection__creation__rate="4",
    )
    node.start()
    try:
        time.sleep(1.2)  # the buckets refill after the start-up probe
        # CLIENT: its own rate (4/s) is the lower one: 4 at once, then one every 250 ms
        client = _answer_times(node.client_port, 10, sockets)  # type: ignore[attr-defined]
        assert client[3] < 0.5 and client[-1] >= 1.2, client
        # the inter-broker listener is held by its own rate only (it has none)
        inter_broker = _answer_times(node.port, 10, sockets)
        assert inter_broker[-1] < 0.5, inter_broker
        assert _metric(node, "kafka_network_acceptor_throttled_connections_total") >= 5
        assert (
            _metric(
                node, "kafka_network_acceptor_throttled_connections_total", listener="PLAINTEXT"
            )
            == 0
        )
    finally:
        node.kill()


# -- connections.max.reauth.ms (KIP-368) ----------------------------------------------------------

PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)


def _request(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    payload = struct.pack(">hhih", api_key, version, corr, 3) + b"raw" + body
    return struct.pack(">i", len(payload)) + payload


def _sasl_plain(sock: socket.socket, password: str = "alice-secret") -> int:
    """SaslHandshake v1 + SaslAuthenticate v1 (PLAIN, alice); the session lifetime in ms."""
    sock.sendall(_request(17, 1, 1, struct.pack(">h", 5) + b"PLAIN"))
    assert struct.unpack(">ih", read_frame(sock)[:6]) == (1, 0)
    token = f"\0alice\0{password}".encode()
    sock.sendall(_request(36, 1, 2, struct.pack(">i", len(token)) + token))
    resp = read_frame(sock)
    corr, error = struct.unpack(">ih", resp[:6])
    assert (corr, error) == (2, 0)
    (message_len,) = struct.unpack(">h", resp[6:8])
    pos = 8 + max(message_len, 0)
    (token_len,) = struct.unpack(">i", resp[pos : pos + 4])
    pos += 4 + token_len
    (lifetime,) = struct.unpack(">q", resp[pos : pos + 8])
    return int(lifetime)


def test_sessions_expire_unless_clients_reauthenticate(
    tmp_path: Path, sockets: list[socket.socket]
) -> None:
    node = Node(
        tmp_path / "node",
        listeners="",
        sasl__enabled__mechanisms="PLAIN",
        connections__max__reauth__ms="1500",
    )
    sasl_port = free_port()
    node.settings.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        }
    )
    node.start()
    try:
        stale, renewed = connect(sasl_port, sockets), connect(sasl_port, sockets)
        started = time.monotonic()
        assert _sasl_plain(stale) == 1500 and _sasl_plain(renewed) == 1500
        assert _served(stale) and _served(renewed)
        time.sleep(max(0.0, 0.8 - (time.monotonic() - started)))
        assert _sasl_plain(renewed) == 1500  # again, on the same connection: 1.5 s more
        time.sleep(max(0.0, 1.8 - (time.monotonic() - started)))
        assert time.monotonic() - started < 2.2, "too slow to tell the sessions apart"
        stale.sendall(api_versions_frame(5))
        assert until_closed(stale) == b""  # expired: closed, unanswered
        assert _served(renewed)
        assert "after its SASL session expired" in node.log_tail(100)

        # a stock client (librdkafka re-authenticates, KIP-368) keeps producing across sessions
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{sasl_port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
        )
        errors: list[object] = []
        until, sent = time.monotonic() + 4, 0
        while time.monotonic() < until:
            producer.produce(
                "reauth", str(sent).encode(), on_delivery=lambda e, m: errors.append(e)
            )
            sent += 1
            producer.poll(0)
            time.sleep(0.2)
        assert producer.flush(10) == 0
        assert errors == [None] * sent
        # 4 s of traffic on 1.5 s sessions: it authenticated again (3 exchanges above, then
        # the producer's), and none of its connections was closed for an expired session
        assert (
            _metric(node, "kafka_network_request_requests_total", request="SaslAuthenticate") >= 5
        )
        assert node.log_tail(200).count("after its SASL session expired") == 1
    finally:
        node.kill()


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("max.connections.per.ip.overrides", "1.2.3.4:x"),
        ("listener.name.plaintext.max.connections", "-1"),
        ("connections.max.reauth.ms", "-1"),
    ],
)
def test_bad_limits_stop_the_node_at_start(tmp_path: Path, setting: str, value: str) -> None:
    node = Node(tmp_path / "node")
    node.settings[setting] = value
    with pytest.raises(RuntimeError, match=f"invalid value '{value}' for {setting}"):
        node.start(timeout=20)
