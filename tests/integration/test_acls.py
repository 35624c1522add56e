"""ACLs against real nodes with stock clients: CreateAcls/DescribeAcls/DeleteAcls through
confluent-kafka's AdminClient (filters, validation, SECURITY_DISABLED without an authorizer),
enforcement on a stock producer and consumer (TOPIC_AUTHORIZATION_FAILED, then allowed after
ALLOW ACLs for User:ANONYMOUS), ACLs surviving a kill -9 and restart, and default deny (no ACLs,
no super user) refusing admin and mirror RPCs."""

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (  # type: ignore[import-untyped]
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import SecurityDisabledError  # type: ignore[import-untyped]

from broker.cli import mirrors as mirrors_cli

from .clients import create_topic
from .node import Node

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"
Pat, Op, Perm = ResourcePatternType, AclOperation, AclPermissionType


def _binding(
    rtype: ResourceType,
    name: str,
    principal: str,
    op: AclOperation,
    perm: AclPermissionType = Perm.ALLOW,
    pattern: ResourcePatternType = Pat.LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def _filter(
    rtype: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: ResourcePatternType = Pat.ANY,
    principal: str | None = None,
) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, pattern, principal, None, Op.ANY, Perm.ANY)


def _create(admin: AdminClient, *bindings: AclBinding) -> None:
    for f in admin.create_acls(list(bindings)).values():
        f.result(10)


def _describe(admin: AdminClient, f: AclBindingFilter) -> set[AclBinding]:
    return set(admin.describe_acls(f).result(10))


def _error_code(e: KafkaException) -> int:
    return int(e.args[0].code())


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(
        tmp_path_factory.mktemp("acls") / "n1",
        authorizer__class__name=STANDARD,
        super__users=ANON,
    )
    n.start()
    yield n
    n.kill()


def test_create_describe_delete_with_kafka_filter_semantics(secured: Node) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    a1 = _binding(ResourceType.TOPIC, "orders", "User:alice", Op.READ)
    a2 = _binding(ResourceType.TOPIC, "ord", "User:bob", Op.WRITE, pattern=Pat.PREFIXED)
    a3 = _binding(ResourceType.TOPIC, "*", "User:carol", Op.DESCRIBE, Perm.DENY, host="10.0.0.1")
    a4 = _binding(ResourceType.GROUP, "g1", "User:alice", Op.READ)
    a5 = _binding(ResourceType.BROKER, "kafka-cluster", "User:alice", Op.ALTER)
    _create(admin, a1, a2, a3, a4, a5)
    _create(admin, a1)  # creating an existing ACL again succeeds, without a copy
    assert _describe(admin, _filter()) == {a1, a2, a3, a4, a5}
    assert _describe(admin, _filter(ResourceType.TOPIC, pattern=Pat.LITERAL)) == {a1, a3}
    assert _describe(admin, _filter(ResourceType.TOPIC, pattern=Pat.PREFIXED)) == {a2}
    # MATCH: what applies to topic "orders": its literal ACL, the prefix and the wildcard
    assert _describe(admin, _filter(ResourceType.TOPIC, "orders", Pat.MATCH)) == {a1, a2, a3}
    assert _describe(admin, _filter(ResourceType.TOPIC, "orders", Pat.ANY)) == {a1}
    assert _describe(admin, _filter(principal="User:alice")) == {a1, a4, a5}
    deleted = admin.delete_acls([_filter(ResourceType.GROUP)])
    assert [set(f.result(10)) for f in deleted.values()] == [{a4}]
    assert _describe(admin, _filter()) == {a1, a2, a3, a5}
    for f in admin.delete_acls([_filter()]).values():
        f.result(10)
    assert _describe(admin, _filter()) == set()


def test_bad_creations_are_invalid_request(secured: Node) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    bad = [
        _binding(ResourceType.BROKER, "not-kafka-cluster", "User:alice", Op.ALTER),
        _binding(ResourceType.TOPIC, "t", "alice", Op.READ),  # not Type:name
    ]
    good = _binding(ResourceType.TOPIC, "fine", "User:alice", Op.READ)
    results = admin.create_acls([*bad, good])
    for b in bad:
        with pytest.raises(KafkaException) as e:
            results[b].result(10)
        assert _error_code(e.value) == KafkaError.INVALID_REQUEST
    results[good].result(10)
    assert _describe(admin, _filter(ResourceType.TOPIC, "fine")) == {good}


def test_without_authorizer_acl_rpcs_are_security_disabled(node: Node) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    b = _binding(ResourceType.TOPIC, "t", "User:alice", Op.READ)
    calls: list[Any] = [
        lambda: admin.create_acls([b])[b].result(10),
        lambda: [f.result(10) for f in admin.delete_acls([_filter()]).values()],
    ]
    for call in calls:
        with pytest.raises(KafkaException) as e:
            call()
        assert _error_code(e.value) == KafkaError.SECURITY_DISABLED
    # librdkafka drops DescribeAcls' top-level error (it returns []): kafka-python reports it
    kp = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        any_acl = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                KpResourceType.ANY, None, ACLResourcePatternType.ANY
            ),
        )
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured"):
            kp.describe_acls(any_acl)
    finally:
        kp.close()


def _produce_errors(bootstrap: str, topic: str, n: int = 3) -> list[int]:
    """Produce ``n`` records with a fresh producer; the error code of each delivery (0 = ok)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 10000})
    codes: list[int] = []
    for i in range(n):
        p.produce(
            topic,
            value=b"v%d" % i,
            on_delivery=lambda err, _m: codes.append(err.code() if err else 0),
        )
    assert p.flush(20) == 0
    return codes


def _consume(bootstrap: str, topic: str, n: int, timeout: float = 15) -> tuple[int, int]:
    """Subscribe in a group; (records read, first error code or 0) within ``timeout``."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got = 0
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and got < n:
            for m in c.consume(num_messages=100, timeout=0.2):
                if m.error():
                    return got, m.error().code()
                got += 1
        return got, 0
    finally:
        c.close()


def test_stock_clients_denied_then_allowed(tmp_path: Path) -> None:
    n = Node(
        tmp_path / "n1",
        authorizer__class__name=STANDARD,
        allow__everyone__if__no__acl__found="true",
    )
    n.start()
    try:
        bs = n.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        create_topic(bs, "secret")  # no ACLs anywhere yet: allowed by default
        _create(admin, _binding(ResourceType.TOPIC, "secret", "User:alice", Op.ALL))
        # now "secret" has ACLs and none is for ANONYMOUS: hidden from and closed to it
        assert set(_produce_errors(bs, "secret")) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
        assert _consume(bs, "secret", 1) == (0, KafkaError.TOPIC_AUTHORIZATION_FAILED)
        # DESCRIBE only: metadata works, Produce and Fetch themselves refuse
        _create(admin, _binding(ResourceType.TOPIC, "secret", ANON, Op.DESCRIBE))
        assert set(_produce_errors(bs, "secret")) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
        _create(admin, _binding(ResourceType.TOPIC, "secret", ANON, Op.WRITE))
        assert _produce_errors(bs, "secret") == [0, 0, 0]
        assert _consume(bs, "secret", 3) == (0, KafkaError.TOPIC_AUTHORIZATION_FAILED)
        _create(admin, _binding(ResourceType.TOPIC, "secret", ANON, Op.READ))
        assert _consume(bs, "secret", 3) == (3, 0)
        # a DENY for everyone wins over the ALLOWs
        _create(
            admin, _binding(ResourceType.TOPIC, "sec", "User:*", Op.READ, Perm.DENY, Pat.PREFIXED)
        )
        assert _consume(bs, "secret", 3) == (0, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    finally:
        n.kill()


def test_acls_survive_kill_and_restart(tmp_path: Path) -> None:
    n = Node(tmp_path / "n1", authorizer__class__name=STANDARD, super__users=ANON)
    n.start()
    try:
        bs = n.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        create_topic(bs, "app-1")
        create_topic(bs, "other")
        write = _binding(ResourceType.TOPIC, "app-", ANON, Op.WRITE, pattern=Pat.PREFIXED)
        describe = _binding(ResourceType.BROKER, "kafka-cluster", ANON, Op.DESCRIBE)
        _create(admin, write, describe)
        n.kill()
        # restart without the super user: only the ACLs grant anything now
        del n.settings["super.users"]
        n.write_config()
        n.start()
        admin = AdminClient({"bootstrap.servers": bs})
        assert _describe(admin, _filter()) == {write, describe}
        assert _produce_errors(bs, "app-1") == [0, 0, 0]
        assert set(_produce_errors(bs, "other")) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
        b = _binding(ResourceType.TOPIC, "other", ANON, Op.WRITE)
        with pytest.raises(KafkaException) as e:  # no ALTER on the cluster
            admin.create_acls([b])[b].result(10)
        assert _error_code(e.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    finally:
        n.kill()


def test_default_deny_refuses_admin_and_mirror_rpcs(tmp_path: Path) -> None:
    """No super user, no ACLs, allow.everyone.if.no.acl.found=false: ANONYMOUS may do nothing."""
    n = Node(tmp_path / "n1", authorizer__class__name=STANDARD)
    n.start()
    try:
        admin = AdminClient({"bootstrap.servers": n.bootstrap})
        with pytest.raises(KafkaException) as e:
            admin.create_topics([NewTopic("t", 1, 1)])["t"].result(10)
        assert _error_code(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        broker = ConfigResource(ConfigResource.Type.BROKER, "1")
        with pytest.raises(KafkaException) as e:
            admin.describe_configs([broker])[broker].result(10)
        assert _error_code(e.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        b = _binding(ResourceType.TOPIC, "t", ANON, Op.ALL)
        with pytest.raises(KafkaException) as e:
            admin.create_acls([b])[b].result(10)
        assert _error_code(e.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        props = tmp_path / "mirror.properties"
        props.write_text("bootstrap.servers=127.0.0.1:1\n")
        out, err = io.StringIO(), io.StringIO()
        argv = ["--bootstrap-server", n.bootstrap, "--create", "--mirror", "m"]
        rc = mirrors_cli.main([*argv, "--mirror-config", str(props)], out, err)
        assert rc == 1 and "MIRROR_AUTHORIZATION_FAILED" in err.getvalue(), err.getvalue()
    finally:
        n.kill()


def test_transactions_need_acls_on_their_transactional_id_group_and_topics(tmp_path: Path) -> None:
    """With DESCRIBE only (enough for FindCoordinator), InitProducerId needs WRITE on the
    transactional id and AddOffsetsToTxn READ on the group; ListTransactions shows only ids the
    principal may DESCRIBE. Allowed once the ALLOW ACLs exist."""
    n = Node(
        tmp_path / "n1",
        authorizer__class__name=STANDARD,
        allow__everyone__if__no__acl__found="true",
        transaction__state__log__replication__factor="1",
        transaction__state__log__num__partitions="2",
    )
    n.start()
    try:
        bs = n.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        create_topic(bs, "orders")
        # a transactional id nobody guards yet: ANONYMOUS may use it (allow.everyone.if.no.acl)
        other = Producer({"bootstrap.servers": bs, "transactional.id": "audit"})
        other.init_transactions(15)

        def listed() -> set[str]:
            kp = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10_000)
            try:
                return {t.transactional_id for ts in kp.list_transactions().values() for t in ts}
            finally:
                kp.close()

        assert "audit" in listed()
        _create(admin, _binding(ResourceType.TRANSACTIONAL_ID, "audit", "User:alice", Op.ALL))
        assert "audit" not in listed()
        tid = _binding(ResourceType.TRANSACTIONAL_ID, "billing", "User:alice", Op.ALL)
        _create(admin, tid, _binding(ResourceType.TRANSACTIONAL_ID, "billing", ANON, Op.DESCRIBE))
        p = Producer({"bootstrap.servers": bs, "transactional.id": "billing"})
        with pytest.raises(KafkaException) as e:
            p.init_transactions(15)
        assert _error_code(e.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        _create(admin, _binding(ResourceType.TRANSACTIONAL_ID, "billing", ANON, Op.WRITE))
        p = Producer({"bootstrap.servers": bs, "transactional.id": "billing"})
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("orders", value=b"paid", partition=0)
        p.commit_transaction(15)
        # a group ANONYMOUS may find (DESCRIBE) but not READ: no offsets in the transaction
        group = _binding(ResourceType.GROUP, "billing-app", "User:alice", Op.ALL)
        _create(admin, group, _binding(ResourceType.GROUP, "billing-app", ANON, Op.DESCRIBE))
        reader = Consumer({"bootstrap.servers": bs, "group.id": "billing-app"})
        try:
            p.begin_transaction()
            p.produce("orders", value=b"refunded", partition=0)
            with pytest.raises(KafkaException) as e:
                p.send_offsets_to_transaction(
                    [TopicPartition("orders", 0, 1)], reader.consumer_group_metadata(), 15
                )
            assert _error_code(e.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
            p.abort_transaction(15)
        finally:
            reader.close()
        committed = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": "any",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            committed.assign([TopicPartition("orders", 0, 0)])
            got = [m.value() for m in committed.consume(10, timeout=5) if not m.error()]
        finally:
            committed.close()
        assert got == [b"paid"]
    finally:
        n.kill()
