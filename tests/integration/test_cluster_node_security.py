"""Three nodes that speak TLS and SASL to each other (issue 26, node-to-node links).

Each node has a SASL_SSL/SCRAM-SHA-512 client listener, and its inter-broker and controller
listeners are either (a) SASL_SSL with SCRAM-SHA-512, the nodes' own credentials written at
format time (``kafka-storage.sh format --add-scram``), or (b) SSL with
``ssl.client.auth=required`` (mutual TLS: each node presents its keystore certificate).
StandardAuthorizer, ``allow.everyone.if.no.acl.found=false`` and ``super.users`` holding only
the admin and the nodes' own principal. The cluster forms, confluent-kafka (SCRAM over
SASL_SSL) produces acks=all to an RF=3 topic and reads it back, and a node killed with -9 and
restarted rejoins over TLS: its replica catches up and the ISR is three again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.certs import Pki, make_pki
from tests.waits import wait_for, wait_value

from .cluster import Cluster
from .node import free_port

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
NODE_USER, NODE_PW = "kafka", "kafka-secret"
ADMIN_PW = "admin-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _jaas(user: str, pw: str) -> str:
    return f'{SCRAM_MODULE} required username="{user}" password="{pw}";'


def secure_cluster(workdir: Path, pki: Pki, links: str) -> Cluster:
    """Three nodes from the shipped configs, re-listened: CLIENT (SASL_SSL), INTERNAL and
    CONTROLLER as ``links`` says (``scram`` or ``mtls``)."""
    c = Cluster(workdir)
    node_principal = (
        f"User:{NODE_USER}" if links == "scram" else "User:CN=localhost,O=kmirror tests,C=US"
    )
    link_protocol = "SASL_SSL" if links == "scram" else "SSL"
    for n in c.nodes:
        internal = free_port()
        s = n.settings
        s["listeners"] = (
            f"CLIENT://127.0.0.1:{n.port},INTERNAL://127.0.0.1:{internal},"
            f"CONTROLLER://127.0.0.1:{n.controller_port}"
        )
        s["advertised.listeners"] = f"CLIENT://127.0.0.1:{n.port},INTERNAL://127.0.0.1:{internal}"
        s["inter.broker.listener.name"] = "INTERNAL"
        s["listener.security.protocol.map"] = (
            f"CLIENT:SASL_SSL,INTERNAL:{link_protocol},CONTROLLER:{link_protocol}"
        )
        s.update(
            {
                "ssl.keystore.location": str(pki.server_keystore),
                "ssl.keystore.type": "PEM",
                "ssl.truststore.location": str(pki.ca),
                "ssl.truststore.type": "PEM",
                "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "authorizer.class.name": (
                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
                ),
                "allow.everyone.if.no.acl.found": "false",
                "super.users": f"User:admin;{node_principal}",
            }
        )
        if links == "scram":
            s["sasl.mechanism.inter.broker.protocol"] = "SCRAM-SHA-512"
            s["sasl.mechanism.controller.protocol"] = "SCRAM-SHA-512"
            for li in ("internal", "controller"):
                s[f"listener.name.{li}.sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
                s[f"listener.name.{li}.scram-sha-512.sasl.jaas.config"] = _jaas(NODE_USER, NODE_PW)
        else:
            s["listener.name.internal.ssl.client.auth"] = "required"
            s["listener.name.controller.ssl.client.auth"] = "required"
        n.format(
            "--add-scram",
            f"SCRAM-SHA-512=[name={NODE_USER},password={NODE_PW}]",
            "--add-scram",
            f"SCRAM-SHA-512=[name=admin,password={ADMIN_PW},iterations=8192]",
        )
    return c


def client_conf(c: Cluster, pki: Pki, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": c.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": ADMIN_PW,
        "ssl.ca.location": str(pki.ca),
        **extra,
    }


def isr(conf: dict[str, Any], topic: str) -> list[int] | None:
    try:
        md = AdminClient(conf).list_topics(topic, timeout=5)
    except KafkaException:
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    return sorted(t.partitions[0].isrs)


def produce(conf: dict[str, Any], topic: str, values: list[bytes]) -> None:
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    failed: list[str] = []
    for v in values:
        p.produce(
            topic, v, partition=0, on_delivery=lambda e, _m: failed.append(str(e)) if e else None
        )
    assert p.flush(30) == 0, "records left unsent"
    assert not failed, failed


def consume(conf: dict[str, Any], topic: str, n: int) -> list[bytes]:
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(bytes(m.value() or b""))
    finally:
        c.close()
    return out


def exercise(c: Cluster, pki: Pki) -> None:
    conf = client_conf(c, pki)
    a = AdminClient(conf)
    a.create_topics([NewTopic("secure", 1, 3)], operation_timeout=15)["secure"].result(20)
    wait_for(lambda: isr(conf, "secure") == [1, 2, 3], 20, "ISR 1,2,3 for secure-0")
    first = [f"v{i}".encode() for i in range(50)]
    produce(conf, "secure", first)
    assert consume(conf, "secure", 50) == first

    # kill -9 a node that is not the partition's leader, write without it, bring it back
    md = a.list_topics("secure", timeout=10)
    leader = md.topics["secure"].partitions[0].leader
    victim = c.node(next(i for i in (1, 2, 3) if i != leader))
    victim.kill()
    wait_for(
        lambda: (r := isr(conf, "secure")) is not None and victim.node_id not in r,
        30,
        f"node {victim.node_id} to leave the ISR",
    )
    more = [f"w{i}".encode() for i in range(20)]
    produce(conf, "secure", more)
    victim.start(45)
    wait_value(
        lambda: r if (r := isr(conf, "secure")) == [1, 2, 3] else None,
        40,
        f"node {victim.node_id} back in the ISR",
        detail=lambda: victim.log_tail(30),
    )
    assert consume(conf, "secure", 70) == first + more
    for n in c.nodes:  # no node was ever refused by a peer
        assert b"fails: " not in n.output.read_bytes(), n.log_tail(30)


@pytest.fixture
def stop_after() -> Iterator[list[Cluster]]:
    started: list[Cluster] = []
    yield started
    for c in started:
        c.stop()


def test_scram_over_sasl_ssl_between_nodes(
    tmp_path: Path, pki: Pki, stop_after: list[Cluster]
) -> None:
    c = secure_cluster(tmp_path, pki, "scram")
    stop_after.append(c)
    c.start(60)
    exercise(c, pki)


def test_mutual_tls_between_nodes(tmp_path: Path, pki: Pki, stop_after: list[Cluster]) -> None:
    c = secure_cluster(tmp_path, pki, "mtls")
    stop_after.append(c)
    c.start(60)
    exercise(c, pki)


def test_a_node_its_peers_refuse_says_so_once_per_peer(
    tmp_path: Path, pki: Pki, stop_after: list[Cluster]
) -> None:
    c = secure_cluster(tmp_path, pki, "scram")
    stop_after.append(c)
    bad = c.node(3)
    for li in ("internal", "controller"):
        bad.settings[f"listener.name.{li}.scram-sha-512.sasl.jaas.config"] = _jaas(
            NODE_USER, "wrong"
        )
    bad.write_config()
    for n in c.nodes:
        n.launch()
    c.node(1).wait_started(60)
    c.node(2).wait_started(60)
    lines: list[str] = []

    def refusals() -> list[str]:
        text = bad.output.read_text(errors="replace")
        return [line for line in text.splitlines() if "node link to node" in line]

    wait_for(lambda: len(refusals()) == 2, 30, "node 3 to log its refusals", detail=bad.log_tail)
    time.sleep(3)  # it keeps retrying (with backoff), and says nothing more
    lines = refusals()
    assert len(lines) == 2, lines
    for line in lines:
        assert "WARNING" in line and "on listener CONTROLLER (SASL_SSL, SCRAM-SHA-512)" in line
        assert "as User:kafka, fails:" in line and "retrying with backoff" in line
        assert "invalid credentials" in line or "authentication" in line
    assert bad.proc is not None and bad.proc.poll() is None  # still trying, not exited
