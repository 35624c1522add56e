"""``kafka-consumer-groups.sh``'s flags, help and the checks Kafka's ConsumerGroupCommandOptions
makes, with its messages: joptsimple's (an option used without the action it needs, a missing
or unparsable argument, an unknown option) and the tool's own (one action, a group scope, one
reset scenario, no ``--execute`` with ``--dry-run``...). Options print as Kafka's do, ``[name]``.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Final, NoReturn, TextIO

from broker.cli.admin import UsageError

NL = "\n"
ACTIONS: Final = ("list", "describe", "delete", "reset_offsets", "delete_offsets", "validate_regex")
SCENARIOS: Final = (
    "to_offset",
    "shift_by",
    "to_datetime",
    "by_duration",
    "to_earliest",
    "to_latest",
    "to_current",
    "from_file",
)
DEFAULT_TIMEOUT_MS: Final = 5000

# (flag, argument: (type, description) or None, optional argument, doc), as Kafka declares them
Option = tuple[str, tuple[str, str] | None, bool, str]
OPTIONS: Final[list[Option]] = [
    ("all-groups", None, False, "Apply to all consumer groups."),
    (
        "all-topics",
        None,
        False,
        "Consider all topics assigned to a group in the `reset-offsets` process.",
    ),
    ("bootstrap-server", ("String", "server to connect to"), False,
     "REQUIRED: The server(s) to connect to."),
    ("by-duration", ("String", "duration"), False,
     "Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'"),
    ("command-config", ("String", "command config property file"), False,
     "Property file containing configs to be passed to Admin Client and Consumer."),
    ("delete", None, False,
     "Pass in groups to delete topic partition offsets and ownership information over the "
     "entire consumer group. For instance --group g1 --group g2"),
    ("delete-offsets", None, False,
     "Delete offsets of consumer group. Supports one consumer group at the time, and multiple "
     "topics."),
    ("describe", None, False,
     "Describe consumer group and list offset lag (number of messages not yet processed) "
     "related to given group."),
    ("dry-run", None, False,
     "Only show results without executing changes on Consumer Groups. Supported operations: "
     "reset-offsets."),
    ("execute", None, False, "Execute operation. Supported operations: reset-offsets."),
    ("export", None, False,
     "Export operation execution to a CSV file. Supported operations: reset-offsets."),
    ("from-file", ("String", "path to CSV file"), False,
     "Reset offsets to values defined in CSV file."),
    ("group", ("String", "consumer group"), False, "The consumer group we wish to act on."),
    ("help", None, False, "Print usage information."),
    ("list", None, False, "List all consumer groups."),
    ("members", None, False,
     "Describe members of the group. This option may be used with '--describe' and "
     "'--bootstrap-server' options only." + NL +
     "Example: --bootstrap-server localhost:9092 --describe --group group1 --members"),
    ("offsets", None, False,
     "Describe the group and list all topic partitions in the group along with their offset "
     "lag. This is the default sub-action of and may be used with '--describe' and "
     "'--bootstrap-server' options only." + NL +
     "Example: --bootstrap-server localhost:9092 --describe --group group1 --offsets"),
    ("reset-offsets", None, False,
     "Reset offsets of consumer group. Supports one consumer group at the time, and instances "
     "should be inactive" + NL +
     "Has 2 execution options: --dry-run (the default) to plan which offsets to reset, and "
     "--execute to update the offsets. Additionally, the --export option is used to export "
     "the results to a CSV format." + NL +
     "You must choose one of the following reset specifications: --to-datetime, "
     "--by-duration, --to-earliest, --to-latest, --shift-by, --from-file, --to-current, "
     "--to-offset." + NL +
     "To define the scope use --all-topics or --topic. One scope must be specified unless you "
     "use '--from-file'."),
    ("shift-by", ("Long", "number-of-offsets"), False,
     "Reset offsets shifting current offset by 'n', where 'n' can be positive or negative."),
    ("state", ("String", ""), True,
     "When specified with '--describe', includes the state of the group." + NL +
     "Example: --bootstrap-server localhost:9092 --describe --group group1 --state" + NL +
     "When specified with '--list', it displays the state of all groups. It can also be used "
     "to list groups with specific states." + NL +
     "Example: --bootstrap-server localhost:9092 --list --state stable,empty" + NL +
     "This option may be used with '--describe', '--list' and '--bootstrap-server' options "
     "only."),
    ("timeout", ("Long", "timeout (ms)"), False,
     "The timeout that can be set for some use cases. For example, it can be used when "
     "describing the group to specify the maximum amount of time in milliseconds to wait "
     "before the group stabilizes (when the group is just created, or is going through some "
     "changes). (default: 5000)"),
    ("to-current", None, False, "Reset offsets to current offset."),
    ("to-datetime", ("String", "datetime"), False,
     "Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'"),
    ("to-earliest", None, False, "Reset offsets to earliest offset."),
    ("to-latest", None, False, "Reset offsets to latest offset."),
    ("to-offset", ("Long", "offset"), False, "Reset offsets to a specific offset."),
    ("topic", ("String", "topic"), False,
     "The topic whose consumer group information should be deleted or topic whose should be "
     "included in the reset offset process. In `reset-offsets` case, partitions can be "
     "specified using this format: `topic1:0,1,2`, where 0,1,2 are the partition to be "
     "included in the process. Reset-offsets also supports multiple topic inputs."),
    ("type", ("String", ""), True,
     "When specified with '--list', it displays the types of all the groups. It can also be "
     "used to list groups with specific types." + NL +
     "Example: --bootstrap-server localhost:9092 --list --type classic,consumer" + NL +
     "This option may be used with the '--list' option only."),
    ("validate-regex", ("String", "regex"), False,
     "Validate that the syntax of the provided regular expression is valid according to the "
     "RE2 format."),
    ("verbose", None, False,
     "Provide additional information, if any, when describing the group. This option may be "
     "used with '--offsets'/'--members'/'--state' and '--bootstrap-server' options only." + NL +
     "Example: --bootstrap-server localhost:9092 --describe --group group1 --members --verbose"),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip

LONG_OPTIONS: Final = frozenset(f for f, arg, _, _ in OPTIONS if arg and arg[0] == "Long")


INTRO: Final = (
    "This tool helps to list all consumer groups, describe a consumer group, delete "
    "consumer group info, or reset consumer group offsets."
)


def render_help(intro: str, options: list[Option]) -> str:
    """The help as joptsimple lays it out: options in a 40-column left column."""
    lines = [intro, f"{'Option':<40}Description", f"{'------':<40}-----------"]
    for flag, arg, optional, doc in options:
        left = f"--{flag}"
        if arg:
            kind, what = arg
            inner = f"{kind}: {what}" if what else kind
            left += f" [{inner}]" if optional else f" <{inner}>"
        lefts = textwrap.wrap(left, 38, subsequent_indent="  ", break_on_hyphens=False)
        rights: list[str] = []
        for i, para in enumerate(doc.split(NL)):
            wrapped = textwrap.wrap(para, 38, break_on_hyphens=False) or [""]
            rights += [("" if i == 0 and j == 0 else "  ") + w for j, w in enumerate(wrapped)]
        for i in range(max(len(lefts), len(rights))):
            left_part = lefts[i] if i < len(lefts) else ""
            right_part = rights[i] if i < len(rights) else ""
            lines.append(f"{left_part:<40}{right_part}".rstrip())
    return NL.join(lines) + NL


HELP: Final = render_help(INTRO, OPTIONS)


class _Parser(argparse.ArgumentParser):
    """argparse with joptsimple's messages for a missing argument or an unknown option."""

    def error(self, message: str) -> NoReturn:
        m = re.match(r"argument --([\w-]+).*: expected one argument", message)
        if m:
            raise UsageError(f"Option [{m.group(1)}] requires an argument")
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m:
            raise UsageError(f"{m.group(1).lstrip('-')} is not a recognized option")
        raise UsageError(message)


def build_parser(prog: str, options: list[Option], repeated: set[str]) -> argparse.ArgumentParser:
    """argparse for joptsimple-style options: flags, ``repeated`` ones collect every value, an
    optional argument makes the flag present with or without a value."""
    p = _Parser(prog=prog, add_help=False, allow_abbrev=False)
    for flag, arg, optional, _ in options:
        dest = flag.replace("-", "_")
        if arg is None:
            p.add_argument(f"--{flag}", dest=dest, action="store_true")
        elif optional:  # --state / --type: present with or without a value
            p.add_argument(f"--{flag}", dest=dest, nargs="?", const="", default=None)
        elif flag in repeated:
            p.add_argument(f"--{flag}", dest=dest, action="append", default=[])
        else:
            p.add_argument(f"--{flag}", dest=dest)
    return p


def parser() -> argparse.ArgumentParser:
    return build_parser(
        "kafka-consumer-groups",
        OPTIONS,
        {"group", "topic", "from-file", "to-datetime", "to-offset"},
    )


def opt(name: str) -> str:
    return f"[{name.replace('_', '-')}]"


def invalid(used: str, other: str) -> UsageError:
    return UsageError(f'Option "{opt(used)}" can\'t be used with option "{opt(other)}"')


def has(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name)
    return value not in (None, False, [])


def parse_long(args: argparse.Namespace, name: str) -> None:
    """joptsimple's conversion of a Long option's values (the last one counts)."""
    value = getattr(args, name)
    values = value if isinstance(value, list) else [value]
    out: list[int | None] = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        try:
            n = int(v)
        except ValueError:
            n = None
        if n is None or not -(2**63) <= n < 2**63:
            raise UsageError(f"Cannot parse argument '{v}' of option {name.replace('_', '-')}")
        out.append(n)
    setattr(args, name, out if isinstance(value, list) else out[0])


def check(args: argparse.Namespace, err: TextIO) -> None:
    """Kafka's checkArgs and the one-action check of its main, in their order (the warning for a
    reset without --execute comes before the checks after it, as in Kafka)."""
    for name in LONG_OPTIONS:
        parse_long(args, name.replace("-", "_"))
    if args.timeout is None:
        args.timeout = DEFAULT_TIMEOUT_MS
    # joptsimple's availableIf: an option used without the action it needs
    for name, needs in (
        ("members", ("describe",)),
        ("verbose", ("describe",)),
        ("offsets", ("describe",)),
        ("state", ("describe", "list")),
        ("type", ("list",)),
    ):
        if has(args, name) and not any(has(args, n) for n in needs):
            raise UsageError(
                f"Option(s) {opt(name)} are unavailable given other options on the command line"
            )
    if not args.bootstrap_server:
        raise UsageError(f'Missing required argument "{opt("bootstrap-server")}"')
    scope = f"{opt('all-groups')}, {opt('group')}"
    if args.describe:
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {opt('describe')} takes one of these options: {scope}")
        if sum(has(args, n) for n in ("members", "offsets", "state")) > 1:
            raise UsageError(
                f"Option {opt('describe')} takes at most one of these options: "
                f"{opt('members')}, {opt('offsets')}, {opt('state')}"
            )
        if args.state:
            raise UsageError(f"Option {opt('describe')} does not take a value for {opt('state')}")
    if args.delete:
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {opt('delete')} takes one of these options: {scope}")
        if args.topic:
            raise UsageError(
                "The consumer does not support topic-specific offset deletion from a consumer "
                "group."
            )
    if args.delete_offsets and (not args.group or not args.topic):
        raise UsageError(
            f"Option {opt('delete-offsets')} takes the following options: "
            f"{opt('group')}, {opt('topic')}"
        )
    if args.delete_offsets and len(args.group) > 1:  # joptsimple's valueOf of a repeated option
        raise UsageError("Found multiple arguments for option group, but you asked for only one")
    if args.reset_offsets:
        if args.dry_run and args.execute:
            raise UsageError(
                f"Option {opt('reset-offsets')} only accepts one of {opt('execute')} and "
                f"{opt('dry-run')}"
            )
        warning = reset_warning(args)
        if warning:
            print(warning, file=err)
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {opt('reset-offsets')} takes one of these options: {scope}")
        used = [s for s in SCENARIOS if has(args, s)]
        if len(used) > 1:
            raise invalid(used[0], used[1])
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
        )


def reset_warning(args: argparse.Namespace) -> str | None:
    """The warning Kafka prints for a reset without --dry-run or --execute (stderr)."""
    if args.reset_offsets and not args.dry_run and not args.execute:
        return (
            "WARN: No action will be performed as the --execute option is missing.In a future "
            "major release, the default behavior of this command will be to prompt the user "
            "before executing the reset rather than doing a dry run. You should add the "
            "--dry-run option explicitly if you are scripting this command and want to keep "
            "the current default behavior without prompting."
        )
    return None
