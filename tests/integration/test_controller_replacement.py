"""KIP-853 end to end: a controller whose disk was wiped is replaced while the cluster serves.

Three combined nodes find the quorum through ``controller.quorum.bootstrap.servers`` and are
formatted ``--initial-controllers`` (kraft.version 1, the voters in the bootstrap snapshot).
Node 3 dies and loses its disk; ``kafka-metadata-quorum.sh remove-controller`` takes it out of
the voters; it is formatted again ``--no-initial-controllers`` (a new directory id), starts as
an observer, and ``add-controller`` makes it a voter again. Throughout, a producer (confluent-
kafka, acks=all) keeps getting acks and topic creations keep committing; ``describe --status``
shows the new voter set with the new directory id.
"""

import itertools
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.meta_properties import random_uuid, read_meta_properties

from .cluster import Cluster
from .node import ROOT

QUORUM = str(ROOT / "bin" / "kafka-metadata-quorum.sh")
MAX_ACK_GAP_S = 20.0  # an election (fetch timeout + vote) and the producer's retry, with slack


def quorum_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([QUORUM, *args], capture_output=True, text=True, timeout=90)


def voters_of(status: str) -> list[dict[str, object]]:
    line = next(x for x in status.splitlines() if x.startswith("CurrentVoters:"))
    return list(json.loads(line.split(":", 1)[1].strip()))


class Load:
    """A producer and a stream of topic creations, each in its own thread, counting successes
    and the longest gap between two of them."""

    def __init__(self, bootstrap: str, admin_bootstrap: str) -> None:
        self.bootstrap = bootstrap
        # nodes that stay up: librdkafka's admin sends to the node a Metadata answer names as
        # controller (the answering node itself, as Kafka's brokers name one of them) and
        # waits for it when it dies, however well the quorum is doing
        self.admin_bootstrap = admin_bootstrap
        self.stop = threading.Event()
        self.acks: list[float] = []
        self.created: list[float] = []
        self.errors: list[str] = []
        self.threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._create_topics, daemon=True),
        ]

    def start(self) -> "Load":
        for t in self.threads:
            t.start()
        return self

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 60_000,
                "linger.ms": 5,
            }
        )

        def done(err: object, _msg: object) -> None:
            if err is None:
                self.acks.append(time.monotonic())
            else:
                self.errors.append(f"produce: {err}")

        n = 0
        while not self.stop.is_set():
            p.produce("replaced", f"v{n}".encode(), callback=done)
            n += 1
            p.poll(0.05)
        p.flush(30)

    def _create_topics(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.admin_bootstrap})
        n = 0
        while not self.stop.is_set():
            n += 1
            fut = admin.create_topics(
                [NewTopic(f"meta-{n}", 1, 1)], operation_timeout=20, request_timeout=30
            )[f"meta-{n}"]
            try:
                fut.result(timeout=40)
                self.created.append(time.monotonic())
            except Exception as e:  # retried with the next name; counted as a gap
                self.errors.append(f"create meta-{n}: {e}")
            self.stop.wait(0.5)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    @staticmethod
    def max_gap(times: list[float], start: float, end: float) -> float:
        points = [start, *[t for t in times if start <= t <= end], end]
        return max(b - a for a, b in itertools.pairwise(points))


@pytest.fixture
def dynamic_cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path)
    controllers = {n.node_id: f"127.0.0.1:{n.controller_port}" for n in cluster.nodes}
    dirs = {n.node_id: random_uuid() for n in cluster.nodes}
    initial = ",".join(f"{i}@{controllers[i]}:{dirs[i]}" for i in sorted(controllers))
    for n in cluster.nodes:
        del n.settings["controller.quorum.voters"]
        n.settings["controller.quorum.bootstrap.servers"] = ",".join(controllers.values())
        n.format("--initial-controllers", initial)
    try:
        yield cluster.start(timeout=90)
    finally:
        cluster.stop()


def wait_status(controllers: str, predicate: object, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        res = quorum_tool("--bootstrap-controller", controllers, "describe", "--status")
        last = res.stdout + res.stderr
        if res.returncode == 0 and predicate(res.stdout):  # type: ignore[operator]
            return res.stdout
        time.sleep(1)
    raise AssertionError(f"quorum status never as expected:\n{last}")


def test_replace_a_controller_whose_disk_was_wiped(dynamic_cluster: Cluster) -> None:
    cluster = dynamic_cluster
    n3 = cluster.node(3)
    controllers = ",".join(f"127.0.0.1:{n.controller_port}" for n in cluster.nodes)
    alive = ",".join(f"127.0.0.1:{n.controller_port}" for n in cluster.nodes[:2])
    old_dir = read_meta_properties(n3.log_dir).directory_id
    assert old_dir is not None

    status = wait_status(controllers, lambda s: len(voters_of(s)) == 3)
    assert [v["id"] for v in voters_of(status)] == [1, 2, 3]

    load = Load(cluster.bootstrap, ",".join(n.bootstrap for n in cluster.nodes[:2])).start()
    t0 = time.monotonic()
    try:
        deadline = time.monotonic() + 60
        while len(load.acks) < 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert load.acks, load.errors[-5:]

        # node 3 dies with its disk
        n3.kill()
        shutil.rmtree(n3.log_dir)

        res = quorum_tool(
            "--bootstrap-controller",
            alive,
            "remove-controller",
            "--controller-id",
            "3",
            "--controller-directory-id",
            old_dir,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        assert res.stdout == f"Removed  KRaft controller 3 with directory id {old_dir}\n"
        status = wait_status(alive, lambda s: [v["id"] for v in voters_of(s)] == [1, 2])

        # a new disk: formatted without the initial controllers, a new directory id
        n3.format("--no-initial-controllers")
        new_dir = read_meta_properties(n3.log_dir).directory_id
        assert new_dir is not None and new_dir != old_dir
        n3.start(timeout=90)

        res = quorum_tool(
            "--bootstrap-controller", alive, "--command-config", str(n3.config_path),
            "add-controller",
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        assert re.fullmatch(
            rf"Added controller 3 with directory id {re.escape(new_dir)} and endpoints: "
            rf"CONTROLLER://127\.0\.0\.1:{n3.controller_port}\n",
            res.stdout,
        ), res.stdout
        status = wait_status(controllers, lambda s: [v["id"] for v in voters_of(s)] == [1, 2, 3])
        by_id = {v["id"]: v for v in voters_of(status)}
        assert by_id[3]["directoryId"] == new_dir
        assert by_id[3]["endpoints"] == [f"CONTROLLER://127.0.0.1:{n3.controller_port}"]

        # it told the active controller where it listens (ControllerRegistration)
        deadline = time.monotonic() + 30
        while b"controller 3 registered with the active controller" not in n3.output.read_bytes():
            assert time.monotonic() < deadline, n3.log_tail()
            time.sleep(0.5)

        acks_before = len(load.acks)
        created_before = len(load.created)
        time.sleep(3)
    finally:
        load.finish()
    t1 = time.monotonic()

    ack_gap = Load.max_gap(load.acks, t0 + 5, t1)
    create_gap = Load.max_gap(load.created, t0 + 5, t1)
    print(
        f"{len(load.acks)} acks, {len(load.created)} topics created in {t1 - t0:.1f}s; "
        f"longest gap between acks {ack_gap:.1f}s, between creations {create_gap:.1f}s"
    )
    assert len(load.acks) > acks_before and len(load.created) > created_before, load.errors[-5:]
    assert ack_gap < MAX_ACK_GAP_S, load.errors[-5:]
    assert create_gap < 2 * MAX_ACK_GAP_S, load.errors[-5:]

    # describe --replication shows the new voter's directory id
    res = quorum_tool("--bootstrap-controller", controllers, "describe", "--replication")
    assert res.returncode == 0, res.stderr
    rows = {line.split("\t")[0].strip(): line for line in res.stdout.splitlines()[1:]}
    assert new_dir in rows["3"], res.stdout
    assert rows["3"].rstrip("\t").endswith(("Follower", "Leader")), res.stdout
