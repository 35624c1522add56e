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

    async def bump_leader_epoch(self, topic: str, partition: int, at_least: int) -> None:
        if self._is_active():
            await self._local.bump_leader_epoch(topic, partition, at_least)
            return
        topic_id = self._topic_id(topic)
        if topic_id is None:
            raise KeyError(f"unknown topic {topic}")
        body = {
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {"partition_index": partition, "min_leader_epoch": at_least - 1}
                    ],
                }
            ]
        }
        resp = await self._channel().request(BUMP_LEADER_EPOCHS, body, 0)
        codes = [p.error_code for t in resp.topics for p in t.partitions]
        if resp.error_code != ErrorCode.none or any(c != ErrorCode.none for c in codes):
            raise KeyError(
                f"cannot bump the leader epoch of {topic}-{partition}: "
                f"{ErrorCode(resp.error_code).name} {codes}"
            )

    async def clear_mirror_name(self, topic: str) -> None:
        # Only the active controller rewrites mirror.name; elsewhere the topic keeps its
        # ".removed" suffix (its STOPPED partitions are writable either way) until a node that
        # is the active controller finishes a partition of it.
        if self._is_active():
            await self._local.clear_mirror_name(topic)
