"""What mirror metadata sync needs of the source cluster and of this node, as protocols: the
real implementations (`SyncSourceClient`, the controller, the group and share coordinators, the
ACL controller) or fakes in tests.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from ..controller.controller import ConfigChange
from ..coordinator.group.shard import CommitParams
from ..coordinator.share.state_records import ShareKey
from ..security.acls import Acl
from . import topic_discovery
from .sync_source import SourceGroup, SourceOffset


class SyncSource(Protocol):
    """What a refresh needs of the source (`SyncSourceClient`; fakes in tests)."""

    async def cluster_id(self) -> str | None: ...
    async def api_versions(self) -> dict[int, tuple[int, int]]: ...
    async def topics(self, names: Sequence[str] | None = None) -> Mapping[str, Any]: ...
    async def missing_topics(self, names: Sequence[str]) -> set[str]: ...
    async def topic_configs(self, names: Sequence[str]) -> Mapping[str, Mapping[str, str]]: ...
    async def list_groups(self) -> list[SourceGroup]: ...
    async def group_coordinators(self, group_ids: Sequence[str]) -> dict[str, int]: ...
    async def committed_offsets(
        self, node_id: int, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], SourceOffset]: ...
    async def share_group_offsets(
        self, node_id: int, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], int]: ...
    async def describe_acls(self) -> list[Acl]: ...
    async def close(self) -> None: ...


class TopicController(Protocol):
    async def create_partitions(
        self, requests: Sequence[tuple[str, int, list[list[int]] | None]], validate_only: bool
    ) -> list[Any]: ...
    async def alter_configs(
        self, changes: Sequence[ConfigChange], validate_only: bool
    ) -> list[Any]: ...
    def validate_topic_config(self, key: str, value: str) -> str: ...


class MirrorTopics(topic_discovery.Adder, Protocol):
    async def remove_topics(self, mirror: str, names: Sequence[str]) -> Any: ...


class AclStore(Protocol):
    """`broker.controller.acls.AclController`: the ACLs a mirror owns made equal to ``wanted``."""

    async def sync_mirror_acls(self, mirror: str, wanted: set[Acl]) -> Any: ...


class Groups(Protocol):
    async def describe_group(self, group_id: str) -> Any: ...
    async def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> tuple[ErrorCode, list[tuple[str, list[Any]]]]: ...
    async def commit_offsets(self, p: CommitParams) -> list[ErrorCode]: ...


ShareOutcome = tuple[ErrorCode, str | None]


class ShareOffsets(Protocol):
    """`broker.coordinator.share.offsets_admin.ShareOffsetsAdmin` (None: share groups off)."""

    async def alterable(self, group_id: str) -> ErrorCode: ...
    async def start_offset(self, k: ShareKey) -> int | None: ...
    async def alter(
        self, group_id: str, starts: Mapping[ShareKey, int]
    ) -> tuple[ShareOutcome, dict[ShareKey, ShareOutcome]]: ...


SourceFactory = Callable[[Mapping[str, str], str, int], SyncSource]
