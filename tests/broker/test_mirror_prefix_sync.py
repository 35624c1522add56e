"""The metadata sync of a prefixed mirror (``mirror.topic.prefix`` / ``mirror.group.prefix.enable``):
each step asks the source under its names and applies here under the prefixed ones. A fake
source, a real controller, group coordinator and ACL controller (`test_mirror_metadata_sync`)."""

import uuid
from dataclasses import dataclass
from typing import Any

from broker.controller.acls import AclController
from broker.metadata import mirror_names
from broker.metadata.image import TOPIC_RESOURCE
from broker.mirror.sync_source import SourceOffset
from broker.security.acls import Acl, AclOperation, PatternType, PermissionType, ResourceType

from .test_mirror_acl_sync import AclSource
from .test_mirror_metadata_sync import World, _group, run

PREFIXED = {
    mirror_names.TOPIC_PREFIX_KEY: "east.",
    mirror_names.GROUP_PREFIX_ENABLE_KEY: "true",
    "mirror.groups.include": ".*",
    "mirror.acl.include": "TOPIC,GROUP",
}


@dataclass
class SourceTopic:
    """As `SyncSourceClient.topics` answers: the topic under the source's own name."""

    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, Any]


def _source_topic(name: str, tid: uuid.UUID, partitions: int) -> SourceTopic:
    return SourceTopic(name, tid, {p: object() for p in range(partitions)})


def _acl(rtype: ResourceType, name: str, pattern: PatternType = PatternType.LITERAL) -> Acl:
    return Acl(rtype, name, pattern, "User:alice", "*", AclOperation.READ, PermissionType.ALLOW)


async def _prefixed_world() -> tuple[World, AclSource, Any]:
    src = AclSource()
    w = World(src, known_cluster_id=lambda m: "", own_cluster_id="dst-cluster")
    w.kwargs["acls"] = AclController(w.c)
    sync = await w.setup(PREFIXED)
    tid = await w.mirrored_topic("east.orders", 2)
    src.topics_.pop("east.orders")  # the source knows it as "orders"
    src.topics_["orders"] = _source_topic("orders", tid, 2)
    return w, src, sync


def test_topics_configs_groups_and_acls_map_to_prefixed_names() -> None:
    async def go() -> None:
        w, src, sync = await _prefixed_world()
        src.topics_["orders"] = _source_topic("orders", src.topics_["orders"].topic_id, 3)
        src.configs["orders"] = {"retention.ms": "12345"}
        src.groups = [_group("app")]
        src.offsets["app"] = {("orders", 1): SourceOffset(42, 0, "m")}
        src.acls = [
            _acl(ResourceType.TOPIC, "orders"),
            _acl(ResourceType.TOPIC, "*"),
            _acl(ResourceType.GROUP, "app"),
        ]

        await sync.refresh_now("m")

        assert not sync.errors, sync.errors
        assert "topics" in src.calls and "east.orders" not in str(src.calls)
        assert len(w.q.image.topics["east.orders"].partitions) == 3  # expanded like "orders"
        assert w.config("east.orders").get("retention.ms") == "12345"
        _, found = await w.env.coord.fetch_offsets("east.app", None)  # the prefixed group
        assert [(t, [(f.partition, f.offset) for f in rows]) for t, rows in found] == [
            ("east.orders", [(1, 42)])
        ]
        assert not (await w.env.coord.fetch_offsets("app", None))[1]
        assert set(w.q.image.acls.values()) == {
            _acl(ResourceType.TOPIC, "east.orders"),
            # a source wildcard covers the mirror's topics here, not this cluster's own
            _acl(ResourceType.TOPIC, "east.", PatternType.PREFIXED),
            _acl(ResourceType.GROUP, "east.app"),
        }

        # deleted at the source under its name: the prefixed topic leaves the mirror
        src.topics_.pop("orders")
        await sync.refresh_now("m")
        assert w.mirror_name("east.orders") == "m.removed"

    run(go())


def test_discovery_adds_prefixed_topics_and_never_mirrors_this_cluster_back() -> None:
    async def go() -> None:
        w, src, sync = await _prefixed_world()
        await w.mc.record_source_cluster_id("m", "src-cluster")  # as on first contact
        await w.mc.add_topics("m", [], patterns=[".*"])
        src.topics_["payments"] = _source_topic("payments", uuid.uuid4(), 1)
        # west's copy of this cluster's topic: its origin chain names this cluster
        src.topics_["west.payments"] = _source_topic("west.payments", uuid.uuid4(), 1)
        src.configs["west.payments"] = {mirror_names.SOURCE_CLUSTER_IDS_CONFIG: "dst-cluster"}

        await sync.refresh_now("m")

        assert w.mirror_name("east.payments") == "m"
        chain = w.q.image.config(TOPIC_RESOURCE, "east.payments")
        assert chain.get(mirror_names.SOURCE_CLUSTER_IDS_CONFIG) == "src-cluster"
        assert "east.west.payments" not in w.q.image.topics
        assert sync.skipped[("m", "loop")] == 1
        assert not sync.errors, sync.errors

    run(go())
