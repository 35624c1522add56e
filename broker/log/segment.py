"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex``.

Batches are written and read as opaque bytes (``pwrite``/``pread``). Only batch headers are
parsed here; the one exception is the timestamp search, which must find a record inside a
batch (ListOffsets is not a hot path).

Appends go through a ``LogWriter`` (see log_writer). With a threaded one, ``size`` counts the
bytes assigned and ``written`` those in the file; the chunks between them stay in memory
(``_pending``, FIFO and contiguous) and every read overlays them, so readers see an append at
once. Whatever needs the file whole (truncation, recovery, roll, close, delete, fsync, a copy)
first ``drain``s the segment (a short blocking wait), so only the active segment ever has
writes pending, and its descriptor is owned, never in the LRU cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap
import os
import struct
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

from protocol.errors import ProtocolError
from protocol.records import (
    BatchView,
    iter_records,
    max_timestamp_suspect,
    records_max_timestamp,
    scan_batches,
)
from protocol.records.batch import LOG_OVERHEAD, MIN_BATCH_LENGTH

from .file_cache import OpenFileCache, default_cache
from .index import NO_TIMESTAMP, OffsetIndex, TimeIndex, TimestampOffset
from .log_writer import INLINE, LogWriter, WriteJob, WriteNotify
from .segment_file import SegmentFile
from .txn_index import TransactionIndex

if TYPE_CHECKING:
    from .epoch_cache import LeaderEpochCache

Buffer = bytes | bytearray | memoryview

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
TXN_INDEX_SUFFIX: Final = ".txnindex"
DELETED_SUFFIX: Final = ".deleted"

# base offset .. max timestamp: everything the storage layer needs from a header (43 bytes).
_HEAD: Final = struct.Struct(">qiibIhiqq")
_SCAN_CHUNK: Final = 64 * 1024
_RECENT_BATCHES: Final = 32  # per segment: see `LogSegment._recent`

log = logging.getLogger(__name__)


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


Pread = Callable[[int, int, int], bytes]  # os.pread's signature: (fd, size, position)


class SegmentOwner(WriteNotify, Protocol):
    """The log a segment belongs to: told of each completed write (on the loop)."""

    def on_segment_written(self, job: WriteJob) -> None: ...


class BatchHeader(NamedTuple):
    position: int
    base_offset: int
    size: int
    last_offset: int
    max_timestamp: int  # as the header says: see ``LogSegment.max_timestamp_of``
    partition_leader_epoch: int
    base_timestamp: int
    attributes: int


class BatchMeta(NamedTuple):
    """What an append tells the segment about each batch it writes."""

    position: int  # within the appended buffer
    size: int
    last_offset: int
    max_timestamp: int


def batch_max_timestamp(view: BatchView) -> int:
    """The max timestamp retention, rolling and the time index use for a stored batch.

    Mirrored batches are stored byte for byte, so a source's wrong header stays; when it looks
    wrong (``max_timestamp_suspect``) the records' own maximum is used, so a header of 0 cannot
    make time retention delete just-mirrored records or roll a segment at once.
    """
    if not max_timestamp_suspect(view.attributes, view.base_timestamp, view.max_timestamp):
        return view.max_timestamp
    try:
        return records_max_timestamp(view)
    except ProtocolError:  # undecodable records: the CRC held, so keep the batch and its claim
        return view.max_timestamp


def iter_headers(fd: int, start: int, end: int, pread: Pread = os.pread) -> Iterator[BatchHeader]:
    """Walk whole batches in ``[start, end)`` of a file, reading headers only; stops at a torn
    tail. ``pread``: a segment's, when bytes not yet written must be read from memory."""
    pos = start
    buf = b""
    buf_start = start
    last_size = 0
    while end - pos >= _HEAD.size:
        off = pos - buf_start
        if off + _HEAD.size > len(buf):
            # After a big batch, fetch just the next header rather than a whole chunk.
            want = _HEAD.size if last_size >= _SCAN_CHUNK else min(_SCAN_CHUNK, end - pos)
            buf = pread(fd, want, pos)
            buf_start, off = pos, 0
            if len(buf) < _HEAD.size:
                return
        base, length, ple, _magic, _crc, attrs, lod, bts, max_ts = _HEAD.unpack_from(buf, off)
        size = LOG_OVERHEAD + length
        if length < MIN_BATCH_LENGTH or pos + size > end:
            return
        yield BatchHeader(pos, base, size, base + lod, max_ts, ple, bts, attrs)
        last_size = size
        pos += size


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        now_ms: int,
        roll_jitter_ms: int = 0,
        file_cache: OpenFileCache | None = None,
        writer: LogWriter = INLINE,
        owner: SegmentOwner | None = None,
        fresh: bool = False,
    ) -> None:
        # fresh: a new log's first segment, in a directory made just now (no file to look for)
        self.base_offset = base_offset
        self._writer = writer
        self._owner = owner
        self._pending: deque[WriteJob] = deque()  # submitted, not yet known written
        self._done_seq = 0  # the last job whose completion was applied
        self.write_error: OSError | None = None
        self.log_path = directory / file_name(base_offset, LOG_SUFFIX)
        # Owned by appends, else in the bounded cache of log.max.open.files (segment_file).
        self._file = SegmentFile(self.log_path, file_cache or default_cache())
        self.size = self._file.open()
        self.written = self.size  # bytes in the file; ``size`` - ``written`` are pending
        try:
            self.index = OffsetIndex(
                directory / file_name(base_offset, INDEX_SUFFIX),
                base_offset,
                max_index_size,
                lazy=True,
                missing=fresh,
            )
            self.time_index = TimeIndex(
                directory / file_name(base_offset, TIME_INDEX_SUFFIX),
                base_offset,
                max_index_size,
                lazy=True,
                missing=fresh,
            )
        except BaseException:
            self._file.close()
            raise
        self.txn_index = TransactionIndex(
            directory / file_name(base_offset, TXN_INDEX_SUFFIX), base_offset, missing=fresh
        )
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = now_ms
        self._rolling_ts: int | None = None
        self._max_ts: TimestampOffset | None = None
        self._bytes_since_index = 0
        # (last offset, end position) of the batches appended last: a fetch at the tail (every
        # follower's and caught-up consumer's) starts reading at its batch instead of walking
        # the headers from the last index entry (up to index.interval.bytes of them).
        self._recent: deque[tuple[int, int]] = deque(maxlen=_RECENT_BATCHES)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size})"

    # -- plumbing ------------------------------------------------------------------------
    @property
    def fd(self) -> int:
        """The log's descriptor for a use that ends before another file opens (see
        ``SegmentFile.fd``)."""
        return self._file.fd

    @property
    def indexes_missing(self) -> bool:
        """An index file had to be created for a non-empty log: the indexes need rebuilding."""
        return self.size > 0 and (self.index.newly_created or self.time_index.newly_created)

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        stop = self.size if end is None else end
        fd = self._file.owned  # the active segment's: no pinning needed (the fast path)
        if fd is not None:
            return iter_headers(fd, start, stop, self._pread_fn())
        return self._file.iterate(lambda fd: iter_headers(fd, start, stop))

    def read(self, position: int, size: int) -> bytes:
        fd = self._file.owned
        if fd is not None:
            if self._pending and position + size > self.written:
                return self._pread_overlay(fd, size, position)
            return os.pread(fd, size, position)
        return self._file.pread(size, position)  # no descriptor owned: nothing pending

    # -- writes not yet in the file --------------------------------------------------------
    def adopt(self, owner: SegmentOwner) -> None:
        """Report completions to ``owner`` from now on (a log moved to another log dir)."""
        self._owner = owner

    @property
    def writes_pending(self) -> bool:
        return bool(self._pending)

    def _pread_fn(self) -> Pread:
        return self._pread_overlay if self._pending else os.pread

    def _pread_overlay(self, fd: int, size: int, position: int) -> bytes:
        """``os.pread`` of the assigned bytes: the file below ``written``, memory above it."""
        written = self.written
        end = min(position + size, self.size)
        if end <= written or not self._pending:
            return os.pread(fd, size, position)
        parts: list[bytes | memoryview] = []
        if position < written:
            parts.append(os.pread(fd, written - position, position))
        for job in self._pending:  # contiguous from ``written``: a few at the tail
            start, stop = job.position, job.end
            if stop <= position:
                continue
            if start >= end:
                break
            parts.append(
                memoryview(job.data)[max(position, start) - start : min(end, stop) - start]
            )
        return b"".join(parts)

    def on_write_done(self, job: WriteJob) -> WriteNotify | None:
        """A job's completion, on the loop (the writer's batch, or ``drain``); the owner to
        notify, or None when a drain already applied it."""
        if job.seq <= self._done_seq:
            return None
        self._done_seq = job.seq
        pending = self._pending
        if job.error is not None:
            # Its bytes stay readable from memory; the log refuses appends from now on.
            if self.write_error is None:
                self.write_error = job.error
        else:
            while pending and pending[0].seq <= job.seq:
                pending.popleft()
            # max: a small append may have gone straight to the file after this job
            self.written = max(self.written, job.end)
        owner = self._owner
        if owner is None:
            return None
        owner.on_segment_written(job)
        return owner

    def drain(self) -> None:
        """Block until this segment's queued writes are in the file (rare operations only);
        the owner hears of it on the next loop iteration, as from the writer."""
        if not self._pending:
            return
        last = self._pending[-1]
        self._writer.wait(last)
        owner = self.on_write_done(last)
        if owner is not None:
            with contextlib.suppress(RuntimeError):  # no loop (tools): nobody waits
                asyncio.get_running_loop().call_soon(owner.on_writes_applied)

    # -- timestamps ----------------------------------------------------------------------
    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        if self._max_ts is None:
            self._max_ts = self.time_index.last_entry
        return self._max_ts

    @property
    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when there is none (retention)."""
        ts = self.max_timestamp_so_far.timestamp
        return ts if ts >= 0 else os.stat(self.log_path).st_mtime_ns // 1_000_000

    def max_timestamp_of(self, header: BatchHeader) -> int:
        """``batch_max_timestamp`` of a stored batch; reads it only when its header looks wrong."""
        if not max_timestamp_suspect(
            header.attributes, header.base_timestamp, header.max_timestamp
        ):
            return header.max_timestamp
        return batch_max_timestamp(BatchView(self.read(header.position, header.size)))

    def _first_batch_timestamp(self) -> int | None:
        if self._rolling_ts is None and self.size:
            for header in self.headers():
                self._rolling_ts = self.max_timestamp_of(header)
                break
        return self._rolling_ts

    def time_waited_for_roll(self, now_ms: int, message_ts: int) -> int:
        ts = self._first_batch_timestamp()
        if ts is not None and ts >= 0:
            return message_ts - ts
        return now_ms - self.created_ms

    def should_roll(
        self,
        *,
        segment_bytes: int,
        segment_ms: int,
        messages_size: int,
        max_timestamp: int,
        max_offset: int,
        now_ms: int,
    ) -> bool:
        reached_ms = self.time_waited_for_roll(now_ms, max_timestamp) > (
            segment_ms - self.roll_jitter_ms
        )
        return (
            self.size > segment_bytes - messages_size
            or (self.size > 0 and reached_ms)
            or self.index.is_full()
            or self.time_index.is_full()
            or not self.index.can_append_offset(max_offset)
        )

    # -- append --------------------------------------------------------------------------
    def append(
        self, data: Buffer, metas: Sequence[BatchMeta], *, end_offset: int = -1, owned: bool = False
    ) -> WriteJob | None:
        """Write ``data`` at the end; returns the job while it is pending (a threaded writer).

        ``owned``: nobody else holds or changes ``data`` (else a threaded writer copies it,
        a view of a network frame must not outlive its frame). ``end_offset`` is what the
        owner's log end will be once the job is written."""
        physical = self.size
        total = data.nbytes if isinstance(data, memoryview) else len(data)
        fd = self._file.owned
        if fd is None:
            fd = self._file.own()
        writer = self._writer
        if not writer.inline and not owned and not isinstance(data, bytes):
            data = bytes(data)
        job = WriteJob(self, fd, physical, data, end_offset, self._owner)  # queued per log
        # Written at once (inline), or queued: then may block while the queue is full.
        pending = not writer.submit(job)
        if pending:
            self._pending.append(job)
        else:
            self.written = physical + total
        self.size = physical + total
        if physical == 0:
            self._rolling_ts = max(m.max_timestamp for m in metas)
        max_ts = self.max_timestamp_so_far
        for meta in metas:
            if meta.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(meta.max_timestamp, meta.last_offset)
            self._recent.append((meta.last_offset, physical + meta.position + meta.size))
            if self._bytes_since_index > self.index_interval_bytes:
                self.index.append(meta.last_offset, physical + meta.position)
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                self._bytes_since_index = 0
            self._bytes_since_index += meta.size
        self._max_ts = max_ts
        return job if pending else None

    # -- lookups -------------------------------------------------------------------------
    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch whose last offset is >= ``offset`` (the one holding it, or the next)."""
        pos = max(self.index.lookup(offset).position, start_position)
        for last, end in reversed(self._recent):  # newest first: the tail is what is fetched
            if last < offset:
                pos = max(pos, end)  # the batch holding ``offset`` starts at or after ``end``
                break
        # Nothing below opens another file, so the descriptor needs no pin (the fetch path).
        for header in iter_headers(self.fd, pos, self.size, self._pread_fn()):
            if header.last_offset >= offset:
                return header
        return None

    def read_next_offset(self) -> int:
        start = self.index.lookup(self.index.last_offset).position if self.index.entries else 0
        last: BatchHeader | None = None
        for header in self.headers(start):
            last = header
        return last.last_offset + 1 if last is not None else self.base_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int] | None:
        """(record timestamp, offset, partition leader epoch) of the first record at or after
        ``timestamp`` with offset >= ``starting_offset``."""
        entry = self.time_index.lookup(timestamp)
        pos = self.index.lookup(max(entry.offset, starting_offset)).position
        for header in self.headers(pos):
            if header.last_offset < starting_offset or self.max_timestamp_of(header) < timestamp:
                continue
            batch = BatchView(self.read(header.position, header.size))
            for rec in iter_records(batch):
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    return rec.timestamp, rec.offset, header.partition_leader_epoch
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int, int] | None:
        """(max timestamp, offset of the first record carrying it, epoch) for ListOffsets -3."""
        target = self.max_timestamp_so_far
        if target.timestamp < 0:
            return None
        pos = self.index.lookup(target.offset).position
        for header in self.headers(pos):
            if self.max_timestamp_of(header) != target.timestamp:
                continue
            batch = BatchView(self.read(header.position, header.size))
            for rec in iter_records(batch):
                if rec.timestamp == target.timestamp:
                    return rec.timestamp, rec.offset, header.partition_leader_epoch
        return None

    # -- recovery / truncation -----------------------------------------------------------
    def recover(
        self, epoch_cache: LeaderEpochCache | None, trusted_below: int | None = None
    ) -> tuple[int, str | None]:
        """Validate every batch (CRC32C), rebuild both indexes, cut an invalid tail.

        ``trusted_below``: the recovery point, when it falls inside this segment and the
        indexes passed their sanity checks. The batches below it were fsynced together with
        their index entries, so validation resumes after the last indexed batch below it
        (once that batch's header matches its entry; otherwise everything is validated).
        Returns ``(bytes truncated, why)``.
        """
        self.drain()
        resume = None if trusted_below is None else self._trusted_prefix(trusted_below)
        if resume is None:
            self.index.reset()
            self.time_index.reset()
        else:
            self.index.truncate_to(resume.last_offset + 1)
            self.time_index.truncate_to(resume.last_offset + 1)
            self.index.resize(self.max_index_size)  # a trimmed index has room again
            self.time_index.resize(self.max_index_size)
        self.index.begin_bulk()  # one write per index, not one per entry
        self.time_index.begin_bulk()
        try:
            return self._recover(epoch_cache, resume)
        finally:
            self.index.end_bulk()
            self.time_index.end_bulk()

    def _trusted_prefix(self, recovery_point: int) -> BatchHeader | None:
        """The last indexed batch wholly below ``recovery_point``, if its header agrees."""
        if recovery_point <= self.base_offset or not self.index.entries:
            return None
        entry = self.index.lookup(recovery_point - 1)
        if entry.offset >= recovery_point or (entry.offset, entry.position) == (
            self.base_offset,
            0,
        ):
            return None  # no entry below it (lookup's fallback)
        head = self.read(entry.position, _HEAD.size)
        if len(head) < _HEAD.size:
            return None
        base, length, ple, _magic, _crc, _attrs, lod, _bts, max_ts = _HEAD.unpack_from(head)
        size = LOG_OVERHEAD + length
        if base + lod != entry.offset or length < MIN_BATCH_LENGTH:
            return None
        if entry.position + size > self.size:
            return None
        return BatchHeader(entry.position, base, size, entry.offset, max_ts, ple, 0, 0)

    def _recover(
        self, epoch_cache: LeaderEpochCache | None, resume: BatchHeader | None
    ) -> tuple[int, str | None]:
        self._bytes_since_index = 0
        self._recent.clear()
        max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        next_offset = self.base_offset
        valid = 0
        last_index_pos = 0
        if resume is not None:
            # The kept time index entries cover every batch up to the resumed one.
            max_ts = self.time_index.last_entry
            next_offset = resume.last_offset + 1
            valid = resume.position + resume.size
            last_index_pos = resume.position
        why: str | None = None
        if self.size > valid:
            mm = mmap.mmap(self.fd, self.size, access=mmap.ACCESS_READ)
            mv = memoryview(mm)
            batches = scan_batches(mv, valid, self.size, verify_crc=True)
            try:
                for view in batches:
                    last = view.last_offset
                    if not self.index.can_append_offset(last):
                        why = f"offset {last} does not fit a segment based at {self.base_offset}"
                        break
                    batch_ts = batch_max_timestamp(view)
                    if batch_ts > max_ts.timestamp:
                        max_ts = TimestampOffset(batch_ts, last)
                    if valid - last_index_pos > self.index_interval_bytes:
                        self.index.append(last, valid)
                        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                        last_index_pos = valid
                    valid += view.size
                    next_offset = last + 1
                    epoch = view.partition_leader_epoch
                    if epoch_cache is not None and epoch >= 0:
                        latest = epoch_cache.latest_epoch
                        if latest is None or epoch > latest:
                            epoch_cache.assign(epoch, view.base_offset)
                    del view
            except ProtocolError as exc:
                why = str(exc)
            finally:
                batches.close()  # type: ignore[attr-defined]
                mv.release()
                with contextlib.suppress(BufferError):
                    mm.close()
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self.fd, valid)
            self.size = self.written = valid
            if why is None:
                why = "torn batch at the end"
        self._max_ts = max_ts
        self._rolling_ts = None
        # Entries for markers the cut removed go; the producer-state replay rebuilds the rest.
        self.txn_index.truncate_to(next_offset)
        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        for index in (self.index, self.time_index):
            if index.on_disk:
                index.trim()
            else:  # a lazy index keeps its entries in memory until a flush creates its file
                index.resize(index.entries * index.entry_size)
        return truncated, why

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Drop every batch from the one holding ``offset`` on; returns bytes removed."""
        self.drain()
        header = self.translate_offset(offset)
        self._recent.clear()  # positions past the cut are gone
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        removed = 0
        if header is not None:
            removed = self.size - header.position
            os.ftruncate(self.fd, header.position)
            self.size = self.written = header.position
        if self.size == 0:
            self.created_ms = now_ms
            self._rolling_ts = None
        self._bytes_since_index = 0
        self._max_ts = self._read_largest_timestamp()
        return removed

    def _read_largest_timestamp(self) -> TimestampOffset:
        last = self.time_index.last_entry
        pos = self.index.lookup(last.offset).position
        best = last
        for header in self.headers(pos):
            batch_ts = self.max_timestamp_of(header)
            if batch_ts > best.timestamp:
                best = TimestampOffset(batch_ts, header.last_offset)
        return best

    # -- lifecycle -----------------------------------------------------------------------
    def resize_indexes(self, size: int) -> None:
        self.index.resize(size)
        self.time_index.resize(size)

    def on_become_inactive(self) -> None:
        ts = self.max_timestamp_so_far
        self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        self.index.trim()  # writes the entries out; the flush the roll schedules fsyncs them
        self.time_index.trim()
        # Written before the next segment's file exists: a kill -9 must not leave a segment
        # short of its last batches with a later one after it (a gap recovery cannot see).
        self.drain()
        self._file.disown()

    def sync_paths(self) -> list[Path]:
        """The files a flush fsyncs (the log and its two indexes, whose pending entries are
        written now), for a worker thread; the transaction index, rarely written, is flushed
        here."""
        self.txn_index.flush()
        for index in (self.index, self.time_index):
            index.materialize()  # a lazy one's file must exist to be fsynced
            index.write_pending()
        return [self.log_path, self.index.path, self.time_index.path]

    def flush(self) -> None:
        self.drain()
        self._file.fsync()
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self._file.closed:
            return
        self.drain()  # never close a descriptor the writer may still use
        if self._max_ts is not None:
            ts = self._max_ts
            self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        for index in (self.index, self.time_index):
            if self.size == 0 and not index.on_disk:
                index.close_handle()  # nothing to index: a lazy file stays uncreated
            else:
                index.close()
        self.txn_index.flush()
        self.txn_index.close()
        self._file.close()

    def close_handles(self) -> None:
        """Close the files without the final index work (the segment is going away)."""
        self.drain()
        self.index.close_handle()
        self.time_index.close_handle()
        self.txn_index.close()
        self._file.close()

    def mark_deleted(self) -> list[Path]:
        """Close and rename every file to ``*.deleted``; the caller removes them later."""
        self.close_handles()
        renamed = []
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            if path.exists():
                target = path.with_name(path.name + DELETED_SUFFIX)
                os.replace(path, target)
                renamed.append(target)
        return renamed

    def delete(self) -> None:
        for path in self.mark_deleted():
            path.unlink(missing_ok=True)
