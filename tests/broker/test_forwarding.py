"""Admin requests sent to a broker are served by the active controller, inside an Envelope.

Two in-process nodes on loopback listeners: a broker (its Dispatcher has the forwarding hook and
a ControllerChannel) and a controller (a real Controller over an in-memory quorum, TopicsApi,
an ACL authorizer and the Envelope handler on its CONTROLLER listener). Clients talk to the
broker with hand-written frames, so the correlation id and the bytes are what we check.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.api_versions import make_handler as api_versions_handler
from broker.api.context import RequestContext
from broker.api.dispatcher import Api, Dispatcher
from broker.api.envelope import EnvelopeApi
from broker.api.forwarding import FORWARDED_APIS, Forwarder
from broker.api.topics import TopicsApi
from broker.controller.controller import Controller
from broker.metadata.image import MetadataImage
from broker.network.client import ClientConnection, ReconnectingClient
from broker.network.errors import NetworkError
from broker.network.server import ConnectionContext, KafkaServer, Listener
from broker.quorum.controller_channel import ControllerChannel
from broker.security.acls import Acl, AclOperation, PatternType, PermissionType, ResourceType
from broker.security.authorizer import Authorizer
from broker.security.principal_data import (
    PrincipalDataError,
    deserialize_principal,
    serialize_principal,
)
from protocol.build import build
from protocol.registry import REGISTRY

from .network_support import RawConn, run
from .test_controller_image import MemoryQuorum
from .test_mirror_controller import _services, _setup

CREATE_TOPICS = 19
ENVELOPE = 58
BROKER_PRINCIPAL = "User:broker"  # what the broker authenticates as on the controller listener


def _body(key: int, version: int, data: dict[str, Any]) -> Any:
    return build(REGISTRY.spec(key).request_type(version), data)


def _create(*names: str, version: int = 7) -> Any:
    return _body(
        CREATE_TOPICS,
        version,
        {
            "topics": [{"name": n, "num_partitions": 3, "replication_factor": 1} for n in names],
            "timeout": 5000,
        },
    )


@dataclass
class Node:
    """A dispatcher behind a KafkaServer with the listeners named; each listener's
    connections act as the principal given for it (stands in for SASL)."""

    dispatcher: Dispatcher
    principals: dict[str, str]
    server: KafkaServer | None = None
    seen: list[tuple[str, str, str | None, int]] = field(default_factory=list)

    async def _handle(self, conn: ConnectionContext, frame: memoryview) -> Any:
        def ctx(header: Any) -> RequestContext:
            return RequestContext(
                header,
                conn.connection_id,
                conn.listener,
                conn.peer_host,
                principal=self.principals[conn.listener],
            )

        return await self.dispatcher.handle(ctx, frame)

    async def start(self) -> None:
        listeners = [Listener(name, "127.0.0.1", 0) for name in self.principals]
        self.server = KafkaServer(listeners, self._handle)
        await self.server.start()

    def port(self, listener: str) -> int:
        assert self.server is not None
        return self.server.bound_ports[listener]

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.close(timeout=0)


def _versions(holder: dict[str, Dispatcher]) -> Api:
    return Api(18, api_versions_handler(lambda _l: holder["d"].supported_versions(), MetadataImage))


def _allow(principal: str, rtype: ResourceType, name: str, op: AclOperation) -> Acl:
    return Acl(rtype, name, PatternType.LITERAL, principal, "*", op, PermissionType.ALLOW)


def controller_node(
    *,
    acls: tuple[Acl, ...] = (),
    super_users: frozenset[str] = frozenset({BROKER_PRINCIPAL}),
    active: Callable[[], bool] = lambda: True,
    create_max_version: int = 7,
    create_handler: Any = None,
    extra: tuple[Api, ...] = (),
) -> tuple[Node, MemoryQuorum, Controller]:
    """A controller with a real Controller and TopicsApi, checking ACLs."""
    q, c, _mc = _setup()
    authorizer = Authorizer(lambda: dict(enumerate(acls)), super_users=super_users)
    services = _services(q, c, authorizer)
    topics = TopicsApi(services)
    seen: list[tuple[str, str, str | None, int]] = []

    async def create_topics(ctx: RequestContext, req: Any) -> Any:
        seen.append((ctx.principal, ctx.peer_host, ctx.client_id, ctx.header.correlation_id))
        if create_handler is not None:
            return await create_handler(ctx, req)
        return await topics.create_topics(ctx, req)

    holder: dict[str, Dispatcher] = {}
    envelope = EnvelopeApi(
        lambda f, fr: holder["d"].handle_embedded(f, fr),
        ["CONTROLLER"],
        authorizer,
        is_active_controller=active,
    )
    d = Dispatcher(
        [
            _versions(holder),
            Api(CREATE_TOPICS, create_topics, min_version=2, max_version=create_max_version),
            *envelope.apis(),
            *extra,
        ]
    )
    holder["d"] = d
    node = Node(d, {"CONTROLLER": BROKER_PRINCIPAL, "PLAINTEXT": "User:ANONYMOUS"}, seen=seen)
    return node, q, c


def client_factory(node: int, host: str, port: int) -> ReconnectingClient:
    return ReconnectingClient(
        host, port, f"broker-{node}", request_timeout_ms=2000, connect_timeout_ms=500
    )


def broker_node(
    leader: Callable[[], tuple[int, str, int] | None],
    *,
    timeout_ms: int = 3000,
    active: Callable[[], bool] = lambda: False,
    principal: str = "User:alice",
    controller_listener: bool = False,
) -> tuple[Node, ControllerChannel, list[Any]]:
    """A broker whose own CreateTopics handler must only run when it is the active controller."""
    local: list[Any] = []

    async def create_topics_here(ctx: RequestContext, req: Any) -> Any:
        local.append(req)
        rtype = REGISTRY.spec(CREATE_TOPICS).response_type(ctx.api_version)
        return build(rtype, {"topics": [{"name": t.name, "error_code": 0} for t in req.topics]})

    channel = ControllerChannel(leader, client_factory, timeout_ms, retry_backoff_ms=20)
    holder: dict[str, Dispatcher] = {}
    d = Dispatcher(
        [_versions(holder), Api(CREATE_TOPICS, create_topics_here, min_version=2, max_version=7)],
        forwarding=Forwarder(channel, active, controller_listeners=["CONTROLLER"]),
    )
    holder["d"] = d
    listeners = {"PLAINTEXT": principal}
    if controller_listener:  # a combined node
        listeners["CONTROLLER"] = principal
    return Node(d, listeners), channel, local


async def _ask(node: Node, body: Any, corr: int, version: int | None = None) -> Any:
    assert node.server is not None
    conn = await RawConn.open(node.server)
    try:
        v = int(type(body).__version__) if version is None else version
        conn.send(body, corr, v)
        got_corr, resp = await conn.read_response(int(type(body).__api_key__), v)
        assert got_corr == corr
        return resp
    finally:
        conn.close()


def _codes(resp: Any) -> dict[str, int]:
    return {t.name: int(t.error_code) for t in resp.topics}


# --- forwarding through a broker -------------------------------------------------------------


def test_create_topics_sent_to_a_broker_is_served_by_the_controller_as_the_client() -> None:
    ctl, q, _c = controller_node(
        acls=(_allow("User:alice", ResourceType.TOPIC, "mine", AclOperation.CREATE),)
    )

    async def main() -> None:
        await ctl.start()
        endpoint = (1, "127.0.0.1", ctl.port("CONTROLLER"))
        broker, channel, local = broker_node(lambda: endpoint)
        await broker.start()
        try:
            resp = await _ask(broker, _create("mine", "theirs"), corr=4242)
            # the controller authorized alice (not the broker, a super user) for each topic
            assert _codes(resp) == {
                "mine": ErrorCode.none,
                "theirs": ErrorCode.topic_authorization_failed,
            }
            assert "mine" in q.image.topics and "theirs" not in q.image.topics
            created = next(t for t in resp.topics if t.name == "mine")
            assert created.topic_id == q.image.topics["mine"].topic_id
            assert local == []  # the broker's own handler never ran
            # the request the controller served is the client's: principal, address, ids
            assert ctl.seen == [("User:alice", "127.0.0.1", "raw", 4242)]
        finally:
            await channel.close()
            await broker.stop()
            await ctl.stop()

    run(main())


def test_the_active_controller_serves_forwarded_apis_itself() -> None:
    async def main() -> None:
        broker, channel, local = broker_node(lambda: None, active=lambda: True)
        await broker.start()
        try:
            resp = await _ask(broker, _create("t"), corr=7)
            assert _codes(resp) == {"t": 0} and len(local) == 1
        finally:
            await channel.close()
            await broker.stop()

    run(main())


def test_a_request_on_a_controller_listener_is_served_where_it_came() -> None:
    """As Kafka's ControllerApis: a controller answers itself (a --bootstrap-controller client)."""

    async def main() -> None:
        broker, channel, local = broker_node(
            lambda: None, timeout_ms=2000, controller_listener=True
        )
        await broker.start()
        try:
            conn = RawConn(*await asyncio.open_connection("127.0.0.1", broker.port("CONTROLLER")))
            conn.send(_create("t"), 3, 7)
            _corr, resp = await conn.read_response(CREATE_TOPICS, 7)
            conn.close()
            assert _codes(resp) == {"t": 0} and len(local) == 1
        finally:
            await channel.close()
            await broker.stop()

    run(main())


def test_no_controller_within_the_timeout_answers_request_timed_out_per_topic() -> None:
    async def main() -> None:
        broker, channel, local = broker_node(lambda: None, timeout_ms=300)
        await broker.start()
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            resp = await _ask(broker, _create("a", "b", version=4), corr=9, version=4)
            assert _codes(resp) == {
                "a": ErrorCode.request_timed_out,
                "b": ErrorCode.request_timed_out,
            }
            assert all("did not answer within 300 ms" in t.error_message for t in resp.topics)
            assert 0.25 <= loop.time() - started < 2.5
            assert local == []
        finally:
            await channel.close()
            await broker.stop()

    run(main())


def test_the_broker_follows_the_controller_through_a_dead_node_and_not_controller() -> None:
    """The leader it is told first is down, the next answers NOT_CONTROLLER, the third serves."""
    alice_creates_t = _allow("User:alice", ResourceType.TOPIC, "t", AclOperation.CREATE)
    stale, _q1, _c1 = controller_node(active=lambda: False)
    real, q, _c = controller_node(acls=(alice_creates_t,))

    async def main() -> None:
        await stale.start()
        await real.start()
        dead = KafkaServer([Listener("X", "127.0.0.1", 0)], stale._handle)
        await dead.start()
        dead_port = dead.bound_ports["X"]
        await dead.close(timeout=0)  # nothing listens there any more
        leaders = [
            (3, "127.0.0.1", dead_port),
            (2, "127.0.0.1", stale.port("CONTROLLER")),
            (1, "127.0.0.1", real.port("CONTROLLER")),
        ]
        asked: list[int] = []

        def leader() -> tuple[int, str, int]:
            asked.append(1)
            return leaders[min(len(asked) - 1, 2)]

        broker, channel, _local = broker_node(leader)
        await broker.start()
        try:
            resp = await _ask(broker, _create("t"), corr=1)
            assert _codes(resp) == {"t": 0} and "t" in q.image.topics
            assert stale.seen == []  # refused before its handler ran
            assert len(asked) == 3
        finally:
            await channel.close()
            await broker.stop()
            await stale.stop()
            await real.stop()

    run(main())


def test_a_version_the_controller_cannot_read_closes_the_clients_connection() -> None:
    """Kafka's broker closes the client's connection so it negotiates again."""
    ctl, _q, _c = controller_node(create_max_version=4)

    async def main() -> None:
        await ctl.start()
        endpoint = (1, "127.0.0.1", ctl.port("CONTROLLER"))
        broker, channel, local = broker_node(lambda: endpoint)
        await broker.start()
        assert broker.server is not None
        try:
            conn = await RawConn.open(broker.server)
            conn.send(_create("t"), 5, 7)
            assert await conn.is_closed()
            conn.close()
            assert local == []
        finally:
            await channel.close()
            await broker.stop()
            await ctl.stop()

    run(main())


# --- the Envelope handler on the controller --------------------------------------------------


def _embedded(body: Any, corr: int = 77, version: int | None = None) -> bytes:
    v = int(type(body).__version__) if version is None else version
    return REGISTRY.encode_request(v, corr, "admin-client", body)[4:]


def _envelope(
    request_data: bytes,
    principal: bytes | None = None,
    address: bytes = b"\x0a\x00\x00\x05",
) -> Any:
    return _body(
        ENVELOPE,
        0,
        {
            "request_data": request_data,
            "request_principal": serialize_principal("User:alice")
            if principal is None
            else principal,
            "client_host_address": address,
        },
    )


async def _send_envelope(ctl: Node, envelope: Any, listener: str = "CONTROLLER") -> Any:
    conn = ClientConnection("127.0.0.1", ctl.port(listener), "broker-2", request_timeout_ms=2000)
    await conn.connect()
    try:
        return await conn.send(envelope)
    finally:
        conn.close()


def test_envelope_answers_with_the_embedded_response_header_and_body() -> None:
    ctl, q, _c = controller_node(
        acls=(_allow("User:alice", ResourceType.TOPIC, "t", AclOperation.CREATE),)
    )

    async def main() -> None:
        await ctl.start()
        try:
            resp = await _send_envelope(ctl, _envelope(_embedded(_create("t"), corr=77)))
            assert resp.error_code == ErrorCode.none
            corr, body = REGISTRY.decode_response(CREATE_TOPICS, 7, resp.response_data)
            assert corr == 77 and _codes(body) == {"t": 0}
            assert ctl.seen == [("User:alice", "10.0.0.5", "admin-client", 77)]
            assert "t" in q.image.topics
        finally:
            await ctl.stop()

    run(main())


@pytest.mark.parametrize(
    ("envelope", "code"),
    [
        (lambda: _envelope(_embedded(_create("t")), principal=b"\x00\x01junk"), 97),
        (lambda: _envelope(_embedded(_create("t")), address=b"\x01\x02\x03"), 42),
        (lambda: _envelope(b"\x00\x13"), 35),  # not even a header
        (lambda: _envelope(_embedded(_create("t"))[:-3]), 35),  # body cut short
        (lambda: _envelope(_embedded(_create("t"), version=8)), 35),  # version not served
        (lambda: _envelope(_embedded(_body(3, 12, {"topics": None}))), 42),  # not forwardable
    ],
    ids=["bad-principal", "bad-address", "no-header", "bad-body", "bad-version", "metadata"],
)
def test_envelope_errors_as_kafka(envelope: Callable[[], Any], code: int) -> None:
    ctl, q, _c = controller_node()

    async def main() -> None:
        await ctl.start()
        try:
            resp = await _send_envelope(ctl, envelope())
            assert int(resp.error_code) == code and resp.response_data is None
            assert ctl.seen == [] and "t" not in q.image.topics
        finally:
            await ctl.stop()

    run(main())


def test_envelope_needs_cluster_action_and_a_controller_listener() -> None:
    ctl, q, _c = controller_node(super_users=frozenset())

    async def main() -> None:
        await ctl.start()
        try:
            resp = await _send_envelope(ctl, _envelope(_embedded(_create("t"))))
            assert resp.error_code == ErrorCode.cluster_authorization_failed
            # on a broker listener Kafka has not enabled Envelope: the connection is closed
            with pytest.raises(NetworkError, match=r"closed|lost"):
                await _send_envelope(ctl, _envelope(_embedded(_create("t"))), "PLAINTEXT")
            assert ctl.seen == [] and "t" not in q.image.topics
        finally:
            await ctl.stop()

    run(main())


def test_envelope_reports_not_controller_for_describe_quorum_not_leader() -> None:
    """A controller that is not the quorum leader answers DescribeQuorum NOT_LEADER_OR_FOLLOWER;
    inside an envelope that is NOT_CONTROLLER, so the broker asks the new leader."""

    async def describe_quorum(ctx: RequestContext, req: Any) -> Any:
        rtype = REGISTRY.spec(55).response_type(ctx.api_version)
        return build(rtype, {"error_code": ErrorCode.not_leader_or_follower})

    ctl, _q, _c = controller_node(extra=(Api(55, describe_quorum, max_version=2),))

    async def main() -> None:
        await ctl.start()
        try:
            request = _body(55, 2, {"topics": [{"topic_name": "__cluster_metadata"}]})
            resp = await _send_envelope(ctl, _envelope(_embedded(request)))
            assert resp.error_code == ErrorCode.not_controller and resp.response_data is None
        finally:
            await ctl.stop()

    run(main())


def test_envelope_reports_not_controller_found_in_the_embedded_response() -> None:
    async def not_controller(ctx: RequestContext, req: Any) -> Any:
        rtype = REGISTRY.spec(CREATE_TOPICS).response_type(ctx.api_version)
        topics = [{"name": t.name, "error_code": ErrorCode.not_controller} for t in req.topics]
        return build(rtype, {"topics": topics})

    ctl, _q, _c = controller_node(create_handler=not_controller)

    async def main() -> None:
        await ctl.start()
        try:
            resp = await _send_envelope(ctl, _envelope(_embedded(_create("t"))))
            assert resp.error_code == ErrorCode.not_controller and resp.response_data is None
        finally:
            await ctl.stop()

    run(main())


# --- the channel and the principal serde -----------------------------------------------------


def test_channel_builds_a_mapping_body_at_the_negotiated_version() -> None:
    ctl, _q, _c = controller_node()

    async def main() -> None:
        await ctl.start()
        endpoint = (1, "127.0.0.1", ctl.port("CONTROLLER"))
        channel = ControllerChannel(lambda: endpoint, client_factory, 2000)
        try:
            resp = await channel.request(18, {})
            assert type(resp).__version__ == 4  # the highest both sides serve
            assert {k.api_key for k in resp.api_keys} == {18, CREATE_TOPICS, ENVELOPE}
        finally:
            await channel.close()
            await ctl.stop()

    run(main())


def test_channel_gives_up_after_its_timeout_with_a_clear_error() -> None:
    async def main() -> None:
        channel = ControllerChannel(lambda: None, client_factory, 200, retry_backoff_ms=20)
        with pytest.raises(TimeoutError, match=r"envelope .* within 200 ms .*no active controller"):
            await channel.request(ENVELOPE, _envelope(b""))
        await channel.close()

    run(main())


def test_principal_serde_matches_kafkas_default_principal_data_layout() -> None:
    data = serialize_principal("User:alice")
    # int16 version 0 | compact string "User" | compact string "alice" | false | no tags
    assert data == struct.pack(">h", 0) + b"\x05User" + b"\x06alice" + b"\x00" + b"\x00"
    assert deserialize_principal(data) == "User:alice"
    # a name with colons keeps them: only the first one separates the type
    dn = "User:CN=a:b,O=x"
    assert deserialize_principal(serialize_principal(dn)) == dn
    long_name = "User:" + "é" * 100  # UTF-8 length 200: a two-byte varint (201 = 0xC9 0x01)
    raw = serialize_principal(long_name)
    assert raw[2:7] == b"\x05User" and raw[7:9] == b"\xc9\x01"
    assert deserialize_principal(raw) == long_name
    # written by Kafka with TokenAuthenticated=true and a tagged field: still read
    tagged = struct.pack(">h", 0) + b"\x05User\x04bob\x01" + b"\x01\x05\x02hi"
    assert deserialize_principal(tagged) == "User:bob"
    for bad in (b"", struct.pack(">h", 1) + data[2:], data[:6], struct.pack(">h", 0) + b"\x00"):
        with pytest.raises(PrincipalDataError):
            deserialize_principal(bad)


def test_forwarded_set_is_what_kafka_and_the_kip_route_to_the_controller() -> None:
    kafka = {19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51, 55, 57, 64}
    kip_1279 = {94, 95, 96, 102, 103, 104, 105}
    assert kafka | kip_1279 == FORWARDED_APIS
    # never the data path or the broker-served mirror reads
    assert not FORWARDED_APIS & {0, 1, 3, 18, 58, 98, 99, 100, 101}


def test_a_request_waiting_on_a_frozen_controller_goes_to_the_new_one() -> None:
    """The controller the request went to stops answering (SIGSTOP: its connection stays open)
    and the quorum elects another: the request is sent there at once, not after the timeout."""
    real, _q, _c = controller_node()

    async def main() -> None:
        await real.start()
        frozen_conns: list[asyncio.StreamWriter] = []

        async def swallow(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            frozen_conns.append(w)  # reads nothing, answers nothing

        frozen = await asyncio.start_server(swallow, "127.0.0.1", 0)
        frozen_port = frozen.sockets[0].getsockname()[1]
        moved = asyncio.get_running_loop().time() + 0.3
        endpoints = {
            "frozen": (3, "127.0.0.1", frozen_port),
            "real": (1, "127.0.0.1", real.port("CONTROLLER")),
        }

        def leader() -> tuple[int, str, int]:
            late = asyncio.get_running_loop().time() >= moved
            return endpoints["real" if late else "frozen"]

        channel = ControllerChannel(leader, client_factory, 10_000, retry_backoff_ms=20)
        try:
            started = asyncio.get_running_loop().time()
            resp = await channel.request(18, {})
            took = asyncio.get_running_loop().time() - started
            assert {k.api_key for k in resp.api_keys} >= {18, CREATE_TOPICS}
            assert took < 1.5, f"answered after {took:.2f} s: waited on the frozen controller"
        finally:
            await channel.close()
            for w in frozen_conns:
                w.close()
            frozen.close()
            await real.stop()

    run(main())
