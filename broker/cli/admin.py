"""What the admin tools (``kafka-mirrors.sh``, ``kafka-configs.sh``, ``kafka-acls.sh``) share: the
usage / command error split, ``--bootstrap-server`` and ``--command-config`` handling, and one
negotiated connection to a broker (TLS/SASL from the command config, as Kafka's tools read it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, NoReturn, TextIO

from kio.schema.errors import ErrorCode

from broker.config.properties import PropertiesError, load_properties
from broker.network.client import ClientConnection
from broker.network.errors import NetworkError
from broker.security.client import client_security
from broker.security.errors import SecurityConfigError
from protocol.build import build
from protocol.errors import MirrorErrorCode


class UsageError(Exception):
    """A bad invocation: reported with a hint to --help, exit 1."""


class TerseError(Exception):
    """Kafka's TerseException: its message alone on stderr, exit code 1."""


class CommandError(Exception):
    """The broker refused or could not be reached: reported on stderr, exit 1."""


class Parser(argparse.ArgumentParser):
    """argparse that raises `UsageError` instead of printing usage and exiting 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def version() -> str:
    try:
        return metadata.version("kmirror")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def code_name(code: int) -> str:
    for enum in (ErrorCode, MirrorErrorCode):
        try:
            return str(enum(code).name).upper()
        except ValueError:
            continue
    return f"UNKNOWN_ERROR_{code}"


def code(value: Any) -> int:
    return int(getattr(value, "value", value))


def load(path: str, what: str) -> dict[str, str]:
    try:
        return dict(load_properties(path))
    except (OSError, PropertiesError) as e:
        raise UsageError(f"cannot read the {what} file {path}: {e}") from None


def optional_config(path: str | None, flag: str) -> dict[str, str]:
    """The client properties file a tool's ``flag`` names (``--command-config``,
    ``--admin.config``); none given: no properties."""
    if path is None:
        return {}
    if not os.path.exists(path):
        raise UsageError(f"{flag}: the file {path} does not exist")
    return load(path, flag)


def servers(value: str) -> list[tuple[str, int]]:
    out = []
    for entry in (e.strip() for e in value.split(",")):
        host, sep, port = entry.rpartition(":")
        if not entry or not sep or not port.isdigit():
            raise UsageError(f"--bootstrap-server: '{entry}' is not host:port")
        out.append((host or "localhost", int(port)))
    return out


class Session:
    """One negotiated connection to a broker."""

    def __init__(self, conn: ClientConnection, props: Mapping[str, str] | None = None) -> None:
        self.conn = conn
        self.props: Mapping[str, str] = props or {}  # --command-config, for more connections

    @classmethod
    async def open(
        cls,
        addresses: Sequence[tuple[str, int]],
        props: Mapping[str, str],
        client_id: str = "kafka-mirrors",
        what: str = "the destination cluster",
    ) -> Session:
        try:
            # security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config as Kafka's tools read them
            security = client_security(props, "--command-config ")
        except SecurityConfigError as e:
            raise UsageError(str(e)) from None
        try:
            timeout_ms = int(props.get("request.timeout.ms", "30000"))
        except ValueError:
            raise UsageError("request.timeout.ms in --command-config is not a number") from None
        errors = []
        for host, port in addresses:
            conn = ClientConnection(
                host,
                port,
                props.get("client.id", client_id),
                request_timeout_ms=timeout_ms,
                connect_timeout_ms=min(timeout_ms, 10_000),
                ssl_context=security.ssl_context,
                authenticate=security.authenticate if security.uses_sasl else None,
            )
            try:
                await conn.connect()
                return cls(conn, props)
            except NetworkError as e:
                errors.append(str(e))
        raise CommandError(f"cannot connect to {what}: " + "; ".join(errors))

    async def call(self, api_key: int, fields: dict[str, Any]) -> Any:
        try:
            api_version = self.conn.version_for(api_key)
            body: Any = build(self.conn.registry.spec(api_key).request_type(api_version), fields)
            return await self.conn.send(body, api_version)
        except NetworkError as e:
            raise CommandError(str(e)) from None

    def close(self) -> None:
        self.conn.close()


def check(resp: Any) -> None:
    c = code(resp.error_code)
    if c:
        raise CommandError(f"{resp.error_message or 'request failed'} ({code_name(c)})")


def run_main(
    argv: Sequence[str] | None,
    out: TextIO,
    err: TextIO,
    *,
    parser: argparse.ArgumentParser,
    help_text: str,
    tool: str,
    what: str,
    start: Callable[[argparse.Namespace], int],
) -> int:
    """The shared ``main`` of the admin tools: ``--help`` / ``--version``, then ``start`` (which
    validates and runs the command); usage and command errors as one line on ``err``, exit 1."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(args_list)
        if args.help or not args_list:
            print(help_text, end="", file=out if args.help else err)
            return 0 if args.help else 1
        if args.version:
            print(version(), file=out)
            return 0
        return start(args)
    except TerseError as e:
        print(str(e), file=err)
        return 1
    except UsageError as e:
        print(f"Error: {e}", file=err)
        print(f"Run {tool} --help for the options.", file=err)
        return 1
    except BrokenPipeError:  # stdout closed early (| head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except CommandError as e:
        print(f"Error while executing {what} command: {e}", file=err)
        return 1
