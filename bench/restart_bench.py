"""Restart time after a kill -9, against the size of the log.

Run with ``python -m bench.restart_bench`` (about two minutes); ``--table`` runs issue 31's
table instead (1/10/30 GiB, 10,000 partitions, a follower on three nodes; see restart_table). One node with stock log settings
(1 GiB segments, no flush.ms)
and 16 KiB producer batches (the Java client's default) and 50 ``__consumer_offsets`` partitions. For each of --sizes
(cumulative MiB of data), it writes up to that size with an idempotent producer into --partitions
partitions, commits consumer offsets --commits times (one group, every partition each time),
kill -9s the node, starts it again and prints:

- ``metadata``: seconds from launching the process until it answers Metadata;
- ``offsets``: seconds from launch until ``Consumer.committed`` returns the committed offsets
  (OffsetFetch succeeds: the group's coordinator shard is loaded);
- the node's own "producer state rebuilt" / "loaded" log lines are summarised (batches replayed).

Before the kill, one recovery checkpoint (``log.flush.offset.checkpoint.interval.ms``, set to
--checkpoint-ms) is let pass and then --tail MiB more are written: a crash at a random moment,
with the last interval's writes not yet checkpointed. ``--checkpoint-ms 0`` keeps the node's
default (60 s) and kills right after writing. The goal is a restart time that does not grow
with the log.

On a 2-core VM (best of noisy runs; 8 partitions, 50 offsets partitions, 16 MiB tail), seconds
until Metadata / committed offsets after the kill, at 64 / 256 / 512 MiB written:

    before (recovery point only at rolls, no snapshot but at rolls): 2.43/2.50, 2.93/3.00,
        3.51/3.58; 4676 / 18088 / 35868 batches replayed
    after (recovery checkpoints, resumed segment recovery, sparse index reads): 1.47/1.53,
        1.13/1.19, 1.44/1.50; 1396 batches replayed each time (the tail)
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.integration.node import Node

from . import restart_table

MiB = 1 << 20
TOPIC = "restart-bench"
GROUP = "restart-bench-group"
RECORD = 1024


def _produce(bootstrap: str, partitions: int, mib: int) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": "none",
            "batch.size": 16384,  # the Java client's default: many small batches
        }
    )
    value = os.urandom(RECORD)
    count = mib * MiB // RECORD
    start = time.monotonic()
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise RuntimeError("produce did not finish")
    return time.monotonic() - start


def _commit(bootstrap: str, partitions: int, commits: int, base: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
    )
    try:
        for n in range(commits):
            offsets = [TopicPartition(TOPIC, p, base + n) for p in range(partitions)]
            consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def _answers_metadata(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        md = admin.list_topics(timeout=0.5)
    except Exception:
        return False
    return TOPIC in md.topics


def _committed(bootstrap: str, partitions: int, expected: int) -> bool:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "log_level": 0})
    try:
        got = consumer.committed([TopicPartition(TOPIC, p) for p in range(partitions)], timeout=1)
    except KafkaException:
        return False
    finally:
        consumer.close()
    return all(tp.error is None and tp.offset == expected for tp in got)


def _restart(node: Node, partitions: int, expected: int, timeout: float) -> tuple[float, float]:
    node.kill()
    start = time.monotonic()
    node.launch()
    deadline = start + timeout
    metadata = offsets = -1.0
    while time.monotonic() < deadline:
        if metadata < 0 and _answers_metadata(node.bootstrap):
            metadata = time.monotonic() - start
        if metadata >= 0 and _committed(node.bootstrap, partitions, expected):
            offsets = time.monotonic() - start
            break
        time.sleep(0.02)
    return metadata, offsets


def _replayed(node: Node, since: int) -> str:
    text = node.output.read_bytes()[since:].decode(errors="replace")
    batches = 0
    for line in text.splitlines():
        if "producer state rebuilt from" in line:
            batches += int(line.split("rebuilt from ")[1].split()[0])
    return f"{batches} batches replayed"


def _data_bytes(node: Node) -> int:
    total = 0
    for path in node.log_dir.rglob("*.log"):
        total += path.stat().st_size
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="64,256,512", help="cumulative MiB per step")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--commits", type=int, default=300, help="offset commits per step")
    parser.add_argument(
        "--checkpoint-ms",
        type=int,
        default=3000,
        help="log.flush.offset.checkpoint.interval.ms; 0: the node's default, no wait",
    )
    parser.add_argument(
        "--tail", type=int, default=16, help="MiB written after the checkpoint, before the kill"
    )
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    restart_table.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.table:
        restart_table.run_table(args)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="restart-bench-"))
    extra = {}
    if args.checkpoint_ms:
        extra["log.flush.offset.checkpoint.interval.ms"] = str(args.checkpoint_ms)
    node = Node(
        workdir,
        offsets__topic__num__partitions="50",
        num__partitions=str(args.partitions),
    )
    node.settings.update(extra)
    node.start()
    rows: list[tuple[Any, ...]] = []
    try:
        written = 0
        commits = 0
        for size in sizes:
            took = _produce(node.bootstrap, args.partitions, size - written - args.tail)
            if args.checkpoint_ms:  # let one recovery checkpoint pass, then write the tail
                time.sleep(args.checkpoint_ms / 1000 + 1.5)
            took += _produce(node.bootstrap, args.partitions, args.tail)
            written = size
            _commit(node.bootstrap, args.partitions, args.commits, commits)
            commits += args.commits
            since = node.output.stat().st_size
            metadata, offsets = _restart(node, args.partitions, commits - 1, args.timeout)
            rows.append(
                (size, _data_bytes(node) / MiB, took, metadata, offsets, _replayed(node, since))
            )
            print(
                f"{size:>6} MiB written ({rows[-1][1]:.0f} MiB on disk, produced in "
                f"{took:.1f}s): metadata {metadata:.2f}s, committed offsets {offsets:.2f}s, "
                f"{rows[-1][5]}",
                flush=True,
            )
    finally:
        node.kill()
        if args.keep:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{'written MiB':>11} {'on disk':>8} {'metadata s':>11} {'offsets s':>10}  replay")
    for size, disk, _took, metadata, offsets, replay in rows:
        print(f"{size:>11} {disk:>8.0f} {metadata:>11.2f} {offsets:>10.2f}  {replay}")
    if args.json:
        keys = ("written_mib", "disk_mib", "produce_s", "metadata_s", "offsets_s", "replay")
        args.json.write_text(json.dumps([dict(zip(keys, row, strict=True)) for row in rows]))


if __name__ == "__main__":
    main()
