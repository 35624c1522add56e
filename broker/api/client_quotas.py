"""DescribeClientQuotas v0-v1 (48) and AlterClientQuotas v0-v1 (49), KIP-546.

Describe reads the image: each filter component names an entity type once (``user``,
``client-id``, ``ip``) with match type 0 (that name), 1 (the default entity: null name) or 2 (any
entity of the type); ``strict`` keeps only entities with no other part. As Kafka's broker: a
type twice, an ip component with a user or client-id one, or a match string that contradicts the
match type is INVALID_REQUEST for the whole request; an unknown entity type is
UNSUPPORTED_VERSION. Alter goes through the controller (``broker.controller.client_quotas``),
which validates each entity and commits ClientQuotaRecords; it is forwarded to the active
controller like other admin writes. Authorization as Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on
the cluster, CLUSTER_AUTHORIZATION_FAILED otherwise.
"""

from collections.abc import Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.client_quotas import Alteration, ClientQuotaController
from ..metadata.client_quotas import CLIENT_ID, ENTITY_TYPES, IP, USER, Entity
from ..security.acls import AclOperation
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .services import Services

DESCRIBE, ALTER = 48, 49
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
_ANY: Final = object()


class FilterError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_filter(components: Any) -> dict[str, Any]:
    """entity type -> the name it must have (None: the default entity) or ``_ANY``."""
    wanted: dict[str, Any] = {}
    for c in components:
        t = c.entity_type
        if t in wanted:
            raise FilterError(
                ErrorCode.invalid_request,
                f"Entity type {t} cannot appear more than once in the filter.",
            )
        if t not in ENTITY_TYPES:
            raise FilterError(ErrorCode.unsupported_version, f"Unsupported entity type {t}")
        kind = int(c.match_type)
        if kind == EXACT:
            if c.match is None:
                raise FilterError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            wanted[t] = c.match
        elif kind == DEFAULT:
            if c.match is not None:
                raise FilterError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            wanted[t] = None
        elif kind == SPECIFIED:
            if c.match is not None:
                raise FilterError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            wanted[t] = _ANY
        else:
            raise FilterError(ErrorCode.invalid_request, f"Unknown match type {kind}")
    if IP in wanted and (USER in wanted or CLIENT_ID in wanted):
        raise FilterError(
            ErrorCode.invalid_request,
            "Invalid entity filter component combination, IP filter component should not be "
            "used with user or clientId filter component.",
        )
    return wanted


def matches(entity: Entity, wanted: Mapping[str, Any], strict: bool) -> bool:
    if strict and len(entity) != len(wanted):
        return False
    names = dict(entity)
    for t, name in wanted.items():
        if t not in names:
            return False
        if name is not _ANY and names[t] != name:
            return False
    return True


def describe_entries(
    quotas: Mapping[Entity, Mapping[str, float]], components: Any, strict: bool
) -> list[dict[str, Any]]:
    """The response entries for a filter (raises FilterError)."""
    wanted = parse_filter(components)
    return [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for entity, values in quotas.items()
        if matches(entity, wanted, strict)
    ]


class ClientQuotasApi:
    def __init__(self, services: Services, controller: ClientQuotaController) -> None:
        self.s = services
        self.controller = controller

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(DESCRIBE, self.describe, max_version=1),
            Api(ALTER, self.alter, max_version=1),
        ]

    async def describe(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(DESCRIBE).response_type(ctx.api_version)
        out: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.none}
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.DESCRIBE_CONFIGS):
            out.update(
                error_code=ErrorCode.cluster_authorization_failed,
                error_message="Cluster authorization failed.",
                entries=None,
            )
            return build(cls, out)
        try:
            entries = describe_entries(self.s.image().client_quotas, req.components, req.strict)
        except FilterError as e:
            out.update(error_code=e.code, error_message=str(e), entries=None)
            return build(cls, out)
        out.update(error_message=None, entries=entries)
        return build(cls, out)

    async def alter(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(ALTER).response_type(ctx.api_version)
        alterations = [
            Alteration(
                tuple((e.entity_type, e.entity_name) for e in entry.entity),
                tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops),
            )
            for entry in req.entries
        ]
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.ALTER_CONFIGS):
            rows: list[tuple[Any, ErrorCode, str | None]] = [
                (a.entity, ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
                for a in alterations
            ]
        else:
            results = await self.controller.alter(alterations, bool(req.validate_only))
            rows = [(r.entity, r.error, r.message) for r in results]
        return build(
            cls,
            {
                "throttle_time": 0,
                "entries": [
                    {
                        "error_code": code,
                        "error_message": message,
                        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    }
                    for entity, code, message in rows
                ],
            },
        )
