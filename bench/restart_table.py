"""The kill -9 restart table of issue 31 item 2 (``python -m bench.restart_bench --table``).

Three scenarios, each on stock log settings (1 GiB segments, no flush.ms) except the recovery
checkpoint interval (``--checkpoint-ms``), each in its own directory, deleted afterwards:

- ``size``: one node, --table-partitions partitions (200), logs grown to each of --table-sizes
  (GiB, cumulative: 1, 10, 30) by a fast producer (1 MiB batches of 16 KiB records, the write
  time reported apart), then one recovery checkpoint let pass, a 16 MiB tail in 16 KiB batches
  (the Java client's default) written after it, offsets committed, kill -9, restart;
- ``many``: one node, --many partitions (10,000) each written (16 KiB batches) within the last
  minute (no recovery checkpoint since: the node's 60 s default), kill -9, restart;
- ``follower``: three nodes, 200 partitions at RF=3, --follower-mib written, one node killed
  -9 while a producer keeps writing (--down-s), restarted: seconds until it is back in the ISR of
  every partition it replicates (internal topics too), as another node's metadata says.

Columns, seconds from launching the restarted process: ``metadata`` (it answers Metadata with
the topic's partitions led), ``produce`` (an acks=all record acknowledged on every sampled
partition, at most 200 spread over the topic), ``offsets`` (``Consumer.committed`` returns the
committed offsets), ``isr`` (follower only), and the batches the node's log says it replayed
("producer state rebuilt from N batches", summed), and ``cpu s``: the CPU seconds the restarted
process had used when produce was first served (on a shared machine the wall times measure the
neighbours too; CPU time flat in log size is the load-independent reading). The probes run
side by side in threads.

Measured 2026-11-29 on 2 cores shared with seven other sessions (load average 12-20, so wall
seconds are mostly waiting for a core; stock settings, --checkpoint-ms 3000):

    scenario                     disk GiB  write s metadata  produce  offsets    isr  cpu s  replayed
    1 GiB / 200 p                    1.00      8.0    13.74    13.48    12.60      -   2.97      2051
    10 GiB / 200 p                  10.01    185.6    14.48    14.26    14.44      -   3.21      1350
    30 GiB / 200 p                  30.02    551.1    23.98    24.92    25.27      -   4.11      1136
    30 GiB, clean restart           30.02      0.0    13.81    13.64    13.82      -   3.57         0
    10000 p, last minute             0.04     62.1    69.84    71.47    79.05      -  26.03      9297
      after one listing per log, no index files made by recovery:
    10000 p, last minute             0.04     76.5    33.24    34.80    37.20      -  22.37     10003
    follower, 3 nodes, 200 p         1.00     71.3    20.15    29.04    21.09  28.16   4.19         0

Replay and log recovery are flat in log size (a LogManager load of the 30 GiB directory: 0.65 s
CPU for 251 logs); the 30 GiB row's wall time includes loop stalls on a disk busy with the
writes (an epoch-file fsync on the loop, since moved to the flush thread).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.cluster import Cluster
from tests.integration.node import Node

MiB = 1 << 20
GiB = 1 << 30
TOPIC = "restart-table"
GROUP = "restart-table-group"
_REBUILT = re.compile(r"producer state rebuilt from (\d+) batches")
QUIET: dict[str, Any] = {"log_level": 0, "logger": lambda *a: None}


@dataclass
class Row:
    scenario: str
    disk_gib: float
    write_s: float
    metadata_s: float = -1.0
    produce_s: float = -1.0
    offsets_s: float = -1.0
    isr_s: float = -1.0
    cpu_s: float = -1.0  # the restarted process's CPU seconds when produce was first served
    replayed: int = 0
    notes: list[str] = field(default_factory=list)


def produce_fast(bootstrap: str, partitions: int, nbytes: int, *, record: int, batch: int) -> float:
    """Writes about ``nbytes`` round-robin over the topic's partitions with an idempotent
    producer; returns the seconds it took."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20 if batch > 65536 else 5,
            "compression.type": "none",
            "batch.size": batch,
            "queue.buffering.max.kbytes": 512 * 1024,
            "message.timeout.ms": 300_000,
            **QUIET,
        }
    )
    value = os.urandom(record)
    count = max(1, nbytes // record)
    start = time.monotonic()
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1024 == 0:
            producer.poll(0)
    if producer.flush(600) != 0:
        raise RuntimeError("produce did not finish")
    return time.monotonic() - start


def commit_offsets(bootstrap: str, partitions: int, offset: int) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False, **QUIET}
    )
    try:
        for n in range(3):  # a few commits: the offsets partition has more than one record
            tps = [TopicPartition(TOPIC, p, offset + n) for p in range(partitions)]
            for attempt in range(60):  # the coordinator may still be loading
                try:
                    consumer.commit(offsets=tps, asynchronous=False)
                    break
                except KafkaException as exc:
                    err = exc.args[0]
                    loading = err.code() == KafkaError.COORDINATOR_LOAD_IN_PROGRESS
                    if attempt == 59 or not (loading or err.retriable()):
                        raise
                    time.sleep(1)
    finally:
        consumer.close()


def sample(partitions: int, most: int = 200) -> list[int]:
    step = max(1, partitions // most)
    return list(range(0, partitions, step))[:most]


class Probes:
    """The restart's probes, polling side by side until each has its answer or the deadline."""

    def __init__(
        self,
        bootstrap: str,
        partitions: int,
        committed: int | None,
        deadline: float,
        pid: int | None = None,
    ) -> None:
        self.pid = pid
        self.cpu: dict[str, float] = {}
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.committed = committed
        self.deadline = deadline
        self.start = time.monotonic()
        self.times: dict[str, float] = {}

    def _loop(self, name: str, check: Any) -> None:
        while time.monotonic() < self.deadline:
            try:
                if check():
                    self.times[name] = time.monotonic() - self.start
                    if self.pid is not None:
                        self.cpu[name] = cpu_seconds(self.pid)
                    return
            except Exception:
                pass
            time.sleep(0.02)

    def metadata(self) -> bool:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        md = admin.list_topics(TOPIC, timeout=5)  # 10,000 partitions take a while to answer
        t = md.topics.get(TOPIC)
        return (
            t is not None
            and t.error is None
            and len(t.partitions) == self.partitions
            and all(p.leader >= 0 for p in t.partitions.values())
        )

    def produce(self, pending: set[int]) -> bool:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "message.timeout.ms": 2000,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 100,
                "retry.backoff.ms": 20,
                **QUIET,
            }
        )

        def done(err: Any, msg: Any) -> None:
            if err is None:
                pending.discard(msg.partition())

        for p in list(pending):
            producer.produce(TOPIC, b"probe", partition=p, on_delivery=done)
        producer.flush(3)
        return not pending

    def offsets(self) -> bool:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP, **QUIET})
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(self.partitions)]
            got = consumer.committed(tps, timeout=5)
        finally:
            consumer.close()
        return all(tp.error is None and tp.offset == self.committed for tp in got)

    def run(self, extra: dict[str, Any] | None = None) -> dict[str, float]:
        pending = set(sample(self.partitions))
        checks: dict[str, Any] = {
            "metadata": self.metadata,
            "produce": lambda: self.produce(pending),
            **(extra or {}),
        }
        if self.committed is not None:
            checks["offsets"] = self.offsets
        threads = [
            threading.Thread(target=self._loop, args=(name, check), daemon=True)
            for name, check in checks.items()
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return self.times


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process so far (the machine may be shared: wall time
    then says more about the neighbours than about the restart)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return -1.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replayed(node: Node, since: int) -> int:
    text = node.output.read_bytes()[since:].decode(errors="replace")
    if "Logging error" in text:
        print(f"node {node.node_id} logged a logging error; see {node.output}", file=sys.stderr)
    return sum(int(n) for n in _REBUILT.findall(text))


def disk_gib(root: Path) -> float:
    return sum(p.stat().st_size for p in root.rglob("*.log") if p.is_file()) / GiB


def fill(row: Row, probes: Probes) -> None:
    times = probes.times
    row.cpu_s = probes.cpu.get("produce", -1.0)
    row.metadata_s = times.get("metadata", -1.0)
    row.produce_s = times.get("produce", -1.0)
    row.offsets_s = times.get("offsets", -1.0)
    row.isr_s = times.get("isr", -1.0)


def create_topic(bootstrap: str, partitions: int, rf: int, timeout: float = 300) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    futures = admin.create_topics(
        [NewTopic(TOPIC, partitions, rf)], request_timeout=timeout, operation_timeout=timeout
    )
    futures[TOPIC].result(timeout)
    deadline = time.monotonic() + timeout
    probe = Probes(bootstrap, partitions, None, deadline)
    while True:
        try:
            if probe.metadata():
                return
        except Exception:
            pass  # a slow answer on a busy machine: ask again
        if time.monotonic() > deadline:
            raise TimeoutError("topic not led everywhere")
        time.sleep(0.2)


def size_rows(args: argparse.Namespace, workdir: Path) -> list[Row]:
    node = Node(workdir / "size", offsets__topic__num__partitions="50", num__partitions="1")
    if args.checkpoint_ms:
        node.settings["log.flush.offset.checkpoint.interval.ms"] = str(args.checkpoint_ms)
    node.start()
    rows: list[Row] = []
    try:
        create_topic(node.bootstrap, args.table_partitions, 1)
        written = 0
        committed = 0
        tail = 16 * MiB
        for gib in (float(s) for s in args.table_sizes.split(",")):
            target = int(gib * GiB)
            took = produce_fast(
                node.bootstrap,
                args.table_partitions,
                target - written - tail,
                record=16384,
                batch=1_000_000,
            )
            if args.checkpoint_ms:  # one recovery checkpoint passes
                time.sleep(args.checkpoint_ms / 1000 + 1.5)
            took += produce_fast(
                node.bootstrap, args.table_partitions, tail, record=1024, batch=16384
            )
            written = target
            commit_offsets(node.bootstrap, args.table_partitions, committed)
            committed += 3
            row = Row(f"{gib:g} GiB / {args.table_partitions} p", disk_gib(node.log_dir), took)
            rows.append(restart(node, row, args.table_partitions, committed - 1, args.timeout))
            print(render([row], header=False), flush=True)
        row = Row(f"{gib:g} GiB, clean restart", disk_gib(node.log_dir), 0.0)
        rows.append(restart(node, row, args.table_partitions, committed - 1, args.timeout, True))
        print(render([row], header=False), flush=True)
    finally:
        node.kill()
        _remove(args, workdir / "size")
    return rows


def restart(
    node: Node, row: Row, partitions: int, committed: int, timeout: float, clean: bool = False
) -> Row:
    if clean:
        node.stop()
    else:
        node.kill()
    since = node.output.stat().st_size
    node.launch()
    assert node.proc is not None
    deadline = time.monotonic() + timeout
    probes = Probes(node.bootstrap, partitions, committed, deadline, node.proc.pid)
    probes.run()
    fill(row, probes)
    row.replayed = replayed(node, since)
    node.wait_started(timeout)  # raises if it died
    return row


def many_row(args: argparse.Namespace, workdir: Path) -> Row:
    node = Node(
        workdir / "many",
        offsets__topic__num__partitions="50",
        num__partitions="1",
        log__segment__bytes=str(64 * MiB),
    )
    node.start()
    try:
        create_topic(node.bootstrap, args.many, 1, timeout=600)
        took = produce_fast(
            node.bootstrap, args.many, args.many * args.many_kib * 1024, record=1024, batch=16384
        )
        commit_offsets(node.bootstrap, args.many, 0)
        row = Row(f"{args.many} p, last minute", disk_gib(node.log_dir), took)
        restart(node, row, args.many, 2, args.timeout)
        print(render([row], header=False), flush=True)
        return row
    finally:
        node.kill()
        _remove(args, workdir / "many")


def follower_row(args: argparse.Namespace, workdir: Path) -> Row:
    settings = {"offsets__topic__num__partitions": "50"}
    if args.checkpoint_ms:
        settings["log__flush__offset__checkpoint__interval__ms"] = str(args.checkpoint_ms)
    cluster = Cluster(workdir / "follower", 3, **settings)
    cluster.start(timeout=120)
    try:
        create_topic(cluster.bootstrap, args.table_partitions, 3)
        took = produce_fast(
            cluster.bootstrap,
            args.table_partitions,
            args.follower_mib * MiB,
            record=16384,
            batch=1_000_000,
        )
        commit_offsets(cluster.bootstrap, args.table_partitions, 0)
        if args.checkpoint_ms:
            time.sleep(args.checkpoint_ms / 1000 + 1.5)
        victim = cluster.nodes[-1]
        others = [n for n in cluster.nodes if n is not victim]
        victim.kill()
        # writes go on while it is down: it has them to fetch when it comes back
        took += produce_fast(
            ",".join(n.bootstrap for n in others),
            args.table_partitions,
            args.down_mib * MiB,
            record=1024,
            batch=16384,
        )
        row = Row(f"follower, 3 nodes, {args.table_partitions} p", disk_gib(victim.log_dir), took)

        def isr_count() -> tuple[int, int]:
            """(partitions the victim replicates, those with it in the ISR), as another
            node's metadata says."""
            from confluent_kafka.admin import AdminClient

            admin = AdminClient({"bootstrap.servers": others[0].bootstrap, **QUIET})
            md = admin.list_topics(timeout=2)
            mine = [
                p
                for t in md.topics.values()
                for p in t.partitions.values()
                if victim.node_id in p.replicas
            ]
            return len(mine), sum(victim.node_id in p.isrs for p in mine)

        # Restarted only once it is out of every ISR (fenced when its session ran out):
        # otherwise "back in every ISR" would hold before it even started.
        out_by = time.monotonic() + 120
        while time.monotonic() < out_by:
            try:
                if isr_count()[1] == 0:
                    break
            except Exception:
                pass
            time.sleep(0.5)
        else:
            row.notes.append("still in some ISR when restarted")
        since = victim.output.stat().st_size
        victim.launch()
        deadline = time.monotonic() + args.timeout
        assert victim.proc is not None
        probes = Probes(victim.bootstrap, args.table_partitions, 2, deadline, victim.proc.pid)

        def in_every_isr() -> bool:
            mine, in_isr = isr_count()
            return mine > 0 and in_isr == mine

        probes.run({"isr": in_every_isr})
        fill(row, probes)
        row.replayed = replayed(victim, since)
        print(render([row], header=False), flush=True)
        return row
    finally:
        cluster.kill()
        _remove(args, workdir / "follower")


def _remove(args: argparse.Namespace, path: Path) -> None:
    if args.keep:
        print(f"kept: {path}", file=sys.stderr)
    else:
        shutil.rmtree(path, ignore_errors=True)


def render(rows: list[Row], header: bool = True) -> str:
    def s(v: float) -> str:
        return f"{v:.2f}" if v >= 0 else "-"

    lines = []
    if header:
        lines.append(
            f"{'scenario':<28} {'disk GiB':>8} {'write s':>8} {'metadata':>8} {'produce':>8} "
            f"{'offsets':>8} {'isr':>6} {'cpu s':>6} {'replayed':>9}"
        )
    for r in rows:
        lines.append(
            f"{r.scenario:<28} {r.disk_gib:>8.2f} {r.write_s:>8.1f} {s(r.metadata_s):>8} "
            f"{s(r.produce_s):>8} {s(r.offsets_s):>8} {s(r.isr_s):>6} {s(r.cpu_s):>6} "
            f"{r.replayed:>9}" + (f"  ({'; '.join(r.notes)})" if r.notes else "")
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", action="store_true", help="issue 31's restart table")
    parser.add_argument("--scenarios", default="size,many,follower")
    parser.add_argument("--table-sizes", default="1,10,30", help="GiB, cumulative")
    parser.add_argument("--table-partitions", type=int, default=200)
    parser.add_argument("--many", type=int, default=10_000, help="partitions of 'many'")
    parser.add_argument("--many-kib", type=int, default=4, help="KiB written to each of them")
    parser.add_argument("--follower-mib", type=int, default=1024)
    parser.add_argument("--down-mib", type=int, default=64, help="written while it is down")


def run_table(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="restart-table-"))
    rows: list[Row] = []
    wanted = args.scenarios.split(",")
    try:
        if "size" in wanted:
            rows += size_rows(args, workdir)
        if "many" in wanted:
            rows.append(many_row(args, workdir))
        if "follower" in wanted:
            rows.append(follower_row(args, workdir))
    finally:
        _remove(args, workdir)
    print()
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows]))
    if any(r.produce_s < 0 or (r.isr_s < 0 and r.scenario.startswith("follower")) for r in rows):
        print("some probe never answered", file=sys.stderr)
