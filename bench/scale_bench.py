"""One node holding many partitions: what each costs at rest and how fast the node creates,
serves and restarts them (issue 18's scale figures), one run.

    python -m bench.scale_bench [--partitions 10000] [--per-topic 100] [--idle-s 10]
                                [--json FILE]

A single kmirror node (stock settings, one log dir) gets ``--partitions`` partitions as topics
of ``--per-topic`` partitions, created with one CreateTopics by a stock client
(confluent-kafka's AdminClient). Then it prints:

- ``create``: seconds for the CreateTopics and the opening of every new log (most of them
  open in the background after the answer), and partitions per second;
- ``fds/partition`` and ``RSS KiB/partition`` at rest (from /proc, minus the empty node's);
- ``idle CPU``: the node's share of one core over ``--idle-s`` seconds with nothing to do;
- ``metadata``: a Metadata request for every topic, median of 5 (ms);
- ``produce p50/p99``: 300 sequential acks=all records to one partition, each awaited (ms);
- ``restart``: kill -9, then seconds until the node answers Metadata for every topic.

The failover of many mirrored partitions has its own bench: ``bench.mirror_failover_bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.integration.node import Node

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE // 1024


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def _create(bootstrap: str, topics: int, per_topic: int) -> float:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    start = time.monotonic()
    futures = admin.create_topics(
        [NewTopic(f"scale-{i}", per_topic, 1) for i in range(topics)],
        request_timeout=600,
        operation_timeout=600,
    )
    for name, fut in futures.items():
        fut.result(600)  # raises, naming the topic, if any failed
        del name
    return time.monotonic() - start


def _logs_opened(node: Node, since: int, timeout: float = 600) -> None:
    """Wait for the node to finish opening in the background the logs of a big metadata
    change (its ``opened N partition logs`` line, written after ``since`` bytes of output)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with node.output.open("rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        if (
            "new partition logs in the background" not in text
            or "partition logs in " in (text.split("new partition logs in the background", 1)[1])
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the node did not open the new logs within {timeout} s")


def _metadata_ms(bootstrap: str, topics: int) -> float:
    admin = _admin(bootstrap)
    times = []
    for _ in range(5):
        start = time.monotonic()
        md = admin.list_topics(timeout=60)
        times.append((time.monotonic() - start) * 1000)
        if sum(1 for t in md.topics if t.startswith("scale-")) != topics:
            raise RuntimeError("Metadata did not list every topic")
    return statistics.median(times)


def _produce_latencies_ms(bootstrap: str, count: int = 300) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    out: list[float] = []
    for i in range(count):
        done: list[float] = []
        start = time.monotonic()
        producer.produce(
            "scale-0",
            b"x" * 100,
            partition=0,
            on_delivery=lambda e, _m, acked=done: acked.append(0 if e else 1),
        )
        producer.flush(30)
        if done != [1]:
            raise RuntimeError(f"record {i} not acknowledged")
        out.append((time.monotonic() - start) * 1000)
    return out


def _restart_s(node: Node, topics: int, timeout: float = 300) -> float:
    node.kill()
    start = time.monotonic()
    node.launch()
    deadline = start + timeout
    while time.monotonic() < deadline:
        try:
            md = _admin(node.bootstrap).list_topics(timeout=1)
        except Exception:
            time.sleep(0.1)
            continue
        if sum(1 for t in md.topics if t.startswith("scale-")) == topics:
            return time.monotonic() - start
        time.sleep(0.1)
    raise RuntimeError(f"the node did not answer Metadata within {timeout} s of its restart")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(partitions: int, per_topic: int, idle_s: float) -> dict[str, float]:
    topics = max(1, partitions // per_topic)
    partitions = topics * per_topic
    workdir = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    node = Node(workdir / "node")
    try:
        node.start()
        assert node.proc is not None
        time.sleep(2)  # past start-up work
        pid = node.proc.pid
        fds0, rss0 = _fds(pid), _rss_kib(pid)
        before = node.output.stat().st_size
        start = time.monotonic()
        _create(node.bootstrap, topics, per_topic)
        _logs_opened(node, before)  # a CreateTopics answer comes before the logs are open
        create_s = time.monotonic() - start
        time.sleep(10)  # the flush thread fsyncs the new partitions' files meanwhile
        fds1, rss1 = _fds(pid), _rss_kib(pid)
        cpu0, t0 = _cpu_s(pid), time.monotonic()
        time.sleep(idle_s)
        idle = (_cpu_s(pid) - cpu0) / (time.monotonic() - t0)
        metadata_ms = _metadata_ms(node.bootstrap, topics)
        lat = _produce_latencies_ms(node.bootstrap)
        restart_s = _restart_s(node, topics)
        assert node.proc is not None
        result = {
            "partitions": partitions,
            "create_s": create_s,
            "create_per_s": partitions / create_s,
            "fds_per_partition": (fds1 - fds0) / partitions,
            "rss_kib_per_partition": (rss1 - rss0) / partitions,
            "idle_cpu_share": idle,
            "metadata_ms": metadata_ms,
            "produce_p50_ms": _pct(lat, 0.5),
            "produce_p99_ms": _pct(lat, 0.99),
            "restart_s": restart_s,
            "fds_after_restart_per_partition": (_fds(node.proc.pid) - fds0) / partitions,
        }
    finally:
        node.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    r = run(a.partitions, a.per_topic, a.idle_s)
    print(
        f"{r['partitions']:.0f} partitions on one node\n"
        f"  create            {r['create_s']:.1f} s ({r['create_per_s']:.0f} partitions/s)\n"
        f"  fds/partition     {r['fds_per_partition']:.2f} at rest, "
        f"{r['fds_after_restart_per_partition']:.2f} after a restart\n"
        f"  RSS/partition     {r['rss_kib_per_partition']:.1f} KiB\n"
        f"  idle CPU          {100 * r['idle_cpu_share']:.1f}% of a core\n"
        f"  metadata (all)    {r['metadata_ms']:.0f} ms\n"
        f"  produce p50/p99   {r['produce_p50_ms']:.1f} / {r['produce_p99_ms']:.1f} ms "
        "(acks=all, one partition, one at a time)\n"
        f"  restart           {r['restart_s']:.1f} s (kill -9 until Metadata lists every topic)"
    )
    if a.json:
        a.json.write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
