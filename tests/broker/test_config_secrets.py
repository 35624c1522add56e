"""Secrets at rest in the metadata log: the controller writes sensitive config values encoded,
the image holds them decoded, and a node that cannot decode one leaves it out of its image
without losing it (broker.controller.config_secrets, broker.metadata.image)."""

import asyncio
import logging
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.config_secrets import ConfigSecrets, is_sensitive
from broker.controller.controller import (
    DELETE,
    SET,
    ConfigChange,
    ConfigValidationError,
    Controller,
    Validators,
)
from broker.controller.mirrors import MirrorController
from broker.metadata.image import (
    BROKER_RESOURCE,
    MIRROR_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    apply_records,
)
from broker.security.password_encoder import ENCODED_PREFIX, PasswordEncoder, is_encoded
from protocol.metadata_records import decode_metadata_record, encode_metadata_record

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="mirror" password="hunter2";'
)
SRC = {"bootstrap.servers": "src:9092", "security.protocol": "SASL_PLAINTEXT"}
LOG = "broker.controller.config_secrets"


class SecretQuorum:
    """A one-voter quorum in memory that keeps every committed record (the log) and builds the
    image through the node's ConfigSecrets, as Node.publish does."""

    def __init__(self, secrets: ConfigSecrets) -> None:
        self.secrets = secrets
        self.image = MetadataImage()
        self.log: list[Any] = []

    async def append(self, records: list[Any]) -> int:
        first = len(self.log)
        self.log.extend(decode_metadata_record(encode_metadata_record(r)) for r in records)
        self.image, _ = apply_records(
            self.image, list(enumerate(self.log[first:], first)), self.secrets.open
        )
        return len(self.log) - 1

    def replay(self, secrets: ConfigSecrets) -> MetadataImage:
        """What a restarted node with ``secrets`` builds from the same log."""
        return apply_records(MetadataImage(), list(enumerate(self.log)), secrets.open)[0]

    def stored(self, name: str, key: str) -> list[str | None]:
        """Every value the log holds for mirror ``name``'s ``key``, in order."""
        return [
            r.value
            for r in self.log
            if type(r).__name__ == "ConfigRecord"
            and r.resource_type == MIRROR_RESOURCE
            and r.resource_name == name
            and r.name == key
        ]


def _setup(secrets: ConfigSecrets) -> tuple[SecretQuorum, Controller, MirrorController]:
    q = SecretQuorum(secrets)
    c, mc = _restart(q, secrets)
    asyncio.run(c.register_broker([("PLAINTEXT", "localhost", 9092, 0)], None, {}))
    return q, c, mc


def _restart(q: SecretQuorum, secrets: ConfigSecrets) -> tuple[Controller, MirrorController]:
    """The node restarted with ``secrets``: its image replayed from the log, a new controller."""
    q.secrets, q.image = secrets, q.replay(secrets)
    v = Validators(topic_config=lambda k, v: v, broker_config=lambda k, v: v, secrets=secrets)
    c = Controller(q, lambda: q.image, v, node_id=1)
    return c, MirrorController(c, state_topic_partitions=1, state_topic_replication_factor=1)


def _alter(c: Controller, change: ConfigChange) -> Any:
    (r,) = asyncio.run(c.alter_configs([change], False))
    return r


def _encoder(secret: str = "s3cret", old: str | None = None) -> PasswordEncoder:
    return PasswordEncoder(secret, old_secret=old, iterations=1024)


def test_sensitive_keys() -> None:
    assert is_sensitive(MIRROR_RESOURCE, "sasl.jaas.config")
    assert is_sensitive(MIRROR_RESOURCE, "ssl.key.password")
    assert not is_sensitive(MIRROR_RESOURCE, "bootstrap.servers")
    # PASSWORD-typed dynamic broker configs, also per listener
    assert is_sensitive(BROKER_RESOURCE, "ssl.keystore.password")
    assert is_sensitive(BROKER_RESOURCE, "listener.name.sasl_ssl.ssl.key.password")
    assert is_sensitive(BROKER_RESOURCE, "listener.name.sasl.plain.sasl.jaas.config")
    assert not is_sensitive(BROKER_RESOURCE, "background.threads")
    assert not is_sensitive(TOPIC_RESOURCE, "retention.ms")


def test_mirror_secrets_are_encoded_in_the_log_and_decoded_in_the_image() -> None:
    q, c, mc = _setup(ConfigSecrets(_encoder()))
    assert asyncio.run(mc.create_mirror("dr", {**SRC, "sasl.jaas.config": JAAS})) == (
        ErrorCode.none,
        None,
    )
    (stored,) = q.stored("dr", "sasl.jaas.config")
    assert stored is not None and is_encoded(stored) and "hunter2" not in stored
    assert q.stored("dr", "bootstrap.servers") == ["src:9092"]  # not a secret: as given
    assert q.image.config(MIRROR_RESOURCE, "dr")["sasl.jaas.config"] == JAAS
    # an alter that leaves the secret alone does not rewrite it; a new value is encoded
    assert _alter(c, ConfigChange(MIRROR_RESOURCE, "dr", [("client.id", SET, "x")])).error == 0
    assert (
        _alter(c, ConfigChange(MIRROR_RESOURCE, "dr", [("sasl.jaas.config", SET, JAAS)])).error == 0
    )
    assert len(q.stored("dr", "sasl.jaas.config")) == 1
    new = JAAS.replace("hunter2", "hunter3")
    assert (
        _alter(c, ConfigChange(MIRROR_RESOURCE, "dr", [("sasl.jaas.config", SET, new)])).error == 0
    )
    last = q.stored("dr", "sasl.jaas.config")[-1]
    assert last is not None and is_encoded(last) and "hunter3" not in last
    assert q.image.config(MIRROR_RESOURCE, "dr")["sasl.jaas.config"] == new
    # a restart with the same secret reads the same image
    assert q.replay(ConfigSecrets(_encoder())).configs == q.image.configs


def test_dynamic_broker_passwords_are_encoded() -> None:
    q, c, _mc = _setup(ConfigSecrets(_encoder()))
    change = ConfigChange(BROKER_RESOURCE, "1", [("ssl.keystore.password", SET, "ks-pw")])
    assert _alter(c, change).error == ErrorCode.none
    (rec,) = [r for r in q.log if getattr(r, "name", None) == "ssl.keystore.password"]
    assert is_encoded(rec.value) and "ks-pw" not in rec.value
    assert q.image.config(BROKER_RESOURCE, "1")["ssl.keystore.password"] == "ks-pw"


def test_without_a_secret_values_are_plain_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, LOG)
    q, c, mc = _setup(ConfigSecrets(None))
    asyncio.run(mc.create_mirror("dr", {**SRC, "sasl.jaas.config": JAAS, "ssl.key.password": "k"}))
    assert q.stored("dr", "sasl.jaas.config") == [JAAS]  # as before secrets at rest
    assert q.image.config(MIRROR_RESOURCE, "dr")["sasl.jaas.config"] == JAAS
    asyncio.run(mc.create_mirror("dr2", {**SRC, "sasl.jaas.config": JAAS}))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "password.encoder.secret is not set" in warnings[0].getMessage()
    assert "unencrypted" in warnings[0].getMessage()
    # a plain value that looks encoded would read back as unreadable: refused
    code, msg = asyncio.run(mc.create_mirror("x", {**SRC, "ssl.key.password": ENCODED_PREFIX}))
    assert code == ErrorCode.invalid_config and msg and "password.encoder.secret" in msg
    bad = ConfigChange(MIRROR_RESOURCE, "dr", [("ssl.key.password", SET, ENCODED_PREFIX + "x")])
    assert _alter(c, bad).error == ErrorCode.invalid_config


def test_a_node_without_the_secret_logs_keeps_and_deletes_the_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q, c, mc = _setup(ConfigSecrets(_encoder()))
    asyncio.run(mc.create_mirror("dr", {**SRC, "sasl.jaas.config": JAAS}))
    (stored,) = q.stored("dr", "sasl.jaas.config")
    assert stored is not None

    caplog.set_level(logging.ERROR, LOG)
    for secrets, why in (
        (ConfigSecrets(None), "password.encoder.secret is not set"),
        (ConfigSecrets(_encoder("other")), "password.encoder.secret does not match"),
    ):
        caplog.clear()
        img = q.replay(secrets)
        assert "sasl.jaas.config" not in img.config(MIRROR_RESOURCE, "dr")  # treated as absent
        assert img.config(MIRROR_RESOURCE, "dr")["bootstrap.servers"] == "src:9092"
        assert img.stored_config(MIRROR_RESOURCE, "dr")["sasl.jaas.config"] == stored
        (err,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert err.startswith(f"cannot decode mirror dr's sasl.jaas.config: {why}"), err

    # That node is now the controller: alters leave the value alone, a delete reaches it.
    c, mc = _restart(q, ConfigSecrets(None))
    assert _alter(c, ConfigChange(MIRROR_RESOURCE, "dr", [("client.id", SET, "x")])).error == 0
    assert q.stored("dr", "sasl.jaas.config") == [stored]
    assert (
        q.replay(ConfigSecrets(_encoder())).config(MIRROR_RESOURCE, "dr")["sasl.jaas.config"]
        == JAAS
    )
    assert asyncio.run(mc.delete_mirror("dr")) == (ErrorCode.none, None)
    assert q.stored("dr", "sasl.jaas.config") == [stored, None]
    img = q.replay(ConfigSecrets(_encoder()))  # the node with the secret: the mirror is gone
    assert not img.config(MIRROR_RESOURCE, "dr") and not img.stored_config(MIRROR_RESOURCE, "dr")


def test_replacing_or_deleting_an_unreadable_value() -> None:
    q, c, mc = _setup(ConfigSecrets(_encoder()))
    asyncio.run(mc.create_mirror("dr", {**SRC, "sasl.jaas.config": JAAS, "ssl.key.password": "k"}))
    c, mc = _restart(q, ConfigSecrets(_encoder("other")))
    # DELETE of a key this node cannot read
    change = ConfigChange(MIRROR_RESOURCE, "dr", [("ssl.key.password", DELETE, None)])
    assert _alter(c, change).error == ErrorCode.none
    assert q.stored("dr", "ssl.key.password")[-1] is None
    # a replacing AlterConfigs (legacy) without the key drops it too
    legacy = ConfigChange(MIRROR_RESOURCE, "dr", [("bootstrap.servers", SET, "src:9092")], True)
    assert _alter(c, legacy).error == ErrorCode.none
    assert q.stored("dr", "sasl.jaas.config")[-1] is None
    assert not q.image.unreadable_configs
    # setting it again makes it readable here
    change = ConfigChange(MIRROR_RESOURCE, "dr", [("sasl.jaas.config", SET, JAAS)])
    assert _alter(c, change).error == ErrorCode.none
    assert q.image.config(MIRROR_RESOURCE, "dr")["sasl.jaas.config"] == JAAS


def test_old_secret_and_plain_legacy_values_are_rewritten_by_the_next_alter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q, _c, mc = _setup(ConfigSecrets(None))  # an existing cluster: plain text in the log
    asyncio.run(mc.create_mirror("dr", {**SRC, "sasl.jaas.config": JAAS}))
    q2, _c2, mc2 = _setup(ConfigSecrets(_encoder("old")))
    asyncio.run(mc2.create_mirror("dr", {**SRC, "ssl.key.password": "k"}))

    caplog.set_level(logging.WARNING, LOG)
    for quorum, key in ((q, "sasl.jaas.config"), (q2, "ssl.key.password")):
        secrets = ConfigSecrets(_encoder("new", old="old"))
        caplog.clear()
        controller, _mc = _restart(quorum, secrets)
        assert key in quorum.image.config(MIRROR_RESOURCE, "dr")  # still read
        (warning,) = [r.getMessage() for r in caplog.records]
        assert f"mirror dr's {key}" in warning and "set it again" in warning
        assert secrets.is_stale(MIRROR_RESOURCE, "dr", key)
        same = quorum.image.config(MIRROR_RESOURCE, "dr")[key]
        assert (
            _alter(controller, ConfigChange(MIRROR_RESOURCE, "dr", [(key, SET, same)])).error == 0
        )
        last = quorum.stored("dr", key)[-1]
        assert last is not None and is_encoded(last)  # re-encoded with the new secret
        assert not secrets.is_stale(MIRROR_RESOURCE, "dr", key)
        img = quorum.replay(ConfigSecrets(_encoder("new")))  # the old secret can go now
        assert img.config(MIRROR_RESOURCE, "dr")[key] == same


def test_image_moves_a_key_between_readable_and_unreadable() -> None:
    enc = _encoder()
    rec = type(
        "ConfigRecord",
        (),
        {"resource_type": MIRROR_RESOURCE, "resource_name": "dr", "name": "ssl.key.password"},
    )

    def config_record(value: str | None) -> Any:
        r = rec()
        r.value = value
        return r

    secrets = ConfigSecrets(_encoder("other"))
    img, delta = apply_records(MetadataImage(), [(0, config_record(enc.encode("k")))], secrets.open)
    assert delta.changed_configs == [(MIRROR_RESOURCE, "dr")]
    assert not img.configs and "ssl.key.password" in img.unreadable_configs[(MIRROR_RESOURCE, "dr")]
    img, _ = apply_records(img, [(1, config_record("plain"))], secrets.open)
    assert dict(img.config(MIRROR_RESOURCE, "dr")) == {"ssl.key.password": "plain"}
    assert not img.unreadable_configs
    img, _ = apply_records(img, [(2, config_record(enc.encode("k")))], secrets.open)
    img, _ = apply_records(img, [(3, config_record(None))], secrets.open)
    assert not img.configs and not img.unreadable_configs
    # without an opener (tools, tests) the stored value is the value
    img, _ = apply_records(MetadataImage(), [(0, config_record(enc.encode("k")))])
    assert is_encoded(img.config(MIRROR_RESOURCE, "dr")["ssl.key.password"])


def test_seal_refuses_nothing_but_a_fake_marker() -> None:
    with pytest.raises(ConfigValidationError):
        ConfigSecrets(None).seal(MIRROR_RESOURCE, "dr", "ssl.key.password", ENCODED_PREFIX)
    assert ConfigSecrets(None).seal(MIRROR_RESOURCE, "dr", "client.id", ENCODED_PREFIX) == (
        ENCODED_PREFIX
    )
