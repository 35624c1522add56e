"""TLS and SASL listeners of a real node, driven by stock clients: confluent-kafka (librdkafka)
over SSL, mutual TLS, SASL_PLAINTEXT/PLAIN and SASL_SSL/SCRAM; kafka-python and aiokafka over
SASL/PLAIN; SCRAM users managed with AdminClient.alter_user_scram_credentials. Wrong passwords
are authentication errors on the client and the node keeps serving."""

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTP
from kafka.errors import KafkaError as KpError  # type: ignore[import-untyped]

from tests.certs import PASSWORD, Pki, make_pki

from .clients import create_topic, wait_for
from .node import Node, free_port

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret";'
)


class SecureNode:
    """A node with PLAINTEXT, SSL, MTLS (SSL + client auth, PKCS12 keystore), SASL_PLAINTEXT and
    SASL_SSL listeners."""

    def __init__(self, workdir: Path, pki: Pki) -> None:
        self.pki = pki
        self.node = Node(workdir)
        n = self.node
        self.ports = {name: free_port() for name in ("SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")}
        broker = {"PLAINTEXT": n.port, **self.ports}
        listeners = ",".join(f"{k}://127.0.0.1:{p}" for k, p in broker.items())
        n.settings.update(
            {
                "listeners": f"{listeners},CONTROLLER://127.0.0.1:{n.controller_port}",
                "advertised.listeners": listeners,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
                "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(pki.server_keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(pki.ca),
                "listener.name.mtls.ssl.client.auth": "required",
                "listener.name.mtls.ssl.keystore.type": "PKCS12",
                "listener.name.mtls.ssl.keystore.location": str(pki.server_p12),
                "listener.name.mtls.ssl.keystore.password": PASSWORD,
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            }
        )

    def bootstrap(self, listener: str) -> str:
        port = self.node.port if listener == "PLAINTEXT" else self.ports[listener]
        return f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecureNode]:
    s = SecureNode(tmp_path_factory.mktemp("secure") / "n1", pki)
    s.node.start()
    try:
        yield s
    finally:
        s.node.kill()


def _produce(conf: dict[str, Any], topic: str, n: int) -> None:
    p = Producer({"linger.ms": 5, **conf})
    errors: list[Any] = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda e, _m: errors.append(e) if e else 0)
    assert p.flush(20) == 0 and not errors, errors


def _consume(conf: dict[str, Any], topic: str, n: int, timeout: float = 15) -> list[bytes]:
    c = Consumer({"group.id": "sec", "enable.auto.commit": False, **conf})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(out) < n:
            for m in c.consume(num_messages=100, timeout=0.2):
                if m.error():
                    raise KafkaException(m.error())
                out.append(m.value())
        return out
    finally:
        c.close()


def _auth_error(conf: dict[str, Any], timeout: float = 15) -> KafkaError:
    """The first error a librdkafka client reports for ``conf`` (expected to be an auth error)."""
    errors: list[KafkaError] = []
    p = Producer({**conf, "error_cb": errors.append})

    def reported() -> bool:
        p.poll(0.1)  # error_cb runs in here
        return bool(errors)

    wait_for(reported, timeout, "the client to report an error", step=0)
    return errors[0]


def _values(n: int) -> list[bytes]:
    return [b"v%d" % i for i in range(n)]


# -- TLS ----------------------------------------------------------------------------------------


def test_ssl_listener_serves_confluent_clients(secure: SecureNode) -> None:
    create_topic(secure.bootstrap("PLAINTEXT"), "tls")
    conf = {
        "bootstrap.servers": secure.bootstrap("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.pki.ca),
    }
    _produce(conf, "tls", 20)
    assert _consume(conf, "tls", 20) == _values(20)


def test_ssl_client_rejects_an_untrusted_server(secure: SecureNode, tmp_path: Path) -> None:
    other = make_pki(tmp_path / "other")  # a CA that did not sign the node's certificate
    err = _auth_error(
        {
            "bootstrap.servers": secure.bootstrap("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(other.ca),
        }
    )
    assert err.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)


def test_mutual_tls_needs_a_client_certificate(secure: SecureNode) -> None:
    base = {
        "bootstrap.servers": secure.bootstrap("MTLS"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.pki.ca),
    }
    err = _auth_error(base)  # no client certificate: the handshake fails
    assert err.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    with_cert = {
        **base,
        "ssl.certificate.location": str(secure.pki.client_cert),
        "ssl.key.location": str(secure.pki.client_key),
    }
    create_topic(secure.bootstrap("PLAINTEXT"), "mtls")
    _produce(with_cert, "mtls", 5)
    assert _consume(with_cert, "mtls", 5) == _values(5)


# -- SASL/PLAIN ---------------------------------------------------------------------------------


def _plain(secure: SecureNode, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": secure.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


def test_sasl_plain_with_confluent(secure: SecureNode) -> None:
    create_topic(secure.bootstrap("PLAINTEXT"), "plain")
    conf = _plain(secure, "alice", "alice-secret")
    _produce(conf, "plain", 10)
    assert _consume(conf, "plain", 10) == _values(10)


def test_sasl_plain_wrong_password_is_an_authentication_error(secure: SecureNode) -> None:
    err = _auth_error(_plain(secure, "alice", "wrong"))
    assert err.code() == KafkaError._AUTHENTICATION, err
    assert "Invalid username or password" in err.str()
    err = _auth_error(_plain(secure, "mallory", "alice-secret"))
    assert err.code() == KafkaError._AUTHENTICATION, err
    assert secure.node.proc is not None and secure.node.proc.poll() is None
    # ... and the node still serves the right password.
    admin = AdminClient(_plain(secure, "admin", "admin-secret"))
    assert admin.list_topics(timeout=10).cluster_id


def test_sasl_plain_with_kafka_python_and_aiokafka(
    secure: SecureNode, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(secure.bootstrap("PLAINTEXT"), "plain-py")
    sasl = {
        "bootstrap_servers": secure.bootstrap("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    p = KafkaProducer(**sasl)
    try:
        for f in [p.send("plain-py", value=b"kp%d" % i, partition=0) for i in range(5)]:
            f.get(timeout=10)
    finally:
        p.close(timeout=5)

    async def aio() -> list[bytes]:
        ap = AIOKafkaProducer(**sasl)
        await ap.start()
        try:
            for i in range(5):
                await ap.send_and_wait("plain-py", value=b"aio%d" % i, partition=0)
        finally:
            await ap.stop()
        ac = AIOKafkaConsumer(**sasl, enable_auto_commit=False, auto_offset_reset="earliest")
        await ac.start()
        try:
            tp = __import__("aiokafka").TopicPartition("plain-py", 0)
            ac.assign([tp])
            await ac.seek_to_beginning(tp)
            out: list[bytes] = []
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and len(out) < 10:
                for batch in (await ac.getmany(timeout_ms=200)).values():
                    out.extend(m.value for m in batch)
            return out
        finally:
            await ac.stop()

    got = asyncio.run(asyncio.wait_for(aio(), 60))
    assert got == [b"kp%d" % i for i in range(5)] + [b"aio%d" % i for i in range(5)]
    c = KafkaConsumer(**sasl, enable_auto_commit=False)
    try:
        tp = KpTP("plain-py", 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        seen: list[bytes] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(seen) < 10:
            for batch in c.poll(timeout_ms=200).values():
                seen.extend(m.value for m in batch)
    finally:
        c.close()
    assert seen == got

    # kafka-python retries the bootstrap until its timeout; each try fails authentication.
    with pytest.raises(KpError):
        KafkaProducer(**{**sasl, "sasl_plain_password": "nope"}, bootstrap_timeout_ms=3000)
    assert any(
        "SaslAuthenticationFailedError" in r.getMessage()
        and "Invalid username or password" in r.getMessage()
        for r in caplog.records
    )


# -- SCRAM --------------------------------------------------------------------------------------


def _upsert(
    admin: AdminClient, user: str, mechanism: ScramMechanism, password: str, iterations: int = 8192
) -> None:
    info = ScramCredentialInfo(mechanism, iterations)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode())]
    )
    futures[user].result(15)


def _scram(secure: SecureNode, listener: str, mech: str, user: str, pw: str) -> dict[str, Any]:
    conf = {
        "bootstrap.servers": secure.bootstrap(listener),
        "security.protocol": listener,
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": pw,
    }
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(secure.pki.ca)
    return conf


def test_scram_sha512_over_sasl_ssl(secure: SecureNode) -> None:
    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    _upsert(admin, "bob", ScramMechanism.SCRAM_SHA_512, "bob-secret", 8192)
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(10)
    infos = [(i.mechanism, i.iterations) for i in described.scram_credential_infos]
    assert infos == [(ScramMechanism.SCRAM_SHA_512, 8192)]

    create_topic(secure.bootstrap("PLAINTEXT"), "scram")
    conf = _scram(secure, "SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret")
    _produce(conf, "scram", 10)
    assert _consume(conf, "scram", 10) == _values(10)

    err = _auth_error(_scram(secure, "SASL_SSL", "SCRAM-SHA-512", "bob", "wrong"))
    assert err.code() == KafkaError._AUTHENTICATION, err
    # bob has no SHA-256 credential: that mechanism fails for him too
    err = _auth_error(_scram(secure, "SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret"))
    assert err.code() == KafkaError._AUTHENTICATION, err
    assert secure.node.proc is not None and secure.node.proc.poll() is None


def test_scram_sha256_with_kafka_python_and_credential_changes(secure: SecureNode) -> None:
    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    _upsert(admin, "carol", ScramMechanism.SCRAM_SHA_256, "first", 4096)
    create_topic(secure.bootstrap("PLAINTEXT"), "scram-py")
    sasl = {
        "bootstrap_servers": secure.bootstrap("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "carol",
        "sasl_plain_password": "first",
    }
    p = KafkaProducer(**sasl)
    try:
        p.send("scram-py", value=b"one", partition=0).get(timeout=10)
    finally:
        p.close(timeout=5)
    # A new password replaces the old one for new connections.
    _upsert(admin, "carol", ScramMechanism.SCRAM_SHA_256, "second", 4096)
    ok = _scram(secure, "SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "second")
    _produce(ok, "scram-py", 1)
    err = _auth_error(_scram(secure, "SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "first"))
    assert err.code() == KafkaError._AUTHENTICATION
    # Deleted: nobody gets in as carol any more.
    dels = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]
    )
    dels["carol"].result(10)
    err = _auth_error(ok)
    assert err.code() == KafkaError._AUTHENTICATION


def test_scram_admin_errors(secure: SecureNode) -> None:
    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    with pytest.raises(KafkaException) as e:
        _upsert(admin, "dave", ScramMechanism.SCRAM_SHA_256, "pw", iterations=100)
    assert e.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    with pytest.raises(KafkaException) as e:
        admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)]
        )["nobody"].result(10)
    assert e.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    with pytest.raises(KafkaException) as e:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    assert e.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


# -- the pre-authentication gate ----------------------------------------------------------------


def _frame(api_key: int, version: int, corr: int, body: bytes = b"") -> bytes:
    client = b"raw"
    payload = struct.pack(">hhih", api_key, version, corr, len(client)) + client + body
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock: socket.socket) -> bytes:
    """One response frame; b"" when the connection was closed."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return b""
        head += chunk
    (size,) = struct.unpack(">i", head)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def test_requests_before_sasl_authentication_close_the_connection(secure: SecureNode) -> None:
    port = secure.ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_frame(18, 0, 1))  # ApiVersions v0 is allowed before authenticating
        resp = _read_frame(sock)
        assert resp[:4] == struct.pack(">i", 1) and resp[4:6] == b"\0\0"
        sock.sendall(_frame(3, 1, 2, struct.pack(">i", -1)))  # Metadata v1 (all topics)
        assert _read_frame(sock) == b""  # closed, no answer
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_frame(17, 0, 1, struct.pack(">h", 5) + b"PLAIN"))  # SaslHandshake v0
        assert _read_frame(sock) == b""  # v0 (unframed tokens) is not served: closed
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_frame(17, 1, 1, struct.pack(">h", 6) + b"GSSAPI"))
        resp = _read_frame(sock)
        (code, count) = struct.unpack_from(">hi", resp, 4)
        assert code == 33 and count == 3  # UNSUPPORTED_SASL_MECHANISM + the enabled list
        assert _read_frame(sock) == b""  # ... then closed


# -- start-up errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"ssl.keystore.location": "/nonexistent/keystore.pem"}, "ssl.keystore.location"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
        ({"listener.name.sasl_ssl.plain.sasl.jaas.config": "Bogus required;"}, "jaas.config"),
    ],
)
def test_bad_security_config_is_a_startup_error(
    tmp_path: Path, pki: Pki, settings: dict[str, str], named: str
) -> None:
    s = SecureNode(tmp_path / "bad", pki)
    s.node.settings.update(settings)
    with pytest.raises(RuntimeError, match=named):
        s.node.start(timeout=20)
