from __future__ import annotations

from broker.config.catalog import BROKER_KEYS, TOPIC_KEYS, Origin, UpdateMode
from broker.config.values import ConfigType, java_double_str, parse_value


def test_kafka_defaults_as_described() -> None:
    assert BROKER_KEYS["message.max.bytes"].default == "1048588"
    assert BROKER_KEYS["log.retention.hours"].default == "168"
    assert BROKER_KEYS["log.retention.ms"].default is None
    assert BROKER_KEYS["log.cleaner.min.cleanable.ratio"].default == "0.5"
    assert BROKER_KEYS["log.cleaner.io.max.bytes.per.second"].default == "1.7976931348623157E308"
    assert BROKER_KEYS["node.id"].required


def test_update_modes_and_sensitivity() -> None:
    assert BROKER_KEYS["node.id"].mode is UpdateMode.READ_ONLY
    assert BROKER_KEYS["log.retention.ms"].mode is UpdateMode.CLUSTER_WIDE
    assert BROKER_KEYS["listeners"].mode is UpdateMode.PER_BROKER
    assert BROKER_KEYS["num.network.threads"].mode is UpdateMode.CLUSTER_WIDE
    assert BROKER_KEYS["ssl.keystore.password"].sensitive
    assert not BROKER_KEYS["ssl.keystore.location"].sensitive


def test_kip_1279_and_own_keys() -> None:
    assert BROKER_KEYS["mirror.topic.num.partitions"].default == "50"
    assert BROKER_KEYS["mirror.metadata.refresh.interval.ms"].default == "30000"
    assert BROKER_KEYS["mirror.replication.throttled.rate"].origin is Origin.KIP_1279
    assert BROKER_KEYS["metrics.port"].origin is Origin.KMIRROR
    assert TOPIC_KEYS["mirror.name"].hidden
    assert TOPIC_KEYS["mirror.support.unclean.leader.election"].default == "false"


def test_topic_synonyms_exist_and_match_defaults() -> None:
    for tk in TOPIC_KEYS.values():
        for syn in tk.synonyms:
            assert syn.broker_key in BROKER_KEYS, syn
        if tk.synonyms:
            last = tk.synonyms[-1]
            default = BROKER_KEYS[last.broker_key].default
            assert default is not None
            if tk.type in (ConfigType.INT, ConfigType.LONG):
                assert int(default) * last.factor == int(tk.default or "0"), tk.name
            else:
                assert default == tk.default, tk.name
    assert [s.broker_key for s in TOPIC_KEYS["retention.ms"].synonyms] == [
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ]


def test_java_double_rendering() -> None:
    assert java_double_str(0.5) == "0.5"
    assert java_double_str(2147483647.0) == "2.147483647E9"
    assert java_double_str(1e-4) == "1.0E-4"
    assert java_double_str(10.0) == "10.0"


def test_parse_value() -> None:
    assert parse_value(ConfigType.BOOLEAN, " TRUE ") is True
    assert parse_value(ConfigType.LIST, "a , b,c") == ["a", "b", "c"]
    assert parse_value(ConfigType.LIST, "  ") == []
    assert parse_value(ConfigType.STRING, "  x ") == "x"
