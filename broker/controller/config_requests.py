"""AlterConfigs and IncrementalAlterConfigs for topics, brokers, groups and mirrors: each
value validated, secrets sealed, only changed keys written as ConfigRecords."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.errors import MirrorErrorCode

from ..config import group_configs
from ..config.group_configs import GROUP_RESOURCE, GroupConfigDefaults, GroupConfigError
from ..metadata import mirror_names
from ..metadata.image import BROKER_RESOURCE, MIRROR_RESOURCE, TOPIC_RESOURCE
from ..metadata.mirror_states import MIRROR_NAME_CONFIG
from . import mirror_config
from .controller_base import ControllerBase
from .record_types import ConfigRecord
from .validators import _MIRROR_NAME_ONLY, _ORIGIN_ONLY, ConfigValidationError

# Incremental config operations (IncrementalAlterConfigs).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@dataclass(slots=True)
class ConfigChange:
    resource_type: int
    resource_name: str
    # (key, op, value); for AlterConfigs (legacy) the whole set replaces the old one
    ops: list[tuple[str, int, str | None]]
    replace_all: bool = False


@dataclass(slots=True)
class ResourceResult:
    resource_type: int
    resource_name: str
    error: ErrorCode | MirrorErrorCode = ErrorCode.none
    message: str | None = None


class ConfigRequestsMixin(ControllerBase):
    """``alter_configs`` for Controller."""

    def _unchanged(
        self, resource_type: int, name: str, key: str, old: str | None, new: str
    ) -> bool:
        secrets = self._v.secrets
        return old == new and (secrets is None or not secrets.is_stale(resource_type, name, key))

    def _validate(self, resource_type: int, key: str, value: str) -> str:
        if resource_type == TOPIC_RESOURCE:
            return self._v.topic_config(key, value)
        if resource_type == MIRROR_RESOURCE:
            why = mirror_config.config_error(key, value)
            if why:
                raise ConfigValidationError(why)
            return value
        if resource_type == GROUP_RESOURCE:
            try:
                return group_configs.check_value(key, value)
            except GroupConfigError as e:
                raise ConfigValidationError(str(e)) from None
        return self._v.broker_config(key, value)

    def _check_group(self, wanted: dict[str, str]) -> None:
        defaults = self._v.group_defaults or GroupConfigDefaults.kafka()
        try:
            group_configs.check_group(wanted, defaults)
        except GroupConfigError as e:
            raise ConfigValidationError(str(e)) from None

    def _list_keys(self, resource_type: int) -> frozenset[str]:
        if resource_type == MIRROR_RESOURCE:
            return mirror_config.LIST_KEYS
        return self._v.list_keys

    async def alter_configs(
        self, changes: Sequence[ConfigChange], validate_only: bool
    ) -> list[ResourceResult]:
        async with self._lock:
            img = self._image()
            results: list[ResourceResult] = []
            records: list[Any] = []
            for ch in changes:
                res = ResourceResult(ch.resource_type, ch.resource_name)
                results.append(res)
                if ch.resource_type == TOPIC_RESOURCE:
                    if ch.resource_name not in img.topics:
                        res.error = ErrorCode.unknown_topic_or_partition
                        res.message = f"Topic {ch.resource_name} does not exist"
                        continue
                    if any(key == MIRROR_NAME_CONFIG for key, _op, _v in ch.ops):
                        res.error, res.message = ErrorCode.invalid_config, _MIRROR_NAME_ONLY
                        continue
                    if any(k == mirror_names.SOURCE_CLUSTER_IDS_CONFIG for k, _o, _v in ch.ops):
                        res.error, res.message = ErrorCode.invalid_config, _ORIGIN_ONLY
                        continue
                elif ch.resource_type == MIRROR_RESOURCE:
                    if not img.config(MIRROR_RESOURCE, ch.resource_name):
                        res.error = MirrorErrorCode.UNKNOWN_MIRROR
                        res.message = f"Mirror {ch.resource_name} does not exist"
                        continue
                    internal = [k for k, _op, _v in ch.ops if mirror_config.is_internal(k)]
                    if internal:
                        res.error = ErrorCode.invalid_config
                        res.message = f"Mirror config {internal[0]} is internal to the broker"
                        continue
                elif ch.resource_type == GROUP_RESOURCE:
                    if not ch.resource_name:
                        res.error = ErrorCode.invalid_request
                        res.message = "Group name must not be empty"
                        continue
                elif ch.resource_type == BROKER_RESOURCE:
                    if ch.resource_name not in ("", str(self._node_id)) and not (
                        ch.resource_name.isdigit() and int(ch.resource_name) in img.brokers
                    ):
                        res.error = ErrorCode.invalid_request
                        res.message = f"Unknown broker {ch.resource_name}"
                        continue
                else:
                    res.error = ErrorCode.invalid_request
                    res.message = f"Unsupported resource type {ch.resource_type}"
                    continue
                # with the values this node cannot decode (secrets at rest), so a delete or a
                # replacing AlterConfigs reaches them too
                current = dict(img.stored_config(ch.resource_type, ch.resource_name))
                wanted = {} if ch.replace_all else dict(current)
                if ch.resource_type == TOPIC_RESOURCE:  # AlterConfigs keeps the mirror's keys
                    for key in (MIRROR_NAME_CONFIG, mirror_names.SOURCE_CLUSTER_IDS_CONFIG):
                        if key in current:
                            wanted[key] = current[key]
                if ch.resource_type == MIRROR_RESOURCE:  # and the mirror's bookkeeping
                    wanted.update(
                        (k, v)
                        for k, v in current.items()
                        if mirror_config.is_internal(k) or k in mirror_names.IMMUTABLE_KEYS
                    )
                try:
                    for key, op, value in ch.ops:
                        if op == SET:
                            if value is None:
                                raise ConfigValidationError(f"Null value not supported for : {key}")
                            wanted[key] = self._validate(ch.resource_type, key, value)
                        elif op == DELETE:
                            wanted.pop(key, None)
                        elif op in (APPEND, SUBTRACT):
                            if key not in self._list_keys(ch.resource_type):
                                raise ConfigValidationError(
                                    f"Config value append is not allowed for config key: {key}"
                                )
                            items = [x for x in (wanted.get(key) or "").split(",") if x]
                            for x in (value or "").split(","):
                                if op == APPEND and x and x not in items:
                                    items.append(x)
                                elif op == SUBTRACT and x in items:
                                    items.remove(x)
                            if items:
                                wanted[key] = self._validate(ch.resource_type, key, ",".join(items))
                            else:
                                wanted.pop(key, None)
                        else:
                            raise ConfigValidationError(f"Unknown config operation {op}")
                    if ch.resource_type == MIRROR_RESOURCE:
                        why = mirror_config.missing_required(wanted) or next(
                            (
                                w
                                for k in sorted(mirror_names.IMMUTABLE_KEYS)
                                if (
                                    w := mirror_names.change_error(
                                        ch.resource_name, k, current.get(k), wanted.get(k)
                                    )
                                )
                            ),
                            None,
                        )
                        if why:
                            raise ConfigValidationError(why)
                    if ch.resource_type == GROUP_RESOURCE:
                        self._check_group(wanted)
                    changed = {
                        key: self.seal(ch.resource_type, ch.resource_name, key, value)
                        for key, value in wanted.items()
                        if not self._unchanged(
                            ch.resource_type, ch.resource_name, key, current.get(key), value
                        )
                    }
                except ConfigValidationError as e:
                    res.error, res.message = ErrorCode.invalid_config, str(e)
                    continue
                for key in current.keys() - wanted.keys():
                    records.append(
                        ConfigRecord(
                            resource_type=ch.resource_type,
                            resource_name=ch.resource_name,
                            name=key,
                            value=None,
                        )
                    )
                for key, value in changed.items():
                    records.append(
                        ConfigRecord(
                            resource_type=ch.resource_type,
                            resource_name=ch.resource_name,
                            name=key,
                            value=value,
                        )
                    )
            if not validate_only:
                await self._commit(records)
            return results
