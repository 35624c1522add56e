"""``*.replication.throttled.replicas`` values: the parser and the topic-config validation."""

import pytest

from broker.config.server_config import ConfigError, validate_topic_config
from broker.config.throttled_replicas import (
    ThrottledReplicas,
    ThrottledReplicasError,
    parse_throttled_replicas,
)

KEY = "mirror.replication.throttled.replicas"


def test_lists_wildcard_and_empty() -> None:
    r = parse_throttled_replicas(" 0:4 , 2:4,1:7,,")
    assert r == ThrottledReplicas(replicas=frozenset({(0, 4), (2, 4), (1, 7)}))
    assert r.throttles(0, 4) and r.throttles(2, 4) and r.throttles(1, 7)
    assert not r.throttles(1, 4) and not r.throttles(0, 7) and not r.throttles(3, 4)
    assert r.partitions_of(4) == {0, 2}
    every = parse_throttled_replicas(" * ")
    assert every.every and every.throttles(12345, 99)
    for empty in ("", "  "):
        none = parse_throttled_replicas(empty)
        assert not none.every and not none.replicas and not none.throttles(0, 0)


@pytest.mark.parametrize(
    ("value", "bad"),
    [
        ("0-1", "'0-1'"),
        ("0:4,x", "'x'"),
        ("0:4,1:", "'1:'"),
        (":4", "':4'"),
        ("0:4:1", "'0:4:1'"),
        ("-1:4", "'-1:4'"),
        ("[0:4]", "'[0:4]'"),
        ("0 : 4", "'0 : 4'"),
        ("\u0661:\u0664", "'\u0661:\u0664'"),  # digits, but not ASCII ones
    ],
)
def test_bad_entries_are_named(value: str, bad: str) -> None:
    with pytest.raises(ThrottledReplicasError, match="partitionId:brokerId") as e:
        parse_throttled_replicas(value)
    assert bad in str(e.value)


def test_wildcard_must_stand_alone() -> None:
    with pytest.raises(ThrottledReplicasError, match=r"'\*' must be the only entry"):
        parse_throttled_replicas("*,0:1")


def test_topic_config_validation_names_the_bad_entry() -> None:
    assert validate_topic_config(KEY, "0:1, 1:2") == "0:1,1:2"
    assert validate_topic_config(KEY, "*") == "*"
    with pytest.raises(ConfigError) as e:
        validate_topic_config(KEY, "0:1,oops")
    assert str(e.value).startswith(f"Invalid value 0:1,oops for configuration {KEY}: 'oops'")
    # the same grammar for Kafka's own throttle lists
    with pytest.raises(ConfigError, match="'a:b'"):
        validate_topic_config("leader.replication.throttled.replicas", "a:b")
