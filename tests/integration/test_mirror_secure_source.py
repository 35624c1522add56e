"""A mirror whose source is a kmirror node reachable only over SASL_SSL (SCRAM-SHA-512, the CA in
the mirror's ssl.truststore.location; its own certificate given as PEM in config): the
destination's fetchers and metadata sync connect with the mirror's client configs and copy the
topic.
Driven by kafka-mirrors.sh's main() with a --mirror-config file and stock confluent clients."""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.certs import Pki, make_pki

from .clients import create_topic, wait_for
from .mirror_helpers import (
    create_mirror,
    end_offsets,
    mirror_tool,
    run_mirror_tool,
    running,
    write_mirror_config,
)
from .node import Node, free_port

MIRROR = "secure"
TOPIC = "orders"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[tuple[Node, Node, int]]:
    base = tmp_path_factory.mktemp("secure-mirror")
    src = Node(base / "src")
    secure_port = free_port()
    broker = f"PLAINTEXT://127.0.0.1:{src.port},SASL_SSL://127.0.0.1:{secure_port}"
    src.settings.update(
        {
            "listeners": f"{broker},CONTROLLER://127.0.0.1:{src.controller_port}",
            "advertised.listeners": broker,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
            "CONTROLLER:PLAINTEXT",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.ssl.keystore.certificate.chain": pki.server_cert.read_text().replace(
                "\n", " "
            ),  # PEM in config, line breaks lost as in a .properties value
            "listener.name.sasl_ssl.ssl.keystore.key": pki.server_key.read_text().replace(
                "\n", " "
            ),
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        }
    )
    dst = Node(base / "dst", mirror__metadata__refresh__interval__ms="500")
    with running(src, dst):
        yield src, dst, secure_port


def test_mirror_from_a_sasl_ssl_source(
    nodes: tuple[Node, Node, int], pki: Pki, tmp_path: Path
) -> None:
    src, dst, secure_port = nodes
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("mirror", info, b"mirror-secret")]
    )["mirror"].result(15)
    create_topic(src.bootstrap, TOPIC)
    p = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 5})
    for i in range(50):
        p.produce(TOPIC, value=b"r%d" % i)
    assert p.flush(20) == 0

    props = write_mirror_config(
        tmp_path / "mirror.properties",
        f"127.0.0.1:{secure_port}",
        "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="mirror" password="mirror-secret";',
        f"ssl.truststore.location={pki.ca}",
    )
    create_mirror(dst, MIRROR, props, TOPIC)
    wait_for(
        lambda: end_offsets(dst.bootstrap, TOPIC, 1, missing_ok=True) == {0: 50},
        30,
        "the topic mirrored over SASL_SSL",
        step=0.1,
    )

    c = Consumer(
        {
            "bootstrap.servers": dst.bootstrap,
            "group.id": "reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(got) < 50:
            got.extend(m.value() for m in c.consume(100, timeout=0.2) if not m.error())
    finally:
        c.close()
    assert got == [b"r%d" % i for i in range(50)]

    described = mirror_tool(dst, "--describe", "--mirror", MIRROR)
    assert TOPIC in described and "mirror-secret" not in described

    # The same source with a wrong password: adding a topic fails with the source's SASL error.
    bad = tmp_path / "bad.properties"
    bad.write_text(props.read_text().replace('password="mirror-secret"', 'password="wrong"'))
    create_mirror(dst, "bad", bad)
    rc, _out, err = run_mirror_tool(dst, "--add", "--topic", "ord.*", "--mirror", "bad")
    assert rc == 1 and "authentication" in err.lower(), err
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in err
