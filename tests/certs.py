"""Throwaway PKI for TLS tests: a CA, a server certificate for 127.0.0.1/localhost and a client
certificate, written as PEM (and PKCS12) files. Needs the ``cryptography`` package (test extra)."""

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

PASSWORD = "test-store-pw"


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path  # CA certificate, PEM
    server_keystore: Path  # PEM: unencrypted key + chain
    server_key: Path  # PEM key alone
    server_cert: Path  # PEM chain alone
    server_encrypted_keystore: Path  # PEM: key encrypted with PASSWORD + chain
    server_p12: Path  # PKCS12 with PASSWORD
    truststore_p12: Path  # PKCS12 with the CA only, PASSWORD
    client_key: Path
    client_cert: Path
    client_subject: str  # RFC 2253, as Kafka prints it


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kmirror tests"),
    ]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    san: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    enc: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kmirror test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert(
        _name("localhost"),
        srv_key,
        ca_name,
        ca_key,
        san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = _cert(_name("alice", ou="eng"), cli_key, ca_name, ca_key)
    p = Pki(
        dir=directory,
        ca=directory / "ca.pem",
        server_keystore=directory / "server-keystore.pem",
        server_key=directory / "server.key",
        server_cert=directory / "server.crt",
        server_encrypted_keystore=directory / "server-keystore-encrypted.pem",
        server_p12=directory / "server.p12",
        truststore_p12=directory / "truststore.p12",
        client_key=directory / "client.key",
        client_cert=directory / "client.crt",
        client_subject="CN=alice,OU=eng,O=kmirror tests,C=US",
    )
    p.ca.write_bytes(_pem(ca))
    p.server_key.write_bytes(_key_pem(srv_key))
    p.server_cert.write_bytes(_pem(srv) + _pem(ca))
    p.server_keystore.write_bytes(_key_pem(srv_key) + _pem(srv) + _pem(ca))
    p.server_encrypted_keystore.write_bytes(_key_pem(srv_key, PASSWORD) + _pem(srv) + _pem(ca))
    enc = serialization.BestAvailableEncryption(PASSWORD.encode())
    p.server_p12.write_bytes(
        pkcs12.serialize_key_and_certificates(b"server", srv_key, srv, [ca], enc)
    )
    p.truststore_p12.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca], enc))
    p.client_key.write_bytes(_key_pem(cli_key))
    p.client_cert.write_bytes(_pem(cli))
    return p
