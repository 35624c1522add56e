"""The ACL model: Kafka's wire codes, one ACL (a binding of a resource pattern to an entry), the
filters of DescribeAcls / DeleteAcls, and the checks CreateAcls applies.

Filter semantics (Kafka's ``AclBindingFilter``):

- resource type ANY matches every type; otherwise the types must be equal;
- pattern type ANY: the filter's name (if any) must equal the ACL's name, whatever its pattern
  type; LITERAL / PREFIXED: the ACL must have that pattern type and (if given) that exact name;
  MATCH: every ACL that would apply to a resource named like the filter: a LITERAL ACL of that
  name or of the wildcard ``*``, or a PREFIXED ACL whose name is a prefix of it;
- principal / host: None matches any, otherwise an exact comparison (no wildcard expansion);
- operation / permission type: ANY matches any, otherwise equality.

UNKNOWN (0) or any code this broker does not know is a bad filter (INVALID_REQUEST).
"""

from dataclasses import dataclass
from enum import IntEnum
from typing import Final


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7
    CLUSTER_MIRROR = 8  # KIP-1279


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"
CLUSTER_NAME: Final = "kafka-cluster"  # the only name of the CLUSTER resource

_RESOURCE_TYPES: Final = frozenset(int(t) for t in ResourceType)
_PATTERN_TYPES: Final = frozenset(int(t) for t in PatternType)
_OPERATIONS: Final = frozenset(int(o) for o in AclOperation)
_PERMISSIONS: Final = frozenset(int(p) for p in PermissionType)


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """One ACL, as stored in an AccessControlEntryRecord (codes as plain ints)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def describe(self) -> str:
        """Kafka's rendering, for logs and error messages."""
        return (
            f"(pattern=ResourcePattern(resourceType={_name(ResourceType, self.resource_type)}, "
            f"name={self.resource_name}, patternType={_name(PatternType, self.pattern_type)}), "
            f"entry=(principal={self.principal}, host={self.host}, "
            f"operation={_name(AclOperation, self.operation)}, "
            f"permissionType={_name(PermissionType, self.permission_type)}))"
        )


def _name(enum: type[IntEnum], code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return f"UNKNOWN({code})"


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter; None for name, principal and host means any."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = PermissionType.ANY

    def matches(self, acl: Acl) -> bool:
        return self.matches_pattern(acl) and self.matches_entry(acl)

    def matches_pattern(self, acl: Acl) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if wanted in (PatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        # MATCH: the ACLs that would apply to a resource of this name
        if acl.pattern_type == PatternType.LITERAL:
            return acl.resource_name in (name, WILDCARD)
        if acl.pattern_type == PatternType.PREFIXED:
            return name.startswith(acl.resource_name)
        return False

    def matches_entry(self, acl: Acl) -> bool:
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and (self.operation == AclOperation.ANY or self.operation == acl.operation)
            and (
                self.permission_type == PermissionType.ANY
                or self.permission_type == acl.permission_type
            )
        )


def filter_error(f: AclFilter) -> str | None:
    """Why a DescribeAcls / DeleteAcls filter is unusable (INVALID_REQUEST), or None."""
    for value, known, what in (
        (f.resource_type, _RESOURCE_TYPES, "resource type"),
        (f.pattern_type, _PATTERN_TYPES, "pattern type"),
        (f.operation, _OPERATIONS, "operation"),
        (f.permission_type, _PERMISSIONS, "permission type"),
    ):
        if value not in known or value == 0:
            return f"Unknown {what} {value} in the ACL filter"
    return None


def principal_error(principal: str) -> str | None:
    """Kafka principals are ``Type:name`` (``User:alice``)."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal '{principal}' (expected Type:name, e.g. User:alice)"
    return None


def creation_error(acl: Acl) -> str | None:
    """Why CreateAcls refuses ``acl`` (INVALID_REQUEST), or None."""
    if acl.resource_type not in _RESOURCE_TYPES or acl.resource_type in (
        ResourceType.UNKNOWN,
        ResourceType.ANY,
    ):
        return f"Invalid resourceType {_name(ResourceType, acl.resource_type)}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {_name(PatternType, acl.pattern_type)}"
    if acl.operation not in _OPERATIONS or acl.operation in (
        AclOperation.UNKNOWN,
        AclOperation.ANY,
    ):
        return f"Invalid operation {_name(AclOperation, acl.operation)}"
    if acl.permission_type not in (PermissionType.ALLOW, PermissionType.DENY):
        return f"Invalid permissionType {_name(PermissionType, acl.permission_type)}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.host:
        return "Host should not be empty (use * for any host)"
    return principal_error(acl.principal)
