"""The authorizer's decisions (Kafka's StandardAuthorizer rules) over hand-made ACL sets."""

import uuid
from types import MappingProxyType

import pytest

from broker.security.acls import (
    Acl,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from broker.security.authorizer import (
    AclIndex,
    Authorizer,
    AuthorizerConfigError,
    build_authorizer,
    decide,
    parse_super_users,
)

Op, Res, Pat, Perm = AclOperation, ResourceType, PatternType, PermissionType
HOST = "10.0.0.1"


def acl(
    name: str,
    op: AclOperation,
    perm: PermissionType = Perm.ALLOW,
    principal: str = "User:alice",
    *,
    pattern: PatternType = Pat.LITERAL,
    rtype: ResourceType = Res.TOPIC,
    host: str = "*",
) -> Acl:
    return Acl(rtype, name, pattern, principal, host, op, perm)


def ok(
    acls: list[Acl],
    op: AclOperation,
    name: str = "orders",
    principal: str = "User:alice",
    rtype: ResourceType = Res.TOPIC,
    host: str = HOST,
    **kw: object,
) -> bool:
    return decide(AclIndex.build(acls), principal, host, op, rtype, name, **kw)  # type: ignore[arg-type]


def test_no_acls_denies_unless_allow_everyone() -> None:
    assert not ok([], Op.READ)
    assert ok([], Op.READ, allow_if_no_acl=True)
    # ACLs for someone else on the resource: the default no longer applies
    others = [acl("orders", Op.READ, principal="User:bob")]
    assert not ok(others, Op.READ, allow_if_no_acl=True)
    # ...but ACLs on another resource do not count
    assert ok([acl("payments", Op.READ)], Op.READ, allow_if_no_acl=True)


def test_super_users_bypass_even_deny() -> None:
    deny = [acl("orders", Op.ALL, Perm.DENY, "User:root")]
    assert ok(deny, Op.WRITE, principal="User:root", super_users=frozenset({"User:root"}))
    assert not ok(deny, Op.WRITE, principal="User:root")


def test_literal_prefixed_and_wildcard_resources() -> None:
    acls = [
        acl("orders", Op.READ),
        acl("pay", Op.WRITE, pattern=Pat.PREFIXED),
        acl("*", Op.DESCRIBE_CONFIGS),
    ]
    assert ok(acls, Op.READ, "orders")
    assert not ok(acls, Op.READ, "orders2")  # literal means exactly that name
    assert ok(acls, Op.WRITE, "payments")
    assert ok(acls, Op.WRITE, "pay")
    assert not ok(acls, Op.WRITE, "pa")
    assert ok(acls, Op.DESCRIBE_CONFIGS, "anything-at-all")
    # a literal ACL named like a prefix of the resource does not apply
    assert not ok([acl("ord", Op.READ)], Op.READ, "orders")
    # other resource types are separate
    assert not ok(acls, Op.READ, "orders", rtype=Res.GROUP)


def test_wildcard_principal_and_host() -> None:
    acls = [acl("orders", Op.READ, principal="User:*")]
    assert ok(acls, Op.READ, principal="User:anyone")
    pinned = [acl("orders", Op.READ, host="10.0.0.9")]
    assert not ok(pinned, Op.READ, host="10.0.0.1")
    assert ok(pinned, Op.READ, host="10.0.0.9")


def test_deny_wins_over_allow() -> None:
    acls = [
        acl("orders", Op.ALL),
        acl("ord", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED),
    ]
    assert ok(acls, Op.READ)
    assert not ok(acls, Op.WRITE)
    # a DENY for everyone beats an ALLOW for alice
    everyone = [acl("orders", Op.READ), acl("*", Op.READ, Perm.DENY, "User:*")]
    assert not ok(everyone, Op.READ)


def test_implied_operations_only_widen_allows() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert ok([acl("orders", op)], Op.DESCRIBE), op
    assert not ok([acl("orders", Op.CREATE)], Op.DESCRIBE)
    assert ok([acl("orders", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not ok([acl("orders", Op.DESCRIBE)], Op.READ)
    # DENY READ does not deny DESCRIBE (and leaves an ALLOW DESCRIBE in force)
    acls = [acl("orders", Op.READ, Perm.DENY), acl("orders", Op.DESCRIBE)]
    assert ok(acls, Op.DESCRIBE)
    assert not ok(acls, Op.READ)


def test_cluster_mirror_resources() -> None:
    acls = [
        acl("*", Op.DESCRIBE, rtype=Res.CLUSTER_MIRROR),
        acl("dr", Op.ALTER, rtype=Res.CLUSTER_MIRROR),
    ]
    assert ok(acls, Op.DESCRIBE, "any-mirror", rtype=Res.CLUSTER_MIRROR)
    assert ok(acls, Op.ALTER, "dr", rtype=Res.CLUSTER_MIRROR)
    assert not ok(acls, Op.ALTER, "prod", rtype=Res.CLUSTER_MIRROR)


def test_authorizer_follows_the_current_acl_mapping() -> None:
    state: dict[str, MappingProxyType[uuid.UUID, Acl]] = {"acls": MappingProxyType({})}
    a = Authorizer(lambda: state["acls"], allow_if_no_acl=False)
    assert not a.authorize("User:alice", HOST, Op.READ, Res.TOPIC, "orders")
    state["acls"] = MappingProxyType({uuid.uuid4(): acl("orders", Op.READ)})
    assert a.authorize("User:alice", HOST, Op.READ, Res.TOPIC, "orders")
    bits = a.authorized_operations("User:alice", HOST, Res.TOPIC, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_authorize_any_resource_of_a_type() -> None:
    def any_ok(acls: list[Acl], **kw: object) -> bool:
        mapping = MappingProxyType({uuid.uuid4(): a for a in acls})
        return Authorizer(lambda: mapping, **kw).authorize_any(  # type: ignore[arg-type]
            "User:alice", HOST, Op.WRITE, Res.TOPIC
        )

    assert any_ok([acl("orders", Op.WRITE)])
    assert not any_ok([])
    assert any_ok([], allow_if_no_acl=True)
    # the only allowed topic is denied by a covering prefix
    assert not any_ok(
        [acl("orders", Op.WRITE), acl("ord", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)]
    )
    assert not any_ok([acl("orders", Op.WRITE), acl("*", Op.WRITE, Perm.DENY)])
    assert any_ok([acl("*", Op.ALL)])


def test_config_parsing() -> None:
    assert parse_super_users(" User:a ; User:b;;") == frozenset({"User:a", "User:b"})
    with pytest.raises(AuthorizerConfigError, match="Type:name"):
        parse_super_users("alice")
    assert build_authorizer("", "", False, lambda: {}) is None
    with pytest.raises(AuthorizerConfigError, match="not supported"):
        build_authorizer("com.example.MyAuthorizer", "", False, lambda: {})
    a = build_authorizer(
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "User:x", True, lambda: {}
    )
    assert a is not None and a.super_users == frozenset({"User:x"}) and a.allow_if_no_acl
