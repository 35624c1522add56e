"""Admin APIs against one real node with confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: topics, partitions, configs, groups, offsets, records, cluster, log dirs."""

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import TopicPartition as KpTP  # type: ignore[import-untyped]
from kafka.admin import ConfigResource as KpConfigResource  # type: ignore[import-untyped]
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.errors import InvalidTopicError, TopicAlreadyExistsError  # type: ignore[import-untyped]

from .clients import (
    Rec,
    ck_consumer,
    ck_drain,
    ck_produce,
    ck_read_all,
    create_topic,
    make_records,
    wait_for,
)
from .node import Node


@pytest.fixture(scope="module")
def anode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("admin") / "node1")
    n.start()
    yield n
    n.kill()


@pytest.fixture(scope="module")
def ck(anode: Node) -> AdminClient:
    return AdminClient({"bootstrap.servers": anode.bootstrap})


@pytest.fixture(scope="module")
def kp(anode: Node) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=anode.bootstrap, request_timeout_ms=10000)
    yield a
    a.close()


def result(fs: dict[Any, Any], key: Any) -> Any:
    return fs[key].result(15)


def error_of(fut: Any) -> KafkaError:
    with pytest.raises(KafkaException) as ei:
        fut.result(15)
    err: KafkaError = ei.value.args[0]
    return err


def topic_names(ck: AdminClient) -> set[str]:
    return set(ck.list_topics(timeout=10).topics)


def partition_dirs(node: Node, topic: str) -> list[str]:
    return sorted(
        p.name for p in node.log_dir.iterdir() if p.is_dir() and p.name.startswith(f"{topic}-")
    )


# --- topics -----------------------------------------------------------------------------------


def test_create_and_delete_topic_confluent(anode: Node, ck: AdminClient) -> None:
    result(ck.create_topics([NewTopic("adm-del", 2, 1)], operation_timeout=10), "adm-del")
    assert "adm-del" in topic_names(ck)
    assert partition_dirs(anode, "adm-del") == ["adm-del-0", "adm-del-1"]
    assert ck_produce(anode.bootstrap, "adm-del", make_records("d", 4, 2)) == []

    result(ck.delete_topics(["adm-del"], operation_timeout=10), "adm-del")
    wait_for(lambda: "adm-del" not in topic_names(ck), 10, "deleted topic to leave the metadata")
    # Kafka renames to <tp>.<uuid>-delete first; neither form may remain.
    wait_for(
        lambda: partition_dirs(anode, "adm-del") == [], 10, "partition directories to be removed"
    )


def test_create_and_delete_topic_kafka_python(anode: Node, kp: KafkaAdminClient) -> None:
    res = kp.create_topics(
        {
            "adm-kp": {
                "num_partitions": 3,
                "replication_factor": 1,
                "configs": {"retention.ms": "5000"},
            }
        }
    )
    (row,) = res["topics"]
    assert (row["name"], row["error_code"], row["num_partitions"]) == ("adm-kp", 0, 3)
    assert row["configs"]["retention.ms"]["value"] == "5000"
    assert "adm-kp" in kp.list_topics()
    assert len(partition_dirs(anode, "adm-kp")) == 3

    kp.delete_topics(["adm-kp"])
    wait_for(lambda: "adm-kp" not in kp.list_topics(), 10, "deleted topic to leave list_topics")
    wait_for(
        lambda: partition_dirs(anode, "adm-kp") == [], 10, "partition directories to be removed"
    )


def test_internal_topics_cannot_be_deleted(
    anode: Node, ck: AdminClient, kp: KafkaAdminClient
) -> None:
    """DeleteTopics refuses __consumer_offsets (INVALID_REQUEST, the message naming it), which
    keeps the group's committed offset; a topic deleted in the same request goes."""
    create_topic(anode.bootstrap, "adm-int", 1)
    c = ck_consumer(anode.bootstrap, **{"group.id": "adm-int-g"})
    try:  # a commit creates __consumer_offsets
        c.commit(offsets=[TopicPartition("adm-int", 0, 1)], asynchronous=False)
    finally:
        c.close()
    assert "__consumer_offsets" in topic_names(ck)
    fs = ck.delete_topics(["__consumer_offsets", "adm-int"], operation_timeout=10)
    err = error_of(fs["__consumer_offsets"])
    assert err.code() == KafkaError.INVALID_REQUEST, err
    result(fs, "adm-int")
    # (librdkafka drops the error message; kafka-python shows it)
    (row,) = kp.delete_topics(["__consumer_offsets"], raise_errors=False)["topics"]
    assert row["error_code"] == KafkaError.INVALID_REQUEST, row
    assert "internal topic __consumer_offsets" in row["error_message"], row
    wait_for(lambda: "adm-int" not in topic_names(ck), 10, "adm-int to be deleted")
    assert "__consumer_offsets" in topic_names(ck)
    committed = result(
        ck.list_consumer_group_offsets([ConsumerGroupTopicPartitions("adm-int-g")]), "adm-int-g"
    )
    assert [(tp.topic, tp.offset) for tp in committed.topic_partitions] == [("adm-int", 1)]


def test_create_topic_errors(ck: AdminClient, kp: KafkaAdminClient) -> None:
    result(ck.create_topics([NewTopic("adm-dup", 1, 1)]), "adm-dup")
    assert (
        error_of(ck.create_topics([NewTopic("adm-dup", 1, 1)])["adm-dup"]).code()
        == KafkaError.TOPIC_ALREADY_EXISTS
    )
    with pytest.raises(TopicAlreadyExistsError):
        kp.create_topics({"adm-dup": {"num_partitions": 1, "replication_factor": 1}})

    for bad in ["bad/name", "..", "x" * 250, "sp ace"]:
        err = error_of(ck.create_topics([NewTopic(bad, 1, 1)])[bad])
        assert err.code() == KafkaError.TOPIC_EXCEPTION, (bad, err)
    with pytest.raises(InvalidTopicError):
        kp.create_topics({"bad:name": {"num_partitions": 1, "replication_factor": 1}})

    err = error_of(ck.create_topics([NewTopic("adm-rf3", 1, 3)])["adm-rf3"])
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR, err
    err = error_of(
        ck.create_topics([NewTopic("adm-badcfg", 1, 1, config={"cleanup.policy": "bogus"})])[
            "adm-badcfg"
        ]
    )
    assert err.code() == KafkaError.INVALID_CONFIG and "cleanup.policy" in err.str(), err
    assert not {"adm-rf3", "adm-badcfg", "bad/name"} & topic_names(ck)


def test_create_partitions(anode: Node, ck: AdminClient, kp: KafkaAdminClient) -> None:
    create_topic(anode.bootstrap, "adm-parts", 2)
    result(ck.create_partitions([NewPartitions("adm-parts", 4)], operation_timeout=10), "adm-parts")
    assert len(ck.list_topics("adm-parts", timeout=10).topics["adm-parts"].partitions) == 4
    kp.create_partitions({"adm-parts": 5})
    wait_for(
        lambda: len(ck.list_topics("adm-parts", timeout=10).topics["adm-parts"].partitions) == 5,
        10,
        "5 partitions",
    )
    assert len(partition_dirs(anode, "adm-parts")) == 5
    # The new partitions take records like the old ones.
    recs = make_records("p", 10, 5)
    assert ck_produce(anode.bootstrap, "adm-parts", recs) == []
    got = ck_read_all(anode.bootstrap, "adm-parts", 5, 10)
    assert sorted(map(repr, (r.body() for r in got))) == sorted(map(repr, (r.body() for r in recs)))
    # Fewer partitions than now is refused.
    err = error_of(ck.create_partitions([NewPartitions("adm-parts", 3)])["adm-parts"])
    assert err.code() == KafkaError.INVALID_PARTITIONS, err


# --- configs ----------------------------------------------------------------------------------


def describe_topic(ck: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries: dict[str, ConfigEntry] = ck.describe_configs([res])[res].result(15)
    return entries


def test_describe_configs_topic_and_broker(
    anode: Node, ck: AdminClient, kp: KafkaAdminClient
) -> None:
    create_topic(
        anode.bootstrap, "adm-cfg", 1, {"retention.ms": "123456", "cleanup.policy": "compact"}
    )
    entries = describe_topic(ck, "adm-cfg")
    assert (entries["retention.ms"].value, ConfigSource(entries["retention.ms"].source)) == (
        "123456",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert entries["cleanup.policy"].value == "compact"
    assert (entries["segment.bytes"].value, ConfigSource(entries["segment.bytes"].source)) == (
        "1073741824",
        ConfigSource.DEFAULT_CONFIG,
    )
    assert entries["max.message.bytes"].is_default

    kpres = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "adm-cfg")])["topic"][
        "adm-cfg"
    ]
    assert set(kpres) == {"retention.ms", "cleanup.policy"}, (
        "the 'modified' filter keeps only overrides"
    )
    assert kpres["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

    res = ConfigResource(ResourceType.BROKER, "1")
    broker = ck.describe_configs([res])[res].result(15)
    assert len(broker) > 100
    assert (broker["num.partitions"].value, ConfigSource(broker["num.partitions"].source)) == (
        "1",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert (
        broker["log.retention.hours"].value,
        ConfigSource(broker["log.retention.hours"].source),
    ) == (
        "168",
        ConfigSource.DEFAULT_CONFIG,
    )
    kb = kp.describe_configs(
        [KpConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all"
    )["broker"]["1"]
    assert kb["log.dirs"]["value"] == str(anode.log_dir)


def test_alter_configs(anode: Node, ck: AdminClient, kp: KafkaAdminClient) -> None:
    create_topic(anode.bootstrap, "adm-alter", 1, {"retention.ms": "100000"})

    res = ConfigResource(
        ResourceType.TOPIC,
        "adm-alter",
        incremental_configs=[
            ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    result(ck.incremental_alter_configs([res]), res)
    e = describe_topic(ck, "adm-alter")
    assert (e["segment.ms"].value, ConfigSource(e["segment.ms"].source)) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert e["retention.ms"].value == "100000", "incremental alter keeps other overrides"

    kp.alter_configs(
        [
            KpConfigResource(
                ConfigResourceType.TOPIC, "adm-alter", configs={"retention.ms": "200000"}
            )
        ]
    )
    assert describe_topic(ck, "adm-alter")["retention.ms"].value == "200000"

    # Legacy AlterConfigs replaces the whole set: keys it omits fall back to their defaults.
    # (confluent-kafka deprecates alter_configs; it is still the only way to send AlterConfigs.)
    res = ConfigResource(ResourceType.TOPIC, "adm-alter", set_config={"retention.ms": "300000"})
    with pytest.warns(DeprecationWarning):
        fs = ck.alter_configs([res])
    result(fs, res)
    e = describe_topic(ck, "adm-alter")
    assert e["retention.ms"].value == "300000"
    assert (e["segment.ms"].value, ConfigSource(e["segment.ms"].source)) == (
        "604800000",
        ConfigSource.DEFAULT_CONFIG,
    )

    res = ConfigResource(
        ResourceType.TOPIC,
        "adm-alter",
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    result(ck.incremental_alter_configs([res]), res)
    assert (
        ConfigSource(describe_topic(ck, "adm-alter")["retention.ms"].source)
        == ConfigSource.DEFAULT_CONFIG
    )


@pytest.mark.parametrize(
    ("key", "value"), [("retention.ms", "not-a-number"), ("retention.mss", "1000")]
)
def test_invalid_config_names_key(anode: Node, ck: AdminClient, key: str, value: str) -> None:
    topic = f"adm-inv-{key}"
    create_topic(anode.bootstrap, topic, 1)
    res = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)],
    )
    err = error_of(ck.incremental_alter_configs([res])[res])
    assert err.code() == KafkaError.INVALID_CONFIG and key in err.str(), err
    assert (
        ConfigSource(describe_topic(ck, topic)["retention.ms"].source)
        == ConfigSource.DEFAULT_CONFIG
    )


# --- groups -----------------------------------------------------------------------------------


def test_list_and_describe_groups(anode: Node, ck: AdminClient, kp: KafkaAdminClient) -> None:
    create_topic(anode.bootstrap, "adm-grp", 2)
    c = ck_consumer(anode.bootstrap, **{"group.id": "adm-g", "client.id": "adm-client"})
    try:
        c.subscribe(["adm-grp"])
        wait_for(lambda: c.poll(0.1) is None and len(c.assignment()) == 2, 15, "assignment")
        listed = ck.list_consumer_groups().result(15)
        states = {g.group_id: g.state for g in listed.valid}
        assert states.get("adm-g") == ConsumerGroupState.STABLE, states
        desc = result(ck.describe_consumer_groups(["adm-g"]), "adm-g")
        assert desc.state == ConsumerGroupState.STABLE and not desc.is_simple_consumer_group
        assert desc.partition_assignor == "range"
        (member,) = desc.members
        assert member.client_id == "adm-client"
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1]

        kl = {g["group_id"]: g for g in kp.list_groups()}
        assert (kl["adm-g"]["protocol_type"], kl["adm-g"]["group_state"]) == ("consumer", "Stable")
        kd = kp.describe_groups(["adm-g"])["adm-g"]
        assert kd["protocol_data"] == "range"
        assert [m["member_assignment"]["assigned_partitions"] for m in kd["members"]] == [
            [{"topic": "adm-grp", "partitions": [0, 1]}]
        ]
    finally:
        c.close()
    wait_for(
        lambda: (
            result(ck.describe_consumer_groups(["adm-g"]), "adm-g").state
            == ConsumerGroupState.EMPTY
        ),
        10,
        "group to become Empty after its member left",
    )


# --- offsets and records ----------------------------------------------------------------------


def spec(name: str, *args: int) -> OffsetSpec:
    made: OffsetSpec = getattr(OffsetSpec, name)(*args)  # its factories are untyped
    return made


def test_list_offsets_and_delete_records(
    anode: Node, ck: AdminClient, kp: KafkaAdminClient
) -> None:
    topic = "adm-offs"
    create_topic(anode.bootstrap, topic, 1)
    t0 = int(time.time() * 1000) - 50_000
    stamps = [t0 + i for i in range(10)]
    stamps[4] = t0 + 40_000  # the max timestamp sits in the middle
    recs = [Rec(0, f"k{i}".encode(), b"v", (), -1, ts) for i, ts in enumerate(stamps)]
    assert ck_produce(anode.bootstrap, topic, recs, **{"batch.num.messages": 1}) == []
    tp = TopicPartition(topic, 0)

    def offsets(spec: OffsetSpec) -> tuple[int, int]:
        info = result(
            ck.list_offsets({tp: spec}, isolation_level=IsolationLevel.READ_UNCOMMITTED), tp
        )
        return info.offset, info.timestamp

    assert offsets(spec("earliest"))[0] == 0
    assert offsets(spec("latest"))[0] == 10
    assert offsets(spec("max_timestamp")) == (4, t0 + 40_000)
    assert offsets(spec("for_timestamp", t0 + 6))[0] == 4

    deleted = result(ck.delete_records([TopicPartition(topic, 0, 6)]), TopicPartition(topic, 0, 6))
    assert deleted.low_watermark == 6
    assert offsets(spec("earliest"))[0] == 6
    kres = kp.delete_records({KpTP(topic, 0): 8})
    assert kres[KpTP(topic, 0)]["low_watermark"] == 8

    c = ck_consumer(anode.bootstrap)
    try:
        assert c.get_watermark_offsets(tp, timeout=10) == (8, 10)
        c.subscribe([topic])
        got = ck_drain(c, 2, 10, idle=0.3)
    finally:
        c.close()
    assert [(r.offset, r.key) for r in got] == [(8, b"k8"), (9, b"k9")]


# --- cluster and log dirs ---------------------------------------------------------------------


def test_describe_cluster(anode: Node, ck: AdminClient, kp: KafkaAdminClient) -> None:
    d = ck.describe_cluster(request_timeout=10).result(15)
    assert d.cluster_id == anode.cluster_id
    assert [(n.id, n.host, n.port) for n in d.nodes] == [(1, "127.0.0.1", anode.port)]
    assert d.controller is not None and d.controller.id == 1
    k = kp.describe_cluster()
    assert (k["cluster_id"], k["controller_id"]) == (anode.cluster_id, 1)
    assert [(b["broker_id"], b["port"]) for b in k["brokers"]] == [(1, anode.port)]


def test_describe_log_dirs(anode: Node, kp: KafkaAdminClient) -> None:
    create_topic(anode.bootstrap, "adm-dirs", 2)
    assert ck_produce(anode.bootstrap, "adm-dirs", [Rec(0, b"k", b"x" * 1000)] * 3) == []
    (broker,) = kp.describe_log_dirs()
    assert broker["broker"] == 1
    (ld,) = broker["log_dirs"]
    assert (ld["error_code"], ld["log_dir"]) == (0, str(anode.log_dir))
    assert ld["total_bytes"] >= ld["usable_bytes"] > 0
    parts = {
        p["partition_index"]: p["partition_size"]
        for t in ld["topics"]
        if t["name"] == "adm-dirs"
        for p in t["partitions"]
    }
    assert parts[1] == 0 and parts[0] > 3000, parts
    (only,) = kp.describe_log_dirs(topic_partitions={"adm-dirs": [0]})
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]])
        for t in only["log_dirs"][0]["topics"]
    ] == [("adm-dirs", [0])]
