"""The transaction state machine of one transactional id (Kafka's TransactionMetadata).

States and the transitions into them (transaction.version 0/1: an epoch moves only on
InitProducerId or when a transaction is fenced):

    Empty          <- Empty, CompleteCommit, CompleteAbort      InitProducerId (epoch bump)
    Ongoing        <- Ongoing, Empty, CompleteCommit, CompleteAbort   AddPartitions/AddOffsets
    PrepareCommit  <- Ongoing                                   EndTxn(commit)
    PrepareAbort   <- Ongoing                                   EndTxn(abort), or a fence
    CompleteCommit <- PrepareCommit                             every marker written
    CompleteAbort  <- PrepareAbort                              every marker written
    Dead           <- Empty, CompleteCommit, CompleteAbort      transactional.id expiration

A fence (InitProducerId of a new producer, or a timed-out transaction) aborts an Ongoing
transaction under epoch + 1, so the old producer's next request or batch is refused. Kafka
passes through a transient PrepareEpochFence state for this; here the fence is a PrepareAbort
transit carrying the bumped epoch, applied only once written, so a failed write changes
nothing (Kafka needs a "failed epoch fence" flag for that case).

A change is prepared (`prepare_*` returns the target `TxnTransit`, which is what gets written)
and applied with `complete` once durable; `pending` blocks a second change meanwhile.
"""

from dataclasses import dataclass, field
from enum import IntEnum

from kio.schema.errors import ErrorCode

TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MAX_VALUE: the coordinator keeps the last epoch to fence with


def epoch_exhausted(epoch: int) -> bool:
    """No epoch left to hand a client (Kafka stops at Short.MAX_VALUE - 1)."""
    return epoch >= MAX_EPOCH - 1


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """The name DescribeTransactions / ListTransactions report."""
        return _LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> "TxnState | None":
        return _BY_LABEL.get(label)


_LABELS = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_LABEL = {v: k for k, v in _LABELS.items()}

_S = TxnState
_COMPLETE = frozenset({_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY}) | _COMPLETE,
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY}) | _COMPLETE,
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY}) | _COMPLETE,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
# States whose transactional id may expire (no transaction in flight).
EXPIRABLE = frozenset({_S.EMPTY}) | _COMPLETE


class TransitionError(Exception):
    """A transition the state machine forbids: a coordinator bug, never a client error."""


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The metadata a transition writes to `__transaction_state`."""

    producer_id: int
    prev_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int
    fence: bool = False  # a PrepareAbort that bumps the epoch past the fenced producer's


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    prev_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    pending: TxnState | None = None

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransit) -> "TxnMetadata":
        """Rebuild from a stored record (the last epoch is not stored: Kafka's v0 value)."""
        return cls(
            transactional_id,
            producer_id=t.producer_id,
            producer_epoch=t.producer_epoch,
            last_producer_epoch=t.last_producer_epoch,
            prev_producer_id=t.prev_producer_id,
            timeout_ms=t.timeout_ms,
            state=t.state,
            partitions=set() if t.state == TxnState.EMPTY else set(t.partitions),
            start_ms=t.start_ms,
            update_ms=t.update_ms,
        )

    # -- queries ---------------------------------------------------------------------------------

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    @property
    def in_flight(self) -> bool:
        """A transaction is open or being completed."""
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    def valid_expected_producer(self, producer_id: int, producer_epoch: int) -> bool:
        """KIP-360: may a client that names its current producer id/epoch continue?

        Yes when the metadata was just created (a client recovering from UNKNOWN_PRODUCER_ID),
        when it names the current producer id (its epoch is checked by the bump), or when it
        names the previous one with an exhausted epoch (a retry after a producer id rotation)."""
        return (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == self.producer_id
            or (producer_id == self.prev_producer_id and epoch_exhausted(producer_epoch))
        )

    # -- preparing transitions -------------------------------------------------------------------

    def _prepare(
        self,
        state: TxnState,
        *,
        producer_id: int | None = None,
        epoch: int | None = None,
        last_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        start_ms: int | None = None,
        now_ms: int,
        fence: bool = False,
    ) -> TxnTransit:
        if self.pending is not None:
            raise TransitionError(
                f"{self.transactional_id}: transition to {state.label} while "
                f"{self.pending.label} is pending"
            )
        if self.state not in VALID_PREVIOUS[state]:
            raise TransitionError(
                f"{self.transactional_id}: {self.state.label} -> {state.label} is not allowed"
            )
        new_pid = self.producer_id if producer_id is None else producer_id
        new_epoch = self.producer_epoch if epoch is None else epoch
        if new_pid < 0:
            raise TransitionError(f"{self.transactional_id}: illegal producer id {new_pid}")
        if state != TxnState.DEAD and new_epoch < 0:
            raise TransitionError(f"{self.transactional_id}: illegal producer epoch {new_epoch}")
        transit = TxnTransit(
            producer_id=new_pid,
            prev_producer_id=self.producer_id,
            producer_epoch=new_epoch,
            last_producer_epoch=self.last_producer_epoch if last_epoch is None else last_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            start_ms=self.start_ms if start_ms is None else start_ms,
            update_ms=now_ms,
            fence=fence,
        )
        self.pending = state
        return transit

    def prepare_increment_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | ErrorCode:
        """InitProducerId on a producer id with epochs left: Empty with the epoch bumped.

        `expected_epoch` is the client's current epoch (KIP-360): the current one bumps, the
        last one is a retry of a bump that succeeded (same epoch again), others are fenced."""
        if self.epoch_exhausted:
            raise TransitionError(f"{self.transactional_id}: producer epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._prepare(
            TxnState.EMPTY,
            epoch=epoch,
            last_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            now_ms=now_ms,
        )

    def prepare_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """InitProducerId once the epochs ran out: a new producer id at epoch 0."""
        if self.in_flight:
            raise TransitionError(f"{self.transactional_id}: rotation with a transaction open")
        return self._prepare(
            TxnState.EMPTY,
            producer_id=new_producer_id,
            epoch=0,
            last_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            now_ms=now_ms,
        )

    def prepare_add_partitions(
        self, partitions: frozenset[TopicPartition], now_ms: int
    ) -> TxnTransit:
        starting = self.state in (
            TxnState.EMPTY,
            TxnState.COMPLETE_COMMIT,
            TxnState.COMPLETE_ABORT,
        )
        return self._prepare(
            TxnState.ONGOING,
            partitions=frozenset(self.partitions) | partitions,
            start_ms=now_ms if starting else self.start_ms,
            now_ms=now_ms,
        )

    def prepare_end(self, commit: bool, now_ms: int) -> TxnTransit:
        return self._prepare(
            TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now_ms=now_ms
        )

    def prepare_fence(self, now_ms: int) -> TxnTransit:
        """Abort the Ongoing transaction under epoch + 1 (the fenced producer keeps epoch)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise TransitionError(f"{self.transactional_id}: cannot fence past the last epoch")
        if self.state != TxnState.ONGOING:
            raise TransitionError(f"{self.transactional_id}: fence in {self.state.label}")
        return self._prepare(
            TxnState.PREPARE_ABORT,
            epoch=self.producer_epoch + 1,
            last_epoch=NO_PRODUCER_EPOCH,
            now_ms=now_ms,
            fence=True,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every marker is written: CompleteCommit/CompleteAbort, no partitions left."""
        if self.state == TxnState.PREPARE_COMMIT:
            state = TxnState.COMPLETE_COMMIT
        elif self.state == TxnState.PREPARE_ABORT:
            state = TxnState.COMPLETE_ABORT
        else:
            raise TransitionError(f"{self.transactional_id}: complete in {self.state.label}")
        return self._prepare(state, partitions=frozenset(), now_ms=now_ms)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TxnState.DEAD, partitions=frozenset(), now_ms=self.update_ms)

    def abandon(self) -> None:
        """The prepared transition was not written: forget it."""
        self.pending = None

    # -- applying a durable transition -----------------------------------------------------------

    def complete(self, t: TxnTransit) -> None:
        """Apply a transition once written; checks it is the one prepared and consistent."""
        if self.pending != t.state:
            raise TransitionError(
                f"{self.transactional_id}: completing {t.state.label}, pending "
                f"{self.pending.label if self.pending is not None else 'nothing'}"
            )
        s = t.state
        if s == TxnState.EMPTY:
            same_or_bumped = t.producer_epoch == self.producer_epoch or (
                t.producer_epoch == self.producer_epoch + 1
                or (t.producer_epoch == 0 and t.producer_id != self.producer_id)
            )
            if not same_or_bumped or t.partitions or t.start_ms != -1:
                self._bad(t, "is not an epoch bump")
            self.timeout_ms = t.timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.prev_producer_id = t.prev_producer_id
            self.producer_id = t.producer_id
        elif s == TxnState.ONGOING:
            if (
                not self._same_producer(t)
                or not self.partitions <= t.partitions
                or t.timeout_ms != self.timeout_ms
            ):
                self._bad(t, "does not extend the transaction")
            self.start_ms = t.start_ms
            self.partitions |= t.partitions
        elif s in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            producer_ok = (
                t.producer_id == self.producer_id and t.producer_epoch == self.producer_epoch + 1
                if t.fence
                else self._same_producer(t)
            )
            if (
                not producer_ok
                or set(t.partitions) != self.partitions
                or t.timeout_ms != self.timeout_ms
                or t.start_ms != self.start_ms
            ):
                self._bad(t, "does not end the open transaction")
            if t.fence:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
        elif s in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if not self._same_producer(t) or t.timeout_ms != self.timeout_ms or t.start_ms == -1:
                self._bad(t, "does not complete the transaction")
            self.start_ms = t.start_ms
            self.partitions.clear()
        else:
            # Dead is never applied (the id is dropped) and the fence state is never written.
            self._bad(t, "is never applied")
        self.update_ms = t.update_ms
        self.pending = None
        self.state = s

    def _same_producer(self, t: TxnTransit) -> bool:
        return t.producer_id == self.producer_id and t.producer_epoch == self.producer_epoch

    def _bad(self, t: TxnTransit, why: str) -> None:
        self.pending = None
        raise TransitionError(f"{self.transactional_id}: {self.state.label} -> {t} {why}")
