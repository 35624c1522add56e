"""``kafka-broker-api-versions.sh``: every broker of the cluster and the API versions it serves,
as Apache Kafka 4.1's BrokerApiVersionsCommand prints them (NodeApiVersions, line breaks on):

    <host>:<port> (id: <id> rack: <rack> isFenced: false) -> (
        Produce(0): 3 to 13 [usable: 13],
        ...
    )

Each API by Kafka's name, its range (one number when min = max) and the highest version this
tool's codec shares with the broker (``[usable: n]``); Kafka APIs the broker does not list are
``UNSUPPORTED``, API keys Kafka does not know (KIP-1279's) ``UNKNOWN(<key>)``. A broker that
cannot be asked: ``<node> -> ERROR: <why>``. joptsimple's options and messages: a missing
``--bootstrap-server`` or ``--help`` prints the message and the option table on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any, Final, TextIO

from broker.cli.admin import CommandError, Session, UsageError, code, optional_config, version
from broker.cli.cluster_admin import addresses
from broker.cli.consumer_groups_options import Option, build_parser, render_help
from protocol.registry import REGISTRY

METADATA, API_VERSIONS = 3, 18
TOOL: Final = "kafka-broker-api-versions"
INTRO: Final = "This tool helps to retrieve broker version information."
KAFKA_MAX_KEY: Final = 92  # the last API key Kafka 4.1 knows
# Kafka 4.1 APIs not served on a broker listener (not in its ApiKeys.clientApis())
_NOT_CLIENT_APIS: Final = frozenset({52, 53, 54, 56, 58, 59, 62, 63, 67, 70, 73, 82})
OPTIONS: Final[list[Option]] = [
    ("bootstrap-server", ("String", "server(s) to use for bootstrapping"), False,
     "REQUIRED: The server to connect to."),
    ("command-config", ("String", "command config property file"), False,
     "A property file containing configs to be passed to Admin Client."),
    ("help", None, False, "Print usage information."),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip
HELP: Final = render_help("", OPTIONS)[1:]


def api_name(key: int) -> str:
    return "".join(part.capitalize() for part in REGISTRY.spec(key).name.split("_"))


def _range(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo} to {hi}"


def versions_text(served: dict[int, tuple[int, int]]) -> str:
    lines: dict[int, str] = {}
    for key, (lo, hi) in served.items():
        if key > KAFKA_MAX_KEY or key not in REGISTRY:
            lines[key] = f"UNKNOWN({key}): {_range(lo, hi)}"
            continue
        spec = REGISTRY.spec(key)
        text = f"{api_name(key)}({key}): {_range(lo, hi)}"
        if spec.max_version < lo:
            text += " [unusable: node too new]"
        elif hi < spec.min_version:
            text += " [unusable: node too old]"
        else:
            text += f" [usable: {min(spec.max_version, hi)}]"
        lines[key] = text
    for spec in REGISTRY.specs():
        key = spec.api_key
        if key <= KAFKA_MAX_KEY and key not in _NOT_CLIENT_APIS and key not in lines:
            lines[key] = f"{api_name(key)}({key}): UNSUPPORTED"
    return "(\n\t" + ",\n\t".join(lines[k] for k in sorted(lines)) + "\n)"


def node_text(b: Any) -> str:
    rack = b.rack if b.rack is not None else "null"
    return f"{b.host}:{b.port} (id: {b.node_id} rack: {rack} isFenced: false)"


async def _run(args: argparse.Namespace, out: TextIO) -> None:
    props = optional_config(args.command_config, "--command-config")
    session = await Session.open(
        addresses("--bootstrap-server", args.bootstrap_server), props, TOOL, "the cluster"
    )
    try:
        md = await session.call(
            METADATA,
            {
                "topics": [],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
    finally:
        session.close()
    for b in sorted(md.brokers, key=lambda b: int(b.node_id)):
        try:
            s = await Session.open([(str(b.host), int(b.port))], props, TOOL, f"broker {b.node_id}")
        except CommandError as e:
            print(f"{node_text(b)} -> ERROR: {e}", file=out)
            continue
        try:
            resp = await s.call(
                API_VERSIONS, {"client_software_name": TOOL, "client_software_version": version()}
            )
            if code(resp.error_code):
                print(
                    f"{node_text(b)} -> ERROR: ApiVersions error {code(resp.error_code)}", file=out
                )
                continue
            served = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
            }
            print(f"{node_text(b)} -> {versions_text(served)}", file=out)
        except CommandError as e:
            print(f"{node_text(b)} -> ERROR: {e}", file=out)
        finally:
            s.close()


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(TOOL, OPTIONS, set()).parse_args(args_list)
        if not args_list or args.help:
            print(INTRO, file=err)
            err.write(HELP)
            return 1
        if args.version:
            print(version(), file=out)
            return 0
        if not args.bootstrap_server:
            print('Missing required argument "[bootstrap-server]"', file=err)
            err.write(HELP)
            return 1
        asyncio.run(_run(args, out))
        return 0
    except (UsageError, CommandError) as e:
        print(e, file=err)
        return 1
    except BrokenPipeError:
        return 1
    except Exception as e:  # no traceback for the operator: what failed, in one line
        print(f"{type(e).__name__}: {e}", file=err)
        return 1


if __name__ == "__main__":
    sys.exit(main())
