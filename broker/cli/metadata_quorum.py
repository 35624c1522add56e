"""``kafka-metadata-quorum.sh``: the KRaft metadata quorum's state, with Apache Kafka's flags,
messages and output (``describe --status`` / ``describe --replication [--human-readable]``;
formats in ``quorum_format.py``).

DescribeQuorum (55, v0-2) goes to the node the tool connects to (``--bootstrap-controller``:
a controller listener, served by the quorum itself; ``--bootstrap-server``: a broker listener,
which in Kafka forwards it to the active controller). Only the quorum leader answers; a node
that is not answers NOT_LEADER_OR_FOLLOWER with the leader it knows, and the tool goes on as
Kafka's admin client does: the other given addresses, then the leader's endpoint from
DescribeCluster (controller endpoints with ``--bootstrap-controller``), retrying every
``retry.backoff.ms`` while no leader is known, until ``default.api.timeout.ms`` (60 s).
``--status`` reads the cluster id with DescribeCluster.

``add-controller`` (KIP-853) reads the joining controller's server.properties (``--command-
config``, as Kafka 4.0; or ``--controller.config``, the admin settings then staying in
``--command-config``): its node.id, the directory.id of its metadata log dir, its controller
listeners' advertised endpoints; it sends AddRaftVoter (80) to the quorum leader and prints
Kafka's ``Added controller N with directory id D and endpoints: ...``.
``remove-controller --controller-id N --controller-directory-id D`` sends RemoveRaftVoter (81)
and prints Kafka's ``Removed  KRaft controller N with directory id D`` (two spaces, as Kafka).
Before removing, the tool refuses (this check is ours; Kafka has none) to remove the last voter
or a voter whose removal would leave fewer caught-up voters than a majority of those remaining:
the quorum would stop committing. ``--dry-run`` prints what would be done. Exit code 0 on
success, 1 on any error (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final, TextIO

from broker.cli.admin import (
    CommandError,
    Parser,
    Session,
    TerseError,
    UsageError,
    code,
    code_name,
    load,
    run_main,
)
from broker.cli.quorum_format import (
    FormatError,
    QuorumInfo,
    Replica,
    format_replication,
    format_status,
    uuid_string,
)
from broker.config.meta_properties import (
    MetaPropertiesError,
    parse_uuid,
    read_meta_properties,
)

DESCRIBE_QUORUM, DESCRIBE_CLUSTER = 55, 60
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 80, 81
VOTER_CHANGE_TIMEOUT_MS = 30_000
CAUGHT_UP_MS = 30_000  # a voter caught up within this long counts towards the majority check
REMOVAL_CHECK_S = 15.0  # how long a refused removal check is asked again
METADATA_TOPIC: Final = "__cluster_metadata"
NOT_LEADER_OR_FOLLOWER = 6
BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2  # DescribeCluster EndpointType (v1+)
TOOL: Final = "kafka-metadata-quorum.sh"

HELP = """\
usage: kafka-metadata-quorum [-h] [--command-config COMMAND_CONFIG]
                             (--bootstrap-server BOOTSTRAP_SERVER |
                             --bootstrap-controller BOOTSTRAP_CONTROLLER)
                             {describe,add-controller,remove-controller} ...

Describes the KRaft metadata quorum.

positional arguments:
  describe               The quorum's leader, epoch, high watermark and replicas:
                           describe --status              a summary
                           describe --replication         each replica's progress
                                    [--human-readable]    times as "<n> ms ago"
  add-controller         Add a controller to the KRaft controller cluster:
                           add-controller [--dry-run] [--controller.config FILE]
                           (the controller's server.properties in --command-config,
                           or in --controller.config)
  remove-controller      Remove a controller from the KRaft controller cluster:
                           remove-controller --controller-id N
                             --controller-directory-id ID [--dry-run]

named arguments:
  -h, --help             Print this help.
  --bootstrap-server BOOTSTRAP_SERVER
                         Comma-separated host:port pairs of brokers to connect to.
  --bootstrap-controller BOOTSTRAP_CONTROLLER
                         Comma-separated host:port pairs of controllers to connect to.
  --command-config COMMAND_CONFIG
                         Properties for the connection (security.protocol, ssl.*, sasl.*,
                         request.timeout.ms, default.api.timeout.ms, retry.backoff.ms).
  --version              Print the version.
"""


class NotLeaderHere(Exception):
    def __init__(self, leader_id: int, epoch: int) -> None:
        super().__init__(f"not the quorum leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="kafka-metadata-quorum", add_help=False, allow_abbrev=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--version", action="store_true")
    p.add_argument("--bootstrap-server")
    p.add_argument("--bootstrap-controller")
    p.add_argument("--command-config")
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    d = sub.add_parser("describe", add_help=False, allow_abbrev=False)
    d.add_argument("-h", "--help", action="store_true", default=argparse.SUPPRESS)
    d.add_argument("--status", action="store_true")
    d.add_argument("--replication", action="store_true")
    d.add_argument("--human-readable", action="store_true")
    a = sub.add_parser("add-controller", add_help=False, allow_abbrev=False)
    a.add_argument("--dry-run", action="store_true")
    a.add_argument("--controller.config", dest="controller_config")
    r = sub.add_parser("remove-controller", add_help=False, allow_abbrev=False)
    r.add_argument("--controller-id", "-i")
    r.add_argument("--controller-directory-id", "-d")
    r.add_argument("--dry-run", action="store_true")
    return p


def addresses(flag: str, value: str) -> list[tuple[str, int]]:
    out = []
    for entry in (e.strip() for e in value.split(",")):
        host, sep, port = entry.rpartition(":")
        if not entry or not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"{flag}: '{entry}' is not host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    return out


def _millis(props: dict[str, str], key: str, default: int) -> int:
    try:
        return int(props.get(key, str(default)))
    except ValueError:
        raise UsageError(f"{key} in --command-config is not a number") from None


def quorum_info(resp: Any) -> QuorumInfo:
    """The leader's answer as the admin client reads it (errors: CommandError, or NotLeaderHere
    for a node that is not the leader)."""
    if code(resp.error_code):
        message = getattr(resp, "error_message", None) or "DescribeQuorum failed"
        raise CommandError(f"{message} ({code_name(code(resp.error_code))})")
    if len(resp.topics) != 1 or resp.topics[0].topic_name != METADATA_TOPIC:
        raise CommandError(
            f"DescribeQuorum answered {len(resp.topics)} topics, not {METADATA_TOPIC}"
        )
    partitions = resp.topics[0].partitions
    if len(partitions) != 1 or int(partitions[0].partition_index) != 0:
        raise CommandError(f"DescribeQuorum answered other partitions than {METADATA_TOPIC}-0")
    p = partitions[0]
    err = code(p.error_code)
    if err == NOT_LEADER_OR_FOLLOWER:
        raise NotLeaderHere(int(p.leader_id), int(p.leader_epoch))
    if err:
        message = getattr(p, "error_message", None) or "DescribeQuorum failed"
        raise CommandError(f"{message} ({code_name(err)})")
    nodes = {
        int(n.node_id): [(str(li.name), str(li.host), int(li.port)) for li in n.listeners]
        for n in getattr(resp, "nodes", ())
    }
    return QuorumInfo(
        int(p.leader_id),
        int(p.leader_epoch),
        int(p.high_watermark),
        [_replica(r) for r in p.current_voters],
        [_replica(r) for r in p.observers],
        nodes,
    )


def _replica(r: Any) -> Replica:
    def ts(name: str) -> int | None:
        value = int(getattr(r, name, -1))
        return None if value == -1 else value

    directory = getattr(r, "replica_directory_id", None)
    return Replica(
        int(r.replica_id),
        int(r.log_end_offset),
        ts("last_fetch_timestamp"),
        ts("last_caught_up_timestamp"),
        directory if isinstance(directory, uuid.UUID) else None,
    )


class Tool:
    """Finds the quorum leader from the given addresses and asks it."""

    def __init__(
        self, targets: list[tuple[str, int]], props: dict[str, str], controllers: bool
    ) -> None:
        self.targets = targets
        self.props = props
        self.controllers = controllers
        self.what = "the controllers" if controllers else "the cluster"
        self.timeout_ms = _millis(props, "default.api.timeout.ms", 60_000)
        self.backoff_ms = _millis(props, "retry.backoff.ms", 100)
        self.session: Session | None = None

    async def _open(self, where: Sequence[tuple[str, int]]) -> Session:
        return await Session.open(where, self.props, "kafka-metadata-quorum", self.what)

    async def first_session(self) -> Session:
        if self.session is None:
            self.session = await self._open(self.targets)
        return self.session

    async def cluster(self, session: Session) -> Any:
        resp = await session.call(
            DESCRIBE_CLUSTER,
            {
                "include_cluster_authorized_operations": False,
                "endpoint_type": CONTROLLER_ENDPOINTS if self.controllers else BROKER_ENDPOINTS,
            },
        )
        if code(resp.error_code):
            message = resp.error_message or "DescribeCluster failed"
            raise CommandError(f"{message} ({code_name(code(resp.error_code))})")
        return resp

    async def cluster_id(self) -> str:
        return str((await self.cluster(await self.first_session())).cluster_id)

    @staticmethod
    async def _ask(session: Session) -> QuorumInfo:
        return quorum_info(
            await session.call(
                DESCRIBE_QUORUM,
                {
                    "topics": [
                        {"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}
                    ]
                },
            )
        )

    async def _ask_at(self, address: tuple[str, int]) -> QuorumInfo | NotLeaderHere | None:
        try:
            session = await self._open([address])
        except CommandError:
            return None
        try:
            return await self._ask(session)
        except NotLeaderHere as e:
            return e
        except CommandError:
            return None
        finally:
            session.close()

    async def _leader_address(self, session: Session, leader_id: int) -> tuple[str, int] | None:
        try:
            resp = await self.cluster(session)
        except CommandError:
            return None
        for b in resp.brokers:
            if int(b.broker_id) == leader_id:
                return (str(b.host), int(b.port))
        return None

    async def describe(self) -> QuorumInfo:
        session = await self.first_session()
        deadline = time.monotonic() + self.timeout_ms / 1000
        known = (-1, -1)
        while True:
            try:
                return await self._ask(session)
            except NotLeaderHere as e:
                known = (e.leader_id, e.epoch)
            here = (session.conn.host, session.conn.port)
            tried = {here}
            for address in self.targets:
                if address in tried:
                    continue
                tried.add(address)
                answer = await self._ask_at(address)
                if isinstance(answer, QuorumInfo):
                    return answer
                if isinstance(answer, NotLeaderHere) and answer.epoch >= known[1]:
                    known = (answer.leader_id, answer.epoch)
            if known[0] >= 0:
                address_or_none = await self._leader_address(session, known[0])
                if address_or_none is not None and address_or_none not in tried:
                    answer = await self._ask_at(address_or_none)
                    if isinstance(answer, QuorumInfo):
                        return answer
            if time.monotonic() >= deadline:
                leader = f"node {known[0]}" if known[0] >= 0 else "not known"
                raise CommandError(
                    f"no quorum leader answered DescribeQuorum within {self.timeout_ms} ms "
                    f"(NOT_LEADER_OR_FOLLOWER from {here[0]}:{here[1]}; leader: {leader}, "
                    f"epoch {known[1]}); give the leader's controller listener with "
                    "--bootstrap-controller"
                )
            await asyncio.sleep(self.backoff_ms / 1000)

    async def change_voters(self, api_key: int, fields: dict[str, Any]) -> None:
        """AddRaftVoter / RemoveRaftVoter at the quorum leader (found with DescribeQuorum),
        asked again while the leader moves, until ``default.api.timeout.ms``."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            info = await self.describe()
            address = leader_address(info)
            if address is None:
                raise CommandError(
                    f"DescribeQuorum named no endpoint for the leader {info.leader_id}"
                )
            session = await self._open([address])
            try:
                resp = await session.call(
                    api_key, {"cluster_id": None, "timeout": VOTER_CHANGE_TIMEOUT_MS, **fields}
                )
            finally:
                session.close()
            err = code(resp.error_code)
            if err == 0:
                return
            retry = err == NOT_LEADER_OR_FOLLOWER and time.monotonic() < deadline
            if not retry:
                message = getattr(resp, "error_message", None) or code_name(err)
                raise CommandError(f"{code_exception(err)}: {message}")
            await asyncio.sleep(self.backoff_ms / 1000)

    async def check_removal(self, voter_id: int, now_ms: Callable[[], int]) -> None:
        """``check_removal`` on the leader's view; a leader elected a moment ago has not heard
        from every voter yet, so a refusal is asked again for up to ``REMOVAL_CHECK_S``."""
        deadline = time.monotonic() + min(REMOVAL_CHECK_S, self.timeout_ms / 1000)
        while True:
            try:
                check_removal(await self.describe(), voter_id, now_ms())
                return
            except CommandError:
                if time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(max(self.backoff_ms, 500) / 1000)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


class TerseUsage(TerseError):
    pass


def leader_address(info: QuorumInfo) -> tuple[str, int] | None:
    endpoints = info.nodes.get(info.leader_id) or []
    return (endpoints[0][1], endpoints[0][2]) if endpoints else None


_EXCEPTIONS = {
    7: "org.apache.kafka.common.errors.TimeoutException",
    35: "org.apache.kafka.common.errors.UnsupportedVersionException",
    42: "org.apache.kafka.common.errors.InvalidRequestException",
    126: "org.apache.kafka.common.errors.DuplicateVoterException",
    127: "org.apache.kafka.common.errors.VoterNotFoundException",
    31: "org.apache.kafka.common.errors.ClusterAuthorizationException",
    104: "org.apache.kafka.common.errors.InconsistentClusterIdException",
}


def code_exception(err: int) -> str:
    return _EXCEPTIONS.get(err, code_name(err))


class JoiningController:
    def __init__(
        self, node_id: int, directory: uuid.UUID, endpoints: list[tuple[str, str, int]]
    ) -> None:
        self.node_id = node_id
        self.directory = directory
        self.endpoints = endpoints

    def describe(self) -> str:
        eps = ", ".join(
            f"{name}://{'[' + host + ']' if ':' in host else host}:{port}"
            for name, host, port in self.endpoints
        )
        return (
            f"controller {self.node_id} with directory id {uuid_string(self.directory)} "
            f"and endpoints: {eps}"
        )

    def request(self) -> dict[str, Any]:
        return {
            "voter_id": self.node_id,
            "voter_directory_id": self.directory,
            "listeners": [{"name": n, "host": h, "port": p} for n, h, p in self.endpoints],
            "ack_when_committed": True,
        }


def joining_controller(props: dict[str, str]) -> JoiningController:
    """Kafka's checks of the joining controller's configuration file, with its messages."""
    if "node.id" not in props:
        raise TerseUsage(
            "node.id not found in configuration file. Is this a valid controller "
            "configuration file?"
        )
    try:
        node_id = int(props["node.id"])
    except ValueError:
        raise TerseUsage(f"node.id {props['node.id']!r} is not a number") from None
    if node_id < 0:
        raise TerseUsage(
            "node.id was negative in configuration file. Is this a valid controller "
            "configuration file?"
        )
    if "controller" not in props.get("process.roles", ""):
        raise TerseUsage(
            "process.roles did not contain 'controller' in configuration file. Is this a valid "
            "controller configuration file?"
        )
    directory = props.get("metadata.log.dir")
    if directory is None and props.get("log.dirs", "").strip():
        directory = props["log.dirs"].strip().split(",")[0]
    if directory is None:
        raise TerseUsage(
            "Neither metadata.log.dir nor log.dirs were found. Is this a valid controller "
            "configuration file?"
        )
    try:
        meta = read_meta_properties(directory)
    except (MetaPropertiesError, OSError):
        raise TerseUsage(f"Unable to read meta.properties from {directory}") from None
    if meta.directory_id is None:
        raise TerseUsage(f"No directory id found in {directory}")
    listeners: dict[str, tuple[str, int]] = {}
    for key in ("listeners", "advertised.listeners"):
        for entry in filter(None, (e.strip() for e in props.get(key, "").split(","))):
            name, sep, rest = entry.partition("://")
            host, _, port = rest.rpartition(":")
            if sep and port.isdigit():
                listeners[name.upper()] = (host.strip("[]") or "localhost", int(port))
    if "controller.listener.names" not in props:
        raise TerseUsage(
            "controller.listener.names was not found. Is this a valid controller "
            "configuration file?"
        )
    endpoints = []
    for name in props["controller.listener.names"].split(","):
        name = name.strip().upper()
        if name not in listeners:
            raise TerseUsage(f"Cannot find information about controller listener name: {name}")
        endpoints.append((name, *listeners[name]))
    return JoiningController(node_id, uuid.UUID(bytes=parse_uuid(meta.directory_id)), endpoints)


def removal(controller_id: str, directory: str) -> tuple[int, uuid.UUID]:
    try:
        voter_id = int(controller_id)
    except ValueError:
        raise UsageError(
            f"argument --controller-id/-i: could not convert '{controller_id}' (choose from "
            "an integer)"
        ) from None
    if voter_id < 0:
        raise TerseUsage(f"Invalid negative --controller-id: {voter_id}")
    try:
        return voter_id, uuid.UUID(bytes=parse_uuid(directory))
    except MetaPropertiesError as e:
        raise TerseUsage(f"Failed to parse --controller-directory-id: {e}") from None


def check_removal(info: QuorumInfo, voter_id: int, now_ms: int) -> None:
    """Refuse what would leave the quorum unable to commit: removing the last voter, or a
    removal after which the voters caught up lately are not a majority of those left."""
    ids = [v.replica_id for v in info.voters]
    if voter_id not in ids:
        return  # the leader answers VOTER_NOT_FOUND with Kafka's message
    if len(ids) == 1:
        raise CommandError(
            f"Cannot remove controller {voter_id}: it is the only voter of the quorum"
        )
    left = [v for v in info.voters if v.replica_id != voter_id]
    live = [
        v
        for v in left
        if v.replica_id == info.leader_id
        or (
            v.last_caught_up_timestamp is not None
            and now_ms - v.last_caught_up_timestamp <= CAUGHT_UP_MS
        )
    ]
    majority = len(left) // 2 + 1
    if len(live) < majority:
        raise CommandError(
            f"Cannot remove controller {voter_id}: of the {len(left)} voters left, only "
            f"{len(live)} ({', '.join(str(v.replica_id) for v in live)}) caught up in the last "
            f"{CAUGHT_UP_MS} ms, fewer than a majority ({majority}): the quorum would stop "
            "committing"
        )


def _command(args: argparse.Namespace) -> str:
    """Kafka's checks, in its order; returns "status" or "replication"."""
    if args.command is None:
        raise UsageError("a command is required: describe")
    if args.command == "add-controller":
        if args.command_config is None and args.controller_config is None:
            raise TerseUsage(
                "You must supply the configuration file of the controller you are adding when "
                "using add-controller."
            )
        return "add-controller"
    if args.command == "remove-controller":
        if args.controller_id is None or args.controller_directory_id is None:
            missing = (
                "--controller-id/-i"
                if args.controller_id is None
                else ("--controller-directory-id/-d")
            )
            raise UsageError(f"argument {missing} is required")
        return "remove-controller"
    if args.status and args.replication:
        raise UsageError(
            "Only one of --status or --replication should be specified with describe sub-command"
        )
    if args.replication:
        return "replication"
    if args.status:
        if args.human_readable:
            raise UsageError(
                "The option --human-readable is only supported along with --replication"
            )
        return "status"
    raise UsageError("One of --status or --replication must be specified with describe sub-command")


def _target(args: argparse.Namespace) -> tuple[list[tuple[str, int]], bool]:
    server, controller = args.bootstrap_server, args.bootstrap_controller
    if server is not None and controller is not None:
        raise UsageError(
            "argument --bootstrap-controller: not allowed with argument --bootstrap-server"
        )
    if server is None and controller is None:
        raise UsageError(
            "one of the arguments --bootstrap-server --bootstrap-controller is required"
        )
    if controller is not None:
        return addresses("--bootstrap-controller", controller), True
    return addresses("--bootstrap-server", server), False


def _props(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    if not os.path.exists(path):
        raise UsageError(f"Properties file {path} does not exist.")
    return load(path, "--command-config")


async def _run(args: argparse.Namespace, out: TextIO, now_ms: Callable[[], int]) -> int:
    targets, controllers = _target(args)
    props = _props(args.command_config)
    command = _command(args)
    if command == "add-controller":
        controller = _props(args.controller_config or args.command_config)
        if args.controller_config is None:
            props = {}  # the controller's own server.properties is no admin client config
        added = joining_controller(controller)
        if args.dry_run:
            out.write(f"DRY RUN of adding {added.describe()}\n")
            return 0
    tool = Tool(targets, props, controllers)
    try:
        if command == "add-controller":
            await tool.change_voters(ADD_RAFT_VOTER, added.request())
            out.write(f"Added {added.describe()}\n")
            return 0
        if command == "remove-controller":
            voter_id, directory = removal(args.controller_id, args.controller_directory_id)
            await tool.check_removal(voter_id, now_ms)
            if not args.dry_run:
                await tool.change_voters(
                    REMOVE_RAFT_VOTER,
                    {"voter_id": voter_id, "voter_directory_id": directory},
                )
            prefix = "DRY RUN of removing " if args.dry_run else "Removed "
            out.write(
                f"{prefix} KRaft controller {voter_id} with directory id {uuid_string(directory)}\n"
            )
            return 0
        if command == "status":
            cluster_id = await tool.cluster_id()
            text = format_status(cluster_id, await tool.describe())
        else:
            text = format_replication(await tool.describe(), args.human_readable, now_ms())
    except FormatError as e:
        raise CommandError(str(e)) from None
    finally:
        tool.close()
    out.write(text)
    return 0


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def main(
    argv: Sequence[str] | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    now_ms: Callable[[], int] = _wall_ms,
) -> int:
    def start(args: argparse.Namespace) -> int:
        return asyncio.run(_run(args, out, now_ms))

    return run_main(
        argv, out, err, parser=_parser(), help_text=HELP, tool=TOOL,
        what="metadata quorum", start=start,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
