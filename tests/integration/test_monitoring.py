"""The shipped monitoring files against real nodes.

- A real Prometheus (Debian's ``prometheus`` binary, on a free loopback port with its own data
  dir, started and killed by PID here) runs the shipped ``config/prometheus.yml`` and rules
  against a three-node cluster: the config is derived from the shipped file (targets pointed at
  the test's metrics ports, 1 s scrape and evaluation intervals, every alert's ``for:``
  shortened); a node killed with kill -9 makes KmirrorUnderReplicatedPartitions fire, as
  ``/api/v1/alerts`` reports.
- Every metric name the rules and the Grafana dashboard query is one a node exports: scraped
  from a node with a mirror, a consumer group and a transaction, plus the few names listed in
  ``CONDITIONAL`` with why they are not on that node's endpoint.
"""

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from ..prometheus_files import (
    dashboard_queries,
    dashboards,
    metric_names,
    recorded_names,
    require_prometheus,
    rules,
)
from .clients import create_topic, wait_for
from .cluster import Cluster
from .mirror_helpers import create_mirror, mirror_tool, running, scrape, total, write_mirror_config
from .node import ROOT, Node, free_port

SHORT_FOR = "2s"
URP = "KmirrorUnderReplicatedPartitions"


# -- a Prometheus of the test's own ------------------------------------------------------------


def derive_config(workdir: Path, metrics_ports: dict[str, int]) -> Path:
    """The shipped config/prometheus.yml, and the rule files it names, copied into ``workdir``
    (its rule_files are relative to the config file, so the same paths resolve there): every
    target ``host:port`` becomes ``127.0.0.1:<metrics_ports[host]>``, scrapes and evaluations
    run every second, and every alert's ``for:`` is ``SHORT_FOR``."""
    shipped = ROOT / "config/prometheus.yml"
    doc = yaml.safe_load(shipped.read_text())
    doc["global"].update(scrape_interval="1s", evaluation_interval="1s")
    for job in doc["scrape_configs"]:
        for sc in job["static_configs"]:
            hosts = [t.rsplit(":", 1)[0] for t in sc["targets"]]
            assert set(hosts) <= set(metrics_ports), f"targets {hosts}, nodes {metrics_ports}"
            sc["targets"] = [f"127.0.0.1:{metrics_ports[h]}" for h in hosts]
    copied = 0
    for pattern in doc.get("rule_files", []):
        for path in sorted(shipped.parent.glob(pattern)):
            rules_doc = yaml.safe_load(path.read_text())
            for group in rules_doc["groups"]:
                for rule in group["rules"]:
                    if "alert" in rule and "for" in rule:
                        rule["for"] = SHORT_FOR
            target = workdir / path.relative_to(shipped.parent)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(yaml.safe_dump(rules_doc, sort_keys=False))
            copied += 1
    assert copied, f"config/prometheus.yml's rule_files {doc.get('rule_files')} match no file"
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    return config


class Prometheus:
    """``prometheus`` on 127.0.0.1:<free port> with its data under ``workdir``."""

    def __init__(self, binary: str, config: Path, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.output = workdir / "prometheus.out"
        with self.output.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                cwd=workdir,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query?query=" + urllib.request.quote(promql))
        return data["result"]  # type: ignore[no-any-return]

    def value(self, promql: str) -> float | None:
        """The value of a query that gives one sample; None when it gives none."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def ready(self) -> bool:
        assert self.proc.poll() is None, f"prometheus exited:\n{self.log_tail()}"
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def alerts(self) -> list[dict[str, Any]]:
        return self.get("/api/v1/alerts")["alerts"]  # type: ignore[no-any-return]

    def firing(self, name: str) -> list[dict[str, Any]]:
        return [
            a for a in self.alerts() if a["labels"]["alertname"] == name and a["state"] == "firing"
        ]

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.output.read_text(errors="replace").splitlines()[-n:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # our own child, by PID
            self.proc.wait(10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    # a killed broker is fenced (and leaves every ISR) 2 s after its last heartbeat
    c = Cluster(
        tmp_path, 3, broker__session__timeout__ms="2000", broker__heartbeat__interval__ms="400"
    )
    c.start()
    yield c
    c.kill()


def test_a_killed_node_fires_the_under_replicated_alert(tmp_path: Path, cluster: Cluster) -> None:
    _promtool, binary = require_prometheus()
    began = time.monotonic()
    workdir = tmp_path / "prometheus"
    workdir.mkdir()
    shipped_hosts = [
        t.rsplit(":", 1)[0]
        for job in yaml.safe_load((ROOT / "config/prometheus.yml").read_text())["scrape_configs"]
        for sc in job["static_configs"]
        for t in sc["targets"]
    ]
    # the shipped targets are kmirror-<node id>: each is pointed at that node's metrics port
    ports = {h: cluster.node(int(re.sub(r"\D", "", h))).metrics_port for h in shipped_hosts}
    prom = Prometheus(binary, derive_config(workdir, ports), workdir)
    try:
        wait_for(prom.ready, 20, "prometheus ready", step=0.2, detail=prom.log_tail)
        wait_for(
            lambda: len(prom.query('up{job="kmirror"} == 1')) == 3,
            20,
            "all three nodes scraped",
            step=0.5,
            detail=lambda: prom.get("/api/v1/targets"),
        )
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("watched", 3, 3)])["watched"].result(20)
        # every node hosts the 3 partitions, all in sync: the alert is quiet before the kill
        wait_for(
            lambda: (
                prom.value('count(kafka_log_log_size{topic="watched"})') == 9
                and prom.value("sum(kafka_server_replicamanager_underreplicatedpartitions)") == 0
            ),
            20,
            "three replicas of each partition, none under-replicated",
            step=0.5,
        )
        assert prom.firing(URP) == []
        controller = prom.query("kafka_controller_kafkacontroller_activecontrollercount == 1")
        leader_instance = controller[0]["metric"]["instance"] if controller else ""
        victim = next(n for n in cluster.nodes if str(n.metrics_port) not in leader_instance)
        killed_at = time.monotonic()
        victim.kill()  # kill -9 of our own child, by PID

        wait_for(
            lambda: bool(prom.firing(URP)),
            40,
            f"{URP} firing",
            step=0.5,
            detail=lambda: json.dumps(prom.alerts(), indent=1)[-3000:],
        )
        took = time.monotonic() - killed_at
        (alert,) = prom.firing(URP)
        assert alert["labels"]["severity"] == "warning" and alert["labels"]["job"] == "kmirror"
        assert "under-replicated partition" in alert["annotations"]["summary"]
        assert (
            "docs/operations.md#kmirrorunderreplicatedpartitions"
            in (alert["annotations"]["description"])
        )
        # the survivors' metadata images fence it (the killed node's own series went stale)
        wait_for(
            lambda: (
                prom.value("min(kafka_controller_kafkacontroller_fencedbrokercount)") == 1
                and prom.value("max(kafka_controller_kafkacontroller_activebrokercount)") == 2
                and prom.value("max(kafka_controller_kafkacontroller_offlinepartitionscount)") == 0
            ),
            10,
            "one broker fenced, two active, no partition offline, on every survivor",
            step=0.5,
        )
        # the dead node's scrapes fail too, and only its
        wait_for(
            lambda: (
                [a["labels"]["instance"] for a in prom.firing("KmirrorNodeDown")]
                == [f"127.0.0.1:{victim.metrics_port}"]
            ),
            10,
            "KmirrorNodeDown for the killed node only",
            step=0.5,
        )
        print(
            f"{URP} firing {took:.1f}s after kill -9 (for: {SHORT_FOR}); "
            f"whole test {time.monotonic() - began:.1f}s"
        )
    finally:
        prom.kill()
    assert prom.proc.returncode is not None


# -- every metric name the rules and the dashboard use is exported ---------------------------------

# Names the node below does not export, each with why. Other series appear only once something
# happened, and the fixture makes it happen so that they are checked for real: a mirror's
# per-partition lag and committed lag (after its first fetch), per-fetcher counters (after the
# fetcher's first connection), the last metadata refresh's timestamp (after the first refresh),
# bytes in (after a produce), request time buckets (after a request), the controller gauge
# activecontrollercount (on controllers; the node is one).
CONDITIONAL: dict[str, str] = {
    "up": "added by Prometheus to every scrape target, not served by a node",
    "kmirror_mirror_sync_degraded": "only on a source leading a mirror.sync.enable partition "
    "(tests/integration/test_mirror_sync.py scrapes it)",
}


@pytest.fixture(scope="module")
def busy_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node with a mirror of a source topic, a consumer group that committed, and a
    committed transaction."""
    base = tmp_path_factory.mktemp("monitoring-names")
    src = Node(base / "src")
    dst = Node(
        base / "dst",
        mirror__metadata__refresh__interval__ms="500",
        transaction__state__log__replication__factor="1",
        transaction__state__log__num__partitions="2",
    )
    with running(src, dst):
        create_topic(src.bootstrap, "mirrored")
        p = Producer({"bootstrap.servers": src.bootstrap})
        for i in range(20):
            p.produce("mirrored", b"v%d" % i)
        assert p.flush(20) == 0
        create_mirror(dst, "dr", write_mirror_config(base / "mirror.properties", src.bootstrap))
        mirror_tool(dst, "--add", "--topic", "mirrored", "--mirror", "dr")
        create_topic(dst.bootstrap, "local")
        tx = Producer({"bootstrap.servers": dst.bootstrap, "transactional.id": "names-tx"})
        tx.init_transactions(20)
        tx.begin_transaction()
        for i in range(10):
            tx.produce("local", b"t%d" % i)
        tx.commit_transaction(20)
        c = Consumer(
            {
                "bootstrap.servers": dst.bootstrap,
                "group.id": "names-group",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            c.subscribe(["local"])
            got = 0
            deadline = time.monotonic() + 30
            while got < 10 and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got += 1
            assert got == 10
            c.commit(asynchronous=False)
        finally:
            c.close()
        wait_for(
            lambda: (
                total(s := scrape(dst), "kafka_server_mirror_partitions", state="MIRRORING") == 1
                and "kafka_server_mirror_committed_lag" in s
                and "kafka_server_mirror_metadata_last_refresh_timestamp_seconds" in s
            ),
            30,
            "the mirror's partition MIRRORING, fetched and refreshed",
        )
        yield dst


def exported_names(node: Node) -> set[str]:
    url = f"http://127.0.0.1:{node.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_rules_and_dashboard_name_only_exported_metrics(busy_node: Node) -> None:
    exported = exported_names(busy_node)
    assert "kafka_server_mirror_consumer_lag" in exported  # the scrape is of a busy node
    recorded = recorded_names()
    used: dict[str, set[str]] = {}
    for r in rules():
        for name in metric_names(r["expr"]):
            used.setdefault(name, set()).add(r.get("alert") or r["record"])
    for file, dash in dashboards().items():
        for q in dashboard_queries(dash):
            for name in metric_names(q):
                used.setdefault(name, set()).add(file)
    assert len(used) > 40, sorted(used)
    unknown = {
        name: sorted(where)
        for name, where in used.items()
        if name not in exported and name not in recorded and name not in CONDITIONAL
    }
    assert unknown == {}, "metric names no node exports"
    unused = set(CONDITIONAL) - set(used)
    assert unused == set(), "CONDITIONAL lists names nothing uses"
    exported_anyway = {n for n in CONDITIONAL if n in exported}
    assert exported_anyway == set(), "CONDITIONAL lists names the node exports"
