"""UpdateFeatures (57) v0-2: change finalized feature levels (KIP-584, KIP-1022). The versions
Apache Kafka 4.1 serves; its schema lists the "broker" and "controller" listeners: a broker
forwards it to the active controller (``forwarding.FORWARDED_APIS``), a controller listener
serves it on the active controller (NOT_CONTROLLER elsewhere).

The controller checks and commits (``broker.controller.features``). As Kafka's controller
answers: a refused update fails the whole request with INVALID_UPDATE_VERSION and "The update
failed for all features since the following feature had an error: <why>"; v0-1 responses also
list each feature with the top-level result, v2 only the top-level error. v0 has no upgrade
type: AllowDowngrade picks a safe downgrade. ALTER on the cluster is required
(CLUSTER_AUTHORIZATION_FAILED otherwise). DescribeFeatures is ApiVersions' features
(``api_versions``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.features import (
    SAFE_DOWNGRADE,
    UPGRADE,
    FeatureControl,
    FeatureUpdate,
    UpdateRefused,
)
from ..quorum.driver import NotLeaderError
from ..security.acls import AclOperation
from ..security.authorizer import Authorizer
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api

UPDATE_FEATURES: Final = 57
MAX_VERSION: Final = 2
_FAILED_ALL: Final = "The update failed for all features since the following feature had an error: "


def updates_of(req: Any, version: int) -> list[FeatureUpdate]:
    out = []
    for u in req.feature_updates:
        if version == 0:
            kind = SAFE_DOWNGRADE if getattr(u, "allow_downgrade", False) else UPGRADE
        else:
            kind = int(u.upgrade_type)
        out.append(FeatureUpdate(u.feature, int(u.max_version_level), kind))
    return out


class FeaturesApi:
    def __init__(
        self,
        control: Callable[[], FeatureControl | None],
        authorizer: Callable[[], Authorizer | None] = lambda: None,
    ) -> None:
        """``control()``: the feature controller, None when this node cannot serve (it is not
        a controller)."""
        self._control = control
        self._authorizer = authorizer

    def apis(self) -> list[Api]:
        return [Api(UPDATE_FEATURES, self.update, max_version=MAX_VERSION)]

    async def update(self, ctx: RequestContext, req: Any) -> Any:
        version = ctx.api_version
        code, message = ErrorCode.none, None
        control = self._control()
        if not allowed_on_cluster(self._authorizer(), ctx, AclOperation.ALTER):
            code, message = ErrorCode.cluster_authorization_failed, None
        elif control is None:
            code = ErrorCode.not_controller
        else:
            try:
                await control.update(
                    updates_of(req, version), bool(getattr(req, "validate_only", False))
                )
            except UpdateRefused as e:
                code, message = ErrorCode.invalid_update_version, _FAILED_ALL + str(e)
            except NotLeaderError:
                code = ErrorCode.not_controller
        body: dict[str, Any] = {"throttle_time": 0, "error_code": code, "error_message": message}
        if version <= 1:
            ok = code == ErrorCode.none
            body["results"] = (
                [
                    {"feature": u.feature, "error_code": code, "error_message": None}
                    for u in req.feature_updates
                ]
                if ok
                else []
            )
        return build(REGISTRY.spec(UPDATE_FEATURES).response_type(version), body)
