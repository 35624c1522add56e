"""Failover of many mirror partitions spread over a three-node destination, one run.

    python -m bench.mirror_failover_bench [--partitions 1000] [--runs 1] [--json FILE]

A kmirror source node with one topic of ``--partitions`` partitions (a few records each), a
three-node destination (config/node-{1,2,3}.properties: RF=3, min.insync.replicas=2, ports and
log dirs moved as in the integration tests) mirroring it. Once every partition is caught up,
``kafka-mirrors.sh --remove`` is timed until every partition is writable: a confluent-kafka
producer (acks=all) writes one record to each partition, again and again for those refused,
until all are acknowledged. The KIP's goal for 1,000 partitions is under 2 s. Also printed: how
long the mirror took to reach MIRRORING with lag 0 from ``--add`` (the PREPARING work for every
partition, on three nodes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from tests.integration.cluster import Cluster
from tests.integration.mirror_helpers import (
    end_offsets,
    mirror_tool,
    write_mirror_config,
)
from tests.integration.node import Node

TOPIC, MIRROR = "failover", "dr"


def _create(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(60)


def _wait(what: str, cond: object, timeout: float, step: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(step)


def _writable_all(bootstrap: str, partitions: int, timeout: float) -> float:
    """Seconds until a record is acknowledged on every partition (acks=all)."""
    start = time.perf_counter()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, "retries": 0})
    todo = set(range(partitions))
    while todo:
        if time.perf_counter() - start > timeout:
            raise SystemExit(f"{len(todo)} partitions still refuse writes after {timeout:.0f}s")
        failed: set[int] = set()

        def done(err: object, msg: object, failed: set[int] = failed) -> None:
            if err is not None:
                failed.add(msg.partition())  # type: ignore[attr-defined]

        sent = set(todo)
        for part in sent:
            p.produce(TOPIC, b"after-failover", partition=part, on_delivery=done)
        p.flush(timeout)
        todo = failed
        if todo:
            time.sleep(0.02)
    return time.perf_counter() - start


def _last_stopped(dst: Cluster, partitions: int) -> float:
    """Wall time of the last ``STOPPING -> STOPPED`` the nodes logged (the broker side of the
    failover: from then on every partition takes writes; the producer's round trips and the
    replication of its acks=all write come on top)."""
    stamps = []
    for n in dst.nodes:
        for line in n.output.read_text(errors="replace").splitlines():
            if f"{TOPIC}-" in line and "STOPPING -> STOPPED" in line:
                stamps.append(datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f"))
    if len(stamps) < partitions:
        raise SystemExit(f"only {len(stamps)} of {partitions} partitions logged STOPPED")
    return max(stamps).timestamp()  # the log's stamps are local time, as naive datetimes are


def run(partitions: int, workdir: Path) -> dict[str, float]:
    src = Node(workdir / "src").start()
    dst = Cluster(workdir / "dst")
    try:
        dst.start()
        _create(src.bootstrap, partitions)
        p = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 5})
        for i in range(partitions * 3):
            p.produce(TOPIC, b"x" * 100, partition=i % partitions)
        p.flush(60)
        ends = end_offsets(src.bootstrap, TOPIC, partitions)
        config = write_mirror_config(workdir / "m.properties", src.bootstrap)
        node = dst.node(1)
        mirror_tool(node, "--create", "--mirror", MIRROR, "--mirror-config", str(config))
        t0 = time.perf_counter()
        mirror_tool(node, "--add", "--topic", TOPIC, "--mirror", MIRROR)
        _wait(
            "every partition caught up",
            lambda: end_offsets(dst.bootstrap, TOPIC, partitions, missing_ok=True) == ends,
            600,
            0.5,
        )
        caught_up = time.perf_counter() - t0
        t1, wall = time.perf_counter(), time.time()
        mirror_tool(node, "--remove", "--topic", TOPIC, "--mirror", MIRROR)
        removed = time.perf_counter() - t1
        writable = _writable_all(dst.bootstrap, partitions, 120)
        return {
            "partitions": partitions,
            "caught_up_s": caught_up,
            "remove_call_s": removed,
            "stopped_s": _last_stopped(dst, partitions) - wall,
            "failover_s": removed + writable,
        }
    finally:
        dst.stop()
        src.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=1, help="fresh clusters, one failover each")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    runs = []
    for _ in range(args.runs):
        workdir = Path(tempfile.mkdtemp(prefix="kmirror-failover-bench-"))
        try:
            out = run(args.partitions, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        runs.append(out)
        print(
            f"{out['partitions']} mirror partitions on 3 nodes (RF=3): caught up "
            f"{out['caught_up_s']:.1f} s after --add; every partition STOPPED "
            f"{out['stopped_s']:.2f} s after --remove; every partition took an acks=all write "
            f"{out['failover_s']:.2f} s after it (goal < 2 s)",
            flush=True,
        )
    if len(runs) > 1:
        for key in ("stopped_s", "failover_s"):
            values = sorted(r[key] for r in runs)
            print(f"{key}: median {statistics.median(values):.2f}, max {values[-1]:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(runs if len(runs) > 1 else runs[0]))


if __name__ == "__main__":
    main()
