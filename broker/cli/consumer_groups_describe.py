"""``kafka-consumer-groups.sh --list`` and ``--describe`` (``--offsets``, ``--members``,
``--state``, each with ``--verbose``): what is asked of the cluster and Kafka's tables, column
for column (widths grow with the longest value, ``-`` for a missing value, each row starting
with a newline as Kafka's printf formats do), and its per-group notes: "has no active members"
and "is rebalancing" on stderr, "does not exist" as an ``Error:`` line on stdout.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from broker.cli.admin import UsageError
from broker.cli.groups_admin import LATEST, GroupAdmin
from broker.cli.groups_model import TP, Description, Listing, Member, group_state

MISSING: Final = "-"
# Kafka's GroupState names; a consumer group can be in these (GroupState.groupStatesForType)
CONSUMER_STATES: Final = (
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
)
GROUP_TYPES: Final = ("Consumer", "Classic")
ALL_TYPES: Final = {t.lower(): t for t in (*GROUP_TYPES, "Share", "Streams")}
REBALANCING: Final = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
CONSUMER_PROTOCOLS: Final = ("", "consumer")


def print_error(out: TextIO, message: str) -> None:
    """Kafka's printError: a blank line then ``Error: ...`` on stdout."""
    print(f"\nError: {message}", file=out)


def _pad(values: Sequence[object], widths: Sequence[int | None]) -> str:
    """Java's ``%-Ns`` for each value (None: ``%s``), joined by spaces."""
    return " ".join(
        str(v) if w is None else f"{v!s:<{w}}" for v, w in zip(values, widths, strict=True)
    )


# --- --list ----------------------------------------------------------------------------------


def parse_states(text: str) -> list[str]:
    by_upper = {s.upper(): s for s in CONSUMER_STATES}
    parsed = [by_upper.get(s.strip().upper()) for s in text.split(",")]
    if any(s is None for s in parsed):
        raise UsageError(
            f"Invalid state list '{text}'. Valid states are: {', '.join(CONSUMER_STATES)}"
        )
    return [s for s in parsed if s]


def parse_types(text: str) -> list[str]:
    by_lower = {t.lower(): t for t in GROUP_TYPES}
    parsed = [by_lower.get(t.strip().lower()) for t in text.lower().split(",")]
    if any(t is None for t in parsed):
        raise UsageError(f"Invalid types list '{text}'. Valid types are: {', '.join(GROUP_TYPES)}")
    return [t for t in parsed if t]


async def consumer_group_ids(admin: GroupAdmin) -> list[str]:
    """The consumer groups (classic with the consumer protocol, or KIP-848), as Kafka's
    ``ListGroupsOptions.forConsumerGroups()`` selects them."""
    listings = await admin.list_groups([], GROUP_TYPES)
    return [g.group_id for g in listings if g.protocol_type in CONSUMER_PROTOCOLS]


async def list_groups(admin: GroupAdmin, args: argparse.Namespace, out: TextIO) -> None:
    with_type, with_state = args.type is not None, args.state is not None
    if not (with_type or with_state):
        for g in await consumer_group_ids(admin):
            print(g, file=out)
        return
    states = parse_states(args.state) if args.state else []
    # --type given: its types replace the consumer-group default (none: every type)
    types = parse_types(args.type) if args.type else ([] if with_type else list(GROUP_TYPES))
    listings = [
        g for g in await admin.list_groups(states, types) if g.protocol_type in CONSUMER_PROTOCOLS
    ]
    print_listings(listings, with_type, with_state, out)


def print_listings(
    listings: Sequence[Listing], with_type: bool, with_state: bool, out: TextIO
) -> None:
    width = max((max(15, len(g.group_id)) for g in listings), default=15) + 10
    header: list[str] = ["GROUP"]
    widths: list[int | None] = [width]
    if with_type:
        header.append("TYPE")
        widths.append(20)
    if with_state:
        header.append("STATE")
        widths.append(20)
    print(_pad(header, widths), file=out)
    for g in listings:
        row = [g.group_id]
        if with_type:
            row.append(ALL_TYPES.get(g.type.lower(), "Unknown"))
        if with_state:
            row.append(group_state(g.state))
        print(_pad(row, widths), file=out)


# --- --describe ------------------------------------------------------------------------------


def should_print(group: str, d: Description, rows: int, out: TextIO, err: TextIO) -> bool:
    """Kafka's shouldPrintMemberState: the state's note, and whether there is a table."""
    if d.state == "Dead":
        print_error(out, f"Consumer group '{group}' does not exist.")
    elif d.state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=err)
    elif d.state in REBALANCING:
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=err)
    return d.state != "Dead" and rows > 0


@dataclass(slots=True)
class OffsetRow:
    topic: str
    partition: int
    leader_epoch: int | None
    offset: int | None
    log_end: int | None
    consumer_id: str
    host: str
    client_id: str

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.offset == -1 or self.log_end is None:
            return None
        return self.log_end - self.offset


def _opt(value: object | None) -> str:
    return MISSING if value is None else str(value)


async def offset_rows(admin: GroupAdmin, d: Description) -> list[OffsetRow]:
    """Members with partitions first (most partitions first), each's partitions by topic and
    partition; then the committed partitions no member owns, with ``-`` for the member."""
    committed = await admin.committed(d.group_id)
    owners: list[tuple[Member | None, list[TP]]] = [
        (m, sorted(m.assignment))
        for m in sorted(
            (m for m in d.members if m.assignment), key=lambda m: len(m.assignment), reverse=True
        )
    ]
    assigned = {tp for _, tps in owners for tp in tps}
    unowned = sorted(tp for tp in committed if tp not in assigned)
    if unowned:
        owners.append((None, unowned))
    all_tps = [tp for _, tps in owners for tp in tps]
    log_ends = await admin.log_offsets(all_tps, LATEST) if all_tps else {}
    rows = []
    for m, tps in owners:
        for tp in tps:
            offset, epoch = committed.get(tp, (None, None))
            rows.append(
                OffsetRow(
                    tp[0],
                    tp[1],
                    epoch,
                    offset,
                    log_ends.get(tp),
                    m.member_id if m else MISSING,
                    m.host if m else MISSING,
                    m.client_id if m else MISSING,
                )
            )
    return rows


def print_offsets(
    group: str, d: Description, rows: Sequence[OffsetRow], verbose: bool, out: TextIO, err: TextIO
) -> None:
    if not should_print(group, d, len(rows), out, err):
        return
    gw = max([15, len(group)])
    tw = max([15, *(len(r.topic) for r in rows)])
    cw = max([15, *(len(r.consumer_id) for r in rows)])
    hw = max([15, *(len(r.host) for r in rows)])
    if verbose:
        widths: list[int | None] = [gw, tw, 10, 15, 15, 15, 15, cw, hw, None]
        header = ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET"]
    else:
        widths = [gw, tw, 10, 15, 15, 15, cw, hw, None]
        header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET"]
    header += ["LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    text = "\n" + _pad(header, widths)
    for r in rows:
        values: list[object] = [group, r.topic, r.partition]
        if verbose:
            values.append(_opt(r.leader_epoch))
        values += [_opt(r.offset), _opt(r.log_end), _opt(r.lag), r.consumer_id, r.host]
        values.append(r.client_id)
        text += "\n" + _pad(values, widths)
    print(text, file=out)


def assignment_text(tps: Iterable[TP]) -> str:
    """``t1:0,1;t2:3``: topics in order, each one's partitions in numeric order."""
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    if not by_topic:
        return MISSING
    parts = [f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items()]
    return ";".join(sorted(parts))


def print_members(group: str, d: Description, verbose: bool, out: TextIO, err: TextIO) -> None:
    """The header is printed even when there is no member (as Kafka does)."""
    ms = d.members
    gw, cw, iw, hw, clw, caw, taw = 15, 15, 17, 15, 15, 20, 20
    with_instance = False
    has_classic = has_consumer = False
    if should_print(group, d, len(ms), out, err):
        for m in ms:
            gw = max(gw, len(group))
            cw = max(cw, len(m.member_id))
            iw = max(iw, len(m.instance_id or ""))
            hw = max(hw, len(m.host))
            clw = max(clw, len(m.client_id))
            with_instance = with_instance or bool(m.instance_id)
            caw = max(caw, len(assignment_text(m.assignment)))
            taw = max(taw, len(assignment_text(m.target or [])))
            has_classic = has_classic or m.upgraded is False
            has_consumer = has_consumer or m.upgraded is True
    migrating = has_classic and has_consumer
    if with_instance:
        widths = [gw, cw, iw, hw, clw, 15]
        header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    else:
        widths = [gw, cw, hw, clw, 15]
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    vwidths: list[int | None] = [15, caw, 15, taw, None] if migrating else [15, caw, 15, None]
    line = "\n" + _pad(header, widths) + " "
    if verbose:
        vheader = ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        if migrating:
            vheader.append("UPGRADED")
            line += _pad(vheader, vwidths)
        else:
            line += _pad(vheader, [15, caw, 15, taw])
    print(line, file=out)
    for m in ms:
        cells: list[object] = [group, m.member_id]
        if with_instance:
            cells.append(m.instance_id or "")
        cells += [m.host, m.client_id, len(m.assignment)]
        line = _pad(cells, widths) + " "
        if verbose:
            vcells: list[object] = [
                _opt(m.member_epoch),
                assignment_text(m.assignment),
                _opt(d.target_assignment_epoch),
                assignment_text(m.target or []),
            ]
            if migrating:
                vcells.append(_opt(None if m.upgraded is None else str(m.upgraded).lower()))
                line += _pad(vcells, vwidths)
            else:
                line += _pad(vcells, [15, caw, 15, taw])
        print(line, file=out)


def print_state(group: str, d: Description, verbose: bool, out: TextIO, err: TextIO) -> None:
    if not should_print(group, d, 1, out, err):
        return
    c = d.coordinator
    coordinator = f"{c.host}:{c.port}  ({c.node_id})"
    cw, gw = max(25, len(coordinator)), max(15, len(group))
    strategy = d.assignor or MISSING
    if verbose:
        widths: list[int | None] = [gw, cw, 20, 20, 15, 25, None]
        header: list[object] = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
        header += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        row: list[object] = [group, coordinator, strategy, d.state, _opt(d.group_epoch)]
        row += [_opt(d.target_assignment_epoch), len(d.members)]
    else:
        widths = [gw, cw, 20, 20, None]
        header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        row = [group, coordinator, strategy, d.state, len(d.members)]
    print("\n" + _pad(header, widths) + "\n" + _pad(row, widths), file=out)


async def describe_groups(
    admin: GroupAdmin, args: argparse.Namespace, out: TextIO, err: TextIO
) -> None:
    groups = await consumer_group_ids(admin) if args.all_groups else list(args.group)
    # every group is described first: one that cannot be fails the command, as in Kafka
    described = {g: await admin.describe(g) for g in dict.fromkeys(groups)}
    for g in sorted(described):
        d = described[g]
        if args.members:
            print_members(g, d, args.verbose, out, err)
        elif args.state is not None:
            print_state(g, d, args.verbose, out, err)
        else:
            print_offsets(g, d, await offset_rows(admin, d), args.verbose, out, err)
