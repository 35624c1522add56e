"""kafka-reassign-partitions.sh without a cluster: Kafka's action and option rules with one
clear line each (exit 1), the JSON files' checks (before any connection), and the plan JSON the
tool prints."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from broker.cli.reassign_partitions import main, plan_json


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out, err)
    return rc, out.getvalue(), err.getvalue()


BS = ("--bootstrap-server", "127.0.0.1:1")  # nothing listens: every case fails before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((*BS,), "Command must include exactly one action: "
                 "--generate, --execute, --verify, --cancel, --list"),
        ((*BS, "--list", "--verify"), "Command must include exactly one action"),
        (("--list",), "Please specify either --bootstrap-server or --bootstrap-controller"),
        (("--list", "--bootstrap-controller", "127.0.0.1:1"),
         "--bootstrap-controller is not supported; use --bootstrap-server"),
        ((*BS, "--execute"), 'Missing required argument "[reassignment-json-file]"'),
        ((*BS, "--verify"), 'Missing required argument "[reassignment-json-file]"'),
        ((*BS, "--cancel"), 'Missing required argument "[reassignment-json-file]"'),
        ((*BS, "--generate", "--broker-list", "1"),
         'Missing required argument "[topics-to-move-json-file]"'),
        ((*BS, "--generate", "--topics-to-move-json-file", "t.json"),
         'Missing required argument "[broker-list]"'),
        ((*BS, "--list", "--additional"), 'Option "[additional]" can\'t be used with action "[list]"'),
        ((*BS, "--verify", "--reassignment-json-file", "p.json", "--throttle", "100"),
         'Option "[throttle]" can\'t be used with action "[verify]"'),
        ((*BS, "--execute", "--reassignment-json-file", "p.json", "--throttle", "1000"),
         "--throttle is not supported: kmirror has no replication throttles"),
        ((*BS, "--list", "--bogus"), "unrecognized arguments: --bogus"),
        (("--bootstrap-server", "nohost", "--list"), "--bootstrap-server: 'nohost' is not host:port"),
        ((*BS, "--list", "--command-config", "/nonexistent/admin.properties"),
         "--command-config: the file /nonexistent/admin.properties does not exist"),
        ((*BS, "--execute", "--reassignment-json-file", "/nonexistent/plan.json"),
         "cannot read --reassignment-json-file /nonexistent/plan.json"),
    ],
)  # fmt: skip
def test_bad_flags_one_clear_line(argv: tuple[str, ...], message: str) -> None:
    rc, out, err = _run(*argv)
    assert rc == 1 and out == ""
    first, hint = err.splitlines()
    assert first.startswith("Error: ") and message in first, first
    assert hint == "Run kafka-reassign-partitions.sh --help for the options."


def test_help_and_version() -> None:
    rc, out, _ = _run("--help")
    assert rc == 0 and "--reassignment-json-file" in out and "--topics-to-move-json-file" in out
    rc, out, _ = _run("--version")
    assert rc == 0 and out.strip()


def _plan_file(tmp_path: Path, data: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def _p(
    topic: object = "t", partition: object = 0, replicas: object = (1, 2), **kw: object
) -> dict[str, object]:
    return {
        "topic": topic,
        "partition": partition,
        "replicas": list(replicas) if isinstance(replicas, tuple) else replicas,
        **kw,
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "the JSON must be an object"),
        ({"version": 2, "partitions": [_p()]}, "Not supported version field value 2"),
        ({"version": 1}, "Partition reassignment list cannot be empty"),
        ({"partitions": [_p(replicas=())]}, "Partition replica list cannot be empty"),
        ({"partitions": [_p(), _p()]}, "Partition reassignment contains duplicate topic partitions: t-0"),
        ({"partitions": [_p(replicas=(1, 2, 1))]},
         "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1"),
        ({"partitions": [_p(topic=3)]}, 'partitions[0]: "topic" must be a string'),
        ({"partitions": [_p(partition="0")]}, 'partitions[0]: "partition" must be an integer'),
        ({"partitions": [_p(replicas=["1"])]}, 'partitions[0]: "replicas" must be a list of broker ids'),
        ({"partitions": [_p(log_dirs=["any"])]},
         "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition t-0"),
        ({"partitions": [_p(log_dirs=["/data", "any"])]}, "log directory moves are not supported"),
    ],
)  # fmt: skip
def test_bad_plans_are_refused_before_connecting(
    tmp_path: Path, data: object, message: str
) -> None:
    rc, out, err = _run(*BS, "--execute", "--reassignment-json-file", _plan_file(tmp_path, data))
    assert rc == 1 and out == ""
    assert message in err.splitlines()[0], err


@pytest.mark.parametrize(
    ("topics", "brokers", "message"),
    [
        ({"topics": [{"topic": "a"}, {"topic": "a"}]}, "1,2", "List of topics to reassign contains duplicate entries: a"),
        ({"topics": [{"name": "a"}]}, "1,2", 'topics[0] must be {"topic": <string>}'),
        ({"version": 3, "topics": []}, "1,2", "Not supported version field value 3"),
        ({"topics": [{"topic": "a"}]}, "1,x", "--broker-list: 'x' is not a broker id"),
        ({"topics": [{"topic": "a"}]}, "1,2,1", "Broker list contains duplicate entries: 1"),
    ],
)  # fmt: skip
def test_bad_generate_inputs(tmp_path: Path, topics: object, brokers: str, message: str) -> None:
    path = tmp_path / "topics.json"
    path.write_text(json.dumps(topics))
    rc, out, err = _run(
        *BS, "--generate", "--topics-to-move-json-file", str(path), "--broker-list", brokers
    )
    assert rc == 1 and out == ""
    assert message in err.splitlines()[0], err


def test_a_good_plan_gets_as_far_as_connecting(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_p(log_dirs=["any", "any"])]})
    rc, _out, err = _run(*BS, "--execute", "--reassignment-json-file", path)
    assert rc == 1 and "cannot connect to the cluster" in err


def test_plan_json_is_kafkas_compact_sorted_format() -> None:
    text = plan_json({("b", 0): [3], ("a", 1): [1, 2], ("a", 0): [2]})
    assert text == (
        '{"version":1,"partitions":['
        '{"topic":"a","partition":0,"replicas":[2],"log_dirs":["any"]},'
        '{"topic":"a","partition":1,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":0,"replicas":[3],"log_dirs":["any"]}]}'
    )
