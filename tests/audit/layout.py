"""Build Kafka-layout segment directories from batches made with protocol.records.build_batch."""

from __future__ import annotations

import io
from collections.abc import Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from broker.cli.dump_log import dump_log
from protocol.records import (
    Compression,
    Record,
    build_batch,
    build_end_txn_marker,
    build_mirror_pid_reset,
)

T0 = 1_700_000_000_000


@dataclass(frozen=True)
class Spec:
    """One batch to build: offsets are assigned in order from the log start."""

    records: int = 3
    epoch: int = 0
    producer_id: int = -1
    transactional: bool = False
    commit_marker: bool = False
    pid_reset: bool = False
    compression: Compression = Compression.NONE
    gap_before: int = 0


def build_log(specs: Sequence[Spec], start: int = 0, ts_step: int = 1000) -> list[bytes]:
    out: list[bytes] = []
    offset = start
    for k, spec in enumerate(specs):
        offset += spec.gap_before
        ts = T0 + k * ts_step
        if spec.commit_marker:
            batch = build_end_txn_marker(
                True,
                producer_id=spec.producer_id,
                producer_epoch=0,
                coordinator_epoch=1,
                base_offset=offset,
                partition_leader_epoch=spec.epoch,
                timestamp=ts,
            )
        elif spec.pid_reset:
            batch = build_mirror_pid_reset(
                "src-cluster", base_offset=offset, partition_leader_epoch=spec.epoch, timestamp=ts
            )
        else:
            recs = [
                Record(key=b"k%d" % i, value=b"value-%d-%d" % (k, i)) for i in range(spec.records)
            ]
            batch = build_batch(
                recs,
                base_offset=offset,
                partition_leader_epoch=spec.epoch,
                compression=spec.compression,
                producer_id=spec.producer_id,
                producer_epoch=0 if spec.producer_id >= 0 else -1,
                base_sequence=0 if spec.producer_id >= 0 else -1,
                is_transactional=spec.transactional,
                base_timestamp=ts,
            )
        out.append(batch)
        offset += int.from_bytes(batch[23:27], "big", signed=True) + 1
    return out


def write_partition(
    log_dir: Path, topic: str, partition: int, batches: Sequence[bytes], segment_batches: int = 0
) -> Path:
    """Write ``batches`` as segments of ``segment_batches`` batches each (0: one segment)."""
    pdir = log_dir / f"{topic}-{partition}"
    pdir.mkdir(parents=True, exist_ok=True)
    per = segment_batches or max(len(batches), 1)
    groups = [batches[i : i + per] for i in range(0, len(batches), per)] or [[]]
    for group in groups:
        base = int.from_bytes(group[0][:8], "big") if group else 0
        (pdir / f"{base:020d}.log").write_bytes(b"".join(group))
    return pdir


def dump_text(pdir: Path, deep: bool = True) -> str:
    """What kafka-dump-log.sh prints for every segment of a partition directory."""
    buf = io.StringIO()
    with redirect_stdout(buf):
        for seg in sorted(pdir.glob("*.log")):
            print(f"Dumping {seg}")
            dump_log(seg, print_data=False, deep=deep, out=buf, err=io.StringIO())
    return buf.getvalue()


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def kip_sample_lines(spec: Path) -> list[str]:
    """The kafka-dump-log lines in a KIP-style text: the first ``Dumping`` block, up to the
    first line that is not dump output."""
    lines = spec.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Dumping "))
    out = []
    for line in lines[start:]:
        if not (line.startswith(("Dumping", "Log starting", "baseOffset", "| offset"))):
            break
        out.append(line)
    return out


# Partitions of the standard scenario and the verdict each must get.
EXPECTED = {
    ("orders", 0): "IDENTICAL",
    ("orders", 1): "LAGGING",
    ("orders", 2): "DIVERGED",  # one flipped payload byte in the destination
    ("orders", 3): "DIVERGED",  # leader-epoch history differs from offset EPOCH_SPLIT
    ("audit-only-src", 0): "MISSING",
}
FLIPPED_BATCH = 4
LAG_BATCHES = 3
EPOCH_SPLIT_BATCH = 6


def scenario_specs() -> list[Spec]:
    return (
        [Spec(records=3, epoch=0)] * 4
        + [Spec(records=2, epoch=1, producer_id=9, transactional=True)]
        + [Spec(records=2, epoch=1, producer_id=9, commit_marker=True)]
        + [Spec(records=4, epoch=2)] * 3
        + [Spec(records=1, epoch=2, gap_before=5)]
        + [Spec(records=5, epoch=3, compression=Compression.GZIP)] * 2
    )


def build_scenario(root: Path, segment_batches: int = 4) -> dict[str, list[bytes]]:
    """Source and destination log dirs (two source nodes) for the EXPECTED partitions."""
    src, dst = root / "src", root / "dst"
    log = build_log(scenario_specs())
    for p in range(4):
        write_partition(src / "node1", "orders", p, log, segment_batches)
        # A follower copy that is behind: merged with node1's, it changes nothing.
        write_partition(src / "node2", "orders", p, log[:5], segment_batches)
    write_partition(dst, "orders", 0, log, segment_batches + 1)
    write_partition(dst, "orders", 1, log[:-LAG_BATCHES], segment_batches)
    pdir = write_partition(dst, "orders", 2, log, segment_batches)
    # Flip a byte inside the records of one batch (past its 61-byte header).
    seg = pdir / f"{int.from_bytes(log[4][:8], 'big'):020d}.log"
    flip_byte(seg, 70)
    other = build_log(
        [
            s
            if k < EPOCH_SPLIT_BATCH
            else Spec(
                s.records,
                7,
                s.producer_id,
                s.transactional,
                s.commit_marker,
                s.pid_reset,
                s.compression,
                s.gap_before,
            )
            for k, s in enumerate(scenario_specs())
        ]
    )
    write_partition(dst, "orders", 3, other, segment_batches)
    write_partition(src / "node1", "audit-only-src", 0, log[:2])
    return {"log": log, "epoch_diverged": other}


def dump_tree(src_root: Path, out_file: Path) -> None:
    """kafka-dump-log text of every partition directory under ``src_root``, in one file."""
    text = "".join(
        dump_text(pdir) for pdir in sorted(p for p in src_root.rglob("*-[0-9]*") if p.is_dir())
    )
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(text, encoding="utf-8")
