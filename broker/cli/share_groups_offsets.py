"""``kafka-share-groups.sh --reset-offsets`` and ``--delete-offsets``, as Kafka 4.1's
ShareGroupCommand: share-partition start offsets set (AlterShareGroupOffsets) or dropped
(DeleteShareGroupOffsets) on the group's coordinator, only while the group has no members.

Reset: the partitions in scope (``--topic t`` or ``t:0,1``; without ``--topic``, those the
coordinator reports for the group), each one's new start offset by ListOffsets (``--to-earliest``,
``--to-latest``, ``--to-datetime``) with kafka-consumer-groups.sh's helpers, then the plan
(GROUP TOPIC PARTITION NEW-OFFSET), sent first with ``--execute``. A group with members is
refused ("Share group 'g' is not empty." on stderr, exit 1) before anything is asked; a group
that does not exist is reset (the alter creates it, as in Kafka).

Delete: a TOPIC STATUS table, after the group-level error (not a share group, not empty...) if
any, which then is every topic's status too, as Kafka's admin reports it.
"""

from __future__ import annotations

import argparse
from typing import Final, TextIO

from broker.cli.admin import UsageError
from broker.cli.consumer_groups_describe import print_error
from broker.cli.consumer_groups_reset import Resetter, parse_datetime, print_plan
from broker.cli.groups_admin import EARLIEST, LATEST, NONE, GroupAdmin
from broker.cli.groups_model import TP, error_message, exception_text

NOT_EMPTY: Final = "Share group '{}' is not empty."
# top-level errors Kafka's tool prints as they come; the topics' own are in the table only
REPORTED: Final = frozenset({24, 69, 30, 68})  # INVALID_GROUP_ID .. NON_EMPTY_GROUP
TOPIC_LEVEL: Final = frozenset({29, 3})  # TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION


class ShareResetter(Resetter):
    """The consumer tool's resetter with a share group's scope and scenarios."""

    async def share_scope(self, group: str) -> list[TP]:
        if self.args.topic:
            return await self._topic_partitions(self.args.topic)
        return sorted(await self.admin.share_offsets(group))

    async def share_plan(self, group: str, out: TextIO) -> dict[TP, int]:
        a = self.args
        tps = await self.share_scope(group)
        await self._check_partitions(tps)
        if a.to_earliest:
            return await self._log(tps, EARLIEST, "starting")
        if a.to_latest:
            return await self._log(tps, LATEST, "ending")
        if a.to_datetime:
            return await self._by_time(tps, parse_datetime(a.to_datetime[0]), out)
        raise UsageError(
            "Option '[reset-offsets]' requires one of the following scenarios: "
            "[to-datetime], [to-earliest], [to-latest]"
        )


async def reset_offsets(
    admin: GroupAdmin, args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    """The plan, applied with --execute; 1 (and nothing done) while the group has members."""
    group = args.group[0]
    state = (await admin.describe_share(group)).state  # an unknown group: Dead
    if state not in ("Empty", "Dead"):
        print(NOT_EMPTY.format(group), file=err)
        return 1
    offsets = await ShareResetter(admin, args, err).share_plan(group, out)
    if args.execute and offsets:
        await admin.alter_share_offsets(group, offsets)
    print_plan({group: offsets}, out)
    return 0


async def delete_offsets(admin: GroupAdmin, args: argparse.Namespace, out: TextIO) -> None:
    group = args.group[0]
    topics = sorted(set(args.topic))
    (top, top_message), per_topic = await admin.delete_share_offsets(group, topics)
    if top != NONE:
        if top in REPORTED:
            print_error(out, error_message(top, top_message))
        elif top not in TOPIC_LEVEL:
            print_error(out, f"Encounter some unknown error: {exception_text(top, top_message)}")
        # a failed group fails every topic's result with the same error
        status = {t: (top, top_message) for t in topics}
    else:
        status = {t: per_topic.get(t, (NONE, None)) for t in topics}
    width = max([15, *(len(t) for t in topics)])
    text = f"\n{'TOPIC':<{width}} STATUS"
    for t in topics:
        error, message = status[t]
        result = "Successful" if error == NONE else f"Error: {error_message(error, message)}"
        text += f"\n{t:<{width}} {result}"
    print(text, file=out)
