"""ReadMirrorStates v0 (key 100) and WriteMirrorStates v0 (key 101): KIP-1279 inter-broker RPCs
served by the mirror coordinator.

Topics travel by name and are keyed by id in ``__mirror_state``; names resolve through this
node's metadata image. A topic the image does not know, or a partition it does not have, gets
UNKNOWN_TOPIC_OR_PARTITION; coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
INVALID_MIRROR_STATES...) are per partition.

- Read with no topics lists every stored partition of the mirror on this node's loaded shards
  (topics this node no longer knows are left out).
- Write: State -1 (UNKNOWN) leaves the state alone; LastMirrorEpoch -1 leaves the LME alone;
  both present go in one atomic append. RemovedTopics tombstones the state and LME of every
  partition of each named topic (unknown names are nothing to remove); their per-partition
  outcome is reported among the response topics.

With an authorizer both need CLUSTER_ACTION on the cluster (brokers; CLUSTER_AUTHORIZATION_FAILED).
"""

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from ..coordinator.mirror import MirrorCoordinator
from ..coordinator.runtime import CoordinatorError
from ..metadata.image import MetadataImage
from ..metadata.mirror_states import MirrorState
from ..security.acls import AclOperation
from ..security.authorizer import Authorizer
from .authz import cluster_allowed
from .context import RequestContext
from .dispatcher import Api

READ_MIRROR_STATES, WRITE_MIRROR_STATES = 100, 101
_STATES = frozenset(int(s) for s in MirrorState)

log = logging.getLogger(__name__)


class MirrorStateApi:
    def __init__(
        self,
        coordinator: MirrorCoordinator,
        image: Callable[[], MetadataImage],
        authorizer: Authorizer | None = None,
    ) -> None:
        self.coordinator = coordinator
        self._image = image
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(100, self.read_mirror_states, max_version=0),
            Api(101, self.write_mirror_states, max_version=0),
        ]

    def _refused(self, key: int, ctx: RequestContext) -> Any:
        """The CLUSTER_AUTHORIZATION_FAILED answer, or None when the caller may proceed."""
        if cluster_allowed(self.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            return None
        cls = REGISTRY.spec(key).response_type(ctx.api_version)
        return build(
            cls,
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.cluster_authorization_failed),
                "error_message": "Cluster authorization failed.",
                "topics": [],
            },
        )

    def _partitions(self, topic: str) -> tuple[uuid.UUID, frozenset[int]] | None:
        t = self._image().topics.get(topic)
        return None if t is None else (t.topic_id, frozenset(t.partitions))

    async def read_mirror_states(self, ctx: RequestContext, req: Any) -> Any:
        if (refused := self._refused(READ_MIRROR_STATES, ctx)) is not None:
            return refused
        mirror = req.mirror_name
        if req.topics:
            topics = [await self._read_topic(mirror, t) for t in req.topics]
        else:
            topics = self._all_of(mirror)
        cls = REGISTRY.spec(READ_MIRROR_STATES).response_type(ctx.api_version)
        return build(
            cls, {"throttle_time": 0, "error_code": 0, "error_message": None, "topics": topics}
        )

    async def _read_topic(self, mirror: str, topic: Any) -> dict[str, Any]:
        known = self._partitions(topic.name)
        rows = []
        for p in topic.partitions:
            index = int(p.partition_index)
            row: dict[str, Any] = {
                "partition_index": index,
                "last_mirror_epoch": -1,
                "state": int(MirrorState.UNKNOWN),
                "error_code": 0,
            }
            if known is None or index not in known[1]:
                row["error_code"] = int(ErrorCode.unknown_topic_or_partition)
            else:
                try:
                    state, lme = await self.coordinator.read_state(mirror, known[0], index)
                except CoordinatorError as exc:
                    log.debug("ReadMirrorStates %s %s-%d: %s", mirror, topic.name, index, exc)
                    row["error_code"] = int(exc.code)
                else:
                    row.update(state=int(state), last_mirror_epoch=-1 if lme is None else lme)
            rows.append(row)
        return {"name": topic.name, "partitions": rows}

    def _all_of(self, mirror: str) -> list[dict[str, Any]]:
        names = self._image().topic_names
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (_, topic_id, partition), state, lme in self.coordinator.states(mirror):
            name = names.get(topic_id)
            if name is None:
                continue
            by_topic.setdefault(name, []).append(
                {
                    "partition_index": partition,
                    "last_mirror_epoch": -1 if lme is None else lme,
                    "state": int(state),
                    "error_code": 0,
                }
            )
        return [{"name": n, "partitions": rows} for n, rows in sorted(by_topic.items())]

    async def write_mirror_states(self, ctx: RequestContext, req: Any) -> Any:
        if (refused := self._refused(WRITE_MIRROR_STATES, ctx)) is not None:
            return refused
        mirror = req.mirror_name
        # all at once: the coordinator commits the writes of one shard together
        topics = list(await asyncio.gather(*(self._write_topic(mirror, t) for t in req.topics)))
        for name in req.removed_topics:
            removed = await self._remove_topic(mirror, name)
            if removed is not None:
                topics.append(removed)
        cls = REGISTRY.spec(WRITE_MIRROR_STATES).response_type(ctx.api_version)
        return build(
            cls, {"throttle_time": 0, "error_code": 0, "error_message": None, "topics": topics}
        )

    async def _write_topic(self, mirror: str, topic: Any) -> dict[str, Any]:
        known = self._partitions(topic.name)

        async def one(p: Any) -> dict[str, Any]:
            index = int(p.partition_index)
            code = 0
            if known is None or index not in known[1]:
                code = int(ErrorCode.unknown_topic_or_partition)
            elif int(p.state) not in _STATES:
                code = int(MirrorErrorCode.INVALID_MIRROR_STATES)
            else:
                state = MirrorState(int(p.state))
                epoch = int(p.last_mirror_epoch)
                try:
                    await self.coordinator.write_partition(
                        mirror,
                        known[0],
                        index,
                        None if state == MirrorState.UNKNOWN else state,
                        None if epoch == -1 else epoch,
                        topic_name=topic.name,
                    )
                except CoordinatorError as exc:
                    log.debug("WriteMirrorStates %s %s-%d: %s", mirror, topic.name, index, exc)
                    code = int(exc.code)
            return {"partition_index": index, "error_code": code}

        rows = await asyncio.gather(*(one(p) for p in topic.partitions))
        return {"name": topic.name, "partitions": list(rows)}

    async def _remove_topic(self, mirror: str, name: str) -> dict[str, Any] | None:
        known = self._partitions(name)
        if known is None:
            return None
        topic_id, partitions = known
        rows = []
        for index in sorted(partitions):
            code = 0
            try:
                await self.coordinator.delete(mirror, topic_id, index)
            except CoordinatorError as exc:
                code = int(exc.code)
            rows.append({"partition_index": index, "error_code": code})
        return {"name": name, "partitions": rows}
