"""This node's own connections to its peers use the security of the listener they reach, from
Kafka's keys; a config that cannot work is refused at start with one line naming the key."""

from pathlib import Path

import pytest

from broker.config.properties import parse_properties
from broker.config.server_config import ServerConfig, parse_server_config
from broker.security.errors import SecurityConfigError
from broker.security.node_links import build_node_links, holds_host
from broker.security.principal_rules import MappingRulesError, map_dn, parse_rules
from tests.certs import Pki, make_pki

THREE = "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293"
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="admin" password="admin-secret";'
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def config(extra: dict[str, str], voters: str = THREE) -> ServerConfig:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "listeners": "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
        "advertised.listeners": "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": voters,
        "log.dirs": "/tmp/x",
        **extra,
    }
    text = "".join(f"{k}={v}\n" for k, v in props.items())
    c, _ = parse_server_config(parse_properties(text, "node.properties"))
    return c


def tls(pki: Pki, listener: str, client_auth: str = "required") -> dict[str, str]:
    p = f"listener.name.{listener}."
    return {
        p + "ssl.keystore.location": str(pki.server_keystore),
        p + "ssl.keystore.type": "PEM",
        p + "ssl.truststore.location": str(pki.ca),
        p + "ssl.truststore.type": "PEM",
        p + "ssl.client.auth": client_auth,
    }


def scram(pki: Pki) -> dict[str, str]:
    out = {
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        **tls(pki, "controller", "none"),
        **tls(pki, "internal", "none"),
    }
    for li in ("controller", "internal"):
        out[f"listener.name.{li}.sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
        out[f"listener.name.{li}.scram-sha-512.sasl.jaas.config"] = SCRAM_JAAS
    return out


def refused(c: ServerConfig) -> str:
    with pytest.raises(SecurityConfigError) as e:
        build_node_links(c)
    return str(e.value)


def test_plaintext_links_present_anonymous() -> None:
    links = build_node_links(config({}))
    assert links.controller.security.protocol == "PLAINTEXT"
    assert links.controller.security.ssl_context is None
    assert links.inter_broker.listener == "INTERNAL"
    assert links.controller.principal == "User:ANONYMOUS"


def test_sasl_ssl_scram_on_both_links(pki: Pki) -> None:
    links = build_node_links(config(scram(pki)))
    for link in (links.controller, links.inter_broker):
        sec = link.security
        assert (sec.protocol, sec.mechanism, sec.username) == ("SASL_SSL", "SCRAM-SHA-512", "admin")
        assert sec.ssl_context is not None and sec.ssl_context.check_hostname
        assert link.principal == "User:admin"
    assert links.controller.describe() == "CONTROLLER (SASL_SSL, SCRAM-SHA-512)"


def test_plain_link_takes_username_beside_the_accepted_users() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="node" password="node-pw" user_node="node-pw" user_alice="a";'
    )
    links = build_node_links(
        config(
            {
                "listener.security.protocol.map": (
                    "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
                ),
                "sasl.mechanism.controller.protocol": "PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.controller.plain.sasl.jaas.config": jaas,
            }
        )
    )
    sec = links.controller.security
    assert (sec.mechanism, sec.username, sec.password) == ("PLAIN", "node", "node-pw")
    assert links.inter_broker.security.protocol == "PLAINTEXT"


def test_the_default_gssapi_mechanism_is_refused_naming_the_key(pki: Pki) -> None:
    extra = scram(pki)
    del extra["sasl.mechanism.controller.protocol"]
    why = refused(config(extra))
    assert why.startswith("sasl.mechanism.controller.protocol: GSSAPI is not supported")


def test_a_mechanism_without_a_jaas_entry_names_the_key(pki: Pki) -> None:
    extra = scram(pki)
    del extra["listener.name.internal.scram-sha-512.sasl.jaas.config"]
    why = refused(config(extra))
    assert why.startswith("listener.name.internal.scram-sha-512.sasl.jaas.config: is required")


def test_a_jaas_entry_without_username_names_the_key(pki: Pki) -> None:
    extra = scram(pki)
    extra["listener.name.controller.scram-sha-512.sasl.jaas.config"] = (
        'org.apache.kafka.common.security.scram.ScramLoginModule required password="x";'
    )
    why = refused(config(extra))
    assert why.startswith("listener.name.controller.scram-sha-512.sasl.jaas.config: needs username")


def test_a_jaas_entry_of_the_wrong_module_names_the_key(pki: Pki) -> None:
    extra = scram(pki)
    extra["listener.name.controller.scram-sha-512.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="a" password="b";'
    )
    assert "SCRAM-SHA-512 needs" in refused(config(extra))


def test_a_mechanism_its_own_listener_does_not_accept_is_refused(pki: Pki) -> None:
    extra = scram(pki)
    extra["listener.name.internal.sasl.enabled.mechanisms"] = "SCRAM-SHA-256"
    why = refused(config(extra))
    assert why.startswith("sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512 is not in")


def test_mutual_tls_principal_is_the_mapped_certificate_subject(pki: Pki) -> None:
    extra = {
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL",
        **tls(pki, "controller"),
        **tls(pki, "internal"),
    }
    links = build_node_links(config(extra))
    assert links.controller.principal == "User:CN=localhost,O=kmirror tests,C=US"
    assert links.controller.security.ssl_context is not None
    extra["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+),.*$/node-$1/L,DEFAULT"
    links = build_node_links(config(extra))
    assert links.inter_broker.principal == "User:node-localhost"


def test_a_keystore_without_the_advertised_host_names_the_key(pki: Pki) -> None:
    extra = scram(pki)
    voters = "1@node1.example:9093,2@127.0.0.1:9193,3@127.0.0.1:9293"
    why = refused(config(extra, voters))
    assert why.startswith("listener.name.controller.ssl.keystore.location: the certificate holds")
    assert "node1.example" in why
    # without host name checks, any certificate the truststore accepts will do
    extra["listener.name.controller.ssl.endpoint.identification.algorithm"] = ""
    build_node_links(config(extra, voters))


def test_super_users_lacking_the_node_principal_is_a_warning(pki: Pki) -> None:
    extra = scram(pki)
    extra["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    extra["super.users"] = "User:root"
    (warning,) = build_node_links(config(extra)).warnings
    assert warning.startswith("super.users: lacks User:admin")
    extra["super.users"] = "User:root;User:admin"
    assert build_node_links(config(extra)).warnings == ()


def test_a_single_node_cluster_needs_no_links(pki: Pki) -> None:
    extra = scram(pki)
    del extra["sasl.mechanism.controller.protocol"]
    links = build_node_links(config(extra, "1@127.0.0.1:9093"))
    assert links.controller.security.protocol == "PLAINTEXT"


def test_host_matching() -> None:
    assert holds_host(["*.example.com"], [], "a.example.com")
    assert not holds_host(["*.example.com"], [], "a.b.example.com")
    assert holds_host(["Node1"], [], "node1")
    assert holds_host([], ["127.0.0.1"], "127.0.0.1")
    assert not holds_host(["127.0.0.1"], [], "127.0.0.1")


def test_principal_mapping_rules() -> None:
    rules = parse_rules(
        r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        r"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        r"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT"
    )
    assert map_dn(rules, "CN=kafka1,OU=ServiceUsers,O=Org,C=US") == "kafka1"
    assert map_dn(rules, "CN=Duke,OU=JavaSoft,O=Sun,L=Santa Clara,ST=CA,C=US") == "duke@javasoft"
    assert map_dn(rules, "OU=x,CN=adm.in,O=y") == "ADM.IN"
    assert map_dn(rules, "O=only") == "O=only"
    assert map_dn(parse_rules(r"RULE:^CN=(.*)$/$1/"), "O=x") is None
    with pytest.raises(MappingRulesError):
        parse_rules("RULE:(/x/")
    with pytest.raises(MappingRulesError):
        parse_rules("SOMETHING")


def test_unchanged_configs_in_config_dir_build() -> None:
    from broker.config.server_config import load_server_config

    root = Path(__file__).resolve().parents[2] / "config"
    for name in ("server.properties", "node-1.properties", "node-2.properties"):
        c, _ = load_server_config(str(root / name))
        assert build_node_links(c).controller.security.protocol == "PLAINTEXT"
