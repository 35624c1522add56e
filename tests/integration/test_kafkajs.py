"""kafkajs (Node.js, the version locked in tests/js) against one real node: admin topics, configs,
partitions, offsets, records and groups; produce with every acks and each compression kafkajs
has built in, read back by confluent-kafka; consume what confluent-kafka wrote; a group of two
kafkajs consumers that splits partitions and rebalances when one leaves; the idempotent producer;
transactions with sendOffsets, read back by read_committed consumers. Record batches are also
checked on disk, independently of any client (compression codec, producer id and sequences,
transaction markers)."""

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

from protocol.records import (
    BatchView,
    Compression,
    ControlType,
    iter_records,
    parse_control_record,
    scan_batches,
)

from .clients import (
    Headers,
    Rec,
    admin,
    ck_drain,
    ck_produce,
    ck_read_all,
    create_topic,
    make_records,
)
from .js_clients import Member, missing_reason, ok, run_ok, run_steps
from .node import Node

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

TXN_SETTINGS = {
    "transaction__state__log__replication__factor": "1",
    "transaction__state__log__num__partitions": "4",
}


@pytest.fixture(scope="module")
def jnode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("kafkajs") / "node1", **TXN_SETTINGS)
    n.start()
    yield n
    n.kill()


def unique(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


def batches_on_disk(node: Node, topic: str, partition: int) -> list[BatchView]:
    out: list[BatchView] = []
    for seg in sorted((node.log_dir / f"{topic}-{partition}").glob("*.log")):
        out.extend(scan_batches(seg.read_bytes(), allow_partial_tail=True))
    return out


def ck_config(node: Node, topic: str) -> dict[str, Any]:
    """A topic's config entries as confluent-kafka's admin client describes them."""
    ck = admin(node.bootstrap)  # the handle must outlive the future
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries: dict[str, Any] = ck.describe_configs([res])[res].result(15)
    return entries


def js_headers(h: Headers) -> dict[str, Any]:
    """Headers as kafkajs reports them: an object, a repeated key's values in an array."""
    out: dict[str, Any] = {}
    for k, v in h:
        s = None if v is None else v.decode()
        if k not in out:
            out[k] = s
        elif isinstance(out[k], list):
            out[k].append(s)
        else:
            out[k] = [out[k], s]
    return out


def js_message(r: Rec) -> dict[str, Any]:
    """A Rec as client.mjs's message JSON (header values must be non-null: kafkajs's choice)."""
    m: dict[str, Any] = {
        "key": None if r.key is None else r.key.decode(),
        "value": None if r.value is None else r.value.decode(),
        "partition": r.partition,
    }
    if r.headers:
        m["headers"] = js_headers(r.headers)
    return m


def js_records(topic: str, recs: list[dict[str, Any]]) -> dict[int, list[tuple[Any, ...]]]:
    out: dict[int, list[tuple[Any, ...]]] = {}
    for r in sorted(recs, key=lambda r: (r["partition"], r["offset"])):
        assert r["topic"] == topic
        out.setdefault(r["partition"], []).append((r["offset"], r["key"], r["value"], r["headers"]))
    return out


# --- topics -----------------------------------------------------------------------------------


def test_create_topics_list_and_metadata(jnode: Node) -> None:
    t1, t2 = unique("js-create"), unique("js-create")
    created, again, listed, md = run_ok(
        jnode.bootstrap,
        [
            {
                "op": "createTopics",
                "topics": [
                    {"topic": t1, "numPartitions": 3},
                    {"topic": t2, "numPartitions": 1, "configs": {"retention.ms": "123456"}},
                ],
            },
            {"op": "createTopics", "topics": [{"topic": t1, "numPartitions": 3}]},
            {"op": "listTopics"},
            {"op": "fetchTopicMetadata", "topics": [t1, t2]},
        ],
    )
    assert created == {"created": True}
    assert again == {"created": False}, "kafkajs reports an existing topic as not created"
    assert {t1, t2} <= set(listed)
    parts = {t["name"]: sorted(p["partitionId"] for p in t["partitions"]) for t in md["topics"]}
    assert parts == {t1: [0, 1, 2], t2: [0]}
    for t in md["topics"]:
        assert all(p["leader"] == 1 and p["isr"] == [1] for p in t["partitions"])
    # another stock client sees the same topics and the override kafkajs set at creation
    ck_md = admin(jnode.bootstrap).list_topics(timeout=10).topics
    assert len(ck_md[t1].partitions) == 3 and len(ck_md[t2].partitions) == 1
    entries = ck_config(jnode, t2)
    assert entries["retention.ms"].value == "123456"

    (bad,) = run_steps(
        jnode.bootstrap,
        [{"op": "createTopics", "topics": [{"topic": "bad/name", "numPartitions": 1}]}],
        retries=1,
    )
    assert bad["error"]["name"] == "KafkaJSAggregateError", bad
    assert [(e["type"], e["topic"]) for e in bad["error"]["errors"]] == [
        ("INVALID_TOPIC_EXCEPTION", "bad/name")
    ]


# --- produce ----------------------------------------------------------------------------------

COMBOS = [(acks, comp) for comp in ("none", "gzip") for acks in (0, 1, -1)]


def test_produce_each_acks_and_compression_read_by_confluent(jnode: Node) -> None:
    topic = unique("js-produce")
    create_topic(jnode.bootstrap, topic, len(COMBOS))
    per = 12
    sent: dict[int, list[Rec]] = {}
    steps = []
    for part, (acks, comp) in enumerate(COMBOS):
        recs = [
            Rec(part, r.key, r.value, r.headers)
            for r in make_records(f"{comp}{acks}", per, 1, null_header=False)
        ]
        recs[-1] = Rec(part, b"tombstone", None)  # a null value survives too
        sent[part] = recs
        steps.append(
            {
                "op": "produce",
                "topic": topic,
                "acks": acks,
                "compression": comp,
                "messages": [js_message(r) for r in recs],
            }
        )
    results = run_ok(jnode.bootstrap, steps)
    for (acks, _comp), res in zip(COMBOS, results, strict=True):
        if acks == 0:
            assert res == [], "acks=0 gets no response, so no metadata"
        else:
            (row,) = res
            assert (row["errorCode"], row["baseOffset"]) == (0, "0")

    got = ck_read_all(jnode.bootstrap, topic, len(COMBOS), per * len(COMBOS))
    by_part: dict[int, list[Rec]] = {}
    for r in got:
        by_part.setdefault(r.partition, []).append(r)

    def body(r: Rec) -> tuple[Any, ...]:
        # kafkajs takes headers as an object: a repeated key's values go out together
        return (r.partition, r.key, r.value, js_headers(r.headers))

    for part, recs in sent.items():
        assert [body(r) for r in by_part.get(part, [])] == [body(r) for r in recs], part
        assert [r.offset for r in by_part[part]] == list(range(per))
    for part, (_acks, comp) in enumerate(COMBOS):
        codecs = {b.compression for b in batches_on_disk(jnode, topic, part)}
        assert codecs == {Compression.GZIP if comp == "gzip" else Compression.NONE}, (part, comp)


def test_idempotent_producer_sequences(jnode: Node) -> None:
    topic = unique("js-idem")
    create_topic(jnode.bootstrap, topic, 2)
    producer = {"idempotent": True, "maxInFlightRequests": 1}
    first = [{"value": f"i{i}", "partition": i % 2} for i in range(10)]
    second = [{"value": f"j{i}", "partition": i % 2} for i in range(6)]
    r1, r2 = run_ok(
        jnode.bootstrap,
        [
            {"op": "produce", "producer": producer, "topic": topic, "messages": first},
            {"op": "produce", "producer": producer, "topic": topic, "messages": second},
        ],
    )
    assert sorted((r["partition"], r["baseOffset"]) for r in r1) == [(0, "0"), (1, "0")]
    assert sorted((r["partition"], r["baseOffset"]) for r in r2) == [(0, "5"), (1, "5")]
    pids = set()
    for part in (0, 1):
        batches = batches_on_disk(jnode, topic, part)
        assert [(b.base_offset, b.base_sequence, b.record_count) for b in batches] == [
            (0, 0, 5),
            (5, 5, 3),
        ], "sequences continue across sends, per partition"
        pids |= {(b.producer_id, b.producer_epoch) for b in batches}
    ((pid, epoch),) = pids
    assert pid >= 0 and epoch >= 0
    got = ck_read_all(jnode.bootstrap, topic, 2, 16)
    assert sorted(r.value or b"" for r in got) == sorted(
        m["value"].encode() for m in first + second
    )


# --- consume ----------------------------------------------------------------------------------


def test_consume_from_beginning_and_committed_offsets(jnode: Node) -> None:
    topic, group = unique("js-consume"), unique("js-g")
    create_topic(jnode.bootstrap, topic, 3)
    recs = make_records("c", 30, 3)
    assert ck_produce(jnode.bootstrap, topic, recs) == []
    consumed, offsets, groups = run_ok(
        jnode.bootstrap,
        [
            {"op": "consume", "groupId": group, "topics": [topic], "count": 30, "timeoutMs": 10000},
            {"op": "fetchOffsets", "groupId": group, "topics": [topic]},
            {"op": "listGroups"},
        ],
    )
    assert consumed["why"] == "count" and consumed["crash"] is None, consumed

    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode()

    want: dict[int, list[tuple[Any, ...]]] = {}
    for p in range(3):
        mine = [r for r in recs if r.partition == p]
        want[p] = [
            (i, text(r.key), text(r.value), js_headers(r.headers)) for i, r in enumerate(mine)
        ]
    assert js_records(topic, consumed["records"]) == want
    # kafkajs committed what it consumed; confluent-kafka reads the same committed offsets
    assert offsets == [
        {
            "topic": topic,
            "partitions": [{"partition": p, "offset": 10, "metadata": None} for p in range(3)],
        }
    ]
    c = Consumer({"bootstrap.servers": jnode.bootstrap, "group.id": group})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [10, 10, 10]
    assert {"groupId": group, "protocolType": "consumer"} in groups


def test_delete_groups(jnode: Node) -> None:
    topic, group, missing = unique("js-del"), unique("js-gd"), unique("js-none")
    create_topic(jnode.bootstrap, topic, 2)
    assert ck_produce(jnode.bootstrap, topic, [Rec(p, None, b"x") for p in (0, 1, 1)]) == []
    # (admin.setOffsets is left out: kafkajs joins the group and idles 5 s in its own fetch loop)
    consumed, fetched, listed = run_ok(
        jnode.bootstrap,
        [
            {"op": "consume", "groupId": group, "topics": [topic], "count": 3},
            {"op": "fetchOffsets", "groupId": group, "topics": [topic]},
            {"op": "listGroups"},
        ],
    )
    assert consumed["why"] == "count"
    assert [(p["partition"], p["offset"]) for p in fetched[0]["partitions"]] == [(0, 1), (1, 2)]
    assert group in {g["groupId"] for g in listed}

    both, listed, again = run_steps(
        jnode.bootstrap,
        [
            {"op": "deleteGroups", "groupIds": [group, missing]},
            {"op": "listGroups"},
            {"op": "deleteGroups", "groupIds": [group]},
        ],
        retries=1,
    )
    # only the missing group is reported; the other one was deleted
    assert [(g["groupId"], g["error"]["type"]) for g in both["error"]["groups"]] == [
        (missing, "GROUP_ID_NOT_FOUND")
    ]
    assert group not in {g["groupId"] for g in ok(listed)}
    assert [g["error"]["type"] for g in again["error"]["groups"]] == ["GROUP_ID_NOT_FOUND"]


def test_group_of_two_splits_partitions_and_rebalances_when_one_leaves(jnode: Node) -> None:
    topic, group = unique("js-group"), unique("js-grp")
    create_topic(jnode.bootstrap, topic, 4)
    a = Member(jnode.bootstrap, group, [topic])
    b: Member | None = None
    try:
        assert a.assignment(20, lambda ps: ps == [0, 1, 2, 3]) == [0, 1, 2, 3]
        b = Member(jnode.bootstrap, group, [topic])
        got_b = b.assignment(20, lambda ps: len(ps) == 2)
        got_a = a.assignment(20, lambda ps: len(ps) == 2 and not set(ps) & set(got_b))
        assert sorted(got_a + got_b) == [0, 1, 2, 3]

        described, in_use = run_steps(
            jnode.bootstrap,
            [
                {"op": "describeGroups", "groupIds": [group]},
                {"op": "deleteGroups", "groupIds": [group]},
            ],
            retries=1,
        )
        (desc,) = ok(described)
        assert [g["error"]["type"] for g in in_use["error"]["groups"]] == ["NON_EMPTY_GROUP"]
        assert (desc["state"], desc["protocolType"], desc["protocol"]) == (
            "Stable",
            "consumer",
            "RoundRobinAssigner",
        )
        assert len(desc["members"]) == 2
        assert all(m["assignmentBytes"] > 0 and m["metadataBytes"] > 0 for m in desc["members"])

        # each member receives the records of its own partitions only
        assert (
            ck_produce(jnode.bootstrap, topic, [Rec(p, None, b"r1-%d" % p) for p in range(4)]) == []
        )
        assert sorted(r["partition"] for r in a.records(2, 15)) == got_a
        assert sorted(r["partition"] for r in b.records(2, 15)) == got_b

        b.stop()  # LeaveGroup: the survivor takes every partition without waiting for a timeout
        assert a.assignment(15, lambda ps: ps == [0, 1, 2, 3]) == [0, 1, 2, 3]
        assert (
            ck_produce(jnode.bootstrap, topic, [Rec(p, None, b"r2-%d" % p) for p in range(4)]) == []
        )
        late = a.records(4, 15)
        # a resumes b's partitions where b committed when it left: nothing is read twice
        assert sorted((r["partition"], r["value"]) for r in late) == [
            (p, f"r2-{p}") for p in range(4)
        ]
        a.stop()

        (offsets,) = run_ok(
            jnode.bootstrap, [{"op": "fetchOffsets", "groupId": group, "topics": [topic]}]
        )
        assert [p["offset"] for p in offsets[0]["partitions"]] == [2, 2, 2, 2]
        (desc,) = run_ok(jnode.bootstrap, [{"op": "describeGroups", "groupIds": [group]}])[0]
        assert (desc["state"], desc["members"]) == ("Empty", [])
    finally:
        a.kill()
        if b is not None:
            b.kill()


# --- admin: configs, partitions, offsets, records, delete -------------------------------------


def test_describe_and_alter_configs(jnode: Node) -> None:
    topic = unique("js-cfg")
    create_topic(jnode.bootstrap, topic, 1, {"retention.ms": "100000", "segment.ms": "3600000"})
    res = {"type": "topic", "name": topic}
    before, altered, after, broker = run_ok(
        jnode.bootstrap,
        [
            {"op": "describeConfigs", "resources": [res]},
            {"op": "alterConfigs", "resources": [{**res, "configs": {"retention.ms": "200000"}}]},
            {"op": "describeConfigs", "resources": [res], "includeSynonyms": True},
            {
                "op": "describeConfigs",
                "resources": [{"type": "broker", "name": "1", "configNames": ["num.partitions"]}],
            },
        ],
    )

    def entries(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
        (r,) = d["resources"]
        assert r["errorCode"] == 0, r
        return {e["configName"]: e for e in r["configEntries"]}

    e = entries(before)
    assert (e["retention.ms"]["configValue"], e["retention.ms"]["configSource"]) == ("100000", 1)
    assert e["segment.ms"]["configValue"] == "3600000"
    assert (e["cleanup.policy"]["configValue"], e["cleanup.policy"]["isDefault"]) == (
        "delete",
        True,
    )
    assert altered["resources"][0]["errorCode"] == 0
    e = entries(after)
    assert e["retention.ms"]["configValue"] == "200000"
    assert e["retention.ms"]["configSynonyms"][0] == {
        "configName": "retention.ms",
        "configValue": "200000",
        "configSource": 1,
    }
    # AlterConfigs (not incremental) replaces the whole set: segment.ms falls back to default
    assert (e["segment.ms"]["configValue"], e["segment.ms"]["configSource"]) == ("604800000", 5)
    (b,) = broker["resources"]
    assert [(x["configName"], x["configValue"]) for x in b["configEntries"]] == [
        ("num.partitions", "1")
    ]
    # confluent-kafka sees what kafkajs altered
    assert ck_config(jnode, topic)["retention.ms"].value == "200000"

    bad_value, unknown_topic = run_steps(
        jnode.bootstrap,
        [
            {"op": "alterConfigs", "resources": [{**res, "configs": {"retention.ms": "soon"}}]},
            {
                "op": "alterConfigs",
                "resources": [{"type": "topic", "name": unique("nope"), "configs": {"a": "b"}}],
            },
        ],
        retries=1,
    )
    assert bad_value["error"]["type"] == "INVALID_CONFIG", bad_value
    assert unknown_topic["error"]["type"] == "UNKNOWN_TOPIC_OR_PARTITION", unknown_topic


def test_partitions_offsets_delete_records_and_topics(jnode: Node) -> None:
    topic = unique("js-adm")
    create_topic(jnode.bootstrap, topic, 2)
    grown, md = run_ok(
        jnode.bootstrap,
        [
            {"op": "createPartitions", "topicPartitions": [{"topic": topic, "count": 4}]},
            {"op": "fetchTopicMetadata", "topics": [topic]},
        ],
    )
    assert grown is None
    assert sorted(p["partitionId"] for p in md["topics"][0]["partitions"]) == [0, 1, 2, 3]
    assert len(admin(jnode.bootstrap).list_topics(topic, timeout=10).topics[topic].partitions) == 4

    base = int(time.time() * 1000) - 60_000  # recent: older records would fall to retention
    recs = [
        Rec(p, None, b"v%d-%d" % (p, i), timestamp=base + 1000 * i)
        for p in range(4)
        for i in range(p + 2)
    ]
    assert ck_produce(jnode.bootstrap, topic, recs) == []
    offsets, by_time, deleted, after = run_ok(
        jnode.bootstrap,
        [
            {"op": "fetchTopicOffsets", "topic": topic},
            {"op": "fetchTopicOffsetsByTimestamp", "topic": topic, "timestamp": base + 500},
            {
                "op": "deleteTopicRecords",
                "topic": topic,
                "partitions": [{"partition": 3, "offset": 3}],
            },
            {"op": "fetchTopicOffsets", "topic": topic},
        ],
    )
    assert offsets == [{"partition": p, "offset": p + 2, "high": p + 2, "low": 0} for p in range(4)]
    assert sorted((r["partition"], r["offset"]) for r in by_time) == [(p, 1) for p in range(4)]
    assert deleted is None
    assert after[3] == {"partition": 3, "offset": 5, "high": 5, "low": 3}
    assert after[:3] == offsets[:3]
    left = ck_read_all(jnode.bootstrap, topic, 4, len(recs) - 3)
    assert sorted(r.offset for r in left if r.partition == 3) == [3, 4]

    (shrink, beyond) = run_steps(
        jnode.bootstrap,
        [
            {"op": "createPartitions", "topicPartitions": [{"topic": topic, "count": 2}]},
            {
                "op": "deleteTopicRecords",
                "topic": topic,
                "partitions": [{"partition": 0, "offset": 99}],
            },
        ],
        retries=1,
    )
    assert shrink["error"]["type"] == "INVALID_PARTITIONS", shrink
    # kafkajs wraps the per-partition errors in its retrier's non-retriable error
    cause = beyond["error"]["cause"]
    assert [(p["partition"], p["error"]["type"]) for p in cause["partitions"]] == [
        (0, "OFFSET_OUT_OF_RANGE")
    ], beyond

    _, listed = run_ok(
        jnode.bootstrap, [{"op": "deleteTopics", "topics": [topic]}, {"op": "listTopics"}]
    )
    assert topic not in listed
    assert topic not in admin(jnode.bootstrap).list_topics(timeout=10).topics


# --- transactions -----------------------------------------------------------------------------


def markers(node: Node, topic: str, partition: int) -> list[str]:
    out = []
    for b in batches_on_disk(node, topic, partition):
        if b.is_control:
            rec = next(iter_records(b))
            out.append(ControlType(parse_control_record(rec.key, rec.value).type).name)
    return out


def read_committed_values(bootstrap: str, topic: str, parts: int, n: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("rc"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        return [r.value or b"" for r in ck_drain(c, n, 15, idle=0.5)]
    finally:
        c.close()


def test_transaction_commit_abort_and_send_offsets(jnode: Node) -> None:
    src, out, group, tid = unique("js-tin"), unique("js-tout"), unique("js-tg"), unique("js-tid")
    create_topic(jnode.bootstrap, src, 1)
    create_topic(jnode.bootstrap, out, 2)
    assert ck_produce(jnode.bootstrap, src, [Rec(0, None, b"in-%d" % i) for i in range(6)]) == []
    msgs = [{"value": f"c-{i}", "partition": i % 2} for i in range(4)]
    aborted = [{"value": f"a-{i}", "partition": i % 2} for i in range(4)]

    def offsets_to(n: int) -> dict[str, Any]:
        return {
            "groupId": group,
            "topics": [{"topic": src, "partitions": [{"partition": 0, "offset": n}]}],
        }

    res = run_ok(
        jnode.bootstrap,
        [
            {
                "op": "transaction",
                "transactionalId": tid,
                "topic": out,
                "messages": msgs,
                "sendOffsets": offsets_to(3),
                "commit": True,
            },
            {"op": "fetchOffsets", "groupId": group, "topics": [src]},
            {
                "op": "transaction",
                "transactionalId": tid,
                "topic": out,
                "messages": aborted,
                "sendOffsets": offsets_to(6),
                "commit": False,
            },
            {"op": "fetchOffsets", "groupId": group, "topics": [src]},
        ],
    )
    assert res[0] == "committed" and res[2] == "aborted"
    assert res[1][0]["partitions"] == [{"partition": 0, "offset": 3, "metadata": None}]
    assert res[3][0]["partitions"] == [{"partition": 0, "offset": 3, "metadata": None}], (
        "offsets sent in an aborted transaction are not committed"
    )
    for part in (0, 1):
        assert markers(jnode, out, part) == ["COMMIT", "ABORT"]
        data = [b for b in batches_on_disk(jnode, out, part) if not b.is_control]
        assert all(b.is_transactional for b in data)
    got = read_committed_values(jnode.bootstrap, out, 2, len(msgs))
    assert sorted(got) == sorted(m["value"].encode() for m in msgs)


def test_read_committed_consumer_skips_aborted_records(jnode: Node) -> None:
    topic, tid = unique("js-rc"), unique("js-rcid")
    create_topic(jnode.bootstrap, topic, 1)
    steps = [
        {
            "op": "transaction",
            "transactionalId": tid,
            "topic": topic,
            "commit": commit,
            "messages": [{"value": f"{tag}-{i}", "partition": 0} for i in range(3)],
        }
        for tag, commit in (("c1", True), ("a", False), ("c2", True))
    ]
    steps.append(
        {
            "op": "consume",
            "groupId": unique("js-rcg"),
            "topics": [topic],
            "count": 6,
            "timeoutMs": 4000,
        }
    )
    steps.append(
        {
            "op": "consume",
            "groupId": unique("js-rug"),
            "topics": [topic],
            "count": 9,
            "readUncommitted": True,
        }
    )
    *txns, committed, everything = run_ok(jnode.bootstrap, steps)
    assert txns == ["committed", "aborted", "committed"]
    values = [r["value"] for r in committed["records"]]
    assert values == [f"c1-{i}" for i in range(3)] + [f"c2-{i}" for i in range(3)], values
    # read_uncommitted sees the aborted records too (offset 3 is the first transaction's marker)
    assert [(r["offset"], r["value"]) for r in everything["records"]] == [
        (off, f"{tag}-{i}")
        for base, tag in ((0, "c1"), (4, "a"), (8, "c2"))
        for i, off in enumerate(range(base, base + 3))
    ]
