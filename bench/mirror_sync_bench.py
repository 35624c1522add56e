"""Produce latency with synchronous mirroring (issue 30 item 1) against asynchronous, one run.

    python -m bench.mirror_sync_bench [--records 500] [--rate 200] [--json FILE]

A kmirror source node and a kmirror destination node on loopback; the destination mirrors two
one-partition topics of the source: ``sync`` (``mirror.sync.enable=true``) and ``async`` (not).
A confluent-kafka producer (acks=all, idempotent, linger.ms=0) writes ``--records`` records to
each at ``--rate`` records/s, one at a time in flight, and the time from ``produce()`` to its
delivery report is recorded. Printed: p50/p99/max of each and the difference, and the source's
own view (``kmirror_mirror_sync_wait_seconds``: the wait after the ISR). Then, for each topic,
a producer at the same rate with the source killed -9 mid-stream: how many acknowledged records
the destination lacks after failover (0 expected for ``sync``; ``async`` shows the RPO that
synchronous mirroring removes).
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
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.mirror_helpers import (
    create_mirror,
    end_offsets,
    mirror_tool,
    scrape,
    total,
    write_mirror_config,
)
from tests.integration.node import Node


def _wait(what: str, cond: Any, timeout: float, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(step)


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(60)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _latencies(bootstrap: str, topic: str, n: int, rate: float) -> list[float]:
    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0}
    )
    assert p.flush(0) == 0
    p.produce(topic, b"warm-up")
    p.flush(30)
    out: list[float] = []
    for i in range(n):
        start = time.perf_counter()
        done: list[Any] = []
        p.produce(topic, b"v%06d" % i, on_delivery=lambda e, m, d=done: d.append(e))
        p.flush(60)
        if done and done[0] is None:
            out.append(time.perf_counter() - start)
        time.sleep(max(0.0, 1 / rate - (time.perf_counter() - start)))
    return out


def _kill_round(
    base: Path, dst: Node, topic_config: dict[str, str], name: str, rate: float
) -> tuple[int, int]:
    """A fresh source; kill -9 after 2 s of a steady producer; failover: (acknowledged,
    acknowledged but missing on the destination)."""
    src = Node(base / f"kill-{name}")
    src.start()
    try:
        _create(src.bootstrap, name, topic_config)
        create_mirror(
            dst,
            f"k-{name}",
            write_mirror_config(base / f"k-{name}.properties", src.bootstrap),
            name,
        )
        _wait(
            "the mirror to fetch",
            lambda: end_offsets(dst.bootstrap, name, 1, missing_ok=True) == {0: 0},
            30,
        )
        if topic_config:
            _wait(
                "in sync",
                lambda: total(scrape(src), "kmirror_mirror_sync_in_sync_mirrors", topic=name) == 1,
                30,
            )
        acked: list[tuple[int, bytes]] = []
        p = Producer(
            {
                "bootstrap.servers": src.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
            }
        )
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < 2.0:
            p.produce(
                name,
                b"v%06d" % i,
                on_delivery=lambda e, m: (
                    acked.append((m.offset(), m.value())) if e is None else None
                ),
            )
            p.poll(0)
            i += 1
            time.sleep(1 / rate)
        src.kill()
        p.purge(in_queue=True, in_flight=True)
        p.flush(1)
    finally:
        src.kill()
    mirror_tool(dst, "--remove", "--topic", name, "--mirror", f"k-{name}")
    time.sleep(2)
    c = Consumer(
        {"bootstrap.servers": dst.bootstrap, "group.id": "b", "auto.offset.reset": "earliest"}
    )
    c.assign([TopicPartition(name, 0, 0)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 20
    end = end_offsets(dst.bootstrap, name, 1)[0]
    while time.monotonic() < deadline and c.position([TopicPartition(name, 0)])[0].offset < end:
        for m in c.consume(500, timeout=0.5):
            if m.error() is None:
                got[m.offset()] = m.value()
    c.close()
    return len(acked), sum(1 for off, v in acked if got.get(off) != v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="sync-bench-"))
    src, dst = Node(base / "src"), Node(base / "dst")
    result: dict[str, Any] = {"bench": "mirror_sync", "date": datetime.datetime.now().isoformat()}
    try:
        src.start()
        dst.start()
        _create(src.bootstrap, "sync", {"mirror.sync.enable": "true"})
        _create(src.bootstrap, "async", {})
        create_mirror(
            dst, "dr", write_mirror_config(base / "m.properties", src.bootstrap), "sync", "async"
        )
        _wait(
            "the mirror in sync",
            lambda: total(scrape(src), "kmirror_mirror_sync_in_sync_mirrors", topic="sync") == 1,
            60,
        )
        for topic in ("async", "sync"):
            lat = _latencies(src.bootstrap, topic, args.records, args.rate)
            ms = [x * 1000 for x in lat]
            row = {
                "n": len(ms),
                "p50_ms": _pct(ms, 0.5),
                "p99_ms": _pct(ms, 0.99),
                "max_ms": max(ms),
                "mean_ms": statistics.mean(ms),
            }
            result[topic] = row
            print(
                f"{topic:>5}: n={row['n']} p50 {row['p50_ms']:.2f} ms, "
                f"p99 {row['p99_ms']:.2f} ms, max {row['max_ms']:.2f} ms"
            )
        s = scrape(src)
        count = total(s, "kmirror_mirror_sync_wait_seconds_count")
        mean_wait = total(s, "kmirror_mirror_sync_wait_seconds_sum") / count if count else 0.0
        result["source_mean_sync_wait_ms"] = mean_wait * 1000
        result["added_p50_ms"] = result["sync"]["p50_ms"] - result["async"]["p50_ms"]
        result["added_p99_ms"] = result["sync"]["p99_ms"] - result["async"]["p99_ms"]
        print(
            f"added by sync: p50 {result['added_p50_ms']:+.2f} ms, "
            f"p99 {result['added_p99_ms']:+.2f} ms; the source's mean wait for the mirror "
            f"{mean_wait * 1000:.2f} ms over {count:.0f} produces"
        )
        for name, cfg in (("kill-async", {}), ("kill-sync", {"mirror.sync.enable": "true"})):
            acked, lost = _kill_round(base, dst, cfg, name, args.rate * 2)
            result[name] = {"acknowledged": acked, "lost": lost}
            print(
                f"{name}: {acked} acknowledged before kill -9, "
                f"{lost} missing on the destination after failover"
            )
    finally:
        dst.kill()
        src.kill()
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
