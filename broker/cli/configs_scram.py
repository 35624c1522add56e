"""``kafka-configs.sh --entity-type users``: SASL/SCRAM credentials (KIP-554) as Apache Kafka's
tool manages them, over DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

``--add-config 'SCRAM-SHA-512=[password=...]'`` or ``[iterations=N,password=...]`` (4096 when
absent or -1; fewer is refused here, more than 16384 by the broker) becomes an upsertion; as
Kafka's admin client does, the tool draws a random salt and sends only the salted password
(PBKDF2-HMAC of the password), never the password itself. ``--delete-config SCRAM-SHA-512`` is a
deletion. One command sends one request, so two mechanisms in one command are refused by the
controller (DUPLICATE_RESOURCE), as Apache Kafka's KRaft controller refuses them: the error says
to change one mechanism per command. ``--describe`` prints each user's mechanisms and iteration
counts, one line per user.
Client quotas for users stay refused by the caller (kafka-configs.py): the broker has no quotas.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Final, TextIO

from kio.schema.errors import ErrorCode

from broker.cli.admin import CommandError, Session, UsageError, code, code_name
from broker.security import scram

DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
DEFAULT_ITERATIONS: Final = 4096
# Kafka's user quota keys (QuotaConfig): named apart from unknown keys in the refusal
QUOTA_KEYS: Final = (
    "consumer_byte_rate",
    "producer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
_SALT_BYTES: Final = 32


def is_scram(key: str) -> bool:
    return key in scram.MECHANISMS


def check_keys(added: Mapping[str, str], deleted: Sequence[str]) -> None:
    """Keys that are neither SCRAM mechanisms nor quotas: Kafka's refusal."""
    for keys, verb in ((list(added), "added"), (list(deleted), "deleted")):
        unknown = [k for k in keys if not is_scram(k) and k not in QUOTA_KEYS]
        if unknown:
            raise UsageError(
                f"Only quota and SCRAM credential configs can be {verb} for 'users' using "
                f"--bootstrap-server. Unexpected config names: {','.join(unknown)}"
            )


def parse_credential(mechanism: str, value: str) -> tuple[int, str]:
    """``[iterations=N,]password=P`` (brackets already dropped) -> (iterations, password)."""
    m = _CREDENTIAL.fullmatch(value)
    if m is None or m.group(1) == "" or m.group(1) == "-":
        # the value is not echoed: it holds the password
        raise UsageError(
            f"Invalid credential property {mechanism}: expected "
            f"'{mechanism}=[password=<password>]' or '{mechanism}=[iterations=<n>,password=<password>]'"
        )
    iterations = DEFAULT_ITERATIONS if m.group(1) in (None, "-1") else int(m.group(1))
    if iterations > 2**31 - 1:  # the request's INT32
        raise UsageError(f"Iterations {m.group(1)} is not a valid integer")
    if iterations < scram.MIN_ITERATIONS:
        raise UsageError(
            f"Iterations {iterations} is less than the minimum {scram.MIN_ITERATIONS} required "
            f"for {mechanism}"
        )
    return iterations, m.group(2)


def upsertion(user: str, mechanism: str, value: str) -> dict[str, object]:
    """One AlterUserScramCredentials upsertion, salted here as Kafka's admin client does."""
    iterations, password = parse_credential(mechanism, value)
    m = scram.MECHANISMS[mechanism]
    salt = secrets.token_bytes(_SALT_BYTES)
    return {
        "name": user,
        "mechanism": m.type,
        "iterations": iterations,
        "salt": salt,
        "salted_password": scram.salted_password(m, password, salt, iterations),
    }


async def alter(
    session: Session, user: str, added: Mapping[str, str], deleted: Sequence[str], out: TextIO
) -> int:
    upsertions = [upsertion(user, k, v) for k, v in added.items()]  # bad values fail before I/O
    resp = await session.call(
        ALTER_SCRAM,
        {
            "deletions": [{"name": user, "mechanism": scram.MECHANISMS[k].type} for k in deleted],
            "upsertions": upsertions,
        },
    )
    for r in resp.results:
        c = code(r.error_code)
        if c == ErrorCode.duplicate_resource and len(added) + len(deleted) > 1:
            raise CommandError(
                f"{r.error_message} ({code_name(c)}): a KRaft controller (Kafka's and this one) "
                "alters a user's credentials once per request: change one mechanism per command"
            )
        if c:
            raise CommandError(
                f"{r.error_message or 'AlterUserScramCredentials failed'} ({code_name(c)})"
            )
    print(f"Completed updating config for user {user}.", file=out)
    return 0


async def describe(session: Session, user: str | None, out: TextIO) -> int:
    """Kafka's lines: users named but without credentials print nothing."""
    resp = await session.call(DESCRIBE_SCRAM, {"users": None if user is None else [{"name": user}]})
    top = code(resp.error_code)
    if top:
        raise CommandError(
            f"{resp.error_message or 'DescribeUserScramCredentials failed'} ({code_name(top)})"
        )
    for r in resp.results:
        c = code(r.error_code)
        if c == ErrorCode.resource_not_found:
            continue
        if c:
            print(
                f"Error retrieving SCRAM credential configs for user-principal '{r.user}': "
                f"{code_name(c)}: {r.error_message or ''}",
                file=out,
            )
            continue
        infos = ", ".join(
            f"{scram.BY_TYPE[int(i.mechanism)].name}=iterations={int(i.iterations)}"
            for i in r.credential_infos
            if int(i.mechanism) in scram.BY_TYPE
        )
        print(f"SCRAM credential configs for user-principal '{r.user}' are {infos}", file=out)
    return 0
