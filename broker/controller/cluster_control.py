"""Broker registrations, heartbeats and sessions on the active controller (Kafka's
ClusterControlManager, BrokerHeartbeatManager and the broker half of ReplicationControlManager).

Registrations live in the metadata log (RegisterBrokerRecord, Fence/UnfenceBrokerRecord,
BrokerRegistrationChangeRecord) and so in the image; sessions (when each broker last heartbeated,
the metadata offset it reported, where its controlled shutdown started) are soft state of the
active controller only. A controller that becomes active gives every registered broker a fresh
session (``became_active``), so a failover does not fence the whole cluster at once.

- register: the broker epoch is the offset of the RegisterBrokerRecord; a new registration starts
  fenced. Another incarnation of an id whose session is live (heartbeat within
  ``broker.session.timeout.ms``) and which is active gets DUPLICATE_BROKER_REGISTRATION; the
  same incarnation registering again keeps its epoch and state (KAFKA-16952). A new incarnation
  leaves every ISR (but the last member of an ISR stays) and leads nothing: its log may be behind
  what the ISR promised (a restart after kill -9 loses what was not flushed), and it rejoins the
  ISR through the leader once caught up. For a registration that was never fenced this is what
  the expiry of the old session would have done; for a fenced one it also catches an ISR that
  still names it.
- heartbeat: unknown broker or another epoch -> STALE_BROKER_EPOCH (Kafka answers both so).
  Then Kafka's state machine: FENCED -> UNFENCED once the broker does not want fencing and has
  reached the offset of its RegisterBrokerRecord; UNFENCED + WantShutDown -> CONTROLLED_SHUTDOWN
  while it leads partitions (leadership moved away), SHUTDOWN_NOW when it leads none and every
  active broker has seen the records that moved it; WantFence or SHUTDOWN_NOW fence it.
- caught up after a fencing for silence: the broker must report the offset of the records
  that fenced it, not just its RegisterBrokerRecord's: one whose heartbeats still arrive but
  which hears nothing (a one-way cut) reports a metadata offset from before the cut, and
  unfencing it would put it back in ISRs and under leaderships it cannot serve. So too every
  broker already fenced when this controller became active, up to the offset it had then.
- expire_sessions: an unfenced broker silent for longer than the session timeout is fenced, one
  broker per commit so each fencing's elections see the previous ones, each only while
  ``may_act`` (the quorum confirms this node still leads). Time this controller's own loop did
  not run is not the brokers' silence: ``discount`` moves every session's last contact forward by
  that long (their heartbeats waited unread in its sockets meanwhile).

Fencing, controlled shutdown and unfencing move partition leadership through
``partition_change`` (another in-sync replica, or no leader: a one-replica partition goes
offline until its broker is back; or, where ``unclean.leader.election.enable`` allows, an active
replica outside the ISR).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from protocol.metadata_records import latest_type

from ..metadata.image import BrokerImage, MetadataImage
from .partition_change import (
    CLEAN_ONLY,
    UncleanElection,
    leader_and_isr_changes,
    leaderless,
    leads_any,
    partitions_with,
)

log = logging.getLogger(__name__)

RegisterBrokerRecord = latest_type("RegisterBrokerRecord")
FenceBrokerRecord = latest_type("FenceBrokerRecord")
UnfenceBrokerRecord = latest_type("UnfenceBrokerRecord")
BrokerRegistrationChangeRecord = latest_type("BrokerRegistrationChangeRecord")
UnregisterBrokerRecord = latest_type("UnregisterBrokerRecord")
_BrokerEndpoint = sys.modules[RegisterBrokerRecord.__module__].BrokerEndpoint
_BrokerFeature = sys.modules[RegisterBrokerRecord.__module__].BrokerFeature

# (listener name, host, port, security protocol id)
Endpoint = tuple[str, str, int, int]


class ControllerCore(Protocol):
    """What this needs of ``Controller``: its lock, the image it validates against, commit."""

    @property
    def lock(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    def current_image(self) -> MetadataImage: ...

    async def commit(self, records: Sequence[Any]) -> int:
        """Commit and apply ``records``; the offset of the last one."""
        ...


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shutdown: bool = False


class _State(enum.Enum):
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled shutdown"
    SHUTDOWN_NOW = "shutdown now"


@dataclass(slots=True)
class _Session:
    epoch: int  # the registration this session belongs to
    last_contact_ms: int
    metadata_offset: int = -1
    # offset of the last record of the heartbeat that began the controlled shutdown; -1: none
    shutdown_offset: int = -1


class ClusterControl:
    def __init__(
        self,
        core: ControllerCore,
        cluster_id: str,
        session_timeout_ms: int,
        next_offset: Callable[[], int] | None = None,
        unclean: UncleanElection = CLEAN_ONLY,
        silent_for: Callable[[int], int | None] = lambda _node: None,
    ) -> None:
        """``next_offset``: the offset the next appended record gets (the quorum's log end
        offset, Kafka's nextWriteOffset); without it, one past the last offset known here.
        ``unclean``: which topics may elect a leader from outside the ISR. ``silent_for``:
        milliseconds since a node last answered this one's quorum requests (None: unknown),
        the evidence of life a new controller has of the previous one (``became_active``)."""
        self._core = core
        self._unclean = unclean
        self._cluster_id = cluster_id
        self._timeout_ms = session_timeout_ms
        self._next_offset = next_offset
        self._silent_for = silent_for
        self._last_offset = -1  # of the last commit made here
        self._sessions: dict[int, _Session] = {}
        # broker id -> (its epoch, the metadata offset it must report to count as caught up,
        # beyond its registration): set when it was fenced for silence (see above)
        self._fenced_at: dict[int, tuple[int, int]] = {}

    # -- activation ----------------------------------------------------------------------

    def became_active(self, now_ms: int) -> None:
        """This node now leads the quorum: every registered broker gets a fresh session and no
        controlled shutdown is in progress (the soft state of the previous controller is lost).

        A fresh session counts from the last evidence that the broker's node was alive when
        there is some (it answered this node's quorum requests: the previous leader, whose
        silence is what elected this one), but never less than half a session from now, so a
        live node still has time to find this controller; else from now. Counting the previous
        leader's silence from the election instead fenced it only after the election plus a
        whole session (issue 31)."""
        img = self._core.current_image()
        self._sessions = {
            b.broker_id: _Session(b.epoch, self._session_start(b.broker_id, now_ms))
            for b in img.brokers.values()
        }
        self._fenced_at = {
            b.broker_id: (b.epoch, img.offset) for b in img.brokers.values() if b.fenced
        }

    # -- registration --------------------------------------------------------------------

    async def register(
        self,
        broker_id: int,
        cluster_id: str,
        incarnation_id: uuid.UUID,
        endpoints: Sequence[Endpoint],
        rack: str | None,
        features: Mapping[str, tuple[int, int]],
        now_ms: int,
    ) -> tuple[ErrorCode, int]:
        """Register a broker process; (error, broker epoch). ``features``: name -> supported
        (min, max) levels."""
        if cluster_id != self._cluster_id:
            log.info(
                "broker %d registering for cluster %s, this is cluster %s",
                broker_id,
                cluster_id,
                self._cluster_id,
            )
            return ErrorCode.inconsistent_cluster_id, -1
        async with self._core.lock:
            img = self._core.current_image()
            old = img.brokers.get(broker_id)
            same = old is not None and old.incarnation_id == incarnation_id
            if old is not None and not same and self._has_live_session(old, now_ms):
                log.info(
                    "broker %d: incarnation %s refused, incarnation %s has a live session",
                    broker_id,
                    incarnation_id,
                    old.incarnation_id,
                )
                return ErrorCode.duplicate_broker_registration, -1
            why = unsupported_feature(img.features, features)
            if why is not None:
                log.info("broker %d cannot register: %s", broker_id, why)
                return ErrorCode.unsupported_version, -1
            if same:
                assert old is not None
                epoch, fenced, in_shutdown = old.epoch, old.fenced, old.in_controlled_shutdown
            else:
                epoch, fenced, in_shutdown = self._next_write_offset(img), True, False
            records: list[Any] = [
                RegisterBrokerRecord(
                    broker_id=broker_id,
                    incarnation_id=incarnation_id,
                    broker_epoch=epoch,
                    end_points=tuple(
                        _BrokerEndpoint(name=n, host=h, port=p, security_protocol=sp)
                        for n, h, p, sp in endpoints
                    ),
                    features=tuple(
                        _BrokerFeature(
                            name=name, min_supported_version=lo, max_supported_version=hi
                        )
                        for name, (lo, hi) in sorted(features.items())
                    ),
                    rack=rack,
                    fenced=fenced,
                    in_controlled_shutdown=in_shutdown,
                )
            ]
            if old is not None and not same:
                # a new process: out of every ISR it may no longer match, and leads nothing
                records += leader_and_isr_changes(
                    img, partitions_with(img, broker_id), remove=broker_id, unclean=self._unclean
                )
            last = await self._commit(records)
            first = last - len(records) + 1
            if not same and first != epoch:
                log.warning(
                    "broker %d: RegisterBrokerRecord landed at offset %d, epoch %d was predicted",
                    broker_id,
                    first,
                    epoch,
                )
            session = self._sessions.get(broker_id)
            if same and session is not None and session.epoch == epoch:
                session.last_contact_ms = now_ms
            else:
                self._sessions[broker_id] = _Session(epoch, now_ms)
            log.info(
                "broker %d %s (incarnation %s, epoch %d)",
                broker_id,
                "amended its registration" if same else "registered",
                incarnation_id,
                epoch,
            )
            return ErrorCode.none, epoch

    async def unregister(self, broker_id: int) -> tuple[ErrorCode, str | None]:
        """UnregisterBroker (KIP-500 decommissioning), as Kafka's controller does it: the broker
        leaves every ISR (leaders it had are re-elected) and its registration is removed. A
        broker still running finds its epoch stale on its next heartbeat and registers again,
        as in Kafka: stop it first. (error, message)."""
        async with self._core.lock:
            img = self._core.current_image()
            b = img.brokers.get(broker_id)
            if b is None:
                return (
                    ErrorCode.broker_id_not_registered,
                    f"Broker ID {broker_id} is not currently registered",
                )
            records = leader_and_isr_changes(
                img, partitions_with(img, broker_id), remove=broker_id, unclean=self._unclean
            )
            records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=b.epoch))
            await self._commit(records)
            self._sessions.pop(broker_id, None)
            log.info("broker %d unregistered (epoch %d)", broker_id, b.epoch)
            return ErrorCode.none, None

    # -- heartbeats ----------------------------------------------------------------------

    async def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shutdown: bool,
        now_ms: int,
    ) -> HeartbeatResult:
        async with self._core.lock:
            img = self._core.current_image()
            b = img.brokers.get(broker_id)
            if b is None or b.epoch != broker_epoch:
                return HeartbeatResult(ErrorCode.stale_broker_epoch)
            session = self._session(b, now_ms)
            registered_at = b.registered_offset if b.registered_offset >= 0 else b.epoch
            caught_up = current_metadata_offset >= max(registered_at, self._fenced_offset(b))
            current = self._state_of(b, session)
            after = self._next_state(current, img, b, session, caught_up, want_fence, want_shutdown)
            records: list[Any] = []
            if after is not current:
                log.info("broker %d: %s -> %s", broker_id, current.value, after.value)
                if after in (_State.FENCED, _State.SHUTDOWN_NOW):
                    if not b.fenced:
                        records = _fence_records(img, b, self._unclean)
                elif after is _State.UNFENCED:
                    records = _unfence_records(img, b, self._unclean)
                else:
                    records = _controlled_shutdown_records(img, b, self._unclean)
            elif after is _State.CONTROLLED_SHUTDOWN and leads_any(img, broker_id):
                # a partition placed on it since (the placement did not skip it): move it too
                records = _controlled_shutdown_records(img, b, self._unclean)
            last = await self._commit(records) if records else self._known_end(img)
            session.last_contact_ms = now_ms
            session.metadata_offset = current_metadata_offset
            if after in (_State.FENCED, _State.SHUTDOWN_NOW):
                session.shutdown_offset = -1
            elif after is _State.CONTROLLED_SHUTDOWN and session.shutdown_offset < 0:
                session.shutdown_offset = last
            return HeartbeatResult(
                ErrorCode.none,
                is_caught_up=caught_up,
                is_fenced=after in (_State.FENCED, _State.SHUTDOWN_NOW),
                should_shutdown=after is _State.SHUTDOWN_NOW,
            )

    def _next_state(
        self,
        current: _State,
        img: MetadataImage,
        b: BrokerImage,
        session: _Session,
        caught_up: bool,
        want_fence: bool,
        want_shutdown: bool,
    ) -> _State:
        if current is _State.FENCED:
            if want_shutdown:
                return _State.SHUTDOWN_NOW
            if not want_fence and caught_up:
                return _State.UNFENCED
            return _State.FENCED
        if current is _State.UNFENCED:
            if want_fence:
                return _State.SHUTDOWN_NOW if want_shutdown else _State.FENCED
            if want_shutdown:
                if leads_any(img, b.broker_id):
                    return _State.CONTROLLED_SHUTDOWN
                return _State.SHUTDOWN_NOW
            return _State.UNFENCED
        # in controlled shutdown: done once it leads nothing and every active broker has
        # reached the records that took its leadership away
        if leads_any(img, b.broker_id):
            return _State.CONTROLLED_SHUTDOWN
        if session.shutdown_offset <= self._lowest_active_offset(img, b.broker_id):
            return _State.SHUTDOWN_NOW
        return _State.CONTROLLED_SHUTDOWN

    def _lowest_active_offset(self, img: MetadataImage, except_id: int) -> int:
        lowest: int | None = None
        for other in img.brokers.values():
            if other.broker_id == except_id or other.fenced or other.in_controlled_shutdown:
                continue
            s = self._sessions.get(other.broker_id)
            if s is not None and s.shutdown_offset >= 0:
                continue  # shutting down as well
            offset = s.metadata_offset if s is not None and s.epoch == other.epoch else -1
            lowest = offset if lowest is None else min(lowest, offset)
        return sys.maxsize if lowest is None else lowest

    # -- sessions ------------------------------------------------------------------------

    def discount(self, stalled_ms: int, now_ms: int) -> None:
        """This controller's loop did not run for ``stalled_ms``: that long is no broker's
        silence (a session's last contact moves forward by it, to ``now_ms`` at most)."""
        for s in self._sessions.values():
            s.last_contact_ms = min(now_ms, s.last_contact_ms + stalled_ms)

    async def expire_sessions(
        self, now_ms: int, may_act: Callable[[], bool] = lambda: True
    ) -> None:
        """Fence every unfenced broker whose session has expired, one commit per broker; before
        each, ``may_act`` (False: this node may no longer lead, act on nothing)."""
        for _ in range(len(self._core.current_image().brokers)):
            async with self._core.lock:
                if not may_act():
                    return
                img = self._core.current_image()
                stale = next(
                    (b for b in img.brokers.values() if self._expired(b, now_ms)),
                    None,
                )
                if stale is None:
                    return
                log.info(
                    "fencing broker %d: no heartbeat for more than %d ms",
                    stale.broker_id,
                    self._timeout_ms,
                )
                last = await self._commit(_fence_records(img, stale, self._unclean))
                self._fenced_at[stale.broker_id] = (stale.epoch, last)
                self._sessions.pop(stale.broker_id, None)

    def _expired(self, b: BrokerImage, now_ms: int) -> bool:
        if b.fenced:
            return False
        return self._session(b, now_ms).last_contact_ms + self._timeout_ms < now_ms

    def _session_start(self, broker_id: int, now_ms: int) -> int:
        silent = self._silent_for(broker_id)
        if silent is None:
            return now_ms
        return now_ms - min(max(0, silent), self._timeout_ms // 2)

    def _fenced_offset(self, b: BrokerImage) -> int:
        """The offset ``b`` must have applied to be unfenced, beyond its registration."""
        epoch, offset = self._fenced_at.get(b.broker_id, (-1, -1))
        return offset if epoch == b.epoch else -1

    def _has_live_session(self, b: BrokerImage, now_ms: int) -> bool:
        """Kafka 4.1's test for refusing another incarnation: a heartbeat within the session
        timeout, from a broker that is neither fenced nor in controlled shutdown."""
        if b.fenced or b.in_controlled_shutdown:
            return False
        s = self._sessions.get(b.broker_id)
        return (
            s is not None and s.epoch == b.epoch and s.last_contact_ms + self._timeout_ms >= now_ms
        )

    def _session(self, b: BrokerImage, now_ms: int) -> _Session:
        """The session of ``b``'s registration; a fresh one when none is known (a broker this
        controller has not heard from yet is given a full session timeout)."""
        s = self._sessions.get(b.broker_id)
        if s is None or s.epoch != b.epoch:
            s = self._sessions[b.broker_id] = _Session(b.epoch, now_ms)
        return s

    @staticmethod
    def _state_of(b: BrokerImage, s: _Session) -> _State:
        if b.fenced:
            return _State.FENCED
        if s.shutdown_offset >= 0:
            return _State.CONTROLLED_SHUTDOWN
        return _State.UNFENCED

    # -- offsets -------------------------------------------------------------------------

    def _known_end(self, img: MetadataImage) -> int:
        """The offset of the last record written, as far as this controller knows."""
        if self._next_offset is not None:
            return self._next_offset() - 1
        return max(img.offset, self._last_offset)

    def _next_write_offset(self, img: MetadataImage) -> int:
        return self._known_end(img) + 1

    async def _commit(self, records: Sequence[Any]) -> int:
        last = await self._core.commit(records)
        self._last_offset = max(self._last_offset, last)
        return last


def unsupported_feature(
    finalized: Mapping[str, int], supported: Mapping[str, tuple[int, int]]
) -> str | None:
    """Why a broker supporting ``supported`` cannot join a cluster at ``finalized`` levels, or
    None. A feature the broker does not list counts as supported at level 0 only."""
    for name, level in sorted(finalized.items()):
        lo, hi = supported.get(name, (0, 0))
        if not lo <= level <= hi:
            return (
                f"the broker does not support version {level} of {name}: it wants a version "
                f"between {lo} and {hi}, inclusive"
            )
    return None


def _fence_records(img: MetadataImage, b: BrokerImage, unclean: UncleanElection) -> list[Any]:
    records = leader_and_isr_changes(
        img, partitions_with(img, b.broker_id), remove=b.broker_id, unclean=unclean
    )
    records.append(FenceBrokerRecord(id=b.broker_id, epoch=b.epoch))
    return records


def _unfence_records(img: MetadataImage, b: BrokerImage, unclean: UncleanElection) -> list[Any]:
    records: list[Any] = [UnfenceBrokerRecord(id=b.broker_id, epoch=b.epoch)]
    return records + leader_and_isr_changes(img, leaderless(img), add=b.broker_id, unclean=unclean)


def _controlled_shutdown_records(
    img: MetadataImage, b: BrokerImage, unclean: UncleanElection
) -> list[Any]:
    records: list[Any] = []
    if not b.in_controlled_shutdown:
        records.append(
            BrokerRegistrationChangeRecord(
                broker_id=b.broker_id, broker_epoch=b.epoch, in_controlled_shutdown=1
            )
        )
    return records + leader_and_isr_changes(
        img, partitions_with(img, b.broker_id), remove=b.broker_id, unclean=unclean
    )
