"""The partition and connection gauges come from one snapshot per scrape, read on the loop."""

import asyncio
import threading

from prometheus_client import generate_latest

from broker.metrics.broker_metrics import BrokerMetrics, StateSnapshot
from broker.metrics.on_loop import read_on_loop
from broker.network.connection_quotas import ListenerStats


def test_gauges_are_built_from_a_snapshot_taken_in_the_loop_thread(
    loop_thread: asyncio.AbstractEventLoop,
) -> None:
    seen: list[threading.Thread] = []

    def build() -> StateSnapshot:
        seen.append(threading.current_thread())
        return StateSnapshot(
            [("t", 0, 100, 7, 2), ("t", 1, 50, 3, 0)],
            connections=4,
            listeners={"CLIENT": ListenerStats(7, 3, 2, 0.5, 1, 2.25)},
            request_memory=(5000, 1.5),
            replication=(2, 1, 0, 5, 4),
            idle_closed=6,
        )

    m = BrokerMetrics()
    m.watch_state(read_on_loop(loop_thread, build, "partition metrics"))
    text = generate_latest(m.registry).decode()
    assert seen and seen[0] is not threading.current_thread()
    assert "kafka_server_replicamanager_partitioncount 2.0" in text
    assert 'kafka_log_log_logendoffset{partition="0",topic="t"} 7.0' in text
    assert 'kafka_log_log_size{partition="1",topic="t"} 50.0' in text
    assert "kafka_server_socket_server_connection_count 4.0" in text
    assert "kafka_network_socketserver_memorypoolused 5000.0" in text
    for series in (
        'kafka_server_socket_server_listener_connection_count{listener="CLIENT"} 4.0',
        'kafka_server_socket_server_connection_creation_total{listener="CLIENT"} 7.0',
        'kafka_server_socket_server_connection_close_total{listener="CLIENT"} 3.0',
        'kafka_network_acceptor_throttled_connections_total{listener="CLIENT"} 2.0',
        'kafka_network_acceptor_throttle_seconds_total{listener="CLIENT"} 0.5',
        'kafka_network_acceptor_blocked_seconds_total{listener="CLIENT"} 2.25',
        "kafka_network_idle_connections_closed_total 6.0",
    ):
        assert series in text
    assert "kafka_network_memory_pool_depleted_seconds_total 1.5" in text
    assert "kafka_server_replicamanager_leadercount 2.0" in text
    assert "kafka_server_replicamanager_underreplicatedpartitions 1.0" in text
    assert "kafka_server_replicamanager_isrshrinks_total 5.0" in text


def test_a_loop_that_does_not_answer_leaves_the_gauges_out(
    loop_thread: asyncio.AbstractEventLoop,
) -> None:
    release = threading.Event()
    loop_thread.call_soon_threadsafe(lambda: release.wait(5))  # the loop is busy
    m = BrokerMetrics()
    m.on_request(0, 9, 0.001)
    m.watch_state(read_on_loop(loop_thread, lambda: StateSnapshot([], 0), timeout_s=0.2))
    try:
        text = generate_latest(m.registry).decode()
    finally:
        release.set()
    assert "partitioncount" not in text
    assert 'kafka_network_request_requests_total{request="Produce",version="9"} 1.0' in text


def test_requests_per_version_and_errors_per_code() -> None:
    m = BrokerMetrics()
    m.on_request(3, 12, 0.001, {0: 2})
    m.on_request(3, 12, 0.002, {3: 1, 0: 1})
    m.on_request(3, 9, 0.001)
    m.on_request(98, 0, 0.001, {137: 1})  # a KIP-1279 error code
    text = generate_latest(m.registry).decode()
    assert 'kafka_network_request_requests_total{request="Metadata",version="12"} 2.0' in text
    assert 'kafka_network_request_requests_total{request="Metadata",version="9"} 1.0' in text
    assert 'kafka_network_request_errors_total{error="NONE",request="Metadata"} 3.0' in text
    errors = (
        'kafka_network_request_errors_total{error="UNKNOWN_TOPIC_OR_PARTITION",request="Metadata"}'
    )
    assert errors + " 1.0" in text
    assert 'error="UNKNOWN_MIRROR"' in text
    assert 'kafka_network_request_total_time_seconds_count{request="Metadata"} 3.0' in text
