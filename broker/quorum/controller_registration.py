"""A controller tells the active controller where it listens: ControllerRegistration (70).

Kafka's controllers register with the active controller at start and again whenever a new one
is elected, so it knows every controller's endpoints (voters or not: a controller waiting to
be added with ``add-controller`` too). Here each new leader hears it once from every other
controller, through the controller channel (which follows the leader and retries); the leader
keeps the registrations (``broker/api/raft_voters.py``).

A voter whose endpoints in the Voters record are not the ones it listens on now (it moved, or
``--initial-controllers`` named another address) then sends UpdateRaftVoter (82), as Kafka's
voters do, so the others reach it where it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

CONTROLLER_REGISTRATION, UPDATE_RAFT_VOTER = 70, 82
# (listener name, host, port, security protocol id)
ControllerListener = tuple[str, str, int, int]
Send = Callable[[int, dict[str, Any]], Awaitable[Any]]


class ControllerRegistrar:
    def __init__(
        self,
        node_id: int,
        listeners: Sequence[ControllerListener],
        send: Send,
        voter_update: Callable[[], dict[str, Any] | None] = lambda: None,
    ) -> None:
        self.node_id = node_id
        self._voter_update = voter_update
        self.incarnation_id = uuid.uuid4()  # one per process, as Kafka's
        self.listeners = list(listeners)
        self._send = send
        self._task: asyncio.Task[None] | None = None
        self.registered_with: int = -1  # the leader that accepted it last

    def on_leader_change(self, leader_id: int, epoch: int) -> None:
        if leader_id < 0 or leader_id == self.node_id or not self.listeners:
            return
        if self._task is not None:
            self._task.cancel()
        self._task = asyncio.get_running_loop().create_task(self._register(leader_id))

    def body(self) -> dict[str, Any]:
        return {
            "controller_id": self.node_id,
            "incarnation_id": self.incarnation_id,
            "zk_migration_ready": False,
            "listeners": [
                {"name": n, "host": h, "port": p, "security_protocol": sp}
                for n, h, p, sp in self.listeners
            ],
            "features": [{"name": "kraft.version", "min_supported_version": 0,
                          "max_supported_version": 1}],
        }  # fmt: skip

    async def _register(self, leader_id: int) -> None:
        try:
            resp = await self._send(CONTROLLER_REGISTRATION, self.body())
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the next leader change tries again
            log.info("controller registration with controller %d failed: %s", leader_id, e)
            return
        code = int(getattr(resp, "error_code", 0))
        if code == 0:
            self.registered_with = leader_id
            log.info("controller %d registered with the active controller", self.node_id)
        else:
            log.info("controller registration refused: error %d", code)
        update = self._voter_update()
        if update is None:
            return
        try:
            resp = await self._send(UPDATE_RAFT_VOTER, update)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("UpdateRaftVoter to controller %d failed: %s", leader_id, e)
            return
        code = int(getattr(resp, "error_code", 0))
        log.info(
            "voter %d: endpoints updated in the voter set%s",
            self.node_id,
            "" if code == 0 else f" failed: error {code} (tried again at the next leader)",
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
