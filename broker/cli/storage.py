"""``kafka-storage.sh``: random-uuid, format and info, with Kafka's StorageTool messages.

Exit codes follow StorageTool: 0 on success, 1 on a failure reported on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from broker.cli.storage_scram import ScramArgumentError, scram_record
from broker.config.meta_properties import (
    META_PROPERTIES,
    MetaProperties,
    MetaPropertiesError,
    parse_uuid,
    random_uuid,
    read_meta_properties,
    uuid_to_str,
    write_meta_properties,
)
from broker.config.server_config import ConfigError, ServerConfig, load_server_config
from broker.log.dir_lock import DirLock, LogDirLockedError
from broker.metadata.bootstrap import write_bootstrap
from broker.quorum.bootstrap_voters import (
    InitialControllersError,
    controller_endpoints,
    directory_uuid,
    parse_initial_controllers,
    write_bootstrap_snapshot,
)
from broker.raft.voter_set import VoterEntry, VoterSet

# The metadata.version a Kafka 4.1 format reports; kmirror speaks 4.1's protocol.
RELEASE_VERSION = "4.1-IV1"


class TerseFailure(Exception):
    """A failure reported as one line on stderr, exit code 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # StorageTool exits 1 on bad arguments (argparse's default is 2).
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kafka-storage", description="The Kafka storage tool.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("random-uuid", help="Print a random UUID.")
    fmt = sub.add_parser("format", help="Format the Kafka log directories on this node.")
    fmt.add_argument("--config", "-c", required=True, help="The Kafka configuration file to use.")
    fmt.add_argument("--cluster-id", "-t", required=True, help="The cluster ID to use.")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true")
    # KIP-853: how a controller of a dynamic quorum starts (exactly one, unless static voters)
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument(
        "--standalone",
        "-s",
        action="store_true",
        help="Used to initialize a controller as a single-node dynamic quorum.",
    )
    quorum.add_argument(
        "--initial-controllers",
        "-I",
        help="Used to initialize a server with a specific dynamic quorum. The argument is a "
        "comma-separated list of id@hostname:port:directory-id.",
    )
    quorum.add_argument(
        "--no-initial-controllers",
        "-N",
        action="store_true",
        help="Used to initialize a server without a dynamic quorum topology.",
    )
    fmt.add_argument("--release-version", "-r")
    fmt.add_argument(
        "--add-scram",
        "-S",
        action="append",
        default=[],
        metavar="SCRAM_CREDENTIAL",
        help="A SCRAM credential to write into the bootstrap metadata, e.g. "
        "'SCRAM-SHA-256=[name=alice,password=alice-secret]'; may be repeated.",
    )
    info = sub.add_parser(
        "info", help="Get information about the Kafka log directories on this node."
    )
    info.add_argument("--config", "-c", required=True, help="The Kafka configuration file to use.")
    return p


def _load(path: str, err: TextIO) -> ServerConfig:
    try:
        cfg, warnings = load_server_config(path)
    except ConfigError as e:
        raise TerseFailure(str(e)) from None
    for w in warnings:
        print(f"WARNING: {w}", file=err)
    return cfg


def _directories(cfg: ServerConfig) -> list[str]:
    dirs = list(cfg.log_dirs)
    if cfg.metadata_log_dir not in dirs:
        dirs.append(cfg.metadata_log_dir)
    return dirs


def format_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cfg = _load(args.config, err)
    try:
        parse_uuid(args.cluster_id)
    except MetaPropertiesError as e:
        raise TerseFailure(
            f"Cluster ID string {args.cluster_id} does not appear to be a valid UUID: {e}"
        ) from None
    if args.release_version not in (None, RELEASE_VERSION):
        raise TerseFailure(
            f"Unknown release version '{args.release_version}'. Supported versions are: "
            f"{RELEASE_VERSION}"
        )
    dynamic = args.standalone or args.initial_controllers is not None
    if dynamic or args.no_initial_controllers:
        if not cfg.is_controller:
            flag = (
                "--standalone"
                if args.standalone
                else "--initial-controllers"
                if args.initial_controllers is not None
                else "--no-initial-controllers"
            )
            raise TerseFailure(f"You can only use {flag} on a controller.")
        if dynamic and cfg.controller_quorum_voters:
            raise TerseFailure(
                "You cannot specify controller.quorum.voters and format the node with "
                "--initial-controllers or --standalone. If you want to use dynamic quorum, "
                "please remove controller.quorum.voters and specify "
                "controller.quorum.bootstrap.servers instead."
            )
    if (
        not dynamic
        and not args.no_initial_controllers
        and cfg.is_controller
        and (not cfg.controller_quorum_voters)
    ):
        raise TerseFailure(
            "Because controller.quorum.voters is not set on this controller, you must specify "
            "one of the following: --standalone, --initial-controllers, or --no-initial-controllers."
        )
    voters = _initial_voters(cfg, args)
    try:
        bootstrap = [scram_record(a) for a in args.add_scram]
    except ScramArgumentError as e:
        raise TerseFailure(str(e)) from None
    dirs = _directories(cfg)
    formatted = [d for d in dirs if (Path(d) / META_PROPERTIES).exists()]
    for d in formatted:
        try:
            meta = read_meta_properties(d)
        except (MetaPropertiesError, OSError):
            continue
        if meta.cluster_id != args.cluster_id or meta.node_id != cfg.node_id:
            raise TerseFailure(
                f"Log directory {d} is formatted for cluster {meta.cluster_id} node "
                f"{meta.node_id}, not cluster {args.cluster_id} node {cfg.node_id}."
            )
    if formatted and not args.ignore_formatted:
        raise TerseFailure(
            f"Log directory {formatted[0]} is already formatted. "
            "Use --ignore-formatted to ignore this directory and format the others."
        )
    empty = [d for d in dirs if d not in formatted]
    if not empty:
        print("All of the log directories are already formatted.", file=out)
        return 0
    locks = _lock_all(empty)  # a running node's directory is never written under it
    try:
        _write_all(empty, cfg, args, out, voters)
        if bootstrap and cfg.metadata_log_dir in empty:
            try:
                write_bootstrap(cfg.metadata_log_dir, bootstrap)
            except OSError as e:
                raise TerseFailure(
                    f"Error while writing the bootstrap metadata in {cfg.metadata_log_dir}: {e}"
                ) from None
    finally:
        for lock in locks:
            lock.release()
    return 0


def _lock_all(dirs: list[str]) -> list[DirLock]:
    locks: list[DirLock] = []
    try:
        for d in dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
            locks.append(DirLock.acquire(Path(d)))
    except (LogDirLockedError, OSError) as e:
        for lock in locks:
            lock.release()
        raise TerseFailure(str(e)) from None
    return locks


def _initial_voters(cfg: ServerConfig, args: argparse.Namespace) -> VoterSet | None:
    """The initial voters a dynamic quorum's bootstrap snapshot holds (None: none)."""
    if args.initial_controllers is None:
        return None
    listener = cfg.controller_listener_names[0] if cfg.controller_listener_names else "CONTROLLER"
    try:
        return VoterSet(tuple(parse_initial_controllers(args.initial_controllers, listener)))
    except InitialControllersError as e:
        raise TerseFailure(str(e)) from None


def _write_all(
    empty: list[str],
    cfg: ServerConfig,
    args: argparse.Namespace,
    out: TextIO,
    voters: VoterSet | None,
) -> None:
    for d in empty:
        directory_id = random_uuid()
        if d == cfg.metadata_log_dir:
            kind = (
                "dynamic metadata voter directory"
                if args.standalone or (voters is not None and cfg.node_id in voters.ids)
                else "metadata directory"
            )
            me = voters.get(cfg.node_id) if voters is not None else None
            if me is not None:  # the directory id the other controllers were told
                directory_id = uuid_to_str(me.directory_id.bytes)
        else:
            kind = "data directory"
        print(f"Formatting {kind} {d} with metadata.version {RELEASE_VERSION}.", file=out)
        try:
            write_meta_properties(d, MetaProperties(args.cluster_id, cfg.node_id, directory_id))
            if d == cfg.metadata_log_dir and args.standalone:
                me_alone = VoterEntry(
                    cfg.node_id, directory_uuid(directory_id), controller_endpoints(cfg), 0, 1
                )
                write_bootstrap_snapshot(d, VoterSet((me_alone,)))
            elif d == cfg.metadata_log_dir and (voters is not None or args.no_initial_controllers):
                write_bootstrap_snapshot(d, voters)
        except OSError as e:
            raise TerseFailure(f"Error while writing meta.properties file {d}: {e}") from None


def info_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cfg = _load(args.config, err)
    problems: list[str] = []
    found: list[str] = []
    first: MetaProperties | None = None
    for d in sorted(_directories(cfg)):
        p = Path(d)
        if not p.is_dir():
            problems.append(f"{d} does not exist" if not p.exists() else f"{d} is not a directory")
            continue
        found.append(d)
        if not (p / META_PROPERTIES).exists():
            problems.append(f"{d} is not formatted.")
            continue
        try:
            meta = read_meta_properties(d)
        except (MetaPropertiesError, OSError) as e:
            problems.append(f"Error loading {p / META_PROPERTIES}: {e}")
            continue
        if first is None:
            first = meta
        elif first.cluster_id != meta.cluster_id:
            problems.append("Mismatched cluster IDs between storage directories.")
        elif first.node_id != meta.node_id:
            problems.append("Mismatched node IDs between storage directories.")
    if found:
        print("Found log director" + ("y:" if len(found) == 1 else "ies:"), file=out)
        for d in found:
            print(f"  {d}", file=out)
        print("", file=out)
    if first is not None:
        body = ", ".join(f"{k}={v}" for k, v in sorted(first.to_dict().items()))
        print(f"Found metadata: {{{body}}}", file=out)
        print("", file=out)
    if problems:
        print("Found problem:" if len(problems) == 1 else "Found problems:", file=out)
        for pr in problems:
            print(f"  {pr}", file=out)
        print("", file=out)
        return 1
    return 0


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "random-uuid":
            print(random_uuid(), file=out)
            return 0
        if args.command == "format":
            return format_command(args, out, err)
        return info_command(args, out, err)
    except TerseFailure as e:
        print(str(e), file=err)
        return 1


if __name__ == "__main__":
    sys.exit(main())
