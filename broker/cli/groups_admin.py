"""What ``kafka-consumer-groups.sh`` and ``kafka-share-groups.sh`` ask of the cluster, as Kafka's
Admin client asks it: the brokers and partition leaders (Metadata), each group's coordinator
(FindCoordinator), the groups (ListGroups on every broker), a group's description
(ConsumerGroupDescribe, falling back to DescribeGroups for classic groups, as Kafka's admin does;
ShareGroupDescribe for share groups), its committed offsets (OffsetFetch) or share-partition
start offsets (DescribeShareGroupOffsets), log offsets (ListOffsets on each partition's leader),
and the writes: OffsetCommit as an admin (generation -1, no member), DeleteGroups and
OffsetDelete on the coordinator; for share groups AlterShareGroupOffsets and
DeleteShareGroupOffsets there.

Every call is bounded by the tool's ``--timeout``; a timeout or a refusal is a `CommandError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Final, TypeVar

from broker.cli.admin import CommandError, Session, code
from broker.cli.groups_model import (
    TP,
    Coordinator,
    Description,
    GroupError,
    Listing,
    Member,
    consumer_description,
    decode_assignment,
    group_state,
    share_description,
)

METADATA, FIND_COORDINATOR, LIST_OFFSETS = 3, 10, 2
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 8, 9, 15, 16
DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_DESCRIBE = 42, 47, 69
SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 77, 90
ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 91, 92

NONE, UNKNOWN_TOPIC_OR_PARTITION, COORDINATOR_LOAD_IN_PROGRESS = 0, 3, 14
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNSUPPORTED_VERSION, GROUP_ID_NOT_FOUND = 15, 16, 35, 69
RETRIABLE: Final = frozenset(
    {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
)

# ListOffsets special timestamps
LATEST, EARLIEST = -1, -2

T = TypeVar("T")


class GroupAdmin:
    """The connections of one tool run: the bootstrap broker's and, lazily, one per node."""

    def __init__(
        self, session: Session, timeout_ms: int, client_id: str = "kafka-consumer-groups"
    ) -> None:
        self.boot = session
        self.timeout_ms = timeout_ms
        self.client_id = client_id
        self.nodes: dict[int, Session] = {}
        self.addresses: dict[int, tuple[str, int]] = {}

    def close(self) -> None:
        self.boot.close()
        for s in self.nodes.values():
            s.close()

    async def _bounded(self, what: str, aw: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(aw, self.timeout_ms / 1000)
        except TimeoutError:
            raise CommandError(
                f"org.apache.kafka.common.errors.TimeoutException: Timed out waiting for {what}"
            ) from None

    async def _retrying(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Kafka's admin retries a coordinator's transient errors (loading, moved, not
        available) until the timeout; other errors end the call."""

        async def loop() -> T:
            while True:
                try:
                    return await attempt()
                except GroupError as e:
                    if e.error not in RETRIABLE:
                        raise
                await asyncio.sleep(0.1)

        return await self._bounded(what, loop())

    async def call(self, session: Session, api_key: int, fields: dict[str, Any]) -> Any:
        return await self._bounded("a node assignment", session.call(api_key, fields))

    async def node(self, node_id: int) -> Session:
        if node_id not in self.nodes:
            if node_id not in self.addresses:
                await self.metadata([])
            if node_id not in self.addresses:
                raise CommandError(f"broker {node_id} is not in the cluster's metadata")
            self.nodes[node_id] = await self._bounded(
                "a connection",
                Session.open(
                    [self.addresses[node_id]], self.boot.props, self.client_id, "a broker"
                ),
            )
        return self.nodes[node_id]

    # --- metadata -------------------------------------------------------------------------

    async def metadata(self, topics: Sequence[str] | None) -> dict[str, dict[int, int] | None]:
        """Each topic asked for (None: all) -> partition -> leader id (-1: none); None for a
        topic the cluster does not know. Also learns the brokers' addresses."""
        resp = await self.call(
            self.boot,
            METADATA,
            {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        for b in resp.brokers:
            self.addresses[int(b.node_id)] = (str(b.host), int(b.port))
        out: dict[str, dict[int, int] | None] = {}
        for t in resp.topics:
            if code(t.error_code) == UNKNOWN_TOPIC_OR_PARTITION:
                out[str(t.name)] = None
            elif code(t.error_code):
                raise GroupError(code(t.error_code))
            else:
                out[str(t.name)] = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
        return out

    def serves(self, api_key: int) -> bool:
        """Whether the bootstrap broker advertises ``api_key`` (ApiVersions)."""
        return self.boot.conn.server_versions.get(api_key) is not None

    async def coordinator(self, group: str) -> Coordinator:
        async def find() -> Coordinator:
            while True:
                resp = await self.boot.call(
                    FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group]}
                )
                (c,) = resp.coordinators
                err = code(c.error_code)
                if err == NONE:
                    self.addresses[int(c.node_id)] = (str(c.host), int(c.port))
                    return Coordinator(int(c.node_id), str(c.host), int(c.port))
                if err not in RETRIABLE:
                    raise GroupError(err, c.error_message)
                await asyncio.sleep(0.1)

        return await self._bounded("a coordinator", find())

    async def on_coordinator(self, group: str, api_key: int, fields: dict[str, Any]) -> Any:
        c = await self.coordinator(group)
        return await self.call(await self.node(c.node_id), api_key, fields)

    # --- groups ---------------------------------------------------------------------------

    async def list_groups(self, states: Iterable[str], types: Iterable[str]) -> list[Listing]:
        """Every broker's groups, filtered on the brokers by state and type (ListGroups v4/v5)."""
        await self.metadata([])
        fields = {"states_filter": list(states), "types_filter": list(types)}
        found: dict[str, Listing] = {}
        for node_id in sorted(self.addresses):
            for g in await self._retrying("listGroups", partial(self._list_on, node_id, fields)):
                found[g.group_id] = g
        return list(found.values())

    async def _list_on(self, node_id: int, fields: dict[str, Any]) -> list[Listing]:
        resp = await self.call(await self.node(node_id), LIST_GROUPS, fields)
        if code(resp.error_code):
            raise GroupError(code(resp.error_code))
        return [
            Listing(
                str(g.group_id),
                str(g.protocol_type),
                str(getattr(g, "group_state", "") or ""),
                str(getattr(g, "group_type", "") or ""),
            )
            for g in resp.groups
        ]

    async def describe(self, group: str) -> Description:
        return await self._retrying("describeConsumerGroups", lambda: self._describe(group))

    async def _describe(self, group: str) -> Description:
        """ConsumerGroupDescribe; a group it does not know as a KIP-848 group (or a broker
        without it) is asked again with DescribeGroups, as Kafka's admin does."""
        c = await self.coordinator(group)
        session = await self.node(c.node_id)
        if session.conn.server_versions.get(CONSUMER_GROUP_DESCRIBE) is not None:
            resp = await self.call(
                session,
                CONSUMER_GROUP_DESCRIBE,
                {"group_ids": [group], "include_authorized_operations": False},
            )
            (g,) = resp.groups
            err = code(g.error_code)
            if err == NONE:
                return consumer_description(g, c)
            if err not in (GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION):
                raise GroupError(err, g.error_message)
        resp = await self.call(
            session, DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False}
        )
        (g,) = resp.groups
        err = code(g.error_code)
        if err:
            raise GroupError(err, None)
        protocol_type = str(g.protocol_type)
        if protocol_type not in ("", "consumer"):
            raise CommandError(
                f"java.lang.IllegalArgumentException: GroupId {group} is not a consumer group "
                f"({protocol_type})."
            )
        return Description(
            group,
            "Classic",
            group_state(str(g.group_state)),
            str(g.protocol_data),
            c,
            [
                Member(
                    str(m.member_id),
                    None if m.group_instance_id is None else str(m.group_instance_id),
                    str(m.client_id),
                    str(m.client_host),
                    decode_assignment(bytes(m.member_assignment)),
                )
                for m in g.members
            ],
        )

    async def committed(self, group: str) -> dict[TP, tuple[int, int | None]]:
        return await self._retrying("listConsumerGroupOffsets", lambda: self._committed(group))

    async def _committed(self, group: str) -> dict[TP, tuple[int, int | None]]:
        """The group's committed offsets: (topic, partition) -> (offset, leader epoch)."""
        resp = await self.on_coordinator(
            group,
            OFFSET_FETCH,
            {
                "groups": [{"group_id": group, "member_epoch": -1, "topics": None}],
                "require_stable": False,
            },
        )
        (g,) = resp.groups
        if code(g.error_code):
            raise GroupError(code(g.error_code))
        out: dict[TP, tuple[int, int | None]] = {}
        for t in g.topics:
            for p in t.partitions:
                if code(p.error_code):
                    raise GroupError(code(p.error_code))
                if int(p.committed_offset) >= 0:
                    epoch = int(p.committed_leader_epoch)
                    out[(str(t.name), int(p.partition_index))] = (
                        int(p.committed_offset),
                        epoch if epoch >= 0 else None,
                    )
        return out

    async def log_offsets(self, tps: Iterable[TP], timestamp: int) -> dict[TP, int | None]:
        """ListOffsets at ``timestamp`` (LATEST, EARLIEST or a time) on each partition's leader:
        (topic, partition) -> offset (-1: no record at or after that time); partitions with no
        leader or an error are left out."""
        tps = list(tps)
        leaders = await self.metadata(sorted({t for t, _ in tps}))
        by_leader: dict[int, list[TP]] = {}
        for t, p in tps:
            leader = (leaders.get(t) or {}).get(p, -1)
            if leader >= 0:
                by_leader.setdefault(leader, []).append((t, p))
        out: dict[TP, int | None] = {}
        for leader, parts in by_leader.items():
            topics: dict[str, list[dict[str, Any]]] = {}
            for t, p in parts:
                topics.setdefault(t, []).append(
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                )
            resp = await self.call(
                await self.node(leader),
                LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                    "timeout": self.timeout_ms,
                },
            )
            for rt in resp.topics:
                for rp in rt.partitions:
                    if code(rp.error_code) == NONE:
                        out[(str(rt.name), int(rp.partition_index))] = int(rp.offset)
        return out

    async def commit(self, group: str, offsets: Mapping[TP, int]) -> None:
        await self._retrying("alterConsumerGroupOffsets", lambda: self._commit(group, offsets))

    async def _commit(self, group: str, offsets: Mapping[TP, int]) -> None:
        """OffsetCommit as an admin (generation -1, no member id); any partition's error fails."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in sorted(offsets.items()):
            topics.setdefault(t, []).append(
                {
                    "partition_index": p,
                    "committed_offset": off,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        resp = await self.on_coordinator(
            group,
            OFFSET_COMMIT,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        for rt in resp.topics:
            for rp in rt.partitions:
                if code(rp.error_code):
                    raise GroupError(code(rp.error_code))

    async def delete_groups(self, groups: Sequence[str]) -> dict[str, int]:
        """DeleteGroups on each group's coordinator: group -> error code (0: deleted)."""
        out: dict[str, int] = {}
        for g in groups:
            try:
                out[g] = await self._retrying("deleteConsumerGroups", partial(self._delete, g))
            except GroupError as e:
                out[g] = e.error
        return out

    async def _delete(self, group: str) -> int:
        resp = await self.on_coordinator(group, DELETE_GROUPS, {"groups_names": [group]})
        (r,) = resp.results
        if code(r.error_code) in RETRIABLE:
            raise GroupError(code(r.error_code))
        return code(r.error_code)

    async def delete_offsets(self, group: str, tps: Iterable[TP]) -> tuple[int, dict[TP, int]]:
        parts = sorted(set(tps))
        return await self._retrying(
            "deleteConsumerGroupOffsets", lambda: self._delete_offsets(group, parts)
        )

    async def _delete_offsets(self, group: str, tps: Sequence[TP]) -> tuple[int, dict[TP, int]]:
        """OffsetDelete: the top-level error and each partition's."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append({"partition_index": p})
        resp = await self.on_coordinator(
            group,
            OFFSET_DELETE,
            {
                "group_id": group,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        if code(resp.error_code) in RETRIABLE:
            raise GroupError(code(resp.error_code))
        parts = {
            (str(rt.name), int(rp.partition_index)): code(rp.error_code)
            for rt in resp.topics
            for rp in rt.partitions
        }
        return code(resp.error_code), parts

    # --- share groups ---------------------------------------------------------------------

    async def describe_share(self, group: str) -> Description:
        return await self._retrying("describeShareGroups", lambda: self._describe_share(group))

    async def _describe_share(self, group: str) -> Description:
        """ShareGroupDescribe; an unknown group is a Dead group with no member, as Kafka's
        admin reports it (the tool prints "does not exist")."""
        c = await self.coordinator(group)
        resp = await self.call(
            await self.node(c.node_id),
            SHARE_GROUP_DESCRIBE,
            {"group_ids": [group], "include_authorized_operations": False},
        )
        (g,) = resp.groups
        err = code(g.error_code)
        if err == GROUP_ID_NOT_FOUND:
            return Description(group, "Share", "Dead", "", c, [], -1, -1)
        if err:
            raise GroupError(err, g.error_message)
        return share_description(g, c)

    async def share_offsets(self, group: str) -> dict[TP, tuple[int, int | None] | None]:
        return await self._retrying("listShareGroupOffsets", lambda: self._share_offsets(group))

    async def _share_offsets(self, group: str) -> dict[TP, tuple[int, int | None] | None]:
        """DescribeShareGroupOffsets for all the group's topics: (topic, partition) ->
        (start offset, leader epoch), or None for a partition without a start offset yet;
        partitions answered with an error are left out, as Kafka's admin leaves them."""
        resp = await self.on_coordinator(
            group,
            DESCRIBE_SHARE_GROUP_OFFSETS,
            {"groups": [{"group_id": group, "topics": None}]},
        )
        (g,) = resp.groups
        if code(g.error_code):
            raise GroupError(code(g.error_code), g.error_message)
        out: dict[TP, tuple[int, int | None] | None] = {}
        for t in g.topics:
            for p in t.partitions:
                if code(p.error_code):
                    continue
                start, epoch = int(p.start_offset), int(p.leader_epoch)
                tp = (str(t.topic_name), int(p.partition_index))
                out[tp] = None if start < 0 else (start, epoch if epoch >= 0 else None)
        return out

    async def alter_share_offsets(self, group: str, offsets: Mapping[TP, int]) -> None:
        await self._retrying(
            "alterShareGroupOffsets", lambda: self._alter_share_offsets(group, offsets)
        )

    async def _alter_share_offsets(self, group: str, offsets: Mapping[TP, int]) -> None:
        """AlterShareGroupOffsets: the group's error, else the first partition's, fails it (as
        the admin's ``all()``)."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in sorted(offsets.items()):
            topics.setdefault(t, []).append({"partition_index": p, "start_offset": off})
        resp = await self.on_coordinator(
            group,
            ALTER_SHARE_GROUP_OFFSETS,
            {
                "group_id": group,
                "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        if code(resp.error_code):
            raise GroupError(code(resp.error_code), resp.error_message)
        for rt in resp.responses:
            for rp in rt.partitions:
                if code(rp.error_code):
                    raise GroupError(code(rp.error_code), rp.error_message)

    async def delete_share_offsets(
        self, group: str, topics: Sequence[str]
    ) -> tuple[tuple[int, str | None], dict[str, tuple[int, str | None]]]:
        return await self._retrying(
            "deleteShareGroupOffsets", lambda: self._delete_share_offsets(group, topics)
        )

    async def _delete_share_offsets(
        self, group: str, topics: Sequence[str]
    ) -> tuple[tuple[int, str | None], dict[str, tuple[int, str | None]]]:
        """DeleteShareGroupOffsets: the group's (error, message) and each topic's."""
        resp = await self.on_coordinator(
            group,
            DELETE_SHARE_GROUP_OFFSETS,
            {"group_id": group, "topics": [{"topic_name": t} for t in topics]},
        )
        if code(resp.error_code) in RETRIABLE:
            raise GroupError(code(resp.error_code))
        per_topic = {
            str(r.topic_name): (code(r.error_code), r.error_message) for r in resp.responses
        }
        return (code(resp.error_code), resp.error_message), per_topic
