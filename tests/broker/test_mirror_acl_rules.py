"""The ``mirror.acl.include`` rule grammar of KIP-1279."""

import pytest

from broker.mirror.core.acl_rules import (
    AclBinding,
    AclRuleError,
    binding_from_codes,
    included,
    parse_acl_include,
    split_rules,
)

ALICE_READ_ORDERS = AclBinding("TOPIC", "orders-eu", "READ", "ALLOW", "User:alice")
BOB_READ_GROUP = AclBinding("GROUP", "consumer-1", "READ", "ALLOW", "User:bob")
APP_WRITE = AclBinding("TOPIC", "payments", "WRITE", "DENY", "User:app-7")
CLUSTER = AclBinding("CLUSTER", "kafka-cluster", "ALTER", "ALLOW", "User:admin")
ALL = [ALICE_READ_ORDERS, BOB_READ_GROUP, APP_WRITE, CLUSTER]


def _matching(value: str | None) -> list[AclBinding]:
    rules = parse_acl_include(value)
    return [a for a in ALL if included(rules, a)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ALL),
        ("", ALL),
        ("*", ALL),
        ("TOPIC;orders.*", [ALICE_READ_ORDERS]),
        ("*;*;*;*;User:alice", [ALICE_READ_ORDERS]),
        ("*;*;*;*;User:app-.*", [APP_WRITE]),
        ("TOPIC;*;READ;ALLOW", [ALICE_READ_ORDERS]),
        ("GROUP;consumer-.*;READ;ALLOW;User:bob", [BOB_READ_GROUP]),
        ("GROUP;consumer-.*;READ;ALLOW;User:alice", []),
        ("TOPIC;orders.*,*;*;*;*;User:bob", [ALICE_READ_ORDERS, BOB_READ_GROUP]),
        ("topic;*;write;deny", [APP_WRITE]),  # enum names are case-insensitive
        ("TOPIC;orders", []),  # names match in full, not by prefix
        ("CLUSTER", [CLUSTER]),
        ("TOPIC;o{1,3}rders-.*", [ALICE_READ_ORDERS]),  # a comma inside braces splits nothing
        ("*;*;DESCRIBE_CONFIGS", []),
    ],
)
def test_rules_from_the_kip(value: str | None, expected: list[AclBinding]) -> None:
    assert _matching(value) == expected


def test_split_keeps_regex_commas() -> None:
    assert split_rules("TOPIC;a{1,2},GROUP;[x,y]z, *") == ["TOPIC;a{1,2}", "GROUP;[x,y]z", "*"]
    assert split_rules(r"TOPIC;a\,b,*") == [r"TOPIC;a\,b", "*"]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("BANANA", "resourceType"),
        ("TOPIC;*;EAT", "operation"),
        ("TOPIC;*;READ;MAYBE", "permissionType"),
        ("TOPIC;(", "resourceName regex"),
        ("*;*;*;*;User:[", "principal regex"),
        ("*;*;*;*;*;*", "6 fields"),
        ("TOPIC;;READ", "empty resourceName"),
        ("*,,TOPIC", "empty ACL rule"),
    ],
)
def test_bad_rules_say_why(value: str, fragment: str) -> None:
    with pytest.raises(AclRuleError, match=fragment.replace("(", r"\(")):
        parse_acl_include(value)


def test_bindings_from_wire_codes() -> None:
    b = binding_from_codes(2, "orders-eu", 3, 3, "User:alice")
    assert b == ALICE_READ_ORDERS
    assert binding_from_codes(4, "kafka-cluster", 7, 3, "User:admin") == CLUSTER
    assert included(parse_acl_include("TOPIC;orders-.*;READ"), b)
