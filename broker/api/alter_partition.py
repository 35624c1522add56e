"""AlterPartition (56) v2-v3: partition leaders change their ISR on the active controller.

v2 names topics by id (v0-v1, by name, are ZooKeeper-era and not served, as Kafka 4 serves
v2+); v3 gives each new ISR member's broker epoch (NewIsrWithEpochs), v2 only its id (then the
epoch is not checked). As the broker lifecycle APIs, and as its schema's "listeners" says in
Kafka 4, this API belongs to the controller listener: on another listener the connection is
closed; a principal without CLUSTER_ACTION on the cluster gets CLUSTER_AUTHORIZATION_FAILED; a
node that does not lead the metadata quorum answers NOT_CONTROLLER. Top-level errors carry no
topics, as Kafka's error response. The checks themselves: ``broker.controller.alter_partition``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.alter_partition import (
    UNCHECKED_EPOCH,
    AlterPartitionControl,
    AlterPartitionResult,
    PartitionAlter,
    PartitionResult,
    TopicAlter,
)
from ..quorum.driver import NotLeaderError
from ..security.acls import AclOperation
from ..security.authorizer import Authorizer
from .authz import cluster_allowed
from .broker_lifecycle import not_enabled
from .context import RequestContext
from .dispatcher import Api

ALTER_PARTITION: Final = 56
MIN_VERSION: Final = 2
MAX_VERSION: Final = 3


class AlterPartitionApi:
    def __init__(
        self,
        control: Callable[[], AlterPartitionControl | None],
        is_controller_listener: Callable[[RequestContext], bool],
        authorizer: Callable[[], Authorizer | None] = lambda: None,
    ) -> None:
        """``control()``: the active controller's AlterPartitionControl, None when this node
        does not lead the quorum."""
        self._control = control
        self._is_controller_listener = is_controller_listener
        self._authorizer = authorizer

    def apis(self) -> list[Api]:
        return [
            Api(
                ALTER_PARTITION,
                self.alter_partition,
                min_version=MIN_VERSION,
                max_version=MAX_VERSION,
            )
        ]

    async def alter_partition(self, ctx: RequestContext, req: Any) -> Any:
        if not self._is_controller_listener(ctx):
            raise not_enabled(ctx)
        cls = REGISTRY.spec(ALTER_PARTITION).response_type(ctx.api_version)
        if not cluster_allowed(self._authorizer(), ctx, AclOperation.CLUSTER_ACTION):
            return build(cls, _failed(ErrorCode.cluster_authorization_failed))
        control = self._control()
        if control is None:
            return build(cls, _failed(ErrorCode.not_controller))
        try:
            result = await control.alter_partition(
                int(req.broker_id), int(req.broker_epoch), parse_topics(req)
            )
        except NotLeaderError:
            return build(cls, _failed(ErrorCode.not_controller))
        return build(cls, response_fields(result))


def parse_topics(req: Any) -> tuple[TopicAlter, ...]:
    """The request's topics, v2 (NewIsr) or v3 (NewIsrWithEpochs)."""
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            with_epochs = getattr(p, "new_isr_with_epochs", None)
            if with_epochs is not None:
                isr = tuple((int(s.broker_id), int(s.broker_epoch)) for s in with_epochs)
            else:
                isr = tuple((int(b), UNCHECKED_EPOCH) for b in p.new_isr)
            parts.append(
                PartitionAlter(
                    int(p.partition_index),
                    int(p.leader_epoch),
                    isr,
                    int(p.partition_epoch),
                    int(p.leader_recovery_state),
                )
            )
        topics.append(TopicAlter(t.topic_id, tuple(parts)))
    return tuple(topics)


def response_fields(result: AlterPartitionResult) -> dict[str, Any]:
    if result.error != ErrorCode.none:
        return _failed(result.error)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "topics": [
            {"topic_id": t.topic_id, "partitions": [_partition(p) for p in t.partitions]}
            for t in result.topics
        ],
    }


def _partition(r: PartitionResult) -> dict[str, Any]:
    if r.state is None:  # Kafka sets only the index and the error; the rest keep their zeros
        return {"partition_index": r.partition, "error_code": r.error}
    s = r.state
    return {
        "partition_index": r.partition,
        "error_code": r.error,
        "leader_id": s.leader,
        "leader_epoch": s.leader_epoch,
        "isr": list(s.isr),
        "leader_recovery_state": 0,
        "partition_epoch": s.partition_epoch,
    }


def _failed(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "topics": []}
