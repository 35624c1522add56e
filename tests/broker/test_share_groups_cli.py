"""kafka-share-groups.sh without a cluster: the tables of cases a test cluster does not easily
show (a partition without a start offset, long ids widening columns, a member without
partitions, several topics), the --state parsing and the option checks' order; the offset
actions against a fake admin (scope, plan, refusal, the TOPIC STATUS table's errors)."""

from __future__ import annotations

import argparse
import asyncio
import io
from typing import Any, cast

import pytest

from broker.cli import share_groups_options as options
from broker.cli.admin import UsageError
from broker.cli.groups_admin import GroupAdmin
from broker.cli.groups_model import Coordinator, Description, Member
from broker.cli.share_groups import (
    parse_states,
    print_members,
    print_offsets,
    print_state,
)
from broker.cli.share_groups_offsets import delete_offsets, reset_offsets

COORD = Coordinator(3, "broker-3", 9092)


def _capture() -> tuple[io.StringIO, io.StringIO]:
    return io.StringIO(), io.StringIO()


def test_offsets_missing_start_and_wide_topic() -> None:
    out, _ = _capture()
    topic = "a-rather-long-topic-name"
    print_offsets("g", {(topic, 1): None, (topic, 0): (42, 7), ("b", 0): (0, None)}, True, out)
    w = len(topic)
    assert out.getvalue() == (
        f"\n{'GROUP':<15} {'TOPIC':<{w}} {'PARTITION':<10} {'LEADER-EPOCH':<13} START-OFFSET"
        f"\n{'g':<15} {topic:<{w}} {'0':<10} {'7':<13} 42"
        f"\n{'g':<15} {topic:<{w}} {'1':<10} {'-':<13} -"
        f"\n{'g':<15} {'b':<{w}} {'0':<10} {'-':<13} 0\n"
    )


def test_members_sorted_widened_and_without_partitions() -> None:
    long_id = "m" * 30
    d = Description(
        "grp",
        "Share",
        "Stable",
        "simple",
        COORD,
        [
            Member(long_id, None, "c2", "/10.0.0.2", [("t", 1), ("u", 0), ("t", 0)], None, 4),
            Member("a-member", None, "c1", "/10.0.0.1", [], None, 5),
        ],
        9,
        9,
    )
    out, err = _capture()
    print_members("grp", d, False, out, err)
    assert err.getvalue() == ""
    assert out.getvalue() == (
        f"\n{'GROUP':<15} {'CONSUMER-ID':<30} {'HOST':<15} {'CLIENT-ID':<15} {'#PARTITIONS':<12} "
        "ASSIGNMENT"
        f"\n{'grp':<15} {'a-member':<30} {'/10.0.0.1':<15} {'c1':<15} {'0':<12} "
        f"\n{'grp':<15} {long_id:<30} {'/10.0.0.2':<15} {'c2':<15} {'3':<12} t:0,1;u:0\n"
    )


def test_state_of_a_dead_group() -> None:
    d = Description("gone", "Share", "Dead", "", COORD, [], -1, -1)
    out, err = _capture()
    print_state("gone", d, True, out, err)
    coordinator = "broker-3:9092  (3)"
    assert out.getvalue() == (
        "\nError: Share group 'gone' does not exist.\n"
        f"\n{'GROUP':<15} {'COORDINATOR (ID)':<25} {'STATE':<15} {'GROUP-EPOCH':<12} "
        f"{'ASSIGNMENT-EPOCH':<17} #MEMBERS"
        f"\n{'gone':<15} {coordinator:<25} {'Dead':<15} {'-1':<12} {'-1':<17} 0\n"
    )


def test_state_list_parsing() -> None:
    assert parse_states("stable, EMPTY,dead") == ["Stable", "Empty", "Dead"]
    with pytest.raises(UsageError, match="Valid states are: Empty, Stable, Dead"):
        parse_states("Stable,Assigning")  # a consumer group state, not a share group's


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--reset-offsets", "--group", "a", "--group", "b", "--to-latest", "--dry-run"],
         "Found multiple arguments for option group, but you asked for only one"),
        (["--describe", "--all-groups", "--topic", "t"],
         'Option "[topic]" can\'t be used with option "[describe]"'),
        (["--describe", "--group", "g", "--timeout", "99999999999999999999"],
         "Cannot parse argument '99999999999999999999' of option timeout"),
    ],
)  # fmt: skip
def test_checks(argv: list[str], message: str) -> None:
    args = options.parser().parse_args(["--bootstrap-server", "h:1", *argv])
    with pytest.raises(UsageError) as e:
        options.check(args)
    assert str(e.value) == message


def test_delete_offsets_takes_its_topic_and_timeout_defaults() -> None:
    argv = ["--bootstrap-server", "h:1", "--delete-offsets", "--group", "g", "--topic", "t"]
    args = options.parser().parse_args(argv)
    options.check(args)  # Kafka 4.1 refuses --topic here; later Kafka and this tool do not
    assert args.timeout == 30000


class FakeAdmin:
    """What the offset actions ask of GroupAdmin, answered from fixed data; records writes."""

    def __init__(self, state: str = "Empty", delete: Any = ((0, None), {})) -> None:
        self.state, self.delete = state, delete
        self.altered: list[dict[tuple[str, int], int]] = []

    async def describe_share(self, group: str) -> Description:
        return Description(group, "Share", self.state, "", COORD, [])

    async def metadata(self, topics: Any) -> dict[str, dict[int, int] | None]:
        return {"t": {0: 1, 1: 1}}

    async def share_offsets(self, group: str) -> dict[tuple[str, int], Any]:
        return {("t", 1): (4, 0)}

    async def log_offsets(self, tps: Any, timestamp: int) -> dict[tuple[str, int], int]:
        return {tp: 100 + tp[1] if timestamp == -1 else -1 for tp in tps}

    async def alter_share_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.altered.append(dict(offsets))

    async def delete_share_offsets(self, group: str, topics: list[str]) -> Any:
        return self.delete


def _args(*argv: str) -> argparse.Namespace:
    args = options.parser().parse_args(["--bootstrap-server", "h:1", *argv])
    options.check(args)
    return args


def _reset(admin: FakeAdmin, *argv: str) -> tuple[int, str, str]:
    out, err = _capture()
    args = _args("--reset-offsets", "--group", "g", *argv)
    rc = asyncio.run(reset_offsets(cast(GroupAdmin, admin), args, out, err))
    return rc, out.getvalue(), err.getvalue()


def test_reset_plan_scope_and_execute() -> None:
    admin = FakeAdmin()
    header = "\nGROUP           TOPIC           PARTITION  NEW-OFFSET"
    # without --topic: the partitions the coordinator reports for the group
    assert _reset(admin, "--to-latest", "--dry-run") == (
        0, header + "\ng               t               1          101\n", ""
    )  # fmt: skip
    assert admin.altered == []
    rc, out, _ = _reset(admin, "--topic", "t", "--to-latest", "--execute")
    assert rc == 0 and out == header + (
        "\ng               t               0          100"
        "\ng               t               1          101\n"
    )
    assert admin.altered == [{("t", 0): 100, ("t", 1): 101}]
    # no record at or after the time: Kafka's warning, then the end offset
    rc, out, _ = _reset(admin, "--topic", "t:0", "--to-datetime", "2030-01-01T00:00:00.000",
                        "--dry-run")  # fmt: skip
    assert out == (
        "\nWarn: Partition 0 from topic t is empty. Falling back to latest known offset.\n"
        + header
        + "\ng               t               0          100\n"
    )


def test_reset_refused_with_members() -> None:
    admin = FakeAdmin(state="Stable")
    assert _reset(admin, "--topic", "t", "--to-earliest", "--execute") == (
        1, "", "Share group 'g' is not empty.\n"
    )  # fmt: skip
    assert admin.altered == []


def test_delete_offsets_tables() -> None:
    def run(delete: Any, *topics: str) -> str:
        out, _ = _capture()
        argv = ["--delete-offsets", "--group", "g", *(a for t in topics for a in ("--topic", t))]
        asyncio.run(delete_offsets(cast(GroupAdmin, FakeAdmin(delete=delete)), _args(*argv), out))
        return out.getvalue()

    wide = "a-topic-with-a-long-name"
    assert run(((0, None), {"b": (0, None), wide: (3, None)}), wide, "b") == (
        f"\n{'TOPIC':<24} STATUS"
        f"\n{wide:<24} Error: This server does not host this topic-partition."
        f"\n{'b':<24} Successful\n"
    )
    # an error Kafka's tool does not name: its exception, then on every topic
    assert run(((-1, None), {}), "b") == (
        "\nError: Encounter some unknown error: org.apache.kafka.common.errors."
        "UnknownServerException: The server experienced an unexpected error when processing "
        "the request.\n"
        "\nTOPIC           STATUS"
        "\nb               Error: The server experienced an unexpected error when processing the "
        "request.\n"
    )
