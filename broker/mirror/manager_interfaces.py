"""What the mirror manager needs of the rest of the node: the mirror coordinator's partition
states (`StateStore`), the mirror fetchers (`Fetchers`) and the hosted partitions
(`Replicas`), all injected so the manager is
tested without sockets; and `SourceRefused`, which an alignment with the source raises when the
cluster that answered must not be mirrored.
"""

import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from ..metadata.mirror_states import MirrorState
from ..replication.partition import Partition

Key = tuple[str, int]  # (topic, partition)


class SourceRefused(Exception):
    """The cluster that answered as a mirror's source must not be mirrored (this cluster, or
    not the one the mirror recorded): the partition fails rather than truncate or fetch."""


class Replicas(Protocol):
    """The partitions this node hosts (`ReplicaManager`): the manager drives the ones it leads,
    and cuts and appends only through them."""

    def get(self, topic: str, partition: int) -> Partition | None: ...


class StateStore(Protocol):
    async def read_state(
        self, mirror: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[MirrorState, int | None]: ...
    async def write_state(
        self, mirror: str, topic_id: uuid.UUID, partition: int, new: MirrorState
    ) -> None: ...
    async def write_last_mirror_epoch(
        self, mirror: str, topic_id: uuid.UUID, partition: int, epoch: int
    ) -> None: ...
    async def write_partition(
        self,
        mirror: str,
        topic_id: uuid.UUID,
        partition: int,
        state: MirrorState | None,
        epoch: int | None,
    ) -> None:
        """A transition and an LME in one atomic write (None leaves either alone)."""
        ...


class Fetchers(Protocol):
    async def add(
        self,
        mirror: str,
        source_config: Mapping[str, str],
        partitions: Mapping[Key, uuid.UUID | None],
    ) -> None: ...
    async def remove(self, mirror: str, partitions: Any) -> None: ...


class Stepper(Protocol):
    """What the reconcile scheduling needs of the stepping (`partition_steps`)."""

    async def step(self, key: Key, topic_id: uuid.UUID) -> None:
        """Take the partition (led here) towards where its ``mirror.name`` wants it."""
        ...
