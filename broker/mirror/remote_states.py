"""Mirror partition states kept by the ``__mirror_state`` coordinator wherever it is.

A mirror partition's state lives in the ``__mirror_state`` partition its key hashes to, on the
node leading that partition (KIP-1279). The mirror manager of the node leading the mirror
partition reads and writes it: in process when the coordinator is this node, else with
ReadMirrorStates (100) / WriteMirrorStates (101) to that node, as the KIP has remote callers do;
the writes of one moment to one node go in one request (the node commits them together),
without waiting for the answer to the request before.
A coordinator that cannot be found or reached is COORDINATOR_NOT_AVAILABLE, which the manager
retries on its next pass. Everything else is the local coordinator's (``__getattr__``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import error_code

from ..coordinator.runtime import CoordinatorError
from ..metadata.mirror_states import MirrorState
from ..network.broker_clients import BrokerClients
from ..network.errors import NetworkError

log = logging.getLogger(__name__)

READ_MIRROR_STATES: Final = 100
WRITE_MIRROR_STATES: Final = 101

# __mirror_state partition -> the broker leading it (None or -1: none now)
StateLeader = Callable[[int], int | None]
# topic id -> its name in this node's metadata (None: unknown here)
TopicName = Callable[[uuid.UUID], str | None]
# a write waiting for the next WriteMirrorStates to its node: (topic name, row, its outcome)
_Outgoing = tuple[str, dict[str, Any], "asyncio.Future[None]"]


class RoutedMirrorStates:
    def __init__(
        self,
        local: Any,  # broker.coordinator.mirror.MirrorCoordinator
        state_leader: StateLeader,
        topic_name: TopicName,
        node_id: int,
        clients: BrokerClients,
    ) -> None:
        self._local = local
        self._state_leader = state_leader
        self._topic_name = topic_name
        self._node_id = node_id
        self._clients = clients
        # writes for the next WriteMirrorStates to each (node, mirror), and the task sending it
        self._outgoing: dict[tuple[int, str], list[_Outgoing]] = {}
        self._senders: dict[tuple[int, str], asyncio.Task[None]] = {}
        # partitions with a write in flight to each (node, mirror), and the requests sending
        self._inflight: dict[tuple[int, str], set[tuple[str, int]]] = {}
        self._batches: set[asyncio.Task[None]] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local, name)

    def _remote(self, mirror: str, topic_id: uuid.UUID, partition: int) -> tuple[int, str] | None:
        """(coordinator node, topic name) when the coordinator is another node; None: here."""
        state_partition = self._local.partition_for(mirror, topic_id, partition)
        node = self._state_leader(state_partition)
        if node is None or node < 0:
            raise CoordinatorError(
                ErrorCode.coordinator_not_available,
                f"__mirror_state-{state_partition} has no leader",
            )
        if node == self._node_id:
            return None
        name = self._topic_name(topic_id)
        if name is None:
            raise CoordinatorError(ErrorCode.unknown_topic_or_partition)
        return node, name

    async def _call(self, node: int, api_key: int, body: dict[str, Any]) -> Any:
        try:
            resp = await self._clients.request(node, api_key, body, 0)
        except (NetworkError, TimeoutError, OSError) as e:
            log.info("mirror state coordinator on broker %d: %s", node, e)
            raise CoordinatorError(ErrorCode.coordinator_not_available) from None
        if resp.error_code != ErrorCode.none:
            code = error_code(int(resp.error_code))
            raise CoordinatorError(code, f"{resp.error_message or code.name} (broker {node})")
        return resp

    async def read_state(
        self, mirror: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[MirrorState, int | None]:
        remote = self._remote(mirror, topic_id, partition)
        if remote is None:
            found: tuple[MirrorState, int | None] = await self._local.read_state(
                mirror, topic_id, partition
            )
            return found
        node, name = remote
        body = {
            "mirror_name": mirror,
            "topics": [{"name": name, "partitions": [{"partition_index": partition}]}],
        }
        resp = await self._call(node, READ_MIRROR_STATES, body)
        for t in resp.topics:
            for p in t.partitions:
                if p.partition_index != partition:
                    continue
                if p.error_code != ErrorCode.none:
                    code = error_code(int(p.error_code))
                    raise CoordinatorError(code, f"{code.name} from broker {node}")
                lme = int(p.last_mirror_epoch)
                return MirrorState(int(p.state)), None if lme < 0 else lme
        raise CoordinatorError(ErrorCode.unknown_server_error, "no state in the answer")

    async def write_partition(
        self,
        mirror: str,
        topic_id: uuid.UUID,
        partition: int,
        state: MirrorState | None,
        epoch: int | None,
        topic_name: str | None = None,
    ) -> None:
        remote = self._remote(mirror, topic_id, partition)
        if remote is None:
            await self._local.write_partition(mirror, topic_id, partition, state, epoch, topic_name)
            return
        node, name = remote
        row = {
            "partition_index": partition,
            "last_mirror_epoch": -1 if epoch is None else epoch,
            "state": int(MirrorState.UNKNOWN if state is None else state),
        }
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._outgoing.setdefault((node, mirror), []).append((name, row, done))
        self._start_sender(node, mirror)
        await done

    def _start_sender(self, node: int, mirror: str) -> None:
        sender = self._senders.get((node, mirror))
        if sender is None or sender.done():
            self._senders[(node, mirror)] = asyncio.get_running_loop().create_task(
                self._send_writes(node, mirror)
            )

    async def _send_writes(self, node: int, mirror: str) -> None:
        """One WriteMirrorStates for every write to ``node`` of this moment, sent without
        waiting for the answer to the one before (the node commits them together). A
        partition with a write in flight waits for its answer, so its writes stay in order."""
        key = (node, mirror)
        inflight = self._inflight.setdefault(key, set())
        while self._outgoing.get(key):
            await asyncio.sleep(0)
            queue = self._outgoing.get(key, [])
            batch: list[_Outgoing] = []
            later: list[_Outgoing] = []
            seen: set[tuple[str, int]] = set(inflight)
            for item in queue:
                pk = (item[0], int(item[1]["partition_index"]))
                (later if pk in seen else batch).append(item)
                seen.add(pk)
            self._outgoing[key] = later
            if not batch:
                return  # all wait for an answer; `_send_batch` starts the next round
            inflight.update((name, int(row["partition_index"])) for name, row, _ in batch)
            task = asyncio.get_running_loop().create_task(self._send_batch(node, mirror, batch))
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)

    async def _send_batch(self, node: int, mirror: str, batch: list[_Outgoing]) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        for name, row, _done in batch:
            topics.setdefault(name, []).append(row)
        body = {
            "mirror_name": mirror,
            "topics": [{"name": n, "partitions": rows} for n, rows in topics.items()],
            "removed_topics": [],
        }
        codes: dict[tuple[str, int], int] = {}
        failure: CoordinatorError | None = None
        t0 = time.monotonic()
        try:
            resp = await self._call(node, WRITE_MIRROR_STATES, body)
            for t in resp.topics:
                for p in t.partitions:
                    codes[(t.name, int(p.partition_index))] = int(p.error_code)
        except CoordinatorError as e:
            failure = e
        except BaseException as e:  # cancelled (closing) or a bug: no writer waits forever
            failure = CoordinatorError(ErrorCode.coordinator_not_available, str(e))
            raise
        finally:
            log.debug(
                "WriteMirrorStates to %d: %d writes in %.0f ms",
                node,
                len(batch),
                (time.monotonic() - t0) * 1000,
            )
            inflight = self._inflight.get((node, mirror), set())
            for name, row, done in batch:
                pk = (name, int(row["partition_index"]))
                inflight.discard(pk)
                if done.done():
                    continue
                code = codes.get(pk, ErrorCode.none)
                if failure is not None:
                    done.set_exception(failure)
                elif code != ErrorCode.none:
                    err = error_code(code)  # KIP-1279's codes too (INVALID_MIRROR_STATES)
                    done.set_exception(CoordinatorError(err, f"{err.name} from broker {node}"))
                else:
                    done.set_result(None)
            if self._outgoing.get((node, mirror)):
                self._start_sender(node, mirror)

    async def write_state(
        self,
        mirror: str,
        topic_id: uuid.UUID,
        partition: int,
        new: MirrorState,
        topic_name: str | None = None,
    ) -> None:
        await self.write_partition(mirror, topic_id, partition, new, None, topic_name)

    async def write_last_mirror_epoch(
        self, mirror: str, topic_id: uuid.UUID, partition: int, epoch: int
    ) -> None:
        await self.write_partition(mirror, topic_id, partition, None, epoch)
