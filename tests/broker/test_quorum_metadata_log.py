"""The ``ReplicatedLog`` contract, checked on ``MemoryLog`` (what the Raft simulation runs on)
and on ``MetadataLog`` (the real ``__cluster_metadata-0`` partition), so the two agree."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.log import LogConfig, ManualClock, PartitionLog
from broker.quorum.metadata_log import MetadataLog, snapshot_name
from broker.raft.messages import LogEntry, OffsetAndEpoch, SnapshotId
from broker.raft.replicated_log import LogError, MemoryLog
from protocol.records import ControlType, iter_records, parse_control_record, scan_batches

T0 = 1_700_000_000_000
CONFIG = LogConfig.from_properties({"segment.bytes": "8192", "retention.ms": "-1"})


def open_plog(path: Path, clean: bool = True, recovery_point: int = 0) -> PartitionLog:
    return PartitionLog.open(
        path,
        "__cluster_metadata",
        0,
        None,
        CONFIG,
        ManualClock(T0),
        clean_shutdown=clean,
        recovery_point=recovery_point,
    )


@pytest.fixture(params=["memory", "metadata"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    opened: list[PartitionLog] = []

    def new() -> Any:
        if request.param == "memory":
            return MemoryLog()
        plog = open_plog(tmp_path)
        opened.append(plog)
        return MetadataLog(plog, lambda: T0)

    yield new
    for plog in opened:
        plog.close()


def test_appends_reads_and_epochs(make: Callable[[], Any]) -> None:
    log = make()
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (0, 0, 0)
    assert log.append_as_leader([b"lc"], 1, control=True) == 0
    assert log.append_as_leader([b"a", b"b"], 1) == 2
    log.append_as_follower([LogEntry(3, 3, b"lc3", True), LogEntry(4, 3, b"c")])
    assert log.append_as_leader([], 3) == 4
    assert log.end_offset == 5 and log.last_fetched_epoch == 3
    assert log.read(1, 10) == [
        LogEntry(1, 1, b"a"),
        LogEntry(2, 1, b"b"),
        LogEntry(3, 3, b"lc3", True),
        LogEntry(4, 3, b"c"),
    ]
    assert log.read(0, 2) == [LogEntry(0, 1, b"lc", True), LogEntry(1, 1, b"a")]
    assert log.read(5, 10) == []
    # Kafka's epoch lookup: the largest epoch <= asked and where it ends
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    with pytest.raises(LogError):
        log.append_as_leader([b"x"], 2)  # below the last epoch
    with pytest.raises(LogError):
        log.append_as_follower([LogEntry(9, 3, b"gap")])
    with pytest.raises(LogError):
        log.read(6, 1)


def test_truncation_high_watermark_and_flush(make: Callable[[], Any]) -> None:
    log = make()
    log.append_as_leader([b"a", b"b", b"c"], 1)
    log.append_as_leader([b"d", b"e"], 2)
    log.update_high_watermark(4)
    assert log.high_watermark == 4
    log.update_high_watermark(99)
    assert log.high_watermark == 5  # never past the end
    log.flush()
    assert log.flushed_offset == 5
    log.truncate_to(3)
    assert log.end_offset == 3 and log.high_watermark == 3 and log.last_fetched_epoch == 1
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)
    log.truncate_to(7)  # past the end: nothing happens
    assert log.end_offset == 3
    log.append_as_follower([LogEntry(3, 4, b"f")])
    assert log.read(2, 5) == [LogEntry(2, 1, b"c"), LogEntry(3, 4, b"f")]


def test_snapshots_move_the_log_start(make: Callable[[], Any]) -> None:
    log = make()
    for epoch in (1, 2, 3):
        log.append_as_leader([bytes([epoch]) * 10] * 4, epoch)
    log.update_high_watermark(10)
    with pytest.raises(LogError):
        log.create_snapshot(SnapshotId(11, 3), b"above the HW")
    state = random.Random(3).randbytes(1_300_000)  # several chunks on disk
    log.create_snapshot(SnapshotId(6, 2), state)
    assert log.latest_snapshot_id == SnapshotId(6, 2)
    assert log.read_snapshot(SnapshotId(6, 2)) == state
    assert log.read_snapshot(SnapshotId(5, 2)) is None
    with pytest.raises(LogError):
        log.create_snapshot(SnapshotId(6, 2), b"not after the latest")
    assert log.delete_before_snapshot()
    assert log.start_offset == 6 and log.end_offset == 12
    assert [e.offset for e in log.read(6, 100)] == list(range(6, 12))
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(6, 2)  # below the log: its start
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(8, 2)
    assert not log.delete_before_snapshot()
    with pytest.raises(LogError):
        log.truncate_to(5)
    # a follower far behind installs the leader's snapshot: the log restarts there
    log.install_snapshot(SnapshotId(40, 7), b"leader state")
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (40, 40, 7)
    assert log.read_snapshot(SnapshotId(40, 7)) == b"leader state"
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(40, 7)
    log.append_as_follower([LogEntry(40, 8, b"next")])
    assert log.read(40, 5) == [LogEntry(40, 8, b"next")]


def test_the_metadata_log_is_kafkas_layout_and_survives_a_restart(tmp_path: Path) -> None:
    plog = open_plog(tmp_path)
    log = MetadataLog(plog, lambda: T0)
    log.append_as_leader([b"leader-change"], 5, control=True)
    log.append_as_leader([b"r1", b"r2"], 5)
    log.update_high_watermark(3)
    log.create_snapshot(SnapshotId(3, 5), b"state")
    log.append_as_leader([b"r3"], 5)
    log.flush()
    plog.close()

    pdir = tmp_path / "__cluster_metadata-0"
    snap = (pdir / snapshot_name(SnapshotId(3, 5))).read_bytes()
    kinds = [b.is_control for b in scan_batches(snap)]
    assert kinds[0] and kinds[-1] and not any(kinds[1:-1])
    first = next(iter_records(next(scan_batches(snap))))
    assert parse_control_record(first.key, first.value).type == ControlType.SNAPSHOT_HEADER
    seg = b"".join(p.read_bytes() for p in sorted(pdir.glob("*.log")))
    batches = list(scan_batches(seg))
    assert [(b.base_offset, b.partition_leader_epoch, b.is_control) for b in batches] == [
        (0, 5, True),
        (1, 5, False),
        (3, 5, False),
    ]

    plog = open_plog(tmp_path, clean=False, recovery_point=4)
    again = MetadataLog(plog, lambda: T0)
    assert again.end_offset == 4 and again.latest_snapshot_id == SnapshotId(3, 5)
    assert again.read(1, 10) == [
        LogEntry(1, 5, b"r1"),
        LogEntry(2, 5, b"r2"),
        LogEntry(3, 5, b"r3"),
    ]
    assert again.read_snapshot(SnapshotId(3, 5)) == b"state"
    plog.close()


def test_a_half_written_snapshot_is_discarded_and_a_log_behind_its_snapshot_restarts_there(
    tmp_path: Path,
) -> None:
    pdir = tmp_path / "__cluster_metadata-0"
    pdir.mkdir()
    (pdir / "00000000000000000009-0000000002.checkpoint.part").write_bytes(b"torn")
    plog = open_plog(tmp_path)
    log = MetadataLog(plog, lambda: T0)
    assert not list(pdir.glob("*.part"))
    log.install_snapshot(SnapshotId(9, 2), b"s")
    plog.close()
    # the segments vanish (e.g. a crash right after the snapshot was written): the snapshot
    # is still the truth
    for seg in pdir.glob("*.log"):
        seg.unlink()
    plog = open_plog(tmp_path, clean=False)
    log = MetadataLog(plog, lambda: T0)
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (9, 9, 2)
    plog.close()


def test_kip853_control_entries_and_snapshot_voters(make: Callable[[], Any]) -> None:
    """Voters / KRaftVersion records keep their control type through the log, ``read_control``
    finds only them, and a snapshot holds the set given with it without changing its data."""
    from broker.raft.messages import KRAFT_VERSION, KRAFT_VOTERS

    log = make()
    log.append_as_leader([b"lc"], 1, control=True)
    log.append_as_leader([b"\x00\x00\x00\x01\x00"], 1, control=True, control_type=KRAFT_VERSION)
    log.append_as_leader([b"a"], 1)
    log.append_as_follower([LogEntry(3, 1, b"voters", True, KRAFT_VOTERS), LogEntry(4, 1, b"b")])
    control = log.read_control(0)
    assert [(e.offset, e.control_type) for e in control] == [(1, KRAFT_VERSION), (3, KRAFT_VOTERS)]
    assert log.read_control(2) == [control[1]]
    assert log.read(3, 1)[0].is_voters
    log.flush()
    log.update_high_watermark(5)
    sid = SnapshotId(5, 1)
    kraft = ((KRAFT_VERSION, b"\x00\x00\x00\x01\x00"), (KRAFT_VOTERS, b"voters"))
    log.create_snapshot(sid, b"state", kraft)
    assert log.snapshot_control(sid) == kraft
    assert log.read_snapshot(sid) == b"state"
