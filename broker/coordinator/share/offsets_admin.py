"""Setting and dropping a share group's share-partition start offsets (SPSO), for
AlterShareGroupOffsets / DeleteShareGroupOffsets and the mirror's share group sync (KIP-1279).

Only while the group has no members (the group coordinator says, NON_EMPTY_GROUP otherwise).
Alter makes a group that does not exist yet, as Kafka, then writes each share-partition a new
state epoch at its start offset with nothing in flight (InitializeShareGroupState at the share
coordinator): a partition leader that cached the old state drops it on the next new share
session, and its own writes with the old state epoch are fenced. Delete drops the states.
Around the share coordinator's work the group's record 15 says what is going on, as Kafka's:
altered partitions are initializing, then initialized (or forgotten if that failed); deleted
topics are deleting, then gone (kept as deleting if a partition's delete failed).
"""

import uuid
from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from ..group.coordinator import GroupCoordinator
from ..runtime import CoordinatorError
from .persister import SharePersister
from .state_records import ShareKey

Outcome = tuple[ErrorCode, str | None]


class ShareOffsetsAdmin:
    def __init__(self, groups: GroupCoordinator, persister: SharePersister) -> None:
        self.groups = groups
        self.persister = persister

    async def alter(
        self,
        group_id: str,
        starts: Mapping[ShareKey, int],
        names: Mapping[uuid.UUID, str] | None = None,
    ) -> tuple[Outcome, dict[ShareKey, Outcome]]:
        """(the group's outcome, each share-partition's); none of the latter if the former
        is an error. `names`: the topics' names, for record 15."""
        parts = _parts(starts, names or {})
        group = await self.groups.share_group_offsets_change(
            group_id, create=True, initializing=parts
        )
        if group[0] != ErrorCode.none:
            return group, {}
        out = {k: await self._initialize(k, start) for k, start in starts.items()}
        ok = [k for k, (code, _) in out.items() if code == ErrorCode.none]
        bad = [k for k in out if k not in ok]
        await self.groups.share_state_change_done(
            group_id, _parts(ok, names or {}), _parts(bad, names or {}), []
        )
        return group, out

    async def delete(
        self,
        group_id: str,
        keys: Iterable[ShareKey],
        names: Mapping[uuid.UUID, str] | None = None,
    ) -> tuple[Outcome, dict[ShareKey, Outcome]]:
        keys = list(keys)
        topics = {k.topic_id: (names or {}).get(k.topic_id, "") for k in keys}
        group = await self.groups.share_group_offsets_change(
            group_id, create=False, deleting=topics
        )
        if group[0] != ErrorCode.none:
            return group, {}
        out: dict[ShareKey, Outcome] = {}
        for k in keys:
            try:
                await self.persister.delete(k)
                out[k] = (ErrorCode.none, None)
            except CoordinatorError as exc:
                out[k] = (exc.code, str(exc))
        failed = {k.topic_id for k, (code, _) in out.items() if code != ErrorCode.none}
        await self.groups.share_state_change_done(
            group_id, {}, {}, [t for t in topics if t not in failed]
        )
        return group, out

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """One share-partition's state dropped (DeleteGroups of a share group)."""
        await self.persister.delete(ShareKey(group_id, topic_id, partition))

    async def start_offset(self, k: ShareKey) -> int | None:
        """The stored SPSO; None without state. Raises `CoordinatorError`."""
        found = await self.persister.read(k)
        return found.start_offset if found is not None else None

    async def alterable(self, group_id: str) -> ErrorCode:
        """Whether `alter` may go ahead for the group as it is now: NONE (no members, or no
        group yet), NON_EMPTY_GROUP, or why this node cannot say (NOT_COORDINATOR...)."""
        described = await self.groups.share_group_describe(group_id)
        if described.error == ErrorCode.group_id_not_found:
            return ErrorCode.none  # none yet (alter makes it), or another type's (alter says)
        if described.error != ErrorCode.none:
            return described.error
        return ErrorCode.non_empty_group if described.members else ErrorCode.none

    async def _initialize(self, k: ShareKey, start: int) -> Outcome:
        try:
            old = await self.persister.read(k)
            await self.persister.initialize(k, old.state_epoch + 1 if old else 1, start)
        except CoordinatorError as exc:
            return exc.code, str(exc)
        return ErrorCode.none, None


def _parts(
    keys: Iterable[ShareKey], names: Mapping[uuid.UUID, str]
) -> dict[uuid.UUID, tuple[str, list[int]]]:
    out: dict[uuid.UUID, tuple[str, list[int]]] = {}
    for k in keys:
        out.setdefault(k.topic_id, (names.get(k.topic_id, ""), []))[1].append(k.partition)
    return out
