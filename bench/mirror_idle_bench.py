"""What idle mirroring costs: many mirrored partitions with nothing new at the source, one run.

    python -m bench.mirror_idle_bench [--partitions 10000] [--per-topic 100] [--idle-s 20]
                                      [--settle-s 65]

A kmirror source node with ``--partitions`` partitions (topics of ``--per-topic``, created with
one CreateTopics by a stock client, one record each) and a one-node kmirror destination
mirroring all of them (``kafka-mirrors.sh --add --topic 'idle-.*'``). Once every partition's
record is at the destination and ``--settle-s`` seconds more have passed (the first recovery
checkpoint of every new partition is one-off work), both nodes' CPU is measured over
``--idle-s`` seconds of nothing
to mirror (issue 18's goal: under 15% of a core on the destination for 10,000 partitions), with
the destination's descriptors and RSS per partition.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.scale_bench import _admin, _cpu_s, _fds, _rss_kib
from tests.integration.mirror_helpers import mirror_tool, write_mirror_config
from tests.integration.node import Node

MIRROR = "idle"


def _create(bootstrap: str, topics: int, per_topic: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # kept: its futures fail once it is destroyed
    futures = admin.create_topics(
        [NewTopic(f"idle-{i}", per_topic, 1) for i in range(topics)],
        request_timeout=600,
        operation_timeout=600,
    )
    for fut in futures.values():
        fut.result(600)


def _fill(bootstrap: str, topics: int, per_topic: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0})
    for t in range(topics):
        for part in range(per_topic):
            p.produce(f"idle-{t}", b"x" * 100, partition=part)
        p.poll(0)
    if p.flush(300):
        raise SystemExit("the source did not take every record")


def _mirrored(bootstrap: str, topics: int, per_topic: int) -> int:
    """Partitions whose record is at the destination (high watermark 1)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "idle-probe", "log_level": 0})
    done = 0
    try:
        for t in range(topics):
            for part in range(per_topic):
                try:
                    _lo, hi = c.get_watermark_offsets(TopicPartition(f"idle-{t}", part), timeout=5)
                except Exception:
                    return done
                if hi < 1:
                    return done
                done += 1
    finally:
        c.close()
    return done


def run(
    partitions: int, per_topic: int, idle_s: float, settle_s: float, workdir: Path
) -> dict[str, float]:
    topics = max(1, partitions // per_topic)
    partitions = topics * per_topic
    src = Node(workdir / "src").start()
    dst = Node(workdir / "dst").start()
    try:
        _create(src.bootstrap, topics, per_topic)
        _fill(src.bootstrap, topics, per_topic)
        config = write_mirror_config(workdir / "m.properties", src.bootstrap)
        mirror_tool(dst, "--create", "--mirror", MIRROR, "--mirror-config", str(config))
        t0 = time.monotonic()
        mirror_tool(dst, "--add", "--topic", "idle-.*", "--mirror", MIRROR)
        deadline = t0 + 900
        while _mirrored(dst.bootstrap, topics, per_topic) < partitions:
            if time.monotonic() > deadline:
                raise SystemExit("the mirror did not catch up within 900 s")
            time.sleep(2)
        caught_up = time.monotonic() - t0
        # past the catch-up's work: the first recovery checkpoint of every new partition
        # (log.flush.offset.checkpoint.interval.ms, 60 s) is a one-off, not idle cost
        time.sleep(settle_s)
        assert src.proc is not None and dst.proc is not None
        dpid, spid = dst.proc.pid, src.proc.pid
        d0, s0, w0 = _cpu_s(dpid), _cpu_s(spid), time.monotonic()
        time.sleep(idle_s)
        wall = time.monotonic() - w0
        return {
            "partitions": partitions,
            "caught_up_s": caught_up,
            "dst_idle_cpu": (_cpu_s(dpid) - d0) / wall,
            "src_idle_cpu": (_cpu_s(spid) - s0) / wall,
            "dst_fds_per_partition": _fds(dpid) / partitions,
            "dst_rss_kib_per_partition": _rss_kib(dpid) / partitions,
        }
    finally:
        dst.kill()
        src.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--idle-s", type=float, default=20)
    ap.add_argument("--settle-s", type=float, default=65)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="kmirror-idle-bench-"))
    try:
        r = run(args.partitions, args.per_topic, args.idle_s, args.settle_s, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"{r['partitions']} idle mirrored partitions (one kmirror source node, one destination)\n"
        f"  caught up         {r['caught_up_s']:.1f} s after --add\n"
        f"  destination CPU   {r['dst_idle_cpu'] * 100:.1f}% of a core (goal < 15%)\n"
        f"  source CPU        {r['src_idle_cpu'] * 100:.1f}% of a core\n"
        f"  destination fds   {r['dst_fds_per_partition']:.2f} per partition, RSS "
        f"{r['dst_rss_kib_per_partition']:.1f} KiB per partition"
    )
    if args.json:
        args.json.write_text(json.dumps(r))


if __name__ == "__main__":
    main()
