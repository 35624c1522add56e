"""Consume speed of a kmirror node against Tansu (a Rust Kafka-compatible broker), one run.

Run with ``bin/bench.sh peer_consume_bench``. Both brokers get the same 1,000,000 records of
100 B (one partition, the same confluent-kafka producer), then the same confluent-kafka consumer
reads them from offset 0, alternating brokers, best of ``--rounds``. Two client settings:

- ``defaults``: ``max.partition.fetch.bytes`` 1 MiB, as every librdkafka consumer sends it.
- ``equal responses``: 8 MiB, so both brokers answer with responses of about the same size.

Why two: a Fetch names a per-partition byte limit, and Kafka (and kmirror) answer at most that
much per partition (whole batches; the first batch always). Tansu ignores the limit and answers
several MiB, so librdkafka, which keeps one Fetch in flight per broker, makes fewer round trips.
The table prints the bytes one Fetch of each broker returned for a 1 MiB limit, so the cause is
visible in the same run. Our rows: MiB/s of record values; ratio kmirror / Tansu.
"""

import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.integration import peer_brokers
from tests.integration.node import Node, free_port

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "peer-consume"
MiB = 1 << 20


def client(role: str, *args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_clients", role, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{role} failed ({out.returncode}): {out.stderr[-800:]}")
    data: dict[str, object] = json.loads(lines[-1])
    if data.get("error") or data.get("errors"):
        raise RuntimeError(f"{role} reported errors: {data}")
    return data


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=20).values():
        f.result(30)


def fetch_size(bootstrap: str, limit: int) -> int:
    """Bytes of records one Fetch v4 from offset 0 returns with a ``limit`` per partition."""
    host, port = bootstrap.rsplit(":", 1)
    name = TOPIC.encode()
    body = struct.pack(">hhih", 1, 4, 1, 5) + b"bench"  # header: Fetch v4, client id
    body += struct.pack(">iiiib", -1, 100, 1, 64 * MiB, 0)  # replica, wait, min, max, isolation
    body += struct.pack(">ih", 1, len(name)) + name + struct.pack(">iiqi", 1, 0, 0, limit)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        f = s.makefile("rb")
        (size,) = struct.unpack(">i", f.read(4))
        data = f.read(size)
    # corr, throttle, [topic name, [partition, error, hw, lso, aborted[]]] then records
    pos = 8 + 4
    (name_len,) = struct.unpack_from(">h", data, pos)
    pos += 2 + name_len + 4 + 4 + 2 + 8 + 8
    (aborted,) = struct.unpack_from(">i", data, pos)
    pos += 4 + max(aborted, 0) * 12
    (records,) = struct.unpack_from(">i", data, pos)
    return int(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="runs per broker; the best counts")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="kmirror-peer-bench-"))
    node = Node(workdir / "node", auto__create__topics__enable="false")
    started = time.perf_counter()
    try:
        node.start()
        port = free_port()
        command = peer_brokers.tansu_command(port)
        with peer_brokers.peer_broker("tansu", command, port, workdir / "tansu.out") as tansu:
            brokers = {"kmirror": node.bootstrap, "tansu": tansu}
            for bootstrap in brokers.values():
                create_topic(bootstrap)
                client(
                    "produce",
                    "--bootstrap",
                    bootstrap,
                    "--topic",
                    TOPIC,
                    "--bytes",
                    str(args.records * 100),
                )
            sizes = {name: fetch_size(b, MiB) for name, b in brokers.items()}
            rows = []
            for label, limit in (("defaults", MiB), ("equal responses", 8 * MiB)):
                best = dict.fromkeys(brokers, 0.0)
                for _ in range(args.rounds):
                    for name, bootstrap in brokers.items():
                        d = client(
                            "consume",
                            "--bootstrap",
                            bootstrap,
                            "--topic",
                            TOPIC,
                            "--records",
                            str(args.records),
                            "--partition-fetch-bytes",
                            str(limit),
                            "--timeout",
                            "120",
                        )
                        if d["records"] != args.records:
                            raise RuntimeError(f"{name}: consumed {d} of {args.records}")
                        rate = float(d["bytes"]) / float(d["seconds"]) / MiB  # type: ignore[arg-type]
                        best[name] = max(best[name], rate)
                rows.append((label, limit, best["kmirror"], best["tansu"]))
    finally:
        node.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"bytes one Fetch returns for a 1 MiB partition limit: "
        f"kmirror {sizes['kmirror']:,}, tansu {sizes['tansu']:,}"
    )
    print(
        f"{'consume 1M x 100 B from offset 0':<40} {'limit':>6} {'kmirror':>9} {'tansu':>9}"
        f" {'ratio':>6}"
    )
    for label, limit, ours, theirs in rows:
        print(
            f"{label:<40} {limit // MiB:>4}Mi {ours:>6.1f}M/s {theirs:>6.1f}M/s"
            f" {ours / theirs:>6.2f}"
        )
    print(f"({time.perf_counter() - started:.0f} s, {os.cpu_count()} cores, best of {args.rounds})")
    if args.json:
        doc = {
            "fetch_bytes": sizes,
            "rows": [
                dict(zip(("case", "limit", "kmirror", "tansu"), r, strict=True)) for r in rows
            ],
        }
        args.json.write_text(json.dumps(doc))


if __name__ == "__main__":
    main()
