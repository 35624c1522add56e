"""KIP-853's quorum reconfiguration RPCs: AddRaftVoter (80) v0-1, RemoveRaftVoter (81) v0,
UpdateRaftVoter (82) v0, and ControllerRegistration (70) v0.

Served on controller listeners (``listener_apis.py``). The quorum leader decides (the rules
and errors are the Raft core's, ``broker/raft/reconfig.py``: one change at a time, the new
voter caught up, DUPLICATE_VOTER, VOTER_NOT_FOUND, REQUEST_TIMED_OUT...); any other node
answers NOT_LEADER_OR_FOLLOWER. Add and Remove are answered once the new Voters record is
committed (AddRaftVoter v1 with AckWhenCommitted false: once it is appended). A ClusterId that
is not this cluster's is INCONSISTENT_CLUSTER_ID.

Authorization as Kafka's ControllerApis: ALTER on the cluster for AddRaftVoter and
RemoveRaftVoter (an operator's tool sends them), CLUSTER_ACTION for UpdateRaftVoter and
ControllerRegistration (controllers send them); CLUSTER_AUTHORIZATION_FAILED otherwise.

ControllerRegistration: the leader keeps each controller's listeners (``registrations``), so it
knows where every controller listens, voters and not; Kafka also writes them to the metadata
log as RegisterControllerRecord, which this node does not (see docs/operations.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..quorum.driver import QuorumDriver
from ..raft import messages as m
from ..raft.voter_set import VoterEndpoint, VoterEntry
from ..security.acls import AclOperation
from .authz import cluster_allowed
from .context import RequestContext
from .dispatcher import Api

ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER, CONTROLLER_REGISTRATION = 80, 81, 82, 70
DEFAULT_TIMEOUT_MS = 30_000
NOT_CONTROLLER = 41

_MESSAGES = {
    m.NOT_LEADER_OR_FOLLOWER: "This server is not the leader for the metadata quorum.",
    m.INCONSISTENT_CLUSTER_ID: "The cluster id in the request does not match this cluster.",
}


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    controller_id: int
    incarnation_id: uuid.UUID
    listeners: tuple[tuple[str, str, int, int], ...]  # name, host, port, security protocol


class RaftVotersApi:
    def __init__(
        self,
        driver: Callable[[], QuorumDriver | None],
        cluster_id: Callable[[], str],
        authorizer: Callable[[], Any] = lambda: None,
    ) -> None:
        self._driver = driver
        self._cluster_id = cluster_id
        self._authorizer = authorizer
        self.registrations: dict[int, ControllerRegistration] = {}

    def apis(self) -> list[Api]:
        return [
            Api(ADD_RAFT_VOTER, self.add_raft_voter, max_version=1),
            Api(REMOVE_RAFT_VOTER, self.remove_raft_voter, max_version=0),
            Api(UPDATE_RAFT_VOTER, self.update_raft_voter, max_version=0),
            Api(CONTROLLER_REGISTRATION, self.controller_registration, max_version=0),
        ]

    @staticmethod
    def _respond(key: int, ctx: RequestContext, body: dict[str, Any]) -> Any:
        cls = REGISTRY.spec(key).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, **body})

    def _error(self, key: int, ctx: RequestContext, code: int, message: str | None) -> Any:
        body: dict[str, Any] = {"error_code": code, "error_message": message}
        if key == UPDATE_RAFT_VOTER:
            body = {"error_code": code, "current_leader": self._current_leader()}
        return self._respond(key, ctx, body)

    def _current_leader(self) -> dict[str, Any]:
        driver = self._driver()
        if driver is None:
            return {"leader_id": -1, "leader_epoch": -1, "host": "", "port": 0}
        core = driver.core
        address = driver.endpoint(core.leader_id) if core.leader_id >= 0 else None
        host, port = address if address is not None else ("", 0)
        return {"leader_id": core.leader_id, "leader_epoch": core.epoch, "host": host, "port": port}

    def _precheck(
        self, key: int, ctx: RequestContext, body: Any, operation: AclOperation
    ) -> tuple[Any, QuorumDriver | None]:
        """(the refusal to send, or None and the driver of a leader that may decide)."""
        if not cluster_allowed(self._authorizer(), ctx, operation):
            code: int = ErrorCode.cluster_authorization_failed
            return self._error(key, ctx, code, "Cluster authorization failed."), None
        cluster = getattr(body, "cluster_id", None)
        if cluster is not None and cluster != self._cluster_id():
            code = m.INCONSISTENT_CLUSTER_ID
            return self._error(key, ctx, code, _MESSAGES[code]), None
        driver = self._driver()
        if driver is None or not driver.core.is_leader:
            if key == CONTROLLER_REGISTRATION:  # the controller's answer (a channel retries)
                return self._error(key, ctx, NOT_CONTROLLER, None), None
            code = m.NOT_LEADER_OR_FOLLOWER
            return self._error(key, ctx, code, _MESSAGES[code]), None
        return None, driver

    async def add_raft_voter(self, ctx: RequestContext, body: Any) -> Any:
        refused, driver = self._precheck(ADD_RAFT_VOTER, ctx, body, AclOperation.ALTER)
        if driver is None:
            return refused
        voter_id = int(body.voter_id)
        if voter_id < 0 or not body.listeners:
            return self._error(
                ADD_RAFT_VOTER,
                ctx,
                m.INVALID_REQUEST,
                f"Voter {voter_id} needs a non-negative id and at least one listener",
            )
        voter = VoterEntry(
            voter_id,
            body.voter_directory_id,
            tuple(VoterEndpoint(lst.name, lst.host, int(lst.port)) for lst in body.listeners),
            0,
            1,
        )
        raw = body.timeout
        ms = int(raw.total_seconds() * 1000) if isinstance(raw, timedelta) else int(raw)
        timeout = ms if ms > 0 else DEFAULT_TIMEOUT_MS
        code, message = await driver.change_voters(
            lambda now: driver.core.add_voter(now, voter, timeout), timeout
        )
        return self._error(ADD_RAFT_VOTER, ctx, code, message)

    async def remove_raft_voter(self, ctx: RequestContext, body: Any) -> Any:
        refused, driver = self._precheck(REMOVE_RAFT_VOTER, ctx, body, AclOperation.ALTER)
        if driver is None:
            return refused
        voter_id, directory = int(body.voter_id), body.voter_directory_id
        code, message = await driver.change_voters(
            lambda now: driver.core.remove_voter(now, voter_id, directory), DEFAULT_TIMEOUT_MS
        )
        return self._error(REMOVE_RAFT_VOTER, ctx, code, message)

    async def update_raft_voter(self, ctx: RequestContext, body: Any) -> Any:
        refused, driver = self._precheck(UPDATE_RAFT_VOTER, ctx, body, AclOperation.CLUSTER_ACTION)
        if driver is None:
            return refused
        if int(body.current_leader_epoch) != driver.core.epoch:
            code = (
                m.FENCED_LEADER_EPOCH
                if int(body.current_leader_epoch) < driver.core.epoch
                else m.UNKNOWN_LEADER_EPOCH
            )
            return self._error(UPDATE_RAFT_VOTER, ctx, code, None)
        feature = body.k_raft_version_feature
        endpoints = tuple(VoterEndpoint(x.name, x.host, int(x.port)) for x in body.listeners)
        kraft = (int(feature.min_supported_version), int(feature.max_supported_version))
        voter_id, directory = int(body.voter_id), body.voter_directory_id
        code, _ = await driver.change_voters(
            lambda now: driver.core.update_voter(now, voter_id, directory, endpoints, kraft),
            DEFAULT_TIMEOUT_MS,
        )
        return self._error(UPDATE_RAFT_VOTER, ctx, code, None)

    async def controller_registration(self, ctx: RequestContext, body: Any) -> Any:
        refused, driver = self._precheck(
            CONTROLLER_REGISTRATION, ctx, body, AclOperation.CLUSTER_ACTION
        )
        if driver is None:
            return refused
        reg = ControllerRegistration(
            int(body.controller_id),
            body.incarnation_id,
            tuple((x.name, x.host, int(x.port), int(x.security_protocol)) for x in body.listeners),
        )
        self.registrations[reg.controller_id] = reg
        for name, host, port, _ in reg.listeners:
            if driver.listener_name in (None, name):
                driver.learn_endpoint(reg.controller_id, host, port)
                break
        return self._error(CONTROLLER_REGISTRATION, ctx, m.NONE, None)
