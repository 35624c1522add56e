"""TLS settings: keystores and truststores in every supported form, the errors that name the key,
listener-prefixed keys, and a real TLS handshake through KafkaServer and ClientConnection (with a
client certificate, whose subject becomes the principal)."""

from pathlib import Path

import pytest

from broker.config.properties import parse_properties
from broker.config.server_config import parse_server_config
from broker.controller.mirror_config import is_sensitive
from broker.network.client import ClientConnection
from broker.network.errors import ConnectError
from broker.network.server import ConnectionContext, KafkaServer, Listener
from broker.security import principal
from broker.security.client import client_security
from broker.security.errors import SecurityConfigError
from broker.security.listeners import build_listener_security
from broker.security.settings import ListenerSettings, MapSettings
from broker.security.tls import client_context, openssl_cipher_name, server_context
from tests.certs import PASSWORD, Pki, make_pki

from .network_support import ToyBroker, metadata_request, run

BASE = """process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
controller.listener.names=CONTROLLER
log.dirs=/tmp/x
"""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server(**values: str) -> None:
    server_context(MapSettings(values))


def _error(settings: dict[str, str]) -> SecurityConfigError:
    with pytest.raises(SecurityConfigError) as e:
        _server(**settings)
    return e.value


def test_keystore_forms_all_load(pki: Pki) -> None:
    _server(**{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_keystore)})
    # the type left at Kafka's default (JKS) is read from the content
    _server(**{"ssl.keystore.location": str(pki.server_keystore)})
    _server(
        **{
            "ssl.keystore.location": str(pki.server_encrypted_keystore),
            "ssl.key.password": PASSWORD,
        }
    )
    _server(
        **{
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki.server_p12),
            "ssl.keystore.password": PASSWORD,
        }
    )
    # PEM in config whose line breaks were lost to .properties continuations
    _server(
        **{
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": pki.server_cert.read_text().replace("\n", " "),
            "ssl.keystore.key": pki.server_key.read_text().replace("\n", ""),
        }
    )


def test_keystore_errors_name_the_key(pki: Pki, tmp_path: Path) -> None:
    assert _error({}).key == "ssl.keystore.location"
    e = _error({"ssl.keystore.location": "/nonexistent/ks.pem"})
    assert e.key == "ssl.keystore.location" and "cannot read" in e.why
    e = _error({"ssl.keystore.location": str(pki.server_encrypted_keystore)})
    assert e.key == "ssl.key.password" and "encrypted" in e.why
    e = _error(
        {"ssl.keystore.location": str(pki.server_encrypted_keystore), "ssl.key.password": "nope"}
    )
    assert e.key == "ssl.keystore.location" and "ssl.key.password" in e.why
    e = _error(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki.server_p12),
            "ssl.keystore.password": "nope",
        }
    )
    assert e.key == "ssl.keystore.location" and "ssl.keystore.password" in e.why
    e = _error({"ssl.keystore.type": "JKS", "ssl.keystore.location": str(pki.server_p12)})
    assert e.key == "ssl.keystore.type" and "PKCS12" in e.why
    e = _error({"ssl.keystore.type": "BKS", "ssl.keystore.location": str(pki.server_p12)})
    assert e.key == "ssl.keystore.type"
    e = _error({"ssl.keystore.location": str(pki.ca)})  # a certificate but no key
    assert e.key == "ssl.keystore.location" and "private key" in e.why
    e = _error({"ssl.keystore.certificate.chain": pki.server_cert.read_text()})
    assert e.key == "ssl.keystore.key"
    e = _error(
        {
            "ssl.keystore.certificate.chain": pki.server_cert.read_text(),
            "ssl.keystore.key": pki.server_key.read_text(),
            "ssl.keystore.location": str(pki.server_keystore),
        }
    )
    assert e.key == "ssl.keystore.location" and "not both" in e.why
    jks = tmp_path / "ks.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 64)
    e = _error({"ssl.keystore.location": str(jks)})
    assert e.key == "ssl.keystore.type" and "JKS" in e.why


def test_client_auth_protocols_and_ciphers(pki: Pki) -> None:
    ks = {"ssl.keystore.location": str(pki.server_keystore)}
    e = _error({**ks, "ssl.client.auth": "sometimes"})
    assert e.key == "ssl.client.auth"
    e = _error({**ks, "ssl.client.auth": "required"})
    assert e.key == "ssl.truststore.location" and "client certificates" in e.why
    _server(**ks, **{"ssl.client.auth": "required", "ssl.truststore.location": str(pki.ca)})
    _server(
        **ks,
        **{
            "ssl.client.auth": "requested",
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(pki.truststore_p12),
            "ssl.truststore.password": PASSWORD,
        },
    )
    _server(
        **ks, **{"ssl.client.auth": "required", "ssl.truststore.certificates": pki.ca.read_text()}
    )
    e = _error({**ks, "ssl.enabled.protocols": "TLSv1.2,SSLv2"})
    assert e.key == "ssl.enabled.protocols" and "SSLv2" in e.why
    e = _error({**ks, "ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.2"})
    assert e.key == "ssl.enabled.protocols"
    _server(
        **ks,
        **{
            "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
            "ssl.enabled.protocols": "TLSv1.2",
        },
    )
    e = _error({**ks, "ssl.cipher.suites": "TLS_FANCY_WITH_NOTHING"})
    assert e.key == "ssl.cipher.suites" and "TLS_FANCY_WITH_NOTHING" in e.why
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384") == (
        "ECDHE-RSA-AES256-GCM-SHA384"
    )
    assert openssl_cipher_name("TLS_RSA_WITH_AES_128_CBC_SHA") == "AES128-SHA"
    assert openssl_cipher_name("ECDHE-RSA-CHACHA20-POLY1305") == "ECDHE-RSA-CHACHA20-POLY1305"


def test_client_context_checks_host_names_unless_disabled(pki: Pki) -> None:
    ctx = client_context(MapSettings({"ssl.truststore.location": str(pki.ca)}))
    assert ctx.check_hostname
    off = {"ssl.truststore.location": str(pki.ca), "ssl.endpoint.identification.algorithm": ""}
    assert not client_context(MapSettings(off)).check_hostname
    with pytest.raises(SecurityConfigError, match=r"ssl\.endpoint\.identification\.algorithm"):
        client_context(MapSettings({"ssl.endpoint.identification.algorithm": "dns"}))


def test_listener_prefixed_keys_win_and_errors_name_them(pki: Pki) -> None:
    s = ListenerSettings(
        "SASL_SSL",
        {"ssl.client.auth": "none", "ssl.keystore.location": "/broker.pem"},
        {"listener.name.sasl_ssl.ssl.client.auth": "required"},
    )
    assert s.get("ssl.client.auth") == "required"
    assert s.name("ssl.client.auth") == "listener.name.sasl_ssl.ssl.client.auth"
    assert s.get("ssl.keystore.location") == "/broker.pem"
    assert s.name("ssl.keystore.location") == "ssl.keystore.location"
    assert s.get("ssl.enabled.protocols") == "TLSv1.2,TLSv1.3"  # Kafka's default
    assert s.name("ssl.truststore.location") == "listener.name.sasl_ssl.ssl.truststore.location"

    props = BASE + (
        "listeners=SSL://:0,INTERNAL://:0,CONTROLLER://localhost:9093\n"
        "listener.security.protocol.map=SSL:SSL,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        "inter.broker.listener.name=SSL\n"
        f"ssl.keystore.location={pki.server_keystore}\n"
        "listener.name.internal.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
        "listener.name.internal.plain.sasl.jaas.config="
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_u="p";\n'
    )
    config, warnings = parse_server_config(parse_properties(props, "t.properties"))
    assert not any("listener.name" in w or "ssl." in w for w in warnings), warnings
    sec = build_listener_security(config)
    assert sec["SSL"].ssl_context is not None and sec["SSL"].sasl is None
    internal = sec["INTERNAL"].sasl
    assert internal is not None and internal.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert dict(internal.plain_users) == {"u": "p"}
    assert internal.reauth_ms == 0  # connections.max.reauth.ms: sessions never expire
    reauth, _ = parse_server_config(
        parse_properties(
            props + "listener.name.internal.connections.max.reauth.ms=60000\n", "t.properties"
        )
    )
    assert build_listener_security(reauth)["INTERNAL"].sasl.reauth_ms == 60000  # type: ignore[union-attr]
    assert sec["CONTROLLER"].ssl_context is None and sec["CONTROLLER"].sasl is None

    for extra, key in (
        (
            "listener.name.internal.sasl.enabled.mechanisms=GSSAPI\n",
            "listener.name.internal.sasl.enabled.mechanisms",
        ),
        (
            "listener.name.internal.plain.sasl.jaas.config=x.Y required;\n",
            "listener.name.internal.plain.sasl.jaas.config",
        ),
        (
            "listener.name.internal.plain.sasl.jaas.config="
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";\n',
            "listener.name.internal.plain.sasl.jaas.config",
        ),
        (
            "listener.name.internal.connections.max.reauth.ms=-5\n",
            "listener.name.internal.connections.max.reauth.ms",
        ),
        (
            "listener.name.internal.connections.max.reauth.ms=soon\n",
            "listener.name.internal.connections.max.reauth.ms",
        ),
        (
            "listener.name.ssl.ssl.client.auth=required\n",
            "listener.name.ssl.ssl.truststore.location",
        ),
    ):
        config, _ = parse_server_config(parse_properties(props + extra, "t.properties"))
        with pytest.raises(SecurityConfigError) as e:
            build_listener_security(config)
        assert e.value.key == key


def test_mirror_pem_keys_are_secret() -> None:
    for key in (
        "ssl.truststore.certificates",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
    ):
        assert is_sensitive(key)
    assert is_sensitive("sasl.jaas.config") and is_sensitive("ssl.truststore.password")
    assert not is_sensitive("ssl.truststore.location")


def test_principal_of_a_subject() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Acme, Inc."),),
        (("commonName", "alice"), ("userId", "7")),
    )
    assert principal.subject_dn(subject) == "CN=alice+UID=7,O=Acme\\, Inc.,C=US"
    assert principal.from_peer_certificate({}) == "User:ANONYMOUS"
    assert principal.from_peer_certificate(None) == "User:ANONYMOUS"


def test_tls_round_trip_with_a_client_certificate(pki: Pki) -> None:
    """KafkaServer over TLS with ssl.client.auth=required; ClientConnection with the mirror-style
    client keys; the server sees the client certificate and maps it to Kafka's principal."""
    seen: list[str] = []

    async def main() -> None:
        ctx = server_context(
            MapSettings(
                {
                    "ssl.keystore.location": str(pki.server_keystore),
                    "ssl.truststore.location": str(pki.ca),
                    "ssl.client.auth": "required",
                }
            )
        )
        broker = ToyBroker()
        inner = broker.handle

        async def handle(conn: ConnectionContext, frame: memoryview) -> object:
            seen.append(principal.from_peer_certificate(conn.peer_certificate))
            return await inner(conn, frame)

        server = KafkaServer([Listener("SSL", "127.0.0.1", 0, "SSL", ctx)], handle)
        await server.start()
        broker.address = server.address()
        host, port = server.address()
        try:
            sec = client_security(
                {
                    "security.protocol": "SSL",
                    "ssl.truststore.location": str(pki.ca),
                    "ssl.keystore.certificate.chain": pki.client_cert.read_text(),
                    "ssl.keystore.key": pki.client_key.read_text(),
                }
            )
            client = ClientConnection(host, port, "tls-test", ssl_context=sec.ssl_context)
            await client.connect()
            response = await client.send(metadata_request(7, ("orders",)))
            assert [t.name for t in response.topics] == ["orders"]
            client.close()
            # Without a client certificate the handshake fails: a clear ConnectError.
            anon = client_security(
                {"security.protocol": "SSL", "ssl.truststore.location": str(pki.ca)}
            )
            bare = ClientConnection(host, port, "tls-test", ssl_context=anon.ssl_context)
            with pytest.raises(ConnectError):
                await bare.connect()  # the server's alert arrives by the ApiVersions exchange
            bare.close()
        finally:
            await server.close(timeout=1)

    run(main())
    assert seen and set(seen) == {f"User:{pki.client_subject}"}
