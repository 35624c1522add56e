"""``kafka-cluster.sh``: ``cluster-id`` and ``unregister --id N`` (decommissioning a broker), with
Apache Kafka 4.1's ClusterTool flags, output and exit codes.

cluster-id reads DescribeCluster; unregister sends UnregisterBroker (64) to any broker (which
forwards it to the active controller) or, with ``--bootstrap-controller``, to the active
controller. A refusal prints what Kafka's tool prints first, the admin client's exception and its
message (``org.apache.kafka.common.errors.BrokerIdNotRegisteredException: ...``), without the
Java stack trace; exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final, TextIO

from broker.cli.admin import code, code_name, optional_config
from broker.cli.cluster_admin import ClusterAdmin, addresses
from broker.cli.kafka_args import KafkaParser
from broker.cli.tool_exit import parse_and_run

DESCRIBE_CLUSTER, UNREGISTER_BROKER = 60, 64
TOOL: Final = "kafka-cluster"
UNSUPPORTED_VERSION: Final = 35

# error code -> (Kafka exception class, its default message), as the admin client raises them
_EXCEPTIONS: Final[dict[int, tuple[str, str]]] = {
    31: ("ClusterAuthorizationException", "Cluster authorization failed."),
    41: ("NotControllerException", "This is not the correct controller for this cluster."),
    102: ("BrokerIdNotRegisteredException", "The given broker ID was not registered."),
    7: ("TimeoutException", "The request timed out."),
}


class Terse(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    p = KafkaParser(prog=TOOL, description="The Kafka cluster tool.")
    sub = p.add_subparsers(dest="command", parser_class=KafkaParser, required=True)
    cid = sub.add_parser("cluster-id", help="Get information about the ID of a cluster.")
    unr = sub.add_parser("unregister", help="Unregister a broker.")
    for s in (cid, unr):
        s.add_argument(
            "--bootstrap-server",
            "-b",
            help="A list of host/port pairs to use for establishing the connection to the Kafka "
            "cluster.",
        )
        s.add_argument(
            "--bootstrap-controller",
            "-C",
            help="A list of host/port pairs to use for establishing the connection to the KRaft "
            "controllers.",
        )
        s.add_argument(
            "--config", "-c", help="A property file containing configurations for the Admin client."
        )
    unr.add_argument(
        "--id", "-i", type=int, required=True, help="The ID of the broker to unregister."
    )
    return p


def exception_text(c: int, message: str | None) -> str:
    name, default = _EXCEPTIONS.get(c, ("KafkaException", code_name(c)))
    return f"org.apache.kafka.common.errors.{name}: {message or default}"


async def _run(args: argparse.Namespace, out: TextIO) -> None:
    props = optional_config(args.config, "--config")
    if args.bootstrap_server is not None:
        admin = ClusterAdmin(
            addresses("--bootstrap-server", args.bootstrap_server), props, False, TOOL
        )
    elif args.bootstrap_controller is not None:
        admin = ClusterAdmin(
            addresses("--bootstrap-controller", args.bootstrap_controller), props, True, TOOL
        )
    elif "bootstrap.servers" in props:
        admin = ClusterAdmin(
            addresses("bootstrap.servers", props["bootstrap.servers"]), props, False, TOOL
        )
    else:
        raise Terse("Please specify --bootstrap-server.")
    try:
        if args.command == "cluster-id":
            session = await admin.session()
            resp = await session.call(
                DESCRIBE_CLUSTER,
                {
                    "include_cluster_authorized_operations": False,
                    "endpoint_type": 2 if admin.controllers else 1,
                },
            )
            if code(resp.error_code):
                raise Terse(exception_text(code(resp.error_code), resp.error_message))
            if resp.cluster_id:
                print(f"Cluster ID: {resp.cluster_id}", file=out)
            else:
                print("No cluster ID found. The Kafka version is probably too old.", file=out)
            return
        session = await admin.controller_session()
        if UNREGISTER_BROKER not in session.conn.server_versions:
            print("The target cluster does not support the broker unregistration API.", file=out)
            return
        resp = await session.call(UNREGISTER_BROKER, {"broker_id": args.id})
        c = code(resp.error_code)
        if c == UNSUPPORTED_VERSION:
            print("The target cluster does not support the broker unregistration API.", file=out)
        elif c:
            raise Terse(exception_text(c, resp.error_message))
        else:
            print(f"Broker {args.id} is no longer registered.", file=out)
    finally:
        admin.close()


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    return parse_and_run(_parser(), _run, argv, out, err, (Terse,))


if __name__ == "__main__":
    sys.exit(main())
