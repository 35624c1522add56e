"""Mirror-audit throughput: the Spark job on local[2] against one Python process, same files.

Run with ``python -m bench.audit_bench`` (needs pyspark and Java 17). It writes ~1 GB of
identical source and destination segments (with offset indexes, as Kafka does) under /tmp,
then measures, in this one run:

- the disk: reading the files after asking the kernel to drop them from the page cache
  (``posix_fadvise(DONTNEED)``, "cold-ish"), then again from the cache;
- one process: the audit's own per-range scanner (headers + CRC32C) over every file in turn;
- Spark local[2]: the whole audit (scan, shuffle, compare, reports collected), best of
  ``--runs`` runs, with the session already started (its start-up is printed apart).

The files are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

from audit.job import AuditConfig, plan, run_audit
from audit.scan_segments import scan_range
from audit.session import start_session
from audit.tasks import Kind, ScanTask, Side
from protocol.records import Record, build_batch

MiB = 1 << 20
_I64 = struct.Struct(">q")
_INDEX = struct.Struct(">ii")


def _templates(batch_bytes: int, count: int = 16) -> list[bytes]:
    out = []
    per_record = 100
    n = max(1, (batch_bytes - 61) // (per_record + 10))
    for k in range(count):
        recs = [
            Record(key=b"key-%05d" % i, value=bytes([65 + (k + i) % 26]) * per_record)
            for i in range(n)
        ]
        out.append(
            build_batch(
                recs, base_offset=0, partition_leader_epoch=3, base_timestamp=1_700_000_000_000 + k
            )
        )
    return out


def write_segments(
    root: Path, partitions: int, bytes_per_partition: int, segment_bytes: int, batch_bytes: int
) -> None:
    templates = _templates(batch_bytes)
    for p in range(partitions):
        pdir = root / f"bench-{p}"
        pdir.mkdir(parents=True)
        offset = 0
        written = 0
        k = 0
        while written < bytes_per_partition:
            base = offset
            seg = bytearray()
            index = bytearray()
            last_indexed = -4096
            while len(seg) < segment_bytes and written + len(seg) < bytes_per_partition:
                t = templates[k % len(templates)]
                k += 1
                pos = len(seg)
                seg += t
                _I64.pack_into(seg, pos, offset)
                count = int.from_bytes(t[57:61], "big")
                if pos - last_indexed >= 4096:
                    index += _INDEX.pack(offset + count - 1 - base, pos)
                    last_indexed = pos
                offset += count
            (pdir / f"{base:020d}.log").write_bytes(seg)
            (pdir / f"{base:020d}.index").write_bytes(index)
            written += len(seg)


def _files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.log"))


def read_speed(paths: list[Path], drop_cache: bool) -> float:
    total = 0
    start = time.perf_counter()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            if drop_cache and hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                start_file = time.perf_counter()
                start += start_file - start_file  # the advice itself is not timed below
            pos = 0
            while True:
                block = os.pread(fd, 8 * MiB, pos)
                if not block:
                    break
                pos += len(block)
            total += pos
        finally:
            os.close(fd)
    return total / MiB / (time.perf_counter() - start)


def drop_cache(paths: list[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def single_process(paths: list[Path]) -> tuple[float, int]:
    start = time.perf_counter()
    batches = 0
    for path in paths:
        size = path.stat().st_size
        task = ScanTask(Side.SOURCE, Kind.SEGMENT, str(path), ".", "bench", 0, 0, 0, size)
        batches += scan_range(task).summary.batches
    return time.perf_counter() - start, batches


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--total-mb", type=int, default=1024, help="source + destination size")
    ap.add_argument("--batch-bytes", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segment-mb", type=int, default=64)
    ap.add_argument("--split-mb", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kmirror-audit-bench-", dir="/tmp"))
    try:
        per_partition = args.total_mb * MiB // 2 // args.partitions
        t = time.perf_counter()
        for side in ("src", "dst"):
            write_segments(
                root / side, args.partitions, per_partition, args.segment_mb * MiB, args.batch_bytes
            )
        paths = _files(root)
        total_mb = sum(p.stat().st_size for p in paths) / MiB
        print(
            f"wrote {total_mb:.0f} MiB in {len(paths)} segments ({args.batch_bytes}-byte batches) "
            f"in {time.perf_counter() - t:.1f}s under {root}"
        )
        drop_cache(paths)
        cold = read_speed(paths, drop_cache=False)
        warm = read_speed(paths, drop_cache=False)
        print(f"disk read, cold-ish (page cache dropped): {cold:8.0f} MB/s")
        print(f"disk read, page cache:                    {warm:8.0f} MB/s")
        seconds, batches = single_process(paths)
        single = total_mb / seconds
        print(
            f"single-process Python parse:              {single:8.0f} MB/s  "
            f"({batches} batches in {seconds:.2f}s)"
        )
        t = time.perf_counter()
        spark = start_session(args.master, "kafka-mirror-audit-bench")
        print(f"(Spark session start: {time.perf_counter() - t:.1f}s, not counted)")
        try:
            cfg = AuditConfig(
                str(root / "src"),
                str(root / "dst"),
                str(root / "out"),
                split_bytes=args.split_mb * MiB,
            )
            times = []
            for _ in range(args.runs):
                t = time.perf_counter()
                result = run_audit(spark, cfg, plan(cfg))
                times.append(time.perf_counter() - t)
                verdicts = result.counts()
                assert verdicts["IDENTICAL"] == args.partitions, verdicts
        finally:
            spark.stop()
        best = min(times)
        audit = total_mb / best
        print(
            f"Spark {args.master} audit ({result.tasks} tasks), best of {len(times)}: "
            f"{audit:8.0f} MB/s  (runs: {', '.join(f'{x:.2f}s' for x in times)})"
        )
        print(
            f"speed-up over one process: {audit / single:.2f}x (goal >= 1.7x); "
            f"first run {total_mb / times[0] / single:.2f}x"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
