"""What the active controller does unasked.

On becoming active (this node won the quorum's election): every registered broker gets a fresh
session, so a failover does not fence the whole cluster at once, and the finalized feature
levels (``metadata.version``) the log does not hold yet are written. While active: every
``interval_s`` the brokers whose sessions expired are fenced, and (``auto.leader.rebalance.enable``)
the leader balance gets its tick (`elections.LeaderBalance`). Losing the leadership meanwhile
(`NotLeaderError`) is no failure: the next active controller does the same.

Acting on a timer is acting on time that passed, and a controller whose loop stalled (or whose
process was stopped) may have been deposed while it did not run: it acts only once the quorum
confirms it still leads (``leadership_confirmed``), and the stall's length is no broker's
silence (``ClusterControl.discount``). After a stall the quorum confirms it only once an entry
appended since has committed: the duties append a NoOpRecord for that when nothing else was
(Raft's way for a leader to learn it still leads: a deposed one's entry never commits).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from protocol.metadata_records import latest_type

from ..quorum.driver import NotLeaderError
from .cluster_control import ClusterControl
from .controller import Controller
from .elections import LeaderBalance

log = logging.getLogger(__name__)

NoOpRecord = latest_type("NoOpRecord")


class ActiveControllerDuties:
    def __init__(
        self,
        node_id: int,
        controller: Controller,
        cluster_control: ClusterControl,
        is_active: Callable[[], bool],
        feature_levels: Mapping[str, int],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        now_ms: Callable[[], int],
        interval_s: float,
        leader_balance: LeaderBalance | None = None,
        bootstrap: Sequence[Any] = (),
        *,
        leadership_confirmed: Callable[[], bool] | None = None,
        stalled_ms: Callable[[], int] = lambda: 0,
        confirm_needs_append: Callable[[], bool] = lambda: False,
    ) -> None:
        """``leadership_confirmed``: whether the quorum confirms this node still leads (default
        ``is_active``); ``stalled_ms``: how long this node's loop has not run in all, so far
        (`StallWatch`, read after a look); ``confirm_needs_append``: whether only an entry
        appended now, once committed, can confirm the leadership."""
        self._node_id = node_id
        self._controller = controller
        self._cluster_control = cluster_control
        self._is_active = is_active
        self._feature_levels = dict(feature_levels)
        self._spawn = spawn
        self._now_ms = now_ms  # monotonic: sessions are not measured on wall time
        self._interval_s = interval_s
        self._leader_balance = leader_balance
        self._bootstrap = tuple(bootstrap)  # bootstrap.checkpoint's records (a fresh cluster)
        self._confirmed = leadership_confirmed if leadership_confirmed is not None else is_active
        self._stalled_ms = stalled_ms
        self._stalled_seen = stalled_ms()
        self._confirm_needs_append = confirm_needs_append

    def on_leader_change(self, leader_id: int, epoch: int) -> None:
        """The quorum's leader-change listener."""
        if leader_id == self._node_id:
            self._stalled_seen = self._stalled_ms()  # fresh sessions: nothing to discount
            self._cluster_control.became_active(self._now_ms())
            if self._leader_balance is not None:
                self._leader_balance.became_active(self._now_ms())
            self._spawn(self._finalize_features())

    async def _finalize_features(self) -> None:
        with contextlib.suppress(NotLeaderError):
            await self._controller.finalize_features(self._feature_levels, self._bootstrap)

    async def run(self) -> None:
        """Fence brokers whose sessions expired, while this node is the active controller."""
        while True:
            await asyncio.sleep(self._interval_s)
            if not self._is_active():
                continue
            self._discount_stalls()
            if not self._confirmed():
                log.debug("controller: leadership not confirmed, timed duties wait")
                await self._reconfirm()
                continue
            try:
                await self._cluster_control.expire_sessions(self._now_ms(), self._may_act)
            except NotLeaderError:
                pass
            except Exception:
                log.exception("controller: expiring broker sessions failed")
            if self._leader_balance is None or not self._may_act():
                continue
            try:
                await self._leader_balance.tick(self._now_ms())
            except NotLeaderError:
                pass
            except Exception:
                log.exception("controller: leader balance failed")

    def _discount_stalls(self) -> None:
        stalled = self._stalled_ms()
        if stalled > self._stalled_seen:
            self._cluster_control.discount(stalled - self._stalled_seen, self._now_ms())
            self._stalled_seen = stalled

    def _may_act(self) -> bool:
        """Just before an action: no stall since the last look went undiscounted, and the
        quorum still confirms this node leads."""
        self._discount_stalls()
        return self._confirmed()

    async def _reconfirm(self) -> None:
        """After a stall: append a NoOpRecord, whose commit confirms the leadership again (or
        ends in NotLeaderError, the leadership lost)."""
        if not self._confirm_needs_append():
            return
        try:
            async with self._controller.lock:
                await self._controller.commit([NoOpRecord()])
        except NotLeaderError:
            pass
        except Exception:
            log.exception("controller: confirming the leadership failed")
