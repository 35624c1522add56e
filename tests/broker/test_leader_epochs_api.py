"""OffsetForLeaderEpoch (23) v2-v4: only the leader answers, the current leader epoch is checked
first, the answer comes from the leader epoch cache, and DESCRIBE on the topic (or
CLUSTER_ACTION on the cluster) is needed."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.leader_epochs import LeaderEpochsApi
from broker.api.services import Services
from broker.log.epoch_cache import LeaderEpochCache
from broker.metadata.image import MetadataImage, apply_records
from broker.security.acls import AclOperation, ResourceType
from protocol.build import build
from protocol.metadata_records import latest_type
from protocol.registry import REGISTRY

E = ErrorCode
TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")


class FakeLog:
    """The leader epoch cache of a log whose end offset is ``leo``."""

    def __init__(self, entries: list[tuple[int, int]], leo: int) -> None:
        self.cache = LeaderEpochCache(Path("/nonexistent"), persist=False)
        for epoch, start in entries:
            self.cache.assign(epoch, start)
        self.leo = leo

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.leo)


@dataclass
class Hosted:
    log: FakeLog
    leader_epoch: int
    is_leader: bool


@dataclass
class Replicas:
    hosted: dict[tuple[str, int], Hosted] = field(default_factory=dict)

    def get(self, topic: str, partition: int) -> Hosted | None:
        return self.hosted.get((topic, partition))


@dataclass
class Ctx:
    api_version: int
    principal: str = "User:alice"
    peer_host: str = "127.0.0.1"


class Allow:
    def __init__(self, *grants: tuple[AclOperation, ResourceType, str]) -> None:
        self.grants = set(grants)

    def authorize(self, principal: str, host: str, op: Any, rtype: Any, name: str) -> bool:
        return (op, rtype, name) in self.grants


def _image(*topics: tuple[str, int]) -> MetadataImage:
    records = []
    for name, partitions in topics:
        tid = uuid.uuid4()
        records.append(TopicRecord(name=name, topic_id=tid))
        for i in range(partitions):
            records.append(
                PartitionRecord(
                    partition_id=i,
                    topic_id=tid,
                    replicas=[1, 2],
                    isr=[1, 2],
                    leader=1,
                    leader_epoch=4,
                    partition_epoch=0,
                )
            )
    img, _ = apply_records(MetadataImage(), list(enumerate(records)))
    return img


def _api(replicas: Replicas, img: MetadataImage, authorizer: Any = None) -> LeaderEpochsApi:
    return LeaderEpochsApi(
        Services(
            node_id=1,
            cluster_id="c",
            image=lambda: img,
            controller=None,
            replicas=replicas,
            log_manager=None,
            config=None,
            now_ms=lambda: 0,
            authorizer=authorizer,
        )
    )


def _ask(api: LeaderEpochsApi, version: int, *asks: tuple[str, int, int, int]) -> Any:
    """asks: (topic, partition, current leader epoch, leader epoch)."""
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, p, current, epoch in asks:
        topics.setdefault(topic, []).append(
            {"partition": p, "current_leader_epoch": current, "leader_epoch": epoch}
        )
    req = build(
        REGISTRY.spec(23).request_type(version),
        {
            "replica_id": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        },
    )
    resp = asyncio.run(api.offset_for_leader_epoch(Ctx(version), req))  # type: ignore[arg-type]
    return [
        (t.topic, int(p.partition), int(p.error_code), int(getattr(p, "leader_epoch", -1)),
         int(p.end_offset))
        for t in resp.topics
        for p in t.partitions
    ]  # fmt: skip


def _setup() -> tuple[Replicas, MetadataImage]:
    img = _image(("t", 3), ("other", 1))
    log = FakeLog([(0, 0), (2, 10), (4, 25)], leo=40)
    replicas = Replicas(
        {
            ("t", 0): Hosted(log, 4, True),
            ("t", 1): Hosted(FakeLog([(0, 0)], 5), 4, False),  # a follower here
        }
    )
    return replicas, img


def test_the_leader_answers_from_its_epoch_cache() -> None:
    api = _api(*_setup())
    for version in (2, 3, 4):
        assert _ask(api, version, ("t", 0, -1, 0), ("t", 0, -1, 1), ("t", 0, -1, 4)) == [
            ("t", 0, 0, 0, 10),
            ("t", 0, 0, 0, 10),  # epoch 1 never led: the epoch before it and where it ended
            ("t", 0, 0, 4, 40),  # the current epoch ends at the log end
        ]
    # newer than anything known: undefined
    assert _ask(api, 4, ("t", 0, -1, 9)) == [("t", 0, 0, -1, -1)]
    assert _ask(api, 2, ("t", 0, -1, 2)) == [("t", 0, 0, 2, 25)]


def test_only_the_leader_answers() -> None:
    api = _api(*_setup())
    assert _ask(api, 4, ("t", 1, -1, 0), ("t", 2, -1, 0), ("other", 0, -1, 0)) == [
        ("t", 1, E.not_leader_or_follower, -1, -1),  # hosted as a follower
        ("t", 2, E.not_leader_or_follower, -1, -1),  # not hosted, the cluster has it
        ("other", 0, E.not_leader_or_follower, -1, -1),
    ]
    assert _ask(api, 4, ("t", 3, -1, 0), ("nope", 0, -1, 0)) == [
        ("t", 3, E.unknown_topic_or_partition, -1, -1),
        ("nope", 0, E.unknown_topic_or_partition, -1, -1),
    ]


def test_current_leader_epoch_is_checked_first() -> None:
    api = _api(*_setup())
    assert _ask(api, 4, ("t", 0, 3, 0), ("t", 0, 5, 0), ("t", 0, 4, 0)) == [
        ("t", 0, E.fenced_leader_epoch, -1, -1),
        ("t", 0, E.unknown_leader_epoch, -1, -1),
        ("t", 0, 0, 0, 10),
    ]
    # a follower asked with an old epoch: fenced, before "not the leader"
    assert _ask(api, 4, ("t", 1, 2, 0)) == [("t", 1, E.fenced_leader_epoch, -1, -1)]


def test_describe_on_the_topic_or_cluster_action() -> None:
    replicas, img = _setup()
    describe_t = Allow((AclOperation.DESCRIBE, ResourceType.TOPIC, "t"))
    assert _ask(_api(replicas, img, describe_t), 4, ("other", 0, -1, 0), ("t", 0, -1, 4)) == [
        ("t", 0, 0, 4, 40),  # the topics allowed come first
        ("other", 0, E.topic_authorization_failed, -1, -1),
    ]
    broker = Allow((AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"))
    assert _ask(_api(replicas, img, broker), 4, ("t", 0, -1, 4), ("other", 0, -1, 0)) == [
        ("t", 0, 0, 4, 40),
        ("other", 0, E.not_leader_or_follower, -1, -1),
    ]
