"""The leader's side of one replicated partition, sans-IO (Kafka's ``Partition`` as leader).

Inputs are calls carrying ``now_ms``: metadata (``become_leader``), follower Fetch requests,
AlterPartition responses, appends and timer ticks. Outputs are returned values: what to answer
a follower, an AlterPartition request to send, whether the high watermark moved (wake delayed
fetches and produces). The log is an interface (``LeaderLog``); this object reads its offsets
and epochs, writes the epoch start of a new leader epoch, and is the only writer of its high
watermark, which it moves forward only.

Rules, as in Kafka:

- Fetch from a follower (``fetchRecords`` / ``readRecords`` / ``updateFollowerFetchState``):
  the request's current leader epoch must be ours; the replica must be assigned; a
  LastFetchedEpoch the leader's log does not end where the follower thinks gets a DivergingEpoch
  answer and no state change; a stale broker epoch gets NOT_LEADER_OR_FOLLOWER. Otherwise the
  follower's progress moves, it may join the ISR, and the HW may move.
- ISR expansion (``maybeExpandIsr``): one change at a time; a follower that is ISR-eligible
  (unfenced, not shutting down, fetching with the broker epoch the metadata has) joins once its
  end offset reaches both the HW and the start of the current leader epoch. The second rule
  keeps out a follower that has not yet read the records this leader inherited above its HW.
- ISR shrink (``maybeShrinkIsr``): members not caught up for ``replica.lag.time.max.ms``.
- High watermark (``maybeIncrementLeaderHW``): frozen while the committed ISR is smaller than
  min(min.insync.replicas, replication factor); otherwise the minimum end offset over the
  maximal ISR and every caught-up ISR-eligible follower, and only ever raised. One deviation:
  a follower outside the ISR holds it only while it is fetching (its last Fetch arrived within
  ``joining_hold_ms``). Kafka waits for any caught-up one, which after a healed network cut
  is a node unfenced again whose last catch-up predates the cut by less than the lag time and
  whose fetch connection is still stuck: every acks=all producer stalled until the lag time
  passed or the node was fenced (issue 31). When such a hold lapses, nothing else happens to
  the partition, so ``recheck_hw`` (called by waiting producers) lets the HW move.
- acks=all (``appendRecordsToLeader``, ``checkEnoughReplicasReachOffset``): NOT_ENOUGH_REPLICAS
  before the append when the committed ISR is under the effective minimum; done once the HW
  reaches the required offset, with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR has
  fallen under the minimum by then.
- AlterPartition responses (``handleAlterPartitionUpdate`` / ``handleAlterPartitionError``).
"""

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kio.schema.errors import ErrorCode

from broker.replication.isr import (
    AlterPartitionRequest,
    CommittedIsr,
    IsrState,
    PendingIsrChange,
)
from broker.replication.leader_epochs import EpochEndOffset, EpochLookup, diverging_epoch
from broker.replication.replica_progress import ReplicaProgress

_JOINING_SLACK_MS = 250


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """``replica.lag.time.max.ms`` (broker) and ``min.insync.replicas`` (topic); ``mirrored``: a
    mirror topic (``mirror.name`` set, KIP-1279), whose batches carry the source's leader epochs.
    Its leader does not record its own epoch in the leader-epoch cache on election: that would
    interleave destination epochs with the source's and make followers see divergence where
    there is none (the cache learns epochs from the batches; a local append after failover
    records the local epoch then)."""

    replica_lag_time_max_ms: int = 30_000
    min_insync_replicas: int = 1
    mirrored: bool = False
    replica_fetch_wait_max_ms: int = 500

    @property
    def joining_hold_ms(self) -> int:
        """How long after its last Fetch arrived a caught-up follower outside the ISR still
        holds the high watermark: a fetching follower comes back within its long-poll
        (``replica.fetch.wait.max.ms``) plus a round trip and an append; one that does not (its
        link cut, its answer stuck in a connection that has not noticed) must not stall acks=all
        producers for the whole ``replica.lag.time.max.ms``."""
        return self.replica_fetch_wait_max_ms + _JOINING_SLACK_MS


class PartitionRegistration(Protocol):
    """The controller's record of a partition (``PartitionImage`` has these fields)."""

    @property
    def replicas(self) -> Sequence[int]: ...

    @property
    def isr(self) -> Collection[int]: ...

    @property
    def leader(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def partition_epoch(self) -> int: ...


class BrokerView(Protocol):
    """The brokers as this node's metadata image has them."""

    def broker_epoch(self, broker_id: int) -> int | None:
        """The epoch of the broker's registration while it is unfenced; None if fenced or unknown."""
        ...

    def in_controlled_shutdown(self, broker_id: int) -> bool: ...


class LeaderLog(EpochLookup, Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def written_end_offset(self) -> int:
        """The log end already in the file (``log_end_offset`` also counts appends the log
        writer has not written yet): the leader's own end for the high watermark."""
        ...

    @property
    def high_watermark(self) -> int: ...

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None: ...

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Record in the leader-epoch cache that ``epoch`` starts at ``start_offset``."""
        ...


class FetchResult(NamedTuple):
    """The leader's answer to one follower Fetch partition.

    With ``error`` NONE: either ``diverging`` (send only DivergingEpoch) or read records from
    ``read_offset`` (up to the log end offset as it was: ``log_end_offset``). The offsets to put
    in the response are ``high_watermark`` and ``log_start_offset``. ``hw_moved``: wake waiting
    fetches and produces. ``alter_partition``: an ISR expansion to send to the controller.

    ``high_watermark`` is the one after this fetch's own update (Kafka sends the one read
    before it, so the follower learns the new one a fetch later); both are safe because the
    follower caps it at its own log end.
    """

    error: ErrorCode
    diverging: EpochEndOffset | None = None
    read_offset: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    hw_moved: bool = False
    alter_partition: AlterPartitionRequest | None = None


class AlterOutcome(NamedTuple):
    """After an AlterPartition response: whether the HW moved, and a request to send again."""

    hw_moved: bool = False
    retry: AlterPartitionRequest | None = None


# Errors after which the leader drops its proposal: the controller says it was not applied.
_REVERT = frozenset({ErrorCode.operation_not_attempted, ErrorCode.ineligible_replica})
# Errors after which the leader keeps waiting for metadata: its view is out of date.
_AWAIT_METADATA = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.invalid_update_version,
        ErrorCode.invalid_request,
        ErrorCode.new_leader_elected,
    }
)


class LeaderPartitionState:
    def __init__(
        self,
        local_id: int,
        broker_epoch: int,
        log: LeaderLog,
        brokers: BrokerView,
        config: ReplicationConfig,
    ) -> None:
        self.local_id = local_id
        self.broker_epoch = broker_epoch
        self.log = log
        self.brokers = brokers
        self.config = config
        self.is_leader = False
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.epoch_start_offset = -1
        self.replicas: tuple[int, ...] = ()
        self.isr_state: IsrState = CommittedIsr(frozenset())
        self.followers: dict[int, ReplicaProgress] = {}
        self._hw = -1
        self._next_request_id = 0

    # --- reads --------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR."""
        return self.isr_state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr_state.maximal

    @property
    def effective_min_isr(self) -> int:
        return min(self.config.min_insync_replicas, len(self.followers) + 1)

    @property
    def under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr_state.isr) < self.effective_min_isr

    # --- metadata -----------------------------------------------------------------------------

    def become_leader(self, now_ms: int, reg: PartitionRegistration) -> bool:
        """Apply a registration naming this node leader (``makeLeader``); True if the HW moved.

        A registration older than our partition epoch is ignored (an AlterPartition response
        can be ahead of metadata). A new leader epoch starts at the log end offset, which is
        written to the epoch cache at once: a follower holding records of an epoch newer than
        any in our log must still find where to truncate.

        One deviation from Kafka (3.9's ``makeLeader`` resets the ISR state whenever the
        partition epoch is not older): a registration with our own leader and partition epoch
        keeps a pending change. It is the echo of the state our last AlterPartition response
        already gave us, while the change in flight, sent with that same partition epoch, may
        still be applied by the controller; forgetting it let the HW pass a replica the
        controller was about to add to the ISR (found by tests/broker/replication_sim.py). A
        newer partition epoch does reset it: the controller now refuses the request in flight.
        """
        if reg.leader != self.local_id:
            raise ValueError(f"registration names leader {reg.leader}, not {self.local_id}")
        if reg.partition_epoch < self.partition_epoch:
            return False
        new_leader = not self.is_leader
        isr = frozenset(reg.isr)
        self.replicas = tuple(reg.replicas)
        self.followers = {
            r: self.followers.get(r) or ReplicaProgress()
            for r in self.replicas
            if r != self.local_id
        }
        state = self.isr_state
        if not (
            state.in_flight
            and reg.leader_epoch == self.leader_epoch
            and reg.partition_epoch == self.partition_epoch
        ):
            self.isr_state = CommittedIsr(isr)
        if reg.leader_epoch > self.leader_epoch:
            start = self.log.log_end_offset
            if not self.config.mirrored:
                self.log.assign_epoch_start_offset(reg.leader_epoch, start)
            for r, p in self.followers.items():
                p.reset(now_ms, start, new_leader=new_leader, in_isr=r in isr)
            self.leader_epoch = reg.leader_epoch
            self.epoch_start_offset = start
        self.partition_epoch = reg.partition_epoch
        if new_leader:
            self._hw = self.log.high_watermark
        self.is_leader = True
        return self._maybe_increment_hw(now_ms)

    def resign(self) -> None:
        """This node no longer leads: waiting produces fail, fetches get NOT_LEADER_OR_FOLLOWER."""
        self.is_leader = False

    def update_config(self, now_ms: int, config: ReplicationConfig) -> bool:
        """A topic or broker config change; True if the HW moved (a lower min ISR unfreezes it)."""
        self.config = config
        return self._maybe_increment_hw(now_ms)

    # --- followers ----------------------------------------------------------------------------

    def on_follower_fetch(
        self,
        now_ms: int,
        replica_id: int,
        fetch_offset: int,
        *,
        last_fetched_epoch: int = -1,
        current_leader_epoch: int = -1,
        broker_epoch: int = -1,
        log_start_offset: int = -1,
    ) -> FetchResult:
        """One partition of a follower's Fetch (-1: the request did not carry the field)."""
        error = self._leader_epoch_error(current_leader_epoch)
        if error is not None:
            return FetchResult(error)
        progress = self.followers.get(replica_id)
        if progress is None:
            # Maybe a replica this leader has not learned about yet (a reassignment): let it retry.
            return FetchResult(
                ErrorCode.unknown_leader_epoch
                if current_leader_epoch >= 0
                else ErrorCode.not_leader_or_follower
            )
        log = self.log
        start, end = log.log_start_offset, log.log_end_offset
        check = diverging_epoch(log, last_fetched_epoch, fetch_offset, start)
        if check.out_of_range:
            return FetchResult(ErrorCode.offset_out_of_range)
        if check.diverging is not None:  # before the range: a follower ahead of us diverged
            return FetchResult(
                ErrorCode.none,
                diverging=check.diverging,
                high_watermark=self._hw,
                log_start_offset=start,
                log_end_offset=end,
            )
        if not start <= fetch_offset <= end:
            return FetchResult(ErrorCode.offset_out_of_range)
        known = self.brokers.broker_epoch(replica_id)
        if broker_epoch != -1 and known is not None and known > broker_epoch:
            return FetchResult(ErrorCode.not_leader_or_follower)  # a fetch from a dead incarnation
        previous_end = progress.log_end_offset
        progress.on_fetch(fetch_offset, log_start_offset, now_ms, end, broker_epoch)
        alter = self._maybe_expand_isr(replica_id, progress)
        # Recomputed also when this follower did not move while the HW trails the log end: the
        # lapse of another follower's hold has no event of its own.
        moved = (
            previous_end != progress.log_end_offset or self._hw < log.written_end_offset
        ) and self._maybe_increment_hw(now_ms)
        return FetchResult(
            ErrorCode.none,
            read_offset=fetch_offset,
            high_watermark=self._hw,
            log_start_offset=start,
            log_end_offset=end,
            hw_moved=moved,
            alter_partition=alter,
        )

    def _leader_epoch_error(self, current_leader_epoch: int) -> ErrorCode | None:
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return None
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def _isr_eligible(self, replica_id: int, progress: ReplicaProgress) -> bool:
        """KRaft's rule: unfenced, not shutting down, and fetching with the registered broker
        epoch (or with -1, which skips the check)."""
        known = self.brokers.broker_epoch(replica_id)
        if known is None or self.brokers.in_controlled_shutdown(replica_id):
            return False
        seen = progress.broker_epoch
        return seen is not None and (seen == -1 or seen == known)

    def _maybe_expand_isr(
        self, replica_id: int, progress: ReplicaProgress
    ) -> AlterPartitionRequest | None:
        state = self.isr_state
        if state.in_flight or replica_id in state.isr:
            return None
        end = progress.log_end_offset
        if end < self._hw or end < self.epoch_start_offset:
            return None
        if not self._isr_eligible(replica_id, progress):
            return None
        return self._propose(state.isr | {replica_id}, expanding=True)

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartitionRequest | None:
        """The periodic ISR check: drop members not caught up within the lag time."""
        state = self.isr_state
        if not self.is_leader or state.in_flight:
            return None
        end = self.log.log_end_offset
        lag = self.config.replica_lag_time_max_ms
        out = {
            r
            for r in state.isr
            if r != self.local_id
            and ((p := self.followers.get(r)) is None or not p.is_caught_up(end, now_ms, lag))
        }
        if not out:
            return None
        return self._propose(state.isr - out, expanding=False)

    def _propose(self, isr: frozenset[int], *, expanding: bool) -> AlterPartitionRequest:
        self._next_request_id += 1
        members = []
        for b in sorted(isr):
            if b == self.local_id:
                members.append((b, self.broker_epoch))
            else:
                p = self.followers.get(b)
                seen = None if p is None else p.broker_epoch
                members.append((b, -1 if seen is None else seen))
        request = AlterPartitionRequest(
            self._next_request_id,
            self.local_id,
            self.leader_epoch,
            self.partition_epoch,
            tuple(members),
        )
        self.isr_state = PendingIsrChange(self.isr_state.isr, request, expanding)
        return request

    def on_alter_partition_response(
        self,
        now_ms: int,
        request_id: int,
        error: ErrorCode,
        result: PartitionRegistration | None = None,
    ) -> AlterOutcome:
        """The controller's answer to the request ``request_id`` (``result`` when NONE).

        An answer to anything but the pending change is stale (metadata already replaced it).
        A refusal that says "not applied" (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED) reverts
        to the committed ISR; errors that mean our view is old leave the change pending until
        metadata arrives; any other error asks to send the same request again. A success for
        another leader epoch or an older partition epoch is ignored.
        """
        state = self.isr_state
        if not isinstance(state, PendingIsrChange) or state.request.request_id != request_id:
            return AlterOutcome()
        if error != ErrorCode.none:
            if error in _REVERT:
                self.isr_state = CommittedIsr(state.committed)
                return AlterOutcome()
            if error in _AWAIT_METADATA:
                return AlterOutcome()
            return AlterOutcome(retry=state.request)
        if result is None:
            raise ValueError("a successful AlterPartition response carries the new state")
        if (
            result.leader_epoch != self.leader_epoch
            or result.partition_epoch < self.partition_epoch
        ):
            return AlterOutcome()
        self.isr_state = CommittedIsr(frozenset(result.isr))
        self.partition_epoch = result.partition_epoch
        return AlterOutcome(hw_moved=self._maybe_increment_hw(now_ms))

    # --- the high watermark -------------------------------------------------------------------

    def _maybe_increment_hw(self, now_ms: int) -> bool:
        if not self.is_leader or len(self.isr_state.isr) < self.effective_min_isr:
            return False
        # Only what the leader has written counts: an acknowledged record is in the page
        # cache, which a kill -9 leaves (the writer completing calls ``on_append`` again).
        end = self.log.written_end_offset
        new_hw = end
        maximal = self.isr_state.maximal
        lag = self.config.replica_lag_time_max_ms
        hold_ms = self.config.joining_hold_ms
        for r, p in self.followers.items():
            if p.log_end_offset < new_hw and (
                r in maximal
                or (
                    now_ms - p.last_fetch_ms <= hold_ms
                    and p.is_caught_up(end, now_ms, lag)
                    and self._isr_eligible(r, p)
                )
            ):
                new_hw = p.log_end_offset
        if new_hw <= self._hw:
            return False
        self._hw = new_hw
        self.log.high_watermark = new_hw
        return True

    def hold_lapses_at(self, now_ms: int) -> int | None:
        """When the earliest hold of a follower outside the ISR on the HW lapses (leader clock),
        or None when no such follower holds it now."""
        if not self.is_leader or self._hw >= self.log.written_end_offset:
            return None
        end = self.log.written_end_offset
        maximal = self.isr_state.maximal
        lag = self.config.replica_lag_time_max_ms
        hold_ms = self.config.joining_hold_ms
        lapses = [
            p.last_fetch_ms + hold_ms
            for r, p in self.followers.items()
            if r not in maximal
            and p.log_end_offset < end
            and now_ms - p.last_fetch_ms <= hold_ms
            and p.is_caught_up(end, now_ms, lag)
            and self._isr_eligible(r, p)
        ]
        return min(lapses) + 1 if lapses else None

    def recheck_hw(self, now_ms: int) -> bool:
        """The HW again, with no other event: a follower outside the ISR that stopped fetching
        no longer holds it once ``joining_hold_ms`` has passed. True if it moved."""
        if not self.is_leader or self._hw >= self.log.written_end_offset:
            return False
        return self._maybe_increment_hw(now_ms)

    # --- produce ------------------------------------------------------------------------------

    def append_check(self, acks: int) -> ErrorCode | None:
        """Before appending a produce: an error to answer instead, or None to go ahead."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        if acks == -1 and len(self.isr_state.isr) < self.effective_min_isr:
            return ErrorCode.not_enough_replicas
        return None

    def on_local_truncation(self, now_ms: int) -> bool:
        """The leader's own log was cut in place (a mirror's failover or failback truncation,
        never replication): the HW comes down to the log end with it, then may move again.
        The epoch start comes down too: the records it marked are gone, and kept above the
        HW it would hold ListOffsets at OFFSET_NOT_AVAILABLE and every follower out of the
        ISR until the refilled log passed it (a destination that failed over, then mirrors
        a shorter log from scratch, as when a fan-out destination is pointed at the
        promoted one)."""
        end = self.log.log_end_offset
        self._hw = min(self._hw, end)
        self.epoch_start_offset = min(self.epoch_start_offset, end)
        return self._maybe_increment_hw(now_ms)

    def on_append(self, now_ms: int) -> bool:
        """After any append as leader; True if the HW moved (an ISR of one commits at once)."""
        return self._maybe_increment_hw(now_ms)

    def acks_all_done(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """Is an acks=all produce whose last record is ``required_offset`` - 1 complete?

        (False, NONE): keep waiting; (True, NONE): acknowledge; (True,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND): it is committed, but the ISR shrank under the
        minimum meanwhile; (False, NOT_LEADER_OR_FOLLOWER): no longer leader.
        """
        if not self.is_leader:
            return False, ErrorCode.not_leader_or_follower
        if self._hw < required_offset:
            return False, ErrorCode.none
        if len(self.isr_state.maximal) < self.effective_min_isr:
            return True, ErrorCode.not_enough_replicas_after_append
        return True, ErrorCode.none
