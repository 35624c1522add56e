"""Each listener serves its own APIs (Kafka's broker/controller split), derived from a real node's
handler table; the quorum RPCs need CLUSTER_ACTION; refusals are logged once, not per retry."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api import listener_apis
from broker.api.authz import DenialLog
from broker.api.context import RequestContext
from broker.api.dispatcher import Api, Dispatcher
from broker.api.listener_apis import CONTROLLER_ONLY, ListenerApis, NotEnabledOnListener
from broker.api.quorum import QuorumApi
from broker.app.node import Node
from broker.config.properties import Entry, Properties
from broker.config.server_parsing import parse_server_config
from broker.network.peer_refusals import PeerRefusals, answer_code
from broker.quorum import wire
from broker.quorum.driver import NotLeaderError
from broker.raft import messages as m
from broker.security.acls import AclOperation
from broker.security.authorizer import Authorizer
from protocol.build import build
from protocol.headers import RequestHeader
from protocol.registry import REGISTRY

SUPER = "User:node"
ANON = "User:ANONYMOUS"


def _node(tmp_path: Path, authorizer: bool = False) -> Node:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(tmp_path),
        "group.share.enable": "true",
    }
    if authorizer:
        props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        props["super.users"] = SUPER
    cfg, _ = parse_server_config(
        Properties([Entry(k, v, i) for i, (k, v) in enumerate(props.items())])
    )
    return Node(cfg, "AAAAAAAAAAAAAAAAAAAAAA")


def _frame(key: int, version: int, data: dict[str, Any], corr: int = 5) -> bytes:
    body: Any = build(REGISTRY.spec(key).request_type(version), data)
    return REGISTRY.encode_request(version, corr, "test", body)[4:]


def _ctx_factory(listener: str, principal: str = ANON) -> Any:
    def make(header: Any) -> RequestContext:
        return RequestContext(header, "c1", listener, "127.0.0.1", principal)

    return make


def _ask(
    d: Dispatcher,
    listener: str,
    key: int,
    version: int,
    data: dict[str, Any],
    principal: str = ANON,
) -> Any:
    async def go() -> Any:
        parts = await d.handle(
            _ctx_factory(listener, principal), memoryview(_frame(key, version, data))
        )
        assert parts is not None
        return REGISTRY.decode_response(key, version, b"".join(bytes(p) for p in parts))[1]

    return asyncio.run(go())


# -- the sets -------------------------------------------------------------------------------------


def test_a_combined_node_splits_its_apis_between_its_listeners(tmp_path: Path) -> None:
    d = _node(tmp_path).apis.dispatcher
    every = set(d.supported_versions())
    controller = set(d.supported_versions("CONTROLLER"))
    broker = set(d.supported_versions("PLAINTEXT"))
    assert controller | broker == every
    # the controller listener: ControllerApis' set and the KIP-1279 controller RPCs, no more
    assert controller == every & listener_apis.CONTROLLER_APIS
    assert {52, 53, 54, 59, 62, 63, 56, 58, 67, 55, 18, 17, 36, 1} <= controller
    assert not {0, 2, 3, 8, 10, 11, 22, 27, 50, 83, 84, 98, 99} & controller
    # the broker listener: never the APIs only the controller listener has
    assert not broker & CONTROLLER_ONLY
    assert {0, 1, 3, 27, 83, 84, 85, 86, 87, 100, 101, 105, 55} <= broker


@pytest.mark.parametrize("listener", ["CONTROLLER", "PLAINTEXT"])
def test_api_versions_lists_exactly_what_the_listener_serves(tmp_path: Path, listener: str) -> None:
    d = _node(tmp_path).apis.dispatcher
    resp = _ask(d, listener, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
    listed = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
    assert listed == d.supported_versions(listener)
    assert d.listener_apis is not None
    assert set(listed) == d.listener_apis.keys(listener)


@pytest.mark.parametrize(
    ("listener", "key", "version", "data"),
    [
        ("PLAINTEXT", wire.VOTE, 0, {}),
        ("PLAINTEXT", wire.FETCH_SNAPSHOT, 0, {}),
        ("PLAINTEXT", 62, 0, {}),  # BrokerRegistration
        ("PLAINTEXT", 58, 0, {}),  # Envelope
        ("CONTROLLER", 0, 9, {}),  # Produce
        ("CONTROLLER", 3, 12, {}),  # Metadata
        ("CONTROLLER", 27, 1, {}),  # WriteTxnMarkers
    ],
)
def test_an_api_the_listener_does_not_serve_closes_the_connection(
    tmp_path: Path, listener: str, key: int, version: int, data: dict[str, Any]
) -> None:
    d = _node(tmp_path).apis.dispatcher
    with pytest.raises(NotEnabledOnListener, match=f"not enabled on listener {listener}"):
        asyncio.run(d.handle(_ctx_factory(listener), memoryview(_frame(key, version, data))))


def test_without_a_split_every_listener_serves_everything() -> None:
    split = ListenerApis({0, 52, 18}, ["CONTROLLER"])
    assert split.keys("CONTROLLER") == {52, 18}
    assert split.keys("CLIENT") == {0, 18}
    assert Dispatcher([]).listener_apis is None


# -- quorum RPCs need CLUSTER_ACTION ----------------------------------------------------------------


class _Driver:
    """Answers every KRaft request as a follower would, and counts them."""

    def __init__(self) -> None:
        self.served: list[Any] = []

    async def serve(self, sender: int, request: Any) -> Any:
        self.served.append(request)
        if isinstance(request, m.VoteRequest):
            return m.VoteResponse(0, 1, 3, True)
        if isinstance(request, m.BeginQuorumEpochRequest):
            return m.BeginQuorumEpochResponse(0, 1, 3)
        if isinstance(request, m.EndQuorumEpochRequest):
            return m.EndQuorumEpochResponse(0, 1, 3)
        return None


QUORUM_REQUESTS = [
    (wire.VOTE, 1, wire.vote_request_body(m.VoteRequest(2, 3, 1, 10))),
    (wire.BEGIN_QUORUM_EPOCH, 0, wire.begin_request_body(m.BeginQuorumEpochRequest(2, 3))),
    (wire.END_QUORUM_EPOCH, 0, wire.end_request_body(m.EndQuorumEpochRequest(2, 3))),
    (
        wire.FETCH_SNAPSHOT,
        0,
        wire.fetch_snapshot_request_body(
            m.FetchSnapshotRequest(2, 3, m.SnapshotId(10, 1), 0, 1 << 20)
        ),
    ),
    (wire.FETCH, 13, wire.fetch_request_body(m.FetchRequest(2, 3, 0, 0))),
]


def _quorum_dispatcher(driver: _Driver) -> Dispatcher:
    authz = Authorizer(lambda: {}, super_users=frozenset({SUPER}))
    api = QuorumApi(lambda: driver, lambda: 0, authorizer=lambda: authz)  # type: ignore[arg-type, return-value]
    return Dispatcher(
        [*api.apis(), Api(wire.FETCH, api.fetch, min_version=4)],
        controller_listeners=["CONTROLLER"],
    )


@pytest.mark.parametrize(("key", "version", "data"), QUORUM_REQUESTS)
def test_quorum_rpcs_without_cluster_action_are_refused(
    key: int, version: int, data: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    driver = _Driver()
    d = _quorum_dispatcher(driver)
    with caplog.at_level(logging.WARNING, logger="broker.api.authz"):
        resp = _ask(d, "CONTROLLER", key, version, data, principal="User:mallory")
    assert int(resp.error_code) == ErrorCode.cluster_authorization_failed
    assert not driver.served  # the quorum never saw it
    name = REGISTRY.spec(key).name
    assert any("User:mallory" in r.message and "CONTROLLER" in r.message for r in caplog.records), (
        name
    )


def test_a_super_user_takes_part_in_the_quorum() -> None:
    driver = _Driver()
    d = _quorum_dispatcher(driver)
    key, version, data = QUORUM_REQUESTS[0]
    resp = _ask(d, "CONTROLLER", key, version, data, principal=SUPER)
    assert int(resp.error_code) == 0 and resp.topics[0].partitions[0].vote_granted
    assert len(driver.served) == 1


def test_a_refused_fetch_below_v13_names_each_partition() -> None:
    d = _quorum_dispatcher(_Driver())
    data = {
        "replica_id": 2,
        "topics": [
            {"topic": "__cluster_metadata", "partitions": [{"partition": 0}]},
            {"topic": "secrets", "partitions": [{"partition": 0}, {"partition": 1}]},
        ],
    }
    resp = _ask(d, "CONTROLLER", wire.FETCH, 12, data, principal="User:mallory")
    assert int(resp.error_code) == ErrorCode.cluster_authorization_failed
    got = {
        (t.topic, p.partition_index): int(p.error_code)
        for t in resp.responses
        for p in t.partitions
    }
    code = int(ErrorCode.cluster_authorization_failed)
    assert got == {("__cluster_metadata", 0): code, ("secrets", 0): code, ("secrets", 1): code}
    assert all(not p.records for t in resp.responses for p in t.partitions)


def test_describe_quorum_needs_describe_on_the_cluster() -> None:
    d = _quorum_dispatcher(_Driver())
    data = {
        "topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]
    }
    resp = _ask(d, "CONTROLLER", 55, 1, data, principal="User:mallory")
    assert int(resp.error_code) == ErrorCode.cluster_authorization_failed


# -- logging refusals -----------------------------------------------------------------------------


def test_denials_are_logged_once_a_minute_per_principal_api_and_listener(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    denials = DenialLog(60.0, lambda: now[0])

    def ctx(principal: str, key: int, listener: str = "CONTROLLER") -> RequestContext:
        return RequestContext(
            RequestHeader(key, 0, 1, "c", 2), "c1", listener, "10.0.0.9", principal
        )

    with caplog.at_level(logging.WARNING, logger="broker.api.authz"):
        assert denials.refused(ctx("User:a", 52), AclOperation.CLUSTER_ACTION)
        now[0] = 30.0
        assert not denials.refused(ctx("User:a", 52), AclOperation.CLUSTER_ACTION)
        assert denials.refused(ctx("User:b", 52), AclOperation.CLUSTER_ACTION)
        assert denials.refused(ctx("User:a", 59), AclOperation.CLUSTER_ACTION)
        assert denials.refused(ctx("User:a", 52, "OTHER"), AclOperation.CLUSTER_ACTION)
        now[0] = 61.0
        assert denials.refused(ctx("User:a", 52), AclOperation.CLUSTER_ACTION)
    assert len(caplog.records) == 5
    first = caplog.records[0].message
    assert "User:a" in first and "Vote" in first and "10.0.0.9" in first and "CONTROLLER" in first


def test_a_peer_refusal_is_one_line_until_it_is_accepted(caplog: pytest.LogCaptureFixture) -> None:
    refusals = PeerRefusals("quorum")
    refused = int(ErrorCode.cluster_authorization_failed)
    with caplog.at_level(logging.INFO, logger="broker.network.peer_refusals"):
        for _ in range(50):
            assert refusals.note("voter 2 at h:1", "VoteRequest", refused)
        assert not refusals.note("voter 3 at h:2", "VoteRequest", 0)
        assert not refusals.note("voter 2 at h:1", "VoteRequest", 0)
        assert refusals.note("voter 2 at h:1", "VoteRequest", refused)
    lines = [r for r in caplog.records if r.name == "broker.network.peer_refusals"]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.INFO, logging.WARNING]
    assert (
        "voter 2 at h:1 refused VoteRequest with CLUSTER_AUTHORIZATION_FAILED" in lines[0].message
    )


def test_a_refusal_deep_in_a_response_is_found() -> None:
    resp: Any = build(
        REGISTRY.spec(27).response_type(1),
        {
            "markers": [
                {
                    "producer_id": 1,
                    "topics": [
                        {"name": "t", "partitions": [{"partition_index": 0, "error_code": 31}]}
                    ],
                }
            ]
        },
    )
    assert answer_code(resp) == ErrorCode.cluster_authorization_failed
    ok: Any = build(REGISTRY.spec(63).response_type(1), {"error_code": 0})
    assert answer_code(ok) == 0


# -- a controller that is not the active one ------------------------------------------------------


def test_an_admin_request_at_a_controller_that_does_not_lead_answers_not_controller() -> None:
    """Its handler's controller call raises NotLeaderError: Kafka's ControllerApis answers
    NOT_CONTROLLER for everything asked (the client then finds the active controller); the
    connection is not closed as if the handler had failed."""

    async def not_leading(_ctx: Any, _req: Any) -> Any:
        raise NotLeaderError(3, 7)

    d = Dispatcher(
        [Api(19, not_leading), Api(20, not_leading)], controller_listeners=["CONTROLLER"]
    )
    spec = {"name": "t", "num_partitions": 1, "replication_factor": 1}
    created = _ask(d, "CONTROLLER", 19, 7, {"topics": [spec], "timeout": 1000})
    assert [(t.name, int(t.error_code)) for t in created.topics] == [
        ("t", ErrorCode.not_controller)
    ]
    deleted = _ask(d, "CONTROLLER", 20, 6, {"topics": [{"name": "t"}], "timeout": 1000})
    assert [(r.name, int(r.error_code)) for r in deleted.responses] == [
        ("t", ErrorCode.not_controller)
    ]
