"""What replication costs: acks=all produce throughput into RF=3 vs RF=1 topics, one 3-node run.

Run with ``python -m bench.replication_bench`` (< 90 s with the defaults). One 3-node cluster
(config/node-{1,2,3}.properties, ports and log dirs moved as in the integration tests), two
topics of --partitions partitions: ``bench-rf1`` (RF=1) and ``bench-rf3`` (RF=3,
min.insync.replicas=2). A confluent-kafka producer in its own process (acks=all, linger.ms=5,
no compression, --record-size byte records) fills each for --seconds; the two alternate for
--rounds runs each and the best run of each counts (the machine is shared). Printed: records/s
of each and RF=3 / RF=1 as a ratio. ``node cpu`` is the three nodes' CPU time over the client's
wall time (up to 300% on three cores' worth of nodes).

Also ``python -m bench.replication_bench client ...``: the producer process (one JSON line).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.broker_bench import Row, Run, best, cpu_seconds, print_table
from tests.integration.cluster import Cluster

ROOT = Path(__file__).resolve().parents[1]
TOPICS = {1: "bench-rf1", 3: "bench-rf3"}


def client(args: argparse.Namespace) -> None:
    from confluent_kafka import KafkaError, Message, Producer

    delivered, errors = 0, []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        elif len(errors) < 5:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "none",
            "on_delivery": on_delivery,
        }
    )
    value = os.urandom(args.record_size)
    for p in range(args.partitions):  # warm-up: connections, metadata, every leader
        producer.produce(args.topic, value, partition=p)
    if producer.flush(60) != 0 or errors:
        print(json.dumps({"error": f"warm-up failed: {errors or 'timeout'}"}), flush=True)
        return
    delivered, sent = 0, 0
    start = time.perf_counter()
    deadline = start + args.seconds
    while time.perf_counter() < deadline:
        for _ in range(1000):
            try:
                producer.produce(args.topic, value)
                sent += 1
            except BufferError:
                producer.poll(0.001)  # local queue full: let deliveries drain it
        producer.poll(0)
    left = producer.flush(60)
    elapsed = time.perf_counter() - start
    print(
        json.dumps(
            {"records": delivered, "seconds": elapsed, "sent": sent, "left": left, "errors": errors}
        ),
        flush=True,
    )


def one_run(cluster: Cluster, rf: int, args: argparse.Namespace) -> Run:
    pids = [n.proc.pid for n in cluster.nodes if n.proc is not None]
    cpu0 = sum(cpu_seconds(p) for p in pids)
    cmd = [
        sys.executable,
        "-m",
        "bench.replication_bench",
        "client",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        TOPICS[rf],
        "--seconds",
        str(args.seconds),
        "--record-size",
        str(args.record_size),
        "--partitions",
        str(args.partitions),
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=args.seconds + 180)
    lines = done.stdout.decode().strip().splitlines()
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": done.stderr.decode()}
    if "error" in result or result["errors"] or result["left"]:
        raise SystemExit(f"RF={rf} producer failed: {result}")
    cpu = sum(cpu_seconds(p) for p in pids) - cpu0
    return Run(result["records"] / result["seconds"], cpu / result["seconds"])


def create_topics(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics(
        [
            NewTopic(TOPICS[1], partitions, 1),
            NewTopic(TOPICS[3], partitions, 3, config={"min.insync.replicas": "2"}),
        ],
        operation_timeout=30,
    )
    for f in fs.values():
        f.result(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=8.0, help="produce time per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each RF (best counts)")
    parser.add_argument("--record-size", type=int, default=512)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--json", type=Path, help="also write the rates and ratio to this file")
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        p = argparse.ArgumentParser()
        p.add_argument("client")
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--seconds", type=float, required=True)
        p.add_argument("--record-size", type=int, required=True)
        p.add_argument("--partitions", type=int, required=True)
        client(p.parse_args())
        return
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="kmirror-replication-bench-"))
    cluster = Cluster(workdir).start(90)
    runs: dict[int, list[Run]] = {1: [], 3: []}
    try:
        create_topics(cluster.bootstrap, args.partitions)
        for _ in range(args.rounds):
            for rf in (3, 1):
                runs[rf].append(one_run(cluster, rf, args))
    finally:
        cluster.stop()
        if args.keep:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    rf3, rf1 = best(runs[3]), best(runs[1])
    print(
        f"3 nodes, {args.partitions} partitions, {args.record_size}-byte records, acks=all, "
        f"best of {args.rounds} runs of {args.seconds:.0f} s each"
    )
    print_table(
        [
            Row(
                "produce acks=all: RF=3 (ours) vs RF=1 (baseline)",
                "rec/s",
                rf3.rate,
                rf1.rate,
                None,
                rf3.node_cpu,
            )
        ]
    )
    print(f"RF=3 / RF=1 throughput ratio: {rf3.rate / rf1.rate:.2f}")
    print(f"node cpu (3 nodes): RF=3 {rf3.node_cpu:.0%}, RF=1 {rf1.node_cpu:.0%}")
    if args.json:
        ratio = rf3.rate / rf1.rate
        args.json.write_text(json.dumps({"rf3": rf3.rate, "rf1": rf1.rate, "ratio": ratio}))


if __name__ == "__main__":
    main()
