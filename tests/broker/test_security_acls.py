"""ACL filters (DescribeAcls / DeleteAcls semantics) and CreateAcls validation."""

from broker.security.acls import (
    Acl,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    creation_error,
    filter_error,
)

Op, Res, Pat, Perm = AclOperation, ResourceType, PatternType, PermissionType


def _acl(name: str, pattern: PatternType, rtype: ResourceType = Res.TOPIC, **kw: object) -> Acl:
    fields: dict[str, object] = {
        "principal": "User:alice",
        "host": "*",
        "operation": Op.READ,
        "permission_type": Perm.ALLOW,
    }
    fields.update(kw)
    return Acl(rtype, name, pattern, **fields)  # type: ignore[arg-type]


LIT = _acl("orders", Pat.LITERAL)
PRE = _acl("ord", Pat.PREFIXED)
STAR = _acl("*", Pat.LITERAL)
OTHER = _acl("payments", Pat.LITERAL)
GROUP = _acl("orders", Pat.LITERAL, Res.GROUP)
ALL = [LIT, PRE, STAR, OTHER, GROUP]


def _matching(f: AclFilter) -> list[Acl]:
    return [a for a in ALL if f.matches(a)]


def test_pattern_type_filters() -> None:
    assert _matching(AclFilter()) == ALL
    assert _matching(AclFilter(Res.TOPIC)) == [LIT, PRE, STAR, OTHER]
    # ANY with a name: that exact name, whatever the pattern type
    assert _matching(AclFilter(Res.ANY, "orders")) == [LIT, GROUP]
    assert _matching(AclFilter(Res.TOPIC, "ord", Pat.ANY)) == [PRE]
    # LITERAL / PREFIXED: that pattern type (and name, if given)
    assert _matching(AclFilter(Res.TOPIC, None, Pat.LITERAL)) == [LIT, STAR, OTHER]
    assert _matching(AclFilter(Res.TOPIC, "orders", Pat.PREFIXED)) == []
    assert _matching(AclFilter(Res.TOPIC, "ord", Pat.PREFIXED)) == [PRE]
    # MATCH: every ACL that applies to a topic named "orders"
    assert _matching(AclFilter(Res.TOPIC, "orders", Pat.MATCH)) == [LIT, PRE, STAR]
    assert _matching(AclFilter(Res.TOPIC, "payments", Pat.MATCH)) == [STAR, OTHER]


def test_entry_filters_are_exact() -> None:
    bob = _acl("orders", Pat.LITERAL, principal="User:bob", operation=Op.WRITE)
    deny = _acl("orders", Pat.LITERAL, permission_type=Perm.DENY, host="10.0.0.1")
    acls = [LIT, bob, deny]
    assert [a for a in acls if AclFilter(principal="User:bob").matches(a)] == [bob]
    # "User:*" in a filter is a literal principal, not a wildcard
    assert [a for a in acls if AclFilter(principal="User:*").matches(a)] == []
    assert [a for a in acls if AclFilter(operation=Op.WRITE).matches(a)] == [bob]
    assert [a for a in acls if AclFilter(permission_type=Perm.DENY).matches(a)] == [deny]
    assert [a for a in acls if AclFilter(host="10.0.0.1").matches(a)] == [deny]


def test_bad_filters() -> None:
    assert filter_error(AclFilter()) is None
    assert "resource type" in (filter_error(AclFilter(resource_type=0)) or "")
    assert "resource type" in (filter_error(AclFilter(resource_type=42)) or "")
    assert "pattern type" in (filter_error(AclFilter(pattern_type=0)) or "")
    assert "operation" in (filter_error(AclFilter(operation=99)) or "")
    assert "permission type" in (filter_error(AclFilter(permission_type=0)) or "")
    # CLUSTER_MIRROR (KIP-1279) is a known resource type
    assert filter_error(AclFilter(resource_type=Res.CLUSTER_MIRROR)) is None


def test_creation_checks() -> None:
    assert creation_error(LIT) is None
    assert creation_error(_acl("dr", Pat.LITERAL, Res.CLUSTER_MIRROR)) is None
    cases = {
        "Invalid resourceType ANY": _acl("x", Pat.LITERAL, Res.ANY),
        "Invalid resourceType UNKNOWN(77)": _acl("x", Pat.LITERAL, 77),  # type: ignore[arg-type]
        "Invalid patternType MATCH": _acl("x", Pat.MATCH),
        "Invalid operation ANY": _acl("x", Pat.LITERAL, operation=Op.ANY),
        "Invalid permissionType ANY": _acl("x", Pat.LITERAL, permission_type=Perm.ANY),
        "Resource name should not be empty": _acl("", Pat.LITERAL),
        "The only valid name for the CLUSTER resource is kafka-cluster": _acl(
            "my-cluster", Pat.LITERAL, Res.CLUSTER
        ),
        "Could not parse principal 'alice'": _acl("x", Pat.LITERAL, principal="alice"),
    }
    for message, bad in cases.items():
        assert message in (creation_error(bad) or ""), (message, creation_error(bad))
    assert creation_error(_acl("kafka-cluster", Pat.LITERAL, Res.CLUSTER)) is None
