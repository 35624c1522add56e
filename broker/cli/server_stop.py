"""``kafka-server-stop.sh [--process-role=<broker|controller>] [--node-id=<id>]``: SIGTERM to the
kmirror nodes started from this checkout, as Kafka's script signals ``kafka.Kafka`` JVMs.

Nodes are found by their command line, as Kafka's script finds them with ``ps``: a Python
``-m broker <config>`` process. Only those of this checkout count (their working directory or
the first PYTHONPATH entry is its root: bin/kafka-server-start.sh and the test harness start
them so); another checkout's nodes on the same machine are left alone. With KIP-979's filters
(Kafka 3.7+, one of them): ``--process-role`` keeps the nodes whose ``process.roles`` in their
config file is exactly that role, ``--node-id`` the node whose ``node.id`` is that id. None found:
"No kafka server to stop", exit 1. ``SIGNAL`` (default TERM) picks the signal, as in Kafka.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from broker.config.properties import PropertiesError, load_properties

ROOT = Path(__file__).resolve().parents[2]
USAGE = "Usage: kafka-server-stop.sh [--process-role=<broker|controller>] | [--node-id=<id>]"


def _args(argv: Sequence[str]) -> tuple[str | None, str | None]:
    role = node = None
    items = list(argv)
    while items:
        arg = items.pop(0)
        name, eq, value = arg.partition("=")
        if name not in ("--process-role", "--node-id"):
            raise ValueError(f"Unknown argument: {arg}")
        if not eq:
            if not items:
                raise ValueError(f"{name} needs a value")
            value = items.pop(0)
        if name == "--process-role":
            if value not in ("broker", "controller"):
                raise ValueError(f"--process-role must be broker or controller, not '{value}'")
            role = value
        else:
            if not value.isdigit():
                raise ValueError(f"--node-id must be a number, not '{value}'")
            node = value
    if role is not None and node is not None:
        raise ValueError("Only one of --process-role and --node-id can be given")
    return role, node


def _node_processes() -> list[tuple[int, list[str]]]:
    """(pid, argv) of every ``python -m broker <config>`` process, as ``ps`` lists them."""
    out = subprocess.run(
        ["ps", "axww", "-o", "pid=,args="], capture_output=True, text=True, check=False
    ).stdout
    found = []
    for line in out.splitlines():
        pid_text, _, args = line.strip().partition(" ")
        argv = args.split()
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        for i in range(len(argv) - 2):
            if argv[i] == "-m" and argv[i + 1] == "broker" and "python" in argv[0]:
                found.append((int(pid_text), argv))
                break
    return found


def _of_this_checkout(pid: int) -> Path | None:
    """The process's working directory when it runs from this checkout, else None."""
    try:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    paths = [
        e[len(b"PYTHONPATH=") :].decode(errors="replace")
        for e in env
        if e.startswith(b"PYTHONPATH=")
    ]
    first = paths[0].split(":")[0] if paths else ""
    if cwd == ROOT or (first and Path(first).resolve() == ROOT):
        return cwd
    return None


def _config(argv: list[str], cwd: Path) -> dict[str, str]:
    path = Path(argv[-1])
    if not path.is_absolute():
        path = cwd / path
    try:
        return dict(load_properties(str(path)))
    except (OSError, PropertiesError):
        return {}


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    try:
        role, node = _args(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        print(e, file=err)
        print(USAGE, file=err)
        return 1
    sig_name = os.environ.get("SIGNAL", "TERM").upper().removeprefix("SIG")
    sig = getattr(signal, f"SIG{sig_name}", None)
    if not isinstance(sig, signal.Signals):
        print(f"Unknown signal: {sig_name}", file=err)
        return 1
    pids = []
    for pid, args in _node_processes():
        cwd = _of_this_checkout(pid)
        if cwd is None:
            continue
        if role is not None or node is not None:
            cfg = _config(args, cwd)
            roles = [r.strip() for r in cfg.get("process.roles", "").split(",") if r.strip()]
            if role is not None and roles != [role]:
                continue
            if node is not None and cfg.get("node.id", "").strip() != node:
                continue
        pids.append(pid)
    if not pids:
        print("No kafka server to stop", file=out)
        return 1
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # exited meanwhile
            os.kill(pid, sig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
