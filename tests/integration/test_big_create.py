"""A CreateTopics of many partitions on a serving node: the first logs open with the metadata
change, the rest in slices of the event loop's time (the node's log says so), so the loop never
stalls for the whole batch; a stock producer writes to every partition and a consumer reads
every record back."""

from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic

from tests.waits import wait_for

from .clients import admin
from .node import Node

PARTITIONS = 600


def test_a_big_topic_opens_in_the_background_and_takes_writes(tmp_path: Path) -> None:
    node = Node(tmp_path / "n").start()
    try:
        a = admin(node.bootstrap)
        a.create_topics([NewTopic("big", PARTITIONS, 1)])["big"].result(60)
        wait_for(
            lambda: "partition logs in" in node.output.read_text(errors="replace"),
            60,
            what="the background opening to end",
        )
        log = node.output.read_text(errors="replace")
        assert "new partition logs in the background" in log
        errors: list[str] = []
        p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(PARTITIONS):
            p.produce(
                "big",
                value=str(i).encode(),
                partition=i,
                on_delivery=lambda err, _m: errors.append(str(err)) if err else None,
            )
        assert p.flush(60) == 0 and errors == []
        c = Consumer(
            {
                "bootstrap.servers": node.bootstrap,
                "group.id": "big",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe(["big"])
        seen: set[int] = set()

        def all_read() -> bool:
            for m in c.consume(500, timeout=0.5):
                assert not m.error(), m.error()
                seen.add(int(m.value() or b"-1"))
            return len(seen) == PARTITIONS

        try:
            wait_for(all_read, 60, what=f"{PARTITIONS} records", step=0)
        finally:
            c.close()
        assert seen == set(range(PARTITIONS))
    finally:
        node.stop()
