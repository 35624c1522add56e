"""Refresh step 3, group offsets: the committed offsets of the source's consumer groups that
``mirror.groups.include`` selects are committed here (admin commits), and the start offsets of
its share groups are set here, so groups resume where they were after a failover. A group with
members here is left alone. A prefixed mirror commits them under the prefixed topic names, and
with ``mirror.group.prefix.enable=true`` under the prefixed group name (`mirror_names`).
"""

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ..controller import mirror_config
from ..coordinator.group.shard import CommitItem, CommitParams
from ..coordinator.runtime import CoordinatorError
from ..coordinator.share.state_records import ShareKey
from ..metadata import mirror_names
from ..metadata.image import MIRROR_RESOURCE, MetadataImage
from .metadata_sync_interfaces import Groups, ShareOffsets, SyncSource
from .metadata_sync_state import SyncReport, compile_patterns
from .sync_source import SourceOffset

# The name the code logged under before metadata_sync.py was split: KMIRROR_LOG_LEVELS lines
# and the (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.metadata_sync")

OFFSET_FETCH: Final = 9
FIND_COORDINATOR: Final = 10
LIST_GROUPS: Final = 16
DESCRIBE_SHARE_GROUP_OFFSETS: Final = 90
ADMIN_GENERATION: Final = -1
COMMIT_API_VERSION: Final = 9
# A commit refused for these reasons means the group got members meanwhile: leave it alone.
_GROUP_ACTIVE_CODES: Final = frozenset(
    {ErrorCode.unknown_member_id, ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation}
)


class GroupOffsetSync:
    def __init__(
        self,
        report: SyncReport,
        image: Callable[[], MetadataImage],
        groups: Groups,
        share_offsets: ShareOffsets | None,
        ensure_offsets_topic: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self._report = report
        self._image = image
        self._groups = groups
        self._share = share_offsets
        self._ensure_offsets_topic = ensure_offsets_topic

    async def sync(
        self,
        mirror: str,
        client: SyncSource,
        versions: Mapping[int, tuple[int, int]],
        present: Mapping[str, Any],
    ) -> None:
        share_ok = False
        if DESCRIBE_SHARE_GROUP_OFFSETS not in versions:
            self._report.skip(
                mirror, "share_groups", "the source does not support DescribeShareGroupOffsets"
            )
        elif self._share is None:
            self._report.skip(
                mirror, "share_groups", "share groups are off here (group.share.enable)"
            )
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
            self._report.skip(mirror, "groups", f"the source does not support {', '.join(lacking)}")
            return
        if not present:
            return
        mcfg = self._image().config(MIRROR_RESOURCE, mirror)
        try:
            include = compile_patterns(mcfg.get(mirror_config.GROUPS_INCLUDE, ".*"))
        except re.error as e:
            self._report.error(mirror, "groups", f"bad {mirror_config.GROUPS_INCLUDE}: {e}")
            return
        # asked at the source under its names; applied here under ours (prefixed topics, and
        # prefixed groups with mirror.group.prefix.enable)
        naming = mirror_names.naming(mcfg)
        to_local = {(getattr(src, "name", n) or n): n for n, src in present.items()}
        topics = {s: sorted(present[n].partitions) for s, n in to_local.items()}
        try:
            listed = [
                g
                for g in await self._report.call(client.list_groups())
                if g.state.lower() != "dead" and any(p.fullmatch(g.group_id) for p in include)
            ]
            wanted = [g.group_id for g in listed if g.group_type.lower() != "share"]
            shares = [g.group_id for g in listed if g.group_type.lower() == "share" and share_ok]
            coordinators = await self._report.call(client.group_coordinators(wanted + shares))
        except Exception as e:
            self._report.error(mirror, "groups", f"listing source groups: {e or type(e).__name__}")
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
                    self._report.error(
                        mirror, kind, f"group {gid} has no coordinator at the source"
                    )
                    continue
                try:
                    offsets = await self._report.call(read(node, gid, topics))
                except Exception as e:
                    self._report.error(mirror, kind, f"{rpc} {gid}: {e or type(e).__name__}")
                    continue
                local = {(to_local[t], p): o for (t, p), o in offsets.items() if t in to_local}
                if not local:
                    continue
                if not ensured and self._ensure_offsets_topic is not None:
                    await self._ensure_offsets_topic()
                    ensured = True
                await apply(mirror, naming.local_group(gid), local)

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
            self._report.error(mirror, "share_groups", f"share group {gid}: state unreadable ({e})")
            return
        if not changed:
            return
        (code, message), done = await self._share.alter(gid, changed)
        if code in (ErrorCode.non_empty_group, ErrorCode.not_coordinator):
            # members joined meanwhile, or another node of ours coordinates it (and syncs it)
            log.debug("mirror %s: share group %s not synced here (%s)", mirror, gid, code.name)
            return
        if code != ErrorCode.none:
            self._report.error(
                mirror, "share_groups", f"share group {gid}: {code.name} {message or ''}"
            )
            return
        failed = sorted({c.name for c, _m in done.values() if c != ErrorCode.none})
        if failed:
            self._report.error(mirror, "share_groups", f"share group {gid}: {', '.join(failed)}")
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
            self._report.error(
                mirror, "groups", f"group {gid}: local offsets unreadable ({code.name})"
            )
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
            self._report.error(mirror, "groups", f"committing offsets of group {gid}: {names}")
        else:
            log.debug("mirror %s: group %s: %d offsets synced", mirror, gid, len(items))
