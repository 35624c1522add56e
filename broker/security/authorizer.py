"""Kafka's StandardAuthorizer semantics over the ACLs of the metadata image.

A request by ``principal`` from ``host`` to perform ``operation`` on a resource is decided so:

1. a principal listed in ``super.users`` may do anything;
2. the ACLs that apply to the resource are the LITERAL ones of its exact name or of the wildcard
   ``*`` and the PREFIXED ones whose name is a prefix of it;
3. none at all (for any principal): ``allow.everyone.if.no.acl.found`` decides (default: deny);
4. of those whose principal is the request's or ``User:*`` and whose host is the request's or
   ``*``: any DENY for the operation (or ALL) denies, whatever else allows (deny wins); otherwise
   an ALLOW for the operation or ALL allows. An ALLOW of READ, WRITE, DELETE or ALTER also allows
   DESCRIBE, and one of ALTER_CONFIGS allows DESCRIBE_CONFIGS (not so for DENY);
5. otherwise deny.

`decide` is a pure function of an `AclIndex`; `Authorizer` keeps the index of the newest ACL set
(rebuilt only when the image's ACL mapping is a different object, i.e. after an ACL change).
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    Acl,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    principal_error,
)

STANDARD_AUTHORIZER: Final = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_IMPLIES_DESCRIBE: Final = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
_IMPLIES_DESCRIBE_CONFIGS: Final = frozenset(
    {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
)

# Operations a resource type supports (the bits of Metadata/DescribeCluster authorized ops).
SUPPORTED_OPERATIONS: Final[Mapping[int, tuple[AclOperation, ...]]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.CLUSTER_MIRROR: (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
}


class AuthorizerConfigError(ValueError):
    pass


@dataclass(slots=True)
class _TypeIndex:
    literal: dict[str, list[Acl]] = field(default_factory=dict)  # exact names (not "*")
    wildcard: list[Acl] = field(default_factory=list)  # LITERAL "*"
    prefixed: dict[str, list[Acl]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AclIndex:
    by_type: Mapping[int, _TypeIndex]

    @staticmethod
    def build(acls: Iterable[Acl]) -> "AclIndex":
        by_type: dict[int, _TypeIndex] = {}
        for acl in acls:
            ix = by_type.setdefault(acl.resource_type, _TypeIndex())
            if acl.pattern_type == PatternType.PREFIXED:
                ix.prefixed.setdefault(acl.resource_name, []).append(acl)
            elif acl.pattern_type == PatternType.LITERAL:
                if acl.resource_name == WILDCARD:
                    ix.wildcard.append(acl)
                else:
                    ix.literal.setdefault(acl.resource_name, []).append(acl)
        return AclIndex(by_type)

    def applicable(self, resource_type: int, name: str) -> list[Acl]:
        """Every ACL that applies to the resource, whoever it is for."""
        ix = self.by_type.get(resource_type)
        if ix is None:
            return []
        out = list(ix.literal.get(name, ()))
        out += ix.wildcard
        if ix.prefixed:
            if len(ix.prefixed) < len(name):
                for prefix, acls in ix.prefixed.items():
                    if name.startswith(prefix):
                        out += acls
            else:
                for end in range(1, len(name) + 1):
                    out += ix.prefixed.get(name[:end], ())
        return out


def _verdict(acl: Acl, principal: str, host: str, operation: int) -> bool | None:
    """True (allow), False (deny) or None (this ACL says nothing about the request)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    allow = acl.permission_type == PermissionType.ALLOW
    if acl.operation != AclOperation.ALL and acl.operation != operation:
        if not allow:
            return None  # implications widen ALLOWs only
        if operation == AclOperation.DESCRIBE:
            if acl.operation not in _IMPLIES_DESCRIBE:
                return None
        elif operation == AclOperation.DESCRIBE_CONFIGS:
            if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                return None
        else:
            return None
    return allow


def decide(
    index: AclIndex,
    principal: str,
    host: str,
    operation: int,
    resource_type: int,
    name: str,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> bool:
    if principal in super_users:
        return True
    acls = index.applicable(resource_type, name)
    if not acls:
        return allow_if_no_acl
    allowed = False
    for acl in acls:
        v = _verdict(acl, principal, host, operation)
        if v is False:
            return False
        if v:
            allowed = True
    return allowed


def decide_any(
    index: AclIndex,
    all_acls: Iterable[Acl],
    principal: str,
    host: str,
    operation: int,
    resource_type: int,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> bool:
    """May ``principal`` perform ``operation`` on SOME resource of the type (Kafka's
    authorizeByResourceType, e.g. an idempotent producer with WRITE on any topic)?"""
    # A made-up name: super users, and the default when no wildcard or covering prefix applies.
    if decide(
        index,
        principal,
        host,
        operation,
        resource_type,
        "hardcode",
        super_users=super_users,
        allow_if_no_acl=allow_if_no_acl,
    ):
        return True
    deny_literal: set[str] = set()
    deny_prefix: set[str] = set()
    allows: list[Acl] = []
    for acl in all_acls:
        if acl.resource_type != resource_type:
            continue
        if acl.host not in (WILDCARD, host) or acl.principal not in (principal, WILDCARD_PRINCIPAL):
            continue
        if acl.operation not in (operation, AclOperation.ALL):
            continue
        if acl.permission_type == PermissionType.DENY:
            if acl.pattern_type == PatternType.PREFIXED:
                deny_prefix.add(acl.resource_name)
            elif acl.resource_name == WILDCARD:
                return False
            else:
                deny_literal.add(acl.resource_name)
        elif acl.permission_type == PermissionType.ALLOW:
            if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                return True
            allows.append(acl)
    for acl in allows:
        if acl.pattern_type == PatternType.LITERAL and acl.resource_name in deny_literal:
            continue
        name = acl.resource_name
        if not any(name[:end] in deny_prefix for end in range(1, len(name) + 1)):
            return True
    return False


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:kmirror``)."""
    out = set()
    for item in value.split(";"):
        item = item.strip()
        if not item:
            continue
        why = principal_error(item)
        if why:
            raise AuthorizerConfigError(f"super.users: {why}")
        out.add(item)
    return frozenset(out)


class Authorizer:
    """Decides requests against the current ACLs (``acls()``: the image's id -> Acl mapping)."""

    def __init__(
        self,
        acls: Callable[[], Mapping[Any, Acl]],
        *,
        super_users: frozenset[str] = frozenset(),
        allow_if_no_acl: bool = False,
    ) -> None:
        self._acls = acls
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._source: Mapping[Any, Acl] | None = None
        self._index = AclIndex.build(())

    def _current(self) -> AclIndex:
        acls = self._acls()
        if acls is not self._source:
            self._index = AclIndex.build(acls.values())
            self._source = acls
        return self._index

    def authorize(
        self, principal: str, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        return decide(
            self._current(),
            principal,
            host,
            operation,
            resource_type,
            name,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        index = self._current()
        return decide_any(
            index,
            self._acls().values(),
            principal,
            host,
            operation,
            resource_type,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def authorized_operations(
        self, principal: str, host: str, resource_type: int, name: str
    ) -> int:
        """The 32-bit field of allowed operations (bit = operation code) Kafka reports."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << int(op)
        return bits


def all_operations_bits(resource_type: int) -> int:
    """What Kafka reports as authorized operations when no authorizer is configured."""
    bits = 0
    for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
        bits |= 1 << int(op)
    return bits


def build_authorizer(
    class_name: str,
    super_users: str,
    allow_if_no_acl: bool,
    acls: Callable[[], Mapping[Any, Acl]],
) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` asks for (None when empty)."""
    name = class_name.strip()
    if not name:
        return None
    if name != STANDARD_AUTHORIZER:
        raise AuthorizerConfigError(
            f"authorizer.class.name={name} is not supported (use {STANDARD_AUTHORIZER})"
        )
    return Authorizer(
        acls, super_users=parse_super_users(super_users), allow_if_no_acl=allow_if_no_acl
    )
