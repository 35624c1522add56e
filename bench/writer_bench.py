"""Produce latency next to a full-speed writer: what appends on the event loop cost others.

Run with ``python -m bench.writer_bench`` (< 60 s with the defaults). One node; a flood producer
in its own process (confluent-kafka, acks=1, 10 KiB records in 1 MiB batches) fills ``flood``
for --seconds while a probe producer in this process sends one 100-byte record at a time to
``probe`` (acks=1, linger.ms=0, waits for each delivery). Printed: the probe's latency
percentiles alone and beside the flood, the flood's MB/s, and the node's CPU time over the
wall time. The node writes its log appends on the loop (before issue 18 item 6) or in its
writer thread (after): the same bench on both trees compares them. A page cache under
pressure (writes throttled to the disk's speed) is what made appends on the loop stall every
connection; ``--disk-mb-s`` emulates it on a machine whose page cache keeps up.
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

from bench.broker_bench import cpu_seconds
from tests.integration.node import Node

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def probe(bootstrap: str, seconds: float) -> list[float]:
    """Latencies (ms) of one-record produces, each awaited before the next."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    producer.produce("probe", b"warm-up")
    producer.flush(30)
    out: list[float] = []
    value = os.urandom(100)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        producer.produce("probe", value)
        producer.flush(30)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def percentiles(lat: list[float]) -> dict[str, float]:
    s = sorted(lat)

    def at(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")

    return {"n": len(s), "p50": at(0.5), "p99": at(0.99), "p999": at(0.999), "max": s[-1]}


def flood(bootstrap: str, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.bench_clients",
            "produce",
            "--bootstrap",
            bootstrap,
            "--topic",
            "flood",
            "--record-size",
            str(10 * 1024),
            "--batch-size",
            str(MiB),
            "--max-request",
            str(2 * MiB),
            "--seconds",
            str(seconds),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


_SLOW_PWRITE = """\
import os, time

_rate = float(os.environ["KMIRROR_BENCH_DISK_BYTES_S"])
_pwrite = os.pwrite


def _slow_pwrite(fd, data, offset):
    n = _pwrite(fd, data, offset)
    if n >= 4096:
        time.sleep(n / _rate)  # like balance_dirty_pages pausing the writer
    return n


os.pwrite = _slow_pwrite
"""


def slow_disk(site: Path, mb_s: float) -> None:
    """Nodes started from now on see log writes of a disk of ``mb_s`` MB/s (sitecustomize)."""
    site.mkdir(parents=True)
    (site / "sitecustomize.py").write_text(_SLOW_PWRITE)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p
    )
    os.environ["KMIRROR_BENCH_DISK_BYTES_S"] = str(mb_s * MiB)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15.0, help="flood duration")
    parser.add_argument("--alone", type=float, default=4.0, help="probe-only duration")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--disk-mb-s",
        type=float,
        default=0.0,
        help="emulate a disk under page-cache pressure: every log write of 4 KiB or more "
        "blocks for its size at this rate (os.pwrite wrapped in the node, GIL released)",
    )
    parser.add_argument("--profile", type=Path, help="py-spy raw profile of the node (flood)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="kmirror-writer-bench-"))
    if args.disk_mb_s > 0:
        slow_disk(workdir / "site", args.disk_mb_s)
    node = Node(
        workdir / "node", message__max__bytes=str(2 * MiB), auto__create__topics__enable="false"
    )
    result: dict[str, Any] = {}
    try:
        node.start()
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for f in admin.create_topics(
            [NewTopic("probe", 1, 1), NewTopic("flood", 1, 1)], operation_timeout=20
        ).values():
            f.result(30)
        result["alone"] = percentiles(probe(node.bootstrap, args.alone))
        assert node.proc is not None
        cpu0, wall0 = cpu_seconds(node.proc.pid), time.perf_counter()
        proc = flood(node.bootstrap, args.seconds)
        time.sleep(1.0)  # the flood reaches full speed
        spy = None
        if args.profile is not None:
            spy = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--pid",
                    str(node.proc.pid),
                    "--duration",
                    str(int(args.seconds - 3)),
                    "--format",
                    "raw",
                    "--output",
                    str(args.profile),
                    "--threads",
                    "--idle",
                    "--rate",
                    "200",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        lat = probe(node.bootstrap, args.seconds - 2.0)
        out, _ = proc.communicate(timeout=120)
        if spy is not None:
            spy.wait(60)
        wall = time.perf_counter() - wall0
        result["with_flood"] = percentiles(lat)
        stats = json.loads(out.strip().splitlines()[-1])
        result["flood_mb_s"] = stats["bytes"] / MiB / stats["seconds"]
        result["flood_errors"] = stats["errors"]
        result["node_cpu"] = (cpu_seconds(node.proc.pid) - cpu0) / wall
    finally:
        node.stop()
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    for case in ("alone", "with_flood"):
        p = result[case]
        print(
            f"probe {case:<10} n={p['n']:>6} p50={p['p50']:7.2f} ms p99={p['p99']:7.2f} ms "
            f"p99.9={p['p999']:7.2f} ms max={p['max']:7.2f} ms"
        )
    print(
        f"flood {result['flood_mb_s']:.1f} MB/s (errors {result['flood_errors']}), "
        f"node cpu {result['node_cpu']:.0%}"
    )


if __name__ == "__main__":
    main()
