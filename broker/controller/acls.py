"""ACL changes as metadata records: CreateAcls, DeleteAcls and the mirror ACL sync.

Shares the controller's lock, image and quorum (like `mirrors`). As in Kafka's KRaft controller:
creating an ACL that already exists succeeds without a new record; a DeleteAcls filter removes
every stored ACL it matches (an ACL matched by several filters is removed once and reported under
each); the records of one request are committed as one batch.

Mirror sync (`sync_mirror_acls`): a mirror owns the ACLs it created; their ids are kept with the
mirror under the internal key ``internal.acls.mirrored`` (committed in the same batch as the ACL
records, replayed from the log, forgotten when the mirror is deleted). One sync makes the owned
set equal to the wanted set: wanted ACLs missing here are created and owned, owned ACLs no longer
wanted are deleted. ACLs created here by anyone else are never deleted by a mirror, and an ACL
that already exists here is not taken over.
"""

import json
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from protocol.metadata_records import latest_type

from ..metadata.image import MIRROR_RESOURCE, MetadataImage
from ..security.acls import Acl, AclFilter, creation_error, filter_error
from .controller import ConfigRecord, Controller
from .mirror_config import INTERNAL_PREFIX

log = logging.getLogger(__name__)

AccessControlEntryRecord = latest_type("AccessControlEntryRecord")
RemoveAccessControlEntryRecord = latest_type("RemoveAccessControlEntryRecord")

OWNED_KEY: Final = INTERNAL_PREFIX + "acls.mirrored"


@dataclass(slots=True)
class DeleteResult:
    error: str | None = None  # INVALID_REQUEST with this message
    deleted: list[Acl] = field(default_factory=list)


@dataclass(slots=True)
class SyncOutcome:
    created: list[Acl] = field(default_factory=list)
    deleted: list[Acl] = field(default_factory=list)
    refused: list[tuple[Acl, str]] = field(default_factory=list)  # source ACLs we cannot store


def owned_ids(configs: Any) -> set[uuid.UUID]:
    """The ACL ids a mirror created (its MIRROR-resource configs)."""
    raw = configs.get(OWNED_KEY)
    if not raw:
        return set()
    try:
        return {uuid.UUID(x) for x in json.loads(raw)}
    except (ValueError, TypeError, AttributeError):
        log.error("ignoring the unreadable mirror bookkeeping %s=%r", OWNED_KEY, raw)
        return set()


def _record(acl_id: uuid.UUID, acl: Acl) -> Any:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
    )


def _new_id(img: MetadataImage, taken: Collection[uuid.UUID]) -> uuid.UUID:
    while True:
        acl_id = uuid.uuid4()
        if acl_id not in img.acls and acl_id not in taken:
            return acl_id


class AclController:
    def __init__(self, controller: Controller) -> None:
        self._c = controller

    async def create_acls(self, acls: Sequence[Acl]) -> list[str | None]:
        """Per ACL: None (created, or already there) or why it is refused (INVALID_REQUEST)."""
        async with self._c.lock:
            img = self._c.current_image()
            existing = set(img.acls.values())
            results: list[str | None] = []
            records: list[Any] = []
            new: dict[uuid.UUID, Acl] = {}
            for acl in acls:
                why = creation_error(acl)
                results.append(why)
                if why is None and acl not in existing:
                    existing.add(acl)
                    acl_id = _new_id(img, new)
                    new[acl_id] = acl
                    records.append(_record(acl_id, acl))
            await self._c.commit(records)
            return results

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteResult]:
        async with self._c.lock:
            img = self._c.current_image()
            results: list[DeleteResult] = []
            removed: dict[uuid.UUID, Any] = {}
            for f in filters:
                why = filter_error(f)
                if why is not None:
                    results.append(DeleteResult(why))
                    continue
                res = DeleteResult()
                for acl_id, acl in img.acls.items():
                    if f.matches(acl):
                        res.deleted.append(acl)
                        removed.setdefault(acl_id, RemoveAccessControlEntryRecord(id=acl_id))
                results.append(res)
            await self._c.commit(list(removed.values()))
            return results

    async def sync_mirror_acls(self, mirror: str, wanted: Collection[Acl]) -> SyncOutcome:
        """Make the ACLs ``mirror`` owns equal ``wanted`` (see the module docstring)."""
        out = SyncOutcome()
        async with self._c.lock:
            img = self._c.current_image()
            configs = img.config(MIRROR_RESOURCE, mirror)
            if not configs:
                return out  # deleted meanwhile: nothing to own
            before = owned_ids(configs)
            owned = {i for i in before if i in img.acls}  # others may have deleted some
            existing = set(img.acls.values())
            records: list[Any] = []
            for acl_id in sorted(owned):
                acl = img.acls[acl_id]
                if acl not in wanted:
                    owned.discard(acl_id)
                    out.deleted.append(acl)
                    records.append(RemoveAccessControlEntryRecord(id=acl_id))
            new: dict[uuid.UUID, Acl] = {}
            for acl in sorted(wanted):
                if acl in existing:
                    continue
                why = creation_error(acl)
                if why is not None:
                    out.refused.append((acl, why))
                    continue
                existing.add(acl)
                acl_id = _new_id(img, new)
                new[acl_id] = acl
                owned.add(acl_id)
                out.created.append(acl)
                records.append(_record(acl_id, acl))
            if owned != before:
                records.append(
                    ConfigRecord(
                        resource_type=MIRROR_RESOURCE,
                        resource_name=mirror,
                        name=OWNED_KEY,
                        value=json.dumps(sorted(str(i) for i in owned)) if owned else None,
                    )
                )
            await self._c.commit(records)
        return out
