"""kafka-share-groups.sh without a cluster: the tables of cases a test cluster does not easily
show (a partition without a start offset, long ids widening columns, a member without
partitions, several topics), the --state parsing and the option checks' order."""

from __future__ import annotations

import io

import pytest

from broker.cli import share_groups_options as options
from broker.cli.admin import UsageError
from broker.cli.groups_model import Coordinator, Description, Member
from broker.cli.share_groups import (
    parse_states,
    print_members,
    print_offsets,
    print_state,
)

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
