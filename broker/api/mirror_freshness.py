"""How current DescribeMirrors' source offset is (kmirror's SourceOffsetAgeMs tagged field).

The source offset of a partition is what the source last said its high watermark was. While
the partition is fetched, that answer is refreshed with every good Fetch; when the fetcher has
failed since its last good answer, or the answer is older than the fetcher's staleness bound
(a few fetch waits), the offset is not current: the lag goes out as -1 (unknown) next to the
last known offset and its age, and the last fetch error becomes the partition's StateReason
(unless the partition is FAILED: its own reason stays). A partition no longer fetched (paused)
keeps its last known offset and lag; only its age grows.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class FreshnessLike(Protocol):
    """What this module needs of `broker.mirror.fetch_state.SourceFreshness`."""

    @property
    def source_high_watermark(self) -> int: ...
    @property
    def learnt_ms(self) -> int: ...
    @property
    def error(self) -> str | None: ...
    @property
    def fetching(self) -> bool: ...
    @property
    def stale_after_ms(self) -> int: ...


# (mirror, topic, partition) -> the fetcher's view, None when it has none
FreshnessFn = Callable[[str, str, int], FreshnessLike | None]


@dataclass(frozen=True, slots=True)
class SourceView:
    lag: int  # -1: unknown
    age_ms: int  # -1: the source offset is unknown
    reason: str | None


def source_view(
    source_offset: int,
    lag: int,
    state: str,
    reason: str | None,
    fresh: FreshnessLike | None,
    now_ms: int,
) -> SourceView:
    """The lag, age and reason one DescribeMirrors partition reports."""
    if fresh is None:
        return SourceView(lag, -1, reason)
    known = source_offset >= 0 and fresh.learnt_ms >= 0
    age = max(0, now_ms - fresh.learnt_ms) if known else -1
    if not fresh.fetching:
        return SourceView(lag, age, reason)  # not fetched: the last known numbers, aged
    if fresh.error is not None or not known or age > fresh.stale_after_ms:
        lag = -1
    if fresh.error is not None and state != "FAILED":  # a FAILED partition keeps its reason
        what = "not current" if known else "unknown"
        note = f"source offset {what}: fetching from the source fails: {fresh.error}"
        reason = note if not reason else f"{reason}; {note}"
    return SourceView(lag, age, reason)
