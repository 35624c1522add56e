"""The work of each transition of a mirrored partition (KIP-1279), in order: `plan` says which
steps a transition takes; the manager carries each out and stops where a step cannot complete
yet (the source unreachable, replicas still truncating), leaving the partition where it was to
be tried again.

- PREPARING -> MIRRORING: the cluster-id guard, the LME truncation (failback: local epochs the
  source never mirrored from us go), the wait for the other replicas to truncate too, then the
  write, then the fetcher.
- -> STOPPING (failover): the fetcher stops, the log is cut to its last stable offset, the epoch
  bump starts (never before the cut: every epoch the bump must exceed is then in the log), and
  STOPPING is written with the last mirrored epoch.
- STOPPING -> STOPPED: the bump committed and applied (after a restart in STOPPING, or on a
  new leader, the first half again: stop, cut, the LME from STOPPING's write, the bump if still
  due), the MIRROR_PID_RESET marker, the wait until the marker is committed (the HW past it),
  the write, then ``mirror.name`` cleared once the whole topic is STOPPED. STOPPED is never
  written before the marker is committed: a leader change in between would lose an
  uncommitted marker, and STOPPED (terminal) would leave the partition writable without it.
  Leadership moving before the commit leaves STOPPING, so the new leader does it all again
  (its LSO cut, bounded by its HW, drops any uncommitted marker it holds). The same leader
  retrying after a wait ran out (``marker_pending``) only waits again.
- PAUSING/-> PAUSED: the write, then the fetcher stops; PAUSED -> MIRRORING: the write, then the
  fetcher starts.
"""

from __future__ import annotations

import enum

from ...metadata.mirror_states import MirrorState


class Step(enum.Enum):
    CHECK_SOURCE = "check the source's cluster id"
    LME_TRUNCATE = "truncate to the last mirrored epoch"
    AWAIT_REPLICAS = "wait for the replicas to truncate"
    STOP_FETCHER = "stop the fetcher"
    LSO_TRUNCATE = "truncate to the last stable offset"
    START_BUMP = "start the leader epoch bump"
    RECORD_LME = "record the last mirrored epoch"  # a restart in STOPPING
    FINISH_BUMP = "the bump committed and applied here"
    APPEND_MARKER = "append MIRROR_PID_RESET"
    AWAIT_MARKER = "wait until the marker is committed"
    WRITE_STATE = "write the new state"
    START_FETCHER = "start the fetcher"
    CLEAR_NAME = "clear mirror.name once the topic is STOPPED"


S = MirrorState


def plan(
    current: MirrorState,
    new: MirrorState,
    wanted: MirrorState,
    *,
    bump_started: bool = False,
    marker_pending: bool = False,
) -> tuple[Step, ...]:
    """The steps from ``current`` into ``new`` while ``wanted`` is the goal; ``bump_started``:
    this leader started STOPPING's bump itself (not a restart or a new leader in STOPPING);
    ``marker_pending``: this leader, in its current epoch, appended the marker already and its
    commit was not seen yet."""
    steps: list[Step] = []
    if current == S.STOPPING and new == S.STOPPED:
        if marker_pending:
            steps += [Step.AWAIT_MARKER]
        else:
            if not bump_started:
                steps += [Step.STOP_FETCHER, Step.LSO_TRUNCATE, Step.RECORD_LME]
            steps += [Step.FINISH_BUMP, Step.APPEND_MARKER, Step.AWAIT_MARKER]
    if current == S.PREPARING and new == S.MIRRORING:
        steps += [Step.CHECK_SOURCE, Step.LME_TRUNCATE, Step.AWAIT_REPLICAS]
    if new == S.STOPPING:
        steps += [Step.STOP_FETCHER, Step.LSO_TRUNCATE, Step.START_BUMP]
    steps.append(Step.WRITE_STATE)
    if new == S.MIRRORING and wanted == S.MIRRORING:
        steps.append(Step.START_FETCHER)
    elif new in (S.PAUSED, S.STOPPING):
        steps.append(Step.STOP_FETCHER)
    elif new == S.STOPPED:
        steps.append(Step.CLEAR_NAME)
    return tuple(steps)
