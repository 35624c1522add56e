"""A small generic coordinator runtime.

One shard per partition of the coordinator's internal topic. Each shard owns a state
machine and a `RecordLog`. Operations on a shard run one at a time (a lock per shard);
a write returns records plus a response, and the response is only released after the
records are durable. If the append fails the operation's `on_failure` undoes what it
changed in memory and builds the error response; without one the shard is rebuilt from
its log.

A shard whose writes change nothing in memory before their commit (`on_commit` applies them,
`on_failure` only reports) may write pipelined (`write_pipelined`): the next write of the shard
goes into the log as soon as this one is there, and their commits are awaited together, as
Kafka's coordinators do; a failover's thousands of mirror state writes then cost one
replication round trip instead of one per batch.

Transactions (the group coordinator's TxnOffsetCommit): a write may append its records as one
transactional batch of a producer, or append a COMMIT/ABORT marker; a log that can do so
(`TxnRecordLog`) replays them as `TxnRecord`s and `EndMarker`s to shards that know them
(`TxnAwareShard`), so pending transactional state is rebuilt exactly as it was.
"""

import array
import asyncio
import contextlib
import functools
import itertools
import operator
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar, runtime_checkable

from kio.schema.errors import ErrorCode

from broker.coordinator.timer import Cancellable, Scheduler

Record = tuple[bytes, bytes | None]

T = TypeVar("T")
S = TypeVar("S", bound="Shard")

# How many replayed records between yields to the event loop while loading.
_LOAD_YIELD_EVERY = 1000


class RecordLog(Protocol):
    """The durable log behind one shard (a partition of the internal topic)."""

    async def append(self, records: list[Record]) -> None:
        """Resolve once the records are committed; raise if they never will be."""
        ...

    def begin_append(self, records: list[Record]) -> Awaitable[None]:
        """Put the records in the log now (raise if they cannot go in); the awaitable
        resolves once they are committed, or raises if they never will be."""
        ...

    def replay(self) -> Iterable[Record]:
        """Every committed (key, value) in log order; value None is a tombstone."""
        ...


@dataclass(frozen=True, slots=True)
class EndMarker:
    """A COMMIT/ABORT control record ending `producer_id`'s transaction."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A record written inside a transaction of `producer_id`: pending until its marker."""

    key: bytes
    value: bytes | None
    producer_id: int


ReplayEntry = Record | TxnRecord | EndMarker


@runtime_checkable
class TxnRecordLog(Protocol):
    """A RecordLog that also holds transactional batches and their markers."""

    async def append(self, records: list[Record]) -> None: ...

    def replay(self) -> Iterable[Record]: ...

    async def append_transactional(
        self, records: list[Record], producer_id: int, producer_epoch: int
    ) -> None:
        """Append the records as one transactional batch of the producer."""
        ...

    async def append_marker(self, marker: EndMarker) -> None: ...

    def replay_entries(self) -> Iterable[ReplayEntry]:
        """Everything in log order: plain records, transactional records and markers."""
        ...


class CoordinatorError(Exception):
    """An operation that cannot run; `code` is what the client gets."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


class AppendError(Exception):
    """Raised by a RecordLog when an append is not committed, with the log-level error."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


# Log-level append errors mapped to what a coordinator client understands (Kafka does the same).
_APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


def append_error_code(exc: BaseException) -> ErrorCode:
    """The client-facing error for a failed append."""
    if isinstance(exc, CoordinatorError):
        return exc.code
    if isinstance(exc, AppendError):
        return _APPEND_ERRORS.get(exc.code, exc.code)
    return ErrorCode.coordinator_not_available


class InMemoryRecordLog:
    """A TxnRecordLog in lists, for tests and single-process use; can be told to fail.

    `records` holds every record in order; `producers` marks the transactional ones (index ->
    producer id) and `markers` the COMMIT/ABORT markers (position in `records`, marker).
    """

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self.records: list[Record] = list(records)
        self.producers: dict[int, int] = {}
        self.markers: list[tuple[int, EndMarker]] = []
        self.fail_appends = 0
        self.fail_code = ErrorCode.not_enough_replicas

    def _check_fail(self) -> None:
        if self.fail_appends > 0:
            self.fail_appends -= 1
            raise AppendError(self.fail_code)

    async def append(self, records: list[Record]) -> None:
        self._check_fail()
        self.records.extend(records)

    def begin_append(self, records: list[Record]) -> Awaitable[None]:
        self._check_fail()
        self.records.extend(records)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def append_transactional(
        self, records: list[Record], producer_id: int, producer_epoch: int
    ) -> None:
        self._check_fail()
        for record in records:
            self.producers[len(self.records)] = producer_id
            self.records.append(record)

    async def append_marker(self, marker: EndMarker) -> None:
        self._check_fail()
        self.markers.append((len(self.records), marker))

    def replay(self) -> Iterable[Record]:
        return list(self.records)

    def replay_entries(self) -> Iterable[ReplayEntry]:
        out: list[ReplayEntry] = []
        markers = sorted(self.markers, key=lambda m: m[0])
        m = 0
        for i, (key, value) in enumerate(self.records):
            while m < len(markers) and markers[m][0] <= i:
                out.append(markers[m][1])
                m += 1
            pid = self.producers.get(i)
            out.append((key, value) if pid is None else TxnRecord(key, value, pid))
        out += [marker for _, marker in markers[m:]]
        return out


def _settle(future: "asyncio.Future[T]", answer: Callable[[], T]) -> None:
    """Set ``future`` to what ``answer`` returns, or to what it raises."""
    try:
        future.set_result(answer())
    except Exception as exc:
        future.set_exception(exc)


_HASH_BLOCK: Final = 4096  # code units hashed per C-level pass
# 31**k mod 2**32 for k < _HASH_BLOCK: the weights of one block's units, last unit first
_POWERS_31: Final = list(
    itertools.accumulate(range(_HASH_BLOCK - 1), lambda x, _: x * 31 & 0xFFFFFFFF, initial=1)
)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int32 wrap-around).

    Written as sum(u[i] * 31**(n-1-i)) so that each block of units is one C-level
    multiply-and-sum: a coordinator key tens of thousands of characters long hashes in
    milliseconds, not the tenths of a second a per-unit Python loop took."""
    units = array.array("H", text.encode("utf-16-le"))  # native order on little-endian hosts
    if sys.byteorder == "big":
        units.byteswap()
    h = 0
    for start in range(0, len(units), _HASH_BLOCK):
        block = units[start : start + _HASH_BLOCK]
        block.reverse()  # the last unit has weight 31**0
        h = (h * pow(31, len(block), 1 << 32) + sum(map(operator.mul, block, _POWERS_31))) & (
            0xFFFFFFFF
        )
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(key.hashCode()) % n; Utils.abs maps MIN_VALUE to 0."""
    h = java_string_hash(key)
    return (0 if h == -0x8000_0000 else abs(h)) % num_partitions


@dataclass(slots=True)
class WriteResult(Generic[T]):
    """What a write operation produces."""

    response: T
    records: list[Record] = field(default_factory=list)
    # Runs once the records are durable (before the response is released).
    on_commit: Callable[[], None] | None = None
    # Undoes the in-memory change after a failed append and returns the error response.
    on_failure: Callable[[BaseException], T] | None = None
    # (producer id, epoch): append `records` as one transactional batch of that producer.
    producer: tuple[int, int] | None = None
    # A COMMIT/ABORT marker appended after `records`.
    marker: EndMarker | None = None


class Shard(Protocol):
    """A state machine owned by one shard."""

    def replay(self, key: bytes, value: bytes | None) -> None: ...

    def on_loaded(self) -> None: ...

    def on_unloaded(self) -> None: ...


@runtime_checkable
class TxnAwareShard(Protocol):
    """A state machine that keeps transactional records pending until their marker."""

    def replay(self, key: bytes, value: bytes | None) -> None: ...

    def replay_transactional(self, key: bytes, value: bytes | None, producer_id: int) -> None: ...

    def replay_marker(self, producer_id: int, commit: bool) -> None: ...


TimerOp = Callable[[S], "WriteResult[None] | None"]


class ShardContext(Generic[S]):
    """Handed to a shard's state machine: its partition, the clock and keyed timers."""

    def __init__(self, runtime: "CoordinatorRuntime[S]", partition: int) -> None:
        self._runtime = runtime
        self.partition = partition
        self._timers: dict[str, tuple[object, Cancellable]] = {}
        self.active = True

    def now_ms(self) -> int:
        return self._runtime.scheduler.now_ms()

    def schedule(self, key: str, delay_ms: int, op: TimerOp[S]) -> None:
        """Run `op` as a write on this shard after `delay_ms`, replacing any timer `key`."""
        self.cancel(key)
        token = object()

        def fire() -> None:
            current = self._timers.get(key)
            if current is None or current[0] is not token or not self.active:
                return
            del self._timers[key]
            self._runtime._spawn(self._runtime._run_timer(self, op))

        self._timers[key] = (token, self._runtime.scheduler.call_later(delay_ms, fire))

    def cancel(self, key: str) -> None:
        entry = self._timers.pop(key, None)
        if entry is not None:
            entry[1].cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._timers

    def cancel_all(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self.active = False


@dataclass(slots=True)
class _Slot(Generic[S]):
    ctx: ShardContext[S]
    log: RecordLog
    state: S | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class CoordinatorRuntime(Generic[S]):
    def __init__(
        self,
        num_partitions: int,
        factory: Callable[[ShardContext[S]], S],
        scheduler: Scheduler,
    ) -> None:
        if num_partitions <= 0:
            raise ValueError("num_partitions must be positive")
        self.num_partitions = num_partitions
        self.scheduler = scheduler
        self._factory = factory
        self._slots: dict[int, _Slot[S]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def loaded_partitions(self) -> list[int]:
        return sorted(p for p, s in self._slots.items() if s.state is not None)

    def loaded_states(self) -> list[S]:
        """The loaded shards' states, for a synchronous look on the event loop (metrics)."""
        return [s.state for _, s in sorted(self._slots.items()) if s.state is not None]

    def loaded_state(self, partition: int) -> S | None:
        """The partition's shard state when it is loaded here, else None."""
        slot = self._slots.get(partition)
        return slot.state if slot is not None else None

    def is_loading(self, partition: int) -> bool:
        slot = self._slots.get(partition)
        return slot is not None and slot.state is None

    async def load(self, partition: int, log: RecordLog) -> None:
        """Become the coordinator of `partition`: rebuild its state from the log."""
        await self.unload(partition)
        slot: _Slot[S] = _Slot(ShardContext(self, partition), log)
        self._slots[partition] = slot
        async with slot.lock:
            state = await self._rebuild(slot)
            if self._slots.get(partition) is not slot:
                return  # unloaded while loading
            slot.state = state
            state.on_loaded()

    async def unload(self, partition: int) -> None:
        """Stop coordinating `partition`; pending waits end with NOT_COORDINATOR."""
        slot = self._slots.pop(partition, None)
        if slot is None:
            return
        slot.ctx.cancel_all()
        async with slot.lock:
            if slot.state is not None:
                slot.state.on_unloaded()
                slot.state = None

    async def close(self) -> None:
        for partition in list(self._slots):
            await self.unload(partition)
        await self.settle()

    async def _rebuild(self, slot: _Slot[S]) -> S:
        state = self._factory(slot.ctx)
        log = slot.log
        if isinstance(log, TxnRecordLog) and isinstance(state, TxnAwareShard):
            for i, entry in enumerate(log.replay_entries()):
                if isinstance(entry, EndMarker):
                    state.replay_marker(entry.producer_id, entry.commit)
                elif isinstance(entry, TxnRecord):
                    state.replay_transactional(entry.key, entry.value, entry.producer_id)
                else:
                    state.replay(*entry)
                if i % _LOAD_YIELD_EVERY == _LOAD_YIELD_EVERY - 1:
                    await asyncio.sleep(0)
            return state
        for i, (key, value) in enumerate(log.replay()):
            state.replay(key, value)
            if i % _LOAD_YIELD_EVERY == _LOAD_YIELD_EVERY - 1:
                await asyncio.sleep(0)
        return state

    def _slot(self, partition: int) -> _Slot[S]:
        slot = self._slots.get(partition)
        if slot is None:
            raise CoordinatorError(ErrorCode.not_coordinator, f"partition {partition} not owned")
        return slot

    @staticmethod
    def _state(slot: _Slot[S]) -> S:
        if slot.state is None:
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress)
        return slot.state

    async def read(self, partition: int, op: Callable[[S], T]) -> T:
        slot = self._slot(partition)
        if slot.state is None:
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress)
        async with slot.lock:
            return op(self._state(slot))

    async def write(self, partition: int, op: Callable[[S], WriteResult[T]]) -> T:
        slot = self._slot(partition)
        if slot.state is None:
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress)
        async with slot.lock:
            return await self._write_locked(slot, op)

    async def _write_locked(self, slot: _Slot[S], op: Callable[[S], WriteResult[T]]) -> T:
        if self._slots.get(slot.ctx.partition) is not slot:
            raise CoordinatorError(ErrorCode.not_coordinator)
        result = op(self._state(slot))
        if result.records or result.marker is not None:
            try:
                await self._append(slot.log, result)
            except Exception as exc:
                if result.on_failure is not None:
                    return result.on_failure(exc)
                # Nothing to undo with: rebuild the shard from what is durable.
                slot.ctx.cancel_all()
                if slot.state is not None:
                    slot.state.on_unloaded()
                slot.ctx = ShardContext(self, slot.ctx.partition)
                slot.state = await self._rebuild(slot)
                slot.state.on_loaded()
                raise CoordinatorError(append_error_code(exc), str(exc)) from exc
        if result.on_commit is not None:
            result.on_commit()
        return result.response

    async def write_pipelined(
        self, partition: int, op: Callable[[S], WriteResult[T]]
    ) -> "asyncio.Future[T]":
        """Run `op` and put its records in the log; returns once they are there (the shard is
        free for its next write), with a future of the response, set at commit. For ops that
        change nothing before `on_commit` and report failures with `on_failure`: nothing to
        undo, so a failed commit never rebuilds the shard."""
        slot = self._slot(partition)
        if slot.state is None:
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress)
        response: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        async with slot.lock:
            if self._slots.get(partition) is not slot:
                raise CoordinatorError(ErrorCode.not_coordinator)
            result = op(self._state(slot))
            if not result.records:
                if result.on_commit is not None:
                    result.on_commit()
                response.set_result(result.response)
                return response
            on_failure = result.on_failure
            if on_failure is None or result.producer is not None or result.marker is not None:
                raise TypeError("a pipelined write needs on_failure and no transaction")
            try:
                committed = asyncio.ensure_future(slot.log.begin_append(result.records))
            except Exception as exc:
                _settle(response, functools.partial(on_failure, exc))
                return response

        def done(f: "asyncio.Future[None]") -> None:
            exc = f.exception() if not f.cancelled() else asyncio.CancelledError()
            if exc is not None:
                _settle(response, lambda: on_failure(exc))
                return
            if result.on_commit is not None:
                result.on_commit()
            response.set_result(result.response)

        committed.add_done_callback(done)
        return response

    @staticmethod
    async def _append(log: RecordLog, result: "WriteResult[Any]") -> None:
        if result.producer is None and result.marker is None:
            await log.append(result.records)
            return
        if not isinstance(log, TxnRecordLog):
            raise AppendError(ErrorCode.unknown_server_error, "this log holds no transactions")
        if result.records:
            if result.producer is not None:
                await log.append_transactional(result.records, *result.producer)
            else:
                await log.append(result.records)
        if result.marker is not None:
            await log.append_marker(result.marker)

    async def _run_timer(self, ctx: ShardContext[S], op: TimerOp[S]) -> None:
        slot = self._slots.get(ctx.partition)
        if slot is None or slot.ctx is not ctx:
            return

        def as_write(state: S) -> WriteResult[None]:
            return op(state) or WriteResult(None)

        async with slot.lock:
            if slot.state is None or not ctx.active:
                return
            # CoordinatorError: the shard was rebuilt or lost; the timer's work is moot
            with contextlib.suppress(CoordinatorError):
                await self._write_locked(slot, as_write)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Wait until timer work started so far (and work it starts) has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        # Let callbacks of completed futures run.
        for _ in range(3):
            await asyncio.sleep(0)
