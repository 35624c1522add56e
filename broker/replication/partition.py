"""One hosted partition: the only owner of its log's appends and of its high watermark.

Every writer goes through this object: produce (``append_records``), the coordinators (records
and markers), the mirror fetcher (``append_raw``) and, on a follower, the replica fetcher
(``on_fetch_response``); so does every cut (``truncate_to``, ``truncate_fully_and_start_at``,
``delete_records_before``: the mirror's truncations, DeleteRecords), which fixes the high
watermark and wakes waiters itself (tests/broker/test_log_ownership.py keeps it so). The high watermark moves only through the sans-IO states of
``partition_state`` (leader: the minimum over the ISR, forward only) and ``follower_state``
(follower: the leader's, capped at our log end).

Waiting is per partition: a Fetch long-poll or an acks=all produce registers a future with
``add_waiter``/``wait_committed``; anything that moves the log end, the high watermark or the
role resolves them (``wake``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..log.errors import LogAppendError
from ..log.partition_log import AppendResult, PartitionLog
from ..log.validation import AppendOrigin
from .change_watch import ChangeWatch
from .follower_state import (
    FetchPartition,
    FetchResponsePartition,
    FollowerPartitionState,
    FollowerStep,
)
from .isr import AlterPartitionRequest
from .partition_state import (
    AlterOutcome,
    BrokerView,
    FetchResult,
    LeaderPartitionState,
    PartitionRegistration,
    ReplicationConfig,
)
from .replica_log import ReplicaLog

# Sends an ISR change for this partition to the controller (the manager owns the I/O).
AlterSink = Callable[["Partition", AlterPartitionRequest], None]

log = logging.getLogger(__name__)


class Partition:
    def __init__(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        log: PartitionLog,
        local_id: int,
        brokers: BrokerView,
        config: ReplicationConfig,
        now_ms: Callable[[], int],
        alter_sink: AlterSink | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log
        self.local_id = local_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.is_leader = False
        self._now_ms = now_ms
        self._alter_sink = alter_sink
        rlog = ReplicaLog(log, now_ms)
        self.leader = LeaderPartitionState(local_id, -1, rlog, brokers, config)
        self.follower: FollowerPartitionState[Any] = FollowerPartitionState(local_id, rlog)
        self.follower.mirrored = config.mirrored
        self._waiters: set[asyncio.Future[None]] = set()
        self._watches: dict[ChangeWatch, Any] = {}  # long-polling Fetches, by their key for us
        # moves on every ``wake`` (log end, HW, role, epoch, config, truncation): a follower's
        # fetch session skips a partition whose count has not moved since it was caught up
        self.change_seq = 0
        log.on_written = self._on_written

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return f"Partition({self.topic}-{self.partition}, {role}, epoch {self.leader_epoch})"

    # --- roles --------------------------------------------------------------------------------

    def become(self, reg: PartitionRegistration, broker_epoch: int) -> bool:
        """Apply the controller's registration; True when this node must (re)start fetching
        from the leader it names (a follower with a new leader or leader epoch)."""
        now = self._now_ms()
        self.leader_id = reg.leader
        if reg.leader_epoch >= self.leader_epoch:
            self.leader_epoch = reg.leader_epoch
        if reg.leader == self.local_id:
            self.leader.broker_epoch = broker_epoch
            was_follower = not self.is_leader
            self.leader.become_leader(now, reg)
            self.is_leader = True
            if was_follower:
                # The follower's state must not fetch again if we later follow the same epoch.
                self.follower.become_follower(-1, reg.leader_epoch)
            self.wake()
            return False
        if self.is_leader:
            self.leader.resign()
            self.is_leader = False
        restart = self.follower.become_follower(reg.leader, reg.leader_epoch)
        self.wake()
        return restart

    def stop(self) -> None:
        """No longer hosted here (deleted or reassigned away): waiters give up."""
        if self.is_leader:
            self.leader.resign()
        self.is_leader = False
        self.follower.become_follower(-1, self.leader_epoch)
        self.wake()

    def update_config(self, config: ReplicationConfig) -> None:
        self.follower.mirrored = config.mirrored
        if self.leader.update_config(self._now_ms(), config):
            self.wake()

    @property
    def mirror_leader_epoch(self) -> int:
        """What a leader tells followers in MirrorLeaderEpoch (KIP-1279): the latest epoch in its
        log when that log carries a source cluster's epochs (a mirror partition, or one just
        failed over whose epoch bump has not reached its followers yet); -1 otherwise, and the
        followers check batches against their own leader epoch."""
        latest = self.log.latest_epoch
        if latest is None:
            return -1
        if self.leader.config.mirrored or latest > self.leader_epoch:
            return latest
        return -1

    # --- appends as leader --------------------------------------------------------------------

    def append_records(
        self, records: Any, *, acks: int = 1, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> AppendResult:
        """Validate, append and stamp our leader epoch. Raises ``LogAppendError`` (with
        NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS before touching the log)."""
        self._check_append(acks)
        result = self.log.append_as_leader(
            records, self.leader_epoch, now_ms=self._now_ms(), origin=origin
        )
        self._appended()
        return result

    def append_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> AppendResult:
        self._check_append(1)
        result = self.log.append_txn_marker(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            commit,
            leader_epoch=self.leader_epoch,
            now_ms=self._now_ms(),
        )
        self._appended()
        return result

    def append_raw(self, records: Any) -> AppendResult:
        """Batches with their own offsets and epochs (the mirror fetcher, on the leader)."""
        self._check_append(1)
        result = self.log.append_raw(records, now_ms=self._now_ms())
        self._appended()
        return result

    # --- cutting the log (the mirror's truncations, DeleteRecords) ----------------------------

    def truncate_to(self, offset: int) -> bool:
        """Drop the records at and past ``offset`` (a mirror's LME, LSO or divergence cut); the
        high watermark comes down with the log end, and waiters see the change. True if data
        went."""
        cut = self.log.truncate_to(offset)
        self._after_cut()
        return cut

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Restart the log empty at ``offset`` (the source's log start moved past ours)."""
        self.log.truncate_fully_and_start_at(offset)
        self._after_cut()

    def cut_at(self, offset: int) -> None:
        """Truncate to ``offset``, or restart the log there when nothing of it would stay."""
        if offset <= self.log.log_start_offset:
            self.truncate_fully_and_start_at(offset)
        else:
            self.truncate_to(offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords, or a mirror following its source's log start: move the log start up
        to ``offset`` (never past the HW: ``OffsetOutOfRange``); the new log start."""
        start = self.log.delete_records_before(offset)
        self.wake()
        return start

    def _after_cut(self) -> None:
        if self.is_leader:
            self.leader.on_local_truncation(self._now_ms())
        self.wake()

    def _check_append(self, acks: int) -> None:
        error = self.leader.append_check(acks)
        if error is not None:
            msg = (
                f"this node is not the leader of {self.topic}-{self.partition}"
                if error == ErrorCode.not_leader_or_follower
                else f"{self.topic}-{self.partition} has fewer in-sync replicas "
                f"({len(self.leader.isr)}) than min.insync.replicas "
                f"({self.leader.effective_min_isr})"
            )
            raise LogAppendError(int(error), msg)

    def _appended(self) -> None:
        self.leader.on_append(self._now_ms())
        self.wake()

    def _on_written(self) -> None:
        """The log writer put appends in the file: the HW may move (it counts only written
        records), and acks=1 produces and the replica fetcher waiting for them go on."""
        if self.is_leader:
            self.leader.on_append(self._now_ms())
        self.wake()

    async def _woken_or_after(self, timeout_s: float) -> None:
        """Until the next `wake` or ``timeout_s``. A timer on the loop rather than
        `asyncio.wait_for` (a task and callbacks each): an acks=all Produce to hundreds of
        partitions waits once per partition."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(timeout_s, _resolve, fut)
        self._waiters.add(fut)
        try:
            await fut
        finally:
            timer.cancel()
            self._waiters.discard(fut)

    async def wait_written(self, required_offset: int, timeout_s: float) -> ErrorCode:
        """Until the log's records below ``required_offset`` are in the file (acks=1; a
        follower before its next Fetch). NONE also when the log was cut below it meanwhile;
        KAFKA_STORAGE_ERROR after a failed write, REQUEST_TIMED_OUT after ``timeout_s``."""
        plog = self.log
        deadline = time.monotonic() + timeout_s
        while plog.written_end_offset < min(required_offset, plog.log_end_offset):
            if plog.write_error is not None:
                return ErrorCode.kafka_storage_error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ErrorCode.request_timed_out
            await self._woken_or_after(remaining)
        return ErrorCode.none

    async def wait_committed(self, required_offset: int, timeout_s: float) -> ErrorCode:
        """acks=all: wait until the high watermark reaches ``required_offset`` (one past the
        last offset appended). REQUEST_TIMED_OUT after ``timeout_s``; see ``acks_all_done``."""
        deadline = time.monotonic() + timeout_s
        while True:
            done, error = self.leader.acks_all_done(required_offset)
            if done or error != ErrorCode.none:
                return error
            remaining = deadline - time.monotonic()
            # a follower outside the ISR may hold the HW only a while (``hold_lapses_at``), and
            # the end of that hold is no event: wake then and look again
            now = self._now_ms()
            lapse = self.leader.hold_lapses_at(now)
            if lapse is not None and remaining > 0:
                await self._woken_or_after(min(remaining, (lapse - now) / 1000))
                if self.leader.recheck_hw(self._now_ms()):
                    self.wake()
                continue
            if remaining <= 0:
                state = self.leader
                log.info(
                    "%s: offset %d not committed within %.1f s: HW %d, log end %d, ISR %s, "
                    "followers %s",
                    self,
                    required_offset,
                    timeout_s,
                    state.high_watermark,
                    self.log.log_end_offset,
                    sorted(state.isr),
                    state.followers,
                )
                return ErrorCode.request_timed_out
            await self._woken_or_after(remaining)

    def now_ms(self) -> int:
        return self._now_ms()

    def replicas_behind(self, since_ms: int, *, all_replicas: bool) -> list[int]:
        """The followers (ISR members, or every replica with ``all_replicas``) that have not
        fetched since ``since_ms`` with a log found consistent with ours: after the leader cut
        its log (a mirror's LME truncation) those are the ones that have not truncated too.
        A replica out of the ISR counts as behind when ``all_replicas`` asks for it."""
        state = self.leader
        wanted = state.replicas if all_replicas else state.isr
        behind = []
        for r in sorted(wanted):
            if r == self.local_id:
                continue
            if all_replicas and r not in state.isr:
                behind.append(r)
                continue
            progress = state.followers.get(r)
            if progress is None or progress.last_fetch_ms < since_ms:
                behind.append(r)
        return behind

    # --- waiting ------------------------------------------------------------------------------

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def add_watch(self, watch: ChangeWatch, key: Any) -> None:
        self._watches[watch] = key

    def remove_watch(self, watch: ChangeWatch) -> None:
        self._watches.pop(watch, None)

    def wake(self) -> None:
        self.change_seq += 1
        if self._watches:
            for watch, key in self._watches.items():
                watch.notify(key)
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # --- the leader's side of replication ------------------------------------------------------

    def on_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        *,
        last_fetched_epoch: int,
        current_leader_epoch: int,
        broker_epoch: int,
        log_start_offset: int,
    ) -> FetchResult:
        result = self.leader.on_follower_fetch(
            self._now_ms(),
            replica_id,
            fetch_offset,
            last_fetched_epoch=last_fetched_epoch,
            current_leader_epoch=current_leader_epoch,
            broker_epoch=broker_epoch,
            log_start_offset=log_start_offset,
        )
        if result.hw_moved:
            self.wake()
        if result.alter_partition is not None:
            self._send_alter(result.alter_partition)
        return result

    def on_idle_follower_fetch(self, replica_id: int) -> None:
        """A follower's Fetch for a partition that has not changed since that follower was
        found caught up (``change_seq``): it still is, now (what ``on_follower_fetch`` would
        record, without the rest of its work)."""
        progress = self.leader.followers.get(replica_id)
        if progress is not None:
            now = self._now_ms()
            progress.last_fetch_ms = now
            if now > progress.last_caught_up_ms:
                progress.last_caught_up_ms = now

    def maybe_shrink_isr(self) -> None:
        request = self.leader.maybe_shrink_isr(self._now_ms())
        if request is not None:
            self._send_alter(request)

    def on_alter_partition_response(
        self, request_id: int, error: ErrorCode, result: PartitionRegistration | None
    ) -> AlterOutcome:
        outcome = self.leader.on_alter_partition_response(self._now_ms(), request_id, error, result)
        if outcome.hw_moved:
            self.wake()
        return outcome

    def _send_alter(self, request: AlterPartitionRequest) -> None:
        if self._alter_sink is not None:
            self._alter_sink(self, request)

    # --- the follower's side ------------------------------------------------------------------

    def fetch_request(self) -> FetchPartition | None:
        return None if self.is_leader else self.follower.fetch_request()

    def on_fetch_response(
        self, request: FetchPartition, response: FetchResponsePartition[Any]
    ) -> FollowerStep:
        if self.is_leader:
            return FollowerStep(ignored=True)
        step = self.follower.on_fetch_response(request, response)
        if step.appended or step.hw_changed or step.truncated_to >= 0:
            self.wake()
        return step

    def on_leader_offsets(self, log_start: int, log_end: int) -> FollowerStep:
        step = self.follower.on_leader_offsets(log_start, log_end)
        if step.truncated_to >= 0:
            self.wake()
        return step


class _NoOtherBrokers:
    def broker_epoch(self, broker_id: int) -> int | None:
        return None

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        return False


class _SoleReplica:
    def __init__(self, local_id: int, leader_epoch: int) -> None:
        self.replicas = (local_id,)
        self.isr = (local_id,)
        self.leader = local_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = 0


def sole_leader(
    log: PartitionLog, now_ms: Callable[[], int], *, leader_epoch: int = 0, local_id: int = 0
) -> Partition:
    """A partition of one replica that this process leads: tools and tests that own a log
    outright (every append is committed at once)."""
    partition = Partition(
        log.topic,
        log.partition,
        log.topic_id,
        log,
        local_id,
        _NoOtherBrokers(),
        ReplicationConfig(),
        now_ms,
    )
    partition.become(_SoleReplica(local_id, leader_epoch), broker_epoch=0)
    return partition


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
