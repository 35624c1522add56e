"""bin/kafka-configs.sh --entity-type users as a real process: SCRAM credentials added, changed,
described and deleted as with Apache Kafka's tool (docs/configuration.md), then used by a stock
client (confluent-kafka over SASL_PLAINTEXT/SCRAM) against a real node; bad input is exit 1 with
no traceback and changes nothing."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ScramMechanism  # type: ignore[attr-defined]

from .clients import create_topic, wait_for
from .configs_tool import ConfigsTool
from .node import Node, free_port


class ScramNode(ConfigsTool):
    """A node with a PLAINTEXT listener (the tool, the admin checks) and a SASL_PLAINTEXT one
    offering both SCRAM mechanisms."""

    def __init__(self, workdir: Path) -> None:
        self.node = Node(workdir)
        n = self.node
        self.sasl_port = free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{n.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        n.settings.update(
            {
                "listeners": f"{listeners},CONTROLLER://127.0.0.1:{n.controller_port}",
                "advertised.listeners": listeners,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            }
        )

    def credentials(self) -> dict[str, list[tuple[ScramMechanism, int]]]:
        """Every user's (mechanism, iterations), seen by confluent-kafka's AdminClient."""
        admin = AdminClient({"bootstrap.servers": self.node.bootstrap})
        all_users: Any = admin.describe_user_scram_credentials()  # one future when no names
        described = all_users.result(15)
        return {
            user: sorted(
                ((i.mechanism, i.iterations) for i in d.scram_credential_infos),
                key=lambda x: x[0].value,
            )
            for user, d in described.items()
        }

    def sasl(self, mechanism: str, user: str, password: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }


@pytest.fixture(scope="module")
def scram_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramNode]:
    s = ScramNode(tmp_path_factory.mktemp("cli-scram") / "n1")
    s.node.start()
    try:
        create_topic(s.node.bootstrap, "scram-cli", 1)
        yield s
    finally:
        s.node.kill()


def _produce(conf: dict[str, Any]) -> KafkaError | None:
    """One record through librdkafka: None if delivered, else the first error it reports."""
    errors: list[KafkaError] = []
    delivered: list[bool] = []
    p = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 15000})
    p.produce(
        "scram-cli",
        value=b"v",
        on_delivery=lambda e, _m: errors.append(e) if e else delivered.append(True),
    )

    def settled() -> bool:
        p.poll(0.1)
        return bool(delivered or errors)

    wait_for(settled, 20, "the record to be delivered or an error", step=0)
    p.flush(1)
    return None if delivered else errors[0]


def test_add_describe_authenticate_delete(scram_node: ScramNode) -> None:
    s = scram_node
    user = ("--entity-type", "users", "--entity-name", "alice")
    out = s.ok("--alter", "--add-config", "SCRAM-SHA-512=[password=alice-secret]", *user)
    assert out == "Completed updating config for user alice.\n"
    assert s.credentials()["alice"] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    assert s.ok("--describe", *user) == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096\n"
    )
    assert _produce(s.sasl("SCRAM-SHA-512", "alice", "alice-secret")) is None
    err = _produce(s.sasl("SCRAM-SHA-512", "alice", "wrong"))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err

    # Two mechanisms in one command: one request, which a KRaft controller refuses (Kafka's
    # too); the tool says what to do instead and nothing changes.
    s.fails(
        "--alter",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=a,b=c],SCRAM-SHA-512=[password=a,b=c]",
        "--user",
        "alice",
        message="change one mechanism per command",
    )
    assert s.credentials()["alice"] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    # one at a time: its own iteration count, a password with ',' and '='
    for added in (
        "SCRAM-SHA-256=[iterations=8192,password=a,b=c]",
        "SCRAM-SHA-512=[password=a,b=c]",
    ):
        s.ok("--alter", "--add-config", added, "--user", "alice")
    assert s.credentials()["alice"] == [
        (ScramMechanism.SCRAM_SHA_256, 8192),
        (ScramMechanism.SCRAM_SHA_512, 4096),
    ]
    assert s.ok("--describe", *user) == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    assert _produce(s.sasl("SCRAM-SHA-256", "alice", "a,b=c")) is None
    err = _produce(s.sasl("SCRAM-SHA-512", "alice", "alice-secret"))  # replaced
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err

    s.ok(
        "--alter", "--add-config", "SCRAM-SHA-256=[iterations=-1,password=bob-pw]", "--user", "bob"
    )
    assert s.ok("--describe", "--entity-type", "users").splitlines() == [
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096",
    ]

    out = s.ok("--alter", "--delete-config", "SCRAM-SHA-512", *user)
    assert out == "Completed updating config for user alice.\n"
    assert s.credentials()["alice"] == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    err = _produce(s.sasl("SCRAM-SHA-512", "alice", "a,b=c"))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    assert _produce(s.sasl("SCRAM-SHA-256", "alice", "a,b=c")) is None

    # a user without credentials prints nothing, as Kafka's tool
    assert s.ok("--describe", "--user", "nobody") == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--alter", "--add-config", "SCRAM-SHA-256=[iterations=1000,password=x]"),
            "Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-256",
        ),
        (
            ("--alter", "--add-config", "SCRAM-SHA-256=[iterations=20000,password=x]"),
            "Too many iterations (UNACCEPTABLE_CREDENTIAL)",
        ),
        (
            ("--alter", "--add-config", "SCRAM-SHA-512=[pass=x]"),
            "Invalid credential property SCRAM-SHA-512",
        ),
        (
            ("--alter", "--add-config", "SCRAM-SHA-512=[iterations=,password=x]"),
            "Invalid credential property SCRAM-SHA-512",
        ),
        (
            ("--alter", "--add-config", "retention.ms=1"),
            "Only quota and SCRAM credential configs can be added for 'users'",
        ),
        (
            ("--alter", "--add-config", "SCRAM-SHA-512=[password=x],consumer_byte_rate=1"),
            "Cannot alter both quota and SCRAM credential configs simultaneously for 'users'",
        ),
        (
            ("--alter", "--delete-config", "SCRAM-SHA-512"),
            "Attempt to delete a user credential that does not exist",
        ),
    ],
)
def test_bad_input(scram_node: ScramNode, args: tuple[str, ...], message: str) -> None:
    before = scram_node.credentials()
    scram_node.fails(*args, "--entity-type", "users", "--entity-name", "carol", message=message)
    assert scram_node.credentials() == before
    assert "carol" not in before


def test_defaults_refused(scram_node: ScramNode) -> None:
    scram_node.fails(
        "--alter", "--add-config", "SCRAM-SHA-512=[password=x]", "--entity-type", "users",
        "--entity-default",
        message="The use of --entity-default or --user-defaults is not allowed with User SCRAM",
    )  # fmt: skip
    # the default user has quotas, never credentials: nothing set, nothing printed
    assert scram_node.ok("--describe", "--user-defaults") == ""


def test_a_bad_credential_is_not_echoed(scram_node: ScramNode) -> None:
    """The value holds the password: the error names the mechanism, not the value."""
    p = scram_node.tool(
        "--alter", "--add-config", "SCRAM-SHA-512=[passwd=hunter2]", "--user", "dave"
    )
    assert p.returncode == 1 and "hunter2" not in p.stderr + p.stdout
