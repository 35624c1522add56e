"""The bin/ wrappers: each one runs on a fresh clone (set-up first), answers --help, and takes
paths relative to the caller's directory."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .node import ROOT, Node

# wrapper -> (the module it runs, what its --help prints)
WRAPPERS = {
    "kafka-server-start.sh": ("broker", "USAGE: kafka-server-start.sh server.properties"),
    "kafka-storage.sh": ("broker.cli.storage", "random-uuid"),
    "kafka-configs.sh": ("broker.cli.configs", "--bootstrap-server"),
    "kafka-acls.sh": ("broker.cli.acls", "--bootstrap-server"),
    "kafka-consumer-groups.sh": ("broker.cli.consumer_groups", "--reset-offsets"),
    "kafka-share-groups.sh": ("broker.cli.share_groups", "--delete-offsets"),
    "kafka-mirrors.sh": ("broker.cli.mirrors", "--bootstrap-server"),
    "kafka-leader-election.sh": ("broker.cli.leader_election", "--election-type"),
    "kafka-reassign-partitions.sh": ("broker.cli.reassign_partitions", "--reassignment-json-file"),
    "kafka-dump-log.sh": ("broker.cli.dump_log", "--files"),
    "kafka-topics.sh": ("broker.cli.topics", "--under-replicated-partitions"),
    "kafka-get-offsets.sh": ("broker.cli.get_offsets", "--topic-partitions"),
    "kafka-delete-records.sh": ("broker.cli.delete_records", "--offset-json-file"),
    "kafka-log-dirs.sh": ("broker.cli.log_dirs", "--broker-list"),
    "kafka-console-producer.sh": ("broker.cli.console_producer", "--request-required-acks"),
    "kafka-console-consumer.sh": ("broker.cli.console_consumer", "--isolation-level"),
    "kafka-console-share-consumer.sh": ("broker.cli.console_share_consumer", "--release"),
    "kafka-mirror-audit.sh": ("audit", "--destination"),
    "kafka-features.sh": ("broker.cli.features", "--bootstrap-controller"),
    "kafka-cluster.sh": ("broker.cli.cluster", "unregister"),
    "kafka-transactions.sh": ("broker.cli.transactions", "find-hanging"),
    "kafka-producer-perf-test.sh": ("broker.cli.producer_perf", "--num-records"),
    "bench.sh": ("bench.network_bench", "network_bench"),
}


def _run(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("script", sorted(WRAPPERS))
def test_wrapper_help(tmp_path: Path, script: str) -> None:
    """Run from another directory: --help exits 0 and prints the tool's usage."""
    res = _run([str(ROOT / "bin" / script), "--help"], tmp_path)
    assert res.returncode == 0, res
    assert WRAPPERS[script][1] in res.stdout, res


def test_server_start_version(tmp_path: Path) -> None:
    res = _run([str(ROOT / "bin" / "kafka-server-start.sh"), "--version"], tmp_path)
    assert res.returncode == 0, res
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*\n", res.stdout), res


def test_server_start_reads_a_relative_config_from_the_callers_directory(tmp_path: Path) -> None:
    """The config is found relative to the caller's directory (the script does not cd): its one
    unknown key is what the node refuses, in one line."""
    node = Node(tmp_path / "n")
    node.format()
    with node.config_path.open("a") as f:
        f.write("log.retention.hour=5\n")
    res = _run([str(ROOT / "bin" / "kafka-server-start.sh"), "n/server.properties"], tmp_path)
    assert res.returncode == 1, res
    assert "log.retention.hour" in res.stderr and "cannot read" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_server_start_names_a_missing_config(tmp_path: Path) -> None:
    res = _run([str(ROOT / "bin" / "kafka-server-start.sh"), "missing.properties"], tmp_path)
    assert res.returncode == 1, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing.properties" in lines[0], res.stderr
    assert "Traceback" not in res.stderr + res.stdout


# -- a fresh clone: no .venv yet ---------------------------------------------------------------

STUB_SETUP = """#!/usr/bin/env bash
# stands in for bin/setup.sh: makes a .venv whose python prints how it was run
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
echo "setup stdout"
echo "setup ran" >> "$root/setup.calls"
mkdir -p "$root/.venv/bin"
cat > "$root/.venv/bin/python" <<'PY'
#!/usr/bin/env bash
echo "python $*"
echo "pwd $PWD"
echo "pythonpath $PYTHONPATH"
PY
chmod +x "$root/.venv/bin/python"
"""


def _fresh_clone(tmp_path: Path, script: str) -> Path:
    """A copy of bin/ (the wrapper and what it sources) whose setup.sh is a stub."""
    clone = tmp_path / "clone"
    (clone / "bin").mkdir(parents=True)
    for f in (ROOT / "bin").iterdir():
        if f.name == script or (f.suffix == ".sh" and f.name.startswith("_")):
            shutil.copy2(f, clone / "bin" / f.name)
    (clone / "bench").mkdir()
    (clone / "bench" / "network_bench.py").write_text("")  # bench.sh checks the name exists
    setup = clone / "bin" / "setup.sh"
    setup.write_text(STUB_SETUP)
    setup.chmod(0o755)
    return clone


@pytest.mark.parametrize("script", sorted(WRAPPERS))
def test_wrapper_sets_up_a_fresh_clone_then_runs_its_module(tmp_path: Path, script: str) -> None:
    module = WRAPPERS[script][0]
    clone = _fresh_clone(tmp_path, script)
    caller = tmp_path / "elsewhere"
    caller.mkdir()
    args = ["network_bench", "--x"] if script == "bench.sh" else ["--x", "a b"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for run in (1, 2):
        res = subprocess.run(
            [str(clone / "bin" / script), *args],
            cwd=caller,
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
        assert res.returncode == 0, res
        out = res.stdout.splitlines()
        want = "python -m " + module + (" --x" if script == "bench.sh" else " --x a b")
        assert out[0] == want, res
        assert out[1] == f"pwd {caller}", res  # the caller's directory, not the clone's
        assert out[2] == f"pythonpath {clone}", res
        assert "setup stdout" not in res.stdout and (run == 2 or "setup stdout" in res.stderr)
    # set-up ran once: the second run found the venv
    assert (clone / "setup.calls").read_text() == "setup ran\n"
