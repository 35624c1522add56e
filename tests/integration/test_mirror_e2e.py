"""Cluster Mirroring end to end between two real kmirror nodes, driven by kafka-mirrors.sh and
stock clients: create, add, byte-identical copy, read-only, pause/resume, failover, delete."""

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError

from protocol.records import ControlType, iter_records, parse_control_record, scan_batches

from .clients import create_topic, wait_for
from .mirror_helpers import (
    create_mirror,
    end_offsets,
    mirror_tool,
    produce_numbered,
    running,
    scrape,
    total,
    wait_caught_up,
    write_mirror_config,
)
from .node import ROOT, Node

TOPIC = "orders"
PARTITIONS = 2
# mirrored too (the pattern ord.*), never paused: what the same mirror copies while "orders" is
# paused shows that it would have copied "orders" by then, had the pause not held
WITNESS = "ord-witness"


def _produce(bootstrap: str, n: int, start: int = 0) -> list[Any]:
    return produce_numbered(bootstrap, TOPIC, n, start)


def _segment_bytes(node: Node, partition: int) -> bytes:
    d = node.log_dir / f"{TOPIC}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def _data_batches(raw: bytes) -> list[bytes]:
    return [bytes(b.raw) for b in scan_batches(raw) if not b.is_control]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Node, Path]]:
    base = tmp_path_factory.mktemp("mirror-e2e")
    src, dst = Node(base / "src"), Node(base / "dst")
    with running(src, dst):
        create_topic(src.bootstrap, TOPIC, PARTITIONS)
        create_topic(src.bootstrap, WITNESS, 1)
        yield src, dst, write_mirror_config(base / "mirror.properties", src.bootstrap)


def test_mirror_lifecycle(pair: tuple[Node, Node, Path]) -> None:
    src, dst, props = pair
    assert not _produce(src.bootstrap, 400)
    create_mirror(dst, "m1", props, "ord.*")
    wait_caught_up(
        src.bootstrap, dst.bootstrap, TOPIC, PARTITIONS, "the mirror to catch up", step=0.2
    )

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

    described = mirror_tool(dst, "--describe", "--mirror", "m1")
    assert "MIRRORING" in described, described

    # pause: no progress
    mirror_tool(dst, "--pause", "--topic", TOPIC, "--mirror", "m1")
    wait_for(
        lambda: "PAUSED" in mirror_tool(dst, "--describe", "--mirror", "m1"), 30, "PAUSED", step=0.2
    )
    before = end_offsets(dst.bootstrap, TOPIC, PARTITIONS)
    assert not _produce(src.bootstrap, 100, start=400)
    # no fixed sleep: records produced after those reach the destination through the same
    # mirror (the witness topic is not paused) while the paused partitions stay put
    assert not produce_numbered(src.bootstrap, WITNESS, 5)
    wait_caught_up(src.bootstrap, dst.bootstrap, WITNESS, 1, "the unpaused witness", step=0.2)
    assert end_offsets(dst.bootstrap, TOPIC, PARTITIONS) == before
    # resume: catches up
    mirror_tool(dst, "--resume", "--topic", TOPIC, "--mirror", "m1")
    wait_caught_up(
        src.bootstrap, dst.bootstrap, TOPIC, PARTITIONS, "catch-up after resume", step=0.2
    )

    # failover: the topic becomes writable, at an epoch above every mirrored one
    mirror_tool(dst, "--remove", "--topic", TOPIC, "--mirror", "m1")
    mirror_tool(dst, "--remove", "--topic", WITNESS, "--mirror", "m1")  # (--delete wants none)
    wait_for(
        lambda: (
            not _produce(dst.bootstrap, 1, start=10_000)
            and not produce_numbered(dst.bootstrap, WITNESS, 1)
        ),
        30,
        "writable after failover",
        step=0.2,
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
    listed = mirror_tool(dst, "--list")
    assert "m1" in listed
    mirror_tool(dst, "--delete", "--mirror", "m1")
    assert "m1" not in mirror_tool(dst, "--list")


def _kv(batch: Any) -> tuple[bytes | None, bytes | None]:
    rec = next(iter_records(batch))
    return rec.key, rec.value


def test_cli_wrapper_help() -> None:
    p = subprocess.run(
        [str(ROOT / "bin" / "kafka-mirrors.sh"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and "--mirror" in p.stdout


def test_failback_copies_only_the_delta(tmp_path: Path) -> None:
    """A -> B, fail over to B, B takes writes (and so does A, which B never sees), then B -> A
    with the same mirror name: A keeps what B confirms, drops its own later records (B's
    DivergingEpoch answer: they are in the last mirrored epoch) and fetches only B's new
    batches."""
    a, b = Node(tmp_path / "a"), Node(tmp_path / "b")
    with running(a, b):
        create_topic(a.bootstrap, TOPIC, PARTITIONS)
        assert not _produce(a.bootstrap, 300)
        props_a = write_mirror_config(tmp_path / "to-a.properties", a.bootstrap)
        create_mirror(b, "dr", props_a, TOPIC)
        wait_caught_up(a.bootstrap, b.bootstrap, TOPIC, PARTITIONS, "B catches up", step=0.2)
        mirror_tool(b, "--remove", "--topic", TOPIC, "--mirror", "dr")
        wait_for(lambda: not _produce(b.bootstrap, 1, start=5000), 30, "B writable", step=0.2)
        assert not _produce(b.bootstrap, 99, start=5001)
        a_before = {p: len(_segment_bytes(a, p)) for p in range(PARTITIONS)}
        assert not _produce(a.bootstrap, 20, start=7000)  # at A's epoch, after B's copy ends

        props_b = write_mirror_config(tmp_path / "to-b.properties", b.bootstrap)
        create_mirror(a, "dr", props_b, TOPIC)
        wait_caught_up(
            b.bootstrap, a.bootstrap, TOPIC, PARTITIONS, "A catches up with B", 40, step=0.2
        )
        delta = 0
        for p in range(PARTITIONS):
            a_log, b_log = _segment_bytes(a, p), _segment_bytes(b, p)
            assert [bytes(x.raw) for x in scan_batches(a_log)] == [
                bytes(x.raw) for x in scan_batches(b_log)
            ]
            assert a_log[: a_before[p]] == b_log[: a_before[p]]  # A's old bytes untouched
            delta += len(a_log) - a_before[p]
        # only the delta crossed the wire: B (the new source) served no more than that to A
        served = total(scrape(b), "kafka_server_brokertopicmetrics_bytes_out_total")
        size = sum(len(_segment_bytes(b, p)) for p in range(PARTITIONS))
        assert 0 < delta < size / 2 and delta <= served <= delta + 1024, (delta, served, size)
