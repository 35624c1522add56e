"""A model-based test of ending transactions across crashes (issue 32): a hypothesis state
machine drives the transaction coordinator (in-memory ``__transaction_state`` logs that survive
a crash, a marker writer that records each partition's markers) through transactions of one
transactional id, and crashes it at every point between the steps of a commit or an abort:

    PrepareCommit/PrepareAbort durable -> marker 1 -> ... -> marker n -> CompleteCommit/Abort

(a crash point is how many markers go through before the writer hangs; with all of them
through, the Complete* append fails), plus marker errors that come and go, producer restarts
(a fence aborts the open transaction), restarts with an open transaction (its timeout aborts
it), and time passing. A crash reloads every shard at the next coordinator epoch in a new coordinator,
sometimes as a leader change does: load, unload and load again raced; a leader change unloads
and reloads them in the same one, with marker writes of the old epoch still in flight.

The model is what the client was told. Once faults stop and the transaction timeout has passed,
each transaction's first marker on each of its partitions (after it began) must be its decision:
COMMIT for one whose EndTxn(commit) was answered NONE, ABORT for one never asked to commit
(aborted, fenced, timed out); one whose EndTxn failed may go either way, but the same way on
every partition. And no transaction is left in PrepareCommit/PrepareAbort.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule
from kio.schema.errors import ErrorCode as E

from broker.coordinator.runtime import EndMarker, InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from broker.coordinator.txn import TransactionCoordinator, TxnConfig

T = TypeVar("T")
N = 3  # __transaction_state partitions
TID = "tx"
TIMEOUT_MS = 10_000
TPS = (("t", 0), ("t", 1), ("t", 2))
OFFSETS = ("__consumer_offsets", 0)


class ShardLog(InMemoryRecordLog):
    """A ``__transaction_state`` partition: survives crashes; its leader epoch is the
    coordinator epoch of whoever loads it."""

    leader_epoch = 0


@dataclass
class Markers:
    """Records every marker; `allow` markers go through before writes hang (a crash point),
    `failing` partitions answer NOT_LEADER_OR_FOLLOWER."""

    written: dict[tuple[str, int], list[EndMarker]] = field(default_factory=dict)
    allow: int | None = None
    failing: set[tuple[str, int]] = field(default_factory=set)
    hung: list[asyncio.Future[E]] = field(default_factory=list)
    after_last: Callable[[], None] | None = None  # runs once the allowed markers are written

    async def write_marker(self, topic: str, partition: int, marker: EndMarker) -> E:
        if (topic, partition) in self.failing:
            return E.not_leader_or_follower
        if self.allow is not None:
            if self.allow == 0:
                fut: asyncio.Future[E] = asyncio.get_running_loop().create_future()
                self.hung.append(fut)
                return await fut  # the node dies with this write in flight
            self.allow -= 1
            if self.allow == 0 and self.after_last is not None:
                self.after_last()
        self.written.setdefault((topic, partition), []).append(marker)
        return E.none

    def release(self) -> None:
        """After a crash: the in-flight writes never happened."""
        self.allow = None
        self.after_last = None
        for fut in self.hung:
            if not fut.done():
                fut.set_result(E.not_leader_or_follower)
        self.hung.clear()


@dataclass
class Txn:
    """One transaction as the client saw it."""

    producer_id: int
    epoch: int
    starts: dict[tuple[str, int], int]  # partition -> markers there when it was added
    outcome: str = "open"  # open | committed | aborted | unknown


class CoordinatorCrashMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.sched = ManualScheduler()
        self.logs = {p: ShardLog() for p in range(N)}
        self.markers = Markers()
        self.coordinator_epoch = 0
        self.next_pid = 1000
        self.coord = self.new_coordinator()
        self.run(self.load_all(race=False))
        self.producer: tuple[int, int] | None = None
        self.txns: list[Txn] = []

    # -- plumbing -----------------------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 10))

    def new_coordinator(self) -> TransactionCoordinator:
        async def allocate() -> int:
            self.next_pid += 1
            return self.next_pid - 1

        cfg = TxnConfig(
            num_partitions=N,
            abort_check_interval_ms=1_000,
            marker_retry_backoff_ms=100,
            marker_retry_max_backoff_ms=1_000,
            end_txn_wait_ms=1,
        )
        return TransactionCoordinator(cfg, allocate, self.markers, lambda g: OFFSETS, self.sched)

    async def load_all(self, race: bool) -> None:
        for p, shard_log in self.logs.items():
            if race:  # a leader change: the first load is superseded, then unloaded
                shard_log.leader_epoch = self.coordinator_epoch - 1
                first = asyncio.ensure_future(self.coord.load(p, shard_log))
                gone = asyncio.ensure_future(self.coord.unload(p))
                await asyncio.sleep(0)
                shard_log.leader_epoch = self.coordinator_epoch
                await asyncio.gather(first, gone, self.coord.load(p, shard_log))
            else:
                shard_log.leader_epoch = self.coordinator_epoch
                await self.coord.load(p, shard_log)

    async def advance(self, ms: int) -> None:
        async def settle() -> None:  # in-memory writes need a few turns (hung ones never end)
            for _ in range(30):
                await asyncio.sleep(0)

        await settle()
        await self.sched.advance(ms, settle)

    def open_txn(self) -> Txn | None:
        return self.txns[-1] if self.txns and self.txns[-1].outcome == "open" else None

    def close_open(self, outcome: str) -> None:
        txn = self.open_txn()
        if txn is not None:
            txn.outcome = outcome

    # -- rules --------------------------------------------------------------------------------

    @rule()
    def init_producer(self) -> None:
        """A (new) producer: init_transactions fences and aborts the open transaction."""
        for _ in range(20):
            init = self.run(self.coord.init_producer_id(TID, TIMEOUT_MS))
            if init.error == E.none:
                self.close_open("aborted")
                self.producer = (init.producer_id, init.producer_epoch)
                return
            if init.error != E.concurrent_transactions:
                break
            self.run(self.advance(500))
        self.producer = None  # not now (a completion hangs): a later rule tries again

    @precondition(lambda self: self.producer is not None)
    @rule(parts=st.sets(st.sampled_from(TPS), min_size=1))
    def add_partitions(self, parts: set[tuple[str, int]]) -> None:
        assert self.producer is not None
        pid, epoch = self.producer
        code = self.run(self.coord.add_partitions(TID, pid, epoch, frozenset(parts)))
        if code != E.none:
            return
        txn = self.open_txn()
        if txn is None or (txn.producer_id, txn.epoch) != (pid, epoch):
            self.close_open("aborted")  # fenced meanwhile (its timeout)
            txn = Txn(pid, epoch, {})
            self.txns.append(txn)
        for tp in parts:
            txn.starts.setdefault(tp, len(self.markers.written.get(tp, [])))

    @precondition(lambda self: self.open_txn() is not None and self.producer is not None)
    @rule(
        commit=st.booleans(),
        crash_point=st.none() | st.integers(0, len(TPS)),
        then_crash=st.booleans(),
    )
    def end(self, commit: bool, crash_point: int | None, then_crash: bool) -> None:
        """EndTxn; with a crash point, only that many markers go through before the writes
        hang (all of them: the Complete* append fails instead), and the node dies there
        (`then_crash`) or later rules find it so (a crash, a leader change)."""
        txn = self.open_txn()
        assert txn is not None and self.producer is not None
        if crash_point is not None:
            n = len(txn.starts)
            self.markers.allow = min(crash_point, n)
            if crash_point >= n:  # every marker written: the Complete* append fails
                shard_log = self.logs[self.coord.partition_for(TID)]

                def fail_appends() -> None:
                    shard_log.fail_appends = 1_000

                self.markers.after_last = fail_appends
        pid, epoch = self.producer
        code = self.run(self.coord.end_txn(TID, pid, epoch, commit))
        if code == E.none:
            txn.outcome = "committed" if commit else "aborted"
        elif code == E.producer_fenced:
            txn.outcome = "aborted"  # timed out before: the coordinator aborted it
        elif commit:
            txn.outcome = "unknown"
        else:
            txn.outcome = "aborted"
        if crash_point is not None and then_crash:
            self.crash(race=False)

    @rule(race=st.booleans())
    def crash(self, race: bool) -> None:
        """kill -9 and restart: every shard reloads at the next coordinator epoch."""
        self.run(self.coord.close())
        self.markers.release()
        for shard_log in self.logs.values():
            shard_log.fail_appends = 0
        self.coordinator_epoch += 1
        self.coord = self.new_coordinator()
        self.run(self.load_all(race))

    @rule(race=st.booleans())
    def leader_change(self, race: bool) -> None:
        """The shards move away and back (same process): the old completions must give way
        to the new load's, whatever they were doing."""
        for p in self.logs:
            self.run(self.coord.unload(p))
        self.coordinator_epoch += 1
        self.run(self.load_all(race))
        self.markers.release()  # writes in flight to the old leaders fail

    @rule(tp=st.sampled_from(TPS), fail=st.booleans())
    def marker_errors(self, tp: tuple[str, int], fail: bool) -> None:
        if fail:
            self.markers.failing.add(tp)
        else:
            self.markers.failing.discard(tp)

    @rule(ms=st.sampled_from([200, 2_000, TIMEOUT_MS + 2_000]))
    def time_passes(self, ms: int) -> None:
        self.run(self.advance(ms))

    # -- the promise ------------------------------------------------------------------------------

    def teardown(self) -> None:
        try:
            self.markers.failing.clear()
            self.markers.release()
            for shard_log in self.logs.values():  # faults stop: the log takes appends again
                shard_log.fail_appends = 0
            self.run(self.advance(TIMEOUT_MS + 5_000))
            d = self.run(self.coord.describe(TID))
            assert d.state not in ("PrepareCommit", "PrepareAbort"), d
            self.check_markers()
        finally:
            self.run(self.coord.close())
            self.loop.close()

    def check_markers(self) -> None:
        for i, txn in enumerate(self.txns):
            decisions = set()
            for tp, start in txn.starts.items():
                after = [
                    m
                    for m in self.markers.written.get(tp, [])[start:]
                    if m.producer_id == txn.producer_id
                ]
                assert after, f"transaction {i} ({txn.outcome}) has no marker on {tp}"
                decisions.add(after[0].commit)
                if txn.outcome == "committed":
                    assert after[0].commit, f"committed transaction {i} aborted on {tp}"
                elif txn.outcome in ("aborted", "open"):
                    assert not after[0].commit, f"transaction {i} ({txn.outcome}) committed"
            assert len(decisions) <= 1, f"transaction {i} committed on some partitions only"


CoordinatorCrashMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_txn_coordinator_crash_model = CoordinatorCrashMachine.TestCase
