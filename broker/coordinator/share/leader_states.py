"""The share-partitions a partition leader serves, and their life cycle (KIP-932).

One `SharePartition` per (group, topic id, partition), valid for the leader epoch it was loaded
in: a new epoch (this node leading again, or anew) means loading again. Loading reads the
state from the share coordinator through the persister (none stored: a new share-partition at
the reset point, `latest` = the high watermark or `earliest` = the log start, written at once so
that a leader change keeps that point). The reset point and the acquisition lock duration are
the group's own when it sets them (share.auto.offset.reset, share.record.lock.duration.ms group
configs), else the broker's. `persist` writes the current state; one load or write
at a time per share-partition, so snapshots land in order. Without a persister (tests) the
state is in memory only.
"""

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from broker.config import group_configs as gc

from .partition import ShareConfig, SharePartition
from .persister import SharePersister
from .state_records import PersistedBatch, ShareKey, ShareSnapshot

StateKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


class LeaderShareStates:
    def __init__(
        self,
        config: ShareConfig,
        auto_offset_reset: str = "latest",
        persister: SharePersister | None = None,
        group_overrides: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        self.config = config
        self.reset = auto_offset_reset
        self.persister = persister
        self.group_overrides = group_overrides or (lambda _: {})
        # state -> (leader epoch it was loaded in, the share-partition)
        self.states: dict[StateKey, tuple[int, SharePartition]] = {}
        # the state epoch the share coordinator holds for each (0 until it says otherwise)
        self._state_epochs: dict[StateKey, int] = {}
        self._locks: dict[StateKey, asyncio.Lock] = {}

    def config_for(self, group: str) -> ShareConfig:
        """The share config of a group: the broker's, with the group's lock duration."""
        lock = self.group_overrides(group).get(gc.SHARE_LOCK)
        if lock is None or int(lock) == self.config.lock_duration_ms:
            return self.config
        return dataclasses.replace(self.config, lock_duration_ms=int(lock))

    def reset_for(self, group: str) -> str:
        return self.group_overrides(group).get(gc.SHARE_RESET, self.reset)

    def current(self, skey: StateKey, hosted: Any) -> SharePartition | None:
        """The share-partition loaded in the partition's current leader epoch, if any (its
        start moved up to the log start first, its config the group's as it is now)."""
        entry = self.states.get(skey)
        if entry is None or entry[0] != hosted.leader_epoch:
            return None
        entry[1].move_start(hosted.log.log_start_offset)
        entry[1].config = self.config_for(skey[0])
        return entry[1]

    def peek(self, skey: StateKey) -> SharePartition | None:
        entry = self.states.get(skey)
        return entry[1] if entry is not None else None

    def of_group(self, group: str) -> list[tuple[StateKey, SharePartition]]:
        return [(k, sp) for k, (_e, sp) in self.states.items() if k[0] == group]

    def forget(self, skey: StateKey) -> None:
        """Drop a state (e.g. re-initialized at the coordinator): the next use loads it."""
        self.states.pop(skey, None)

    async def revalidate(self, skey: StateKey) -> None:
        """A new share session: drop the cached state if the share coordinator's moved on (a
        new state epoch from AlterShareGroupOffsets, or none left after
        DeleteShareGroupOffsets), so that the next use reads it again. Raises
        `CoordinatorError` when the coordinator cannot be read."""
        if self.persister is None or skey not in self.states:
            return
        async with self._lock(skey):
            if skey not in self.states:
                return
            found = await self.persister.read(ShareKey(*skey))
            if found is None or found.state_epoch != self._state_epochs.get(skey, 0):
                self.states.pop(skey, None)

    async def load(self, skey: StateKey, hosted: Any) -> None:
        """Load the share-partition for the partition's current leader epoch, unless loaded.
        Raises `CoordinatorError` when the share coordinator cannot be read or written."""
        async with self._lock(skey):
            if self.current(skey, hosted) is not None:
                return  # loaded meanwhile
            plog = hosted.log
            found = await self.persister.read(ShareKey(*skey)) if self.persister else None
            if found is not None:
                runs = [
                    (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in found.batches
                ]
                sp = SharePartition.restore(found.start_offset, runs, self.config_for(skey[0]))
                self._state_epochs[skey] = found.state_epoch
            else:
                earliest = self.reset_for(skey[0]) == "earliest"
                start = plog.log_start_offset if earliest else plog.high_watermark
                sp = SharePartition(start, self.config_for(skey[0]))
                self._state_epochs[skey] = 0
            sp.move_start(plog.log_start_offset)
            self.states[skey] = (hosted.leader_epoch, sp)
            if found is None and self.persister is not None:
                await self._write(skey)

    async def persist(self, skey: StateKey) -> None:
        """Write the share-partition's current state to the share coordinator."""
        if self.persister is None or skey not in self.states:
            return
        async with self._lock(skey):
            await self._write(skey)

    def _lock(self, skey: StateKey) -> asyncio.Lock:
        lock = self._locks.get(skey)
        if lock is None:
            lock = self._locks[skey] = asyncio.Lock()
        return lock

    async def _write(self, skey: StateKey) -> None:
        assert self.persister is not None
        leader_epoch, sp = self.states[skey]
        snapshot = ShareSnapshot(
            state_epoch=self._state_epochs.get(skey, 0),
            leader_epoch=leader_epoch,
            start_offset=sp.start_offset,
            batches=tuple(PersistedBatch(*run) for run in sp.persisted()),
        )
        await self.persister.write(ShareKey(*skey), snapshot)
