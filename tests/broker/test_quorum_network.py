"""Three voters on loopback, each with its own ``__cluster_metadata-0`` log, quorum-state file,
listener and ``QuorumDriver``: they elect a leader over real sockets (Kafka's wire RPCs, kio's
codec), commit what the leader appends, survive the leader's crash, and a restarted voter
catches up from its own files."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from broker.log import LogConfig, PartitionLog
from broker.log.clock import SystemClock
from broker.quorum.driver import NotLeaderError, QuorumDriver
from broker.quorum.metadata_log import MetadataLog
from broker.raft.core import RaftConfig, RaftCore
from broker.raft.messages import SnapshotId
from broker.raft.quorum_state import FileQuorumStateStore
from tests.waits import wait_for_async

from .network_support import run
from .quorum_peer import QuorumPeer, now_ms

VOTERS = frozenset({1, 2, 3})
CONFIG = LogConfig.from_properties({"retention.ms": "-1"})


class Applied:
    """The listener: what the node's state machine saw."""

    def __init__(self) -> None:
        self.hw = 0
        self.leaders: list[tuple[int, int]] = []

    def handle_commit(self, high_watermark: int) -> None:
        assert high_watermark >= self.hw or high_watermark == 0, "HW went down"
        self.hw = high_watermark

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leaders.append((leader_id, epoch))

    def handle_load_snapshot(self, snapshot_id: SnapshotId) -> None:
        pass

    def snapshot_state(self, up_to: int) -> tuple[int, bytes] | None:
        return None


class Voter(QuorumPeer):
    def __init__(self, node_id: int, root: Path) -> None:
        super().__init__(node_id, root, lambda: self.driver)
        self.driver: QuorumDriver | None = None
        self.plog: PartitionLog | None = None
        self.applied = Applied()

    def start(self, endpoints: dict[int, tuple[str, int]], seed: int) -> None:
        self.plog = PartitionLog.open(
            self.dir, "__cluster_metadata", 0, None, CONFIG, SystemClock(), clean_shutdown=False
        )
        core = RaftCore(
            self.node_id,
            VOTERS,
            MetadataLog(self.plog, now_ms),
            FileQuorumStateStore(self.dir / "quorum-state", "test-cluster"),
            random.Random(seed),
            RaftConfig(cluster_id="test-cluster"),
        )

        self.driver = QuorumDriver(core, endpoints, self.applied, now_ms, self.raft_client)
        self.driver.start()

    async def crash(self) -> None:
        """Gone at once: no resignation, connections cut, the log files just left open."""
        assert self.driver is not None and self.plog is not None
        await self.server.close(timeout=0)
        await self.driver.close(resign=False)
        self.driver = None
        self.plog.close_handles()
        self.plog = None

    async def stop(self) -> None:
        if self.driver is not None:
            await self.driver.close()
        await self.server.close(timeout=0)
        if self.plog is not None:
            self.plog.close()

    def committed_payloads(self) -> list[bytes]:
        assert self.driver is not None
        log = self.driver.core.log
        entries = log.read(log.start_offset, 1 << 20)
        return [e.payload for e in entries if e.offset < self.applied.hw and not e.control]


def leader_of(voters: list[Voter]) -> Voter | None:
    live = [v for v in voters if v.driver is not None]
    leaders = [v for v in live if v.driver is not None and v.driver.core.is_leader]
    if len(leaders) != 1:
        return None
    epoch = leaders[0].driver.core.epoch  # type: ignore[union-attr]
    agree = all(
        v.driver is not None
        and v.driver.core.leader_id == leaders[0].node_id
        and v.driver.core.epoch == epoch
        for v in live
    )
    return leaders[0] if agree else None


async def append_all(leader: Voter, payloads: list[bytes]) -> None:
    assert leader.driver is not None
    for p in payloads:
        await asyncio.wait_for(leader.driver.append([p]), 10)


def test_three_voters_elect_commit_fail_over_and_catch_up(tmp_path: Path) -> None:
    async def main() -> None:
        voters = [Voter(i, tmp_path) for i in sorted(VOTERS)]
        for v in voters:
            await v.listen()
        endpoints = {v.node_id: ("127.0.0.1", v.port) for v in voters}
        try:
            for v in voters:
                v.start(endpoints, seed=v.node_id)
            await wait_for_async(lambda: leader_of(voters) is not None, 15, "a leader")
            first = leader_of(voters)
            assert first is not None and first.driver is not None
            epoch1 = first.driver.core.epoch
            await append_all(first, [b"a%d" % i for i in range(30)])
            await wait_for_async(
                lambda: all(len(v.committed_payloads()) == 30 for v in voters), 10, "replication"
            )
            assert all(v.committed_payloads() == voters[0].committed_payloads() for v in voters)

            # the followers have heard from the leader (the new controller's evidence, issue 31)
            for v in voters:
                if v is not first:
                    assert v.driver is not None and v.driver.silent_for(first.node_id) is not None
            # the leader crashes: the other two elect a new one and go on
            crashed_at = now_ms()
            await first.crash()
            rest = [v for v in voters if v is not first]
            await wait_for_async(lambda: leader_of(rest) is not None, 15, "a new leader")
            second = leader_of(rest)
            assert second is not None and second.driver is not None
            # silent since before the crash: its last answer was to a request sent before it
            silent = second.driver.silent_for(first.node_id)
            since = now_ms() - crashed_at
            assert silent is not None and since <= silent < since + 5000, (silent, since)
            assert second.driver.core.epoch > epoch1
            try:
                await asyncio.wait_for(first_append_refused(first), 1)
            except AssertionError:
                raise
            await append_all(second, [b"b%d" % i for i in range(20)])

            # the old leader restarts from its files and catches up
            await first.listen(endpoints[first.node_id][1])
            first.start(endpoints, seed=99)
            await wait_for_async(
                lambda: all(len(v.committed_payloads()) == 50 for v in voters), 15, "catch-up"
            )
            logs = [v.committed_payloads() for v in voters]
            assert logs[0][:30] == [b"a%d" % i for i in range(30)]
            assert logs[0][30:] == [b"b%d" % i for i in range(20)]
            assert logs[0] == logs[1] == logs[2]
        finally:
            for v in voters:
                await v.stop()

    run(main())


async def first_append_refused(voter: Voter) -> None:
    """A crashed voter has no driver: nothing to append through (and a follower refuses)."""
    assert voter.driver is None


def test_a_follower_refuses_appends(tmp_path: Path) -> None:
    async def main() -> None:
        voters = [Voter(i, tmp_path) for i in sorted(VOTERS)]
        for v in voters:
            await v.listen()
        endpoints = {v.node_id: ("127.0.0.1", v.port) for v in voters}
        try:
            for v in voters:
                v.start(endpoints, seed=10 + v.node_id)
            await wait_for_async(lambda: leader_of(voters) is not None, 15, "a leader")
            leader = leader_of(voters)
            follower = next(v for v in voters if v is not leader)
            assert follower.driver is not None and leader is not None
            try:
                await follower.driver.append([b"x"])
            except NotLeaderError as e:
                assert e.leader_id == leader.node_id
            else:
                raise AssertionError("a follower accepted an append")
        finally:
            for v in voters:
                await v.stop()

    run(main())
