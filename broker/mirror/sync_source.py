"""The source queries the metadata sync needs beyond `SourceClient`'s: consumer groups (ListGroups
on every source broker, FindCoordinator, OffsetFetch at the group's coordinator), share groups'
start offsets (DescribeShareGroupOffsets v0 at the group's coordinator), its ACLs
(DescribeAcls) and a careful "does this topic still exist" check (a topic is gone only when the
source says UNKNOWN_TOPIC_OR_PARTITION, never because of a transient error).

Requests go out at the highest version both sides support, except OffsetFetch, capped at v9:
v10 names topics by id only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from protocol.build import build
from protocol.errors import ProtocolError
from protocol.registry import REGISTRY, body_bytes, decode_body

from ..network.errors import NetworkError, UnsupportedVersionError
from ..security.acls import Acl, AclOperation, PatternType, PermissionType, ResourceType
from .source import SourceClient, SourceError

log = logging.getLogger(__name__)

OFFSET_FETCH: Final = 9
FIND_COORDINATOR: Final = 10
LIST_GROUPS: Final = 16
DESCRIBE_SHARE_GROUP_OFFSETS: Final = 90
DESCRIBE_ACLS: Final = 29
SECURITY_DISABLED: Final = 54  # DescribeAcls at a source without an authorizer
OFFSET_FETCH_MAX: Final = 9
OFFSET_FETCH_GROUPS_FROM: Final = 8  # OffsetFetch v8+ batches groups
FIND_COORDINATOR_BATCH_FROM: Final = 4
GROUP_KEY: Final = 0
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
NOT_COORDINATOR_CODES: Final = frozenset({14, 15, 16})  # load in progress, unavailable, not coord.


@dataclass(frozen=True, slots=True)
class SourceGroup:
    group_id: str
    protocol_type: str
    state: str  # "" when the source is too old to say
    group_type: str  # "classic", "consumer", "share"...; "" when the source is too old to say


@dataclass(frozen=True, slots=True)
class SourceOffset:
    offset: int
    leader_epoch: int
    metadata: str


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


class SyncSourceClient(SourceClient):
    """`SourceClient` plus the group and topic-existence queries of the metadata sync."""

    async def _to_node(self, node_id: int, api_key: int, fields: dict[str, Any]) -> tuple[int, Any]:
        try:
            result: tuple[int, Any] = await self.send(self.connection_for(node_id), api_key, fields)
        except UnsupportedVersionError:
            raise
        except NetworkError as e:
            raise SourceError(f"source broker {node_id}: {e}") from e
        return result

    async def missing_topics(self, names: Sequence[str]) -> set[str]:
        """Names the source positively reports as unknown (deleted), ignoring other errors."""
        if not names:
            return set()
        _, resp = await self.metadata(list(names))
        return {
            str(t.name)
            for t in resp.topics
            if t.name and _code(t.error_code) == UNKNOWN_TOPIC_OR_PARTITION
        }

    async def list_groups(self) -> list[SourceGroup]:
        """Groups of every source broker (each lists the groups it coordinates)."""
        brokers = await self.brokers()
        out: dict[str, SourceGroup] = {}
        for node_id in sorted(brokers):
            _, resp = await self._to_node(
                node_id, LIST_GROUPS, {"states_filter": (), "types_filter": ()}
            )
            code = _code(resp.error_code)
            if code:
                raise SourceError(f"ListGroups at source broker {node_id}: error {code}", code)
            for g in resp.groups:
                out[str(g.group_id)] = SourceGroup(
                    str(g.group_id),
                    str(g.protocol_type or ""),
                    str(getattr(g, "group_state", "") or ""),
                    str(getattr(g, "group_type", "") or ""),
                )
        return list(out.values())

    async def group_coordinators(self, group_ids: Sequence[str]) -> dict[str, int]:
        """group -> coordinator node id at the source; groups without one are left out."""
        if not group_ids:
            return {}
        version = await self._version(FIND_COORDINATOR)
        out: dict[str, int] = {}
        if version >= FIND_COORDINATOR_BATCH_FROM:
            _, resp = await self.send_any(
                FIND_COORDINATOR, {"key_type": GROUP_KEY, "coordinator_keys": list(group_ids)}
            )
            for c in resp.coordinators:
                if _code(c.error_code) == 0:
                    out[str(c.key)] = int(c.node_id)
            return out
        for gid in group_ids:
            _, resp = await self.send_any(FIND_COORDINATOR, {"key": gid, "key_type": GROUP_KEY})
            if _code(resp.error_code) == 0:
                out[gid] = int(resp.node_id)
        return out

    async def _version(self, api_key: int) -> int:
        for client in self.candidates():
            try:
                conn = await client.connection()
            except NetworkError:
                continue
            return conn.version_for(api_key)  # UnsupportedVersionError when the source lacks it
        raise SourceError(f"no source broker of {self.bootstrap_text()} answered")

    async def committed_offsets(
        self, node_id: int, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], SourceOffset]:
        """The group's committed offsets for ``topics`` (ask its coordinator ``node_id``);
        partitions without a committed offset are left out."""
        if not topics:
            return {}
        conn = await self.connection_for(node_id).connection()
        version = min(conn.version_for(OFFSET_FETCH), OFFSET_FETCH_MAX)
        topic_rows = [{"name": t, "partition_indexes": list(ps)} for t, ps in topics.items()]
        if version >= OFFSET_FETCH_GROUPS_FROM:
            fields: dict[str, Any] = {
                "groups": [
                    {
                        "group_id": group_id,
                        "member_id": None,
                        "member_epoch": -1,
                        "topics": topic_rows,
                    }
                ],
                "require_stable": False,
            }
        else:
            fields = {"group_id": group_id, "topics": topic_rows, "require_stable": False}
        resp = await self._send_at(node_id, conn, OFFSET_FETCH, version, fields)
        if version >= OFFSET_FETCH_GROUPS_FROM:
            found = [g for g in resp.groups if g.group_id == group_id]
            if not found:
                raise SourceError(f"OffsetFetch: no answer for group {group_id}")
            code, rows = _code(found[0].error_code), found[0].topics
        else:
            code, rows = _code(getattr(resp, "error_code", 0)), resp.topics
        if code:
            raise SourceError(f"OffsetFetch {group_id}: error {code}", code)
        out: dict[tuple[str, int], SourceOffset] = {}
        for t in rows:
            for p in t.partitions:
                if _code(p.error_code) or int(p.committed_offset) < 0:
                    continue
                out[(str(t.name), int(p.partition_index))] = SourceOffset(
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),
                    str(p.metadata or ""),
                )
        return out

    async def share_group_offsets(
        self, node_id: int, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], int]:
        """The share group's share-partition start offsets for ``topics`` (ask its coordinator
        ``node_id``); partitions without state (-1) or with an error are left out."""
        if not topics:
            return {}
        conn = await self.connection_for(node_id).connection()
        version = min(conn.version_for(DESCRIBE_SHARE_GROUP_OFFSETS), 0)
        fields: dict[str, Any] = {
            "groups": [
                {
                    "group_id": group_id,
                    "topics": [
                        {"topic_name": t, "partitions": list(ps)} for t, ps in topics.items()
                    ],
                }
            ]
        }
        resp = await self._send_at(node_id, conn, DESCRIBE_SHARE_GROUP_OFFSETS, version, fields)
        found = [g for g in resp.groups if g.group_id == group_id]
        if not found:
            raise SourceError(f"DescribeShareGroupOffsets: no answer for group {group_id}")
        code = _code(found[0].error_code)
        if code:
            raise SourceError(f"DescribeShareGroupOffsets {group_id}: error {code}", code)
        out: dict[tuple[str, int], int] = {}
        for t in found[0].topics:
            for p in t.partitions:
                if not _code(p.error_code) and int(p.start_offset) >= 0:
                    out[(str(t.topic_name), int(p.partition_index))] = int(p.start_offset)
        return out

    async def _send_at(
        self, node_id: int, conn: Any, api_key: int, version: int, fields: dict[str, Any]
    ) -> Any:
        spec = REGISTRY.spec(api_key)
        try:
            raw = await conn.send_raw(
                api_key, version, body_bytes(build(spec.request_type(version), fields))
            )
            return decode_body(spec.response_type(version), raw, 0, strict=False)
        except (NetworkError, ProtocolError) as e:
            raise SourceError(f"source broker {node_id}: {spec.name} v{version}: {e}") from e

    async def describe_acls(self) -> list[Acl]:
        """Every ACL of the source (DescribeAcls, match-all filter). A source without an
        authorizer raises SourceError with code SECURITY_DISABLED."""
        _, resp = await self.send_any(
            DESCRIBE_ACLS,
            {
                "resource_type_filter": ResourceType.ANY,
                "resource_name_filter": None,
                "pattern_type_filter": PatternType.ANY,
                "principal_filter": None,
                "host_filter": None,
                "operation": AclOperation.ANY,
                "permission_type": PermissionType.ANY,
            },
        )
        code = _code(resp.error_code)
        if code:
            why = f": {resp.error_message}" if resp.error_message else ""
            raise SourceError(f"DescribeAcls: error {code}{why}", code)
        return [
            Acl(
                int(r.resource_type),
                str(r.resource_name),
                int(r.pattern_type),
                str(a.principal),
                str(a.host),
                int(a.operation),
                int(a.permission_type),
            )
            for r in resp.resources
            for a in r.acls
        ]
