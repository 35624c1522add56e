"""Refresh step 2, topic configs: the source's dynamic topic configs, minus
``mirror.topic.properties.exclude`` and the destination's own keys, replace ours.
"""

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..controller import mirror_config
from ..controller.controller import DELETE, SET, ConfigChange
from ..controller.mirrors import split_mirror_name
from ..metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE
from ..metadata.mirror_states import MIRROR_NAME_CONFIG
from .metadata_sync_interfaces import SyncSource, TopicController
from .metadata_sync_state import SyncState, compile_patterns

# The name the code logged under before metadata_sync.py was split: KMIRROR_LOG_LEVELS lines
# and the (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.metadata_sync")

DESCRIBE_CONFIGS: Final = 32


def excluded(key: str, patterns: Sequence[re.Pattern[str]]) -> bool:
    return key in mirror_config.DESTINATION_TOPIC_KEYS or any(p.fullmatch(key) for p in patterns)


def config_ops(
    source: Mapping[str, str],
    local: Mapping[str, str],
    patterns: Sequence[re.Pattern[str]],
    validate: Callable[[str, str], str],
) -> list[tuple[str, int, str | None]]:
    """IncrementalAlterConfigs ops making ``local`` match ``source`` outside the excluded keys.
    Source values this broker refuses (unknown or invalid keys) are ignored, not deleted here."""
    wanted: dict[str, str] = {}
    refused: set[str] = set()
    for key, value in source.items():
        if excluded(key, patterns):
            continue
        try:
            wanted[key] = validate(key, value)
        except Exception:
            refused.add(key)
    ops: list[tuple[str, int, str | None]] = [
        (k, SET, v) for k, v in sorted(wanted.items()) if local.get(k) != v
    ]
    ops += [
        (k, DELETE, None)
        for k in sorted(local)
        if k not in wanted and k not in refused and not excluded(k, patterns)
    ]
    return ops


class TopicConfigSync(SyncState):
    _controller: TopicController

    async def _sync_configs(
        self,
        mirror: str,
        client: SyncSource,
        versions: Mapping[int, tuple[int, int]],
        present: Mapping[str, Any],
    ) -> None:
        if DESCRIBE_CONFIGS not in versions:
            self._skip(mirror, "topic_configs", "the source does not support DescribeConfigs")
            return
        if not present:
            return
        mcfg = self._image().config(MIRROR_RESOURCE, mirror)
        try:
            patterns = compile_patterns(
                mcfg.get(
                    mirror_config.TOPIC_PROPERTIES_EXCLUDE, mirror_config.DEFAULT_TOPIC_EXCLUDES
                )
            )
        except re.error as e:
            self._error(
                mirror, "topic_configs", f"bad {mirror_config.TOPIC_PROPERTIES_EXCLUDE}: {e}"
            )
            return
        try:
            source = await self._call(client.topic_configs(sorted(present)))
        except Exception as e:
            self._error(mirror, "topic_configs", f"DescribeConfigs: {e or type(e).__name__}")
            return
        img = self._image()
        changes = []
        for name in sorted(present):
            if name not in source or name not in img.topics:
                continue  # the source could not describe it: leave ours as is
            local = img.config(TOPIC_RESOURCE, name)
            if split_mirror_name(local.get(MIRROR_NAME_CONFIG, ""))[0] != mirror:
                continue  # left the mirror meanwhile
            ops = config_ops(source[name], local, patterns, self._controller.validate_topic_config)
            if ops:
                changes.append(ConfigChange(TOPIC_RESOURCE, name, ops))
        if not changes:
            return
        for ch, res in zip(
            changes, await self._controller.alter_configs(changes, False), strict=True
        ):
            if int(res.error) != 0:
                self._error(mirror, "topic_configs", f"{ch.resource_name}: {res.message}")
            else:
                log.info(
                    "mirror %s: %s configs synced from the source (%s)",
                    mirror,
                    ch.resource_name,
                    ", ".join(k for k, _op, _v in ch.ops),
                )
