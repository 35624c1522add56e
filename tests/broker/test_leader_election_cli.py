"""kafka-leader-election.sh without a cluster: Kafka's flag rules with one clear line each (exit
1), the JSON file's checks, the request built, and the result lines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.cli.admin import CommandError
from broker.cli.leader_election import _request, main, report


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out, err)
    return rc, out.getvalue(), err.getvalue()


BS = ("--bootstrap-server", "127.0.0.1:1")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--election-type", "PREFERRED", "--all-topic-partitions"),
         "Missing required option(s): --bootstrap-server"),
        ((*BS, "--all-topic-partitions"), "Missing required option(s): --election-type"),
        (("--all-topic-partitions",),
         "Missing required option(s): --bootstrap-server, --election-type"),
        ((*BS, "--election-type", "dirty", "--all-topic-partitions"),
         "--election-type: 'dirty' is not one of PREFERRED, UNCLEAN"),
        ((*BS, "--election-type", "PREFERRED"),
         "One and only one of the following options is required: "
         "--topic, --all-topic-partitions, --path-to-json-file"),
        ((*BS, "--election-type", "PREFERRED", "--all-topic-partitions", "--topic", "t",
          "--partition", "0"),
         "One and only one of the following options is required"),
        ((*BS, "--election-type", "PREFERRED", "--topic", "t"),
         "Missing required option(s): --partition"),
        ((*BS, "--election-type", "PREFERRED", "--all-topic-partitions", "--partition", "0"),
         "Option --partition is only allowed if --topic is used"),
        ((*BS, "--election-type", "PREFERRED", "--topic", "t", "--partition", "x"),
         "--partition: 'x' is not a partition id"),
        ((*BS, "--election-type", "PREFERRED", "--all-topic-partitions", "--bogus"),
         "unrecognized arguments: --bogus"),
        (("--bootstrap-server", "nohost", "--election-type", "PREFERRED",
          "--all-topic-partitions"),
         "--bootstrap-server: 'nohost' is not host:port"),
        ((*BS, "--election-type", "PREFERRED", "--all-topic-partitions", "--admin.config",
          "/nonexistent/admin.properties"),
         "--admin.config: the file /nonexistent/admin.properties does not exist"),
    ],
)  # fmt: skip
def test_bad_flags_one_clear_line(argv: tuple[str, ...], message: str) -> None:
    rc, out, err = _run(*argv)
    assert rc == 1 and out == ""
    first, hint = err.splitlines()
    assert first.startswith("Error: ") and message in first, err
    assert hint == "Run kafka-leader-election.sh --help for the options."


def test_help_and_no_arguments() -> None:
    rc, out, _err = _run("--help")
    assert rc == 0 and "--election-type" in out and "--path-to-json-file" in out
    rc, out, err = _run()
    assert rc == 1 and out == "" and "--election-type" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "Replica election data is empty"),
        ("{", "is not JSON"),
        ('{"topics": []}', 'Replica election data is missing "partitions" field'),
        ('{"partitions": {}}', '"partitions" must be a list'),
        ('{"partitions": [{"topic": "t"}]}', "partitions[0] must be"),
        ('{"partitions": [{"topic": "t", "partition": "0"}]}', "partitions[0] must be"),
        (
            '{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}',
            "Replica election data contains duplicate partitions: t-0",
        ),
    ],
)
def test_bad_json_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "election.json"
    path.write_text(content)
    rc, out, err = _run(*BS, "--election-type", "UNCLEAN", "--path-to-json-file", str(path))
    assert rc == 1 and out == "" and message in err.splitlines()[0], err
    rc, _out, err = _run(*BS, "--election-type", "UNCLEAN", "--path-to-json-file", "/nonexistent")
    assert rc == 1 and "cannot read --path-to-json-file /nonexistent" in err


def test_request_shapes() -> None:
    assert _request(1, None, 5000) == {
        "election_type": 1,
        "topic_partitions": None,
        "timeout": 5000,
    }
    assert _request(0, [("a", 1), ("b", 0), ("a", 0)], 5000)["topic_partitions"] == [
        {"topic": "a", "partitions": [1, 0]},
        {"topic": "b", "partitions": [0]},
    ]


def _resp(top: int, *rows: tuple[str, int, int, str | None]) -> Any:
    topics: dict[str, list[Any]] = {}
    for topic, p, code, message in rows:
        topics.setdefault(topic, []).append(
            SimpleNamespace(partition_id=p, error_code=code, error_message=message)
        )
    return SimpleNamespace(
        error_code=top,
        replica_election_results=[
            SimpleNamespace(topic=t, partition_result=rs) for t, rs in topics.items()
        ],
    )


def test_report_lines() -> None:
    out = io.StringIO()
    resp = _resp(0, ("a", 0, 0, None), ("a", 1, 84, None), ("b", 2, 0, None))
    assert report(0, resp, out) == 0
    assert out.getvalue().splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions a-0, b-2",
        "Valid replica already elected for partitions a-1",
    ]
    out = io.StringIO()
    resp = _resp(0, ("a", 0, 83, None), ("x", 0, 3, "No such topic as x"))
    with pytest.raises(CommandError, match=r"2 replica\(s\) could not be elected"):
        report(1, resp, out)
    assert out.getvalue().splitlines() == [
        "Error completing leader election (UNCLEAN) for partition: a-0: "
        "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        "Error completing leader election (UNCLEAN) for partition: x-0: "
        "UNKNOWN_TOPIC_OR_PARTITION: No such topic as x",
    ]
    out = io.StringIO()
    assert report(0, _resp(31), out) == 1
    assert out.getvalue() == "Not authorized to perform leader election\n"


def test_json_file_partitions_are_sent(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 2}]}))
    # no broker at 127.0.0.1:1: the file passed its checks and the connection is what fails
    rc, _out, err = _run(*BS, "--election-type", "PREFERRED", "--path-to-json-file", str(path))
    assert rc == 1 and "Error while executing leader election command: cannot connect" in err
