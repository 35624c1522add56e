"""ElectLeaders v0-v2 (API key 43): preferred or unclean leader elections on the active
controller (``broker.controller.elections``).

A broker forwards the request to the active controller (``forwarding.FORWARDED_APIS``); the
controller answers what reaches it, NOT_CONTROLLER when it is not the active one. As Kafka's
ControllerApis: ALTER on the CLUSTER resource, or every partition asked for (and, from v1, the
top-level error) is CLUSTER_AUTHORIZATION_FAILED; an ElectionType other than 0 or 1 is
INVALID_REQUEST. v0 has no ElectionType: it asks for preferred elections.
"""

from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.elections import LeaderElections, UnknownElectionType, election_type
from ..security.acls import AclOperation
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .services import Services

API_KEY: Final = 43
VERSIONS: Final = (0, 2)


class ElectLeadersApi:
    def __init__(
        self, services: Services, elections: LeaderElections, is_active: Callable[[], bool]
    ) -> None:
        self.s = services
        self._elections = elections
        self._is_active = is_active

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [Api(API_KEY, self.elect_leaders, min_version=VERSIONS[0], max_version=VERSIONS[1])]

    async def elect_leaders(self, ctx: RequestContext, req: Any) -> Any:
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.ALTER):
            return _failed(ctx, req, ErrorCode.cluster_authorization_failed, None)
        if not self._is_active():
            return _failed(ctx, req, ErrorCode.not_controller, None)
        try:
            kind = election_type(getattr(req, "election_type", 0))
        except UnknownElectionType as e:
            return _failed(ctx, req, ErrorCode.invalid_request, str(e))
        asked = req.topic_partitions
        partitions = None if asked is None else [(t.topic, list(t.partitions)) for t in asked]
        results = await self._elections.elect_leaders(kind, partitions)
        return _response(
            ctx,
            ErrorCode.none,
            [
                {
                    "topic": topic,
                    "partition_result": [
                        {
                            "partition_id": a.partition,
                            "error_code": a.error,
                            "error_message": a.message,
                        }
                        for a in answers
                    ],
                }
                for topic, answers in results
            ],
        )


def _failed(ctx: RequestContext, req: Any, code: ErrorCode, message: str | None) -> Any:
    """The whole request refused: every partition asked for carries the error (Kafka's
    ElectLeadersRequest.getErrorResponse)."""
    return _response(
        ctx,
        code,
        [
            {
                "topic": t.topic,
                "partition_result": [
                    {"partition_id": p, "error_code": code, "error_message": message}
                    for p in t.partitions
                ],
            }
            for t in req.topic_partitions or ()
        ],
    )


def _response(ctx: RequestContext, code: ErrorCode, results: list[dict[str, Any]]) -> Any:
    cls = REGISTRY.spec(API_KEY).response_type(ctx.api_version)
    return build(cls, {"throttle_time": 0, "error_code": code, "replica_election_results": results})
