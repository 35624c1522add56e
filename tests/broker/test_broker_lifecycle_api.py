"""BrokerRegistration (62) and BrokerHeartbeat (63) through the dispatcher, as encoded frames."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.broker_lifecycle import BrokerLifecycleApi
from broker.api.context import RequestContext
from broker.api.dispatcher import Dispatcher
from broker.api.listener_apis import NotEnabledOnListener
from broker.controller.cluster_control import ClusterControl
from broker.quorum.driver import NotLeaderError
from broker.security.acls import Acl, AclOperation, PatternType, PermissionType, ResourceType
from broker.security.authorizer import Authorizer
from protocol.build import build
from protocol.errors import ProtocolError
from protocol.registry import REGISTRY

from .test_cluster_control import CLUSTER, FakeCore, _core

REG, HB = 62, 63
BROKER = "User:broker"


class World:
    def __init__(self, *, active: bool = True, authorizer: Authorizer | None = None) -> None:
        self.core: FakeCore = _core()
        self.cc: ClusterControl | None = ClusterControl(self.core, CLUSTER, 9000)
        self.active = active
        self.now = 1000
        self.api = BrokerLifecycleApi(
            lambda: self.cc if self.active else None,
            lambda ctx: ctx.listener == "CONTROLLER",
            lambda: self.now,
            authorizer=lambda: authorizer,
        )
        self.dispatcher = Dispatcher(self.api.apis())
        self.corr = 0

    def call(
        self, key: int, version: int, data: dict[str, Any], listener: str = "CONTROLLER"
    ) -> Any:
        self.corr += 1
        body = build(REGISTRY.spec(key).request_type(version), data)
        frame = REGISTRY.encode_request(version, self.corr, "broker-1", body)[4:]

        def ctx(header: Any) -> RequestContext:
            return RequestContext(header, "c1", listener, "127.0.0.1", principal=BROKER)

        parts = asyncio.run(self.dispatcher.handle(ctx, memoryview(frame)))
        assert parts is not None
        corr, resp = REGISTRY.decode_response(key, version, b"".join(bytes(p) for p in parts))
        assert corr == self.corr
        return resp


def _registration(broker: int = 1, cluster: str = CLUSTER, **extra: Any) -> dict[str, Any]:
    return {
        "broker_id": broker,
        "cluster_id": cluster,
        "incarnation_id": uuid.UUID(int=broker),
        "listeners": [
            {"name": "PLAINTEXT", "host": "h", "port": 9092, "security_protocol": 0},
            {"name": "CONTROLLER", "host": "h", "port": 9093, "security_protocol": 0},
        ],
        "features": [
            {"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 26}
        ],
        "rack": "r1",
        **extra,
    }


def _heartbeat(epoch: int, offset: int, *, fence: bool = False, shut: bool = False) -> Any:
    return {
        "broker_id": 1,
        "broker_epoch": epoch,
        "current_metadata_offset": offset,
        "want_fence": fence,
        "want_shut_down": shut,
    }


def test_served_versions_are_kafka_41s() -> None:
    w = World()
    assert w.dispatcher.supported_versions()[REG] == (0, 4)
    assert w.dispatcher.supported_versions()[HB] == (0, 1)


@pytest.mark.parametrize(("reg_v", "hb_v"), [(0, 0), (4, 1)])
def test_register_then_heartbeat_until_unfenced(reg_v: int, hb_v: int) -> None:
    w = World()
    extra = {"log_dirs": [uuid.uuid4()], "previous_broker_epoch": 7} if reg_v == 4 else {}
    resp = w.call(REG, reg_v, _registration(**extra))
    assert resp.error_code == ErrorCode.none
    epoch = int(resp.broker_epoch)
    assert epoch == w.core.offset
    b = w.core.image.brokers[1]
    assert b.fenced and b.rack == "r1" and b.endpoint("CONTROLLER") is not None
    resp = w.call(HB, hb_v, _heartbeat(epoch, epoch - 1))
    assert resp.error_code == ErrorCode.none
    assert (resp.is_caught_up, resp.is_fenced, resp.should_shut_down) == (False, True, False)
    resp = w.call(HB, hb_v, _heartbeat(epoch, epoch))
    assert (resp.is_caught_up, resp.is_fenced, resp.should_shut_down) == (True, False, False)
    assert not w.core.image.brokers[1].fenced
    resp = w.call(HB, hb_v, _heartbeat(epoch, w.core.offset, shut=True))
    assert (resp.is_fenced, resp.should_shut_down) == (True, True)  # it led nothing


def test_registration_errors() -> None:
    w = World()
    resp = w.call(REG, 4, _registration(cluster="elsewhere"))
    assert (resp.error_code, resp.broker_epoch) == (ErrorCode.inconsistent_cluster_id, -1)
    assert w.call(REG, 4, _registration()).error_code == ErrorCode.none
    epoch = w.core.image.brokers[1].epoch
    w.call(HB, 1, _heartbeat(epoch, epoch))  # unfenced, session live
    other = _registration(incarnation_id=uuid.uuid4())
    resp = w.call(REG, 4, other)
    assert (resp.error_code, resp.broker_epoch) == (ErrorCode.duplicate_broker_registration, -1)


def test_stale_epoch_answers_the_schema_defaults() -> None:
    w = World()
    epoch = int(w.call(REG, 4, _registration()).broker_epoch)
    resp = w.call(HB, 1, _heartbeat(epoch + 1, epoch))
    assert resp.error_code == ErrorCode.stale_broker_epoch
    assert (resp.is_caught_up, resp.is_fenced, resp.should_shut_down) == (False, True, False)


def test_not_the_active_controller() -> None:
    w = World(active=False)
    resp = w.call(REG, 4, _registration())
    assert (resp.error_code, resp.broker_epoch) == (ErrorCode.not_controller, -1)
    assert w.call(HB, 1, _heartbeat(1, 1)).error_code == ErrorCode.not_controller
    assert not w.core.image.brokers


def test_leadership_lost_during_the_commit_is_not_controller() -> None:
    w = World()

    async def lost(records: Any) -> int:
        raise NotLeaderError(2, 5)

    w.core.commit = lost  # type: ignore[method-assign]
    assert w.call(REG, 4, _registration()).error_code == ErrorCode.not_controller


def test_on_another_listener_the_connection_closes() -> None:
    w = World()
    with pytest.raises(NotEnabledOnListener) as e:
        w.call(REG, 4, _registration(), listener="PLAINTEXT")
    assert isinstance(e.value, ProtocolError)  # what the server closes connections on
    assert "not enabled" in str(e.value)
    with pytest.raises(NotEnabledOnListener):
        w.call(HB, 1, _heartbeat(1, 1), listener="PLAINTEXT")
    assert not w.core.image.brokers


def test_cluster_action_is_required() -> None:
    acls: list[dict[int, Acl]] = [{}]  # a new mapping per change, as the image gives
    w = World(authorizer=Authorizer(lambda: acls[0]))
    resp = w.call(REG, 4, _registration())
    assert (resp.error_code, resp.broker_epoch) == (ErrorCode.cluster_authorization_failed, -1)
    assert w.call(HB, 1, _heartbeat(1, 1)).error_code == ErrorCode.cluster_authorization_failed
    acls[0] = {
        0: Acl(
            int(ResourceType.CLUSTER),
            "kafka-cluster",
            int(PatternType.LITERAL),
            BROKER,
            "*",
            int(AclOperation.CLUSTER_ACTION),
            int(PermissionType.ALLOW),
        )
    }
    assert w.call(REG, 4, _registration()).error_code == ErrorCode.none
