"""Recovery checkpoints and producer snapshots bound what a restart after a kill -9 replays:
the periodic checkpoint fsyncs each log and snapshots its producer state at the log end, the
clean shutdown snapshots even a log without producers, and recovery replays from the newest
snapshot at or below the recovery point instead of from the active segment's base."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from broker.log import LogManager, ManualClock, ProducerStateManager
from broker.log.manager import LogSchedule
from broker.log.producer_state_loader import snapshot_producer_state
from protocol.txn_index import AbortedTxn

from .log_helpers import T0, TOPIC_ID, batch, fill, open_log, small_config
from .test_log_transactions import Writer, attach, committed_read, index_entries

BIG = {"segment.bytes": str(1 << 20)}  # one segment throughout


def _crash_copy(plog_dir: Path, dest: Path) -> Path:
    """What a kill -9 leaves: the files as they are, no close, no clean-shutdown marker."""
    copy = dest / plog_dir.name
    shutil.copytree(plog_dir, copy)
    return dest


def test_the_checkpoint_flushes_then_snapshots_at_the_log_end(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**BIG))
    psm = attach(plog)
    w = Writer(plog)
    for _ in range(5):
        w.data(7, 2, txn=False)
    assert plog.recovery_point == 0 and psm.snapshot_offsets() == []
    plog.checkpoint_recovery()
    assert plog.recovery_point == plog.log_end_offset == 10
    assert psm.snapshot_offsets() == [10]
    plog.checkpoint_recovery()  # nothing new: no new file
    assert psm.snapshot_offsets() == [10]


def test_a_crash_replays_only_what_follows_the_checkpoint(tmp_path: Path) -> None:
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    attach(plog)
    w = Writer(plog)
    for _ in range(20):
        w.data(7, 1, txn=False)
    plog.checkpoint_recovery()
    recovery_point = plog.recovery_point
    for _ in range(3):
        w.data(7, 1, txn=False)
    crashed = _crash_copy(plog.dir, tmp_path / "crashed")
    again = open_log(crashed, config, recovery_point=recovery_point)
    psm = ProducerStateManager(again.dir, ManualClock(T0))
    assert again.load_producer_state(psm) == 3  # not 23: the snapshot at the recovery point
    entry = psm.last_entry(7)
    assert entry is not None and entry.last_seq == 22
    # A retry of the last batch is still known as a duplicate.
    retry = Writer(again)
    retry.seq[7] = 22
    before = again.log_end_offset
    assert retry.data(7, 1, txn=False) == 22 and again.log_end_offset == before


def test_aborted_transactions_on_both_sides_of_the_recovery_point(tmp_path: Path) -> None:
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    attach(plog)
    w = Writer(plog)
    w.data(1, 2)
    w.data(2)
    w.end(1, commit=False)  # aborted while 2 is open: below the recovery point
    plog.checkpoint_recovery()
    recovery_point = plog.recovery_point
    w.data(3)
    w.end(2, commit=True)
    w.end(3, commit=False)  # above it: rebuilt from the marker
    w.data(4)  # left open
    entries, lso = index_entries(plog), plog.last_stable_offset
    assert entries[0] == AbortedTxn(1, 0, 3, 2) and len(entries) == 2
    crashed = _crash_copy(plog.dir, tmp_path / "crashed")
    index = next((crashed / plog.dir.name).glob("*.txnindex"))
    index.write_bytes(index.read_bytes()[:40])  # the entry written after the flush is lost
    again = open_log(crashed, config, recovery_point=recovery_point)
    psm = attach(again)
    assert index_entries(again) == entries
    assert again.last_stable_offset == lso
    assert [t.producer_id for t in psm.ongoing_transactions()] == [4]
    assert committed_read(again, 0) == committed_read(plog, 0)


def test_clean_shutdown_snapshots_a_log_without_producers(tmp_path: Path) -> None:
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    attach(plog)
    w = Writer(plog)
    for _ in range(10):
        w.data()  # no producer id: nothing to remember, but a start would read them all
    snapshot_producer_state(plog)
    assert plog.producer_state is not None
    assert plog.producer_state.snapshot_offsets() == [10]
    plog.close()
    again = open_log(tmp_path, config, clean_shutdown=True)
    assert again.load_producer_state(ProducerStateManager(again.dir, ManualClock(T0))) == 0


def test_an_empty_log_gets_no_snapshot(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**BIG))
    psm = attach(plog)
    snapshot_producer_state(plog)
    plog.checkpoint_recovery()
    assert psm.snapshot_offsets() == []


def test_the_manager_checkpoints_recovery_on_its_interval(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    schedule = LogSchedule(recovery_checkpoint_ms=5_000)
    manager = LogManager([tmp_path], small_config(**BIG), clock, schedule=schedule)
    plog = manager.get_or_create("topic", 0, TOPIC_ID)
    attach(plog)
    w = Writer(plog)
    for _ in range(4):
        w.data(9, 1, txn=False)
    manager.periodic(T0 + 1_000)
    assert plog.recovery_point == 0  # not due yet
    manager.periodic(T0 + 5_000)
    assert plog.recovery_point == 4
    assert plog.producer_state is not None
    assert plog.producer_state.snapshot_offsets() == [4]
    w.data(9, 1, txn=False)
    manager.periodic(T0 + 6_000)
    assert plog.recovery_point == 4  # the next one is due at +10 s
    manager.periodic(T0 + 10_000)
    assert plog.recovery_point == 5
    manager.close()


def _entries(seg: object) -> tuple[list[object], list[object]]:
    index, time_index = seg.index, seg.time_index  # type: ignore[attr-defined]
    return (
        [index.entry(i) for i in range(index.entries)],
        [time_index.entry(i) for i in range(time_index.entries)],
    )


def test_recovery_validates_the_active_segment_only_past_the_recovery_point(
    tmp_path: Path,
) -> None:
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    fill(plog, 40)
    plog.flush()
    recovery_point = plog.recovery_point
    fill(plog, 10, ts=T0 + 100)
    leo = plog.log_end_offset
    seg = plog.active_segment
    # A full rebuild's indexes, for comparison.
    full = tmp_path / "full"
    _crash_copy(plog.dir, full)
    expected = _entries(open_log(full, config).active_segment)
    # A byte flipped in the first batch (below the recovery point) goes unnoticed: that part
    # is trusted, as whole segments below it are; a torn last batch is still cut.
    crashed = _crash_copy(plog.dir, tmp_path / "crashed")
    log_file = crashed / plog.dir.name / seg.log_path.name
    with open(log_file, "r+b") as fh:
        fh.seek(80)
        byte = fh.read(1)
        fh.seek(80)
        fh.write(bytes([byte[0] ^ 1]))
    again = open_log(crashed, config, recovery_point=recovery_point)
    assert again.log_end_offset == leo
    assert _entries(again.active_segment) == expected
    os.truncate(log_file, os.path.getsize(log_file) - 5)
    third = open_log(crashed, config, recovery_point=recovery_point)
    assert third.log_end_offset == leo - 3  # the last batch (3 records) was torn


def test_an_index_entry_that_disagrees_with_the_log_means_validating_it_all(
    tmp_path: Path,
) -> None:
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    fill(plog, 40)
    plog.flush()
    recovery_point = plog.recovery_point
    crashed = _crash_copy(plog.dir, tmp_path / "crashed")
    pdir = crashed / plog.dir.name
    index = plog.active_segment.index
    last = index.entry(index.entries - 1)
    # Point the last entry at the wrong offset (still increasing, so sanity checks pass).
    raw = bytearray((pdir / index.path.name).read_bytes())
    at = (index.entries - 1) * 8
    raw[at : at + 4] = (last.offset - index.base_offset + 1).to_bytes(4, "big")
    (pdir / index.path.name).write_bytes(bytes(raw))
    log_file = pdir / plog.active_segment.log_path.name
    with open(log_file, "r+b") as fh:  # and corrupt the first batch: a full scan finds it
        fh.seek(80)
        byte = fh.read(1)
        fh.seek(80)
        fh.write(bytes([byte[0] ^ 1]))
    again = open_log(crashed, config, recovery_point=recovery_point)
    assert again.log_end_offset == 0


def test_a_new_txn_index_file_is_made_durable_with_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from broker.log import txn_index

    synced: list[Path] = []
    monkeypatch.setattr(txn_index, "fsync_dir", synced.append)
    index = txn_index.TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    index.append(AbortedTxn(1, 0, 3, 4))
    index.flush()
    assert synced == [tmp_path]
    index.append(AbortedTxn(1, 5, 6, 7))
    index.flush()  # the file exists since the last flush: only the file is synced
    assert synced == [tmp_path]
    index.close()


def test_recovery_resumes_in_a_segment_whose_index_a_roll_trimmed(tmp_path: Path) -> None:
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    fill(plog, 20)
    plog.flush()
    recovery_point = plog.recovery_point  # inside the segment that rolls next
    fill(plog, 20, ts=T0 + 100)
    entries = plog.active_segment.index.entries
    plog.roll()  # trims its indexes to their entries; the roll is not flushed yet
    fill(plog, 2, ts=T0 + 200)
    leo = plog.log_end_offset
    crashed = _crash_copy(plog.dir, tmp_path / "crashed")
    again = open_log(crashed, config, recovery_point=recovery_point)
    assert again.log_end_offset == leo
    assert again.segments[0].index.entries == entries


def test_an_epoch_started_below_a_stale_recovery_point_survives_a_kill(tmp_path: Path) -> None:
    """A follower truncates below its recovery point, takes the new leader's epoch there and
    rolls; a kill -9 comes before the next recovery checkpoint rewrites the file, which still
    holds the recovery point from before the truncation. Recovery trusts the segment below it
    (its index entries reached the disk at the roll), so only the epoch file can know where
    the new epoch starts: it must say 30, not where recovery resumed (a leader answering
    OffsetsForLeaderEpoch(1) with a later end would hide a follower's divergent records)."""
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    fill(plog, 40, epoch=1)  # 120 records in epoch 1
    plog.checkpoint_recovery()
    stale = plog.recovery_point
    assert plog.truncate_to(30)
    for i in range(10):  # the new leader's epoch 2 from offset 30
        plog.append_as_leader(batch(3, ts=T0 + 500 + i, tag=100 + i), 2, now_ms=T0 + 500 + i)
    plog.roll()  # the rolled segment's flush would come from the background: not yet
    for i in range(3):
        plog.append_as_leader(batch(3, ts=T0 + 600 + i, tag=200 + i), 2, now_ms=T0 + 600 + i)
    assert plog.epoch_cache.entries() == [(1, 0), (2, 30)]
    crashed = _crash_copy(plog.dir, tmp_path / "crashed")
    again = open_log(crashed, config, recovery_point=stale)
    assert again.log_end_offset == plog.log_end_offset
    assert again.epoch_cache.entries() == [(1, 0), (2, 30)]
    assert again.epoch_cache.end_offset_for(1, again.log_end_offset) == (1, 30)


def test_epochs_above_the_recovery_point_are_still_written_lazily(tmp_path: Path) -> None:
    """Without a truncation, a new epoch starts above every recovery point on file: recovery
    reassigns it from the segments, so it waits for the next flush (no write per epoch)."""
    plog = open_log(tmp_path, small_config(**BIG))
    fill(plog, 4, epoch=1)
    plog.checkpoint_recovery()
    epoch_file = plog.dir / "leader-epoch-checkpoint"
    before = epoch_file.read_text()
    plog.append_as_leader(batch(3, ts=T0 + 9), 2, now_ms=T0 + 9)
    assert epoch_file.read_text() == before
    plog.checkpoint_recovery()
    assert epoch_file.read_text() != before


def test_an_abort_entry_whose_marker_the_kill_lost_is_dropped(tmp_path: Path) -> None:
    """The .txnindex entry is written when the ABORT marker is appended, the marker itself
    through the log writer: a kill -9 may leave the entry without its marker. Recovery from a
    snapshot at the (shorter) log end must still drop it, or the transaction, still open
    after the restart, would read as aborted and a later marker for it could not be
    indexed."""
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    attach(plog)
    w = Writer(plog)
    w.data(7, 3)
    plog.checkpoint_recovery()  # fsynced, snapshot at 3 (producer 7's transaction open)
    recovery_point = plog.recovery_point
    log_size = plog.active_segment.size
    w.end(7, commit=False)
    assert index_entries(plog) == [AbortedTxn(7, 0, 3, 4)]
    crashed = _crash_copy(plog.dir, tmp_path / "crashed")
    os.truncate(crashed / plog.dir.name / plog.active_segment.log_path.name, log_size)
    again = open_log(crashed, config, recovery_point=recovery_point)
    psm = attach(again)
    assert again.log_end_offset == 3
    assert index_entries(again) == []
    assert psm.last_entry(7) is not None and again.last_stable_offset == 0  # still open
    Writer(again).end(7, commit=False)  # the coordinator's abort again: indexed once
    assert index_entries(again) == [AbortedTxn(7, 0, 3, 4)]


def test_recovering_a_segment_without_index_files_creates_none(tmp_path: Path) -> None:
    """A partition written since its last flush has no index files (they are lazy); its
    recovery keeps the rebuilt entries in memory until the next flush writes them (a restart
    of 10,000 such partitions created and preallocated 20,000 files)."""
    config = small_config(**BIG)
    plog = open_log(tmp_path, config)
    fill(plog, 30)
    seg = plog.active_segment
    assert not seg.index.path.exists() and not seg.time_index.path.exists()
    crashed = _crash_copy(plog.dir, tmp_path / "crashed")
    again = open_log(crashed, config)
    active = again.active_segment
    assert again.log_end_offset == plog.log_end_offset
    assert not active.index.path.exists() and not active.time_index.path.exists()
    expected = _entries(active)
    assert expected[0], "the rebuilt offset index has entries"
    again.flush()
    assert active.index.path.exists() and active.time_index.path.exists()
    reread = open_log(_crash_copy(again.dir, tmp_path / "third"), config, clean_shutdown=True)
    assert _entries(reread.active_segment) == expected
