"""Log appends off the event loop: a segment hands its bytes to a writer, which ``pwrite``s them.

``InlineWriter`` (the default: unit tests, tools) writes at once. ``ThreadedWriter`` (the
node) queues ``WriteJob``s for one thread, so the loop never waits for the disk on an append
and network and disk overlap. Ordering: a FIFO queue per log, so a log's jobs complete in the
order they were submitted; the queues are served round-robin. Completions return to the loop
in batches: after each write the thread adds the job to a done list and wakes the loop only
if no wake-up is pending, so a busy loop gets one ``call_soon_threadsafe`` per drained batch,
not one per write. The bytes queued are bounded: appenders that can wait await ``room()``
past a soft bound, and over the hard bound ``submit`` blocks the loop until the thread is
below it, which is no worse than writing inline (the behaviour before the writer).
While the thread is idle (the disk keeps up) a write of up to 64 KiB is done in ``submit``
itself: cheaper than the round trip to the thread that an acks=1 produce would wait for.

Until a job completes its bytes live in the segment (``LogSegment`` overlays them on reads)
and in the job; the owner learns of the completion on the loop (``WriteSink``), where all
segment and log state changes. ``wait`` blocks the caller until a job is written (the rare
operations that must see the file whole: truncation, close, recovery, fsync), and
``barrier`` gives a flush thread the same wait for everything submitted so far.

A failed ``pwrite`` (EIO, ENOSPC) is logged; the job completes with its error, the writer
skips the log's later jobs (they cannot land after a hole), and the owner refuses further
appends to that log with KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Final, Protocol

log = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview

DEFAULT_MAX_QUEUED_BYTES: Final = 64 << 20
# A log with less than this queued never waits for room: a small produce is not held back
# because another log filled the queue.
SMALL_QUEUE_BYTES: Final = 1 << 20
# Nor does one log queue more than this: enough to keep the disk busy, and what a roll or a
# truncation of that log may have to wait for (they drain it on the loop).
LOG_QUEUE_BYTES: Final = 16 << 20
# Writes up to this size go straight to the file while the writer thread is idle.
INLINE_BYTES: Final = 64 << 10


class WriteSink(Protocol):
    """The segment a job writes for; called on the loop."""

    def on_write_done(self, job: WriteJob) -> WriteNotify | None:
        """Apply the completion; the owner to notify once this batch is applied, if any."""
        ...


class WriteNotify(Protocol):
    def on_writes_applied(self) -> None: ...


class WriteJob:
    """``data`` goes to ``fd`` at ``position``. Jobs of one ``queue`` (a log) are written in
    the order submitted; ``seq`` numbers them node-wide, in submission order."""

    __slots__ = ("data", "done", "end_offset", "error", "fd", "position", "queue", "seq", "sink")

    def __init__(
        self,
        sink: WriteSink,
        fd: int,
        position: int,
        data: Buffer,
        end_offset: int,
        queue: object = None,
    ) -> None:
        self.sink = sink
        self.queue = sink if queue is None else queue
        self.done = False  # set by the writer thread (under its lock) once written or failed
        self.fd = fd
        self.position = position
        self.data = data
        self.end_offset = end_offset  # one past the last offset the job's batches hold
        self.seq = 0
        self.error: OSError | None = None

    @property
    def nbytes(self) -> int:
        data = self.data
        return data.nbytes if isinstance(data, memoryview) else len(data)

    @property
    def end(self) -> int:
        return self.position + self.nbytes

    def write(self) -> None:
        view = memoryview(self.data)
        total = view.nbytes
        done = 0
        while done < total:
            done += os.pwrite(self.fd, view[done:], self.position + done)


class LogWriter(Protocol):
    @property
    def inline(self) -> bool:
        """Writes happen inside ``submit``: no job ever stays pending."""
        ...

    def submit(self, job: WriteJob) -> bool:
        """Queue ``job``; True when it was written at once (no completion follows)."""
        ...

    def wait(self, job: WriteJob) -> None:
        """Block until ``job`` (and every job before it) is written or failed."""
        ...

    def barrier(self) -> Callable[[], None]:
        """A wait, for another thread, until everything submitted so far is written."""
        ...

    def room(self, queue: object) -> asyncio.Future[None] | None:
        """Back-pressure for appenders to ``queue`` (a log) that can wait: None to go ahead,
        else await it."""
        ...


def _no_wait() -> None:
    return None


class InlineWriter:
    """``pwrite`` in ``submit``; failures raise to the appender, as before the writer."""

    inline = True

    def submit(self, job: WriteJob) -> bool:
        job.write()
        return True

    def wait(self, job: WriteJob) -> None:
        return None

    def barrier(self) -> Callable[[], None]:
        return _no_wait

    def room(self, queue: object) -> asyncio.Future[None] | None:
        return None


INLINE: Final = InlineWriter()


class ThreadedWriter:
    """One writer thread (per node), started at the first ``submit`` from the loop.

    Jobs queue per log (``WriteJob.queue``) and the thread serves the queues round-robin, a
    job at a time: a log's writes stay in order, and a small produce is not written behind
    megabytes another log queued (one FIFO made the probe of bench/writer_bench wait for the
    whole backlog). Back-pressure comes in two steps: past ``soft_bytes`` appenders that can
    wait (produce, the fetchers) ``await room()``; past ``max_queued_bytes`` ``submit`` blocks.
    """

    inline = False

    def __init__(
        self, max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES, inline_bytes: int = INLINE_BYTES
    ) -> None:
        self.max_queued_bytes = max_queued_bytes
        self.inline_bytes = inline_bytes
        self.soft_bytes = max_queued_bytes * 3 // 4
        self._cond = threading.Condition()
        self._queues: dict[object, deque[WriteJob]] = {}
        self._bytes_of: dict[object, int] = {}  # bytes queued per queue
        self._ready: deque[object] = deque()  # keys of non-empty queues, served in turn
        self._current: WriteJob | None = None  # being written
        self._queued_bytes = 0
        self._submitted = 0  # seq of the last job submitted
        self._done: list[WriteJob] = []  # finished, not yet handed to the loop
        self._wake_pending = False
        self._failed: set[object] = set()  # queues with a failed write: later jobs skipped
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._room: list[asyncio.Future[None]] = []  # appenders waiting under ``soft_bytes``
        self.blocked_submits = 0  # submits that waited for the hard bound (tests, benches)

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self._thread.start()

    def room(self, queue: object) -> asyncio.Future[None] | None:
        """None while ``queue`` has little queued, or less than ``LOG_QUEUE_BYTES`` with the
        writer under ``soft_bytes``; else a future done at the next completions (then look
        again)."""
        mine = self._bytes_of.get(queue, 0)
        if mine < SMALL_QUEUE_BYTES or (
            mine < LOG_QUEUE_BYTES and self._queued_bytes < self.soft_bytes
        ):
            return None
        fut = asyncio.get_running_loop().create_future()
        self._room.append(fut)
        return fut

    def submit(self, job: WriteJob) -> bool:
        n = job.nbytes
        if n <= self.inline_bytes and not self._queued_bytes and not self._stopping:
            # The thread is idle, so the disk keeps up: a small write costs less here than
            # the round trip to the thread (acks=1 waits for it). Raises as InlineWriter does.
            job.write()
            job.done = True
            return True
        if self._thread is None:
            self._start()
        with self._cond:
            if self._stopping:
                raise RuntimeError("the log writer is stopped")
            if self._queued_bytes and self._queued_bytes + n > self.max_queued_bytes:
                self.blocked_submits += 1
                while self._queued_bytes and self._queued_bytes + n > self.max_queued_bytes:
                    self._cond.wait()
            self._submitted += 1
            job.seq = self._submitted
            queue = self._queues.get(job.queue)
            if queue is None:
                queue = self._queues[job.queue] = deque()
            if not queue:
                self._ready.append(job.queue)
            queue.append(job)
            self._queued_bytes += n
            self._bytes_of[job.queue] = self._bytes_of.get(job.queue, 0) + n
            self._cond.notify_all()
        return False

    def wait(self, job: WriteJob) -> None:
        with self._cond:
            while not job.done:
                self._cond.wait()

    def barrier(self) -> Callable[[], None]:
        with self._cond:
            # A queue's newest job done means its older ones are: wait for each queue's tail.
            tails = [q[-1] for q in self._queues.values() if q]
            if self._current is not None:
                tails.append(self._current)

        def wait() -> None:
            with self._cond:
                while not all(job.done for job in tails) and not self._stopping:
                    self._cond.wait()

        return wait

    def stop(self) -> None:
        """Write what is queued, then end the thread (after the logs closed)."""
        thread = self._thread
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if thread is not None:
            thread.join()
            log.info(
                "log writer stopped: %d appends waited for the %d MiB bound",
                self.blocked_submits,
                self.max_queued_bytes >> 20,
            )

    # -- the thread ----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._ready and not self._stopping:
                    self._cond.wait()
                if not self._ready:
                    return
                key = self._ready.popleft()
                queue = self._queues[key]
                job = self._current = queue.popleft()
                if queue:
                    self._ready.append(key)  # its next job after the other queues' turns
                else:
                    del self._queues[key]
            self._write(job)
            with self._cond:
                n = job.nbytes
                self._queued_bytes -= n
                left = self._bytes_of[job.queue] - n
                if left:
                    self._bytes_of[job.queue] = left
                else:
                    del self._bytes_of[job.queue]
                self._current = None
                job.done = True
                self._done.append(job)
                wake = not self._wake_pending
                self._wake_pending = True
                self._cond.notify_all()
            if wake:
                self._wake_loop()

    def _write(self, job: WriteJob) -> None:
        if job.queue in self._failed:
            job.error = OSError(f"an earlier write to fd {job.fd} failed")
            return
        try:
            job.write()
        except Exception as exc:  # never let the thread die: the loop may wait on it
            self._failed.add(job.queue)
            job.error = exc if isinstance(exc, OSError) else OSError(str(exc))
            log.error("log write of %d bytes at %d failed: %s", job.nbytes, job.position, exc)

    def _wake_loop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        # RuntimeError: the loop closed; the logs were drained before it did
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._deliver)

    # -- the loop ------------------------------------------------------------------------
    def _deliver(self) -> None:
        with self._cond:
            jobs, self._done = self._done, []
            self._wake_pending = False
        if self._room:  # each looks again (``room``)
            waiting, self._room = self._room, []
            for fut in waiting:
                if not fut.done():
                    fut.set_result(None)
        apply_completions(jobs)


def apply_completions(jobs: list[WriteJob]) -> None:
    """On the loop: each job's segment learns it is written, then each owner once."""
    owners: dict[int, WriteNotify] = {}
    for job in jobs:
        owner = job.sink.on_write_done(job)
        if owner is not None:
            owners[id(owner)] = owner
    for owner in owners.values():
        owner.on_writes_applied()
