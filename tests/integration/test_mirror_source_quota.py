"""A source with a client quota on the mirror's fetchers: the source answers their Fetches with
throttle_time_ms and mutes them (KIP-219); the destination's fetchers wait that long before
fetching again (kafka_server_mirror_source_throttled_seconds), and the mirror still catches up,
no faster than the quota."""

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .clients import create_topic
from .mirror_helpers import create_mirror, running, scrape, total, wait_caught_up
from .mirror_helpers import write_mirror_config as mirror_config
from .node import ROOT, Node

TOPIC = "quota-src"
RATE = 300_000  # bytes/s, the source's consumer_byte_rate for every client id
BYTES = 1_500_000


@pytest.fixture()
def pair(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    src = Node(tmp_path / "src", quota__window__num="3")
    dst = Node(tmp_path / "dst", node_id=4, mirror__metadata__refresh__interval__ms="500")
    with running(src, dst):
        yield src, dst


def test_fetchers_wait_out_the_source_throttle(pair: tuple[Node, Node], tmp_path: Path) -> None:
    src, dst = pair
    create_topic(src.bootstrap, TOPIC, 1)
    p = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 20, "batch.size": 16384})
    for _ in range(BYTES // 1024):
        p.produce(TOPIC, os.urandom(1024))  # incompressible
    assert p.flush(30) == 0
    done = subprocess.run(
        [str(ROOT / "bin" / "kafka-configs.sh"), "--bootstrap-server", src.bootstrap,
         "--alter", "--entity-type", "clients", "--entity-default",
         "--add-config", f"consumer_byte_rate={RATE}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    start = time.monotonic()
    create_mirror(dst, "qm", mirror_config(tmp_path / "mirror.properties", src.bootstrap), TOPIC)
    wait_caught_up(src.bootstrap, dst.bootstrap, TOPIC, 1, "the mirror", timeout=90)
    elapsed = time.monotonic() - start
    waited = total(scrape(dst), "kafka_server_mirror_source_throttled_seconds_total", mirror="qm")
    print(f"mirrored {BYTES} B at a source quota of {RATE} B/s in {elapsed:.1f} s, "
          f"fetchers waited {waited:.1f} s")  # fmt: skip
    assert waited > 0.5
    # (windows - 1) seconds of the quota come at once, the rest at the quota; margin for load
    assert elapsed >= 0.6 * (BYTES - 2 * RATE) / RATE
