"""ListConfigResources v0-v1 (API key 74; v0 was ListClientMetricsResources until Kafka 4.1).

Lists the resources that configs can be described for, from the metadata image, as Kafka 4.1:
v0 knows only CLIENT_METRICS (16); v1 knows TOPIC (2), BROKER (4), BROKER_LOGGER (8),
CLIENT_METRICS (16) and GROUP (32), and an empty ``ResourceTypes`` means all of them. A type
the version does not know makes the whole answer UNSUPPORTED_VERSION. Groups and client metrics
resources are those with dynamic configs; brokers those registered with an endpoint on the
request's listener; topics every topic. Needs DESCRIBE_CONFIGS on the cluster
(otherwise CLUSTER_AUTHORIZATION_FAILED and no resources).
"""

from collections.abc import Iterable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..metadata.image import (
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    METADATA_TOPIC,
    TOPIC_RESOURCE,
    MetadataImage,
)
from ..security.acls import AclOperation
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .services import Services

API_KEY: Final = 74
VERSIONS: Final = (0, 1)

CLIENT_METRICS_RESOURCE: Final = 16
GROUP_RESOURCE: Final = 32
# Kafka's answer order: groups, client metrics, broker loggers, brokers, topics.
_V1_TYPES: Final = (
    GROUP_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
)


def supported_types(version: int) -> tuple[int, ...]:
    return (CLIENT_METRICS_RESOURCE,) if version == 0 else _V1_TYPES


def resource_names(image: MetadataImage, resource_type: int, listener: str) -> list[str]:
    """The names of the resources of one type, sorted."""
    if resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
        return [
            str(b.broker_id)
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
            if b.endpoint(listener) is not None
        ]
    if resource_type == TOPIC_RESOURCE:
        return sorted(n for n in image.topics if n != METADATA_TOPIC)
    # GROUP and CLIENT_METRICS exist as far as the metadata holds configs for them.
    return sorted(name for (rt, name) in image.configs if rt == resource_type)


class ConfigResourcesApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(74, self.list_config_resources, max_version=1),
        ]

    async def list_config_resources(self, ctx: RequestContext, req: Any) -> Any:
        version = ctx.api_version
        cls = REGISTRY.spec(API_KEY).response_type(version)
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.DESCRIBE_CONFIGS):
            return _answer(cls, ErrorCode.cluster_authorization_failed, ())
        supported = supported_types(version)
        asked = set(getattr(req, "resource_types", ()) or ())
        if not asked <= set(supported):
            return _answer(cls, ErrorCode.unsupported_version, ())
        wanted = [t for t in supported if not asked or t in asked]
        image = self.s.image()
        rows = [
            {"resource_name": name, "resource_type": t}
            for t in wanted
            for name in resource_names(image, t, ctx.listener)
        ]
        return _answer(cls, ErrorCode.none, rows)


def _answer(cls: type, error: ErrorCode, rows: Iterable[dict[str, Any]]) -> Any:
    return build(cls, {"throttle_time": 0, "error_code": error, "config_resources": list(rows)})
