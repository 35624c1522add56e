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
"""

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode

from ..controller import mirror_config
from ..controller.controller import DELETE, SET, ConfigChange
from ..controller.mirrors import mirror_names, mirror_topics, split_mirror_name
from ..coordinator.group.shard import CommitItem, CommitParams
from ..coordinator.runtime import CoordinatorError
from ..coordinator.share.state_records import ShareKey
from ..metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG, PAUSED_SUFFIX
from ..security.acls import Acl
from . import topic_discovery
from .acl_rules import AclRuleError, binding_from_codes, included, parse_acl_include
from .source import SourceError
from .sync_source import SECURITY_DISABLED, SourceGroup, SourceOffset, SyncSourceClient

log = logging.getLogger(__name__)

REFRESH_INTERVAL_KEY: Final = "mirror.metadata.refresh.interval.ms"
DESCRIBE_CONFIGS: Final = 32
OFFSET_FETCH: Final = 9
FIND_COORDINATOR: Final = 10
LIST_GROUPS: Final = 16
DESCRIBE_SHARE_GROUP_OFFSETS: Final = 90
DESCRIBE_ACLS: Final = 29
ADMIN_GENERATION: Final = -1
COMMIT_API_VERSION: Final = 9
# A commit refused for these reasons means the group got members meanwhile: leave it alone.
_GROUP_ACTIVE_CODES: Final = frozenset(
    {ErrorCode.unknown_member_id, ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation}
)


class SyncSource(Protocol):
    """What a refresh needs of the source (`SyncSourceClient`; fakes in tests)."""

    async def cluster_id(self) -> str | None: ...
    async def api_versions(self) -> dict[int, tuple[int, int]]: ...
    async def topics(self, names: Sequence[str] | None = None) -> Mapping[str, Any]: ...
    async def missing_topics(self, names: Sequence[str]) -> set[str]: ...
    async def topic_configs(self, names: Sequence[str]) -> Mapping[str, Mapping[str, str]]: ...
    async def list_groups(self) -> list[SourceGroup]: ...
    async def group_coordinators(self, group_ids: Sequence[str]) -> dict[str, int]: ...
    async def committed_offsets(
        self, node_id: int, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], SourceOffset]: ...
    async def share_group_offsets(
        self, node_id: int, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], int]: ...
    async def describe_acls(self) -> list[Acl]: ...
    async def close(self) -> None: ...


class TopicController(Protocol):
    async def create_partitions(
        self, requests: Sequence[tuple[str, int, list[list[int]] | None]], validate_only: bool
    ) -> list[Any]: ...
    async def alter_configs(
        self, changes: Sequence[ConfigChange], validate_only: bool
    ) -> list[Any]: ...
    def validate_topic_config(self, key: str, value: str) -> str: ...


class MirrorTopics(topic_discovery.Adder, Protocol):
    async def remove_topics(self, mirror: str, names: Sequence[str]) -> Any: ...


class AclStore(Protocol):
    """`broker.controller.acls.AclController`: the ACLs a mirror owns made equal to ``wanted``."""

    async def sync_mirror_acls(self, mirror: str, wanted: set[Acl]) -> Any: ...


class Groups(Protocol):
    async def describe_group(self, group_id: str) -> Any: ...
    async def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> tuple[ErrorCode, list[tuple[str, list[Any]]]]: ...
    async def commit_offsets(self, p: CommitParams) -> list[ErrorCode]: ...


ShareOutcome = tuple[ErrorCode, str | None]


class ShareOffsets(Protocol):
    """`broker.coordinator.share.offsets_admin.ShareOffsetsAdmin` (None: share groups off)."""

    async def alterable(self, group_id: str) -> ErrorCode: ...
    async def start_offset(self, k: ShareKey) -> int | None: ...
    async def alter(
        self, group_id: str, starts: Mapping[ShareKey, int]
    ) -> tuple[ShareOutcome, dict[ShareKey, ShareOutcome]]: ...


SourceFactory = Callable[[Mapping[str, str], str, int], SyncSource]


def _default_source(config: Mapping[str, str], client_id: str, timeout_ms: int) -> SyncSource:
    return SyncSourceClient(config, client_id, request_timeout_ms=timeout_ms)


def compile_patterns(value: str) -> list[re.Pattern[str]]:
    """A comma-separated list of regexes (``mirror.groups.include``, the exclude list)."""
    return [re.compile(p.strip()) for p in value.split(",") if p.strip()]


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


@dataclass(slots=True)
class _Mirror:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: "asyncio.Task[None] | None" = None
    client: SyncSource | None = None
    client_config: dict[str, str] = field(default_factory=dict)
    cluster_id: str | None = None
    halted: bool = False
    said: dict[str, str] = field(default_factory=dict)  # kind -> last message logged


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
    ) -> None:
        self._image = image
        self._acls = acls
        self._share = share_offsets
        self._controller = controller
        self._mirrors = mirrors
        self._groups = groups
        self._default_interval = default_interval_ms
        self._known_cluster_id = known_cluster_id
        self._ensure_offsets_topic = ensure_offsets_topic
        self._source_factory = source_factory or _default_source
        self._client_id = client_id
        self._timeout_ms = request_timeout_ms
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._state: dict[str, _Mirror] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False
        self.errors: dict[tuple[str, str], int] = {}
        self.skipped: dict[tuple[str, str], int] = {}
        self.last_refresh_ms: dict[str, int] = {}

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
        st = self._state.setdefault(mirror, _Mirror())
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

    async def _close_client(self, st: _Mirror) -> None:
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
                self._count(self.errors, mirror, "refresh")
                log.exception("mirror %s: metadata refresh failed", mirror)
            await asyncio.sleep(self.interval_ms(mirror) / 1000)

    # -- counters and logs ---------------------------------------------------------------------

    @staticmethod
    def _count(counter: dict[tuple[str, str], int], mirror: str, kind: str) -> None:
        counter[(mirror, kind)] = counter.get((mirror, kind), 0) + 1

    def _error(self, mirror: str, kind: str, message: str) -> None:
        self._count(self.errors, mirror, kind)
        st = self._state.get(mirror)
        if st is None or st.said.get(kind) != message:  # once per distinct message, not per cycle
            if st is not None:
                st.said[kind] = message
            log.warning("mirror %s: %s sync: %s", mirror, kind, message)

    def _skip(self, mirror: str, kind: str, why: str) -> None:
        self._count(self.skipped, mirror, kind)
        st = self._state.get(mirror)
        key = "skip:" + kind
        if st is None or key not in st.said:
            if st is not None:
                st.said[key] = why
            log.info("mirror %s: %s not synced: %s", mirror, kind.replace("_", " "), why)

    async def _call(self, work: Awaitable[Any]) -> Any:
        return await asyncio.wait_for(work, self._timeout_ms / 1000)

    # -- one refresh -------------------------------------------------------------------------------

    async def refresh_now(self, mirror: str) -> None:
        st = self._state.setdefault(mirror, _Mirror())
        async with st.lock:
            await self._refresh(mirror, st)

    async def _refresh(self, mirror: str, st: _Mirror) -> None:
        img = self._image()
        config = mirror_config.client_settings(img.config(MIRROR_RESOURCE, mirror))
        if not config or st.halted:
            return
        client = await self._client(mirror, st, config)
        if client is None:
            return
        try:
            cid = await self._call(client.cluster_id())
            versions = await self._call(client.api_versions())
        except Exception as e:
            self._error(mirror, "metadata", f"source unreachable: {e or type(e).__name__}")
            return
        if not self._check_cluster_id(mirror, st, cid):
            return
        topics = mirror_topics(img, mirror)
        active = [t for t, v in topics.items() if split_mirror_name(v)[1] == ""]
        paused = [t for t, v in topics.items() if v == mirror + PAUSED_SUFFIX]
        present = await self._sync_topics(mirror, client, img, active, paused)
        await self._discover_topics(mirror, client, versions)
        if present is not None:
            await self._sync_configs(mirror, client, versions, present)
            await self._sync_groups(mirror, client, versions, present)
        await self._sync_acls(mirror, client, config, versions)
        self.last_refresh_ms[mirror] = self._now_ms()

    async def _client(self, mirror: str, st: _Mirror, config: dict[str, str]) -> SyncSource | None:
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
            self._error(mirror, "config", str(e))
            return None
        st.client_config = config
        return st.client

    def _check_cluster_id(self, mirror: str, st: _Mirror, cid: str | None) -> bool:
        known = self._known_cluster_id(mirror) if self._known_cluster_id else None
        if st.cluster_id is None:
            st.cluster_id = known or cid
        if not cid:
            return True  # a source too old to report its id: nothing to compare
        expected = {x for x in (st.cluster_id, known) if x}
        if expected and expected != {cid}:
            st.halted = True
            self._count(self.errors, mirror, "cluster_id_mismatch")
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

    # -- topics ------------------------------------------------------------------------------------

    async def _sync_topics(
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
        try:
            found = dict(await self._call(client.topics(names)))
            absent = [n for n in names if n not in found]
            gone = set(await self._call(client.missing_topics(absent))) if absent else set()
        except Exception as e:
            self._error(mirror, "metadata", f"source metadata: {e or type(e).__name__}")
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
                    self._error(mirror, "topic_removal", f"{r.name}: {r.message or r.error}")
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
                    self._error(mirror, "partitions", f"{r.name}: {r.message or r.error}")
                else:
                    log.info("mirror %s: %s expanded like its source", mirror, r.name)
        return present

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

    async def _discover_topics(
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
                call=self._call,
            )
        except Exception as e:
            self._error(
                mirror, "topic_discovery", f"listing source topics: {e or type(e).__name__}"
            )
            return
        if found.configs_skipped:
            self._skip(mirror, "topic_configs", "the source does not support DescribeConfigs")
        if found.added:
            log.info(
                "mirror %s: new source topic(s) matching its patterns added: %s",
                mirror,
                ", ".join(found.added),
            )
        for name, why in sorted(found.failed.items()):
            self._error(mirror, "topic_discovery", f"{name}: {why}")

    # -- consumer groups -----------------------------------------------------------------------------

    async def _sync_groups(
        self,
        mirror: str,
        client: SyncSource,
        versions: Mapping[int, tuple[int, int]],
        present: Mapping[str, Any],
    ) -> None:
        share_ok = False
        if DESCRIBE_SHARE_GROUP_OFFSETS not in versions:
            self._skip(
                mirror, "share_groups", "the source does not support DescribeShareGroupOffsets"
            )
        elif self._share is None:
            self._skip(mirror, "share_groups", "share groups are off here (group.share.enable)")
        else:
            share_ok = True
        lacking = [
            name
            for key, name in (
                (LIST_GROUPS, "ListGroups"),
                (FIND_COORDINATOR, "FindCoordinator"),
                (OFFSET_FETCH, "OffsetFetch"),
            )
            if key not in versions
        ]
        if lacking:
            self._skip(mirror, "groups", f"the source does not support {', '.join(lacking)}")
            return
        if not present:
            return
        mcfg = self._image().config(MIRROR_RESOURCE, mirror)
        try:
            include = compile_patterns(mcfg.get(mirror_config.GROUPS_INCLUDE, ".*"))
        except re.error as e:
            self._error(mirror, "groups", f"bad {mirror_config.GROUPS_INCLUDE}: {e}")
            return
        topics = {n: sorted(src.partitions) for n, src in present.items()}
        try:
            listed = [
                g
                for g in await self._call(client.list_groups())
                if g.state.lower() != "dead" and any(p.fullmatch(g.group_id) for p in include)
            ]
            wanted = [g.group_id for g in listed if g.group_type.lower() != "share"]
            shares = [g.group_id for g in listed if g.group_type.lower() == "share" and share_ok]
            coordinators = await self._call(client.group_coordinators(wanted + shares))
        except Exception as e:
            self._error(mirror, "groups", f"listing source groups: {e or type(e).__name__}")
            return
        # (groups, metric kind, the source RPC's name, read at the source, apply here)
        kinds = (
            (wanted, "groups", "OffsetFetch", client.committed_offsets, self._commit_group),
            (shares, "share_groups", "DescribeShareGroupOffsets", client.share_group_offsets,
             self._alter_share_group),
        )  # fmt: skip
        ensured = False
        for gids, kind, rpc, read, apply in kinds:
            for gid in gids:
                node = coordinators.get(gid)
                if node is None:
                    self._error(mirror, kind, f"group {gid} has no coordinator at the source")
                    continue
                try:
                    offsets = await self._call(read(node, gid, topics))
                except Exception as e:
                    self._error(mirror, kind, f"{rpc} {gid}: {e or type(e).__name__}")
                    continue
                if not offsets:
                    continue
                if not ensured and self._ensure_offsets_topic is not None:
                    await self._ensure_offsets_topic()
                    ensured = True
                await apply(mirror, gid, offsets)

    async def _alter_share_group(
        self, mirror: str, gid: str, starts: Mapping[tuple[str, int], int]
    ) -> None:
        assert self._share is not None
        img = self._image()
        changed: dict[ShareKey, int] = {}
        try:
            why = await self._share.alterable(gid)
            if why != ErrorCode.none:
                # members here, or another node of ours coordinates it (and syncs it)
                log.debug("mirror %s: share group %s not synced here (%s)", mirror, gid, why.name)
                return
            for (name, p), start in sorted(starts.items()):
                topic = img.topics.get(name)
                if topic is None or p not in topic.partitions:
                    continue
                key = ShareKey(gid, topic.topic_id, p)
                if await self._share.start_offset(key) != start:
                    changed[key] = start
        except CoordinatorError as e:
            self._error(mirror, "share_groups", f"share group {gid}: state unreadable ({e})")
            return
        if not changed:
            return
        (code, message), done = await self._share.alter(gid, changed)
        if code in (ErrorCode.non_empty_group, ErrorCode.not_coordinator):
            # members joined meanwhile, or another node of ours coordinates it (and syncs it)
            log.debug("mirror %s: share group %s not synced here (%s)", mirror, gid, code.name)
            return
        if code != ErrorCode.none:
            self._error(mirror, "share_groups", f"share group {gid}: {code.name} {message or ''}")
            return
        failed = sorted({c.name for c, _m in done.values() if c != ErrorCode.none})
        if failed:
            self._error(mirror, "share_groups", f"share group {gid}: {', '.join(failed)}")
        else:
            log.debug("mirror %s: share group %s: %d start offsets synced", mirror, gid, len(done))

    async def _commit_group(
        self, mirror: str, gid: str, offsets: Mapping[tuple[str, int], SourceOffset]
    ) -> None:
        described = await self._groups.describe_group(gid)
        if described.error == ErrorCode.none and described.members:
            log.debug("mirror %s: group %s is active here; its offsets are not synced", mirror, gid)
            return
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(offsets):
            by_topic.setdefault(t, []).append(p)
        code, fetched = await self._groups.fetch_offsets(gid, list(by_topic.items()))
        if code != ErrorCode.none:
            self._error(mirror, "groups", f"group {gid}: local offsets unreadable ({code.name})")
            return
        ours = {
            (t, f.partition): (f.offset, f.leader_epoch, f.metadata)
            for t, rows in fetched
            for f in rows
        }
        items = [
            CommitItem(t, p, o.offset, o.leader_epoch, o.metadata)
            for (t, p), o in sorted(offsets.items())
            if ours.get((t, p)) != (o.offset, o.leader_epoch, o.metadata)
        ]
        if not items:
            return
        results = await self._groups.commit_offsets(
            CommitParams(
                group_id=gid,
                generation_id=ADMIN_GENERATION,
                member_id="",
                group_instance_id=None,
                retention_ms=-1,
                items=items,
                api_version=COMMIT_API_VERSION,
            )
        )
        failed = {code for code in results if code != ErrorCode.none}
        if failed & _GROUP_ACTIVE_CODES:
            log.debug("mirror %s: group %s became active here; not synced", mirror, gid)
        elif failed:
            names = ", ".join(sorted(c.name for c in failed))
            self._error(mirror, "groups", f"committing offsets of group {gid}: {names}")
        else:
            log.debug("mirror %s: group %s: %d offsets synced", mirror, gid, len(items))

    # -- ACLs ------------------------------------------------------------------------------------

    async def _sync_acls(
        self,
        mirror: str,
        client: SyncSource,
        config: Mapping[str, str],
        versions: Mapping[int, tuple[int, int]],
    ) -> None:
        try:
            rules = parse_acl_include(config.get(mirror_config.ACL_INCLUDE))
        except AclRuleError as e:
            self._error(mirror, "acls", f"bad {mirror_config.ACL_INCLUDE}: {e}")
            return
        if DESCRIBE_ACLS not in versions:
            self._skip(mirror, "acls", "the source does not support DescribeAcls")
            return
        if self._acls is None:
            self._skip(mirror, "acls", "this broker has no ACL store")
            return
        try:
            source = await self._call(client.describe_acls())
        except SourceError as e:
            if e.code == SECURITY_DISABLED:
                self._skip(mirror, "acls", "the source has no authorizer (SECURITY_DISABLED)")
            else:
                self._error(mirror, "acls", str(e))
            return
        except Exception as e:
            self._error(mirror, "acls", f"DescribeAcls: {e or type(e).__name__}")
            return
        wanted = {
            a
            for a in source
            if included(
                rules,
                binding_from_codes(
                    a.resource_type,
                    a.resource_name,
                    a.operation,
                    a.permission_type,
                    a.principal,
                    a.host,
                ),
            )
        }
        out = await self._acls.sync_mirror_acls(mirror, wanted)
        for acl, why in out.refused:
            self._error(mirror, "acls", f"cannot store {acl.describe()}: {why}")
        if out.created or out.deleted:
            log.info(
                "mirror %s: ACLs synced from the source: %d created, %d deleted",
                mirror,
                len(out.created),
                len(out.deleted),
            )
