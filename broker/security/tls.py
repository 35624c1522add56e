"""TLS contexts from Kafka's ``ssl.*`` keys: a listener's server context and a client context.

Keys read: ``ssl.keystore.*`` / ``ssl.key.password`` (see stores.py), ``ssl.truststore.*``,
``ssl.client.auth`` (none | requested | required), ``ssl.enabled.protocols`` and ``ssl.protocol``
(the TLS versions allowed), ``ssl.cipher.suites`` (IANA names as Kafka takes them, or OpenSSL
names) and, for clients, ``ssl.endpoint.identification.algorithm`` (``https`` checks the host
name, empty does not). Every problem is a `SecurityConfigError` naming the key.
"""

import logging
import re
import ssl
from typing import Final

from .errors import SecurityConfigError
from .settings import Settings
from .stores import key_material, load_key_material, load_trust, trust_pem

log = logging.getLogger(__name__)

CLIENT_AUTH: Final = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_VERSIONS: Final = {
    "TLSV1": ssl.TLSVersion.TLSv1,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}
# TLS 1.3 suites: always enabled by OpenSSL; Python's ssl module cannot narrow them.
_TLS13_SUITES: Final = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
_IANA: Final = re.compile(r"^TLS_(?:(ECDHE|DHE)_(RSA|ECDSA)|RSA)_WITH_(.+?)_(SHA\d*)$")
_IANA_CIPHERS: Final = {
    "AES_128_GCM": "AES128-GCM",
    "AES_256_GCM": "AES256-GCM",
    "AES_128_CBC": "AES128",
    "AES_256_CBC": "AES256",
    "CHACHA20_POLY1305": "CHACHA20-POLY1305",
    "AES_128_CCM": "AES128-CCM",
    "AES_256_CCM": "AES256-CCM",
}


def openssl_cipher_name(name: str) -> str | None:
    """OpenSSL's name for an IANA (Java) TLS 1.2 suite name; None when it has no rule here.
    Names that are not IANA-style are returned unchanged (already OpenSSL names)."""
    if not name.startswith("TLS_"):
        return name
    m = _IANA.match(name)
    if m is None:
        return None
    kx, auth, cipher, mac = m.groups()
    body = _IANA_CIPHERS.get(cipher)
    if body is None:
        return None
    parts = [f"{kx}-{auth}"] if kx else []
    parts.append(body)
    if not body.endswith(("POLY1305", "CCM")):
        parts.append(mac)  # e.g. ECDHE-RSA-AES128-GCM-SHA256, ECDHE-RSA-AES128-SHA (CBC)
    return "-".join(parts)


def _set_protocols(ctx: ssl.SSLContext, settings: Settings) -> None:
    key = "ssl.enabled.protocols"
    names = [p.strip() for p in (settings.get(key) or "").split(",") if p.strip()]
    if not names:
        raise SecurityConfigError(settings.name(key), "must list at least one TLS version")
    versions = []
    for n in names:
        v = _VERSIONS.get(n.upper())
        if v is None:
            raise SecurityConfigError(
                settings.name(key), f"unknown protocol {n} (use TLSv1.2, TLSv1.3, TLSv1.1, TLSv1)"
            )
        versions.append(v)
    cap = (settings.get("ssl.protocol") or "TLS").upper()
    if cap not in ("TLS", "SSL") and cap not in _VERSIONS:
        raise SecurityConfigError(settings.name("ssl.protocol"), f"unknown protocol {cap}")
    top = max(versions)
    if cap in _VERSIONS:
        top = min(top, _VERSIONS[cap])  # an SSLContext for TLSv1.2 speaks up to 1.2, as in Java
    bottom = min(versions)
    if bottom > top:
        raise SecurityConfigError(
            settings.name(key), f"no enabled protocol is allowed by ssl.protocol={cap}"
        )
    ctx.minimum_version = bottom
    ctx.maximum_version = top


def _set_ciphers(ctx: ssl.SSLContext, settings: Settings) -> None:
    key = "ssl.cipher.suites"
    names = [c.strip() for c in (settings.get(key) or "").split(",") if c.strip()]
    if not names:
        return  # OpenSSL's defaults
    chosen = []
    for n in names:
        if n.upper() in _TLS13_SUITES:
            continue
        o = openssl_cipher_name(n)
        if o is None:
            raise SecurityConfigError(settings.name(key), f"unknown cipher suite {n}")
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            probe.set_ciphers(o)
        except ssl.SSLError:
            raise SecurityConfigError(
                settings.name(key), f"cipher suite {n} is not available in this OpenSSL"
            ) from None
        chosen.append(o)
    if len(chosen) < len(names):
        log.warning("%s: TLS 1.3 suites cannot be narrowed here; all stay enabled", key)
    if chosen:
        ctx.set_ciphers(":".join(chosen))


def server_context(settings: Settings) -> ssl.SSLContext:
    """The context of an SSL or SASL_SSL listener."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, settings)
    material = key_material(settings)
    if material is None:
        raise SecurityConfigError(
            settings.name("ssl.keystore.location"),
            "a TLS listener needs a keystore: set ssl.keystore.location (PEM or PKCS12) or "
            "ssl.keystore.certificate.chain and ssl.keystore.key",
        )
    load_key_material(ctx, material, settings)
    auth_key = "ssl.client.auth"
    auth = (settings.get(auth_key) or "none").strip().lower()
    mode = CLIENT_AUTH.get(auth)
    if mode is None:
        raise SecurityConfigError(
            settings.name(auth_key), f"invalid value {auth!r} (expected none, requested, required)"
        )
    trust = trust_pem(settings)
    if trust is not None:
        load_trust(ctx, trust, settings)
    if mode is not ssl.CERT_NONE:
        if trust is None:
            raise SecurityConfigError(
                settings.name("ssl.truststore.location"),
                f"{settings.name(auth_key)}={auth} needs a truststore to verify client "
                "certificates (ssl.truststore.location or ssl.truststore.certificates)",
            )
        ctx.verify_mode = mode
    _set_ciphers(ctx, settings)
    return ctx


def client_context(settings: Settings) -> ssl.SSLContext:
    """The context of a TLS client (a mirror's source connections, the CLI)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, settings)
    trust = trust_pem(settings)
    if trust is not None:
        load_trust(ctx, trust, settings)
    else:
        ctx.load_default_certs()
    algo_key = "ssl.endpoint.identification.algorithm"
    algo = (settings.get(algo_key) or "").strip().lower()
    if algo not in ("", "https"):
        raise SecurityConfigError(
            settings.name(algo_key), f"unknown algorithm {algo!r} (https or empty)"
        )
    ctx.check_hostname = algo == "https"
    material = key_material(settings)
    if material is not None:
        load_key_material(ctx, material, settings)
    _set_ciphers(ctx, settings)
    return ctx
