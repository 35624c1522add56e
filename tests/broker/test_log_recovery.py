"""Crash recovery: torn tails, flipped bytes, missing or corrupt indexes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from .log_helpers import T0, batch, fill, open_log, views


def _crash_copy(plog_dir: Path) -> None:
    """Nothing to do: we simply never call close(), like a kill -9."""


def test_torn_tail_is_truncated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plog = open_log(tmp_path)
    fill(plog, 10)  # 0..29 in one segment
    seg_path = plog.active_segment.log_path
    size = os.path.getsize(seg_path)
    last = views(plog.read(27, 1 << 20).records)[0]
    os.truncate(seg_path, size - last.size // 2)  # cut the last batch in half
    with caplog.at_level(logging.WARNING):
        again = open_log(tmp_path)
    assert again.log_end_offset == 27
    assert os.path.getsize(seg_path) == size - last.size
    assert "truncated" in caplog.text and seg_path.name in caplog.text
    res = again.append_as_leader(batch(1), 0, now_ms=T0)
    assert res.first_offset == 27


def test_flipped_byte_past_recovery_point(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plog = open_log(tmp_path)
    fill(plog, 60)  # several segments
    plog.flush(up_to=plog.segments[1].base_offset)
    rp = plog.recovery_point
    target_seg = plog.segments[1]
    target = views([target_seg.read(0, 1 << 20)])[2]  # third batch of the 2nd segment
    with open(target_seg.log_path, "r+b") as fh:
        fh.seek(target.position + 70)
        byte = fh.read(1)
        fh.seek(target.position + 70)
        fh.write(bytes([byte[0] ^ 0x55]))
    later = [s.log_path for s in plog.segments[2:]]
    assert later
    with caplog.at_level(logging.WARNING):
        again = open_log(tmp_path, recovery_point=rp)
    # Truncated to the last valid batch; later (unflushed) segments are dropped.
    assert again.log_end_offset == target.base_offset
    assert all(not p.exists() for p in later)
    assert "CRC" in caplog.text
    again.high_watermark = again.log_end_offset
    assert views(again.read(0, 1 << 20).records)[0].base_offset == 0


def test_corruption_below_recovery_point_is_not_scanned(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 60)
    plog.flush()
    first = plog.segments[0]
    # Flip a byte in a flushed segment: recovery trusts data below the recovery point.
    with open(first.log_path, "r+b") as fh:
        fh.seek(80)
        b = fh.read(1)
        fh.seek(80)
        fh.write(bytes([b[0] ^ 1]))
    leo = plog.log_end_offset
    again = open_log(tmp_path, recovery_point=leo)
    assert again.log_end_offset == leo


def test_missing_index_is_rebuilt(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 60)
    seg = plog.segments[1]
    entries = [seg.index.entry(i) for i in range(seg.index.entries)]
    time_entries = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    assert entries
    plog.close()
    seg.index.path.unlink()
    seg.time_index.path.unlink()
    again = open_log(tmp_path, clean_shutdown=True, recovery_point=10_000)
    rebuilt = again.segments[1]
    assert [rebuilt.index.entry(i) for i in range(rebuilt.index.entries)] == entries
    assert [rebuilt.time_index.entry(i) for i in range(rebuilt.time_index.entries)] == time_entries
    assert views(again.read(entries[-1].offset, 1).records)[0].last_offset == entries[-1].offset


def test_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 60)
    seg = plog.segments[1]
    entries = [seg.index.entry(i) for i in range(seg.index.entries)]
    plog.close()
    with open(seg.index.path, "ab") as fh:
        fh.write(b"\x00\x00\x00")  # not a whole entry
    again = open_log(tmp_path, clean_shutdown=True, recovery_point=10_000)
    rebuilt = again.segments[1]
    assert [rebuilt.index.entry(i) for i in range(rebuilt.index.entries)] == entries
    assert os.path.getsize(rebuilt.index.path) == 8 * len(entries)


def test_unclean_restart_without_damage_keeps_everything(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 30, epoch=3)
    leo = plog.log_end_offset
    # No close(): preallocated indexes and all. Reopen validates everything from offset 0.
    again = open_log(tmp_path)
    assert again.log_end_offset == leo
    assert again.leader_epoch_cache.entries() == [(3, 0)]
    again.high_watermark = leo
    assert len(views(again.read(0, 1 << 20, upper_bound=leo).records)) >= 1
    res = again.append_as_leader(batch(1), 3, now_ms=T0)
    assert res.first_offset == leo


def test_a_torn_epoch_checkpoint_is_rebuilt_from_the_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A crash (or a disk) may leave the file torn or empty.
    plog = open_log(tmp_path)
    fill(plog, 4, epoch=3)  # 0..11
    plog.flush()
    fill(plog, 4, epoch=5)  # 12..23
    plog.close()
    checkpoint = plog.dir / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n2\n3 ")  # torn mid-entry
    with caplog.at_level(logging.WARNING):
        again = open_log(tmp_path, clean_shutdown=True)
    assert "rebuilding the leader epoch cache" in caplog.text
    assert again.epoch_cache.entries() == [(3, 0), (5, 12)]
    assert again.log_end_offset == 24


def test_a_new_epoch_is_durable_once_the_log_is_flushed(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 2, epoch=3)
    fill(plog, 2, epoch=4)
    assert plog.epoch_cache._unsynced  # not written yet: recovery would rebuild it
    plog.flush()
    assert not plog.epoch_cache._unsynced
    assert (plog.dir / "leader-epoch-checkpoint").read_text().split("\n")[2:4] == ["3 0", "4 6"]


def test_opening_an_untrimmed_index_reads_only_up_to_its_first_hole(tmp_path: Path) -> None:
    from broker.log.index import OffsetIndex

    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 10 << 20)  # preallocated: sparse 10 MiB
    for i in range(3):
        index.append(10 * (i + 1), 100 * (i + 1))
    index.flush()  # the entries reach the file at a flush
    # no close(): a kill -9 leaves the file untrimmed
    assert os.path.getsize(path) == 10 << 20
    again = OffsetIndex(path, 0, 10 << 20)
    # Neither the preallocated zeros nor the zero tail of the page are taken for entries.
    assert again.entries == 3
    assert [again.entry(i) for i in range(3)] == [(10, 100), (20, 200), (30, 300)]
    assert again.max_entries == (10 << 20) // 8


def test_a_recovered_index_is_written_in_one_call_with_the_same_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = open_log(tmp_path)
    fill(plog, 8)  # one segment, several index entries
    seg = plog.active_segment
    entries = [seg.index.entry(i) for i in range(seg.index.entries)]
    time_entries = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    assert len(entries) > 2
    writes: list[int] = []
    real_pwrite = os.pwrite

    def counting(fd: int, data: bytes, pos: int) -> int:
        writes.append(len(data))
        return real_pwrite(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", counting)
    seg.recover(None)  # what an unclean restart does to a segment past the recovery point
    monkeypatch.undo()
    assert len(writes) <= 2  # one per index
    assert [seg.index.entry(i) for i in range(seg.index.entries)] == entries
    rebuilt_times = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    assert rebuilt_times[: len(time_entries)] == time_entries  # + the max timestamp's entry
    again = open_log(tmp_path, clean_shutdown=True)
    reread = again.active_segment
    assert [reread.index.entry(i) for i in range(reread.index.entries)] == entries
