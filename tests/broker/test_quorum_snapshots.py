"""Metadata snapshots through ``MetadataQuorum``: three voters on loopback, each with its own
``__cluster_metadata-0`` log and metadata image. With a small
``max_bytes_between_snapshots`` every voter snapshots its image and drops its log below it; a
voter that was down while the others moved their log start past its log end catches up through
FetchSnapshot (whether it kept its files or lost them), and after a restart a voter loads its own
snapshot before the records after it. Every voter ends with the same image digest."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.config.properties import parse_properties
from broker.config.server_config import ConfigError, parse_server_config
from broker.log import LogConfig, PartitionLog
from broker.log.clock import SystemClock
from broker.metadata.image import TOPIC_RESOURCE, MetadataImage, apply_records
from broker.metadata.snapshot import image_digest, image_records
from broker.quorum.driver import NotLeaderError
from broker.quorum.metadata_log import SNAPSHOT_SUFFIX
from broker.quorum.node_quorum import MetadataQuorum
from broker.raft.core import RaftConfig
from protocol.metadata_records import latest_type
from tests.waits import wait_for_async

from .network_support import run
from .quorum_peer import QuorumPeer, now_ms

VOTERS = (1, 2, 3)
CLUSTER = "snapshot-test"
CONFIG = LogConfig.from_properties({"retention.ms": "-1"})
SNAPSHOT_BYTES = 3000

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
ConfigRecord = latest_type("ConfigRecord")
PartitionChangeRecord = latest_type("PartitionChangeRecord")


class StateMachine:
    """A node's metadata image, as app.Node keeps it (without reacting to it)."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.loaded: list[int] = []  # end offsets of the snapshots it loaded

    def apply(self, records: list[tuple[int, Any]]) -> None:
        self.image, _ = apply_records(self.image, records)

    def source(self) -> tuple[int, list[tuple[int, Any]]]:
        return self.image.offset, image_records(self.image)

    def load(self, end_offset: int, records: list[tuple[int, Any]]) -> None:
        self.image, _ = apply_records(MetadataImage(), records)
        self.loaded.append(end_offset)


class Voter(QuorumPeer):
    def __init__(self, node_id: int, root: Path) -> None:
        super().__init__(node_id, root, lambda: self.quorum.driver if self.quorum else None)
        self.quorum: MetadataQuorum | None = None
        self.plog: PartitionLog | None = None
        self.sm = StateMachine()

    def start(self, endpoints: dict[int, tuple[str, int]]) -> None:
        self.sm = StateMachine()  # a process starts with an empty image
        self.plog = PartitionLog.open(
            self.dir, "__cluster_metadata", 0, None, CONFIG, SystemClock(), clean_shutdown=False
        )

        self.quorum = MetadataQuorum(
            self.node_id,
            endpoints,
            self.plog,
            CLUSTER,
            now_ms,
            self.raft_client,
            self.sm.apply,
            config=RaftConfig(cluster_id=CLUSTER, max_bytes_between_snapshots=SNAPSHOT_BYTES),
            snapshot_source=self.sm.source,
            load_snapshot=self.sm.load,
        )
        self.quorum.start()

    async def crash(self) -> None:
        """Gone at once: no resignation, connections cut, the log files just left open."""
        assert self.quorum is not None and self.plog is not None
        await self.server.close(timeout=0)
        await self.quorum.driver.close(resign=False)
        self.quorum = None
        self.plog.close_handles()
        self.plog = None

    async def stop(self) -> None:
        if self.quorum is not None:
            await self.quorum.driver.close(resign=False)
        await self.server.close(timeout=0)
        if self.plog is not None:
            self.plog.close()

    @property
    def log_start(self) -> int:
        assert self.quorum is not None
        return self.quorum.driver.core.log.start_offset

    def snapshots(self) -> list[int]:
        files = (self.dir / "__cluster_metadata-0").glob(f"*{SNAPSHOT_SUFFIX}")
        return sorted(int(p.name.split("-")[0]) for p in files)

    def digest(self) -> str:
        return image_digest(self.sm.image)


def leader_of(voters: list[Voter]) -> Voter | None:
    live = [v for v in voters if v.quorum is not None]
    leaders = [v for v in live if v.quorum is not None and v.quorum.is_leader]
    if len(leaders) != 1:
        return None
    lead = leaders[0]
    ok = all(v.quorum is not None and v.quorum.leader_id == lead.node_id for v in live)
    return lead if ok else None


async def create_topics(voters: list[Voter], names: list[str]) -> None:
    """Through whichever voter leads (a leader may change under load: ask again)."""
    for name in names:
        tid = uuid.uuid4()
        records = [
            TopicRecord(name=name, topic_id=tid),
            *(
                PartitionRecord(
                    partition_id=p, topic_id=tid, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1 + p,
                    leader_epoch=0, partition_epoch=0,
                )
                for p in range(3)
            ),
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name="retention.ms",
                         value=str(len(name) * 1000)),
            PartitionChangeRecord(partition_id=0, topic_id=tid, leader=2, isr=(2, 3)),
        ]  # fmt: skip
        for _ in range(20):
            await wait_for_async(lambda: leader_of(voters) is not None, 15, "a leader")
            lead = leader_of(voters)
            assert lead is not None and lead.quorum is not None
            try:
                await asyncio.wait_for(lead.quorum.append(records), 10)
                break
            except NotLeaderError:
                continue
        else:
            raise AssertionError(f"topic {name} never committed")


def same_state(voters: list[Voter]) -> bool:
    live = [v for v in voters if v.quorum is not None]
    offsets = {v.quorum.applied_offset for v in live if v.quorum is not None}
    return len(offsets) == 1 and len({v.digest() for v in live}) == 1


@pytest.mark.parametrize("files", ["kept", "lost"])
def test_a_lagging_voter_catches_up_through_a_snapshot(tmp_path: Path, files: str) -> None:
    async def main() -> None:
        voters = [Voter(i, tmp_path) for i in VOTERS]
        for v in voters:
            await v.listen()
        endpoints = {v.node_id: ("127.0.0.1", v.port) for v in voters}
        try:
            for v in voters:
                v.start(endpoints)
            await create_topics(voters, [f"early-{i}" for i in range(5)])
            await wait_for_async(lambda: same_state(voters), 10, "three voters applying alike")

            late = next(v for v in voters if v is not leader_of(voters))
            assert late.quorum is not None
            late_end = late.quorum.end_offset
            await late.crash()
            rest = [v for v in voters if v is not late]
            n = 0
            # snapshot after snapshot, until both voters' log starts are past the late one's end
            while not all(v.log_start > late_end for v in rest):
                assert n < 400, [v.log_start for v in rest]
                await create_topics(rest, [f"t-{n}-{i}" for i in range(5)])
                n += 5
            await wait_for_async(lambda: same_state(rest), 10, "the two voters applying alike")
            for v in rest:
                assert v.snapshots() and v.snapshots()[-1] == v.log_start
                assert v.sm.loaded == []  # they wrote snapshots, never needed one

            if files == "lost":
                shutil.rmtree(late.dir)
                late.dir.mkdir()
            await late.listen(endpoints[late.node_id][1])
            late.start(endpoints)
            await wait_for_async(
                lambda: same_state(voters),
                20,
                "the late voter to catch up",
                detail=lambda: [(v.node_id, v.quorum and v.quorum.applied_offset) for v in voters],
            )
            assert late.sm.loaded, "caught up without loading a snapshot"
            assert late.sm.loaded[0] > late_end
            assert len(late.sm.image.topics) == 5 + n
            # a record after the snapshot reaches it too
            await create_topics(voters, ["after"])
            await wait_for_async(lambda: same_state(voters), 10, "the new topic everywhere")
            assert "after" in late.sm.image.topics

            # restarted, a voter loads its own snapshot first, then the records after it
            await late.crash()
            await late.listen(endpoints[late.node_id][1])
            late.start(endpoints)
            assert late.snapshots(), "the installed snapshot was kept"
            assert late.sm.loaded == [late.snapshots()[-1]]  # before any commit
            await wait_for_async(lambda: same_state(voters), 20, "the restarted voter")
        finally:
            for v in voters:
                await v.stop()

    run(main())


def test_snapshot_settings_are_kafkas() -> None:
    base = (
        "node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://:9092,"
        "CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n"
        "controller.quorum.voters=1@localhost:9093\nlog.dirs=/tmp/x\n"
    )
    cfg, warnings = parse_server_config(parse_properties(base, "t.properties"))
    assert (
        cfg.metadata_log_max_record_bytes_between_snapshots,
        cfg.metadata_log_max_snapshot_interval_ms,
    ) == (20 * 1024 * 1024, 3_600_000)
    cfg, warnings = parse_server_config(
        parse_properties(
            base + "metadata.log.max.record.bytes.between.snapshots=20000\n"
            "metadata.log.max.snapshot.interval.ms=0\n",
            "t.properties",
        )
    )
    assert warnings == []  # implemented: no "accepted but not implemented"
    assert (
        cfg.metadata_log_max_record_bytes_between_snapshots,
        cfg.metadata_log_max_snapshot_interval_ms,
    ) == (20000, 0)
    with pytest.raises(ConfigError, match=r"metadata\.log\.max\.record\.bytes\.between\.snapshots"):
        parse_server_config(
            parse_properties(
                base + "metadata.log.max.record.bytes.between.snapshots=0\n", "t.properties"
            )
        )
