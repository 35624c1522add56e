"""The node's seat in the KRaft metadata quorum: a voter or an observer of ``controller.quorum.voters``.

One ``RaftCore`` over the node's ``MetadataLog`` (``__cluster_metadata-0``), driven by a
``QuorumDriver`` that reaches the other voters on their controller listeners. Records reach the
node only once committed: the driver's commit callback (Kafka's ``RaftClient.Listener.
handle_commit``) reads the log from where the node last applied up to the new high watermark,
decodes the metadata records and hands them to ``apply`` in offset order. An ``append`` (the
active controller's) returns once its records are committed *and applied*, so the controller's
next request is checked against an image that holds them.

Snapshots (Kafka's SnapshotGenerator and MetadataLoader): when the core asks (``SnapshotWanted``:
``metadata.log.max.record.bytes.between.snapshots`` of records, or a record no snapshot holds
``metadata.log.max.snapshot.interval.ms`` old), ``snapshot_state`` encodes the records the node's
``snapshot_source`` gives for its image, ending where it has applied; the core stores them and
drops the log below. A snapshot replaces the node's state through ``load_snapshot``: at start
when the log begins at one (or holds a newer one), and when a follower behind the leader's log
start fetched one (``handle_load_snapshot``); applying then goes on from its end offset.

A single voter is the same code: it elects itself at start and commits what it flushes.
Logs written by the earlier one-voter quorum (every batch at epoch 1, no ``quorum-state``) are
read as they are: the first start elects an epoch above them.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from protocol.errors import DecodeError
from protocol.metadata_records import decode_metadata_record, encode_metadata_record

from ..log.partition_log import PartitionLog
from ..metadata.snapshot import RecordsCodec, decode_snapshot, encode_snapshot, records_digest
from ..raft.core import RaftConfig, RaftCore
from ..raft.messages import SnapshotId
from ..raft.quorum_state import FileQuorumStateStore
from ..raft.voter_set import ZERO_UUID, VoterSet
from .driver import ClientFactory, NotLeaderError, QuorumDriver
from .metadata_log import MetadataLog
from .stall_watch import StallWatch

log = logging.getLogger(__name__)

QUORUM_STATE_FILE = "quorum-state"
_READ_ENTRIES = 4096

# Committed (offset, record) pairs, oldest first.
ApplyRecords = Callable[[list[tuple[int, Any]]], None]
OnLeaderChange = Callable[[int, int], None]
# The image's offset and the (offset, record) pairs that rebuild it (snapshot.image_records).
SnapshotSource = Callable[[], tuple[int, list[tuple[int, Any]]]]
# A snapshot's end offset and its (offset, record) pairs: the node rebuilds its state from them.
LoadSnapshot = Callable[[int, list[tuple[int, Any]]], None]


class SnapshotLoadError(Exception):
    """A snapshot the node must load cannot be read: its state would be wrong."""


class MetadataQuorum:
    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, tuple[str, int]],
        plog: PartitionLog,
        cluster_id: str,
        now_ms: Callable[[], int],
        client_factory: ClientFactory,
        apply: ApplyRecords,
        on_leader_change: OnLeaderChange | None = None,
        config: RaftConfig | None = None,
        snapshot_source: SnapshotSource | None = None,
        load_snapshot: LoadSnapshot | None = None,
        *,
        directory_id: uuid.UUID = ZERO_UUID,
        bootstrap: Mapping[int, tuple[str, int]] | None = None,
        listener: str | None = None,
        stall_watch: StallWatch | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = dict(voters)  # static voters; {} when they are in the log (KIP-853)
        self.directory_id = directory_id
        self.listener = listener
        # snapshots of the image are stored one metadata record per record, as Kafka's are
        self._log = MetadataLog(plog, now_ms, RecordsCodec())
        bootstrap = dict(bootstrap or {})
        core = RaftCore(
            node_id,
            frozenset(voters),
            self._log,
            FileQuorumStateStore(Path(plog.dir) / QUORUM_STATE_FILE, cluster_id),
            random.Random(),
            config or RaftConfig(cluster_id=cluster_id),
            directory_id=directory_id,
            bootstrap_ids=tuple(sorted(bootstrap, reverse=True)),
        )
        self.driver = QuorumDriver(
            core,
            voters,
            self,
            now_ms,
            client_factory,
            bootstrap=bootstrap,
            listener_name=listener,
            stall_watch=stall_watch,
        )
        self._apply = apply
        self._on_leader_change = on_leader_change
        self._snapshot_source = snapshot_source
        self._load_snapshot = load_snapshot
        self._next = self._log.start_offset  # the next offset to apply
        self._hw = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._first_commit: asyncio.Future[None] | None = None
        self._started = False

    # --- what the node asks -------------------------------------------------------------------

    @property
    def is_voter(self) -> bool:
        return self.driver.core.is_voter

    @property
    def voter_set(self) -> VoterSet:
        """The voters now (the static ones with zero directory ids, or the log's)."""
        return self.driver.core.voter_set

    @property
    def is_leader(self) -> bool:
        return self.driver.core.is_leader

    @property
    def stall_watch(self) -> StallWatch:
        """What notices stalls of this node's event loop (the active controller reads it too)."""
        return self.driver.stall_watch

    def leadership_confirmed(self) -> bool:
        """This node leads, a majority of voters fetched from it recently and, after a stall of
        its loop, an entry appended since has committed: what the active controller checks
        before it acts on a timer."""
        return self.driver.leadership_confirmed()

    def confirm_needs_append(self) -> bool:
        """After a stall: only an entry appended since, once committed, confirms leadership
        again, and none has been appended (the controller then writes a NoOpRecord)."""
        return self.driver.confirm_needs_append()

    @property
    def leader_id(self) -> int:
        return self.driver.core.leader_id

    @property
    def epoch(self) -> int:
        return self.driver.core.epoch

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def applied_offset(self) -> int:
        """The offset of the last record applied (-1: none)."""
        return self._next - 1

    @property
    def end_offset(self) -> int:
        return self._log.end_offset

    def silent_for(self, node_id: int) -> int | None:
        """Milliseconds since ``node_id`` last answered this node's quorum (None: never)."""
        return self.driver.silent_for(node_id)

    def leader_endpoint(self) -> tuple[int, str, int] | None:
        """(id, host, port) of the current leader's controller listener, if one is known."""
        leader = self.leader_id
        if leader < 0:
            return None
        address = self.driver.endpoint(leader)
        if address is None:
            return None
        return leader, address[0], address[1]

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._first_commit = asyncio.get_running_loop().create_future()
            self._load_latest_snapshot()
            self.driver.start()

    def _load_latest_snapshot(self) -> None:
        """At start: the newest snapshot, if the log has one, before any committed record."""
        sid = self._log.latest_snapshot_id
        if sid is None:
            if self._log.start_offset > 0:
                raise SnapshotLoadError(
                    f"the metadata log starts at offset {self._log.start_offset} "
                    "without a snapshot there"
                )
            return
        if self._load_snapshot is None:
            if self._log.start_offset > 0:
                raise SnapshotLoadError(f"metadata snapshot {sid} cannot be loaded by this node")
            return  # nothing lost: the log still holds everything from offset 0
        self._load(sid)

    async def wait_caught_up(self) -> None:
        """Until the first high watermark is known and everything under it applied."""
        self.start()
        assert self._first_commit is not None
        await asyncio.shield(self._first_commit)

    async def append(self, records: Sequence[Any]) -> int:
        """Append as the leader; the offset of the last record, once committed and applied.
        ``NotLeaderError`` when this node does not lead the quorum."""
        if not records:
            return self.applied_offset
        epoch, last = self.begin_append(records)
        await self.wait_committed(epoch, last)
        return last

    def leader_epoch(self) -> int | None:
        """The epoch this node leads the quorum in; None when it does not lead."""
        return self.epoch if self.is_leader else None

    def begin_append(self, records: Sequence[Any]) -> tuple[int, int]:
        """Append as the leader, now; (epoch, offset of the last record). ``NotLeaderError``
        when this node does not lead the quorum."""
        self.start()
        epoch = self.driver.core.epoch
        last = self.driver.append_nowait([encode_metadata_record(r) for r in records])
        return epoch, last

    async def wait_committed(self, epoch: int, last_offset: int) -> None:
        """Until the records ``begin_append`` put at ``last_offset`` in ``epoch`` are committed
        and applied; ``NotLeaderError`` if the epoch ends before they commit."""
        await self.driver.wait_committed(last_offset, epoch)
        await self.wait_applied(last_offset)

    async def wait_writable(self) -> None:
        """As the leader: until every entry before this leadership's LeaderChange is applied
        (they are committed with it). ``NotLeaderError`` when this node does not lead, or
        stopped leading meanwhile: only the active controller decides (a request checked on
        another node's image, even one that commits nothing, would be answered from a state
        that may be behind, as Kafka answers NOT_CONTROLLER)."""
        start = self.driver.core.epoch_start_offset()
        if start is None:
            raise NotLeaderError(self.leader_id, self.epoch)
        epoch = self.epoch
        await self.wait_applied(start)
        if self.epoch != epoch or not self.is_leader:
            raise NotLeaderError(self.leader_id, self.epoch)

    async def wait_applied(self, offset: int) -> None:
        if self._next > offset:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, fut))
        await fut

    async def close(self) -> None:
        await self.driver.close()
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(NotLeaderError(self.leader_id, self.epoch))
        self._waiters.clear()

    # --- QuorumListener -----------------------------------------------------------------------

    def handle_commit(self, high_watermark: int) -> None:
        self._hw = max(self._hw, high_watermark)
        batch: list[tuple[int, Any]] = []
        while self._next < self._hw:
            entries = self._log.read(self._next, _READ_ENTRIES)
            if not entries:
                break
            for e in entries:
                if e.offset >= self._hw:
                    break
                if not e.control and e.payload:
                    try:
                        batch.append((e.offset, decode_metadata_record(e.payload)))
                    except DecodeError as err:  # a record this version cannot read: say which
                        log.error("metadata record at offset %d skipped: %s", e.offset, err)
                self._next = e.offset + 1
            else:
                continue
            break
        if batch:
            self._apply(batch)
        self._release()

    def _release(self) -> None:
        if self._first_commit is not None and not self._first_commit.done():
            self._first_commit.set_result(None)
        if self._waiters:
            still = []
            for offset, fut in self._waiters:
                if offset < self._next:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((offset, fut))
            self._waiters = still

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        log.info("metadata quorum: leader %d at epoch %d", leader_id, epoch)
        if self._on_leader_change is not None:
            self._on_leader_change(leader_id, epoch)

    def handle_load_snapshot(self, snapshot_id: SnapshotId) -> None:
        """The core installed a snapshot fetched from the leader: the log now starts at its end."""
        if self._load_snapshot is None:
            log.error("metadata snapshot %s received but this node cannot load it", snapshot_id)
            return
        self._load(snapshot_id)
        self._release()

    def _load(self, snapshot_id: SnapshotId) -> None:
        assert self._load_snapshot is not None
        data = self._log.read_snapshot(snapshot_id)
        if data is None:
            raise SnapshotLoadError(f"metadata snapshot {snapshot_id} is gone")
        try:
            entries = decode_snapshot(data)
        except DecodeError as e:
            raise SnapshotLoadError(f"metadata snapshot {snapshot_id} is damaged: {e}") from e
        end = snapshot_id.end_offset
        self._load_snapshot(end, entries)
        self._next = end
        self._hw = max(self._hw, end)
        log.info(
            "metadata snapshot loaded: offsets below %d, %d records, image digest %s",
            end,
            len(entries),
            records_digest(entries),
        )

    def snapshot_state(self, up_to: int) -> tuple[int, bytes] | None:
        """The core wants a snapshot: the image's records, up to where this node has applied."""
        if self._snapshot_source is None:
            return None
        end = self._next  # <= up_to: the commit that led to the request was applied first
        image_offset, entries = self._snapshot_source()
        if image_offset >= end or end > up_to:
            # the image is not the state below ``end``: never store a snapshot that lies
            log.error(
                "metadata snapshot skipped: image at offset %d, applied below %d, wanted below %d",
                image_offset,
                self._next,
                up_to,
            )
            return None
        data = encode_snapshot(entries)
        latest = self._log.latest_snapshot_id
        if end > max(self._log.start_offset, latest.end_offset if latest is not None else 0):
            log.info(
                "metadata snapshot written: offsets below %d, %d records, %d bytes, "
                "image digest %s",
                end,
                len(entries),
                len(data),
                records_digest(entries),
            )
        return end, data
