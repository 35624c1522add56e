"""BrokerRegistration (62) v0-4 and BrokerHeartbeat (63) v0-1: brokers to the active controller.

The versions Apache Kafka 4.1 serves (BrokerHeartbeat v2, CordonedLogDirs, came after 4.1).
As in Kafka these APIs belong to the controller listener only ("listeners": ["controller"] in
their schemas): one arriving on another listener is not enabled there, and Kafka's socket server
closes the connection without an answer, as here. A node that does not lead the metadata quorum
answers NOT_CONTROLLER (the broker's channel then looks for the new leader); a principal without
CLUSTER_ACTION on the cluster gets CLUSTER_AUTHORIZATION_FAILED, as ControllerApis answers.

Fields this controller does not use are accepted and ignored: LogDirs, PreviousBrokerEpoch,
IsMigratingZkBroker (no ZooKeeper here), OfflineLogDirs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.cluster_control import ClusterControl
from ..quorum.driver import NotLeaderError
from ..security.acls import AclOperation
from ..security.authorizer import Authorizer
from .authz import cluster_allowed
from .context import RequestContext
from .dispatcher import Api
from .listener_apis import NotEnabledOnListener

BROKER_REGISTRATION: Final = 62
BROKER_HEARTBEAT: Final = 63
REGISTRATION_MAX_VERSION: Final = 4
HEARTBEAT_MAX_VERSION: Final = 1


def not_enabled(ctx: RequestContext) -> NotEnabledOnListener:
    """The error for an API of the controller listener that arrived on another one."""
    h = ctx.header
    return NotEnabledOnListener(
        h.api_key, h.api_version, h.correlation_id, h.client_id, ctx.listener
    )


class BrokerLifecycleApi:
    def __init__(
        self,
        cluster_control: Callable[[], ClusterControl | None],
        is_controller_listener: Callable[[RequestContext], bool],
        now_ms: Callable[[], int],
        authorizer: Callable[[], Authorizer | None] = lambda: None,
    ) -> None:
        """``cluster_control()``: the active controller's ClusterControl, None when this node
        does not lead the quorum."""
        self._control = cluster_control
        self._is_controller_listener = is_controller_listener
        self._now_ms = now_ms
        self._authorizer = authorizer

    def apis(self) -> list[Api]:
        return [
            Api(BROKER_REGISTRATION, self.register, max_version=REGISTRATION_MAX_VERSION),
            Api(BROKER_HEARTBEAT, self.heartbeat, max_version=HEARTBEAT_MAX_VERSION),
        ]

    def _refusal(self, ctx: RequestContext) -> ErrorCode | None:
        if not self._is_controller_listener(ctx):
            raise not_enabled(ctx)
        if not cluster_allowed(self._authorizer(), ctx, AclOperation.CLUSTER_ACTION):
            return ErrorCode.cluster_authorization_failed
        return None

    async def local(self, api_key: int, req: Any) -> Any:
        """The node's own registration/heartbeat when it is the active controller itself: served
        in process, as the node's own controller call (no listener, no principal)."""
        version = int(type(req).__version__)
        if api_key == BROKER_REGISTRATION:
            return await self._register(None, req, version)
        return await self._heartbeat(None, req, version)

    async def register(self, ctx: RequestContext, req: Any) -> Any:
        return await self._register(self._refusal(ctx), req, ctx.api_version)

    async def _register(self, code: ErrorCode | None, req: Any, version: int) -> Any:
        epoch = -1
        control = self._control()
        if code is None and control is None:
            code = ErrorCode.not_controller
        if code is None:
            assert control is not None
            try:
                code, epoch = await control.register(
                    int(req.broker_id),
                    req.cluster_id,
                    req.incarnation_id or uuid.UUID(int=0),
                    [
                        (lst.name, lst.host, int(lst.port), int(lst.security_protocol))
                        for lst in req.listeners
                    ],
                    req.rack,
                    {
                        f.name: (int(f.min_supported_version), int(f.max_supported_version))
                        for f in req.features
                    },
                    self._now_ms(),
                )
            except NotLeaderError:
                code, epoch = ErrorCode.not_controller, -1
        cls = REGISTRY.spec(BROKER_REGISTRATION).response_type(version)
        return build(cls, {"throttle_time": 0, "error_code": code, "broker_epoch": epoch})

    async def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        return await self._heartbeat(self._refusal(ctx), req, ctx.api_version)

    async def _heartbeat(self, code: ErrorCode | None, req: Any, version: int) -> Any:
        cls = REGISTRY.spec(BROKER_HEARTBEAT).response_type(version)
        control = self._control()
        if code is None and control is None:
            code = ErrorCode.not_controller
        if code is not None:
            return build(cls, _failed(code))
        assert control is not None
        try:
            res = await control.heartbeat(
                int(req.broker_id),
                int(req.broker_epoch),
                int(req.current_metadata_offset),
                bool(req.want_fence),
                bool(req.want_shut_down),
                self._now_ms(),
            )
        except NotLeaderError:
            return build(cls, _failed(ErrorCode.not_controller))
        if res.error != ErrorCode.none:
            return build(cls, _failed(res.error))
        return build(
            cls,
            {
                "throttle_time": 0,
                "error_code": ErrorCode.none,
                "is_caught_up": res.is_caught_up,
                "is_fenced": res.is_fenced,
                "should_shut_down": res.should_shutdown,
            },
        )


def _failed(code: ErrorCode) -> dict[str, Any]:
    # the schema's defaults, as Kafka's error responses carry them
    return {
        "throttle_time": 0,
        "error_code": code,
        "is_caught_up": False,
        "is_fenced": True,
        "should_shut_down": False,
    }
