"""``kafka-configs.sh``: describe and alter the dynamic configs of topics, brokers, groups
(KIP-848/932 group configs, resource type 32) and cluster mirrors (KIP-1279 resource type 64),
with Apache Kafka's flags, messages and output format.

``--describe`` is DescribeConfigs (with synonyms; only the entity's dynamic configs unless
``--all``); ``--alter`` is IncrementalAlterConfigs: ``--delete-config`` keys (which must be set,
as Kafka checks) as DELETE, then ``--add-config`` / ``--add-config-file`` pairs as SET. In
``--add-config`` square brackets group a value holding commas (``k=[0:1,1:1]``) and are dropped,
as Kafka does. A broker's own configs are read and written on that broker (found in Metadata).

``--entity-type users`` manages SASL/SCRAM credentials (``SCRAM-SHA-256``/``SCRAM-SHA-512`` keys,
see configs_scram.py) and user quotas; ``clients``, ``users`` + ``clients`` and ``ips`` client
quotas (configs_quotas.py). ``broker-loggers`` and ``client-metrics`` are refused (no such
config resources here). Groups without ``--entity-name`` are those ListGroups reports on every
broker. Exit code 0 on success, 1 on any error.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

from kio.schema.errors import ErrorCode

from broker.cli import configs_quotas, configs_scram
from broker.cli.admin import (
    CommandError,
    Parser,
    Session,
    UsageError,
    code,
    code_name,
    load,
    run_main,
    servers,
)
from protocol.errors import MirrorErrorCode

METADATA, LIST_GROUPS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_MIRRORS = 3, 16, 32, 44, 98
TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE, MIRROR_RESOURCE = 2, 4, 32, 64
SET, DELETE = 0, 1

TOPICS, BROKERS, GROUPS, MIRRORS, USERS = "topics", "brokers", "groups", "mirrors", "users"
SERVED: Final = (TOPICS, BROKERS, GROUPS, MIRRORS)
QUOTA_TYPES: Final = ("users", "clients", "ips")
# Kafka's other entity types, which this broker has no config resource for
OTHER_TYPES: Final = ("broker-loggers", "client-metrics")
ENTITY_TYPES: Final = (*SERVED, *QUOTA_TYPES, *OTHER_TYPES)
RESOURCE = {
    TOPICS: TOPIC_RESOURCE,
    BROKERS: BROKER_RESOURCE,
    GROUPS: GROUP_RESOURCE,
    MIRRORS: MIRROR_RESOURCE,
}

# Kafka's ConfigSource names (DescribeConfigs config_source codes)
SOURCES: Final = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
STATIC, DEFAULT = 4, 5

# flag -> entity type; the *-defaults flags name the type's default entity ("")
NAMED_FLAGS: Final = {
    "topic": TOPICS,
    "broker": BROKERS,
    "mirror": MIRRORS,
    "client": "clients",
    "user": "users",
    "ip": "ips",
    "broker_logger": "broker-loggers",
    "group": "groups",
    "client_metrics": "client-metrics",
}
DEFAULT_FLAGS: Final = {
    "broker_defaults": BROKERS,
    "client_defaults": "clients",
    "user_defaults": "users",
    "ip_defaults": "ips",
}
WITH_DEFAULT: Final = (BROKERS, *QUOTA_TYPES)

# a comma or '=' outside square brackets (Kafka's --add-config grammar)
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_PAIR_SEP = re.compile("," + _OUTSIDE_BRACKETS)
_KV_SEP = re.compile(r"\s*=\s*" + _OUTSIDE_BRACKETS)
_KEY = re.compile(r"[$a-zA-Z0-9._-]*")

HELP = """\
This tool helps to manipulate and describe entity config for a topic, broker, group, cluster
mirror, user, client or ip.
Option                                  Description
------                                  -----------
--add-config <String>                   Key Value pairs of configs to add.
                                          Square brackets can be used to group
                                          values which contain commas:
                                          'k1=v1,k2=[v1,v2,v2],k3=v3'.
--add-config-file <String>              Path to a properties file with configs
                                          to add.
--all                                   List all configs for the given entity,
                                          including static configs and defaults.
--alter                                 Alter the configuration for the entity.
--bootstrap-server <String: server to   REQUIRED: The Kafka server to connect
  connect to>                             to.
--broker <String>                       The broker's ID.
--broker-defaults                       The config defaults for all brokers.
--command-config <String: command       Property file containing configs to be
  config property file>                   passed to Admin Client.
--delete-config <String>                config keys to remove 'k1,k2'
--describe                              List configs for the given entity.
--client <String>                       The client's ID.
--client-defaults                       The config defaults for all clients.
--entity-default                        Default entity name for clients/users/
                                          brokers/ips.
--entity-name <String>                  Name of entity (topic name/client id/
                                          user principal name/broker id/ip/
                                          group name/mirror name)
--entity-type <String>                  Type of entity (topics/clients/users/
                                          brokers/ips/groups/mirrors)
--group <String>                        The group's ID.
--help                                  Print usage information.
--ip <String>                           The IP address.
--ip-defaults                           The config defaults for all IPs.
--mirror <String>                       The cluster mirror's name.
--topic <String>                        The topic's name.
--user <String>                         The user's principal name.
--user-defaults                         The config defaults for all users.
--version                               Display Kafka version.

Users' SCRAM credentials: --entity-type users --entity-name alice --alter --add-config
'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
(iterations default to 4096), --delete-config SCRAM-SHA-512, --describe.
Client quotas: --entity-type users|clients|ips (users and clients together for a user's client)
--entity-name NAME or --entity-default, --alter --add-config
'producer_byte_rate=1048576,consumer_byte_rate=2097152' (also request_percentage,
controller_mutation_rate; connection_creation_rate for ips), --delete-config KEY, --describe.
"""


@dataclass(frozen=True, slots=True)
class Entity:
    kind: str  # topics / brokers / groups / mirrors
    name: str | None  # None: every entity of the kind; "": the default entity

    @property
    def singular(self) -> str:
        return self.kind[:-1]


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="kafka-configs", add_help=False, allow_abbrev=False)
    for flag in ("alter", "describe", "all", "help", "version"):
        p.add_argument(f"--{flag.replace('_', '-')}", action="store_true")
    p.add_argument("--entity-default", action=configs_quotas.NamedAction, nargs=0, default=False)
    for flag in DEFAULT_FLAGS:
        p.add_argument(f"--{flag.replace('_', '-')}", action="store_true")
    p.add_argument("--bootstrap-server")
    p.add_argument("--bootstrap-controller")
    p.add_argument("--command-config")
    p.add_argument("--entity-type", action="append", default=[])
    p.add_argument("--entity-name", action=configs_quotas.NamedAction, default=[])
    p.add_argument("--add-config")
    p.add_argument("--add-config-file")
    p.add_argument("--delete-config", action="append", default=[])
    for flag in NAMED_FLAGS:
        p.add_argument(f"--{flag.replace('_', '-')}")
    return p


def _invalid_with(used: str, other: str) -> UsageError:
    return UsageError(f'Option "[{used}]" can\'t be used with option "[{other}]"')


def _entity(args: argparse.Namespace) -> Entity | configs_quotas.QuotaEntity:
    """Kafka's checkArgs, narrowed to what this broker serves; the entity to act on."""
    if args.alter == args.describe:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.describe:
        for opt in ("add_config", "add_config_file"):
            if getattr(args, opt) is not None:
                raise _invalid_with("describe", opt.replace("_", "-"))
        if args.delete_config:
            raise _invalid_with("describe", "delete-config")
    if args.all and not args.describe:
        raise _invalid_with("all", "alter")
    flag_types = [t for f, t in NAMED_FLAGS.items() if getattr(args, f) is not None]
    flag_types += [t for f, t in DEFAULT_FLAGS.items() if getattr(args, f)]
    types = [*args.entity_type, *flag_types]
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise UsageError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    if args.bootstrap_controller is not None:
        raise UsageError(
            "--bootstrap-controller is not supported: kmirror's controller listener serves "
            "no admin requests; use --bootstrap-server"
        )
    if not args.bootstrap_server:
        raise UsageError("Either --bootstrap-server or --bootstrap-controller must be specified.")
    for t in types:
        if t not in ENTITY_TYPES:
            raise UsageError(
                f"Invalid entity type {t}, the entity type must be one of "
                f"{', '.join(ENTITY_TYPES)} with a --bootstrap-server argument"
            )
    if not types:
        raise UsageError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise UsageError("Only 'users' and 'clients' entity types may be specified together")
    if (args.entity_name or args.entity_type or args.entity_default) and flag_types:
        raise UsageError(
            "--entity-{type,name,default} should not be used in conjunction with specific "
            "entity flags"
        )
    if any(t in QUOTA_TYPES for t in types) and not _scram_only(args, types):
        return _quota_entity(args, types)
    kind = types[0]
    if kind in OTHER_TYPES:
        raise UsageError(
            f"--entity-type {kind} is not supported: this broker has config resources for "
            f"{', '.join(SERVED)} only"
        )
    names = list(args.entity_name)
    names += [""] if args.entity_default else []
    names += [getattr(args, f) for f, t in NAMED_FLAGS.items() if t == kind and getattr(args, f)]
    names += ["" for f, t in DEFAULT_FLAGS.items() if t == kind and getattr(args, f)]
    if len(names) > 1:
        raise UsageError("An entity name must be specified for every entity type")
    name = names[0] if names else None
    if kind == USERS and name == "":
        raise UsageError(
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
            "Credentials using --bootstrap-server."
        )
    if name == "" and kind not in WITH_DEFAULT:
        raise UsageError(
            f"--entity-default must not be specified with --{'describe' if args.describe else 'alter'} of {kind}"
        )
    if kind == BROKERS and name:
        try:
            int(name)
        except ValueError:
            raise UsageError(
                f"The entity name for brokers must be a valid integer broker id, but it is: {name}"
            ) from None
    if args.alter:
        if name is None:
            if kind in WITH_DEFAULT:
                raise UsageError(
                    "An entity-name or default entity must be specified with --alter of users, "
                    "clients, brokers or ips"
                )
            raise UsageError(f"An entity name must be specified with --alter of {kind}")
        if args.add_config is not None and args.add_config_file is not None:
            raise UsageError("Only one of --add-config or --add-config-file must be specified")
        if args.add_config is None and args.add_config_file is None and not args.delete_config:
            raise UsageError(
                "At least one of --add-config, --add-config-file, or --delete-config must be "
                "specified with --alter"
            )
    return Entity(kind, name)


def _scram_only(args: argparse.Namespace, types: Sequence[str]) -> bool:
    """A users --alter of SCRAM credentials only (the SCRAM path, configs_scram.py)."""
    if list(types) != [USERS] or args.describe:
        return False
    added, deleted = _to_add(args), _to_delete(args)
    configs_scram.check_keys(added, deleted)
    return all(configs_scram.is_scram(k) for k in [*added, *deleted])


def _quota_entity(args: argparse.Namespace, types: Sequence[str]) -> configs_quotas.QuotaEntity:
    flags = {t: f for f, t in NAMED_FLAGS.items()}
    return configs_quotas.entity_from_args(
        args, types, flags, {t: f for f, t in DEFAULT_FLAGS.items()}
    )


def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b]`` -> {k1: v1, k2: "a,b"}: Kafka's grammar, brackets dropped."""
    out: dict[str, str] = {}
    for pair in _PAIR_SEP.split(text):
        kv = _KV_SEP.split(pair)
        if len(kv) != 2:
            raise UsageError(
                "Invalid entity config: all configs to be added must be in the format "
                '"key=val" or "key=[val1,val2]" to group values which contain commas.'
            )
        out[kv[0].strip()] = re.sub(r"[\[\]]", "", kv[1]).strip()
    return out


def _to_add(args: argparse.Namespace) -> dict[str, str]:
    added: dict[str, str] = {}
    if args.add_config_file is not None:
        added.update(load(args.add_config_file, "--add-config-file"))
    if args.add_config is not None:
        added.update(parse_add_config(args.add_config))
    for key in added:
        if not _KEY.fullmatch(key):
            raise UsageError(f"Invalid character found for config key: {key}")
    return added


def _to_delete(args: argparse.Namespace) -> list[str]:
    keys = [k.strip() for value in args.delete_config for k in value.split(",")]
    return [k for k in keys if k]


def _fmt(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_dynamic(entity: Entity, source: int) -> bool:
    if entity.kind == TOPICS:
        return source == 1
    if entity.kind == BROKERS:
        return source == (3 if entity.name == "" else 2)
    if entity.kind == GROUPS:
        return source == 8  # GROUP_CONFIG
    return source not in (STATIC, DEFAULT)  # a mirror's own keys: everything it stores


class Tool:
    def __init__(self, session: Session, props: dict[str, str], out: TextIO) -> None:
        self.s = session
        self.props = props
        self.out = out
        self._brokers: dict[int, tuple[str, int]] | None = None
        self._extra: dict[int, Session] = {}

    def close(self) -> None:
        for s in self._extra.values():
            s.close()

    async def _metadata(self, all_topics: bool) -> Any:
        resp = await self.s.call(
            METADATA,
            {
                "topics": None if all_topics else [],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        self._brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in resp.brokers}
        return resp

    async def brokers(self) -> dict[int, tuple[str, int]]:
        if self._brokers is None:
            await self._metadata(all_topics=False)
        assert self._brokers is not None
        return self._brokers

    async def session_for(self, entity: Entity) -> Session:
        """A broker's own configs live on that broker (Kafka's admin client routes them)."""
        if entity.kind != BROKERS or not entity.name:
            return self.s
        node = int(entity.name)
        address = (await self.brokers()).get(node)
        peer = (self.s.conn.host, self.s.conn.port)
        if address is None or address == peer or len(await self.brokers()) == 1:
            return self.s
        if node not in self._extra:
            self._extra[node] = await Session.open(
                [address], self.props, "kafka-configs", f"broker {node}"
            )
        return self._extra[node]

    async def describe_rows(self, entity: Entity, synonyms: bool) -> tuple[int, str, list[Any]]:
        assert entity.name is not None
        s = await self.session_for(entity)
        resp = await s.call(
            DESCRIBE_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": RESOURCE[entity.kind],
                        "resource_name": entity.name,
                        "configuration_keys": None,
                    }
                ],
                "include_synonyms": synonyms,
                "include_documentation": False,
            },
        )
        (r,) = resp.results
        return code(r.error_code), str(r.error_message or ""), list(r.configs)

    async def names(self, kind: str) -> list[str]:
        if kind == TOPICS:
            resp = await self._metadata(all_topics=True)
            return sorted(str(t.name) for t in resp.topics if t.name)
        if kind == BROKERS:
            return [*(str(b) for b in sorted(await self.brokers())), ""]
        if kind == GROUPS:
            return await self.group_names()
        resp = await self.s.call(LIST_MIRRORS, {})
        if code(resp.error_code):
            raise CommandError(
                f"{resp.error_message or 'ListMirrors failed'} ({code_name(code(resp.error_code))})"
            )
        return sorted(str(m.mirror_name) for m in resp.mirrors)

    async def group_names(self) -> list[str]:
        """Every group, from ListGroups on each broker (each lists those it coordinates)."""
        found: set[str] = set()
        for node in sorted(await self.brokers()):
            s = await self.session_for(Entity(BROKERS, str(node)))
            resp = await s.call(LIST_GROUPS, {"states_filter": [], "types_filter": []})
            found |= {str(g.group_id) for g in resp.groups}
        return sorted(found)

    async def describe(self, entity: Entity, describe_all: bool) -> int:
        if entity.name is None:
            targets = [Entity(entity.kind, n) for n in await self.names(entity.kind)]
        else:
            targets = [entity]
            known = entity.kind != BROKERS or not entity.name or describe_all
            if not known and int(entity.name) not in await self.brokers():
                print(_missing(entity), file=self.out)
                return 0
        for e in targets:
            assert e.name is not None
            err, message, rows = await self.describe_rows(e, synonyms=True)
            unknown = err in (ErrorCode.unknown_topic_or_partition, MirrorErrorCode.UNKNOWN_MIRROR)
            if unknown and not describe_all and entity.name is not None:
                print(_missing(e), file=self.out)
                continue
            if err:
                raise CommandError(f"{message or 'DescribeConfigs failed'} ({code_name(err)})")
            if e.name == "":
                print(f"Default configs for {e.kind} in the cluster are:", file=self.out)
            else:
                label = "All" if describe_all else "Dynamic"
                print(f"{label} configs for {e.singular} {e.name} are:", file=self.out)
            for c in sorted(rows, key=lambda c: str(c.name)):
                if not describe_all and not _is_dynamic(e, int(c.config_source)):
                    continue
                syn = ", ".join(
                    f"{SOURCES.get(int(y.source), 'UNKNOWN')}:{y.name}={_fmt(y.value)}"
                    for y in c.synonyms
                )
                print(
                    f"  {c.name}={_fmt(c.value)} sensitive={_fmt(bool(c.is_sensitive))} "
                    f"synonyms={{{syn}}}",
                    file=self.out,
                )
        return 0

    async def alter(self, entity: Entity, added: dict[str, str], deleted: list[str]) -> int:
        assert entity.name is not None
        err, message, rows = await self.describe_rows(entity, synonyms=False)
        if err:
            raise CommandError(f"{message or 'DescribeConfigs failed'} ({code_name(err)})")
        current = {str(c.name) for c in rows if _is_dynamic(entity, int(c.config_source))}
        invalid = [k for k in deleted if k not in current]
        if invalid:
            raise CommandError(f"Invalid config(s): {','.join(invalid)}")
        s = await self.session_for(entity)
        resp = await s.call(
            INCREMENTAL_ALTER_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": RESOURCE[entity.kind],
                        "resource_name": entity.name,
                        "configs": [
                            *(
                                {"name": k, "config_operation": DELETE, "value": None}
                                for k in deleted
                            ),
                            *(
                                {"name": k, "config_operation": SET, "value": v}
                                for k, v in added.items()
                            ),
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
        for r in resp.responses:
            c = code(r.error_code)
            if c:
                raise CommandError(
                    f"{r.error_message or 'IncrementalAlterConfigs failed'} ({code_name(c)})"
                )
        if entity.name:
            print(f"Completed updating config for {entity.singular} {entity.name}.", file=self.out)
        else:
            print(
                f"Completed updating default config for {entity.kind} in the cluster.",
                file=self.out,
            )
        return 0


def _missing(e: Entity) -> str:
    return f"The {e.singular} '{e.name}' doesn't exist and doesn't have dynamic config."


async def _run(
    args: argparse.Namespace, entity: Entity | configs_quotas.QuotaEntity, out: TextIO
) -> int:
    props = load(args.command_config, "--command-config") if args.command_config else {}
    added = _to_add(args) if args.alter else {}
    deleted = _to_delete(args) if args.alter else []
    if isinstance(entity, configs_quotas.QuotaEntity) and args.alter:
        configs_quotas.precheck(entity, added, deleted)  # bad input fails before any I/O
    session = await Session.open(
        servers(args.bootstrap_server), props, "kafka-configs", "the cluster"
    )
    tool = Tool(session, props, out)
    try:
        if isinstance(entity, configs_quotas.QuotaEntity):
            if args.alter:
                return await configs_quotas.alter(session, entity, added, deleted, out)
            return await configs_quotas.describe(session, entity, out)
        if entity.kind == USERS:
            if args.alter:
                assert entity.name is not None
                return await configs_scram.alter(session, entity.name, added, deleted, out)
            return await configs_scram.describe(session, entity.name, out)
        if args.alter:
            return await tool.alter(entity, added, deleted)
        return await tool.describe(entity, args.all)
    finally:
        tool.close()
        session.close()


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        return asyncio.run(_run(args, _entity(args), out))

    return run_main(
        argv, out, err, parser=_parser(), help_text=HELP, tool="kafka-configs.sh",
        what="config", start=start,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
