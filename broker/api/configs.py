"""DescribeConfigs v1-v5, AlterConfigs v0-v2, IncrementalAlterConfigs v0-v2 for topics, brokers,
groups (resource type 32, KIP-848/932 dynamic group configs) and mirrors (resource type 64,
KIP-1279; also accepted on the older versions, as the prototype does).

Describe rows come from the composition root's config describers as dicts with keys name, value,
read_only, source, sensitive, synonyms ([{name, value, source}]) and type (Kafka's ConfigType).
Sensitive values are reported as null, as Kafka does. Changes go through the controller, which
validates every key and value (INVALID_CONFIG with the reason otherwise).

With an authorizer, describing needs DESCRIBE_CONFIGS and changing ALTER_CONFIGS: on the topic
(TOPIC_AUTHORIZATION_FAILED), on the group (GROUP_AUTHORIZATION_FAILED), on the
CLUSTER_MIRROR resource of that name (KIP-1279,
MIRROR_AUTHORIZATION_FAILED), or on the cluster for broker resources (CLUSTER_AUTHORIZATION_FAILED).
"""

import asyncio
from dataclasses import fields
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import classify_field

from protocol.build import build
from protocol.encoders.describe_configs import encode_describe_configs_response
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from ..config.group_configs import GROUP_RESOURCE
from ..controller import mirror_config
from ..controller.controller import SET, ConfigChange, ResourceResult
from ..metadata.image import (
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    MIRROR_RESOURCE,
    TOPIC_RESOURCE,
)
from ..security.acls import AclOperation, ResourceType
from .authz import allowed, allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .services import Services

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
Code = ErrorCode | MirrorErrorCode


class ConfigsApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(
                32,
                self.describe_configs,
                min_version=1,
                max_version=5,
                encoder=encode_describe_configs_response,
            ),
            Api(33, self.alter_configs, max_version=2),
            Api(44, self.incremental_alter_configs, max_version=2),
        ]

    def _denied(
        self, ctx: RequestContext, op: AclOperation, resource_type: int, name: str
    ) -> tuple[Code, str] | None:
        """The authorization error for ``op`` on a config resource, or None."""
        authz = self.s.authorizer
        if authz is None:
            return None
        if resource_type == TOPIC_RESOURCE:
            if allowed(authz, ctx, op, ResourceType.TOPIC, name):
                return None
            return ErrorCode.topic_authorization_failed, f"Topic authorization failed: {name}"
        if resource_type == GROUP_RESOURCE:
            if allowed(authz, ctx, op, ResourceType.GROUP, name):
                return None
            return ErrorCode.group_authorization_failed, f"Group authorization failed: {name}"
        if resource_type == MIRROR_RESOURCE:
            if allowed(authz, ctx, op, ResourceType.CLUSTER_MIRROR, name):
                return None
            return MirrorErrorCode.MIRROR_AUTHORIZATION_FAILED, f"Not authorized on mirror {name}"
        if allowed_on_cluster(authz, ctx, op):
            return None
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."

    def _rows(
        self, resource_type: int, name: str
    ) -> tuple[ErrorCode | MirrorErrorCode, str | None, list[dict[str, Any]]]:
        if resource_type == TOPIC_RESOURCE:
            if name not in self.s.image().topics:
                return ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist", []
            return ErrorCode.none, None, self.s.describe_topic_configs(name)
        if resource_type == BROKER_RESOURCE:
            if name not in ("", str(self.s.node_id)):
                return (
                    ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {self.s.node_id} or empty string, but received {name}",
                    [],
                )
            return ErrorCode.none, None, self.s.describe_broker_configs()
        if resource_type == BROKER_LOGGER_RESOURCE:
            return ErrorCode.none, None, []
        if resource_type == GROUP_RESOURCE:
            if not name:
                return ErrorCode.invalid_request, "Group name must not be empty", []
            return ErrorCode.none, None, self.s.describe_group_configs(name)
        if resource_type == MIRROR_RESOURCE:
            explicit = self.s.image().config(MIRROR_RESOURCE, name)
            if not explicit:
                return MirrorErrorCode.UNKNOWN_MIRROR, f"Mirror {name} does not exist", []
            return ErrorCode.none, None, mirror_config.describe_rows(explicit)
        return ErrorCode.invalid_request, f"Unsupported resource type {resource_type}", []

    async def describe_configs(self, ctx: RequestContext, req: Any) -> Any:
        """Each resource's configs. A resource asked for again in the same request shares the
        first one's result, and the loop yields between resources: 1,000 broker resources
        (hundreds of configs each) were 40 s of one uninterrupted call."""
        synonyms = getattr(req, "include_synonyms", False)
        cls = REGISTRY.spec(DESCRIBE_CONFIGS).response_type(ctx.api_version)
        result_type = _results_item_type(cls)
        done: dict[tuple[int, str, frozenset[str] | None], Any] = {}
        results = []
        for r in req.resources:
            keys = frozenset(r.configuration_keys) if r.configuration_keys is not None else None
            memo = (r.resource_type, r.resource_name, keys)
            result = done.get(memo)
            if result is None:
                result = build(result_type, self._describe_one(ctx, r, keys, synonyms))
                done[memo] = result
                await asyncio.sleep(0)  # other connections' requests between resources
            results.append(result)
        return build(cls, {"throttle_time": 0, "results": results})

    def _describe_one(
        self, ctx: RequestContext, r: Any, keys: frozenset[str] | None, synonyms: bool
    ) -> dict[str, Any]:
        denial = self._denied(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        code, message, rows = (
            (denial[0], denial[1], [])
            if denial is not None
            else self._rows(r.resource_type, r.resource_name)
        )
        return {
            "error_code": code,
            "error_message": message,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            "configs": [
                {
                    "name": row["name"],
                    "value": None if row["sensitive"] else row["value"],
                    "read_only": row["read_only"],
                    "config_source": row["source"],
                    "is_sensitive": row["sensitive"],
                    "synonyms": row.get("synonyms", []) if synonyms else [],
                    "config_type": row.get("type", 0),
                    "documentation": None,
                }
                for row in rows
                if keys is None or row["name"] in keys
            ],
        }

    async def alter_configs(self, ctx: RequestContext, req: Any) -> Any:
        changes = [
            ConfigChange(
                r.resource_type,
                r.resource_name,
                [(c.name, SET, c.value) for c in r.configs],
                replace_all=True,
            )
            for r in req.resources
        ]
        return await self._alter(ALTER_CONFIGS, ctx, changes, req.validate_only)

    async def incremental_alter_configs(self, ctx: RequestContext, req: Any) -> Any:
        changes = [
            ConfigChange(
                r.resource_type,
                r.resource_name,
                [(c.name, c.config_operation, c.value) for c in r.configs],
            )
            for r in req.resources
        ]
        return await self._alter(INCREMENTAL_ALTER_CONFIGS, ctx, changes, req.validate_only)

    async def _alter(
        self, key: int, ctx: RequestContext, changes: list[ConfigChange], validate_only: bool
    ) -> Any:
        denied: dict[int, ResourceResult] = {}
        for i, ch in enumerate(changes):
            denial = self._denied(
                ctx, AclOperation.ALTER_CONFIGS, ch.resource_type, ch.resource_name
            )
            if denial is not None:
                denied[i] = ResourceResult(ch.resource_type, ch.resource_name, *denial)
        allowed_changes = [ch for i, ch in enumerate(changes) if i not in denied]
        # none left: no controller call (a controller that is not the active one could only
        # answer NOT_CONTROLLER; Kafka's returns early on an empty change set)
        done = iter(
            await self.s.controller.alter_configs(allowed_changes, validate_only)
            if allowed_changes
            else ()
        )
        results = [denied[i] if i in denied else next(done) for i in range(len(changes))]
        rows = [
            {
                "error_code": r.error,
                "error_message": r.message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
            for r in results
        ]
        cls = REGISTRY.spec(key).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "responses": rows})


def _results_item_type(response_type: type) -> type:
    """The class of one entry of a DescribeConfigs response's ``results``."""
    kind = classify_field(next(f for f in fields(response_type) if f.name == "results"))
    item: type = kind.type_
    return item
