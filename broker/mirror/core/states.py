"""The mirror state machine's rules: the state a partition is wanted in, parsed from its topic's
``mirror.name`` config (`wanted_from_config`); the next valid transition towards it
(`next_state`); and what the manager remembers of each partition it drives (`PartitionInfo`).
"""

import uuid
from dataclasses import dataclass

from ...metadata.mirror_states import PAUSED_SUFFIX, REMOVED_SUFFIX, MirrorState


@dataclass(frozen=True, slots=True)
class Wanted:
    mirror: str
    state: MirrorState  # MIRRORING, PAUSED or STOPPED


def wanted_from_config(value: str | None) -> Wanted | None:
    """Parse a topic's ``mirror.name`` config."""
    if not value:
        return None
    if value.endswith(REMOVED_SUFFIX):
        return Wanted(value[: -len(REMOVED_SUFFIX)], MirrorState.STOPPED)
    if value.endswith(PAUSED_SUFFIX):
        return Wanted(value[: -len(PAUSED_SUFFIX)], MirrorState.PAUSED)
    return Wanted(value, MirrorState.MIRRORING)


# For a wanted state and a current one, the next state to move to (None: arrived or stuck).
def next_state(current: MirrorState, wanted: MirrorState) -> MirrorState | None:
    S = MirrorState
    if current == wanted or (current == S.FAILED and wanted != S.STOPPED):
        return None
    if wanted == S.MIRRORING:
        return {
            S.UNKNOWN: S.PREPARING,
            S.STOPPED: S.PREPARING,
            S.PREPARING: S.MIRRORING,
            S.PAUSED: S.MIRRORING,
            S.PAUSING: S.PAUSED,
            S.STOPPING: S.STOPPED,
        }.get(current)
    if wanted == S.PAUSED:
        return {
            S.UNKNOWN: S.PREPARING,
            S.PREPARING: S.MIRRORING,
            S.MIRRORING: S.PAUSING,
            S.PAUSING: S.PAUSED,
            S.STOPPING: S.STOPPED,
            S.STOPPED: S.PREPARING,
        }.get(current)
    # wanted STOPPED
    return {
        S.UNKNOWN: S.PREPARING,
        S.PREPARING: S.MIRRORING,
        S.MIRRORING: S.STOPPING,
        S.PAUSING: S.PAUSED,
        S.PAUSED: S.STOPPING,
        S.FAILED: S.STOPPING,
        S.STOPPING: S.STOPPED,
    }.get(current)


@dataclass(slots=True)
class PartitionInfo:
    mirror: str
    topic_id: uuid.UUID
    state: MirrorState
    last_mirror_epoch: int | None = None
    error: str | None = None  # why FAILED
    note: str | None = None  # what the last truncation removed, and why
    # PREPARING: when (time.monotonic()) the wait for the other replicas' truncation started
    # counting towards mirror.truncation.timeout.ms; None: not counting
    truncation_wait_since: float | None = None
    # the partition's leader epoch when this was read from the coordinator (or written by this
    # leader): another one means leadership went away meanwhile, and another leader may have
    # moved the partition on, so it is read again
    leader_epoch: int = -1


def current(info: PartitionInfo, mirror: str, topic_id: uuid.UUID, leader_epoch: int) -> bool:
    """Is what the manager remembers of a partition still its state?"""
    return info.mirror == mirror and info.topic_id == topic_id and info.leader_epoch == leader_epoch
