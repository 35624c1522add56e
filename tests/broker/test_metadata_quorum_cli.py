"""kafka-metadata-quorum.sh (broker/cli/metadata_quorum.py, quorum_format.py): Kafka's output
formats as golden strings, the bad-flag messages, DescribeQuorum answers as the tool reads them,
and the tool against three real voters on loopback, started at a follower."""

import asyncio
import io
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.cli.admin import CommandError
from broker.cli.metadata_quorum import NotLeaderHere, check_removal, main, quorum_info
from broker.cli.quorum_format import (
    HEADERS,
    FormatError,
    QuorumInfo,
    Replica,
    format_replication,
    format_status,
    uuid_string,
)
from broker.config.meta_properties import MetaProperties, random_uuid, write_meta_properties
from broker.quorum.describe_wire import describe_response_body
from broker.raft.core import NotLeader, QuorumDescription, ReplicaDescription
from protocol.build import build
from protocol.registry import REGISTRY
from tests.waits import wait_for_async

from .network_support import run
from .test_quorum_network import VOTERS, Voter, leader_of

T = 1_700_000_010_000
INFO = QuorumInfo(
    leader_id=1,
    leader_epoch=3,
    high_watermark=120,
    voters=[
        Replica(1, 125, T, T),
        Replica(2, 120, T - 100, T - 200),
        Replica(3, 118, T - 50, T - 1000),
    ],
    observers=[Replica(4, 100, T - 300, None)],
    nodes={
        1: [("CONTROLLER", "localhost", 9093)],
        2: [("CONTROLLER", "localhost", 9094)],
        3: [("CONTROLLER", "::1", 9095)],
    },
)


def test_status_golden() -> None:
    assert format_status("fMCL8kv1SWm87L_Md-I2hg", INFO) == (
        "ClusterId:              fMCL8kv1SWm87L_Md-I2hg\n"
        "LeaderId:               1\n"
        "LeaderEpoch:            3\n"
        "HighWatermark:          120\n"
        "MaxFollowerLag:         7\n"
        "MaxFollowerLagTimeMs:   1000\n"
        'CurrentVoters:          [{"id": 1, "endpoints": ["CONTROLLER://localhost:9093"]}, '
        '{"id": 2, "endpoints": ["CONTROLLER://localhost:9094"]}, '
        '{"id": 3, "endpoints": ["CONTROLLER://[::1]:9095"]}]\n'
        'CurrentObservers:       [{"id": 4}]\n'
    )


def test_status_lag_rules() -> None:
    # voters level: Kafka takes the first of them; the leader itself means no lag time at all,
    # another voter means the difference of the caught-up times
    level = [Replica(1, 5, T, T - 40), Replica(2, 5, T, T)]
    assert "MaxFollowerLag:         0\nMaxFollowerLagTimeMs:   40\n" in format_status(
        "c", QuorumInfo(2, 1, 5, level, [])
    )
    assert "MaxFollowerLag:         0\nMaxFollowerLagTimeMs:   0\n" in format_status(
        "c", QuorumInfo(1, 1, 5, level, [])
    )
    # a voter never caught up: the lag time is unknown (-1); no endpoints, a directory id
    d = uuid.UUID(bytes=bytes(range(16)))
    never = QuorumInfo(1, 1, 5, [Replica(1, 5, T, T), Replica(2, -1, None, None, d)], [])
    out = format_status("c", never)
    assert "MaxFollowerLag:         6\nMaxFollowerLagTimeMs:   -1\n" in out
    assert (
        'CurrentVoters:          [{"id": 1}, {"id": 2, "directoryId": "AAECAwQFBgcICQoLDA0ODw"}]'
        in out
    )
    assert "CurrentObservers:       []\n" in out


def test_replication_golden() -> None:
    assert format_replication(INFO, False, T) == (
        "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp"
        "\tLastCaughtUpTimestamp\tStatus  \t\n"
        "1     \tAAAAAAAAAAAAAAAAAAAAAA\t125         \t0  \t1700000010000     "
        "\t1700000010000        \tLeader  \t\n"
        "2     \tAAAAAAAAAAAAAAAAAAAAAA\t120         \t5  \t1700000009900     "
        "\t1700000009800        \tFollower\t\n"
        "3     \tAAAAAAAAAAAAAAAAAAAAAA\t118         \t7  \t1700000009950     "
        "\t1700000009000        \tFollower\t\n"
        "4     \tAAAAAAAAAAAAAAAAAAAAAA\t100         \t25 \t1700000009700     "
        "\t-1                   \tObserver\t\n"
    )


def test_replication_human_readable_golden() -> None:
    assert format_replication(INFO, True, T + 500) == (
        "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp"
        "\tLastCaughtUpTimestamp\tStatus  \t\n"
        "1     \tAAAAAAAAAAAAAAAAAAAAAA\t125         \t0  \t500 ms ago        "
        "\t500 ms ago           \tLeader  \t\n"
        "2     \tAAAAAAAAAAAAAAAAAAAAAA\t120         \t5  \t600 ms ago        "
        "\t700 ms ago           \tFollower\t\n"
        "3     \tAAAAAAAAAAAAAAAAAAAAAA\t118         \t7  \t550 ms ago        "
        "\t1500 ms ago          \tFollower\t\n"
        "4     \tAAAAAAAAAAAAAAAAAAAAAA\t100         \t25 \t800 ms ago        "
        "\t-1                   \tObserver\t\n"
    )


def test_human_readable_refuses_a_time_in_the_future() -> None:
    with pytest.raises(FormatError, match="possible drift in system clock"):
        format_replication(INFO, True, T - 1)


def test_a_leader_missing_from_the_voters_is_an_error() -> None:
    with pytest.raises(FormatError, match="not among the voters"):
        format_status("c", QuorumInfo(9, 1, 0, [Replica(1, 0)], []))


def test_uuid_is_kafkas_base64() -> None:
    assert uuid_string(None) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert (
        uuid_string(uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")) == "ASNFZ4mrze8BI0VniavN7w"
    )


# --- reading DescribeQuorum answers ------------------------------------------------------------


def response(version: int, described: QuorumDescription | NotLeader) -> Any:
    cls = REGISTRY.spec(55).response_type(version)
    body: Any = build(cls, describe_response_body(described, {1: [("CONTROLLER", "h", 1)]}))
    frame = REGISTRY.encode_response(55, version, 5, body)
    return REGISTRY.decode_response(55, version, frame[4:])[1]


DESCRIBED = QuorumDescription(
    1, 4, 9, (ReplicaDescription(1, 10, T, T), ReplicaDescription(2, 9, -1, -1)), ()
)


def test_answers_as_the_admin_client_reads_them() -> None:
    info = quorum_info(response(2, DESCRIBED))
    assert (info.leader_id, info.leader_epoch, info.high_watermark) == (1, 4, 9)
    assert info.voters == [Replica(1, 10, T, T), Replica(2, 9, None, None)]  # -1: unknown
    assert info.nodes == {1: [("CONTROLLER", "h", 1)]}
    old = quorum_info(response(0, DESCRIBED))  # v0: no timestamps at all
    assert old.voters == [Replica(1, 10), Replica(2, 9)] and old.nodes == {}
    with pytest.raises(NotLeaderHere) as e:
        quorum_info(response(1, NotLeader(2, 5)))
    assert (e.value.leader_id, e.value.epoch) == (2, 5)


def test_error_answers_are_command_errors() -> None:
    cls = REGISTRY.spec(55).response_type(2)
    refused: Any = build(cls, {"error_code": 31, "error_message": "Cluster authorization failed."})
    with pytest.raises(
        CommandError, match=r"Cluster authorization failed\. \(CLUSTER_AUTHORIZATION_FAILED\)"
    ):
        quorum_info(refused)
    unknown: Any = build(
        cls,
        {
            "topics": [
                {
                    "topic_name": "__cluster_metadata",
                    "partitions": [{"partition_index": 0, "error_code": 3}],
                }
            ]
        },
    )
    with pytest.raises(CommandError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        quorum_info(unknown)


# --- flags ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["describe", "--status"],
            "one of the arguments --bootstrap-server --bootstrap-controller is required",
        ),
        (
            ["--bootstrap-server", "h:1", "--bootstrap-controller", "h:2", "describe", "--status"],
            "argument --bootstrap-controller: not allowed with argument --bootstrap-server",
        ),
        (
            ["--bootstrap-server", "h:1", "describe"],
            "One of --status or --replication must be specified with describe sub-command",
        ),
        (
            ["--bootstrap-server", "h:1", "describe", "--status", "--replication"],
            "Only one of --status or --replication should be specified with describe sub-command",
        ),
        (
            ["--bootstrap-controller", "h:1", "describe", "--status", "--human-readable"],
            "The option --human-readable is only supported along with --replication",
        ),
        (
            ["--bootstrap-server", "h", "describe", "--status"],
            "--bootstrap-server: 'h' is not host:port",
        ),
        (
            ["--bootstrap-controller", "h:x", "describe", "--status"],
            "--bootstrap-controller: 'h:x' is not host:port",
        ),
        (["--bootstrap-server", "h:1"], "a command is required: describe"),
        (
            ["--bootstrap-server", "h:1", "describe", "--statuss"],
            "unrecognized arguments: --statuss",
        ),
        (["--bootstrap-server", "h:1", "status"], "invalid choice: 'status'"),
        (
            ["--bootstrap-controller", "h:1", "remove-controller", "--controller-id", "1"],
            "argument --controller-directory-id/-d is required",
        ),
        (
            [
                "--bootstrap-server",
                "h:1",
                "--command-config",
                "/no/such.properties",
                "describe",
                "--status",
            ],
            "Properties file /no/such.properties does not exist.",
        ),
    ],
)
def test_bad_flags_are_one_line_and_exit_1(argv: list[str], message: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(argv, out, err) == 1
    assert out.getvalue() == ""
    first, hint = err.getvalue().splitlines()
    assert first.startswith("Error: ") and message in first
    assert hint == "Run kafka-metadata-quorum.sh --help for the options."


def test_help_and_unreachable_node() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["--help"], out, err) == 0 and "--bootstrap-controller" in out.getvalue()
    assert main([], io.StringIO(), err) == 1 and "usage:" in err.getvalue()
    err = io.StringIO()
    assert (
        main(["--bootstrap-controller", "127.0.0.1:1", "describe", "--status"], io.StringIO(), err)
        == 1
    )
    (line,) = err.getvalue().splitlines()
    assert line.startswith("Error while executing metadata quorum command: cannot connect")


# --- three voters on loopback -----------------------------------------------------------------


def test_replication_of_three_voters_asked_at_a_follower(tmp_path: Path) -> None:
    """The tool reaches a follower first (NOT_LEADER_OR_FOLLOWER), then finds the leader among
    the other addresses, and prints Kafka's table."""

    async def go() -> str:
        voters = [Voter(i, tmp_path) for i in sorted(VOTERS)]
        for v in voters:
            await v.listen()
        endpoints = {v.node_id: ("127.0.0.1", v.port) for v in voters}
        try:
            for v in voters:
                v.start(endpoints, seed=20 + v.node_id)
            await wait_for_async(lambda: leader_of(voters) is not None, 15, "a leader")
            leader = leader_of(voters)
            assert leader is not None and leader.driver is not None
            await asyncio.wait_for(leader.driver.append([b"x", b"y"]), 10)
            end = leader.driver.core.log.end_offset

            def caught_up() -> bool:
                d = leader.driver.describe() if leader.driver else None
                return isinstance(d, QuorumDescription) and all(
                    r.log_end_offset == end for r in d.voters
                )

            await wait_for_async(caught_up, 10, "followers caught up")
            followers = [v for v in voters if v is not leader]
            order = [followers[0], leader, followers[1]]
            bootstrap = ",".join(f"127.0.0.1:{v.port}" for v in order)
            out, err = io.StringIO(), io.StringIO()
            argv = ["--bootstrap-controller", bootstrap, "describe", "--replication"]
            code = await asyncio.to_thread(main, argv, out, err)
            assert code == 0, err.getvalue()
            assert err.getvalue() == ""
            text = out.getvalue()
            lines = text.splitlines()
            assert [h.strip() for h in lines[0].split("\t")[:7]] == list(HEADERS)
            rows = [line.split("\t") for line in lines[1:]]
            assert [(r[0].strip(), r[6].strip()) for r in rows] == [
                (str(leader.node_id), "Leader"),
                *[(str(f.node_id), "Follower") for f in sorted(followers, key=lambda v: v.node_id)],
            ]
            assert {r[2].strip() for r in rows} == {str(end)} and {r[3].strip() for r in rows} == {
                "0"
            }
            now = time.time() * 1000
            for r in rows:
                assert now - 60_000 < int(r[4]) <= now + 1 and now - 60_000 < int(r[5]) <= now + 1
            return text
        finally:
            for v in voters:
                await v.stop()

    run(go())


# --- KIP-853: add-controller / remove-controller ------------------------------------------------


def test_add_controller_needs_the_controller_config() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["--bootstrap-controller", "h:1", "add-controller"], out, err) == 1
    assert err.getvalue() == (
        "You must supply the configuration file of the controller you are adding when using "
        "add-controller.\n"
    )


def _controller_config(tmp_path: Path, **extra: str) -> Path:
    settings = {
        "process.roles": "controller",
        "node.id": "3",
        "log.dirs": str(tmp_path / "logs"),
        "listeners": "CONTROLLER://localhost:9093",
        "controller.listener.names": "CONTROLLER",
        **extra,
    }
    path = tmp_path / "controller.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def test_add_controller_dry_run_reads_the_controller(tmp_path: Path) -> None:
    write_meta_properties(
        tmp_path / "logs", MetaProperties(random_uuid(), 3, "AAAAAAAAAAAAAAAAAAAAAw")
    )
    cfg = _controller_config(tmp_path, **{"advertised.listeners": "CONTROLLER://h3:9093"})
    out, err = io.StringIO(), io.StringIO()
    argv = ["--bootstrap-controller", "h:1", "--command-config", str(cfg), "add-controller"]
    assert main([*argv, "--dry-run"], out, err) == 0, err.getvalue()
    assert out.getvalue() == (
        "DRY RUN of adding controller 3 with directory id AAAAAAAAAAAAAAAAAAAAAw and "
        "endpoints: CONTROLLER://h3:9093\n"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"node.id": "-1"}, "node.id was negative in configuration file."),
        ({"process.roles": "broker"}, "process.roles did not contain 'controller'"),
        (
            {"controller.listener.names": "OTHER"},
            "Cannot find information about controller listener name: OTHER",
        ),
    ],
)
def test_add_controller_bad_config(tmp_path: Path, extra: dict[str, str], message: str) -> None:
    write_meta_properties(tmp_path / "logs", MetaProperties(random_uuid(), 3, random_uuid()))
    cfg = _controller_config(tmp_path, **extra)
    out, err = io.StringIO(), io.StringIO()
    argv = ["--bootstrap-controller", "h:1", "--command-config", str(cfg), "add-controller"]
    assert main(argv, out, err) == 1
    assert message in err.getvalue() and "Traceback" not in err.getvalue()


def test_add_controller_unformatted(tmp_path: Path) -> None:
    cfg = _controller_config(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    argv = ["--bootstrap-controller", "h:1", "--command-config", str(cfg), "add-controller"]
    assert main(argv, out, err) == 1
    assert err.getvalue() == f"Unable to read meta.properties from {tmp_path / 'logs'}\n"


def test_remove_controller_bad_ids() -> None:
    for argv, message in [
        (["-i", "-2", "-d", "AAAAAAAAAAAAAAAAAAAAAw"], "Invalid negative --controller-id: -2\n"),
        (["-i", "2", "-d", "nope"], "Failed to parse --controller-directory-id: "),
    ]:
        out, err = io.StringIO(), io.StringIO()
        assert main(["--bootstrap-controller", "h:1", "remove-controller", *argv], out, err) == 1
        assert err.getvalue().startswith(message)


def _voter(i: int, caught_up: int | None) -> Replica:
    return Replica(i, 10, caught_up, caught_up)


def test_remove_controller_refuses_the_last_voter_or_a_majority() -> None:
    now = 1_000_000
    alone = QuorumInfo(1, 3, 10, [_voter(1, now)], [])
    with pytest.raises(CommandError, match="it is the only voter"):
        check_removal(alone, 1, now)
    # 1 leads; 2 is down: removing 3 leaves {1, 2} with only 1 caught up
    three = QuorumInfo(1, 3, 10, [_voter(1, now), _voter(2, now - 90_000), _voter(3, now)], [])
    with pytest.raises(CommandError, match="fewer than a majority"):
        check_removal(three, 3, now)
    check_removal(three, 2, now)  # removing the dead one is fine
