"""The coordinator runtime's `RecordLog` over one partition of an internal topic.

Appends go through the partition (acks=all): a write succeeds once every in-sync replica holds
it, or fails with the partition's error (NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT after
``offsets.commit.timeout.ms``, NOT_LEADER_OR_FOLLOWER), which the runtime maps for clients. It
is not fsynced per commit, as Kafka does not fsync either: replicas and the page cache carry it.

It is also a `TxnRecordLog`: TxnOffsetCommit records go in as one transactional batch of the
producer (with the sequence the partition's producer state expects next), markers as control
batches, and `replay_entries` hands both back in log order.
"""

from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.records import (
    BatchView,
    ControlType,
    Record,
    build_batch,
    iter_records,
    parse_control_record,
    scan_batches,
)

from ..log.validation import AppendOrigin
from .markers import append_end_marker
from .runtime import AppendError, EndMarker, ReplayEntry, TxnRecord

READ_CHUNK = 1 << 20
_INT32_MAX = 0x7FFFFFFF


class PartitionRecordLog:
    def __init__(
        self, partition: Any, now_ms: Callable[[], int], commit_timeout_s: float = 5.0
    ) -> None:
        self._partition = partition  # broker.replication.partition.Partition
        self._log = partition.log
        self._now_ms = now_ms
        self._commit_timeout_s = commit_timeout_s

    @property
    def leader_epoch(self) -> int:
        """The partition's leader epoch: a coordinator's epoch on this partition."""
        return int(self._partition.leader_epoch)

    async def _append(self, batch: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        try:
            result = self._partition.append_records(batch, acks=-1, origin=origin)
        except Exception as e:
            raise _append_error(e) from e
        await self._committed(result.last_offset + 1)

    def begin_append(self, records: list[tuple[bytes, bytes | None]]) -> Awaitable[None]:
        """In the log now (or raise); the coroutine returned waits for the ISR."""
        batch = build_batch(
            [Record(key=k, value=v) for k, v in records], base_timestamp=self._now_ms()
        )
        try:
            result = self._partition.append_records(batch, acks=-1)
        except Exception as e:
            raise _append_error(e) from e
        return self._committed(result.last_offset + 1)

    async def _committed(self, required_offset: int) -> None:
        """A coordinator write counts once the ISR holds it (``offsets.commit.timeout.ms``)."""
        code = await self._partition.wait_committed(required_offset, self._commit_timeout_s)
        if code != ErrorCode.none:
            raise AppendError(code, f"write to {self._log.name} not committed: {code.name}")

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        if not records:
            return
        batch = build_batch(
            [Record(key=k, value=v) for k, v in records], base_timestamp=self._now_ms()
        )
        await self._append(batch)

    async def append_transactional(
        self, records: list[tuple[bytes, bytes | None]], producer_id: int, producer_epoch: int
    ) -> None:
        if not records:
            return
        batch = build_batch(
            [Record(key=k, value=v) for k, v in records],
            base_timestamp=self._now_ms(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=self._next_sequence(producer_id, producer_epoch),
            is_transactional=True,
        )
        # The partition's producer state still checks the epoch: a fenced producer's offsets
        # are refused with INVALID_PRODUCER_EPOCH, as in Kafka.
        await self._append(batch, AppendOrigin.COORDINATOR)

    def _next_sequence(self, producer_id: int, producer_epoch: int) -> int:
        state = getattr(self._log, "producer_state", None)
        entry = state.last_entry(producer_id) if state is not None else None
        if entry is None or entry.producer_epoch != producer_epoch or entry.last_seq < 0:
            return 0
        return 0 if entry.last_seq >= _INT32_MAX else entry.last_seq + 1

    async def append_marker(self, marker: EndMarker) -> None:
        try:
            offset = append_end_marker(self._partition, marker)
        except Exception as e:
            raise _append_error(e) from e
        await self._committed(offset + 1)

    def _batches(self) -> Iterator[BatchView]:
        offset = self._log.log_start_offset
        end = self._log.log_end_offset
        while offset < end:
            result = self._log.read(offset, READ_CHUNK, upper_bound=end)
            if not result.records:
                break
            progressed = False
            for buf in result.records:
                for batch in scan_batches(buf, allow_partial_tail=True):
                    if batch.last_offset < offset:
                        continue
                    yield batch
                    offset = batch.last_offset + 1
                    progressed = True
            if not progressed:
                break

    def replay(self) -> Iterable[tuple[bytes, bytes | None]]:
        start = self._log.log_start_offset
        for batch in self._batches():
            if batch.is_control:
                continue
            for rec in iter_records(batch):
                if rec.offset >= start and rec.key is not None:
                    yield rec.key, rec.value

    def replay_entries(self) -> Iterable[ReplayEntry]:
        start = self._log.log_start_offset
        for batch in self._batches():
            pid = batch.producer_id
            if batch.is_control:
                marker = _end_marker(batch)
                if marker is not None:
                    yield marker
                continue
            transactional = batch.is_transactional and pid >= 0
            for rec in iter_records(batch):
                if rec.offset < start or rec.key is None:
                    continue
                yield TxnRecord(rec.key, rec.value, pid) if transactional else (rec.key, rec.value)


def _append_error(e: Exception) -> AppendError:
    """The log's error (its Kafka code is a plain int) as the runtime's AppendError."""
    try:
        code = ErrorCode(int(getattr(e, "error_code", ErrorCode.unknown_server_error)))
    except ValueError:
        code = ErrorCode.unknown_server_error
    return AppendError(code, str(e))


def _end_marker(batch: BatchView) -> EndMarker | None:
    """The COMMIT/ABORT marker a control batch holds (None for other control records)."""
    if batch.producer_id < 0 or batch.record_count <= 0:
        return None
    record = next(iter_records(batch), None)
    if record is None:
        return None
    control = parse_control_record(record.key, record.value)
    if control.type not in (ControlType.COMMIT, ControlType.ABORT):
        return None
    return EndMarker(
        batch.producer_id,
        batch.producer_epoch,
        control.coordinator_epoch if control.coordinator_epoch is not None else -1,
        control.type == ControlType.COMMIT,
    )
