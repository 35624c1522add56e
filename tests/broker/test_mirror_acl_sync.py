"""The metadata sync's ACL step against a fake source and a real controller."""

import logging
from dataclasses import dataclass, field

import pytest

from broker.controller.acls import AclController
from broker.controller.controller import SET, ConfigChange
from broker.metadata.image import MIRROR_RESOURCE
from broker.mirror.source import SourceError
from broker.security.acls import (
    Acl,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

from .test_mirror_metadata_sync import MOCK_APIS, FakeSource, World, run

Op, Res, Pat, Perm = AclOperation, ResourceType, PatternType, PermissionType


def _acl(rtype: ResourceType, name: str, principal: str = "User:alice") -> Acl:
    return Acl(rtype, name, Pat.LITERAL, principal, "*", Op.READ, Perm.ALLOW)


@dataclass
class AclSource(FakeSource):
    acls: list[Acl] = field(default_factory=list)
    acl_error: int | None = None

    async def describe_acls(self) -> list[Acl]:
        self.calls.append("describe_acls")
        if self.acl_error is not None:
            raise SourceError(f"DescribeAcls: error {self.acl_error}", self.acl_error)
        return list(self.acls)


def _world(src: AclSource) -> World:
    w = World(src)
    w.kwargs["acls"] = AclController(w.c)
    return w


def test_included_source_acls_are_created_and_removed_with_the_source() -> None:
    async def go() -> None:
        orders = _acl(Res.TOPIC, "orders-1")
        other = _acl(Res.TOPIC, "payments")
        group = _acl(Res.GROUP, "orders-app", "User:bob")
        src = AclSource(acls=[orders, other, group])
        w = _world(src)
        sync = await w.setup({"mirror.acl.include": "TOPIC;orders.*,GROUP;.*;*;*;User:bob"})
        local = _acl(Res.TOPIC, "orders-local", "User:carol")  # the destination's own
        await w.kwargs["acls"].create_acls([local])
        await sync.refresh_now("m")
        assert set(w.q.image.acls.values()) == {orders, group, local}
        src.acls = [group]  # deleted at the source
        await sync.refresh_now("m")
        assert set(w.q.image.acls.values()) == {group, local}
        # narrowing the rules drops what the mirror copied, never the local ACL
        changes = [ConfigChange(MIRROR_RESOURCE, "m", [("mirror.acl.include", SET, "TOPIC")])]
        await w.c.alter_configs(changes, False)
        await sync.refresh_now("m")
        assert set(w.q.image.acls.values()) == {local}
        assert not sync.errors

    run(go())


def test_a_source_without_authorizer_or_describe_acls_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def go() -> None:
        src = AclSource(acl_error=54)
        w = _world(src)
        sync = await w.setup()
        with caplog.at_level(logging.INFO):
            await sync.refresh_now("m")
            await sync.refresh_now("m")
        assert sync.skipped[("m", "acls")] == 2 and not sync.errors
        assert caplog.text.count("the source has no authorizer") == 1
        src.versions = dict(MOCK_APIS)  # no DescribeAcls at all
        calls = src.calls.count("describe_acls")
        await sync.refresh_now("m")
        assert src.calls.count("describe_acls") == calls
        assert sync.skipped[("m", "acls")] == 3

    run(go())


def test_source_errors_and_unstorable_acls_are_counted() -> None:
    async def go() -> None:
        src = AclSource(acl_error=31)  # CLUSTER_AUTHORIZATION_FAILED at the source
        w = _world(src)
        sync = await w.setup()
        await sync.refresh_now("m")
        assert sync.errors[("m", "acls")] == 1
        # an ACL this broker cannot store (unknown resource type 42) is an error, others sync
        src.acl_error = None
        good = _acl(Res.TOPIC, "t")
        src.acls = [_acl(42, "x"), good]  # type: ignore[arg-type]
        await sync.refresh_now("m")
        assert sync.errors[("m", "acls")] == 2
        assert list(w.q.image.acls.values()) == [good]

    run(go())
