"""bin/kafka-share-groups.sh as a real process against one real node, on share groups made by
confluent-kafka's ShareConsumer: one member that accepted part of each partition and stays
(Stable), one that accepted one partition, released the other and left (Empty), one to delete.
Tables are checked to the character (Kafka 4.1's widths, ``-`` for missing values, the notes
on stdout and stderr); bad invocations get Kafka's messages and exit 1 without a traceback.
--reset-offsets and --delete-offsets run on groups and topics of their own: a ShareConsumer
proves where the group starts after an --execute, a dry run or a delete.
"""

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    AcknowledgeType,
    Consumer,
    KafkaError,
    Producer,
    ShareConsumer,
    TopicPartition,
)

from broker.coordinator.share import state_records

from .clients import create_topic
from .node import ROOT, Node

TOOL = str(ROOT / "bin" / "kafka-share-groups.sh")
TOPIC, PARTS, PER_PARTITION = "queue", 2, 10
ACTIVE, EMPTY, DOOMED = "sg-active", "sg-empty", "sg-doomed"
CLASSIC = "cg-classic"  # a classic group with committed offsets: no share group
SHARE_NODE = {
    "group__share__enable": "true",
    "group__share__heartbeat__interval__ms": "300",
    "share__auto__offset__reset": "earliest",
    "share__coordinator__state__topic__num__partitions": "1",
    "share__coordinator__state__topic__replication__factor": "1",
}


class Tool:
    def __init__(self, node: Node, active: ShareConsumer) -> None:
        self.node, self.active = node, active

    def run(self, *args: str, bootstrap: bool = True) -> subprocess.CompletedProcess[str]:
        head = ["--bootstrap-server", self.node.bootstrap] if bootstrap else []
        p = subprocess.run(
            [TOOL, *head, *args], input="", capture_output=True, text=True, timeout=60
        )
        assert "Traceback" not in p.stderr, p.stderr
        return p

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        p = self.run(*args)
        assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
        return p


def _consume(c: ShareConsumer, n: int) -> dict[tuple[int, int], Any]:
    """Poll until ``n`` records arrived: (partition, offset) -> message."""
    got: dict[tuple[int, int], Any] = {}
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        for m in c.poll(0.2):
            if m is not None and m.error() is None:
                got[(m.partition(), m.offset())] = m
    assert len(got) >= n, f"{len(got)} of {n} records"
    return got


def _member(node: Node, group: str, client_id: str) -> ShareConsumer:
    c = ShareConsumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": group,
            "client.id": client_id,
            "share.acknowledgement.mode": "explicit",
        }
    )
    c.subscribe([TOPIC])
    return c


def _settle(c: ShareConsumer, accept: dict[int, int]) -> None:
    """Take every record, ACCEPT the first ``accept[p]`` of partition p, RELEASE the rest."""
    for (p, o), m in sorted(_consume(c, PARTS * PER_PARTITION).items()):
        c.acknowledge(m, AcknowledgeType.ACCEPT if o < accept[p] else AcknowledgeType.RELEASE)
    c.commit_sync(15)


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tool]:
    node = Node(Path(tmp_path_factory.mktemp("sg")) / "node1", **SHARE_NODE)
    node.start()
    members: list[ShareConsumer] = []
    try:
        create_topic(node.bootstrap, TOPIC, PARTS)
        p = Producer({"bootstrap.servers": node.bootstrap})
        for i in range(PARTS * PER_PARTITION):
            p.produce(TOPIC, value=b"v%d" % i, partition=i % PARTS)
        assert p.flush(20) == 0
        active = _member(node, ACTIVE, "share-1")
        members.append(active)
        _settle(active, {0: 6, 1: 3})  # stays a member: the group is Stable
        for group, accept in ((EMPTY, {0: 10, 1: 0}), (DOOMED, {0: 1, 1: 1})):
            c = _member(node, group, "share-2")
            _settle(c, accept)
            c.close()
        classic = Consumer({"bootstrap.servers": node.bootstrap, "group.id": CLASSIC})
        classic.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
        classic.close()
        yield Tool(node, active)
    finally:
        for c in members:
            c.close()
        node.kill()


def test_list_and_state_filter(tool: Tool) -> None:
    assert sorted(tool.ok("--list").stdout.splitlines()) == sorted([ACTIVE, EMPTY, DOOMED])
    out = tool.ok("--list", "--state", "stable").stdout
    assert out == "GROUP           STATE\nsg-active       Stable\n"
    out = tool.ok("--list", "--state").stdout
    assert out.splitlines()[0] == "GROUP           STATE"
    assert sorted(out.splitlines()[1:]) == [
        "sg-active       Stable",
        "sg-doomed       Empty",
        "sg-empty        Empty",
    ]
    p = tool.run("--list", "--state", "Stable,bogus")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.splitlines()[0] == (
        "Error: Invalid state list 'Stable,bogus'. Valid states are: Empty, Stable, Dead"
    )


def test_describe_offsets(tool: Tool) -> None:
    """START-OFFSET: the first record not yet accepted; LEADER-EPOCH with --verbose."""
    expected = (
        "\nGROUP           TOPIC           PARTITION  START-OFFSET"
        "\nsg-active       queue           0          6"
        "\nsg-active       queue           1          3"
        "\n"
    )
    assert tool.ok("--describe", "--group", ACTIVE).stdout == expected
    assert tool.ok("--describe", "--group", ACTIVE, "--offsets").stdout == expected
    assert tool.ok("--describe", "--group", ACTIVE, "--verbose").stdout == (
        "\nGROUP           TOPIC           PARTITION  LEADER-EPOCH  START-OFFSET"
        "\nsg-active       queue           0          0             6"
        "\nsg-active       queue           1          0             3"
        "\n"
    )
    # an Empty group: its members are gone, but the coordinator remembers the partitions it
    # has share state for (record 15, as Kafka 4.1): DescribeShareGroupOffsets for all topics
    p = tool.ok("--describe", "--group", EMPTY, "--verbose")
    assert p.stdout == (
        "\nGROUP           TOPIC           PARTITION  LEADER-EPOCH  START-OFFSET"
        "\nsg-empty        queue           0          0             10"
        "\nsg-empty        queue           1          0             0"
        "\n"
    )
    assert p.stderr == ""  # Kafka 4.1 prints no state note with the offsets
    # no such share group: the offsets cannot be listed, a command error (exit 1, one line)
    p = tool.run("--describe", "--group", "nope")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == (
        "Error while executing share group command: org.apache.kafka.common.errors."
        "GroupIdNotFoundException: Group nope is not a share group.\n"
    )
    everything = tool.ok("--describe", "--all-groups").stdout
    assert expected in everything
    assert "\nsg-empty        queue           0          10\n" in everything
    assert "\nsg-doomed       queue           1          1\n" in everything
    # --reset-offsets without --topic: the partitions the Empty group has state for
    p = tool.ok("--reset-offsets", "--group", EMPTY, "--to-earliest", "--dry-run")
    assert p.stdout == (
        "\nGROUP           TOPIC           PARTITION  NEW-OFFSET"
        "\nsg-empty        queue           0          0"
        "\nsg-empty        queue           1          0"
        "\n"
    )


def test_describe_members(tool: Tool) -> None:
    out = tool.ok("--describe", "--group", ACTIVE, "--members").stdout
    _, row = out.strip("\n").split("\n")
    member_id, host = row.split()[1:3]
    w = max(15, len(member_id))
    assert out == (
        f"\n{'GROUP':<15} {'CONSUMER-ID':<{w}} {'HOST':<15} {'CLIENT-ID':<15} {'#PARTITIONS':<12} "
        "ASSIGNMENT"
        f"\n{ACTIVE:<15} {member_id:<{w}} {host:<15} {'share-1':<15} {2:<12} queue:0,1\n"
    )
    out = tool.ok("--describe", "--group", ACTIVE, "--members", "--verbose").stdout
    lines = out.strip("\n").split("\n")
    assert lines[0].split() == [
        "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT"
    ]  # fmt: skip
    cells = lines[1].split()
    assert cells[:5] == [ACTIVE, member_id, host, "share-1", "2"] and cells[6] == "queue:0,1"
    assert int(cells[5]) >= 1
    p = tool.ok("--describe", "--group", EMPTY, "--members")
    assert p.stdout == ""
    assert p.stderr == f"\nShare group '{EMPTY}' has no active members.\n"
    for group in ("nope", CLASSIC):
        p = tool.ok("--describe", "--group", group, "--members")
        assert p.stdout == f"\nError: Share group '{group}' does not exist.\n"


def test_describe_state(tool: Tool) -> None:
    coordinator = f"127.0.0.1:{tool.node.port}  (1)"
    cw = max(25, len(coordinator))
    out = tool.ok("--describe", "--group", ACTIVE, "--state").stdout
    assert out == (
        f"\n{'GROUP':<15} {'COORDINATOR (ID)':<{cw}} {'STATE':<15} #MEMBERS"
        f"\n{ACTIVE:<15} {coordinator:<{cw}} {'Stable':<15} 1\n"
    )
    p = tool.ok("--describe", "--group", EMPTY, "--state", "--verbose")
    lines = p.stdout.strip("\n").split("\n")
    assert lines[0] == (
        f"{'GROUP':<15} {'COORDINATOR (ID)':<{cw}} {'STATE':<15} {'GROUP-EPOCH':<12} "
        f"{'ASSIGNMENT-EPOCH':<17} #MEMBERS"
    )
    cells = lines[1].split()
    assert cells[0] == EMPTY and cells[3] == "Empty" and cells[-1] == "0"
    assert int(cells[4]) >= 1 and int(cells[5]) >= 1
    assert p.stderr == f"\nShare group '{EMPTY}' has no active members.\n"
    p = tool.ok("--describe", "--group", "nope", "--state")
    assert p.stdout == (
        "\nError: Share group 'nope' does not exist.\n"
        f"\n{'GROUP':<15} {'COORDINATOR (ID)':<{cw}} {'STATE':<15} #MEMBERS"
        f"\n{'nope':<15} {coordinator:<{cw}} {'Dead':<15} 0\n"
    )


def test_delete(tool: Tool) -> None:
    p = tool.ok("--delete", "--group", ACTIVE, "--group", "nope", "--group", CLASSIC)
    assert p.stdout == (
        "\nError: Deletion of some share groups failed:\n"
        f"* Group '{ACTIVE}' could not be deleted due to: "
        f"org.apache.kafka.common.errors.GroupNotEmptyException: Share group '{ACTIVE}' is not "
        "EMPTY.\n"
        "* Group 'nope' could not be deleted due to: java.lang.IllegalArgumentException: Group "
        "'nope' is not a share group.\n"
        f"* Group '{CLASSIC}' could not be deleted due to: java.lang.IllegalArgumentException: "
        f"Group '{CLASSIC}' is not a share group.\n"
    )
    p = tool.ok("--delete", "--group", DOOMED)
    assert p.stdout == f"Deletion of requested share groups ('{DOOMED}') was successful.\n"
    assert DOOMED not in tool.ok("--list").stdout.split()
    assert tool.ok("--describe", "--group", DOOMED, "--state").stdout.startswith(
        f"\nError: Share group '{DOOMED}' does not exist.\n"
    )
    # its share-partition state went with it, as tombstones in __share_group_state ...
    assert _state_tombstones(tool.node, DOOMED) == {0, 1}
    # ... so one made anew under the name starts from the beginning (share.auto.offset.reset
    # earliest), not at the old group's start offsets (1 and 1)
    c = _member(tool.node, DOOMED, "share-3")
    try:
        assert len(_consume(c, PARTS * PER_PARTITION)) == PARTS * PER_PARTITION
    finally:
        c.close()


def _state_tombstones(node: Node, group: str) -> set[int]:
    """The partitions of TOPIC whose share state of `group` ends in a tombstone."""
    c = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": "state-reader",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition("__share_group_state", 0, OFFSET_BEGINNING)])
    last: dict[int, bytes | None] = {}
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                continue
            k = state_records.decode_key(m.key())
            if k is not None and k.group_id == group:
                last[k.partition] = m.value()
    finally:
        c.close()
    return {p for p, v in last.items() if v is None}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--list"], 'Missing required argument "[bootstrap-server]"'),
        (["--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
        (
            ["--describe", "--group", "g", "--members", "--state"],
            "Option [describe] takes at most one of these options: [members], [offsets], [state]",
        ),
        (["--describe", "--group", "g", "--state", "Stable"],
         "Option [describe] does not take a value for [state]"),
        (["--delete"], "Option [delete] takes the option: [group]"),
        (["--delete", "--all-groups"], "Option [delete] takes the option: [group]"),
        (["--delete", "--group", "g", "--topic", "t"],
         "Option [delete] does not take the option: [topic]"),
        (["--delete-offsets", "--group", "g"],
         "Option [delete-offsets] takes the following options: [group], [topic]"),
        (["--reset-offsets", "--group", "g", "--to-earliest"],
         "Option [reset-offsets] takes the option: [execute] or [dry-run]"),
        (["--reset-offsets", "--group", "g", "--to-earliest", "--dry-run", "--execute"],
         "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
        (["--reset-offsets", "--group", "g", "--to-earliest", "--to-latest", "--dry-run"],
         'Option "[to-earliest]" can\'t be used with option "[to-latest]"'),
        (["--list", "--group", "g"], 'Option "[group]" can\'t be used with option "[list]"'),
        (["--describe", "--group", "g", "--all-groups"],
         'Option "[group]" can\'t be used with option "[all-groups]"'),
        (["--list", "--members"],
         "Option(s) [members] are unavailable given other options on the command line"),
        (["--list", "--describe", "--group", "g"],
         'Option "[group]" can\'t be used with option "[list]"'),
        (["--list", "--delete-offsets", "--group", "g", "--topic", "t"],
         'Option "[group]" can\'t be used with option "[list]"'),
        (["--all-groups"],
         "Command must include exactly one action: --list, --describe, --delete, "
         "--reset-offsets, --delete-offsets."),
        (["--reset-offsets", "--group", "g", "--topic", TOPIC, "--dry-run"],
         "Option '[reset-offsets]' requires one of the following scenarios: [to-datetime], "
         "[to-earliest], [to-latest]"),
        (["--reset-offsets", "--group", "g", "--group", "h", "--to-latest", "--dry-run"],
         "Found multiple arguments for option group, but you asked for only one"),
        (["--reset-offsets", "--group", "g", "--topic", f"{TOPIC}:x", "--to-latest",
          "--dry-run"],
         f"Invalid partition 'x' specified in topic arg '{TOPIC}:x''"),
        (["--reset-offsets", "--to-latest", "--dry-run"],
         "Option [reset-offsets] takes the option: [group]"),
        (["--delete-offsets", "--topic", "t"],
         "Option [delete-offsets] takes the following options: [group], [topic]"),
        (["--list", "--timeout", "soon"], "Cannot parse argument 'soon' of option timeout"),
        (["--list", "--frobnicate"], "frobnicate is not a recognized option"),
    ],
)  # fmt: skip
def test_bad_invocations(tool: Tool, args: list[str], message: str) -> None:
    bootstrap = args != ["--list"]
    p = tool.run(*args, bootstrap=bootstrap)
    assert p.returncode == 1, p
    assert p.stdout == ""
    assert p.stderr.splitlines() == [
        f"Error: {message}",
        "Run kafka-share-groups.sh --help for the options.",
    ]


RESET_GROUP, RESET_TOPIC = "sg-reset", "reset-me"
PLAN_HEADER = "\nGROUP           TOPIC           PARTITION  NEW-OFFSET"


def _take(node: Node, group: str, n: int) -> list[int]:
    """A ShareConsumer (implicit acknowledgement) of RESET_TOPIC takes ``n`` records, accepts
    them and leaves: their offsets, sorted."""
    c = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    c.subscribe([RESET_TOPIC])
    try:
        got: set[int] = set()
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            got |= {m.offset() for m in c.poll(0.2) if m is not None and m.error() is None}
        c.commit_sync(15)
        return sorted(got)
    finally:
        c.close()


def _empty(tool: Tool, group: str) -> None:
    """Wait until the group has no members (a closed consumer's leave reached the node)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        out = tool.ok("--list", "--state", "Empty").stdout
        if group in out.split():
            return
        time.sleep(0.2)
    raise AssertionError(f"{group} never became Empty")


def test_reset_offsets(tool: Tool) -> None:
    """Dry runs change nothing (an unknown group stays unknown); --execute sets the start offset
    a ShareConsumer then starts at; refused while the group has a member."""
    create_topic(tool.node.bootstrap, RESET_TOPIC, 1)
    producer = Producer({"bootstrap.servers": tool.node.bootstrap})
    for i in range(10):
        producer.produce(RESET_TOPIC, value=b"r%d" % i, partition=0)
    assert producer.flush(20) == 0
    base = ["--reset-offsets", "--group", RESET_GROUP, "--topic", RESET_TOPIC]
    row = f"\n{RESET_GROUP:<15} {RESET_TOPIC:<15} {'0':<10} "
    # a group that does not exist yet: planned, and a dry run does not make it
    p = tool.ok(*base, "--to-latest", "--dry-run")
    assert p.stdout == PLAN_HEADER + row + "10\n" and p.stderr == ""
    assert RESET_GROUP not in tool.ok("--list").stdout.split()
    # --execute makes the group with the new start offset
    assert tool.ok(*base, "--to-latest", "--execute").stdout == PLAN_HEADER + row + "10\n"
    assert RESET_GROUP in tool.ok("--list").stdout.split()
    # a dry run to the earliest offset changes nothing either
    assert tool.ok(*base, "--to-earliest", "--dry-run").stdout == PLAN_HEADER + row + "0\n"
    for i in range(10, 13):
        producer.produce(RESET_TOPIC, value=b"r%d" % i, partition=0)
    assert producer.flush(20) == 0
    assert _take(tool.node, RESET_GROUP, 3) == [10, 11, 12]
    _empty(tool, RESET_GROUP)
    # --to-datetime far in the past: the first offset; --topic t:p names the partition
    p = tool.ok(
        "--reset-offsets", "--group", RESET_GROUP, "--topic", f"{RESET_TOPIC}:0",
        "--to-datetime", "2000-01-01T00:00:00.000", "--execute",
    )  # fmt: skip
    assert p.stdout == PLAN_HEADER + row + "0\n"
    assert _take(tool.node, RESET_GROUP, 13) == list(range(13))
    _empty(tool, RESET_GROUP)
    # without --topic: the partitions the group has share state for (record 15)
    p = tool.ok("--reset-offsets", "--group", RESET_GROUP, "--to-latest", "--execute")
    assert p.stdout == PLAN_HEADER + row + "13\n"
    for i in range(13, 15):
        producer.produce(RESET_TOPIC, value=b"r%d" % i, partition=0)
    assert producer.flush(20) == 0
    assert _take(tool.node, RESET_GROUP, 2) == [13, 14]
    _empty(tool, RESET_GROUP)
    # a group with a member is refused before anything is planned
    member = ShareConsumer({"bootstrap.servers": tool.node.bootstrap, "group.id": RESET_GROUP})
    member.subscribe([RESET_TOPIC])
    try:
        deadline = time.monotonic() + 20
        while RESET_GROUP not in tool.ok("--list", "--state", "Stable").stdout.split():
            assert time.monotonic() < deadline, "the member never joined"
            member.poll(0.2)
        p = tool.run(*base, "--to-earliest", "--execute")
        assert p.returncode == 1 and p.stdout == ""
        assert p.stderr == f"Share group '{RESET_GROUP}' is not empty.\n"
        # --delete-offsets is refused by the coordinator: the error, then each topic's status
        p = tool.ok("--delete-offsets", "--group", RESET_GROUP, "--topic", RESET_TOPIC)
        message = f"The group {RESET_GROUP} is not empty."
        assert p.stdout == (
            f"\nError: {message}\n\nTOPIC           STATUS\n{RESET_TOPIC:<15} Error: {message}\n"
        )
    finally:
        member.close()


def test_delete_offsets(tool: Tool) -> None:
    """Deleted, the group has no start offset: the next consumer starts from the reset point
    (share.auto.offset.reset=earliest on this node), not where the group was."""
    group = "sg-forget"
    create_topic(tool.node.bootstrap, "forget-me", 1)
    p = Producer({"bootstrap.servers": tool.node.bootstrap})
    for i in range(5):
        p.produce("forget-me", value=b"f%d" % i, partition=0)
    assert p.flush(20) == 0
    tool.ok("--reset-offsets", "--group", group, "--topic", "forget-me", "--to-latest", "--execute")
    p = tool.ok("--delete-offsets", "--group", group, "--topic", "forget-me", "--topic", "nope")
    assert p.stdout == (
        "\nTOPIC           STATUS"
        "\nforget-me       Successful"
        "\nnope            Error: The topic nope does not exist.\n"
    )
    p = tool.ok("--delete-offsets", "--group", group, "--topic", "forget-me")
    assert p.stdout == "\nTOPIC           STATUS\nforget-me       Successful\n"
    # an Empty group's offsets: the node reports no partition without members
    p = tool.ok("--describe", "--group", group)
    assert p.stdout == "\nGROUP           TOPIC           PARTITION  START-OFFSET\n"
    c = ShareConsumer({"bootstrap.servers": tool.node.bootstrap, "group.id": group})
    c.subscribe(["forget-me"])
    try:
        got: set[int] = set()
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got |= {m.offset() for m in c.poll(0.2) if m is not None and m.error() is None}
        assert sorted(got) == list(range(5))
    finally:
        c.close()
    # no such group / a classic group: the coordinator's error, then each topic's status
    for name, message in (
        ("ghost", "Group ghost not found."),
        (CLASSIC, f"Group {CLASSIC} is not a share group."),
    ):
        p = tool.ok("--delete-offsets", "--group", name, "--topic", "forget-me")
        assert p.stdout == (
            f"\nError: {message}\n\nTOPIC           STATUS\nforget-me       Error: {message}\n"
        )


def test_reset_offsets_command_errors(tool: Tool) -> None:
    p = tool.run(
        "--reset-offsets", "--group", "g", "--topic", f"{TOPIC}:7", "--to-earliest", "--dry-run"
    )
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == (
        "Error while executing share group command: org.apache.kafka.common.errors."
        f'UnknownTopicOrPartitionException: The partitions "{TOPIC}-7" do not exist\n'
    )
    p = tool.run(
        "--reset-offsets", "--group", "g", "--topic", TOPIC, "--to-datetime", "yesterday",
        "--dry-run",
    )  # fmt: skip
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == (
        "Error while executing share group command: java.text.ParseException: Error parsing "
        "timestamp. It does not contain a 'T' according to ISO8601 format\n"
    )


def test_help_timeout_and_command_config(tool: Tool, tmp_path: Path) -> None:
    p = tool.run("--help", bootstrap=False)
    assert p.returncode == 0
    assert p.stdout.startswith(
        "This tool helps to list, describe, reset and delete share groups.\n"
        "Option                                  Description\n"
    )
    assert "--timeout <Long: timeout (ms)>" in p.stdout and "(default: 30000)" in p.stdout
    config = tmp_path / "admin.properties"
    config.write_text("client.id=sg-tool\nrequest.timeout.ms=10000\n")
    p = tool.ok("--list", "--command-config", str(config), "--timeout", "20000")
    assert {ACTIVE, EMPTY} <= set(p.stdout.split())  # with the groups other tests made
    assert sorted(p.stdout.split()) == sorted(tool.ok("--list").stdout.split())
    p = tool.run("--list", "--command-config", str(tmp_path / "missing.properties"))
    assert p.returncode == 1 and "missing.properties does not exist" in p.stderr
    # nothing answers there: the command fails within --timeout, in one line
    dead = subprocess.run(
        [TOOL, "--bootstrap-server", "127.0.0.1:1", "--list", "--timeout", "2000"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert dead.returncode == 1 and len(dead.stderr.splitlines()) == 1, dead
    assert dead.stderr.startswith("Error while executing share group command: ")
