"""``__consumer_offsets`` under a long run of commits: the cleaner keeps it small, and a restart
reloads every group's offsets quickly.

GROUPS groups commit COMMITS times each (round after round, every group once per round, with
1000 bytes of metadata so the topic rolls many 1 MiB segments), through confluent-kafka's
AdminClient (AlterConsumerGroupOffsets: an OffsetCommit per group, as a consumer sends). Bounds,
with P = offsets.topic.num.partitions (4) and S = offsets.topic.segment.bytes (1 MiB):

* while the commits run, the ``.log`` files of ``__consumer_offsets`` stay under P * 3 * S: per
  partition the active segment, one closed segment waiting for the cleaner, and the cleaned
  rest (one record per group);
* once the cleaner caught up, under P * S + 2 * the live data (one record per group): only the
  active segments, which are never cleaned, hold more than the latest commits;
* after a clean restart, every group's last commit is served within RELOAD_BOUND_S of the
  node's start (the coordinator replays the compacted partitions).

CI runs 200 groups x 200 commits (~44 MB of commits); KMIRROR_SOAK_GROUPS and
KMIRROR_SOAK_COMMITS set a longer run (1000 x 1000 is ~1.1 GB, several minutes).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from .clients import create_topic, wait_for
from .node import Node

GROUPS = int(os.environ.get("KMIRROR_SOAK_GROUPS", 200))
COMMITS = int(os.environ.get("KMIRROR_SOAK_COMMITS", 200))
PARTITIONS = 4
SEGMENT = 1 << 20
META = 1000
TOPIC = "soaked"
RELOAD_BOUND_S = 10.0
IN_FLIGHT = 200  # commits awaited together


@pytest.fixture
def soak_node(tmp_path: Path) -> Iterator[Node]:
    n = Node(
        tmp_path / "node1",
        log__cleaner__backoff__ms="200",
        offsets__topic__segment__bytes=str(SEGMENT),
        offsets__topic__num__partitions=str(PARTITIONS),
    )
    n.start()
    yield n
    n.kill()


def offsets_size(node: Node) -> int:
    total = 0
    for p in node.log_dir.glob("__consumer_offsets-*/*.log"):
        with contextlib.suppress(FileNotFoundError):  # swapped out by the cleaner meanwhile
            total += p.stat().st_size
    return total


def meta(group: int, round_: int) -> str:
    return f"g{group}-r{round_}-".ljust(META, "m")


def commit_rounds(node: Node) -> int:
    """Every group commits once per round; returns the largest size seen meanwhile."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    largest = 0
    pending: list[Any] = []
    for r in range(1, COMMITS + 1):
        for g in range(GROUPS):
            tp = TopicPartition(TOPIC, g % 3, r, meta(g, r))
            request = ConsumerGroupTopicPartitions(f"group-{g}", [tp])
            pending.extend(admin.alter_consumer_group_offsets([request]).values())
            if len(pending) >= IN_FLIGHT:
                for f in pending:
                    f.result(30)
                pending.clear()
        largest = max(largest, offsets_size(node))
    for f in pending:
        f.result(30)
    return largest


def all_reloaded(admin: AdminClient) -> bool:
    """Every group's committed offset is its last commit."""
    futures = [
        admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(f"group-{g}", [TopicPartition(TOPIC, g % 3)])]
        )
        for g in range(GROUPS)
    ]
    for g, fs in enumerate(futures):
        (f,) = fs.values()
        try:
            (tp,) = f.result(10).topic_partitions
        except Exception:
            return False  # the coordinator is still loading
        if (tp.offset, tp.metadata) != (COMMITS, meta(g, COMMITS)):
            return False
    return True


def test_consumer_offsets_stay_small_and_reload_fast(soak_node: Node) -> None:
    node = soak_node
    create_topic(node.bootstrap, TOPIC, partitions=3)
    started = time.monotonic()
    largest = commit_rounds(node)
    soak_s = time.monotonic() - started
    live = GROUPS * (META + 150)  # one commit record per group, with its key and headers
    running_bound = PARTITIONS * 3 * SEGMENT + live
    settled_bound = PARTITIONS * SEGMENT + 2 * live
    written = GROUPS * COMMITS * (META + 150)
    print(
        f"{GROUPS} groups x {COMMITS} commits (~{written / 1e6:.0f} MB) in {soak_s:.1f} s;"
        f" __consumer_offsets at most {largest / 1e6:.2f} MB (bound {running_bound / 1e6:.2f})"
    )
    assert largest <= running_bound
    wait_for(
        lambda: offsets_size(node) <= settled_bound,
        60,
        f"__consumer_offsets under {settled_bound} bytes",
        step=0.2,
        detail=lambda: f"now {offsets_size(node)} bytes",
    )
    settled = offsets_size(node)

    assert node.stop() == 0
    restart = time.monotonic()
    node.start()
    listening = time.monotonic() - restart
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    wait_for(
        lambda: all_reloaded(admin),
        60,
        "every group's last commit after the restart",
        step=0.1,
    )
    reload_s = time.monotonic() - restart
    print(
        f"settled at {settled / 1e6:.2f} MB (bound {settled_bound / 1e6:.2f}); restart:"
        f" listening after {listening:.1f} s, every group's offsets after {reload_s:.1f} s"
        f" (bound {RELOAD_BOUND_S} s)"
    )
    assert reload_s < RELOAD_BOUND_S
