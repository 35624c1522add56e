"""``kafka-storage.sh format --add-scram`` (KIP-900): Kafka's syntax, its errors, the
credentials written into the metadata directory's bootstrap.checkpoint."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

import pytest

from broker.cli.storage_scram import ScramArgumentError, scram_record
from broker.metadata.bootstrap import read_bootstrap
from broker.security import scram

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "bin" / "kafka-storage.sh"
CID = "him7SuHuQaqL4kALYL9xgA"


def config(tmp_path: Path) -> Path:
    text = (ROOT / "config/server.properties").read_text()
    f = tmp_path / "server.properties"
    f.write_text(text.replace("/tmp/kmirror-logs", str(tmp_path / "logs")))
    return f


def test_password_form_makes_a_credential_that_verifies() -> None:
    r = scram_record("SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]")
    assert (r.name, r.mechanism, r.iterations) == ("admin", 2, 8192)
    salted = scram.salted_password(scram.SHA512, "admin-secret", bytes(r.salt), 8192)
    cred = scram.credential_from_salted(scram.SHA512, salted, bytes(r.salt), 8192)
    assert (bytes(r.stored_key), bytes(r.server_key)) == (cred.stored_key, cred.server_key)


def test_salted_password_form_with_quotes() -> None:
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    arg = (
        f'SCRAM-SHA-256=[name="alice",salt="{base64.b64encode(salt).decode()}",'
        f'saltedpassword="{base64.b64encode(salted).decode()}"]'
    )
    r = scram_record(arg)
    assert (r.name, r.mechanism, bytes(r.salt), r.iterations) == ("alice", 1, salt, 4096)
    cred = scram.credential_from_salted(scram.SHA256, salted, salt, 4096)
    assert bytes(r.stored_key) == cred.stored_key


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
        (
            "SCRAM-SHA-1=[name=a,password=b]",
            "The add-scram mechanism SCRAM-SHA-1 is not supported.",
        ),
        ("SCRAM-SHA-256=name=a,password=b]", "Expected configuration string to start with ["),
        ("SCRAM-SHA-256=[name=a,password=b", "Expected configuration string to end with ]"),
        ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword'"),
        ("SCRAM-SHA-256=[name=a,saltedpassword=AAAA]", "You must supply 'salt' with"),
        ("SCRAM-SHA-256=[name=a,password=b,color=red]", "Unknown SCRAM configurations: color"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", "must be >= 4096"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=20000]", "must be <= 16384"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=x]", "Failed to parse iterations count: x"),
        ("SCRAM-SHA-256=[name=a,password=b,salt=%%%]", "Failed to decode given salt: %%%"),
        ("SCRAM-SHA-256=[name=a,password]", "No equals sign found in SCRAM component: password"),
    ],
)
def test_bad_arguments(arg: str, message: str) -> None:
    with pytest.raises(ScramArgumentError) as e:
        scram_record(arg)
    assert message in str(e.value)


def test_format_writes_the_bootstrap_checkpoint(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    r = subprocess.run(
        [str(TOOL), "format", "-t", CID, "-c", str(cfg),
         "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
         "-S", "SCRAM-SHA-256=[name=admin,password=admin-secret]"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    records = read_bootstrap(tmp_path / "logs")
    assert [(x.name, x.mechanism) for x in records] == [("admin", 2), ("admin", 1)]
    assert b"admin-secret" not in (tmp_path / "logs" / "bootstrap.checkpoint").read_bytes()


def test_format_refuses_a_bad_argument_in_one_line(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    r = subprocess.run(
        [str(TOOL), "format", "-t", CID, "-c", str(cfg),
         "--add-scram", "SCRAM-SHA-512=[name=admin]"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "You must supply one of 'password' or 'saltedpassword' to add-scram"
    )
    assert not (tmp_path / "logs" / "meta.properties").exists()
