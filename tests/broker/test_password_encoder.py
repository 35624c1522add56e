"""Secrets at rest: the password encoder (broker.security.password_encoder)."""

import base64

import pytest

from broker.config.properties import parse_properties
from broker.config.server_config import ConfigError, parse_server_config
from broker.security.password_encoder import (
    CIPHER_ALGORITHMS,
    ENCODED_PREFIX,
    KEYFACTORY_ALGORITHMS,
    PasswordDecodeError,
    PasswordEncoder,
    from_config,
    is_encoded,
)

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="mirror" password="p@ss,wörd:1";'
)


def _fields(stored: str) -> dict[str, str]:
    assert stored.startswith(ENCODED_PREFIX)
    return dict(f.split(":", 1) for f in stored[len(ENCODED_PREFIX) :].split(","))


def _join(fields: dict[str, str]) -> str:
    return ENCODED_PREFIX + ",".join(f"{k}:{v}" for k, v in fields.items())


@pytest.mark.parametrize("cipher", CIPHER_ALGORITHMS)
@pytest.mark.parametrize("kf", sorted(KEYFACTORY_ALGORITHMS))
@pytest.mark.parametrize("key_length", [128, 192, 256])
def test_round_trip(cipher: str, kf: str, key_length: int) -> None:
    enc = PasswordEncoder(
        "s3cret",
        cipher_algorithm=cipher,
        keyfactory_algorithm=kf,
        key_length=key_length,
        iterations=1024,
    )
    stored = enc.encode(JAAS)
    assert is_encoded(stored)
    assert "p@ss" not in stored and "username" not in stored
    fields = _fields(stored)
    assert fields["cipherAlgorithm"] == cipher and fields["keyFactoryAlgorithm"] == kf
    assert fields["keyLength"] == str(key_length) and fields["iterations"] == "1024"
    assert fields["passwordLength"] == str(len(JAAS))
    decoded = enc.decode(stored)
    assert decoded.value == JAAS and not decoded.with_old_secret


def test_each_encoding_has_its_own_salt_and_iv() -> None:
    enc = PasswordEncoder("s3cret")
    a, b = _fields(enc.encode("same")), _fields(enc.encode("same"))
    assert a["salt"] != b["salt"] and a["initializationVector"] != b["initializationVector"]
    assert a["encryptedPassword"] != b["encryptedPassword"]
    assert len(base64.b64decode(a["initializationVector"])) == 16  # CBC's block


def test_parameters_travel_with_the_value() -> None:
    """A value decodes with its own algorithm and iterations, whatever the encoder now uses."""
    old = PasswordEncoder("s3cret", cipher_algorithm="AES/GCM/NoPadding", iterations=2048)
    now = PasswordEncoder("s3cret", keyfactory_algorithm="PBKDF2WithHmacSHA1", key_length=256)
    assert now.decode(old.encode("pw")).value == "pw"


def test_old_secret_still_decodes_and_new_writes_use_the_new_secret() -> None:
    before = PasswordEncoder("old-secret")
    stored_before = before.encode("pw1")
    rotated = PasswordEncoder("new-secret", old_secret="old-secret")
    d = rotated.decode(stored_before)
    assert d.value == "pw1" and d.with_old_secret
    stored_after = rotated.encode("pw2")
    d = rotated.decode(stored_after)
    assert d.value == "pw2" and not d.with_old_secret
    with pytest.raises(PasswordDecodeError, match="does not match"):
        before.decode(stored_after)  # written with the new secret only
    # the rotation finished: the old secret removed, values it encoded are unreadable
    with pytest.raises(PasswordDecodeError, match="does not match"):
        PasswordEncoder("new-secret").decode(stored_before)


def test_wrong_secret_is_a_clear_error() -> None:
    stored = PasswordEncoder("right").encode("pw")
    with pytest.raises(PasswordDecodeError) as e:
        PasswordEncoder("wrong").decode(stored)
    assert str(e.value) == ("password.encoder.secret does not match the secret it was encoded with")
    with pytest.raises(PasswordDecodeError, match=r"nor does password\.encoder\.old\.secret"):
        PasswordEncoder("wrong", old_secret="also-wrong").decode(stored)


def test_gcm_detects_tampering() -> None:
    enc = PasswordEncoder("s3cret", cipher_algorithm="AES/GCM/NoPadding")
    fields = _fields(enc.encode("password"))
    ct = bytearray(base64.b64decode(fields["encryptedPassword"]))
    ct[0] ^= 0x01  # one bit of the ciphertext: GCM's tag no longer matches
    fields["encryptedPassword"] = base64.b64encode(bytes(ct)).decode()
    with pytest.raises(PasswordDecodeError, match=r"damaged \(authentication failed\)"):
        enc.decode(_join(fields))


def test_cbc_bad_padding_is_detected() -> None:
    enc = PasswordEncoder("s3cret")
    fields = _fields(enc.encode("password"))  # 8 chars: one block, padding 8 x 0x08
    iv = bytearray(base64.b64decode(fields["initializationVector"]))
    iv[-1] ^= 0x08  # the last plaintext byte becomes 0x00: no valid PKCS#5 padding
    fields["initializationVector"] = base64.b64encode(bytes(iv)).decode()
    with pytest.raises(PasswordDecodeError, match="damaged"):
        enc.decode(_join(fields))
    fields = _fields(enc.encode("password"))
    fields["encryptedPassword"] = base64.b64encode(b"\0" * 15).decode()  # not a whole block
    with pytest.raises(PasswordDecodeError, match="damaged"):
        enc.decode(_join(fields))


def test_malformed_values() -> None:
    enc = PasswordEncoder("s3cret")
    good = _fields(enc.encode("pw"))
    for name, value, needle in (
        ("salt", "not base64!", "salt is not base64"),
        ("cipherAlgorithm", "DES/ECB/NoPadding", "unsupported cipher"),
        ("keyFactoryAlgorithm", "MD5", "unsupported key factory"),
        ("keyLength", "x", "malformed"),
        ("keyLength", "64", "malformed"),
        ("passwordLength", "3", "length check"),
    ):
        with pytest.raises(PasswordDecodeError, match=needle):
            enc.decode(_join({**good, name: value}))
    without_iv = {k: v for k, v in good.items() if k != "initializationVector"}
    with pytest.raises(PasswordDecodeError, match="no initializationVector"):
        enc.decode(_join(without_iv))
    with pytest.raises(PasswordDecodeError, match="malformed"):
        enc.decode(ENCODED_PREFIX + "garbage")


def test_a_plain_value_written_before_encoding_passes_through() -> None:
    d = PasswordEncoder("s3cret").decode(JAAS)
    assert d.value == JAAS and not d.with_old_secret
    assert not is_encoded(JAAS) and not is_encoded("")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"secret": ""}, "must not be empty"),
        ({"cipher_algorithm": "AES/ECB/PKCS5Padding"}, "cipher"),
        ({"keyfactory_algorithm": "PBKDF2WithHmacMD5"}, "key factory"),
        ({"key_length": 160}, "AES key length"),
        ({"iterations": 1000}, "below 1024"),
    ],
)
def test_bad_settings(kwargs: dict[str, object], needle: str) -> None:
    args: dict[str, object] = {"secret": "s3cret", **kwargs}
    with pytest.raises(ValueError, match=needle):
        PasswordEncoder(**args)  # type: ignore[arg-type]


BASE = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
log.dirs=/tmp/x
"""


def test_from_server_config() -> None:
    cfg, warnings = parse_server_config(parse_properties(BASE, "s.properties"))
    assert warnings == [] and from_config(cfg) is None  # no secret: stored as plain text
    cfg, warnings = parse_server_config(
        parse_properties(
            BASE + "password.encoder.secret=s3cret\npassword.encoder.old.secret=old\n"
            "password.encoder.cipher.algorithm=AES/GCM/NoPadding\n"
            "password.encoder.keyfactory.algorithm=PBKDF2WithHmacSHA256\n"
            "password.encoder.key.length=256\npassword.encoder.iterations=2048\n",
            "s.properties",
        )
    )
    assert warnings == []  # implemented keys
    enc = from_config(cfg)
    assert enc is not None and enc.has_old_secret
    fields = _fields(enc.encode("pw"))
    assert fields["cipherAlgorithm"] == "AES/GCM/NoPadding"
    assert fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA256"
    assert (fields["keyLength"], fields["iterations"]) == ("256", "2048")
    assert enc.decode(PasswordEncoder("old").encode("x")).with_old_secret
    rows = {r.name: r for r in cfg.describe_broker_configs()}
    assert rows["password.encoder.secret"].sensitive
    assert rows["password.encoder.secret"].value is None  # never described
    assert rows["password.encoder.secret"].read_only  # never stored in the log it protects
    assert rows["password.encoder.iterations"].value == "2048"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("password.encoder.secret=\n", "password.encoder.secret must not be empty"),
        ("password.encoder.old.secret=hunter2\n", "password.encoder.old.secret needs"),
        ("password.encoder.key.length=160\n", "password.encoder.key.length"),
        ("password.encoder.key.length=64\n", "password.encoder.key.length"),
        ("password.encoder.iterations=100\n", "password.encoder.iterations"),
        ("password.encoder.cipher.algorithm=AES/ECB\n", "password.encoder.cipher.algorithm"),
        ("password.encoder.keyfactory.algorithm=MD5\n", "password.encoder.keyfactory.algorithm"),
    ],
)
def test_bad_server_config_names_the_key(extra: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as e:
        parse_server_config(parse_properties(BASE + extra, "s.properties"))
    assert "s.properties:7" in str(e.value)
    assert "hunter2" not in str(e.value)  # a secret is never repeated in an error
