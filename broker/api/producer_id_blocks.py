"""AllocateProducerIds (67) v0: a broker asks the active controller for a block of producer ids.

Served by the node that leads the metadata quorum (others answer NOT_CONTROLLER, and the broker
asks again once it knows the new leader). The block is a ProducerIdsRecord committed before the
answer, so no id is ever handed out twice across the cluster, whichever node allocates it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..security.acls import AclOperation
from .authz import cluster_allowed
from .context import RequestContext
from .dispatcher import Api
from .services import Services

API_KEY = 67

# (broker id, broker epoch) -> (first id, block size); None: this node is not the controller
Allocate = Callable[[int, int], Awaitable[tuple[int, int]] | None]


class ProducerIdBlocksApi:
    def __init__(self, services: Services, allocate: Allocate) -> None:
        self.s = services
        self._allocate = allocate

    def apis(self) -> list[Api]:
        return [Api(API_KEY, self.allocate_producer_ids, max_version=0)]

    def _respond(self, ctx: RequestContext, code: ErrorCode, start: int, size: int) -> Any:
        cls = REGISTRY.spec(API_KEY).response_type(ctx.api_version)
        return build(
            cls,
            {
                "throttle_time": 0,
                "error_code": code,
                "producer_id_start": start,
                "producer_id_len": size,
            },
        )

    async def allocate_producer_ids(self, ctx: RequestContext, req: Any) -> Any:
        if not cluster_allowed(self.s.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            return self._respond(ctx, ErrorCode.cluster_authorization_failed, -1, 0)
        pending = self._allocate(int(req.broker_id), int(req.broker_epoch))
        if pending is None:
            return self._respond(ctx, ErrorCode.not_controller, -1, 0)
        start, size = await pending
        return self._respond(ctx, ErrorCode.none, start, size)
