"""The log manager's maintenance tick visits only logs that asked for work, runs each duty on
its Kafka interval, and rewrites a checkpoint file only when what it holds changed."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from broker.log import LogManager, ManualClock, PartitionLog, ProducerStateManager
from broker.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offset_checkpoint,
)
from broker.log.manager import LogSchedule

from .log_helpers import T0, batch, small_config

SCHEDULE = LogSchedule(
    retention_check_ms=300_000,
    recovery_checkpoint_ms=60_000,
    start_checkpoint_ms=60_000,
    hw_checkpoint_ms=5_000,
)


def attach(plog: PartitionLog) -> ProducerStateManager:
    psm = ProducerStateManager(plog.dir, ManualClock(T0))
    plog.load_producer_state(psm)
    return psm


def manager(tmp_path: Path, clock: ManualClock, **overrides: str) -> LogManager:
    return LogManager([tmp_path], small_config(**overrides), clock, schedule=SCHEDULE)


def fill(plog: PartitionLog, batches: int) -> None:
    for i in range(batches):
        plog.append_as_leader(batch(2, tag=i), 0, now_ms=T0)
    plog.high_watermark = plog.log_end_offset


def test_idle_logs_are_not_visited(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = manager(tmp_path, clock)
    logs = [mgr.get_or_create("t", p, uuid.uuid4()) for p in range(50)]
    fill(logs[0], 3)  # no roll, flush.ms unset: nothing for the tick to do
    mgr.periodic(T0 + 1000)
    assert mgr._busy == {}
    fill(logs[1], 200)  # rolls: its old segments wait for a flush
    assert set(mgr._busy) == {("t", 1)}
    mgr.periodic(T0 + 2000)
    assert logs[1].recovery_point == logs[1].segments[-1].base_offset
    mgr.periodic(T0 + 3000)  # the tick after its flush completed
    assert mgr._busy == {}, "a log with nothing left to do leaves the set"
    mgr.close()


def test_each_checkpoint_file_on_its_interval_and_only_when_changed(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("t", 0, uuid.uuid4())
    fill(plog, 5)
    hw_file = tmp_path / REPLICATION_OFFSET_CHECKPOINT
    rp_file = tmp_path / RECOVERY_POINT_CHECKPOINT
    mgr.periodic(T0 + 1000)
    assert not hw_file.exists() and not rp_file.exists()  # not due yet
    mgr.periodic(T0 + 5000)
    assert read_offset_checkpoint(hw_file) == {("t", 0): plog.high_watermark}
    assert not rp_file.exists()
    written = hw_file.stat().st_mtime_ns
    hw_file.unlink()
    mgr.periodic(T0 + 10_000)
    assert not hw_file.exists(), "unchanged: not rewritten"
    fill(plog, 1)
    mgr.periodic(T0 + 15_000)
    assert read_offset_checkpoint(hw_file) == {("t", 0): plog.high_watermark}
    assert hw_file.stat().st_mtime_ns >= written
    mgr.periodic(T0 + 60_000)
    assert read_offset_checkpoint(rp_file) == {("t", 0): plog.log_end_offset}
    assert plog.recovery_point == plog.log_end_offset  # the recovery checkpoint flushed it
    mgr.close()


def test_a_moved_log_start_is_checkpointed_at_the_next_tick(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("t", 0, uuid.uuid4())
    fill(plog, 5)
    start_file = tmp_path / LOG_START_OFFSET_CHECKPOINT
    plog.delete_records_before(4)
    mgr.periodic(T0 + 1000)
    assert read_offset_checkpoint(start_file) == {("t", 0): 4}
    mgr.close()


def test_retention_runs_on_its_interval(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = manager(tmp_path, clock, **{"retention.ms": "1000", "file.delete.delay.ms": "0"})
    plog = mgr.get_or_create("t", 0, uuid.uuid4())
    fill(plog, 200)
    segments = len(plog.segments)
    assert segments > 1
    mgr.periodic(T0 + 299_000)
    assert len(plog.segments) == segments, "not due: Kafka checks every 5 minutes"
    mgr.periodic(T0 + 300_000)
    assert plog.log_start_offset == plog.log_end_offset
    assert plog.log_start_offset == plog.segments[0].base_offset  # no entry needed (Kafka)
    mgr.close()


def test_flush_ms_deadline_brings_the_log_back(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = manager(tmp_path, clock, **{"flush.ms": "1000"})
    plog = mgr.get_or_create("t", 0, uuid.uuid4())
    fill(plog, 2)
    assert ("t", 0) in mgr._busy
    mgr.periodic(T0 + 2000)
    assert plog.recovery_point == plog.log_end_offset
    mgr.periodic(T0 + 3000)
    assert mgr._busy == {}
    mgr.close()


async def _drain(mgr: LogManager) -> None:
    """Until the flush thread's work and its completion on the loop are done."""
    for _ in range(200):
        await asyncio.sleep(0.01)
        if not any(plog._flush_in_flight for plog in mgr.all_logs()):
            break
    else:
        raise AssertionError("the background flush did not complete")
    if mgr._flusher is not None:  # the checkpoint files it queued behind the flush
        await asyncio.get_running_loop().run_in_executor(mgr._flusher, lambda: None)


def test_flushes_and_snapshots_run_off_the_loop(tmp_path: Path, monkeypatch: Any) -> None:
    threads: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith((".log", ".index", ".timeindex", ".background.tmp", "checkpoint.tmp")):
            threads.append(threading.current_thread().name + " " + name.rsplit("/", 1)[-1])
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)

    async def main() -> None:
        clock = ManualClock(T0)
        mgr = manager(tmp_path, clock)
        plog = mgr.get_or_create("t", 0, uuid.uuid4())
        attach(plog)
        fill(plog, 200)
        threads.clear()
        mgr.periodic(T0 + 60_000)  # the recovery checkpoint, to the log end
        assert plog.recovery_point < plog.log_end_offset, "not before the thread is done"
        await _drain(mgr)
        assert plog.recovery_point == plog.log_end_offset
        assert plog.producer_state is not None
        assert plog.producer_state.latest_snapshot_offset() == plog.log_end_offset
        # segments, indexes, the snapshot, the new epoch entry and the recovery-point file
        assert threads and all(t.startswith("log-flush") for t in threads), threads
        assert any(t.endswith("recovery-point-offset-checkpoint.tmp") for t in threads)
        assert any(t.endswith("leader-epoch-checkpoint.background.tmp") for t in threads)
        assert (plog.dir / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
        assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
            ("t", 0): plog.log_end_offset
        }
        mgr.close()

    asyncio.run(main())


def test_a_truncation_meanwhile_voids_the_background_flush(tmp_path: Path) -> None:
    async def main() -> None:
        clock = ManualClock(T0)
        mgr = manager(tmp_path, clock)
        plog = mgr.get_or_create("t", 0, uuid.uuid4())
        psm = attach(plog)
        fill(plog, 20)
        end = plog.log_end_offset
        mgr.periodic(T0 + 60_000)
        plog.truncate_to(10)  # a follower diverged before the thread finished
        fill(plog, 20)  # and the log grew past the planned offset again
        await _drain(mgr)
        assert end not in psm.snapshot_offsets(), "a snapshot of a history the log lost"
        assert not list(plog.dir.glob("*.tmp"))
        assert plog.recovery_point <= 10
        mgr.close()

    asyncio.run(main())


def test_idle_producers_expire_on_the_check_interval(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    schedule = LogSchedule(producer_expiry_check_ms=600_000)
    mgr = LogManager([tmp_path], small_config(), clock, schedule=schedule)
    plog = mgr.get_or_create("t", 0, uuid.uuid4())
    psm = ProducerStateManager(plog.dir, clock, max_producer_id_expiration_ms=1_000_000)
    plog.load_producer_state(psm)
    plog.append_as_leader(batch(2, producer_id=42, producer_epoch=0, base_sequence=0), 0, now_ms=T0)
    assert psm.producer_count == 1
    mgr.periodic(T0 + 599_000)
    assert psm.producer_count == 1, "not checked before producer.id.expiration.check.interval.ms"
    mgr.periodic(T0 + 1_200_000)
    assert psm.producer_count == 0, "idle past producer.id.expiration.ms"
    mgr.close()


def test_a_truncation_rewrites_the_recovery_point_file_off_the_loop(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """As Kafka's LogManager.truncateTo: the file must not go on vouching for what a
    truncation removed (a kill -9 would trust it, see LeaderEpochCache); written in the flush
    thread, once for all the truncations of a loop iteration."""
    from broker.log import manager as manager_module

    writes: list[tuple[str, str]] = []
    real = manager_module.write_offset_checkpoint

    def record(path: Path, offsets: dict[tuple[str, int], int]) -> None:
        writes.append((threading.current_thread().name, path.name))
        real(path, offsets)

    monkeypatch.setattr(manager_module, "write_offset_checkpoint", record)

    async def main() -> None:
        mgr = manager(tmp_path, ManualClock(T0))
        logs = [mgr.get_or_create("t", p, uuid.uuid4()) for p in range(3)]
        for plog in logs:
            fill(plog, 20)
        mgr.periodic(T0 + 60_000)
        await _drain(mgr)
        assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 40
        writes.clear()
        for plog in logs:
            plog.truncate_to(30)
        logs[1].truncate_fully_and_start_at(6)
        await _drain(mgr)
        assert writes == [("log-flush_0", RECOVERY_POINT_CHECKPOINT)]
        on_file = read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)
        assert on_file == {("t", 0): 30, ("t", 1): 6, ("t", 2): 30}
        mgr.close()

    asyncio.run(main())


def test_a_truncation_without_a_loop_rewrites_the_file_at_once(tmp_path: Path) -> None:
    mgr = manager(tmp_path, ManualClock(T0))
    plog = mgr.get_or_create("t", 0, uuid.uuid4())
    fill(plog, 20)
    mgr.periodic(T0 + 60_000)
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 40}
    plog.truncate_to(40)  # nothing cut: nothing written
    plog.truncate_to(10)
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 10}
    mgr.close()
