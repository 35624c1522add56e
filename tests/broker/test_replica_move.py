"""Moving a partition log to another log dir while it serves (AlterReplicaLogDirs, JBOD):
no record lost with appends, retention and rolls during the move, the same PartitionLog object
goes on in the new dir, cancel, crash leftovers at start-up."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from pathlib import Path

import pytest

from broker.log import LogConfig, LogManager, ManualClock, PartitionLog, replica_move
from broker.log.producer_state_loader import attach_producer_state
from broker.log.replica_move import MOVE_MARKER, future_dir_name
from protocol.records import scan_batches
from tests.waits import wait_for_async

from .log_helpers import T0, TOPIC_ID, batch, small_config


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    # Several copy passes (and rolls) even for a log of a few hundred KiB.
    monkeypatch.setattr(replica_move, "ROLL_AT_BYTES", 8192)
    monkeypatch.setattr(replica_move, "FINAL_COPY_BYTES", 16384)
    monkeypatch.setattr(replica_move, "_CHUNK", 4096)


class Env:
    def __init__(self, tmp: Path, config: LogConfig | None = None) -> None:
        self.a, self.b = tmp / "a", tmp / "b"
        self.clock = ManualClock(T0)
        self.config = config or small_config()
        self.mgr = LogManager([self.a, self.b], self.config, self.clock)
        self.mgr.prefer_dir("topic", 0, self.a)
        self.plog = self.mgr.get_or_create("topic", 0, TOPIC_ID, self.config)
        attach_producer_state(self.plog, self.clock)
        self.appended = 0

    def append(self, count: int = 1) -> None:
        for _ in range(count):
            self.plog.append_as_leader(
                batch(3, ts=T0 + self.appended, tag=self.appended, value_size=100),
                0,
                now_ms=T0 + self.appended,
            )
            self.plog.high_watermark = self.plog.log_end_offset
            self.appended += 1

    def offsets(self, plog: PartitionLog | None = None) -> list[int]:
        plog = plog or self.plog
        out: list[int] = []
        pos = plog.log_start_offset
        while pos < plog.log_end_offset:
            res = plog.read(pos, 1 << 20)
            got = [v for buf in res.records for v in scan_batches(buf)]
            assert got, f"nothing read at {pos}"
            for v in got:
                out.extend(range(v.base_offset, v.last_offset + 1))
            pos = got[-1].last_offset + 1
        return out


async def move_with_appends(env: Env, target: Path, *, per_tick: int = 2) -> int:
    """Start the move and append between loop turns until it is done; returns the turns."""
    env.mgr.moves.start("topic", 0, target)
    turns = 0
    deadline = time.monotonic() + 30
    while env.mgr.moves.get("topic", 0) is not None:
        assert time.monotonic() < deadline, "the move did not finish"
        env.append(per_tick)
        turns += 1
        await asyncio.sleep(0.001)
    return turns


def partition_dirs(log_dir: Path) -> list[str]:
    return sorted(p.name for p in log_dir.iterdir() if p.is_dir())


def test_move_under_appends_keeps_every_record_and_the_same_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = Env(tmp_path)
    env.append(600)  # ~ 200 KiB: many closed segments
    before = env.plog
    old_dir = env.plog.dir

    async def run() -> int:
        turns = await move_with_appends(env, env.b)
        # the old dir (renamed *-delete) is removed in the background
        await wait_for_async(lambda: partition_dirs(env.a) == [], 10, "the old dir removed")
        return turns

    with caplog.at_level(logging.INFO, logger="broker.log"):
        turns = asyncio.run(run())
    # The copy opens as a clean log: no index rebuilt, nothing recovered.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert turns > 3, "the move should take several loop turns (copy passes off the loop)"
    assert env.mgr.get("topic", 0) is before
    assert env.mgr.log_dir_of("topic", 0) == env.b
    assert env.plog.dir == env.b / "topic-0"
    assert not old_dir.exists()
    assert partition_dirs(env.a) == [] and partition_dirs(env.b) == ["topic-0"]
    assert env.offsets() == list(range(env.appended * 3))
    assert env.plog.producer_state is not None
    assert env.plog.producer_state.partition_dir == env.plog.dir
    # Appends after the move land in the new dir, and a restart finds the log there.
    env.append(5)
    end = env.plog.log_end_offset
    env.mgr.close()
    again = LogManager([env.a, env.b], env.config, env.clock)
    try:
        plog = again.get("topic", 0)
        assert plog is not None and again.log_dir_of("topic", 0) == env.b
        assert plog.log_end_offset == end
        assert env.offsets(plog) == list(range(end))
    finally:
        again.close()


def test_move_with_retention_and_roll_during_the_copy(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.append(600)

    async def run() -> None:
        env.mgr.moves.start("topic", 0, env.b)
        for i in range(4000):
            if env.mgr.moves.get("topic", 0) is None:
                return
            env.append(1)
            if i == 3:
                env.plog.delete_records_before(900)  # segments go while being copied
            if i == 6:
                env.plog.roll()
            await asyncio.sleep(0.001)
        raise AssertionError("the move did not finish")

    asyncio.run(run())
    assert env.mgr.log_dir_of("topic", 0) == env.b
    assert env.plog.log_start_offset == 900
    assert env.offsets() == list(range(900, env.appended * 3))
    bases = {s.base_offset for s in env.plog.segments}
    on_disk = {int(p.name[:-4]) for p in env.plog.dir.glob("*.log")}
    assert on_disk == bases, "segments deleted meanwhile must not come back in the new dir"
    env.mgr.close()


def test_cancel_removes_the_future_replica(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.append(600)

    async def run() -> None:
        env.mgr.moves.start("topic", 0, env.b)
        await asyncio.sleep(0)
        move = env.mgr.moves.get("topic", 0)
        assert move is not None and move.task is not None
        env.mgr.moves.cancel("topic", 0)
        await asyncio.wait_for(move.task, 10)
        await wait_for_async(lambda: partition_dirs(env.b) == [], 10, "the future dir removed")

    asyncio.run(run())
    assert env.mgr.log_dir_of("topic", 0) == env.a
    assert partition_dirs(env.b) == []
    assert env.offsets() == list(range(env.appended * 3))
    env.mgr.close()


def test_move_to_current_dir_or_twice_is_one_move(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.append(50)

    async def run() -> None:
        env.mgr.moves.start("topic", 0, env.a)  # already there
        assert env.mgr.moves.get("topic", 0) is None
        env.mgr.moves.start("topic", 0, env.b)
        first = env.mgr.moves.get("topic", 0)
        env.mgr.moves.start("topic", 0, env.b)
        assert env.mgr.moves.get("topic", 0) is first
        assert first is not None and first.task is not None
        await asyncio.wait_for(first.task, 10)

    asyncio.run(run())
    assert env.mgr.log_dir_of("topic", 0) == env.b
    env.mgr.close()


def test_a_crash_between_the_renames_keeps_the_marked_copy(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.append(100)
    end = env.plog.log_end_offset
    env.mgr.close()
    # What a stop between "future -> topic-0 in b" and "topic-0 in a -> -delete" leaves.
    shutil.copytree(env.a / "topic-0", env.b / "topic-0")
    (env.b / "topic-0" / MOVE_MARKER).touch()
    mgr = LogManager([env.a, env.b], env.config, env.clock)
    try:
        plog = mgr.get("topic", 0)
        assert plog is not None and mgr.log_dir_of("topic", 0) == env.b
        assert plog.log_end_offset == end
        assert partition_dirs(env.a) == []
        assert not (env.b / "topic-0" / MOVE_MARKER).exists()
    finally:
        mgr.close()


def test_unmarked_duplicate_dirs_are_refused(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.append(10)
    env.mgr.close()
    shutil.copytree(env.a / "topic-0", env.b / "topic-0")
    with pytest.raises(ValueError, match="duplicate log directories"):
        LogManager([env.a, env.b], env.config, env.clock)


def test_an_interrupted_move_is_resumed(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.append(100)
    end = env.plog.log_end_offset
    env.mgr.close()
    stale = env.b / future_dir_name("topic", 0, "ab" * 16)
    stale.mkdir()
    (stale / "00000000000000000000.log").write_bytes(b"half a copy")
    mgr = LogManager([env.a, env.b], env.config, env.clock)
    assert not stale.exists()

    async def run() -> None:
        mgr.periodic(T0)  # resumes the move on the node's loop
        move = mgr.moves.get("topic", 0)
        assert move is not None and move.target == env.b and move.task is not None
        await asyncio.wait_for(move.task, 10)

    try:
        asyncio.run(run())
        plog = mgr.get("topic", 0)
        assert plog is not None and mgr.log_dir_of("topic", 0) == env.b
        assert plog.log_end_offset == end
    finally:
        mgr.close()


def test_a_failed_move_leaves_the_log_where_it_was(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.append(100)
    shutil.rmtree(env.b)  # the target dir is gone

    async def run() -> None:
        env.mgr.moves.start("topic", 0, env.b)
        move = env.mgr.moves.get("topic", 0)
        assert move is not None and move.task is not None
        await asyncio.wait_for(move.task, 10)

    asyncio.run(run())
    assert env.mgr.moves.get("topic", 0) is None
    assert env.mgr.log_dir_of("topic", 0) == env.a
    env.append(1)
    assert env.offsets() == list(range(env.appended * 3))
    env.b.mkdir()  # back, for the closing checkpoint
    env.mgr.close()


def test_move_to_refuses_a_directory_that_is_not_a_copy(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.append(20)
    other = tmp_path / "other" / "topic-0"
    other.mkdir(parents=True)
    with pytest.raises(ValueError, match="not a copy"):
        env.plog.move_to(other)
    env.append(1)  # still in business where it was
    assert env.plog.dir == env.a / "topic-0"
    assert env.offsets() == list(range(env.appended * 3))
    env.mgr.close()


def test_a_new_partition_goes_to_the_dir_alter_named(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.mgr.prefer_dir("later", 3, env.b)
    plog = env.mgr.get_or_create("later", 3, None)
    assert env.mgr.log_dir_of("later", 3) == env.b and plog.dir.parent == env.b
    assert os.path.isdir(env.b / "later-3")
    env.mgr.close()


def test_changes_between_the_last_copy_pass_and_the_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segments deleted, truncated or rewritten after their copy are copied again (or dropped)
    at the swap: the new dir holds exactly the log."""
    env = Env(tmp_path)
    env.append(600)
    original = replica_move.ReplicaMover._swap

    def swap(self: replica_move.ReplicaMover, move: replica_move.Move, plog: PartitionLog) -> None:
        assert len(move.copied) > 5, "copy passes should have copied closed segments"
        plog.delete_records_before(900)
        plog.truncate_to(1500)  # inside a copied closed segment, which becomes the active one
        env.append(3)
        original(self, move, plog)

    monkeypatch.setattr(replica_move.ReplicaMover, "_swap", swap)

    async def run() -> None:
        env.mgr.moves.start("topic", 0, env.b)
        move = env.mgr.moves.get("topic", 0)
        assert move is not None and move.task is not None
        await asyncio.wait_for(move.task, 10)

    asyncio.run(run())
    assert env.mgr.log_dir_of("topic", 0) == env.b
    end = env.plog.log_end_offset
    assert end == 1509
    assert env.offsets() == list(range(900, end))
    on_disk = {int(p.name[:-4]) for p in env.plog.dir.glob("*.log")}
    assert on_disk == {s.base_offset for s in env.plog.segments}
    env.mgr.close()
    again = LogManager([env.a, env.b], env.config, env.clock)
    try:
        plog = again.get("topic", 0)
        assert plog is not None and plog.log_end_offset == end
        assert env.offsets(plog) == list(range(900, end))
    finally:
        again.close()


def test_the_active_segments_unflushed_index_entries_move_with_it(tmp_path: Path) -> None:
    # The active segment's newest index entries are in memory only until a flush: the copy
    # at the swap must still get them all (a zeroed tail would read as entries: offset 0 at
    # position 0, timestamp 0, so a max timestamp of 0 for retention).
    env = Env(tmp_path, small_config(**{"segment.bytes": str(1 << 20)}))
    env.append(100)
    asyncio.run(move_with_appends(env, env.b))
    assert env.plog.dir == env.b / "topic-0"
    active = env.plog.active_segment
    for seg in env.plog.segments:
        offsets = [seg.index.entry(i).offset for i in range(seg.index.entries)]
        times = [seg.time_index.entry(i).timestamp for i in range(seg.time_index.entries)]
        assert offsets == sorted(set(offsets)) and all(t >= T0 for t in times), seg
    assert active.size == 0 or active.max_timestamp_so_far.timestamp >= T0
    assert env.offsets() == list(range(env.appended * 3))
    env.mgr.close()
