"""Active-active by prefix (issue 30 item 2): two single-node kmirror clusters, ``east`` and
``west``, both take writes to ``orders`` and mirror each other with a prefix (``east.`` on west,
``west.`` on east) and the pattern ``.*``, which also matches the other side's mirror topic: the
origin chain (``mirror.source.cluster.ids``) keeps either from copying its own records back.
A group on west reads ``orders`` and ``east.orders`` and sees every record once; east's group
``g`` is synced to west as ``east.g``; east is killed -9, ``east.orders`` failed over on west,
and ``east.g`` resumes there from the synced offset, losing nothing. Stock confluent-kafka
clients; kafka-mirrors.sh's main() for the mirror commands.
"""

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from .clients import create_topic, wait_for
from .mirror_helpers import (
    end_offsets,
    mirror_tool,
    run_mirror_tool,
    running,
    scrape,
    total,
    write_mirror_config,
)
from .node import Node

REFRESH_MS = 500
N = 200  # records each side writes to its own orders
CONSUMED_BEFORE_SYNC = 120  # east's group commits this far, and we wait until west has it
CONSUMED_AFTER_SYNC = 30  # then commits this much more just before east dies


def _produce(bootstrap: str, topic: str, tag: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[object] = []
    for i in range(n):
        p.produce(topic, value=f"{tag}-{i:05d}".encode(), on_delivery=lambda e, m: errors.append(e) if e else None)  # fmt: skip
    assert p.flush(20) == 0 and not errors, errors


def _topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).topics)


def _consume(bootstrap: str, group: str, topics: list[str], want: int, timeout: float) -> list[str]:
    """Up to ``want`` values of ``topics`` read by ``group``, committing each (bounded by time)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    got: list[str] = []
    try:
        c.subscribe(topics)
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(msg.value().decode())
            c.commit(msg, asynchronous=False)
    finally:
        c.close()
    return got


def _committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=5)
        return int(tp.offset)
    finally:
        c.close()


def test_active_active_by_prefix_no_loop_and_group_failover(tmp_path: Path) -> None:
    east = Node(tmp_path / "east", mirror__metadata__refresh__interval__ms=str(REFRESH_MS))
    west = Node(tmp_path / "west", mirror__metadata__refresh__interval__ms=str(REFRESH_MS))
    with running(east, west):
        for node in (east, west):
            create_topic(node.bootstrap, "orders", 1)
        _produce(east.bootstrap, "orders", "east", N)
        _produce(west.bootstrap, "orders", "west", N)

        # each mirrors the other with a prefix and a pattern that also matches the other's
        # mirror topic once it exists
        on_west = write_mirror_config(
            tmp_path / "from-east.properties",
            east.bootstrap,
            "mirror.topic.prefix=east.",
            "mirror.group.prefix.enable=true",
        )
        on_east = write_mirror_config(
            tmp_path / "from-west.properties", west.bootstrap, "mirror.topic.prefix=west."
        )
        mirror_tool(west, "--create", "--mirror", "from-east", "--mirror-config", str(on_west))
        out = mirror_tool(west, "--add", "--topic", ".*", "--mirror", "from-east")
        assert "east.orders" in out
        mirror_tool(east, "--create", "--mirror", "from-west", "--mirror-config", str(on_east))
        # west now has orders and east.orders: the pattern takes orders only (east.orders is a
        # mirror of east itself)
        out = mirror_tool(east, "--add", "--topic", ".*", "--mirror", "from-west")
        assert "west.orders" in out and "east.orders" not in out, out

        wait_for(
            lambda: (
                end_offsets(west.bootstrap, "east.orders", 1, missing_ok=True) == {0: N}
                and end_offsets(east.bootstrap, "west.orders", 1, missing_ok=True) == {0: N}
            ),
            30,
            "both prefixed mirror topics caught up",
        )
        # several refreshes of both sides: neither copies the other's mirror topic back
        time.sleep(6 * REFRESH_MS / 1000)
        assert _topics(west.bootstrap) - {"__consumer_offsets", "__mirror_state"} == {
            "orders",
            "east.orders",
        }
        assert _topics(east.bootstrap) - {"__consumer_offsets", "__mirror_state"} == {
            "orders",
            "west.orders",
        }
        # each side's metadata sync saw the other's mirror topic and passed over it (counted
        # as a "loop" skip), and never tried to create it (no topic_discovery error)
        for node, mirror in ((west, "from-east"), (east, "from-west")):
            samples = scrape(node)
            skipped = "kafka_server_mirror_metadata_sync_skipped_total"
            errors = "kafka_server_mirror_metadata_sync_errors_total"
            assert total(samples, skipped, mirror=mirror, kind="loop") > 0, mirror
            assert total(samples, errors, mirror=mirror, kind="topic_discovery") == 0, mirror
        # describe shows both names, and the origin chain names east on west's copy
        described = mirror_tool(west, "--describe", "--mirror", "from-east")
        row = next(line.split() for line in described.splitlines() if " east.orders " in line)
        assert row[1] == "east.orders" and row[-1] == "orders", described
        admin = AdminClient({"bootstrap.servers": west.bootstrap})
        res = ConfigResource(ConfigResource.Type.TOPIC, "east.orders")
        chain = admin.describe_configs([res])[res].result(10)["mirror.source.cluster.ids"].value
        assert chain == east.cluster_id

        # a group on west reading its orders and east's sees every record exactly once
        seen = _consume(west.bootstrap, "g-west", ["orders", "east.orders"], 2 * N + 5, 30)
        expected = {f"east-{i:05d}" for i in range(N)} | {f"west-{i:05d}" for i in range(N)}
        assert len(seen) == 2 * N and set(seen) == expected

        # east's group g reads part of east's orders; its offset reaches west as east.g
        first = _consume(east.bootstrap, "g", ["orders"], CONSUMED_BEFORE_SYNC, 30)
        assert len(first) == CONSUMED_BEFORE_SYNC
        wait_for(
            lambda: _committed(west.bootstrap, "east.g", "east.orders") == CONSUMED_BEFORE_SYNC,
            30,
            "east's group offset synced to west under the prefixed group and topic",
        )
        assert _committed(west.bootstrap, "g", "east.orders") < 0  # no unprefixed copy
        # g goes on at east (these commits may or may not reach west), then east dies
        more = _consume(east.bootstrap, "g", ["orders"], CONSUMED_AFTER_SYNC, 30)
        assert len(more) == CONSUMED_AFTER_SYNC
        east.kill()

        # failover on west takes the destination name
        mirror_tool(west, "--remove", "--topic", "east.orders", "--mirror", "from-east")
        p = Producer({"bootstrap.servers": west.bootstrap, "acks": "all"})
        wrote: list[object] = []

        def writable() -> bool:
            p.produce("east.orders", value=b"after-failover", on_delivery=lambda e, m: wrote.append(e))  # fmt: skip
            p.flush(5)
            return bool(wrote) and wrote[-1] is None

        wait_for(writable, 30, "east.orders writable on west after failover")

        # g moves to west as east.g: from the synced offset, nothing lost
        resumed = _consume(west.bootstrap, "east.g", ["east.orders"], N + 5, 20)
        resumed_east = [v for v in resumed if v.startswith("east-")]
        consumed_at_east = first + more
        assert set(consumed_at_east) | set(resumed_east) == {f"east-{i:05d}" for i in range(N)}
        # duplicates: at most what g consumed at east after the last sync we saw
        duplicates = set(consumed_at_east) & set(resumed_east)
        assert len(duplicates) <= CONSUMED_AFTER_SYNC, len(duplicates)
        assert len(resumed_east) == len(set(resumed_east))
        assert "after-failover" in resumed

        # bad input, named: the prefix is fixed once the mirror exists
        rc, _out, err = run_mirror_tool(
            west,
            "--alter",
            "--mirror",
            "from-east",
            "--mirror-config",
            str(
                write_mirror_config(
                    tmp_path / "alter.properties", east.bootstrap, "mirror.topic.prefix=x."
                )
            ),
        )
        assert rc == 1 and "mirror.topic.prefix" in err and "from-east" in err, err
