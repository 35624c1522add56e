"""bin/kafka-consumer-groups.sh as a real process against one real node, on groups made by stock
clients: a classic confluent-kafka group that stays Stable, a KIP-848 (``group.protocol=
consumer``) confluent-kafka group and kafka-python groups that commit and leave (Empty). The
tool's tables are checked to the character (Kafka's widths, ``-`` for missing values, the
stderr notes); resets are checked by a stock consumer resuming at the new offset.
"""

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka.structs import OffsetAndMetadata  # type: ignore[import-untyped]
from kafka.structs import TopicPartition as KpTopicPartition

from tests.waits import wait_for

from .clients import create_topic
from .node import ROOT, Node

pytestmark = pytest.mark.serial  # kafka-python group joins: see test_clients.py

TOOL = str(ROOT / "bin" / "kafka-consumer-groups.sh")
TOPIC, PARTS, PER_PARTITION = "orders", 3, 10
CLASSIC, NEW, EMPTY, DOOMED = "cg-classic", "cg-848", "cg-kp", "cg-doomed"
WARN_DRY = "WARN: No action will be performed as the --execute option is missing."


class Groups:
    def __init__(self, node: Node, classic: Consumer, new: Consumer) -> None:
        self.node, self.classic, self.new = node, classic, new

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(
            [TOOL, "--bootstrap-server", self.node.bootstrap, *args],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "Traceback" not in p.stderr, p.stderr
        return p

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        p = self.run(*args)
        assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
        return p

    def committed(self, group: str) -> dict[int, int]:
        """The group's committed offsets as a stock client reads them (no group join)."""
        c = Consumer({"bootstrap.servers": self.node.bootstrap, "group.id": group})
        try:
            tps = c.committed([TopicPartition(TOPIC, p) for p in range(PARTS)], timeout=10)
            return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
        finally:
            c.close()

    def resume_at(self, group: str, partition: int) -> int:
        """The offset a stock consumer of ``group`` reads first on ``partition`` (assigned by
        hand, so the group keeps no member)."""
        c = Consumer(
            {
                "bootstrap.servers": self.node.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
            }
        )
        try:
            c.assign([TopicPartition(TOPIC, partition)])
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    return int(m.offset() or 0)
            raise AssertionError(f"nothing read from {TOPIC}-{partition} for {group}")
        finally:
            c.close()


def _join(c: Consumer, n: int) -> None:
    """Poll until ``n`` records arrived (the consumer joined and got every partition)."""
    got, deadline = 0, time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        got += len([m for m in c.consume(50, 0.2) if not m.error()])
    assert got >= n, f"consumed {got} of {n}"


def _kp_group(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """A kafka-python member joins ``group``, commits ``offsets`` and leaves (group Empty)."""
    c = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id="kp-1",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        wait_for(lambda: bool(c.poll(200) or c.assignment()), 30, "kafka-python's assignment")
        c.commit(
            {KpTopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        )
    finally:
        c.close()


@pytest.fixture(scope="module")
def groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Groups]:
    node = Node(
        Path(tmp_path_factory.mktemp("cg")) / "node1",
        group__consumer__heartbeat__interval__ms="300",
        group__consumer__session__timeout__ms="8000",
    )
    node.start()
    consumers: list[Consumer] = []
    try:
        create_topic(node.bootstrap, TOPIC, PARTS)
        p = Producer({"bootstrap.servers": node.bootstrap})
        for i in range(PARTS * PER_PARTITION):
            p.produce(TOPIC, value=b"v%d" % i, partition=i % PARTS)
        assert p.flush(20) == 0
        conf: dict[str, Any] = {
            "bootstrap.servers": node.bootstrap,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        classic = Consumer({**conf, "group.id": CLASSIC, "client.id": "classic-1"})
        new = Consumer(
            {**conf, "group.id": NEW, "client.id": "new-1", "group.protocol": "consumer"}
        )
        consumers += [classic, new]
        for c in (classic, new):
            c.subscribe([TOPIC])
            _join(c, PARTS * PER_PARTITION)
        # lag on purpose: partition 2 of the classic group has no committed offset
        classic.commit(
            offsets=[TopicPartition(TOPIC, 0, 4), TopicPartition(TOPIC, 1, 10)],
            asynchronous=False,
        )
        new.commit(
            offsets=[TopicPartition(TOPIC, p, o) for p, o in ((0, 10), (1, 10), (2, 7))],
            asynchronous=False,
        )
        _kp_group(node.bootstrap, EMPTY, {0: 2, 1: 3, 2: 5})
        _kp_group(node.bootstrap, DOOMED, {0: 1})
        yield Groups(node, classic, new)
    finally:
        for c in consumers:
            c.close()
        node.kill()


def test_list_with_state_and_type_filters(groups: Groups, tmp_path: Path) -> None:
    assert sorted(groups.ok("--list").stdout.splitlines()) == sorted([CLASSIC, NEW, DOOMED, EMPTY])
    config = tmp_path / "admin.properties"
    config.write_text("client.id=cg-tool\nrequest.timeout.ms=10000\n")
    p = groups.ok("--list", "--command-config", str(config))
    assert sorted(p.stdout.splitlines()) == sorted([CLASSIC, NEW, DOOMED, EMPTY])
    p = groups.ok("--describe", "--all-groups", "--state")
    assert p.stdout.count("\nGROUP ") == 4
    out = groups.ok("--list", "--state", "stable").stdout
    assert out.splitlines()[0] == f"{'GROUP':<25} {'STATE':<20}"
    assert sorted(out.splitlines()[1:]) == [
        f"{NEW:<25} {'Stable':<20}",
        f"{CLASSIC:<25} {'Stable':<20}",
    ]
    out = groups.ok("--list", "--type", "consumer", "--state").stdout
    assert out == (
        "GROUP                     TYPE                 STATE               \n"
        "cg-848                    Consumer             Stable              \n"
    )
    out = groups.ok("--list", "--type", "classic", "--state", "Empty").stdout
    assert sorted(out.splitlines()[1:]) == [
        f"{DOOMED:<25} {'Classic':<20} {'Empty':<20}",
        f"{EMPTY:<25} {'Classic':<20} {'Empty':<20}",
    ]
    p = groups.run("--list", "--state", "bogus")
    assert p.returncode == 1
    assert (
        "Invalid state list 'bogus'. Valid states are: PreparingRebalance, "
        "CompletingRebalance, Stable, Dead, Empty, Assigning, Reconciling"
    ) in p.stderr
    p = groups.run("--list", "--type", "share")
    assert p.returncode == 1
    assert "Invalid types list 'share'. Valid types are: Consumer, Classic" in p.stderr


def cols(widths: tuple[int | None, ...], *values: object) -> str:
    """A row as Java's ``%-Ns`` formats joined by spaces lay it out (None: ``%s``)."""
    return " ".join(
        str(v) if w is None else f"{v!s:<{w}}" for v, w in zip(values, widths, strict=True)
    )


OFFSETS_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")


def test_describe_offsets_of_a_stable_classic_group(groups: Groups) -> None:
    member = groups.classic.memberid()
    assert member is not None and len(member) == 46  # "classic-1-" + a UUID
    p = groups.ok("--describe", "--group", CLASSIC)
    assert p.stderr == ""
    w = (15, 15, 10, 15, 15, 15, 46, 15, None)  # the consumer id column as wide as the id
    rows = [(0, 4, 10, 6), (1, 10, 10, 0), (2, "-", 10, "-")]
    assert p.stdout == "\n".join(
        [
            "",
            cols(w, *OFFSETS_HEADER, "CONSUMER-ID", "HOST", "CLIENT-ID"),
            *(cols(w, CLASSIC, TOPIC, *r, member, "/127.0.0.1", "classic-1") for r in rows),
            "",
        ]
    )


def test_describe_offsets_of_a_kip848_group_verbose(groups: Groups) -> None:
    member = groups.new.memberid()
    assert member is not None and len(member) == 22
    p = groups.ok("--describe", "--group", NEW, "--offsets", "--verbose")
    w = (15, 15, 10, 15, 15, 15, 15, 22, 15, None)
    header = ("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", *OFFSETS_HEADER[3:])
    # committed by hand without a leader epoch: "-"
    rows = [(0, "-", 10, 10, 0), (1, "-", 10, 10, 0), (2, "-", 7, 10, 3)]
    assert p.stdout == "\n".join(
        [
            "",
            cols(w, *header, "CONSUMER-ID", "HOST", "CLIENT-ID"),
            *(cols(w, NEW, TOPIC, *r, member, "/127.0.0.1", "new-1") for r in rows),
            "",
        ]
    )


def test_describe_an_empty_group(groups: Groups) -> None:
    p = groups.ok("--describe", "--group", EMPTY)
    assert p.stderr == "\nConsumer group 'cg-kp' has no active members.\n"
    row = "cg-kp           orders          {}          {}               10              {}               -               -               -"
    assert p.stdout == "\n".join(
        [
            "",
            "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID",
            row.format(0, 2, 8),
            row.format(1, 3, 7),
            row.format(2, 5, 5),
            "",
        ]
    )  # fmt: skip
    p = groups.ok("--describe", "--group", EMPTY, "--members")
    assert p.stderr == "\nConsumer group 'cg-kp' has no active members.\n"
    assert (
        p.stdout
        == "\nGROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     \n"
    )
    p = groups.run("--describe", "--group", "no-such-group")
    assert p.returncode == 1
    assert "GroupIdNotFoundException: The group id does not exist." in p.stderr


def test_describe_members(groups: Groups) -> None:
    classic, new = groups.classic.memberid(), groups.new.memberid()
    p = groups.ok("--describe", "--group", CLASSIC, "--members")
    w = (15, 46, 15, 15, 15, None)  # the trailing "%-15s " leaves a space at the end
    header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "")
    assert p.stdout == "\n".join(
        [
            "",
            cols(w, *header),
            cols(w, CLASSIC, classic, "/127.0.0.1", "classic-1", 3, ""),
            "",
        ]
    )
    p = groups.ok("--describe", "--group", NEW, "--members", "--verbose")
    w = (15, 22, 15, 15, 15, 15, 20, 15, 20)
    verbose = ("CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT")
    assignment = "orders:0,1,2"
    assert p.stdout == "\n".join(
        [
            "",
            cols(w, *header[:5], *verbose),
            cols(w, NEW, new, "/127.0.0.1", "new-1", 3, 1, assignment, 1, assignment),
            "",
        ]
    )


def test_describe_state(groups: Groups) -> None:
    coordinator = f"127.0.0.1:{groups.node.port}  (1)"
    p = groups.ok("--describe", "--group", CLASSIC, "--group", NEW, "--state")
    assert p.stdout == "\n".join(
        [
            "",
            "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS",
            f"cg-848          {coordinator:<25} uniform              Stable               1",
            "",
            "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS",
            f"cg-classic      {coordinator:<25} range                Stable               1",
            "",
        ]
    )  # fmt: skip
    p = groups.ok("--describe", "--group", NEW, "--state", "--verbose")
    assert p.stdout == "\n".join(
        [
            "",
            "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                GROUP-EPOCH     TARGET-ASSIGNMENT-EPOCH   #MEMBERS",
            f"cg-848          {coordinator:<25} uniform              Stable               1               1                         1",
            "",
        ]
    )  # fmt: skip


def test_reset_is_refused_while_the_group_has_members(groups: Groups) -> None:
    p = groups.ok(
        "--reset-offsets", "--group", CLASSIC, "--all-topics", "--to-earliest", "--execute"
    )
    assert p.stdout == (
        "\nError: Assignments can only be reset if the group 'cg-classic' is inactive, but the "
        "current state is Stable.\n"
        "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\n"
    )
    assert groups.committed(CLASSIC) == {0: 4, 1: 10}


def test_reset_offsets_dry_run_execute_and_export(groups: Groups, tmp_path: Path) -> None:
    reset = ("--reset-offsets", "--group", EMPTY)
    p = groups.ok(*reset, "--all-topics", "--to-earliest")
    assert p.stderr.startswith(WARN_DRY)
    row = "cg-kp           orders          {}          {}"
    header = "GROUP           TOPIC           PARTITION  NEW-OFFSET"
    assert p.stdout == "\n".join(["", header, *(row.format(i, 0) for i in range(3)), ""])
    assert groups.committed(EMPTY) == {0: 2, 1: 3, 2: 5}  # a dry run changes nothing

    p = groups.ok(*reset, "--topic", f"{TOPIC}:0", "--to-offset", "6", "--execute")
    assert p.stdout == "\n".join(["", header, row.format(0, 6), ""])
    assert groups.resume_at(EMPTY, 0) == 6

    p = groups.ok(*reset, "--topic", f"{TOPIC}:1,2", "--shift-by", "-4", "--execute")
    assert p.stdout == "\n".join(["", header, row.format(1, 0), row.format(2, 1), ""])
    assert "New offset (-1) is lower than earliest offset for topic partition orders-1. Value will be set to 0." in p.stderr  # fmt: skip
    assert groups.committed(EMPTY) == {0: 6, 1: 0, 2: 1}

    p = groups.ok(*reset, "--topic", TOPIC, "--to-latest", "--dry-run", "--export")
    assert p.stdout == "orders,0,10\norders,1,10\norders,2,10\n\n"
    plan = tmp_path / "plan.csv"
    plan.write_text("orders,1,7\norders,2,9\n")
    p = groups.ok(*reset, "--from-file", str(plan), "--execute")
    assert p.stdout == "\n".join(["", header, row.format(1, 7), row.format(2, 9), ""])
    assert groups.resume_at(EMPTY, 2) == 9

    # every record is younger than a day and older than the future
    p = groups.ok(*reset, "--topic", TOPIC, "--by-duration", "P1D", "--dry-run")
    assert p.stdout == "\n".join(["", header, *(row.format(i, 0) for i in range(3)), ""])
    p = groups.ok(*reset, "--topic", f"{TOPIC}:0", "--to-datetime", "2999-01-01T00:00:00.000")
    assert "Warn: Partition 0 from topic orders is empty. Falling back to latest known offset." in p.stdout  # fmt: skip
    assert p.stdout.endswith("\n" + row.format(0, 10) + "\n")
    p = groups.ok(*reset, "--all-topics", "--to-current", "--dry-run")
    assert p.stdout == "\n".join(
        ["", header, row.format(0, 6), row.format(1, 7), row.format(2, 9), ""]
    )

    p = groups.run(*reset, "--topic", f"{TOPIC}:7", "--to-earliest")
    assert p.returncode == 1
    assert 'The partitions "orders-7" do not exist' in p.stderr


def test_reset_a_kip848_group_after_its_member_left(groups: Groups) -> None:
    groups.new.close()
    wait_for(
        lambda: "Empty" in groups.ok("--describe", "--group", NEW, "--state").stdout,
        15,
        "the KIP-848 group to be empty",
    )
    p = groups.ok("--reset-offsets", "--group", NEW, "--topic", TOPIC, "--to-earliest", "--execute")
    assert p.stdout.count("cg-848 ") == 3
    c = Consumer(
        {
            "bootstrap.servers": groups.node.bootstrap,
            "group.id": NEW,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    try:
        c.subscribe([TOPIC])
        firsts: dict[int, int] = {}
        deadline = time.monotonic() + 20
        while len(firsts) < PARTS and time.monotonic() < deadline:
            for m in c.consume(50, 0.2):
                if not m.error():
                    firsts.setdefault(m.partition() or 0, m.offset() or 0)
        assert firsts == {0: 0, 1: 0, 2: 0}
    finally:
        c.close()


def test_delete_offsets(groups: Groups) -> None:
    p = groups.ok("--delete-offsets", "--group", EMPTY, "--topic", f"{TOPIC}:2", "--topic", "nope")
    assert p.stdout == "\n".join(
        [
            "Request succeeded for deleting offsets from group cg-kp.",
            "",
            "TOPIC           PARTITION  STATUS         ",
            "nope            -          Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not host this topic-partition.",
            "orders          2          Successful     ",
            "",
        ]
    )  # fmt: skip
    assert 2 not in groups.committed(EMPTY)
    # the classic group is subscribed to the topic: the broker refuses
    p = groups.ok("--delete-offsets", "--group", CLASSIC, "--topic", f"{TOPIC}:0")
    assert p.stdout.startswith(
        "\nError: Encountered some partition-level error, see the follow-up details.\n"
    )
    assert "GroupSubscribedToTopicException" in p.stdout
    assert groups.committed(CLASSIC)[0] == 4


def test_delete_groups(groups: Groups) -> None:
    p = groups.ok("--delete", "--group", DOOMED, "--group", CLASSIC)
    assert p.stdout == (
        "\nError: Deletion of some consumer groups failed:\n"
        "* Group 'cg-classic' could not be deleted due to: "
        "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.\n"
        "\nThese consumer groups were deleted successfully: 'cg-doomed'\n"
    )
    assert DOOMED not in groups.ok("--list").stdout.split()
    p = groups.ok("--delete", "--group", EMPTY)
    assert p.stdout == "Deletion of requested consumer groups ('cg-kp') was successful.\n"
    assert groups.committed(EMPTY) == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            (),
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets, --validate-regex",
        ),
        (("--list", "--validate-regex", "a+"), "Command must include exactly one action"),
        (("--describe",), "Option [describe] takes one of these options: [all-groups], [group]"),
        (
            ("--describe", "--group", "g", "--members", "--state"),
            "Option [describe] takes at most one of these options: [members], [offsets], [state]",
        ),
        (
            ("--describe", "--group", "g", "--state", "Stable"),
            "Option [describe] does not take a value for [state]",
        ),
        (
            ("--list", "--members"),
            "Option(s) [members] are unavailable given other options on the command line",
        ),
        (
            ("--describe", "--group", "g", "--type"),
            "Option(s) [type] are unavailable given other options on the command line",
        ),
        (("--list", "--group", "g"), 'Option "[group]" can\'t be used with option "[list]"'),
        (
            ("--describe", "--group", "g", "--all-groups"),
            'Option "[group]" can\'t be used with option "[all-groups]"',
        ),
        (
            ("--describe", "--group", "g", "--topic", "t"),
            'Option "[topic]" can\'t be used with option "[describe]"',
        ),
        (
            ("--delete", "--group", "g", "--topic", "t"),
            "The consumer does not support topic-specific offset deletion from a consumer group.",
        ),
        (
            ("--delete-offsets", "--group", "g"),
            "Option [delete-offsets] takes the following options: [group], [topic]",
        ),
        (
            ("--reset-offsets", "--to-earliest", "--all-topics"),
            "Option [reset-offsets] takes one of these options: [all-groups], [group]",
        ),
        (
            ("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"),
            'Option "[to-earliest]" can\'t be used with option "[to-latest]"',
        ),
        (
            (
                "--reset-offsets",
                "--group",
                "g",
                "--all-topics",
                "--to-earliest",
                "--execute",
                "--dry-run",
            ),
            "Option [reset-offsets] only accepts one of [execute] and [dry-run]",
        ),
        (
            ("--reset-offsets", "--group", "g", "--to-earliest"),
            "One of the reset scopes should be defined: --all-topics, --topic.",
        ),
        (
            ("--reset-offsets", "--group", "g", "--all-topics"),
            "Option '[reset-offsets]' requires one of the following scenarios",
        ),
        (
            ("--reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest"),
            "Invalid partition 'x' specified in topic arg 't:x''",
        ),
        (
            ("--reset-offsets", "--group", "g", "--all-topics", "--shift-by", "two"),
            "Cannot parse argument 'two' of option shift-by",
        ),
        (
            ("--delete-offsets", "--group", "a", "--group", "b", "--topic", "t"),
            "Found multiple arguments for option group, but you asked for only one",
        ),
        (("--describe", "--group"), "Option [group] requires an argument"),
        (("--list", "--frobnicate"), "frobnicate is not a recognized option"),
        (
            ("--list", "--command-config", "/nonexistent/admin.properties"),
            "--command-config: the file /nonexistent/admin.properties does not exist",
        ),
    ],
)
def test_bad_invocations(groups: Groups, args: tuple[str, ...], message: str) -> None:
    p = groups.run(*args)
    assert p.returncode == 1, f"{args}: rc={p.returncode}\n{p.stdout}"
    assert message in p.stderr, f"{args}: {message!r} not in:\n{p.stderr}"


def test_help_and_missing_bootstrap_server() -> None:
    p = subprocess.run([TOOL, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    assert p.stdout.startswith("This tool helps to list all consumer groups")
    assert "--reset-offsets" in p.stdout and "--to-datetime <String: datetime>" in p.stdout
    p = subprocess.run([TOOL, "--list"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert 'Missing required argument "[bootstrap-server]"' in p.stderr
    # --validate-regex answers without asking the cluster (Kafka still wants the flag)
    p = subprocess.run(
        [TOOL, "--bootstrap-server", "127.0.0.1:1", "--validate-regex", "orders-[0-9]+"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (p.returncode, p.stdout) == (0, "The regular expression `orders-[0-9]+` is valid.\n")
    p = subprocess.run(
        [TOOL, "--bootstrap-server", "127.0.0.1:1", "--list", "--timeout", "2000"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 1 and "cannot connect to the cluster" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
