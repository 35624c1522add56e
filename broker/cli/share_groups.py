"""``kafka-share-groups.sh``: list, describe and delete KIP-932 share groups, reset or delete
their start offsets, with Apache Kafka 4.1's flags, messages and tables (ShareGroupCommand).

Actions (exactly one): ``--list`` (``--state [s,..]``), ``--describe`` (``--group G``... or
``--all-groups``; ``--offsets`` (default), ``--members``, ``--state``; ``--verbose``),
``--delete --group G``... (only Empty share groups: the tool checks, as Kafka's does, before
it sends DeleteGroups), ``--reset-offsets`` and ``--delete-offsets`` (share_groups_offsets:
AlterShareGroupOffsets / DeleteShareGroupOffsets, only for a group without members).

The offsets table is Kafka 4.1's: GROUP, TOPIC, PARTITION, (LEADER-EPOCH,) START-OFFSET, the
share-partition start offsets of DescribeShareGroupOffsets v0 (``-``: no start offset yet). A
LAG column came with v1 of that RPC in Kafka 4.2, which nobody serves here.

As in Kafka, what the tool reports about a group (it does not exist, it has no active members,
a deletion failed) is part of its output and the exit code stays 0; a bad invocation is a usage
error (Kafka's message, exit 1) and a request the cluster refuses or does not answer within
``--timeout`` ms is a command error (exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Final, TextIO

from broker.cli import share_groups_offsets as share_offsets
from broker.cli import share_groups_options as options
from broker.cli.admin import Session, UsageError, optional_config, run_main, servers
from broker.cli.consumer_groups_describe import assignment_text, print_error
from broker.cli.groups_admin import NONE, GroupAdmin
from broker.cli.groups_model import Description, exception_text, group_state

TOOL: Final = "kafka-share-groups.sh"
MISSING: Final = "-"
SHARE: Final = ["Share"]  # ListGroups types filter (ListGroupsOptions.forShareGroups())
SHARE_STATES: Final = ("Empty", "Stable", "Dead")  # GroupState.groupStatesForType(SHARE)


def parse_states(text: str) -> list[str]:
    by_upper = {s.upper(): s for s in SHARE_STATES}
    parsed = [by_upper.get(s.strip().upper()) for s in text.split(",")]
    if any(s is None for s in parsed):
        raise UsageError(
            f"Invalid state list '{text}'. Valid states are: {', '.join(SHARE_STATES)}"
        )
    return [s for s in parsed if s]


def _pad(values: Sequence[object], widths: Sequence[int | None]) -> str:
    """Java's ``%-Ns`` for each value (None: ``%s``), joined by spaces."""
    return " ".join(
        str(v) if w is None else f"{v!s:<{w}}" for v, w in zip(values, widths, strict=True)
    )


def _opt(value: object | None) -> str:
    return MISSING if value is None else str(value)


def _table(
    header: Sequence[object], rows: Sequence[Sequence[object]], widths: list[int | None]
) -> str:
    """Kafka's printf rows, each starting with a newline; print() adds its closing println."""
    return "".join("\n" + _pad(r, widths) for r in (header, *rows))


# --- --list ----------------------------------------------------------------------------------


async def share_group_ids(admin: GroupAdmin) -> list[str]:
    return [g.group_id for g in await admin.list_groups([], SHARE)]


async def list_groups(admin: GroupAdmin, states: list[str] | None, out: TextIO) -> None:
    if states is None:
        for group_id in await share_group_ids(admin):
            print(group_id, file=out)
        return
    listings = await admin.list_groups(states, SHARE)
    width = max([15, *(len(g.group_id) for g in listings)])
    print(f"{'GROUP':<{width}} STATE", file=out)
    for g in listings:
        print(f"{g.group_id:<{width}} {group_state(g.state)}", file=out)


# --- --describe ------------------------------------------------------------------------------


def should_print(group: str, state: str, rows: int, out: TextIO, err: TextIO) -> bool:
    """Kafka's maybePrintEmptyGroupState: the state's note, and whether there is a table."""
    if state == "Dead":
        print_error(out, f"Share group '{group}' does not exist.")
    elif state == "Empty":
        print(f"\nShare group '{group}' has no active members.", file=err)
    return state != "Dead" and rows > 0


def print_members(group: str, d: Description, verbose: bool, out: TextIO, err: TextIO) -> None:
    members = sorted(d.members, key=lambda m: m.member_id)
    if not should_print(group, d.state, len(members), out, err):
        return
    widths: list[int | None] = [
        max(15, len(group)),
        max([15, *(len(m.member_id) for m in members)]),
        max([15, *(len(m.host) for m in members)]),
        max([15, *(len(m.client_id) for m in members)]),
        12,
    ]
    header: list[object] = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        widths.append(13)
        header.append("MEMBER-EPOCH")
    widths.append(None)
    header.append("ASSIGNMENT")
    rows = []
    for m in members:
        row: list[object] = [group, m.member_id, m.host, m.client_id, len(m.assignment)]
        if verbose:
            row.append(_opt(m.member_epoch))
        # Kafka joins an empty assignment to an empty string, not "-"
        row.append(assignment_text(m.assignment) if m.assignment else "")
        rows.append(row)
    print(_table(header, rows, widths), file=out)


def print_state(group: str, d: Description, verbose: bool, out: TextIO, err: TextIO) -> None:
    should_print(group, d.state, 1, out, err)  # the table follows even for a Dead group
    c = d.coordinator
    coordinator = f"{c.host}:{c.port}  ({c.node_id})"
    widths: list[int | None] = [max(15, len(group)), max(25, len(coordinator)), 15]
    header: list[object] = ["GROUP", "COORDINATOR (ID)", "STATE"]
    row: list[object] = [group, coordinator, d.state]
    if verbose:
        widths += [12, 17]
        header += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        row += [_opt(d.group_epoch), _opt(d.target_assignment_epoch)]
    widths.append(None)
    header.append("#MEMBERS")
    row.append(len(d.members))
    print(_table(header, [row], widths), file=out)


def print_offsets(
    group: str,
    offsets: dict[tuple[str, int], tuple[int, int | None] | None],
    verbose: bool,
    out: TextIO,
) -> None:
    """No state note here (Kafka 4.1 prints none with the offsets), a header even with no row."""
    tps = sorted(offsets)
    widths: list[int | None] = [max(15, len(group)), max([15, *(len(t) for t, _ in tps)]), 10]
    header: list[object] = ["GROUP", "TOPIC", "PARTITION"]
    if verbose:
        widths.append(13)
        header.append("LEADER-EPOCH")
    widths.append(None)
    header.append("START-OFFSET")
    rows = []
    for t, p in tps:
        found = offsets[(t, p)]
        start, epoch = found if found is not None else (None, None)
        row: list[object] = [group, t, p]
        if verbose:
            row.append(_opt(epoch))
        row.append(_opt(start))
        rows.append(row)
    print(_table(header, rows, widths), file=out)


async def describe_groups(
    admin: GroupAdmin, args: argparse.Namespace, out: TextIO, err: TextIO
) -> None:
    groups = await share_group_ids(admin) if args.all_groups else list(args.group)
    # every group is described first: one that cannot be fails the command, as in Kafka
    described = {g: await admin.describe_share(g) for g in dict.fromkeys(groups)}
    if args.members:
        for g in sorted(described):
            print_members(g, described[g], args.verbose, out, err)
    elif args.state is not None:
        for g in sorted(described):
            print_state(g, described[g], args.verbose, out, err)
    else:
        found = {g: await admin.share_offsets(g) for g in sorted(described)}
        for g, offsets in found.items():
            print_offsets(g, offsets, args.verbose, out)


# --- --delete --------------------------------------------------------------------------------


async def delete_groups(admin: GroupAdmin, args: argparse.Namespace, out: TextIO) -> None:
    """Kafka's checks first (a share group, Empty), then DeleteGroups for the rest."""
    listed = {g.group_id: g for g in await admin.list_groups([], SHARE)}
    failed: dict[str, str] = {}
    for g in dict.fromkeys(args.group):
        listing = listed.get(g)
        state = group_state(listing.state) if listing and listing.state else None
        if listing is None:
            failed[g] = f"java.lang.IllegalArgumentException: Group '{g}' is not a share group."
        elif state == "Dead":
            failed[g] = f"java.lang.IllegalStateException: Share group '{g}' group state is DEAD."
        elif state is not None and state != "Empty":
            failed[g] = (
                "org.apache.kafka.common.errors.GroupNotEmptyException: "
                f"Share group '{g}' is not EMPTY."
            )
    todo = [g for g in dict.fromkeys(args.group) if g not in failed]
    results = await admin.delete_groups(todo) if todo else {}
    ok = [g for g, e in results.items() if e == NONE]
    failed |= {g: exception_text(e) for g, e in results.items() if e != NONE}
    quoted = ", ".join(f"'{g}'" for g in ok)
    if not failed:
        print(f"Deletion of requested share groups ({quoted}) was successful.", file=out)
        return
    print_error(out, "Deletion of some share groups failed:")
    for g, why in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {why}", file=out)
    if ok:
        print(f"\nThese share groups were deleted successfully: {quoted}", file=out)


async def _run(args: argparse.Namespace, states: list[str] | None, out: TextIO, err: TextIO) -> int:
    addresses = servers(args.bootstrap_server)
    props = optional_config(args.command_config, "--command-config")
    props.setdefault("request.timeout.ms", str(args.timeout))
    session = await Session.open(addresses, props, "kafka-share-groups", "the cluster")
    admin = GroupAdmin(session, args.timeout, "kafka-share-groups")
    try:
        if args.list:
            await list_groups(admin, states, out)
        elif args.describe:
            await describe_groups(admin, args, out, err)
        elif args.delete:
            await delete_groups(admin, args, out)
        elif args.reset_offsets:
            return await share_offsets.reset_offsets(admin, args, out, err)
        else:
            await share_offsets.delete_offsets(admin, args, out)
    finally:
        admin.close()
    return 0


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        options.check(args)
        states = None
        if args.list and args.state is not None:
            states = parse_states(args.state) if args.state else []
        return asyncio.run(_run(args, states, out, err))

    return run_main(
        argv, out, err, parser=options.parser(), help_text=options.HELP, tool=TOOL,
        what="share group", start=start,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
