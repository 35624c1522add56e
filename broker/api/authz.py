"""Authorization checks for the handlers, over the node's authorizer (None: none configured).

With no authorizer every check is one ``is None`` test and allows, as Kafka does when
``authorizer.class.name`` is empty. The principal is the request context's (``User:ANONYMOUS``
until SASL authenticates someone) and the host is the client's address.
"""

import logging
import time
from collections.abc import Callable
from typing import Final

from protocol.registry import REGISTRY

from ..network.peer_refusals import api_name
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizer import Authorizer, all_operations_bits
from .context import RequestContext

log = logging.getLogger(__name__)

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


class DenialLog:
    """Refused cluster operations, logged at WARNING once per ``interval_s`` for each
    (principal, api, listener): a node its peers refuse keeps retrying, and one line a minute
    says who is refused what, where, without one line per retry."""

    def __init__(self, interval_s: float = 60.0, monotonic: Callable[[], float] = time.monotonic):
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._last: dict[tuple[str, int, str], float] = {}

    def refused(self, ctx: RequestContext, operation: AclOperation) -> bool:
        """Log the refusal unless this one was logged within the interval; True if logged."""
        h = ctx.header
        key = (ctx.principal, h.api_key, ctx.listener)
        now = self._monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval_s:
            return False
        if len(self._last) >= _MAX_DENIALS_KEPT:
            self._last.clear()  # many principals: forget them all rather than grow
        self._last[key] = now
        log.warning(
            "refused %s v%d from %s at %s on listener %s (client id %r): no %s on the cluster "
            "(CLUSTER_AUTHORIZATION_FAILED)",
            _api_name(h.api_key),
            h.api_version,
            ctx.principal,
            ctx.peer_host,
            ctx.listener,
            h.client_id,
            operation.name,
        )
        return True


_MAX_DENIALS_KEPT: Final = 10_000
DENIALS: Final = DenialLog()


def _api_name(key: int) -> str:
    try:
        return f"{api_name(REGISTRY.spec(key).name)} (api key {key})"
    except KeyError:
        return f"api key {key}"


def cluster_allowed(
    authorizer: Authorizer | None,
    ctx: RequestContext,
    operation: AclOperation = AclOperation.CLUSTER_ACTION,
    denials: DenialLog = DENIALS,
) -> bool:
    """An operation on the cluster that a node-to-node or controller RPC needs (CLUSTER_ACTION
    by default): a refusal is logged (`DenialLog`), as the caller answers it with
    CLUSTER_AUTHORIZATION_FAILED."""
    if allowed_on_cluster(authorizer, ctx, operation):
        return True
    denials.refused(ctx, operation)
    return False
