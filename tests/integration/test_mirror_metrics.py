"""Mirror metrics on the destination's Prometheus endpoint, between two real kmirror nodes.

A stock confluent-kafka producer writes to the source; the mirror is created with kafka-mirrors.sh's
main(); http://127.0.0.1:<metrics.port>/metrics is scraped and read with prometheus-client's
parser: partitions per state, bytes counters, lag and its maximum, fetch requests, pause."""

import socket
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from .clients import create_topic, wait_for
from .mirror_helpers import (
    create_mirror,
    mirror_tool,
    running,
    scrape,
    total,
    write_mirror_config,
)
from .node import Node

MIRROR = "mx"
TOPIC = "metered"
PARTITIONS = 3


def produce(bootstrap: str, n: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[object] = []
    for i in range(start, start + n):
        p.produce(
            TOPIC,
            key=b"k%d" % i,
            value=b"value-%06d" % i + b"x" * 100,
            partition=i % PARTITIONS,
            on_delivery=lambda e, _m: errors.append(e) if e else None,
        )
    assert p.flush(20) == 0 and not errors, errors


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Node]]:
    base = tmp_path_factory.mktemp("mirror-metrics")
    src = Node(base / "src")
    dst = Node(base / "dst", mirror__metadata__refresh__interval__ms="500")
    with running(src, dst):
        create_topic(src.bootstrap, TOPIC, PARTITIONS)
        produce(src.bootstrap, 300)
        create_mirror(dst, MIRROR, write_mirror_config(base / "mirror.properties", src.bootstrap))
        yield src, dst


def test_mirror_metrics_follow_the_mirror(pair: tuple[Node, Node]) -> None:
    src, dst = pair
    m = {"mirror": MIRROR}
    # Before any topic: the mirror's series exist, all zero.
    before = scrape(dst)
    assert total(before, "kafka_server_mirror_partitions", **m) == 0
    assert {lbl["state"] for lbl, _ in before["kafka_server_mirror_partitions"]} >= {
        "PREPARING",
        "MIRRORING",
        "PAUSED",
        "STOPPED",
        "FAILED",
    }
    assert total(before, "kafka_server_mirror_dead_fetchers", **m) == 0

    mirror_tool(dst, "--add", "--topic", TOPIC, "--mirror", MIRROR)
    wait_for(
        lambda: (
            total(s := scrape(dst), "kafka_server_mirror_partitions", state="MIRRORING", **m)
            == PARTITIONS
            and len(s.get("kafka_server_mirror_consumer_lag", [])) == PARTITIONS
            and total(s, "kafka_server_mirror_max_lag", **m) == 0
        ),
        30,
        "every partition MIRRORING and caught up",
        step=0.1,
    )
    s1 = scrape(dst)
    lags = {lbl["partition"]: v for lbl, v in s1["kafka_server_mirror_consumer_lag"]}
    assert lags == {str(p): 0.0 for p in range(PARTITIONS)}
    appended1 = total(s1, "kafka_server_mirror_appended_bytes_total", **m)
    fetched1 = total(s1, "kafka_server_mirror_fetch_bytes_total", **m)
    requests1 = total(s1, "kafka_server_mirror_fetch_requests_total", **m)
    assert appended1 > 300 * 100  # every record's value is over 100 bytes
    assert fetched1 >= appended1 and requests1 > 0
    assert total(s1, "kafka_server_mirror_failed_partitions", **m) == 0
    assert total(s1, "kafka_server_mirror_fetch_errors_total", **m) == 0
    # the fetchers' own connections to the source (the KIP's per-fetcher network metrics)
    net = "kafka_server_mirror_fetcher_network_"
    assert total(s1, net + "connection_count", **m) >= 1
    assert total(s1, net + "incoming_byte_total", **m) >= fetched1
    assert total(s1, net + "response_total", **m) >= requests1
    assert total(s1, net + "outgoing_byte_total", **m) > 0
    assert total(s1, net + "failed_authentication_total", **m) == 0
    wait_for(
        lambda: (
            total(scrape(dst), "kafka_server_mirror_metadata_last_refresh_timestamp_seconds", **m)
            > time.time() - 60
        ),
        30,
        "a metadata refresh",
        step=0.1,
    )

    # More data: the byte counters grow by at least what was produced, lag returns to 0.
    produce(src.bootstrap, 150, start=300)
    wait_for(
        lambda: (
            total(s := scrape(dst), "kafka_server_mirror_appended_bytes_total", **m)
            >= appended1 + 150 * 100
            and total(s, "kafka_server_mirror_max_lag", **m) == 0
        ),
        30,
        "the new records mirrored",
        step=0.1,
    )
    s2 = scrape(dst)
    assert total(s2, "kafka_server_mirror_fetch_bytes_total", **m) > fetched1
    assert total(s2, "kafka_server_mirror_fetch_requests_total", **m) > requests1

    # Pause: the PAUSED gauge counts the topic's partitions, MIRRORING drops to 0, the lag
    # series of the stopped fetches disappear.
    mirror_tool(dst, "--pause", "--topic", TOPIC, "--mirror", MIRROR)
    wait_for(
        lambda: (
            total(s := scrape(dst), "kafka_server_mirror_partitions", state="PAUSED", **m)
            == PARTITIONS
            and total(s, "kafka_server_mirror_partitions", state="MIRRORING", **m) == 0
        ),
        30,
        "every partition PAUSED",
        step=0.1,
    )
    s3 = scrape(dst)
    assert not s3.get("kafka_server_mirror_consumer_lag")
    assert total(s3, "kafka_server_mirror_appended_bytes_total", **m) >= total(
        s2, "kafka_server_mirror_appended_bytes_total", **m
    )  # counters never go back

    mirror_tool(dst, "--resume", "--topic", TOPIC, "--mirror", MIRROR)
    wait_for(
        lambda: (
            total(scrape(dst), "kafka_server_mirror_partitions", state="MIRRORING", **m)
            == PARTITIONS
        ),
        30,
        "every partition MIRRORING again",
        step=0.1,
    )


def test_metrics_endpoint_binds_metrics_host(pair: tuple[Node, Node]) -> None:
    """metrics.host=127.0.0.1 (the harness's setting): the endpoint answers there and not on
    another loopback address, as it would if it still bound 0.0.0.0."""
    _src, dst = pair
    assert "kafka_server_mirror_replication_throttled_rate_bytes" in scrape(dst)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", dst.metrics_port), timeout=5).close()
