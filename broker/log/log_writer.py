"""Log appends off the event loop: a segment hands its bytes to a writer, which ``pwrite``s them.

``InlineWriter`` (the default: unit tests, tools) writes at once. ``ThreadedWriter`` (the
node) queues ``WriteJob``s FIFO for one thread, so the loop never waits for the disk on an
append and network and disk overlap. Ordering: one queue per node, so a log's jobs complete
in the order they were submitted. Completions return to the loop in batches: after each write
the thread adds the job to a done list and wakes the loop only if no wake-up is pending, so a
busy loop gets one ``call_soon_threadsafe`` per drained batch, not one per write. The bytes
queued are bounded: over the bound ``submit`` blocks the loop until the thread is below it,
which is no worse than writing inline (today's behaviour under page-cache pressure).

Until a job completes its bytes live in the segment (``LogSegment`` overlays them on reads)
and in the job; the owner learns of the completion on the loop (``WriteSink``), where all
segment and log state changes. ``wait`` blocks the caller until a job is written (the rare
operations that must see the file whole: truncation, close, recovery, fsync), and
``barrier`` gives a flush thread the same wait for everything submitted so far.

A failed ``pwrite`` (EIO, ENOSPC) is logged; the job completes with its error, the writer
skips the segment's later jobs (they cannot land after a hole), and the owner refuses further
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


class WriteSink(Protocol):
    """The segment a job writes for; called on the loop."""

    def on_write_done(self, job: WriteJob) -> WriteNotify | None:
        """Apply the completion; the owner to notify once this batch is applied, if any."""
        ...


class WriteNotify(Protocol):
    def on_writes_applied(self) -> None: ...


class WriteJob:
    """``data`` goes to ``fd`` at ``position``; ``seq`` orders jobs (FIFO, node-wide)."""

    __slots__ = ("data", "end_offset", "error", "fd", "position", "seq", "sink")

    def __init__(
        self, sink: WriteSink, fd: int, position: int, data: Buffer, end_offset: int
    ) -> None:
        self.sink = sink
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

    def submit(self, job: WriteJob) -> None: ...

    def wait(self, job: WriteJob) -> None:
        """Block until ``job`` (and every job before it) is written or failed."""
        ...

    def barrier(self) -> Callable[[], None]:
        """A wait, for another thread, until everything submitted so far is written."""
        ...


def _no_wait() -> None:
    return None


class InlineWriter:
    """``pwrite`` in ``submit``; failures raise to the appender, as before the writer."""

    inline = True

    def submit(self, job: WriteJob) -> None:
        job.write()

    def wait(self, job: WriteJob) -> None:
        return None

    def barrier(self) -> Callable[[], None]:
        return _no_wait


INLINE: Final = InlineWriter()


class ThreadedWriter:
    """One writer thread (per node), started at the first ``submit`` from the loop."""

    inline = False

    def __init__(self, max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES) -> None:
        self.max_queued_bytes = max_queued_bytes
        self._cond = threading.Condition()
        self._queue: deque[WriteJob] = deque()
        self._queued_bytes = 0
        self._submitted = 0  # seq of the last job submitted
        self._finished = 0  # seq of the last job the thread is done with
        self._done: list[WriteJob] = []  # finished, not yet handed to the loop
        self._wake_pending = False
        self._failed: set[int] = set()  # id() of sinks with a failed write: later jobs skipped
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.blocked_submits = 0  # submits that waited for the bound (a metric for tests/benches)

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self._thread.start()

    def submit(self, job: WriteJob) -> None:
        if self._thread is None:
            self._start()
        n = job.nbytes
        with self._cond:
            if self._stopping:
                raise RuntimeError("the log writer is stopped")
            if self._queued_bytes and self._queued_bytes + n > self.max_queued_bytes:
                self.blocked_submits += 1
                while self._queued_bytes and self._queued_bytes + n > self.max_queued_bytes:
                    self._cond.wait()
            self._submitted += 1
            job.seq = self._submitted
            self._queue.append(job)
            self._queued_bytes += n
            self._cond.notify_all()

    def wait(self, job: WriteJob) -> None:
        with self._cond:
            while self._finished < job.seq:
                self._cond.wait()

    def barrier(self) -> Callable[[], None]:
        with self._cond:
            target = self._submitted

        def wait() -> None:
            with self._cond:
                while self._finished < target and not self._stopping:
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

    # -- the thread ----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                job = self._queue.popleft()
            self._write(job)
            with self._cond:
                self._queued_bytes -= job.nbytes
                self._finished = job.seq
                self._done.append(job)
                wake = not self._wake_pending
                self._wake_pending = True
                self._cond.notify_all()
            if wake:
                self._wake_loop()

    def _write(self, job: WriteJob) -> None:
        key = id(job.sink)
        if key in self._failed:
            job.error = OSError(f"an earlier write to fd {job.fd} failed")
            return
        try:
            job.write()
        except Exception as exc:  # never let the thread die: the loop may wait on it
            self._failed.add(key)
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
