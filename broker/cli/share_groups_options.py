"""``kafka-share-groups.sh``'s flags, help and the checks Kafka 4.1's ShareGroupCommandOptions
makes, with its messages (joptsimple's for an option without the action it needs, a missing or
unparsable argument, an unknown option; the tool's own for one action, a group scope, reset
scenarios...). The parser, help layout and message helpers are kafka-consumer-groups.sh's.

One deliberate difference: Kafka 4.1 also refuses ``--topic`` with ``--delete-offsets`` (its
own required option), which makes that action unusable; later Kafka fixed it, and so do we.
"""

from __future__ import annotations

import argparse
from typing import Final

from broker.cli.admin import UsageError
from broker.cli.consumer_groups_options import (
    NL,
    Option,
    build_parser,
    has,
    invalid,
    opt,
    parse_long,
    render_help,
)

ACTIONS: Final = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
SCENARIOS: Final = ("to_datetime", "to_earliest", "to_latest")
DEFAULT_TIMEOUT_MS: Final = 30000
INTRO: Final = "This tool helps to list, describe, reset and delete share groups."

# (flag, argument: (type, description) or None, optional argument, doc), as Kafka 4.1 has them
OPTIONS: Final[list[Option]] = [
    ("all-groups", None, False, "Apply to all share groups."),
    ("all-topics", None, False,
     "Consider all topics assigned to a share group in the 'reset-offsets' process."),
    ("bootstrap-server", ("String", "server to connect to"), False,
     "REQUIRED: The server(s) to connect to."),
    ("command-config", ("String", "command config property file"), False,
     "Property file containing configs to be passed to Admin Client."),
    ("delete", None, False, "Delete share group."),
    ("delete-offsets", None, False,
     "Delete offsets of share group. Supports one share group at the time, and multiple "
     "topics."),
    ("describe", None, False, "Describe share group, members and offset information."),
    ("dry-run", None, False,
     "Only show results without executing changes on share groups. Supported operations: "
     "reset-offsets."),
    ("execute", None, False, "Execute operation. Supported operations: reset-offsets."),
    ("group", ("String", "share group"), False, "The share group we wish to act on."),
    ("help", None, False, "Print usage information."),
    ("list", None, False, "List all share groups."),
    ("members", None, False,
     "Describe members of the group. This option may be used with the '--describe' option "
     "only."),
    ("offsets", None, False,
     "Describe the group and list all topic partitions in the group along with their offset "
     "information. This is the default sub-action and may be used with the '--describe' "
     "option only."),
    ("reset-offsets", None, False,
     "Reset offsets of share group. Supports one share group at the time, and instances must "
     "be inactive." + NL +
     "Has 2 execution options: --dry-run (the default) to plan which offsets to reset, and "
     "--execute to reset the offsets. " + NL +
     "You must choose one of the following reset specifications: --to-datetime, "
     "--to-earliest, --to-latest." + NL +
     "To define the scope use --all-topics or --topic."),
    ("state", ("String", ""), True,
     "When specified with '--describe', includes the state of the group." + NL +
     "When specified with '--list', it displays the state of all groups. It can also be used "
     "to list groups with specific states. Valid values are Empty, Stable and Dead."),
    ("timeout", ("Long", "timeout (ms)"), False,
     "The timeout that can be set for some use cases. For example, it can be used when "
     "describing the group to specify the maximum amount of time in milliseconds to wait "
     "before the group stabilizes. (default: 30000)"),
    ("to-datetime", ("String", "datetime"), False,
     "Reset offsets to offset from datetime. Format: 'YYYY-MM-DDThh:mm:ss.sss'"),
    ("to-earliest", None, False, "Reset offsets to earliest offset."),
    ("to-latest", None, False, "Reset offsets to latest offset."),
    ("topic", ("String", "topic"), False,
     "The topic whose offset information should be deleted or included in the reset offset "
     "process. When resetting offsets, partitions can be specified using this format: "
     "'topic1:0,1,2', where 0,1,2 are the partitions to be included."),
    ("verbose", None, False,
     "Provide additional information, if any, when describing the group. This option may be "
     "used with the '--describe' option only."),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip

HELP: Final = render_help(INTRO, OPTIONS)


def parser() -> argparse.ArgumentParser:
    return build_parser("kafka-share-groups", OPTIONS, {"group", "topic", "to-datetime"})


def check(args: argparse.Namespace) -> None:
    """Kafka's checkArgs and the one-action check of its main, in their order."""
    parse_long(args, "timeout")
    if args.timeout is None:
        args.timeout = DEFAULT_TIMEOUT_MS
    # joptsimple's availableIf: an option used without the action it needs
    for name, needs in (
        ("members", ("describe",)),
        ("offsets", ("describe",)),
        ("state", ("describe", "list")),
        ("verbose", ("describe",)),
    ):
        if has(args, name) and not any(has(args, n) for n in needs):
            raise UsageError(
                f"Option(s) {opt(name)} are unavailable given other options on the command line"
            )
    if not args.bootstrap_server:
        raise UsageError(f'Missing required argument "{opt("bootstrap-server")}"')
    if args.describe:
        if not args.group and not args.all_groups:
            raise UsageError(
                f"Option {opt('describe')} takes one of these options: "
                f"{opt('all-groups')}, {opt('group')}"
            )
        if sum(has(args, n) for n in ("members", "offsets", "state")) > 1:
            raise UsageError(
                f"Option {opt('describe')} takes at most one of these options: "
                f"{opt('members')}, {opt('offsets')}, {opt('state')}"
            )
        if args.state:
            raise UsageError(f"Option {opt('describe')} does not take a value for {opt('state')}")
    if args.delete:
        if not args.group:
            raise UsageError(f"Option {opt('delete')} takes the option: {opt('group')}")
        if args.topic:
            raise UsageError(f"Option {opt('delete')} does not take the option: {opt('topic')}")
    if args.delete_offsets and (not args.group or not args.topic):
        raise UsageError(
            f"Option {opt('delete-offsets')} takes the following options: "
            f"{opt('group')}, {opt('topic')}"
        )
    if args.reset_offsets:
        reset = opt("reset-offsets")
        if args.dry_run and args.execute:
            raise UsageError(
                f"Option {reset} only accepts one of {opt('execute')} and {opt('dry-run')}"
            )
        if not args.dry_run and not args.execute:
            raise UsageError(
                f"Option {reset} takes the option: {opt('execute')} or {opt('dry-run')}"
            )
        if not args.group:
            raise UsageError(f"Option {reset} takes the option: {opt('group')}")
        used = [s for s in SCENARIOS if has(args, s)]
        if len(used) > 1:
            raise invalid(used[0], used[1])
    if (args.reset_offsets or args.delete_offsets) and len(args.group) > 1:
        # joptsimple's valueOf of a repeated option
        raise UsageError("Found multiple arguments for option group, but you asked for only one")
    if args.group and args.all_groups:
        raise invalid("group", "all-groups")
    if args.group and args.list:
        raise invalid("group", "list")
    if args.topic and (args.list or args.describe):
        raise invalid("topic", "list" if args.list else "describe")
    if sum(has(args, a) for a in ACTIONS) != 1:
        raise UsageError(
            "Command must include exactly one action: "
            + ", ".join(f"--{a.replace('_', '-')}" for a in ACTIONS)
            + "."
        )
