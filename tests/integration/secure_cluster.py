"""Three nodes locked down as a security-conscious operator would (issue 26), for the tests of
node-to-node TLS/SASL and of the secure-cluster acceptance test.

Each node has a SASL_SSL/SCRAM-SHA-512 client listener (CLIENT); its inter-broker (INTERNAL) and
controller listeners are either SASL_SSL with SCRAM-SHA-512 (``links="scram"``: the nodes' own
credentials written at format time with ``kafka-storage.sh format --add-scram``) or SSL with
``ssl.client.auth=required`` (``links="mtls"``: each node presents its keystore certificate).
StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``, ``super.users`` holding only the
admin and the nodes' own principal. Stock-client helpers (confluent-kafka) over SASL_SSL.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from tests.certs import Pki

from .cluster import Cluster
from .node import Node, free_port

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
NODE_USER, NODE_PW = "kafka", "kafka-secret"
ADMIN_PW = "admin-secret"
# the server certificate of tests.certs.make_pki, every node's, mapped by the DEFAULT rule
NODE_CERT_PRINCIPAL = "User:CN=localhost,O=kmirror tests,C=US"


def jaas(user: str, pw: str) -> str:
    return f'{SCRAM_MODULE} required username="{user}" password="{pw}";'


def node_principal(links: str) -> str:
    return f"User:{NODE_USER}" if links == "scram" else NODE_CERT_PRINCIPAL


def secure_cluster(workdir: Path, pki: Pki, links: str, formatted: bool = True) -> Cluster:
    """Three nodes from the shipped configs, re-listened and (unless not ``formatted``)
    formatted, not started: CLIENT (SASL_SSL), INTERNAL and CONTROLLER as ``links`` says
    (``scram`` or ``mtls``). `format_node` formats one node."""
    c = Cluster(workdir)
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
                "authorizer.class.name": AUTHORIZER,
                "allow.everyone.if.no.acl.found": "false",
                "super.users": f"User:admin;{node_principal(links)}",
                "group.share.enable": "true",  # so that the share-state RPCs are served
            }
        )
        if links == "scram":
            s["sasl.mechanism.inter.broker.protocol"] = "SCRAM-SHA-512"
            s["sasl.mechanism.controller.protocol"] = "SCRAM-SHA-512"
            for li in ("internal", "controller"):
                s[f"listener.name.{li}.sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
                s[f"listener.name.{li}.scram-sha-512.sasl.jaas.config"] = jaas(NODE_USER, NODE_PW)
        else:
            s["listener.name.internal.ssl.client.auth"] = "required"
            s["listener.name.controller.ssl.client.auth"] = "required"
        if formatted:
            format_node(n)
    return c


def format_node(n: Node) -> None:
    """``kafka-storage.sh format --add-scram`` with the nodes' and the admin's credentials."""
    n.format(
        "--add-scram",
        f"SCRAM-SHA-512=[name={NODE_USER},password={NODE_PW}]",
        "--add-scram",
        f"SCRAM-SHA-512=[name=admin,password={ADMIN_PW},iterations=8192]",
    )


def internal_port(n: Node) -> int:
    """The port of ``n``'s INTERNAL (inter-broker) listener."""
    (port,) = (
        int(li.rsplit(":", 1)[1])
        for li in n.settings["listeners"].split(",")
        if li.startswith("INTERNAL://")
    )
    return port


def client_conf(
    c: Cluster, pki: Pki, user: str = "admin", password: str = ADMIN_PW, **extra: Any
) -> dict[str, Any]:
    """confluent-kafka settings for ``user`` over SASL_SSL/SCRAM-SHA-512 to the client ports."""
    return {
        "bootstrap.servers": c.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(pki.ca),
        **extra,
    }


def isr(conf: dict[str, Any], topic: str) -> list[int] | None:
    """Partition 0's sorted ISR as the cluster answers it, None while unknown or unreachable."""
    try:
        md = AdminClient(conf).list_topics(topic, timeout=5)
    except KafkaException:
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    return sorted(t.partitions[0].isrs)


def produce(conf: dict[str, Any], topic: str, values: list[bytes]) -> None:
    """acks=all, idempotent, to partition 0; every record acknowledged."""
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    failed: list[str] = []
    for v in values:
        p.produce(
            topic, v, partition=0, on_delivery=lambda e, _m: failed.append(str(e)) if e else None
        )
    assert p.flush(30) == 0, "records left unsent"
    assert not failed, failed


def consume(
    conf: dict[str, Any], topic: str, n: int, group: str | None = None, timeout: float = 30
) -> list[bytes]:
    """Up to ``n`` values read by a subscribed consumer in ``group`` (a fresh one by default)."""
    c = Consumer(
        {**conf, "group.id": group or f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(bytes(m.value() or b""))
    finally:
        c.close()
    return out
