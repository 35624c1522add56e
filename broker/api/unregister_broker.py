"""UnregisterBroker (64) v0: remove a broker's registration (decommissioning, KIP-631). The
version Apache Kafka 4.1 serves; its schema lists the "broker" and "controller" listeners: a
broker forwards it to the active controller (``forwarding.FORWARDED_APIS``), a controller
listener serves it on the active controller (NOT_CONTROLLER elsewhere).

As Kafka's controller: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); an id that
is not registered gets BROKER_ID_NOT_REGISTERED; otherwise the broker leaves every ISR and an
UnregisterBrokerRecord removes it from the image (``ClusterControl.unregister``). A broker that
is still running registers again on its next heartbeat: decommissioning stops it first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.cluster_control import ClusterControl
from ..quorum.driver import NotLeaderError
from ..security.acls import AclOperation
from ..security.authorizer import Authorizer
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api

UNREGISTER_BROKER: Final = 64


class UnregisterBrokerApi:
    def __init__(
        self,
        cluster_control: Callable[[], ClusterControl | None],
        authorizer: Callable[[], Authorizer | None] = lambda: None,
    ) -> None:
        """``cluster_control()``: the active controller's, None when this node does not lead."""
        self._control = cluster_control
        self._authorizer = authorizer

    def apis(self) -> list[Api]:
        return [Api(UNREGISTER_BROKER, self.unregister, max_version=0)]

    async def unregister(self, ctx: RequestContext, req: Any) -> Any:
        code: ErrorCode = ErrorCode.none
        message: str | None = None
        control = self._control()
        if not allowed_on_cluster(self._authorizer(), ctx, AclOperation.ALTER):
            code = ErrorCode.cluster_authorization_failed
        elif control is None:
            code = ErrorCode.not_controller
        else:
            try:
                code, message = await control.unregister(int(req.broker_id))
            except NotLeaderError:
                code = ErrorCode.not_controller
        return build(
            REGISTRY.spec(UNREGISTER_BROKER).response_type(ctx.api_version),
            {"throttle_time": 0, "error_code": code, "error_message": message},
        )
