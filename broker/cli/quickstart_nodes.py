"""The quickstart's clusters: planned on free loopback ports, formatted, started and stopped.

A cluster is one node, or three combined broker+controller nodes forming one KRaft quorum (one
cluster id, every node a voter) with Kafka's production replication settings: three replicas of
every topic and internal topic, two in sync for acks=all (as ``config/node-{1,2,3}.properties``).
"""

import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Two clusters, two ids: a mirror refuses a source whose cluster id is its own.
CLUSTER_IDS = {"source": "RjB46kGQQMy-Ec7V6fz7tQ", "destination": "bF724YU5TvumqsDMmGNubg"}

_PORTS = random.Random()
_GIVEN: set[int] = set()  # no two nodes get one port: none binds it before all are planned


@dataclass(frozen=True)
class NodeSpec:
    """One node to start: its name in the output, its directory and its ports."""

    name: str
    node_id: int
    home: Path
    port: int
    controller_port: int
    metrics_port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def config_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.home / "node.log"


@dataclass(frozen=True)
class ClusterSpec:
    """The source or the destination cluster: its nodes share one cluster id and one quorum."""

    side: str
    nodes: tuple[NodeSpec, ...]

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def replication_factor(self) -> int:
        return min(self.size, 3)

    @property
    def min_insync_replicas(self) -> int:
        # two of three, so any one node can be lost without losing an acknowledged record
        return 2 if self.replication_factor >= 3 else 1


# The quickstart's processes, in start order: (name, process).
Started = list[tuple[str, subprocess.Popen[bytes]]]


def free_port() -> int:
    """A port free now and not handed out before by this process, below the kernel's ephemeral
    range (32768+ on Linux): a port the kernel handed out (bind to 0) may go to one of our own
    client connections before the node that was given it binds it, which is likelier the more
    nodes start at once."""
    for _ in range(200):
        port = _PORTS.randrange(15_000, 32_000)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    with socket.socket() as s:  # a crowded range: let the kernel choose
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node_name(side: str, node_id: int, size: int) -> str:
    """A lone node keeps the plain side name ("destination"); a quorum's are numbered."""
    return side if size == 1 else f"{side}-{node_id}"


def plan_cluster(workdir: Path, side: str, size: int) -> ClusterSpec:
    """Names, directories and three ports a node."""
    nodes = []
    for node_id in range(1, size + 1):
        name = _node_name(side, node_id, size)
        ports = {"port": free_port(), "controller_port": free_port(), "metrics_port": free_port()}
        nodes.append(NodeSpec(name, node_id, workdir / name, **ports))
    return ClusterSpec(side, tuple(nodes))


def _replication_settings(cluster: ClusterSpec) -> list[str]:
    rf, min_isr = cluster.replication_factor, cluster.min_insync_replicas
    return [
        f"default.replication.factor={rf}",
        f"min.insync.replicas={min_isr}",
        f"offsets.topic.replication.factor={rf}",
        f"transaction.state.log.replication.factor={rf}",
        f"transaction.state.log.min.isr={min_isr}",
        f"mirror.topic.replication.factor={rf}",
    ]


def write_config(node: NodeSpec, cluster: ClusterSpec) -> Path:
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in cluster.nodes)
    lines = [
        "process.roles=broker,controller",
        f"node.id={node.node_id}",
        f"controller.quorum.voters={voters}",
        f"listeners=PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={node.home / 'logs'}",
        "num.partitions=3",
        *_replication_settings(cluster),
        "offsets.topic.num.partitions=4",
        "mirror.topic.num.partitions=4",
        "group.initial.rebalance.delay.ms=0",
        f"metrics.port={node.metrics_port}",
        "",
    ]
    node.home.mkdir(parents=True, exist_ok=True)
    node.config_path.write_text("\n".join(lines))
    return node.config_path


def _format(node: NodeSpec, cluster_id: str) -> None:
    subprocess.run(
        [
            str(ROOT / "bin" / "kafka-storage.sh"),
            "format",
            "-t",
            cluster_id,
            "-c",
            str(node.config_path),
            "--ignore-formatted",
        ],
        check=True,
        capture_output=True,
    )


def _launch(node: NodeSpec, keep: bool) -> subprocess.Popen[bytes]:
    with node.log_path.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "broker", str(node.config_path)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # the "started" line reaches the log now
            start_new_session=keep,  # kept nodes outlive a Ctrl-C sent to the terminal
        )


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_started(
    node: NodeSpec, proc: subprocess.Popen[bytes], log_from: int, timeout: float
) -> None:
    """Until the node says it started: registered and unfenced, so a topic with three replicas
    can be placed (a port that merely accepts is not enough on a quorum of three)."""
    said = f"kmirror node {node.node_id} started".encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{node.name} node exited with code {proc.returncode}")
        with node.log_path.open("rb") as log:
            log.seek(log_from)
            if said in log.read() and _accepts(node.port):
                return
        time.sleep(0.1)
    raise SystemExit(f"{node.name} node did not start within {timeout:.0f}s (see {node.log_path})")


def start_clusters(clusters: list[ClusterSpec], keep: bool, started: Started) -> None:
    """Format and launch every node of every cluster, then wait for each: a node of a quorum of
    three waits for the others before it serves. Each process joins ``started`` as soon as it
    runs, so a signal while they come up still finds it."""
    log_from: dict[str, int] = {}
    for cluster in clusters:
        for node in cluster.nodes:
            write_config(node, cluster)
            _format(node, CLUSTER_IDS[cluster.side])
            log_from[node.name] = node.log_path.stat().st_size if node.log_path.exists() else 0
            proc = _launch(node, keep)
            started.append((node.name, proc))
            print(f"{node.name} node: pid {proc.pid}, log {node.log_path}", flush=True)
    procs = dict(started)
    for cluster in clusters:
        for node in cluster.nodes:
            _wait_started(node, procs[node.name], log_from[node.name], timeout=60)
            print(
                f"{node.name} node: bootstrap {node.bootstrap}, metrics {node.metrics_url}",
                flush=True,
            )


def stop_all(started: Started, timeout: float = 30.0) -> None:
    """SIGTERM to every node at once, then wait: one by one, the last nodes of a quorum would
    wait for a majority that has already left. A node that does not exit in time is killed."""
    for _name, proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for _name, proc in started:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def print_left_running(started: Started) -> None:
    alive = [(name, proc.pid) for name, proc in started if proc.poll() is None]
    if not alive:
        return
    listed = ", ".join(f"{name} pid {pid}" for name, pid in alive)
    print(f"nodes left running: {listed}")
    print(f"stop them with: kill {' '.join(str(pid) for _name, pid in alive)}")
