"""The transaction coordinator state machine of one `__transaction_state` partition.

Each public method is one runtime operation (run under the shard lock). A write prepares a
transition (`TxnMetadata.prepare_*`), returns its record, and applies it once durable; a failed
append abandons it. Error codes follow Kafka's TransactionCoordinator.

Ending a transaction is three steps, the first and last of them here: the Prepare* record
(`end_txn`, or a fence), the markers (the coordinator writes them to every partition), then the
Complete* record (`complete_txn`). A transaction in Prepare* blocks every other change of its
transactional id with CONCURRENT_TRANSACTIONS until then; after a restart, `prepared` lists
what is left to complete, and the periodic sweep hands it to the coordinator again (which
restarts a completion only where none runs).
"""

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.coordinator.runtime import (
    CoordinatorError,
    Record,
    ShardContext,
    WriteResult,
    append_error_code,
)
from broker.coordinator.txn import records as rec
from broker.coordinator.txn.config import TxnConfig
from broker.coordinator.txn.metadata import (
    EXPIRABLE,
    TopicPartition,
    TransitionError,
    TxnMetadata,
    TxnState,
    TxnTransit,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

_ABORT_TIMER = "abort-timed-out"
_EXPIRE_TIMER = "expire-transactional-ids"
_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

# (transactional id, producer id, producer epoch) of a transaction past its timeout.
TimedOut = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class Completion:
    """A decided transaction (Prepare* is durable) whose markers are still to be written."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class InitOutcome:
    error: ErrorCode = ErrorCode.none
    producer_id: int = -1
    producer_epoch: int = -1
    # Ask again with a freshly allocated producer id (allocation is async, ops are not).
    need_producer_id: bool = False
    # The producer's open transaction is being aborted first; answer CONCURRENT_TRANSACTIONS.
    fenced: Completion | None = None


@dataclass(frozen=True, slots=True)
class EndOutcome:
    error: ErrorCode = ErrorCode.none
    completion: Completion | None = None


@dataclass(frozen=True, slots=True)
class DescribedTxn:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    partitions: list[tuple[str, list[int]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ListedTxn:
    transactional_id: str
    producer_id: int
    state: str


class TransactionShard:
    def __init__(
        self,
        ctx: "ShardContext[TransactionShard]",
        config: TxnConfig,
        coordinator_epoch: int,
        on_timed_out: Callable[[int, list[TimedOut]], None],
        on_prepared: Callable[[int, list[Completion]], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.coordinator_epoch = coordinator_epoch
        self._on_timed_out = on_timed_out
        self._on_prepared = on_prepared
        self.txns: dict[str, TxnMetadata] = {}

    # -- loading -----------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        tid = rec.decode_key(key)
        if tid is None:
            return
        if value is None:
            self.txns.pop(tid, None)
        else:
            self.txns[tid] = TxnMetadata.from_transit(tid, rec.decode_value(value))

    def on_loaded(self) -> None:
        self._schedule_abort_check()
        self._schedule_expiration()

    def on_unloaded(self) -> None:
        self.txns.clear()

    def prepared(self) -> list[Completion]:
        """Transactions decided before a restart or a move whose markers must be (re)written."""
        return [self._completion(m) for m in self.txns.values() if m.state in _PREPARED]

    # -- helpers -----------------------------------------------------------------------------

    def _now(self) -> int:
        return self.ctx.now_ms()

    def _completion(self, meta: TxnMetadata) -> Completion:
        return Completion(
            meta.transactional_id,
            meta.producer_id,
            meta.producer_epoch,
            self.coordinator_epoch,
            meta.state == TxnState.PREPARE_COMMIT,
            frozenset(meta.partitions),
        )

    def _write(
        self, meta: TxnMetadata, transit: TxnTransit, response: T, created: bool = False
    ) -> WriteResult[T]:
        tid = meta.transactional_id
        records: list[Record] = [(rec.txn_key(tid), rec.txn_value(transit))]

        def committed() -> None:
            try:
                meta.complete(transit)
            except TransitionError:
                # Durable but inconsistent with memory (a bug): memory follows the log.
                log.exception("transactional id %s: applying %s", tid, transit)
                self.txns[tid] = TxnMetadata.from_transit(tid, transit)
                return
            if created:
                self.txns[tid] = meta

        def failed(exc: BaseException) -> T:
            meta.abandon()
            raise CoordinatorError(append_error_code(exc), str(exc)) from exc

        return WriteResult(response, records, committed, failed)

    def _owned(self, tid: str, producer_id: int) -> TxnMetadata | None:
        meta = self.txns.get(tid)
        return meta if meta is not None and meta.producer_id == producer_id else None

    # -- InitProducerId ------------------------------------------------------------------------

    def init_producer_id(
        self,
        tid: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        new_producer_id: int | None,
    ) -> WriteResult[InitOutcome]:
        """Bump the epoch (fencing older producers), rotate to a new producer id once the
        epochs run out, or abort an open transaction first (KIP-360 when `expected`)."""
        now = self._now()
        need_pid = WriteResult(InitOutcome(need_producer_id=True))
        meta = self.txns.get(tid)
        created = meta is None
        if meta is None:
            if new_producer_id is None:
                return need_pid
            meta = TxnMetadata(tid, producer_id=new_producer_id, timeout_ms=timeout_ms)
            meta.update_ms = now
            new_producer_id = None  # taken
        if meta.pending is not None:
            return WriteResult(InitOutcome(ErrorCode.concurrent_transactions))
        if expected is not None and not meta.valid_expected_producer(*expected):
            return WriteResult(InitOutcome(ErrorCode.producer_fenced))
        state = meta.state
        if state in _PREPARED:
            return WriteResult(InitOutcome(ErrorCode.concurrent_transactions))
        if state == TxnState.ONGOING:
            # Abort the open transaction under a bumped epoch, then let the client retry
            # (the retry bumps again; that epoch is the one it gets).
            transit = meta.prepare_fence(now)
            fenced = Completion(
                tid,
                transit.producer_id,
                transit.producer_epoch,
                self.coordinator_epoch,
                False,
                transit.partitions,
            )
            return self._write(
                meta, transit, InitOutcome(ErrorCode.concurrent_transactions, fenced=fenced)
            )
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            log.error("transactional id %s found in state %s", tid, state.label)
            return WriteResult(InitOutcome(ErrorCode.unknown_server_error))
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            if new_producer_id is None:
                return need_pid
            transit = meta.prepare_rotation(new_producer_id, timeout_ms, now, expected is not None)
        else:
            bumped = meta.prepare_increment_epoch(
                timeout_ms, expected[1] if expected is not None else None, now
            )
            if isinstance(bumped, ErrorCode):
                return WriteResult(InitOutcome(bumped))
            transit = bumped
        outcome = InitOutcome(ErrorCode.none, transit.producer_id, transit.producer_epoch)
        return self._write(meta, transit, outcome, created)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------

    def add_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: frozenset[TopicPartition]
    ) -> WriteResult[ErrorCode]:
        meta = self._owned(tid, producer_id)
        if meta is None:
            return WriteResult(ErrorCode.invalid_producer_id_mapping)
        if meta.producer_epoch != epoch:
            return WriteResult(ErrorCode.producer_fenced)
        if meta.pending is not None or meta.state in _PREPARED:
            return WriteResult(ErrorCode.concurrent_transactions)
        if meta.state == TxnState.ONGOING and partitions <= meta.partitions:
            return WriteResult(ErrorCode.none)  # already in: nothing to write
        return self._write(
            meta, meta.prepare_add_partitions(partitions, self._now()), ErrorCode.none
        )

    def verify_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: frozenset[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn verify-only (KIP-890): are the partitions in the transaction?"""
        meta = self._owned(tid, producer_id)
        if meta is None:
            return dict.fromkeys(partitions, ErrorCode.invalid_producer_id_mapping)
        if meta.producer_epoch != epoch:
            return dict.fromkeys(partitions, ErrorCode.producer_fenced)
        if meta.state in _PREPARED:
            return dict.fromkeys(partitions, ErrorCode.concurrent_transactions)
        return {
            tp: ErrorCode.none if tp in meta.partitions else ErrorCode.transaction_abortable
            for tp in partitions
        }

    # -- EndTxn ----------------------------------------------------------------------------------

    def end_txn(
        self, tid: str, producer_id: int, epoch: int, commit: bool
    ) -> WriteResult[EndOutcome]:
        """The client's commit/abort: write Prepare*, or answer a retry of a finished one."""
        meta = self._owned(tid, producer_id)
        if meta is None:
            return WriteResult(EndOutcome(ErrorCode.invalid_producer_id_mapping))
        if meta.producer_epoch != epoch:
            return WriteResult(EndOutcome(ErrorCode.producer_fenced))
        if meta.pending is not None:
            return WriteResult(EndOutcome(ErrorCode.concurrent_transactions))
        state = meta.state
        if state == TxnState.ONGOING:
            transit = meta.prepare_end(commit, self._now())
            completion = Completion(
                tid, producer_id, epoch, self.coordinator_epoch, commit, transit.partitions
            )
            return self._write(meta, transit, EndOutcome(ErrorCode.none, completion))
        same_way = commit == (state in (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT))
        if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and same_way:
            return WriteResult(EndOutcome(ErrorCode.none))  # a retry of a finished one
        if state in _PREPARED and same_way:
            return WriteResult(EndOutcome(ErrorCode.concurrent_transactions))
        return WriteResult(EndOutcome(ErrorCode.invalid_txn_state))

    def fence_timed_out(self, tid: str, producer_id: int, epoch: int) -> WriteResult[EndOutcome]:
        """Abort a transaction left open past its timeout, fencing its producer."""
        meta = self._owned(tid, producer_id)
        if meta is None or meta.producer_epoch != epoch or meta.pending is not None:
            return WriteResult(EndOutcome(ErrorCode.concurrent_transactions))
        if meta.state != TxnState.ONGOING:
            return WriteResult(EndOutcome(ErrorCode.invalid_txn_state))
        transit = meta.prepare_fence(self._now())
        completion = Completion(
            tid,
            producer_id,
            transit.producer_epoch,
            self.coordinator_epoch,
            False,
            transit.partitions,
        )
        return self._write(meta, transit, EndOutcome(ErrorCode.none, completion))

    def complete_txn(self, c: Completion) -> WriteResult[ErrorCode]:
        """Every marker of `c` is written: CompleteCommit/CompleteAbort."""
        meta = self._owned(c.transactional_id, c.producer_id)
        want = TxnState.PREPARE_COMMIT if c.commit else TxnState.PREPARE_ABORT
        if (
            meta is None
            or meta.producer_epoch != c.producer_epoch
            or meta.state != want
            or meta.pending is not None
            or c.coordinator_epoch != self.coordinator_epoch
        ):
            # Completed or replaced meanwhile (only the owner of Prepare* completes it).
            return WriteResult(ErrorCode.concurrent_transactions)
        return self._write(meta, meta.prepare_complete(self._now()), ErrorCode.none)

    # -- timers: abort timed-out transactions, expire idle transactional ids ---------------------

    def _schedule_abort_check(self) -> None:
        self.ctx.schedule(
            _ABORT_TIMER, self.config.abort_check_interval_ms, lambda s: s._check_timeouts()
        )

    def timed_out(self) -> list[TimedOut]:
        now = self._now()
        return [
            (m.transactional_id, m.producer_id, m.producer_epoch)
            for m in self.txns.values()
            if m.state == TxnState.ONGOING and m.pending is None and m.start_ms + m.timeout_ms < now
        ]

    def _check_timeouts(self) -> None:
        """The periodic sweep: abort what is open past its timeout, and hand every decided
        transaction back to the coordinator, which completes any that nothing is completing."""
        self._schedule_abort_check()
        expired = self.timed_out()
        if expired:
            self._on_timed_out(self.ctx.partition, expired)
        prepared = self.prepared()
        if prepared and self._on_prepared is not None:
            self._on_prepared(self.ctx.partition, prepared)

    def _schedule_expiration(self) -> None:
        self.ctx.schedule(
            _EXPIRE_TIMER,
            self.config.id_expiration_check_interval_ms,
            lambda s: s.expire_transactional_ids(),
        )

    def expire_transactional_ids(self) -> WriteResult[None]:
        """Tombstone ids idle for transactional.id.expiration.ms with no transaction open."""
        self._schedule_expiration()
        cutoff = self._now() - self.config.id_expiration_ms
        doomed = [
            m
            for m in self.txns.values()
            if m.state in EXPIRABLE and m.pending is None and m.update_ms <= cutoff
        ]
        if not doomed:
            return WriteResult(None)
        transits = [(m, m.prepare_dead()) for m in doomed]
        records: list[Record] = [(rec.txn_key(m.transactional_id), None) for m in doomed]

        def committed() -> None:
            for m, _ in transits:
                if self.txns.get(m.transactional_id) is m:
                    del self.txns[m.transactional_id]
            log.info("expired %d transactional id(s)", len(transits))

        def failed(exc: BaseException) -> None:
            for m, _ in transits:
                m.abandon()

        return WriteResult(None, records, committed, failed)

    # -- DescribeTransactions / ListTransactions ---------------------------------------------

    def describe(self, tid: str) -> DescribedTxn:
        meta = self.txns.get(tid)
        if meta is None or meta.state == TxnState.DEAD:
            return DescribedTxn(ErrorCode.transactional_id_not_found)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return DescribedTxn(
            ErrorCode.none,
            meta.producer_id,
            meta.producer_epoch,
            meta.state.label,
            meta.timeout_ms,
            meta.start_ms,
            list(by_topic.items()),
        )

    def list_txns(
        self,
        producer_ids: frozenset[int],
        states: frozenset[TxnState] | None,
        min_duration_ms: int,
        pattern: re.Pattern[str] | None,
    ) -> list[ListedTxn]:
        """ListTransactions filters: producer ids, states (None: any), transactions open
        longer than `min_duration_ms` (-1: any), transactional ids matching `pattern`."""
        now = self._now()
        out = []
        for meta in self.txns.values():
            if meta.state == TxnState.DEAD:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if states is not None and meta.state not in states:
                continue
            if min_duration_ms >= 0 and now - meta.start_ms <= min_duration_ms:
                continue
            if pattern is not None and not pattern.fullmatch(meta.transactional_id):
                continue
            out.append(ListedTxn(meta.transactional_id, meta.producer_id, meta.state.label))
        return out
