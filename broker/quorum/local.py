"""The node's metadata quorum while it is a cluster of one: the Raft core with one voter.

Same code as a multi-voter quorum (``RaftCore`` over ``MetadataLog``, driven by
``QuorumDriver``, its election state in ``quorum-state``): the lone voter elects itself at start
(a new epoch and its LeaderChange entry), and an append commits once it is flushed. What the
node sees is the interface the one-voter ``LocalQuorum`` had: ``replay`` at start-up and
``append`` of metadata records, answered once committed.

Logs written by the earlier one-voter quorum (every batch at epoch 1, no ``quorum-state``) are
read as they are: the first start elects epoch 2 above them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from protocol.metadata_records import decode_metadata_record, encode_metadata_record

from ..log.partition_log import PartitionLog
from ..network.client import ReconnectingClient
from ..raft.core import RaftConfig, RaftCore
from ..raft.messages import SnapshotId
from ..raft.quorum_state import FileQuorumStateStore
from .driver import QuorumDriver
from .metadata_log import MetadataLog

QUORUM_STATE_FILE = "quorum-state"


class _Listener:
    """Commits are applied by the caller of ``append`` (the controller publishes its records
    once they are committed); a single voter has nothing else to react to yet."""

    def handle_commit(self, high_watermark: int) -> None:
        pass

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        pass

    def handle_load_snapshot(self, snapshot_id: SnapshotId) -> None:
        pass

    def snapshot_state(self, up_to: int) -> tuple[int, bytes] | None:
        return None  # metadata snapshots come with the multi-node image work


def _no_peers(dest: int, host: str, port: int) -> ReconnectingClient:
    raise AssertionError(f"a one-voter quorum has no peer to reach (asked for node {dest})")


class SingleVoterQuorum:
    def __init__(
        self,
        node_id: int,
        plog: PartitionLog,
        cluster_id: str,
        now_ms: Callable[[], int],
        config: RaftConfig | None = None,
    ) -> None:
        self._log = MetadataLog(plog, now_ms)
        core = RaftCore(
            node_id,
            frozenset({node_id}),
            self._log,
            FileQuorumStateStore(Path(plog.dir) / QUORUM_STATE_FILE, cluster_id),
            random.Random(),
            config or RaftConfig(cluster_id=cluster_id),
        )
        self.driver = QuorumDriver(core, {}, _Listener(), now_ms, _no_peers)
        self._started = False

    @property
    def end_offset(self) -> int:
        return self._log.end_offset

    def replay(self) -> list[tuple[int, Any]]:
        """Every metadata record in the log with its offset, oldest first (start-up: a lone
        voter's log is all committed once it leads again)."""
        out: list[tuple[int, Any]] = []
        offset = self._log.start_offset
        while offset < self._log.end_offset:
            entries = self._log.read(offset, 4096)
            if not entries:
                break
            for e in entries:
                if not e.control and e.payload:
                    out.append((e.offset, decode_metadata_record(e.payload)))
            offset = entries[-1].offset + 1
        return out

    def start(self) -> None:
        if not self._started:
            self._started = True
            self.driver.start()  # the lone voter is leader when this returns

    async def append(self, records: Sequence[Any]) -> int:
        """Append records; returns the offset of the last one once committed."""
        if not records:
            return self.end_offset - 1
        self.start()
        return await self.driver.append([encode_metadata_record(r) for r in records])

    async def close(self) -> None:
        await self.driver.close()
