"""AlterPartitionReassignments v0-v1 (45) and ListPartitionReassignments v0 (46) on the active
controller (``broker.controller.reassignment``).

A broker forwards both to the active controller (``forwarding.FORWARDED_APIS``, as Kafka 4's
KafkaApis does); the controller answers what reaches it, NOT_CONTROLLER when it is not the active
one. As Kafka's ControllerApis: ALTER on the CLUSTER resource for 45, DESCRIBE for 46, else
CLUSTER_AUTHORIZATION_FAILED at the top and for every partition asked for. v1 of 45 carries
``allow_replication_factor_change`` (KIP-860) and echoes it in the response.
"""

from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.reassignment import Reassignments
from ..security.acls import AclOperation
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .error_response import error_response
from .services import Services

ALTER_REASSIGNMENTS: Final = 45
LIST_REASSIGNMENTS: Final = 46


class ReassignmentsApi:
    def __init__(
        self, services: Services, reassignments: Reassignments, is_active: Callable[[], bool]
    ) -> None:
        self.s = services
        self._reassignments = reassignments
        self._is_active = is_active

    def apis(self) -> list[Api]:
        return [
            Api(ALTER_REASSIGNMENTS, self.alter, min_version=0, max_version=1),
            Api(LIST_REASSIGNMENTS, self.list, min_version=0, max_version=0),
        ]

    def _refusal(self, ctx: RequestContext, op: AclOperation) -> ErrorCode | None:
        if not allowed_on_cluster(self.s.authorizer, ctx, op):
            return ErrorCode.cluster_authorization_failed
        if not self._is_active():
            return ErrorCode.not_controller
        return None

    async def alter(self, ctx: RequestContext, req: Any) -> Any:
        refused = self._refusal(ctx, AclOperation.ALTER)
        if refused is not None:
            return error_response(ALTER_REASSIGNMENTS, ctx.api_version, req, refused, None)
        allow_rf_change = bool(getattr(req, "allow_replication_factor_change", True))
        request = [
            (
                t.name,
                [
                    (
                        int(p.partition_index),
                        None if p.replicas is None else [int(r) for r in p.replicas],
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
        answers = await self._reassignments.alter(request, allow_rf_change)
        fields: dict[str, Any] = {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "error_message": None,
            "responses": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": a.partition,
                            "error_code": a.error,
                            "error_message": a.message,
                        }
                        for a in out
                    ],
                }
                for topic, out in answers
            ],
        }
        if ctx.api_version >= 1:
            fields["allow_replication_factor_change"] = allow_rf_change
        cls = REGISTRY.spec(ALTER_REASSIGNMENTS).response_type(ctx.api_version)
        return build(cls, fields)

    async def list(self, ctx: RequestContext, req: Any) -> Any:
        refused = self._refusal(ctx, AclOperation.DESCRIBE)
        if refused is not None:
            return error_response(LIST_REASSIGNMENTS, ctx.api_version, req, refused, None)
        asked = (
            None
            if req.topics is None
            else [(t.name, [int(p) for p in t.partition_indexes]) for t in req.topics]
        )
        found = self._reassignments.list(asked)
        cls = REGISTRY.spec(LIST_REASSIGNMENTS).response_type(ctx.api_version)
        return build(
            cls,
            {
                "throttle_time": 0,
                "error_code": ErrorCode.none,
                "error_message": None,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": o.partition,
                                "replicas": list(o.replicas),
                                "adding_replicas": list(o.adding),
                                "removing_replicas": list(o.removing),
                            }
                            for o in ongoing
                        ],
                    }
                    for topic, ongoing in found
                ],
            },
        )
