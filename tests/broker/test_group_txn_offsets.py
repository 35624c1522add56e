"""TxnOffsetCommit on the group coordinator: offsets pending until the transaction's marker,
visible on COMMIT, dropped on ABORT, rebuilt from the log (in memory and on a real partition)."""

from pathlib import Path

from kio.schema.errors import ErrorCode as E

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.shard import CommitItem, CommitParams, TxnCommitParams
from broker.coordinator.partition_record_log import PartitionRecordLog
from broker.coordinator.runtime import EndMarker, TxnRecord
from broker.coordinator.timer import ManualScheduler
from broker.log import ManualClock
from broker.log.producer_state_loader import attach_producer_state
from broker.replication.partition import sole_leader
from tests.broker.log_helpers import T0, open_log, small_config

from .group_support import Env, async_test, config, make_env

PID, EPOCH = 4000, 0


def txn_params(
    offset: int, pid: int = PID, epoch: int = EPOCH, group: str = "g"
) -> TxnCommitParams:
    return TxnCommitParams(
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        items=[CommitItem("t", 0, offset, -1, "m"), CommitItem("t", 1, offset + 1, -1, None)],
    )


def plain_params(offset: int, group: str = "g") -> CommitParams:
    return CommitParams(
        group_id=group,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        retention_ms=-1,
        items=[CommitItem("t", 0, offset, -1, "")],
        api_version=9,
    )


async def fetched(env: Env | GroupCoordinator, stable: bool = False) -> dict[int, tuple[int, E]]:
    coord = env.coord if isinstance(env, Env) else env
    error, found = await coord.fetch_offsets("g", [("t", [0, 1])], require_stable=stable)
    assert error == E.none
    return {o.partition: (o.offset, o.error) for _, offsets in found for o in offsets}


def marker(commit: bool, pid: int = PID) -> EndMarker:
    return EndMarker(pid, EPOCH, 0, commit)


async def complete(env: Env, commit: bool, pid: int = PID) -> None:
    p = env.coord.partition_for("g")
    assert await env.coord.complete_transaction(p, marker(commit, pid)) == E.none


@async_test
async def test_pending_until_commit_marker() -> None:
    env = await make_env()
    assert await env.coord.txn_commit_offsets(txn_params(10)) == [E.none, E.none]
    assert await fetched(env) == {0: (-1, E.none), 1: (-1, E.none)}
    assert await fetched(env, stable=True) == {
        0: (-1, E.unstable_offset_commit),
        1: (-1, E.unstable_offset_commit),
    }
    await complete(env, commit=True)
    assert await fetched(env, stable=True) == {0: (10, E.none), 1: (11, E.none)}
    log = env.log_for("g")
    assert [pid for pid in log.producers.values()] == [PID, PID]
    assert [m for _, m in log.markers] == [marker(True)]


@async_test
async def test_abort_marker_drops_them() -> None:
    env = await make_env()
    assert await env.coord.commit_offsets(plain_params(5)) == [E.none]
    assert await env.coord.txn_commit_offsets(txn_params(10)) == [E.none, E.none]
    await complete(env, commit=False)
    assert await fetched(env, stable=True) == {0: (5, E.none), 1: (-1, E.none)}


@async_test
async def test_newer_plain_commit_wins_over_an_older_transactional_one() -> None:
    env = await make_env()
    assert await env.coord.txn_commit_offsets(txn_params(10)) == [E.none, E.none]
    assert await env.coord.commit_offsets(plain_params(99)) == [E.none]
    await complete(env, commit=True)
    # t-0: the plain commit came after the transactional one; t-1 had none
    assert await fetched(env) == {0: (99, E.none), 1: (11, E.none)}
    # and the other way round: a transactional commit after a plain one wins
    assert await env.coord.txn_commit_offsets(txn_params(200)) == [E.none, E.none]
    await complete(env, commit=True)
    assert await fetched(env) == {0: (200, E.none), 1: (201, E.none)}


@async_test
async def test_producers_are_independent_and_member_checks_apply() -> None:
    env = await make_env()
    assert await env.coord.txn_commit_offsets(txn_params(10, pid=1)) == [E.none, E.none]
    assert await env.coord.txn_commit_offsets(txn_params(20, pid=2)) == [E.none, E.none]
    await complete(env, commit=False, pid=2)
    assert (await fetched(env, stable=True))[0] == (-1, E.unstable_offset_commit)
    await complete(env, commit=True, pid=1)
    assert await fetched(env, stable=True) == {0: (10, E.none), 1: (11, E.none)}
    bad = txn_params(1)
    bad.generation_id, bad.member_id = 3, "nobody"
    assert await env.coord.txn_commit_offsets(bad) == [E.unknown_member_id] * 2
    unknown_group = txn_params(1, group="fresh")
    unknown_group.generation_id = 1
    assert await env.coord.txn_commit_offsets(unknown_group) == [E.illegal_generation] * 2


@async_test
async def test_reload_rebuilds_pending_and_completed_offsets() -> None:
    env = await make_env()
    assert await env.coord.txn_commit_offsets(txn_params(10, pid=1)) == [E.none, E.none]
    await complete(env, commit=True, pid=1)
    assert await env.coord.txn_commit_offsets(txn_params(20, pid=2)) == [E.none, E.none]
    assert await env.coord.txn_commit_offsets(txn_params(30, pid=3)) == [E.none, E.none]
    await complete(env, commit=False, pid=3)
    again = await make_env(config(), env.logs)
    # pid 1 committed, pid 3 aborted, pid 2 still pending
    assert await fetched(again) == {0: (10, E.none), 1: (11, E.none)}
    assert (await fetched(again, stable=True))[0] == (-1, E.unstable_offset_commit)
    await complete(again, commit=True, pid=2)
    assert await fetched(again, stable=True) == {0: (20, E.none), 1: (21, E.none)}


@async_test
async def test_failed_append_keeps_nothing_pending() -> None:
    env = await make_env()
    env.log_for("g").fail_appends = 1
    assert await env.coord.txn_commit_offsets(txn_params(10)) == [E.coordinator_not_available] * 2
    assert (await fetched(env, stable=True))[0] == (-1, E.none)


def test_over_a_real_partition_log(tmp_path: Path) -> None:
    """Transactional batches with the producer's sequence, markers as control batches, the
    epoch still checked by the partition's producer state, and the same state after reload."""

    @async_test
    async def body() -> None:
        plog = open_log(tmp_path, small_config(**{"segment.bytes": "1048576"}))
        attach_producer_state(plog, ManualClock(T0))
        rlog = PartitionRecordLog(sole_leader(plog, lambda: T0), lambda: T0)
        coord = GroupCoordinator(config(num_partitions=1), ManualScheduler())
        await coord.load(0, rlog)
        # three transactions of one producer and epoch: the batches must chain their sequences
        for offset, commit in [(10, True), (20, False), (30, True)]:
            assert await coord.txn_commit_offsets(txn_params(offset)) == [E.none, E.none]
            assert await coord.complete_transaction(0, marker(commit)) == E.none
        assert await fetched(coord) == {0: (30, E.none), 1: (31, E.none)}
        # a zombie with an older epoch is refused by the log itself
        newer = txn_params(40, epoch=1)
        assert await coord.txn_commit_offsets(newer) == [E.none, E.none]
        stale = txn_params(50, epoch=0)
        assert await coord.txn_commit_offsets(stale) == [E.invalid_producer_epoch] * 2
        entries = list(rlog.replay_entries())
        assert [type(e).__name__ for e in entries].count("EndMarker") == 3
        assert all(e.producer_id == PID for e in entries if isinstance(e, TxnRecord))
        await coord.close()
        plog.close()

        reopened = open_log(tmp_path, small_config(**{"segment.bytes": "1048576"}))
        again = GroupCoordinator(config(num_partitions=1), ManualScheduler())
        await again.load(0, PartitionRecordLog(sole_leader(reopened, lambda: T0), lambda: T0))
        assert await fetched(again) == {0: (30, E.none), 1: (31, E.none)}
        assert (await fetched(again, stable=True))[0] == (-1, E.unstable_offset_commit)
        await again.close()
        reopened.close()

    body()
