"""The transaction coordinator service: routes each transactional id to its shard, allocates
producer ids, and starts the completion of every decided transaction (`completion.py`).

Shard ownership: loads and unloads of one `__transaction_state` partition run one at a time,
in the order they were asked for (a leader change spawns them as separate tasks, and a load
replaying a long log yields to the loop), and a completion belongs to the loaded shard at its
coordinator epoch (`_owner` asks the runtime which shard is loaded, not a side table). A shard
is completed from after every load, from EndTxn, from a fence and from the timeout; its timer
aborts transactions open past their timeout, fencing their producer (Kafka's
transaction.abort.timed.out.transaction.cleanup.interval.ms), and hands back every decided
transaction, so one that nothing completes is started again.

Errors come back as Kafka error codes: NOT_COORDINATOR when the shard is not loaded here,
COORDINATOR_LOAD_IN_PROGRESS while it loads, and the mapped append error when a write fails.
"""

import asyncio
import functools
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable

from kio.schema.errors import ErrorCode

from broker.coordinator.runtime import (
    CoordinatorError,
    CoordinatorRuntime,
    RecordLog,
    ShardContext,
)
from broker.coordinator.timer import LoopScheduler, Scheduler
from broker.coordinator.txn.completion import Completions, CompletionStats
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
from broker.metrics.txn_metrics import TxnSnapshot

log = logging.getLogger(__name__)


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
        self.offsets_partition = offsets_partition
        # The coordinator epoch the next shard of a partition is built with (set under the
        # partition's load lock, read by the factory; ownership is the loaded shard's epoch).
        self._epochs: dict[int, int] = {}
        self._load_locks: dict[int, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

        def factory(ctx: ShardContext[TransactionShard]) -> TransactionShard:
            epoch = self._epochs.get(ctx.partition, 0)
            return TransactionShard(ctx, config, epoch, self._on_timed_out, self._on_prepared)

        self.runtime: CoordinatorRuntime[TransactionShard] = CoordinatorRuntime(
            config.num_partitions, factory, scheduler or LoopScheduler()
        )
        self.completions = Completions(config, markers, self.runtime, self._owner, self._sleep)

    @property
    def completion_stats(self) -> CompletionStats:
        return self.completions.stats

    def metrics_snapshot(self) -> TxnSnapshot:
        """For the metrics endpoint (on the loop): states of the loaded shards, completions."""
        states = Counter(
            m.state.label for s in self.runtime.loaded_states() for m in s.txns.values()
        )
        stats = self.completions.stats
        return TxnSnapshot(
            tuple(sorted(states.items())),
            sum(1 for t in self.completions.tasks() if not t.done()),
            stats.marker_retries,
            stats.restarted,
            stats.stopped,
        )

    # -- shard ownership (driven by __transaction_state leadership) ----------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def loaded_partitions(self) -> list[int]:
        return self.runtime.loaded_partitions()

    def _load_lock(self, partition: int) -> asyncio.Lock:
        lock = self._load_locks.get(partition)
        if lock is None:
            lock = self._load_locks[partition] = asyncio.Lock()
        return lock

    async def load(self, partition: int, log_: RecordLog) -> None:
        """Become the coordinator of `partition` at the log's leader epoch; then finish the
        transactions that were decided but not completed. Runs after any load or unload of
        the partition asked for before it (asyncio's lock wakes its waiters in order)."""
        async with self._load_lock(partition):
            epoch = int(getattr(log_, "leader_epoch", 0))
            self._epochs[partition] = epoch
            await self.runtime.load(partition, log_)
            try:
                prepared = await self.runtime.read(partition, lambda s: s.prepared())
            except CoordinatorError:
                return  # unloaded meanwhile
        for c in prepared:
            log.info(
                "completing %s of transactional id %s after loading %s at coordinator epoch %d",
                "commit" if c.commit else "abort",
                c.transactional_id,
                partition,
                epoch,
            )
            self._start_completion(partition, c)

    async def unload(self, partition: int) -> None:
        async with self._load_lock(partition):
            await self.runtime.unload(partition)
            self._epochs.pop(partition, None)

    async def close(self) -> None:
        self._closed = True
        pending = [*self._tasks, *self.completions.tasks()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.runtime.close()

    async def settle(self) -> None:
        """Let started work run until what is left waits on the clock (tests)."""
        for _ in range(100):
            await self.runtime.settle()
            busy = [t for t in (*self._tasks, *self.completions.tasks()) if not t.done()]
            if not busy:
                return
            done, _ = await asyncio.wait(busy, timeout=0.05)
            if not done:
                return  # the rest sleep on the (manual) clock

    def _owner(self, partition: int, coordinator_epoch: int) -> bool:
        """Is the shard loaded here at this coordinator epoch (may its completions go on)?"""
        shard = self.runtime.loaded_state(partition)
        return (
            not self._closed and shard is not None and shard.coordinator_epoch == coordinator_epoch
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

    # -- completion: markers, then Complete* (completion.py) ---------------------------------

    def _start_completion(self, partition: int, c: Completion) -> "asyncio.Task[None]":
        return self.completions.start(partition, c)

    def _on_prepared(self, partition: int, prepared: list[Completion]) -> None:
        """The shard's sweep (under its lock): start what nothing completes."""
        for c in prepared:
            if self.completions.is_running(c):
                continue
            self.completions.stats.restarted += 1
            log.warning(
                "transactional id %s: %s decided but not being completed; completing it",
                c.transactional_id,
                "PrepareCommit" if c.commit else "PrepareAbort",
            )
            self._start_completion(partition, c)

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
