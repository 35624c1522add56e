"""Secrets at rest: encrypt a config value with ``password.encoder.secret`` (Kafka's names).

The idea is Kafka's ZooKeeper-era ``EncryptingPasswordEncoder``: a PBKDF2 key derived from the
secret with a random salt, AES with a random IV, and every parameter stored next to the
ciphertext so a later change of algorithm, key length or iterations still decodes old values.
Not byte-compatible with Kafka. A stored value is the marker ``ENCODED_PREFIX`` followed by
comma-separated ``name:value`` fields (base64 for bytes; base64 has neither ``,`` nor ``:``)::

    {kmirror-encoded}keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,
    keyLength:128,iterations:4096,salt:<32 bytes>,initializationVector:<16 bytes (12 for GCM)>,
    keyCheck:<8 bytes>,encryptedPassword:<ciphertext, GCM's tag appended>,passwordLength:<chars>

(one line). ``keyCheck`` is 8 more bytes of the same PBKDF2 output (never the AES key): it
tells a wrong secret from a damaged value, which CBC alone cannot. A value without the marker
was written before encoding existed and is returned as it is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

if TYPE_CHECKING:
    from broker.config.server_config import ServerConfig

__all__ = [
    "CIPHER_ALGORITHMS",
    "ENCODED_PREFIX",
    "KEYFACTORY_ALGORITHMS",
    "KEY_LENGTHS",
    "MIN_ITERATIONS",
    "Decoded",
    "PasswordDecodeError",
    "PasswordEncoder",
    "from_config",
    "is_encoded",
]

ENCODED_PREFIX: Final = "{kmirror-encoded}"
# Kafka's key factory names -> hashlib's digest names
KEYFACTORY_ALGORITHMS: Final = {
    "PBKDF2WithHmacSHA1": "sha1",
    "PBKDF2WithHmacSHA256": "sha256",
    "PBKDF2WithHmacSHA512": "sha512",
}
CBC: Final = "AES/CBC/PKCS5Padding"
GCM: Final = "AES/GCM/NoPadding"
CIPHER_ALGORITHMS: Final = (CBC, GCM)
KEY_LENGTHS: Final = (128, 192, 256)  # AES's
MIN_ITERATIONS: Final = 1024  # Kafka's lower bound for password.encoder.iterations
_SALT_BYTES, _CHECK_BYTES = 32, 8
_IV_BYTES: Final = {CBC: 16, GCM: 12}
_FIELDS: Final = (
    "keyFactoryAlgorithm",
    "cipherAlgorithm",
    "keyLength",
    "iterations",
    "salt",
    "initializationVector",
    "keyCheck",
    "encryptedPassword",
    "passwordLength",
)


class PasswordDecodeError(ValueError):
    """A stored value this encoder cannot decode; the message says why."""


@dataclass(frozen=True, slots=True)
class Decoded:
    value: str
    with_old_secret: bool  # decoded with password.encoder.old.secret: should be re-encoded


def is_encoded(value: str) -> bool:
    return value.startswith(ENCODED_PREFIX)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(fields: dict[str, str], name: str) -> bytes:
    try:
        return base64.b64decode(fields[name], validate=True)
    except (binascii.Error, ValueError):
        raise PasswordDecodeError(f"the stored value is malformed ({name} is not base64)") from None


class PasswordEncoder:
    """Encodes with ``secret``; decodes with it, else with ``old_secret`` (a rotation)."""

    def __init__(
        self,
        secret: str,
        *,
        old_secret: str | None = None,
        keyfactory_algorithm: str = "PBKDF2WithHmacSHA512",
        cipher_algorithm: str = CBC,
        key_length: int = 128,
        iterations: int = 4096,
    ) -> None:
        if not secret:
            raise ValueError("password.encoder.secret must not be empty")
        if keyfactory_algorithm not in KEYFACTORY_ALGORITHMS:
            raise ValueError(f"unsupported key factory algorithm {keyfactory_algorithm}")
        if cipher_algorithm not in CIPHER_ALGORITHMS:
            raise ValueError(f"unsupported cipher algorithm {cipher_algorithm}")
        if key_length not in KEY_LENGTHS:
            raise ValueError(f"key length {key_length} is not an AES key length (128, 192, 256)")
        if iterations < MIN_ITERATIONS:
            raise ValueError(f"iterations {iterations} is below {MIN_ITERATIONS}")
        self._secret = secret.encode("utf-8")
        self._old_secret = old_secret.encode("utf-8") if old_secret else None
        self._kf = keyfactory_algorithm
        self._cipher = cipher_algorithm
        self._key_length = key_length
        self._iterations = iterations

    @property
    def has_old_secret(self) -> bool:
        return self._old_secret is not None

    def encode(self, password: str) -> str:
        salt = os.urandom(_SALT_BYTES)
        iv = os.urandom(_IV_BYTES[self._cipher])
        key, check = _derive(self._secret, self._kf, salt, self._iterations, self._key_length)
        fields = {
            "keyFactoryAlgorithm": self._kf,
            "cipherAlgorithm": self._cipher,
            "keyLength": str(self._key_length),
            "iterations": str(self._iterations),
            "salt": _b64(salt),
            "initializationVector": _b64(iv),
            "keyCheck": _b64(check),
            "encryptedPassword": _b64(_encrypt(self._cipher, key, iv, password.encode("utf-8"))),
            "passwordLength": str(len(password)),
        }
        return ENCODED_PREFIX + ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, stored: str) -> Decoded:
        """The value ``stored`` stands for; raises PasswordDecodeError saying why not."""
        if not is_encoded(stored):
            return Decoded(stored, False)  # written before encoding existed
        fields = _parse(stored)
        kf, cipher = fields["keyFactoryAlgorithm"], fields["cipherAlgorithm"]
        if kf not in KEYFACTORY_ALGORITHMS:
            raise PasswordDecodeError(f"unsupported key factory algorithm {kf}")
        if cipher not in CIPHER_ALGORITHMS:
            raise PasswordDecodeError(f"unsupported cipher algorithm {cipher}")
        try:
            key_length, iterations = int(fields["keyLength"]), int(fields["iterations"])
            length = int(fields["passwordLength"])
        except ValueError:
            raise PasswordDecodeError("the stored value is malformed (a number is not)") from None
        if key_length not in KEY_LENGTHS or iterations < 1:
            raise PasswordDecodeError("the stored value is malformed (key length or iterations)")
        salt, iv = _unb64(fields, "salt"), _unb64(fields, "initializationVector")
        check, ciphertext = _unb64(fields, "keyCheck"), _unb64(fields, "encryptedPassword")
        if len(iv) != _IV_BYTES[cipher]:
            raise PasswordDecodeError("the stored value is malformed (initializationVector)")
        candidates = [(self._secret, False)]
        if self._old_secret is not None:
            candidates.append((self._old_secret, True))
        for secret, is_old in candidates:
            key, expected = _derive(secret, kf, salt, iterations, key_length)
            if hmac.compare_digest(expected, check):
                value = _decrypt(cipher, key, iv, ciphertext)
                if len(value) != length:
                    raise PasswordDecodeError("the stored value is damaged (length check failed)")
                return Decoded(value, is_old)
        nor = " (nor does password.encoder.old.secret)" if self._old_secret is not None else ""
        raise PasswordDecodeError(
            f"password.encoder.secret does not match the secret it was encoded with{nor}"
        )


def from_config(config: ServerConfig) -> PasswordEncoder | None:
    """The node's encoder, or None without ``password.encoder.secret`` (plain text, as Kafka's
    KRaft mode stores every secret)."""
    if not config.password_encoder_secret:
        return None
    return PasswordEncoder(
        config.password_encoder_secret,
        old_secret=config.password_encoder_old_secret or None,
        keyfactory_algorithm=config.password_encoder_keyfactory_algorithm,
        cipher_algorithm=config.password_encoder_cipher_algorithm,
        key_length=config.password_encoder_key_length,
        iterations=config.password_encoder_iterations,
    )


def _parse(stored: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for item in stored[len(ENCODED_PREFIX) :].split(","):
        name, sep, value = item.partition(":")
        if not sep:
            raise PasswordDecodeError(f"the stored value is malformed ({item[:20]!r})")
        fields[name] = value
    missing = [f for f in _FIELDS if f not in fields]
    if missing:
        raise PasswordDecodeError(f"the stored value is malformed (no {missing[0]})")
    return fields


def _derive(
    secret: bytes, kf: str, salt: bytes, iterations: int, key_length: int
) -> tuple[bytes, bytes]:
    """(AES key, key check): one PBKDF2 output split in two, so the check is not the key."""
    n = key_length // 8
    out = hashlib.pbkdf2_hmac(KEYFACTORY_ALGORITHMS[kf], secret, salt, iterations, n + _CHECK_BYTES)
    return out[:n], out[n:]


def _encrypt(cipher: str, key: bytes, iv: bytes, plain: bytes) -> bytes:
    if cipher == GCM:
        return AESGCM(key).encrypt(iv, plain, None)  # ciphertext || 16-byte tag, as Java's
    padder = padding.PKCS7(128).padder()  # Java's PKCS5Padding on a 16-byte block
    padded = padder.update(plain) + padder.finalize()
    enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return enc.update(padded) + enc.finalize()


def _decrypt(cipher: str, key: bytes, iv: bytes, ciphertext: bytes) -> str:
    try:
        if cipher == GCM:
            plain = AESGCM(key).decrypt(iv, ciphertext, None)
        else:
            dec = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
            padded = dec.update(ciphertext) + dec.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            plain = unpadder.update(padded) + unpadder.finalize()
        return plain.decode("utf-8")
    except InvalidTag:
        raise PasswordDecodeError("the stored value is damaged (authentication failed)") from None
    except ValueError as e:  # bad padding, a partial block, or not UTF-8
        raise PasswordDecodeError(f"the stored value is damaged ({e})") from None
