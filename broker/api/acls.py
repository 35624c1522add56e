"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v1-v3 (Kafka 4 dropped v0).

As Apache Kafka's broker: the caller needs DESCRIBE (DescribeAcls) or ALTER (Create/DeleteAcls)
on the CLUSTER resource (CLUSTER_AUTHORIZATION_FAILED otherwise); with no authorizer configured
(``authorizer.class.name`` empty) every request is answered SECURITY_DISABLED, per creation or per
filter. Filters follow Kafka's semantics (`broker.security.acls`); a filter with UNKNOWN or
unknown codes is INVALID_REQUEST (Kafka closes the connection on those; an error is kinder).
CreateAcls refuses an ACL with INVALID_REQUEST and Kafka's message when its resource type, pattern
type (LITERAL or PREFIXED), operation or permission is unusable, its name is empty, a CLUSTER
resource is not named ``kafka-cluster``, or its principal is not ``Type:name``. Resource type
CLUSTER_MIRROR (8, KIP-1279) is accepted. ACLs are metadata records (`controller.acls`), so they
survive restarts, and the response is sent once they are committed.
"""

from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.acls import AclController
from ..security.acls import Acl, AclFilter, AclOperation, PatternType, filter_error
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .services import Services

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
VERSIONS: Final = (1, 3)
_NO_AUTHORIZER: Final = "No Authorizer is configured."
_CLUSTER_DENIED: Final = "Cluster authorization failed."


def _filter(req: Any) -> AclFilter:
    return AclFilter(
        int(req.resource_type_filter),
        req.resource_name_filter,
        int(getattr(req, "pattern_type_filter", PatternType.LITERAL)),
        req.principal_filter,
        req.host_filter,
        int(req.operation),
        int(req.permission_type),
    )


def _acl_row(acl: Acl) -> dict[str, Any]:
    return {
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation,
        "permission_type": acl.permission_type,
    }


class AclsApi:
    def __init__(self, services: Services, acls: AclController) -> None:
        self.s = services
        self.acls = acls

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(29, self.describe_acls, min_version=1, max_version=3),
            Api(30, self.create_acls, min_version=1, max_version=3),
            Api(31, self.delete_acls, min_version=1, max_version=3),
        ]

    @staticmethod
    def _respond(key: int, ctx: RequestContext, data: dict[str, Any]) -> Any:
        return build(
            REGISTRY.spec(key).response_type(ctx.api_version), {"throttle_time": 0, **data}
        )

    async def describe_acls(self, ctx: RequestContext, req: Any) -> Any:
        authz = self.s.authorizer
        error, message = ErrorCode.none, None
        f = _filter(req)
        if not allowed_on_cluster(authz, ctx, AclOperation.DESCRIBE):
            error, message = ErrorCode.cluster_authorization_failed, _CLUSTER_DENIED
        elif authz is None:
            error, message = (
                ErrorCode.security_disabled,
                "No Authorizer is configured on the broker",
            )
        elif (why := filter_error(f)) is not None:
            error, message = ErrorCode.invalid_request, why
        resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        if error == ErrorCode.none:
            for acl in sorted(self.s.image().acls.values()):
                if f.matches(acl):
                    key = (acl.resource_type, acl.resource_name, acl.pattern_type)
                    resources.setdefault(key, []).append(_acl_row(acl))
        rows = [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in resources.items()
        ]
        return self._respond(
            DESCRIBE_ACLS,
            ctx,
            {"error_code": error, "error_message": message, "resources": rows},
        )

    async def create_acls(self, ctx: RequestContext, req: Any) -> Any:
        authz = self.s.authorizer
        creations = list(req.creations)
        if not allowed_on_cluster(authz, ctx, AclOperation.ALTER):
            return self._create_error(ctx, creations, ErrorCode.cluster_authorization_failed)
        if authz is None:
            return self._create_error(ctx, creations, ErrorCode.security_disabled)
        acls = [
            Acl(
                int(c.resource_type),
                c.resource_name,
                int(getattr(c, "resource_pattern_type", PatternType.LITERAL)),
                c.principal,
                c.host,
                int(c.operation),
                int(c.permission_type),
            )
            for c in creations
        ]
        results = await self.acls.create_acls(acls)
        rows = [
            {
                "error_code": ErrorCode.none if why is None else ErrorCode.invalid_request,
                "error_message": why,
            }
            for why in results
        ]
        return self._respond(CREATE_ACLS, ctx, {"results": rows})

    def _create_error(self, ctx: RequestContext, creations: list[Any], code: ErrorCode) -> Any:
        message = (
            _CLUSTER_DENIED if code == ErrorCode.cluster_authorization_failed else _NO_AUTHORIZER
        )
        rows = [{"error_code": code, "error_message": message} for _ in creations]
        return self._respond(CREATE_ACLS, ctx, {"results": rows})

    async def delete_acls(self, ctx: RequestContext, req: Any) -> Any:
        authz = self.s.authorizer
        filters = [_filter(f) for f in req.filters]
        rows: list[dict[str, Any]] = []
        refusal: tuple[ErrorCode, str] | None = None
        if not allowed_on_cluster(authz, ctx, AclOperation.ALTER):
            refusal = ErrorCode.cluster_authorization_failed, _CLUSTER_DENIED
        elif authz is None:
            refusal = ErrorCode.security_disabled, _NO_AUTHORIZER
        if refusal is not None:
            for _ in filters:
                rows.append(
                    {"error_code": refusal[0], "error_message": refusal[1], "matching_acls": []}
                )
            return self._respond(DELETE_ACLS, ctx, {"filter_results": rows})
        for res in await self.acls.delete_acls(filters):
            if res.error is not None:
                rows.append(
                    {
                        "error_code": ErrorCode.invalid_request,
                        "error_message": res.error,
                        "matching_acls": [],
                    }
                )
                continue
            rows.append(
                {
                    "error_code": ErrorCode.none,
                    "error_message": None,
                    "matching_acls": [
                        {
                            "error_code": ErrorCode.none,
                            "error_message": None,
                            "resource_type": acl.resource_type,
                            "resource_name": acl.resource_name,
                            "pattern_type": acl.pattern_type,
                            **_acl_row(acl),
                        }
                        for acl in res.deleted
                    ],
                }
            )
        return self._respond(DELETE_ACLS, ctx, {"filter_results": rows})
