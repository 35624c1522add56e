"""KIP-1279 MirrorMetadataManager: per mirror, every ``mirror.metadata.refresh.interval.ms``,
bring the destination's view of the mirror in line with its source.

One refresh of mirror ``m`` (skipped while ``m`` is halted):

1. Source cluster id: the first id seen (or the one the admin API cached) is remembered; a
   different id halts sync for ``m`` (error logged, ``errors[(m, "cluster_id_mismatch")]``) until
   the mirror is stopped and started again (deleted and re-created).
2. Topics whose ``mirror.name`` is ``m`` or ``m.paused``: one the source reports deleted
   (UNKNOWN_TOPIC_OR_PARTITION, or re-created under another topic id) is removed from the mirror
   (``m.removed``), which the state driver turns into a failover (STOPPED, writable). For active
   topics: more partitions at the source -> CreatePartitions; the source's dynamic topic configs
   minus ``mirror.topic.properties.exclude`` (regexes matched in full; ``mirror.name`` always
   excluded, and ``mirror.replication.throttled.replicas``, a destination setting) replace ours.
   Paused topics get neither, as the KIP says of PAUSED ("no metadata sync"); they catch up on
   the first refresh after resume. Then new source topics matching the mirror's stored ``--add``
   patterns are created and added (`topic_discovery`).
3. Consumer group offsets: groups of the source (ListGroups on every source broker) matching
   ``mirror.groups.include``, their committed offsets for the active topics (OffsetFetch at the
   group's source coordinator), committed here as admin commits (generation -1, no member) when
   they differ from ours. A group with members here is left alone. Share groups (KIP-932, listed
   with type ``share``, the same filter): each share-partition start offset at the source
   (DescribeShareGroupOffsets at the group's source coordinator) that differs from ours is set
   here (as AlterShareGroupOffsets: the group is made if missing, a new state epoch at that
   offset), so the group resumes there after failover; a share group with members here, or
   coordinated by another node of ours, is left alone. A source without share groups (older
   Kafka, or share groups off: no DescribeShareGroupOffsets) or share groups off here is a skip.
4. ACLs: the source's ACLs (DescribeAcls) that ``mirror.acl.include`` selects (`acl_rules`)
   are created here; ACLs this mirror created earlier that the source no longer has (or the rules
   no longer select) are deleted. ACLs created here by anyone else are never touched, and an ACL
   already present here is left as it is (`controller.acls.AclController.sync_mirror_acls`).
   A source without an authorizer (SECURITY_DISABLED) is a skip, not an error.

An API the source lacks (ApiVersions) skips its step with one log line per mirror and a count in
``skipped[(m, kind)]``; every source call has a timeout. Counters are plain dicts so a metrics
exporter can read them: ``errors`` / ``skipped`` keyed (mirror, kind), ``last_refresh_ms``.
Error kinds: cluster_id_mismatch, config, metadata, topic_removal, partitions, topic_configs,
topic_discovery, groups, share_groups, acls, refresh. Skip kinds: topic_configs, groups, share_groups, acls.

Each step is an object of its own (`topic_sync`, `topic_config_sync`, `group_offset_sync`,
`acl_sync`), given the shared `metadata_sync_state.SyncReport` and what else it needs;
`MirrorMetadataSync` builds them, keeps the per-mirror tasks and the order of a refresh's steps.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from ..controller import mirror_config
from ..controller.mirrors import mirror_names, mirror_topics, split_mirror_name
from ..metadata.image import MIRROR_RESOURCE, MetadataImage
from ..metadata.mirror_states import PAUSED_SUFFIX
from .acl_sync import DESCRIBE_ACLS, AclSync
from .group_offset_sync import (
    ADMIN_GENERATION,
    COMMIT_API_VERSION,
    DESCRIBE_SHARE_GROUP_OFFSETS,
    FIND_COORDINATOR,
    LIST_GROUPS,
    OFFSET_FETCH,
    GroupOffsetSync,
)
from .metadata_sync_interfaces import (
    AclStore,
    Groups,
    MirrorTopics,
    ShareOffsets,
    ShareOutcome,
    SourceFactory,
    SyncSource,
    TopicController,
)
from .metadata_sync_state import SyncMirror, SyncReport, compile_patterns, count
from .sync_source import SyncSourceClient
from .topic_config_sync import DESCRIBE_CONFIGS, TopicConfigSync
from .topic_sync import TopicSync

__all__ = [
    "ADMIN_GENERATION",
    "COMMIT_API_VERSION",
    "DESCRIBE_ACLS",
    "DESCRIBE_CONFIGS",
    "DESCRIBE_SHARE_GROUP_OFFSETS",
    "FIND_COORDINATOR",
    "LIST_GROUPS",
    "OFFSET_FETCH",
    "REFRESH_INTERVAL_KEY",
    "AclStore",
    "Groups",
    "MirrorMetadataSync",
    "MirrorTopics",
    "ShareOffsets",
    "ShareOutcome",
    "SourceFactory",
    "SyncSource",
    "TopicController",
    "compile_patterns",
]

log = logging.getLogger(__name__)

REFRESH_INTERVAL_KEY: Final = "mirror.metadata.refresh.interval.ms"


def _default_source(config: Mapping[str, str], client_id: str, timeout_ms: int) -> SyncSource:
    return SyncSourceClient(config, client_id, request_timeout_ms=timeout_ms)


class MirrorMetadataSync:
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        controller: TopicController,
        mirrors: MirrorTopics,
        groups: Groups,
        *,
        default_interval_ms: int | Callable[[], int] = 30_000,
        known_cluster_id: Callable[[str], str | None] | None = None,
        ensure_offsets_topic: Callable[[], Awaitable[None]] | None = None,
        source_factory: SourceFactory | None = None,
        client_id: str = "kmirror-metadata-sync",
        request_timeout_ms: int = 10_000,
        now_ms: Callable[[], int] | None = None,
        acls: AclStore | None = None,
        share_offsets: ShareOffsets | None = None,
        own_cluster_id: str = "",
    ) -> None:
        self._image = image
        self._default_interval = default_interval_ms
        self._known_cluster_id = known_cluster_id
        self._source_factory = source_factory or _default_source
        self._client_id = client_id
        self._timeout_ms = request_timeout_ms
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._state: dict[str, SyncMirror] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False
        self._report = SyncReport(self._state, request_timeout_ms)
        self.errors = self._report.errors
        self.skipped = self._report.skipped
        self.last_refresh_ms: dict[str, int] = {}
        # the steps of a refresh, in order
        self._topics = TopicSync(self._report, image, controller, mirrors, own_cluster_id)
        self._configs = TopicConfigSync(self._report, image, controller)
        self._groups = GroupOffsetSync(
            self._report, image, groups, share_offsets, ensure_offsets_topic
        )
        self._acls = AclSync(self._report, acls)

    # -- lifecycle -------------------------------------------------------------------------

    def running(self) -> set[str]:
        return {m for m, st in self._state.items() if st.task is not None}

    def halted(self, mirror: str) -> bool:
        st = self._state.get(mirror)
        return st is not None and st.halted

    def on_metadata(self, image: MetadataImage) -> None:
        """Start a task for each mirror that appeared, stop those of mirrors that are gone."""
        if self._closed:
            return
        wanted = set(mirror_names(image))
        for mirror in sorted(wanted - self.running()):
            self._start(mirror)
        for mirror in sorted(set(self._state) - wanted):
            task = asyncio.get_running_loop().create_task(self.stop(mirror))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    async def start(self, mirror: str) -> None:
        self._start(mirror)

    def _start(self, mirror: str) -> None:
        if self._closed:
            return
        st = self._state.setdefault(mirror, SyncMirror())
        if st.task is None or st.task.done():
            st.task = asyncio.get_running_loop().create_task(
                self._loop(mirror), name=f"mirror-metadata-sync-{mirror}"
            )

    async def stop(self, mirror: str) -> None:
        """Stop syncing ``mirror`` and forget it (its remembered cluster id included)."""
        st = self._state.pop(mirror, None)
        if st is None:
            return
        if st.task is not None:
            st.task.cancel()
            await asyncio.gather(st.task, return_exceptions=True)
        await self._close_client(st)

    async def close(self) -> None:
        self._closed = True
        for mirror in list(self._state):
            await self.stop(mirror)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    async def _close_client(self, st: SyncMirror) -> None:
        client, st.client = st.client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), self._timeout_ms / 1000)
            except Exception:
                log.debug("closing a mirror source client failed", exc_info=True)

    def interval_ms(self, mirror: str) -> int:
        raw = self._image().config(MIRROR_RESOURCE, mirror).get(REFRESH_INTERVAL_KEY)
        if raw is not None and raw.strip().isdigit() and int(raw) > 0:
            return int(raw)
        d = self._default_interval
        return max(1, d() if callable(d) else d)

    async def _loop(self, mirror: str) -> None:
        while True:
            try:
                await self.refresh_now(mirror)
            except asyncio.CancelledError:
                raise
            except Exception:
                count(self.errors, mirror, "refresh")
                log.exception("mirror %s: metadata refresh failed", mirror)
            await asyncio.sleep(self.interval_ms(mirror) / 1000)

    # -- one refresh -------------------------------------------------------------------------------

    async def refresh_now(self, mirror: str) -> None:
        st = self._state.setdefault(mirror, SyncMirror())
        async with st.lock:
            await self._refresh(mirror, st)

    async def _refresh(self, mirror: str, st: SyncMirror) -> None:
        img = self._image()
        config = mirror_config.client_settings(img.config(MIRROR_RESOURCE, mirror))
        if not config or st.halted:
            return
        client = await self._client(mirror, st, config)
        if client is None:
            return
        try:
            cid = await self._report.call(client.cluster_id())
            versions = await self._report.call(client.api_versions())
        except Exception as e:
            self._report.error(mirror, "metadata", f"source unreachable: {e or type(e).__name__}")
            return
        if not self._check_cluster_id(mirror, st, cid):
            return
        topics = mirror_topics(img, mirror)
        active = [t for t, v in topics.items() if split_mirror_name(v)[1] == ""]
        paused = [t for t, v in topics.items() if v == mirror + PAUSED_SUFFIX]
        present = await self._topics.sync(mirror, client, img, active, paused)
        await self._topics.discover(mirror, client, versions)
        if present is not None:
            await self._configs.sync(mirror, client, versions, present)
            await self._groups.sync(mirror, client, versions, present)
        await self._acls.sync(mirror, client, config, versions)
        self.last_refresh_ms[mirror] = self._now_ms()

    async def _client(
        self, mirror: str, st: SyncMirror, config: dict[str, str]
    ) -> SyncSource | None:
        if st.client is not None and st.client_config == config:
            return st.client
        await self._close_client(st)  # first use, or the mirror's connection settings changed
        timeout = config.get("request.timeout.ms", "")
        try:
            st.client = self._source_factory(
                config,
                config.get("client.id") or f"{self._client_id}-{mirror}",
                int(timeout) if timeout.isdigit() else self._timeout_ms,
            )
        except ValueError as e:
            self._report.error(mirror, "config", str(e))
            return None
        st.client_config = config
        return st.client

    def _check_cluster_id(self, mirror: str, st: SyncMirror, cid: str | None) -> bool:
        known = self._known_cluster_id(mirror) if self._known_cluster_id else None
        if st.cluster_id is None:
            st.cluster_id = known or cid
        if not cid:
            return True  # a source too old to report its id: nothing to compare
        expected = {x for x in (st.cluster_id, known) if x}
        if expected and expected != {cid}:
            st.halted = True
            count(self.errors, mirror, "cluster_id_mismatch")
            log.error(
                "mirror %s: the source cluster id is now %s, expected %s; metadata sync for this "
                "mirror is halted (check bootstrap.servers; delete and re-create the mirror to "
                "accept the new cluster)",
                mirror,
                cid,
                " / ".join(sorted(expected)),
            )
            return False
        return True
