"""The Kafka tools of docs/tools.md over SASL_PLAINTEXT/PLAIN, their client settings read from a
properties file (--command-config, --producer.config, --consumer.config) as Kafka's tools read
them; a wrong password ends with exit 1 and no traceback."""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .node import ROOT, Node, free_port

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'


def client_config(path: Path, password: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{password}";\ndefault.api.timeout.ms=5000\n'
    )
    return path


def run(tool: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    p = subprocess.run([str(ROOT / "bin" / tool), *args], input=stdin, capture_output=True,
                       text=True, timeout=90)  # fmt: skip
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """The SASL listener's address, a good and a bad client config."""
    work = Path(tmp_path_factory.mktemp("tools-sasl"))
    n = Node(work / "node1")
    port = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{n.port},SASL_PLAINTEXT://127.0.0.1:{port}"
    n.settings.update(
        {
            "listeners": f"{listeners},CONTROLLER://127.0.0.1:{n.controller_port}",
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        }
    )
    n.start()
    try:
        yield (
            f"127.0.0.1:{port}",
            client_config(work / "good.properties", "admin-secret"),
            client_config(work / "bad.properties", "wrong"),
        )
    finally:
        n.stop()


def test_tools_over_sasl(sasl: tuple[str, Path, Path]) -> None:
    b, good, _ = sasl
    p = run("kafka-topics.sh", "--bootstrap-server", b, "--command-config", str(good),
            "--create", "--topic", "secure", "--partitions", "2")  # fmt: skip
    assert p.stdout == "Created topic secure.\n", p
    p = run("kafka-console-producer.sh", "--bootstrap-server", b, "--topic", "secure",
            "--producer.config", str(good), "--property", "parse.key=true",
            stdin="a\t1\na\t2\n")  # fmt: skip
    assert p.returncode == 0, p
    p = run("kafka-console-consumer.sh", "--bootstrap-server", b, "--topic", "secure",
            "--consumer.config", str(good), "--from-beginning", "--max-messages", "2")  # fmt: skip
    assert (p.returncode, p.stdout) == (0, "1\n2\n"), p
    p = run("kafka-get-offsets.sh", "--bootstrap-server", b, "--command-config", str(good),
            "--topic", "secure")  # fmt: skip
    assert sorted(p.stdout.splitlines()) in (
        ["secure:0:0", "secure:1:2"],
        ["secure:0:2", "secure:1:0"],
    ), p
    p = run("kafka-log-dirs.sh", "--bootstrap-server", b, "--command-config", str(good),
            "--describe", "--topic-list", "secure")  # fmt: skip
    assert p.returncode == 0 and '"partition":"secure-0"' in p.stdout, p


def test_wrong_password(sasl: tuple[str, Path, Path]) -> None:
    b, _, bad = sasl
    p = run("kafka-topics.sh", "--bootstrap-server", b, "--command-config", str(bad), "--list")
    assert p.returncode == 1
    assert p.stdout.startswith("Error while executing topic command : "), p
    assert "authentication" in p.stdout.lower(), p
    p = run("kafka-console-consumer.sh", "--bootstrap-server", b, "--topic", "secure",
            "--consumer.config", str(bad), "--timeout-ms", "3000")  # fmt: skip
    assert p.returncode == 1, p
