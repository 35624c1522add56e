"""Fault harness over `tests.integration.cluster.Cluster`: kill -9, SIGSTOP/SIGCONT, restart and
link cuts between two nodes, seeded and bounded.

    with FaultCluster(tmp_path, seed=SEED, links=True) as fc:
        victim = fc.rng.choice(fc.cluster.nodes)
        fc.kill(victim); fc.restart(victim)
        fc.cut(1, 2); ...; fc.heal(1, 2)

Every random choice of a fault test comes from ``fc.rng`` (seeded with ``KMIRROR_FAULT_SEED``,
else a fresh seed that is printed), so a failure replays with the seed it prints. `describe()`
says what the faults did, for a failure message. With ``links=True`` node-to-node traffic
passes through a `LinkProxy` (tests/faults/linkproxy.py), which is what lets `cut` separate
exactly two nodes; without it nodes talk directly (the benchmarks and the kill rounds need no
proxy).
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

from tests.integration.cluster import Cluster
from tests.integration.node import ROOT, Node, free_port

from .linkproxy import CLIENTS, LinkProxy, available

ROUNDS_ENV = "KMIRROR_FAULT_ROUNDS"
SEED_ENV = "KMIRROR_FAULT_SEED"


def fault_seed() -> int:
    """``KMIRROR_FAULT_SEED`` when set, else a fresh random seed."""
    return int(os.environ.get(SEED_ENV, str(random.randrange(1 << 30))))


def fault_rounds(default: int) -> int:
    return int(os.environ.get(ROUNDS_ENV, str(default)))


def alive(node: Node) -> bool:
    return node.proc is not None and node.proc.poll() is None


def active_controller(fc: FaultCluster) -> int:
    """The metadata quorum's leader, from kafka-metadata-quorum.sh describe --status."""
    done = subprocess.run(
        [str(ROOT / "bin" / "kafka-metadata-quorum.sh"), "--bootstrap-server", fc.bootstrap,
         "describe", "--status"],
        capture_output=True, timeout=60,
    )  # fmt: skip
    m = re.search(rb"LeaderId:\s+(\d+)", done.stdout)
    assert m, f"no LeaderId from kafka-metadata-quorum.sh: {done.stdout!r} {done.stderr!r}"
    return int(m.group(1))


class FaultCluster:
    """A started `Cluster` plus its faults; a context manager that always cleans up."""

    def __init__(
        self,
        workdir: Path,
        seed: int,
        size: int = 3,
        links: bool = False,
        start_timeout: float = 90.0,
        retransmit: bool = False,
        **overrides: str,
    ) -> None:
        """``retransmit``: heals are as late as TCP retransmission makes them (`LinkProxy`)."""
        self.seed = seed
        self.rng = random.Random(seed)
        self.cluster = Cluster(workdir, size, **overrides)
        self.events: list[str] = []
        self.paused: set[int] = set()
        self.proxy: LinkProxy | None = None
        self._t0 = time.monotonic()
        self._start_timeout = start_timeout
        if links:
            if not available():
                raise RuntimeError("link cuts need Linux /proc (the link proxy finds peers there)")
            self._route_through_proxy(retransmit)

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> FaultCluster:
        print(f"fault seed {self.seed} (replay: {SEED_ENV}={self.seed})", flush=True)
        try:
            self.cluster.start(self._start_timeout)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            print(f"FAILED with fault seed {self.seed}; faults:\n{self.describe()}", flush=True)
        self.close()

    def close(self) -> None:
        for node_id in list(self.paused):
            self.resume(self.cluster.node(node_id))  # a stopped process ignores SIGTERM
        if self.proxy is not None:
            self.proxy.heal_all()
        self.cluster.stop()
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None

    @property
    def nodes(self) -> list[Node]:
        return self.cluster.nodes

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def node(self, node_id: int) -> Node:
        return self.cluster.node(node_id)

    def alive_nodes(self) -> list[Node]:
        return [n for n in self.nodes if alive(n) and n.node_id not in self.paused]

    def describe(self) -> str:
        return "\n".join(self.events[-200:]) or "(none)"

    def _note(self, what: str) -> None:
        line = f"{time.monotonic() - self._t0:8.2f}s {what}"
        self.events.append(line)
        print(line, flush=True)

    # -- process faults --------------------------------------------------------------------

    def kill(self, node: Node) -> float:
        """kill -9; returns the monotonic time of the kill."""
        self.paused.discard(node.node_id)
        t = time.monotonic()
        node.kill()
        self._note(f"kill -9 node {node.node_id}")
        return t

    def restart(self, node: Node, timeout: float = 60.0) -> None:
        """Start a killed (or stopped) node again and wait until it says it started."""
        if alive(node):
            node.kill()
        node.start(timeout=timeout)
        self._note(f"restarted node {node.node_id}")

    def stop(self, node: Node, timeout: float = 20.0) -> int:
        """SIGTERM (a clean shutdown); returns the exit code."""
        self.resume(node)
        code = node.stop(timeout)
        self._note(f"stopped node {node.node_id} (exit {code})")
        return code

    def pause(self, node: Node) -> None:
        """SIGSTOP: the process freezes with its sockets open (a GC pause, a hung VM)."""
        assert node.proc is not None and alive(node), f"node {node.node_id} is not running"
        os.kill(node.proc.pid, signal.SIGSTOP)
        self.paused.add(node.node_id)
        self._note(f"SIGSTOP node {node.node_id}")

    def resume(self, node: Node) -> None:
        if node.node_id not in self.paused:
            return
        self.paused.discard(node.node_id)
        if node.proc is not None and node.proc.poll() is None:
            os.kill(node.proc.pid, signal.SIGCONT)
        self._note(f"SIGCONT node {node.node_id}")

    # -- link faults -----------------------------------------------------------------------

    def cut(self, a: int, b: int, reset: bool = False) -> None:
        """Partition node ``a`` from node ``b`` (both ways); other links are untouched."""
        assert self.proxy is not None, "FaultCluster(links=True) routes links through the proxy"
        self.proxy.cut(a, b, reset)
        self._note(f"cut link {a}<->{b}{' (reset)' if reset else ''}")

    def heal(self, a: int, b: int) -> None:
        assert self.proxy is not None, "FaultCluster(links=True) routes links through the proxy"
        self.proxy.heal(a, b)
        self._note(f"healed link {a}<->{b}")

    def isolate(self, node_id: int, direction: str = "both") -> None:
        """Cut every link of ``node_id``, to the other nodes and to the clients that came in
        through the proxy (`front_bootstrap`), as a node in its own network namespace:
        ``direction`` "both", "out" (what it sends is lost) or "in" (what it is sent is lost)."""
        assert self.proxy is not None, "FaultCluster(links=True) routes links through the proxy"
        if direction not in ("both", "out", "in"):
            raise ValueError(f"direction {direction!r}: one of both, out, in")
        for other in [n.node_id for n in self.nodes if n.node_id != node_id] + [CLIENTS]:
            if direction == "in":
                self.proxy.cut(other, node_id, one_way=True)
            else:
                self.proxy.cut(node_id, other, one_way=direction == "out")
        self._note(f"isolated node {node_id} ({direction})")

    def rejoin(self, node_id: int) -> None:
        """Heal every link of ``node_id`` (after `isolate`)."""
        assert self.proxy is not None, "FaultCluster(links=True) routes links through the proxy"
        for other in [n.node_id for n in self.nodes if n.node_id != node_id] + [CLIENTS]:
            self.proxy.heal(node_id, other)
        self._note(f"healed every link of node {node_id}")

    @property
    def front_bootstrap(self) -> str:
        """The nodes' addresses through the proxy (what they advertise): clients that use it
        are cut off from a node by `isolate`, where ``bootstrap`` reaches the real ports."""
        return ",".join(n.settings["advertised.listeners"].split("://", 1)[1] for n in self.nodes)

    def _pids(self) -> dict[int, int]:
        return {n.node_id: n.proc.pid for n in self.nodes if n.proc is not None and alive(n)}

    def _route_through_proxy(self, retransmit: bool) -> None:
        """Each node keeps its real listeners but is advertised, and named among the voters,
        by a front port of the proxy: every connection between nodes then passes the proxy."""
        proxy = self.proxy = LinkProxy(self._pids, retransmit)
        voters: list[str] = []
        for n in self.nodes:
            front, cfront = free_port(), free_port()
            proxy.add_front(front, n.node_id, n.port)
            proxy.add_front(cfront, n.node_id, n.controller_port)
            adv = n.settings["advertised.listeners"]
            name = adv.split("://", 1)[0]
            n.settings["advertised.listeners"] = f"{name}://127.0.0.1:{front}"
            voters.append(f"{n.node_id}@127.0.0.1:{cfront}")
        for n in self.nodes:
            n.settings["controller.quorum.voters"] = ",".join(voters)
