"""The coordinator alone completes a decided transaction (issue 32): across a load raced by an
unload and a reload (a leader change while a long shard replays), across a reload while an
older completion sleeps in its backoff, from the periodic sweep when no completion runs, and
with every failed marker retried, counted and logged."""

import asyncio
import logging

from kio.schema.errors import ErrorCode as E

from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.txn.metadata import TxnState
from broker.metrics.txn_metrics import TxnCollector

from .group_support import async_test
from .test_txn_coordinator import TIMEOUT, Env, begin, make_env


class EpochLog(InMemoryRecordLog):
    """An in-memory shard log at a partition leader epoch (the coordinator epoch), over the
    same record list as the log it reloads (so `Env.states` reads what it writes)."""

    def __init__(self, records: list[tuple[bytes, bytes | None]], leader_epoch: int) -> None:
        super().__init__()
        self.records = records
        self.leader_epoch = leader_epoch


async def _long_shard(env: Env, tid: str) -> int:
    """Grow `tid`'s shard past 1,000 records, so its load yields to the loop midway."""
    p = env.coord.partition_for(tid)
    fillers = [f"{tid}-{i}" for i in range(100) if env.coord.partition_for(f"{tid}-{i}") == p]
    for i in range(1_100):
        await env.coord.init_producer_id(fillers[i % 5], TIMEOUT)
    assert len(env.logs[p].records) > 1_000
    return p


@async_test
async def test_load_raced_by_unload_and_reload_still_completes() -> None:
    """A leader change seen as load(e1), unload, load(e2), spawned in that order: the unload
    must not take the newer load's ownership away (it did: completions stopped silently)."""
    env = await make_env()
    p = await _long_shard(env, "tx")
    records = env.logs[p].records
    tasks = [
        asyncio.ensure_future(env.coord.load(p, EpochLog(records, 1))),
        asyncio.ensure_future(env.coord.unload(p)),
        asyncio.ensure_future(env.coord.load(p, EpochLog(records, 2))),
    ]
    await asyncio.gather(*tasks)
    pid, epoch = await begin(env)
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none
    await env.advance(1_000)
    assert env.markers.partitions(commit=True) == {("t", 0), ("t", 1)}
    assert {m.coordinator_epoch for _, _, m in env.markers.written} == {2}
    assert env.states("tx")[-1] == TxnState.COMPLETE_COMMIT


@async_test
async def test_reload_replaces_the_old_loads_sleeping_completion() -> None:
    """The older load's completion sleeps in its backoff when the shard is reloaded at a new
    epoch: the reload's completion must run, not be folded into the doomed one."""
    env = await make_env()
    pid, epoch = await begin(env)
    p = env.coord.partition_for("tx")
    env.markers.fail[("t", 0)] = [E.not_leader_or_follower]
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none
    assert env.states("tx")[-1] == TxnState.PREPARE_COMMIT
    await env.coord.unload(p)
    reloaded = EpochLog(env.logs[p].records, 5)
    await env.coord.load(p, reloaded)
    await env.advance(5_000)
    assert env.states("tx")[-1] == TxnState.COMPLETE_COMMIT
    written = [(t, p, m.coordinator_epoch) for t, p, m in env.markers.written]
    assert written[0] == ("t", 1, 0)  # before the reload; then the reload's writes them all
    assert set(written[1:]) == {("t", 0, 5), ("t", 1, 5)}


@async_test
async def test_sweep_restarts_a_completion_that_nothing_runs() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    env.markers.fail[("t", 1)] = [E.not_leader_or_follower] * 2
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none
    for task in env.coord.completions.tasks():
        task.cancel()  # lost, whatever the reason
    await env.coord.settle()
    assert env.states("tx")[-1] == TxnState.PREPARE_COMMIT
    await env.advance(5_000)  # the abort check runs every second
    assert env.states("tx")[-1] == TxnState.COMPLETE_COMMIT
    assert env.coord.completion_stats.restarted == 1


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@async_test
async def test_failed_markers_are_retried_counted_and_warned_once_a_minute() -> None:
    env = await make_env(marker_retry_max_backoff_ms=1_000)
    pid, epoch = await begin(env)
    env.markers.fail[("t", 1)] = [E.not_leader_or_follower] * 12
    seen = _Records()
    logging.getLogger("broker.coordinator.txn").addHandler(seen)
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none
    # pending markers show in DescribeTransactions as the decided state
    d = await env.coord.describe("tx")
    assert (d.state, d.partitions) == ("PrepareCommit", [("t", [0, 1])])
    snap = env.coord.metrics_snapshot()
    assert dict(snap.states)["PrepareCommit"] == 1 and snap.running == 1
    await env.advance(4_000)
    assert env.states("tx")[-1] == TxnState.PREPARE_COMMIT  # still failing, still retried
    await env.advance(10_000)
    assert env.coord.completion_stats.marker_retries == 12
    assert env.coord.completion_stats.restarted == 0  # the sweep saw it running: left alone
    logging.getLogger("broker.coordinator.txn").removeHandler(seen)
    warns = [m for m in seen.messages if "marker not written" in m]
    assert warns and all("tx" in w and "t-1 (NOT_LEADER_OR_FOLLOWER)" in w for w in warns)
    assert len(warns) == 1  # 12 failures within WARN_INTERVAL_MS
    assert env.states("tx")[-1] == TxnState.COMPLETE_COMMIT
    assert (await env.coord.describe("tx")).state == "CompleteCommit"
    families = {f.name: f for f in TxnCollector(env.coord.metrics_snapshot).collect()}
    retries = families["kmirror_txn_coordinator_marker_retries"].samples
    assert [s.value for s in retries] == [12]
    running = families["kmirror_txn_coordinator_completions_running"].samples
    assert [s.value for s in running] == [0]
    states = {
        s.labels["state"]: s.value for s in families["kmirror_txn_coordinator_transactions"].samples
    }
    assert states["CompleteCommit"] == 1 and states["PrepareCommit"] == 0


@async_test
async def test_timed_out_transaction_is_aborted_after_a_raced_reload() -> None:
    env = await make_env()
    p = await _long_shard(env, "tx")
    init = await env.coord.init_producer_id("tx", 5_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert await env.coord.add_partitions("tx", pid, epoch, frozenset({("t", 0)})) == E.none
    records = env.logs[p].records
    await asyncio.gather(
        asyncio.ensure_future(env.coord.load(p, EpochLog(records, 3))),
        asyncio.ensure_future(env.coord.unload(p)),
        asyncio.ensure_future(env.coord.load(p, EpochLog(records, 4))),
    )
    await env.advance(8_000)
    assert env.markers.partitions(commit=False) == {("t", 0)}
    assert env.states("tx")[-1] == TxnState.COMPLETE_ABORT
