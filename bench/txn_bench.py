"""Transactions against a kmirror node: what they cost next to the same work without them.

Run with ``python -m bench.txn_bench`` (or ``bench/run.sh``). One node, three cases, < 90 s,
client and node in separate processes on loopback (confluent-kafka on both sides):

1. throughput: 100-byte records in transactions of --txn-records (begin, produce, commit) vs the
   same records from an idempotent producer that flushes after as many: records/s.
2. commits/s: transactions of 100 records each vs idempotent produce-and-flush of 100 records:
   the round trips a transaction adds (AddPartitionsToTxn, EndTxn, markers) per 100 records.
3. consume what case 1 wrote into --consume-mib MiB of 1 KiB records (all committed, a COMMIT
   marker after every transaction): read_committed vs read_uncommitted, MB/s. With nothing
   aborted they read the same records; the difference is the isolation level's cost.

Each side runs ``--rounds`` times, alternating, and the best run of each counts (the machine is
shared: the best run is the least disturbed). ``node cpu`` is the node's CPU time over the
client's wall time in that best run. Also ``python -m bench.txn_bench client <role> ...``: the
client processes the bench starts (one JSON line each).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.broker_bench import Row, Run, best, cpu_seconds, print_table, stop_node
from tests.integration.node import Node

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
PARTITIONS = 4


# -- client processes ------------------------------------------------------------------------


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def client_produce(args: argparse.Namespace) -> None:
    """Batches of --batch records: transactions, or idempotent produce + flush."""
    from confluent_kafka import Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "linger.ms": 5,
        "enable.idempotence": True,
        "compression.type": "none",
        "batch.num.messages": 10_000,
    }
    if args.transactional:
        conf["transactional.id"] = f"bench-{os.getpid()}"
    producer = Producer(conf)
    if args.transactional:
        producer.init_transactions(30)
    value = os.urandom(args.record_size)

    def one_batch(n: int) -> None:
        if args.transactional:
            producer.begin_transaction()
        for i in range(n):
            while True:
                try:
                    producer.produce(args.topic, value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.01)
        if args.transactional:
            producer.commit_transaction(30)
        elif producer.flush(30) != 0:
            raise RuntimeError("flush timed out")

    one_batch(min(args.batch, 100))  # warm-up: connections, metadata, coordinator
    records = batches = 0
    started = time.perf_counter()
    deadline = started + args.seconds
    while (args.records and records < args.records) or (
        not args.records and time.perf_counter() < deadline
    ):
        one_batch(args.batch)
        records += args.batch
        batches += 1
    seconds = time.perf_counter() - started
    _emit(records=records, batches=batches, seconds=seconds, bytes=records * args.record_size)


def client_consume(args: argparse.Namespace) -> None:
    """Read --records records from offset 0 of every partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"bench-{os.getpid()}",
            "enable.auto.commit": False,
            "isolation.level": args.isolation,
            "fetch.max.bytes": 64 * MiB,
            "max.partition.fetch.bytes": 16 * MiB,
        }
    )
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = nbytes = 0
    started = time.perf_counter()
    deadline = started + 120
    while got < args.records and time.perf_counter() < deadline:
        for m in consumer.consume(num_messages=10_000, timeout=0.5):
            if m.error() is None:
                got += 1
                nbytes += len(m.value() or b"")
    seconds = time.perf_counter() - started
    consumer.close()
    _emit(records=got, bytes=nbytes, seconds=seconds)


def client_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="txn_bench client")
    sub = parser.add_subparsers(dest="role", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--records", type=int, default=0, help="a volume instead of a time budget")
    p.add_argument("--transactional", action="store_true")
    p = sub.add_parser("consume")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--isolation", choices=("read_committed", "read_uncommitted"), required=True)
    args = parser.parse_args(argv)
    (client_produce if args.role == "produce" else client_consume)(args)


# -- the orchestrator ------------------------------------------------------------------------


@dataclass
class Bench:
    node: Node
    rounds: int
    stderr: Any

    def client(self, *args: str) -> dict[str, Any]:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.txn_bench", "client", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            timeout=180,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"client {args[0]} failed ({proc.returncode}): {proc.stdout[-500:]}")
        data: dict[str, Any] = json.loads(lines[-1])
        return data

    def measured(self, rate_of: str, *args: str) -> Run:
        assert self.node.proc is not None
        before = cpu_seconds(self.node.proc.pid)
        data = self.client(*args)
        used = cpu_seconds(self.node.proc.pid) - before
        rate = data[rate_of] / data["seconds"] / (MiB if rate_of == "bytes" else 1)
        return Run(rate, used / data["seconds"])

    def compare(self, case: str, unit: str, rate_of: str, ours: list[str], base: list[str]) -> Row:
        mine: list[Run] = []
        theirs: list[Run] = []
        for _ in range(self.rounds):
            theirs.append(self.measured(rate_of, *base))
            mine.append(self.measured(rate_of, *ours))
        o, b = best(mine), best(theirs)
        return Row(case, unit, o.rate, b.rate, None, o.node_cpu)


def create_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names], operation_timeout=20)
    for f in futures.values():
        f.result(30)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        client_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0, help="budget of each produce run")
    parser.add_argument("--txn-records", type=int, default=5_000, help="records per txn, case 1")
    parser.add_argument("--consume-mib", type=int, default=64, help="volume of case 3, MiB")
    parser.add_argument("--rounds", type=int, default=2, help="runs per side; the best counts")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="kmirror-txn-bench-"))
    node = Node(
        workdir / "node",
        transaction__state__log__replication__factor="1",
        transaction__state__log__num__partitions="4",
        auto__create__topics__enable="false",
    )
    stderr = (workdir / "clients.err").open("w")
    bench = Bench(node, args.rounds, stderr)
    started = time.perf_counter()
    rows: list[Row] = []
    try:
        node.start()
        create_topics(node.bootstrap, ["txn-a", "idem-a", "txn-b", "idem-b", "txn-c"])
        b = node.bootstrap

        def produce(topic: str, *extra: str) -> list[str]:
            return ["produce", "--bootstrap", b, "--topic", topic, *extra]

        def consume(isolation: str, count: int) -> list[str]:
            return ["consume", "--bootstrap", b, "--topic", "txn-c", "--records", str(count),
                    "--isolation", isolation]  # fmt: skip

        big = ("--batch", str(args.txn_records), "--seconds", str(args.seconds))
        rows.append(
            bench.compare(
                f"produce 100 B in txns of {args.txn_records} (vs idempotent + flush)",
                "rec/s",
                "records",
                produce("txn-a", "--transactional", *big),
                produce("idem-a", *big),
            )
        )
        small = ("--batch", "100", "--seconds", str(args.seconds))
        rows.append(
            bench.compare(
                "commits of 100 x 100 B (vs idempotent flush of 100)",
                "txn/s",
                "batches",
                produce("txn-b", "--transactional", *small),
                produce("idem-b", *small),
            )
        )
        per_txn = 1_000
        records = args.consume_mib * MiB // 1024 // per_txn * per_txn
        volume = ("--record-size", "1024", "--batch", str(per_txn), "--records", str(records))
        bench.client(*produce("txn-c", "--transactional", *volume))
        total = records + 100  # and the warm-up transaction
        rows.append(
            bench.compare(
                f"consume {args.consume_mib} MiB read_committed (vs read_uncommitted)",
                "MB/s",
                "bytes",
                consume("read_committed", total),
                consume("read_uncommitted", total),
            )
        )
    finally:
        stderr.close()
        stop_node(node, workdir, keep=args.keep)
    print_table(rows)
    print(f"({time.perf_counter() - started:.0f} s, {os.cpu_count()} cores, best of {args.rounds})")


if __name__ == "__main__":
    main()
