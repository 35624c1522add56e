"""``kafka-consumer-groups.sh``: list, describe, delete consumer groups and reset or delete their
offsets, with Apache Kafka 4.1's flags, messages and output (ConsumerGroupCommand).

Actions (exactly one): ``--list`` (``--state [s,..]``, ``--type [classic,consumer]``),
``--describe`` (``--group G``... or ``--all-groups``; ``--offsets`` (default), ``--members``,
``--state``; ``--verbose``), ``--reset-offsets`` (consumer_groups_reset.py), ``--delete``,
``--delete-offsets --group G --topic t[:p,..]`` and ``--validate-regex`` (checked with Python's
``re``, not RE2). Classic and KIP-848 groups alike: each group's coordinator is found with
FindCoordinator and asked (groups_admin.py).

As in Kafka, what the tool reports about a group (it does not exist, it has no active members,
it is not inactive so it cannot be reset, a deletion failed) is part of its output and the exit
code stays 0; a bad invocation is a usage error (Kafka's message, exit 1) and a request the
cluster refuses or does not answer within ``--timeout`` ms is a command error (exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from typing import TextIO

from broker.cli import consumer_groups_options as options
from broker.cli.admin import Session, code_name, optional_config, run_main, servers
from broker.cli.consumer_groups_describe import (
    consumer_group_ids,
    describe_groups,
    list_groups,
    print_error,
)
from broker.cli.consumer_groups_reset import (
    Resetter,
    export_csv,
    parse_topic_partitions,
    print_plan,
)
from broker.cli.groups_admin import NONE, GroupAdmin
from broker.cli.groups_model import TP, error_message, exception_text

TOOL = "kafka-consumer-groups.sh"
GROUP_LEVEL = {24, 69, 30, 68}  # INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, GROUP_AUTH, NON_EMPTY
PARTITION_LEVEL = {86, 29, 3}  # GROUP_SUBSCRIBED_TO_TOPIC, TOPIC_AUTH, UNKNOWN_TOPIC_OR_PARTITION


async def delete_groups(admin: GroupAdmin, args: argparse.Namespace, out: TextIO) -> None:
    groups = await consumer_group_ids(admin) if args.all_groups else list(args.group)
    results = await admin.delete_groups(list(dict.fromkeys(groups)))
    ok = [g for g, e in results.items() if e == NONE]
    failed = {g: e for g, e in results.items() if e != NONE}
    quoted = ", ".join(f"'{g}'" for g in ok)
    if not failed:
        print(f"Deletion of requested consumer groups ({quoted}) was successful.", file=out)
        return
    print_error(out, "Deletion of some consumer groups failed:")
    for g, e in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {exception_text(e)}", file=out)
    if ok:
        print(f"\nThese consumer groups were deleted successfully: {quoted}", file=out)


async def delete_offsets(admin: GroupAdmin, args: argparse.Namespace, out: TextIO) -> None:
    group = args.group[0]
    tps: set[TP] = set()
    results: dict[TP, str | None] = {}
    plain = [t for t in args.topic if ":" not in t]
    for t in args.topic:
        if ":" in t:
            tps.update(parse_topic_partitions(t))
    if plain:
        found = await admin.metadata(sorted(set(plain)))
        for t in plain:
            parts = found.get(t)
            if parts is None:
                results[(t, -1)] = exception_text(3)
            else:
                tps.update((t, p) for p in parts)
    top, parts_errors = await admin.delete_offsets(group, tps)
    if top == NONE:  # the admin fails the whole call with the first partition's error
        top = next((e for e in parts_errors.values() if e != NONE), NONE)
    for tp in tps:
        e = parts_errors.get(tp, NONE) if not _group_level(top, parts_errors) else top
        results[tp] = exception_text(e) if e != NONE else None
    if top == NONE:
        print(f"Request succeeded for deleting offsets from group {group}.", file=out)
    elif top in GROUP_LEVEL:
        print_error(out, error_message(top))
    elif top in PARTITION_LEVEL:
        print_error(out, "Encountered some partition-level error, see the follow-up details.")
    else:
        print_error(out, f"Encountered some unknown error: {code_name(top)}")
    width = max([15, *(len(t) for t, _ in results)])
    text = f"\n{'TOPIC':<{width}} {'PARTITION':<10} {'STATUS':<15}"
    for (t, p), failure in sorted(results.items(), key=lambda kv: kv[0][0] + str(kv[0][1])):
        status = f"Error: {failure}" if failure else "Successful"
        text += f"\n{t:<{width}} {(str(p) if p >= 0 else '-'):<10} {status:<15}"
    print(text, file=out)


def _group_level(top: int, parts: dict[TP, int]) -> bool:
    """A top-level error the broker sent (not one taken from a partition) fails every row."""
    return top != NONE and top not in parts.values()


def validate_regex(regex: str, out: TextIO) -> None:
    try:
        re.compile(regex)
        print(f"The regular expression `{regex}` is valid.", file=out)
    except re.error as e:
        print(f"The regular expression `{regex}` is invalid: {e}.", file=out)


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    addresses = servers(args.bootstrap_server)
    props = optional_config(args.command_config, "--command-config")
    props.setdefault("request.timeout.ms", str(args.timeout))
    session = await Session.open(addresses, props, "kafka-consumer-groups", "the cluster")
    admin = GroupAdmin(session, args.timeout)
    try:
        if args.list:
            await list_groups(admin, args, out)
        elif args.describe:
            await describe_groups(admin, args, out, err)
        elif args.delete:
            await delete_groups(admin, args, out)
        elif args.delete_offsets:
            await delete_offsets(admin, args, out)
        else:
            plan = await Resetter(admin, args, err).reset(out)
            if args.export:
                print(export_csv(plan, len(args.group) == 1), file=out)
            else:
                print_plan(plan, out)
    finally:
        admin.close()
    return 0


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        options.check(args, err)
        if args.validate_regex is not None:
            validate_regex(args.validate_regex, out)
            return 0
        return asyncio.run(_run(args, out, err))

    return run_main(
        argv, out, err, parser=options.parser(), help_text=options.HELP, tool=TOOL,
        what="consumer group", start=start,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
