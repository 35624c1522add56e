"""Node-to-node requests need CLUSTER_ACTION, and each listener serves only its own APIs, on real
nodes with StandardAuthorizer and allow.everyone.if.no.acl.found=false.

An attacker who reaches every port (no credentials on the PLAINTEXT client and controller
listeners; an authenticated user with no ACLs on a SASL_PLAINTEXT client listener) sends every
node-to-node request by hand (stock clients cannot): each is refused with Kafka's error code
(CLUSTER_AUTHORIZATION_FAILED; TOPIC_AUTHORIZATION_FAILED for a follower's Fetch), or, on a listener
that does not serve it, the connection is closed unanswered, as Kafka's socket server does. The
node logs each refusal with the principal, the request and the listener. Three nodes with
``super.users=User:ANONYMOUS`` (PLAINTEXT between nodes: the insecure development setting) still
form a cluster; three nodes whose principal is not a super user say in one line that their peers
refuse them. Without an authorizer the listener split holds all the same.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from .clients import wait_for
from .cluster import Cluster
from .internal_rpcs import RawConn, Rpc, assert_refused, internal_rpcs
from .node import Node, free_port

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_mallory="mallory-secret";'
)
TOPIC = "guarded"


def _lock_down(node: Node, super_users: str) -> int:
    """Add a SASL_PLAINTEXT client listener and the authorizer; the SASL port."""
    sasl = free_port()
    s = node.settings
    ctrl = f"CONTROLLER://127.0.0.1:{node.controller_port}"
    broker = [li for li in s["listeners"].split(",") if not li.startswith("CONTROLLER://")]
    s["listeners"] = ",".join([*broker, f"SASL_PLAINTEXT://127.0.0.1:{sasl}", ctrl])
    s["advertised.listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{sasl}"
    s["listener.security.protocol.map"] = (
        "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
    )
    s["sasl.enabled.mechanisms"] = "PLAIN"
    s["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = JAAS
    s["authorizer.class.name"] = AUTHORIZER
    s["allow.everyone.if.no.acl.found"] = "false"
    s["super.users"] = super_users
    s["group.share.enable"] = "true"
    return sasl


def _create(conf: dict[str, Any], name: str, replication_factor: int) -> None:
    a = AdminClient(conf)
    fs = a.create_topics([NewTopic(name, 1, replication_factor)], operation_timeout=20)
    fs[name].result(30)


def _conn(port: int, user: str | None) -> RawConn:
    c = RawConn(port)
    if user is not None:
        c.sasl_plain(user, f"{user}-secret")
    return c


def _topic_id(port: int, topic: str) -> uuid.UUID:
    with _conn(port, "admin") as c:
        md = c.ask(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    (t,) = md.topics
    assert int(t.error_code) == 0, t
    return uuid.UUID(str(t.topic_id))


def _answer(port: int, user: str | None, rpc: Rpc) -> Any:
    with _conn(port, user) as c:
        return c.ask(rpc.key, rpc.version, rpc.data)


def _expect_refused(port: int, user: str | None, rpc: Rpc, controller: bool) -> None:
    """``rpc`` from ``user`` (None: no credentials) on a controller or broker listener."""
    where = f"{rpc.name} on port {port} ({'controller' if controller else 'broker'} listener)"
    assert_refused(_answer(port, user, rpc), rpc, controller, where)


# -- one node ---------------------------------------------------------------------------------


class LockedNode:
    def __init__(self, workdir: Path) -> None:
        self.node = Node(workdir)
        self.sasl_port = _lock_down(self.node, "User:admin")

    def admin_conf(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LockedNode]:
    n = LockedNode(tmp_path_factory.mktemp("locked") / "n1")
    n.node.start(60)
    try:
        _create(n.admin_conf(), TOPIC, 1)
        yield n
    finally:
        n.node.kill()


def _rpcs(node: Node, port: int) -> list[Rpc]:
    return internal_rpcs(node.cluster_id, TOPIC, _topic_id(port, TOPIC))


@pytest.mark.parametrize("where", ["controller", "plaintext", "sasl"])
def test_an_attacker_is_refused_every_node_to_node_request(locked: LockedNode, where: str) -> None:
    node = locked.node
    port, user = {
        "controller": (node.controller_port, None),
        "plaintext": (node.port, None),
        "sasl": (locked.sasl_port, "mallory"),
    }[where]
    for rpc in _rpcs(node, locked.sasl_port):
        _expect_refused(port, user, rpc, controller=where == "controller")
    # nothing the attacker sent took effect: the forged envelope created no topic, and the
    # node still serves its admin
    with _conn(locked.sasl_port, "admin") as c:
        md = c.ask(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert "forged-by-envelope" not in {t.name for t in md.topics}
    assert [b.node_id for b in md.brokers] == [1]
    log = node.output.read_text(errors="replace")
    principal = "User:mallory" if user else "User:ANONYMOUS"
    listener = {"controller": "CONTROLLER", "plaintext": "PLAINTEXT", "sasl": "SASL_PLAINTEXT"}[
        where
    ]
    assert re.search(
        rf"refused \w+ \(api key \d+\) v\d+ from {principal} at \S+ on listener {listener}", log
    ), node.log_tail()


def test_refusals_are_logged_once_a_minute_not_per_request(locked: LockedNode) -> None:
    node = locked.node
    vote = _rpcs(node, locked.sasl_port)[0]
    before = node.output.read_text(errors="replace").count(
        "refused Vote (api key 52) v1 from User:ANONYMOUS"
    )
    for _ in range(20):
        _expect_refused(node.controller_port, None, vote, controller=True)
    after = node.output.read_text(errors="replace").count(
        "refused Vote (api key 52) v1 from User:ANONYMOUS"
    )
    assert after - before <= 1


def test_a_super_user_reads_the_quorum_state(locked: LockedNode) -> None:
    """The admin (a super user) is answered where the attacker is refused."""
    rpc = _rpcs(locked.node, locked.sasl_port)[-1]
    assert rpc.name == "DescribeQuorum"
    resp = _answer(locked.sasl_port, "admin", rpc)
    assert resp is not None and int(resp.error_code) == 0
    assert resp.topics[0].partitions[0].leader_id == 1


def test_clients_with_acls_still_work(locked: LockedNode) -> None:
    """The lock-down refuses what it should only: the admin produces and consumes."""
    conf = locked.admin_conf()
    p = Producer({**conf, "linger.ms": 5})
    for i in range(5):
        p.produce(TOPIC, b"v%d" % i)
    assert p.flush(20) == 0
    c = Consumer({**conf, "group.id": "admin-g", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m.value() or b"" for m in c.consume(10, 0.5) if not m.error()]
        assert got == [b"v%d" % i for i in range(5)]
    finally:
        c.close()


# -- no authorizer: the split alone ----------------------------------------------------------------


def test_without_an_authorizer_each_listener_serves_its_own_apis(tmp_path: Path) -> None:
    node = Node(tmp_path / "open").start()
    try:
        versions = {"client_software_name": "t", "client_software_version": "1"}
        with RawConn(node.controller_port) as c:
            on_controller = {int(k.api_key) for k in c.ask(18, 3, versions).api_keys}
        with RawConn(node.port) as c:
            on_broker = {int(k.api_key) for k in c.ask(18, 3, versions).api_keys}
        assert {52, 53, 54, 59, 62, 63, 56, 58, 67} <= on_controller
        assert not {0, 3, 10, 27} & on_controller  # Produce, Metadata, FindCoordinator...
        assert not {52, 53, 54, 59, 62, 63, 56, 58, 67} & on_broker
        assert {0, 1, 3, 10, 27, 55} <= on_broker
        rpcs = {r.key: r for r in internal_rpcs(node.cluster_id, TOPIC, uuid.uuid4())}
        # an API the listener does not serve: the connection closes, unanswered
        assert _answer(node.port, None, rpcs[59]) is None  # FetchSnapshot on the client port
        assert _answer(node.port, None, rpcs[52]) is None  # Vote
        with RawConn(node.controller_port) as c:
            assert c.ask(3, 12, {"topics": None}) is None  # Metadata on the controller port
        # what each listener serves is served: a Vote for an old epoch is answered
        resp = _answer(node.controller_port, None, rpcs[52])
        assert resp is not None and int(resp.error_code) == 0
        assert "not enabled on listener PLAINTEXT" in node.output.read_text(errors="replace")
    finally:
        node.stop()


# -- three nodes --------------------------------------------------------------------------------


def _locked_cluster(tmp_path: Path, super_users: str) -> tuple[Cluster, dict[int, int]]:
    cluster = Cluster(tmp_path, 3)
    sasl = {n.node_id: _lock_down(n, super_users) for n in cluster.nodes}
    for n in cluster.nodes:
        n.settings["offsets.topic.replication.factor"] = "3"
    return cluster, sasl


def test_three_nodes_with_anonymous_super_users_work_and_refuse_an_authenticated_attacker(
    tmp_path: Path,
) -> None:
    cluster, sasl = _locked_cluster(tmp_path, "User:ANONYMOUS;User:admin")
    try:
        for n in cluster.nodes:
            n.launch()
        for n in cluster.nodes:
            n.wait_started(90)
        n1 = cluster.nodes[0]
        _create({"bootstrap.servers": cluster.bootstrap}, TOPIC, 3)
        wait_for(lambda: cluster.known_everywhere(TOPIC), 30, "the topic on every node")
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(10):
            p.produce(TOPIC, b"v%d" % i)
        assert p.flush(30) == 0
        rpcs = internal_rpcs(n1.cluster_id, TOPIC, _topic_id(sasl[1], TOPIC))
        for n in cluster.nodes:
            for rpc in rpcs:
                _expect_refused(sasl[n.node_id], "mallory", rpc, controller=False)
        # still one healthy cluster after all that: every node answers the admin
        for n in cluster.nodes:
            with _conn(sasl[n.node_id], "admin") as c:
                md = c.ask(3, 12, {"topics": None})
            assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
            assert "forged-by-envelope" not in {t.name for t in md.topics}
    finally:
        for n in cluster.nodes:
            n.kill()


def test_nodes_their_peers_refuse_say_so_in_one_line(tmp_path: Path) -> None:
    """super.users without the nodes' own principal (User:ANONYMOUS over PLAINTEXT): the voters
    refuse each other's Vote; each node logs the refusals it gets (naming the peer and the
    request) once, and the ones it gives once a minute, instead of churning in silence."""
    cluster, _ = _locked_cluster(tmp_path, "User:admin")
    try:
        for n in cluster.nodes:
            n.launch()

        def refused_everywhere() -> bool:
            return all(
                "CLUSTER_AUTHORIZATION_FAILED" in n.output.read_text(errors="replace")
                and re.search(
                    r"quorum: voter \d at \S+ refused VoteRequest",
                    n.output.read_text(errors="replace"),
                )
                is not None
                for n in cluster.nodes
            )

        wait_for(refused_everywhere, 60, "each node to log its peers' refusals")
        time.sleep(5)  # several election rounds more: still one line per peer and request
        for n in cluster.nodes:
            log = n.output.read_text(errors="replace")
            client_side = re.findall(r"quorum: voter (\d) at \S+ refused VoteRequest", log)
            assert len(client_side) == len(set(client_side)) <= 2, client_side
            server_side = re.findall(r"refused Vote \(api key 52\) v\d from User:ANONYMOUS", log)
            assert 1 <= len(server_side) <= 2, server_side  # at most one per listener+minute
            assert "on listener CONTROLLER" in log
    finally:
        for n in cluster.nodes:
            n.kill()
