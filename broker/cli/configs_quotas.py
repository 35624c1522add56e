"""``kafka-configs.sh --entity-type users|clients|ips``: client quotas as Apache Kafka's tool
manages them, over DescribeClientQuotas (48) and AlterClientQuotas (49).

``--alter`` checks the keys as Kafka's tool does (quota keys only for clients and user+client
pairs, quota or SCRAM keys for users but not both in one command, ``connection_creation_rate``
only for ips), parses each value as a Java double ("Cannot parse quota configuration value for
k: v"), refuses ``--delete-config`` of a key the entity does not have ("Invalid config(s)"), then
sends one AlterClientQuotas; the broker validates the values (``must be greater than 0``,
``cannot be a fractional value``...). ``--describe`` lists the matching entities (a name: that
entity; ``--entity-default``: the default; no name: every entity of the type; strict, so user
quotas are not mixed with user+client ones) as Kafka prints them, values as Java prints doubles
and in the order Java's HashMaps give; for users it then prints their SCRAM credentials (not for
the default user or with clients), as Kafka does.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, TextIO, TypeVar

from broker.cli import configs_scram
from broker.cli.admin import CommandError, Session, UsageError, code, code_name

DESCRIBE_QUOTAS, ALTER_QUOTAS = 48, 49
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
USERS, CLIENTS, IPS = "users", "clients", "ips"
ENTITY_TYPE: Final = {USERS: "user", CLIENTS: "client-id", IPS: "ip"}
PRINTED: Final = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
QUOTA_KEYS: Final = configs_scram.QUOTA_KEYS
IP_KEYS: Final = ("connection_creation_rate",)
# Java's Double.parseDouble: optional sign, digits with an optional point and exponent, an
# optional type suffix; or NaN / Infinity (hex floats are left out)
_JAVA_DOUBLE = re.compile(
    r"\s*[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)\s*", re.ASCII
)

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    types: tuple[str, ...]  # users / clients / ips, in command-line order
    names: tuple[str, ...]  # "" for a default entity; fewer than types: any entity


class NamedAction(argparse.Action):
    """--entity-name / --entity-default, also kept in command-line order (``ordered_names``):
    with two entity types, the names pair up with them in that order, as in Kafka's tool."""

    def __call__(self, parser: Any, ns: argparse.Namespace, values: Any, opt: Any = None) -> None:
        ordered = getattr(ns, "ordered_names", None) or []
        if self.dest == "entity_default":
            ns.entity_default = True
            ordered.append("")
        else:
            ns.entity_name = [*ns.entity_name, values]
            ordered.append(values)
        ns.ordered_names = ordered


def entity_from_args(
    args: argparse.Namespace,
    types: Sequence[str],
    flag_of: Mapping[str, str],
    default_flag_of: Mapping[str, str],
) -> QuotaEntity:
    """Names from --entity-name/--entity-default in order, or from the entity flags (--user
    alice --client c1, --user-defaults ...; ``flag_of``: entity type -> its flag's dest)."""
    names = list(getattr(args, "ordered_names", None) or [])
    if not args.entity_type:
        names = []
        for t in types:
            if getattr(args, flag_of[t]) is not None:
                names.append(getattr(args, flag_of[t]))
            elif getattr(args, default_flag_of[t]):
                names.append("")
    return entity(types, names, args.alter)


def entity(types: Sequence[str], names: Sequence[str], alter: bool) -> QuotaEntity:
    if len(names) > len(types):
        raise UsageError("More entity names specified than entity types")
    if alter and len(names) != len(types):
        if not names:
            raise UsageError(
                "An entity-name or default entity must be specified with --alter of users, "
                "clients, brokers or ips"
            )
        raise UsageError("Exactly one entity name must be specified for every entity type")
    return QuotaEntity(tuple(types), tuple(names))


def check_keys(e: QuotaEntity, added: Mapping[str, str], deleted: Sequence[str]) -> bool:
    """Kafka's tool checks; True when the command alters SCRAM credentials instead."""
    kind = e.types[0]
    if kind == IPS:
        unknown = sorted({k for k in [*added, *deleted] if k not in IP_KEYS})
        if unknown:
            raise UsageError(
                "Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                f"Unexpected config names: {', '.join(unknown)}"
            )
        return False
    if kind == CLIENTS or len(e.types) == 2:
        for keys, verb in ((list(added), "added"), (list(deleted), "deleted")):
            bad = [k for k in keys if k not in QUOTA_KEYS]
            if bad:
                raise UsageError(
                    f"Only quota configs can be {verb} for 'clients' using --bootstrap-server. "
                    f"Unexpected config names: {','.join(bad)}"
                )
        return False
    configs_scram.check_keys(added, deleted)
    scram = [k for k in [*added, *deleted] if configs_scram.is_scram(k)]
    if scram:
        if "" in e.names:
            raise UsageError(
                "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                "Credentials using --bootstrap-server."
            )
        if len(scram) != len(added) + len(deleted):
            raise UsageError(
                "Cannot alter both quota and SCRAM credential configs simultaneously for "
                "'users' using --bootstrap-server."
            )
        return True
    return False


def precheck(e: QuotaEntity, added: Mapping[str, str], deleted: Sequence[str]) -> None:
    """The checks that need no broker: keys, and values unless it is a SCRAM change."""
    if not check_keys(e, added, deleted):
        for k, v in added.items():
            parse_value(k, v)


def parse_value(key: str, value: str) -> float:
    if not _JAVA_DOUBLE.fullmatch(value):
        raise UsageError(f"Cannot parse quota configuration value for {key}: {value}")
    text = value.strip().rstrip("fFdD")
    if text.lstrip("+-") == "Infinity":
        text = text.replace("Infinity", "inf")
    return float(text)


def java_double(v: float) -> str:
    """Java's ``Double.toString``: decimal from 10^-3 to 10^7, else ``d.dddE±n``."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if str(v).startswith("-") else "0.0"
    if 1e-3 <= abs(v) < 1e7:
        text = repr(v)
        return text if "." in text else text + ".0"
    sign, digits, exp = Decimal(repr(v)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = len(digits) - 1 + int(exp)
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{exponent}"


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def _java_entity_hash(parts: Iterable[tuple[str, str | None]]) -> int:
    """``ClientQuotaEntity.hashCode``: ``Objects.hash(entries)``, a map's hash being the sum of
    ``key.hashCode() ^ value.hashCode()`` (0 for a null name)."""
    total = 0
    for t, n in parts:
        total += _java_string_hash(t) ^ (0 if n is None else _java_string_hash(n))
    return (31 + total) & 0xFFFFFFFF


def java_hashmap_order(items: Sequence[tuple[int, K]], initial_capacity: int) -> list[K]:
    """The iteration order of a ``new HashMap<>(initial_capacity)`` after putting ``items``
    ((hashCode, key), distinct keys) in order: buckets by spread hash, splits on resize keep
    their order, as OpenJDK's HashMap does (tree bins aside)."""
    cap = 1
    while cap < max(1, initial_capacity):
        cap <<= 1
    table: list[list[tuple[int, K]]] = [[] for _ in range(cap)]
    for size, (h, key) in enumerate(items, 1):
        spread = h ^ (h >> 16)
        table[spread & (len(table) - 1)].append((spread, key))
        if size > len(table) * 0.75:
            old, n = table, len(table)
            table = [[] for _ in range(2 * n)]
            for j, bucket in enumerate(old):
                for e in bucket:
                    table[j + n if e[0] & n else j].append(e)
    return [key for bucket in table for _, key in bucket]


def _components(e: QuotaEntity) -> list[dict[str, Any]]:
    out = []
    for i, kind in enumerate(e.types):
        name = e.names[i] if i < len(e.names) else None
        match_type = SPECIFIED if name is None else DEFAULT if name == "" else EXACT
        out.append(
            {
                "entity_type": ENTITY_TYPE[kind],
                "match_type": match_type,
                "match": name or None,
            }
        )
    return out


async def _describe(session: Session, e: QuotaEntity) -> list[tuple[Any, list[tuple[str, float]]]]:
    """(entity parts, [(key, value)]) in the order Kafka's admin client's maps give."""
    resp = await session.call(DESCRIBE_QUOTAS, {"components": _components(e), "strict": True})
    c = code(resp.error_code)
    if c:
        raise CommandError(
            f"{resp.error_message or 'DescribeClientQuotas failed'} ({code_name(c)})"
        )
    entries = []
    for entry in resp.entries or ():
        parts = [(p.entity_type, p.entity_name) for p in entry.entity]
        values = [(v.key, float(v.value)) for v in entry.values]
        ordered = java_hashmap_order(
            [(_java_string_hash(k), (k, v)) for k, v in values], len(values)
        )
        entries.append((_java_entity_hash(parts), (parts, ordered)))
    return java_hashmap_order(entries, len(entries))


def _entity_text(parts: Sequence[tuple[str, str | None]]) -> str:
    names = dict(parts)
    out = []
    for t in ("user", "client-id", "ip"):
        if t in names:
            n = names[t]
            out.append(f"the default {PRINTED[t]}" if not n else f"{PRINTED[t]} '{n}'")
    return ", ".join(out)


async def describe(session: Session, e: QuotaEntity, out: TextIO) -> int:
    for parts, values in await _describe(session, e):
        text = ", ".join(f"{k}={java_double(v)}" for k, v in values)
        print(f"Quota configs for {_entity_text(parts)} are {text}", file=out)
    if e.types[0] == USERS and CLIENTS not in e.types and "" not in e.names:
        return await configs_scram.describe(session, e.names[0] if e.names else None, out)
    return 0


async def alter(
    session: Session, e: QuotaEntity, added: Mapping[str, str], deleted: Sequence[str], out: TextIO
) -> int:
    if check_keys(e, added, deleted):
        return await configs_scram.alter(session, e.names[0], added, deleted, out)
    values = {k: parse_value(k, v) for k, v in added.items()}  # bad values fail before I/O
    current = await _describe(session, e)
    have = {k for k, _ in current[0][1]} if current else set()
    invalid = [k for k in deleted if k not in have]
    if invalid:
        raise CommandError(f"Invalid config(s): {','.join(invalid)}")
    parts = [
        {"entity_type": ENTITY_TYPE[t], "entity_name": n or None}
        for t, n in zip(e.types, e.names, strict=True)
    ]
    ops = [{"key": k, "value": v, "remove": False} for k, v in values.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in deleted]
    resp = await session.call(
        ALTER_QUOTAS, {"entries": [{"entity": parts, "ops": ops}], "validate_only": False}
    )
    for r in resp.entries:
        c = code(r.error_code)
        if c:
            raise CommandError(f"{r.error_message or 'AlterClientQuotas failed'} ({code_name(c)})")
    kind, name = e.types[0], e.names[0]
    if name:
        print(f"Completed updating config for {kind[:-1]} {name}.", file=out)
    else:
        print(f"Completed updating default config for {kind} in the cluster.", file=out)
    return 0
