"""Shared helpers for the log tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from broker.log import LogConfig, ManualClock, PartitionLog
from protocol.records import BatchView, Compression, Record, build_batch, scan_batches

T0 = 1_700_000_000_000
TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def small_config(**overrides: str) -> LogConfig:
    props = {"segment.bytes": "4096", "index.interval.bytes": "256", "segment.index.bytes": "4096"}
    props.update(overrides)
    return LogConfig.from_properties(props)


def batch(
    n: int = 3,
    *,
    ts: int = T0,
    value_size: int = 40,
    compression: Compression = Compression.NONE,
    tag: int = 0,
    **kw: object,
) -> bytes:
    recs = [
        Record(
            key=f"k{tag}-{i}".encode(), value=bytes([65 + i % 26]) * value_size, timestamp_delta=i
        )
        for i in range(n)
    ]
    return build_batch(recs, base_timestamp=ts, compression=compression, **kw)  # type: ignore[arg-type]


def open_log(
    tmp: Path, config: LogConfig | None = None, clock: ManualClock | None = None, **kw: object
) -> PartitionLog:
    return PartitionLog.open(
        tmp,
        "topic",
        0,
        TOPIC_ID,
        config or small_config(),
        clock or ManualClock(T0),
        **kw,  # type: ignore[arg-type]
    )


def views(buffers: list[bytes | bytearray | memoryview]) -> list[BatchView]:
    out = []
    for buf in buffers:
        out.extend(scan_batches(buf))
    return out


def fill(plog: PartitionLog, count: int, *, epoch: int = 0, ts: int = T0, n: int = 3) -> None:
    for i in range(count):
        plog.append_as_leader(batch(n, ts=ts + i, tag=i), epoch, now_ms=ts + i)
        plog.high_watermark = plog.log_end_offset
