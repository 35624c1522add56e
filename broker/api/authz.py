"""Authorization checks for the handlers, over the node's authorizer (None: none configured).

With no authorizer every check is one ``is None`` test and allows, as Kafka does when
``authorizer.class.name`` is empty. The principal is the request context's (``User:ANONYMOUS``
until SASL authenticates someone) and the host is the client's address.
"""

from typing import Final

from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizer import Authorizer, all_operations_bits
from .context import RequestContext

# Kafka's authorized-operations value when the client did not ask for them.
OPS_NOT_REQUESTED: Final = -(2**31)


def allowed(
    authorizer: Authorizer | None,
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    return authorizer is None or authorizer.authorize(
        ctx.principal, ctx.peer_host, operation, resource_type, name
    )


def allowed_on_cluster(
    authorizer: Authorizer | None, ctx: RequestContext, operation: AclOperation
) -> bool:
    return allowed(authorizer, ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allowed_on_any(
    authorizer: Authorizer | None,
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    """On some resource of the type (e.g. WRITE on any topic for an idempotent producer)."""
    return authorizer is None or authorizer.authorize_any(
        ctx.principal, ctx.peer_host, operation, resource_type
    )


def operations_bits(
    authorizer: Authorizer | None, ctx: RequestContext, resource_type: ResourceType, name: str
) -> int:
    """The authorized-operations bit field of Metadata / DescribeCluster responses."""
    if authorizer is None:
        return all_operations_bits(resource_type)
    return authorizer.authorized_operations(ctx.principal, ctx.peer_host, resource_type, name)
