"""Failover of a mirrored partition (KIP-1279), in two halves. Entering STOPPING: the fetcher
stops, the leader's HW is trusted (`core.truncation.leader_hw_ready`: on a new leader, not before
it reaches the start of its epoch), the log is cut to its last stable offset, and the leader
epoch bump above every mirrored
epoch starts. STOPPING to STOPPED: the bump committed and applied here, then the
MIRROR_PID_RESET control batch, committed (the HW past it) before STOPPED is written: STOPPED
is terminal, so a marker lost with a leader change after it would never be written again.
Once every partition of the topic is STOPPED its ``mirror.name`` is cleared.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.records import build_mirror_pid_reset

from ..log.validation import AppendOrigin
from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG, REMOVED_SUFFIX, MirrorState
from .core import truncation
from .core.states import PartitionInfo
from .manager_interfaces import Key, StateStore

# The name the code logged under before manager.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.manager")

# How long STOPPING waits for this node's metadata to show the bumped leader epoch.
EPOCH_APPLY_WAIT_S = 10.0
EPOCH_RECHECK_S = 0.25
# How long one STOPPING -> STOPPED attempt waits for the marker to be committed; the next
# reconcile waits again (the followers fetch it within replica.fetch.wait.max.ms, or leave the
# ISR after replica.lag.time.max.ms, either way the HW passes it).
MARKER_COMMIT_WAIT_S = 5.0
# How long one attempt waits for a new leader's HW to reach its epoch's start offset before a
# cut; the next reconcile waits again (as for the marker: the followers fetch in the new epoch,
# or leave the ISR).
LEADER_HW_WAIT_S = 5.0


class Failover:
    """STOPPING's steps (`core.transitions` orders them; `core.truncation` says where to cut and
    which epoch to ask for) and clearing ``mirror.name`` after."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        states: StateStore,
        info: Mapping[Key, PartitionInfo],
        *,
        bump_leader_epoch: Callable[[str, int, int], Awaitable[None]],
        clear_mirror_name: Callable[[str], Awaitable[None]],
        source_cluster_id: Callable[[str], Awaitable[str | None]],
        now_ms: Callable[[], int],
        monotonic: Callable[[], float],
    ) -> None:
        self._image = image
        self._states = states
        self._info = info  # the manager's partitions (read: is the whole topic STOPPED)
        self._bump = bump_leader_epoch
        self._clear = clear_mirror_name
        self._source_cluster_id = source_cluster_id
        self._now_ms = now_ms
        self._monotonic = monotonic
        # epoch bumps started on entering STOPPING, awaited before the marker is written
        self._bumping: dict[Key, asyncio.Task[None]] = {}
        # bumps waiting for this node to apply the new epoch, woken by `epoch_applied`
        self._epoch_waiters: dict[Key, list[asyncio.Future[None]]] = {}
        # MIRROR_PID_RESET markers appended and not yet seen committed: (the leader epoch they
        # were appended in, one past their offset); STOPPED waits for them
        self._markers: dict[Key, tuple[int, int]] = {}

    def bump_started(self, key: Key) -> bool:
        """This leader started STOPPING's bump itself (not a restart or a new leader)."""
        return key in self._bumping

    def cancel_bump(self, key: Key) -> None:
        """This node no longer leads ``key``: the new leader bumps for itself (and redoes
        STOPPING, marker included)."""
        bump = self._bumping.pop(key, None)
        if bump is not None:
            bump.cancel()
        self._markers.pop(key, None)

    def epoch_applied(self, key: Key) -> None:
        """A metadata change named the partition: a bump waiting for its epoch looks again."""
        for woken in self._epoch_waiters.get(key, ()):
            if not woken.done():
                woken.set_result(None)

    def close(self) -> None:
        for task in self._bumping.values():
            task.cancel()
        self._bumping.clear()

    async def await_leader_hw(self, key: Key, info: PartitionInfo, hosted: Any) -> bool:
        """Before a cut decided from the HW: until the leader's HW is trusted (bounded: False
        leaves the partition where it was, to wait again on the next reconcile). A new leader
        starts with the HW it had as a follower, which can lag the old leader's: an LSO taken
        from it would cut committed records, a committed MIRROR_PID_RESET marker too."""
        state = hosted.leader
        start, end = state.epoch_start_offset, hosted.log.log_end_offset
        if truncation.leader_hw_ready(state.high_watermark, start, end):
            return True
        target = min(start, end)
        return await _committed(
            key,
            info,
            hosted,
            target,
            LEADER_HW_WAIT_S,
            f"waiting for the high watermark to reach {target}, where leader epoch "
            f"{hosted.leader_epoch} started, before truncating",
        )

    def truncate_to_lso(self, key: Key, info: PartitionInfo, hosted: Any) -> None:
        topic, partition = key
        plog = hosted.log
        lso = truncation.lso_cut(plog.log_end_offset, int(plog.last_stable_offset))
        if lso is not None:
            info.note = _warn_truncation(info.mirror, topic, partition, plog, lso)
            hosted.truncate_to(lso)  # the partition brings its HW down with the cut
            log.info("mirror %s: %s-%d truncated to LSO %d", info.mirror, topic, partition, lso)

    def start_bump(self, key: Key, hosted: Any) -> int | None:
        """Entering STOPPING, after the LSO cut: the bump starts (awaited in `finish_bump`).
        The last mirrored epoch returned is written with STOPPING, so a restart in STOPPING
        never takes the LME from a log that may already hold the local marker."""
        lme: int | None = hosted.log.latest_epoch
        self._markers.pop(key, None)  # a marker of an earlier failover is no longer awaited
        old = self._bumping.pop(key, None)
        if old is not None:
            old.cancel()
        self._bumping[key] = asyncio.get_running_loop().create_task(
            self._bump_above(key, hosted, lme)
        )
        return lme

    async def _bump_above(self, key: Key, hosted: Any, lme: int | None) -> None:
        """New local writes must carry an epoch above every mirrored one: through the
        controller, then until this node applied it (the marker carries it)."""
        target = truncation.bump_target(lme, hosted.leader_epoch)
        await self._bump(key[0], key[1], target)
        deadline = self._monotonic() + EPOCH_APPLY_WAIT_S
        # Woken by the metadata change that names the partition (polling every 10 ms was
        # 100 wake-ups a second for each of a failover's thousands of partitions); the
        # timeout is a backstop for a change applied without passing through `on_metadata`.
        while hosted.leader_epoch < target and (left := deadline - self._monotonic()) > 0:
            changed = asyncio.get_running_loop().create_future()
            waiters = self._epoch_waiters.setdefault(key, [])
            waiters.append(changed)
            try:
                await asyncio.wait_for(changed, min(left, EPOCH_RECHECK_S))
            except TimeoutError:
                pass
            finally:
                if changed in waiters:
                    waiters.remove(changed)
                if not waiters:
                    self._epoch_waiters.pop(key, None)

    async def record_lme(self, key: Key, info: PartitionInfo, hosted: Any) -> None:
        """STOPPING found at start-up or on a new leader: STOPPING's write carried the LME (the
        log may hold a local marker by now); written from the log if it did not."""
        if info.last_mirror_epoch is None:
            lme = hosted.log.latest_epoch
            if lme is not None:
                await self._states.write_last_mirror_epoch(info.mirror, info.topic_id, key[1], lme)
                info.last_mirror_epoch = lme

    async def finish_bump(self, key: Key, info: PartitionInfo, hosted: Any) -> None:
        """The bump this leader started, or (after a restart in STOPPING) the one still due."""
        bump = self._bumping.pop(key, None)
        if bump is not None:
            await bump
            return
        floor = truncation.redo_bump_floor(info.last_mirror_epoch, hosted.log.latest_epoch)
        if truncation.needs_bump(floor, hosted.leader_epoch):
            await self._bump_above(key, hosted, floor)

    async def append_marker(self, key: Key, info: PartitionInfo, hosted: Any) -> None:
        """STOPPED's MIRROR_PID_RESET, in the bumped epoch."""
        t0 = self._monotonic()
        source_id = await self._source_cluster_id(info.mirror) or ""
        marker = build_mirror_pid_reset(
            source_id,
            partition_leader_epoch=hosted.leader_epoch,
            timestamp=self._now_ms(),
        )
        appended = hosted.append_records(marker, origin=AppendOrigin.COORDINATOR)
        self._markers[key] = (hosted.leader_epoch, appended.last_offset + 1)
        log.debug(
            "mirror %s: %s-%d MIRROR_PID_RESET appended (source id in %.0f ms)",
            info.mirror,
            *key,
            (self._monotonic() - t0) * 1000,
        )

    def marker_pending(self, key: Key, hosted: Any) -> bool:
        """This leader appended the marker in its current epoch and it is still in the log (a
        leader's log changes only by its own hand): the retry waits for it again rather than
        appending another."""
        pending = self._markers.get(key)
        if pending is None:
            return False
        epoch, end = pending
        if epoch != hosted.leader_epoch or hosted.log.log_end_offset < end:
            del self._markers[key]
            return False
        return True

    async def await_marker(self, key: Key, info: PartitionInfo, hosted: Any) -> bool:
        """Until the marker is committed (bounded: False leaves the partition STOPPING, to
        wait again on the next reconcile, or to be done again by a new leader)."""
        pending = self._markers.get(key)
        if pending is None or pending[0] != hosted.leader_epoch:
            return False  # appended under another epoch: the plan appends a new one
        end = pending[1]
        waiting = (
            f"failover: waiting for the MIRROR_PID_RESET marker at offset {end - 1} to be committed"
        )
        if not await _committed(key, info, hosted, end, MARKER_COMMIT_WAIT_S, waiting):
            return False
        del self._markers[key]
        return True

    async def maybe_clear(self, topic: str, mirror: str) -> None:
        img = self._image()
        t = img.topics.get(topic)
        if t is None or not img.config(TOPIC_RESOURCE, topic).get(MIRROR_NAME_CONFIG, "").endswith(
            REMOVED_SUFFIX
        ):
            return
        if all(
            (i := self._info.get((topic, p))) is not None and i.state == MirrorState.STOPPED
            for p in t.partitions
        ):
            await self._clear(topic)


async def _committed(
    key: Key, info: PartitionInfo, hosted: Any, offset: int, timeout_s: float, waiting: str
) -> bool:
    """Until the leader's HW reaches ``offset`` (bounded). When it does not, ``waiting`` (what the
    partition waits for), the HW, the ISR and the error the wait ended with become its note."""
    error = await hosted.wait_committed(offset, timeout_s)
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND: the HW got there, the ISR shrank under the minimum
    if error in (ErrorCode.none, ErrorCode.not_enough_replicas_after_append):
        return True
    leader = hosted.leader
    info.note = (
        f"{waiting} (high watermark {leader.high_watermark}, ISR {sorted(leader.isr)}): "
        f"{error.name}"
    )
    log.info("mirror %s: %s-%d %s", info.mirror, *key, info.note)
    return False


def _warn_truncation(mirror: str, topic: str, partition: int, plog: Any, lso: int) -> str:
    """Failover is about to delete the records past the LSO: say which transaction holds it
    there (at WARN, and returned for --describe), so an operator can tell a transaction the
    source never ended from one whose marker could not be read."""
    psm = getattr(plog, "producer_state", None)
    ongoing = psm.ongoing_transactions() if psm is not None else []
    what = f"truncating {topic}-{partition} from {plog.log_end_offset} to LSO {lso}"
    if ongoing:
        oldest, more = ongoing[0], len(ongoing) - 1
        what += f": transaction of producer {oldest.producer_id} open since {oldest.first_offset}"
        if more:
            what += f" (and {more} more open transaction(s))"
    log.warning("mirror %s: %s", mirror, what)
    return f"failover: {what}"
