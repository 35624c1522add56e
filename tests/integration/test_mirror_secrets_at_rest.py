"""Secrets at rest: a destination started with ``password.encoder.secret`` keeps its mirror's
``sasl.jaas.config`` encrypted in ``__cluster_metadata`` while the mirror authenticates to a
SASL/PLAIN source with it; after a restart it still does; restarted without the secret the node
logs an ERROR naming the mirror and key, keeps running, and its mirror cannot authenticate; the
stored value survives that, so the secret back makes the mirror work again.
Driven by kafka-mirrors.sh's main() and stock confluent clients."""

import secrets
from pathlib import Path

from confluent_kafka import Producer

from .clients import create_topic, wait_for
from .mirror_helpers import (
    create_mirror,
    end_offsets,
    mirror_tool,
    running,
    write_mirror_config,
)
from .node import Node, free_port

MIRROR = "dr"
TOPIC = "payments"
ENCODER_SECRET = "dst-encoder-secret"


def _produce(bootstrap: str, start: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(TOPIC, value=b"r%d" % i)
    assert p.flush(20) == 0


def _caught_up(dst: Node, n: int, what: str) -> None:
    wait_for(lambda: end_offsets(dst.bootstrap, TOPIC, 1, missing_ok=True) == {0: n}, 30, what, 0.1)


def _metadata_bytes(node: Node) -> bytes:
    segments = sorted((node.log_dir / "__cluster_metadata-0").glob("*.log"))
    assert segments, "no metadata segment"
    return b"".join(s.read_bytes() for s in segments)


def _every_file(node: Node) -> bytes:
    """Every byte the node wrote: its log dirs (all topics, checkpoints) and its output."""
    files = [p for p in node.log_dir.rglob("*") if p.is_file()] + [node.output]
    return b"".join(p.read_bytes() for p in files)


def test_mirror_secret_encrypted_at_rest(tmp_path: Path) -> None:
    password = "pw-" + secrets.token_hex(8)  # unique: found nowhere by chance
    src = Node(tmp_path / "src")
    sasl_port = free_port()
    broker = f"PLAINTEXT://127.0.0.1:{src.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    src.settings.update(
        {
            "listeners": f"{broker},CONTROLLER://127.0.0.1:{src.controller_port}",
            "advertised.listeners": broker,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_mirror="{password}";'
            ),
        }
    )
    dst = Node(
        tmp_path / "dst",
        mirror__metadata__refresh__interval__ms="500",
        password__encoder__secret=ENCODER_SECRET,
    )
    with running(src):
        create_topic(src.bootstrap, TOPIC)
        _produce(src.bootstrap, 0, 20)
        props = write_mirror_config(
            tmp_path / "mirror.properties",
            f"127.0.0.1:{sasl_port}",
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=PLAIN",
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="mirror" password="{password}";',
        )
        secret = password.encode()

        with running(dst, clean_stop=True):
            create_mirror(dst, MIRROR, props, TOPIC)
            _caught_up(dst, 20, "mirrored with the decoded secret")
            meta = _metadata_bytes(dst)
            assert b"{kmirror-encoded}" in meta  # the ConfigRecord is there, encoded
            assert secret not in meta
            assert secret not in _every_file(dst)

        with running(dst, clean_stop=True):  # restart, same secret: still authenticates
            _produce(src.bootstrap, 20, 10)
            _caught_up(dst, 30, "mirrored after a restart")
        assert secret not in _every_file(dst)

        dst.settings.pop("password.encoder.secret")
        dst.write_config()
        seen = dst.output.stat().st_size
        with running(dst, clean_stop=True):  # no secret: an ERROR, no crash, no mirroring
            wanted = (
                f"cannot decode mirror {MIRROR}'s sasl.jaas.config: "
                "password.encoder.secret is not set"
            )

            def logged() -> str:
                return dst.output.read_bytes()[seen:].decode(errors="replace")

            wait_for(lambda: wanted in logged(), 30, "the ERROR naming the mirror and key")
            (line,) = [ln for ln in logged().splitlines() if wanted in ln]
            assert " ERROR " in line, line
            _produce(src.bootstrap, 30, 5)
            # the mirror cannot authenticate and says so
            wait_for(
                lambda: "sasl.jaas.config: is required" in logged(),
                30,
                "a connection error naming sasl.jaas.config",
            )
            assert end_offsets(dst.bootstrap, TOPIC, 1) == {0: 30}
            assert TOPIC in mirror_tool(dst, "--describe", "--mirror", MIRROR)
            assert dst.proc is not None and dst.proc.poll() is None  # still running
        assert b"{kmirror-encoded}" in _metadata_bytes(dst)  # the stored value is kept

        dst.settings["password.encoder.secret"] = ENCODER_SECRET
        dst.write_config()
        with running(dst, clean_stop=True):  # the secret back: the mirror works again
            _caught_up(dst, 35, "mirrored once the secret is back")
        assert secret not in _every_file(dst)
