"""broker/log/log_writer.py and the log's side of it: appends written off the event loop.

Most tests drive a ``ManualWriter`` (jobs wait until the test writes and completes them), so
what readers, truncation, rolls, flushes and the high watermark see while writes are pending is
checked step by step without threads; the last ones run the real ``ThreadedWriter``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.log import ManualClock, PartitionLog
from broker.log.errors import KAFKA_STORAGE_ERROR, LogAppendError
from broker.log.log_writer import LOG_QUEUE_BYTES, ThreadedWriter, WriteJob, apply_completions
from broker.replication.partition import sole_leader
from protocol.records import scan_batches
from tests.broker.log_helpers import T0, batch, open_log, small_config


class ManualWriter:
    """Jobs queue until ``complete`` writes them and hands their completions to the log, as
    the thread and the loop would; ``wait`` writes without completing (a drain)."""

    inline = False

    def __init__(self) -> None:
        self.queue: list[WriteJob] = []
        self.finished: list[WriteJob] = []  # written, completion not yet delivered
        self.seq = 0

    def submit(self, job: WriteJob) -> bool:
        self.seq += 1
        job.seq = self.seq
        self.queue.append(job)
        return False

    def _write_through(self, seq: int) -> None:
        while self.queue and self.queue[0].seq <= seq:
            job = self.queue.pop(0)
            job.write()
            job.done = True
            self.finished.append(job)

    def wait(self, job: WriteJob) -> None:
        self._write_through(job.seq)

    def barrier(self) -> Callable[[], None]:
        target = self.seq
        return lambda: self._write_through(target)

    def room(self, queue: object) -> None:
        return None

    def complete(self, count: int | None = None) -> None:
        todo = self.queue if count is None else self.queue[:count]
        if todo:
            self._write_through(todo[-1].seq)
        done, self.finished = self.finished, []
        apply_completions(done)

    @property
    def pending_bytes(self) -> int:
        return sum(j.nbytes for j in self.queue)


def file_size(plog: PartitionLog) -> int:
    return sum(os.path.getsize(s.log_path) for s in plog.segments)


def all_bytes(plog: PartitionLog) -> bytes:
    """Every batch as reads return it (a read stops at a segment's end)."""
    parts: list[bytes] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        records = plog.read(offset, 1 << 24, upper_bound=plog.log_end_offset).records
        if not records:
            break
        chunk = b"".join(bytes(b) for b in records)
        parts.append(chunk)
        last = list(scan_batches(chunk))[-1]
        offset = last.last_offset + 1
    return b"".join(parts)


def test_pending_appends_are_read_from_memory(tmp_path: Path) -> None:
    writer = ManualWriter()
    plog = open_log(tmp_path, writer=writer)
    for i in range(5):
        plog.append_as_leader(batch(3, ts=T0 + i, tag=i), 0, now_ms=T0 + i)
    assert plog.log_end_offset == 15
    assert plog.written_end_offset == 0
    assert file_size(plog) == 0  # nothing in the file yet
    pending = all_bytes(plog)
    assert len(pending) == plog.size_bytes > 0
    # reads from any offset, timestamp lookups, the max timestamp: all see the pending bytes
    tail = plog.read(7, 1 << 20, upper_bound=15).records
    assert bytes(tail[0]) == pending[len(pending) - len(bytes(tail[0])) :]
    assert plog.offset_for_timestamp(T0 + 3) == (5, T0 + 3, 0)  # batch 1's last record
    found = plog.max_timestamp_offset()
    assert found is not None and found[1] == T0 + 4 + 2
    writer.complete(2)
    assert plog.written_end_offset == 6
    assert all_bytes(plog) == pending
    writer.complete()
    assert plog.written_end_offset == 15
    assert file_size(plog) == len(pending)
    assert all_bytes(plog) == pending


def test_consumers_see_only_the_written_high_watermark(tmp_path: Path) -> None:
    writer = ManualWriter()
    plog = open_log(tmp_path, writer=writer)
    part = sole_leader(plog, lambda: T0)
    part.append_records(batch(3))
    part.append_records(batch(2))
    assert plog.log_end_offset == 5
    assert plog.high_watermark == 0  # not in the file: not committed, not acknowledged
    assert plog.read(0, 1 << 20).records == []
    writer.complete(1)
    assert plog.high_watermark == 3  # the completion advanced it (Partition's hook)
    writer.complete()
    assert plog.high_watermark == 5


def test_truncation_with_writes_pending(tmp_path: Path) -> None:
    writer = ManualWriter()
    plog = open_log(tmp_path, writer=writer)
    for i in range(4):
        plog.append_as_leader(batch(2, tag=i), 0, now_ms=T0)
    writer.complete(1)
    before = all_bytes(plog)
    kept = len(before) // 2  # four equal batches: the first two stay
    assert plog.truncate_to(4)  # drains: the file holds everything, then is cut
    assert plog.log_end_offset == plog.written_end_offset == 4
    assert file_size(plog) == plog.size_bytes == kept
    writer.complete()  # the stale completions of the drained jobs change nothing
    assert plog.log_end_offset == plog.written_end_offset == 4
    plog.append_as_leader(batch(2, tag=9), 0, now_ms=T0)
    assert plog.written_end_offset == 4 and plog.log_end_offset == 6
    writer.complete()
    assert plog.written_end_offset == 6
    assert file_size(plog) == plog.size_bytes
    assert all_bytes(plog)[:kept] == before[:kept]


def test_roll_with_writes_pending_drains_the_sealed_segment(tmp_path: Path) -> None:
    """Only the active segment ever has writes pending: a kill must not leave a sealed
    segment short of batches with the next segment's file after it."""
    writer = ManualWriter()
    plog = open_log(tmp_path, small_config(**{"segment.bytes": "1024"}), writer=writer)
    for i in range(12):
        plog.append_as_leader(batch(3, tag=i), 0, now_ms=T0)
    *sealed, active = plog.segments
    assert len(sealed) >= 2
    for seg in sealed:
        assert not seg.writes_pending and os.path.getsize(seg.log_path) == seg.size
        assert seg._file.owned is None  # back to the LRU cache
    assert active.writes_pending
    assert plog.written_end_offset < plog.log_end_offset == 36
    expected = all_bytes(plog)
    writer.complete()
    assert all_bytes(plog) == expected
    assert plog.written_end_offset == plog.log_end_offset == 36
    assert file_size(plog) == plog.size_bytes


def test_flush_plan_waits_for_the_writer(tmp_path: Path) -> None:
    writer = ManualWriter()
    plog = open_log(tmp_path, writer=writer)
    for i in range(3):
        plog.append_as_leader(batch(2, tag=i), 0, now_ms=T0)
    plan = plog.plan_flush()
    assert plan is not None and plan.barrier is not None and plan.up_to == 6
    plan.run()  # the flush thread: the barrier writes (waits for) everything first
    assert plan.ok and file_size(plog) == plog.size_bytes
    plog.complete_flush(plan)
    assert plog.recovery_point == 6


def test_a_kill_loses_only_unwritten_appends(tmp_path: Path) -> None:
    """Memory is lost on kill -9, the page cache is not: a restart finds the written prefix,
    which is all the high watermark ever covered."""
    writer = ManualWriter()
    plog = open_log(tmp_path, writer=writer)
    part = sole_leader(plog, lambda: T0)
    for i in range(4):
        part.append_records(batch(2, tag=i))
    writer.complete(2)
    assert plog.high_watermark == 4
    # "kill": nothing is closed or drained; the queued jobs never reach the file
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 4 >= plog.high_watermark
    reopened.close_handles()


def test_close_and_delete_drain(tmp_path: Path) -> None:
    writer = ManualWriter()
    plog = open_log(tmp_path, writer=writer)
    plog.append_as_leader(batch(3), 0, now_ms=T0)
    plog.close()
    assert not writer.queue
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 3
    reopened.close()


def test_a_failed_write_refuses_later_appends(tmp_path: Path) -> None:
    writer = ManualWriter()
    plog = open_log(tmp_path, writer=writer)
    part = sole_leader(plog, lambda: T0)
    part.append_records(batch(2))
    job = writer.queue.pop(0)
    job.error = OSError(5, "Input/output error")
    apply_completions([job])
    assert plog.write_error is not None
    assert plog.written_end_offset == 0 and plog.high_watermark == 0
    assert all_bytes(plog)  # the bytes stay readable from memory
    with pytest.raises(LogAppendError) as err:
        part.append_records(batch(2))
    assert err.value.error_code == KAFKA_STORAGE_ERROR
    code = asyncio.run(part.wait_written(2, 1.0))
    assert code == ErrorCode.kafka_storage_error


def test_acks1_waits_until_written(tmp_path: Path) -> None:
    writer = ManualWriter()
    plog = open_log(tmp_path, writer=writer)
    part = sole_leader(plog, lambda: T0)

    async def run() -> list[str]:
        seen: list[str] = []
        part.append_records(batch(2))

        async def waiter() -> None:
            code = await part.wait_written(2, 5.0)
            seen.append(f"written {code.name}")

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0.01)
        seen.append("completing")
        writer.complete()
        await task
        return seen

    assert asyncio.run(run()) == ["completing", "written none"]


# -- the real thread ---------------------------------------------------------------------


def test_threaded_writer_keeps_order_and_batches_completions(tmp_path: Path) -> None:
    writer = ThreadedWriter(inline_bytes=0)  # every write through the thread
    logs = [
        PartitionLog.open(tmp_path, f"t{i}", 0, None, small_config(), _clock(), writer=writer)
        for i in range(3)
    ]
    deliveries = 0
    real = writer._deliver

    def counting() -> None:
        nonlocal deliveries
        deliveries += 1
        real()

    writer._deliver = counting  # type: ignore[method-assign]

    async def run() -> None:
        for i in range(300):
            plog = logs[i % 3]
            plog.append_as_leader(batch(2, tag=i), 0, now_ms=T0)
        for _ in range(200):
            if all(p.written_end_offset == p.log_end_offset for p in logs):
                break
            await asyncio.sleep(0.01)

    asyncio.run(run())
    for plog in logs:
        assert plog.written_end_offset == plog.log_end_offset == 200
        expected = all_bytes(plog)
        assert file_size(plog) == plog.size_bytes
        data = b"".join(s.log_path.read_bytes() for s in plog.segments)
        assert data == expected
    assert 0 < deliveries < 300  # batched: not one wake-up per write
    for plog in logs:
        plog.close()
    writer.stop()


def test_threaded_writer_bounds_the_queued_bytes(tmp_path: Path) -> None:
    writer = ThreadedWriter(max_queued_bytes=4096, inline_bytes=0)
    plog = PartitionLog.open(
        tmp_path,
        "t",
        0,
        None,
        small_config(**{"segment.bytes": "1048576"}),
        _clock(),
        writer=writer,
    )

    async def run() -> None:
        for i in range(500):
            plog.append_as_leader(batch(3, tag=i, value_size=200), 0, now_ms=T0)
            assert writer.queued_bytes <= 4096 + 1024
        wait = writer.barrier()
        await asyncio.get_running_loop().run_in_executor(None, wait)
        await asyncio.sleep(0.05)

    asyncio.run(run())
    assert writer.blocked_submits > 0
    assert plog.written_end_offset == plog.log_end_offset == 1500
    assert file_size(plog) == plog.size_bytes
    plog.close()
    writer.stop()


def _clock() -> ManualClock:
    return ManualClock(T0)


class _Recording(WriteJob):
    """A job that records when it is written instead of writing, the first one held until
    ``gate`` opens (the thread is busy while the test queues more)."""

    __slots__ = ("gate", "name", "order")

    def __init__(self, name: str, queue: object, order: list[str], gate: threading.Event, n: int):
        super().__init__(_NoSink(), -1, 0, b"x" * n, 0, queue)
        self.name, self.order, self.gate = name, order, gate

    def write(self) -> None:
        self.gate.wait(5)
        self.order.append(self.name)


class _NoSink:
    def on_write_done(self, job: WriteJob) -> None:
        return None


def test_threaded_writer_serves_logs_in_turn_and_holds_back_a_full_log() -> None:
    """A log's jobs stay in order, but another log's job is not written behind its backlog;
    back-pressure (``room``) holds the log with much queued, never one with little."""
    writer = ThreadedWriter(inline_bytes=0)
    order: list[str] = []
    gate = threading.Event()
    a, b = object(), object()

    async def run() -> tuple[bool, bool]:
        jobs = [
            _Recording("a1", a, order, gate, 1),
            _Recording("a2", a, order, gate, LOG_QUEUE_BYTES),
            _Recording("a3", a, order, gate, 1),
            _Recording("b1", b, order, gate, 1),
        ]
        writer.submit(jobs[0])
        while writer._current is None:  # the thread holds a1
            await asyncio.sleep(0.001)
        for job in jobs[1:]:
            writer.submit(job)
        held = writer.room(a) is not None  # a has 16 MiB queued
        free = writer.room(b) is None  # b has a byte
        gate.set()
        await asyncio.get_running_loop().run_in_executor(None, writer.barrier())
        return held, free

    held, free = asyncio.run(run())
    writer.stop()
    assert held and free
    assert order == ["a1", "a2", "b1", "a3"]


def test_small_writes_go_straight_to_the_file_while_the_thread_is_idle(tmp_path: Path) -> None:
    writer = ThreadedWriter()
    plog = PartitionLog.open(tmp_path, "t", 0, None, small_config(), _clock(), writer=writer)

    async def run() -> None:
        plog.append_as_leader(batch(2), 0, now_ms=T0)
        assert plog.written_end_offset == 2  # no round trip to the thread
        assert writer._thread is None

    asyncio.run(run())
    assert file_size(plog) == plog.size_bytes
    plog.close()
    writer.stop()
