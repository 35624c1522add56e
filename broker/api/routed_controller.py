"""The node's own controller calls, wherever the active controller is.

Clients' admin requests reach the active controller through forwarding (``forwarding.py``); this
is for what the node itself asks of the controller: internal topics created on first use
(``__consumer_offsets``, ``__transaction_state``, ``__mirror_state``), auto-created topics and
producer id blocks. On the node that leads the metadata quorum the local ``Controller`` serves
them; elsewhere they go as CreateTopics (19) and AllocateProducerIds (67) over the controller
channel, as a Kafka broker's AutoTopicCreationManager and ProducerIdManager do. Everything else
is the local controller's (``__getattr__``): only the active controller runs those paths.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ..controller.controller import Controller, TopicResult, TopicSpec

CREATE_TOPICS: Final = 19
ALLOCATE_PRODUCER_IDS: Final = 67
BUMP_LEADER_EPOCHS: Final = 105
_CREATE_TOPICS_VERSION: Final = 7
_TIMEOUT_MS: Final = 30_000


class RoutedController:
    def __init__(
        self,
        local: Controller,
        node_id: int,
        is_active: Callable[[], bool],
        channel: Callable[[], Any],  # -> broker.quorum.controller_channel.ControllerChannel
        broker_epoch: Callable[[], int],
    ) -> None:
        self._local = local
        self._node_id = node_id
        self._is_active = is_active
        self._channel = channel
        self._broker_epoch = broker_epoch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local, name)

    async def create_topics(
        self, specs: Sequence[TopicSpec], validate_only: bool
    ) -> list[TopicResult]:
        if self._is_active():
            return await self._local.create_topics(specs, validate_only)
        body = {
            "topics": [_creatable(spec) for spec in specs],
            "timeout": _TIMEOUT_MS,
            "validate_only": validate_only,
        }
        try:
            resp = await self._channel().request(CREATE_TOPICS, body, _CREATE_TOPICS_VERSION)
        except TimeoutError as e:
            return [TopicResult(s.name, ErrorCode.request_timed_out, str(e)) for s in specs]
        out = []
        for t in resp.topics:
            out.append(
                TopicResult(
                    t.name,
                    ErrorCode(t.error_code),
                    t.error_message,
                    t.topic_id,
                    t.num_partitions,
                    t.replication_factor,
                )
            )
        return out

    async def allocate_producer_ids(
        self, broker_epoch: int, broker_id: int | None = None
    ) -> tuple[int, int]:
        if self._is_active():
            return await self._local.allocate_producer_ids(broker_epoch, broker_id)
        resp = await self._channel().request(
            ALLOCATE_PRODUCER_IDS,
            {"broker_id": self._node_id, "broker_epoch": self._broker_epoch()},
            0,
        )
        if resp.error_code != ErrorCode.none:
            raise RuntimeError(
                f"the controller refused a producer id block: {ErrorCode(resp.error_code).name}"
            )
        return int(resp.producer_id_start), int(resp.producer_id_len)


def _creatable(spec: TopicSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "num_partitions": spec.num_partitions,
        "replication_factor": spec.replication_factor,
        "assignments": [
            {"partition_index": p, "broker_ids": list(reps)}
            for p, reps in sorted((spec.assignments or {}).items())
        ],
        "configs": [{"name": k, "value": v} for k, v in spec.configs.items()],
    }


_BUMP_GATHER_S: Final = 0.005


class RoutedMirrorController:
    """The mirror manager's controller calls (STOPPING: BumpLeaderEpochs, 105, then the topic
    leaving its mirror) from whichever node leads the mirror partition."""

    def __init__(
        self,
        local: Any,  # broker.controller.mirrors.MirrorController
        is_active: Callable[[], bool],
        channel: Callable[[], Any],
        topic_id: Callable[[str], Any],
    ) -> None:
        self._local = local
        self._is_active = is_active
        self._channel = channel
        self._topic_id = topic_id
        # partitions waiting for the next BumpLeaderEpochs: (topic, partition) -> (epoch, waiters)
        self._bumps: dict[tuple[str, int], tuple[int, list[asyncio.Future[None]]]] = {}
        self._bump_task: asyncio.Task[None] | None = None

    async def bump_leader_epoch(self, topic: str, partition: int, at_least: int) -> None:
        """Make the partition's leader epoch at least ``at_least``. Calls made while a request
        is being put together go in the same one (BumpLeaderEpochs takes many partitions, and
        the controller commits them as one batch): a failover of a thousand partitions is one
        or two metadata commits, not a thousand."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        key = (topic, partition)
        prev = self._bumps.get(key)
        self._bumps[key] = (
            max(at_least, prev[0]) if prev else at_least,
            [*(prev[1] if prev else ()), fut],
        )
        if self._bump_task is None or self._bump_task.done():
            self._bump_task = asyncio.get_running_loop().create_task(self._send_bumps())
        await fut

    async def _send_bumps(self) -> None:
        while self._bumps:
            await asyncio.sleep(_BUMP_GATHER_S)  # let the other partitions of this moment join
            batch, self._bumps = self._bumps, {}
            try:
                errors = await self._bump_batch({k: v[0] for k, v in batch.items()})
            except Exception as e:  # the controller unreachable: every caller retries later
                errors = {k: f"cannot bump the leader epoch of {k[0]}-{k[1]}: {e}" for k in batch}
            for key, (_epoch, futures) in batch.items():
                for fut in futures:
                    if fut.done():
                        continue
                    if key in errors:
                        fut.set_exception(KeyError(errors[key]))
                    else:
                        fut.set_result(None)

    async def _bump_batch(self, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], str]:
        """One request for every partition in ``wanted``; the error text of each that failed."""
        errors: dict[tuple[str, int], str] = {}
        by_id: dict[Any, list[tuple[str, int, int]]] = {}
        for (topic, partition), at_least in wanted.items():
            topic_id = self._topic_id(topic)
            if topic_id is None:
                errors[(topic, partition)] = f"unknown topic {topic}"
                continue
            by_id.setdefault(topic_id, []).append((topic, partition, at_least))
        if not by_id:
            return errors
        if self._is_active():
            results = await self._local.bump_leader_epochs(
                [(tid, p, at_least - 1) for tid, rows in by_id.items() for _t, p, at_least in rows]
            )
            names = {tid: rows[0][0] for tid, rows in by_id.items()}
            for r in results:
                if r.error != ErrorCode.none:
                    key = (names.get(r.topic_id, r.topic), r.partition)
                    errors[key] = f"cannot bump the leader epoch of {key[0]}-{key[1]}: {r.error!r}"
            return errors
        body = {
            "topics": [
                {
                    "topic_id": tid,
                    "partitions": [
                        {"partition_index": p, "min_leader_epoch": at_least - 1}
                        for _t, p, at_least in rows
                    ],
                }
                for tid, rows in by_id.items()
            ]
        }
        resp = await self._channel().request(BUMP_LEADER_EPOCHS, body, 0)
        names = {tid: rows[0][0] for tid, rows in by_id.items()}
        for t in resp.topics:
            for part in t.partitions:
                if resp.error_code != ErrorCode.none or part.error_code != ErrorCode.none:
                    code = part.error_code or resp.error_code
                    key = (names.get(t.topic_id, "?"), part.partition_index)
                    errors[key] = (
                        f"cannot bump the leader epoch of {key[0]}-{key[1]}: {ErrorCode(code).name}"
                    )
        return errors

    async def clear_mirror_name(self, topic: str) -> None:
        # Only the active controller rewrites mirror.name; elsewhere the topic keeps its
        # ".removed" suffix (its STOPPED partitions are writable either way) until a node that
        # is the active controller finishes a partition of it.
        if self._is_active():
            await self._local.clear_mirror_name(topic)
