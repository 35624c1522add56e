"""Cluster Mirroring end to end between two real kmirror nodes, driven by kafka-mirrors.sh and
stock clients: create, add, byte-identical copy, read-only, pause/resume, failover, delete."""

import io
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cli import mirrors as mirrors_cli
from protocol.records import ControlType, iter_records, parse_control_record, scan_batches

from .node import Node

TOPIC = "orders"
PARTITIONS = 2


def _tool(dst: Node, *args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    rc = mirrors_cli.main(["--bootstrap-server", dst.bootstrap, *args], out, err)
    assert rc == 0, f"{args}: rc={rc}\n{out.getvalue()}\n{err.getvalue()}"
    return out.getvalue()


def _wait(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _produce(bootstrap: str, n: int, start: int = 0) -> list[Any]:
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
            TOPIC,
            key=b"k%d" % i,
            value=b"v%06d" % i,
            on_delivery=lambda e, m: errors.append(e) if e else None,
        )
    assert p.flush(20) == 0
    return errors


def _segment_bytes(node: Node, partition: int) -> bytes:
    d = node.log_dir / f"{TOPIC}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def _data_batches(raw: bytes) -> list[bytes]:
    return [bytes(b.raw) for b in scan_batches(raw) if not b.is_control]


def _end_offsets(bootstrap: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
            for p in range(PARTITIONS)
        }
    finally:
        c.close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Node, Path]]:
    base = tmp_path_factory.mktemp("mirror-e2e")
    src, dst = Node(base / "src"), Node(base / "dst")
    src.start()
    dst.start()
    try:
        admin = AdminClient({"bootstrap.servers": src.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            f.result(15)
        props = base / "mirror.properties"
        props.write_text(f"bootstrap.servers={src.bootstrap}\n")
        yield src, dst, props
    finally:
        dst.kill()
        src.kill()


def test_mirror_lifecycle(pair: tuple[Node, Node, Path]) -> None:
    src, dst, props = pair
    assert not _produce(src.bootstrap, 400)
    _tool(dst, "--create", "--mirror", "m1", "--mirror-config", str(props))
    _tool(dst, "--add", "--topic", "ord.*", "--mirror", "m1")
    source_ends = _end_offsets(src.bootstrap)
    _wait("the mirror to catch up", lambda: _end_offsets(dst.bootstrap) == source_ends)

    # byte for byte, same offsets, same epochs, same compression
    for p in range(PARTITIONS):
        assert _data_batches(_segment_bytes(dst, p)) == _data_batches(_segment_bytes(src, p))

    # a stock consumer reads the same records from both clusters
    def read_all(bootstrap: str) -> list[tuple[int, int, bytes]]:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"g-{bootstrap}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        c.subscribe([TOPIC])
        got: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + 20
        while len(got) < 400 and time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.5):
                assert not m.error(), m.error()
                got.append((m.partition(), m.offset(), m.value()))
        c.close()
        return sorted(got)

    assert read_all(dst.bootstrap) == read_all(src.bootstrap)

    # read-only while mirrored
    errors = _produce(dst.bootstrap, 1)
    assert errors and all(
        e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        or "READ_ONLY" in e.name()
        or e.code() == 134
        for e in errors
    ), errors

    described = _tool(dst, "--describe", "--mirror", "m1")
    assert "MIRRORING" in described, described

    # pause: no progress
    _tool(dst, "--pause", "--topic", TOPIC, "--mirror", "m1")
    _wait("PAUSED", lambda: "PAUSED" in _tool(dst, "--describe", "--mirror", "m1"))
    before = _end_offsets(dst.bootstrap)
    assert not _produce(src.bootstrap, 100, start=400)
    time.sleep(2)
    assert _end_offsets(dst.bootstrap) == before
    # resume: catches up
    _tool(dst, "--resume", "--topic", TOPIC, "--mirror", "m1")
    source_ends = _end_offsets(src.bootstrap)
    _wait("catch-up after resume", lambda: _end_offsets(dst.bootstrap) == source_ends)

    # failover: the topic becomes writable, at an epoch above every mirrored one
    _tool(dst, "--remove", "--topic", TOPIC, "--mirror", "m1")
    _wait(
        "writable after failover", lambda: not _produce(dst.bootstrap, 1, start=10_000), timeout=30
    )
    for p in range(PARTITIONS):
        batches = list(scan_batches(_segment_bytes(dst, p)))
        resets = [
            b
            for b in batches
            if b.is_control and parse_control_record(*_kv(b)).type == ControlType.MIRROR_PID_RESET
        ]
        assert len(resets) == 1, f"partition {p}: {len(resets)} MIRROR_PID_RESET markers"
        mirrored_epochs = {
            b.partition_leader_epoch for b in batches if b.base_offset < resets[0].base_offset
        }
        assert resets[0].partition_leader_epoch > max(mirrored_epochs)
        after = [b for b in batches if b.base_offset > resets[0].base_offset]
        assert all(b.partition_leader_epoch >= resets[0].partition_leader_epoch for b in after)
    listed = _tool(dst, "--list")
    assert "m1" in listed
    _tool(dst, "--delete", "--mirror", "m1")
    assert "m1" not in _tool(dst, "--list")


def _metric(node: Node, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith((name + " ", name + "{")):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _kv(batch: Any) -> tuple[bytes | None, bytes | None]:
    rec = next(iter_records(batch))
    return rec.key, rec.value


def test_cli_wrapper_help() -> None:
    from .node import ROOT

    p = subprocess.run(
        [str(ROOT / "bin" / "kafka-mirrors.sh"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and "--mirror" in p.stdout


def test_failback_copies_only_the_delta(tmp_path: Path) -> None:
    """A -> B, fail over to B, B takes writes, then B -> A with the same mirror name: A keeps
    what it has, truncates nothing B confirms, and fetches only B's new batches."""
    a, b = Node(tmp_path / "a"), Node(tmp_path / "b")
    a.start()
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            f.result(15)
        assert not _produce(a.bootstrap, 300)
        props_a = tmp_path / "to-a.properties"
        props_a.write_text(f"bootstrap.servers={a.bootstrap}\n")
        _tool(b, "--create", "--mirror", "dr", "--mirror-config", str(props_a))
        _tool(b, "--add", "--topic", TOPIC, "--mirror", "dr")
        ends = _end_offsets(a.bootstrap)
        _wait("B catches up", lambda: _end_offsets(b.bootstrap) == ends)
        _tool(b, "--remove", "--topic", TOPIC, "--mirror", "dr")
        _wait("B writable", lambda: not _produce(b.bootstrap, 1, start=5000), timeout=30)
        assert not _produce(b.bootstrap, 99, start=5001)
        a_before = {p: len(_segment_bytes(a, p)) for p in range(PARTITIONS)}

        props_b = tmp_path / "to-b.properties"
        props_b.write_text(f"bootstrap.servers={b.bootstrap}\n")
        _tool(a, "--create", "--mirror", "dr", "--mirror-config", str(props_b))
        _tool(a, "--add", "--topic", TOPIC, "--mirror", "dr")
        ends = _end_offsets(b.bootstrap)
        _wait("A catches up with B", lambda: _end_offsets(a.bootstrap) == ends, timeout=40)
        delta = 0
        for p in range(PARTITIONS):
            a_log, b_log = _segment_bytes(a, p), _segment_bytes(b, p)
            assert [bytes(x.raw) for x in scan_batches(a_log)] == [
                bytes(x.raw) for x in scan_batches(b_log)
            ]
            assert a_log[: a_before[p]] == b_log[: a_before[p]]  # A's old bytes untouched
            delta += len(a_log) - a_before[p]
        # only the delta crossed the wire: B (the new source) served no more than that to A
        served = _metric(b, "kafka_server_brokertopicmetrics_bytes_out_total")
        total = sum(len(_segment_bytes(b, p)) for p in range(PARTITIONS))
        assert 0 < delta < total / 2 and delta <= served <= delta + 1024, (delta, served, total)
    finally:
        b.kill()
        a.kill()
