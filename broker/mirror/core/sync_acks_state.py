"""Synchronous mirroring on the source (issue 30 item 1), without I/O: which destination mirrors
a partition waits for, whether an offset is committed on all of them, and the ``async`` policy's
degraded episodes.

Each kmirror mirror fetching a partition reports, in its consumer Fetch, the high watermark of
its copy (docs/protocol.md, "Synchronous mirroring"). A reporting mirror is *in sync* (a member
of the partition's in-sync mirror set, like a follower of the ISR) once it holds every record
the members held (``synced_end``); it leaves the set after ``timeout_ms`` without a report. An
acks=all produce of a ``mirror.sync.enable`` topic is done once the set is not empty and every
member committed its records. A mirror added later, still copying the backlog, does not hold
produces back until it caught up.

Times are the caller's milliseconds (any monotonic clock).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

ENABLE: Final = "mirror.sync.enable"
TIMEOUT_MS: Final = "mirror.sync.timeout.ms"
ON_TIMEOUT: Final = "mirror.sync.on.timeout"
KEYS: Final = frozenset({ENABLE, TIMEOUT_MS, ON_TIMEOUT})
DEFAULT_TIMEOUT_MS: Final = 30000
REFUSE: Final = "refuse"
ASYNC: Final = "async"
POLICIES: Final = (REFUSE, ASYNC)


@dataclass(frozen=True, slots=True)
class SyncPolicy:
    """A sync topic's settings (``mirror.sync.timeout.ms``, ``mirror.sync.on.timeout``)."""

    timeout_ms: int = DEFAULT_TIMEOUT_MS
    degrade: bool = False  # ``async``: answer without the mirror after a timeout


def policy_of(config: dict[str, str] | object) -> SyncPolicy | None:
    """The topic's policy, or None when ``mirror.sync.enable`` is not true. Values were
    validated when set (the catalog's validators); a value this node cannot read falls back to
    the default rather than failing produces."""
    get = getattr(config, "get", None)
    if get is None or str(get(ENABLE, "false")).lower() != "true":
        return None
    raw = get(TIMEOUT_MS)
    try:
        timeout = int(raw) if raw is not None else DEFAULT_TIMEOUT_MS
    except ValueError:
        timeout = DEFAULT_TIMEOUT_MS
    return SyncPolicy(max(1, timeout), get(ON_TIMEOUT, REFUSE) == ASYNC)


class Event(Enum):
    """What a change means for the logs and metrics of the shell."""

    NONE = 0
    JOINED = 1  # a mirror entered the in-sync set
    DEGRADED = 2  # an ``async`` partition stopped waiting (a new episode: WARN once)
    RECOVERED = 3  # back to waiting: the mirrors hold what was acknowledged meanwhile


@dataclass(slots=True)
class MirrorProgress:
    committed: int  # the destination's high watermark for this partition
    last_seen_ms: int
    in_sync: bool = False


@dataclass(slots=True)
class PartitionSync:
    """One source partition of a sync topic, on its leader."""

    synced_end: int  # every record below is on every in-sync mirror (forward only)
    mirrors: dict[str, MirrorProgress] = field(default_factory=dict)
    degraded_since_ms: int | None = None
    degraded_ms_total: int = 0
    # the highest offset end acknowledged without the mirrors, and the target a mirror must
    # reach to end the episode (``degraded_end`` as of the report before: one round trip back,
    # so a topic under steady load still gets out)
    degraded_end: int = 0
    catch_up_target: int = 0

    def expire(
        self, now_ms: int, timeout_ms: int, seen: Mapping[str, int] | None = None
    ) -> list[str]:
        """Forget mirrors silent for longer than ``timeout_ms``; their ids. ``seen``: each
        mirror's last Fetch of any partition (an incremental Fetch names only what changed)."""
        gone = [m for m in self.mirrors if now_ms - self.last_seen_ms(m, seen) > timeout_ms]
        for m in gone:
            del self.mirrors[m]
        return gone

    def last_seen_ms(self, mirror: str, seen: Mapping[str, int] | None = None) -> int:
        own = self.mirrors[mirror].last_seen_ms
        return own if seen is None else max(own, seen.get(mirror, own))

    def members(self) -> list[MirrorProgress]:
        return [p for p in self.mirrors.values() if p.in_sync]

    def committed_end(self) -> int | None:
        """What every in-sync mirror holds, or None when none is in sync."""
        members = self.members()
        return min(p.committed for p in members) if members else None

    def report(self, mirror: str, committed: int, now_ms: int) -> list[Event]:
        """A mirror's Fetch said its copy is committed below ``committed``."""
        events: list[Event] = []
        p = self.mirrors.get(mirror)
        if p is None:
            p = self.mirrors[mirror] = MirrorProgress(committed, now_ms)
        else:
            p.committed, p.last_seen_ms = committed, now_ms
        if not p.in_sync and committed >= self.synced_end:
            p.in_sync = True
            events.append(Event.JOINED)
        end = self.committed_end()
        if end is not None and end > self.synced_end:
            self.synced_end = end
        if self.degraded_since_ms is not None:
            if end is not None and end >= self.catch_up_target:
                self.degraded_ms_total += now_ms - self.degraded_since_ms
                self.degraded_since_ms = None
                events.append(Event.RECOVERED)
            else:
                self.catch_up_target = self.degraded_end
        return events

    def covered(self, required: int) -> bool:
        """acks=all may answer: every in-sync mirror (at least one) committed below
        ``required``."""
        end = self.committed_end()
        return end is not None and end >= required

    @property
    def degraded(self) -> bool:
        return self.degraded_since_ms is not None

    def degrade(self, required: int, now_ms: int) -> Event:
        """An ``async`` partition's wait timed out for the records below ``required``."""
        self.degraded_end = max(self.degraded_end, required)
        if self.degraded_since_ms is not None:
            return Event.NONE
        self.degraded_since_ms = now_ms
        self.catch_up_target = self.degraded_end
        return Event.DEGRADED

    def acked_async(self, required: int) -> None:
        """Records below ``required`` were acknowledged without waiting (degraded)."""
        self.degraded_end = max(self.degraded_end, required)

    def degraded_seconds(self, now_ms: int) -> float:
        ongoing = now_ms - self.degraded_since_ms if self.degraded_since_ms is not None else 0
        return (self.degraded_ms_total + ongoing) / 1000
