"""MirrorMetadataSync against a fake source, a real controller and a real group coordinator."""

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.controller import (
    SET,
    ConfigChange,
    ConfigRecord,
    ConfigValidationError,
    Controller,
    TopicSpec,
    Validators,
)
from broker.controller.mirrors import MirrorController
from broker.coordinator.group.shard import CommitItem, CommitParams, SyncParams
from broker.coordinator.share.state_records import ShareKey
from broker.metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE
from broker.mirror.core.config_filter import config_ops
from broker.mirror.metadata_sync import MirrorMetadataSync, compile_patterns
from broker.mirror.sync_source import SourceGroup, SourceOffset
from tests.waits import wait_for_async

from .group_support import config as group_config
from .group_support import join_params, make_env
from .test_controller_image import MemoryQuorum

ALL_APIS = {k: (0, 9) for k in (3, 9, 10, 16, 29, 32)}
MOCK_APIS = {k: (0, 9) for k in (3, 9, 10)}  # librdkafka's mock: no ListGroups/DescribeConfigs
KNOWN_KEYS = (
    "retention.ms",
    "cleanup.policy",
    "min.insync.replicas",
    "segment.bytes",
    "compression.type",
)


def _validate(key: str, value: str) -> str:
    if key not in (*KNOWN_KEYS, "mirror.name"):
        raise ConfigValidationError(f"Unknown topic config name: {key}")
    if key == "retention.ms" and not value.lstrip("-").isdigit():
        raise ConfigValidationError("bad retention.ms")
    return value


@dataclass
class FakeTopic:
    topic_id: uuid.UUID | None
    partitions: dict[int, Any]


@dataclass
class FakeSource:
    cid: str | None = "src-cluster"
    versions: dict[int, tuple[int, int]] = field(default_factory=lambda: dict(ALL_APIS))
    topics_: dict[str, FakeTopic] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    groups: list[SourceGroup] = field(default_factory=list)
    offsets: dict[str, dict[tuple[str, int], SourceOffset]] = field(default_factory=dict)
    share_starts: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    hang: bool = False
    calls: list[str] = field(default_factory=list)
    closed: bool = False

    async def _maybe_hang(self, name: str) -> None:
        self.calls.append(name)
        if self.hang:
            await asyncio.sleep(3600)

    async def cluster_id(self) -> str | None:
        await self._maybe_hang("cluster_id")
        return self.cid

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        await self._maybe_hang("api_versions")
        return dict(self.versions)

    async def topics(self, names: Sequence[str] | None = None) -> Mapping[str, Any]:
        await self._maybe_hang("topics")
        return {n: t for n, t in self.topics_.items() if names is None or n in names}

    async def missing_topics(self, names: Sequence[str]) -> set[str]:
        await self._maybe_hang("missing_topics")
        return {n for n in names if n not in self.topics_}

    async def topic_configs(self, names: Sequence[str]) -> Mapping[str, Mapping[str, str]]:
        await self._maybe_hang("topic_configs")
        return {n: self.configs.get(n, {}) for n in names if n in self.topics_}

    async def list_groups(self) -> list[SourceGroup]:
        await self._maybe_hang("list_groups")
        return list(self.groups)

    async def group_coordinators(self, group_ids: Sequence[str]) -> dict[str, int]:
        return dict.fromkeys(group_ids, 1)

    async def committed_offsets(
        self, node_id: int, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], SourceOffset]:
        self.calls.append(f"offsets:{group_id}")
        return {
            k: v
            for k, v in self.offsets.get(group_id, {}).items()
            if k[0] in topics and k[1] in topics[k[0]]
        }

    async def share_group_offsets(
        self, node_id: int, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], int]:
        self.calls.append(f"share:{group_id}")
        return {
            k: v
            for k, v in self.share_starts.get(group_id, {}).items()
            if k[0] in topics and k[1] in topics[k[0]]
        }

    async def close(self) -> None:
        self.closed = True


@dataclass
class FakeShareOffsets:
    """The destination's share offsets admin: stored start offsets, groups with members."""

    stored: dict[ShareKey, int] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)
    alters: list[tuple[str, dict[ShareKey, int]]] = field(default_factory=list)

    async def alterable(self, group_id: str) -> ErrorCode:
        return ErrorCode.non_empty_group if group_id in self.members else ErrorCode.none

    async def start_offset(self, k: ShareKey) -> int | None:
        return self.stored.get(k)

    async def alter(
        self, group_id: str, starts: Mapping[ShareKey, int]
    ) -> tuple[tuple[ErrorCode, str | None], dict[ShareKey, tuple[ErrorCode, str | None]]]:
        self.alters.append((group_id, dict(starts)))
        self.stored.update(starts)
        return (ErrorCode.none, None), dict.fromkeys(starts, (ErrorCode.none, None))


def _group(gid: str, group_type: str = "classic") -> SourceGroup:
    return SourceGroup(gid, "consumer", "Empty", group_type)


class World:
    """A controller, mirror controller and group coordinator in memory; ``source`` None: the
    sync uses a real `SyncSourceClient` (integration tests)."""

    def __init__(self, source: FakeSource | None, **kwargs: Any) -> None:
        self.q = MemoryQuorum()
        v = Validators(
            topic_config=_validate,
            broker_config=lambda k, v: v,
            default_partitions=1,
        )
        self.c = Controller(self.q, lambda: self.q.image, v, node_id=1)
        self.mc = MirrorController(
            self.c, state_topic_partitions=2, state_topic_replication_factor=1
        )
        self.source = source
        self.by_bootstrap: dict[str, FakeSource] = {}  # other mirrors' sources, by address
        self.env: Any = None
        self.kwargs = kwargs
        self.ensured = 0

    async def setup(self, mirror_config: dict[str, str] | None = None) -> MirrorMetadataSync:
        await self.c.register_broker([("PLAINTEXT", "localhost", 9092, 0)], None, {})
        code, why = await self.mc.create_mirror(
            "m", {"bootstrap.servers": "src:9092", **(mirror_config or {})}
        )
        assert code == ErrorCode.none, why
        self.env = await make_env(group_config(initial_rebalance_delay_ms=0))

        async def ensure() -> None:
            self.ensured += 1

        fake = self.source
        return MirrorMetadataSync(
            lambda: self.q.image,
            self.c,
            self.mc,
            self.env.coord,
            source_factory=None
            if fake is None
            else (
                lambda cfg, cid, t: self.by_bootstrap.get(cfg.get("bootstrap.servers", ""), fake)
            ),
            ensure_offsets_topic=ensure,
            **self.kwargs,
        )

    async def mirrored_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        tid = topic_id or uuid.uuid4()
        out = await self.mc.add_topics(
            "m",
            [name],
            {name: TopicSpec(name, partitions, 1, configs=dict(configs or {}), topic_id=tid)},
        )
        assert out.topics[0].error == ErrorCode.none, out
        if self.source is not None:
            self.source.topics_[name] = FakeTopic(tid, {p: object() for p in range(partitions)})
        return tid

    def mirror_name(self, topic: str) -> str | None:
        return self.q.image.config(TOPIC_RESOURCE, topic).get("mirror.name")

    def config(self, topic: str) -> dict[str, str]:
        return dict(self.q.image.config(TOPIC_RESOURCE, topic))


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 20))


# -- pure helpers ---------------------------------------------------------------------------


def test_config_ops_default_excludes_and_regexes() -> None:
    from broker.controller.mirror_config import DEFAULT_TOPIC_EXCLUDES

    default = compile_patterns(DEFAULT_TOPIC_EXCLUDES)
    source = {"retention.ms": "1000", "min.insync.replicas": "2", "cleanup.policy": "compact"}
    local = {
        "retention.ms": "5",
        "segment.bytes": "99",
        "min.insync.replicas": "1",
        "mirror.name": "m",
    }
    ops = config_ops(source, local, default, _validate)
    assert ops == [
        ("cleanup.policy", 0, "compact"),
        ("retention.ms", 0, "1000"),
        ("segment.bytes", 1, None),  # not at the source: deleted here
    ]  # min.insync.replicas (excluded) and mirror.name (always) untouched
    # regex excludes, and a source key this broker refuses is neither set nor deleted
    ops = config_ops(
        {"retention.ms": "1", "leader.replication.throttled.replicas": "*", "x.unknown": "1"},
        {"x.unknown": "0", "follower.replication.throttled.replicas": "*"},
        compile_patterns(".*throttled.*"),
        _validate,
    )
    assert ops == [("retention.ms", 0, "1")]
    assert config_ops({"retention.ms": "1"}, {"retention.ms": "1"}, default, _validate) == []


# -- refreshes ------------------------------------------------------------------------------


def test_partitions_configs_and_source_deletion() -> None:
    async def go() -> None:
        src = FakeSource()
        w = World(src)
        sync = await w.setup()
        await w.mirrored_topic("orders", 2, {"retention.ms": "100", "segment.bytes": "1024"})
        tid = await w.mirrored_topic("gone", 1)
        await w.mirrored_topic("recreated", 1)
        await w.mirrored_topic("paused", 1)
        await w.mc.pause_topics("m", ["paused"])
        src.topics_["orders"].partitions.update({2: object(), 3: object()})
        src.configs["orders"] = {"retention.ms": "999", "min.insync.replicas": "3"}
        src.configs["paused"] = {"retention.ms": "1"}
        src.topics_["paused"].partitions[1] = object()
        del src.topics_["gone"]
        src.topics_["recreated"] = FakeTopic(uuid.uuid4(), {0: object()})

        await sync.refresh_now("m")

        assert len(w.q.image.topics["orders"].partitions) == 4
        assert w.config("orders") == {"retention.ms": "999", "mirror.name": "m"}
        assert w.mirror_name("gone") == "m.removed"
        assert w.q.image.topics["gone"].topic_id == tid
        assert w.mirror_name("recreated") == "m.removed"
        # paused: no metadata sync (KIP: PAUSED), but it stays in the mirror
        assert w.mirror_name("paused") == "m.paused"
        assert len(w.q.image.topics["paused"].partitions) == 1
        assert "retention.ms" not in w.config("paused")
        assert sync.last_refresh_ms["m"] > 0
        assert not sync.errors
        # a second refresh changes nothing and reports nothing
        before = len(w.q.deltas)
        await sync.refresh_now("m")
        assert len(w.q.deltas) == before
        # a paused topic deleted at the source is failed over too
        del src.topics_["paused"]
        await sync.refresh_now("m")
        assert w.mirror_name("paused") == "m.removed"

    run(go())


def test_topic_with_a_transient_source_error_is_not_failed_over() -> None:
    async def go() -> None:
        src = FakeSource()
        w = World(src)
        sync = await w.setup()
        await w.mirrored_topic("orders", 1)
        real = src.topics_.pop("orders")

        async def nothing_missing(names: Sequence[str]) -> set[str]:
            return set()  # the topic errored (e.g. LEADER_NOT_AVAILABLE), it is not unknown

        src.missing_topics = nothing_missing  # type: ignore[method-assign]
        await sync.refresh_now("m")
        assert w.mirror_name("orders") == "m"
        src.topics_["orders"] = real

    run(go())


def test_cluster_id_mismatch_halts_the_mirror(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        src = FakeSource()
        w = World(src)
        sync = await w.setup()
        await w.mirrored_topic("orders", 1)
        await sync.refresh_now("m")
        src.cid = "another-cluster"
        src.topics_["orders"].partitions[1] = object()
        with caplog.at_level(logging.ERROR):
            await sync.refresh_now("m")
            await sync.refresh_now("m")
        assert sync.halted("m")
        assert sync.errors[("m", "cluster_id_mismatch")] == 1
        assert len(w.q.image.topics["orders"].partitions) == 1  # nothing synced any more
        assert "another-cluster" in caplog.text and "halted" in caplog.text
        # stop + start (mirror deleted and re-created) forgets the old id
        await sync.stop("m")
        await sync.refresh_now("m")
        assert not sync.halted("m") and len(w.q.image.topics["orders"].partitions) == 2

    run(go())


def test_cluster_id_known_to_the_admin_api_wins() -> None:
    async def go() -> None:
        w = World(FakeSource(), known_cluster_id=lambda m: "from-create-mirror")
        sync = await w.setup()
        await sync.refresh_now("m")
        assert sync.halted("m") and sync.errors[("m", "cluster_id_mismatch")] == 1

    run(go())


def test_group_offsets_synced_unless_active_here() -> None:
    async def go() -> None:
        src = FakeSource()
        w = World(src, known_cluster_id=lambda m: "")
        sync = await w.setup({"mirror.groups.include": "app-.*,svc"})
        await w.mirrored_topic("orders", 2)
        await w.mirrored_topic("paused", 1)
        await w.mc.pause_topics("m", ["paused"])
        src.groups = [_group("app-1"), _group("svc"), _group("other"), _group("app-active")]
        src.groups.append(_group("app-share", "share"))
        for gid in ("app-1", "svc", "other", "app-active", "app-share"):
            src.offsets[gid] = {
                ("orders", 0): SourceOffset(10, 3, "meta"),
                ("orders", 1): SourceOffset(20, 3, ""),
                ("paused", 0): SourceOffset(5, 0, ""),
            }
        coord = w.env.coord
        joined = await coord.join_group(join_params(group="app-active"))
        await coord.sync_group(SyncParams("app-active", 1, joined.member_id, None, None, None, {}))

        await sync.refresh_now("m")

        _, found = await coord.fetch_offsets("app-1", None)
        assert [
            (t, [(f.partition, f.offset, f.leader_epoch, f.metadata) for f in rows])
            for t, rows in found
        ] == [
            ("orders", [(0, 10, 3, "meta"), (1, 20, 3, "")])
        ]  # the paused topic's offsets are not synced
        assert (await coord.fetch_offsets("svc", None))[1]
        assert not (await coord.fetch_offsets("other", None))[1]  # not included
        assert not (await coord.fetch_offsets("app-active", None))[1]  # members here
        assert not (await coord.fetch_offsets("app-share", None))[1]
        assert "offsets:app-share" not in src.calls
        assert w.ensured == 1
        assert sync.skipped[("m", "share_groups")] == 1
        assert not any(k[1] == "groups" for k in sync.errors), sync.errors

        # unchanged offsets are not committed again; changed ones are
        size = len(w.env.log_for("app-1").records)
        await sync.refresh_now("m")
        assert len(w.env.log_for("app-1").records) == size
        src.offsets["app-1"][("orders", 0)] = SourceOffset(15, 4, "meta")
        await sync.refresh_now("m")
        _, found = await coord.fetch_offsets("app-1", [("orders", [0])])
        assert found[0][1][0].offset == 15 and found[0][1][0].leader_epoch == 4

    run(go())


def test_share_group_start_offsets_synced_unless_active_here() -> None:
    async def go() -> None:
        src = FakeSource()
        src.versions[90] = (0, 0)  # DescribeShareGroupOffsets
        share = FakeShareOffsets()
        w = World(src, known_cluster_id=lambda m: "", share_offsets=share)
        sync = await w.setup({"mirror.groups.include": "q-.*"})
        tid = await w.mirrored_topic("jobs", 2)
        src.groups = [_group("q-1", "share"), _group("q-busy", "share"), _group("x", "share")]
        for gid in ("q-1", "q-busy", "x"):
            src.share_starts[gid] = {("jobs", 0): 7, ("jobs", 1): 3, ("gone", 0): 1}
        share.members.add("q-busy")

        await sync.refresh_now("m")

        assert share.alters == [("q-1", {ShareKey("q-1", tid, 0): 7, ShareKey("q-1", tid, 1): 3})]
        assert "share:x" not in src.calls  # not included
        assert ("m", "share_groups") not in sync.skipped and not sync.errors, sync.errors
        # unchanged: nothing written again; a moved start offset is
        await sync.refresh_now("m")
        assert len(share.alters) == 1
        src.share_starts["q-1"][("jobs", 1)] = 9
        await sync.refresh_now("m")
        assert share.alters[-1] == ("q-1", {ShareKey("q-1", tid, 1): 9})

    run(go())


def test_offsets_beyond_a_destination_commit_are_overwritten_only_when_empty() -> None:
    async def go() -> None:
        src = FakeSource()
        w = World(src)
        sync = await w.setup()
        await w.mirrored_topic("orders", 1)
        src.groups = [_group("g")]
        src.offsets["g"] = {("orders", 0): SourceOffset(7, 0, "")}
        # a standalone commit already exists locally: the source's value replaces it
        await w.env.coord.commit_offsets(
            CommitParams("g", -1, "", None, -1, [CommitItem("orders", 0, 99, 0, "")], 9)
        )
        await sync.refresh_now("m")
        _, found = await w.env.coord.fetch_offsets("g", None)
        assert found[0][1][0].offset == 7

    run(go())


def test_missing_apis_are_skipped_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        src = FakeSource(versions=dict(MOCK_APIS))
        w = World(src)
        sync = await w.setup()
        await w.mirrored_topic("orders", 1, {"retention.ms": "5"})
        src.groups = [_group("g")]
        with caplog.at_level(logging.INFO):
            await sync.refresh_now("m")
            await sync.refresh_now("m")
        assert w.config("orders")["retention.ms"] == "5"  # not deleted for lack of DescribeConfigs
        assert "topic_configs" not in src.calls and "list_groups" not in src.calls
        for kind in ("topic_configs", "groups", "acls", "share_groups"):
            assert sync.skipped[("m", kind)] == 2, kind
        assert caplog.text.count("groups not synced: the source does not support ListGroups") == 1
        assert caplog.text.count("acls not synced") == 1
        assert not sync.errors

    run(go())


def test_a_hanging_source_times_out() -> None:
    async def go() -> None:
        src = FakeSource(hang=True)
        w = World(src, request_timeout_ms=50)
        sync = await w.setup()
        await sync.refresh_now("m")
        assert sync.errors[("m", "metadata")] == 1
        assert "m" not in sync.last_refresh_ms

    run(go())


def test_bad_include_rules_are_errors_not_crashes() -> None:
    async def go() -> None:
        src = FakeSource()
        w = World(src)
        sync = await w.setup()
        await w.mirrored_topic("orders", 1)
        src.groups = [_group("g")]
        changes = [
            ConfigChange(MIRROR_RESOURCE, "m", [("mirror.acl.include", SET, "TOPIC;*;EAT")]),
            ConfigChange(MIRROR_RESOURCE, "m", [("mirror.groups.include", SET, "(")]),
        ]
        assert all(r.error == ErrorCode.none for r in await w.c.alter_configs(changes, False))
        await sync.refresh_now("m")
        assert sync.errors[("m", "acls")] == 1 and sync.errors[("m", "groups")] == 1
        assert "m" in sync.last_refresh_ms

    run(go())


def test_tasks_follow_the_mirrors_in_the_image() -> None:
    async def go() -> None:
        src = FakeSource()
        w = World(src, default_interval_ms=20)
        sync = await w.setup()
        sync.on_metadata(w.q.image)
        assert sync.running() == {"m"}
        await wait_for_async(
            lambda: src.calls.count("cluster_id") >= 3, 5, "3 refreshes (one every interval)"
        )
        # a second mirror, with its own source, keeps refreshing: the clock of the check below
        other = w.by_bootstrap["other:9092"] = FakeSource()
        code, why = await w.mc.create_mirror("n", {"bootstrap.servers": "other:9092"})
        assert code == ErrorCode.none, why
        await w.mc.delete_mirror("m")
        sync.on_metadata(w.q.image)
        await wait_for_async(
            lambda: sync.running() == {"n"} and src.closed, 5, "m's task stopped, its client closed"
        )
        calls = len(src.calls)
        start = other.calls.count("cluster_id")
        await wait_for_async(
            lambda: other.calls.count("cluster_id") >= start + 5, 5, "five refreshes of n"
        )
        assert len(src.calls) == calls, "a task left behind called m's source again"
        await sync.close()

    run(go())


def test_per_mirror_interval_overrides_the_default() -> None:
    async def go() -> None:
        w = World(FakeSource(), default_interval_ms=lambda: 1234)
        sync = await w.setup()
        assert sync.interval_ms("m") == 1234
        # the mirror config catalog does not take the key (yet): write the record directly
        await w.q.append(
            [
                ConfigRecord(
                    resource_type=MIRROR_RESOURCE,
                    resource_name="m",
                    name="mirror.metadata.refresh.interval.ms",
                    value="500",
                )
            ]
        )
        assert sync.interval_ms("m") == 500

    run(go())
