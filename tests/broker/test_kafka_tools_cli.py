"""The pure parts of the Kafka tools (docs/tools.md), against Kafka 4.1's behaviour: Java's
String/TopicPartition hashes and HashMap order, the console producer's line reader, the
DefaultMessageFormatter layout, kafka-topics' parsers, filters and describe reports,
kafka-get-offsets' partition rules and kafka-delete-records' JSON checks."""

from __future__ import annotations

import argparse
import io
import re
import uuid

import pytest

from broker.cli import topics_options
from broker.cli.console_producer import LineReader, ReaderError
from broker.cli.delete_records import parse_offsets
from broker.cli.get_offsets import parse_time, rules
from broker.cli.java_order import hash_order, string_hash, topic_partition_hash
from broker.cli.jopt import Failed, Fatal
from broker.cli.kafka_admin import PartitionInfo, TopicFilter, kafka_uuid
from broker.cli.message_formatters import DefaultMessageFormatter, Record
from broker.cli.topics import Config, Reassignment, Report, _partition_line, _replication_factor


def test_java_hashes_and_hashmap_order() -> None:
    assert string_hash("hello") == 99162322 and string_hash("") == 0
    assert string_hash("polygenelubricants") == -(2**31)  # overflows to Integer.MIN_VALUE
    assert topic_partition_hash("t", 0) == 31 * 31 + string_hash("t")
    # the order Kafka's kafka-log-dirs.sh prints its JSON keys in
    assert hash_order(["version", "brokers"], string_hash) == ["brokers", "version"]
    assert hash_order(["logDir", "error", "partitions"], string_hash) == [
        "partitions",
        "error",
        "logDir",
    ]
    # integers: by value within the table; past 12 entries the table doubles to 32
    assert hash_order([17, 1, 16], lambda i: i) == [16, 17, 1]
    assert hash_order([*range(13, 0, -1), 17], lambda i: i) == [*range(1, 14), 17]


def test_kafka_uuid_is_url_safe_base64() -> None:
    u = uuid.UUID(bytes=bytes([0xFB, 0xFF] + [0] * 14))
    assert kafka_uuid(u) == "-_8AAAAAAAAAAAAAAAAAAA"
    assert kafka_uuid(None) == "AAAAAAAAAAAAAAAAAAAAAA"


def _reader(**props: str) -> LineReader:
    return LineReader({"topic": "t", **props})


def test_line_reader() -> None:
    line = _reader().parse("k\tv")  # no key parsing: the whole line is the value
    assert (line.key, line.value, line.headers) == (None, b"k\tv", [])
    line = _reader(**{"parse.key": "true"}).parse("k\tv\tw")
    assert (line.key, line.value) == (b"k", b"v\tw")
    r = _reader(**{"parse.key": "true", "parse.headers": "true", "null.marker": "N"})
    line = r.parse("h1:a,h2:N,h3:\tN\tN")
    assert (line.key, line.value) == (None, None)
    assert line.headers == [("h1", b"a"), ("h2", None), ("h3", b"")]
    line = _reader(**{"parse.key": "true", "ignore.error": "true"}).parse("no-key")
    assert (line.key, line.value) == (None, b"no-key")
    r = _reader(**{"parse.key": "true"})
    r.parse("k\tv")
    with pytest.raises(ReaderError, match=r"^No key separator found on line number 2: 'x'$"):
        r.parse("x")
    with pytest.raises(ReaderError, match=r"^No header key separator found in pair 'bad'"):
        _reader(**{"parse.headers": "true"}).parse("bad\tv")
    with pytest.raises(ReaderError, match=r"^null.marker and key.separator may not be equal$"):
        _reader(**{"null.marker": "\t"})
    with pytest.raises(ReaderError, match=r"headers.delimiter and headers.separator"):
        _reader(**{"headers.separator": "\t"})


def _fmt(**props: str) -> bytes:
    f = DefaultMessageFormatter.configure(props, io.StringIO())
    out = io.BytesIO()
    f.write(Record("t", 0, 123, 456, 0, b"key", b"value", [("h1", b"v1"), ("h2", None)]), out)
    return out.getvalue()


def test_default_message_formatter() -> None:
    assert _fmt() == b"value\n"
    every = {f"print.{p}": "true" for p in ("timestamp", "partition", "offset", "headers", "key")}
    assert _fmt(**every) == b"CreateTime:456\tPartition:0\tOffset:123\th1:v1,h2:null\tkey\tvalue\n"
    assert _fmt(**every, **{"print.value": "false", "key.separator": "|"}) == (
        b"CreateTime:456|Partition:0|Offset:123|h1:v1,h2:null|key\n"
    )
    assert _fmt(**{"print.value": "false"}) == b""
    assert _fmt(**{"print.epoch": "true", "print.delivery": "true"}) == (
        b"Delivery:NOT_PRESENT\tEpoch:NOT_PRESENT\tvalue\n"
    )
    assert _fmt(**{"print.key": "TRUE ", "line.separator": "|"}) == b"key\tvalue|"
    deser = "org.apache.kafka.common.serialization.BytesDeserializer"
    f = DefaultMessageFormatter.configure({"value.deserializer": deser}, io.StringIO())
    out = io.BytesIO()
    f.write(Record("t", 0, 0, -1, -1, None, b"a\x00\\", ()), out)
    assert out.getvalue() == b"a\\x00\\x5C\n"


def test_topics_parsers() -> None:
    assert topics_options.parse_replica_assignment("1:2, 2:3") == {0: [1, 2], 1: [2, 3]}
    with pytest.raises(Failed, match=r"duplicate entries: 1$"):
        topics_options.parse_replica_assignment("1:1")
    with pytest.raises(Failed, match=r"Partition 1 has different replication factor: \[1\]"):
        topics_options.parse_replica_assignment("1:2,1")
    assert topics_options.parse_configs(["a = b", "c=d"]) == {"a": "b", "c": "d"}
    for bad in (["a"], ["a=b=c"], ["a="]):
        with pytest.raises(Fatal):
            topics_options.parse_configs(bad)
    f = TopicFilter("'orders, refunds'")
    assert f.allows("orders") and f.allows("refunds") and not f.allows("orders2")


def _p(leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionInfo:
    return PartitionInfo(0, leader, 0, replicas, isr, (), (), (), 0)


def test_describe_reports() -> None:
    ns = argparse.Namespace(
        under_replicated_partitions=True, under_min_isr_partitions=False,
        at_min_isr_partitions=False, unavailable_partitions=False, topics_with_overrides=False,
    )  # fmt: skip
    report = Report(ns, {1, 2, 3})
    config = Config((("min.insync.replicas", "2", False),))
    assert not report.configs
    assert report.wants(_p(1, (1, 2, 3), (1, 2)), None, config)
    assert not report.wants(_p(1, (1, 2, 3), (1, 2, 3)), None, config)
    # moving from 1,2,3 to 4,5,6: replicas 1..6 with 4,5,6 adding; RF is that of the target
    moving = Reassignment((1, 2, 3, 4, 5, 6), (4, 5, 6), (1, 2, 3))
    p = _p(1, (1, 2, 3, 4, 5, 6), (1, 2, 3))
    assert _replication_factor(p, moving) == 3 and not report.wants(p, moving, config)
    assert _partition_line("t", p, moving) == (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3,4,5,6\tIsr: 1,2,3"
        "\tAdding Replicas: 4,5,6\tRemoving Replicas: 1,2,3\tElr: \tLastKnownElr: "
    )
    ns.under_replicated_partitions, ns.unavailable_partitions = False, True
    report = Report(ns, {1, 2})
    assert report.wants(_p(-1, (3,), (3,)), None, config)
    assert report.wants(_p(3, (3,), (3,)), None, config)  # leader not a live broker
    assert not report.wants(_p(1, (1,), (1,)), None, config)
    no_elr = PartitionInfo(0, -1, 0, (1,), (), None, None, (), 0)
    assert _partition_line("t", no_elr, None).endswith(
        "Leader: none\tReplicas: 1\tIsr: \tElr: N/A\tLastKnownElr: N/A"
    )


def _rules(**kw: str | None) -> list[tuple[bool, list[int]]]:
    ns = argparse.Namespace(**{"topic_partitions": None, "topic": None, "partitions": None, **kw})
    return [(r.topics.allows("t"), [p for p in range(10) if r.allows(p)]) for r in rules(ns)]


def test_get_offsets_rules_and_times() -> None:
    assert _rules(topic_partitions="t:1-3,:5,x:-2,t:8-") == [
        (True, [1, 2]),
        (True, [5]),
        (False, [0, 1]),
        (True, [8, 9]),
    ]
    assert _rules(topic="t|u", partitions="0,4") == [(True, [0, 4])]
    assert _rules() == [(True, list(range(10)))]
    assert [parse_time(t) for t in ("latest", "earliest", "max-timestamp", "-4", "17")] == [
        -1, -2, -3, -4, 17,
    ]  # fmt: skip
    with pytest.raises(Failed, match=r"^Error occurred: Malformed time argument x"):
        parse_time("x")
    with pytest.raises(Failed, match=r"^Error occurred: Invalid rule specification: t:a"):
        _rules(topic_partitions="t:a")


def test_delete_records_json() -> None:
    assert parse_offsets('{"partitions": [{"topic": "t", "partition": 1, "offset": 5}]}') == {
        ("t", 1): 5
    }
    for text, message in [
        ("[]", "The input string is not a valid JSON"),
        ('{"partitions": [{"topic": "t", "offset": 5}]}', "No such field exists: `partition`"),
        ('{"partitions": [{"topic": "t", "partition": "1", "offset": 5}]}',
         'Expected `int` value, received "1"'),
    ]:  # fmt: skip
        with pytest.raises(Fatal, match="^" + re.escape(message) + "$"):
            parse_offsets(text)
