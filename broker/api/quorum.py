"""KRaft quorum RPCs: Vote (52) v0-2, BeginQuorumEpoch (53) v0-1, EndQuorumEpoch (54) v0-1,
FetchSnapshot (59) v0-1, DescribeQuorum (55) v0-2, and Fetch (1) on ``__cluster_metadata-0``
from voters and observers.

Each request is turned into the Raft core's message (``broker.quorum.wire``), served by the
node's ``QuorumDriver`` (a Fetch may wait there up to its MaxWaitMs for new entries) and the
core's answer is built at the request's version. A request about another partition than
``__cluster_metadata-0`` is INVALID_REQUEST, as Kafka answers it.

Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot and Fetch need CLUSTER_ACTION on the
cluster (the quorum's own peers; super users have it): anyone else gets
CLUSTER_AUTHORIZATION_FAILED in the response's top-level error code (a Fetch below v13 also in
each partition it asked for), as Kafka's ControllerApis answers, and the refusal is logged. A
Fetch on a controller listener always comes here: one about another partition than the
metadata log's is INVALID_REQUEST. The dispatcher serves all of these on controller listeners
only (``listener_apis.py``).

DescribeQuorum needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise, as
Kafka's ControllerApis checks it) and is answered by this node's quorum directly: the leader
describes every replica, another node answers NOT_LEADER_OR_FOLLOWER (``describe_wire.py``).
Sent to a broker listener of a node that is not the active controller, it is forwarded there
first (``forwarding.py``, Envelope), as Kafka's brokers do.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..quorum import describe_wire, wire
from ..quorum.driver import QuorumDriver
from ..raft import messages as m
from ..security.acls import AclOperation
from .authz import cluster_allowed
from .context import RequestContext
from .dispatcher import Api

# node id -> its endpoints (listener name, host, port), for DescribeQuorum v2's Nodes
VoterEndpoints = Callable[[], Mapping[int, Sequence[describe_wire.Endpoint]]]


def _no_endpoints() -> Mapping[int, Sequence[describe_wire.Endpoint]]:
    return {}


class QuorumApi:
    def __init__(
        self,
        driver: Callable[[], QuorumDriver | None],
        now_ms: Callable[[], int],
        voter_endpoints: VoterEndpoints = _no_endpoints,
        authorizer: Callable[[], Any] = lambda: None,
        voter_directories: Callable[[], Mapping[int, uuid.UUID]] = dict,
    ) -> None:
        self._driver = driver
        self._now_ms = now_ms
        self._voter_endpoints = voter_endpoints
        self._authorizer = authorizer
        self._voter_directories = voter_directories

    def apis(self) -> list[Api]:
        return [
            Api(wire.VOTE, self.vote, max_version=2),
            Api(wire.BEGIN_QUORUM_EPOCH, self.begin_quorum_epoch, max_version=1),
            Api(wire.END_QUORUM_EPOCH, self.end_quorum_epoch, max_version=1),
            Api(wire.FETCH_SNAPSHOT, self.fetch_snapshot, max_version=1),
            Api(describe_wire.DESCRIBE_QUORUM, self.describe_quorum, max_version=2),
        ]

    @staticmethod
    def _respond(key: int, ctx: RequestContext, body: dict[str, Any]) -> Any:
        cls = REGISTRY.spec(key).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, **body})

    def _refuse(self, key: int, ctx: RequestContext, code: ErrorCode) -> Any:
        return self._respond(key, ctx, {"error_code": code, "topics": [], "responses": []})

    async def _serve(self, sender: int, request: m.RaftRequest) -> m.RaftResponse | None:
        driver = self._driver()
        if driver is None:
            return None
        return await driver.serve(sender, request)

    def _peer_refused(self, key: int, ctx: RequestContext) -> Any:
        """The CLUSTER_AUTHORIZATION_FAILED answer when the sender may not take part in the
        quorum, else None."""
        if cluster_allowed(self._authorizer(), ctx, AclOperation.CLUSTER_ACTION):
            return None
        return self._refuse(key, ctx, ErrorCode.cluster_authorization_failed)

    async def vote(self, ctx: RequestContext, body: Any) -> Any:
        if (refused := self._peer_refused(wire.VOTE, ctx)) is not None:
            return refused
        try:
            req = wire.parse_vote_request(body)
        except wire.NotMetadataPartition:
            return self._refuse(wire.VOTE, ctx, ErrorCode.invalid_request)
        resp = await self._serve(req.replica_id, req)
        if not isinstance(resp, m.VoteResponse):
            return self._refuse(wire.VOTE, ctx, ErrorCode.broker_not_available)
        return self._respond(wire.VOTE, ctx, wire.vote_response_body(resp))

    async def begin_quorum_epoch(self, ctx: RequestContext, body: Any) -> Any:
        if (refused := self._peer_refused(wire.BEGIN_QUORUM_EPOCH, ctx)) is not None:
            return refused
        try:
            req = wire.parse_begin_request(body)
        except wire.NotMetadataPartition:
            return self._refuse(wire.BEGIN_QUORUM_EPOCH, ctx, ErrorCode.invalid_request)
        resp = await self._serve(req.leader_id, req)
        if not isinstance(resp, m.BeginQuorumEpochResponse):
            return self._refuse(wire.BEGIN_QUORUM_EPOCH, ctx, ErrorCode.broker_not_available)
        return self._respond(wire.BEGIN_QUORUM_EPOCH, ctx, wire.epoch_response_body(resp))

    async def end_quorum_epoch(self, ctx: RequestContext, body: Any) -> Any:
        if (refused := self._peer_refused(wire.END_QUORUM_EPOCH, ctx)) is not None:
            return refused
        try:
            req = wire.parse_end_request(body)
        except wire.NotMetadataPartition:
            return self._refuse(wire.END_QUORUM_EPOCH, ctx, ErrorCode.invalid_request)
        resp = await self._serve(req.leader_id, req)
        if not isinstance(resp, m.EndQuorumEpochResponse):
            return self._refuse(wire.END_QUORUM_EPOCH, ctx, ErrorCode.broker_not_available)
        return self._respond(wire.END_QUORUM_EPOCH, ctx, wire.epoch_response_body(resp))

    async def fetch_snapshot(self, ctx: RequestContext, body: Any) -> Any:
        if (refused := self._peer_refused(wire.FETCH_SNAPSHOT, ctx)) is not None:
            return refused
        try:
            req = wire.parse_fetch_snapshot_request(body)
        except wire.NotMetadataPartition:
            return self._refuse(wire.FETCH_SNAPSHOT, ctx, ErrorCode.invalid_request)
        resp = await self._serve(req.replica_id, req)
        if not isinstance(resp, m.FetchSnapshotResponse):
            return self._refuse(wire.FETCH_SNAPSHOT, ctx, ErrorCode.broker_not_available)
        return self._respond(wire.FETCH_SNAPSHOT, ctx, wire.fetch_snapshot_response_body(resp))

    async def fetch(self, ctx: RequestContext, body: Any) -> Any:
        """A Fetch that came to a controller listener: the metadata log's, from a peer."""
        if not cluster_allowed(self._authorizer(), ctx, AclOperation.CLUSTER_ACTION):
            return self._respond(
                wire.FETCH,
                ctx,
                _fetch_refusal(body, ctx.api_version, ErrorCode.cluster_authorization_failed),
            )
        try:
            req = wire.parse_fetch_request(body)
        except wire.NotMetadataPartition:
            return self._refuse(wire.FETCH, ctx, ErrorCode.invalid_request)
        resp = await self._serve(req.replica_id, req)
        if not isinstance(resp, m.FetchResponse):
            return self._refuse(wire.FETCH, ctx, ErrorCode.broker_not_available)
        body = wire.fetch_response_body(resp, self._now_ms())
        # KIP-853: where the leader it names listens, for an observer that knows no voters yet
        leader = resp.current_leader.leader_id
        driver = self._driver()
        address = driver.endpoint(leader) if driver is not None and leader >= 0 else None
        if address is not None:
            body["node_endpoints"] = [
                {"node_id": leader, "host": address[0], "port": address[1], "rack": None}
            ]
        return self._respond(wire.FETCH, ctx, body)

    async def describe_quorum(self, ctx: RequestContext, body: Any) -> Any:
        key = describe_wire.DESCRIBE_QUORUM
        if not cluster_allowed(self._authorizer(), ctx, AclOperation.DESCRIBE):
            return self._respond(
                key,
                ctx,
                describe_wire.top_level_error_body(
                    ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
                ),
            )
        if not describe_wire.names_metadata_partition(body):
            return self._respond(key, ctx, describe_wire.unknown_partition_body(body))
        driver = self._driver()
        if driver is None:
            return self._respond(
                key,
                ctx,
                describe_wire.top_level_error_body(
                    ErrorCode.broker_not_available, "The broker is not available."
                ),
            )
        described = driver.describe()
        return self._respond(
            key,
            ctx,
            describe_wire.describe_response_body(
                described, self._voter_endpoints(), self._voter_directories()
            ),
        )


def _fetch_refusal(body: Any, version: int, code: ErrorCode) -> dict[str, Any]:
    """A Fetch refused as a whole (Kafka's FetchRequest.getErrorResponse): the top-level error,
    and below v13 the same error in each partition asked for."""
    out: dict[str, Any] = {"error_code": code, "session_id": body.session_id, "responses": []}
    if version < 13:
        out["responses"] = [
            {
                "topic": t.topic,
                "partitions": [
                    {"partition_index": p.partition, "error_code": code} for p in t.partitions
                ],
            }
            for t in body.topics
        ]
    return out
