"""The finalized features this node knows (KIP-584, KIP-1022): the levels it supports, the levels
a fresh cluster starts at, what each level depends on, and metadata.version's release names.

Levels and names are Kafka 4.1's (MetadataVersion: level 27 is ``4.1-IV1``, its latest production
version). Where kmirror implements less than Kafka, it supports less: transaction.version 2
(KIP-890 part 2: EndTxn v5, epoch bumps per transaction) is not served, so the supported range
stops at 1 and the controller refuses an upgrade to 2 as Kafka refuses an unsupported level.
"""

from __future__ import annotations

from typing import Final

METADATA_VERSION: Final = "metadata.version"
KRAFT_VERSION: Final = "kraft.version"
GROUP_VERSION: Final = "group.version"
TRANSACTION_VERSION: Final = "transaction.version"
SHARE_VERSION: Final = "share.version"

# metadata.version levels and their release names (3.3-IV3, the minimum, to 4.1-IV1)
_RELEASES: Final = (
    (7, "3.3-IV3"),
    (8, "3.4-IV0"),
    (9, "3.5-IV0"),
    (10, "3.5-IV1"),
    (11, "3.5-IV2"),
    (12, "3.6-IV0"),
    (13, "3.6-IV1"),
    (14, "3.6-IV2"),
    (15, "3.7-IV0"),
    (16, "3.7-IV1"),
    (17, "3.7-IV2"),
    (18, "3.7-IV3"),
    (19, "3.7-IV4"),
    (20, "3.8-IV0"),
    (21, "3.9-IV0"),
    (22, "4.0-IV0"),
    (23, "4.0-IV1"),
    (24, "4.0-IV2"),
    (25, "4.0-IV3"),
    (26, "4.1-IV0"),
    (27, "4.1-IV1"),
)
MV_NAMES: Final[dict[int, str]] = dict(_RELEASES)
MINIMUM_MV: Final = 7
LATEST_MV: Final = 27
# levels whose metadata changed from the level before (Kafka's didMetadataChange): a safe
# downgrade may not cross one of them
_MV_METADATA_CHANGED: Final = frozenset({7, 8, 11, 13, 14, 15, 17, 23})

# name -> (min supported, max supported, level a freshly formatted cluster is finalized at)
FEATURES: Final[dict[str, tuple[int, int, int]]] = {
    METADATA_VERSION: (MINIMUM_MV, LATEST_MV, LATEST_MV),
    KRAFT_VERSION: (0, 1, 0),
    GROUP_VERSION: (0, 1, 1),
    TRANSACTION_VERSION: (0, 1, 0),
    # KIP-932 share groups: on with share.version 1 (or group.share.enable=true)
    SHARE_VERSION: (0, 1, 0),
}

# (feature, level) -> what it needs: {other feature: minimum level}
DEPENDENCIES: Final[dict[tuple[str, int], dict[str, int]]] = {
    (GROUP_VERSION, 1): {METADATA_VERSION: 22},
    (SHARE_VERSION, 1): {METADATA_VERSION: 27},
}

# the metadata.version level from which each feature's level is the default (version-mapping)
_DEFAULT_FROM: Final[dict[str, tuple[tuple[int, int], ...]]] = {
    KRAFT_VERSION: (),
    TRANSACTION_VERSION: (),
    GROUP_VERSION: ((22, 1),),
    SHARE_VERSION: (),
}


def mv_name(level: int) -> str | None:
    return MV_NAMES.get(level)


def mv_level(name: str) -> int | None:
    """The level of a release version: ``4.1-IV1``, or ``4.1`` for that release's last one."""
    for level, release in reversed(_RELEASES):
        if release == name or release.split("-")[0] == name:
            return level
    return None


def default_levels(mv: int) -> dict[str, int]:
    """The level of each feature but metadata.version that goes with metadata.version ``mv``."""
    out: dict[str, int] = {}
    for name, steps in _DEFAULT_FROM.items():
        out[name] = max((lvl for since, lvl in steps if since <= mv), default=0)
    return out


def metadata_changed_between(low: int, high: int) -> bool:
    """Whether a downgrade from ``high`` to ``low`` loses metadata."""
    return any(low < level <= high for level in _MV_METADATA_CHANGED)
