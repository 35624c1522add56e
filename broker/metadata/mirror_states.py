"""KIP-1279 mirror partition states and their allowed transitions.

Shared by the mirror coordinator (which validates and persists them in ``__mirror_state``) and the
mirror manager (which drives them); kept in the metadata layer so neither imports the other.
The int values are what ``MirrorPartitionStateValue.State`` (int8) carries on disk.
"""

from enum import IntEnum
from typing import Final


class MirrorState(IntEnum):
    UNKNOWN = -1  # no state stored: never written, only reported
    PREPARING = 0
    MIRRORING = 1
    PAUSING = 2
    PAUSED = 3
    STOPPING = 4
    STOPPED = 5
    FAILED = 6


# new state -> the states it may be entered from (the KIP's "Valid from" lists)
VALID_FROM: Final[dict[MirrorState, frozenset[MirrorState]]] = {
    MirrorState.PREPARING: frozenset(
        {MirrorState.UNKNOWN, MirrorState.MIRRORING, MirrorState.STOPPED}
    ),
    MirrorState.MIRRORING: frozenset({MirrorState.PREPARING, MirrorState.PAUSED}),
    MirrorState.PAUSING: frozenset({MirrorState.MIRRORING}),
    MirrorState.PAUSED: frozenset({MirrorState.PAUSING}),
    # FAILED too: the KIP's way out of FAILED is remove (STOPPING, best-effort) then add again.
    MirrorState.STOPPING: frozenset(
        {MirrorState.MIRRORING, MirrorState.PAUSED, MirrorState.FAILED}
    ),
    MirrorState.STOPPED: frozenset({MirrorState.STOPPING}),
    MirrorState.FAILED: frozenset(MirrorState),
}


def can_transition(old: MirrorState, new: MirrorState) -> bool:
    return old in VALID_FROM.get(new, frozenset())


# Topic config naming a topic's mirror (KIP-1279); hidden from DescribeConfigs.
MIRROR_NAME_CONFIG: Final = "mirror.name"
REMOVED_SUFFIX: Final = ".removed"
PAUSED_SUFFIX: Final = ".paused"
MIRROR_STATE_TOPIC: Final = "__mirror_state"
