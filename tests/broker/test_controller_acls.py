"""ACL records through the controller: create/delete semantics, replay into the image, and the
mirror-owned ACL bookkeeping."""

import asyncio
import json
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.acls import OWNED_KEY, AclController
from broker.controller.controller import Controller, Validators
from broker.controller.mirrors import MirrorController
from broker.metadata.image import MIRROR_RESOURCE, MetadataImage, apply_records
from broker.security.acls import (
    Acl,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from protocol.metadata_records import decode_metadata_record, encode_metadata_record

from .test_controller_image import MemoryQuorum

Op, Res, Pat, Perm = AclOperation, ResourceType, PatternType, PermissionType


def _acl(name: str, principal: str = "User:alice", op: AclOperation = Op.READ) -> Acl:
    return Acl(Res.TOPIC, name, Pat.LITERAL, principal, "*", op, Perm.ALLOW)


class RecordingQuorum(MemoryQuorum):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[Any] = []

    async def append(self, records: list[Any]) -> int:
        self.records += records
        return await super().append(records)


def _world() -> tuple[RecordingQuorum, Controller, AclController]:
    q = RecordingQuorum()
    c = Controller(q, lambda: q.image, Validators(lambda k, v: v, lambda k, v: v), node_id=1)
    return q, c, AclController(c)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_create_is_idempotent_and_validated() -> None:
    q, _c, acls = _world()
    a, b = _acl("orders"), _acl("payments", "User:bob")
    bad = Acl(Res.TOPIC, "", Pat.LITERAL, "User:x", "*", Op.READ, Perm.ALLOW)
    assert run(acls.create_acls([a, b, a, bad])) == [
        None,
        None,
        None,
        "Resource name should not be empty",
    ]
    assert sorted(q.image.acls.values()) == [a, b]
    offset = q.offset
    assert run(acls.create_acls([a])) == [None]  # already there: no new record
    assert q.offset == offset


def test_delete_by_filters_reports_each_match() -> None:
    q, _c, acls = _world()
    a, b, c = _acl("orders"), _acl("orders", "User:bob"), _acl("payments")
    run(acls.create_acls([a, b, c]))
    results = run(
        acls.delete_acls(
            [
                AclFilter(Res.TOPIC, "orders", Pat.LITERAL),
                AclFilter(principal="User:bob"),  # matches b again: removed once
                AclFilter(resource_type=0),
            ]
        )
    )
    assert sorted(results[0].deleted) == [a, b] and results[1].deleted == [b]
    assert results[2].error is not None and "resource type" in results[2].error
    assert list(q.image.acls.values()) == [c]


def test_acl_records_replay_into_the_same_image() -> None:
    q, _c, acls = _world()
    run(acls.create_acls([_acl("orders"), _acl("payments")]))
    run(acls.delete_acls([AclFilter(Res.TOPIC, "payments")]))
    # replaying every committed record from scratch (a restart) gives the same ACLs
    records = [
        (i, decode_metadata_record(encode_metadata_record(r))) for i, r in enumerate(q.records)
    ]
    replayed, delta = apply_records(MetadataImage(), records)
    assert dict(replayed.acls) == dict(q.image.acls)
    assert delta.acls_changed
    # an image change without ACL records keeps the very same mapping (the authorizer's cache)
    same, delta2 = apply_records(replayed, [])
    assert same.acls is replayed.acls and not delta2.acls_changed


def test_mirror_owns_only_what_it_created() -> None:
    async def go() -> None:
        q, c, acls = _world()
        mc = MirrorController(c, state_topic_partitions=1, state_topic_replication_factor=1)
        code, why = await mc.create_mirror("m", {"bootstrap.servers": "src:9092"})
        assert code == ErrorCode.none, why
        local, mine, other = _acl("local"), _acl("mine"), _acl("other")
        await acls.create_acls([local])
        out = await acls.sync_mirror_acls("m", {local, mine})
        assert out.created == [mine] and not out.deleted
        owned = json.loads(q.image.config(MIRROR_RESOURCE, "m")[OWNED_KEY])
        assert len(owned) == 1  # the pre-existing ACL was not taken over
        out = await acls.sync_mirror_acls("m", {other})
        assert out.created == [other] and out.deleted == [mine]
        assert sorted(q.image.acls.values()) == sorted([local, other])
        # an owned ACL deleted by an operator is forgotten, and re-created while wanted
        await acls.delete_acls([AclFilter(Res.TOPIC, "other")])
        out = await acls.sync_mirror_acls("m", {other})
        assert out.created == [other]
        # nothing wanted: the mirror's own ACLs go, the operator's stay
        out = await acls.sync_mirror_acls("m", set())
        assert out.deleted == [other] and list(q.image.acls.values()) == [local]
        assert OWNED_KEY not in q.image.config(MIRROR_RESOURCE, "m")
        # a mirror that does not exist owns nothing
        assert not (await acls.sync_mirror_acls("gone", {mine})).created

    run(go())
