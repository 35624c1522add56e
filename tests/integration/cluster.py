"""Several real node processes forming one cluster, from the shipped ``config/node-N.properties``.

The shipped files are used as they are, except what a test machine must change: every port is
replaced by a free one (the same port in every file that names it, so ``controller.quorum.voters``
still points at each node's controller listener), ``log.dirs`` goes under the test's directory,
and every node is formatted with one cluster id.
"""

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from broker.config.meta_properties import random_uuid

from .node import ROOT, Node, free_port

_PORT = re.compile(r":(\d{4,5})\b")


def _read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


class Cluster:
    def __init__(self, workdir: Path, size: int = 3, **overrides: str) -> None:
        self.cluster_id = random_uuid()
        shipped = [
            _read_properties(ROOT / "config" / f"node-{i}.properties") for i in range(1, size + 1)
        ]
        ports: dict[str, str] = {}

        def free(m: re.Match[str]) -> str:
            if m.group(1) not in ports:
                ports[m.group(1)] = str(free_port())
            return ":" + ports[m.group(1)]

        self.nodes: list[Node] = []
        for props in shipped:
            node_id = int(props["node.id"])
            node = Node(workdir / f"node{node_id}", node_id)
            settings = {
                k: _PORT.sub(free, v).replace("localhost", "127.0.0.1") for k, v in props.items()
            }
            settings["log.dirs"] = str(node.log_dir)
            metrics = settings.get("metrics.port")
            if metrics and metrics != "0":
                settings["metrics.port"] = ports.setdefault(metrics, str(free_port()))
                settings["metrics.host"] = "127.0.0.1"
            settings.update({k.replace("__", "."): v for k, v in overrides.items()})
            node.settings = settings
            node.cluster_id = self.cluster_id
            node.port = int(settings["advertised.listeners"].rsplit(":", 1)[1])
            controller = settings["controller.listener.names"].split(",")[0].strip()
            node.controller_port = next(
                int(li.rsplit(":", 1)[1])
                for li in settings["listeners"].split(",")
                if li.strip().startswith(controller + "://")
            )
            node.metrics_port = int(settings.get("metrics.port", "0"))
            self.nodes.append(node)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def known_everywhere(self, topic: str, partition: int = 0) -> bool:
        """True when every running node's metadata lists the partition: a tool bootstrapped
        with the whole cluster may ask any of them (brokers apply metadata at their own pace)."""
        return all(self._partition_on(n, topic, partition) is not None for n in self._running())

    def partition_state(
        self, topic: str, partition: int = 0
    ) -> tuple[int, list[int], list[int]] | None:
        """(leader, replicas, sorted ISR) as the first running node's metadata has it (read
        with confluent-kafka's AdminClient); None when no running node knows the partition."""
        for n in self._running():
            p = self._partition_on(n, topic, partition)
            if p is not None:
                return p.leader, list(p.replicas), sorted(p.isrs)
        return None

    def _running(self) -> list[Node]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    @staticmethod
    def _partition_on(node: Node, topic: str, partition: int) -> Any:
        """The partition's metadata as ``node`` answers it, None when unknown or unreachable."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        try:
            md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=5)
        except KafkaException:
            return None
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return None
        return t.partitions.get(partition)

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def start(self, timeout: float = 60.0) -> "Cluster":
        """Launch every node, then wait for each; if one fails, none is left running."""
        try:
            for n in self.nodes:
                n.launch()
            deadline = time.monotonic() + timeout
            for n in self.nodes:
                n.wait_started(max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to every node at once (one by one, the last ones would wait for a quorum
        that has already left; a stopped node is continued first), then wait; a node that does
        not exit in time is killed."""
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                # a node a test SIGSTOPped (and failed before resuming) must hear the SIGTERM
                n.proc.send_signal(signal.SIGCONT)
                n.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            if n.proc is None:
                continue
            try:
                n.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                n.kill()

    def kill(self) -> None:
        for n in self.nodes:
            n.kill()


def metadata_records(node: Node) -> list[dict[str, Any]]:
    """Every committed-or-not metadata record ``node`` holds, in offset order
    (kafka-dump-log.sh's metadata decoder)."""
    segments = sorted((node.log_dir / "__cluster_metadata-0").glob("*.log"))
    p = subprocess.run(
        [
            str(ROOT / "bin" / "kafka-dump-log.sh"),
            "--cluster-metadata-decoder",
            "--files",
            ",".join(map(str, segments)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    return [
        json.loads(line.split(" payload: ", 1)[1])
        for line in p.stdout.splitlines()
        if " payload: " in line
    ]
