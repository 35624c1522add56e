"""Per-link loopback proxy: cut the link between two nodes of a test cluster, and only that link.

Every node listens on its real ports as before, but advertises (``advertised.listeners``) and is
named in ``controller.quorum.voters`` by a *front* port that this proxy serves, so every
node-to-node connection (Raft RPCs, the controller channel, inter-broker requests such as
replica fetches) passes through here. A front port knows its destination node; the source node
of a connection is found from the kernel's socket table (/proc/net/tcp gives the inode of the
connecting socket, the node processes' /proc/<pid>/fd tell whose it is). That needs no broker
feature (no source-address binding): any connection a node process opens is recognised, and a
connection from the test's own clients belongs to no node and is never cut.

A cut link behaves like a network partition, not like a refused connection: bytes in flight
are held (the pumps stop reading, so the kernel buffers fill and the sender blocks or times out),
new connections are accepted but not forwarded, and a heal lets everything through again, as
TCP retransmission would. ``cut(..., reset=True)`` closes the link's connections instead.

Links are directional underneath: ``cut(a, b, one_way=True)`` holds only what ``a`` sends to
``b`` (on connections either side opened), as a one-way packet loss does. The test's own
clients count as node ``CLIENTS``, so `isolate` can cut a node off from them too (a node in its
own network namespace); clients that must be cut that way bootstrap from the front ports.

With ``retransmit=True`` a heal is as late as TCP's: a direction that held bytes during the
cut delivers them only at its next retransmission (the first at 200 ms after the bytes were held,
doubling, at most 120 s apart, as Linux's RTO), and a connection opened during the cut is
forwarded only at its next SYN retransmission (1 s, doubling). So a connection that carried a
request across the cut stays silent for up to the cut's length after the heal, which is what a
fetcher that waits out its request timeout meets (issue 31).

Linux only (/proc); `available()` says whether it can work here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK = 64 << 10
CLIENTS = 0  # the node id standing for every connection that no node opened (the test's clients)
RTO_S, SYN_RTO_S, RTO_MAX_S = 0.2, 1.0, 120.0
_PROC_TCP = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


def available() -> bool:
    return _PROC_TCP[0].exists() and Path(f"/proc/{os.getpid()}/fd").is_dir()


def _socket_inode(local_port: int, remote_port: int) -> str | None:
    """The inode of the TCP socket bound to ``local_port`` and connected to ``remote_port``."""
    want_local, want_remote = f":{local_port:04X}", f":{remote_port:04X}"
    for table in _PROC_TCP:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[1].endswith(want_local) and cols[2].endswith(want_remote):
                return cols[9]
    return None


def _descendants(pid: int) -> list[int]:
    """``pid`` and its child processes (a node may start helpers), bounded in depth."""
    out, frontier = [pid], [pid]
    for _ in range(3):
        nxt: list[int] = []
        for p in frontier:
            for task in Path(f"/proc/{p}/task").glob("*/children"):
                with contextlib.suppress(OSError, ValueError):
                    nxt.extend(int(c) for c in task.read_text().split())
        out.extend(nxt)
        frontier = nxt
    return out


def owner_of(local_port: int, remote_port: int, pids: dict[int, int]) -> int | None:
    """Which node (``pids``: node id -> process id) holds the connecting socket; None: no node."""
    inode = _socket_inode(local_port, remote_port)
    if inode is None or inode == "0":
        return None
    target = f"socket:[{inode}]"
    for node_id, pid in pids.items():
        for p in _descendants(pid):
            try:
                fds = os.listdir(f"/proc/{p}/fd")
            except OSError:
                continue
            for fd in fds:
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{p}/fd/{fd}") == target:
                        return node_id
    return None


@dataclass
class LinkStats:
    """Bytes forwarded from ``src`` to ``dst`` and connections opened, per direction."""

    bytes: int = 0
    connections: int = 0


@dataclass(eq=False)  # identity: a set of live connections
class _Conn:
    src: int | None
    dst: int
    writers: list[asyncio.StreamWriter] = field(default_factory=list)


def next_retransmit(held_since: float, now: float, first: float) -> float:
    """When TCP sends its next retransmission at or after ``now``, for bytes first held at
    ``held_since``: at ``first``, then doubling intervals (capped at ``RTO_MAX_S``)."""
    t, rto = held_since + first, first
    while t < now:
        rto = min(rto * 2, RTO_MAX_S)
        t += rto
    return t


class LinkProxy:
    """Front ports for each node's listeners; `cut`/`heal` links. Runs its own event loop thread.

    ``pids()`` returns the current process id of each running node (it changes on restart).
    """

    def __init__(self, pids: Callable[[], dict[int, int]], retransmit: bool = False) -> None:
        self._pids = pids
        self.retransmit = retransmit
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._servers: list[asyncio.base_events.Server] = []
        self._open: dict[tuple[int, int], asyncio.Event] = {}  # (from, to): bytes may pass
        self._conns: set[_Conn] = set()
        self.stats: dict[tuple[int | None, int], LinkStats] = {}
        self._thread.start()

    # -- set-up ----------------------------------------------------------------------------

    def add_front(self, front_port: int, dst: int, upstream_port: int) -> None:
        """Serve ``front_port``, forwarding to node ``dst``'s real ``upstream_port``."""

        async def start() -> None:
            server = await asyncio.start_server(
                lambda r, w: self._accept(r, w, dst, front_port, upstream_port),
                "127.0.0.1",
                front_port,
                reuse_address=True,
            )
            self._servers.append(server)

        self._call(start())

    def close(self) -> None:
        async def shut() -> None:
            for s in self._servers:
                s.close()
            for c in list(self._conns):
                for w in c.writers:
                    w.transport.abort()
            await asyncio.sleep(0)

        with contextlib.suppress(Exception):
            self._call(shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    # -- faults ----------------------------------------------------------------------------

    def cut(self, a: int, b: int, reset: bool = False, one_way: bool = False) -> None:
        """Partition ``a`` from ``b`` (both directions, or with ``one_way`` only what ``a`` sends
        to ``b``); ``reset`` also closes their connections."""

        async def do() -> None:
            self._gate(a, b).clear()
            if not one_way:
                self._gate(b, a).clear()
            if reset:
                for c in [c for c in self._conns if c.src is not None and {c.src, c.dst} == {a, b}]:
                    for w in c.writers:
                        w.transport.abort()

        self._call(do())

    def heal(self, a: int, b: int) -> None:
        """Both directions between ``a`` and ``b`` pass again."""

        async def do() -> None:
            self._gate(a, b).set()
            self._gate(b, a).set()

        self._call(do())

    def heal_all(self) -> None:
        async def do() -> None:
            for g in self._open.values():
                g.set()

        self._call(do())

    def is_cut(self, a: int, b: int) -> bool:
        """Is either direction between ``a`` and ``b`` cut?"""
        gates = (self._open.get((a, b)), self._open.get((b, a)))
        return any(g is not None and not g.is_set() for g in gates)

    def forwarded(self, src: int, dst: int) -> int:
        s = self.stats.get((src, dst))
        return s.bytes if s else 0

    # -- internals -------------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, None], timeout: float = 10.0) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _gate(self, a: int, b: int) -> asyncio.Event:
        """Open while bytes from ``a`` to ``b`` pass."""
        g = self._open.get((a, b))
        if g is None:
            g = self._open[(a, b)] = asyncio.Event()
            g.set()
        return g

    async def _wait_open(self, gate: asyncio.Event, first_rto: float) -> None:
        """Until ``gate`` opens; with ``retransmit``, then until TCP's next retransmission."""
        if gate.is_set():
            return
        held_since = self._loop.time()
        await gate.wait()
        if self.retransmit:
            now = self._loop.time()
            await asyncio.sleep(next_retransmit(held_since, now, first_rto) - now)

    async def _accept(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        dst: int,
        front_port: int,
        upstream_port: int,
    ) -> None:
        peer_port = writer.get_extra_info("peername")[1]
        src = await self._loop.run_in_executor(None, owner_of, peer_port, front_port, self._pids())
        conn = _Conn(None if src == dst else src, dst, [writer])
        self._conns.add(conn)
        st = self.stats.setdefault((conn.src, dst), LinkStats())
        st.connections += 1
        try:
            # a connection no node opened is a client's: cut only by `isolate`-style cuts
            origin = conn.src if conn.src is not None else CLIENTS
            gate, back_gate = self._gate(origin, dst), self._gate(dst, origin)
            # a connection opened during a cut waits, as a lost SYN (or SYN-ACK) would
            while not (gate.is_set() and back_gate.is_set()):
                await self._wait_open(gate if not gate.is_set() else back_gate, SYN_RTO_S)
            try:
                up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream_port)
            except OSError:
                return  # the node is down: the client sees its connection closed
            conn.writers.append(up_w)
            back = (
                self.stats.setdefault((dst, conn.src), LinkStats())
                if conn.src is not None
                else None
            )
            await asyncio.gather(
                self._pump(reader, up_w, gate, st),
                self._pump(up_r, writer, back_gate, back),
                return_exceptions=True,
            )
        finally:
            for w in conn.writers:
                w.transport.abort()
            self._conns.discard(conn)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        gate: asyncio.Event,
        stats: LinkStats | None,
    ) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not gate.is_set():
                    await self._wait_open(gate, RTO_S)  # held, not dropped: after the heal
                if not data:
                    break
                writer.write(data)
                await writer.drain()
                if stats is not None:
                    stats.bytes += len(data)
        finally:
            # one side closing closes both: Kafka connections are not half-closed
            writer.transport.abort()
