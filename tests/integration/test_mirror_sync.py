"""Synchronous mirroring (issue 30 item 1) between real kmirror nodes, driven by stock clients:
an acks=all produce of a ``mirror.sync.enable`` topic is answered only once the destination
mirror committed it, so a source killed at any moment loses nothing it acknowledged; with the
destination gone, ``refuse`` answers NOT_ENOUGH_REPLICAS_AFTER_APPEND and ``async`` degrades
(metric, WARN) and recovers; bad config values and a mirror that cannot send the signal are
named.

``KMIRROR_SYNC_ROUNDS`` sets the kill -9 rounds (3 by default, 20 for the long form);
``KMIRROR_SYNC_SEED`` the seed of their kill moments (printed)."""

import os
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from .clients import create_topic, wait_for
from .mirror_helpers import (
    create_mirror,
    end_offsets,
    mirror_tool,
    run_mirror_tool,
    running,
    scrape,
    total,
    write_mirror_config,
)
from .node import ROOT, Node

REFUSE = "sync-refuse"
ASYNC = "sync-async"
TIMEOUT_MS = 1500
SYNC_CONFIG = {"mirror.sync.enable": "true", "mirror.sync.timeout.ms": str(TIMEOUT_MS)}
ROUNDS = int(os.environ.get("KMIRROR_SYNC_ROUNDS", "3"))


def _in_sync(src: Node, topic: str) -> float:
    return total(scrape(src), "kmirror_mirror_sync_in_sync_mirrors", topic=topic)


def _produce_one(bootstrap: str, topic: str, value: bytes) -> tuple[Any, Any, float]:
    """One acks=all record, no retries: (error or None, the message, seconds to the answer)."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "retries": 0,
            "linger.ms": 0,
            "request.timeout.ms": 30000,
            "message.timeout.ms": 60000,
        }
    )
    out: list[tuple[Any, Any]] = []
    start = time.monotonic()
    p.produce(topic, value=value, partition=0, on_delivery=lambda e, m: out.append((e, m)))
    assert p.flush(60) == 0
    return out[0][0], out[0][1], time.monotonic() - start


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Node]]:
    base = tmp_path_factory.mktemp("mirror-sync")
    src, dst = Node(base / "src"), Node(base / "dst")
    with running(src, dst):
        create_topic(src.bootstrap, REFUSE, 1, SYNC_CONFIG)
        create_topic(src.bootstrap, ASYNC, 1, {**SYNC_CONFIG, "mirror.sync.on.timeout": "async"})
        create_mirror(dst, "dr", write_mirror_config(base / "m.properties", src.bootstrap))
        for topic in (REFUSE, ASYNC):
            mirror_tool(dst, "--add", "--topic", topic, "--mirror", "dr")
        for topic in (REFUSE, ASYNC):
            wait_for(lambda t=topic: _in_sync(src, t) == 1, 30, f"the mirror in sync for {topic}")
        yield src, dst


def test_an_acknowledged_record_is_already_committed_on_the_destination(
    pair: tuple[Node, Node],
) -> None:
    src, dst = pair
    for i in range(20):
        err, msg, _ = _produce_one(src.bootstrap, REFUSE, b"now-%d" % i)
        assert err is None, err
        # read at once, no waiting: the answer came after the destination's commit
        assert end_offsets(dst.bootstrap, REFUSE, 1)[0] >= msg.offset() + 1, (i, msg.offset())
    s = scrape(src)
    assert total(s, "kmirror_mirror_sync_wait_seconds_count") >= 20
    assert total(s, "kmirror_mirror_sync_degraded", topic=REFUSE) == 0


def test_bad_sync_config_values_are_refused_by_kafka_configs(pair: tuple[Node, Node]) -> None:
    src, _ = pair
    tool = str(ROOT / "bin" / "kafka-configs.sh")
    for entry, message in [
        ("mirror.sync.on.timeout=drop", "mirror.sync.on.timeout"),
        ("mirror.sync.timeout.ms=0", "mirror.sync.timeout.ms"),
        ("mirror.sync.enable=maybe", "mirror.sync.enable"),
    ]:
        p = subprocess.run(
            [
                *(tool, "--bootstrap-server", src.bootstrap, "--alter"),
                *("--entity-type", "topics", "--entity-name", REFUSE, "--add-config", entry),
            ],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode != 0 and message in p.stdout + p.stderr, (entry, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr


def test_a_mirror_without_the_signal_is_named(pair: tuple[Node, Node]) -> None:
    """A fetcher whose client id is a KIP-1279 mirror's but which sends no sync signal (its
    destination is not kmirror; here librdkafka plays it): the source names it and the topic."""
    src, _ = pair
    c = Consumer(
        {
            "bootstrap.servers": src.bootstrap,
            "group.id": "foreign",
            "client.id": "broker-7-fetcher-0-mirror-elsewhere",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(REFUSE, 0, 0)])
        deadline = time.monotonic() + 20
        while (
            time.monotonic() < deadline
            and total(scrape(src), "kmirror_mirror_sync_foreign_mirrors") < 1
        ):
            c.poll(0.2)
    finally:
        c.close()
    assert total(scrape(src), "kmirror_mirror_sync_foreign_mirrors") == 1
    log = src.output.read_text(errors="replace")
    assert "mirror elsewhere" in log and f"fetches {REFUSE}" in log
    assert _in_sync(src, REFUSE) == 1  # the real mirror still counts


def test_destination_down_refuse_and_async_policies(pair: tuple[Node, Node]) -> None:
    src, dst = pair
    dst.kill()
    # refuse: NOT_ENOUGH_REPLICAS_AFTER_APPEND once mirror.sync.timeout.ms ran out
    err, _, took = _produce_one(src.bootstrap, REFUSE, b"refused")
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, err
    assert took >= TIMEOUT_MS / 1000 * 0.9, took
    # async: the first answer after the timeout, degraded; then at once, with one WARN
    err, _, took = _produce_one(src.bootstrap, ASYNC, b"degrading")
    assert err is None and took >= TIMEOUT_MS / 1000 * 0.9, (err, took)
    assert total(scrape(src), "kmirror_mirror_sync_degraded", topic=ASYNC) == 1
    for i in range(5):
        err, _, took = _produce_one(src.bootstrap, ASYNC, b"async-%d" % i)
        assert err is None and took < TIMEOUT_MS / 1000 * 0.5, (err, took)
    log = src.output.read_text(errors="replace")
    assert log.count(f"mirror.sync: {ASYNC}-0 degraded to asynchronous") == 1
    # the destination comes back, catches up: synchronous again
    dst.start()
    wait_for(
        lambda: total(scrape(src), "kmirror_mirror_sync_degraded", topic=ASYNC) == 0,
        60,
        "the async partition back to synchronous",
        step=0.2,
        detail=lambda: src.log_tail(),
    )
    s = scrape(src)
    assert total(s, "kmirror_mirror_sync_degraded_seconds_total", topic=ASYNC) > 1.0
    assert f"mirror.sync: {ASYNC}-0 back to synchronous" in src.output.read_text(errors="replace")
    for topic in (ASYNC, REFUSE):
        wait_for(lambda t=topic: _in_sync(src, t) == 1, 30, f"{topic} in sync again")
        err, msg, _ = _produce_one(src.bootstrap, topic, b"sync-again")
        assert err is None, (topic, err)
        assert end_offsets(dst.bootstrap, topic, 1)[0] >= msg.offset() + 1, topic


# --- kill -9 of the source at a random moment: nothing acknowledged is lost ----------------------


def _read_all(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    """Every record of ``topic`` up to its end offsets now (the last offsets may be control
    batches: the failover's MIRROR_PID_RESET)."""
    ends = end_offsets(bootstrap, topic, partitions)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    got: dict[tuple[int, int], bytes] = {}
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            tp.offset < ends[tp.partition] for tp in c.position(tps)
        ):
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    got[(m.partition(), m.offset())] = m.value()
    finally:
        c.close()
    return got


def _one_round(base: Path, dst: Node, r: int, rng: random.Random) -> tuple[int, int]:
    """A fresh source, a sync topic mirrored to ``dst``, a steady acks=all producer, kill -9 of
    the source after a random time, failover: (records acknowledged, records on the
    destination)."""
    topic, mirror, partitions = f"pay-{r}", f"dr{r}", 2
    src = Node(base / f"src{r}")
    with running(src):
        create_topic(src.bootstrap, topic, partitions, {"mirror.sync.enable": "true"})
        props = write_mirror_config(base / f"m{r}.properties", src.bootstrap)
        create_mirror(dst, mirror, props, topic)
        wait_for(lambda: _in_sync(src, topic) == partitions, 30, f"round {r}: the mirror in sync")
        acked: list[tuple[int, int, bytes]] = []
        p = Producer(
            {
                "bootstrap.servers": src.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 30000,
            }
        )

        def report(err: Any, m: Any) -> None:
            if err is None:
                acked.append((m.partition(), m.offset(), m.value()))

        kill_after = rng.uniform(0.2, 2.0)  # after the first acknowledgement
        start = time.monotonic()
        first: float | None = None
        i = 0
        # ~500 records/s; the kill comes ``kill_after`` into the acknowledgements (a loaded
        # machine may take a while to answer the first)
        while first is None or time.monotonic() - first < kill_after:
            assert time.monotonic() - start < 60, f"round {r}: nothing acknowledged in 60 s"
            p.produce(topic, key=b"k%d" % i, value=b"r%d-%06d" % (r, i), on_delivery=report)
            p.poll(0)
            if first is None and acked:
                first = time.monotonic()
            i += 1
            time.sleep(0.002)
        src.kill()  # kill -9 of the whole source cluster, mid-stream
        p.purge(in_queue=True, in_flight=True)
        p.flush(1)  # the acknowledgements already received are reported
        del p
    mirror_tool(dst, "--remove", "--topic", topic, "--mirror", mirror)
    wait_for(
        lambda: (
            f" {topic} " not in mirror_tool(dst, "--describe", "--mirror", mirror)
            or "STOPPED" in mirror_tool(dst, "--describe", "--mirror", mirror)
        ),
        60,
        f"round {r}: failover of {topic}",
        step=0.2,
    )
    got = _read_all(dst.bootstrap, topic, partitions)
    missing = [(pt, off) for pt, off, v in acked if got.get((pt, off)) != v]
    assert not missing, (
        f"round {r}: {len(missing)} of {len(acked)} acknowledged records are not on the "
        f"destination after failover, e.g. {missing[:5]}"
    )
    assert acked, f"round {r}: nothing acknowledged"
    run_mirror_tool(dst, "--delete", "--mirror", mirror)  # its source is gone; best effort
    return len(acked), len(got)


@pytest.mark.timeout(120 + 60 * ROUNDS)  # a round takes 15-25 s on a loaded machine
def test_kill_source_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    rounds = ROUNDS
    seed = int(os.environ.get("KMIRROR_SYNC_SEED", str(random.randrange(1 << 30))))
    print(f"sync failover rounds: {rounds}, seed {seed}")
    rng = random.Random(seed)
    dst = Node(tmp_path / "dst")
    with running(dst):
        for r in range(rounds):
            acked, present = _one_round(tmp_path, dst, r, rng)
            print(f"round {r}: {acked} acknowledged, {present} on the destination")
