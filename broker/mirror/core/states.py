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
