"""``kafka-consumer-groups.sh --reset-offsets``: the partitions in scope (``--all-topics``: those
the group committed; ``--topic t`` or ``t:0,1``; or the CSV of ``--from-file``), the new offset
of each by the scenario, clamped to the log's start and end with Kafka's warnings, then shown
(``--dry-run``, the default), committed (``--execute``) and/or written as CSV (``--export``).

Only a group without members (Empty, or unknown: Dead) is reset; for any other state Kafka's
"Assignments can only be reset if the group ... is inactive" line is printed and nothing is done.
"""

from __future__ import annotations

import argparse
import datetime
import re
from collections.abc import Mapping, Sequence
from typing import Final, TextIO

from broker.cli.admin import CommandError, UsageError
from broker.cli.consumer_groups_describe import consumer_group_ids, print_error
from broker.cli.groups_admin import EARLIEST, GROUP_ID_NOT_FOUND, LATEST, GroupAdmin
from broker.cli.groups_model import TP, GroupError

Plan = dict[str, dict[TP, int]]
RESETTER: Final = "org.apache.kafka.tools.GroupOffsetsResetter"
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def tp_text(tp: TP) -> str:
    """Kafka's TopicPartition.toString."""
    return f"{tp[0]}-{tp[1]}"


def warn(err: TextIO, message: str) -> None:
    """A WARN line as Kafka's tools log it (log4j's layout, on stderr)."""
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    print(f"[{now}] WARN {message} ({RESETTER})", file=err)


def parse_topic_partitions(arg: str) -> list[TP]:
    """``topic:0,1,2`` -> its partitions, with Kafka's messages for a bad argument."""
    parts = [p for p in arg.split(":")]
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    if len(parts) != 2:
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    topic, partitions = parts
    out = []
    for p in partitions.split(","):
        try:
            out.append((topic, int(p)))
        except ValueError:
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{arg}''") from None
    return out


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (Z,
    +hh:mm, +hhmm, +hh), UTC without one; epoch milliseconds."""
    if "T" not in text or len(text.split("T")) < 2:
        raise CommandError(
            "java.text.ParseException: Error parsing timestamp. It does not contain a 'T' "
            "according to ISO8601 format"
        )
    second = text.split("T")[1]
    if not any(c in second for c in "+-Z"):
        text += "Z"
    m = re.fullmatch(
        r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)", text
    )
    try:
        if not m:
            raise ValueError
        y, mo, d, h, mi, s, ms = (int(g) for g in m.groups()[:7])
        zone = m.group(8)
        if zone == "Z":
            tz = datetime.UTC
        else:
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
            tz = datetime.timezone(sign * offset)
        when = datetime.datetime(y, mo, d, h, mi, s, ms * 1000, tzinfo=tz)
    except ValueError:
        raise CommandError(f'java.text.ParseException: Unparseable date: "{text}"') from None
    return int(when.timestamp() * 1000)


def parse_duration(text: str) -> datetime.timedelta:
    """Java's Duration.parse (``PnDTnHnMn.nS``)."""
    m = _DURATION.fullmatch(text)
    if (
        not m
        or (m.group(3) is not None and m.group(3).upper() == "T")
        or not any(m.group(i) for i in (2, 4, 5, 6))
    ):
        raise CommandError(
            "java.time.format.DateTimeParseException: Text cannot be parsed to a Duration"
        )
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes, secs = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    frac = m.group(7) or ""
    micros = int((frac + "000000000")[:6]) * (-1 if (m.group(6) or "").startswith("-") else 1)
    return sign * datetime.timedelta(
        days=days, hours=hours, minutes=minutes, seconds=secs, microseconds=micros
    )


def parse_plan_csv(text: str, groups: Sequence[str]) -> Plan:
    """A ``--from-file`` CSV: ``topic,partition,offset`` rows when one group is named and the
    first row has that shape, else ``group,topic,partition,offset`` rows."""
    lines = text.split("\n")
    while lines and lines[-1] == "":
        lines.pop()

    def row(line: str, n: int) -> list[str]:
        cells = line.split(",")
        if len(cells) != n:
            raise CommandError(f"cannot parse the reset plan line '{line}'")
        try:
            int(cells[-2]), int(cells[-1])
        except ValueError:
            raise CommandError(f"cannot parse the reset plan line '{line}'") from None
        return cells

    old_format = False
    if lines:
        try:
            row(lines[0], 3)
            old_format = True
        except CommandError:
            pass
    plan: Plan = {}
    if len(groups) == 1 and old_format:
        for line in lines:
            t, p, o = row(line, 3)
            plan.setdefault(groups[0], {})[(t, int(p))] = int(o)
    else:
        for line in lines:
            g, t, p, o = row(line, 4)
            plan.setdefault(g, {})[(t, int(p))] = int(o)
    return plan


class Resetter:
    def __init__(self, admin: GroupAdmin, args: argparse.Namespace, err: TextIO) -> None:
        self.admin, self.args, self.err = admin, args, err

    async def _check_partitions(self, tps: Sequence[TP]) -> None:
        """Kafka's checkAllTopicPartitionsValid: every partition exists and has a leader."""
        if not tps:
            return
        leaders = await self.admin.metadata(sorted({t for t, _ in tps}))
        missing = [tp for tp in tps if tp[1] not in (leaders.get(tp[0]) or {})]
        if missing:
            raise CommandError(
                "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: The partitions "
                f'"{",".join(map(tp_text, missing))}" do not exist'
            )
        leaderless = [tp for tp in tps if (leaders.get(tp[0]) or {}).get(tp[1], -1) < 0]
        if leaderless:
            raise CommandError(
                "org.apache.kafka.common.errors.LeaderNotAvailableException: The partitions "
                f'"{",".join(map(tp_text, leaderless))}" have no leader'
            )

    async def _topic_partitions(self, topics: Sequence[str]) -> list[TP]:
        """Kafka's parseTopicPartitionsToReset: ``t:0,1`` as given, ``t`` as all its
        partitions."""
        with_parts = [t for t in topics if ":" in t]
        plain = [t for t in topics if ":" not in t]
        tps = [tp for t in with_parts for tp in parse_topic_partitions(t)]
        if plain:
            found = await self.admin.metadata(plain)
            for t in plain:
                parts = found.get(t)
                if parts is None:
                    raise CommandError(
                        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                        "This server does not host this topic-partition."
                    )
                tps += [(t, p) for p in sorted(parts)]
        return tps

    async def _scope(self, group: str) -> list[TP]:
        if self.args.all_topics:
            return sorted(await self.admin.committed(group))
        if self.args.topic:
            return await self._topic_partitions(self.args.topic)
        if not self.args.from_file:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        return []

    async def _log(self, tps: Sequence[TP], timestamp: int, what: str) -> dict[TP, int]:
        found = await self.admin.log_offsets(tps, timestamp)
        out = {}
        for tp in tps:
            off = found.get(tp)
            if off is None:
                raise UsageError(f"Error getting {what} offset of topic partition: {tp_text(tp)}")
            out[tp] = off
        return out

    async def _clamp(self, wanted: Mapping[TP, int]) -> dict[TP, int]:
        """Kafka's checkOffsetsRange: past the end -> the end, before the start -> the start."""
        tps = list(wanted)
        starts = await self.admin.log_offsets(tps, EARLIEST)
        ends = await self.admin.log_offsets(tps, LATEST)
        out = {}
        for tp, off in wanted.items():
            end, start = ends.get(tp), starts.get(tp)
            if end is not None and off > end:
                warn(
                    self.err,
                    f"New offset ({off}) is higher than latest offset for topic partition "
                    f"{tp_text(tp)}. Value will be set to {end}.",
                )
                out[tp] = end
            elif start is not None and off < start:
                warn(
                    self.err,
                    f"New offset ({off}) is lower than earliest offset for topic partition "
                    f"{tp_text(tp)}. Value will be set to {start}.",
                )
                out[tp] = start
            else:
                out[tp] = off
        return out

    async def _by_time(self, tps: Sequence[TP], timestamp: int, out: TextIO) -> dict[TP, int]:
        found = await self.admin.log_offsets(tps, timestamp)
        result, empty = {}, []
        for tp in tps:
            off = found.get(tp)
            if off is None:
                raise UsageError(
                    f"Error getting offset by timestamp of topic partition: {tp_text(tp)}"
                )
            if off == -1:
                empty.append(tp)
            else:
                result[tp] = off
        for t, p in empty:
            print(
                f"\nWarn: Partition {p} from topic {t} is empty. Falling back to latest known "
                "offset.",
                file=out,
            )
        result.update(await self._log(empty, LATEST, "offset by timestamp of") if empty else {})
        return result

    async def plan(self, group: str, out: TextIO) -> dict[TP, int]:
        """The new offsets of an inactive group (Kafka's prepareOffsetsToReset)."""
        a = self.args
        tps = await self._scope(group)
        await self._check_partitions(tps)
        if a.to_offset:
            return await self._clamp({tp: a.to_offset[0] for tp in tps})
        if a.to_earliest:
            return await self._log(tps, EARLIEST, "starting")
        if a.to_latest:
            return await self._log(tps, LATEST, "ending")
        if a.shift_by is not None:
            current = await self.admin.committed(group)
            wanted = {}
            for tp in tps:
                if tp not in current:
                    raise UsageError(
                        f"Cannot shift offset for partition {tp_text(tp)} since there is no "
                        "current committed offset"
                    )
                wanted[tp] = current[tp][0] + a.shift_by
            return await self._clamp(wanted)
        if a.to_datetime:
            return await self._by_time(tps, parse_datetime(a.to_datetime[0]), out)
        if a.by_duration is not None:
            since = datetime.datetime.now(datetime.UTC) - parse_duration(a.by_duration)
            return await self._by_time(tps, int(since.timestamp() * 1000), out)
        if a.from_file:
            try:
                with open(a.from_file[0], encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise CommandError(f"java.nio.file.NoSuchFileException: {e.filename}") from None
            plan = parse_plan_csv(text, list(a.group))
            if group not in plan:
                print_error(out, f"No reset plan for group {group} found.")
                return {}
            return await self._clamp(plan[group])
        if a.to_current:
            current = await self.admin.committed(group)
            result = {tp: current[tp][0] for tp in tps if tp in current}
            rest = [tp for tp in tps if tp not in current]
            result.update(await self._log(rest, LATEST, "ending") if rest else {})
            return result
        raise UsageError(
            "Option '[reset-offsets]' requires one of the following scenarios: "
            "[to-offset], [shift-by], [to-datetime], [by-duration], [to-earliest], "
            "[to-latest], [to-current], [from-file]"
        )

    async def reset(self, out: TextIO) -> Plan:
        a = self.args
        groups = await consumer_group_ids(self.admin) if a.all_groups else list(a.group)
        result: Plan = {}
        for g in dict.fromkeys(groups):
            try:
                state = (await self.admin.describe(g)).state
            except GroupError as e:
                if e.error != GROUP_ID_NOT_FOUND:
                    raise
                state = "Dead"
            if state not in ("Empty", "Dead"):
                print_error(
                    out,
                    f"Assignments can only be reset if the group '{g}' is inactive, but the "
                    f"current state is {state}.",
                )
                result[g] = {}
                continue
            offsets = await self.plan(g, out)
            if a.execute and offsets:
                await self.admin.commit(g, offsets)
            result[g] = offsets
        return result


def print_plan(plan: Plan, out: TextIO) -> None:
    """Kafka's printOffsetsToReset (the header only when some group was planned)."""
    gw = max([15, *(len(g) for g in plan)])
    tw = max([15, *(len(t) for offsets in plan.values() for t, _ in offsets)])
    text = ""
    if plan:
        text += f"\n{'GROUP':<{gw}} {'TOPIC':<{tw}} {'PARTITION':<10} NEW-OFFSET"
    for g in plan:
        for (t, p), off in sorted(plan[g].items()):
            text += f"\n{g:<{gw}} {t:<{tw}} {p!s:<10} {off}"
    print(text, file=out)


def export_csv(plan: Plan, single_group: bool) -> str:
    rows = []
    for g in plan:
        for (t, p), off in sorted(plan[g].items()):
            rows.append(f"{t},{p},{off}\n" if single_group else f"{g},{t},{p},{off}\n")
    return "".join(rows)
