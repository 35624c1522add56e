"""kafka-mirrors.sh against real nodes: a kmirror source and a kmirror destination.

Drives create/add/list/describe/pause/resume/remove/delete/alter, checks outputs and every error
code of the admin RPCs, that mirror topics carry the source's topic ids and partition counts, and
that a stock producer gets READ_ONLY_TOPIC. Data flow (fetchers) is not asserted here.
"""

import io
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cli import mirrors as mirrors_cli

from .node import ROOT, Node

TOOL = str(ROOT / "bin" / "kafka-mirrors.sh")


class Clusters:
    def __init__(self, src: Node, dst: Node, props: Path) -> None:
        self.src, self.dst, self.props = src, dst, props

    def run(self, *args: str, shell: bool = False) -> subprocess.CompletedProcess[str]:
        """The tool with --bootstrap-server; in this process unless ``shell`` (the wrapper costs
        a Python start-up per call, so only a few calls go through bin/kafka-mirrors.sh)."""
        argv = ["--bootstrap-server", self.dst.bootstrap, *args]
        if shell:
            return subprocess.run([TOOL, *argv], capture_output=True, text=True, timeout=60)
        out, err = io.StringIO(), io.StringIO()
        rc = mirrors_cli.main(argv, out, err)
        return subprocess.CompletedProcess(argv, rc, out.getvalue(), err.getvalue())

    def ok(self, *args: str, shell: bool = False) -> str:
        p = self.run(*args, shell=shell)
        assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
        return p.stdout

    def fails(self, *args: str, code: str, shell: bool = False) -> str:
        p = self.run(*args, shell=shell)
        assert p.returncode == 1, f"{args}: expected a failure, got\n{p.stdout}\n{p.stderr}"
        assert code in p.stderr, f"{args}: {code} not in stderr:\n{p.stderr}"
        return p.stderr


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    base = tmp_path_factory.mktemp("mirror-admin")
    src = Node(base / "src")
    dst = Node(base / "dst")
    src.start()
    try:
        dst.start()
    except Exception:
        src.kill()
        raise
    try:
        admin = AdminClient({"bootstrap.servers": src.bootstrap})
        futures = admin.create_topics(
            [
                NewTopic("orders-a", 3, 1, config={"retention.ms": "123456"}),
                NewTopic("orders-b", 1, 1),
                NewTopic("solo", 2, 1),
                NewTopic("rf-topic", 2, 1),
            ]
        )
        for f in futures.values():
            f.result(15)
        props = base / "mirror.properties"
        props.write_text(f"bootstrap.servers={src.bootstrap}\n")
        yield Clusters(src, dst, props)
    finally:
        dst.kill()
        src.kill()


def _topic_ids(bootstrap: str, names: list[str]) -> dict[str, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.describe_topics(TopicCollection(names), request_timeout=15)
    out = {}
    for name, f in fs.items():
        d = f.result(15)
        out[name] = (str(d.topic_id), len(d.partitions))
    return out


def test_usage_errors(tmp_path: Path) -> None:
    def bad(*args: str, expect: str, bootstrap: bool = True, shell: bool = False) -> None:
        argv = [*(["--bootstrap-server", "127.0.0.1:1"] if bootstrap else []), *args]
        if shell:
            p = subprocess.run([TOOL, *argv], capture_output=True, text=True, timeout=30)
            rc, stderr = p.returncode, p.stderr
        else:
            err = io.StringIO()
            rc = mirrors_cli.main(argv, io.StringIO(), err)
            stderr = err.getvalue()
        assert rc == 1, f"{args}: rc {rc}\n{stderr}"
        assert expect in stderr, f"{args}: {expect!r} not in {stderr!r}"

    helped = subprocess.run([TOOL, "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0
    for flag in (
        "--add",
        "--alter",
        "--bootstrap-server",
        "--command-config",
        "--create",
        "--delete",
        "--describe",
        "--help",
        "--list",
        "--mirror ",
        "--mirror-config",
        "--pause",
        "--remove",
        "--replication-factor",
        "--resume",
        "--topic",
        "--version",
    ):
        assert flag in helped.stdout, flag
    version = subprocess.run([TOOL, "--version"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.strip()
    bad("--list", expect="bootstrap-server", bootstrap=False, shell=True)
    bad(expect="exactly one action", bootstrap=True)
    bad("--list", "--create", expect="exactly one action")
    bad("--list", "--frobnicate", expect="unrecognized arguments: --frobnicate")
    bad("--create", "--mirror", "m", expect="--mirror-config is required")
    bad(
        "--create",
        "--mirror",
        "m",
        "--mirror-config",
        str(tmp_path / "nope.properties"),
        expect="cannot read the --mirror-config file",
    )
    bad("--list", "--command-config", str(tmp_path / "nope"), expect="--command-config")
    bad("--add", "--mirror", "m", expect="--topic is required")
    bad("--list", "--topic", "x", expect="--topic is not valid with --list")
    bad(
        "--add",
        "--mirror",
        "m",
        "--topic",
        "x",
        "--replication-factor",
        "zero",
        expect="--replication-factor",
    )
    bad("--pause", "--mirror", "m", "--topic", "(", expect="not a valid regular expression")
    bad("--list", expect="cannot connect")  # nothing listens on port 1


def test_mirror_lifecycle(clusters: Clusters) -> None:
    c = clusters
    assert c.ok("--list", shell=True).strip() == "No mirrors found"
    out = c.ok("--create", "--mirror", "m1", "--mirror-config", str(c.props), shell=True)
    assert out.strip() == "Created mirror m1"
    c.fails(
        "--create", "--mirror", "m1", "--mirror-config", str(c.props), code="MIRROR_ALREADY_EXISTS"
    )
    c.fails(
        "--create",
        "--mirror",
        "m1.paused",
        "--mirror-config",
        str(c.props),
        code="INVALID_MIRROR_NAME",
    )
    c.fails(
        "--create",
        "--mirror",
        "bad/name",
        "--mirror-config",
        str(c.props),
        code="INVALID_MIRROR_NAME",
    )
    no_bootstrap = c.props.with_name("empty.properties")
    no_bootstrap.write_text("client.id=x\n")
    c.fails(
        "--create", "--mirror", "m2", "--mirror-config", str(no_bootstrap), code="INVALID_CONFIG"
    )
    unknown_key = c.props.with_name("unknown.properties")
    unknown_key.write_text(c.props.read_text() + "no.such.key=1\n")
    c.fails(
        "--create", "--mirror", "m2", "--mirror-config", str(unknown_key), code="INVALID_CONFIG"
    )

    out = c.ok("--add", "--topic", "orders-.*", "--mirror", "m1")
    assert out.strip() == "Added 2 topic(s) to mirror m1: [orders-a, orders-b]"
    out = c.ok("--add", "--topic", "solo", "--mirror", "m1")
    assert out.strip() == "Added 1 topic(s) to mirror m1: [solo]"
    names = ["orders-a", "orders-b", "solo"]
    assert _topic_ids(c.dst.bootstrap, names) == _topic_ids(c.src.bootstrap, names)
    assert _topic_ids(c.dst.bootstrap, ["orders-a"])["orders-a"][1] == 3
    c.fails("--add", "--topic", "solo", "--mirror", "m1", code="TOPIC_ALREADY_IN_MIRROR")
    c.fails("--add", "--topic", "solo", "--mirror", "ghost", code="UNKNOWN_MIRROR")
    # a pattern matching nothing yet is kept for topics the source creates later
    out = c.ok("--add", "--topic", "nowhere-.*", "--mirror", "m1")
    assert out.startswith("No topics match 'nowhere-.*' yet; mirror m1 keeps the pattern"), out

    # --replication-factor: the tool creates the topic itself with the source's id
    out = c.ok(
        "--add",
        "--topic",
        "rf-topic",
        "--mirror",
        "m1",
        "--replication-factor",
        "1",
        "--mirror-config",
        str(c.props),
    )
    assert out.strip() == "Added 1 topic(s) to mirror m1: [rf-topic]"
    assert _topic_ids(c.dst.bootstrap, ["rf-topic"]) == _topic_ids(c.src.bootstrap, ["rf-topic"])

    lines = c.ok("--list").splitlines()
    assert lines[0].split() == ["MIRROR", "TOPICS", "CLUSTER-ID", "BOOTSTRAP-SERVER"]
    row = lines[1].split()
    assert row[0] == "m1" and row[1] == "4" and row[3] == c.src.bootstrap

    lines = c.ok("--describe", "--mirror", "m1").splitlines()
    assert lines[0].split() == [
        "MIRROR",
        "TOPIC",
        "PARTITION",
        "SOURCE-OFFSET",
        "DESTINATION-OFFSET",
        "LAG",
        "STATE",
        "SOURCE-AGE",
    ]
    described = {(r.split()[1], int(r.split()[2])) for r in lines[1:]}
    assert described == {
        ("orders-a", 0),
        ("orders-a", 1),
        ("orders-a", 2),
        ("orders-b", 0),
        ("rf-topic", 0),
        ("rf-topic", 1),
        ("solo", 0),
        ("solo", 1),
    }
    c.fails("--describe", "--mirror", "ghost", code="UNKNOWN_MIRROR")

    # read-only while mirrored: a stock producer gets READ_ONLY_TOPIC (134)
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": c.dst.bootstrap, "retries": 0, "message.timeout.ms": 10000})
    p.produce("orders-b", b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1 and errors[0] is not None and errors[0].code() == 134, errors

    out = c.ok("--pause", "--topic", "solo", "--mirror", "m1")
    assert out.strip() == "Paused mirroring for 1 topic(s) in mirror m1: [solo]"
    c.fails("--pause", "--topic", "solo", "--mirror", "m1", code="MIRROR_TOPIC_ALREADY_PAUSED")
    out = c.ok("--resume", "--topic", "solo", "--mirror", "m1")
    assert out.strip() == "Resumed mirroring for 1 topic(s) in mirror m1: [solo]"
    c.fails("--resume", "--topic", "solo", "--mirror", "m1", code="MIRROR_TOPIC_NOT_PAUSED")

    admin = AdminClient({"bootstrap.servers": c.dst.bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(15)
    c.fails("--remove", "--topic", "plain", "--mirror", "m1", code="TOPIC_NOT_IN_MIRROR")
    c.fails("--pause", "--topic", "plain", "--mirror", "m1", code="TOPIC_NOT_IN_MIRROR")

    c.fails("--delete", "--mirror", "m1", code="MIRROR_NOT_EMPTY")
    c.fails("--delete", "--mirror", "ghost", code="UNKNOWN_MIRROR")

    # alter a mirror's configuration (any change makes the fetchers reconnect)
    alt = c.props.with_name("alter.properties")
    alt.write_text(f"bootstrap.servers={c.src.bootstrap},127.0.0.1:1\nclient.id=mirror-m1\n")
    out = c.ok("--alter", "--mirror", "m1", "--mirror-config", str(alt))
    assert out.strip() == "Completed updating config for mirror m1."
    assert f"{c.src.bootstrap},127.0.0.1:1" in c.ok("--list")
    c.fails("--alter", "--mirror", "ghost", "--mirror-config", str(alt), code="UNKNOWN_MIRROR")
    c.fails("--alter", "--mirror", "m1", "--mirror-config", str(unknown_key), code="INVALID_CONFIG")

    out = c.ok("--remove", "--topic", "orders-.*", "--mirror", "m1")
    assert out.strip() == "Removed 2 topic(s) from mirror m1: [orders-a, orders-b]"
    # Until every partition is STOPPED the topic is being removed; the mirror manager may have
    # finished already (then the topic has left the mirror).
    p2 = c.run("--pause", "--topic", "orders-a", "--mirror", "m1")
    assert p2.returncode == 1
    assert "MIRROR_TOPIC_BEING_REMOVED" in p2.stderr or "TOPIC_NOT_IN_MIRROR" in p2.stderr

    # an empty mirror can be deleted, and its name reused
    c.ok("--create", "--mirror", "spare", "--mirror-config", str(c.props))
    assert c.ok("--delete", "--mirror", "spare").strip() == "Deleted mirror spare"
    assert "spare" not in c.ok("--list")


def test_mirror_name_cannot_be_set_by_clients(clusters: Clusters) -> None:
    admin = AdminClient({"bootstrap.servers": clusters.dst.bootstrap})
    f = admin.create_topics([NewTopic("sneaky", 1, 1, config={"mirror.name": "m1"})])["sneaky"]
    with pytest.raises(Exception) as info:
        f.result(15)
    assert "mirror.name" in str(info.value)
