"""``kafka-acls.sh``: add, list and remove ACLs with Apache Kafka's flags, messages and output,
plus KIP-1279's ``--cluster-mirror`` resource (CLUSTER_MIRROR).

CreateAcls / DescribeAcls / DeleteAcls (v1-v3). As Kafka's tool: ``--add`` skips ACLs that
already exist; ``--remove`` asks for confirmation on stdin unless ``--force`` (an answer other
than y/Y keeps the ACLs; end of input keeps them too and exits 1, as nothing was confirmed);
without principals ``--remove`` deletes every ACL of the resource. ``--producer`` grants WRITE,
DESCRIBE and CREATE on topics (WRITE, DESCRIBE on transactional ids; IDEMPOTENT_WRITE on the
cluster with ``--idempotent``); ``--consumer`` grants READ, DESCRIBE on topics and READ on groups.

Exit code 0 on success, 1 on any error (reported on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO, TypeVar

from broker.cli.admin import (
    CommandError,
    Parser,
    Session,
    UsageError,
    check,
    code,
    code_name,
    load,
    run_main,
    servers,
)
from broker.security.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
T = TypeVar("T")

Op = AclOperation
# Kafka's operation names (SecurityUtils.operationName), for --operation and --help
OPERATION_NAMES: Final = {
    "All": Op.ALL,
    "Read": Op.READ,
    "Write": Op.WRITE,
    "Create": Op.CREATE,
    "Delete": Op.DELETE,
    "Alter": Op.ALTER,
    "Describe": Op.DESCRIBE,
    "ClusterAction": Op.CLUSTER_ACTION,
    "DescribeConfigs": Op.DESCRIBE_CONFIGS,
    "AlterConfigs": Op.ALTER_CONFIGS,
    "IdempotentWrite": Op.IDEMPOTENT_WRITE,
    "CreateTokens": Op.CREATE_TOKENS,
    "DescribeTokens": Op.DESCRIBE_TOKENS,
    "TwoPhaseCommit": Op.TWO_PHASE_COMMIT,
}
# operations each resource type takes (Kafka's AclEntry.supportedOperations; ALL always)
SUPPORTED: Final = {
    ResourceType.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE, Op.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
    # KIP-1279 "Authorization"
    ResourceType.CLUSTER_MIRROR: (
        Op.CREATE,
        Op.ALTER,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER_CONFIGS,
        Op.DESCRIBE_CONFIGS,
    ),
}
# option dest -> the resource type it names (valued, repeatable)
RESOURCE_OPTIONS: Final = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
    "delegation_token": ResourceType.DELEGATION_TOKEN,
    "user_principal": ResourceType.USER,
    "cluster_mirror": ResourceType.CLUSTER_MIRROR,
}
NO_RESOURCE: Final = (
    "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
    "--delegation-token <Delegation Token ID> or --cluster-mirror <mirror>"
)

HELP = """\
This tool helps to manage acls on kafka.
Option                                   Description
------                                   -----------
--add                                    Indicates you are trying to add ACLs.
--allow-host <String: allow-host>        Host from which principals listed in
                                           --allow-principal will have access
                                           (default '*': all hosts).
--allow-principal <String:               principal is in principalType:name
  allow-principal>                         format. User:'*' is the wildcard.
--bootstrap-server <String: server to    REQUIRED: The Kafka server to connect
  connect to>                              to.
--cluster                                Add/Remove cluster ACLs.
--cluster-mirror <String: mirror>        Cluster mirror (KIP-1279) to which ACLs
                                           should be added or removed. A value
                                           of '*' applies to all mirrors.
--command-config <String:                A property file containing configs to
  command-config>                          be passed to Admin Client.
--consumer                               Convenience option to add/remove ACLs
                                           for consumer role: READ, DESCRIBE on
                                           topic and READ on group.
--delegation-token <String:              Delegation token to which ACLs should
  delegation-token>                        be added or removed.
--deny-host <String: deny-host>          Host from which principals listed in
                                           --deny-principal will be denied
                                           access (default '*').
--deny-principal <String:                principal is in principalType:name
  deny-principal>                          format. Deny rules take precedence
                                           over allow rules.
--force                                  Assume Yes to all queries and do not
                                           prompt.
--group <String: group>                  Consumer Group to which the ACLs
                                           should be added or removed.
--help                                   Print usage information.
--idempotent                             Enable idempotence for the producer
                                           (with --producer).
--list                                   List ACLs for the specified resource.
--operation <String>                     Operation that is being allowed or
                                           denied (default: All). Valid names:
                                           All, Read, Write, Create, Delete,
                                           Alter, Describe, ClusterAction,
                                           DescribeConfigs, AlterConfigs,
                                           IdempotentWrite, CreateTokens,
                                           DescribeTokens, TwoPhaseCommit
--principal <String: principal>          List ACLs for the specified principal
                                           (with --list; repeatable).
--producer                               Convenience option to add/remove ACLs
                                           for producer role: WRITE, DESCRIBE
                                           and CREATE on topic.
--remove                                 Indicates you are trying to remove
                                           ACLs.
--resource-pattern-type <ANY|MATCH|      The type of the resource pattern or
  LITERAL|PREFIXED>                        pattern filter. (default: LITERAL)
--topic <String: topic>                  topic to which ACLs should be added or
                                           removed. '*' applies to all topics.
--transactional-id <String:              The transactionalId to which ACLs
  transactional-id>                        should be added or removed.
--user-principal <String:                A user principal as a resource
  user-principal>                          (CreateTokens / DescribeTokens).
--version                                Display Kafka version.
"""


@dataclass(frozen=True, slots=True, order=True)
class Pattern:
    """A resource pattern, or a pattern filter when the pattern type is ANY or MATCH."""

    resource_type: int
    name: str
    pattern_type: int

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={ResourceType(self.resource_type).name}, "
            f"name={self.name}, patternType={PatternType(self.pattern_type).name})"
        )


@dataclass(frozen=True, slots=True)
class Entry:
    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={AclOperation(self.operation).name}, "
            f"permissionType={PermissionType(self.permission).name})"
        )


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="kafka-acls", add_help=False, allow_abbrev=False)
    flags = ("add", "remove", "list", "cluster", "idempotent", "producer", "consumer", "force")
    for flag in (*flags, "help", "version"):
        p.add_argument(f"--{flag}", action="store_true")
    for single in ("bootstrap_server", "bootstrap_controller", "command_config"):
        p.add_argument(f"--{single.replace('_', '-')}")
    p.add_argument("--resource-pattern-type", default="literal")
    repeatable = (
        *RESOURCE_OPTIONS,
        "operation",
        "allow_principal",
        "deny_principal",
        "allow_host",
        "deny_host",
        "principal",
    )
    for many in repeatable:
        p.add_argument(f"--{many.replace('_', '-')}", action="append", default=[])
    return p


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest)
    return bool(value) if isinstance(value, bool | list) else value is not None


def _exclusive(args: argparse.Namespace, used: str, others: Iterable[str]) -> None:
    if not _given(args, used):
        return
    for other in others:
        if _given(args, other):
            flag = other.replace("_", "-")
            raise UsageError(
                f'Option "[{used.replace("_", "-")}]" can\'t be used with option "[{flag}]"'
            )


def validate(args: argparse.Namespace) -> str:
    """Kafka's AclCommandOptions.checkArgs; the action."""
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove.")
    if args.bootstrap_controller is not None:
        raise UsageError(
            "--bootstrap-controller is not supported: kmirror's controller listener serves "
            "no admin requests; use --bootstrap-server"
        )
    if not args.bootstrap_server:
        raise UsageError("One of --bootstrap-server or --bootstrap-controller must be specified")
    principals_hosts = ("allow_host", "allow_principal", "deny_host", "deny_principal")
    _exclusive(args, "list", ("producer", "consumer", *principals_hosts))
    _exclusive(args, "producer", ("operation", "deny_principal", "deny_host"))
    _exclusive(args, "consumer", ("operation", "deny_principal", "deny_host"))
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (
        not args.topic
        or not args.group
        or (not args.producer and (args.cluster or args.transactional_id))
    ):
        raise UsageError(
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified."
        )
    return actions[0]


def _pattern_type(value: str) -> PatternType:
    try:
        pt = PatternType[value.strip().upper()]
    except KeyError:
        pt = PatternType.UNKNOWN
    if pt == PatternType.UNKNOWN:
        raise UsageError(
            f"Unknown resource-pattern-type: {value} (one of: any, match, literal, prefixed)"
        )
    return pt


def _operation(name: str) -> AclOperation:
    name = name.strip()
    op = OPERATION_NAMES.get(name)
    if op is None:
        op = AclOperation.__members__.get(name.upper())
    if op is None or op in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise UsageError(
            f"Unknown operation: {name}. Valid operation names are: {', '.join(OPERATION_NAMES)}"
        )
    return op


def _principal(value: str) -> str:
    kind, sep, name = value.strip().partition(":")
    if not sep or not kind or not name:
        raise UsageError(
            f"expected a string in format principalType:principalName but got {value.strip()}"
        )
    return f"{kind}:{name}"


def _unique(items: Iterable[T]) -> list[T]:
    return list(dict.fromkeys(items))


def resource_filters(args: argparse.Namespace, required: bool) -> list[Pattern]:
    pt = int(_pattern_type(args.resource_pattern_type))
    out: list[Pattern] = []
    for dest, rtype in RESOURCE_OPTIONS.items():
        out += [Pattern(int(rtype), v.strip(), pt) for v in getattr(args, dest)]
    # the cluster has one literal name: other pattern types never match it (as Kafka)
    if pt == PatternType.LITERAL and (args.cluster or args.idempotent):
        out.append(Pattern(int(ResourceType.CLUSTER), CLUSTER_NAME, pt))
    if not out and required:
        raise UsageError(NO_RESOURCE)
    return _unique(out)


def _entries(args: argparse.Namespace, ops: Sequence[AclOperation]) -> list[Entry]:
    out: list[Entry] = []
    for principals, hosts, perm in (
        (args.allow_principal, args.allow_host, PermissionType.ALLOW),
        (args.deny_principal, args.deny_host, PermissionType.DENY),
    ):
        for principal in _unique(_principal(p) for p in principals):
            for op in ops:
                for host in _unique(h.strip() for h in hosts) or [WILDCARD]:
                    out.append(Entry(principal, host, int(op), int(perm)))
    return _unique(out)


def acls_by_resource(args: argparse.Namespace) -> dict[Pattern, list[Entry]]:
    """What --add / --remove act on: resource pattern (filter) -> entries (Kafka's rules)."""
    filters = resource_filters(args, required=True)
    result: dict[Pattern, list[Entry]] = {}
    if not args.producer and not args.consumer:
        ops = _unique(_operation(o) for o in args.operation) or [AclOperation.ALL]
        entries = _entries(args, ops)
        result = {f: entries for f in filters}
    if args.producer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                result[f] = _entries(args, (Op.WRITE, Op.DESCRIBE, Op.CREATE))
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                result[f] = _entries(args, (Op.WRITE, Op.DESCRIBE))
        if args.idempotent:
            cluster = Pattern(int(ResourceType.CLUSTER), CLUSTER_NAME, int(PatternType.LITERAL))
            result[cluster] = _entries(args, (Op.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                result[f] = _unique([*result.get(f, []), *_entries(args, (Op.READ, Op.DESCRIBE))])
            elif f.resource_type == ResourceType.GROUP:
                result[f] = _unique([*result.get(f, []), *_entries(args, (Op.READ,))])
    for f, entries in result.items():
        rtype = ResourceType(f.resource_type)
        valid = (Op.ALL, *SUPPORTED[rtype])
        if any(e.operation not in valid for e in entries):
            names = ", ".join(o.name for o in valid)
            raise UsageError(f"ResourceType {rtype.name} only supports operations [{names}]")
    return result


def to_add(args: argparse.Namespace) -> dict[Pattern, list[Entry]]:
    pt = _pattern_type(args.resource_pattern_type)
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(
            f"A '--resource-pattern-type' value of '{pt.name}' is not valid when adding acls."
        )
    wanted = acls_by_resource(args)
    if any(not entries for entries in wanted.values()):
        raise UsageError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    return wanted


def _filter_fields(f: Pattern, entry: Entry | None) -> dict[str, Any]:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": entry.principal if entry else None,
        "host_filter": entry.host if entry else None,
        "operation": entry.operation if entry else int(Op.ANY),
        "permission_type": entry.permission if entry else int(PermissionType.ANY),
    }


class Tool:
    def __init__(self, session: Session, out: TextIO, err: TextIO, stdin: TextIO) -> None:
        self.s, self.out, self.err, self.stdin = session, out, err, stdin

    async def describe(self, f: Pattern | None) -> dict[Pattern, list[Entry]]:
        fields = (
            _filter_fields(f, None)
            if f is not None
            else {
                "resource_type_filter": int(ResourceType.ANY),
                "resource_name_filter": None,
                "pattern_type_filter": int(PatternType.ANY),
                "principal_filter": None,
                "host_filter": None,
                "operation": int(Op.ANY),
                "permission_type": int(PermissionType.ANY),
            }
        )
        resp = await self.s.call(DESCRIBE_ACLS, fields)
        check(resp)
        found: dict[Pattern, list[Entry]] = {}
        for r in resp.resources:
            p = Pattern(int(r.resource_type), str(r.resource_name), int(r.pattern_type))
            found.setdefault(p, []).extend(
                Entry(str(a.principal), str(a.host), int(a.operation), int(a.permission_type))
                for a in r.acls
            )
        return found

    def _print_acls(self, title: str, resource: Pattern, entries: Sequence[Entry]) -> None:
        lines = "\n".join(f"\t{e}" for e in entries)
        print(f"{title} `{resource}`:\n{lines}\n", file=self.out)

    async def add(self, wanted: dict[Pattern, list[Entry]]) -> int:
        for resource, entries in wanted.items():
            existing = set((await self.describe(resource)).get(resource, []))
            new = [e for e in entries if e not in existing]
            for e in entries:
                if e in existing:
                    print(f"Acl (pattern={resource}, entry={e}) already exists.", file=self.out)
            if not new:
                continue
            lines = "\n".join(f"\t{e}" for e in new)
            print(f"Adding ACLs for resource `{resource}`: \n {lines}\n", file=self.out)
            resp = await self.s.call(
                CREATE_ACLS,
                {
                    "creations": [
                        {
                            "resource_type": resource.resource_type,
                            "resource_name": resource.name,
                            "resource_pattern_type": resource.pattern_type,
                            "principal": e.principal,
                            "host": e.host,
                            "operation": e.operation,
                            "permission_type": e.permission,
                        }
                        for e in new
                    ]
                },
            )
            failures = [
                f"{e}: {r.error_message or code_name(code(r.error_code))}"
                for e, r in zip(new, resp.results, strict=False)
                if code(r.error_code)
            ]
            if failures:
                raise CommandError("cannot create ACLs: " + "; ".join(failures))
        return 0

    def _confirm(self, force: bool, message: str) -> bool | None:
        """True to go ahead, False when declined, None at end of input."""
        if force:
            return True
        print(message, file=self.out, flush=True)
        line = self.stdin.readline()
        if not line:
            return None
        return line.strip().lower() == "y"

    async def remove(self, targets: dict[Pattern, list[Entry]], force: bool) -> int:
        eof = False
        for resource, entries in targets.items():
            if entries:
                listed = "\n".join(f"\t{e}" for e in entries)
                question = (
                    f"Are you sure you want to remove ACLs: \n {listed}\n from resource filter "
                    f"`{resource}`? (y/n)"
                )
            else:
                question = (
                    f"Are you sure you want to delete all ACLs for resource filter `{resource}`? "
                    "(y/n)"
                )
            answer = self._confirm(force, question)
            if answer is None:
                eof = True
                print(
                    f"No answer on stdin: ACLs for `{resource}` kept (--force skips the prompt)",
                    file=self.err,
                )
            if not answer:
                continue
            filters = [_filter_fields(resource, e) for e in entries] or [
                _filter_fields(resource, None)
            ]
            resp = await self.s.call(DELETE_ACLS, {"filters": filters})
            failures = [
                r.error_message or code_name(code(r.error_code))
                for r in resp.filter_results
                if code(r.error_code)
            ]
            if failures:
                raise CommandError("cannot delete ACLs: " + "; ".join(failures))
        return 1 if eof else 0

    async def list_acls(self, filters: Sequence[Pattern], principals: Sequence[str]) -> int:
        found: dict[Pattern, list[Entry]] = {}
        chosen: Sequence[Pattern | None] = filters or [None]  # None: every ACL
        for f in chosen:
            for resource, entries in (await self.describe(f)).items():
                found[resource] = _unique([*found.get(resource, []), *entries])
        if not principals:
            for resource in sorted(found):
                self._print_acls("Current ACLs for resource", resource, found[resource])
            return 0
        for principal in principals:
            print(f"ACLs for principal `{principal}`", file=self.out)
            for resource in sorted(found):
                mine = [e for e in found[resource] if e.principal == principal]
                if mine:
                    self._print_acls("Current ACLs for resource", resource, mine)
        return 0


async def _run(action: str, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # every option is checked before connecting: bad input never reaches the broker
    if action == "list":
        filters = resource_filters(args, required=False)
        principals = _unique(_principal(p) for p in args.principal)
    else:
        targets = to_add(args) if action == "add" else acls_by_resource(args)
    props = load(args.command_config, "--command-config") if args.command_config else {}
    session = await Session.open(servers(args.bootstrap_server), props, "kafka-acls", "the cluster")
    tool = Tool(session, out, err, sys.stdin)
    try:
        if action == "add":
            return await tool.add(targets)
        if action == "remove":
            return await tool.remove(targets, args.force)
        return await tool.list_acls(filters, principals)
    finally:
        session.close()


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        return asyncio.run(_run(validate(args), args, out, err))

    return run_main(
        argv, out, err, parser=_parser(), help_text=HELP, tool="kafka-acls.sh", what="ACL",
        start=start,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
