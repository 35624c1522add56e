"""The ``mirror.acl.include`` rule grammar (KIP-1279 "MirrorMetadataManager").

The value is a comma-separated list of rules; a rule is up to five ``;``-separated fields,
``resourceType;resourceName;operation;permissionType;principal``. ``*`` is a wildcard for any
field and trailing wildcards may be left out (``TOPIC;orders.*`` = ``TOPIC;orders.*;*;*;*``).
resourceName and principal are regular expressions matched against the whole value; the other
fields are enum names (case-insensitive). An ACL is synced when at least one rule matches it.

Commas inside a regex's ``{m,n}``, ``[...]`` or ``(...)`` do not split rules, so
``TOPIC;o{1,3}rders`` is one rule.
"""

import re
from dataclasses import dataclass
from typing import Final

# Kafka's wire codes (ResourceType, AclOperation, AclPermissionType), for DescribeAcls rows.
RESOURCE_TYPES: Final = {
    2: "TOPIC",
    3: "GROUP",
    4: "CLUSTER",
    5: "TRANSACTIONAL_ID",
    6: "DELEGATION_TOKEN",
    7: "USER",
    8: "CLUSTER_MIRROR",  # KIP-1279
}
OPERATIONS: Final = {
    2: "ALL",
    3: "READ",
    4: "WRITE",
    5: "CREATE",
    6: "DELETE",
    7: "ALTER",
    8: "DESCRIBE",
    9: "CLUSTER_ACTION",
    10: "DESCRIBE_CONFIGS",
    11: "ALTER_CONFIGS",
    12: "IDEMPOTENT_WRITE",
    13: "CREATE_TOKENS",
    14: "DESCRIBE_TOKENS",
    15: "TWO_PHASE_COMMIT",
}
PERMISSIONS: Final = {2: "DENY", 3: "ALLOW"}
WILDCARD: Final = "*"
FIELDS: Final = ("resourceType", "resourceName", "operation", "permissionType", "principal")


class AclRuleError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL as the source describes it (names, not wire codes; see `binding_from_codes`)."""

    resource_type: str
    resource_name: str
    operation: str
    permission_type: str
    principal: str
    host: str = "*"
    pattern_type: str = "LITERAL"


@dataclass(frozen=True, slots=True)
class AclRule:
    """None in a field means wildcard."""

    resource_type: str | None = None
    resource_name: re.Pattern[str] | None = None
    operation: str | None = None
    permission_type: str | None = None
    principal: re.Pattern[str] | None = None

    def matches(self, acl: AclBinding) -> bool:
        return (
            (self.resource_type is None or self.resource_type == acl.resource_type.upper())
            and (
                self.resource_name is None or bool(self.resource_name.fullmatch(acl.resource_name))
            )
            and (self.operation is None or self.operation == acl.operation.upper())
            and (
                self.permission_type is None or self.permission_type == acl.permission_type.upper()
            )
            and (self.principal is None or bool(self.principal.fullmatch(acl.principal)))
        )


def binding_from_codes(
    resource_type: int,
    resource_name: str,
    operation: int,
    permission_type: int,
    principal: str,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        RESOURCE_TYPES.get(resource_type, f"UNKNOWN({resource_type})"),
        resource_name,
        OPERATIONS.get(operation, f"UNKNOWN({operation})"),
        PERMISSIONS.get(permission_type, f"UNKNOWN({permission_type})"),
        principal,
        host,
    )


def split_rules(value: str) -> list[str]:
    """Split on commas outside regex groups, classes and repetition braces."""
    rules: list[str] = []
    depth = 0
    current: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            current.append(ch)
            escaped = False
            continue
        if ch == "\\":
            escaped = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}" and depth > 0:
            depth -= 1
        elif ch == "," and depth == 0:
            rules.append("".join(current))
            current = []
            continue
        current.append(ch)
    rules.append("".join(current))
    return [r.strip() for r in rules]


def _enum(value: str, allowed: dict[int, str], field_name: str, rule: str) -> str | None:
    if value == WILDCARD:
        return None
    upper = value.upper()
    if upper not in allowed.values():
        raise AclRuleError(
            f"invalid {field_name} '{value}' in ACL rule '{rule}' "
            f"(expected * or one of {', '.join(allowed.values())})"
        )
    return upper


def _regex(value: str, field_name: str, rule: str) -> re.Pattern[str] | None:
    if value == WILDCARD:
        return None
    try:
        return re.compile(value)
    except re.error as e:
        raise AclRuleError(f"invalid {field_name} regex '{value}' in ACL rule '{rule}': {e}") from e


def parse_rule(rule: str) -> AclRule:
    parts = [p.strip() for p in rule.split(";")]
    if not rule.strip():
        raise AclRuleError("empty ACL rule")
    if len(parts) > len(FIELDS):
        raise AclRuleError(
            f"ACL rule '{rule}' has {len(parts)} fields; at most {len(FIELDS)} ({';'.join(FIELDS)})"
        )
    for name, part in zip(FIELDS, parts, strict=False):
        if not part:
            raise AclRuleError(f"empty {name} in ACL rule '{rule}' (use * for any)")
    parts += [WILDCARD] * (len(FIELDS) - len(parts))
    return AclRule(
        _enum(parts[0], RESOURCE_TYPES, "resourceType", rule),
        _regex(parts[1], "resourceName", rule),
        _enum(parts[2], OPERATIONS, "operation", rule),
        _enum(parts[3], PERMISSIONS, "permissionType", rule),
        _regex(parts[4], "principal", rule),
    )


def parse_acl_include(value: str | None) -> list[AclRule]:
    """Parse a ``mirror.acl.include`` value (None or empty: the default, everything)."""
    if value is None or not value.strip():
        return [AclRule()]
    return [parse_rule(r) for r in split_rules(value)]


def included(rules: list[AclRule], acl: AclBinding) -> bool:
    return any(r.matches(acl) for r in rules)
