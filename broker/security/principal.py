"""The principal a connection acts as (``User:<name>``), the string ACLs are written against.

Unauthenticated (PLAINTEXT, or TLS without a client certificate): ``User:ANONYMOUS``. After SASL:
``User:<authenticated name>``. With a verified client certificate (ssl.client.auth requested or
required): the subject's distinguished name in RFC 2253 form (most specific attribute first),
e.g. ``User:CN=alice,OU=eng,O=Example,C=US``, as the listener's ``ssl.principal.mapping.rules``
map it (DEFAULT: unchanged).
"""

from collections.abc import Sequence
from typing import Any, Final

from .principal_rules import DEFAULT_RULES as DEFAULT_RULES
from .principal_rules import Rule, map_dn

ANONYMOUS: Final = "User:ANONYMOUS"

# Python's long attribute names -> the short names Java's X500Principal prints (RFC 2253 and
# the keywords Java adds); others keep Python's name.
_SHORT: Final = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
    "emailAddress": "EMAILADDRESS",
}


def user(name: str) -> str:
    return f"User:{name}"


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_dn(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """RFC 2253 text of a subject as ``ssl.SSLSocket.getpeercert()`` returns it."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def from_peer_certificate(cert: Any, rules: tuple[Rule, ...] = DEFAULT_RULES) -> str | None:
    """The principal for a verified client certificate (``getpeercert()``), ANONYMOUS without
    one; None when no ``ssl.principal.mapping.rules`` rule maps its subject (Kafka fails the
    connection's authentication)."""
    if not isinstance(cert, dict) or not cert.get("subject"):
        return ANONYMOUS
    name = map_dn(rules, subject_dn(cert["subject"]))
    return None if name is None else user(name)
