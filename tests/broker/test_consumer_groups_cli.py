"""kafka-consumer-groups.sh without a cluster: Kafka's date and duration formats, the reset plan
CSV, a classic member's assignment bytes, and the tables of the cases a test cluster does not
easily show (static members, a group migrating between protocols, rebalancing, Dead)."""

from __future__ import annotations

import asyncio
import io
import struct
from datetime import UTC, datetime
from typing import cast

import pytest

from broker.cli.admin import CommandError, Session, UsageError
from broker.cli.consumer_groups_describe import (
    assignment_text,
    print_members,
    print_offsets,
    print_state,
)
from broker.cli.consumer_groups_reset import (
    export_csv,
    parse_datetime,
    parse_duration,
    parse_plan_csv,
    parse_topic_partitions,
    print_plan,
)
from broker.cli.groups_admin import GroupAdmin
from broker.cli.groups_model import (
    Coordinator,
    Description,
    GroupError,
    Member,
    decode_assignment,
)

COORD = Coordinator(1, "broker-1", 9092)


def _ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


def test_datetimes_as_kafka_reads_them() -> None:
    assert parse_datetime("2026-01-02T03:04:05.678") == _ms(2026, 1, 2, 3, 4, 5) + 678
    assert parse_datetime("2026-01-02T03:04:05.678Z") == _ms(2026, 1, 2, 3, 4, 5) + 678
    assert parse_datetime("2026-01-02T05:04:05.000+02:00") == _ms(2026, 1, 2, 3, 4, 5)
    assert parse_datetime("2026-01-02T01:34:05.000-0130") == _ms(2026, 1, 2, 3, 4, 5)
    with pytest.raises(CommandError, match="Unparseable date"):
        parse_datetime("2026-01-02T03:04:05")  # milliseconds are required
    with pytest.raises(CommandError, match="does not contain a 'T'"):
        parse_datetime("2026-01-02")


def test_durations_as_java_parses_them() -> None:
    assert parse_duration("PT1H").total_seconds() == 3600
    assert parse_duration("P1DT2H3M4S").total_seconds() == 86400 + 7200 + 180 + 4
    assert parse_duration("pt0.5s").total_seconds() == 0.5
    assert parse_duration("-PT10M").total_seconds() == -600
    for bad in ("1H", "P", "PT", "PT1X"):
        with pytest.raises(CommandError, match="Text cannot be parsed to a Duration"):
            parse_duration(bad)


def test_reset_plan_csv_with_and_without_the_group_column() -> None:
    assert parse_plan_csv("t,0,5\nt,1,7\n", ["g"]) == {"g": {("t", 0): 5, ("t", 1): 7}}
    plan = parse_plan_csv("g1,t,0,5\ng2,t,0,9\n", ["g1", "g2"])
    assert plan == {"g1": {("t", 0): 5}, "g2": {("t", 0): 9}}
    with pytest.raises(CommandError):
        parse_plan_csv("t,0,5\n", ["g1", "g2"])  # several groups need the group column
    assert export_csv(plan, single_group=False) == "g1,t,0,5\ng2,t,0,9\n"
    assert export_csv({"g": {("t", 1): 2, ("t", 0): 1}}, single_group=True) == "t,0,1\nt,1,2\n"


def test_topic_partition_arguments() -> None:
    assert parse_topic_partitions("t:0,2") == [("t", 0), ("t", 2)]
    with pytest.raises(UsageError, match="Invalid topic arg 't:0:1', expected topic name"):
        parse_topic_partitions("t:0:1")


def test_a_classic_members_assignment_bytes() -> None:
    data = struct.pack(">hi", 3, 2)
    for topic, parts in (("orders", [2, 0]), ("b", [7])):
        data += struct.pack(">h", len(topic)) + topic.encode()
        data += struct.pack(f">i{len(parts)}i", len(parts), *parts)
    data += struct.pack(">i", -1)  # no user data
    assert decode_assignment(data) == [("orders", 2), ("orders", 0), ("b", 7)]
    assert decode_assignment(b"") == []
    assert assignment_text(decode_assignment(data)) == "b:7;orders:0,2"


def _run(fn: object, *args: object) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    fn(*args, out, err)  # type: ignore[operator]
    return out.getvalue(), err.getvalue()


def test_members_with_instance_ids_and_a_migrating_group() -> None:
    d = Description(
        "g",
        "Consumer",
        "Reconciling",
        "uniform",
        COORD,
        [
            Member("m1", "static-1", "c1", "/10.0.0.1", [("t", 0)], [("t", 0), ("t", 1)], 3, True),
            Member("m2", None, "c2", "/10.0.0.2", [("t", 1)], [], 2, False),
        ],
        group_epoch=4,
        target_assignment_epoch=4,
    )
    out, err = _run(print_members, "g", d, True)
    assert err == "\nWarning: Consumer group 'g' is rebalancing.\n"
    w = "{:<15} {:<15} {:<17} {:<15} {:<15} {:<15} {:<15} {:<20} {:<15} {:<20} {}"
    assert out.split("\n") == [
        "",
        w.format(
            "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
            "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED",
        ),
        w.format("g", "m1", "static-1", "/10.0.0.1", "c1", 1, 3, "t:0", 4, "t:0,1", "true"),
        w.format("g", "m2", "", "/10.0.0.2", "c2", 1, 2, "t:1", 4, "-", "false"),
        "",
    ]  # fmt: skip


def test_state_of_a_dead_group_and_of_a_rebalancing_one() -> None:
    dead = Description("gone", "Classic", "Dead", "", COORD)
    out, err = _run(print_state, "gone", dead, False)
    assert (out, err) == ("\nError: Consumer group 'gone' does not exist.\n", "")
    busy = Description("g", "Classic", "PreparingRebalance", "", COORD)
    out, err = _run(print_state, "g", busy, False)
    assert err == "\nWarning: Consumer group 'g' is rebalancing.\n"
    assert out.split("\n")[2] == f"{'g':<15} {'broker-1:9092  (1)':<25} {'-':<20} {'PreparingRebalance':<20} 0"  # fmt: skip
    out, _ = _run(print_offsets, "g", busy, [], False)
    assert out == ""  # no partitions: no table


def test_reset_plan_table_widths_follow_the_longest_names() -> None:
    out = io.StringIO()
    print_plan({"a-rather-long-group-name": {("t", 0): 5}}, out)
    assert out.getvalue() == (
        "\nGROUP                    TOPIC           PARTITION  NEW-OFFSET"
        "\na-rather-long-group-name t               0          5\n"
    )
    out = io.StringIO()
    print_plan({}, out)
    assert out.getvalue() == "\n"


def test_coordinator_errors_are_retried_until_the_timeout() -> None:
    admin = GroupAdmin(cast(Session, None), timeout_ms=1000)
    calls: list[int] = []

    async def loading_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise GroupError(14)  # COORDINATOR_LOAD_IN_PROGRESS
        return "done"

    async def not_found() -> str:
        raise GroupError(69)

    async def never_loaded() -> str:
        raise GroupError(16)  # NOT_COORDINATOR, forever

    assert asyncio.run(admin._retrying("describe", loading_twice)) == "done"
    assert len(calls) == 3
    with pytest.raises(GroupError, match="GroupIdNotFoundException"):
        asyncio.run(admin._retrying("describe", not_found))
    admin.timeout_ms = 300
    with pytest.raises(CommandError, match="TimeoutException: Timed out waiting for describe"):
        asyncio.run(admin._retrying("describe", never_loaded))
