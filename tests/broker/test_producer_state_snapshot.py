"""Producer snapshots: Kafka's byte layout, round trips, corruption, retention, reload."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from crc32c import crc32c

from broker.log.clock import ManualClock
from broker.log.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
    read_snapshot,
    snapshot_path,
)
from broker.log.producer_state import (
    DuplicateInfo,
    OngoingTxn,
    ProducerStateError,
    ProducerStateManager,
)
from protocol.records import BatchView, Record, build_batch, build_end_txn_marker

T0 = 1_700_000_000_000


def data(
    count: int, *, pid: int, seq: int, offset: int, epoch: int = 0, txn: bool = False
) -> BatchView:
    return BatchView(
        build_batch(
            [Record(value=b"x")] * count,
            base_offset=offset,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=txn,
            base_timestamp=T0,
        )
    )


def commit(*, pid: int, offset: int, epoch: int = 0) -> BatchView:
    return BatchView(
        build_end_txn_marker(
            True,
            producer_id=pid,
            producer_epoch=epoch,
            coordinator_epoch=9,
            base_offset=offset,
            timestamp=T0 + 1,
        )
    )


def i(value: int, size: int) -> bytes:
    return value.to_bytes(size, "big", signed=True)


def test_byte_layout_matches_kafka(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, ManualClock(T0))
    psm.on_append(data(3, pid=7, seq=10, offset=0, epoch=2), 100, 102)
    psm.on_append(data(1, pid=5, seq=0, offset=0, txn=True), 103, 103)
    path = psm.take_snapshot(104)
    assert path.name == "00000000000000000104.snapshot"

    def entry(pid: int, epoch: int, seq: int, last: int, delta: int, txn: int) -> bytes:
        return (
            i(pid, 8)
            + i(epoch, 2)
            + i(seq, 4)
            + i(last, 8)
            + i(delta, 4)
            + i(T0, 8)
            + i(-1, 4)  # coordinator epoch: no marker seen yet
            + i(txn, 8)
        )

    # Entries sorted by producer id (Kafka's order is its hash map's; any order reads back).
    body = i(2, 4) + entry(5, 0, 0, 103, 0, 103) + entry(7, 2, 12, 102, 2, -1)
    expected = i(1, 2) + crc32c(body).to_bytes(4, "big") + body
    assert path.read_bytes() == expected
    assert len(expected) == 10 + 2 * 46


def test_round_trip_restores_state(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    live = ProducerStateManager(tmp_path, clock)
    live.on_append(data(2, pid=1, seq=0, offset=0), 0, 1)
    live.on_append(data(2, pid=1, seq=2, offset=0), 2, 3)
    live.on_append(data(1, pid=2, seq=0, offset=0, txn=True), 4, 4)
    live.on_append(data(1, pid=3, seq=0, offset=0, txn=True), 5, 5)
    live.on_append(commit(pid=3, offset=6), 6, 6)
    live.take_snapshot()
    assert live.latest_snapshot_offset() == 7

    loaded = ProducerStateManager(tmp_path, clock)
    assert loaded.load_latest_snapshot(100) == 7
    assert loaded.map_end_offset == 7
    for pid in (1, 2, 3):
        a, b = live.last_entry(pid), loaded.last_entry(pid)
        assert a is not None and b is not None
        assert a.to_snapshot() == b.to_snapshot()
    assert loaded.ongoing_transactions() == [OngoingTxn(2, 4)]
    # A producer seen only through a marker has no batch metadata: the snapshot says -1.
    live.on_append(commit(pid=4, offset=7, epoch=3), 7, 7)
    live.take_snapshot()
    again = ProducerStateManager(tmp_path, clock)
    assert again.load_latest_snapshot(100) == 8
    marker_only = again.last_entry(4)
    assert marker_only is not None and len(marker_only.batches) == 0
    assert marker_only.producer_epoch == 3 and marker_only.coordinator_epoch == 9
    with pytest.raises(ProducerStateError):
        again.check(data(1, pid=4, seq=1, offset=0, epoch=3))
    assert again.check(data(1, pid=4, seq=0, offset=0, epoch=3)) is None
    # Only the newest batch of each producer survives a snapshot (as in Kafka).
    assert loaded.check(data(2, pid=1, seq=2, offset=0)) == DuplicateInfo(2, 3, T0)
    assert live.check(data(2, pid=1, seq=0, offset=0)) == DuplicateInfo(0, 1, T0)
    assert loaded.check(data(1, pid=1, seq=4, offset=0)) is None


def test_recovery_replays_the_tail(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = [
        data(1, pid=1, seq=0, offset=0, txn=True),
        data(1, pid=2, seq=0, offset=1),
        data(1, pid=1, seq=1, offset=2, txn=True),
        commit(pid=1, offset=3),
        data(1, pid=2, seq=1, offset=4),
    ]
    live = ProducerStateManager(tmp_path, clock)
    for n, batch in enumerate(log):
        live.replay_batch(batch)
        if n == 1:
            live.take_snapshot()  # at offset 2
    recovered = ProducerStateManager(tmp_path, clock)
    start = recovered.truncate_and_reload(0, 5)
    assert start == 2
    for batch in log:
        if batch.base_offset >= start:
            recovered.replay_batch(batch)
    assert {p: e.to_snapshot() for p, e in recovered.active_producers.items()} == {
        p: e.to_snapshot() for p, e in live.active_producers.items()
    }


def test_truncate_and_reload_drops_snapshots_out_of_range(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, ManualClock(T0), retained_snapshots=10)
    for at in (0, 5, 10, 15):
        psm.on_append(data(1, pid=at + 1, seq=0, offset=0), at, at)
        psm.take_snapshot(at + 1)
    assert psm.snapshot_offsets() == [1, 6, 11, 16]
    start = psm.truncate_and_reload(1, 12)
    # Kafka drops snapshots above the log end and at or below the log start.
    assert psm.snapshot_offsets() == [6, 11]
    assert start == 11 and psm.map_end_offset == 11
    assert sorted(psm.active_producers) == [1, 6, 11]
    # Nothing usable: replay everything from the log start.
    psm.truncate_and_reload(3, 4)
    assert psm.snapshot_offsets() == []
    assert psm.map_end_offset == 3 and psm.producer_count == 0


def test_truncate_and_reload_keeps_state_already_at_the_end(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, ManualClock(T0))
    psm.on_append(data(1, pid=1, seq=0, offset=0), 0, 0)  # never snapshotted
    assert psm.truncate_and_reload(0, 1) == 1
    assert psm.producer_count == 1


def test_truncate_fully(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, ManualClock(T0))
    psm.on_append(data(1, pid=1, seq=0, offset=0, txn=True), 0, 0)
    psm.take_snapshot()
    psm.truncate_fully_and_start_at(50)
    assert psm.snapshot_offsets() == [] and psm.producer_count == 0
    assert psm.first_unstable_offset() is None and psm.map_end_offset == 50


def test_keeps_the_newest_two_and_deletes_before(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, ManualClock(T0))
    for at in (3, 1, 8, 5):
        psm.take_snapshot(at)
    assert psm.snapshot_offsets() == [5, 8]
    psm.delete_snapshots_before(8)
    assert psm.snapshot_offsets() == [8]
    assert psm.oldest_snapshot_offset() == psm.latest_snapshot_offset() == 8


def test_corrupt_snapshot_falls_back_to_an_older_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    psm = ProducerStateManager(tmp_path, ManualClock(T0))
    psm.on_append(data(1, pid=1, seq=0, offset=0), 0, 0)
    psm.take_snapshot()  # at 1: producer 1
    psm.on_append(data(1, pid=2, seq=0, offset=0), 1, 1)
    newest = psm.take_snapshot()  # at 2: producers 1, 2
    raw = bytearray(newest.read_bytes())
    raw[-1] ^= 0x01
    newest.write_bytes(raw)

    fresh = ProducerStateManager(tmp_path, ManualClock(T0))
    with caplog.at_level(logging.WARNING):
        assert fresh.load_latest_snapshot(10) == 1
    assert "CRC mismatch" in caplog.text
    assert not newest.exists()
    assert sorted(fresh.active_producers) == [1]

    # With every snapshot corrupt, recovery falls back to a full replay.
    only = snapshot_path(tmp_path, 1)
    only.write_bytes(only.read_bytes()[:-3])
    assert fresh.truncate_and_reload(0, 10) == 0
    assert fresh.snapshot_offsets() == [] and fresh.producer_count == 0


def test_decode_rejects_malformed_files() -> None:
    good = encode_snapshot([SnapshotEntry(1, 0, 0, 0, 0, T0, -1, -1)])
    assert decode_snapshot(good) == [SnapshotEntry(1, 0, 0, 0, 0, T0, -1, -1)]
    with pytest.raises(CorruptSnapshotError, match="version"):
        decode_snapshot(b"\x00\x02" + good[2:])
    with pytest.raises(CorruptSnapshotError, match="header"):
        decode_snapshot(good[:5])
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        decode_snapshot(good + b"\x00")
    # A count the file cannot hold, with a CRC that matches (only a hand-made file does this).
    body = i(3, 4) + good[10:]
    with pytest.raises(CorruptSnapshotError, match="entries"):
        decode_snapshot(i(1, 2) + crc32c(body).to_bytes(4, "big") + body)
    assert decode_snapshot(encode_snapshot([])) == []


def test_expired_producers_are_not_loaded(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    psm = ProducerStateManager(tmp_path, clock, max_producer_id_expiration_ms=1000)
    psm.on_append(data(1, pid=1, seq=0, offset=0), 0, 0)
    psm.on_append(data(1, pid=2, seq=0, offset=0, txn=True), 1, 1)
    psm.take_snapshot()
    clock.advance(5000)
    fresh = ProducerStateManager(tmp_path, clock, max_producer_id_expiration_ms=1000)
    fresh.load_latest_snapshot(2)
    assert sorted(fresh.active_producers) == [2]  # the open transaction keeps it


def test_only_snapshot_files_are_listed(tmp_path: Path) -> None:
    for name in (
        "00000000000000000004.snapshot",
        "00000000000000000009.snapshot.deleted",
        "00000000000000000010.snapshot.tmp",
        "leader.snapshot",
        "00000000000000000000.log",
    ):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "00000000000000000007.snapshot").mkdir()
    assert list(list_snapshots(tmp_path)) == [4]
    assert list_snapshots(tmp_path / "missing") == {}
    with pytest.raises(CorruptSnapshotError, match=r"00000000000000000004\.snapshot"):
        read_snapshot(tmp_path / "00000000000000000004.snapshot")
