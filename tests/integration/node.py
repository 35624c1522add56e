"""Start real kmirror node processes on loopback for integration tests (and kill only those)."""

import os
import random
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from broker.config.meta_properties import random_uuid

ROOT = Path(__file__).resolve().parents[2]


_PORTS = random.Random()
_GIVEN: set[int] = set()  # never hand a port out twice: the first taker may not have bound it yet


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range (32768+ on Linux): a port the kernel
    handed out (bind to 0) is soon handed to some client connection again, and a node started a
    few seconds later would find it taken."""
    for _ in range(200):
        port = _PORTS.randrange(15_000, 32_000)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _GIVEN.add(port)
            return port
    with socket.socket() as s:  # a crowded range: let the kernel choose
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    """One combined broker+controller node in its own directory."""

    def __init__(self, workdir: Path, node_id: int = 1, **overrides: str) -> None:
        self.workdir = workdir
        self.node_id = node_id
        self.port = free_port()
        self.controller_port = free_port()
        self.metrics_port = free_port()
        self.log_dir = workdir / "logs"
        self.config_path = workdir / "server.properties"
        self.output = workdir / "node.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self.open_file_limit: int | None = None  # RLIMIT_NOFILE for the process, if set
        self.settings = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": f"{node_id}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "mirror.topic.replication.factor": "1",
            "mirror.topic.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            "metrics.port": str(self.metrics_port),
            "metrics.host": "127.0.0.1",
        }
        self.settings.update({k.replace("__", "."): v for k, v in overrides.items()})
        self._formatted = False
        self._seen = 0  # output size when the process was launched
        # every node its own cluster: a mirror refuses a source with its own cluster id
        self.cluster_id = random_uuid()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_config(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))

    def format(self, *extra: str) -> None:
        """``kafka-storage.sh format`` (``extra``: more flags, e.g. ``--standalone``)."""
        self.write_config()
        done = subprocess.run(
            [
                str(ROOT / "bin" / "kafka-storage.sh"),
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(self.config_path),
                *extra,
            ],
            capture_output=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"kafka-storage.sh format exited {done.returncode}:\n"
                f"{done.stdout.decode(errors='replace')}{done.stderr.decode(errors='replace')}"
            )
        self._formatted = True

    def start(self, timeout: float = 30.0) -> "Node":
        self.launch()
        return self.wait_started(timeout)

    def launch(self) -> None:
        """Start the process without waiting (nodes of one cluster wait for each other)."""
        if not self._formatted:
            self.format()
        out = self.output.open("ab")
        self._seen = self.output.stat().st_size  # earlier runs' lines are in the same file
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker", str(self.config_path)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=None if self.open_file_limit is None else self._limit_open_files,
        )

    def _limit_open_files(self) -> None:
        limit = self.open_file_limit
        assert limit is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    def wait_started(self, timeout: float = 30.0) -> "Node":
        assert self.proc is not None, "launch() first"
        seen = self._seen
        # Started means this process says so: a port that merely accepts connections may
        # belong to someone who took it after free_port() let it go.
        started = f"kmirror node {self.node_id} started".encode()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node exited with {self.proc.returncode}:\n{self.log_tail()}")
            if started in self._output_since(seen):
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        return self
                except OSError:
                    pass
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"node did not listen within {timeout}s:\n{self.log_tail()}")

    def _output_since(self, offset: int) -> bytes:
        try:
            with self.output.open("rb") as f:
                f.seek(offset)
                return f.read()
        except OSError:
            return b""

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.output.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: a clean shutdown exits 0."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self) -> None:
        """kill -9 (only our own child, by PID)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
