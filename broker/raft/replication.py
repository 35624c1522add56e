"""Replication: the leader serving Fetch / FetchSnapshot, the follower applying the answers.

Leader side (Kafka's handleFetchRequest): a fetch is checked against the leader's epoch cache.
Below the log start, or at offset 0 when a snapshot exists, the answer is the snapshot id; if the
follower's (fetch offset, last fetched epoch) is not in the leader's log, the answer is the
diverging epoch (the largest epoch <= the follower's and where it ends); otherwise entries from
the fetch offset, and the fetch offset becomes that replica's end offset for the high
watermark. An empty answer is held back up to MaxWaitMs (long polling) and sent early when the
log or the high watermark moves.

Follower side: truncate on a diverging epoch (never below the high watermark) and fetch again;
fetch the snapshot in chunks and install it; or append (and flush, for voters) and take
min(leader high watermark, own end offset) as the high watermark.
"""

import struct

from broker.raft import messages as m
from broker.raft.base import CoreBase
from broker.raft.leader_state import LeaderState, ParkedFetch
from broker.raft.outputs import (
    RaftInvariantError,
    SnapshotLoaded,
)
from broker.raft.states import (
    Follower,
    SnapshotFetch,
)

_SNAP_MAGIC = b"KRC1"
_SNAP_COUNT = struct.Struct(">H")
_SNAP_ITEM = struct.Struct(">hI")


def pack_snapshot(control: tuple[tuple[int, bytes], ...], data: bytes) -> bytes:
    """A snapshot as a dynamic quorum transfers it: its KRaftVersion and Voters records (in the
    ``.checkpoint`` they are control batches after the header), then the state."""
    parts = [_SNAP_MAGIC, _SNAP_COUNT.pack(len(control))]
    for kind, value in control:
        parts += [_SNAP_ITEM.pack(kind, len(value)), value]
    parts.append(data)
    return b"".join(parts)


def unpack_snapshot(raw: bytes) -> tuple[tuple[tuple[int, bytes], ...], bytes]:
    if not raw.startswith(_SNAP_MAGIC):
        raise RaftInvariantError("a dynamic quorum's snapshot without its voters")
    pos = len(_SNAP_MAGIC)
    (count,) = _SNAP_COUNT.unpack_from(raw, pos)
    pos += _SNAP_COUNT.size
    out = []
    for _ in range(count):
        kind, size = _SNAP_ITEM.unpack_from(raw, pos)
        pos += _SNAP_ITEM.size
        out.append((kind, raw[pos : pos + size]))
        pos += size
    return tuple(out), raw[pos:]


class ReplicationHandlers(CoreBase):
    def _send_fetch(self, now: int, dest: int) -> None:
        if dest == m.NO_LEADER or not self._can_send(now, dest):  # bootstrap servers are < -1
            return
        st = self.state
        cid = self.config.cluster_id
        req: m.RaftRequest
        if isinstance(st, Follower) and st.snapshot_fetch is not None and dest == st.leader_id:
            sf = st.snapshot_fetch
            req = m.FetchSnapshotRequest(
                self.node_id,
                st.epoch,
                sf.snapshot_id,
                len(sf.data),
                self.config.snapshot_chunk_bytes,
                cid,
            )
        else:
            if self.is_voter or self.dynamic:
                # the offset we report must survive a crash (an observer's too when voters can
                # change: the leader counts it from the moment it adds the observer as a voter)
                self.log.flush()
            req = m.FetchRequest(
                self.node_id,
                st.epoch,
                self.log.end_offset,
                self.log.last_fetched_epoch,
                self.config.fetch_max_wait_ms,
                self.config.fetch_max_entries,
                cid,
            )
        self._send_request(now, dest, req)

    def _next_bootstrap(self, now: int) -> int:
        # the known voters, then the bootstrap servers (controller.quorum.bootstrap.servers)
        voters = sorted(self.voters - {self.node_id})
        voters += [b for b in self.bootstrap_ids if b not in self.voters and b != self.node_id]
        for _ in range(len(voters)):
            self._bootstrap = (self._bootstrap + 1) % len(voters)
            dest = voters[self._bootstrap]
            if dest != self.node_id and self._can_send(now, dest):
                return dest
        return -1

    def _leader_appended(self, now: int, st: LeaderState) -> None:
        self.log.flush()  # count our own end offset only once it is durable
        end = self.log.end_offset
        before = max(st.local_end, st.epoch_start_offset)
        if end > before:
            self.stats.leader_appended(now, end - 1, end - before)
        if st.update_local(end):
            self._set_hw(st.high_watermark)
        self._complete_parked(now, st)

    def _complete_parked(self, now: int, st: LeaderState) -> None:
        if self._completing or not st.parked:
            return
        self._completing = True
        try:
            parked, st.parked = st.parked, []
            for p in parked:
                self._respond(
                    p.sender,
                    p.correlation_id,
                    self._try_complete_fetch(now, p.sender, p.request, arrived=False),
                )
        finally:
            self._completing = False

    def _validate_leader_only(self, epoch: int) -> int:
        if epoch < self.epoch:
            return m.FENCED_LEADER_EPOCH
        if epoch > self.epoch:
            return m.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, LeaderState):
            return m.NOT_LEADER_OR_FOLLOWER
        return m.NONE

    def _on_fetch_request(self, now: int, sender: int, cid: int, req: m.FetchRequest) -> None:
        if (
            req.max_wait_ms < 0
            or req.fetch_offset < 0
            or req.last_fetched_epoch < 0
            or req.last_fetched_epoch > req.current_leader_epoch
        ):
            self._respond(sender, cid, self._fetch_error(m.INVALID_REQUEST))
            return
        error = self._validate_leader_only(req.current_leader_epoch)
        if error != m.NONE:
            self._respond(sender, cid, self._fetch_error(error))
            return
        st = self.state
        assert isinstance(st, LeaderState)
        hw_before = st.high_watermark
        resp = self._try_complete_fetch(now, sender, req)
        if (
            req.max_wait_ms > 0
            and st.high_watermark == hw_before  # a fetch that moved it tells its sender at once
            and not resp.records
            and resp.diverging_epoch is None
            and resp.snapshot_id is None
        ):
            # long poll: answered when the log or the high watermark moves, or at the deadline
            st.parked.append(ParkedFetch(sender, cid, req, now + req.max_wait_ms))
            return
        self._respond(sender, cid, resp)

    def _try_complete_fetch(
        self, now: int, sender: int, req: m.FetchRequest, arrived: bool = True
    ) -> m.FetchResponse:
        st = self.state
        if not isinstance(st, LeaderState) or req.current_leader_epoch != st.epoch:
            return self._fetch_error(m.NOT_LEADER_OR_FOLLOWER)
        log = self.log
        f, e = req.fetch_offset, req.last_fetched_epoch
        leader = m.LeaderIdAndEpoch(self.node_id, st.epoch)
        start = log.start_offset
        snap = log.latest_snapshot_id
        hw = st.high_watermark
        if (
            snap is not None
            and snap.end_offset > 0  # the bootstrap snapshot (0, 0) is never sent
            and (f < start or f == 0 or (f == start and e != snap.epoch))
        ):
            # below (or diverging at) the log start: the follower needs the snapshot
            return m.FetchResponse(m.NONE, leader, hw, start, snapshot_id=snap)
        if not (f == start and start > 0):
            found = log.end_offset_for_epoch(e)
            if found.epoch != e or found.offset < f:
                diverging = m.EpochEndOffset(found.epoch, found.offset)
                return m.FetchResponse(m.NONE, leader, hw, start, diverging_epoch=diverging)
        entries = log.read(f, min(req.max_entries, self.config.fetch_max_entries))
        if st.update_replica(sender, f, now if arrived else None, fetched_ms=now):
            self._set_hw(st.high_watermark)
            self._complete_parked(now, st)
        return m.FetchResponse(m.NONE, leader, st.high_watermark, start, records=tuple(entries))

    def _on_fetch_snapshot_request(
        self, now: int, sender: int, req: m.FetchSnapshotRequest
    ) -> m.FetchSnapshotResponse:
        error = self._validate_leader_only(req.current_leader_epoch)
        leader = m.LeaderIdAndEpoch(self.leader_id, self.epoch)
        if error != m.NONE:
            return m.FetchSnapshotResponse(error, leader)
        st = self.state
        assert isinstance(st, LeaderState)
        data = self.log.read_snapshot(req.snapshot_id)
        if data is None:
            return m.FetchSnapshotResponse(m.SNAPSHOT_NOT_FOUND, leader)
        if self.dynamic:
            data = pack_snapshot(self.log.snapshot_control(req.snapshot_id), data)
        size = len(data)
        if req.position < 0 or req.position > size or (req.position == size and size > 0):
            return m.FetchSnapshotResponse(m.POSITION_OUT_OF_RANGE, leader)
        st.note_voter_fetch(sender, now)
        chunk = data[
            req.position : req.position + min(req.max_bytes, self.config.snapshot_chunk_bytes)
        ]
        return m.FetchSnapshotResponse(m.NONE, leader, req.snapshot_id, size, req.position, chunk)

    def _on_fetch_response(self, now: int, sender: int, resp: m.FetchResponse) -> bool:
        cl = resp.current_leader
        handled = self._common(now, resp.error_code, cl.leader_id, cl.leader_epoch)
        if handled is not None:
            return handled
        if resp.error_code != m.NONE:
            return False
        st = self.state
        if not isinstance(st, Follower) or sender != st.leader_id or cl.leader_epoch != st.epoch:
            return True
        log = self.log
        if resp.diverging_epoch is not None:
            div = resp.diverging_epoch
            local = log.end_offset_for_epoch(div.epoch)
            offset = min(local.offset, div.end_offset)
            if offset < self._hw or offset < log.start_offset:
                raise RaftInvariantError(
                    f"node {self.node_id} asked to truncate to {offset} below its high watermark "
                    f"{self._hw} / log start {log.start_offset}"
                )
            log.truncate_to(offset)
            self._log_truncated(now, offset)
        elif resp.snapshot_id is not None:
            st.snapshot_fetch = SnapshotFetch(resp.snapshot_id)
        else:
            if resp.records:
                if resp.records[0].offset != log.end_offset:
                    return False  # not what we asked for
                log.append_as_follower(resp.records)
                self._log_appended(now, list(resp.records))
                self._bytes_since_snapshot += sum(len(r.payload) for r in resp.records)
                self.stats.follower_fetched(len(resp.records))
                if self.is_voter or self.dynamic:
                    log.flush()
            if resp.high_watermark >= 0:
                self._set_hw(min(resp.high_watermark, log.end_offset))
        st.has_fetched = True
        st.bootstrapping = False
        st.fetch_deadline = now + self.config.fetch_timeout_ms
        return True

    def _on_fetch_snapshot_response(
        self, now: int, sender: int, resp: m.FetchSnapshotResponse
    ) -> bool:
        cl = resp.current_leader
        handled = self._common(now, resp.error_code, cl.leader_id, cl.leader_epoch)
        if handled is not None:
            return handled
        st = self.state
        if not isinstance(st, Follower) or st.snapshot_fetch is None or sender != st.leader_id:
            return True
        sf = st.snapshot_fetch
        if resp.error_code == m.SNAPSHOT_NOT_FOUND:
            st.snapshot_fetch = None  # the leader moved on: fetch again to learn its new snapshot
            st.fetch_deadline = now + self.config.fetch_timeout_ms
            return True
        if resp.error_code != m.NONE:
            return False
        if resp.snapshot_id != sf.snapshot_id or resp.position != len(sf.data):
            return False
        sf.data += resp.unaligned_records
        if len(sf.data) >= resp.size:
            control, data = (
                unpack_snapshot(bytes(sf.data)) if self.dynamic else ((), bytes(sf.data))
            )
            self.log.install_snapshot(sf.snapshot_id, data, control)
            self._snapshot_installed(now, sf.snapshot_id)
            st.snapshot_fetch = None
            self._bytes_since_snapshot = 0
            self._uncovered_since_ms = -1
            self._out.append(SnapshotLoaded(sf.snapshot_id))
            self._set_hw(sf.snapshot_id.end_offset)
        st.has_fetched = True
        st.fetch_deadline = now + self.config.fetch_timeout_ms
        return True
