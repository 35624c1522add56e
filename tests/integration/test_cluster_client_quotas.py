"""Client quotas on a three-node cluster: an AlterClientQuotas sent to every node (forwarded to
the active controller by the others) reaches every node's image, and each node throttles the
producers of the partitions it leads."""

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.waits import wait_for

from .cluster import Cluster
from .node import ROOT, Node

CONFIGS = str(ROOT / "bin" / "kafka-configs.sh")
RATE = 200_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("quota-cluster"), quota__window__num="3").start()
    try:
        yield c
    finally:
        c.stop()


def _tool(node: Node, *args: str) -> str:
    p = subprocess.run(
        [CONFIGS, "--bootstrap-server", node.bootstrap, *args],
        capture_output=True, text=True, timeout=60, input="",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_quotas_set_anywhere_apply_everywhere(cluster: Cluster) -> None:
    for n in cluster.nodes:  # all but the active controller forward it
        _tool(n, "--alter", "--client", f"via-{n.node_id}", "--add-config",
              f"producer_byte_rate={RATE}")  # fmt: skip
    want = "".join(
        f"Quota configs for client-id 'via-{n.node_id}' are producer_byte_rate=200000.0\n"
        for n in cluster.nodes
    )
    for n in cluster.nodes:
        deadline = time.monotonic() + 10
        while True:
            out = _tool(n, "--describe", "--entity-type", "clients")
            if sorted(out.splitlines()) == sorted(want.splitlines()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert sorted(out.splitlines()) == sorted(want.splitlines())

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("cq", 3, 1)], operation_timeout=10)["cq"].result(15)
    # the controller answered; each broker applies the new topic at its own pace
    wait_for(lambda: all(cluster.known_everywhere("cq", i) for i in range(3)), 30, what="cq")
    leaders = {
        p: pm.leader
        for p, pm in admin.list_topics("cq", timeout=10).topics["cq"].partitions.items()
    }
    assert len(set(leaders.values())) > 1  # spread over the nodes
    throttled: list[Any] = []
    p = Producer(
        {"bootstrap.servers": cluster.bootstrap, "client.id": "via-1", "linger.ms": 5,
         "batch.size": 64_000, "throttle_cb": throttled.append}
    )  # fmt: skip
    value = b"x" * 10_000
    start = time.monotonic()
    for i in range(300):  # 1 MB to each partition: each leader throttles its share
        while True:
            try:
                p.produce("cq", value, partition=i % 3)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - start
    p.poll(0.5)
    brokers = {t.broker_id for t in throttled}
    print(f"3 MB over 3 leaders at {RATE} B/s each: {elapsed:.1f} s, throttled by {brokers}")
    assert brokers >= set(leaders.values())
    assert elapsed >= 0.6 * (1_000_000 - 2 * RATE) / RATE
