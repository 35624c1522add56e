"""Refresh step 2, topic configs: the source's dynamic topic configs, minus
``mirror.topic.properties.exclude`` and the destination's own keys, replace ours.
"""

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..controller import mirror_config
from ..controller.controller import ConfigChange
from ..controller.mirrors import split_mirror_name
from ..metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG
from .core.config_filter import config_ops
from .metadata_sync_interfaces import SyncSource, TopicController
from .metadata_sync_state import SyncReport, compile_patterns

# The name the code logged under before metadata_sync.py was split: KMIRROR_LOG_LEVELS lines
# and the (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.metadata_sync")

DESCRIBE_CONFIGS: Final = 32


class TopicConfigSync:
    def __init__(
        self,
        report: SyncReport,
        image: Callable[[], MetadataImage],
        controller: TopicController,
    ) -> None:
        self._report = report
        self._image = image
        self._controller = controller

    async def sync(
        self,
        mirror: str,
        client: SyncSource,
        versions: Mapping[int, tuple[int, int]],
        present: Mapping[str, Any],
    ) -> None:
        if DESCRIBE_CONFIGS not in versions:
            self._report.skip(
                mirror, "topic_configs", "the source does not support DescribeConfigs"
            )
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
            self._report.error(
                mirror, "topic_configs", f"bad {mirror_config.TOPIC_PROPERTIES_EXCLUDE}: {e}"
            )
            return
        # present: local name -> the source's topic (its name is the source's, e.g. unprefixed)
        src_name = {n: getattr(t, "name", n) or n for n, t in present.items()}
        try:
            source = await self._report.call(client.topic_configs(sorted(set(src_name.values()))))
        except Exception as e:
            self._report.error(mirror, "topic_configs", f"DescribeConfigs: {e or type(e).__name__}")
            return
        img = self._image()
        changes = []
        for name in sorted(present):
            if src_name[name] not in source or name not in img.topics:
                continue  # the source could not describe it: leave ours as is
            local = img.config(TOPIC_RESOURCE, name)
            if split_mirror_name(local.get(MIRROR_NAME_CONFIG, ""))[0] != mirror:
                continue  # left the mirror meanwhile
            ops = config_ops(
                source[src_name[name]], local, patterns, self._controller.validate_topic_config
            )
            if ops:
                changes.append(ConfigChange(TOPIC_RESOURCE, name, ops))
        if not changes:
            return
        for ch, res in zip(
            changes, await self._controller.alter_configs(changes, False), strict=True
        ):
            if int(res.error) != 0:
                self._report.error(mirror, "topic_configs", f"{ch.resource_name}: {res.message}")
            else:
                log.info(
                    "mirror %s: %s configs synced from the source (%s)",
                    mirror,
                    ch.resource_name,
                    ", ".join(k for k, _op, _v in ch.ops),
                )
