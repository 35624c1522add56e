"""Refresh step 2, topics: those gone at the source leave the mirror (a failover), those with
more partitions at the source are expanded, and new source topics matching the mirror's stored
``--add`` patterns are added (`topic_discovery`).
"""

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..metadata import mirror_names
from ..metadata.image import MIRROR_RESOURCE, MetadataImage
from . import topic_discovery
from .metadata_sync_interfaces import MirrorTopics, SyncSource, TopicController
from .metadata_sync_state import SyncReport
from .topic_config_sync import DESCRIBE_CONFIGS

# The name the code logged under before metadata_sync.py was split: KMIRROR_LOG_LEVELS lines
# and the (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.metadata_sync")


class TopicSync:
    def __init__(
        self,
        report: SyncReport,
        image: Callable[[], MetadataImage],
        controller: TopicController,
        mirrors: MirrorTopics,
        own_cluster_id: str = "",
    ) -> None:
        self._report = report
        self._image = image
        self._controller = controller
        self._mirrors = mirrors
        self._own_cluster_id = own_cluster_id  # loop prevention (`mirror_names.loops_back`)

    async def sync(
        self,
        mirror: str,
        client: SyncSource,
        img: MetadataImage,
        active: list[str],
        paused: list[str],
    ) -> dict[str, Any] | None:
        """Fail over topics gone at the source, expand partitions; the active topics present at
        the source (None when the source could not be asked)."""
        names = active + paused
        if not names:
            return {}
        # local name -> source name (a prefixed mirror stores source topic t as <prefix>t)
        naming = mirror_names.naming(img.config(MIRROR_RESOURCE, mirror))
        to_source = {n: naming.source_topic(n) for n in names}
        try:
            asked = dict(await self._report.call(client.topics(sorted(set(to_source.values())))))
            found = {n: asked[s] for n, s in to_source.items() if s in asked}
            absent = [n for n in names if n not in found]
            missing = (
                set(await self._report.call(client.missing_topics([to_source[n] for n in absent])))
                if absent
                else set()
            )
            gone = {n for n in absent if to_source[n] in missing}
        except Exception as e:
            self._report.error(mirror, "metadata", f"source metadata: {e or type(e).__name__}")
            return None
        for name, src in found.items():
            local = img.topics.get(name)
            if local is not None and src.topic_id is not None and src.topic_id != local.topic_id:
                gone.add(name)  # deleted and re-created at the source: not our topic any more
        gone &= set(names)
        if gone:
            log.warning(
                "mirror %s: topic(s) %s deleted at the source; stopping their mirroring",
                mirror,
                ", ".join(sorted(gone)),
            )
            out = await self._mirrors.remove_topics(mirror, sorted(gone))
            for r in getattr(out, "topics", []):
                if int(r.error) != 0:
                    self._report.error(mirror, "topic_removal", f"{r.name}: {r.message or r.error}")
        present = {n: found[n] for n in active if n in found and n not in gone}
        grow = [
            (n, len(src.partitions), None)
            for n, src in present.items()
            if (local := img.topics.get(n)) is not None
            and len(src.partitions) > len(local.partitions)
        ]
        if grow:
            results = await self._controller.create_partitions(grow, False)
            for r in results:
                if int(r.error) != 0:
                    self._report.error(mirror, "partitions", f"{r.name}: {r.message or r.error}")
                else:
                    log.info("mirror %s: %s expanded like its source", mirror, r.name)
        return present

    async def discover(
        self, mirror: str, client: SyncSource, versions: Mapping[int, tuple[int, int]]
    ) -> None:
        """Source topics new since the last refresh that a stored ``--add`` pattern selects."""
        try:
            found = await topic_discovery.discover(
                mirror,
                self._image(),
                client,
                self._mirrors,
                can_describe_configs=DESCRIBE_CONFIGS in versions,
                call=self._report.call,
                own_cluster_id=self._own_cluster_id,
            )
        except Exception as e:
            self._report.error(
                mirror, "topic_discovery", f"listing source topics: {e or type(e).__name__}"
            )
            return
        if found.looped:
            self._report.skip(
                mirror,
                "loop",
                f"source topic(s) {', '.join(found.looped)} are mirrors of this cluster "
                f"({self._own_cluster_id} in their {mirror_names.SOURCE_CLUSTER_IDS_CONFIG}); "
                "not mirrored back",
            )
        if found.configs_skipped:
            self._report.skip(
                mirror, "topic_configs", "the source does not support DescribeConfigs"
            )
        if found.added:
            log.info(
                "mirror %s: new source topic(s) matching its patterns added: %s",
                mirror,
                ", ".join(found.added),
            )
        for name, why in sorted(found.failed.items()):
            self._report.error(mirror, "topic_discovery", f"{name}: {why}")
