"""Drives a ``RaftCore`` on the event loop: its timers, its messages over the network, commits.

The core is sans-IO: every call returns outputs. This shell is the only place where they meet
the world:

- ``Send`` of a request: sent to that voter's controller endpoint on one connection per peer
  (``ReconnectingClient``: versions negotiated, Kafka's reconnect backoff); the response comes
  back into the core with the same correlation id, a failure as ``request_failed``.
- ``Send`` of a response: completes the inbound request it answers (``serve``), which may have
  waited (a Fetch the leader parks until data or its MaxWaitMs).
- ``Committed`` / ``LeaderChange`` / ``SnapshotLoaded``: handed to the ``QuorumListener``, as
  Kafka's ``RaftClient.Listener`` (handle_commit, handle_leader_change, handle_load_snapshot).
- ``SnapshotWanted``: the listener provides the state up to an offset it has applied.

One task runs the core's timers (``tick`` no later than ``next_wakeup_ms``); inbound requests and
responses call into the core directly (everything is on the loop: no locks). Before any of them
reaches the core, the ``StallWatch`` is asked whether the loop stalled meanwhile; if it did, the
core hears it first (``note_stall``): a leader then counts as confirmed again only once an entry
appended after the stall has committed (``leadership_confirmed``), whatever fetches that waited
in its sockets through the stall say.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from protocol.build import build

from ..network.client import ReconnectingClient
from ..network.fetch_timeout import fetch_timeout_ms
from ..network.peer_refusals import PeerRefusals
from ..raft import messages as m
from ..raft.core import (
    Committed,
    LeaderChange,
    NotLeader,
    Output,
    QuorumDescription,
    RaftCore,
    Send,
    SnapshotLoaded,
    SnapshotWanted,
    VoterChangeDone,
)
from ..raft.reconfig import VoterChangeResult
from . import wire
from .stall_watch import StallWatch

log = logging.getLogger(__name__)

ClientFactory = Callable[[int, str, int], ReconnectingClient]


class QuorumListener(Protocol):
    def handle_commit(self, high_watermark: int) -> None: ...
    def handle_leader_change(self, leader_id: int, epoch: int) -> None: ...
    def handle_load_snapshot(self, snapshot_id: m.SnapshotId) -> None: ...
    def snapshot_state(self, up_to: int) -> tuple[int, bytes] | None:
        """(end offset <= ``up_to`` it has applied, the state there) or None: not now."""
        ...


class NotLeaderError(Exception):
    def __init__(self, leader_id: int, epoch: int) -> None:
        super().__init__(f"not the quorum leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


_ENCODE: dict[type, tuple[int, Callable[[Any], dict[str, Any]]]] = {
    m.VoteRequest: (wire.VOTE, wire.vote_request_body),
    m.BeginQuorumEpochRequest: (wire.BEGIN_QUORUM_EPOCH, wire.begin_request_body),
    m.EndQuorumEpochRequest: (wire.END_QUORUM_EPOCH, wire.end_request_body),
    m.FetchRequest: (wire.FETCH, wire.fetch_request_body),
    m.FetchSnapshotRequest: (wire.FETCH_SNAPSHOT, wire.fetch_snapshot_request_body),
}
_DECODE: dict[int, Callable[[Any], m.RaftResponse]] = {
    wire.VOTE: wire.parse_vote_response,
    wire.BEGIN_QUORUM_EPOCH: wire.parse_begin_response,
    wire.END_QUORUM_EPOCH: wire.parse_end_response,
    wire.FETCH: wire.parse_fetch_response,
    wire.FETCH_SNAPSHOT: wire.parse_fetch_snapshot_response,
}


class QuorumDriver:
    def __init__(
        self,
        core: RaftCore,
        voter_endpoints: Mapping[int, tuple[str, int]],
        listener: QuorumListener,
        now_ms: Callable[[], int],
        client_factory: ClientFactory,
        *,
        bootstrap: Mapping[int, tuple[str, int]] | None = None,
        listener_name: str | None = None,
        stall_watch: StallWatch | None = None,
    ) -> None:
        self.core = core
        self.stall_watch = stall_watch if stall_watch is not None else StallWatch()
        self._stalls_seen = self.stall_watch.stalls
        self._watch_task: asyncio.Task[None] | None = None
        self._endpoints = dict(voter_endpoints)  # static voters
        self._bootstrap = dict(bootstrap or {})  # pseudo id (< 0) -> bootstrap server
        self._listener_name = listener_name
        # leaders' endpoints other nodes named (Fetch's NodeEndpoints) before the log did
        self._learned: dict[int, tuple[str, int]] = {}
        self._client_addr: dict[int, tuple[str, int]] = {}
        self._voter_waiters: dict[int, asyncio.Future[tuple[int, str | None]]] = {}
        self._listener = listener
        self._now_ms = now_ms
        self._client_factory = client_factory
        self._clients: dict[int, ReconnectingClient] = {}
        self._inbound: dict[tuple[int, int], asyncio.Future[m.RaftResponse]] = {}
        self._inbound_ids = itertools.count(1 << 30)  # never clashes with the core's own ids
        self._commit_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.Task[None] | None = None
        self._closed = False
        self._foreign: set[int] = set()  # voters that answered INCONSISTENT_CLUSTER_ID
        self._heard: dict[int, int] = {}  # node id -> when it last answered (see silent_for)
        self._refusals = PeerRefusals("quorum")  # voters that refuse this node, logged once

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._process(self.core.start(self._now_ms()))
        loop = asyncio.get_running_loop()
        self.stall_watch.begin()
        self._timer = loop.create_task(self._run_timers())
        self._watch_task = loop.create_task(self.stall_watch.run())

    def _check_stall(self) -> None:
        """Before the core hears anything: tell it of a stall of the loop since the last look."""
        if self.stall_watch.observe() != self._stalls_seen:
            self._stalls_seen = self.stall_watch.stalls
            self.core.note_stall()

    def leadership_confirmed(self) -> bool:
        """This node leads the quorum, a majority of voters fetched from it recently and, after
        a stall of this loop, an entry appended since has committed (``RaftCore.
        leader_confirmed``): expired timers act first."""
        if self._closed:
            return False
        self._check_stall()
        now = self._now_ms()
        self._process(self.core.tick(now))
        return self.core.leader_confirmed(now)

    def confirm_needs_append(self) -> bool:
        """Leadership is confirmed again only by committing an entry appended after the last
        stall, and none has been (``RaftCore.confirm_needs_append``)."""
        self._check_stall()
        return self.core.confirm_needs_append()

    async def close(self, resign: bool = True) -> None:
        if self._closed:
            return
        if resign and self.core.is_leader:
            self._process(self.core.resign(self._now_ms()))
            await asyncio.sleep(0)  # let the EndQuorumEpoch requests leave
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        if self._watch_task is not None:
            self._watch_task.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for pending in self._inbound.values():
            if not pending.done():
                pending.cancel()
        for _, _, waiter in self._commit_waiters:
            if not waiter.done():
                waiter.set_exception(NotLeaderError(self.core.leader_id, self.core.epoch))
        for vw in self._voter_waiters.values():
            if not vw.done():
                vw.set_result((m.NOT_LEADER_OR_FOLLOWER, "The node is shutting down"))
        for client in self._clients.values():
            client.close()
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                await client.wait_closed()

    async def _run_timers(self) -> None:
        while not self._closed:
            delay = max(0, self.core.next_wakeup_ms() - self._now_ms()) / 1000
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(delay, 1.0))
            if self._closed:
                return
            try:
                self._check_stall()
                self._process(self.core.tick(self._now_ms()))
            except Exception:
                log.exception("quorum: tick failed")

    # --- writes -------------------------------------------------------------------------------

    async def append(self, payloads: Sequence[bytes]) -> int:
        """Append as leader and wait until committed; the last entry's offset."""
        epoch = self.core.epoch
        last = self.append_nowait(payloads)
        await self.wait_committed(last, epoch)
        return last

    def append_nowait(self, payloads: Sequence[bytes]) -> int:
        """Append as leader (now, before this returns); the last entry's offset.
        ``NotLeaderError`` when this node does not lead."""
        self._check_stall()
        result, outputs = self.core.append(self._now_ms(), payloads)
        self._process(outputs)
        if isinstance(result, NotLeader):
            raise NotLeaderError(result.leader_id, result.epoch)
        return result

    async def wait_committed(self, offset: int, epoch: int) -> None:
        """Until the entry at ``offset``, appended as leader in ``epoch``, is committed.
        ``NotLeaderError`` if that epoch ends first: the entry may then be truncated and its
        offset reused by another leader's, so passing the high watermark proves nothing."""
        if self.core.epoch != epoch:
            raise NotLeaderError(self.core.leader_id, self.core.epoch)
        if offset < self.core.high_watermark:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((offset, epoch, fut))
        await fut

    async def change_voters(
        self, op: Callable[[int], tuple[VoterChangeResult, list[Output]]], timeout_ms: int
    ) -> tuple[int, str | None]:
        """Run a voter change on the core (``RaftCore.add_voter`` ...); its (error code,
        message) once committed or failed, REQUEST_TIMED_OUT after ``timeout_ms``."""
        result, outputs = op(self._now_ms())
        if isinstance(result, tuple):
            self._process(outputs)
            return result[0], result[1] or None
        fut: asyncio.Future[tuple[int, str | None]] = asyncio.get_running_loop().create_future()
        self._voter_waiters[result] = fut
        self._process(outputs)
        try:
            # a second more than the core's own deadline, which answers first with its reason
            return await asyncio.wait_for(asyncio.shield(fut), timeout_ms / 1000 + 1.0)
        except TimeoutError:
            return m.REQUEST_TIMED_OUT, "Timed out waiting for the voter change to commit"

    def silent_for(self, node_id: int) -> int | None:
        """Milliseconds since a request of this node's was last answered by ``node_id`` (it was
        alive then, counted from the request's sending); None: never answered."""
        heard = self._heard.get(node_id)
        return None if heard is None else max(0, self._now_ms() - heard)

    def describe(self) -> QuorumDescription | NotLeader:
        """DescribeQuorum's data, as the core answers it now."""
        return self.core.describe_quorum(self._now_ms())

    # --- inbound ------------------------------------------------------------------------------

    async def serve(self, sender: int, request: m.RaftRequest) -> m.RaftResponse:
        """Hand a received KRaft request to the core; its response (maybe after a long poll)."""
        key = (sender, next(self._inbound_ids))
        fut: asyncio.Future[m.RaftResponse] = asyncio.get_running_loop().create_future()
        self._inbound[key] = fut
        try:
            self._check_stall()
            self._process(self.core.handle(self._now_ms(), sender, key[1], request))
            return await fut
        finally:
            self._inbound.pop(key, None)

    # --- outputs ------------------------------------------------------------------------------

    def _process(self, outputs: list[Output]) -> None:
        for out in outputs:
            if isinstance(out, Send):
                if isinstance(out.message, m.REQUEST_TYPES):
                    self._spawn(self._send_request(out))
                else:
                    fut = self._inbound.get((out.dest, out.correlation_id))
                    if fut is not None and not fut.done():
                        fut.set_result(out.message)  # type: ignore[arg-type]
            elif isinstance(out, Committed):
                self._committed(out.high_watermark)
            elif isinstance(out, LeaderChange):
                self._epoch_changed(out.leader_id, out.epoch)
                self._listener.handle_leader_change(out.leader_id, out.epoch)
            elif isinstance(out, SnapshotLoaded):
                self._listener.handle_load_snapshot(out.snapshot_id)
            elif isinstance(out, VoterChangeDone):
                waiter = self._voter_waiters.pop(out.op_id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result((out.error_code, out.message))
            elif isinstance(out, SnapshotWanted):
                state = self._listener.snapshot_state(out.end_offset)
                if state is not None:
                    self._process(self.core.snapshot(self._now_ms(), *state))
        self._wake.set()  # the core's next deadline may have moved

    def _committed(self, hw: int) -> None:
        self._listener.handle_commit(hw)
        if self._commit_waiters:
            still = []
            for offset, epoch, fut in self._commit_waiters:
                if offset < hw:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((offset, epoch, fut))
            self._commit_waiters = still

    def _epoch_changed(self, leader_id: int, epoch: int) -> None:
        """Appends of an ended epoch that have not committed: their answer is unknown (the next
        leader may keep or truncate them); the caller hears NotLeader, as Kafka's controller
        answers NOT_CONTROLLER, and a client retrying sees what was kept."""
        still = []
        for offset, waiter_epoch, fut in self._commit_waiters:
            if waiter_epoch != epoch:
                if not fut.done():
                    fut.set_exception(NotLeaderError(leader_id, epoch))
            else:
                still.append((offset, waiter_epoch, fut))
        self._commit_waiters = still

    @property
    def listener_name(self) -> str | None:
        return self._listener_name

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        """Where ``node_id`` (a voter, a leader another node named, or a bootstrap server)
        listens for the quorum's RPCs."""
        if node_id in self._endpoints:
            return self._endpoints[node_id]
        if node_id < 0:
            return self._bootstrap.get(node_id)
        found = self.core.voter_set.endpoint(node_id, self._listener_name)
        if found is None:
            found = self.core.voter_set.endpoint(node_id, None)
        return found if found is not None else self._learned.get(node_id)

    def learn_endpoint(self, node_id: int, host: str, port: int) -> None:
        if node_id >= 0 and node_id not in self._endpoints:
            self._learned[node_id] = (host, port)

    def _client(self, dest: int) -> ReconnectingClient:
        address = self.endpoint(dest)
        if address is None:
            raise ConnectionError(f"no endpoint known for node {dest}")
        client = self._clients.get(dest)
        if client is not None and self._client_addr.get(dest) != address:
            client.close()  # the voter moved (UpdateRaftVoter, a replaced controller)
            client = None
        if client is None:
            client = self._clients[dest] = self._client_factory(dest, *address)
            self._client_addr[dest] = address
        return client

    async def _send_request(self, out: Send) -> None:
        key, encode = _ENCODE[type(out.message)]
        sent = self._now_ms()
        try:
            client = self._client(out.dest)
            version = await client.version_for(key)
            cls = client_request_type(key, version)
            timeout = None
            if isinstance(out.message, m.FetchRequest):  # a long poll: bounded by its own wait
                timeout = fetch_timeout_ms(out.message.max_wait_ms, client.request_timeout_ms)
            body = await client.send(build(cls, encode(out.message)), version, timeout_ms=timeout)
            response = _DECODE[key](body)
            # the peer was alive after ``sent``: a new active controller counts its broker's
            # silence from there (``silent_for``)
            self._heard[out.dest] = max(sent, self._heard.get(out.dest, sent))
            for node_id, host, port in wire.node_endpoints(body, self._listener_name):
                self.learn_endpoint(node_id, host, port)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.debug("quorum: request to %d failed: %s", out.dest, e)
            if not self._closed:
                self._process(
                    self.core.request_failed(self._now_ms(), out.dest, out.correlation_id)
                )
            return
        host, port = self.endpoint(out.dest) or ("?", -1)
        # a voter that refuses this node (no CLUSTER_ACTION there) says so once; the core retries
        self._refusals.note(
            f"voter {out.dest} at {host}:{port}", type(out.message).__name__, response.error_code
        )
        if response.error_code == m.INCONSISTENT_CLUSTER_ID and out.dest not in self._foreign:
            # a voter formatted for another cluster never counts towards this quorum: say so
            # once, naming it, rather than wait in silence
            self._foreign.add(out.dest)
            log.error(
                "quorum: voter %d at %s:%d belongs to another cluster (INCONSISTENT_CLUSTER_ID):"
                " check that every node was formatted with this node's cluster id %s",
                out.dest,
                host,
                port,
                self.core.config.cluster_id,
            )
        if not self._closed:
            self._check_stall()
            self._process(self.core.handle(self._now_ms(), out.dest, out.correlation_id, response))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def client_request_type(key: int, version: int) -> type:
    from protocol.registry import REGISTRY

    return REGISTRY.spec(key).request_type(version)
