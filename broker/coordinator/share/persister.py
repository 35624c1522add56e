"""Share-partition state at the share coordinator, wherever it is (Kafka's persister).

The leader of a partition reads a share-partition's state when it first serves it and writes a
snapshot after each change it must not lose (acknowledgements, releases). The state lives on
the node leading the `__share_group_state` partition the key hashes to: in process when that is
this node, else with ReadShareGroupState (84) / WriteShareGroupState (85) to it. The topic is
created on first use. While the coordinator moves or loads (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) a call is retried for a bounded time,
then raised as `CoordinatorError`.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ...network.broker_clients import BrokerClients
from ...network.errors import NetworkError
from ..runtime import CoordinatorError
from .state_coordinator import ShareStateCoordinator
from .state_records import PersistedBatch, ShareKey, ShareSnapshot

log = logging.getLogger(__name__)

INITIALIZE_SHARE_GROUP_STATE: Final = 83
READ_SHARE_GROUP_STATE: Final = 84
WRITE_SHARE_GROUP_STATE: Final = 85
DELETE_SHARE_GROUP_STATE: Final = 86
_RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
    }
)


class NoStateTopic(CoordinatorError):
    """`__share_group_state` does not exist and cannot be created."""


class SharePersister:
    def __init__(
        self,
        local: ShareStateCoordinator,
        state_leader: Callable[[int], int | None],
        node_id: int,
        clients: BrokerClients,
        ensure_topic: Callable[[], Awaitable[bool]],
        retry_ms: int = 10_000,
    ) -> None:
        self.local = local
        self.state_leader = state_leader
        self.node_id = node_id
        self.clients = clients
        self.ensure_topic = ensure_topic
        self.retry_ms = retry_ms
        self._warned = False

    async def read(self, k: ShareKey, retry_ms: int | None = None) -> ShareSnapshot | None:
        """The stored state; None when there is none (start offset -1: uninitialized).
        ``retry_ms``: how long to retry while the coordinator moves (default: ``retry_ms``
        of the persister; an admin read answers sooner, with the error)."""
        found: ShareSnapshot | None = await self._retrying(lambda: self._read_once(k), retry_ms)
        return found

    async def write(self, k: ShareKey, snapshot: ShareSnapshot) -> None:
        await self._retrying(lambda: self._write_once(k, snapshot))

    async def initialize(self, k: ShareKey, state_epoch: int, start_offset: int) -> None:
        """A new state epoch at `start_offset`, nothing in flight (AlterShareGroupOffsets)."""
        await self._retrying(lambda: self._initialize_once(k, state_epoch, start_offset))

    async def delete(self, k: ShareKey) -> None:
        """Drop the stored state (DeleteShareGroupOffsets): the next leader starts anew."""
        await self._retrying(lambda: self._delete_once(k))

    async def _retrying(self, op: Callable[[], Awaitable[Any]], retry_ms: int | None = None) -> Any:
        deadline = time.monotonic() + (self.retry_ms if retry_ms is None else retry_ms) / 1000
        while True:
            try:
                return await op()
            except NoStateTopic:
                raise  # e.g. a replication factor above the live brokers: waiting will not help
            except CoordinatorError as exc:
                if exc.code not in _RETRIABLE or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(0.1)

    async def _node(self, k: ShareKey) -> int | None:
        """The coordinator node for the key; None: this one."""
        if not await self.ensure_topic():
            if not self._warned:
                self._warned = True
                log.warning(
                    "cannot create __share_group_state (share.coordinator.state.topic.*: a "
                    "replication factor above the live brokers?); share fetches fail until it can"
                )
            raise NoStateTopic(ErrorCode.coordinator_not_available, "cannot create the topic")
        node = self.state_leader(self.local.partition_for(k))
        if node is None or node < 0:
            raise CoordinatorError(ErrorCode.coordinator_not_available, "no state leader")
        return None if node == self.node_id else node

    async def _read_once(self, k: ShareKey) -> ShareSnapshot | None:
        node = await self._node(k)
        if node is None:
            return await self.local.read(k)
        body = {
            "group_id": k.group_id,
            "topics": [
                {
                    "topic_id": k.topic_id,
                    "partitions": [{"partition": k.partition, "leader_epoch": -1}],
                }
            ],
        }
        resp = await self._call(node, READ_SHARE_GROUP_STATE, body)
        for t in resp.results:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise CoordinatorError(ErrorCode(p.error_code), p.error_message)
                if int(p.start_offset) < 0:
                    return None
                return ShareSnapshot(
                    state_epoch=int(p.state_epoch),
                    leader_epoch=-1,
                    start_offset=int(p.start_offset),
                    batches=tuple(
                        PersistedBatch(
                            int(b.first_offset),
                            int(b.last_offset),
                            int(b.delivery_state),
                            int(b.delivery_count),
                        )
                        for b in p.state_batches
                    ),
                )
        raise CoordinatorError(ErrorCode.unknown_server_error, "no state in the answer")

    async def _write_once(self, k: ShareKey, s: ShareSnapshot) -> None:
        node = await self._node(k)
        if node is None:
            await self.local.write(k, s)
            return
        partition = {
            "partition": k.partition,
            "state_epoch": s.state_epoch,
            "leader_epoch": s.leader_epoch,
            "start_offset": s.start_offset,
            "state_batches": [
                {
                    "first_offset": b.first_offset,
                    "last_offset": b.last_offset,
                    "delivery_state": b.delivery_state,
                    "delivery_count": b.delivery_count,
                }
                for b in s.batches
            ],
        }
        body = {
            "group_id": k.group_id,
            "topics": [{"topic_id": k.topic_id, "partitions": [partition]}],
        }
        resp = await self._call(node, WRITE_SHARE_GROUP_STATE, body)
        for t in resp.results:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise CoordinatorError(ErrorCode(p.error_code), p.error_message)

    async def _initialize_once(self, k: ShareKey, state_epoch: int, start_offset: int) -> None:
        node = await self._node(k)
        if node is None:
            await self.local.initialize(k, state_epoch, start_offset)
            return
        part = {"partition": k.partition, "state_epoch": state_epoch, "start_offset": start_offset}
        await self._call_checked(node, INITIALIZE_SHARE_GROUP_STATE, k, part)

    async def _delete_once(self, k: ShareKey) -> None:
        node = await self._node(k)
        if node is None:
            await self.local.delete(k)
            return
        await self._call_checked(node, DELETE_SHARE_GROUP_STATE, k, {"partition": k.partition})

    async def _call_checked(
        self, node: int, api_key: int, k: ShareKey, partition: dict[str, Any]
    ) -> None:
        """One share-partition's request to the coordinator `node`; its error raised."""
        body = {
            "group_id": k.group_id,
            "topics": [{"topic_id": k.topic_id, "partitions": [partition]}],
        }
        resp = await self._call(node, api_key, body)
        for t in resp.results:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise CoordinatorError(ErrorCode(p.error_code), p.error_message)

    async def _call(self, node: int, api_key: int, body: dict[str, Any]) -> Any:
        try:
            return await self.clients.request(node, api_key, body, 0)
        except (NetworkError, TimeoutError, OSError) as e:
            log.info("share coordinator on broker %d: %s", node, e)
            raise CoordinatorError(ErrorCode.coordinator_not_available) from None
