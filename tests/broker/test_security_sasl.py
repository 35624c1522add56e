"""SASL building blocks: SCRAM against the RFC 7677 test vector, our client against our server,
PLAIN, JAAS parsing, the per-connection session states and the client-side config reader."""

import base64

import pytest

from broker.security import plain, scram
from broker.security.client import client_security
from broker.security.errors import AuthenticationFailed, SecurityConfigError
from broker.security.jaas import JaasError, parse_jaas, plain_users, single_module
from broker.security.sasl_server import SaslListenerConfig, SaslSession, State

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FINAL = (
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _cred(m: scram.Mechanism, password: str, salt: bytes, iterations: int) -> scram.Credential:
    salted = scram.salted_password(m, password, salt, iterations)
    return scram.credential_from_salted(m, salted, salt, iterations)


def test_scram_server_matches_the_rfc7677_exchange() -> None:
    cred = _cred(scram.SHA256, "pencil", RFC_SALT, 4096)
    server = scram.ScramServer(
        scram.SHA256, lambda u, m: cred if u == "user" else None, nonce=lambda: RFC_SERVER_NONCE
    )
    first = server.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert server.evaluate(RFC_CLIENT_FINAL.encode()) == RFC_SERVER_FINAL.encode()
    assert server.complete and server.username == "user"


def test_scram_client_matches_the_rfc7677_exchange() -> None:
    client = scram.ScramClient(scram.SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = f"r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final(server_first.encode()) == RFC_CLIENT_FINAL.encode()
    client.verify(RFC_SERVER_FINAL.encode())
    with pytest.raises(AuthenticationFailed, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


@pytest.mark.parametrize("mech", [scram.SHA256, scram.SHA512])
def test_scram_client_and_server_agree_and_wrong_passwords_fail(mech: scram.Mechanism) -> None:
    cred = _cred(mech, "s3cret", b"salt-bytes", 4096)
    creds = {("a,b=c", mech.type): cred}  # a name that needs =2C / =3D escaping

    def lookup(user: str, m: scram.Mechanism) -> scram.Credential | None:
        return creds.get((user, m.type))

    for password, ok in (("s3cret", True), ("wrong", False)):
        server = scram.ScramServer(mech, lookup)
        client = scram.ScramClient(mech, "a,b=c", password)
        final = client.final(server.evaluate(client.first()))
        if ok:
            client.verify(server.evaluate(final))
            assert server.username == "a,b=c"
        else:
            with pytest.raises(AuthenticationFailed) as e:
                server.evaluate(final)
            # Kafka's generic message to the client, the detail only in the log
            assert "invalid credentials with SASL mechanism " + mech.name in e.value.client_message
            assert "Invalid client credentials" in str(e.value)


def test_scram_server_rejects_bad_first_messages() -> None:
    cred = _cred(scram.SHA512, "pw", b"salt", 4096)

    def server() -> scram.ScramServer:
        return scram.ScramServer(scram.SHA512, lambda u, m: cred if u == "u" else None)

    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):
        server().evaluate(b"n,,n=ghost,r=abc")
    with pytest.raises(AuthenticationFailed, match="channel binding"):
        server().evaluate(b"p=tls-unique,,n=u,r=abc")
    with pytest.raises(AuthenticationFailed) as e:
        server().evaluate(b"n,a=other,n=u,r=abc")
    assert "authorization id" in e.value.client_message  # this one the client is told
    with pytest.raises(AuthenticationFailed):
        server().evaluate(b"garbage")
    with pytest.raises(AuthenticationFailed, match="UTF-8"):
        server().evaluate(b"\xff\xfe")
    weak = scram.ScramServer(scram.SHA512, lambda u, m: _cred(m, "pw", b"s", 1000))
    with pytest.raises(AuthenticationFailed, match="less than the minimum"):
        weak.evaluate(b"n,,n=u,r=abc")
    # extensions (tokenauth) are accepted in the first message and ignored
    assert server().evaluate(b"n,,n=u,r=abc,tokenauth=false").startswith(b"r=abc")


def test_scram_server_rejects_a_replayed_nonce_and_extra_rounds() -> None:
    cred = _cred(scram.SHA256, "pw", b"salt", 4096)
    server = scram.ScramServer(scram.SHA256, lambda u, m: cred)
    client = scram.ScramClient(scram.SHA256, "u", "pw")
    final = client.final(server.evaluate(client.first()))
    tampered = final.replace(b",r=", b",r=x", 1)
    with pytest.raises(AuthenticationFailed, match="nonce"):
        server.evaluate(tampered)
    with pytest.raises(AuthenticationFailed, match="over"):
        server.evaluate(final)  # the failed exchange is over


def test_plain() -> None:
    users = {"alice": "pw"}
    assert plain.authenticate(b"\0alice\0pw", users) == "alice"
    assert plain.authenticate(b"alice\0alice\0pw", users) == "alice"
    for msg, why in (
        (b"\0alice\0nope", "Invalid username or password"),
        (b"\0bob\0pw", "Invalid username or password"),
        (b"\0alice", "expected 3 tokens, got 2"),
        (b"\0\0pw", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"bob\0alice\0pw", "authorization id"),
    ):
        with pytest.raises(AuthenticationFailed, match=why):
            plain.authenticate(msg, users)
    assert plain.client_message("u", "p") == b"\0u\0p"


def test_jaas_parsing() -> None:
    text = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="a\\"b;c" // a comment\n'
        '  user_admin="admin-secret" user_bob=plainword /* another */;'
    )
    (m,) = parse_jaas(text)
    assert m.flag == "required"
    assert m.options["password"] == 'a"b;c'
    assert plain_users(m) == {"admin": "admin-secret", "bob": "plainword"}
    two = text + " x.Y optional;"
    assert len(parse_jaas(two)) == 2
    with pytest.raises(JaasError, match="exactly one"):
        single_module(two)
    for bad, why in (
        ("x.Y required a=1", "terminated"),
        ("x.Y maybe;", "control flag"),
        ('x.Y required a="open;', "unterminated"),
        ("x.Y required a b;", "key=value"),
        ("", "no login module"),
    ):
        with pytest.raises(JaasError, match=why):
            parse_jaas(bad)


def test_session_states() -> None:
    cred = _cred(scram.SHA256, "pw", b"salt", 4096)
    cfg = SaslListenerConfig(("PLAIN", "SCRAM-SHA-256"), {"alice": "pw"})
    s = SaslSession(cfg, lambda u, m: cred if u == "u" else None)
    assert s.allows(18) and s.allows(17) and not s.allows(36) and not s.allows(3)
    assert s.handshake("SCRAM-SHA-256")
    assert s.allows(36) and not s.allows(18) and not s.allows(0)
    client = scram.ScramClient(scram.SHA256, "u", "pw")
    final = client.final(s.authenticate(client.first()))
    assert s.state is State.AUTHENTICATE
    client.verify(s.authenticate(final))
    assert s.authenticated and s.username == "u" and s.allows(0)

    failed = SaslSession(cfg, lambda u, m: None)
    assert failed.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed):
        failed.authenticate(b"\0alice\0bad")
    assert failed.state is State.FAILED and not failed.allows(18)

    unknown = SaslSession(cfg, lambda u, m: None)
    assert not unknown.handshake("SCRAM-SHA-512")  # not enabled on this listener
    assert unknown.state is State.FAILED


def test_reauthentication_kip_368() -> None:
    cred = _cred(scram.SHA256, "pw", b"salt", 4096)
    cfg = SaslListenerConfig(("PLAIN", "SCRAM-SHA-256"), {"alice": "pw", "bob": "pw"}, 1000)
    s = SaslSession(cfg, lambda u, m: cred if u == "u" else None)
    assert s.handshake("PLAIN")
    s.authenticate(b"\0alice\0pw", now=10.0)
    assert s.authenticated and s.expires_at == 11.0
    assert s.allows(0, now=10.9) and not s.allows(0, now=11.0)  # expired: closed
    assert s.allows(17, now=11.5) and s.allows(36, now=11.5)  # but it may re-authenticate
    # again, in time: other requests are served meanwhile, and the session starts over
    assert s.can_reauthenticate and s.handshake("PLAIN")
    assert s.reauthenticating and s.allows(0, now=10.95) and s.allows(36, now=10.95)
    s.authenticate(b"\0alice\0pw", now=10.95)
    assert s.authenticated and not s.reauthenticating and s.expires_at == 11.95

    # another user, or another mechanism, fails the connection
    assert s.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed, match=r"re-authentication as .bob.") as failed:
        s.authenticate(b"\0bob\0pw", now=11.0)
    assert failed.value.client_message == "Cannot change principals during re-authentication"
    assert s.state is State.FAILED
    other = SaslSession(cfg, lambda u, m: cred)
    assert other.handshake("PLAIN")
    other.authenticate(b"\0alice\0pw", now=0.0)
    assert not other.handshake("SCRAM-SHA-256") and other.state is State.FAILED

    # without connections.max.reauth.ms a session never expires nor authenticates again
    forever = SaslSession(SaslListenerConfig(("PLAIN",), {"alice": "pw"}), lambda u, m: None)
    assert forever.handshake("PLAIN")
    forever.authenticate(b"\0alice\0pw", now=0.0)
    assert forever.expires_at is None and forever.allows(0, now=1e9)
    assert not forever.can_reauthenticate


def test_client_security_reads_kafka_client_keys() -> None:
    scram_jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="m" password="p";'
    )
    sec = client_security(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": scram_jaas,
        }
    )
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "m",
        "p",
    )
    assert sec.ssl_context is None and sec.uses_sasl
    assert client_security({}).protocol == "PLAINTEXT"
    for config, key in (
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": scram_jaas,
            },
            "sasl.jaas.config",
        ),
    ):
        with pytest.raises(SecurityConfigError) as e:
            client_security(config, "mirror m1: ")
        assert e.value.key == f"mirror m1: {key}"
