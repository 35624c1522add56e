"""Helpers shared by the mirror integration tests.

kafka-mirrors.sh's main() run in this process against a destination node, a source and a
destination started (and killed) together, mirror config files, end offsets, the describe
table, the Prometheus endpoint, and librdkafka's mock cluster as a source. Polling is
``clients.wait_for``; every loop here is bounded.
"""

import asyncio
import ctypes
import glob
import io
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from broker.cli import mirrors as mirrors_cli
from broker.cli.admin import Session

from .clients import wait_for
from .node import ROOT, Node

Samples = dict[str, list[tuple[dict[str, str], float]]]


# --- kafka-mirrors.sh -------------------------------------------------------------------------


def run_mirror_tool(dst: Node, *args: str) -> tuple[int, str, str]:
    """kafka-mirrors.sh's main() with ``--bootstrap-server`` at ``dst``, in this process (the
    shell wrapper would cost a Python start-up per call): exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    rc = mirrors_cli.main(["--bootstrap-server", dst.bootstrap, *args], out, err)
    return rc, out.getvalue(), err.getvalue()


def mirror_tool(dst: Node, *args: str) -> str:
    """As ``run_mirror_tool``, asserting exit code 0; the tool's stdout."""
    rc, out, err = run_mirror_tool(dst, *args)
    assert rc == 0, f"{args}: rc={rc}\n{out}\n{err}"
    return out


def write_mirror_config(path: Path, bootstrap: str, *lines: str) -> Path:
    """A ``--mirror-config`` file: ``bootstrap.servers`` of the source, then ``lines``."""
    path.write_text("".join(f"{line}\n" for line in (f"bootstrap.servers={bootstrap}", *lines)))
    return path


def create_mirror(dst: Node, mirror: str, config: Path, *topics: str) -> None:
    """``--create`` the mirror from a config file, then ``--add`` each topic name or pattern."""
    mirror_tool(dst, "--create", "--mirror", mirror, "--mirror-config", str(config))
    for topic in topics:
        mirror_tool(dst, "--add", "--topic", topic, "--mirror", mirror)


def describe_rows(dst: Node, mirror: str, topic: str) -> list[list[str]]:
    """The ``--describe`` table's rows for ``topic``, split into columns (MIRROR, TOPIC,
    PARTITION, SOURCE-OFFSET, DESTINATION-OFFSET, LAG, STATE, SOURCE-AGE)."""
    text = mirror_tool(dst, "--describe", "--mirror", mirror)
    return [cols for cols in (line.split() for line in text.splitlines()) if cols[1:2] == [topic]]


def node_mirror_states(node: Node, mirror: str) -> dict[tuple[str, int], tuple[str, str | None]]:
    """DescribeMirrors of one node only (the partitions it leads), unlike ``--describe``, which
    asks every node (and so waits for a frozen one): (topic, partition) -> (state, reason)."""

    async def ask() -> Any:
        s = await Session.open([("127.0.0.1", node.port)], {})
        try:
            body = {"mirror_names": [mirror], "include_authorized_operations": False}
            return await s.call(99, body)  # DescribeMirrors
        finally:
            s.close()

    resp = asyncio.run(ask())
    return {
        (str(t.topic_name), int(p.partition_index)): (str(p.state), p.state_reason)
        for m in resp.mirrors
        for t in m.topics
        for p in t.partitions
    }


# --- nodes and data ---------------------------------------------------------------------------


@contextmanager
def running(*nodes: Node, clean_stop: bool = False) -> Iterator[None]:
    """Start ``nodes`` in order; on leaving, kill them in reverse order (with ``clean_stop``,
    SIGTERM and wait, so their segments are complete for a test that reads them afterwards).
    A node that never started is skipped by ``kill``/``stop``."""
    try:
        for node in nodes:
            node.start()
        yield
    finally:
        for node in reversed(nodes):
            if clean_stop:
                node.stop()
            else:
                node.kill()


def end_offsets(
    bootstrap: str, topic: str, partitions: int, missing_ok: bool = False
) -> dict[int, int]:
    """Each partition's high watermark; with ``missing_ok`` an unknown topic or partition (not
    yet created at a destination) gives ``{}`` instead of raising."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            for p in range(partitions)
        }
    except KafkaException:
        if missing_ok:
            return {}
        raise
    finally:
        c.close()


def wait_caught_up(
    src: str,
    dst: str,
    topic: str,
    partitions: int,
    what: str,
    timeout: float = 30.0,
    step: float = 0.1,
) -> dict[int, int]:
    """Wait until the destination's end offsets (at bootstrap ``dst``) equal the source's as
    they are now; returns those source end offsets. The destination's topic may appear late."""
    ends = end_offsets(src, topic, partitions)
    wait_for(
        lambda: end_offsets(dst, topic, partitions, missing_ok=True) == ends, timeout, what, step
    )
    return ends


def produce_numbered(bootstrap: str, topic: str, n: int, start: int = 0) -> list[Any]:
    """Records ``start``..``start+n-1`` keyed ``k<i>``, valued ``v<i:06d>``, placed by the
    default partitioner, idempotent and lz4; the delivery errors (empty when all succeeded)."""
    errors: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
        }
    )
    for i in range(start, start + n):
        p.produce(
            topic,
            key=b"k%d" % i,
            value=b"v%06d" % i,
            on_delivery=lambda e, m: errors.append(e) if e else None,
        )
    assert p.flush(20) == 0
    return errors


# --- metrics ----------------------------------------------------------------------------------


def scrape(node: Node) -> Samples:
    """Every sample of the node's Prometheus endpoint, read with prometheus-client's parser."""
    url = f"http://127.0.0.1:{node.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
    return sum(
        v for lbl, v in samples.get(name, []) if all(lbl.get(k) == w for k, w in labels.items())
    )


# --- librdkafka's mock cluster as a source -----------------------------------------------------


class MockCluster:
    """librdkafka's in-process mock cluster (from the confluent-kafka wheel), through ctypes."""

    def __init__(self, brokers: int = 1) -> None:
        libs = glob.glob(
            str(ROOT / ".venv/lib/python3.11/site-packages/confluent_kafka.libs/librdkafka*.so*")
        )
        if not libs:
            pytest.skip("librdkafka not found in the confluent-kafka wheel")
        lib = ctypes.CDLL(libs[0])
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ]
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        create_args = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_topic_create.argtypes = create_args  # cluster, name, partitions, rf
        lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
        lib.rd_kafka_mock_partition_set_leader.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int32,
            ctypes.c_int32,
        ]
        lib.rd_kafka_mock_partition_set_leader.restype = ctypes.c_int
        lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        self.lib = lib
        errstr = ctypes.create_string_buffer(512)
        self.rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errstr, 512)
        assert self.rk, errstr.value
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        assert self.mc
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def create_topic(self, name: str, partitions: int) -> None:
        assert self.lib.rd_kafka_mock_topic_create(self.mc, name.encode(), partitions, 1) == 0

    def set_leader(self, name: str, partition: int, broker_id: int) -> None:
        """Move the partition's leadership to mock broker ``broker_id`` (1-based)."""
        rc = self.lib.rd_kafka_mock_partition_set_leader(
            self.mc, name.encode(), partition, broker_id
        )
        assert rc == 0, f"set_leader {name}-{partition} -> {broker_id}: {rc}"

    def close(self) -> None:
        self.lib.rd_kafka_mock_cluster_destroy(self.mc)
        self.lib.rd_kafka_destroy(self.rk)
