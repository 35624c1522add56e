"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): the credential formulas, the server
side of the exchange (two SaslAuthenticate round trips) and the client side.

Kafka's behaviour kept: mechanism types 1 (SHA-256) and 2 (SHA-512) as in its metadata records;
4096..16384 iterations; the user name is the client-first ``n=`` value with ``=2C``/``=3D``
decoded; an ``a=`` authorization id must be empty or equal the user name; an unknown user fails at
the first message; no channel binding (``n,,`` / ``c=biws``). Extensions (``tokenauth``) are
accepted in the client-first message and ignored: delegation tokens are not served.
"""

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .errors import AuthenticationFailed

MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384


@dataclass(frozen=True, slots=True)
class Mechanism:
    name: str
    type: int  # ScramMechanism type in Kafka's records and admin RPCs
    hash: str  # hashlib name

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash).digest()


SHA256: Final = Mechanism("SCRAM-SHA-256", 1, "sha256")
SHA512: Final = Mechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: Final = {m.name: m for m in (SHA256, SHA512)}
BY_TYPE: Final = {m.type: m for m in (SHA256, SHA512)}


@dataclass(frozen=True, slots=True)
class Credential:
    """What the server stores per user and mechanism (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(m: Mechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(m.hash, password.encode("utf-8"), salt, iterations)


def credential_from_salted(m: Mechanism, salted: bytes, salt: bytes, iterations: int) -> Credential:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(.., "Server Key")."""
    client_key = m.hmac(salted, b"Client Key")
    return Credential(salt, m.digest(client_key), m.hmac(salted, b"Server Key"), iterations)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise AuthenticationFailed(f"Invalid SCRAM {what}: bad base64") from None


def decode_saslname(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


_PRINTABLE_NONCE: Final = re.compile(r"^[\x21-\x2b\x2d-\x7e]+$")  # printable, no comma


def _attrs(text: str, what: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.isalpha():
            raise AuthenticationFailed(f"Invalid SCRAM {what} format")
        out.append((key, value))
    return out


class ScramServer:
    """One server-side exchange. ``lookup(user, mechanism)`` returns the stored credential."""

    def __init__(
        self,
        mechanism: Mechanism,
        lookup: Callable[[str, Mechanism], Credential | None],
        nonce: Callable[[], str] = lambda: secrets.token_hex(16),
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._new_nonce = nonce
        self._step = 0
        self._credential: Credential | None = None
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""
        self.username: str | None = None  # set once complete
        self.complete = False

    def _fail(self, message: str, tell_client: bool = False) -> AuthenticationFailed:
        self._step = -1
        self._credential = None
        generic = (
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism.name}"
        )
        return AuthenticationFailed(message, message if tell_client else generic)

    def evaluate(self, data: bytes) -> bytes:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("Invalid SCRAM message: not UTF-8") from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise self._fail("Unexpected SCRAM message: the exchange is over")

    def _client_first(self, text: str) -> bytes:
        # gs2-header: "n," [ "a=" authzid ] "," ; "y"/"p" (channel binding) are not offered.
        if not text.startswith("n,"):
            raise self._fail(
                "Invalid SCRAM client first message format: channel binding not supported"
            )
        comma = text.find(",", 2)
        if comma < 0:
            raise self._fail("Invalid SCRAM client first message format")
        authz = text[2:comma]
        self._gs2 = text[: comma + 1]
        bare = text[comma + 1 :]
        attrs = _attrs(bare, "client first message")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise self._fail("Invalid SCRAM client first message format")
        saslname, client_nonce = attrs[0][1], attrs[1][1]
        if not saslname or not _PRINTABLE_NONCE.match(client_nonce):
            raise self._fail("Invalid SCRAM client first message format")
        username = decode_saslname(saslname)
        if authz and (not authz.startswith("a=") or decode_saslname(authz[2:]) != username):
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different "
                "from username",
                tell_client=True,
            )
        cred = self._lookup(username, self.mechanism)
        if cred is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        if cred.iterations < MIN_ITERATIONS:
            raise self._fail(
                f"Iterations {cred.iterations} is less than the minimum {MIN_ITERATIONS}"
            )
        self._credential = cred
        self.username = username
        self._first_bare = bare
        self._nonce = client_nonce + self._new_nonce()
        self._server_first = f"r={self._nonce},s={_b64(cred.salt)},i={cred.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        cred = self._credential
        assert cred is not None
        head, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise self._fail("Invalid SCRAM client final message format")
        attrs = _attrs(head, "client final message")
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise self._fail("Invalid SCRAM client final message format")
        if _unb64(attrs[0][1], "channel binding") != self._gs2.encode():
            raise self._fail("Invalid SCRAM client final message: channel binding mismatch")
        if attrs[1][1] != self._nonce:
            raise self._fail("Invalid client nonce in the final client message.")
        proof = _unb64(proof_b64, "client proof")
        m = self.mechanism
        auth_message = f"{self._first_bare},{self._server_first},{head}".encode()
        signature = m.hmac(cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._fail("Invalid client credentials")
        if not hmac.compare_digest(m.digest(_xor(proof, signature)), cred.stored_key):
            raise self._fail("Invalid client credentials")
        server_signature = m.hmac(cred.server_key, auth_message)
        self._credential = None
        self._step = 2
        self.complete = True
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """The client side: ``first()``, then ``final(server_first)``, then ``verify(server_final)``."""

    def __init__(
        self, mechanism: Mechanism, username: str, password: str, nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce or secrets.token_hex(16)
        self._first_bare = f"n={encode_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = dict(_attrs(text, "server first message"))
        nonce, salt_b64, iters = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt_b64 is None or not iters.isdigit():
            raise AuthenticationFailed(f"Invalid SCRAM server first message: {text}")
        iterations = int(iters)
        if iterations < MIN_ITERATIONS:
            raise AuthenticationFailed(f"SCRAM iterations {iterations} below {MIN_ITERATIONS}")
        m = self.mechanism
        salted = salted_password(m, self._password, _unb64(salt_b64, "salt"), iterations)
        client_key = m.hmac(salted, b"Client Key")
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        proof = _xor(client_key, m.hmac(m.digest(client_key), auth_message))
        self._server_signature = m.hmac(m.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise AuthenticationFailed(f"SCRAM authentication failed: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(
            _unb64(text[2:].split(",")[0], "server signature"), self._server_signature
        ):
            raise AuthenticationFailed("SCRAM server signature does not verify")
