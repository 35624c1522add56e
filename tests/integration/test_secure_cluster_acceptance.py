"""Acceptance test of issue 26: a three-node cluster locked down as Kafka's operators lock theirs.

SASL_SSL (SCRAM-SHA-512) on the client listener; the inter-broker and controller listeners
SASL_SSL with SCRAM-SHA-512 (the nodes' credentials from ``kafka-storage.sh format --add-scram``)
or, in the second variant, SSL with mutual TLS; StandardAuthorizer,
``allow.everyone.if.no.acl.found=false``, ``super.users`` holding only the admin and the nodes'
own principal. One cluster start-up per variant checks, in order:

1. the admin creates the users ``alice`` and ``bob`` (stock admin client) and alice's ACLs
   (kafka-acls.sh); alice produces acks=all with confluent-kafka and consumes in a group; bob
   (no ACLs) is refused with TOPIC_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED;
2. the admin creates a mirror (kafka-mirrors.sh over SASL_SSL) whose source is a one-node kmirror
   reachable only over SASL_SSL; the records arrive byte-identical, lag 0;
3. an attacker: plain TCP to every port of every node gets no answer; TLS without SASL gets
   ApiVersions only; bob (and, on the mutual-TLS ports, a certificate the CA signed for someone
   who is no node) is refused every node-to-node request on the listener that serves it, the
   connection closed on the one that does not, and every data/admin request with Kafka's codes;
   none of it took effect;
4. kill -9 of the quorum leader and its restart: it rejoins over TLS (ISR back to three on the
   test topic, three voters caught up), and the records written meanwhile are all there.

The node-config mistakes of the issue's "Bad input" paragraph are checked at process start: a
mechanism with no JAAS entry and a keystore without the node's host name stop the node with one
line naming the key; ``super.users`` without the node's own principal is one WARN line.
"""

from __future__ import annotations

import io
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from broker.cli import acls as acls_cli
from broker.cli import metadata_quorum as quorum_cli
from broker.cli import mirrors as mirrors_cli
from tests.certs import Pki, make_pki
from tests.waits import wait_for, wait_value

from .cluster import Cluster
from .internal_rpcs import RawConn, Rpc, assert_refused, data_rpcs, internal_rpcs, tls_context
from .mirror_helpers import running, write_mirror_config
from .node import ROOT, Node, free_port
from .secure_cluster import (
    ADMIN_PW,
    NODE_USER,
    SCRAM_MODULE,
    client_conf,
    consume,
    format_node,
    internal_port,
    isr,
    jaas,
    produce,
    secure_cluster,
)

TOPIC = "payments"
GROUP = "billing"
MIRRORED = "orders"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SOURCE_RECORDS = 40


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


# -- the mirror's source: one node, SASL_SSL ----------------------------------------------------


def _source_records() -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
    """Keys, values (every byte value among them) and headers the mirror must copy exactly."""
    return [
        (
            None if i % 7 == 0 else b"k%d" % i,
            bytes((i * 31 + j) % 256 for j in range(i * 8 + 1)),
            [("h", b"\x00\xff%d" % i)] if i % 3 == 0 else [],
        )
        for i in range(SOURCE_RECORDS)
    ]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[tuple[Node, int]]:
    """A one-node kmirror whose SASL_SSL listener (SCRAM-SHA-512, user ``mirror``) the mirror
    reads; the topic ``orders`` holds `_source_records` (written over its PLAINTEXT port)."""
    src = Node(tmp_path_factory.mktemp("source") / "src")
    secure = free_port()
    broker = f"PLAINTEXT://127.0.0.1:{src.port},SASL_SSL://127.0.0.1:{secure}"
    src.settings.update(
        {
            "listeners": f"{broker},CONTROLLER://127.0.0.1:{src.controller_port}",
            "advertised.listeners": broker,
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
            ),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.ssl.keystore.location": str(pki.server_keystore),
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        }
    )
    with running(src):
        admin = AdminClient({"bootstrap.servers": src.bootstrap})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("mirror", info, b"mirror-secret")]
        )["mirror"].result(15)
        admin.create_topics([NewTopic(MIRRORED, 1, 1)])[MIRRORED].result(15)
        p = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 5})
        for key, value, headers in _source_records():
            p.produce(MIRRORED, value, key, partition=0, headers=headers)
        assert p.flush(20) == 0
        yield src, secure


def _read_exact(conf: dict[str, Any], topic: str, n: int) -> list[tuple[Any, ...]]:
    """(offset, timestamp, key, value, headers) of partition 0's first ``n`` records."""
    c = Consumer({**conf, "group.id": "reader", "enable.auto.commit": False})
    out: list[tuple[Any, ...]] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    out.append((m.offset(), m.timestamp(), m.key(), m.value(), m.headers()))
    finally:
        c.close()
    return out


# -- tools run in this process, as the admin over SASL_SSL ---------------------------------------


def _admin_properties(path: Path, pki: Pki) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM_MODULE} required username="admin" password="{ADMIN_PW}";\n'
        f"ssl.truststore.location={pki.ca}\n"
    )
    return path


def _tool(main: Callable[..., int], c: Cluster, props: Path, *args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    argv = ["--bootstrap-server", c.bootstrap, "--command-config", str(props), *args]
    rc = main(argv, out, err)
    assert rc == 0, f"{args}: rc={rc}\n{out.getvalue()}\n{err.getvalue()}"
    return out.getvalue()


def _quorum_status(c: Cluster, props: Path) -> dict[str, str]:
    text = _tool(quorum_cli.main, c, props, "describe", "--status")
    return {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines())}


# -- the attacker ---------------------------------------------------------------------------------


def _ports(c: Cluster) -> list[tuple[Node, str, int]]:
    return [
        (n, name, port)
        for n in c.nodes
        for name, port in (
            ("CLIENT", n.port),
            ("INTERNAL", internal_port(n)),
            ("CONTROLLER", n.controller_port),
        )
    ]


API_VERSIONS = Rpc(
    "ApiVersions", 18, 3, {"client_software_name": "x", "client_software_version": "1"}
)


def _ask(port: int, rpc: Rpc, tls: ssl.SSLContext | None, login: Callable[[RawConn], None]) -> Any:
    """``rpc``'s answer on a fresh connection, None when the node closed it (or refused its
    TLS handshake) unanswered."""
    try:
        conn = RawConn(port, timeout=10, tls=tls)
    except ssl.SSLError:
        return None
    with conn:
        login(conn)
        return conn.ask(rpc.key, rpc.version, rpc.data)


def _no_login(_conn: RawConn) -> None:
    pass


def _attack(c: Cluster, pki: Pki, links: str, admin: dict[str, Any]) -> None:
    topic_id = _topic_id(c, pki)
    everything = [
        API_VERSIONS,
        *internal_rpcs(c.cluster_id, TOPIC, topic_id),
        *data_rpcs(TOPIC, GROUP),
    ]
    ca_only = tls_context(pki.ca)
    for n, name, port in _ports(c):
        where = f"node {n.node_id} {name} port {port}"
        # no credentials, no TLS: the node reads the request as a broken TLS handshake
        for rpc in everything:
            assert _ask(port, rpc, None, _no_login) is None, f"{rpc.name} in plain TCP, {where}"
        # TLS, no SASL (or, on the mutual-TLS ports, no client certificate): ApiVersions at most
        sasl = name == "CLIENT" or links == "scram"
        versions = _ask(port, API_VERSIONS, ca_only, _no_login)
        if sasl:
            assert versions is not None and int(versions.error_code) == 0, where
        else:
            assert versions is None, f"{where}: answered without a client certificate"
        for rpc in everything[1:]:
            assert _ask(port, rpc, ca_only, _no_login) is None, f"{rpc.name} before SASL, {where}"
        # authenticated, no ACLs: bob over SASL, else a certificate the CA signed for a client
        if sasl:
            tls = ca_only

            def login(conn: RawConn) -> None:
                conn.sasl_scram("bob", USERS["bob"])

            who = "User:bob"
        else:
            tls = tls_context(pki.ca, pki.client_cert, pki.client_key)
            login = _no_login
            who = f"User:{pki.client_subject}"
        controller = name == "CONTROLLER"
        for rpc in everything[1:]:
            resp = _ask(port, rpc, tls, login)
            assert_refused(resp, rpc, controller, f"{rpc.name} from {who}, {where}")
    # nothing the attacker sent took effect
    md = AdminClient(admin).list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    assert TOPIC in md.topics
    assert not {"forged-by-envelope", "forged-topic"} & set(md.topics)
    a = AdminClient(admin)
    cfg = a.describe_configs([ConfigResource(ResourceType.TOPIC, TOPIC)])
    (entries,) = [f.result(10) for f in cfg.values()]
    assert entries["retention.ms"].value != "1"
    described = a.describe_user_scram_credentials(["bob"])["bob"].result(10)
    assert [i.iterations for i in described.scram_credential_infos] == [4096]  # not forged
    refusal = f"from {who} at " if links == "mtls" else "from User:bob at "
    assert any(refusal in n.output.read_text(errors="replace") for n in c.nodes)


def _topic_id(c: Cluster, pki: Pki) -> Any:
    with RawConn(c.nodes[0].port, tls=tls_context(pki.ca)) as conn:
        conn.sasl_scram("admin", ADMIN_PW)
        md = conn.ask(3, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
    (t,) = md.topics
    assert int(t.error_code) == 0, t
    return t.topic_id


# -- users, ACLs, the application ---------------------------------------------------------------


def _each_node_answers(c: Cluster, conf: dict[str, Any], code: int, what: str) -> None:
    """Wait until every node authenticates ``conf``'s user and answers its Metadata for the test
    topic with ``code`` (SCRAM credentials and ACLs reach each node with its metadata, at its own
    pace)."""
    for n in c.nodes:

        def answered(n: Node = n) -> bool:
            try:
                md = AdminClient({**conf, "bootstrap.servers": n.bootstrap}).list_topics(
                    TOPIC, timeout=3
                )
            except KafkaException:
                return False
            t = md.topics.get(TOPIC)
            return t is not None and (t.error.code() if t.error else 0) == code

        wait_for(answered, 20, f"{what} on node {n.node_id}")


def _users_and_acls(c: Cluster, pki: Pki, props: Path, admin: dict[str, Any]) -> None:
    a = AdminClient(admin)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    done = a.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(u, info, pw.encode()) for u, pw in USERS.items()]
    )
    for f in done.values():
        f.result(15)
    a.create_topics([NewTopic(TOPIC, 1, 3)], operation_timeout=15)[TOPIC].result(20)
    acl = ["--add", "--allow-principal", "User:alice"]
    _tool(acls_cli.main, c, props, *acl, "--operation", "Write", "--topic", TOPIC)
    _tool(acls_cli.main, c, props, *acl, "--operation", "Describe", "--topic", TOPIC)
    _tool(acls_cli.main, c, props, *acl, "--operation", "Read", "--topic", TOPIC, "--group", GROUP)


def _bob_is_refused(c: Cluster, pki: Pki) -> None:
    bob = client_conf(c, pki, "bob", USERS["bob"])
    p = Producer({**bob, "acks": "all", "message.timeout.ms": 10_000})
    errors: list[int] = []
    p.produce(TOPIC, b"from bob", on_delivery=lambda e, _m: errors.append(e.code()) if e else None)
    p.flush(15)
    assert errors == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    consumer = Consumer({**bob, "group.id": GROUP, "auto.offset.reset": "earliest"})
    seen: set[int] = set()
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 15
        while KafkaError.GROUP_AUTHORIZATION_FAILED not in seen and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is not None, "bob read a record"
                seen.add(m.error().code())
    finally:
        consumer.close()
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in seen, seen
    assert seen <= {KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED}


# -- the test -------------------------------------------------------------------------------------


def _timed(marks: list[tuple[str, float]], what: str) -> None:
    marks.append((what, time.monotonic()))


@pytest.mark.parametrize("links", ["scram", "mtls"])
def test_a_locked_down_cluster(
    links: str, tmp_path: Path, pki: Pki, source: tuple[Node, int]
) -> None:
    marks: list[tuple[str, float]] = [("begin", time.monotonic())]
    c = secure_cluster(tmp_path, pki, links)
    try:
        c.start(60)
        _timed(marks, "started")
        admin = client_conf(c, pki)
        props = _admin_properties(tmp_path / "admin.properties", pki)
        alice = client_conf(c, pki, "alice", USERS["alice"])

        # 1. the application user with ACLs works; bob without any is refused
        _users_and_acls(c, pki, props, admin)
        _each_node_answers(c, alice, 0, "alice's ACLs")
        bob = client_conf(c, pki, "bob", USERS["bob"])
        _each_node_answers(c, bob, KafkaError.TOPIC_AUTHORIZATION_FAILED, "bob refused")
        wait_for(lambda: isr(admin, TOPIC) == [1, 2, 3], 20, f"ISR 1,2,3 for {TOPIC}-0")
        first = [b"a%d" % i for i in range(30)]
        produce(alice, TOPIC, first)
        assert consume(alice, TOPIC, 30, group=GROUP) == first
        _bob_is_refused(c, pki)
        _timed(marks, "alice and bob")

        # 2. a mirror from a SASL_SSL source, created by the admin
        src, secure_port = source
        mirror_props = write_mirror_config(
            tmp_path / "mirror.properties",
            f"127.0.0.1:{secure_port}",
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-512",
            f"sasl.jaas.config={jaas('mirror', 'mirror-secret')}",
            f"ssl.truststore.location={pki.ca}",
        )
        _tool(
            mirrors_cli.main,
            c,
            props,
            *("--create", "--mirror", "src", "--mirror-config", str(mirror_props)),
        )
        _tool(mirrors_cli.main, c, props, "--add", "--topic", MIRRORED, "--mirror", "src")

        # 3. the attacker, while the mirror copies
        _attack(c, pki, links, admin)
        _timed(marks, "attacker")

        wait_for(
            lambda: _mirrored_end(admin) == SOURCE_RECORDS, 30, "the topic mirrored over SASL_SSL"
        )
        want = _read_exact({"bootstrap.servers": src.bootstrap}, MIRRORED, SOURCE_RECORDS)
        assert _read_exact(admin, MIRRORED, SOURCE_RECORDS) == want
        rows = [
            ln.split()
            for ln in _tool(mirrors_cli.main, c, props, "--describe", "--mirror", "src")
            .strip()
            .splitlines()[1:]
        ]
        assert [r[1:6] for r in rows] == [
            [MIRRORED, "0", str(SOURCE_RECORDS), str(SOURCE_RECORDS), "0"]
        ], rows
        _timed(marks, "mirror")

        # 4. kill -9 of the quorum leader; it rejoins over TLS
        victim = c.node(int(_quorum_status(c, props)["LeaderId"]))
        victim.kill()
        wait_for(
            lambda: (r := isr(admin, TOPIC)) is not None and victim.node_id not in r,
            30,
            f"node {victim.node_id} to leave the ISR",
        )
        more = [b"b%d" % i for i in range(20)]
        produce(alice, TOPIC, more)
        victim.start(45)
        wait_value(
            lambda: r if (r := isr(admin, TOPIC)) == [1, 2, 3] else None,
            40,
            f"node {victim.node_id} back in the ISR",
            detail=lambda: victim.log_tail(30),
        )

        def quorum_caught_up() -> bool:
            s = _quorum_status(c, props)
            voters = sorted(v["id"] for v in json.loads(s.get("CurrentVoters", "[]")))
            return voters == [1, 2, 3] and s.get("MaxFollowerLag") == "0"

        wait_for(
            quorum_caught_up, 30, "three voters caught up", detail=lambda: _quorum_status(c, props)
        )
        assert consume(alice, TOPIC, 20, group=GROUP) == more  # from the group's offset
        assert consume(admin, TOPIC, 50) == first + more
        for n in c.nodes:  # no node was ever refused by a peer, no super.users warning
            log = n.output.read_bytes()
            assert b"fails: " not in log and b"super.users: lacks" not in log, n.log_tail(30)
        _timed(marks, "kill -9 and rejoin")
    finally:
        c.kill()
        print(
            f"\n{links}: "
            + ", ".join(f"{w} {t - marks[i][1]:.1f}s" for i, (w, t) in enumerate(marks[1:]))
            + f"; total {time.monotonic() - marks[0][1]:.1f}s"
        )


def _mirrored_end(admin: dict[str, Any]) -> int:
    c = Consumer({**admin, "group.id": "probe", "enable.auto.commit": False})
    try:
        return int(c.get_watermark_offsets(TopicPartition(MIRRORED, 0), timeout=5)[1])
    except Exception:
        return -1
    finally:
        c.close()


# -- bad input ------------------------------------------------------------------------------------


def _refused_at_start(node: Node) -> str:
    """Start ``node``'s process once: it must exit 1 with one line on stderr; that line."""
    node.write_config()
    done = subprocess.run(
        [sys.executable, "-m", "broker", str(node.config_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    return lines[0]


def test_node_config_mistakes_are_named_at_start(tmp_path: Path, pki: Pki) -> None:
    # a SASL mechanism between nodes with no JAAS entry for this node's own credentials
    c = secure_cluster(tmp_path / "jaas", pki, "scram", formatted=False)
    n = c.node(1)
    del n.settings["listener.name.controller.scram-sha-512.sasl.jaas.config"]
    line = _refused_at_start(n)
    assert "listener.name.controller.scram-sha-512.sasl.jaas.config: is required" in line, line
    assert line.startswith(f"kmirror: {n.config_path}: "), line

    # a keystore whose certificate does not hold the address the peers reach this node at
    c = secure_cluster(tmp_path / "host", pki, "mtls", formatted=False)
    n = c.node(1)
    wrong = tmp_path / "alice-keystore.pem"
    wrong.write_bytes(pki.client_key.read_bytes() + pki.client_cert.read_bytes())
    n.settings["ssl.keystore.location"] = str(wrong)
    line = _refused_at_start(n)
    assert "ssl.keystore.location: the certificate holds alice, not 127.0.0.1" in line, line

    # super.users without this node's own principal: a warning, and the node goes on
    c = secure_cluster(tmp_path / "supers", pki, "scram", formatted=False)
    n = c.node(1)
    n.settings["super.users"] = "User:admin"
    format_node(n)
    n.launch()
    try:
        warned = f"super.users: lacks User:{NODE_USER}, this node's own principal"

        def warning() -> list[str]:
            text = n.output.read_text(errors="replace")
            return [ln for ln in text.splitlines() if warned in ln]

        lines = wait_value(lambda: warning() or None, 30, "the warning", detail=n.log_tail)
        assert len(lines) == 1 and "WARNING" in lines[0], lines
        assert n.proc is not None and n.proc.poll() is None  # still starting: only a warning
    finally:
        n.kill()
