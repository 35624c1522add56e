"""Node-to-node connections are PLAINTEXT for now: a cluster of several nodes whose controller
or inter-broker listener is not is refused at start, naming the key (not left to fail in
silence); a cluster of one node may use any protocol there (it talks to itself in process)."""

import pytest

from broker.config.properties import parse_properties
from broker.config.server_config import ConfigError, ServerConfig, parse_server_config
from broker.quorum.voters import check_node_links, quorum_voters

BASE = """\
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://:9092,CONTROLLER://:9093,SECURE://:9094
controller.listener.names=CONTROLLER
log.dirs=/tmp/x
"""


def config(voters: str, protocols: str, ibl: str = "PLAINTEXT") -> ServerConfig:
    text = (
        BASE
        + f"controller.quorum.voters={voters}\n"
        + f"listener.security.protocol.map={protocols}\n"
        + f"inter.broker.listener.name={ibl}\n"
    )
    c, _ = parse_server_config(parse_properties(text, "node.properties"))
    return c


PLAIN = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:SASL_SSL"
THREE = "1@localhost:9093,2@localhost:9193,3@localhost:9293"


def test_plaintext_links_between_nodes_are_accepted() -> None:
    c = config(THREE, PLAIN)
    check_node_links(c, quorum_voters(c))


def test_a_secured_controller_listener_is_refused_on_several_nodes() -> None:
    c = config(THREE, "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL,SECURE:SASL_SSL")
    with pytest.raises(ConfigError) as e:
        check_node_links(c, quorum_voters(c))
    assert "listener.security.protocol.map" in str(e.value) and "CONTROLLER" in str(e.value)


def test_a_secured_inter_broker_listener_is_refused_on_several_nodes() -> None:
    c = config(THREE, PLAIN, ibl="SECURE")
    with pytest.raises(ConfigError) as e:
        check_node_links(c, quorum_voters(c))
    assert "inter.broker.listener.name" in str(e.value) and "SASL_SSL" in str(e.value)


def test_a_single_node_may_secure_them() -> None:
    c = config("1@localhost:9093", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL,SECURE:SASL_SSL", "SECURE")
    check_node_links(c, quorum_voters(c))
