"""The transaction coordinator on a manual clock, with in-memory logs and a recording marker
writer: InitProducerId, AddPartitions/AddOffsets, EndTxn with markers, fencing, timeouts,
reload of decided transactions, expiration, Describe/List."""

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode as E

from broker.coordinator.runtime import EndMarker, InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from broker.coordinator.txn import LocalMarkerWriter, TransactionCoordinator, TxnConfig
from broker.coordinator.txn import records as rec
from broker.coordinator.txn.metadata import MAX_EPOCH, TxnState
from broker.replication.partition import sole_leader
from protocol.errors import MirrorErrorCode
from protocol.records import ControlType, iter_records, parse_control_record, scan_batches
from tests.broker.log_helpers import T0, open_log, small_config

from .group_support import async_test

N = 3
TIMEOUT = 60_000
OFFSETS = ("__consumer_offsets", 2)


@dataclass
class Markers:
    written: list[tuple[str, int, EndMarker]] = field(default_factory=list)
    # (topic, partition) -> errors to answer before accepting
    fail: dict[tuple[str, int], list[E]] = field(default_factory=dict)

    async def write_marker(self, topic: str, partition: int, marker: EndMarker) -> E:
        queue = self.fail.get((topic, partition))
        if queue:
            return queue.pop(0)
        self.written.append((topic, partition, marker))
        return E.none

    def partitions(self, commit: bool | None = None) -> set[tuple[str, int]]:
        return {(t, p) for t, p, m in self.written if commit is None or m.commit == commit}


@dataclass
class Env:
    coord: TransactionCoordinator
    sched: ManualScheduler
    markers: Markers
    logs: dict[int, InMemoryRecordLog]
    next_pid: list[int]

    async def advance(self, ms: int) -> None:
        for _ in range(10):
            await asyncio.sleep(0)
        await self.sched.advance(ms, self.coord.settle)

    def log_for(self, tid: str) -> InMemoryRecordLog:
        return self.logs[self.coord.partition_for(tid)]

    def states(self, tid: str) -> list[TxnState]:
        """Every state written for `tid`, in order."""
        out = []
        for k, v in self.log_for(tid).records:
            if rec.decode_key(k) == tid and v is not None:
                out.append(rec.decode_value(v).state)
        return out

    async def reload(self) -> "Env":
        """A new coordinator over the same logs (a restart)."""
        await self.coord.close()
        return await make_env(self.logs, self.markers, self.next_pid[0])


async def make_env(
    logs: dict[int, InMemoryRecordLog] | None = None,
    markers: Markers | None = None,
    first_pid: int = 1000,
    **config: int,
) -> Env:
    sched = ManualScheduler()
    markers = markers or Markers()
    next_pid = [first_pid]

    async def allocate() -> int:
        next_pid[0] += 1
        return next_pid[0] - 1

    cfg = TxnConfig(
        num_partitions=N,
        abort_check_interval_ms=1_000,
        marker_retry_backoff_ms=100,
        end_txn_wait_ms=50,
        **config,
    )
    coord = TransactionCoordinator(cfg, allocate, markers, lambda g: OFFSETS, sched)
    logs = logs if logs is not None else {p: InMemoryRecordLog() for p in range(N)}
    for p in range(N):
        await coord.load(p, logs[p])
    env = Env(coord, sched, markers, logs, next_pid)
    await coord.settle()
    return env


async def begin(
    env: Env, tid: str = "tx", parts: frozenset[tuple[str, int]] | None = None
) -> tuple[int, int]:
    init = await env.coord.init_producer_id(tid, TIMEOUT)
    assert init.error == E.none
    code = await env.coord.add_partitions(
        tid, init.producer_id, init.producer_epoch, parts or frozenset({("t", 0), ("t", 1)})
    )
    assert code == E.none
    return init.producer_id, init.producer_epoch


# -- InitProducerId ----------------------------------------------------------------------------


@async_test
async def test_init_allocates_then_bumps_the_epoch() -> None:
    env = await make_env()
    first = await env.coord.init_producer_id("tx", TIMEOUT)
    assert (first.error, first.producer_id, first.producer_epoch) == (E.none, 1000, 0)
    again = await env.coord.init_producer_id("tx", TIMEOUT)
    assert (again.producer_id, again.producer_epoch) == (1000, 1)
    other = await env.coord.init_producer_id("other", TIMEOUT)
    assert other.producer_id == 1001
    plain = await env.coord.init_producer_id(None, 0)  # idempotent producer: no state
    assert (plain.error, plain.producer_id, plain.producer_epoch) == (E.none, 1002, 0)
    assert env.states("tx") == [TxnState.EMPTY, TxnState.EMPTY]


@async_test
async def test_init_validates_its_input() -> None:
    env = await make_env()
    assert (await env.coord.init_producer_id("", TIMEOUT)).error == E.invalid_request
    assert (await env.coord.init_producer_id("tx", 0)).error == E.invalid_transaction_timeout
    too_long = TxnConfig().max_timeout_ms + 1
    assert (await env.coord.init_producer_id("tx", too_long)).error == (
        E.invalid_transaction_timeout
    )


@async_test
async def test_init_with_expected_producer_kip360() -> None:
    env = await make_env()
    first = await env.coord.init_producer_id("tx", TIMEOUT)
    bumped = await env.coord.init_producer_id("tx", TIMEOUT, (first.producer_id, 0))
    assert (bumped.error, bumped.producer_epoch) == (E.none, 1)
    # a retry of the same call answers the same epoch
    retry = await env.coord.init_producer_id("tx", TIMEOUT, (first.producer_id, 0))
    assert (retry.error, retry.producer_epoch) == (E.none, 1)
    # a zombie with an older epoch, or another producer id, is fenced
    assert (await env.coord.init_producer_id("tx", TIMEOUT, (first.producer_id, 5))).error == (
        E.producer_fenced
    )
    assert (await env.coord.init_producer_id("tx", TIMEOUT, (4242, 1))).error == E.producer_fenced


@async_test
async def test_init_rotates_producer_id_when_epochs_run_out() -> None:
    env = await make_env()
    first = await env.coord.init_producer_id("tx", TIMEOUT)
    # 32k InitProducerIds later: the log holds the id at its last usable epoch (written as the
    # coordinator writes it), and a restart loads it from there.
    exhausted = rec.decode_value(env.log_for("tx").records[-1][1] or b"")
    assert exhausted.producer_id == first.producer_id
    await env.log_for("tx").append(
        [(rec.txn_key("tx"), rec.txn_value(replace(exhausted, producer_epoch=MAX_EPOCH - 1)))]
    )
    env = await env.reload()
    rotated = await env.coord.init_producer_id("tx", TIMEOUT)
    assert rotated.error == E.none
    assert rotated.producer_id != first.producer_id and rotated.producer_epoch == 0
    assert env.states("tx")[-1] == TxnState.EMPTY


@async_test
async def test_init_fences_an_open_transaction() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    # a new producer instance with the same transactional id
    fenced = await env.coord.init_producer_id("tx", TIMEOUT)
    assert fenced.error == E.concurrent_transactions
    await env.coord.settle()
    # the open transaction was aborted under epoch + 1
    assert env.markers.partitions(commit=False) == {("t", 0), ("t", 1)}
    assert {m.producer_epoch for _, _, m in env.markers.written} == {epoch + 1}
    assert env.states("tx")[-2:] == [TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT]
    retried = await env.coord.init_producer_id("tx", TIMEOUT)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.none, pid, epoch + 2)
    # the zombie's next request fails
    assert await env.coord.add_partitions("tx", pid, epoch, frozenset({("t", 0)})) == (
        E.producer_fenced
    )
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.producer_fenced


# -- AddPartitions / AddOffsets / EndTxn ---------------------------------------------------------


@async_test
async def test_commit_writes_markers_then_complete() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    assert await env.coord.add_offsets("tx", pid, epoch, "group") == E.none
    # already in the transaction: nothing written
    before = len(env.log_for("tx").records)
    assert await env.coord.add_partitions("tx", pid, epoch, frozenset({("t", 0)})) == E.none
    assert len(env.log_for("tx").records) == before
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none
    assert env.markers.partitions(commit=True) == {("t", 0), ("t", 1), OFFSETS}
    marker = env.markers.written[0][2]
    assert (marker.producer_id, marker.producer_epoch, marker.commit) == (pid, epoch, True)
    assert env.states("tx") == [
        TxnState.EMPTY,
        TxnState.ONGOING,
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.COMPLETE_COMMIT,
    ]
    # a retried EndTxn of the finished transaction succeeds; the opposite is invalid
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none
    assert await env.coord.end_txn("tx", pid, epoch, False) == E.invalid_txn_state
    # the same producer goes on with a new transaction
    assert await env.coord.add_partitions("tx", pid, epoch, frozenset({("t", 2)})) == E.none
    assert await env.coord.end_txn("tx", pid, epoch, False) == E.none
    assert env.markers.partitions(commit=False) == {("t", 2)}


@async_test
async def test_request_errors() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    tp = frozenset({("t", 0)})
    assert await env.coord.add_partitions("nope", pid, epoch, tp) == E.invalid_producer_id_mapping
    assert await env.coord.add_partitions("tx", pid + 1, epoch, tp) == (
        E.invalid_producer_id_mapping
    )
    assert await env.coord.add_partitions("tx", pid, epoch + 1, tp) == E.producer_fenced
    assert await env.coord.add_partitions("", pid, epoch, tp) == E.invalid_request
    assert await env.coord.end_txn("nope", pid, epoch, True) == E.invalid_producer_id_mapping
    other = await env.coord.init_producer_id("empty", TIMEOUT)
    assert await env.coord.end_txn("empty", other.producer_id, 0, True) == E.invalid_txn_state


@async_test
async def test_prepared_transaction_blocks_until_complete() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    # t-1 keeps failing: the completion retries with backoff and everything else waits
    env.markers.fail[("t", 1)] = [E.not_leader_or_follower] * 5
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none  # decided, answered
    assert env.states("tx")[-1] == TxnState.PREPARE_COMMIT
    tp = frozenset({("t", 0)})
    assert await env.coord.add_partitions("tx", pid, epoch, tp) == E.concurrent_transactions
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.concurrent_transactions
    assert await env.coord.end_txn("tx", pid, epoch, False) == E.invalid_txn_state
    assert (await env.coord.init_producer_id("tx", TIMEOUT)).error == E.concurrent_transactions
    await env.advance(10_000)
    assert env.markers.fail[("t", 1)] == []
    assert env.markers.partitions(commit=True) == {("t", 0), ("t", 1)}
    assert env.states("tx")[-1] == TxnState.COMPLETE_COMMIT
    assert await env.coord.add_partitions("tx", pid, epoch, tp) == E.none


@async_test
async def test_deleted_partition_is_skipped_and_fenced_answers_do_not_stick() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    env.markers.fail[("t", 1)] = [E.unknown_topic_or_partition]
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none
    assert env.states("tx")[-1] == TxnState.COMPLETE_COMMIT
    assert env.markers.partitions() == {("t", 0)}
    # a newer producer epoch on the partition: the transaction is over there
    pid2, epoch2 = await begin(env, "tx2")
    env.markers.fail[("t", 0)] = [E.invalid_producer_epoch]
    assert await env.coord.end_txn("tx2", pid2, epoch2, False) == E.none
    await env.coord.settle()
    assert env.states("tx2")[-1] == TxnState.COMPLETE_ABORT
    # a coordinator epoch refused while this node still owns the shard: retried, never dropped
    pid3, epoch3 = await begin(env, "tx3")
    env.markers.fail[("t", 0)] = [E.transaction_coordinator_fenced] * 3
    assert await env.coord.end_txn("tx3", pid3, epoch3, True) == E.none
    assert env.states("tx3")[-1] == TxnState.PREPARE_COMMIT
    await env.advance(5_000)
    assert env.markers.fail[("t", 0)] == []
    assert env.states("tx3")[-1] == TxnState.COMPLETE_COMMIT


@async_test
async def test_verify_partitions() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    both = frozenset({("t", 0), ("u", 0)})
    assert await env.coord.verify_partitions("tx", pid, epoch, both) == {
        ("t", 0): E.none,
        ("u", 0): E.transaction_abortable,
    }
    assert set((await env.coord.verify_partitions("tx", pid, epoch + 1, both)).values()) == {
        E.producer_fenced
    }
    assert await env.coord.verify_offsets("tx", pid, epoch, "g") == E.transaction_abortable
    assert await env.coord.add_offsets("tx", pid, epoch, "g") == E.none
    assert await env.coord.verify_offsets("tx", pid, epoch, "g") == E.none


# -- timeouts, reloads, expiration ---------------------------------------------------------------


@async_test
async def test_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    env = await make_env()
    init = await env.coord.init_producer_id("tx", 5_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert await env.coord.add_partitions("tx", pid, epoch, frozenset({("t", 0)})) == E.none
    await env.advance(4_000)
    assert env.markers.written == []  # not yet
    await env.advance(3_000)
    assert env.markers.partitions(commit=False) == {("t", 0)}
    assert env.markers.written[0][2].producer_epoch == epoch + 1
    assert env.states("tx")[-1] == TxnState.COMPLETE_ABORT
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.producer_fenced
    d = await env.coord.describe("tx")
    assert (d.state, d.producer_epoch) == ("CompleteAbort", epoch + 1)


@async_test
async def test_reload_completes_a_decided_transaction() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    env.markers.fail[("t", 0)] = [E.not_leader_or_follower] * 100
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none
    assert env.states("tx")[-1] == TxnState.PREPARE_COMMIT
    # "restart": the new coordinator finds PrepareCommit and finishes it
    env.markers.fail.clear()
    env.markers.written.clear()
    env2 = await env.reload()
    await env2.coord.settle()
    assert env2.markers.partitions(commit=True) == {("t", 0), ("t", 1)}
    assert env2.states("tx")[-1] == TxnState.COMPLETE_COMMIT
    d = await env2.coord.describe("tx")
    assert (d.state, d.producer_id, d.producer_epoch) == ("CompleteCommit", pid, epoch)
    await env2.coord.close()


@async_test
async def test_reload_keeps_an_open_transaction_and_times_it_out() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    env2 = await env.reload()
    d = await env2.coord.describe("tx")
    assert (d.state, d.partitions) == ("Ongoing", [("t", [0, 1])])
    await env2.advance(TIMEOUT + 2_000)
    assert env2.states("tx")[-1] == TxnState.COMPLETE_ABORT
    assert await env2.coord.end_txn("tx", pid, epoch, True) == E.producer_fenced
    await env2.coord.close()


@async_test
async def test_failed_append_leaves_state_alone() -> None:
    env = await make_env()
    pid, epoch = await begin(env)
    env.log_for("tx").fail_appends = 1
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.coordinator_not_available
    assert (await env.coord.describe("tx")).state == "Ongoing"
    assert env.markers.written == []
    assert await env.coord.end_txn("tx", pid, epoch, True) == E.none


@async_test
async def test_idle_transactional_ids_expire() -> None:
    env = await make_env(id_expiration_ms=10_000, id_expiration_check_interval_ms=5_000)
    await env.coord.init_producer_id("idle", TIMEOUT)
    _pid, _epoch = await begin(env, "busy")
    await env.advance(16_000)
    assert (await env.coord.describe("idle")).error == E.transactional_id_not_found
    assert any(rec.decode_key(k) == "idle" and v is None for k, v in env.log_for("idle").records)
    # an open transaction is aborted by its timeout, never expired
    assert (await env.coord.describe("busy")).error == E.none
    env2 = await env.reload()
    assert (await env2.coord.describe("idle")).error == E.transactional_id_not_found
    await env2.coord.close()


@async_test
async def test_describe_and_list() -> None:
    env = await make_env()
    pid, _ = await begin(env, "a")
    await env.coord.init_producer_id("b", TIMEOUT)
    d = await env.coord.describe("a")
    assert (d.error, d.producer_id, d.state, d.timeout_ms) == (E.none, pid, "Ongoing", TIMEOUT)
    assert d.partitions == [("t", [0, 1])] and d.start_ms > 0
    assert (await env.coord.describe("zzz")).error == E.transactional_id_not_found
    error, unknown, listed = await env.coord.list_transactions([], frozenset())
    assert error == E.none and unknown == []
    assert {(t.transactional_id, t.state) for t in listed} == {("a", "Ongoing"), ("b", "Empty")}
    _, unknown, listed = await env.coord.list_transactions(["Ongoing", "Bogus"], frozenset())
    assert unknown == ["Bogus"] and [t.transactional_id for t in listed] == ["a"]
    _, _, listed = await env.coord.list_transactions([], frozenset({pid}))
    assert [t.transactional_id for t in listed] == ["a"]
    _, _, listed = await env.coord.list_transactions([], frozenset(), pattern="b.*")
    assert [t.transactional_id for t in listed] == ["b"]
    assert (await env.coord.list_transactions([], frozenset(), pattern="("))[0] == (
        E.invalid_regular_expression
    )
    # open longer than 1 s: none yet (the manual clock has not moved)
    _, _, listed = await env.coord.list_transactions(["Ongoing"], frozenset(), 1_000)
    assert listed == []
    await env.advance(2_000)
    _, _, listed = await env.coord.list_transactions(["Ongoing"], frozenset(), 1_000)
    assert [t.transactional_id for t in listed] == ["a"]


@async_test
async def test_unloaded_partition_answers_not_coordinator() -> None:
    env = await make_env()
    p = env.coord.partition_for("tx")
    await env.coord.unload(p)
    assert (await env.coord.init_producer_id("tx", TIMEOUT)).error == E.not_coordinator
    assert (await env.coord.describe("tx")).error == E.not_coordinator


# -- the local marker writer ---------------------------------------------------------------------


class _Replicas:
    def __init__(self, hosted: dict[tuple[str, int], Any]) -> None:
        self.hosted = hosted

    def get(self, topic: str, partition: int) -> Any:
        return self.hosted.get((topic, partition))


def test_local_marker_writer(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "data", small_config(**{"segment.bytes": "1048576"}))
    mirror = open_log(tmp_path / "mirror", small_config(**{"segment.bytes": "1048576"}))
    follower = sole_leader(plog, lambda: T0, leader_epoch=3)
    follower.is_leader = False
    replicas = _Replicas(
        {
            ("t", 0): sole_leader(plog, lambda: T0, leader_epoch=3),
            ("t", 1): follower,
            ("m", 0): sole_leader(mirror, lambda: T0, leader_epoch=3),
            ("__consumer_offsets", 1): SimpleNamespace(is_leader=True),
        }
    )
    to_groups: list[tuple[int, EndMarker]] = []

    async def complete_offsets(partition: int, marker: EndMarker) -> E:
        to_groups.append((partition, marker))
        return E.coordinator_load_in_progress if len(to_groups) == 1 else E.none

    writer = LocalMarkerWriter(
        replicas, lambda: T0, "__consumer_offsets", complete_offsets, lambda t, p: t != "m"
    )
    marker = EndMarker(42, 3, 7, commit=False)

    async def body() -> None:
        assert await writer.write_marker("t", 0, marker) == E.none
        assert await writer.write_marker("t", 1, marker) == E.not_leader_or_follower
        assert await writer.write_marker("x", 0, marker) == E.unknown_topic_or_partition
        assert await writer.write_marker("m", 0, marker) == MirrorErrorCode.READ_ONLY_TOPIC
        # the group coordinator's "not ready" means: retry
        assert await writer.write_marker("__consumer_offsets", 1, marker) == (
            E.not_leader_or_follower
        )
        assert await writer.write_marker("__consumer_offsets", 1, marker) == E.none

    asyncio.run(body())
    (batch,) = scan_batches(plog.read(0, 1 << 20).records[0])
    control = parse_control_record(*_key_value(batch))
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.partition_leader_epoch) == (42, 3, 3)
    assert (control.type, control.coordinator_epoch) == (ControlType.ABORT, 7)
    assert plog.high_watermark == plog.log_end_offset == 1
    assert mirror.log_end_offset == 0  # a mirror partition's log is left alone
    assert to_groups == [(1, marker), (1, marker)]


def _key_value(batch: Any) -> tuple[bytes | None, bytes | None]:
    rec = next(iter_records(batch))
    return rec.key, rec.value
