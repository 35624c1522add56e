"""Where the mirror cuts a destination log, and to which epoch it bumps (KIP-1279), decided
from numbers the shell reads off the log and the source:

- PREPARING (failback): `lme_cut`, the start of the first local epoch beyond the last epoch the
  source confirms it mirrored from us ("LME truncation"), with the note ``--describe`` shows.
- STOPPING (failover): `lso_cut`, the last stable offset (what an open transaction left past
  it goes), then `bump_target`, an epoch above every mirrored one, so local writes never carry
  a source's epoch.
- Before either cut: `leader_hw_ready`, whether the leader's HW can be trusted yet (a new
  leader's lags the old leader's, and an LSO taken from it would cut committed records).
- Realigning with the source after a diverging epoch (`divergence_target`) or an
  OFFSET_OUT_OF_RANGE (`out_of_range`).

`restart` says whether a cut to an offset restarts the log there (nothing of it stays).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def lme_cut(epochs: Sequence[tuple[int, int]], log_start: int, confirmed_epoch: int | None) -> int:
    """Where PREPARING cuts the log: the start of the first local epoch beyond the last epoch
    the source confirms it mirrored (KIP-1279 "LME truncation"); none confirmed: everything.
    -1: nothing to cut. ``epochs`` are (epoch, start offset), oldest first."""
    if confirmed_epoch is None:
        return log_start
    for epoch, start in epochs:
        if epoch > confirmed_epoch:
            return max(start, log_start)
    return -1


def lme_note(cut: int, end: int, confirmed: int | None) -> str:
    why = (
        f"the source's last mirrored epoch of it is {confirmed}"
        if confirmed is not None
        else "the source has no record of mirroring it from this cluster, so KIP-1279 "
        "mirrors it from scratch"
    )
    return (
        f"truncated offsets {cut}..{end - 1} ({end - cut} offsets of local data) "
        f"before mirroring: {why}"
    )


def lme_truncation(
    epochs: Sequence[tuple[int, int]], log_start: int, log_end: int, confirmed: int | None
) -> tuple[int, str] | None:
    """PREPARING's cut and its note, or None when nothing local goes (an empty log copies
    everything anyway)."""
    if log_end <= log_start:
        return None
    cut = lme_cut(epochs, log_start, confirmed)
    if not 0 <= cut < log_end:
        return None
    return cut, lme_note(cut, log_end, confirmed)


def leader_hw_ready(high_watermark: int, epoch_start: int, log_end: int) -> bool:
    """May the leader decide a cut from its HW yet? Kafka's rule for a new leader: the HW it
    brings from its time as a follower (learnt from its last fetch answer) can be behind the
    old leader's, so it is not trusted until it reaches the start offset of the leader's epoch
    (everything the leader held when elected is then committed). Once this leader cut its own
    log below that start (a cut it decided after this wait, or one its source dictated), all
    it holds must be committed: the log end stands in for the start."""
    return high_watermark >= min(epoch_start, log_end)


def lso_cut(log_end: int, last_stable_offset: int) -> int | None:
    """STOPPING: the offset to truncate to (the LSO), or None when nothing is past it."""
    return last_stable_offset if last_stable_offset < log_end else None


def bump_target(last_mirror_epoch: int | None, leader_epoch: int) -> int:
    """The leader epoch STOPPING asks the controller for: above every mirrored epoch."""
    return max(last_mirror_epoch if last_mirror_epoch is not None else -1, leader_epoch) + 1


def needs_bump(last_mirror_epoch: int | None, leader_epoch: int) -> bool:
    """After a restart in STOPPING: is the bump still to do?"""
    return last_mirror_epoch is None or leader_epoch <= last_mirror_epoch


def redo_bump_floor(last_mirror_epoch: int | None, log_latest_epoch: int | None) -> int | None:
    """STOPPING done again (a restart, a new leader), after its LSO cut: the epoch the bump must
    exceed. STOPPING's recorded LME, or the log's latest epoch when higher: a new leader may
    hold mirrored records of a later source epoch that the old leader cut as uncommitted, now
    committed under it (kept by its cut). A local marker's epoch there costs no bump: it is
    below the leader epoch of any later leader."""
    known = [e for e in (last_mirror_epoch, log_latest_epoch) if e is not None]
    return max(known) if known else None


def restart(offset: int, log_start: int) -> bool:
    """A cut below the log start restarts the log empty there."""
    return offset < log_start


def divergence_target(
    log_end: int,
    source_epoch: int,
    source_end: int,
    ours: tuple[int, int],
    *,
    fallback: int = -1,
) -> int | None:
    """Where our log stops agreeing with the source, from the source's end of an epoch
    (``source_epoch`` and ``source_end``: its OffsetForLeaderEpoch answer, -1 unknown) and
    ``ours``, our own (epoch, end offset) for that epoch ((-1, -1): we never had it). Unknown:
    ``fallback`` (capped at our end), or None to leave the log alone."""
    if source_epoch < 0 or source_end < 0:
        return min(fallback, log_end) if fallback >= 0 else None
    ours_epoch, ours_end = ours
    if ours_epoch < 0:
        return min(source_end, log_end)
    return min(source_end, ours_end, log_end)


@dataclass(frozen=True, slots=True)
class OutOfRange:
    """What OFFSET_OUT_OF_RANGE means: ``restart_at`` (restart the log at the source's log
    start), ``diverged_epoch`` (look up where the histories part, from our latest epoch;
    ``fallback`` where to cut when the source does not know that epoch), or ``retry``."""

    restart_at: int | None = None
    diverged_epoch: int | None = None
    fallback: int = -1
    retry: str | None = None


def out_of_range(
    log_end: int, latest_epoch: int | None, source_start: int, source_end: int
) -> OutOfRange:
    if log_end < source_start or (log_end == source_start and latest_epoch is not None):
        # (at its start exactly: the source kept none of our last epoch, so nothing can be
        # compared; the source dropped what we hold below too: start afresh where it starts)
        return OutOfRange(restart_at=source_start)
    if log_end > source_end:
        if latest_epoch is None:
            return OutOfRange(diverged_epoch=-1, fallback=source_end)
        return OutOfRange(diverged_epoch=latest_epoch, fallback=source_end)
    if latest_epoch is not None and log_end > source_start:
        # Our end is inside the source's range, yet out of range: the source no longer knows
        # our last epoch (an unclean election below our end, then retention past that epoch's
        # start; Kafka answers OUT_OF_RANGE for an undefined epoch). Retrying the same fetch
        # would never end: where the source knows the epoch, cut at its end of it; where it
        # does not, what we hold from its log start on is from a history it no longer has.
        return OutOfRange(diverged_epoch=latest_epoch, fallback=source_start)
    return OutOfRange(
        retry=f"offset {log_end} out of range at the source [{source_start}, {source_end}]; "
        "retrying"
    )
