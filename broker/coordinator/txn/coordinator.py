"""The transaction coordinator service: routes each transactional id to its shard, allocates
producer ids, and drives transactions to completion.

Completing a decided transaction (Prepare* durable) writes its marker to every partition it
touched, retrying those that fail with a growing backoff, then writes Complete*. One completion
runs per transactional id; it stops when the shard is unloaded or reloaded (the next owner
completes it from `prepared` after loading). Partitions that no longer exist and read-only
mirror partitions get no marker; a marker refused as fenced (INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED) stops the completion, as in Kafka; one the log can never take
(a malformed batch) is logged and skipped rather than blocking the transaction forever. A shard timer aborts transactions open past their timeout, fencing
their producer (Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms).

Errors come back as Kafka error codes: NOT_COORDINATOR when the shard is not loaded here,
COORDINATOR_LOAD_IN_PROGRESS while it loads, and the mapped append error when a write fails.
"""

import asyncio
import functools
import logging
import re
from collections.abc import Awaitable, Callable

from kio.schema.errors import ErrorCode

from broker.coordinator.runtime import (
    CoordinatorError,
    CoordinatorRuntime,
    EndMarker,
    RecordLog,
    ShardContext,
)
from broker.coordinator.timer import LoopScheduler, Scheduler
from broker.coordinator.txn.config import TxnConfig
from broker.coordinator.txn.markers import MarkerWriter
from broker.coordinator.txn.metadata import TopicPartition, TxnState
from broker.coordinator.txn.shard import (
    Completion,
    DescribedTxn,
    EndOutcome,
    InitOutcome,
    ListedTxn,
    TimedOut,
    TransactionShard,
)
from protocol.errors import MirrorErrorCode

log = logging.getLogger(__name__)

# A partition gone, or a read-only mirror partition: nothing of the transaction is there.
_MARKER_SKIP = frozenset({ErrorCode.unknown_topic_or_partition, MirrorErrorCode.READ_ONLY_TOPIC})
_MARKER_FENCED = frozenset(
    {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced}
)
_MARKER_FATAL = frozenset(
    {
        ErrorCode.corrupt_message,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_required_acks,
        ErrorCode.unsupported_for_message_format,
    }
)


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig,
        next_producer_id: Callable[[], Awaitable[int]],
        markers: MarkerWriter,
        offsets_partition: Callable[[str], TopicPartition],
        scheduler: Scheduler | None = None,
    ) -> None:
        """`offsets_partition` maps a group id to its `__consumer_offsets` partition."""
        self.config = config
        self._next_pid = next_producer_id
        self._markers = markers
        self.offsets_partition = offsets_partition
        self._epochs: dict[int, int] = {}  # coordinator epoch of each loaded partition
        self._completing: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

        def factory(ctx: ShardContext[TransactionShard]) -> TransactionShard:
            epoch = self._epochs.get(ctx.partition, 0)
            return TransactionShard(ctx, config, epoch, self._on_timed_out)

        self.runtime: CoordinatorRuntime[TransactionShard] = CoordinatorRuntime(
            config.num_partitions, factory, scheduler or LoopScheduler()
        )

    # -- shard ownership (driven by __transaction_state leadership) ----------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def loaded_partitions(self) -> list[int]:
        return self.runtime.loaded_partitions()

    async def load(self, partition: int, log_: RecordLog) -> None:
        """Become the coordinator of `partition` at the log's leader epoch; then finish the
        transactions that were decided but not completed."""
        self._epochs[partition] = int(getattr(log_, "leader_epoch", 0))
        await self.runtime.load(partition, log_)
        try:
            prepared = await self.runtime.read(partition, lambda s: s.prepared())
        except CoordinatorError:
            return  # unloaded meanwhile
        for c in prepared:
            log.info(
                "completing %s of transactional id %s after loading %s",
                "commit" if c.commit else "abort",
                c.transactional_id,
                partition,
            )
            self._start_completion(partition, c)

    async def unload(self, partition: int) -> None:
        await self.runtime.unload(partition)
        self._epochs.pop(partition, None)

    async def close(self) -> None:
        self._closed = True
        pending = [*self._tasks, *self._completing.values()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.runtime.close()

    async def settle(self) -> None:
        """Let started work run until what is left waits on the clock (tests)."""
        for _ in range(100):
            await self.runtime.settle()
            busy = [t for t in (*self._tasks, *self._completing.values()) if not t.done()]
            if not busy:
                return
            done, _ = await asyncio.wait(busy, timeout=0.05)
            if not done:
                return  # the rest sleep on the (manual) clock

    def _owner(self, partition: int, coordinator_epoch: int) -> bool:
        return (
            not self._closed
            and partition in self.runtime.loaded_partitions()
            and self._epochs.get(partition) == coordinator_epoch
        )

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sleep(self, ms: int) -> None:
        """A delay on the injected clock (tests drive it by hand)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        handle = self.runtime.scheduler.call_later(ms, wake)
        try:
            await fut
        finally:
            handle.cancel()

    # -- InitProducerId ----------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        expected: tuple[int, int] | None = None,
    ) -> InitOutcome:
        """A producer id and epoch; `expected` is the client's current (id, epoch) (KIP-360)."""
        if transactional_id is None:
            pid = await self._allocate()
            if pid is None:
                return InitOutcome(ErrorCode.coordinator_load_in_progress)
            return InitOutcome(ErrorCode.none, pid, 0)
        if not transactional_id:
            return InitOutcome(ErrorCode.invalid_request)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitOutcome(ErrorCode.invalid_transaction_timeout)
        partition = self.partition_for(transactional_id)
        new_pid: int | None = None
        for _ in range(3):  # at most: allocate for a new id, then for a rotation
            op = functools.partial(
                TransactionShard.init_producer_id,
                tid=transactional_id,
                timeout_ms=timeout_ms,
                expected=expected,
                new_producer_id=new_pid,
            )
            try:
                outcome = await self.runtime.write(partition, op)
            except CoordinatorError as exc:
                return InitOutcome(exc.code)
            if not outcome.need_producer_id:
                if outcome.fenced is not None:
                    # Answer once the abort is complete, so the client's retry succeeds.
                    await self._wait(self._start_completion(partition, outcome.fenced))
                return outcome
            new_pid = await self._allocate()
            if new_pid is None:
                return InitOutcome(ErrorCode.coordinator_load_in_progress)
        return InitOutcome(ErrorCode.concurrent_transactions)

    async def _allocate(self) -> int | None:
        try:
            return await self._next_pid()
        except Exception:
            # Kafka answers a producer id block that is not there yet as retriable.
            log.exception("producer id allocation failed")
            return None

    # -- AddPartitionsToTxn / AddOffsetsToTxn / verification ---------------------------------

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        try:
            return await self.runtime.write(
                self.partition_for(transactional_id),
                lambda s: s.add_partitions(transactional_id, producer_id, epoch, partitions),
            )
        except CoordinatorError as exc:
            return exc.code

    async def add_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction."""
        tp = self.offsets_partition(group_id)
        return await self.add_partitions(transactional_id, producer_id, epoch, frozenset({tp}))

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """Are the partitions in the producer's open transaction? (KIP-890 verification)"""
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.invalid_request)
        try:
            return await self.runtime.read(
                self.partition_for(transactional_id),
                lambda s: s.verify_partitions(transactional_id, producer_id, epoch, partitions),
            )
        except CoordinatorError as exc:
            return dict.fromkeys(partitions, exc.code)

    async def verify_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> ErrorCode:
        """Is the group's offsets partition in the transaction (before a TxnOffsetCommit)?"""
        tp = self.offsets_partition(group_id)
        found = await self.verify_partitions(transactional_id, producer_id, epoch, frozenset({tp}))
        return found[tp]

    # -- EndTxn ------------------------------------------------------------------------------

    async def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        partition = self.partition_for(transactional_id)
        try:
            outcome: EndOutcome = await self.runtime.write(
                partition, lambda s: s.end_txn(transactional_id, producer_id, epoch, commit)
            )
        except CoordinatorError as exc:
            return exc.code
        if outcome.completion is not None:
            # The decision is durable; the markers are local appends, so wait (bounded) for
            # them too: the client's next transaction then starts without a retry.
            await self._wait(self._start_completion(partition, outcome.completion))
        return outcome.error

    async def _wait(self, task: "asyncio.Task[None]") -> None:
        await asyncio.wait({task}, timeout=self.config.end_txn_wait_ms / 1000)

    # -- completion: markers, then Complete* -------------------------------------------------

    def _start_completion(self, partition: int, c: Completion) -> "asyncio.Task[None]":
        tid = c.transactional_id
        running = self._completing.get(tid)
        if running is not None and not running.done():
            return running
        task = asyncio.ensure_future(self._complete(partition, c))
        self._completing[tid] = task

        def done(t: "asyncio.Task[None]") -> None:
            if self._completing.get(tid) is t:
                del self._completing[tid]

        task.add_done_callback(done)
        return task

    async def _complete(self, partition: int, c: Completion) -> None:
        try:
            if await self._write_markers(partition, c):
                await self._write_complete(partition, c)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("completing transactional id %s failed", c.transactional_id)

    async def _write_markers(self, partition: int, c: Completion) -> bool:
        """Every marker written (or skipped); False when the completion must stop."""
        marker = EndMarker(c.producer_id, c.producer_epoch, c.coordinator_epoch, c.commit)
        pending = sorted(c.partitions)
        backoff = self.config.marker_retry_backoff_ms
        while pending:
            if not self._owner(partition, c.coordinator_epoch):
                return False
            retry: list[TopicPartition] = []
            for topic, p in pending:
                code = await self._markers.write_marker(topic, p, marker)
                if code == ErrorCode.none:
                    continue
                if code in _MARKER_SKIP:
                    log.info(
                        "transactional id %s: no marker for %s-%d (%s)",
                        c.transactional_id,
                        topic,
                        p,
                        code.name,
                    )
                elif code in _MARKER_FENCED:
                    log.warning(
                        "transactional id %s: %s-%d refused the marker (%s); a newer "
                        "coordinator or epoch owns it",
                        c.transactional_id,
                        topic,
                        p,
                        code.name,
                    )
                    return False
                elif code in _MARKER_FATAL:
                    log.error(
                        "transactional id %s: %s-%d cannot take the marker (%s); skipped",
                        c.transactional_id,
                        topic,
                        p,
                        code.name,
                    )
                else:
                    retry.append((topic, p))
            pending = retry
            if pending:
                log.debug(
                    "transactional id %s: retrying markers for %s in %d ms",
                    c.transactional_id,
                    pending,
                    backoff,
                )
                await self._sleep(backoff)
                backoff = min(backoff * 2, self.config.marker_retry_max_backoff_ms)
        return True

    async def _write_complete(self, partition: int, c: Completion) -> None:
        backoff = self.config.marker_retry_backoff_ms
        while self._owner(partition, c.coordinator_epoch):
            try:
                await self.runtime.write(partition, lambda s: s.complete_txn(c))
                return
            except CoordinatorError as exc:
                if exc.code != ErrorCode.coordinator_not_available:
                    return  # not ours any more: the next owner completes it after loading
            await self._sleep(backoff)
            backoff = min(backoff * 2, self.config.marker_retry_max_backoff_ms)

    # -- timed-out transactions ----------------------------------------------------------------

    def _on_timed_out(self, partition: int, expired: list[TimedOut]) -> None:
        """Called by a shard's timer (under its lock): abort each one in its own task."""
        for tid, pid, epoch in expired:
            self._spawn(self._abort_timed_out(partition, tid, pid, epoch))

    async def _abort_timed_out(self, partition: int, tid: str, pid: int, epoch: int) -> None:
        try:
            outcome = await self.runtime.write(
                partition, lambda s: s.fence_timed_out(tid, pid, epoch)
            )
        except CoordinatorError:
            return
        if outcome.completion is not None:
            log.info(
                "aborting transaction of transactional id %s (producer %d, epoch %d): "
                "open past its timeout",
                tid,
                pid,
                epoch,
            )
            self._start_completion(partition, outcome.completion)

    # -- DescribeTransactions / ListTransactions ---------------------------------------------

    async def describe(self, transactional_id: str) -> DescribedTxn:
        if not transactional_id:
            return DescribedTxn(ErrorCode.invalid_request)
        try:
            return await self.runtime.read(
                self.partition_for(transactional_id), lambda s: s.describe(transactional_id)
            )
        except CoordinatorError as exc:
            return DescribedTxn(exc.code)

    async def list_transactions(
        self,
        state_names: list[str],
        producer_ids: frozenset[int],
        min_duration_ms: int = -1,
        pattern: str | None = None,
    ) -> tuple[ErrorCode, list[str], list[ListedTxn]]:
        """(error, unknown state filters, transactions) over every loaded shard."""
        unknown = [n for n in state_names if TxnState.from_label(n) is None]
        states: frozenset[TxnState] | None = None
        if state_names:
            states = frozenset(
                s for s in (TxnState.from_label(n) for n in state_names) if s is not None
            )
        regex: re.Pattern[str] | None = None
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error:
                return ErrorCode.invalid_regular_expression, unknown, []
        for partition in range(self.runtime.num_partitions):
            if self.runtime.is_loading(partition):
                return ErrorCode.coordinator_load_in_progress, unknown, []
        out: list[ListedTxn] = []
        for partition in self.runtime.loaded_partitions():
            try:
                out += await self.runtime.read(
                    partition,
                    lambda s: s.list_txns(producer_ids, states, min_duration_ms, regex),
                )
            except CoordinatorError:
                continue  # unloaded meanwhile
        return ErrorCode.none, unknown, out
