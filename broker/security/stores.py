"""Key and trust material from Kafka's keystore/truststore settings, as PEM for Python's ssl.

Python's ssl module reads PEM files only, so every source is turned into PEM first:
PEM files and the PEM-in-config keys (``ssl.keystore.certificate.chain``/``ssl.keystore.key``,
``ssl.truststore.certificates``, whose line breaks may have been lost to ``\\`` continuations) are
re-wrapped; PKCS12 stores are opened with the ``cryptography`` package when it is installed.
JKS is Java's own format: convert it (``keytool -importkeystore -deststoretype PKCS12``).
"""

import contextlib
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .errors import SecurityConfigError
from .settings import Settings

_PEM_BLOCK: Final = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
_KEY_KINDS: Final = ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY")
STORE_TYPES: Final = ("PEM", "PKCS12", "JKS")


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A private key and its certificate chain, PEM; ``password`` decrypts the key if set."""

    pem: bytes
    password: str | None


def pem_blocks(text: str) -> list[tuple[str, str]]:
    """(kind, normalized PEM block) for each block in ``text``."""
    out = []
    for m in _PEM_BLOCK.finditer(text):
        kind = m.group(1)
        # Headers (Proc-Type/DEK-Info of legacy encrypted keys) keep their lines.
        body = m.group(2)
        headers = ""
        if "Proc-Type:" in body:
            head, _, rest = body.strip().partition("\n\n")
            headers, body = head.strip() + "\n\n", rest
        b64 = re.sub(r"\s+", "", body)
        lines = "\n".join(b64[i : i + 64] for i in range(0, len(b64), 64))
        out.append((kind, f"-----BEGIN {kind}-----\n{headers}{lines}\n-----END {kind}-----\n"))
    return out


def _read(settings: Settings, key: str) -> bytes:
    path = settings.get(key) or ""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise SecurityConfigError(
            settings.name(key), f"cannot read {path}: {e.strerror or e}"
        ) from None


def _store_type(settings: Settings, type_key: str, data: bytes | None) -> str:
    """The store type; when left at Kafka's default (JKS), guessed from the file's content."""
    raw = (settings.get(type_key) or "JKS").upper()
    if raw not in STORE_TYPES:
        raise SecurityConfigError(
            settings.name(type_key), f"unknown store type {raw} (supported: PEM, PKCS12)"
        )
    if settings.is_set(type_key) or data is None:
        kind = raw
    elif b"-----BEGIN " in data:
        kind = "PEM"
    elif data[:4] == b"\xfe\xed\xfe\xed":  # JKS magic
        kind = "JKS"
    else:
        kind = "PKCS12"
    if kind == "JKS":
        raise SecurityConfigError(
            settings.name(type_key),
            "JKS stores are not supported: use PEM or PKCS12 (keytool -importkeystore "
            "-deststoretype PKCS12 converts a JKS store)",
        )
    return kind


def _pkcs12(settings: Settings, location_key: str, password_key: str, data: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise SecurityConfigError(
            settings.name(location_key),
            "PKCS12 stores need the 'cryptography' package (pip install cryptography), or use PEM",
        ) from None
    password = settings.get(password_key)
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except (ValueError, TypeError) as e:
        raise SecurityConfigError(
            settings.name(location_key),
            f"cannot open the PKCS12 store (wrong {settings.name(password_key)}?): {e}",
        ) from None


def _pem_of(cert: Any) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    return str(cert.public_bytes(Encoding.PEM).decode())


def key_material(settings: Settings) -> KeyMaterial | None:
    """The keystore: None when neither ``ssl.keystore.location`` nor the PEM keys are set."""
    chain_key, key_key = "ssl.keystore.certificate.chain", "ssl.keystore.key"
    key_password = settings.get("ssl.key.password")
    chain, key = settings.get(chain_key), settings.get(key_key)
    location = settings.get("ssl.keystore.location")
    if chain or key:
        if location:
            raise SecurityConfigError(
                settings.name("ssl.keystore.location"),
                f"set either a keystore file or {chain_key}/{key_key}, not both",
            )
        if not chain or not key:
            missing = key_key if not key else chain_key
            raise SecurityConfigError(settings.name(missing), "is required with PEM keys in config")
        if (
            settings.is_set("ssl.keystore.type")
            and _store_type(settings, "ssl.keystore.type", None) != "PEM"
        ):
            raise SecurityConfigError(
                settings.name("ssl.keystore.type"), "must be PEM with PEM keys in config"
            )
        keys = [b for k, b in pem_blocks(key) if k in _KEY_KINDS]
        certs = [b for k, b in pem_blocks(chain) if k == "CERTIFICATE"]
        if len(keys) != 1:
            raise SecurityConfigError(
                settings.name(key_key), "must hold exactly one PEM private key"
            )
        if not certs:
            raise SecurityConfigError(settings.name(chain_key), "holds no PEM certificate")
        return KeyMaterial("".join([keys[0], *certs]).encode(), key_password)
    if not location:
        return None
    data = _read(settings, "ssl.keystore.location")
    kind = _store_type(settings, "ssl.keystore.type", data)
    if kind == "PEM":
        blocks = pem_blocks(data.decode("utf-8", "replace"))
        keys = [b for k, b in blocks if k in _KEY_KINDS]
        certs = [b for k, b in blocks if k == "CERTIFICATE"]
        if len(keys) != 1 or not certs:
            raise SecurityConfigError(
                settings.name("ssl.keystore.location"),
                f"{location} must hold one PEM private key and its certificate chain",
            )
        return KeyMaterial("".join([keys[0], *certs]).encode(), key_password)
    store = _pkcs12(settings, "ssl.keystore.location", "ssl.keystore.password", data)
    if store.key is None or store.cert is None:
        raise SecurityConfigError(
            settings.name("ssl.keystore.location"), f"{location} holds no private key entry"
        )
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
    )

    # Re-encrypted with a one-off password: the PEM goes through a temporary file.
    one_off = secrets.token_urlsafe(24)
    key_pem = store.key.private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_off.encode())
    ).decode()
    chain_pem = [_pem_of(store.cert.certificate)] + [
        _pem_of(c.certificate) for c in store.additional_certs
    ]
    return KeyMaterial("".join([key_pem, *chain_pem]).encode(), one_off)


def trust_pem(settings: Settings) -> str | None:
    """The trusted CA certificates as PEM text; None when no truststore is configured."""
    inline = settings.get("ssl.truststore.certificates")
    location = settings.get("ssl.truststore.location")
    if inline:
        if location:
            raise SecurityConfigError(
                settings.name("ssl.truststore.location"),
                "set either a truststore file or ssl.truststore.certificates, not both",
            )
        certs = [b for k, b in pem_blocks(inline) if k == "CERTIFICATE"]
        if not certs:
            raise SecurityConfigError(
                settings.name("ssl.truststore.certificates"), "holds no PEM certificate"
            )
        return "".join(certs)
    if not location:
        return None
    data = _read(settings, "ssl.truststore.location")
    kind = _store_type(settings, "ssl.truststore.type", data)
    if kind == "PEM":
        certs = [b for k, b in pem_blocks(data.decode("utf-8", "replace")) if k == "CERTIFICATE"]
    else:
        store = _pkcs12(settings, "ssl.truststore.location", "ssl.truststore.password", data)
        found = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
        certs = [_pem_of(c.certificate) for c in found]
    if not certs:
        raise SecurityConfigError(
            settings.name("ssl.truststore.location"), f"{location} holds no certificate"
        )
    return "".join(certs)


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    fd, path = tempfile.mkstemp(prefix="kmirror-key-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def load_key_material(ctx: ssl.SSLContext, material: KeyMaterial, settings: Settings) -> None:
    where = settings.name(
        "ssl.keystore.location" if settings.get("ssl.keystore.location") else "ssl.keystore.key"
    )
    encrypted = b"ENCRYPTED PRIVATE KEY" in material.pem or b"Proc-Type:" in material.pem
    if encrypted and not material.password:
        raise SecurityConfigError(
            settings.name("ssl.key.password"), "is required: the private key is encrypted"
        )
    # A callable, never None: OpenSSL would otherwise prompt on the terminal for a password.
    password = material.password or ""
    with _private_file(material.pem) as path:
        try:
            ctx.load_cert_chain(path, password=lambda: password)
        except ssl.SSLError as e:
            hint = f" (is {settings.name('ssl.key.password')} right?)" if encrypted else ""
            raise SecurityConfigError(
                where, f"cannot load the private key and certificate chain: {e}{hint}"
            ) from None


def load_trust(ctx: ssl.SSLContext, pem: str, settings: Settings) -> None:
    try:
        ctx.load_verify_locations(cadata=pem)
    except ssl.SSLError as e:
        key = (
            "ssl.truststore.certificates"
            if settings.get("ssl.truststore.certificates")
            else "ssl.truststore.location"
        )
        raise SecurityConfigError(
            settings.name(key), f"cannot load the trusted certificates: {e}"
        ) from None
