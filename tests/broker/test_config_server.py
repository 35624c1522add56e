from __future__ import annotations

from pathlib import Path

import pytest

from broker.config.listeners import Listener, ListenerSyntaxError, parse_listeners, parse_voters
from broker.config.properties import parse_properties
from broker.config.server_config import (
    ConfigError,
    ConfigSource,
    load_server_config,
    parse_server_config,
    validate_topic_config,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=/tmp/x
"""


def cfg(extra: str = "", base: str = BASE):  # type: ignore[no-untyped-def]
    return parse_server_config(parse_properties(base + extra, "test.properties"))


def test_minimal_combined_node() -> None:
    c, warnings = cfg()
    assert warnings == []
    assert c.node_id == 1 and c.is_broker and c.is_controller
    assert c.listeners[0] == Listener("PLAINTEXT", None, 9092, "PLAINTEXT")
    assert c.advertised_listeners == (c.listeners[0],)
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c.log_dirs == ("/tmp/x",) and c.metadata_log_dir == "/tmp/x"
    assert c.log_retention_ms == 168 * 3_600_000
    assert c.message_max_bytes == 1048588 and c.metrics_port == 0


def test_metrics_host_defaults_to_every_interface() -> None:
    assert cfg()[0].metrics_host == "0.0.0.0"
    c, warnings = cfg("metrics.port=9308\nmetrics.host=127.0.0.1\n")
    assert warnings == [] and (c.metrics_host, c.metrics_port) == ("127.0.0.1", 9308)


def test_shipped_configs_load_without_warnings() -> None:
    for name in ("server", "node-1", "node-2", "node-3"):
        c, warnings = load_server_config(ROOT / "config" / f"{name}.properties")
        assert warnings == [], name
        assert c.metrics_port > 0
    ports = {
        load_server_config(ROOT / f"config/node-{n}.properties")[0].listeners[0].port
        for n in (1, 2, 3)
    }
    assert len(ports) == 3


def test_stock_kafka_file_loads_without_warnings() -> None:
    c, warnings = load_server_config(ROOT / "tests/broker/fixtures/kafka-4.1-server.properties")
    assert warnings == []  # its share coordinator keys are served since KIP-932
    assert c.share_coordinator_state_topic_replication_factor == 1
    assert c.share_coordinator_state_topic_min_isr == 1
    assert c.controller_quorum_bootstrap_servers[0].port == 9093
    assert c.log_dirs == ("/tmp/kraft-combined-logs",)


def test_unknown_key_names_file_line_and_suggestion() -> None:
    with pytest.raises(ConfigError) as e:
        cfg("log.retention.hour=5\n")
    msg = str(e.value)
    assert "test.properties:8" in msg and "'log.retention.hour'" in msg
    assert "log.retention.hours" in msg


def test_unimplemented_kafka_keys_one_warning() -> None:
    # (ssl.keystore.location, listener.name.x.ssl.* and ssl.principal.mapping.rules are
    # implemented since TLS listeners and node links)
    _, warnings = cfg(
        "delegation.token.max.lifetime.ms=5\nlog.cleaner.io.buffer.size=2\nlistener.name.x.foo=1\n"
    )
    assert len(warnings) == 1
    for k in (
        "delegation.token.max.lifetime.ms",
        "log.cleaner.io.buffer.size",
        "listener.name.x.foo",
    ):
        assert k in warnings[0]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("num.partitions=zero\n", "num.partitions"),
        ("num.partitions=0\n", "at least 1"),
        ("auto.create.topics.enable=yes\n", "true or false"),
        ("message.max.bytes=99999999999\n", "INT"),
        ("metrics.port=70000\n", "metrics.port"),
        ("log.cleanup.policy=delete,shred\n", "shred"),
        ("compression.type=brotli\n", "compression.type"),
        ("queued.max.request.bytes=1000\n", "at least socket.request.max.bytes"),
        ("sasl.server.max.receive.size=0\n", "sasl.server.max.receive.size"),
    ],
)
def test_bad_values(extra: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        cfg(extra)


def test_request_memory_limits() -> None:
    c, warnings = cfg()
    assert (c.queued_max_request_bytes, c.sasl_server_max_receive_size) == (-1, 512 * 1024)
    c, warnings = cfg(
        "queued.max.request.bytes=104857600\nsasl.server.max.receive.size=65536\n"
        "socket.request.max.bytes=104857600\n"
    )
    assert warnings == []  # both implemented, not "accepted but not implemented"
    assert (c.queued_max_request_bytes, c.sasl_server_max_receive_size) == (104857600, 65536)
    assert cfg("queued.max.request.bytes=0\n")[0].queued_max_request_bytes == 0  # no bound


def test_value_error_names_key_value_and_line() -> None:
    with pytest.raises(ConfigError) as e:
        cfg("num.partitions=-3\n")
    assert "'-3'" in str(e.value) and "test.properties:8" in str(e.value)


def test_node_id_required() -> None:
    with pytest.raises(ConfigError, match=r"node\.id is required"):
        cfg(base=BASE.replace("node.id=1\n", ""))


@pytest.mark.parametrize("roles", ["", "worker", "broker,broker", "broker,controller,x"])
def test_bad_process_roles(roles: str) -> None:
    with pytest.raises(ConfigError, match=r"process\.roles"):
        cfg(base=BASE.replace("process.roles=broker,controller", f"process.roles={roles}"))


def test_broker_only_node() -> None:
    base = BASE.replace("process.roles=broker,controller", "process.roles=broker").replace(
        ",CONTROLLER://localhost:9093", ""
    )
    c, _ = cfg(base=base)
    assert not c.is_controller
    with pytest.raises(ConfigError, match="broker-only"):
        cfg(
            base=base.replace(
                "listeners=PLAINTEXT://:9092", "listeners=PLAINTEXT://:9092,CONTROLLER://:9093"
            )
        )


def test_controller_listener_mapped_when_map_unset() -> None:
    c, _ = cfg(
        base=BASE.replace(
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n", ""
        )
    )
    assert c.listener("controller") is not None
    assert c.listener_security_protocol_map["CONTROLLER"] == "PLAINTEXT"


def test_listener_without_protocol_mapping() -> None:
    with pytest.raises(ConfigError, match="EXTERNAL"):
        cfg("listeners=PLAINTEXT://:9092,CONTROLLER://:9093,EXTERNAL://:9094\n")


def test_bad_listener_syntax() -> None:
    with pytest.raises(ConfigError, match="listeners"):
        cfg("listeners=PLAINTEXT:9092\n")
    with pytest.raises(ConfigError, match="different port"):
        cfg("listeners=PLAINTEXT://:9093,CONTROLLER://:9093\n")


def test_advertised_listener_needs_host() -> None:
    with pytest.raises(ConfigError, match=r"advertised\.listeners"):
        cfg("advertised.listeners=PLAINTEXT://:9092\n")


def test_voters_syntax_and_membership() -> None:
    with pytest.raises(ConfigError, match=r"controller\.quorum\.voters"):
        cfg("controller.quorum.voters=localhost:9093\n")
    with pytest.raises(ConfigError, match="not a voter"):
        cfg("controller.quorum.voters=2@localhost:9093\n")
    with pytest.raises(ConfigError, match="quorum"):
        cfg(base=BASE.replace("controller.quorum.voters=1@localhost:9093\n", ""))


def test_parse_listeners_and_voters() -> None:
    ls = parse_listeners("PLAINTEXT://:9092,CONTROLLER://localhost:9093,SSL://[::1]:9094")
    assert [(li.name, li.host, li.port) for li in ls] == [
        ("PLAINTEXT", None, 9092),
        ("CONTROLLER", "localhost", 9093),
        ("SSL", "::1", 9094),
    ]
    assert ls[1].security_protocol == "PLAINTEXT"  # unmapped names default to PLAINTEXT
    with pytest.raises(ListenerSyntaxError):
        parse_listeners("X://:1", {"PLAINTEXT": "PLAINTEXT"})
    vs = parse_voters("1@a:1,2@[::1]:2")
    assert [(v.node_id, v.host, v.port) for v in vs] == [(1, "a", 1), (2, "::1", 2)]


def test_retention_precedence_and_topic_defaults() -> None:
    c, _ = cfg("log.retention.hours=1\nlog.retention.minutes=30\nlog.segment.bytes=2097152\n")
    assert c.log_retention_ms == 30 * 60_000
    d = c.topic_defaults()
    assert d["retention.ms"] == str(30 * 60_000)
    assert d["segment.bytes"] == "2097152"
    assert d["max.message.bytes"] == "1048588"
    assert d["cleanup.policy"] == "delete"
    assert "mirror.name" not in d


def test_describe_broker_configs() -> None:
    c, _ = cfg("ssl.keystore.password=secret\nnum.partitions=3\n")
    rows = {r.name: r for r in c.describe_broker_configs(dynamic={"log.retention.ms": "1000"})}
    assert rows["num.partitions"].value == "3"
    assert rows["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG == 4
    assert rows["log.retention.bytes"].source == ConfigSource.DEFAULT_CONFIG == 5
    assert rows["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG == 2
    assert rows["log.retention.ms"].value == "1000"
    assert rows["ssl.keystore.password"].value is None and rows["ssl.keystore.password"].sensitive
    assert rows["node.id"].read_only and not rows["log.retention.ms"].read_only
    assert rows["num.partitions"].config_type == 3
    assert "leader.replication.throttled.rate" not in rows


def test_validate_topic_config() -> None:
    assert validate_topic_config("retention.ms", " 1000 ") == "1000"
    assert validate_topic_config("cleanup.policy", "compact , delete") == "compact,delete"
    assert validate_topic_config("mirror.replication.throttled.replicas", "0:1,1:2") == "0:1,1:2"
    assert validate_topic_config("min.cleanable.dirty.ratio", "0.25") == "0.25"
    with pytest.raises(ConfigError, match=r"Unknown topic config name: retention\.msx"):
        validate_topic_config("retention.msx", "1")
    for key, bad in [
        ("retention.ms", "-5"),
        ("segment.bytes", "10"),
        ("min.insync.replicas", "x"),
        ("compression.type", "brotli"),
        ("mirror.replication.throttled.replicas", "0-1"),
        ("mirror.name", "bad name"),
    ]:
        with pytest.raises(ConfigError, match="Invalid value"):
            validate_topic_config(key, bad)


def test_connection_limit_overrides_are_host_count_pairs() -> None:
    from broker.config.server_config import parse_ip_overrides

    assert parse_ip_overrides(" 127.0.0.1:200 , host-a:5,::1:7") == {
        "127.0.0.1": 200,
        "host-a": 5,
        "::1": 7,
    }
    assert parse_ip_overrides("") == {}
    with pytest.raises(ValueError, match="'host' is not host:count"):
        parse_ip_overrides("host")
    with pytest.raises(ValueError, match="not host:count"):
        parse_ip_overrides("h:x")


def test_per_listener_connection_limits() -> None:
    c, warnings = cfg(
        "listener.name.plaintext.max.connections=10\n"
        "listener.name.PLAINTEXT.max.connection.creation.rate=3\n"
        "max.connections=20\nmax.connections.per.ip=4\nconnections.max.idle.ms=-1\n"
    )
    assert warnings == []
    assert c.listener_max_connections == {"PLAINTEXT": 10}
    assert c.listener_max_connection_creation_rate == {"PLAINTEXT": 3}
    assert (c.max_connections, c.max_connections_per_ip) == (20, 4)
    assert c.connections_max_idle_ms == -1  # never close idle connections, as Kafka
    defaults = cfg()[0]
    assert defaults.connections_max_idle_ms == 600_000
    assert defaults.max_connections == defaults.max_connections_per_ip == 2**31 - 1


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("max.connections=-1", "max.connections"),
        ("max.connections.per.ip=-2", "max.connections.per.ip"),
        ("max.connection.creation.rate=-1", "max.connection.creation.rate"),
        ("max.connections.per.ip.overrides=1.2.3.4:x", "max.connections.per.ip.overrides"),
        ("max.connections.per.ip.overrides=1.2.3.4:-1", "max.connections.per.ip.overrides"),
        ("max.connections.per.ip=0", "max.connections.per.ip"),
        ("connections.max.idle.ms=soon", "connections.max.idle.ms"),
        ("connections.max.reauth.ms=-1", "connections.max.reauth.ms"),
        ("listener.name.plaintext.max.connections=-1", "listener.name.plaintext.max.connections"),
        ("listener.name.plaintext.max.connections=x", "listener.name.plaintext.max.connections"),
        (
            "listener.name.nope.max.connection.creation.rate=5",
            "listener.name.nope.max.connection.creation.rate",
        ),
    ],
)
def test_bad_connection_limits_name_their_key(line: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"for {key}:"):
        cfg(line + "\n")


def test_zero_per_ip_is_allowed_with_overrides() -> None:
    c, _ = cfg("max.connections.per.ip=0\nmax.connections.per.ip.overrides=10.0.0.1:5\n")
    assert c.max_connections_per_ip == 0 and c.max_connections_per_ip_overrides == {"10.0.0.1": 5}


def test_reauth_ms_is_implemented() -> None:
    c, warnings = cfg("connections.max.reauth.ms=3600000\n")
    assert warnings == [] and c.static_values["connections.max.reauth.ms"] == "3600000"


def test_consumer_group_assignors_by_name_or_kafka_class() -> None:
    c, _ = cfg()
    assert c.group_consumer_assignors == ("uniform", "range")
    c, _ = cfg(
        "group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor\n"
    )
    assert c.group_consumer_assignors == ("range",)
    with pytest.raises(ConfigError, match="unknown assignor 'sticky'"):
        cfg("group.consumer.assignors=range,sticky\n")


def test_consumer_group_migration_policy() -> None:
    c, warnings = cfg()
    assert c.group_consumer_migration_policy == "bidirectional" and warnings == []
    c, warnings = cfg("group.consumer.migration.policy=Upgrade\n")
    assert c.group_consumer_migration_policy == "upgrade" and warnings == []
    with pytest.raises(ConfigError, match="not one of"):
        cfg("group.consumer.migration.policy=sideways\n")


def test_rebalance_protocols_must_keep_classic() -> None:
    c, warnings = cfg("group.coordinator.rebalance.protocols=classic\n")
    assert c.group_coordinator_rebalance_protocols == ("classic",) and warnings == []
    with pytest.raises(ConfigError, match="must hold classic"):
        cfg("group.coordinator.rebalance.protocols=consumer\n")


def test_replica_selector_class_rack_aware_or_leader_only() -> None:
    """KIP-392: unset or empty is leader-only reads; the rack-aware selector is accepted
    without a warning; any other class is refused at start-up, naming the key and the class."""
    c, warnings = cfg()
    assert c.replica_selector_class is None and warnings == []
    c, _ = cfg("replica.selector.class=\n")
    assert c.replica_selector_class is None
    c, warnings = cfg(
        "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector\n"
        "broker.rack=eu-west-1a\n"
    )
    assert c.replica_selector_class == "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert c.broker_rack == "eu-west-1a" and warnings == []
    with pytest.raises(
        ConfigError, match=r"replica\.selector\.class.*unknown replica selector 'com"
    ):
        cfg("replica.selector.class=com.example.NearestSelector\n")
