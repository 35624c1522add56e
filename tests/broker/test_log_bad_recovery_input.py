"""Bad input to a restart's recovery: a recovery point past the log end, a torn producer
snapshot, a torn checkpoint file. Each is detected, logged with the file, and recovered from
the segments: never trusted, never fatal."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from broker.log import LogManager, ManualClock, ProducerStateManager
from broker.log.checkpoint import RECOVERY_POINT_CHECKPOINT
from broker.log.dir_lock import LOCK_FILE

from .log_helpers import T0, TOPIC_ID, open_log, small_config
from .test_log_transactions import Writer, attach

BIG = {"segment.bytes": str(1 << 20)}


def _crash_copy(src: Path, dest: Path) -> Path:
    """What a kill -9 leaves: the files as they are, no close, no clean-shutdown marker."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(LOCK_FILE))
    return dest


def _flip_byte(path: Path, at: int) -> None:
    with path.open("r+b") as fh:
        fh.seek(at)
        byte = fh.read(1)
        fh.seek(at)
        fh.write(bytes([byte[0] ^ 1]))


def _written(tmp_path: Path, batches: int) -> tuple[Path, int]:
    """A log of idempotent batches (producer 7, one record each), fsynced with a snapshot
    at its end; returns the partition dir and the log end."""
    plog = open_log(tmp_path / "live", small_config(**BIG))
    attach(plog)
    w = Writer(plog)
    for _ in range(batches):
        w.data(7, 1, txn=False)
    plog.checkpoint_recovery()
    end = plog.log_end_offset
    plog.close_handles()
    return plog.dir, end


def test_a_recovery_point_past_the_log_end_is_not_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pdir, end = _written(tmp_path, 20)
    crashed = _crash_copy(pdir, tmp_path / "crashed" / pdir.name)
    # A byte flipped in the first batch: trusting the recovery point would never see it.
    _flip_byte(crashed / "00000000000000000000.log", 80)
    with caplog.at_level(logging.WARNING):
        again = open_log(crashed.parent, small_config(**BIG), recovery_point=end + 50)
    assert "recovery point 70" in caplog.text and "past the log end 20" in caplog.text
    assert str(crashed.parent / RECOVERY_POINT_CHECKPOINT) in caplog.text
    assert again.log_end_offset == 0  # every segment validated: the corrupt batch and after
    assert again.recovery_point == 0


def test_a_recovery_point_past_the_log_end_rebuilds_producer_state_from_the_segments(
    tmp_path: Path,
) -> None:
    pdir, end = _written(tmp_path, 20)
    crashed = _crash_copy(pdir, tmp_path / "crashed" / pdir.name)
    again = open_log(crashed.parent, small_config(**BIG), recovery_point=end + 50)
    psm = ProducerStateManager(again.dir, ManualClock(T0))
    assert again.load_producer_state(psm) == 20  # all of it, not the snapshot at the end
    entry = psm.last_entry(7)
    assert entry is not None and entry.last_seq == 19
    # Dedupe still works: a retry of the last batch is no new record.
    retry = Writer(again)
    retry.seq[7] = 19
    assert retry.data(7, 1, txn=False) == 19 and again.log_end_offset == 20


def test_a_torn_producer_snapshot_is_replaced_by_the_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = open_log(tmp_path / "live", small_config(**BIG))
    attach(plog)
    w = Writer(plog)
    for _ in range(5):
        w.data(7, 1, txn=False)
    plog.checkpoint_recovery()  # snapshot at 5
    for _ in range(5):
        w.data(7, 1, txn=False)
    plog.checkpoint_recovery()  # snapshot at 10
    recovery_point = plog.recovery_point
    plog.close_handles()
    crashed = _crash_copy(plog.dir, tmp_path / "crashed" / plog.dir.name)
    torn = crashed / "00000000000000000010.snapshot"
    torn.write_bytes(torn.read_bytes()[:-7])
    again = open_log(crashed.parent, small_config(**BIG), recovery_point=recovery_point)
    psm = ProducerStateManager(again.dir, ManualClock(T0))
    with caplog.at_level(logging.WARNING):
        assert again.load_producer_state(psm) == 5  # from the snapshot at 5, not the torn one
    assert str(torn) in caplog.text and not torn.exists()
    entry = psm.last_entry(7)
    assert entry is not None and entry.last_seq == 9
    # every snapshot torn: the whole log is replayed
    third = _crash_copy(plog.dir, tmp_path / "third" / plog.dir.name)
    for snap in third.glob("*.snapshot"):
        snap.write_bytes(b"\x00\x01garbage")
    last = open_log(third.parent, small_config(**BIG), recovery_point=recovery_point)
    psm = ProducerStateManager(last.dir, ManualClock(T0))
    assert last.load_producer_state(psm) == 10
    entry = psm.last_entry(7)
    assert entry is not None and entry.last_seq == 9


@pytest.mark.parametrize(
    "torn",
    [b"0\n1\n", b"0\n1\ntopic 0", b"", b"\xff\xfe\x00garbage\x80", b"0\n1\ntopic 0 x\n"],
    ids=["missing-entry", "torn-entry", "empty", "not-text", "not-a-number"],
)
def test_a_torn_recovery_point_checkpoint_means_recovering_every_segment(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, torn: bytes
) -> None:
    clock = ManualClock(T0)
    live = tmp_path / "live"
    manager = LogManager([live], small_config(**BIG), clock)
    plog = manager.get_or_create("topic", 0, TOPIC_ID)
    attach(plog)
    w = Writer(plog)
    for _ in range(20):
        w.data(7, 1, txn=False)
    plog.checkpoint_recovery()
    manager.checkpoint()
    assert "topic 0 20" in (live / RECOVERY_POINT_CHECKPOINT).read_text()
    crashed = _crash_copy(live, tmp_path / "crashed")
    manager.close()
    (crashed / RECOVERY_POINT_CHECKPOINT).write_bytes(torn)
    _flip_byte(crashed / "topic-0" / "00000000000000000000.log", 80)
    with caplog.at_level(logging.WARNING):
        again = LogManager([crashed], small_config(**BIG), clock)
    try:
        assert str(crashed / RECOVERY_POINT_CHECKPOINT) in caplog.text
        recovered = again.get("topic", 0)
        assert recovered is not None
        assert recovered.log_end_offset == 0  # validated from the start: the flipped byte
    finally:
        again.close()


def test_a_torn_partition_metadata_file_is_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pdir, end = _written(tmp_path, 3)
    crashed = _crash_copy(pdir, tmp_path / "crashed" / pdir.name)
    (crashed / "partition.metadata").write_bytes(b"version: 0\ntopic_\x80\xff")
    with caplog.at_level(logging.WARNING):
        again = open_log(crashed.parent, small_config(**BIG), recovery_point=end)
    assert str(crashed / "partition.metadata") in caplog.text
    assert again.log_end_offset == end
    assert (crashed / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")
