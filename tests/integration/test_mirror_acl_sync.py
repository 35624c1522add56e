"""Mirror ACL sync between two real kmirror nodes (refresh every 500 ms), both with the
StandardAuthorizer (User:ANONYMOUS a super user, so the mirror may read the source): ACLs the
include rules select follow the source (created, then deleted), others are not copied, and the
destination's own ACLs are left alone. Driven by kafka-mirrors.sh's main() and confluent-kafka's
AdminClient."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from .clients import wait_for
from .mirror_helpers import create_mirror, running, scrape, total, write_mirror_config
from .node import Node

MIRROR = "acl-mirror"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURED = {
    "authorizer__class__name": STANDARD,
    "super__users": "User:ANONYMOUS",
}
ALL_ACLS = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def _acl(rtype: ResourceType, name: str, principal: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


def _last_refresh(node: Node) -> float:
    """When the node's last metadata refresh of the mirror finished (its Prometheus gauge)."""
    name = "kafka_server_mirror_metadata_last_refresh_timestamp_seconds"
    return total(scrape(node), name, mirror=MIRROR)


def _acls(admin: AdminClient) -> set[AclBinding]:
    return set(admin.describe_acls(ALL_ACLS).result(10))


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    src = Node(tmp_path / "src", **SECURED)
    dst = Node(
        tmp_path / "dst",
        mirror__metadata__refresh__interval__ms="500",
        **SECURED,
    )
    with running(src, dst):
        yield src, dst


def test_included_acls_follow_the_source(pair: tuple[Node, Node]) -> None:
    src, dst = pair
    props = write_mirror_config(
        dst.workdir.parent / "mirror.properties",
        src.bootstrap,
        "mirror.acl.include=TOPIC;orders.*,GROUP;.*;READ",
    )
    src_admin = AdminClient({"bootstrap.servers": src.bootstrap})
    dst_admin = AdminClient({"bootstrap.servers": dst.bootstrap})
    orders = _acl(ResourceType.TOPIC, "orders-eu", "User:alice", AclOperation.READ)
    group = _acl(ResourceType.GROUP, "billing", "User:alice", AclOperation.READ)
    excluded = _acl(ResourceType.TOPIC, "payments", "User:bob", AclOperation.WRITE)
    local = _acl(ResourceType.TOPIC, "orders-local", "User:carol", AclOperation.READ)
    for f in src_admin.create_acls([orders, group, excluded]).values():
        f.result(10)
    for f in dst_admin.create_acls([local]).values():
        f.result(10)

    create_mirror(dst, MIRROR, props)
    wait_for(
        lambda: _acls(dst_admin) == {orders, group, local},
        20,
        "the included ACLs at the destination",
        step=0.1,
    )

    for f in src_admin.delete_acls(
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                "orders-eu",
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ]
    ).values():
        assert f.result(10) == [orders]
    wait_for(
        lambda: _acls(dst_admin) == {group, local},
        20,
        "the ACL deleted at the source to go",
        step=0.1,
    )
    # three more refreshes (counted by the node's last-refresh gauge): nothing else changes,
    # the excluded and the local ACL stay as they are
    seen = [_last_refresh(dst)]

    def three_more() -> bool:
        now = _last_refresh(dst)
        if now > seen[-1]:
            seen.append(now)
        return len(seen) > 3

    wait_for(three_more, 20, "three more metadata refreshes", step=0.05)
    assert _acls(dst_admin) == {group, local}
    assert "ACLs synced from the source" in dst.output.read_text()
